/* Helpers shared by the codec tests (see test_util.h). */
#include "test_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GUARD_LEN 64
#define GUARD_BYTE 0xA5

uint64_t tu_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t tu_rand_below(uint64_t *state, uint64_t n)
{
    return tu_rand(state) % n;
}

void tu_fill_random(uint8_t *buf, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t r = tu_rand(&s);
        memcpy(buf + i, &r, 8);
    }
    if (i < n) {
        uint64_t r = tu_rand(&s);
        memcpy(buf + i, &r, n - i);
    }
}

void tu_fill_text_like(uint8_t *buf, size_t n, uint64_t seed)
{
    static const char words[][8] = {"the ", "codec ", "block ", "frame ", "rank ",    "move ",
                                    "to ",  "front ", "\n",     "of ",    "wheeler ", "data "};
    uint64_t s = seed;
    size_t i = 0;
    while (i < n) {
        const char *w = words[tu_rand_below(&s, sizeof words / sizeof words[0])];
        size_t wl = strlen(w);
        if (tu_rand_below(&s, 16) == 0) {
            /* occasional noise keeps the alphabet wide */
            buf[i++] = (uint8_t)tu_rand(&s);
            continue;
        }
        for (size_t k = 0; k < wl && i < n; k++)
            buf[i++] = (uint8_t)w[k];
    }
}

void *tu_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory allocating %zu bytes\n", n);
        abort();
    }
    return p;
}

void *tu_calloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory allocating %zu bytes\n", n);
        abort();
    }
    return p;
}

int tu_read_file(const char *path, size_t max, uint8_t **data, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    size_t want = (size_t)st.st_size < max ? (size_t)st.st_size : max;
    uint8_t *buf = tu_malloc(want);
    size_t got = 0;
    while (got < want) {
        ssize_t r = read(fd, buf + got, want - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    *data = buf;
    *len = got;
    return 0;
}

/* ---- file lists -------------------------------------------------------- */

typedef struct path_list {
    char **v;
    size_t count, cap;
} path_list;

static void path_list_add(path_list *l, const char *p)
{
    if (l->count == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        if (!l->v)
            abort();
    }
    l->v[l->count++] = strdup(p);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Regular files under dir, to depth levels, names matching suffix (or any
 * when suffix is NULL). Order is fixed by the final sort. */
static void list_files(path_list *l, const char *dir, int depth, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "SHA256SUMS") == 0)
            continue;
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
            continue;
        struct stat st;
        if (lstat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            if (depth > 0)
                list_files(l, path, depth - 1, suffix);
        } else if (S_ISREG(st.st_mode) && st.st_size > 0) {
            size_t nl = strlen(e->d_name), sl = suffix ? strlen(suffix) : 0;
            if (!suffix || (nl > sl && strcmp(e->d_name + nl - sl, suffix) == 0))
                path_list_add(l, path);
        }
    }
    closedir(d);
}

static void files_add(tu_files *f, const char *path, size_t max_len)
{
    uint8_t *data;
    size_t len;
    if (tu_read_file(path, max_len, &data, &len) != 0)
        return;
    f->v = realloc(f->v, (f->count + 1) * sizeof *f->v);
    if (!f->v)
        abort();
    f->v[f->count].name = strdup(path);
    f->v[f->count].data = data;
    f->v[f->count].len = len;
    f->count++;
}

static void path_list_free(path_list *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->v[i]);
    free(l->v);
}

tu_files tu_corpus_files(void)
{
    tu_files f = {0};
    const char *dir = getenv("GMTF_CORPUS");
    struct stat st;
    if (!dir || !*dir) {
        printf("# GMTF_CORPUS unset: corpus cases skipped\n");
        return f;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        printf("# corpus %s absent: corpus cases skipped\n", dir);
        return f;
    }
    path_list l = {0};
    list_files(&l, dir, 4, NULL);
    qsort(l.v, l.count, sizeof *l.v, cmp_str);
    for (size_t i = 0; i < l.count; i++)
        files_add(&f, l.v[i], (size_t)64 << 20);
    path_list_free(&l);
    if (f.count == 0)
        printf("# corpus %s holds no files: corpus cases skipped\n", dir);
    return f;
}

