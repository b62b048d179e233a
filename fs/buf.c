/* Little-endian byte buffers: wbuf grows as records are built, rbuf reads
 * untrusted bytes and flags (err) any read past the end. */

#include "fs_internal.h"

int wb_reserve(wbuf *w, size_t n)
{
    if (w->err)
        return w->err;
    if (w->len + n <= w->cap)
        return 0;
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < w->len + n)
        cap *= 2;
    uint8_t *p = w->ext ? malloc(cap) : realloc(w->p, cap);
    if (!p)
        return w->err = -ENOMEM;
    if (w->ext && w->len)
        memcpy(p, w->p, w->len);
    w->ext = 0;
    w->p = p;
    w->cap = cap;
    return 0;
}

void wb_bytes(wbuf *w, const void *src, size_t n)
{
    if (n == 0 || wb_reserve(w, n))
        return;
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

void wb_u8(wbuf *w, uint8_t v)
{
    wb_bytes(w, &v, 1);
}

void wb_u16(wbuf *w, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    wb_bytes(w, b, 2);
}

void wb_u32(wbuf *w, uint32_t v)
{
    uint8_t b[4];
    store_le32(b, v);
    wb_bytes(w, b, 4);
}

void wb_u64(wbuf *w, uint64_t v)
{
    uint8_t b[8];
    store_le64(b, v);
    wb_bytes(w, b, 8);
}

void wb_free(wbuf *w)
{
    if (!w->ext)
        free(w->p);
    memset(w, 0, sizeof *w);
}

const uint8_t *rb_bytes(rbuf *r, size_t n)
{
    if (r->err || n > r->len - r->pos) {
        r->err = 1;
        return NULL;
    }
    const uint8_t *p = r->p + r->pos;
    r->pos += n;
    return p;
}

uint8_t rb_u8(rbuf *r)
{
    const uint8_t *p = rb_bytes(r, 1);
    return p ? p[0] : 0;
}

uint16_t rb_u16(rbuf *r)
{
    const uint8_t *p = rb_bytes(r, 2);
    return p ? (uint16_t)(p[0] | p[1] << 8) : 0;
}

uint32_t rb_u32(rbuf *r)
{
    const uint8_t *p = rb_bytes(r, 4);
    return p ? load_le32(p) : 0;
}

uint64_t rb_u64(rbuf *r)
{
    const uint8_t *p = rb_bytes(r, 8);
    return p ? load_le64(p) : 0;
}
