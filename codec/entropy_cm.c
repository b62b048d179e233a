/* Method 3, "adaptive": QLFC runs of the whole block coded by one adaptive
 * binary range coder; every decision's probability mixes three adaptive
 * counters (one keyed by the run's byte, two by contexts of recent ranks
 * and lengths) with a small learned mixer. Layout and model in
 * docs/entropy.md. Used for blocks under GMTF_QLFC_LANES_MIN, where method
 * 2's tables would cost too much; about 30-60 MB/s to decode, CPU only.
 *
 * Per run (its byte c is the front of the list, known to the decoder):
 *   rank symbol (as method 2: 1, 2, 3, 4, 5-6, ..., 193-255, retire) in
 *   unary, "is it 1?", "is it 2?", ..., retire after 15 noes; the offset in
 *   the class bit by bit down a tree; the length symbol (as method 2) in
 *   unary, then its first raw bit modelled and the rest direct; escaped
 *   lengths code their bit count in unary and the bits below direct.
 *
 * All arithmetic is integer (the squash curve is a fixed table), so every
 * platform makes and reads the same bytes. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmtf_codec.h"
#include "qlfc.h"
#include "qlfc_internal.h"
#include "qlfc_rc.h"

/* ---- the run alphabet (as method 2) -------------------------------------- */

#define NSYM 16
#define RSYM_RETIRE 0
#define RSYM_OFF_FIRST 5
#define LSYM_ESC 15
#define LBIG_MIN 8
#define LBIG_MAX 24

static const uint8_t rbase[NSYM] = {0, 1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 129, 193};
static const uint8_t rbits[NSYM] = {0, 0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 6, 6, 6};
/* first node of each class's offset tree (tree of 2^bits - 1 nodes) */
static const uint8_t rnode[NSYM] = {0, 0, 0, 0, 0, 0, 1, 2, 5, 8, 15, 22, 37, 52, 115, 178};
#define NOFF 241
static const uint8_t lbase[LSYM_ESC] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192};
static const uint8_t lbits[LSYM_ESC] = {0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6};

static unsigned rsym_of(unsigned r)
{
    if (r <= 4)
        return r;
    unsigned s = 5;
    while (s + 1 < NSYM && rbase[s + 1] <= r)
        s++;
    return s;
}

static unsigned lsym_of(uint32_t len)
{
    if (len >= 256)
        return LSYM_ESC;
    unsigned s = 0;
    while (s + 1 < LSYM_ESC && lbase[s + 1] <= len)
        s++;
    return s;
}

/* ---- counters, mixer, squash --------------------------------------------- */

/* P(1) on 16 bits and a use count; the rate is 1/(n + 1.5) down to
 * 1/(limit + 1.5). */
typedef struct {
    uint16_t p, n;
} ctr;

typedef struct {
    int32_t w[3];
} mixw;

/* Adaptive probability map: a probability refined by its context, by
 * interpolation between 33 points over stretch(p). */
typedef struct {
    uint16_t t[33];
} apm;

/* squash(x) = 4096 / (1 + e^(-x/256)) at x = -2048, -1920, ..., 2048 */
static const int16_t squash_pts[33] = {
    1,    2,    4,    6,    10,   17,   27,   45,   74,   120,  194,
    311,  488,  747,  1102, 1546, 2048, 2550, 2994, 3349, 3608, 3785,
    3902, 3976, 4022, 4051, 4069, 4079, 4086, 4090, 4092, 4094, 4095,
};

static inline int squash(int x)
{
    if (x > 2047)
        x = 2047;
    if (x < -2047)
        x = -2047;
    int w = x & 127, i = (x >> 7) + 16;
    return (squash_pts[i] * (128 - w) + squash_pts[i + 1] * w + 64) >> 7;
}

#ifndef LIM_CHAR
#define LIM_CHAR 30
#endif
#ifndef LIM_STATE
#define LIM_STATE 126
#endif
#ifndef LIM_STATIC
#define LIM_STATIC 255
#endif
#ifndef MIX_LR
#define MIX_LR 1
#endif
#ifndef MIX_SH
#define MIX_SH 11
#endif
#ifndef APM_RATE
#define APM_RATE 6
#endif
#ifndef APM_W
#define APM_W 2 /* of 4: weight of the APM's estimate */
#endif

/* ---- model ----------------------------------------------------------------- */

#define NRNODE 15 /* rank unary decisions */
#define NLNODE 15 /* length unary decisions */
#define NRCTX (12 * 5 * 4)
#define NLCTX (12 * 5)
#define ER_INIT 48

/* Constant tables, built once (building them for every block was ~5% of
 * decoding the small blocks of a filesystem): stretch = the inverse of
 * squash; a counter's rate by its use count. */
static int16_t cm_stretch[4096];
static int16_t cm_squash[4095]; /* squash(x) at x + 2047 */
static uint16_t cm_rate[256];
static long cm_cpus; /* online CPUs: the encoder's halves want two */
static pthread_once_t cm_tables_once = PTHREAD_ONCE_INIT;

static void cm_tables_build(void)
{
    /* stretch: by walking squash upwards */
    int pi = 0;
    for (int x = -2047; x <= 2047; x++) {
        int v = squash(x);
        for (int j = pi; j <= v; j++)
            cm_stretch[j] = (int16_t)x;
        pi = v + 1;
    }
    for (int j = pi; j < 4096; j++)
        cm_stretch[j] = 2047;
    for (int x = -2047; x <= 2047; x++)
        cm_squash[x + 2047] = (int16_t)squash(x);
    for (unsigned n = 0; n < 256; n++)
        cm_rate[n] = (uint16_t)(131072u / (2 * n + 3));
    cm_cpus = sysconf(_SC_NPROCESSORS_ONLN);
}

