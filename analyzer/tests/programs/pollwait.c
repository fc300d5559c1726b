/* Rank 0 polls with MPI_Test for a message rank 1 sends late by construction: only after
 * rank 0 has told it (tag 8) that it made IDLE polls which completed nothing, and then
 * SLEEP_MS later. Rank 0 prints how many MPI_Test calls it made, the ground truth of the
 * polling finding's call count.
 * Usage: pollwait [SLEEP_MS]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define IDLE 1000 /* polls made before rank 1 may send: none can complete anything */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, v = 0, flag = 0, go = 1;
    long calls = 0;
    int sleep_ms = argc > 1 ? atoi(argv[1]) : 300;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        MPI_Request r;
        MPI_Irecv(&v, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, &r);
        while (!flag) {
            MPI_Test(&r, &flag, MPI_STATUS_IGNORE); /* MARK:test */
            calls++;
            if (calls == IDLE) {
                if (flag) { /* cannot happen: rank 1 has not sent yet */
                    fprintf(stderr, "pollwait: a poll completed before the message was sent\n");
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
                MPI_Send(&go, 1, MPI_INT, 1, 8, MPI_COMM_WORLD);
            }
        }
        printf("test_calls=%ld value=%d\n", calls, v);
    } else if (rank == 1) {
        MPI_Recv(&go, 1, MPI_INT, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        usleep((useconds_t)sleep_ms * 1000);
        v = 42;
        MPI_Send(&v, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
