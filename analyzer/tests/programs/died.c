/* A 3-rank job that dies before MPI_Finalize, for test_died_jobs.py.
 * Every rank runs ROUNDS rounds of:
 *   - a ring exchange on MPI_COMM_WORLD: Irecv from the left, Isend to the right, Waitall
 *     (tag 1, 500 bytes)                                         -> 3 messages a round
 *   - an Allreduce on MPI_COMM_WORLD                             -> 1 instance, 3 ranks
 *   - on `half` (Comm_split by rank parity, key -rank: {2, 0} and {1}): a Send from comm
 *     rank 0 to comm rank 1 (world 2 -> 0, tag 7) and an Allreduce  -> 1 message, and
 *     instances of 2 ranks and of 1 rank
 * then, by mode (argv[1]):
 *   abort    rank 1 calls MPI_Abort(3) while the others wait in a barrier
 *   exit     rank 2 exits with status 1 (no MPI_Finalize) while the others wait in a
 *            receive from it
 * The rank that ends the job says so on stderr.
 * Usage: died abort|exit
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 4

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "abort";
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    int hrank, hsize;
    MPI_Comm_rank(half, &hrank);
    MPI_Comm_size(half, &hsize);
    char buf[1000] = {0};
    double x = rank, y = 0.0;
    for (int i = 0; i < ROUNDS; i++) {
        MPI_Request q[2];
        MPI_Irecv(buf, 500, MPI_CHAR, (rank + size - 1) % size, 1, MPI_COMM_WORLD, &q[0]);
        MPI_Isend(buf + 500, 500, MPI_CHAR, (rank + 1) % size, 1, MPI_COMM_WORLD, &q[1]);
        MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (hsize > 1 && hrank == 0) MPI_Send(&x, 1, MPI_DOUBLE, 1, 7, half);
        if (hsize > 1 && hrank == 1) MPI_Recv(&y, 1, MPI_DOUBLE, 0, 7, half, MPI_STATUS_IGNORE);
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, half);
    }
    if (strcmp(mode, "exit") == 0) {
        if (rank == 2) {
            fprintf(stderr, "rank 2 exiting early\n");
            exit(1);
        }
        MPI_Recv(&y, 1, MPI_DOUBLE, 2, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        fprintf(stderr, "rank 1 aborting\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
