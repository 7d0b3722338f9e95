/* test_cases_adapters.c: the layout adapters (ref/layout.c, docs/adapters.md). Forward results
 * against examples worked by hand from each convention's definition (the 128x4 tile formula of
 * cuBLAS "1D Block Scaling Factors Layout", DeepGEMM's granules of 8, gpt-oss's even/odd rows), the
 * W13 orders against the rows the layer reference reads (moects__fused_gate_up), and
 * inverse(forward(x)) == x bit for bit on random tensors of every registered model's fused_moe shapes
 * (E, H, I of every TP/EP layout; one expert's slice where the tensor is per expert). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_cases.h"
#include "moects_fused_internal.h"
#include "moects_layer.h"
#include "moects_layout.h"
#include "test_rng.h"

static const moects_adapter *get(const char *name)
{
    const moects_adapter *a = moects__adapter_find(name);
    cr_assert(a, "%s: not registered", name);
    return a;
}

Test(adapters, registry_names_are_unique_and_versioned)
{
    cr_assert_eq(moects__adapter_count(), 6);
    for (size_t i = 0; i < moects__adapter_count(); i++) {
        const moects_adapter *a = moects__adapter_at(i);
        cr_assert(strstr(a->name, ".v1"), "%s: no version", a->name);
        cr_assert(a->convention && strlen(a->convention) > 20, "%s: no convention", a->name);
        cr_assert_eq(moects__adapter_find(a->name), a);
    }
    cr_assert_null(moects__adapter_at(moects__adapter_count()));
    cr_assert_null(moects__adapter_find("w13.interleave1"));
}

/* The engine row of each canonical row, worked by hand for I = 16 (32 rows): gate i is row i, up i
 * row 16 + i in moects' [gate | up]. */
Test(adapters, w13_rows_by_hand)
{
    const moects_adapter *ug = get("w13.up_gate.v1"), *i1 = get("w13.interleave1.v1"), *i8 = get("w13.interleave8.v1");
    /* [up | gate]: gate 0 moves to row 16, up 0 to row 0 */
    cr_assert_eq(moects__adapter_w13_row(ug, 32, 0), 16);
    cr_assert_eq(moects__adapter_w13_row(ug, 32, 16), 0);
    cr_assert_eq(moects__adapter_w13_row(ug, 32, 31), 15);
    /* gpt-oss x[..., ::2] is the gate, x[..., 1::2] the linear (up) half */
    cr_assert_eq(moects__adapter_w13_row(i1, 32, 3), 6);
    cr_assert_eq(moects__adapter_w13_row(i1, 32, 16), 1);
    cr_assert_eq(moects__adapter_w13_row(i1, 32, 31), 31);
    /* DeepGEMM [gate 0..7, up 0..7, gate 8..15, up 8..15] */
    cr_assert_eq(moects__adapter_w13_row(i8, 32, 7), 7);
    cr_assert_eq(moects__adapter_w13_row(i8, 32, 8), 16);
    cr_assert_eq(moects__adapter_w13_row(i8, 32, 15), 23);
    cr_assert_eq(moects__adapter_w13_row(i8, 32, 16), 8);
    cr_assert_eq(moects__adapter_w13_row(i8, 32, 24), 24);
    cr_assert_eq(moects__adapter_w13_row(i8, 32, 31), 31);
    char why[160];
    cr_assert_eq(moects__adapter_bytes(i8, 0, 1, 24, 4, why, sizeof why), -1); /* I = 12 */
    cr_assert(strstr(why, "multiple of 8"), "%s", why);
    cr_assert_eq(moects__adapter_bytes(i1, 0, 1, 7, 4, why, sizeof why), -1);
}

/* A forward W13 adapter puts gate i and up i where the layer reference reads them under the
 * matching recipe order. */
Test(adapters, w13_rows_match_the_reference_reading)
{
    const char *names[] = {"w13.up_gate.v1", "w13.interleave1.v1", "w13.interleave8.v1"};
    for (int j = 0; j < 3; j++) {
        const moects_adapter *a = get(names[j]);
        for (int64_t I = 8; I <= 64; I += 8)
            for (int64_t i = 0; i < I; i++) {
                int64_t g, u;
                moects__fused_gate_up((moects_w13_order)a->param, I, i, &g, &u);
                cr_assert_eq(moects__adapter_w13_row(a, 2 * I, i), g, "%s I=%lld i=%lld", a->name, (long long)I,
                             (long long)i);
                cr_assert_eq(moects__adapter_w13_row(a, 2 * I, I + i), u);
            }
    }
}

