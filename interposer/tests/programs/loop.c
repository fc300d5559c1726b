/* The benchmark's loop in small: per iteration a ring exchange of 8 bytes (Irecv + Isend
 * + Waitall) and an Allreduce of one double, a Barrier every 10th. argv[1] = iterations. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, iters = argc > 1 ? atoi(argv[1]) : 1000;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    double out = rank, in = 0, sum = 0, x;
    for (int i = 0; i < iters; i++) {
        MPI_Request rq[2];
        MPI_Irecv(&in, 1, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(&out, 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &rq[1]);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        x = in;
        MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (i % 10 == 0) MPI_Barrier(MPI_COMM_WORLD);
    }
    printf("rank %d iterations %d sum %g\n", rank, iters, sum);
    MPI_Finalize();
    return 0;
}
