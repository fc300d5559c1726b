/* Ping-pong between ranks 0 and 1 over the power-of-two sizes LO..HI bytes,
 * REPS round trips per size after one warm-up. Usage: pingpong LO HI REPS */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long lo = atol(argv[1]), hi = atol(argv[2]);
    int reps = atoi(argv[3]);
    char *buf = malloc(hi);
    memset(buf, rank, hi);
    for (long n = lo; n <= hi; n *= 2)
        for (int i = 0; i <= reps; i++)
            if (rank == 0) {
                MPI_Send(buf, (int)n, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)n, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buf, (int)n, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)n, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
            }
    free(buf);
    MPI_Finalize();
    return 0;
}
