/* gmtfc: stand-alone compressor over libgmtf, in the manner of bzip2/zstd.
 *
 *   gmtfc [-1..-9|--fast|--best|-b SIZE] [-j N] [--mtf=NAME] [-c] [-k] [-f] [-d] [-t]
 *         [-q] [-v] FILE...
 *   gmtfc bench ...            (gmtfc_bench.c)
 *
 * FILE is replaced by FILE.gmz (or back with -d). Output goes to a temporary
 * file in the target directory that is renamed into place only when
 * complete, so a failure or a signal never leaves a partial output file.
 * Exit status as bzip2's: 0 when every file succeeded, 1 for an
 * environmental problem (no such file, bad option, I/O error, out of
 * memory), 2 for corrupt compressed input, 3 for an internal error of the
 * codec; the largest over all files. */
#include "gmtfc.h"

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gmtf_codec.h"

enum mode { MODE_COMPRESS, MODE_DECOMPRESS, MODE_TEST };

/* bzip2's exit statuses; a failing step returns its negative. */
enum { EXIT_ENV = 1, EXIT_CORRUPT = 2, EXIT_INTERNAL = 3 };

typedef struct options {
    enum mode mode;
    int keep, force, to_stdout, quiet, verbose;
    gmtfc_config cfg;
} options;

/* Progress of the current input. */
typedef struct progress {
    cli_progress line;
    const char *name;
    uint64_t size; /* input size when known, else 0 */
} progress;

typedef struct app {
    options opt;
    gmtfc_stream *stream;
    progress prog;
} app;

/* The temporary output file to remove if a signal ends the program. The
 * one piece of global state: a signal handler can reach nothing else. */
static char cleanup_path[PATH_MAX];
static volatile sig_atomic_t cleanup_armed;

static const char *prog_name = "gmtfc";

