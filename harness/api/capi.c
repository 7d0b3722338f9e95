/* capi.c: the public C API of libmoects (include/moects/moects.h) over the harness: case selection, case
 * data, references, judging, results.json. DESIGN.md "Kernels from Python, and from any language".
 * Judging runs the runner's own task body (moects__runner_task) with a kernel that hands back the
 * caller's bytes, so a verdict here is the verdict `moects run` gives. */
#include "moects.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "capi_internal.h"
#include "moects_op.h"
#include "moects_cases.h"
#include "moects_harness.h"
#include "moects_inputs.h"
#include "moects_judge.h"
#include "moects_ref.h"
#include "moects_runner.h"
#include "moects_runner_internal.h"
#include "moects_tap.h"
#include "reports_internal.h"

const char *moects_version(void) { return MOECTS_VERSION; }
int moects_api_version(void) { return MOECTS_API_VERSION; }

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *moects_default_root(void)
{
    static char root[4096];
    const char *e = getenv("MOECTS_ROOT");
    if (e && *e) return e;
    if ((e = moects__bundled_root()) != NULL) return e; /* an installed or pip-bundled copy's own registry */
    char p[4200];
#ifdef MOECTS_SOURCE_DIR
    snprintf(p, sizeof p, "%s/cases", MOECTS_SOURCE_DIR);
    if (is_dir(p)) return MOECTS_SOURCE_DIR;
#endif
#ifdef MOECTS_DATADIR
    snprintf(p, sizeof p, "%s/cases", MOECTS_DATADIR);
    if (is_dir(p)) return snprintf(root, sizeof root, "%s", MOECTS_DATADIR), root;
#endif
    return ".";
}

/* ---------------------------------------------------------------- cases ---- */

struct moects_caselist {
    moects_case_list l;
    char **json; /* per case, lazily */
};

/* The cases of one model file, derived (all layouts or only tp<tp> / ep<ep>). */
static int config_cases(const char *config, int tp, int ep, moects_case_list *all)
{
    moects_model m;
    char err[1024];
    if (moects__model_load(config, &m, err, sizeof err) != 0) return moects__set_error("%s", err), -1;
    if (moects__derive_cases(&m, all) != 0) return moects__set_error("%s: out of memory deriving cases", config), -1;
    if (!tp && !ep) return 0;
    char why[256] = "";
    if (!moects__layout_exists(&m, tp, ep, why, sizeof why))
        return moects__set_error("%s: %s %d: %s", config, tp ? "tp" : "ep", tp ? tp : ep, why), -1;
    char want[16];
    snprintf(want, sizeof want, "%s%d", tp ? "tp" : "ep", tp ? tp : ep);
    size_t k = 0;
    for (size_t i = 0; i < all->n; i++)
        if (!strcmp(all->v[i].layout, want)) all->v[k++] = all->v[i];
    all->n = k;
    return 0;
}

moects_caselist *moects_cases_select(const char *root, const char *config, int tp, int ep, const char *tiers,
                                     const char *const *globs, size_t nglobs)
{
    unsigned tmask;
    if (moects__tiers_parse(tiers && *tiers ? tiers : "smoke", &tmask) != 0)
        return moects__set_error("tiers: unknown tier in \"%s\" (smoke, full, large, local, all)", tiers), NULL;
    if (tp < 0 || ep < 0 || (tp && ep)) return moects__set_error("tp %d, ep %d: give one of them, >= 0", tp, ep), NULL;
    if ((tp || ep) && !config) return moects__set_error("tp/ep: only with a config file"), NULL;
    moects_case_list all = {0};
    char err[1024];
    if (config) {
        if (config_cases(config, tp, ep, &all) != 0) return moects__case_list_free(&all), NULL;
    } else if (moects__cases_registry(root ? root : moects_default_root(), &all, err, sizeof err) != 0) {
        moects__set_error("%s", err);
        moects__case_list_free(&all);
        return NULL;
    }
    /* the one rule (moects__cases_pick), as `moects list` applies it: no tiers given: smoke (smoke and
     * full from a config), and an id named exactly whatever its tier */
    const int given = tiers && *tiers;
    const moects_selection sel_rule = {globs, nglobs, given ? tmask : config ? MOECTS_TIER_SMOKE | MOECTS_TIER_FULL
                                                                         : MOECTS_TIER_SMOKE,
                                       given || config, NULL, 0};
    moects_caselist *l = calloc(1, sizeof *l);
    char *sel = calloc(all.n + 1, 1);
    if (!l || !sel) return free(l), free(sel), moects__set_error("out of memory"), moects__case_list_free(&all), NULL;
    const int rc = moects__cases_pick(&all, &sel_rule, sel, NULL, NULL, err, sizeof err);
    if (rc == -2 || rc == -3) memset(sel, 0, all.n); /* nothing selected: an empty list, not an error */
    else if (rc != 0) {
        moects__set_error("%s", err);
        free(sel), free(l), moects__case_list_free(&all);
        return NULL;
    }
    for (size_t i = 0; i < all.n; i++)
        if (sel[i] && moects__case_list_push(&l->l, &all.v[i]) != 0) {
            moects__set_error("out of memory");
            free(sel), moects__case_list_free(&all), moects_caselist_free(l);
            return NULL;
        }
    free(sel);
    moects__case_list_free(&all);
    l->json = calloc(l->l.n + 1, sizeof *l->json);
    if (!l->json) return moects__set_error("out of memory"), moects_caselist_free(l), NULL;
    return l;
}

