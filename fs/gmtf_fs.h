/* gmtf filesystem library: image format, metadata, data path.
 *
 * An in-process filesystem over one image (a regular file or a block
 * device). The FUSE daemon (tools/gmtf), mkfs.gmtf and fsck.gmtf are thin
 * layers over this API. It mirrors what a libfuse3 low-level daemon needs:
 * inode numbers (GMTF_ROOT_INO == FUSE_ROOT_ID), lookup counts, stable
 * readdir offsets, open-file reference counts.
 *
 * Conventions: every function returns 0 (or a non-negative count) on
 * success and a negative errno code on failure (-ENOENT, -EIO, ...). All
 * functions on one gmtf_fs are thread-safe. The library does no permission
 * checks: the daemon mounts with default_permissions and the kernel checks.
 * On-disk format: docs/format.md. What works today: fs/README.md. */
#ifndef GMTF_FS_H
#define GMTF_FS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GMTF_ROOT_INO 1u
#define GMTF_FS_BLOCK_MIN (64u << 10)
#define GMTF_FS_BLOCK_MAX (16u << 20)
#define GMTF_FS_BLOCK_DEFAULT (16u << 20) /* docs/format.md, "Block size" */
#define GMTF_FS_PACK_DEFAULT (4u << 20)   /* the same, "Pack size" */
/* mkfs.gmtf's block size for an empty image (no --from), to be filled
 * through a mount: a write re-encodes the blocks it touches, and at 16 MiB
 * parallel writers in one file cost twice the CPU (docs/format.md, "Pack
 * size"). Archives made by --from take GMTF_FS_BLOCK_DEFAULT. */
#define GMTF_FS_BLOCK_LIVE (4u << 20)
#define GMTF_FS_LABEL_MAX 63
#define GMTF_FS_NAME_MAX 255
#define GMTF_FS_XATTR_NAME_MAX 255
#define GMTF_FS_XATTR_SIZE_MAX 65536

/* ---- image I/O layer -----------------------------------------------------
 * Every byte the library reads or writes goes through these ops, so tests
 * can record writes, rebuild crash states and inject short writes, ENOSPC
 * and EIO. Each op returns 0 or a negative errno. pread must fill all n
 * bytes (a read past the end is -EIO: the image is truncated); pwrite
 * writes all n bytes or fails; flush makes every completed pwrite durable
 * (fdatasync); size gives the current length; truncate sets it (growable
 * images give space back to the host); host_free (may be NULL) reports
 * bytes free on the host filesystem; close frees ctx; punch (may be NULL)
 * gives [off, off+len) inside the image back to the host without changing
 * the length: the range reads as zeros afterwards (-EOPNOTSUPP when the
 * host cannot). The library punches only space no metadata refers to.
 * reserve (may be NULL) allocates [off, off+len) on the host (fallocate),
 * growing the image if needed, so later writes there cannot fail for lack
 * of space (-ENOSPC now instead; -EOPNOTSUPP when the host cannot).
 * allocated (may be NULL) reports the bytes the host has allocated for the
 * image (holes and punched ranges take none). */
typedef struct gmtf_image_ops {
    int (*pread)(void *ctx, void *buf, size_t n, uint64_t off);
    int (*pwrite)(void *ctx, const void *buf, size_t n, uint64_t off);
    int (*flush)(void *ctx);
    int (*size)(void *ctx, uint64_t *size);
    int (*truncate)(void *ctx, uint64_t size);
    int (*host_free)(void *ctx, uint64_t *bytes);
    void (*close)(void *ctx);
    int (*punch)(void *ctx, uint64_t off, uint64_t len);
    int (*reserve)(void *ctx, uint64_t off, uint64_t len);
    int (*allocated)(void *ctx, uint64_t *bytes);
} gmtf_image_ops;

typedef struct gmtf_image {
    const gmtf_image_ops *ops;
    void *ctx;
    int is_blockdev; /* fixed size: never truncated, capacity = size */
} gmtf_image;

#define GMTF_IMAGE_RDONLY 0x1 /* open read-only, shared lock */
#define GMTF_IMAGE_CREATE 0x2 /* create the file if missing (mkfs) */
#define GMTF_IMAGE_NOLOCK 0x4 /* take no lock (tests only) */

/* Opens a file or block device as an image and locks it: an exclusive OFD
 * lock for read-write, a shared one for RDONLY. Returns -EBUSY when another
 * process holds a conflicting lock (mounted, or mkfs/fsck running). */
