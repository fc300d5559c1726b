/* bench/overhead: the loop whose per-call overhead we measure, bare vs traced.
 * Per iteration: Irecv + Isend (8 B) to the ring neighbours + Waitall, Allreduce of one
 * double, and a Barrier every 10th iteration. Prints on rank 0:
 *   loop_s=<slowest rank's loop time> iterations=<n> calls=<wrapped MPI calls per rank> */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, iters = argc > 1 ? atoi(argv[1]) : 100000;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    double out = rank, in = 0, sum = 0, x;
    long calls = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        MPI_Request rq[2];
        MPI_Irecv(&in, 1, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(&out, 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &rq[1]);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        x = in + i;
        MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        calls += 4;
        if (i % 10 == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            calls++;
        }
    }
    double t = MPI_Wtime() - t0, tmax;
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("loop_s=%.6f iterations=%d calls=%ld check=%g\n", tmax, iters, calls, sum);
    MPI_Finalize();
    return 0;
}
