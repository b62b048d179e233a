/* Method 2's encoder (codec/entropy_lanes.c) on the CPU against its GPU
 * steps (gpu/gpu_lanes.h's scan and code around the codec's plan and
 * finish), over the BWT of a file's blocks: MB/s of BWT bytes, medians,
 * both in the same run with the same threads; the GPU path's payloads
 * compared byte for byte with the CPU's.
 *
 * usage: lanes_enc_bench --input FILE [--mib 64] [--block 2048] (KiB)
 *                        [--threads 16] [--reps 5] */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bwt.h"
#include "entropy_lanes_dev.h"
#include "gpu.h"
#include "gpu_lanes.h"
#include "qlfc.h"
#include "qlfc_internal.h"

#define NL GMTF_GPU_LANES
#define MG GMTF_GPU_LANES_MAX_GROUPS
#define TAB (GMTF_GPU_LANES_NTABLES * GMTF_GPU_LANES_CUM)

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
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* ---- a parallel for ---- */

typedef void (*job_fn)(void *ctx, size_t i, unsigned worker);
struct pfor {
    job_fn fn;
    void *ctx;
    size_t count;
    size_t next;
    pthread_mutex_t mu;
    unsigned nw;
};
struct pfor_arg {
    struct pfor *p;
    unsigned w;
};

static void *pfor_run(void *arg)
{
    struct pfor_arg *a = arg;
    struct pfor *p = a->p;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t i = p->next++;
        pthread_mutex_unlock(&p->mu);
        if (i >= p->count)
            return NULL;
        p->fn(p->ctx, i, a->w);
    }
}

static void pfor(unsigned threads, job_fn fn, void *ctx, size_t count)
{
    struct pfor p = {fn, ctx, count, 0, PTHREAD_MUTEX_INITIALIZER, threads};
    pthread_t t[256];
    struct pfor_arg a[256];
    for (unsigned w = 0; w < threads; w++) {
        a[w].p = &p;
        a[w].w = w;
        pthread_create(&t[w], NULL, pfor_run, &a[w]);
    }
    for (unsigned w = 0; w < threads; w++)
        pthread_join(t[w], NULL);
}

/* ---- state ---- */

struct st {
    const uint8_t *src;
    uint8_t *bwt;
    uint64_t *off;
    size_t count, bs;
    void **ws;    /* encoder workspace a block (GPU path) */
    void **cws;   /* a worker (CPU path) */
    uint8_t *ref; /* CPU payloads: 2 bs + 4096 a block */
    long *ref_len;
    uint8_t *out; /* GPU payloads */
    long *out_len;
    gmtf_gpu_lanes_scan_out o;
    uint8_t *sel;
    uint16_t *cum;
    long *plan_rc;
    uint8_t *streams;
    uint32_t *len;
    uint64_t *soff; /* block b's streams at streams + soff[b] */
};

static void do_bwt(void *ctx, size_t i, unsigned w)
{
    (void)w;
    struct st *s = ctx;
    void *ws = xmalloc(gmtf_bwt_workspace_size(s->bs));
    uint32_t idx[GMTF_BWT_MAX_SAMPLES];
    if (gmtf_bwt_forward_step(s->src + s->off[i], s->bwt + s->off[i], s->bs, idx, ws)) {
        fprintf(stderr, "bwt failed\n");
        exit(1);
    }
    free(ws);
}

static void do_cpu(void *ctx, size_t i, unsigned w)
{
    struct st *s = ctx;
    size_t cap = 2 * s->bs + 4096;
    s->ref_len[i] =
        gmtf_lanes_encode_or_defer(s->bwt + s->off[i], s->bs, s->ref + i * cap, cap, s->cws[w]);
}

static void do_plan(void *ctx, size_t i, unsigned w)
{
    (void)w;
    struct st *s = ctx;
    gmtf_gpu_lanes_scan_out v = s->o;
    v.rk += s->o.roff[NL * i];
    v.keys += 2 * s->o.roff[NL * i];
    v.runs += NL * i;
    v.init += NL * 256 * i;
    v.ninit += NL * i;
    v.gstart += MG * i;
    v.shared += (size_t)NL * GMTF_GPU_LANES_NSHARED * 16 * i;
    s->plan_rc[i] = gmtf_lanes_enc_dev_plan(s->bwt + s->off[i], s->bs, s->ws[i], &v, 1,
                                            s->sel + MG * i, s->cum + TAB * i);
}

