/* The .gmz stream layer: header, codec frames in batches, trailer.
 * Byte layout in docs/stream.md. Input is read through bounded buffers:
 * one batch when decompressing, two when compressing (the next batch is
 * read while a helper thread codes this one); the batch calls of libgmtf
 * spread blocks over the threads. */
#include "gmtfc.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "byteorder.h"
#include "cli.h"
#include "gmtf_codec.h"

struct gmtfc_stream {
    gmtfc_config cfg;
    gmtf_codec *codec;
    uint32_t codec_max_block; /* max_block the codec was created with */
    gmtfc_progress_fn progress;
    void *progress_arg;

    /* Reused buffers; grown on demand, never shrunk. */
    uint8_t *in;
    size_t in_cap;
    uint8_t *out;
    size_t out_cap;
    uint64_t *off;  /* count+1 entries */
    uint64_t *off2; /* count+1 entries */
    int *status;
    uint32_t *dcrc; /* decompression: the frames' data checksums */
    size_t off_cap; /* entries in off, off2, status, dcrc */
    /* compression: the batches in flight (read, being coded, coded and
     * not yet written), and the second codec of a GPU pipeline */
    struct cslot {
        uint8_t *in, *out;
        size_t in_cap, out_cap;
        uint64_t *off, *off2; /* blocks in in, frames in out (count + 1) */
        uint32_t *bcrc;       /* the blocks' checksums, from the encode */
        size_t off_cap;
        size_t count; /* blocks */
        uint64_t seq; /* the batch's number in the stream */
        long got;     /* bytes */
        int state;    /* SLOT_* */
        int rc;       /* the encode's */
    } cs[GMTFC_SLOTS_MAX];
    gmtf_codec *codec2;
    uint32_t codec2_max_block;
};

/* ---- errors -------------------------------------------------------------- */

static int set_error(gmtfc_error *err, enum gmtfc_error_kind kind, int code, uint64_t offset,
                     const char *fmt, ...)
{
    va_list ap;
    err->kind = kind;
    err->code = code;
    err->offset = offset;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code < 0 ? code : -EINVAL;
}

static int corrupt(gmtfc_error *err, uint64_t offset, int code, const char *what)
{
    return set_error(err, GMTFC_ERR_CORRUPT, code ? code : GMTF_E_CORRUPT, offset,
                     "corrupt input at byte offset %llu: %s", (unsigned long long)offset, what);
}

static int truncated(gmtfc_error *err, uint64_t offset, const char *where)
{
    return set_error(err, GMTFC_ERR_CORRUPT, GMTF_E_TRUNCATED, offset,
                     "unexpected end of input at byte offset %llu (%s)", (unsigned long long)offset,
                     where);
}

/* ---- profile (GMTFC_PROFILE=1: each batch's phases on stderr, ms) --------- */

static int prof_on(void)
{
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("GMTFC_PROFILE");
        on = e && *e == '1';
    }
    return on;
}

static double prof_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double prof_wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* ---- plain I/O ----------------------------------------------------------- */

/* Reads until n bytes or end of input. Returns the count or -errno. */
static long read_full(int fd, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (long)got;
}

static int write_all(int fd, const uint8_t *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

static int write_out(int fd, const uint8_t *buf, size_t n, gmtfc_totals *t, gmtfc_error *err)
{
    int rc = fd >= 0 ? write_all(fd, buf, n) : 0;
    if (rc < 0)
        return set_error(err, GMTFC_ERR_WRITE, rc, 0, "write error: %s", strerror(-rc));
    t->out_bytes += n;
    return 0;
}

/* ---- context ------------------------------------------------------------- */

int gmtfc_parse_block_size(const char *s, uint32_t *out)
{
    uint64_t v;
    int rc = cli_parse_size(s, &v);
    if (rc < 0)
        return rc;
    if (v < 1 || v > GMTF_BLOCK_MAX)
        return -ERANGE;
    *out = (uint32_t)v;
    return 0;
}

size_t gmtfc_batch_blocks(uint32_t block_size, unsigned threads)
{
    const size_t bs = block_size ? block_size : 1, t = threads ? threads : 1;
    const char *e = getenv("GMTFC_BATCH_MIB"); /* measurements only (docs/gpu.md) */
    if (e && *e) {
        size_t n = (size_t)strtoul(e, NULL, 10) * ((size_t)1 << 20) / bs;
        return n < 1 ? 1 : n > GMTFC_BATCH_MAX_BLOCKS ? GMTFC_BATCH_MAX_BLOCKS : n;
    }
    size_t n = GMTFC_BATCH_PER_THREAD * t;
    if (n * bs > GMTFC_BATCH_MAX_BYTES) /* big blocks: fewer per thread */
        n = GMTFC_BATCH_MAX_BYTES / bs > 2 * t ? GMTFC_BATCH_MAX_BYTES / bs : 2 * t;
    if (GMTFC_BATCH_MIN_BYTES / bs > n)
        n = GMTFC_BATCH_MIN_BYTES / bs;
    return n > GMTFC_BATCH_MAX_BLOCKS ? GMTFC_BATCH_MAX_BLOCKS : n;
}

/* 1 when fd is a regular file that will likely bring at least 1 GiB to
 * code: its size, or for a stream to decompress 8 times its size (a low
 * guess of the Linux tar's 9x; incompressible data is guessed too big, which
 * costs only the larger batch below). */
static int big_input(int fd, int compressed)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0)
        return 0;
    return (uint64_t)st.st_size * (compressed ? 8u : 1u) >= 4ull * GMTFC_BATCH_MAX_BYTES;
}

