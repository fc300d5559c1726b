/* hotpath.c — event recording: Enter/Leave, call-site ids, blocking point-to-point
 * events and message sizes, and the mid-run encoding of a full buffer. */
#define _GNU_SOURCE
#include "runtime.h"
#include "iosafe.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct mps_recorder mps_rt = {.lock = PTHREAD_MUTEX_INITIALIZER};
struct mps_callsites mps_sites;
type_slot mps_types[MPS_TYPE_SLOTS];
/* the model again: GCC drops the declaration's tls_model at a definition without it */
__thread int tl_skip __attribute__((tls_model("initial-exec")));
__thread void *tl_fcaller __attribute__((tls_model("initial-exec")));
__thread uint64_t tl_t __attribute__((tls_model("initial-exec")));
__thread struct mps_recorder *tl_rec __attribute__((tls_model("initial-exec")));
/* the current call is a polling call that completed nothing (mps_poll_idle): 1 its
 * Leave starts a visit, 2 it was merged into one (no Leave) */
static __thread int tl_poll __attribute__((tls_model("initial-exec")));

int mps_active(void) { return mps_rt.state == 1; }

int mps_filtered(enum mps_fn fn) { return mps_cfg.filtered[fn]; }

/* Encode a recorder's buffered events into its location. In the middle of the run
 * (`record`, by the owning thread) the time it takes is recorded as a BufferFlush, as
 * OTF2 records its own flushes to disk. Only the main thread's buffer is a window of the
 * crash-safe log (live.c). */
void mps_flush_recorder(struct mps_recorder *r, int record)
{
    mps_io_guard_begin(); /* OTF2 writes full chunks to disk while encoding */
    r->encoding = 1;
    r->call_mark = NULL; /* the buffer is emptied: nothing of the current call to take back */
    r->poll_end = NULL;  /* nor polling visits to extend */
    r->poll_n = 0;
    mps_anchor(mps_rt.tsc, &r->tm.raw1, &r->tm.ns1);
    mps_timemap_fix(&r->tm);
    uint64_t t_start = r->tm.ns1 + (uint64_t)r->tm.offset;
    r->flushes += record;
    uint64_t used = (uint64_t)(r->eb.pos - r->eb.base); /* the live log's slot: to zero */
    mps_evbuf_encode(&r->eb, r->evt, r->attrs, &r->tm, &r->last_ts, &mps_out.failed);
    r->encode_ns += mps_mono_ns() - r->tm.ns1;
    int live = record && r == &mps_rt;
    if (live) mps_live_next_window(&r->eb, used, r->tm.raw1, r->tm.ns1);
    if (record && !mps_out.failed) {
        if (t_start < r->last_ts) t_start = r->last_ts;
        uint64_t t_end = mps_mono_ns() + (uint64_t)mps_job.off_init;
        r->last_ts = t_end;
        OTF2_EvtWriter_BufferFlush(r->evt, NULL, t_start, t_end);
    }
    mps_anchor(mps_rt.tsc, &r->tm.raw0, &r->tm.ns0);
    if (live) mps_live_window_start(r->tm.raw0, r->tm.ns0);
    if (r == tl_rec) tl_t = r->tm.raw0; /* events still to come in this call follow it */
    r->encoding = 0;
    mps_io_guard_end();
}

__attribute__((noinline, cold)) void mps_flush_events(int record)
{
    mps_flush_recorder(tl_rec, record);
}

/* ------------------------------------------------------------- threads */

#define MPS_THREAD_BUFFER (4u << 20) /* raw buffer of a thread other than the main one */

/* A thread's first traced call: its own buffer and OTF2 location (rank + index * size,
 * so ids stay unique and the main thread keeps the rank's). Once per thread; the
 * recorder outlives the thread, so its events are written at MPI_Finalize. NULL: the
 * thread stays untraced (no memory, or not tracing). */
