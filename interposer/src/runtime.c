/* mpiscope runtime: the per-process OTF2 trace writer behind the generated wrappers.
 *
 * One static `S` holds everything (the per-process trace writer). Hot path:
 * mps_enter/mps_leave and the event helpers read the clock (rdtsc where the kernel
 * trusts the TSC), look up a call site id in an open-addressing table and append a raw
 * record to the event buffer (evbuf.h), which is encoded into OTF2 in batches; no
 * allocation, no syscall, no lock unless MPI_THREAD_MULTIPLE.
 */
#define _GNU_SOURCE
#include "mpiscope.h"
#include "evbuf.h"
#include "iosafe.h"
#include "live.h"
#include "outdir.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <otf2/otf2.h>
#define OTF2_MPI_USE_PMPI
#include <otf2/OTF2_MPI_Collectives.h>

#define MPS_VERSION "0.1.0"
#define COMM_WORLD_REF 0
#define COMM_SELF_REF 1
#define MPS_COMM_REF_SPAN 4096u /* refs a single creator rank may hand out */

enum req_kind { REQ_SEND = 1, REQ_RECV = 2, REQ_COLL = 3 };

typedef struct {
    uint64_t key; /* the MPI_Request handle's bits */
    uint64_t id;
    uint64_t bytes, sent, recvd;
    uint32_t comm;
    int32_t peer, tag, root;
    uint8_t used, kind, persistent, active, coll_op;
    uint8_t cancel; /* MPI_Cancel was called: ask MPI_Test_cancelled at completion */
} req_slot;

typedef struct {
    uint64_t key; /* the MPI_Comm handle's bits */
    uint32_t ref;
    uint8_t used;
} comm_slot;

typedef struct {
    uint32_t ref, parent;
    int32_t size;
    int32_t creator;  /* this rank is the comm's rank 0: it contributes the definition */
    int32_t *members; /* world ranks in comm-rank order */
    char name[64];    /* MPI_Comm_set_name, or "" */
} comm_def;

/* A serialized communicator definition: ref, parent, size, name words, members, name. */
#define COMM_REC_WORDS(d) (4 + (d)[2] + (d)[3])
#define COMM_NAME_WORDS(name) ((int)((strlen(name) + sizeof(int32_t)) / sizeof(int32_t)))

typedef struct {
    uint64_t addr;
    uint32_t id;
    uint8_t used;
} cs_slot;

/* predefined datatypes never change or go away: their sizes are remembered (and which
 * handles are derived, so those skip the envelope query) */
#define MPS_TYPE_SLOTS 64
typedef struct {
    uint64_t key; /* the MPI_Datatype handle's bits */
    int32_t size; /* predefined types only */
    uint8_t used, named;
} type_slot;

typedef struct chunk {
    struct chunk *next;
    uint64_t size;
} chunk;

static struct {
    int state; /* 0: not initialised, 1: tracing, 2: pass-through */
    int failed; /* OTF2 reported an error: stop encoding */
    int werr;   /* why the first write failed: errno, or -OTF2 code where none maps */
    int tsc;    /* raw times are TSC ticks */
    mps_evbuf eb;
    mps_timemap tm; /* raw → trace time for the events now in eb */
    uint64_t flushes, encode_ns; /* raw-buffer batches encoded mid-run; time encoding */
    int have_icomm;
    int rank, size, mt;
    pid_t pid; /* the traced process (a fork()ed child shares S but is not it) */
    pthread_mutex_t lock;
    MPI_Comm icomm; /* private duplicate of MPI_COMM_WORLD for our own messages */
    OTF2_Archive *archive;
    OTF2_EvtWriter *evt;
    OTF2_AttributeList *attrs;
    int64_t t_init_local, off_init, t_fin_local, off_fin;
    uint64_t first_ts, last_ts;
    uint64_t next_req_id;
    uint64_t pool_budget, pool_used, chunk_size;
    size_t hash_bytes;
    unsigned char filtered[MPS_FN_COUNT];
    char outdir[PATH_MAX];
    char host[256];
    /* call sites */
    cs_slot *cs;
    uint32_t cs_cap, cs_n;
    void **cs_addr;
    /* requests */
    req_slot *req;
    uint64_t req_cap, req_n, req_dead;
    /* communicators */
    comm_slot *comm;
    uint32_t comm_cap, comm_n, comm_dead, comm_counter;
    type_slot types[MPS_TYPE_SLOTS];
    /* each function's last call site: loops call the same site over and over */
    void *last_ra[MPS_FN_COUNT];
    uint32_t last_cs[MPS_FN_COUNT];
    comm_def *defs;
    uint32_t ndefs, defs_cap;
    uint64_t coll_seq;
    uint64_t nevents_closed;
    struct chunk *spare; /* flushed event chunks kept for reuse */
    int warned;
    volatile sig_atomic_t encoding; /* inside flush_events: a signal must not salvage */
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void catch_stop_signals(void);

/* current call is filtered out; initial-exec: no __tls_get_addr call in the hot path */
static __thread int tl_skip __attribute__((tls_model("initial-exec")));
/* Set by a forwarding Fortran door (MPICH): the Fortran caller, to be recorded as the call
 * site of the C call the library's binding makes next instead of the binding itself */
static __thread void *tl_fcaller __attribute__((tls_model("initial-exec")));
/* Raw timestamp of the current call's phase: taken at Enter and once after the PMPI
 * call, shared by the events of that phase (a clock read is a good part of our budget) */
static __thread uint64_t tl_t __attribute__((tls_model("initial-exec")));

/* ------------------------------------------------------------------ utils */

/* write(2), not stdio: this may run in the stop-signal handler */
static void to_stderr(const char *line)
{
    for (size_t len = strlen(line), done = 0; done < len;) {
        ssize_t n = write(STDERR_FILENO, line + done, len - done);
        if (n <= 0 && errno != EINTR) break;
        if (n > 0) done += (size_t)n;
    }
}

/* Under `mpiscope run`, MPISCOPE_STATUS_FILE names a file it created (never we) and
 * prints at the end as its one-line verdict on the trace. 0: appended. */
static int to_status(const char *text)
{
    const char *status = getenv("MPISCOPE_STATUS_FILE");
    if (!status || !*status) return -1;
    int fd = open(status, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t len = strlen(text);
    ssize_t n = write(fd, text, len);
    return (close(fd) == 0) & (n == (ssize_t)len) ? 0 : -1;
}

/* Why there is no trace, at the end of the run: through mpiscope run's verdict where it
 * asked for it, else on stderr. */
static void say(const char *line)
{
    if (to_status(line) != 0) to_stderr(line);
}

/* A trace lost at MPI_Init is said at once (the job may run for hours); mpiscope run
 * only learns that it was said, and adds nothing. */
static void warn_once(const char *fmt, ...)
{
    if (S.warned)
        return;
    S.warned = 1;
    char msg[PATH_MAX + 512], line[PATH_MAX + 600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "mpiscope: warning: %s; continuing untraced\n", msg);
    to_stderr(line);
    to_status("told\n");
}

/* The trace in `dir` could not be written: the one line that says so. */
static void say_not_written(const char *dir, const char *why)
{
    char line[PATH_MAX + 600];
    snprintf(line, sizeof line, "mpiscope: warning: trace not written to %s: %s\n", dir, why);
    say(line);
}

/* Trace time now, for records written straight to OTF2 (outside the hot path): this
 * host's monotonic clock shifted onto rank 0's (offset from MPI_Init). */
static inline uint64_t now(void)
{
    uint64_t t = mps_mono_ns() + (uint64_t)S.off_init;
    if (!S.first_ts)
        S.first_ts = t;
    S.last_ts = t;
    return t;
}

/* With MPI_THREAD_MULTIPLE events are stamped under the lock, so a location's stream
 * stays ordered; otherwise they share the phase's timestamp. */
static inline uint64_t stamp(void)
{
    return S.mt ? mps_ticks(S.tsc) : tl_t;
}

/* Encode the buffered events into OTF2. In the middle of the run (`record`) the time it
 * takes is recorded as a BufferFlush, as OTF2 records its own flushes to disk. */
static __attribute__((noinline, cold)) void flush_events(int record)
{
    mps_io_guard_begin(); /* OTF2 writes full chunks to disk while encoding */
    S.encoding = 1;
    mps_anchor(S.tsc, &S.tm.raw1, &S.tm.ns1);
    mps_timemap_fix(&S.tm);
    uint64_t t_start = S.tm.ns1 + (uint64_t)S.tm.offset;
    S.flushes += record;
    mps_evbuf_encode(&S.eb, S.evt, S.attrs, &S.tm, &S.last_ts, &S.failed);
    S.encode_ns += mps_mono_ns() - S.tm.ns1;
    if (record) mps_live_next_window(&S.eb, S.tm.raw1, S.tm.ns1); /* crash-safe log */
    if (record && !S.failed) {
        if (t_start < S.last_ts) t_start = S.last_ts;
        OTF2_EvtWriter_BufferFlush(S.evt, NULL, t_start, now());
    }
    mps_anchor(S.tsc, &S.tm.raw0, &S.tm.ns0);
    if (record) mps_live_window_start(S.tm.raw0, S.tm.ns0);
    tl_t = S.tm.raw0; /* events still to come in this call happen after the flush */
    S.encoding = 0;
    mps_io_guard_end();
}

/* Room for one more record of any kind, then its header: the raw-buffer append. */
static inline uint64_t *ev(enum mps_ev kind, unsigned op, unsigned region, uint32_t a,
                           int nwords)
{
    if (__builtin_expect(mps_evbuf_full(&S.eb), 0)) flush_events(1);
    return mps_ev_put(&S.eb, stamp(), kind, op, region, a, nwords);
}

#define LOCK() do { if (S.mt) pthread_mutex_lock(&S.lock); } while (0)
#define UNLOCK() do { if (S.mt) pthread_mutex_unlock(&S.lock); } while (0)

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

/* Copy the live slots (used == 1) of an open-addressing table into a fresh, larger one:
 * the one rehash the call-site, communicator and request tables share. */
#define MPS_REHASH(dst, dcap, src, scap, keyf)                                \
    for (uint64_t i_ = 0; i_ < (uint64_t)(scap); i_++) {                      \
        if ((src)[i_].used != 1) continue;                                    \
        uint64_t j_ = mix64((src)[i_].keyf) & ((uint64_t)(dcap) - 1);         \
        while ((dst)[j_].used) j_ = (j_ + 1) & ((uint64_t)(dcap) - 1);        \
        (dst)[j_] = (src)[i_];                                                \
    }

#define HANDLE_KEY(h) handle_key(&(h), sizeof(h))
static inline uint64_t handle_key(const void *h, size_t n)
{
    uint64_t k = 0;
    memcpy(&k, h, n < sizeof k ? n : sizeof k);
    return k;
}

/* OTF2's codes for the errno values a write can fail with (disk full, quota, file
 * size limit, I/O error...): the warning names the reason as strerror would. */
static int otf2_errno(OTF2_ErrorCode code)
{
    static const struct { OTF2_ErrorCode code; int err; } map[] = {
        {OTF2_ERROR_ENOSPC, ENOSPC}, {OTF2_ERROR_EFBIG, EFBIG}, {OTF2_ERROR_EIO, EIO},
        {OTF2_ERROR_EDQUOT, EDQUOT}, {OTF2_ERROR_EACCES, EACCES}, {OTF2_ERROR_EROFS, EROFS},
        {OTF2_ERROR_EPERM, EPERM}, {OTF2_ERROR_ENOENT, ENOENT}, {OTF2_ERROR_ENOTDIR, ENOTDIR},
        {OTF2_ERROR_EISDIR, EISDIR}, {OTF2_ERROR_EMFILE, EMFILE}, {OTF2_ERROR_ENFILE, ENFILE},
        {OTF2_ERROR_EEXIST, EEXIST}, {OTF2_ERROR_ENAMETOOLONG, ENAMETOOLONG},
        {OTF2_ERROR_ESTALE, ESTALE}, {OTF2_ERROR_ENOMEM, ENOMEM},
    };
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (map[i].code == code) return map[i].err;
    return -(int)code;
}

static const char *reason(int werr)
{
    return werr > 0 ? strerror(werr) : OTF2_Error_GetDescription((OTF2_ErrorCode)-werr);
}

/* OTF2 reports errors through this callback; any error stops tracing cleanly for this
 * rank. Nothing is printed here: at MPI_Finalize the ranks agree that the trace was not
 * written and rank 0 says so once (write_failed). */
static OTF2_ErrorCode otf2_error(void *user, const char *file, uint64_t line,
                                 const char *func, OTF2_ErrorCode code,
                                 const char *fmt, va_list va)
{
    (void)user; (void)file; (void)line; (void)func; (void)fmt; (void)va;
    if (!S.werr) S.werr = otf2_errno(code);
    S.state = 2;
    S.failed = 1;
    return code;
}

int mps_active(void) { return S.state == 1; }

int mps_filtered(enum mps_fn fn) { return S.filtered[fn]; }

/* ----------------------------------------------------------- call sites */

/* A new call site goes to the crash-safe log with its object and load bias, so that it
 * can be resolved after the process is gone (live.h). Once per distinct site. */
static __attribute__((noinline, cold)) void live_callsite(uint32_t id, void *ra)
{
    if (!mps_live_on()) return;
    struct mps_live_callsite c = {.id = id, .addr = (uint64_t)(uintptr_t)ra};
    Dl_info info;
    struct link_map *lm = NULL;
    char exe[PATH_MAX] = "";
    const char *path = "";
    if (dladdr1((char *)ra - 1, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm) {
        c.bias = (uint64_t)lm->l_addr;
        c.fbase = (uint64_t)(uintptr_t)info.dli_fbase;
        if (lm->l_name && lm->l_name[0]) {
            path = lm->l_name;
        } else { /* the program itself: its link map has no name, argv[0] may be relative */
            ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
            if (n > 0) { exe[n] = 0; path = exe; }
        }
    }
    mps_live_record(MPS_LIVE_CALLSITE, &c, sizeof c, path, strlen(path));
}

uint32_t mps_callsite_id(void *ra)
{
    uint64_t a = (uint64_t)(uintptr_t)ra;
    if (S.cs_n * 2 >= S.cs_cap) { /* grow: rare, once per new distinct site */
        uint32_t cap = S.cs_cap ? S.cs_cap * 2 : 256;
        cs_slot *t = calloc(cap, sizeof *t);
        void **addrs = realloc(S.cs_addr, (size_t)cap * sizeof *addrs);
        if (!t || !addrs) {
            free(t);
            if (addrs) S.cs_addr = addrs;
            return UINT32_MAX;
        }
        S.cs_addr = addrs;
        MPS_REHASH(t, cap, S.cs, S.cs_cap, addr);
        free(S.cs);
        S.cs = t;
        S.cs_cap = cap;
    }
    uint32_t j = mix64(a) & (S.cs_cap - 1);
    while (S.cs[j].used) {
        if (S.cs[j].addr == a) return S.cs[j].id;
        j = (j + 1) & (S.cs_cap - 1);
    }
    S.cs[j].used = 1;
    S.cs[j].addr = a;
    S.cs[j].id = S.cs_n;
    S.cs_addr[S.cs_n] = ra;
    live_callsite(S.cs_n, ra);
    return S.cs_n++;
}

/* ---------------------------------------------- forwarding Fortran doors */

void *mps_fortran_next(const char *name, const char *pname)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) f = dlsym(RTLD_NEXT, pname);
    if (!f) { /* a Fortran program always has its MPI's Fortran library loaded */
        fprintf(stderr, "mpiscope: error: %s: not found in the MPI Fortran library\n", name);
        abort();
    }
    return f;
}

void mps_fortran_caller(void *ra) { tl_fcaller = ra; }

/* ------------------------------------------------------- enter / leave */

void mps_enter(enum mps_fn fn, void *ra)
{
    tl_skip = S.filtered[fn];
    if (tl_skip) return;
    LOCK();
    if (__builtin_expect(mps_evbuf_full(&S.eb), 0)) flush_events(1);
    tl_t = mps_ticks(S.tsc);
    if (__builtin_expect(tl_fcaller != NULL, 0)) { ra = tl_fcaller; tl_fcaller = NULL; }
    if (ra != S.last_ra[fn]) {
        S.last_ra[fn] = ra;
        S.last_cs[fn] = mps_callsite_id(ra);
    }
    mps_ev_put(&S.eb, tl_t, MPS_EV_ENTER, 0, fn, S.last_cs[fn], 0);
    UNLOCK();
}

void mps_after(void)
{
    if (!tl_skip && S.state == 1 && !S.mt) tl_t = mps_ticks(S.tsc);
}

void mps_leave(enum mps_fn fn)
{
    if (S.filtered[fn] || S.state != 1) return;
    LOCK();
    ev(MPS_EV_LEAVE, 0, fn, 0, 0);
    UNLOCK();
}

/* -------------------------------------------------------- communicators */

static int comm_lookup(MPI_Comm c, uint32_t *ref)
{
    if (c == MPI_COMM_WORLD) { *ref = COMM_WORLD_REF; return 1; }
    if (c == MPI_COMM_SELF) { *ref = COMM_SELF_REF; return 1; }
    if (!S.comm_cap) return 0;
    uint64_t k = HANDLE_KEY(c);
    uint32_t j = mix64(k) & (S.comm_cap - 1);
    while (S.comm[j].used) {
        if (S.comm[j].used == 1 && S.comm[j].key == k) { *ref = S.comm[j].ref; return 1; }
        j = (j + 1) & (S.comm_cap - 1);
    }
    return 0;
}

static uint32_t comm_ref(MPI_Comm c)
{
    uint32_t r;
    return comm_lookup(c, &r) ? r : OTF2_UNDEFINED_COMM;
}

static void comm_insert(uint64_t k, uint32_t ref)
{
    /* tombstones count too: every probe chain must still end at an empty slot */
    if ((S.comm_n + S.comm_dead + 1) * 2 >= S.comm_cap) {
        uint32_t cap = S.comm_cap ? S.comm_cap : 64;
        while ((S.comm_n + 1) * 4 >= cap) cap *= 2;
        comm_slot *t = calloc(cap, sizeof *t);
        if (!t) return;
        MPS_REHASH(t, cap, S.comm, S.comm_cap, key);
        free(S.comm);
        S.comm = t;
        S.comm_cap = cap;
        S.comm_dead = 0;
    }
    uint32_t j = mix64(k) & (S.comm_cap - 1);
    while (S.comm[j].used == 1) j = (j + 1) & (S.comm_cap - 1);
    if (S.comm[j].used == 2) S.comm_dead--;
    S.comm[j] = (comm_slot){.key = k, .ref = ref, .used = 1};
    S.comm_n++;
}

static int32_t *serialize_comm(const comm_def *d, int32_t *p);

/* A new communicator goes to the crash-safe log as salvage() would serialize it. */
static void live_comm(const comm_def *d)
{
    if (!mps_live_on()) return;
    int32_t *w = malloc((size_t)(4 + d->size + COMM_NAME_WORDS(d->name)) * sizeof *w);
    if (!w) return;
    size_t n = (size_t)(serialize_comm(d, w) - w);
    mps_live_record(MPS_LIVE_COMM, w, n * sizeof *w, NULL, 0);
    free(w);
}

void mps_comm_created(MPI_Comm parent, const MPI_Comm *newcomm)
{
    if (S.state != 1 || *newcomm == MPI_COMM_NULL) return;
    int inter = 0;
    PMPI_Comm_test_inter(*newcomm, &inter);
    if (inter) return; /* intercommunicators are not tracked (events name no comm) */
    int crank, csize;
    PMPI_Comm_rank(*newcomm, &crank);
    PMPI_Comm_size(*newcomm, &csize);
    /* The new communicator's rank 0 chooses a globally unique ref and tells the others. */
    uint32_t ref = 0;
    if (crank == 0)
        ref = 2 + (uint32_t)S.rank * MPS_COMM_REF_SPAN + (S.comm_counter++ % MPS_COMM_REF_SPAN);
    PMPI_Bcast(&ref, 1, MPI_UINT32_T, 0, *newcomm);
    LOCK();
    comm_insert(HANDLE_KEY(*newcomm), ref);
    { /* every member keeps it (for a salvaged trace); only the creator's is gathered */
        if (S.ndefs == S.defs_cap) {
            uint32_t cap = S.defs_cap ? S.defs_cap * 2 : 16;
            comm_def *d = realloc(S.defs, cap * sizeof *d);
            if (d) { S.defs = d; S.defs_cap = cap; }
        }
        if (S.ndefs < S.defs_cap) {
            comm_def *d = &S.defs[S.ndefs];
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
                    S.ndefs++;
                    live_comm(d);
                } else {
                    free(d->members);
                }
                PMPI_Group_free(&g);
                PMPI_Group_free(&wg);
            }
        }
    }
    UNLOCK();
}

