/* mkfs.gmtf's import: fills a mounted gmtf filesystem from a directory tree
 * or from an archive (anything libarchive reads, "-" for a stream on
 * stdin), through the filesystem library's own calls. Hard links, symbolic
 * links, special files, extended attributes, owners, modes and times come
 * along; sparse files keep their holes. The CLI is mkfs_gmtf.c. */
#ifndef GMTF_MKFS_IMPORT_H
#define GMTF_MKFS_IMPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "cli.h"
#include "gmtf_fs.h"

struct archive;
struct mkfs_dir_attr;
struct mkfs_link;

typedef struct mkfs_import {
    gmtf_fs *fs;
    const char *prog; /* for messages */
    cli_progress line;
    /* what was imported */
    uint64_t files, dirs, links, symlinks, others, bytes_in;
    uint64_t errors; /* entries that could not be read or stored (reported) */
    /* private */
    uint64_t src_total; /* archive size for the ETA, 0 unknown */
    struct archive *ar;
    uint8_t *buf;
    struct mkfs_dir_attr *dattr; /* applied last: children change a directory's times */
    size_t ndattr, dattr_cap;
    struct mkfs_link *lk; /* hard-linked source inodes seen */
    size_t nlk, lk_cap;
    volatile int *stop; /* set (by a signal handler): the import ends, returning -4 */
} mkfs_import;

/* Starts an import into fs (mounted). quiet: no progress line. 0 or
 * -ENOMEM. */
int mkfs_import_init(mkfs_import *im, gmtf_fs *fs, const char *prog, int quiet);
/* Imports src: a directory, an archive file or "-". Entries that fail are
 * reported on stderr and counted in errors, and the import goes on.
 * Returns 0, -1 when src cannot be read at all (reported), -2 when the
 * image is full, -4 when *stop was set. */
int mkfs_import_from(mkfs_import *im, const char *src);
/* Draws the progress line a last time and keeps it on the screen. */
void mkfs_import_progress_end(mkfs_import *im);
void mkfs_import_free(mkfs_import *im);

#endif
