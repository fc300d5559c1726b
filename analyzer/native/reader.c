/* mpiscope native reader: OTF2 events -> the analyzer's tables, column by column.
 *
 * Python (mpiscope/archive/native.py) reads the small global definitions and hands us lookup
 * tables (region -> function/kind code, source location -> call-site code, comm ->
 * world-rank members). Per location, libotf2 decodes the events into our callbacks,
 * which append rows to growable columns: Enter/Leave pairs become "calls" (MPI regions)
 * or "regions" (the rest), payload events are attached to the innermost open MPI call
 * and listed in "p2p". Afterwards sends are matched to receives (FIFO per sender,
 * receiver, comm and tag, receives in the order they were posted) and collective calls
 * get an instance id per (comm, sequence number). Every column is a plain malloc'd array
 * that Python wraps as a numpy array without copying and frees when it is collected.
 * No Python code runs per event; the only global state is the error text of libotf2.
 *
 * The tables' columns, the p2p event codes and the config struct are declared once in
 * analyzer/mpiscope/archive/tables.spec; schema.h is generated from it at build time
 * (analyzer/native/schemagen.py), and mpsr_layout() tells Python which layout we have.
 */
#define _GNU_SOURCE /* qsort_r */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <otf2/otf2.h>

#include "columns.h"
#include "localdefs.h"
#include "schema.h"

#define NONE32 UINT32_MAX
#define CHUNK_EVENTS (1u << 20) /* events per ReadLocalEvents call (progress granularity) */
#define POLL_CHAIN 4       /* the tracer's MPS_POLL_CHAIN */
#define POLL_GAP_NS 1000   /* the tracer's MPS_POLL_GAP_NS */

/* ------------------------------------------------------------------ growable columns */
/* column idx of a table as an array of its declared type, idx##_t (schema.h) */
#define COLUMN(tab, idx) ((idx##_t *)(tab)->cols[idx].p)

/* ------------------------------------------------------------------ interface */
/* mpsr_config, the lookup tables from the definitions that Python owns: see schema.h */
typedef void (*mpsr_progress)(uint64_t done, uint64_t expected);

typedef struct {
    table_t tables[T_NTABLES];
    /* per location */
    uint64_t *loc_events;
    int64_t *loc_first, *loc_last;
    uint8_t *loc_truncated;
    /* per location, what a damaged file made us change (mpsr_damage) */
    uint64_t *loc_backwards; /* timestamps before the one preceding them: raised to it */
    uint64_t *loc_outside;   /* timestamps outside the trace's range: the preceding one */
    uint64_t *loc_bytes;     /* byte counts beyond any real message: dropped (0) */
    uint8_t *loc_overrun;    /* more events than its bytes can hold: read stopped there */
    uint64_t clock_offsets; /* ClockOffset records in local definitions: libotf2 applied them */
    /* per p2p row, the call `match` pairs it by (posting call of a receive, completing
     * call of a send): kept for matching across separate reads of location subsets */
    int64_t *link;
    char error[512];
} mpsr_result;

/* ------------------------------------------------------------------ errors */
static __thread char g_error[400]; /* first libotf2 error of the current read */

static OTF2_ErrorCode on_error(void *u, const char *file, uint64_t line, const char *func,
                               OTF2_ErrorCode code, const char *fmt, va_list va)
{
    (void)u; (void)file; (void)line; (void)func;
    if (!g_error[0]) { /* the first error is the cause; OTF2 reports its consequences too */
        char msg[300];
        vsnprintf(msg, sizeof msg, fmt ? fmt : "", va);
        snprintf(g_error, sizeof g_error, "%s%s%s", OTF2_Error_GetDescription(code),
                 msg[0] ? ": " : "", msg);
    }
    return code;
}

/* ------------------------------------------------------------------ request map */
/* request id -> value, open addressing with backward-shift deletion (ids are per rank) */
typedef struct {
    uint64_t *key;
    int64_t *val;
    uint8_t *used;
    uint64_t mask, n;
} reqmap_t;

static uint64_t hash64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static int reqmap_init(reqmap_t *m, uint64_t cap)
{
    m->mask = cap - 1;
    m->n = 0;
    m->key = malloc(cap * sizeof *m->key);
    m->val = malloc(cap * sizeof *m->val);
    m->used = calloc(cap, 1);
    return m->key && m->val && m->used ? 0 : -1;
}

static void reqmap_free(reqmap_t *m)
{
    free(m->key); free(m->val); free(m->used);
    memset(m, 0, sizeof *m);
}

static void reqmap_clear(reqmap_t *m)
{
    if (m->n) memset(m->used, 0, m->mask + 1);
    m->n = 0;
}

static int reqmap_put(reqmap_t *m, uint64_t k, int64_t v)
{
    if ((m->n + 1) * 2 > m->mask + 1) { /* grow: rehash into twice the slots */
        reqmap_t g;
        if (reqmap_init(&g, (m->mask + 1) * 2)) return -1;
        for (uint64_t i = 0; i <= m->mask; i++)
            if (m->used[i]) reqmap_put(&g, m->key[i], m->val[i]);
        reqmap_free(m);
        *m = g;
    }
    uint64_t i = hash64(k) & m->mask;
    while (m->used[i] && m->key[i] != k) i = (i + 1) & m->mask;
    if (!m->used[i]) m->n++;
    m->used[i] = 1;
    m->key[i] = k;
    m->val[i] = v;
    return 0;
}

/* remove k and return its value, or -1 */
static int64_t reqmap_take(reqmap_t *m, uint64_t k)
{
    uint64_t i = hash64(k) & m->mask;
    while (m->used[i] && m->key[i] != k) i = (i + 1) & m->mask;
    if (!m->used[i]) return -1;
    int64_t v = m->val[i];
    m->used[i] = 0;
    m->n--;
    for (uint64_t j = (i + 1) & m->mask; m->used[j]; j = (j + 1) & m->mask) {
        uint64_t home = hash64(m->key[j]) & m->mask;
        /* move j back into the hole if its home slot is not in (i, j] */
        if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
            m->key[i] = m->key[j];
            m->val[i] = m->val[j];
            m->used[i] = 1;
            m->used[j] = 0;
            i = j;
        }
    }
    return v;
}

/* ------------------------------------------------------------------ decoding */
typedef struct {
    int64_t row;
    uint8_t mpi; /* region_mpi: 0 other region, 1 MPI call, 2 MPI polling call */
} frame_t;

typedef struct {
    mpsr_result *res;
    const mpsr_config *cfg;
    int32_t rank;
    int16_t thread; /* of the location being read, within its rank */
    frame_t *stack;
    uint32_t depth, mpi_depth, stack_cap;
    int64_t mpi_top; /* row of the innermost open MPI call, -1 if none */
    int64_t first, last;
    uint64_t events;
    int64_t end;         /* the trace's length in ns: no timestamp lies beyond it */
    uint64_t backwards, outside, bad_bytes; /* damage seen in this location */
    int64_t *coll_count; /* per comm index: collectives so far on this rank */
    reqmap_t isends;     /* request -> p2p row of the MpiIsend */
    reqmap_t irecvs;     /* request -> call that posted the Irecv */
    /* A rank of several threads: a request may complete on a thread read before the one
     * that started it. Completions waiting for their start: */
    int threaded;        /* the rank has more than one location */
    reqmap_t early_sends; /* request -> call that completed the Isend */
    reqmap_t early_recvs; /* request -> p2p row of the MpiIrecv */
    /* per p2p row, for matching: posting call of receives, completing call of sends */
    table_t link;
    table_t coll_comm;   /* per collective row: comm index and sequence number */
    reqmap_t rma_open;   /* (win, matchingId) -> rma row not completed yet */
    reqmap_t io_open;    /* (handle, matchingId) -> io row not completed yet */
    /* Idle polling visits back to back (region_mpi == 2), merged as the tracer merges
     * them at the source (interposer/README.md, "Polling") so that a trace recorded with
     * MPISCOPE_POLL=all, or by another tool, costs what its information costs: */
    int64_t chain[POLL_CHAIN]; /* their rows in calls, oldest first */
    uint32_t nchain;
    uint64_t chain_mark;  /* `events` right after the chain's newest Leave */
    int64_t chain_left;   /* when the chain's newest call returned */
    uint64_t tests;       /* MpiRequestTested records so far */
    uint64_t poll_mark, poll_tests; /* `events`, `tests` after an open polling call's Enter */
    int poll_chained;     /* that call entered right after the chain's newest Leave */
    uint64_t merged;      /* events of calls merged into visits (all locations so far) */
    int failed;
} ctx_t;

/* the decoder's own tables, never handed to Python */
enum { L_POST, L_NCOLS };
typedef int64_t L_POST_t;
static const uint32_t link_sizes[L_NCOLS] = {sizeof(L_POST_t)};
enum { CC_COMM, CC_SEQ, CC_NCOLS };
typedef int32_t CC_COMM_t;
typedef int64_t CC_SEQ_t;
static const uint32_t cc_sizes[CC_NCOLS] = {sizeof(CC_COMM_t), sizeof(CC_SEQ_t)};

/* ns since the trace's start; saturated, never wrapped, whatever a damaged file says */
static inline int64_t ns_of(const mpsr_config *g, uint64_t t)
{
    uint64_t off = g->global_offset;
    if (g->timer_resolution == 1000000000u) {
        if (t >= off) return t - off > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)(t - off);
        return off - t > (uint64_t)INT64_MAX ? -INT64_MAX : -(int64_t)(off - t);
    }
    /* the difference in integers, exact: two large stamps as doubles each lose their
     * last bits (an offset of 2^56 ticks: 16 of them, 64 ms of a 251 Hz clock) */
    double d = t >= off ? (double)(t - off) : -(double)(off - t);
    double v = d * (1e9 / (double)g->timer_resolution) + 0.5;
    if (!(v > -9.2e18)) return -INT64_MAX; /* also NaN */
    return v < 9.2e18 ? (int64_t)v : INT64_MAX;
}

static inline int64_t ns(const ctx_t *c, uint64_t t) { return ns_of(c->cfg, t); }

