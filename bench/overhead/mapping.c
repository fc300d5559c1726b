/* What the crash-safe live log could cost the hot path: 8-byte stores into a 32 MiB buffer
 * that is anonymous memory (MAP_PRIVATE, huge pages where allowed) vs a window of a file
 * reserved with fallocate (MAP_SHARED), both faulted in with MADV_POPULATE_WRITE first, as
 * evbuf.c does. Prints "anon_ns file_ns" per stored word (median of 5 passes each, fresh
 * mapping every pass). Usage: mapping DIR (where the file goes; the trace's file system).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define LEN (32u << 20)
#define PASSES 5

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ns per word stored into a fresh, populated mapping; -1 if it cannot be made */
static double pass(const char *file)
{
    void *p;
    int fd = -1;
    if (file) {
        fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || fallocate(fd, 0, 0, LEN) != 0) return -1;
        p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    } else {
        p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    if (p == MAP_FAILED) return -1;
    madvise(p, LEN, MADV_HUGEPAGE);
#ifdef MADV_POPULATE_WRITE
    madvise(p, LEN, MADV_POPULATE_WRITE);
#endif
    volatile uint64_t *w = p;
    size_t n = LEN / sizeof *w;
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++) w[i] = i | 1;
    double per = (double)(now_ns() - t0) / (double)n;
    munmap(p, LEN);
    if (fd >= 0) {
        close(fd);
        unlink(file);
    }
    return per;
}

int main(int argc, char **argv)
{
    char file[4096];
    snprintf(file, sizeof file, "%s/mapping-bench.events", argc > 1 ? argv[1] : ".");
    double anon[PASSES], mapped[PASSES];
    for (int i = 0; i < PASSES; i++) {
        anon[i] = pass(NULL);
        mapped[i] = pass(file);
    }
    qsort(anon, PASSES, sizeof *anon, cmp);
    qsort(mapped, PASSES, sizeof *mapped, cmp);
    printf("%.3f %.3f\n", anon[PASSES / 2], mapped[PASSES / 2]);
    return 0;
}
