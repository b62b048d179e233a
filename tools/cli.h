/* What the programs of tools/ share (mkfs.gmtf, fsck.gmtf, gmtf, gmtfc):
 * exit statuses, size and count parsing, --version, the usage hint and
 * the progress line. Plain C over stdio; knows nothing of images or the
 * codec beyond the version string. */
#ifndef GMTF_TOOLS_CLI_H
#define GMTF_TOOLS_CLI_H

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

/* "PROG VERSION (libgmtf VERSION[, extra])" on stdout, for --version. */
void cli_version(const char *prog, const char *extra);

/* "Try 'PROG --help'." on stderr, after a usage error. */
void cli_try_help(const char *prog);

/* Seconds on the monotonic clock. */
double cli_now(void);

/* The progress line on stderr: drawn only when stderr is a terminal and
 * the user did not ask for quiet, at most four times a second. Messages
 * printed meanwhile clear it first (cli_progress_clear). */
typedef struct cli_progress {
    int enabled; /* stderr is a terminal, not quiet */
    int shown;   /* a line is on the screen */
    double start, last;
} cli_progress;

void cli_progress_init(cli_progress *p, int quiet);
/* 1 when a new line should be drawn now: enabled and, unless force, a
 * quarter second since the last one. */
int cli_progress_due(cli_progress *p, int force);
/* Replaces the line with the formatted text. */
void cli_progress_show(cli_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Erases the line (before a message, or at the end of the work). */
void cli_progress_clear(cli_progress *p);
/* Ends the line with a newline: the last state stays on the screen. */
void cli_progress_keep(cli_progress *p);

#endif
