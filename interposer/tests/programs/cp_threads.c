/* Call paths per thread (MPI_THREAD_MULTIPLE): two threads reach the same exchange
 * function through different callers (test_callpath.py). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

enum { ROUNDS = 30 };
static int rank_, size_;

__attribute__((noinline)) static void exchange(int tag)
{
    int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_, out = tag, in;
    MPI_Sendrecv(&out, 1, MPI_INT, right, tag, &in, 1, MPI_INT, left, tag, /* CALLSITE:sendrecv */
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

__attribute__((noinline)) static void *worker_a(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) exchange(1); /* FRAME:worker_a */
    return NULL;
}

__attribute__((noinline)) static void *worker_b(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) exchange(2); /* FRAME:worker_b */
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
    pthread_t a, b;
    pthread_create(&a, NULL, worker_a, NULL);
    pthread_create(&b, NULL, worker_b, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("rank %d done\n", rank_);
    MPI_Finalize();
    return 0;
}
