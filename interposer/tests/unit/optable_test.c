/* Unit test of src/optable.h: random adds, removes and lookups checked against a plain
 * array, plus the cases the runtime relies on (repeated keys, tombstones, growth).
 * Prints "ok" and exits 0, or names the first failed check and exits 1. */
#include "optable.h"

#include <stdio.h>

typedef struct {
    uint64_t key;
    uint64_t value;
    uint8_t used;
} slot;
MPS_OPTABLE(table, slot, 8)

#define CHECK(c)                                                         \
    do {                                                                 \
        if (!(c)) {                                                      \
            fprintf(stderr, "optable_test.c:%d: %s\n", __LINE__, #c);    \
            return 1;                                                    \
        }                                                                \
    } while (0)

/* the invariants every operation keeps */
static int sound(const table *t)
{
    uint64_t live = 0, dead = 0, empty = 0;
    for (uint64_t i = 0; i < t->cap; i++) {
        live += t->slot[i].used == MPS_SLOT_LIVE;
        dead += t->slot[i].used == MPS_SLOT_DEAD;
        empty += t->slot[i].used == MPS_SLOT_EMPTY;
    }
    CHECK((t->cap & (t->cap - 1)) == 0);
    CHECK(live == t->n && dead == t->dead);
    CHECK(empty > 0); /* every probe chain ends */
    CHECK((t->n + t->dead) * 2 < t->cap);
    return 0;
}

static uint64_t rng = 88172645463325252ULL;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(void)
{
    table t = {0};
    CHECK(table_find(&t, 42) == NULL); /* empty, no memory yet */

    /* one key added twice (Open MPI's shared self-send request): both found, in turn */
    slot *a = table_add(&t, 7), *b = table_add(&t, 7);
    CHECK(a && b && a != b);
    a->value = 1;
    b->value = 2;
    slot *first = table_find(&t, 7), *second = first ? table_next(&t, first) : NULL;
    CHECK(first && second && table_next(&t, second) == NULL);
    CHECK(first->value + second->value == 3);
    table_remove(&t, first);
    CHECK(table_find(&t, 7) == second && t.n == 1 && t.dead == 1);
    table_remove(&t, second);
    CHECK(table_find(&t, 7) == NULL);
    CHECK(sound(&t) == 0);

    /* a new slot's payload is zeroed, whatever a tombstone there held */
    slot *z = table_add(&t, 7);
    CHECK(z && z->value == 0 && z->key == 7 && z->used == MPS_SLOT_LIVE);
    table_remove(&t, z);

    /* random operations against a reference: keys 0..N-1 drawn with few bits set, so
     * probe chains collide and run through tombstones */
    enum { N = 2048, OPS = 200000 };
    static uint64_t ref[N]; /* value + 1 while the key is in the table, else 0 */
    for (int op = 0; op < OPS; op++) {
        uint64_t k = next() % N, key = k << 12;
        slot *s = table_find(&t, key);
        CHECK((s != NULL) == (ref[k] != 0));
        if (s) CHECK(s->value + 1 == ref[k] && table_next(&t, s) == NULL);
        if (s && next() % 2) {
            table_remove(&t, s);
            ref[k] = 0;
        } else if (!s) {
            s = table_add(&t, key);
            CHECK(s != NULL);
            s->value = (uint64_t)op;
            ref[k] = (uint64_t)op + 1;
        }
        if (op % 1000 == 0) CHECK(sound(&t) == 0);
    }
    uint64_t in = 0;
    for (int k = 0; k < N; k++) in += ref[k] != 0;
    CHECK(in == t.n);
    CHECK(sound(&t) == 0);

    /* growth keeps every entry */
    table_free(&t);
    CHECK(t.cap == 0 && t.n == 0);
    for (uint64_t k = 0; k < 100000; k++) {
        slot *s = table_add(&t, k * 0x9e3779b97f4a7c15ULL);
        CHECK(s != NULL);
        s->value = k;
    }
    for (uint64_t k = 0; k < 100000; k++) {
        slot *s = table_find(&t, k * 0x9e3779b97f4a7c15ULL);
        CHECK(s && s->value == k);
    }
    CHECK(sound(&t) == 0);
    table_free(&t);
    printf("ok\n");
    return 0;
}
