/* The shared pieces of the command-line tools (cli.h). */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gmtf_codec.h"
#include "gmtf_config.h"

/* ---- parsing ------------------------------------------------------------ */

static int suffix_shift(char c)
{
    switch (c) {
    case 'k':
    case 'K': return 10;
    case 'm':
    case 'M': return 20;
    case 'g':
    case 'G': return 30;
    case 't':
    case 'T': return 40;
    default: return -1;
    }
}

int cli_parse_size(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long whole = strtoull(s, &end, 10);
    if (errno)
        return -ERANGE;
    double frac = 0, scale = 0.1;
    if (*end == '.')
        for (end++; *end >= '0' && *end <= '9'; end++, scale /= 10)
            frac += (*end - '0') * scale;
    int shift = suffix_shift(*end);
    if (shift < 0)
        shift = 0;
    else
        end++;
    if (strcmp(end, "i") == 0 || strcmp(end, "iB") == 0 || strcmp(end, "B") == 0 ||
        strcmp(end, "b") == 0)
        end += strlen(end);
    if (*end)
        return -EINVAL;
    if (whole > (UINT64_MAX >> shift))
        return -ERANGE;
    uint64_t v = (uint64_t)whole << shift, f = (uint64_t)(frac * (double)((uint64_t)1 << shift));
    if (v > UINT64_MAX - f)
        return -ERANGE;
    *out = v + f;
    return 0;
}

int cli_parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
    if (*s < '0' || *s > '9')
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -EINVAL;
    *out = (unsigned)v;
    return 0;
}

/* ---- messages ----------------------------------------------------------- */

void cli_version(const char *prog, const char *extra)
{
    printf("%s %s (libgmtf %s%s%s)\n", prog, GMTF_VERSION, gmtf_version(), extra ? ", " : "",
           extra ? extra : "");
}

void cli_try_help(const char *prog)
{
    fprintf(stderr, "Try '%s --help'.\n", prog);
}

/* ---- progress ------------------------------------------------------------ */

double cli_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

void cli_progress_init(cli_progress *p, int quiet)
{
    memset(p, 0, sizeof *p);
    p->enabled = !quiet && isatty(STDERR_FILENO);
    p->start = p->last = cli_now();
}

int cli_progress_due(cli_progress *p, int force)
{
    if (!p->enabled)
        return 0;
    double now = cli_now();
    if (!force && now - p->last < 0.25)
        return 0;
    p->last = now;
    return 1;
}

void cli_progress_show(cli_progress *p, const char *fmt, ...)
{
    va_list ap;
    fputs("\r\033[K", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    p->shown = 1;
}

void cli_progress_clear(cli_progress *p)
{
    if (p->shown)
        fputs("\r\033[K", stderr);
    p->shown = 0;
}

void cli_progress_keep(cli_progress *p)
{
    if (p->shown)
        fputc('\n', stderr);
    p->shown = 0;
}
