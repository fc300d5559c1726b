/* libFuzzer harness for the native reader's entry point (reader.c's mpsr_read), built
 * with AddressSanitizer and UBSan by analyzer/tests/test_reader_libfuzzer.py.
 *
 * The reader is given a damaged copy of a small real archive (the template) and the
 * config Python made for the undamaged one (mpiscope.archive.native.config), as
 * read_events gives them: the files' sizes bound the events (loc_max_events, and the
 * expected count), a cut event or local definition file is zero-padded to its chunk's
 * end and one chunk more (native._complete), the archive's properties are read, the
 * result's columns are taken and checked as Python relies on them, and all is freed.
 *
 * Environment: MPSR_FUZZ_TEMPLATE, the template's directory (traces.otf2, traces.def,
 * traces/N.def, traces/N.evt); MPSR_FUZZ_CONFIG, the config file the test wrote:
 *   "MPSRFUZ1", u64 sizeof(mpsr_config), the struct's bytes (pointers zero),
 *   u64 arrays, per array: u64 offset of its pointer field, u64 bytes, the bytes padded
 *   to 8, then u64 nloc and per location the event count the definitions claim.
 *
 * Input: byte 0 picks what to damage among F files (each location's .evt; with
 * MPSR_FUZZ_LOCAL_DEFS=1 each location's .def and .evt; the global definitions are
 * Python's to read, not the reader's; the anchor and local definitions, see below):
 *   s < F        file s is replaced by the rest of the input;
 *   s < 2F       file s - F is patched: u32 offset (modulo its size + 1), the rest of the
 *                input written there (nothing: the file is cut at the offset);
 *   s == 2F      what a hostile traces.def can make Python hand over unchecked: u64 words
 *                replace timer resolution (0: Python's 10^9), global offset, trace
 *                length, the memory budget in events (0: none), subset (nonzero: read
 *                as the Dask engine reads a group of ranks), then each location's
 *                claimed event count, then 7 u32 the attribute refs; what follows is
 *                a file's damage as above (its own byte s), if any.
 * The template's file is put back after each input; one directory per process.
 *
 * The anchor is not damaged: libotf2 (3.0.2) parses it in OTF2_Reader_Open, before any
 * code of ours runs, and trusts its counts: a patched count made OTF2_AnchorFile_Load
 * reserve 21 GB and spin ~50 s (natively; under ASan it zeroes the 21 GB) before failing,
 * and a failed open leaks the archive object (~20 KB) and the anchor's descriptor, none
 * of which it returns for us to free. Python opens the anchor first (decode.Definitions,
 * through the otf2 package) and meets the same.
 *
 * Local definition files are read by libotf2 alone (our code counts their clock
 * offsets), and damaged ones are not libotf2 3.0.2's strength: an id map (MappingTable)
 * claiming more entries than its record holds is read past the chunk buffer
 * (otf2_id_map_read: SEGV under ASan; natively it read garbage here and went on), after
 * allocating what it claims (2^32 entries: 32 GB; malloc fails natively), and the map is
 * leaked when the record then fails. The reader now checks each file first (localdefs.c)
 * and refuses such a map, so the test damages them too, in its runs with
 * MPSR_FUZZ_LOCAL_DEFS=1; the test's template gives a location valid local definitions
 * (clock offsets, id maps), which every input reads.
 * The id maps' leak is suppressed for LeakSanitizer (we create no id maps).
 *
 * libotf2 also allocates what a damaged event's array count says (2^32 entries: 16 GB)
 * before reading it; natively the pages are never touched (the read fails at the
 * buffer's end), under ASan the allocation alone costs 2 GB of shadow. So the test runs
 * with ASAN_OPTIONS=allocator_may_return_null=1:max_allocation_size_mb=1024, as on a
 * machine that refuses such an allocation: libotf2 then reports the damage. Our own
 * allocations for a few KB of files never come near that: one that fails shows as "out
 * of memory" in the reader's error, which fails the run. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <otf2/otf2.h>

#include "schema.h"

/* reader.c's entry points (the library has no header: Python binds them with ctypes) */
typedef struct mpsr_result mpsr_result;
typedef void (*mpsr_progress)(uint64_t done, uint64_t expected);
mpsr_result *mpsr_read(const char *anchor, const mpsr_config *cfg, mpsr_progress progress);
void mpsr_release(mpsr_result *r);
uint64_t mpsr_rows(const mpsr_result *r, int table);
void *mpsr_take(mpsr_result *r, int table, int col);
int64_t *mpsr_take_link(mpsr_result *r);
const char *mpsr_error(const mpsr_result *r);
uint64_t mpsr_clock_offsets(const mpsr_result *r);
void mpsr_locations(const mpsr_result *r, int32_t n, uint64_t *events, int64_t *first,
                    int64_t *last, uint8_t *truncated);
