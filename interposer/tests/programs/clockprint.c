/* Prints CLOCK_MONOTONIC in ns: proves the clockshift shim is in effect. */
#include <stdio.h>
#include <time.h>

int main(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    printf("%lld\n", ts.tv_sec * 1000000000LL + ts.tv_nsec);
    return 0;
}
