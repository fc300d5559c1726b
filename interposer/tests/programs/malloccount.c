/* LD_PRELOAD shim counting malloc/calloc/realloc calls of a process; at exit it writes
 * the count to $MALLOCCOUNT_DIR/<pid>. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

static unsigned long count;

void *malloc(size_t n) { __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED); return __libc_malloc(n); }
void *calloc(size_t n, size_t m) { __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED); return __libc_calloc(n, m); }
void *realloc(void *p, size_t n) { __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED); return __libc_realloc(p, n); }

__attribute__((destructor)) static void report(void)
{
    const char *dir = getenv("MALLOCCOUNT_DIR");
    if (!dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%d", dir, (int)getpid());
    FILE *f = fopen(path, "w");
    if (f) { fprintf(f, "%lu\n", count); fclose(f); }
}
