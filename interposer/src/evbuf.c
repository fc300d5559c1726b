/* Raw event buffer → OTF2 records (see evbuf.h for why events are buffered raw). */
#define _GNU_SOURCE
#include "evbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Fault every page in now: a first touch costs ~1 us per 4 KiB page, which is ~45 ns
 * per traced call if paid in the hot path. Huge pages where the kernel allows them on
 * request make that cheaper and spare TLB misses. */
void mps_evbuf_populate(void *p, size_t len)
{
    madvise(p, len, MADV_HUGEPAGE);
#ifdef MADV_POPULATE_WRITE
    /* best effort: where it fails (old kernel, no memory now) pages fault in as used */
    madvise(p, len, MADV_POPULATE_WRITE);
#endif
}

int mps_evbuf_callpaths;

int mps_evbuf_init(mps_evbuf *b, uint64_t bytes)
{
    uint64_t words = bytes / sizeof(uint64_t);
    if (words < 64 * MPS_EV_MAX_WORDS) words = 64 * MPS_EV_MAX_WORDS;
    size_t len = words * sizeof(uint64_t);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    mps_evbuf_populate(p, len);
    b->base = b->pos = p;
    b->end = b->base + words - MPS_EV_MAX_WORDS;
    return 0;
}

void mps_evbuf_free(mps_evbuf *b)
{
    if (b->base) munmap(b->base, (size_t)(b->end - b->base + MPS_EV_MAX_WORDS) * 8);
    b->base = b->pos = b->end = NULL;
}

uint64_t mps_evbuf_window_bytes(const mps_evbuf *b)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t len = (uint64_t)(b->end - b->base + MPS_EV_MAX_WORDS) * 8;
    return (len + page - 1) / page * page;
}

int mps_tsc_usable(void)
{
#if defined(__x86_64__) || defined(__i386__)
    const char *force = getenv("MPISCOPE_CLOCK");
    if (force && strcmp(force, "monotonic") == 0) return 0;
    if (force && strcmp(force, "tsc") == 0) return 1;
    /* The kernel only keeps "tsc" as its clocksource when the TSC is invariant and
     * synchronised across CPUs: exactly what reading it on any core requires. */
    char cs[32] = "";
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (!f) return 0;
    if (!fgets(cs, sizeof cs, f)) cs[0] = 0;
    fclose(f);
    return strncmp(cs, "tsc", 3) == 0 && (cs[3] == '\n' || cs[3] == 0);
#else
    return 0;
#endif
}

void mps_anchor(int tsc, uint64_t *raw, uint64_t *ns)
{
    if (!tsc) {
        *raw = *ns = mps_mono_ns();
        return;
    }
    uint64_t a = mps_ticks(1);
    *ns = mps_mono_ns();
    uint64_t b = mps_ticks(1);
    *raw = a + (b - a) / 2;
}

void mps_timemap_fix(mps_timemap *m)
{
    uint64_t draw = m->raw1 - m->raw0;
    m->mult = draw ? (uint64_t)(((unsigned __int128)(m->ns1 - m->ns0) << 32) / draw) : 0;
}

uint64_t mps_timemap_ns(const mps_timemap *m, uint64_t raw)
{
    uint64_t ns = raw;
    if (m->tsc) {
        int64_t dt = (int64_t)(raw - m->raw0);
        if (dt < 0) dt = 0; /* cannot happen: the first anchor precedes the batch */
        ns = m->ns0 + (uint64_t)(((unsigned __int128)dt * m->mult) >> 32);
    }
    return ns + (uint64_t)m->offset;
}

/* Words of the record at p, header included (payloads: see enum mps_ev); 0 for an
 * unknown kind, which cannot happen (only this file's writers fill the buffer) and
 * ends any walk. */
