/* simd_bench: MB/s of every MTF variant this CPU supports, one core.
 *
 * Inputs (each BWT'd by libdivsufsort in blocks, then timed block by block):
 *   calgary  the files of CORPUS/calgary concatenated in name order
 *   linux    the first 64 MiB of the Linux source tarball (xz -dc | head)
 *   random   random bytes (not BWT'd: every rank equally likely)
 *   cycle    0, 1, ..., 255 repeated (not BWT'd: every rank is 255)
 * Columns: enc/dec = one call per block; enc2/dec2 = the two-block call on
 * consecutive block pairs (what the codec's batch hook does). Each figure
 * is the median of the runs; MB = 10^6 bytes. Every variant's output is
 * checked against "bsc" before it is timed. */
#include "gmtf_simd.h"

#include <dirent.h>
#include <divsufsort.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *name;
    uint8_t *data; /* BWT output (or raw for the synthetic sets) */
    size_t n;
} dataset;

static size_t block_size = 1 << 20;
static int runs = 5;

/* Thread CPU time by default: other jobs on a shared machine then cost us
 * little more than cache interference; -w switches to wall time. */
static clockid_t clock_id = CLOCK_THREAD_CPUTIME_ID;

static double now(void)
{
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "simd_bench: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static void bwt_blocks(uint8_t *buf, size_t n)
{
    uint8_t *tmp = xmalloc(block_size);
    saidx_t *work = xmalloc(block_size * sizeof(saidx_t));
    for (size_t off = 0; off < n; off += block_size) {
        size_t len = n - off < block_size ? n - off : block_size;
        if (divbwt(buf + off, tmp, work, (saidx_t)len) < 0) {
            fprintf(stderr, "simd_bench: divbwt failed\n");
            exit(1);
        }
        memcpy(buf + off, tmp, len);
    }
    free(tmp);
    free(work);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int load_calgary(const char *corpus, dataset *d)
{
    char dir[4096], path[8192];
    snprintf(dir, sizeof dir, "%s/calgary", corpus);
    DIR *dp = opendir(dir);
    if (!dp)
        return -errno;
    char *names[256];
    size_t count = 0;
    struct dirent *e;
    while ((e = readdir(dp)) && count < 256)
        if (e->d_name[0] != '.')
            names[count++] = strdup(e->d_name);
    closedir(dp);
    qsort(names, count, sizeof names[0], name_cmp);
    d->data = NULL;
    d->n = 0;
    for (size_t i = 0; i < count; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "rb");
        free(names[i]);
        if (!f)
            continue;
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        d->data = realloc(d->data, d->n + (size_t)len + 1);
        if (!d->data || fread(d->data + d->n, 1, (size_t)len, f) != (size_t)len) {
            fclose(f);
            return -EIO;
        }
        d->n += (size_t)len;
        fclose(f);
    }
    d->name = "calgary";
    return d->n ? 0 : -ENOENT;
}

static int load_linux(const char *tarxz, size_t mib, dataset *d)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "xz -dc '%s' | head -c %zuM", tarxz, mib);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -errno;
    size_t want = mib << 20;
    d->data = xmalloc(want);
    d->n = fread(d->data, 1, want, p);
    pclose(p);
    d->name = "linux";
    return d->n ? 0 : -ENOENT;
}

typedef struct {
    double enc, dec, enc2, dec2;
} speeds;

static double median_rate(double *t, size_t bytes)
{
    qsort(t, (size_t)runs, sizeof t[0], cmp_double);
    return bytes / t[runs / 2] / 1e6;
}

/* Runs fn over every block (or block pair) of in, writing to out. */
static void pass(const gmtf_simd_mtf_variant *v, int dec, int pairs, const uint8_t *in,
                 uint8_t *out, size_t n)
{
    gmtf_simd_mtf_fn one = dec ? v->decode : v->encode;
    gmtf_simd_mtf2_fn two = dec ? v->decode2 : v->encode2;
    size_t step = pairs ? 2 * block_size : block_size;
    for (size_t off = 0; off < n; off += step) {
        size_t len = n - off < block_size ? n - off : block_size;
        if (!pairs) {
            one(in + off, out + off, len);
            continue;
        }
        size_t off1 = off + len, len1 = 0;
        if (off1 < n)
            len1 = n - off1 < block_size ? n - off1 : block_size;
        two(in + off, out + off, len, in + off1, out + off1, len1);
    }
}

static int measure(const gmtf_simd_mtf_variant *v, const dataset *d, const uint8_t *ref,
                   uint8_t *out, speeds *sp)
{
    double t[4][64];
    for (int r = 0; r < runs; r++) {
        for (int k = 0; k < 4; k++) { /* enc, dec, enc2, dec2 */
            int dec = k & 1, pairs = k >> 1;
            double t0 = now();
            pass(v, dec, pairs, dec ? ref : d->data, out, d->n);
            t[k][r] = now() - t0;
            if (memcmp(out, dec ? d->data : ref, d->n)) {
                fprintf(stderr, "simd_bench: %s %s%s output differs on %s\n", v->name,
                        dec ? "decode" : "encode", pairs ? "2" : "", d->name);
                return -1;
            }
        }
    }
    sp->enc = median_rate(t[0], d->n);
    sp->dec = median_rate(t[1], d->n);
    sp->enc2 = median_rate(t[2], d->n);
    sp->dec2 = median_rate(t[3], d->n);
    return 0;
}

