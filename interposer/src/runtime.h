/* runtime.h — private to libmpiscope: the trace writer's state, split by object, and the
 * inline helpers of the hot path.
 *
 * The state is a few structs, each defined in the file that owns it (hotpath.c,
 * requests.c, communicators.c, config.c, archive.c, init.c). Everything declared here
 * has hidden visibility: shared between the runtime's files, never part of the .so's
 * ABI (mpiscope.h is that). The helpers the wrappers' per-call path needs (event append,
 * communicator and datatype lookups) are static inline here, so splitting the runtime
 * into files added no call to a traced MPI call. Hot path: the wrappers call mps_enter,
 * an event helper and mps_leave; each reads the clock (rdtsc where the kernel trusts the
 * TSC), looks up ids in open-addressing tables (optable.h) and appends a raw record to the
 * calling thread's event buffer (evbuf.h), encoded into OTF2 in batches; no allocation,
 * no syscall, no lock (at MPI_THREAD_MULTIPLE the shared request table and user
 * communicators' lookups take one).
 */
#ifndef MPISCOPE_RUNTIME_H
#define MPISCOPE_RUNTIME_H

#include "mpiscope.h"
#include "evbuf.h"
#include "live.h"
#include "optable.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/types.h>

#include <otf2/otf2.h>

#define MPS_INTERNAL __attribute__((visibility("hidden")))

#define MPS_VERSION "0.1.0"
#define COMM_WORLD_REF 0
#define COMM_SELF_REF 1
#define MPS_COMM_REF_SPAN 4096u /* refs a single creator rank may hand out */

/* ------------------------------------------------------------------ tables */

typedef struct {
    uint64_t key; /* the return address */
    uint32_t id;  /* dense, in order of first sight */
    uint8_t used;
} cs_slot;
MPS_OPTABLE(cs_table, cs_slot, 256)

typedef struct {
    uint64_t key; /* the MPI_Comm handle's bits */
    uint32_t ref;
    uint8_t used;
} comm_slot;
MPS_OPTABLE(comm_table, comm_slot, 64)

enum req_kind { REQ_SEND = 1, REQ_RECV = 2, REQ_COLL = 3, REQ_RMA = 4, REQ_IO = 5 };

typedef struct {
    uint64_t key; /* the MPI_Request handle's bits */
    uint64_t id;
    uint64_t bytes, sent, recvd;
    uint32_t comm;
    int32_t peer, tag, root;
    uint8_t used, kind, persistent, active, coll_op;
    uint8_t cancel; /* MPI_Cancel was called: ask MPI_Test_cancelled at completion */
    uint8_t hashed; /* a collective whose result is hashed at completion (collectives.c) */
    uint32_t thread; /* the recorder's thread that started it */
} req_slot;
MPS_OPTABLE(req_table, req_slot, 1024)

typedef struct {
    uint32_t ref, parent;
    int32_t size;
    int32_t creator;  /* this rank is the comm's rank 0: it contributes the definition */
    int32_t *members; /* world ranks in comm-rank order; an intercommunicator's: A then B */
    int32_t inter_a;  /* an intercommunicator: size of its group A (> 0); else 0 */
    char name[64];    /* MPI_Comm_set_name, or "" */
} comm_def;

/* A serialized communicator definition: ref, parent, size, name words, members, name.
 * An intercommunicator's name words end with one more word after the name's: the size of
 * its group A (readers that only know intracommunicators stop at the name's NUL). */
#define COMM_REC_WORDS(d) (4 + (d)[2] + (d)[3])
#define COMM_NAME_WORDS(name) ((int)((strlen(name) + sizeof(int32_t)) / sizeof(int32_t)))
static inline int32_t comm_rec_inter_a(const int32_t *d)
{
    const char *name = (const char *)(d + 4 + d[2]);
    return d[3] > COMM_NAME_WORDS(name) ? d[4 + d[2] + d[3] - 1] : 0;
}

/* predefined datatypes never change or go away: their sizes are remembered (and which
 * handles are derived, so those skip the envelope query). Direct-mapped: a collision
 * replaces the entry, so the cache stays this small. */