/* The blocks of a batch for this stream's codec: gmtfc_batch_blocks, twice
 * that (to GMTFC_BATCH_MAX_BYTES) when the codec's batches go to a GPU and
 * the input is big (big_input): the device's lane kernels take about as
 * long for a batch of 128 MiB as for one of 256 (their slowest lanes). On
 * the H100 (docs/gpu.md, gpu7), -b 2M -j16: the whole Linux tar
 * decompressed in 1.48 s instead of 1.70 and compressed in 2.17 instead of
 * 2.26, 1280 MiB in 1.47 / 1.99 s instead of 1.62 / 2.24; but a 256 MiB
 * file is slower in two batches than in one (0.83 / 1.03 s against 0.75 /
 * 0.87: nothing read or written beside the first batch's coding). The
 * stream is the same whatever the batch; GMTFC_BATCH_MIB, when set, decides
 * alone. */
static size_t stream_batch(const gmtfc_stream *s, uint32_t bs, int big)
{
    size_t n = gmtfc_batch_blocks(bs, s->cfg.threads);
    const char *e = getenv("GMTFC_BATCH_MIB");
    if ((e && *e) || !big || !gmtf_codec_batch_device(s->codec))
        return n;
    size_t most = GMTFC_BATCH_MAX_BYTES / (bs ? bs : 1);
    if (2 * n <= most)
        n *= 2;
    else if (most > n)
        n = most;
    return n > GMTFC_BATCH_MAX_BLOCKS ? GMTFC_BATCH_MAX_BLOCKS : n;
}

/* (Re)creates the codec when blocks of max_block must be handled and the
 * current one was made for smaller blocks. */
static int ensure_codec(gmtfc_stream *s, uint32_t max_block)
{
    if (s->codec && s->codec_max_block >= max_block)
        return 0;
    gmtf_codec_options opt = {
        .threads = s->cfg.threads,
        .mtf = s->cfg.mtf,
        .max_block = max_block,
        .gpus = s->cfg.gpus,
    };
    gmtf_codec *c;
    int rc = gmtf_codec_create(&c, &opt);
    if (rc < 0)
        return rc;
    gmtf_codec_destroy(s->codec);
    s->codec = c;
    s->codec_max_block = max_block;
    return 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (*cap >= need)
        return 0;
    void *q = realloc(*p, need * elem);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = need;
    return 0;
}

/* A slot's input or output buffer (contents not kept when it grows): on
 * Linux in 2 MiB pages where the kernel gives them (MADV_HUGEPAGE), so that
 * a fresh 256 MiB buffer takes 128 page faults instead of 65,536 and the
 * exit unmaps it in as few; GMTFC_HUGE=0: plain pages (measurements). */
static int grow_big_keep(uint8_t **p, size_t *cap, size_t need, size_t keep)
{
    if (*cap >= need)
        return 0;
    uint8_t *q = NULL;
    size_t n = need;
#ifdef MADV_HUGEPAGE
    const char *e = getenv("GMTFC_HUGE");
    const size_t huge = (size_t)2 << 20;
    if (need >= huge && !(e && *e == '0')) {
        n = (need + huge - 1) & ~(huge - 1);
        void *h;
        if (posix_memalign(&h, huge, n) == 0) {
            (void)madvise(h, n, MADV_HUGEPAGE); /* advice: plain pages if refused */
            q = h;
        } else {
            n = need;
        }
    }
#endif
    if (!q && (q = malloc(n ? n : 1)) == NULL)
        return -ENOMEM;
    if (keep && *p)
        memcpy(q, *p, keep < *cap ? keep : *cap);
    free(*p);
    *p = q;
    *cap = n;
    return 0;
}

static int grow_big(uint8_t **p, size_t *cap, size_t need)
{
    return grow_big_keep(p, cap, need, 0);
}

static int ensure_offsets(gmtfc_stream *s, size_t count)
{
    if (s->off_cap >= count + 1)
        return 0;
    size_t cap = s->off_cap, cap2 = s->off_cap, cap3 = s->off_cap, cap4 = s->off_cap;
    if (grow((void **)&s->off, &cap, count + 1, sizeof *s->off) < 0 ||
        grow((void **)&s->off2, &cap2, count + 1, sizeof *s->off2) < 0 ||
        grow((void **)&s->status, &cap3, count + 1, sizeof *s->status) < 0 ||
        grow((void **)&s->dcrc, &cap4, count + 1, sizeof *s->dcrc) < 0)
        return -ENOMEM;
    s->off_cap = count + 1;
    return 0;
}

int gmtfc_stream_create(gmtfc_stream **out, const gmtfc_config *cfg)
{
    gmtfc_stream *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->cfg = *cfg;
    if (s->cfg.threads == 0)
        s->cfg.threads = 1;
    if (prof_on())
        fprintf(stderr, "gmtfc profile: create at %.3f s\n", prof_wall());
    int rc = ensure_codec(s, cfg->block_size);
    if (rc < 0) {
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void gmtfc_stream_destroy(gmtfc_stream *s)
{
    if (!s)
        return;
    double t0 = prof_on() ? prof_ms() : 0;
    gmtf_codec_destroy(s->codec);
    if (prof_on()) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        fprintf(stderr,
                "gmtfc profile: codec destroyed in %.1f ms, at %.3f s; user %.3f s, sys %.3f s, "
                "minor faults %ld\n",
                prof_ms() - t0, prof_wall(), ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
                ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6, ru.ru_minflt);
    }
    free(s->in);
    free(s->out);
    free(s->off);
    free(s->off2);
    free(s->status);
    free(s->dcrc);
    gmtf_codec_destroy(s->codec2);
    for (int i = 0; i < GMTFC_SLOTS_MAX; i++) {
        free(s->cs[i].in);
        free(s->cs[i].out);
        free(s->cs[i].off);
        free(s->cs[i].off2);
        free(s->cs[i].bcrc);
    }
    free(s);
}

void gmtfc_stream_set_progress(gmtfc_stream *s, gmtfc_progress_fn fn, void *arg)
{
    s->progress = fn;
    s->progress_arg = arg;
}

int gmtfc_stream_device(const gmtfc_stream *s)
{
    int dev = gmtf_codec_batch_device(s->codec);
    if (prof_on()) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        fprintf(stderr,
                "gmtfc profile: leaving at %.3f s; user %.3f s, sys %.3f s, minor faults %ld\n",
                prof_wall(), ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
                ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6, ru.ru_minflt);
    }
    return dev;
}

