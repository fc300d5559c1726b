/* objects.c — the definitions behind RMA and MPI-IO records: windows, files, I/O handles
 * and the process groups PSCW synchronisation names.
 *
 * Events name these objects by sparse refs chosen while the job runs (no communication
 * but the window's own creation): a window's ref is chosen by its communicator's rank 0
 * and shared with the others (rma.c); a file, handle or group ref is this rank's own
 * (rank × MPS_OBJ_REF_SPAN + counter). At MPI_Finalize rank 0 gathers them, merges files
 * by path and groups by members, writes the global definitions with dense refs and every
 * rank maps its sparse refs onto them with OTF2 id maps, as for communicators. */
#include "runtime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define MPS_OBJ_REF_SPAN 65536u

struct obj {
    int32_t kind;
    uint32_t ref, x, y; /* window: x = comm; handle: x = file, y = comm */
    uint8_t mine;       /* this rank contributes the definition */
    int32_t n;          /* payload words: the name/path (NUL-padded) or a group's members */
    int32_t *w;
};

static struct {
    struct obj *o;
    uint32_t n, cap, counter;
} objs;

/* What the global definitions are written from (all ranks' at rank 0, or this rank's own
 * for a single-rank archive), and the (kind, sparse, dense) triples they produced. */
static int32_t *defs_words;
static int defs_nwords, defs_owned;
static uint32_t *pairs;
static int npairs;

#define OBJ_REC_WORDS(d) (5 + (d)[4])

uint32_t mps_obj_new_ref(void)
{
    return (uint32_t)mps_job.rank * MPS_OBJ_REF_SPAN + (objs.counter++ % MPS_OBJ_REF_SPAN);
}

static int32_t *serialize(const struct obj *o, int32_t *p)
{
    *p++ = o->kind;
    *p++ = (int32_t)o->ref;
    *p++ = (int32_t)o->x;
    *p++ = (int32_t)o->y;
    *p++ = o->n;
    memcpy(p, o->w, (size_t)o->n * sizeof *p);
    return p + o->n;
}

/* Payload bytes as words: a string is NUL-terminated and padded (len = strlen + 1). */
void mps_obj_add(int kind, uint32_t ref, uint32_t x, uint32_t y, const void *payload,
                 size_t bytes, int mine)
{
    if (objs.n == objs.cap) {
        uint32_t cap = objs.cap ? 2 * objs.cap : 16;
        struct obj *o = realloc(objs.o, cap * sizeof *o);
        if (!o) return;
        objs.o = o;
        objs.cap = cap;
    }
    struct obj *o = &objs.o[objs.n];
    o->n = (int32_t)((bytes + 3) / 4);
    o->w = calloc((size_t)(o->n ? o->n : 1), 4);
    if (!o->w) return;
    memcpy(o->w, payload, bytes);
    o->kind = kind;
    o->ref = ref;
    o->x = x;
    o->y = y;
    o->mine = (uint8_t)mine;
    objs.n++;
    if (mps_live_on()) { /* for mpiscope-recover: the definition as salvage() writes it */
        int32_t *w = malloc((size_t)(5 + o->n) * 4);
        if (w) {
            mps_live_record(MPS_LIVE_OBJECT, w, (size_t)(serialize(o, w) - w) * 4, NULL, 0);
            free(w);
        }
    }
}

/* This rank's ref for a file path or a group's members, made once per distinct one. */
uint32_t mps_obj_intern(int kind, const void *payload, size_t bytes)
{
    int32_t n = (int32_t)((bytes + 3) / 4);
    for (uint32_t i = 0; i < objs.n; i++) {
        const struct obj *o = &objs.o[i];
        if (o->kind == kind && o->mine && o->n == n && memcmp(o->w, payload, bytes) == 0 &&
            (bytes % 4 == 0 || ((const char *)o->w)[bytes] == 0))
            return o->ref;
    }
    uint32_t ref = mps_obj_new_ref();
    mps_obj_add(kind, ref, 0, 0, payload, bytes, 1);
    return ref;
}

