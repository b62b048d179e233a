/* The structure-aware mutator of hostile images: from a seed, one to three
 * edits of a real image, chosen among
 *   - a record field (every type: inode numbers huge, zero, the root, its
 *     own parent; modes; sizes; cookies; name lengths; block, frame, offset
 *     and length of EXT and FRAME; STAGE offsets), in the snapshot or the
 *     journal;
 *   - records of a chunk added, removed, duplicated, reordered, moved,
 *     cut or padded; journal chunks dropped, repeated, swapped, merged;
 *   - superblock fields (offsets, lengths, generation, block size,
 *     capacity, journal id), of the slot in use or the other;
 *   - snapshot header fields (chunk count, raw length, generation) and a
 *     journal chunk's sequence number;
 *   - a frame's decoded bytes, re-encoded, with its FRAME record updated;
 * then every checksum is recomputed (himg_build), so the parser meets the
 * edit. Some edits leave checksums as they are ("raw"): a frame's bytes
 * changed or re-encoded behind a FRAME record that still has the old CRC,
 * bytes flipped anywhere. For those, every read must return the original's
 * bytes or those of a state committed earlier (the oracle). */
#ifndef HOSTILE_HMUT_H
#define HOSTILE_HMUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct hmut {
    char what[768]; /* the edits, for the failure message */
    int raw;        /* checksums left as they were */
} hmut;

/* A mutated copy of base[0..len) in *out (malloc'd, *outlen bytes). Always
 * produces an image (an edit that does not apply is replaced by another). */
void hmut_apply(const uint8_t *base, size_t len, uint64_t seed, uint8_t **out, size_t *outlen,
                hmut *m);

#endif
