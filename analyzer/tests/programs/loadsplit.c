/* The same work split unevenly or evenly, for `whatif --balance` against a measured run.
 * Each iteration rank r works (r + 1) x UNIT (imbalanced: the last rank the longest) or the ranks' mean,
 * (size + 1) / 2 x UNIT (balanced), then all meet in an Allreduce. The work is a sleep, and
 * UNIT (default 10 ms) can be made long enough that a busy machine's scheduling delays
 * stay small beside it.
 * Usage: loadsplit ITERATIONS imbalanced|balanced [UNIT_US]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iterations = argc > 1 ? atoi(argv[1]) : 10;
    int balanced = argc > 2 && strcmp(argv[2], "balanced") == 0;
    long unit = argc > 3 ? atol(argv[3]) : 10000;
    double sum = 0.0;
    for (int it = 0; it < iterations; it++) {
        usleep(balanced ? (useconds_t)((size + 1) * unit / 2) : (useconds_t)((rank + 1) * unit));
        double local = rank, global = 0.0;
        MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* MARK:allreduce */
        sum += global;
    }
    if (rank == 0) printf("sum %g\n", sum);
    MPI_Finalize();
    return 0;
}
