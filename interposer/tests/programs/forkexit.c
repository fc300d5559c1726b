/* A traced program that fork()s a child which exits with exit() (atexit hooks run in it)
 * while the parent goes on with MPI: the child must leave the trace alone. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    double x = 1, sum = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    pid_t child = fork();
    if (child == 0) exit(0);
    waitpid(child, NULL, 0);
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d sum %g\n", rank, sum);
    MPI_Finalize();
    return 0;
}
