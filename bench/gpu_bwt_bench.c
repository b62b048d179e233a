/* GPU forward BWT benchmark: GB/s (10^9 input bytes per second) of the GPU
 * suffix sort (gpu_bwt.h), kernel-only and host to host, beside
 * libdivsufsort (codec/bwt.c's gmtf_bwt_forward) on every host core, one
 * block per thread, in the same run; per-phase device times; every GPU
 * output checked against the CPU one.
 *
 * usage: gpu_bwt_bench (--input FILE | --pattern P) [--mib 256]
 *                      [--blocks 1,2,4,16] [--reps 5] [--cpu-reps 3]
 *                      [--threads N] [--no-cpu] [--json FILE]
 * FILE is raw data (e.g. a prefix of the Linux tar), tiled to --mib MiB
 * when shorter; P makes the input instead: zero (one byte repeated),
 * abab, fib (the Fibonacci word), random. --blocks are block sizes in
 * MiB. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bwt.h"
#include "gpu.h"
#include "gpu_bwt.h"

#define MIB (1u << 20)

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

/* ---- CPU: gmtf_bwt_forward, one block per thread ------------------------- */

typedef struct cpu_job {
    const uint8_t *src;
    uint8_t *dst;
    uint32_t *idx; /* GMTF_BWT_MAX_INDEXES per block */
    const uint64_t *off;
    size_t count, next, block;
    int failed;
    pthread_mutex_t lock;
} cpu_job;

static void *cpu_worker(void *arg)
{
    cpu_job *j = arg;
    void *ws = malloc(gmtf_bwt_workspace_size(j->block));
    for (;;) {
        pthread_mutex_lock(&j->lock);
        size_t i = j->next++;
        pthread_mutex_unlock(&j->lock);
        if (i >= j->count || !ws)
            break;
        size_t n = j->off[i + 1] - j->off[i];
        if (gmtf_bwt_forward(j->src + j->off[i], j->dst + j->off[i], n,
                             j->idx + i * GMTF_BWT_MAX_INDEXES, ws))
            j->failed = 1;
    }
    if (!ws)
        j->failed = 1;
    free(ws);
    return NULL;
}

static double cpu_bwt(const uint8_t *src, uint8_t *dst, uint32_t *idx, const uint64_t *off,
                      size_t count, size_t block, int threads)
{
    cpu_job j = {src, dst, idx, off, count, 0, block, 0, PTHREAD_MUTEX_INITIALIZER};
    pthread_t *t = malloc((size_t)threads * sizeof *t);
    double t0 = now_ms();
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, cpu_worker, &j);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    double ms = now_ms() - t0;
    free(t);
    return j.failed ? -1 : ms;
}

/* ---- main ------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: gpu_bwt_bench (--input FILE | --pattern zero|abab|fib|random)\n"
            "                     [--mib 256] [--blocks 1,2,4,16] [--reps 5] [--cpu-reps 3]\n"
            "                     [--threads N] [--no-cpu] [--json FILE]\n");
    exit(2);
}

/* Synthetic inputs: 0 when the pattern is unknown. */
static int make_pattern(const char *p, uint8_t *dst, size_t n)
{
    if (!strcmp(p, "zero"))
        memset(dst, 0, n);
    else if (!strcmp(p, "abab"))
        for (size_t i = 0; i < n; i++)
            dst[i] = "ab"[i & 1];
    else if (!strcmp(p, "fib")) {
        /* Fibonacci word: s(k) = s(k-1) s(k-2), grown in place */
        size_t a = 1, b = 2; /* lengths of s(k-1) = "a", s(k) = "ab" */
        dst[0] = 'a';
        if (n > 1)
            dst[1] = 'b';
        while (b < n) {
            size_t m = a < n - b ? a : n - b;
            memcpy(dst + b, dst, m);
            size_t t = a + b;
            a = b;
            b = t;
        }
    } else if (!strcmp(p, "random")) {
        uint64_t x = 0x9e3779b97f4a7c15ull;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            dst[i] = (uint8_t)(x >> 24);
        }
    } else
        return 0;
    return 1;
}

