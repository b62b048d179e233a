/* Hostile images: regression tests. Each builds a real image (mkfs + the
 * workload of tests/fs/hostile/hwork.c), edits one structure with the fs's
 * own encoders and every checksum recomputed (tests/fs/hostile/himg.c), and
 * checks the outcome in a child process bounded in time and memory:
 *   - issue "Integrity" defect 5: an inode number or frame id far above what
 *     the image holds must not size any table (fsck took 36 s and 2.1 GB);
 *   - defect 6: a frame offset far past the end must be refused at load,
 *     repaired by fsck -y (its blocks become holes), and never grow the host
 *     file; a repair that cannot complete writes nothing;
 *   - the cases the mutator (test_fs_mutate) found, by seed. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs_internal.h"
#include "fs_test_util.h"
#include "hostile/hcase.h"
#include "hostile/himg.h"
#include "hostile/hwork.h"

#define CASE_SECONDS 10
#define CASE_MEMORY (1ull << 30)

static void quiet(void *arg, const char *msg)
{
    (void)arg;
    if (getenv("GMTF_HOSTILE_VERBOSE"))
        fprintf(stderr, "  | %s\n", msg);
}

static uint8_t *base_img[HWORK_VARIANTS];
static size_t base_len[HWORK_VARIANTS];
static hfacts base_oracle[HWORK_VARIANTS];

static const uint8_t *base(int v, size_t *len)
{
    if (!base_img[v])
        hwork_build(v, &base_img[v], &base_len[v], &base_oracle[v]);
    *len = base_len[v];
    return base_img[v];
}

/* ---- what each case runs (in the bounded child) ----------------------------- */

/* fsck of the image in *p; what a repair writes replaces it. */
static int check_mem(uint8_t **p, size_t *len, int repair, gmtf_fs_check_report *rep)
{
    gmtf_image *mi = himage_mem(*p, *len);
    gmtf_fs_check_options co = {.repair = repair, .verify_data = 1, .threads = 1, .log = quiet};
    int rc = gmtf_fs_check(mi, &co, rep);
    size_t n;
    const uint8_t *q = gmtf_image_mem_data(mi, &n);
    uint8_t *np = malloc(n ? n : 1);
    memcpy(np, q, n);
    free(*p);
    *p = np;
    *len = n;
    gmtf_image_close(mi);
    return rc;
}

/* GMTF_HOSTILE_DUMP=DIR: the edited images are written there (for fsck.gmtf
 * and the mount tool by hand). */
static void dump(const char *name, const uint8_t *p, size_t len)
{
    const char *dir = getenv("GMTF_HOSTILE_DUMP");
    if (!dir)
        return;
    char path[512];
    snprintf(path, sizeof path, "%s/%s.img", dir, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(p, 1, len, f);
        fclose(f);
    }
}

static gmtf_fs *mount_ro(const uint8_t *p, size_t len, int *rc)
{
    gmtf_fs_options o = {.read_only = 1, .threads = 1, .log = quiet};
    gmtf_fs *fs = NULL;
    *rc = gmtf_fs_mount(himage_mem(p, len), &o, &fs);
    return *rc ? NULL : fs;
}

/* ---- edits -------------------------------------------------------------------- */

/* Appends one record as a new journal chunk. */
static void add_journal_record(himg *h, const uint8_t *rec, uint32_t len)
{
    h->jr = realloc(h->jr, (h->njr + 1) * sizeof *h->jr);
    memset(&h->jr[h->njr], 0, sizeof *h->jr);
    assert_int_equal(hchunk_insert(&h->jr[h->njr], 0, rec, len), 0);
    h->njr++;
}

static void inode_record(wbuf *w, uint64_t ino, uint32_t mode)
{
    struct inode t = {.ino = ino, .gen = 5, .mode = mode, .nlink = 1, .parent = 0};
    rec_start(w, R_INODE);
    rec_put_inode(w, &t);
    store_le32(w->p + 4, (uint32_t)(w->len - REC_HDR));
}

/* Field i of record r as a number (width from the field table). */
static uint64_t field_get(const hrec *r, size_t i)
{
    size_t n;
    const hfield *f = hrec_fields(hrec_type(r), &n);
    long off = hrec_field_off(r, i);
    assert_true(off >= 0);
    const uint8_t *p = r->p + REC_HDR + off;
    return f[i].width == 8   ? load_le64(p)
           : f[i].width == 4 ? load_le32(p)
                             : (uint64_t)p[0] | p[1] << 8;
}

static void field_set(hrec *r, size_t i, uint64_t v)
{
    size_t n;
    const hfield *f = hrec_fields(hrec_type(r), &n);
    long off = hrec_field_off(r, i);
    assert_true(off >= 0);
    uint8_t *p = r->p + REC_HDR + off;
    if (f[i].width == 8)
        store_le64(p, v);
    else if (f[i].width == 4)
        store_le32(p, (uint32_t)v);
    else {
        p[0] = (uint8_t)v;
        p[1] = (uint8_t)(v >> 8);
    }
}

