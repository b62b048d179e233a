/* gmtf-stat: what an image holds, without mounting it:
 *
 *   gmtf-stat [--json] [--top N] [--selection auto|cpu|gpu] IMAGE
 *
 * Label, UUID, format version, block size, counts, bytes in files, stored
 * bytes and the ratio (cli_ratio: the one definition), what deduplication
 * saved, free space, a breakdown by file name extension and percentiles
 * of the frames' ratios (the GPU's k-selection when there is a GPU, a CPU
 * selection otherwise: the same keys, the same results). --json writes
 * one JSON object through libjansson; names (label, extensions) that are
 * not UTF-8 are escaped as documented in docs/gmtf-stat.1. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "cli.h"
#include "gmtf_codec.h"
#include "gmtf_config.h"
#include "gmtf_fs.h"
#if GMTF_HAVE_CUDA
#include "gpu.h"
#endif

#define EXT_MAX 16 /* longer suffixes are not extensions */

/* ---- per-extension totals ------------------------------------------------------ */

typedef struct ext_stat {
    char *ext; /* "" for names without one */
    uint64_t files, bytes, stored;
} ext_stat;

typedef struct stat_ctx {
    gmtf_fs *fs;
    const char *prog;
    ext_stat *ext;
    size_t next, cap; /* open addressing; cap a power of two */
    uint64_t *seen;   /* inodes met (hard links once, no directory twice) */
    size_t nseen, seen_cap;
    uint64_t errors;
} stat_ctx;

static uint64_t hash_bytes(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a: a handful of short keys */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int grow(void **v, size_t *cap, size_t size)
{
    size_t n = *cap ? 2 * *cap : 256;
    void *p = calloc(n, size);
    if (!p)
        return -ENOMEM;
    *v = p;
    *cap = n;
    return 0;
}

/* 1 when ino was met before; adds it otherwise. -ENOMEM. */
static int seen_test_add(stat_ctx *c, uint64_t ino)
{
    if (2 * (c->nseen + 1) > c->seen_cap) {
        uint64_t *old = c->seen;
        size_t n = c->seen_cap;
        if (grow((void **)&c->seen, &c->seen_cap, sizeof *c->seen))
            return -ENOMEM;
        for (size_t i = 0; i < n; i++)
            if (old[i]) {
                size_t j = (size_t)(old[i] * 0x9e3779b97f4a7c15ull >> 20) & (c->seen_cap - 1);
                while (c->seen[j])
                    j = (j + 1) & (c->seen_cap - 1);
                c->seen[j] = old[i];
            }
        free(old);
    }
    size_t j = (size_t)(ino * 0x9e3779b97f4a7c15ull >> 20) & (c->seen_cap - 1);
    while (c->seen[j] && c->seen[j] != ino)
        j = (j + 1) & (c->seen_cap - 1);
    if (c->seen[j])
        return 1;
    c->seen[j] = ino;
    c->nseen++;
    return 0;
}

static ext_stat *ext_slot(stat_ctx *c, const char *ext)
{
    if (2 * (c->next + 1) > c->cap) {
        ext_stat *old = c->ext;
        size_t n = c->cap;
        if (grow((void **)&c->ext, &c->cap, sizeof *c->ext))
            return NULL;
        for (size_t i = 0; i < n; i++)
            if (old[i].ext) {
                size_t j = (size_t)hash_bytes(old[i].ext) & (c->cap - 1);
                while (c->ext[j].ext)
                    j = (j + 1) & (c->cap - 1);
                c->ext[j] = old[i];
            }
        free(old);
    }
    size_t j = (size_t)hash_bytes(ext) & (c->cap - 1);
    while (c->ext[j].ext && strcmp(c->ext[j].ext, ext))
        j = (j + 1) & (c->cap - 1);
    if (!c->ext[j].ext) {
        c->ext[j].ext = strdup(ext);
        if (!c->ext[j].ext)
            return NULL;
        c->next++;
    }
    return &c->ext[j];
}

/* The extension of a name: the bytes after its last '.', when that dot is
 * not the first byte and 1..EXT_MAX bytes follow; else "". */
static const char *extension_of(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name || !dot[1] || strlen(dot + 1) > EXT_MAX)
        return "";
    return dot + 1;
}