void mps_comm_named(MPI_Comm comm, const char *name)
{
    uint32_t ref;
    if (S.state != 1 || !name || !comm_lookup(comm, &ref)) return;
    LOCK();
    for (uint32_t i = 0; i < S.ndefs; i++)
        if (S.defs[i].ref == ref) snprintf(S.defs[i].name, sizeof S.defs[i].name, "%s", name);
    mps_live_record(MPS_LIVE_COMM_NAME, &ref, sizeof ref, name, strlen(name));
    UNLOCK();
}

void mps_comm_freed(const MPI_Comm *comm)
{
    if (S.state != 1 || !S.comm_cap) return;
    LOCK();
    uint64_t k = HANDLE_KEY(*comm);
    uint32_t j = mix64(k) & (S.comm_cap - 1);
    while (S.comm[j].used) {
        if (S.comm[j].used == 1 && S.comm[j].key == k) {
            S.comm[j].used = 2; /* tombstone */
            S.comm_n--;
            S.comm_dead++;
            break;
        }
        j = (j + 1) & (S.comm_cap - 1);
    }
    UNLOCK();
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

/* ------------------------------------------------------------- requests */

static req_slot *req_find(uint64_t k)
{
    if (!S.req_cap) return NULL;
    uint64_t j = mix64(k) & (S.req_cap - 1);
    while (S.req[j].used) {
        if (S.req[j].used == 1 && S.req[j].key == k) return &S.req[j];
        j = (j + 1) & (S.req_cap - 1);
    }
    return NULL;
}

/* Completion: the oldest live entry for a handle. Open MPI hands out one shared,
 * already-complete request for eager self-sends, so one handle may stand for several. */
static req_slot *req_find_oldest(uint64_t k)
{
    if (!S.req_cap) return NULL;
    req_slot *best = NULL;
    uint64_t j = mix64(k) & (S.req_cap - 1);
    while (S.req[j].used) {
        if (S.req[j].used == 1 && S.req[j].key == k && (!best || S.req[j].id < best->id))
            best = &S.req[j];
        j = (j + 1) & (S.req_cap - 1);
    }
    return best;
}

static req_slot *req_add(uint64_t k)
{
    /* rehash before live entries and tombstones fill half the table, so every probe
     * chain still ends at an empty slot */
    if ((S.req_n + S.req_dead + 1) * 2 >= S.req_cap) {
        uint64_t cap = S.req_cap ? S.req_cap : 1024;
        while ((S.req_n + 1) * 4 >= cap) cap *= 2;
        req_slot *t = calloc(cap, sizeof *t);
        if (!t) return NULL;
        MPS_REHASH(t, cap, S.req, S.req_cap, key);
        free(S.req);
        S.req = t;
        S.req_cap = cap;
        S.req_dead = 0;
    }
    uint64_t j = mix64(k) & (S.req_cap - 1);
    while (S.req[j].used == 1) j = (j + 1) & (S.req_cap - 1);
    if (S.req[j].used == 2) S.req_dead--;
    memset(&S.req[j], 0, sizeof S.req[j]);
    S.req[j].used = 1;
    S.req[j].key = k;
    S.req_n++;
    return &S.req[j];
}

static void req_remove(req_slot *r)
{
    r->used = 2;
    S.req_n--;
    S.req_dead++;
}

/* Size of a datatype, and whether it is predefined (those are remembered: Open MPI's
 * MPI_Type_size and MPI_Type_get_envelope cost ~50 instructions each, several per call) */
static int type_info(MPI_Datatype type, int *size)
{
    uint64_t k = HANDLE_KEY(type);
    type_slot *e = &S.types[(k ^ k >> 6 ^ k >> 12) & (MPS_TYPE_SLOTS - 1)];
    int known = !S.mt && e->used && e->key == k; /* multi-threaded: no shared cache */
    if (known && e->named) {
        *size = e->size;
        return 1;
    }
    *size = 0;
    PMPI_Type_size(type, size);
    if (*size < 0) *size = 0; /* MPI_UNDEFINED: larger than an int */
    if (known) return 0; /* derived: its size may change with the handle's reuse */
    int ni, na, nd, combiner;
    PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner);
    int named = combiner == MPI_COMBINER_NAMED;
    /* a derived handle stays non-predefined even when freed and reused: both kinds of
     * entry stay true */
    if (!S.mt) {
        e->key = k;
        e->size = *size;
        e->named = (uint8_t)named;
        e->used = 1;
    }
    return named;
}

uint64_t mps_type_bytes(int count, MPI_Datatype type)
{
    int sz = 0;
    if (count <= 0 || type == MPI_DATATYPE_NULL) return 0;
    type_info(type, &sz);
    return (uint64_t)count * (uint64_t)sz;
}

