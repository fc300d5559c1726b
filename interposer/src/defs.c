/* defs.c — definitions writing: the global definitions (regions, system tree, locations,
 * groups, communicators), a rank's local definitions (id maps, clock offsets) and the
 * run's properties, for the trace, a salvaged rank's archive and a recovered one. */
#include "runtime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static uint32_t string_next;

/* String refs count from 0 in each archive's global definitions. */
void mps_gstr_reset(void) { string_next = 0; }

OTF2_StringRef mps_gstr(OTF2_GlobalDefWriter *w, const char *s)
{
    OTF2_StringRef ref = string_next++;
    OTF2_GlobalDefWriter_WriteString(w, ref, s);
    return ref;
}

/* The region names in region-ref order, each ended by '\n': recovery checks that its
 * build numbers the regions as the traced run's did. */
char *mps_region_names(void)
{
    size_t len = 1;
    for (int f = 0; f < MPS_FN_COUNT; f++) len += strlen(mps_fn_names[f]) + 1;
    char *s = malloc(len), *p = s;
    for (int f = 0; s && f < MPS_FN_COUNT; f++) p += sprintf(p, "%s\n", mps_fn_names[f]);
    return s;
}

/* The run's properties, handed to put(): the archive's, or the crash-safe log's. */
void mps_run_properties(void (*put)(enum mps_live_key, const char *, const char *))
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
    time_t t = time(NULL) -
               (time_t)((mps_mono_ns() - (uint64_t)mps_job.t_init_local) / 1000000000u);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    put(MPS_LIVE_START_TIME, "MPISCOPE::START_TIME", buf);
    /* MPISCOPE_FILTER hid these calls: a reader must not prove "no MPI call in between" */
    size_t used = 0;
    buf[0] = 0;
    for (int fn = 0; fn < MPS_FN_COUNT; fn++) {
        if (!mps_cfg.filtered[fn]) continue;
        int w = snprintf(buf + used, sizeof buf - used, "%s%s", used ? "," : "",
                         mps_fn_names[fn]);
        if (w < 0 || (size_t)w >= sizeof buf - used) { /* too many to list: say all */
            snprintf(buf, sizeof buf, "*");
            break;
        }
        used += (size_t)w;
    }
    if (buf[0]) put(MPS_LIVE_FILTERED, "MPISCOPE::FILTERED", buf);
}

/* MPISCOPE::CALLSITE_OBJECTS: for each call site (SourceCodeLocation ref), the object and
 * offset its name was resolved from, one line "ref<TAB>0xOFFSET<TAB>build-id<TAB>path"
 * each (build-id "-" where the object has none), so that `mpiscope symbolize` can name
 * it again once debug files are installed. */
static char *objects_prop; /* the property so far: call paths' frames are added to it */
/* libotf2 cannot write an anchor file beyond 256 KiB (OTF2_Archive_Close then fails: the
 * whole trace lost, as with ~3000 distinct call sites): the call sites that do not fit
 * are left out (they keep their names; only `mpiscope symbolize` cannot rename them), and
 * 64 KiB stay for the other properties (command line, program, MPI library: PATH_MAX or
 * less each) */
#define OBJECTS_PROP_MAX (192u << 10)

void mps_add_callsite_objects(OTF2_Archive *ar, uint32_t first, const char *const *objects,
                              const char *const *build_ids, const uint64_t *offsets,
                              uint32_t n)
{
    size_t old = first && objects_prop ? strlen(objects_prop) : 0;
    size_t cap = old + 1, len = old;
    for (uint32_t i = 0; i < n; i++) cap += (objects[i] ? strlen(objects[i]) : 0) + 120;
    char *v = realloc(first ? objects_prop : NULL, cap);
    if (!v) return;
    if (!first) free(objects_prop);
    objects_prop = v;
    v[len] = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!objects[i] || !*objects[i]) continue;
        int w = snprintf(v + len, cap - len, "%u\t0x%llx\t%s\t%s\n", first + i,
                         (unsigned long long)offsets[i], *build_ids[i] ? build_ids[i] : "-",
                         objects[i]);
        if (w < 0 || len + (size_t)w >= OBJECTS_PROP_MAX) { /* whole lines only */
            v[len] = 0;
            break;
        }
        len += (size_t)w;
    }
    OTF2_Archive_SetProperty(ar, "MPISCOPE::CALLSITE_OBJECTS", v, true);
}

