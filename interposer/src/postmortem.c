/* postmortem.c — post-mortem recovery: a killed rank's crash-safe live log (live.h)
 * becomes the single-rank archive salvage() would have written (mpiscope-recover).
 *
 * The log is hostile input (liveread.c checks every record of it first). The archive is
 * written beside the log, read back, and only put in place, and the log deleted, when it
 * holds every event the log held: a recovery either is whole or says in one line why not
 * and leaves the log as it was. */
#define _GNU_SOURCE
#include "runtime.h"
#include "outdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert((int)MPS_OBJ_WIN == (int)MPS_LIVE_OBJ_WIN && (int)MPS_OBJ_GROUP == (int)MPS_LIVE_OBJ_GROUP,
               "liveread.c checks OBJECT records by runtime.h's kinds");

/* A job may claim this many ranks without the files of its other ranks in DIR to bear it
 * out: recovering one rank writes an (empty) event and definition file for each rank of
 * the job, as salvage() does, so a header's size is the work it asks for. */
#define RANKS_UNSEEN 1024u

/* Raw → trace time of window k of the log: the anchors around its batch, or for the
 * window the rank was killed in (no end anchor) the TSC rate measured here when this is
 * the same boot of the same machine, else the rate of the batch before, else measured.
 * The log's windows are in order (liveread.c): window k starts at WINDOW record k - 1. */
static void recover_timemap(const mps_live_log *log, uint64_t k, mps_timemap *tm,
                            uint64_t *prev_mult, int same_boot)
{
    memset(tm, 0, sizeof *tm);
    tm->tsc = log->h.tsc;
    tm->offset = log->h.off_init;
    tm->raw0 = k ? log->win[k - 1].raw0 : log->h.raw0;
    tm->ns0 = k ? log->win[k - 1].ns0 : log->h.ns0;
    if (k < log->nwin) { /* a batch encoded in the run: its own anchors */
        tm->raw1 = log->win[k].raw1;
        tm->ns1 = log->win[k].ns1;
        mps_timemap_fix(tm);
    } else if (tm->tsc && same_boot) { /* both clocks ran on since the kill */
        mps_anchor(1, &tm->raw1, &tm->ns1);
        mps_timemap_fix(tm);
    } else if (tm->tsc && !*prev_mult) { /* another machine or boot: its rate stands in */
        uint64_t r0, n0, r1, n1;
        mps_anchor(1, &r0, &n0);
        struct timespec nap = {0, 20000000};
        nanosleep(&nap, NULL);
        mps_anchor(1, &r1, &n1);
        tm->mult = r1 > r0 ? (uint64_t)(((unsigned __int128)(n1 - n0) << 32) / (r1 - r0)) : 0;
    } else {
        tm->mult = *prev_mult;
    }
    if (tm->mult) *prev_mult = tm->mult;
}

/* "<prefix><digits><suffix>" → the number + 1 (a rank count), else 0 */
static uint64_t ranks_named(const char *name, const char *prefix, const char *suffix)
{
    size_t lp = strlen(prefix), ls = strlen(suffix), n = strlen(name);
    if (n <= lp + ls || strncmp(name, prefix, lp) || strcmp(name + n - ls, suffix)) return 0;
    uint64_t v = 0;
    for (size_t i = lp; i < n - ls; i++) {
        if (name[i] < '0' || name[i] > '9' || v > MPS_LIVE_MAX_RANKS) return 0;
        v = v * 10 + (uint64_t)(name[i] - '0');
    }
    return v + 1;
}

/* How many ranks the files in DIR bear out: the highest rank any file names (the live
 * logs, rank<N>/ archives, the job's own traces/N.evt), and the ranks a salvaged archive
 * defines (one event file each). */
