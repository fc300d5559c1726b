/* rma.c — one-sided communication: windows (an RmaWin definition each, one ref for all
 * its ranks), RMA operations with their bytes and matching ids, and synchronisation.
 *
 * Completion: an operation stays pending on its window until a call completes it, and
 * gets exactly one completion record there: RmaOpCompleteRemote in a call that completes
 * it at the target too (fence, Win_complete, unlock, unlock_all, flush, flush_all),
 * RmaOpCompleteBlocking in flush_local(_all) (complete at the origin only), and for a
 * request-based operation (Rput, …) RmaOpCompleteNonBlocking in the Wait/Test that
 * completes its request, if no synchronisation completed it before. */
#include "runtime.h"

#include <stdio.h>
#include <stdlib.h>

struct pending {
    uint64_t id;
    int32_t target;
};

struct mps_win {
    uint32_t ref;
    uint32_t start_group, post_group; /* group refs of the access / exposure epoch */
    struct pending *ops;
    uint32_t nops, cap;
};

typedef struct {
    uint64_t key; /* the MPI_Win handle's bits */
    struct mps_win *w;
    uint8_t used;
} win_slot;
MPS_OPTABLE(win_table, win_slot, 16)

static struct {
    win_table tab;
    uint64_t next_id; /* matching ids, unique on this rank */
} rma;

static const uint32_t ALL = OTF2_UNDEFINED_UINT32; /* remote of lock_all, flush_all, … */
#define SYNC_ALL (OTF2_RMA_SYNC_LEVEL_PROCESS | OTF2_RMA_SYNC_LEVEL_MEMORY)

static struct mps_win *win_of(MPI_Win win)
{
    win_slot *s = win_table_find(&rma.tab, HANDLE_KEY(win));
    return s ? s->w : NULL;
}

static int on(void) { return !tl_skip && mps_rt.state == 1; }

void mps_win_created(MPI_Comm comm, const MPI_Win *win)
{
    if (mps_rt.state != 1 || *win == MPI_WIN_NULL) return;
    /* the window's rank 0 chooses its ref and tells the others (creation is collective) */
    int crank = 0;
    PMPI_Comm_rank(comm, &crank);
    uint32_t ref = 0;
    if (crank == 0) {
        LOCK();
        ref = mps_obj_new_ref();
        UNLOCK();
    }
    PMPI_Bcast(&ref, 1, MPI_UINT32_T, 0, comm);
    char name[MPI_MAX_OBJECT_NAME] = "";
    int len = 0;
    PMPI_Win_get_name(*win, name, &len);
    if (!name[0]) snprintf(name, sizeof name, "MPI window");
    struct mps_win *w = calloc(1, sizeof *w);
    if (!w) return;
    w->ref = ref;
    w->start_group = w->post_group = OTF2_UNDEFINED_GROUP;
    LOCK();
    win_slot *s = win_table_add(&rma.tab, HANDLE_KEY(*win));
    if (s) s->w = w;
    else free(w);
    /* every member keeps the definition (for a salvaged trace); rank 0's is gathered */
    mps_obj_add(MPS_OBJ_WIN, ref, comm_ref(comm), 0, name, strlen(name) + 1, crank == 0);
    if (s && on()) ev(MPS_EV_RMA_WIN, 0, 0, ref, 0);
    UNLOCK();
}

void mps_win_freed(MPI_Win saved)
{
    if (mps_rt.state != 1) return;
    LOCK();
    win_slot *s = win_table_find(&rma.tab, HANDLE_KEY(saved));
    if (s) {
        if (on()) ev(MPS_EV_RMA_WIN, 1, 0, s->w->ref, 0);
        free(s->w->ops);
        free(s->w);
        win_table_remove(&rma.tab, s);
    }
    UNLOCK();
}

/* Complete the pending operations on `target` (ALL: every one) with record kind `how`
 * (0 blocking, 1 non-blocking, 2 remote); id != 0: only that operation. */
static void complete_ops(struct mps_win *w, uint32_t target, unsigned how, uint64_t id)
{
    uint32_t keep = 0;
    for (uint32_t i = 0; i < w->nops; i++) {
        struct pending *p = &w->ops[i];
        int hit = id ? p->id == id : target == ALL || (uint32_t)p->target == target;
        if (hit) ev(MPS_EV_RMA_DONE, how, 0, w->ref, 1)[0] = p->id;
        else w->ops[keep++] = *p;
    }
    w->nops = keep;
}

void mps_rma_op(enum mps_rma_kind kind, MPI_Win win, int target, uint64_t sent,
                uint64_t recvd, const MPI_Request *req)
{
    if (!on() || target == MPI_PROC_NULL) return;
    static const unsigned ops[] = {
        [MPS_RMA_PUT] = 0, [MPS_RMA_GET] = 1,
        [MPS_RMA_ACC] = 16 + OTF2_RMA_ATOMIC_TYPE_ACCUMULATE,
        [MPS_RMA_GET_ACC] = 16 + OTF2_RMA_ATOMIC_TYPE_FETCH_AND_ACCUMULATE,
        [MPS_RMA_FOP] = 16 + OTF2_RMA_ATOMIC_TYPE_FETCH_AND_ACCUMULATE,
        [MPS_RMA_CAS] = 16 + OTF2_RMA_ATOMIC_TYPE_COMPARE_AND_SWAP,
    };
    LOCK();
    struct mps_win *w = win_of(win);
    if (w) {
        uint64_t id = ++rma.next_id;
        uint64_t *x = ev(MPS_EV_RMA_OP, ops[kind], 0, w->ref, 4);
        x[0] = (uint32_t)target;
        x[1] = sent;
        x[2] = recvd;
        x[3] = id;
        if (w->nops == w->cap) {
            uint32_t cap = w->cap ? 2 * w->cap : 16;
            struct pending *p = realloc(w->ops, cap * sizeof *p);
            if (p) { w->ops = p; w->cap = cap; }
        }
        if (w->nops < w->cap) w->ops[w->nops++] = (struct pending){id, target};
        req_slot *r = req && *req != MPI_REQUEST_NULL
                          ? req_table_add(&mps_reqs.tab, HANDLE_KEY(*req)) : NULL;
        if (r) {
            r->kind = REQ_RMA;
            r->comm = w->ref;
            r->id = id;
            r->active = 1;
        }
    }
    UNLOCK();
}

