/* coverage.c: `moects coverage`, the shape-coverage report and the pre-launch check
 * (DESIGN.md "Harness", Coverage).
 *
 * moects coverage [RUN_RESULTS] [--out DIR] [--root DIR] [--registry DIR]
 *   A models x layouts table per honest kernel, each cell one of
 *     PASS            every case of the cell passed (each cell of a run reads "k/n": k of its n
 *                     cases pass; PASS only when k = n)
 *     FAIL            some case failed (FAIL_MISMATCH, FAIL_CRASH, FAIL_TIMEOUT)
 *     UNSUPPORTED     the kernel refused some case (its supports()), none failed
 *     NOT_REGISTERED  no case of that model and layout for the kernel's op
 *     NOT_RUN         cases exist but none has a verdict (filtered out, or SKIP)
 *   With RUN_RESULTS the cells come from the run's verdicts (its honest kernels); without, from
 *   every built-in honest kernel's supports() on the registered cases (UNSUPPORTED or NOT_RUN).
 *   Writes DIR/coverage.md and DIR/coverage.html (one self-contained page: inline CSS, inline SVG
 *   heat maps, titles on hover, no script, no external resource), atomically. DIR defaults to the
 *   directory of RUN_RESULTS, else ".". Regression cases (model "regression") are counted apart.
 *
 * moects coverage --config CONFIG.json [--tp N]... [--ep N]... [--registry DIR] [--out DIR]
 *   Pre-launch check of a model not registered yet (a raw Hugging Face config.json of any family,
 *   or a registry file): derives its cases (moects_derive_cases) under the given layouts (all
 *   derived layouts when none is given), then lists
 *     - the shapes no registered case covers, by op and the dims that matter: ep_gather
 *       (H, topk, E, EP size, expert map), fp4_gemm.<format> (N, K); a dim value no registered case of the op has is
 *       named "new";
 *     - the shapes an honest kernel refuses (supports() false), with its reason: the built-in kernels
 *       and those of each --kernel-lib LIB.so, kept when a --kernel GLOB matches (all when none).
 *   The registry is the built-in one (cases/models and cases/regressions under --root) or --registry
 *   DIR (a source tree holding cases/models, or a directory of model files), without the model
 *   itself (same registry name, or same hf_id). Markdown on stdout (and DIR/prelaunch.md with
 *   --out, written first). Exit 1 when a shape is uncovered or refused, else 0. A --tp/--ep layout
 *   the derivation does not have for the model (moects_layout_exists: TP t in {1,2,4,8,16} dividing
 *   moe_intermediate_size, EP e in {2,...,64} with e <= E) is a usage error (exit 2), as is a
 *   registry without model files.
 *   ep_gather shapes are checked with M_sum = T*k + 127 * min(T*k, local experts), the largest
 *   expert-padded row count (DESIGN.md derivation: rows per expert padded to 128).
 * Exit 2: bad usage or bad input (one line naming the file and field), all checked before any
 * report is made; the report directory is created and proved writable (like `moects run --out`)
 * before the report is made, and nothing is printed or written after an error. */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moects_commands.h"
#include "moects_inputs.h"
#include "moects_registry.h"
#include "moects_runner.h"
#include "reports_internal.h"
#include "moects_op.h"

/* ---- registry ---- */

typedef struct {
    moects_case_list cases;
    moects_model *models;
    int nmodels;
    char where[4096];      /* what was loaded, for the report */
    char models_dir[4096]; /* where the model files were looked for */
} registry;

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* dir: NULL (built-in of root), a source tree with cases/models, or a directory of model files. */
static int registry_load(registry *r, const char *dir, const char *root, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    char models_dir[4096];
    const char *tree = dir ? dir : root;
    snprintf(models_dir, sizeof models_dir, "%s/cases/models", tree);
    if (!dir || is_dir(models_dir)) {
        snprintf(r->where, sizeof r->where, "%s/cases", tree);
        snprintf(r->models_dir, sizeof r->models_dir, "%s", models_dir);
        if ((r->nmodels = moects_models_load_dir(models_dir, &r->models, err, errlen)) < 0) return -1;
        return moects_cases_builtin(tree, &r->cases, err, errlen);
    }
    if (!is_dir(dir)) {
        snprintf(err, errlen, "%s: --registry: not a directory", dir);
        return -1;
    }
    snprintf(r->where, sizeof r->where, "%s", dir);
    snprintf(r->models_dir, sizeof r->models_dir, "%s", dir);
    if ((r->nmodels = moects_models_load_dir(dir, &r->models, err, errlen)) < 0) return -1;
    for (int i = 0; i < r->nmodels; i++)
        if (moects_derive_cases(&r->models[i], &r->cases)) {
            snprintf(err, errlen, "%s: %s: case derivation failed", dir, r->models[i].name);
            return -1;
        }
    return 0;
}

/* A registry without model files checks nothing: -1 with "DIR: --registry: no model files (*.json)". */
static int registry_has_models(const registry *r, const char *registry_dir)
{
    if (r->nmodels > 0) return 0;
    fprintf(stderr, "%s: %s: no model files (*.json)\n", registry_dir ? registry_dir : r->models_dir,
            registry_dir ? "--registry" : "built-in registry");
    return -1;
}

/* moects_dir_writable (as `moects run` checks --out): 0, or -1 with one line
 * "moects coverage: OPT: DIR: problem". */
static int dir_writable(const char *opt, const char *dir)
{
    char err[4400];
    if (!moects_dir_writable(dir, err, sizeof err)) return 0;
    fprintf(stderr, "moects coverage: %s: %s\n", opt, err);
    return -1;
}

static void registry_free(registry *r)
{
    moects_case_list_free(&r->cases);
    free(r->models);
    memset(r, 0, sizeof *r);
}

static int is_regression(const moects_case *c) { return !strcmp(c->model, "regression"); }

/* ---- case -> kernel shape ---- */

/* 1 when kernel k takes case c; else 0 with the reason in why. */
static int kernel_takes(const moects_kernel *k, const moects_case *c, char *why, size_t wl)
{
    moects__kshape s;
    moects__case_kshape(c, &s);
    why[0] = '\0';
    int ok = k->supports(&s, why, wl);
    if (!ok && !why[0]) snprintf(why, wl, "refused (no reason given)");
    return ok;
}

/* ---- the table ---- */

static const char *const cell_color[MOECTS__CELL_COUNT] = {"#1a9850", "#d73027", "#fdae61", "#ececec",
                                                            "#c6dbef"};
static const char *const cell_ink[MOECTS__CELL_COUNT] = {"#fff", "#fff", "#222", "#999", "#234"};
static const char *const cell_glyph[MOECTS__CELL_COUNT] = {"\u2713", "\u2717", "\u2298", "", "?"};
static const char *const cell_md[MOECTS__CELL_COUNT] = {"PASS", "**FAIL**", "UNSUP", "-", "?"};
static const char *const cell_help[MOECTS__CELL_COUNT] = {
    "every case of the cell passed (a run's cells read k/n: k of the cell's n cases pass)",
    "some case failed (mismatch, crash, timeout, out-of-bounds write or nondeterminism)",
    "the kernel refused some case (supports()), none failed",
    "no case of this model and layout for the kernel's op",
    "cases exist, none has a verdict (filtered out or skipped)"};

typedef struct {
    size_t n[MOECTS_VERDICT_COUNT];
    size_t supported; /* static mode: cases supports() took */
    size_t registered;
    long first_bad;             /* run mode: index in the run */
    const moects_case *refused; /* static mode: first refused case */
    char why[160];
} cell;

typedef struct {
    const char *name;
    moects_op op;
    const moects_kernel *desc; /* NULL for a kernel known only from the run */
    size_t reg_pass, reg_total; /* regression cases */
} kinfo;

typedef struct {
    const moects_run *run; /* NULL: static mode */
    const registry *reg;
    const char **models, **layouts;
    int nm, nl, nk;
    kinfo *k;
    cell *cells; /* [k][m][l] */
    unsigned char *registered; /* [m][l][op 1..2] */
    size_t regression_cases;
} table;

static cell *at(table *t, int k, int m, int l) { return &t->cells[((size_t)k * t->nm + m) * t->nl + l]; }