/* A damaged timestamp must not make a negative or absurd duration: one outside the
 * trace's range takes the time of the event before it, one before that event is raised
 * to it (times never go back within a location). Counted for the warning. */
static inline int64_t stamp(ctx_t *c, uint64_t t)
{
    int64_t v = ns(c, t);
    c->events++;
    int seen = c->first != INT64_MIN;
    if (v < 0 || v > c->end) {
        c->outside++;
        v = seen ? c->last : v < 0 ? 0 : c->end;
    } else if (seen && v < c->last) {
        c->backwards++;
        v = c->last;
    }
    if (!seen) c->first = v;
    c->last = v;
    return v;
}

/* No real message or I/O moves 2^48 bytes (256 TiB, more than any node's memory): a
 * larger count is a damaged field, dropped (counted for the warning). */
#define MAX_BYTES (UINT64_C(1) << 48)

static inline uint64_t plausible(ctx_t *c, uint64_t bytes)
{
    if (bytes <= MAX_BYTES) return bytes;
    c->bad_bytes++;
    return 0;
}

/* a call's bytes add up without overflow (each part is plausible, their sum may not be) */
static inline void add_bytes(int64_t *slot, uint64_t bytes)
{
    *slot = (uint64_t)*slot > (uint64_t)INT64_MAX - bytes ? INT64_MAX : *slot + (int64_t)bytes;
}

/* index of definition ref `ref` in a lookup of n entries: the ref itself (dense refs), or
 * its place in `refs` (sorted; given when the refs are sparse); -1 if not defined */
static inline int64_t def_index(uint32_t ref, uint32_t n, const uint32_t *refs)
{
    if (!refs) return ref < n ? (int64_t)ref : -1;
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (refs[mid] < ref) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && refs[lo] == ref ? (int64_t)lo : -1;
}

/* world rank of a comm-local rank; -1 if unknown */
static inline int32_t world(const ctx_t *c, OTF2_CommRef comm, uint32_t local)
{
    const mpsr_config *g = c->cfg;
    int64_t cr = local == NONE32 ? -1 : def_index(comm, g->ncommrefs, g->comm_refs);
    if (cr < 0) return -1;
    int32_t ci = g->comm_index[cr];
    if (ci < 0) return -1;
    if (g->comm_self[ci] == 1) return c->rank;
    int64_t off = g->comm_offset[ci], size = g->comm_offset[ci + 1] - off;
    if (g->comm_self[ci] == 2 && size > 0) { /* intercommunicator: the peer's group is the
                                               one this rank is not in */
        int64_t na = g->comm_members[off];
        if (na < 0 || na > size - 1) return -1;
        int in_a = 0;
        for (int64_t k = 0; k < na && !in_a; k++) in_a = g->comm_members[off + 1 + k] == c->rank;
        if (in_a) off += 1 + na, size -= 1 + na;
        else off += 1, size = na;
    }
    return (int64_t)local < size ? g->comm_members[off + local] : -1;
}

static inline int32_t signed32(uint32_t v) { return v == NONE32 ? -1 : (int32_t)v; }

#define OK_OR_STOP(expr) do { if (expr) { c->failed = 1; return OTF2_CALLBACK_INTERRUPT; } } while (0)

/* the thread's run-queue delay sampled on this Enter/Leave (mpiscope:run_delay_ns), -1 */
static int64_t run_delay(const ctx_t *c, OTF2_AttributeList *al)
{
    uint64_t v;
    if (!al || c->cfg->attr_run_delay == NONE32 ||
        OTF2_AttributeList_GetUint64(al, c->cfg->attr_run_delay, &v) != OTF2_SUCCESS ||
        v > INT64_MAX)
        return -1;
    return (int64_t)v;
}

static OTF2_CallbackCode cb_enter(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos, void *u,
                                  OTF2_AttributeList *al, OTF2_RegionRef region)
{
    (void)l; (void)pos;
    ctx_t *c = u;
    const mpsr_config *g = c->cfg;
    int64_t time = stamp(c, t);
    int64_t ri = def_index(region, g->nregions, g->region_refs);
    int known = ri >= 0;
    uint8_t mpi = known ? g->region_mpi[ri] : 0;
    table_t *k = &c->res->tables[mpi ? T_CALLS : T_REGIONS];
    OK_OR_STOP(table_room(k, k->n + 1));
    if (c->depth == c->stack_cap) {
        uint32_t cap = c->stack_cap ? c->stack_cap * 2 : 64;
        frame_t *s = realloc(c->stack, cap * sizeof *s);
        OK_OR_STOP(!s);
        c->stack = s;
        c->stack_cap = cap;
    }
    int32_t cs = g->unknown_source;
    uint32_t scl;
    int have_cs = al && g->attr_callsite != NONE32 &&
        OTF2_AttributeList_GetSourceCodeLocationRef(al, g->attr_callsite, &scl) == OTF2_SUCCESS;
    if (have_cs) {
        int64_t si = def_index(scl, g->nsources, g->source_refs);
        cs = si >= 0 ? g->source_code[si] : g->unknown_source;
    }
    /* the call path: the innermost calling context; without mpiscope:callsite its frame
     * is the call site (the writer may leave the callsite out when it writes the path) */
    int32_t cp = -1;
    OTF2_CallingContextRef ctx;
    int64_t xi = al && g->attr_callpath != NONE32 &&
        OTF2_AttributeList_GetCallingContextRef(al, g->attr_callpath, &ctx) == OTF2_SUCCESS
        ? def_index(ctx, g->ncontexts, g->context_refs) : -1;
    if (xi >= 0) {
        cp = g->context_path[xi];
        if (!have_cs) cs = g->context_source[xi];
    }
    uint64_t i = k->n++;
    COLUMN(k, C_RANK)[i] = c->rank;
    COLUMN(k, C_THREAD)[i] = c->thread;
    COLUMN(k, C_FUNCTION)[i] = known ? g->region_func[ri] : g->unknown_func;
    COLUMN(k, C_KIND)[i] = known ? g->region_kind[ri] : 0;
    COLUMN(k, C_START)[i] = time;
    COLUMN(k, C_END)[i] = time;
    uint32_t depth = mpi ? c->mpi_depth : c->depth; /* deep user recursion: clamp */
    COLUMN(k, C_DEPTH)[i] = (int8_t)(depth > INT8_MAX ? INT8_MAX : depth);
    COLUMN(k, C_CALLSITE)[i] = cs;
    COLUMN(k, C_CALLPATH)[i] = cp;
    COLUMN(k, C_COMM)[i] = -1;
    COLUMN(k, C_PEER)[i] = -1;
    COLUMN(k, C_TAG)[i] = -1;
    COLUMN(k, C_BYTES_SENT)[i] = 0;
    COLUMN(k, C_BYTES_RECV)[i] = 0;
    COLUMN(k, C_ROOT)[i] = -1;
    COLUMN(k, C_COLL_SEQ)[i] = -1;
    COLUMN(k, C_COLL_OP)[i] = -1;
    COLUMN(k, C_IN_HASH)[i] = 0;
    COLUMN(k, C_OUT_HASH)[i] = 0;
    COLUMN(k, C_PRIOR_HASH)[i] = 0;
    COLUMN(k, C_TRUNCATED)[i] = 0;
    COLUMN(k, C_POLLS)[i] = 1;
    COLUMN(k, C_RUN_DELAY_ENTER)[i] = run_delay(c, al);
    COLUMN(k, C_RUN_DELAY_LEAVE)[i] = -1;
    if (mpi == 2 && c->mpi_depth == 0) { /* a polling call: may merge at its Leave */
        c->poll_chained = c->nchain && c->events == c->chain_mark + 1 &&
                          time - c->chain_left <= POLL_GAP_NS;
        c->poll_mark = c->events;
        c->poll_tests = c->tests;
    }
    c->stack[c->depth++] = (frame_t){(int64_t)i, mpi};
    if (mpi) {
        c->mpi_depth++;
        c->mpi_top = (int64_t)i;
    }
    return OTF2_CALLBACK_SUCCESS;
}

/* At the Leave of a polling call: an idle one (nothing recorded inside but its
 * MpiRequestTested) either merges into a visit of the chain with the same function,
 * call site and call path, which then lasts this call longer (the chain's later visits
 * move later by as much), or joins the chain; anything else ends the chain. Returns 1
 * when the row was merged (and removed). */
static int poll_leave(ctx_t *c, table_t *k, int64_t row, int64_t time)
{
    int idle = c->events - c->poll_mark - 1 == c->tests - c->poll_tests &&
               row == (int64_t)k->n - 1;
    if (!idle) {
        c->nchain = 0;
        return 0;
    }
    int chained = c->poll_chained;
    c->chain_left = time;
    c->chain_mark = c->events;
    if (chained) {
        for (uint32_t j = c->nchain; j-- > 0;) {
            int64_t v = c->chain[j];
            if (COLUMN(k, C_FUNCTION)[v] != COLUMN(k, C_FUNCTION)[row] ||
                COLUMN(k, C_CALLSITE)[v] != COLUMN(k, C_CALLSITE)[row] ||
                COLUMN(k, C_CALLPATH)[v] != COLUMN(k, C_CALLPATH)[row])
                continue;
            int64_t d = time - COLUMN(k, C_START)[row];
            int64_t n = (int64_t)COLUMN(k, C_POLLS)[v] + COLUMN(k, C_POLLS)[row];
            COLUMN(k, C_POLLS)[v] = n > INT32_MAX ? INT32_MAX : (int32_t)n;
            COLUMN(k, C_END)[v] += d;
            if (COLUMN(k, C_RUN_DELAY_LEAVE)[row] >= 0) /* the latest sample: delay only grows */
                COLUMN(k, C_RUN_DELAY_LEAVE)[v] = COLUMN(k, C_RUN_DELAY_LEAVE)[row];
            for (uint32_t m = j + 1; m < c->nchain; m++) {
                COLUMN(k, C_START)[c->chain[m]] += d;
                COLUMN(k, C_END)[c->chain[m]] += d;
            }
            k->n--;
            c->merged += c->events - c->poll_mark + 1; /* its Enter, tests and Leave */
            return 1;
        }
    } else {
        c->nchain = 0;
    }
    if (c->nchain == POLL_CHAIN) { /* the oldest leaves the chain */
        memmove(c->chain, c->chain + 1, (POLL_CHAIN - 1) * sizeof c->chain[0]);
        c->nchain--;
    }
    c->chain[c->nchain++] = row;
    return 0;
}