static void on_fatal_signal(int sig)
{
    if (cleanup_armed)
        unlink(cleanup_path);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_signal_handlers(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa = {.sa_handler = on_fatal_signal};
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

static void arm_cleanup(const char *path)
{
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    cleanup_armed = 0;
    if (path) {
        snprintf(cleanup_path, sizeof cleanup_path, "%s", path);
        cleanup_armed = 1;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
}

static void warn_file(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void warn_file(const char *name, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: %s: ", prog_name, name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ---- usage -------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: %s [OPTION]... [FILE]...\n"
            "       %s bench [--json] [--mtf=NAME|all] [-b SIZE] [-r RUNS] [-j N] FILE...\n"
            "Compress or decompress FILEs with the gmtf BWT block codec (.gmz).\n"
            "With no FILE, or when FILE is -, read standard input.\n\n"
            "  -z, --compress        compress (default)\n"
            "  -d, --decompress      decompress FILE.gmz to FILE\n"
            "  -t, --test            check the integrity of compressed files\n"
            "  -c, --stdout          write to standard output, keep input files\n"
            "  -k, --keep            keep (do not delete) input files\n"
            "  -f, --force           overwrite output files; compress to a terminal;\n"
            "                        follow symbolic links; accept hard-linked inputs\n"
            "  -1 .. -9              block size 100k .. 900k, as bzip2 (default -9)\n"
            "      --fast, --best    -1, -9\n"
            "  -b, --block-size=SIZE block size, 1 byte to 16M; k and M suffixes are\n"
            "                        KiB and MiB (default 900k)\n"
            "  -j, --threads=N       worker threads (default 1, 0 = one per CPU);\n"
            "                        the output is the same for any N\n"
            "      --mtf=NAME        MTF backend: auto, scalar, simd, ... (same output)\n"
            "      --gpus=LIST       GPUs for large batches: all (default) or numbers,\n"
            "                        e.g. 0,1 (same output; GMTF_GPUS too)\n"
            "  -q, --quiet           no progress line\n"
            "  -v, --verbose         report ratio and speed per file\n"
            "  -h, --help            show this help and exit\n"
            "  -V, --version         show the version and exit\n\n"
            "Exit status (bzip2's): 0 on success, 1 environmental problem (no such file,\n"
            "bad option, I/O error), 2 corrupt compressed input, 3 internal codec error.\n"
            "Bytes after the last stream that do not start another are ignored, with a\n"
            "warning (as bzip2's 'trailing garbage after EOF ignored').\n",
            prog_name, prog_name);
}

static void list_backends(FILE *f)
{
    fprintf(f, "%s: MTF backends:", prog_name);
    for (size_t i = 0; i < gmtf_mtf_backend_count(); i++) {
        int ok = 0;
        const char *n = gmtf_mtf_backend_name(i, &ok);
        fprintf(f, " %s%s", n, ok ? "" : " (unavailable)");
    }
    fputc('\n', f);
}

/* ---- option parsing ------------------------------------------------------ */

/* 0 means one per CPU. */
static int parse_threads(const char *s, unsigned *out)
{
    if (cli_parse_uint(s, 0, 1024, out) < 0)
        return -EINVAL;
    if (*out == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        *out = n > 0 ? (unsigned)n : 1;
    }
    return 0;
}

enum { OPT_MTF = 256, OPT_FAST, OPT_BEST, OPT_GPUS };

/* Returns optind on success, -1 after printing a message, or 0 when the
 * program should exit 0 (help, version). */
static int parse_options(int argc, char **argv, options *o)
{
    static const struct option longs[] = {
        {"compress", no_argument, NULL, 'z'},
        {"decompress", no_argument, NULL, 'd'},
        {"uncompress", no_argument, NULL, 'd'},
        {"test", no_argument, NULL, 't'},
        {"stdout", no_argument, NULL, 'c'},
        {"to-stdout", no_argument, NULL, 'c'},
        {"keep", no_argument, NULL, 'k'},
        {"force", no_argument, NULL, 'f'},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"block-size", required_argument, NULL, 'b'},
        {"threads", required_argument, NULL, 'j'},
        {"mtf", required_argument, NULL, OPT_MTF},
        {"gpus", required_argument, NULL, OPT_GPUS},
        {"fast", no_argument, NULL, OPT_FAST},
        {"best", no_argument, NULL, OPT_BEST},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":zdtckfqvb:j:hV123456789", longs, NULL)) != -1) {
        switch (c) {
        case 'z': o->mode = MODE_COMPRESS; break;
        case 'd': o->mode = MODE_DECOMPRESS; break;
        case 't': o->mode = MODE_TEST; break;
        case 'c': o->to_stdout = 1; break;
        case 'k': o->keep = 1; break;
        case 'f': o->force = 1; break;
        case 'q':
            o->quiet = 1;
            o->verbose = 0;
            break;
        case 'v':
            o->verbose++;
            o->quiet = 0;
            break;
        case OPT_MTF: o->cfg.mtf = optarg; break;
        case OPT_GPUS:
            if (cli_check_gpus(prog_name, "--gpus", optarg) < 0)
                return -1;
            o->cfg.gpus = optarg;
            break;
        case '1':
        case '2':
        case '3':
        case '4':
        case '5':
        case '6':
        case '7':
        case '8':
        case '9':
            o->cfg.block_size = (uint32_t)(c - '0') * 100 * 1024; /* the last one given wins */
            break;
        case OPT_FAST: o->cfg.block_size = 100 * 1024; break;
        case OPT_BEST: o->cfg.block_size = 900 * 1024; break;
        case 'b':
            if (gmtfc_parse_block_size(optarg, &o->cfg.block_size) < 0) {
                fprintf(stderr, "%s: invalid block size '%s' (1 byte to 16M, k/M suffixes)\n",
                        prog_name, optarg);
                return -1;
            }
            break;
        case 'j':
            if (parse_threads(optarg, &o->cfg.threads) < 0) {
                fprintf(stderr, "%s: invalid thread count '%s' (0 to 1024)\n", prog_name, optarg);
                return -1;
            }
            break;
        case 'h': usage(stdout); return 0;
        case 'V': {
            char extra[32];
            snprintf(extra, sizeof extra, "stream format %d", GMTFC_VERSION);
            cli_version(prog_name, extra);
            return 0;
        }
        case ':':
            fprintf(stderr, "%s: option '%s' needs an argument\n", prog_name, argv[optind - 1]);
            cli_try_help(prog_name);
            return -1;
        default:
            if (optopt)
                fprintf(stderr, "%s: unknown option '-%c'\n", prog_name, optopt);
            else
                fprintf(stderr, "%s: unknown option '%s'\n", prog_name, argv[optind - 1]);
            cli_try_help(prog_name);
            return -1;
        }
    }
    return optind;
}

/* ---- progress -------------------------------------------------------------- */

