/* Generator of the compatibility images in tests/images/ (run by
 * make-images.sh; built as BUILD/tests/fs/gen_images).
 *
 *   gen_images tree SRCDIR
 *       fills a new host directory with the tree that mkfs.gmtf --from turns
 *       into v1-tree.img: generated text, small files (packed together), an
 *       identical copy (deduplicated), a hard link, symlinks, a fifo, device
 *       nodes (root only), xattrs, a sparse file, odd modes and names, and
 *       fixed times with nanoseconds.
 *   gen_images ops CLEAN.img CRASH.img MIRRORDIR
 *       makes a filesystem through the library API on an image in memory and
 *       runs a workload of POSIX operations (rename, exchange, unlink,
 *       truncate, punch, overwrite of a deduplicated copy, xattr changes,
 *       ...), applying each one to the host directory MIRRORDIR as well. Then
 *       small writes are fsynced (staged uncompressed in the journal) and
 *       the image bytes as they stand are saved as CRASH.img: what a crash
 *       (kill -9, power loss) would leave, with a journal still to replay.
 *       The unmounted image is saved as CLEAN.img. Both hold the tree that
 *       MIRRORDIR holds.
 *
 * Everything is derived from fixed seeds; only times of the images' own
 * metadata (superblock, ctime) differ from run to run. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "gmtf_fs.h"

#define BS (64u << 10)

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gen_images: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

/* ---- generated content ------------------------------------------------------ */

static uint64_t rng_state;

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p)
        die("out of memory");
    return p;
}

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static const char *const words[] = {
    "the",       "image",    "block",     "frame",      "journal",    "snapshot", "compressed",
    "small",     "file",     "directory", "checkpoint", "mount",      "reader",   "writer",
    "space",     "free",     "a",         "of",         "and",        "to",       "in",
    "is",        "every",    "byte",      "stays",      "readable",   "after",    "crash",
    "while",     "version",  "one",       "two",        "format",     "record",   "checksum",
    "old",       "new",      "sorted",    "move",       "front",      "burrows",  "wheeler",
    "transform", "entropy",  "coder",     "table",      "superblock", "slot",     "generation",
    "packed",    "tail",     "shared",    "copy",       "link",       "hole",     "sparse",
    "attribute", "extended", "name",      "offset",     "length",     "little",   "endian",
    "host",
};

/* Pseudo-English: sentences of a small vocabulary, lines of ~70 chars. */
static char *prose(size_t n, uint64_t seed)
{
    rng_state = seed;
    char *p = xmalloc(n + 32);
    size_t len = 0, col = 0;
    int start = 1;
    while (len < n) {
        const char *w = words[rnd() % (sizeof words / sizeof *words)];
        size_t wl = strlen(w);
        if (col + wl > 70) {
            p[len++] = '\n';
            col = 0;
        } else if (col) {
            p[len++] = ' ';
            col++;
        }
        memcpy(p + len, w, wl);
        if (start)
            p[len] = (char)(p[len] - 32);
        len += wl;
        col += wl;
        start = rnd() % 9 == 0;
        if (start)
            p[len++] = '.';
        if (len > n + 16)
            break;
    }
    return p; /* the first n bytes are used */
}

static char *log_lines(size_t n, uint64_t seed)
{
    rng_state = seed;
    char *p = xmalloc(n + 200);
    size_t len = 0;
    for (unsigned i = 0; len < n; i++)
        len += (size_t)snprintf(p + len, n + 200 - len,
                                "2026-11-22 12:%02u:%02u.%03u gmtfd[%u]: flushed %u blocks "
                                "(%u bytes) in %u ms\n",
                                i / 60 % 60, i % 60, (unsigned)(rnd() % 1000),
                                4000u + (unsigned)(rnd() % 4), (unsigned)(rnd() % 64),
                                (unsigned)(rnd() % 1000000), (unsigned)(rnd() % 90));
    return p;
}

