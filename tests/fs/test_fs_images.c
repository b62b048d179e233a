/* Compatibility: every image in tests/images/ (one set per format version
 * made so far) must still mount and check clean, and show exactly the tree
 * that tests/images/MANIFEST lists: types, modes, owners, times, sizes,
 * sha256 of every file's content, hard links, symlink targets, device
 * numbers, xattrs. Each image is copied to a temporary file first (the
 * committed file is never opened for writing), then:
 *   1. fsck (gmtf_fs_check with --verify-data) finds no error;
 *   2. a read-only mount shows the manifest's tree, replays the journal
 *      only where the manifest says the image has one, and leaves the copy
 *      byte for byte as it was;
 *   3. a read-write mount shows the tree, unmounts, fsck is clean, and a
 *      second read-only mount (now of what today's writer made) shows the
 *      tree again with nothing left to replay.
 * argv[1] = the tests/images folder (meson passes it). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "gmtf_fs.h"

static const char *images_dir;

/* ---- SHA-256 (FIPS 180-4), so the test needs no crypto library ---------- */

typedef struct sha256 {
    uint32_t h[8];
    uint8_t buf[64];
    uint64_t total;
    size_t fill;
} sha256;

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void sha_block(sha256 *s, const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4], f = s->h[5],
             g = s->h[6], h = s->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 =
            h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    s->h[0] += a;
    s->h[1] += b;
    s->h[2] += c;
    s->h[3] += d;
    s->h[4] += e;
    s->h[5] += f;
    s->h[6] += g;
    s->h[7] += h;
}

static void sha_init(sha256 *s)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->total = 0;
    s->fill = 0;
}

static void sha_update(sha256 *s, const void *data, size_t n)
{
    const uint8_t *p = data;
    s->total += n;
    while (n) {
        size_t k = 64 - s->fill < n ? 64 - s->fill : n;
        memcpy(s->buf + s->fill, p, k);
        s->fill += k;
        p += k;
        n -= k;
        if (s->fill == 64) {
            sha_block(s, s->buf);
            s->fill = 0;
        }
    }
}

/* Writes 64 hex digits and a NUL into hex. */
static void sha_final(sha256 *s, char *hex)
{
    uint64_t bits = s->total * 8;
    uint8_t pad = 0x80;
    sha_update(s, &pad, 1);
    pad = 0;
    while (s->fill != 56)
        sha_update(s, &pad, 1);
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha_update(s, len, 8);
    for (int i = 0; i < 8; i++)
        sprintf(hex + 8 * i, "%08x", s->h[i]);
}

static void sha_hex(const void *p, size_t n, char *hex)
{
    sha256 s;
    sha_init(&s);
    sha_update(&s, p, n);
    sha_final(&s, hex);
}

/* ---- MANIFEST ---------------------------------------------------------------- */

typedef struct field {
    char *key, *val;
} field;

typedef struct entry {
    char *image, *path, *type;
    field *f;
    size_t nf;
    int seen;
    uint64_t ino; /* as found in the image */
} entry;

typedef struct image {
    char *name;
    field *f;
    size_t nf;
} image;

static entry *ents;
static size_t nents;
static image *imgs;
static size_t nimgs;

static const char *get(const field *f, size_t nf, const char *key)
{
    for (size_t i = 0; i < nf; i++)
        if (!strcmp(f[i].key, key))
            return f[i].val;
    return NULL;
}

static const char *eget(const entry *e, const char *key)
{
    return get(e->f, e->nf, key);
}

static void parse_fields(char *save, field **f, size_t *nf)
{
    *f = NULL;
    *nf = 0;
    for (char *t = strtok_r(NULL, " \n", &save); t; t = strtok_r(NULL, " \n", &save)) {
        char *eq = strchr(t, '=');
        assert_non_null(eq);
        *eq = 0;
        *f = realloc(*f, (*nf + 1) * sizeof **f);
        (*f)[*nf].key = strdup(t);
        (*f)[*nf].val = strdup(eq + 1);
        ++*nf;
    }
}

