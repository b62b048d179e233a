/* Crash safety: every write to the image is recorded; the image is then
 * rebuilt as a crash would leave it (a prefix of the writes, plus any
 * subset of the writes since the last flush), mounted, checked with fsck,
 * and every byte acknowledged by fsync or syncfs must be there. Faults
 * (EIO, ENOSPC, short writes) are injected the same way. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fs_test_util.h"

#define ROOT GMTF_ROOT_INO
#define BS (64u << 10)
#define NFILES 12
#define DBSZ (200u * 1024)

typedef struct ack {
    size_t logpos;  /* writes recorded when the sync returned */
    int file;       /* file made durable, -1 = db records, -2 = everything */
    int db_records; /* db records durable */
    int created;    /* files created before the sync */
} ack;

typedef struct workload {
    uint8_t *data[NFILES];
    size_t len[NFILES];
    int unlinked[NFILES];
    ack acks[256];
    int nacks;
    uint8_t db[DBSZ];
    int dbrec;
} workload;

static void name_of(int i, char *b)
{
    snprintf(b, 16, "f%02d.txt", i);
}

static void quiet(void *arg, const char *msg)
{
    (void)arg;
    if (getenv("GMTF_DEBUG"))
        fprintf(stderr, "log: %s\n", msg);
}

static gmtf_fs *mount_opts(rec_img *r, int ro)
{
    gmtf_fs_options o = {.read_only = ro,
                         .threads = 1,
                         .journal_bytes = 16u << 10,
                         .dirty_bytes = 256u << 10,
                         .log = quiet};
    gmtf_fs *fs;
    return gmtf_fs_mount(rec_image_attach(r), &o, &fs) ? NULL : fs;
}

static void run_workload(rec_img *r, workload *w)
{
    gmtf_fs *fs = mount_opts(r, 0);
    assert_non_null(fs);
    gmtf_entry e;
    assert_int_equal(gmtf_fs_create(fs, ROOT, "db", 0644, 0, 0, 0, &e), 0);
    uint64_t db = e.attr.st_ino;
    for (int i = 0; i < NFILES; i++) {
        char nm[16];
        name_of(i, nm);
        w->len[i] = (size_t)(i * 37 % 5) * 30000 + (size_t)i * 997 + 1;
        w->data[i] = malloc(w->len[i]);
        fill_words(w->data[i], w->len[i], (uint32_t)i + 100);
        assert_int_equal(gmtf_fs_create(fs, ROOT, nm, 0644, 0, 0, 0, &e), 0);
        assert_int_equal(gmtf_fs_write(fs, e.attr.st_ino, w->data[i], w->len[i], 0),
                         (long)w->len[i]);
        if (i % 3 == 0) {
            assert_int_equal(gmtf_fs_fsync(fs, e.attr.st_ino, 0), 0);
            w->acks[w->nacks++] = (ack){r->n, i, w->dbrec, i + 1};
        }
        gmtf_fs_release(fs, e.attr.st_ino);
        /* database-like: small records at distinct offsets, each fsynced */
        for (int k = 0; k < 3; k++) {
            uint8_t rec[300];
            fill_words(rec, sizeof rec, (uint32_t)w->dbrec + 7);
            size_t off = (size_t)w->dbrec * 331 % (DBSZ - 300);
            memcpy(w->db + off, rec, sizeof rec);
            assert_int_equal(gmtf_fs_write(fs, db, rec, sizeof rec, off), (long)sizeof rec);
            assert_int_equal(gmtf_fs_fsync(fs, db, 1), 0);
            w->dbrec++;
            w->acks[w->nacks++] = (ack){r->n, -1, w->dbrec, i + 1};
        }
        if (i == 5) {
            assert_int_equal(gmtf_fs_unlink(fs, ROOT, "f01.txt"), 0);
            w->unlinked[1] = 1;
            assert_int_equal(gmtf_fs_rename(fs, ROOT, "f02.txt", ROOT, "f04.txt", 0), 0);
            w->unlinked[2] = 1; /* now under f04's name */
            free(w->data[4]);
            w->data[4] = w->data[2];
            w->len[4] = w->len[2];
            w->data[2] = NULL;
        }
        if (i % 4 == 3) {
            assert_int_equal(gmtf_fs_syncfs(fs), 0);
            w->acks[w->nacks++] = (ack){r->n, -2, w->dbrec, i + 1};
        }
    }
    gmtf_fs_release(fs, db);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    w->acks[w->nacks++] = (ack){r->n, -2, w->dbrec, NFILES};
}

