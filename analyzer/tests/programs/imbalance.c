/* A small MPI program with known, injected problems, for the analyzer's tests.
 * Markers "MARK:<name>" sit on the lines whose call sites the tests look for.
 *   - the last rank computes EXTRA_US longer per iteration  -> wait at N x N / load imbalance
 *   - rank 1 sends LATE_US after rank 0 posted its receive  -> late sender (blocking)
 *   - rank 0 waits in MPI_Waitall for rank 1's late Isend   -> late sender (non-blocking)
 *   - a barrier directly after the allreduce                -> redundant_collective
 *   - the same config value broadcast every iteration       -> redundant_collective (hashes)
 * Usage: imbalance ITERATIONS
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define BASE_US 2000
#define EXTRA_US 15000
#define LATE_US 5000

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iterations = argc > 1 ? atoi(argv[1]) : 10;
    double residual = 0.0;
    for (int it = 0; it < iterations; it++) {
        usleep(BASE_US + (rank == size - 1 && size > 1 ? EXTRA_US : 0));
        double local = rank + it, global = 0.0;
        MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* MARK:allreduce */
        MPI_Barrier(MPI_COMM_WORLD); /* MARK:barrier */
        int config = 42;
        MPI_Bcast(&config, 1, MPI_INT, 0, MPI_COMM_WORLD); /* MARK:bcast */
        residual += global * config;
        if (size > 1 && rank < 2) {
            double v = it;
            if (rank == 1) {
                usleep(LATE_US);
                MPI_Send(&v, 1, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD); /* MARK:send */
            } else {
                MPI_Recv(&v, 1, MPI_DOUBLE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* MARK:recv */
            }
            MPI_Request req[2];
            double a = it, b = 0.0;
            if (rank == 1) {
                usleep(LATE_US);
                MPI_Isend(&a, 1, MPI_DOUBLE, 0, 8, MPI_COMM_WORLD, &req[0]);
                MPI_Irecv(&b, 1, MPI_DOUBLE, 0, 9, MPI_COMM_WORLD, &req[1]);
            } else {
                MPI_Irecv(&b, 1, MPI_DOUBLE, 1, 8, MPI_COMM_WORLD, &req[0]);
                MPI_Isend(&a, 1, MPI_DOUBLE, 1, 9, MPI_COMM_WORLD, &req[1]);
            }
            MPI_Waitall(2, req, MPI_STATUSES_IGNORE); /* MARK:waitall */
        }
    }
    if (rank == 0)
        printf("residual %g\n", residual);
    MPI_Finalize();
    return 0;
}