void mps_set_callsite_objects(OTF2_Archive *ar, const char *const *objects,
                              const char *const *build_ids, const uint64_t *offsets,
                              uint32_t n)
{
    mps_add_callsite_objects(ar, 0, objects, build_ids, offsets, n);
}

static OTF2_Archive *props_archive; /* where archive_property writes */

static void archive_property(enum mps_live_key k, const char *name, const char *value)
{
    (void)k;
    OTF2_Archive_SetProperty(props_archive, name, value, true);
}

void mps_set_properties(OTF2_Archive *ar)
{
    props_archive = ar;
    mps_run_properties(archive_property);
    if (mps_job.clock[0]) OTF2_Archive_SetProperty(ar, "MPISCOPE::CLOCK", mps_job.clock, true);
    OTF2_Archive_SetProperty(ar, "MPISCOPE::VERSION", MPS_VERSION, true);
}

int mps_host_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) return 0; /* unknown: the reader then says nothing */
    /* a container's CPU quota ("max 100000" or "200000 100000": 2 CPUs' worth) */
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
    if (f) {
        long long quota = 0, period = 0;
        char word[32];
        if (fscanf(f, "%31s %lld", word, &period) == 2 && strcmp(word, "max") != 0 &&
            period > 0) {
            quota = strtoll(word, NULL, 10);
            long q = (long)((quota + period - 1) / period);
            if (q >= 1 && q < n) n = q;
        }
        fclose(f);
    }
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

/* Hosts are named by the program's environment (MPISCOPE_HOSTNAME may be anything): the
 * property holds numbers only, one per distinct host in the order the system tree
 * defines them (first rank on each), so the reader pairs them with its host names */
#define HOST_CPUS_MAX (16u << 10)