uint64_t mps_sum_bytes(const int *counts, int n, MPI_Datatype type)
{
    uint64_t total = 0;
    if (!counts) return 0;
    for (int i = 0; i < n; i++) total += (uint64_t)(counts[i] > 0 ? counts[i] : 0);
    return mps_type_bytes(1, type) * total;
}

void mps_send(int dest, int tag, MPI_Comm comm, int count, MPI_Datatype type)
{
    if (tl_skip || S.state != 1 || dest == MPI_PROC_NULL) return;
    uint64_t bytes = mps_type_bytes(count, type);
    LOCK();
    uint64_t *x = ev(MPS_EV_SEND, 0, 0, (uint32_t)dest, 2);
    x[0] = comm_ref(comm) | (uint64_t)(uint32_t)tag << 32;
    x[1] = bytes;
    UNLOCK();
}

void mps_recv_done(const MPI_Status *st, MPI_Comm comm)
{
    if (tl_skip || S.state != 1 || !st || st->MPI_SOURCE == MPI_PROC_NULL) return;
    int n = 0;
    PMPI_Get_count(st, MPI_BYTE, &n);
    LOCK();
    uint64_t *x = ev(MPS_EV_RECV, 0, 0, (uint32_t)st->MPI_SOURCE, 2);
    x[0] = comm_ref(comm) | (uint64_t)(uint32_t)st->MPI_TAG << 32;
    x[1] = (uint64_t)(n > 0 ? n : 0);
    UNLOCK();
}

static void post_send(req_slot *r)
{
    r->id = ++S.next_req_id;
    r->active = 1;
    uint64_t *x = ev(MPS_EV_ISEND, 0, 0, (uint32_t)r->peer, 3);
    x[0] = r->comm | (uint64_t)(uint32_t)r->tag << 32;
    x[1] = r->bytes;
    x[2] = r->id;
}

static void post_recv(req_slot *r)
{
    r->id = ++S.next_req_id;
    r->active = 1;
    ev(MPS_EV_IRECV_REQUEST, 0, 0, 0, 1)[0] = r->id;
}

void mps_isend(int dest, int tag, MPI_Comm comm, int count, MPI_Datatype type,
               const MPI_Request *req, int persistent)
{
    if (tl_skip || S.state != 1 || *req == MPI_REQUEST_NULL) return;
    uint64_t bytes = mps_type_bytes(count, type);
    LOCK();
    req_slot *r = req_add(HANDLE_KEY(*req));
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

void mps_irecv(int source, int tag, MPI_Comm comm, int count, MPI_Datatype type,
               const MPI_Request *req, int persistent)
{
    if (tl_skip || S.state != 1 || *req == MPI_REQUEST_NULL) return;
    LOCK();
    req_slot *r = req_add(HANDLE_KEY(*req));
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
    if (tl_skip || S.state != 1) return;
    LOCK();
    req_slot *r = req_find(HANDLE_KEY(*req));
    if (r && r->kind == REQ_SEND) post_send(r);
    else if (r && r->kind == REQ_RECV) post_recv(r);
    UNLOCK();
}

static void complete_one(req_slot *r, const MPI_Status *st)
{
    int cancelled = 0;
    if (st && r->cancel && r->kind != REQ_COLL) PMPI_Test_cancelled(st, &cancelled);
    r->cancel = 0;
    if (r->active && r->kind) {
        if (cancelled) {
            ev(MPS_EV_CANCELLED, 0, 0, 0, 1)[0] = r->id;
        } else if (r->kind == REQ_SEND) {
            ev(MPS_EV_ISEND_DONE, 0, 0, 0, 1)[0] = r->id;
        } else if (r->kind == REQ_RECV && st && st->MPI_SOURCE != MPI_PROC_NULL) {
            int n = 0;
            PMPI_Get_count(st, MPI_BYTE, &n);
            uint64_t *x = ev(MPS_EV_IRECV, 0, 0, (uint32_t)st->MPI_SOURCE, 3);
            x[0] = r->comm | (uint64_t)(uint32_t)st->MPI_TAG << 32;
            x[1] = (uint64_t)(n > 0 ? n : 0);
            x[2] = r->id;
        } else if (r->kind == REQ_COLL) {
            uint64_t *x = ev(MPS_EV_NBC_DONE, r->coll_op, 0,
                             r->root < 0 ? OTF2_UNDEFINED_UINT32 : (uint32_t)r->root, 4);
            x[0] = r->comm;
            x[1] = r->sent;
            x[2] = r->recvd;
            x[3] = r->id;
        }
    }
    r->active = 0;
    if (!r->persistent) req_remove(r);
}

void mps_complete(const MPI_Request *saved, const MPI_Status *st)
{
    if (tl_skip || S.state != 1 || *saved == MPI_REQUEST_NULL) return;
    LOCK();
    req_slot *r = req_find_oldest(HANDLE_KEY(*saved));
    if (r) complete_one(r, st);
    UNLOCK();
}

void mps_complete_many(int n, const MPI_Request *saved, const MPI_Status *st,
                       const int *indices, int nidx)
{
    if (tl_skip || S.state != 1 || n <= 0 || !saved) return;
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
    if (tl_skip || S.state != 1 || !saved) return;
    LOCK();
    for (int i = 0; i < n; i++) {
        if (saved[i] == MPI_REQUEST_NULL) continue;
        req_slot *r = req_find(HANDLE_KEY(saved[i]));
        if (r && r->active && r->kind)
            ev(MPS_EV_TEST, 0, 0, 0, 1)[0] = r->id;
    }
    UNLOCK();
}

void mps_request_free(const MPI_Request *saved)
{
    if (S.state != 1 || *saved == MPI_REQUEST_NULL) return;
    LOCK();
    req_slot *r = req_find(HANDLE_KEY(*saved));
    if (r) req_remove(r); /* an active request completes unseen: MPI gives us no hook */
    UNLOCK();
}

void mps_cancelled_mark(const MPI_Request *req)
{
    /* the cancellation is recorded when Wait/Test reports it (MPI_Test_cancelled), asked
     * only of requests cancelled here */
    if (S.state != 1 || *req == MPI_REQUEST_NULL) return;
    LOCK();
    req_slot *r = req_find_oldest(HANDLE_KEY(*req)); /* the one completion will find */
    if (r) r->cancel = 1;
    UNLOCK();
}

/* ----------------------------------------------------------- collectives */

static const OTF2_CollectiveOp coll_ops[] = {
    [MPS_COLL_BARRIER] = OTF2_COLLECTIVE_OP_BARRIER,
    [MPS_COLL_BCAST] = OTF2_COLLECTIVE_OP_BCAST,
    [MPS_COLL_GATHER] = OTF2_COLLECTIVE_OP_GATHER,
    [MPS_COLL_GATHERV] = OTF2_COLLECTIVE_OP_GATHERV,
    [MPS_COLL_SCATTER] = OTF2_COLLECTIVE_OP_SCATTER,
    [MPS_COLL_SCATTERV] = OTF2_COLLECTIVE_OP_SCATTERV,
    [MPS_COLL_ALLGATHER] = OTF2_COLLECTIVE_OP_ALLGATHER,
    [MPS_COLL_ALLGATHERV] = OTF2_COLLECTIVE_OP_ALLGATHERV,
    [MPS_COLL_ALLTOALL] = OTF2_COLLECTIVE_OP_ALLTOALL,
    [MPS_COLL_ALLTOALLV] = OTF2_COLLECTIVE_OP_ALLTOALLV,
    [MPS_COLL_ALLTOALLW] = OTF2_COLLECTIVE_OP_ALLTOALLW,
    [MPS_COLL_ALLREDUCE] = OTF2_COLLECTIVE_OP_ALLREDUCE,
    [MPS_COLL_REDUCE] = OTF2_COLLECTIVE_OP_REDUCE,
    [MPS_COLL_REDUCE_SCATTER] = OTF2_COLLECTIVE_OP_REDUCE_SCATTER,
    [MPS_COLL_SCAN] = OTF2_COLLECTIVE_OP_SCAN,
    [MPS_COLL_EXSCAN] = OTF2_COLLECTIVE_OP_EXSCAN,
    [MPS_COLL_REDUCE_SCATTER_BLOCK] = OTF2_COLLECTIVE_OP_REDUCE_SCATTER_BLOCK,
};

void mps_coll_begin(void)
{
    if (tl_skip || S.state != 1) return;
    LOCK();
    /* single-threaded, Begin shares its region's Enter timestamp: one clock read less */
    ev(MPS_EV_COLL_BEGIN, 0, 0, 0, 0);
    UNLOCK();
}

int mps_hash_wanted(int count, MPI_Datatype type)
{
    if (tl_skip || S.state != 1 || count < 0 || type == MPI_DATATYPE_NULL) return 0;
    int size = 0;
    /* only contiguous predefined types: their bytes are exactly count * size in memory */
    int named = type_info(type, &size);
    return named && (uint64_t)count * (uint64_t)size <= S.hash_bytes;
}

uint64_t mps_hash_buf(const void *buf, int count, MPI_Datatype type)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64 */
    if (!buf || buf == MPI_IN_PLACE) return h;
    uint64_t n = mps_type_bytes(count, type);
    const unsigned char *p = buf;
    for (uint64_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

void mps_coll_end(enum mps_coll op, MPI_Comm comm, int root, uint64_t sent, uint64_t recvd,
                  int have_hash, uint64_t in_hash, uint64_t out_hash)
{
    if (tl_skip || S.state != 1) return;
    LOCK();
    uint64_t *x = ev(MPS_EV_COLL_END, coll_ops[op], 0,
                     root < 0 ? OTF2_UNDEFINED_UINT32 : (uint32_t)root, have_hash ? 5 : 3);
    x[0] = comm_ref(comm) | (uint64_t)(have_hash != 0) << 32;
    x[1] = sent;
    x[2] = recvd;
    if (have_hash) {
        x[3] = in_hash;
        x[4] = out_hash;
    }
    UNLOCK();
}

void mps_icoll(enum mps_coll op, MPI_Comm comm, int root, uint64_t sent, uint64_t recvd,
               const MPI_Request *req)
{
    if (tl_skip || S.state != 1 || *req == MPI_REQUEST_NULL) return;
    LOCK();
    req_slot *r = req_add(HANDLE_KEY(*req));
    if (r) {
        r->kind = REQ_COLL;
        r->coll_op = (uint8_t)coll_ops[op];
        r->comm = comm_ref(comm);
        r->root = root;
        r->sent = sent;
        r->recvd = recvd;
        r->id = ++S.next_req_id;
        r->active = 1;
        ev(MPS_EV_NBC_REQUEST, 0, 0, 0, 1)[0] = r->id;
    }
    UNLOCK();
}

/* ------------------------------------------------------- configuration */

/* A mistake in the configuration: every rank reads the same environment, so rank 0
 * alone says so, once per variable; the job goes on with the default. */
static void config_warning(const char *fmt, ...)
{
    if (S.rank != 0) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "mpiscope: warning: %s\n", msg);
}

/* 33554432 → "32M": sizes in messages as users write them */
static const char *size_str(uint64_t v, char *buf, size_t n)
{
    static const char units[] = "kMG";
    int u = -1;
    while (u < 2 && v && v % 1024 == 0) { v /= 1024; u++; }
    snprintf(buf, n, "%" PRIu64 "%.*s", v, u >= 0, u >= 0 ? &units[u] : "");
    return buf;
}

/* MPISCOPE_*_SIZE: a whole number of bytes with an optional k, M or G suffix (powers of
 * 1024; kB/KiB spellings too), within [lo, hi]. Anything else (abc, -1, 1T, 1e20) is a
 * mistake to report, not a number to guess: the default is used. Unset or empty: the
 * default, silently. */
static uint64_t parse_size(const char *var, uint64_t dflt, uint64_t lo, uint64_t hi)
{
    const char *s = getenv(var);
    if (!s || !*s) return dflt;
    uint64_t v = 0;
    const char *p = s;
    int ok = *p >= '0' && *p <= '9';
    for (; ok && *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10) ok = 0;
        else v = v * 10 + (uint64_t)(*p - '0');
    }
    unsigned shift = 0;
    if (ok && *p) {
        switch (*p++) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        default: ok = 0; break;
        }
        if (ok && *p && strcmp(p, "B") != 0 && strcmp(p, "iB") != 0) ok = 0;
    }
    if (ok && v > UINT64_MAX >> shift) ok = 0;
    v <<= shift;
    if (ok && v >= lo && v <= hi) return v;
    char a[32], b[32], c[32];
    if (!ok)
        config_warning("%s=%s is not a size (a whole number of bytes, optionally with a k, M "
                       "or G suffix); using the default %s", var, s, size_str(dflt, c, sizeof c));
    else if (hi == UINT64_MAX)
        config_warning("%s=%s is below %s; using the default %s", var, s,
                       size_str(lo, a, sizeof a), size_str(dflt, c, sizeof c));
    else
        config_warning("%s=%s is outside %s..%s; using the default %s", var, s,
                       size_str(lo, a, sizeof a), size_str(hi, b, sizeof b),
                       size_str(dflt, c, sizeof c));
    return dflt;
}