/* Takes up to want files spread evenly over a sorted list. */
static void take_spread(tu_files *f, path_list *l, size_t want, size_t max_len)
{
    if (l->count == 0 || want == 0)
        return;
    qsort(l->v, l->count, sizeof *l->v, cmp_str);
    size_t step = l->count / want ? l->count / want : 1;
    for (size_t i = 0; i < l->count && want > 0; i += step, want--)
        files_add(f, l->v[i], max_len);
}

tu_files tu_system_files(size_t max_files, size_t max_len)
{
    tu_files f = {0};
    /* Roughly: a third licences (prose), a third headers (code), a third
     * binaries (machine code, tables). */
    size_t per = max_files / 3 ? max_files / 3 : 1;
    const struct {
        const char *dir;
        int depth;
        const char *suffix;
    } src[] = {
        {"/usr/share/common-licenses", 1, NULL},
        {"/usr/include", 2, ".h"},
        {"/usr/bin", 0, NULL},
    };
    for (size_t s = 0; s < sizeof src / sizeof src[0]; s++) {
        path_list l = {0};
        list_files(&l, src[s].dir, src[s].depth, src[s].suffix);
        size_t want = s + 1 == sizeof src / sizeof src[0] ? max_files - f.count : per;
        if (want > max_files - f.count)
            want = max_files - f.count;
        take_spread(&f, &l, want, max_len);
        path_list_free(&l);
    }
    return f;
}

uint8_t *tu_concat(const tu_files *files, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < files->count; i++)
        total += files->v[i].len;
    if (total == 0)
        return NULL;
    uint8_t *buf = tu_malloc(n);
    size_t pos = 0;
    while (pos < n) {
        for (size_t i = 0; i < files->count && pos < n; i++) {
            size_t k = files->v[i].len < n - pos ? files->v[i].len : n - pos;
            memcpy(buf + pos, files->v[i].data, k);
            pos += k;
        }
    }
    return buf;
}

void tu_files_free(tu_files *f)
{
    for (size_t i = 0; i < f->count; i++) {
        free(f->v[i].name);
        free(f->v[i].data);
    }
    free(f->v);
    f->v = NULL;
    f->count = 0;
}

long tu_env_long(const char *name, long def)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 0);
    if (errno || *end)
        return def;
    return v;
}

tu_guarded tu_guarded_alloc(size_t cap)
{
    tu_guarded g = {tu_malloc(cap + GUARD_LEN), cap, cap};
    memset(g.buf + cap, GUARD_BYTE, GUARD_LEN);
    return g;
}

void tu_guard_set(tu_guarded *g, size_t cap)
{
    if (cap > g->alloc)
        abort();
    g->cap = cap;
    memset(g->buf + cap, GUARD_BYTE, GUARD_LEN);
}

int tu_guard_ok(const tu_guarded *g)
{
    for (size_t i = 0; i < GUARD_LEN; i++)
        if (g->buf[g->cap + i] != GUARD_BYTE)
            return 0;
    return 1;
}

void tu_guarded_free(tu_guarded *g)
{
    free(g->buf);
    g->buf = NULL;
}

uint32_t tu_crc32c_ref(uint32_t crc, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* ---- frame headers ----------------------------------------------------- */

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16),
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

unsigned tu_v2_sample_count(uint32_t n)
{
    uint32_t step = n > (256u << 10) ? 32768 : 16384;
    uint32_t k = (n + step - 1) / step;
    return k ? k : 1;
}

