/* Local definition files (traces/N.def) checked before libotf2 reads them.
 *
 * libotf2 (3.0.2) frames each record safely but then reads a MappingTable's id map by
 * its own count: a map claiming more entries than its record holds is allocated as
 * claimed (2^32 entries: 32 GB) and read past the record and the chunk buffer (found by
 * analyzer/native/fuzz/fuzz_reader.c; regressions in fuzz/libotf2/). So each record is
 * walked here first, bounded by the mapped file: one that does not fit its chunk, or an
 * id map whose entries do not fit its record, makes the location's read fail with where.
 *
 * The format, as libotf2 writes it: chunks of `chunk_size` bytes, each an 18-byte header
 * (CHUNK_HEADER, the byte order, two uint64) then records; a record is a type byte, a
 * length byte (0xff: a uint64 length follows) and its fields. END_OF_CHUNK (0x00: what
 * follows in the chunk is unused) moves to the next chunk; END_OF_FILE (0x02) or
 * END_OF_BUFFER (0x01) ends the data. Integers are "compressed": a byte giving their
 * length (0..8, or 0xff alone for all ones), then that many bytes in the file's byte
 * order. A MappingTable (type 5) holds a mapping type byte, then the id map: its entry
 * count (compressed), its mode (0 dense, 1 sparse: pairs) and the entries (compressed). */
#define _GNU_SOURCE
#include "localdefs.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { HEADER_BYTES = 18, END_OF_CHUNK = 0x00, END_OF_BUFFER = 0x01, END_OF_FILE = 0x02,
       CHUNK_HEADER = 0x03, MAPPING_TABLE = 5, BIG_ENDIAN_FILE = 0x23 };

/* n bytes at p in the file's byte order */
static uint64_t uint_of(const uint8_t *p, unsigned n, int big)
{
    uint64_t x = 0;
    for (unsigned k = 0; k < n; k++) x |= (uint64_t)p[k] << (8 * (big ? n - 1 - k : k));
    return x;
}

/* the compressed integer at *at (before `end`) in *v; 0 when it does not fit */
static int cint(const uint8_t *p, uint64_t *at, uint64_t end, int big, uint64_t *v)
{
    if (*at >= end) return 0;
    uint8_t n = p[*at];
    if (n == 0xff) {
        *v = UINT64_MAX;
        *at += 1;
        return 1;
    }
    if (n > 8 || end - *at - 1 < n) return 0;
    *v = uint_of(p + *at + 1, n, big);
    *at += 1 + n;
    return 1;
}

/* the id map of a MappingTable whose fields are [at, end): 0 when it fits */
static int check_mapping(const uint8_t *p, uint64_t at, uint64_t end, int big, char *why,
                         size_t why_len, uint64_t rec)
{
    uint64_t count, entries;
    at += 1; /* the mapping type */
    if (!cint(p, &at, end, big, &count) || at >= end) {
        snprintf(why, why_len, "a mapping table at offset %" PRIu64 " is cut", rec);
        return 1;
    }
    uint8_t mode = p[at++];
    if (mode > 1) {
        snprintf(why, why_len, "a mapping table at offset %" PRIu64 " has id map mode %u",
                 rec, mode);
        return 1;
    }
    /* each entry takes a byte at least: a count beyond the record is damage, whatever
     * the entries hold (checked before walking them: the count may be 2^64 - 1) */
    entries = mode ? count * 2 : count;
    if (count > end - at || (mode && count > (end - at) / 2)) {
        snprintf(why, why_len,
                 "a mapping table at offset %" PRIu64 " claims %" PRIu64
                 " ids in %" PRIu64 " bytes", rec, count, end - at);
        return 1;
    }
    for (uint64_t k = 0; k < entries; k++) {
        uint64_t v;
        if (!cint(p, &at, end, big, &v)) {
            snprintf(why, why_len,
                     "a mapping table at offset %" PRIu64 " holds %" PRIu64
                     " of the %" PRIu64 " ids it claims", rec, mode ? k / 2 : k, count);
            return 1;
        }
    }
    return 0;
}

static int check(const uint8_t *p, uint64_t size, uint64_t chunk, char *why, size_t why_len)
{
    for (uint64_t c = 0; c < size; c += chunk) {
        uint64_t end = size - c < chunk ? size : c + chunk;
        if (end - c < HEADER_BYTES || p[c] != CHUNK_HEADER) return 0; /* libotf2's to say */
        int big = p[c + 1] == BIG_ENDIAN_FILE;
        uint64_t i = c + HEADER_BYTES;
        while (i < end) {
            uint8_t type = p[i];
            if (type == END_OF_FILE || type == END_OF_BUFFER) return 0;
            if (type == END_OF_CHUNK) break;
            if (end - i < 2) return 0; /* cut: libotf2's to report */
            uint64_t len = p[i + 1], body = i + 2;
            if (len == 0xff) {
                if (end - body < 8) return 0;
                len = uint_of(p + body, 8, big);
                body += 8;
            }
            if (len > end - body) {
                snprintf(why, why_len,
                         "a record at offset %" PRIu64 " claims %" PRIu64
                         " bytes, %" PRIu64 " beyond its chunk", i, len, len - (end - body));
                return 1;
            }
            if (type == MAPPING_TABLE &&
                check_mapping(p, body, body + len, big, why, why_len, i))
                return 1;
            i = body + len;
        }
    }
    return 0;
}

int mpsr_local_defs_check(const char *path, uint64_t chunk_size, char *why, size_t why_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    int bad = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > HEADER_BYTES) {
        uint64_t size = (uint64_t)st.st_size;
        const uint8_t *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            bad = check(p, size, chunk_size ? chunk_size : size, why, why_len);
            munmap((void *)p, size);
        }
    }
    close(fd);
    return bad;
}