int gmtf_image_open_file(const char *path, int flags, gmtf_image **out);
/* An image in memory (tests): starts with the given bytes (copied, may be
 * NULL/0). gmtf_image_mem_data exposes the current bytes. */
int gmtf_image_open_mem(const void *data, size_t len, gmtf_image **out);
const uint8_t *gmtf_image_mem_data(gmtf_image *img, size_t *len);
void gmtf_image_close(gmtf_image *img);

/* ---- make, open, close ------------------------------------------------- */

typedef struct gmtf_mkfs_options {
    uint32_t block_size; /* 0 = GMTF_FS_BLOCK_DEFAULT; power of two in [64 KiB, 16 MiB] */
    /* Pieces of files (small files, tails) of at most pack_size bytes are
     * packed together into frames of at most pack_size (packing in write
     * order, mkfs: up to a block, cut by pieces x bytes: docs/format.md
     * "Pack size"); longer ones are
     * packed among themselves into frames of at most a block when packing
     * in write order (mkfs), else stored one a frame. 0 = the
     * smaller of GMTF_FS_PACK_DEFAULT and the block size; else a power of
     * two in [64 KiB, block_size] (docs/format.md, "Block size"). */
    uint32_t pack_size;
    const char *label;   /* NULL = empty; at most GMTF_FS_LABEL_MAX bytes */
    uint64_t capacity;   /* bytes; 0 = growable (or the device size) */
    const uint8_t *uuid; /* 16 bytes, kept as given; NULL = random (version 4) */
    int incomplete;      /* mark the image incomplete: mount and fsck refuse it until a
                          * mount with mkfs_finish unmounts it (mkfs --from fills it) */
    int64_t time;        /* seconds since 1970: the creation time and the root's times;
                          * 0 = now (mkfs: SOURCE_DATE_EPOCH) */
} gmtf_mkfs_options;

/* Writes an empty filesystem (root directory only) on img, replacing what
 * was there. Does not close img. */
int gmtf_fs_mkfs(gmtf_image *img, const gmtf_mkfs_options *opt);

typedef void (*gmtf_fs_log_fn)(void *arg, const char *msg);

typedef struct gmtf_fs_options {
    int read_only;              /* never write the image (journal replayed in memory) */
    const char *mtf;            /* codec MTF backend, NULL = auto */
    const char *gpus;           /* codec GPUs (gmtf_codec_options.gpus), NULL = GMTF_GPUS or all */
    unsigned threads;           /* codec threads, 0 = online CPUs */
    uint64_t cache_bytes;       /* decoded-block cache, 0 = 64 MiB */
    uint64_t dirty_bytes;       /* write-back limit before writers flush, 0 = 128 MiB */
    unsigned flush_interval_ms; /* background flusher period; 0 = no thread (caller syncs) */
    uint64_t journal_bytes;     /* journal region while mounted, 0 = 8 MiB */
    int track_lookups;          /* count lookups; inodes live until gmtf_fs_forget (FUSE) */
    unsigned readahead_blocks;  /* blocks decoded ahead of sequential reads, 0 = 4 (with a pack
                                   size below the block size: as many packs' worth of
                                   blocks, at least one) */
    gmtf_fs_log_fn log;         /* errors and warnings (checksum, replay); NULL = stderr */
    void *log_arg;
    int no_flush;    /* skip device flushes until unmount (mkfs: a crash midway
                                  leaves no useful image anyway) */
    int mkfs_finish; /* mount an image mkfs marked incomplete; unmount marks it complete */
    int exit_after;  /* the process exits after the unmount (mkfs): a codec on a GPU is
                        left to the exit (its device memory and pinned staging freed
                        with the driver's context: 0.1 s less on the H100) */
    int codec_late;  /* the batch codec is made on the CPU at the mount and that of mtf
                        and gpus by gmtf_fs_codec_prepare, which the caller must call
                        (mkfs: on a thread, so that the GPU's probe, ~0.1 s, goes beside
                        the import's first reads); the frames are the same */
    int posix_acl;   /* POSIX ACL policy (a FUSE mount with ACLs): gmtf_fs_make inherits
                        default ACLs, chmod updates the access ACL, setting the access ACL
                        sets the mode; without it the ACL xattrs are plain xattrs */

    /* The write time every checkpoint records, seconds since 1970; 0 = the
     * clock (reproducible images: mkfs with SOURCE_DATE_EPOCH). */
    int64_t write_time;
    int pack_write_order; /* pack small files and tails in the order written (mkfs: input
                             order, directory by directory), a near-duplicate of an earlier
                             piece of the flush right after it, not by extension */
    /* Cold random reads decode only the part of a frame they need
     * (gmtf_frame_decode_range): 0 = the default, on; > 0 on; < 0 off (a
     * whole-frame decode for every cold read, for measurements). Such a
     * read cannot check the frame's data CRC (it covers the whole block);
     * the payload CRC of frame version 2 is checked before the payload is
     * decoded, so a damaged payload is EIO, never wrong bytes. */
    int range_reads;
    /* With no_flush (mkfs): a flush that a full write-back cache starts
     * takes its pieces at once and encodes them on a thread while the
     * writer goes on; the next flush (or any sync, truncation, deletion or
     * unmount) first waits for it and stores it as the flush would have.
     * The same image, byte for byte. */
    int async_flush;
} gmtf_fs_options;