static void restore_mpi_top(ctx_t *c)
{
    c->mpi_top = -1;
    for (uint32_t d = c->depth; d-- > 0;)
        if (c->stack[d].mpi) {
            c->mpi_top = c->stack[d].row;
            break;
        }
}

static OTF2_CallbackCode cb_leave(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos, void *u,
                                  OTF2_AttributeList *al, OTF2_RegionRef region)
{
    (void)l; (void)pos; (void)region;
    ctx_t *c = u;
    int64_t time = stamp(c, t);
    if (!c->depth) return OTF2_CALLBACK_SUCCESS; /* unbalanced: ignore the stray Leave */
    frame_t f = c->stack[--c->depth];
    table_t *k = &c->res->tables[f.mpi ? T_CALLS : T_REGIONS];
    COLUMN(k, C_END)[f.row] = time;
    uint64_t polls;
    if (al && c->cfg->attr_calls != NONE32 &&
        OTF2_AttributeList_GetUint64(al, c->cfg->attr_calls, &polls) == OTF2_SUCCESS)
        COLUMN(k, C_POLLS)[f.row] = polls < 1 ? 1 : polls > INT32_MAX ? INT32_MAX : (int32_t)polls;
    COLUMN(k, C_RUN_DELAY_LEAVE)[f.row] = run_delay(c, al);
    if (f.mpi) {
        c->mpi_depth--;
        restore_mpi_top(c);
        if (c->mpi_depth == 0) {
            if (f.mpi == 2) poll_leave(c, k, f.row, time);
            else c->nchain = 0;
        }
    }
    return OTF2_CALLBACK_SUCCESS;
}

/* append a p2p row; returns its index or -1 */
static int64_t p2p_add(ctx_t *c, uint8_t kind, int64_t time, int32_t peer, uint32_t comm,
                       uint32_t tag, uint64_t bytes, int64_t req, int64_t post)
{
    table_t *p = &c->res->tables[T_P2P];
    if (table_room(p, p->n + 1) || table_room(&c->link, p->n + 1)) return -1;
    uint64_t i = p->n++;
    COLUMN(p, P_RANK)[i] = c->rank;
    COLUMN(p, P_THREAD)[i] = c->thread;
    COLUMN(p, P_EVENT)[i] = kind;
    COLUMN(p, P_TIME)[i] = time;
    COLUMN(p, P_CALL)[i] = c->mpi_top;
    COLUMN(p, P_PEER)[i] = peer;
    COLUMN(p, P_COMM)[i] = signed32(comm);
    COLUMN(p, P_TAG)[i] = signed32(tag);
    COLUMN(p, P_BYTES)[i] = (int64_t)bytes;
    COLUMN(p, P_REQUEST)[i] = req;
    COLUMN(&c->link, L_POST)[i] = post;
    c->link.n = p->n;
    return (int64_t)i;
}

static void attach(ctx_t *c, int32_t peer, uint32_t comm, uint32_t tag, uint64_t sent,
                   uint64_t recvd)
{
    int64_t i = c->mpi_top;
    if (i < 0) return;
    table_t *k = &c->res->tables[T_CALLS];
    COLUMN(k, C_PEER)[i] = peer;
    COLUMN(k, C_COMM)[i] = signed32(comm);
    COLUMN(k, C_TAG)[i] = signed32(tag);
    add_bytes(&COLUMN(k, C_BYTES_SENT)[i], sent);
    add_bytes(&COLUMN(k, C_BYTES_RECV)[i], recvd);
}

#define EV_HEAD ctx_t *c = u; (void)l; (void)pos; (void)al; int64_t time = stamp(c, t)
#define DONE(expr) return (expr) < 0 ? (c->failed = 1, OTF2_CALLBACK_INTERRUPT) \
                                     : OTF2_CALLBACK_SUCCESS

static OTF2_CallbackCode cb_send(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos, void *u,
                                 OTF2_AttributeList *al, uint32_t recv, OTF2_CommRef comm,
                                 uint32_t tag, uint64_t len)
{
    EV_HEAD;
    len = plausible(c, len);
    int32_t peer = world(c, comm, recv);
    attach(c, peer, comm, tag, len, 0);
    /* for sends, `link` holds the call that completes the send: this one */
    DONE(p2p_add(c, P2P_SEND, time, peer, comm, tag, len, -1, c->mpi_top));
}

static OTF2_CallbackCode cb_recv(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos, void *u,
                                 OTF2_AttributeList *al, uint32_t sender, OTF2_CommRef comm,
                                 uint32_t tag, uint64_t len)
{
    EV_HEAD;
    len = plausible(c, len);
    int32_t peer = world(c, comm, sender);
    int64_t i = c->mpi_top;
    /* Sendrecv: the call keeps the send's peer and gets the received bytes */
    if (i >= 0 && COLUMN(&c->res->tables[T_CALLS], C_PEER)[i] >= 0)
        add_bytes(&COLUMN(&c->res->tables[T_CALLS], C_BYTES_RECV)[i], len);
    else
        attach(c, peer, comm, tag, 0, len);
    DONE(p2p_add(c, P2P_RECV, time, peer, comm, tag, len, -1, c->mpi_top));
}