/* ---- the walk ------------------------------------------------------------------------- */

typedef struct dir_list {
    char **name;
    uint64_t *ino;
    size_t n, cap;
    int oom;
} dir_list;

static int collect(void *arg, const char *name, const struct stat *st, uint64_t next_off)
{
    (void)next_off;
    dir_list *l = arg;
    if (!strcmp(name, ".") || !strcmp(name, ".."))
        return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **nv = realloc(l->name, cap * sizeof *nv);
        if (nv)
            l->name = nv;
        uint64_t *iv = nv ? realloc(l->ino, cap * sizeof *iv) : NULL;
        if (!iv) {
            l->oom = 1;
            return 1;
        }
        l->ino = iv;
        l->cap = cap;
    }
    const char *ext = extension_of(name);
    l->name[l->n] = strdup(ext);
    if (!l->name[l->n]) {
        l->oom = 1;
        return 1;
    }
    l->ino[l->n++] = (uint64_t)st->st_ino;
    return 0;
}

/* Every regular file once under its first name's extension; directories
 * by an explicit stack (depth bounded by memory, not by the C stack). */
static int walk(stat_ctx *c)
{
    size_t cap = 64, n = 0;
    uint64_t *stack = malloc(cap * sizeof *stack);
    if (!stack)
        return -ENOMEM;
    stack[n++] = GMTF_ROOT_INO;
    seen_test_add(c, GMTF_ROOT_INO);
    int rc = 0;
    while (n && !rc) {
        uint64_t dir = stack[--n];
        dir_list l = {0};
        int r = gmtf_fs_readdir(c->fs, dir, 0, collect, &l);
        if (r || l.oom) {
            fprintf(stderr, "%s: directory inode %" PRIu64 ": %s\n", c->prog, dir,
                    strerror(r ? -r : ENOMEM));
            c->errors++;
            rc = l.oom ? -ENOMEM : 0;
        }
        for (size_t i = 0; i < l.n && !rc; i++) {
            struct stat st;
            int seen = seen_test_add(c, l.ino[i]);
            if (seen < 0 || seen)
                rc = seen < 0 ? seen : 0;
            else if (gmtf_fs_getattr(c->fs, l.ino[i], &st)) {
                c->errors++;
            } else if (S_ISDIR(st.st_mode)) {
                if (n == cap) {
                    uint64_t *s = realloc(stack, 2 * cap * sizeof *s);
                    if (!s)
                        rc = -ENOMEM;
                    else {
                        stack = s;
                        cap *= 2;
                    }
                }
                if (!rc)
                    stack[n++] = l.ino[i];
            } else if (S_ISREG(st.st_mode)) {
                uint64_t stored = 0;
                ext_stat *e = ext_slot(c, l.name[i]);
                if (!e)
                    rc = -ENOMEM;
                else if (!gmtf_fs_stored_share(c->fs, l.ino[i], &stored)) {
                    e->files++;
                    e->bytes += (uint64_t)st.st_size;
                    e->stored += stored;
                }
            }
        }
        for (size_t i = 0; i < l.n; i++)
            free(l.name[i]);
        free(l.name);
        free(l.ino);
    }
    free(stack);
    return rc;
}

static int ext_cmp(const void *a, const void *b)
{
    const ext_stat *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return strcmp(x->ext, y->ext);
}

/* The extensions met, by bytes (most first), then name; *n of them. */
static ext_stat *ext_sorted(stat_ctx *c, size_t *n)
{
    ext_stat *v = malloc((c->next + 1) * sizeof *v);
    size_t k = 0;
    for (size_t i = 0; v && i < c->cap; i++)
        if (c->ext[i].ext)
            v[k++] = c->ext[i];
    if (v)
        qsort(v, k, sizeof *v, ext_cmp);
    *n = k;
    return v;
}

/* ---- percentiles of the frames' ratios -------------------------------------------------- */

static const unsigned pct[] = {0, 1, 5, 10, 25, 50, 75, 90, 95, 99, 100};
#define NPCT (sizeof pct / sizeof pct[0])

typedef enum { SEL_AUTO, SEL_CPU, SEL_GPU } selection;

