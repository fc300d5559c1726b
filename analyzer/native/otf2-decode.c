/* otf2-decode: the reference for bench/reader — libotf2 decoding every event of every
 * location with no-op callbacks (the same event types the mpiscope reader handles),
 * one location after the other on one core. Prints "<events> <seconds>". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <otf2/otf2.h>

/* the callbacks ignore their arguments by design */
#pragma GCC diagnostic ignored "-Wunused-parameter"

static uint64_t g_count;

#define NOOP(name, ...) \
    static OTF2_CallbackCode name(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t p, void *u, \
                                  OTF2_AttributeList *a, __VA_ARGS__) \
    { (void)l; (void)t; (void)p; (void)u; (void)a; g_count++; return OTF2_CALLBACK_SUCCESS; }

NOOP(on_region, OTF2_RegionRef r)
NOOP(on_p2p, uint32_t peer, OTF2_CommRef c, uint32_t tag, uint64_t len)
NOOP(on_ip2p, uint32_t peer, OTF2_CommRef c, uint32_t tag, uint64_t len, uint64_t req)
NOOP(on_req, uint64_t req)
NOOP(on_coll_end, OTF2_CollectiveOp op, OTF2_CommRef c, uint32_t root, uint64_t s, uint64_t r)
NOOP(on_flush, OTF2_TimeStamp stop)

static OTF2_CallbackCode on_coll_begin(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t p,
                                       void *u, OTF2_AttributeList *a)
{
    (void)l; (void)t; (void)p; (void)u; (void)a;
    g_count++;
    return OTF2_CALLBACK_SUCCESS;
}

struct locs_t {
    uint64_t *locs, n, cap;
};

static OTF2_CallbackCode on_location(void *u, OTF2_LocationRef self, OTF2_StringRef name,
                                     OTF2_LocationType type, uint64_t nev,
                                     OTF2_LocationGroupRef group)
{
    (void)name; (void)type; (void)nev; (void)group;
    struct locs_t *st = u;
    if (st->n < st->cap) st->locs[st->n++] = self;
    return OTF2_CALLBACK_SUCCESS;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: otf2-decode ANCHOR.otf2\n");
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    OTF2_Reader *rd = OTF2_Reader_Open(argv[1]);
    if (!rd) return 1;
    OTF2_Reader_SetSerialCollectiveCallbacks(rd);
    uint64_t nloc = 0;
    OTF2_Reader_GetNumberOfLocations(rd, &nloc);
    /* location refs from the global definitions */
    struct locs_t st = {calloc(nloc ? nloc : 1, sizeof(uint64_t)), 0, nloc};
    OTF2_GlobalDefReader *gd = OTF2_Reader_GetGlobalDefReader(rd);
    OTF2_GlobalDefReaderCallbacks *gcb = OTF2_GlobalDefReaderCallbacks_New();
    OTF2_GlobalDefReaderCallbacks_SetLocationCallback(gcb, on_location);
    OTF2_Reader_RegisterGlobalDefCallbacks(rd, gd, gcb, &st);
    uint64_t ndefs = 0;
    OTF2_Reader_ReadAllGlobalDefinitions(rd, gd, &ndefs);
    OTF2_Reader_CloseGlobalDefReader(rd, gd);
    OTF2_GlobalDefReaderCallbacks_Delete(gcb);
    uint64_t *locs = st.locs, n = st.n;
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
    printf("%" PRIu64 " %.6f\n", g_count, s);
    return 0;
}