static void progress_begin(app *a, const char *name, uint64_t size)
{
    progress *p = &a->prog;
    if (p->name) /* the line of the file before */
        cli_progress_free(&p->line);
    p->name = name;
    p->size = size;
    cli_progress_init(&p->line, prog_name, a->opt.quiet, 0);
}

static void progress_update(void *arg, const gmtfc_totals *t)
{
    progress *p = arg;
    if (!cli_progress_due(&p->line, 0))
        return;
    double mbps = t->in_bytes / 1e6 / (p->line.last - p->line.start);
    if (p->size > 0)
        cli_progress_show(&p->line, "%s: %5.1f%%  %.1f MB/s ", p->name,
                          100.0 * t->in_bytes / p->size, mbps);
    else
        cli_progress_show(&p->line, "%s: %.1f MB  %.1f MB/s ", p->name, t->in_bytes / 1e6, mbps);
}

static void progress_end(app *a)
{
    cli_progress_clear(&a->prog.line);
}

static void report_verbose(app *a, const char *name, const gmtfc_totals *t)
{
    if (!a->opt.verbose)
        return;
    double secs = cli_now() - a->prog.line.start;
    uint64_t orig = a->opt.mode == MODE_COMPRESS ? t->in_bytes : t->out_bytes;
    uint64_t comp = a->opt.mode == MODE_COMPRESS ? t->out_bytes : t->in_bytes;
    double mbps = secs > 0 ? orig / 1e6 / secs : 0;
    if (a->opt.mode == MODE_TEST) {
        fprintf(stderr, "  %s: ok (%llu streams, %llu bytes, %.1f MB/s)\n", name,
                (unsigned long long)t->streams, (unsigned long long)orig, mbps);
        return;
    }
    fprintf(stderr, "  %s: %.3f:1, %.3f bits/byte, %.2f%% saved, %llu in, %llu out, %.1f MB/s\n",
            name, comp ? (double)orig / comp : 0.0, orig ? 8.0 * comp / orig : 0.0,
            orig ? 100.0 - 100.0 * comp / orig : 0.0, (unsigned long long)t->in_bytes,
            (unsigned long long)t->out_bytes, mbps);
}

/* ---- one input ----------------------------------------------------------- */

/* Runs the selected direction from in_fd to out_fd (-1 when testing).
 * Errors are reported against the input's name, write errors against
 * out_name. */
static int run_codec(app *a, const char *name, int in_fd, int out_fd, const char *out_name,
                     uint64_t size)
{
    gmtfc_totals t;
    gmtfc_error err;
    int rc;

    progress_begin(a, name, size);
    if (a->opt.mode == MODE_COMPRESS)
        rc = gmtfc_compress(a->stream, in_fd, out_fd, &t, &err);
    else
        rc = gmtfc_decompress(a->stream, in_fd, a->opt.mode == MODE_TEST ? -1 : out_fd, &t, &err);
    progress_end(a);
    if (rc < 0) {
        warn_file(err.kind == GMTFC_ERR_WRITE ? out_name : name, "%s", err.msg);
        if (err.kind == GMTFC_ERR_CORRUPT)
            return -EXIT_CORRUPT;
        if (err.kind == GMTFC_ERR_CODEC && err.code != -ENOMEM)
            return -EXIT_INTERNAL;
        return -EXIT_ENV;
    }
    if (t.garbage && !a->opt.quiet)
        warn_file(name, "trailing garbage after EOF ignored (from byte offset %llu)",
                  (unsigned long long)t.garbage);
    report_verbose(a, name, &t);
    return 0;
}

static int process_stdio(app *a)
{
    const options *o = &a->opt;
    if (o->mode == MODE_COMPRESS && isatty(STDOUT_FILENO) && !o->force) {
        fprintf(stderr, "%s: compressed data not written to a terminal (use -f to force)\n",
                prog_name);
        return -1;
    }
    if (o->mode != MODE_COMPRESS && isatty(STDIN_FILENO) && !o->force) {
        fprintf(stderr, "%s: compressed data not read from a terminal (use -f to force)\n",
                prog_name);
        return -1;
    }
    return run_codec(a, "(stdin)", STDIN_FILENO, STDOUT_FILENO, "(stdout)", 0);
}

static int has_suffix(const char *name)
{
    size_t n = strlen(name), k = strlen(GMTFC_SUFFIX);
    return n > k && strcmp(name + n - k, GMTFC_SUFFIX) == 0;
}

