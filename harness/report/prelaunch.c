/* prelaunch.c: the pre-launch check of `moects coverage --config` (harness/cli/cmd_coverage.c
 * says the command): a model's derived shapes that no registered case covers, and those an honest
 * kernel refuses. */
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
    moects__cov_registry reg;
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
    if (moects__model_load(x->config, &x->m, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    for (int i = 0; i < ntp + nep; i++) {
        int tp = i < ntp ? tps[i] : 0, ep = i < ntp ? 0 : eps[i - ntp];
        char name[16], why[200];
        snprintf(name, sizeof name, "%s%d", tp ? "tp" : "ep", tp ? tp : ep);
        if (!moects__layout_exists(&x->m, tp, ep, why, sizeof why)) {
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
    if (moects__cov_registry_load(&x->reg, registry_dir, root, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    if (moects__cov_registry_has_models(&x->reg, registry_dir) || (out_dir && moects__cov_dir_writable("--out", out_dir))) return 2;
    if (moects__derive_cases(&x->m, &x->mine)) {
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
            if (moects__cov_kernel_takes(x->bk[j], c, why, sizeof why)) continue;
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
    char where[4096]; /* no absolute path of this machine in the report */
    moects__path_shown(x->config, where, sizeof where);
    moects__buf_add(b, "\n\nConfig `");
    moects__buf_md_code(b, where);
    moects__buf_add(b, "`");
    if (m->hf_id[0]) {
        moects__buf_add(b, " (");
        moects__buf_md(b, m->hf_id);
        moects__buf_add(b, ")");
    }
    moects__buf_printf(b, ": hidden %" PRId64, m->hidden_size);
    if (m->latent_size) moects__buf_printf(b, ", latent %" PRId64, m->latent_size);
    moects__buf_printf(b, ", I %" PRId64 ", E %" PRId64 ", topk %" PRId64 ", %s experts, activation %s",
                       m->moe_intermediate_size, m->routed_experts, m->experts_per_token,
                       m->gated ? "gated" : "non-gated", moects__activation_name(m->activation));
    const char *sep = " (";
    if (m->has_activation_limit) moects__buf_printf(b, "%slimit %g", sep, (double)m->activation_limit), sep = ", ";
    if (m->has_activation_alpha) moects__buf_printf(b, "%salpha %g", sep, (double)m->activation_alpha), sep = ", ";
    if (*sep == ',') moects__buf_add(b, ")");
    if (m->expert_bias) moects__buf_add(b, ", expert biases");
    if (m->router_weight_on_input) moects__buf_add(b, ", router weight on the input");
    moects__buf_add(b, ".\n\nLayouts: ");
    if (!x->nwant) moects__buf_add(b, "all derived");
    for (int j = 0; j < x->nwant; j++)
        moects__buf_printf(b, "%s%s (%d cases)", j ? ", " : "", x->want[j], x->layout_cases[j]);
    moects__buf_printf(b, "; %zu cases of the model checked. Registry `", x->nmine);
    moects__path_shown(x->reg.where, where, sizeof where);
    moects__buf_md_code(b, where);
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
    moects__case_list_free(&x->mine);
    moects__cov_registry_free(&x->reg);
}

/* The pre-launch check: stages, then the report (to --out DIR/prelaunch.md first: a failed write
 * prints nothing; then stdout). 0 pass, 1 fail, 2 bad input or out of memory. */
int moects__coverage_prelaunch(const char *config, const moects_kernel *const *bk, size_t nb, const int *tps, int ntp,
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
