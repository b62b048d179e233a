/* Shared inside fs/: on-disk constants, in-memory metadata, helpers.
 * Not installed. Layout of everything on disk: docs/format.md. */
#ifndef GMTF_FS_INTERNAL_H
#define GMTF_FS_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmtf_codec.h"
#include "gmtf_fs.h"

/* ---- on-disk constants ---------------------------------------------------- */
#define SB_SLOT_SIZE 4096u
#define SB_MAGIC "GMTFSB\r\n"
#define FMT_VERSION 1u
#define DATA_START (2u * SB_SLOT_SIZE) /* first byte the allocator hands out */
#define SNAP_MAGIC 0x50414e53u         /* "SNAP" */
#define SNAP_HDR_SIZE 64u
#define SNAP_CHUNK (1u << 20) /* raw bytes per snapshot frame, at most */
#define JR_MAGIC 0x4a544d47u  /* "GMTJ" */
#define JR_HDR_SIZE 32u
#define JOURNAL_MIN (64u << 10)   /* journal left by unmount/mkfs */
#define JOURNAL_FLOOR (16u << 10) /* smallest journal (tests force checkpoints) */
#define STAGE_MAX (256u << 10)    /* fsync stages at most this much uncompressed */
#define STAGE_PAGE 4096u          /* granularity of staged ranges */
#define PUNCH_MIN (1u << 20)      /* free extents this large are punched */
#define PUNCH_ALIGN 4096u         /* punched ranges: whole host pages */

/* Record types: the journal and the snapshot are both sequences of these. */
enum {
    R_INODE = 1,  /* create or update an inode's attributes */
    R_SIZE = 2,   /* set size (truncate semantics) */
    R_IDEL = 3,   /* delete an inode */
    R_DADD = 4,   /* add a directory entry */
    R_DDEL = 5,   /* remove a directory entry */
    R_LINK = 6,   /* symlink target */
    R_XATTR = 7,  /* replace an inode's xattr blob */
    R_FRAME = 8,  /* a new data frame */
    R_EXT = 9,    /* map a file block to (part of) a frame, or to a hole */
    R_STAGE = 10, /* bytes written to a block, staged uncompressed (fsync) */
};

/* ---- little-endian byte buffers -------------------------------------------- */
typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
    int err;
} wbuf;

typedef struct rbuf {
    const uint8_t *p;
    size_t len, pos;
    int err; /* set when a read would pass the end */
} rbuf;

int wb_reserve(wbuf *w, size_t n);
void wb_bytes(wbuf *w, const void *src, size_t n);
void wb_u8(wbuf *w, uint8_t v);
void wb_u16(wbuf *w, uint16_t v);
void wb_u32(wbuf *w, uint32_t v);
void wb_u64(wbuf *w, uint64_t v);
void wb_free(wbuf *w);
uint8_t rb_u8(rbuf *r);
uint16_t rb_u16(rbuf *r);
uint32_t rb_u32(rbuf *r);
uint64_t rb_u64(rbuf *r);
const uint8_t *rb_bytes(rbuf *r, size_t n);
void put_le32(uint8_t *p, uint32_t v);
void put_le64(uint8_t *p, uint64_t v);
uint32_t get_le32(const uint8_t *p);
uint64_t get_le64(const uint8_t *p);

/* ---- superblock ---------------------------------------------------------------- */
typedef struct sb_info {
    uint64_t gen;
    uint8_t uuid[16];
    char label[GMTF_FS_LABEL_MAX + 1];
    uint32_t block_size;
    uint64_t capacity;
    uint64_t image_end;
    uint64_t snap_off, snap_len; /* snapshot header + frames */
    uint64_t jrnl_off, jrnl_len, jrnl_id;
    uint64_t ctime, wtime;
} sb_info;

void sb_encode(const sb_info *sb, uint8_t *buf);
int sb_decode(const uint8_t *buf, sb_info *sb);

/* ---- in-memory metadata -------------------------------------------------------- */
struct fref { /* file block blk -> frame[off, off+len); frame 0 = hole */
    uint32_t blk, frame, off, len;
};

struct frame { /* refs == 0 and clen == 0: unused id */
    uint64_t off;
    uint32_t clen, dlen, crc, refs;
    uint64_t live;   /* bytes of it that blocks map (over dlen when deduplicated) */
    uint32_t pinned; /* a STAGE record of the current journal reads it at replay */
};

struct dent {
    uint64_t parent, ino, cookie;
    struct dent *hnext;
    uint32_t hash;
    uint16_t namelen;
    char name[];
};

struct dblock; /* dirty block, file.c */

