/* communicators.c — communicators: a global ref for each new one, its definition
 * (members, parent, name) kept and logged, handles forgotten when freed. */
#include "runtime.h"

#include <stdio.h>
#include <stdlib.h>

struct mps_communicators mps_comms = {.lock = PTHREAD_RWLOCK_INITIALIZER};

/* Room for one more definition at defs[ndefs] (not yet counted), or NULL. */
comm_def *mps_comm_def_slot(void)
{
    if (mps_comms.ndefs == mps_comms.defs_cap) {
        uint32_t cap = mps_comms.defs_cap ? mps_comms.defs_cap * 2 : 16;
        comm_def *d = realloc(mps_comms.defs, cap * sizeof *d);
        if (!d) return NULL;
        mps_comms.defs = d;
        mps_comms.defs_cap = cap;
    }
    return &mps_comms.defs[mps_comms.ndefs];
}

/* One communicator definition as int32 words at p; returns the end. */
int32_t *mps_serialize_comm(const comm_def *d, int32_t *p)
{
    *p++ = (int32_t)d->ref;
    *p++ = (int32_t)d->parent;
    *p++ = d->size;
    int nw = COMM_NAME_WORDS(d->name) + (d->inter_a > 0);
    *p++ = nw;
    memcpy(p, d->members, (size_t)d->size * sizeof *p);
    p += d->size;
    memset(p, 0, (size_t)nw * sizeof *p);
    memcpy(p, d->name, strlen(d->name));
    if (d->inter_a > 0) p[nw - 1] = d->inter_a;
    return p + nw;
}

/* Communicator definitions (all this rank keeps, or those it created), serialized as
 * int32 words. */
int32_t *mps_serialize_comms(int all, int *nwords)
{
    int len = 0;
    const comm_def *defs = mps_comms.defs;
    for (uint32_t i = 0; i < mps_comms.ndefs; i++)
        if (all || defs[i].creator)
            len += 4 + defs[i].size + COMM_NAME_WORDS(defs[i].name) + (defs[i].inter_a > 0);
    int32_t *mine = malloc((size_t)(len ? len : 1) * sizeof *mine), *p = mine;
    for (uint32_t i = 0; i < mps_comms.ndefs; i++)
        if (all || defs[i].creator) p = mps_serialize_comm(&defs[i], p);
    *nwords = len;
    return mine;
}

/* A new communicator goes to the crash-safe log as salvage() would serialize it. */
static void live_comm(const comm_def *d)
{
    if (!mps_live_on()) return;
    int32_t *w = malloc((size_t)(5 + d->size + COMM_NAME_WORDS(d->name)) * sizeof *w);
    if (!w) return;
    size_t n = (size_t)(mps_serialize_comm(d, w) - w);
    mps_live_record(MPS_LIVE_COMM, w, n * sizeof *w, NULL, 0);
    free(w);
}

/* World ranks of a group's members, in its rank order (n of them), or NULL. */
static int32_t *world_ranks(MPI_Group g, int *n)
{
    PMPI_Group_size(g, n);
    int32_t *w = malloc((size_t)(*n ? *n : 1) * sizeof *w);
    int *idx = malloc((size_t)(*n ? *n : 1) * sizeof *idx);
    if (w && idx) {
        MPI_Group wg;
        PMPI_Comm_group(MPI_COMM_WORLD, &wg);
        for (int i = 0; i < *n; i++) idx[i] = i;
        PMPI_Group_translate_ranks(g, *n, idx, wg, w);
        PMPI_Group_free(&wg);
    } else {
        free(w);
        w = NULL;
    }
    free(idx);
    return w;
}

/* Handle -> ref, under the lock comm_ref's readers take with threads. Locked (LOCK). */
static void remember(const MPI_Comm *comm, uint32_t ref)
{
    if (mps_rt.mt) pthread_rwlock_wrlock(&mps_comms.lock);
    comm_slot *s = comm_table_add(&mps_comms.tab, HANDLE_KEY(*comm));
    if (s) s->ref = ref;
    if (mps_rt.mt) pthread_rwlock_unlock(&mps_comms.lock);
}

/* An intercommunicator: both groups must agree on one id, and no intracommunicator spans
 * them (a Bcast is not possible). Each group's rank 0 proposes an id of its own; two
 * Allreduce(MAX) on the intercommunicator (each rank receives the remote group's result)
 * give every rank the remote proposal, then its own; the smaller wins, and its group is
 * the definition's group A (events name peers by their rank in the remote group, so a
 * reader needs both groups: OTF2's InterComm definition). Collective over both groups,
 * as every intercommunicator constructor is. */