__attribute__((noinline, cold)) struct mps_recorder *mps_thread_start(void)
{
    if (mps_rt.state != 1) return NULL;
    struct mps_recorder *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    /* smaller than the main thread's: its pages are faulted in here, inside the thread's
     * first MPI call, while its partners may be waiting for it (bench/overhead's 2x2-thread
     * loop: 10-50 ms in its fast runs with 32 MiB, ~1.5 ms with 64 KiB, on a busy 2-core
     * machine), and a process may have many threads */
    uint64_t bytes = mps_cfg.buffer_bytes < MPS_THREAD_BUFFER ? mps_cfg.buffer_bytes
                                                              : MPS_THREAD_BUFFER;
    if (mps_evbuf_init(&r->eb, bytes) != 0 ||
        !(r->attrs = OTF2_AttributeList_New())) {
        mps_evbuf_free(&r->eb);
        free(r);
        return NULL;
    }
    pthread_mutex_lock(&mps_rt.lock);
    r->thread = mps_rt.nthreads;
    r->location = (uint64_t)mps_job.rank + (uint64_t)r->thread * (uint64_t)mps_job.size;
    /* its own chunks: a thread's OTF2 buffer must not starve for the others' */
    mps_pool_grow(2 * mps_cfg.chunk_size);
    r->evt = mps_rt.state == 1 ? OTF2_Archive_GetEvtWriter(mps_out.archive, r->location)
                               : NULL;
    if (r->evt) {
        struct mps_recorder **tail = &mps_rt.next;
        while (*tail) tail = &(*tail)->next;
        *tail = r;
        mps_rt.nthreads++;
    }
    pthread_mutex_unlock(&mps_rt.lock);
    if (!r->evt) {
        OTF2_AttributeList_Delete(r->attrs);
        mps_evbuf_free(&r->eb);
        free(r);
        return NULL;
    }
    r->tm.tsc = mps_rt.tsc;
    r->tm.offset = mps_job.off_init;
    mps_anchor(mps_rt.tsc, &r->tm.raw0, &r->tm.ns0);
    tl_rec = r;
    mps_sched_start(r);
    return r;
}

/* ----------------------------------------------------------- call sites */

/* A new call site goes to the crash-safe log with its object and load bias, so that it
 * can be resolved after the process is gone (live.h). Once per distinct site. */
__attribute__((noinline, cold)) void mps_live_callsite(uint32_t id, void *ra)
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
    const cs_slot *s = cs_table_find(&mps_sites.tab, a);
    if (s) return s->id;
    if (mps_sites.n == mps_sites.addr_cap) { /* rare: once per new distinct site */
        uint32_t cap = mps_sites.addr_cap ? mps_sites.addr_cap * 2 : 256;
        void **addrs = realloc(mps_sites.addr, (size_t)cap * sizeof *addrs);
        if (!addrs) return UINT32_MAX;
        mps_sites.addr = addrs;
        mps_sites.addr_cap = cap;
    }
    cs_slot *n = cs_table_add(&mps_sites.tab, a);
    if (!n) return UINT32_MAX;
    /* mpi4py's calls: the Python caller is the call site (python.c) */
    n->id = mps_sites.n | (mps_py_is_mpi4py(ra) ? MPS_CS_PYTHON : 0);
    mps_sites.addr[mps_sites.n] = ra;
    mps_live_callsite(mps_sites.n, ra);
    mps_sites.n++;
    return n->id;
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

/* polling (below): bound of a polling loop's gap, see there */
#define MPS_POLL_GAP_NS 1000
/* MPS_POLL_GAP_NS in raw clock units, measured once (a 20 us spin) */
static uint64_t poll_gap_ticks(void)
{
    static uint64_t gap;
    if (__builtin_expect(gap == 0, 0)) {
        uint64_t r0 = mps_ticks(mps_rt.tsc), n0 = mps_mono_ns(), n;
        do n = mps_mono_ns(); while (n - n0 < 20000);
        uint64_t ticks = (mps_ticks(mps_rt.tsc) - r0) * MPS_POLL_GAP_NS / (n - n0);
        gap = ticks ? ticks : 1;
    }
    return gap;
}


/* ---------------------------------------------------------- descheduling
 *
 * A rank sharing its core is runnable but waiting for a CPU part of its time; that time
 * lands in whatever it was doing (a compute burst, an MPI call) and a replay on a machine
 * that does not share cores must not keep it. The kernel counts it per thread (sched_info:
 * /proc/thread-self/schedstat = on-CPU ns, run-queue delay ns, time slices). So an Enter
 * or Leave may carry the thread's two counters (MPS_EV_SCHED, encoded as the attributes
 * mpiscope:cpu_ns and mpiscope:run_delay_ns); the analysis interpolates them in time.
 * A read is a system call (1.5-2 us on our machines), so it is made only when at least
 * MPS_SCHED_EVERY_NS of wall time has passed since the thread's last one: a shorter span
 * cannot hide more descheduling than its own length, and the cost stays below 1-2% of the
 * run whatever the call rate. Inside a polling loop (an idle visit just ended) no read is
 * made at Enter: it would end the visit chain. */
