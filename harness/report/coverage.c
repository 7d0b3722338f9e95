/* coverage.c: the shape-coverage report of `moects coverage` (harness/cli/cmd_coverage.c says the
 * command; DESIGN.md "Harness", Coverage): a models x layouts table per honest kernel from a run's
 * verdicts or the kernels' supports(), as coverage.md and coverage.html. The pre-launch check is
 * prelaunch.c. */
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

#include "coverage_internal.h"
#include "moects_commands.h"
#include "moects_inputs.h"
#include "moects_op.h"
#include "moects_registry.h"
#include "moects_runner.h"
#include "reports_internal.h"

/* Slots of the registered-op flags of one (model, layout): one per moects_op value, 0 unused. */
enum {
    OP_SLOTS = 1
#define MOECTS_OP_DEF(e, n, def) +1
#include "ops/ops.def"
#undef MOECTS_OP_DEF
};

/* ---- registry ---- */


static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* dir: NULL (built-in of root), a source tree with cases/models, or a directory of model files. */
int moects__cov_registry_load(moects__cov_registry *r, const char *dir, const char *root, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    char models_dir[4096];
    const char *tree = dir ? dir : root;
    snprintf(models_dir, sizeof models_dir, "%s/cases/models", tree);
    if (!dir || is_dir(models_dir)) {
        snprintf(r->where, sizeof r->where, "%s/cases", tree);
        snprintf(r->models_dir, sizeof r->models_dir, "%s", models_dir);
        if ((r->nmodels = moects__models_load_dir(models_dir, &r->models, err, errlen)) < 0) return -1;
        return moects__cases_registry(tree, &r->cases, err, errlen);
    }
    if (!is_dir(dir)) {
        snprintf(err, errlen, "%s: --registry: not a directory", dir);
        return -1;
    }
    snprintf(r->where, sizeof r->where, "%s", dir);
    snprintf(r->models_dir, sizeof r->models_dir, "%s", dir);
    if ((r->nmodels = moects__models_load_dir(dir, &r->models, err, errlen)) < 0) return -1;
    for (int i = 0; i < r->nmodels; i++)
        if (moects__derive_cases(&r->models[i], &r->cases)) {
            snprintf(err, errlen, "%s: %s: case derivation failed", dir, r->models[i].name);
            return -1;
        }
    return 0;
}

/* A registry without model files checks nothing: -1 with "DIR: --registry: no model files (*.json)". */
int moects__cov_registry_has_models(const moects__cov_registry *r, const char *registry_dir)
{
    if (r->nmodels > 0) return 0;
    fprintf(stderr, "%s: %s: no model files (*.json)\n", registry_dir ? registry_dir : r->models_dir,
            registry_dir ? "--registry" : "built-in registry");
    return -1;
}

/* moects__dir_writable (as `moects run` checks --out): 0, or -1 with one line
 * "moects coverage: OPT: DIR: problem". */
int moects__cov_dir_writable(const char *opt, const char *dir)
{
    char err[4400];
    if (!moects__dir_writable(dir, err, sizeof err)) return 0;
    fprintf(stderr, "moects coverage: %s: %s\n", opt, err);
    return -1;
}

void moects__cov_registry_free(moects__cov_registry *r)
{
    moects__case_list_free(&r->cases);
    free(r->models);
    memset(r, 0, sizeof *r);
}

static int is_regression(const moects_case *c) { return !strcmp(c->model, "regression"); }

/* ---- case -> kernel shape ---- */

/* 1 when kernel k takes case c; else 0 with the reason in why. */
int moects__cov_kernel_takes(const moects_kernel *k, const moects_case *c, char *why, size_t wl)
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
    const moects__cov_registry *reg;
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
    if (!t->registered[((size_t)m * t->nl + l) * OP_SLOTS + t->k[k].op]) return MOECTS__CELL_NOT_REGISTERED;
    if (moects__fail_count(c->n)) return MOECTS__CELL_FAIL;
    if (c->n[MOECTS_UNSUPPORTED]) return MOECTS__CELL_UNSUPPORTED;
    size_t pass = moects__pass_count(c->n), all = 0;
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