static char *c_source(size_t n, uint64_t seed)
{
    rng_state = seed;
    char *p = xmalloc(n + 200);
    size_t len = (size_t)sprintf(p, "/* generated test source %llu */\n#include <stdint.h>\n\n",
                                 (unsigned long long)seed);
    for (unsigned i = 0; len < n; i++)
        len += (size_t)snprintf(p + len, n + 200 - len,
                                "static uint32_t step_%u(uint32_t x)\n{\n    return x * %uu + "
                                "%uu;\n}\n\n",
                                i, (unsigned)(rnd() % 1000003), (unsigned)(rnd() % 97));
    return p;
}

static uint8_t *noise(size_t n, uint64_t seed)
{
    rng_state = seed;
    uint8_t *p = xmalloc(n + 8);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = rnd();
        memcpy(p + i, &v, 8);
    }
    return p;
}

/* ---- host side ------------------------------------------------------------------ */

static char root_dir[4096];

static const char *hp(const char *rel)
{
    static char b[2][8192];
    static int k;
    k ^= 1;
    snprintf(b[k], sizeof b[k], "%s%s", root_dir, rel);
    return b[k];
}

static void h_write(const char *rel, const void *data, size_t n, off_t off, int create_mode)
{
    int fd = open(hp(rel), O_WRONLY | (create_mode ? O_CREAT | O_TRUNC : 0), create_mode);
    if (fd < 0 || pwrite(fd, data, n, off) != (ssize_t)n)
        die("%s: %s", hp(rel), strerror(errno));
    close(fd);
    if (create_mode && chmod(hp(rel), (mode_t)create_mode))
        die("chmod %s: %s", hp(rel), strerror(errno));
}

static void h_check(int rc, const char *what, const char *rel)
{
    if (rc)
        die("%s %s: %s", what, hp(rel), strerror(errno));
}

/* Fixed times, deepest entries first (a directory's times change when its
 * entries do). Each entry gets its own second and nanosecond. */
static unsigned time_seq;
static int (*time_hook)(const char *rel, const struct timespec ts[2]);

static int set_time_cb(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    time_seq++;
    struct timespec ts[2] = {
        {1700000000 + (time_t)time_seq * 3600, (long)(time_seq * 7919u % 1000000000u)},
        {1600000000 + (time_t)time_seq * 86400, (long)(time_seq * 104729u % 1000000000u)},
    };
    if (utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW))
        die("utimensat %s: %s", path, strerror(errno));
    const char *rel = path + strlen(root_dir);
    if (time_hook && time_hook(*rel ? rel : "/", ts))
        die("set times of %s in the image", rel);
    return 0;
}

static void set_all_times(void)
{
    time_seq = 0;
    if (nftw(root_dir, set_time_cb, 16, FTW_PHYS | FTW_DEPTH))
        die("nftw %s: %s", root_dir, strerror(errno));
}

/* ---- tree: a host directory for mkfs.gmtf --from ------------------------------ */

