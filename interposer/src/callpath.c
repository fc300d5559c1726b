/* callpath.c — call paths: up to MPISCOPE_CALLPATH_DEPTH frames per MPI call, written as
 * OTF2 CallingContext definitions (docs: interposer/README.md, "Call paths").
 *
 * Walking the stack on every call is what makes mpiP cost ~1 µs per call. Here a call
 * looks up (return address, stack pointer) in a small per-thread cache whose entry also
 * holds, for frames 2..N, the stack slot (relative to that stack pointer) where the
 * frame's return address lives and the value it had: a hit is checked by loading those
 * N-1 words and comparing them, exactly, with no unwinding. Loops call the same site from
 * the same stack, so nearly every call hits. A miss unwinds once (libgcc's
 * _Unwind_Backtrace, present wherever the program was linked by GCC), learns the slots,
 * and interns the frames in the process's path table (under the shared lock, as a new
 * call site is). Frames of the MPI library and of mpiscope itself are left out (a Fortran
 * binding layer calling the C symbol); the path ends at the C library (start-up code below
 * main, a thread's start routine).
 */
#define _GNU_SOURCE
#include "runtime.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unwind.h>

uint32_t *mps_cp_map;
uint32_t mps_cp_nmap;

/* ------------------------------------------------------------ path table */

static struct {
    uintptr_t *frames;   /* every path's frames, innermost first, back to back */
    uint32_t *start;     /* by id: its first frame in `frames` */
    uint8_t *len;        /* by id: how many */
    uint32_t n, cap;     /* paths */
    size_t nframes, frames_cap;
    uint32_t *slot;      /* open addressing: id + 1, 0 empty */
    uint32_t nslot;      /* power of two, at least twice n */
} paths;

static uint64_t hash_frames(const uintptr_t *f, unsigned n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    for (unsigned i = 0; i < n; i++) h = (h ^ f[i]) * 0x100000001b3ull;
    return h ^ h >> 29;
}

static int same(uint32_t id, const uintptr_t *f, unsigned n)
{
    return paths.len[id] == n &&
           memcmp(paths.frames + paths.start[id], f, n * sizeof *f) == 0;
}

static int grow_slots(void)
{
    uint32_t ns = paths.nslot ? paths.nslot * 2 : 1024;
    uint32_t *s = calloc(ns, sizeof *s);
    if (!s) return -1;
    for (uint32_t id = 0; id < paths.n; id++) {
        uint64_t h = hash_frames(paths.frames + paths.start[id], paths.len[id]);
        uint32_t i = (uint32_t)h & (ns - 1);
        while (s[i]) i = (i + 1) & (ns - 1);
        s[i] = id + 1;
    }
    free(paths.slot);
    paths.slot = s;
    paths.nslot = ns;
    return 0;
}

/* the id of the path f[0..n), added where new; UINT32_MAX without memory */
static uint32_t intern(const uintptr_t *f, unsigned n)
{
    if (paths.nslot == 0 && grow_slots() != 0) return UINT32_MAX;
    uint64_t h = hash_frames(f, n);
    uint32_t i = (uint32_t)h & (paths.nslot - 1);
    for (; paths.slot[i]; i = (i + 1) & (paths.nslot - 1))
        if (same(paths.slot[i] - 1, f, n)) return paths.slot[i] - 1;
    if (paths.n == paths.cap) {
        uint32_t cap = paths.cap ? paths.cap * 2 : 256;
        uint32_t *st = realloc(paths.start, cap * sizeof *st);
        if (!st) return UINT32_MAX;
        paths.start = st;
        uint8_t *ln = realloc(paths.len, cap);
        if (!ln) return UINT32_MAX;
        paths.len = ln;
        paths.cap = cap;
    }
    if (paths.nframes + n > paths.frames_cap) {
        size_t cap = (paths.frames_cap + n) * 2;
        uintptr_t *fr = realloc(paths.frames, cap * sizeof *fr);
        if (!fr) return UINT32_MAX;
        paths.frames = fr;
        paths.frames_cap = cap;
    }
    uint32_t id = paths.n++;
    paths.start[id] = (uint32_t)paths.nframes;
    paths.len[id] = (uint8_t)n;
    memcpy(paths.frames + paths.nframes, f, n * sizeof *f);
    paths.nframes += n;
    paths.slot[i] = id + 1;
    if (2 * paths.n > paths.nslot) grow_slots(); /* a failure only makes probing longer */
    return id;
}

uint32_t mps_callpath_intern(const uintptr_t *frames, unsigned n)
{
    return intern(frames, n);
}

/* ------------------------------------------------------------ the cache */

