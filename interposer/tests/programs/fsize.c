/* Enough traced calls for a trace larger than a small RLIMIT_FSIZE (argv[1] Allreduces),
 * then, if argv[2] is given, rank 0 writes that many bytes to ./own.dat itself: past the
 * limit the program's own write raises SIGXFSZ, traced or not. Exits 3. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, iters = argc > 1 ? atoi(argv[1]) : 1000, one = 1, sum = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < iters; i++)
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d sum %d\n", rank, sum);
    fflush(stdout);
    if (rank == 0 && argc > 2) {
        static char block[4096];
        long left = atol(argv[2]);
        FILE *f = fopen("own.dat", "w");
        for (; f && left > 0; left -= (long)sizeof block)
            if (fwrite(block, sizeof block, 1, f) != 1 || fflush(f) != 0) break;
        if (f) fclose(f);
        printf("rank 0 wrote own.dat\n");
    }
    MPI_Finalize();
    return 3;
}
