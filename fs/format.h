/* On-disk constants of a gmtf image: the byte layout of every structure is
 * in docs/format.md; this header names its numbers. Everything on disk is
 * little-endian and checksummed (CRC-32C). */
#ifndef GMTF_FS_FORMAT_H
#define GMTF_FS_FORMAT_H

/* Superblock slots: two, at offsets 0 and SB_SLOT_SIZE. */
#define SB_SLOT_SIZE 4096u
#define SB_MAGIC "GMTFSB\r\n"
#define FMT_VERSION 1u
#define DATA_START (2u * SB_SLOT_SIZE) /* first byte the allocator hands out */

/* Snapshot: a header, then chunks of records, each chunk one codec frame. */
#define SNAP_MAGIC 0x50414e53u /* "SNAP" */
#define SNAP_HDR_SIZE 64u
#define SNAP_CHUNK (1u << 20) /* raw bytes per snapshot frame, at most */

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
};

/* An inode's xattr blob: {u8 name_len, u32 value_len, name, value}... */
#define XATTR_BLOB_MAX (256u << 10) /* per inode; ext4 allows one 4 KiB block */

#endif