#define MPS_SCHED_EVERY_NS 100000

void mps_sched_start(struct mps_recorder *r)
{
    r->sched_fd = -1;
    r->sched_every = UINT64_MAX;
    if (mps_cfg.sched_off) return;
    /* O_CLOEXEC: the program's exec'ed children never see it */
    r->sched_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (r->sched_fd >= 0) r->sched_every = poll_gap_ticks() * (MPS_SCHED_EVERY_NS / MPS_POLL_GAP_NS);
}

void mps_sched_stop(struct mps_recorder *r)
{
    if (r->sched_fd >= 0) close(r->sched_fd);
    r->sched_fd = -1;
    r->sched_every = UINT64_MAX;
}

/* "CPU_NS RUN_DELAY_NS SLICES\n": two decimal fields, anything else is refused */
static int sched_parse(const char *s, uint64_t v[2])
{
    for (int i = 0; i < 2; i++) {
        if (*s < '0' || *s > '9') return -1;
        uint64_t x = 0;
        for (; *s >= '0' && *s <= '9'; s++) {
            if (x > (UINT64_MAX - 9) / 10) return -1;
            x = x * 10 + (uint64_t)(*s - '0');
        }
        if (*s++ != ' ') return -1;
        v[i] = x;
    }
    return 0;
}

__attribute__((noinline, cold)) static void sched_read(struct mps_recorder *r, uint64_t t)
{
    char buf[96];
    uint64_t v[2];
    int e = errno; /* the program's errno is never ours to change */
    ssize_t n = pread(r->sched_fd, buf, sizeof buf - 1, 0);
    errno = e;
    if (n <= 0) { /* e.g. the program closed every descriptor: stop reading */
        r->sched_fd = -1;
        r->sched_every = UINT64_MAX;
        return;
    }
    buf[n] = 0;
    r->sched_last = t;
    if (sched_parse(buf, v) != 0) return;
    uint64_t *x = mps_ev_put(&r->eb, t, MPS_EV_SCHED, 0, 0, 0, 2);
    x[0] = v[0];
    x[1] = v[1];
}

/* one subtraction and compare per Enter/Leave; the read itself is rare */
static inline void sched_sample(struct mps_recorder *r, uint64_t t)
{
    if (__builtin_expect(t - r->sched_last >= r->sched_every, 0)) sched_read(r, t);
}


/* ------------------------------------------------------- enter / leave */

void mps_enter(enum mps_fn fn, void *ra)
{
    tl_skip = mps_cfg.filtered[fn];
    if (tl_skip) return;
    struct mps_recorder *r = tl_rec;
    if (__builtin_expect(r == NULL, 0) && !(r = mps_thread_start())) {
        tl_skip = 1;
        return;
    }
    if (__builtin_expect(mps_evbuf_full(&r->eb), 0)) mps_flush_events(1);
    tl_t = mps_ticks(mps_rt.tsc);
    if (__builtin_expect(tl_fcaller != NULL, 0)) { ra = tl_fcaller; tl_fcaller = NULL; }
    if (ra != r->last_ra[fn]) {
        r->last_ra[fn] = ra;
        LOCK(); /* the call-site table is the process's */
        r->last_cs[fn] = mps_callsite_id(ra);
        UNLOCK();
    }
    /* not inside a polling loop's chain of visits (the sample would end it) */
    if (r->poll_end != r->eb.pos || !r->poll_n) sched_sample(r, tl_t);
    r->call_start = r->eb.pos;
    uint32_t cs = r->last_cs[fn], path = UINT32_MAX;
    if (__builtin_expect(cs >= MPS_CS_PYTHON, 0)) cs = mps_py_callsite(cs, &path);
    if (mps_cfg.callpath_depth > 1) /* the stack pointer: where the wrapper called us */
        mps_ev_put(&r->eb, tl_t, MPS_EV_PATH, 0, 0,
                   path != UINT32_MAX ? path
                                      : mps_callpath_id(r, ra, (uintptr_t)__builtin_dwarf_cfa()),
                   0);
    mps_ev_put(&r->eb, tl_t, MPS_EV_ENTER, 0, fn, cs, 0);
    r->call_mark = r->eb.pos;
}

