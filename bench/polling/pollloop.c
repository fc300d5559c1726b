/* pollloop.c — one rank polls with MPI_Test for a message to itself that it sends only
 * after N idle polls: the cost of a polling call that completes nothing, untraced and
 * traced. Prints the ns per idle call (the loop's time over N). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    int x = 1, y = 0, flag = 0;
    MPI_Request rq;
    MPI_Irecv(&y, 1, MPI_INT, 0, 5, MPI_COMM_SELF, &rq);
    double t0 = MPI_Wtime();
    for (long i = 0; i < n; i++) MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
    double t1 = MPI_Wtime();
    MPI_Send(&x, 1, MPI_INT, 0, 5, MPI_COMM_SELF);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    printf("%.1f\n", (t1 - t0) / (double)n * 1e9);
    MPI_Finalize();
    return flag;
}
