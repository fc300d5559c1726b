/* mpiscope interposer: the runtime shared by the generated MPI wrappers.
 *
 * The generated wrappers (wrappers_c.c, wrappers_f.c from gen/mpi.spec) call
 * mps_enter/mps_leave around every PMPI call and the mps_* event helpers
 * below in between. The runtime behind them keeps its state in runtime.h (private).
 */
#ifndef MPISCOPE_H
#define MPISCOPE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "functions.h" /* generated: enum mps_fn, MPS_FN_COUNT */
#include "rmaio.h"          /* RMA and MPI-IO hooks */

/* Is tracing on for this process right now (initialised, not disabled, not in error)? */
int mps_active(void);

/* Bracket one wrapped call. `ra` is the caller's return address (its call site). */
void mps_enter(enum mps_fn fn, void *ra);
void mps_leave(enum mps_fn fn);
/* The PMPI call returned: stamp what follows (completion events, Leave) from here. */
void mps_after(void);
/* The call returned rc != MPI_SUCCESS: record it on its Leave; keep 0: its operation
 * never started (take back what was recorded, record nothing more). */
void mps_failed(int rc, int keep);
/* This polling call (Test*, Iprobe, Improbe) completed nothing: its visit may merge with
 * the idle polling visit before it (hotpath.c). */
void mps_poll_idle(void);
int mps_filtered(enum mps_fn fn);

/* Life cycle (called from the MPI_Init, MPI_Finalize and MPI_Abort wrappers). */
void mps_init_after(enum mps_fn fn, uint64_t t_enter, void *ra);
uint64_t mps_clock(void);
void mps_finalize_before(void);
void mps_abort_before(void);

/* Point-to-point. Peers are ranks within `comm`, as OTF2 wants them. */
uint64_t mps_type_bytes(int64_t count, MPI_Datatype type);
void mps_send(int dest, int tag, MPI_Comm comm, int64_t count, MPI_Datatype type);
void mps_recv_done(const MPI_Status *st, MPI_Comm comm);
void mps_isend(int dest, int tag, MPI_Comm comm, int64_t count, MPI_Datatype type,
               const MPI_Request *req, int persistent);
void mps_irecv(int source, int tag, MPI_Comm comm, int64_t count, MPI_Datatype type,
               const MPI_Request *req, int persistent);
/* Persistent requests: Start posts the operation described at *_init time. */
void mps_start(const MPI_Request *req);

/* Request completion. `saved` are the handles as they were before the call,
 * `completed[i]` non-zero where request i completed. */
void mps_complete(const MPI_Request *saved, const MPI_Status *st);
void mps_complete_many(int n, const MPI_Request *saved, const MPI_Status *st,
                       const int *indices, int nidx);
void mps_test_incomplete(int n, const MPI_Request *saved);
void mps_request_free(const MPI_Request *saved);
void mps_cancelled_mark(const MPI_Request *req);

/* Collectives: begin at entry, end with byte counts and payload hashes. */
enum mps_coll {
    MPS_COLL_BARRIER, MPS_COLL_BCAST, MPS_COLL_GATHER, MPS_COLL_GATHERV,
    MPS_COLL_SCATTER, MPS_COLL_SCATTERV, MPS_COLL_ALLGATHER, MPS_COLL_ALLGATHERV,
    MPS_COLL_ALLTOALL, MPS_COLL_ALLTOALLV, MPS_COLL_ALLTOALLW, MPS_COLL_ALLREDUCE,
    MPS_COLL_REDUCE, MPS_COLL_REDUCE_SCATTER, MPS_COLL_SCAN, MPS_COLL_EXSCAN,
    MPS_COLL_REDUCE_SCATTER_BLOCK
};
void mps_coll_begin(void);
/* Hashes of small payloads; `in` may be MPI_IN_PLACE (then `out` before the call). */
uint64_t mps_hash_buf(const void *buf, int64_t count, MPI_Datatype type);
int mps_hash_wanted(MPI_Comm comm, int64_t count, MPI_Datatype type);
/* prior_hash: the receive buffer's hash at entry (before MPI writes it), so a reader can
 * tell a call that left every byte as it was from one that filled a fresh buffer */
