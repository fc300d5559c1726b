/* mpiscope-symbolize ARCHIVE_DIR: name a trace's call sites again from the object+offset
 * each was recorded with (the anchor's MPISCOPE::CALLSITE_OBJECTS property), with the
 * debug files installed now (callsite.c; /usr/lib/debug and MPISCOPE_DEBUGINFO_PATH).
 * A call site whose new name is better (file:line over function+0xOFFSET over
 * object+0xOFFSET) gets it; the global definitions are copied record by record into
 * ARCHIVE_DIR/.symbolize/ with only those names changed (the same records, refs and
 * count, so the anchor and the events stay valid) and renamed over traces.def in one
 * step. Prints "improved N of M call sites". Exit status: 0, 1 on failure (the trace is
 * left as it was), 2 on bad usage. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <otf2/otf2.h>

#include "mpiscope.h"
#include "outdir.h"

enum kind { CLOCK, PARADIGM, STRING, ATTRIBUTE, TREENODE, LGROUP, LOCATION, REGION, GROUP, COMM,
            SCL, CCTX };

/* one global definition as read: its kind, up to 10 scalar fields, a string or members */
typedef struct {
    enum kind kind;
    uint64_t f[10];
    char *s;
    uint64_t *members;
} record;

typedef struct {
    record *r;
    size_t n, cap;
    int unknown; /* a kind this tool does not copy: refuse rather than drop it */
} defs;

static record *push(defs *d, enum kind k)
{
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 256;
        d->r = realloc(d->r, d->cap * sizeof *d->r);
        if (!d->r) abort();
    }
    record *r = &d->r[d->n++];
    memset(r, 0, sizeof *r);
    r->kind = k;
    return r;
}

#define F(...) do { uint64_t v_[] = {__VA_ARGS__}; memcpy(r->f, v_, sizeof v_); } while (0)

