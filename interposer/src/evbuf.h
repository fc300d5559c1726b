/* Raw event buffer: what the hot path writes instead of OTF2 records.
 *
 * libotf2 spends 20-100 ns encoding one record (compressed integers, attribute lists),
 * more than our whole per-call budget. So a traced call only appends a few 64-bit words
 * per event to this buffer, stamped with the cheapest monotonic clock (the TSC where
 * the kernel trusts it); the buffer is encoded into OTF2 in one batch when it is full
 * (recorded as a BufferFlush, like any tracer's flush) and at MPI_Finalize.
 *
 * A record is 2..7 words: the time, a header word (kind | op | region | a) and the
 * kind's payload words (see enum mps_ev). The buffer always keeps room for one record
 * of the largest kind; mps_evbuf_room() tells the owner when to encode.
 */
#ifndef MPISCOPE_EVBUF_H
#define MPISCOPE_EVBUF_H

#include <stdint.h>
#include <time.h>

#include <otf2/otf2.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#define MPS_ATTR_CALLSITE 0
#define MPS_ATTR_IN_HASH 1
#define MPS_ATTR_OUT_HASH 2
#define MPS_ATTR_ERROR 3    /* on the Leave of a call that returned an error */
#define MPS_ATTR_CALLS 4    /* on the Leave of a visit that stands for several polling calls */
#define MPS_ATTR_PRIOR_HASH 5 /* a collective's receive buffer at entry */
/* the thread's counters where it was sampled (hotpath.c, MPS_EV_SCHED): on-CPU time and
 * run-queue delay (runnable, waiting for a CPU), ns since the thread started */
#define MPS_ATTR_CPU 6
#define MPS_ATTR_RUN_DELAY 7
/* defined only when call paths are recorded (depth > 1), after every other definition
 * (callpath.c): the largest ref, as OTF2 wants definitions in the order of their refs */
#define MPS_ATTR_CALLPATH 8
#define MPS_EV_MAX_WORDS 9 /* largest record (hashed NonBlockingCollectiveComplete) */

/* record kinds; payload words after the header in brackets */
enum mps_ev {
    MPS_EV_ENTER = 1,     /* a = call-site id or UINT32_MAX */
    MPS_EV_LEAVE,         /* */
    MPS_EV_SEND,          /* a = peer; [comm | tag << 32] [bytes] */
    MPS_EV_RECV,          /* a = peer; [comm | tag << 32] [bytes] */
    MPS_EV_ISEND,         /* a = peer; [comm | tag << 32] [bytes] [request id] */
    MPS_EV_IRECV_REQUEST, /* [request id] */
    MPS_EV_ISEND_DONE,    /* [request id] */
    MPS_EV_IRECV,         /* a = peer; [comm | tag << 32] [bytes] [request id] */
    MPS_EV_CANCELLED,     /* [request id] */
    MPS_EV_TEST,          /* [request id] */
    MPS_EV_COLL_BEGIN,    /* */
    MPS_EV_COLL_END,      /* op; a = root; [comm | have_hash << 32] [sent] [recvd]
                             (+ [in hash] [out hash] [prior hash] when have_hash) */
    MPS_EV_NBC_REQUEST,   /* [request id] */
    MPS_EV_NBC_DONE,      /* op; a = root; [comm | have_hash << 32] [sent] [recvd]
                             [request id] (+ [in hash] [out hash] [prior hash] when
                             have_hash) */
    /* RMA (rma.c), a = window ref */
    MPS_EV_RMA_WIN,       /* op 0 create, 1 destroy */
    MPS_EV_RMA_OP,        /* op 0 put, 1 get, else 16 + atomic type; [remote] [sent] [recvd]
                             [matching id] */
    MPS_EV_RMA_DONE,      /* op 0 blocking, 1 non-blocking, 2 remote; [matching id] */
    MPS_EV_RMA_COLL_BEGIN,/* */
    MPS_EV_RMA_COLL_END,  /* op = collective op; [sync level] */
    MPS_EV_RMA_GSYNC,     /* [sync level | group << 32] */
    MPS_EV_RMA_LOCK,      /* op 0 request, 1 acquire, 2 release; [remote | type << 32] [lock id] */
    MPS_EV_RMA_SYNC,      /* op = sync type; [remote] */
    /* MPI-IO (io.c), a = I/O handle ref (file ref for IO_DELETE) */
    MPS_EV_IO_CREATE,     /* [access mode | creation flags << 8 | status flags << 32] */
    MPS_EV_IO_DESTROY,    /* */
    MPS_EV_IO_BEGIN,      /* op = mode | flags << 4; [bytes requested] [matching id] */
    MPS_EV_IO_ISSUED,     /* [matching id] */
    MPS_EV_IO_DONE,       /* [bytes result] [matching id] */
    MPS_EV_IO_SEEK,       /* op = whence; [offset requested] [offset result] */
    MPS_EV_IO_DELETE,     /* */
    MPS_EV_PATH,          /* a = call path id of the Enter that follows (callpath.c) */
    MPS_EV_ERROR,         /* a = the error code the call returns, on its Leave that follows */
    MPS_EV_POLL,          /* [calls]: the Leave that follows ends a visit standing for this
                             many polling calls that completed nothing (hotpath.c) */
    MPS_EV_SCHED,         /* [cpu ns] [run delay ns]: the thread's counters, for the Enter
                             or Leave that follows (hotpath.c, descheduling) */
};

