/* config.c — configuration: the MPISCOPE_* environment read at MPI_Init, each mistake
 * said once by rank 0 and replaced by the default. */
#define _GNU_SOURCE
#include "runtime.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

struct mps_config mps_cfg;

/* A mistake in the configuration: every rank reads the same environment, so rank 0
 * alone says so, once per variable; the job goes on with the default. */
static __attribute__((format(printf, 1, 2))) void config_warning(const char *fmt, ...)
{
    if (mps_job.rank != 0) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "mpiscope: warning: %s\n", msg);
}

/* 33554432 → "32M": sizes in messages as users write them */
static const char *size_str(uint64_t v, char *buf, size_t n)
{
    static const char units[] = "kMG";
    int u = -1;
    while (u < 2 && v && v % 1024 == 0) { v /= 1024; u++; }
    snprintf(buf, n, "%" PRIu64 "%.*s", v, u >= 0, u >= 0 ? &units[u] : "");
    return buf;
}

/* MPISCOPE_*_SIZE: a whole number of bytes with an optional k, M or G suffix (powers of
 * 1024; kB/KiB spellings too), within [lo, hi]. Anything else (abc, -1, 1T, 1e20) is a
 * mistake to report, not a number to guess: the default is used. Unset or empty: the
 * default, silently. */
static uint64_t parse_size(const char *var, uint64_t dflt, uint64_t lo, uint64_t hi)
{
    const char *s = getenv(var);
    if (!s || !*s) return dflt;
    uint64_t v = 0;
    const char *p = s;
    int ok = *p >= '0' && *p <= '9';
    for (; ok && *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10) ok = 0;
        else v = v * 10 + (uint64_t)(*p - '0');
    }
    unsigned shift = 0;
    if (ok && *p) {
        switch (*p++) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        default: ok = 0; break;
        }
        if (ok && *p && strcmp(p, "B") != 0 && strcmp(p, "iB") != 0) ok = 0;
    }
    if (ok && v > UINT64_MAX >> shift) ok = 0;
    v <<= shift;
    if (ok && v >= lo && v <= hi) return v;
    char a[32], b[32], c[32];
    if (!ok)
        config_warning("%s=%s is not a size (a whole number of bytes, optionally with a k, M "
                       "or G suffix); using the default %s", var, s, size_str(dflt, c, sizeof c));
    else if (hi == UINT64_MAX)
        config_warning("%s=%s is below %s; using the default %s", var, s,
                       size_str(lo, a, sizeof a), size_str(dflt, c, sizeof c));
    else
        config_warning("%s=%s is outside %s..%s; using the default %s", var, s,
                       size_str(lo, a, sizeof a), size_str(hi, b, sizeof b),
                       size_str(dflt, c, sizeof c));
    return dflt;
}

static void parse_filter(const char *spec)
{
    unsigned char *filtered = mps_cfg.filtered;
    if (!spec || !*spec) return;
    int include = spec[0] == '+';
    if (include) {
        spec++;
        for (int i = 0; i < MPS_FN_COUNT; i++) filtered[i] = 1;
    }
    char buf[4096], unknown[1024] = "";
    size_t nu = 0;
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save, *tok = strtok_r(buf, ",: ", &save); tok; tok = strtok_r(NULL, ",: ", &save)) {
        int known = 0;
        for (int i = 0; i < MPS_FN_COUNT; i++)
            if (strcasecmp(tok, mps_fn_names[i]) == 0) {
                filtered[i] = (unsigned char)!include;
                known = 1;
            }
        if (!known && nu < sizeof unknown)
            nu += (size_t)snprintf(unknown + nu, sizeof unknown - nu, "%s%s", nu ? ", " : "", tok);
    }
    if (nu) /* a typo would otherwise silently trace what the user meant to leave out */
        config_warning("MPISCOPE_FILTER: ignoring %s: not MPI functions mpiscope traces",
                       unknown);
    /* the trace's skeleton is never filtered */
    filtered[MPS_FN_MPI_Init] = filtered[MPS_FN_MPI_Init_thread] = 0;
    filtered[MPS_FN_MPI_Finalize] = 0;
}

/* A variable with a few fixed values (MPISCOPE_LIVE, MPISCOPE_CLOCK): anything else
 * (`off`, `no`, a typo) is said once by rank 0 and the default applies. Unset or empty:
 * the default, silently. */