void moects_caselist_free(moects_caselist *l)
{
    if (!l) return;
    for (size_t i = 0; l->json && i < l->l.n; i++) free(l->json[i]);
    free(l->json);
    moects__case_list_free(&l->l);
    free(l);
}

size_t moects_caselist_count(const moects_caselist *l) { return l ? l->l.n : 0; }

long moects_caselist_find(const moects_caselist *l, const char *id)
{
    for (size_t i = 0; l && id && i < l->l.n; i++)
        if (!strcmp(l->l.v[i].id, id)) return (long)i;
    return -1;
}

const moects_case *moects__caselist_case(const moects_caselist *l, size_t i)
{
    if (!l || i >= l->l.n) {
        moects__set_error("case %zu: out of range (%zu cases)", i, l ? l->l.n : 0);
        return NULL;
    }
    return &l->l.v[i];
}

const char *moects_case_id(const moects_caselist *l, size_t i)
{
    const moects_case *c = moects__caselist_case(l, i);
    return c ? c->id : NULL;
}

const char *moects_case_op(const moects_caselist *l, size_t i)
{
    const moects_case *c = moects__caselist_case(l, i);
    return c ? moects__op_name(c->op) : NULL;
}

const char *moects_case_json(const moects_caselist *l, size_t i)
{
    const moects_case *c = moects__caselist_case(l, i);
    if (!c) return NULL;
    if (!l->json[i] && !(l->json[i] = moects__case_json(c, NULL))) moects__set_error("out of memory");
    return l->json[i];
}

/* ---------------------------------------------------------------- case data ---- */

struct moects_casedata {
    moects_case c;
    uint64_t seed;
    moects_inputs in;
    char *json;
    void *ref[MOECTS_RECIPES_MAX]; /* by recipe, built on first use */
};

moects_casedata *moects_casedata_build(const moects_caselist *l, size_t i, uint64_t seed)
{
    const moects_case *c = moects__caselist_case(l, i);
    return c ? moects__casedata_of(c, seed) : NULL;
}

moects_casedata *moects__casedata_of(const moects_case *c, uint64_t seed)
{
    moects_casedata *d = calloc(1, sizeof *d);
    if (!d) return moects__set_error("out of memory"), NULL;
    d->c = *c;
    d->seed = seed;
    char err[512];
    if (moects__inputs_build(c, seed, &d->in, err, sizeof err) != 0) {
        moects__set_error("%s", err);
        free(d);
        return NULL;
    }
    if (!(d->json = moects__case_json(c, &d->in))) {
        moects__set_error("out of memory");
        moects_casedata_free(d);
        return NULL;
    }
    return d;
}

void moects_casedata_free(moects_casedata *d)
{
    if (!d) return;
    moects__inputs_free(&d->in);
    for (int i = 0; i < MOECTS_RECIPES_MAX; i++) free(d->ref[i]);
    free(d->json);
    free(d);
}

