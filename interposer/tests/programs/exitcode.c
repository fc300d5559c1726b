/* A job that finishes MPI properly and then exits with code 3 on every rank. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, sum, one = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d counted %d ranks\n", rank, sum);
    MPI_Finalize();
    return 3;
}
