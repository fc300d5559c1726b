/* The tracer's own file writes must never be what kills a job.
 *
 * A write beyond RLIMIT_FSIZE raises SIGXFSZ, whose default action ends the process.
 * mps_io_guard_begin()/end() bracket every write the tracer makes (OTF2 flushes and
 * closes, the raw-buffer encode, salvage); inside, such a write just fails with EFBIG,
 * which OTF2 reports like any other write error. Nestable, per thread, and made of
 * plain system calls only (the stop-signal handler salvages inside a guard). Used by
 * mps_flush_events (hotpath.c), mps_finalize_before (finalize.c) and mps_abort_before
 * (salvage.c); any new tracer write (ftruncate/fallocate of a file, too) belongs inside
 * one.
 */
#ifndef MPISCOPE_IOSAFE_H
#define MPISCOPE_IOSAFE_H

void mps_io_guard_begin(void);
void mps_io_guard_end(void);

#endif
