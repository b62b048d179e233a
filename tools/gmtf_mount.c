/* gmtf: mounts a gmtf image through FUSE.
 *
 *   gmtf IMAGE MOUNTPOINT [-o OPTIONS] [-f] [-d] [-s]
 *
 * Also run by mount.fuse3 for `mount -t fuse.gmtf IMAGE DIR` and fstab
 * entries. Everything the image needs is done in the child that stays
 * behind, so the library's threads exist in the process that serves the
 * mount; the parent only waits to hear that the mount is up (or why not)
 * and exits with that status. Operations: gmtf_fuse_ops.c. Man page:
 * docs/gmtf.1. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "gmtf_codec.h"
#include "gmtf_config.h"
#include "gmtf_fuse.h"

/* Options of gmtf itself; the rest go to libfuse and the kernel. */
typedef struct cli {
    char *image;
    int nonopts;
    int ro;
    char *mtf;
    char *gpus;
    char *cache_size;
    char *dirty_size;
    char *flush_interval;
    char *max_write;
    char *fsname;
    char *subtype;
    char *threads_s, *readahead_blocks_s, *readahead_kb_s; /* as given: parse_counts */
    unsigned threads;
    unsigned readahead_blocks;
    unsigned readahead_kb;
    double entry_timeout;
    double attr_timeout;
    int noacl;
    int nowriteback;
    int norange;
} cli;

enum { KEY_RO, KEY_KEEP };

#define CLI_OPT(t, f, v)                                                                           \
    {                                                                                              \
        t, offsetof(cli, f), v                                                                     \
    }
static const struct fuse_opt cli_opts[] = {FUSE_OPT_KEY("ro", KEY_RO),
                                           CLI_OPT("mtf=%s", mtf, 0),
                                           CLI_OPT("gpus=%s", gpus, 0),
                                           CLI_OPT("cache_size=%s", cache_size, 0),
                                           CLI_OPT("dirty_size=%s", dirty_size, 0),
                                           CLI_OPT("flush_interval=%s", flush_interval, 0),
                                           CLI_OPT("max_write=%s", max_write, 0),
                                           CLI_OPT("threads=%s", threads_s, 0),
                                           CLI_OPT("readahead_blocks=%s", readahead_blocks_s, 0),
                                           CLI_OPT("readahead_kb=%s", readahead_kb_s, 0),
                                           CLI_OPT("entry_timeout=%lf", entry_timeout, 0),
                                           CLI_OPT("attr_timeout=%lf", attr_timeout, 0),
                                           CLI_OPT("fsname=%s", fsname, 0),
                                           CLI_OPT("subtype=%s", subtype, 0),
                                           CLI_OPT("acl", noacl, 0),
                                           CLI_OPT("noacl", noacl, 1),
                                           CLI_OPT("writeback_cache", nowriteback, 0),
                                           CLI_OPT("no_writeback_cache", nowriteback, 1),
                                           CLI_OPT("range_reads", norange, 0),
                                           CLI_OPT("norange_reads", norange, 1),
                                           FUSE_OPT_END};

static int cli_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
    (void)outargs;
    cli *c = data;
    if (key == FUSE_OPT_KEY_NONOPT) {
        if (c->nonopts++ == 0) {
            c->image = strdup(arg);
            return 0; /* IMAGE is ours; MOUNTPOINT is libfuse's */
        }
        return 1;
    }
    if (key == KEY_RO)
        c->ro = 1;
    return 1; /* ro is also the kernel's */
}