static void do_finish(void *ctx, size_t i, unsigned w)
{
    (void)w;
    struct st *s = ctx;
    size_t cap = 2 * s->bs + 4096;
    long r = s->plan_rc[i];
    if (r == 0)
        r = gmtf_lanes_enc_dev_finish(s->bwt + s->off[i], s->bs, s->ws[i], s->streams + s->soff[i],
                                      s->len + NL * i, s->out + i * cap, cap);
    s->out_len[i] = r;
}

int main(int argc, char **argv)
{
    const char *input = NULL;
    size_t mib = 64, kib = 2048;
    unsigned threads = 16;
    int reps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--input"))
            input = argv[i + 1];
        else if (!strcmp(argv[i], "--mib"))
            mib = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--block"))
            kib = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads"))
            threads = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
    }
    if (!input || threads == 0 || threads > 256 || reps < 1 || reps > 64) {
        fprintf(stderr, "usage: lanes_enc_bench --input FILE [--mib 64] [--block 2048] "
                        "[--threads 16] [--reps 5]\n");
        return 2;
    }
    struct st s;
    memset(&s, 0, sizeof s);
    s.bs = kib << 10;
    FILE *f = fopen(input, "rb");
    if (!f) {
        perror(input);
        return 1;
    }
    uint8_t *src = xmalloc(mib << 20);
    size_t n = fread(src, 1, mib << 20, f);
    fclose(f);
    s.count = n / s.bs;
    if (s.count == 0) {
        fprintf(stderr, "input shorter than a block\n");
        return 1;
    }
    n = s.count * s.bs;
    s.src = src;
    s.off = xmalloc((s.count + 1) * 8);
    for (size_t i = 0; i <= s.count; i++)
        s.off[i] = i * s.bs;
    s.bwt = xmalloc(n);
    pfor(threads, do_bwt, &s, s.count);
    size_t cap = 2 * s.bs + 4096;
    s.ref = xmalloc(cap * s.count);
    s.out = xmalloc(cap * s.count);
    s.ref_len = xmalloc(s.count * sizeof(long));
    s.out_len = xmalloc(s.count * sizeof(long));
    s.plan_rc = xmalloc(s.count * sizeof(long));
    s.cws = xmalloc(threads * sizeof(void *));
    for (unsigned w = 0; w < threads; w++)
        s.cws[w] = xmalloc(gmtf_lanes_workspace_size(s.bs));
    s.ws = xmalloc(s.count * sizeof(void *));
    for (size_t i = 0; i < s.count; i++)
        s.ws[i] = xmalloc(gmtf_lanes_workspace_size(s.bs));
    s.o.rk = xmalloc(n);
    s.o.keys = xmalloc(4 * n);
    s.o.runs = xmalloc(s.count * NL * 4);
    s.o.roff = xmalloc((s.count * NL + 1) * 8);
    s.o.init = xmalloc(s.count * NL * 256);
    s.o.ninit = xmalloc(s.count * NL * 2);
    s.o.gstart = xmalloc(s.count * MG * 4);
    s.o.shared = xmalloc(s.count * NL * GMTF_GPU_LANES_NSHARED * 16 * 4);
    s.sel = xmalloc(s.count * MG);
    s.cum = xmalloc(s.count * TAB * 2);
    uint64_t scap = 2 * (uint64_t)n + 64 * NL * s.count;
    s.streams = xmalloc(scap);
    s.len = xmalloc(s.count * NL * 4);
    s.soff = xmalloc((s.count + 1) * 8);

    printf("input %s: %zu MiB in %zu blocks of %zu KiB, %u threads, %d reps\n", input, n >> 20,
           s.count, kib, threads, reps);
    /* CPU: all threads, then one */
    double t_cpu[64], t_cpu1[64];
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        pfor(threads, do_cpu, &s, s.count);
        t_cpu[r] = now_ms() - t0;
    }
    size_t one = s.count < 8 ? s.count : 8;
    for (int r = 0; r < (reps < 3 ? reps : 3); r++) {
        double t0 = now_ms();
        for (size_t i = 0; i < one; i++)
            do_cpu(&s, i, 0);
        t_cpu1[r] = now_ms() - t0;
    }
    double mc = median(t_cpu, reps), mc1 = median(t_cpu1, reps < 3 ? reps : 3);
    uint64_t zref = 0;
    for (size_t i = 0; i < s.count; i++)
        zref += s.ref_len[i] > 0 ? (uint64_t)s.ref_len[i] : 0;
    printf("cpu  %u threads: %8.1f ms  %7.1f MB/s   (1 thread: %.1f MB/s)  payload %.4f of input\n",
           threads, mc, n / mc / 1e3, one * s.bs / mc1 / 1e3, (double)zref / n);

    gmtf_gpu_lanes_enc *ctx = NULL;
    int rc = gmtf_gpu_lanes_enc_create(&ctx);
    if (rc) {
        printf("gpu: no device (%d)\n", rc);
        return 0;
    }
    double ph[4][64], tot[64], kms[2][64];
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        rc = gmtf_gpu_lanes_enc_scan(ctx, s.bwt, s.count, s.off, &s.o);
        double t1 = now_ms();
        if (rc) {
            printf("scan: %d %s\n", rc, gmtf_gpu_lanes_enc_error(ctx));
            return 1;
        }
        pfor(threads, do_plan, &s, s.count);
        double t2 = now_ms();
        rc = gmtf_gpu_lanes_enc_code(ctx, s.sel, s.cum, s.streams, scap, s.len);
        double t3 = now_ms();
        if (rc) {
            printf("code: %d %s\n", rc, gmtf_gpu_lanes_enc_error(ctx));
            return 1;
        }
        s.soff[0] = 0;
        for (size_t i = 0; i < s.count; i++) {
            uint64_t b = 0;
            for (unsigned j = 0; j < NL; j++)
                b += s.len[NL * i + j];
            s.soff[i + 1] = s.soff[i] + b;
        }
        pfor(threads, do_finish, &s, s.count);
        double t4 = now_ms();
        gmtf_gpu_lanes_enc_kernel_ms(ctx, &kms[0][r], &kms[1][r]);
        ph[0][r] = t1 - t0;
        ph[1][r] = t2 - t1;
        ph[2][r] = t3 - t2;
        ph[3][r] = t4 - t3;
        tot[r] = t4 - t0;
    }
    size_t same = 0, host_lanes = 0;
    for (size_t i = 0; i < s.count; i++) {
        if (s.out_len[i] == s.ref_len[i] &&
            (s.ref_len[i] <= 0 || !memcmp(s.out + i * cap, s.ref + i * cap, (size_t)s.ref_len[i])))
            same++;
        for (unsigned j = 0; j < NL; j++)
            host_lanes += s.plan_rc[i] == 0 && s.len[NL * i + j] == 0;
    }
    double mt = median(tot, reps);
    const char *nm[4] = {"scan (h2d, kernel, d2h)", "plan (host threads)",
                         "code (h2d, kernel, pack, d2h)", "finish (host threads)"};
    printf("gpu  total:     %8.1f ms  %7.1f MB/s   (%.2fx the CPU's)\n", mt, n / mt / 1e3, mc / mt);
    for (int k = 0; k < 4; k++)
        printf("  %-32s %8.1f ms\n", nm[k], median(ph[k], reps));
    printf("  kernels alone: scan %.1f ms, code %.1f ms\n", median(kms[0], reps),
           median(kms[1], reps));
    printf("identity: %zu of %zu blocks the CPU encoder's bytes (verdicts included); %zu lanes "
           "coded by the host\n",
           same, s.count, host_lanes);
    gmtf_gpu_lanes_enc_destroy(ctx);
    return same == s.count ? 0 : 1;
}