const char *moects_casedata_id(const moects_casedata *d) { return d ? d->c.id : NULL; }
const char *moects_casedata_json(const moects_casedata *d) { return d ? d->json : NULL; }
uint64_t moects_casedata_seed(const moects_casedata *d) { return d ? d->seed : 0; }
int moects_casedata_ninputs(const moects_casedata *d) { return d ? d->in.nt : 0; }
const moects_case *moects__casedata_case(const moects_casedata *d) { return &d->c; }
const moects_inputs *moects__casedata_inputs(const moects_casedata *d) { return &d->in; }

int moects_casedata_input(const moects_casedata *d, int j, moects_tensor_info *t)
{
    if (!d || j < 0 || j >= d->in.nt) return moects__set_error("input %d: out of range (%d inputs)", j, d ? d->in.nt : 0), -1;
    moects__tensor_describe(&d->in, j, t);
    return 0;
}

int moects_casedata_output(const moects_casedata *d, moects_tensor_info *t)
{
    if (!d) return moects__set_error("no case data"), -1;
    moects__output_describe(&d->in, t);
    return 0;
}

int moects_casedata_scalar(const moects_casedata *d, const char *name, double *value)
{
    const moects__op_def *op = d ? moects__op(d->in.op) : NULL;
    json_t *s = op && op->scalars && name ? op->scalars(&d->in) : NULL, *v = json_object_get(s, name ? name : "");
    int found = json_is_number(v);
    if (found) *value = json_number_value(v);
    json_decref(s);
    if (found) return 0;
    return moects__set_error("%s: no scalar \"%s\"", d ? d->c.id : "?", name ? name : ""), -1;
}

/* The op's recipe of that name (NULL: exact_v1); -1 with the error set. */
static int recipe_of(const moects_case *c, const char *name, moects_recipe *r)
{
    *r = MOECTS_RECIPE_EXACT_V1;
    if (name && moects__recipe_parse(name, c->op, r) != 0)
        return moects__set_error("recipe: unknown \"%s\" for op %s", name, moects__op_name(c->op)), -1;
    return 0;
}

/* The stages' geometry of d (the op's default recipe: the dims do not depend on it); n 0 when the op has
 * none. 0, or -1 (error set). */
static int stage_geometry(const moects_casedata *d, moects__stages *sg)
{
    const moects__op_def *op = moects__op_of_inputs(&d->in);
    const char *names[3] = {NULL};
    moects_recipe r;
    char why[300];
    memset(sg, 0, sizeof *sg);
    if (!op->stages) return 0;
    op->recipes(&d->c, names);
    if (recipe_of(&d->c, names[0], &r)) return -1;
    if (op->stages(&d->in, r, NULL, NULL, sg, why, sizeof why)) return moects__set_error("%s: %s", d->c.id, why), -1;
    return 0;
}

int moects_casedata_nstages(const moects_casedata *d)
{
    moects__stages sg;
    if (!d) return moects__set_error("no case data"), -1;
    if (stage_geometry(d, &sg)) return -1;
    moects__stages_free(&sg);
    return sg.n;
}

int moects_casedata_stage(const moects_casedata *d, int j, moects_tensor_info *t)
{
    moects__stages sg;
    if (!d || !t) return moects__set_error("no case data"), -1;
    if (stage_geometry(d, &sg)) return -1;
    moects__stages_free(&sg);
    if (j < 0 || j >= sg.n) return moects__set_error("%s: no stage %d (%d stages)", d->c.id, j, sg.n), -1;
    *t = (moects_tensor_info){.name = sg.s[j].arg, .dtype = sg.s[j].f64 ? "F64" : "F32", .ndim = 2,
                              .dims = {sg.rows, sg.s[j].cols}, .data = NULL, .bytes = moects__stage_bytes(&sg, j)};
    return 0;
}

const void *moects__casedata_ref(moects_casedata *d, moects_recipe r)
{
    if (d->ref[r]) return d->ref[r];
    moects_inputs *in = &d->in;
    void *out = malloc(in->out_bytes ? in->out_bytes : 1);
    if (!out) return moects__set_error(MOECTS_HOST_OOM " (%zu bytes for the reference)", in->out_bytes), NULL;
    memset(out, 0xff, in->out_bytes);
    int rc = moects__reference(in, r, out); /* rows not compared (moe_gemm): left 0xFF */
    if (rc != 0) {
        free(out);
        return moects__set_error("%s: the reference refused the case", d->c.id), NULL;
    }
    return d->ref[r] = out;
}

