/* requests.c — nonblocking and persistent point-to-point: the request table, posting,
 * completion (Wait/Test families), cancellation and MPI_Request_free. */
#include "runtime.h"

struct mps_requests mps_reqs;

/* Completion: the oldest live entry for a handle. Open MPI hands out one shared,
 * already-complete request for eager self-sends, so one handle may stand for several.
 * So may threads: a handle freed by one thread's Wait is handed to another thread's
 * Isend before the first thread's hook runs; each then completes its own entry, the
 * calling thread's, where it has one (a request may also complete on another thread). */
static req_slot *req_find_oldest(uint64_t k)
{
    req_table *t = &mps_reqs.tab;
    req_slot *best = NULL;
    uint32_t me = tl_rec ? tl_rec->thread : 0;
    for (req_slot *r = req_table_find(t, k); r; r = req_table_next(t, r))
        if (!best || (r->thread == me) > (best->thread == me) ||
            ((r->thread == me) == (best->thread == me) && r->id < best->id))
            best = r;
    return best;
}

static uint32_t my_thread(void) { return tl_rec ? tl_rec->thread : 0; }

static void post_send(req_slot *r)
{
    r->thread = my_thread();
    r->id = ++mps_reqs.next_id;
    r->active = 1;
    uint64_t *x = ev(MPS_EV_ISEND, 0, 0, (uint32_t)r->peer, 3);
    x[0] = r->comm | (uint64_t)(uint32_t)r->tag << 32;
    x[1] = r->bytes;
    x[2] = r->id;
}

static void post_recv(req_slot *r)
{
    r->thread = my_thread();
    r->id = ++mps_reqs.next_id;
    r->active = 1;
    ev(MPS_EV_IRECV_REQUEST, 0, 0, 0, 1)[0] = r->id;
}

void mps_isend(int dest, int tag, MPI_Comm comm, int64_t count, MPI_Datatype type,
               const MPI_Request *req, int persistent)
{
    if (tl_skip || mps_rt.state != 1 || *req == MPI_REQUEST_NULL) return;
    uint64_t bytes = mps_type_bytes(count, type);
    LOCK();
    req_slot *r = req_table_add(&mps_reqs.tab, HANDLE_KEY(*req));
    if (r) {
        r->kind = dest == MPI_PROC_NULL ? 0 : REQ_SEND; /* PROC_NULL: nothing to record */
        r->peer = dest;
        r->tag = tag;
        r->comm = comm_ref(comm);
        r->bytes = bytes;
        r->persistent = (uint8_t)persistent;
        if (!persistent && r->kind) post_send(r);
    }
    UNLOCK();
}

void mps_irecv(int source, int tag, MPI_Comm comm, int64_t count, MPI_Datatype type,
               const MPI_Request *req, int persistent)
{
    if (tl_skip || mps_rt.state != 1 || *req == MPI_REQUEST_NULL) return;
    LOCK();
    req_slot *r = req_table_add(&mps_reqs.tab, HANDLE_KEY(*req));
    if (r) {
        r->kind = source == MPI_PROC_NULL ? 0 : REQ_RECV;
        r->peer = source;
        r->tag = tag;
        r->comm = comm_ref(comm);
        r->bytes = mps_type_bytes(count, type);
        r->persistent = (uint8_t)persistent;
        if (!persistent && r->kind) post_recv(r);
    }
    UNLOCK();
}

void mps_start(const MPI_Request *req)
{
    if (tl_skip || mps_rt.state != 1) return;
    LOCK();
    req_slot *r = req_table_find(&mps_reqs.tab, HANDLE_KEY(*req));
    if (r && r->kind == REQ_SEND) post_send(r);
    else if (r && r->kind == REQ_RECV) post_recv(r);
    UNLOCK();
}