/* The inode number of path (from a clean read-only mount of the image). */
static uint64_t ino_of(const uint8_t *img, size_t len, const char *dir1, const char *dir2,
                       const char *name)
{
    int rc;
    gmtf_fs *fs = mount_ro(img, len, &rc);
    assert_non_null(fs);
    uint64_t at = GMTF_ROOT_INO;
    const char *parts[3] = {dir1, dir2, name};
    for (int i = 0; i < 3; i++) {
        if (!parts[i])
            continue;
        gmtf_entry e;
        assert_int_equal(gmtf_fs_lookup(fs, at, parts[i], &e), 0);
        at = e.attr.st_ino;
    }
    gmtf_fs_unmount(fs);
    return at;
}

/* Every chunk of the image: the snapshot's, then the journal's. */
static hchunk *chunk_at(himg *h, size_t i)
{
    return i < h->nsnap ? &h->snap[i] : i < h->nsnap + h->njr ? &h->jr[i - h->nsnap] : NULL;
}

/* The FRAME record of the first mapped block of ino (its last EXT record
 * names the frame; the frame's last FRAME record before it defines it). */
static hrec *frame_record_of(himg *h, uint64_t ino, uint32_t *id)
{
    *id = 0;
    hchunk *c;
    for (size_t k = 0; (c = chunk_at(h, k)); k++)
        for (size_t i = 0; i < c->n; i++) {
            hrec *r = &c->v[i];
            if (hrec_type(r) == R_EXT && field_get(r, 0) == ino && field_get(r, 1) == 0)
                *id = (uint32_t)field_get(r, 2);
        }
    assert_true(*id != 0);
    hrec *found = NULL;
    for (size_t k = 0; (c = chunk_at(h, k)); k++)
        for (size_t i = 0; i < c->n; i++) {
            hrec *r = &c->v[i];
            if (hrec_type(r) == R_FRAME && field_get(r, 0) == *id)
                found = r;
        }
    if (!found)
        fail_msg("no FRAME record for frame %u", *id);
    return found;
}

/* ---- defect 5: inode numbers and frame ids far above what the image holds ---- */

struct huge_ino {
    uint8_t *img;
    size_t len;
    uint64_t ino;
};

static int run_huge_ino(void *arg)
{
    struct huge_ino *c = arg;
    gmtf_fs_check_report rep;
    /* 1: fsck -n sees the stray inode (not reachable), quickly */
    if (check_mem(&c->img, &c->len, 0, &rep) || rep.errors == 0)
        return 1;
    /* 2: a read-only mount has it */
    int rc;
    gmtf_fs *fs = mount_ro(c->img, c->len, &rc);
    if (!fs)
        return 2;
    struct stat st;
    rc = gmtf_fs_getattr(fs, c->ino, &st);
    gmtf_fs_info info;
    gmtf_fs_get_info(fs, &info);
    gmtf_fs_unmount(fs);
    if (rc || !S_ISREG(st.st_mode))
        return 3;
    /* 3: fsck -y puts it in lost+found; fsck -n is then clean */
    if (check_mem(&c->img, &c->len, 1, &rep) || rep.fixed == 0)
        return 4;
    if (check_mem(&c->img, &c->len, 0, &rep) || rep.errors)
        return 5;
    fs = mount_ro(c->img, c->len, &rc);
    if (!fs)
        return 6;
    gmtf_entry lf, e;
    char name[32];
    snprintf(name, sizeof name, "#%llu", (unsigned long long)c->ino);
    rc = gmtf_fs_lookup(fs, GMTF_ROOT_INO, "lost+found", &lf);
    if (!rc)
        rc = gmtf_fs_lookup(fs, lf.attr.st_ino, name, &e);
    gmtf_fs_unmount(fs);
    if (rc || e.attr.st_ino != c->ino)
        return 7;
    return 0;
}

/* One INODE record (100 bytes of body) with a huge number, appended to the
 * journal of an image that was cleanly unmounted. */