int moects_casedata_reference(moects_casedata *d, const char *recipe, moects_tensor_info *t)
{
    moects_recipe r;
    if (!d) return moects__set_error("no case data"), -1;
    if (recipe_of(&d->c, recipe, &r) != 0) return -1;
    const void *ref = moects__casedata_ref(d, r);
    if (!ref) return -1;
    moects__output_describe(&d->in, t);
    t->name = "reference";
    t->data = d->in.out_bytes ? ref : NULL;
    return 0;
}

/* ---------------------------------------------------------------- judging ---- */

struct moects_judgement {
    moects_result r;
    char *text, *json, *repro;
};

/* j->text: the TAP's YAML block of j->r, its repro line j->repro when set (moects_judgement_repro). */
static void judgement_text(moects_judgement *j)
{
    moects_tap_opts o = {.version = 13, .repro_fixed = j->repro};
    size_t len = 0;
    free(j->text);
    j->text = NULL;
    FILE *f = open_memstream(&j->text, &len);
    if (f) {
        moects__tap_yaml(f, "", &j->r, &o);
        fclose(f);
    }
}

static moects_judgement *judgement_new(const moects_result *r)
{
    moects_judgement *j = calloc(1, sizeof *j);
    if (!j) return moects__set_error("out of memory"), NULL;
    j->r = *r;
    judgement_text(j);
    moects__buf b = {0};
    moects__buf_result(&b, r);
    moects__buf_add(&b, "");
    j->json = b.oom ? NULL : strdup(b.s ? b.s : "");
    moects__buf_free(&b);
    if (!j->text || !j->json) return moects__set_error("out of memory"), moects_judgement_free(j), NULL;
    return j;
}

/* r's hashes as a run records them: every input tensor's XXH64 and the reference's. */
static void put_hashes(const moects_casedata *d, const void *ref, moects_result *r)
{
    r->n_hashes = 0;
    for (int i = 0; i < d->in.nt && r->n_hashes < MOECTS_RESULT_HASHES_MAX; i++) {
        if (!d->in.t[i].name) continue; /* a slot the case's format has no tensor for */
        snprintf(r->hashes[r->n_hashes].name, sizeof r->hashes[0].name, "%s", d->in.t[i].name);
        r->hashes[r->n_hashes++].xxh64 = moects__xxh64(d->in.t[i].host, d->in.t[i].bytes);
    }
    r->has_ref_hash = 1;
    r->ref_xxh64 = moects__xxh64(ref, d->in.out_bytes);
}

/* The kernel's exposed intermediates stages[0..n) (NULL: none) judged after r's verdict on the output:
 * their reference under the claim (the op's stages()) and the judge's stage rule (harness/judge/stages.c),
 * as the runner's stage_task judges a kernel's (harness/run/task.c). */
static void judge_stages(const moects_casedata *d, const moects_kernel *k, moects_recipe recipe,
                         const void *const *stages, int n, moects_result *r)
{
    const moects__op_def *op = moects__op_of_inputs(&d->in);
    const void *got[MOECTS_STAGES_MAX] = {0};
    for (int i = 0; i < n && i < MOECTS_STAGES_MAX; i++) got[i] = stages[i];
    if (!op->stages || !stages || (r->verdict != MOECTS_PASS_BOUNDED && r->verdict != MOECTS_FAIL_MISMATCH &&
                                   r->verdict != MOECTS_PASS_EXACT))
        return;
    const moects_acc_class cls = {k->acc.bits, k->acc.truncation, k->split_k.max_splits};
    const moects_acc_class *claim = moects__judge_claim_bounded(k) ? &cls : NULL;
    moects__stages sg;
    char why[300], msg[340];
    if (op->stages(&d->in, recipe, claim, got, &sg, why, sizeof why) == 0) moects__judge_stages(&sg, got, claim, r);
    else snprintf(msg, sizeof msg, "intermediates not compared: %s", why), snprintf(r->reason + strlen(r->reason),
                  sizeof r->reason - strlen(r->reason), "%s%s", r->reason[0] ? "; " : "", msg);
    moects__stages_free(&sg);
}

/* The verdict of bytes out for kernel k under recipe: the judge (harness/judge/judge.c) on the case
 * data's reference and, for a bounded claim, its bounds; one run (the caller's bytes). */