void mps_set_host_cpus(OTF2_Archive *ar, const char *hosts, size_t hostlen, const int *cpus,
                       int size)
{
    if (!ar || !hosts || !cpus || size < 1) return;
    char *v = malloc(HOST_CPUS_MAX), *p = v;
    if (!v) return;
    for (int r = 0; r < size; r++) {
        const char *h = hosts + (size_t)r * hostlen;
        int seen = 0;
        for (int q = 0; q < r && !seen; q++) seen = strcmp(h, hosts + (size_t)q * hostlen) == 0;
        if (seen) continue;
        if (cpus[r] < 1 || (size_t)(p - v) + 16 >= HOST_CPUS_MAX) { free(v); return; }
        p += sprintf(p, "%s%d", p == v ? "" : " ", cpus[r]);
    }
    OTF2_Archive_SetProperty(ar, "MPISCOPE::HOST_CPUS", v, true);
    free(v);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Each communicator has one creator, so a ref twice is two communicators with one id:
 * possible only for ids hashed without communication (MPI_Comm_idup, communicators.c). */
static void warn_duplicate_refs(const int32_t *cw, const int *at, int ncomms)
{
    uint32_t *refs = malloc((size_t)(ncomms ? ncomms : 1) * sizeof *refs);
    if (!refs) return;
    for (int c = 0; c < ncomms; c++) refs[c] = (uint32_t)cw[at[c]];
    qsort(refs, (size_t)ncomms, sizeof *refs, cmp_u32);
    for (int c = 1; c < ncomms; c++)
        if (refs[c] == refs[c - 1]) {
            char line[160];
            snprintf(line, sizeof line, "mpiscope: warning: two communicators (from "
                     "MPI_Comm_idup) got the same id %u: the trace cannot tell their events "
                     "apart\n", refs[c]);
            mps_to_stderr(line);
            break;
        }
    free(refs);
}

/* Definitions that cannot be written whole (no memory): the archive must not pass for
 * complete (the trace's writer says so, mpiscope-recover keeps the log). */
static void lost(void)
{
    mps_out.failed = 1;
    if (!mps_out.werr) mps_out.werr = ENOMEM;
}

/* {ref, record index} of each communicator, sorted by ref: a ref's records in O(log n) */
static int cmp_ref_index(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

static int first_of(const uint32_t (*by_ref)[2], int n, uint32_t ref)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (by_ref[mid][0] < ref) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Communicator definitions, parents before children where the parent is known; returns
 * how many were written, their sparse refs in writing order in order[]. Passes over the
 * records until all are written: a record waits for its parent's (one pass when parents
 * come first, as in a rank's own log); a pass without progress (a cycle) writes the next
 * one without its parent. */
static int write_comms(OTF2_GlobalDefWriter *gw, const int32_t *cw, int ncw, uint32_t **order_out)
{
    char name[64];
    int ncomms = 0;
    for (int i = 0; i < ncw; i += COMM_REC_WORDS(cw + i)) ncomms++;
    int *at = malloc((size_t)(ncomms ? ncomms : 1) * sizeof *at);
    unsigned char *done = calloc((size_t)(ncomms ? ncomms : 1), 1);
    uint32_t *order = malloc((size_t)(ncomms ? ncomms : 1) * sizeof *order);
    uint32_t (*by_ref)[2] = malloc((size_t)(ncomms ? ncomms : 1) * sizeof *by_ref);
    /* per by_ref position: the dense ref of the first written record of that ref */
    uint32_t *dense_of = malloc((size_t)(ncomms ? ncomms : 1) * sizeof *dense_of);
    *order_out = order;
    int written = 0;
    if (!at || !done || !order || !by_ref || !dense_of) {
        lost();
        goto out;
    }
    for (int i = 0, c = 0; i < ncw; i += COMM_REC_WORDS(cw + i)) at[c++] = i;
    for (int c = 0; c < ncomms; c++) {
        by_ref[c][0] = (uint32_t)cw[at[c]];
        by_ref[c][1] = (uint32_t)c;
        dense_of[c] = UINT32_MAX;
    }
    qsort(by_ref, (size_t)ncomms, sizeof *by_ref, cmp_ref_index);
    warn_duplicate_refs(cw, at, ncomms);
    OTF2_GroupRef gref = 3;
    for (int progress = 1; written < ncomms;) {
        int force = !progress; /* a cycle or a parent we never saw: write without parent */
        progress = 0;
        for (int c = 0; c < ncomms; c++) {
            if (done[c]) continue;
            const int32_t *d = cw + at[c];
            uint32_t parent = (uint32_t)d[1];
            int ready = parent == OTF2_UNDEFINED_COMM || parent <= COMM_SELF_REF, known = 0;
            int pf = ready ? ncomms : first_of(by_ref, ncomms, parent);
            for (int q = pf; q < ncomms && by_ref[q][0] == parent && !ready; q++) {
                known = 1;
                ready = done[by_ref[q][1]];
            }
            if (!ready && !known) parent = OTF2_UNDEFINED_COMM, ready = 1;
            if (!ready && !force) continue;
            if (!ready) parent = OTF2_UNDEFINED_COMM;
            if (pf < ncomms && by_ref[pf][0] == parent && dense_of[pf] != UINT32_MAX)
                parent = dense_of[pf]; /* the parent's dense ref */
            uint64_t *m = malloc((size_t)(d[2] ? d[2] : 1) * sizeof *m);
            if (!m) {
                lost();
                goto out;
            }
            for (int k = 0; k < d[2]; k++) m[k] = (uint64_t)d[4 + k];
            uint32_t dense = 2 + (uint32_t)written;
            snprintf(name, sizeof name, "comm %u", dense);
            const char *given = (const char *)(d + 4 + d[2]); /* MPI_Comm_set_name */
            OTF2_StringRef cname = mps_gstr(gw, d[3] && *given ? given : name);
            int32_t na = comm_rec_inter_a(d);
            if (na > 0 && na <= d[2]) { /* intercommunicator: its two groups */
                char gname[80];
                snprintf(gname, sizeof gname, "%s A", name);
                OTF2_GlobalDefWriter_WriteGroup(gw, gref, mps_gstr(gw, gname),
                                                OTF2_GROUP_TYPE_COMM_GROUP, OTF2_PARADIGM_MPI,
                                                OTF2_GROUP_FLAG_NONE, (uint32_t)na, m);
                snprintf(gname, sizeof gname, "%s B", name);
                OTF2_GlobalDefWriter_WriteGroup(gw, gref + 1, mps_gstr(gw, gname),
                                                OTF2_GROUP_TYPE_COMM_GROUP, OTF2_PARADIGM_MPI,
                                                OTF2_GROUP_FLAG_NONE, (uint32_t)(d[2] - na),
                                                m + na);
                OTF2_GlobalDefWriter_WriteInterComm(gw, dense, cname, gref, gref + 1, parent,
                                                    OTF2_COMM_FLAG_NONE);
                gref += 2;
            } else {
                OTF2_GlobalDefWriter_WriteGroup(gw, gref, mps_gstr(gw, name),
                                                OTF2_GROUP_TYPE_COMM_GROUP, OTF2_PARADIGM_MPI,
                                                OTF2_GROUP_FLAG_NONE, (uint32_t)d[2], m);
                OTF2_GlobalDefWriter_WriteComm(gw, dense, cname, gref++, parent,
                                               OTF2_COMM_FLAG_NONE);
            }
            free(m);
            done[c] = 1;
            int self = first_of(by_ref, ncomms, (uint32_t)d[0]);
            if (dense_of[self] == UINT32_MAX) dense_of[self] = dense;
            order[written++] = (uint32_t)d[0];
            progress = 1;
        }
    }
out:
    free(done);
    free(at);
    free(by_ref);
    free(dense_of);
    return written;
}

/* Rank 0 at MPI_Finalize: how many threads of each rank recorded events, and their
 * event counts (rank by rank, main thread first); NULL: one location per rank. */
static const uint32_t *thread_counts;
static const uint64_t *thread_events;

void mps_set_thread_locations(const uint32_t *nthreads, const uint64_t *nevents)
{
    thread_counts = nthreads;
    thread_events = nevents;
}

/* Communicator refs chosen at creation are sparse; the definitions use dense refs
 * 2, 3, … in writing order (`order` receives the sparse refs in that order) and every
 * rank maps its event records onto them with an OTF2 id map. */
int mps_write_global_defs(OTF2_GlobalDefWriter *gw, uint64_t gmin, uint64_t gmax,
                          const char *hosts, const uint64_t *nevents, const int32_t *cw,
                          int ncw, uint32_t **order_out)
{
    const int size = mps_job.size;
    const size_t hostlen = sizeof mps_job.host;
    OTF2_GlobalDefWriter_WriteClockProperties(gw, 1000000000u, gmin, gmax - gmin,
                                              OTF2_UNDEFINED_TIMESTAMP);
    OTF2_StringRef empty = mps_gstr(gw, "");
    OTF2_GlobalDefWriter_WriteParadigm(gw, OTF2_PARADIGM_MPI, mps_gstr(gw, "MPI"),
                                       OTF2_PARADIGM_CLASS_PROCESS);
    /* attributes: same refs on every rank, written in ref order (otf2-print warns of
       definitions out of order) */
    OTF2_GlobalDefWriter_WriteAttribute(gw, MPS_ATTR_CALLSITE, mps_gstr(gw, "mpiscope:callsite"),
                                        mps_gstr(gw, "call site of the MPI call"),
                                        OTF2_TYPE_SOURCE_CODE_LOCATION);
    OTF2_GlobalDefWriter_WriteAttribute(gw, MPS_ATTR_IN_HASH, mps_gstr(gw, "mpiscope:in_hash"),
                                        mps_gstr(gw, "FNV-1a 64 of the collective's input"),
                                        OTF2_TYPE_UINT64);
    OTF2_GlobalDefWriter_WriteAttribute(gw, MPS_ATTR_OUT_HASH, mps_gstr(gw, "mpiscope:out_hash"),
                                        mps_gstr(gw, "FNV-1a 64 of the collective's result"),
                                        OTF2_TYPE_UINT64);
    OTF2_GlobalDefWriter_WriteAttribute(gw, MPS_ATTR_ERROR, mps_gstr(gw, "mpiscope:error"),
                                        mps_gstr(gw, "error code the MPI call returned"),
                                        OTF2_TYPE_INT32);
    OTF2_GlobalDefWriter_WriteAttribute(gw, MPS_ATTR_CALLS, mps_gstr(gw, "mpiscope:calls"),
                                        mps_gstr(gw, "consecutive polling calls that "
                                                     "completed nothing, in this one visit"),
                                        OTF2_TYPE_UINT64);
    OTF2_GlobalDefWriter_WriteAttribute(gw, MPS_ATTR_PRIOR_HASH,
                                        mps_gstr(gw, "mpiscope:prior_hash"),
                                        mps_gstr(gw, "FNV-1a 64 of the collective's receive "
                                                     "buffer at entry"),
                                        OTF2_TYPE_UINT64);
    OTF2_GlobalDefWriter_WriteAttribute(gw, MPS_ATTR_CPU, mps_gstr(gw, "mpiscope:cpu_ns"),
                                        mps_gstr(gw, "the thread's on-CPU time so far (ns, "
                                                     "/proc/thread-self/schedstat)"),
                                        OTF2_TYPE_UINT64);
    OTF2_GlobalDefWriter_WriteAttribute(gw, MPS_ATTR_RUN_DELAY,
                                        mps_gstr(gw, "mpiscope:run_delay_ns"),
                                        mps_gstr(gw, "the thread's time so far runnable but "
                                                     "waiting for a CPU (ns, "
                                                     "/proc/thread-self/schedstat)"),
                                        OTF2_TYPE_UINT64);
    /* regions: one per MPI function, ref = function index */
    for (int f = 0; f < MPS_FN_COUNT; f++) {
        OTF2_StringRef ns = mps_gstr(gw, mps_fn_names[f]);
        OTF2_GlobalDefWriter_WriteRegion(gw, (OTF2_RegionRef)f, ns, ns, empty,
                                         (OTF2_RegionRole)mps_fn_roles[f], OTF2_PARADIGM_MPI,
                                         OTF2_REGION_FLAG_NONE, empty, 0, 0);
    }
    /* system tree: machine → one node per distinct host */
    OTF2_GlobalDefWriter_WriteSystemTreeNode(gw, 0, mps_gstr(gw, "machine"),
                                             mps_gstr(gw, "machine"),
                                             OTF2_UNDEFINED_SYSTEM_TREE_NODE);
    uint32_t *node_of = calloc((size_t)size, sizeof *node_of);
    uint64_t *members = malloc((size_t)size * sizeof *members);
    if (!node_of || !members) {
        free(node_of);
        free(members);
        lost();
        *order_out = NULL;
        return 0;
    }
    uint32_t nnodes = 0;
    OTF2_StringRef node_class = mps_gstr(gw, "node");
    for (int r = 0; r < size; r++) {
        const char *h = hosts + (size_t)r * hostlen;
        int prev = -1;
        for (int q = 0; q < r; q++)
            if (strcmp(h, hosts + (size_t)q * hostlen) == 0) { prev = q; break; }
        if (prev >= 0) { node_of[r] = node_of[prev]; continue; }
        node_of[r] = ++nnodes;
        OTF2_GlobalDefWriter_WriteSystemTreeNode(gw, node_of[r], mps_gstr(gw, h), node_class, 0);
    }
    char name[64];
    for (int r = 0; r < size; r++) {
        snprintf(name, sizeof name, "MPI Rank %d", r);
        OTF2_GlobalDefWriter_WriteLocationGroup(gw, (OTF2_LocationGroupRef)r, mps_gstr(gw, name),
                                                OTF2_LOCATION_GROUP_TYPE_PROCESS, node_of[r],
                                                OTF2_UNDEFINED_LOCATION_GROUP);
    }
    for (int r = 0; r < size; r++) {
        snprintf(name, sizeof name, "rank %d", r);
        OTF2_GlobalDefWriter_WriteLocation(gw, (OTF2_LocationRef)r, mps_gstr(gw, name),
                                           OTF2_LOCATION_TYPE_CPU_THREAD, nevents[r],
                                           (OTF2_LocationGroupRef)r);
    }
    /* the other threads that called MPI: location rank + thread * size, in the rank's
     * process (written after all main threads, so location r stays rank r's) */
    for (int r = 0, at = 0; thread_counts && r < size; at += (int)thread_counts[r++])
        for (uint32_t t = 1; t < thread_counts[r]; t++) {
            snprintf(name, sizeof name, "rank %d thread %u", r, t);
            OTF2_GlobalDefWriter_WriteLocation(
                gw, (OTF2_LocationRef)r + (OTF2_LocationRef)t * (OTF2_LocationRef)size,
                mps_gstr(gw, name), OTF2_LOCATION_TYPE_CPU_THREAD, thread_events[at + t],
                (OTF2_LocationGroupRef)r);
        }
    free(node_of);
    /* groups and communicators */
    for (int r = 0; r < size; r++) members[r] = (uint64_t)r;
    OTF2_GlobalDefWriter_WriteGroup(gw, 0, mps_gstr(gw, "MPI_COMM_WORLD locations"),
                                    OTF2_GROUP_TYPE_COMM_LOCATIONS, OTF2_PARADIGM_MPI,
                                    OTF2_GROUP_FLAG_NONE, (uint32_t)size, members);
    OTF2_GlobalDefWriter_WriteGroup(gw, 1, mps_gstr(gw, "MPI_COMM_WORLD group"),
                                    OTF2_GROUP_TYPE_COMM_GROUP, OTF2_PARADIGM_MPI,
                                    OTF2_GROUP_FLAG_NONE, (uint32_t)size, members);
    OTF2_GlobalDefWriter_WriteGroup(gw, 2, mps_gstr(gw, "MPI_COMM_SELF group"),
                                    OTF2_GROUP_TYPE_COMM_SELF, OTF2_PARADIGM_MPI,
                                    OTF2_GROUP_FLAG_NONE, 0, NULL);
    OTF2_GlobalDefWriter_WriteComm(gw, COMM_WORLD_REF, mps_gstr(gw, "MPI_COMM_WORLD"), 1,
                                   OTF2_UNDEFINED_COMM, OTF2_COMM_FLAG_NONE);
    OTF2_GlobalDefWriter_WriteComm(gw, COMM_SELF_REF, mps_gstr(gw, "MPI_COMM_SELF"), 2,
                                   OTF2_UNDEFINED_COMM, OTF2_COMM_FLAG_NONE);
    int written = write_comms(gw, cw, ncw, order_out);
    mps_objects_write_defs(gw, *order_out, written);
    free(members);
    return written;
}

/* This rank's local definitions: id maps from its local call-site ids and sparse comm refs
 * onto the global definitions, and its clock offsets (local time → rank 0's time) at Init
 * and (when measured) Finalize, which readers interpolate linearly as OTF2 defines. */
void mps_write_local_defs(OTF2_Archive *ar, const uint32_t *map, const uint32_t *order,
                          int ncomms, int have_fin)
{
    const int rank = mps_job.rank;
    OTF2_Archive_OpenDefFiles(ar);
    /* every thread's location: the same id maps and clock offsets (a salvaged rank's
     * archive has only the main thread's) */
    for (const struct mps_recorder *t = &mps_rt; t; t = have_fin ? t->next : NULL) {
        OTF2_DefWriter *dw = OTF2_Archive_GetDefWriter(ar, have_fin ? t->location
                                                                    : (OTF2_LocationRef)rank);
        if (dw) {
            if (mps_sites.n && map) {
                OTF2_IdMap *im = OTF2_IdMap_CreateFromUint32Array(mps_sites.n, map, false);
                if (im) {
                    OTF2_DefWriter_WriteMappingTable(dw, OTF2_MAPPING_SOURCE_CODE_LOCATION, im);
                    OTF2_IdMap_Free(im);
                }
            }
            if (mps_cp_nmap && mps_cp_map) { /* call paths (depth > 1) */
                OTF2_IdMap *im = OTF2_IdMap_CreateFromUint32Array(mps_cp_nmap, mps_cp_map,
                                                                  false);
                if (im) {
                    OTF2_DefWriter_WriteMappingTable(dw, OTF2_MAPPING_CALLING_CONTEXT, im);
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
            mps_objects_write_maps(dw);
            OTF2_DefWriter_WriteClockOffset(dw, (uint64_t)(mps_job.t_init_local + mps_job.off_init),
                                            0, 0.0);
            if (have_fin)
                OTF2_DefWriter_WriteClockOffset(dw, (uint64_t)(mps_job.t_fin_local + mps_job.off_init),
                                                mps_job.off_fin - mps_job.off_init, 0.0);
            OTF2_Archive_CloseDefWriter(ar, dw);
        }
    }
    for (int r = 0; r < mps_job.size && !have_fin; r++) { /* salvaged: the others' files, empty */
        OTF2_DefWriter *w = r == rank ? NULL : OTF2_Archive_GetDefWriter(ar, (uint64_t)r);
        if (w) OTF2_Archive_CloseDefWriter(ar, w);
    }
    OTF2_Archive_CloseDefFiles(ar);
}

/* The global definitions of a single-rank archive (salvage(), mpiscope-recover): call
 * sites by this rank's local ids (`loc`, freed here), every rank of the job defined
 * (communicator groups name them) but only `rank` with its host and `nevents` events:
 * the others' events died with them. Returns the number of communicators (*order: their
 * dense refs, for mps_write_local_defs). */
int mps_write_single_rank_defs(OTF2_Archive *ar, OTF2_GlobalDefWriter *gw, int rank,
                               uint64_t nevents, mps_location *loc, uint32_t nloc,
                               uint32_t **order)
{
    const int size = mps_job.size;
    const size_t hostlen = sizeof mps_job.host;
    const char **objects = calloc(nloc ? nloc : 1, sizeof *objects);
    const char **build_ids = calloc(nloc ? nloc : 1, sizeof *build_ids);
    uint64_t *offsets = calloc(nloc ? nloc : 1, sizeof *offsets);
    int have = objects && build_ids && offsets;
    for (uint32_t i = 0; i < nloc; i++) {
        OTF2_StringRef fs = mps_gstr(gw, loc[i].file ? loc[i].file : "?");
        OTF2_GlobalDefWriter_WriteSourceCodeLocation(gw, i, fs, loc[i].line);
        if (have) {
            objects[i] = loc[i].object;
            build_ids[i] = loc[i].build_id;
            offsets[i] = loc[i].offset;
        }
    }
    if (have) mps_set_callsite_objects(ar, objects, build_ids, offsets, nloc);
    for (uint32_t i = 0; i < nloc; i++) {
        free(loc[i].file);
        free(loc[i].object);
        free(loc[i].func);
    }
    free(objects);
    free(build_ids);
    free(offsets);
    char *hosts = calloc((size_t)size, hostlen);
    uint64_t *counts = calloc((size_t)size, sizeof *counts);
    int ncw = 0, ncomms = 0;
    int32_t *cw = mps_serialize_comms(1, &ncw);
    if (!hosts || !counts || !cw) lost(); /* an archive without its definitions */
    if (hosts && counts && cw) {
        mps_objects_use_own();
        for (int r = 0; r < size; r++)
            snprintf(hosts + (size_t)r * hostlen, hostlen, "%s",
                     r == rank ? mps_job.host : "unknown");
        counts[rank] = nevents;
        ncomms = mps_write_global_defs(gw, mps_rt.first_ts, mps_rt.last_ts, hosts, counts, cw,
                                       ncw, order);
    }
    mps_single_rank_callpaths(ar, gw, nloc); /* salvage (mpiscope-recover has no paths) */
    free(hosts); free(counts); free(cw);
    return ncomms;
}
