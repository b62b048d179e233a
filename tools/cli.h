/* What the programs of tools/ share (mkfs.gmtf, fsck.gmtf, gmtf, gmtfc):
 * exit statuses, size and count parsing, --version, the usage hint and
 * the progress line. Plain C over stdio; knows nothing of images or the
 * codec beyond the version string. */
#ifndef GMTF_TOOLS_CLI_H
#define GMTF_TOOLS_CLI_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses. fsck.gmtf follows fsck(8) (all of these); gmtfc, gmtf and
 * mkfs.gmtf use OK and FAIL, mkfs.gmtf OPERATIONAL when memory runs out. */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_FAIL = 1,        /* the tool failed; fsck: errors corrected */
    CLI_EXIT_UNCORRECTED = 4, /* fsck: errors left uncorrected */
    CLI_EXIT_OPERATIONAL = 8, /* fsck: operational error */
    CLI_EXIT_USAGE = 16,      /* fsck: usage or syntax error */
};

/* A size in bytes: digits, an optional fraction, an optional suffix K, M,
 * G or T (powers of 1024, either case), then optionally "i", "iB", "B" or
 * "b" ("64K", "1.5G", "2MiB", "4096"). Returns 0, -EINVAL (not a size) or
 * -ERANGE (beyond 2^64). */
int cli_parse_size(const char *s, uint64_t *out);

/* A whole number in [min, max] (decimal digits only). 0 or -EINVAL. */
int cli_parse_uint(const char *s, unsigned min, unsigned max, unsigned *out);
/* -j's thread count (1..1024); says what is wrong on stderr otherwise. */
int cli_parse_threads(const char *prog, const char *s, unsigned *out);
/* Checks a GPU list given as option (--gpus=LIST, or -o gpus=LIST as
 * opt names it), else the GMTF_GPUS environment variable: 0, or -1 after a
 * message naming what was wrong. */
int cli_check_gpus(const char *prog, const char *opt, const char *list);

/* "PROG VERSION (libgmtf VERSION[, extra])" on stdout, for --version. */
void cli_version(const char *prog, const char *extra);

/* "Try 'PROG --help'." on stderr, after a usage error. */
void cli_try_help(const char *prog);

/* Seconds on the monotonic clock. */
double cli_now(void);

/* The one compression ratio every tool shows (mkfs, fsck, stat, the
 * progress line): bytes in files (the sizes of regular files, a hard-linked
 * file once) over the bytes stored (compressed frames). 0 when nothing is
 * stored. */
double cli_ratio(uint64_t bytes, uint64_t stored);

/* A name (bytes) as valid UTF-8, for JSON and listings: valid UTF-8 kept,
 * a backslash as two backslashes, every other byte as the four characters
 * \xHH (lowercase hex), so that any byte string has one such form and can
 * be recovered from it (docs/gmtf-stat.1). malloc'ed; NULL when out of
 * memory. */
char *cli_name_utf8(const char *name);

/* The k-th smallest of v[0..n) (k counted from 0, k < n), reordering v:
 * a quickselect with a three-way partition (many equal keys cost nothing
 * more). The keys are numbers (no NaN). gmtf-stat's CPU selection. */
double cli_select_f64(double *v, size_t n, size_t k);

/* uuid as 8-4-4-4-12 lowercase hex digits (37 bytes with the NUL). */
void cli_uuid_string(const uint8_t uuid[16], char out[37]);

/* Progress of long work on stderr (mkfs, extract, fsck --verify-data,
 * gmtfc). On a terminal one line redrawn at most four times a second; not
 * on a terminal, when the program asks for it (plain), one line every
 * GMTF_PROGRESS_INTERVAL seconds (default 10) and a last one at the end;
 * nothing with quiet. A thread may draw it (cli_progress_start) while the
 * work goes on: messages go through cli_progress_printf, which clears the
 * line first, under the same lock. */
enum { CLI_PROGRESS_OFF, CLI_PROGRESS_LINE, CLI_PROGRESS_PLAIN };

typedef struct cli_progress {
    int mode;         /* CLI_PROGRESS_* */
    int shown;        /* a terminal line is on the screen */
    const char *prog; /* plain lines start with "PROG: " */
    double start, last, interval;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    int running, stopping;
    void (*tick)(void *arg, int final);
    void *tick_arg;
} cli_progress;

/* What a progress line tells; a field left 0 is not shown (totals 0:
 * unknown). done/total drive the percentage and the ETA (bytes of the
 * input, frames...); bytes is the data handled, its rate per second is
 * shown; stored > 0 adds the stored bytes and the ratio bytes / stored. */
typedef struct cli_work {
    const char *what; /* "verifying frames", NULL: nothing before the figures */
    uint64_t done, total;
    uint64_t files, files_total; /* counted in unit ("files" when NULL) */
    const char *unit;
    uint64_t bytes, bytes_total;
    uint64_t stored;
    uint64_t stored_of; /* the bytes stored holds (its ratio's numerator); 0: bytes */
    const char *note;   /* appended in parentheses, e.g. "compressing" */
} cli_work;

void cli_progress_init(cli_progress *p, const char *prog, int quiet, int plain);
/* 1 when a line should be drawn now: enabled and, unless force, the
 * interval passed since the last one. */
int cli_progress_due(cli_progress *p, int force);
/* Replaces the line with the formatted text (plain: prints it as a line). */
void cli_progress_show(cli_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The line for w: "45% (ETA 1:23), 1,234/5,678 files, 456.7/890.1 MB at
 * 34.5 MB/s, 123.4 MB stored (ratio 3.70)". final: the last one (kept on
 * the screen, printed also in plain mode). */
void cli_progress_work(cli_progress *p, const cli_work *w, int final);
/* Erases the line (before a message, or at the end of the work). */
void cli_progress_clear(cli_progress *p);
/* Ends the line with a newline: the last state stays on the screen. */
void cli_progress_keep(cli_progress *p);
/* A message on stderr ("PROG: " is not added), the line cleared first. */
void cli_progress_printf(cli_progress *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Calls tick(arg, 0) from a thread at every interval until
 * cli_progress_stop, which calls tick(arg, 1) once from the caller. tick
 * reads what the work updates with atomic loads. Without a line (quiet)
 * neither starts anything. 0 or -errno. */
int cli_progress_start(cli_progress *p, void (*tick)(void *arg, int final), void *arg);
void cli_progress_stop(cli_progress *p);
/* Frees the lock (after cli_progress_stop, if started). */
void cli_progress_free(cli_progress *p);

/* A count with thousands separators ("1,234,567") into buf (32 bytes). */
const char *cli_count(uint64_t v, char *buf);

#endif