static void judge_bytes(moects_casedata *d, const moects_kernel *k, moects_recipe recipe, const void *out,
                        moects_result *r)
{
    if (!moects__judge_claim_ok(&d->c, k, recipe, r)) return;
    const void *want = moects__casedata_ref(d, recipe);
    if (!want) {
        r->verdict = strncmp(moects_errmsg(), MOECTS_HOST_OOM, strlen(MOECTS_HOST_OOM)) ? MOECTS_FAIL_CRASH : MOECTS_SKIP;
        snprintf(r->reason, sizeof r->reason, "%s", moects_errmsg());
        return;
    }
    put_hashes(d, want, r);
    moects__bounds b = {0};
    const int bounded = moects__judge_claim_bounded(k);
    const moects_acc_class cls = {k->acc.bits, k->acc.truncation, k->split_k.max_splits};
    const int brc = bounded ? moects__bounds_compute(&d->c, &d->in, &cls, recipe, &b) : 0;
    void *got = malloc(d->in.out_bytes ? d->in.out_bytes : 1);
    if (brc || !got) {
        r->verdict = brc == -1 ? MOECTS_FAIL_CRASH : MOECTS_SKIP;
        snprintf(r->reason, sizeof r->reason, brc == -1 ? "the reference refused the bound of the case (harness or "
                 "case bug), %s" : MOECTS_HOST_OOM " (%s)", brc == -1 ? r->recipe : "the output and its bounds");
    } else {
        memcpy(got, out, d->in.out_bytes);
        const moects_judge_ref ref = moects__bounds_ref(&d->in, want, &b);
        moects__judge_runs(&ref, k, &got, 1, r);
    }
    free(got);
    moects__bounds_free(&b);
}

moects_judgement *moects_judge(moects_casedata *d, const moects_kernel *k, const void *out, size_t bytes)
{
    return moects_judge_stages(d, k, out, bytes, NULL, 0);
}

moects_judgement *moects_judge_stages(moects_casedata *d, const moects_kernel *k, const void *out, size_t bytes,
                                      const void *const *stages, int nstages)
{
    if (!d || !k || !k->name) return moects__set_error("judge: no case data or kernel description"), NULL;
    if (k->op != d->c.op)
        return moects__set_error("kernel %s: op %s, case %s is %s", k->name, moects__op_name(k->op), d->c.id,
                                 moects__op_name(d->c.op)), NULL;
    if (bytes != d->in.out_bytes || (bytes && !out))
        return moects__set_error("%s: output of %zu bytes, the case's output has %zu", d->c.id, bytes, d->in.out_bytes),
               NULL;
    moects_recipe r;
    if (recipe_of(&d->c, k->recipe, &r) != 0) return NULL;
    moects_kernel jk;
    moects__kernel_upgrade(k, &jk); /* a caller of an older ABI (Python's ctypes struct) has fewer fields */
    moects_result res;
    moects__result_identity(&res, &d->c, &jk, d->seed);
    judge_bytes(d, &jk, r, out, &res);
    judge_stages(d, &jk, r, stages, nstages, &res);
    return judgement_new(&res);
}

moects_judgement *moects_judge_outcome(const moects_casedata *d, const moects_kernel *k, const char *verdict,
                                       const char *reason)
{
    if (!d || !k || !k->name || !verdict) return moects__set_error("judge: no case data, kernel or verdict"), NULL;
    moects_verdict v;
    if (moects__verdict_parse(verdict, &v) != 0 ||
        (v != MOECTS_FAIL_CRASH && v != MOECTS_UNSUPPORTED && v != MOECTS_SKIP && v != MOECTS_FAIL_TIMEOUT &&
         v != MOECTS_FAIL_OOB_WRITE))
        return moects__set_error("verdict: \"%s\" is not FAIL_CRASH, FAIL_TIMEOUT, FAIL_OOB_WRITE, UNSUPPORTED or SKIP",
                                 verdict), NULL;
    moects_result r;
    moects__result_identity(&r, &d->c, k, d->seed);
    r.verdict = v;
    snprintf(r.reason, sizeof r.reason, "%s", reason ? reason : "");
    return judgement_new(&r);
}

void moects_judgement_free(moects_judgement *j)
{
    if (!j) return;
    free(j->text);
    free(j->json);
    free(j->repro);
    free(j);
}