static moects__cell_state state_of(table *t, int k, int m, int l)
{
    const cell *c = at(t, k, m, l);
    if (!t->registered[((size_t)m * t->nl + l) * 3 + t->k[k].op]) return MOECTS__CELL_NOT_REGISTERED;
    if (c->n[MOECTS_FAIL_MISMATCH] + c->n[MOECTS_FAIL_CRASH] + c->n[MOECTS_FAIL_TIMEOUT] +
        c->n[MOECTS_FAIL_OOB_WRITE] + c->n[MOECTS_FAIL_NONDETERMINISTIC]) return MOECTS__CELL_FAIL;
    if (c->n[MOECTS_UNSUPPORTED]) return MOECTS__CELL_UNSUPPORTED;
    size_t pass = c->n[MOECTS_PASS_EXACT] + c->n[MOECTS_PASS_BOUNDED] + c->n[MOECTS_PASS_TOLERANCE], all = 0;
    for (int v = 0; v < MOECTS_VERDICT_COUNT; v++) all += c->n[v];
    /* green only when every case of the cell passed (a skipped case leaves it NOT_RUN) */
    if (pass && pass == all) return MOECTS__CELL_PASS;
    return MOECTS__CELL_NOT_RUN;
}

static int find_str(const char **v, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i], s)) return i;
    return -1;
}

static int add_str(const char ***v, int *n, const char *s)
{
    if (find_str(*v, *n, s) >= 0) return 0;
    const char **nv = realloc(*v, (size_t)(*n + 1) * sizeof *nv);
    if (!nv) return -1;
    nv[(*n)++] = s;
    *v = nv;
    return 0;
}

static int cmp_layout(const void *a, const void *b)
{
    return moects__layout_cmp(*(const char *const *)a, *(const char *const *)b);
}

static int find_kernel(const table *t, const char *name)
{
    for (int i = 0; i < t->nk; i++)
        if (!strcmp(t->k[i].name, name)) return i;
    return -1;
}

static int table_build(table *t, const registry *reg, const moects_run *run)
{
    memset(t, 0, sizeof *t);
    t->run = run;
    t->reg = reg;
    /* models: the registry's files, then the run's others; layouts: all, in natural order */
    for (int i = 0; i < reg->nmodels; i++)
        if (add_str(&t->models, &t->nm, reg->models[i].name)) return -1;
    for (size_t i = 0; i < reg->cases.n; i++) {
        const moects_case *c = &reg->cases.v[i];
        if (is_regression(c)) {
            t->regression_cases++;
            continue;
        }
        if (add_str(&t->models, &t->nm, c->model) || add_str(&t->layouts, &t->nl, c->layout)) return -1;
    }
    if (run)
        for (size_t i = 0; i < run->n; i++) {
            const moects_result *r = &run->v[i];
            if (!strcmp(r->model, "regression") || !r->model[0] || !r->layout[0] || !strcmp(r->layout, "-")) continue;
            if (add_str(&t->models, &t->nm, r->model) || add_str(&t->layouts, &t->nl, r->layout)) return -1;
        }
    if (t->nl) qsort(t->layouts, (size_t)t->nl, sizeof *t->layouts, cmp_layout);

    /* kernels: honest ones; the run's (built-in order first), or every built-in one */
    size_t nb;
    const moects_kernel *const *bk = moects_builtin_kernels(&nb);
    t->k = calloc(nb + (run ? run->n : 0) + 1, sizeof *t->k);
    if (!t->k) return -1;
    for (size_t i = 0; i < nb; i++) {
        if (bk[i]->bug) continue;
        int used = !run;
        for (size_t j = 0; run && j < run->n && !used; j++) used = !strcmp(run->v[j].kernel, bk[i]->name);
        if (used) t->k[t->nk++] = (kinfo){bk[i]->name, bk[i]->op, bk[i], 0, 0};
    }
    for (size_t j = 0; run && j < run->n; j++)
        if (!run->v[j].is_mutant && find_kernel(t, run->v[j].kernel) < 0)
            t->k[t->nk++] = (kinfo){run->v[j].kernel, run->v[j].op, NULL, 0, 0};

    size_t ncell = (size_t)(t->nk ? t->nk : 1) * (t->nm ? t->nm : 1) * (t->nl ? t->nl : 1);
    t->cells = calloc(ncell, sizeof *t->cells);
    t->registered = calloc((size_t)(t->nm ? t->nm : 1) * (t->nl ? t->nl : 1) * 3, 1);
    if (!t->cells || !t->registered) return -1;
    for (size_t i = 0; i < ncell; i++) t->cells[i].first_bad = -1;

    for (size_t i = 0; i < reg->cases.n; i++) {
        const moects_case *c = &reg->cases.v[i];
        if (is_regression(c)) continue;
        int m = find_str(t->models, t->nm, c->model), l = find_str(t->layouts, t->nl, c->layout);
        t->registered[((size_t)m * t->nl + l) * 3 + c->op] = 1;
        for (int k = 0; k < t->nk; k++) {
            if (t->k[k].op != c->op) continue;
            cell *x = at(t, k, m, l);
            x->registered++;
            if (run || !t->k[k].desc) continue;
            char why[160];
            if (kernel_takes(t->k[k].desc, c, why, sizeof why)) {
                x->supported++;
            } else {
                x->n[MOECTS_UNSUPPORTED]++;
                if (!x->refused) {
                    x->refused = c;
                    snprintf(x->why, sizeof x->why, "%s", why);
                }
            }
        }
    }
    for (size_t i = 0; run && i < run->n; i++) {
        const moects_result *r = &run->v[i];
        int k = r->is_mutant ? -1 : find_kernel(t, r->kernel);
        if (k < 0) continue;
        if (!strcmp(r->model, "regression")) {
            t->k[k].reg_total += r->verdict != MOECTS_SKIP;
            t->k[k].reg_pass += moects_verdict_is_pass(r->verdict);
            continue;
        }
        int m = find_str(t->models, t->nm, r->model), l = find_str(t->layouts, t->nl, r->layout);
        if (m < 0 || l < 0) continue;
        t->registered[((size_t)m * t->nl + l) * 3 + r->op] = 1;
        cell *x = at(t, k, m, l);
        x->n[r->verdict]++;
        int bad = moects_verdict_is_fail(r->verdict) || r->verdict == MOECTS_UNSUPPORTED;
        if (bad && (x->first_bad < 0 || (moects_verdict_is_fail(r->verdict) &&
                                         !moects_verdict_is_fail(run->v[x->first_bad].verdict))))
            x->first_bad = (long)i;
    }
    return 0;
}

static void table_free(table *t)
{
    free(t->models);
    free(t->layouts);
    free(t->k);
    free(t->cells);
    free(t->registered);
}

/* "12 cases registered; 11 PASS_EXACT, 1 UNSUPPORTED; first: <case>: <verdict>: <reason>" */
static void cell_detail(moects__buf *b, table *t, int k, int m, int l)
{
    const cell *c = at(t, k, m, l);
    moects__cell_state s = state_of(t, k, m, l);
    moects__buf_printf(b, "%s x %s on %s: %s", t->models[m], t->layouts[l], t->k[k].name, moects__cell_name(s));
    if (s == MOECTS__CELL_NOT_REGISTERED) return;
    if (c->registered) moects__buf_printf(b, "\n%zu case%s registered", c->registered, c->registered == 1 ? "" : "s");
    else moects__buf_add(b, "\nnot in the registry");
    if (!t->run) {
        if (t->k[k].desc)
            moects__buf_printf(b, "; supports() takes %zu, refuses %zu", c->supported, c->n[MOECTS_UNSUPPORTED]);
        if (c->refused) moects__buf_printf(b, "\nfirst refused: %s: %s", c->refused->id, c->why);
        return;
    }
    int first = 1;
    for (int v = 0; v < MOECTS_VERDICT_COUNT; v++)
        if (c->n[v]) {
            moects__buf_printf(b, "%s%zu %s", first ? "; run: " : ", ", c->n[v], moects_verdict_name((moects_verdict)v));
            first = 0;
        }
    if (first) moects__buf_add(b, "; no verdict in the run");
    if (c->first_bad >= 0) {
        const moects_result *r = &t->run->v[c->first_bad];
        moects__buf_printf(b, "\nfirst: %s: %s", r->case_id, moects_verdict_name(r->verdict));
        if (r->verdict == MOECTS_FAIL_MISMATCH)
            moects__buf_printf(b, " (%" PRId64 " mismatches)", r->mismatches);
        if (r->reason[0]) moects__buf_printf(b, ": %s", r->reason);
    }
}