static OTF2_CallbackCode on_clock(void *u, uint64_t a, uint64_t b, uint64_t c, uint64_t e)
{ record *r = push(u, CLOCK); F(a, b, c, e); return OTF2_CALLBACK_SUCCESS; }
static OTF2_CallbackCode on_paradigm(void *u, OTF2_Paradigm p, OTF2_StringRef n,
                                     OTF2_ParadigmClass c)
{ record *r = push(u, PARADIGM); F(p, n, c); return OTF2_CALLBACK_SUCCESS; }
static OTF2_CallbackCode on_string(void *u, OTF2_StringRef self, const char *s)
{
    record *r = push(u, STRING);
    F(self);
    r->s = strdup(s ? s : "");
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode on_attribute(void *u, OTF2_AttributeRef self, OTF2_StringRef n,
                                      OTF2_StringRef d, OTF2_Type t)
{ record *r = push(u, ATTRIBUTE); F(self, n, d, t); return OTF2_CALLBACK_SUCCESS; }
static OTF2_CallbackCode on_treenode(void *u, OTF2_SystemTreeNodeRef self, OTF2_StringRef n,
                                     OTF2_StringRef c, OTF2_SystemTreeNodeRef p)
{ record *r = push(u, TREENODE); F(self, n, c, p); return OTF2_CALLBACK_SUCCESS; }
static OTF2_CallbackCode on_lgroup(void *u, OTF2_LocationGroupRef self, OTF2_StringRef n,
                                   OTF2_LocationGroupType t, OTF2_SystemTreeNodeRef p,
                                   OTF2_LocationGroupRef c)
{ record *r = push(u, LGROUP); F(self, n, t, p, c); return OTF2_CALLBACK_SUCCESS; }
static OTF2_CallbackCode on_location(void *u, OTF2_LocationRef self, OTF2_StringRef n,
                                     OTF2_LocationType t, uint64_t ev, OTF2_LocationGroupRef g)
{ record *r = push(u, LOCATION); F(self, n, t, ev, g); return OTF2_CALLBACK_SUCCESS; }
static OTF2_CallbackCode on_region(void *u, OTF2_RegionRef self, OTF2_StringRef n,
                                   OTF2_StringRef cn, OTF2_StringRef d, OTF2_RegionRole role,
                                   OTF2_Paradigm p, OTF2_RegionFlag fl, OTF2_StringRef file,
                                   uint32_t b, uint32_t e)
{ record *r = push(u, REGION); F(self, n, cn, d, role, p, fl, file, b, e); return OTF2_CALLBACK_SUCCESS; }
static OTF2_CallbackCode on_group(void *u, OTF2_GroupRef self, OTF2_StringRef n,
                                  OTF2_GroupType t, OTF2_Paradigm p, OTF2_GroupFlag fl,
                                  uint32_t nm, const uint64_t *m)
{
    record *r = push(u, GROUP);
    F(self, n, t, p, fl, nm);
    r->members = malloc((nm ? nm : 1) * sizeof *m);
    if (nm) memcpy(r->members, m, nm * sizeof *m);
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode on_comm(void *u, OTF2_CommRef self, OTF2_StringRef n, OTF2_GroupRef g,
                                 OTF2_CommRef p, OTF2_CommFlag fl)
{ record *r = push(u, COMM); F(self, n, g, p, fl); return OTF2_CALLBACK_SUCCESS; }
static OTF2_CallbackCode on_scl(void *u, OTF2_SourceCodeLocationRef self, OTF2_StringRef file,
                                uint32_t line)
{ record *r = push(u, SCL); F(self, file, line); return OTF2_CALLBACK_SUCCESS; }
static OTF2_CallbackCode on_cctx(void *u, OTF2_CallingContextRef self, OTF2_RegionRef reg,
                                 OTF2_SourceCodeLocationRef scl, OTF2_CallingContextRef parent)
{ record *r = push(u, CCTX); F(self, reg, scl, parent); return OTF2_CALLBACK_SUCCESS; }
static OTF2_CallbackCode on_unknown(void *u)
{ ((defs *)u)->unknown = 1; return OTF2_CALLBACK_SUCCESS; }

static int read_defs(OTF2_Reader *rd, defs *d)
{
    OTF2_GlobalDefReader *gr = OTF2_Reader_GetGlobalDefReader(rd);
    OTF2_GlobalDefReaderCallbacks *cb = OTF2_GlobalDefReaderCallbacks_New();
    if (!gr || !cb) return -1;
    OTF2_GlobalDefReaderCallbacks_SetUnknownCallback(cb, on_unknown);
    OTF2_GlobalDefReaderCallbacks_SetClockPropertiesCallback(cb, on_clock);
    OTF2_GlobalDefReaderCallbacks_SetParadigmCallback(cb, on_paradigm);
    OTF2_GlobalDefReaderCallbacks_SetStringCallback(cb, on_string);
    OTF2_GlobalDefReaderCallbacks_SetAttributeCallback(cb, on_attribute);
    OTF2_GlobalDefReaderCallbacks_SetSystemTreeNodeCallback(cb, on_treenode);
    OTF2_GlobalDefReaderCallbacks_SetLocationGroupCallback(cb, on_lgroup);
    OTF2_GlobalDefReaderCallbacks_SetLocationCallback(cb, on_location);
    OTF2_GlobalDefReaderCallbacks_SetRegionCallback(cb, on_region);
    OTF2_GlobalDefReaderCallbacks_SetGroupCallback(cb, on_group);
    OTF2_GlobalDefReaderCallbacks_SetCommCallback(cb, on_comm);
    OTF2_GlobalDefReaderCallbacks_SetSourceCodeLocationCallback(cb, on_scl);
    OTF2_GlobalDefReaderCallbacks_SetCallingContextCallback(cb, on_cctx); /* call paths */
    OTF2_Reader_RegisterGlobalDefCallbacks(rd, gr, cb, d);
    OTF2_GlobalDefReaderCallbacks_Delete(cb);
    uint64_t n = 0;
    return OTF2_Reader_ReadAllGlobalDefinitions(rd, gr, &n) == OTF2_SUCCESS ? 0 : -1;
}

static void write_defs(OTF2_GlobalDefWriter *w, const defs *d)
{
    for (size_t i = 0; i < d->n; i++) {
        const record *r = &d->r[i];
        const uint64_t *f = r->f;
        switch (r->kind) {
        case CLOCK: OTF2_GlobalDefWriter_WriteClockProperties(w, f[0], f[1], f[2], f[3]); break;
        case PARADIGM:
            OTF2_GlobalDefWriter_WriteParadigm(w, (OTF2_Paradigm)f[0], (OTF2_StringRef)f[1],
                                               (OTF2_ParadigmClass)f[2]);
            break;
        case STRING: OTF2_GlobalDefWriter_WriteString(w, (OTF2_StringRef)f[0], r->s); break;
        case ATTRIBUTE:
            OTF2_GlobalDefWriter_WriteAttribute(w, (OTF2_AttributeRef)f[0], (OTF2_StringRef)f[1],
                                                (OTF2_StringRef)f[2], (OTF2_Type)f[3]);
            break;
        case TREENODE:
            OTF2_GlobalDefWriter_WriteSystemTreeNode(w, (uint32_t)f[0], (OTF2_StringRef)f[1],
                                                     (OTF2_StringRef)f[2], (uint32_t)f[3]);
            break;
        case LGROUP:
            OTF2_GlobalDefWriter_WriteLocationGroup(w, (uint32_t)f[0], (OTF2_StringRef)f[1],
                                                    (OTF2_LocationGroupType)f[2],
                                                    (uint32_t)f[3], (uint32_t)f[4]);
            break;
        case LOCATION:
            OTF2_GlobalDefWriter_WriteLocation(w, f[0], (OTF2_StringRef)f[1],
                                               (OTF2_LocationType)f[2], f[3], (uint32_t)f[4]);
            break;
        case REGION:
            OTF2_GlobalDefWriter_WriteRegion(w, (uint32_t)f[0], (OTF2_StringRef)f[1],
                                             (OTF2_StringRef)f[2], (OTF2_StringRef)f[3],
                                             (OTF2_RegionRole)f[4], (OTF2_Paradigm)f[5],
                                             (OTF2_RegionFlag)f[6], (OTF2_StringRef)f[7],
                                             (uint32_t)f[8], (uint32_t)f[9]);
            break;
        case GROUP:
            OTF2_GlobalDefWriter_WriteGroup(w, (uint32_t)f[0], (OTF2_StringRef)f[1],
                                            (OTF2_GroupType)f[2], (OTF2_Paradigm)f[3],
                                            (OTF2_GroupFlag)f[4], (uint32_t)f[5], r->members);
            break;
        case COMM:
            OTF2_GlobalDefWriter_WriteComm(w, (uint32_t)f[0], (OTF2_StringRef)f[1],
                                           (uint32_t)f[2], (uint32_t)f[3], (OTF2_CommFlag)f[4]);
            break;
        case SCL:
            OTF2_GlobalDefWriter_WriteSourceCodeLocation(w, (uint32_t)f[0], (OTF2_StringRef)f[1],
                                                         (uint32_t)f[2]);
            break;
        case CCTX:
            OTF2_GlobalDefWriter_WriteCallingContext(w, (uint32_t)f[0], (uint32_t)f[1],
                                                     (uint32_t)f[2], (uint32_t)f[3]);
            break;
        }
    }
}

/* how much a name says: 2 file:line, 1 function+0xOFFSET, 0 object+0xOFFSET */
static int quality(const char *name, uint32_t line, const char *object)
{
    if (line > 0) return 2;
    const char *base = object ? strrchr(object, '/') : NULL;
    base = base ? base + 1 : object;
    size_t n = base ? strlen(base) : 0;
    if (n && strncmp(name, base, n) == 0 && strncmp(name + n, "+0x", 3) == 0) return 0;
    return 1;
}

static record *find(defs *d, enum kind k, uint64_t ref)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->r[i].kind == k && d->r[i].f[0] == ref) return &d->r[i];
    return NULL;
}