static void check_choice(const char *var, const char *a, const char *b, const char *dflt)
{
    const char *s = getenv(var);
    if (!s || !*s || strcmp(s, a) == 0 || strcmp(s, b) == 0) return;
    config_warning("%s=%s is neither %s nor %s; using the default (%s)", var, s, a, b, dflt);
}

/* The buffer is faulted in at Init, so an oversized MPISCOPE_BUFFER_SIZE must not take
 * the node's memory from the job: all ranks on this node together get at most a quarter
 * of the memory available now. Collective on the private communicator. */
static uint64_t buffer_cap(uint64_t want)
{
    MPI_Comm node;
    int local = 1;
    if (PMPI_Comm_split_type(mps_job.icomm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        PMPI_Comm_size(node, &local);
        PMPI_Comm_free(&node);
    }
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return want;
    uint64_t cap = (uint64_t)pages * (uint64_t)page / 4 / (uint64_t)(local > 0 ? local : 1);
    if (want > cap) {
        if (mps_job.rank == 0)
            fprintf(stderr, "mpiscope: warning: MPISCOPE_BUFFER_SIZE=%llu MiB per rank exceeds "
                    "a quarter of this node's free memory shared by %d ranks; using %llu MiB\n",
                    (unsigned long long)(want >> 20), local, (unsigned long long)(cap >> 20));
        want = cap;
    }
    return want;
}

/* MPISCOPE_CALLPATH_DEPTH: a whole number of frames in [lo, hi]; anything else is said
 * once and the default used, as for sizes */
static unsigned parse_depth(const char *var, unsigned dflt, unsigned lo, unsigned hi)
{
    const char *s = getenv(var);
    if (!s || !*s) return dflt;
    char *end = NULL;
    unsigned long v = strtoul(s, &end, 10);
    if (*s < '0' || *s > '9' || *end || v < lo || v > hi) {
        config_warning("%s=%s is not a number of frames (%u..%u); using %u", var, s, lo, hi,
                       dflt);
        return dflt;
    }
    return (unsigned)v;
}

/* Every variable but MPISCOPE_OUT and MPISCOPE_DISABLE (init.c reads those first), in the
 * order their warnings are printed. */
void mps_config_read(void)
{
    mps_cfg.chunk_size = parse_size("MPISCOPE_CHUNK_SIZE", 1 << 20, 256 << 10, 16 << 20);
    /* raw events wait in MPISCOPE_BUFFER_SIZE; OTF2 encodes them into a few chunks that
     * go to disk as they fill */
    mps_cfg.buffer_bytes =
        buffer_cap(parse_size("MPISCOPE_BUFFER_SIZE", 32 << 20, 1, UINT64_MAX));
    mps_cfg.hash_bytes = (size_t)parse_size("MPISCOPE_HASH_BYTES", 64, 0, 1 << 30);
    parse_filter(getenv("MPISCOPE_FILTER"));
    mps_cfg.callpath_depth = parse_depth("MPISCOPE_CALLPATH_DEPTH", MPS_CALLPATH_DEFAULT, 1,
                                         MPS_CALLPATH_MAX);
    check_choice("MPISCOPE_LIVE", "0", "1", "1: crash-safe live log on");
    check_choice("MPISCOPE_POLL", "all", "merge", "merge: idle polling calls merged");
    const char *poll = getenv("MPISCOPE_POLL");
    mps_cfg.poll_all = poll && strcmp(poll, "all") == 0;
    check_choice("MPISCOPE_SCHED", "on", "off", "on: descheduling sampled");
    const char *sched = getenv("MPISCOPE_SCHED");
    mps_cfg.sched_off = sched && strcmp(sched, "off") == 0;
    check_choice("MPISCOPE_CLOCK", "tsc", "monotonic", "tsc where the kernel's clocksource is tsc");
    const char *h = getenv("MPISCOPE_HOSTNAME");
    if (h && *h) snprintf(mps_job.host, sizeof mps_job.host, "%s", h);
    else if (gethostname(mps_job.host, sizeof mps_job.host - 1) != 0)
        snprintf(mps_job.host, sizeof mps_job.host, "?");
}
