/* merge.c: `moects merge OUT_DIR SHARD_RESULTS... [--cases FILE] [--root DIR]`: the results.json
 * files of the shards of one run (`moects run --shard i/n`, or TEST_SHARD_INDEX/TEST_TOTAL_SHARDS)
 * into OUT_DIR/results.json, OUT_DIR/run.tap, OUT_DIR/summary.md and OUT_DIR/junit.xml, equal to what the run would
 * have written unsharded (DESIGN.md "Harness", Scale-out).
 *
 * Order (case-major, as a run writes it): cases in the order of --cases FILE (one id per line) or
 * else of the built-in registry (moects_cases_builtin of --root, default the source tree); within a
 * case, kernels in the built-in registry's order. Cases or kernels the order does not know (an
 * out-of-tree registry or kernel library) follow the known ones in order of first appearance
 * (shard index, then position in the shard), with a note on stderr.
 *
 * Errors (exit 2, one line each): an unreadable or invalid file; a file that is not a shard
 * (empty "shard"); shards that disagree on moects_version, commit, seed, filter or shard count;
 * a shard index given twice or missing (0-based 0..n-1, or 1-based 1..n); a (kernel, case) pair
 * in two shards; OUT_DIR/results.json being one of the inputs (real paths compared; checked before
 * anything is read, nothing written). The merged header: shard "", date = the latest shard date,
 * machine = the shards' machines, distinct ones joined by " + ". Exit 1 when a mutant escapes the
 * merged run (the shards do not judge escapes: another shard may catch the mutant); honest failures
 * fail their shards. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_commands.h"
#include "moects_registry.h"
#include "moects_tap.h"
#include "reports_internal.h"

/* string -> rank, open addressing; keys are not owned */
typedef struct {
    const char **key;
    long *rank;
    size_t cap, n;
} strmap;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static int map_grow(strmap *m)
{
    strmap g = {0};
    g.cap = m->cap ? 2 * m->cap : 1024;
    g.key = calloc(g.cap, sizeof *g.key);
    g.rank = calloc(g.cap, sizeof *g.rank);
    if (!g.key || !g.rank) {
        free(g.key);
        free(g.rank);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->key[i]) {
            size_t h = hash_str(m->key[i]) & (g.cap - 1);
            while (g.key[h]) h = (h + 1) & (g.cap - 1);
            g.key[h] = m->key[i];
            g.rank[h] = m->rank[i];
        }
    g.n = m->n;
    free(m->key);
    free(m->rank);
    *m = g;
    return 0;
}

/* rank of key; if absent, insert it with rank m->n (when add) and return that, or -1 */
static long map_rank(strmap *m, const char *key, int add, int *oom)
{
    if (m->cap) {
        size_t h = hash_str(key) & (m->cap - 1);
        for (; m->key[h]; h = (h + 1) & (m->cap - 1))
            if (!strcmp(m->key[h], key)) return m->rank[h];
    }
    if (!add) return -1;
    if (2 * (m->n + 1) > m->cap && map_grow(m)) {
        *oom = 1;
        return -1;
    }
    size_t h = hash_str(key) & (m->cap - 1);
    while (m->key[h]) h = (h + 1) & (m->cap - 1);
    m->key[h] = key;
    m->rank[h] = (long)m->n;
    return (long)m->n++;
}

static void map_free(strmap *m)
{
    free(m->key);
    free(m->rank);
    memset(m, 0, sizeof *m);
}

typedef struct {
    const char *path;
    moects_run run;
    long idx, count;
} shard;

typedef struct {
    long case_rank, kernel_rank;
    int shard;
    size_t pos;
} entry;

static int entry_cmp(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->case_rank != y->case_rank) return x->case_rank < y->case_rank ? -1 : 1;
    if (x->kernel_rank != y->kernel_rank) return x->kernel_rank < y->kernel_rank ? -1 : 1;
    if (x->shard != y->shard) return x->shard < y->shard ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static int parse_shard(const char *s, long *i, long *n)
{
    char *end;
    *i = strtol(s, &end, 10);
    if (end == s || *end != '/') return -1;
    const char *t = end + 1;
    *n = strtol(t, &end, 10);
    if (end == t || *end || *n < 1 || *i < 0 || *i > *n) return -1;
    return 0;
}

