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

int cli_parse_threads(const char *prog, const char *s, unsigned *out)
{
    int rc = cli_parse_uint(s, 1, 1024, out);
    if (rc < 0)
        fprintf(stderr, "%s: -j %s: not a thread count (1..1024)\n", prog, s);
    return rc;
}

int cli_check_gpus(const char *prog, const char *opt, const char *list)
{
    const char *what = opt;
    if (!list) {
        list = getenv("GMTF_GPUS");
        what = "GMTF_GPUS";
        if (!list || !*list)
            return 0;
    }
    if (gmtf_codec_gpus_check(list) == 0)
        return 0;
    fprintf(stderr,
            "%s: %s=%s: not a GPU list (all, or device numbers 0..15 separated by commas "
            "or colons, none twice)\n",
            prog, what, list);
    return -1;
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

double cli_ratio(uint64_t bytes, uint64_t stored)
{
    return stored ? (double)bytes / (double)stored : 0.0;
}

void cli_uuid_string(const uint8_t u[16], char out[37])
{
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
             u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}

char *cli_name_utf8(const char *name)
{
    size_t n = strlen(name);
    char *out = malloc(4 * n + 1), *o = out;
    const unsigned char *s = (const unsigned char *)name;
    while (out && *s) {
        int len = *s < 0x80                  ? 1
                  : *s >= 0xc2 && *s <= 0xdf ? 2
                  : *s >= 0xe0 && *s <= 0xef ? 3
                  : *s >= 0xf0 && *s <= 0xf4 ? 4
                                             : 0;
        for (int i = 1; i < len; i++)
            if ((s[i] & 0xc0) != 0x80)
                len = 0;
        if ((len == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) ||
            (len == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))))
            len = 0; /* overlong, surrogates, past U+10FFFF */
        if (*s == '\\') {
            *o++ = '\\';
            *o++ = '\\';
            s++;
        } else if (len) {
            memcpy(o, s, (size_t)len);
            o += len;
            s += len;
        } else {
            o += sprintf(o, "\\x%02x", *s++);
        }
    }
    if (out)
        *o = 0;
    return out;
}

double cli_select_f64(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n; /* the k-th lies in v[lo..hi) */
    while (hi - lo > 1) {
        double a = v[lo], b = v[lo + (hi - lo) / 2], m = v[hi - 1];
        double p = a < b ? (b < m ? b : (a < m ? m : a)) : (a < m ? a : (b < m ? m : b));
        size_t lt = lo, i = lo, gt = hi; /* [lo,lt) < p, [lt,i) == p, [gt,hi) > p */
        while (i < gt) {
            double x = v[i];
            if (x < p) {
                v[i++] = v[lt];
                v[lt++] = x;
            } else if (x > p) {
                v[i] = v[--gt];
                v[gt] = x;
            } else {
                i++;
            }
        }
        if (k < lt)
            hi = lt;
        else if (k >= gt)
            lo = gt;
        else
            return p;
    }
    return v[lo];
}

/* ---- progress ------------------------------------------------------------ */

double cli_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static double plain_interval(void)
{
    const char *e = getenv("GMTF_PROGRESS_INTERVAL");
    char *end;
    double v = e ? strtod(e, &end) : 0;
    return e && end != e && !*end && v >= 0.1 && v <= 86400 ? v : 10.0;
}

void cli_progress_init(cli_progress *p, const char *prog, int quiet, int plain)
{
    memset(p, 0, sizeof *p);
    p->prog = prog;
    p->mode = quiet                   ? CLI_PROGRESS_OFF
              : isatty(STDERR_FILENO) ? CLI_PROGRESS_LINE
              : plain                 ? CLI_PROGRESS_PLAIN
                                      : CLI_PROGRESS_OFF;
    p->interval = p->mode == CLI_PROGRESS_PLAIN ? plain_interval() : 0.25;
    p->start = p->last = cli_now();
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
}

int cli_progress_due(cli_progress *p, int force)
{
    if (p->mode == CLI_PROGRESS_OFF)
        return 0;
    double now = cli_now();
    pthread_mutex_lock(&p->lock);
    int due = force || now - p->last >= p->interval;
    if (due)
        p->last = now;
    pthread_mutex_unlock(&p->lock);
    return due;
}

static void show_locked(cli_progress *p, const char *text)
{
    if (p->mode == CLI_PROGRESS_LINE) {
        fprintf(stderr, "\r\033[K%s", text);
        p->shown = 1;
    } else if (p->mode == CLI_PROGRESS_PLAIN) {
        fprintf(stderr, "%s: %s\n", p->prog, text);
    }
    fflush(stderr);
}

