/* mpiscope-synth: write a synthetic OTF2 trace in mpiscope's format (docs/trace-format.md).
 *
 *   mpiscope-synth --ranks 64 --events 10000000 --out DIR
 *                  [--ranks-per-host 16] [--halo-bytes 8192] [--seed 1]
 *
 * Every rank runs the same iteration of a halo-exchange solver: compute (imbalanced by
 * rank), Irecv from both ring neighbours, Isend to both, Waitall, an Allreduce of 8 bytes
 * (with mpiscope:in_hash/out_hash), every 10th iteration a Barrier, then a small blocking
 * Send/Recv between rank pairs (2k -> 2k+1). Iterations are added until the archive
 * holds about --events events over all ranks (~25 per rank and iteration); MPI_Init and
 * MPI_Finalize frame each rank. Timestamps are consistent (every receive completes after
 * its send began), so all messages match. The number of events written is printed.
 * Used by bench/reader and by the web UI's large-trace tests.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <otf2/otf2.h>

enum { R_INIT, R_FINALIZE, R_IRECV, R_ISEND, R_WAITALL, R_ALLREDUCE, R_BARRIER, R_SEND, R_RECV,
       N_REGIONS };
static const char *region_name[N_REGIONS] = {"MPI_Init", "MPI_Finalize", "MPI_Irecv",
    "MPI_Isend", "MPI_Waitall", "MPI_Allreduce", "MPI_Barrier", "MPI_Send", "MPI_Recv"};
static const OTF2_RegionRole region_role[N_REGIONS] = {OTF2_REGION_ROLE_FUNCTION,
    OTF2_REGION_ROLE_FUNCTION, OTF2_REGION_ROLE_POINT2POINT, OTF2_REGION_ROLE_POINT2POINT,
    OTF2_REGION_ROLE_POINT2POINT, OTF2_REGION_ROLE_COLL_ALL2ALL, OTF2_REGION_ROLE_BARRIER,
    OTF2_REGION_ROLE_POINT2POINT, OTF2_REGION_ROLE_POINT2POINT};
/* call site (source line in "solver.c") of each call; irecv/isend use line and line+1 */
static const uint32_t region_line[N_REGIONS] = {10, 200, 101, 103, 110, 120, 130, 140, 141};

enum { A_CALLSITE, A_IN_HASH, A_OUT_HASH };
#define T_START 1000000000ull /* raw timestamp of the first event */
#define PERIOD 100000ull      /* ns per iteration */

static OTF2_FlushType pre_flush(void *u, OTF2_FileType ft, OTF2_LocationRef l, void *cd, bool fin)
{
    (void)u; (void)ft; (void)l; (void)cd; (void)fin;
    return OTF2_FLUSH;
}
static const OTF2_FlushCallbacks flush_cbs = {.otf2_pre_flush = pre_flush, .otf2_post_flush = NULL};

static uint64_t mix(uint64_t x) /* splitmix64: deterministic jitter and hashes */
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

typedef struct {
    OTF2_EvtWriter *w;
    OTF2_AttributeList *al;
    uint64_t req;
} rank_t;

static void enter(rank_t *r, uint64_t t, int region, uint32_t line_offset)
{
    OTF2_AttributeList_AddSourceCodeLocationRef(r->al, A_CALLSITE,
                                                (uint32_t)(region * 2 + line_offset));
    OTF2_EvtWriter_Enter(r->w, r->al, t, (OTF2_RegionRef)region);
}
static void leave(rank_t *r, uint64_t t, int region)
{
    OTF2_EvtWriter_Leave(r->w, NULL, t, (OTF2_RegionRef)region);
}

static int usage(void)
{
    fprintf(stderr, "usage: mpiscope-synth --ranks N --events E --out DIR [--ranks-per-host K]"
                    " [--halo-bytes B] [--seed S]\n");
    return 2;
}

