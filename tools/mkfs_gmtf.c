/* mkfs.gmtf: makes a gmtf image, optionally filled from a directory or an
 * archive (anything libarchive reads; "-" reads a stream from stdin). The
 * command line is here; the import walks are in mkfs_import.c. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sys/resource.h>
#include <time.h>
#include <inttypes.h>
#include <locale.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "gmtf_codec.h"
#include "gmtf_fs.h"
#include "mkfs_import.h"

/* ---- what is there already --------------------------------------------------------------- */

/* 0 when path may be made into an image: missing, an empty file, or a
 * device whose first 64 KiB are zeros. Else a message for the refusal
 * (-f overrides it). *created tells whether mkfs will make the file. */
static const char *occupied(const char *path, int *created)
{
    struct stat st;
    *created = 0;
    if (stat(path, &st)) {
        *created = errno == ENOENT;
        return NULL;
    }
    if (S_ISDIR(st.st_mode))
        return "is a directory";
    if (S_ISREG(st.st_mode) && st.st_size == 0)
        return NULL;
    static uint8_t head[65536];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : pread(fd, head, sizeof head, 0);
    if (fd >= 0)
        close(fd);
    if (n < 0)
        return NULL; /* cannot be read: the open for writing will say why */
    if (n >= 8 && !memcmp(head, "GMTFSB\r\n", 8))
        return "holds a gmtf image";
    for (ssize_t i = 0; i < n; i++)
        if (head[i])
            return S_ISBLK(st.st_mode) ? "holds data (its first 64 KiB are not zeros)"
                                       : "is not empty";
    return NULL;
}

/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (hex digits, either case). */
static int parse_uuid(const char *s, uint8_t u[16])
{
    static const int dash[] = {8, 13, 18, 23};
    if (strlen(s) != 36)
        return -EINVAL;
    for (int i = 0, k = 0, d = 0; i < 36; i++) {
        if (d < 4 && i == dash[d]) {
            if (s[i] != '-')
                return -EINVAL;
            d++;
            continue;
        }
        int v = s[i] >= '0' && s[i] <= '9'   ? s[i] - '0'
                : s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10
                : s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 10
                                             : -1;
        if (v < 0)
            return -EINVAL;
        u[k / 2] = (uint8_t)(k % 2 ? u[k / 2] | v : v << 4);
        k++;
    }
    return 0;
}

/* SOURCE_DATE_EPOCH (reproducible-builds.org): decimal seconds since 1970.
 * 0 and sets *epoch, 1 when not set, -1 (reported) when malformed. */
static int source_date_epoch(const char *prog, int64_t *epoch)
{
    const char *e = getenv("SOURCE_DATE_EPOCH");
    if (!e)
        return 1;
    char *end;
    errno = 0;
    long long v = strtoll(e, &end, 10);
    if (!*e || *end || errno || v < 1 || *e < '0' || *e > '9') {
        fprintf(stderr, "%s: SOURCE_DATE_EPOCH='%s': not a positive number of seconds\n", prog, e);
        return -1;
    }
    *epoch = v;
    return 0;
}

static volatile int interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* ---- main -------------------------------------------------------------------------------- */

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "Usage: %s [OPTIONS] IMAGE\n"
            "Make a gmtf compressed filesystem image (a regular file or a block device).\n\n"
            "  -b, --block-size=SIZE  block size, 64K..16M, a power of two (default 16M\n"
            "                         with --from, 4M for an empty image)\n"
            "  -P, --pack-size=SIZE   small files and tails share frames of up to SIZE,\n"
            "                         64K..the block size, a power of two (default the\n"
            "                         smaller of 4M and the block size)\n"
            "  -L, --label=LABEL      volume label (up to 63 bytes)\n"
            "  -U, --uuid=UUID        the image's UUID (default: random)\n"
            "  -s, --size=SIZE        capacity of the image (default: grows as needed)\n"
            "  -j, --threads=N        compression threads (default: all CPUs)\n"
            "      --mtf=NAME         MTF backend of the codec (default: auto)\n"
            "      --gpus=LIST        GPUs of the codec: all (default) or numbers, e.g. 0,1\n"
            "                         (same image; GMTF_GPUS too)\n"
            "      --from=SOURCE      fill from a directory, an archive (tar, tar.gz/xz/zst/bz2,\n"
            "                         zip, cpio, 7z, iso..., gmtfc's .tar.gmz) or - for an\n"
            "                         archive on stdin\n"
            "  -f, --force            overwrite an existing image or a non-empty file/device\n"
            "  -q, --quiet            no progress bar or summary\n"
            "  -h, --help             show this help and exit\n"
            "  -V, --version          show the version and exit\n"
            "SIZE takes K, M, G, T suffixes (powers of 1024).\n"
            "SOURCE_DATE_EPOCH (seconds) sets the image's times and clamps every file time\n"
            "to it: with -U, the same input gives the same image bytes.\n",
            prog);
}

