/* Crash-safe live log (see live.h): the writer the traced rank uses on cold paths (the
 * reader, mpiscope-recover's after the rank was killed, is liveread.c). */
#define _GNU_SOURCE
#include "live.h"
#include "iosafe.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static struct {
    int on;       /* the buffer is a slot of the ring */
    mps_evbuf *eb; /* that buffer */
    int ev, evd, rg, defs; /* events (buffered, O_DIRECT or -1), ring, defs descriptors */
    int evd_lost;          /* the O_DIRECT one after a write refused it */
    uint64_t window; /* index of the window now being written (in ring slot window & 1) */
    uint64_t win;    /* window bytes */
    char *ring;      /* the ring's two slots, mapped MAP_SHARED */
    uint64_t used[2]; /* words each slot's batch wrote (all zero after them) */
    int pending;     /* its WINDOW record waits for the batch's first anchor */
    struct mps_live_window next;
    /* the spiller thread: copies an encoded batch's slot into the events file while the
     * next batch fills the other slot; go/done are pipes (async-signal-safe to wait on) */
    int thread, busy, go[2], done[2];
    pid_t pid;       /* the process the thread belongs to (not a forked child) */
    const char *job_src;
    size_t job_len;
    uint64_t job_off;
    int job_err;
    char outdir[PATH_MAX], dir[PATH_MAX + 32], events[PATH_MAX + 64], defsf[PATH_MAX + 64];
    char ringf[PATH_MAX + 64];
    char lost[PATH_MAX + 160]; /* why the log was given up mid-run, "" while it holds */
} L = {.ev = -1, .evd = -1, .evd_lost = -1, .rg = -1, .defs = -1, .go = {-1, -1}, .done = {-1, -1}};

/* fallocate(2), not posix_fallocate: where the file system cannot reserve blocks we want
 * to know (EOPNOTSUPP), not glibc's emulation that writes zeros and reserves nothing on
 * copy-on-write or compressed file systems. */
static int reserve(int fd, uint64_t off, uint64_t len)
{
    mps_io_guard_begin(); /* past a file size limit: EFBIG for the log, not a SIGXFSZ */
    int r = fallocate(fd, 0, (off_t)off, (off_t)len);
    mps_io_guard_end();
    return r;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

const char *mps_live_lost(void) { return L.lost[0] ? L.lost : NULL; }

int mps_live_on(void) { return L.on; }

/* The spiller thread: each job is one encoded batch's slot, written to its window of the
 * events file. O_DIRECT where the file system has it: the data goes from the ring's pages
 * to the disk, with no page cache of its own to allocate and zero (the cost of the fresh
 * file window per batch this replaces); else a buffered write, off the traced thread. */
static void *spiller(void *arg)
{
    (void)arg;
    for (;;) {
        char c;
        ssize_t r = read(L.go[0], &c, 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || c == 'q') {
            close(L.go[0]); /* the thread's own end of the pipe */
            return NULL;
        }
        const char *p = L.job_src;
        size_t n = L.job_len;
        uint64_t off = L.job_off;
        int err = 0;
        while (n) {
            int fd = L.evd >= 0 ? L.evd : L.ev;
            ssize_t w = pwrite(fd, p, n, (off_t)off);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0 && errno == EINVAL && fd == L.evd) { /* O_DIRECT refused after all */
                L.evd = -1;
                L.evd_lost = fd; /* closed with the others: the traced thread owns them */
                continue;
            }
            if (w <= 0) {
                err = w < 0 ? errno : EIO;
                break;
            }
            p += w;
            n -= (size_t)w;
            off += (uint64_t)w;
        }
        L.job_err = err;
        while (write(L.done[1], "d", 1) < 0 && errno == EINTR) {}
    }
}

/* Wait for the spiller's job, if one is out: 0 when it is on disk (in the events file's
 * page cache or past it), -1 with errno. Async-signal-safe (salvage closes the log). */
static int spill_wait(void)
{
    if (!L.busy) return 0;
    L.busy = 0;
    if (getpid() != L.pid) return -1; /* a forked child: the thread is its parent's */
    char c;
    ssize_t r;
    while ((r = read(L.done[0], &c, 1)) < 0 && errno == EINTR) {}
    if (r != 1) {
        errno = EIO;
        return -1;
    }
    if (L.job_err) {
        errno = L.job_err;
        return -1;
    }
    return 0;
}