typedef struct {
    /* rank class, unary */
    ctr r_char[256][NRNODE], r_st1[NRCTX][NRNODE], r_st2[256][NRNODE];
    mixw r_mix[NRNODE][5];
    /* rank offsets */
    ctr o_char[256][NOFF], o_st[12][NOFF], o_static[NOFF];
    mixw o_mix[NSYM];
    /* length class, unary */
    ctr l_char[256][NLNODE], l_st1[NLCTX][NLNODE], l_st2[64][NLNODE];
    mixw l_mix[NLNODE][5];
    /* first raw bit of a length class; escaped lengths' bit count */
    ctr b_char[256][NSYM], b_st[NLCTX][NSYM], b_static[NSYM];
    mixw b_mix[NSYM];
    apm r_apm[NRNODE][4], l_apm[NLNODE][4], o_apm[NSYM], b_apm[NSYM];
    qbit esc[LBIG_MAX - LBIG_MIN + 1];
    qbit list[64];
    /* per byte history, as method 2 */
    uint8_t er[256], el[256], hr[256];
    uint8_t list_bytes[256];
} cm_model;

static const uint8_t e_q[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 9, 10, 10, 11, 11};
static const uint8_t h_q[16] = {0, 1, 2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};
static const uint8_t p_q[16] = {3, 0, 1, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3};
static const uint8_t r_q[16] = {0, 1, 2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};

static void ctr_init(ctr *c, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        c[i].p = 32768;
        c[i].n = 0;
    }
}

static void mix_init(mixw *m, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        m[i].w[0] = 20000;
        m[i].w[1] = 26000;
        m[i].w[2] = 20000;
    }
}

static void apm_init(apm *a, size_t count)
{
    for (size_t i = 0; i < count; i++)
        for (int j = 0; j < 33; j++)
            a[i].t[j] = (uint16_t)(squash((j - 16) * 128) * 16);
}

static void model_init_slow(cm_model *m)
{
    ctr_init(&m->r_char[0][0], sizeof m->r_char / sizeof(ctr));
    ctr_init(&m->r_st1[0][0], sizeof m->r_st1 / sizeof(ctr));
    ctr_init(&m->r_st2[0][0], sizeof m->r_st2 / sizeof(ctr));
    ctr_init(&m->o_char[0][0], sizeof m->o_char / sizeof(ctr));
    ctr_init(&m->o_st[0][0], sizeof m->o_st / sizeof(ctr));
    ctr_init(m->o_static, NOFF);
    ctr_init(&m->l_char[0][0], sizeof m->l_char / sizeof(ctr));
    ctr_init(&m->l_st1[0][0], sizeof m->l_st1 / sizeof(ctr));
    ctr_init(&m->l_st2[0][0], sizeof m->l_st2 / sizeof(ctr));
    ctr_init(&m->b_char[0][0], sizeof m->b_char / sizeof(ctr));
    ctr_init(&m->b_st[0][0], sizeof m->b_st / sizeof(ctr));
    ctr_init(m->b_static, NSYM);
    mix_init(&m->r_mix[0][0], sizeof m->r_mix / sizeof(mixw));
    mix_init(m->o_mix, NSYM);
    mix_init(&m->l_mix[0][0], sizeof m->l_mix / sizeof(mixw));
    mix_init(m->b_mix, NSYM);
    apm_init(&m->r_apm[0][0], sizeof m->r_apm / sizeof(apm));
    apm_init(&m->l_apm[0][0], sizeof m->l_apm / sizeof(apm));
    apm_init(m->o_apm, NSYM);
    apm_init(m->b_apm, NSYM);
    qbit_init(m->esc, LBIG_MAX - LBIG_MIN + 1);
    qbit_init(m->list, 64);
    memset(m->er, ER_INIT, 256);
    memset(m->el, 0, 256);
    memset(m->hr, 0, 256);
}

/* The model's first state, built once beside the constant tables. A block
 * starts from a copy of the parts every block uses (the contexts, mixers,
 * maps) and of the rows of the bytes it holds (its list): the rows of the
 * other bytes are never read. Initialising field by field, the APMs through
 * squash, was 5% of decoding the 64 KiB frames of a small filesystem;
 * copying the whole model (350 KB, three quarters of it the 256 bytes'
 * rows) was 7-10% of a hostile-image case's CPU, whose images hold
 * thousands of small frames. */
static cm_model cm_template;
static pthread_once_t cm_template_once = PTHREAD_ONCE_INIT;

static void cm_template_build(void)
{
    pthread_once(&cm_tables_once, cm_tables_build);
    model_init_slow(&cm_template);
}

/* Copies the fields from a up to (not including) b from the template. */
#define CM_COPY_SPAN(m, a, b)                                                                      \
    memcpy((char *)(m) + offsetof(cm_model, a),                                                    \
           (const char *)&cm_template + offsetof(cm_model, a),                                     \
           offsetof(cm_model, b) - offsetof(cm_model, a))

/* Everything but the per-byte rows (r_char, o_char, l_char, b_char). */
static void model_init_shared(cm_model *m)
{
    pthread_once(&cm_template_once, cm_template_build);
    CM_COPY_SPAN(m, r_st1, o_char);
    CM_COPY_SPAN(m, o_st, l_char);
    CM_COPY_SPAN(m, l_st1, b_char);
    CM_COPY_SPAN(m, b_st, list_bytes);
}

