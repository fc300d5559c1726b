/* spawn.c — a job that spawns 2 children (itself, argument "child") at 2 ranks: the
 * parents' rank 0 and the children's rank 0 exchange a message over the
 * intercommunicator, the children reduce among themselves. Each job prints a line. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, x = 7, y = 0;
    MPI_Comm parent, inter;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_get_parent(&parent);
    if (parent == MPI_COMM_NULL) {
        char *args[] = {"child", NULL};
        MPI_Comm_spawn(argv[0], args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                       MPI_ERRCODES_IGNORE);
        if (rank == 0) {
            MPI_Send(&x, 1, MPI_INT, 0, 1, inter);
            MPI_Recv(&y, 1, MPI_INT, 0, 2, inter, MPI_STATUS_IGNORE);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Comm_disconnect(&inter);
        printf("parent %d got %d\n", rank, y);
    } else {
        if (rank == 0) {
            MPI_Recv(&y, 1, MPI_INT, 0, 1, parent, MPI_STATUS_IGNORE);
            y += 1;
            MPI_Send(&y, 1, MPI_INT, 0, 2, parent);
        }
        MPI_Allreduce(&y, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Comm_disconnect(&parent);
        printf("child %d sum %d\n", rank, x);
    }
    MPI_Finalize();
    return 0;
}