static void make_tree(const char *dir)
{
    snprintf(root_dir, sizeof root_dir, "%s", dir);
    if (mkdir(dir, 0755))
        die("mkdir %s: %s", dir, strerror(errno));
    chmod(dir, 0755);
    const char *dirs[] = {"/docs", "/src", "/src/lib", "/big", "/emptydir", "/odd"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
        h_check(mkdir(hp(dirs[i]), 0755), "mkdir", dirs[i]);
    chmod(hp("/emptydir"), 0700);
    chmod(hp("/odd"), 02775);

    static const char readme[] =
        "gmtf compatibility image, format version 1.\n"
        "Made by tests/images/make-images.sh from generated content only.\n"
        "Every file here is listed with its sha256 in tests/images/MANIFEST.\n";
    h_write("/README.txt", readme, sizeof readme - 1, 0, 0644);
    for (int i = 1; i <= 3; i++) {
        char rel[64];
        size_t n = 2000u + 3000u * (size_t)i;
        snprintf(rel, sizeof rel, "/docs/chapter%d.txt", i);
        char *t = prose(n, 100u + (uint64_t)i);
        h_write(rel, t, n, 0, 0644);
        free(t);
    }
    /* Small files: packed together into shared blocks by mkfs. */
    for (int i = 0; i < 12; i++) {
        char rel[64];
        size_t n = 150u + (size_t)i * 173u;
        snprintf(rel, sizeof rel, "/src/lib/unit%02d.c", i);
        char *t = c_source(n, 200u + (uint64_t)i);
        h_write(rel, t, n, 0, i == 3 ? 0600 : 0644);
        free(t);
    }
    char *u = c_source(9000, 300);
    h_write("/src/util.c", u, 9000, 0, 0644);
    h_write("/src/util_copy.c", u, 9000, 0, 0444); /* identical content: stored once */
    free(u);
    char *lg = log_lines(140000, 400); /* several blocks */
    h_write("/big/server.log", lg, 140000, 0, 0640);
    h_write("/big/exact_block", lg, BS, 0, 0644);            /* exactly one block */
    h_write("/big/block_plus_one", lg + 5, BS + 1, 0, 0644); /* one block and a byte */
    free(lg);
    uint8_t *nz = noise(3000, 500); /* does not compress: stored as is */
    h_write("/big/noise.bin", nz, 3000, 0, 0600);
    free(nz);
    /* Sparse: data at 1 MiB and at the very end of 3 MiB + 5 bytes. */
    h_write("/big/sparse", "middle of nowhere\n", 18, 1 << 20, 0644);
    h_write("/big/sparse", "end", 3, (3 << 20) + 2, 0);
    h_write("/empty", "", 0, 0, 0644);
    h_write("/odd/setuid-tool", "#!/bin/sh\necho hi\n", 18, 0, 04755);
    h_write("/odd/na\xc3\xafve-\xc3\xbc.txt", "utf-8 name\n", 11, 0, 0644);
    h_write("/odd/a=b,c;d", "punctuation\n", 12, 0, 0644);
    h_check(link(hp("/docs/chapter1.txt"), hp("/docs/hard-link.txt")), "link",
            "/docs/hard-link.txt");
    h_check(symlink("docs/chapter3.txt", hp("/latest")), "symlink", "/latest");
    h_check(symlink("../missing/target with space", hp("/odd/dangling")), "symlink",
            "/odd/dangling");
    h_check(mkfifo(hp("/odd/pipe"), 0620), "mkfifo", "/odd/pipe");
    chmod(hp("/odd/pipe"), 0620);
    if (geteuid() == 0) { /* device nodes need root on the host */
        h_check(mknod(hp("/odd/null"), S_IFCHR | 0666, makedev(1, 3)), "mknod", "/odd/null");
        chmod(hp("/odd/null"), 0666);
        h_check(mknod(hp("/odd/loop9"), S_IFBLK | 0660, makedev(7, 9)), "mknod", "/odd/loop9");
        chmod(hp("/odd/loop9"), 0660);
        h_check(lchown(hp("/src/util_copy.c"), 1234, 5678), "chown", "/src/util_copy.c");
        h_check(lchown(hp("/odd"), 4321, 8765), "chown", "/odd");
        h_check(lchown(hp("/latest"), 1234, 5678), "chown", "/latest");
        h_check(lsetxattr(hp("/docs/chapter2.txt"), "trusted.gmtf-test", "t", 1, 0), "xattr",
                "/docs/chapter2.txt");
    }
    h_check(lsetxattr(hp("/README.txt"), "user.comment", "read me first", 13, 0), "xattr",
            "/README.txt");
    uint8_t all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (uint8_t)i;
    h_check(lsetxattr(hp("/big/noise.bin"), "user.bytes", all, sizeof all, 0), "xattr",
            "/big/noise.bin");
    h_check(lsetxattr(hp("/docs"), "user.dir-attr", "", 0, 0), "xattr", "/docs");
    set_all_times();
}

/* ---- large: blocks of 1 MiB, for frame version 2's parallel method ---------- */

/* A tree for mkfs.gmtf -b 1M: one file of a full 1 MiB block and a tail
 * (the block takes version 2's method 2, the 32 rANS lanes, which only
 * blocks of 900 KiB or more take; the tail method 3), and small files that
 * share one frame. */
static void make_large(const char *dir)
{
    snprintf(root_dir, sizeof root_dir, "%s", dir);
    if (mkdir(dir, 0755))
        die("mkdir %s: %s", dir, strerror(errno));
    chmod(dir, 0755);
    h_check(mkdir(hp("/text"), 0755), "mkdir", "/text");
    size_t n = (1u << 20) + 30000;
    char *t = prose(n, 900);
    h_write("/text/book.txt", t, n, 0, 0644);
    free(t);
    for (int i = 0; i < 6; i++) {
        char rel[64];
        size_t m = 700u + (size_t)i * 311u;
        snprintf(rel, sizeof rel, "/text/note%d.c", i);
        char *c = c_source(m, 910u + (uint64_t)i);
        h_write(rel, c, m, 0, 0644);
        free(c);
    }
    set_all_times();
}

/* ---- ops: a workload through the library, mirrored on the host ------------- */

static gmtf_fs *fs;

static void ck(long rc, const char *what, const char *rel)
{
    if (rc < 0)
        die("%s %s: %s", what, rel, strerror((int)-rc));
}

/* Inode of an absolute path in the image ("/" = root). */
static uint64_t ino_of(const char *rel)
{
    uint64_t ino = GMTF_ROOT_INO;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", rel);
    for (char *save, *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        gmtf_entry e;
        ck(gmtf_fs_lookup(fs, ino, c, &e), "lookup", rel);
        ino = e.attr.st_ino;
    }
    return ino;
}

/* Parent inode and leaf name of rel. */
static uint64_t parent_of(const char *rel, const char **leaf)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s", rel);
    char *s = strrchr(buf, '/');
    *leaf = rel + (s - buf) + 1;
    if (s == buf)
        return GMTF_ROOT_INO;
    *s = 0;
    return ino_of(buf);
}

