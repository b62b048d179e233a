/* gmtf-extract to an archive (any format libarchive writes) or as a
 * listing like tar -tv (extract.h). Hard links go through libarchive's
 * link resolver, so each format gets its own convention (tar: later links
 * name the first; newc: the data with the last); sparse files keep their
 * holes where the format can (pax); extended attributes (ACLs among them,
 * as system.posix_acl_*) travel as the format's xattr records. Owners are
 * numeric: the image holds no user names. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "extract.h"

struct xarchive {
    struct archive *ar; /* NULL: a listing */
    struct archive_entry_linkresolver *links;
    int verbose;
};

/* ---- the listing ----------------------------------------------------------------- */

static int list_node(void *ctx, xsrc *x, const xnode *n)
{
    xarchive *a = ctx;
    if (n->implied)
        return 0;
    char q[8192], t[8192];
    const char *path = *n->path ? xsrc_quote(n->path, q, sizeof q) : ".";
    const char *dir = S_ISDIR(n->st.st_mode) && *n->path ? "/" : "";
    if (!S_ISDIR(n->st.st_mode))
        __atomic_add_fetch(&x->files, 1, __ATOMIC_RELAXED);
    if (!a->verbose) {
        printf("%s%s\n", path, dir);
        return 0;
    }
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_mode(e, n->st.st_mode);
    char mode[16];
    snprintf(mode, sizeof mode, "%s", archive_entry_strmode(e));
    archive_entry_free(e);
    mode[10] = 0; /* strmode adds a space (or '+' for ACLs) */
    if (n->link)
        mode[0] = 'h';
    char owner[48], size[48], when[32];
    snprintf(owner, sizeof owner, "%u/%u", (unsigned)n->st.st_uid, (unsigned)n->st.st_gid);
    if (S_ISCHR(n->st.st_mode) || S_ISBLK(n->st.st_mode))
        snprintf(size, sizeof size, "%u,%u", major(n->st.st_rdev), minor(n->st.st_rdev));
    else
        snprintf(size, sizeof size, "%llu",
                 S_ISREG(n->st.st_mode) && !n->link ? (unsigned long long)n->st.st_size : 0ull);
    struct tm tm;
    time_t mt = n->st.st_mtim.tv_sec;
    if (localtime_r(&mt, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
    else
        snprintf(when, sizeof when, "%lld", (long long)mt);
    printf("%s %s %*s %s %s%s", mode, owner, (int)(19 - strlen(owner)), size, when, path, dir);
    if (n->link)
        printf(" link to %s", xsrc_quote(n->link, t, sizeof t));
    else if (S_ISLNK(n->st.st_mode))
        printf(" -> %s", xsrc_quote(n->target ? n->target : "", t, sizeof t));
    putchar('\n');
    return 0;
}

static void list_dir_end(void *ctx, xsrc *x, const xnode *n)
{
    (void)ctx, (void)x, (void)n;
}

int xarchive_list(xarchive **out, int verbose, xsink *sink)
{
    xarchive *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->verbose = verbose;
    sink->ctx = a;
    sink->node = list_node;
    sink->dir_end = list_dir_end;
    *out = a;
    return 0;
}

/* ---- the archive -------------------------------------------------------------------- */

typedef struct piece_ctx {
    struct archive *ar;
    uint64_t at; /* bytes of the entry written so far (holes as zeros) */
} piece_ctx;

static int write_zeros(struct archive *ar, uint64_t n)
{
    static const uint8_t zero[65536];
    while (n) {
        size_t k = n < sizeof zero ? (size_t)n : sizeof zero;
        if (archive_write_data(ar, zero, k) < 0)
            return -EIO;
        n -= k;
    }
    return 0;
}

static int archive_piece(void *arg, const void *data, size_t len, uint64_t off)
{
    piece_ctx *p = arg;
    if (off > p->at && write_zeros(p->ar, off - p->at)) /* a hole: skipped by sparse formats */
        return -EIO;
    const uint8_t *b = data;
    while (len) {
        la_ssize_t w = archive_write_data(p->ar, b, len);
        if (w <= 0)
            return -EIO;
        b += w;
        len -= (size_t)w;
    }
    p->at = off + (uint64_t)(b - (const uint8_t *)data);
    return 0;
}

/* The entry's data: what the image holds, zeros in its holes. */
static void write_body(xarchive *a, xsrc *x, struct archive_entry *e)
{
    uint64_t size = (uint64_t)archive_entry_size(e);
    const char *path = archive_entry_pathname(e);
    piece_ctx p = {a->ar, 0};
    int rc = xsrc_data(x, (uint64_t)archive_entry_ino64(e), size, path, archive_piece, &p);
    if (!rc && p.at < size)
        rc = write_zeros(a->ar, size - p.at);
    if (rc == -EIO && archive_errno(a->ar))
        xsrc_error(x, path, "%s", archive_error_string(a->ar));
}

static void write_entry(xarchive *a, xsrc *x, struct archive_entry *e)
{
    const char *path = archive_entry_pathname(e);
    int r = archive_write_header(a->ar, e);
    const char *why = r < ARCHIVE_OK ? archive_error_string(a->ar) : NULL;
    /* a name that is not UTF-8: pax writes it as its bytes (hdrcharset=BINARY) */
    if (why && !(r == ARCHIVE_WARN && strstr(why, "Can't translate")))
        xsrc_error(x, path, "%s", why);
    if (r >= ARCHIVE_WARN && archive_entry_filetype(e) == AE_IFREG && archive_entry_size(e) > 0)
        write_body(a, x, e);
}

static void add_sparse(xsrc *x, struct archive_entry *e, const xnode *n)
{
    uint64_t *r;
    size_t k;
    if (xsrc_ranges(x, n->st.st_ino, (uint64_t)n->st.st_size, &r, &k))
        return;
    uint64_t data = 0;
    for (size_t i = 0; i < k; i++)
        data += r[2 * i + 1];
    if (data < (uint64_t)n->st.st_size) /* holes: tell the format where the data is */
        for (size_t i = 0; i < k; i++)
            archive_entry_sparse_add_entry(e, (la_int64_t)r[2 * i], (la_int64_t)r[2 * i + 1]);
    free(r);
}

static struct archive_entry *make_entry(xsrc *x, const xnode *n)
{
    struct archive_entry *e = archive_entry_new();
    if (!e)
        return NULL;
    const struct stat *st = &n->st;
    archive_entry_set_pathname(e, *n->path ? n->path : ".");
    archive_entry_set_mode(e, st->st_mode);
    archive_entry_set_uid(e, st->st_uid);
    archive_entry_set_gid(e, st->st_gid);
    archive_entry_set_nlink(e, (unsigned)st->st_nlink);
    archive_entry_set_ino64(e, (la_int64_t)st->st_ino);
    archive_entry_set_dev(e, 1);
    archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
    archive_entry_set_atime(e, st->st_atim.tv_sec, st->st_atim.tv_nsec);
    archive_entry_set_ctime(e, st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
    if (S_ISREG(st->st_mode)) {
        archive_entry_set_size(e, st->st_size);
        add_sparse(x, e, n);
    } else {
        archive_entry_set_size(e, 0);
    }
    if (S_ISLNK(st->st_mode))
        archive_entry_set_symlink(e, n->target ? n->target : "");
    if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
        archive_entry_set_rdev(e, st->st_rdev);
    xattrs xa;
    int rc = xsrc_xattrs(x, st->st_ino, &xa);
    if (rc)
        xsrc_error(x, n->path, "reading its xattrs: %s", strerror(-rc));
    for (size_t i = 0; !rc && i < xa.count; i++)
        archive_entry_xattr_add_entry(e, xa.name[i], xa.value[i], xa.size[i]);
    if (!rc)
        xattrs_free(&xa);
    return e;
}

static int archive_node(void *ctx, xsrc *x, const xnode *n)
{
    xarchive *a = ctx;
    if (n->implied)
        return 0;
    if (!S_ISDIR(n->st.st_mode))
        __atomic_add_fetch(&x->files, 1, __ATOMIC_RELAXED);
    if (S_ISSOCK(n->st.st_mode)) {
        xsrc_error(x, n->path, "a socket: not archived");
        return 0;
    }
    struct archive_entry *e = make_entry(x, n), *spare = NULL;
    if (!e) {
        xsrc_error(x, n->path, "%s", strerror(ENOMEM));
        return -1;
    }
    archive_entry_linkify(a->links, &e, &spare);
    while (e) {
        write_entry(a, x, e);
        archive_entry_free(e);
        e = spare;
        spare = NULL;
    }
    return 0;
}

static void archive_dir_end(void *ctx, xsrc *x, const xnode *n)
{
    (void)ctx, (void)x, (void)n;
}

/* A filter from out's suffix, NULL when none. */
static const char *filter_of(const char *out)
{
    static const char *const map[][2] = {
        {".gz", "gzip"},  {".tgz", "gzip"},  {".bz2", "bzip2"}, {".tbz2", "bzip2"},
        {".xz", "xz"},    {".txz", "xz"},    {".zst", "zstd"},  {".tzst", "zstd"},
        {".lz4", "lz4"},  {".lzma", "lzma"}, {".lz", "lzip"},   {".Z", "compress"},
        {".lzo", "lzop"}, {".grz", "grzip"}, {".lrz", "lrzip"}, {".uu", "uuencode"},
    };
    size_t n = strlen(out);
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        size_t k = strlen(map[i][0]);
        if (n > k && !strcmp(out + n - k, map[i][0]))
            return map[i][1];
    }
    return NULL;
}

int xarchive_open(xarchive **out_a, const char *format, const char *filter, const char *out,
                  xsink *sink, const char *prog)
{
    xarchive *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->ar = archive_write_new();
    a->links = archive_entry_linkresolver_new();
    if (!a->ar || !a->links) {
        fprintf(stderr, "%s: %s\n", prog, strerror(ENOMEM));
        goto fail;
    }
    if (archive_write_set_format_by_name(a->ar, format) != ARCHIVE_OK) {
        fprintf(stderr, "%s: -f %s: %s\n", prog, format, archive_error_string(a->ar));
        goto fail;
    }
    if (!filter && strcmp(out, "-"))
        filter = filter_of(out);
    if (filter && archive_write_add_filter_by_name(a->ar, filter) < ARCHIVE_WARN) {
        fprintf(stderr, "%s: filter %s: %s\n", prog, filter, archive_error_string(a->ar));
        goto fail;
    }
    archive_entry_linkresolver_set_strategy(a->links, archive_format(a->ar));
    /* the same bytes to a file or a pipe: the last block not padded to
     * the full 10 KiB record (readers do not need it) */
    archive_write_set_bytes_in_last_block(a->ar, 1);
    int r = strcmp(out, "-") ? archive_write_open_filename(a->ar, out)
                             : archive_write_open_fd(a->ar, 1);
    if (r != ARCHIVE_OK) {
        fprintf(stderr, "%s: %s: %s\n", prog, out, archive_error_string(a->ar));
        goto fail;
    }
    sink->ctx = a;
    sink->node = archive_node;
    sink->dir_end = archive_dir_end;
    *out_a = a;
    return 0;
fail:
    if (a->ar)
        archive_write_free(a->ar);
    if (a->links)
        archive_entry_linkresolver_free(a->links);
    free(a);
    return -1;
}

int xarchive_close(xarchive *a, xsrc *x)
{
    int rc = 0;
    if (a->ar) {
        struct archive_entry *e = NULL, *spare = NULL;
        for (;;) { /* links the resolver still holds (newc: the last one has the data) */
            archive_entry_linkify(a->links, &e, &spare);
            if (!e)
                break;
            write_entry(a, x, e);
            archive_entry_free(e);
            e = NULL;
        }
        if (archive_write_close(a->ar) != ARCHIVE_OK) {
            xsrc_error(x, "", "closing the archive: %s", archive_error_string(a->ar));
            rc = -1;
        }
        archive_write_free(a->ar);
        archive_entry_linkresolver_free(a->links);
    } else if (fflush(stdout)) {
        rc = -1;
    }
    free(a);
    return rc;
}