/* out[i]: percentile pct[i] of the ratios, the key of rank
 * floor(pct * (n - 1) / 100). *how: "gpu" or "cpu". -ENOMEM, -ENODEV
 * (sel = gpu and no GPU), or another GPU error when sel = gpu. */
static int percentiles(const double *ratio, size_t n, selection sel, double *out, const char **how)
{
    *how = "cpu";
    if (!n)
        return 0;
    int rc = -ENODEV;
#if GMTF_HAVE_CUDA
    if (sel != SEL_CPU && gmtf_gpu_available()) {
        gmtf_gpu_ctx *ctx = NULL;
        rc = gmtf_gpu_ctx_create(&ctx);
        for (size_t i = 0; !rc && i < NPCT; i++)
            rc = gmtf_gpu_kselect(ctx, GMTF_GPU_KEY_F64, ratio, n, (n - 1) * pct[i] / 100, &out[i]);
        gmtf_gpu_ctx_destroy(ctx);
        if (!rc) {
            *how = "gpu";
            return 0;
        }
    }
#endif
    if (sel == SEL_GPU)
        return rc;
    double *v = malloc(n * sizeof *v);
    if (!v)
        return -ENOMEM;
    memcpy(v, ratio, n * sizeof *v);
    for (size_t i = 0; i < NPCT; i++)
        out[i] = cli_select_f64(v, n, (n - 1) * pct[i] / 100);
    free(v);
    return 0;
}

/* ---- output ------------------------------------------------------------------------------- */

typedef struct report {
    const char *image;
    gmtf_fs_info info;
    gmtf_fs_stats st;
    uint64_t free_bytes;
    double pct[NPCT];
    const char *how;
    ext_stat *ext;
    size_t next;
} report;

static int json_set_name(json_t *o, const char *key, const char *name)
{
    char *s = cli_name_utf8(name);
    int rc = s ? json_object_set_new(o, key, json_string(s)) : -1;
    free(s);
    return rc;
}

#define JU(v) json_integer((json_int_t)(v))

static int print_json(const report *r)
{
    const gmtf_fs_info *i = &r->info;
    json_t *o = json_object(), *p = json_object(), *exts = json_array();
    char uuid[37];
    cli_uuid_string(i->uuid, uuid);
    int rc = !o || !p || !exts;
    rc |= json_set_name(o, "label", i->label);
    rc |= json_object_set_new(o, "uuid", json_string(uuid));
    rc |= json_object_set_new(o, "format_version", JU(r->st.format_version));
    rc |= json_object_set_new(o, "block_size", JU(i->block_size));
    rc |= json_object_set_new(o, "pack_size", JU(i->pack_size));
    rc |= json_object_set_new(o, "generation", JU(i->generation));
    rc |= json_object_set_new(o, "files", JU(i->files));
    rc |= json_object_set_new(o, "directories", JU(i->dirs));
    rc |= json_object_set_new(o, "symlinks", JU(i->symlinks));
    rc |= json_object_set_new(o, "others", JU(i->others));
    rc |= json_object_set_new(o, "bytes", JU(i->data_bytes));
    rc |= json_object_set_new(o, "stored_bytes", JU(i->stored_bytes));
    rc |= json_object_set_new(o, "frames", JU(i->frames));
    rc |= json_object_set_new(o, "ratio", json_real(cli_ratio(i->data_bytes, i->stored_bytes)));
    rc |= json_object_set_new(o, "mapped_bytes", JU(r->st.mapped_bytes));
    rc |= json_object_set_new(o, "unique_bytes", JU(r->st.unique_bytes));
    rc |= json_object_set_new(o, "dedup_saved_bytes", JU(r->st.mapped_bytes - r->st.unique_bytes));
    rc |= json_object_set_new(o, "dead_bytes", JU(r->st.dead_bytes));
    rc |= json_object_set_new(o, "image_bytes", JU(i->image_bytes));
    rc |= json_object_set_new(o, "used_bytes", JU(i->used_bytes));
    rc |= json_object_set_new(o, "capacity", JU(i->capacity));
    rc |= json_object_set_new(o, "free_bytes", JU(r->free_bytes));
    const gmtf_fs_stats *st = &r->st;
    json_t *lay = json_object();
    rc |= !lay;
    rc |= json_object_set_new(lay, "superblocks", JU(st->sb_bytes));
    rc |= json_object_set_new(lay, "block_frames", JU(st->block_frame_bytes));
    rc |= json_object_set_new(lay, "pack_frames", JU(st->pack_frame_bytes));
    rc |= json_object_set_new(lay, "snapshot_bytes", JU(st->snapshot_bytes));
    rc |= json_object_set_new(lay, "snapshot_copies", JU(st->snapshot_copies));
    rc |= json_object_set_new(lay, "snapshot_raw_bytes", JU(st->snapshot_raw_bytes));
    rc |= json_object_set_new(lay, "journal_bytes", JU(st->journal_bytes));
    rc |= json_object_set_new(lay, "journal_copies", JU(st->journal_copies));
    rc |= json_object_set_new(lay, "retired", JU(st->retired_bytes));
    rc |= json_object_set_new(lay, "spare", JU(st->spare_bytes));
    rc |= json_object_set_new(lay, "free", JU(st->free_bytes));
    rc |= json_object_set_new(lay, "end", JU(st->end_bytes));
    rc |= json_object_set_new(o, "layout", lay);
    for (size_t k = 0; k < NPCT && r->st.nframes; k++) {
        char key[8];
        snprintf(key, sizeof key, "p%u", pct[k]);
        rc |= json_object_set_new(p, key, json_real(r->pct[k]));
    }
    rc |= json_object_set_new(o, "frame_ratio_percentiles", p);
    rc |= json_object_set_new(o, "percentile_selection", json_string(r->how));
    for (size_t k = 0; k < r->next; k++) {
        const ext_stat *e = &r->ext[k];
        json_t *x = json_object();
        rc |= !x || json_set_name(x, "extension", e->ext);
        rc |= json_object_set_new(x, "files", JU(e->files));
        rc |= json_object_set_new(x, "bytes", JU(e->bytes));
        rc |= json_object_set_new(x, "stored_bytes", JU(e->stored));
        rc |= json_object_set_new(x, "ratio", json_real(cli_ratio(e->bytes, e->stored)));
        rc |= json_array_append_new(exts, x);
    }
    rc |= json_object_set_new(o, "extensions", exts);
    if (!rc)
        rc = json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) || putchar('\n') == EOF;
    json_decref(o);
    return rc ? -1 : 0;
}

