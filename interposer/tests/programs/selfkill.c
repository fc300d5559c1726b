/* A rank killed outright after a known number of calls (test_live_ring.py): ITERATIONS
 * times MPI_Allreduce on MPI_COMM_SELF (one double), then "calls N" (flushed) and
 * SIGKILL to itself, outside any MPI call: every call it made returned, so a recovered
 * trace must hold exactly N of them. With a small MPISCOPE_BUFFER_SIZE the calls fill
 * many windows of the crash-safe log, far more than its ring of two holds.
 * Usage: selfkill ITERATIONS */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long iterations = argc > 1 ? atol(argv[1]) : 1000, calls = 0;
    double x = 1.0, y = 0.0;
    for (long i = 0; i < iterations; i++) {
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF);
        calls++;
    }
    printf("calls %ld\n", calls);
    fflush(stdout);
    raise(SIGKILL);
    MPI_Finalize(); /* never reached */
    return 0;
}
