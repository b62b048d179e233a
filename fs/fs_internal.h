/* Shared inside fs/: in-memory structures and the calls between the files
 * of fs/, grouped by file in floor order (fs/README.md): a file calls only
 * files of its own floor or below. Not installed. On-disk constants:
 * format.h; byte layout: docs/format.md. */
#ifndef GMTF_FS_INTERNAL_H
#define GMTF_FS_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "format.h"
#include "gmtf_codec.h"
#include "gmtf_fs.h"

/* ---- policy (not on disk) ---------------------------------------------------- */
#define JOURNAL_MIN (64u << 10)       /* journal left by unmount/mkfs */
#define JOURNAL_FLOOR (16u << 10)     /* smallest journal (tests force checkpoints) */
#define STAGE_MAX (256u << 10)        /* fsync stages at most this much uncompressed */
#define STAGE_PAGE 4096u              /* granularity of staged ranges */
#define STAGE_REPLAY_MIN (256u << 20) /* replayed staged blocks may fill this much at least */
#define PUNCH_MIN (1u << 20)          /* free extents this large are punched */
#define PUNCH_ALIGN 4096u             /* punched ranges: whole host pages */
#define FILE_BLOCKS_MAX 0xffffffffull /* blocks of one file (block numbers are u32) */
/* Directory cookies (readdir offsets) are below this: the kernel's offsets
 * are signed, and cookie + 1 must not wrap to 0 (a listing restarting for
 * ever). A DADD record at or above it does not apply. */
#define COOKIE_LIMIT (1ull << 62)

/* ---- buf.c: little-endian byte buffers ---------------------------------------- */
typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
    int err;
    int ext; /* p is the caller's storage (a small record on the stack): never
                freed, copied to the heap when the buffer must grow */
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

/* ---- superblock.c: the decoded superblock ------------------------------------- */
typedef struct sb_info {
    uint32_t version;  /* FMT_VERSION or FMT_VERSION_1 */
    uint32_t incompat; /* SB_INCOMPLETE */
    uint64_t gen;
    uint8_t uuid[16];
    char label[GMTF_FS_LABEL_MAX + 1];
    uint32_t block_size;
    uint32_t pack_size; /* version 2: packs of small pieces hold at most this; 0 = block_size */
    uint64_t capacity;
    uint64_t image_end;
    uint64_t snap_off, snap_len; /* snapshot header + frames */
    uint64_t jrnl_off, jrnl_len, jrnl_id;
    uint64_t ctime, wtime;
    uint64_t snap2_off, jrnl2_off; /* the second copies (version 2; 0 in version 1) */
    uint64_t ino_gen;  /* the next inode generation at the checkpoint (0: not recorded) */
    uint64_t snap_raw; /* not on disk: the snapshot's records, decoded (stats) */
} sb_info;

/* Which superblock generations an image holds, newest first, and what the
 * slots say about damage (sb_pick). */
typedef struct sb_choice {
    int n;         /* loadable candidates */
    int slot[4];   /* slot of candidate k (a valid copy of its generation) */
    int twin_bad;  /* the newest generation's primary copy is damaged (the other is fine) */
    int twin_torn; /* its secondary copy is missing, as a crash leaves it (a note) */
    int pair_lost; /* both slots of the other pair are unreadable (a generation may be lost) */
} sb_choice;

/* ---- in-memory metadata -------------------------------------------------------- */
struct fref { /* file block blk -> frame[off, off+len); frame 0 = hole */
    uint32_t blk, frame, off, len;
};

struct frame { /* refs == 0 and clen == 0: unused id */
    uint64_t off;
    uint32_t clen, dlen, crc, refs;
    uint64_t live;  /* bytes of it that blocks map (over dlen when deduplicated) */
    uint32_t flags; /* FRAME_FRESH, FRAME_PINNED, FRAME_OUTSIDE */
};
enum { LOADING_SNAPSHOT = 1, LOADING_JOURNAL = 2, LOADING_BUILD = 3 };

/* Made in the current generation: no older durable state names it, so its
 * space is free again once the record freeing it is committed. */
#define FRAME_FRESH 1u
/* A STAGE record of the current journal decodes it as a block's base. */
#define FRAME_PINNED 2u
/* The image named it past its end or its capacity (or fsck dropped it for
 * an overlap): its blocks read as EIO, and its bytes are never this image's
 * space: never freed, retired or allocated (frame.c). */
#define FRAME_OUTSIDE 4u

struct dent {
    uint64_t parent, ino, cookie;
    struct dent *hnext;
    uint32_t hash;
    uint16_t namelen;
    char name[];
};

