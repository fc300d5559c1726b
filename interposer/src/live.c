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
#include <sys/stat.h>
#include <unistd.h>

static struct {
    int on;       /* the buffer is a window onto the events file */
    mps_evbuf *eb; /* that buffer */
    int ev, defs; /* file descriptors */
    uint64_t window; /* index of the window now mapped */
    int pending;     /* its WINDOW record waits for the batch's first anchor */
    struct mps_live_window next;
    char outdir[PATH_MAX], dir[PATH_MAX + 32], events[PATH_MAX + 64], defsf[PATH_MAX + 64];
    char lost[PATH_MAX + 160]; /* why the log was given up mid-run, "" while it holds */
} L = {.ev = -1, .defs = -1};

/* fallocate(2), not posix_fallocate: where the file system cannot reserve blocks we want
 * to know (EOPNOTSUPP), not glibc's emulation that writes zeros and reserves nothing on
 * copy-on-write or compressed file systems. */
static int reserve(uint64_t off, uint64_t len)
{
    mps_io_guard_begin(); /* past a file size limit: EFBIG for the log, not a SIGXFSZ */
    int r = fallocate(L.ev, 0, (off_t)off, (off_t)len);
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

/* remove: 1 this rank's files, 2 also the directory if no other rank's are left */
static void close_files(int remove)
{
    if (L.ev >= 0) close(L.ev);
    if (L.defs >= 0) close(L.defs);
    L.ev = L.defs = -1;
    if (remove) {
        unlink(L.events);
        unlink(L.defsf);
    }
    if (remove > 1) rmdir(L.dir); /* the last rank to leave removes it: ENOTEMPTY before */
}

int mps_live_open(const char *outdir, int rank, mps_evbuf *b, char *why, size_t whylen)
{
    snprintf(L.outdir, sizeof L.outdir, "%s", outdir);
    snprintf(L.dir, sizeof L.dir, "%s/%s", outdir, MPS_LIVE_DIR);
    snprintf(L.events, sizeof L.events, "%s/rank%d.events", L.dir, rank);
    snprintf(L.defsf, sizeof L.defsf, "%s/rank%d.defs", L.dir, rank);
    const char *step = "mkdir", *path = L.dir;
    int mapped = 0;
    if (mkdir(L.dir, 0777) != 0 && errno != EEXIST) goto fail;
    step = "open";
    path = L.events;
    L.ev = open(L.events, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (L.ev < 0) goto fail;
    path = L.defsf;
    L.defs = open(L.defsf, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0666);
    if (L.defs < 0) goto fail;
    step = "fallocate";
    path = L.events;
    if (reserve(0, mps_evbuf_window_bytes(b)) != 0) goto fail;
    step = "mmap";
    mapped = 1;
    if (mps_evbuf_remap(b, L.ev, 0) != 0) goto fail;
    L.window = 0;
    L.on = 1;
    L.eb = b;
    return 0;
fail:
    snprintf(why, whylen, "%s %s: %s", step, path, strerror(errno));
    /* not the directory: other ranks may be about to create their files in it (it goes
     * at mps_live_close) */
    close_files(1);
    /* a failed MAP_FIXED may have unmapped the old pages: give the buffer fresh ones */
    if (mapped && mps_evbuf_remap(b, -1, 0) != 0) return -2;
    return -1;
}

/* The log cannot go on (no space, file size limit): give it up for the rest of the run
 * and give its disk space back, which the trace itself may need: the buffer's events
 * move to anonymous memory at the same address, the files go. Said at the end
 * (mps_live_lost), where it matters only if the trace itself was written. */
static void give_up(const char *what, const char *path)
{
    snprintf(L.lost, sizeof L.lost, "%s %s: %s", what, path, strerror(errno));
    mps_evbuf *b = L.eb;
    size_t used = (size_t)(b->pos - b->base) * sizeof *b->base;
    uint64_t *copy = used ? malloc(used) : NULL;
    if (copy) memcpy(copy, b->base, used);
    /* without memory to move to, the buffer stays the file's window, its name gone: the
     * space comes back at exit, and no log that later batches overwrite is left */
    if (!(used && !copy) && mps_evbuf_remap(b, -1, 0) == 0) {
        if (copy) memcpy(b->base, copy, used);
        b->pos = b->base + used / sizeof *b->base;
    }
    free(copy);
    L.on = 0;
    close_files(2);
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

void mps_live_next_window(mps_evbuf *b, uint64_t raw1, uint64_t ns1)
{
    if (!L.on) return;
    uint64_t win = mps_evbuf_window_bytes(b);
    struct mps_live_window w = {L.window + 1, raw1, ns1, 0, 0, 0};
    if (reserve(w.index * win, win) != 0) {
        give_up("cannot extend", L.events); /* the batch is encoded: nothing to move */
        return;
    }
    if (mps_evbuf_remap(b, L.ev, w.index * win) != 0) {
        give_up("mmap", L.events); /* the buffer is empty: it gets fresh anonymous pages */
        return;
    }
    L.window = w.index;
    L.next = w;
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

void mps_live_close(int remove)
{
    L.on = 0;
    close_files(remove ? 2 : 0);
}
