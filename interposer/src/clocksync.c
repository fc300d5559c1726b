/* clocksync.c — clock synchronisation: this rank's offset to rank 0's clock, measured at
 * MPI_Init and again at MPI_Finalize. */
#include "runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The name of this process's CLOCK_MONOTONIC: one per boot of a kernel, shifted only by
 * a time namespace's offset; "" where the boot cannot be told (then no other run's times
 * can be said to line up with this one's). */
void mps_clock_name(char *out, size_t len)
{
    char boot[64] = "", line[128];
    long long sec = 0, nsec = 0;
    out[0] = 0;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f) return;
    if (!fgets(boot, sizeof boot, f)) boot[0] = 0;
    fclose(f);
    boot[strcspn(boot, "\n")] = 0;
    if (!boot[0]) return;
    /* absent without time namespaces: no offset */
    if ((f = fopen("/proc/self/timens_offsets", "r"))) {
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "monotonic %lld %lld", &sec, &nsec) == 2) break;
        fclose(f);
    }
    snprintf(out, len, "CLOCK_MONOTONIC boot %s timens %lld.%09lld", boot, sec, nsec);
}

uint64_t mps_clock(void)
{
    return mps_mono_ns();
}
