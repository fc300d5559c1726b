/* MPI_THREAD_MULTIPLE, 2 ranks: NT threads per rank (argv[1], 2..4) talk to the same
 * thread of the other rank at the same time, each thread with its own tags and message
 * size: thread t (1..NT) sends t ints with tag t (Send/Recv), 100 + t (Isend/Irecv +
 * Waitall) and 200 + t (Sendrecv). Every payload carries (tag, round), so a message
 * delivered to the wrong thread would abort. The main thread only synchronises. Prints a
 * checksum per rank: the same traced and untraced. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { ROUNDS = 20, MAXT = 4 };
static int rank_, peer_;
static long sums[MAXT + 1];

static void check(const int *buf, int n, int tag, int round)
{
    for (int i = 0; i < n; i++)
        if (buf[i] != tag * 1000 + round) {
            fprintf(stderr, "rank %d: tag %d round %d: got %d\n", rank_, tag, round, buf[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
}

static void *worker(void *arg)
{
    int t = (int)(long)arg, out[MAXT], in[MAXT];
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < t; i++) out[i] = t * 1000 + r;
        if (rank_ == 0) {
            MPI_Send(out, t, MPI_INT, peer_, t, MPI_COMM_WORLD);
            MPI_Recv(in, t, MPI_INT, peer_, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(in, t, MPI_INT, peer_, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(out, t, MPI_INT, peer_, t, MPI_COMM_WORLD);
        }
        check(in, t, t, r);
        for (int i = 0; i < t; i++) out[i] = (100 + t) * 1000 + r;
        MPI_Request rq[2];
        MPI_Irecv(in, t, MPI_INT, peer_, 100 + t, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(out, t, MPI_INT, peer_, 100 + t, MPI_COMM_WORLD, &rq[1]);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        check(in, t, 100 + t, r);
        for (int i = 0; i < t; i++) out[i] = (200 + t) * 1000 + r;
        MPI_Sendrecv(out, t, MPI_INT, peer_, 200 + t, in, t, MPI_INT, peer_, 200 + t,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        check(in, t, 200 + t, r);
        sums[t] += in[0];
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided, size, nt = argc > 1 ? atoi(argv[1]) : 2;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE || size != 2 || nt < 1 || nt > MAXT) {
        printf("needs MPI_THREAD_MULTIPLE, 2 ranks, 1..%d threads\n", MAXT);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    peer_ = 1 - rank_;
    MPI_Barrier(MPI_COMM_WORLD);
    pthread_t th[MAXT + 1];
    for (long t = 1; t <= nt; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 1; t <= nt; t++) pthread_join(th[t], NULL);
    long mine = 0, total = 0;
    for (int t = 1; t <= nt; t++) mine += sums[t];
    MPI_Allreduce(&mine, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d: %d threads, checksum %ld of %ld\n", rank_, nt, mine, total);
    MPI_Finalize();
    return 0;
}