static void usage(FILE *f)
{
    fprintf(f, "usage: gmtf IMAGE MOUNTPOINT [-o OPTIONS] [-f] [-d] [-s]\n"
               "       gmtf -u [-q] MOUNTPOINT\n"
               "       gmtf --help | --version\n"
               "\n"
               "Mounts the gmtf image IMAGE (made by mkfs.gmtf) on MOUNTPOINT.\n"
               "With -u (--unmount), unmounts MOUNTPOINT and returns once the daemon has\n"
               "stored everything and the image is free (fusermount3 -u returns before).\n"
               "\n"
               "gmtf options (-o):\n"
               "    ro                     read-only; never writes the image (a journal\n"
               "                           that needs replay is replayed in memory)\n"
               "    cache_size=SIZE        decoded-block cache (default 64M; K, M, G)\n"
               "    dirty_size=SIZE        write-back limit before writers flush (default 128M)\n"
               "    flush_interval=SECS    background flush period (default 5; 0 = only on\n"
               "                           fsync and unmount)\n"
               "    mtf=NAME               codec MTF backend (default: auto)\n"
               "    gpus=LIST              codec GPUs: all (default) or numbers, e.g. 0:1\n"
               "    threads=N              codec threads (default: online CPUs)\n"
               "    readahead_blocks=N     blocks decoded ahead of sequential reads\n"
               "    readahead_kb=N         kernel readahead of the mount (default 1024; 0 =\n"
               "                           the kernel's 128; needs root)\n"
               "    max_write=SIZE         bytes per FUSE read/write request (default 1M)\n"
               "    entry_timeout=SECS     name cache timeout (default 1)\n"
               "    attr_timeout=SECS      attribute cache timeout (default 1)\n"
               "    noacl                  no POSIX ACLs (default: on when the kernel can)\n"
               "    no_writeback_cache     no FUSE writeback cache (default: on)\n"
               "    norange_reads          a cold random read decodes its whole block (default:\n"
               "                           only the part it needs; for measurements)\n"
               "    allow_other, default_permissions, and the other FUSE and mount options\n"
               "                           are passed on (default_permissions is always on)\n"
               "\n"
               "    -f                     stay in the foreground\n"
               "    -d                     debug: print every request (implies -f)\n"
               "    -s                     single-threaded\n"
               "    -h, --help             this text and libfuse's options\n"
               "    -V, --version          versions\n");
}

/* Sizes like 64M, 1G, 4096 (bytes): cli_parse_size. */
static int parse_size(const char *s, uint64_t *out)
{
    return cli_parse_size(s, out);
}

/* Seconds, fractional allowed ("0.5"), or milliseconds with "ms". */
static int parse_interval_ms(const char *s, unsigned *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -EINVAL;
    if (strcmp(end, "ms") == 0)
        v /= 1000.0;
    else if (*end && strcmp(end, "s") != 0)
        return -EINVAL;
    if (v > 86400.0)
        return -EINVAL;
    *out = (unsigned)(v * 1000.0 + 0.5);
    return 0;
}

static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("gmtf: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return CLI_EXIT_FAIL;
}

/* The counts among the -o options: whole numbers in range (sscanf's %u
 * took "-3" as 4294967293, which the codec then refused, and the mount
 * failed as "not a gmtf image"). 0 or the exit status after a message. */
static int parse_counts(cli *c)
{
    if (c->threads_s && cli_parse_uint(c->threads_s, 1, 1024, &c->threads) < 0)
        return fail("bad threads '%s' (1 to 1024)", c->threads_s);
    if (c->readahead_blocks_s &&
        cli_parse_uint(c->readahead_blocks_s, 0, 1024, &c->readahead_blocks) < 0)
        return fail("bad readahead_blocks '%s' (0 to 1024)", c->readahead_blocks_s);
    if (c->readahead_kb_s && cli_parse_uint(c->readahead_kb_s, 0, 1u << 20, &c->readahead_kb) < 0)
        return fail("bad readahead_kb '%s' (0 to 1048576)", c->readahead_kb_s);
    return 0;
}

/* Fills the library options from the command line. */
static int build_fs_options(const cli *c, gmtf_mount *m, gmtf_fs_options *o)
{
    memset(o, 0, sizeof *o);
    o->read_only = c->ro;
    o->mtf = c->mtf;
    o->gpus = c->gpus;
    o->threads = c->threads;
    o->track_lookups = 1;
    o->readahead_blocks = c->readahead_blocks;
    o->range_reads = c->norange ? -1 : 0;
    o->flush_interval_ms = 5000;
    o->log = gmtf_mount_log;
    o->log_arg = m;
    if (c->cache_size && parse_size(c->cache_size, &o->cache_bytes) < 0)
        return fail("bad cache_size '%s' (bytes, or a number with K, M or G)", c->cache_size);
    if (c->dirty_size && parse_size(c->dirty_size, &o->dirty_bytes) < 0)
        return fail("bad dirty_size '%s' (bytes, or a number with K, M or G)", c->dirty_size);
    if (c->flush_interval && parse_interval_ms(c->flush_interval, &o->flush_interval_ms) < 0)
        return fail("bad flush_interval '%s' (seconds, e.g. 5 or 0.5, or 500ms)",
                    c->flush_interval);
    m->max_write = 1u << 20;
    if (c->max_write) {
        uint64_t v;
        if (parse_size(c->max_write, &v) < 0 || v < 4096 || v > (1u << 20))
            return fail("bad max_write '%s' (4K to 1M)", c->max_write);
        m->max_write = (unsigned)v;
    }
    return 0;
}