void mpsr_damage(const mpsr_result *r, int32_t n, uint64_t *backwards, uint64_t *outside,
                 uint64_t *bytes, uint8_t *overrun);
void mpsr_free_buffer(void *p);
char *mpsr_properties(const char *anchor);

#define CHUNK_MAX (16u << 20) /* native._CHUNK_MAX */
#define MAX_FILES 64

typedef struct {
    char rel[64];  /* path within the archive's directory */
    uint8_t *data; /* the template's bytes */
    size_t size;
    int location;  /* index into cfg.locs */
    int is_evt;
} file_t;

static char g_dir[4096], g_anchor[4200];
static file_t g_files[MAX_FILES];
static int g_nfiles;
static const file_t *g_damage[MAX_FILES]; /* the files inputs damage */
static int g_ndamage;
static mpsr_config g_cfg; /* as Python made it */
static uint64_t *g_claimed; /* per location: the event count the definitions claim */
static uint64_t g_chunk_evt = CHUNK_MAX, g_chunk_def = CHUNK_MAX;

static void die(const char *what)
{
    fprintf(stderr, "fuzz_reader: %s%s%s\n", what, errno ? ": " : "", errno ? strerror(errno) : "");
    exit(2);
}

/* a violated promise of the reader's output: a bug, reported as a crash */
#define EXPECT(cond, ...) do { if (!(cond)) { fprintf(stderr, "fuzz_reader: " __VA_ARGS__); \
                                              fputc('\n', stderr); abort(); } } while (0)

static uint8_t *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) die(path);
    uint8_t *p = malloc((size_t)st.st_size + 1);
    if (!p || fread(p, 1, (size_t)st.st_size, f) != (size_t)st.st_size) die(path);
    fclose(f);
    *size = (size_t)st.st_size;
    return p;
}

static void spill(const char *rel, const uint8_t *data, size_t size)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", g_dir, rel);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) die(path);
    for (size_t done = 0; done < size;) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) die(path);
        done += (size_t)w;
    }
    close(fd);
}

static void cleanup(void)
{
    char path[4300];
    for (int i = 0; i < g_nfiles; i++) {
        snprintf(path, sizeof path, "%s/%s", g_dir, g_files[i].rel);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/traces.def", g_dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/traces.otf2", g_dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/traces", g_dir);
    rmdir(path);
    rmdir(g_dir);
}

static void load_config(const char *path)
{
    size_t n;
    uint8_t *b = slurp(path, &n);
    if (!b) die(path);
    size_t at = 0;
#define TAKE(dst, len) do { if ((len) > n - at) die("config file cut short"); \
                            memcpy((dst), b + at, (len)); at += (len); } while (0)
    char magic[8];
    uint64_t size, narrays;
    TAKE(magic, 8);
    if (memcmp(magic, "MPSRFUZ1", 8) != 0) die("not a config file");
    TAKE(&size, 8);
    if (size != sizeof g_cfg) die("config of another layout (rebuild)");
    TAKE(&g_cfg, sizeof g_cfg);
    TAKE(&narrays, 8);
    for (uint64_t i = 0; i < narrays; i++) {
        uint64_t off, len;
        TAKE(&off, 8);
        TAKE(&len, 8);
        if (off > sizeof g_cfg - sizeof(void *) || len > n - at) die("bad config array");
        /* an exact-size copy: a read past a lookup table is ASan's to see */
        void *p = malloc(len ? len : 1);
        if (!p) die("out of memory");
        TAKE(p, len);
        at += (8 - len % 8) % 8;
        memcpy((char *)&g_cfg + off, &p, sizeof p);
    }
    uint64_t nloc;
    TAKE(&nloc, 8);
    if (nloc != (uint64_t)g_cfg.nloc || !g_cfg.loc_max_events) die("bad location counts");
    g_claimed = calloc(nloc + 1, 8);
    if (!g_claimed) die("out of memory");
    TAKE(g_claimed, nloc * 8);
#undef TAKE
    free(b);
}

