/* The images the hostile tests start from, what they held at every commit,
 * a bounded walk that reads everything a mount shows, and a runner that
 * bounds a test case's time and memory. */
#ifndef HOSTILE_HWORK_H
#define HOSTILE_HWORK_H

#include <stddef.h>
#include <stdint.h>

#include "gmtf_fs.h"

/* Facts a walk sees: (key, value) pairs, e.g. (hash of path and "file",
 * hash of the content). The oracle is the union of the facts of every
 * committed state. */
typedef struct hfacts {
    uint64_t (*v)[2];
    size_t n, cap;
} hfacts;

void hfacts_free(hfacts *f);
void hfacts_sort(hfacts *f); /* and drops repeats */
int hfacts_has(const hfacts *f, uint64_t key, uint64_t value);

/* Base images: mkfs + a workload of files (empty, small, multi-block,
 * sparse), directories, symlinks, a hard link, a fifo, xattrs, renames,
 * truncates, unlinks, commits and an fsync that stages bytes in the
 * journal. variant 0: taken while mounted (journal holds records); 1: after
 * a clean unmount; 2: like 0 on an image with a capacity. oracle (may be
 * NULL) gets the facts of every committed state. */
#define HWORK_VARIANTS 3
/* Nonzero: the mutator's images (tests/fs/test_fs_mutate.c), the same
 * workload with file contents that repeat a tagged sector: decoding the
 * frames of the full contents was half of a case's time. */
extern int hwork_cheap;
int hwork_build(int variant, uint8_t **img, size_t *len, hfacts *oracle);

typedef struct hwalk_stats {
    unsigned dirs, files, links, xattrs, others, errors;
    uint64_t bytes; /* file bytes read */
} hwalk_stats;

typedef struct hdirent {
    uint64_t ino;
    char name[256];
} hdirent;

/* The entries of directory dir (no "." and ".."), at most 100000: a
 * malloc'd array (NULL when none) of *n. */
hdirent *hwalk_list(gmtf_fs *fs, uint64_t dir, size_t *n);

/* Reads every directory, file (data regions only past 4 MiB, at most 64 MiB
 * in all), symlink and xattr reachable from the root, once per directory
 * inode, at most 64 levels deep. facts (may be NULL) gets what it saw. */
void hwalk(gmtf_fs *fs, hfacts *facts, hwalk_stats *st);

/* A session of changes on a read-write mount, as a user would make them:
 * create new-file, write two blocks, fsync, change 100 bytes, fsync
 * (staged), mkdir new-dir, rename it to new-dir/moved; create a file in the
 * first directory; overwrite and truncate the first file of the root,
 * unlink the second; setxattr; syncfs. Returns how many operations failed
 * for another reason than -ENOSPC (on a sound image: none); *durable:
 * new-dir/moved was made and synced. */
int hwork_session(gmtf_fs *fs, int *durable);
/* After a session (remounted): new-dir/moved holds what was written: 0,
 * -ENOENT, -EBADMSG (other bytes) or the read's error. */
int hwork_session_check(gmtf_fs *fs);

/* Runs fn(arg) in a child process limited to seconds of time (six times
 * that under ASan, times $GMTF_HOSTILE_TIME_SCALE if set) and (outside ASan,
 * which reserves terabytes of shadow) mem bytes of address space.
 * Returns fn's result (0..255), or -1 with why set (timeout, signal). */
int hbound_run(int (*fn)(void *arg), void *arg, unsigned seconds, uint64_t mem, char *why,
               size_t whylen);

/* An in-memory image of len bytes (a copy) opened through gmtf_image_open_mem. */
gmtf_image *himage_mem(const uint8_t *p, size_t len);

#endif
