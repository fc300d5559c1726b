/* poll.c — polling loops that wait for a message late by construction: rank 1 sends
 * each message only after rank 0 tells it to go, and rank 0 tells it only after polling
 * POLLS times (every one of those completes nothing). Three loops: MPI_Test, MPI_Iprobe,
 * MPI_Testany. Rank 0 prints how often it called each: the ground truth. Run at 2 ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define POLLS 2000

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, go = 1, data = 0, flag = 0, idx = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm w = MPI_COMM_WORLD;
    long tests = 0, probes = 0, anys = 0;
    if (rank == 0) {
        MPI_Request rq;
        /* MPI_Test */
        MPI_Irecv(&data, 1, MPI_INT, 1, 1, w, &rq);
        for (flag = 0; !flag;) {
            MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
            if (++tests == POLLS) MPI_Send(&go, 1, MPI_INT, 1, 0, w);
        }
        /* MPI_Iprobe, then the receive */
        for (flag = 0; !flag;) {
            MPI_Iprobe(1, 2, w, &flag, MPI_STATUS_IGNORE);
            if (++probes == POLLS) MPI_Send(&go, 1, MPI_INT, 1, 0, w);
        }
        MPI_Recv(&data, 1, MPI_INT, 1, 2, w, MPI_STATUS_IGNORE);
        /* MPI_Testany */
        MPI_Request two[2];
        MPI_Irecv(&data, 1, MPI_INT, 1, 3, w, &two[0]);
        two[1] = MPI_REQUEST_NULL;
        for (flag = 0; !flag;) {
            MPI_Testany(2, two, &idx, &flag, MPI_STATUS_IGNORE);
            if (++anys == POLLS) MPI_Send(&go, 1, MPI_INT, 1, 0, w);
        }
        printf("MPI_Test %ld\nMPI_Iprobe %ld\nMPI_Testany %ld\n", tests, probes, anys);
    } else if (rank == 1) {
        for (int tag = 1; tag <= 3; tag++) {
            MPI_Recv(&go, 1, MPI_INT, 0, 0, w, MPI_STATUS_IGNORE);
            MPI_Send(&data, 1, MPI_INT, 0, tag, w);
        }
    }
    MPI_Finalize();
    return 0;
}