#define MPS_TYPE_SLOTS 64
typedef struct {
    uint64_t key; /* the MPI_Datatype handle's bits */
    int32_t size; /* predefined types only */
    uint8_t used, named;
} type_slot;

/* ------------------------------------------------------------------ state */

/* A recorder (hotpath.c): one per thread that calls MPI, found through tl_rec. `mps_rt`
 * is the thread that called MPI_Init (its location keeps the rank's id) and also holds
 * the process-wide fields (state, tsc, mt, lock, the thread list); another thread's
 * recorder uses only the per-thread fields. A thread's buffer, time map and OTF2 writer
 * are only ever touched by that thread, and by the main thread at MPI_Finalize, when the
 * others have finished calling MPI. So the hot path takes no lock. */
/* An idle polling visit that later idle calls from its call site may merge into: its
 * Enter's header (function, call site) and call path record's header (0: none), and
 * its POLL and Leave records in the buffer. */
#define MPS_POLL_CHAIN 4 /* idle visits a polling loop may cycle through and still merge */
struct mps_poll_visit {
    uint64_t head, path;
    uint64_t *calls, *leave;
};

struct mps_recorder {
    int state; /* 0: not initialised, 1: tracing, 2: pass-through */
    int tsc;   /* raw times are TSC ticks */
    int mt;    /* MPI_THREAD_MULTIPLE: the shared tables are used under `lock` */
    pthread_mutex_t lock; /* shared tables (requests, call sites, communicators, threads) */
    mps_evbuf eb;
    mps_timemap tm;              /* raw → trace time for the events now in eb */
    uint64_t flushes, encode_ns; /* raw-buffer batches encoded mid-run; time encoding */
    uint64_t first_ts, last_ts;  /* trace time of the first and the latest record */
    volatile sig_atomic_t encoding; /* inside mps_flush_events: a signal must not salvage */
    OTF2_EvtWriter *evt;         /* this thread's location */
    OTF2_AttributeList *attrs;
    uint64_t location;           /* rank + thread * size: the main thread keeps the rank */
    uint32_t thread;             /* 0: the thread that called MPI_Init; others in order */
    uint32_t nthreads;           /* mps_rt only: recorders in the list */
    uint64_t nevents;            /* events written, once its writer is closed */
    struct mps_recorder *next;   /* mps_rt only: the list of all recorders, main first */
    /* each function's last call site: loops call the same site over and over */
    void *last_ra[MPS_FN_COUNT];
    uint32_t last_cs[MPS_FN_COUNT];
    /* the buffer just after the current call's Enter (NULL once a flush emptied it): what
     * a failed call recorded before MPI said so is taken back from here (mps_failed) */
    uint64_t *call_mark;
    uint64_t *call_start; /* the buffer where the current call's records begin */
    /* the idle polling visits back to back at the end of the buffer (hotpath.c,
     * mps_poll_idle): a polling loop's cycle, oldest first; where the buffer stood after
     * the newest (NULL: nothing to extend), when its call really returned (raw clock),
     * and the current idle call's Enter header and call path until its Leave */
    struct mps_poll_visit poll[MPS_POLL_CHAIN];
    unsigned poll_n;
    uint64_t *poll_end;
    uint64_t poll_returned, poll_head, poll_path;
    /* call paths (depth > 1): (return address, stack pointer) → path id, callpath.c */
    unsigned char *cp_cache;
    /* descheduling samples (hotpath.c, mps_sched_*): this thread's open
     * /proc/thread-self/schedstat (-1: none), when it was last read (raw clock) and the
     * least interval between reads (raw clock; UINT64_MAX: never) */
    int sched_fd;
    uint64_t sched_last, sched_every;
};

/* Call sites (hotpath.c): return address → dense id, resolved at Finalize. */
struct mps_callsites {
    cs_table tab;
    void **addr;         /* by id */
    uint32_t n, addr_cap; /* ids handed out */
};

/* Requests (requests.c): live nonblocking and persistent operations by handle. */
struct mps_requests {
    req_table tab;
    uint64_t next_id;
};

/* Communicators (communicators.c): handle → global ref, and the definitions of those
 * this rank belongs to (every member keeps them, for a salvaged trace). */