/* The call returned rc != MPI_SUCCESS (an error handler other than ERRORS_ARE_FATAL).
 * Its Leave carries the code. A call that starts an operation (`keep` 0: a send, a
 * receive, a collective...) did not start it: what its hooks recorded before the call
 * (a send, a collective's begin) is taken back, words zeroed so the crash-safe log never
 * shows them, and its hooks after the call record nothing (a failed receive's status was
 * never written). A completion call (`keep` 1: Wait/Test families) still completes or
 * frees its requests in MPI: its hooks run as usual, so the request table stays true. */
__attribute__((noinline, cold)) void mps_failed(int rc, int keep)
{
    struct mps_recorder *r = tl_rec;
    if (tl_skip || mps_rt.state != 1 || !r) return;
    if (!keep) {
        if (r->call_mark && r->call_mark <= r->eb.pos) {
            memset(r->call_mark, 0, (size_t)(r->eb.pos - r->call_mark) * sizeof *r->eb.pos);
            r->eb.pos = r->call_mark;
        }
        tl_skip = 1; /* until the next call's mps_enter */
    }
    ev(MPS_EV_ERROR, 0, 0, (uint32_t)rc, 0);
}

void mps_after(void)
{
    if (!tl_skip && mps_rt.state == 1) tl_t = mps_ticks(mps_rt.tsc);
}

/* ------------------------------------------------------------- polling
 *
 * A polling call (Test*, Iprobe, Improbe, Request_get_status, Win_test) that completed
 * nothing calls mps_poll_idle right after the PMPI call, before its other hooks. Its own
 * [PATH] Enter are then the buffer's last records. Before them may stand a chain of idle
 * visits back to back (a polling loop's cycle, at most MPS_POLL_CHAIN: MPI_Test at one
 * site, MPI_Testany at another, as in hpcc's HPL), the newest returned at most
 * MPS_POLL_GAP_NS before this call entered, nothing recorded since. If one of them is
 * of the same function, call site and call path, this call is not a visit of its own:
 * its records are taken back, that visit's call count (MPS_EV_POLL, encoded as
 * mpiscope:calls on the Leave) goes up by one, and its Leave and every record after it
 * move later by the time this call spent inside MPI. So each visit lasts exactly the
 * time its calls spent in MPI and the time the program spent between them follows the
 * chain: a reader that ignores the attribute still gets MPI and compute time right,
 * only their order inside the polling loop is lost (MPI first). The merged call stores
 * nothing new and skips its other hooks (no request lookup). Otherwise the idle call is
 * recorded as any call, with a POLL record before its Leave, and joins the chain. The
 * call that completes something is recorded as any call and ends the chain, as does any
 * other record, a flush (a visit never grows across a batch already encoded) or a gap
 * beyond the bound.
 * Bound: a polling loop comes back in tens to a few hundred ns (its own loop and our
 * wrapper); a longer gap is the program computing between polls, which is kept where it
 * happened rather than moved after the loop. */
/* records after a merged visit that a merge may move (the visits after it in the cycle) */
#define MPS_POLL_SHIFT_WORDS 64

void mps_poll_idle(void)
{
    struct mps_recorder *r = tl_rec;
    /* only this call's [PATH] Enter since it entered (no error, no flush, no nested call) */
    if (tl_skip || mps_rt.state != 1 || mps_cfg.poll_all || !r || !r->call_mark ||
        r->eb.pos != r->call_mark)
        return;
    uint64_t *enter = r->call_mark - 2;
    uint64_t head = enter[1], path = enter > r->call_start ? r->call_start[1] : 0;
    unsigned n = r->poll_n;
    if (!n || r->poll_end != r->call_start || (int64_t)(enter[0] - r->poll_returned) < 0 ||
        enter[0] - r->poll_returned > poll_gap_ticks()) {
        n = 0; /* something else, or the program's own work, since the last idle poll */
    } else {
        for (unsigned i = n; i-- > 0;) {
            struct mps_poll_visit *v = &r->poll[i];
            if (v->head != head || v->path != path) continue;
            if (r->call_start - (v->leave + 2) > MPS_POLL_SHIFT_WORDS) break;
            uint64_t d = tl_t - enter[0];
            /* this call's records back to zero first (the live log's fresh space), then
             * the later records and this visit's Leave moved, newest first: a rank killed
             * at any point leaves whole records whose times never go back */
            memset(r->call_start, 0, (size_t)(r->eb.pos - r->call_start) * sizeof *r->eb.pos);
            r->eb.pos = r->call_start;
            mps_evbuf_shift(v->leave + 2, r->eb.pos, d);
            v->leave[0] += d;
            v->calls[0]++;
            r->poll_returned = tl_t;
            tl_skip = 1; /* its other hooks record nothing, mps_leave no Leave */
            tl_poll = 2;
            return;
        }
    }
    r->poll_n = n;
    r->poll_head = head;
    r->poll_path = path;
    tl_poll = 1;
}