static void parse_filter(const char *spec)
{
    if (!spec || !*spec) return;
    int include = spec[0] == '+';
    if (include) {
        spec++;
        for (int i = 0; i < MPS_FN_COUNT; i++) S.filtered[i] = 1;
    }
    char buf[4096], unknown[1024] = "";
    size_t nu = 0;
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save, *tok = strtok_r(buf, ",: ", &save); tok; tok = strtok_r(NULL, ",: ", &save)) {
        int known = 0;
        for (int i = 0; i < MPS_FN_COUNT; i++)
            if (strcasecmp(tok, mps_fn_names[i]) == 0) {
                S.filtered[i] = (unsigned char)!include;
                known = 1;
            }
        if (!known && nu < sizeof unknown)
            nu += (size_t)snprintf(unknown + nu, sizeof unknown - nu, "%s%s", nu ? ", " : "", tok);
    }
    if (nu) /* a typo would otherwise silently trace what the user meant to leave out */
        config_warning("MPISCOPE_FILTER: ignoring %s: not MPI functions mpiscope traces",
                       unknown);
    /* the trace's skeleton is never filtered */
    S.filtered[MPS_FN_MPI_Init] = S.filtered[MPS_FN_MPI_Init_thread] = 0;
    S.filtered[MPS_FN_MPI_Finalize] = 0;
}

/* A variable with a few fixed values (MPISCOPE_LIVE, MPISCOPE_CLOCK): anything else
 * (`off`, `no`, a typo) is said once by rank 0 and the default applies. Unset or empty:
 * the default, silently. */
static void check_choice(const char *var, const char *a, const char *b, const char *dflt)
{
    const char *s = getenv(var);
    if (!s || !*s || strcmp(s, a) == 0 || strcmp(s, b) == 0) return;
    config_warning("%s=%s is neither %s nor %s; using the default (%s)", var, s, a, b, dflt);
}

static int mkdir_p(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
    struct stat st;
    if (stat(tmp, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) { errno = ENOTDIR; return -1; }
    return access(tmp, W_OK) == 0 ? 0 : -1;
}

/* The buffer is faulted in at Init, so an oversized MPISCOPE_BUFFER_SIZE must not take
 * the node's memory from the job: all ranks on this node together get at most a quarter
 * of the memory available now. */
static uint64_t buffer_cap(uint64_t want)
{
    MPI_Comm node;
    int local = 1;
    if (PMPI_Comm_split_type(S.icomm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        PMPI_Comm_size(node, &local);
        PMPI_Comm_free(&node);
    }
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return want;
    uint64_t cap = (uint64_t)pages * (uint64_t)page / 4 / (uint64_t)(local > 0 ? local : 1);
    if (want > cap) {
        if (S.rank == 0)
            fprintf(stderr, "mpiscope: warning: MPISCOPE_BUFFER_SIZE=%llu MiB per rank exceeds "
                    "a quarter of this node's free memory shared by %d ranks; using %llu MiB\n",
                    (unsigned long long)(want >> 20), local, (unsigned long long)(cap >> 20));
        want = cap;
    }
    return want;
}

/* ----------------------------------------------------- OTF2 callbacks */

static OTF2_FlushType pre_flush(void *u, OTF2_FileType ft, OTF2_LocationRef loc, void *cd,
                                bool final)
{
    (void)u; (void)ft; (void)loc; (void)cd; (void)final;
    return OTF2_FLUSH;
}

static OTF2_TimeStamp post_flush(void *u, OTF2_FileType ft, OTF2_LocationRef loc)
{
    (void)u; (void)ft; (void)loc;
    /* OTF2's own flushes to disk happen while a batch is encoded, long after those
     * events: they take no time of the run (the batch's BufferFlush does) */
    return S.last_ts;
}

static OTF2_FlushCallbacks flush_cbs = {.otf2_pre_flush = pre_flush,
                                        .otf2_post_flush = post_flush};

/* Event memory comes from a budget; when it is spent OTF2 flushes to disk. */
static void *chunk_alloc(void *u, OTF2_FileType ft, OTF2_LocationRef loc, void **per_buf,
                         uint64_t size)
{
    (void)u; (void)loc;
    if (ft == OTF2_FILETYPE_EVENTS && S.pool_used + size > S.pool_budget) return NULL;
    chunk *c = NULL;
    if (ft == OTF2_FILETYPE_EVENTS && S.spare && S.spare->size == size) {
        c = S.spare; /* reuse flushed chunks: their pages are already mapped */
        S.spare = c->next;
    } else {
        c = malloc(sizeof(chunk) + size);
    }
    if (!c) return NULL;
    c->size = size;
    c->next = *per_buf;
    *per_buf = c;
    if (ft == OTF2_FILETYPE_EVENTS) S.pool_used += size;
    return c + 1;
}

static void chunk_free_all(void *u, OTF2_FileType ft, OTF2_LocationRef loc, void **per_buf,
                           bool final)
{
    (void)u; (void)loc;
    for (chunk *c = *per_buf, *next; c; c = next) {
        next = c->next;
        if (ft == OTF2_FILETYPE_EVENTS) S.pool_used -= c->size;
        if (ft == OTF2_FILETYPE_EVENTS && !final) { c->next = S.spare; S.spare = c; }
        else free(c);
    }
    *per_buf = NULL;
    if (final)
        for (chunk *next; S.spare; S.spare = next) { next = S.spare->next; free(S.spare); }
}

static OTF2_MemoryCallbacks mem_cbs = {.otf2_allocate = chunk_alloc,
                                       .otf2_free_all = chunk_free_all};

/* -------------------------------------------------------- clock sync */

/* Offset of this rank's clock to rank 0's, from the ping-pong with the least round trip. */
static int64_t clock_offset(void)
{
    int64_t best_off = 0;
    uint64_t best_rtt = UINT64_MAX;
    enum { ROUNDS = 8, TAG = 31415 };
    for (int r = 1; r < S.size; r++) {
        for (int k = 0; k < ROUNDS; k++) {
            if (S.rank == 0) {
                uint64_t dummy, t0;
                PMPI_Recv(&dummy, 1, MPI_UINT64_T, r, TAG, S.icomm, MPI_STATUS_IGNORE);
                t0 = mps_mono_ns();
                PMPI_Send(&t0, 1, MPI_UINT64_T, r, TAG, S.icomm);
            } else if (S.rank == r) {
                uint64_t t1 = mps_mono_ns(), t0;
                PMPI_Send(&t1, 1, MPI_UINT64_T, 0, TAG, S.icomm);
                PMPI_Recv(&t0, 1, MPI_UINT64_T, 0, TAG, S.icomm, MPI_STATUS_IGNORE);
                uint64_t t2 = mps_mono_ns();
                if (t2 - t1 < best_rtt) {
                    best_rtt = t2 - t1;
                    best_off = (int64_t)t0 - (int64_t)((t1 + t2) / 2);
                }
            }
        }
    }
    /* An offset inside the round trip's uncertainty is no evidence of skew: ranks that
     * share a clock (one host, or namespaces on one kernel) must not be shifted by noise. */
    if (best_rtt != UINT64_MAX && (uint64_t)llabs(best_off) <= best_rtt / 2) best_off = 0;
    return best_off;
}

/* ------------------------------------------------------------- init */

static void disable(void)
{
    S.state = 2;
}

static void run_properties(void (*put)(enum mps_live_key, const char *, const char *));

/* The region names in region-ref order, each ended by '\n': recovery checks that its
 * build numbers the regions as the traced run's did. */
static char *region_names(void)
{
    size_t len = 1;
    for (int f = 0; f < MPS_FN_COUNT; f++) len += strlen(mps_fn_names[f]) + 1;
    char *s = malloc(len), *p = s;
    for (int f = 0; s && f < MPS_FN_COUNT; f++) p += sprintf(p, "%s\n", mps_fn_names[f]);
    return s;
}

static void live_property(enum mps_live_key k, const char *name, const char *value)
{
    (void)name;
    mps_live_string(k, value);
}

/* why this rank's crash-safe log could not be kept from MPI_Init on, "" if it could */
static char live_why[PATH_MAX + 256];

/* After a trace is written: the log was given up (no space, a file size limit, no
 * fallocate), said once for the job by the lowest rank that had to. Nothing is said when
 * the trace itself failed: its one line names the cause, the log no longer matters. */
static void live_said(void)
{
    const char *why = live_why[0] ? live_why : mps_live_lost();
    int mine = why ? S.rank : S.size, lowest = S.size;
    PMPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, S.icomm);
    if (why && S.rank == lowest) {
        char line[PATH_MAX * 2 + 512];
        snprintf(line, sizeof line, "mpiscope: warning: crash-safe event log disabled in %s: "
                 "%s\n", S.outdir, why);
        to_stderr(line);
    }
}

/* Crash-safe log (live.h), once MPI_Init's region is written: the event buffer becomes a
 * window onto DIR/.mpiscope-live/rank<N>.events and the header, properties and the call
 * sites seen so far go to rank<N>.defs. MPISCOPE_LIVE=0 keeps the anonymous buffer. */
static void live_start(enum mps_fn fn, uint32_t cs)
{
    const char *env = getenv("MPISCOPE_LIVE");
    /* a rank that must do without says so at the end (live_said), with the trace */
    int rc = env && strcmp(env, "0") == 0
                 ? 1 /* off */
                 : mps_live_open(S.outdir, S.rank, &S.eb, live_why, sizeof live_why);
    if (rc >= 0) live_why[0] = 0;
    if (rc == -2) { /* the buffer lost its memory: nowhere to record into */
        disable();
        return;
    }
    if (rc != 0) return;
    struct mps_live_header h = {
        .version = MPS_LIVE_VERSION, .rank = (uint32_t)S.rank, .size = (uint32_t)S.size,
        .pid = (uint32_t)S.pid, .tsc = S.tsc, .init_fn = (uint32_t)fn, .init_cs = cs,
        .nregions = MPS_FN_COUNT,
        .off_init = S.off_init, .t_init_local = S.t_init_local, .init_enter = S.first_ts,
        .init_leave = S.last_ts, .raw0 = S.tm.raw0, .ns0 = S.tm.ns0,
        .window_bytes = mps_evbuf_window_bytes(&S.eb)};
    memcpy(h.magic, MPS_LIVE_MAGIC, sizeof h.magic);
    mps_live_record(MPS_LIVE_HEADER, &h, sizeof h, NULL, 0);
    char *names = region_names();
    if (names) mps_live_record(MPS_LIVE_REGIONS, names, strlen(names), NULL, 0);
    free(names);
    mps_live_string(MPS_LIVE_HOST, S.host);
    run_properties(live_property);
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f)) boot[0] = 0;
        fclose(f);
    }
    boot[strcspn(boot, "\n")] = 0;
    mps_live_string(MPS_LIVE_BOOT_ID, boot); /* same boot: recovery can read the TSC rate */
    for (uint32_t i = 0; i < S.cs_n; i++) live_callsite(i, S.cs_addr[i]);
}

