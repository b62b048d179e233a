/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI,
 * ext4 and btrfs. SSE4.2 has an instruction for it (three interleaved
 * streams hide its 3-cycle latency); elsewhere a slicing-by-8 table.
 * GMTF_CRC_SOFT=1 in the environment forces the table path (tests). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "gmtf_codec.h"

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int crc_have_hw;
#if defined(__x86_64__)
static void crc_shift_init(void);
#endif

static void crc_init(void)
{
    for (unsigned i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
        crc_table[0][i] = c;
    }
    for (unsigned i = 0; i < 256; i++)
        for (unsigned t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
#if defined(__x86_64__)
    __builtin_cpu_init();
    crc_have_hw = __builtin_cpu_supports("sse4.2");
    crc_shift_init();
#endif
    const char *soft = getenv("GMTF_CRC_SOFT");
    if (soft && *soft && *soft != '0')
        crc_have_hw = 0;
}

static uint32_t crc_soft(uint32_t crc, const uint8_t *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
        n--;
    }
    while (n >= 8) {
        uint64_t w = load_le64(p) ^ crc;
        crc = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
              crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
              crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
              crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__)
#include <nmmintrin.h>

/* Shifting a raw CRC register past CRC_STRIDE zero bytes is linear in its 32
 * bits, so it is a 4-lookup table, built once from the basis vectors. It
 * merges the three interleaved streams. */
#define CRC_STRIDE 8192
static uint32_t crc_shift_tab[4][256];

static void crc_shift_init(void)
{
    static const uint8_t zeros[CRC_STRIDE];
    uint32_t basis[32];
    for (int i = 0; i < 32; i++)
        basis[i] = crc_soft(1u << i, zeros, CRC_STRIDE);
    for (int k = 0; k < 4; k++)
        for (unsigned b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int j = 0; j < 8; j++)
                if (b & (1u << j))
                    v ^= basis[8 * k + j];
            crc_shift_tab[k][b] = v;
        }
}

static uint32_t crc_shift_stride(uint32_t crc)
{
    return crc_shift_tab[0][crc & 0xff] ^ crc_shift_tab[1][(crc >> 8) & 0xff] ^
           crc_shift_tab[2][(crc >> 16) & 0xff] ^ crc_shift_tab[3][crc >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n)
{
    uint64_t c0 = crc;
    while (n && ((uintptr_t)p & 7)) {
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
        n--;
    }
    /* Three streams of 'stride' bytes each, merged by shifting. Only worth
     * it for long buffers. */
    const size_t stride = CRC_STRIDE;
    while (n >= 3 * stride) {
        uint64_t c1 = 0, c2 = 0;
        const uint8_t *p1 = p + stride, *p2 = p + 2 * stride;
        for (size_t i = 0; i < stride; i += 8) {
            c0 = _mm_crc32_u64(c0, load_le64(p + i));
            c1 = _mm_crc32_u64(c1, load_le64(p1 + i));
            c2 = _mm_crc32_u64(c2, load_le64(p2 + i));
        }
        /* crc(A||B) = shift(crc(A), |B|) ^ crc0(B) where crc0 starts at 0. */
        uint32_t merged = crc_shift_stride((uint32_t)c0) ^ (uint32_t)c1;
        merged = crc_shift_stride(merged) ^ (uint32_t)c2;
        c0 = merged;
        p += 3 * stride;
        n -= 3 * stride;
    }
    while (n >= 8) {
        c0 = _mm_crc32_u64(c0, load_le64(p));
        p += 8;
        n -= 8;
    }
    while (n--)
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
    return (uint32_t)c0;
}
#endif

uint32_t gmtf_crc32c(uint32_t crc, const void *buf, size_t n)
{
    pthread_once(&crc_once, crc_init);
    crc = ~crc;
#if defined(__x86_64__)
    if (crc_have_hw)
        return ~crc_hw(crc, buf, n);
#endif
    return ~crc_soft(crc, buf, n);
}