typedef struct gmtf_fs gmtf_fs;

/* Opens the filesystem on img (ownership passes to the fs, also on
 * failure). Picks the newest valid superblock, loads the metadata snapshot,
 * replays the journal. Read-write: then writes a checkpoint. Errors:
 * -EINVAL (not a gmtf image), -EUCLEAN (metadata corrupt), -EIO. */
int gmtf_fs_mount(gmtf_image *img, const gmtf_fs_options *opt, gmtf_fs **out);
/* Flushes everything, writes a final compact checkpoint, frees all. Returns
 * the first error met (the fs is freed anyway). */
int gmtf_fs_unmount(gmtf_fs *fs);
/* Frees the filesystem without writing anything more: the image keeps its
 * last durable state, as after a crash (mkfs abandoning an incomplete
 * image keeps it marked incomplete). */
void gmtf_fs_abandon(gmtf_fs *fs);

/* ---- inodes and names -------------------------------------------------- */

typedef struct gmtf_entry {
    struct stat attr;    /* attr.st_ino is the inode number */
    uint64_t generation; /* never repeats for one inode number */
} gmtf_entry;

/* Finds name in directory parent. With track_lookups, a success counts one
 * lookup on the inode (as do mknod, mkdir, symlink, link, create). */
int gmtf_fs_lookup(gmtf_fs *fs, uint64_t parent, const char *name, gmtf_entry *e);
/* Drops nlookup lookups; an inode with no links, no opens and no lookups
 * is then freed. */
void gmtf_fs_forget(gmtf_fs *fs, uint64_t ino, uint64_t nlookup);

/* st_blocks counts stored (compressed) bytes in 512-byte units. */
int gmtf_fs_getattr(gmtf_fs *fs, uint64_t ino, struct stat *st);

#define GMTF_SET_MODE 0x01
#define GMTF_SET_UID 0x02
#define GMTF_SET_GID 0x04
#define GMTF_SET_SIZE 0x08
#define GMTF_SET_ATIME 0x10
#define GMTF_SET_MTIME 0x20
#define GMTF_SET_ATIME_NOW 0x40
#define GMTF_SET_MTIME_NOW 0x80
#define GMTF_SET_CTIME 0x100 /* set ctime from st_ctim (mkfs); else ctime = now */
/* Changes the fields named in to_set (only permission bits of st_mode are
 * used; size truncates or extends with a hole). out (may be NULL) gets the
 * new attributes. */
int gmtf_fs_setattr(gmtf_fs *fs, uint64_t ino, const struct stat *st, unsigned to_set,
                    struct stat *out);

/* mknod makes regular files, fifos, sockets and device nodes (mode holds the
 * type). name must not exist (-EEXIST). Times are set to now. */
/* A new node as a FUSE request makes it: the caller's ids and umask; the
 * library applies the policy in the same locked call (a setgid parent
 * passes its group on; with posix_acl, the parent's default ACL replaces
 * the umask and is inherited, else the umask applies). */
typedef struct gmtf_make_req {
    uint64_t parent;
    const char *name;
    mode_t mode;        /* type (S_IFREG if none) and permission bits as asked */
    dev_t rdev;         /* devices */
    const char *target; /* symlinks */
    uid_t uid;
    gid_t gid;
    mode_t umask;
    int open; /* a create: the node is counted open (release it) */
} gmtf_make_req;
int gmtf_fs_make(gmtf_fs *fs, const gmtf_make_req *r, gmtf_entry *e);
/* Turns the POSIX ACL policy on or off (gmtf_fs_options.posix_acl), e.g.
 * once FUSE has said whether the kernel enforces ACLs. 0, or -EOPNOTSUPP
 * from an implementation that keeps no ACL policy (a mount must then not
 * offer ACLs: the kernel would leave umask and mode to it). */
