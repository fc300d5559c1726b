/* mpiscope-recover DIR RANK...: turn the crash-safe live logs that killed ranks left in
 * DIR/.mpiscope-live/ into the per-rank archives DIR/rank<N>/traces.otf2 salvage() writes
 * (live.h). The conversion lives in libmpiscope (postmortem.c: mps_recover), which shares the
 * event encoder and definition writers with the traced run. Prints one line per rank: on
 * stdout "rank N: E events, …" for a rank recovered whole (its log deleted), on stderr
 * "mpiscope-recover: rank N: FILE: byte B: problem" (or why else not) for one that was
 * not (its log kept as it was). Exit status: 0 when every rank was recovered, 1 otherwise,
 * 2 on bad usage. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpiscope.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: mpiscope-recover DIR RANK...\n");
        return 2;
    }
    int status = 0;
    for (int i = 2; i < argc; i++) {
        char *end, msg[PATH_MAX + 256] = "";
        long rank = strtol(argv[i], &end, 10);
        if (*end || rank < 0 || rank > INT_MAX) {
            fprintf(stderr, "mpiscope-recover: not a rank: %s\n", argv[i]);
            return 2;
        }
        if (mps_recover(argv[1], (int)rank, msg, sizeof msg) == 0) {
            printf("%s\n", msg);
        } else {
            fprintf(stderr, "mpiscope-recover: rank %ld: %s\n", rank, msg);
            status = 1;
        }
        fflush(stdout);
    }
    return status;
}