struct dblock; /* dirty block, dirty.c */

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
    int staged;      /* holds bytes a STAGE record of this journal has (fsync'ed) */
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
    uint32_t ps; /* pack size: pieces up to ps are packed into frames of up to ps (flush.c) */
    pthread_rwlock_t lock; /* readers: lookups and reads; writers: every change */

    gmtf_codec *codec; /* multi-threaded: flush batches, big read batches */
    /* async_flush with codec on a GPU and GMTF_MKFS_SPLIT=1: a CPU codec
     * coding part of each round beside it (the same frames), and that
     * part's share of the bytes (from the last round's speeds). Used by the
     * flush's thread only. */
    gmtf_codec *split_codec;
    int codec_cpu_now; /* opt.codec_late: the batch codec is the CPU's until the prepare */
    double split_share;
    pthread_mutex_t codec_lock;
    /* Single-threaded codecs, one per concurrent decoder: readers decode
     * in parallel (a gmtf_codec serves one call at a time). */
    gmtf_codec *dpool[16];
    uint32_t dpool_frame[16]; /* frame whose range each decoded last (its table is kept) */
    unsigned ndpool, dpool_busy, pool_max;
    pthread_mutex_t dpool_mtx;
    pthread_cond_t dpool_cond;

    /* inodes, by number (inode.c): pages of IPAGE numbers */
    struct ipage **ipage_tab; /* hash of the pages by page number */
    size_t ipage_cap;
    struct ipage **ipage_ord; /* every page; sorted unless ipage_unsorted */
    size_t nipages, ipage_ord_cap, ipage_hint;
    int ipage_unsorted;
    uint64_t ninodes;
    uint64_t ino_cursor; /* numbers below it were in use when handed out */
    uint64_t *ino_free;
    size_t nino_free, ino_free_cap;
    uint64_t next_gen; /* the next inode generation (inode_alloc_gen) */
    int gen_clocked;   /* next_gen raised to the clock this mount (inode_alloc_gen) */
    uint64_t *adirty;  /* inodes with attr_dirty set */
    size_t nadirty, adirty_cap;
    int adirty_all; /* the list could not grow: some are only flagged */

    /* directory entries: one hash table over (parent, name) */
    struct dent **dent_tab;
    size_t dent_cap, dent_count;
    struct dent *dent_spare[2]; /* dent_reserve: taken when malloc fails */
    unsigned ndent_spare;

    /* frames, by id (0 unused) */
    struct frame_idmap *idmap; /* while loading: the image's ids -> table ids */
    struct frame *frames;
    uint32_t nframes; /* table length */
    uint32_t *frame_free;
    size_t nframe_free, frame_free_cap;
    uint64_t live_frames, stored_bytes;

    /* space */
    extvec free, pending;
    /* Space no longer in the current state but in a durable one that a load
     * may fall back to: freed during this generation (cur) and during the
     * one before (prev, with that generation's snapshot and journal
     * copies). A checkpoint makes prev free and cur prev: nothing a
     * superblock slot still names is ever overwritten. */
    extvec retired_cur, retired_prev;
    /* The image's size when the superblock in sb was loaded (0: none, or sb
     * is one this mount wrote): the loaded generation's snapshot and journal
     * copies count only below it, so what a damaged slot claims past the end
     * is never retired into space given out since (alloc.c, sb_regions). */
    uint64_t sb_load_size;
    extvec punched;      /* free ranges already punched out of the host file */
    uint64_t data_start; /* DATA_START, or DATA_START_V1 while a version 1 image */
    /* Space kept for the next checkpoint while space is tight (allocated
     * here and on the host), so that deletes always commit on a full host:
     * metadata takes from it first, data never. */
    struct ext spare;
    uint64_t room; /* bytes data may still take, as last measured (alloc_room) */
    int punch_off; /* the host cannot punch: stop trying */
    uint64_t end;  /* end of the allocated area (image length in use) */
    uint64_t used; /* allocated bytes past DATA_START */

    /* journal */
    wbuf jbuf;     /* records not yet written */
    uint64_t jpos; /* bytes of the journal region in use */
    uint64_t jseq; /* sequence number of the next chunk */
    /* Applying the image's own records (snapshot load, journal replay, and
     * mkfs building the root): nothing is journaled, no space goes to the
     * pending list (the free map is rebuilt after loading), no id to a free
     * list, and records about files gone with a crash are skipped. */
    int loading; /* 0, or LOADING_SNAPSHOT / LOADING_JOURNAL / LOADING_BUILD: what applies */
    uint64_t replayed;
    int corrupt_records; /* records that did not apply (fsck reports) */
    int changed;         /* a record was made since mount: unmount checkpoints */
    /* What loading found (fsck reports it; mount acts on it). */
    int fell_back;                 /* the newest generation did not load: an older one did */
    int frames_renumbered;         /* loading gave frames other ids: a rw mount checkpoints */
    uint64_t lost_gen;             /* the newest generation, when fell_back */
    int meta_damaged;              /* a metadata copy was damaged (the other one served) */
    int sb_twin_bad, sb_pair_lost; /* superblock copies damaged (sb_pick) */
    uint32_t root_nlink_bad;       /* the root's link count + 1 when it was wrong (set right) */
    int upgrading; /* a version 1 image's first version 2 checkpoint: primary slot only */
    /* mkfs filling an image it marked incomplete (mkfs_finish): the only
     * older generation is the incomplete one, so nothing durable names the
     * frames made, and unmount writes one checkpoint. */
    int mkfs_fill;

    /* write-back cache */
    struct dblock **dirty_tab;
    size_t dirty_cap;
    struct dblock *dlist; /* all dirty blocks */
    uint64_t dirty_bytes, dirty_limit;
    uint64_t dver; /* change counter of dirty blocks */

    /* decoded-block cache */
    pthread_mutex_t cache_lock;
    pthread_cond_t cache_cond; /* a pending decode finished */
    struct cblock **cache_tab;
    size_t cache_cap;
    struct cblock *lru_head, *lru_tail;
    uint64_t cache_bytes, cache_limit;
    uint64_t frames_decoded;
    uint64_t range_decodes;      /* reads that decoded part of a frame */
    struct range_note {          /* a frame read by range lately (frame_read.c) */
        uint32_t id, end, reads; /* its id, where its last read ended, reads so far */
    } range_recent[8];
    unsigned range_pos;

    /* dedup of flushed pieces */
    struct dedup_ent *dedup;
    size_t dedup_cap, dedup_n; /* slots (a power of 2), entries put since it grew */
    struct flush_job *pend;    /* an async_flush flush encoding on its thread (flush.c) */
    uint8_t *job_src;          /* the jobs' round buffer, kept from job to job (flush.c) */
    uint64_t job_src_cap;
    /* Its hooks for the floors below flush.c (fs/README.md), set with
     * pend: record.c stores it before a record that could tell the
     * difference (flush_join), dirty.c reads the blocks it took
     * (flush_pending_block). */
    int (*pend_join)(gmtf_fs *fs);
    const uint8_t *(*pend_block)(gmtf_fs *fs, uint64_t ino, uint32_t blk, uint32_t *len);
    uint64_t released;         /* alloc_release calls (space freed at the next commit) */
    uint64_t released_flushed; /* released when the last flush ended, less its own */

    /* flusher */
    pthread_t flusher;
    int flusher_on, stop;
    pthread_mutex_t fl_mtx;
    pthread_cond_t fl_cond;
    int err; /* sticky write error reported at the next sync */
};

