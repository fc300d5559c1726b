/* Calls MPI only through libnames.so (nameslib.c). */
#include <mpi.h>
#include <stdio.h>

double names_allreduce(double x);

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("rank %d sum %g\n", rank, names_allreduce(rank + 1.0));
    MPI_Finalize();
    return 0;
}
