/* Fortran sentinels: MPI_IN_PLACE, MPI_BOTTOM and MPI_STATUS(ES)_IGNORE are addresses of
 * Open MPI's Fortran common blocks, which C must translate to the C constants.
 * Declared weak so the library still loads where they do not exist. */
#include "mpiscope.h"

#include <stdlib.h>
#include <string.h>

extern int mpi_fortran_in_place_ __attribute__((weak));
extern int mpi_fortran_bottom_ __attribute__((weak));
extern int mpi_fortran_status_ignore_ __attribute__((weak));
extern int mpi_fortran_statuses_ignore_ __attribute__((weak));

void *mps_f_buf(void *buf)
{
    if (buf && buf == (void *)&mpi_fortran_in_place_) return MPI_IN_PLACE;
    if (buf && buf == (void *)&mpi_fortran_bottom_) return MPI_BOTTOM;
    return buf;
}

int mps_f_status_ignore(const void *st)
{
    return st && st == (const void *)&mpi_fortran_status_ignore_;
}

int mps_f_statuses_ignore(const void *st)
{
    return st && st == (const void *)&mpi_fortran_statuses_ignore_;
}

char *mps_f_string(const char *s, size_t len)
{
    while (len > 0 && s[len - 1] == ' ') len--;
    while (len > 0 && *s == ' ') { s++; len--; }
    char *c = malloc(len + 1);
    if (!c) return NULL;
    memcpy(c, s, len);
    c[len] = 0;
    return c;
}