const char *gmtfc_stream_mtf_name(const gmtfc_stream *s)
{
    return gmtf_codec_mtf_name(s->codec);
}

static void report_progress(gmtfc_stream *s, const gmtfc_totals *t)
{
    if (s->progress)
        s->progress(s->progress_arg, t);
}

/* ---- compression --------------------------------------------------------- */

/* CRC-32C arithmetic (reflected, polynomial 0x82F63B78): the product of a
 * and b modulo the polynomial, bit 31 standing for x^0. */
static uint32_t crc_mulmod(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
    for (uint32_t m = 1u << 31; m; m >>= 1) {
        if (a & m)
            p ^= b;
        b = b & 1 ? (b >> 1) ^ 0x82F63B78u : b >> 1;
    }
    return p;
}

/* x^(8 n) modulo the polynomial: squares of x^8 for n's bits. */
static uint32_t crc_x8n(uint64_t n)
{
    uint32_t p = 1u << 31, sq = 1u << 23; /* x^0, x^8 */
    for (; n; n >>= 1) {
        if (n & 1)
            p = crc_mulmod(sq, p);
        sq = crc_mulmod(sq, sq);
    }
    return p;
}

/* gmtf_crc32c(a, B, n) from a and b = gmtf_crc32c(0, B, n): the
 * pre- and post-inversions cancel, so the result is a shifted over n bytes
 * plus b. */
static uint32_t crc32c_combine(uint32_t a, uint32_t b, uint64_t n)
{
    return crc_mulmod(crc_x8n(n), a) ^ b;
}

static void make_header(uint8_t *h, uint32_t block_size)
{
    memcpy(h, GMTFC_MAGIC, GMTFC_MARKER_LEN);
    h[4] = GMTFC_VERSION;
    h[5] = 0; /* flags: none defined */
    h[6] = h[7] = 0;
    store_le32(h + 8, block_size);
    store_le32(h + 12, gmtf_crc32c(0, h, 12));
}

static void make_trailer(uint8_t *tr, uint64_t total, uint64_t frames, uint32_t crc,
                         uint32_t frames_crc)
{
    memcpy(tr, GMTFC_END_MARKER, GMTFC_MARKER_LEN);
    store_le64(tr + 4, total);
    store_le64(tr + 12, frames);
    store_le32(tr + 20, crc);
    store_le32(tr + 24, frames_crc);
    store_le32(tr + 28, gmtf_crc32c(0, tr, 28));
}

/* Cuts in[0..len) into blocks of bs bytes (the last may be shorter). */
static size_t cut_blocks(uint64_t *off, size_t len, uint32_t bs)
{
    size_t count = 0;
    off[0] = 0;
    for (size_t pos = 0; pos < len; pos += bs) {
        size_t end = len - pos > bs ? pos + bs : len;
        off[++count] = end;
    }
    return count;
}

/* The codec readied (workspaces; with a GPU its start, contexts and pinned
 * staging) on a thread beside the first read: on unless GMTFC_PREPARE=0
 * (measurements). */
struct prep_job {
    gmtf_codec *codec;
    uint64_t bytes;
    int encode;
};

static void *prep_run(void *arg)
{
    struct prep_job *j = arg;
    (void)gmtf_codec_prepare(j->codec, j->bytes, j->encode); /* a failure: the batch's to find */
    return NULL;
}

static int prep_start(gmtfc_stream *s, uint64_t bytes, int encode, struct prep_job *j,
                      pthread_t *th)
{
    const char *e = getenv("GMTFC_PREPARE");
    if (e && *e == '0')
        return 0;
    *j = (struct prep_job){s->codec, bytes, encode};
    return pthread_create(th, NULL, prep_run, j) == 0;
}

/* ---- the compression pipeline ----
 *
 * Batches go through slots: the caller's thread reads batch b into slot
 * b % nslots (and checksums it), encoders code the batches in order of
 * their numbers, each as soon as it is free, and the caller's thread
 * writes the coded batches in order. One encoder (the stream's codec) and
 * two slots: the next batch is read and the last one written while this
 * one is coded. GMTFC_ENCODERS=2 (measurements, encoders_for): a second
 * encoder with a codec of its own on the GPU (its device contexts, streams
 * and pinned staging) and three slots, so that one batch's host steps (the
 * blocks the device does not code, the frames put together: 80-90 ms of a
 * 256 MiB batch's 245 on the H100) run beside the next one's device steps.
 * Frames depend on the blocks' bytes only: the stream is the same. */

enum { SLOT_FREE, SLOT_READY, SLOT_DONE };

struct cpipe {
    gmtfc_stream *s;
    pthread_mutex_t mtx;
    pthread_cond_t cond;
    unsigned nslots;
    uint64_t nread;    /* batches read (slot READY or later) */
    uint64_t next_enc; /* the next batch an encoder takes */
    int eof;           /* no batch after nread */
    int stop;          /* encoders leave */
    uint64_t batch_bytes;
};