static int table_build(table *t, const moects__cov_registry *reg, const moects_run *run)
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
    const moects_kernel *const *bk = moects__builtin_kernels(&nb);
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
    t->registered = calloc((size_t)(t->nm ? t->nm : 1) * (t->nl ? t->nl : 1) * OP_SLOTS, 1);
    if (!t->cells || !t->registered) return -1;
    for (size_t i = 0; i < ncell; i++) t->cells[i].first_bad = -1;

    for (size_t i = 0; i < reg->cases.n; i++) {
        const moects_case *c = &reg->cases.v[i];
        if (is_regression(c)) continue;
        int m = find_str(t->models, t->nm, c->model), l = find_str(t->layouts, t->nl, c->layout);
        t->registered[((size_t)m * t->nl + l) * OP_SLOTS + c->op] = 1;
        for (int k = 0; k < t->nk; k++) {
            if (t->k[k].op != c->op) continue;
            cell *x = at(t, k, m, l);
            x->registered++;
            if (run || !t->k[k].desc) continue;
            char why[160];
            if (moects__cov_kernel_takes(t->k[k].desc, c, why, sizeof why)) {
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
        t->registered[((size_t)m * t->nl + l) * OP_SLOTS + r->op] = 1;
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
            moects__buf_printf(b, "%s%zu %s", first ? "; run: " : ", ", c->n[v], moects__verdict_name((moects_verdict)v));
            first = 0;
        }
    if (first) moects__buf_add(b, "; no verdict in the run");
    if (c->first_bad >= 0) {
        const moects_result *r = &t->run->v[c->first_bad];
        moects__buf_printf(b, "\nfirst: %s: %s", r->case_id, moects__verdict_name(r->verdict));
        if (r->verdict == MOECTS_FAIL_MISMATCH)
            moects__buf_printf(b, " (%" PRId64 " mismatches)", r->mismatches);
        if (r->reason[0]) moects__buf_printf(b, ": %s", r->reason);
    }
}

static void header_line(moects__buf *b, const table *t, const char *run_path_given, int html)
{
    const moects_run *run = t->run;
    char run_path[4096], where[4096]; /* no absolute path of this machine in the page */
    moects__path_shown(run_path_given, run_path, sizeof run_path);
    moects__path_shown(t->reg->where, where, sizeof where);
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
        moects__buf_html(b, where);
        moects__buf_add(b, "</code>.");
    } else {
        moects__buf_add(b, "`");
        moects__buf_md_code(b, where);
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
    size_t pass = moects__pass_count(c->n), all = 0;
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
    if (n[MOECTS_PASS_EXACT] + n[MOECTS_PASS_TOLERANCE] + n[MOECTS_PASS_TIE]) return cell_md[MOECTS__CELL_PASS];
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
                    moects__buf_printf(b, "` %s: ", moects__verdict_name(r->verdict));
                    moects__buf_md(b, r->diag.ndims ? r->diag.pattern : r->reason[0] ? r->reason : "-");
                    if (r->diag.nfirst) {
                        char at[96], got[64], want[64];
                        moects__diag_at(&r->diag, &r->diag.first[0], at, sizeof at);
                        moects__diag_value(&r->diag, r->diag.first[0].got, got, sizeof got);
                        moects__diag_value(&r->diag, r->diag.first[0].want, want, sizeof want);
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
    moects__buf_add(b, "\n");
    if (t->run) moects__cov_failed_section(b, t->run, run_path, 0); /* what failed first, then the tables */
    moects__buf_add(b, "\n## Coverage\n\nCells:");
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
    moects__buf_add(b, " Hover a cell for its cases and the first failing or refused one.</p>\n");
    if (t->run) moects__cov_failed_section(b, t->run, run_path, 1); /* what failed first, then the maps */
    moects__buf_add(b, "<h2>Coverage</h2>\n<ul class=\"legend\">\n");
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

int moects__coverage_table(const char *run_path, const char *out_dir, const char *root, const char *registry_dir)
{
    char err[1024];
    moects_run run = {0};
    moects__cov_registry reg;
    table t = {0};
    moects__buf md = {0}, html = {0};
    int rc = 2;
    if (run_path && moects__results_read(run_path, &run, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    if (moects__cov_registry_load(&reg, registry_dir, root, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        goto out;
    }
    if (!run_path && moects__cov_registry_has_models(&reg, registry_dir)) goto out; /* a run's cells need no moects__cov_registry */
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
    if (moects__cov_dir_writable(out_dir ? "--out" : "report directory", dir)) goto out;
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
    moects__cov_registry_free(&reg);
    moects__run_free(&run);
    return rc;
}