static void load_manifest(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/MANIFEST", images_dir);
    FILE *fp = fopen(path, "r");
    if (!fp)
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
    assert_non_null(fp);
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, fp) > 0) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char *save;
        char *kind = strtok_r(line, " \n", &save);
        if (!strcmp(kind, "image")) {
            imgs = realloc(imgs, (nimgs + 1) * sizeof *imgs);
            image *im = &imgs[nimgs++];
            im->name = strdup(strtok_r(NULL, " \n", &save));
            parse_fields(save, &im->f, &im->nf);
        } else {
            assert_string_equal(kind, "entry");
            ents = realloc(ents, (nents + 1) * sizeof *ents);
            entry *e = &ents[nents++];
            memset(e, 0, sizeof *e);
            e->image = strdup(strtok_r(NULL, " \n", &save));
            e->path = strdup(strtok_r(NULL, " \n", &save));
            e->type = strdup(strtok_r(NULL, " \n", &save));
            parse_fields(save, &e->f, &e->nf);
        }
    }
    free(line);
    fclose(fp);
}

static entry *find_entry(const char *img, const char *path)
{
    for (size_t i = 0; i < nents; i++)
        if (!strcmp(ents[i].image, img) && !strcmp(ents[i].path, path))
            return &ents[i];
    return NULL;
}

static size_t hex_decode(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = strlen(hex) / 2;
    assert_true(n <= cap);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
    return n;
}

/* ---- walking an image ------------------------------------------------------------ */

typedef struct walk {
    gmtf_fs *fs;
    const char *image;
    size_t visited;
} walk;

static const char *type_of(mode_t m)
{
    return S_ISDIR(m)    ? "dir"
           : S_ISREG(m)  ? "file"
           : S_ISLNK(m)  ? "symlink"
           : S_ISFIFO(m) ? "fifo"
           : S_ISSOCK(m) ? "socket"
           : S_ISCHR(m)  ? "chr"
           : S_ISBLK(m)  ? "blk"
                         : "?";
}

static void fail_at(const char *image, const char *path, const char *what, const char *want,
                    const char *got)
{
    fprintf(stderr, "%s %s: %s: manifest %s, image %s\n", image ? image : "?", path ? path : "?",
            what, want ? want : "?", got ? got : "?");
    fail();
}

static void expect_eq(const char *image, const char *path, const char *what, const char *want,
                      const char *got)
{
    if (!want || strcmp(want, got))
        fail_at(image, path, what, want ? want : "(none)", got);
}

static void check_file_data(walk *w, const entry *e, uint64_t ino, uint64_t size)
{
    size_t cap = 1u << 20;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    sha256 s;
    sha_init(&s);
    uint64_t off = 0;
    assert_int_equal(gmtf_fs_open(w->fs, ino, O_RDONLY), 0);
    while (off < size) {
        long n = gmtf_fs_read(w->fs, ino, buf, cap, off);
        if (n <= 0)
            fprintf(stderr, "%s %s: read at %llu: %ld\n", w->image, e->path,
                    (unsigned long long)off, n);
        assert_true(n > 0);
        sha_update(&s, buf, (size_t)n);
        off += (uint64_t)n;
    }
    assert_int_equal(gmtf_fs_read(w->fs, ino, buf, cap, off), 0); /* end of file */
    assert_int_equal(gmtf_fs_release(w->fs, ino), 0);
    free(buf);
    char hex[65];
    sha_final(&s, hex);
    expect_eq(w->image, e->path, "sha256", eget(e, "sha256"), hex);
}

static void check_xattrs(walk *w, const entry *e, uint64_t ino)
{
    char names[8192];
    long n = gmtf_fs_listxattr(w->fs, ino, names, sizeof names);
    assert_true(n >= 0);
    size_t want = 0;
    for (size_t i = 0; i < e->nf; i++)
        want += !strncmp(e->f[i].key, "xattr.", 6);
    size_t got = 0;
    for (long p = 0; p < n; p += (long)strlen(names + p) + 1) {
        got++;
        char key[300];
        snprintf(key, sizeof key, "xattr.%s", names + p);
        const char *hex = eget(e, key);
        if (!hex)
            fail_at(w->image, e->path, key, "(none)", "present");
        static uint8_t v[GMTF_FS_XATTR_SIZE_MAX], x[GMTF_FS_XATTR_SIZE_MAX];
        long vl = gmtf_fs_getxattr(w->fs, ino, names + p, v, sizeof v);
        assert_true(vl >= 0);
        size_t xl = hex_decode(hex, x, sizeof x);
        if ((size_t)vl != xl || memcmp(v, x, xl))
            fail_at(w->image, e->path, key, hex, "a different value");
    }
    if (got != want) {
        fprintf(stderr, "%s %s: %zu xattrs, manifest %zu\n", w->image, e->path, got, want);
        fail();
    }
}