/* entries per thread, in sets of CP_WAYS: a direct-mapped cache let two call sites of one
 * loop whose (return address, stack pointer) fell on the same entry evict each other on
 * every call, so every call unwound and ran dladdr (a 2-10x slower traced job, in the
 * runs whose stack address made them collide) */
#define CP_SLOTS 256
#define CP_WAYS 4
#define CP_SET_BITS 6 /* CP_SLOTS / CP_WAYS sets */

typedef struct {
    uintptr_t ra, sp;
    uint32_t path, n; /* n: stack slots to verify */
    struct { intptr_t off; uintptr_t val; } s[]; /* callpath_depth - 1 of them */
} cp_entry;

static size_t entry_bytes(void)
{
    return sizeof(cp_entry) + (mps_cfg.callpath_depth - 1) * 2 * sizeof(uintptr_t);
}

/* the first entry of the set of (ra, sp) */
static inline unsigned char *set_of(unsigned char *cache, uintptr_t ra, uintptr_t sp)
{
    uint64_t k = (ra ^ sp * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
    return cache + (size_t)(k >> (64 - CP_SET_BITS)) * CP_WAYS * entry_bytes();
}

/* ------------------------------------------------------------ unwinding */

enum { OBJ_USER, OBJ_SKIP, OBJ_END }; /* a frame's object: keep, leave out, stop there */

static struct { const void *base; int kind; } objs[32];
static int nobjs;

/* mpiscope itself and the MPI libraries (libmpi*, which covers Open MPI's and MPICH's
 * Fortran layers: libmpi_mpifh, libmpi_usempif08, libmpifort, libmpich*) are left out;
 * the C library ends a path */
static int object_kind(uintptr_t ip)
{
    Dl_info info;
    if (!dladdr((void *)(ip - 1), &info) || !info.dli_fbase) return OBJ_USER;
    for (int i = 0; i < nobjs; i++)
        if (objs[i].base == info.dli_fbase) return objs[i].kind;
    Dl_info self;
    int kind = OBJ_USER;
    const char *p = info.dli_fname ? info.dli_fname : "";
    const char *b = strrchr(p, '/');
    b = b ? b + 1 : p;
    if (dladdr((void *)&object_kind, &self) && self.dli_fbase == info.dli_fbase)
        kind = OBJ_SKIP;
    else if (strncmp(b, "libmpi", 6) == 0 || strncmp(b, "libpmpi", 7) == 0)
        kind = OBJ_SKIP;
    else if (strncmp(b, "libc.so", 7) == 0 || strncmp(b, "libc-", 5) == 0)
        kind = OBJ_END;
    if (nobjs < (int)(sizeof objs / sizeof objs[0])) {
        objs[nobjs].base = info.dli_fbase;
        objs[nobjs++].kind = kind;
    }
    return kind;
}

#define WALK_MAX (MPS_CALLPATH_MAX + 32)

struct walk {
    uintptr_t ip[WALK_MAX], cfa[WALK_MAX];
    int n;
};

static _Unwind_Reason_Code walk_frame(struct _Unwind_Context *ctx, void *arg)
{
    struct walk *w = arg;
    if (w->n == WALK_MAX) return _URC_END_OF_STACK;
    w->ip[w->n] = (uintptr_t)_Unwind_GetIP(ctx);
    w->cfa[w->n] = (uintptr_t)_Unwind_GetCFA(ctx);
    w->n++;
    return _URC_NO_REASON;
}

/* Where frame k's return address (w->ip[k]) is stored: just below the CFA of the frame it
 * returns from, on x86 (the call pushed it there). libgcc hands each frame's context to
 * the callback before stepping past it: its CFA is then the callee's, so cfa[k] is that
 * one. Checked by loading it: elsewhere (a return address in a register) 0, and the entry
 * is not cached. */
static uintptr_t slot_of(const struct walk *w, int k)
{
#if defined(__x86_64__) || defined(__i386__)
    uintptr_t s = w->cfa[k] - sizeof(uintptr_t);
    if (*(const uintptr_t *)s == w->ip[k]) return s;
#else
    (void)w; (void)k;
#endif
    return 0;
}

__attribute__((noinline, cold)) static uint32_t miss(struct mps_recorder *r, void *ra,
                                                      uintptr_t sp)
{
    const unsigned depth = mps_cfg.callpath_depth;
    if (!r->cp_cache) {
        r->cp_cache = calloc(CP_SLOTS, entry_bytes());
        if (!r->cp_cache) return UINT32_MAX;
    }
    struct walk w;
    w.n = 0;
    _Unwind_Backtrace(walk_frame, &w);
    uintptr_t frames[MPS_CALLPATH_MAX], slots[MPS_CALLPATH_MAX];
    unsigned n = 0;
    int k = 1;
    while (k < w.n && w.ip[k] != (uintptr_t)ra) k++;
    LOCK(); /* dladdr's cache and the path table are the process's */
    if (k >= w.n) { /* not on the stack we can walk: the call site alone */
        slots[n] = 0;
        frames[n++] = (uintptr_t)ra;
    } else {
        for (; k < w.n && n < depth; k++) {
            int kind = object_kind(w.ip[k]);
            if (kind == OBJ_END) break;
            if (kind == OBJ_SKIP) continue;
            slots[n] = slot_of(&w, k);
            frames[n++] = w.ip[k];
        }
        if (!n) { slots[n] = 0; frames[n++] = (uintptr_t)ra; } /* only MPI's frames */
    }
    uint32_t id = intern(frames, n);
    UNLOCK();
    /* The entry is checked on every kept frame but the call site itself (the key): a
     * path cut short of `depth` by the end of the walk is complete, its outer frames
     * (start-up code) never change; frames left out between kept ones are covered by the
     * kept frames' values. */
    unsigned first = frames[0] == (uintptr_t)ra ? 1 : 0;
    int cacheable = id != UINT32_MAX;
    for (unsigned i = first; cacheable && i < n; i++)
        if (!slots[i]) cacheable = 0;
    if (!cacheable) return id;
    /* the newest entry first in its set, the others moved down one (the oldest goes) */
    unsigned char *set = set_of(r->cp_cache, (uintptr_t)ra, sp);
    memmove(set + entry_bytes(), set, (CP_WAYS - 1) * entry_bytes());
    cp_entry *e = (cp_entry *)set;
    unsigned nv = 0;
    for (unsigned i = first; i < n; i++) {
        e->s[nv].off = (intptr_t)(slots[i] - sp);
        e->s[nv++].val = frames[i];
    }
    e->ra = (uintptr_t)ra;
    e->sp = sp;
    e->path = id;
    e->n = nv;
    return id;
}

uint32_t mps_callpath_id(struct mps_recorder *r, void *ra, uintptr_t sp)
{
    unsigned char *c = r->cp_cache;
    if (__builtin_expect(c != NULL, 1)) {
        const unsigned char *set = set_of(c, (uintptr_t)ra, sp);
        for (unsigned w = 0; w < CP_WAYS; w++) {
            const cp_entry *e = (const cp_entry *)(set + w * entry_bytes());
            if (e->ra != (uintptr_t)ra || e->sp != sp) continue;
            uint32_t i = 0;
            while (i < e->n && *(const uintptr_t *)(sp + (uintptr_t)e->s[i].off) == e->s[i].val)
                i++;
            if (i == e->n) return e->path;
        }
    }
    return miss(r, ra, sp);
}

/* ------------------------------------------------------------ definitions */

/* This process's paths as text, for unification: its distinct frames, each resolved
 * once, "F<TAB>name<TAB>line<TAB>offset<TAB>build-id<TAB>function<TAB>object", then one
 * line "P<TAB>i i i" per path (indices of its frames, innermost first). */
static char *paths_blob(int *len_out)
{
    uint32_t nf = 0;
    uintptr_t *addr = malloc((paths.nframes ? paths.nframes : 1) * sizeof *addr);
    uint32_t *fidx = malloc((paths.nframes ? paths.nframes : 1) * sizeof *fidx);
    if (!addr || !fidx) { free(addr); free(fidx); *len_out = 0; return NULL; }
    for (size_t i = 0; i < paths.nframes; i++) { /* distinct frames: quadratic, but few */
        uint32_t j = 0;
        while (j < nf && addr[j] != paths.frames[i]) j++;
        if (j == nf) addr[nf++] = paths.frames[i];
        fidx[i] = j;
    }
    mps_location *loc = calloc(nf ? nf : 1, sizeof *loc);
    if (loc) mps_callsite_resolve((void *const *)addr, nf, loc);
    size_t cap = 256, len = 0;
    char *b = malloc(cap);
    for (uint32_t i = 0; b && loc && i < nf; i++) {
        const char *f = loc[i].file ? loc[i].file : "?";
        const char *o = loc[i].object ? loc[i].object : "";
        const char *fn = loc[i].func ? loc[i].func : f;
        size_t need = strlen(f) + strlen(o) + strlen(fn) + 160;
        if (len + need >= cap) { cap = (cap + need) * 2; b = realloc(b, cap); if (!b) break; }
        len += (size_t)snprintf(b + len, cap - len, "F\t%s\t%u\t%llx\t%s\t%s\t%s\n", f,
                                loc[i].line, (unsigned long long)loc[i].offset,
                                loc[i].build_id, fn, o);
    }
    for (uint32_t i = 0; loc && i < nf; i++) { free(loc[i].file); free(loc[i].object); free(loc[i].func); }
    free(loc);
    for (uint32_t id = 0; b && id < paths.n; id++) {
        size_t need = 8 + (size_t)paths.len[id] * 12;
        if (len + need >= cap) { cap = (cap + need) * 2; b = realloc(b, cap); if (!b) break; }
        len += (size_t)snprintf(b + len, cap - len, "P");
        for (unsigned k = 0; k < paths.len[id]; k++)
            len += (size_t)snprintf(b + len, cap - len, "%c%u", k ? ' ' : '\t',
                                    fidx[paths.start[id] + k]);
        b[len++] = '\n';
    }
    free(addr);
    free(fidx);
    *len_out = b ? (int)len : 0;
    return b;
}

/* Rank 0 (or a salvaging rank alone): the ranks' blobs → global definitions. Frames are
 * unified by name (as call sites are), each a SourceCodeLocation (refs from scl_base on,
 * their objects added to MPISCOPE::CALLSITE_OBJECTS) in a Region of its function (refs
 * after the MPI functions'); a context per (frame, parent context). ids[k]: the k-th
 * path of all blobs → its innermost context. */
static void write_contexts(OTF2_Archive *ar, OTF2_GlobalDefWriter *gw, char *all,
                           const int *lens, const int *displs, int nblobs, uint32_t scl_base,
                           uint32_t *ids)
{
    OTF2_GlobalDefWriter_WriteAttribute(gw, MPS_ATTR_CALLPATH, mps_gstr(gw, "mpiscope:callpath"),
                                        mps_gstr(gw, "call path of the MPI call"),
                                        OTF2_TYPE_CALLING_CONTEXT);
    OTF2_GlobalDefWriter_WriteParadigm(gw, OTF2_PARADIGM_USER, mps_gstr(gw, "USER"),
                                       OTF2_PARADIGM_CLASS_PROCESS); /* the frames' regions */
    size_t total = 0;
    for (int r = 0; r < nblobs; r++) total += (size_t)lens[r];
    size_t maxl = total / 4 + 1; /* lines: each at least 4 bytes */
    char **fkey = malloc(maxl * sizeof *fkey);     /* global frame: name<TAB>line */
    char **rname = malloc(maxl * sizeof *rname);   /* global region: function */
    uint32_t *fregion = malloc(maxl * sizeof *fregion);
    const char **objects = malloc(maxl * sizeof *objects);
    const char **bids = malloc(maxl * sizeof *bids);
    uint64_t *offs = malloc(maxl * sizeof *offs);
    uint32_t *local = malloc(maxl * sizeof *local); /* a blob's frame index → global */
    /* contexts: (frame, parent) → ref, linear: paths are few (one per distinct stack) */
    uint32_t *cframe = malloc(maxl * sizeof *cframe), *cparent = malloc(maxl * sizeof *cparent);
    if (!fkey || !rname || !fregion || !objects || !bids || !offs || !local || !cframe ||
        !cparent)
        goto out;
    uint32_t nframes = 0, nregions = 0, nctx = 0, k = 0;
    for (int r = 0; r < nblobs; r++) {
        char *p = all + displs[r], *end = p + lens[r];
        uint32_t nlocal = 0;
        while (p < end) {
            char *nl = memchr(p, '\n', (size_t)(end - p));
            if (!nl) break;
            *nl = 0;
            if (p[0] == 'F') {
                char *fld[7] = {0};
                char *q = p;
                for (int i = 0; i < 7 && q; i++) {
                    fld[i] = q;
                    q = strchr(q, '\t');
                    if (q && i < 6) *q++ = 0;
                    else q = NULL;
                }
                if (!fld[6]) { p = nl + 1; continue; }
                char key[4096];
                snprintf(key, sizeof key, "%s\t%s", fld[1], fld[2]);
                uint32_t g = 0;
                while (g < nframes && strcmp(fkey[g], key) != 0) g++;
                if (g == nframes) {
                    fkey[g] = strdup(key);
                    uint32_t rg = 0;
                    while (rg < nregions && strcmp(rname[rg], fld[5]) != 0) rg++;
                    if (rg == nregions) {
                        rname[nregions++] = fld[5];
                        OTF2_StringRef rs = mps_gstr(gw, fld[5]);
                        OTF2_GlobalDefWriter_WriteRegion(
                            gw, (OTF2_RegionRef)(MPS_FN_COUNT + rg), rs, rs, mps_gstr(gw, ""),
                            OTF2_REGION_ROLE_FUNCTION, OTF2_PARADIGM_USER,
                            OTF2_REGION_FLAG_NONE, mps_gstr(gw, ""), 0, 0);
                    }
                    fregion[g] = rg;
                    objects[g] = fld[6];
                    bids[g] = fld[4];
                    offs[g] = strtoull(fld[3], NULL, 16);
                    OTF2_GlobalDefWriter_WriteSourceCodeLocation(
                        gw, scl_base + g, mps_gstr(gw, fld[1]),
                        (uint32_t)strtoul(fld[2], NULL, 10));
                    nframes++;
                }
                local[nlocal++] = g;
            } else if (p[0] == 'P') {
                uint32_t chain[MPS_CALLPATH_MAX];
                unsigned n = 0;
                for (char *q = p + 1; *q && n < MPS_CALLPATH_MAX;) {
                    char *e;
                    unsigned long v = strtoul(q, &e, 10);
                    if (e == q) break;
                    chain[n++] = v < nlocal ? local[v] : 0;
                    q = e;
                }
                uint32_t parent = OTF2_UNDEFINED_CALLING_CONTEXT;
                for (unsigned i = n; i-- > 0;) { /* outermost first: parents exist */
                    uint32_t c = 0;
                    while (c < nctx && !(cframe[c] == chain[i] && cparent[c] == parent)) c++;
                    if (c == nctx) {
                        cframe[c] = chain[i];
                        cparent[c] = parent;
                        nctx++;
                        OTF2_GlobalDefWriter_WriteCallingContext(
                            gw, c, (OTF2_RegionRef)(MPS_FN_COUNT + fregion[chain[i]]),
                            scl_base + chain[i], parent);
                    }
                    parent = c;
                }
                ids[k++] = parent;
            }
            p = nl + 1;
        }
    }
    mps_add_callsite_objects(ar, scl_base, objects, bids, offs, nframes);
    for (uint32_t g = 0; g < nframes; g++) free(fkey[g]);
out:
    free(fkey); free(rname); free(fregion); free(objects); free(bids); free(offs);
    free(local); free(cframe); free(cparent);
}

void mps_unify_callpaths(OTF2_GlobalDefWriter *gw, uint32_t scl_base)
{
    if (mps_cfg.callpath_depth <= 1) return; /* depth 1: the trace of before, exactly */
    int len = 0;
    char *blob = paths_blob(&len);
    int *lens, *displs;
    char *all = mps_gather_blob(blob ? blob : "", len, &lens, &displs);
    free(blob);
    uint32_t *counts = NULL, *ids = NULL;
    int *idcounts = NULL, *iddispls = NULL;
    uint32_t n = paths.n;
    int *ns = mps_job.rank == 0 ? calloc((size_t)mps_job.size, sizeof *ns) : NULL;
    PMPI_Gather(&n, 1, MPI_UINT32_T, ns, 1, MPI_UINT32_T, 0, mps_job.icomm);
    if (mps_job.rank == 0) {
        idcounts = ns;
        iddispls = calloc((size_t)mps_job.size, sizeof *iddispls);
        int tot = 0;
        for (int r = 0; r < mps_job.size; r++) { iddispls[r] = tot; tot += idcounts[r]; }
        ids = calloc((size_t)(tot ? tot : 1), sizeof *ids);
        if (gw && all && ids)
            write_contexts(mps_out.archive, gw, all, lens, displs, mps_job.size, scl_base, ids);
    }
    mps_cp_map = calloc(n ? n : 1, sizeof *mps_cp_map);
    mps_cp_nmap = n;
    PMPI_Scatterv(ids, idcounts, iddispls, MPI_UINT32_T, mps_cp_map, (int)n, MPI_UINT32_T, 0,
                  mps_job.icomm);
    free(all); free(lens); free(displs); free(counts); free(ids); free(idcounts);
    free(iddispls);
}

void mps_single_rank_callpaths(OTF2_Archive *ar, OTF2_GlobalDefWriter *gw, uint32_t scl_base)
{
    if (mps_cfg.callpath_depth <= 1) return;
    int len = 0, zero = 0;
    char *blob = paths_blob(&len);
    uint32_t n = paths.n;
    mps_cp_map = calloc(n ? n : 1, sizeof *mps_cp_map);
    mps_cp_nmap = mps_cp_map ? n : 0;
    if (blob && mps_cp_map) write_contexts(ar, gw, blob, &len, &zero, 1, scl_base,
                                           mps_cp_map);
    free(blob);
}