/* Name of the output file for name, or NULL with a message. */
static char *output_name(const app *a, const char *name)
{
    size_t n = strlen(name);
    char *out;
    if (a->opt.mode == MODE_COMPRESS) {
        if (has_suffix(name)) {
            warn_file(name, "already has %s suffix -- ignored", GMTFC_SUFFIX);
            return NULL;
        }
        if ((out = malloc(n + sizeof GMTFC_SUFFIX)) != NULL)
            snprintf(out, n + sizeof GMTFC_SUFFIX, "%s%s", name, GMTFC_SUFFIX);
    } else {
        if (!has_suffix(name)) {
            warn_file(name, "unknown suffix (expected %s) -- ignored", GMTFC_SUFFIX);
            return NULL;
        }
        if ((out = strdup(name)) != NULL)
            out[n - strlen(GMTFC_SUFFIX)] = '\0';
    }
    if (!out)
        warn_file(name, "%s", strerror(ENOMEM));
    return out;
}

/* Checks that name may be read (and, unless it is kept, removed). */
static int check_input(const app *a, const char *name, const struct stat *st, int removes)
{
    if (S_ISDIR(st->st_mode)) {
        warn_file(name, "is a directory -- ignored");
        return -1;
    }
    if (!S_ISREG(st->st_mode) && removes) {
        warn_file(name, "is not a regular file -- ignored");
        return -1;
    }
    if (removes && st->st_nlink > 1 && !a->opt.force) {
        warn_file(name, "has %lu other links -- ignored (use -f to force)",
                  (unsigned long)st->st_nlink - 1);
        return -1;
    }
    return 0;
}

