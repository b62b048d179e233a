/* GPU MTF benchmark: kernel-only and end-to-end GB/s (10^9 bytes of MTF
 * input per second) for every variant on a batch of BWT output in 1 MiB
 * blocks, a 16 MiB batch and random data; inverse MTF; the scalar
 * reference on all host cores; k-selection against CUB radix sort.
 * Every timed output is also checked against the scalar reference.
 *
 * usage: gpu_bench --input FILE [--mib 256] [--reps 7] [--variants a,b,..]
 *                  [--ks-log2 28] [--no-kselect] [--json FILE]
 * FILE is raw text (e.g. a slice of the Linux tarball): its BWT in 1 MiB
 * blocks (libdivsufsort, all cores) is tiled to the batch size. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <divsufsort.h>

#include "gmtf_simd.h"
#include "gpu.h"
#include "gpu_bench.h"
#include "mtf.h"

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

/* ---- parallel CPU helpers ------------------------------------------------ */

typedef struct job {
    const uint8_t *src;
    uint8_t *dst;
    const uint64_t *off;
    size_t count, next;
    int kind; /* 0 bwt, 1 mtf (encode or decode: mtf below) */
    pthread_mutex_t lock;
    void (*mtf)(const uint8_t *src, uint8_t *dst, size_t n);
} job;

static void (*cpu_mtf)(const uint8_t *, uint8_t *, size_t) = gmtf_mtf_encode_scalar;

static void *worker(void *arg)
{
    job *j = arg;
    saidx_t *sa = NULL;
    if (j->kind == 0)
        sa = malloc(MIB * sizeof *sa + 16);
    for (;;) {
        pthread_mutex_lock(&j->lock);
        size_t i = j->next++;
        pthread_mutex_unlock(&j->lock);
        if (i >= j->count)
            break;
        size_t n = j->off[i + 1] - j->off[i];
        if (j->kind == 0)
            divbwt(j->src + j->off[i], j->dst + j->off[i], sa, (saidx_t)n);
        else
            j->mtf(j->src + j->off[i], j->dst + j->off[i], n);
    }
    free(sa);
    return NULL;
}

