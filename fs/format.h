/* On-disk constants of a gmtf image: the byte layout of every structure is
 * in docs/format.md; this header names its numbers. Everything on disk is
 * little-endian and checksummed (CRC-32C). */
#ifndef GMTF_FS_FORMAT_H
#define GMTF_FS_FORMAT_H

/* Superblock slots of SB_SLOT_SIZE bytes at the start of the image.
 * Version 2: four slots; generation g is written to slot g & 1 (primary),
 * flushed, then to slot 2 + (g & 1) (secondary), so the newest
 * generation has two copies and the one before it two more. Version 1: two
 * slots (slot g & 1), one copy of everything. */
#define SB_SLOT_SIZE 4096u
#define SB_MAGIC "GMTFSB\r\n"
#define FMT_VERSION 2u   /* written by this version */
#define FMT_VERSION_1 1u /* still read (and upgraded by a read-write mount) */
#define SB_SLOTS 4u
#define SB_SLOTS_V1 2u
#define DATA_START (SB_SLOTS * SB_SLOT_SIZE)       /* first byte the allocator hands out */
#define DATA_START_V1 (SB_SLOTS_V1 * SB_SLOT_SIZE) /* the same in a version 1 image */
/* Incompatible features (superblock offset 12): a reader that does not know
 * a bit refuses the image. */
#define SB_INCOMPLETE 0x1u /* mkfs has not finished: nothing to mount yet */
#define SB_INCOMPAT_KNOWN SB_INCOMPLETE
/* Metadata (snapshot and journal copies) is allocated in whole pages of
 * META_ALIGN bytes, so no page holds parts of two copies of one thing. */
#define META_ALIGN 4096u

/* Snapshot: a header, then chunks of records, each chunk one codec frame. */
#define SNAP_MAGIC 0x50414e53u /* "SNAP" */
#define SNAP_HDR_SIZE 64u
#define SNAP_CHUNK (1u << 20) /* bytes of records per snapshot frame, at most */
/* How the chunks hold their records (snapshot header offset 20). */
#define SNAP_RECORDS 0u /* as they are (version 1, and version 2 before packing) */
#define SNAP_PACKED 1u  /* packed in columns (version 2: snappack.c) */

/* Journal: chunks of records, each behind a header of JR_HDR_SIZE bytes. */
#define JR_MAGIC 0x4a544d47u /* "GMTJ" */
#define JR_HDR_SIZE 32u

/* Records: u16 type, u16 0, u32 body length, then the body. The journal and
 * the snapshot are both sequences of these. */
#define REC_HDR 8u
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
    /* Version 2, snapshot only: space the previous generation still uses
     * (its snapshot and journal copies, frames freed since). */
    R_RETIRE = 11,
};

/* An inode's xattr blob: {u8 name_len, u32 value_len, name, value}... */
#define XATTR_BLOB_MAX (256u << 10) /* per inode; ext4 allows one 4 KiB block */

#endif
