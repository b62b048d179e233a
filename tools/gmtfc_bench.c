/* gmtfc bench: speed of every codec stage, per direction, on real files.
 *
 *   gmtfc bench [--json] [--mtf=NAME|all] [-b SIZE] [-r RUNS] [-j N]
 *               [--stage=LIST] FILE...
 *
 * Each file is cut into blocks of SIZE and run through the pipeline once to
 * get every stage's input; then each stage is timed in each direction over
 * all blocks. A run repeats whole-file passes for at least MIN_RUN_SECONDS
 * so small files are not measured at timer resolution; the figure is the
 * median of RUNS runs (default 5). MB/s counts original file bytes per
 * second (MB = 10^6 bytes) for every stage, so rows compare directly.
 * Every decode result is checked against the original. */
#include "gmtfc.h"

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <divsufsort.h>

#include "bwt.h"
#include "gmtf_codec.h"
#include "mtf.h"
#include "mtf_bench.h"
#include "rank_coder.h"

#define MIN_RUN_SECONDS 0.05
#define STAGE_BWT 1u
#define STAGE_MTF 2u
#define STAGE_ZRLE 4u
#define STAGE_ENTROPY 8u
#define STAGE_CODEC 16u
#define STAGE_ALL 31u

typedef struct bench_opts {
    int json;
    const char *mtf; /* NULL = auto, "all" = every backend */
    uint32_t block_size;
    unsigned runs;
    unsigned threads;
    unsigned stages;
} bench_opts;

/* One file, cut into blocks, with every stage's output kept as the next
 * stage's input. Scratch buffers receive the timed results. */
typedef struct bench_file {
    const char *name;
    size_t size, count;
    uint32_t bs;
    uint64_t *off;   /* block i = data[off[i] .. off[i+1]) */
    uint8_t *data;   /* original */
    uint8_t *bwt;    /* gmtf_bwt_forward output */
    uint32_t *idx;   /* GMTF_BWT_MAX_INDEXES per block */
    uint8_t *ds_bwt; /* libdivsufsort divbwt output */
    saidx_t *ds_idx; /* its primary index per block */
    uint8_t *ranks;  /* MTF output (scalar reference) */
    uint16_t *syms;  /* zero-run symbols; block i at soff(i) */
    size_t *sym_count;
    uint8_t *ent; /* entropy coded; block i at eoff(i) */
    size_t *ent_len;
    uint8_t *frames; /* codec frames, block i at foff[i] */
    uint64_t *foff;
    uint8_t *scratch;             /* size bytes */
    uint16_t *sym_scratch;        /* like syms */
    uint8_t *ent_scratch;         /* like ent */
    uint8_t *frame_scratch;       /* like frames */
    uint64_t *rel_off, *rel_off2; /* per-batch offsets */
    int *status;
    void *bwt_ws, *rank_ws;
    saidx_t *sa;
    const gmtf_mtf *mtf; /* for the mtf passes */
    gmtf_codec *codec;   /* for the codec passes */
    size_t batch;        /* blocks per codec batch */
} bench_file;

typedef int (*pass_fn)(bench_file *f);

static size_t soff(const bench_file *f, size_t i)
{
    return (size_t)f->off[i] + i;
}

static size_t ent_cap(size_t n)
{
    return 2 * n + 4096;
}

static size_t eoff(const bench_file *f, size_t i)
{
    return 2 * (size_t)f->off[i] + 4096 * i;
}

static size_t block_len(const bench_file *f, size_t i)
{
    return (size_t)(f->off[i + 1] - f->off[i]);
}

/* ---- passes: one direction of one stage over every block ----------------- */

