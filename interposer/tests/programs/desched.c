/* Descheduling by construction: every rank pins itself to ONE core (the first its
 * affinity mask allows), so N busy ranks take turns on it and each is runnable but
 * waiting for the CPU most of the time. Each rank reads its own thread's
 * /proc/thread-self/schedstat (on-CPU ns, run-queue delay ns) at four points:
 *   pre   before MPI_Barrier 1
 *   b0    after it returns: the compute burst starts
 *   b1    the burst (argv[1] ms of busy wall time) ends, before MPI_Barrier 2
 *   post  after MPI_Barrier 2 returns
 * and prints them; the same thread's counters only grow, so whatever the interposer read
 * at Barrier 1 lies between pre and b0 and what it read at Barrier 2 between b1 and post:
 * the ground truth of the same run, no timing assumed. */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void counters(unsigned long long v[2])
{
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (!f || fscanf(f, "%llu %llu", &v[0], &v[1]) != 2) {
        fprintf(stderr, "desched: cannot read /proc/thread-self/schedstat\n");
        exit(2);
    }
    fclose(f);
}

int main(int argc, char **argv)
{
    long long burst_ns = (argc > 1 ? atoll(argv[1]) : 300) * 1000000LL;
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 2;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed)) { CPU_SET(c, &one); break; }
    if (sched_setaffinity(0, sizeof one, &one) != 0) return 2;

    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    unsigned long long pre[2], b0[2], b1[2], post[2];
    counters(pre);
    MPI_Barrier(MPI_COMM_WORLD);
    counters(b0);
    volatile double x = 0;
    for (long long t0 = mono(); mono() - t0 < burst_ns;) x += 1e-9;
    counters(b1);
    MPI_Barrier(MPI_COMM_WORLD);
    counters(post);
    printf("desched %d %llu %llu %llu %llu %llu %llu %llu %llu\n", rank, pre[0], pre[1], b0[0],
           b0[1], b1[0], b1[1], post[0], post[1]);
    MPI_Finalize();
    return 0;
}
