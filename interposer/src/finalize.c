/* finalize.c — the collective write-out inside MPI_Finalize: last batch, clock offset,
 * definitions unified at rank 0, and the ranks' agreement on whether it was written. */
#include "runtime.h"
#include "iosafe.h"
#include "outdir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* After a trace is written: the log was given up (no space, a file size limit, no
 * fallocate), said once for the job by the lowest rank that had to. Nothing is said when
 * the trace itself failed: its one line names the cause, the log no longer matters. */
void mps_live_said(void)
{
    const char *why = mps_out.live_why[0] ? mps_out.live_why : mps_live_lost();
    int mine = why ? mps_job.rank : mps_job.size, lowest = mps_job.size;
    PMPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, mps_job.icomm);
    if (why && mps_job.rank == lowest) {
        char line[PATH_MAX * 2 + 512];
        snprintf(line, sizeof line, "mpiscope: warning: crash-safe event log disabled in %s: "
                 "%s\n", mps_out.outdir, why);
        mps_to_stderr(line);
    }
}

/* Collective on the private communicator, once some rank could not write its part of the
 * archive: the ranks agree on a reason, rank 0 removes what was written (a half-written
 * archive must not look like a trace) and prints the one warning. Nobody writes any more
 * by then. */
static void write_failed(void)
{
    /* an errno (> 0) names the reason better than an OTF2-only code (< 0); ranks that
     * did not fail have none to offer */
    int why = !mps_out.failed ? INT_MIN : mps_out.werr ? mps_out.werr : EIO, all_why = 0;
    PMPI_Allreduce(&why, &all_why, 1, MPI_INT, MPI_MAX, mps_job.icomm);
    if (all_why == INT_MIN) all_why = EIO;
    if (mps_job.rank == 0 && mps_out.outdir[0]) mps_remove_archive(mps_out.outdir);
    if (mps_job.rank == 0 && !mps_out.warned) /* else it said why at MPI_Init already */
        mps_say_not_written(mps_out.outdir, all_why);
    mps_out.warned = 1; /* reported for every rank: the exit hook stays quiet */
}