/* The objects this rank defines (all it knows of, for a single-rank archive). */
static int32_t *serialize_all(int all, int *nwords)
{
    int len = 0;
    for (uint32_t i = 0; i < objs.n; i++)
        if (all || objs.o[i].mine) len += 5 + objs.o[i].n;
    int32_t *w = malloc((size_t)(len ? len : 1) * 4), *p = w;
    for (uint32_t i = 0; w && i < objs.n; i++)
        if (all || objs.o[i].mine) p = serialize(&objs.o[i], p);
    *nwords = w ? len : 0;
    return w;
}

static void use_words(int32_t *w, int n)
{
    if (defs_owned) free(defs_words);
    defs_words = w;
    defs_nwords = n;
    defs_owned = 1;
}

/* Collective on the private communicator: every rank's objects at rank 0. */
void mps_objects_gather(void)
{
    int n = 0, *lens = NULL, *displs = NULL;
    int32_t *mine = serialize_all(0, &n);
    char *all = mps_gather_blob((const char *)mine, n * 4, &lens, &displs);
    free(mine);
    if (mps_job.rank == 0)
        use_words((int32_t *)all, (displs[mps_job.size - 1] + lens[mps_job.size - 1]) / 4);
    else
        free(all);
    free(lens);
    free(displs);
}

/* A single-rank archive (salvage, mpiscope-recover): this rank's objects only. */
void mps_objects_use_own(void)
{
    int n = 0;
    int32_t *w = serialize_all(1, &n);
    use_words(w, n);
}

/* mpiscope-recover: the objects the crash-safe log recorded (OBJECT records' words, each
 * checked by liveread.c). -1 without memory. */
int mps_objects_restore(const int32_t *w, int nwords)
{
    for (int i = 0; i + 5 <= nwords; i += OBJ_REC_WORDS(w + i)) {
        const int32_t *d = w + i;
        uint32_t before = objs.n;
        mps_obj_add(d[0], (uint32_t)d[1], (uint32_t)d[2], (uint32_t)d[3], d + 5,
                    (size_t)d[4] * 4, 1);
        if (objs.n == before) return -1;
    }
    return 0;
}

/* Definitions that cannot be written whole (no memory): the archive must not pass for
 * complete (the trace's writer says so, mpiscope-recover keeps the log). */
static void lost(void)
{
    mps_out.failed = 1;
    if (!mps_out.werr) mps_out.werr = ENOMEM;
}

static int pairs_cap;

static void add_pair(int kind, uint32_t sparse, uint32_t dense)
{
    if (npairs == pairs_cap) {
        int cap = pairs_cap ? 2 * pairs_cap : 64;
        uint32_t *p = realloc(pairs, (size_t)cap * 3 * sizeof *p);
        if (!p) { lost(); return; }
        pairs = p;
        pairs_cap = cap;
    }
    uint32_t *p = pairs + 3 * npairs++;
    p[0] = (uint32_t)kind;
    p[1] = sparse;
    p[2] = dense;
}

/* {key, value, position} sorted by key then position: the first value given for a key in
 * O(log n), the one a linear search from the start finds */
typedef struct { uint32_t key, value, pos; } keyed;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static uint32_t keyed_find(const keyed *k, int n, uint32_t key, uint32_t undefined)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (k[mid].key < key) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && k[lo].key == key ? k[lo].value : undefined;
}

static uint32_t comm_dense(uint32_t sparse, const keyed *comms, int ncomms)
{
    if (sparse <= COMM_SELF_REF) return sparse;
    return keyed_find(comms, ncomms, sparse, OTF2_UNDEFINED_COMM);
}

/* FNV-1a of a record's kind and payload: files by path, groups by members */
static uint64_t payload_hash(const int32_t *d)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)(d + 5);
    for (size_t i = 0; i < (size_t)d[4] * 4; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h ^ (uint64_t)d[0] ^ (uint64_t)d[4] << 8;
}

/* Index of an earlier record of its kind with the same payload as record k (files by
 * path, groups by members), or -1 (then k is entered): a hash table of record indexes + 1,
 * cap a power of two above twice their number. */
