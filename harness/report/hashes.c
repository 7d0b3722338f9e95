/* hashes.c: the tensor hash of results.json (moects__xxh64) and the work of `moects hashes A.json
 * B.json` (moects__hashes_compare, harness/reports_commands.h; its usage and arguments:
 * harness/cli/cmd_hashes.c), which checks that two runs saw the same bytes (DESIGN.md
 * "Determinism"): a case's inputs come from a counter-based generator and its reference is
 * bit-exact whatever the thread count or OpenBLAS core, so the committed H200 report and a CPU run
 * of the same cases must agree on every hash.
 *
 * moects hashes A.json B.json [--limit N]
 *   For every case both files hold with the same seed: each input tensor's XXH64 ("input NAME") and
 *   each reference's ("reference RECIPE", the recipe without a "+tol"/"+..." suffix: a tolerance
 *   kernel is compared with exact_v1's reference). Within one file, two results of one case must
 *   agree too (they share the worker's tensors; a difference means the bytes changed in one run).
 *   Prints the counts and each difference (at most --limit, default 20). Exit 0 when every hash
 *   compared agrees and at least one reference hash was compared; 1 when one differs, or nothing
 *   was compared (no common case with hashes: older files, disjoint selections, other seeds);
 *   2 bad usage or an unreadable file. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "moects_harness.h"
#include "reports_commands.h"

uint64_t moects__xxh64(const void *p, size_t len)
{
    static const char empty[1];
    return XXH64(len ? p : empty, len, 0);
}

/* One hash of one case: key "input x" or "reference fp4_gemm.blockwise_v1". */
typedef struct {
    const char *case_id;
    char key[80];
    uint64_t seed, h;
} hentry;

typedef struct {
    hentry *v;
    size_t n, cap;
} hlist;

static int hpush(hlist *l, const char *case_id, const char *kind, const char *name, size_t namelen, uint64_t seed,
                 uint64_t h)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        hentry *v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    hentry *e = &l->v[l->n++];
    e->case_id = case_id;
    snprintf(e->key, sizeof e->key, "%s %.*s", kind, (int)namelen, name);
    e->seed = seed;
    e->h = h;
    return 0;
}

static int hcmp(const void *a, const void *b)
{
    const hentry *x = a, *y = b;
    int d = strcmp(x->case_id, y->case_id);
    if (!d) d = strcmp(x->key, y->key);
    if (!d) d = (x->seed > y->seed) - (x->seed < y->seed);
    return d;
}

/* Every hash of run, sorted by (case, key, seed), duplicates dropped; a duplicate with another
 * value is printed as a difference within the file (counted in *inconsistent). 0, -1 out of memory. */
static int collect(const moects_run *run, const char *path, hlist *l, size_t *inconsistent, size_t *shown,
                   size_t limit)
{
    for (size_t i = 0; i < run->n; i++) {
        const moects_result *r = &run->v[i];
        for (int t = 0; t < r->n_hashes; t++)
            if (hpush(l, r->case_id, "input", r->hashes[t].name, strlen(r->hashes[t].name), r->seed,
                      r->hashes[t].xxh64))
                return -1;
        if (r->has_ref_hash && hpush(l, r->case_id, "reference", r->recipe, strcspn(r->recipe, "+"), r->seed,
                                     r->ref_xxh64))
            return -1;
    }
    if (l->n) qsort(l->v, l->n, sizeof *l->v, hcmp);
    size_t w = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (w && !hcmp(&l->v[w - 1], &l->v[i])) {
            if (l->v[w - 1].h != l->v[i].h && ++*inconsistent && (*shown)++ < limit)
                printf("DIFFER within %s: %s: %s: %016" PRIx64 " and %016" PRIx64 "\n", path, l->v[i].case_id,
                       l->v[i].key, l->v[w - 1].h, l->v[i].h);
            continue;
        }
        l->v[w++] = l->v[i];
    }
    l->n = w;
    return 0;
}

typedef struct {
    size_t inputs, refs, differ, other_seed, cases;
} tally;

/* Merge-join the sorted lists a and b, counting and printing differences. */
static void join(const hlist *a, const hlist *b, const char *pa, const char *pb, tally *t, size_t *shown,
                 size_t limit)
{
    const char *last_case = NULL;
    for (size_t i = 0, j = 0; i < a->n && j < b->n;) {
        const hentry *x = &a->v[i], *y = &b->v[j];
        int d = strcmp(x->case_id, y->case_id);
        if (!d) d = strcmp(x->key, y->key);
        if (d) {
            d < 0 ? i++ : j++;
            continue;
        }
        i++, j++;
        if (x->seed != y->seed) {
            t->other_seed++;
            continue;
        }
        if (!last_case || strcmp(last_case, x->case_id)) t->cases++;
        last_case = x->case_id;
        if (!strncmp(x->key, "input ", 6)) t->inputs++;
        else t->refs++;
        if (x->h != y->h && ++t->differ && (*shown)++ < limit)
            printf("DIFFER %s: %s: %s %016" PRIx64 ", %s %016" PRIx64 "\n", x->case_id, x->key, pa, x->h, pb, y->h);
    }
}

/* `moects hashes` on its parsed arguments (harness/reports_commands.h): both files read, their hashes
 * collected and joined, the counts printed. */
int moects__hashes_compare(const char *path_a, const char *path_b, size_t limit)
{
    const char *path[2] = {path_a, path_b};
    moects_run run[2];
    memset(run, 0, sizeof run);
    hlist l[2] = {{0}, {0}};
    char err[1024];
    int rc = 2;
    size_t inconsistent = 0, shown = 0;
    for (int f = 0; f < 2; f++) {
        if (moects__results_read(path[f], &run[f], err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            goto out;
        }
        if (collect(&run[f], path[f], &l[f], &inconsistent, &shown, limit)) {
            fprintf(stderr, "moects hashes: out of memory\n");
            goto out;
        }
    }
    tally t = {0};
    join(&l[0], &l[1], path[0], path[1], &t, &shown, limit);
    size_t bad = t.differ + inconsistent;
    if (shown > limit) printf("... and %zu more differences\n", shown - limit);
    printf("moects hashes: %zu cases in both; %zu input and %zu reference hashes compared, %zu differ; "
           "%zu differ within one file; %zu skipped (other seed); %s: %zu hashes, %s: %zu\n",
           t.cases, t.inputs, t.refs, t.differ, inconsistent, t.other_seed, path[0], l[0].n, path[1], l[1].n);
    if (!bad && !t.refs)
        printf("moects hashes: nothing compared: no reference hash of a common case with the same seed\n");
    rc = bad || !t.refs ? 1 : 0;
out:
    for (int f = 0; f < 2; f++) {
        free(l[f].v);
        moects__run_free(&run[f]);
    }
    return rc;
}
