/* An image taken apart into the structures the filesystem reads (superblock
 * slots, snapshot chunks of records, journal chunks of records) and put back
 * together with every checksum recomputed, so a test can edit one field and
 * have the parser meet the edit instead of stopping at a CRC. Decoding and
 * encoding use the fs's own pieces where it exports them (sb_decode,
 * sb_encode, the record header, the codec); the snapshot and journal chunk
 * headers are written by snap_header/jr_header below, the one place here
 * that follows docs/format.md byte by byte. */
#ifndef HOSTILE_HIMG_H
#define HOSTILE_HIMG_H

#include <stddef.h>
#include <stdint.h>

#include "fs_internal.h"

typedef struct hrec { /* one record: header + body */
    uint8_t *p;
    uint32_t len;
} hrec;

typedef struct hchunk { /* records of one snapshot or journal chunk */
    hrec *v;
    size_t n, cap;
} hchunk;

typedef struct himg {
    uint8_t *p; /* the image bytes (owned) */
    size_t len;
    sb_info sb[SB_SLOTS];
    int res[SB_SLOTS]; /* sb_decode of each slot */
    int cur;           /* a slot of the newest valid generation, -1: none */
    hchunk *snap;
    size_t nsnap;
    hchunk *jr;
    size_t njr;
    uint64_t jr_used; /* bytes of the journal region holding valid chunks */
    /* Header fields to write as given instead of computed (-1: computed);
     * the header checksums are still recomputed over them. */
    int64_t snap_nch, snap_raw_len, snap_gen, snap_enc_say;
    int64_t jr_seq_skip; /* journal chunk whose sequence number is off by one */
    int copies;          /* version 2: which copies himg_build writes (1, 2; 0 = both) */
    /* How the snapshot's chunks hold their records (SNAP_RECORDS, or
     * SNAP_PACKED: unpacked when parsed, packed again when built, unless an
     * edit left a record that does not pack; then written as records). */
    uint32_t snap_enc;
} himg;

/* Takes a copy of img apart. 0, or a negative code when no slot is valid or
 * the current slot's snapshot does not decode (then only raw edits apply). */
int himg_parse(himg *h, const uint8_t *img, size_t len);
/* Writes the (edited) snapshot and journal (every copy) and the current
 * generation's superblock slots back into h->p with fresh checksums: in
 * place when they fit, else appended at the end of the image (the
 * superblock then names the new place). */
int himg_build(himg *h);
/* Writes h->sb[slot] into that slot, and (twin) into the other slot of its
 * generation (version 2: slots g & 1 and 2 + (g & 1)). */
void himg_put_sb(himg *h, int slot, int twin);
void himg_free(himg *h);
/* The codec these use (one per process, blocks up to 2 MiB). */
gmtf_codec *himg_codec(void);

/* Records */
int hchunk_insert(hchunk *c, size_t at, const uint8_t *rec, uint32_t len);
void hchunk_remove(hchunk *c, size_t at);
uint16_t hrec_type(const hrec *r);
/* A record of type with body bytes (the header is written here). */
int hrec_make(hrec *r, uint16_t type, const uint8_t *body, uint32_t blen);

/* Fields of each record type, in order: width in bytes (1, 2, 4, 8), or 0 for
 * the variable tail (name, target, blob, data). From docs/format.md. */
typedef struct hfield {
    const char *name;
    uint8_t width;
    uint8_t role; /* HF_* : what a hostile value means for it */
} hfield;
enum { HF_PLAIN, HF_INO, HF_MODE, HF_SIZE, HF_FRAME, HF_BLOCK, HF_OFF, HF_LEN, HF_COOKIE, HF_NS };
/* Field list of a record type (NULL for unknown types); *n gets its count. */
const hfield *hrec_fields(uint16_t type, size_t *n);
/* Byte offset of field i of r's body (past the header), or -1 when the
 * record is too short. */
long hrec_field_off(const hrec *r, size_t i);

#endif