void mps_init_after(enum mps_fn fn, uint64_t t_enter, void *ra)
{
    if (S.state != 0) return;
    const char *dis = getenv("MPISCOPE_DISABLE");
    if (dis && *dis && strcmp(dis, "0") != 0) { disable(); return; }
    int thread_level = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&thread_level);
    S.mt = thread_level == MPI_THREAD_MULTIPLE;
    PMPI_Comm_rank(MPI_COMM_WORLD, &S.rank);
    S.pid = getpid();
    PMPI_Comm_size(MPI_COMM_WORLD, &S.size);
    PMPI_Comm_dup(MPI_COMM_WORLD, &S.icomm);
    S.have_icomm = 1;

    /* rank 0 names and creates the directory; everyone learns whether it worked */
    char dir[PATH_MAX] = "";
    int ok = 1;
    if (S.rank == 0) {
        const char *out = getenv("MPISCOPE_OUT");
        if (out && *out) {
            snprintf(dir, sizeof dir, "%s", out);
        } else {
            time_t t = time(NULL);
            struct tm tm;
            localtime_r(&t, &tm);
            strftime(dir, sizeof dir, "mpiscope-%Y%m%d-%H%M%S", &tm);
        }
        if (dir[0] != '/') { /* absolute, so every rank agrees whatever its cwd */
            char cwd[PATH_MAX], abs[PATH_MAX];
            if (getcwd(cwd, sizeof cwd) && snprintf(abs, sizeof abs, "%s/%s", cwd, dir) <
                                               (int)sizeof abs)
                memcpy(dir, abs, sizeof dir);
        }
        char moved[PATH_MAX];
        if (out && *out && strlen(out) >= sizeof dir) {
            /* cut to PATH_MAX it would name another directory: make none, say so */
            warn_once("cannot write trace directory %.200s…: %s", out, strerror(ENAMETOOLONG));
            ok = 0;
        } else if (mkdir_p(dir) != 0) {
            warn_once("cannot write trace directory %s: %s", dir, strerror(errno));
            ok = 0;
        } else if (mps_move_earlier_run(dir, getenv("MPISCOPE_JOB_OUTPUT"), moved,
                                        sizeof moved) != 0) {
            /* never deleted, never mixed: rather no trace than either */
            warn_once("cannot move the earlier run in %s aside (%s)", dir, strerror(errno));
            ok = 0;
        } else if (moved[0]) {
            fprintf(stderr, "mpiscope: the earlier run in %s was moved to %s\n", dir, moved);
        }
    }
    PMPI_Bcast(&ok, 1, MPI_INT, 0, S.icomm);
    PMPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, S.icomm);
    if (!ok) { disable(); return; }
    memcpy(S.outdir, dir, sizeof dir);

    S.chunk_size = parse_size("MPISCOPE_CHUNK_SIZE", 1 << 20, 256 << 10, 16 << 20);
    /* raw events wait in MPISCOPE_BUFFER_SIZE; OTF2 encodes them into a few chunks that
     * go to disk as they fill */
    uint64_t buffer_bytes =
        buffer_cap(parse_size("MPISCOPE_BUFFER_SIZE", 32 << 20, 1, UINT64_MAX));
    S.pool_budget = 4 * S.chunk_size;
    S.hash_bytes = (size_t)parse_size("MPISCOPE_HASH_BYTES", 64, 0, 1 << 30);
    parse_filter(getenv("MPISCOPE_FILTER"));
    check_choice("MPISCOPE_LIVE", "0", "1", "1: crash-safe live log on");
    check_choice("MPISCOPE_CLOCK", "tsc", "monotonic", "tsc where the kernel's clocksource is tsc");
    const char *h = getenv("MPISCOPE_HOSTNAME");
    if (h && *h) snprintf(S.host, sizeof S.host, "%s", h);
    else if (gethostname(S.host, sizeof S.host - 1) != 0) snprintf(S.host, sizeof S.host, "?");

    OTF2_Error_RegisterCallback(otf2_error, NULL);
    S.archive = OTF2_Archive_Open(S.outdir, "traces", OTF2_FILEMODE_WRITE, S.chunk_size,
                                  4 * 1024 * 1024, OTF2_SUBSTRATE_POSIX,
                                  OTF2_COMPRESSION_NONE);
    int good = S.archive != NULL;
    if (good) {
        OTF2_Archive_SetFlushCallbacks(S.archive, &flush_cbs, NULL);
        OTF2_Archive_SetMemoryCallbacks(S.archive, &mem_cbs, NULL);
        good = OTF2_MPI_Archive_SetCollectiveCallbacks(S.archive, S.icomm, MPI_COMM_NULL) ==
               OTF2_SUCCESS;
        OTF2_Archive_SetCreator(S.archive, "mpiscope " MPS_VERSION);
    }
    if (good) good = OTF2_Archive_OpenEvtFiles(S.archive) == OTF2_SUCCESS;
    if (good) {
        S.evt = OTF2_Archive_GetEvtWriter(S.archive, (OTF2_LocationRef)S.rank);
        S.attrs = OTF2_AttributeList_New();
        good = S.evt && S.attrs && mps_evbuf_init(&S.eb, buffer_bytes) == 0;
    }
    int all_good = 0;
    PMPI_Allreduce(&good, &all_good, 1, MPI_INT, MPI_MIN, S.icomm);
    if (!all_good) {
        if (S.rank == 0) warn_once("cannot open OTF2 archive in %s", S.outdir);
        mps_evbuf_free(&S.eb);
        disable();
        return;
    }

    PMPI_Barrier(S.icomm);
    S.off_init = clock_offset();
    S.t_init_local = (int64_t)mps_mono_ns();
    S.state = 1;
    catch_stop_signals();
    /* MPI_Init's own region: entered before tracing could start, so stamped afterwards */
    if (tl_fcaller) { ra = tl_fcaller; tl_fcaller = NULL; }
    uint32_t cs = mps_callsite_id(ra);
    if (cs != UINT32_MAX)
        OTF2_AttributeList_AddSourceCodeLocationRef(S.attrs, MPS_ATTR_CALLSITE, cs);
    S.first_ts = t_enter + (uint64_t)S.off_init;
    OTF2_EvtWriter_Enter(S.evt, S.attrs, S.first_ts, (OTF2_RegionRef)fn);
    OTF2_EvtWriter_Leave(S.evt, NULL, now(), (OTF2_RegionRef)fn);
    S.tsc = mps_tsc_usable();
    S.tm.tsc = S.tsc;
    S.tm.offset = S.off_init;
    mps_anchor(S.tsc, &S.tm.raw0, &S.tm.ns0);
    live_start(fn, cs);
}

uint64_t mps_clock(void)
{
    return mps_mono_ns();
}

/* --------------------------------------------------------- finalize */

static uint32_t g_string_next;
static OTF2_StringRef gstr(OTF2_GlobalDefWriter *w, const char *s)
{
    OTF2_StringRef ref = g_string_next++;
    OTF2_GlobalDefWriter_WriteString(w, ref, s);
    return ref;
}

static const char *region_role_paradigm(enum mps_fn fn, OTF2_RegionRole *role)
{
    *role = (OTF2_RegionRole)mps_fn_roles[fn];
    return mps_fn_names[fn];
}

/* Gather variable-length byte blobs at rank 0 (interposer-internal, on S.icomm). */
static char *gather_blob(const char *mine, int len, int **lens_out, int **displs_out)
{
    int *lens = NULL, *displs = NULL;
    char *all = NULL;
    if (S.rank == 0) {
        lens = calloc((size_t)S.size, sizeof(int));
        displs = calloc((size_t)S.size, sizeof(int));
    }
    PMPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, S.icomm);
    if (S.rank == 0) {
        int total = 0;
        for (int i = 0; i < S.size; i++) { displs[i] = total; total += lens[i]; }
        all = malloc((size_t)total + 1);
    }
    PMPI_Gatherv(mine, len, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, S.icomm);
    *lens_out = lens;
    *displs_out = displs;
    return all;
}

/* Call sites: resolve ours, unify at rank 0, write id maps + SourceCodeLocation defs. */
static void unify_callsites(OTF2_GlobalDefWriter *gw, uint32_t **local_to_global)
{
    mps_location *loc = calloc(S.cs_n ? S.cs_n : 1, sizeof *loc);
    mps_callsite_resolve(S.cs_addr, S.cs_n, loc);
    size_t cap = 64, len = 0;
    char *blob = malloc(cap);
    for (uint32_t i = 0; i < S.cs_n; i++) {
        const char *f = loc[i].file ? loc[i].file : "?";
        size_t need = strlen(f) + 16;
        if (len + need >= cap) { cap = (cap + need) * 2; blob = realloc(blob, cap); }
        len += (size_t)snprintf(blob + len, cap - len, "%s\t%u\n", f, loc[i].line);
        free(loc[i].file);
    }
    free(loc);
    int *lens, *displs;
    char *all = gather_blob(blob, (int)len, &lens, &displs);
    free(blob);

    /* rank 0: distinct (file, line) → global id; per rank, its local → global table */
    uint32_t *counts = NULL, *ids = NULL;
    int *idcounts = NULL, *iddispls = NULL;
    if (S.rank == 0) {
        int total = displs[S.size - 1] + lens[S.size - 1];
        all[total] = 0;
        counts = calloc((size_t)S.size, sizeof *counts);
        idcounts = calloc((size_t)S.size, sizeof(int));
        iddispls = calloc((size_t)S.size, sizeof(int));
        size_t nlines = 0;
        for (int i = 0; i < total; i++) nlines += all[i] == '\n';
        ids = malloc((nlines ? nlines : 1) * sizeof *ids);
        /* simple string table; call sites are few (hundreds), so a linear map suffices */
        char **keys = malloc((nlines ? nlines : 1) * sizeof *keys);
        uint32_t nkeys = 0, k = 0;
        for (int r = 0; r < S.size; r++) {
            iddispls[r] = (int)k;
            char *p = all + displs[r], *end = p + lens[r];
            while (p < end) {
                char *nl = memchr(p, '\n', (size_t)(end - p));
                if (!nl) break;
                *nl = 0;
                uint32_t g = 0;
                while (g < nkeys && strcmp(keys[g], p) != 0) g++;
                if (g == nkeys) {
                    keys[nkeys++] = p;
                    char *tab = strrchr(p, '\t');
                    unsigned line = 0;
                    if (tab) { *tab = 0; line = (unsigned)strtoul(tab + 1, NULL, 10); }
                    OTF2_StringRef fs = gstr(gw, p);
                    OTF2_GlobalDefWriter_WriteSourceCodeLocation(gw, g, fs, line);
                    if (tab) *tab = '\t';
                }
                ids[k++] = g;
                counts[r]++;
                p = nl + 1;
            }
            idcounts[r] = (int)counts[r];
        }
        free(keys);
    }
    *local_to_global = malloc((S.cs_n ? S.cs_n : 1) * sizeof(uint32_t));
    PMPI_Scatterv(ids, idcounts, iddispls, MPI_UINT32_T, *local_to_global, (int)S.cs_n,
                  MPI_UINT32_T, 0, S.icomm);
    free(all); free(lens); free(displs); free(counts); free(ids); free(idcounts); free(iddispls);
}

/* Hosts: gather every rank's host name at rank 0 for the system tree. */
static char *gather_hosts(void)
{
    char *all = NULL;
    if (S.rank == 0) all = calloc((size_t)S.size, sizeof S.host);
    PMPI_Gather(S.host, sizeof S.host, MPI_CHAR, all, sizeof S.host, MPI_CHAR, 0, S.icomm);
    return all;
}

/* One communicator definition as int32 words at p; returns the end. */
static int32_t *serialize_comm(const comm_def *d, int32_t *p)
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

/* Communicator definitions from their creators, serialized as int32 words. */
static int32_t *serialize_comms(int all, int *nwords)
{
    int len = 0;
    for (uint32_t i = 0; i < S.ndefs; i++)
        if (all || S.defs[i].creator) len += 4 + S.defs[i].size + COMM_NAME_WORDS(S.defs[i].name);
    int32_t *mine = malloc((size_t)(len ? len : 1) * sizeof *mine), *p = mine;
    for (uint32_t i = 0; i < S.ndefs; i++)
        if (all || S.defs[i].creator) p = serialize_comm(&S.defs[i], p);
    *nwords = len;
    return mine;
}

static int32_t *gather_comms(int *nwords)
{
    int len = 0;
    int32_t *mine = serialize_comms(0, &len);
    int *lens = NULL, *displs = NULL;
    int bytes = len * (int)sizeof(int32_t);
    char *all = gather_blob((char *)mine, bytes, &lens, &displs);
    free(mine);
    *nwords = 0;
    if (S.rank == 0) *nwords = (displs[S.size - 1] + lens[S.size - 1]) / (int)sizeof(int32_t);
    free(lens);
    free(displs);
    return (int32_t *)all;
}

/* Communicator refs chosen at creation are sparse; the definitions use dense refs
 * 2, 3, … in writing order (`order` receives the sparse refs in that order) and every
 * rank maps its event records onto them with an OTF2 id map. */
