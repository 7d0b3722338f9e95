/* merge.c: the work of `moects merge OUT_DIR SHARD_RESULTS... [--cases FILE] [--root DIR]`
 * (moects__merge, harness/reports_commands.h; its usage and arguments: harness/cli/cmd_merge.c):
 * the results.json files of the shards of one run (`moects run --shard i/n`, or TEST_SHARD_INDEX/TEST_TOTAL_SHARDS)
 * into OUT_DIR/results.json, OUT_DIR/run.tap, OUT_DIR/summary.md and OUT_DIR/junit.xml, equal to what the run would
 * have written unsharded (DESIGN.md "Harness", Scale-out).
 *
 * Order (case-major, as a run writes it): cases in the order of --cases FILE (one id per line) or
 * else of the built-in registry (moects__cases_builtin of --root, default the source tree); within a
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
 * merged run (the shards do not judge escapes: another shard may catch the mutant) or an honest kernel
 * failed (as the unsharded run exits; its shards failed too). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_registry.h"
#include "moects_runner.h"
#include "moects_tap.h"
#include "reports_commands.h"
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

/* The state of one `moects merge`, carried through its stages (moects__merge). */
typedef struct {
    const char *out_dir, *cases_file, *root;
    shard *sh;
    int ns;
    char **order_ids;
    int n_order_ids;
    moects_case_list reg;
    strmap cases, kernels;
    size_t known_cases, known_kernels;
    entry *e;
    size_t n;
    moects_run merged;
    const moects_kernel **kdesc;
    moects_kernel *synth;
    size_t nk;
} merge_ctx;

/* Stage 2: merging into a shard's own directory would overwrite that shard's results.json (real paths
 * compared, before anything is read). 0, or 2 with one line. */
static int merge_out_not_input(const merge_ctx *m)
{
    char out_json[4096], out_real[PATH_MAX], in_real[PATH_MAX];
    size_t out_len = strlen(m->out_dir);
    while (out_len > 1 && m->out_dir[out_len - 1] == '/') out_len--; /* "s0/" names s0/results.json */
    if (out_len >= sizeof out_json - 16 ||
        (size_t)snprintf(out_json, sizeof out_json, "%.*s/results.json", (int)out_len, m->out_dir) >= sizeof out_json) {
        fprintf(stderr, "moects merge: %.200s...: path too long\n", m->out_dir);
        return 2;
    }
    if (realpath(out_json, out_real))
        for (int s = 0; s < m->ns; s++)
            if (realpath(m->sh[s].path, in_real) && !strcmp(in_real, out_real)) {
                fprintf(stderr, "moects merge: %s is the input %s: merging would overwrite it; choose another "
                                "OUT_DIR\n",
                        out_json, m->sh[s].path);
                return 2;
            }
    return 0;
}

/* Stage 3: each shard read, a shard (i/n), agreeing with the first on version, commit, seed, filter and
 * count; then the set: no index twice, none missing. 0, or 2 with one line. */
