/* Helpers shared by the codec tests: deterministic random data, real
 * sample files (the corpus when present, plus files every Debian machine
 * has), environment knobs and a guarded output buffer that catches writes
 * past the capacity a decoder was given. */
#ifndef GMTF_TEST_UTIL_H
#define GMTF_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

typedef struct tu_file {
    char *name;    /* path, for messages */
    uint8_t *data; /* malloc'ed contents */
    size_t len;
} tu_file;

typedef struct tu_files {
    tu_file *v;
    size_t count;
} tu_files;

/* splitmix64: a fixed, seedable stream, so every failure reproduces. */
uint64_t tu_rand(uint64_t *state);
/* Uniform in [0, n); n > 0. */
uint64_t tu_rand_below(uint64_t *state, uint64_t n);
void tu_fill_random(uint8_t *buf, size_t n, uint64_t seed);
/* Random bytes from a small alphabet with runs: compressible, BWT-friendly. */
void tu_fill_text_like(uint8_t *buf, size_t n, uint64_t seed);

/* Allocation that aborts the test on failure (never returns NULL). */
void *tu_malloc(size_t n);
void *tu_calloc(size_t n);

/* Reads a whole file (up to max bytes). Returns 0 or -errno. */
int tu_read_file(const char *path, size_t max, uint8_t **data, size_t *len);

/* Every regular file under $GMTF_CORPUS (recursively, sorted by path,
 * SHA256SUMS excluded). Returns 0 files and prints why when the variable
 * is unset or the folder is absent: corpus cases are then skipped. */
tu_files tu_corpus_files(void);

/* Real data every Debian machine has: a deterministic selection of files
 * from /usr/share/common-licenses, /usr/include and /usr/bin, at most
 * max_files files of at most max_len bytes each. */
tu_files tu_system_files(size_t max_files, size_t max_len);

/* Concatenation of files into one buffer of exactly n bytes (repeating
 * them when they are too short); NULL when files is empty. */
uint8_t *tu_concat(const tu_files *files, size_t n);

void tu_files_free(tu_files *f);

/* Integer from the environment, or def when unset or malformed. */
long tu_env_long(const char *name, long def);
/* GMTF_TEST_SCALE (default 1): the sanitizer passes of scripts/test set it
 * to thin long loops (tests/README.md); the release pass runs them whole. */
unsigned tu_scale(void);

/* Buffer of cap bytes followed by a guard zone filled with a pattern;
 * tu_guard_ok() tells whether anything wrote past cap. */
typedef struct tu_guarded {
    uint8_t *buf;
    size_t cap;   /* the capacity under test; the guard starts here */
    size_t alloc; /* the largest cap this buffer allows */
} tu_guarded;

tu_guarded tu_guarded_alloc(size_t cap);
/* Moves the guard to just after cap (<= the allocated cap) and rearms it. */
void tu_guard_set(tu_guarded *g, size_t cap);
int tu_guard_ok(const tu_guarded *g);
void tu_guarded_free(tu_guarded *g);

/* Naive CRC-32C (bitwise, reflected polynomial 0x82F63B78), the reference
 * the library's checksum is held against. Same chaining convention as
 * gmtf_crc32c: pass the previous result as crc, 0 to start. */
uint32_t tu_crc32c_ref(uint32_t crc, const void *buf, size_t n);

/* Frame headers written independently of the codec, from the layout in
 * docs/codec.md (frame.c):
 *   0 u32 magic "GMTF"  4 u8 version  5 u8 method  6 u8 index count K
 *   7 u8 flags  8 u32 orig_len  12 u32 payload_len  16 u32 data CRC-32C
 *   20 u32 idx[K]  20+4K u32 CRC-32C of bytes [0, 20+4K)
 * Version 2: K = 0 (byte6 is written there), then for BWT frames (nidx > 0)
 *   24 u24 idx[i] - 1 for i < nidx, then u32 payload_crc (the CRC-32C of
 *   the payload, as given), then u32 CRC-32C of everything before.
 * so tests can craft frames with a valid header checksum around hostile
 * fields. Returns the header length: 24 + 4K (version 1), 24 or
 * 32 + 3 nidx (version 2). */
#define TU_FRAME_MAGIC 0x46544D47u
#define TU_MAX_SAMPLES 512
typedef struct tu_header {
    uint8_t version, method, flags;
    unsigned nidx; /* version 1: byte 6 (K); version 2: samples written */
    uint8_t byte6; /* version 2: what byte 6 holds (0 in valid frames) */
    uint32_t orig_len, payload_len, data_crc;
    uint32_t payload_crc; /* version 2 BWT frames */
    uint32_t idx[TU_MAX_SAMPLES];
} tu_header;

/* The documented version 2 sample count: ceil(n / step), step 16 KiB up
 * to 256 KiB and 32 KiB above. */
unsigned tu_v2_sample_count(uint32_t n);

size_t tu_write_header(uint8_t *dst, const tu_header *h);
/* Reads the fields back (no checks beyond the buffer length); returns the
 * header length or 0 when len is too short. */
size_t tu_read_header(const uint8_t *src, size_t len, tu_header *h);
/* Recomputes the header checksum in place after a field was edited (a
 * version 2 BWT frame's payload checksum is left as it is). */
void tu_fix_header_crc(uint8_t *frame);
/* Recomputes a version 2 BWT frame's payload checksum from the payload (the
 * header's payload length, when the frame's len bytes hold it), then the
 * header checksums: a damaged payload then reaches the entropy decoder.
 * Returns 1 when it did, 0 (nothing written) for any other frame. */
int tu_fix_payload_crc(uint8_t *frame, size_t len);

#endif