void cli_progress_show(cli_progress *p, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&p->lock);
    show_locked(p, text);
    pthread_mutex_unlock(&p->lock);
}

const char *cli_count(uint64_t v, char *buf)
{
    char digits[24];
    int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v), k = 0;
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0)
            buf[k++] = ',';
        buf[k++] = digits[i];
    }
    buf[k] = 0;
    return buf;
}

static void duration(double s, char *buf, size_t cap)
{
    long t = s < 0 ? 0 : s > 359999 ? 359999 : (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
}

void cli_progress_work(cli_progress *p, const cli_work *w, int final)
{
    if (p->mode == CLI_PROGRESS_OFF)
        return;
    char text[512], a[32], b[32];
    size_t n = 0;
    double el = cli_now() - p->start;
#define PUT(...) n += (size_t)snprintf(text + n, n < sizeof text ? sizeof text - n : 0, __VA_ARGS__)
    if (w->what)
        PUT("%s: ", w->what);
    if (w->total) {
        double f = (double)w->done / (double)w->total;
        PUT("%.0f%%", f > 1 ? 100.0 : 100.0 * f);
        if (final) {
            duration(el, a, sizeof a);
            PUT(" in %s", a);
        } else if (f > 0.001 && f < 1 && el > 1) {
            duration(el * (1 / f - 1), a, sizeof a);
            PUT(" (ETA %s)", a);
        }
        PUT(", ");
    } else if (final) {
        duration(el, a, sizeof a);
        PUT("done in %s, ", a);
    }
    const char *unit = w->unit ? w->unit : "files";
    if (w->files_total)
        PUT("%s/%s %s, ", cli_count(w->files, a), cli_count(w->files_total, b), unit);
    else if (w->files)
        PUT("%s %s, ", cli_count(w->files, a), unit);
    if (w->bytes_total)
        PUT("%.1f/%.1f MB", w->bytes / 1e6, w->bytes_total / 1e6);
    else if (w->bytes)
        PUT("%.1f MB", w->bytes / 1e6);
    if (w->bytes || w->bytes_total)
        PUT(" at %.1f MB/s", el > 0 ? w->bytes / el / 1e6 : 0.0);
    else if (n >= 2 && n < sizeof text && text[n - 2] == ',')
        text[n -= 2] = 0; /* no ", " before nothing */
    if (w->stored)
        PUT(", %.1f MB stored (ratio %.2f)", w->stored / 1e6,
            cli_ratio(w->stored_of ? w->stored_of : w->bytes, w->stored));
    if (w->note)
        PUT(" (%s)", w->note);
#undef PUT
    pthread_mutex_lock(&p->lock);
    show_locked(p, text);
    if (final && p->shown) {
        fputc('\n', stderr);
        p->shown = 0;
    }
    pthread_mutex_unlock(&p->lock);
}

void cli_progress_clear(cli_progress *p)
{
    pthread_mutex_lock(&p->lock);
    if (p->shown)
        fputs("\r\033[K", stderr);
    p->shown = 0;
    pthread_mutex_unlock(&p->lock);
}

void cli_progress_keep(cli_progress *p)
{
    pthread_mutex_lock(&p->lock);
    if (p->shown)
        fputc('\n', stderr);
    p->shown = 0;
    pthread_mutex_unlock(&p->lock);
}

void cli_progress_printf(cli_progress *p, const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&p->lock);
    if (p->shown)
        fputs("\r\033[K", stderr);
    p->shown = 0;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&p->lock);
}

static void *progress_thread(void *arg)
{
    cli_progress *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double at = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + p->interval;
        ts.tv_sec = (time_t)at;
        ts.tv_nsec = (long)((at - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&p->wake, &p->lock, &ts);
        if (p->stopping)
            break;
        pthread_mutex_unlock(&p->lock);
        p->tick(p->tick_arg, 0);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int cli_progress_start(cli_progress *p, void (*tick)(void *arg, int final), void *arg)
{
    p->tick = tick;
    p->tick_arg = arg;
    if (p->mode == CLI_PROGRESS_OFF)
        return 0;
    int rc = pthread_create(&p->thread, NULL, progress_thread, p);
    if (rc)
        return -rc;
    p->running = 1;
    return 0;
}

void cli_progress_stop(cli_progress *p)
{
    if (p->running) {
        pthread_mutex_lock(&p->lock);
        p->stopping = 1;
        pthread_cond_signal(&p->wake);
        pthread_mutex_unlock(&p->lock);
        pthread_join(p->thread, NULL);
        p->running = 0;
    }
    if (p->tick && p->mode != CLI_PROGRESS_OFF)
        p->tick(p->tick_arg, 1);
    p->tick = NULL;
}

void cli_progress_free(cli_progress *p)
{
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
}
