/* Ping-pong size sweep between rank 0 and rank 1 (bench/whatif): characterises a path.
 * usage: sweep [ROUNDS]   sizes 1 B .. 256 KiB (powers of 4), ROUNDS round trips each.
 * Prints "sweep BYTES ROUNDS SECONDS_PER_ROUNDTRIP" per size (rank 0's wall clock). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    const long max = 256L * 1024;
    char *buf = calloc((size_t)max, 1);
    for (long bytes = 1; bytes <= max; bytes *= 4) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < rounds && rank < 2; i++) {
            int peer = 1 - rank;
            if (rank == 0) {
                MPI_Send(buf, (int)bytes, MPI_CHAR, peer, 2, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)bytes, MPI_CHAR, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, (int)bytes, MPI_CHAR, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)bytes, MPI_CHAR, peer, 2, MPI_COMM_WORLD);
            }
        }
        if (rank == 0)
            printf("sweep %ld %d %.9f\n", bytes, rounds, (MPI_Wtime() - t0) / rounds);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