static void complete_one(req_slot *r, const MPI_Status *st)
{
    int cancelled = 0;
    if (st && r->cancel && r->kind <= REQ_RECV) PMPI_Test_cancelled(st, &cancelled);
    r->cancel = 0;
    if (r->active && r->kind) {
        if (cancelled) {
            ev(MPS_EV_CANCELLED, 0, 0, 0, 1)[0] = r->id;
        } else if (r->kind == REQ_SEND) {
            ev(MPS_EV_ISEND_DONE, 0, 0, 0, 1)[0] = r->id;
        } else if (r->kind == REQ_RECV && st && st->MPI_SOURCE != MPI_PROC_NULL) {
            int64_t n = status_bytes(st);
            uint64_t *x = ev(MPS_EV_IRECV, 0, 0, (uint32_t)st->MPI_SOURCE, 3);
            x[0] = r->comm | (uint64_t)(uint32_t)st->MPI_TAG << 32;
            x[1] = (uint64_t)(n > 0 ? n : 0);
            x[2] = r->id;
        } else if (r->kind == REQ_COLL) {
            uint64_t in = 0, out = 0, prior = 0;
            int hashed = r->hashed && mps_nbc_hashes(r->id, &in, &out, &prior);
            uint64_t *x = ev(MPS_EV_NBC_DONE, r->coll_op, 0,
                             r->root < 0 ? OTF2_UNDEFINED_UINT32 : (uint32_t)r->root,
                             hashed ? 7 : 4);
            x[0] = r->comm | (uint64_t)hashed << 32;
            x[1] = r->sent;
            x[2] = r->recvd;
            x[3] = r->id;
            if (hashed) {
                x[4] = in;
                x[5] = out;
                x[6] = prior;
            }
        } else if (r->kind == REQ_RMA) {
            mps_rma_req_done(r);
        } else if (r->kind == REQ_IO) {
            mps_io_req_done(r, st);
        }
    }
    r->active = 0;
    if (!r->persistent) req_table_remove(&mps_reqs.tab, r);
}

void mps_complete(const MPI_Request *saved, const MPI_Status *st)
{
    if (tl_skip || mps_rt.state != 1 || *saved == MPI_REQUEST_NULL) return;
    LOCK();
    req_slot *r = req_find_oldest(HANDLE_KEY(*saved));
    if (r) complete_one(r, st);
    UNLOCK();
}

void mps_complete_many(int n, const MPI_Request *saved, const MPI_Status *st,
                       const int *indices, int nidx)
{
    if (tl_skip || mps_rt.state != 1 || n <= 0 || !saved) return;
    LOCK();
    if (indices) { /* Waitsome/Testsome/Waitany: statuses are indexed by position in indices */
        for (int k = 0; k < nidx; k++) {
            int i = indices[k];
            if (i < 0 || i >= n || saved[i] == MPI_REQUEST_NULL) continue;
            req_slot *r = req_find_oldest(HANDLE_KEY(saved[i]));
            if (r) complete_one(r, st ? &st[k] : NULL);
        }
    } else { /* Waitall/Testall: every request completed, statuses by request index */
        for (int i = 0; i < n; i++) {
            if (saved[i] == MPI_REQUEST_NULL) continue;
            req_slot *r = req_find_oldest(HANDLE_KEY(saved[i]));
            if (r) complete_one(r, st ? &st[i] : NULL);
        }
    }
    UNLOCK();
}

void mps_test_incomplete(int n, const MPI_Request *saved)
{
    if (tl_skip || mps_rt.state != 1 || !saved) return;
    LOCK();
    for (int i = 0; i < n; i++) {
        if (saved[i] == MPI_REQUEST_NULL) continue;
        req_slot *r = req_find_oldest(HANDLE_KEY(saved[i]));
        if (r && r->active && r->kind && r->kind <= REQ_COLL) /* MPI requests only */
            ev(MPS_EV_TEST, 0, 0, 0, 1)[0] = r->id;
    }
    UNLOCK();
}

