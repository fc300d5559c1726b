/* The trace directory: which files in it are an mpiscope run's, moving an earlier run's
 * aside before a new one writes there, removing a half-written archive. No shell: any
 * path the filesystem accepts works (quotes, spaces, newlines).
 *
 * Rule (README "Output directory"): DIR may be the user's own directory (MPISCOPE_OUT=.),
 * so only our files are touched, and they are never deleted and never mixed with another
 * run's: when DIR holds files of an earlier run, all of them move together into the
 * first free sibling DIR.1, DIR.2, … and the new run writes into a clean DIR.
 */
#ifndef MPISCOPE_OUTDIR_H
#define MPISCOPE_OUTDIR_H

#include <stddef.h>

/* The names an mpiscope run leaves in its directory, besides rank<N>/ (the per-rank
 * archives of a job that died). analyzer/mpiscope/outdir.py keeps the same list (a test
 * checks they agree); program-output.txt is `mpiscope run`'s copy of the job's stdout. */
#define MPS_RUN_FILES                                                                     \
    "traces.otf2", "traces.def", "traces", ".mpiscope-live", ".mpiscope-cache",          \
        "program-output.txt"
#define MPS_RUN_RANK_PREFIX "rank" /* rank<digits>: a directory */
#define MPS_RUN_SPAWN_PREFIX "spawn-" /* spawn-<digits>: a spawned job's own run */
#define MPS_RUN_OUTPUT "program-output.txt" /* the job's stdout, see mps_move_earlier_run */

/* A spawned job's own directory in its parent's DIR: DIR/spawn-N, the first N whose
 * mkdir succeeds (atomic: two children's jobs never share one). 0, or -1 and errno. */
int mps_claim_spawn_dir(const char *dir, char *out, size_t outlen);
/* Is `name` (an entry of DIR) an mpiscope run's? */
int mps_is_run_file(const char *name);

/* Move an earlier run's files out of `dir` into the first free `dir.N` (written to `to`,
 * "" when there was nothing to move). `own` names a file that belongs to the run about
 * to start (`mpiscope run` creates its program-output.txt first) and stays; NULL: none
 * (then a program-output.txt newer than the earlier run's trace stays too: a `| tee`).
 * Returns 0, or -1 with errno set. */
int mps_move_earlier_run(const char *dir, const char *own, char *to, size_t tolen);

/* Remove DIR/traces.otf2, DIR/traces.def and DIR/traces/: an archive that could not be
 * written completely must not look like a trace. */
void mps_remove_archive(const char *dir);

/* Remove a directory tree we wrote (a half-written DIR/rank<N>/). */
void mps_remove_tree(const char *path);

/* mkdir -p, then: is it a directory we may write into? 0, or -1 with errno set. Private
 * to the library (the trace directory, a salvaged rank<N>/, a recovery's scratch). */
__attribute__((visibility("hidden"))) int mps_mkdir_p(const char *path);

#endif