/* better names for the call sites listed in `objects` (the property's value); returns
 * how many changed, *total how many were listed; warns once per object rebuilt since */
static int rename_sites(defs *d, char *objects, int *total)
{
    int improved = 0;
    *total = 0;
    const char *warned[64]; /* objects found rebuilt: one warning each */
    int nwarned = 0;
    for (char *line = strtok(objects, "\n"); line; line = strtok(NULL, "\n")) {
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        char *t3 = t2 ? strchr(t2 + 1, '\t') : NULL;
        if (!t3) continue;
        *t3 = 0;
        uint64_t ref = strtoull(line, NULL, 10), offset = strtoull(t1 + 1, NULL, 16);
        const char *build_id = strcmp(t2 + 1, "-") == 0 ? "" : t2 + 1, *path = t3 + 1;
        record *scl = find(d, SCL, ref);
        record *str = scl ? find(d, STRING, scl->f[1]) : NULL;
        if (!str) continue;
        (*total)++;
        mps_location loc = {0};
        int got = mps_callsite_resolve_file(path, build_id, offset, &loc);
        int seen = 0;
        for (int w = 0; w < nwarned && !seen; w++) seen = strcmp(warned[w], path) == 0;
        if (got < 0 && !seen) {
            fprintf(stderr, "mpiscope-symbolize: warning: %s was rebuilt since the trace was "
                    "taken (its build-id differs): its call sites keep their names\n", path);
            if (nwarned < 64) warned[nwarned++] = path;
        }
        if (got <= 0) continue;
        if (quality(loc.file, loc.line, path) > quality(str->s, (uint32_t)scl->f[2], path)) {
            free(str->s);
            str->s = loc.file;
            scl->f[2] = loc.line;
            improved++;
        } else {
            free(loc.file);
        }
    }
    return improved;
}