static void add_file(const char *template, const char *rel, int location, int is_evt)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", template, rel);
    file_t *f = &g_files[g_nfiles];
    f->data = slurp(path, &f->size);
    if (!f->data) return; /* no local definitions: nothing to damage */
    if (g_nfiles + 1 == MAX_FILES) die("template of too many files");
    snprintf(f->rel, sizeof f->rel, "%s", rel);
    f->location = location;
    f->is_evt = is_evt;
    g_nfiles++;
    const char *defs = getenv("MPSR_FUZZ_LOCAL_DEFS");
    if (is_evt || (defs && *defs && strcmp(defs, "0") != 0)) g_damage[g_ndamage++] = f;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    const char *template = getenv("MPSR_FUZZ_TEMPLATE"), *config = getenv("MPSR_FUZZ_CONFIG");
    if (!template || !config) die("set MPSR_FUZZ_TEMPLATE and MPSR_FUZZ_CONFIG");
    load_config(config);
    for (int32_t i = 0; i < g_cfg.nloc; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "traces/%" PRIu64 ".def", g_cfg.locs[i]);
        add_file(template, rel, i, 0);
        snprintf(rel, sizeof rel, "traces/%" PRIu64 ".evt", g_cfg.locs[i]);
        add_file(template, rel, i, 1);
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/mpsr-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) die("mkdtemp");
    atexit(cleanup);
    char path[4300];
    snprintf(path, sizeof path, "%s/traces", g_dir);
    if (mkdir(path, 0700) != 0) die(path);
    size_t n;
    snprintf(path, sizeof path, "%s/traces.def", template);
    uint8_t *defs = slurp(path, &n);
    if (!defs) die(path);
    spill("traces.def", defs, n);
    free(defs);
    snprintf(path, sizeof path, "%s/traces.otf2", template);
    uint8_t *anchor = slurp(path, &n);
    if (!anchor) die(path);
    spill("traces.otf2", anchor, n);
    free(anchor);
    for (int i = 0; i < g_nfiles; i++) spill(g_files[i].rel, g_files[i].data, g_files[i].size);
    snprintf(g_anchor, sizeof g_anchor, "%s/traces.otf2", g_dir);
    /* the chunk sizes Python pads cut files to (native._chunk_sizes) */
    OTF2_Reader *rd = OTF2_Reader_Open(g_anchor);
    uint64_t evt = 0, def = 0;
    if (rd && OTF2_Reader_GetChunkSize(rd, &evt, &def) == OTF2_SUCCESS && evt > 0 &&
        evt <= CHUNK_MAX && def > 0 && def <= CHUNK_MAX) {
        g_chunk_evt = evt;
        g_chunk_def = def;
    }
    if (rd) OTF2_Reader_Close(rd);
    return 0;
}

