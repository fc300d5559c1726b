/* MPI_THREAD_MULTIPLE: two threads per rank exchange messages with the neighbours at the
 * same time (each thread its own tag), then the main thread reduces. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

enum { ROUNDS = 50 };
static int rank_, size_;

static void *worker(void *arg)
{
    int tag = *(int *)arg, right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
    for (int i = 0; i < ROUNDS; i++) {
        int out = i, in;
        MPI_Request rq[2];
        MPI_Irecv(&in, 1, MPI_INT, left, tag, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(&out, 1, MPI_INT, right, tag, MPI_COMM_WORLD, &rq[1]);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        MPI_Sendrecv(&out, 1, MPI_INT, right, tag + 10, &in, 1, MPI_INT, left, tag + 10,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        printf("no MPI_THREAD_MULTIPLE\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    pthread_t t[2];
    int tags[2] = {1, 2};
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, &tags[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    int one = 1, total;
    MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d threads done, total %d\n", rank_, total);
    MPI_Finalize();
    return 0;
}