static int start_spiller(void)
{
    if (pipe2(L.go, O_CLOEXEC) != 0) return -1;
    if (pipe2(L.done, O_CLOEXEC) != 0) return -1;
    /* no signal of the program's is ever delivered to it */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 64 * 1024);
    pthread_t t;
    int r = pthread_create(&t, &at, spiller, NULL);
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r != 0) {
        errno = r;
        return -1;
    }
    L.thread = 1;
    L.pid = getpid();
    return 0;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* remove: 1 this rank's files, 2 also the directory if no other rank's are left */
static void close_files(int remove)
{
    spill_wait(); /* the spiller writes through these descriptors */
    if (L.thread && getpid() == L.pid)
        while (write(L.go[1], "q", 1) < 0 && errno == EINTR) {}
    else close_fd(&L.go[0]); /* else the thread closes it once it has read the 'q' */
    L.thread = 0;
    close_fd(&L.go[1]);
    close_fd(&L.done[0]);
    close_fd(&L.done[1]);
    close_fd(&L.ev);
    close_fd(&L.evd);
    close_fd(&L.evd_lost);
    close_fd(&L.rg);
    close_fd(&L.defs);
    if (remove) {
        unlink(L.events);
        unlink(L.ringf);
        unlink(L.defsf);
    }
    if (remove > 1) rmdir(L.dir); /* the last rank to leave removes it: ENOTEMPTY before */
}

/* the buffer onto a slot of the ring (or any memory of its size) */
static void set_base(mps_evbuf *b, uint64_t *p)
{
    b->end = p + (b->end - b->base);
    b->base = b->pos = p;
}