/* ======== calls, by file, top floor first ======================================= */

/* ---- mount.c ---- */
int fs_new(gmtf_image *img, const gmtf_fs_options *opt, uint32_t bs, gmtf_fs **out);
void fs_destroy(gmtf_fs *fs, int close_img);
int fs_load(gmtf_fs *fs); /* superblock, snapshot, journal, free map */

/* ---- sync.c ---- */
/* Commits the journal buffer; checkpoints instead when the journal region
 * is full. The one caller of journal_commit. */
int fs_commit(gmtf_fs *fs);
int flusher_start(gmtf_fs *fs);
void flusher_stop(gmtf_fs *fs);

/* ---- checkpoint.c, snapshot.c ---- */
int fs_checkpoint(gmtf_fs *fs, uint64_t journal_bytes);
/* A checkpoint that flushes only blocks holding staged bytes (the rest stay
 * dirty): it needs no space for data, so it can free retired space when
 * the data has none. */
int fs_checkpoint_meta(gmtf_fs *fs, uint64_t journal_bytes);
/* Serializes the whole metadata as records (the snapshot's raw content),
 * in chunks of at most chunk bytes that never split a record. */
int snapshot_serialize(gmtf_fs *fs, const extvec *retire, wbuf *w, size_t chunk,
                       uint32_t **chunk_ends, size_t *nchunks);
/* Writes both copies of the snapshot of generation gen (with the retired
 * list retire) and fills nsb's snapshot fields. */
int snapshot_write(gmtf_fs *fs, uint64_t gen, const extvec *retire, sb_info *nsb);
int snapshot_load(gmtf_fs *fs); /* the snapshot fs->sb names */

/* ---- snappack.c: snapshot chunks packed in columns ---- */
/* Appends to out the records rec[0..len) (whole, as snapshot_serialize
 * makes them) packed in columns, for an image of block size bs: shorter
 * than the records (4 bytes for none). 0, -EINVAL (a record is cut short
 * or its header's zero field is not zero), -ENOMEM. */
int snap_pack(const uint8_t *rec, size_t len, uint32_t bs, wbuf *out);
/* Appends to out the records that the packed chunk p[0..len) holds (at
 * most GMTF_FS_BLOCK_MAX bytes: more is refused before any is written).
 * 0, -EUCLEAN (not a packed chunk), -ENOMEM. */
