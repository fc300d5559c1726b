/* init.c — start of tracing inside MPI_Init: the trace directory, configuration, the
 * archive, clock alignment, MPI_Init's own region and the crash-safe log. */
#define _GNU_SOURCE
#include "runtime.h"
#include "outdir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define OTF2_MPI_USE_PMPI
#include <otf2/OTF2_MPI_Collectives.h>
#include <otf2/OTF2_Pthread_Locks.h>

struct mps_job mps_job;

static void disable(void)
{
    mps_rt.state = 2;
}

static void live_property(enum mps_live_key k, const char *name, const char *value)
{
    (void)name;
    mps_live_string(k, value);
}

/* Crash-safe log (live.h), once MPI_Init's region is written: the event buffer becomes a
 * window onto DIR/.mpiscope-live/rank<N>.events and the header, properties and the call
 * sites seen so far go to rank<N>.defs. MPISCOPE_LIVE=0 keeps the anonymous buffer. */
static void live_start(enum mps_fn fn, uint32_t cs)
{
    const char *env = getenv("MPISCOPE_LIVE");
    /* a rank that must do without says so at the end (mps_live_said), with the trace */
    int rc = env && strcmp(env, "0") == 0
                 ? 1 /* off */
                 : mps_live_open(mps_out.outdir, mps_job.rank, &mps_rt.eb, mps_out.live_why,
                                 sizeof mps_out.live_why);
    if (rc >= 0) mps_out.live_why[0] = 0;
    if (rc == -2) { /* the buffer lost its memory: nowhere to record into */
        disable();
        return;
    }
    if (rc != 0) return;
    struct mps_live_header h = {
        .version = MPS_LIVE_VERSION, .rank = (uint32_t)mps_job.rank,
        .size = (uint32_t)mps_job.size, .pid = (uint32_t)mps_job.pid, .tsc = mps_rt.tsc,
        .init_fn = (uint32_t)fn, .init_cs = cs, .nregions = MPS_FN_COUNT,
        .off_init = mps_job.off_init, .t_init_local = mps_job.t_init_local,
        .init_enter = mps_rt.first_ts, .init_leave = mps_rt.last_ts, .raw0 = mps_rt.tm.raw0,
        .ns0 = mps_rt.tm.ns0, .window_bytes = mps_evbuf_window_bytes(&mps_rt.eb)};
    memcpy(h.magic, MPS_LIVE_MAGIC, sizeof h.magic);
    mps_live_record(MPS_LIVE_HEADER, &h, sizeof h, NULL, 0);
    char *names = mps_region_names();
    if (names) mps_live_record(MPS_LIVE_REGIONS, names, strlen(names), NULL, 0);
    free(names);
    mps_live_string(MPS_LIVE_HOST, mps_job.host);
    mps_run_properties(live_property);
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f)) boot[0] = 0;
        fclose(f);
    }
    boot[strcspn(boot, "\n")] = 0;
    mps_live_string(MPS_LIVE_BOOT_ID, boot); /* same boot: recovery can read the TSC rate */
    for (uint32_t i = 0; i < mps_sites.n; i++) mps_live_callsite(i, mps_sites.addr[i]);
}

/* Rank 0 names and creates the directory; everyone learns whether it worked. A job
 * started by MPI_Comm_spawn (`spawned`) inherits its parent's MPISCOPE_OUT, where the
 * parent's run is in progress: it writes its own run in DIR/spawn-N, and never treats
 * the parent's files as an earlier run. */
static int trace_directory(int spawned)
{
    char dir[PATH_MAX] = "";
    int ok = 1;
    if (mps_job.rank == 0) {
        const char *out = getenv("MPISCOPE_OUT");
        if (out && *out) {
            snprintf(dir, sizeof dir, "%s", out);
        } else {
            time_t t = time(NULL);
            struct tm tm;
            localtime_r(&t, &tm);
            strftime(dir, sizeof dir, "mpiscope-%Y%m%d-%H%M%S", &tm);
        }
        if (dir[0] != '/') { /* absolute, so every rank agrees whatever its cwd */
            char cwd[PATH_MAX], abs[PATH_MAX];
            if (getcwd(cwd, sizeof cwd) && snprintf(abs, sizeof abs, "%s/%s", cwd, dir) <
                                               (int)sizeof abs)
                memcpy(dir, abs, sizeof dir);
        }
        char moved[PATH_MAX];
        if (out && *out && strlen(out) >= sizeof dir) {
            /* cut to PATH_MAX it would name another directory: make none, say so */
            mps_warn_once("cannot write trace directory %.200s…: %s", out,
                          strerror(ENAMETOOLONG));
            ok = 0;
        } else if (mps_mkdir_p(dir) != 0) {
            mps_warn_once("cannot write trace directory %s: %s", dir, strerror(errno));
            ok = 0;
        } else if (spawned) {
            char sub[PATH_MAX];
            if (mps_claim_spawn_dir(dir, sub, sizeof sub) != 0) {
                mps_warn_once("cannot write a spawned job's trace directory in %s: %s", dir,
                              strerror(errno));
                ok = 0;
            } else {
                memcpy(dir, sub, sizeof dir);
            }
        } else if (mps_move_earlier_run(dir, getenv("MPISCOPE_JOB_OUTPUT"), moved,
                                        sizeof moved) != 0) {
            /* never deleted, never mixed: rather no trace than either */
            mps_warn_once("cannot move the earlier run in %s aside (%s)", dir, strerror(errno));
            ok = 0;
        } else if (moved[0]) {
            fprintf(stderr, "mpiscope: the earlier run in %s was moved to %s\n", dir, moved);
        }
    }
    PMPI_Bcast(&ok, 1, MPI_INT, 0, mps_job.icomm);
    PMPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, mps_job.icomm);
    if (ok) memcpy(mps_out.outdir, dir, sizeof dir);
    return ok;
}