/* 130 rows x 5 K-blocks: 2 row tiles x 2 K tiles of 512 bytes. Offsets from the cuBLAS formula
 * ((r / 128) * ceil(nkb / 4) + kb / 4) * 512 + (r % 32) * 16 + ((r / 32) % 4) * 4 + kb % 4, worked by
 * hand: */
Test(adapters, swizzle_by_hand)
{
    const int64_t rows = 130, nkb = 5;
    static const struct { int r, kb, off; } want[] = {
        {0, 0, 0},     {0, 3, 3},      {1, 0, 16},     {31, 0, 496},   {32, 0, 4},    {33, 3, 23},
        {64, 1, 9},    {127, 3, 511},  {0, 4, 512},    {127, 4, 1020}, {128, 0, 1024}, {129, 4, 1552},
    };
    uint8_t lin[130 * 5], tiles[2048], back[130 * 5];
    for (int i = 0; i < rows * nkb; i++) lin[i] = (uint8_t)(i * 7 + 1);
    char why[160];
    const moects_adapter *a = get("scales.nvfp4.swizzle_128x4.v1");
    cr_assert_eq(moects__adapter_bytes(a, 0, 1, rows, nkb, why, sizeof why), 2048);
    cr_assert_eq(moects__adapt(a, 0, 1, rows, nkb, lin, tiles, why, sizeof why), 0);
    for (size_t j = 0; j < sizeof want / sizeof want[0]; j++)
        cr_assert_eq(tiles[want[j].off], lin[want[j].r * nkb + want[j].kb], "(%d, %d) -> %d", want[j].r, want[j].kb,
                     want[j].off);
    cr_assert_eq(tiles[513], 0xFF);  /* row 0, K-block 5 (past nkb): padding, the NaN scale */
    cr_assert_eq(tiles[1056], 0xFF); /* row 130 (past rows), K-block 0: (1 * 2 + 0) * 512 + 2 * 16 */
    cr_assert_eq(moects__adapt(a, 1, 1, rows, nkb, tiles, back, why, sizeof why), 0);
    cr_assert_arr_eq(back, lin, sizeof lin);
}

Test(adapters, fp4_nibbles_by_hand)
{
    /* 0x21: element 0 code 1 (0.5) low, element 1 code 2 (1.0) high; high first: 0x12 */
    const uint8_t in[4] = {0x21, 0xF0, 0x07, 0x9A}, want[4] = {0x12, 0x0F, 0x70, 0xA9};
    uint8_t out[4];
    char why[160];
    cr_assert_eq(moects__adapt(get("fp4.hi_first.v1"), 0, 1, 1, 4, in, out, why, sizeof why), 0);
    cr_assert_arr_eq(out, want, 4);
}

/* inverse(forward(x)) == x for x of n random bytes seen as [batch][rows][cols]. */
static void round_trip(const moects_adapter *a, int64_t batch, int64_t rows, int64_t cols, uint8_t *x, uint8_t *y,
                       uint8_t *z)
{
    char why[160];
    const int64_t n = batch * rows * cols, m = moects__adapter_bytes(a, 0, batch, rows, cols, why, sizeof why);
    cr_assert_geq(m, n, "%s [%lld, %lld, %lld]: %s", a->name, (long long)batch, (long long)rows, (long long)cols, why);
    for (int64_t i = 0; i < n; i += 8) {
        const uint64_t r = rnd64();
        memcpy(x + i, &r, (size_t)(n - i < 8 ? n - i : 8));
    }
    cr_assert_eq(moects__adapt(a, 0, batch, rows, cols, x, y, why, sizeof why), 0, "%s", why);
    memset(z, 0x5A, (size_t)n);
    cr_assert_eq(moects__adapt(a, 1, batch, rows, cols, y, z, why, sizeof why), 0, "%s", why);
    cr_assert(!memcmp(x, z, (size_t)n), "%s [%lld, %lld, %lld]: not the same bytes back", a->name, (long long)batch,
              (long long)rows, (long long)cols);
}

#define CAP ((size_t)32 << 20) /* the test's buffers */

/* Bytes of a code row of K elements, or the first bytes of it that fit 4 MiB for `rows` rows (Grok-1
 * on tp1: W13 codes of one expert are 192 MiB; neither the row permutation nor the nibble swap
 * depends on the width, and the test stays within seconds). */
