/* postmortem.c — post-mortem recovery: a killed rank's crash-safe live log (live.h)
 * becomes the single-rank archive salvage() would have written (mpiscope-recover). */
#define _GNU_SOURCE
#include "runtime.h"
#include "outdir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Raw → trace time of one window of the log: the anchors around its batch, or for the
 * window the rank was killed in (no end anchor) the TSC rate measured here when this is
 * the same boot of the same machine, else the rate of the batch before, else measured. */
static void recover_timemap(const mps_live_log *log, uint64_t k, mps_timemap *tm,
                            uint64_t *prev_mult, int same_boot)
{
    memset(tm, 0, sizeof *tm);
    tm->tsc = log->h.tsc;
    tm->offset = log->h.off_init;
    tm->raw0 = log->h.raw0;
    tm->ns0 = log->h.ns0;
    const struct mps_live_window *end = NULL;
    for (uint32_t i = 0; i < log->nwin; i++) {
        if (log->win[i].index == k && !log->win[i].stopped) {
            tm->raw0 = log->win[i].raw0;
            tm->ns0 = log->win[i].ns0;
        }
        if (log->win[i].index == k + 1) end = &log->win[i];
    }
    if (end) { /* a batch encoded in the run: its own anchors */
        tm->raw1 = end->raw1;
        tm->ns1 = end->ns1;
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

int mps_recover(const char *outdir, int rank, char *msg, size_t msglen)
{
    char defs[PATH_MAX + 64], events[PATH_MAX + 64], part[PATH_MAX + 64], done[PATH_MAX + 64];
    snprintf(defs, sizeof defs, "%s/%s/rank%d.defs", outdir, MPS_LIVE_DIR, rank);
    snprintf(events, sizeof events, "%s/%s/rank%d.events", outdir, MPS_LIVE_DIR, rank);
    snprintf(part, sizeof part, "%s/%s/rank%d.part", outdir, MPS_LIVE_DIR, rank);
    snprintf(done, sizeof done, "%s/rank%d", outdir, rank);
    mps_live_log log;
    if (mps_live_read(defs, &log, msg, msglen) != 0) return -1;
    if ((int)log.h.rank != rank || log.h.size == 0 || log.h.window_bytes % 8) {
        snprintf(msg, msglen, "%s: header names rank %u of %u", defs, log.h.rank, log.h.size);
        mps_live_log_free(&log);
        return -1;
    }
    char *names = mps_region_names();
    int same_regions = names && log.regions && strcmp(names, log.regions) == 0;
    free(names);
    if (!same_regions) { /* region refs are mps_fn values: they must mean the same */
        snprintf(msg, msglen, "%s was written by another mpiscope build (its MPI functions "
                 "differ from this one's): recover it with the interposer that traced the "
                 "run", defs);
        mps_live_log_free(&log);
        return -1;
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
        mps_live_log_free(&log);
        return -1;
    }
    /* the events: the whole file, read-only; no events file is an empty run */
    uint64_t *map = NULL;
    size_t maplen = 0;
    int fd = open(events, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0) {
        maplen = (size_t)st.st_size;
        map = mmap(NULL, maplen, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) { map = NULL; maplen = 0; }
    }
    if (fd >= 0) close(fd);

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
    mps_comms.ndefs = 0;
    for (int i = 0; i < log.ncomm_words && i + 4 <= log.ncomm_words;) {
        const int32_t *d = log.comms + i;
        int n = COMM_REC_WORDS(d);
        if (d[2] < 0 || d[3] < 0 || i + n > log.ncomm_words) break;
        comm_def *c = mps_comm_def_slot();
        if (!c) break;
        memset(c, 0, sizeof *c);
        c->ref = (uint32_t)d[0];
        c->parent = (uint32_t)d[1];
        c->size = d[2];
        c->members = malloc((size_t)(d[2] ? d[2] : 1) * sizeof(int32_t));
        if (!c->members) break;
        memcpy(c->members, d + 4, (size_t)d[2] * sizeof(int32_t));
        snprintf(c->name, sizeof c->name, "%.*s", (int)(d[3] * 4), (const char *)(d + 4 + d[2]));
        c->inter_a = comm_rec_inter_a(d);
        for (uint32_t k = 0; k < log.nnames; k++)
            if (log.names[k].ref == c->ref) snprintf(c->name, sizeof c->name, "%s", log.names[k].name);
        mps_comms.ndefs++;
        i += n;
    }
    mps_objects_restore(log.objects, log.nobject_words);

    mps_remove_tree(part);
    if (mps_mkdir_p(part) != 0) {
        snprintf(msg, msglen, "cannot create %s: %s", part, strerror(errno));
        goto fail;
    }
    OTF2_Error_RegisterCallback(mps_otf2_error, NULL);
    mps_out.failed = 0;
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

    /* events: MPI_Init as written at Init, then the log's windows in order */
    uint64_t nevents = 0, window_words = log.h.window_bytes / 8;
    uint64_t nwindows = 1, prev_mult = 0;
    for (uint32_t i = 0; i < log.nwin; i++)
        if (!log.win[i].stopped && log.win[i].index + 1 > nwindows) nwindows = log.win[i].index + 1;
    if (OTF2_Archive_OpenEvtFiles(ar) == OTF2_SUCCESS) {
        OTF2_EvtWriter *w = OTF2_Archive_GetEvtWriter(ar, (OTF2_LocationRef)rank);
        OTF2_AttributeList *al = OTF2_AttributeList_New();
        if (w && al) {
            if (log.h.init_cs != UINT32_MAX)
                OTF2_AttributeList_AddSourceCodeLocationRef(al, MPS_ATTR_CALLSITE, log.h.init_cs);
            mps_rt.first_ts = log.h.init_enter;
            mps_rt.last_ts = log.h.init_leave;
            OTF2_EvtWriter_Enter(w, log.h.init_cs != UINT32_MAX ? al : NULL, mps_rt.first_ts,
                                 (OTF2_RegionRef)log.h.init_fn);
            OTF2_EvtWriter_Leave(w, NULL, mps_rt.last_ts, (OTF2_RegionRef)log.h.init_fn);
            for (uint64_t k = 0; k < nwindows && !mps_out.failed; k++) {
                uint64_t first = k * window_words;
                if (!map || first >= maplen / 8) break;
                uint64_t lim = first + window_words < maplen / 8 ? first + window_words
                                                                  : maplen / 8;
                int last = k + 1 == nwindows;
                mps_timemap tm;
                recover_timemap(&log, k, &tm, &prev_mult, same_boot);
                mps_evbuf b = {map + first, NULL, NULL};
                b.pos = mps_evbuf_valid_end(map + first, map + lim, last);
                b.end = b.pos;
                mps_evbuf_encode(&b, w, al, &tm, &mps_rt.last_ts, &mps_out.failed);
                for (uint32_t i = 0; i < log.nwin && !last; i++) /* the batch's flush */
                    if (log.win[i].index == k + 1 && !log.win[i].stopped) {
                        uint64_t t0 = log.win[i].ns1 + (uint64_t)mps_job.off_init;
                        uint64_t t1 = log.win[i].ns0 + (uint64_t)mps_job.off_init;
                        if (t0 < mps_rt.last_ts) t0 = mps_rt.last_ts;
                        if (t1 < t0) t1 = t0;
                        OTF2_EvtWriter_BufferFlush(w, NULL, t0, t1);
                        mps_rt.last_ts = t1;
                    }
            }
            OTF2_EvtWriter_GetNumberOfEvents(w, &nevents);
        }
        if (w) OTF2_Archive_CloseEvtWriter(ar, w);
        if (al) OTF2_AttributeList_Delete(al);
        for (int r = 0; r < mps_job.size; r++) {
            if (r == rank) continue;
            OTF2_EvtWriter *o = OTF2_Archive_GetEvtWriter(ar, (OTF2_LocationRef)r);
            if (o) OTF2_Archive_CloseEvtWriter(ar, o);
        }
        OTF2_Archive_CloseEvtFiles(ar);
    }

    /* definitions as salvage() writes them: call sites by this rank's local ids */
    OTF2_GlobalDefWriter *gw = OTF2_Archive_GetGlobalDefWriter(ar);
    mps_gstr_reset();
    uint32_t ncs = 0;
    for (uint32_t i = 0; i < log.nsites; i++)
        if (log.sites[i].cs.id + 1 > ncs) ncs = log.sites[i].cs.id + 1;
    if (log.h.init_cs != UINT32_MAX && log.h.init_cs + 1 > ncs) ncs = log.h.init_cs + 1;
    mps_offline_site *sites = calloc(ncs ? ncs : 1, sizeof *sites);
    mps_location *loc = calloc(ncs ? ncs : 1, sizeof *loc);
    uint32_t *order = NULL;
    int ncomms = 0;
    if (gw && sites && loc) {
        for (uint32_t i = 0; i < log.nsites; i++) {
            mps_offline_site *o = &sites[log.sites[i].cs.id];
            o->addr = log.sites[i].cs.addr;
            o->bias = log.sites[i].cs.bias;
            o->fbase = log.sites[i].cs.fbase;
            o->path = log.sites[i].path;
        }
        mps_callsite_resolve_offline(sites, ncs, loc);
        ncomms = mps_write_single_rank_defs(ar, gw, rank, nevents, loc, ncs, &order);
    }
    free(sites);
    free(loc);
    mps_write_local_defs(ar, NULL, order, ncomms, 0);
    OTF2_Archive_Close(ar);
    free(order);
    if (mps_out.failed || !gw) {
        snprintf(msg, msglen, "writing the OTF2 archive in %s failed", part);
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
    if (map) munmap(map, maplen);
    mps_live_log_free(&log);
    unlink(defs);
    unlink(events);
    snprintf(part, sizeof part, "%s/%s", outdir, MPS_LIVE_DIR);
    rmdir(part); /* once no other rank's log is left */
    return 0;
fail:
    mps_remove_tree(part);
    if (map) munmap(map, maplen);
    mps_live_log_free(&log);
    return -1;
}
