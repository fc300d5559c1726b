/* liveread.c — the crash-safe live log's reader (mpiscope-recover; the layout is live.h).
 *
 * The log is hostile input: a killed rank leaves it, but anything may have happened to it
 * since (a disk error, another program, a person). Every record is checked against the
 * file's size and against what the writer (live.c and its callers) can produce before
 * anything is allocated or indexed from it, and the first problem found is the answer:
 * "FILE: byte OFFSET: what is wrong", one line, nothing half-read. The only thing
 * tolerated is what a kill leaves: a last record cut short at the end of the file, and in
 * the window the rank was writing, one unfinished event record after its last whole one.
 * No libmpiscope state is touched here, so this file builds on its own (the fuzz harness,
 * interposer/tests/fuzz/).
 */
#define _GNU_SOURCE
#include "live.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* the most each record kind can hold (payload bytes): what the writers can produce */
#define MAX_STRING (1u << 20)     /* a property: the command line is read into PATH_MAX */
#define MAX_REGIONS (1u << 20)    /* the MPI function names, '\n'-separated */
#define MAX_COMM_NAME 1024u       /* MPI_MAX_OBJECT_NAME is 64 (Open MPI), 128 (MPICH) */
#define MAX_PID (1u << 22)        /* PID_MAX_LIMIT on 64-bit Linux */
#define MAX_WINDOW (1ull << 40)   /* MPISCOPE_BUFFER_SIZE of a TiB is no buffer */
#define MAX_TIME (1ull << 62)     /* ns: 146 years of uptime; OTF2's undefined is 2^64-1 */
#define OTF2_UNDEFINED_COMM_REF UINT32_MAX /* OTF2_UNDEFINED_COMM: no parent */

static const char *const kind_name[] = {
    [MPS_LIVE_HEADER] = "header", [MPS_LIVE_STRING] = "STRING", [MPS_LIVE_CALLSITE] = "CALLSITE",
    [MPS_LIVE_COMM] = "COMM", [MPS_LIVE_COMM_NAME] = "COMM_NAME", [MPS_LIVE_WINDOW] = "WINDOW",
    [MPS_LIVE_REGIONS] = "REGIONS", [MPS_LIVE_OBJECT] = "OBJECT",
    [MPS_LIVE_SPILLED] = "SPILLED"};

static int bad(char *why, size_t whylen, const char *path, uint64_t at, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int bad(char *why, size_t whylen, const char *path, uint64_t at, const char *fmt, ...)
{
    int n = snprintf(why, whylen, "%s: byte %llu: ", path, (unsigned long long)at);
    if (n >= 0 && (size_t)n < whylen) {
        va_list va;
        va_start(va, fmt);
        vsnprintf(why + n, whylen - (size_t)n, fmt, va);
        va_end(va);
    }
    return -1;
}

static char *dupn(const char *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s) { memcpy(s, p, n); s[n] = 0; }
    return s;
}

/* grow *arr (element size el) to hold n + 1; 0, or -1 without memory */
static int grow(void *arr, uint32_t n, uint32_t *cap, size_t el)
{
    if (n < *cap) return 0;
    uint32_t c = *cap ? 2 * *cap : 16;
    void *g = realloc(*(void **)arr, (size_t)c * el);
    if (!g) return -1;
    *(void **)arr = g;
    *cap = c;
    return 0;
}

/* The communicator refs seen so far (a parent must be defined before its children):
 * open addressing, ref + 1 stored so that 0 is free (ref UINT32_MAX is never stored). */
typedef struct { uint32_t *slot; uint32_t cap, n; } refset;

static uint32_t mix(uint32_t x) { x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; return x; }

static int refset_has(const refset *s, uint32_t ref)
{
    for (uint32_t i = s->cap ? mix(ref) & (s->cap - 1) : 0; s->cap && s->slot[i];
         i = (i + 1) & (s->cap - 1))
        if (s->slot[i] == ref + 1) return 1;
    return 0;
}

