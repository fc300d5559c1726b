/* Local definition files checked before libotf2 reads them (localdefs.c). */
#ifndef MPSR_LOCALDEFS_H
#define MPSR_LOCALDEFS_H

#include <stddef.h>
#include <stdint.h>

/* 0 when libotf2 may read the local definition file `path` (OTF2 chunks of `chunk_size`
 * bytes); 1 when a record in it would make libotf2 read past its buffer or allocate
 * what the file cannot hold: `why` then says what and at which offset. A file that
 * cannot be opened or ends early is libotf2's to report (0). */
int mpsr_local_defs_check(const char *path, uint64_t chunk_size, char *why, size_t why_len);

#endif