int snap_unpack(const uint8_t *p, size_t len, uint32_t bs, wbuf *out);

/* ---- attr.c, file.c, compact.c, xattr.c, acl.c, xblob.c (operations) ---- */
int xblob_find(const struct inode *in, const char *name, size_t n, uint32_t *pos, uint32_t *rlen);
const uint8_t *xblob_value(const struct inode *in, const char *name, uint32_t *len);
int xblob_set(gmtf_fs *fs, struct inode *in, const char *name, const void *value, size_t size,
              int flags);
int xblob_remove(gmtf_fs *fs, struct inode *in, const char *name);
int acl_valid(const void *acl, size_t size); /* 0: a well-formed ACL xattr */
int acl_is_name(const char *name);
/* The policy for a new node in dir: r's mode and gid adjusted, and the ACLs
 * to store on it (caller frees; NULL when none). */
int acl_new_node(gmtf_fs *fs, struct inode *dir, gmtf_make_req *r, uint8_t **access,
                 size_t *access_len, uint8_t **dflt, size_t *dflt_len);
int acl_follow_chmod(gmtf_fs *fs, struct inode *in); /* after a mode change */
int acl_set(gmtf_fs *fs, struct inode *in, const char *name, const void *value, size_t size,
            int flags);
void inode_to_stat(gmtf_fs *fs, const struct inode *in, struct stat *st);
/* Fills e (may be NULL) for a reply naming in; count: one more lookup. */
void attr_fill_entry(gmtf_fs *fs, struct inode *in, gmtf_entry *e, int count);
void attr_touch(struct inode *in, int mtime); /* ctime (and mtime) = now */
/* -ENOENT (in NULL), -EISDIR, -EINVAL, -EFBIG, or 0: a write of n bytes at
 * off may go ahead. */
int file_write_check(gmtf_fs *fs, const struct inode *in, size_t n, uint64_t off);
/* Writes into the write-back cache (checked by file_write_check); n or an
 * error. Caller holds the write lock. */
long file_write_locked(gmtf_fs *fs, struct inode *in, const void *buf, size_t n, uint64_t off,
                       unsigned flags);
int file_truncate_locked(gmtf_fs *fs, struct inode *in, uint64_t size);
/* Rewrites blocks of shared frames whose live part fell under half, when
 * such waste is worth it (over 1/16 of the space in use). */
int fs_compact(gmtf_fs *fs, int force);

/* ---- similar.c ---- */
/* For n pieces (bytes buf[i], len[i]), root[i]: the first piece of the
 * cluster of near-duplicates (by their lines) that piece i joins, i when
 * none; a root comes before its members. Up to `threads` threads read the
 * pieces; the answer does not depend on them. 0, or -ENOMEM (then
 * root[i] = i). */
int fs_similar_roots(const uint8_t *const *buf, const uint32_t *len, size_t n, unsigned threads,
                     uint32_t *root);

/* ---- flush.c, stage.c ---- */
int flush_dirty(gmtf_fs *fs, uint64_t only_ino); /* 0 = all */
#define FLUSH_BATCH_BYTES (64u << 20) /* the most bytes one encode batch of a flush holds */
#define FLUSH_UNLOCKED 1              /* flush_some: encode without the lock */
#define FLUSH_STAGED 2                /* flush_some: only blocks holding staged (fsync'ed) bytes */
/* mkfs (no_flush): the most bytes of a flush's sub-batches encoded together */
#define FLUSH_MKFS_ENCODE_BYTES (256u << 20)
/* mkfs's packs: pieces x bytes of a frame of small pieces at most this many
 * pieces x 4 MiB at 4 MiB packs (flush_pack_cost_cap, docs/format.md "Pack size") */
#define FLUSH_PACK_COST_DEFAULT 650
uint64_t flush_pack_cost_cap(const gmtf_fs *fs);
/* 1: mkfs's frames of pieces longer than the pack size take method 3
 * (fs/flush.c, docs/format.md "Pack size"). */
int flush_pack_adaptive(const gmtf_fs *fs);
/* Flushes the oldest dirty blocks, up to max_bytes (0 = all). With
 * FLUSH_UNLOCKED: drops fs->lock while encoding (one sub-batch), then keeps
 * only pieces that did not change meanwhile; the caller must not rely on
 * pointers it held across the call. */
int flush_some(gmtf_fs *fs, uint64_t only_ino, uint64_t max_bytes, unsigned flags);
#define FLUSH_ASYNC 4 /* flush_some (async_flush): encode on a thread, store at flush_join */
/* Waits for the flush encoding on its thread (async_flush) and stores and
 * records it as flush_some would have; 0 when none waits. The callers: the
 * next flush, and the records that could see the difference (a block
 * mapped, a file shortened, an inode deleted). */
