/* Logging, hashing, time. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#define XXH_INLINE_ALL /* the hash calls inline: a name lookup hashes a few bytes */
#include <xxhash.h>

#include "fs_internal.h"

void fs_log(gmtf_fs *fs, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (fs && fs->opt.log)
        fs->opt.log(fs->opt.log_arg, msg);
    else
        fprintf(stderr, "gmtf: %s\n", msg);
}

/* Part of the format: journal ids (checkpoint.c) are made with it, so it
 * never changes. Its low bits disperse poorly for short inputs: tables
 * use hash_bytes. */
uint64_t fs_hash64(const void *p, size_t n, uint64_t seed)
{
    const uint8_t *b = p;
    uint64_t h = seed ^ (n * 0x9e3779b97f4a7c15ull);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, b + i, 8);
        v *= 0xbf58476d1ce4e5b9ull;
        v ^= v >> 31;
        h = (h ^ v) * 0x94d049bb133111ebull;
        h ^= h >> 29;
    }
    uint64_t t = 0;
    for (size_t k = 0; i < n; i++, k++)
        t |= (uint64_t)b[i] << (8 * k);
    h = (h ^ t) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

/* XXH3 (libxxhash): every output bit depends on every input bit, so the
 * low bits that index a table spread names like f0..f39999 evenly. Not
 * cryptographic: dedup verifies every match byte by byte. */
uint64_t hash_bytes(const void *p, size_t n, uint64_t seed)
{
    return XXH3_64bits_withSeed(p, n, seed);
}

uint32_t name_hash(uint64_t parent, const char *name, size_t n)
{
    uint64_t h = XXH3_64bits_withSeed(name, n, parent);
    return (uint32_t)(h ^ (h >> 32));
}

void now_ts(int64_t *s, uint32_t *ns)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    *s = t.tv_sec;
    *ns = (uint32_t)t.tv_nsec;
}
