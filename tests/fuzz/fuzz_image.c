/* libFuzzer target: the filesystem's image parser on arbitrary image bytes.
 * Each input is a whole image: it is mounted read-only (memory image), every
 * directory, file, symlink and xattr is read (the bounded walk of
 * tests/fs/hostile/hwalk.c), then fsck -n --verify-data runs on it. Beyond
 * "no crash" (ASan, UBSan), it checks that neither writes to the image.
 *
 * Random byte changes mostly stop at a checksum, so a custom mutator takes
 * turns with libFuzzer's own: the structure-aware mutator of the hostile
 * image tests (tests/fs/hostile/hmut.c) edits records, chunks, superblock
 * fields and frames and recomputes every checksum. Seeds: real images
 * (make_image_seeds). Build and run: tests/fuzz/README.md. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmtf_fs.h"
#include "hmut.h"
#include "hwork.h"

#define FUZZ_IMAGE_MAX (4u << 20) /* larger inputs are skipped */

static void fuzz_check(int cond)
{
    if (!cond)
        __builtin_trap();
}

static void quiet(void *arg, const char *msg)
{
    (void)arg;
    (void)msg;
}

/* The image must read as it was given. */
static void unchanged(gmtf_image *img, const uint8_t *data, size_t size)
{
    size_t n;
    const uint8_t *q = gmtf_image_mem_data(img, &n);
    fuzz_check(n == size && !memcmp(q, data, size));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 * 4096 || size > FUZZ_IMAGE_MAX)
        return 0;
    gmtf_image *img;
    fuzz_check(gmtf_image_open_mem(data, size, &img) == 0);
    gmtf_fs_options o = {.read_only = 1, .threads = 1, .log = quiet, .cache_bytes = 1u << 20};
    gmtf_fs *fs;
    if (gmtf_fs_mount(img, &o, &fs) == 0) {
        hwalk_stats st;
        hwalk(fs, NULL, &st);
        unchanged(img, data, size);
        gmtf_fs_unmount(fs); /* closes img */
    }
    fuzz_check(gmtf_image_open_mem(data, size, &img) == 0);
    gmtf_fs_check_options co = {.verify_data = 1, .threads = 1, .log = quiet};
    gmtf_fs_check_report rep;
    gmtf_fs_check(img, &co, &rep);
    unchanged(img, data, size);
    gmtf_image_close(img);
    return 0;
}

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    if (seed % 3 == 0) /* libFuzzer's byte-level mutations, a third of the time */
        return LLVMFuzzerMutate(data, size, max_size);
    hmut m;
    uint8_t *out;
    size_t n;
    hmut_apply(data, size, seed, &out, &n, &m);
    if (n > max_size) {
        free(out);
        return LLVMFuzzerMutate(data, size, max_size);
    }
    memcpy(data, out, n);
    free(out);
    return n;
}