void mps_rma_req_done(const req_slot *r)
{
    for (uint64_t i = 0; i < rma.tab.cap; i++) {
        win_slot *s = &rma.tab.slot[i];
        if (s->used == MPS_SLOT_LIVE && s->w->ref == r->comm) {
            complete_ops(s->w, ALL, 1, r->id);
            return;
        }
    }
}

void mps_rma_fence_begin(void)
{
    if (!on()) return;
    LOCK();
    ev(MPS_EV_RMA_COLL_BEGIN, 0, 0, 0, 0);
    UNLOCK();
}

void mps_rma_fence_end(MPI_Win win)
{
    if (!on()) return;
    LOCK();
    struct mps_win *w = win_of(win);
    if (w) {
        complete_ops(w, ALL, 2, 0);
        ev(MPS_EV_RMA_COLL_END, OTF2_COLLECTIVE_OP_BARRIER, 0, w->ref, 1)[0] = SYNC_ALL;
    } else {
        /* keep Begin paired with an End even for a window we do not know */
        ev(MPS_EV_RMA_COLL_END, OTF2_COLLECTIVE_OP_BARRIER, 0, OTF2_UNDEFINED_RMA_WIN, 1)[0] =
            SYNC_ALL;
    }
    UNLOCK();
}

/* The group's members as world ranks, interned as a group object (under the lock). */
static uint32_t group_ref(MPI_Group group)
{
    int n = 0;
    if (group == MPI_GROUP_NULL || PMPI_Group_size(group, &n) != MPI_SUCCESS || n <= 0)
        return OTF2_UNDEFINED_GROUP;
    int small[2 * MPS_SMALL];
    int *idx = n <= MPS_SMALL ? small : malloc(2 * (size_t)n * sizeof *idx);
    if (!idx) return OTF2_UNDEFINED_GROUP;
    int *world = idx + n;
    MPI_Group wg;
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    for (int i = 0; i < n; i++) idx[i] = i;
    PMPI_Group_translate_ranks(group, n, idx, wg, world);
    PMPI_Group_free(&wg);
    LOCK();
    uint32_t ref = mps_obj_intern(MPS_OBJ_GROUP, world, (size_t)n * sizeof *world);
    UNLOCK();
    if (idx != small) free(idx);
    return ref;
}

void mps_rma_gsync(enum mps_gsync which, MPI_Win win, MPI_Group group)
{
    if (!on()) return;
    uint32_t g = which == MPS_GSYNC_POST || which == MPS_GSYNC_START ? group_ref(group) : 0;
    LOCK();
    struct mps_win *w = win_of(win);
    if (w) {
        unsigned level = OTF2_RMA_SYNC_LEVEL_PROCESS;
        if (which == MPS_GSYNC_POST) w->post_group = g;
        if (which == MPS_GSYNC_START) w->start_group = g;
        if (which == MPS_GSYNC_COMPLETE) {
            g = w->start_group;
            complete_ops(w, ALL, 2, 0);
            level = SYNC_ALL;
        }
        if (which == MPS_GSYNC_WAIT) {
            g = w->post_group;
            level = SYNC_ALL;
        }
        ev(MPS_EV_RMA_GSYNC, 0, 0, w->ref, 1)[0] = level | (uint64_t)g << 32;
    }
    UNLOCK();
}

void mps_rma_lock(int stage, MPI_Win win, int rank, int lock_type)
{
    if (!on() || rank == MPI_PROC_NULL) return;
    LOCK();
    struct mps_win *w = win_of(win);
    if (w) {
        uint32_t remote = rank == MPS_RMA_ALL ? ALL : (uint32_t)rank;
        if (stage == 2) complete_ops(w, remote, 2, 0);
        /* a lock is named by its target (lock_all: every target) */
        uint64_t *x = ev(MPS_EV_RMA_LOCK, (unsigned)stage, 0, w->ref, 2);
        x[0] = remote | (uint64_t)(lock_type == MPI_LOCK_EXCLUSIVE ? OTF2_LOCK_EXCLUSIVE
                                                                    : OTF2_LOCK_SHARED) << 32;
        x[1] = rank == MPS_RMA_ALL ? OTF2_UNDEFINED_UINT64 : (uint64_t)rank;
    }
    UNLOCK();
}

void mps_rma_flush(MPI_Win win, int rank, int local)
{
    if (!on() || rank == MPI_PROC_NULL) return;
    LOCK();
    struct mps_win *w = win_of(win);
    if (w) {
        uint32_t remote = rank == MPS_RMA_ALL ? ALL : (uint32_t)rank;
        complete_ops(w, remote, local ? 0 : 2, 0);
        ev(MPS_EV_RMA_SYNC, OTF2_RMA_SYNC_TYPE_MEMORY, 0, w->ref, 1)[0] = remote;
    }
    UNLOCK();
}

void mps_rma_sync(MPI_Win win)
{
    if (!on()) return;
    LOCK();
    struct mps_win *w = win_of(win);
    if (w) ev(MPS_EV_RMA_SYNC, OTF2_RMA_SYNC_TYPE_MEMORY, 0, w->ref, 1)[0] = ALL;
    UNLOCK();
}
