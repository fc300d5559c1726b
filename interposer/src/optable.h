/* optable.h — the one open-addressing hash table (call sites, communicators, requests).
 *
 * MPS_OPTABLE(name, slot_t, first_cap) generates a typed table `name` of slot_t and its
 * static inline operations, so lookups in the hot path compile to the same probe loop a
 * hand-written table would (no call, no stride arithmetic). slot_t must have the fields
 * `uint64_t key` and `uint8_t used` (MPS_SLOT_EMPTY / _LIVE / _DEAD); the rest is the
 * caller's payload. Linear probing from mps_mix64(key); removal leaves a tombstone, so
 * every probe chain still ends at an empty slot, and the table is rebuilt before live
 * slots and tombstones together fill half of it. A key may be added more than once
 * (Open MPI shares one request handle between eager self-sends): _find returns the first
 * live slot of the key's chain, _next the ones after it.
 *
 *   slot_t *name_find(const name *t, uint64_t key)   first live slot with key, or NULL
 *   slot_t *name_next(const name *t, slot_t *s)      next live slot with s's key, or NULL
 *   slot_t *name_add(name *t, uint64_t key)          a new live slot, payload zeroed;
 *                                                     NULL when memory ran out
 *   void name_remove(name *t, slot_t *s)             tombstone
 *   void name_free(name *t)
 */
#ifndef MPISCOPE_OPTABLE_H
#define MPISCOPE_OPTABLE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { MPS_SLOT_EMPTY = 0, MPS_SLOT_LIVE = 1, MPS_SLOT_DEAD = 2 };

static inline uint64_t mps_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

#define MPS_OPTABLE(name, slot_t, first_cap)                                                \
    typedef struct {                                                                        \
        slot_t *slot;                                                                       \
        uint64_t cap, n, dead; /* cap: 0 or a power of two; n: live slots */                \
    } name;                                                                                 \
                                                                                            \
    static inline slot_t *name##_find(const name *t, uint64_t key)                          \
    {                                                                                       \
        if (!t->cap) return NULL;                                                           \
        for (uint64_t j = mps_mix64(key) & (t->cap - 1); t->slot[j].used;                   \
             j = (j + 1) & (t->cap - 1))                                                    \
            if (t->slot[j].used == MPS_SLOT_LIVE && t->slot[j].key == key)                  \
                return &t->slot[j];                                                         \
        return NULL;                                                                        \
    }                                                                                       \
                                                                                            \
    static inline slot_t *name##_next(const name *t, slot_t *s)                             \
    {                                                                                       \
        for (uint64_t j = ((uint64_t)(s - t->slot) + 1) & (t->cap - 1); t->slot[j].used;    \
             j = (j + 1) & (t->cap - 1))                                                    \
            if (t->slot[j].used == MPS_SLOT_LIVE && t->slot[j].key == s->key)               \
                return &t->slot[j];                                                         \
        return NULL;                                                                        \
    }                                                                                       \
                                                                                            \
    /* rare (the table doubles): out of line */                                             \
    static __attribute__((noinline, cold, unused)) int name##_rebuild(name *t)              \
    {                                                                                       \
        uint64_t cap = t->cap ? t->cap : (first_cap);                                       \
        while ((t->n + 1) * 4 >= cap) cap *= 2;                                             \
        slot_t *fresh = calloc(cap, sizeof *fresh);                                         \
        if (!fresh) return -1;                                                              \
        for (uint64_t i = 0; i < t->cap; i++) {                                             \
            if (t->slot[i].used != MPS_SLOT_LIVE) continue;                                 \
            uint64_t j = mps_mix64(t->slot[i].key) & (cap - 1);                             \
            while (fresh[j].used) j = (j + 1) & (cap - 1);                                  \
            fresh[j] = t->slot[i];                                                          \
        }                                                                                   \
        free(t->slot);                                                                      \
        t->slot = fresh;                                                                    \
        t->cap = cap;                                                                       \
        t->dead = 0;                                                                        \
        return 0;                                                                           \
    }                                                                                       \
                                                                                            \
    static inline slot_t *name##_add(name *t, uint64_t key)                                 \
    {                                                                                       \
        if ((t->n + t->dead + 1) * 2 >= t->cap && name##_rebuild(t) != 0) return NULL;      \
        uint64_t j = mps_mix64(key) & (t->cap - 1);                                         \
        while (t->slot[j].used == MPS_SLOT_LIVE) j = (j + 1) & (t->cap - 1);                \
        if (t->slot[j].used == MPS_SLOT_DEAD) t->dead--;                                    \
        memset(&t->slot[j], 0, sizeof t->slot[j]);                                          \
        t->slot[j].used = MPS_SLOT_LIVE;                                                    \
        t->slot[j].key = key;                                                               \
        t->n++;                                                                             \
        return &t->slot[j];                                                                 \
    }                                                                                       \
                                                                                            \
    static inline void name##_remove(name *t, slot_t *s)                                    \
    {                                                                                       \
        s->used = MPS_SLOT_DEAD;                                                            \
        t->n--;                                                                             \
        t->dead++;                                                                          \
    }                                                                                       \
                                                                                            \
    static inline void name##_free(name *t)                                                 \
    {                                                                                       \
        free(t->slot);                                                                      \
        memset(t, 0, sizeof *t);                                                            \
    }

#endif