const char *moects_judgement_repro(moects_judgement *j, const char *program, const char *extra)
{
    if (!j) return moects__set_error("judgement_repro: no judgement"), NULL;
    moects__buf b = {0};
    moects__repro_as(&b, &j->r, program, extra);
    if (b.oom || !b.s) return moects__buf_free(&b), moects__set_error("out of memory"), NULL;
    free(j->repro);
    j->repro = strdup(b.s);
    moects__buf_free(&b);
    judgement_text(j);
    if (!j->repro || !j->text) return moects__set_error("out of memory"), NULL;
    return j->repro;
}

const char *moects_judgement_verdict(const moects_judgement *j) { return j ? moects__verdict_name(j->r.verdict) : NULL; }
int moects_judgement_passed(const moects_judgement *j)
{
    return !j ? -1 : moects_verdict_is_pass(j->r.verdict) ? 1 : moects_verdict_is_fail(j->r.verdict) ? 0 : -1;
}
const char *moects_judgement_text(const moects_judgement *j) { return j ? j->text : NULL; }
const char *moects_judgement_json(const moects_judgement *j) { return j ? j->json : NULL; }
const moects_result *moects__judgement_result(const moects_judgement *j) { return &j->r; }

/* ---------------------------------------------------------------- results.json ---- */

struct moects_resultset {
    moects_run run;
};

moects_resultset *moects_resultset_new(const char *filter, uint64_t seed)
{
    moects_resultset *s = calloc(1, sizeof *s);
    if (!s) return moects__set_error("out of memory"), NULL;
    snprintf(s->run.filter, sizeof s->run.filter, "%s", filter ? filter : "");
    s->run.seed = seed;
    return s;
}

void moects_resultset_free(moects_resultset *s)
{
    if (!s) return;
    moects__run_free(&s->run);
    free(s);
}

int moects_resultset_add(moects_resultset *s, const moects_judgement *j)
{
    if (!s || !j) return moects__set_error("resultset_add: NULL argument"), -1;
    return moects__resultset_push(s, &j->r);
}

int moects__resultset_push(moects_resultset *s, const moects_result *r)
{
    for (size_t i = 0; i < s->run.n; i++) /* one result per (kernel, case): the later replaces */
        if (!strcmp(s->run.v[i].kernel, r->kernel) && !strcmp(s->run.v[i].case_id, r->case_id))
            return s->run.v[i] = *r, 0;
    if (moects__run_push(&s->run, r) != 0) return moects__set_error("out of memory"), -1;
    return 0;
}

size_t moects_resultset_count(const moects_resultset *s) { return s ? s->run.n : 0; }
moects_run *moects__resultset_run(moects_resultset *s) { return &s->run; }

/* The commit of the working directory: $MOECTS_COMMIT, else `git rev-parse HEAD`, else "unknown". */
static void commit_of_cwd(char *out, size_t len)
{
    const char *e = getenv("MOECTS_COMMIT");
    snprintf(out, len, "%s", e && *e ? e : "unknown");
    if (e && *e) return;
    FILE *p = popen("git rev-parse HEAD 2>/dev/null", "r");
    if (!p) return;
    char line[128];
    if (fgets(line, sizeof line, p) && strlen(line) >= 40) snprintf(out, len, "%.40s", line);
    pclose(p);
}

void moects__run_metadata(moects_run *run)
{
    snprintf(run->moects_version, sizeof run->moects_version, "%s", MOECTS_VERSION);
    if (!run->commit[0]) commit_of_cwd(run->commit, sizeof run->commit);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(run->date, sizeof run->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    if (!run->machine[0]) snprintf(run->machine, sizeof run->machine, "%.60s", host);
}

int moects_resultset_write(const moects_resultset *s, const char *path)
{
    if (!s || !path) return moects__set_error("resultset_write: NULL argument"), -1;
    moects_run run = s->run;
    moects__run_metadata(&run);
    char err[1024];
    if (moects__results_write(path, &run, err, sizeof err) != 0) return moects__set_error("%s", err), -1;
    return 0;
}

moects_resultset *moects_resultset_read(const char *path)
{
    moects_resultset *s = calloc(1, sizeof *s);
    char err[1024];
    if (!s) return moects__set_error("out of memory"), NULL;
    if (moects__results_read(path, &s->run, err, sizeof err) != 0) {
        moects__set_error("%s", err);
        free(s);
        return NULL;
    }
    return s;
}
