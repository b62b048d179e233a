/* fs_bench: library-level benchmarks of an image (no FUSE).
 *   fs_bench walk IMAGE [MiB]    read every file in full, like tar cf - .; time, MB/s, RSS
 *                                (MiB: decoded-block cache, default 64)
 *   fs_bench dir IMAGE PATH      read every file of directory PATH in full, in readdir
 *                                order (not its subdirectories): a cold read of a
 *                                directory of small files; time, CPU, frames decoded
 *   fs_bench random IMAGE [N]    N cold 4 KiB reads at random files and offsets
 *   fs_bench fsync IMAGE [N]     N transactions: two 4 KiB page writes + fsync, as a
 *                                database does (writes to IMAGE: use a scratch image)
 * GMTF_RANGE_READS=0: every cold read decodes its whole frame (range reads
 * off; by default, as gmtf_fs_options.range_reads, a cold read decodes only
 * the part of a frame it needs; =1 says so explicitly).
 * Run: bench/run fs walk linux.gmtf (or BUILD/bench/fs_bench walk linux.gmtf) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <time.h>

#include "gmtf_fs.h"

typedef struct walker {
    gmtf_fs *fs;
    uint64_t files, dirs, bytes;
    uint64_t *regs; /* regular files, for random reads */
    uint64_t *sizes;
    size_t nregs, cap;
    uint8_t *buf;
    int flat; /* not into subdirectories */
} walker;

typedef struct dlist {
    uint64_t *ino;
    uint32_t *mode;
    size_t n, cap;
} dlist;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static long rss_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key)))
            v = atol(line + strlen(key) + 1);
    if (f)
        fclose(f);
    return v;
}

static int fill(void *arg, const char *name, const struct stat *st, uint64_t off)
{
    (void)off;
    dlist *d = arg;
    if (!strcmp(name, ".") || !strcmp(name, ".."))
        return 0;
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 64;
        d->ino = realloc(d->ino, d->cap * sizeof *d->ino);
        d->mode = realloc(d->mode, d->cap * sizeof *d->mode);
    }
    d->ino[d->n] = st->st_ino;
    d->mode[d->n++] = st->st_mode;
    return 0;
}

static void walk(walker *w, uint64_t dir, int read_data)
{
    dlist d = {0};
    gmtf_fs_readdir(w->fs, dir, 0, fill, &d);
    w->dirs++;
    for (size_t i = 0; i < d.n; i++) {
        struct stat st;
        if (gmtf_fs_getattr(w->fs, d.ino[i], &st))
            continue;
        if (S_ISDIR(st.st_mode)) {
            if (!w->flat)
                walk(w, d.ino[i], read_data);
            continue;
        }
        if (!S_ISREG(st.st_mode))
            continue;
        w->files++;
        if (w->nregs == w->cap) {
            w->cap = w->cap ? w->cap * 2 : 1024;
            w->regs = realloc(w->regs, w->cap * sizeof *w->regs);
            w->sizes = realloc(w->sizes, w->cap * sizeof *w->sizes);
        }
        w->regs[w->nregs] = d.ino[i];
        w->sizes[w->nregs++] = (uint64_t)st.st_size;
        if (!read_data)
            continue;
        uint64_t off = 0;
        long n;
        while ((n = gmtf_fs_read(w->fs, d.ino[i], w->buf, 128u << 10, off)) > 0) {
            off += (uint64_t)n;
            w->bytes += (uint64_t)n;
        }
        if (n < 0)
            fprintf(stderr, "inode %llu: read error %ld\n", (unsigned long long)d.ino[i], n);
    }
    free(d.ino);
    free(d.mode);
}

static int bench_fsync(const char *path, long n)
{
    gmtf_image *img;
    if (gmtf_image_open_file(path, 0, &img)) {
        fprintf(stderr, "fs_bench: cannot open %s\n", path);
        return 1;
    }
    gmtf_fs_options o = {.flush_interval_ms = 5000};
    gmtf_fs *fs;
    if (gmtf_fs_mount(img, &o, &fs)) {
        fprintf(stderr, "fs_bench: cannot mount %s\n", path);
        return 1;
    }
    gmtf_entry e;
    gmtf_fs_unlink(fs, GMTF_ROOT_INO, "bench.db");
    if (gmtf_fs_create(fs, GMTF_ROOT_INO, "bench.db", 0644, 0, 0, 0, &e))
        return 1;
    uint8_t page[4096];
    memset(page, 'p', sizeof page);
    for (int i = 0; i < 256; i++) /* a 1 MiB database */
        gmtf_fs_write(fs, e.attr.st_ino, page, sizeof page, (uint64_t)i * 4096);
    gmtf_fs_fsync(fs, e.attr.st_ino, 0);
    srand(1);
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        page[0] = (uint8_t)i;
        gmtf_fs_write(fs, e.attr.st_ino, page, sizeof page, (uint64_t)(rand() % 256) * 4096);
        gmtf_fs_write(fs, e.attr.st_ino, page, sizeof page, 0);
        if (gmtf_fs_fsync(fs, e.attr.st_ino, 1)) {
            fprintf(stderr, "fsync failed\n");
            return 1;
        }
    }
    double t1 = now_s();
    printf("fsync: %ld transactions in %.2f s = %.0f per second\n", n, t1 - t0, n / (t1 - t0));
    gmtf_fs_release(fs, e.attr.st_ino);
    gmtf_fs_unlink(fs, GMTF_ROOT_INO, "bench.db");
    return gmtf_fs_unmount(fs) ? 1 : 0;
}

