/* salvage.c — a rank ending alone (MPI_Abort, exit without MPI_Finalize, a stop signal)
 * writes its own single-rank archive DIR/rank<N>/ with no collective call. */
#define _GNU_SOURCE
#include "runtime.h"
#include "iosafe.h"
#include "outdir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* MPI_Abort or exit without MPI_Finalize: nothing collective is possible any more, so
 * this rank flushes its events and turns them into a readable single-rank archive of its
 * own, DIR/rank<N>/traces.otf2, with definitions it can make alone (local MPI calls only:
 * call sites as this rank sees them, the communicators it belongs to). The other ranks
 * are defined with empty event files. */
static void salvage(void)
{
    const int rank = mps_job.rank;
    char dir[PATH_MAX + 32], from[PATH_MAX + 64], to[PATH_MAX + 96];
    snprintf(dir, sizeof dir, "%s/rank%d", mps_out.outdir, rank);
    if (mps_mkdir_p(dir) != 0) return;
    OTF2_Archive *ar = mps_archive_open(dir);
    if (!ar) return;
    OTF2_Archive_SetSerialCollectiveCallbacks(ar);
    OTF2_Archive_SetCreator(ar, "mpiscope " MPS_VERSION " (salvaged: no MPI_Finalize)");
    mps_set_properties(ar);

    /* call sites: global id = this rank's local id */
    OTF2_GlobalDefWriter *gw = OTF2_Archive_GetGlobalDefWriter(ar);
    mps_location *loc = calloc(mps_sites.n ? mps_sites.n : 1, sizeof *loc);
    mps_gstr_reset();
    uint32_t *order = NULL;
    int ncomms = 0;
    if (gw && loc) {
        mps_callsite_resolve(mps_sites.addr, mps_sites.n, loc);
        ncomms = mps_write_single_rank_defs(ar, gw, rank, mps_out.nevents_closed, loc,
                                            mps_sites.n, &order);
    }
    free(loc);
    if (OTF2_Archive_OpenEvtFiles(ar) == OTF2_SUCCESS) {
        for (int r = 0; r < mps_job.size; r++) {
            if (r == rank) continue;
            OTF2_EvtWriter *w = OTF2_Archive_GetEvtWriter(ar, (OTF2_LocationRef)r);
            if (w) OTF2_Archive_CloseEvtWriter(ar, w);
        }
        OTF2_Archive_CloseEvtFiles(ar);
    }
    mps_write_local_defs(ar, NULL, order, ncomms, 0);
    OTF2_Archive_Close(ar);
    free(order);
    snprintf(from, sizeof from, "%s/traces/%d.evt", mps_out.outdir, rank);
    snprintf(to, sizeof to, "%s/traces/%d.evt", dir, rank);
    if (rename(from, to) != 0) { /* leave no anchor that promises events it has not got */
        snprintf(to, sizeof to, "%s/traces.otf2", dir);
        unlink(to);
    }
}

/* This rank alone could not write (its trace or its salvaged archive) and no collective
 * is possible any more: it says so itself, once. */
static void write_failed_alone(const char *dir)
{
    if (mps_out.warned) return;
    mps_out.warned = 1;
    mps_say_not_written(dir, mps_out.werr ? mps_out.werr : EIO);
}

void mps_abort_before(void)
{
    if (mps_rt.state != 1) {
        /* failed mid-run, then never reached MPI_Finalize, where it would be reported */
        if (mps_out.failed && mps_job.have_icomm && getpid() == mps_job.pid)
            write_failed_alone(mps_out.outdir);
        return;
    }
    mps_io_guard_begin();
    LOCK();
    mps_rt.state = 2; /* our own calls below are never recorded */
    /* the main thread's location only: the crash-safe log and the salvaged archive are
     * its (other threads' events of this run are lost with the process) */
    mps_flush_recorder(&mps_rt, 0);
    mps_live_free_buffer(&mps_rt.eb);
    OTF2_EvtWriter_GetNumberOfEvents(mps_out.evt, &mps_out.nevents_closed);
    OTF2_Archive_CloseEvtWriter(mps_out.archive, mps_out.evt);
    UNLOCK();
    salvage();
    if (mps_out.failed) { /* a half-written salvaged archive must not look like a trace */
        char dir[PATH_MAX + 32];
        snprintf(dir, sizeof dir, "%s/rank%d", mps_out.outdir, mps_job.rank);
        mps_remove_tree(dir);
        write_failed_alone(dir);
    }
    /* the crash-safe log goes once salvage() has left a complete archive (the same test
     * the reader makes); else `mpiscope recover` still has it */
    char evt[PATH_MAX + 64];
    snprintf(evt, sizeof evt, "%s/rank%d/traces/%d.evt", mps_out.outdir, mps_job.rank,
             mps_job.rank);
    mps_live_close(access(evt, F_OK) == 0);
    mps_io_guard_end();
}

/* ---------------------------------------------------------------- signals */

/* The signals launchers and batch systems stop a job with (mpirun sends SIGTERM to
 * the surviving ranks when one dies; SIGXCPU is a time limit). The rank salvages its
 * events as at MPI_Abort, then dies of the same signal, so the job ends as it would
 * untraced. Crash signals are left alone: after a SIGSEGV the heap cannot be trusted. */
static const int stop_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGXCPU};

static void on_stop_signal(int sig)
{
    int saved = errno;
    /* not while our own code is mid-way through the buffers (an encoding batch, or the
     * trace lock held by the interrupted thread itself) */
    int free_to_go = getpid() == mps_job.pid && mps_rt.state == 1 && !mps_rt.encoding &&
                     (!mps_rt.mt || pthread_mutex_trylock(&mps_rt.lock) == 0);
    if (free_to_go) {
        if (mps_rt.mt) pthread_mutex_unlock(&mps_rt.lock);
        mps_evbuf_drop_unfinished(&mps_rt.eb); /* the interrupted call may be mid-record */
        mps_abort_before();
    }
    errno = saved;
    raise(sig); /* SA_RESETHAND has restored the default action: delivered on return */
}

/* Only where the program (or the MPI library) left the default action: a handler of
 * theirs is never replaced. */
void mps_catch_stop_signals(void)
{
    for (size_t i = 0; i < sizeof stop_signals / sizeof *stop_signals; i++) {
        struct sigaction old, sa;
        if (sigaction(stop_signals[i], NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
            old.sa_handler != SIG_DFL)
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND | SA_RESTART;
        sigaction(stop_signals[i], &sa, NULL);
    }
}

static void at_exit(void)
{
    /* a child fork()ed by the program and exiting must not salvage (and move away) the
     * parent's event file */
    if (getpid() == mps_job.pid) mps_abort_before();
}

__attribute__((constructor)) static void mps_register_exit(void)
{
    /* cheap and harmless in non-MPI processes (mpirun, orted): only registers a hook */
    atexit(at_exit);
}