/* Every write since the last flush before k may or may not have landed. */
static uint8_t *crash_state(const uint8_t *base, size_t blen, rec_img *r, size_t k, unsigned seed,
                            size_t *len)
{
    size_t f = 0;
    for (size_t i = 0; i < k; i++)
        if (!r->log[i].data)
            f = i;
    uint8_t *p = rec_image_state(base, blen, r, f, len);
    srand(seed);
    for (size_t i = f; i < k; i++) {
        rec_write *x = &r->log[i];
        if (!x->data || x->len == 0 || (seed && rand() % 2))
            continue;
        if (x->off + x->len > *len) {
            p = realloc(p, x->off + x->len);
            memset(p + *len, 0, x->off + x->len - *len);
            *len = x->off + x->len;
        }
        memcpy(p + x->off, x->data, x->len);
    }
    return p;
}

static void verify_state(const workload *w, rec_img *r, gmtf_fs *fs, size_t k, const uint8_t *db_at)
{
    (void)r;
    int files_durable[NFILES] = {0}, all = 0, dbrec = 0;
    for (int i = 0; i < w->nacks; i++) {
        if (w->acks[i].logpos > k)
            break;
        if (w->acks[i].file >= 0)
            files_durable[w->acks[i].file] = 1;
        if (w->acks[i].file == -2)
            for (int j = 0; j < w->acks[i].created; j++)
                files_durable[j] = 1;
        dbrec = w->acks[i].db_records;
    }
    (void)all;
    for (int i = 0; i < NFILES; i++) {
        if (!files_durable[i] || !w->data[i])
            continue;
        char nm[16];
        name_of(i, nm);
        gmtf_entry e;
        int rc = gmtf_fs_lookup(fs, ROOT, nm, &e);
        if (rc == -ENOENT && (i == 4 || i == 1 || i == 2))
            continue; /* the rename/unlink may or may not be durable */
        if (rc)
            fprintf(stderr, "state %zu: %s missing (%d)\n", k, nm, rc);
        assert_int_equal(rc, 0);
        if (i == 4 && (size_t)e.attr.st_size != w->len[4])
            continue; /* still the old f04 */
        assert_int_equal((size_t)e.attr.st_size, w->len[i]);
        uint8_t *b = malloc(w->len[i]);
        assert_int_equal(gmtf_fs_read(fs, e.attr.st_ino, b, w->len[i], 0), (long)w->len[i]);
        assert_memory_equal(b, w->data[i], w->len[i]);
        free(b);
    }
    if (dbrec) {
        gmtf_entry e;
        assert_int_equal(gmtf_fs_lookup(fs, ROOT, "db", &e), 0);
        uint8_t *b = calloc(1, DBSZ);
        gmtf_fs_read(fs, e.attr.st_ino, b, DBSZ, 0);
        /* every durable record must read back (later ones may too) */
        for (int q = 0; q < dbrec; q++) {
            size_t off = (size_t)q * 331 % (DBSZ - 300);
            int overwritten = 0;
            for (int z = q + 1; z < w->dbrec; z++) {
                size_t o2 = (size_t)z * 331 % (DBSZ - 300);
                overwritten |= o2 < off + 300 && off < o2 + 300;
            }
            if (!overwritten)
                assert_memory_equal(b + off, db_at + off, 300);
        }
        free(b);
    }
}

static void check_clean(const uint8_t *img, size_t len, size_t k)
{
    gmtf_image *mi;
    assert_int_equal(gmtf_image_open_mem(img, len, &mi), 0);
    gmtf_fs_check_options co = {.verify_data = 1, .threads = 1, .log = quiet};
    gmtf_fs_check_report rep;
    int rc = gmtf_fs_check(mi, &co, &rep);
    if (rc || rep.errors)
        fprintf(stderr, "state %zu: check rc %d, %u errors\n", k, rc, rep.errors);
    assert_int_equal(rc, 0);
    assert_int_equal(rep.errors, 0);
    gmtf_image_close(mi);
}