int main(int argc, char **argv)
{
    int dir = argc > 3 && !strcmp(argv[1], "dir");
    if (argc < 3 || (strcmp(argv[1], "walk") && strcmp(argv[1], "random") &&
                     strcmp(argv[1], "fsync") && !dir)) {
        fprintf(stderr, "usage: fs_bench walk|random|fsync IMAGE [N] [MIN_BYTES]\n"
                        "       fs_bench dir IMAGE PATH\n"
                        "  random: N cold 4 KiB reads at random files (of at least MIN_BYTES,\n"
                        "  default 0) and offsets\n");
        return 2;
    }
    if (!strcmp(argv[1], "fsync"))
        return bench_fsync(argv[2], argc > 3 ? atol(argv[3]) : 300);
    gmtf_image *img;
    if (gmtf_image_open_file(argv[2], GMTF_IMAGE_RDONLY, &img)) {
        fprintf(stderr, "fs_bench: cannot open %s\n", argv[2]);
        return 1;
    }
    int rnd = !strcmp(argv[1], "random");
    long rss0 = rss_kb("VmRSS:");
    uint64_t cache_mib = !rnd && !dir && argc > 3 ? (uint64_t)atol(argv[3]) : 64;
    gmtf_fs_options o = {.read_only = 1, .cache_bytes = rnd ? (1u << 20) : cache_mib << 20};
    const char *rr = getenv("GMTF_RANGE_READS");
    o.range_reads = rr && *rr ? (*rr == '0' ? -1 : 1) : 0;
    gmtf_fs *fs;
    double t0 = now_s();
    if (gmtf_fs_mount(img, &o, &fs)) {
        fprintf(stderr, "fs_bench: cannot mount %s\n", argv[2]);
        return 1;
    }
    double t1 = now_s();
    long rss_mount = rss_kb("VmRSS:");
    walker w = {.fs = fs, .buf = malloc(128u << 10), .flat = dir};
    uint64_t top = GMTF_ROOT_INO;
    double c1 = cpu_s();
    if (dir) { /* PATH's components from the root */
        char *path = strdup(argv[3]);
        for (char *p = strtok(path, "/"); p; p = strtok(NULL, "/")) {
            gmtf_entry e;
            if (gmtf_fs_lookup(fs, top, p, &e)) {
                fprintf(stderr, "fs_bench: no %s in %s\n", p, argv[3]);
                return 1;
            }
            top = e.attr.st_ino;
        }
        free(path);
        t1 = now_s();
        c1 = cpu_s();
    }
    walk(&w, top, !rnd);
    double t2 = now_s();
    gmtf_fs_info info;
    gmtf_fs_get_info(fs, &info);
    printf("mount %.2f s (RSS %ld -> %ld KiB: metadata of %llu files)\n", t1 - t0, rss0, rss_mount,
           (unsigned long long)w.files);
    if (dir) {
        printf("dir %s: %llu files, %llu bytes in %.3f s, %.3f s CPU; %llu frames decoded, "
               "%llu by range\n",
               argv[3], (unsigned long long)w.files, (unsigned long long)w.bytes, t2 - t1,
               cpu_s() - c1, (unsigned long long)info.frames_decoded,
               (unsigned long long)info.range_decodes);
    } else if (!rnd) {
        printf("walk: %llu files, %llu dirs, %llu bytes in %.2f s = %.1f MB/s, %.1f s CPU; "
               "%llu of %llu frames decoded; peak RSS %ld KiB (cache limit %llu KiB)\n",
               (unsigned long long)w.files, (unsigned long long)w.dirs, (unsigned long long)w.bytes,
               t2 - t1, w.bytes / (t2 - t1) / 1e6, cpu_s(), (unsigned long long)info.frames_decoded,
               (unsigned long long)info.frames, rss_kb("VmHWM:"),
               (unsigned long long)(o.cache_bytes >> 10));
    } else {
        long n = argc > 3 ? atol(argv[3]) : 200;
        uint64_t min = argc > 4 ? (uint64_t)atoll(argv[4]) : 0;
        size_t kept = 0;
        for (size_t k = 0; k < w.nregs; k++)
            if (w.sizes[k] >= min) {
                w.regs[kept] = w.regs[k];
                w.sizes[kept++] = w.sizes[k];
            }
        w.nregs = kept;
        srand(1);
        uint8_t b[4096];
        double t3 = now_s(), c3 = cpu_s();
        long done = 0;
        for (long i = 0; i < n && w.nregs; i++) {
            size_t k = (size_t)rand() % w.nregs;
            uint64_t off = w.sizes[k] > 4096 ? (uint64_t)rand() % (w.sizes[k] - 4096) : 0;
            if (gmtf_fs_read(fs, w.regs[k], b, sizeof b, off) >= 0)
                done++;
        }
        double t4 = now_s(), c4 = cpu_s();
        gmtf_fs_get_info(fs, &info);
        printf("random: %ld cold 4 KiB reads, %.2f ms each, %.2f ms CPU each (block size %u; "
               "%llu by range)\n",
               done, done ? (t4 - t3) * 1e3 / done : 0.0, done ? (c4 - c3) * 1e3 / done : 0.0,
               info.block_size, (unsigned long long)info.range_decodes);
    }
    gmtf_fs_unmount(fs);
    free(w.buf);
    free(w.regs);
    free(w.sizes);
    return 0;
}