int flush_join(gmtf_fs *fs);
/* Waits for that flush and drops it unstored (gmtf_fs_abandon). */
void flush_job_drop(gmtf_fs *fs);
/* The most room the waiting flush's frames can take (make_room). */
uint64_t flush_pending_bound(const gmtf_fs *fs);
/* Bytes of in's dirty pages that staging would write (over STAGE_MAX when
 * a block has no page bitmap). */
uint64_t stage_bytes(const gmtf_fs *fs, const struct inode *in);
/* Appends STAGE records of in's written pages (and pending attributes). */
int stage_inode(gmtf_fs *fs, struct inode *in);

/* ---- journal.c ---- */
#define JOURNAL_FULL 1 /* journal_commit: the region cannot take the buffer */
/* Emits pending attribute records, writes the buffer as one chunk,
 * flushes. 0, JOURNAL_FULL (nothing written) or a negative error (the
 * buffer is kept for the next try). */
int journal_commit(gmtf_fs *fs);
int journal_replay(gmtf_fs *fs);

/* ---- record.c: build a record, apply it, append it to the journal buffer ---- */
int rec_apply(gmtf_fs *fs, const uint8_t *rec, size_t len);
int rec_apply_all(gmtf_fs *fs, const uint8_t *p, size_t len); /* a sequence */
/* Journal buffer room for `bytes` of records more: after it, records of
 * fixed size (all but LINK, XATTR, STAGE) up to that many bytes cannot fail
 * for want of memory. An operation of several records reserves first, so
 * that it cannot stop halfway. */
int rec_reserve(gmtf_fs *fs, size_t bytes);
#define REC_SMALL_MAX 320 /* the largest fixed-size record (DADD, 255-byte name) */
void rec_start(wbuf *w, uint16_t type);
void rec_put_inode(wbuf *w, const struct inode *in);
int rec_inode(gmtf_fs *fs, const struct inode *in);
int rec_inode_new(gmtf_fs *fs, uint64_t ino, uint64_t gen, uint32_t mode, uint32_t uid,
                  uint32_t gid, uint64_t rdev, uint64_t parent, uint64_t sortkey);
int rec_size(gmtf_fs *fs, uint64_t ino, uint64_t size);
int rec_idel(gmtf_fs *fs, uint64_t ino);
int rec_dadd(gmtf_fs *fs, uint64_t parent, uint64_t ino, uint64_t cookie, const char *name,
             size_t n);
int rec_ddel(gmtf_fs *fs, uint64_t parent, const char *name, size_t n);
int rec_link(gmtf_fs *fs, uint64_t ino, const char *target, size_t n);
int rec_xattr(gmtf_fs *fs, uint64_t ino, const uint8_t *blob, uint32_t len);
int rec_frame(gmtf_fs *fs, uint32_t id, uint64_t off, uint32_t clen, uint32_t dlen, uint32_t crc);
int rec_ext(gmtf_fs *fs, uint64_t ino, uint32_t blk, uint32_t frame, uint32_t off, uint32_t len);
int rec_stage(gmtf_fs *fs, uint64_t ino, uint32_t blk, uint32_t off, const uint8_t *data,
              uint32_t len);
/* Attributes changed by writes (size, times) get their records at the
 * next rec_attr_emit (before any record that depends on them). */
void rec_attr_dirty(gmtf_fs *fs, struct inode *in);
int rec_attr_emit(gmtf_fs *fs);
/* Records the deletion of an inode with no links, opens or lookups. */
void rec_idel_unused(gmtf_fs *fs, struct inode *in);
void inode_drop(gmtf_fs *fs, struct inode *in); /* frees it and all it holds */
int xattr_blob_check(const uint8_t *b, uint32_t len);

/* ---- dirty.c: the write-back cache ---- */
struct dblock *dirty_find(gmtf_fs *fs, uint64_t ino, uint32_t blk);
/* The dirty block (created from the mapped frame's bytes when new) with
 * room for need bytes. */
int dirty_get(gmtf_fs *fs, struct inode *in, uint32_t blk, uint32_t need, struct dblock **out);
/* dirty_get for a write of [off, off + len) that the caller makes at once:
 * those bytes are not zeroed first. */
int dirty_get_write(gmtf_fs *fs, struct inode *in, uint32_t blk, uint32_t off, uint32_t len,
                    struct dblock **out);
void dirty_drop(gmtf_fs *fs, struct dblock *d);
/* Takes d out of the write-back cache without freeing it (an async
 * flush's piece); dirty_free frees it. */
void dirty_detach(gmtf_fs *fs, struct dblock *d);
void dirty_free(struct dblock *d);
void dirty_drop_inode(gmtf_fs *fs, struct inode *in, uint32_t from_blk);
int dirty_stage_apply(gmtf_fs *fs, struct inode *in, uint32_t blk, uint32_t off,
                      const uint8_t *data, uint32_t len);
void dirty_truncate(gmtf_fs *fs, struct inode *in, uint64_t size); /* blocks past size */

