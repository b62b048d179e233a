/* libFuzzer target: gmtf_frame_info_get and gmtf_frame_decode on arbitrary
 * bytes, with a size-bounded output buffer (FUZZ_OUT_MAX) placed at the very
 * end of its allocation so any write past the capacity the decoder was
 * given lands in ASan's redzone.
 *
 * Beyond "no crash", it checks what the API promises: decode succeeds only
 * where info_get does, returns exactly orig_len bytes whose CRC-32C is the
 * header's, and gmtf_batch_decode (staged path, 2 threads, smaller
 * max_block) gives the same bytes or, for blocks over its max_block, an
 * error. Build: meson setup -Dfuzz=true with CC=clang; see
 * tests/fuzz/README.md. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmtf_codec.h"

#define FUZZ_OUT_MAX (1u << 20) /* also the codec's max_block: bounds memory */

static gmtf_codec *codec, *batch_codec;
static uint8_t *out_buf, *out_buf2;

/* The batch codec decodes through the staged path (a backend with batch
 * hooks) on 2 threads, with a smaller max_block than the frames the
 * per-block codec accepts: both limits are checked, on both paths. */
#define FUZZ_BATCH_MAX_BLOCK (64u << 10)

static void fuzz_check(int cond)
{
    if (!cond)
        __builtin_trap();
}

static void fuzz_init(void)
{
    gmtf_codec_options o = {.threads = 1, .mtf = "scalar", .max_block = FUZZ_OUT_MAX};
    fuzz_check(gmtf_codec_create(&codec, &o) == 0);
    o.threads = 2;
    o.mtf = "scalar-batch";
    o.max_block = FUZZ_BATCH_MAX_BLOCK;
    fuzz_check(gmtf_codec_create(&batch_codec, &o) == 0);
    out_buf = malloc(FUZZ_OUT_MAX);
    out_buf2 = malloc(FUZZ_OUT_MAX);
    fuzz_check(out_buf && out_buf2);
}

static void fuzz_one(const uint8_t *data, size_t size)
{
    gmtf_frame_info info;
    int ir = gmtf_frame_info_get(data, size, &info);
    if (ir == 0) {
        fuzz_check(info.frame_len <= size);
        fuzz_check(info.orig_len <= GMTF_BLOCK_MAX);
        fuzz_check(info.method <= GMTF_METHOD_BWT);
    }
    /* Capacity: the frame's own length when it fits, else the whole buffer
     * (the decoder must then refuse with an error, not overrun). */
    size_t cap = ir == 0 && info.orig_len <= FUZZ_OUT_MAX ? info.orig_len : FUZZ_OUT_MAX;
    uint8_t *dst = out_buf + (FUZZ_OUT_MAX - cap);
    long r = gmtf_frame_decode(codec, data, size, dst, cap);
    if (r >= 0) {
        fuzz_check(ir == 0);
        fuzz_check((size_t)r == info.orig_len);
        fuzz_check(gmtf_crc32c(0, dst, (size_t)r) == info.data_crc);
    }
    if (ir != 0 || info.orig_len > FUZZ_OUT_MAX)
        return;

    /* The staged batch path agrees: the same bytes, or an error where the
     * block exceeds its max_block. */
    uint64_t foff[2] = {0, info.frame_len}, doff[2] = {0, info.orig_len};
    int status = 1;
    uint8_t *dst2 = out_buf2 + (FUZZ_OUT_MAX - info.orig_len);
    int br = gmtf_batch_decode(batch_codec, data, foff, 1, dst2, doff, &status);
    fuzz_check(br == status);
    if (br == 0)
        fuzz_check(r >= 0 && memcmp(dst, dst2, info.orig_len) == 0);
    else
        fuzz_check(r < 0 || info.orig_len > FUZZ_BATCH_MAX_BLOCK);
}

/* Random bytes almost never carry a valid header checksum, so most inputs
 * would stop at it. Each input is therefore also tried with the checksum
 * recomputed (layout in docs/codec.md: K at byte 6, the CRC-32C of bytes
 * [0, 20+4K) stored right after them), which lets mutated header fields
 * reach the payload decoders. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!codec)
        fuzz_init();
    fuzz_one(data, size);
    if (size < 24 || data[6] > 16 || size < 24 + 4 * (size_t)data[6])
        return 0;
    uint8_t *fixed = malloc(size);
    fuzz_check(fixed != NULL);
    memcpy(fixed, data, size);
    size_t h = 20 + 4 * (size_t)data[6];
    uint32_t crc = gmtf_crc32c(0, fixed, h);
    for (int i = 0; i < 4; i++)
        fixed[h + (size_t)i] = (uint8_t)(crc >> (8 * i));
    fuzz_one(fixed, size);
    free(fixed);
    return 0;
}