struct inode {
    uint64_t ino, gen;
    uint32_t mode, uid, gid, nlink;
    uint64_t size, rdev;
    int64_t at_s, mt_s, ct_s;
    uint32_t at_ns, mt_ns, ct_ns;
    uint64_t parent;  /* directories: the parent's inode number */
    uint64_t sortkey; /* packing order: extension, then name */
    uint64_t stored;  /* compressed bytes attributed to this inode */
    uint64_t nlookup; /* kernel references (track_lookups) */
    uint32_t nopen;
    uint32_t xlen;
    uint8_t *xattr;       /* blob: repeated {u8 nlen, u32 vlen, name, value} */
    uint8_t attr_dirty;   /* attributes changed without a record yet */
    uint32_t last_read;   /* block after the last read: sequential detection */
    struct dblock *dirty; /* this inode's dirty blocks */
    union {
        struct {
            struct fref *v;
            uint32_t n, cap;
        } ext; /* regular */
        struct {
            struct dent **v;
            uint32_t n, cap, live;
            uint64_t next;
        } dir;        /* directory */
        char *target; /* symlink */
    } u;
};

struct dblock {
    uint64_t ino;
    uint32_t blk;
    uint32_t cap;    /* bytes allocated in buf (<= block size); beyond reads as 0 */
    uint64_t *pages; /* 4 KiB pages written since the last stage or flush (bitmap) */
    uint64_t ver;    /* fs->dver at the last change: an unlocked flush rechecks it */
    int inflight;    /* being encoded by an unlocked flush */
    uint8_t *buf;
    struct dblock *hnext, *inext, *gprev, *gnext;
};

struct cblock { /* decoded frame in the read cache */
    uint32_t frame, len;
    uint8_t *buf;
    struct cblock *hnext, *prev, *next;
};

struct ext {
    uint64_t off, len;
};

typedef struct extvec {
    struct ext *v;
    size_t n, cap;
} extvec;

struct dedup_ent {
    uint64_t hash;
    uint32_t frame, off, len;
};

struct gmtf_fs {
    gmtf_image *img;
    gmtf_fs_options opt;
    sb_info sb;
    int ro;
    uint32_t bs;
    pthread_rwlock_t lock; /* readers: lookups and reads; writers: every change */

    gmtf_codec *codec; /* multi-threaded: flush batches, big read batches */
    pthread_mutex_t codec_lock;
    /* Single-threaded codecs, one per concurrent decoder: readers decode
     * in parallel (a gmtf_codec serves one call at a time). */
    gmtf_codec *dpool[16];
    unsigned ndpool, dpool_busy, pool_max;
    pthread_mutex_t dpool_mtx;
    pthread_cond_t dpool_cond;

    /* inodes, by number */
    struct inode **itab;
    uint64_t itab_cap;
    uint64_t *ino_free;
    size_t nino_free, ino_free_cap;
    uint64_t next_gen;
    uint64_t *adirty; /* inodes with attr_dirty set */
    size_t nadirty, adirty_cap;

    /* directory entries: one hash table over (parent, name) */
    struct dent **dh;
    size_t dh_cap, dh_count;

    /* frames, by id (0 unused) */
    struct frame *frames;
    uint32_t nframes; /* table length */
    uint32_t *frame_free;
    size_t nframe_free, frame_free_cap;
    uint64_t live_frames, stored_bytes;

    /* space */
    extvec free, pending;
    extvec held;    /* freed pinned frames: free only once a checkpoint is durable */
    extvec punched; /* free ranges already punched out of the host file */
    int punch_off;  /* the host cannot punch: stop trying */
    uint64_t end;   /* end of the allocated area (image length in use) */
    uint64_t used;  /* allocated bytes past DATA_START */

    /* journal */
    wbuf jbuf;     /* records not yet written */
    uint64_t jpos; /* bytes of the journal region in use */
    uint64_t jseq; /* sequence number of the next chunk */
    int replaying; /* applying records from disk */
    uint64_t replayed;
    int corrupt_records; /* records that did not apply (fsck reports) */

    /* write-back cache */
    struct dblock **dhash;
    size_t dhash_cap;
    struct dblock *dlist; /* all dirty blocks */
    uint64_t dirty_bytes, dirty_limit;
    uint64_t dver; /* change counter of dirty blocks */

    /* decoded-block cache */
    pthread_mutex_t cache_lock;
    struct cblock **chash;
    size_t chash_cap;
    struct cblock *lru_head, *lru_tail;
    uint64_t cache_bytes, cache_limit;
    uint64_t frames_decoded;

    /* dedup of flushed pieces */
    struct dedup_ent *dedup;
    size_t dedup_cap;

