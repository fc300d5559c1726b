/* The same work split unevenly or evenly, for `whatif --balance` against a measured run.
 * Each iteration rank r works (r + 1) x UNIT_US (imbalanced: the last rank the longest) or the ranks' mean,
 * (size + 1) / 2 x UNIT_US (balanced), then all meet in an Allreduce.
 * Usage: loadsplit ITERATIONS imbalanced|balanced
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UNIT_US 10000

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iterations = argc > 1 ? atoi(argv[1]) : 10;
    int balanced = argc > 2 && strcmp(argv[2], "balanced") == 0;
    double sum = 0.0;
    for (int it = 0; it < iterations; it++) {
        usleep(balanced ? (useconds_t)((size + 1) * UNIT_US / 2) : (useconds_t)((rank + 1) * UNIT_US));
        double local = rank, global = 0.0;
        MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* MARK:allreduce */
        sum += global;
    }
    if (rank == 0) printf("sum %g\n", sum);
    MPI_Finalize();
    return 0;
}