static void test_crash_states(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    size_t blen;
    const uint8_t *b0 = rec_image_data(r, &blen);
    uint8_t *base = malloc(blen);
    memcpy(base, b0, blen);
    workload *w = calloc(1, sizeof *w);
    r->recording = 1;
    run_workload(r, w);
    r->recording = 0;
    size_t nlog = r->n, checked = 0, flushes = 0, sbw = 0;
    for (size_t i = 0; i < nlog; i++) {
        flushes += !r->log[i].data;
        sbw += r->log[i].data && r->log[i].off < 8192 && r->log[i].len;
    }
    fprintf(stderr, "crash test: %zu writes, %zu flushes, %zu superblock writes\n", nlog, flushes,
            sbw);
    assert_true(sbw >= 3);      /* checkpoints happened during the workload */
    size_t step = test_scale(); /* every prefix; every Nth under GMTF_TEST_SCALE */
    for (size_t k = 0; k <= nlog; k = k < nlog && k + step > nlog ? nlog : k + step) {
        for (unsigned seed = 0; seed < 2; seed++) {
            size_t len;
            uint8_t *img = crash_state(base, blen, r, k, seed * 7919 + (unsigned)k, &len);
            check_clean(img, len, k);
            rec_img *d = rec_image_new(img, len);
            gmtf_fs_options o = {.read_only = 1, .threads = 1, .log = quiet};
            gmtf_fs *fs;
            d->recording = 1;
            assert_int_equal(gmtf_fs_mount(rec_image_attach(d), &o, &fs), 0);
            verify_state(w, r, fs, k, w->db);
            gmtf_fs_unmount(fs);
            assert_int_equal(d->n, 0); /* a read-only mount never writes, even to replay */
            d->recording = 0;
            if (k % 5 == 0) { /* a writable mount replays and checkpoints: still clean */
                o.read_only = 0;
                assert_int_equal(gmtf_fs_mount(rec_image_attach(d), &o, &fs), 0);
                verify_state(w, r, fs, k, w->db);
                assert_int_equal(gmtf_fs_unmount(fs), 0);
                size_t l2;
                const uint8_t *p2 = rec_image_data(d, &l2);
                check_clean(p2, l2, k);
            }
            rec_image_free(d);
            free(img);
            checked++;
        }
    }
    assert_true(checked > 50 / step);
    for (int i = 0; i < NFILES; i++)
        free(w->data[i]);
    free(w);
    free(base);
    rec_image_free(r);
}

static void test_faults(void **state)
{
    (void)state;
    int errs[2] = {-EIO, -ENOSPC};
    for (int t = 0; t < 2; t++)
        for (long after = 0; after < 12; after += 1) {
            rec_img *r = mkfs_rec(BS, 0);
            gmtf_fs *fs = mount_opts(r, 0);
            assert_non_null(fs);
            uint8_t buf[5000];
            fill_pattern(buf, sizeof buf, 3);
            gmtf_entry e;
            assert_int_equal(gmtf_fs_create(fs, ROOT, "a", 0644, 0, 0, 0, &e), 0);
            assert_int_equal(gmtf_fs_write(fs, e.attr.st_ino, buf, sizeof buf, 0),
                             (long)sizeof buf);
            assert_int_equal(gmtf_fs_syncfs(fs), 0);
            r->fail_after = after;
            r->fail_err = errs[t];
            r->short_write = (int)(after & 1);
            int failed = 0;
            for (int i = 0; i < 6; i++) {
                char nm[8];
                snprintf(nm, sizeof nm, "b%d", i);
                if (gmtf_fs_create(fs, ROOT, nm, 0644, 0, 0, 0, &e))
                    continue;
                gmtf_fs_write(fs, e.attr.st_ino, buf, sizeof buf - (size_t)i, 0);
                failed |= gmtf_fs_fsync(fs, e.attr.st_ino, 0) != 0;
                gmtf_fs_release(fs, e.attr.st_ino);
            }
            failed |= gmtf_fs_syncfs(fs) != 0;
            if (after < 4)
                assert_true(failed);
            r->fail_after = -1; /* the device recovers */
            assert_int_equal(gmtf_fs_syncfs(fs), 0);
            assert_int_equal(gmtf_fs_unmount(fs), 0);
            size_t len;
            const uint8_t *p = rec_image_data(r, &len);
            check_clean(p, len, (size_t)after);
            fs = mount_opts(r, 1);
            assert_non_null(fs);
            assert_int_equal(gmtf_fs_lookup(fs, ROOT, "a", &e), 0);
            uint8_t got[5000];
            assert_int_equal(gmtf_fs_read(fs, e.attr.st_ino, got, sizeof got, 0), (long)sizeof got);
            assert_memory_equal(got, buf, sizeof buf);
            for (int i = 0; i < 6; i++) { /* all written before the final sync */
                char nm[8];
                snprintf(nm, sizeof nm, "b%d", i);
                if (gmtf_fs_lookup(fs, ROOT, nm, &e))
                    continue;
                assert_int_equal(gmtf_fs_read(fs, e.attr.st_ino, got, sizeof got, 0),
                                 (long)(sizeof buf - (size_t)i));
                assert_memory_equal(got, buf, sizeof buf - (size_t)i);
            }
            gmtf_fs_unmount(fs);
            rec_image_free(r);
        }
}