static uint64_t file_size(const file_t *f)
{
    char path[4300];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", g_dir, f->rel);
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* native._complete: a location file that does not end as libotf2 ends one gets zeros to
 * its chunk's end and a chunk more */
static void pad_if_cut(const file_t *f, const uint8_t *data, size_t size)
{
    if (size < 2 || (data[size - 2] == 2 && data[size - 1] == 1)) return;
    uint64_t step = f->is_evt ? g_chunk_evt : g_chunk_def;
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", g_dir, f->rel);
    if (truncate(path, (off_t)((size + step - 1) / step * step + step)) != 0) die(path);
}

/* libotf2's leak of an id map read from a damaged local definition file (see the top;
 * MPSR_FUZZ_LOCAL_DEFS=1 runs only) */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:OTF2_IdMap_Create\n"; }

static void no_progress(uint64_t done, uint64_t expected) { (void)done; (void)expected; }

static int64_t g_ncalls;
static const C_RANK_t *g_call_rank;

/* a row's reference to a call: none (-1) or a call of the row's rank */
static void check_call_ref(int64_t call, int32_t rank, const char *what)
{
    EXPECT(call >= -1 && call < g_ncalls, "%s refers to call %" PRId64 " of %" PRId64, what,
           call, g_ncalls);
    EXPECT(call < 0 || g_call_rank[call] == rank, "%s of rank %d refers to call %" PRId64
           " of rank %d", what, rank, call, g_call_rank[call]);
}

static const int64_t *g_first, *g_last; /* per location: its first and last time */

/* a time of location (rank, thread), or of any of the rank's locations (thread < 0), lies
 * within its first and last time */
static void check_time(int32_t rank, int32_t thread, int64_t t, const char *what)
{
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int32_t j = 0; j < g_cfg.nloc; j++)
        if (g_cfg.loc_rank[j] == rank && (thread < 0 || g_cfg.loc_thread[j] == thread)) {
            if (g_first[j] < lo) lo = g_first[j];
            if (g_last[j] > hi) hi = g_last[j];
        }
    EXPECT(lo <= t && t <= hi, "%s of rank %d thread %d at %" PRId64 ", outside %" PRId64
           "..%" PRId64, what, rank, thread, t, lo, hi);
}

/* what Python builds its DataFrames and analyses on (decode.py): codes within their
 * categories, row references within their tables, no negative time, duration or bytes,
 * every time within its location's first and last */