static void print_text(const report *r, size_t top)
{
    const gmtf_fs_info *i = &r->info;
    char uuid[37], *label = cli_name_utf8(i->label);
    cli_uuid_string(i->uuid, uuid);
    printf("%s:\n", r->image);
    printf("  label            '%s'\n", label ? label : "");
    free(label);
    printf("  UUID             %s\n", uuid);
    printf("  format version   %u\n", r->st.format_version);
    printf("  block size       %u\n", i->block_size);
    printf("  pack size        %u\n", i->pack_size);
    printf("  generation       %" PRIu64 "\n", i->generation);
    printf("  entries          %" PRIu64 " files, %" PRIu64 " directories, %" PRIu64
           " symlinks, %" PRIu64 " others\n",
           i->files, i->dirs, i->symlinks, i->others);
    printf("  bytes in files   %" PRIu64 "\n", i->data_bytes);
    printf("  bytes stored     %" PRIu64 " in %" PRIu64 " frames\n", i->stored_bytes, i->frames);
    printf("  ratio            %.3f (bytes in files / bytes stored)\n",
           cli_ratio(i->data_bytes, i->stored_bytes));
    printf("  deduplication    %" PRIu64 " bytes saved (%" PRIu64 " mapped, %" PRIu64
           " distinct)\n",
           r->st.mapped_bytes - r->st.unique_bytes, r->st.mapped_bytes, r->st.unique_bytes);
    printf("  dead in frames   %" PRIu64 " bytes (decoded) that no file maps\n", r->st.dead_bytes);
    printf("  image            %" PRIu64 " bytes, %" PRIu64 " in use, ", i->image_bytes,
           i->used_bytes);
    if (i->capacity)
        printf("capacity %" PRIu64 ", ", i->capacity);
    else
        printf("growable, ");
    printf("%" PRIu64 " free\n", r->free_bytes);
    const gmtf_fs_stats *st = &r->st;
    printf("  layout           %" PRIu64 " superblocks, %" PRIu64 " whole-block frames, %" PRIu64
           " pack frames,\n"
           "                   snapshot %" PRIu64 " x %u (%" PRIu64 " decoded), journal %" PRIu64
           " x %u,\n"
           "                   %" PRIu64 " retired, %" PRIu64 " spare, %" PRIu64
           " free; end %" PRIu64 "\n",
           st->sb_bytes, st->block_frame_bytes, st->pack_frame_bytes, st->snapshot_bytes,
           st->snapshot_copies, st->snapshot_raw_bytes, st->journal_bytes, st->journal_copies,
           st->retired_bytes, st->spare_bytes, st->free_bytes, st->end_bytes);
    if (r->st.nframes) {
        printf("  frame ratios     ");
        for (size_t k = 0; k < NPCT; k++)
            printf("%sp%u %.2f", k ? ", " : "", pct[k], r->pct[k]);
        printf(" (%zu frames, selected on the %s)\n", r->st.nframes,
               strcmp(r->how, "gpu") ? "CPU" : "GPU");
    }
    if (!r->next)
        return;
    printf("  by extension     %-16s %10s %16s %16s %8s\n", "extension", "files", "bytes", "stored",
           "ratio");
    uint64_t of = 0, ob = 0, os = 0;
    for (size_t k = 0; k < r->next; k++) {
        const ext_stat *e = &r->ext[k];
        if (k >= top) {
            of += e->files, ob += e->bytes, os += e->stored;
            continue;
        }
        char *name = cli_name_utf8(e->ext);
        printf("                   %-16s %10" PRIu64 " %16" PRIu64 " %16" PRIu64 " %8.3f\n",
               !name   ? "?"
               : *name ? name
                       : "(none)",
               e->files, e->bytes, e->stored, cli_ratio(e->bytes, e->stored));
        free(name);
    }
    if (r->next > top)
        printf("                   %-16s %10" PRIu64 " %16" PRIu64 " %16" PRIu64 " %8.3f\n",
               "(the others)", of, ob, os, cli_ratio(ob, os));
}

