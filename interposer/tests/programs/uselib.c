/* A PIE executable calling MPI itself and through libcall.so. */
#include <mpi.h>
#include <stdio.h>

double lib_allreduce(double x);

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double s = lib_allreduce(rank + 1.0);
    MPI_Barrier(MPI_COMM_WORLD); /* CALLSITE:main_barrier */
    printf("rank %d sum %g\n", rank, s);
    MPI_Finalize();
    return 0;
}