static void header_line(moects__buf *b, const table *t, const char *run_path, int html)
{
    const moects_run *run = t->run;
    if (run) {
        moects__buf_add(b, "Run ");
        if (html) {
            moects__buf_add(b, "<code>");
            moects__buf_html(b, run_path);
            moects__buf_add(b, "</code>: commit <code>");
            moects__buf_html(b, run->commit[0] ? run->commit : "unknown");
            moects__buf_add(b, "</code>");
        } else {
            moects__buf_add(b, "`");
            moects__buf_md_code(b, run_path);
            moects__buf_add(b, "`: commit `");
            moects__buf_md_code(b, run->commit[0] ? run->commit : "unknown");
            moects__buf_add(b, "`");
        }
        moects__buf_add(b, ", ");
        if (run->date[0]) (html ? moects__buf_html : moects__buf_md)(b, run->date);
        if (run->machine[0]) {
            moects__buf_add(b, " on ");
            (html ? moects__buf_html : moects__buf_md)(b, run->machine);
        }
        moects__buf_printf(b, ", %zu results", run->n);
        if (run->filter[0]) {
            moects__buf_add(b, html ? ", selection <code>" : ", selection `");
            (html ? moects__buf_html : moects__buf_md_code)(b, run->filter);
            moects__buf_add(b, html ? "</code>" : "`");
        }
        moects__buf_add(b, ". ");
    } else {
        moects__buf_add(b, "No run: each built-in kernel's supports() on the registered cases. ");
    }
    moects__buf_printf(b, "Registry: %d models x %d layouts, %zu cases (+ %zu regression cases, not in the table), from ",
                       t->nm, t->nl, t->reg->cases.n - t->regression_cases, t->regression_cases);
    if (html) {
        moects__buf_add(b, "<code>");
        moects__buf_html(b, t->reg->where);
        moects__buf_add(b, "</code>.");
    } else {
        moects__buf_add(b, "`");
        moects__buf_md_code(b, t->reg->where);
        moects__buf_add(b, "`.");
    }
}

static void count_states(table *t, int k, size_t cnt[MOECTS__CELL_COUNT])
{
    memset(cnt, 0, MOECTS__CELL_COUNT * sizeof *cnt);
    for (int m = 0; m < t->nm; m++)
        for (int l = 0; l < t->nl; l++) cnt[state_of(t, k, m, l)]++;
}

/* The anchor of a failing or refused cell: "cell-" and kernel, model, layout with every character but
 * [A-Za-z0-9] as '-'. */
static void cell_anchor(moects__buf *b, table *t, int k, int m, int l)
{
    const char *parts[3] = {t->k[k].name, t->models[m], t->layouts[l]};
    moects__buf_add(b, "cell");
    for (int i = 0; i < 3; i++) {
        moects__buf_add(b, "-");
        for (const char *c = parts[i]; *c; c++) moects__buf_addn(b, isalnum((unsigned char)*c) ? c : "-", 1);
    }
}

/* A table cell: its glyph, linked to its details when it fails or refuses (run mode). */
static void md_cell(moects__buf *b, table *t, int k, int m, int l)
{
    moects__cell_state s = state_of(t, k, m, l);
    const cell *c = at(t, k, m, l);
    size_t pass = c->n[MOECTS_PASS_EXACT] + c->n[MOECTS_PASS_BOUNDED] + c->n[MOECTS_PASS_TOLERANCE], all = 0;
    for (int v = 0; v < MOECTS_VERDICT_COUNT; v++) all += c->n[v];
    if (t->run && (s == MOECTS__CELL_FAIL || s == MOECTS__CELL_UNSUPPORTED)) {
        moects__buf_printf(b, " [%s](#", cell_md[s]);
        cell_anchor(b, t, k, m, l);
        moects__buf_add(b, ")");
    } else {
        moects__buf_printf(b, " %s", cell_md[s]);
    }
    if (all) moects__buf_printf(b, " %zu/%zu", pass, all); /* k of the cell's n cases pass */
    moects__buf_add(b, " |");
}

/* The state of the results of kernel k on model m, layout l whose case id starts with prefix (an FP4
 * format) and holds gemm ("/gemm1/"): "-" when there is none. */
static const char *sub_state(table *t, int k, int m, int l, const char *prefix, const char *gemm)
{
    size_t n[MOECTS_VERDICT_COUNT] = {0}, any = 0;
    for (size_t i = 0; i < t->run->n; i++) {
        const moects_result *r = &t->run->v[i];
        if (strcmp(r->kernel, t->k[k].name) || strcmp(r->model, t->models[m]) || strcmp(r->layout, t->layouts[l]) ||
            strncmp(r->case_id, prefix, strlen(prefix)) || !strstr(r->case_id, gemm))
            continue;
        n[r->verdict]++;
        any++;
    }
    if (!any) return "-";
    if (n[MOECTS_FAIL_MISMATCH] + n[MOECTS_FAIL_CRASH] + n[MOECTS_FAIL_TIMEOUT]) return cell_md[MOECTS__CELL_FAIL];
    if (n[MOECTS_UNSUPPORTED]) return cell_md[MOECTS__CELL_UNSUPPORTED];
    if (n[MOECTS_PASS_EXACT] + n[MOECTS_PASS_TOLERANCE]) return cell_md[MOECTS__CELL_PASS];
    return cell_md[MOECTS__CELL_NOT_RUN];
}

/* Kernel k of an op whose ids have variants (its entry's split_prefix: fp4_gemm's MXFP4 / NVFP4): the
 * variants and gemm1 / gemm2 apart, one row per (model, layout) with results. */
static void md_variant_split(moects__buf *b, table *t, int k, const moects__op_def *op)
{
    static const char *const gemm[2] = {"/gemm1/", "/gemm2/"};
    int header = 0;
    for (int m = 0; m < t->nm; m++)
        for (int l = 0; l < t->nl; l++) {
            const char *st[4];
            int any = 0;
            for (int i = 0; i < 4; i++)
                any |= strcmp(st[i] = sub_state(t, k, m, l, op->split_prefix[i / 2], gemm[i % 2]), "-") != 0;
            if (!any) continue;
            if (!header++) {
                moects__buf_add(b, "\nBy format and GEMM:\n\n| model | layout |");
                for (int i = 0; i < 4; i++) moects__buf_printf(b, " %s gemm%d |", op->split_label[i / 2], i % 2 + 1);
                moects__buf_add(b, "\n|---|---|:-:|:-:|:-:|:-:|\n");
            }
            moects__buf_add(b, "| ");
            moects__buf_md(b, t->models[m]);
            moects__buf_add(b, " | ");
            moects__buf_md(b, t->layouts[l]);
            moects__buf_add(b, " |");
            for (int i = 0; i < 4; i++) moects__buf_printf(b, " %s |", st[i]);
            moects__buf_add(b, "\n");
        }
}

/* Kernel k: each layout column whose registered cells all have no verdict because their cases were
 * skipped, with the first skip reason ("no CUDA device"). */
static void md_skip_columns(moects__buf *b, table *t, int k)
{
    for (int l = 0; l < t->nl; l++) {
        int registered = 0, other = 0;
        const char *why = NULL;
        for (int m = 0; m < t->nm; m++) {
            moects__cell_state s = state_of(t, k, m, l);
            if (s == MOECTS__CELL_NOT_REGISTERED) continue;
            registered++;
            if (s != MOECTS__CELL_NOT_RUN || !at(t, k, m, l)->n[MOECTS_SKIP]) other = 1;
        }
        if (!registered || other) continue;
        for (size_t i = 0; i < t->run->n && !why; i++) {
            const moects_result *r = &t->run->v[i];
            if (r->verdict == MOECTS_SKIP && !strcmp(r->kernel, t->k[k].name) && !strcmp(r->layout, t->layouts[l]))
                why = r->reason;
        }
        moects__buf_add(b, "\nColumn ");
        moects__buf_md(b, t->layouts[l]);
        moects__buf_add(b, " is all SKIP: ");
        moects__buf_md(b, why && why[0] ? why : "skipped");
        moects__buf_add(b, "\n");
    }
}

/* Every failing or refused cell: its cases (up to 10), each with its verdict, pattern or reason, where
 * it first differs, and its repro line. */