static void o_mkdir(const char *rel, mode_t mode)
{
    const char *leaf;
    uint64_t p = parent_of(rel, &leaf);
    gmtf_entry e;
    ck(gmtf_fs_mkdir(fs, p, leaf, mode, getuid(), getgid(), &e), "mkdir", rel);
    h_check(mkdir(hp(rel), mode), "mkdir", rel);
    h_check(chmod(hp(rel), mode), "chmod", rel);
}

static void o_write(const char *rel, const void *data, size_t n, uint64_t off, int create_mode)
{
    uint64_t ino;
    if (create_mode) {
        const char *leaf;
        uint64_t p = parent_of(rel, &leaf);
        gmtf_entry e;
        ck(gmtf_fs_create(fs, p, leaf, (mode_t)create_mode, getuid(), getgid(), 0, &e), "create",
           rel);
        ino = e.attr.st_ino;
    } else {
        ino = ino_of(rel);
        ck(gmtf_fs_open(fs, ino, O_WRONLY), "open", rel);
    }
    ck(gmtf_fs_write(fs, ino, data, n, off), "write", rel);
    ck(gmtf_fs_release(fs, ino), "release", rel);
    h_write(rel, data, n, (off_t)off, create_mode);
}

static void o_fsync(const char *rel)
{
    ck(gmtf_fs_fsync(fs, ino_of(rel), 0), "fsync", rel);
}

static void o_mknod(const char *rel, mode_t mode, dev_t rdev)
{
    const char *leaf;
    uint64_t p = parent_of(rel, &leaf);
    gmtf_entry e;
    ck(gmtf_fs_mknod(fs, p, leaf, mode, rdev, getuid(), getgid(), &e), "mknod", rel);
    h_check(mknod(hp(rel), mode, rdev), "mknod", rel);
    h_check(chmod(hp(rel), mode & 07777), "chmod", rel);
}

static void o_symlink(const char *rel, const char *target)
{
    const char *leaf;
    uint64_t p = parent_of(rel, &leaf);
    gmtf_entry e;
    ck(gmtf_fs_symlink(fs, p, leaf, target, getuid(), getgid(), &e), "symlink", rel);
    h_check(symlink(target, hp(rel)), "symlink", rel);
}

static void o_link(const char *from, const char *to)
{
    const char *leaf;
    uint64_t p = parent_of(to, &leaf);
    gmtf_entry e;
    ck(gmtf_fs_link(fs, ino_of(from), p, leaf, &e), "link", to);
    h_check(link(hp(from), hp(to)), "link", to);
}

