/* Crash-safe live log: what a rank killed by SIGKILL (or a crash) leaves behind.
 *
 * The raw event buffer (evbuf.h) is one of the two slots of DIR/.mpiscope-live/
 * rank<N>.ring, mapped MAP_SHARED and written by the unchanged hot path, so the kernel
 * keeps every word written when the process dies. Batch k (the events between two
 * encodes) is written into slot k % 2. At the encode that ends batch k, a thread of the
 * log's own (the spiller) copies the slot into window k of DIR/.mpiscope-live/
 * rank<N>.events (bytes [k * window, (k + 1) * window), O_DIRECT where possible) while
 * batch k + 1 fills the other slot; that slot is reused only once its own batch is in
 * the events file and a SPILLED record says so. So the same pages serve the whole run
 * (a fresh file window per batch cost its pages' zeroing, ~+10 % of a write-heavy traced
 * job), and every event not yet in the events file is in the ring: windows below the
 * last SPILLED count are read from the events file, the other one or two from the ring.
 * A slot holds zeros after its batch's data (zeroed again before reuse), so a zero time
 * word ends the data.
 *
 * DIR/.mpiscope-live/rank<N>.defs is an append-only log of records written on cold paths
 * only: a header at MPI_Init, run properties, each call site when first seen (address,
 * load bias and object path, to resolve it post-mortem), each communicator definition
 * and name, the clock anchors of each batch and the windows spilled. `mpiscope-recover`
 * turns the three files into the per-rank archive salvage() would have written
 * (postmortem.c: mps_recover), after checking every record (liveread.c: the files are
 * hostile input by then).
 *
 * The files are removed after a clean MPI_Finalize write-out and a successful salvage.
 * Where the log cannot be kept (no space, file size limit, no fallocate, no thread) the
 * rank removes it and goes on with an anonymous buffer as before, after one warning.
 */
#ifndef MPISCOPE_LIVE_H
#define MPISCOPE_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "evbuf.h"

#define MPS_LIVE_DIR ".mpiscope-live"
#define MPS_LIVE_MAGIC "MPSLIVE1"
#define MPS_LIVE_VERSION 2u

/* record: {uint32 type, uint32 payload bytes} then the payload */
enum mps_live_rec {
    MPS_LIVE_HEADER = 1, /* struct mps_live_header */
    MPS_LIVE_STRING,     /* uint32 key (enum mps_live_key), then the bytes */
    MPS_LIVE_CALLSITE,   /* struct mps_live_callsite, then the object's path */
    MPS_LIVE_COMM,       /* int32 words: ref, parent, size, name words, members, name */
    MPS_LIVE_COMM_NAME,  /* uint32 ref, then the name */
    MPS_LIVE_WINDOW,     /* struct mps_live_window */
    MPS_LIVE_REGIONS,    /* the region names (mps_fn order), each ended by '\n' */
    MPS_LIVE_OBJECT,     /* int32 words: an RMA window, file, I/O handle or group (objects.c) */
    MPS_LIVE_SPILLED,    /* uint64 n: windows 0 .. n - 1 are in the events file */
};

enum mps_live_key {
    MPS_LIVE_HOST, MPS_LIVE_PROGRAM, MPS_LIVE_CMDLINE, MPS_LIVE_MPI_LIBRARY,
    MPS_LIVE_START_TIME, MPS_LIVE_BOOT_ID, MPS_LIVE_FILTERED, MPS_LIVE_NKEYS
};

struct mps_live_header {
    char magic[8];
    uint32_t version, rank, size, pid;
    int32_t tsc;                  /* raw times are TSC ticks (else monotonic ns) */
    uint32_t init_fn, init_cs;    /* MPI_Init's region and call site id */
    uint32_t nregions;            /* MPS_FN_COUNT of the build that wrote it */
    int64_t off_init;             /* this host's clock → rank 0's */
    int64_t t_init_local;         /* monotonic ns at Init (the ClockOffset's time) */
    uint64_t init_enter, init_leave; /* MPI_Init's Enter/Leave, trace time */
    uint64_t raw0, ns0;           /* anchor before the first window's first event */
    uint64_t window_bytes;        /* window i: events file bytes [i * window, (i + 1) * window),
                                     ring slot i % 2 */
};

struct mps_live_callsite {
    uint32_t id, reserved;
    uint64_t addr;  /* return address in the process */
    uint64_t bias;  /* the object's load bias (link_map l_addr) */
    uint64_t fbase; /* its base address (dladdr's dli_fbase), for object+offset */
};

/* Window `index` starts: batch index - 1 ended at anchor (raw1, ns1); batch `index`
 * starts at (raw0, ns0). `stopped` (reserved, 0): the log ends before this window. */
struct mps_live_window {
    uint64_t index, raw1, ns1, raw0, ns0, stopped;
};

/* ---- writer (the traced rank; cold paths only) ---- */

/* Create DIR/.mpiscope-live/rank<N>.{events,ring,defs}, reserve the ring and move the
 * (empty) buffer b onto its first slot. 0, or -1 with the reason in why (nothing left
 * behind; b as it was). */