static int64_t code_cols(int64_t rows, int64_t K)
{
    const int64_t full = (K + 1) / 2, fit = ((int64_t)4 << 20) / rows;
    return full < fit ? full : fit;
}

/* One fused_moe shape (E, H, I, N1): W13 and W2 of one expert as MXFP4 codes and scales (when
 * per_expert: the first time H, I are seen), b13 of all experts, through every adapter that takes them. */
static void shape_round_trips(const moects_case *c, int per_expert, uint8_t *x, uint8_t *y, uint8_t *z)
{
    const int64_t H = c->H, I = c->inter, N1 = c->activation == MOECTS_ACT_RELU2 ? I : 2 * I;
    for (size_t i = 0; i < moects__adapter_count(); i++) {
        const moects_adapter *a = moects__adapter_at(i);
        if (a->kind == MOECTS_ADAPT_W13) {
            if (c->activation == MOECTS_ACT_RELU2) continue; /* no gate: no order to adapt */
            char why[160];
            if (a->param == MOECTS_W13_INTERLEAVE8 && I % 8) {
                cr_assert_eq(moects__adapter_bytes(a, 0, 1, N1, H / 2, why, sizeof why), -1);
                continue;
            }
            round_trip(a, c->E, N1, 4, x, y, z); /* b13, FP32 */
            if (!per_expert) continue;
            round_trip(a, 1, N1, code_cols(N1, H), x, y, z); /* codes */
            round_trip(a, 1, N1, (H + 31) / 32, x, y, z);   /* UE8M0 scales */
        } else if (!per_expert) {
            continue;
        } else if (a->kind == MOECTS_ADAPT_SCALES) {
            round_trip(a, 1, N1, (H + a->param - 1) / a->param, x, y, z); /* W13's scales */
            round_trip(a, 1, H, (I + a->param - 1) / a->param, x, y, z);  /* W2's */
        } else {
            round_trip(a, 1, N1, code_cols(N1, H), x, y, z);
            round_trip(a, 1, H, code_cols(H, I), x, y, z);
        }
    }
}

Test(adapters, round_trip_every_registered_shape, .timeout = 60)
{
    moects_case_list all = {0};
    char err[512];
    cr_assert_eq(moects__cases_builtin(MOECTS_SOURCE_DIR, &all, err, sizeof err), 0, "%s", err);
    rng_state = 29;
    uint8_t *x = malloc(CAP), *y = malloc(CAP), *z = malloc(CAP);
    cr_assert(x && y && z);
    int64_t seen[1024][3];
    size_t nseen = 0, nhi = 0, models = 0;
    char names[64][64];
    for (size_t i = 0; i < all.n; i++) {
        const moects_case *c = &all.v[i];
        if (c->op != MOECTS_OP_FUSED_MOE || !strcmp(c->model, "regression")) continue;
        size_t m = 0, j = 0;
        while (m < models && strcmp(names[m], c->model)) m++;
        if (m == models && models < 64) snprintf(names[models++], sizeof names[0], "%s", c->model);
        while (j < nseen && (seen[j][0] != c->E || seen[j][1] != c->H || seen[j][2] != c->inter)) j++;
        if (j < nseen) continue;
        cr_assert_lt(nseen, 1024);
        const int64_t N1 = 2 * c->inter, s13 = N1 * ((c->H + 15) / 16), s2 = c->H * ((c->inter + 15) / 16);
        const int64_t big = s13 > s2 ? s13 : s2; /* the NVFP4 scales, larger than MXFP4's */
        cr_assert_leq((uint64_t)(big > c->E * N1 * 4 ? big : c->E * N1 * 4), CAP, "%s: larger than the buffers", c->id);
        seen[nseen][0] = c->E, seen[nseen][1] = c->H, seen[nseen][2] = c->inter, nseen++;
        size_t h = 0;
        while (h + 1 < nseen && (seen[h][1] != c->H || seen[h][2] != c->inter)) h++;
        nhi += h + 1 == nseen;
        shape_round_trips(c, h + 1 == nseen, x, y, z);
    }
    cr_log_info("adapters: %zu shapes (E, H, I), %zu of (H, I), of %zu models round-trip", nseen, nhi, models);
    cr_assert_geq(models, 23); /* cases/models/: every registered model has fused_moe cases */
    free(x), free(y), free(z);
    moects__case_list_free(&all);
}
