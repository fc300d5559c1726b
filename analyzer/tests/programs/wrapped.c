/* An application that calls MPI through its own message-passing layer, as real codes do
 * (CP2K's message_passing module, LAMMPS's Comm classes): main -> step() -> comm_sum()
 * -> MPI_Allreduce. step() reduces three things, each into its own buffer that keeps the
 * last result; the first is the same every iteration and its buffer already holds it,
 * so its reductions are provably redundant — at step()'s line, not at comm_sum's one
 * MPI_Allreduce line that every reduction shares. */
#include <mpi.h>
#include <stdio.h>

__attribute__((noinline)) static double comm_sum(double x, double *r)
{
    MPI_Allreduce(&x, r, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* COMM_SUM_LINE */
    return *r;
}

static double mass, energy, count; /* the last results, kept */

__attribute__((noinline)) static double step(int rank, int it)
{
    comm_sum(1.0 + rank, &mass);                    /* STEP_MASS_LINE: never changes */
    comm_sum(0.5 * rank + it, &energy);             /* STEP_ENERGY_LINE */
    comm_sum((double)((it * 7 + rank) % 5), &count); /* STEP_COUNT_LINE */
    return mass + energy + count;
}

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double total = 0;
    for (int it = 0; it < 200; it++) total += step(rank, it); /* MAIN_LOOP_LINE */
    if (rank == 0) printf("total %.1f\n", total);
    MPI_Finalize();
    return 0;
}
