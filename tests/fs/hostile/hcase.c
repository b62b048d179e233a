/* One hostile case (hcase.h). */
#include "hcase.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmtf_fs.h"
#include "fs_test_util.h"
#include "hmut.h"

#define CASE_MEMORY HCASE_MEMORY
#define GROWTH_MAX HCASE_GROWTH

int hcase_verbose;

static void logline(void *arg, const char *msg)
{
    (void)arg;
    if (hcase_verbose)
        fprintf(stderr, "    | %s\n", msg);
}

static int case_fail(hcase *c, int step, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int case_fail(hcase *c, int step, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    (void)c;
    return step;
}

/* fsck of a copy of p; the copy (as the check left it) in *out. */
static int check(const uint8_t *p, size_t len, int repair, gmtf_fs_check_report *rep, uint8_t **out,
                 size_t *outlen)
{
    gmtf_image *mi = himage_mem(p, len);
    if (!mi)
        return -ENOMEM;
    gmtf_fs_check_options co = {.repair = repair, .verify_data = 1, .threads = 1, .log = logline};
    int rc = gmtf_fs_check(mi, &co, rep);
    size_t n;
    const uint8_t *q = gmtf_image_mem_data(mi, &n);
    *out = malloc(n ? n : 1);
    memcpy(*out, q, n);
    *outlen = n;
    gmtf_image_close(mi);
    return rc;
}

static int same(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    return al == bl && !memcmp(a, b, al);
}

/* A read-only mount and walk of p: 0, or the mount's error. */
static int mount_walk(const uint8_t *p, size_t len, hfacts *facts, hwalk_stats *st, int *unchanged)
{
    gmtf_image *mi = himage_mem(p, len);
    gmtf_fs_options o = {.read_only = 1, .threads = 1, .log = logline};
    gmtf_fs *fs;
    memset(st, 0, sizeof *st);
    int rc = gmtf_fs_mount(mi, &o, &fs);
    if (rc)
        return rc;
    hwalk(fs, facts, st);
    size_t n;
    const uint8_t *q = gmtf_image_mem_data(mi, &n);
    *unchanged = same(p, len, q, n);
    gmtf_fs_unmount(fs);
    return 0;
}

/* A read-write mount of p (on a disk that outlives it), a walk, the
 * changes of hwork_session, an unmount. sound: the image was repaired (or
 * clean), so every change must succeed and fsck -n find nothing after. */
static int session(hcase *c, const uint8_t *p, size_t len, int sound)
{
    int step = sound ? 6 : 5;
    rec_img *r = rec_image_new(p, len);
    gmtf_fs_options o = {.threads = 1, .log = logline, .journal_bytes = 64u << 10};
    gmtf_fs *fs;
    int rc = gmtf_fs_mount(rec_image_attach(r), &o, &fs);
    if (hcase_verbose)
        fprintf(stderr, "  rw mount%s: %d\n", sound ? " (repaired)" : "", rc);
    if (rc == -ENOMEM || (sound && rc)) {
        rec_image_free(r);
        return case_fail(c, step, "read-write mount: %s", strerror(-rc));
    }
    if (rc) {
        rec_image_free(r);
        return 0;
    }
    hwalk_stats st;
    hwalk(fs, NULL, &st);
    int durable;
    int bad = hwork_session(fs, &durable);
    rc = gmtf_fs_unmount(fs);
    if (hcase_verbose)
        fprintf(stderr, "  session: %d operations failed, unmount %d\n", bad, rc);
    size_t n;
    const uint8_t *q = rec_image_data(r, &n);
    int out = 0;
    if (n > len + GROWTH_MAX)
        out = case_fail(c, step, "a read-write mount grew the image from %zu to %zu bytes", len, n);
    else if (rc == -ENOMEM)
        out = case_fail(c, step, "unmount: out of memory");
    else if (sound && (bad || (rc && rc != -ENOSPC)))
        out = case_fail(c, step, "on the repaired image %d changes failed, unmount %d", bad, rc);
    if (!out && durable && !rc) { /* what was synced reads back after a remount */
        gmtf_fs_options ro = {.read_only = 1, .threads = 1, .log = logline};
        rc = gmtf_fs_mount(himage_mem(q, n), &ro, &fs);
        int got = rc ? rc : hwork_session_check(fs);
        if (!rc)
            gmtf_fs_unmount(fs);
        if (got)
            out = case_fail(c, step, "a file written and synced in the session: %s after remount",
                            strerror(-got));
    }
    if (!out && sound) {
        gmtf_fs_check_report rep;
        uint8_t *c2 = NULL;
        size_t l2;
        rc = check(q, n, 0, &rep, &c2, &l2);
        free(c2);
        if (rc || rep.errors)
            out =
                case_fail(c, step, "after changes on the repaired image, fsck -n: %d, %u problems",
                          rc, rep.errors);
    }
    rec_image_free(r);
    return out;
}

int hcase_run(void *arg)
{
    hcase *c = arg;
    gmtf_fs_check_report rep;
    uint8_t *cp;
    size_t cl;
    /* 1. fsck -n */
    int rc = check(c->img, c->len, 0, &rep, &cp, &cl);
    if (rc == -ENOMEM)
        return case_fail(c, 1, "fsck -n: out of memory (bound %llu MiB)", CASE_MEMORY >> 20);
    if (!same(c->img, c->len, cp, cl))
        return case_fail(c, 1, "fsck -n changed the image");
    free(cp);
    int outcome = rc ? HCASE_UNLOADABLE : rep.errors ? HCASE_REPAIRED : HCASE_CLEAN;
    if (hcase_verbose)
        fprintf(stderr, "  fsck -n: %d, %u problems\n", rc, rep.errors);
    /* 2. read-only mount and walk */
    hfacts facts = {0};
    hwalk_stats st;
    int unchanged = 1;
    rc = mount_walk(c->img, c->len, &facts, &st, &unchanged);
    int ro_rc = rc;
    if (hcase_verbose)
        fprintf(stderr, "  ro mount: %d; walk: %u dirs, %u files, %u errors\n", rc, st.dirs,
                st.files, st.errors);
    if (rc == -ENOMEM)
        return case_fail(c, 2, "read-only mount: out of memory");
    if (!unchanged)
        return case_fail(c, 2, "a read-only mount changed the image");
    if (c->raw)
        for (size_t i = 0; i < facts.n; i++)
            if (!hfacts_has(c->oracle, facts.v[i][0], facts.v[i][1]))
                return case_fail(
                    c, 2,
                    "checksums left as they were, yet a read returned what no committed "
                    "state held (fact %zu of %zu)",
                    i, facts.n);
    hfacts_free(&facts);
    /* 3. fsck -y */
    rc = check(c->img, c->len, 1, &rep, &cp, &cl);
    if (hcase_verbose)
        fprintf(stderr, "  fsck -y: %d, %u problems, %u fixed\n", rc, rep.errors, rep.fixed);
    if (rc == -ENOMEM)
        return case_fail(c, 3, "fsck -y: out of memory");
    if (rc || rep.unrepairable) {
        if (!same(c->img, c->len, cp, cl))
            return case_fail(c, 3, "fsck -y failed (%s) but changed the image",
                             rc ? strerror(-rc) : "unrepairable");
        if (outcome == HCASE_REPAIRED)
            outcome = HCASE_REFUSED;
    } else {
        if (rep.fixed != rep.errors)
            return case_fail(c, 3, "fsck -y wrote with %u of %u problems fixed", rep.fixed,
                             rep.errors);
        /* 4. converged. An image fsck -y left byte for byte as it was
         * (fsck -n found it clean) gives steps 1 and 2 again: their
         * results stand for it (the library is deterministic), without a
         * second decode of every frame. */
        if (same(c->img, c->len, cp, cl)) {
            if (outcome != HCASE_CLEAN || ro_rc || st.errors)
                return case_fail(c, 4,
                                 "fsck -y wrote nothing; fsck -n: %s, read-only mount %d, walk "
                                 "%u errors",
                                 outcome != HCASE_CLEAN ? "problems" : "clean", ro_rc, st.errors);
        } else {
            uint8_t *c2 = NULL;
            size_t l2;
            rc = check(cp, cl, 0, &rep, &c2, &l2);
            free(c2);
            if (rc || rep.errors)
                return case_fail(c, 4, "after fsck -y, fsck -n: %d, %u problems (not converged)",
                                 rc, rep.errors);
            rc = mount_walk(cp, cl, NULL, &st, &unchanged);
            if (rc || st.errors)
                return case_fail(c, 4, "after fsck -y: read-only mount %d, walk %u errors", rc,
                                 st.errors);
        }
        /* the repaired image is a sound filesystem: changes keep it clean */
        rc = session(c, cp, cl, 1);
        if (rc)
            return rc;
    }
    free(cp);
    /* 5. read-write mount, walk, changes, unmount (of a clean image: done
     * above, with the stricter checks of a sound one) */
    if (outcome != HCASE_CLEAN) {
        rc = session(c, c->img, c->len, 0);
        if (rc)
            return rc;
    }
    return outcome;
}

int hcase_seed(uint64_t seed, uint8_t *const base[], const size_t len[], const hfacts oracle[],
               char *why, size_t whylen, char *what, size_t whatlen, int *raw)
{
    int v = (int)(seed % HWORK_VARIANTS);
    hmut m;
    uint8_t *img;
    size_t n;
    hmut_apply(base[v], len[v], seed, &img, &n, &m);
    if (hcase_verbose)
        fprintf(stderr, "seed %llu (variant %d, %s, %zu bytes): %s\n", (unsigned long long)seed, v,
                m.raw ? "raw" : "checksums recomputed", n, m.what);
    const char *dump = getenv("GMTF_HOSTILE_DUMP"); /* the edited image, for a finding's analysis */
    if (dump && *dump) {
        FILE *f = fopen(dump, "wb");
        if (f) {
            fwrite(img, 1, n, f);
            fclose(f);
        }
    }
    hcase c = {img, n, m.raw, &oracle[v]};
    why[0] = 0;
    int rc = hbound_run(hcase_run, &c, HCASE_SECONDS, HCASE_MEMORY, why, whylen);
    snprintf(what, whatlen, "%s", m.what);
    *raw = m.raw;
    free(img);
    return rc;
}
