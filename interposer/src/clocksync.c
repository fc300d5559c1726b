/* clocksync.c — clock synchronisation: this rank's offset to rank 0's clock, measured at
 * MPI_Init and again at MPI_Finalize. */
#include "runtime.h"

#include <stdlib.h>

/* Offset of this rank's clock to rank 0's, from the ping-pong with the least round trip.
 * Collective on the private communicator. */
int64_t mps_clock_offset(void)
{
    int64_t best_off = 0;
    uint64_t best_rtt = UINT64_MAX;
    enum { ROUNDS = 8, TAG = 31415 };
    const int rank = mps_job.rank;
    const MPI_Comm icomm = mps_job.icomm;
    for (int r = 1; r < mps_job.size; r++) {
        for (int k = 0; k < ROUNDS; k++) {
            if (rank == 0) {
                uint64_t dummy, t0;
                PMPI_Recv(&dummy, 1, MPI_UINT64_T, r, TAG, icomm, MPI_STATUS_IGNORE);
                t0 = mps_mono_ns();
                PMPI_Send(&t0, 1, MPI_UINT64_T, r, TAG, icomm);
            } else if (rank == r) {
                uint64_t t1 = mps_mono_ns(), t0;
                PMPI_Send(&t1, 1, MPI_UINT64_T, 0, TAG, icomm);
                PMPI_Recv(&t0, 1, MPI_UINT64_T, 0, TAG, icomm, MPI_STATUS_IGNORE);
                uint64_t t2 = mps_mono_ns();
                if (t2 - t1 < best_rtt) {
                    best_rtt = t2 - t1;
                    best_off = (int64_t)t0 - (int64_t)((t1 + t2) / 2);
                }
            }
        }
    }
    /* An offset inside the round trip's uncertainty is no evidence of skew: ranks that
     * share a clock (one host, or namespaces on one kernel) must not be shifted by noise. */
    if (best_rtt != UINT64_MAX && (uint64_t)llabs(best_off) <= best_rtt / 2) best_off = 0;
    return best_off;
}

uint64_t mps_clock(void)
{
    return mps_mono_ns();
}
