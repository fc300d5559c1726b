/* libFuzzer harness for the crash-safe log's reader (src/liveread.c), built with
 * AddressSanitizer and UBSan by test_recover_hostile.py (clang -fsanitize=fuzzer,...).
 *
 * Input: uint32 n, then n bytes of a .defs file, then the .events file. Each file is an
 * exact-size heap copy, so a read past either is ASan's to see. What the reader accepts
 * is then used as mpiscope-recover uses it (postmortem.c): the events window by window,
 * the communicator and object records stepped through by their own counts, names read as
 * strings, call sites by id. */
#include "live.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* runtime.h's COMM_REC_WORDS, COMM_NAME_WORDS and comm_rec_inter_a (it needs mpi.h) */
#define REC_WORDS(d) (4 + (d)[2] + (d)[3])
#define NAME_WORDS(name) ((int)((strlen(name) + sizeof(int32_t)) / sizeof(int32_t)))

static int32_t inter_a(const int32_t *d)
{
    const char *name = (const char *)(d + 4 + d[2]);
    return d[3] > NAME_WORDS(name) ? d[4 + d[2] + d[3] - 1] : 0;
}

static volatile uint64_t sink; /* what was read, so that nothing is optimised away */

static void use(const mps_live_log *log)
{
    uint64_t s = 0;
    for (uint32_t i = 0; i < log->ncomm_words; i += (uint32_t)REC_WORDS(log->comms + i)) {
        const int32_t *d = log->comms + i;
        for (int32_t k = 0; k < d[2]; k++) s += (uint32_t)d[4 + k];
        s += strlen((const char *)(d + 4 + d[2])) + (uint32_t)inter_a(d);
    }
    for (uint32_t i = 0; i < log->nobject_words; i += 5 + (uint32_t)log->objects[i + 4]) {
        const int32_t *d = log->objects + i;
        if (d[0] != MPS_LIVE_OBJ_GROUP) s += strlen((const char *)(d + 5));
    }
    for (uint32_t i = 0; i < log->nsites; i++)
        if (log->sites[i].path) s += strlen(log->sites[i].path) + log->sites[i].cs.addr;
    if (log->h.init_cs != UINT32_MAX) s += log->sites[log->h.init_cs].cs.bias;
    for (uint32_t i = 0; i < log->nnames; i++) s += strlen(log->names[i].name);
    for (int k = 0; k < MPS_LIVE_NKEYS; k++) s += log->str[k] ? strlen(log->str[k]) : 0;
    sink = s + strlen(log->regions);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t n;
    if (size < 4) return 0;
    memcpy(&n, data, 4);
    data += 4;
    size -= 4;
    if (n > size) n = (uint32_t)size;
    char *defs = malloc(n ? n : 1);
    size_t elen = size - n;
    uint8_t *events = malloc(elen ? elen : 1);
    memcpy(defs, data, n);
    memcpy(events, data + n, elen);
    mps_live_log log;
    char why[1024];
    if (mps_live_parse(defs, n, "defs", -1, &log, why, sizeof why) == 0) {
        use(&log);
        if (mps_live_check_events_size(&log, elen, "events", why, sizeof why) == 0) {
            uint64_t w = log.h.window_bytes;
            /* recovery allocates a window only once the ring file (2 windows) is there:
             * here, only when the input holds one (a header may name up to 1 TiB) */
            uint64_t *win = elen >= w ? malloc(w) : NULL;
            for (uint64_t k = 0; k < elen / w && k <= log.nwin; k++) {
                uint64_t end, nev;
                memcpy(win, events + k * w, w);
                if (mps_live_check_window(&log, win, w / 8, k, "events", k * w, &end, &nev, why,
                                          sizeof why) != 0)
                    break;
                /* the records recovery then encodes: each one's words */
                for (uint64_t i = 0; i < end; i += mps_evbuf_record_words(win + i))
                    sink += win[i + 1];
            }
            free(win);
        }
        mps_live_log_free(&log);
    }
    free(defs);
    free(events);
    return 0;
}