static void md_bad_cells(moects__buf *b, table *t)
{
    int header = 0;
    for (int k = 0; k < t->nk; k++)
        for (int m = 0; m < t->nm; m++)
            for (int l = 0; l < t->nl; l++) {
                moects__cell_state s = state_of(t, k, m, l);
                if (s != MOECTS__CELL_FAIL && s != MOECTS__CELL_UNSUPPORTED) continue;
                if (!header++) moects__buf_add(b, "\n## Failing and refused cells\n");
                moects__buf_add(b, "\n<a id=\"");
                cell_anchor(b, t, k, m, l);
                moects__buf_add(b, "\"></a>\n### `");
                moects__buf_md_code(b, t->k[k].name);
                moects__buf_add(b, "` on ");
                moects__buf_md(b, t->models[m]);
                moects__buf_add(b, " ");
                moects__buf_md(b, t->layouts[l]);
                moects__buf_printf(b, ": %s\n\n", moects__cell_name(s));
                size_t shown = 0, more = 0;
                for (size_t i = 0; i < t->run->n; i++) {
                    const moects_result *r = &t->run->v[i];
                    if (strcmp(r->kernel, t->k[k].name) || strcmp(r->model, t->models[m]) ||
                        strcmp(r->layout, t->layouts[l]) ||
                        !(moects_verdict_is_fail(r->verdict) || r->verdict == MOECTS_UNSUPPORTED))
                        continue;
                    if (shown == 10) {
                        more++;
                        continue;
                    }
                    shown++;
                    moects__buf_add(b, "- `");
                    moects__buf_md_code(b, r->case_id);
                    moects__buf_printf(b, "` %s: ", moects_verdict_name(r->verdict));
                    moects__buf_md(b, r->diag.ndims ? r->diag.pattern : r->reason[0] ? r->reason : "-");
                    if (r->diag.nfirst) {
                        char at[96], got[64], want[64];
                        moects_diag_at(&r->diag, &r->diag.first[0], at, sizeof at);
                        moects_diag_value(&r->diag, r->diag.first[0].got, got, sizeof got);
                        moects_diag_value(&r->diag, r->diag.first[0].want, want, sizeof want);
                        moects__buf_printf(b, "; %" PRId64 " mismatches, first at ", r->mismatches);
                        moects__buf_md(b, at);
                        moects__buf_add(b, ": got ");
                        moects__buf_md(b, got);
                        moects__buf_add(b, ", want ");
                        moects__buf_md(b, want);
                    }
                    moects__buf cmd = {0};
                    moects__repro_filter(&cmd, r, t->run->filter);
                    moects__buf_add(b, "\n  `");
                    moects__buf_md_code(b, cmd.s ? cmd.s : "");
                    moects__buf_add(b, "`\n");
                    moects__buf_free(&cmd);
                }
                if (more) moects__buf_printf(b, "- ... and %zu more\n", more);
            }
}

/* "\n| FIRST | layout... |" and its separator row: the head of a table with one column per layout. */
static void md_layout_head(moects__buf *b, const table *t, const char *first)
{
    moects__buf_printf(b, "\n| %s |", first);
    for (int l = 0; l < t->nl; l++) {
        moects__buf_add(b, " ");
        moects__buf_md(b, t->layouts[l]);
        moects__buf_add(b, " |");
    }
    moects__buf_add(b, "\n|---|");
    for (int l = 0; l < t->nl; l++) moects__buf_add(b, ":-:|");
    moects__buf_add(b, "\n");
}

/* One section per model: kernels (rows) x layouts (columns). */
static void md_per_model(moects__buf *b, table *t)
{
    if (!t->nk) return;
    moects__buf_add(b, "\n## Per model\n");
    for (int m = 0; m < t->nm; m++) {
        moects__buf_add(b, "\n### ");
        moects__buf_md(b, t->models[m]);
        moects__buf_add(b, "\n");
        md_layout_head(b, t, "kernel");
        for (int k = 0; k < t->nk; k++) {
            moects__buf_add(b, "| `");
            moects__buf_md_code(b, t->k[k].name);
            moects__buf_add(b, "` |");
            for (int l = 0; l < t->nl; l++) md_cell(b, t, k, m, l);
            moects__buf_add(b, "\n");
        }
    }
}

static void render_md(moects__buf *b, table *t, const char *run_path)
{
    moects__buf_add(b, "# moects shape coverage\n\n");
    header_line(b, t, run_path, 0);
    moects__buf_add(b, "\n\nCells:");
    for (int s = 0; s < MOECTS__CELL_COUNT; s++) {
        const char *name = moects__cell_name((moects__cell_state)s);
        moects__buf_printf(b, "%s %s", s ? ";" : "", cell_md[s]);
        if (!strstr(cell_md[s], name)) moects__buf_printf(b, " = %s", name);
        moects__buf_printf(b, ": %s", cell_help[s]);
    }
    moects__buf_add(b, ".\n\n| kernel | op | PASS | FAIL | UNSUPPORTED | NOT_REGISTERED | NOT_RUN | regressions passed |\n"
                       "|---|---|---:|---:|---:|---:|---:|---:|\n");
    for (int k = 0; k < t->nk; k++) {
        size_t cnt[MOECTS__CELL_COUNT];
        count_states(t, k, cnt);
        moects__buf_add(b, "| `");
        moects__buf_md_code(b, t->k[k].name);
        moects__buf_printf(b, "` | %s", moects__op_name(t->k[k].op));
        for (int s = 0; s < MOECTS__CELL_COUNT; s++) moects__buf_printf(b, " | %zu", cnt[s]);
        if (t->run) moects__buf_printf(b, " | %zu/%zu |\n", t->k[k].reg_pass, t->k[k].reg_total);
        else moects__buf_add(b, " | - |\n");
    }
    if (!t->nk) moects__buf_add(b, "| (no kernel) | | | | | | | |\n");
    for (int k = 0; k < t->nk; k++) {
        moects__buf_add(b, "\n## `");
        moects__buf_md_code(b, t->k[k].name);
        moects__buf_printf(b, "` (%s)\n", moects__op_name(t->k[k].op));
        md_layout_head(b, t, "model");
        for (int m = 0; m < t->nm; m++) {
            moects__buf_add(b, "| ");
            moects__buf_md(b, t->models[m]);
            moects__buf_add(b, " |");
            for (int l = 0; l < t->nl; l++) md_cell(b, t, k, m, l);
            moects__buf_add(b, "\n");
        }
        const moects__op_def *op = moects__op(t->k[k].op);
        if (t->run && op && op->split_prefix) md_variant_split(b, t, k, op);
        if (t->run) md_skip_columns(b, t, k);
    }
    if (t->run) md_bad_cells(b, t);
    md_per_model(b, t);
}

/* SVG heat map of kernel k: models rows x layouts columns. */
#define CW 40
#define CH 20
#define GAP 2
#define GROUP_GAP 10
#define TOP 30

static int col_x(table *t, int l, int lw)
{
    int x = lw + l * (CW + GAP);
    for (int j = 1; j <= l; j++)
        if (tolower((unsigned char)t->layouts[j][0]) != tolower((unsigned char)t->layouts[j - 1][0])) x += GROUP_GAP;
    return x;
}

static void render_svg(moects__buf *b, table *t, int k)
{
    size_t maxlen = 6;
    for (int m = 0; m < t->nm; m++)
        if (strlen(t->models[m]) > maxlen) maxlen = strlen(t->models[m]);
    int lw = 14 + (int)(maxlen * 13 / 2); /* 12px DejaVu Sans: about 6.5px a character */
    int w = (t->nl ? col_x(t, t->nl - 1, lw) + CW : lw) + 8, h = TOP + t->nm * (CH + GAP) + 6;
    moects__buf_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"heat\" width=\"%d\" height=\"%d\" "
                          "viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"coverage of ", w, h, w, h);
    moects__buf_html(b, t->k[k].name);
    moects__buf_add(b, "\"><title>");
    moects__buf_html(b, t->k[k].name);
    moects__buf_add(b, ": models (rows) x layouts (columns)</title>\n");
    /* row stripes and labels */
    for (int m = 0; m < t->nm; m++) {
        int y = TOP + m * (CH + GAP);
        if (m % 2) moects__buf_printf(b, "<rect x=\"0\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f4f6f8\"/>", y - 1, w - 8, CH + 2);
        moects__buf_printf(b, "<text class=\"row\" x=\"%d\" y=\"%d\">", lw - 8, y + CH - 6);
        moects__buf_html(b, t->models[m]);
        moects__buf_add(b, "</text>\n");
    }
    /* column labels, grouped tp / ep */
    for (int l = 0; l < t->nl; l++) {
        moects__buf_printf(b, "<text class=\"col\" x=\"%d\" y=\"%d\">", col_x(t, l, lw) + CW / 2, TOP - 8);
        moects__buf_html(b, t->layouts[l]);
        moects__buf_add(b, "</text>");
    }
    moects__buf_add(b, "\n");
    moects__buf detail = {0};
    for (int m = 0; m < t->nm; m++)
        for (int l = 0; l < t->nl; l++) {
            moects__cell_state s = state_of(t, k, m, l);
            int x = col_x(t, l, lw), y = TOP + m * (CH + GAP);
            detail.n = 0;
            cell_detail(&detail, t, k, m, l);
            int link = t->run && (s == MOECTS__CELL_FAIL || s == MOECTS__CELL_UNSUPPORTED);
            if (link) { /* to its row in the table of cells failing or refused */
                moects__buf_add(b, "<a href=\"#");
                cell_anchor(b, t, k, m, l);
                moects__buf_add(b, "\">");
            }
            moects__buf_printf(b, "<g class=\"cell s%d\"><title>", (int)s);
            moects__buf_html(b, detail.s ? detail.s : "");
            moects__buf_printf(b, "</title><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"3\" fill=\"%s\"%s/>",
                               x, y, CW, CH, cell_color[s],
                               s == MOECTS__CELL_NOT_RUN ? " stroke=\"#6b8db5\" stroke-dasharray=\"3 2\"" : "");
            if (cell_glyph[s][0])
                moects__buf_printf(b, "<text x=\"%d\" y=\"%d\" fill=\"%s\">%s</text>", x + CW / 2, y + CH - 5, cell_ink[s],
                                   cell_glyph[s]);
            moects__buf_add(b, link ? "</g></a>\n" : "</g>\n");
        }
    moects__buf_free(&detail);
    moects__buf_add(b, "</svg>\n");
}

