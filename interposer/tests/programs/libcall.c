/* A shared library that calls MPI: its call site must resolve inside the library. */
#include <mpi.h>

double lib_allreduce(double x)
{
    double sum = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* CALLSITE:lib_allreduce */
    return sum;
}
