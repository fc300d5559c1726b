/* failcalls.c — MPI calls that fail (MPI_ERRORS_RETURN): invalid ranks, tags and roots.
 * None of them moves a message; each prints its error class so the test can compare.
 * Then one real message from rank 0 to rank 1 and one real Bcast. Run at 2 ranks. */
#include <mpi.h>
#include <stdio.h>

static int failed;
static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) failed++;
    else printf("unexpected success: %s\n", what);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, x = 42, y = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Status st;
    MPI_Request rq;
    check(MPI_Send(&x, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD), "send to no rank");
    check(MPI_Send(&x, 1, MPI_INT, (rank + 1) % size, -7, MPI_COMM_WORLD), "send, bad tag");
    check(MPI_Recv(&y, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD, &st), "recv from no rank");
    check(MPI_Isend(&x, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD, &rq), "isend to no rank");
    check(MPI_Bcast(&x, 1, MPI_INT, size + 5, MPI_COMM_WORLD), "bcast, no root");
    check(MPI_Allreduce(&x, &y, 1, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD), "allreduce, no type");
    /* the real traffic after the failures */
    if (rank == 0) MPI_Send(&x, 1, MPI_INT, 1, 3, MPI_COMM_WORLD);
    if (rank == 1) MPI_Recv(&y, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, &st);
    MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD);
    printf("rank %d failed %d\n", rank, failed);
    MPI_Finalize();
    return 0;
}
