/* Ping-pong from rank 0 to every other rank in turn, for tests/test_cluster.py.
 * usage: pingpong BYTES ROUNDTRIPS
 * Prints one line per rank "host RANK NAME" and one per peer
 * "pingpong PEER BYTES ROUNDTRIPS SECONDS" (rank 0's wall clock over the round trips). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long bytes = argc > 1 ? atol(argv[1]) : 1 << 20;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    char *buf = calloc((size_t)bytes, 1);

    char name[MPI_MAX_PROCESSOR_NAME];
    int len;
    MPI_Get_processor_name(name, &len);
    char *names = rank == 0 ? malloc((size_t)size * MPI_MAX_PROCESSOR_NAME) : NULL;
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME,
               MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0)
        for (int r = 0; r < size; r++)
            printf("host %d %s\n", r, names + (size_t)r * MPI_MAX_PROCESSOR_NAME);

    for (int peer = 1; peer < size; peer++) {
        MPI_Barrier(MPI_COMM_WORLD);
        /* a small exchange first: connection set-up is not part of the timing */
        if (rank == 0) {
            MPI_Send(buf, 1, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, 1, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            double t0 = MPI_Wtime();
            for (int i = 0; i < rounds; i++) {
                MPI_Send(buf, (int)bytes, MPI_CHAR, peer, 2, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)bytes, MPI_CHAR, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            printf("pingpong %d %ld %d %.6f\n", peer, bytes, rounds, MPI_Wtime() - t0);
        } else if (rank == peer) {
            MPI_Recv(buf, 1, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 1, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
            for (int i = 0; i < rounds; i++) {
                MPI_Recv(buf, (int)bytes, MPI_CHAR, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)bytes, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    fflush(stdout);
    free(names);
    free(buf);
    MPI_Finalize();
    return 0;
}
