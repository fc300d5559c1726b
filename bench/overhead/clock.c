/* Cost of one clock read on this machine, clock_gettime(CLOCK_MONOTONIC) and rdtsc:
 * the interposer takes two per wrapped call (rdtsc where the kernel's clocksource is the
 * TSC), so this bounds how cheap a traced call can be here. Prints "<gettime> <rdtsc>". */
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

static double ns_since(const struct timespec *a)
{
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (b.tv_sec - a->tv_sec) * 1e9 + (b.tv_nsec - a->tv_nsec);
}

int main(void)
{
    enum { N = 2000000 };
    struct timespec a, t;
    volatile uint64_t sink = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < N; i++) clock_gettime(CLOCK_MONOTONIC, &t);
    double gettime = ns_since(&a) / N;
    double tsc = -1;
#if defined(__x86_64__) || defined(__i386__)
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < N; i++) sink += __rdtsc();
    tsc = ns_since(&a) / N;
#endif
    printf("%.1f %.1f\n", gettime, tsc);
    return (int)(sink & 0);
}