/* The rows of the d bytes of list (distinct, from the block's list). */
static void model_init_bytes(cm_model *m, const uint8_t *list, unsigned d)
{
    for (unsigned i = 0; i < d; i++) {
        unsigned c = list[i];
        memcpy(m->r_char[c], cm_template.r_char[c], sizeof m->r_char[c]);
        memcpy(m->o_char[c], cm_template.o_char[c], sizeof m->o_char[c]);
        memcpy(m->l_char[c], cm_template.l_char[c], sizeof m->l_char[c]);
        memcpy(m->b_char[c], cm_template.b_char[c], sizeof m->b_char[c]);
    }
}

/* ---- one decision ---------------------------------------------------------- */

typedef struct {
    qrc_enc e;
    qrc_dec d;
    uint16_t *rec; /* CM_RECORD: where the decisions go */
} coder;

/* cm_bit's modes: code the bit, decode it, or record p | bit << 15 at
 * co->rec for a range coder later (the encoder's halves, below) */
#define CM_ENCODE 0
#define CM_DECODE 1
#define CM_RECORD 2

static inline __attribute__((always_inline)) void ctr_update(ctr *c, int bit, unsigned limit)
{
    int target = bit ? 65535 : 0;
    c->p = (uint16_t)(c->p + (((target - (int)c->p) * (int)cm_rate[c->n]) >> 16));
    c->n = (uint16_t)(c->n + (c->n < limit));
}

/* Codes, decodes or records (dec, a mode above) one bit predicted by
 * counters a (byte), b and s (contexts) mixed by mx, refined by the map
 * ap. */
static inline __attribute__((always_inline)) int cm_bit(coder *co, int dec, ctr *a, ctr *b, ctr *s,
                                                        mixw *mx, apm *ap, int bit)
{
    int x0 = cm_stretch[a->p >> 4], x1 = cm_stretch[b->p >> 4], x2 = cm_stretch[s->p >> 4];
    int dot =
        (int)(((int64_t)mx->w[0] * x0 + (int64_t)mx->w[1] * x1 + (int64_t)mx->w[2] * x2) >> 16);
    dot = dot > 2047 ? 2047 : dot < -2047 ? -2047 : dot;
    int pm = cm_squash[dot + 2047];
    unsigned sx = (unsigned)(dot + 2048), j = sx >> 7, wj = sx & 127;
    int pa = (ap->t[j] * (int)(128 - wj) + ap->t[j + 1] * (int)wj) >> 11;
    int p = (pm * (4 - APM_W) + pa * APM_W) >> 2;
    p = p < 1 ? 1 : p > 4095 ? 4095 : p;
    if (dec == CM_DECODE)
        bit = qrc_decode(&co->d, (uint32_t)p);
    else if (dec == CM_ENCODE)
        qrc_encode(&co->e, (uint32_t)p, bit);
    else
        *co->rec++ = (uint16_t)(p | bit << 15);
    int err = ((bit << 12) - pm) * MIX_LR;
    mx->w[0] += (x0 * err) >> MIX_SH;
    mx->w[1] += (x1 * err) >> MIX_SH;
    mx->w[2] += (x2 * err) >> MIX_SH;
    int target = bit ? 65535 : 0;
    unsigned jn = j + (wj >> 6); /* the nearer point */
    ap->t[jn] = (uint16_t)(ap->t[jn] + ((target - (int)ap->t[jn]) >> APM_RATE));
    ctr_update(a, bit, LIM_CHAR);
    ctr_update(b, bit, LIM_STATE);
    ctr_update(s, bit, LIM_STATIC);
    return bit;
}

static inline void code_direct(coder *co, int dec, uint32_t *v, unsigned nb)
{
    if (nb == 0) {
        *v = 0;
        return;
    }
    if (dec)
        *v = qrc_decode_direct(&co->d, nb);
    else
        qrc_encode_direct(&co->e, *v, nb);
}

/* ---- runs -------------------------------------------------------------------- */

typedef struct {
    unsigned ctx_r4;  /* last 4 rank classes, 2 bits each */
    unsigned ctx_run; /* last 6 runs: length 1 or not */
    unsigned prev;    /* previous rank symbol */
} cm_hist;

/* A run's rank symbol and offset (cm_run's first half): coded, decoded or
 * recorded; on decode *rsym and *off are outputs. Reads and writes only the
 * rank half of the model (r_*, o_*, er, hr) and of h (ctx_r4, prev). */
static inline __attribute__((always_inline)) void
cm_run_rank(cm_model *m, coder *co, int dec, cm_hist *h, unsigned c, unsigned *rsym, uint32_t *off)
{
    unsigned er = m->er[c], hr = m->hr[c];
    unsigned rctx = (e_q[(er + 8) >> 4] * 5 + h_q[hr]) * 4 + p_q[h->prev];
    unsigned hq = h_q[hr];
    /* rank symbol: unary over 1..15, retire after */
    unsigned rs = dec == CM_DECODE ? 0 : *rsym;
    unsigned i = 0;
    for (; i < NRNODE; i++) {
        int stop = cm_bit(co, dec, &m->r_char[c][i], &m->r_st1[rctx][i], &m->r_st2[h->ctx_r4][i],
                          &m->r_mix[i][hq], &m->r_apm[i][h->ctx_r4 & 3], rs == i + 1);
        if (stop)
            break;
    }
    rs = i < NRNODE ? i + 1 : RSYM_RETIRE;
    /* offset in the class, down a tree */
    uint32_t o = dec == CM_DECODE ? 0 : *off;
    if (rbits[rs]) {
        unsigned node = 1, nb = rbits[rs], eq = e_q[(er + 8) >> 4];
        for (int j = (int)nb - 1; j >= 0; j--) {
            unsigned idx = rnode[rs] + node - 1;
            int bit = cm_bit(co, dec, &m->o_char[c][idx], &m->o_st[eq][idx], &m->o_static[idx],
                             &m->o_mix[rs], &m->o_apm[rs], (int)((o >> j) & 1));
            node = node * 2 + (unsigned)bit;
        }
        o = node - (1u << nb);
    }
    /* history */
    unsigned rv = rs == RSYM_RETIRE ? 15 : rs;
    m->er[c] = (uint8_t)((er + (rv << 4)) >> 1);
    m->hr[c] = (uint8_t)rv;
    h->ctx_r4 = (h->ctx_r4 << 2 | (rs == 0 ? 3 : rs < 3 ? rs - 1 : rs < 5 ? 2 : 3)) & 0xFF;
    h->prev = rs;
    *rsym = rs;
    *off = o;
}