static int ncpu(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

static void run_parallel(int kind, const uint8_t *src, uint8_t *dst, const uint64_t *off,
                         size_t count)
{
    job j = {src, dst, off, count, 0, kind, PTHREAD_MUTEX_INITIALIZER, cpu_mtf};
    pthread_t t[256];
    int n = ncpu();
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, worker, &j);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

/* ---- results ------------------------------------------------------------- */

typedef struct row {
    char what[64], variant[32];
    double mib, ms, gbs;
    int exact;
} row;

static row rows[512];
static int nrows;

static void add_row(const char *what, const char *variant, double bytes, double ms, int exact)
{
    if (nrows >= 512)
        return;
    row *r = &rows[nrows++];
    snprintf(r->what, sizeof r->what, "%s", what);
    snprintf(r->variant, sizeof r->variant, "%s", variant);
    r->mib = bytes / MIB;
    r->ms = ms;
    r->gbs = ms > 0 ? bytes / (ms * 1e6) : 0;
    r->exact = exact;
    printf("%-24s %-12s %8.1f MiB %9.3f ms %8.2f GB/s %s\n", what, variant, r->mib, ms, r->gbs,
           exact == 1   ? "exact"
           : exact == 0 ? "MISMATCH"
                        : "");
    fflush(stdout);
}

static int reps = 7;
static const uint8_t *sweep_ref;
static gmtf_gpu_ctx *ctx;
static const char *only;

static int wanted(const char *name)
{
    if (!only)
        return 1;
    size_t l = strlen(name);
    for (const char *p = only; (p = strstr(p, name)); p += l)
        if ((p == only || p[-1] == ',') && (p[l] == ',' || !p[l]))
            return 1;
    return 0;
}

static int check(const uint8_t *out, const uint8_t *ref, size_t n, unsigned depth)
{
    for (size_t i = 0; i < n; i++) {
        unsigned want = ref[i];
        if (depth && want >= depth)
            want = depth;
        if (out[i] != want)
            return 0;
    }
    return 1;
}

/* Kernel-only: data staged once, the launch sequence timed by events. */
static void bench_kernels(const char *what, const uint8_t *data, const uint8_t *ref,
                          const uint64_t *off, size_t count, int decode)
{
    if (!ref)
        ref = sweep_ref; /* sweeps reuse the reference of the main batch */
    size_t n = off[count] - off[0];
    uint8_t *out = malloc(n);
    const uint8_t *in = decode ? ref : data;
    if (gmtf_gpu_stage_upload(ctx, in, off, count)) {
        printf("%s: upload failed: %s\n", what, gmtf_gpu_ctx_error(ctx));
        free(out);
        return;
    }
    for (size_t v = 0; v < gmtf_gpu_variant_count(); v++) {
        unsigned fl = gmtf_gpu_variant_flags(v);
        const char *name = gmtf_gpu_variant_name(v);
        if (!wanted(name) || !(fl & (decode ? GMTF_GPU_DECODE : GMTF_GPU_ENCODE)))
            continue;
        double t[64], ms = 0;
        int rc = gmtf_gpu_stage_run(ctx, (int)v, decode, &ms); /* warm-up */
        for (int r = 0; r < reps && !rc; r++)
            rc = gmtf_gpu_stage_run(ctx, (int)v, decode, &t[r]);
        if (rc) {
            printf("%s %s: error %d: %s\n", what, name, rc, gmtf_gpu_ctx_error(ctx));
            continue;
        }
        gmtf_gpu_stage_download(ctx, out);
        int ok = (fl & GMTF_GPU_PROBE) ? -1
                 : decode              ? memcmp(out, data + off[0], n) == 0
                                       : check(out, ref + off[0], n,
                                  (fl & GMTF_GPU_COMPLETE) ? 0 : gmtf_gpu_variant_depth(v));
        add_row(what, name, (double)n, median(t, reps), ok);
    }
    free(out);
}

/* End-to-end: pinned host in, host out, transfers overlapped. */
static void bench_e2e(const char *what, const uint8_t *data, const uint8_t *ref,
                      const uint64_t *off, size_t count, int decode, int pinned)
{
    size_t n = off[count];
    uint8_t *in = pinned ? gmtf_gpu_host_alloc(n) : malloc(n);
    uint8_t *out = pinned ? gmtf_gpu_host_alloc(n) : malloc(n);
    if (!in || !out) {
        printf("%s: no memory\n", what);
        return;
    }
    memcpy(in, decode ? ref : data, n);
    for (size_t v = 0; v < gmtf_gpu_variant_count(); v++) {
        unsigned fl = gmtf_gpu_variant_flags(v);
        const char *name = gmtf_gpu_variant_name(v);
        if (!wanted(name) || !(fl & GMTF_GPU_COMPLETE) || (decode && !(fl & GMTF_GPU_DECODE)))
            continue;
        double t[64];
        int rc = 0;
        for (int r = -1; r < reps && !rc; r++) {
            double t0 = now_ms();
            rc = decode ? gmtf_gpu_mtf_decode_batch(ctx, (int)v, in, off, count, out)
                        : gmtf_gpu_mtf_encode_batch(ctx, (int)v, in, off, count, out);
            if (r >= 0)
                t[r] = now_ms() - t0;
        }
        if (rc) {
            printf("%s %s: error %d: %s\n", what, name, rc, gmtf_gpu_ctx_error(ctx));
            continue;
        }
        int ok = memcmp(out + off[0], (decode ? data : ref) + off[0], n - off[0]) == 0;
        add_row(what, name, (double)(n - off[0]), median(t, reps), ok);
        if (!pinned)
            break; /* pageable: the default variant is enough */
    }
    if (pinned) {
        gmtf_gpu_host_free(in);
        gmtf_gpu_host_free(out);
    } else {
        free(in);
        free(out);
    }
}

static void bench_cpu(const char *what, const uint8_t *data, uint8_t *ref, const uint64_t *off,
                      size_t count)
{
    double t[5];
    for (int r = 0; r < 5; r++) {
        double t0 = now_ms();
        run_parallel(1, data, ref, off, count);
        t[r] = now_ms() - t0;
    }
    char v[32];
    snprintf(v, sizeof v, "scalar x%d", ncpu());
    add_row(what, v, (double)(off[count] - off[0]), median(t, 5), -1);
    /* The best CPU backend on all cores, encode and decode, checked. */
    const gmtf_simd_mtf_variant *b = gmtf_simd_mtf_best();
    uint8_t *out = malloc(off[count]), *back = malloc(off[count]);
    for (int dir = 0; dir < 2 && out && back; dir++) {
        cpu_mtf = dir ? b->decode : b->encode;
        for (int r = 0; r < 5; r++) {
            double t0 = now_ms();
            run_parallel(1, dir ? ref : data, dir ? back : out, off, count);
            t[r] = now_ms() - t0;
        }
        int exact = dir ? !memcmp(back, data, off[count]) : !memcmp(out, ref, off[count]);
        snprintf(v, sizeof v, "simd %s x%d", dir ? "dec" : "enc", ncpu());
        add_row(what, v, (double)(off[count] - off[0]), median(t, 5), exact);
    }
    cpu_mtf = gmtf_mtf_encode_scalar;
    free(out);
    free(back);
}

static void write_json(const char *path, const char *device)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "{\"device\": \"%s\", \"rows\": [\n", device);
    for (int i = 0; i < nrows; i++)
        fprintf(
            f,
            "  {\"what\": \"%s\", \"variant\": \"%s\", \"mib\": %.3f, \"ms\": %.4f, \"gbs\": %.3f, "
            "\"exact\": %d}%s\n",
            rows[i].what, rows[i].variant, rows[i].mib, rows[i].ms, rows[i].gbs, rows[i].exact,
            i + 1 < nrows ? "," : "");
    fprintf(f, "]}\n");
    fclose(f);
}