struct cenc {
    struct cpipe *p;
    gmtf_codec *codec; /* NULL: encoder 1 makes the stream's second codec */
    pthread_t th;
    int started;
};

/* The second codec (made once a stream, for blocks of the stream's size),
 * readied for a batch: on encoder 1's thread, while encoder 0 codes. */
static gmtf_codec *second_codec(gmtfc_stream *s, uint64_t batch_bytes)
{
    if (!s->codec2 || s->codec2_max_block < s->codec_max_block) {
        gmtf_codec_options opt = {
            .threads = s->cfg.threads,
            .mtf = s->cfg.mtf,
            .max_block = s->codec_max_block,
            .gpus = s->cfg.gpus,
        };
        gmtf_codec *c;
        if (gmtf_codec_create(&c, &opt) < 0)
            return NULL;
        gmtf_codec_destroy(s->codec2);
        s->codec2 = c;
        s->codec2_max_block = s->codec_max_block;
    }
    if (!gmtf_codec_batch_device(s->codec2))
        return NULL; /* a second CPU codec would only share the cores */
    (void)gmtf_codec_prepare(s->codec2, batch_bytes, 1); /* a failure: the batch's to find */
    return s->codec2;
}

static void *cenc_main(void *arg)
{
    struct cenc *e = arg;
    struct cpipe *p = e->p;
    gmtfc_stream *s = p->s;
    gmtf_codec *c = e->codec ? e->codec : second_codec(s, p->batch_bytes);
    if (prof_on() && !e->codec)
        fprintf(stderr, "gmtfc profile: second codec %s at %.3f s\n", c ? "ready" : "not made",
                prof_wall());
    pthread_mutex_lock(&p->mtx);
    while (c) {
        while (!p->stop && p->next_enc >= p->nread && !p->eof)
            pthread_cond_wait(&p->cond, &p->mtx);
        if (p->stop || p->next_enc >= p->nread)
            break;
        struct cslot *sl = &s->cs[p->next_enc++ % p->nslots];
        pthread_mutex_unlock(&p->mtx);
        double t0 = prof_on() ? prof_ms() : 0;
        int rc = gmtf_batch_encode_crc(c, sl->in, sl->off, sl->count, sl->out, sl->out_cap,
                                       sl->off2, sl->bcrc);
        if (prof_on())
            fprintf(stderr, "gmtfc profile: encoder %d: %zu blocks in %.1f ms, done at %.3f s\n",
                    e->codec ? 0 : 1, sl->count, prof_ms() - t0, prof_wall());
        pthread_mutex_lock(&p->mtx);
        sl->rc = rc;
        sl->state = SLOT_DONE;
        pthread_cond_broadcast(&p->cond);
    }
    pthread_mutex_unlock(&p->mtx);
    return NULL;
}

/* Grows slot i for batches of `batch` blocks of bs bytes. */
static int slot_buffers(gmtfc_stream *s, unsigned i, size_t batch)
{
    struct cslot *sl = &s->cs[i];
    size_t in_need = batch * (size_t)s->cfg.block_size, oc = sl->off_cap, cc = sl->off_cap;
    if (grow_big(&sl->in, &sl->in_cap, in_need) < 0 ||
        grow((void **)&sl->off, &oc, batch + 1, sizeof *sl->off) < 0 ||
        grow((void **)&sl->bcrc, &cc, batch + 1, sizeof *sl->bcrc) < 0 ||
        grow((void **)&sl->off2, &sl->off_cap, batch + 1, sizeof *sl->off2) < 0)
        return -ENOMEM;
    cut_blocks(sl->off, in_need, s->cfg.block_size);
    uint64_t bound = gmtf_batch_bound(sl->off, batch);
    if (bound > SIZE_MAX || grow_big(&sl->out, &sl->out_cap, (size_t)bound) < 0)
        return -ENOMEM;
    sl->state = SLOT_FREE;
    return 0;
}

/* Pages of fresh buffers touched beside the GPU's start (the prepare's
 * device contexts and pinned staging take 0.35-0.45 s on the H100, the
 * host's cores idle but the first read's) rather than at their first use
 * in the pipeline, the outputs' in the codec's last steps: on a GPU with
 * a big input, the slots' outputs and the inputs of all slots but the
 * first (read into now); GMTFC_TOUCH=0 off (measurements). */
struct touch_job {
    gmtfc_stream *s;
    unsigned nslots, part, parts;
    pthread_t th;
    int started;
};

static void touch(uint8_t *p, size_t n, unsigned part, unsigned parts)
{
    const size_t page = 4096, lo = (n / parts * part) & ~(page - 1),
                 hi = part + 1 == parts ? n : (n / parts * (part + 1)) & ~(page - 1);
    for (size_t i = lo; i < hi; i += page)
        p[i] = 0;
}

static void *touch_main(void *arg)
{
    struct touch_job *j = arg;
    for (unsigned i = 0; i < j->nslots; i++) {
        if (i > 0)
            touch(j->s->cs[i].in, j->s->cs[i].in_cap, j->part, j->parts);
        touch(j->s->cs[i].out, j->s->cs[i].out_cap, j->part, j->parts);
    }
    return NULL;
}

/* Encoders: one, or GMTFC_ENCODERS=2 (measurements; only a GPU codec gets a
 * second one). Two on one H100 were slower on 1280 MiB (docs/gpu.md,
 * pipe8: 2.134 s against 1.938 with one): later batches did code two in
 * ~330 ms (against 245 for one alone), but the first took 628 ms beside
 * the second codec's prepare (its pinned staging) and the exit, ending two
 * codecs' device memory and staging, took 0.45 s instead of 0.26. */