static size_t record_words(const uint64_t *p)
{
    switch ((enum mps_ev)(p[1] & 0xff)) {
    case MPS_EV_ENTER: case MPS_EV_LEAVE: case MPS_EV_COLL_BEGIN: case MPS_EV_RMA_WIN:
    case MPS_EV_RMA_COLL_BEGIN: case MPS_EV_IO_DESTROY: case MPS_EV_IO_DELETE:
    case MPS_EV_PATH: case MPS_EV_ERROR: return 2;
    case MPS_EV_POLL: return 3;
    case MPS_EV_RMA_DONE: case MPS_EV_RMA_COLL_END: case MPS_EV_RMA_GSYNC: case MPS_EV_RMA_SYNC:
    case MPS_EV_IO_CREATE: case MPS_EV_IO_ISSUED: return 3;
    case MPS_EV_RMA_LOCK: case MPS_EV_IO_BEGIN: case MPS_EV_IO_DONE: case MPS_EV_IO_SEEK:
    case MPS_EV_SCHED:
        return 4;
    case MPS_EV_RMA_OP: return 6;
    case MPS_EV_IRECV_REQUEST: case MPS_EV_ISEND_DONE: case MPS_EV_CANCELLED:
    case MPS_EV_TEST: case MPS_EV_NBC_REQUEST: return 3;
    case MPS_EV_SEND: case MPS_EV_RECV: return 4;
    case MPS_EV_ISEND: case MPS_EV_IRECV: return 5;
    case MPS_EV_NBC_DONE: return p[2] >> 32 ? 9 : 6;
    case MPS_EV_COLL_END: return p[2] >> 32 ? 8 : 5;
    }
    return 0;
}

uint64_t *mps_evbuf_valid_end(uint64_t *p, uint64_t *lim, int cut)
{
    uint64_t *last = NULL;
    for (size_t n; p + 3 <= lim && p[0] != 0 && (n = record_words(p)) != 0 && p + n <= lim;
         p += n)
        last = p;
    if (cut && last && record_words(last) > 2) p = last;
    return p;
}

void mps_evbuf_drop_unfinished(mps_evbuf *b)
{
    uint64_t *p = b->base, *last = NULL;
    for (size_t n; p < b->pos && (n = record_words(p)) != 0; p += n) last = p;
    if (last && record_words(last) > 2) b->pos = last;
}

/* The RMA and MPI-IO records (rma.c, io.c), as Score-P's MPI adapter writes them. */
static void encode_rma_io(OTF2_EvtWriter *w, uint64_t t, unsigned kind, unsigned op,
                          uint32_t a, const uint64_t *x)
{
    switch ((enum mps_ev)kind) {
    case MPS_EV_RMA_WIN:
        if (op) OTF2_EvtWriter_RmaWinDestroy(w, NULL, t, a);
        else OTF2_EvtWriter_RmaWinCreate(w, NULL, t, a);
        break;
    case MPS_EV_RMA_OP:
        if (op == 0) OTF2_EvtWriter_RmaPut(w, NULL, t, a, (uint32_t)x[0], x[1], x[3]);
        else if (op == 1) OTF2_EvtWriter_RmaGet(w, NULL, t, a, (uint32_t)x[0], x[2], x[3]);
        else OTF2_EvtWriter_RmaAtomic(w, NULL, t, a, (uint32_t)x[0], (OTF2_RmaAtomicType)(op - 16),
                                      x[1], x[2], x[3]);
        break;
    case MPS_EV_RMA_DONE:
        if (op == 0) OTF2_EvtWriter_RmaOpCompleteBlocking(w, NULL, t, a, x[0]);
        else if (op == 1) OTF2_EvtWriter_RmaOpCompleteNonBlocking(w, NULL, t, a, x[0]);
        else OTF2_EvtWriter_RmaOpCompleteRemote(w, NULL, t, a, x[0]);
        break;
    case MPS_EV_RMA_COLL_BEGIN:
        OTF2_EvtWriter_RmaCollectiveBegin(w, NULL, t);
        break;
    case MPS_EV_RMA_COLL_END:
        OTF2_EvtWriter_RmaCollectiveEnd(w, NULL, t, (OTF2_CollectiveOp)op,
                                        (OTF2_RmaSyncLevel)x[0], a, OTF2_UNDEFINED_UINT32, 0, 0);
        break;
    case MPS_EV_RMA_GSYNC:
        OTF2_EvtWriter_RmaGroupSync(w, NULL, t, (OTF2_RmaSyncLevel)(uint32_t)x[0], a,
                                    (uint32_t)(x[0] >> 32));
        break;
    case MPS_EV_RMA_LOCK: {
        uint32_t remote = (uint32_t)x[0];
        OTF2_LockType type = (OTF2_LockType)(x[0] >> 32);
        if (op == 0) OTF2_EvtWriter_RmaRequestLock(w, NULL, t, a, remote, x[1], type);
        else if (op == 1) OTF2_EvtWriter_RmaAcquireLock(w, NULL, t, a, remote, x[1], type);
        else OTF2_EvtWriter_RmaReleaseLock(w, NULL, t, a, remote, x[1]);
        break;
    }
    case MPS_EV_RMA_SYNC:
        OTF2_EvtWriter_RmaSync(w, NULL, t, a, (uint32_t)x[0], (OTF2_RmaSyncType)op);
        break;
    case MPS_EV_IO_CREATE:
        OTF2_EvtWriter_IoCreateHandle(w, NULL, t, a, (OTF2_IoAccessMode)(x[0] & 0xff),
                                      (OTF2_IoCreationFlag)((x[0] >> 8) & 0xffffff),
                                      (OTF2_IoStatusFlag)(x[0] >> 32));
        break;
    case MPS_EV_IO_DESTROY:
        OTF2_EvtWriter_IoDestroyHandle(w, NULL, t, a);
        break;
    case MPS_EV_IO_BEGIN:
        OTF2_EvtWriter_IoOperationBegin(w, NULL, t, a, (OTF2_IoOperationMode)(op & 0xf),
                                        (OTF2_IoOperationFlag)(op >> 4), x[0], x[1]);
        break;
    case MPS_EV_IO_ISSUED:
        OTF2_EvtWriter_IoOperationIssued(w, NULL, t, a, x[0]);
        break;
    case MPS_EV_IO_DONE:
        OTF2_EvtWriter_IoOperationComplete(w, NULL, t, a, x[0], x[1]);
        break;
    case MPS_EV_IO_SEEK:
        OTF2_EvtWriter_IoSeek(w, NULL, t, a, (int64_t)x[0], (OTF2_IoSeekOption)op, x[1]);
        break;
    case MPS_EV_IO_DELETE:
        OTF2_EvtWriter_IoDeleteFile(w, NULL, t, 0, a);
        break;
    default:
        break;
    }
}

