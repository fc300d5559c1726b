/* Himeno benchmark, MPI version written for mpiscope.
 *
 * The 19-point Jacobi iteration for the pressure Poisson equation with the benchmark's
 * coefficient arrays a[4], b[3], c[3], p, bnd, wrk1, wrk2, its initialisation (initmt) and
 * its residual gosa, on a 3-D process grid (MPI_Dims_create + MPI_Cart_create). Faces are
 * exchanged with MPI_Irecv/MPI_Isend/MPI_Waitall, the residual is reduced with
 * MPI_Allreduce, and MPI_Barrier brackets the timed region: the five calls of the study.
 *
 *   --variant unpatched   Allreduce of gosa every iteration (as the original)
 *   --variant patched     Allreduce every K iterations (--allreduce-every K) and on the
 *                         last one; by default only on the last one. Same final gosa.
 *
 * Arithmetic is in double precision (the original uses float) so that gosa agrees across
 * rank counts to 1e-12; the flop count per point (34) is the original's.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define FLOPS_PER_POINT 34.0
#define DEFAULT_SECONDS 60.0 /* the original's target time */
#define PENTIUM3_MFLOPS 82.84 /* the original's score divisor (Pentium III 600 MHz) */

typedef struct {
    const char *size;
    int grid[3];      /* grid points imax, jmax, kmax (the original's mimax-1, ...) */
    long iterations;  /* 0: timing mode */
    double seconds;
    int patched;
    long every;       /* patched: reduce every K iterations; 0 = only the last */
} options;

typedef struct {
    int n[3];       /* local array extent including one ghost layer on each side */
    int lo[3];      /* global index of the first owned point */
    int own[3];     /* owned points per dimension */
    int nbr[3][2];  /* neighbours (lower, upper) per dimension */
    double *p, *a[4], *b[3], *c[3], *bnd, *wrk1, *wrk2;
    MPI_Datatype face[3];
    MPI_Comm cart;
} grid;

#define IDX(g, i, j, k) (((size_t)(i) * (g)->n[1] + (size_t)(j)) * (g)->n[2] + (size_t)(k))

static const char USAGE[] =
    "usage: himeno [--size XS|S|M|L|XL | --dims IxJxK] [--iterations N | --seconds T]\n"
    "              [--variant unpatched|patched] [--allreduce-every K]\n"
    "  --size        the original's sizes (default S: 128x64x64 grid points)\n"
    "  --dims        a custom grid of IxJxK points, each at least 3\n"
    "  --iterations  run exactly N iterations (the study: 7000)\n"
    "  --seconds     the original's timing mode: 3 measuring iterations, then as many as\n"
    "                fit in T seconds (default when neither is given: 60)\n"
    "  --variant     unpatched: Allreduce of the residual every iteration (default);\n"
    "                patched: only every K iterations (--allreduce-every K) and on the last\n";

/* Every rank parses the same argv, so every rank reaches the same verdict. */
static int bad(int rank, const char *msg)
{
    if (rank == 0) fprintf(stderr, "himeno: %s\n%s", msg, USAGE);
    return 2;
}

/* The original's array dimensions (mimax, mjmax, mkmax); the grid is one less.
 * Returns the size's canonical name, NULL if unknown. */
static const char *size_grid(const char *s, int g[3])
{
    static const struct { const char *name; int mi, mj, mk; } sizes[] = {
        {"XS", 65, 33, 33}, {"S", 129, 65, 65}, {"M", 257, 129, 129},
        {"L", 513, 257, 257}, {"XL", 1025, 513, 513},
    };
    for (size_t n = 0; n < sizeof sizes / sizeof sizes[0]; n++) {
        if (strcasecmp(s, sizes[n].name) == 0) {
            g[0] = sizes[n].mi - 1; g[1] = sizes[n].mj - 1; g[2] = sizes[n].mk - 1;
            return sizes[n].name;
        }
    }
    return NULL;
}

static int parse_long(const char *v, long min, long *out)
{
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < min) return -1;
    *out = x;
    return 0;
}

