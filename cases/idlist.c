/* idlist.c: read a case-id list (cases/mustpass/ *.txt): one id per line, '#' comments. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases_internal.h"
#include "moects_cases.h"

void moects__idlist_free(char **ids, size_t n)
{
    for (size_t i = 0; i < n; i++) free(ids[i]);
    free(ids);
}

int moects__idlist_load(const char *path, char ***ids, char *err, size_t errlen)
{
    *ids = NULL;
    const int in = !strcmp(path, "-"); /* standard input: `moects list ... | moects run --cases -` */
    FILE *f = in ? stdin : fopen(path, "r");
    const char *name = in ? "standard input" : path;
    if (!f) return moects__fail(err, errlen, "%s: unreadable file: %s", name, strerror(errno));
    char **v = NULL;
    size_t n = 0, cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    int lineno = 0, rc = 0;
    ssize_t len;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        if (strlen(line) != (size_t)len) { /* an id cut at a NUL byte would read as another id */
            rc = moects__fail(err, errlen, "%s:%d: NUL byte in the line", name, lineno);
            break;
        }
        char *h = strchr(line, '#');
        if (h) *h = '\0';
        char *s = line;
        if (lineno == 1 && !strncmp(s, "\xEF\xBB\xBF", 3)) s += 3; /* a UTF-8 byte order mark (Windows editors) */
        while (*s == ' ' || *s == '\t') s++;
        char *e = s + strlen(s);
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) *--e = '\0';
        if (!*s) continue;
        if (strpbrk(s, " \t")) {
            rc = moects__fail(err, errlen, "%s:%d: blank inside a case id: \"%s\"", name, lineno, s);
            break;
        }
        if ((size_t)(e - s) >= sizeof(((moects_case *)0)->id)) {
            rc = moects__fail(err, errlen, "%s:%d: case id too long (max %zu)", name, lineno,
                              sizeof(((moects_case *)0)->id) - 1);
            break;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nv = realloc(v, cap * sizeof *nv);
            if (!nv) {
                rc = moects__fail(err, errlen, "%s: out of memory", name);
                break;
            }
            v = nv;
        }
        if (!(v[n] = strdup(s))) {
            rc = moects__fail(err, errlen, "%s: out of memory", name);
            break;
        }
        n++;
    }
    if (!rc && ferror(f)) rc = moects__fail(err, errlen, "%s: unreadable file: read error", name);
    free(line);
    if (!in) fclose(f);
    if (rc) {
        moects__idlist_free(v, n);
        return -1;
    }
    *ids = v;
    return (int)n;
}