static int same_payload(const int32_t *const *recs, int *table, uint32_t cap, int k)
{
    const int32_t *d = recs[k];
    uint32_t i = (uint32_t)payload_hash(d) & (cap - 1);
    for (; table[i]; i = (i + 1) & (cap - 1)) {
        const int32_t *e = recs[table[i] - 1];
        if (e[0] == d[0] && e[4] == d[4] && memcmp(e + 5, d + 5, (size_t)d[4] * 4) == 0)
            return table[i] - 1;
    }
    table[i] = k + 1;
    return -1;
}

/* The global definitions: IoParadigm "MPI-IO", files, groups, windows, handles (each
 * after what it names). Groups take refs after the communicators' (3 + ncomms on). */
void mps_objects_write_defs(OTF2_GlobalDefWriter *gw, const uint32_t *order, int ncomms)
{
    free(pairs);
    pairs = NULL;
    npairs = pairs_cap = 0;
    int nrecs = 0, io = 0, nfiles = 0;
    for (int i = 0; i + 5 <= defs_nwords; i += OBJ_REC_WORDS(defs_words + i)) nrecs++;
    uint32_t cap = 16;
    while (cap < 2 * (uint32_t)nrecs) cap *= 2;
    const int32_t **recs = malloc((size_t)(nrecs ? nrecs : 1) * sizeof *recs);
    uint32_t *dense = malloc((size_t)(nrecs ? nrecs : 1) * sizeof *dense);
    int *table = calloc(cap, sizeof *table);
    keyed *comms = malloc((size_t)(ncomms ? ncomms : 1) * sizeof *comms);
    keyed *files = malloc((size_t)(nrecs ? nrecs : 1) * sizeof *files);
    if (!recs || !dense || !table || !comms || !files) {
        lost();
        goto out;
    }
    for (int q = 0; q < ncomms; q++) comms[q] = (keyed){order[q], 2 + (uint32_t)q, (uint32_t)q};
    qsort(comms, (size_t)ncomms, sizeof *comms, cmp_keyed);
    for (int i = 0, k = 0; k < nrecs; i += OBJ_REC_WORDS(defs_words + i)) {
        recs[k++] = defs_words + i;
        io |= defs_words[i] == MPS_OBJ_FILE || defs_words[i] == MPS_OBJ_HANDLE;
    }
    if (io)
        OTF2_GlobalDefWriter_WriteIoParadigm(gw, 0, mps_gstr(gw, "MPI-IO"),
                                             mps_gstr(gw, "MPI-IO"),
                                             OTF2_IO_PARADIGM_CLASS_PARALLEL,
                                             OTF2_IO_PARADIGM_FLAG_NONE, 0, NULL, NULL, NULL);
    uint32_t next[MPS_OBJ_KINDS] = {0};
    next[MPS_OBJ_GROUP] = 3 + (uint32_t)ncomms;
    static const int kinds[] = {MPS_OBJ_FILE, MPS_OBJ_GROUP, MPS_OBJ_WIN, MPS_OBJ_HANDLE};
    char name[64];
    for (size_t ki = 0; ki < sizeof kinds / sizeof *kinds; ki++) {
        if (kinds[ki] == MPS_OBJ_HANDLE) /* every file is defined: their dense refs */
            qsort(files, (size_t)nfiles, sizeof *files, cmp_keyed);
        for (int k = 0; k < nrecs; k++) {
            const int32_t *d = recs[k];
            if (d[0] != kinds[ki]) continue;
            int prev = d[0] == MPS_OBJ_FILE || d[0] == MPS_OBJ_GROUP
                           ? same_payload(recs, table, cap, k) : -1;
            if (prev >= 0) {
                dense[k] = dense[prev];
            } else {
                dense[k] = next[d[0]]++;
                const char *s = (const char *)(d + 5);
                if (d[0] == MPS_OBJ_FILE) {
                    OTF2_GlobalDefWriter_WriteIoRegularFile(gw, dense[k], mps_gstr(gw, s), 0);
                } else if (d[0] == MPS_OBJ_GROUP) {
                    uint64_t *m = malloc((size_t)(d[4] ? d[4] : 1) * sizeof *m);
                    for (int j = 0; m && j < d[4]; j++) m[j] = (uint64_t)d[5 + j];
                    snprintf(name, sizeof name, "RMA group %u", dense[k]);
                    if (m)
                        OTF2_GlobalDefWriter_WriteGroup(gw, dense[k], mps_gstr(gw, name),
                                                        OTF2_GROUP_TYPE_COMM_GROUP,
                                                        OTF2_PARADIGM_MPI, OTF2_GROUP_FLAG_NONE,
                                                        (uint32_t)d[4], m);
                    else
                        lost();
                    free(m);
                } else if (d[0] == MPS_OBJ_WIN) {
                    OTF2_GlobalDefWriter_WriteRmaWin(gw, dense[k], mps_gstr(gw, s),
                                                     comm_dense((uint32_t)d[2], comms, ncomms),
                                                     OTF2_RMA_WIN_FLAG_CREATE_DESTROY_EVENTS);
                } else {
                    OTF2_GlobalDefWriter_WriteIoHandle(
                        gw, dense[k], mps_gstr(gw, s),
                        keyed_find(files, nfiles, (uint32_t)d[2], OTF2_UNDEFINED_IO_FILE), 0,
                        OTF2_IO_HANDLE_FLAG_NONE, comm_dense((uint32_t)d[3], comms, ncomms),
                        OTF2_UNDEFINED_IO_HANDLE);
                }
            }
            if (d[0] == MPS_OBJ_FILE) {
                files[nfiles] = (keyed){(uint32_t)d[1], dense[k], (uint32_t)nfiles};
                nfiles++;
            }
            add_pair(d[0], (uint32_t)d[1], dense[k]);
        }
    }
out:
    free(recs);
    free(dense);
    free(table);
    free(comms);
    free(files);
    if (defs_owned) free(defs_words);
    defs_words = NULL;
    defs_nwords = 0;
    defs_owned = 0;
}

