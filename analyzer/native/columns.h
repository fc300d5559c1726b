/* Growable columns in fresh memory: the tables' storage of the native reader (reader.c)
 * and of the floor bench/reader measures it against (otf2-decode.c --write), one
 * implementation so the floor grows and populates its memory exactly as the reader does.
 * Every column is a plain malloc'd array. Include after defining _GNU_SOURCE. */
#ifndef MPISCOPE_COLUMNS_H
#define MPISCOPE_COLUMNS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef struct {
    void *p;
    uint32_t size;
} col_t;

typedef struct {
    uint64_t n, cap, ready; /* rows used, allocated, known to be backed by memory */
    int ncols;
    col_t *cols;
} table_t;

static inline int table_reserve(table_t *t, uint64_t need)
{
    if (need <= t->cap) return 0;
    /* a count from a damaged file must fail here, not wrap the doubling below */
    if (need > (UINT64_MAX >> 8)) return -1;
    uint64_t nc = t->cap ? t->cap : 1024;
    while (nc < need) nc *= 2;
    for (int i = 0; i < t->ncols; i++)
        if (nc > SIZE_MAX / t->cols[i].size) return -1;
    for (int i = 0; i < t->ncols; i++) {
        /* large blocks are mmap'd: realloc remaps instead of copying, and pages never
         * written are never resident, so generous capacity costs no memory */
        size_t bytes = nc * t->cols[i].size;
        void *p = realloc(t->cols[i].p, bytes);
        if (!p) return -1;
        t->cols[i].p = p;
    }
    t->cap = nc;
    t->ready = 0; /* realloc may have moved the columns */
    return 0;
}

#define READY_ROWS 65536
/* Fault in the pages of the next rows of every column in one system call each: taking
 * the page faults one by one, as the columns fill, costs more than the zeroing itself. */
static inline void table_prefault(table_t *t, uint64_t need)
{
    uint64_t upto = need + READY_ROWS < t->cap ? need + READY_ROWS : t->cap;
    for (int i = 0; i < t->ncols; i++) {
        uintptr_t a = (uintptr_t)t->cols[i].p + t->ready * t->cols[i].size;
        uintptr_t b = (uintptr_t)t->cols[i].p + upto * t->cols[i].size;
        a &= ~(uintptr_t)4095;
        if (b > a) madvise((void *)a, b - a, MADV_POPULATE_WRITE);
    }
    t->ready = upto;
}

static inline int table_room(table_t *t, uint64_t need)
{
    if (need > t->cap && table_reserve(t, need)) return -1;
    if (need > t->ready) table_prefault(t, need);
    return 0;
}

static inline void table_init(table_t *t, int ncols, const uint32_t *sizes)
{
    memset(t, 0, sizeof *t);
    t->ncols = ncols;
    t->cols = calloc((size_t)ncols, sizeof *t->cols);
    for (int i = 0; t->cols && i < ncols; i++) t->cols[i].size = sizes[i];
}

static inline void table_free(table_t *t)
{
    for (int i = 0; t->cols && i < t->ncols; i++) free(t->cols[i].p);
    free(t->cols);
    memset(t, 0, sizeof *t);
}

#endif
