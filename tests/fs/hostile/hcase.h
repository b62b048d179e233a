/* One hostile case: the checks every mutated image must pass (see
 * tests/fs/test_fs_mutate.c for the list), run by hbound_run in a child. */
#ifndef HOSTILE_HCASE_H
#define HOSTILE_HCASE_H

#include <stddef.h>
#include <stdint.h>

#include "hwork.h"

typedef struct hcase {
    const uint8_t *img;
    size_t len;
    int raw; /* checksums left as they were: reads are checked against oracle */
    const hfacts *oracle;
} hcase;

/* Outcomes (exit codes of a case that passed); a failed step returns 1..5
 * after printing why on stderr. */
enum { HCASE_CLEAN = 100, HCASE_REPAIRED, HCASE_REFUSED, HCASE_UNLOADABLE };

#define HCASE_SECONDS 10
#define HCASE_MEMORY (1ull << 30)
#define HCASE_GROWTH (16ull << 20) /* a read-write mount grows the image at most by */

extern int hcase_verbose; /* log every step and the fs's messages on stderr */

/* arg: a hcase. */
int hcase_run(void *arg);

/* Runs seed's case on the base images (one per variant) in a bounded child:
 * the outcome, or the failed step (why set, the edits in what). */
int hcase_seed(uint64_t seed, uint8_t *const base[], const size_t len[], const hfacts oracle[],
               char *why, size_t whylen, char *what, size_t whatlen, int *raw);

#endif