static OTF2_CallbackCode cb_isend(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos, void *u,
                                  OTF2_AttributeList *al, uint32_t recv, OTF2_CommRef comm,
                                  uint32_t tag, uint64_t len, uint64_t req)
{
    EV_HEAD;
    len = plausible(c, len);
    int32_t peer = world(c, comm, recv);
    attach(c, peer, comm, tag, len, 0);
    int64_t row = p2p_add(c, P2P_ISEND, time, peer, comm, tag, len, (int64_t)req, c->mpi_top);
    if (row < 0) DONE(-1);
    int64_t done = c->threaded ? reqmap_take(&c->early_sends, req) : -1;
    if (done >= 0) COLUMN(&c->link, L_POST)[row] = done; /* completed on another thread */
    else if (reqmap_put(&c->isends, req, row)) DONE(-1);
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode cb_isend_complete(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                           void *u, OTF2_AttributeList *al, uint64_t req)
{
    EV_HEAD;
    int64_t send = reqmap_take(&c->isends, req);
    if (send >= 0) COLUMN(&c->link, L_POST)[send] = c->mpi_top; /* completed here */
    else if (c->threaded && reqmap_put(&c->early_sends, req, c->mpi_top)) DONE(-1);
    DONE(p2p_add(c, P2P_ISEND_COMPLETE, time, -1, NONE32, NONE32, 0, (int64_t)req, -1));
}

static OTF2_CallbackCode cb_irecv_request(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                          void *u, OTF2_AttributeList *al, uint64_t req)
{
    EV_HEAD;
    int64_t done = c->threaded ? reqmap_take(&c->early_recvs, req) : -1;
    if (done >= 0) COLUMN(&c->link, L_POST)[done] = c->mpi_top; /* the receive it posted */
    else if (reqmap_put(&c->irecvs, req, c->mpi_top)) DONE(-1);
    DONE(p2p_add(c, P2P_IRECV_REQUEST, time, -1, NONE32, NONE32, 0, (int64_t)req, -1));
}

static OTF2_CallbackCode cb_irecv(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos, void *u,
                                  OTF2_AttributeList *al, uint32_t sender, OTF2_CommRef comm,
                                  uint32_t tag, uint64_t len, uint64_t req)
{
    EV_HEAD;
    len = plausible(c, len);
    int64_t i = c->mpi_top;
    if (i >= 0) add_bytes(&COLUMN(&c->res->tables[T_CALLS], C_BYTES_RECV)[i], len);
    int64_t posted = reqmap_take(&c->irecvs, req);
    /* for receives, `link` holds the call that posted the receive (MPI matching order) */
    int64_t row = p2p_add(c, P2P_IRECV, time, world(c, comm, sender), comm, tag, len,
                          (int64_t)req, posted >= 0 ? posted : c->mpi_top);
    if (row >= 0 && posted < 0 && c->threaded && reqmap_put(&c->early_recvs, req, row))
        DONE(-1);
    DONE(row);
}

static OTF2_CallbackCode cb_cancelled(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                      void *u, OTF2_AttributeList *al, uint64_t req)
{
    EV_HEAD;
    reqmap_take(&c->irecvs, req);
    reqmap_take(&c->isends, req);
    DONE(p2p_add(c, P2P_CANCELLED, time, -1, NONE32, NONE32, 0, (int64_t)req, -1));
}

static OTF2_CallbackCode cb_other(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos, void *u,
                                  OTF2_AttributeList *al)
{
    EV_HEAD;
    (void)time;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode cb_request_test(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                         void *u, OTF2_AttributeList *al, uint64_t req)
{
    (void)req;
    EV_HEAD;
    (void)time;
    c->tests++;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode cb_coll_end(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                     void *u, OTF2_AttributeList *al, OTF2_CollectiveOp op,
                                     OTF2_CommRef comm, uint32_t root, uint64_t sent,
                                     uint64_t recvd)
{
    ctx_t *c = u;
    (void)l; (void)pos;
    stamp(c, t);
    int64_t i = c->mpi_top;
    if (i < 0) return OTF2_CALLBACK_SUCCESS;
    const mpsr_config *g = c->cfg;
    table_t *k = &c->res->tables[T_CALLS];
    COLUMN(k, C_COLL_OP)[i] = (int16_t)op;
    COLUMN(k, C_COMM)[i] = signed32(comm);
    COLUMN(k, C_ROOT)[i] = world(c, comm, root);
    COLUMN(k, C_BYTES_SENT)[i] = (int64_t)plausible(c, sent);
    COLUMN(k, C_BYTES_RECV)[i] = (int64_t)plausible(c, recvd);
    if (al && g->attr_in != NONE32)
        OTF2_AttributeList_GetUint64(al, g->attr_in, &COLUMN(k, C_IN_HASH)[i]);
    if (al && g->attr_out != NONE32)
        OTF2_AttributeList_GetUint64(al, g->attr_out, &COLUMN(k, C_OUT_HASH)[i]);
    if (al && g->attr_prior != NONE32)
        OTF2_AttributeList_GetUint64(al, g->attr_prior, &COLUMN(k, C_PRIOR_HASH)[i]);
    int64_t cr = def_index(comm, g->ncommrefs, g->comm_refs);
    int32_t ci = cr >= 0 ? g->comm_index[cr] : -1;
    if (ci >= 0 && COLUMN(k, C_COLL_SEQ)[i] < 0) {
        int64_t seq = c->coll_count[ci]++;
        COLUMN(k, C_COLL_SEQ)[i] = seq;
        table_t *cc = &c->coll_comm, *kt = &c->res->tables[T_COLLECTIVES];
        OK_OR_STOP(table_reserve(cc, cc->n + 1) || table_reserve(kt, kt->n + 1));
        COLUMN(cc, CC_COMM)[cc->n] = ci;
        COLUMN(cc, CC_SEQ)[cc->n++] = seq;
        COLUMN(kt, K_CALL)[kt->n++] = i;
    }
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode cb_nbc_request(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                        void *u, OTF2_AttributeList *al, uint64_t req)
{
    EV_HEAD;
    DONE(p2p_add(c, P2P_NBC_REQUEST, time, -1, NONE32, NONE32, 0, (int64_t)req, -1));
}

static OTF2_CallbackCode cb_nbc_complete(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                         void *u, OTF2_AttributeList *al, OTF2_CollectiveOp op,
                                         OTF2_CommRef comm, uint32_t root, uint64_t sent,
                                         uint64_t recvd, uint64_t req)
{
    EV_HEAD;
    (void)op; (void)recvd;
    DONE(p2p_add(c, P2P_NBC_COMPLETE, time, world(c, comm, root), comm, NONE32,
                 plausible(c, sent), (int64_t)req, -1));
}

static OTF2_CallbackCode cb_flush(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos, void *u,
                                  OTF2_AttributeList *al, OTF2_TimeStamp stop)
{
    EV_HEAD;
    table_t *f = &c->res->tables[T_FLUSHES];
    OK_OR_STOP(table_reserve(f, f->n + 1));
    COLUMN(f, F_RANK)[f->n] = c->rank;
    COLUMN(f, F_START)[f->n] = time;
    int64_t end = ns(c, stop); /* as its start: within the trace, not before the start */
    if (end < time || end > c->end) {
        c->outside++;
        end = end < time ? time : c->end;
    }
    COLUMN(f, F_END)[f->n] = end;
    f->n++;
    return OTF2_CALLBACK_SUCCESS;
}

/* ------------------------------------------------------------------ RMA and I/O */
/* The one-sided and MPI-IO records (Score-P's conventions, docs/data-model.md): kept in
 * their own tables; the enclosing call gets the bytes (bytes_sent: put / write / atomic
 * origin data, bytes_recv: get / read / fetched result) and, for RMA, the window's comm. */

/* (object ref, matchingId) -> one map key; matching ids are per location and object */
static inline uint64_t op_key(uint32_t ref, uint64_t matching)
{
    return ((uint64_t)ref << 44) ^ matching;
}

static inline int32_t win_comm(const ctx_t *c, OTF2_RmaWinRef win)
{
    const mpsr_config *g = c->cfg;
    int64_t wi = def_index(win, g->nwinrefs, g->win_refs);
    return wi >= 0 ? g->win_comm[wi] : -1;
}

static void attach_bytes(ctx_t *c, int32_t comm, uint64_t sent, uint64_t recvd)
{
    int64_t i = c->mpi_top;
    if (i < 0) return;
    table_t *k = &c->res->tables[T_CALLS];
    if (comm >= 0) COLUMN(k, C_COMM)[i] = comm;
    add_bytes(&COLUMN(k, C_BYTES_SENT)[i], sent);
    add_bytes(&COLUMN(k, C_BYTES_RECV)[i], recvd);
}

static int64_t rma_add(ctx_t *c, int64_t time, uint8_t op, OTF2_RmaWinRef win, uint32_t remote,
                       uint64_t sent, uint64_t recvd, uint64_t matching)
{
    table_t *r = &c->res->tables[T_RMA];
    if (table_room(r, r->n + 1)) return -1;
    sent = plausible(c, sent);
    recvd = plausible(c, recvd);
    int32_t comm = win_comm(c, win);
    uint64_t i = r->n++;
    COLUMN(r, R_RANK)[i] = c->rank;
    COLUMN(r, R_CALL)[i] = c->mpi_top;
    COLUMN(r, R_TIME)[i] = time;
    COLUMN(r, R_OP)[i] = op;
    COLUMN(r, R_WIN)[i] = signed32(win);
    COLUMN(r, R_TARGET)[i] = comm >= 0 ? world(c, (OTF2_CommRef)comm, remote) : -1;
    COLUMN(r, R_BYTES_SENT)[i] = (int64_t)sent;
    COLUMN(r, R_BYTES_RECV)[i] = (int64_t)recvd;
    COLUMN(r, R_MATCHING)[i] = (int64_t)matching;
    COLUMN(r, R_COMPLETE_CALL)[i] = -1;
    COLUMN(r, R_COMPLETE_TIME)[i] = -1;
    attach_bytes(c, comm, sent, recvd);
    return reqmap_put(&c->rma_open, op_key(win, matching), (int64_t)i) ? -1 : (int64_t)i;
}

static OTF2_CallbackCode cb_rma_put(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos, void *u,
                                    OTF2_AttributeList *al, OTF2_RmaWinRef win, uint32_t remote,
                                    uint64_t bytes, uint64_t matching)
{
    EV_HEAD;
    DONE(rma_add(c, time, RMA_PUT, win, remote, bytes, 0, matching));
}

static OTF2_CallbackCode cb_rma_get(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos, void *u,
                                    OTF2_AttributeList *al, OTF2_RmaWinRef win, uint32_t remote,
                                    uint64_t bytes, uint64_t matching)
{
    EV_HEAD;
    DONE(rma_add(c, time, RMA_GET, win, remote, 0, bytes, matching));
}

static OTF2_CallbackCode cb_rma_atomic(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                       void *u, OTF2_AttributeList *al, OTF2_RmaWinRef win,
                                       uint32_t remote, OTF2_RmaAtomicType type, uint64_t sent,
                                       uint64_t recvd, uint64_t matching)
{
    EV_HEAD;
    (void)type;
    DONE(rma_add(c, time, RMA_ATOMIC, win, remote, sent, recvd, matching));
}

static OTF2_CallbackCode cb_rma_complete(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                         void *u, OTF2_AttributeList *al, OTF2_RmaWinRef win,
                                         uint64_t matching)
{
    EV_HEAD;
    int64_t i = reqmap_take(&c->rma_open, op_key(win, matching));
    if (i >= 0) {
        table_t *r = &c->res->tables[T_RMA];
        COLUMN(r, R_COMPLETE_CALL)[i] = c->mpi_top;
        COLUMN(r, R_COMPLETE_TIME)[i] = time;
    }
    return OTF2_CALLBACK_SUCCESS;
}

static int64_t rma_sync_add(ctx_t *c, int64_t time, uint8_t event, OTF2_RmaWinRef win,
                            uint32_t remote, int64_t group, int8_t lock_type, int32_t level,
                            int64_t lock_id)
{
    table_t *s = &c->res->tables[T_RMA_SYNC];
    if (table_room(s, s->n + 1)) return -1;
    int32_t comm = win_comm(c, win);
    uint64_t i = s->n++;
    COLUMN(s, S_RANK)[i] = c->rank;
    COLUMN(s, S_CALL)[i] = c->mpi_top;
    COLUMN(s, S_TIME)[i] = time;
    COLUMN(s, S_EVENT)[i] = event;
    COLUMN(s, S_WIN)[i] = signed32(win);
    COLUMN(s, S_REMOTE)[i] = comm >= 0 ? world(c, (OTF2_CommRef)comm, remote) : -1;
    COLUMN(s, S_GROUP)[i] = group;
    COLUMN(s, S_LOCK_TYPE)[i] = lock_type;
    COLUMN(s, S_LEVEL)[i] = level;
    COLUMN(s, S_LOCK_ID)[i] = lock_id;
    attach_bytes(c, comm, 0, 0);
    return (int64_t)i;
}

#define NO_REMOTE NONE32

static OTF2_CallbackCode cb_rma_coll_end(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                         void *u, OTF2_AttributeList *al, OTF2_CollectiveOp op,
                                         OTF2_RmaSyncLevel level, OTF2_RmaWinRef win,
                                         uint32_t root, uint64_t sent, uint64_t recvd)
{
    EV_HEAD;
    (void)root; (void)sent; (void)recvd;
    /* Score-P brackets window creation / free the same way (their RmaWinCreate /
     * RmaWinDestroy say so already): only a synchronizing one is a fence */
    if (op >= OTF2_COLLECTIVE_OP_CREATE_HANDLE &&
        op <= OTF2_COLLECTIVE_OP_DESTROY_HANDLE_AND_DEALLOCATE) {
        attach_bytes(c, win_comm(c, win), 0, 0);
        return OTF2_CALLBACK_SUCCESS;
    }
    DONE(rma_sync_add(c, time, RSE_FENCE, win, NO_REMOTE, -1, -1, (int32_t)level, -1));
}

static OTF2_CallbackCode cb_rma_group_sync(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                           void *u, OTF2_AttributeList *al,
                                           OTF2_RmaSyncLevel level, OTF2_RmaWinRef win,
                                           OTF2_GroupRef group)
{
    EV_HEAD;
    DONE(rma_sync_add(c, time, RSE_GROUP_SYNC, win, NO_REMOTE,
                      group == OTF2_UNDEFINED_GROUP ? -1 : (int64_t)group, -1, (int32_t)level,
                      -1));
}

static OTF2_CallbackCode cb_rma_request_lock(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                             void *u, OTF2_AttributeList *al,
                                             OTF2_RmaWinRef win, uint32_t remote,
                                             uint64_t lock_id, OTF2_LockType type)
{
    EV_HEAD;
    DONE(rma_sync_add(c, time, RSE_REQUEST_LOCK, win, remote, -1, (int8_t)type, -1,
                      (int64_t)lock_id));
}

static OTF2_CallbackCode cb_rma_acquire_lock(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                             void *u, OTF2_AttributeList *al,
                                             OTF2_RmaWinRef win, uint32_t remote,
                                             uint64_t lock_id, OTF2_LockType type)
{
    EV_HEAD;
    DONE(rma_sync_add(c, time, RSE_ACQUIRE_LOCK, win, remote, -1, (int8_t)type, -1,
                      (int64_t)lock_id));
}

static OTF2_CallbackCode cb_rma_release_lock(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                             void *u, OTF2_AttributeList *al,
                                             OTF2_RmaWinRef win, uint32_t remote,
                                             uint64_t lock_id)
{
    EV_HEAD;
    DONE(rma_sync_add(c, time, RSE_RELEASE_LOCK, win, remote, -1, -1, -1, (int64_t)lock_id));
}

static OTF2_CallbackCode cb_rma_sync(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                     void *u, OTF2_AttributeList *al, OTF2_RmaWinRef win,
                                     uint32_t remote, OTF2_RmaSyncType type)
{
    EV_HEAD;
    DONE(rma_sync_add(c, time, RSE_SYNC, win, remote, -1, -1, (int32_t)type, -1));
}

static OTF2_CallbackCode cb_rma_win_create(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                           void *u, OTF2_AttributeList *al, OTF2_RmaWinRef win)
{
    EV_HEAD;
    DONE(rma_sync_add(c, time, RSE_WIN_CREATE, win, NO_REMOTE, -1, -1, -1, -1));
}

static OTF2_CallbackCode cb_rma_win_destroy(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                            void *u, OTF2_AttributeList *al, OTF2_RmaWinRef win)
{
    EV_HEAD;
    DONE(rma_sync_add(c, time, RSE_WIN_DESTROY, win, NO_REMOTE, -1, -1, -1, -1));
}

static OTF2_CallbackCode cb_io_begin(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos, void *u,
                                     OTF2_AttributeList *al, OTF2_IoHandleRef handle,
                                     OTF2_IoOperationMode mode, OTF2_IoOperationFlag flags,
                                     uint64_t request, uint64_t matching)
{
    EV_HEAD;
    table_t *o = &c->res->tables[T_IO];
    OK_OR_STOP(table_room(o, o->n + 1));
    uint64_t i = o->n++;
    COLUMN(o, I_RANK)[i] = c->rank;
    COLUMN(o, I_CALL)[i] = c->mpi_top;
    COLUMN(o, I_COMPLETE_CALL)[i] = -1;
    COLUMN(o, I_START)[i] = time;
    COLUMN(o, I_END)[i] = -1;
    COLUMN(o, I_HANDLE)[i] = signed32(handle);
    COLUMN(o, I_MODE)[i] = (uint8_t)(mode <= OTF2_IO_OPERATION_MODE_FLUSH ? mode : IOM_FLUSH);
    COLUMN(o, I_COLLECTIVE)[i] = (flags & OTF2_IO_OPERATION_FLAG_COLLECTIVE) != 0;
    COLUMN(o, I_NONBLOCKING)[i] = (flags & OTF2_IO_OPERATION_FLAG_NON_BLOCKING) != 0;
    COLUMN(o, I_BYTES_REQUESTED)[i] = (int64_t)plausible(c, request);
    COLUMN(o, I_BYTES)[i] = 0;
    COLUMN(o, I_MATCHING)[i] = (int64_t)matching;
    if (reqmap_put(&c->io_open, op_key(handle, matching), (int64_t)i)) DONE(-1);
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode cb_io_complete(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                        void *u, OTF2_AttributeList *al, OTF2_IoHandleRef handle,
                                        uint64_t bytes, uint64_t matching)
{
    EV_HEAD;
    bytes = plausible(c, bytes);
    int64_t i = reqmap_take(&c->io_open, op_key(handle, matching));
    if (i < 0) return OTF2_CALLBACK_SUCCESS;
    table_t *o = &c->res->tables[T_IO];
    COLUMN(o, I_COMPLETE_CALL)[i] = c->mpi_top;
    COLUMN(o, I_END)[i] = time;
    COLUMN(o, I_BYTES)[i] = (int64_t)bytes;
    /* the completing call moved the bytes, as a Wait gets those of its receives */
    uint8_t mode = COLUMN(o, I_MODE)[i];
    attach_bytes(c, -1, mode == IOM_WRITE ? bytes : 0, mode == IOM_READ ? bytes : 0);
    return OTF2_CALLBACK_SUCCESS;
}

/* records read only for their timestamp (the file and window come from definitions) */
static OTF2_CallbackCode cb_io_handle(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                      void *u, OTF2_AttributeList *al, OTF2_IoHandleRef handle)
{
    EV_HEAD;
    (void)time; (void)handle;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode cb_io_issued(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                      void *u, OTF2_AttributeList *al, OTF2_IoHandleRef handle,
                                      uint64_t matching)
{
    EV_HEAD;
    (void)time; (void)handle; (void)matching;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode cb_io_create(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos,
                                      void *u, OTF2_AttributeList *al, OTF2_IoHandleRef handle,
                                      OTF2_IoAccessMode mode, OTF2_IoCreationFlag cflags,
                                      OTF2_IoStatusFlag sflags)
{
    EV_HEAD;
    (void)time; (void)handle; (void)mode; (void)cflags; (void)sflags;
    return OTF2_CALLBACK_SUCCESS;
}

static void set_rma_io_callbacks(OTF2_EvtReaderCallbacks *cbs)
{
    OTF2_EvtReaderCallbacks_SetRmaPutCallback(cbs, cb_rma_put);
    OTF2_EvtReaderCallbacks_SetRmaGetCallback(cbs, cb_rma_get);
    OTF2_EvtReaderCallbacks_SetRmaAtomicCallback(cbs, cb_rma_atomic);
    OTF2_EvtReaderCallbacks_SetRmaOpCompleteBlockingCallback(cbs, cb_rma_complete);
    OTF2_EvtReaderCallbacks_SetRmaOpCompleteNonBlockingCallback(cbs, cb_rma_complete);
    OTF2_EvtReaderCallbacks_SetRmaOpCompleteRemoteCallback(cbs, cb_rma_complete);
    OTF2_EvtReaderCallbacks_SetRmaCollectiveBeginCallback(cbs, cb_other);
    OTF2_EvtReaderCallbacks_SetRmaCollectiveEndCallback(cbs, cb_rma_coll_end);
    OTF2_EvtReaderCallbacks_SetRmaGroupSyncCallback(cbs, cb_rma_group_sync);
    OTF2_EvtReaderCallbacks_SetRmaRequestLockCallback(cbs, cb_rma_request_lock);
    OTF2_EvtReaderCallbacks_SetRmaAcquireLockCallback(cbs, cb_rma_acquire_lock);
    OTF2_EvtReaderCallbacks_SetRmaReleaseLockCallback(cbs, cb_rma_release_lock);
    OTF2_EvtReaderCallbacks_SetRmaSyncCallback(cbs, cb_rma_sync);
    OTF2_EvtReaderCallbacks_SetRmaWinCreateCallback(cbs, cb_rma_win_create);
    OTF2_EvtReaderCallbacks_SetRmaWinDestroyCallback(cbs, cb_rma_win_destroy);
    OTF2_EvtReaderCallbacks_SetIoOperationBeginCallback(cbs, cb_io_begin);
    OTF2_EvtReaderCallbacks_SetIoOperationIssuedCallback(cbs, cb_io_issued);
    OTF2_EvtReaderCallbacks_SetIoOperationCompleteCallback(cbs, cb_io_complete);
    OTF2_EvtReaderCallbacks_SetIoCreateHandleCallback(cbs, cb_io_create);
    OTF2_EvtReaderCallbacks_SetIoDestroyHandleCallback(cbs, cb_io_handle);
}

/* ------------------------------------------------------------------ matching */
typedef struct {
    int32_t s, r, comm, tag;
} msgkey_t;

typedef struct {
    msgkey_t *key;
    int64_t *id;
    uint64_t mask, n;
} keymap_t;

static uint64_t key_hash(msgkey_t k)
{
    return hash64(((uint64_t)(uint32_t)k.s << 32 | (uint32_t)k.r) ^
                  hash64((uint64_t)(uint32_t)k.comm << 32 | (uint32_t)k.tag));
}

static int keymap_init(keymap_t *m, uint64_t cap)
{
    m->mask = cap - 1;
    m->n = 0;
    m->key = malloc(cap * sizeof *m->key);
    m->id = malloc(cap * sizeof *m->id);
    if (!m->key || !m->id) return -1;
    for (uint64_t i = 0; i < cap; i++) m->id[i] = -1;
    return 0;
}

/* dense id of key k (new keys get the next id); -1 on allocation failure */
static int64_t keymap_id(keymap_t *m, msgkey_t k, int create)
{
    if (create && (m->n + 1) * 2 > m->mask + 1) {
        keymap_t g;
        if (keymap_init(&g, (m->mask + 1) * 2)) return -1;
        for (uint64_t i = 0; i <= m->mask; i++) {
            if (m->id[i] < 0) continue;
            uint64_t j = key_hash(m->key[i]) & g.mask;
            while (g.id[j] >= 0) j = (j + 1) & g.mask;
            g.key[j] = m->key[i];
            g.id[j] = m->id[i];
        }
        g.n = m->n;
        free(m->key); free(m->id);
        *m = g;
    }
    uint64_t i = key_hash(k) & m->mask;
    while (m->id[i] >= 0) {
        msgkey_t o = m->key[i];
        if (o.s == k.s && o.r == k.r && o.comm == k.comm && o.tag == k.tag) return m->id[i];
        i = (i + 1) & m->mask;
    }
    if (!create) return -2;
    m->key[i] = k;
    m->id[i] = (int64_t)m->n;
    return (int64_t)m->n++;
}

/* The order MPI matches a key's sends (the sender's time order) or receives (the order
 * they were posted: the Enter of the posting call), ties by row. Computed when compared
 * rather than stored per row: matching's scratch memory is fresh pages, which cost. */
typedef struct {
    const int64_t *ptime, *kstart, *link;
    int recv;
} postctx_t;

static inline void posted(const postctx_t *x, int64_t i, int64_t *when, int64_t *post)
{
    *when = x->ptime[i];
    *post = i;
    if (x->recv) {
        *post = x->link[i];
        if (*post >= 0) *when = x->kstart[*post];
    }
}

static int cmp_post(const void *a, const void *b, void *ctx)
{
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b, wi, pi, wj, pj;
    posted(ctx, i, &wi, &pi);
    posted(ctx, j, &wj, &pj);
    if (wi != wj) return wi < wj ? -1 : 1;
    if (pi != pj) return pi < pj ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* sort a key's rows into matching order unless they are in it (the common case; each
 * row's place in the order is looked up once: for a receive, a read far away) */
static void post_order(int64_t *rows, int64_t n, postctx_t *x)
{
    int64_t pw = 0, pp = 0, w, q;
    for (int64_t j = 0; j < n; j++, pw = w, pp = q) {
        posted(x, rows[j], &w, &q);
        if (j && (pw > w || (pw == w && (pp > q || (pp == q && rows[j - 1] > rows[j]))))) {
            qsort_r(rows, (size_t)n, sizeof *rows, cmp_post, x);
            return;
        }
    }
}

/* Sends matched to receives as MPI matches them: per (sender, receiver, comm, tag), with
 * the tag and source each receive really got (its status), the k-th send (in the
 * sender's time order) meets the k-th receive in the order the receiver posted them.
 * Within one thread that is the event order; a rank's threads are ordered by time (the
 * Enter of the posting call for receives), so the keys' events may come from several
 * locations of a rank. */
static int match(mpsr_result *res, const int64_t *link)
{
    table_t *p = &res->tables[T_P2P], *k = &res->tables[T_CALLS];
    uint64_t n = p->n;
    const uint8_t *kind = COLUMN(p, P_EVENT);
    const int32_t *rank = COLUMN(p, P_RANK), *peer = COLUMN(p, P_PEER);
    const int32_t *comm = COLUMN(p, P_COMM), *tag = COLUMN(p, P_TAG);
    keymap_t km;
    if (keymap_init(&km, 1024)) return -1;
    int64_t *key_of = malloc((n ? n : 1) * sizeof *key_of);
    if (!key_of) return -1;
    uint64_t nsend = 0, nrecv = 0;
    for (uint64_t i = 0; i < n; i++) {
        key_of[i] = -1;
        int is_send = kind[i] == P2P_SEND || kind[i] == P2P_ISEND;
        int is_recv = kind[i] == P2P_RECV || kind[i] == P2P_IRECV;
        if (!is_send && !is_recv) continue;
        msgkey_t key = is_send ? (msgkey_t){rank[i], peer[i], comm[i], tag[i]}
                               : (msgkey_t){peer[i], rank[i], comm[i], tag[i]};
        int64_t id = keymap_id(&km, key, 1);
        if (id < 0) return -1;
        /* sends get even codes, receives odd, so one key array serves both */
        key_of[i] = id * 2 + is_recv;
        nsend += is_send;
        nrecv += is_recv;
    }
    uint64_t nkeys = km.n;
    free(km.key); free(km.id);
    /* bucket sends and receives by key (counting sort keeps the p2p order) */
    int64_t *start = calloc(2 * nkeys + 1, sizeof *start);
    int64_t *slot = malloc((nsend + nrecv + 1) * sizeof *slot);
    if (!start || !slot) return -1;
    for (uint64_t i = 0; i < n; i++)
        if (key_of[i] >= 0) start[key_of[i] + 1]++;
    for (uint64_t b = 0; b < 2 * nkeys; b++) start[b + 1] += start[b];
    int64_t *fill = malloc((2 * nkeys + 1) * sizeof *fill);
    if (!fill) return -1;
    memcpy(fill, start, (2 * nkeys + 1) * sizeof *fill);
    /* key_of becomes recv_of_send in place: per send the receive it matched (-1: none);
     * per receive -2 once matched, else -1 */
    int64_t *recv_of_send = key_of;
    for (uint64_t i = 0; i < n; i++) {
        if (key_of[i] < 0) continue;
        slot[fill[key_of[i]]++] = (int64_t)i;
        recv_of_send[i] = -1;
    }
    free(fill);
    postctx_t by_send = {COLUMN(p, P_TIME), COLUMN(k, C_START), link, 0};
    postctx_t by_post = {COLUMN(p, P_TIME), COLUMN(k, C_START), link, 1};
    for (uint64_t key = 0; key < nkeys; key++) {
        int64_t *sends = slot + start[2 * key], *recvs = slot + start[2 * key + 1];
        int64_t ns_ = start[2 * key + 1] - start[2 * key];
        int64_t nr = start[2 * key + 2] - start[2 * key + 1];
        /* receives are listed when they complete; MPI matches them as they were posted */
        post_order(recvs, nr, &by_post);
        /* a rank's sends in time order (one thread's are already) */
        post_order(sends, ns_, &by_send);
        for (int64_t j = 0; j < ns_ && j < nr; j++) {
            recv_of_send[sends[j]] = recvs[j];
            recv_of_send[recvs[j]] = -2;
        }
    }
    free(start);
    free(slot);
    /* emit messages in the order of the sends, then the unmatched operations */
    table_t *m = &res->tables[T_MESSAGES], *um = &res->tables[T_UNMATCHED];
    uint64_t nmatched = 0;
    for (uint64_t i = 0; i < n; i++)
        if ((kind[i] == P2P_SEND || kind[i] == P2P_ISEND) && recv_of_send[i] >= 0) nmatched++;
    if (table_reserve(m, nmatched + 1) || table_reserve(um, nsend + nrecv - 2 * nmatched + 1))
        return -1;
    table_prefault(m, nmatched + 1);
    table_prefault(um, um->cap);
    const int64_t *time = COLUMN(p, P_TIME), *call = COLUMN(p, P_CALL);
    const int64_t *bytes = COLUMN(p, P_BYTES);
    const int64_t *cstart = COLUMN(k, C_START), *cend = COLUMN(k, C_END);
    /* the output columns, loaded once (the compiler cannot know stores leave them alone) */
    int32_t *m_srank = COLUMN(m, M_SEND_RANK), *m_rrank = COLUMN(m, M_RECV_RANK);
    int32_t *m_comm = COLUMN(m, M_COMM), *m_tag = COLUMN(m, M_TAG);
    int64_t *m_bytes = COLUMN(m, M_BYTES), *m_scall = COLUMN(m, M_SEND_CALL);
    int64_t *m_rcall = COLUMN(m, M_RECV_CALL), *m_sccall = COLUMN(m, M_SEND_COMPLETE_CALL);
    int64_t *m_rccall = COLUMN(m, M_RECV_COMPLETE_CALL), *m_stime = COLUMN(m, M_SEND_TIME);
    int64_t *m_rtime = COLUMN(m, M_RECV_TIME), *m_senter = COLUMN(m, M_SEND_ENTER);
    int64_t *m_renter = COLUMN(m, M_RECV_ENTER), *m_rleave = COLUMN(m, M_RECV_LEAVE);
#define AT(arr, idx) ((idx) >= 0 ? (arr)[idx] : -1)
    uint64_t j = 0;
    /* A message reads its receive's rows elsewhere in the tables (another rank's): cache
     * misses one after the other unless fetched ahead, the p2p row PF rows ahead, the
     * calls it names PF/2 ahead (once that row is at hand). */
    enum { PF = 32 };
    for (uint64_t i = 0; i < n; i++) {
        if (i + PF < n && recv_of_send[i + PF] >= 0) {
            int64_t r = recv_of_send[i + PF];
            __builtin_prefetch(&time[r]);
            __builtin_prefetch(&link[r]);
            __builtin_prefetch(&call[r]);
            __builtin_prefetch(&rank[r]);
        }
        if (i + PF / 2 < n && recv_of_send[i + PF / 2] >= 0) {
            int64_t r = recv_of_send[i + PF / 2];
            if (link[r] >= 0) __builtin_prefetch(&cstart[link[r]]);
            if (call[r] >= 0) __builtin_prefetch(&cend[call[r]]);
            if (call[i + PF / 2] >= 0) __builtin_prefetch(&cstart[call[i + PF / 2]]);
        }
        int is_send = kind[i] == P2P_SEND || kind[i] == P2P_ISEND;
        int is_recv = kind[i] == P2P_RECV || kind[i] == P2P_IRECV;
        if (is_send && recv_of_send[i] >= 0) {
            int64_t r = recv_of_send[i];
            int64_t scall = call[i], rcall = link[r], rdone = call[r];
            m_srank[j] = rank[i];
            m_rrank[j] = rank[r];
            m_comm[j] = comm[i];
            m_tag[j] = tag[i];
            m_bytes[j] = bytes[i];
            m_scall[j] = scall;
            m_rcall[j] = rcall;
            m_sccall[j] = link[i] >= 0 ? link[i] : scall;
            m_rccall[j] = rdone;
            m_stime[j] = time[i];
            m_rtime[j] = time[r];
            m_senter[j] = AT(cstart, scall);
            m_renter[j] = AT(cstart, rcall);
            m_rleave[j] = AT(cend, rdone);
            j++;
        } else if ((is_send && recv_of_send[i] < 0) || (is_recv && recv_of_send[i] != -2)) {
            int64_t u = (int64_t)um->n++;
            COLUMN(um, U_RANK)[u] = rank[i];
            COLUMN(um, U_EVENT)[u] = kind[i];
            COLUMN(um, U_PEER)[u] = peer[i];
            COLUMN(um, U_COMM)[u] = comm[i];
            COLUMN(um, U_TAG)[u] = tag[i];
            COLUMN(um, U_BYTES)[u] = bytes[i];
            COLUMN(um, U_CALL)[u] = is_recv && link[i] >= 0 ? link[i] : call[i];
        }
    }
    m->n = j;
#undef AT
    free(recv_of_send);
    return 0;
}

/* ------------------------------------------------------------------ entry points */
static void set_error(mpsr_result *res, const char *what)
{
    snprintf(res->error, sizeof res->error, "%s%s%s", what, g_error[0] ? ": " : "", g_error);
}

static OTF2_CallbackCode on_clock_offset(void *u, OTF2_TimeStamp t, int64_t offset,
                                         double deviation)
{
    (void)t; (void)offset; (void)deviation;
    ((mpsr_result *)u)->clock_offsets++;
    return OTF2_CALLBACK_SUCCESS;
}

/* The local definition file of location `loc` of the archive `anchor` (DIR/NAME.otf2 ->
 * DIR/NAME/loc.def) in `path`; 0 for an anchor not named so. */
static int local_defs_path(const char *anchor, uint64_t loc, char *path, size_t len)
{
    size_t n = strlen(anchor);
    if (n < 5 || strcmp(anchor + n - 5, ".otf2") != 0) return 0;
    snprintf(path, len, "%.*s/%" PRIu64 ".def", (int)(n - 5), anchor, loc);
    return 1;
}

/* Does the location have local definitions (e.g. Score-P's id mappings)? An empty local
 * definition file is a 20-byte header; skipping it saves libotf2 a definition chunk
 * (allocated and cleared, several MB) per location. */
static int local_defs_present(const char *anchor, uint64_t loc)
{
    char path[4096];
    if (!local_defs_path(anchor, loc, path, sizeof path)) return 1;
    struct stat st;
    return stat(path, &st) != 0 || st.st_size > 24;
}

/* Are the selected locations' local definition files safe for libotf2 (localdefs.c)?
 * If not, the read fails with the first damaged one's name and problem. */
static int local_defs_damaged(OTF2_Reader *rd, const char *anchor, const mpsr_config *cfg,
                              mpsr_result *res)
{
    uint64_t evt_chunk = 0, def_chunk = 0;
    OTF2_Reader_GetChunkSize(rd, &evt_chunk, &def_chunk);
    for (int32_t i = 0; i < cfg->nloc; i++) {
        char path[4096], why[200];
        if (!local_defs_path(anchor, cfg->locs[i], path, sizeof path)) return 0;
        if (mpsr_local_defs_check(path, def_chunk, why, sizeof why)) {
            /* named as in the archive: "traces/N.def" (the path holds that '/') */
            const char *name = strrchr(path, '/');
            while (name > path && name[-1] != '/') name--;
            snprintf(res->error, sizeof res->error, "damaged local definitions (%.200s): %s",
                     name, why);
            return 1;
        }
    }
    return 0;
}

/* Read the events of cfg->nloc locations (world rank i = cfg->locs[i]).
 * Returns a result (release with mpsr_release) whose `error` is set on failure. */
mpsr_result *mpsr_read(const char *anchor, const mpsr_config *cfg, mpsr_progress progress)
{
    g_error[0] = 0;
    OTF2_Error_RegisterCallback(on_error, NULL);
    mpsr_result *res = calloc(1, sizeof *res);
    if (!res) return NULL;
    for (int t = 0; t < T_NTABLES; t++)
        table_init(&res->tables[t], mpsr_tables[t].ncols, mpsr_tables[t].sizes);
    size_t nl = (size_t)cfg->nloc + 1;
    res->loc_events = calloc(nl, sizeof(uint64_t));
    res->loc_first = calloc(nl, sizeof(int64_t));
    res->loc_last = calloc(nl, sizeof(int64_t));
    res->loc_truncated = calloc(nl, 1);
    res->loc_backwards = calloc(nl, sizeof(uint64_t));
    res->loc_outside = calloc(nl, sizeof(uint64_t));
    res->loc_bytes = calloc(nl, sizeof(uint64_t));
    res->loc_overrun = calloc(nl, 1);
    ctx_t c = {.res = res, .cfg = cfg};
    /* the trace's end in ns (its length from the definitions), unbounded if unknown */
    c.end = INT64_MAX;
    if (cfg->trace_length && cfg->trace_length <= UINT64_MAX - cfg->global_offset)
        c.end = ns_of(cfg, cfg->global_offset + cfg->trace_length);
    table_init(&c.link, L_NCOLS, link_sizes);
    table_init(&c.coll_comm, CC_NCOLS, cc_sizes);
    c.coll_count = calloc((size_t)cfg->ncomms + 1, sizeof(int64_t));
    if (!res->loc_events || !res->loc_first || !res->loc_last || !res->loc_truncated ||
        !res->loc_backwards || !res->loc_outside || !res->loc_bytes || !res->loc_overrun ||
        !c.coll_count || reqmap_init(&c.isends, 1024) || reqmap_init(&c.irecvs, 1024) ||
        reqmap_init(&c.rma_open, 64) || reqmap_init(&c.io_open, 64) ||
        reqmap_init(&c.early_sends, 64) || reqmap_init(&c.early_recvs, 64)) {
        snprintf(res->error, sizeof res->error, "out of memory");
        goto out;
    }
    /* sizes from the definitions' event counts: calls <= events/2, p2p <= events; never
     * more than the files can hold (a damaged count would reserve the machine) */
    uint64_t e = cfg->expected_events, can_hold = 0;
    for (int32_t i = 0; cfg->loc_max_events && i < cfg->nloc && can_hold < e; i++)
        can_hold += cfg->loc_max_events[i] ? cfg->loc_max_events[i] : e;
    if (cfg->loc_max_events && can_hold < e) e = can_hold;
    if (e) {
        if (table_reserve(&res->tables[T_CALLS], e / 2 + 16) ||
            table_reserve(&res->tables[T_P2P], e / 4 + 16) || table_reserve(&c.link, e / 4 + 16)) {
            snprintf(res->error, sizeof res->error, "out of memory");
            goto out;
        }
    }

    OTF2_Reader *rd = OTF2_Reader_Open(anchor);
    if (!rd) {
        set_error(res, "cannot open the OTF2 archive");
        goto out;
    }
    OTF2_Reader_SetSerialCollectiveCallbacks(rd);
    if (local_defs_damaged(rd, anchor, cfg, res)) {
        OTF2_Reader_Close(rd);
        goto out;
    }
    /* a compressed archive's bytes hold more events than plain ones (zlib: < 1100x) */
    OTF2_Compression compression = OTF2_COMPRESSION_NONE;
    OTF2_Reader_GetCompression(rd, &compression);
    uint64_t per_byte = compression == OTF2_COMPRESSION_NONE ? 1 : 1100;
    for (int32_t i = 0; i < cfg->nloc; i++) OTF2_Reader_SelectLocation(rd, cfg->locs[i]);
    int has_defs = OTF2_Reader_OpenDefFiles(rd) == OTF2_SUCCESS;
    if (OTF2_Reader_OpenEvtFiles(rd) != OTF2_SUCCESS) {
        set_error(res, "cannot open the event files");
        OTF2_Reader_Close(rd);
        goto out;
    }
    OTF2_EvtReaderCallbacks *cbs = OTF2_EvtReaderCallbacks_New();
    OTF2_EvtReaderCallbacks_SetEnterCallback(cbs, cb_enter);
    OTF2_EvtReaderCallbacks_SetLeaveCallback(cbs, cb_leave);
    OTF2_EvtReaderCallbacks_SetMpiSendCallback(cbs, cb_send);
    OTF2_EvtReaderCallbacks_SetMpiRecvCallback(cbs, cb_recv);
    OTF2_EvtReaderCallbacks_SetMpiIsendCallback(cbs, cb_isend);
    OTF2_EvtReaderCallbacks_SetMpiIsendCompleteCallback(cbs, cb_isend_complete);
    OTF2_EvtReaderCallbacks_SetMpiIrecvRequestCallback(cbs, cb_irecv_request);
    OTF2_EvtReaderCallbacks_SetMpiIrecvCallback(cbs, cb_irecv);
    OTF2_EvtReaderCallbacks_SetMpiRequestCancelledCallback(cbs, cb_cancelled);
    OTF2_EvtReaderCallbacks_SetMpiRequestTestCallback(cbs, cb_request_test);
    OTF2_EvtReaderCallbacks_SetMpiCollectiveBeginCallback(cbs, cb_other);
    OTF2_EvtReaderCallbacks_SetMpiCollectiveEndCallback(cbs, cb_coll_end);
    OTF2_EvtReaderCallbacks_SetNonBlockingCollectiveRequestCallback(cbs, cb_nbc_request);
    OTF2_EvtReaderCallbacks_SetNonBlockingCollectiveCompleteCallback(cbs, cb_nbc_complete);
    OTF2_EvtReaderCallbacks_SetBufferFlushCallback(cbs, cb_flush);
    set_rma_io_callbacks(cbs);

    OTF2_DefReaderCallbacks *dcbs = OTF2_DefReaderCallbacks_New();
    OTF2_DefReaderCallbacks_SetClockOffsetCallback(dcbs, on_clock_offset);
    uint64_t done = 0;
    int any_ok = 0;
    char first_error[400] = "";
    for (int32_t i = 0; i < cfg->nloc; i++) {
        g_error[0] = 0;
        /* local definitions carry the id maps OTF2 applies to this location's events */
        if (has_defs && local_defs_present(anchor, cfg->locs[i])) {
            OTF2_DefReader *dr = OTF2_Reader_GetDefReader(rd, cfg->locs[i]);
            if (dr) {
                OTF2_Reader_RegisterDefCallbacks(rd, dr, dcbs, res);
                uint64_t nd = 0;
                OTF2_Reader_ReadAllLocalDefinitions(rd, dr, &nd);
                OTF2_Reader_CloseDefReader(rd, dr);
            }
        }
        OTF2_EvtReader *er = OTF2_Reader_GetEvtReader(rd, cfg->locs[i]);
        int32_t rank = cfg->loc_rank ? cfg->loc_rank[i] : i;
        int new_rank = i == 0 || rank != c.rank;
        c.rank = rank;
        c.thread = cfg->loc_thread ? cfg->loc_thread[i] : 0;
        c.depth = c.mpi_depth = 0; /* nesting is per thread */
        c.mpi_top = -1;
        c.first = INT64_MIN;
        c.last = 0;
        c.events = 0;
        c.backwards = c.outside = c.bad_bytes = 0;
        c.nchain = 0; /* a chain is a thread's */
        c.failed = 0;
        /* each event takes at least a byte of its file: a longer stream is garbage (e.g.
         * libotf2 decoding past the end of a cut file into its buffer's old contents) */
        uint64_t most = cfg->loc_max_events ? cfg->loc_max_events[i] : 0;
        most = most > UINT64_MAX / per_byte ? UINT64_MAX : most * per_byte;
        uint64_t loc_done = 0;
        int overrun = 0;
        if (new_rank) { /* request ids and collective sequences are the process's */
            memset(c.coll_count, 0, ((size_t)cfg->ncomms + 1) * sizeof(int64_t));
            reqmap_clear(&c.isends);
            reqmap_clear(&c.irecvs);
            reqmap_clear(&c.early_sends);
            reqmap_clear(&c.early_recvs);
            reqmap_clear(&c.rma_open); /* matching ids are the process's too */
            reqmap_clear(&c.io_open);
        }
        c.threaded = c.thread > 0 ||
                     (cfg->loc_rank && i + 1 < cfg->nloc && cfg->loc_rank[i + 1] == rank);
        int ok = er != NULL;
        if (er) {
            OTF2_Reader_RegisterEvtCallbacks(rd, er, cbs, &c);
            for (;;) {
                uint64_t got = 0, want = CHUNK_EVENTS;
                if (most && most - loc_done < want) want = most - loc_done + 1;
                OTF2_ErrorCode rc = OTF2_Reader_ReadLocalEvents(rd, er, want, &got);
                done += got;
                loc_done += got;
                if (progress) progress(done, e);
                if (rc != OTF2_SUCCESS || c.failed) {
                    ok = 0;
                    break;
                }
                if (most && loc_done > most) { /* more than the file can hold: stop */
                    overrun = 1;
                    break;
                }
                if (cfg->max_kept_events && done - c.merged > cfg->max_kept_events) {
                    /* the memory the caller planned for is spent: stop before it grows */
                    snprintf(res->error, sizeof res->error,
                             "memory budget: %" PRIu64 " events kept of %" PRIu64 " read",
                             done - c.merged, done);
                    OTF2_Reader_CloseEvtReader(rd, er);
                    OTF2_EvtReaderCallbacks_Delete(cbs);
                    OTF2_DefReaderCallbacks_Delete(dcbs);
                    OTF2_Reader_CloseEvtFiles(rd);
                    if (has_defs) OTF2_Reader_CloseDefFiles(rd);
                    OTF2_Reader_Close(rd);
                    goto out;
                }
                if (got < want) break;
            }
            OTF2_Reader_CloseEvtReader(rd, er);
        }
        if (c.failed && !g_error[0]) snprintf(g_error, sizeof g_error, "out of memory");
        if (!ok && !first_error[0])
            snprintf(first_error, sizeof first_error, "%s", g_error[0] ? g_error : "unreadable");
        any_ok |= ok;
        /* a stream cut short: close what is open at the last timestamp we saw */
        res->loc_truncated[i] = (uint8_t)(!ok || overrun || c.depth > 0);
        res->loc_overrun[i] = (uint8_t)overrun;
        res->loc_backwards[i] = c.backwards;
        res->loc_outside[i] = c.outside;
        res->loc_bytes[i] = c.bad_bytes;
        while (c.depth) {
            frame_t f = c.stack[--c.depth];
            table_t *t = &res->tables[f.mpi ? T_CALLS : T_REGIONS];
            COLUMN(t, C_END)[f.row] = c.last;
            COLUMN(t, C_TRUNCATED)[f.row] = 1;
        }
        res->loc_events[i] = c.events;
        res->loc_first[i] = c.first == INT64_MIN ? 0 : c.first;
        res->loc_last[i] = c.last;
    }
    OTF2_EvtReaderCallbacks_Delete(cbs);
    OTF2_DefReaderCallbacks_Delete(dcbs);
    OTF2_Reader_CloseEvtFiles(rd);
    if (has_defs) OTF2_Reader_CloseDefFiles(rd);
    OTF2_Reader_Close(rd);
    if (!any_ok && cfg->nloc > 0) {
        snprintf(res->error, sizeof res->error, "corrupt OTF2 events: %s", first_error);
        if (!cfg->subset) goto out;
    }

    /* collective instances: (comm, seq) -> comm's base + seq, bases in comm order */
    int64_t *base = calloc((size_t)cfg->ncomms + 1, sizeof *base);
    if (!base) goto oom;
    table_t *kt = &res->tables[T_COLLECTIVES];
    const int32_t *cc = COLUMN(&c.coll_comm, CC_COMM);
    const int64_t *cs = COLUMN(&c.coll_comm, CC_SEQ);
    for (uint64_t j = 0; j < kt->n; j++)
        if (cs[j] + 1 > base[cc[j] + 1]) base[cc[j] + 1] = cs[j] + 1;
    for (int32_t ci = 0; ci < cfg->ncomms; ci++) base[ci + 1] += base[ci];
    for (uint64_t j = 0; j < kt->n; j++)
        COLUMN(kt, K_INSTANCE)[j] = base[cc[j]] + cs[j];
    free(base);

    if (match(res, COLUMN(&c.link, L_POST)) == 0) {
        res->link = COLUMN(&c.link, L_POST);
        c.link.cols[L_POST].p = NULL;
        goto out;
    }
oom:
    snprintf(res->error, sizeof res->error, "out of memory");
out:
    free(c.stack);
    free(c.coll_count);
    reqmap_free(&c.isends);
    reqmap_free(&c.irecvs);
    reqmap_free(&c.rma_open);
    reqmap_free(&c.io_open);
    reqmap_free(&c.early_sends);
    reqmap_free(&c.early_recvs);
    table_free(&c.link);
    table_free(&c.coll_comm);
    return res;
}

/* Python takes the columns it wraps (setting their pointers to NULL); the rest goes. */
void mpsr_release(mpsr_result *r)
{
    if (!r) return;
    for (int t = 0; t < T_NTABLES; t++) table_free(&r->tables[t]);
    free(r->loc_events); free(r->loc_first); free(r->loc_last); free(r->loc_truncated);
    free(r->loc_backwards); free(r->loc_outside); free(r->loc_bytes); free(r->loc_overrun);
    free(r->link);
    free(r);
}

/* Accessors, so the Python side needs no mirror of the structs. */
const char *mpsr_layout(void) { return MPSR_LAYOUT; }

uint64_t mpsr_rows(const mpsr_result *r, int table) { return r->tables[table].n; }

void *mpsr_take(mpsr_result *r, int table, int col)
{
    void *p = r->tables[table].cols[col].p;
    r->tables[table].cols[col].p = NULL;
    return p;
}

/* the p2p rows' links (mpsr_rows(r, T_P2P) of them), NULL if none; the caller frees it */
int64_t *mpsr_take_link(mpsr_result *r)
{
    int64_t *p = r->link;
    r->link = NULL;
    return p;
}

const char *mpsr_error(const mpsr_result *r) { return r->error; }

uint64_t mpsr_clock_offsets(const mpsr_result *r) { return r->clock_offsets; }

void mpsr_locations(const mpsr_result *r, int32_t n, uint64_t *events, int64_t *first,
                    int64_t *last, uint8_t *truncated)
{
    memcpy(events, r->loc_events, (size_t)n * sizeof *events);
    memcpy(first, r->loc_first, (size_t)n * sizeof *first);
    memcpy(last, r->loc_last, (size_t)n * sizeof *last);
    memcpy(truncated, r->loc_truncated, (size_t)n);
}

/* per location: timestamps raised to the one before, timestamps outside the trace, byte
 * counts dropped, stopped at the most events its bytes can hold (see stamp, plausible) */
void mpsr_damage(const mpsr_result *r, int32_t n, uint64_t *backwards, uint64_t *outside,
                 uint64_t *bytes, uint8_t *overrun)
{
    memcpy(backwards, r->loc_backwards, (size_t)n * sizeof *backwards);
    memcpy(outside, r->loc_outside, (size_t)n * sizeof *outside);
    memcpy(bytes, r->loc_bytes, (size_t)n * sizeof *bytes);
    memcpy(overrun, r->loc_overrun, (size_t)n);
}

void mpsr_free_buffer(void *p) { free(p); }

/* Archive properties as "NAME=VALUE\n" lines (run metadata); free with mpsr_free_buffer. */
char *mpsr_properties(const char *anchor)
{
    g_error[0] = 0;
    OTF2_Error_RegisterCallback(on_error, NULL);
    OTF2_Reader *rd = OTF2_Reader_Open(anchor);
    if (!rd) return NULL;
    uint32_t n = 0;
    char **names = NULL;
    size_t cap = 1024, len = 0;
    char *out = calloc(cap, 1);
    char *creator = NULL; /* e.g. "Score-P 8.0"; reported as a pseudo property */
    if (out && OTF2_Reader_GetCreator(rd, &creator) == OTF2_SUCCESS && creator) {
        len += (size_t)snprintf(out, cap, "OTF2::CREATOR=%.900s\n", creator);
        free(creator);
    }
    if (out && OTF2_Reader_GetPropertyNames(rd, &n, &names) == OTF2_SUCCESS) {
        for (uint32_t i = 0; i < n; i++) {
            char *value = NULL;
            if (OTF2_Reader_GetProperty(rd, names[i], &value) != OTF2_SUCCESS || !value) continue;
            size_t need = strlen(names[i]) + strlen(value) + 3;
            if (len + need >= cap) {
                cap = (cap + need) * 2;
                char *p = realloc(out, cap);
                if (!p) { free(value); break; }
                out = p;
            }
            len += (size_t)snprintf(out + len, cap - len, "%s=%s\n", names[i], value);
            free(value);
        }
        free(names);
    }
    OTF2_Reader_Close(rd);
    return out;
}
