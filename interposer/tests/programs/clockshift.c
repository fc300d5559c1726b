/* LD_PRELOAD shim that makes this process's CLOCK_MONOTONIC run CLOCKSHIFT_NS ahead
 * (or behind): a rank on "another host" with an unsynchronised clock. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

int clock_gettime(clockid_t id, struct timespec *ts)
{
    static int (*real)(clockid_t, struct timespec *);
    static long long shift;
    if (!real) {
        const char *s = getenv("CLOCKSHIFT_NS");
        shift = s ? atoll(s) : 0;
        real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    }
    int rc = real(id, ts);
    if (rc == 0 && (id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_RAW)) {
        long long ns = ts->tv_sec * 1000000000LL + ts->tv_nsec + shift;
        ts->tv_sec = ns / 1000000000LL;
        ts->tv_nsec = ns % 1000000000LL;
    }
    return rc;
}