/* ---- blockmap.c ---- */
struct fref *blockmap_find(struct inode *in, uint32_t blk);
uint32_t blockmap_lower(const struct inode *in, uint32_t blk); /* first mapping >= blk */
/* Maps blk to frame[off, off+len) (frame 0: unmaps it). */
int blockmap_set(gmtf_fs *fs, struct inode *in, uint32_t blk, uint32_t frame, uint32_t off,
                 uint32_t len);
/* Room for k more mappings in in's map: k new blocks then map without
 * allocating. */
int blockmap_reserve(struct inode *in, uint32_t k);
void blockmap_free(gmtf_fs *fs, struct inode *in);
void blockmap_truncate(gmtf_fs *fs, struct inode *in, uint64_t size); /* mappings past size */

/* ---- frame_read.c ---- */
/* Copies bytes [off, off+len) of frame id, decoded (through the cache).
 * ino and blk only name the reader in error messages. random: a read that
 * read-ahead does not cover; on a cache miss it may decode only the range
 * (frame_read.c). Caller holds fs->lock (read or write), so the frame
 * cannot be freed meanwhile. */
int frame_copy(gmtf_fs *fs, uint32_t id, uint64_t ino, uint32_t blk, uint32_t off, uint32_t len,
               void *dst, int random);
int frames_prefetch(gmtf_fs *fs, const uint32_t *ids, size_t n);
/* Reads and decodes frames ids[0..n) as one batch; status[i] per frame. */
int frames_verify(gmtf_fs *fs, const uint32_t *ids, size_t n, int *status);

/* ---- frame.c: the frame table ---- */
int frame_new_id(gmtf_fs *fs, uint32_t *id);
/* A new frame. While loading, id is the image's id: the table id it gets is
 * frame_load_id(fs, id) from then on (until frame_load_end). */
/* Room in the table for k new frames: k frame_new_id + frame_set pairs
 * then allocate nothing. */
int frame_reserve(gmtf_fs *fs, uint32_t k);
int frame_set(gmtf_fs *fs, uint32_t id, uint64_t off, uint32_t clen, uint32_t dlen, uint32_t crc);
uint32_t frame_load_id(gmtf_fs *fs, uint32_t image_id); /* 0: no such frame */
void frame_load_end(gmtf_fs *fs); /* the image's ids are not needed any more */
void frame_table_free(gmtf_fs *fs);
void frame_ref(gmtf_fs *fs, uint32_t id);
void frame_unref(gmtf_fs *fs, uint32_t id);
int frame_valid(gmtf_fs *fs, uint32_t id);

/* ---- cache.c: decoded frames (all calls with cache_lock held, but
 * cache_drop, which takes it) ---- */
struct pending; /* a frame being decoded: readers of it wait for it */
struct cblock *cache_find(gmtf_fs *fs, uint32_t id);
/* The bytes of frame id, once a pending decode of it ends (cache_lock is
 * dropped while waiting); NULL when not cached. Marks it recently used. */
const uint8_t *cache_get(gmtf_fs *fs, uint32_t id);
size_t cache_buf_cap(const gmtf_fs *fs, uint32_t len);
uint8_t *cache_recycle(gmtf_fs *fs, uint32_t len);
struct pending *pending_begin(gmtf_fs *fs, uint32_t id);
void pending_end(gmtf_fs *fs, struct pending *p, uint32_t id, uint8_t *buf, uint32_t len);
void cache_drop(gmtf_fs *fs, uint32_t id);
/* A frame just written from data (len bytes, its decoded bytes): a copy goes
 * to the cache (takes cache_lock), so that the next write into the block
 * does not decode what it has just encoded (a database's pages, rewritten
 * at every fsync). */
void cache_put(gmtf_fs *fs, uint32_t id, const uint8_t *data, uint32_t len);
/* cache_put of *buf itself (cap bytes allocated, len of them the frame's):
 * the cache takes it (grown to the cache's size for len when cap is less)
 * and *buf becomes NULL; left as it is when the cache does not take it. */
void cache_put_own(gmtf_fs *fs, uint32_t id, uint8_t **buf, size_t cap, uint32_t len);
void cache_free_all(gmtf_fs *fs);

/* ---- codec_pool.c ---- */
/* Encodes a batch into *dst (allocated); doff: where each frame starts;
 * crc (may be NULL): each block's CRC-32C, as its frame carries it;
 * adaptive (may be NULL): blocks to code by method 3 (gmtf_batch_encode_hint). */
int codec_encode(gmtf_fs *fs, const uint8_t *src, const uint64_t *off, size_t n, uint8_t **dst,
                 uint64_t *doff, uint32_t *crc, const uint8_t *adaptive);
/* codec_encode on codec c, which the caller holds alone (no lock). */
int codec_encode_on(gmtf_fs *fs, gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t n,
                    uint8_t **dst, uint64_t *doff, uint32_t *crc, const uint8_t *adaptive);
