/* Master/worker with a slow master, for the hot_spot finding and `whatif`'s tests.
 * Rank 0 hands out TASKS tasks one by one: for each request it spends SERVE_US preparing
 * the task (a central server reading input for everyone), then sends it; the workers
 * spend WORK_US on a task and ask again. With 3 workers the master needs more time per
 * task than a worker has: the workers queue at the master.
 * Usage: masterworker TASKS
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define SERVE_US 12000
#define WORK_US 6000

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int tasks = argc > 1 ? atoi(argv[1]) : 30;
    if (rank == 0) {
        int stopped = 0, next = 0;
        long sum = 0;
        while (stopped < size - 1) {
            int result;
            MPI_Status st;
            MPI_Recv(&result, 1, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &st); /* MARK:request */
            sum += result;
            int task = next < tasks ? next++ : -1;
            if (task >= 0) usleep(SERVE_US);
            else stopped++;
            MPI_Send(&task, 1, MPI_INT, st.MPI_SOURCE, 2, MPI_COMM_WORLD); /* MARK:task */
        }
        printf("sum %ld\n", sum);
    } else {
        int result = 0, task = 0;
        for (;;) {
            MPI_Send(&result, 1, MPI_INT, 0, 1, MPI_COMM_WORLD); /* MARK:ask */
            MPI_Recv(&task, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* MARK:get */
            if (task < 0) break;
            usleep(WORK_US);
            result = task;
        }
    }
    MPI_Finalize();
    return 0;
}