/* An escaped length's bit count (adaptive bits esc) and bits below the
 * top (direct); *len is an output on decode. */
static inline void cm_len_escape(cm_model *m, coder *co, int dec, uint32_t *len)
{
    unsigned eb = dec == CM_DECODE ? 0 : 31 - (unsigned)__builtin_clz(*len);
    unsigned k = LBIG_MIN;
    for (; k < LBIG_MAX; k++) {
        int more;
        if (dec == CM_DECODE)
            more = qbit_dec(&co->d, &m->esc[k - LBIG_MIN]);
        else
            qbit_enc(&co->e, &m->esc[k - LBIG_MIN], more = eb > k);
        if (!more)
            break;
    }
    eb = k;
    uint32_t low = dec == CM_DECODE ? 0 : *len & ((1u << eb) - 1);
    uint32_t hi = low >> 16, lo16 = low & 0xFFFF;
    code_direct(co, dec, &hi, eb > 16 ? eb - 16 : 0);
    code_direct(co, dec, &lo16, eb < 16 ? eb : 16);
    *len = 1u << eb | hi << 16 | lo16;
}

/* A run's length (cm_run's second half), rs its rank symbol: coded,
 * decoded (*len an output) or recorded; recording leaves out what is not
 * modelled here (the direct bits, the escape: cm_merge_run codes them).
 * Reads and writes only the length half of the model (l_*, b_*, el, and
 * esc when not recording) and of h (ctx_run). */
static inline __attribute__((always_inline)) void
cm_run_len(cm_model *m, coder *co, int dec, cm_hist *h, unsigned c, unsigned rs, uint32_t *len)
{
    unsigned el = m->el[c];
    /* length symbol: unary over 0..14, escape after */
    unsigned lctx = e_q[(el + 8) >> 4] * 5 + r_q[rs];
    unsigned ls = dec == CM_DECODE ? 0 : lsym_of(*len);
    unsigned rl = (h->ctx_run & 15) * 4 + (r_q[rs] < 3 ? r_q[rs] : 3);
    unsigned lq = el < 16 ? 0 : el < 32 ? 1 : el < 64 ? 2 : el < 112 ? 3 : 4;
    unsigned i;
    for (i = 0; i < NLNODE; i++) {
        int stop = cm_bit(co, dec, &m->l_char[c][i], &m->l_st1[lctx][i], &m->l_st2[rl][i],
                          &m->l_mix[i][lq], &m->l_apm[i][h->ctx_run & 3], ls == i);
        if (stop)
            break;
    }
    ls = i < NLNODE ? i : LSYM_ESC;
    uint32_t l = dec == CM_DECODE ? 0 : *len;
    if (ls != LSYM_ESC) {
        uint32_t extra = dec == CM_DECODE ? 0 : l - lbase[ls];
        unsigned nb = lbits[ls];
        if (nb) {
            int top = cm_bit(co, dec, &m->b_char[c][ls], &m->b_st[lctx][ls], &m->b_static[ls],
                             &m->b_mix[ls], &m->b_apm[ls], (int)((extra >> (nb - 1)) & 1));
            uint32_t rest = extra & ((1u << (nb - 1)) - 1);
            if (dec != CM_RECORD)
                code_direct(co, dec, &rest, nb - 1);
            extra = (uint32_t)top << (nb - 1) | rest;
        }
        l = lbase[ls] + extra;
    } else if (dec != CM_RECORD) {
        cm_len_escape(m, co, dec, &l);
    }
    /* history */
    m->el[c] = (uint8_t)((el + (ls << 4)) >> 1);
    h->ctx_run = (h->ctx_run << 1 | (l == 1)) & 0x3F;
    *len = l;
}

/* Codes or decodes one run's rank symbol, offset and length; c is the
 * run's byte. On decode *rsym, *off, *len are outputs. Returns 0 or
 * GMTF_E_CORRUPT. */
static inline __attribute__((always_inline)) int cm_run(cm_model *m, coder *co, int dec, cm_hist *h,
                                                        unsigned c, unsigned *rsym, uint32_t *off,
                                                        uint32_t *len)
{
    cm_run_rank(m, co, dec, h, c, rsym, off);
    cm_run_len(m, co, dec, h, c, *rsym, len);
    return 0;
}

/* ---- workspace ----------------------------------------------------------------- */

#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

/* A lane's whole state (model, coder, place). Method 4 decodes its lanes
 * one after the other in one of these: stepping all of them in turn, a run
 * each, so that their independent chains overlap, measured 0.75-0.8 times
 * as fast on 4 MiB blocks of the tar at 8 lanes (8 models of 353 KB do not
 * fit the core's L2; 2026-11-24, task ratio5). */
typedef struct {
    cm_model m;
    coder co;
    cm_hist h;
    size_t pos, end, qend;
    unsigned active, q;
} cm_lane;

size_t gmtf_cm_decode_workspace_size(void)
{
    return ALIGN64(sizeof(cm_lane));
}

