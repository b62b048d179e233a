/* Rank coder: the back half of the BWT pipeline. MTF ranks -> zero-run
 * coding (zrle.c) -> entropy coding (entropy.c) -> bytes, and back.
 * Internal to libgmtf; the frame layer (frame.c) calls only the two
 * gmtf_rank_* functions, gmtfc bench calls the stage functions. */
#ifndef GMTF_RANK_CODER_H
#define GMTF_RANK_CODER_H

#include <stddef.h>
#include <stdint.h>

/* Scratch memory the caller owns, enough for blocks up to max_block bytes:
 * about 0.7 MiB plus 7.25 * max_block (the encoder keeps both methods'
 * output and the event list of a block; the decoder uses the first 0.7 MiB).
 * Hot paths never allocate: frame.c allocates one per worker. */
size_t gmtf_rank_workspace_size(size_t max_block);

/* Encodes n MTF ranks (1 <= n <= max_block given to the workspace size)
 * into dst (cap bytes): method 1 (semi-static rANS, fast to decode) for
 * n >= 64 KiB unless method 0 (adaptive) is clearly smaller. The bytes do
 * not depend on cap. Returns the byte count, or -ENOSPC when the result
 * would not fit in cap or, for n >= 64 KiB, exceeds 1.25 n + 64 bytes (the
 * caller then stores the block raw). */
long gmtf_rank_encode(const uint8_t *ranks, size_t n, uint8_t *dst, size_t cap, void *ws);

/* Decodes exactly n ranks from src[0..len). src is untrusted: any bytes
 * give either n ranks and a return of 0, or a negative GMTF_E_* code; never
 * a read past src+len, a write past ranks+n, or a hang. */
int gmtf_rank_decode(const uint8_t *src, size_t len, uint8_t *ranks, size_t n, void *ws);

/* ---- stages, for benchmarks and tests ------------------------------- */

/* Zero-run symbols: a maximal run of L zero ranks is the digits of L in
 * bijective base 2, least significant first (RUNA = 1, RUNB = 2); a rank
 * r >= 1 is the symbol r + 1 (2..256). */
#define GMTF_SYM_RUNA 0
#define GMTF_SYM_RUNB 1

/* Zero-run coding of MTF ranks into 16-bit symbols; syms must hold n + 1
 * entries. Returns the symbol count (at most n). */
size_t gmtf_zrle_encode(const uint8_t *ranks, size_t n, uint16_t *syms);
/* Inverse: returns 0 when exactly n ranks came out, else GMTF_E_CORRUPT. */
int gmtf_zrle_decode(const uint16_t *syms, size_t count, uint8_t *ranks, size_t n);

/* Entropy coding of zero-run symbols as gmtf_zrle_encode makes them (runs
 * maximal, at most 31 digits), always method 0: the same bytes as
 * gmtf_rank_encode when that chooses method 0. Returns bytes written,
 * -ENOSPC, or -EINVAL when syms break those rules. ws as for
 * gmtf_rank_encode. */
long gmtf_entropy_encode(const uint16_t *syms, size_t count, uint8_t *dst, size_t cap, void *ws);
/* Decodes exactly count symbols (count is known from the frame) from a
 * payload of either method. Returns 0 or a negative GMTF_E_* code;
 * untrusted src as above. */
int gmtf_entropy_decode(const uint8_t *src, size_t len, uint16_t *syms, size_t count, void *ws);

#endif
