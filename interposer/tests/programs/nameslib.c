/* A shared library calling MPI, built without -g for the call-site naming tests: an
 * exported function (in .dynsym) and a static one (in .symtab only). */
#include <mpi.h>

__attribute__((noinline)) static void hidden_barrier(void)
{
    MPI_Barrier(MPI_COMM_WORLD); /* CALLSITE:hidden_barrier */
}

double names_allreduce(double x)
{
    double sum = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* CALLSITE:names_allreduce */
    hidden_barrier();
    return sum;
}
