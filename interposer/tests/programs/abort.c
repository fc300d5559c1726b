/* Rank 1 (or 0 when alone) calls MPI_Abort(7) after some traced calls; the others wait
 * in a receive that never completes until the launcher kills them. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, one = 1, sum;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == (size > 1 ? 1 : 0)) {
        printf("rank %d aborting\n", rank);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 7); /* CALLSITE:abort */
    }
    MPI_Recv(&one, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
