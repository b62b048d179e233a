/* gmtf-extract on hostile images: names an image's directories should not
 * hold, made by editing a real image's snapshot with every checksum
 * recomputed (tests/fs/hostile/himg.c), so the extraction meets them:
 *   - a symlink "aaaa" to a directory outside DIR, then a directory of the
 *     same name holding "payload" (the edited entry of "bbbb"): the
 *     directory must not be entered through the symlink;
 *   - an entry named "../." and one named "x/y" (edited names).
 * Whatever the image holds, nothing appears outside DIR, the rest of the
 * tree comes out, and each run ends in bounded time without a crash.
 * (Today the library already refuses such entries when it loads the
 * snapshot, "a record does not apply", so the extraction never meets
 * them; these tests hold whichever layer stops them.)
 * gmtf-stat on such an image shows its figures and exits 1.
 * argv[1] = gmtf-extract, argv[2] = gmtf-stat (meson passes them). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs_internal.h"
#include "fs_test_util.h"
#include "hostile/himg.h"

static const char *extract_bin, *stat_bin;
static char tmp[256];

static uint64_t make(gmtf_fs *fs, uint64_t dir, const char *name, mode_t mode, const char *data)
{
    gmtf_entry e;
    if (S_ISDIR(mode)) {
        assert_int_equal(gmtf_fs_mkdir(fs, dir, name, 0755, 0, 0, &e), 0);
    } else {
        assert_int_equal(gmtf_fs_create(fs, dir, name, 0644, 0, 0, 0, &e), 0);
        assert_int_equal(gmtf_fs_write(fs, e.attr.st_ino, data, strlen(data), 0),
                         (long)strlen(data));
        gmtf_fs_release(fs, e.attr.st_ino);
    }
    return (uint64_t)e.attr.st_ino;
}

/* The image: /aaaa -> OUTSIDE (symlink), /bbbb/payload, /cccc/f, /dd/g,
 * with the entries named in from[] renamed to to[] (same lengths) in the
 * snapshot. Written to path. */
static void build(const char *path, const char *outside, const char *const *from,
                  const char *const *to, size_t nedit)
{
    rec_img *r = mkfs_rec(64u << 10, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    gmtf_entry e;
    assert_int_equal(gmtf_fs_symlink(fs, GMTF_ROOT_INO, "aaaa", outside, 0, 0, &e), 0);
    make(fs, make(fs, GMTF_ROOT_INO, "bbbb", S_IFDIR, NULL), "payload", S_IFREG, "evil\n");
    make(fs, make(fs, GMTF_ROOT_INO, "cccc", S_IFDIR, NULL), "f", S_IFREG, "evil\n");
    make(fs, make(fs, GMTF_ROOT_INO, "xzy", S_IFDIR, NULL), "g", S_IFREG, "evil\n");
    make(fs, GMTF_ROOT_INO, "keep", S_IFREG, "good\n");
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    size_t len;
    const uint8_t *img = rec_image_data(r, &len);
    himg h;
    assert_int_equal(himg_parse(&h, img, len), 0);
    size_t edited = 0;
    for (size_t k = 0; k < nedit; k++) {
        size_t n = strlen(from[k]);
        assert_int_equal(strlen(to[k]), n);
        for (size_t c = 0; c < h.nsnap; c++)
            for (size_t i = 0; i < h.snap[c].n; i++) {
                hrec *rec = &h.snap[c].v[i];
                if (hrec_type(rec) == R_DADD && rec->len >= n &&
                    !memcmp(rec->p + rec->len - n, from[k], n)) {
                    memcpy(rec->p + rec->len - n, to[k], n);
                    edited++;
                }
            }
    }
    assert_int_equal(edited, nedit);
    assert_int_equal(himg_build(&h), 0);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, h.p, h.len), (ssize_t)h.len);
    close(fd);
    himg_free(&h);
    rec_image_free(r);
}

/* gmtf-extract -q -C dir img (or, dir NULL, gmtf-stat img), bounded to
 * 60 s; its exit status. */
static int extract(const char *img, const char *dir)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(60);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        if (dir)
            execl(extract_bin, extract_bin, "-q", "-C", dir, img, (char *)NULL);
        else
            execl(stat_bin, stat_bin, img, (char *)NULL);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st)); /* no crash, no timeout */
    return WEXITSTATUS(st);
}

static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static void test_symlink_then_directory(void **state)
{
    (void)state;
    char img[300], outside[300], dir[300], p[400];
    snprintf(img, sizeof img, "%s/dup.img", tmp);
    snprintf(outside, sizeof outside, "%s/outside", tmp);
    snprintf(dir, sizeof dir, "%s/out1", tmp);
    mkdir(outside, 0755);
    const char *from[] = {"bbbb"}, *to[] = {"aaaa"};
    build(img, outside, from, to, 1);
    int rc = extract(img, dir);
    assert_int_equal(rc, 1);                 /* the damage is reported */
    assert_int_equal(extract(img, NULL), 1); /* by gmtf-stat too */
    assert_int_equal(entries(outside), 0);   /* nothing through the symlink */
    snprintf(p, sizeof p, "%s/keep", dir);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);     /* the rest came out */
    snprintf(p, sizeof p, "%s/aaaa", dir); /* the symlink, or the directory */
    assert_int_equal(lstat(p, &st), 0);
}

static void test_dotdot_and_slash_names(void **state)
{
    (void)state;
    char img[300], outside[300], dir[300], p[400];
    snprintf(img, sizeof img, "%s/names.img", tmp);
    snprintf(outside, sizeof outside, "%s/outside2", tmp);
    snprintf(dir, sizeof dir, "%s/d/out2", tmp);
    mkdir(outside, 0755);
    snprintf(p, sizeof p, "%s/d", tmp);
    mkdir(p, 0755);
    /* names of the same lengths: "xzy" -> "x/y", "cccc" -> "../." */
    const char *from[] = {"xzy", "cccc"}, *to[] = {"x/y", "../."};
    build(img, outside, from, to, 2);
    assert_int_equal(extract(img, dir), 1); /* damage met: not a clean exit */
    snprintf(p, sizeof p, "%s/d/f", tmp);   /* "../." would have put f beside DIR */
    struct stat st;
    assert_int_equal(stat(p, &st), -1);
    snprintf(p, sizeof p, "%s/f", dir);
    assert_int_equal(stat(p, &st), -1);
    snprintf(p, sizeof p, "%s/x/y", dir);
    assert_int_equal(stat(p, &st), -1);
    snprintf(p, sizeof p, "%s/keep", dir);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(entries(outside), 0);
    snprintf(p, sizeof p, "%s/d", tmp);
    assert_int_equal(entries(p), 1); /* out2 only */
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s GMTF-EXTRACT GMTF-STAT\n", argv[0]);
        return 2;
    }
    extract_bin = argv[1];
    stat_bin = argv[2];
    snprintf(tmp, sizeof tmp, "/tmp/gmtf-xhostile-XXXXXX");
    if (!mkdtemp(tmp))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_symlink_then_directory),
        cmocka_unit_test(test_dotdot_and_slash_names),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd))
        rc = rc ? rc : 1;
    return rc;
}