int main(int argc, char **argv)
{
    int ranks = 4, per_host = 16;
    uint64_t events = 100000, halo = 8192, seed = 1;
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        if (!strcmp(a, "--ranks")) ranks = atoi(v);
        else if (!strcmp(a, "--events")) events = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--ranks-per-host")) per_host = atoi(v);
        else if (!strcmp(a, "--halo-bytes")) halo = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else return usage();
        i++;
    }
    if (!out || ranks < 2 || per_host < 1) return usage();
    /* ~25.2 events per rank and iteration, 4 for Init/Finalize */
    uint64_t per_iter = 25;
    uint64_t iters = events > (uint64_t)ranks * 4
                         ? (events - (uint64_t)ranks * 4) * 10 / ((uint64_t)ranks * (per_iter * 10 + 2))
                         : 1;
    if (iters < 1) iters = 1;

    if (mkdir(out, 0755) != 0 && errno != EEXIST) {
        perror(out);
        return 1;
    }
    OTF2_Archive *ar = OTF2_Archive_Open(out, "traces", OTF2_FILEMODE_WRITE, 1024 * 1024,
                                         4 * 1024 * 1024, OTF2_SUBSTRATE_POSIX,
                                         OTF2_COMPRESSION_NONE);
    if (!ar) {
        fprintf(stderr, "mpiscope-synth: cannot create %s\n", out);
        return 1;
    }
    OTF2_Archive_SetFlushCallbacks(ar, &flush_cbs, NULL);
    OTF2_Archive_SetSerialCollectiveCallbacks(ar);
    OTF2_Archive_SetCreator(ar, "mpiscope-synth");
    OTF2_Archive_OpenEvtFiles(ar);

    uint64_t t_end = 0;
    uint64_t *nevents = calloc((size_t)ranks, sizeof *nevents);
    for (int me = 0; me < ranks; me++) {
        rank_t r = {OTF2_Archive_GetEvtWriter(ar, (OTF2_LocationRef)me),
                    OTF2_AttributeList_New(), 0};
        int left = (me + ranks - 1) % ranks, right = (me + 1) % ranks;
        enter(&r, T_START, R_INIT, 0);
        leave(&r, T_START + 500000 + 100 * (uint64_t)me, R_INIT);
        uint64_t t = 0;
        for (uint64_t i = 0; i < iters; i++) {
            uint64_t base = T_START + 1000000 + i * PERIOD;
            uint64_t jit = mix(seed ^ (i * 1315423911u + (uint64_t)me)) % 1000;
            uint64_t c = base + 40000 + (uint64_t)(me % 4) * 2000 + jit; /* compute ends */
            uint64_t sync = base + 47000 + 1300 + 2000; /* every rank's Isends are done */
            uint64_t q = r.req;
            enter(&r, c, R_IRECV, 0);
            OTF2_EvtWriter_MpiIrecvRequest(r.w, NULL, c + 50, q);
            leave(&r, c + 200, R_IRECV);
            enter(&r, c + 300, R_IRECV, 1);
            OTF2_EvtWriter_MpiIrecvRequest(r.w, NULL, c + 350, q + 1);
            leave(&r, c + 500, R_IRECV);
            enter(&r, c + 600, R_ISEND, 0);
            OTF2_EvtWriter_MpiIsend(r.w, NULL, c + 650, (uint32_t)right, 0, 1, halo, q + 2);
            leave(&r, c + 900, R_ISEND);
            enter(&r, c + 1000, R_ISEND, 1);
            OTF2_EvtWriter_MpiIsend(r.w, NULL, c + 1050, (uint32_t)left, 0, 2, halo, q + 3);
            leave(&r, c + 1300, R_ISEND);
            enter(&r, c + 1400, R_WAITALL, 0);
            OTF2_EvtWriter_MpiIrecv(r.w, NULL, sync + 100, (uint32_t)left, 0, 1, halo, q);
            OTF2_EvtWriter_MpiIrecv(r.w, NULL, sync + 200, (uint32_t)right, 0, 2, halo, q + 1);
            OTF2_EvtWriter_MpiIsendComplete(r.w, NULL, sync + 300, q + 2);
            OTF2_EvtWriter_MpiIsendComplete(r.w, NULL, sync + 400, q + 3);
            leave(&r, sync + 500, R_WAITALL);
            r.req += 4;

            uint64_t a = sync + 1000 + (mix(seed ^ (i << 20) ^ (uint64_t)me) % 2000);
            uint64_t a_end = sync + 1000 + 2000 + 3000;
            enter(&r, a, R_ALLREDUCE, 0);
            OTF2_EvtWriter_MpiCollectiveBegin(r.w, NULL, a);
            OTF2_AttributeList_AddUint64(r.al, A_IN_HASH, mix(i * (uint64_t)ranks + (uint64_t)me));
            OTF2_AttributeList_AddUint64(r.al, A_OUT_HASH, mix(i));
            OTF2_EvtWriter_MpiCollectiveEnd(r.w, r.al, a_end, OTF2_COLLECTIVE_OP_ALLREDUCE, 0,
                                            OTF2_UNDEFINED_UINT32, 8, 8);
            leave(&r, a_end, R_ALLREDUCE);
            t = a_end;
            if (i % 10 == 9) {
                enter(&r, t + 500, R_BARRIER, 0);
                OTF2_EvtWriter_MpiCollectiveBegin(r.w, NULL, t + 500);
                OTF2_EvtWriter_MpiCollectiveEnd(r.w, NULL, t + 2500, OTF2_COLLECTIVE_OP_BARRIER,
                                                0, OTF2_UNDEFINED_UINT32, 0, 0);
                leave(&r, t + 2500, R_BARRIER);
            }
            uint64_t b = a_end + 3000;
            if (me % 2 == 0 && me + 1 < ranks) {
                enter(&r, b, R_SEND, 0);
                OTF2_EvtWriter_MpiSend(r.w, NULL, b + 50, (uint32_t)me + 1, 0, 3, 64);
                leave(&r, b + 2000, R_SEND);
            } else if (me % 2 == 1) {
                enter(&r, b - 500, R_RECV, 0);
                OTF2_EvtWriter_MpiRecv(r.w, NULL, b + 1500, (uint32_t)me - 1, 0, 3, 64);
                leave(&r, b + 1600, R_RECV);
            }
            t = b + 2000;
        }
        enter(&r, t + 10000, R_FINALIZE, 0);
        leave(&r, t + 20000, R_FINALIZE);
        if (t + 20000 > t_end) t_end = t + 20000;
        OTF2_EvtWriter_GetNumberOfEvents(r.w, &nevents[me]);
        OTF2_AttributeList_Delete(r.al);
        OTF2_Archive_CloseEvtWriter(ar, r.w);
    }
    OTF2_Archive_CloseEvtFiles(ar);

    /* local definitions: none needed (global refs are used directly), but the files exist */
    OTF2_Archive_OpenDefFiles(ar);
    for (int me = 0; me < ranks; me++)
        OTF2_Archive_CloseDefWriter(ar, OTF2_Archive_GetDefWriter(ar, (OTF2_LocationRef)me));
    OTF2_Archive_CloseDefFiles(ar);

    OTF2_GlobalDefWriter *g = OTF2_Archive_GetGlobalDefWriter(ar);
    OTF2_GlobalDefWriter_WriteClockProperties(g, 1000000000, T_START, t_end - T_START,
                                              OTF2_UNDEFINED_TIMESTAMP);
    uint32_t s = 0; /* string refs, in order of writing */
    char buf[256];
