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
    free(b->bound);
    free(b->st.x);
    free(b->st.det);
    free(b->st.sigma);
    memset(b, 0, sizeof *b);
}

int moects__bounds_compute(const moects_case *c, const moects_inputs *in, const moects_acc_class *cls,
                           moects__bounds *b)
{
    memset(b, 0, sizeof *b);
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
