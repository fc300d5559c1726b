/* Polling on late messages, made late by construction: rank 0 polls IDLE times before it
 * tells rank 1 (blocked in MPI_Recv for that go-message) to send, so none of those polls
 * can complete anything; then it polls until the message is there. Each phase uses one
 * test/probe function from one call site; the program counts its own calls and prints
 * them (the ground truth the trace must give back):
 *   calls {"MPI_Test": n, ...}
 * Phases: MPI_Test, MPI_Iprobe, MPI_Testany, MPI_Testsome, MPI_Testall, MPI_Improbe,
 * MPI_Request_get_status; MPI_Test and MPI_Iprobe taking turns (a cycle of two sites:
 * merged into one visit each); a cycle of five sites (longer than the interposer merges:
 * nothing merges); MPI_Test with a little work between polls (merged, time outside MPI)
 * and with long work between polls (not merged). Rank 1 makes no polling calls. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>

enum { TEST, IPROBE, TESTANY, TESTSOME, TESTALL, IMPROBE, GETSTATUS, NFN };
static const char *names[NFN] = {"MPI_Test", "MPI_Iprobe", "MPI_Testany", "MPI_Testsome",
                                 "MPI_Testall", "MPI_Improbe", "MPI_Request_get_status"};
static long calls[NFN];
static int idle = 20000;

static void work(int n)
{
    volatile double x = 1.0;
    for (int i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
}

static void check_idle(int flag, const char *what)
{
    if (flag) { /* impossible: the partner has not been told to send */
        fprintf(stderr, "poll: %s completed before the go-message\n", what);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

static void go(int tag) { MPI_Send(&tag, 1, MPI_INT, 1, 1000 + tag, MPI_COMM_WORLD); }

/* rank 1: one message per go-message */
static void sender(int tag, int nmsg)
{
    int g, v = tag;
    MPI_Recv(&g, 1, MPI_INT, 0, 1000 + tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < nmsg; i++) MPI_Send(&v, 1, MPI_INT, 0, tag + i, MPI_COMM_WORLD);
}

static void phase_test(int tag, int spin)
{
    int v, flag = 0;
    MPI_Request r;
    MPI_Irecv(&v, 1, MPI_INT, 1, tag, MPI_COMM_WORLD, &r);
    int n = spin > 2000 ? idle / 100 : idle;
    for (int i = 0; i < n; i++) {
        MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        calls[TEST]++;
        check_idle(flag, "MPI_Test");
        work(spin);
    }
    go(tag);
    while (!flag) {
        MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        calls[TEST]++;
    }
}