size_t tu_write_header(uint8_t *dst, const tu_header *h)
{
    put32(dst, TU_FRAME_MAGIC);
    dst[4] = h->version;
    dst[5] = h->method;
    dst[6] = h->version == 2 ? h->byte6 : (uint8_t)h->nidx;
    dst[7] = h->flags;
    put32(dst + 8, h->orig_len);
    put32(dst + 12, h->payload_len);
    put32(dst + 16, h->data_crc);
    if (h->version == 2) {
        put32(dst + 20, tu_crc32c_ref(0, dst, 20));
        if (h->nidx == 0)
            return 24;
        for (unsigned i = 0; i < h->nidx; i++) {
            uint32_t v = h->idx[i] - 1;
            dst[24 + 3 * i] = (uint8_t)v;
            dst[25 + 3 * i] = (uint8_t)(v >> 8);
            dst[26 + 3 * i] = (uint8_t)(v >> 16);
        }
        size_t hl = 24 + 3 * (size_t)h->nidx;
        put32(dst + hl, h->payload_crc);
        put32(dst + hl + 4, tu_crc32c_ref(0, dst, hl + 4));
        return hl + 8;
    }
    for (unsigned i = 0; i < h->nidx; i++)
        put32(dst + 20 + 4 * i, h->idx[i]);
    size_t hl = 20 + 4 * (size_t)h->nidx;
    put32(dst + hl, tu_crc32c_ref(0, dst, hl));
    return hl + 4;
}

size_t tu_read_header(const uint8_t *src, size_t len, tu_header *h)
{
    if (len < 24)
        return 0;
    memset(h, 0, sizeof *h);
    h->version = src[4];
    h->method = src[5];
    h->flags = src[7];
    h->orig_len = get32(src + 8);
    h->payload_len = get32(src + 12);
    h->data_crc = get32(src + 16);
    if (h->version == 2) {
        h->byte6 = src[6];
        if (h->method != 2 || h->orig_len == 0 || h->orig_len > (16u << 20))
            return 24;
        h->nidx = tu_v2_sample_count(h->orig_len);
        size_t hl = 32 + 3 * (size_t)h->nidx;
        if (len < hl)
            return 0;
        for (unsigned i = 0; i < h->nidx; i++)
            h->idx[i] = ((uint32_t)src[24 + 3 * i] | (uint32_t)src[25 + 3 * i] << 8 |
                         (uint32_t)src[26 + 3 * i] << 16) +
                        1;
        h->payload_crc = get32(src + hl - 8);
        return hl;
    }
    h->nidx = src[6];
    size_t hl = 20 + 4 * (size_t)src[6];
    if (len < hl + 4)
        return 0;
    for (unsigned i = 0; i < h->nidx; i++)
        h->idx[i] = get32(src + 20 + 4 * i);
    return hl + 4;
}

void tu_fix_header_crc(uint8_t *frame)
{
    if (frame[4] == 2) {
        put32(frame + 20, tu_crc32c_ref(0, frame, 20));
        uint32_t n = get32(frame + 8);
        if (frame[5] == 2 && n >= 1 && n <= (16u << 20)) {
            size_t hl = 28 + 3 * (size_t)tu_v2_sample_count(n);
            put32(frame + hl, tu_crc32c_ref(0, frame, hl));
        }
        return;
    }
    size_t hl = 20 + 4 * (size_t)frame[6];
    put32(frame + hl, tu_crc32c_ref(0, frame, hl));
}

int tu_fix_payload_crc(uint8_t *frame, size_t len)
{
    if (len < 24 || frame[4] != 2 || frame[5] != 2)
        return 0;
    uint32_t n = get32(frame + 8), plen = get32(frame + 12);
    if (n < 1 || n > (16u << 20))
        return 0;
    size_t hl = 32 + 3 * (size_t)tu_v2_sample_count(n);
    if (len < hl || plen > len - hl)
        return 0;
    put32(frame + hl - 8, tu_crc32c_ref(0, frame + hl, plen));
    tu_fix_header_crc(frame);
    return 1;
}

unsigned tu_scale(void)
{
    long v = tu_env_long("GMTF_TEST_SCALE", 1);
    return v >= 1 && v <= 1000 ? (unsigned)v : 1;
}