static void test_inode_number_huge(void **state)
{
    (void)state;
    const uint64_t inos[] = {1ull << 27, (1ull << 39) + 12345, (1ull << 40) - 1};
    for (size_t k = 0; k < sizeof inos / sizeof inos[0]; k++) {
        size_t len;
        const uint8_t *img = base(1, &len);
        himg h;
        assert_int_equal(himg_parse(&h, img, len), 0);
        wbuf w;
        inode_record(&w, inos[k], S_IFREG | 0644);
        assert_int_equal(w.len, 100); /* the record of the issue */
        add_journal_record(&h, w.p, (uint32_t)w.len);
        wb_free(&w);
        assert_int_equal(himg_build(&h), 0);
        char nm[64];
        snprintf(nm, sizeof nm, "inode-%llu", (unsigned long long)inos[k]);
        dump(nm, h.p, h.len);
        struct huge_ino c = {h.p, h.len, inos[k]};
        char why[128] = "";
        int rc = hbound_run(run_huge_ino, &c, CASE_SECONDS, CASE_MEMORY, why, sizeof why);
        if (rc)
            fail_msg("inode %llu: step %d failed %s", (unsigned long long)inos[k], rc, why);
        himg_free(&h);
    }
}

struct same_tree {
    uint8_t *img;
    size_t len;
    const hfacts *want; /* the unedited image's walk */
};

static int run_same_tree(void *arg)
{
    struct same_tree *c = arg;
    gmtf_fs_check_report rep;
    if (check_mem(&c->img, &c->len, 0, &rep))
        return 1;
    if (rep.errors)
        return 2;
    int rc;
    gmtf_fs *fs = mount_ro(c->img, c->len, &rc);
    if (!fs)
        return 3;
    hfacts got = {0};
    hwalk_stats st;
    hwalk(fs, &got, &st);
    gmtf_fs_unmount(fs);
    hfacts_sort(&got);
    int same = got.n == c->want->n && !memcmp(got.v, c->want->v, got.n * sizeof *got.v);
    hfacts_free(&got);
    return st.errors ? 4 : same ? 0 : 5;
}

/* Frame ids are the image's own numbers: one far above the others must not
 * size the frame table; the image is otherwise sound and reads as before. */
static void test_frame_id_huge(void **state)
{
    (void)state;
    const uint32_t ids[] = {1u << 27, (1u << 31) - 1, 0xfffffffeu};
    size_t len;
    const uint8_t *img = base(1, &len);
    hfacts want = {0};
    int rc;
    gmtf_fs *fs = mount_ro(img, len, &rc);
    assert_non_null(fs);
    hwalk_stats st;
    hwalk(fs, &want, &st);
    gmtf_fs_unmount(fs);
    hfacts_sort(&want);
    uint64_t f3 = ino_of(img, len, "d1", "d2", "f3.c");
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
        himg h;
        assert_int_equal(himg_parse(&h, img, len), 0);
        uint32_t old;
        hrec *fr = frame_record_of(&h, f3, &old);
        field_set(fr, 0, ids[k]);
        hchunk *ch;
        for (size_t c = 0; (ch = chunk_at(&h, c)); c++)
            for (size_t i = 0; i < ch->n; i++) {
                hrec *r = &ch->v[i];
                if (hrec_type(r) == R_EXT && field_get(r, 2) == old)
                    field_set(r, 2, ids[k]);
            }
        assert_int_equal(himg_build(&h), 0);
        char nm[64];
        snprintf(nm, sizeof nm, "frame-id-%u", ids[k]);
        dump(nm, h.p, h.len);
        struct same_tree c = {h.p, h.len, &want};
        char why[128] = "";
        rc = hbound_run(run_same_tree, &c, CASE_SECONDS, CASE_MEMORY, why, sizeof why);
        if (rc)
            fail_msg("frame id %u: step %d failed %s", ids[k], rc, why);
        himg_free(&h);
    }
    hfacts_free(&want);
}

/* ---- defect 6: a frame offset far past the end ----------------------------- */

struct past_end {
    uint8_t *img;
    size_t len;
    uint64_t ino; /* the file whose first block the frame holds */
    const char *path;
};

static int read_first(gmtf_fs *fs, uint64_t ino, uint8_t *buf, size_t n)
{
    long r = gmtf_fs_read(fs, ino, buf, n, 0);
    return r < 0 ? (int)r : 0;
}

static int run_past_end(void *arg)
{
    struct past_end *c = arg;
    size_t len0 = c->len;
    uint8_t *orig = malloc(len0);
    memcpy(orig, c->img, len0);
    gmtf_fs_check_report rep;
    /* fsck -n reports it and writes nothing */
    if (check_mem(&c->img, &c->len, 0, &rep) || rep.errors == 0)
        return 1;
    if (memcmp(orig, c->img, c->len))
        return 2;
    /* a read-only mount: that block is an error, never other bytes */
    int rc;
    gmtf_fs *fs = mount_ro(c->img, c->len, &rc);
    if (!fs)
        return 3;
    uint8_t buf[4096];
    rc = read_first(fs, c->ino, buf, sizeof buf);
    gmtf_fs_unmount(fs);
    if (rc != -EIO)
        return 4;
    /* fsck -y: the block becomes a hole (data lost, noted); then clean. A
     * repair that does not complete leaves the image as it was. */
    rc = check_mem(&c->img, &c->len, 1, &rep);
    if (rc || rep.unrepairable || rep.fixed != rep.errors) {
        if (c->len != len0 || memcmp(orig, c->img, len0))
            return 9;
        return 5;
    }
    if (rep.errors == 0)
        return 5;
    if (check_mem(&c->img, &c->len, 0, &rep) || rep.errors)
        return 6;
    fs = mount_ro(c->img, c->len, &rc);
    if (!fs)
        return 7;
    memset(buf, 1, sizeof buf);
    rc = read_first(fs, c->ino, buf, sizeof buf);
    gmtf_fs_unmount(fs);
    for (size_t i = 0; i < sizeof buf && !rc; i++)
        if (buf[i])
            rc = 1;
    free(orig);
    return rc ? 8 : 0;
}