int gmtf_fs_set_posix_acl(gmtf_fs *fs, int on);

#define GMTF_FS_ACL_ACCESS "system.posix_acl_access"
#define GMTF_FS_ACL_DEFAULT "system.posix_acl_default"

int gmtf_fs_mknod(gmtf_fs *fs, uint64_t parent, const char *name, mode_t mode, dev_t rdev,
                  uid_t uid, gid_t gid, gmtf_entry *e);
int gmtf_fs_mkdir(gmtf_fs *fs, uint64_t parent, const char *name, mode_t mode, uid_t uid, gid_t gid,
                  gmtf_entry *e);
int gmtf_fs_symlink(gmtf_fs *fs, uint64_t parent, const char *name, const char *target, uid_t uid,
                    gid_t gid, gmtf_entry *e);
/* Adds a hard link newparent/newname to ino (not a directory: -EPERM). */
int gmtf_fs_link(gmtf_fs *fs, uint64_t ino, uint64_t newparent, const char *newname, gmtf_entry *e);
int gmtf_fs_unlink(gmtf_fs *fs, uint64_t parent, const char *name);
int gmtf_fs_rmdir(gmtf_fs *fs, uint64_t parent, const char *name); /* -ENOTEMPTY */

#define GMTF_RENAME_NOREPLACE 0x1 /* == RENAME_NOREPLACE */
#define GMTF_RENAME_EXCHANGE 0x2  /* == RENAME_EXCHANGE */
/* POSIX rename plus the two flags; -EINVAL for moving a directory into
 * its own subtree, -ENOTEMPTY, -EISDIR, -ENOTDIR as rename(2). */
int gmtf_fs_rename(gmtf_fs *fs, uint64_t parent, const char *name, uint64_t newparent,
                   const char *newname, unsigned flags);

/* Copies the target (not NUL-terminated if it does not fit) into buf.
 * Returns the target length. */
long gmtf_fs_readlink(gmtf_fs *fs, uint64_t ino, char *buf, size_t cap);

/* Called once per entry; next_off is the offset to resume after this
 * entry. Return non-zero to stop (buffer full). st has st_ino and the type
 * bits of st_mode only. */
typedef int (*gmtf_fs_filldir_fn)(void *arg, const char *name, const struct stat *st,
                                  uint64_t next_off);
/* Lists directory ino from offset off (0 = start; "." and ".." come first).
 * Offsets stay valid under concurrent creates and deletes: every entry
 * present during the whole listing is returned exactly once. */
int gmtf_fs_readdir(gmtf_fs *fs, uint64_t ino, uint64_t off, gmtf_fs_filldir_fn fn, void *arg);

/* ---- file data ------------------------------------------------------------ */

/* Counts an open of ino (O_TRUNC truncates, other flags are the caller's).
 * An unlinked inode lives until its last release. */
int gmtf_fs_open(gmtf_fs *fs, uint64_t ino, int flags);
int gmtf_fs_release(gmtf_fs *fs, uint64_t ino);
/* mknod of a regular file plus open, atomically (-EEXIST if present). */
int gmtf_fs_create(gmtf_fs *fs, uint64_t parent, const char *name, mode_t mode, uid_t uid,
                   gid_t gid, int flags, gmtf_entry *e);

/* Reads up to n bytes at off (short only at end of file); holes read as
 * zeros. A damaged block gives -EIO and a log line naming inode and block. */
long gmtf_fs_read(gmtf_fs *fs, uint64_t ino, void *buf, size_t n, uint64_t off);
/* For a reader about to read whole files (extraction): decodes into the
 * read cache, in batches on the codec's threads (the GPU when the codec
 * has one), the frames holding the data of inodes inos[0..n) that are not
 * cached yet, for as many inodes from the first as half the cache
 * (cache_bytes) holds (a file larger than that alone is left to the
 * read-ahead of its reads). Their reads then copy from the cache.
 * Returns how many inodes it covered (call again for the rest), or
 * -ENOMEM; a frame that does not decode is left for its read to report. */
long gmtf_fs_prefetch(gmtf_fs *fs, const uint64_t *inos, size_t n);

/* Readies the batch codec for the flushes to come (gmtf_codec_prepare:
 * its workspaces; with a GPU the device's start, contexts and pinned
 * staging for a flush's batch), holding the codec meanwhile: a writer's
 * flush waits for it. For a bulk writer (mkfs) on a thread of its own
 * beside its first reads. 0 or -ENOMEM; a device that cannot start is left
 * to the first flush to find. Changes no byte written. */
