/* bounds.c: a case's per-element bounds for an accumulation class and, where the accumulation check
 * applies, its inputs (ref/ moects_ref_*_gemm_bound_class; DESIGN.md "Bounded verdicts"), computed
 * on the host inputs for the runner and for libmoects' judgement alike. */
#include <stdlib.h>
#include <string.h>

#include "moects_judge.h"
#include "moects_op.h"
#include "moects_runner_internal.h"

void moects__bounds_free(moects__bounds *b)
{
    free(b->lo);
    free(b->hi);
    free(b->bound);
    free(b->st.x);
    free(b->st.det);
    free(b->st.sigma);
    memset(b, 0, sizeof *b);
}

/* The enclosure of recipe under cls into b (lo, hi, tight). */
static int enclosure_compute(const moects_inputs *in, const moects_acc_class *cls, moects_recipe recipe,
                             moects__bounds *b)
{
    const moects__op_def *op = moects__op_of_inputs(in);
    b->lo = malloc(in->out_bytes ? in->out_bytes : 1);
    b->hi = malloc(in->out_bytes ? in->out_bytes : 1);
    if (!b->lo || !b->hi) return moects__bounds_free(b), -2;
    moects_op_args a;
    moects__host_args(in, b->lo, &a);
    int rc = op->enclosure(in, &a, recipe, cls, b->lo, b->hi, &b->tight);
    b->cls = *cls, b->recipe = recipe;
    return rc == 0 ? 0 : -1;
}

moects_judge_ref moects__bounds_ref(const moects_inputs *in, const void *want, const moects__bounds *b)
{
    const moects_layer_recipe *lr = b->lo ? moects__layer_recipe_of(b->recipe) : NULL;
    return (moects_judge_ref){in, want, b->bound, b->st.x ? &b->st : NULL, b->lo, b->hi, b->lo ? &b->tight : NULL,
                              lr && lr->combine == MOECTS_COMBINE_F32_ANY};
}

int moects__bounds_compute(const moects_case *c, const moects_inputs *in, const moects_acc_class *cls,
                           moects_recipe recipe, moects__bounds *b)
{
    memset(b, 0, sizeof *b);
    if (moects__op_of_inputs(in)->enclosure) return enclosure_compute(in, cls, recipe, b);
    const size_t n = (size_t)in->out_elems + 1;
    const int check = moects__judge_acc_check_applies(c);
    b->bound = malloc(n * sizeof(double));
    if (check) b->st = (moects_bound_stats){malloc(n * sizeof(double)), malloc(n * sizeof(float)), malloc(n * sizeof(float))};
    void *scratch = malloc(in->out_bytes ? in->out_bytes : 1);
    if (!b->bound || !scratch || (check && (!b->st.x || !b->st.det || !b->st.sigma))) {
        moects__bounds_free(b);
        free(scratch);
        return -2;
    }
    memset(scratch, 0xff, in->out_bytes);
    moects_op_args a;
    moects__host_args(in, scratch, &a);
    const moects__op_def *op = moects__op_of_inputs(in);
    int rc = op->bound ? op->bound(in, &a, cls, b->bound, check ? &b->st : NULL) : -1;
    free(scratch);
    b->cls = *cls;
    return rc == 0 ? 0 : -1;
}