/* Opens a temporary file next to out_path; fills tmp (PATH_MAX bytes). */
static int open_temp(const char *out_path, char *tmp)
{
    const char *slash = strrchr(out_path, '/');
    int dirlen = slash ? (int)(slash - out_path + 1) : 0;
    if (snprintf(tmp, PATH_MAX, "%.*s.gmtfc-XXXXXX", dirlen, out_path) >= PATH_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkstemp(tmp);
}

/* Gives the output the input's owner (when allowed), mode and times. */
static void copy_metadata(int fd, const struct stat *st)
{
    mode_t mode = st->st_mode & 07777;
    if (fchown(fd, st->st_uid, st->st_gid) < 0) {
        if (fchown(fd, (uid_t)-1, st->st_gid) < 0)
            mode &= ~(mode_t)S_ISGID;
        mode &= ~(mode_t)S_ISUID;
    }
    if (fchmod(fd, mode) < 0) {
        /* Keep going: the data is what matters; mkstemp's 0600 is safe. */
    }
    struct timespec times[2] = {st->st_atim, st->st_mtim};
    futimens(fd, times);
}

/* Writes in_fd through the codec into out_path via a temporary file. */
static int write_output(app *a, const char *name, int in_fd, const struct stat *st,
                        const char *out_path)
{
    char tmp[PATH_MAX];
    int fd = open_temp(out_path, tmp);
    if (fd < 0) {
        warn_file(out_path, "cannot create a temporary file: %s", strerror(errno));
        return -1;
    }
    arm_cleanup(tmp);
    int rc = run_codec(a, name, in_fd, fd, out_path, (uint64_t)st->st_size);
    if (rc == 0) {
        copy_metadata(fd, st);
        /* The input is removed next: its replacement must be on disk. */
        if (fsync(fd) < 0) {
            warn_file(out_path, "write error: %s", strerror(errno));
            rc = -1;
        }
    }
    if (close(fd) < 0 && rc == 0) {
        warn_file(out_path, "write error: %s", strerror(errno));
        rc = -1;
    }
    if (rc == 0 && rename(tmp, out_path) < 0) {
        warn_file(out_path, "cannot rename %s into place: %s", tmp, strerror(errno));
        rc = -1;
    }
    if (rc < 0)
        unlink(tmp);
    arm_cleanup(NULL);
    return rc;
}

static int process_file(app *a, const char *name)
{
    const options *o = &a->opt;
    const int to_file = o->mode != MODE_TEST && !o->to_stdout;
    const int removes = to_file && !o->keep;
    struct stat st;
    char *out = NULL;
    int rc = -1;

    if (strcmp(name, "-") == 0)
        return process_stdio(a);
    if (lstat(name, &st) < 0) {
        warn_file(name, "%s", strerror(errno));
        return -1;
    }
    if (S_ISLNK(st.st_mode) && !o->force && to_file) {
        warn_file(name, "is a symbolic link -- ignored (use -f to follow)");
        return -1;
    }
    /* When writing a file, only regular inputs are accepted: O_NONBLOCK
     * keeps a FIFO from blocking the open before it is refused. With -c or
     * -t a FIFO is fine, and must be opened blocking to wait for a writer. */
    int in_fd = open(name, O_RDONLY | O_NOCTTY | (to_file ? O_NONBLOCK : 0));
    if (in_fd < 0) {
        warn_file(name, "%s", strerror(errno));
        return -1;
    }
    if (fstat(in_fd, &st) < 0 || check_input(a, name, &st, removes) < 0)
        goto done;
    fcntl(in_fd, F_SETFL, fcntl(in_fd, F_GETFL) & ~O_NONBLOCK);
    if (!to_file) {
        rc = run_codec(a, name, in_fd, STDOUT_FILENO, "(stdout)", (uint64_t)st.st_size);
        goto done;
    }
    if ((out = output_name(a, name)) == NULL)
        goto done;
    struct stat ost;
    if (!o->force && lstat(out, &ost) == 0) {
        warn_file(out, "already exists -- skipped (use -f to overwrite)");
        goto done;
    }
    rc = write_output(a, name, in_fd, &st, out);
    if (rc == 0 && removes && unlink(name) < 0) {
        warn_file(name, "cannot remove input: %s", strerror(errno));
        rc = -1;
    }
done:
    close(in_fd);
    free(out);
    return rc;
}

/* ---- main ------------------------------------------------------------------ */

static int check_stdout(const app *a, int nfiles)
{
    const options *o = &a->opt;
    int writes_stdout = o->mode != MODE_TEST && (o->to_stdout || nfiles == 0);
    if (o->mode == MODE_COMPRESS && writes_stdout && isatty(STDOUT_FILENO) && !o->force) {
        fprintf(stderr, "%s: compressed data not written to a terminal (use -f to force)\n",
                prog_name);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    app a = {
        .opt = {.mode = MODE_COMPRESS, .cfg = {.block_size = GMTF_BLOCK_DEFAULT, .threads = 1}}};
    if (argc > 1 && strcmp(argv[1], "bench") == 0)
        return gmtfc_bench_main(argc - 1, argv + 1);
    int first = parse_options(argc, argv, &a.opt);
    if (first <= 0)
        return first == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    if (!a.opt.cfg.gpus && cli_check_gpus(prog_name, "--gpus", NULL) < 0)
        return CLI_EXIT_FAIL;
    if (check_stdout(&a, argc - first) < 0)
        return CLI_EXIT_FAIL;
    int rc = gmtfc_stream_create(&a.stream, &a.opt.cfg);
    if (rc < 0) {
        fprintf(stderr, "%s: cannot start the codec%s%s: %s\n", prog_name,
                a.opt.cfg.mtf ? " with --mtf=" : "", a.opt.cfg.mtf ? a.opt.cfg.mtf : "",
                gmtf_strerror(rc));
        if (rc == GMTF_E_BACKEND)
            list_backends(stderr);
        return CLI_EXIT_FAIL;
    }
    gmtfc_stream_set_progress(a.stream, progress_update, &a.prog);
    install_signal_handlers();

    int status = 0, r; /* bzip2: the worst status over all files */
    if (first == argc && (r = -process_stdio(&a)) > status)
        status = r;
    for (int i = first; i < argc; i++)
        if ((r = -process_file(&a, argv[i])) > status)
            status = r;
    /* With a GPU the codec's teardown (its device memory and pinned
     * staging freed: 0.10 s for 256 MiB batches on the H100, 0.23 s at 512
     * MiB) is left to the exit, which ends the driver's context and the
     * process's memory anyway (docs/gpu.md, pipe8: the exit then takes
     * 0.22-0.24 s, against 0.14 s after the teardown; _exit, skipping
     * CUDA's atexit handler, gained nothing). */
    const char *de = getenv("GMTFC_DESTROY"); /* 1: the teardown here too (measurements) */
    if (!gmtfc_stream_device(a.stream) || (de && *de == '1'))
        gmtfc_stream_destroy(a.stream);
    if (a.prog.name)
        cli_progress_free(&a.prog.line);
    return status;
}
