/* json_file.c: read a JSON file as Python's json module writes it (bare NaN/Infinity allowed). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases_internal.h"

#define MOECTS__MAX_JSON (64u << 20) /* bigger than any config, regression or results file */

int moects__fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
        moects__oneline(err);
    }
    return -1;
}

void moects__oneline(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

int moects__copy(char *dst, size_t n, const char *src)
{
    size_t len = strlen(src);
    if (len >= n) {
        memcpy(dst, src, n - 1);
        dst[n - 1] = '\0';
        return -1;
    }
    memcpy(dst, src, len + 1);
    return 0;
}

typedef struct {
    int line;     /* 1-based line of the replacement */
    long newcol;  /* 1-based column just after "null" in the rewritten text */
    long delta;   /* length change: 4 - token length */
} moects__subst;

static int is_word(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '+' || c == '-';
}

/* Rewrite bare NaN / Infinity / -Infinity outside strings as null. */
static char *rewrite_nonfinite(const char *in, size_t n, size_t *outn, moects__subst **subs, size_t *nsubs)
{
    char *out = malloc(n + n / 3 + 16); /* each NaN grows by 1 char: at most n/3 of them */
    size_t cap = 0;
    *subs = NULL;
    *nsubs = 0;
    if (!out) return NULL;
    size_t o = 0;
    int in_str = 0, esc = 0, line = 1;
    long col = 1; /* column in the rewritten text */
    for (size_t i = 0; i < n;) {
        char c = in[i];
        if (in_str) {
            if (esc) esc = 0;
            else if (c == '\\') esc = 1;
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == 'N' || c == 'I' || c == '-') {
            static const char *const toks[] = {"NaN", "Infinity", "-Infinity"};
            int hit = -1;
            for (int t = 0; t < 3 && hit < 0; t++) {
                size_t L = strlen(toks[t]);
                if (i + L <= n && !memcmp(in + i, toks[t], L) && (i + L == n || !is_word(in[i + L])) &&
                    (i == 0 || !is_word(in[i - 1])))
                    hit = t;
            }
            if (hit >= 0) {
                size_t L = strlen(toks[hit]);
                if (*nsubs == cap) {
                    cap = cap ? 2 * cap : 16;
                    moects__subst *s = realloc(*subs, cap * sizeof *s);
                    if (!s) {
                        free(out);
                        free(*subs);
                        *subs = NULL;
                        return NULL;
                    }
                    *subs = s;
                }
                memcpy(out + o, "null", 4);
                o += 4;
                col += 4;
                (*subs)[(*nsubs)++] = (moects__subst){line, col, 4 - (long)L};
                i += L;
                continue;
            }
        }
        out[o++] = c;
        if (c == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
        i++;
    }
    out[o] = '\0';
    *outn = o;
    return out;
}

json_t *moects__json_load_file(const char *path, int strict, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        moects__fail(err, errlen, "%s: unreadable file: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            if (cap >= MOECTS__MAX_JSON) break;
            char *b = realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int rerr = ferror(f);
    fclose(f);
    if (!buf) {
        moects__fail(err, errlen, "%s: unreadable file: out of memory", path);
        return NULL;
    }
    if (rerr || n == cap) {
        free(buf);
        moects__fail(err, errlen, "%s: unreadable file: %s", path, rerr ? "read error" : "larger than 64 MiB");
        return NULL;
    }
    size_t tn = 0, nsubs = 0;
    moects__subst *subs = NULL;
    char *text = rewrite_nonfinite(buf, n, &tn, &subs, &nsubs);
    free(buf);
    if (!text) {
        moects__fail(err, errlen, "%s: unreadable file: out of memory", path);
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(text, tn, strict ? JSON_REJECT_DUPLICATES : 0, &je);
    free(text);
    if (!root) {
        long col = je.column;
        for (size_t s = 0; s < nsubs; s++)
            if (subs[s].line == je.line && subs[s].newcol <= je.column) col -= subs[s].delta;
        free(subs);
        moects__fail(err, errlen, "%s:%d:%ld: malformed JSON: %s", path, je.line, col, je.text);
        return NULL;
    }
    free(subs);
    if (!json_is_object(root)) {
        json_decref(root);
        moects__fail(err, errlen, "%s: (root): not a JSON object", path);
        return NULL;
    }
    return root;
}
