/* The replay engine of mpiscope.analysis.simulate (engine.py holds the same algorithm in
 * Python, the reference the tests compare with). Ranks advance one at a time as far as
 * their dependencies are known; see engine.py and program.py for the data layout. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
    int64_t nranks, nops, nmsg, ninst;
    const int64_t *op_lo;  /* nranks + 1 */
    const double *gap, *cost;
    const uint8_t *removed;
    const int64_t *ps_ptr, *ps_idx, *pr_ptr, *pr_idx, *wr_ptr, *wr_idx, *ws_ptr, *ws_idx;
    const int64_t *op_inst;
    const uint8_t *op_waits;
    const uint8_t *eager, *contended;
    const double *lat, *xfer;
    const int64_t *msg_sender;
    const int64_t *inst_size;
    const double *inst_cost;
    /* noise an op may hide behind waiting longer than it did on the traced machine
     * (descheduled while it would be waiting anyway), and that traced wait */
    const double *absorb, *waited;
    /* out */
    double *start, *end, *arrival, *s_post, *rank_clock;
    int64_t stuck_rank;
} mpsim_program;

static inline double max2(double a, double b) { return a > b ? a : b; }

static double deliver(const mpsim_program *p, double *link_free, int64_t m, double ready)
{
    if (p->contended[m]) {
        int64_t s = p->msg_sender[m];
        if (link_free[s] > ready) ready = link_free[s];
        link_free[s] = ready + p->xfer[m];
    }
    double t = ready + p->lat[m] + p->xfer[m];
    p->arrival[m] = t;
    return t;
}

/* 0: done; 1: deadlock (p->stuck_rank set); -1: out of memory */
int mpsim_run(mpsim_program *p)
{
    int64_t nr = p->nranks;
    double *r_post = malloc(sizeof(double) * (size_t)(p->nmsg ? p->nmsg : 1));
    double *link_free = calloc((size_t)(nr ? nr : 1), sizeof(double));
    int64_t *inst_left = malloc(sizeof(int64_t) * (size_t)(p->ninst ? p->ninst : 1));
    double *inst_max = malloc(sizeof(double) * (size_t)(p->ninst ? p->ninst : 1));
    int64_t *cursor = malloc(sizeof(int64_t) * (size_t)(nr ? nr : 1));
    int64_t *active = malloc(sizeof(int64_t) * (size_t)(nr ? nr : 1));
    int rc = 0;
    if (!r_post || !link_free || !inst_left || !inst_max || !cursor || !active) {
        rc = -1;
        goto out;
    }
    for (int64_t i = 0; i < p->nops; i++) p->start[i] = p->end[i] = NAN;
    for (int64_t m = 0; m < p->nmsg; m++) p->arrival[m] = p->s_post[m] = r_post[m] = NAN;
    for (int64_t k = 0; k < p->ninst; k++) {
        inst_left[k] = p->inst_size[k];
        inst_max[k] = -INFINITY;
    }
    int64_t nactive = 0;
    for (int64_t r = 0; r < nr; r++) {
        cursor[r] = p->op_lo[r];
        p->rank_clock[r] = 0.0;
        if (cursor[r] < p->op_lo[r + 1]) active[nactive++] = r;
    }
    while (nactive) {
        int moved = 0;
        int64_t still = 0;
        for (int64_t a = 0; a < nactive; a++) {
            int64_t r = active[a], i = cursor[r], stop = p->op_lo[r + 1];
            double t = p->rank_clock[r];
            while (i < stop) {
                double t0 = p->start[i];
                if (isnan(t0)) {  /* start it and make its posts */
                    t0 = t + p->gap[i];
                    p->start[i] = t0;
                    moved = 1;
                    if (!p->removed[i]) {
                        for (int64_t j = p->ps_ptr[i]; j < p->ps_ptr[i + 1]; j++) {
                            int64_t m = p->ps_idx[j];
                            p->s_post[m] = t0;
                            if (p->eager[m])
                                deliver(p, link_free, m, t0);
                            else if (!isnan(r_post[m]))
                                deliver(p, link_free, m, max2(t0 + p->lat[m], r_post[m]) + p->lat[m]);
                        }
                        for (int64_t j = p->pr_ptr[i]; j < p->pr_ptr[i + 1]; j++) {
                            int64_t m = p->pr_idx[j];
                            r_post[m] = t0;
                            if (!p->eager[m] && !isnan(p->s_post[m]))
                                deliver(p, link_free, m, max2(p->s_post[m] + p->lat[m], t0) + p->lat[m]);
                        }
                        int64_t k = p->op_inst[i];
                        if (k >= 0) {
                            inst_left[k]--;
                            if (t0 > inst_max[k]) inst_max[k] = t0;
                        }
                    }
                }
                double ready = t0;
                int blocked = 0;
                for (int64_t j = p->wr_ptr[i]; j < p->wr_ptr[i + 1] && !blocked; j++) {
                    double v = p->arrival[p->wr_idx[j]];
                    if (isnan(v)) blocked = 1;
                    else if (v > ready) ready = v;
                }
                for (int64_t j = p->ws_ptr[i]; j < p->ws_ptr[i + 1] && !blocked; j++) {
                    double v = p->arrival[p->ws_idx[j]];
                    if (isnan(v)) blocked = 1;
                    else if (v > ready) ready = v;
                }
                if (!blocked && p->op_waits[i]) {
                    int64_t k = p->op_inst[i];
                    if (inst_left[k] > 0) blocked = 1;
                    else if (inst_max[k] + p->inst_cost[k] > ready) ready = inst_max[k] + p->inst_cost[k];
                }
                if (blocked) break;
                double extra = ready - t0 - p->waited[i];
                t = ready + p->cost[i] - (extra > 0 ? (extra < p->absorb[i] ? extra : p->absorb[i]) : 0);
                p->end[i] = t;
                i++;
                moved = 1;
            }
            cursor[r] = i;
            p->rank_clock[r] = t;
            if (i < stop) active[still++] = r;
        }
        if (!moved) {
            p->stuck_rank = active[0];
            rc = 1;
            goto out;
        }
        nactive = still;
    }
out:
    free(r_post);
    free(link_free);
    free(inst_left);
    free(inst_max);
    free(cursor);
    free(active);
    return rc;
}