static void check_entry(walk *w, const char *path, uint64_t ino)
{
    entry *e = find_entry(w->image, path);
    if (!e)
        fail_at(w->image, path, "entry", "(absent)", "present");
    assert_false(e->seen); /* each path once */
    e->seen = 1;
    e->ino = ino;
    w->visited++;
    struct stat st;
    assert_int_equal(gmtf_fs_getattr(w->fs, ino, &st), 0);
    char got[4200];
    expect_eq(w->image, path, "type", e->type, type_of(st.st_mode));
    snprintf(got, sizeof got, "%04o", (unsigned)(st.st_mode & 07777));
    expect_eq(w->image, path, "mode", eget(e, "mode"), got);
    snprintf(got, sizeof got, "%u", (unsigned)st.st_uid);
    expect_eq(w->image, path, "uid", eget(e, "uid"), got);
    snprintf(got, sizeof got, "%u", (unsigned)st.st_gid);
    expect_eq(w->image, path, "gid", eget(e, "gid"), got);
    snprintf(got, sizeof got, "%lld.%09ld", (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    expect_eq(w->image, path, "mtime", eget(e, "mtime"), got);
    if (S_ISREG(st.st_mode)) {
        snprintf(got, sizeof got, "%lld", (long long)st.st_size);
        expect_eq(w->image, path, "size", eget(e, "size"), got);
        snprintf(got, sizeof got, "%u", (unsigned)st.st_nlink);
        expect_eq(w->image, path, "nlink", eget(e, "nlink"), got);
        check_file_data(w, e, ino, (uint64_t)st.st_size);
    } else if (S_ISLNK(st.st_mode)) {
        char t[4096];
        long n = gmtf_fs_readlink(w->fs, ino, t, sizeof t);
        assert_true(n >= 0 && (size_t)n < sizeof t);
        for (long i = 0; i < n; i++) {
            got[2 * i] = "0123456789abcdef"[(unsigned char)t[i] >> 4];
            got[2 * i + 1] = "0123456789abcdef"[t[i] & 15];
        }
        got[2 * n] = 0;
        expect_eq(w->image, path, "target", eget(e, "target"), got);
    } else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
        snprintf(got, sizeof got, "%u:%u", major(st.st_rdev), minor(st.st_rdev));
        expect_eq(w->image, path, "rdev", eget(e, "rdev"), got);
    }
    check_xattrs(w, e, ino);
}

typedef struct dirlist {
    char **names;
    uint64_t *inos;
    size_t n;
} dirlist;

static int fill(void *arg, const char *name, const struct stat *st, uint64_t next_off)
{
    (void)next_off;
    dirlist *d = arg;
    if (!strcmp(name, ".") || !strcmp(name, ".."))
        return 0;
    d->names = realloc(d->names, (d->n + 1) * sizeof *d->names);
    d->inos = realloc(d->inos, (d->n + 1) * sizeof *d->inos);
    d->names[d->n] = strdup(name);
    d->inos[d->n++] = st->st_ino;
    return 0;
}

static void walk_dir(walk *w, const char *path, uint64_t ino)
{
    dirlist d = {0};
    assert_int_equal(gmtf_fs_readdir(w->fs, ino, 0, fill, &d), 0);
    for (size_t i = 0; i < d.n; i++) {
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", strcmp(path, "/") ? path : "", d.names[i]);
        gmtf_entry ent;
        assert_int_equal(gmtf_fs_lookup(w->fs, ino, d.names[i], &ent), 0);
        assert_int_equal(ent.attr.st_ino, d.inos[i]);
        check_entry(w, sub, d.inos[i]);
        if (S_ISDIR(ent.attr.st_mode))
            walk_dir(w, sub, d.inos[i]);
        free(d.names[i]);
    }
    free(d.names);
    free(d.inos);
}

/* Walks the whole tree and compares it with the manifest. */
static void compare_tree(gmtf_fs *fs, const char *image)
{
    walk w = {fs, image, 0};
    size_t want = 0;
    for (size_t i = 0; i < nents; i++)
        if (!strcmp(ents[i].image, image)) {
            ents[i].seen = 0;
            want++;
        }
    assert_true(want > 0);
    check_entry(&w, "/", GMTF_ROOT_INO);
    walk_dir(&w, "/", GMTF_ROOT_INO);
    for (size_t i = 0; i < nents; i++)
        if (!strcmp(ents[i].image, image) && !ents[i].seen)
            fail_at(image, ents[i].path, "entry", "present", "absent");
    assert_int_equal(w.visited, want);
    /* Hard links: one inode per group, distinct groups distinct inodes. */
    for (size_t i = 0; i < nents; i++)
        for (size_t j = i + 1; j < nents; j++) {
            const entry *a = &ents[i], *b = &ents[j];
            if (strcmp(a->image, image) || strcmp(b->image, image))
                continue;
            const char *ga = eget(a, "inode"), *gb = eget(b, "inode");
            int same_group = ga && gb && !strcmp(ga, gb);
            if (same_group != (a->ino == b->ino))
                fail_at(image, b->path, "hard link with", a->path,
                        same_group ? "another inode" : "the same inode");
        }
}

/* ---- per image ----------------------------------------------------------------------- */

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
    assert_non_null(f);
    size_t cap = 1 << 16, n = 0;
    uint8_t *p = malloc(cap);
    size_t r;
    while ((r = fread(p + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap)
            p = realloc(p, cap *= 2);
    }
    fclose(f);
    *len = n;
    return p;
}

static void log_line(void *arg, const char *msg)
{
    fprintf(stderr, "  [%s] %s\n", (const char *)arg, msg);
}

static void fsck_clean(const char *copy, const char *name, int expect_journal)
{
    gmtf_image *img;
    assert_int_equal(gmtf_image_open_file(copy, GMTF_IMAGE_RDONLY, &img), 0);
    gmtf_fs_check_options co = {
        .verify_data = 1, .threads = 1, .log = log_line, .log_arg = (void *)name};
    gmtf_fs_check_report rep;
    int rc = gmtf_fs_check(img, &co, &rep);
    gmtf_image_close(img);
    if (rc || rep.errors)
        fprintf(stderr, "%s: check rc %d, %u errors\n", name, rc, rep.errors);
    assert_int_equal(rc, 0);
    assert_int_equal(rep.errors, 0);
    assert_int_equal(rep.info.dirty_bytes != 0, expect_journal);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* The bytes themselves, as docs/format.md lays them out: the newest
 * superblock slot carries the manifest's version, and its journal region
 * starts with a chunk of this journal exactly when the manifest says the
 * image has records to replay. */
static void check_layout(const uint8_t *p, size_t len, const char *name, uint32_t version,
                         int journal)
{
    int nslots = version >= 2 ? 4 : 2; /* version 2: four slots (docs/format.md) */
    assert_true(len >= 4096u * (unsigned)nslots);
    int best = -1;
    for (int i = 0; i < nslots; i++) {
        const uint8_t *s = p + 4096 * i;
        if (memcmp(s, "GMTFSB\r\n", 8))
            continue;
        assert_int_equal(le32(s + 8), version);
        if (best < 0 || le64(s + 16) > le64(p + 4096 * best + 16))
            best = i;
    }
    assert_true(best >= 0);
    const uint8_t *s = p + 4096 * best;
    uint64_t joff = le64(s + 144), jlen = le64(s + 152), jid = le64(s + 160);
    int chunk = jlen >= 32 && joff <= len - 32 && le32(p + joff) == 0x4a544d47u &&
                le64(p + joff + 8) == jid;
    if (chunk != journal)
        fprintf(stderr, "%s: journal at %llu: %s\n", name, (unsigned long long)joff,
                chunk ? "holds records" : "empty");
    assert_int_equal(chunk, journal);
}

static gmtf_fs *mount_copy(const char *copy, const char *name, int ro)
{
    gmtf_image *img;
    assert_int_equal(gmtf_image_open_file(copy, ro ? GMTF_IMAGE_RDONLY : 0, &img), 0);
    gmtf_fs_options o = {.read_only = ro, .threads = 1, .log = log_line, .log_arg = (void *)name};
    gmtf_fs *fs = NULL;
    int rc = gmtf_fs_mount(img, &o, &fs);
    if (rc)
        fprintf(stderr, "%s: mount (%s): %s\n", name, ro ? "ro" : "rw", strerror(-rc));
    assert_int_equal(rc, 0);
    return fs;
}

static void check_image(const image *im)
{
    char path[4096], hex[65];
    snprintf(path, sizeof path, "%s/%s", images_dir, im->name);
    size_t len;
    uint8_t *orig = slurp(path, &len);
    /* The committed file itself must be intact, or nothing below means much. */
    sha_hex(orig, len, hex);
    expect_eq(im->name, "(file)", "image sha256", get(im->f, im->nf, "sha256"), hex);
    const char *ver = get(im->f, im->nf, "version");
    assert_non_null(ver);
    const char *jr = get(im->f, im->nf, "journal");
    int journal = jr && !strcmp(jr, "1");
    fprintf(stderr, "# %s: format version %s, %zu bytes%s\n", im->name, ver, len,
            journal ? ", journal to replay" : "");

    char copy[] = "/tmp/gmtf-image-XXXXXX";
    int fd = mkstemp(copy);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, orig, len), (ssize_t)len);
    close(fd);

    /* 1 + 2: check and read-only mount; the copy is not changed. */
    fsck_clean(copy, im->name, journal);
    check_layout(orig, len, im->name, (uint32_t)atoi(ver), journal);
    gmtf_fs *fs = mount_copy(copy, im->name, 1);
    gmtf_fs_info info;
    assert_int_equal(gmtf_fs_get_info(fs, &info), 0);
    /* The crash image's journal stages pages of an fsynced small write:
     * replayed, they wait in the write-back cache. */
    if (journal)
        assert_true(info.dirty_bytes > 0);
    else
        assert_int_equal(info.dirty_bytes, 0);
    compare_tree(fs, im->name);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    size_t len2;
    uint8_t *after = slurp(copy, &len2);
    assert_int_equal(len2, len);
    assert_memory_equal(after, orig, len);
    free(after);

    /* 3: read-write mount, unmount, check, read again. */
    fs = mount_copy(copy, im->name, 0);
    compare_tree(fs, im->name);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    fsck_clean(copy, im->name, 0);
    fs = mount_copy(copy, im->name, 1);
    assert_int_equal(gmtf_fs_get_info(fs, &info), 0);
    assert_int_equal(info.dirty_bytes, 0); /* nothing staged is left */
    compare_tree(fs, im->name);
    assert_int_equal(gmtf_fs_unmount(fs), 0);

    unlink(copy);
    free(orig);
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_sha256(void **state)
{
    (void)state;
    char hex[65];
    sha_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha_hex(m, strlen(m), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

/* The manifest lists images of version 1 (the first format) and of
 * version 2, among them one with a frame of method 2 (blocks of 1 MiB),
 * each image has a file here, and every entry belongs to a listed image. */
static void test_manifest_complete(void **state)
{
    (void)state;
    int v1 = 0, v2 = 0, large = 0;
    for (size_t i = 0; i < nimgs; i++) {
        const char *v = get(imgs[i].f, imgs[i].nf, "version");
        assert_non_null(v);
        v1 += !strcmp(v, "1");
        v2 += !strcmp(v, "2");
        large += !strcmp(imgs[i].name, "v2-large.img");
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", images_dir, imgs[i].name);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
    }
    assert_true(v1 >= 2);
    assert_true(v2 >= 3);
    assert_int_equal(large, 1);
    for (size_t i = 0; i < nents; i++) {
        int found = 0;
        for (size_t j = 0; j < nimgs; j++)
            found |= !strcmp(ents[i].image, imgs[j].name);
        assert_true(found);
    }
}

static void test_images(void **state)
{
    (void)state;
    assert_true(nimgs > 0);
    for (size_t i = 0; i < nimgs; i++)
        check_image(&imgs[i]);
}

static int group_setup(void **state)
{
    (void)state;
    load_manifest();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s IMAGES_DIR\n", argv[0]);
        return 2;
    }
    images_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_manifest_complete),
        cmocka_unit_test(test_images),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