void mps_init_after(enum mps_fn fn, uint64_t t_enter, void *ra)
{
    if (mps_rt.state != 0) return;
    const char *dis = getenv("MPISCOPE_DISABLE");
    if (dis && *dis && strcmp(dis, "0") != 0) { disable(); return; }
    int thread_level = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&thread_level);
    mps_rt.mt = thread_level == MPI_THREAD_MULTIPLE;
    mps_rt.nthreads = 1; /* this thread: location `rank` */
    PMPI_Comm_rank(MPI_COMM_WORLD, &mps_job.rank);
    mps_job.pid = getpid();
    PMPI_Comm_size(MPI_COMM_WORLD, &mps_job.size);
    PMPI_Comm_dup(MPI_COMM_WORLD, &mps_job.icomm);
    mps_job.have_icomm = 1;

    MPI_Comm parent = MPI_COMM_NULL;
    PMPI_Comm_get_parent(&parent);
    if (!trace_directory(parent != MPI_COMM_NULL)) { disable(); return; }
    mps_config_read();
    mps_evbuf_callpaths = mps_cfg.callpath_depth > 1;
    mps_out.pool_budget = 4 * mps_cfg.chunk_size;

    OTF2_Error_RegisterCallback(mps_otf2_error, NULL);
    OTF2_Archive *ar = mps_out.archive = mps_archive_open(mps_out.outdir);
    int good = ar != NULL;
    if (good) {
        OTF2_Archive_SetMemoryCallbacks(ar, &mps_mem_cbs, NULL);
        good = OTF2_MPI_Archive_SetCollectiveCallbacks(ar, mps_job.icomm, MPI_COMM_NULL) ==
               OTF2_SUCCESS;
        OTF2_Archive_SetCreator(ar, "mpiscope " MPS_VERSION);
        /* threads flush their own locations, at the same time under THREAD_MULTIPLE */
        if (good && thread_level >= MPI_THREAD_SERIALIZED)
            good = OTF2_Pthread_Archive_SetLockingCallbacks(ar, NULL) == OTF2_SUCCESS;
    }
    if (good) good = OTF2_Archive_OpenEvtFiles(ar) == OTF2_SUCCESS;
    if (good) {
        mps_out.evt = OTF2_Archive_GetEvtWriter(ar, (OTF2_LocationRef)mps_job.rank);
        mps_out.attrs = OTF2_AttributeList_New();
        good = mps_out.evt && mps_out.attrs &&
               mps_evbuf_init(&mps_rt.eb, mps_cfg.buffer_bytes) == 0;
        mps_rt.evt = mps_out.evt;
        mps_rt.attrs = mps_out.attrs;
        mps_rt.location = (uint64_t)mps_job.rank;
    }
    int all_good = 0;
    PMPI_Allreduce(&good, &all_good, 1, MPI_INT, MPI_MIN, mps_job.icomm);
    if (!all_good) {
        if (mps_job.rank == 0) mps_warn_once("cannot open OTF2 archive in %s", mps_out.outdir);
        mps_evbuf_free(&mps_rt.eb);
        disable();
        return;
    }

    PMPI_Barrier(mps_job.icomm);
    mps_job.off_init = mps_clock_offset();
    if (mps_job.rank == 0) mps_clock_name(mps_job.clock, sizeof mps_job.clock);
    PMPI_Bcast(mps_job.clock, sizeof mps_job.clock, MPI_CHAR, 0, mps_job.icomm);
    mps_job.clock[sizeof mps_job.clock - 1] = 0;
    mps_job.t_init_local = (int64_t)mps_mono_ns();
    tl_rec = &mps_rt;
    mps_rt.state = 1;
    mps_catch_stop_signals();
    /* MPI_Init's own region: entered before tracing could start, so stamped afterwards */
    if (tl_fcaller) { ra = tl_fcaller; tl_fcaller = NULL; }
    uint32_t cs = mps_callsite_id(ra);
    if (cs >= MPS_CS_PYTHON) cs = mps_py_callsite(cs, NULL); /* mpi4py: its Python caller */
    if (cs != UINT32_MAX)
        OTF2_AttributeList_AddSourceCodeLocationRef(mps_out.attrs, MPS_ATTR_CALLSITE, cs);
    mps_rt.first_ts = t_enter + (uint64_t)mps_job.off_init;
    OTF2_EvtWriter_Enter(mps_out.evt, mps_out.attrs, mps_rt.first_ts, (OTF2_RegionRef)fn);
    OTF2_EvtWriter_Leave(mps_out.evt, NULL, now(), (OTF2_RegionRef)fn);
    mps_rt.tsc = mps_tsc_usable();
    mps_rt.tm.tsc = mps_rt.tsc;
    mps_rt.tm.offset = mps_job.off_init;
    mps_anchor(mps_rt.tsc, &mps_rt.tm.raw0, &mps_rt.tm.ns0);
    mps_sched_start(&mps_rt);
    live_start(fn, cs);
}
