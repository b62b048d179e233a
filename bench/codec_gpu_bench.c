/* The block codec with its BWT on the GPU against the CPU path, host to
 * host through the batch API (gmtf_batch_encode / gmtf_batch_decode):
 * GB/s (10^9 input bytes per second), medians, both codecs in the same
 * run with the same thread count; the GPU codec's frames compared byte for
 * byte with the CPU codec's, every decode compared with the input.
 *
 * usage: codec_gpu_bench --input FILE [--mib 256] [--block 2048] (KiB)
 *                        [--threads 16] [--reps 5] [--sweep] [--corpus DIR]
 *                        [--gpu-only | --ibwt]
 * The GPU codec is mtf "auto" (the GPU for batches), the CPU one "simd".
 * --sweep times small batches both ways (the size rule's evidence);
 * --corpus checks identity on every file under DIR (900 KiB blocks). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bwt.h"
#include "codec_internal.h"
#include "gmtf_codec.h"
#include "gpu.h"
#include "gpu_bwt.h"
#include "gpu_ibwt.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

static int failures;

typedef struct run {
    const uint8_t *src;
    uint64_t *off, *foff;
    size_t count;
    uint8_t *frames, *out;
    uint64_t cap;
    int *status;
} run;

static void run_init(run *r, const uint8_t *src, size_t n, size_t block)
{
    r->src = src;
    r->count = (n + block - 1) / block;
    r->off = xmalloc((r->count + 1) * sizeof *r->off);
    r->foff = xmalloc((r->count + 1) * sizeof *r->foff);
    for (size_t i = 0; i <= r->count; i++)
        r->off[i] = i * block < n ? i * block : n;
    r->cap = gmtf_batch_bound(r->off, r->count);
    r->frames = xmalloc(r->cap);
    r->out = xmalloc(n);
    r->status = xmalloc(r->count * sizeof *r->status);
}

static void run_free(run *r)
{
    free(r->off);
    free(r->foff);
    free(r->frames);
    free(r->out);
    free(r->status);
}

static double enc(gmtf_codec *c, run *r)
{
    double t0 = now_ms();
    int rc = gmtf_batch_encode(c, r->src, r->off, r->count, r->frames, r->cap, r->foff);
    double t = now_ms() - t0;
    if (rc) {
        fprintf(stderr, "encode: %s\n", gmtf_strerror(rc));
        failures++;
    }
    return t;
}

static double dec(gmtf_codec *c, run *r)
{
    memset(r->out, 0x5a, r->off[r->count]);
    double t0 = now_ms();
    int rc = gmtf_batch_decode(c, r->frames, r->foff, r->count, r->out, r->off, r->status);
    double t = now_ms() - t0;
    if (rc || memcmp(r->out, r->src, r->off[r->count]) != 0) {
        fprintf(stderr, "decode: %s, output %s\n", gmtf_strerror(rc),
                memcmp(r->out, r->src, r->off[r->count]) ? "differs" : "same");
        failures++;
    }
    return t;
}

/* Encodes with both codecs, compares the frames; times reps of each
 * direction on each codec, alternating. ms[0..3]: gpu enc, cpu enc, gpu
 * dec, cpu dec (medians). */
static int compare(gmtf_codec *gpu, gmtf_codec *cpu, const uint8_t *src, size_t n, size_t block,
                   int reps, double ms[4], uint64_t *packed)
{
    run a, b;
    run_init(&a, src, n, block);
    run_init(&b, src, n, block);
    enc(gpu, &a);
    enc(cpu, &b);
    int same = a.foff[a.count] == b.foff[b.count] &&
               memcmp(a.foff, b.foff, (a.count + 1) * sizeof *a.foff) == 0 &&
               memcmp(a.frames, b.frames, a.foff[a.count]) == 0;
    if (!same) {
        fprintf(stderr, "FRAMES DIFFER (gpu %llu bytes, cpu %llu bytes)\n",
                (unsigned long long)a.foff[a.count], (unsigned long long)b.foff[b.count]);
        failures++;
    }
    *packed = a.foff[a.count];
    dec(gpu, &a);
    dec(cpu, &a); /* the CPU reads the GPU's frames */
    double *t = xmalloc(4 * (size_t)reps * sizeof *t);
    for (int i = 0; i < reps; i++) {
        t[i] = enc(gpu, &a);
        t[reps + i] = enc(cpu, &b);
        t[2 * reps + i] = dec(gpu, &a);
        t[3 * reps + i] = dec(cpu, &b);
    }
    for (int k = 0; k < 4; k++)
        ms[k] = median(t + k * reps, reps);
    free(t);
    run_free(&a);
    run_free(&b);
    return same;
}