int gmtf_fs_codec_prepare(gmtf_fs *fs);

/* Writes n bytes at off into the write-back cache (extending the file).
 * Returns n, or -ENOSPC when the data cannot be stored. */
long gmtf_fs_write(gmtf_fs *fs, uint64_t ino, const void *buf, size_t n, uint64_t off);
/* Leave mtime, ctime and the set-ID bits alone: for a caller whose writes
 * are deferred copies of writes already accounted for elsewhere (the FUSE
 * writeback cache: the kernel owns those attributes and sends them by
 * setattr). The size still grows with the data. */
#define GMTF_WRITE_KEEP_ATTRS 0x01
/* gmtf_fs_write with GMTF_WRITE_* flags. */
long gmtf_fs_write_flags(gmtf_fs *fs, uint64_t ino, const void *buf, size_t n, uint64_t off,
                         unsigned flags);
/* Makes ino's data and metadata durable. Small changes are staged in the
 * journal uncompressed and compressed later in the background. */
int gmtf_fs_fsync(gmtf_fs *fs, uint64_t ino, int datasync);
/* Makes everything durable (compresses all dirty data). */
int gmtf_fs_syncfs(gmtf_fs *fs);

#define GMTF_FALLOC_KEEP_SIZE 0x01  /* == FALLOC_FL_KEEP_SIZE */
#define GMTF_FALLOC_PUNCH_HOLE 0x02 /* == FALLOC_FL_PUNCH_HOLE (needs KEEP_SIZE) */
/* mode 0: extends the size (space is not reserved: compressed data has no
 * fixed size); PUNCH_HOLE|KEEP_SIZE: the range reads as zeros and whole
 * blocks in it free their space. Other modes: -EOPNOTSUPP. */
int gmtf_fs_fallocate(gmtf_fs *fs, uint64_t ino, int mode, uint64_t off, uint64_t len);
/* SEEK_DATA / SEEK_HOLE (also SEEK_SET/SEEK_CUR return off, SEEK_END size).
 * Holes are found at block granularity. -ENXIO past the end. */
int64_t gmtf_fs_lseek(gmtf_fs *fs, uint64_t ino, int64_t off, int whence);

/* ---- extended attributes (any namespace; names up to 255 bytes) --------- */

#define GMTF_XATTR_CREATE 0x1  /* == XATTR_CREATE */
#define GMTF_XATTR_REPLACE 0x2 /* == XATTR_REPLACE */
int gmtf_fs_setxattr(gmtf_fs *fs, uint64_t ino, const char *name, const void *value, size_t size,
                     int flags);
/* size 0: returns the value length; too small: -ERANGE; missing: -ENODATA. */
long gmtf_fs_getxattr(gmtf_fs *fs, uint64_t ino, const char *name, void *buf, size_t size);
/* NUL-separated names, as listxattr(2). */
long gmtf_fs_listxattr(gmtf_fs *fs, uint64_t ino, char *buf, size_t size);
int gmtf_fs_removexattr(gmtf_fs *fs, uint64_t ino, const char *name);

/* ---- whole filesystem ------------------------------------------------------ */

/* f_blocks/f_bfree in f_frsize (4096) units: used = stored bytes, free =
 * capacity - used, or for a growable image what the host has free. */
int gmtf_fs_statfs(gmtf_fs *fs, struct statvfs *st);

typedef struct gmtf_fs_info {
    uint32_t block_size;
    uint32_t pack_size; /* small files and tails are packed into frames of at most this
                           (by mkfs: up to a block, cut by their cost; docs/format.md) */
    char label[GMTF_FS_LABEL_MAX + 1];
    uint8_t uuid[16];
    uint64_t generation;
    uint64_t capacity;    /* 0 = growable */
    uint64_t image_bytes; /* end of the last allocated byte */
    uint64_t used_bytes;  /* allocated: frames + metadata + journal */
    uint64_t files, dirs, symlinks, others;
    uint64_t data_bytes;   /* sum of regular file sizes */
    uint64_t stored_bytes; /* compressed frame bytes */
    uint64_t frames;
    uint64_t dirty_bytes;      /* in the write-back cache now */
    uint64_t replayed_records; /* journal records replayed at mount */
    uint64_t frames_decoded;   /* since mount (read cache misses, prefetch, checks) */
    uint64_t cache_bytes;      /* decoded frames cached now */
    uint64_t range_decodes;    /* since mount: cold reads that decoded part of a frame */
} gmtf_fs_info;
int gmtf_fs_get_info(gmtf_fs *fs, gmtf_fs_info *info);