int main(int argc, char **argv)
{
    const char *input = NULL, *json = NULL, *blocks = "1,2,4,16", *pattern = NULL;
    size_t mib = 256;
    int reps = 5, cpu_reps = 3, threads = (int)sysconf(_SC_NPROCESSORS_ONLN), no_cpu = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--input") && i + 1 < argc)
            input = argv[++i];
        else if (!strcmp(argv[i], "--pattern") && i + 1 < argc)
            pattern = argv[++i];
        else if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            mib = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--blocks") && i + 1 < argc)
            blocks = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cpu-reps") && i + 1 < argc)
            cpu_reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-cpu"))
            no_cpu = 1;
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else
            usage();
    }
    if (!input == !pattern || !mib || reps < 1 || reps > 100 || cpu_reps < 1 || threads < 1)
        usage();
    if (!gmtf_gpu_available()) {
        printf("no usable CUDA device\n");
        return 77;
    }
    size_t n = mib * MIB;
    uint8_t *src = gmtf_gpu_host_alloc(n), *dst = gmtf_gpu_host_alloc(n);
    uint8_t *pg_src = malloc(n), *pg_dst = malloc(n), *cpu_dst = malloc(n);
    if (!src || !dst || !pg_src || !pg_dst || !cpu_dst) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    size_t got = 0;
    if (pattern) {
        if (!make_pattern(pattern, src, n))
            usage();
        got = n;
        input = pattern;
    } else {
        FILE *f = fopen(input, "rb");
        got = f ? fread(src, 1, n, f) : 0;
        if (f)
            fclose(f);
    }
    if (!got) {
        fprintf(stderr, "%s: cannot read\n", input);
        return 1;
    }
    for (size_t p = got; p < n; p++) /* tile */
        src[p] = src[p - got];
    memcpy(pg_src, src, n);

    char name[256] = "?";
    int sms = 0;
    gmtf_gpu_device_info(name, sizeof name, &sms);
    printf("device: %s, %d SMs; host: %d threads; input %s (%zu bytes read), batch %zu MiB\n", name,
           sms, threads, input, got, mib);
    gmtf_gpu_bwt_ctx *ctx;
    int rc = gmtf_gpu_bwt_create(&ctx);
    if (rc) {
        fprintf(stderr, "gmtf_gpu_bwt_create: %d\n", rc);
        return 1;
    }
    FILE *js = json ? fopen(json, "w") : NULL;
    if (js)
        fprintf(js,
                "{\"device\": \"%s\", \"sms\": %d, \"threads\": %d, \"mib\": %zu, \"runs\": [\n",
                name, sms, threads, mib);
    int status = 0, first = 1;
    char summary[4096] = "";
    size_t slen = 0;
    for (const char *b = blocks; *b;) {
        size_t bm = strtoul(b, NULL, 10);
        while (*b && *b != ',')
            b++;
        if (*b)
            b++;
        size_t bs = bm * MIB > GMTF_GPU_BWT_MAX_BLOCK ? GMTF_GPU_BWT_MAX_BLOCK : bm * MIB;
        if (!bs)
            continue;
        size_t count = (n + bs - 1) / bs;
        uint64_t *off = malloc((count + 1) * sizeof *off);
        for (size_t i = 0; i <= count; i++)
            off[i] = i * bs < n ? i * bs : n;
        uint64_t nidx = gmtf_gpu_bwt_index_total(off, count, NULL);
        uint32_t *idx = gmtf_gpu_host_alloc(nidx * sizeof *idx); /* pinned: batches overlap */
        uint32_t *cpu_idx = malloc(count * GMTF_BWT_MAX_INDEXES * sizeof *cpu_idx);
        double *t = malloc((size_t)(reps > cpu_reps ? reps : cpu_reps) * sizeof *t);

        /* warm-up (allocations), then host to host from pinned memory */
        rc = gmtf_gpu_bwt_batch(ctx, src, off, count, NULL, dst, idx);
        for (int r = 0; r < reps && !rc; r++) {
            double t0 = now_ms();
            rc = gmtf_gpu_bwt_batch(ctx, src, off, count, NULL, dst, idx);
            t[r] = now_ms() - t0;
        }
        double h2h = rc ? 0 : median(t, reps);
        /* host to host from pageable memory */
        double t0 = now_ms();
        if (!rc)
            rc = gmtf_gpu_bwt_batch(ctx, pg_src, off, count, NULL, pg_dst, idx);
        double h2h_pg = now_ms() - t0;
        if (!rc && memcmp(pg_dst, dst, n) != 0) {
            printf("MISMATCH: pageable and pinned outputs differ\n");
            status = 1;
        }
        /* kernel-only */
        if (!rc)
            rc = gmtf_gpu_bwt_stage_upload(ctx, src, off, count, NULL);
        for (int r = 0; r < reps && !rc; r++)
            rc = gmtf_gpu_bwt_stage_run(ctx, &t[r]);
        double kern = rc ? 0 : median(t, reps);
        /* one profiled run */
        gmtf_gpu_bwt_profile pr;
        memset(&pr, 0, sizeof pr);
        if (!rc) {
            gmtf_gpu_bwt_set_profile(ctx, 1);
            double pms;
            rc = gmtf_gpu_bwt_stage_run(ctx, &pms);
            gmtf_gpu_bwt_get_profile(ctx, &pr);
            gmtf_gpu_bwt_set_profile(ctx, 0);
        }
        if (rc) {
            printf("%zu MiB blocks: GPU error %d (%s)\n", bm, rc, gmtf_gpu_bwt_error(ctx));
            status = 1;
            break;
        }
        /* CPU: divsufsort on all threads; its output checks the GPU's */
        double cpu = 0;
        size_t bad = 0;
        if (!no_cpu) {
            for (int r = 0; r < cpu_reps; r++)
                t[r] = cpu_bwt(src, cpu_dst, cpu_idx, off, count, bs, threads);
            cpu = median(t, cpu_reps);
            size_t ix = 0;
            for (size_t i = 0; i < count; i++) {
                size_t m = off[i + 1] - off[i];
                uint64_t k = gmtf_gpu_bwt_index_count(m, gmtf_gpu_bwt_default_step(m));
                if (memcmp(dst + off[i], cpu_dst + off[i], m) ||
                    memcmp(idx + ix, cpu_idx + i * GMTF_BWT_MAX_INDEXES, k * 4))
                    bad++;
                ix += k;
            }
            if (bad) {
                printf("MISMATCH: %zu of %zu blocks differ from gmtf_bwt_forward\n", bad, count);
                status = 1;
            }
        }
        double gb = n / 1e9;
        printf("\n== %zu MiB blocks (%zu blocks): GPU kernel %.1f ms = %.3f GB/s; host to host "
               "pinned %.1f ms = %.3f GB/s, pageable %.1f ms = %.3f GB/s",
               bm, count, kern, gb / (kern / 1e3), h2h, gb / (h2h / 1e3), h2h_pg,
               gb / (h2h_pg / 1e3));
        if (!no_cpu)
            printf("; CPU divsufsort x%d %.1f ms = %.3f GB/s; %s", threads, cpu, gb / (cpu / 1e3),
                   bad ? "MISMATCH" : "exact");
        printf("\n   profile (one run, ms): ");
        double sum = 0;
        for (int p = 0; p < GMTF_GPU_BWT_PH_COUNT; p++) {
            printf("%s %.2f  ", gmtf_gpu_bwt_phase_name(p), pr.ms[p]);
            sum += pr.ms[p];
        }
        printf("(sum %.1f)\n   %u pieces, %u rounds, initial chars %u, positions %llu, "
               "active over rounds %llu (%.2f x positions); device memory %.2f GB (%.1f B a "
               "byte)\n",
               sum, pr.pieces, pr.rounds, pr.init_chars, (unsigned long long)pr.positions,
               (unsigned long long)pr.active,
               pr.positions ? (double)pr.active / (double)pr.positions : 0, pr.device_bytes / 1e9,
               (double)pr.device_bytes / (double)n);
        slen += (size_t)snprintf(summary + slen, sizeof summary - slen,
                                 "%3zu MiB blocks: kernel %7.3f GB/s  h2h pinned %7.3f  pageable "
                                 "%7.3f  CPU x%d %7.3f  %s\n",
                                 bm, gb / (kern / 1e3), gb / (h2h / 1e3), gb / (h2h_pg / 1e3),
                                 threads, cpu ? gb / (cpu / 1e3) : 0,
                                 no_cpu ? "unchecked"
                                 : bad  ? "MISMATCH"
                                        : "exact");
        if (slen >= sizeof summary)
            slen = sizeof summary - 1;
        if (js) {
            fprintf(js,
                    "%s  {\"block_mib\": %zu, \"blocks\": %zu, \"kernel_ms\": %.3f, "
                    "\"h2h_pinned_ms\": %.3f, \"h2h_pageable_ms\": %.3f, \"cpu_ms\": %.3f, "
                    "\"exact\": %s, \"rounds\": %u, \"active\": %llu, \"phase_ms\": [",
                    first ? "" : ",\n", bm, count, kern, h2h, h2h_pg, cpu,
                    no_cpu ? "null"
                    : bad  ? "false"
                           : "true",
                    pr.rounds, (unsigned long long)pr.active);
            for (int p = 0; p < GMTF_GPU_BWT_PH_COUNT; p++)
                fprintf(js, "%s%.3f", p ? ", " : "", pr.ms[p]);
            fprintf(js, "]}");
            first = 0;
        }
        free(off);
        gmtf_gpu_host_free(idx);
        free(cpu_idx);
        free(t);
    }
    if (js) {
        fprintf(js, "\n]}\n");
        fclose(js);
    }
    printf("\nsummary (GB/s = 10^9 input bytes/s, medians: GPU of %d runs, CPU of %d):\n%s", reps,
           cpu_reps, summary);
    gmtf_gpu_bwt_destroy(ctx);
    gmtf_gpu_host_free(src);
    gmtf_gpu_host_free(dst);
    free(pg_src);
    free(pg_dst);
    free(cpu_dst);
    return status;
}
