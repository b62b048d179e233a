/* Writes seed images for fuzz_image: the three base images of the hostile
 * image tests (mkfs + workload: mounted with a journal, cleanly unmounted,
 * with a capacity) and, from each, images edited by the structure-aware
 * mutator (tests/fs/hostile/hmut.c).
 * Usage: make_image_seeds OUTDIR [EDITED_PER_BASE] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hmut.h"
#include "hwork.h"

static int write_file(const char *dir, const char *name, const uint8_t *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *o = fopen(path, "wb");
    if (!o || fwrite(p, 1, n, o) != n || fclose(o) != 0) {
        fprintf(stderr, "make_image_seeds: %s: %s\n", path, strerror(errno));
        return -EIO;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: make_image_seeds OUTDIR [EDITED_PER_BASE]\n");
        return 2;
    }
    long edited = argc > 2 ? strtol(argv[2], NULL, 10) : 8;
    if (mkdir(argv[1], 0755) && errno != EEXIST) {
        fprintf(stderr, "make_image_seeds: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    for (int v = 0; v < HWORK_VARIANTS; v++) {
        uint8_t *img;
        size_t len;
        if (hwork_build(v, &img, &len, NULL))
            return 1;
        char name[64];
        snprintf(name, sizeof name, "image-%d", v);
        if (write_file(argv[1], name, img, len))
            return 1;
        for (long i = 0; i < edited; i++) {
            hmut m;
            uint8_t *out;
            size_t n;
            hmut_apply(img, len, (uint64_t)(v * 1000 + i), &out, &n, &m);
            snprintf(name, sizeof name, "image-%d-edit-%ld", v, i);
            int rc = write_file(argv[1], name, out, n);
            free(out);
            if (rc)
                return 1;
        }
        free(img);
    }
    return 0;
}