/* On a file: a read-write mount and fsck -y never grow the host file to
 * where the frame claims to be (a mount's journal copies take 16 MiB). */
static int run_past_end_file(void *arg)
{
    struct past_end *c = arg;
    int fd = open(c->path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, c->img, c->len) != (ssize_t)c->len)
        return 20;
    close(fd);
    gmtf_image *img;
    gmtf_fs_options o = {.threads = 1, .log = quiet};
    gmtf_fs *fs;
    if (gmtf_image_open_file(c->path, 0, &img))
        return 21;
    if (gmtf_fs_mount(img, &o, &fs) == 0) {
        uint8_t buf[4096];
        int rc = read_first(fs, c->ino, buf, sizeof buf);
        gmtf_fs_unmount(fs);
        if (rc != -EIO)
            return 22;
    }
    struct stat st;
    if (stat(c->path, &st) || (uint64_t)st.st_size > c->len + (64u << 20)) {
        fprintf(stderr, "image %zu bytes, after a read-write mount %lld\n", c->len,
                (long long)st.st_size);
        return 23;
    }
    if (gmtf_image_open_file(c->path, 0, &img))
        return 24;
    gmtf_fs_check_options co = {.repair = 1, .threads = 1, .log = quiet};
    gmtf_fs_check_report rep;
    gmtf_fs_check(img, &co, &rep);
    gmtf_image_close(img);
    if (stat(c->path, &st) || (uint64_t)st.st_size > c->len + (64u << 20))
        return 25;
    return 0;
}

static void test_frame_past_end(void **state)
{
    (void)state;
    /* 8 TiB; at the end; across the end (with a capacity: just past it) */
    const uint64_t offs[] = {8ull << 40, 0, 1};
    for (int v = 0; v < HWORK_VARIANTS; v++)
        for (size_t k = 0; k < sizeof offs / sizeof offs[0]; k++) {
            size_t len;
            const uint8_t *img = base(v, &len);
            uint64_t f3 = ino_of(img, len, "d1", "d2", "f3.c");
            himg h;
            assert_int_equal(himg_parse(&h, img, len), 0);
            uint32_t id;
            hrec *fr = frame_record_of(&h, f3, &id);
            assert_int_equal(himg_build(&h), 0); /* the length it will have */
            uint64_t clen = field_get(fr, 2), off = offs[k];
            if (k == 1)
                off = h.len;
            else if (k == 2)
                off = h.len - clen / 2;
            if (v == 2 && k) /* a capacity: across it, and just past it */
                off = h.sb[h.cur].capacity - clen + (k == 1 ? clen : 1);
            field_set(fr, 1, off);
            assert_int_equal(himg_build(&h), 0);
            char nm[64];
            snprintf(nm, sizeof nm, "frame-off-v%d-%zu", v, k);
            dump(nm, h.p, h.len);
            struct past_end c = {h.p, h.len, f3, NULL};
            char why[128] = "";
            int rc = hbound_run(run_past_end, &c, CASE_SECONDS, CASE_MEMORY, why, sizeof why);
            if (rc)
                fail_msg("variant %d, frame %u at %llu: step %d failed %s", v, id,
                         (unsigned long long)off, rc, why);
            char path[] = "/tmp/gmtf-hostile-XXXXXX";
            int fd = mkstemp(path);
            assert_true(fd >= 0);
            close(fd);
            c.path = path;
            rc = hbound_run(run_past_end_file, &c, CASE_SECONDS, CASE_MEMORY, why, sizeof why);
            unlink(path);
            if (rc)
                fail_msg("variant %d, frame %u at %llu, file image: step %d failed %s", v, id,
                         (unsigned long long)off, rc, why);
            himg_free(&h);
        }
}

static hrec *record_of(himg *h, uint16_t type, uint64_t ino, hchunk **in, size_t *at);

/* ---- a repair that cannot complete writes nothing ------------------------------ */

struct no_room {
    uint8_t *img;
    size_t len;
};