static int write_global_defs(OTF2_GlobalDefWriter *gw, uint64_t gmin, uint64_t gmax,
                             const char *hosts, const uint64_t *nevents, const int32_t *cw,
                             int ncw, uint32_t **order_out)
{
    OTF2_GlobalDefWriter_WriteClockProperties(gw, 1000000000u, gmin, gmax - gmin,
                                              OTF2_UNDEFINED_TIMESTAMP);
    OTF2_StringRef empty = gstr(gw, "");
    OTF2_GlobalDefWriter_WriteParadigm(gw, OTF2_PARADIGM_MPI, gstr(gw, "MPI"),
                                       OTF2_PARADIGM_CLASS_PROCESS);
    /* attributes: same refs on every rank */
    OTF2_GlobalDefWriter_WriteAttribute(gw, MPS_ATTR_CALLSITE, gstr(gw, "mpiscope:callsite"),
                                        gstr(gw, "call site of the MPI call"),
                                        OTF2_TYPE_SOURCE_CODE_LOCATION);
    OTF2_GlobalDefWriter_WriteAttribute(gw, MPS_ATTR_IN_HASH, gstr(gw, "mpiscope:in_hash"),
                                        gstr(gw, "FNV-1a 64 of the collective's input"),
                                        OTF2_TYPE_UINT64);
    OTF2_GlobalDefWriter_WriteAttribute(gw, MPS_ATTR_OUT_HASH, gstr(gw, "mpiscope:out_hash"),
                                        gstr(gw, "FNV-1a 64 of the collective's result"),
                                        OTF2_TYPE_UINT64);
    /* regions: one per MPI function, ref = function index */
    for (int f = 0; f < MPS_FN_COUNT; f++) {
        OTF2_RegionRole role;
        const char *name = region_role_paradigm((enum mps_fn)f, &role);
        OTF2_StringRef ns = gstr(gw, name);
        OTF2_GlobalDefWriter_WriteRegion(gw, (OTF2_RegionRef)f, ns, ns, empty, role,
                                         OTF2_PARADIGM_MPI, OTF2_REGION_FLAG_NONE, empty, 0, 0);
    }
    /* system tree: machine → one node per distinct host */
    OTF2_GlobalDefWriter_WriteSystemTreeNode(gw, 0, gstr(gw, "machine"), gstr(gw, "machine"),
                                             OTF2_UNDEFINED_SYSTEM_TREE_NODE);
    uint32_t *node_of = calloc((size_t)S.size, sizeof *node_of);
    uint32_t nnodes = 0;
    OTF2_StringRef node_class = gstr(gw, "node");
    for (int r = 0; r < S.size; r++) {
        const char *h = hosts + (size_t)r * sizeof S.host;
        int prev = -1;
        for (int q = 0; q < r; q++)
            if (strcmp(h, hosts + (size_t)q * sizeof S.host) == 0) { prev = q; break; }
        if (prev >= 0) { node_of[r] = node_of[prev]; continue; }
        node_of[r] = ++nnodes;
        OTF2_GlobalDefWriter_WriteSystemTreeNode(gw, node_of[r], gstr(gw, h), node_class, 0);
    }
    char name[64];
    for (int r = 0; r < S.size; r++) {
        snprintf(name, sizeof name, "MPI Rank %d", r);
        OTF2_GlobalDefWriter_WriteLocationGroup(gw, (OTF2_LocationGroupRef)r, gstr(gw, name),
                                                OTF2_LOCATION_GROUP_TYPE_PROCESS, node_of[r],
                                                OTF2_UNDEFINED_LOCATION_GROUP);
    }
    for (int r = 0; r < S.size; r++) {
        snprintf(name, sizeof name, "rank %d", r);
        OTF2_GlobalDefWriter_WriteLocation(gw, (OTF2_LocationRef)r, gstr(gw, name),
                                           OTF2_LOCATION_TYPE_CPU_THREAD, nevents[r],
                                           (OTF2_LocationGroupRef)r);
    }
    free(node_of);
    /* groups and communicators */
    uint64_t *members = malloc((size_t)S.size * sizeof *members);
    for (int r = 0; r < S.size; r++) members[r] = (uint64_t)r;
    OTF2_GlobalDefWriter_WriteGroup(gw, 0, gstr(gw, "MPI_COMM_WORLD locations"),
                                    OTF2_GROUP_TYPE_COMM_LOCATIONS, OTF2_PARADIGM_MPI,
                                    OTF2_GROUP_FLAG_NONE, (uint32_t)S.size, members);
    OTF2_GlobalDefWriter_WriteGroup(gw, 1, gstr(gw, "MPI_COMM_WORLD group"),
                                    OTF2_GROUP_TYPE_COMM_GROUP, OTF2_PARADIGM_MPI,
                                    OTF2_GROUP_FLAG_NONE, (uint32_t)S.size, members);
    OTF2_GlobalDefWriter_WriteGroup(gw, 2, gstr(gw, "MPI_COMM_SELF group"),
                                    OTF2_GROUP_TYPE_COMM_SELF, OTF2_PARADIGM_MPI,
                                    OTF2_GROUP_FLAG_NONE, 0, NULL);
    OTF2_GlobalDefWriter_WriteComm(gw, COMM_WORLD_REF, gstr(gw, "MPI_COMM_WORLD"), 1,
                                   OTF2_UNDEFINED_COMM, OTF2_COMM_FLAG_NONE);
    OTF2_GlobalDefWriter_WriteComm(gw, COMM_SELF_REF, gstr(gw, "MPI_COMM_SELF"), 2,
                                   OTF2_UNDEFINED_COMM, OTF2_COMM_FLAG_NONE);
    /* communicator definitions, parents before children where the parent is known */
    int ncomms = 0;
    for (int i = 0; i < ncw; i += COMM_REC_WORDS(cw + i)) ncomms++;
    int *at = malloc((size_t)(ncomms ? ncomms : 1) * sizeof *at);
    unsigned char *done = calloc((size_t)(ncomms ? ncomms : 1), 1);
    uint32_t *order = malloc((size_t)(ncomms ? ncomms : 1) * sizeof *order);
    *order_out = order;
    for (int i = 0, c = 0; i < ncw; i += COMM_REC_WORDS(cw + i)) at[c++] = i;
    OTF2_GroupRef gref = 3;
    int written = 0;
    for (int progress = 1; written < ncomms;) {
        int force = !progress; /* a cycle or a parent we never saw: write without parent */
        progress = 0;
        for (int c = 0; c < ncomms; c++) {
            if (done[c]) continue;
            const int32_t *d = cw + at[c];
            uint32_t parent = (uint32_t)d[1];
            int ready = parent == OTF2_UNDEFINED_COMM || parent <= COMM_SELF_REF, known = 0;
            for (int q = 0; q < ncomms && !ready; q++)
                if ((uint32_t)cw[at[q]] == parent) { known = 1; ready = done[q]; }
            if (!ready && !known) parent = OTF2_UNDEFINED_COMM, ready = 1;
            if (!ready && !force) continue;
            if (!ready) parent = OTF2_UNDEFINED_COMM;
            for (int q = 0; q < written; q++) /* the parent's dense ref */
                if (order[q] == parent) { parent = 2 + (uint32_t)q; break; }
            uint64_t *m = malloc((size_t)(d[2] ? d[2] : 1) * sizeof *m);
            for (int k = 0; k < d[2]; k++) m[k] = (uint64_t)d[4 + k];
            uint32_t dense = 2 + (uint32_t)written;
            snprintf(name, sizeof name, "comm %u", dense);
            OTF2_GlobalDefWriter_WriteGroup(gw, gref, gstr(gw, name), OTF2_GROUP_TYPE_COMM_GROUP,
                                            OTF2_PARADIGM_MPI, OTF2_GROUP_FLAG_NONE,
                                            (uint32_t)d[2], m);
            const char *given = (const char *)(d + 4 + d[2]); /* MPI_Comm_set_name */
            OTF2_GlobalDefWriter_WriteComm(gw, dense, gstr(gw, d[3] && *given ? given : name),
                                           gref++, parent, OTF2_COMM_FLAG_NONE);
            free(m);
            done[c] = 1;
            order[written++] = (uint32_t)d[0];
            progress = 1;
        }
    }
    free(done);
    free(at);
    free(members);
    return written;
}

/* The run's properties, handed to put(): the archive's, or the crash-safe log's. */
static void run_properties(void (*put)(enum mps_live_key, const char *, const char *))
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) { buf[n] = 0; put(MPS_LIVE_PROGRAM, "MPISCOPE::PROGRAM", buf); }
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (f) {
        size_t m = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        for (size_t i = 0; i + 1 < m; i++) if (!buf[i]) buf[i] = ' ';
        buf[m] = 0;
        put(MPS_LIVE_CMDLINE, "MPISCOPE::CMDLINE", buf);
    }
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    PMPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\n,")] = 0;
    put(MPS_LIVE_MPI_LIBRARY, "MPISCOPE::MPI_LIBRARY", lib);
    time_t t = time(NULL) - (time_t)((mps_mono_ns() - (uint64_t)S.t_init_local) / 1000000000u);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    put(MPS_LIVE_START_TIME, "MPISCOPE::START_TIME", buf);
}

static void archive_property(enum mps_live_key k, const char *name, const char *value)
{
    (void)k;
    OTF2_Archive_SetProperty(S.archive, name, value, true);
}

static void set_properties(void)
{
    run_properties(archive_property);
    OTF2_Archive_SetProperty(S.archive, "MPISCOPE::VERSION", MPS_VERSION, true);
}

/* This rank's local definitions: id maps from its local call-site ids and sparse comm refs
 * onto the global definitions, and its clock offsets (local time → rank 0's time) at Init
 * and (when measured) Finalize, which readers interpolate linearly as OTF2 defines. */
static void write_local_defs(OTF2_Archive *ar, const uint32_t *map, const uint32_t *order,
                             int ncomms, int have_fin)
{
    OTF2_Archive_OpenDefFiles(ar);
    OTF2_DefWriter *dw = OTF2_Archive_GetDefWriter(ar, (OTF2_LocationRef)S.rank);
    if (dw) {
        if (S.cs_n && map) {
            OTF2_IdMap *im = OTF2_IdMap_CreateFromUint32Array(S.cs_n, map, false);
            if (im) {
                OTF2_DefWriter_WriteMappingTable(dw, OTF2_MAPPING_SOURCE_CODE_LOCATION, im);
                OTF2_IdMap_Free(im);
            }
        }
        if (ncomms) {
            OTF2_IdMap *cm = OTF2_IdMap_Create(OTF2_ID_MAP_SPARSE, (uint64_t)ncomms);
            for (int k = 0; cm && k < ncomms; k++)
                OTF2_IdMap_AddIdPair(cm, order[k], 2 + (uint64_t)k);
            if (cm) {
                OTF2_DefWriter_WriteMappingTable(dw, OTF2_MAPPING_COMM, cm);
                OTF2_IdMap_Free(cm);
            }
        }
        OTF2_DefWriter_WriteClockOffset(dw, (uint64_t)(S.t_init_local + S.off_init), 0, 0.0);
        if (have_fin)
            OTF2_DefWriter_WriteClockOffset(dw, (uint64_t)(S.t_fin_local + S.off_init),
                                            S.off_fin - S.off_init, 0.0);
        OTF2_Archive_CloseDefWriter(ar, dw);
    }
    for (int r = 0; r < S.size && !have_fin; r++) { /* salvaged: the others' files, empty */
        OTF2_DefWriter *w = r == S.rank ? NULL : OTF2_Archive_GetDefWriter(ar, (uint64_t)r);
        if (w) OTF2_Archive_CloseDefWriter(ar, w);
    }
    OTF2_Archive_CloseDefFiles(ar);
}

/* Collective on S.icomm, once some rank could not write its part of the archive: the
 * ranks agree on a reason, rank 0 removes what was written (a half-written archive must
 * not look like a trace) and prints the one warning. Nobody writes any more by then. */
static void write_failed(void)
{
    /* an errno (> 0) names the reason better than an OTF2-only code (< 0); ranks that
     * did not fail have none to offer */
    int why = !S.failed ? INT_MIN : S.werr ? S.werr : EIO, all_why = 0;
    PMPI_Allreduce(&why, &all_why, 1, MPI_INT, MPI_MAX, S.icomm);
    if (all_why == INT_MIN) all_why = EIO;
    if (S.rank == 0 && S.outdir[0]) mps_remove_archive(S.outdir);
    if (S.rank == 0 && !S.warned) /* else it said why at MPI_Init already */
        say_not_written(S.outdir, reason(all_why));
    S.warned = 1; /* reported for every rank: the exit hook stays quiet */
}