static void inter_created(const MPI_Comm *newcomm)
{
    int lrank = 0;
    PMPI_Comm_rank(*newcomm, &lrank);
    uint32_t mine = 0, remote = 0, own = 0;
    if (lrank == 0)
        mine = 2 + (uint32_t)mps_job.rank * MPS_COMM_REF_SPAN +
               (mps_comms.counter++ % MPS_COMM_REF_SPAN);
    PMPI_Allreduce(&mine, &remote, 1, MPI_UINT32_T, MPI_MAX, *newcomm);
    PMPI_Allreduce(&remote, &own, 1, MPI_UINT32_T, MPI_MAX, *newcomm);
    int side_a = own < remote;
    uint32_t ref = side_a ? own : remote;
    MPI_Group lg, rg;
    PMPI_Comm_group(*newcomm, &lg);
    PMPI_Comm_remote_group(*newcomm, &rg);
    int nl = 0, nr = 0;
    int32_t *l = world_ranks(lg, &nl), *r = world_ranks(rg, &nr);
    PMPI_Group_free(&lg);
    PMPI_Group_free(&rg);
    LOCK();
    remember(newcomm, ref);
    comm_def *d = l && r ? mps_comm_def_slot() : NULL;
    if (d) {
        d->ref = ref;
        d->parent = OTF2_UNDEFINED_COMM; /* no communicator holds both groups */
        d->size = nl + nr;
        d->inter_a = side_a ? nl : nr;
        d->creator = side_a && lrank == 0;
        d->name[0] = 0;
        d->members = malloc((size_t)(nl + nr) * sizeof(int32_t));
        if (d->members) {
            memcpy(d->members, side_a ? l : r, (size_t)d->inter_a * sizeof(int32_t));
            memcpy(d->members + d->inter_a, side_a ? r : l,
                   (size_t)(d->size - d->inter_a) * sizeof(int32_t));
            mps_comms.ndefs++;
            live_comm(d);
        }
    }
    UNLOCK();
    free(l);
    free(r);
}

void mps_comm_created(MPI_Comm parent, const MPI_Comm *newcomm)
{
    if (mps_rt.state != 1 || *newcomm == MPI_COMM_NULL) return;
    int inter = 0;
    PMPI_Comm_test_inter(*newcomm, &inter);
    if (inter) {
        inter_created(newcomm);
        return;
    }
    int crank, csize;
    PMPI_Comm_rank(*newcomm, &crank);
    PMPI_Comm_size(*newcomm, &csize);
    /* The new communicator's rank 0 chooses a globally unique ref and tells the others on
     * the new communicator itself: every constructor but Comm_idup returns a usable
     * communicator to exactly its members, all inside the constructor, so this Bcast is
     * the first collective on it everywhere (Comm_create_group, collective only over the
     * group, included: the group is the new communicator). */
    uint32_t ref = 0;
    if (crank == 0)
        ref = 2 + (uint32_t)mps_job.rank * MPS_COMM_REF_SPAN +
              (__atomic_fetch_add(&mps_comms.counter, 1, __ATOMIC_RELAXED) % MPS_COMM_REF_SPAN);
    PMPI_Bcast(&ref, 1, MPI_UINT32_T, 0, *newcomm);
    LOCK();
    remember(newcomm, ref);
    /* every member keeps the definition (for a salvaged trace); only the creator's is
     * gathered */
    comm_def *d = mps_comm_def_slot();
    if (d) {
        d->ref = ref;
        d->parent = comm_ref(parent);
        d->size = csize;
        d->creator = crank == 0;
        d->inter_a = 0;
        d->name[0] = 0;
        d->members = malloc((size_t)csize * sizeof(int32_t));
        if (d->members) {
            MPI_Group g, wg;
            int *idx = malloc((size_t)csize * sizeof(int));
            PMPI_Comm_group(*newcomm, &g);
            PMPI_Comm_group(MPI_COMM_WORLD, &wg);
            if (idx) {
                for (int i = 0; i < csize; i++) idx[i] = i;
                PMPI_Group_translate_ranks(g, csize, idx, wg, d->members);
                free(idx);
                mps_comms.ndefs++;
                live_comm(d);
            } else {
                free(d->members);
            }
            PMPI_Group_free(&g);
            PMPI_Group_free(&wg);
        }
    }
    UNLOCK();
}

/* The definition of a communicator whose members are `group`'s, in its rank order. Locked. */
static void keep_def(uint32_t ref, uint32_t parent, MPI_Group g, int creator)
{
    int csize = 0;
    PMPI_Group_size(g, &csize);
    comm_def *d = mps_comm_def_slot();
    if (!d) return;
    d->ref = ref;
    d->parent = parent;
    d->size = csize;
    d->creator = creator;
    d->inter_a = 0;
    d->name[0] = 0;
    d->members = malloc((size_t)(csize ? csize : 1) * sizeof(int32_t));
    int *idx = malloc((size_t)(csize ? csize : 1) * sizeof(int));
    if (d->members && idx) {
        MPI_Group wg;
        PMPI_Comm_group(MPI_COMM_WORLD, &wg);
        for (int i = 0; i < csize; i++) idx[i] = i;
        PMPI_Group_translate_ranks(g, csize, idx, wg, d->members);
        PMPI_Group_free(&wg);
        mps_comms.ndefs++;
        live_comm(d);
    } else {
        free(d->members);
    }
    free(idx);
}