size_t gmtf_cm_workspace_size(size_t max_block)
{
    size_t enc = ALIGN64(sizeof(cm_model)) + ALIGN64(max_block);
    size_t dec = gmtf_cm_decode_workspace_size();
    return enc > dec ? enc : dec;
}

/* The list: its length, then each byte as its place among the bytes not yet
 * listed (in increasing order), Elias-gamma coded. */
static void put_list(coder *co, cm_model *m, const uint8_t *list, unsigned d)
{
    uint8_t order[256];
    for (unsigned i = 0; i < 256; i++)
        order[i] = (uint8_t)i;
    qgamma_enc(&co->e, &m->list[0], d + 1);
    for (unsigned i = 0, left = 256; i < d; i++, left--) {
        unsigned p = 0;
        while (order[p] != list[i])
            p++;
        qgamma_enc(&co->e, &m->list[32], p + 1);
        memmove(order + p, order + p + 1, left - p - 1);
    }
}

static int get_list(coder *co, cm_model *m, uint8_t *list, unsigned *dcount)
{
    uint8_t order[256];
    for (unsigned i = 0; i < 256; i++)
        order[i] = (uint8_t)i;
    uint32_t v = qgamma_dec(&co->d, &m->list[0], 9);
    if (v == 0 || v > 257)
        return GMTF_E_CORRUPT;
    unsigned cnt = v - 1, left = 256;
    for (unsigned i = 0; i < cnt; i++, left--) {
        uint32_t p = qgamma_dec(&co->d, &m->list[32], 8);
        if (p == 0 || p > left)
            return GMTF_E_CORRUPT;
        list[i] = order[p - 1];
        memmove(order + p - 1, order + p, left - p);
    }
    *dcount = cnt;
    return 0;
}

/* ---- the encoder in halves ---------------------------------------------------- */

/* The encoder knows every decision beforehand, and the model's rank half
 * and length half (cm_run_rank, cm_run_len) read and write disjoint state.
 * A span of CM_SPLIT_RUNS runs or more runs the rank half on a thread of
 * its own, a chunk or two ahead: for a chunk of runs, each half records
 * its decisions (p and bit), then one range coder codes them in the
 * stream's order, the same bytes as cm_run makes (the blocks method 2's
 * rule defers for long runs, 16 MiB there, had method 3's encoder alone
 * on one core for a third of a window's time). In one thread the records
 * cost more than they save: smaller spans code run by run. */
#define CM_CHUNK 2048        /* runs */
#define CM_RREC (NRNODE + 6) /* most rank decisions of a run */
#define CM_LREC (NLNODE + 1) /* most length decisions recorded */
#ifndef CM_SPLIT_RUNS
#define CM_SPLIT_RUNS (1u << 17) /* >= ~15 ms of coding; a thread: ~0.05 ms */
#endif

typedef struct {
    const uint8_t *bwt, *rk;
    size_t b, runs;
    cm_model *m;
    /* the rank half: its place, history, records (two chunks) */
    size_t ri;
    cm_hist rh;
    uint16_t *rrec[2];
    /* the thread's handshake: chunks recorded, chunks coded, stop */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t ready, merged;
    int stop;
} cm_split;

/* The rank half of runs [k, k1) into rec. */
static void cm_rank_chunk(cm_split *sp, size_t k, size_t k1, uint16_t *rec)
{
    coder co;
    co.rec = rec;
    size_t i = sp->ri;
    for (; k < k1; k++) {
        unsigned c = sp->bwt[i];
        i = qlfc_run_end(sp->bwt, i, sp->b);
        unsigned rsym = sp->rk[k] ? rsym_of(sp->rk[k]) : RSYM_RETIRE;
        uint32_t off = sp->rk[k] ? sp->rk[k] - rbase[rsym] : 0;
        cm_run_rank(sp->m, &co, CM_RECORD, &sp->rh, c, &rsym, &off);
    }
    sp->ri = i;
}

static void *cm_rank_thread(void *arg)
{
    cm_split *sp = arg;
    for (size_t j = 0, k = 0; k < sp->runs; j++, k += CM_CHUNK) {
        pthread_mutex_lock(&sp->mu);
        while (!sp->stop && j >= sp->merged + 2)
            pthread_cond_wait(&sp->cv, &sp->mu);
        int stop = sp->stop;
        pthread_mutex_unlock(&sp->mu);
        if (stop)
            break;
        cm_rank_chunk(sp, k, sp->runs - k < CM_CHUNK ? sp->runs : k + CM_CHUNK, sp->rrec[j & 1]);
        pthread_mutex_lock(&sp->mu);
        sp->ready = j + 1;
        pthread_cond_broadcast(&sp->cv);
        pthread_mutex_unlock(&sp->mu);
    }
    return NULL;
}

/* Codes run k's recorded decisions (*rq: the rank half's, *lq: the length
 * half's) and what cm_run_len leaves out when recording, in cm_run's order. */
static inline void cm_merge_run(cm_model *m, coder *co, unsigned rs, uint32_t len,
                                const uint16_t **rq, const uint16_t **lq)
{
    const uint16_t *q = *rq;
    for (unsigned n = (rs == RSYM_RETIRE ? NRNODE : rs) + rbits[rs]; n; n--, q++)
        qrc_encode(&co->e, *q & 0xFFFu, *q >> 15);
    *rq = q;
    unsigned ls = lsym_of(len);
    q = *lq;
    unsigned n = ls == LSYM_ESC ? NLNODE : ls + 1u + (lbits[ls] != 0);
    for (; n; n--, q++)
        qrc_encode(&co->e, *q & 0xFFFu, *q >> 15);
    *lq = q;
    if (ls == LSYM_ESC) {
        cm_len_escape(m, co, CM_ENCODE, &len);
    } else if (lbits[ls] > 1) {
        uint32_t rest = (len - lbase[ls]) & ((1u << (lbits[ls] - 1)) - 1);
        code_direct(co, CM_ENCODE, &rest, lbits[ls] - 1u);
    }
}