void mps_evbuf_encode(mps_evbuf *b, OTF2_EvtWriter *w, OTF2_AttributeList *al,
                      const mps_timemap *m, uint64_t *last, const int *stop)
{
    const uint64_t *p = b->base;
    uint32_t path = UINT32_MAX; /* from the MPS_EV_PATH just before an Enter */
    int failed = 0, error = 0;  /* from the MPS_EV_ERROR just before a Leave */
    uint64_t polls = 0;         /* from the MPS_EV_POLL just before a Leave */
    int sched = 0;              /* from the MPS_EV_SCHED before an Enter or a Leave */
    uint64_t cpu = 0, delay = 0;
    while (p < b->pos && !*stop) {
        uint64_t t = mps_timemap_ns(m, p[0]);
        if (t < *last) t = *last; /* anchors bracket the batch; this only guards rounding */
        *last = t;
        uint64_t h = p[1];
        unsigned kind = h & 0xff, op = (h >> 8) & 0xff;
        OTF2_RegionRef region = (h >> 16) & 0xffff;
        uint32_t a = (uint32_t)(h >> 32);
        const uint64_t *x = p + 2;
        switch ((enum mps_ev)kind) {
        case MPS_EV_PATH:
            path = a;
            break;
        case MPS_EV_ENTER:
            if (a != UINT32_MAX)
                OTF2_AttributeList_AddSourceCodeLocationRef(al, MPS_ATTR_CALLSITE, a);
            if (path != UINT32_MAX && mps_evbuf_callpaths)
                OTF2_AttributeList_AddCallingContextRef(al, MPS_ATTR_CALLPATH, path);
            if (sched) {
                OTF2_AttributeList_AddUint64(al, MPS_ATTR_CPU, cpu);
                OTF2_AttributeList_AddUint64(al, MPS_ATTR_RUN_DELAY, delay);
                sched = 0;
            }
            OTF2_EvtWriter_Enter(w, OTF2_AttributeList_GetNumberOfElements(al) ? al : NULL, t,
                                 region);
            path = UINT32_MAX;
            break;
        case MPS_EV_ERROR:
            failed = 1;
            error = (int)a;
            break;
        case MPS_EV_POLL:
            polls = x[0];
            break;
        case MPS_EV_SCHED:
            sched = 1;
            cpu = x[0];
            delay = x[1];
            break;
        case MPS_EV_LEAVE:
            if (failed) OTF2_AttributeList_AddInt32(al, MPS_ATTR_ERROR, error);
            if (polls > 1) OTF2_AttributeList_AddUint64(al, MPS_ATTR_CALLS, polls);
            if (sched) {
                OTF2_AttributeList_AddUint64(al, MPS_ATTR_CPU, cpu);
                OTF2_AttributeList_AddUint64(al, MPS_ATTR_RUN_DELAY, delay);
            }
            OTF2_EvtWriter_Leave(w, failed || polls > 1 || sched ? al : NULL, t, region);
            failed = 0;
            sched = 0;
            polls = 0;
            break;
        case MPS_EV_SEND:
            OTF2_EvtWriter_MpiSend(w, NULL, t, a, (uint32_t)x[0], (uint32_t)(x[0] >> 32), x[1]);
            break;
        case MPS_EV_RECV:
            OTF2_EvtWriter_MpiRecv(w, NULL, t, a, (uint32_t)x[0], (uint32_t)(x[0] >> 32), x[1]);
            break;
        case MPS_EV_ISEND:
            OTF2_EvtWriter_MpiIsend(w, NULL, t, a, (uint32_t)x[0], (uint32_t)(x[0] >> 32), x[1],
                                    x[2]);
            break;
        case MPS_EV_IRECV:
            OTF2_EvtWriter_MpiIrecv(w, NULL, t, a, (uint32_t)x[0], (uint32_t)(x[0] >> 32), x[1],
                                    x[2]);
            break;
        case MPS_EV_IRECV_REQUEST:
            OTF2_EvtWriter_MpiIrecvRequest(w, NULL, t, x[0]);
            break;
        case MPS_EV_ISEND_DONE:
            OTF2_EvtWriter_MpiIsendComplete(w, NULL, t, x[0]);
            break;
        case MPS_EV_CANCELLED:
            OTF2_EvtWriter_MpiRequestCancelled(w, NULL, t, x[0]);
            break;
        case MPS_EV_TEST:
            OTF2_EvtWriter_MpiRequestTest(w, NULL, t, x[0]);
            break;
        case MPS_EV_COLL_BEGIN:
            OTF2_EvtWriter_MpiCollectiveBegin(w, NULL, t);
            break;
        case MPS_EV_COLL_END: {
            int have_hash = (int)(x[0] >> 32);
            if (have_hash) {
                OTF2_AttributeList_AddUint64(al, MPS_ATTR_IN_HASH, x[3]);
                OTF2_AttributeList_AddUint64(al, MPS_ATTR_OUT_HASH, x[4]);
                OTF2_AttributeList_AddUint64(al, MPS_ATTR_PRIOR_HASH, x[5]);
            }
            OTF2_EvtWriter_MpiCollectiveEnd(w, have_hash ? al : NULL, t, (OTF2_CollectiveOp)op,
                                            (uint32_t)x[0], a, x[1], x[2]);
            break;
        }
        case MPS_EV_NBC_REQUEST:
            OTF2_EvtWriter_NonBlockingCollectiveRequest(w, NULL, t, x[0]);
            break;
        case MPS_EV_NBC_DONE: {
            int have_hash = (int)(x[0] >> 32);
            if (have_hash) {
                OTF2_AttributeList_AddUint64(al, MPS_ATTR_IN_HASH, x[4]);
                OTF2_AttributeList_AddUint64(al, MPS_ATTR_OUT_HASH, x[5]);
                OTF2_AttributeList_AddUint64(al, MPS_ATTR_PRIOR_HASH, x[6]);
            }
            OTF2_EvtWriter_NonBlockingCollectiveComplete(w, have_hash ? al : NULL, t,
                                                         (OTF2_CollectiveOp)op, (uint32_t)x[0],
                                                         a, x[1], x[2], x[3]);
            break;
        }
        default:
            if (kind >= MPS_EV_RMA_WIN) encode_rma_io(w, t, kind, op, a, x);
            break;
        }
        size_t n = record_words(p);
        if (!n) break;
        p += n;
    }
    b->pos = b->base;
}

size_t mps_evbuf_record_words(const uint64_t *p) { return record_words(p); }

void mps_evbuf_shift(uint64_t *p, const uint64_t *end, uint64_t d)
{
    uint64_t *rec[64]; /* record starts; at most 2 words each */
    size_t k = 0;
    for (size_t n; p < end && k < sizeof rec / sizeof rec[0] && (n = record_words(p)) != 0;
         p += n)
        rec[k++] = p;
    while (k-- > 0) rec[k][0] += d;
}