static int refset_add(refset *s, uint32_t ref)
{
    if (refset_has(s, ref)) return 0;
    if (2 * (s->n + 1) > s->cap) {
        uint32_t cap = s->cap ? 2 * s->cap : 64;
        uint32_t *g = calloc(cap, sizeof *g);
        if (!g) return -1;
        for (uint32_t i = 0; i < s->cap; i++)
            if (s->slot[i]) {
                uint32_t j = mix(s->slot[i] - 1) & (cap - 1);
                while (g[j]) j = (j + 1) & (cap - 1);
                g[j] = s->slot[i];
            }
        free(s->slot);
        s->slot = g;
        s->cap = cap;
    }
    uint32_t j = mix(ref) & (s->cap - 1);
    while (s->slot[j]) j = (j + 1) & (s->cap - 1);
    s->slot[j] = ref + 1;
    s->n++;
    return 0;
}

/* A COMM record (words d, nw of them, at byte `at`): the layout communicators.c writes. */
static int check_comm(const int32_t *d, uint32_t nw, const mps_live_log *log,
                      const char *path, uint64_t at, char *why, size_t whylen)
{
    const uint64_t w = at + 8; /* the first word's byte */
    if (nw < 5) return bad(why, whylen, path, at, "COMM record of %u words, fewer than 5", nw);
    uint32_t ref = (uint32_t)d[0];
    if (ref <= 1 || ref == OTF2_UNDEFINED_COMM_REF)
        return bad(why, whylen, path, w, "COMM record: ref %u is a predefined one", ref);
    if (d[2] < 0 || (uint64_t)d[2] + 5 > nw)
        return bad(why, whylen, path, w + 8, "COMM record: %d members in a record of %u words",
                   d[2], nw);
    if (d[3] < 1 || (uint64_t)4 + (uint64_t)d[2] + (uint64_t)d[3] != nw)
        return bad(why, whylen, path, w + 12, "COMM record: %d name words where %u are left",
                   d[3], nw - 4 - (uint32_t)d[2]);
    for (int32_t k = 0; k < d[2]; k++) /* < 0: outside MPI_COMM_WORLD (MPI_UNDEFINED) */
        if (d[4 + k] >= (int64_t)log->h.size)
            return bad(why, whylen, path, w + 16 + 4 * (uint64_t)k, "COMM record: member %d "
                       "is rank %d of a job of %u ranks", k, d[4 + k], log->h.size);
    const char *name = (const char *)(d + 4 + d[2]);
    size_t len = strnlen(name, (size_t)d[3] * 4);
    uint64_t name_at = w + 16 + 4 * (uint64_t)d[2];
    if (len == (size_t)d[3] * 4)
        return bad(why, whylen, path, name_at, "COMM record: name not NUL-terminated");
    int32_t words = (int32_t)((len + 4) / 4); /* COMM_NAME_WORDS */
    if (d[3] != words && d[3] != words + 1)
        return bad(why, whylen, path, w + 12, "COMM record: %d name words for a name of %zu "
                   "bytes", d[3], len);
    if (d[3] == words + 1) { /* an intercommunicator: the size of its group A, last */
        int32_t na = d[4 + d[2] + d[3] - 1];
        if (na < 1 || na >= d[2])
            return bad(why, whylen, path, w + 4 * (uint64_t)(nw - 1), "COMM record: "
                       "intercommunicator's group A of %d of its %d members", na, d[2]);
    }
    return 0;
}

/* An OBJECT record (objects.c): kind, ref, x, y, n, then n payload words. */
static int check_object(const int32_t *d, uint32_t nw, const mps_live_log *log,
                        const char *path, uint64_t at, char *why, size_t whylen)
{
    const uint64_t w = at + 8;
    if (nw < 5) return bad(why, whylen, path, at, "OBJECT record of %u words, fewer than 5", nw);
    if (d[0] < MPS_LIVE_OBJ_WIN || d[0] > MPS_LIVE_OBJ_GROUP)
        return bad(why, whylen, path, w, "OBJECT record: unknown kind %d", d[0]);
    if (d[4] < 0 || (uint64_t)5 + (uint64_t)d[4] != nw)
        return bad(why, whylen, path, w + 16, "OBJECT record: %d payload words do not make "
                   "its %u words", d[4], nw);
    if (d[0] == MPS_LIVE_OBJ_GROUP) {
        for (int32_t k = 0; k < d[4]; k++) /* < 0: outside MPI_COMM_WORLD, as for COMM */
            if (d[5 + k] >= (int64_t)log->h.size)
                return bad(why, whylen, path, w + 20 + 4 * (uint64_t)k, "OBJECT record: group "
                           "member %d is rank %d of a job of %u ranks", k, d[5 + k],
                           log->h.size);
    } else if (d[4] == 0 || strnlen((const char *)(d + 5), (size_t)d[4] * 4) == (size_t)d[4] * 4) {
        return bad(why, whylen, path, w + 20, "OBJECT record: name not NUL-terminated");
    }
    return 0;
}

