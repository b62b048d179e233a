/* gmtf-extract's pieces (gmtf_extract.c is the command line and the walk
 * of the image): a sink takes the walk's entries one by one, in order
 * (a directory before what it holds; its end after). Sinks: a directory
 * on disk (extract_disk.c), an archive or a listing (extract_archive.c).
 * Both read data and extended attributes through extract_data.c. */
#ifndef GMTF_TOOLS_EXTRACT_H
#define GMTF_TOOLS_EXTRACT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "cli.h"
#include "gmtf_fs.h"

/* ---- the source: data, xattrs, messages (extract_data.c) ----------------- */

typedef struct xsrc {
    gmtf_fs *fs;
    const char *prog;
    cli_progress line;
    uint8_t *buf; /* XSRC_BUF bytes */
    uint64_t errors;
    /* progress (atomic: a thread draws it) */
    uint64_t files, bytes;
    uint64_t files_total, bytes_total;
} xsrc;

#define XSRC_BUF (1u << 20)

/* A message about path on stderr ("PROG: PATH: ..."), counted as an error. */
void xsrc_error(xsrc *x, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Calls fn for the data of regular file ino (size bytes) in pieces of at
 * most XSRC_BUF bytes, in order, skipping holes. fn returns 0 or a
 * negative errno (stops). Returns 0 or a negative errno; a read error is
 * reported against path. */
typedef int (*xdata_fn)(void *arg, const void *data, size_t len, uint64_t off);
int xsrc_data(xsrc *x, uint64_t ino, uint64_t size, const char *path, xdata_fn fn, void *arg);
/* The data ranges of ino ([off, off+len) pairs, *n of them, malloc'ed):
 * what is not in them reads as zeros. 0 or a negative errno. */
int xsrc_ranges(xsrc *x, uint64_t ino, uint64_t size, uint64_t **ranges, size_t *n);

/* The extended attributes of ino: names (NUL-separated, *names_len bytes)
 * and a value each; xattrs_free frees them. 0 or a negative errno. */
typedef struct xattrs {
    char *names;
    size_t names_len, count;
    char **name;     /* count pointers into names */
    uint8_t **value; /* count values */
    size_t *size;
} xattrs;
int xsrc_xattrs(xsrc *x, uint64_t ino, xattrs *out);
void xattrs_free(xattrs *a);

/* name with every byte that is not printable UTF-8 (controls, backslash,
 * invalid sequences) as a C escape (\n, \\, \351), into buf (cap bytes;
 * cut short when it does not fit). For listings and messages. */
const char *xsrc_quote(const char *name, char *buf, size_t cap);

/* ---- what the walk hands to a sink ---------------------------------------- */

typedef struct xnode {
    const char *path;   /* relative to the extraction root ("" for the root) */
    const char *name;   /* its last component */
    struct stat st;     /* from gmtf_fs_getattr (st_ino: the image's inode) */
    const char *target; /* a symlink's target */
    const char *link;   /* a hard link: the path extracted first, else NULL */
    int implied;        /* a parent of a PATH operand: made, not extracted */
} xnode;

typedef struct xsink {
    void *ctx;
    /* An entry; a directory is entered after it returns 0 (else its
     * contents are skipped). Errors are reported by the sink. */
    int (*node)(void *ctx, xsrc *x, const xnode *n);
    /* The end of a directory node() entered: its attributes go last. */
    void (*dir_end)(void *ctx, xsrc *x, const xnode *n);
} xsink;

/* ---- a directory on disk (extract_disk.c) ----------------------------------- */

typedef struct xdisk xdisk;
/* Extracts into dir (made when missing; then the root's attributes are
 * given to it). same_owner: chown to the image's owners (root's default).
 * Nothing is ever written outside dir: every name is made relative to a
 * directory descriptor opened without following symbolic links. */
int xdisk_open(xdisk **out, const char *dir, int same_owner, xsink *sink, const char *prog);
/* Applies the root's attributes when xdisk_open made dir; closes. */
int xdisk_close(xdisk *d, xsrc *x, const xnode *root);

/* ---- an archive or a listing (extract_archive.c) ---------------------------- */

typedef struct xarchive xarchive;
/* An archive of format (libarchive's name: pax, ustar, gnutar, cpio, newc,
 * zip, 7zip...) and filter (gzip, bzip2, xz, zstd..., NULL: none, or what
 * out's suffix says) to out ("-": stdout). Messages name prog. */
int xarchive_open(xarchive **out_a, const char *format, const char *filter, const char *out,
                  xsink *sink, const char *prog);
/* A listing like tar -tv on stdout (verbose 0: paths only, like tar -t). */
int xarchive_list(xarchive **out_a, int verbose, xsink *sink);
/* Writes what is pending (hard links of cpio formats), closes. 0 or -1. */
int xarchive_close(xarchive *a, xsrc *x);

#endif