static uint64_t ranks_in_dir(const char *outdir)
{
    static const struct { const char *sub, *prefix, *suffix; } names[] = {
        {MPS_LIVE_DIR, "rank", ".defs"}, {MPS_LIVE_DIR, "rank", ".events"},
        {"traces", "", ".evt"}, {"traces", "", ".def"}, {"", "rank", ""}};
    uint64_t most = 0;
    char path[PATH_MAX + 64];
    int counted = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/%s", outdir, names[i].sub);
        DIR *d = opendir(path);
        for (struct dirent *e; d && (e = readdir(d));) {
            uint64_t r = ranks_named(e->d_name, names[i].prefix, names[i].suffix);
            if (r > most) most = r;
            if (!r || *names[i].sub || counted) continue;
            /* one salvaged archive's event files: every rank of the job has one */
            char ev[PATH_MAX + 128];
            snprintf(ev, sizeof ev, "%s/%s/traces", outdir, e->d_name);
            DIR *t = opendir(ev);
            uint64_t nevt = 0;
            for (struct dirent *f; t && (f = readdir(t)) && nevt <= MPS_LIVE_MAX_RANKS;)
                nevt += ranks_named(f->d_name, "", ".evt") != 0;
            if (t) closedir(t);
            counted = nevt > 0;
            if (nevt > most) most = nevt;
        }
        if (d) closedir(d);
    }
    return most;
}

static int cmp_ref(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The communicators as the runtime's state would have held them at salvage(), with the
 * names MPI_Comm_set_name gave them (the last one given). -1 without memory. */
static int restore_comms(const mps_live_log *log)
{
    mps_comms.ndefs = 0;
    uint32_t ncomm = 0;
    for (uint32_t i = 0; i < log->ncomm_words; ncomm++) {
        const int32_t *d = log->comms + i;
        comm_def *c = mps_comm_def_slot();
        if (!c) return -1;
        memset(c, 0, sizeof *c);
        c->ref = (uint32_t)d[0];
        c->parent = (uint32_t)d[1];
        c->size = d[2];
        c->members = malloc((size_t)(d[2] ? d[2] : 1) * sizeof(int32_t));
        if (!c->members) return -1;
        memcpy(c->members, d + 4, (size_t)d[2] * sizeof(int32_t));
        snprintf(c->name, sizeof c->name, "%s", (const char *)(d + 4 + d[2]));
        c->inter_a = comm_rec_inter_a(d);
        mps_comms.ndefs++;
        i += (uint32_t)COMM_REC_WORDS(d);
    }
    if (!log->nnames || !ncomm) return 0;
    uint32_t (*by_ref)[2] = malloc((size_t)ncomm * sizeof *by_ref); /* {ref, index} */
    if (!by_ref) return -1;
    for (uint32_t c = 0; c < ncomm; c++) {
        by_ref[c][0] = mps_comms.defs[c].ref;
        by_ref[c][1] = c;
    }
    qsort(by_ref, ncomm, sizeof *by_ref, cmp_ref);
    for (uint32_t k = 0; k < log->nnames; k++) {
        uint32_t lo = 0, hi = ncomm;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (by_ref[mid][0] < log->names[k].ref) lo = mid + 1;
            else hi = mid;
        }
        for (; lo < ncomm && by_ref[lo][0] == log->names[k].ref; lo++)
            snprintf(mps_comms.defs[by_ref[lo][1]].name, sizeof mps_comms.defs[0].name, "%s",
                     log->names[k].name);
    }
    free(by_ref);
    return 0;
}

/* n bytes at off of fd, all of them (-1 otherwise) */
/* path opened for reading if it is a regular file (a FIFO would block, a device never
 * end), with its stat in *st; else -1 and why in msg */