static int run_no_room(void *arg)
{
    struct no_room *c = arg;
    size_t len0 = c->len;
    uint8_t *orig = malloc(len0);
    memcpy(orig, c->img, len0);
    gmtf_fs_check_report rep;
    if (check_mem(&c->img, &c->len, 0, &rep) || rep.errors == 0)
        return 1;
    unsigned errors = rep.errors;
    int rc = check_mem(&c->img, &c->len, 1, &rep);
    if (rc || !rep.unrepairable)
        return 2;
    if (c->len != len0 || memcmp(orig, c->img, len0))
        return 3; /* it wrote, then failed */
    if (check_mem(&c->img, &c->len, 0, &rep) || rep.errors != errors)
        return 4;
    free(orig);
    return 0;
}

/* A link count off by one in an image whose capacity leaves no room for the
 * repair's checkpoint (a snapshot and a journal): fsck -y reports it cannot
 * repair (unrepairable: exit 8) and the image is as it was. Before, the checkpoint wrote its snapshot,
 * then found no room for the journal. */
static void test_repair_no_room(void **state)
{
    (void)state;
    /* The images taken while mounted: no free gap inside them is as large as
     * a journal (after an unmount there may be one). */
    for (int v = 0; v < HWORK_VARIANTS; v += 2) {
        size_t len;
        const uint8_t *img = base(v, &len);
        himg h;
        assert_int_equal(himg_parse(&h, img, len), 0);
        hrec *r = record_of(&h, R_INODE, ino_of(img, len, NULL, NULL, "small"), NULL, NULL);
        assert_non_null(r);
        field_set(r, 5, field_get(r, 5) + 1); /* nlink */
        assert_int_equal(himg_build(&h), 0);
        h.sb[h.cur].capacity = h.len + 100;
        himg_put_sb(&h, h.cur, 1);
        struct no_room c = {h.p, h.len};
        char why[128] = "";
        int rc = hbound_run(run_no_room, &c, CASE_SECONDS, CASE_MEMORY, why, sizeof why);
        if (rc)
            fail_msg("variant %d: step %d failed %s", v, rc, why);
        himg_free(&h);
    }
}

/* ---- staged bytes: a few bytes of journal, a whole block of memory --------- */

struct staged {
    uint8_t *img;
    size_t len;
};

static int run_staged(void *arg)
{
    struct staged *c = arg;
    int rc;
    gmtf_fs *fs = mount_ro(c->img, c->len, &rc);
    if (!fs)
        return 1;
    gmtf_fs_unmount(fs);
    gmtf_fs_check_report rep;
    rc = check_mem(&c->img, &c->len, 0, &rep);
    if (rc || rep.errors == 0)
        return 2;
    return 0;
}

/* 20000 STAGE records of one byte each, at the end of as many blocks: 1.3 GB
 * of dirty blocks from 700 KB of journal. Replay stops making staged blocks
 * at the dirty cache limit (STAGE_REPLAY_MIN at least); the rest do not
 * apply, and fsck says so. */
static void test_stage_replay_bounded(void **state)
{
    (void)state;
    size_t len;
    const uint8_t *img = base(1, &len);
    uint64_t big = ino_of(img, len, NULL, NULL, "big");
    himg h;
    assert_int_equal(himg_parse(&h, img, len), 0);
    h.jr = realloc(h.jr, (h.njr + 1) * sizeof *h.jr);
    memset(&h.jr[h.njr], 0, sizeof *h.jr);
    hchunk *c = &h.jr[h.njr++];
    for (uint32_t k = 0; k < 20000; k++) {
        wbuf w;
        rec_start(&w, R_STAGE);
        wb_u64(&w, big);
        wb_u32(&w, 1000 + k);
        wb_u32(&w, (64u << 10) - 1);
        wb_u32(&w, 1);
        wb_u8(&w, 7);
        store_le32(w.p + 4, (uint32_t)(w.len - REC_HDR));
        assert_int_equal(hchunk_insert(c, c->n, w.p, (uint32_t)w.len), 0);
        wb_free(&w);
    }
    assert_int_equal(himg_build(&h), 0);
    struct staged sc = {h.p, h.len};
    char why[128] = "";
    /* 256 MiB of staged blocks are made (and paged in): more time than a case */
    int rc = hbound_run(run_staged, &sc, 3 * CASE_SECONDS, CASE_MEMORY, why, sizeof why);
    if (rc)
        fail_msg("step %d failed %s", rc, why);
    himg_free(&h);
}

/* ---- what the mutator found (test_fs_mutate) ---------------------------------
 * Each finding is kept as the edit itself (seeds name other edits once the
 * mutator or the base images change), with the seed that found it and the
 * commit of the mutator then. Each case must now pass every check of
 * hostile/hcase.c. */

