/* Bursts of small messages from rank 0 to rank 1, for `whatif --aggregate`.
 * Each iteration rank 0 sends PARTS 8-byte messages back to back (MPI_Send), rank 1
 * receives them one by one, then both compute WORK_US and meet in a barrier.
 * Usage: bursts ITERATIONS
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define PARTS 8
#define WORK_US 1000

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int iterations = argc > 1 ? atoi(argv[1]) : 10;
    double v[PARTS] = {0};
    for (int it = 0; it < iterations; it++) {
        for (int p = 0; p < PARTS; p++) {
            if (rank == 0) {
                v[p] = it + p;
                MPI_Send(&v[p], 1, MPI_DOUBLE, 1, p, MPI_COMM_WORLD); /* MARK:send */
            } else if (rank == 1) {
                MPI_Recv(&v[p], 1, MPI_DOUBLE, 0, p, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* MARK:recv */
            }
        }
        usleep(WORK_US);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 1) printf("last %g\n", v[PARTS - 1]);
    MPI_Finalize();
    return 0;
}
