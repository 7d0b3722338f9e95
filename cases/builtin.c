/* builtin.c: the built-in case registry: every model under <root>/cases/models, derived under every
 * layout, then every file under <root>/cases/regressions, both in file-name order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases_internal.h"
#include "moects_cases.h"

static int cmp_idx(const void *a, const void *b, void *v)
{
    const moects_case *c = v;
    return strcmp(c[*(const size_t *)a].id, c[*(const size_t *)b].id);
}

static int load_regressions(const char *dir, moects_case_list *out, char *err, size_t errlen)
{
    char **names;
    size_t n;
    if (moects__json_names(dir, &names, &n, err, errlen)) return -1;
    int rc = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= sizeof path)
            rc = moects__fail(err, errlen, "%s/%s: path too long", dir, names[i]);
        else
            rc = moects__regressions_load(path, out, err, errlen);
    }
    moects__names_free(names, n);
    return rc;
}

int moects__cases_builtin(const char *root, moects_case_list *out, char *err, size_t errlen)
{
    char dir[4096];
    size_t first = out->n;
    snprintf(dir, sizeof dir, "%s/cases/models", root);
    moects_model *models = NULL;
    int nm = moects__models_load_dir(dir, &models, err, errlen);
    if (nm < 0) return -1;
    int rc = 0;
    for (int i = 0; !rc && i < nm; i++) {
        /* cases/models/NAME.json must be named after its model (ids use the name). */
        char want[80];
        snprintf(want, sizeof want, "%s.json", models[i].name);
        if (strcmp(models[i].file, want)) rc = moects__fail(err, errlen, "%s/%s: name: model \"%s\" must be in a file named %s", dir,
                                      models[i].file, models[i].name, want);
        if (!rc && !strcmp(models[i].name, "regression"))
            rc = moects__fail(err, errlen, "%s/%s: name: \"regression\" is reserved for cases/regressions", dir, want);
        for (int j = 0; !rc && j < i; j++)
            if (!strcmp(models[i].name, models[j].name))
                rc = moects__fail(err, errlen, "%s: name: two files hold model \"%s\": %s and %s", dir, models[i].name,
                                  models[j].file, models[i].file);
        if (!rc && moects__derive_cases(&models[i], out))
            rc = moects__fail(err, errlen, "%s/%s: cannot derive cases (bad dims or out of memory)", dir, want);
    }
    free(models);
    if (!rc) {
        snprintf(dir, sizeof dir, "%s/cases/regressions", root);
        rc = load_regressions(dir, out, err, errlen);
    }
    /* Ids are the suite's keys: no two cases may share one. */
    size_t n = out->n - first;
    size_t *ix = rc ? NULL : malloc((n ? n : 1) * sizeof *ix);
    if (!rc && !ix) rc = moects__fail(err, errlen, "%s: out of memory", root);
    if (!rc) {
        for (size_t i = 0; i < n; i++) ix[i] = first + i;
        qsort_r(ix, n, sizeof *ix, cmp_idx, out->v);
        for (size_t i = 1; i < n && !rc; i++)
            if (!strcmp(out->v[ix[i]].id, out->v[ix[i - 1]].id))
                rc = moects__fail(err, errlen, "case id %s: duplicate (from %s and from %s)", out->v[ix[i]].id,
                                  out->v[ix[i - 1]].source, out->v[ix[i]].source);
    }
    free(ix);
    if (rc) out->n = first;
    return rc ? -1 : 0;
}
