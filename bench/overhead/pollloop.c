/* pollloop.c — an MPI_Test loop on a late message, for bench/overhead/polling.
 *
 *   pollloop [POLLS]   (singleton or any number of ranks: each rank polls on its own)
 *
 * Each rank posts a receive from itself and polls it POLLS times with MPI_Test before it
 * sends the message: by construction none of those calls completes anything (the message
 * is late). Prints the loop's time and ns per call: `poll_s=<s> calls=<n> ns_per_call=<x>`.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, v = 0, w = 1, flag = 0;
    long polls = argc > 1 ? atol(argv[1]) : 1000000;
    MPI_Request r;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Irecv(&v, 1, MPI_INT, rank, 7, MPI_COMM_WORLD, &r);
    MPI_Test(&r, &flag, MPI_STATUS_IGNORE); /* warm-up: first-call costs out of the loop */
    double t0 = MPI_Wtime();
    for (long i = 0; i < polls; i++) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    double t = MPI_Wtime() - t0;
    if (flag) {
        fprintf(stderr, "pollloop: a poll completed before the message was sent\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Send(&w, 1, MPI_INT, rank, 7, MPI_COMM_WORLD);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    if (rank == 0) printf("poll_s=%.6f calls=%ld ns_per_call=%.1f\n", t, polls, t / polls * 1e9);
    MPI_Finalize();
    return 0;
}