/* words from a record's payload, appended to *arr (*n words so far, capacity *cap) */
static int append_words(int32_t **arr, uint32_t *n, uint32_t *cap, const char *p, uint32_t nw)
{
    if (*n + nw > *cap) {
        uint32_t c = *cap ? *cap : 256;
        while (c < *n + nw) c *= 2; /* the file is at most MPS_LIVE_MAX_DEFS: no overflow */
        int32_t *g = realloc(*arr, (size_t)c * 4);
        if (!g) return -1;
        *arr = g;
        *cap = c;
    }
    memcpy(*arr + *n, p, (size_t)nw * 4);
    *n += nw;
    return 0;
}

int mps_live_parse(const void *data, size_t len, const char *path, int rank,
                   mps_live_log *log, char *why, size_t whylen)
{
    memset(log, 0, sizeof *log);
    const char *buf = data;
    struct { uint64_t at; } *site_at = NULL; /* each CALLSITE record's offset, for errors */
    mps_live_site *recs = NULL;              /* the CALLSITE records in file order */
    uint32_t nrecs = 0, rcap = 0, wcap = 0, ncap = 0, ccap = 0, ocap = 0, acap = 0;
    refset seen = {0};
    struct orphan { uint32_t parent; uint64_t at; } *orphans = NULL; /* parent not seen yet */
    uint32_t norphans = 0, orcap = 0;
    uint64_t regions_at = 0;
    int rc = -1;
    if (len > MPS_LIVE_MAX_DEFS) {
        bad(why, whylen, path, MPS_LIVE_MAX_DEFS, "%zu bytes, more than any log holds", len);
        goto out;
    }
    /* the header: the first record, written at MPI_Init */
    struct mps_live_header *h = &log->h;
    uint32_t head[2] = {0, 0};
    if (len >= 8) memcpy(head, buf, 8);
    if (len < 8 || head[0] != MPS_LIVE_HEADER || head[1] != sizeof *h || len < 8 + sizeof *h) {
        bad(why, whylen, path, 0, "not an mpiscope live log (no header record)");
        goto out;
    }
    memcpy(h, buf + 8, sizeof *h);
#define AT(field) (8 + (uint64_t)offsetof(struct mps_live_header, field))
    if (memcmp(h->magic, MPS_LIVE_MAGIC, 8) != 0) {
        bad(why, whylen, path, AT(magic), "not an mpiscope live log (bad magic)");
        goto out;
    }
    /* an older layout (version 1: one file window per batch, no ring) is refused whole,
     * not misread: the log is left as it is for the mpiscope that wrote it */
    if (h->version != MPS_LIVE_VERSION) {
        bad(why, whylen, path, AT(version),
            "a live log of version %u; this mpiscope reads version %u only (recover it with "
            "the mpiscope that wrote it)", h->version, MPS_LIVE_VERSION);
        goto out;
    }
    if (h->size == 0 || h->size > MPS_LIVE_MAX_RANKS) {
        bad(why, whylen, path, AT(size), "header: a job of %u ranks", h->size);
        goto out;
    }
    if (rank >= 0 && h->rank != (uint32_t)rank) {
        bad(why, whylen, path, AT(rank), "header: names rank %u, not %d", h->rank, rank);
        goto out;
    }
    if (h->rank >= h->size) {
        bad(why, whylen, path, AT(rank), "header: rank %u of a job of %u ranks", h->rank,
            h->size);
        goto out;
    }
    if (h->pid == 0 || h->pid > MAX_PID) {
        bad(why, whylen, path, AT(pid), "header: process id %u", h->pid);
        goto out;
    }
    if (h->tsc != 0 && h->tsc != 1) {
        bad(why, whylen, path, AT(tsc), "header: clock kind %d", h->tsc);
        goto out;
    }
    if (h->nregions == 0 || h->nregions > 0x10000 || h->init_fn >= h->nregions) {
        bad(why, whylen, path, AT(nregions), "header: region %u of %u", h->init_fn,
            h->nregions);
        goto out;
    }
    if (h->ns0 >= MAX_TIME) {
        bad(why, whylen, path, AT(ns0), "header: clock anchor at %llu ns",
            (unsigned long long)h->ns0);
        goto out;
    }
    if (h->window_bytes < 4096 || h->window_bytes % 4096 || h->window_bytes > MAX_WINDOW) {
        bad(why, whylen, path, AT(window_bytes), "header: event window of %llu bytes",
            (unsigned long long)h->window_bytes);
        goto out;
    }
    if (h->init_leave < h->init_enter || h->init_leave >= MAX_TIME ||
        h->off_init <= -(int64_t)MAX_TIME || h->off_init >= (int64_t)MAX_TIME) {
        bad(why, whylen, path, AT(init_enter), "header: MPI_Init from %llu to %llu ns, "
            "clock offset %lld ns", (unsigned long long)h->init_enter,
            (unsigned long long)h->init_leave, (long long)h->off_init);
        goto out;
    }
    size_t at = 8 + sizeof *h;
    while (at + 8 <= len) {
        memcpy(head, buf + at, 8);
        uint32_t type = head[0], n = head[1];
        static const uint32_t maxlen[] = {
            [MPS_LIVE_HEADER] = 0, [MPS_LIVE_STRING] = 4 + MAX_STRING,
            [MPS_LIVE_CALLSITE] = sizeof(struct mps_live_callsite) + PATH_MAX,
            [MPS_LIVE_COMM] = 4 * (4 + 2 * MPS_LIVE_MAX_RANKS + MAX_COMM_NAME / 4 + 2),
            [MPS_LIVE_COMM_NAME] = 4 + MAX_COMM_NAME,
            [MPS_LIVE_WINDOW] = sizeof(struct mps_live_window), [MPS_LIVE_REGIONS] = MAX_REGIONS,
            [MPS_LIVE_OBJECT] = 4 * (5 + MPS_LIVE_MAX_RANKS + PATH_MAX / 4 + 1),
            [MPS_LIVE_SPILLED] = 8};
        if (type == MPS_LIVE_HEADER) {
            bad(why, whylen, path, at, "a second header record");
            goto out;
        }
        if (type < MPS_LIVE_STRING || type > MPS_LIVE_SPILLED) {
            bad(why, whylen, path, at, "unknown record type %u", type);
            goto out;
        }
        if (n > maxlen[type]) {
            bad(why, whylen, path, at + 4, "%s record of %u bytes, more than one can hold (%u)",
                kind_name[type], n, maxlen[type]);
            goto out;
        }
        if (n > len - at - 8) break; /* the last record, cut short by the kill */
        const char *p = buf + at + 8;
        switch ((enum mps_live_rec)type) {
        case MPS_LIVE_HEADER:
            break; /* refused above */
        case MPS_LIVE_STRING: {
            uint32_t k;
            if (n < 4) { bad(why, whylen, path, at + 4, "STRING record of %u bytes", n); goto out; }
            memcpy(&k, p, 4);
            if (k >= MPS_LIVE_NKEYS) {
                bad(why, whylen, path, at + 8, "STRING record: unknown key %u", k);
                goto out;
            }
            free(log->str[k]);
            if (!(log->str[k] = dupn(p + 4, n - 4))) goto oom;
            break;
        }
        case MPS_LIVE_CALLSITE: {
            const size_t cs = sizeof(struct mps_live_callsite);
            if (n < cs) { bad(why, whylen, path, at + 4, "CALLSITE record of %u bytes", n); goto out; }
            if (memchr(p + cs, 0, n - cs)) {
                bad(why, whylen, path, at + 8 + cs, "CALLSITE record: a NUL byte in its path");
                goto out;
            }
            if (grow(&recs, nrecs, &rcap, sizeof *recs) || grow(&site_at, nrecs, &acap, sizeof *site_at))
                goto oom;
            memcpy(&recs[nrecs].cs, p, cs);
            site_at[nrecs].at = at;
            if (!(recs[nrecs].path = dupn(p + cs, n - cs))) goto oom;
            nrecs++;
            break;
        }
        case MPS_LIVE_COMM: {
            if (n % 4) { bad(why, whylen, path, at + 4, "COMM record of %u bytes", n); goto out; }
            uint32_t nw = n / 4;
            int32_t *d = malloc(n ? n : 4); /* aligned words */
            if (!d) goto oom;
            memcpy(d, p, n);
            if (check_comm(d, nw, log, path, at, why, whylen) != 0) {
                free(d);
                goto out;
            }
            uint32_t parent = (uint32_t)d[1], d0 = (uint32_t)d[0];
            free(d);
            /* a parent the log never defines is possible (its record could not be made),
             * one defined only later is not (communicators are logged as created): the
             * definitions are written in one pass, parents first */
            int later = parent != OTF2_UNDEFINED_COMM_REF && parent > 1 &&
                        !refset_has(&seen, parent);
            if (refset_add(&seen, (uint32_t)d0) ||
                append_words(&log->comms, &log->ncomm_words, &ccap, p, nw))
                goto oom;
            if (later) {
                if (grow(&orphans, norphans, &orcap, sizeof *orphans)) goto oom;
                orphans[norphans].parent = parent;
                orphans[norphans++].at = at;
            }
            break;
        }
        case MPS_LIVE_COMM_NAME: {
            if (n < 4 || memchr(p + 4, 0, n - 4)) {
                bad(why, whylen, path, at + 4, "COMM_NAME record of %u bytes%s", n,
                    n >= 4 ? " with a NUL byte in its name" : "");
                goto out;
            }
            if (grow(&log->names, log->nnames, &ncap, sizeof *log->names)) goto oom;
            size_t keep = n - 4 < sizeof log->names[0].name ? n - 4
                                                            : sizeof log->names[0].name - 1;
            memcpy(&log->names[log->nnames].ref, p, 4);
            memcpy(log->names[log->nnames].name, p + 4, keep); /* as comm_def keeps it */
            log->names[log->nnames].name[keep] = 0;
            log->nnames++;
            break;
        }
        case MPS_LIVE_REGIONS:
            if (log->regions) {
                bad(why, whylen, path, at, "a second REGIONS record");
                goto out;
            }
            if (!(log->regions = dupn(p, n))) goto oom;
            regions_at = at;
            break;
        case MPS_LIVE_WINDOW: {
            struct mps_live_window win;
            if (n != sizeof win) { bad(why, whylen, path, at + 4, "WINDOW record of %u bytes", n); goto out; }
            memcpy(&win, p, sizeof win);
            /* one per batch encoded, in order: window i + 1 starts after batch i */
            if (win.index != (uint64_t)log->nwin + 1 || win.stopped) {
                bad(why, whylen, path, at + 8, "WINDOW record for window %llu%s, where window "
                    "%u comes next", (unsigned long long)win.index,
                    win.stopped ? " (marked stopped)" : "", log->nwin + 1);
                goto out;
            }
            /* the clock anchors follow each other: the previous batch's start, its end,
             * this one's start (raw: TSC ticks or the same nanoseconds) */
            uint64_t raw = log->nwin ? log->win[log->nwin - 1].raw0 : h->raw0;
            uint64_t ns = log->nwin ? log->win[log->nwin - 1].ns0 : h->ns0;
            if (win.raw1 < raw || win.raw0 < win.raw1 || win.ns1 < ns || win.ns0 < win.ns1 ||
                win.ns0 >= MAX_TIME) {
                bad(why, whylen, path, at + 16, "WINDOW record: its clock anchors go back in "
                    "time");
                goto out;
            }
            if (grow(&log->win, log->nwin, &wcap, sizeof *log->win)) goto oom;
            log->win[log->nwin++] = win;
            break;
        }
        case MPS_LIVE_OBJECT: {
            if (n % 4) { bad(why, whylen, path, at + 4, "OBJECT record of %u bytes", n); goto out; }
            int32_t *d = malloc(n ? n : 4);
            if (!d) goto oom;
            memcpy(d, p, n);
            int r = check_object(d, n / 4, log, path, at, why, whylen);
            free(d);
            if (r) goto out;
            if (append_words(&log->objects, &log->nobject_words, &ocap, p, n / 4)) goto oom;
            break;
        }
        case MPS_LIVE_SPILLED: {
            uint64_t k;
            if (n != sizeof k) { bad(why, whylen, path, at + 4, "SPILLED record of %u bytes", n); goto out; }
            memcpy(&k, p, sizeof k);
            /* one per encode after the first, when window k - 1 is written out: at the
             * encode that ends batch k, before window k + 1 starts */
            if (k != (uint64_t)log->spilled + 1 || k != log->nwin) {
                bad(why, whylen, path, at + 8, "SPILLED record for %llu windows, where %u "
                    "were spilled and %u started", (unsigned long long)k, log->spilled,
                    log->nwin);
                goto out;
            }
            log->spilled = (uint32_t)k;
            break;
        }
        }
        at += 8 + (size_t)n;
    }
    if (!log->regions) {
        bad(why, whylen, path, len, "no REGIONS record (the log ends in MPI_Init)");
        goto out;
    }
    log->regions_at = regions_at;
    /* the ring holds two batches: every window before the last two is spilled */
    if (log->nwin > log->spilled + 1) {
        bad(why, whylen, path, len, "windows up to %u started, but only %u in the events "
            "file: window %u is in neither it nor the ring", log->nwin, log->spilled,
            log->spilled);
        goto out;
    }
    for (uint32_t i = 0; i < norphans; i++)
        if (refset_has(&seen, orphans[i].parent)) {
            bad(why, whylen, path, orphans[i].at + 12, "COMM record: its parent communicator "
                "%u is defined only after it", orphans[i].parent);
            goto out;
        }
    /* call-site ids are dense, in order of first sight, each logged once: every id is
     * below the number of CALLSITE records */
    for (uint32_t i = 0; i < nrecs; i++)
        if (recs[i].cs.id >= nrecs) {
            bad(why, whylen, path, site_at[i].at + 8, "CALLSITE record: id %u, but the log "
                "holds %u call sites", recs[i].cs.id, nrecs);
            goto out;
        }
    if (h->init_cs != UINT32_MAX && h->init_cs >= nrecs) {
        bad(why, whylen, path, AT(init_cs), "header: MPI_Init's call site %u, but the log "
            "holds %u call sites", h->init_cs, nrecs);
        goto out;
    }
    log->nsites = nrecs;
    if (nrecs && !(log->sites = calloc(nrecs, sizeof *log->sites))) goto oom;
    for (uint32_t i = 0; i < nrecs; i++) {
        mps_live_site *s = &log->sites[recs[i].cs.id];
        free(s->path); /* logged twice: the later record */
        *s = recs[i];
        recs[i].path = NULL;
    }
    rc = 0;
    goto out;
oom:
    snprintf(why, whylen, "%s: out of memory reading it", path);
out:
    for (uint32_t i = 0; i < nrecs; i++) free(recs[i].path);
    free(recs);
    free(site_at);
    free(seen.slot);
    free(orphans);
    if (rc) mps_live_log_free(log);
    return rc;
#undef AT
}

