/* diag.c: mismatch diagnostics in the op's coordinates, and the pattern classifier over the mismatch
 * mask (moects_diag.h). The classifier sees only per-row and per-column hit counts, so it costs
 * rows + cols counters whatever the output's size (a 2^31-element output included). */
#include "moects_diag.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_compare.h"
#include "moects_ref.h"

/* Append printf text to buf (always NUL-terminated, truncated when full). */
__attribute__((format(printf, 3, 4))) static void cat(char *buf, size_t len, const char *fmt, ...)
{
    size_t l = strlen(buf);
    if (l + 1 >= len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + l, len - l, fmt, ap);
    va_end(ap);
}

static int grouped(const moects_out_geom *g) { return g->row_group || g->group_rows > 0; }

/* Group and local row of row r; 0 when the row is compared, -1 when not (padding, past masked_m).
 * *start (may be NULL): the first row of r's group when rows are visited in order (a scan back
 * otherwise), so that a pass over all rows stays linear. */
static int row_place(const moects_out_geom *g, int64_t r, int64_t *start, int64_t *grp, int64_t *local)
{
    if (g->group_rows > 0) {
        *grp = r / g->group_rows;
        *local = r % g->group_rows;
        return g->group_valid && *local >= g->group_valid[*grp] ? -1 : 0;
    }
    if (g->row_group) {
        *grp = g->row_group[r];
        int64_t s = r;
        if (start && r > 0 && g->row_group[r - 1] == *grp) s = *start;
        else if (!start)
            while (s > 0 && g->row_group[s - 1] == *grp) s--;
        if (start) *start = s;
        *local = *grp < 0 ? r : r - s;
        return *grp < 0 ? -1 : 0;
    }
    *grp = 0;
    *local = r;
    return 0;
}

int moects__out_coords(const moects_out_geom *g, int64_t i, int64_t at[3])
{
    int64_t cols = g->cols > 0 ? g->cols : 1, r = i / cols, c = i % cols;
    if (!grouped(g)) {
        at[0] = r;
        at[1] = c;
        at[2] = 0;
        return 2;
    }
    row_place(g, r, NULL, &at[0], &at[1]);
    at[2] = c;
    return 3;
}

/* "(a0 v0, a1 v1[, a2 v2])" into buf. */
static void coords_text(const char *const *axes, int nd, const int64_t *at, char *buf, size_t len)
{
    buf[0] = '\0';
    cat(buf, len, "(");
    for (int k = 0; k < nd && k < 3; k++) cat(buf, len, "%s%s %" PRId64, k ? ", " : "", axes[k], at[k]);
    cat(buf, len, ")");
}

void moects__diag_at(const moects_diag *d, const moects_diag_elem *e, char *buf, size_t len)
{
    const char *axes[3] = {d->axes[0], d->axes[1], d->axes[2]};
    coords_text(axes, d->ndims, e->at, buf, len);
}

void moects__out_at(const moects_out_geom *g, int64_t i, char *buf, size_t len)
{
    int64_t at[3];
    int nd = moects__out_coords(g, i, at);
    coords_text(g->axis, nd, at, buf, len);
}

/* ---- describing a set of indices ---- */

/* Width of the tile a tail [lo, L) is: the smallest power of two 16..256 that is >= its width and
 * divides lo (so lo is a tile boundary); 0 when none. */
static int64_t tail_tile(int64_t lo, int64_t L)
{
    for (int64_t t = 16; t <= 256; t *= 2)
        if (t >= L - lo && lo % t == 0) return t;
    return 0;
}

/* One phrase for the indices i in [0, L) with hits[i] != 0 (at least one); extent NULL: plain ranges
 * (no tile, "onwards", "only" or "the last"), for group-local rows and groups. "every column", "column 7",
 * "rows 0..3 only", "column 3584 onwards (3584..4095 of 4096)", "the last 128-column tile of N
 * (columns 3968..4095)", "columns 8..56 step 16 (4 of them)", "12 rows in 3 runs: 0..3, 8..11, 16..19". */