    /* flusher */
    pthread_t flusher;
    int flusher_on, stop;
    pthread_mutex_t fl_mtx;
    pthread_cond_t fl_cond;
    int err; /* sticky write error reported at the next sync */
};

/* ---- util.c ---- */
void fs_log(gmtf_fs *fs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t fs_hash64(const void *p, size_t n, uint64_t seed);
uint32_t name_hash(uint64_t parent, const char *name, size_t n);
void now_ts(int64_t *s, uint32_t *ns);
int img_read(gmtf_fs *fs, void *buf, size_t n, uint64_t off);
int img_write(gmtf_fs *fs, const void *buf, size_t n, uint64_t off);
int img_flush(gmtf_fs *fs);
/* image_io.c: deallocate [off, off+len) of a file image on the host (reads
 * as zeros after). -EOPNOTSUPP: a device, or the host cannot. */
int img_punch(gmtf_fs *fs, uint64_t off, uint64_t len);

/* ---- alloc.c ---- */
void ev_free(extvec *e);
int ev_add(extvec *e, uint64_t off, uint64_t len); /* merges, keeps sorted */
int alloc_space(gmtf_fs *fs, uint64_t len, uint64_t *off);
void alloc_release(gmtf_fs *fs, uint64_t off, uint64_t len); /* after next commit */
void alloc_release_now(gmtf_fs *fs, uint64_t off, uint64_t len);
void alloc_commit_pending(gmtf_fs *fs);
int alloc_rebuild(gmtf_fs *fs); /* free map = complement of everything referenced */
/* Gives free space back to the host: truncates the free tail, punches
 * free extents of PUNCH_MIN or more inside the image (once each). Call
 * only when everything on the free list is free in the durable state. */
int alloc_trim_end(gmtf_fs *fs);
uint64_t alloc_free_bytes(gmtf_fs *fs);
uint64_t alloc_punched_bytes(gmtf_fs *fs); /* free bytes the host has back (holes) */

/* ---- inode.c ---- */
struct inode *inode_get(gmtf_fs *fs, uint64_t ino);
struct inode *inode_create_mem(gmtf_fs *fs, uint64_t ino, uint32_t mode);
void inode_free_mem(gmtf_fs *fs, struct inode *in);
int inode_alloc_ino(gmtf_fs *fs, uint64_t *ino);
void inode_to_stat(gmtf_fs *fs, const struct inode *in, struct stat *st);
void inode_mark_dirty(gmtf_fs *fs, struct inode *in);
int inode_emit_dirty(gmtf_fs *fs);
void inode_maybe_delete(gmtf_fs *fs, struct inode *in);
struct dent *dent_find(gmtf_fs *fs, uint64_t parent, const char *name, size_t n);
int dent_insert(gmtf_fs *fs, struct inode *dir, uint64_t ino, uint64_t cookie, const char *name,
                size_t n);
int dent_remove(gmtf_fs *fs, struct inode *dir, struct dent *d);
uint32_t dir_seek(const struct inode *dir, uint64_t cookie);
uint64_t name_sortkey(const char *name, size_t n);

/* ---- journal.c: build a record, apply it, append it to the journal ---- */
int rec_apply(gmtf_fs *fs, const uint8_t *rec, size_t len);
int rec_apply_all(gmtf_fs *fs, const uint8_t *p, size_t len); /* a sequence */
int jr_inode(gmtf_fs *fs, const struct inode *in);
int jr_inode_new(gmtf_fs *fs, uint64_t ino, uint64_t gen, uint32_t mode, uint32_t uid, uint32_t gid,
                 uint64_t rdev, uint64_t parent, uint64_t sortkey);
int jr_size(gmtf_fs *fs, uint64_t ino, uint64_t size);
int jr_idel(gmtf_fs *fs, uint64_t ino);
int jr_dadd(gmtf_fs *fs, uint64_t parent, uint64_t ino, uint64_t cookie, const char *name,
            size_t n);
int jr_ddel(gmtf_fs *fs, uint64_t parent, const char *name, size_t n);
int jr_link(gmtf_fs *fs, uint64_t ino, const char *target, size_t n);
int jr_xattr(gmtf_fs *fs, uint64_t ino, const uint8_t *blob, uint32_t len);
int jr_frame(gmtf_fs *fs, uint32_t id, uint64_t off, uint32_t clen, uint32_t dlen, uint32_t crc);
int jr_ext(gmtf_fs *fs, uint64_t ino, uint32_t blk, uint32_t frame, uint32_t off, uint32_t len);
int jr_stage(gmtf_fs *fs, uint64_t ino, uint32_t blk, uint32_t off, const uint8_t *data,
             uint32_t len);
/* Emits pending attribute records, writes them as one chunk, flushes. Falls
 * back to a checkpoint when the journal region is full. */
int jr_commit(gmtf_fs *fs);
int jr_replay(gmtf_fs *fs);
/* Serializes the whole metadata as records (the snapshot's raw content). */
int meta_serialize(gmtf_fs *fs, wbuf *w, size_t chunk, uint32_t **chunk_ends, size_t *nchunks);

/* ---- super.c ---- */
int fs_checkpoint(gmtf_fs *fs, uint64_t journal_bytes);
int fs_load(gmtf_fs *fs); /* superblock, snapshot, journal */
int fs_new(gmtf_image *img, const gmtf_fs_options *opt, uint32_t bs, gmtf_fs **out);
void fs_destroy(gmtf_fs *fs, int close_img);
int codec_resize(gmtf_fs *fs);

/* ---- frame.c: frame table and frame decode ---- */
int frame_new_id(gmtf_fs *fs, uint32_t *id);
int frame_set(gmtf_fs *fs, uint32_t id, uint64_t off, uint32_t clen, uint32_t dlen, uint32_t crc);
void frame_ref(gmtf_fs *fs, uint32_t id);
void frame_unref(gmtf_fs *fs, uint32_t id);
int frame_valid(gmtf_fs *fs, uint32_t id);
/* Copies bytes [off, off+len) of frame id, decoded (through the cache).
 * ino and blk only name the reader in error messages. Caller holds
 * fs->lock (read or write), so the frame cannot be freed meanwhile. */
int frame_copy(gmtf_fs *fs, uint32_t id, uint64_t ino, uint32_t blk, uint32_t off, uint32_t len,
               void *dst);
void cache_drop(gmtf_fs *fs, uint32_t id);
void cache_free_all(gmtf_fs *fs);
int frames_prefetch(gmtf_fs *fs, const uint32_t *ids, size_t n);
/* Reads and decodes frames ids[0..n) as one batch; status[i] per frame. */
int frames_verify(gmtf_fs *fs, const uint32_t *ids, size_t n, int *status);
int codec_encode(gmtf_fs *fs, const uint8_t *src, const uint64_t *off, size_t n, uint8_t **dst,
                 uint64_t *doff);
int codec_decode_one(gmtf_fs *fs, const uint8_t *src, size_t len, uint8_t *dst, size_t dlen);

/* ---- file.c ---- */
int file_set_size(gmtf_fs *fs, struct inode *in, uint64_t size); /* apply-level */
int file_set_ext(gmtf_fs *fs, struct inode *in, uint32_t blk, uint32_t frame, uint32_t off,
                 uint32_t len);
struct fref *file_find_ext(struct inode *in, uint32_t blk);
struct dblock *dirty_find(gmtf_fs *fs, uint64_t ino, uint32_t blk);
int dirty_get(gmtf_fs *fs, struct inode *in, uint32_t blk, uint32_t need, struct dblock **out);
void dirty_drop(gmtf_fs *fs, struct dblock *d);
void dirty_drop_inode(gmtf_fs *fs, struct inode *in, uint32_t from_blk);
int dirty_stage_apply(gmtf_fs *fs, struct inode *in, uint32_t blk, uint32_t off,
                      const uint8_t *data, uint32_t len);
void file_free_exts(gmtf_fs *fs, struct inode *in);
int file_truncate_locked(gmtf_fs *fs, struct inode *in, uint64_t size);

/* ---- flush.c ---- */
int flush_dirty(gmtf_fs *fs, uint64_t only_ino); /* 0 = all */
/* Flushes the oldest dirty blocks, up to max_bytes (0 = all). unlocked:
 * drops fs->lock while encoding (one sub-batch), then keeps only pieces
 * that did not change meanwhile; the caller must not rely on pointers it
 * held across the call. */
int flush_some(gmtf_fs *fs, uint64_t only_ino, uint64_t max_bytes, int unlocked);
/* Rewrites blocks of shared frames whose live part fell under half, when
 * such waste is worth it (over 1/16 of the space in use). */
int fs_compact(gmtf_fs *fs, int force);
int flusher_start(gmtf_fs *fs);
void flusher_stop(gmtf_fs *fs);

/* ---- xattr.c ---- */
int xattr_blob_check(const uint8_t *b, uint32_t len);

#define FS_RDLOCK(fs) pthread_rwlock_rdlock(&(fs)->lock)
#define FS_WRLOCK(fs) pthread_rwlock_wrlock(&(fs)->lock)
#define FS_UNLOCK(fs) pthread_rwlock_unlock(&(fs)->lock)

#endif