int mps_live_open(const char *outdir, int rank, mps_evbuf *b, char *why, size_t whylen);
int mps_live_on(void);
/* why the log was given up during the run (no space, file size limit), or NULL */
const char *mps_live_lost(void);
/* Append one record (payload a then b). A failure gives the log up (warning once): the
 * buffer's events move to anonymous memory and the files are removed, so the space they
 * held is there for the trace itself. */
void mps_live_record(enum mps_live_rec type, const void *a, size_t alen, const void *b,
                     size_t blen);
void mps_live_string(enum mps_live_key key, const char *s);
/* After a batch of used_words words (ended at anchor raw1, ns1) was encoded: hand its
 * slot to the spiller and move b onto the other slot (once the batch before is in the
 * events file). Any failure gives the log up as above. The new window is logged by
 * mps_live_window_start with the next batch's first anchor. */
void mps_live_next_window(mps_evbuf *b, uint64_t used_words, uint64_t raw1, uint64_t ns1);
void mps_live_window_start(uint64_t raw0, uint64_t ns0);
/* Free the event buffer b: where it is a slot of the ring, the whole ring is unmapped
 * (once the spiller is done with it; the files stay for mps_live_close), else
 * mps_evbuf_free. The ring is one mapping, unmapped in one piece and only here or in
 * mps_live_close: unmapping the slot alone left a hole that a library loaded during the
 * write-out could be mapped into (libdw loads debuginfod, curl, libcrypto) and that the
 * later unmapping of the ring then took away from under it (a crash at exit). */
void mps_live_free_buffer(mps_evbuf *b);
/* Close the files; with remove, delete them (and the directory once empty). The ring is
 * unmapped if mps_live_free_buffer has not done so. */
void mps_live_close(int remove);

/* ---- reader (mpiscope-recover: liveread.c) ---- */

#define MPS_LIVE_MAX_RANKS (1u << 24)     /* a job size beyond this is no job */
#define MPS_LIVE_MAX_DEFS (256u << 20)    /* a .defs file beyond this is no log */
/* words after the last whole event record of the rank's last window that may hold what
 * the kill interrupted (a record, a call's records being taken back); then only zeros */
#define MPS_LIVE_TAIL_WORDS 1024u
/* OBJECT record kinds: runtime.h's MPS_OBJ_WIN .. MPS_OBJ_GROUP */
enum { MPS_LIVE_OBJ_WIN = 1, MPS_LIVE_OBJ_FILE, MPS_LIVE_OBJ_HANDLE, MPS_LIVE_OBJ_GROUP };

typedef struct {
    struct mps_live_callsite cs;
    char *path; /* NULL: an id the log never defined */
} mps_live_site;

/* A .defs file, every record checked (mps_live_parse). */
typedef struct {
    struct mps_live_header h;
    char *str[MPS_LIVE_NKEYS];
    mps_live_site *sites; /* by call-site id: every id the log names is < nsites */
    uint32_t nsites;
    int32_t *comms; /* the COMM records' words, back to back, each as check_comm passed it */
    uint32_t ncomm_words;
    struct { uint32_t ref; char name[64]; } *names;
    uint32_t nnames;
    struct mps_live_window *win; /* win[i].index == i + 1 */
    uint32_t nwin;
    uint32_t spilled; /* windows 0 .. spilled - 1 are in the events file, the rest (nwin -
                         spilled <= 1) in the ring */
    char *regions; /* the REGIONS record, NUL-terminated */
    uint64_t regions_at; /* its byte offset */
    int32_t *objects; /* the OBJECT records' words, back to back */
    uint32_t nobject_words;
} mps_live_log;

/* Parse and check a .defs file's bytes (path names it in messages; rank >= 0: the rank it
 * must be). 0, or -1 with one line "PATH: byte N: problem" in why (log left empty). A last
 * record cut short by the kill ends it; anything else out of place is refused. */
int mps_live_parse(const void *data, size_t len, const char *path, int rank,
                   mps_live_log *log, char *why, size_t whylen);
/* The same, read from a regular file. */
int mps_live_read(const char *path, int rank, mps_live_log *log, char *why, size_t whylen);
void mps_live_log_free(mps_live_log *log);
/* The events and ring files' sizes against the windows the log describes. */
int mps_live_check_events_size(const mps_live_log *log, uint64_t size, const char *path,
                               char *why, size_t whylen);
int mps_live_check_ring_size(const mps_live_log *log, uint64_t size, const char *path,
                             char *why, size_t whylen);
/* Window k (nwords words, read at byte `at` of file `path`: the events file below
 * log->spilled, else the ring; k == nwin: the one the rank was killed in): *end = words of
 * its whole records (those recovered), *nevents = the OTF2 events they make. -1 with the
 * line in why. */
int mps_live_check_window(const mps_live_log *log, const uint64_t *w, uint64_t nwords,
                          uint64_t k, const char *path, uint64_t at, uint64_t *end,
                          uint64_t *nevents, char *why, size_t whylen);
/* The ring slot no recovered window is in (nwords words at byte `at` of the ring): all
 * zero, but where `was` (the spilled window it held, or NULL) still shows through. */
int mps_live_check_free_slot(const mps_live_log *log, const uint64_t *w, const uint64_t *was,
                             uint64_t nwords, const char *path, uint64_t at, char *why,
                             size_t whylen);

#endif