/* The rank half on a thread of its own (signals blocked there: the
 * caller's handlers stay the caller's); 1 when it started. The thread
 * is bounded: one a call, two chunks of records ahead at most. */
static int cm_rank_thread_start(cm_split *sp, pthread_t *th)
{
    pthread_mutex_init(&sp->mu, NULL);
    pthread_cond_init(&sp->cv, NULL);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int ok = pthread_create(th, NULL, cm_rank_thread, sp) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!ok) {
        pthread_cond_destroy(&sp->cv);
        pthread_mutex_destroy(&sp->mu);
    }
    return ok;
}

static void cm_rank_thread_end(cm_split *sp, pthread_t th)
{
    pthread_mutex_lock(&sp->mu);
    sp->stop = 1; /* after an overflow: the thread may be waiting for room */
    pthread_cond_broadcast(&sp->cv);
    pthread_mutex_unlock(&sp->mu);
    pthread_join(th, NULL);
    pthread_cond_destroy(&sp->cv);
    pthread_mutex_destroy(&sp->mu);
}

/* The runs of bwt[a..b) (ranks rk) after the list, by halves on two
 * threads: 0, or -EAGAIN before coding anything when the records' memory
 * or the thread cannot be had (the caller then codes run by run). */
static int cm_encode_split(const uint8_t *bwt, size_t a, size_t b, const uint8_t *rk, size_t runs,
                           cm_model *m, coder *co)
{
    size_t rbytes = (size_t)CM_CHUNK * CM_RREC * sizeof(uint16_t);
    size_t lbytes = (size_t)CM_CHUNK * CM_LREC * sizeof(uint16_t);
    uint8_t *mem = malloc(2 * rbytes + lbytes + CM_CHUNK * sizeof(uint32_t));
    if (!mem)
        return -EAGAIN;
    cm_split sp = {.bwt = bwt, .rk = rk, .b = b, .runs = runs, .m = m, .ri = a};
    sp.rh = (cm_hist){0, 0, 1};
    sp.rrec[0] = (uint16_t *)mem;
    sp.rrec[1] = (uint16_t *)(mem + rbytes);
    uint16_t *lrec = (uint16_t *)(mem + 2 * rbytes);
    uint32_t *lens = (uint32_t *)(mem + 2 * rbytes + lbytes);
    pthread_t th;
    if (!cm_rank_thread_start(&sp, &th)) {
        free(mem);
        return -EAGAIN;
    }
    cm_hist h = {0, 0, 1};
    size_t i = a;
    for (size_t j = 0, k = 0; k < runs && !co->e.overflow; j++) {
        size_t k1 = runs - k < CM_CHUNK ? runs : k + CM_CHUNK;
        coder lc;
        lc.rec = lrec;
        for (size_t r = k; r < k1; r++) {
            unsigned c = bwt[i];
            size_t st = i;
            i = qlfc_run_end(bwt, i, b);
            uint32_t len = (uint32_t)(i - st);
            cm_run_len(m, &lc, CM_RECORD, &h, c, rk[r] ? rsym_of(rk[r]) : RSYM_RETIRE, &len);
            lens[r - k] = len;
        }
        pthread_mutex_lock(&sp.mu);
        while (sp.ready <= j)
            pthread_cond_wait(&sp.cv, &sp.mu);
        pthread_mutex_unlock(&sp.mu);
        const uint16_t *rq = sp.rrec[j & 1], *lq = lrec;
        for (size_t r = k; r < k1; r++)
            cm_merge_run(m, co, rk[r] ? rsym_of(rk[r]) : RSYM_RETIRE, lens[r - k], &rq, &lq);
        k = k1;
        pthread_mutex_lock(&sp.mu);
        sp.merged = j + 1;
        pthread_cond_broadcast(&sp.cv);
        pthread_mutex_unlock(&sp.mu);
    }
    cm_rank_thread_end(&sp, th);
    free(mem);
    return 0;
}

/* GMTF_CM_HALVES=1: the halves on two threads for long spans; off by
 * default. On the H100 host (2026-11-25 11:35 UTC, docs/gpu.md) mkfs of
 * the whole tar, where every core is busy (the pool's coding, the import),
 * took 5.177 s (4.889-5.318) with them against 4.718 s without (one run,
 * same call), and on the CPU 15.485 against 15.085 s: the thread gains only
 * where a core is free (m3enc's harness: 0.62x the caller's time, 3-7%
 * more CPU in all), which a batch codec's callers rarely leave. Same bytes
 * either way. */
static int cm_halves_on(void)
{
    const char *e = getenv("GMTF_CM_HALVES");
    return e && e[0] == '1' && !e[1];
}

/* Codes bwt[a..b) (a < b) as one stream of method 3's coder (list, then
 * runs) into dst, by halves (many runs) or run by run (serial: always);
 * returns its length or -ENOSPC. */