static const char css[] =
    "body{font:14px/1.45 'DejaVu Sans',Verdana,Arial,sans-serif;margin:24px 32px;color:#1d2329;background:#fff}\n"
    "h1{font-size:24px;margin:0 0 6px}h2{font-size:16px;margin:0 0 8px}h2 small{color:#667;font-weight:normal}\n"
    "code{font-family:'DejaVu Sans Mono',monospace;font-size:13px;background:#f1f3f5;padding:0 3px;border-radius:3px;white-space:nowrap}\n"
    "p.meta{color:#444;max-width:1100px}\n"
    ".legend{display:flex;flex-wrap:wrap;gap:8px 22px;margin:12px 0 18px;padding:0;list-style:none}\n"
    ".legend li{display:flex;align-items:center;gap:6px}\n"
    ".sw{display:inline-block;width:30px;height:18px;border-radius:3px;text-align:center;line-height:18px;font-size:13px}\n"
    "table{border-collapse:collapse;margin:0 0 22px}th,td{border:1px solid #d4d9de;padding:3px 9px}\n"
    "th{background:#f1f3f5;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
    "td.z{color:#aab}\n"
    ".maps{display:flex;flex-wrap:wrap;gap:26px;align-items:flex-start}\n"
    "section.map{border:1px solid #d4d9de;border-radius:8px;padding:12px 14px;background:#fff}\n"
    "svg.heat text{font-family:'DejaVu Sans',Verdana,sans-serif;font-size:12px;text-anchor:middle}\n"
    "svg.heat text.row{text-anchor:end;fill:#1d2329}svg.heat text.col{font-weight:bold;fill:#1d2329}\n"
    "svg.heat g.cell:hover rect{stroke:#000;stroke-width:2}\n"
    "details{margin:18px 0}summary{cursor:pointer;font-weight:bold}\n";

static void render_html(moects__buf *b, table *t, const char *run_path)
{
    moects__buf_add(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                       "<title>moects shape coverage</title>\n<style>\n");
    moects__buf_add(b, css);
    moects__buf_add(b, "</style>\n</head>\n<body>\n<h1>moects shape coverage</h1>\n<p class=\"meta\">");
    header_line(b, t, run_path, 1);
    moects__buf_add(b, " Hover a cell for its cases and the first failing or refused one.</p>\n<ul class=\"legend\">\n");
    for (int s = 0; s < MOECTS__CELL_COUNT; s++) {
        moects__buf_printf(b, "<li><span class=\"sw\" style=\"background:%s;color:%s%s\">%s</span><b>%s</b> %s</li>\n",
                           cell_color[s], cell_ink[s], s == MOECTS__CELL_NOT_RUN ? ";outline:1px dashed #6b8db5" : "",
                           cell_glyph[s], moects__cell_name((moects__cell_state)s), cell_help[s]);
    }
    moects__buf_add(b, "</ul>\n<table class=\"sum\">\n<thead><tr><th>kernel</th><th>op</th>");
    for (int s = 0; s < MOECTS__CELL_COUNT; s++) moects__buf_printf(b, "<th>%s</th>", moects__cell_name((moects__cell_state)s));
    moects__buf_add(b, "<th>regressions passed</th></tr></thead>\n<tbody>\n");
    for (int k = 0; k < t->nk; k++) {
        size_t cnt[MOECTS__CELL_COUNT];
        count_states(t, k, cnt);
        moects__buf_add(b, "<tr><td><code>");
        moects__buf_html(b, t->k[k].name);
        moects__buf_printf(b, "</code></td><td>%s</td>", moects__op_name(t->k[k].op));
        for (int s = 0; s < MOECTS__CELL_COUNT; s++)
            moects__buf_printf(b, "<td class=\"n%s\">%zu</td>", cnt[s] ? "" : " z", cnt[s]);
        if (t->run) moects__buf_printf(b, "<td class=\"n\">%zu/%zu</td></tr>\n", t->k[k].reg_pass, t->k[k].reg_total);
        else moects__buf_add(b, "<td class=\"n z\">-</td></tr>\n");
    }
    if (!t->nk) moects__buf_add(b, "<tr><td colspan=\"8\">no kernel</td></tr>\n");
    moects__buf_add(b, "</tbody>\n</table>\n<div class=\"maps\">\n");
    for (int k = 0; k < t->nk; k++) {
        moects__buf_add(b, "<section class=\"map\"><h2><code>");
        moects__buf_html(b, t->k[k].name);
        moects__buf_printf(b, "</code> <small>%s", moects__op_name(t->k[k].op));
        if (t->k[k].desc && t->k[k].desc->recipe) {
            moects__buf_add(b, ", ");
            moects__buf_html(b, t->k[k].desc->recipe);
        }
        moects__buf_add(b, "</small></h2>\n");
        render_svg(b, t, k);
        moects__buf_add(b, "</section>\n");
    }
    moects__buf_add(b, "</div>\n");
    /* the cells that need attention, as a table */
    size_t nbad = 0;
    moects__buf rows = {0}, detail = {0};
    for (int k = 0; k < t->nk; k++)
        for (int m = 0; m < t->nm; m++)
            for (int l = 0; l < t->nl; l++) {
                moects__cell_state s = state_of(t, k, m, l);
                if (s != MOECTS__CELL_FAIL && s != MOECTS__CELL_UNSUPPORTED) continue;
                if (++nbad > 500) continue;
                detail.n = 0;
                cell_detail(&detail, t, k, m, l);
                const char *nl = strchr(detail.s, '\n');
                moects__buf_add(&rows, "<tr id=\"");
                cell_anchor(&rows, t, k, m, l);
                moects__buf_add(&rows, "\"><td><code>");
                moects__buf_html(&rows, t->k[k].name);
                moects__buf_add(&rows, "</code></td><td>");
                moects__buf_html(&rows, t->models[m]);
                moects__buf_add(&rows, "</td><td>");
                moects__buf_html(&rows, t->layouts[l]);
                moects__buf_printf(&rows, "</td><td>%s</td><td>", moects__cell_name(s));
                for (const char *p = nl ? nl + 1 : ""; *p;) { /* lines of the detail, <br> between */
                    const char *e = strchr(p, '\n');
                    char line[512];
                    snprintf(line, sizeof line, "%.*s", (int)(e ? e - p : (long)strlen(p)), p);
                    moects__buf_html(&rows, line);
                    if (!e) break;
                    moects__buf_add(&rows, "<br>");
                    p = e + 1;
                }
                const cell *c = at(t, k, m, l);
                if (t->run && c->first_bad >= 0) { /* the first bad case's repro line */
                    moects__buf cmd = {0};
                    moects__repro_filter(&cmd, &t->run->v[c->first_bad], t->run->filter);
                    moects__buf_add(&rows, "<br><code>");
                    moects__buf_html(&rows, cmd.s ? cmd.s : "");
                    moects__buf_add(&rows, "</code>");
                    moects__buf_free(&cmd);
                }
                moects__buf_add(&rows, "</td></tr>\n");
            }
    moects__buf_printf(b, "<details id=\"attention\"%s><summary>%zu cells failing or refused</summary>\n", nbad && nbad <= 60 ? " open" : "",
                       nbad);
    if (nbad) {
        moects__buf_add(b, "<table class=\"bad\"><thead><tr><th>kernel</th><th>model</th><th>layout</th><th>state</th>"
                           "<th>cases</th></tr></thead>\n<tbody>\n");
        moects__buf_add(b, rows.s ? rows.s : "");
        if (nbad > 500) moects__buf_printf(b, "<tr><td colspan=\"5\">and %zu more</td></tr>\n", nbad - 500);
        moects__buf_add(b, "</tbody></table>\n");
    }
    moects__buf_add(b, "</details>\n</body>\n</html>\n");
    moects__buf_free(&rows);
    moects__buf_free(&detail);
}