struct mps_communicators {
    comm_table tab;
    pthread_rwlock_t lock; /* tab, under MPI_THREAD_MULTIPLE (looked up by every thread) */
    uint32_t counter; /* refs handed out as a creator */
    comm_def *defs;
    uint32_t ndefs, defs_cap;
    struct { uint32_t ref, n; } *idups; /* MPI_Comm_idup calls so far, per parent */
    uint32_t nidups, idups_cap;
};

/* Configuration (config.c), read from the environment at MPI_Init. */
struct mps_config {
    unsigned char filtered[MPS_FN_COUNT];
    uint64_t chunk_size;   /* OTF2 chunk */
    uint64_t buffer_bytes; /* raw event buffer */
    size_t hash_bytes;
    unsigned callpath_depth; /* frames recorded per call (callpath.c); 1: call site only */
    int poll_all;            /* MPISCOPE_POLL=all: every polling call its own visit */
    int sched_off;           /* MPISCOPE_SCHED=off: no descheduling samples (hotpath.c) */
};

/* The job and this rank's place in it (init.c). */
struct mps_job {
    int rank, size;
    pid_t pid; /* the traced process (a fork()ed child shares the state but is not it) */
    int have_icomm;
    MPI_Comm icomm; /* private duplicate of MPI_COMM_WORLD for our own messages */
    int64_t t_init_local, off_init, t_fin_local, off_fin; /* clock offsets to rank 0 */
    /* which clock the times are on: rank 0's CLOCK_MONOTONIC, named by its boot and time
     * namespace (MPISCOPE::CLOCK; equal names, same clock: a spawned job's times line up) */
    char clock[128];
    char host[256];
};

/* The files (archive.c): the OTF2 archive, its memory, the output directory, and whether
 * writing failed and was said. */
struct mps_files {
    OTF2_Archive *archive;
    OTF2_EvtWriter *evt;
    OTF2_AttributeList *attrs;
    int failed; /* OTF2 reported an error: stop encoding */
    int werr;   /* why the first write failed: errno, or -OTF2 code where none maps */
    int warned;
    uint64_t pool_budget, pool_used;
    struct mps_chunk *spare; /* flushed event chunks kept for reuse */
    uint64_t nevents_closed;
    char outdir[PATH_MAX];
    char live_why[PATH_MAX + 256]; /* why the crash-safe log was not kept from Init, or "" */
};

extern struct mps_recorder mps_rt MPS_INTERNAL;
extern struct mps_callsites mps_sites MPS_INTERNAL;
extern struct mps_requests mps_reqs MPS_INTERNAL;
extern struct mps_communicators mps_comms MPS_INTERNAL;
extern struct mps_config mps_cfg MPS_INTERNAL;
extern struct mps_job mps_job MPS_INTERNAL;
extern struct mps_files mps_out MPS_INTERNAL;
extern type_slot mps_types[MPS_TYPE_SLOTS] MPS_INTERNAL;

/* current call is filtered out; initial-exec: no __tls_get_addr call in the hot path */
extern __thread int tl_skip MPS_INTERNAL __attribute__((tls_model("initial-exec")));
/* Set by a forwarding Fortran door (MPICH): the Fortran caller, to be recorded as the call
 * site of the C call the library's binding makes next instead of the binding itself */
extern __thread void *tl_fcaller MPS_INTERNAL __attribute__((tls_model("initial-exec")));
/* Raw timestamp of the current call's phase: taken at Enter and once after the PMPI
 * call, shared by the events of that phase (a clock read is a good part of our budget) */
extern __thread uint64_t tl_t MPS_INTERNAL __attribute__((tls_model("initial-exec")));
/* This thread's recorder, NULL until its first traced call (mps_enter makes it) */
extern __thread struct mps_recorder *tl_rec MPS_INTERNAL
    __attribute__((tls_model("initial-exec")));

/* ------------------------------------------------------- between the files */

/* hotpath.c */
MPS_INTERNAL void mps_flush_events(int record);
MPS_INTERNAL void mps_flush_recorder(struct mps_recorder *r, int record);
MPS_INTERNAL struct mps_recorder *mps_thread_start(void);
/* descheduling samples of recorder r's thread, called by that thread (hotpath.c) */
MPS_INTERNAL void mps_sched_start(struct mps_recorder *r);
MPS_INTERNAL void mps_sched_stop(struct mps_recorder *r);
MPS_INTERNAL void mps_live_callsite(uint32_t id, void *ra);
/* mpi4py (python.c): a call site id with this bit set is mpi4py's C call, to be replaced
 * per call by its Python caller's file:line */
