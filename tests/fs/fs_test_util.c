#include "fs_test_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int r_pread(void *ctx, void *buf, size_t n, uint64_t off)
{
    rec_img *r = ctx;
    return r->inner->ops->pread(r->inner->ctx, buf, n, off);
}

static void r_log(rec_img *r, uint64_t off, const void *buf, size_t n, int punch)
{
    if (!r->recording)
        return;
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 1024;
        r->log = realloc(r->log, r->cap * sizeof *r->log);
    }
    uint8_t *d = NULL;
    if (buf) {
        d = malloc(n ? n : 1);
        memcpy(d, buf, n);
    }
    r->log[r->n++] = (rec_write){off, n, d, punch};
}

static int r_pwrite(void *ctx, const void *buf, size_t n, uint64_t off)
{
    rec_img *r = ctx;
    if (r->fail_after == 0) {
        if (r->short_write && n > 1) {
            r->inner->ops->pwrite(r->inner->ctx, buf, n / 2, off);
            r_log(r, off, buf, n / 2, 0);
        }
        return r->fail_err;
    }
    if (r->fail_after > 0)
        r->fail_after--;
    int rc = r->inner->ops->pwrite(r->inner->ctx, buf, n, off);
    if (!rc)
        r_log(r, off, buf, n, 0);
    return rc;
}

static int r_flush(void *ctx)
{
    rec_img *r = ctx;
    r_log(r, 0, NULL, 0, 0);
    return 0;
}

static int r_size(void *ctx, uint64_t *size)
{
    rec_img *r = ctx;
    return r->inner->ops->size(r->inner->ctx, size);
}

static int r_truncate(void *ctx, uint64_t size)
{
    rec_img *r = ctx;
    /* Logged as a zero-length write at the new size (replayed as a resize). */
    if (r->recording) {
        r_log(r, size, "", 0, 0);
    }
    return r->inner->ops->truncate(r->inner->ctx, size);
}

static int r_punch(void *ctx, uint64_t off, uint64_t len)
{
    rec_img *r = ctx;
    /* Logged as a write of zeros: what the range reads as afterwards, so
     * rebuilt crash states see punched space exactly as a host would. */
    if (r->recording) {
        uint8_t *z = calloc(1, len ? len : 1);
        if (!z)
            return -ENOMEM;
        r_log(r, off, z, len, 1);
        free(z);
        r->punches++;
    }
    return r->inner->ops->punch(r->inner->ctx, off, len);
}

static int r_reserve(void *ctx, uint64_t off, uint64_t len)
{
    rec_img *r = ctx;
    uint64_t size = 0;
    r->inner->ops->size(r->inner->ctx, &size);
    if (r->recording && off + len > size) /* grows the image: logged as a resize */
        r_log(r, off + len, "", 0, 0);
    return r->inner->ops->reserve(r->inner->ctx, off, len);
}

static void r_close(void *ctx)
{
    (void)ctx; /* the test owns the disk: it outlives every mount */
}

static const gmtf_image_ops rec_ops = {.pread = r_pread,
                                       .pwrite = r_pwrite,
                                       .flush = r_flush,
                                       .size = r_size,
                                       .truncate = r_truncate,
                                       .close = r_close,
                                       .punch = r_punch,
                                       .reserve = r_reserve};

rec_img *rec_image_new(const uint8_t *data, size_t len)
{
    rec_img *r = calloc(1, sizeof *r);
    gmtf_image_open_mem(data, len, &r->inner);
    r->fail_after = -1;
    return r;
}

gmtf_image *rec_image_attach(rec_img *r)
{
    gmtf_image *img = calloc(1, sizeof *img);
    img->ops = &rec_ops;
    img->ctx = r;
    return img;
}

void rec_image_free(rec_img *r)
{
    gmtf_image_close(r->inner);
    rec_image_clear_log(r);
    free(r->log);
    free(r);
}