void mps_coll_end(enum mps_coll op, MPI_Comm comm, int root, uint64_t sent,
                  uint64_t recvd, int have_hash, uint64_t in_hash, uint64_t out_hash,
                  uint64_t prior_hash);
void mps_icoll(enum mps_coll op, MPI_Comm comm, int root, uint64_t sent, uint64_t recvd,
               const MPI_Request *req);
/* A collective's input or result buffer, for payload hashing: `count` elements of `type`
 * at buf; or, with `counts`, n blocks at `displs` (elements of `type`, or bytes with one
 * datatype per block in `types`), hashed as their concatenation in rank order. buf NULL:
 * nothing (hash 0). */
struct mps_buf {
    const void *buf;
    int64_t count;
    MPI_Datatype type;
    /* counts and displacements: int arrays, or MPI_Count / MPI_Aint arrays (the MPI-4
     * large-count `_c` functions): their element types cw / dw (MPS_W, read by mps_at) */
    const void *counts, *displs;
    const MPI_Datatype *types;
    int n;
    unsigned char cw, dw;
};
/* An int / MPI_Count / MPI_Aint array's element type, from its C type (a plain NULL: none,
 * never read). By type, not size: MPI_Count is `long` in MPICH, `long long` in Open MPI 5,
 * each read through its own type; an array of any other type does not compile. */
enum { MPS_W_INT, MPS_W_LONG, MPS_W_LLONG };
#define MPS_W(p) _Generic((p), int *: MPS_W_INT, const int *: MPS_W_INT, \
                          long *: MPS_W_LONG, const long *: MPS_W_LONG, \
                          long long *: MPS_W_LLONG, const long long *: MPS_W_LLONG, \
                          void *: MPS_W_INT)
static inline int64_t mps_at(const void *a, int w, int i)
{
    if (w == MPS_W_INT) return ((const int *)a)[i];
    if (w == MPS_W_LONG) return ((const long *)a)[i];
    return ((const long long *)a)[i];
}
#define MPS_BUF(b, c, t) ((struct mps_buf){.buf = (b), .count = (c), .type = (t)})
#define MPS_BUFV(b, t, cs, ds, ts, nb) \
    ((struct mps_buf){.buf = (b), .type = (t), .counts = (cs), .displs = (ds), .types = (ts), \
                      .n = (nb), .cw = MPS_W(cs), .dw = MPS_W(ds)})
#define MPS_NOBUF ((struct mps_buf){.buf = NULL})
/* Both hashable: predefined types, each at most mps_cfg.hash_bytes, an intracommunicator
 * (and tracing on). */
int mps_hashable(MPI_Comm comm, const struct mps_buf *in, const struct mps_buf *out);
uint64_t mps_hash_of(const struct mps_buf *b);
/* Nonblocking collective whose result is hashed at completion: `out`'s blocks are read
 * now (the caller may free its count, displacement and type arrays once the call
 * returns); only the buffer itself is read at completion, as MPI keeps it the
 * operation's until then. */
void mps_icoll_hashed(enum mps_coll op, MPI_Comm comm, int root, uint64_t sent,
                      uint64_t recvd, const MPI_Request *req, int have_hash,
                      uint64_t in_hash, uint64_t prior_hash, const struct mps_buf *out);
/* Neighbourhood collectives: blocks in the receive (`out` 0) or send (`out` 1) buffer
 * of comm's topology, and the bytes moved (neighbours that are MPI_PROC_NULL move none):
 * `counts` per neighbour or `count` each, of `type` or of types[i]. */
int mps_nbr_degree(MPI_Comm comm, int out);
uint64_t mps_nbr_bytes_w(MPI_Comm comm, int out, const void *counts, int cw, int64_t count,
                         MPI_Datatype type, const MPI_Datatype *types);
#define mps_nbr_bytes(comm, out, counts, count, type, types) \
    mps_nbr_bytes_w(comm, out, counts, MPS_W(counts), count, type, types)
/* Matched probe: Mprobe/Improbe remember the message's communicator; Mrecv/Imrecv
 * consume it (saved: the handle before the call, which MPI sets to MPI_MESSAGE_NULL). */
