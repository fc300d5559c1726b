/* Cost of one clock_gettime(CLOCK_MONOTONIC) on this machine: the interposer takes two
 * per wrapped call, so this bounds how cheap a traced call can be here. */
#include <stdio.h>
#include <time.h>

int main(void)
{
    enum { N = 2000000 };
    struct timespec a, b, t;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < N; i++) clock_gettime(CLOCK_MONOTONIC, &t);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / N);
    return 0;
}