/* A regular file's bytes: never a FIFO or device (opening one could wait forever). */
static int read_file(const char *path, size_t max, char **data, size_t *len, char *why,
                     size_t whylen)
{
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(why, whylen, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(why, whylen, "%s: not a regular file", path);
        return -1;
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return bad(why, whylen, path, max, "%llu bytes, more than any log holds",
                   (unsigned long long)st.st_size);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        snprintf(why, whylen, "%s: out of memory reading its %zu bytes", path, n);
        return -1;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break; /* shrunk since fstat: read what is there */
        got += (size_t)r;
    }
    close(fd);
    *data = buf;
    *len = got;
    return 0;
}

int mps_live_read(const char *path, int rank, mps_live_log *log, char *why, size_t whylen)
{
    char *data;
    size_t len;
    memset(log, 0, sizeof *log);
    if (read_file(path, MPS_LIVE_MAX_DEFS, &data, &len, why, whylen) != 0) return -1;
    int rc = mps_live_parse(data, len, path, rank, log, why, whylen);
    free(data);
    return rc;
}

void mps_live_log_free(mps_live_log *log)
{
    for (int k = 0; k < MPS_LIVE_NKEYS; k++) free(log->str[k]);
    for (uint32_t i = 0; i < log->nsites; i++) free(log->sites[i].path);
    free(log->sites);
    free(log->comms);
    free(log->objects);
    free(log->names);
    free(log->win);
    free(log->regions);
    memset(log, 0, sizeof *log);
}