static long cm_encode_span(const uint8_t *bwt, size_t a, size_t b, uint8_t *dst, size_t cap,
                           void *ws, int serial)
{
    cm_model *m = ws;
    uint8_t *rk = (uint8_t *)ws + ALIGN64(sizeof(cm_model));
    model_init_shared(m);
    uint16_t d;
    size_t runs = gmtf_qlfc_ranks(bwt, a, b, rk, m->list_bytes, &d);
    model_init_bytes(m, m->list_bytes, d);
    coder co;
    qrc_enc_init(&co.e, dst, cap);
    put_list(&co, m, m->list_bytes, d);
    if (serial || runs < CM_SPLIT_RUNS || cm_cpus < 2 || !cm_halves_on() ||
        cm_encode_split(bwt, a, b, rk, runs, m, &co) < 0) {
        cm_hist h = {0, 0, 1};
        size_t i = a;
        for (size_t k = 0; k < runs; k++) {
            if (co.e.overflow)
                return -ENOSPC;
            unsigned c = bwt[i];
            size_t st = i;
            i = qlfc_run_end(bwt, i, b);
            unsigned rsym = rk[k] ? rsym_of(rk[k]) : RSYM_RETIRE;
            uint32_t off = rk[k] ? rk[k] - rbase[rsym] : 0;
            uint32_t len = (uint32_t)(i - st);
            cm_run(m, &co, CM_ENCODE, &h, c, &rsym, &off, &len);
        }
    }
    long r = qrc_enc_finish(&co.e, dst);
    return r < 0 ? -ENOSPC : r;
}

static long cm_adaptive_encode(const uint8_t *bwt, size_t n, uint8_t *dst, size_t cap, void *ws,
                               int serial)
{
    if (n == 0 || n > GMTF_BLOCK_MAX)
        return -EINVAL;
    if (cap < 1)
        return -ENOSPC;
    long r = cm_encode_span(bwt, 0, n, dst + 1, cap - 1, ws, serial);
    if (r < 0)
        return r;
    dst[0] = GMTF_QLFC_METHOD_ADAPTIVE;
    return r + 1;
}

long gmtf_adaptive_qlfc_encode(const uint8_t *bwt, size_t n, uint8_t *dst, size_t cap, void *ws)
{
    return cm_adaptive_encode(bwt, n, dst, cap, ws, 0);
}

long gmtf_adaptive_qlfc_encode_serial(const uint8_t *bwt, size_t n, uint8_t *dst, size_t cap,
                                      void *ws)
{
    return cm_adaptive_encode(bwt, n, dst, cap, ws, 1);
}

/* Method 4's lanes: lane j of L covers [j seg, min(n, (j + 1) seg)), seg =
 * ceil(n / L); every lane must hold at least one byte. */
static size_t cm_lane_seg(size_t n, unsigned nl)
{
    return (n + nl - 1) / nl;
}

static int cm_lanes_valid(size_t n, unsigned nl)
{
    return nl >= 1 && nl <= GMTF_QLFC_CM_LANES_MAX && (nl - 1) * cm_lane_seg(n, nl) < n;
}

long gmtf_cm_lanes_encode(const uint8_t *bwt, size_t n, unsigned nl, uint8_t *dst, size_t cap,
                          void *ws)
{
    if (n == 0 || n > GMTF_BLOCK_MAX || nl < 1 || nl > GMTF_QLFC_CM_LANES_MAX)
        return -EINVAL;
    while (!cm_lanes_valid(n, nl))
        nl--;
    size_t seg = cm_lane_seg(n, nl), used = 2 + 4 * (size_t)(nl - 1);
    if (cap < used)
        return -ENOSPC;
    dst[0] = GMTF_QLFC_METHOD_CM_LANES;
    dst[1] = (uint8_t)nl;
    for (unsigned j = 0; j < nl; j++) {
        size_t a = j * seg, b = a + seg < n ? a + seg : n;
        long r = cm_encode_span(bwt, a, b, dst + used, cap - used, ws, 0);
        if (r < 0)
            return r;
        if (j + 1 < nl) {
            uint8_t *q = dst + 2 + 4 * j;
            q[0] = (uint8_t)r;
            q[1] = (uint8_t)(r >> 8);
            q[2] = (uint8_t)(r >> 16);
            q[3] = (uint8_t)(r >> 24);
        }
        used += (size_t)r;
    }
    return (long)used;
}

int gmtf_adaptive_qlfc_decode(const uint8_t *src, size_t len, uint8_t *out, size_t n, void *ws)
{
    return gmtf_adaptive_qlfc_decode_counted(src, len, out, n, ws, NULL);
}

/* Adds a run of c at [pos, pos + run) to the counts of the quarters it
 * covers (*q: the quarter of pos, moved on). */
static void count_run(gmtf_bwt_counts *counts, unsigned *q, size_t pos, uint32_t run, unsigned c)
{
    while (*q < 3 && pos + run > counts->start[*q + 1]) {
        uint32_t part = (uint32_t)(counts->start[*q + 1] - pos);
        counts->cnt[*q][c] += part;
        pos += part;
        run -= part;
        ++*q;
    }
    counts->cnt[*q][c] += run;
}