/* Leave of an idle polling call that starts a visit: its call count (1 so far) and Leave,
 * and the visit joins the chain if its Enter is still in the buffer (no flush since). */
static void poll_leave(struct mps_recorder *r, enum mps_fn fn)
{
    uint64_t *calls = ev(MPS_EV_POLL, 0, 0, 0, 1);
    *calls = 1;
    uint64_t *leave = ev(MPS_EV_LEAVE, 0, fn, 0, 0) - 2;
    if (!r->call_mark) { /* a flush emptied the buffer: nothing here to extend */
        r->poll_n = 0;
        r->poll_end = NULL;
        return;
    }
    if (r->poll_n == MPS_POLL_CHAIN) { /* the oldest leaves the chain */
        memmove(r->poll, r->poll + 1, (MPS_POLL_CHAIN - 1) * sizeof r->poll[0]);
        r->poll_n--;
    }
    r->poll[r->poll_n++] = (struct mps_poll_visit){r->poll_head, r->poll_path, calls, leave};
    r->poll_end = r->eb.pos;
    r->poll_returned = tl_t;
}

void mps_leave(enum mps_fn fn)
{
    if (mps_cfg.filtered[fn] || mps_rt.state != 1 || !tl_rec) return;
    if (__builtin_expect(tl_poll != 0, 0)) {
        int merged = tl_poll == 2;
        tl_poll = 0;
        if (!merged) poll_leave(tl_rec, fn);
        return;
    }
    if (__builtin_expect(mps_evbuf_full(&tl_rec->eb), 0)) mps_flush_events(1);
    sched_sample(tl_rec, tl_t);
    ev(MPS_EV_LEAVE, 0, fn, 0, 0);
}

/* ------------------------------------------------- blocking point-to-point */

uint64_t mps_type_bytes(int64_t count, MPI_Datatype type)
{
    int64_t sz = 0;
    if (count <= 0 || type == MPI_DATATYPE_NULL) return 0;
    type_info(type, &sz);
    return (uint64_t)count * (uint64_t)sz;
}

uint64_t mps_sum_bytes_w(const void *counts, int cw, int n, MPI_Datatype type)
{
    uint64_t total = 0;
    if (!counts) return 0;
    for (int i = 0; i < n; i++) {
        int64_t c = mps_at(counts, cw, i);
        total += (uint64_t)(c > 0 ? c : 0);
    }
    return mps_type_bytes(1, type) * total;
}

void mps_send(int dest, int tag, MPI_Comm comm, int64_t count, MPI_Datatype type)
{
    if (tl_skip || mps_rt.state != 1 || dest == MPI_PROC_NULL) return;
    uint64_t bytes = mps_type_bytes(count, type);
    uint64_t *x = ev(MPS_EV_SEND, 0, 0, (uint32_t)dest, 2);
    x[0] = comm_ref(comm) | (uint64_t)(uint32_t)tag << 32;
    x[1] = bytes;
}

void mps_recv_done(const MPI_Status *st, MPI_Comm comm)
{
    if (tl_skip || mps_rt.state != 1 || !st || st->MPI_SOURCE == MPI_PROC_NULL) return;
    int64_t n = status_bytes(st);
    uint64_t *x = ev(MPS_EV_RECV, 0, 0, (uint32_t)st->MPI_SOURCE, 2);
    x[0] = comm_ref(comm) | (uint64_t)(uint32_t)st->MPI_TAG << 32;
    x[1] = (uint64_t)(n > 0 ? n : 0);
}
