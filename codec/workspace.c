/* Per-worker scratch memory: one gmtf_workspace per codec thread, made on
 * the worker's first block; the rank coder's encoder scratch only once the
 * worker encodes (gmtf_codec_trim drops it again). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bwt.h"
#include "codec_internal.h"
#include "qlfc.h"
#include "rank_coder.h"

/* The rank decoder uses only the coder's fixed tables, the start of any
 * workspace (rank_coder.h): the size for a zero-length block. The encoder
 * adds 7.25 x max_block behind them, which a decoder never touches. */
static size_t rank_ws_size(size_t max_block, int enc)
{
    /* Either frame version's coder (rank_coder.h for version 1, qlfc.h for
     * version 2), never both at once: the larger. */
    size_t v1 = gmtf_rank_workspace_size(enc ? max_block : 0);
    size_t v2 = enc ? gmtf_qlfc_workspace_size(max_block) : gmtf_qlfc_decode_workspace_size();
    return v1 > v2 ? v1 : v2;
}

int gmtf_workspace_init(gmtf_workspace *w, size_t max_block)
{
    memset(w, 0, sizeof *w);
    w->max_block = max_block;
    w->buf_a = malloc(max_block ? max_block : 1);
    w->buf_b = malloc(max_block ? max_block : 1);
    w->bwt_ws = malloc(gmtf_bwt_workspace_size(max_block));
    w->rank_ws = malloc(rank_ws_size(max_block, 0));
    if (!w->buf_a || !w->buf_b || !w->bwt_ws || !w->rank_ws) {
        gmtf_workspace_free(w);
        return -ENOMEM;
    }
    return 0;
}

int gmtf_workspace_encoder(gmtf_workspace *w)
{
    if (w->rank_enc)
        return 0;
    void *ws = malloc(rank_ws_size(w->max_block, 1)); /* scratch: nothing to keep */
    if (!ws)
        return -ENOMEM;
    free(w->rank_ws);
    w->rank_ws = ws;
    w->rank_enc = 1;
    return 0;
}

void gmtf_workspace_trim(gmtf_workspace *w)
{
    if (!w->rank_enc)
        return;
    void *ws = malloc(rank_ws_size(w->max_block, 0));
    if (!ws)
        return;
    free(w->rank_ws);
    w->rank_ws = ws;
    w->rank_enc = 0;
}

void gmtf_workspace_free(gmtf_workspace *w)
{
    free(w->buf_a);
    free(w->buf_b);
    free(w->bwt_ws);
    free(w->rank_ws);
    memset(w, 0, sizeof *w);
}

/* Workspaces follow the blocks a call really holds, not the codec's
 * max_block: a filesystem of 64 KiB blocks has a codec of 1 MiB (its
 * snapshot chunks), whose workspaces (6.4 MiB a worker, 14 MiB with the
 * encoder's scratch, made again after every flush's trim) were most of the
 * CPU of a hostile-image case under ASan, and all of its pages for glibc's
 * MALLOC_PERTURB_. A call sets c->need (gmtf_codec_need) before it takes
 * workspaces, and puts it back to 0 (max_block) when done; a workspace
 * grows to the next power of two from 64 KiB (at most max_block) and does
 * not shrink. */
void gmtf_codec_need(gmtf_codec *c, uint64_t n)
{
    c->need = n < c->max_block ? (uint32_t)n : c->max_block;
}

gmtf_workspace *gmtf_codec_workspace_range(gmtf_codec *c, unsigned i)
{
    gmtf_workspace *w = &c->ws[i];
    size_t need = c->need ? c->need : c->max_block;
    if (w->buf_a && w->max_block >= need)
        return w;
    size_t cap = 64u << 10;
    while (cap < need)
        cap <<= 1;
    if (cap > c->max_block)
        cap = c->max_block;
    int enc = w->rank_enc;
    gmtf_workspace_free(w);
    if (gmtf_workspace_init(w, cap) < 0)
        return NULL;
    if (enc && gmtf_workspace_encoder(w) < 0) {
        gmtf_workspace_free(w);
        return NULL;
    }
    return w;
}

gmtf_workspace *gmtf_codec_workspace(gmtf_codec *c, unsigned i)
{
    gmtf_workspace *w = gmtf_codec_workspace_range(c, i);
    if (w)
        w->range_valid = 0; /* the caller will reuse bwt_ws */
    return w;
}

gmtf_workspace *gmtf_codec_workspace_enc(gmtf_codec *c, unsigned i)
{
    gmtf_workspace *w = gmtf_codec_workspace(c, i);
    if (w && gmtf_workspace_encoder(w) < 0)
        return NULL;
    return w;
}
