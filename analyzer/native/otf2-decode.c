/* otf2-decode: the reference for bench/reader — libotf2 decoding every event of every
 * location with no-op callbacks (the same event types the mpiscope reader handles),
 * one location after the other on one core. Prints "<events> <seconds>".
 *
 * --write BYTES: the floor of any reader that decodes into columns. Every callback also
 * appends one row of BYTES bytes (the event's timestamp, location, fields and count, as
 * 8-byte stores, the last column holding the BYTES % 8 rest) to growable columns in fresh
 * memory, with the reader's own column code (columns.h): realloc'd blocks sized from the
 * definitions' event counts and doubled when full, pages populated in batches with
 * MADV_POPULATE_WRITE. No lookups, no matching. The columns stay allocated until the time
 * is taken. Prints "<events> <seconds> <bytes written> <user s> <sys s>", the CPU times
 * from getrusage at that point (the process's own, before its exit unmaps the columns). */
#define _GNU_SOURCE /* MADV_POPULATE_WRITE */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <otf2/otf2.h>

#include "columns.h"

/* the callbacks ignore their arguments by design */
#pragma GCC diagnostic ignored "-Wunused-parameter"

static uint64_t g_count;

/* ------------------------------------------------ --write: columns in fresh memory */
#define MAX_COLS 64 /* BYTES <= 8 * (MAX_COLS - 1) + 7 */

/* the columns (columns.h, as the reader's tables): nwide of 8 bytes, then one of rest */
static struct {
    table_t t;
    int nwide;
    uint32_t rest; /* bytes of the last, narrow column (0: none) */
    int failed;
} g_out;

/* one row: BYTES bytes, every one of them written */
static inline OTF2_CallbackCode put(uint64_t t, uint64_t l, uint64_t x, uint64_t y, uint64_t z)
{
    g_count++;
    if (!g_out.nwide && !g_out.rest) return OTF2_CALLBACK_SUCCESS;
    table_t *o = &g_out.t;
    uint64_t r = o->n;
    if (table_room(o, r + 1)) {
        g_out.failed = 1;
        return OTF2_CALLBACK_INTERRUPT;
    }
    uint64_t v[5] = {t, l, x, y, z};
    for (int i = 0; i < g_out.nwide; i++) ((uint64_t *)o->cols[i].p)[r] = v[i % 5] + (uint64_t)i;
    if (g_out.rest) memcpy((char *)o->cols[g_out.nwide].p + r * g_out.rest, &v[0], g_out.rest);
    o->n = r + 1;
    return OTF2_CALLBACK_SUCCESS;
}

#define EVENT(name, x, y, z, ...) \
    static OTF2_CallbackCode name(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t p, void *u, \
                                  OTF2_AttributeList *a, __VA_ARGS__) \
    { (void)p; (void)u; (void)a; return put(t, l, (x), (y), (z)); }

EVENT(on_region, r, 0, g_count, OTF2_RegionRef r)
EVENT(on_p2p, peer, ((uint64_t)c << 32) | tag, len, uint32_t peer, OTF2_CommRef c, uint32_t tag,
      uint64_t len)
EVENT(on_ip2p, peer, ((uint64_t)c << 32) | tag, len ^ req, uint32_t peer, OTF2_CommRef c,
      uint32_t tag, uint64_t len, uint64_t req)
EVENT(on_req, req, 0, g_count, uint64_t req)
EVENT(on_coll_end, ((uint64_t)op << 32) | c, root, s ^ r, OTF2_CollectiveOp op, OTF2_CommRef c,
      uint32_t root, uint64_t s, uint64_t r)
EVENT(on_flush, stop, 0, g_count, OTF2_TimeStamp stop)

static OTF2_CallbackCode on_coll_begin(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t p,
                                       void *u, OTF2_AttributeList *a)
{
    (void)p; (void)u; (void)a;
    return put(t, l, 0, 0, g_count);
}

struct locs_t {
    uint64_t *locs, n, cap, events; /* events: the sum of the definitions' counts */
};

static OTF2_CallbackCode on_location(void *u, OTF2_LocationRef self, OTF2_StringRef name,
                                     OTF2_LocationType type, uint64_t nev,
                                     OTF2_LocationGroupRef group)
{
    (void)name; (void)type; (void)group;
    struct locs_t *st = u;
    if (st->n < st->cap) st->locs[st->n++] = self;
    st->events += nev;
    return OTF2_CALLBACK_SUCCESS;
}