/* The GPU codec alone: ms[0] encode, ms[1] decode (medians). */
static void gpu_only(gmtf_codec *gpu, const uint8_t *src, size_t n, size_t block, int reps,
                     double ms[2])
{
    run a;
    run_init(&a, src, n, block);
    enc(gpu, &a);
    dec(gpu, &a);
    double *t = xmalloc(2 * (size_t)reps * sizeof *t);
    for (int i = 0; i < reps; i++) {
        t[i] = enc(gpu, &a);
        t[reps + i] = dec(gpu, &a);
    }
    ms[0] = median(t, reps);
    ms[1] = median(t + reps, reps);
    free(t);
    run_free(&a);
}

/* The GPU inverse BWT alone, pinned host memory, phases by events. */
static void ibwt_alone(const uint8_t *src, size_t n, size_t block, int reps)
{
    size_t count = (n + block - 1) / block;
    uint64_t *off = xmalloc((count + 1) * sizeof *off);
    uint32_t *step = xmalloc(count * sizeof *step);
    for (size_t i = 0; i <= count; i++)
        off[i] = i * block < n ? i * block : n;
    for (size_t i = 0; i < count; i++)
        step[i] = 1u << gmtf_bwt_step_log2(off[i + 1] - off[i]);
    uint64_t nidx = gmtf_gpu_bwt_index_total(off, count, step);
    uint8_t *h_src = gmtf_gpu_host_alloc(n), *h_bwt = gmtf_gpu_host_alloc(n),
            *h_out = gmtf_gpu_host_alloc(n);
    uint32_t *h_idx = gmtf_gpu_host_alloc(nidx * 4);
    gmtf_gpu_bwt_ctx *f = NULL;
    gmtf_gpu_ibwt_ctx *g = NULL;
    if (!h_src || !h_bwt || !h_out || !h_idx || gmtf_gpu_bwt_create(&f) ||
        gmtf_gpu_ibwt_create(&g)) {
        fprintf(stderr, "ibwt alone: no memory or device\n");
        failures++;
        goto out;
    }
    memcpy(h_src, src, n);
    if (gmtf_gpu_bwt_batch(f, h_src, off, count, step, h_bwt, h_idx)) {
        fprintf(stderr, "forward: %s\n", gmtf_gpu_bwt_error(f));
        failures++;
        goto out;
    }
    gmtf_gpu_bwt_destroy(f); /* its 12 GB back */
    f = NULL;
    double *t = xmalloc((size_t)reps * sizeof *t), ph[GMTF_GPU_IBWT_PHASES] = {0};
    double phs[GMTF_GPU_IBWT_PHASES][16];
    int r = reps < 16 ? reps : 16;
    for (int i = -1; i < r; i++) {
        memset(h_out, 0, n);
        double t0 = now_ms();
        int rc = gmtf_gpu_ibwt_batch(g, h_bwt, off, count, step, h_idx, h_out);
        double dt = now_ms() - t0;
        if (rc || memcmp(h_out, src, n)) {
            fprintf(stderr, "ibwt: %d %s\n", rc, gmtf_gpu_ibwt_error(g));
            failures++;
            break;
        }
        if (i < 0)
            continue; /* warm-up */
        t[i] = dt;
        gmtf_gpu_ibwt_last_ms(g, ph);
        for (int k = 0; k < GMTF_GPU_IBWT_PHASES; k++)
            phs[k][i] = ph[k];
    }
    double m = median(t, r);
    for (int k = 0; k < GMTF_GPU_IBWT_PHASES; k++)
        ph[k] = median(phs[k], r);
    printf("GPU inverse BWT alone, %zu MiB in %zu KiB blocks, pinned: %.2f ms = %.3f GB/s "
           "(upload %.2f, keys+sort %.2f, table %.2f, walk %.2f, download %.2f ms; walk alone "
           "%.2f GB/s; %llu segments walked again)\n",
           n >> 20, block >> 10, m, n / m / 1e6, ph[0], ph[1], ph[2], ph[3], ph[4], n / ph[3] / 1e6,
           (unsigned long long)gmtf_gpu_ibwt_last_repaired(g));
    free(t);
out:
    gmtf_gpu_bwt_destroy(f);
    gmtf_gpu_ibwt_destroy(g);
    gmtf_gpu_host_free(h_src);
    gmtf_gpu_host_free(h_bwt);
    gmtf_gpu_host_free(h_out);
    gmtf_gpu_host_free(h_idx);
    free(off);
    free(step);
}