/* MPI_Comm_idup: the new communicator cannot be used (for a Bcast of its id, as
 * mps_comm_created does) before the request completes, and a blocking call at completion
 * could deadlock a program that completes it with MPI_Test while its peers still compute.
 * So every member derives the id from what all members of the parent share without
 * communicating: the parent's id and how many MPI_Comm_idup the parent has seen (MPI
 * orders a communicator's collective calls alike on all its members). FNV-1a of the pair,
 * with the top bit set: disjoint from ids handed out by a creator rank (those are below
 * 2^31 up to 2^19 ranks); two idup'd communicators of one job collide with probability
 * about k^2 / 2^32 for k of them. The members are the parent's, in its order; the parent's
 * rank 0 contributes the definition. */
void mps_comm_idup(MPI_Comm parent, const MPI_Comm *newcomm)
{
    if (mps_rt.state != 1 || *newcomm == MPI_COMM_NULL) return;
    int inter = 0;
    PMPI_Comm_test_inter(parent, &inter);
    if (inter) return;
    if (mps_comm_size(parent) == 1) {
        /* a one-rank parent (MPI_COMM_SELF, or any): its id may be the same on every rank
         * (COMM_SELF's is), so the pair would be too; the one member hands out an id of
         * its own, as a creator rank does, with nobody to tell */
        uint32_t ref = 2 + (uint32_t)mps_job.rank * MPS_COMM_REF_SPAN +
                       (__atomic_fetch_add(&mps_comms.counter, 1, __ATOMIC_RELAXED) %
                        MPS_COMM_REF_SPAN);
        LOCK();
        remember(newcomm, ref);
        MPI_Group g;
        PMPI_Comm_group(parent, &g);
        keep_def(ref, comm_ref(parent), g, 1);
        PMPI_Group_free(&g);
        UNLOCK();
        return;
    }
    LOCK();
    uint32_t pref = comm_ref(parent), seq = 0, i = 0;
    while (i < mps_comms.nidups && mps_comms.idups[i].ref != pref) i++;
    if (i == mps_comms.nidups && mps_comms.nidups == mps_comms.idups_cap) {
        uint32_t cap = mps_comms.idups_cap ? 2 * mps_comms.idups_cap : 8;
        void *p = realloc(mps_comms.idups, cap * sizeof *mps_comms.idups);
        if (p) { mps_comms.idups = p; mps_comms.idups_cap = cap; }
    }
    if (i < mps_comms.idups_cap) {
        if (i == mps_comms.nidups) {
            mps_comms.idups[i].ref = pref;
            mps_comms.idups[i].n = 0;
            mps_comms.nidups++;
        }
        seq = mps_comms.idups[i].n++;
        uint32_t key[2] = {pref, seq};
        uint32_t h = 2166136261u; /* FNV-1a 32 */
        for (size_t k = 0; k < sizeof key; k++) {
            h ^= ((const unsigned char *)key)[k];
            h *= 16777619u;
        }
        uint32_t ref = 0x80000000u | h;
        if (ref == OTF2_UNDEFINED_COMM) ref--;
        remember(newcomm, ref);
        MPI_Group g;
        PMPI_Comm_group(parent, &g);
        keep_def(ref, pref, g, mps_comm_rank(parent) == 0);
        PMPI_Group_free(&g);
    }
    UNLOCK();
}

void mps_comm_named(MPI_Comm comm, const char *name)
{
    uint32_t ref;
    if (mps_rt.state != 1 || !name || !comm_lookup(comm, &ref)) return;
    LOCK();
    for (uint32_t i = 0; i < mps_comms.ndefs; i++)
        if (mps_comms.defs[i].ref == ref)
            snprintf(mps_comms.defs[i].name, sizeof mps_comms.defs[i].name, "%s", name);
    mps_live_record(MPS_LIVE_COMM_NAME, &ref, sizeof ref, name, strlen(name));
    UNLOCK();
}

void mps_comm_freed(const MPI_Comm *comm)
{
    if (mps_rt.state != 1 || !mps_comms.tab.cap) return;
    if (mps_rt.mt) pthread_rwlock_wrlock(&mps_comms.lock);
    comm_slot *s = comm_table_find(&mps_comms.tab, HANDLE_KEY(*comm));
    if (s) comm_table_remove(&mps_comms.tab, s);
    if (mps_rt.mt) pthread_rwlock_unlock(&mps_comms.lock);
}

int mps_comm_size(MPI_Comm comm)
{
    int n = 0;
    PMPI_Comm_size(comm, &n);
    return n;
}

int mps_comm_peers(MPI_Comm comm)
{
    int inter = 0, n = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) PMPI_Comm_remote_size(comm, &n);
    else PMPI_Comm_size(comm, &n);
    return n;
}

int mps_comm_rank(MPI_Comm comm)
{
    int r = 0;
    PMPI_Comm_rank(comm, &r);
    return r;
}

int mps_coll_role(MPI_Comm comm, int root)
{
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) return root == MPI_ROOT ? MPS_ROOT_ONLY : root == MPI_PROC_NULL ? MPS_IDLE : MPS_LEAF;
    return mps_comm_rank(comm) == root ? MPS_ROOT : MPS_LEAF;
}