#define STR(text) (OTF2_GlobalDefWriter_WriteString(g, s, (text)), s++)
    uint32_t s_empty = STR("");
    uint32_t s_machine = STR("machine"), s_node = STR("node"), s_solver = STR("solver.c");
    int nhosts = (ranks + per_host - 1) / per_host;
    OTF2_GlobalDefWriter_WriteSystemTreeNode(g, 0, s_machine, s_machine,
                                             OTF2_UNDEFINED_SYSTEM_TREE_NODE);
    for (int h = 0; h < nhosts; h++) {
        snprintf(buf, sizeof buf, "node%d", h);
        OTF2_GlobalDefWriter_WriteSystemTreeNode(g, (uint32_t)h + 1, STR(buf), s_node, 0);
    }
    for (int me = 0; me < ranks; me++) {
        snprintf(buf, sizeof buf, "MPI Rank %d", me);
        OTF2_GlobalDefWriter_WriteLocationGroup(g, (uint32_t)me, STR(buf),
                                                OTF2_LOCATION_GROUP_TYPE_PROCESS,
                                                (uint32_t)(me / per_host) + 1,
                                                OTF2_UNDEFINED_LOCATION_GROUP);
        snprintf(buf, sizeof buf, "rank %d", me);
        OTF2_GlobalDefWriter_WriteLocation(g, (uint64_t)me, STR(buf),
                                           OTF2_LOCATION_TYPE_CPU_THREAD, nevents[me],
                                           (uint32_t)me);
    }
    for (int k = 0; k < N_REGIONS; k++) {
        uint32_t name = STR(region_name[k]);
        OTF2_GlobalDefWriter_WriteRegion(g, (uint32_t)k, name, name, s_empty, region_role[k],
                                         OTF2_PARADIGM_MPI, OTF2_REGION_FLAG_NONE, s_empty, 0, 0);
        for (uint32_t o = 0; o < 2; o++)
            OTF2_GlobalDefWriter_WriteSourceCodeLocation(g, (uint32_t)k * 2 + o, s_solver,
                                                         region_line[k] + o);
    }
    OTF2_GlobalDefWriter_WriteAttribute(g, A_CALLSITE, STR("mpiscope:callsite"), s_empty,
                                        OTF2_TYPE_SOURCE_CODE_LOCATION);
    OTF2_GlobalDefWriter_WriteAttribute(g, A_IN_HASH, STR("mpiscope:in_hash"), s_empty,
                                        OTF2_TYPE_UINT64);
    OTF2_GlobalDefWriter_WriteAttribute(g, A_OUT_HASH, STR("mpiscope:out_hash"), s_empty,
                                        OTF2_TYPE_UINT64);
    uint64_t *members = malloc((size_t)ranks * sizeof *members);
    for (int me = 0; me < ranks; me++) members[me] = (uint64_t)me;
    OTF2_GlobalDefWriter_WriteGroup(g, 0, STR("MPI locations"), OTF2_GROUP_TYPE_COMM_LOCATIONS,
                                    OTF2_PARADIGM_MPI, OTF2_GROUP_FLAG_NONE, (uint32_t)ranks,
                                    members);
    uint32_t s_world = STR("MPI_COMM_WORLD"), s_self = STR("MPI_COMM_SELF");
    OTF2_GlobalDefWriter_WriteGroup(g, 1, s_world, OTF2_GROUP_TYPE_COMM_GROUP, OTF2_PARADIGM_MPI,
                                    OTF2_GROUP_FLAG_NONE, (uint32_t)ranks, members);
    OTF2_GlobalDefWriter_WriteGroup(g, 2, s_self, OTF2_GROUP_TYPE_COMM_SELF, OTF2_PARADIGM_MPI,
                                    OTF2_GROUP_FLAG_NONE, 0, NULL);
    OTF2_GlobalDefWriter_WriteComm(g, 0, s_world, 1, OTF2_UNDEFINED_COMM, OTF2_COMM_FLAG_NONE);
    OTF2_GlobalDefWriter_WriteComm(g, 1, s_self, 2, OTF2_UNDEFINED_COMM, OTF2_COMM_FLAG_NONE);
#undef STR
    OTF2_Archive_SetProperty(ar, "MPISCOPE::PROGRAM", "mpiscope-synth", true);
    OTF2_Archive_SetProperty(ar, "MPISCOPE::CMDLINE", "mpiscope-synth", true);
    OTF2_Archive_SetProperty(ar, "MPISCOPE::MPI_LIBRARY", "synthetic", true);
    OTF2_Archive_SetProperty(ar, "MPISCOPE::VERSION", "synth", true);
    OTF2_Archive_CloseGlobalDefWriter(ar, g);
    OTF2_ErrorCode rc = OTF2_Archive_Close(ar);
    uint64_t total = 0;
    for (int me = 0; me < ranks; me++) total += nevents[me];
    free(nevents);
    free(members);
    if (rc != OTF2_SUCCESS) {
        fprintf(stderr, "mpiscope-synth: writing %s failed: %s\n", out,
                OTF2_Error_GetDescription(rc));
        return 1;
    }
    printf("%" PRIu64 " events, %d ranks, %" PRIu64 " iterations -> %s\n", total, ranks, iters,
           out);
    return 0;
}