/* The last record of type naming ino in its first field: (chunk, index). */
static hrec *record_of(himg *h, uint16_t type, uint64_t ino, hchunk **in, size_t *at)
{
    hrec *found = NULL;
    hchunk *c;
    for (size_t k = 0; (c = chunk_at(h, k)); k++)
        for (size_t i = 0; i < c->n; i++)
            if (hrec_type(&c->v[i]) == type && hrec_field_off(&c->v[i], 0) >= 0 &&
                field_get(&c->v[i], 0) == ino) {
                found = &c->v[i];
                if (in)
                    *in = c;
                if (at)
                    *at = i;
            }
    return found;
}

/* Seed 10 (fb75b19): a file's SIZE record removed (size 0, blocks mapped):
 * fsck -y "fixed" it with a SIZE of the same size, which unmaps nothing. */
static void edit_size_removed(himg *h, const uint8_t *img, size_t len)
{
    uint64_t f3 = ino_of(img, len, "d1", "d2", "f3.c");
    hchunk *c;
    size_t i;
    while (record_of(h, R_SIZE, f3, &c, &i))
        hchunk_remove(c, i);
}

/* Seed 1152 (fb75b19): a SIZE of 16 TiB: SEEK_DATA stepped through every
 * block of the holes (the walk hung). */
static void edit_size_huge(himg *h, const uint8_t *img, size_t len)
{
    hrec *r = record_of(h, R_SIZE, ino_of(img, len, NULL, NULL, "big"), NULL, NULL);
    assert_non_null(r);
    field_set(r, 1, (16ull << 40) + 12);
}

/* Seed 5040 (4241ec5): the journal region named past the end of the image:
 * a rw mount released it as free space, put frames there, and trimming cut
 * the image below them; fsck -n said clean. */
static void edit_journal_past_end(himg *h, const uint8_t *img, size_t len)
{
    (void)img;
    (void)len;
    h->sb[h->cur].jrnl_off = h->len; /* after the build: the superblock alone */
    himg_put_sb(h, h->cur, 1);
}

/* Seed 21158 (087de8b): the journal region made longer than the image: the
 * load kept only what is there, but the repair's checkpoint released the
 * whole claimed region, freeing its own new snapshot and journal, and
 * trimming cut the image to 8192 bytes. */
static void edit_journal_longer(himg *h, const uint8_t *img, size_t len)
{
    (void)img;
    (void)len;
    sb_info *sb = &h->sb[h->cur];
    sb->jrnl_len = h->len - sb->jrnl_off + (512u << 10);
    himg_put_sb(h, h->cur, 1);
}

/* Seed 30472 (b4f2b8b): the journal named 100 bytes before the end of a
 * cleanly unmounted image, over the tail of the last frame: fsck -y's
 * checkpoint freed the old journal's bytes, which were the frame's, and
 * trimming cut the frame. */
static void edit_journal_over_frame(himg *h, const uint8_t *img, size_t len)
{
    (void)img;
    (void)len;
    sb_info *sb = &h->sb[h->cur];
    sb->jrnl_off = h->len - 100;
    himg_put_sb(h, h->cur, 1);
}

/* Seed 5196 (4241ec5): a DADD cookie of 2^64 - 1 in the root: its next
 * cookie wrapped to 0, no entry could be added, readdir offsets restart. */
static void edit_cookie_max(himg *h, const uint8_t *img, size_t len)
{
    (void)img;
    (void)len;
    hrec *r = record_of(h, R_DADD, GMTF_ROOT_INO, NULL, NULL);
    assert_non_null(r);
    field_set(r, 2, UINT64_MAX);
}

/* fuzz_image (clang UBSan, 2026-11-24): an empty snapshot chunk: snapshot_load
 * decoded it into a NULL buffer, and the codec added an offset to NULL. */
static void edit_empty_chunk(himg *h, const uint8_t *img, size_t len)
{
    (void)img;
    (void)len;
    hchunk *t = realloc(h->snap, (h->nsnap + 1) * sizeof *t);
    assert_non_null(t);
    h->snap = t;
    memmove(h->snap + 1, h->snap, h->nsnap * sizeof *h->snap);
    memset(&h->snap[0], 0, sizeof h->snap[0]);
    h->nsnap++;
}

/* Seed 32230 (37144bb, double free): an INODE record of the root with link
 * count 0, after the root's own: the load dropped the root as an unlinked
 * file, and fsck indexed its arrays with the root's absent rank. */
static void edit_root_unlinked(himg *h, const uint8_t *img, size_t len)
{
    (void)img;
    (void)len;
    wbuf w;
    inode_record(&w, GMTF_ROOT_INO, S_IFDIR | 0755);
    store_le32(w.p + REC_HDR + 28, 0); /* nlink */
    hchunk *c = &h->snap[h->nsnap - 1];
    assert_int_equal(hchunk_insert(c, c->n, w.p, (uint32_t)w.len), 0);
    wb_free(&w);
}