void mps_finalize_before(void)
{
    if (!S.have_icomm) return; /* never initialised, or disabled by MPISCOPE_DISABLE */
    mps_io_guard_begin();
    if (S.state == 1) {
        /* encode before the ranks agree, so a write error now skips the write-out too */
        LOCK();
        flush_events(0); /* inside MPI_Finalize: its time is the encoding's */
        UNLOCK();
    }
    mps_evbuf_free(&S.eb);
    int good = S.state == 1;
    int all_good = 0;
    /* a rank whose writer failed makes everyone skip the collective write-out */
    PMPI_Allreduce(&good, &all_good, 1, MPI_INT, MPI_MIN, S.icomm);
    if (!all_good) {
        mps_live_close(1); /* no trace: the raw log would only fill the disk further */
        S.state = 2;
        write_failed();
        S.have_icomm = 0;
        PMPI_Comm_free(&S.icomm);
        mps_io_guard_end();
        return;
    }
    S.off_fin = clock_offset();
    S.t_fin_local = (int64_t)mps_mono_ns();
    LOCK();
    OTF2_EvtWriter_Leave(S.evt, NULL, now(), (OTF2_RegionRef)MPS_FN_MPI_Finalize);
    S.state = 2; /* from here on our own calls are never recorded */
    UNLOCK();

    uint64_t nevents = 0;
    OTF2_EvtWriter_GetNumberOfEvents(S.evt, &nevents);
    OTF2_Archive_CloseEvtWriter(S.archive, S.evt);
    OTF2_Archive_CloseEvtFiles(S.archive);

    /* time range after clock correction (linear between the two measured offsets) */
    uint64_t lo = S.first_ts, hi = S.last_ts + (uint64_t)(S.off_fin > S.off_init ?
                                                          S.off_fin - S.off_init : 0);
    uint64_t gmin = 0, gmax = 0;
    PMPI_Reduce(&lo, &gmin, 1, MPI_UINT64_T, MPI_MIN, 0, S.icomm);
    PMPI_Reduce(&hi, &gmax, 1, MPI_UINT64_T, MPI_MAX, 0, S.icomm);
    uint64_t *all_events = S.rank == 0 ? calloc((size_t)S.size, sizeof(uint64_t)) : NULL;
    PMPI_Gather(&nevents, 1, MPI_UINT64_T, all_events, 1, MPI_UINT64_T, 0, S.icomm);

    OTF2_GlobalDefWriter *gw = S.rank == 0 ? OTF2_Archive_GetGlobalDefWriter(S.archive) : NULL;
    if (gw) set_properties();
    uint32_t *map = NULL;
    unify_callsites(gw, &map);
    char *hosts = gather_hosts();
    int ncw = 0;
    int32_t *cw = gather_comms(&ncw);
    uint32_t *order = NULL;
    int ncomms = gw ? write_global_defs(gw, gmin, gmax, hosts, all_events, cw, ncw, &order) : 0;
    PMPI_Bcast(&ncomms, 1, MPI_INT, 0, S.icomm);
    if (!order) order = malloc((size_t)(ncomms ? ncomms : 1) * sizeof *order);
    PMPI_Bcast(order, ncomms, MPI_UINT32_T, 0, S.icomm);

    write_local_defs(S.archive, map, order, ncomms, 1);
    OTF2_Archive_CloseDefFiles(S.archive);
    if (OTF2_Archive_Close(S.archive) != OTF2_SUCCESS && !S.failed) S.failed = 1;
    S.archive = NULL;
    /* a full disk mostly bites here, in the write-out (OTF2's POSIX substrate reports a
     * failed fwrite and a failed fclose, where buffered data meets the disk, through
     * otf2_error): the ranks agree on it again */
    good = !S.failed;
    PMPI_Allreduce(&good, &all_good, 1, MPI_INT, MPI_MIN, S.icomm);
    mps_live_close(1); /* written or not, the crash-safe log has served (no rank died) */
    if (!all_good) write_failed();
    else live_said();
    if (all_good && S.rank == 0 && getenv("MPISCOPE_VERBOSE")) { /* encoding cost: bench */
        fprintf(stderr, "mpiscope: trace written to %s/traces.otf2\n", S.outdir);
        fprintf(stderr, "mpiscope: rank 0: %llu events encoded in %.3f ms (%llu flushes "
                "during the run), %s clock\n", (unsigned long long)nevents,
                S.encode_ns / 1e6, (unsigned long long)S.flushes, S.tsc ? "tsc" : "monotonic");
    }
    free(map); free(hosts); free(cw); free(all_events); free(order);
    if (S.attrs) OTF2_AttributeList_Delete(S.attrs);
    S.attrs = NULL;
    S.have_icomm = 0;
    PMPI_Comm_free(&S.icomm);
    mps_io_guard_end();
}

/* The global definitions of a single-rank archive (salvage(), mpiscope-recover): call
 * sites by this rank's local ids (`loc`, freed here), every rank of the job defined
 * (communicator groups name them) but only `rank` with its host and `nevents` events:
 * the others' events died with them. Returns the number of communicators (*order: their
 * dense refs, for write_local_defs). */
static int write_single_rank_defs(OTF2_GlobalDefWriter *gw, int rank, uint64_t nevents,
                                  mps_location *loc, uint32_t nloc, uint32_t **order)
{
    for (uint32_t i = 0; i < nloc; i++) {
        OTF2_StringRef fs = gstr(gw, loc[i].file ? loc[i].file : "?");
        OTF2_GlobalDefWriter_WriteSourceCodeLocation(gw, i, fs, loc[i].line);
        free(loc[i].file);
    }
    char *hosts = calloc((size_t)S.size, sizeof S.host);
    uint64_t *counts = calloc((size_t)S.size, sizeof *counts);
    int ncw = 0, ncomms = 0;
    int32_t *cw = serialize_comms(1, &ncw);
    if (hosts && counts && cw) {
        for (int r = 0; r < S.size; r++)
            snprintf(hosts + (size_t)r * sizeof S.host, sizeof S.host, "%s",
                     r == rank ? S.host : "unknown");
        counts[rank] = nevents;
        ncomms = write_global_defs(gw, S.first_ts, S.last_ts, hosts, counts, cw, ncw, order);
    }
    free(hosts); free(counts); free(cw);
    return ncomms;
}

/* MPI_Abort or exit without MPI_Finalize: nothing collective is possible any more, so
 * this rank flushes its events and turns them into a readable single-rank archive of its
 * own, DIR/rank<N>/traces.otf2, with definitions it can make alone (local MPI calls only:
 * call sites as this rank sees them, the communicators it belongs to). The other ranks
 * are defined with empty event files. */
static void salvage(void)
{
    char dir[PATH_MAX + 32], from[PATH_MAX + 64], to[PATH_MAX + 96];
    snprintf(dir, sizeof dir, "%s/rank%d", S.outdir, S.rank);
    if (mkdir_p(dir) != 0) return;
    OTF2_Archive *ar = OTF2_Archive_Open(dir, "traces", OTF2_FILEMODE_WRITE, S.chunk_size,
                                         4 * 1024 * 1024, OTF2_SUBSTRATE_POSIX,
                                         OTF2_COMPRESSION_NONE);
    if (!ar) return;
    OTF2_Archive_SetFlushCallbacks(ar, &flush_cbs, NULL);
    OTF2_Archive_SetSerialCollectiveCallbacks(ar);
    OTF2_Archive_SetCreator(ar, "mpiscope " MPS_VERSION " (salvaged: no MPI_Finalize)");
    OTF2_Archive *main_ar = S.archive;
    S.archive = ar;
    set_properties();
    S.archive = main_ar;

    /* call sites: global id = this rank's local id */
    OTF2_GlobalDefWriter *gw = OTF2_Archive_GetGlobalDefWriter(ar);
    mps_location *loc = calloc(S.cs_n ? S.cs_n : 1, sizeof *loc);
    g_string_next = 0;
    uint32_t *order = NULL;
    int ncomms = 0;
    if (gw && loc) {
        mps_callsite_resolve(S.cs_addr, S.cs_n, loc);
        ncomms = write_single_rank_defs(gw, S.rank, S.nevents_closed, loc, S.cs_n, &order);
    }
    free(loc);
    if (OTF2_Archive_OpenEvtFiles(ar) == OTF2_SUCCESS) {
        for (int r = 0; r < S.size; r++) {
            if (r == S.rank) continue;
            OTF2_EvtWriter *w = OTF2_Archive_GetEvtWriter(ar, (OTF2_LocationRef)r);
            if (w) OTF2_Archive_CloseEvtWriter(ar, w);
        }
        OTF2_Archive_CloseEvtFiles(ar);
    }
    write_local_defs(ar, NULL, order, ncomms, 0);
    OTF2_Archive_Close(ar);
    free(order);
    snprintf(from, sizeof from, "%s/traces/%d.evt", S.outdir, S.rank);
    snprintf(to, sizeof to, "%s/traces/%d.evt", dir, S.rank);
    if (rename(from, to) != 0) { /* leave no anchor that promises events it has not got */
        snprintf(to, sizeof to, "%s/traces.otf2", dir);
        unlink(to);
    }
}

/* This rank alone could not write (its trace or its salvaged archive) and no collective
 * is possible any more: it says so itself, once. */
static void write_failed_alone(const char *dir)
{
    if (S.warned) return;
    S.warned = 1;
    say_not_written(dir, reason(S.werr ? S.werr : EIO));
}

void mps_abort_before(void)
{
    if (S.state != 1) {
        /* failed mid-run, then never reached MPI_Finalize, where it would be reported */
        if (S.failed && S.have_icomm && getpid() == S.pid) write_failed_alone(S.outdir);
        return;
    }
    mps_io_guard_begin();
    LOCK();
    S.state = 2; /* our own calls below are never recorded */
    flush_events(0);
    mps_evbuf_free(&S.eb);
    OTF2_EvtWriter_GetNumberOfEvents(S.evt, &S.nevents_closed);
    OTF2_Archive_CloseEvtWriter(S.archive, S.evt);
    UNLOCK();
    salvage();
    if (S.failed) { /* a half-written salvaged archive must not look like a trace */
        char dir[PATH_MAX + 32];
        snprintf(dir, sizeof dir, "%s/rank%d", S.outdir, S.rank);
        mps_remove_tree(dir);
        write_failed_alone(dir);
    }
    /* the crash-safe log goes once salvage() has left a complete archive (the same test
     * the reader makes); else `mpiscope recover` still has it */
    char evt[PATH_MAX + 64];
    snprintf(evt, sizeof evt, "%s/rank%d/traces/%d.evt", S.outdir, S.rank, S.rank);
    mps_live_close(access(evt, F_OK) == 0);
    mps_io_guard_end();
}

/* The signals launchers and batch systems stop a job with (mpirun sends SIGTERM to
 * the surviving ranks when one dies; SIGXCPU is a time limit). The rank salvages its
 * events as at MPI_Abort, then dies of the same signal, so the job ends as it would
 * untraced. Crash signals are left alone: after a SIGSEGV the heap cannot be trusted. */
static const int stop_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGXCPU};

static void on_stop_signal(int sig)
{
    int saved = errno;
    /* not while our own code is mid-way through the buffers (an encoding batch, or the
     * trace lock held by the interrupted thread itself) */
    int free_to_go = getpid() == S.pid && S.state == 1 && !S.encoding &&
                     (!S.mt || pthread_mutex_trylock(&S.lock) == 0);
    if (free_to_go) {
        if (S.mt) pthread_mutex_unlock(&S.lock);
        mps_evbuf_drop_unfinished(&S.eb); /* the interrupted call may be mid-record */
        mps_abort_before();
    }
    errno = saved;
    raise(sig); /* SA_RESETHAND has restored the default action: delivered on return */
}

/* Only where the program (or the MPI library) left the default action: a handler of
 * theirs is never replaced. */