/* ---- main ------------------------------------------------------------------------------------ */

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "Usage: %s [OPTIONS] IMAGE\n"
            "Show what a gmtf image holds, without mounting it.\n\n"
            "      --json             one JSON object on standard output\n"
            "      --top=N            extensions listed by name (text; default 20)\n"
            "      --selection=HOW    percentiles by auto (the GPU when present), cpu or gpu\n"
            "  -j, --threads=N        codec threads (default: all CPUs)\n"
            "  -h, --help             show this help and exit\n"
            "  -V, --version          show the version and exit\n"
            "Exit status: 0, 1 when the image cannot be read or a file was unreadable.\n",
            prog);
}

enum { OPT_JSON = 256, OPT_TOP, OPT_SELECTION };

/* The library's lines about the image (damage met loading it): on stderr,
 * counted; the figures are still shown, and the exit status is 1. */
typedef struct stat_log {
    const char *prog, *image;
    unsigned long count;
} stat_log;

static void log_line(void *arg, const char *msg)
{
    stat_log *l = arg;
    __atomic_add_fetch(&l->count, 1, __ATOMIC_RELAXED);
    fprintf(stderr, "%s: %s: %s\n", l->prog, l->image, msg);
}

int main(int argc, char **argv)
{
    const char *prog = "gmtf-stat";
    static const struct option longs[] = {{"json", no_argument, 0, OPT_JSON},
                                          {"top", required_argument, 0, OPT_TOP},
                                          {"selection", required_argument, 0, OPT_SELECTION},
                                          {"threads", required_argument, 0, 'j'},
                                          {"help", no_argument, 0, 'h'},
                                          {"version", no_argument, 0, 'V'},
                                          {0, 0, 0, 0}};
    int opt, json = 0;
    unsigned top = 20, threads = 0;
    selection sel = SEL_AUTO;
    while ((opt = getopt_long(argc, argv, "j:hV", longs, NULL)) != -1) {
        switch (opt) {
        case OPT_JSON: json = 1; break;
        case OPT_TOP:
            if (cli_parse_uint(optarg, 0, 1u << 30, &top) < 0) {
                fprintf(stderr, "%s: --top %s: not a count\n", prog, optarg);
                return CLI_EXIT_FAIL;
            }
            break;
        case OPT_SELECTION:
            if (!strcmp(optarg, "auto"))
                sel = SEL_AUTO;
            else if (!strcmp(optarg, "cpu"))
                sel = SEL_CPU;
            else if (!strcmp(optarg, "gpu"))
                sel = SEL_GPU;
            else {
                fprintf(stderr, "%s: --selection %s: auto, cpu or gpu\n", prog, optarg);
                return CLI_EXIT_FAIL;
            }
            break;
        case 'j':
            if (cli_parse_threads(prog, optarg, &threads) < 0) {
                return CLI_EXIT_FAIL;
            }
            break;
        case 'h': usage(stdout, prog); return CLI_EXIT_OK;
        case 'V': cli_version(prog, NULL); return CLI_EXIT_OK;
        default: cli_try_help(prog); return CLI_EXIT_FAIL;
        }
    }
    if (optind + 1 != argc) {
        fprintf(stderr, "%s: %s\n", prog, optind >= argc ? "no IMAGE given" : "one IMAGE only");
        cli_try_help(prog);
        return CLI_EXIT_FAIL;
    }
    report r = {.image = argv[optind]};
    gmtf_image *img;
    int rc = gmtf_image_open_file(r.image, GMTF_IMAGE_RDONLY, &img);
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", prog, r.image,
                rc == -EBUSY ? "in use (mounted read-write, or mkfs/fsck running on it)"
                             : strerror(-rc));
        return CLI_EXIT_FAIL;
    }
    gmtf_fs *fs;
    stat_log log = {.prog = prog, .image = r.image};
    gmtf_fs_options fo = {.read_only = 1, .threads = threads, .log = log_line, .log_arg = &log};
    rc = gmtf_fs_mount(img, &fo, &fs);
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", prog, r.image,
                rc == -EINVAL    ? "not a gmtf image (or a newer format version)"
                : rc == -EUCLEAN ? "the metadata is damaged or the image incomplete; run fsck.gmtf"
                : rc < -1000     ? gmtf_strerror(rc)
                                 : strerror(-rc));
        return CLI_EXIT_FAIL;
    }
    stat_ctx c = {.fs = fs, .prog = prog};
    struct statvfs sv;
    double *ratio = NULL;
    rc = gmtf_fs_get_info(fs, &r.info);
    if (!rc)
        rc = gmtf_fs_get_stats(fs, &r.st);
    if (!rc && !gmtf_fs_statfs(fs, &sv))
        r.free_bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
    if (!rc)
        rc = walk(&c);
    if (!rc) {
        ratio = malloc((r.st.nframes + 1) * sizeof *ratio);
        rc = ratio ? 0 : -ENOMEM;
        for (size_t k = 0; ratio && k < r.st.nframes; k++)
            ratio[k] = r.st.frame_clen[k] ? (double)r.st.frame_dlen[k] / r.st.frame_clen[k] : 0;
    }
    if (!rc) {
        rc = percentiles(ratio, r.st.nframes, sel, r.pct, &r.how);
        if (rc)
            fprintf(stderr, "%s: --selection gpu: %s\n", prog,
                    rc == -ENODEV ? "no usable GPU" : strerror(-rc));
    }
    if (!rc)
        r.ext = ext_sorted(&c, &r.next);
    if (!rc && !r.ext)
        rc = -ENOMEM;
    if (!rc && json)
        rc = print_json(&r);
    else if (!rc)
        print_text(&r, top);
    if (rc == -ENOMEM)
        fprintf(stderr, "%s: %s: %s\n", prog, r.image, strerror(ENOMEM));
    if (!rc && fflush(stdout)) {
        fprintf(stderr, "%s: standard output: %s\n", prog, strerror(errno));
        rc = -1;
    }
    free(ratio);
    free(r.ext);
    for (size_t k = 0; k < c.cap; k++)
        free(c.ext[k].ext);
    free(c.ext);
    free(c.seen);
    gmtf_fs_stats_free(&r.st);
    gmtf_fs_unmount(fs);
    if (log.count)
        fprintf(stderr, "%s: %s: the image is damaged (above); fsck.gmtf -n tells more\n", prog,
                r.image);
    return rc || c.errors || log.count ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
