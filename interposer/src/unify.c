/* unify.c — what MPI_Finalize gathers at rank 0 for the global definitions: call sites
 * (unified into global ids), host names and communicator definitions. Collective on the
 * private communicator. */
#include "runtime.h"

#include <stdio.h>
#include <stdlib.h>

/* Gather variable-length byte blobs at rank 0. */
char *mps_gather_blob(const char *mine, int len, int **lens_out, int **displs_out)
{
    const int size = mps_job.size;
    int *lens = NULL, *displs = NULL;
    char *all = NULL;
    if (mps_job.rank == 0) {
        lens = calloc((size_t)size, sizeof(int));
        displs = calloc((size_t)size, sizeof(int));
    }
    PMPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, mps_job.icomm);
    if (mps_job.rank == 0) {
        int total = 0;
        for (int i = 0; i < size; i++) { displs[i] = total; total += lens[i]; }
        all = malloc((size_t)total + 1);
    }
    PMPI_Gatherv(mine, len, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, mps_job.icomm);
    *lens_out = lens;
    *displs_out = displs;
    return all;
}

/* Call sites: resolve ours, unify at rank 0 by name, write id maps, SourceCodeLocation
 * defs and, per global id, the object+offset its name came from (the first rank's). */
uint32_t mps_unify_callsites(OTF2_GlobalDefWriter *gw, uint32_t **local_to_global)
{
    uint32_t ndefined = 0;
    const uint32_t ncs = mps_sites.n;
    const int size = mps_job.size;
    mps_location *loc = calloc(ncs ? ncs : 1, sizeof *loc);
    mps_callsite_resolve(mps_sites.addr, ncs, loc);
    size_t cap = 64, len = 0;
    char *blob = malloc(cap);
    for (uint32_t i = 0; i < ncs; i++) {
        const char *f = loc[i].file ? loc[i].file : "?";
        const char *o = loc[i].object ? loc[i].object : "";
        size_t need = strlen(f) + strlen(o) + sizeof loc[i].build_id + 48;
        if (len + need >= cap) { cap = (cap + need) * 2; blob = realloc(blob, cap); }
        /* name<TAB>line<TAB>offset<TAB>build-id<TAB>object */
        len += (size_t)snprintf(blob + len, cap - len, "%s\t%u\t%llx\t%s\t%s\n", f,
                                loc[i].line, (unsigned long long)loc[i].offset,
                                loc[i].build_id, o);
        free(loc[i].file);
        free(loc[i].object);
        free(loc[i].func);
    }
    free(loc);
    int *lens, *displs;
    char *all = mps_gather_blob(blob, (int)len, &lens, &displs);
    free(blob);

    /* rank 0: distinct (name, line) → global id; per rank, its local → global table */
    uint32_t *counts = NULL, *ids = NULL;
    int *idcounts = NULL, *iddispls = NULL;
    if (mps_job.rank == 0) {
        int total = displs[size - 1] + lens[size - 1];
        all[total] = 0;
        counts = calloc((size_t)size, sizeof *counts);
        idcounts = calloc((size_t)size, sizeof(int));
        iddispls = calloc((size_t)size, sizeof(int));
        size_t nlines = 0;
        for (int i = 0; i < total; i++) nlines += all[i] == '\n';
        size_t nalloc = nlines ? nlines : 1;
        ids = malloc(nalloc * sizeof *ids);
        /* simple string table; call sites are few (hundreds), so a linear map suffices */
        char **keys = malloc(nalloc * sizeof *keys);
        const char **objects = malloc(nalloc * sizeof *objects);
        const char **build_ids = malloc(nalloc * sizeof *build_ids);
        uint64_t *offsets = malloc(nalloc * sizeof *offsets);
        uint32_t nkeys = 0, k = 0;
        for (int r = 0; r < size; r++) {
            iddispls[r] = (int)k;
            char *p = all + displs[r], *end = p + lens[r];
            while (p < end) {
                char *nl = memchr(p, '\n', (size_t)(end - p));
                if (!nl) break;
                *nl = 0;
                /* the key is name<TAB>line: cut the line at the tab after it */
                char *tab = strchr(p, '\t');
                char *tab2 = tab ? strchr(tab + 1, '\t') : NULL;
                char *tab3 = tab2 ? strchr(tab2 + 1, '\t') : NULL;
                char *tab4 = tab3 ? strchr(tab3 + 1, '\t') : NULL;
                if (tab4) *tab4 = 0; /* ends the build-id */
                if (tab2) *tab2 = 0;
                uint32_t g = 0;
                while (g < nkeys && strcmp(keys[g], p) != 0) g++;
                if (g == nkeys) {
                    keys[nkeys] = p;
                    build_ids[nkeys] = tab4 ? tab3 + 1 : "";
                    objects[nkeys] = tab4 ? tab4 + 1 : "";
                    offsets[nkeys] = tab2 ? strtoull(tab2 + 1, NULL, 16) : 0;
                    nkeys++;
                    unsigned line = 0;
                    if (tab) { *tab = 0; line = (unsigned)strtoul(tab + 1, NULL, 10); }
                    OTF2_StringRef fs = mps_gstr(gw, p);
                    OTF2_GlobalDefWriter_WriteSourceCodeLocation(gw, g, fs, line);
                    if (tab) *tab = '\t';
                }
                ids[k++] = g;
                counts[r]++;
                p = nl + 1;
            }
            idcounts[r] = (int)counts[r];
        }
        mps_set_callsite_objects(mps_out.archive, objects, build_ids, offsets, nkeys);
        ndefined = nkeys;
        free(keys);
        free(objects);
        free(build_ids);
        free(offsets);
    }
    *local_to_global = malloc((ncs ? ncs : 1) * sizeof(uint32_t));
    PMPI_Scatterv(ids, idcounts, iddispls, MPI_UINT32_T, *local_to_global, (int)ncs,
                  MPI_UINT32_T, 0, mps_job.icomm);
    free(all); free(lens); free(displs); free(counts); free(ids); free(idcounts); free(iddispls);
    return ndefined;
}

/* Hosts: every rank's host name at rank 0 for the system tree. */
char *mps_gather_hosts(void)
{
    char *all = NULL;
    const int n = sizeof mps_job.host;
    if (mps_job.rank == 0) all = calloc((size_t)mps_job.size, (size_t)n);
    PMPI_Gather(mps_job.host, n, MPI_CHAR, all, n, MPI_CHAR, 0, mps_job.icomm);
    return all;
}

/* The definitions of the communicators each rank created, at rank 0, as int32 words. */
int32_t *mps_gather_comms(int *nwords)
{
    int len = 0;
    int32_t *mine = mps_serialize_comms(0, &len);
    int *lens = NULL, *displs = NULL;
    int bytes = len * (int)sizeof(int32_t);
    char *all = mps_gather_blob((char *)mine, bytes, &lens, &displs);
    free(mine);
    *nwords = 0;
    if (mps_job.rank == 0)
        *nwords = (displs[mps_job.size - 1] + lens[mps_job.size - 1]) / (int)sizeof(int32_t);
    free(lens);
    free(displs);
    return (int32_t *)all;
}