static int cmd_table(const char *run_path, const char *out_dir, const char *root, const char *registry_dir)
{
    char err[1024];
    moects_run run = {0};
    registry reg;
    table t = {0};
    moects__buf md = {0}, html = {0};
    int rc = 2;
    if (run_path && moects_results_read(run_path, &run, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    if (registry_load(&reg, registry_dir, root, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        goto out;
    }
    if (!run_path && registry_has_models(&reg, registry_dir)) goto out; /* a run's cells need no registry */
    if (table_build(&t, &reg, run_path ? &run : NULL)) {
        fprintf(stderr, "moects coverage: out of memory\n");
        goto out;
    }
    char dir[4096];
    if (out_dir) {
        snprintf(dir, sizeof dir, "%s", out_dir);
    } else if (run_path && strrchr(run_path, '/')) {
        snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(run_path, '/') - run_path), run_path);
        if (!dir[0]) strcpy(dir, "/");
    } else {
        strcpy(dir, ".");
    }
    if (dir_writable(out_dir ? "--out" : "report directory", dir)) goto out;
    render_md(&md, &t, run_path ? run_path : "");
    render_html(&html, &t, run_path ? run_path : "");
    char path[4200];
    snprintf(path, sizeof path, "%s/coverage.md", dir);
    if (moects__buf_write(&md, path, err, sizeof err)) {
        fprintf(stderr, "moects coverage: %s\n", err);
        goto out;
    }
    snprintf(path, sizeof path, "%s/coverage.html", dir);
    if (moects__buf_write(&html, path, err, sizeof err)) {
        fprintf(stderr, "moects coverage: %s\n", err);
        goto out;
    }
    fprintf(stderr, "moects coverage: %d kernels x %d models x %d layouts -> %s/coverage.md, %s/coverage.html\n", t.nk,
            t.nm, t.nl, dir, dir);
    rc = 0;
out:
    moects__buf_free(&md);
    moects__buf_free(&html);
    table_free(&t);
    registry_free(&reg);
    moects_run_free(&run);
    return rc;
}

/* ---- pre-launch check ---- */

/* "ep_gather" or "fp4_gemm.mxfp4": the first segment of the case id */
static void op_of(const moects_case *c, char *dst, size_t cap)
{
    const char *slash = strchr(c->id, '/');
    size_t n = slash ? (size_t)(slash - c->id) : strlen(c->id);
    snprintf(dst, cap, "%.*s", (int)n, c->id);
}

static void shape_key(const moects_case *c, char *dst, size_t cap)
{
    const moects__op_def *op = moects__op(c->op);
    if (op) op->shape_key(c, dst, cap);
    else snprintf(dst, cap, "?");
}

typedef struct {
    char **v;
    size_t n, cap;
    int sorted;
} strset;

static int set_add(strset *s, const char *x)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        char **nv = realloc(s->v, cap * sizeof *nv);
        if (!nv) return -1;
        s->v = nv;
        s->cap = cap;
    }
    if (!(s->v[s->n] = strdup(x))) return -1;
    s->n++;
    s->sorted = 0;
    return 0;
}

static int cmp_pstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int set_has(strset *s, const char *x)
{
    if (!s->sorted) {
        if (s->n) qsort(s->v, s->n, sizeof *s->v, cmp_pstr);
        s->sorted = 1;
    }
    return s->n && bsearch(&x, s->v, s->n, sizeof *s->v, cmp_pstr) != NULL;
}

static void set_free(strset *s)
{
    for (size_t i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* The dims of case c one by one, "op|H=3584", for the "new" note. */
static int dims_of(const moects_case *c, char out[3][96])
{
    char op[64];
    op_of(c, op, sizeof op);
    const moects__op_def *d = moects__op(c->op);
    return d ? d->dims(c, op, out) : 0;
}

static void norm_name(const char *s, char *d, size_t cap)
{
    size_t i = 0;
    for (; *s && i + 1 < cap; s++) d[i++] = *s == '_' ? '-' : (char)tolower((unsigned char)*s);
    d[i] = '\0';
}

typedef struct {
    char op[64], key[96], layouts[128], example[192];
    size_t ncases;
    const char *kernel; /* refusals */
    char why[200];
} finding;

typedef struct {
    finding *v;
    size_t n, cap;
} findings;

static finding *finding_get(findings *f, const char *op, const char *key, const char *kernel, const char *why)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->v[i].op, op) && !strcmp(f->v[i].key, key) &&
            (!kernel || (!strcmp(f->v[i].kernel, kernel) && !strcmp(f->v[i].why, why))))
            return &f->v[i];
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 32;
        finding *nv = realloc(f->v, cap * sizeof *nv);
        if (!nv) return NULL;
        f->v = nv;
        f->cap = cap;
    }
    finding *x = &f->v[f->n++];
    memset(x, 0, sizeof *x);
    snprintf(x->op, sizeof x->op, "%s", op);
    snprintf(x->key, sizeof x->key, "%s", key);
    x->kernel = kernel;
    if (why) snprintf(x->why, sizeof x->why, "%s", why);
    return x;
}

static void finding_note(finding *x, const moects_case *c)
{
    if (!x->ncases++) snprintf(x->example, sizeof x->example, "%s", c->id);
    char pat[24];
    snprintf(pat, sizeof pat, "%s", c->layout);
    /* layouts as a comma list, each once */
    const char *p = x->layouts;
    size_t L = strlen(pat);
    int seen = 0;
    while ((p = strstr(p, pat))) {
        if ((p == x->layouts || p[-1] == ' ') && (p[L] == ',' || p[L] == '\0')) seen = 1;
        p += L;
    }
    if (!seen) {
        size_t n = strlen(x->layouts);
        snprintf(x->layouts + n, sizeof x->layouts - n, "%s%s", n ? ", " : "", pat);
    }
}

/* The state of one pre-launch check (`moects coverage --config`), carried through its stages. */
typedef struct {
    const char *config;
    const moects_kernel *const *bk;
    size_t nb;
    moects_model m;
    char want[40][16]; /* the layouts asked for, each once */
    int nwant, layout_cases[40];
    registry reg;
    moects_case_list mine;
    char **excluded; /* the registry's names of the model itself */
    int nexcl;
    size_t nreg, nmine, missing;
    strset keys, dims; /* the registry's shape keys and dims, by op */
    findings unc, ref;
} prelaunch;

/* Stage 1: the model and the layouts asked for (one the derivation lacks for the model is a usage
 * error naming the file, the option and why). 0, or 2 with one line. */