static unsigned encoders_for(void)
{
    const char *e = getenv("GMTFC_ENCODERS");
    return e && *e == '2' && !e[1] ? 2 : 1;
}

/* Reading the next batch while this one is coded (two sets of buffers):
 * on unless GMTFC_OVERLAP=0 (measurements: one batch at a time). */
static int overlap_on(void)
{
    const char *e = getenv("GMTFC_OVERLAP");
    return !(e && *e == '0');
}

/* Encoding ahead on the GPU (gmtf_codec_set_next): the codec starts the
 * next batch's device work while it ends this one's; three slots so that
 * the next batch is usually read by then. On with a GPU, a big input and
 * one encoder, unless GMTFC_AHEAD=0 (measurements). */
static int ahead_on(void)
{
    const char *e = getenv("GMTFC_AHEAD");
    return !(e && *e == '0');
}

/* The codec's next-batch hook: the batch after the one being coded, once
 * read (the encoder's thread, inside gmtf_batch_encode); with nb->after,
 * the batch after the one read into the slot whose input is `after` (a
 * codec's helper thread, two ahead). */
static int next_batch(void *arg, gmtf_batch_next *nb)
{
    struct cpipe *p = arg;
    const uint8_t *after = nb->after;
    pthread_mutex_lock(&p->mtx);
    uint64_t want = p->next_enc;
    int ok = 1;
    if (after) {
        unsigned i = 0;
        while (i < p->nslots && !(p->s->cs[i].in == after && p->s->cs[i].state == SLOT_READY))
            i++;
        ok = i < p->nslots;
        if (ok)
            want = p->s->cs[i].seq + 1;
    }
    while (ok && !p->stop && want >= p->nread && !p->eof)
        pthread_cond_wait(&p->cond, &p->mtx);
    ok = ok && !p->stop && want < p->nread;
    if (ok) {
        struct cslot *sl = &p->s->cs[want % p->nslots];
        *nb = (gmtf_batch_next){sl->in, sl->off, sl->count, sl->out, sl->out_cap, after};
    }
    pthread_mutex_unlock(&p->mtx);
    return ok;
}

/* Reads batch p->nread into its slot (the caller's thread, unlocked). The
 * content's checksum comes from the blocks' that the encode gives
 * (gmtf_batch_encode_crc), not from a pass here: 29 ms of 256 MiB on the
 * H100 host, on the thread that reads. */
static long read_batch(struct cpipe *p, int in_fd, size_t full, uint32_t bs)
{
    struct cslot *sl = &p->s->cs[p->nread % p->nslots];
    long got = read_full(in_fd, sl->in, full);
    if (got > 0)
        sl->count = cut_blocks(sl->off, (size_t)got, bs);
    sl->got = got;
    sl->seq = p->nread;
    return got;
}