static void describe_set(const int64_t *hits, int64_t L, const char *word, const char *extent, int64_t tile,
                         char *buf, size_t len)
{
    int64_t k = 0, lo = -1, hi = -1, runs = 0, step = 0, prev = -1;
    int arith = 1;
    for (int64_t i = 0; i < L; i++) {
        if (!hits[i]) continue;
        if (lo < 0) lo = i;
        if (prev < 0 || i != prev + 1) runs++;
        if (prev >= 0) {
            if (step == 0) step = i - prev;
            else if (i - prev != step) arith = 0;
        }
        hi = prev = i;
        k++;
    }
    buf[0] = '\0';
    if (k == 0) {
        cat(buf, len, "no %s", word);
    } else if (k == L && L > 1) {
        cat(buf, len, "every %s", word);
    } else if (k == 1) {
        int64_t t = tile > 0 ? tile : 128, last = (L - 1) / t * t;
        cat(buf, len, "%s %" PRId64, word, lo);
        if (extent && L > t && lo >= last)
            cat(buf, len, " (in the last %" PRId64 "-%s tile of %s: %" PRId64 "..%" PRId64 ")", t, word, extent, last,
                L - 1);
        else if (extent && lo == L - 1)
            cat(buf, len, " (the last)");
    } else if (runs == 1) {
        int64_t t = extent && hi == L - 1 && lo > 0 ? tail_tile(lo, L) : 0;
        if (!extent)
            cat(buf, len, "%ss %" PRId64 "..%" PRId64, word, lo, hi);
        else if (t)
            cat(buf, len, "the last %" PRId64 "-%s tile of %s (%ss %" PRId64 "..%" PRId64 ")", t, word, extent, word, lo,
                hi);
        else if (hi == L - 1 && lo > 0)
            cat(buf, len, "%s %" PRId64 " onwards (%" PRId64 "..%" PRId64 " of %" PRId64 ")", word, lo, lo, hi, L);
        else if (lo == 0)
            cat(buf, len, "%ss 0..%" PRId64 " only", word, hi);
        else
            cat(buf, len, "%ss %" PRId64 "..%" PRId64, word, lo, hi);
    } else if (arith && k >= 3) {
        cat(buf, len, "%ss %" PRId64 "..%" PRId64 " step %" PRId64 " (%" PRId64 " of them)", word, lo, hi, step, k);
    } else {
        cat(buf, len, "%" PRId64 " %ss in %" PRId64 " runs:", k, word, runs);
        int64_t shown = 0, a = -1;
        for (int64_t i = 0; i <= L && shown < 3; i++) {
            int on = i < L && hits[i];
            if (on && a < 0) a = i;
            if (!on && a >= 0) {
                if (i - 1 > a) cat(buf, len, "%s %" PRId64 "..%" PRId64, shown ? "," : "", a, i - 1);
                else cat(buf, len, "%s %" PRId64, shown ? "," : "", a);
                shown++;
                a = -1;
            }
        }
        if (runs > 3) cat(buf, len, ", ...");
    }
}

/* The rows phrase of a grouped output: "every row of expert 3", "every row of experts 2..4", "rows 0..3
 * only of expert 1", "rows of experts 1, 5 (9 rows)". -1 out of memory. */
static int describe_grouped_rows(const moects_out_geom *g, const int64_t *row_hits, char *buf, size_t len)
{
    int64_t ng = g->groups > 0 ? g->groups : 1;
    int64_t *valid = calloc((size_t)ng, sizeof *valid), *hit = calloc((size_t)ng, sizeof *hit);
    if (!valid || !hit) {
        free(valid);
        free(hit);
        return -1;
    }
    int64_t one = -1, nhit_groups = 0, nvalid_groups = 0, full = 1, hit_rows = 0;
    int64_t st = 0;
    for (int64_t r = 0; r < g->rows; r++) {
        int64_t e, l;
        if (row_place(g, r, &st, &e, &l) != 0 || e < 0 || e >= ng) continue;
        valid[e]++;
        if (row_hits[r]) {
            hit[e]++;
            hit_rows++;
        }
    }
    for (int64_t e = 0; e < ng; e++) {
        if (valid[e]) nvalid_groups++;
        if (!hit[e]) continue;
        nhit_groups++;
        one = e;
        if (hit[e] != valid[e]) full = 0;
    }
    char set[160];
    buf[0] = '\0';
    if (full && nhit_groups == nvalid_groups && nhit_groups > 1) {
        cat(buf, len, "every row of every %s", g->group_word);
    } else if (full) {
        describe_set(hit, ng, g->group_word, NULL, 0, set, sizeof set);
        cat(buf, len, "every row of %s", set);
    } else if (nhit_groups == 1) {
        int64_t *local = calloc((size_t)valid[one], sizeof *local);
        if (!local) {
            free(valid);
            free(hit);
            return -1;
        }
        st = 0;
        for (int64_t r = 0; r < g->rows; r++) {
            int64_t e, l;
            if (row_place(g, r, &st, &e, &l) == 0 && e == one && l < valid[one]) local[l] = row_hits[r];
        }
        describe_set(local, valid[one], g->row_word, NULL, 0, set, sizeof set);
        free(local);
        cat(buf, len, "%s of %s %" PRId64, set, g->group_word, one);
    } else {
        describe_set(hit, ng, g->group_word, NULL, 0, set, sizeof set);
        cat(buf, len, "%" PRId64 " %ss of %s", hit_rows, g->row_word, set);
    }
    free(valid);
    free(hit);
    return 0;
}