/* What gmtf-stat shows beyond gmtf_fs_info, from the flushed state (data
 * still in the write-back cache is not counted). */
typedef struct gmtf_fs_stats {
    uint32_t format_version; /* of the image as loaded (1 or 2) */
    /* Bytes of regular files that map frame data (holes not counted; a
     * hard-linked inode once), each deduplicated copy counted... */
    uint64_t mapped_bytes;
    /* ...and the distinct frame bytes they map: mapped - unique is what
     * deduplication saved. */
    uint64_t unique_bytes;
    /* Decoded bytes of frames that no file maps any more (overwritten or
     * deleted parts of shared frames: compaction rewrites them). */
    uint64_t dead_bytes;
    /* Every frame's stored (clen) and decoded (dlen) bytes, in id order;
     * malloc'ed, nframes each. */
    size_t nframes;
    uint32_t *frame_clen, *frame_dlen;
    /* Where the image's bytes go, in the loaded generation: the parts sum
     * to end_bytes (docs/format.md, "Where the bytes go"). */
    uint64_t sb_bytes;           /* the superblock slots */
    uint64_t block_frame_bytes;  /* frames of one whole block of one file */
    uint64_t pack_frame_bytes;   /* the other frames: packs of small files and tails */
    uint64_t snapshot_bytes;     /* one snapshot copy as allocated (whole pages) */
    uint64_t snapshot_raw_bytes; /* its records, decoded */
    uint32_t snapshot_copies, journal_copies;
    uint64_t journal_bytes; /* one journal copy */
    /* Kept for a generation a load may fall back to (its snapshot and
     * journal copies, frames freed since), freed two checkpoints on. */
    uint64_t retired_bytes;
    uint64_t spare_bytes; /* kept for the next checkpoint while space is tight */
    uint64_t free_bytes;  /* free inside the allocated area */
    uint64_t end_bytes;   /* the end of the allocated area */
} gmtf_fs_stats;
/* Fills *st (gmtf_fs_stats_free frees it). 0 or -ENOMEM. */
int gmtf_fs_get_stats(gmtf_fs *fs, gmtf_fs_stats *st);
void gmtf_fs_stats_free(gmtf_fs_stats *st);
/* The stored bytes attributed to inode ino: of each frame it maps, the
 * frame's stored bytes times the bytes it maps there over the bytes all
 * files map there (a deduplicated frame is split among its users; a frame
 * with dead parts gives them to nobody), so that the shares of all inodes
 * sum to at most the stored bytes. 0 for inodes without data. 0 or -ENOENT. */
int gmtf_fs_stored_share(gmtf_fs *fs, uint64_t ino, uint64_t *stored);

/* ---- check (fsck) ------------------------------------------------------------ */

typedef struct gmtf_fs_check_options {
    int repair;      /* write a clean checkpoint after fixing what can be fixed */
    int verify_data; /* decode every frame (in batches) and check its checksum */
    const char *mtf;
    unsigned threads;
    void (*progress)(void *arg, uint64_t done, uint64_t total); /* verify_data */
    void *progress_arg;
    gmtf_fs_log_fn log; /* one line per problem found */
    void *log_arg;
} gmtf_fs_check_options;

typedef struct gmtf_fs_check_report {
    unsigned errors;   /* problems found */
    unsigned fixed;    /* of which repaired */
    unsigned warnings; /* harmless oddities (e.g. journal replayed) */
    int unrepairable;  /* a repair was asked for but cannot be made safely: nothing
                        * was written (fsck exit 8; the log says why) */
    int written;       /* the repair wrote the image (a new checkpoint) */
    gmtf_fs_info info;
} gmtf_fs_check_report;

/* Checks the image (does not take ownership of img). Returns 0 when the
 * check ran (see report), or a negative code when the image cannot be
 * read at all (-EINVAL: not gmtf; -EUCLEAN: no usable superblock/snapshot).
 * A repair writes only when it can fix every problem found and has room for
 * its checkpoint; else report.unrepairable is set (the log says why) and
 * the image is unchanged. An image with no problem is not written. */
int gmtf_fs_check(gmtf_image *img, const gmtf_fs_check_options *opt, gmtf_fs_check_report *rep);

#ifdef __cplusplus
}
#endif
#endif