int gmtfc_compress(gmtfc_stream *s, int in_fd, int out_fd, gmtfc_totals *t, gmtfc_error *err)
{
    const uint32_t bs = s->cfg.block_size;
    uint8_t hdr[GMTFC_TRAILER_LEN];
    uint32_t crc = 0, frames_crc = 0;
    int rc;

    memset(t, 0, sizeof *t);
    memset(err, 0, sizeof *err);
    if (prof_on())
        fprintf(stderr, "gmtfc profile: start at %.3f s\n", prof_wall());
    if ((rc = ensure_codec(s, bs)) < 0)
        return set_error(err, GMTFC_ERR_CODEC, rc, 0, "%s", gmtf_strerror(rc));
    const int big = big_input(in_fd, 0);
    const size_t batch = stream_batch(s, bs, big);
    const size_t full = batch * (size_t)bs;
    const unsigned nenc = overlap_on() ? encoders_for() : 1;
    const int ahead =
        big && nenc == 1 && overlap_on() && ahead_on() && gmtf_codec_batch_device(s->codec);
    struct cpipe p = {.s = s, .nslots = overlap_on() ? nenc + 1 + ahead : 1, .batch_bytes = full};
    for (unsigned i = 0; i < p.nslots; i++)
        if ((rc = slot_buffers(s, i, batch)) < 0)
            return set_error(err, GMTFC_ERR_CODEC, rc, 0, "%s", gmtf_strerror(rc));
    if (prof_on())
        fprintf(stderr, "gmtfc profile: ready at %.3f s (%u encoders, %u slots)\n", prof_wall(),
                nenc, p.nslots);
    make_header(hdr, bs);
    if ((rc = write_out(out_fd, hdr, GMTFC_HEADER_LEN, t, err)) < 0)
        return rc;
    double t0 = prof_on() ? prof_ms() : 0;
    pthread_mutex_init(&p.mtx, NULL);
    pthread_cond_init(&p.cond, NULL);
    if (ahead) /* before the prepare: it readies the second staging too */
        gmtf_codec_set_next(s->codec, next_batch, &p);
    struct cenc enc[2] = {{.p = &p, .codec = s->codec}, {.p = &p, .codec = NULL}};
    struct prep_job pj;
    pthread_t pt;
    int prep = prep_start(s, full, 1, &pj, &pt);
    struct touch_job tj[4] = {{0}};
    const char *te = getenv("GMTFC_TOUCH"); /* measurements: 0 = off */
    const int touching = big && gmtf_codec_batch_device(s->codec) && !(te && *te == '0');
    for (unsigned i = 0; i < 4 && touching; i++) {
        tj[i] = (struct touch_job){.s = s, .nslots = p.nslots, .part = i, .parts = 4};
        tj[i].started = pthread_create(&tj[i].th, NULL, touch_main, &tj[i]) == 0;
        if (!tj[i].started)
            touch_main(&tj[i]);
    }
    long got = read_batch(&p, in_fd, full, bs);
    double t_read = prof_on() ? prof_ms() - t0 : 0;
    if (prep)
        pthread_join(pt, NULL);
    for (unsigned i = 0; i < 4; i++)
        if (tj[i].started)
            pthread_join(tj[i].th, NULL);
    if (prof_on())
        fprintf(stderr,
                "gmtfc profile: first read (the prepare beside it) %.1f ms (the read %.1f), "
                "at %.3f s\n",
                prof_ms() - t0, t_read, prof_wall());
    rc = 0;
    pthread_mutex_lock(&p.mtx);
    if (got < 0)
        rc = set_error(err, GMTFC_ERR_READ, (int)got, 0, "read error: %s", strerror((int)-got));
    p.eof = got < 0 || (size_t)got < full;
    if (got > 0) {
        s->cs[0].state = SLOT_READY;
        p.nread = 1;
    }
    pthread_cond_broadcast(&p.cond);
    pthread_mutex_unlock(&p.mtx);
    for (unsigned i = 0; i < nenc && got > 0; i++)
        enc[i].started = pthread_create(&enc[i].th, NULL, cenc_main, &enc[i]) == 0;
    uint64_t written = 0;
    pthread_mutex_lock(&p.mtx);
    while (rc == 0 && (written < p.nread || !p.eof)) {
        struct cslot *w = &s->cs[written % p.nslots];
        if (w->state == SLOT_DONE) { /* the oldest batch coded: out in order */
            pthread_mutex_unlock(&p.mtx);
            if (w->rc < 0) {
                rc = set_error(err, GMTFC_ERR_CODEC, w->rc, t->in_bytes, "encoding failed: %s",
                               gmtf_strerror(w->rc));
            } else {
                size_t n = (size_t)w->off2[w->count];
                for (size_t i = 0; i < w->count; i++)
                    crc = crc32c_combine(crc, w->bcrc[i], w->off[i + 1] - w->off[i]);
                frames_crc = gmtf_crc32c(frames_crc, w->out, n);
                rc = write_out(out_fd, w->out, n, t, err);
                t->in_bytes += (uint64_t)w->got;
                t->frames += w->count;
                report_progress(s, t);
            }
            pthread_mutex_lock(&p.mtx);
            w->state = SLOT_FREE;
            written++;
            continue;
        }
        struct cslot *r = &s->cs[p.nread % p.nslots];
        if (!p.eof && r->state == SLOT_FREE) { /* the next batch read meanwhile */
            pthread_mutex_unlock(&p.mtx);
            got = read_batch(&p, in_fd, full, bs);
            pthread_mutex_lock(&p.mtx);
            if (got < 0) {
                rc = set_error(err, GMTFC_ERR_READ, (int)got, t->in_bytes, "read error: %s",
                               strerror((int)-got));
                break;
            }
            p.eof = (size_t)got < full;
            if (got > 0) {
                r->state = SLOT_READY;
                p.nread++;
            }
            pthread_cond_broadcast(&p.cond);
            continue;
        }
        if (!enc[0].started && p.next_enc < p.nread) { /* no encoder thread: code here */
            struct cslot *sl = &s->cs[p.next_enc++ % p.nslots];
            pthread_mutex_unlock(&p.mtx);
            sl->rc = gmtf_batch_encode_crc(s->codec, sl->in, sl->off, sl->count, sl->out,
                                           sl->out_cap, sl->off2, sl->bcrc);
            pthread_mutex_lock(&p.mtx);
            sl->state = SLOT_DONE;
            continue;
        }
        pthread_cond_wait(&p.cond, &p.mtx);
    }
    p.stop = 1;
    pthread_cond_broadcast(&p.cond);
    pthread_mutex_unlock(&p.mtx);
    for (unsigned i = 0; i < 2; i++)
        if (enc[i].started)
            pthread_join(enc[i].th, NULL);
    if (ahead) /* waits for a batch started ahead (an error stopped the stream) */
        gmtf_codec_set_next(s->codec, NULL, NULL);
    for (unsigned i = 0; i < p.nslots; i++)
        s->cs[i].state = SLOT_FREE;
    pthread_cond_destroy(&p.cond);
    pthread_mutex_destroy(&p.mtx);
    if (rc < 0)
        return rc;
    make_trailer(hdr, t->in_bytes, t->frames, crc, frames_crc);
    t->streams = 1;
    if (prof_on())
        fprintf(stderr, "gmtfc profile: end at %.3f s\n", prof_wall());
    return write_out(out_fd, hdr, GMTFC_TRAILER_LEN, t, err);
}

/* ---- decompression ------------------------------------------------------- */

/* The compressed input: buf[pos..len) is unparsed, buf[0] sits at file
 * offset base. */
typedef struct reader {
    int fd;
    size_t pos, len;
    uint64_t base;
    int eof;
} reader;

static size_t avail(const reader *r)
{
    return r->len - r->pos;
}

static uint64_t offset_of(const reader *r)
{
    return r->base + r->pos;
}

/* Moves the unparsed bytes to the front of the buffer and reads until it is
 * full or the input ends. Only called when no parsed frame still points
 * into the buffer. */
static int refill(gmtfc_stream *s, reader *r, gmtfc_error *err)
{
    if (r->pos > 0) {
        memmove(s->in, s->in + r->pos, avail(r));
        r->base += r->pos;
        r->len -= r->pos;
        r->pos = 0;
    }
    if (r->eof || r->len == s->in_cap)
        return 0;
    long got = read_full(r->fd, s->in + r->len, s->in_cap - r->len);
    if (got < 0)
        return set_error(err, GMTFC_ERR_READ, (int)got, r->base + r->len, "read error: %s",
                         strerror((int)-got));
    r->len += (size_t)got;
    if (r->len < s->in_cap)
        r->eof = 1;
    return 0;
}

