/* intercoll.c — collectives whose argument arrays MPI sizes by the remote group, and
 * nonblocking collectives whose argument arrays the caller frees as soon as they are
 * posted (MPI allows it; mpi4py does it).
 *
 * Every counts / displacements / datatype array lives at the very end of its own mapping,
 * followed by an inaccessible page: reading one element past it faults, and the arrays of
 * a nonblocking collective are unmapped right after the call returns, so a tracer that
 * reads them later faults too. Run at 3 ranks: world rank 0 is group A (1 rank), ranks 1
 * and 2 are group B, joined by an intercommunicator (A's remote group has 2 ranks, B's 1);
 * then the same nonblocking collectives on MPI_COMM_WORLD and on a ring topology.
 * Every buffer holds ints; each rank prints "ok" when all results check out. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t page;

/* n elements of `size` bytes that end exactly where an inaccessible page begins. */
static void *guarded(size_t n, size_t size)
{
    size_t bytes = n * size, span = (bytes + page - 1) / page * page + page;
    char *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) abort();
    mprotect(m + span - page, page, PROT_NONE);
    return m + span - page - bytes;
}

/* Unmap what guarded() gave: any later read of it faults. */
static void gone(void *p, size_t n, size_t size)
{
    size_t bytes = n * size, span = (bytes + page - 1) / page * page + page;
    munmap((char *)p + bytes + page - span, span);
}