static void catch_stop_signals(void)
{
    for (size_t i = 0; i < sizeof stop_signals / sizeof *stop_signals; i++) {
        struct sigaction old, sa;
        if (sigaction(stop_signals[i], NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
            old.sa_handler != SIG_DFL)
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND | SA_RESTART;
        sigaction(stop_signals[i], &sa, NULL);
    }
}

static void at_exit(void)
{
    /* a child fork()ed by the program and exiting must not salvage (and move away) the
     * parent's event file */
    if (getpid() == S.pid) mps_abort_before();
}

__attribute__((constructor)) static void mps_register_exit(void)
{
    /* cheap and harmless in non-MPI processes (mpirun, orted): only registers a hook */
    atexit(at_exit);
}

/* ------------------------------------------------ post-mortem recovery */

/* Raw → trace time of one window of the log: the anchors around its batch, or for the
 * window the rank was killed in (no end anchor) the TSC rate measured here when this is
 * the same boot of the same machine, else the rate of the batch before, else measured. */
static void recover_timemap(const mps_live_log *log, uint64_t k, mps_timemap *tm,
                            uint64_t *prev_mult, int same_boot)
{
    memset(tm, 0, sizeof *tm);
    tm->tsc = log->h.tsc;
    tm->offset = log->h.off_init;
    tm->raw0 = log->h.raw0;
    tm->ns0 = log->h.ns0;
    const struct mps_live_window *end = NULL;
    for (uint32_t i = 0; i < log->nwin; i++) {
        if (log->win[i].index == k && !log->win[i].stopped) {
            tm->raw0 = log->win[i].raw0;
            tm->ns0 = log->win[i].ns0;
        }
        if (log->win[i].index == k + 1) end = &log->win[i];
    }
    if (end) { /* a batch encoded in the run: its own anchors */
        tm->raw1 = end->raw1;
        tm->ns1 = end->ns1;
        mps_timemap_fix(tm);
    } else if (tm->tsc && same_boot) { /* both clocks ran on since the kill */
        mps_anchor(1, &tm->raw1, &tm->ns1);
        mps_timemap_fix(tm);
    } else if (tm->tsc && !*prev_mult) { /* another machine or boot: its rate stands in */
        uint64_t r0, n0, r1, n1;
        mps_anchor(1, &r0, &n0);
        struct timespec nap = {0, 20000000};
        nanosleep(&nap, NULL);
        mps_anchor(1, &r1, &n1);
        tm->mult = r1 > r0 ? (uint64_t)(((unsigned __int128)(n1 - n0) << 32) / (r1 - r0)) : 0;
    } else {
        tm->mult = *prev_mult;
    }
    if (tm->mult) *prev_mult = tm->mult;
}

int mps_recover(const char *outdir, int rank, char *msg, size_t msglen)
{
    char defs[PATH_MAX + 64], events[PATH_MAX + 64], part[PATH_MAX + 64], done[PATH_MAX + 64];
    snprintf(defs, sizeof defs, "%s/%s/rank%d.defs", outdir, MPS_LIVE_DIR, rank);
    snprintf(events, sizeof events, "%s/%s/rank%d.events", outdir, MPS_LIVE_DIR, rank);
    snprintf(part, sizeof part, "%s/%s/rank%d.part", outdir, MPS_LIVE_DIR, rank);
    snprintf(done, sizeof done, "%s/rank%d", outdir, rank);
    mps_live_log log;
    if (mps_live_read(defs, &log, msg, msglen) != 0) return -1;
    if ((int)log.h.rank != rank || log.h.size == 0 || log.h.window_bytes % 8) {
        snprintf(msg, msglen, "%s: header names rank %u of %u", defs, log.h.rank, log.h.size);
        mps_live_log_free(&log);
        return -1;
    }
    char *names = region_names();
    int same_regions = names && log.regions && strcmp(names, log.regions) == 0;
    free(names);
    if (!same_regions) { /* region refs are mps_fn values: they must mean the same */
        snprintf(msg, msglen, "%s was written by another mpiscope build (its MPI functions "
                 "differ from this one's): recover it with the interposer that traced the "
                 "run", defs);
        mps_live_log_free(&log);
        return -1;
    }
    /* a log is only left behind by a dead rank: one still running (same boot, its pid
     * alive and still the same program) is not recovered under its feet */
    char boot[64] = "", exe[PATH_MAX] = "", proc_exe[64];
    FILE *bf = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (bf) { if (!fgets(boot, sizeof boot, bf)) boot[0] = 0; fclose(bf); }
    boot[strcspn(boot, "\n")] = 0;
    int same_boot = *boot && log.str[MPS_LIVE_BOOT_ID] && strcmp(boot, log.str[MPS_LIVE_BOOT_ID]) == 0;
    snprintf(proc_exe, sizeof proc_exe, "/proc/%u/exe", log.h.pid);
    ssize_t xn = same_boot && kill((pid_t)log.h.pid, 0) == 0 ? readlink(proc_exe, exe, sizeof exe - 1) : -1;
    if (xn > 0 && log.str[MPS_LIVE_PROGRAM] && (exe[xn] = 0, strcmp(exe, log.str[MPS_LIVE_PROGRAM]) == 0)) {
        snprintf(msg, msglen, "still running (pid %u)", log.h.pid);
        mps_live_log_free(&log);
        return -1;
    }
    /* the events: the whole file, read-only; no events file is an empty run */
    uint64_t *map = NULL;
    size_t maplen = 0;
    int fd = open(events, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0) {
        maplen = (size_t)st.st_size;
        map = mmap(NULL, maplen, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) { map = NULL; maplen = 0; }
    }
    if (fd >= 0) close(fd);

    /* the rank as S would have held it at salvage() */
    S.rank = rank;
    S.size = (int)log.h.size;
    S.tsc = log.h.tsc;
    S.off_init = log.h.off_init;
    S.t_init_local = log.h.t_init_local;
    S.chunk_size = 1024 * 1024;
    snprintf(S.outdir, sizeof S.outdir, "%s", outdir);
    snprintf(S.host, sizeof S.host, "%s", log.str[MPS_LIVE_HOST] ? log.str[MPS_LIVE_HOST] : "?");
    S.ndefs = 0;
    for (int i = 0; i < log.ncomm_words && i + 4 <= log.ncomm_words;) {
        const int32_t *d = log.comms + i;
        int n = COMM_REC_WORDS(d);
        if (d[2] < 0 || d[3] < 0 || i + n > log.ncomm_words) break;
        if (S.ndefs == S.defs_cap) {
            uint32_t cap = S.defs_cap ? 2 * S.defs_cap : 16;
            comm_def *g = realloc(S.defs, cap * sizeof *g);
            if (!g) break;
            S.defs = g;
            S.defs_cap = cap;
        }
        comm_def *c = &S.defs[S.ndefs];
        memset(c, 0, sizeof *c);
        c->ref = (uint32_t)d[0];
        c->parent = (uint32_t)d[1];
        c->size = d[2];
        c->members = malloc((size_t)(d[2] ? d[2] : 1) * sizeof(int32_t));
        if (!c->members) break;
        memcpy(c->members, d + 4, (size_t)d[2] * sizeof(int32_t));
        snprintf(c->name, sizeof c->name, "%.*s", (int)(d[3] * 4), (const char *)(d + 4 + d[2]));
        for (uint32_t k = 0; k < log.nnames; k++)
            if (log.names[k].ref == c->ref) snprintf(c->name, sizeof c->name, "%s", log.names[k].name);
        S.ndefs++;
        i += n;
    }

    mps_remove_tree(part);
    if (mkdir_p(part) != 0) {
        snprintf(msg, msglen, "cannot create %s: %s", part, strerror(errno));
        goto fail;
    }
    OTF2_Error_RegisterCallback(otf2_error, NULL);
    S.failed = 0;
    OTF2_Archive *ar = OTF2_Archive_Open(part, "traces", OTF2_FILEMODE_WRITE, S.chunk_size,
                                         4 * 1024 * 1024, OTF2_SUBSTRATE_POSIX,
                                         OTF2_COMPRESSION_NONE);
    if (!ar) {
        snprintf(msg, msglen, "cannot open an OTF2 archive in %s", part);
        goto fail;
    }
    OTF2_Archive_SetFlushCallbacks(ar, &flush_cbs, NULL);
    OTF2_Archive_SetSerialCollectiveCallbacks(ar);
    OTF2_Archive_SetCreator(ar, "mpiscope " MPS_VERSION " (salvaged: killed, recovered "
                                "from its live log)");
    static const char *const props[MPS_LIVE_NKEYS] = {
        [MPS_LIVE_PROGRAM] = "MPISCOPE::PROGRAM", [MPS_LIVE_CMDLINE] = "MPISCOPE::CMDLINE",
        [MPS_LIVE_MPI_LIBRARY] = "MPISCOPE::MPI_LIBRARY",
        [MPS_LIVE_START_TIME] = "MPISCOPE::START_TIME"};
    for (int k = 0; k < MPS_LIVE_NKEYS; k++)
        if (props[k] && log.str[k]) OTF2_Archive_SetProperty(ar, props[k], log.str[k], true);
    OTF2_Archive_SetProperty(ar, "MPISCOPE::VERSION", MPS_VERSION, true);

    /* events: MPI_Init as written at Init, then the log's windows in order */
    uint64_t nevents = 0, window_words = log.h.window_bytes / 8;
    uint64_t nwindows = 1, prev_mult = 0;
    for (uint32_t i = 0; i < log.nwin; i++)
        if (!log.win[i].stopped && log.win[i].index + 1 > nwindows) nwindows = log.win[i].index + 1;
    if (OTF2_Archive_OpenEvtFiles(ar) == OTF2_SUCCESS) {
        OTF2_EvtWriter *w = OTF2_Archive_GetEvtWriter(ar, (OTF2_LocationRef)rank);
        OTF2_AttributeList *al = OTF2_AttributeList_New();
        if (w && al) {
            if (log.h.init_cs != UINT32_MAX)
                OTF2_AttributeList_AddSourceCodeLocationRef(al, MPS_ATTR_CALLSITE, log.h.init_cs);
            S.first_ts = log.h.init_enter;
            S.last_ts = log.h.init_leave;
            OTF2_EvtWriter_Enter(w, log.h.init_cs != UINT32_MAX ? al : NULL, S.first_ts,
                                 (OTF2_RegionRef)log.h.init_fn);
            OTF2_EvtWriter_Leave(w, NULL, S.last_ts, (OTF2_RegionRef)log.h.init_fn);
            for (uint64_t k = 0; k < nwindows && !S.failed; k++) {
                uint64_t first = k * window_words;
                if (!map || first >= maplen / 8) break;
                uint64_t lim = first + window_words < maplen / 8 ? first + window_words
                                                                  : maplen / 8;
                int last = k + 1 == nwindows;
                mps_timemap tm;
                recover_timemap(&log, k, &tm, &prev_mult, same_boot);
                mps_evbuf b = {map + first, NULL, NULL};
                b.pos = mps_evbuf_valid_end(map + first, map + lim, last);
                b.end = b.pos;
                mps_evbuf_encode(&b, w, al, &tm, &S.last_ts, &S.failed);
                for (uint32_t i = 0; i < log.nwin && !last; i++) /* the batch's flush */
                    if (log.win[i].index == k + 1 && !log.win[i].stopped) {
                        uint64_t t0 = log.win[i].ns1 + (uint64_t)S.off_init;
                        uint64_t t1 = log.win[i].ns0 + (uint64_t)S.off_init;
                        if (t0 < S.last_ts) t0 = S.last_ts;
                        if (t1 < t0) t1 = t0;
                        OTF2_EvtWriter_BufferFlush(w, NULL, t0, t1);
                        S.last_ts = t1;
                    }
            }
            OTF2_EvtWriter_GetNumberOfEvents(w, &nevents);
        }
        if (w) OTF2_Archive_CloseEvtWriter(ar, w);
        if (al) OTF2_AttributeList_Delete(al);
        for (int r = 0; r < S.size; r++) {
            if (r == rank) continue;
            OTF2_EvtWriter *o = OTF2_Archive_GetEvtWriter(ar, (OTF2_LocationRef)r);
            if (o) OTF2_Archive_CloseEvtWriter(ar, o);
        }
        OTF2_Archive_CloseEvtFiles(ar);
    }

    /* definitions as salvage() writes them: call sites by this rank's local ids */
    OTF2_GlobalDefWriter *gw = OTF2_Archive_GetGlobalDefWriter(ar);
    g_string_next = 0;
    uint32_t ncs = 0;
    for (uint32_t i = 0; i < log.nsites; i++)
        if (log.sites[i].cs.id + 1 > ncs) ncs = log.sites[i].cs.id + 1;
    if (log.h.init_cs != UINT32_MAX && log.h.init_cs + 1 > ncs) ncs = log.h.init_cs + 1;
    mps_offline_site *sites = calloc(ncs ? ncs : 1, sizeof *sites);
    mps_location *loc = calloc(ncs ? ncs : 1, sizeof *loc);
    uint32_t *order = NULL;
    int ncomms = 0;
    if (gw && sites && loc) {
        for (uint32_t i = 0; i < log.nsites; i++) {
            mps_offline_site *o = &sites[log.sites[i].cs.id];
            o->addr = log.sites[i].cs.addr;
            o->bias = log.sites[i].cs.bias;
            o->fbase = log.sites[i].cs.fbase;
            o->path = log.sites[i].path;
        }
        mps_callsite_resolve_offline(sites, ncs, loc);
        ncomms = write_single_rank_defs(gw, rank, nevents, loc, ncs, &order);
    }
    free(sites);
    free(loc);
    write_local_defs(ar, NULL, order, ncomms, 0);
    OTF2_Archive_Close(ar);
    free(order);
    if (S.failed || !gw) {
        snprintf(msg, msglen, "writing the OTF2 archive in %s failed", part);
        goto fail;
    }
    /* in place in one step: a half-written rank<N>/ (killed while salvaging) goes first */
    mps_remove_tree(done);
    if (rename(part, done) != 0) {
        snprintf(msg, msglen, "cannot move %s to %s: %s", part, done, strerror(errno));
        goto fail;
    }
    snprintf(msg, msglen, "rank %d: %llu events, %.3f s from MPI_Init to its last event",
             rank, (unsigned long long)nevents, (double)(S.last_ts - log.h.init_enter) / 1e9);
    if (map) munmap(map, maplen);
    mps_live_log_free(&log);
    unlink(defs);
    unlink(events);
    snprintf(part, sizeof part, "%s/%s", outdir, MPS_LIVE_DIR);
    rmdir(part); /* once no other rank's log is left */
    return 0;
fail:
    mps_remove_tree(part);
    if (map) munmap(map, maplen);
    mps_live_log_free(&log);
    return -1;
}
