/* Method 3 (stub, replaced below) */
#include <errno.h>
#include "gmtf_codec.h"
#include "qlfc.h"
#include "qlfc_internal.h"
size_t gmtf_cm_workspace_size(size_t max_block)
{
    (void)max_block;
    return 64;
}
size_t gmtf_cm_decode_workspace_size(void)
{
    return 64;
}
long gmtf_adaptive_qlfc_encode(const uint8_t *bwt, size_t n, uint8_t *dst, size_t cap, void *ws)
{
    (void)bwt;
    (void)n;
    (void)dst;
    (void)cap;
    (void)ws;
    return -ENOSPC;
}
int gmtf_adaptive_qlfc_decode(const uint8_t *src, size_t len, uint8_t *bwt, size_t n, void *ws)
{
    (void)src;
    (void)len;
    (void)bwt;
    (void)n;
    (void)ws;
    return GMTF_E_CORRUPT;
}