/* The parent waits on a pipe: one byte 0 means mounted; end of file means
 * the child failed (it already said why on stderr), and its exit status
 * becomes ours. */
static int daemon_fork(int *ready_fd)
{
    int p[2];
    if (pipe(p) < 0)
        return fail("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        return fail("fork: %s", strerror(errno));
    if (pid > 0) {
        close(p[1]);
        char c;
        ssize_t n;
        do
            n = read(p[0], &c, 1);
        while (n < 0 && errno == EINTR);
        if (n == 1)
            _exit(0);
        int st = 0;
        if (waitpid(pid, &st, 0) < 0)
            _exit(1);
        _exit(WIFEXITED(st) && WEXITSTATUS(st) ? WEXITSTATUS(st) : 1);
    }
    close(p[0]);
    *ready_fd = p[1];
    return 0;
}

static void daemon_ready(gmtf_mount *m, int ready_fd)
{
    setsid();
    if (chdir("/") < 0) {
        /* / always exists; nothing depends on the cwd anyway */
    }
    int nul = open("/dev/null", O_RDWR);
    if (nul >= 0) {
        dup2(nul, 0);
        dup2(nul, 1);
        dup2(nul, 2);
        if (nul > 2)
            close(nul);
    }
    openlog("gmtf", LOG_PID, LOG_DAEMON);
    m->daemonized = 1;
    char ok = 0;
    if (write(ready_fd, &ok, 1) != 1) {
        /* the parent is gone; the mount works regardless */
    }
    close(ready_fd);
}

/* A bad mtf= would otherwise surface as a failed mount of the image. */
static int check_mtf_name(const char *name)
{
    if (!name)
        return 0;
    gmtf_codec_options co = {.mtf = name, .threads = 1, .max_block = 1u << 16};
    gmtf_codec *codec;
    int rc = gmtf_codec_create(&codec, &co);
    if (rc < 0)
        return fail("mtf=%s: %s (try auto, scalar or simd)", name, gmtf_strerror(rc));
    gmtf_codec_destroy(codec);
    return 0;
}

static int open_filesystem(const cli *c, gmtf_mount *m)
{
    gmtf_fs_options fo;
    if (build_fs_options(c, m, &fo) || check_mtf_name(c->mtf))
        return 1;
    if (cli_check_gpus("gmtf", "gpus", c->gpus) < 0)
        return CLI_EXIT_FAIL;
    gmtf_image *img;
    int rc = gmtf_image_open_file(m->image, c->ro ? GMTF_IMAGE_RDONLY : 0, &img);
    if (rc == -EBUSY)
        return fail("%s: image is in use (mounted, or mkfs.gmtf/fsck.gmtf running on it)",
                    m->image);
    if (!c->ro && (rc == -EROFS || rc == -EACCES || rc == -EPERM))
        return fail("%s: cannot open the image for writing: %s (mount it with -o ro)", m->image,
                    strerror(-rc));
    if (rc < 0)
        return fail("%s: cannot open image: %s", m->image, strerror(-rc));
    rc = gmtf_fs_mount(img, &fo, &m->fs);
    if (rc == -EINVAL)
        return fail("%s: not a gmtf image (or an unsupported format version)", m->image);
    if (rc == -EUCLEAN)
        return fail("%s: metadata is damaged; run fsck.gmtf on it", m->image);
    if (rc < 0)
        return fail("%s: cannot mount: %s", m->image, strerror(-rc));
    return 0;
}

/* Appends one option, escaping commas and backslashes in its value for
 * libfuse's option parser. */
static int add_opt_escaped(char **opts, const char *key, const char *value)
{
    size_t len = strlen(value);
    char *kv = malloc(strlen(key) + 2 * len + 1);
    if (!kv)
        return -1;
    char *w = kv + sprintf(kv, "%s", key);
    for (size_t i = 0; i < len; i++) {
        if (value[i] == ',' || value[i] == '\\')
            *w++ = '\\';
        *w++ = value[i];
    }
    *w = '\0';
    int rc = fuse_opt_add_opt(opts, kv);
    free(kv);
    return rc;
}

/* fsname shows the image in /proc/mounts and df, subtype makes the type
 * fuse.gmtf; default_permissions lets the kernel check permissions (the
 * library checks none). */
static int add_mount_options(struct fuse_args *args, const cli *c, const char *image)
{
    char *opt = NULL;
    int rc = add_opt_escaped(&opt, "fsname=", c->fsname ? c->fsname : image);
    if (rc == 0)
        rc = add_opt_escaped(&opt, "subtype=", c->subtype ? c->subtype : "gmtf");
    if (rc == 0)
        rc = fuse_opt_add_opt(&opt, "default_permissions");
    if (rc == 0)
        rc = fuse_opt_add_arg(args, "-o");
    if (rc == 0)
        rc = fuse_opt_add_arg(args, opt);
    free(opt);
    return rc;
}

/* Undoes the octal escapes of /proc/self/mountinfo (\040 for space). */
static void unescape_mountinfo(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

/* The kernel reads ahead 128 KiB on a FUSE mount; a block is 2 MiB by
 * default (64 KiB to 16 MiB), so a sequential reader would ask for each
 * block 16 times over. The mount's
 * readahead is raised through its bdi in sysfs, once the kernel has taken
 * the INIT reply (which caps it at max_readahead): a thread waits for
 * op_init, then writes and checks. The device number comes from mountinfo
 * (a stat of the mount point would call back into this process). Best
 * effort: root only. */
typedef struct readahead_job {
    gmtf_mount *m;
    char path[128];
    unsigned kb;
} readahead_job;

static void *readahead_thread(void *arg)
{
    readahead_job *job = arg;
    for (int tries = 0; tries < 50; tries++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        if (!__atomic_load_n(&job->m->init_done, __ATOMIC_ACQUIRE))
            continue;
        FILE *f = fopen(job->path, "r+");
        if (!f)
            break;
        unsigned now = 0;
        int ok = fscanf(f, "%u", &now) == 1 && now == job->kb;
        if (!ok) {
            rewind(f);
            fprintf(f, "%u\n", job->kb);
        }
        fclose(f);
        if (ok)
            break;
    }
    free(job);
    return NULL;
}

static void set_readahead(gmtf_mount *m, const char *want, unsigned kb)
{
    if (!kb || !want[0])
        return;
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f)
        return;
    char line[4096], dev[64] = "";
    while (fgets(line, sizeof line, f)) {
        char mm[64], root[PATH_MAX], mp[PATH_MAX];
        if (sscanf(line, "%*s %*s %63s %4095s %4095s", mm, root, mp) != 3)
            continue;
        unescape_mountinfo(mp);
        if (strcmp(mp, want) == 0 && strstr(line, " - fuse"))
            snprintf(dev, sizeof dev, "%s", mm); /* the last one is on top */
    }
    fclose(f);
    readahead_job *job = dev[0] ? calloc(1, sizeof *job) : NULL;
    if (!job)
        return;
    job->m = m;
    job->kb = kb;
    snprintf(job->path, sizeof job->path, "/sys/class/bdi/%s/read_ahead_kb", dev);
    pthread_t t;
    if (pthread_create(&t, NULL, readahead_thread, job) != 0)
        free(job);
    else
        pthread_detach(t);
}

/* Decoded blocks (the cache, read-ahead, codec buffers) are malloc'ed and
 * freed from many FUSE threads. glibc raises its mmap threshold to the
 * largest chunk freed, after which such blocks come from per-thread
 * arenas, where freed ones stay resident: 250-300 MiB beyond a 64 MiB
 * cache when reading a Linux source tree (docs/format.md, "Memory per
 * file"). A fixed threshold (which also fixes the trim threshold) of one
 * block, at most 1 MiB, maps every block buffer on its own and gives it
 * back when freed; smaller buffers (compressed frames) stay in the arenas.
 * 128 KiB until the image tells its block size. */
static void malloc_tune(uint32_t block_size)
{
#ifdef M_MMAP_THRESHOLD
    uint32_t t = block_size < (1u << 20) ? block_size : 1u << 20;
    mallopt(M_MMAP_THRESHOLD, (int)(t > (64u << 10) ? t : 64u << 10));
#else
    (void)block_size;
#endif
}

static void print_version(void)
{
    char extra[64];
    snprintf(extra, sizeof extra, "libfuse %s", fuse_pkgversion());
    cli_version("gmtf", extra);
}

static int serve(struct fuse_args *args, const cli *c, gmtf_mount *m,
                 const struct fuse_cmdline_opts *fo)
{
    int ready_fd = -1;
    char mnt_path[PATH_MAX] = "";
    if (!realpath(fo->mountpoint, mnt_path))
        mnt_path[0] = '\0'; /* fuse_session_mount will say what is wrong */
    if (!fo->foreground && daemon_fork(&ready_fd))
        return 1;
    if (open_filesystem(c, m))
        return 1;
    struct statvfs st;
    if (gmtf_fs_statfs(m->fs, &st) == 0) /* f_bsize: the image's block size */
        malloc_tune((uint32_t)(st.f_bsize < UINT32_MAX ? st.f_bsize : UINT32_MAX));
    m->read_only = c->ro;
    struct fuse_session *se = fuse_session_new(args, &gmtf_fuse_ops, sizeof gmtf_fuse_ops, m);
    if (!se) {
        gmtf_fs_unmount(m->fs);
        return fail("%s: bad mount options (see gmtf --help)", m->image);
    }
    int status = 1;
    if (fuse_set_signal_handlers(se) != 0) {
        fail("cannot set signal handlers");
        goto out_session;
    }
    if (fuse_session_mount(se, fo->mountpoint) != 0) {
        fail("%s: cannot mount on %s", m->image, fo->mountpoint);
        goto out_signals;
    }
    set_readahead(m, mnt_path, c->readahead_kb);
    if (!fo->foreground)
        daemon_ready(m, ready_fd);
    int rc;
    if (fo->singlethread) {
        rc = fuse_session_loop(se);
    } else {
        struct fuse_loop_config *lc = fuse_loop_cfg_create();
        if (!lc) {
            rc = -ENOMEM;
        } else {
            fuse_loop_cfg_set_clone_fd(lc, (unsigned)fo->clone_fd);
            /* UINT_MAX means "not given": keep libfuse's defaults */
            if (fo->max_threads != UINT_MAX)
                fuse_loop_cfg_set_max_threads(lc, fo->max_threads);
            if (fo->max_idle_threads != UINT_MAX)
                fuse_loop_cfg_set_idle_threads(lc, fo->max_idle_threads);
            rc = fuse_session_loop_mt(se, lc);
            fuse_loop_cfg_destroy(lc);
        }
    }
    status = rc < 0 ? 1 : 0;
    if (rc < 0)
        gmtf_mount_log(m, "FUSE session ended with an error");
    fuse_session_unmount(se);
out_signals:
    fuse_remove_signal_handlers(se);
out_session:
    fuse_session_destroy(se); /* runs op_destroy (sync) if the kernel had not */
    int urc = gmtf_fs_unmount(m->fs);
    if (urc < 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "unmount: %s (run fsck.gmtf)", strerror(-urc));
        gmtf_mount_log(m, msg);
        status = 1;
    }
    return status;
}

