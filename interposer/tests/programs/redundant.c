/* Collectives whose result is the same every iteration, into buffers that do or do not
 * already hold it (issue 31: a collective is redundant only where its receive buffer
 * already held the result):
 *   FRESH     MPI_Allgather into a buffer the program refills with -1 before each call
 *             (as mpi4py's test suite does): same input and result each time, not redundant
 *   KEPT      MPI_Allreduce into a buffer that keeps its last result: from the second
 *             iteration on, the call writes what is already there (redundant)
 *   CHANGING  MPI_Allreduce of the iteration number: a new result each time
 *   IKEPT     MPI_Iallreduce into a kept buffer, completed by MPI_Wait
 * Prints the sums so the results are used (and the job's output checkable). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define ITERATIONS 10

int main(int argc, char **argv)
{
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    double *fresh = malloc((size_t)n * sizeof *fresh);
    double mine = rank + 1.0, kept = 0, ikept = 0, changing = 0, sum = 0;
    for (int it = 0; it < ITERATIONS; it++) {
        for (int i = 0; i < n; i++) fresh[i] = -1;
        MPI_Allgather(&mine, 1, MPI_DOUBLE, fresh, 1, MPI_DOUBLE, MPI_COMM_WORLD); /* FRESH */
        MPI_Allreduce(&mine, &kept, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* KEPT */
        double x = it;
        MPI_Allreduce(&x, &changing, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* CHANGING */
        MPI_Request rq;
        MPI_Iallreduce(&mine, &ikept, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &rq); /* IKEPT */
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        for (int i = 0; i < n; i++) sum += fresh[i];
        sum += kept + changing + ikept;
    }
    if (rank == 0) printf("sum %.1f\n", sum);
    free(fresh);
    MPI_Finalize();
    return 0;
}