static void o_rename(const char *from, const char *to, unsigned flags)
{
    const char *l1, *l2;
    uint64_t p1 = parent_of(from, &l1);
    char l1b[256];
    snprintf(l1b, sizeof l1b, "%s", l1);
    uint64_t p2 = parent_of(to, &l2);
    ck(gmtf_fs_rename(fs, p1, l1b, p2, l2, flags), "rename", from);
    h_check(renameat2(AT_FDCWD, hp(from), AT_FDCWD, hp(to), flags), "rename", from);
}

static void o_unlink(const char *rel)
{
    const char *leaf;
    uint64_t p = parent_of(rel, &leaf);
    ck(gmtf_fs_unlink(fs, p, leaf), "unlink", rel);
    h_check(unlink(hp(rel)), "unlink", rel);
}

static void o_rmdir(const char *rel)
{
    const char *leaf;
    uint64_t p = parent_of(rel, &leaf);
    ck(gmtf_fs_rmdir(fs, p, leaf), "rmdir", rel);
    h_check(rmdir(hp(rel)), "rmdir", rel);
}

static void o_truncate(const char *rel, uint64_t size)
{
    struct stat st = {.st_size = (off_t)size};
    ck(gmtf_fs_setattr(fs, ino_of(rel), &st, GMTF_SET_SIZE, NULL), "truncate", rel);
    h_check(truncate(hp(rel), (off_t)size), "truncate", rel);
}

static void o_punch(const char *rel, uint64_t off, uint64_t len)
{
    ck(gmtf_fs_fallocate(fs, ino_of(rel), GMTF_FALLOC_PUNCH_HOLE | GMTF_FALLOC_KEEP_SIZE, off, len),
       "punch", rel);
    int fd = open(hp(rel), O_WRONLY);
    h_check(fd < 0 ||
                fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len),
            "punch", rel);
    close(fd);
}

static void o_chmod(const char *rel, mode_t mode)
{
    struct stat st = {.st_mode = mode};
    ck(gmtf_fs_setattr(fs, ino_of(rel), &st, GMTF_SET_MODE, NULL), "chmod", rel);
    h_check(chmod(hp(rel), mode), "chmod", rel);
}

static void o_chown(const char *rel, uid_t uid, gid_t gid)
{
    struct stat st = {.st_uid = uid, .st_gid = gid};
    ck(gmtf_fs_setattr(fs, ino_of(rel), &st, GMTF_SET_UID | GMTF_SET_GID, NULL), "chown", rel);
    h_check(lchown(hp(rel), uid, gid), "chown", rel);
}

static void o_setxattr(const char *rel, const char *name, const void *v, size_t n)
{
    ck(gmtf_fs_setxattr(fs, ino_of(rel), name, v, n, 0), "setxattr", rel);
    h_check(lsetxattr(hp(rel), name, v, n, 0), "setxattr", rel);
}

static void o_removexattr(const char *rel, const char *name)
{
    ck(gmtf_fs_removexattr(fs, ino_of(rel), name), "removexattr", rel);
    h_check(lremovexattr(hp(rel), name), "removexattr", rel);
}

static int image_times(const char *rel, const struct timespec ts[2])
{
    struct stat st = {0};
    st.st_atim = ts[0];
    st.st_mtim = ts[1];
    return gmtf_fs_setattr(fs, ino_of(rel), &st, GMTF_SET_ATIME | GMTF_SET_MTIME, NULL) ? 1 : 0;
}

/* The image in memory outlives mounts: the library closes the gmtf_image
 * it is given, this one's close keeps the bytes. */
static gmtf_image *disk;

static int k_pread(void *c, void *b, size_t n, uint64_t o)
{
    (void)c;
    return disk->ops->pread(disk->ctx, b, n, o);
}

static int k_pwrite(void *c, const void *b, size_t n, uint64_t o)
{
    (void)c;
    return disk->ops->pwrite(disk->ctx, b, n, o);
}

static int k_flush(void *c)
{
    (void)c;
    return disk->ops->flush(disk->ctx);
}

static int k_size(void *c, uint64_t *s)
{
    (void)c;
    return disk->ops->size(disk->ctx, s);
}