static int open_regular(const char *path, struct stat *st, char *msg, size_t msglen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || fstat(fd, st) != 0) {
        snprintf(msg, msglen, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        snprintf(msg, msglen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    return fd;
}

static int read_at(int fd, void *buf, size_t n, uint64_t off)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

/* The events of location `rank` in the archive at dir, read back with OTF2's reader, its
 * global definitions read through: what `otf2-print` and `mpiscope analyze` will read. */
static int count_back(const char *dir, int rank, uint64_t *nevents)
{
    char anchor[PATH_MAX + 96];
    snprintf(anchor, sizeof anchor, "%s/traces.otf2", dir);
    *nevents = 0;
    OTF2_Reader *rd = OTF2_Reader_Open(anchor);
    if (!rd) return -1;
    uint64_t ndefs = 0;
    int ok = OTF2_Reader_SetSerialCollectiveCallbacks(rd) == OTF2_SUCCESS;
    OTF2_GlobalDefReader *gr = ok ? OTF2_Reader_GetGlobalDefReader(rd) : NULL;
    ok = gr && OTF2_Reader_ReadAllGlobalDefinitions(rd, gr, &ndefs) == OTF2_SUCCESS;
    if (gr) OTF2_Reader_CloseGlobalDefReader(rd, gr);
    ok = ok && OTF2_Reader_SelectLocation(rd, (OTF2_LocationRef)rank) == OTF2_SUCCESS &&
         OTF2_Reader_OpenEvtFiles(rd) == OTF2_SUCCESS;
    OTF2_EvtReader *er = ok ? OTF2_Reader_GetEvtReader(rd, (OTF2_LocationRef)rank) : NULL;
    ok = er && OTF2_Reader_ReadAllLocalEvents(rd, er, nevents) == OTF2_SUCCESS;
    if (er) OTF2_Reader_CloseEvtReader(rd, er);
    OTF2_Reader_Close(rd);
    return ok ? 0 : -1;
}

int mps_recover(const char *outdir, int rank, char *msg, size_t msglen)
{
    char defs[PATH_MAX + 64], events[PATH_MAX + 64], part[PATH_MAX + 64], done[PATH_MAX + 64];
    char ringf[PATH_MAX + 64];
    snprintf(defs, sizeof defs, "%s/%s/rank%d.defs", outdir, MPS_LIVE_DIR, rank);
    snprintf(events, sizeof events, "%s/%s/rank%d.events", outdir, MPS_LIVE_DIR, rank);
    snprintf(ringf, sizeof ringf, "%s/%s/rank%d.ring", outdir, MPS_LIVE_DIR, rank);
    snprintf(part, sizeof part, "%s/%s/rank%d.part", outdir, MPS_LIVE_DIR, rank);
    snprintf(done, sizeof done, "%s/rank%d", outdir, rank);
    mps_live_log log;
    if (mps_live_read(defs, rank, &log, msg, msglen) != 0) return -1;
    int fd = -1, rfd = -1, have_part = 0;
    uint64_t *win = NULL;
    mps_offline_site *sites = NULL;
    mps_location *loc = NULL;
    if (log.h.size > RANKS_UNSEEN) {
        uint64_t seen = ranks_in_dir(outdir);
        if (log.h.size > seen) {
            snprintf(msg, msglen, "%s: byte %zu: header: a job of %u ranks, but the files in "
                     "%s bear out %llu (more than %u ranks must have left theirs)", defs,
                     8 + offsetof(struct mps_live_header, size), log.h.size, outdir,
                     (unsigned long long)seen, RANKS_UNSEEN);
            goto fail;
        }
    }
    char *names = mps_region_names();
    int same_regions = names && log.h.nregions == MPS_FN_COUNT &&
                       strcmp(names, log.regions) == 0;
    free(names);
    if (!same_regions) { /* region refs are mps_fn values: they must mean the same */
        snprintf(msg, msglen, "%s: byte %llu: written by another mpiscope build (its MPI "
                 "functions differ from this one's): recover it with the interposer that "
                 "traced the run", defs, (unsigned long long)log.regions_at);
        goto fail;
    }
    /* a log is only left behind by a dead rank: one still running (same boot, its pid
     * alive and still the same program) is not recovered under its feet */
    char boot[64] = "", exe[PATH_MAX] = "", proc_exe[64];
    FILE *bf = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (bf) { if (!fgets(boot, sizeof boot, bf)) boot[0] = 0; fclose(bf); }
    boot[strcspn(boot, "\n")] = 0;
    int same_boot = *boot && log.str[MPS_LIVE_BOOT_ID] && strcmp(boot, log.str[MPS_LIVE_BOOT_ID]) == 0;
    snprintf(proc_exe, sizeof proc_exe, "/proc/%u/exe", log.h.pid);
    ssize_t xn = same_boot && kill((pid_t)log.h.pid, 0) == 0 ? readlink(proc_exe, exe, sizeof exe - 1) : -1;
    if (xn > 0 && log.str[MPS_LIVE_PROGRAM] && (exe[xn] = 0, strcmp(exe, log.str[MPS_LIVE_PROGRAM]) == 0)) {
        snprintf(msg, msglen, "still running (pid %u)", log.h.pid);
        goto fail;
    }
    /* the events: window by window, each checked before it is encoded; the windows
     * spilled from the events file, the last one or two from the ring */
    struct stat st, rst;
    if ((fd = open_regular(events, &st, msg, msglen)) < 0 ||
        (rfd = open_regular(ringf, &rst, msg, msglen)) < 0)
        goto fail;
    if (mps_live_check_events_size(&log, (uint64_t)st.st_size, events, msg, msglen) != 0 ||
        mps_live_check_ring_size(&log, (uint64_t)rst.st_size, ringf, msg, msglen) != 0)
        goto fail;
    const uint64_t wbytes = log.h.window_bytes, wwords = wbytes / 8;
    if (!(win = malloc((size_t)wbytes))) {
        snprintf(msg, msglen, "%s: out of memory for a window of %llu bytes", events,
                 (unsigned long long)wbytes);
        goto fail;
    }

    /* the rank as the runtime's state would have held it at salvage() */
    mps_job.rank = rank;
    mps_job.size = (int)log.h.size;
    mps_rt.tsc = log.h.tsc;
    mps_job.off_init = log.h.off_init;
    mps_job.t_init_local = log.h.t_init_local;
    mps_cfg.chunk_size = 1024 * 1024;
    snprintf(mps_out.outdir, sizeof mps_out.outdir, "%s", outdir);
    snprintf(mps_job.host, sizeof mps_job.host, "%s",
             log.str[MPS_LIVE_HOST] ? log.str[MPS_LIVE_HOST] : "?");
    mps_out.failed = 0;
    if (restore_comms(&log) != 0 || mps_objects_restore(log.objects, (int)log.nobject_words)) {
        snprintf(msg, msglen, "%s: out of memory for its communicators and objects", defs);
        goto fail;
    }
    sites = calloc(log.nsites ? log.nsites : 1, sizeof *sites);
    loc = calloc(log.nsites ? log.nsites : 1, sizeof *loc);
    if (!sites || !loc) {
        snprintf(msg, msglen, "%s: out of memory for its %u call sites", defs, log.nsites);
        goto fail;
    }
    for (uint32_t i = 0; i < log.nsites; i++) {
        sites[i].addr = log.sites[i].cs.addr;
        sites[i].bias = log.sites[i].cs.bias;
        sites[i].fbase = log.sites[i].cs.fbase;
        sites[i].path = log.sites[i].path;
    }

    mps_remove_tree(part);
    if (mps_mkdir_p(part) != 0) {
        snprintf(msg, msglen, "cannot create %s: %s", part, strerror(errno));
        goto fail;
    }
    have_part = 1;
    OTF2_Error_RegisterCallback(mps_otf2_error, NULL);
    OTF2_Archive *ar = mps_archive_open(part);
    if (!ar) {
        snprintf(msg, msglen, "cannot open an OTF2 archive in %s", part);
        goto fail;
    }
    OTF2_Archive_SetSerialCollectiveCallbacks(ar);
    OTF2_Archive_SetCreator(ar, "mpiscope " MPS_VERSION " (salvaged: killed, recovered "
                                "from its live log)");
    static const char *const props[MPS_LIVE_NKEYS] = {
        [MPS_LIVE_PROGRAM] = "MPISCOPE::PROGRAM", [MPS_LIVE_CMDLINE] = "MPISCOPE::CMDLINE",
        [MPS_LIVE_MPI_LIBRARY] = "MPISCOPE::MPI_LIBRARY",
        [MPS_LIVE_START_TIME] = "MPISCOPE::START_TIME", [MPS_LIVE_FILTERED] = "MPISCOPE::FILTERED"};
    for (int k = 0; k < MPS_LIVE_NKEYS; k++)
        if (props[k] && log.str[k]) OTF2_Archive_SetProperty(ar, props[k], log.str[k], true);
    OTF2_Archive_SetProperty(ar, "MPISCOPE::VERSION", MPS_VERSION, true);

    /* events: MPI_Init as written at Init, then the log's windows in order, each batch
     * but the last ended by its flush; `expect` counts what the log holds */
    uint64_t nevents = 0, expect = 2 + log.nwin, prev_mult = 0;
    int bad = 0, opened = OTF2_Archive_OpenEvtFiles(ar) == OTF2_SUCCESS;
    OTF2_EvtWriter *w = opened ? OTF2_Archive_GetEvtWriter(ar, (OTF2_LocationRef)rank) : NULL;
    OTF2_AttributeList *al = OTF2_AttributeList_New();
    if (w && al) {
        if (log.h.init_cs != UINT32_MAX)
            OTF2_AttributeList_AddSourceCodeLocationRef(al, MPS_ATTR_CALLSITE, log.h.init_cs);
        mps_rt.first_ts = log.h.init_enter;
        mps_rt.last_ts = log.h.init_leave;
        OTF2_EvtWriter_Enter(w, log.h.init_cs != UINT32_MAX ? al : NULL, mps_rt.first_ts,
                             (OTF2_RegionRef)log.h.init_fn);
        OTF2_EvtWriter_Leave(w, NULL, mps_rt.last_ts, (OTF2_RegionRef)log.h.init_fn);
        for (uint64_t k = 0; k <= log.nwin && !mps_out.failed && !bad; k++) {
            uint64_t end = 0, n = 0;
            const int spilled = k < log.spilled;
            const char *src = spilled ? events : ringf;
            const uint64_t at = spilled ? k * wbytes : (k & 1) * wbytes;
            errno = 0;
            if (read_at(spilled ? fd : rfd, win, (size_t)wbytes, at) != 0) {
                snprintf(msg, msglen, "%s: byte %llu: cannot read window %llu (%s)", src,
                         (unsigned long long)at, (unsigned long long)k,
                         errno ? strerror(errno) : "the file shrank");
                bad = 1;
                break;
            }
            if (mps_live_check_window(&log, win, wwords, k, src, at, &end, &n, msg, msglen)) {
                bad = 1;
                break;
            }
            expect += n;
            mps_timemap tm;
            recover_timemap(&log, k, &tm, &prev_mult, same_boot);
            mps_evbuf b = {win, win + end, win + end};
            mps_evbuf_encode(&b, w, al, &tm, &mps_rt.last_ts, &mps_out.failed);
            if (k < log.nwin) { /* the batch's flush */
                uint64_t t0 = log.win[k].ns1 + (uint64_t)mps_job.off_init;
                uint64_t t1 = log.win[k].ns0 + (uint64_t)mps_job.off_init;
                if (t0 < mps_rt.last_ts) t0 = mps_rt.last_ts;
                if (t1 < t0) t1 = t0;
                OTF2_EvtWriter_BufferFlush(w, NULL, t0, t1);
                mps_rt.last_ts = t1;
            }
        }
        /* the other slot, when no window was read from it: nothing of a batch the log
         * never started */
        uint64_t *was = NULL;
        const uint64_t at = ((log.nwin + 1) & 1) * wbytes;
        if (!bad && !mps_out.failed && (log.nwin == 0 || log.spilled == log.nwin)) {
            errno = 0;
            was = log.nwin ? malloc((size_t)wbytes) : NULL;
            if (log.nwin && !was) {
                snprintf(msg, msglen, "%s: out of memory for a window of %llu bytes", events,
                         (unsigned long long)wbytes);
                bad = 1;
            } else if (read_at(rfd, win, (size_t)wbytes, at) != 0 ||
                       (was && read_at(fd, was, (size_t)wbytes, (log.nwin - 1) * wbytes))) {
                snprintf(msg, msglen, "%s: byte %llu: cannot read its other slot (%s)", ringf,
                         (unsigned long long)at, errno ? strerror(errno) : "the file shrank");
                bad = 1;
            } else if (mps_live_check_free_slot(&log, win, was, wwords, ringf, at, msg, msglen)) {
                bad = 1;
            }
            free(was);
        }
        OTF2_EvtWriter_GetNumberOfEvents(w, &nevents);
    }
    if (w) OTF2_Archive_CloseEvtWriter(ar, w);
    if (al) OTF2_AttributeList_Delete(al);
    for (int r = 0; opened && r < mps_job.size; r++) {
        if (r == rank) continue;
        OTF2_EvtWriter *o = OTF2_Archive_GetEvtWriter(ar, (OTF2_LocationRef)r);
        if (o) OTF2_Archive_CloseEvtWriter(ar, o);
    }
    if (opened) OTF2_Archive_CloseEvtFiles(ar);

    /* definitions as salvage() writes them: call sites by this rank's local ids */
    OTF2_GlobalDefWriter *gw = bad ? NULL : OTF2_Archive_GetGlobalDefWriter(ar);
    mps_gstr_reset();
    uint32_t *order = NULL;
    int ncomms = 0;
    if (gw) {
        mps_callsite_resolve_offline(sites, log.nsites, loc);
        ncomms = mps_write_single_rank_defs(ar, gw, rank, nevents, loc, log.nsites, &order);
        free(loc); /* its strings were freed by mps_write_single_rank_defs */
        loc = NULL;
        mps_write_local_defs(ar, NULL, order, ncomms, 0);
    }
    OTF2_Archive_Close(ar);
    free(order);
    if (bad) goto fail;
    if (mps_out.failed || !gw || !w || !al) {
        snprintf(msg, msglen, "writing the OTF2 archive in %s failed: %s", part,
                 mps_out.werr > 0 ? strerror(mps_out.werr)
                 : mps_out.werr < 0 ? OTF2_Error_GetDescription((OTF2_ErrorCode)-mps_out.werr)
                                    : strerror(ENOMEM)); /* no writer or attribute list */
        goto fail;
    }
    /* whole or not at all: the archive must hold every event of the log, as read back */
    uint64_t back = 0;
    if (nevents != expect || count_back(part, rank, &back) != 0 || back != nevents) {
        snprintf(msg, msglen, "%s: the recovered trace in %s holds %llu events of the %llu "
                 "its log holds (%llu written)", events, part, (unsigned long long)back,
                 (unsigned long long)expect, (unsigned long long)nevents);
        goto fail;
    }
    /* in place in one step: a half-written rank<N>/ (killed while salvaging) goes first */
    mps_remove_tree(done);
    if (rename(part, done) != 0) {
        snprintf(msg, msglen, "cannot move %s to %s: %s", part, done, strerror(errno));
        goto fail;
    }
    snprintf(msg, msglen, "rank %d: %llu events, %.3f s from MPI_Init to its last event",
             rank, (unsigned long long)nevents, (double)(mps_rt.last_ts - log.h.init_enter) / 1e9);
    close(fd);
    close(rfd);
    free(win);
    free(sites);
    mps_live_log_free(&log);
    unlink(defs);
    unlink(events);
    unlink(ringf);
    snprintf(part, sizeof part, "%s/%s", outdir, MPS_LIVE_DIR);
    rmdir(part); /* once no other rank's log is left */
    return 0;
fail:
    if (have_part) mps_remove_tree(part);
    if (fd >= 0) close(fd);
    if (rfd >= 0) close(rfd);
    free(win);
    free(sites);
    free(loc);
    mps_live_log_free(&log);
    return -1;
}
