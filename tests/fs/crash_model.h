/* The oracle of the crash and fault tests: a workload runs its operations
 * through these wrappers, which call the public API on the live filesystem
 * and keep what a crash may and may not lose:
 * - every file's writes, truncates and punches, with the data written, so a
 *   byte found after a crash can be traced to a write that put it there;
 * - after every operation, what the live filesystem shows: the namespace
 *   (a hash of every entry) and each inode's attributes (mode, owner, size,
 *   link count, times, xattrs): a crash state must show one of these;
 * - every fsync, fdatasync and syncfs that returned 0, with the position in
 *   the image's op log (crash_dev.h) when it returned.
 * A crash state is then checked (cm_check_state): fsck -n finds no error,
 * a read-only mount writes nothing and the state it shows matches the
 * model (below; every file is read whole, so every frame a file maps is
 * decoded and checked), a read-write mount and its unmount succeed, fsck -y
 * then finds nothing it cannot leave clean, and a last mount still matches.
 *
 * Matching, for a crash after `crash_pos` ops of the log (the acks that
 * returned before then apply):
 * - the namespace is the live namespace after some operation at or after
 *   the last acknowledged sync (records are journaled in order);
 * - a file's attributes are those it had after some operation, at or after
 *   its last fsync/syncfs (fdatasync: its size at or after);
 * - every byte of a file is the byte it held at its last fsync, fdatasync
 *   or syncfs, or a byte a later write put at that offset, or zero where a
 *   later truncate or punch, or a hole, allows; with no sync, any byte some
 *   write put at that offset, or zero. */
#ifndef CRASH_MODEL_H
#define CRASH_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "crash_dev.h"
#include "gmtf_fs.h"

typedef struct cm_model cm_model;

#define CM_ROOT 0 /* node of the root directory */

/* A model over disk d (the workload's disk, recording); the filesystem on
 * it is mounted by cm_mount. opt: mount options (NULL: small journal and
 * write-back cache, so that checkpoints and flushes happen often). */
cm_model *cm_new(cdev *d, const gmtf_fs_options *opt);
void cm_free(cm_model *m);
void cm_set_name(cm_model *m, const char *name); /* in messages and dump file names */
gmtf_fs *cm_fs(cm_model *m);
cdev *cm_dev(cm_model *m);
const char *cm_name(cm_model *m, int node); /* a path of node now (for messages) */
uint64_t cm_ino(cm_model *m, int node);
int cm_node_is_dir(cm_model *m, int node);
int cm_node_is_file(cm_model *m, int node);
uint64_t cm_size(cm_model *m, int node); /* current size of a file */
/* Bytes of node's content now according to the model (caller frees). */
uint8_t *cm_content(cm_model *m, int node, uint64_t *size);

/* Mount / unmount on the disk. cm_mount: 0 or the error. cm_unmount: a
 * clean unmount (an acknowledgement of everything). */
int cm_mount(cm_model *m);
int cm_unmount(cm_model *m);
/* A crash now (power cut, the process gone: open files with it), then a
 * mount of what the disk holds. The state found is checked against the
 * model and becomes the model's. Returns the mount's error or 0. */
int cm_crash_and_mount(cm_model *m);
/* The same after an unmount that failed (the filesystem is gone). */
int cm_mount_after_failure(cm_model *m);

/* Operations: each returns what the API returned; node outputs may be
 * NULL. Created files stay open until cm_release. */
int cm_create(cm_model *m, int dir, const char *name, mode_t mode, int *node);
int cm_mkdir(cm_model *m, int dir, const char *name, mode_t mode, int *node);
int cm_symlink(cm_model *m, int dir, const char *name, const char *target, int *node);
int cm_mknod(cm_model *m, int dir, const char *name, mode_t mode, int *node);
int cm_link(cm_model *m, int node, int dir, const char *name);
int cm_unlink(cm_model *m, int dir, const char *name);
int cm_rmdir(cm_model *m, int dir, const char *name);
int cm_rename(cm_model *m, int dir, const char *name, int newdir, const char *newname,
              unsigned flags);