void moects__mismatch_pattern(const moects_out_geom *g, const int64_t *row_hits, const int64_t *col_hits,
                             int64_t total, char *buf, size_t len)
{
    buf[0] = '\0';
    if (total <= 0) return;
    int64_t hit_rows = 0, hit_cols = 0;
    for (int64_t r = 0; r < g->rows; r++) hit_rows += row_hits[r] != 0;
    for (int64_t c = 0; c < g->cols; c++) hit_cols += col_hits[c] != 0;
    char rows[200], cols[200];
    if (!grouped(g) || describe_grouped_rows(g, row_hits, rows, sizeof rows) != 0)
        describe_set(row_hits, g->rows, g->row_word, "M", 0, rows, sizeof rows);
    describe_set(col_hits, g->cols, g->col_word, g->col_extent, g->col_tile, cols, sizeof cols);
    if (total == 1) cat(buf, len, "one element: %s, %s", rows, cols);
    else if (total == hit_rows * hit_cols) cat(buf, len, "%s, %s", rows, cols);
    else {
        const int64_t cells = hit_rows * hit_cols;
        char share[48];
        snprintf(share, sizeof share, "%.3g%% of", 100.0 * (double)total / (double)cells);
        if (!strcmp(share, "100% of")) /* not all of them: never rounded up to 100% */
            snprintf(share, sizeof share, "all but %" PRId64 " of", cells - total);
        cat(buf, len, "scattered: %" PRId64 " elements, %s %s x %s", total, share, rows, cols);
    }
}

/* ---- the pass over the output ---- */

static uint32_t bits_at(moects_dtype dt, const void *p, int64_t i)
{
    if (dt == MOECTS_BF16) return ((const uint16_t *)p)[i];
    uint32_t u;
    memcpy(&u, (const char *)p + 4 * i, 4);
    return u;
}

static int is_nan(moects_dtype dt, uint32_t b)
{
    return dt == MOECTS_BF16 ? (b & 0x7fffu) > 0x7f80u : (b & 0x7fffffffu) > 0x7f800000u;
}

/* Insert e among the worst (largest ulp first; an earlier element first among equals). */
static void keep_worst(moects_diag *d, const moects_diag_elem *e)
{
    int n = d->nworst;
    if (n == MOECTS_DIAG_WORST && d->worst[n - 1].ulp >= e->ulp) return;
    int at = n < MOECTS_DIAG_WORST ? n : n - 1;
    while (at > 0 && d->worst[at - 1].ulp < e->ulp) {
        d->worst[at] = d->worst[at - 1];
        at--;
    }
    d->worst[at] = *e;
    if (n < MOECTS_DIAG_WORST) d->nworst++;
}

int moects__diag_compute(const moects_out_geom *g, moects_dtype dt, const void *got, const void *want,
                        moects_diag *d)
{
    memset(d, 0, sizeof *d);
    if ((dt != MOECTS_BF16 && dt != MOECTS_F32) || g->rows < 0 || g->cols < 0) {
        snprintf(d->pattern, sizeof d->pattern, "no diagnostics: unknown output dtype or shape");
        return -1;
    }
    int64_t *row_hits = calloc((size_t)g->rows + 1, sizeof *row_hits);
    int64_t *col_hits = calloc((size_t)g->cols + 1, sizeof *col_hits);
    if (!row_hits || !col_hits) {
        free(row_hits);
        free(col_hits);
        snprintf(d->pattern, sizeof d->pattern, "no diagnostics: out of memory");
        return -1;
    }
    int64_t total = 0, st = 0;
    for (int64_t r = 0; r < g->rows; r++) {
        int64_t e = 0, l = 0;
        if (grouped(g) && row_place(g, r, &st, &e, &l) != 0) continue;
        for (int64_t c = 0; c < g->cols; c++) {
            int64_t i = r * g->cols + c;
            uint32_t gb = bits_at(dt, got, i), wb = bits_at(dt, want, i);
            if (gb == wb || (is_nan(dt, gb) && is_nan(dt, wb))) continue;
            moects_diag_elem el = {.index = i, .got = gb, .want = wb};
            el.ulp = dt == MOECTS_BF16 ? moects__ulp_distance_bf16((uint16_t)gb, (uint16_t)wb)
                                       : moects__ulp_distance_f32(gb, wb);
            if (grouped(g)) {
                el.at[0] = e;
                el.at[1] = l;
                el.at[2] = c;
                d->ndims = 3;
            } else {
                el.at[0] = r;
                el.at[1] = c;
                d->ndims = 2;
            }
            if (d->nfirst < MOECTS_DIAG_FIRST) d->first[d->nfirst++] = el;
            keep_worst(d, &el);
            row_hits[r]++;
            col_hits[c]++;
            total++;
        }
    }
    if (total > 0) {
        d->dtype = dt;
        for (int k = 0; k < d->ndims; k++) snprintf(d->axes[k], sizeof d->axes[k], "%s", g->axis[k] ? g->axis[k] : "?");
        moects__mismatch_pattern(g, row_hits, col_hits, total, d->pattern, sizeof d->pattern);
    }
    free(row_hits);
    free(col_hits);
    return 0;
}