int codec_decode_batch(gmtf_fs *fs, size_t n, const uint8_t *src, const uint64_t *foff,
                       uint8_t *dst, const uint64_t *doff, int *status);
int codec_decode_one(gmtf_fs *fs, const uint8_t *src, size_t len, uint8_t *dst, size_t dlen);
/* Bytes [off, off+cnt) of frame id (stored bytes src[0..len)) into dst,
 * preferring the pool codec that decoded a range of id last: its kept
 * table makes another range, or the whole frame, a walk only
 * (gmtf_frame_decode_range). 0 or a negative code. */
int codec_decode_range(gmtf_fs *fs, uint32_t id, const uint8_t *src, size_t len, uint32_t off,
                       uint32_t cnt, uint8_t *dst);
int codec_resize(gmtf_fs *fs); /* the batch codec again, for this image's block size */
/* The batch codec of fs's options (opt.codec_late: the CPU's, until
 * gmtf_fs_codec_prepare makes that of the options). */
int codec_make(gmtf_fs *fs, unsigned threads, uint32_t max_block, gmtf_codec **out);

/* ---- alloc.c ---- */
void ev_free(extvec *e);
int ev_add(extvec *e, uint64_t off, uint64_t len); /* merges, keeps sorted */
int alloc_space(gmtf_fs *fs, uint64_t len, uint64_t *off);
/* Metadata: len rounded up to whole META_ALIGN pages, at a page boundary
 * (version 2; as alloc_space while a version 1 image). */
int alloc_meta(gmtf_fs *fs, uint64_t len, uint64_t *off);
uint64_t alloc_meta_len(const gmtf_fs *fs, uint64_t len); /* what alloc_meta takes */
/* Takes [off, off+len) out of the free map, whatever of it is free. */
int alloc_claim(gmtf_fs *fs, uint64_t off, uint64_t len);
/* Space a record frees that no older durable state names (a frame made in
 * this generation): free once the record is committed. */
void alloc_release(gmtf_fs *fs, uint64_t off, uint64_t len);
void alloc_release_now(gmtf_fs *fs, uint64_t off, uint64_t len); /* free at once */
/* Space an older durable state names: free two checkpoints later. */
void alloc_retire(gmtf_fs *fs, uint64_t off, uint64_t len);
void alloc_commit_pending(gmtf_fs *fs); /* the records are durable: pending -> free */
/* What the next checkpoint's slot leaves to fall back on: retired_cur,
 * pending, and the current generation's snapshot and journal copies. */
int alloc_retire_list(gmtf_fs *fs, extvec *out);
/* The checkpoint that retire was made for is durable: retired_prev is
 * free, retire (taken over) is the new retired_prev, cur and pending
 * empty. */
void alloc_generation_done(gmtf_fs *fs, extvec *retire);
/* Bytes a checkpoint takes at least (two snapshot copies a little larger
 * than the last, two small journals). */
uint64_t alloc_ckpt_need(const gmtf_fs *fs);
/* Bytes data may still take now: free space (inside the image as far as
 * the host has it, and what the image can grow into: the capacity or the
 * host's free space), less what the next checkpoint needs. Measures, and
 * leaves the figure in fs->room. */
uint64_t alloc_room(gmtf_fs *fs);
/* Keeps the spare when space is tight (-ENOSPC: it cannot; data must not
 * take what a checkpoint needs). */
int alloc_spare_ensure(gmtf_fs *fs);
uint64_t alloc_retired_bytes(const gmtf_fs *fs); /* freed two checkpoints later */
int alloc_rebuild(gmtf_fs *fs); /* free map = complement of everything referenced */
/* Gives free space back to the host: truncates the free tail, punches
 * free extents of PUNCH_MIN or more inside the image (once each). Call
 * only when everything on the free list is free in the durable state. */
int alloc_trim_end(gmtf_fs *fs);
uint64_t alloc_free_bytes(gmtf_fs *fs);
uint64_t alloc_punched_bytes(gmtf_fs *fs); /* free bytes the host has back (holes) */

/* ---- inode.c: the inode table ---- */
#define IPAGE 16u /* inode numbers per page of the table */
struct inode *inode_get(gmtf_fs *fs, uint64_t ino);
struct inode *inode_create_mem(gmtf_fs *fs, uint64_t ino, uint32_t mode);
void inode_table_remove(gmtf_fs *fs, struct inode *in); /* and frees the struct */
int inode_alloc_ino(gmtf_fs *fs, uint64_t *ino);        /* -ENOSPC past 2^40 */
/* The generation of a new inode: never one an inode of the same number had
 * before, in this mount or an earlier one (crashed or not). */