static int pre_model(prelaunch *x, const int *tps, int ntp, const int *eps, int nep)
{
    char err[1024];
    if (moects_model_load(x->config, &x->m, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    for (int i = 0; i < ntp + nep; i++) {
        int tp = i < ntp ? tps[i] : 0, ep = i < ntp ? 0 : eps[i - ntp];
        char name[16], why[200];
        snprintf(name, sizeof name, "%s%d", tp ? "tp" : "ep", tp ? tp : ep);
        if (!moects_layout_exists(&x->m, tp, ep, why, sizeof why)) {
            fprintf(stderr, "%s: --%.2s %d: %s\n", x->config, name, tp ? tp : ep, why);
            return 2;
        }
        int dup = 0;
        for (int j = 0; j < x->nwant; j++) dup |= !strcmp(x->want[j], name);
        if (!dup) snprintf(x->want[x->nwant++], 16, "%s", name);
    }
    return 0;
}

/* Stage 2: the registry (with model files), --out writable, the model's cases derived. 0 or 2. */
static int pre_load(prelaunch *x, const char *registry_dir, const char *root, const char *out_dir)
{
    char err[1024];
    if (registry_load(&x->reg, registry_dir, root, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    if (registry_has_models(&x->reg, registry_dir) || (out_dir && dir_writable("--out", out_dir))) return 2;
    if (moects_derive_cases(&x->m, &x->mine)) {
        fprintf(stderr, "%s: case derivation failed\n", x->config);
        return 2;
    }
    return 0;
}

/* Stage 3: the registry's shape keys and dims, without the model itself (same registry name, or same
 * hf_id). 0, or -1 out of memory. */
static int pre_registry_shapes(prelaunch *x)
{
    char mn[64], rn[64];
    norm_name(x->m.name, mn, sizeof mn);
    x->excluded = calloc((size_t)x->reg.nmodels + 1, sizeof *x->excluded);
    if (!x->excluded) return -1;
    for (int i = 0; i < x->reg.nmodels; i++) {
        norm_name(x->reg.models[i].name, rn, sizeof rn);
        if (!strcmp(rn, mn) || (x->m.hf_id[0] && !strcasecmp(x->m.hf_id, x->reg.models[i].hf_id)))
            x->excluded[x->nexcl++] = x->reg.models[i].name;
    }
    for (size_t i = 0; i < x->reg.cases.n; i++) {
        const moects_case *c = &x->reg.cases.v[i];
        int skip = 0;
        for (int e = 0; e < x->nexcl; e++) skip |= !strcmp(c->model, x->excluded[e]);
        if (skip) continue;
        x->nreg++;
        char op[64], key[96], d[3][96], k2[200];
        op_of(c, op, sizeof op);
        shape_key(c, key, sizeof key);
        snprintf(k2, sizeof k2, "%s|%s", op, key);
        if (set_add(&x->keys, k2)) return -1;
        int nd = dims_of(c, d);
        for (int j = 0; j < nd; j++)
            if (set_add(&x->dims, d[j])) return -1;
    }
    return 0;
}

/* Stage 4: each of the model's cases under the layouts asked for: uncovered by the registry, refused by
 * an honest kernel. 0, or -1 out of memory. */
static int pre_findings(prelaunch *x)
{
    for (size_t i = 0; i < x->mine.n; i++) {
        const moects_case *c = &x->mine.v[i];
        int w = -1;
        for (int j = 0; j < x->nwant; j++)
            if (!strcmp(c->layout, x->want[j])) w = j;
        if (x->nwant && w < 0) continue;
        if (w >= 0) x->layout_cases[w]++;
        x->nmine++;
        char op[64], key[96], k2[200];
        op_of(c, op, sizeof op);
        shape_key(c, key, sizeof key);
        snprintf(k2, sizeof k2, "%s|%s", op, key);
        if (!set_has(&x->keys, k2)) {
            finding *f = finding_get(&x->unc, op, key, NULL, NULL);
            if (!f) return -1;
            finding_note(f, c);
        }
        for (size_t j = 0; j < x->nb; j++) {
            if (x->bk[j]->bug || x->bk[j]->op != c->op) continue;
            char why[200];
            if (kernel_takes(x->bk[j], c, why, sizeof why)) continue;
            finding *f = finding_get(&x->ref, op, key, x->bk[j]->name, why);
            if (!f) return -1;
            finding_note(f, c);
        }
    }
    for (int j = 0; j < x->nwant; j++) x->missing += !x->layout_cases[j];
    return 0;
}

/* The report's head: the model's dims, the layouts, the registry, the kernels; layouts without cases. */
static void pre_head(const prelaunch *x, moects__buf *b)
{
    const moects_model *m = &x->m;
    moects__buf_add(b, "# moects pre-launch check: ");
    moects__buf_md(b, m->name);
    moects__buf_add(b, "\n\nConfig `");
    moects__buf_md_code(b, x->config);
    moects__buf_add(b, "`");
    if (m->hf_id[0]) {
        moects__buf_add(b, " (");
        moects__buf_md(b, m->hf_id);
        moects__buf_add(b, ")");
    }
    moects__buf_printf(b, ": hidden %" PRId64, m->hidden_size);
    if (m->latent_size) moects__buf_printf(b, ", latent %" PRId64, m->latent_size);
    moects__buf_printf(b, ", I %" PRId64 ", E %" PRId64 ", topk %" PRId64 ", %s experts.\n\nLayouts: ",
                       m->moe_intermediate_size, m->routed_experts, m->experts_per_token, m->gated ? "gated" : "non-gated");
    if (!x->nwant) moects__buf_add(b, "all derived");
    for (int j = 0; j < x->nwant; j++)
        moects__buf_printf(b, "%s%s (%d cases)", j ? ", " : "", x->want[j], x->layout_cases[j]);
    moects__buf_printf(b, "; %zu cases of the model checked. Registry `", x->nmine);
    moects__buf_md_code(b, x->reg.where);
    moects__buf_printf(b, "`: %zu cases", x->nreg);
    if (x->nexcl) {
        moects__buf_add(b, " (without ");
        for (int e = 0; e < x->nexcl; e++) {
            moects__buf_add(b, e ? ", " : "");
            moects__buf_md(b, x->excluded[e]);
        }
        moects__buf_add(b, ", the model itself)");
    }
    moects__buf_add(b, ". Kernels:");
    int nk = 0;
    for (size_t j = 0; j < x->nb; j++)
        if (!x->bk[j]->bug) {
            moects__buf_add(b, nk++ ? ", `" : " `");
            moects__buf_md_code(b, x->bk[j]->name);
            moects__buf_add(b, "`");
        }
    moects__buf_add(b, nk ? ".\n" : " none built in.\n");
    size_t shown = 0;
    for (int j = 0; j < x->nwant; j++)
        if (!x->layout_cases[j]) {
            if (!shown++) moects__buf_add(b, "\n## Layouts that derive no case\n\n");
            moects__buf_printf(b, "- %s: the derivation gives no case for this model under it\n", x->want[j]);
        }
}

/* The two tables: shapes no registered case covers (with the dims no case of the op has), shapes a
 * kernel refuses (with its reason). */
static void pre_tables(prelaunch *x, moects__buf *b)
{
    moects__buf_printf(b, "\n## Shapes no registered case covers (%zu)\n\n", x->unc.n);
    if (!x->unc.n) moects__buf_add(b, "none\n");
    else moects__buf_add(b, "| op | shape | new dims | cases | layouts | example |\n|---|---|---|---:|---|---|\n");
    for (size_t i = 0; i < x->unc.n; i++) {
        const finding *f = &x->unc.v[i];
        moects__buf_printf(b, "| %s | %s | ", f->op, f->key);
        char key[96];
        snprintf(key, sizeof key, "%s", f->key);
        int nnew = 0;
        char *save = NULL;
        for (char *d = strtok_r(key, " ", &save); d; d = strtok_r(NULL, " ", &save)) {
            char k2[200];
            snprintf(k2, sizeof k2, "%s|%s", f->op, d);
            if (!set_has(&x->dims, k2)) moects__buf_printf(b, "%s%s", nnew++ ? ", " : "", d);
        }
        if (!nnew) moects__buf_add(b, "(combination)");
        moects__buf_printf(b, " | %zu | %s | `", f->ncases, f->layouts);
        moects__buf_md_code(b, f->example);
        moects__buf_add(b, "` |\n");
    }
    moects__buf_printf(b, "\n## Shapes a built-in kernel refuses (%zu)\n\n", x->ref.n);
    if (!x->ref.n) moects__buf_add(b, "none\n");
    else moects__buf_add(b, "| kernel | op | shape | reason | cases | layouts | example |\n|---|---|---|---|---:|---|---|\n");
    for (size_t i = 0; i < x->ref.n; i++) {
        const finding *f = &x->ref.v[i];
        moects__buf_add(b, "| `");
        moects__buf_md_code(b, f->kernel);
        moects__buf_printf(b, "` | %s | %s | ", f->op, f->key);
        moects__buf_md(b, f->why);
        moects__buf_printf(b, " | %zu | %s | `", f->ncases, f->layouts);
        moects__buf_md_code(b, f->example);
        moects__buf_add(b, "` |\n");
    }
}

/* The verdict line: "**FAIL**: A, B and C." (the nonzero counts) or "**PASS**: ...". 1 for FAIL. */
static int pre_verdict(const prelaunch *x, moects__buf *b)
{
    if (!x->unc.n && !x->ref.n && !x->missing) {
        moects__buf_add(b, "\n**PASS**: every shape is covered by a registered case and taken by every built-in kernel.\n");
        return 0;
    }
    char part[3][96];
    int np = 0;
    if (x->unc.n) snprintf(part[np++], sizeof part[0], "%zu shape%s uncovered", x->unc.n, x->unc.n == 1 ? "" : "s");
    if (x->ref.n)
        snprintf(part[np++], sizeof part[0], "%zu shape%s refused by a built-in kernel", x->ref.n,
                 x->ref.n == 1 ? "" : "s");
    if (x->missing)
        snprintf(part[np++], sizeof part[0], "%zu layout%s without cases", x->missing, x->missing == 1 ? "" : "s");
    moects__buf_add(b, "\n**FAIL**: ");
    for (int j = 0; j < np; j++) moects__buf_printf(b, "%s%s", j == 0 ? "" : (j == np - 1 ? " and " : ", "), part[j]);
    moects__buf_add(b, ".\n");
    return 1;
}

static void pre_free(prelaunch *x)
{
    free(x->excluded);
    free(x->unc.v);
    free(x->ref.v);
    set_free(&x->keys);
    set_free(&x->dims);
    moects_case_list_free(&x->mine);
    registry_free(&x->reg);
}

/* The pre-launch check: stages, then the report (to --out DIR/prelaunch.md first: a failed write
 * prints nothing; then stdout). 0 pass, 1 fail, 2 bad input or out of memory. */
static int cmd_prelaunch(const char *config, const moects_kernel *const *bk, size_t nb, const int *tps, int ntp,
                         const int *eps, int nep, const char *registry_dir, const char *root, const char *out_dir)
{
    static prelaunch x; /* large (sets, findings, the model): not on the stack */
    memset(&x, 0, sizeof x);
    x.config = config, x.bk = bk, x.nb = nb;
    moects__buf b = {0};
    int rc = pre_model(&x, tps, ntp, eps, nep);
    if (!rc) rc = pre_load(&x, registry_dir, root, out_dir);
    if (!rc && (pre_registry_shapes(&x) || pre_findings(&x))) {
        fprintf(stderr, "moects coverage: out of memory\n");
        rc = 2;
    }
    if (!rc) {
        pre_head(&x, &b);
        pre_tables(&x, &b);
        int bad = pre_verdict(&x, &b);
        char err[1024], path[4200];
        if (out_dir) snprintf(path, sizeof path, "%s/prelaunch.md", out_dir);
        if (b.oom) {
            fprintf(stderr, "moects coverage: out of memory\n");
            rc = 2;
        } else if (out_dir && moects__buf_write(&b, path, err, sizeof err)) {
            fprintf(stderr, "moects coverage: --out: %s\n", err);
            rc = 2;
        } else {
            fputs(b.s, stdout);
            fflush(stdout);
            rc = bad;
        }
    }
    moects__buf_free(&b);
    pre_free(&x);
    return rc;
}

/* ---- arguments ---- */

static int usage_to(FILE *f)
{
    fprintf(f, "usage: moects coverage [RUN_RESULTS] [--out DIR] [--root DIR] [--registry DIR]\n"
               "       moects coverage --config CONFIG.json [--tp N]... [--ep N]... [--registry DIR] [--out DIR]\n"
               "                       [--kernel-lib LIB.so]... [--kernel GLOB]...\n"
               "The models x layouts x kernels table of a run (coverage.md, coverage.html), or without a run each\n"
               "built-in kernel's supports() on the registered cases; with --config, the pre-launch check of a\n"
               "model not registered yet (the kernel shapes it needs that no case covers or a kernel refuses).\n"
               "  RUN_RESULTS         a run's results.json (default: none, supports() only)\n"
               "  --out DIR           write the reports there (default: RUN_RESULTS's directory, else \".\";\n"
               "                      --config: stdout only)\n"
               "  --root DIR          where cases/ is (default: $MOECTS_ROOT, else the source tree)\n"
               "  --registry DIR      another registry (a source tree or a directory of model files)\n"
               "  --config FILE       a registry file or a raw Hugging Face config.json\n"
               "  --tp N, --ep N      the layouts to check (default: every layout the derivation has)\n"
               "  --kernel-lib LIB.so kernels of a library too (default: the built-in kernels only)\n"
               "  --kernel GLOB       only the kernels it matches (default: all; mutants never count)\n"
               "Exit 0; 1 when --config finds a shape uncovered or refused; 2 bad input.\n");
    return 2;
}
static int usage(void) { return usage_to(stderr); }

static int parse_size(const char *opt, const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || end == s || errno || v < 1 || v > 1024) {
        fprintf(stderr, "moects coverage: %s: \"%s\" is not a parallel size (1..1024)\n", opt, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* The kernels a pre-launch check asks: the built-in ones and those of each --kernel-lib, kept when a
 * --kernel glob matches (all when none). 0, or 2 with one line (a library that does not load). */
static int prelaunch_kernels(char **libs, int nlibs, char **globs, int nglobs, const moects_kernel ***out, size_t *n)
{
    size_t nb;
    const moects_kernel *const *bk = moects_builtin_kernels(&nb);
    const moects_kernel **v = malloc((nb + 1) * sizeof *v);
    if (!v) return 2;
    memcpy(v, bk, nb * sizeof *v);
    *n = nb;
    char err[1024];
    for (int i = 0; i < nlibs; i++)
        if (moects_plugin_load(libs[i], &v, n, err, sizeof err) != 0) {
            fprintf(stderr, "moects coverage: --kernel-lib %s\n", err);
            free(v);
            return 2;
        }
    size_t m = 0;
    for (size_t i = 0; i < *n; i++) {
        int keep = !nglobs;
        for (int g = 0; g < nglobs && !keep; g++) keep = fnmatch(globs[g], v[i]->name, 0) == 0;
        if (keep) v[m++] = v[i];
    }
    *n = m;
    *out = v;
    return 0;
}

int moects_cmd_coverage(int argc, char **argv)
{
    const char *run_path = NULL, *out_dir = NULL, *root = NULL, *registry_dir = NULL, *config = NULL;
    int tps[20], eps[20], ntp = 0, nep = 0, nlibs = 0, nglobs = 0;
    char *libs[16], *globs[16];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--out") && more) out_dir = argv[++i];
        else if (!strcmp(a, "--root") && more) root = argv[++i];
        else if (!strcmp(a, "--registry") && more) registry_dir = argv[++i];
        else if (!strcmp(a, "--config") && more) config = argv[++i];
        else if ((!strcmp(a, "--kernel-lib") || !strcmp(a, "--kernel")) && more) {
            int lib = !strcmp(a, "--kernel-lib"), *n = lib ? &nlibs : &nglobs;
            if (*n == 16) {
                fprintf(stderr, "moects coverage: %s: more than 16\n", a);
                return 2;
            }
            (lib ? libs : globs)[(*n)++] = argv[++i];
        }
        else if ((!strcmp(a, "--tp") || !strcmp(a, "--ep")) && more) {
            int tp = a[2] == 't', *n = tp ? &ntp : &nep;
            if (*n == 20) {
                fprintf(stderr, "moects coverage: %s: more than 20 sizes\n", a);
                return 2;
            }
            if (parse_size(a, argv[++i], tp ? &tps[*n] : &eps[*n])) return 2;
            ++*n;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_to(stdout);
            return 0;
        } else if (a[0] == '-' || run_path) {
            static const char *const valued[] = {"--out", "--root", "--registry", "--config", "--tp", "--ep",
                                                 "--kernel-lib", "--kernel", NULL};
            moects_bad_arg("coverage", a, valued);
            return usage();
        } else {
            run_path = a;
        }
    }
    if (!root) root = moects__source_root();
    if (config) {
        if (run_path) {
            fprintf(stderr, "moects coverage: --config checks a model, not a run: drop \"%s\"\n", run_path);
            return usage();
        }
        const moects_kernel **ks = NULL;
        size_t nks = 0;
        if (prelaunch_kernels(libs, nlibs, globs, nglobs, &ks, &nks)) return 2;
        int rc = cmd_prelaunch(config, ks, nks, tps, ntp, eps, nep, registry_dir, root, out_dir);
        free(ks);
        return rc;
    }
    if (nlibs || nglobs) {
        fprintf(stderr, "moects coverage: --kernel-lib/--kernel choose the kernels of --config\n");
        return usage();
    }
    if (ntp || nep) {
        fprintf(stderr, "moects coverage: --tp/--ep need --config\n");
        return usage();
    }
    return cmd_table(run_path, out_dir, root, registry_dir);
}
