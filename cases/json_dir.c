/* json_dir.c: the .json files of a directory, in file-name order (registry and regression dirs). */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cases_internal.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int moects__json_names(const char *dir, char ***names, size_t *n, char *err, size_t errlen)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return moects__fail(err, errlen, "%s: unreadable directory: %s", dir, strerror(errno));
    char **v = NULL;
    size_t nv = 0, cap = 0;
    int oom = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t L = strlen(e->d_name);
        if (L < 6 || strcmp(e->d_name + L - 5, ".json") || e->d_name[0] == '.') continue;
        if (nv == cap) {
            cap = cap ? 2 * cap : 32;
            char **nn = realloc(v, cap * sizeof *nn);
            if (!nn) {
                oom = 1;
                break;
            }
            v = nn;
        }
        if (!(v[nv] = strdup(e->d_name))) {
            oom = 1;
            break;
        }
        nv++;
    }
    closedir(d);
    if (oom) {
        moects__names_free(v, nv);
        return moects__fail(err, errlen, "%s: out of memory", dir);
    }
    if (nv) qsort(v, nv, sizeof *v, cmp_str); /* qsort(NULL, 0, ...) is undefined (UBSan) */
    *names = v;
    *n = nv;
    return 0;
}

void moects__names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}
