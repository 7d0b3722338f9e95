/* select.c: the one rule that picks cases from a list by globs, tiers and must-pass lists, used by
 * `moects list` and `moects run`, libmoects (moects_cases_select) and, through it, the Python
 * package and its pytest plugin (cases/moects_cases.h, moects__cases_pick). */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases_internal.h"
#include "moects_cases.h"

int moects__tiers_parse(const char *s, unsigned *out)
{
    char buf[256];
    *out = 0;
    if (!s || !*s || strlen(s) >= sizeof buf) return -1;
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        moects_tier v;
        if (!strcmp(t, "all")) *out |= MOECTS_TIER_SMOKE | MOECTS_TIER_FULL | MOECTS_TIER_LARGE | MOECTS_TIER_LOCAL;
        else if (moects__tier_parse(t, &v) == 0) *out |= (unsigned)v;
        else return -1;
    }
    return *out ? 0 : -1;
}

static int is_glob(const char *s) { return strpbrk(s, "*?[") != NULL; }

static int cmp_id(const void *a, const void *b, void *ctx)
{
    const moects_case *c = ctx;
    return strcmp(c[*(const size_t *)a].id, c[*(const size_t *)b].id);
}

/* Index of the case with this exact id in all (ix: all's indices sorted by id), or -1. */
static long find_id(const moects_case_list *all, const size_t *ix, const char *id)
{
    size_t lo = 0, hi = all->n;
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        const int c = strcmp(all->v[ix[mid]].id, id);
        if (!c) return (long)ix[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

static int push_missing(char ***v, size_t *n, const char *id)
{
    char *d = strdup(id), **nv = d ? realloc(*v, (*n + 1) * sizeof *nv) : NULL;
    if (!nv) return free(d), -1;
    nv[(*n)++] = d;
    *v = nv;
    return 0;
}

/* One must-pass list's entries into sel (an exact id whatever its tier; a glob within s's tiers when
 * given); entries that select nothing go to *missing. */
static int pick_list(const moects_case_list *all, const size_t *ix, const moects_selection *s, const char *path,
                     char *sel, char ***missing, size_t *nmissing, char *err, size_t errlen)
{
    char **ids = NULL, e[512];
    const int k = moects__idlist_load(path, &ids, e, sizeof e);
    if (k < 0) return moects__fail(err, errlen, "--cases %s", e);
    if (k == 0) /* a must-pass list that lists nothing is a mistake, not a pass */
        return moects__idlist_free(ids, 0), moects__fail(err, errlen, "--cases %s: no case ids", path);
    int rc = 0;
    for (int i = 0; i < k && !rc; i++) {
        int hit = 0;
        if (is_glob(ids[i])) {
            for (size_t c = 0; c < all->n; c++)
                if (fnmatch(ids[i], all->v[c].id, 0) == 0 && (!s->tier_given || (all->v[c].tiers & s->tiers)))
                    sel[c] = 1, hit = 1;
        } else {
            const long c = find_id(all, ix, ids[i]);
            if (c >= 0) sel[c] = 1, hit = 1;
        }
        if (!hit && push_missing(missing, nmissing, ids[i])) rc = moects__fail(err, errlen, "out of memory");
    }
    moects__idlist_free(ids, (size_t)k);
    return rc;
}

/* Must-pass lists: their entries, narrowed by positional globs. */
static int pick_lists(const moects_case_list *all, const moects_selection *s, char *sel, char ***missing,
                      size_t *nmissing, char *err, size_t errlen)
{
    size_t *ix = malloc((all->n ? all->n : 1) * sizeof *ix);
    if (!ix) return moects__fail(err, errlen, "out of memory");
    for (size_t i = 0; i < all->n; i++) ix[i] = i;
    qsort_r(ix, all->n, sizeof *ix, cmp_id, all->v);
    int rc = 0;
    for (size_t f = 0; f < s->ncase_files && !rc; f++)
        rc = pick_list(all, ix, s, s->case_files[f], sel, missing, nmissing, err, errlen);
    free(ix);
    for (size_t c = 0; c < all->n && !rc && s->nglobs; c++) {
        int m = 0;
        for (size_t g = 0; g < s->nglobs && !m; g++) m = fnmatch(s->globs[g], all->v[c].id, 0) == 0;
        if (!m) sel[c] = 0;
    }
    return rc;
}

void moects__tiers_text(unsigned t, char *buf, size_t len)
{
    static const char *const names[] = {"smoke", "full", "large", "local"};
    size_t at = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < 4 && at < len; i++)
        if (t & (1u << i)) at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? "," : "", names[i]);
}

int moects__cases_pick(const moects_case_list *all, const moects_selection *s, char *sel, char ***missing,
                      size_t *nmissing, char *err, size_t errlen)
{
    memset(sel, 0, all->n);
    if (s->ncase_files) return pick_lists(all, s, sel, missing, nmissing, err, errlen);
    const unsigned tiers = s->tier_given ? s->tiers : MOECTS_TIER_SMOKE;
    for (size_t g = 0; g < s->nglobs; g++) {
        int hit = 0;
        for (size_t c = 0; c < all->n && !hit; c++) hit = fnmatch(s->globs[g], all->v[c].id, 0) == 0;
        if (!hit) return moects__fail(err, errlen, "no case matches \"%s\"", s->globs[g]), -2;
    }
    size_t matched = 0, chosen = 0;
    for (size_t c = 0; c < all->n; c++) {
        const moects_case *k = &all->v[c];
        int m = !s->nglobs, literal = 0;
        for (size_t g = 0; g < s->nglobs; g++)
            if (fnmatch(s->globs[g], k->id, 0) == 0) m = 1, literal |= !is_glob(s->globs[g]);
        if (!m) continue;
        matched++;
        /* a case named exactly is selected whatever its tier, unless the tiers are given */
        if ((k->tiers & tiers) || (literal && !s->tier_given)) sel[c] = 1, chosen++;
    }
    if (chosen) return 0;
    if (!all->n)
        return moects__fail(err, errlen, "no cases registered under the root (cases/models, cases/regressions)"), -3;
    char t[40];
    moects__tiers_text(tiers, t, sizeof t);
    return moects__fail(err, errlen, "%zu case%s match but none is in tier %s (use --tier full|large|local|all)", matched,
                        matched == 1 ? "" : "s", t), -3;
}