int main(int argc, char **argv)
{
    const char *anchor = NULL;
    long bytes = 0;
    if (argc == 2 && argv[1][0] != '-') {
        anchor = argv[1];
    } else if (argc == 4 && strcmp(argv[1], "--write") == 0 && argv[3][0] != '-') {
        char *end;
        bytes = strtol(argv[2], &end, 10);
        if (*argv[2] && !*end && bytes >= 1 && bytes <= 8 * (MAX_COLS - 1) + 7) anchor = argv[3];
    }
    if (!anchor) {
        fprintf(stderr, "usage: otf2-decode [--write BYTES] ANCHOR.otf2  (BYTES per event "
                        "written to fresh column memory, 1..%d)\n", 8 * (MAX_COLS - 1) + 7);
        return 2;
    }
    g_out.nwide = (int)(bytes / 8);
    g_out.rest = (uint32_t)(bytes % 8);
    uint32_t sizes[MAX_COLS];
    for (int i = 0; i < g_out.nwide; i++) sizes[i] = 8;
    sizes[g_out.nwide] = g_out.rest;
    table_init(&g_out.t, g_out.nwide + (g_out.rest > 0), sizes);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    OTF2_Reader *rd = OTF2_Reader_Open(anchor);
    if (!rd) return 1;
    OTF2_Reader_SetSerialCollectiveCallbacks(rd);
    uint64_t nloc = 0;
    OTF2_Reader_GetNumberOfLocations(rd, &nloc);
    /* location refs from the global definitions */
    struct locs_t st = {calloc(nloc ? nloc : 1, sizeof(uint64_t)), 0, nloc, 0};
    OTF2_GlobalDefReader *gd = OTF2_Reader_GetGlobalDefReader(rd);
    OTF2_GlobalDefReaderCallbacks *gcb = OTF2_GlobalDefReaderCallbacks_New();
    OTF2_GlobalDefReaderCallbacks_SetLocationCallback(gcb, on_location);
    OTF2_Reader_RegisterGlobalDefCallbacks(rd, gd, gcb, &st);
    uint64_t ndefs = 0;
    OTF2_Reader_ReadAllGlobalDefinitions(rd, gd, &ndefs);
    OTF2_Reader_CloseGlobalDefReader(rd, gd);
    OTF2_GlobalDefReaderCallbacks_Delete(gcb);
    uint64_t *locs = st.locs, n = st.n;
    /* sized from the definitions, as the reader sizes its tables; doubled if short */
    if (bytes && st.events && table_reserve(&g_out.t, st.events)) {
        fprintf(stderr, "otf2-decode: out of memory\n");
        return 1;
    }
    for (uint64_t i = 0; i < n; i++) OTF2_Reader_SelectLocation(rd, locs[i]);
    OTF2_Reader_OpenEvtFiles(rd);
    OTF2_EvtReaderCallbacks *cb = OTF2_EvtReaderCallbacks_New();
    OTF2_EvtReaderCallbacks_SetEnterCallback(cb, on_region);
    OTF2_EvtReaderCallbacks_SetLeaveCallback(cb, on_region);
    OTF2_EvtReaderCallbacks_SetMpiSendCallback(cb, on_p2p);
    OTF2_EvtReaderCallbacks_SetMpiRecvCallback(cb, on_p2p);
    OTF2_EvtReaderCallbacks_SetMpiIsendCallback(cb, on_ip2p);
    OTF2_EvtReaderCallbacks_SetMpiIrecvCallback(cb, on_ip2p);
    OTF2_EvtReaderCallbacks_SetMpiIsendCompleteCallback(cb, on_req);
    OTF2_EvtReaderCallbacks_SetMpiIrecvRequestCallback(cb, on_req);
    OTF2_EvtReaderCallbacks_SetMpiRequestTestCallback(cb, on_req);
    OTF2_EvtReaderCallbacks_SetMpiRequestCancelledCallback(cb, on_req);
    OTF2_EvtReaderCallbacks_SetMpiCollectiveBeginCallback(cb, on_coll_begin);
    OTF2_EvtReaderCallbacks_SetMpiCollectiveEndCallback(cb, on_coll_end);
    OTF2_EvtReaderCallbacks_SetBufferFlushCallback(cb, on_flush);
    for (uint64_t i = 0; i < n; i++) {
        OTF2_EvtReader *er = OTF2_Reader_GetEvtReader(rd, locs[i]);
        if (!er) continue;
        OTF2_Reader_RegisterEvtCallbacks(rd, er, cb, NULL);
        uint64_t got = 0;
        OTF2_Reader_ReadAllLocalEvents(rd, er, &got);
        OTF2_Reader_CloseEvtReader(rd, er);
    }
    OTF2_EvtReaderCallbacks_Delete(cb);
    OTF2_Reader_CloseEvtFiles(rd);
    OTF2_Reader_Close(rd);
    free(locs);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (!bytes) {
        printf("%" PRIu64 " %.6f\n", g_count, s);
        return 0;
    }
    /* the columns are still allocated (never freed: the process exits) */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    if (g_out.failed) {
        fprintf(stderr, "otf2-decode: out of memory\n");
        return 1;
    }
    printf("%" PRIu64 " %.6f %" PRIu64 " %.6f %.6f\n", g_count, s, g_out.t.n * (uint64_t)bytes,
           (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec,
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec);
    return 0;
}