static int k_truncate(void *c, uint64_t s)
{
    (void)c;
    return disk->ops->truncate(disk->ctx, s);
}

static void k_close(void *c)
{
    (void)c;
}

static const gmtf_image_ops keep_ops = {
    .pread = k_pread,
    .pwrite = k_pwrite,
    .flush = k_flush,
    .size = k_size,
    .truncate = k_truncate,
    .close = k_close,
};

static gmtf_image *disk_attach(void)
{
    gmtf_image *img = calloc(1, sizeof *img);
    if (!img)
        die("out of memory");
    img->ops = &keep_ops;
    return img;
}

static void save_image(const char *path)
{
    size_t len;
    const uint8_t *p = gmtf_image_mem_data(disk, &len);
    FILE *f = fopen(path, "wb");
    if (!p || !f || fwrite(p, 1, len, f) != len || fclose(f))
        die("%s: cannot write", path);
}

static void quiet_log(void *arg, const char *msg)
{
    (void)arg;
    (void)msg;
}

static void make_ops(const char *clean, const char *crash, const char *mirror)
{
    snprintf(root_dir, sizeof root_dir, "%s", mirror);
    if (mkdir(mirror, 0755) || chmod(mirror, 0755))
        die("mkdir %s: %s", mirror, strerror(errno));
    if (gmtf_image_open_mem(NULL, 0, &disk))
        die("memory image");
    static const uint8_t uuid[16] = {0x67, 0x6d, 0x74, 0x66, 0x2d, 0x76, 0x31, 0x2d,
                                     0x6f, 0x70, 0x73, 0x2d, 0x69, 0x6d, 0x67, 0x21};
    gmtf_mkfs_options mo = {.block_size = BS, .label = "gmtf-v1-ops", .uuid = uuid};
    ck(gmtf_fs_mkfs(disk, &mo), "mkfs", "(memory)");
    /* The smallest journal while the bulk is written (checkpoints come
     * often, the image stays compact); a larger one for the staged phase. */
    gmtf_fs_options fo = {.threads = 1, .journal_bytes = 16u << 10, .log = quiet_log};
    ck(gmtf_fs_mount(disk_attach(), &fo, &fs), "mount", "(memory)");
    ck(gmtf_fs_setattr(fs, GMTF_ROOT_INO, &(struct stat){.st_uid = getuid(), .st_gid = getgid()},
                       GMTF_SET_UID | GMTF_SET_GID, NULL),
       "chown", "/");

    o_mkdir("/etc", 0755);
    o_mkdir("/var", 0755);
    o_mkdir("/var/db", 0750);
    o_mkdir("/tmpdir", 01777);
    for (int i = 0; i < 10; i++) { /* small files, packed */
        char rel[64];
        snprintf(rel, sizeof rel, "/etc/conf%d.txt", i);
        size_t n = 100u + (size_t)i * 211u;
        char *t = prose(n, 600u + (uint64_t)i);
        o_write(rel, t, n, 0, 0644);
        free(t);
    }
    char *lg = log_lines(90000, 700);
    o_write("/var/log.txt", lg, 90000, 0, 0640);
    /* Two identical files flushed in one batch: stored once. */
    char *dup = c_source(20000, 800);
    o_write("/var/dup-a.c", dup, 20000, 0, 0644);
    o_write("/var/dup-b.c", dup, 20000, 0, 0644);
    o_write("/var/db/table", lg + 1000, 80000, 0, 0600);
    ck(gmtf_fs_syncfs(fs), "syncfs", "/");
    free(lg);
    free(dup);

    /* Changes on top of stored data. */
    o_write("/var/dup-b.c", "/* changed: copy on write */\n", 29, 100, 0);
    o_truncate("/var/log.txt", 70001);                       /* cut inside a block */
    o_truncate("/etc/conf9.txt", 300000);                    /* extend: a hole at the end */
    o_punch("/var/db/table", 10000, 70000);                  /* a whole block and parts */
    o_write("/var/sparse", "far away\n", 9, 5u << 20, 0644); /* 5 MiB of hole first */
    o_link("/etc/conf1.txt", "/var/conf1-link");
    o_symlink("/etc/current", "conf2.txt");
    o_symlink("/var/abs", "/etc/conf3.txt");
    o_mknod("/var/fifo", S_IFIFO | 0640, 0);
    if (geteuid() == 0) {
        o_mknod("/var/zero", S_IFCHR | 0666, makedev(1, 5));
        o_mknod("/var/sock", S_IFSOCK | 0755, 0);
        o_chown("/etc/conf4.txt", 1000, 100);
        o_chown("/var/abs", 2000, 200);
    }
    o_rename("/etc/conf5.txt", "/etc/conf6.txt", 0); /* replaces conf6 */
    o_rename("/etc/conf7.txt", "/var/conf7.txt", 0); /* across directories */
    o_rename("/etc/conf8.txt", "/etc/conf0.txt", GMTF_RENAME_EXCHANGE);
    o_unlink("/etc/conf2.txt"); /* /etc/current now dangles */
    o_mkdir("/gone", 0755);
    o_rmdir("/gone");
    o_chmod("/etc/conf3.txt", 0400);
    o_chmod("/var/db", 0700);
    o_setxattr("/etc/conf1.txt", "user.a", "first", 5);
    o_setxattr("/etc/conf1.txt", "user.b", "second", 6);
    o_setxattr("/etc/conf1.txt", "user.a", "replaced", 8);
    o_removexattr("/etc/conf1.txt", "user.b");
    o_setxattr("/var", "user.dir", "x", 1);
    ck(gmtf_fs_syncfs(fs), "syncfs", "/");

    ck(gmtf_fs_unmount(fs), "unmount", "(memory)");
    fo.journal_bytes = 32u << 10;
    ck(gmtf_fs_mount(disk_attach(), &fo, &fs), "mount", "(memory)");

    /* Small fsynced writes: staged in the journal, not compressed. */
    o_write("/var/db/table", "ROW-0001 committed\n", 19, 4096, 0);
    o_write("/var/db/table", "ROW-0002 committed\n", 19, 150000, 0); /* extends */
    o_fsync("/var/db/table");
    o_write("/etc/conf0.txt", "appended line\n", 14, 100, 0);
    o_fsync("/etc/conf0.txt");
    o_setxattr("/var/db/table", "user.rows", "2", 1);
    time_hook = image_times;
    set_all_times();
    o_fsync("/var/db/table"); /* the times and the xattr ride in this commit */

    gmtf_fs_info info;
    gmtf_fs_get_info(fs, &info);
    if (info.dirty_bytes == 0)
        die("no dirty (staged) data left: the crash image would have nothing to replay");
    save_image(crash);
    ck(gmtf_fs_unmount(fs), "unmount", "(memory)");
    fs = NULL;
    save_image(clean);
    gmtf_image_close(disk);
}