static int shard_cmp(const void *a, const void *b)
{
    const shard *x = a, *y = b;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static int usage_to(FILE *f)
{
    fprintf(f, "usage: moects merge OUT_DIR SHARD_RESULTS... [--cases FILE] [--root DIR]\n"
               "Merges the results.json of the shards of one run (moects run --shard i/n) into OUT_DIR:\n"
               "results.json, run.tap, summary.md and junit.xml, as the unsharded run would have written.\n"
               "  --cases FILE  case order of the merged report (default: the built-in registry's order)\n"
               "  --root DIR    where cases/ is (default: $MOECTS_ROOT, else the source tree)\n"
               "Exit 0; 1 when a mutant escapes, or a kernel refuses every case of, the merged run; 2 bad input.\n");
    return 2;
}
static int usage(void) { return usage_to(stderr); }

int moects_cmd_merge(int argc, char **argv)
{
    const char *out_dir = NULL, *cases_file = NULL, *root = NULL;
    char err[1024];
    int rc = 2, ns = 0;
    shard *sh = calloc((size_t)argc, sizeof *sh);
    if (!sh) return 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cases") && i + 1 < argc) cases_file = argv[++i];
        else if (!strcmp(argv[i], "--root") && i + 1 < argc) root = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage_to(stdout);
            free(sh);
            return 0;
        } else if (argv[i][0] == '-') {
            static const char *const valued[] = {"--cases", "--root", NULL};
            moects_bad_arg("merge", argv[i], valued);
            free(sh);
            return usage();
        } else if (!out_dir) out_dir = argv[i];
        else sh[ns++].path = argv[i];
    }
    if (!out_dir || !ns) {
        free(sh);
        return usage();
    }
    /* merging into a shard's own directory would overwrite that shard's results.json */
    char out_json[4096], out_real[PATH_MAX], in_real[PATH_MAX];
    size_t out_len = strlen(out_dir);
    while (out_len > 1 && out_dir[out_len - 1] == '/') out_len--; /* "s0/" names s0/results.json */
    if (out_len >= sizeof out_json - 16 ||
        (size_t)snprintf(out_json, sizeof out_json, "%.*s/results.json", (int)out_len, out_dir) >= sizeof out_json) {
        fprintf(stderr, "moects merge: %.200s...: path too long\n", out_dir);
        free(sh);
        return 2;
    }
    if (realpath(out_json, out_real))
        for (int s = 0; s < ns; s++)
            if (realpath(sh[s].path, in_real) && !strcmp(in_real, out_real)) {
                fprintf(stderr, "moects merge: %s is the input %s: merging would overwrite it; choose another "
                                "OUT_DIR\n",
                        out_json, sh[s].path);
                free(sh);
                return 2;
            }

    char **order_ids = NULL;
    int n_order_ids = 0;
    moects_case_list reg = {0};
    strmap cases = {0}, kernels = {0};
    entry *e = NULL;
    moects_run merged = {0};
    const moects_kernel **kdesc = NULL;
    moects_kernel *synth = NULL;
    int oom = 0;

    /* read and check the shards */
    for (int s = 0; s < ns; s++) {
        if (moects_results_read(sh[s].path, &sh[s].run, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            goto out;
        }
        const moects_run *r = &sh[s].run, *r0 = &sh[0].run;
        if (!r->shard[0]) {
            fprintf(stderr, "%s: shard: empty: not the results of a shard (moects run --shard i/n)\n", sh[s].path);
            goto out;
        }
        if (parse_shard(r->shard, &sh[s].idx, &sh[s].count)) {
            fprintf(stderr, "%s: shard: \"%s\" is not i/n\n", sh[s].path, r->shard);
            goto out;
        }
        const char *field = NULL;
        if (strcmp(r->moects_version, r0->moects_version)) field = "moects_version";
        else if (strcmp(r->commit, r0->commit)) field = "commit";
        else if (r->seed != r0->seed) field = "seed";
        else if (strcmp(r->filter, r0->filter)) field = "filter";
        else if (sh[s].count != sh[0].count) field = "shard";
        if (field) {
            fprintf(stderr, "%s: %s: differs from %s: shards of one run must agree\n", sh[s].path, field,
                    sh[0].path);
            goto out;
        }
    }
    qsort(sh, (size_t)ns, sizeof *sh, shard_cmp);
    long total = sh[0].count, base = sh[0].idx == 0 ? 0 : 1;
    for (int s = 1; s < ns; s++)
        if (sh[s].idx == sh[s - 1].idx) {
            fprintf(stderr, "%s: shard: %s also given by %s\n", sh[s].path, sh[s].run.shard, sh[s - 1].path);
            goto out;
        }
    if (sh[ns - 1].idx - base >= total || ns != total) {
        moects__buf miss = {0};
        for (long i = base, s = 0; i < base + total; i++) {
            while (s < ns && sh[s].idx < i) s++;
            if (s >= ns || sh[s].idx != i) moects__buf_printf(&miss, "%s%ld/%ld", miss.n ? ", " : "", i, total);
        }
        fprintf(stderr, "%s: shard: the run has %ld shards; missing: %s\n", sh[0].path, total,
                miss.n ? miss.s : (base ? "0-based and 1-based indices mixed" : "?"));
        moects__buf_free(&miss);
        goto out;
    }

    /* the order: cases, then kernels */
    if (cases_file) {
        n_order_ids = moects_idlist_load(cases_file, &order_ids, err, sizeof err);
        if (n_order_ids < 0) {
            fprintf(stderr, "%s\n", err);
            goto out;
        }
        for (int i = 0; i < n_order_ids && !oom; i++) map_rank(&cases, order_ids[i], 1, &oom);
    } else {
        if (moects_cases_builtin(root ? root : moects__source_root(), &reg, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            goto out;
        }
        for (size_t i = 0; i < reg.n && !oom; i++) map_rank(&cases, reg.v[i].id, 1, &oom);
    }
    size_t nbk;
    const moects_kernel *const *bk = moects_builtin_kernels(&nbk);
    for (size_t i = 0; i < nbk && !oom; i++) map_rank(&kernels, bk[i]->name, 1, &oom);
    size_t known_cases = cases.n, known_kernels = kernels.n;

    size_t n = 0;
    for (int s = 0; s < ns; s++) n += sh[s].run.n;
    e = malloc((n ? n : 1) * sizeof *e);
    if (!e) oom = 1;
    size_t k = 0;
    for (int s = 0; s < ns && !oom; s++)
        for (size_t i = 0; i < sh[s].run.n && !oom; i++) {
            const moects_result *r = &sh[s].run.v[i];
            e[k].case_rank = map_rank(&cases, r->case_id, 1, &oom);
            e[k].kernel_rank = map_rank(&kernels, r->kernel, 1, &oom);
            e[k].shard = s;
            e[k].pos = i;
            k++;
        }
    if (oom) {
        fprintf(stderr, "moects merge: out of memory\n");
        goto out;
    }
    if (cases.n > known_cases)
        fprintf(stderr, "moects merge: note: %zu cases not in the %s order follow the others in shard order\n",
                cases.n - known_cases, cases_file ? cases_file : "registry's");
    if (kernels.n > known_kernels)
        fprintf(stderr, "moects merge: note: %zu kernels not built in follow the built-in ones\n",
                kernels.n - known_kernels);
    qsort(e, n, sizeof *e, entry_cmp);
    for (size_t i = 1; i < n; i++)
        if (e[i].case_rank == e[i - 1].case_rank && e[i].kernel_rank == e[i - 1].kernel_rank) {
            const moects_result *r = &sh[e[i].shard].run.v[e[i].pos];
            fprintf(stderr, "%s: results[%zu]: kernel %s, case %s: also in %s\n", sh[e[i].shard].path, e[i].pos,
                    r->kernel, r->case_id, sh[e[i - 1].shard].path);
            goto out;
        }

    /* the merged run */
    merged = sh[0].run;
    merged.v = NULL;
    merged.n = merged.cap = 0;
    merged.shard[0] = '\0';
    merged.machine[0] = '\0';
    for (int s = 0; s < ns; s++) {
        const moects_run *r = &sh[s].run;
        if (strcmp(r->date, merged.date) > 0) snprintf(merged.date, sizeof merged.date, "%s", r->date);
        int seen = 0;
        for (int t = 0; t < s; t++) seen |= !strcmp(sh[t].run.machine, r->machine);
        if (seen || !r->machine[0]) continue;
        size_t L = strlen(merged.machine);
        if (L + strlen(r->machine) + 4 < sizeof merged.machine)
            snprintf(merged.machine + L, sizeof merged.machine - L, "%s%s", L ? " + " : "", r->machine);
    }
    for (size_t i = 0; i < n; i++)
        if (moects_run_push(&merged, &sh[e[i].shard].run.v[e[i].pos])) {
            fprintf(stderr, "moects merge: out of memory\n");
            goto out;
        }

    /* kernels for the TAP and the summary: built-in ones with results, then stand-in descriptors */
    kdesc = calloc(kernels.n ? kernels.n : 1, sizeof *kdesc);
    synth = calloc(kernels.n ? kernels.n : 1, sizeof *synth);
    if (!kdesc || !synth) {
        fprintf(stderr, "moects merge: out of memory\n");
        goto out;
    }
    for (size_t i = 0; i < merged.n; i++) {
        const moects_result *r = &merged.v[i];
        long kr = map_rank(&kernels, r->kernel, 0, &oom); /* every merged kernel was added above */
        if (kr < 0 || kdesc[kr]) continue;
        if ((size_t)kr < known_kernels) {
            kdesc[kr] = bk[kr];
        } else {
            synth[kr].abi_version = MOECTS_KERNEL_ABI_VERSION;
            synth[kr].name = r->kernel; /* merged.v outlives kdesc */
            synth[kr].op = r->op;
            synth[kr].recipe = r->recipe[0] ? r->recipe : NULL;
            synth[kr].bug = r->is_mutant ? "declared by the kernel library" : NULL;
            kdesc[kr] = &synth[kr];
        }
    }
    size_t nk = 0;
    for (size_t i = 0; i < kernels.n; i++)
        if (kdesc[i]) kdesc[nk++] = kdesc[i];

    if (moects_mkdirs(out_dir, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        goto out;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/results.json", out_dir);
    if (moects_results_write(path, &merged, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        goto out;
    }
    moects_tap_opts o = {.version = 13, .program = moects_self_program()};
    size_t len;
    char *text = moects_tap_render(&merged, kdesc, nk, &o, &len);
    snprintf(path, sizeof path, "%s/run.tap", out_dir);
    if (!text || moects_write_file_atomic(path, text, len, err, sizeof err)) {
        fprintf(stderr, "%s\n", text ? err : "moects merge: out of memory");
        free(text);
        goto out;
    }
    free(text);
    text = moects_summary_render(&merged, kdesc, nk, &o, &len);
    snprintf(path, sizeof path, "%s/summary.md", out_dir);
    if (!text || moects_write_file_atomic(path, text, len, err, sizeof err)) {
        fprintf(stderr, "%s\n", text ? err : "moects merge: out of memory");
        free(text);
        goto out;
    }
    free(text);
    text = moects_junit_render(&merged, kdesc, nk, &o, &len);
    snprintf(path, sizeof path, "%s/junit.xml", out_dir);
    if (!text || moects_write_file_atomic(path, text, len, err, sizeof err)) {
        fprintf(stderr, "%s\n", text ? err : "moects merge: out of memory");
        free(text);
        goto out;
    }
    free(text);
    fprintf(stderr, "moects merge: %d shards, %zu results -> %s/results.json, run.tap, summary.md, junit.xml\n", ns,
            merged.n, out_dir);
    rc = 0;
    /* the shards leave escaped mutants and refusing kernels to the merge (a TODO point there): judged here */
    for (size_t k = 0; k < nk; k++) {
        moects_kernel_status st = moects_kernel_status_of(&merged, kdesc[k]->name, kdesc[k]->bug != NULL, NULL);
        if (moects_kernel_status_deferred(st)) {
            if (st == MOECTS_KS_ESCAPED) fprintf(stderr, "moects merge: mutant %s escaped the merged run\n", kdesc[k]->name);
            else fprintf(stderr, "moects merge: kernel %s refused every case of the merged run\n", kdesc[k]->name);
            rc = 1;
        }
    }
out:
    free(kdesc);
    free(synth);
    moects_run_free(&merged);
    free(e);
    map_free(&cases);
    map_free(&kernels);
    moects_case_list_free(&reg);
    moects_idlist_free(order_ids, n_order_ids > 0 ? (size_t)n_order_ids : 0);
    for (int s = 0; s < ns; s++) moects_run_free(&sh[s].run);
    free(sh);
    return rc;
}