static void phase_iprobe(int tag)
{
    int v, flag = 0;
    for (int i = 0; i < idle; i++) {
        MPI_Iprobe(1, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        calls[IPROBE]++;
        check_idle(flag, "MPI_Iprobe");
    }
    go(tag);
    while (!flag) {
        MPI_Iprobe(1, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        calls[IPROBE]++;
    }
    MPI_Recv(&v, 1, MPI_INT, 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void phase_testany(int tag)
{
    int v[2], flag = 0, idx, done = 0;
    MPI_Request r[2];
    for (int k = 0; k < 2; k++) MPI_Irecv(&v[k], 1, MPI_INT, 1, tag + k, MPI_COMM_WORLD, &r[k]);
    for (int i = 0; i < idle; i++) {
        MPI_Testany(2, r, &idx, &flag, MPI_STATUS_IGNORE);
        calls[TESTANY]++;
        check_idle(flag, "MPI_Testany");
    }
    go(tag);
    while (done < 2) {
        MPI_Testany(2, r, &idx, &flag, MPI_STATUS_IGNORE);
        calls[TESTANY]++;
        if (flag && idx != MPI_UNDEFINED) done++;
    }
}

static void phase_testsome(int tag)
{
    int v[2], out, idx[2], done = 0;
    MPI_Request r[2];
    for (int k = 0; k < 2; k++) MPI_Irecv(&v[k], 1, MPI_INT, 1, tag + k, MPI_COMM_WORLD, &r[k]);
    for (int i = 0; i < idle; i++) {
        MPI_Testsome(2, r, &out, idx, MPI_STATUSES_IGNORE);
        calls[TESTSOME]++;
        check_idle(out > 0, "MPI_Testsome");
    }
    go(tag);
    while (done < 2) {
        MPI_Testsome(2, r, &out, idx, MPI_STATUSES_IGNORE);
        calls[TESTSOME]++;
        if (out > 0) done += out;
    }
}

static void phase_testall(int tag)
{
    int v[2], flag = 0;
    MPI_Request r[2];
    for (int k = 0; k < 2; k++) MPI_Irecv(&v[k], 1, MPI_INT, 1, tag + k, MPI_COMM_WORLD, &r[k]);
    for (int i = 0; i < idle; i++) {
        MPI_Testall(2, r, &flag, MPI_STATUSES_IGNORE);
        calls[TESTALL]++;
        check_idle(flag, "MPI_Testall");
    }
    go(tag);
    while (!flag) {
        MPI_Testall(2, r, &flag, MPI_STATUSES_IGNORE);
        calls[TESTALL]++;
    }
}

static void phase_improbe(int tag)
{
    int v, flag = 0;
    MPI_Message m;
    for (int i = 0; i < idle; i++) {
        MPI_Improbe(1, tag, MPI_COMM_WORLD, &flag, &m, MPI_STATUS_IGNORE);
        calls[IMPROBE]++;
        check_idle(flag, "MPI_Improbe");
    }
    go(tag);
    while (!flag) {
        MPI_Improbe(1, tag, MPI_COMM_WORLD, &flag, &m, MPI_STATUS_IGNORE);
        calls[IMPROBE]++;
    }
    MPI_Mrecv(&v, 1, MPI_INT, &m, MPI_STATUS_IGNORE);
}

static void phase_getstatus(int tag)
{
    int v, flag = 0;
    MPI_Request r;
    MPI_Irecv(&v, 1, MPI_INT, 1, tag, MPI_COMM_WORLD, &r);
    for (int i = 0; i < idle; i++) {
        MPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE);
        calls[GETSTATUS]++;
        check_idle(flag, "MPI_Request_get_status");
    }
    go(tag);
    while (!flag) {
        MPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE);
        calls[GETSTATUS]++;
    }
    MPI_Wait(&r, MPI_STATUS_IGNORE);
}

/* two functions taking turns: a polling loop's cycle */
static void phase_alternate(int tag)
{
    int v, flag = 0, pflag = 0;
    MPI_Request r;
    MPI_Irecv(&v, 1, MPI_INT, 1, tag, MPI_COMM_WORLD, &r);
    for (int i = 0; i < idle / 20; i++) {
        MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        MPI_Iprobe(1, tag + 1, MPI_COMM_WORLD, &pflag, MPI_STATUS_IGNORE);
        calls[TEST]++;
        calls[IPROBE]++;
        check_idle(flag || pflag, "MPI_Test/MPI_Iprobe");
    }
    go(tag);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
}

/* five sites in turn: a longer cycle than the interposer merges (MPS_POLL_CHAIN) */
static void phase_cycle5(int tag)
{
    int v, f[5] = {0};
    MPI_Request r;
    MPI_Irecv(&v, 1, MPI_INT, 1, tag, MPI_COMM_WORLD, &r);
    for (int i = 0; i < idle / 20; i++) {
        MPI_Test(&r, &f[0], MPI_STATUS_IGNORE);
        MPI_Iprobe(1, tag + 1, MPI_COMM_WORLD, &f[1], MPI_STATUS_IGNORE);
        MPI_Test(&r, &f[2], MPI_STATUS_IGNORE);
        MPI_Iprobe(1, tag + 2, MPI_COMM_WORLD, &f[3], MPI_STATUS_IGNORE);
        MPI_Request_get_status(r, &f[4], MPI_STATUS_IGNORE);
        calls[TEST] += 2;
        calls[IPROBE] += 2;
        calls[GETSTATUS]++;
        check_idle(f[0] || f[1] || f[2] || f[3] || f[4], "cycle of five");
    }
    go(tag);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1) idle = atoi(argv[1]);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "poll: run with 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* tag: messages, their count */
    static const int msgs[][2] = {{10, 1}, {20, 1}, {30, 2}, {40, 2}, {50, 2}, {60, 1},
                                  {70, 1}, {80, 1}, {90, 1}, {100, 1}, {110, 1}};
    if (rank == 1) {
        for (size_t k = 0; k < sizeof msgs / sizeof msgs[0]; k++) sender(msgs[k][0], msgs[k][1]);
    } else {
        phase_test(10, 0);
        phase_iprobe(20);
        phase_testany(30);
        phase_testsome(40);
        phase_testall(50);
        phase_improbe(60);
        phase_getstatus(70);
        phase_alternate(80);
        phase_test(90, 50);   /* a little work between polls: merged */
        phase_test(100, 20000); /* long work between polls: each recorded */
        phase_cycle5(110);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* one write per line: MPICH's launcher interleaves the ranks' partial lines */
    char line[1024];
    int n = snprintf(line, sizeof line, "calls %d {", rank);
    for (int f = 0; f < NFN; f++)
        n += snprintf(line + n, sizeof line - n, "%s\"%s\": %ld", f ? ", " : "", names[f],
                      calls[f]);
    n += snprintf(line + n, sizeof line - n, "}\n");
    fflush(stdout);
    if (write(STDOUT_FILENO, line, (size_t)n) != n) return 1;
    MPI_Finalize();
    return 0;
}