long cm_write(cm_model *m, int node, uint64_t off, const void *data, size_t len);
int cm_truncate(cm_model *m, int node, uint64_t size);
int cm_punch(cm_model *m, int node, uint64_t off, uint64_t len);
int cm_extend(cm_model *m, int node, uint64_t off, uint64_t len); /* fallocate mode 0 */
int cm_chmod(cm_model *m, int node, mode_t mode);
int cm_setxattr(cm_model *m, int node, const char *name, const void *v, size_t len);
int cm_removexattr(cm_model *m, int node, const char *name);
int cm_open(cm_model *m, int node, int trunc);
int cm_release(cm_model *m, int node);
int cm_fsync(cm_model *m, int node, int datasync);
int cm_syncfs(cm_model *m);
/* Looks name up in dir now: its node, or -1. */
int cm_lookup(cm_model *m, int dir, const char *name);
/* Every entry now: count (at most cap), with the node of its directory. */
size_t cm_entries(cm_model *m, int *dirs, char names[][64], int *nodes, size_t cap);

/* After an operation failed on node (a fault): the live file is checked
 * (each byte as before or as the failed write would have made it, the size
 * old or new) and taken as the model's. 0, or -EUCLEAN (reported). */
int cm_resync_node(cm_model *m, int node);
/* A hash of a filesystem's namespace and of each inode's type, links and
 * size (the live one, or another mount of the same image). */
uint64_t cm_live_hash(cm_model *m);
uint64_t cm_fs_hash(cm_model *m, gmtf_fs *fs);
/* Compares the live filesystem with the model now: exact. 0 = equal. */
int cm_verify_live(cm_model *m);

/* ---- checking states ---------------------------------------------------------- */

/* Checks a mounted filesystem against the model for a crash after
 * crash_pos ops (SIZE_MAX: after everything, all acks apply, and the
 * namespace must be the latest). Returns 0, or 1 with the reason printed
 * under label. */
int cm_verify(cm_model *m, gmtf_fs *fs, size_t crash_pos, const char *label);

#define CM_CHECK_NO_RW 0x1  /* skip the read-write mount / fsck -y part */
#define CM_CHECK_VERIFY 0x2 /* fsck -n also decodes every frame (--verify-data) */

/* The whole check of one crash state (see the top of this file). Returns
 * 0 if it passed, else 1 (the reason printed with desc). With the
 * environment variable GMTF_CRASH_DUMP=DIR, a failing state's bytes are
 * written to DIR/<name>-<n>.img. */
int cm_check_state(cm_model *m, const uint8_t *img, size_t len, size_t crash_pos, const char *desc,
                   unsigned flags);

/* fsck of bytes: rc of gmtf_fs_check; errors/warnings out; the first
 * problem lines into msg. repair: runs fsck -y on d instead (d changes). */
int cm_fsck(const uint8_t *img, size_t len, int verify, unsigned *errors, unsigned *warnings,
            char *msg, size_t msgcap);
int cm_fsck_dev(cdev *d, int repair, int verify, unsigned *errors, unsigned *warnings, char *msg,
                size_t msgcap);
/* The same with the whole report. */
int cm_fsck_rep(cdev *d, int repair, int verify, gmtf_fs_check_report *rep, char *msg,
                size_t msgcap);
/* A hash of everything a filesystem shows but times: names, inode types,
 * modes, owners, links, sizes, xattrs, symlink targets, file bytes. */
uint64_t cm_content_hash(gmtf_fs *fs);

/* Deterministic bytes for tests: xorshift, a small alphabet (compressible)
 * or all 256 values (random). */
void cm_fill(uint8_t *p, size_t n, uint64_t seed, int random);
uint64_t cm_rand(uint64_t *s);

#endif