void mps_mprobed(const MPI_Message *msg, MPI_Comm comm);
void mps_mrecv_done(const MPI_Message *saved, const MPI_Status *st);
void mps_imrecv(const MPI_Message *saved, int64_t count, MPI_Datatype type,
                const MPI_Request *req);
int mps_comm_size(MPI_Comm comm);
/* processes a collective addresses: the remote group's size for an intercommunicator */
int mps_comm_peers(MPI_Comm comm);
int mps_comm_rank(MPI_Comm comm);
/* This process's part in a rooted collective: MPS_ROOT (an intracommunicator's root,
 * which also contributes its own block), MPS_ROOT_ONLY (an intercommunicator's root,
 * root argument MPI_ROOT: it only talks to the remote group), MPS_LEAF (sends to or
 * receives from the root) or MPS_IDLE (an intercommunicator's root-group member that is
 * not the root, root argument MPI_PROC_NULL: takes no part, its buffers are not
 * significant). MPS_OWN: it has a block of its own in the operation. */
enum { MPS_IDLE = -1, MPS_LEAF = 0, MPS_ROOT = 1, MPS_ROOT_ONLY = 2 };
#define MPS_OWN(role) ((role) == MPS_LEAF || (role) == MPS_ROOT)
int mps_coll_role(MPI_Comm comm, int root);
uint64_t mps_sum_bytes_w(const void *counts, int cw, int n, MPI_Datatype type);
#define mps_sum_bytes(counts, n, type) mps_sum_bytes_w(counts, MPS_W(counts), n, type)

/* Communicators: give every new communicator its global id (collective on `newcomm`). */
void mps_comm_created(MPI_Comm parent, const MPI_Comm *newcomm);
void mps_comm_freed(const MPI_Comm *comm);
void mps_comm_named(MPI_Comm comm, const char *name);
/* Comm_idup: the new communicator's id without communication (see communicators.c). */
void mps_comm_idup(MPI_Comm parent, const MPI_Comm *newcomm);

/* Call sites: dense per-rank id for a return address; resolved at Finalize. */
uint32_t mps_callsite_id(void *ra);
typedef struct {
    char *file;     /* "path/file.c", "function+0x12" or "libfoo.so+0x1234" */
    uint32_t line;  /* 0 unless file is a source file */
    char *object;   /* the object's path (NULL where unknown), kept for re-symbolizing */
    uint64_t offset; /* the call instruction's offset in that object */
    char build_id[65]; /* the object's GNU build-id in hex, "" where it has none */
    char *func;     /* the containing function, demangled (mps_callsite_resolve only), or NULL */
} mps_location;
void mps_callsite_resolve(void *const *addrs, uint32_t n, mps_location *out);
/* Post-mortem (mpiscope-recover): return addresses with the object they were in. */
typedef struct {
    uint64_t addr, bias, fbase; /* return address, object's load bias and base address */
    const char *path;           /* the object's path, or NULL */
} mps_offline_site;
void mps_callsite_resolve_offline(const mps_offline_site *sites, uint32_t n,
                                  mps_location *out);
/* One object's call from its recorded offset, with the debug files there now
 * (mpiscope-symbolize): 1 and a name in *out; 0 where it has none; -1 where the object
 * at path is no longer the one of build_id (unless that is ""). */
int mps_callsite_resolve_file(const char *path, const char *build_id, uint64_t offset,
                              mps_location *out);
/* Turn rank `rank`'s crash-safe live log in outdir into DIR/rank<N>/traces.otf2, the
 * archive salvage() writes (live.h). 0 and a one-line summary in msg, or -1 and why. */
int mps_recover(const char *outdir, int rank, char *msg, size_t msglen);

/* Fortran sentinels (MPI_IN_PLACE, MPI_BOTTOM, MPI_STATUS(ES)_IGNORE). */
void *mps_f_buf(void *buf);
/* Forwarding Fortran doors: the library's own binding `name` (else `pname`, its PMPI
 * twin), and the caller to record as call site of the C call it makes next. */