const uint8_t *rec_image_data(rec_img *r, size_t *len)
{
    return gmtf_image_mem_data(r->inner, len);
}

gmtf_fs *mount_rec(rec_img *r, int ro)
{
    gmtf_fs_options o = {.read_only = ro, .threads = 1, .journal_bytes = 1u << 20};
    gmtf_fs *fs;
    int rc = gmtf_fs_mount(rec_image_attach(r), &o, &fs);
    return rc ? NULL : fs;
}

rec_img *mkfs_rec(uint32_t bs, uint64_t capacity)
{
    rec_img *r = rec_image_new(NULL, 0);
    gmtf_image *img = rec_image_attach(r);
    gmtf_mkfs_options mo = {.block_size = bs, .label = "test", .capacity = capacity};
    int rc = gmtf_fs_mkfs(img, &mo);
    gmtf_image_close(img);
    if (rc) {
        rec_image_free(r);
        return NULL;
    }
    return r;
}

void rec_image_clear_log(rec_img *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->log[i].data);
    r->n = 0;
}

uint8_t *rec_image_state(const uint8_t *base, size_t base_len, const rec_img *r, size_t k,
                         size_t *len)
{
    size_t cap = base_len;
    for (size_t i = 0; i < k; i++)
        if (r->log[i].data && r->log[i].off + r->log[i].len > cap)
            cap = r->log[i].off + r->log[i].len;
    uint8_t *p = calloc(1, cap ? cap : 1);
    memcpy(p, base, base_len);
    size_t l = base_len;
    for (size_t i = 0; i < k; i++) {
        const rec_write *w = &r->log[i];
        if (!w->data)
            continue;
        if (w->len == 0) { /* truncate */
            if (w->off < l)
                l = w->off;
            else {
                memset(p + l, 0, w->off - l);
                l = w->off;
            }
            continue;
        }
        if (w->off > l)
            memset(p + l, 0, w->off - l);
        memcpy(p + w->off, w->data, w->len);
        if (w->off + w->len > l)
            l = w->off + w->len;
    }
    *len = l;
    return p;
}

gmtf_fs *mount_mem(const uint8_t *data, size_t len, int ro)
{
    gmtf_image *img;
    if (gmtf_image_open_mem(data, len, &img))
        return NULL;
    gmtf_fs_options o = {.read_only = ro, .threads = 1, .journal_bytes = 1u << 20};
    gmtf_fs *fs;
    if (gmtf_fs_mount(img, &o, &fs))
        return NULL;
    return fs;
}

void fill_pattern(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        /* compressible but not trivial: a small alphabet with runs */
        p[i] = (uint8_t)("abcdefgh \n"[x % 10]);
    }
}

void fill_noise(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)(x >> 24);
    }
}

void fill_words(uint8_t *p, size_t n, uint32_t seed)
{
    static const char *const w[16] = {"frame", "block", "chain", "sample", "range",  "pack",
                                      "tail",  "inode", "entry", "extent", "record", "crc",
                                      "the",   "of",    "and",   "image"};
    uint32_t x = seed * 2654435761u + 1;
    size_t k = 0;
    while (k < n) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        /* mostly a few common words, now and then a number or a line end */
        const char *s = w[(x >> 4) % 16 < 10 ? (x >> 4) % 16 : 12 + (x >> 8) % 4];
        char num[12];
        if (x % 23 == 0) {
            snprintf(num, sizeof num, "%u", (x >> 12) % 1000);
            s = num;
        }
        for (; *s && k < n; s++)
            p[k++] = (uint8_t)*s;
        if (k < n)
            p[k++] = x % 11 == 0 ? '\n' : ' ';
    }
}

unsigned test_scale(void)
{
    const char *s = getenv("GMTF_TEST_SCALE");
    long v = s ? strtol(s, NULL, 10) : 1;
    return v >= 1 && v <= 1000 ? (unsigned)v : 1;
}
