/* The QLFC rank transform (qlfc_internal.h) that methods 2 and 3 share:
 * below both coders and the dispatcher (qlfc.c). */
#include <string.h>

#include "qlfc_internal.h"

size_t gmtf_qlfc_ranks(const uint8_t *s, size_t a, size_t b, uint8_t *rk, uint8_t *init,
                       uint16_t *ninit)
{
    size_t k = 0;
    for (size_t i = a; i < b; k++) {
        uint8_t c = s[i];
        while (i < b && s[i] == c)
            i++;
    }
    size_t runs = k;
    /* Backwards, a move-to-front list: a run's rank is its byte's place in
     * the list of bytes by next use. */
    uint8_t list[256], seen[256];
    for (unsigned i = 0; i < 256; i++) {
        list[i] = (uint8_t)i;
        seen[i] = 0;
    }
    unsigned nseen = 0;
    size_t i = b;
    while (i > a) {
        uint8_t c = s[i - 1];
        while (i > a && s[i - 1] == c)
            i--;
        /* c is in the list (it holds every byte): memchr's vector search
         * beats a loop of up to 255 compares on high-entropy blocks */
        unsigned p = (unsigned)((const uint8_t *)memchr(list, c, 256) - list);
        memmove(list + 1, list, p);
        list[0] = c;
        rk[--k] = seen[c] ? (uint8_t)p : 0;
        if (!seen[c]) {
            seen[c] = 1;
            nseen++;
        }
    }
    /* the bytes seen are the front of the list, by first occurrence */
    memcpy(init, list, nseen);
    *ninit = (uint16_t)nseen;
    return runs;
}
