/* Call paths: MPI_Allreduce reached through a communication layer from several callers
 * (test_callpath.py). Each MPI call's line carries a CALLSITE marker, each caller's call a
 * FRAME marker, so the test knows which file:line every frame must name. */
#include <mpi.h>
#include <stdio.h>

__attribute__((noinline)) static double comm_layer(double x)
{
    double sum = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* CALLSITE:allreduce */
    return sum;
}

__attribute__((noinline)) static double solver(double x)
{
    double s = 0;
    for (int i = 0; i < 3; i++) s += comm_layer(x + i); /* FRAME:solver */
    return s;
}

__attribute__((noinline)) static double other_caller(double x)
{
    return comm_layer(2 * x) + 1; /* FRAME:other */
}

/* n levels of recursion, then the layer: deeper than any recorded depth */
__attribute__((noinline)) static double recurse(int n, double x)
{
    if (n == 0) return comm_layer(x); /* FRAME:recurse_base */
    return recurse(n - 1, x) + 0; /* FRAME:recurse_step */
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double a = solver(rank);       /* FRAME:main_solver */
    double b = other_caller(rank); /* FRAME:main_other */
    double c = recurse(10, rank);  /* FRAME:main_recurse */
    MPI_Barrier(MPI_COMM_WORLD);   /* CALLSITE:barrier */
    if (rank == 0) printf("callpath: %g %g %g\n", a, b, c);
    MPI_Finalize();
    return 3;
}
