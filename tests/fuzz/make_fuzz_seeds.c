/* Writes seed frames for the fuzz targets: one file per sample block
 * (every frame method, several block sizes, 1 to 4 BWT indexes; one block
 * of 920 KiB for the entropy method "lanes"), taken
 * from the files named on the command line plus synthetic data.
 * Usage: make_fuzz_seeds OUTDIR [FILE...] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gmtf_codec.h"

static gmtf_codec *codec;
static unsigned seq;

static int write_frame(const char *dir, const uint8_t *data, size_t n)
{
    uint8_t *f = malloc(gmtf_frame_bound(n));
    if (!f)
        return -ENOMEM;
    long r = gmtf_frame_encode(codec, data, n, f, gmtf_frame_bound(n));
    if (r < 0) {
        fprintf(stderr, "make_fuzz_seeds: encode: %s\n", gmtf_strerror((int)r));
        free(f);
        return (int)r;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/seed-%03u", dir, seq++);
    FILE *o = fopen(path, "wb");
    if (!o || fwrite(f, 1, (size_t)r, o) != (size_t)r || fclose(o) != 0) {
        fprintf(stderr, "make_fuzz_seeds: %s: %s\n", path, strerror(errno));
        free(f);
        return -EIO;
    }
    free(f);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s OUTDIR [FILE...]\n", argv[0]);
        return 2;
    }
    mkdir(argv[1], 0777);
    gmtf_codec_options o = {.threads = 1, .mtf = "scalar"};
    if (gmtf_codec_create(&codec, &o) != 0)
        return 1;
    static uint8_t buf[70000];
    static const size_t cuts[] = {64, 1000, 20000, 70000};
    int rc = 0;
    for (int i = 2; i < argc; i++) {
        FILE *in = fopen(argv[i], "rb");
        if (!in) {
            fprintf(stderr, "make_fuzz_seeds: %s: %s\n", argv[i], strerror(errno));
            continue;
        }
        size_t n = fread(buf, 1, cuts[i % 4], in);
        fclose(in);
        rc |= write_frame(argv[1], buf, n);
    }
    memset(buf, 'a', 5000);
    rc |= write_frame(argv[1], buf, 5000); /* run */
    rc |= write_frame(argv[1], buf, 0);    /* empty */
    for (size_t i = 0; i < 3000; i++)
        buf[i] = (uint8_t)(i * 2654435761u >> 13); /* incompressible: raw */
    rc |= write_frame(argv[1], buf, 3000);
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t) "abcab"[i % 5];
    rc |= write_frame(argv[1], buf, sizeof buf);
    /* a block of 920 KiB of text-like words: method 2 (lanes), which the
     * method rule gives only to blocks of 900 KiB or more, so that the
     * lanes decoders (scalar and AVX-512) get inputs too */
    size_t big = 920u << 10;
    uint8_t *t = malloc(big);
    if (t) {
        uint32_t x = 12345;
        for (size_t i = 0; i < big;) {
            x = x * 1103515245u + 12345u;
            unsigned w = (x >> 16) % 211, len = 2 + w % 7;
            for (unsigned k = 0; k < len && i < big; k++)
                t[i++] = (uint8_t)('a' + (w * 7 + k * 13 + (w >> 3) * k) % 26);
            if (i < big)
                t[i++] = (uint8_t)((x >> 8) % 9 ? ' ' : '\n');
        }
        rc |= write_frame(argv[1], t, big);
        free(t);
    }
    gmtf_codec_destroy(codec);
    printf("%u seed frames in %s\n", seq, argv[1]);
    return rc ? 1 : 0;
}