/* ------------------------------------------------------------------ events */

int mps_live_check_events_size(const mps_live_log *log, uint64_t size, const char *path,
                               char *why, size_t whylen)
{
    /* window i's place is made (ftruncate) at the encode that ends batch i, after the
     * SPILLED record for the windows before it and before window i + 1 starts */
    uint64_t w = log->h.window_bytes, have = size / w;
    if (size % w || have < log->spilled || have > (uint64_t)log->nwin + 1)
        return bad(why, whylen, path, size, "%llu bytes, where its definitions describe %u "
                   "spilled event windows of %llu bytes (of %u started)",
                   (unsigned long long)size, log->spilled, (unsigned long long)w,
                   log->nwin + 1);
    return 0;
}

int mps_live_check_ring_size(const mps_live_log *log, uint64_t size, const char *path,
                             char *why, size_t whylen)
{
    if (size != 2 * log->h.window_bytes)
        return bad(why, whylen, path, size, "%llu bytes, where its definitions describe two "
                   "slots of %llu bytes", (unsigned long long)size,
                   (unsigned long long)log->h.window_bytes);
    return 0;
}

/* Record kinds that annotate the next record and are no event of their own. */
static int annotation(unsigned kind)
{
    return kind == MPS_EV_PATH || kind == MPS_EV_ERROR || kind == MPS_EV_POLL ||
           kind == MPS_EV_SCHED;
}