void mps_finalize_before(void)
{
    if (!mps_job.have_icomm) return; /* never initialised, or disabled by MPISCOPE_DISABLE */
    mps_io_guard_begin();
    /* every thread's buffer, also those of threads that have ended (the others have
     * finished calling MPI: MPI_Finalize is the last call of the process) */
    for (struct mps_recorder *r = &mps_rt; r; r = r->next) {
        /* encode before the ranks agree, so a write error now skips the write-out too */
        if (mps_rt.state == 1)
            mps_flush_recorder(r, 0); /* inside MPI_Finalize: its time is the encoding's */
        mps_live_free_buffer(&r->eb); /* the main thread's: the live log's ring */
        mps_sched_stop(r);
    }
    int good = mps_rt.state == 1;
    int all_good = 0;
    /* a rank whose writer failed makes everyone skip the collective write-out */
    PMPI_Allreduce(&good, &all_good, 1, MPI_INT, MPI_MIN, mps_job.icomm);
    if (!all_good) {
        mps_live_close(1); /* no trace: the raw log would only fill the disk further */
        mps_rt.state = 2;
        write_failed();
        mps_job.have_icomm = 0;
        PMPI_Comm_free(&mps_job.icomm);
        mps_io_guard_end();
        return;
    }
    mps_job.off_fin = mps_clock_offset();
    mps_job.t_fin_local = (int64_t)mps_mono_ns();
    OTF2_EvtWriter_Leave(mps_out.evt, NULL, now(), (OTF2_RegionRef)MPS_FN_MPI_Finalize);
    mps_rt.state = 2; /* from here on our own calls are never recorded */

    uint64_t lo = UINT64_MAX, hi = 0;
    uint32_t nthreads = mps_rt.nthreads, t = 0;
    uint64_t *thread_events = calloc(nthreads, sizeof *thread_events);
    for (struct mps_recorder *r = &mps_rt; r; r = r->next, t++) {
        OTF2_EvtWriter_GetNumberOfEvents(r->evt, &r->nevents);
        OTF2_Archive_CloseEvtWriter(mps_out.archive, r->evt);
        if (thread_events && t < nthreads) thread_events[t] = r->nevents;
        if (r->first_ts && r->first_ts < lo) lo = r->first_ts;
        if (r->last_ts > hi) hi = r->last_ts;
    }
    uint64_t nevents = mps_rt.nevents;
    OTF2_Archive_CloseEvtFiles(mps_out.archive);

    /* time range after clock correction (linear between the two measured offsets) */
    const int rank = mps_job.rank, size = mps_job.size;
    const MPI_Comm icomm = mps_job.icomm;
    int64_t drift = mps_job.off_fin - mps_job.off_init;
    hi += (uint64_t)(drift > 0 ? drift : 0);
    uint64_t gmin = 0, gmax = 0;
    PMPI_Reduce(&lo, &gmin, 1, MPI_UINT64_T, MPI_MIN, 0, icomm);
    PMPI_Reduce(&hi, &gmax, 1, MPI_UINT64_T, MPI_MAX, 0, icomm);
    uint64_t *all_events = rank == 0 ? calloc((size_t)size, sizeof(uint64_t)) : NULL;
    PMPI_Gather(&nevents, 1, MPI_UINT64_T, all_events, 1, MPI_UINT64_T, 0, icomm);
    /* every rank's threads and their event counts, for the location definitions */
    uint32_t *all_threads = rank == 0 ? calloc((size_t)size, sizeof(uint32_t)) : NULL;
    PMPI_Gather(&nthreads, 1, MPI_UINT32_T, all_threads, 1, MPI_UINT32_T, 0, icomm);
    int *counts = NULL, *displs = NULL, ntotal = 0;
    uint64_t *all_thread_events = NULL;
    if (rank == 0) {
        counts = malloc((size_t)size * sizeof *counts);
        displs = malloc((size_t)size * sizeof *displs);
        for (int r = 0; r < size; r++) {
            counts[r] = (int)all_threads[r];
            displs[r] = ntotal;
            ntotal += counts[r];
        }
        all_thread_events = calloc((size_t)(ntotal ? ntotal : 1), sizeof *all_thread_events);
    }
    PMPI_Gatherv(thread_events, (int)nthreads, MPI_UINT64_T, all_thread_events, counts,
                 displs, MPI_UINT64_T, 0, icomm);
    if (rank == 0) mps_set_thread_locations(all_threads, all_thread_events);

    OTF2_GlobalDefWriter *gw = rank == 0 ? OTF2_Archive_GetGlobalDefWriter(mps_out.archive)
                                         : NULL;
    if (gw) mps_set_properties(mps_out.archive);
    uint32_t *map = NULL;
    uint32_t nscl = mps_unify_callsites(gw, &map);
    char *hosts = mps_gather_hosts();
    /* each host's CPUs beside its name: more ranks than CPUs is a verdict of its own */
    int cpus = mps_host_cpus();
    int *all_cpus = rank == 0 ? calloc((size_t)size, sizeof(int)) : NULL;
    PMPI_Gather(&cpus, 1, MPI_INT, all_cpus, 1, MPI_INT, 0, icomm);
    if (gw) mps_set_host_cpus(mps_out.archive, hosts, sizeof mps_job.host, all_cpus, size);
    free(all_cpus);
    int ncw = 0;
    int32_t *cw = mps_gather_comms(&ncw);
    mps_objects_gather();
    uint32_t *order = NULL;
    int ncomms = gw ? mps_write_global_defs(gw, gmin, gmax, hosts, all_events, cw, ncw, &order)
                    : 0;
    mps_unify_callpaths(gw, nscl); /* after the MPI regions: OTF2 wants refs in order */
    PMPI_Bcast(&ncomms, 1, MPI_INT, 0, icomm);
    if (!order) order = malloc((size_t)(ncomms ? ncomms : 1) * sizeof *order);
    PMPI_Bcast(order, ncomms, MPI_UINT32_T, 0, icomm);
    mps_objects_share_pairs();

    mps_write_local_defs(mps_out.archive, map, order, ncomms, 1);
    OTF2_Archive_CloseDefFiles(mps_out.archive);
    if (OTF2_Archive_Close(mps_out.archive) != OTF2_SUCCESS && !mps_out.failed)
        mps_out.failed = 1;
    mps_out.archive = NULL;
    /* a full disk mostly bites here, in the write-out (OTF2's POSIX substrate reports a
     * failed fwrite and a failed fclose, where buffered data meets the disk, through
     * mps_otf2_error): the ranks agree on it again */
    good = !mps_out.failed;
    PMPI_Allreduce(&good, &all_good, 1, MPI_INT, MPI_MIN, icomm);
    mps_live_close(1); /* written or not, the crash-safe log has served (no rank died) */
    if (!all_good) write_failed();
    else mps_live_said();
    if (all_good && rank == 0 && getenv("MPISCOPE_VERBOSE")) { /* encoding cost: bench */
        fprintf(stderr, "mpiscope: trace written to %s/traces.otf2\n", mps_out.outdir);
        fprintf(stderr, "mpiscope: rank 0: %llu events encoded in %.3f ms (%llu flushes "
                "during the run), %s clock\n", (unsigned long long)nevents,
                mps_rt.encode_ns / 1e6, (unsigned long long)mps_rt.flushes,
                mps_rt.tsc ? "tsc" : "monotonic");
    }
    free(map); free(hosts); free(cw); free(all_events); free(order);
    free(thread_events); free(all_threads); free(counts); free(displs);
    free(all_thread_events);
    mps_set_thread_locations(NULL, NULL);
    if (mps_out.attrs) OTF2_AttributeList_Delete(mps_out.attrs);
    mps_out.attrs = NULL;
    mps_job.have_icomm = 0;
    PMPI_Comm_free(&mps_job.icomm);
    mps_io_guard_end();
}