/* Returns 0 to run, 1 after --help, 2 on bad arguments. */
static int parse(int argc, char **argv, options *o, int rank)
{
    *o = (options){.iterations = 0, .seconds = 0, .patched = 0, .every = 0};
    o->size = size_grid("S", o->grid);
    int custom = 0, named = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (rank == 0) fputs(USAGE, stdout);
            return 1;
        }
        const char *v = i + 1 < argc ? argv[++i] : NULL;
        if (strncmp(a, "--", 2) != 0 ||
            (strcmp(a, "--size") && strcmp(a, "--dims") && strcmp(a, "--iterations") &&
             strcmp(a, "--seconds") && strcmp(a, "--variant") && strcmp(a, "--allreduce-every")))
            return bad(rank, "unknown argument");
        if (!v) return bad(rank, "missing value after option");
        if (!strcmp(a, "--size")) {
            o->size = size_grid(v, o->grid);
            if (!o->size) return bad(rank, "--size is XS, S, M, L or XL");
            named = 1;
        } else if (!strcmp(a, "--dims")) {
            char tail;
            if (sscanf(v, "%dx%dx%d%c", &o->grid[0], &o->grid[1], &o->grid[2], &tail) != 3 ||
                o->grid[0] < 3 || o->grid[1] < 3 || o->grid[2] < 3)
                return bad(rank, "--dims wants IxJxK grid points, each at least 3");
            custom = 1;
        } else if (!strcmp(a, "--iterations")) {
            if (parse_long(v, 1, &o->iterations)) return bad(rank, "--iterations wants N >= 1");
        } else if (!strcmp(a, "--seconds")) {
            char *end = NULL;
            o->seconds = strtod(v, &end);
            if (end == v || *end || !(o->seconds > 0 && o->seconds <= 1e6))
                return bad(rank, "--seconds wants 0 < T <= 1e6");
        } else if (!strcmp(a, "--variant")) {
            if (!strcmp(v, "patched")) o->patched = 1;
            else if (!strcmp(v, "unpatched")) o->patched = 0;
            else return bad(rank, "--variant is unpatched or patched");
        } else {
            if (parse_long(v, 1, &o->every)) return bad(rank, "--allreduce-every wants K >= 1");
        }
    }
    if (o->iterations && o->seconds) return bad(rank, "give --iterations or --seconds, not both");
    if (custom && named) return bad(rank, "give --size or --dims, not both");
    if (o->every && !o->patched) return bad(rank, "--allreduce-every needs --variant patched");
    if (!o->iterations && !o->seconds) o->seconds = DEFAULT_SECONDS;
    if (custom) o->size = "custom";
    return 0;
}

/* Split n points as evenly as possible: the first n % p ranks get one more. */
static void split(int n, int p, int c, int *lo, int *own)
{
    int base = n / p, extra = n % p;
    *own = base + (c < extra);
    *lo = c * base + (c < extra ? c : extra);
}

static double *alloc(size_t n, double v)
{
    double *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "himeno: out of memory (%zu MiB per array)\n", n * sizeof *x >> 20);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    for (size_t i = 0; i < n; i++) x[i] = v;
    return x;
}

/* The local block of this rank, with the original's initial values (initmt). */
static void setup(grid *g, const options *o, int pdims[3])
{
    int periods[3] = {0, 0, 0}, coords[3], crank;
    MPI_Cart_create(MPI_COMM_WORLD, 3, pdims, periods, 0, &g->cart);
    MPI_Comm_rank(g->cart, &crank);
    MPI_Cart_coords(g->cart, crank, 3, coords);
    for (int d = 0; d < 3; d++) {
        split(o->grid[d], pdims[d], coords[d], &g->lo[d], &g->own[d]);
        g->n[d] = g->own[d] + 2;
        MPI_Cart_shift(g->cart, d, 1, &g->nbr[d][0], &g->nbr[d][1]);
    }
    size_t n = (size_t)g->n[0] * g->n[1] * g->n[2];
    for (int m = 0; m < 4; m++) g->a[m] = alloc(n, m == 3 ? 1.0 / 6.0 : 1.0);
    for (int m = 0; m < 3; m++) {
        g->b[m] = alloc(n, 0.0);
        g->c[m] = alloc(n, 1.0);
    }
    g->bnd = alloc(n, 1.0);
    g->wrk1 = alloc(n, 0.0);
    g->wrk2 = alloc(n, 0.0);
    g->p = alloc(n, 0.0);
    /* p = i^2 / (imax-1)^2 in the global i index, ghosts included, so no first exchange */
    double den = (double)(o->grid[0] - 1) * (o->grid[0] - 1);
    for (int i = 0; i < g->n[0]; i++) {
        int gi = g->lo[0] + i - 1;
        for (int j = 0; j < g->n[1]; j++)
            for (int k = 0; k < g->n[2]; k++) g->p[IDX(g, i, j, k)] = (double)gi * gi / den;
    }
    /* Faces are whole planes including ghosts: exchanging i, then j, then k carries the
     * edge values the 19-point stencil needs without separate edge messages. */
    MPI_Type_contiguous(g->n[1] * g->n[2], MPI_DOUBLE, &g->face[0]);
    MPI_Type_vector(g->n[0], g->n[2], g->n[1] * g->n[2], MPI_DOUBLE, &g->face[1]);
    MPI_Type_vector(g->n[0] * g->n[1], 1, g->n[2], MPI_DOUBLE, &g->face[2]);
    for (int d = 0; d < 3; d++) MPI_Type_commit(&g->face[d]);
}