static void check_tables(void **cols[T_NTABLES], const uint64_t *rows)
{
    int32_t fmin = g_cfg.unknown_func, fmax = g_cfg.unknown_func;
    for (uint32_t i = 0; i < g_cfg.nregions; i++) {
        if (g_cfg.region_func[i] < fmin) fmin = g_cfg.region_func[i];
        if (g_cfg.region_func[i] > fmax) fmax = g_cfg.region_func[i];
    }
    g_ncalls = (int64_t)rows[T_CALLS];
    g_call_rank = cols[T_CALLS][C_RANK];
    for (int t = T_CALLS; t <= T_REGIONS; t++) {
        void **c = cols[t];
        for (uint64_t i = 0; i < rows[t]; i++) {
            int64_t s = ((C_START_t *)c[C_START])[i], e = ((C_END_t *)c[C_END])[i];
            EXPECT(0 <= s && s <= e, "table %d row %" PRIu64 ": start %" PRId64 " end %" PRId64,
                   t, i, s, e);
            int32_t rank = ((C_RANK_t *)c[C_RANK])[i], thread = ((C_THREAD_t *)c[C_THREAD])[i];
            check_time(rank, thread, s, "call start");
            check_time(rank, thread, e, "call end");
            int32_t fn = ((C_FUNCTION_t *)c[C_FUNCTION])[i];
            EXPECT(fmin <= fn && fn <= fmax, "function code %d", fn);
            EXPECT(((C_BYTES_SENT_t *)c[C_BYTES_SENT])[i] >= 0 &&
                   ((C_BYTES_RECV_t *)c[C_BYTES_RECV])[i] >= 0, "negative bytes");
            EXPECT(((C_POLLS_t *)c[C_POLLS])[i] >= 1, "polls < 1");
        }
    }
    for (uint64_t i = 0; i < rows[T_P2P]; i++) {
        check_call_ref(((P_CALL_t *)cols[T_P2P][P_CALL])[i],
                       ((P_RANK_t *)cols[T_P2P][P_RANK])[i], "p2p");
        check_time(((P_RANK_t *)cols[T_P2P][P_RANK])[i], ((P_THREAD_t *)cols[T_P2P][P_THREAD])[i],
                   ((P_TIME_t *)cols[T_P2P][P_TIME])[i], "p2p time");
        EXPECT(((P_BYTES_t *)cols[T_P2P][P_BYTES])[i] >= 0, "p2p bytes");
    }
    for (uint64_t i = 0; i < rows[T_MESSAGES]; i++) {
        void **c = cols[T_MESSAGES];
        int32_t srank = ((M_SEND_RANK_t *)c[M_SEND_RANK])[i];
        int32_t rrank = ((M_RECV_RANK_t *)c[M_RECV_RANK])[i];
        check_call_ref(((M_SEND_CALL_t *)c[M_SEND_CALL])[i], srank, "message send");
        check_call_ref(((M_RECV_CALL_t *)c[M_RECV_CALL])[i], rrank, "message recv");
        check_call_ref(((M_SEND_COMPLETE_CALL_t *)c[M_SEND_COMPLETE_CALL])[i], srank,
                       "send complete");
        check_call_ref(((M_RECV_COMPLETE_CALL_t *)c[M_RECV_COMPLETE_CALL])[i], rrank,
                       "recv complete");
        EXPECT(((M_BYTES_t *)c[M_BYTES])[i] >= 0, "message bytes");
    }
    for (uint64_t i = 0; i < rows[T_COLLECTIVES]; i++) {
        int64_t call = ((K_CALL_t *)cols[T_COLLECTIVES][K_CALL])[i];
        EXPECT(call >= 0 && call < g_ncalls, "collective call %" PRId64, call);
        EXPECT(((C_COLL_SEQ_t *)cols[T_CALLS][C_COLL_SEQ])[call] >= 0, "collective without seq");
        EXPECT(((K_INSTANCE_t *)cols[T_COLLECTIVES][K_INSTANCE])[i] >= 0, "instance");
    }
    for (uint64_t i = 0; i < rows[T_FLUSHES]; i++) {
        int64_t s = ((F_START_t *)cols[T_FLUSHES][F_START])[i];
        EXPECT(0 <= s && s <= ((F_END_t *)cols[T_FLUSHES][F_END])[i], "flush");
        check_time(((F_RANK_t *)cols[T_FLUSHES][F_RANK])[i], -1, s, "flush");
    }
    for (uint64_t i = 0; i < rows[T_UNMATCHED]; i++)
        check_call_ref(((U_CALL_t *)cols[T_UNMATCHED][U_CALL])[i],
                       ((U_RANK_t *)cols[T_UNMATCHED][U_RANK])[i], "unmatched");
    for (uint64_t i = 0; i < rows[T_RMA]; i++) {
        void **c = cols[T_RMA];
        check_call_ref(((R_CALL_t *)c[R_CALL])[i], ((R_RANK_t *)c[R_RANK])[i], "rma");
        check_time(((R_RANK_t *)c[R_RANK])[i], -1, ((R_TIME_t *)c[R_TIME])[i], "rma");
        if (((R_COMPLETE_TIME_t *)c[R_COMPLETE_TIME])[i] != -1)
            check_time(((R_RANK_t *)c[R_RANK])[i], -1, ((R_COMPLETE_TIME_t *)c[R_COMPLETE_TIME])[i],
                       "rma completion");
        check_call_ref(((R_COMPLETE_CALL_t *)c[R_COMPLETE_CALL])[i], ((R_RANK_t *)c[R_RANK])[i],
                       "rma complete");
        EXPECT(((R_BYTES_SENT_t *)c[R_BYTES_SENT])[i] >= 0 &&
               ((R_BYTES_RECV_t *)c[R_BYTES_RECV])[i] >= 0, "rma bytes");
    }
    for (uint64_t i = 0; i < rows[T_RMA_SYNC]; i++) {
        check_call_ref(((S_CALL_t *)cols[T_RMA_SYNC][S_CALL])[i],
                       ((S_RANK_t *)cols[T_RMA_SYNC][S_RANK])[i], "rma sync");
        check_time(((S_RANK_t *)cols[T_RMA_SYNC][S_RANK])[i], -1,
                   ((S_TIME_t *)cols[T_RMA_SYNC][S_TIME])[i], "rma sync");
    }
    for (uint64_t i = 0; i < rows[T_IO]; i++) {
        void **c = cols[T_IO];
        check_call_ref(((I_CALL_t *)c[I_CALL])[i], ((I_RANK_t *)c[I_RANK])[i], "io");
        check_call_ref(((I_COMPLETE_CALL_t *)c[I_COMPLETE_CALL])[i], ((I_RANK_t *)c[I_RANK])[i],
                       "io complete");
        int32_t rank = ((I_RANK_t *)c[I_RANK])[i];
        int64_t s = ((I_START_t *)c[I_START])[i], e = ((I_END_t *)c[I_END])[i];
        check_time(rank, -1, s, "io start");
        if (e != -1) {
            check_time(rank, -1, e, "io end");
            EXPECT(s <= e, "io ends before it starts");
        }
        EXPECT(((I_BYTES_t *)c[I_BYTES])[i] >= 0 &&
               ((I_BYTES_REQUESTED_t *)c[I_BYTES_REQUESTED])[i] >= 0, "io bytes");
    }
}