/* The same record read as a regular file before the root's own record. */
static void edit_root_regular(himg *h, const uint8_t *img, size_t len)
{
    (void)img;
    (void)len;
    wbuf w;
    inode_record(&w, GMTF_ROOT_INO, S_IFREG | 0644);
    assert_int_equal(hchunk_insert(&h->snap[0], 0, w.p, (uint32_t)w.len), 0);
    wb_free(&w);
}

/* Seed 32026 (37144bb): a FRAME record's offset moved 64 bytes back, into
 * the frame before it: fsck -y did not converge. */
static void edit_frame_shifted(himg *h, const uint8_t *img, size_t len)
{
    uint32_t id;
    hrec *fr = frame_record_of(h, ino_of(img, len, "d1", "d2", "f3.c"), &id);
    field_set(fr, 1, field_get(fr, 1) - 64);
}

/* Seed 40007 (a1edacb): both superblock copies of the newest generation
 * damaged (and one of the older): the load took the older generation,
 * fsck -y "fixed" the damaged copy by a checkpoint of that older state,
 * which freed the newest one's data and cut the image below it. */
static void edit_newest_slots_damaged(himg *h, const uint8_t *img, size_t len)
{
    (void)img;
    (void)len;
    for (int i = h->cur & 1; i < (int)SB_SLOTS; i += 2)
        h->p[(size_t)i * SB_SLOT_SIZE + 1064] ^= 0x80;              /* CRC left as it was */
    h->p[(size_t)((h->cur & 1) ^ 1) * SB_SLOT_SIZE + 1064] ^= 0x80; /* the older's primary */
}

/* Seed 90199 (ASan, 2e989c4 + merge): a journal length of 1 GiB (the most a
 * superblock may say) in an image of 240 KB: replay allocated 1 GiB per copy. */
static void edit_journal_1g(himg *h, const uint8_t *img, size_t len)
{
    (void)img;
    (void)len;
    h->sb[h->cur].jrnl_len = 1u << 30;
    himg_put_sb(h, h->cur, 1);
}

/* Seed 5346 of a 10,000-case run (9e3cb10): a retired range (RETIRE record
 * of the snapshot) moved past the end of the image. fsck -y's checkpoint
 * put its new journal at the end; two checkpoints later the retired range
 * came back as free space inside it, and trimming the free end cut the
 * journal copy off: fsck -n then found it unreadable (not converged). */
static void edit_retire_past_end(himg *h, const uint8_t *img, size_t len)
{
    (void)img;
    hrec *r = NULL;
    hchunk *c;
    for (size_t k = 0; !r && (c = chunk_at(h, k)); k++)
        for (size_t i = 0; !r && i < c->n; i++)
            if (hrec_type(&c->v[i]) == R_RETIRE)
                r = &c->v[i];
    assert_non_null(r);
    field_set(r, 0, len + 4096);
}

/* Seed 234 of CI's mutator shard 1 (0e7ac15): the current slot's first
 * snapshot copy moved to the image's end (the second copy served). fsck -y
 * wrote frames at that end, then its checkpoint retired the claimed copy
 * over them (the clip used the image's size then, not at load): fsck -n
 * afterwards found retired space overlapping a frame (not converged). */
static void edit_snapshot_at_end(himg *h, const uint8_t *img, size_t len)
{
    (void)img;
    (void)len;
    h->sb[h->cur].snap_off = h->len; /* after the build: the superblock alone */
    himg_put_sb(h, h->cur, 1);
}

static const struct finding {
    int variant;
    void (*edit)(himg *h, const uint8_t *img, size_t len);
    int after_build; /* the edit is of the superblock of the built image */
    const char *what;
} findings[] = {
    {1, edit_size_removed, 0, "SIZE record removed"},
    {0, edit_size_huge, 0, "SIZE of 16 TiB"},
    {0, edit_journal_past_end, 1, "journal region past the end"},
    {2, edit_journal_past_end, 1, "journal region past the end, with a capacity"},
    {0, edit_cookie_max, 0, "DADD cookie 2^64 - 1"},
    {0, edit_journal_longer, 1, "journal region longer than the image"},
    {2, edit_journal_longer, 1, "journal region longer than the image, with a capacity"},
    {1, edit_empty_chunk, 0, "an empty snapshot chunk first"},
    {1, edit_journal_over_frame, 1, "journal over the last frame's tail"},
    {2, edit_newest_slots_damaged, 1, "both copies of the newest superblock damaged"},
    {0, edit_newest_slots_damaged, 1, "both copies of the newest superblock damaged, journal"},
    {1, edit_journal_1g, 1, "a journal of 1 GiB in a small image"},
    {0, edit_journal_1g, 1, "a journal of 1 GiB in a small image, journal image"},
    {1, edit_root_unlinked, 0, "the root with link count 0"},
    {0, edit_root_unlinked, 0, "the root with link count 0, journal image"},
    {1, edit_root_regular, 0, "the root a regular file"},
    {0, edit_root_regular, 0, "the root a regular file, journal image"},
    {1, edit_frame_shifted, 0, "a frame 64 bytes into the one before"},
    {0, edit_frame_shifted, 0, "a frame 64 bytes into the one before, journal image"},
    {0, edit_retire_past_end, 0, "a retired range past the end of the image"},
    {0, edit_snapshot_at_end, 1, "a snapshot copy at the end of the image, journal image"},
    {1, edit_snapshot_at_end, 1, "a snapshot copy at the end of the image"},
    {2, edit_snapshot_at_end, 1, "a snapshot copy at the end of the image, with a capacity"},
};