void *mps_fortran_next(const char *name, const char *pname);
void mps_fortran_caller(void *ra);
int mps_f_status_ignore(const void *st);
int mps_f_statuses_ignore(const void *st);


/* ---- helpers used by the generated wrappers (gen/mpi.spec hooks) ---- */
#define MPS_SMALL 64 /* arrays up to this size live on the stack: no malloc per call */

/* MPI_STATUS(ES)_IGNORE still lets us see a receive's real source: use our own. */
#define MPS_FIX_STATUS(st) \
    MPI_Status st_local_; \
    do { if ((st) == MPI_STATUS_IGNORE) (st) = &st_local_; } while (0)

#define MPS_FIX_STATUSES(n, sts) \
    MPI_Status sts_small_[MPS_SMALL]; \
    if ((sts) == MPI_STATUSES_IGNORE) { \
        (sts) = (n) <= MPS_SMALL ? sts_small_ \
                                 : (sts_heap_ = malloc(sizeof(MPI_Status) * (size_t)(n))); \
        if (!(sts)) (sts) = MPI_STATUSES_IGNORE; \
    }

/* Completed requests are overwritten with MPI_REQUEST_NULL: keep the handles. */
#define MPS_SAVE_REQUESTS(n, reqs) \
    MPI_Status *sts_heap_ = NULL; /* set by MPS_FIX_STATUSES when it needs the heap */ \
    MPI_Request saved_small_[MPS_SMALL]; \
    MPI_Request *saved_ = (n) <= MPS_SMALL ? saved_small_ \
                                          : malloc(sizeof(MPI_Request) * (size_t)((n) > 0 ? (n) : 1)); \
    do { if (saved_ && (n) > 0) memcpy(saved_, (reqs), sizeof(MPI_Request) * (size_t)(n)); } \
    while (0)

#define MPS_RELEASE() \
    do { \
        if (saved_ != saved_small_) free(saved_); \
        free(sts_heap_); \
    } while (0)

/* Fortran arrays of handles and statuses, converted on the way in and out. */
#define MPS_F_STATUS_INTS (sizeof(MPI_Status) / sizeof(MPI_Fint))
#define MPS_F2C_REQUESTS(f, n) \
    MPI_Request f##_small[MPS_SMALL]; \
    MPI_Request *f##_c = (n) <= MPS_SMALL ? f##_small \
                                          : malloc(sizeof(MPI_Request) * (size_t)(n)); \
    for (int k_ = 0; f##_c && k_ < (n); k_++) f##_c[k_] = PMPI_Request_f2c(f[k_])
#define MPS_C2F_REQUESTS(f, n) \
    for (int k_ = 0; f##_c && k_ < (n); k_++) f[k_] = PMPI_Request_c2f(f##_c[k_]); \
    if (f##_c != f##_small) free(f##_c)
#define MPS_F2C_TYPES(f, n) \
    int f##_n = (n); \
    MPI_Datatype f##_small[MPS_SMALL]; \
    MPI_Datatype *f##_c = f##_n <= MPS_SMALL ? f##_small \
                                             : malloc(sizeof(MPI_Datatype) * (size_t)f##_n); \
    for (int k_ = 0; f##_c && k_ < f##_n; k_++) f##_c[k_] = PMPI_Type_f2c(f[k_])
#define MPS_FREE_TYPES(f) \
    if (f##_c != f##_small) free(f##_c)
#define MPS_F2C_STATUSES(f, n) \
    MPI_Status f##_small[MPS_SMALL]; \
    MPI_Status *f##_c = mps_f_statuses_ignore(f) ? MPI_STATUSES_IGNORE \
                        : (n) <= MPS_SMALL   ? f##_small \
                                             : malloc(sizeof(MPI_Status) * (size_t)(n))
#define MPS_C2F_STATUSES(f, n) \
    if (f##_c != MPI_STATUSES_IGNORE && f##_c) { \
        for (int k_ = 0; k_ < (n); k_++) PMPI_Status_c2f(&f##_c[k_], f + k_ * MPS_F_STATUS_INTS); \
        if (f##_c != f##_small) free(f##_c); \
    }

#endif