/* GMTF_MKFS_PROFILE=1: when each step ended, on stderr (seconds of the
 * realtime clock, measurements: docs/gpu.md). */
/* User + system CPU seconds of who (RUSAGE_SELF, RUSAGE_THREAD). */
static double cpu_s(int who)
{
    struct rusage ru;
    getrusage(who, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void mkfs_prof(const char *what)
{
    const char *e = getenv("GMTF_MKFS_PROFILE");
    if (!e || *e != '1')
        return;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    fprintf(stderr, "mkfs profile: %s at %.3f s; cpu %.3f s, this thread %.3f s\n", what,
            (double)t.tv_sec + t.tv_nsec / 1e9, cpu_s(RUSAGE_SELF),
            cpu_s(RUSAGE_THREAD)); /* the import's own */
}

static void *prepare_run(void *fs)
{
    (void)gmtf_fs_codec_prepare(fs); /* a failure: the first flush's to find */
    return NULL;
}

int main(int argc, char **argv)
{
    const char *prog = "mkfs.gmtf";
    /* Names are bytes: libarchive converts archive names (UTF-8 in pax) to
     * the locale's charset, which C.UTF-8 leaves as they are; names that
     * are not UTF-8 travel as binary (pax hdrcharset=BINARY). */
    if (!setlocale(LC_CTYPE, "C.UTF-8"))
        setlocale(LC_CTYPE, "");
    mkfs_prof("start");
    /* The write-back cache's blocks (256 MiB, up to 16 MiB each) are freed
     * window after window: freed memory is kept for the next window's
     * (glibc would unmap the blocks it mapped and trim the heap, and
     * every window's writes would fault fresh zeroed pages in again).
     * GMTF_MKFS_MALLOC=0: glibc's defaults (measurements). */
    const char *me = getenv("GMTF_MKFS_MALLOC");
    if (!(me && *me == '0')) {
        mallopt(M_MMAP_THRESHOLD, 32 << 20);
        mallopt(M_TRIM_THRESHOLD, 1 << 30);
    }
    static const struct option longs[] = {{"block-size", required_argument, 0, 'b'},
                                          {"pack-size", required_argument, 0, 'P'},
                                          {"label", required_argument, 0, 'L'},
                                          {"uuid", required_argument, 0, 'U'},
                                          {"size", required_argument, 0, 's'},
                                          {"threads", required_argument, 0, 'j'},
                                          {"mtf", required_argument, 0, 'm'},
                                          {"gpus", required_argument, 0, 'G'},
                                          {"from", required_argument, 0, 'F'},
                                          {"force", no_argument, 0, 'f'},
                                          {"quiet", no_argument, 0, 'q'},
                                          {"help", no_argument, 0, 'h'},
                                          {"version", no_argument, 0, 'V'},
                                          {0, 0, 0, 0}};
    gmtf_mkfs_options mo = {0};
    uint8_t uuid[16];
    const char *from = NULL, *mtf = NULL, *gpus = NULL;
    unsigned threads = 0;
    int quiet = 0, force = 0, opt;
    uint64_t v;
    while ((opt = getopt_long(argc, argv, "b:P:L:U:s:j:fqhV", longs, NULL)) != -1) {
        switch (opt) {
        case 'b':
            if (cli_parse_size(optarg, &v) < 0 || v < GMTF_FS_BLOCK_MIN || v > GMTF_FS_BLOCK_MAX ||
                (v & (v - 1))) {
                fprintf(stderr, "%s: -b %s: block size must be a power of two from 64K to 16M\n",
                        prog, optarg);
                return CLI_EXIT_FAIL;
            }
            mo.block_size = (uint32_t)v;
            break;
        case 'P':
            if (cli_parse_size(optarg, &v) < 0 || v < GMTF_FS_BLOCK_MIN || v > GMTF_FS_BLOCK_MAX ||
                (v & (v - 1))) {
                fprintf(stderr, "%s: -P %s: pack size must be a power of two from 64K to 16M\n",
                        prog, optarg);
                return CLI_EXIT_FAIL;
            }
            mo.pack_size = (uint32_t)v;
            break;
        case 'L':
            if (strlen(optarg) > GMTF_FS_LABEL_MAX) {
                fprintf(stderr, "%s: -L: label longer than %d bytes\n", prog, GMTF_FS_LABEL_MAX);
                return CLI_EXIT_FAIL;
            }
            mo.label = optarg;
            break;
        case 'U':
            if (parse_uuid(optarg, uuid) < 0) {
                fprintf(stderr, "%s: -U %s: not a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)\n",
                        prog, optarg);
                return CLI_EXIT_FAIL;
            }
            mo.uuid = uuid;
            break;
        case 's':
            if (cli_parse_size(optarg, &v) < 0 || v < (2 << 20)) {
                fprintf(stderr, "%s: -s %s: not a size of at least 2M\n", prog, optarg);
                return CLI_EXIT_FAIL;
            }
            mo.capacity = v;
            break;
        case 'j':
            if (cli_parse_threads(prog, optarg, &threads) < 0) {
                return CLI_EXIT_FAIL;
            }
            break;
        case 'm': mtf = optarg; break;
        case 'G': gpus = optarg; break;
        case 'F': from = optarg; break;
        case 'f': force = 1; break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout, prog); return CLI_EXIT_OK;
        case 'V': cli_version(prog, NULL); return CLI_EXIT_OK;
        default: usage(stderr, prog); return CLI_EXIT_FAIL;
        }
    }
    if (cli_check_gpus(prog, "--gpus", gpus) < 0)
        return CLI_EXIT_FAIL;
    if (optind != argc - 1) {
        fprintf(stderr, "%s: %s\n", prog,
                optind >= argc ? "no IMAGE given" : "more than one IMAGE given");
        usage(stderr, prog);
        return CLI_EXIT_FAIL;
    }
    if (!mo.block_size && !from)
        mo.block_size = GMTF_FS_BLOCK_LIVE; /* an empty image, written through a mount */
    uint32_t bs = mo.block_size ? mo.block_size : GMTF_FS_BLOCK_DEFAULT;
    if (mo.pack_size > bs) {
        fprintf(stderr, "%s: -P: the pack size (%u) is larger than the block size (%u)\n", prog,
                mo.pack_size, bs);
        return CLI_EXIT_FAIL;
    }
    const char *path = argv[optind];
    int64_t epoch = -1;
    int sde = source_date_epoch(prog, &epoch);
    if (sde < 0)
        return CLI_EXIT_FAIL;
    if (sde == 0)
        mo.time = epoch;
    int created;
    const char *why = occupied(path, &created);
    if (why && !force) {
        fprintf(stderr, "%s: %s %s: refusing to overwrite it (-f to do so)\n", prog, path, why);
        return CLI_EXIT_FAIL;
    }
    /* Filled from a source, the image is marked incomplete until the fill
     * has succeeded: an interrupted or failed mkfs never leaves an image
     * that mounts or checks clean with part of the files. */
    mo.incomplete = from != NULL;
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    gmtf_image *img;
    int rc = gmtf_image_open_file(path, GMTF_IMAGE_CREATE, &img);
    if (rc) {
        if (rc == -EBUSY)
            fprintf(stderr, "%s: %s is in use (mounted, or checked by fsck): refusing\n", prog,
                    path);
        else
            fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(-rc));
        return CLI_EXIT_FAIL;
    }
    rc = gmtf_fs_mkfs(img, &mo);
    mkfs_prof("made");
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", prog, path,
                rc == -ENOSPC ? "device or size too small" : strerror(-rc));
        gmtf_image_close(img);
        return CLI_EXIT_FAIL;
    }
    gmtf_fs_options fo = {.mtf = mtf,
                          .gpus = gpus,
                          .threads = threads,
                          .dirty_bytes = 256u << 20,
                          /* decoded frames: those the flush's dedup
                           * compares with, decoded ahead in batches */
                          .cache_bytes = 256u << 20,
                          .journal_bytes = 64u << 10,
                          .no_flush = 1,
                          /* small files in input order: a third of a
                           * percent to 1% smaller than by extension
                           * (docs/format.md, Packing) */
                          .pack_write_order = 1,
                          .mkfs_finish = mo.incomplete,
                          .exit_after = 1,
                          .write_time = mo.time};
    /* A flush's encode on a thread while the import goes on (the same
     * image); GMTF_MKFS_ASYNC=0 off (measurements). */
    const char *ae = getenv("GMTF_MKFS_ASYNC");
    fo.async_flush = !(ae && *ae == '0');
    /* GMTF_MKFS_DIRTY_MIB: a smaller write-back cache, more flushes (tests:
     * the async flush against the flush at once; another image) */
    const char *de = getenv("GMTF_MKFS_DIRTY_MIB");
    if (de && strtoul(de, NULL, 10) > 0)
        fo.dirty_bytes = (uint64_t)strtoul(de, NULL, 10) << 20;
    /* The codec readied (with a GPU: its probe, start, contexts and pinned
     * staging) beside the import's first reads, which take far longer than
     * that before the first flush: the mount's codec is the CPU's until
     * then (the same frames); GMTF_MKFS_PREPARE=0 off (measurements). */
    const char *pe = getenv("GMTF_MKFS_PREPARE");
    int prep = from && !(pe && *pe == '0');
    fo.codec_late = prep;
    gmtf_fs *fs;
    mkfs_prof("mount");
    rc = gmtf_fs_mount(img, &fo, &fs);
    mkfs_prof("mounted");
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, rc < -1000 ? gmtf_strerror(rc) : strerror(-rc));
        return CLI_EXIT_FAIL;
    }
    pthread_t prep_th;
    int prepping = prep && pthread_create(&prep_th, NULL, prepare_run, fs) == 0;
    if (prep && !prepping) /* no thread: the options' codec now */
        prepare_run(fs);
    mkfs_import c;
    int fill = mkfs_import_init(&c, fs, prog, quiet);
    c.stop = &interrupted;
    c.epoch = epoch;
    if (fill < 0)
        fprintf(stderr, "%s: %s\n", prog, strerror(-fill));
    else if (from)
        fill = mkfs_import_from(&c, from);
    mkfs_prof("imported");
    if (prepping)
        pthread_join(prep_th, NULL);
    int synced = fill < 0 || interrupted ? 0 : mkfs_import_sync(&c);
    mkfs_prof("synced");
    mkfs_import_progress_end(&c);
    gmtf_fs_info info;
    gmtf_fs_get_info(fs, &info);
    if (fill < 0 || interrupted || synced) {
        /* The source could not be read, the image is full, the user
         * stopped it, or what waited could not be stored: no image with
         * part of the files. */
        gmtf_fs_abandon(fs);
        rc = synced && fill >= 0 && !interrupted ? synced
             : fill == -2                        ? -ENOSPC
             : fill == -1                        ? -EIO
                                                 : -EINTR;
    } else {
        rc = gmtf_fs_unmount(fs);
        mkfs_prof("unmounted");
    }
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", prog, path,
                rc == -ENOSPC  ? "no space left (image capacity or host filesystem full)"
                : rc == -EINTR ? "interrupted"
                : rc == -EIO   ? "the source could not be read"
                               : strerror(-rc));
        if (created && !unlink(path))
            fprintf(stderr, "%s: %s: removed the unfinished image\n", prog, path);
        else if (mo.incomplete)
            fprintf(stderr,
                    "%s: %s: left marked incomplete (mount and fsck refuse it); run mkfs "
                    "again\n",
                    prog, path);
        mkfs_import_free(&c);
        return CLI_EXIT_FAIL;
    }
    struct stat ist;
    uint64_t isize = stat(path, &ist) ? 0 : (uint64_t)ist.st_size;
    double el = cli_now() - c.line.start;
    if (!quiet) {
        char us[37];
        cli_uuid_string(info.uuid, us);
        printf("%s: %s: block size %u, pack size %u, label '%s', UUID %s\n", prog, path,
               info.block_size, info.pack_size, info.label, us);
        if (from)
            printf("  %" PRIu64 " files, %" PRIu64 " directories, %" PRIu64 " symlinks, %" PRIu64
                   " hard links, %" PRIu64 " others\n"
                   "  %" PRIu64 " bytes in files, %" PRIu64
                   " bytes stored (ratio %.3f), image %" PRIu64 " bytes, %.1f s, %.1f MB/s\n",
                   c.files, c.dirs, c.symlinks, c.links, c.others, info.data_bytes,
                   info.stored_bytes, cli_ratio(info.data_bytes, info.stored_bytes), isize, el,
                   el > 0 ? c.bytes_in / el / 1e6 : 0.0);
    }
    uint64_t errors = c.errors;
    mkfs_import_free(&c);
    if (errors) { /* reported one by one above; the image holds the rest */
        fprintf(stderr, "%s: %" PRIu64 " %s of %s could not be imported (see above)\n", prog,
                errors, errors == 1 ? "entry" : "entries", from ? from : "the source");
        return CLI_EXIT_FAIL;
    }
    return fill ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