/* read_events: the config with the files' sizes, the read, and what Python takes */
static void read_archive(const mpsr_config *base)
{
    mpsr_config cfg = *base;
    int32_t nloc = cfg.nloc;
    uint64_t *most = calloc((size_t)nloc + 1, 8);
    if (!most) die("out of memory");
    cfg.expected_events = 0;
    for (int i = 0; i < g_nfiles; i++) {
        const file_t *f = &g_files[i];
        if (!f->is_evt) continue;
        /* decode.event_file_bytes: each event takes at least a byte of its file */
        most[f->location] = file_size(f);
        uint64_t claim = g_claimed[f->location];
        cfg.expected_events += claim < most[f->location] ? claim : most[f->location];
    }
    cfg.loc_max_events = most;
    char *props = mpsr_properties(g_anchor);
    mpsr_free_buffer(props);
    mpsr_result *res = mpsr_read(g_anchor, &cfg, no_progress);
    free(most);
    if (!res) return;
    const char *error = mpsr_error(res);
    /* our tables are sized by what the files can hold: a few KB of files never need more
     * than the machine has (libotf2's own failed allocations read as OTF2 errors) */
    EXPECT(!strstr(error, "out of memory"), "the reader ran out of memory: %s", error);
    int ok = !error[0] || (cfg.subset && strncmp(error, "corrupt OTF2 events", 19) == 0);
    static const int ncols[T_NTABLES] = {C_NCOLS, C_NCOLS, P_NCOLS, M_NCOLS, K_NCOLS,
                                         F_NCOLS, U_NCOLS, R_NCOLS, S_NCOLS, I_NCOLS};
    void **cols[T_NTABLES];
    uint64_t rows[T_NTABLES];
    for (int t = 0; t < T_NTABLES; t++) {
        rows[t] = mpsr_rows(res, t);
        cols[t] = calloc((size_t)ncols[t], sizeof(void *));
        if (!cols[t]) die("out of memory");
        for (int k = 0; k < ncols[t]; k++) cols[t][k] = mpsr_take(res, t, k);
    }
    uint64_t *events = calloc((size_t)nloc + 1, 8), *v1 = calloc((size_t)nloc + 1, 8);
    uint64_t *v2 = calloc((size_t)nloc + 1, 8), *v3 = calloc((size_t)nloc + 1, 8);
    int64_t *first = calloc((size_t)nloc + 1, 8), *last = calloc((size_t)nloc + 1, 8);
    uint8_t *trunc = calloc((size_t)nloc + 1, 1), *overrun = calloc((size_t)nloc + 1, 1);
    if (!events || !v1 || !v2 || !v3 || !first || !last || !trunc || !overrun)
        die("out of memory");
    mpsr_locations(res, nloc, events, first, last, trunc);
    mpsr_damage(res, nloc, v1, v2, v3, overrun);
    /* no time beyond the trace's length, where the definitions give one (the reader's
     * rounding: within a nanosecond and a part in 10^12) */
    double end = (double)cfg.trace_length * (1e9 / (double)cfg.timer_resolution);
    end += end * 1e-12 + 1;
    for (int32_t i = 0; ok && i < nloc; i++) {
        EXPECT(0 <= first[i] && first[i] <= last[i], "location %d: first %" PRId64
               " last %" PRId64, i, first[i], last[i]);
        EXPECT(!cfg.trace_length || (double)last[i] <= end, "location %d: last %" PRId64
               " beyond the trace's end %.0f", i, last[i], end);
    }
    g_first = first;
    g_last = last;
    if (ok) check_tables(cols, rows);
    for (int t = 0; t < T_NTABLES; t++) {
        for (int k = 0; k < ncols[t]; k++) mpsr_free_buffer(cols[t][k]);
        free(cols[t]);
    }
    mpsr_free_buffer(mpsr_take_link(res));
    (void)mpsr_clock_offsets(res);
    free(events); free(v1); free(v2); free(v3); free(first); free(last); free(trunc);
    free(overrun);
    mpsr_release(res);
}