static void teardown(grid *g)
{
    for (int m = 0; m < 4; m++) free(g->a[m]);
    for (int m = 0; m < 3; m++) {
        free(g->b[m]);
        free(g->c[m]);
    }
    free(g->bnd);
    free(g->wrk1);
    free(g->wrk2);
    free(g->p);
    for (int d = 0; d < 3; d++) MPI_Type_free(&g->face[d]);
    MPI_Comm_free(&g->cart);
}

static size_t plane(const grid *g, int d, int at)
{
    int ijk[3] = {0, 0, 0};
    ijk[d] = at;
    return IDX(g, ijk[0], ijk[1], ijk[2]);
}

/* Halo exchange (the original's sendp): per dimension, receive both ghost planes and send
 * both owned faces; MPI_PROC_NULL neighbours at the domain edge make those calls no-ops. */
static void exchange(grid *g)
{
    for (int d = 0; d < 3; d++) {
        MPI_Request req[4];
        MPI_Status st[4]; /* not MPI_STATUSES_IGNORE: gcc 12 misreads MPICH's sentinel */
        int last = g->n[d] - 1;
        MPI_Irecv(&g->p[plane(g, d, 0)], 1, g->face[d], g->nbr[d][0], 1, g->cart, &req[0]);
        MPI_Irecv(&g->p[plane(g, d, last)], 1, g->face[d], g->nbr[d][1], 0, g->cart, &req[1]);
        MPI_Isend(&g->p[plane(g, d, 1)], 1, g->face[d], g->nbr[d][0], 0, g->cart, &req[2]);
        MPI_Isend(&g->p[plane(g, d, last - 1)], 1, g->face[d], g->nbr[d][1], 1, g->cart,
                  &req[3]);
        MPI_Waitall(4, req, st);
    }
}

/* One Jacobi sweep over the owned points that are interior in the global grid, then the
 * wrk2 -> p copy; returns this rank's sum of ss^2 (the original's wgosa). */
static double sweep(grid *g, const int gdims[3])
{
    const double omega = 0.8;
    int b0[3], e0[3];
    for (int d = 0; d < 3; d++) {
        b0[d] = g->lo[d] == 0 ? 2 : 1;
        e0[d] = g->own[d] + (g->lo[d] + g->own[d] == gdims[d] ? 0 : 1);
    }
    const size_t si = (size_t)g->n[1] * g->n[2], sj = (size_t)g->n[2];
    const double *restrict p = g->p, *restrict a0 = g->a[0], *restrict a1 = g->a[1],
                 *restrict a2 = g->a[2], *restrict a3 = g->a[3], *restrict b1_ = g->b[0],
                 *restrict b2_ = g->b[1], *restrict b3_ = g->b[2], *restrict c0 = g->c[0],
                 *restrict c1 = g->c[1], *restrict c2 = g->c[2], *restrict bnd = g->bnd,
                 *restrict wrk1 = g->wrk1;
    double *restrict wrk2 = g->wrk2;
    double wgosa = 0.0;
    for (int i = b0[0]; i < e0[0]; i++)
        for (int j = b0[1]; j < e0[1]; j++)
            for (int k = b0[2]; k < e0[2]; k++) {
                size_t x = IDX(g, i, j, k);
                double s0 = a0[x] * p[x + si] + a1[x] * p[x + sj] + a2[x] * p[x + 1]
                    + b1_[x] * (p[x + si + sj] - p[x + si - sj] - p[x - si + sj] + p[x - si - sj])
                    + b2_[x] * (p[x + sj + 1] - p[x - sj + 1] - p[x + sj - 1] + p[x - sj - 1])
                    + b3_[x] * (p[x + si + 1] - p[x - si + 1] - p[x + si - 1] + p[x - si - 1])
                    + c0[x] * p[x - si] + c1[x] * p[x - sj] + c2[x] * p[x - 1] + wrk1[x];
                double ss = (s0 * a3[x] - p[x]) * bnd[x];
                wgosa += ss * ss;
                wrk2[x] = p[x] + omega * ss;
            }
    if (e0[2] > b0[2])
        for (int i = b0[0]; i < e0[0]; i++)
            for (int j = b0[1]; j < e0[1]; j++)
                memcpy(&g->p[IDX(g, i, j, b0[2])], &wrk2[IDX(g, i, j, b0[2])],
                       (size_t)(e0[2] - b0[2]) * sizeof(double));
    return wgosa;
}

