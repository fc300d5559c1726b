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
    int nw = COMM_NAME_WORDS(d->name);
    *p++ = nw;
    memcpy(p, d->members, (size_t)d->size * sizeof *p);
    p += d->size;
    memset(p, 0, (size_t)nw * sizeof *p);
    memcpy(p, d->name, strlen(d->name));
    return p + nw;
}

/* Communicator definitions (all this rank keeps, or those it created), serialized as
 * int32 words. */
int32_t *mps_serialize_comms(int all, int *nwords)
{
    int len = 0;
    const comm_def *defs = mps_comms.defs;
    for (uint32_t i = 0; i < mps_comms.ndefs; i++)
        if (all || defs[i].creator) len += 4 + defs[i].size + COMM_NAME_WORDS(defs[i].name);
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
    int32_t *w = malloc((size_t)(4 + d->size + COMM_NAME_WORDS(d->name)) * sizeof *w);
    if (!w) return;
    size_t n = (size_t)(mps_serialize_comm(d, w) - w);
    mps_live_record(MPS_LIVE_COMM, w, n * sizeof *w, NULL, 0);
    free(w);
}

void mps_comm_created(MPI_Comm parent, const MPI_Comm *newcomm)
{
    if (mps_rt.state != 1 || *newcomm == MPI_COMM_NULL) return;
    int inter = 0;
    PMPI_Comm_test_inter(*newcomm, &inter);
    if (inter) return; /* intercommunicators are not tracked (events name no comm) */
    int crank, csize;
    PMPI_Comm_rank(*newcomm, &crank);
    PMPI_Comm_size(*newcomm, &csize);
    /* The new communicator's rank 0 chooses a globally unique ref and tells the others. */
    uint32_t ref = 0;
    if (crank == 0)
        ref = 2 + (uint32_t)mps_job.rank * MPS_COMM_REF_SPAN +
              (__atomic_fetch_add(&mps_comms.counter, 1, __ATOMIC_RELAXED) % MPS_COMM_REF_SPAN);
    PMPI_Bcast(&ref, 1, MPI_UINT32_T, 0, *newcomm);
    LOCK();
    if (mps_rt.mt) pthread_rwlock_wrlock(&mps_comms.lock);
    comm_slot *s = comm_table_add(&mps_comms.tab, HANDLE_KEY(*newcomm));
    if (s) s->ref = ref;
    if (mps_rt.mt) pthread_rwlock_unlock(&mps_comms.lock);
    /* every member keeps the definition (for a salvaged trace); only the creator's is
     * gathered */
    comm_def *d = mps_comm_def_slot();
    if (d) {
        d->ref = ref;
        d->parent = comm_ref(parent);
        d->size = csize;
        d->creator = crank == 0;
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
