/* known.c: the known-findings file (cases/known-findings.txt): parser, matcher, and the marking of
 * a run's results (moects_known.h has the format and the semantics). */
#include "moects_known.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REASON_MAX 255 /* moects_result.known holds 255 bytes and the NUL */
#define HOST_DEPENDENT "host-dependent:"

__attribute__((format(printf, 5, 6))) static int fail(char *err, size_t errlen, const char *path, int line,
                                                      const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s:%d: %s", path, line, msg);
    return -1;
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* A glob must name something: at least one character that is not * ? or a [...] set; a '[' must
 * be closed. Returns NULL when good, else the problem. */
static const char *glob_problem(const char *g)
{
    int literal = 0;
    for (const char *p = g; *p; p++) {
        if (*p == '*' || *p == '?') continue;
        if (*p == '\\' && p[1]) {
            literal = 1;
            p++;
            continue;
        }
        if (*p == '[') {
            const char *q = p + 1;
            if (*q == '!' || *q == '^') q++;
            if (*q == ']') q++; /* "[]...]": ']' first is a member */
            while (*q && *q != ']') q++;
            if (!*q) return "unclosed '['";
            p = q;
            continue;
        }
        literal = 1;
    }
    return literal ? NULL : "matches everything (a blanket): name the class of cases";
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

void moects__known_free(moects_known *kf)
{
    for (size_t i = 0; i < kf->n; i++) {
        free(kf->v[i].kernel_glob);
        free(kf->v[i].case_glob);
        free(kf->v[i].reason);
    }
    free(kf->v);
    kf->v = NULL;
    kf->n = 0;
}

/* One line (without its newline) into kf; 0 or -1 with err. */
static int parse_line(const char *s, size_t len, const char *path, int line, moects_known *kf, size_t *cap,
                      char *err, size_t errlen)
{
    const char *e = s + len;
    while (s < e && is_blank(*s)) s++;
    while (e > s && is_blank(e[-1])) e--;
    if (s == e || *s == '#') return 0;
    for (const char *p = s; p < e; p++)
        if (*p == '\0' || ((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f) /* DEL: fuzz/crashes/known */
            return fail(err, errlen, path, line, "control character in the line");
    const char *f[2];
    size_t fl[2];
    const char *p = s;
    for (int i = 0; i < 2; i++) {
        if (p == e) return fail(err, errlen, path, line, i == 1 ? "missing CASE_GLOB (want: KERNEL_GLOB CASE_GLOB reason...)" : "empty entry");
        f[i] = p;
        while (p < e && !is_blank(*p)) p++;
        fl[i] = (size_t)(p - f[i]);
        while (p < e && is_blank(*p)) p++;
    }
    if (p == e) return fail(err, errlen, path, line, "missing reason (want: KERNEL_GLOB CASE_GLOB reason...)");
    size_t rl = (size_t)(e - p);
    if (rl > REASON_MAX) return fail(err, errlen, path, line, "reason longer than %d bytes", REASON_MAX);
    if (kf->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 8;
        moects_known_entry *v = realloc(kf->v, nc * sizeof *v);
        if (!v) return fail(err, errlen, path, line, "out of memory");
        kf->v = v;
        *cap = nc;
    }
    moects_known_entry *en = &kf->v[kf->n];
    en->kernel_glob = dup_n(f[0], fl[0]);
    en->case_glob = dup_n(f[1], fl[1]);
    en->reason = dup_n(p, rl);
    en->line = line;
    if (!en->kernel_glob || !en->case_glob || !en->reason) {
        free(en->kernel_glob), free(en->case_glob), free(en->reason);
        return fail(err, errlen, path, line, "out of memory");
    }
    kf->n++; /* owned by kf from here: freed with it on a later error */
    const char *why;
    if ((why = glob_problem(en->kernel_glob)))
        return fail(err, errlen, path, line, "KERNEL_GLOB \"%s\": %s", en->kernel_glob, why);
    if ((why = glob_problem(en->case_glob)))
        return fail(err, errlen, path, line, "CASE_GLOB \"%s\": %s", en->case_glob, why);
    for (size_t i = 0; i + 1 < kf->n; i++)
        if (!strcmp(kf->v[i].kernel_glob, en->kernel_glob) && !strcmp(kf->v[i].case_glob, en->case_glob))
            return fail(err, errlen, path, line, "same KERNEL_GLOB and CASE_GLOB as line %d", kf->v[i].line);
    return 0;
}

int moects__known_parse(const char *text, const char *path, moects_known *kf, char *err, size_t errlen)
{
    memset(kf, 0, sizeof *kf);
    size_t cap = 0;
    int line = 0;
    for (const char *s = text; *s;) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        if (parse_line(s, len, path, ++line, kf, &cap, err, errlen)) {
            moects__known_free(kf);
            return -1;
        }
        s += len + (nl != NULL);
    }
    return 0;
}

int moects__known_load(const char *path, moects_known *kf, char *err, size_t errlen)
{
    memset(kf, 0, sizeof *kf);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return 0;
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    char *text = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (cap - n < 4096) {
            size_t nc = cap ? 2 * cap : 8192;
            char *t = realloc(text, nc);
            if (!t) {
                snprintf(err, errlen, "%s: out of memory", path);
                rc = -1;
                break;
            }
            text = t;
            cap = nc;
        }
        size_t got = fread(text + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
                rc = -1;
            }
            break;
        }
    }
    fclose(f);
    if (rc == 0) {
        text[n] = '\0';
        if (strlen(text) != n) {
            /* a NUL byte: name its line */
            int line = 1;
            for (size_t i = 0, z = strlen(text); i < z; i++) line += text[i] == '\n';
            rc = fail(err, errlen, path, line, "NUL byte in the line");
        } else {
            rc = moects__known_parse(text, path, kf, err, errlen);
        }
    }
    free(text);
    return rc;
}

int moects__known_check_cases(const moects_known *kf, const char *path, const moects_case_list *all, char *err,
                             size_t errlen)
{
    for (size_t i = 0; i < kf->n; i++) {
        int hit = 0;
        for (size_t c = 0; c < all->n && !hit; c++) hit = fnmatch(kf->v[i].case_glob, all->v[c].id, 0) == 0;
        if (!hit)
            return fail(err, errlen, path, kf->v[i].line, "CASE_GLOB \"%s\" matches no registered case",
                        kf->v[i].case_glob);
    }
    return 0;
}

const moects_known_entry *moects__known_match(const moects_known *kf, const char *kernel, const char *case_id)
{
    for (size_t i = 0; kf && i < kf->n; i++)
        if (fnmatch(kf->v[i].kernel_glob, kernel, 0) == 0 && fnmatch(kf->v[i].case_glob, case_id, 0) == 0)
            return &kf->v[i];
    return NULL;
}

int moects__known_mark(const moects_known *kf, moects_result *r)
{
    r->known[0] = '\0';
    if (r->is_mutant || !(moects_verdict_is_fail(r->verdict) || moects_verdict_is_pass(r->verdict))) return 0;
    const moects_known_entry *e = moects__known_match(kf, r->kernel, r->case_id);
    if (!e || (moects_verdict_is_pass(r->verdict) && !strncmp(e->reason, HOST_DEPENDENT, strlen(HOST_DEPENDENT))))
        return 0; /* a host-dependent finding that did not occur on this host is not "fixed?" */
    snprintf(r->known, sizeof r->known, "%s", e->reason);
    return moects_verdict_is_fail(r->verdict);
}

size_t moects__known_apply(const moects_known *kf, moects_run *run)
{
    size_t marked = 0;
    for (size_t i = 0; i < run->n; i++) marked += (size_t)moects__known_mark(kf, &run->v[i]);
    return marked;
}