/* nn iterations; the residual is reduced as the variant says. Returns the last gosa.
 * The patched variant skips only the reduction: every sweep still sums its own wgosa, so
 * the final Allreduce sums exactly the numbers the unpatched run's last one does. */
static double jacobi(grid *g, const options *o, long nn)
{
    double gosa = 0.0;
    for (long n = 0; n < nn; n++) {
        double wgosa = sweep(g, o->grid);
        exchange(g);
        int reduce = !o->patched || n == nn - 1 || (o->every && (n + 1) % o->every == 0);
        if (reduce) MPI_Allreduce(&wgosa, &gosa, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    return gosa;
}

/* Wall time of nn iterations between two barriers, the slowest rank's. */
static double timed_jacobi(grid *g, const options *o, long nn, double *gosa)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    *gosa = jacobi(g, o, nn);
    MPI_Barrier(MPI_COMM_WORLD);
    return MPI_Wtime() - t0;
}

static double mflops(const options *o, long nn, double seconds)
{
    double points = (double)(o->grid[0] - 2) * (o->grid[1] - 2) * (o->grid[2] - 2);
    return FLOPS_PER_POINT * points * (double)nn / seconds * 1e-6;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nprocs;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    options o;
    int rc = parse(argc, argv, &o, rank);
    int pdims[3] = {0, 0, 0};
    MPI_Dims_create(nprocs, 3, pdims);
    if (rc == 0 && (o.grid[0] < pdims[0] || o.grid[1] < pdims[1] || o.grid[2] < pdims[2]))
        rc = bad(rank, "grid too small: every rank needs at least one point per dimension");
    if (rc != 0) {
        MPI_Finalize();
        return rc == 1 ? 0 : rc;
    }
    grid g;
    setup(&g, &o, pdims);
    const char *variant = o.patched ? "patched" : "unpatched";
    if (rank == 0) {
        printf("mimax = %d mjmax = %d mkmax = %d\n", o.grid[0] + 1, o.grid[1] + 1, o.grid[2] + 1);
        printf("imax = %d jmax = %d kmax = %d\n", o.grid[0], o.grid[1], o.grid[2]);
        printf("I-decomp = %d J-decomp = %d K-decomp = %d (%d ranks)\n", pdims[0], pdims[1],
               pdims[2], nprocs);
        /* 14 arrays of rank 0's block with ghosts (the largest block: first n % p get more) */
        printf("memory per rank: %.1f MiB\n",
               14.0 * g.n[0] * g.n[1] * g.n[2] * sizeof(double) / (1 << 20));
        if (!o.patched) printf("variant: unpatched (Allreduce of gosa every iteration)\n");
        else if (o.every) printf("variant: patched (Allreduce every %ld iterations)\n", o.every);
        else printf("variant: patched (Allreduce on the last iteration only)\n");
    }
    long nn = o.iterations;
    double gosa;
    if (!nn) {
        /* The original's rehearsal: 3 iterations (not undone), then fit the target time. */
        double dt = timed_jacobi(&g, &o, 3, &gosa);
        MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        nn = (long)(o.seconds / (dt / 3.0));
        if (nn < 1) nn = 1;
        if (rank == 0) {
            printf("rehearsal: 3 iterations in %.9f s, MFLOPS %f\n", dt, mflops(&o, 3, dt));
            printf("target %g s: running %ld iterations\n", o.seconds, nn);
        }
    }
    double elapsed = timed_jacobi(&g, &o, nn, &gosa);
    double rate = mflops(&o, nn, elapsed);
    if (rank == 0) {
        printf("Loop executed for %ld times\n", nn);
        printf("Gosa : %.17g\n", gosa);
        printf("MFLOPS measured : %f\tcpu : %f sec.\n", rate, elapsed);
        printf("Score based on Pentium III 600MHz : %f\n", rate / PENTIUM3_MFLOPS);
        printf("{\"size\": \"%s\", \"ranks\": %d, \"process_grid\": [%d, %d, %d], "
               "\"iterations\": %ld, \"elapsed_s\": %.9f, \"gosa\": %.17g, \"mflops\": %.6f, "
               "\"variant\": \"%s\"}\n",
               o.size, nprocs, pdims[0], pdims[1], pdims[2], nn, elapsed, gosa, rate, variant);
    }
    teardown(&g);
    MPI_Finalize();
    return 0;
}