static int wanted(const char *list, const char *name)
{
    if (!list)
        return 1;
    size_t len = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += len)
        if ((p == list || p[-1] == ',') && (p[len] == ',' || p[len] == 0))
            return 1;
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: simd_bench [-r RUNS] [-b BLOCK_KIB] [-c CORPUS_DIR] [-l LINUX_TAR_XZ]\n"
            "                  [-m LINUX_MIB] [-s SYNTH_MIB] [-V VARIANT,...] [-d SET,...] [-w]\n"
            "-w: wall-clock time instead of this thread's CPU time\n"
            "defaults: -r 5 -b 1024 -c ../shared/corpus -l /usr/src/linux-source-6.1.tar.xz\n"
            "          -m 64 -s 4, all variants, sets calgary,linux,random,cycle\n");
}

int main(int argc, char **argv)
{
    const char *corpus = "../shared/corpus", *tarxz = "/usr/src/linux-source-6.1.tar.xz";
    const char *only = NULL, *sets = NULL;
    size_t linux_mib = 64, synth_mib = 4;
    int c;
    while ((c = getopt(argc, argv, "r:b:c:l:m:s:V:d:wh")) != -1) {
        switch (c) {
        case 'w': clock_id = CLOCK_MONOTONIC; break;
        case 'r': runs = atoi(optarg); break;
        case 'b': block_size = (size_t)atol(optarg) << 10; break;
        case 'c': corpus = optarg; break;
        case 'l': tarxz = optarg; break;
        case 'm': linux_mib = (size_t)atol(optarg); break;
        case 's': synth_mib = (size_t)atol(optarg); break;
        case 'V': only = optarg; break;
        case 'd': sets = optarg; break;
        default: usage(); return c == 'h' ? 0 : 2;
        }
    }
    if (runs < 1 || runs > 64 || block_size == 0) {
        usage();
        return 2;
    }

    dataset ds[4];
    int nd = 0;
    if (wanted(sets, "calgary")) {
        if (load_calgary(corpus, &ds[nd]) == 0)
            bwt_blocks(ds[nd].data, ds[nd].n), nd++;
        else
            fprintf(stderr, "simd_bench: no calgary corpus under %s, skipped\n", corpus);
    }
    if (wanted(sets, "linux")) {
        if (load_linux(tarxz, linux_mib, &ds[nd]) == 0)
            bwt_blocks(ds[nd].data, ds[nd].n), nd++;
        else
            fprintf(stderr, "simd_bench: cannot read %s, linux skipped\n", tarxz);
    }
    size_t sn = synth_mib << 20;
    if (wanted(sets, "random")) {
        uint64_t x = 0x9e3779b97f4a7c15ull;
        ds[nd] = (dataset){"random", xmalloc(sn), sn};
        for (size_t i = 0; i < sn; i++) { /* xorshift64 */
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            ds[nd].data[i] = (uint8_t)(x >> 32);
        }
        nd++;
    }
    if (wanted(sets, "cycle")) {
        ds[nd] = (dataset){"cycle", xmalloc(sn), sn};
        for (size_t i = 0; i < sn; i++)
            ds[nd].data[i] = (uint8_t)i;
        nd++;
    }

    const gmtf_simd_mtf_variant *const *vs;
    size_t nv = gmtf_simd_mtf_variants(&vs);
    const gmtf_simd_mtf_variant *bsc = gmtf_simd_mtf_find("bsc");
    printf("block %zu KiB, median of %d runs, %s time, MB = 10^6 bytes; dispatch picks \"%s\"\n",
           block_size >> 10, runs, clock_id == CLOCK_MONOTONIC ? "wall" : "thread CPU",
           gmtf_simd_mtf_best()->name);
    int bad = 0;
    for (int k = 0; k < nd; k++) {
        dataset *d = &ds[k];
        uint8_t *ref = xmalloc(d->n), *out = xmalloc(d->n);
        pass(bsc, 0, 0, d->data, ref, d->n);
        printf("\n%s: %zu bytes\n%-10s %9s %9s %9s %9s %8s %8s\n", d->name, d->n, "variant",
               "enc MB/s", "dec MB/s", "enc2", "dec2", "enc/bsc", "dec/bsc");
        speeds base = {0, 0, 0, 0};
        for (size_t i = nv; i-- > 0;) { /* bsc is last: measure it first */
            const gmtf_simd_mtf_variant *v = vs[i];
            if (!wanted(only, v->name) && v != bsc)
                continue;
            if (!v->supported()) {
                printf("%-10s unsupported on this CPU (needs %s)\n", v->name, v->isa);
                continue;
            }
            speeds sp;
            if (measure(v, d, ref, out, &sp)) {
                bad = 1;
                continue;
            }
            if (v == bsc)
                base = sp;
            printf("%-10s %9.1f %9.1f %9.1f %9.1f %7.2fx %7.2fx\n", v->name, sp.enc, sp.dec,
                   sp.enc2, sp.dec2, sp.enc / base.enc, sp.dec / base.dec);
            fflush(stdout);
        }
        free(ref);
        free(out);
        free(d->data);
    }
    return bad;
}