static OTF2_FlushType pre_flush(void *u, OTF2_FileType ft, OTF2_LocationRef l, void *c, bool fin)
{
    (void)u; (void)ft; (void)l; (void)c; (void)fin;
    return OTF2_FLUSH;
}
static const OTF2_FlushCallbacks flush_callbacks = {.otf2_pre_flush = pre_flush};

/* write d's records as traces.def of a new archive in tmp */
static int write_archive(const char *tmp, const defs *d)
{
    OTF2_Archive *ar = OTF2_Archive_Open(tmp, "traces", OTF2_FILEMODE_WRITE, 1024 * 1024,
                                         4 * 1024 * 1024, OTF2_SUBSTRATE_POSIX,
                                         OTF2_COMPRESSION_NONE);
    if (!ar) return -1;
    OTF2_Archive_SetFlushCallbacks(ar, &flush_callbacks, NULL);
    OTF2_Archive_SetSerialCollectiveCallbacks(ar);
    OTF2_GlobalDefWriter *w = OTF2_Archive_GetGlobalDefWriter(ar);
    if (w) write_defs(w, d);
    return OTF2_Archive_Close(ar) == OTF2_SUCCESS && w ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mpiscope-symbolize ARCHIVE_DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    char anchor[PATH_MAX], tmp[PATH_MAX], from[PATH_MAX + 16], to[PATH_MAX + 16];
    snprintf(anchor, sizeof anchor, "%s/traces.otf2", dir);
    snprintf(tmp, sizeof tmp, "%s/.symbolize", dir);
    OTF2_Reader *rd = OTF2_Reader_Open(anchor);
    if (!rd) {
        fprintf(stderr, "mpiscope-symbolize: %s: not an OTF2 archive\n", anchor);
        return 1;
    }
    OTF2_Reader_SetSerialCollectiveCallbacks(rd);
    char *objects = NULL;
    if (OTF2_Reader_GetProperty(rd, "MPISCOPE::CALLSITE_OBJECTS", &objects) != OTF2_SUCCESS) {
        OTF2_Reader_Close(rd);
        fprintf(stderr, "mpiscope-symbolize: %s: no call-site objects recorded (traced by an "
                "older mpiscope)\n", anchor);
        return 1;
    }
    defs d = {0};
    int bad = read_defs(rd, &d);
    OTF2_Reader_Close(rd);
    if (bad || d.unknown) {
        fprintf(stderr, "mpiscope-symbolize: %s: definitions this tool cannot copy\n", anchor);
        return 1;
    }
    int total = 0, improved = rename_sites(&d, objects, &total);
    free(objects);
    int status = 0;
    if (improved) {
        mps_remove_tree(tmp); /* an earlier attempt killed half-way */
        snprintf(from, sizeof from, "%s/traces.def", tmp);
        snprintf(to, sizeof to, "%s/traces.def", dir);
        if (write_archive(tmp, &d) != 0 || rename(from, to) != 0) {
            fprintf(stderr, "mpiscope-symbolize: cannot rewrite %s: %s\n", to,
                    errno ? strerror(errno) : "OTF2 write failed");
            status = 1;
        }
        mps_remove_tree(tmp);
    }
    if (!status) printf("improved %d of %d call sites\n", improved, total);
    for (size_t i = 0; i < d.n; i++) { free(d.r[i].s); free(d.r[i].members); }
    free(d.r);
    return status;
}