static void test_mutator_findings(void **state)
{
    (void)state;
    hcase_verbose = getenv("GMTF_HOSTILE_VERBOSE") != NULL;
    for (size_t i = 0; i < sizeof findings / sizeof findings[0]; i++) {
        const struct finding *f = &findings[i];
        size_t len;
        const uint8_t *img = base(f->variant, &len);
        himg h;
        assert_int_equal(himg_parse(&h, img, len), 0);
        if (!f->after_build)
            f->edit(&h, img, len);
        assert_int_equal(himg_build(&h), 0);
        if (f->after_build)
            f->edit(&h, img, len);
        hcase c = {h.p, h.len, 0, &base_oracle[f->variant]};
        char why[160] = "";
        int rc = hbound_run(hcase_run, &c, HCASE_SECONDS, HCASE_MEMORY, why, sizeof why);
        if (rc < HCASE_CLEAN)
            fail_msg("%s (variant %d): step %d %s", f->what, f->variant, rc, why);
        himg_free(&h);
    }
}

/* SEEK_DATA / SEEK_HOLE on a file of 16 TiB with two mapped blocks: bounded
 * by the blocks the file has, not by its size. */
static int run_seek_sparse(void *arg)
{
    (void)arg;
    rec_img *r = mkfs_rec(64u << 10, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    gmtf_entry e;
    uint8_t b[100] = {1};
    struct stat st = {.st_size = 16ll << 40};
    if (!fs || gmtf_fs_create(fs, GMTF_ROOT_INO, "s", 0644, 0, 0, 0, &e) ||
        gmtf_fs_write(fs, e.attr.st_ino, b, sizeof b, 0) != sizeof b ||
        gmtf_fs_setattr(fs, e.attr.st_ino, &st, GMTF_SET_SIZE, NULL) ||
        gmtf_fs_write(fs, e.attr.st_ino, b, sizeof b, (8ull << 40) + 5) != sizeof b)
        return 1;
    uint64_t ino = e.attr.st_ino;
    for (int flushed = 0; flushed < 2; flushed++) { /* dirty blocks, then mapped ones */
        if (gmtf_fs_lseek(fs, ino, 70000, SEEK_DATA) != (int64_t)(8ull << 40) ||
            gmtf_fs_lseek(fs, ino, 0, SEEK_HOLE) != 64 << 10 ||
            gmtf_fs_lseek(fs, ino, (8ll << 40) + 1, SEEK_HOLE) !=
                (int64_t)(8ull << 40) + (64 << 10) ||
            gmtf_fs_lseek(fs, ino, (8ll << 40) + (64 << 10), SEEK_DATA) != -ENXIO)
            return 2 + flushed;
        if (gmtf_fs_syncfs(fs))
            return 4;
    }
    gmtf_fs_release(fs, ino);
    gmtf_fs_unmount(fs);
    rec_image_free(r);
    return 0;
}

static void test_seek_sparse_huge(void **state)
{
    (void)state;
    char why[128] = "";
    int rc = hbound_run(run_seek_sparse, NULL, CASE_SECONDS, CASE_MEMORY, why, sizeof why);
    if (rc)
        fail_msg("step %d failed %s", rc, why);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]); /* one test by name (glob) */
    const struct CMUnitTest tests[] = {
        // clang-format off
        cmocka_unit_test(test_inode_number_huge),
        cmocka_unit_test(test_frame_id_huge),
        cmocka_unit_test(test_frame_past_end),
        cmocka_unit_test(test_seek_sparse_huge),
        cmocka_unit_test(test_stage_replay_bounded),
        cmocka_unit_test(test_repair_no_room),
        cmocka_unit_test(test_mutator_findings),
        // clang-format on
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    for (int v = 0; v < HWORK_VARIANTS; v++) {
        free(base_img[v]);
        hfacts_free(&base_oracle[v]);
    }
    return rc;
}
