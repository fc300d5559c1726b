/* Trace directory housekeeping (see outdir.h). */
#define _GNU_SOURCE
#include "outdir.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const run_files[] = {MPS_RUN_FILES};

/* `prefix` followed by digits only */
static int numbered(const char *name, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0 || !name[n]) return 0;
    for (const char *p = name + n; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    return 1;
}

int mps_is_run_file(const char *name)
{
    for (size_t i = 0; i < sizeof run_files / sizeof *run_files; i++)
        if (strcmp(name, run_files[i]) == 0) return 1;
    return numbered(name, MPS_RUN_RANK_PREFIX) || numbered(name, MPS_RUN_SPAWN_PREFIX);
}

int mps_claim_spawn_dir(const char *dir, char *out, size_t outlen)
{
    for (unsigned n = 1; n < 1000000; n++) {
        if ((size_t)snprintf(out, outlen, "%s/" MPS_RUN_SPAWN_PREFIX "%u", dir, n) >= outlen) {
            errno = ENAMETOOLONG;
            return -1;
        }
        if (mkdir(out, 0777) == 0) return 0; /* claimed atomically: never shared */
        if (errno != EEXIST) return -1;
    }
    errno = EEXIST;
    return -1;
}

static int ours(const char *name, const char *keep)
{
    return mps_is_run_file(name) && !(keep && strcmp(name, keep) == 0);
}

static int mtime_of(const char *dir, const char *name, time_t *t)
{
    char p[PATH_MAX];
    struct stat st;
    if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) >= sizeof p || lstat(p, &st) != 0)
        return -1;
    *t = st.st_mtime;
    return 0;
}

int mps_move_earlier_run(const char *dir, const char *own, char *to, size_t tolen)
{
    to[0] = 0;
    DIR *d = opendir(dir);
    if (!d) return -1;
    /* The job's stdout copy may be the new run's own already: `mpiscope run` (which says
     * so in `own`) or `| tee DIR/program-output.txt` create it as the job starts, before
     * MPI_Init. So it alone is no earlier run, and beside one it is that run's only if
     * not written after it (2 s: the old run's last lines may follow its trace). */
    int found = 0;
    time_t newest = 0, t;
    for (struct dirent *e; (e = readdir(d));) {
        if (!ours(e->d_name, MPS_RUN_OUTPUT)) continue;
        found = 1;
        if (mtime_of(dir, e->d_name, &t) == 0 && t > newest) newest = t;
    }
    if (!found) {
        closedir(d);
        return 0;
    }
    const char *keep = own;
    if (!keep && mtime_of(dir, MPS_RUN_OUTPUT, &t) == 0 && t > newest + 2) keep = MPS_RUN_OUTPUT;
    /* the sibling of the directory itself, whatever way DIR was spelled (".", "a/") */
    char real[PATH_MAX];
    if (!realpath(dir, real)) { int e = errno; closedir(d); errno = e; return -1; }
    for (unsigned n = 1;; n++) {
        if ((size_t)snprintf(to, tolen, "%s.%u", real, n) >= tolen) {
            closedir(d);
            errno = ENAMETOOLONG;
            return -1;
        }
        if (mkdir(to, 0777) == 0) break; /* claimed atomically: never shared with a run */
        if (errno != EEXIST) { int e = errno; closedir(d); to[0] = 0; errno = e; return -1; }
    }
    /* renaming while reading the directory may hide entries from readdir: pass again
     * until a pass finds nothing left to move */
    int any = 0;
    for (int moved = 1; moved;) {
        moved = 0;
        rewinddir(d);
        for (struct dirent *e; (e = readdir(d));) {
            if (!ours(e->d_name, keep)) continue;
            char from[PATH_MAX], dst[PATH_MAX];
            if ((size_t)snprintf(from, sizeof from, "%s/%s", dir, e->d_name) >= sizeof from ||
                (size_t)snprintf(dst, sizeof dst, "%s/%s", to, e->d_name) >= sizeof dst) {
                closedir(d);
                errno = ENAMETOOLONG;
                return -1;
            }
            if (rename(from, dst) != 0) {
                int err = errno;
                closedir(d);
                if (!any) rmdir(to); /* e.g. EXDEV (DIR is a mount point): leave no trace */
                errno = err;
                return -1;
            }
            moved = any = 1;
        }
    }
    closedir(d);
    return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st; (void)ftw;
    if (flag == FTW_DP) rmdir(path);
    else unlink(path);
    return 0; /* best effort: go on with the rest */
}

void mps_remove_tree(const char *path)
{
    nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

void mps_remove_archive(const char *dir)
{
    static const char *const parts[] = {"traces.otf2", "traces.def", "traces"};
    char p[PATH_MAX];
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, parts[i]) < sizeof p) mps_remove_tree(p);
}

int mps_mkdir_p(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
    struct stat st;
    if (stat(tmp, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) { errno = ENOTDIR; return -1; }
    return access(tmp, W_OK) == 0 ? 0 : -1;
}
