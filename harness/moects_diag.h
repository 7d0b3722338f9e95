/* moects_diag.h: where a failing output differs, in the op's own terms (docs/DESIGN.md "Verdicts"):
 * the first mismatches and the ten worst as coordinates ((t, d) for ep_gather, (m, n) for fp4_gemm,
 * (expert, row, col) for grouped outputs), and a one-line pattern of the mismatch mask ("column 3584
 * onwards", "every row of expert 3", "the last 128-column tile of N", "rows 0..3 only"). */
#ifndef MOECTS_DIAG_H
#define MOECTS_DIAG_H
#include <stddef.h>
#include <stdint.h>

#include "moects_inputs.h"
#include "moects_types.h"

#define MOECTS_DIAG_FIRST 5  /* first mismatches kept, in element order */
#define MOECTS_DIAG_WORST 10 /* worst mismatches kept, largest ULP distance first */

/* One mismatching element. */
typedef struct {
    int64_t index;      /* flat element index into the output */
    int64_t at[3];      /* its coordinates (moects_diag.ndims of them) */
    uint32_t got, want; /* bit patterns (BF16 in the low 16 bits) */
    uint64_t ulp;       /* moects_ulp_distance_*; UINT64_MAX for NaN against a number */
} moects_diag_elem;

/* The diagnostics of one compared output; ndims 0 when there is none (no mismatch). Fixed size:
 * it travels from the worker inside moects_result. */
typedef struct {
    int ndims;          /* 2 or 3 */
    char axes[3][8];    /* the coordinates' names: "t","d" / "m","n" / "expert","row","col" */
    moects_dtype dtype; /* of got and want: MOECTS_BF16 or MOECTS_F32 */
    int nfirst, nworst;
    moects_diag_elem first[MOECTS_DIAG_FIRST];
    moects_diag_elem worst[MOECTS_DIAG_WORST];
    char pattern[200];  /* one line; "" when none */
} moects_diag;

/* How an op's output maps onto coordinates: a rows x cols row-major matrix, its rows optionally
 * grouped (experts). An op supplies one: its entry's geometry (harness/moects_op.h). */
typedef struct {
    const char *axis[3];       /* coordinate names; ungrouped: axis[0] rows, axis[1] cols */
    const char *row_word;      /* singular noun in patterns: "token", "row" */
    const char *col_word;      /* "column" */
    const char *col_extent;    /* name of the column count in patterns: "H", "N" */
    int64_t rows, cols;
    int64_t col_tile;          /* tile width named in patterns (0: 128) */
    /* grouped rows (experts), either: */
    const int32_t *row_group;  /* [rows] group of each row, -1 = not compared (padding); rows of one
                                  group consecutive (contiguous/offsets layouts) */
    int64_t group_rows;        /* > 0: row r is group r / group_rows (masked layout) ... */
    const int32_t *group_valid;/* ... and its first group_valid[g] rows are compared (NULL: all) */
    int64_t groups;            /* number of groups when grouped */
    const char *group_word;    /* "expert" */
} moects_out_geom;

/* The geometry of a case's output, the op's coordinate mapping (its entry's geometry; harness/ops/op.c):
 * ep_gather (t, d) over [T, H]; fp4_gemm (m, n) over [M, N]; moe_gemm (expert, row, col) over [rows, N],
 * rows grouped by the case's row_expert (padding rows and rows past masked_m not compared). */
void moects__out_geom_of(const moects_inputs *in, moects_out_geom *g);

/* Coordinates of flat element i under g; returns ndims (2 ungrouped, 3 grouped: (group, local row,
 * col)). A row of no group (-1) reads group -1, local row = the global row. */
int moects__out_coords(const moects_out_geom *g, int64_t i, int64_t at[3]);

/* Fill d for got against want (n = g->rows * g->cols elements of dt, host memory), rows that no group
 * compares skipped: first mismatches, worst ones, pattern. Differences are bits that differ, a NaN
 * equals any NaN (as moects__compare). Returns 0 (d->ndims 0 when nothing differs), -1 out of memory
 * or a bad geometry (d->pattern then says which). */
int moects__diag_compute(const moects_out_geom *g, moects_dtype dt, const void *got, const void *want,
                        moects_diag *d);

/* The one-line pattern of a mismatch mask given as hit counts: row_hits[rows] (mismatches in each
 * row), col_hits[cols] (in each column), total (all of them). Exact for rectangles (every hit row x
 * every hit column): "<rows>, <columns>"; else "scattered: N elements, P% of <rows> x <columns>".
 * One element: its coordinates and, when it lies there, the last tile of the columns. Writes buf. */
void moects__mismatch_pattern(const moects_out_geom *g, const int64_t *row_hits, const int64_t *col_hits,
                             int64_t total, char *buf, size_t len);

/* "(m 5, n 4095)": coordinates of e with d's axis names. */
void moects__diag_at(const moects_diag *d, const moects_diag_elem *e, char *buf, size_t len);
/* The same for flat element i of an output of geometry g (moects__out_coords): "(expert 3, row 2, col 17)". */
void moects__out_at(const moects_out_geom *g, int64_t i, char *buf, size_t len);

/* "0x3f81 (1.0078125)": bits of d->dtype in hex, then the value (moects__format_value). */
void moects__diag_value(const moects_diag *d, uint32_t bits, char *buf, size_t len);

#endif