/* Collective on the private communicator: rank 0's sparse → dense pairs to every rank. */
void mps_objects_share_pairs(void)
{
    PMPI_Bcast(&npairs, 1, MPI_INT, 0, mps_job.icomm);
    if (mps_job.rank != 0) {
        free(pairs);
        pairs = malloc((size_t)(npairs ? npairs : 1) * 3 * sizeof *pairs);
    }
    PMPI_Bcast(pairs, 3 * npairs, MPI_UINT32_T, 0, mps_job.icomm);
}

/* This rank's id maps for the events' window, file, handle and group refs. */
void mps_objects_write_maps(OTF2_DefWriter *dw)
{
    static const struct { int kind; OTF2_MappingType map; } maps[] = {
        {MPS_OBJ_WIN, OTF2_MAPPING_RMA_WIN}, {MPS_OBJ_FILE, OTF2_MAPPING_IO_FILE},
        {MPS_OBJ_HANDLE, OTF2_MAPPING_IO_HANDLE}, {MPS_OBJ_GROUP, OTF2_MAPPING_GROUP},
    };
    for (size_t m = 0; m < sizeof maps / sizeof *maps; m++) {
        int n = 0;
        for (int i = 0; i < npairs; i++) n += pairs[3 * i] == (uint32_t)maps[m].kind;
        if (!n) continue;
        OTF2_IdMap *im = OTF2_IdMap_Create(OTF2_ID_MAP_SPARSE, (uint64_t)n);
        for (int i = 0; im && i < npairs; i++)
            if (pairs[3 * i] == (uint32_t)maps[m].kind)
                OTF2_IdMap_AddIdPair(im, pairs[3 * i + 1], pairs[3 * i + 2]);
        if (im) {
            OTF2_DefWriter_WriteMappingTable(dw, maps[m].map, im);
            OTF2_IdMap_Free(im);
        }
    }
}