/* Mounts the image file read-write and unmounts it until its length stops
 * shrinking: each unmount's checkpoints move metadata towards the start
 * and give the end back, so the committed images are as small as the
 * format allows. */
static void settle(const char *path)
{
    for (int round = 0; round < 8; round++) {
        struct stat before, after;
        if (stat(path, &before))
            die("%s: %s", path, strerror(errno));
        gmtf_image *img;
        ck(gmtf_image_open_file(path, 0, &img), "open", path);
        gmtf_fs_options fo = {.threads = 1, .journal_bytes = 64u << 10, .log = quiet_log};
        ck(gmtf_fs_mount(img, &fo, &fs), "mount", path);
        ck(gmtf_fs_unmount(fs), "unmount", path);
        if (stat(path, &after))
            die("%s: %s", path, strerror(errno));
        if (after.st_size >= before.st_size)
            break;
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "tree")) {
        make_tree(argv[2]);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "large")) {
        make_large(argv[2]);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "settle")) {
        settle(argv[2]);
        return 0;
    }
    if (argc == 5 && !strcmp(argv[1], "ops")) {
        make_ops(argv[2], argv[3], argv[4]);
        return 0;
    }
    fprintf(stderr, "usage: gen_images tree SRCDIR\n"
                    "       gen_images large SRCDIR\n"
                    "       gen_images ops CLEAN.img CRASH.img MIRRORDIR\n"
                    "       gen_images settle IMAGE\n");
    return 2;
}