#define MPS_CS_PYTHON 0x80000000u
MPS_INTERNAL int mps_py_is_mpi4py(void *ra);
MPS_INTERNAL uint32_t mps_py_callsite(uint32_t cs, uint32_t *path);
MPS_INTERNAL int mps_py_name(const void *addr, mps_location *out);
/* archive.c */
MPS_INTERNAL OTF2_Archive *mps_archive_open(const char *dir);
MPS_INTERNAL OTF2_ErrorCode mps_otf2_error(void *user, const char *file, uint64_t line,
                                           const char *func, OTF2_ErrorCode code,
                                           const char *fmt, va_list va);
extern OTF2_MemoryCallbacks mps_mem_cbs MPS_INTERNAL;
MPS_INTERNAL void mps_pool_grow(uint64_t bytes);
MPS_INTERNAL void mps_to_stderr(const char *line);
MPS_INTERNAL void mps_warn_once(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
MPS_INTERNAL void mps_say_not_written(const char *dir, int werr);
/* config.c */
MPS_INTERNAL void mps_config_read(void);
/* clocksync.c */
MPS_INTERNAL int64_t mps_clock_offset(void);
MPS_INTERNAL void mps_clock_name(char *out, size_t len);
/* collectives.c: a hashed nonblocking collective's input hash and its result's, now */
MPS_INTERNAL int mps_nbc_hashes(uint64_t id, uint64_t *in, uint64_t *out, uint64_t *prior);
/* communicators.c */
MPS_INTERNAL comm_def *mps_comm_def_slot(void);
MPS_INTERNAL int32_t *mps_serialize_comm(const comm_def *d, int32_t *p);
MPS_INTERNAL int32_t *mps_serialize_comms(int all, int *nwords);
/* unify.c (collective on the private communicator) */
/* returns (at rank 0) how many SourceCodeLocations it defined */
MPS_INTERNAL uint32_t mps_unify_callsites(OTF2_GlobalDefWriter *gw, uint32_t **local_to_global);
MPS_INTERNAL char *mps_gather_hosts(void);
MPS_INTERNAL int32_t *mps_gather_comms(int *nwords);
/* defs.c */
MPS_INTERNAL void mps_gstr_reset(void);
MPS_INTERNAL OTF2_StringRef mps_gstr(OTF2_GlobalDefWriter *w, const char *s);
MPS_INTERNAL char *mps_region_names(void);
MPS_INTERNAL void mps_run_properties(void (*put)(enum mps_live_key, const char *,
                                                 const char *));
MPS_INTERNAL void mps_set_properties(OTF2_Archive *ar);
/* defs.c: the CPUs this rank's host offers (online, within a cgroup v2 quota) */
MPS_INTERNAL int mps_host_cpus(void);
/* defs.c: MPISCOPE::HOST_CPUS, the CPUs of each distinct host in first-rank order, from
 * every rank's host name (`hostlen` bytes each) and CPU count, at rank 0 */
MPS_INTERNAL void mps_set_host_cpus(OTF2_Archive *ar, const char *hosts, size_t hostlen,
                                    const int *cpus, int size);
MPS_INTERNAL int mps_write_global_defs(OTF2_GlobalDefWriter *gw, uint64_t gmin,
                                       uint64_t gmax, const char *hosts,
                                       const uint64_t *nevents, const int32_t *cw, int ncw,
                                       uint32_t **order_out);
MPS_INTERNAL void mps_set_thread_locations(const uint32_t *nthreads, const uint64_t *nevents);
MPS_INTERNAL void mps_write_local_defs(OTF2_Archive *ar, const uint32_t *map,
                                       const uint32_t *order, int ncomms, int have_fin);
MPS_INTERNAL int mps_write_single_rank_defs(OTF2_Archive *ar, OTF2_GlobalDefWriter *gw,
                                            int rank, uint64_t nevents, mps_location *loc,
                                            uint32_t nloc, uint32_t **order);
/* the same for refs first..first+n-1, added to what was set before (call-path frames) */
MPS_INTERNAL void mps_add_callsite_objects(OTF2_Archive *ar, uint32_t first,
                                           const char *const *objects,
                                           const char *const *build_ids,
                                           const uint64_t *offsets, uint32_t n);
MPS_INTERNAL void mps_set_callsite_objects(OTF2_Archive *ar, const char *const *objects,
                                           const char *const *build_ids,
                                           const uint64_t *offsets, uint32_t n);
/* callpath.c: call paths of up to mps_cfg.callpath_depth frames (MPISCOPE_CALLPATH_DEPTH) */
#define MPS_CALLPATH_DEFAULT 4
#define MPS_CALLPATH_MAX 64
MPS_INTERNAL uint32_t mps_callpath_id(struct mps_recorder *r, void *ra, uintptr_t sp);
/* the id of a path given by its frames' keys (python.c: Python frames), lock held */
MPS_INTERNAL uint32_t mps_callpath_intern(const uintptr_t *frames, unsigned n);
/* Finalize: every rank's paths unified at rank 0 into CallingContext definitions (after
 * the call sites' SourceCodeLocations 0..scl_base-1); sets the id map below */
MPS_INTERNAL void mps_unify_callpaths(OTF2_GlobalDefWriter *gw, uint32_t scl_base);
/* salvage: this rank's paths alone (gw: its archive's global definitions) */
MPS_INTERNAL void mps_single_rank_callpaths(OTF2_Archive *ar, OTF2_GlobalDefWriter *gw,
                                            uint32_t scl_base);
extern uint32_t *mps_cp_map MPS_INTERNAL; /* local path id → global CallingContext */
extern uint32_t mps_cp_nmap MPS_INTERNAL;
/* finalize.c */
MPS_INTERNAL void mps_live_said(void);
/* salvage.c */
MPS_INTERNAL void mps_catch_stop_signals(void);

/* objects.c: windows, files, I/O handles and groups named by RMA and MPI-IO records */
enum { MPS_OBJ_WIN = 1, MPS_OBJ_FILE, MPS_OBJ_HANDLE, MPS_OBJ_GROUP, MPS_OBJ_KINDS };
MPS_INTERNAL uint32_t mps_obj_new_ref(void);
MPS_INTERNAL void mps_obj_add(int kind, uint32_t ref, uint32_t x, uint32_t y,
                              const void *payload, size_t bytes, int mine);
MPS_INTERNAL uint32_t mps_obj_intern(int kind, const void *payload, size_t bytes);
MPS_INTERNAL void mps_objects_gather(void);
MPS_INTERNAL void mps_objects_use_own(void);
MPS_INTERNAL int mps_objects_restore(const int32_t *w, int nwords); /* -1: no memory */
MPS_INTERNAL void mps_objects_write_defs(OTF2_GlobalDefWriter *gw, const uint32_t *order,
                                         int ncomms);
MPS_INTERNAL void mps_objects_share_pairs(void);
MPS_INTERNAL void mps_objects_write_maps(OTF2_DefWriter *dw);
MPS_INTERNAL char *mps_gather_blob(const char *mine, int len, int **lens, int **displs);
/* rma.c, io.c: a request-based RMA operation or non-blocking I/O completed (requests.c) */
MPS_INTERNAL void mps_rma_req_done(const req_slot *r);
MPS_INTERNAL void mps_io_req_done(const req_slot *r, const MPI_Status *st);

/* ------------------------------------------------------ inline hot path */

/* The shared tables (requests, call sites, communicators) under MPI_THREAD_MULTIPLE;
 * never an event buffer: each thread has its own. */
#define LOCK() do { if (mps_rt.mt) pthread_mutex_lock(&mps_rt.lock); } while (0)
#define UNLOCK() do { if (mps_rt.mt) pthread_mutex_unlock(&mps_rt.lock); } while (0)

/* Trace time now, for records written straight to OTF2 (outside the hot path): this
 * host's monotonic clock shifted onto rank 0's (offset from MPI_Init). */
static inline uint64_t now(void)
{
    struct mps_recorder *r = tl_rec ? tl_rec : &mps_rt;
    uint64_t t = mps_mono_ns() + (uint64_t)mps_job.off_init;
    if (!r->first_ts)
        r->first_ts = t;
    r->last_ts = t;
    return t;
}

/* Events share their phase's timestamp (taken at Enter and once after the PMPI call):
 * each thread has its own phase and its own location. */
static inline uint64_t stamp(void)
{
    return tl_t;
}

/* Room for one more record of any kind, then its header: the raw-buffer append, into
 * the calling thread's buffer (its recorder exists: mps_enter made it). */
static inline uint64_t *ev(enum mps_ev kind, unsigned op, unsigned region, uint32_t a,
                           int nwords)
{
    struct mps_recorder *r = tl_rec;
    if (__builtin_expect(mps_evbuf_full(&r->eb), 0)) mps_flush_events(1);
    return mps_ev_put(&r->eb, stamp(), kind, op, region, a, nwords);
}

#define HANDLE_KEY(h) handle_key(&(h), sizeof(h))
static inline uint64_t handle_key(const void *h, size_t n)
{
    uint64_t k = 0;
    memcpy(&k, h, n < sizeof k ? n : sizeof k);
    return k;
}

static inline int comm_lookup(MPI_Comm c, uint32_t *ref)
{
    if (c == MPI_COMM_WORLD) { *ref = COMM_WORLD_REF; return 1; }
    if (c == MPI_COMM_SELF) { *ref = COMM_SELF_REF; return 1; }
    /* another thread may be adding a communicator (and growing the table) */
    if (mps_rt.mt) pthread_rwlock_rdlock(&mps_comms.lock);
    const comm_slot *s = comm_table_find(&mps_comms.tab, HANDLE_KEY(c));
    int found = s != NULL;
    if (s) *ref = s->ref;
    if (mps_rt.mt) pthread_rwlock_unlock(&mps_comms.lock);
    return found;
}

static inline uint32_t comm_ref(MPI_Comm c)
{
    uint32_t r;
    return comm_lookup(c, &r) ? r : OTF2_UNDEFINED_COMM;
}

/* Size of a datatype, and whether it is predefined (those are remembered: Open MPI's
 * MPI_Type_size and MPI_Type_get_envelope cost ~50 instructions each, several per call) */
static inline int type_info(MPI_Datatype type, int64_t *size)
{
    uint64_t k = HANDLE_KEY(type);
    type_slot *e = &mps_types[(k ^ k >> 6 ^ k >> 12) & (MPS_TYPE_SLOTS - 1)];
    int known = !mps_rt.mt && e->used && e->key == k; /* multi-threaded: no shared cache */
    if (known && e->named) {
        *size = e->size;
        return 1;
    }
    /* a derived type may exceed 2 GiB, where MPI_Type_size's int says MPI_UNDEFINED */
    MPI_Count n = 0;
#if MPI_VERSION >= 4
    PMPI_Type_size_c(type, &n);
#else
    PMPI_Type_size_x(type, &n);
#endif
    *size = n > 0 ? (int64_t)n : 0;
    if (known) return 0; /* derived: its size may change with the handle's reuse */
    int ni, na, nd, combiner;
    PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner);
    int named = combiner == MPI_COMBINER_NAMED;
    /* a derived handle stays non-predefined even when freed and reused: both kinds of
     * entry stay true */
    if (!mps_rt.mt) {
        e->key = k;
        e->size = named ? (int32_t)*size : 0; /* a predefined type's size: a few bytes */
        e->named = (uint8_t)named;
        e->used = 1;
    }
    return named;
}

/* Bytes a status says were received, also beyond 2 GiB on an MPI-4 library (there
 * MPI_Get_count's int says MPI_UNDEFINED); -1 where it says nothing. */
static inline int64_t status_bytes(const MPI_Status *st)
{
#if MPI_VERSION >= 4
    MPI_Count n = MPI_UNDEFINED;
    if (PMPI_Get_count_c(st, MPI_BYTE, &n) != MPI_SUCCESS) return -1;
#else
    int n = MPI_UNDEFINED;
    if (PMPI_Get_count(st, MPI_BYTE, &n) != MPI_SUCCESS) return -1;
#endif
    return n < 0 ? -1 : (int64_t)n; /* MPI_UNDEFINED is negative */
}

#endif