/* Encode MPS_EV_PATH as the next Enter's mpiscope:callpath (the traced process, where the
 * paths are defined); else (mpiscope-recover) path records are skipped. */
extern int mps_evbuf_callpaths;

typedef struct {
    uint64_t *base, *pos, *end; /* end leaves MPS_EV_MAX_WORDS spare words */
} mps_evbuf;

/* Raw clock → trace time: piecewise linear between two (raw, ns) anchors taken around
 * a batch, so TSC ticks become CLOCK_MONOTONIC nanoseconds without knowing the TSC
 * frequency, and follow the kernel's adjustments of the monotonic clock. */
typedef struct {
    int tsc;             /* raw values are TSC ticks (else already monotonic ns) */
    uint64_t raw0, ns0;  /* anchor taken before the batch's first event */
    uint64_t raw1, ns1;  /* anchor taken after its last */
    int64_t offset;      /* added to every time: this host's clock → rank 0's */
    uint64_t mult;       /* ns per tick << 32, from the anchors (mps_timemap_fix) */
} mps_timemap;

static inline uint64_t mps_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 8-15 ns for rdtsc against 25-60 ns for a vDSO clock_gettime on our machines */
static inline uint64_t mps_ticks(int tsc)
{
#if defined(__x86_64__) || defined(__i386__)
    if (tsc) return __rdtsc();
#endif
    (void)tsc;
    return mps_mono_ns();
}

static inline uint64_t *mps_ev_put(mps_evbuf *b, uint64_t t, enum mps_ev kind, unsigned op,
                                   unsigned region, uint32_t a, int nwords)
{
    uint64_t *w = b->pos;
    w[0] = t;
    w[1] = (uint64_t)kind | (uint64_t)(op & 0xff) << 8 | (uint64_t)(region & 0xffff) << 16 |
           (uint64_t)a << 32;
    b->pos = w + 2 + nwords;
    return w + 2;
}

static inline int mps_evbuf_full(const mps_evbuf *b) { return b->pos >= b->end; }

int mps_evbuf_init(mps_evbuf *b, uint64_t bytes);
/* Forget the newest record if it has a payload: a signal may have stopped its writer
 * between header and payload. A header-only record (Enter, Leave: the call a rank was
 * blocked in when it was killed) is whole once counted, and kept. */
void mps_evbuf_drop_unfinished(mps_evbuf *b);
void mps_evbuf_free(mps_evbuf *b);
/* Bytes of the buffer's mapping (page-rounded): one window of the crash-safe event log. */
uint64_t mps_evbuf_window_bytes(const mps_evbuf *b);
/* Fault [p, p + len) in now, where the kernel allows (huge pages too): not in the hot
 * path. Best effort. */
void mps_evbuf_populate(void *p, size_t len);
/* Recovery: end of the whole records in [p, lim), a window of a killed rank's log. The
 * window was fresh zeroed file space, so a zero time word (or an unknown kind, or a
 * record running past lim) ends the data. With `cut`, the window the rank was killed
 * writing, its newest record is dropped if it has a payload, as in
 * mps_evbuf_drop_unfinished. No store is needed in the hot path for this: the window
 * is never reused, so whatever follows the last record is still zero. */
uint64_t *mps_evbuf_valid_end(uint64_t *p, uint64_t *lim, int cut);
/* Words of the record at p (within a range mps_evbuf_valid_end returned): 2..MAX_WORDS. */
size_t mps_evbuf_record_words(const uint64_t *p);
/* Add d to the time of each whole record in [p, end) (at most 64 records), newest first:
 * times never go back at any moment (a polling visit growing, hotpath.c). */
void mps_evbuf_shift(uint64_t *p, const uint64_t *end, uint64_t d);
/* 1 if the TSC may stand in for CLOCK_MONOTONIC here (override: MPISCOPE_CLOCK) */
int mps_tsc_usable(void);
/* a (raw, ns) anchor pair, the raw reading bracketing the ns one */
void mps_anchor(int tsc, uint64_t *raw, uint64_t *ns);
/* after setting the anchors: one division per batch, none per event */
void mps_timemap_fix(mps_timemap *m);
uint64_t mps_timemap_ns(const mps_timemap *m, uint64_t raw);
/* Encode every buffered record into w (attribute list al reused for call sites and
 * hashes) and empty the buffer. *last is the trace time of the last record written,
 * kept current per record (OTF2's flush callback reads it). Stops early when the
 * writer reports an error through *stop becoming nonzero. */
void mps_evbuf_encode(mps_evbuf *b, OTF2_EvtWriter *w, OTF2_AttributeList *al,
                      const mps_timemap *m, uint64_t *last, const int *stop);

#endif
