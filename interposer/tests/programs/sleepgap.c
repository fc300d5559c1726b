/* A known pause between two MPI calls: argv[1] Allreduces first (to fill and flush a
 * small event buffer), then Barrier, sleep 200 ms, Barrier. Each rank prints the pause
 * as its own CLOCK_MONOTONIC saw it, and its clock readings around the Barriers, so a
 * test can hold the trace's times against them. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n = argc > 1 ? atoi(argv[1]) : 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double x = rank, sum = 0;
    for (int i = 0; i < n; i++) MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    long long before = mono();
    MPI_Barrier(MPI_COMM_WORLD);
    long long t0 = mono();
    struct timespec pause = {0, 200000000};
    nanosleep(&pause, NULL);
    long long t1 = mono();
    MPI_Barrier(MPI_COMM_WORLD);
    long long after = mono();
    printf("rank %d gap_ns %lld\n", rank, t1 - t0);
    /* where the two Barriers must lie: the first left in [before, t0], the second
     * entered in [t1, after] (wider only when the machine delays this process) */
    printf("rank %d window_ns %lld %lld %lld %lld\n", rank, before, t0, t1, after);
    MPI_Finalize();
    return 0;
}
