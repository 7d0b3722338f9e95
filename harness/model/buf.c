/* buf.c: the text buffer reports are built in (moects__buf, reports_internal.h): appending, JSON,
 * HTML and Markdown escaping, atomic writes. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cases_internal.h"
#include "reports_internal.h"

static void buf_reserve(moects__buf *b, size_t more)
{
    if (b->oom) return;
    if (b->n + more + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + more + 1) cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = 1;
        return;
    }
    b->s = s;
    b->cap = cap;
}

void moects__buf_addn(moects__buf *b, const char *s, size_t n)
{
    buf_reserve(b, n);
    if (b->oom) return;
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

void moects__buf_add(moects__buf *b, const char *s) { moects__buf_addn(b, s, strlen(s)); }

void moects__buf_printf(moects__buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    buf_reserve(b, (size_t)n);
    if (b->oom) return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

void moects__buf_json_str(moects__buf *b, const char *s)
{
    moects__buf_add(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"') moects__buf_add(b, "\\\"");
        else if (*p == '\\') moects__buf_add(b, "\\\\");
        else if (*p == '\n') moects__buf_add(b, "\\n");
        else if (*p == '\t') moects__buf_add(b, "\\t");
        else if (*p < 0x20 || *p == 0x7f) moects__buf_printf(b, "\\u%04x", *p);
        else moects__buf_addn(b, (const char *)p, 1);
    }
    moects__buf_add(b, "\"");
}

void moects__buf_html(moects__buf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': moects__buf_add(b, "&amp;"); break;
        case '<': moects__buf_add(b, "&lt;"); break;
        case '>': moects__buf_add(b, "&gt;"); break;
        case '"': moects__buf_add(b, "&quot;"); break;
        case '\'': moects__buf_add(b, "&#39;"); break;
        default: moects__buf_addn(b, s, 1);
        }
    }
}

void moects__buf_md(moects__buf *b, const char *s)
{
    for (; *s; s++) {
        if (strchr("\\`*_[]<>|#", *s)) {
            moects__buf_add(b, "\\");
            moects__buf_addn(b, s, 1);
        } else if (*s == '\n' || *s == '\r') {
            moects__buf_add(b, " ");
        } else {
            moects__buf_addn(b, s, 1);
        }
    }
}

void moects__buf_md_code(moects__buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '`') moects__buf_add(b, "'");
        else if (*s == '\n' || *s == '\r') moects__buf_add(b, " ");
        else moects__buf_addn(b, s, 1);
    }
}

void moects__buf_free(moects__buf *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

int moects__buf_write(const moects__buf *b, const char *path, char *err, size_t errlen)
{
    return moects__buf_stage(b, NULL, path, err, errlen);
}

int moects__buf_stage(const moects__buf *b, moects_report_set *set, const char *path, char *err, size_t errlen)
{
    if (b->oom) {
        snprintf(err, errlen, "%s: out of memory building the file", path);
        return -1;
    }
    return set ? moects__report_stage(set, path, b->s ? b->s : "", b->n, err, errlen)
               : moects__write_file_atomic(path, b->s ? b->s : "", b->n, err, errlen);
}