static uint8_t *read_prefix(const char *path, size_t want, size_t *got)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *p = xmalloc(want);
    *got = fread(p, 1, want, f);
    fclose(f);
    return p;
}

static void corpus(gmtf_codec *gpu, gmtf_codec *cpu, const char *dir)
{
    const char *sub[] = {"calgary", "canterbury"};
    for (int s = 0; s < 2; s++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, sub[s]);
        DIR *d = opendir(path);
        if (!d) {
            printf("corpus %s: absent\n", path);
            continue;
        }
        size_t total = 0, files = 0, cap = 16u << 20, same = 0;
        uint8_t *all = xmalloc(cap);
        struct dirent *e;
        /* each file on its own: its blocks end at its end */
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char file[8192];
            snprintf(file, sizeof file, "%s/%s", path, e->d_name);
            size_t n;
            uint8_t *p = read_prefix(file, cap, &n);
            if (!p || n == 0) {
                free(p);
                continue;
            }
            double ms[4];
            uint64_t packed;
            same += compare(gpu, cpu, p, n, 900u << 10, 1, ms, &packed);
            files++;
            total += n;
            free(p);
        }
        closedir(d);
        free(all);
        printf("corpus %s: %zu files, %zu bytes: frames identical for %zu of %zu files, all "
               "decoded (GPU and CPU)\n",
               sub[s], files, total, same, files);
    }
}