int gmtf_adaptive_qlfc_decode_counted(const uint8_t *src, size_t len, uint8_t *out, size_t n,
                                      void *ws, gmtf_bwt_counts *counts)
{
    if (len < 1 || src[0] != GMTF_QLFC_METHOD_ADAPTIVE || n == 0 || n > GMTF_BLOCK_MAX)
        return GMTF_E_CORRUPT;
    cm_model *m = ws;
    model_init_shared(m);
    coder co;
    qrc_dec_init(&co.d, src + 1, len - 1);
    uint8_t *list = m->list_bytes;
    unsigned active;
    int err = get_list(&co, m, list, &active);
    if (err)
        return err;
    model_init_bytes(m, list, active);
    cm_hist h = {0, 0, 1};
    size_t pos = 0;
    unsigned q = 0;
    size_t qend = n; /* where quarter q ends */
    if (counts) {
        for (unsigned k = 0; k < 4; k++)
            counts->start[k] = (uint32_t)(k * (n / 4));
        counts->start[4] = (uint32_t)n;
        memset(counts->cnt, 0, sizeof counts->cnt);
        qend = counts->start[1];
    }
    while (pos < n) {
        if (active == 0)
            return GMTF_E_CORRUPT;
        unsigned c = list[0], rsym;
        uint32_t off, run;
        cm_run(m, &co, 1, &h, c, &rsym, &off, &run);
        unsigned r = rsym == RSYM_RETIRE ? active - 1 : rbase[rsym] + off;
        if (r >= active || run > n - pos)
            return GMTF_E_CORRUPT;
        qlfc_put_run(out + pos, c, run, n - pos);
        if (counts) {
            if (__builtin_expect(pos + run <= qend, 1)) {
                counts->cnt[q][c] += run;
            } else {
                count_run(counts, &q, pos, run, c);
                qend = counts->start[q + 1];
            }
        }
        pos += run;
        qlfc_list_reinsert(list, r, c);
        active -= rsym == RSYM_RETIRE;
    }
    if (active != 0 || !qrc_dec_done(&co.d))
        return GMTF_E_CORRUPT;
    return 0;
}

/* One run of a lane (pos < end): decodes it, writes it, counts it. */
static inline __attribute__((always_inline)) int cm_lane_run(cm_lane *l, uint8_t *out,
                                                             gmtf_bwt_counts *counts)
{
    if (l->active == 0)
        return GMTF_E_CORRUPT;
    uint8_t *list = l->m.list_bytes;
    unsigned c = list[0], rsym;
    uint32_t off, run;
    cm_run(&l->m, &l->co, 1, &l->h, c, &rsym, &off, &run);
    unsigned r = rsym == RSYM_RETIRE ? l->active - 1 : rbase[rsym] + off;
    size_t pos = l->pos, left = l->end - pos;
    if (r >= l->active || run > left)
        return GMTF_E_CORRUPT;
    qlfc_put_run(out + pos, c, run, left); /* the bytes past the run are this lane's */
    if (counts) {
        if (__builtin_expect(pos + run <= l->qend, 1)) {
            counts->cnt[l->q][c] += run;
        } else {
            count_run(counts, &l->q, pos, run, c);
            l->qend = counts->start[l->q + 1];
        }
    }
    l->pos = pos + run;
    qlfc_list_reinsert(list, r, c);
    l->active -= rsym == RSYM_RETIRE;
    return 0;
}

/* Sets lane l up for the stream src[0..sl) of bytes [a, b) of the block. */
static int cm_lane_start(cm_lane *l, const uint8_t *src, size_t sl, size_t a, size_t b, size_t n,
                         const gmtf_bwt_counts *counts)
{
    model_init_shared(&l->m);
    qrc_dec_init(&l->co.d, src, sl);
    int err = get_list(&l->co, &l->m, l->m.list_bytes, &l->active);
    if (err)
        return err;
    model_init_bytes(&l->m, l->m.list_bytes, l->active);
    l->h = (cm_hist){0, 0, 1};
    l->pos = a;
    l->end = b;
    l->q = 0;
    l->qend = n;
    if (counts) {
        while (l->q < 3 && a >= counts->start[l->q + 1])
            l->q++;
        l->qend = counts->start[l->q + 1];
    }
    return 0;
}

static int cm_lane_finish(const cm_lane *l)
{
    return l->active != 0 || !qrc_dec_done(&l->co.d) ? GMTF_E_CORRUPT : 0;
}

int gmtf_cm_lanes_decode_counted(const uint8_t *src, size_t len, uint8_t *out, size_t n, void *ws,
                                 gmtf_bwt_counts *counts)
{
    if (len < 2 || src[0] != GMTF_QLFC_METHOD_CM_LANES || n == 0 || n > GMTF_BLOCK_MAX)
        return GMTF_E_CORRUPT;
    unsigned nl = src[1];
    if (!cm_lanes_valid(n, nl))
        return GMTF_E_CORRUPT;
    size_t seg = cm_lane_seg(n, nl), at = 2 + 4 * (size_t)(nl - 1);
    if (len < at)
        return GMTF_E_CORRUPT;
    if (counts) {
        for (unsigned k = 0; k < 4; k++)
            counts->start[k] = (uint32_t)(k * (n / 4));
        counts->start[4] = (uint32_t)n;
        memset(counts->cnt, 0, sizeof counts->cnt);
    }
    size_t so[GMTF_QLFC_CM_LANES_MAX], sl[GMTF_QLFC_CM_LANES_MAX];
    for (unsigned j = 0; j < nl; j++) {
        sl[j] = len - at; /* the last lane's stream: the rest */
        if (j + 1 < nl) {
            const uint8_t *q = src + 2 + 4 * j;
            sl[j] = (size_t)q[0] | (size_t)q[1] << 8 | (size_t)q[2] << 16 | (size_t)q[3] << 24;
            if (sl[j] > len - at)
                return GMTF_E_CORRUPT;
        }
        so[j] = at;
        at += sl[j];
    }
    cm_lane *l = ws;
    for (unsigned j = 0; j < nl; j++) {
        size_t a = j * seg, b = a + seg < n ? a + seg : n;
        int err = cm_lane_start(l, src + so[j], sl[j], a, b, n, counts);
        while (!err && l->pos < l->end)
            err = cm_lane_run(l, out, counts);
        if (!err)
            err = cm_lane_finish(l);
        if (err)
            return err;
    }
    return 0;
}

int gmtf_cm_lanes_decode(const uint8_t *src, size_t len, uint8_t *out, size_t n, void *ws)
{
    return gmtf_cm_lanes_decode_counted(src, len, out, n, ws, NULL);
}
