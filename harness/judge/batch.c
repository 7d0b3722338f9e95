/* batch.c: the batch-invariance rule (harness/moects_judge.h; DESIGN.md "Batch invariance"): a kernel
 * that declares MOECTS_KERNEL_BATCH_INVARIANT gives the same bits for a case's rows when they sit at
 * other rows of a larger batch, beside other tokens. A pure function of the two outputs and where the
 * rows went. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_compare.h"
#include "moects_diag.h"
#include "moects_judge.h"

/* The case's output with each compared row r replaced by row b->row_of[r] of big: what the batch gave
 * for the case's rows, in the case's layout. NULL out of memory. */
static void *gather_rows(const moects_inputs *in, const void *got, const void *big, const moects__batch *b)
{
    void *g = malloc(in->out_bytes ? in->out_bytes : 1);
    if (!g || b->rows <= 0) return g ? memcpy(g, got, in->out_bytes) : NULL;
    const size_t row = in->out_bytes / (size_t)b->rows;
    memcpy(g, got, in->out_bytes);
    for (int64_t r = 0; r < b->rows; r++)
        if (b->row_of[r] >= 0) memcpy((char *)g + (size_t)r * row, (const char *)big + (size_t)b->row_of[r] * row, row);
    return g;
}

int moects__judge_batch(const moects_inputs *in, const void *got, const void *big, const moects__batch *b,
                        moects_result *r)
{
    void *inside = gather_rows(in, got, big, b);
    if (!inside) return -1;
    moects_compare_result cr;
    moects__compare(in->out_dtype, inside, got, in->out_elems, &cr);
    if (cr.mismatches) {
        moects_out_geom g;
        moects__out_geom_of(in, &g);
        char at[96];
        moects__out_at(&g, cr.first_index, at, sizeof at);
        const int64_t row = g.cols ? cr.first_index / g.cols : 0;
        r->verdict = MOECTS_FAIL_BATCH_VARIANT;
        r->mismatches = cr.mismatches, r->max_ulp = cr.max_ulp, r->first_index = cr.first_index;
        snprintf(r->got, sizeof r->got, "%s", cr.got);
        snprintf(r->want, sizeof r->want, "%s", cr.want);
        snprintf(r->reason, sizeof r->reason, "batch of %lld %s vs %lld: %lld elements of the case's rows differ; "
                 "first %s (row %lld of the batch): %s in the batch of %lld, %s in the batch of %lld",
                 (long long)b->n, b->unit, (long long)b->n_big, (long long)cr.mismatches, at,
                 (long long)b->row_of[row], cr.got, (long long)b->n_big, cr.want, (long long)b->n);
        moects__diag_compute(&g, in->out_dtype, inside, got, &r->diag);
    }
    free(inside);
    return 0;
}