/* A STAGE record is replayed over the block's frame as mapped at that
 * point of the log. When a later EXT of the same journal maps the block
 * elsewhere, the old frame's space must stay unused until a checkpoint
 * drops the journal: reusing it earlier made the replay of the STAGE
 * record read someone else's bytes (fsck: records that could not be
 * applied; t_crash under FUSE). */
static void test_stage_base_kept(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    assert_non_null(r);
    gmtf_fs_options o = {
        .threads = 1, .journal_bytes = 4u << 20, .dirty_bytes = 1u << 20, .log = quiet};
    gmtf_fs *fs;
    assert_int_equal(gmtf_fs_mount(rec_image_attach(r), &o, &fs), 0);
    static uint8_t a[BS], b[BS / 2], got[BS];
    fill_pattern(a, sizeof a, 11);
    gmtf_entry e;
    assert_int_equal(gmtf_fs_create(fs, ROOT, "a", 0644, 0, 0, 0, &e), 0);
    uint64_t ia = e.attr.st_ino;
    assert_int_equal(gmtf_fs_write(fs, ia, a, sizeof a, 0), (long)sizeof a);
    assert_int_equal(gmtf_fs_syncfs(fs), 0); /* block 0 -> frame F */
    memset(a + 100, 0x5a, 300);
    assert_int_equal(gmtf_fs_write(fs, ia, a + 100, 300, 100), 300);
    assert_int_equal(gmtf_fs_fsync(fs, ia, 1), 0); /* STAGE over F */
    assert_int_equal(gmtf_fs_syncfs(fs), 0);       /* block 0 -> new frame; F unmapped */
    /* New frames, first fit: they would land where F was. */
    for (int i = 0; i < 4; i++) {
        char nm[8];
        snprintf(nm, sizeof nm, "b%d", i);
        fill_pattern(b, sizeof b, 40u + (uint32_t)i);
        assert_int_equal(gmtf_fs_create(fs, ROOT, nm, 0644, 0, 0, 0, &e), 0);
        assert_int_equal(gmtf_fs_write(fs, e.attr.st_ino, b, sizeof b, 0), (long)sizeof b);
        assert_int_equal(gmtf_fs_fsync(fs, e.attr.st_ino, 0), 0);
        gmtf_fs_release(fs, e.attr.st_ino);
        assert_int_equal(gmtf_fs_syncfs(fs), 0);
    }
    /* Crash now: the image as the writes left it. */
    size_t len;
    const uint8_t *cur = rec_image_data(r, &len);
    uint8_t *img = malloc(len);
    assert_non_null(img);
    memcpy(img, cur, len);
    check_clean(img, len, 0);
    gmtf_fs *fs2 = mount_mem(img, len, 1);
    assert_non_null(fs2);
    assert_int_equal(gmtf_fs_lookup(fs2, ROOT, "a", &e), 0);
    assert_int_equal(gmtf_fs_read(fs2, e.attr.st_ino, got, sizeof got, 0), (long)sizeof got);
    assert_memory_equal(got, a, sizeof a);
    gmtf_fs_unmount(fs2);
    free(img);
    gmtf_fs_release(fs, ia);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    rec_image_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crash_states),
        cmocka_unit_test(test_faults),
        cmocka_unit_test(test_stage_base_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
