/* Helpers for the fs tests: in-memory images that record writes and
 * inject faults, and quick mount/unmount. */
#ifndef FS_TEST_UTIL_H
#define FS_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gmtf_fs.h"

typedef struct rec_write {
    uint64_t off;
    size_t len;
    uint8_t *data; /* NULL: a flush marker */
    int punch;     /* a punch: data holds len zeros */
} rec_write;

/* A memory image that records every pwrite, punch and flush, and can fail. */
typedef struct rec_img {
    gmtf_image *inner; /* memory image holding the current bytes */
    rec_write *log;
    size_t n, cap;
    int recording;
    long fail_after; /* pwrites allowed before failing; < 0 = never */
    int fail_err;    /* error injected (-ENOSPC, -EIO) */
    int short_write; /* inject: write only half of the failing pwrite first */
    size_t punches;  /* punch calls recorded (each logged as a write of zeros) */
} rec_img;

/* A disk that outlives mounts: attach gives a new gmtf_image on it each time. */
rec_img *rec_image_new(const uint8_t *data, size_t len);
gmtf_image *rec_image_attach(rec_img *r);
void rec_image_free(rec_img *r);
const uint8_t *rec_image_data(rec_img *r, size_t *len);
gmtf_fs *mount_rec(rec_img *r, int ro);
rec_img *mkfs_rec(uint32_t bs, uint64_t capacity); /* a fresh filesystem */
void rec_image_clear_log(rec_img *r);
/* Bytes of base with the first k logged writes applied (caller frees). */
uint8_t *rec_image_state(const uint8_t *base, size_t base_len, const rec_img *r, size_t k,
                         size_t *len);

gmtf_fs *mount_mem(const uint8_t *data, size_t len, int ro);
void fill_pattern(uint8_t *p, size_t n, uint32_t seed);
/* Incompressible bytes (xorshift): frames, stored raw, as large as the data. */
void fill_noise(uint8_t *p, size_t n, uint64_t seed);
/* Text-like bytes (words, numbers, line ends) that compress the way source
 * and documents do: long BWT runs, so cheap to code; seed picks the text. */
void fill_words(uint8_t *p, size_t n, uint32_t seed);

/* Cheap data for tests whose subject is not the coder: p[0..512) (filled by
 * the caller) copied over the rest of n bytes, then every 512-byte sector
 * tagged at its start with seed (digits hex digits) and its offset, so that
 * no two sectors are equal (one in the wrong place shows) while the frames
 * stay small and fast to decode. Inline: the crash library and the hostile
 * one share it without sharing this file's object. */
static inline void tag_sectors(uint8_t *p, size_t n, uint64_t seed, int digits)
{
    for (size_t k = 512; k < n; k += 512)
        memcpy(p + k, p, n - k < 512 ? n - k : 512);
    for (size_t k = 0; k < n; k += 512) {
        char tag[40];
        int l = snprintf(tag, sizeof tag, "%0*llx:%zx\n", digits, (unsigned long long)seed, k);
        memcpy(p + k, tag, n - k < (size_t)l ? n - k : (size_t)l);
    }
}

/* GMTF_TEST_SCALE (default 1): the sanitizer passes of scripts/test set it
 * to thin the long sampling loops (every Nth crash prefix or damaged page,
 * 1/N of an exploration's states); the release pass runs them whole. */
unsigned test_scale(void);

#endif