int main(int argc, char **argv)
{
    malloc_tune(128u << 10);
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    cli c = {.entry_timeout = 1.0, .attr_timeout = 1.0, .readahead_kb = 1024};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            printf("\nlibfuse options:\n");
            fuse_lowlevel_help();
            return CLI_EXIT_OK;
        }
        if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-V") == 0) {
            print_version();
            return CLI_EXIT_OK;
        }
    }
    int unmount = 0, quiet = 0, nargs = 0;
    const char *target = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-u") || !strcmp(argv[i], "--unmount"))
            unmount = 1;
        else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet"))
            quiet = 1;
        else
            target = argv[i], nargs++;
    }
    if (unmount) {
        if (nargs != 1 || *target == '-') {
            fprintf(stderr, "gmtf: -u takes one MOUNTPOINT (and -q)\n");
            return CLI_EXIT_FAIL;
        }
        return gmtf_unmount_main(target, quiet);
    }
    if (fuse_opt_parse(&args, &c, cli_opts, cli_proc) != 0)
        return fail("cannot parse options (see gmtf --help)");
    if (parse_counts(&c))
        return CLI_EXIT_FAIL;
    if (!c.image || c.nonopts < 2) {
        usage(stderr);
        return CLI_EXIT_FAIL;
    }
    if (c.nonopts > 2)
        return fail("too many arguments: IMAGE and MOUNTPOINT only");
    char image[PATH_MAX];
    if (!realpath(c.image, image))
        return fail("%s: %s", c.image, strerror(errno));
    gmtf_mount m = {
        .image = image,
        .entry_timeout = c.entry_timeout,
        .attr_timeout = c.attr_timeout,
        .acl = !c.noacl,
        .writeback = !c.nowriteback && !c.ro,
    };
    if (add_mount_options(&args, &c, image) != 0)
        return fail("out of memory");
    struct fuse_cmdline_opts fo;
    if (fuse_parse_cmdline(&args, &fo) != 0)
        return fail("cannot parse options (see gmtf --help)");
    if (!fo.mountpoint)
        return fail("no MOUNTPOINT given");
    m.debug = fo.debug;
    int status = serve(&args, &c, &m, &fo);
    free(fo.mountpoint);
    fuse_opt_free_args(&args);
    free(c.image);
    free(c.threads_s);
    free(c.readahead_blocks_s);
    free(c.readahead_kb_s);
    return status;
}