void mps_request_free(const MPI_Request *saved)
{
    if (mps_rt.state != 1 || *saved == MPI_REQUEST_NULL) return;
    LOCK();
    req_slot *r = req_find_oldest(HANDLE_KEY(*saved));
    /* an active request completes unseen: MPI gives us no hook */
    if (r) req_table_remove(&mps_reqs.tab, r);
    UNLOCK();
}

void mps_cancelled_mark(const MPI_Request *req)
{
    /* the cancellation is recorded when Wait/Test reports it (MPI_Test_cancelled), asked
     * only of requests cancelled here */
    if (mps_rt.state != 1 || *req == MPI_REQUEST_NULL) return;
    LOCK();
    req_slot *r = req_find_oldest(HANDLE_KEY(*req)); /* the one completion will find */
    if (r) r->cancel = 1;
    UNLOCK();
}

/* ------------------------------------------------------------- matched probe */

/* Messages MPI_Mprobe/Improbe handed out and no receive consumed yet: their
 * communicator, which MPI_Mrecv/Imrecv do not name. A program holds few at a time; the
 * oldest is overwritten when full (its receive then names no communicator). */
#define MPS_MESSAGES 64
static struct {
    uint64_t key;
    uint32_t comm;
    uint8_t used;
} messages[MPS_MESSAGES];
static unsigned next_message;

void mps_mprobed(const MPI_Message *msg, MPI_Comm comm)
{
    /* kept even when the probe is filtered out: the receive may be traced */
    if (mps_rt.state != 1 || *msg == MPI_MESSAGE_NULL || *msg == MPI_MESSAGE_NO_PROC) return;
    LOCK();
    int i = 0;
    while (i < MPS_MESSAGES && messages[i].used) i++;
    if (i == MPS_MESSAGES) i = (int)(next_message++ % MPS_MESSAGES);
    messages[i].key = HANDLE_KEY(*msg);
    messages[i].comm = comm_ref(comm);
    messages[i].used = 1;
    UNLOCK();
}

/* The communicator of a probed message, forgotten (the receive consumes it). Locked. */
static uint32_t message_comm(const MPI_Message *msg)
{
    uint64_t k = HANDLE_KEY(*msg);
    for (int i = 0; i < MPS_MESSAGES; i++)
        if (messages[i].used && messages[i].key == k) {
            messages[i].used = 0;
            return messages[i].comm;
        }
    return OTF2_UNDEFINED_COMM;
}

void mps_mrecv_done(const MPI_Message *saved, const MPI_Status *st)
{
    if (mps_rt.state != 1 || *saved == MPI_MESSAGE_NULL) return;
    LOCK();
    uint32_t comm = message_comm(saved);
    if (!tl_skip && st && st->MPI_SOURCE != MPI_PROC_NULL) {
        int64_t n = status_bytes(st);
        uint64_t *x = ev(MPS_EV_RECV, 0, 0, (uint32_t)st->MPI_SOURCE, 2);
        x[0] = comm | (uint64_t)(uint32_t)st->MPI_TAG << 32;
        x[1] = (uint64_t)(n > 0 ? n : 0);
    }
    UNLOCK();
}

void mps_imrecv(const MPI_Message *saved, int64_t count, MPI_Datatype type,
                const MPI_Request *req)
{
    if (mps_rt.state != 1 || *saved == MPI_MESSAGE_NULL) return;
    LOCK();
    uint32_t comm = message_comm(saved);
    /* MPI_MESSAGE_NO_PROC: a receive from MPI_PROC_NULL, nothing to record */
    if (!tl_skip && *saved != MPI_MESSAGE_NO_PROC && *req != MPI_REQUEST_NULL) {
        req_slot *r = req_table_add(&mps_reqs.tab, HANDLE_KEY(*req));
        if (r) {
            r->kind = REQ_RECV;
            r->peer = MPI_ANY_SOURCE;
            r->tag = MPI_ANY_TAG;
            r->comm = comm;
            r->bytes = mps_type_bytes(count, type);
            post_recv(r);
        }
    }
    UNLOCK();
}