/* Sizes the buffers for a stream of block size bs: the input buffer holds
 * a whole batch of maximal frames plus one more frame and a trailer, so
 * after one refill every frame of the batch is entirely in memory. */
static int decompress_buffers(gmtfc_stream *s, uint32_t bs, size_t batch, size_t keep)
{
    size_t fb = gmtf_frame_bound(bs);
    size_t in_need = (batch + 1) * fb + GMTFC_TRAILER_LEN + GMTFC_HEADER_LEN;
    /* (in 2 MiB pages, as the slots: the first batch read into fresh
     * 4 KiB pages took 102 ms on the H100 host, the later ones 6-19) */
    if (grow_big_keep(&s->in, &s->in_cap, in_need, keep) < 0 ||
        grow_big(&s->out, &s->out_cap, batch * (size_t)bs) < 0 || ensure_offsets(s, batch) < 0)
        return -ENOMEM;
    return 0;
}

/* Parses a stream header at the reader position; returns the block size. */
static int parse_header(reader *r, const uint8_t *h, uint32_t *bs, gmtfc_error *err)
{
    uint64_t at = offset_of(r);
    if (memcmp(h, GMTFC_MAGIC, GMTFC_MARKER_LEN) != 0)
        return corrupt(err, at, 0, "not a gmtfc stream (bad magic)");
    if (load_le32(h + 12) != gmtf_crc32c(0, h, 12))
        return corrupt(err, at, GMTF_E_CHECKSUM, "stream header checksum mismatch");
    if (h[4] != GMTFC_VERSION)
        return corrupt(err, at, GMTF_E_VERSION, "unsupported stream version");
    if (h[5] != 0 || h[6] != 0 || h[7] != 0)
        return corrupt(err, at, GMTF_E_VERSION, "unknown stream flags");
    *bs = load_le32(h + 8);
    if (*bs < GMTF_BLOCK_MIN || *bs > GMTF_BLOCK_MAX)
        return corrupt(err, at, 0, "block size out of range in stream header");
    return 0;
}

typedef struct stream_state {
    uint32_t bs;
    uint64_t frames;
    uint64_t total;
    uint32_t crc;        /* of the decoded content */
    uint32_t frames_crc; /* of the frame bytes as read */
} stream_state;

/* Gathers up to `batch` frames at the reader position into s->off (frame
 * offsets relative to the batch start) and s->off2 (output offsets).
 * Sets *at_end when the end marker follows. Returns the frame count. */
static long gather_frames(gmtfc_stream *s, reader *r, const stream_state *st, size_t batch,
                          int *at_end, gmtfc_error *err)
{
    const size_t fb = gmtf_frame_bound(st->bs);
    const size_t start = r->pos;
    size_t count = 0;
    s->off[0] = s->off2[0] = 0;
    *at_end = 0;
    while (count < batch) {
        const uint8_t *p = s->in + r->pos;
        gmtf_frame_info fi;
        if (avail(r) < GMTFC_MARKER_LEN)
            return truncated(err, offset_of(r), "expected a frame or the stream trailer");
        if (memcmp(p, GMTFC_END_MARKER, GMTFC_MARKER_LEN) == 0) {
            *at_end = 1;
            break;
        }
        int rc = gmtf_frame_info_get(p, avail(r), &fi);
        if (rc == GMTF_E_TRUNCATED && r->eof)
            return truncated(err, offset_of(r), "inside a frame");
        if (rc < 0)
            return corrupt(err, offset_of(r), rc, gmtf_strerror(rc));
        if (fi.orig_len < 1 || fi.orig_len > st->bs || fi.frame_len > fb || fi.frame_len > avail(r))
            return corrupt(err, offset_of(r), 0, "frame length out of range for the stream");
        r->pos += fi.frame_len;
        s->dcrc[count] = fi.data_crc;
        count++;
        s->off[count] = r->pos - start;
        s->off2[count] = s->off2[count - 1] + fi.orig_len;
    }
    return (long)count;
}

static int decode_batch(gmtfc_stream *s, reader *r, size_t start, size_t count, stream_state *st,
                        int out_fd, gmtfc_totals *t, gmtfc_error *err)
{
    double t0 = prof_on() ? prof_ms() : 0;
    int rc = gmtf_batch_decode(s->codec, s->in + start, s->off, count, s->out, s->off2, s->status);
    double t1 = prof_on() ? prof_ms() : 0;
    if (rc < 0) {
        size_t bad = 0;
        while (bad + 1 < count && s->status[bad] == 0)
            bad++;
        int code = s->status[bad] ? s->status[bad] : rc;
        return corrupt(err, r->base + start + s->off[bad], code, gmtf_strerror(code));
    }
    size_t n = (size_t)s->off2[count];
    st->frames_crc = gmtf_crc32c(st->frames_crc, s->in + start, (size_t)s->off[count]);
    /* the content's checksum from the blocks' (each checked against its
     * bytes by the decode), as bzip2 makes its stream's: one pass less over
     * the batch (23-27 ms of 256 MiB on the H100 host, on this thread) */
    for (size_t i = 0; i < count; i++)
        st->crc = crc32c_combine(st->crc, s->dcrc[i], s->off2[i + 1] - s->off2[i]);
    st->total += n;
    st->frames += count;
    t->frames += count;
    t->in_bytes = r->base + r->pos;
    double t2 = prof_on() ? prof_ms() : 0;
    if ((rc = write_out(out_fd, s->out, n, t, err)) < 0)
        return rc;
    if (prof_on())
        fprintf(stderr,
                "gmtfc profile: decode batch %zu frames: codec %.1f, crcs %.1f, write %.1f ms, "
                "done at %.3f s\n",
                count, t1 - t0, t2 - t1, prof_ms() - t2, prof_wall());
    report_progress(s, t);
    return 0;
}