static int merge_read_shards(merge_ctx *m)
{
    char err[1024];
    shard *sh = m->sh;
    for (int s = 0; s < m->ns; s++) {
        if (moects__results_read(sh[s].path, &sh[s].run, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
        const moects_run *r = &sh[s].run, *r0 = &sh[0].run;
        if (!r->shard[0]) {
            fprintf(stderr, "%s: shard: empty: not the results of a shard (moects run --shard i/n)\n", sh[s].path);
            return 2;
        }
        if (parse_shard(r->shard, &sh[s].idx, &sh[s].count)) {
            fprintf(stderr, "%s: shard: \"%s\" is not i/n\n", sh[s].path, r->shard);
            return 2;
        }
        const char *field = NULL;
        if (strcmp(r->moects_version, r0->moects_version)) field = "moects_version";
        else if (strcmp(r->commit, r0->commit)) field = "commit";
        else if (r->seed != r0->seed) field = "seed";
        else if (strcmp(r->filter, r0->filter)) field = "filter";
        else if (sh[s].count != sh[0].count) field = "shard";
        if (field) {
            fprintf(stderr, "%s: %s: differs from %s: shards of one run must agree\n", sh[s].path, field, sh[0].path);
            return 2;
        }
    }
    qsort(sh, (size_t)m->ns, sizeof *sh, shard_cmp);
    long total = sh[0].count, base = sh[0].idx == 0 ? 0 : 1;
    for (int s = 1; s < m->ns; s++)
        if (sh[s].idx == sh[s - 1].idx) {
            fprintf(stderr, "%s: shard: %s also given by %s\n", sh[s].path, sh[s].run.shard, sh[s - 1].path);
            return 2;
        }
    if (sh[m->ns - 1].idx - base < total && m->ns == total) return 0;
    moects__buf miss = {0};
    for (long i = base, s = 0; i < base + total; i++) {
        while (s < m->ns && sh[s].idx < i) s++;
        if (s >= m->ns || sh[s].idx != i) moects__buf_printf(&miss, "%s%ld/%ld", miss.n ? ", " : "", i, total);
    }
    fprintf(stderr, "%s: shard: the run has %ld shards; missing: %s\n", sh[0].path, total,
            miss.n ? miss.s : (base ? "0-based and 1-based indices mixed" : "?"));
    moects__buf_free(&miss);
    return 2;
}

/* Stage 4: the order (cases of --cases FILE or the registry, kernels built in, others after in shard
 * order, noted) and every result's place in it; a (kernel, case) pair in two shards is refused. */
static int merge_order(merge_ctx *m)
{
    char err[1024];
    int oom = 0;
    if (m->cases_file) {
        m->n_order_ids = moects__idlist_load(m->cases_file, &m->order_ids, err, sizeof err);
        if (m->n_order_ids < 0) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
        for (int i = 0; i < m->n_order_ids && !oom; i++) map_rank(&m->cases, m->order_ids[i], 1, &oom);
    } else {
        if (moects__cases_registry(m->root ? m->root : moects__source_root(), &m->reg, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
        for (size_t i = 0; i < m->reg.n && !oom; i++) map_rank(&m->cases, m->reg.v[i].id, 1, &oom);
    }
    size_t nbk;
    const moects_kernel *const *bk = moects__builtin_kernels(&nbk);
    for (size_t i = 0; i < nbk && !oom; i++) map_rank(&m->kernels, bk[i]->name, 1, &oom);
    m->known_cases = m->cases.n, m->known_kernels = m->kernels.n;
    for (int s = 0; s < m->ns; s++) m->n += m->sh[s].run.n;
    m->e = malloc((m->n ? m->n : 1) * sizeof *m->e);
    if (!m->e) oom = 1;
    size_t k = 0;
    for (int s = 0; s < m->ns && !oom; s++)
        for (size_t i = 0; i < m->sh[s].run.n && !oom; i++, k++) {
            const moects_result *r = &m->sh[s].run.v[i];
            m->e[k] = (entry){map_rank(&m->cases, r->case_id, 1, &oom), map_rank(&m->kernels, r->kernel, 1, &oom), s, i};
        }
    if (oom) {
        fprintf(stderr, "moects merge: out of memory\n");
        return 2;
    }
    if (m->cases.n > m->known_cases)
        fprintf(stderr, "moects merge: note: %zu cases not in the %s order follow the others in shard order\n",
                m->cases.n - m->known_cases, m->cases_file ? m->cases_file : "registry's");
    if (m->kernels.n > m->known_kernels)
        fprintf(stderr, "moects merge: note: %zu kernel%s not built in (--kernel-lib, --kernel-py) follow%s the built-in ones\n",
                m->kernels.n - m->known_kernels, m->kernels.n - m->known_kernels == 1 ? "" : "s",
                m->kernels.n - m->known_kernels == 1 ? "s" : "");
    qsort(m->e, m->n, sizeof *m->e, entry_cmp);
    for (size_t i = 1; i < m->n; i++)
        if (m->e[i].case_rank == m->e[i - 1].case_rank && m->e[i].kernel_rank == m->e[i - 1].kernel_rank) {
            const entry *x = &m->e[i];
            const moects_result *r = &m->sh[x->shard].run.v[x->pos];
            fprintf(stderr, "%s: results[%zu]: kernel %s, case %s: also in %s\n", m->sh[x->shard].path, x->pos,
                    r->kernel, r->case_id, m->sh[m->e[i - 1].shard].path);
            return 2;
        }
    return 0;
}

/* Stage 5: the merged run (shard "", the latest date, the distinct machines joined by " + ") and the
 * kernels for its TAP and summary: built-in ones with results, then stand-in descriptors. */
static int merge_build(merge_ctx *m)
{
    moects_run *merged = &m->merged;
    *merged = m->sh[0].run;
    merged->v = NULL;
    merged->n = merged->cap = 0;
    merged->shard[0] = merged->machine[0] = '\0';
    for (int s = 0; s < m->ns; s++) {
        const moects_run *r = &m->sh[s].run;
        if (strcmp(r->date, merged->date) > 0) snprintf(merged->date, sizeof merged->date, "%s", r->date);
        int seen = 0;
        for (int t = 0; t < s; t++) seen |= !strcmp(m->sh[t].run.machine, r->machine);
        if (seen || !r->machine[0]) continue;
        size_t L = strlen(merged->machine);
        if (L + strlen(r->machine) + 4 < sizeof merged->machine)
            snprintf(merged->machine + L, sizeof merged->machine - L, "%s%s", L ? " + " : "", r->machine);
    }
    int oom = 0;
    for (size_t i = 0; i < m->n && !oom; i++) oom = moects__run_push(merged, &m->sh[m->e[i].shard].run.v[m->e[i].pos]) != 0;
    m->kdesc = calloc(m->kernels.n ? m->kernels.n : 1, sizeof *m->kdesc);
    m->synth = calloc(m->kernels.n ? m->kernels.n : 1, sizeof *m->synth);
    if (oom || !m->kdesc || !m->synth) {
        fprintf(stderr, "moects merge: out of memory\n");
        return 2;
    }
    size_t nbk;
    const moects_kernel *const *bk = moects__builtin_kernels(&nbk);
    for (size_t i = 0; i < merged->n; i++) {
        const moects_result *r = &merged->v[i];
        long kr = map_rank(&m->kernels, r->kernel, 0, &oom); /* every merged kernel was added above */
        if (kr < 0 || m->kdesc[kr]) continue;
        if ((size_t)kr < m->known_kernels) {
            m->kdesc[kr] = bk[kr];
            continue;
        }
        moects_kernel *k = &m->synth[kr];
        k->abi_version = MOECTS_KERNEL_ABI_VERSION;
        k->name = r->kernel; /* merged.v outlives kdesc */
        k->op = r->op;
        k->recipe = r->recipe[0] ? r->recipe : NULL;
        k->bug = r->is_mutant ? "declared by the kernel library" : NULL;
        m->kdesc[kr] = k;
    }
    for (size_t i = 0; i < m->kernels.n; i++)
        if (m->kdesc[i]) m->kdesc[m->nk++] = m->kdesc[i];
    return 0;
}

/* Write text (NULL: out of memory) to OUT_DIR/name atomically; frees it. 0, or 2 with one line. */
static int merge_write_one(const merge_ctx *m, const char *name, char *text, size_t len)
{
    char path[4096], err[1024];
    snprintf(path, sizeof path, "%s/%s", m->out_dir, name);
    int bad = !text || moects__write_file_atomic(path, text, len, err, sizeof err);
    if (bad) fprintf(stderr, "%s\n", text ? err : "moects merge: out of memory");
    free(text);
    return bad ? 2 : 0;
}

/* Stage 6: results.json, run.tap, summary.md, junit.xml under OUT_DIR. 0, or 2 with one line. */
static int merge_write(merge_ctx *m)
{
    char err[1024], path[4096];
    if (moects__mkdirs(m->out_dir, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    snprintf(path, sizeof path, "%s/results.json", m->out_dir);
    if (moects__results_write(path, &m->merged, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    moects_tap_opts o = {.version = 13, .program = moects__self_program(),
                         .narrowed = moects__filter_narrowed(m->merged.filter)};
    size_t len = 0;
    char *text = moects__tap_render(&m->merged, m->kdesc, m->nk, &o, &len);
    if (merge_write_one(m, "run.tap", text, len)) return 2;
    text = moects__summary_render(&m->merged, m->kdesc, m->nk, &o, &len);
    if (merge_write_one(m, "summary.md", text, len)) return 2;
    text = moects__junit_render(&m->merged, m->kdesc, m->nk, &o, &len);
    if (merge_write_one(m, "junit.xml", text, len)) return 2;
    fprintf(stderr, "moects merge: %d shards, %zu results -> %s/results.json, run.tap, summary.md, junit.xml\n", m->ns,
            m->merged.n, m->out_dir);
    return 0;
}

/* Stage 7: the shards leave escaped mutants and refusing kernels to the merge (a TODO point there):
 * judged here, with the honest failures the shards already failed on. 1 when a kernel fails the merged
 * run as it would the unsharded one (moects__kernel_status_fails), else 0; a mutant that escaped a
 * narrowed selection (moects__filter_narrowed) stays a TODO, as in the unsharded run. */
static int merge_judge(const merge_ctx *m)
{
    int rc = 0, narrowed = moects__filter_narrowed(m->merged.filter);
    for (size_t k = 0; k < m->nk; k++) {
        const moects_kernel *d = m->kdesc[k];
        moects_kernel_status st = moects__kernel_status_of(&m->merged, d->name, d->bug != NULL, NULL);
        if (st == MOECTS_KS_ESCAPED && narrowed) { /* as the whole run has it */
            fprintf(stderr, "moects merge: mutant %s escaped this selection (TODO: the whole tier's run judges it)\n",
                    d->name);
            continue;
        }
        if (!moects__kernel_status_fails(st)) continue;
        if (st == MOECTS_KS_ESCAPED) fprintf(stderr, "moects merge: mutant %s escaped the merged run\n", d->name);
        else if (st == MOECTS_KS_REFUSED)
            fprintf(stderr, "moects merge: kernel %s refused every case of the merged run\n", d->name);
        else fprintf(stderr, "moects merge: kernel %s failed in the merged run\n", d->name);
        rc = 1;
    }
    return rc;
}

static void merge_free(merge_ctx *m)
{
    free(m->kdesc);
    free(m->synth);
    moects__run_free(&m->merged);
    free(m->e);
    map_free(&m->cases);
    map_free(&m->kernels);
    moects__case_list_free(&m->reg);
    moects__idlist_free(m->order_ids, m->n_order_ids > 0 ? (size_t)m->n_order_ids : 0);
    for (int s = 0; s < m->ns; s++) moects__run_free(&m->sh[s].run);
    free(m->sh);
}

/* `moects merge` on its parsed arguments (harness/reports_commands.h): a sequence of stages (stage 1,
 * the arguments, is harness/cli/cmd_merge.c), each of which may end the command with its exit status. */
int moects__merge(const moects__merge_args *a)
{
    merge_ctx m;
    memset(&m, 0, sizeof m);
    m.out_dir = a->out_dir, m.cases_file = a->cases_file, m.root = a->root;
    m.sh = calloc(a->nshards > 0 ? (size_t)a->nshards : 1, sizeof *m.sh);
    int rc = m.sh ? -1 : 2;
    for (int s = 0; m.sh && s < a->nshards; s++) m.sh[m.ns++].path = a->shards[s];
    if (rc < 0 && !(rc = merge_out_not_input(&m)) && !(rc = merge_read_shards(&m)) && !(rc = merge_order(&m)) &&
        !(rc = merge_build(&m)) && !(rc = merge_write(&m)))
        rc = merge_judge(&m);
    merge_free(&m);
    return rc;
}