static uint64_t word(const uint8_t *data, size_t size, size_t i, uint64_t otherwise)
{
    uint64_t v = otherwise;
    if ((i + 1) * 8 <= size) memcpy(&v, data + i * 8, 8);
    return v;
}

/* damage a file as byte 0 says (s < 2F), read, and put the file back; 0 if s >= 2F */
static int damage_and_read(const mpsr_config *cfg, const uint8_t *data, size_t size)
{
    unsigned nf = (unsigned)g_ndamage, sel = data[0] % (2 * nf + 1);
    if (sel == 2 * nf) return 0;
    data++;
    size--;
    const file_t *f = g_damage[sel % nf];
    uint8_t *content;
    size_t len;
    if (sel < nf) {
        content = malloc(size ? size : 1);
        if (!content) die("out of memory");
        memcpy(content, data, size);
        len = size;
    } else {
        uint32_t off = 0;
        if (size >= 4) memcpy(&off, data, 4);
        const uint8_t *patch = size >= 4 ? data + 4 : data + size;
        size_t plen = size >= 4 ? size - 4 : 0;
        size_t at = off % (f->size + 1);
        len = plen ? (at + plen > f->size ? at + plen : f->size) : at;
        content = malloc(len ? len : 1);
        if (!content) die("out of memory");
        memcpy(content, f->data, at < f->size ? at : f->size);
        if (plen) {
            memcpy(content + at, patch, plen);
            if (at + plen < f->size) memcpy(content + at + plen, f->data + at + plen,
                                            f->size - at - plen);
        }
    }
    spill(f->rel, content, len);
    pad_if_cut(f, content, len);
    free(content);
    read_archive(cfg);
    spill(f->rel, f->data, f->size);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || g_ndamage == 0) return 0;
    if (damage_and_read(&g_cfg, data, size)) return 0;
    /* the definitions' fields Python passes on, then maybe a file damaged too */
    data++;
    size--;
    mpsr_config cfg = g_cfg;
    uint64_t *saved = malloc(((size_t)cfg.nloc + 1) * 8);
    if (!saved) die("out of memory");
    memcpy(saved, g_claimed, (size_t)cfg.nloc * 8);
    cfg.timer_resolution = word(data, size, 0, cfg.timer_resolution);
    if (!cfg.timer_resolution) cfg.timer_resolution = 1000000000u;
    cfg.global_offset = word(data, size, 1, cfg.global_offset);
    cfg.trace_length = word(data, size, 2, cfg.trace_length);
    cfg.max_kept_events = word(data, size, 3, cfg.max_kept_events);
    cfg.subset = word(data, size, 4, cfg.subset) != 0; /* as the Dask engine reads */
    size_t w = 5;
    for (int32_t i = 0; i < cfg.nloc; i++, w++) g_claimed[i] = word(data, size, w, g_claimed[i]);
    uint32_t *attrs[] = {&cfg.attr_callsite, &cfg.attr_in, &cfg.attr_out, &cfg.attr_callpath,
                         &cfg.attr_calls, &cfg.attr_prior, &cfg.attr_run_delay};
    size_t na = sizeof attrs / sizeof *attrs, used = w * 8 + na * 4;
    for (size_t a = 0; a < na; a++)
        if (w * 8 + (a + 1) * 4 <= size) memcpy(attrs[a], data + w * 8 + a * 4, 4);
    if (size <= used || !damage_and_read(&cfg, data + used, size - used)) read_archive(&cfg);
    memcpy(g_claimed, saved, (size_t)cfg.nloc * 8);
    free(saved);
    return 0;
}
