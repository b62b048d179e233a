/* gmtf-extract: data, extended attributes and messages of the image
 * being extracted (extract.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "extract.h"

void xsrc_error(xsrc *x, const char *path, const char *fmt, ...)
{
    char msg[1024], q[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_progress_printf(&x->line, "%s: %s: %s\n", x->prog,
                        *path ? xsrc_quote(path, q, sizeof q) : ".", msg);
    x->errors++;
}

static int64_t seek(xsrc *x, uint64_t ino, uint64_t off, int whence)
{
    return gmtf_fs_lseek(x->fs, ino, (int64_t)off, whence);
}

int xsrc_ranges(xsrc *x, uint64_t ino, uint64_t size, uint64_t **ranges, size_t *n)
{
    size_t cap = 8, k = 0;
    uint64_t *r = malloc(cap * sizeof *r), off = 0;
    if (!r)
        return -ENOMEM;
    while (off < size) {
        int64_t d = seek(x, ino, off, SEEK_DATA);
        if (d == -ENXIO)
            break; /* a hole to the end */
        if (d < 0) {
            free(r);
            return (int)d;
        }
        int64_t h = seek(x, ino, (uint64_t)d, SEEK_HOLE);
        if (h < 0 || (uint64_t)h > size)
            h = (int64_t)size;
        if (h <= d)
            break;
        if (k + 2 > cap) {
            uint64_t *more = realloc(r, 2 * cap * sizeof *r);
            if (!more) {
                free(r);
                return -ENOMEM;
            }
            r = more;
            cap *= 2;
        }
        r[k++] = (uint64_t)d;
        r[k++] = (uint64_t)(h - d);
        off = (uint64_t)h;
    }
    *ranges = r;
    *n = k / 2;
    return 0;
}

int xsrc_data(xsrc *x, uint64_t ino, uint64_t size, const char *path, xdata_fn fn, void *arg)
{
    uint64_t *r;
    size_t n;
    int rc = xsrc_ranges(x, ino, size, &r, &n);
    if (rc) {
        xsrc_error(x, path, "finding its data: %s", strerror(-rc));
        return rc;
    }
    uint64_t data = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        uint64_t off = r[2 * i], end = off + r[2 * i + 1];
        data += end - off;
        while (off < end && !rc) {
            size_t want = end - off < XSRC_BUF ? (size_t)(end - off) : XSRC_BUF;
            long got = gmtf_fs_read(x->fs, ino, x->buf, want, off);
            if (got <= 0) {
                rc = got < 0 ? (int)got : -EIO;
                xsrc_error(x, path, "reading at %llu: %s", (unsigned long long)off,
                           got < 0 ? strerror((int)-got) : "the file is shorter than its size");
                break;
            }
            rc = fn(arg, x->buf, (size_t)got, off);
            off += (uint64_t)got;
            __atomic_add_fetch(&x->bytes, (uint64_t)got, __ATOMIC_RELAXED);
        }
    }
    if (!rc && size > data) /* the holes count as done too */
        __atomic_add_fetch(&x->bytes, size - data, __ATOMIC_RELAXED);
    free(r);
    return rc;
}

void xattrs_free(xattrs *a)
{
    for (size_t i = 0; i < a->count; i++)
        free(a->value[i]);
    free(a->names);
    free(a->name);
    free(a->value);
    free(a->size);
    memset(a, 0, sizeof *a);
}

int xsrc_xattrs(xsrc *x, uint64_t ino, xattrs *a)
{
    memset(a, 0, sizeof *a);
    long len = gmtf_fs_listxattr(x->fs, ino, NULL, 0);
    if (len <= 0)
        return (int)len;
    a->names = malloc((size_t)len + 1);
    if (!a->names)
        return -ENOMEM;
    len = gmtf_fs_listxattr(x->fs, ino, a->names, (size_t)len);
    if (len < 0) {
        xattrs_free(a);
        return (int)len;
    }
    a->names[len] = 0;
    a->names_len = (size_t)len;
    size_t count = 0;
    for (long i = 0; i < len; i++)
        count += a->names[i] == 0;
    a->name = calloc(count + 1, sizeof *a->name);
    a->value = calloc(count + 1, sizeof *a->value);
    a->size = calloc(count + 1, sizeof *a->size);
    if (!a->name || !a->value || !a->size) {
        xattrs_free(a);
        return -ENOMEM;
    }
    for (char *k = a->names; k < a->names + len && a->count < count; k += strlen(k) + 1) {
        long v = gmtf_fs_getxattr(x->fs, ino, k, NULL, 0);
        uint8_t *val = v >= 0 ? malloc((size_t)v + 1) : NULL;
        if (val)
            v = gmtf_fs_getxattr(x->fs, ino, k, val, (size_t)v);
        if (v < 0 || !val) {
            free(val);
            int rc = v < 0 ? (int)v : -ENOMEM;
            xattrs_free(a);
            return rc;
        }
        a->name[a->count] = k;
        a->value[a->count] = val;
        a->size[a->count++] = (size_t)v;
    }
    return 0;
}

/* Length of the valid UTF-8 sequence of a printable character at s, or 0. */
static int utf8_len(const unsigned char *s)
{
    if (s[0] >= 0x20 && s[0] < 0x7f)
        return 1;
    int n = s[0] >= 0xc2 && s[0] <= 0xdf   ? 2
            : s[0] >= 0xe0 && s[0] <= 0xef ? 3
            : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                           : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if (n == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0)))
        return 0; /* overlong, surrogate */
    if (n == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90)))
        return 0;
    if (n == 2 && s[0] == 0xc2 && s[1] < 0xa0)
        return 0; /* C1 controls */
    return n;
}

const char *xsrc_quote(const char *name, char *buf, size_t cap)
{
    const unsigned char *s = (const unsigned char *)name;
    size_t k = 0;
    while (*s && k + 5 < cap) {
        int n = *s == '\\' ? 0 : utf8_len(s);
        if (n) {
            memcpy(buf + k, s, (size_t)n);
            k += (size_t)n;
            s += n;
            continue;
        }
        const char *e = *s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : *s == '\t' ? "\\t" : NULL;
        if (e)
            k += (size_t)snprintf(buf + k, cap - k, "%s", e);
        else
            k += (size_t)snprintf(buf + k, cap - k, "\\%03o", *s);
        s++;
    }
    buf[k] = 0;
    return buf;
}