int main(int argc, char **argv)
{
    const char *input = NULL, *corpus_dir = NULL;
    size_t mib = 256, block_kib = 2048;
    unsigned threads = 16;
    int reps = 5, sweep = 0, gpu_alone = 0, ibwt_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--input") && i + 1 < argc)
            input = argv[++i];
        else if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            mib = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--block") && i + 1 < argc)
            block_kib = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sweep"))
            sweep = 1;
        else if (!strcmp(argv[i], "--gpu-only"))
            gpu_alone = 1;
        else if (!strcmp(argv[i], "--ibwt"))
            ibwt_only = 1;
        else if (!strcmp(argv[i], "--corpus") && i + 1 < argc)
            corpus_dir = argv[++i];
        else {
            fprintf(stderr,
                    "usage: %s --input FILE [--mib 256] [--block KIB] [--threads 16] "
                    "[--reps 5] [--sweep] [--corpus DIR] [--gpu-only | --ibwt]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > 64 || !input)
        return 2;
    size_t n;
    uint8_t *src = read_prefix(input, mib << 20, &n);
    if (!src || n == 0) {
        fprintf(stderr, "cannot read %s\n", input);
        return 2;
    }
    if (ibwt_only) { /* the GPU inverse BWT alone (GMTF_GPU_IBWT_BIDIR picks the walk) */
        ibwt_alone(src, n, block_kib << 10, reps);
        free(src);
        printf("%s\n", failures ? "FAILURES" : "all checks passed");
        return failures ? 1 : 0;
    }
    gmtf_codec *gpu, *cpu;
    gmtf_codec_options og = {.threads = threads, .mtf = "auto", .max_block = 16u << 20};
    gmtf_codec_options oc = {.threads = threads, .mtf = "simd", .max_block = 16u << 20};
    if (gmtf_codec_create(&gpu, &og) || gmtf_codec_create(&cpu, &oc)) {
        fprintf(stderr, "codec create failed\n");
        return 2;
    }
    /* several GPUs (GMTF_GPUS): the counters and settings are device 0's */
    gmtf_bwt_dev *d = gpu->multi ? &gpu->multi->sub[0]->bwt_dev : gmtf_codec_bwt_dev(gpu);
    if (gpu->multi)
        printf("GPUs: %u (the device figures below are the first one's)\n", gpu->multi->n);
    if (!d->ops) {
        printf("SKIP: the codec has no GPU BWT (no CUDA device?)\n");
        return 77;
    }
    char name[256] = "";
    int sms = 0;
    gmtf_gpu_device_info(name, sizeof name, &sms);
    printf(
        "device %s (%d SMs); codecs: auto (GPU BWT, min batch %llu / %llu bytes, %u / %u chunks) "
        "vs simd, %u threads each\n",
        name, sms, (unsigned long long)d->min_bytes[0], (unsigned long long)d->min_bytes[1],
        d->pipe[0], d->pipe[1], threads);
    if (corpus_dir)
        corpus(gpu, cpu, corpus_dir);
    if (gpu_alone) { /* one CPU encode to compare with, then the GPU codec's medians */
        run a, b;
        run_init(&a, src, n, block_kib << 10);
        run_init(&b, src, n, block_kib << 10);
        enc(gpu, &a);
        enc(cpu, &b);
        int same =
            a.foff[a.count] == b.foff[b.count] && memcmp(a.frames, b.frames, a.foff[a.count]) == 0;
        failures += !same;
        run_free(&a);
        run_free(&b);
        double m2[2];
        uint64_t t0[GMTF_BWT_DEV_NCTX];
        memcpy(t0, d->ns, sizeof t0);
        gpu_only(gpu, src, n, block_kib << 10, reps, m2);
        double per = 1e6 * (reps + 1);
        printf("  GPU codec, %u / %u chunks: encode %.1f ms = %.3f GB/s (calls: BWT %.1f, lane "
               "encoder %.1f ms), decode %.1f ms = %.3f GB/s (calls: lanes %.1f, inverse %.1f "
               "ms); frames %s\n",
               d->pipe[0], d->pipe[1], m2[0], n / m2[0] / 1e6, (d->ns[0] - t0[0]) / per,
               (d->ns[3] + d->ns[4] + d->ns[5] - t0[3] - t0[4] - t0[5]) / per, m2[1],
               n / m2[1] / 1e6, (d->ns[2] - t0[2]) / per, (d->ns[1] - t0[1]) / per,
               same ? "identical" : "DIFFER");
        gmtf_codec_destroy(gpu);
        gmtf_codec_destroy(cpu);
        free(src);
        printf("%s\n", failures ? "FAILURES" : "all checks passed");
        return failures ? 1 : 0;
    }
    double ms[4];
    uint64_t packed;
    uint64_t ns0[GMTF_BWT_DEV_NCTX];
    memcpy(ns0, d->ns, sizeof ns0);
    int same = compare(gpu, cpu, src, n, block_kib << 10, reps, ms, &packed);
    double dev_fwd = (d->ns[0] - ns0[0]) / 1e6 / (reps + 1),
           dev_inv = (d->ns[1] - ns0[1]) / 1e6 / (reps + 2),
           dev_lanes = (d->ns[2] - ns0[2]) / 1e6 / (reps + 2),
           dev_enc = (d->ns[3] + d->ns[4] + d->ns[5] - ns0[3] - ns0[4] - ns0[5]) / 1e6 / (reps + 1);
    printf("%s, %zu MiB in %zu KiB blocks -> %llu bytes; frames GPU vs CPU: %s\n", input, n >> 20,
           block_kib, (unsigned long long)packed, same ? "identical" : "DIFFER");
    printf("  encode: GPU codec %.1f ms = %.3f GB/s (device BWT calls %.1f ms, lane encoder "
           "calls %.1f ms), CPU codec %.1f ms = %.3f GB/s: %.2fx\n",
           ms[0], n / ms[0] / 1e6, dev_fwd, dev_enc, ms[1], n / ms[1] / 1e6, ms[1] / ms[0]);
    printf("  decode: GPU codec %.1f ms = %.3f GB/s (device lanes calls %.1f ms, inverse calls "
           "%.1f ms), CPU codec %.1f ms = %.3f GB/s: %.2fx\n",
           ms[2], n / ms[2] / 1e6, dev_lanes, dev_inv, ms[3], n / ms[3] / 1e6, ms[3] / ms[2]);
    unsigned pipe0[2] = {d->pipe[0], d->pipe[1]}, pipes[] = {1, 2, 4};
    for (size_t i = 0; i < sizeof pipes / sizeof pipes[0]; i++) {
        double m2[2];
        d->pipe[0] = d->pipe[1] = pipes[i];
        gpu_only(gpu, src, n, block_kib << 10, reps, m2);
        printf("  GPU codec, batch in %u chunk(s): encode %.1f ms = %.3f GB/s, decode %.1f ms = "
               "%.3f GB/s\n",
               pipes[i], m2[0], n / m2[0] / 1e6, m2[1], n / m2[1] / 1e6);
    }
    d->pipe[0] = pipe0[0];
    d->pipe[1] = pipe0[1];
    {
        double m2[2];
        int keep = d->use_lanes, keep_enc = d->use_enc, keep_inv = d->use_inv_dev;
        d->use_inv_dev = 0;
        gpu_only(gpu, src, n, block_kib << 10, reps, m2);
        printf("  GPU codec, lanes' output down and up again (round trip): decode %.1f ms = "
               "%.3f GB/s\n",
               m2[1], n / m2[1] / 1e6);
        d->use_lanes = 0;
        d->use_enc = 0;
        gpu_only(gpu, src, n, block_kib << 10, reps, m2);
        printf("  GPU codec, method 2 on the CPU (BWT alone on the device): encode %.1f ms = "
               "%.3f GB/s, decode %.1f ms = %.3f GB/s\n",
               m2[0], n / m2[0] / 1e6, m2[1], n / m2[1] / 1e6);
        d->use_lanes = keep;
        d->use_enc = keep_enc;
        d->use_inv_dev = keep_inv;
    }
    if (sweep) {
        uint64_t keep[2] = {d->min_bytes[0], d->min_bytes[1]};
        d->min_bytes[0] = d->min_bytes[1] = 1;
        printf("small batches (median of %d; ms GPU / CPU codec):\n", reps);
        size_t kib[] = {64, 64, 64, 256, 2048, 2048, 2048, 2048};
        size_t cnt[] = {4, 16, 64, 16, 1, 2, 4, 8};
        for (size_t i = 0; i < sizeof kib / sizeof kib[0]; i++) {
            size_t m = kib[i] * cnt[i] << 10;
            if (m > n)
                continue;
            compare(gpu, cpu, src, m, kib[i] << 10, reps, ms, &packed);
            printf("  %3zu x %4zu KiB: encode %7.2f / %7.2f, decode %7.2f / %7.2f\n", cnt[i],
                   kib[i], ms[0], ms[1], ms[2], ms[3]);
        }
        d->min_bytes[0] = keep[0];
        d->min_bytes[1] = keep[1];
    }
    printf("device: %llu blocks forward, %llu inverse, %llu lanes, %llu lane-encoded, retired %d\n",
           (unsigned long long)d->blocks[0], (unsigned long long)d->blocks[1],
           (unsigned long long)d->blocks[2],
           (unsigned long long)(d->blocks[3] + d->blocks[4] + d->blocks[5]), d->retired);
    gmtf_codec_destroy(gpu);
    gmtf_codec_destroy(cpu);
    ibwt_alone(src, n, block_kib << 10, reps);
    free(src);
    printf("%s\n", failures ? "FAILURES" : "all checks passed");
    return failures ? 1 : 0;
}