uint64_t inode_alloc_gen(gmtf_fs *fs);
/* What a checkpoint records as the next inode generation (superblock). */
uint64_t inode_gen_floor(const gmtf_fs *fs);
/* The inode with the smallest number above *ino (0: the first), which
 * *ino then holds; NULL after the last. In number order, and safe when the
 * body creates or drops inodes; the caller holds the write lock (or runs
 * alone: load, check), since it may sort the table. Loop:
 *   uint64_t ino = 0;
 *   for (struct inode *in; (in = inode_next(fs, &ino));) ... */
struct inode *inode_next(gmtf_fs *fs, uint64_t *ino);
/* Every inode once, in no order, for readers (read lock: the table must
 * not change during the loop). Start with *pos = 0. */
struct inode *inode_scan(const gmtf_fs *fs, uint64_t *pos);
/* Frees the table and the free numbers (not the inodes: free them first). */
void inode_table_free(gmtf_fs *fs);

/* ---- dirent.c: directory entries ---- */
struct dent *dent_find(gmtf_fs *fs, uint64_t parent, const char *name, size_t n);
int dent_insert(gmtf_fs *fs, struct inode *dir, uint64_t ino, uint64_t cookie, const char *name,
                size_t n);
int dent_remove(gmtf_fs *fs, struct inode *dir, struct dent *d);
uint32_t dir_seek(const struct inode *dir, uint64_t cookie);
/* Room for k more entries in dir (table, directory array, and spare
 * entries for when malloc fails): k inserts into dir then cannot fail.
 * dent_unreserve frees the spares left. */
int dent_reserve(gmtf_fs *fs, struct inode *dir, unsigned k);
void dent_unreserve(gmtf_fs *fs);

/* ---- superblock.c ---- */
void sb_encode(const sb_info *sb, uint8_t *buf); /* always the current version */
/* The journal id generation gen of the filesystem uuid has (slot offset 160). */
uint64_t sb_journal_id(const uint8_t uuid[16], uint64_t gen);
/* 0, -EINVAL (no magic: not a gmtf slot), -EUCLEAN (damaged) or
 * -EPROTONOSUPPORT (a newer version, or incompatible features). */
int sb_decode(const uint8_t *buf, sb_info *sb);
/* Reads the SB_SLOTS slots (the first two when the image is shorter):
 * res[i] is sb_decode's result, or the read's error. Returns 0 when some
 * slot is valid, -EINVAL (not an image), -EUCLEAN (all damaged),
 * -EPROTONOSUPPORT, or the read's error. */
int sb_read_slots(gmtf_fs *fs, sb_info sb[SB_SLOTS], int res[SB_SLOTS]);
/* The generations to try, newest first, and the damage the slots show. */
void sb_pick(const sb_info sb[SB_SLOTS], const int res[SB_SLOTS], sb_choice *c);
/* Writes generation sb->gen into its primary slot (secondary = 0) or its
 * secondary slot (secondary = 1). */
int sb_write(gmtf_fs *fs, const sb_info *sb, int secondary);

/* ---- image_io.c: every access of the filesystem to its image ---- */
int img_read(gmtf_fs *fs, void *buf, size_t n, uint64_t off);
int img_write(gmtf_fs *fs, const void *buf, size_t n, uint64_t off);
int img_flush(gmtf_fs *fs); /* no-op with no_flush (mkfs) */
int img_size(gmtf_fs *fs, uint64_t *size);
int img_truncate(gmtf_fs *fs, uint64_t size);
int img_host_free(gmtf_fs *fs, uint64_t *bytes); /* -EOPNOTSUPP: unknown */
/* Allocates [off, off+len) on the host (no sparse hole): -ENOSPC now rather
 * than at a later write; -EOPNOTSUPP when the image or host cannot. */
int img_reserve(gmtf_fs *fs, uint64_t off, uint64_t len);
int img_allocated(gmtf_fs *fs, uint64_t *bytes); /* on the host; -EOPNOTSUPP */
int img_punchable(const gmtf_fs *fs);
/* Deallocates [off, off+len) of a file image on the host (reads as zeros
 * after). -EOPNOTSUPP: a device, or the host cannot. */
int img_punch(gmtf_fs *fs, uint64_t off, uint64_t len);

/* ---- util.c ---- */
void fs_log(gmtf_fs *fs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t fs_hash64(const void *p, size_t n, uint64_t seed);  /* format: journal ids */
uint64_t hash_bytes(const void *p, size_t n, uint64_t seed); /* tables: XXH3 */
uint32_t name_hash(uint64_t parent, const char *name, size_t n);
void now_ts(int64_t *s, uint32_t *ns);

#define FS_RDLOCK(fs) pthread_rwlock_rdlock(&(fs)->lock)
#define FS_WRLOCK(fs) pthread_rwlock_wrlock(&(fs)->lock)
#define FS_UNLOCK(fs) pthread_rwlock_unlock(&(fs)->lock)

#endif