static int check_trailer(reader *r, const uint8_t *tr, const stream_state *st, gmtfc_error *err)
{
    uint64_t at = offset_of(r);
    if (load_le32(tr + 28) != gmtf_crc32c(0, tr, 28))
        return corrupt(err, at, GMTF_E_CHECKSUM, "stream trailer checksum mismatch");
    if (load_le64(tr + 4) != st->total)
        return corrupt(err, at, 0, "stream length differs from the trailer's");
    if (load_le64(tr + 12) != st->frames)
        return corrupt(err, at, 0, "frame count differs from the trailer's");
    if (load_le32(tr + 20) != st->crc)
        return corrupt(err, at, GMTF_E_CHECKSUM, "content checksum mismatch");
    if (load_le32(tr + 24) != st->frames_crc)
        return corrupt(err, at, GMTF_E_CHECKSUM, "checksum of the frame bytes mismatch");
    return 0;
}

/* Decodes one stream whose header starts at the reader position. */
static int decompress_stream(gmtfc_stream *s, reader *r, int out_fd, gmtfc_totals *t,
                             gmtfc_error *err)
{
    stream_state st = {0};
    int rc, at_end = 0;

    if (avail(r) < GMTFC_HEADER_LEN)
        return truncated(err, offset_of(r), "inside the stream header");
    if ((rc = parse_header(r, s->in + r->pos, &st.bs, err)) < 0)
        return rc;
    r->pos += GMTFC_HEADER_LEN;
    if ((rc = ensure_codec(s, st.bs)) < 0)
        return set_error(err, GMTFC_ERR_CODEC, rc, 0, "%s", gmtf_strerror(rc));
    const size_t batch = stream_batch(s, st.bs, big_input(r->fd, 1));
    if ((rc = decompress_buffers(s, st.bs, batch, r->len)) < 0)
        return set_error(err, GMTFC_ERR_CODEC, rc, 0, "%s", gmtf_strerror(rc));
    struct prep_job pj;
    pthread_t pt;
    int prep = prep_start(s, (uint64_t)batch * st.bs, 0, &pj, &pt);
    if (prof_on())
        fprintf(stderr, "gmtfc profile: decode stream ready at %.3f s (batch %zu)\n", prof_wall(),
                batch);
    while (!at_end) {
        double t0 = prof_on() ? prof_ms() : 0;
        rc = refill(s, r, err);
        size_t start = r->pos;
        long count = rc < 0 ? 0 : gather_frames(s, r, &st, batch, &at_end, err);
        double tr = prof_on() ? prof_ms() : 0;
        if (prep) { /* before the first batch's decode, or an error's return */
            pthread_join(pt, NULL);
            prep = 0;
            if (prof_on())
                fprintf(stderr, "gmtfc profile: prepare joined after %.1f ms, at %.3f s\n",
                        prof_ms() - tr, prof_wall());
        }
        if (rc < 0)
            return rc;
        if (count < 0)
            return (int)count;
        double t1 = prof_on() ? prof_ms() : 0;
        if (count > 0 && (rc = decode_batch(s, r, start, (size_t)count, &st, out_fd, t, err)) < 0)
            return rc;
        if (prof_on())
            fprintf(stderr, "gmtfc profile: %ld frames: read %.1f decode+crc+write %.1f ms\n",
                    count, tr - t0, prof_ms() - t1);
    }
    if ((rc = refill(s, r, err)) < 0)
        return rc;
    if (avail(r) < GMTFC_TRAILER_LEN)
        return truncated(err, offset_of(r), "inside the stream trailer");
    if ((rc = check_trailer(r, s->in + r->pos, &st, err)) < 0)
        return rc;
    r->pos += GMTFC_TRAILER_LEN;
    t->streams++;
    t->in_bytes = offset_of(r);
    return 0;
}

int gmtfc_decompress(gmtfc_stream *s, int in_fd, int out_fd, gmtfc_totals *t, gmtfc_error *err)
{
    reader r = {.fd = in_fd};
    int rc;

    memset(t, 0, sizeof *t);
    memset(err, 0, sizeof *err);
    if (prof_on())
        fprintf(stderr, "gmtfc profile: decompress start at %.3f s\n", prof_wall());
    if (grow_big_keep(&s->in, &s->in_cap, 64 << 10, 0) < 0)
        return set_error(err, GMTFC_ERR_CODEC, -ENOMEM, 0, "%s", strerror(ENOMEM));
    for (;;) {
        if ((rc = refill(s, &r, err)) < 0)
            return rc;
        if (avail(&r) == 0 && r.eof) {
            if (t->streams == 0)
                return truncated(err, 0, "empty input, no stream header");
            if (prof_on())
                fprintf(stderr, "gmtfc profile: end at %.3f s\n", prof_wall());
            return 0;
        }
        /* bzip2's rule: after a stream, what does not start as one is
         * trailing garbage, ignored with a warning (zero padding, say) */
        size_t k = avail(&r) < GMTFC_MARKER_LEN ? avail(&r) : GMTFC_MARKER_LEN;
        if (t->streams > 0 && (k < GMTFC_MARKER_LEN || memcmp(s->in + r.pos, GMTFC_MAGIC, k))) {
            t->garbage = offset_of(&r);
            return 0;
        }
        if ((rc = decompress_stream(s, &r, out_fd, t, err)) < 0)
            return rc;
    }
}
