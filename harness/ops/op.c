/* op.c: the op table (harness/moects_op.h): its entries in ops.def's order, and the calls every op
 * answers the same way through its entry. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moects_op.h"

static const moects__op_def *const table[] = {
#define MOECTS_OP_DEF(e, n, def) &def,
#include "ops.def"
#undef MOECTS_OP_DEF
};

const moects__op_def *moects__op(moects_op op)
{
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (table[i]->op == op) return table[i];
    return NULL;
}

const moects__op_def *const *moects__ops(size_t *n)
{
    *n = sizeof table / sizeof *table;
    return table;
}

const moects__op_def *moects__op_of_inputs(const moects_inputs *in)
{
    const moects__op_def *d = moects__op(in->op);
    if (!d) abort(); /* inputs are only ever built by an entry: an unknown op here is a bug */
    return d;
}

void moects__case_kshape(const moects_case *c, moects__kshape *s)
{
    memset(s, 0, sizeof *s);
    const moects__op_def *d = moects__op(c->op);
    if (d) d->case_shape(c, s);
}

void moects__host_args(const moects_inputs *in, void *out, moects_op_args *a)
{
    static uint64_t dummy[8];
    void *hp[MOECTS_INPUTS_MAX];
    for (int i = 0; i < MOECTS_INPUTS_MAX; i++) hp[i] = i < in->nt && in->t[i].host ? in->t[i].host : (void *)dummy;
    moects__inputs_bind(in, hp, out, a);
}

int moects__kernel_call(const moects_kernel *k, const void *shape, const void *args, void *stream)
{
    const moects__op_def *d = moects__op(k->op);
    return d && d->launch ? d->launch(k, shape, args, stream) : k->run(shape, args, stream);
}

int moects__reference(const moects_inputs *in, moects_recipe r, void *out)
{
    moects_op_args a;
    moects__host_args(in, out, &a);
    return moects__op_of_inputs(in)->reference(in, &a, r);
}

void moects__out_geom_of(const moects_inputs *in, moects_out_geom *g)
{
    memset(g, 0, sizeof *g);
    g->row_word = "row";
    g->col_word = "column";
    g->col_tile = 128;
    moects__op_of_inputs(in)->geometry(in, g);
}

void moects__stages_free(moects__stages *st)
{
    for (int i = 0; i < MOECTS_STAGES_MAX; i++) {
        moects__stage *s = &st->s[i];
        free(s->want), free(s->lo), free(s->hi), free(s->st.x), free(s->st.det), free(s->st.sigma);
        s->want = s->lo = s->hi = NULL;
        memset(&s->st, 0, sizeof s->st);
    }
    free(st->valid);
    st->valid = NULL;
}