int main(int argc, char **argv)
{
    const char *input = NULL, *json = NULL, *sweep = NULL;
    unsigned mib = 256, ks_log2 = 28;
    int do_ks = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--input") && i + 1 < argc)
            input = argv[++i];
        else if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            mib = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--variants") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--ks-log2") && i + 1 < argc)
            ks_log2 = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sweep") && i + 1 < argc)
            sweep = argv[++i]; /* chunk sizes for a tuning sweep, e.g. 512,2048,8192 */
        else if (!strcmp(argv[i], "--no-kselect"))
            do_ks = 0;
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else {
            fprintf(stderr,
                    "usage: %s --input FILE [--mib N] [--reps N] [--variants a,b] [--ks-log2 N] "
                    "[--no-kselect] [--json FILE]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > 64)
        reps = 7;
    if (!gmtf_gpu_available()) {
        printf("SKIP: no usable CUDA device\n");
        return 77;
    }
    char device[256];
    int sms = 0;
    gmtf_gpu_device_info(device, sizeof device, &sms);
    printf("device: %s, %d SMs; host: %d cores; reps %d (medians)\n", device, sms, ncpu(), reps);
    if (gmtf_gpu_ctx_create(&ctx)) {
        printf("no context\n");
        return 1;
    }
    /* input text -> BWT in 1 MiB blocks -> tiled to the batch size */
    size_t tn = 0;
    uint8_t *text = NULL;
    if (input) {
        FILE *f = fopen(input, "rb");
        if (f) {
            text = malloc(64u * MIB);
            tn = fread(text, 1, 64u * MIB, f);
            fclose(f);
        }
    }
    if (tn < MIB) {
        fprintf(stderr, "need --input with at least 1 MiB of text\n");
        return 2;
    }
    tn -= tn % MIB;
    size_t nb = tn / MIB, count = mib;
    uint64_t *toff = malloc((nb + 1) * sizeof *toff);
    for (size_t i = 0; i <= nb; i++)
        toff[i] = i * MIB;
    uint8_t *bwt = malloc(tn);
    double t0 = now_ms();
    run_parallel(0, text, bwt, toff, nb);
    printf("bwt of %zu MiB: %.0f ms\n", nb, now_ms() - t0);
    size_t n = (size_t)count * MIB;
    uint8_t *data = malloc(n), *ref = malloc(n), *rnd = malloc(n), *rref = malloc(n);
    uint64_t *off = malloc((count + 1) * sizeof *off);
    for (size_t i = 0; i < count; i++)
        memcpy(data + i * MIB, bwt + (i % nb) * MIB, MIB);
    for (size_t i = 0; i <= count; i++)
        off[i] = i * MIB;
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        rnd[i] = (uint8_t)x;
    }
    char what[64];
    snprintf(what, sizeof what, "cpu-%uMiB-bwt", mib);
    bench_cpu(what, data, ref, off, count);
    run_parallel(1, rnd, rref, off, count);
    sweep_ref = ref;
    if (sweep) {
        /* chunk-size sweep of the tuning variants, before the main table */
        const char *saved = only;
        only = "8+full,16+full,8+full/g4,4by8,queues,scalar";
        for (const char *p = sweep; p && *p;) {
            unsigned c = (unsigned)strtoul(p, NULL, 10);
            if (gmtf_gpu_set_chunk(ctx, c) == 0) {
                snprintf(what, sizeof what, "sweep-enc-%uMiB@%u", mib, c);
                bench_kernels(what, data, NULL, off, count, 0);
                snprintf(what, sizeof what, "sweep-dec-%uMiB@%u", mib, c);
                bench_kernels(what, data, NULL, off, count, 1);
                snprintf(what, sizeof what, "sweep-enc-16MiB@%u", c);
                bench_kernels(what, data, NULL, off, count < 16 ? count : 16, 0);
                snprintf(what, sizeof what, "sweep-dec-16MiB@%u", c);
                bench_kernels(what, data, NULL, off, count < 16 ? count : 16, 1);
            }
            p = strchr(p, ',');
            p = p ? p + 1 : NULL;
        }
        gmtf_gpu_set_chunk(ctx, 0);
        only = saved;
    }

    snprintf(what, sizeof what, "enc-%uMiB-bwt", mib);
    bench_kernels(what, data, ref, off, count, 0);
    snprintf(what, sizeof what, "dec-%uMiB-bwt", mib);
    bench_kernels(what, data, ref, off, count, 1);
    size_t small = count < 16 ? count : 16;
    bench_kernels("enc-16MiB-bwt", data, ref, off, small, 0);
    bench_kernels("dec-16MiB-bwt", data, ref, off, small, 1);
    snprintf(what, sizeof what, "enc-%uMiB-random", mib);
    bench_kernels(what, rnd, rref, off, count, 0);
    snprintf(what, sizeof what, "dec-%uMiB-random", mib);
    bench_kernels(what, rnd, rref, off, count, 1);
    snprintf(what, sizeof what, "e2e-enc-%uMiB-pinned", mib);
    bench_e2e(what, data, ref, off, count, 0, 1);
    snprintf(what, sizeof what, "e2e-dec-%uMiB-pinned", mib);
    bench_e2e(what, data, ref, off, count, 1, 1);
    bench_e2e("e2e-enc-16MiB-pinned", data, ref, off, small, 0, 1);
    snprintf(what, sizeof what, "e2e-enc-%uMiB-pageable", mib);
    bench_e2e(what, data, ref, off, count, 0, 0);

    if (do_ks) {
        const char *kn[] = {"u32", "i32", "f32", "u64", "i64", "f64"};
        gmtf_gpu_key kt[] = {GMTF_GPU_KEY_U32, GMTF_GPU_KEY_F32, GMTF_GPU_KEY_U64};
        int ki[] = {0, 2, 3};
        for (int i = 0; i < 3; i++) {
            double sel = 0, sort = 0;
            int agree = 0;
            size_t kn_keys = (size_t)1 << ks_log2;
            int rc = gmtf_gpu_kselect_bench(ctx, kt[i], kn_keys, 5, &sel, &sort, &agree);
            if (rc) {
                printf("kselect %s: error %d: %s\n", kn[ki[i]], rc, gmtf_gpu_ctx_error(ctx));
                continue;
            }
            char w[64], v[32];
            snprintf(w, sizeof w, "kselect-2^%u", ks_log2);
            snprintf(v, sizeof v, "%s-select", kn[ki[i]]);
            add_row(w, v, (double)kn_keys * (kt[i] == GMTF_GPU_KEY_U64 ? 8 : 4), sel, agree);
            snprintf(v, sizeof v, "%s-cubsort", kn[ki[i]]);
            add_row(w, v, (double)kn_keys * (kt[i] == GMTF_GPU_KEY_U64 ? 8 : 4), sort, -1);
            printf("  kselect %s: %.2fx faster than radix sort + pick\n", kn[ki[i]], sort / sel);
        }
    }
    /* the summary: best exact encoder / decoder per batch */
    printf("\n=== summary (%s) ===\n", device);
    const char *groups[] = {"enc-", "dec-", "e2e-enc-", "e2e-dec-", "cpu-"};
    for (int g = 0; g < 5; g++) {
        char seen[32][64];
        int ns = 0;
        for (int i = 0; i < nrows; i++) {
            if (strncmp(rows[i].what, groups[g], strlen(groups[g])) != 0)
                continue;
            if (g == 0 && strncmp(rows[i].what, "e2e", 3) == 0)
                continue;
            int dup = 0;
            for (int s = 0; s < ns; s++)
                dup |= !strcmp(seen[s], rows[i].what);
            if (dup || ns >= 32)
                continue;
            memcpy(seen[ns++], rows[i].what, 64);
            int best = -1;
            for (int j = 0; j < nrows; j++)
                if (!strcmp(rows[j].what, rows[i].what) && rows[j].exact != 0 &&
                    strcmp(rows[j].variant, "queues") != 0 &&
                    strncmp(rows[j].variant, "depth", 5) != 0 &&
                    (best < 0 || rows[j].gbs > rows[best].gbs))
                    best = j;
            if (best >= 0)
                printf("best %-24s %-12s %8.2f GB/s\n", rows[best].what, rows[best].variant,
                       rows[best].gbs);
        }
    }
    int bad = 0;
    for (int i = 0; i < nrows; i++)
        bad += rows[i].exact == 0;
    printf("mismatches: %d\n", bad);
    if (json)
        write_json(json, device);
    gmtf_gpu_ctx_destroy(ctx);
    return bad ? 1 : 0;
}
