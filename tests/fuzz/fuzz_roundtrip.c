/* libFuzzer target: any bytes encode to a frame that decodes to the same
 * bytes, no bigger than gmtf_frame_bound, identically through the batch
 * API with 1 and 2 threads (determinism). Complements fuzz_frame_decode,
 * which attacks the decoder; this one searches for inputs the encoder
 * mishandles (odd BWT shapes, rank distributions, run lengths). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmtf_codec.h"

#define FUZZ_IN_MAX (1u << 20)

static gmtf_codec *codec, *codec3;
static uint8_t *frame, *frame2, *back;

static void fuzz_check(int cond)
{
    if (!cond)
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!codec) {
        gmtf_codec_options o = {.threads = 1, .mtf = "scalar", .max_block = FUZZ_IN_MAX};
        fuzz_check(gmtf_codec_create(&codec, &o) == 0);
        o.threads = 2;
        o.mtf = "auto";
        fuzz_check(gmtf_codec_create(&codec3, &o) == 0);
        /* 2 blocks of up to FUZZ_IN_MAX each in the batch below */
        frame = malloc(2 * gmtf_frame_bound(FUZZ_IN_MAX));
        frame2 = malloc(2 * gmtf_frame_bound(FUZZ_IN_MAX));
        back = malloc(FUZZ_IN_MAX);
        fuzz_check(frame && frame2 && back);
    }
    if (size > FUZZ_IN_MAX)
        size = FUZZ_IN_MAX;
    long f = gmtf_frame_encode(codec, data, size, frame, gmtf_frame_bound(size));
    fuzz_check(f > 0 && (size_t)f <= gmtf_frame_bound(size));
    gmtf_frame_info info;
    fuzz_check(gmtf_frame_info_get(frame, (size_t)f, &info) == 0);
    fuzz_check(info.frame_len == (uint32_t)f && info.orig_len == size);
    long d = gmtf_frame_decode(codec, frame, (size_t)f, back, size);
    fuzz_check(d == (long)size);
    fuzz_check(memcmp(back, data, size) == 0);

    /* The input cut in two blocks, through the batch API on 2 threads with
     * the auto backend: the same frames as the single-frame path. */
    size_t cut = size / 2;
    uint64_t off[3] = {0, cut, size}, dst_off[3];
    uint64_t cap = gmtf_batch_bound(off, 2);
    fuzz_check(gmtf_batch_encode(codec3, data, off, 2, frame2, cap, dst_off) == 0);
    long f0 = gmtf_frame_encode(codec, data, cut, frame, gmtf_frame_bound(cut));
    fuzz_check(f0 >= 0 && (uint64_t)f0 == dst_off[1]);
    fuzz_check(memcmp(frame, frame2, (size_t)f0) == 0);
    int status[2] = {1, 1};
    fuzz_check(gmtf_batch_decode(codec3, frame2, dst_off, 2, back, off, status) == 0);
    fuzz_check(status[0] == 0 && status[1] == 0);
    fuzz_check(memcmp(back, data, size) == 0);
    return 0;
}