static int *ints(int n, int value)
{
    int *a = guarded((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) a[i] = value < 0 ? i * -value : value;
    return a;
}

static MPI_Datatype *types(int n)
{
    MPI_Datatype *t = guarded((size_t)n, sizeof *t);
    for (int i = 0; i < n; i++) t[i] = MPI_INT;
    return t;
}

static int bad;
static void expect(int got, int want, const char *what)
{
    if (got != want) {
        printf("mismatch in %s: %d != %d\n", what, got, want);
        bad = 1;
    }
}

/* Blocking and nonblocking v/w collectives on the intercommunicator `ic`; `inA`: this
 * rank is in group A (whose rank 0 is every rooted collective's root). */
static void on_intercomm(MPI_Comm ic, int inA)
{
    int lrank, rsize;
    MPI_Comm_rank(ic, &lrank);
    MPI_Comm_remote_size(ic, &rsize);
    int me = 100 + lrank + (inA ? 0 : 10), buf[16], out[16];
    int root = inA ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    for (int i = 0; i < 16; i++) buf[i] = me;

    MPI_Allgather(buf, 1, MPI_INT, out, 1, MPI_INT, ic); /* CALLSITE:allgather */
    int *rc = ints(rsize, 1), *dp = ints(rsize, -1);
    MPI_Allgatherv(buf, 1, MPI_INT, out, rc, dp, MPI_INT, ic);
    MPI_Alltoall(buf, 1, MPI_INT, out, 1, MPI_INT, ic);
    int *sc = ints(rsize, 1), *sd = ints(rsize, -1);
    MPI_Alltoallv(buf, sc, sd, MPI_INT, out, rc, dp, MPI_INT, ic);
    int *sdb = ints(rsize, -4), *rdb = ints(rsize, -4);
    MPI_Datatype *st = types(rsize), *rt = types(rsize);
    MPI_Alltoallw(buf, sc, sdb, st, out, rc, rdb, rt, ic);
    for (int i = 0; i < rsize; i++) expect(out[i], inA ? 110 + i : 100 + i, "alltoallw");
    /* rooted: counts significant at the root only, sized by the remote group there */
    int *grc = root == MPI_ROOT ? ints(rsize, 1) : NULL, *gdp = root == MPI_ROOT ? ints(rsize, -1) : NULL;
    MPI_Gather(buf, 1, MPI_INT, out, 1, MPI_INT, root, ic);
    MPI_Gatherv(buf, 1, MPI_INT, out, grc, gdp, MPI_INT, root, ic);
    if (root == MPI_ROOT)
        for (int i = 0; i < rsize; i++) expect(out[i], 110 + i, "gatherv");
    MPI_Scatter(buf, 1, MPI_INT, out, 1, MPI_INT, root, ic);
    MPI_Scatterv(buf, grc, gdp, MPI_INT, out, 1, MPI_INT, root, ic);
    if (!inA) expect(out[0], 100, "scatterv");
    int bb[1] = {me};
    MPI_Bcast(bb, 1, MPI_INT, root, ic);
    if (!inA) expect(bb[0], 100, "bcast");
    MPI_Reduce(buf, out, 1, MPI_INT, MPI_SUM, root, ic);
    if (root == MPI_ROOT) expect(out[0], rsize * 110 + rsize * (rsize - 1) / 2, "reduce");

    /* nonblocking: every array unmapped as soon as the call returns */
    MPI_Request q[5];
    int *a = ints(rsize, 1), *b = ints(rsize, -1);
    MPI_Iallgatherv(buf, 1, MPI_INT, out, a, b, MPI_INT, ic, &q[0]);
    gone(a, (size_t)rsize, sizeof(int));
    gone(b, (size_t)rsize, sizeof(int));
    MPI_Wait(&q[0], MPI_STATUS_IGNORE);
    int o2[16], o3[16], o4[16];
    int *c1 = ints(rsize, 1), *d1 = ints(rsize, -1), *c2 = ints(rsize, 1), *d2 = ints(rsize, -1);
    MPI_Ialltoallv(buf, c1, d1, MPI_INT, o2, c2, d2, MPI_INT, ic, &q[1]);
    int *c3 = ints(rsize, 1), *d3 = ints(rsize, -4), *c4 = ints(rsize, 1), *d4 = ints(rsize, -4);
    MPI_Datatype *t3 = types(rsize), *t4 = types(rsize);
    MPI_Ialltoallw(buf, c3, d3, t3, o3, c4, d4, t4, ic, &q[2]);
    int *gc = root == MPI_ROOT ? ints(rsize, 1) : NULL, *gd = root == MPI_ROOT ? ints(rsize, -1) : NULL;
    MPI_Igatherv(buf, 1, MPI_INT, o4, gc, gd, MPI_INT, root, ic, &q[3]);
    int *sc2 = root == MPI_ROOT ? ints(rsize, 1) : NULL, *sd2 = root == MPI_ROOT ? ints(rsize, -1) : NULL;
    int o5[16];
    MPI_Iscatterv(buf, sc2, sd2, MPI_INT, o5, 1, MPI_INT, root, ic, &q[4]);
    int *all[] = {c1, d1, c2, d2, c3, d3, c4, d4};
    for (int i = 0; i < 8; i++) gone(all[i], (size_t)rsize, sizeof(int));
    gone(t3, (size_t)rsize, sizeof *t3);
    gone(t4, (size_t)rsize, sizeof *t4);
    if (root == MPI_ROOT) {
        gone(gc, (size_t)rsize, sizeof(int)); gone(gd, (size_t)rsize, sizeof(int));
        gone(sc2, (size_t)rsize, sizeof(int)); gone(sd2, (size_t)rsize, sizeof(int));
    }
    MPI_Waitall(5, q, MPI_STATUSES_IGNORE);
    for (int i = 0; i < rsize; i++) expect(o3[i], inA ? 110 + i : 100 + i, "ialltoallw");
}

/* The same on an intracommunicator, and neighbourhood collectives on a ring: arrays gone
 * before the Wait. */
static void on_intracomm(MPI_Comm comm)
{
    int n, r;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &r);
    int buf[16], out[16];
    for (int i = 0; i < 16; i++) buf[i] = 1000 * r + i;
    MPI_Request q;
    int *c = ints(n, 1), *d = ints(n, -1);
    MPI_Iallgatherv(buf, 1, MPI_INT, out, c, d, MPI_INT, comm, &q);
    gone(c, (size_t)n, sizeof(int));
    gone(d, (size_t)n, sizeof(int));
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    for (int i = 0; i < n; i++) expect(out[i], 1000 * i, "iallgatherv");
    int *sc = ints(n, 1), *sd = ints(n, -4), *rc = ints(n, 1), *rd = ints(n, -4);
    MPI_Datatype *st = types(n), *rt = types(n);
    MPI_Ialltoallw(buf, sc, sd, st, out, rc, rd, rt, comm, &q);
    gone(sc, (size_t)n, sizeof(int)); gone(sd, (size_t)n, sizeof(int));
    gone(rc, (size_t)n, sizeof(int)); gone(rd, (size_t)n, sizeof(int));
    gone(st, (size_t)n, sizeof *st); gone(rt, (size_t)n, sizeof *rt);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    for (int i = 0; i < n; i++) expect(out[i], 1000 * i + r, "ialltoallw");
    int *rcs = ints(n, 1);
    MPI_Ireduce_scatter(buf, out, rcs, MPI_INT, MPI_SUM, comm, &q);
    gone(rcs, (size_t)n, sizeof(int));
    MPI_Wait(&q, MPI_STATUS_IGNORE);

    MPI_Comm ring;
    int dims[1] = {n}, periods[1] = {1};
    MPI_Cart_create(comm, 1, dims, periods, 0, &ring);
    int *nc = ints(2, 1), *nd = ints(2, -1);
    MPI_Ineighbor_allgatherv(buf, 1, MPI_INT, out, nc, nd, MPI_INT, ring, &q);
    gone(nc, 2, sizeof(int));
    gone(nd, 2, sizeof(int));
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    expect(out[0], 1000 * ((r + n - 1) % n), "ineighbor_allgatherv");
    int *ac = ints(2, 1), *ad = ints(2, -1), *bc = ints(2, 1), *bd = ints(2, -1);
    MPI_Ineighbor_alltoallv(buf, ac, ad, MPI_INT, out, bc, bd, MPI_INT, ring, &q);
    gone(ac, 2, sizeof(int)); gone(ad, 2, sizeof(int));
    gone(bc, 2, sizeof(int)); gone(bd, 2, sizeof(int));
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    MPI_Comm_free(&ring);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    page = (size_t)sysconf(_SC_PAGESIZE);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size >= 2) {
        int inA = rank == 0;
        MPI_Comm local, ic;
        MPI_Comm_split(MPI_COMM_WORLD, inA, rank, &local);
        MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, inA ? 1 : 0, 7, &ic);
        on_intercomm(ic, inA);
        MPI_Comm_free(&ic);
        MPI_Comm_free(&local);
    }
    on_intracomm(MPI_COMM_WORLD);
    MPI_Finalize();
    printf("rank %d %s\n", rank, bad ? "BAD" : "ok");
    return bad;
}