int mps_live_open(const char *outdir, int rank, mps_evbuf *b, char *why, size_t whylen)
{
    snprintf(L.outdir, sizeof L.outdir, "%s", outdir);
    snprintf(L.dir, sizeof L.dir, "%s/%s", outdir, MPS_LIVE_DIR);
    snprintf(L.events, sizeof L.events, "%s/rank%d.events", L.dir, rank);
    snprintf(L.ringf, sizeof L.ringf, "%s/rank%d.ring", L.dir, rank);
    snprintf(L.defsf, sizeof L.defsf, "%s/rank%d.defs", L.dir, rank);
    const char *step = "mkdir", *path = L.dir;
    if (mkdir(L.dir, 0777) != 0 && errno != EEXIST) goto fail;
    step = "open";
    path = L.events;
    L.ev = open(L.events, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (L.ev < 0) goto fail;
    L.evd = open(L.events, O_WRONLY | O_DIRECT | O_CLOEXEC); /* -1: buffered writes */
    path = L.ringf;
    L.rg = open(L.ringf, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (L.rg < 0) goto fail;
    path = L.defsf;
    L.defs = open(L.defsf, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0666);
    if (L.defs < 0) goto fail;
    step = "fallocate";
    path = L.ringf;
    L.win = mps_evbuf_window_bytes(b);
    if (reserve(L.rg, 0, 2 * L.win) != 0) goto fail;
    step = "mmap";
    void *p = mmap(NULL, (size_t)(2 * L.win), PROT_READ | PROT_WRITE, MAP_SHARED, L.rg, 0);
    if (p == MAP_FAILED) goto fail;
    mps_evbuf_populate(p, (size_t)(2 * L.win));
    /* the buffer is empty at MPI_Init: its anonymous pages go, the ring's first slot
     * takes their place */
    munmap(b->base, (size_t)L.win);
    L.ring = p;
    set_base(b, (uint64_t *)(void *)L.ring);
    L.used[0] = L.used[1] = 0;
    L.window = 0;
    L.on = 1;
    L.eb = b;
    return 0;
fail:
    snprintf(why, whylen, "%s %s: %s", step, path, strerror(errno));
    /* not the directory: other ranks may be about to create their files in it (it goes
     * at mps_live_close) */
    close_files(1);
    return -1;
}

/* The log cannot go on (no space, file size limit): give it up for the rest of the run
 * and give its disk space back, which the trace itself may need: the buffer's events
 * move to anonymous memory, the files go. Said at the end (mps_live_lost), where it
 * matters only if the trace itself was written. */
static void give_up(const char *what, const char *path)
{
    snprintf(L.lost, sizeof L.lost, "%s %s: %s", what, path, strerror(errno));
    mps_evbuf *b = L.eb;
    L.on = 0;
    close_files(2); /* first: the spiller may be reading the ring */
    if (!L.ring) return; /* the buffer is freed already (mps_live_free_buffer) */
    void *p = mmap(NULL, (size_t)L.win, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    /* without memory to move to, the buffer stays in the ring, its file gone: the space
     * comes back at exit */
    if (p == MAP_FAILED) return;
    size_t used = (size_t)(b->pos - b->base) * sizeof *b->base;
    memcpy(p, b->base, used);
    set_base(b, p);
    b->pos = b->base + used / sizeof *b->base;
    munmap(L.ring, (size_t)(2 * L.win));
    L.ring = NULL;
}

void mps_live_record(enum mps_live_rec type, const void *a, size_t alen, const void *b,
                     size_t blen)
{
    if (!L.on) return;
    /* one write per record, so a kill leaves whole records and at most one cut short */
    uint32_t head[2] = {(uint32_t)type, (uint32_t)(alen + blen)};
    char small[1024], *buf = sizeof head + alen + blen <= sizeof small
                                 ? small : malloc(sizeof head + alen + blen);
    int ok = buf != NULL;
    if (ok) {
        memcpy(buf, head, sizeof head);
        if (alen) memcpy(buf + sizeof head, a, alen);
        if (blen) memcpy(buf + sizeof head + alen, b, blen);
        mps_io_guard_begin();
        ok = write_all(L.defs, buf, sizeof head + alen + blen) == 0;
        mps_io_guard_end();
    }
    if (buf != small) free(buf);
    if (!ok) give_up("write", L.defsf);
}

void mps_live_string(enum mps_live_key key, const char *s)
{
    uint32_t k = (uint32_t)key;
    mps_live_record(MPS_LIVE_STRING, &k, sizeof k, s, strlen(s));
}

void mps_live_next_window(mps_evbuf *b, uint64_t used_words, uint64_t raw1, uint64_t ns1)
{
    if (!L.on || !L.ring) return;
    const uint64_t k = L.window, s = k & 1;
    if (!L.thread && start_spiller() != 0) {
        give_up("cannot start its writer thread for", L.events);
        return;
    }
    /* batch k - 1 (the other slot) is in the events file once the spiller is done with
     * it: logged before its slot is reused, so recovery always knows where it is */
    if (spill_wait() != 0) {
        give_up("cannot write", L.events);
        return;
    }
    if (k > 0) {
        uint64_t n = k;
        mps_live_record(MPS_LIVE_SPILLED, &n, sizeof n, NULL, 0);
        if (!L.on) return;
    }
    /* window k's place in the events file, a hole until the spiller fills it */
    mps_io_guard_begin();
    int r = ftruncate(L.ev, (off_t)((k + 1) * L.win));
    mps_io_guard_end();
    if (r != 0) {
        give_up("cannot extend", L.events); /* the batch is encoded: nothing to move */
        return;
    }
    L.used[s] = used_words;
    if (used_words) { /* page-aligned, as O_DIRECT wants: the slot is zero after its data */
        uint64_t bytes = (used_words * 8 + 4095) / 4096 * 4096;
        L.job_src = L.ring + s * L.win;
        L.job_len = (size_t)(bytes < L.win ? bytes : L.win);
        L.job_off = k * L.win;
        L.busy = 1;
        while ((r = (int)write(L.go[1], "g", 1)) < 0 && errno == EINTR) {}
        if (r != 1) {
            L.busy = 0;
            give_up("cannot hand over", L.events);
            return;
        }
    }
    /* the other slot's batch is in the events file: back to zeros (the end of a batch's
     * data is its first zero word), its pages kept: no fresh page per batch */
    uint64_t *o = (uint64_t *)(void *)(L.ring + (1 - s) * L.win);
    memset(o, 0, (size_t)L.used[1 - s] * 8);
    L.used[1 - s] = 0;
    set_base(b, o);
    L.window = k + 1;
    L.next = (struct mps_live_window){k + 1, raw1, ns1, 0, 0, 0};
    L.pending = 1; /* logged with the new batch's first anchor: mps_live_window_start */
}

void mps_live_window_start(uint64_t raw0, uint64_t ns0)
{
    if (!L.on || !L.pending) return;
    L.pending = 0;
    L.next.raw0 = raw0;
    L.next.ns0 = ns0;
    mps_live_record(MPS_LIVE_WINDOW, &L.next, sizeof L.next, NULL, 0);
}

static void unmap_ring(void)
{
    if (L.ring) munmap(L.ring, (size_t)(2 * L.win));
    L.ring = NULL;
}

void mps_live_free_buffer(mps_evbuf *b)
{
    const char *p = (const char *)b->base;
    if (!L.ring || p < L.ring || p >= L.ring + 2 * L.win) {
        mps_evbuf_free(b);
        return;
    }
    /* the spiller may still be copying the other slot; what it could not write is still
     * in the ring file, which recovery reads (the files stay until mps_live_close) */
    spill_wait();
    unmap_ring();
    L.eb = NULL;
    b->base = b->pos = b->end = NULL;
}

void mps_live_close(int remove)
{
    L.on = 0;
    close_files(remove ? 2 : 0);
    unmap_ring();
}