static int pass_bwt_encode(bench_file *f)
{
    uint32_t idx[GMTF_BWT_MAX_INDEXES];
    for (size_t i = 0; i < f->count; i++) {
        int rc = gmtf_bwt_forward(f->data + f->off[i], f->scratch + f->off[i], block_len(f, i), idx,
                                  f->bwt_ws);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int pass_bwt_decode(bench_file *f)
{
    for (size_t i = 0; i < f->count; i++) {
        int rc = gmtf_bwt_inverse(f->bwt + f->off[i], f->scratch + f->off[i], block_len(f, i),
                                  f->idx + i * GMTF_BWT_MAX_INDEXES, f->bwt_ws);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int pass_ds_encode(bench_file *f)
{
    for (size_t i = 0; i < f->count; i++)
        if (divbwt(f->data + f->off[i], f->scratch + f->off[i], f->sa, (saidx_t)block_len(f, i)) <
            0)
            return -EIO;
    return 0;
}

static int pass_ds_decode(bench_file *f)
{
    for (size_t i = 0; i < f->count; i++)
        if (inverse_bw_transform(f->ds_bwt + f->off[i], f->scratch + f->off[i], f->sa,
                                 (saidx_t)block_len(f, i), f->ds_idx[i]) < 0)
            return -EIO;
    return 0;
}

static int pass_mtf_encode(bench_file *f)
{
    for (size_t i = 0; i < f->count; i++)
        gmtf_mtf_encode(f->mtf, f->bwt + f->off[i], f->scratch + f->off[i], block_len(f, i));
    return 0;
}

static int pass_mtf_decode(bench_file *f)
{
    for (size_t i = 0; i < f->count; i++)
        gmtf_mtf_decode(f->mtf, f->ranks + f->off[i], f->scratch + f->off[i], block_len(f, i));
    return 0;
}

static int pass_mtf_batch_encode(bench_file *f)
{
    return gmtf_mtf_batch_encode(f->mtf, f->bwt, f->off, f->count, f->scratch);
}

static int pass_mtf_batch_decode(bench_file *f)
{
    return gmtf_mtf_batch_decode(f->mtf, f->ranks, f->off, f->count, f->scratch);
}

static int pass_zrle_encode(bench_file *f)
{
    for (size_t i = 0; i < f->count; i++)
        gmtf_zrle_encode(f->ranks + f->off[i], block_len(f, i), f->sym_scratch + soff(f, i));
    return 0;
}

static int pass_zrle_decode(bench_file *f)
{
    for (size_t i = 0; i < f->count; i++) {
        int rc = gmtf_zrle_decode(f->syms + soff(f, i), f->sym_count[i], f->scratch + f->off[i],
                                  block_len(f, i));
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int pass_entropy_encode(bench_file *f)
{
    for (size_t i = 0; i < f->count; i++) {
        long n =
            gmtf_entropy_encode(f->syms + soff(f, i), f->sym_count[i], f->ent_scratch + eoff(f, i),
                                ent_cap(block_len(f, i)), f->rank_ws);
        if (n < 0)
            return (int)n;
    }
    return 0;
}

static int pass_entropy_decode(bench_file *f)
{
    for (size_t i = 0; i < f->count; i++) {
        int rc = gmtf_entropy_decode(f->ent + eoff(f, i), f->ent_len[i],
                                     f->sym_scratch + soff(f, i), f->sym_count[i], f->rank_ws);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Codec passes go through the batch API in batches of the size gmtfc
 * itself uses, so -j here measures what `gmtfc -j` gets. */
static int pass_codec_encode(bench_file *f)
{
    uint64_t pos = 0;
    for (size_t b0 = 0; b0 < f->count; b0 += f->batch) {
        size_t n = f->count - b0 < f->batch ? f->count - b0 : f->batch;
        for (size_t i = 0; i <= n; i++)
            f->rel_off[i] = f->off[b0 + i] - f->off[b0];
        uint64_t cap = gmtf_batch_bound(f->rel_off, n);
        int rc = gmtf_batch_encode(f->codec, f->data + f->off[b0], f->rel_off, n,
                                   f->frame_scratch + pos, cap, f->rel_off2);
        if (rc < 0)
            return rc;
        for (size_t i = 0; i <= n; i++)
            f->foff[b0 + i] = pos + f->rel_off2[i];
        pos += f->rel_off2[n];
    }
    return 0;
}

static int pass_codec_decode(bench_file *f)
{
    for (size_t b0 = 0; b0 < f->count; b0 += f->batch) {
        size_t n = f->count - b0 < f->batch ? f->count - b0 : f->batch;
        for (size_t i = 0; i <= n; i++) {
            f->rel_off[i] = f->foff[b0 + i] - f->foff[b0];
            f->rel_off2[i] = f->off[b0 + i] - f->off[b0];
        }
        int rc = gmtf_batch_decode(f->codec, f->frames + f->foff[b0], f->rel_off, n,
                                   f->scratch + f->off[b0], f->rel_off2, f->status);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- timing -------------------------------------------------------------- */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median seconds per pass over `runs` runs, or a negative code. */
static int time_pass(bench_file *f, pass_fn fn, unsigned runs, double *median)
{
    double t[runs];
    for (unsigned r = 0; r < runs; r++) {
        unsigned passes = 0;
        double start = now_seconds(), el;
        do {
            int rc = fn(f);
            if (rc < 0)
                return rc;
            passes++;
            el = now_seconds() - start;
        } while (el < MIN_RUN_SECONDS);
        t[r] = el / passes;
    }
    qsort(t, runs, sizeof t[0], cmp_double);
    *median = runs % 2 ? t[runs / 2] : (t[runs / 2 - 1] + t[runs / 2]) / 2;
    return 0;
}

/* ---- output -------------------------------------------------------------- */

/* A JSON string of a name: any bytes, as cli_name_utf8 writes them (the
 * output is always valid UTF-8), then JSON's escapes. */
static void json_string(const char *name)
{
    char *u = cli_name_utf8(name);
    putchar('"');
    for (const char *s = u ? u : "?"; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
    free(u);
}

typedef struct row {
    const char *stage, *variant, *direction;
    unsigned threads;
    double mbps;  /* < 0: not measured */
    double ratio; /* <= 0: does not apply */
    const char *note;
} row;

static void print_row(const bench_opts *o, const bench_file *f, const row *r)
{
    if (o->json) {
        printf("{\"file\":");
        json_string(f->name);
        printf(",\"stage\":\"%s\",\"variant\":", r->stage);
        json_string(r->variant);
        printf(",\"direction\":\"%s\",\"threads\":%u,\"block_size\":%u,\"bytes\":%zu,"
               "\"runs\":%u",
               r->direction, r->threads, f->bs, f->size, o->runs);
        if (r->mbps >= 0)
            printf(",\"mbps\":%.3f", r->mbps);
        else
            printf(",\"mbps\":null,\"available\":false");
        if (r->ratio > 0)
            printf(",\"ratio\":%.4f", r->ratio);
        printf("}\n");
    } else {
        printf("  %-8s %-22s %-7s %7u ", r->stage, r->variant, r->direction, r->threads);
        if (r->mbps >= 0)
            printf("%10.2f", r->mbps);
        else
            printf("%10s", r->note ? r->note : "-");
        if (r->ratio > 0)
            printf(" %8.3f", r->ratio);
        printf("\n");
    }
    fflush(stdout);
}

/* Times fn and prints its row; -1 when the pass failed. */
static int measure(const bench_opts *o, bench_file *f, pass_fn fn, row r)
{
    double sec;
    int rc = time_pass(f, fn, o->runs, &sec);
    if (rc < 0) {
        fprintf(stderr, "gmtfc bench: %s: %s %s %s failed: %s\n", f->name, r.stage, r.variant,
                r.direction, gmtf_strerror(rc));
        return -1;
    }
    r.mbps = sec > 0 ? f->size / 1e6 / sec : 0;
    print_row(o, f, &r);
    return 0;
}

/* Decoders must give back exactly what the encoder saw. */
static int verify(const bench_file *f, const void *got, const void *want, size_t n,
                  const char *what)
{
    if (memcmp(got, want, n) == 0)
        return 0;
    fprintf(stderr, "gmtfc bench: %s: %s decode differs from the original\n", f->name, what);
    return -1;
}

/* ---- setup: run the pipeline once for every stage's input ------------------ */

static int read_file(const char *name, uint8_t **data, size_t *size)
{
    int fd = open(name, O_RDONLY);
    struct stat st;
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    *size = (size_t)st.st_size;
    *data = malloc(*size ? *size : 1);
    size_t got = 0;
    while (*data && got < *size) {
        ssize_t r = read(fd, *data + got, *size - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!*data)
        return -ENOMEM;
    if (got != *size)
        return -EIO;
    return 0;
}

static void bench_file_free(bench_file *f)
{
    void *bufs[] = {f->off,         f->data,          f->bwt,     f->idx,       f->ds_bwt,
                    f->ds_idx,      f->ranks,         f->syms,    f->sym_count, f->ent,
                    f->ent_len,     f->frames,        f->foff,    f->scratch,   f->sym_scratch,
                    f->ent_scratch, f->frame_scratch, f->rel_off, f->rel_off2,  f->status,
                    f->bwt_ws,      f->rank_ws,       f->sa};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    memset(f, 0, sizeof *f);
}

static int alloc_all(bench_file *f)
{
    size_t n = f->size, c = f->count;
    size_t ecap = 2 * n + 4096 * c;
    f->bwt = malloc(n);
    f->idx = calloc(c, GMTF_BWT_MAX_INDEXES * sizeof *f->idx);
    f->ds_bwt = malloc(n);
    f->ds_idx = calloc(c, sizeof *f->ds_idx);
    f->ranks = malloc(n);
    f->syms = malloc((n + c) * sizeof *f->syms);
    f->sym_count = calloc(c, sizeof *f->sym_count);
    f->ent = malloc(ecap);
    f->ent_len = calloc(c, sizeof *f->ent_len);
    f->scratch = malloc(n);
    f->sym_scratch = malloc((n + c) * sizeof *f->sym_scratch);
    f->ent_scratch = malloc(ecap);
    f->foff = calloc(c + 1, sizeof *f->foff);
    f->rel_off = calloc(c + 1, sizeof *f->rel_off);
    f->rel_off2 = calloc(c + 1, sizeof *f->rel_off2);
    f->status = calloc(c + 1, sizeof *f->status);
    f->bwt_ws = malloc(gmtf_bwt_workspace_size(f->bs));
    f->rank_ws = malloc(gmtf_rank_workspace_size(f->bs));
    f->sa = malloc((size_t)f->bs * sizeof *f->sa);
    uint64_t fb = gmtf_batch_bound(f->off, c);
    f->frames = malloc((size_t)fb);
    f->frame_scratch = malloc((size_t)fb);
    if (!f->bwt || !f->idx || !f->ds_bwt || !f->ds_idx || !f->ranks || !f->syms || !f->sym_count ||
        !f->ent || !f->ent_len || !f->scratch || !f->sym_scratch || !f->ent_scratch || !f->foff ||
        !f->rel_off || !f->rel_off2 || !f->status || !f->bwt_ws || !f->rank_ws || !f->sa ||
        !f->frames || !f->frame_scratch)
        return -ENOMEM;
    return 0;
}

/* Computes every stage's reference output from the original. */
static int run_pipeline_once(bench_file *f)
{
    for (size_t i = 0; i < f->count; i++) {
        const uint8_t *src = f->data + f->off[i];
        size_t n = block_len(f, i);
        int rc = gmtf_bwt_forward(src, f->bwt + f->off[i], n, f->idx + i * GMTF_BWT_MAX_INDEXES,
                                  f->bwt_ws);
        if (rc < 0)
            return rc;
        f->ds_idx[i] = divbwt(src, f->ds_bwt + f->off[i], f->sa, (saidx_t)n);
        if (f->ds_idx[i] < 0)
            return -EIO;
        gmtf_mtf_encode_scalar(f->bwt + f->off[i], f->ranks + f->off[i], n);
        f->sym_count[i] = gmtf_zrle_encode(f->ranks + f->off[i], n, f->syms + soff(f, i));
        long e = gmtf_entropy_encode(f->syms + soff(f, i), f->sym_count[i], f->ent + eoff(f, i),
                                     ent_cap(n), f->rank_ws);
        if (e < 0)
            return (int)e;
        f->ent_len[i] = (size_t)e;
    }
    return 0;
}

static int bench_file_load(bench_file *f, const char *name, uint32_t bs)
{
    int rc;
    memset(f, 0, sizeof *f);
    f->name = name;
    f->bs = bs;
    if ((rc = read_file(name, &f->data, &f->size)) < 0)
        return rc;
    if (f->size == 0)
        return -ENODATA;
    f->count = (f->size + bs - 1) / bs;
    if (!(f->off = calloc(f->count + 1, sizeof *f->off)))
        return -ENOMEM;
    for (size_t i = 0; i < f->count; i++)
        f->off[i + 1] = f->off[i] + (f->size - f->off[i] > bs ? bs : f->size - f->off[i]);
    if ((rc = alloc_all(f)) < 0)
        return rc;
    return run_pipeline_once(f);
}

/* ---- stages ---------------------------------------------------------------- */

static int bench_bwt(const bench_opts *o, bench_file *f)
{
    int bad = 0;
    bad |= measure(o, f, pass_bwt_encode, (row){"bwt", "gmtf", "encode", 1, 0, 0, 0});
    bad |= measure(o, f, pass_bwt_decode, (row){"bwt", "gmtf", "decode", 1, 0, 0, 0});
    bad |= verify(f, f->scratch, f->data, f->size, "bwt gmtf");
    bad |= measure(o, f, pass_ds_encode, (row){"bwt", "divsufsort", "encode", 1, 0, 0, 0});
    bad |= measure(o, f, pass_ds_decode, (row){"bwt", "divsufsort", "decode", 1, 0, 0, 0});
    bad |= verify(f, f->scratch, f->data, f->size, "bwt divsufsort");
    return bad;
}

/* Device-resident rows of a batch backend: median of the device times. */
static int bench_mtf_kernel(const bench_opts *o, bench_file *f, const gmtf_mtf *m)
{
    char v[64];
    snprintf(v, sizeof v, "%s/kernel", m->ops->name);
    for (int dec = 0; dec < 2; dec++) {
        double t[64];
        int runs = o->runs < 64 ? o->runs : 64;
        for (int r = 0; r < runs; r++) {
            int rc = gmtf_mtf_bench_kernel(m, dec ? f->ranks : f->bwt, f->off, f->count, f->scratch,
                                           dec, &t[r]);
            if (rc < 0) {
                print_row(o, f,
                          &(row){"mtf", v, dec ? "decode" : "encode", 1, -1, 0, gmtf_strerror(rc)});
                return 0;
            }
        }
        if (verify(f, f->scratch, dec ? f->bwt : f->ranks, f->size, "mtf kernel"))
            return -1;
        for (int a = 1; a < runs; a++) /* insertion sort: a handful of runs */
            for (int b = a; b > 0 && t[b] < t[b - 1]; b--) {
                double x = t[b];
                t[b] = t[b - 1];
                t[b - 1] = x;
            }
        double ms = t[runs / 2];
        print_row(
            o, f,
            &(row){"mtf", v, dec ? "decode" : "encode", 1, ms > 0 ? f->size / 1e3 / ms : 0, 0, 0});
    }
    return 0;
}

static int bench_mtf_backend(const bench_opts *o, bench_file *f, const char *name)
{
    const gmtf_mtf_backend *be = gmtf_mtf_backend_find(name);
    gmtf_mtf m;
    int bad = 0, rc = be ? gmtf_mtf_init(&m, be) : GMTF_E_BACKEND;
    if (rc < 0) {
        print_row(o, f,
                  &(row){"mtf", name, "encode", 1, -1, 0, be ? gmtf_strerror(rc) : "unavailable"});
        return 0;
    }
    f->mtf = &m;
    bad |= measure(o, f, pass_mtf_encode, (row){"mtf", be->name, "encode", 1, 0, 0, 0});
    bad |= verify(f, f->scratch, f->ranks, f->size, "mtf encode (vs scalar)");
    bad |= measure(o, f, pass_mtf_decode, (row){"mtf", be->name, "decode", 1, 0, 0, 0});
    bad |= verify(f, f->scratch, f->bwt, f->size, "mtf");
    /* Batch rows in the memory the backend moves fastest (pinned for the GPU,
     * as the codec's staging buffers are), copied there outside the timing. */
    uint8_t *saved[3] = {f->bwt, f->ranks, f->scratch}, *pin[3] = {0};
    if (be->host_alloc && be->host_free) {
        int ok = 1;
        for (int k = 0; k < 3; k++)
            ok &= (pin[k] = gmtf_mtf_host_alloc(&m, f->size ? f->size : 1)) != NULL;
        if (ok) {
            memcpy(pin[0], f->bwt, f->size);
            memcpy(pin[1], f->ranks, f->size);
            f->bwt = pin[0], f->ranks = pin[1], f->scratch = pin[2];
        }
    }
    if (be->batch_encode && be->batch_decode) {
        char v[64];
        snprintf(v, sizeof v, "%s/batch", be->name);
        bad |= measure(o, f, pass_mtf_batch_encode, (row){"mtf", v, "encode", 1, 0, 0, 0});
        bad |= verify(f, f->scratch, f->ranks, f->size, "mtf batch encode (vs scalar)");
        bad |= measure(o, f, pass_mtf_batch_decode, (row){"mtf", v, "decode", 1, 0, 0, 0});
        bad |= verify(f, f->scratch, f->bwt, f->size, "mtf batch");
    }
    if (gmtf_mtf_bench_has_kernel(&m))
        bad |= bench_mtf_kernel(o, f, &m);
    f->bwt = saved[0], f->ranks = saved[1], f->scratch = saved[2];
    for (int k = 0; k < 3; k++)
        if (pin[k])
            gmtf_mtf_host_free(&m, pin[k]);
    f->mtf = NULL;
    gmtf_mtf_free(&m);
    return bad;
}

static int bench_rank_stages(const bench_opts *o, bench_file *f)
{
    int bad = 0;
    if (o->stages & STAGE_ZRLE) {
        bad |= measure(o, f, pass_zrle_encode, (row){"zrle", "-", "encode", 1, 0, 0, 0});
        bad |= measure(o, f, pass_zrle_decode, (row){"zrle", "-", "decode", 1, 0, 0, 0});
        bad |= verify(f, f->scratch, f->ranks, f->size, "zrle");
    }
    if (o->stages & STAGE_ENTROPY) {
        size_t total = 0;
        for (size_t i = 0; i < f->count; i++)
            total += f->ent_len[i];
        double ratio = total ? (double)f->size / total : 0;
        bad |= measure(o, f, pass_entropy_encode, (row){"entropy", "-", "encode", 1, 0, ratio, 0});
        bad |= measure(o, f, pass_entropy_decode, (row){"entropy", "-", "decode", 1, 0, ratio, 0});
        bad |=
            verify(f, f->sym_scratch, f->syms, (f->size + f->count) * sizeof *f->syms, "entropy");
    }
    return bad;
}

static int bench_codec_at(const bench_opts *o, bench_file *f, const char *mtf, unsigned threads)
{
    gmtf_codec_options opt = {.threads = threads, .mtf = mtf, .max_block = f->bs};
    int rc = gmtf_codec_create(&f->codec, &opt);
    if (rc < 0) {
        print_row(o, f,
                  &(row){"codec", mtf ? mtf : "auto", "encode", threads, -1, 0, "unavailable"});
        return 0;
    }
    f->batch = gmtfc_batch_blocks(f->bs, threads);
    char v[64];
    snprintf(v, sizeof v, "%s", gmtf_codec_mtf_name(f->codec));
    int bad = 0;
    /* Reference frames for the decoder (pass_codec_encode records foff),
     * and the ratio. */
    if ((rc = pass_codec_encode(f)) < 0) {
        fprintf(stderr, "gmtfc bench: %s: codec encode failed: %s\n", f->name, gmtf_strerror(rc));
        bad = -1;
        goto out;
    }
    uint64_t pos = f->foff[f->count];
    memcpy(f->frames, f->frame_scratch, (size_t)pos);
    double ratio = pos ? (double)f->size / pos : 0;
    bad |= measure(o, f, pass_codec_encode, (row){"codec", v, "encode", threads, 0, ratio, 0});
    bad |= measure(o, f, pass_codec_decode, (row){"codec", v, "decode", threads, 0, ratio, 0});
    bad |= verify(f, f->scratch, f->data, f->size, "codec");
out:
    gmtf_codec_destroy(f->codec);
    f->codec = NULL;
    return bad;
}

/* Calls fn for the backend named by --mtf, or for each one with "all". */
static int for_each_mtf(const bench_opts *o, bench_file *f,
                        int (*fn)(const bench_opts *, bench_file *, const char *))
{
    if (!o->mtf || strcmp(o->mtf, "all") != 0)
        return fn(o, f, o->mtf ? o->mtf : "auto");
    int bad = 0;
    for (size_t i = 0; i < gmtf_mtf_backend_count(); i++) {
        int ok = 0;
        const char *name = gmtf_mtf_backend_name(i, &ok);
        if (!ok)
            print_row(o, f, &(row){"mtf", name, "-", 1, -1, 0, "unavailable"});
        else
            bad |= fn(o, f, name);
    }
    return bad;
}

static int bench_codec_backend(const bench_opts *o, bench_file *f, const char *mtf)
{
    int bad = bench_codec_at(o, f, mtf, 1);
    if (o->threads > 1)
        bad |= bench_codec_at(o, f, mtf, o->threads);
    return bad;
}

static int bench_one_file(const bench_opts *o, const char *name)
{
    bench_file f;
    int rc = bench_file_load(&f, name, o->block_size);
    if (rc < 0) {
        fprintf(stderr, "gmtfc bench: %s: %s\n", name,
                rc == -ENODATA ? "empty file, nothing to measure" : gmtf_strerror(rc));
        bench_file_free(&f);
        return -1;
    }
    if (!o->json) {
        printf("%s: %zu bytes, block %u, %zu blocks, median of %u runs (MB/s of input)\n", name,
               f.size, f.bs, f.count, o->runs);
        printf("  %-8s %-22s %-7s %7s %10s %8s\n", "stage", "variant", "dir", "threads", "MB/s",
               "ratio");
    }
    int bad = 0;
    if (o->stages & STAGE_BWT)
        bad |= bench_bwt(o, &f);
    if (o->stages & STAGE_MTF)
        bad |= for_each_mtf(o, &f, bench_mtf_backend);
    bad |= bench_rank_stages(o, &f);
    if (o->stages & STAGE_CODEC)
        bad |= for_each_mtf(o, &f, bench_codec_backend);
    bench_file_free(&f);
    return bad ? -1 : 0;
}

/* ---- options ----------------------------------------------------------------- */

static int parse_stages(const char *s, unsigned *out)
{
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {
        {"bwt", STAGE_BWT},         {"mtf", STAGE_MTF},     {"zrle", STAGE_ZRLE},
        {"entropy", STAGE_ENTROPY}, {"codec", STAGE_CODEC}, {"all", STAGE_ALL},
    };
    *out = 0;
    while (*s) {
        size_t len = strcspn(s, ",");
        size_t i;
        for (i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strlen(names[i].name) == len && strncmp(s, names[i].name, len) == 0)
                break;
        if (i == sizeof names / sizeof names[0])
            return -EINVAL;
        *out |= names[i].bit;
        s += len + (s[len] == ',');
    }
    return *out ? 0 : -EINVAL;
}

static void bench_usage(FILE *f)
{
    fprintf(f, "Usage: gmtfc bench [--json] [--mtf=NAME|all] [-b SIZE] [-r RUNS] [-j N]\n"
               "                   [--stage=LIST] FILE...\n"
               "Times every codec stage (bwt, mtf, zrle, entropy, codec) per direction.\n"
               "  --json          one JSON object per line\n"
               "  --mtf=NAME|all  MTF backend for the mtf and codec stages (default auto)\n"
               "  -b SIZE         block size, k/M suffixes (default 900k)\n"
               "  -r RUNS         runs per measurement, median reported (default 5)\n"
               "  -j N            also time the whole codec with N threads (batch API)\n"
               "  --stage=LIST    comma-separated stages to run (default all)\n");
}

enum { OPT_JSON = 256, OPT_MTF, OPT_STAGE };

static int parse_bench_options(int argc, char **argv, bench_opts *o)
{
    static const struct option longs[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {"mtf", required_argument, NULL, OPT_MTF},
        {"stage", required_argument, NULL, OPT_STAGE},
        {"block-size", required_argument, NULL, 'b'},
        {"runs", required_argument, NULL, 'r'},
        {"threads", required_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":b:r:j:h", longs, NULL)) != -1) {
        switch (c) {
        case OPT_JSON: o->json = 1; break;
        case OPT_MTF: o->mtf = optarg; break;
        case OPT_STAGE:
            if (parse_stages(optarg, &o->stages) < 0) {
                fprintf(stderr, "gmtfc bench: invalid --stage '%s'\n", optarg);
                return -1;
            }
            break;
        case 'b':
            if (gmtfc_parse_block_size(optarg, &o->block_size) < 0) {
                fprintf(stderr, "gmtfc bench: invalid block size '%s'\n", optarg);
                return -1;
            }
            break;
        case 'r':
        case 'j':
            if (cli_parse_uint(optarg, 1, 1024, c == 'r' ? &o->runs : &o->threads) < 0) {
                fprintf(stderr, "gmtfc bench: invalid -%c '%s'\n", c, optarg);
                return -1;
            }
            break;
        case 'h': bench_usage(stdout); return 0;
        default:
            fprintf(stderr, "gmtfc bench: bad option '%s'\n", argv[optind - 1]);
            bench_usage(stderr);
            return -1;
        }
    }
    if (optind == argc) {
        fprintf(stderr, "gmtfc bench: no input files\n");
        bench_usage(stderr);
        return -1;
    }
    return optind;
}

int gmtfc_bench_main(int argc, char **argv)
{
    bench_opts o = {.block_size = GMTF_BLOCK_DEFAULT, .runs = 5, .threads = 1, .stages = STAGE_ALL};
    int first = parse_bench_options(argc, argv, &o);
    if (first <= 0)
        return first == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    if (o.mtf && strcmp(o.mtf, "all") != 0 && !gmtf_mtf_backend_find(o.mtf)) {
        fprintf(stderr, "gmtfc bench: unknown or unavailable MTF backend '%s'\n", o.mtf);
        return CLI_EXIT_FAIL;
    }
    int status = 0;
    for (int i = first; i < argc; i++)
        status |= bench_one_file(&o, argv[i]) < 0;
    return status;
}