int mps_live_check_window(const mps_live_log *log, const uint64_t *w, uint64_t nwords,
                          uint64_t k, const char *path, uint64_t at, uint64_t *end,
                          uint64_t *nevents, char *why, size_t whylen)
{
    const int last = k == log->nwin; /* the window the rank was killed writing */
    const uint64_t base = at; /* its first byte in the file */
    uint64_t *p = (uint64_t *)(uintptr_t)w;
    if (k > log->nwin)
        return bad(why, whylen, path, at, "window %llu: the log started %u",
                   (unsigned long long)k, log->nwin + 1);
    *end = (uint64_t)(mps_evbuf_valid_end(p, p + nwords, last) - p);
    *nevents = 0;
    /* every event was stamped after its batch's first anchor and, but in the last
     * window, before its last one */
    uint64_t lo = k ? log->win[k - 1].raw0 : log->h.raw0;
    uint64_t hi = k < log->nwin ? log->win[k].raw1 : UINT64_MAX;
    for (uint64_t i = 0; i < *end;) {
        uint64_t hd = w[i + 1];
        if (w[i] < lo || w[i] > hi)
            return bad(why, whylen, path, base + 8 * i, "window %llu: an event stamped outside "
                       "its batch's clock anchors", (unsigned long long)k);
        unsigned kind = hd & 0xff, region = (hd >> 16) & 0xffff;
        uint32_t a = (uint32_t)(hd >> 32);
        if ((kind == MPS_EV_ENTER || kind == MPS_EV_LEAVE) && region >= log->h.nregions)
            return bad(why, whylen, path, base + 8 * (i + 1), "window %llu: an event in region "
                       "%u of %u", (unsigned long long)k, region, log->h.nregions);
        if (kind == MPS_EV_ENTER && a != UINT32_MAX && a >= log->nsites)
            return bad(why, whylen, path, base + 8 * (i + 1), "window %llu: an event from call "
                       "site %u, but the log holds %u", (unsigned long long)k, a, log->nsites);
        *nevents += !annotation(kind);
        i += mps_evbuf_record_words(w + i);
    }
    /* after the last whole record the slot holds zeros (zeroed before its batch), but in
     * the rank's last window for what the kill interrupted: a record cut short, or the
     * records of the call it was in being taken back (zeroed: a failed call's, a polling
     * call's merged into the visit before it) */
    uint64_t from = *end + (last ? MPS_LIVE_TAIL_WORDS : 0);
    for (uint64_t i = from; i < nwords; i++)
        if (w[i])
            return bad(why, whylen, path, base + 8 * i, "window %llu: data after its last "
                       "whole event record", (unsigned long long)k);
    return 0;
}

int mps_live_check_free_slot(const mps_live_log *log, const uint64_t *w, const uint64_t *was,
                             uint64_t nwords, const char *path, uint64_t at, char *why,
                             size_t whylen)
{
    /* zeros, or the spilled batch it held while it is being zeroed; never a batch of
     * its own (that batch's WINDOW record would have been logged before any of it) */
    for (uint64_t i = 0; i < nwords; i++)
        if (w[i] && !(was && w[i] == was[i]))
            return bad(why, whylen, path, at + 8 * i, "window %u: data in a window the log "
                       "never started", log->nwin + 1);
    return 0;
}
