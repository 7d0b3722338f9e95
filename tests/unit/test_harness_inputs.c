/* Tests of harness/run/inputs.c: determinism and the structural promises of the generated inputs
 * (DESIGN.md "Cases", "Determinism"; bug-reports.md). Expected values are worked out by hand
 * from the derivation rules, or are published test vectors (SplitMix64). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "moects_inputs.h"
#include "moects_ref.h"

static moects_case eg_case(const char *id, int64_t T, int64_t k, int64_t H, int64_t E, int es, int er,
                           moects_routing rt, moects_data d)
{
    moects_case c;
    memset(&c, 0, sizeof c);
    snprintf(c.id, sizeof c.id, "%s", id);
    c.op = MOECTS_OP_EP_GATHER;
    c.T = T;
    c.k = k;
    c.H = H;
    c.E_global = E;
    c.ep_size = es;
    c.ep_rank = er;
    c.has_map = es > 1;
    c.id_dtype = MOECTS_I32;
    c.out_dtype = MOECTS_BF16;
    c.routing = rt;
    c.data = d;
    c.tiers = MOECTS_TIER_SMOKE;
    return c;
}

static moects_case fg_case(const char *id, int64_t M, int64_t N, int64_t K, moects_fp4_format f,
                           moects_scale_layout l, moects_data d)
{
    moects_case c;
    memset(&c, 0, sizeof c);
    snprintf(c.id, sizeof c.id, "%s", id);
    c.op = MOECTS_OP_FP4_GEMM;
    c.M = M;
    c.N = N;
    c.K = K;
    c.format = f;
    c.scale_layout = l;
    c.out_dtype = MOECTS_BF16;
    c.data = d;
    return c;
}

static void build(const moects_case *c, uint64_t seed, moects_inputs *in)
{
    char err[256] = "";
    int rc = moects__inputs_build(c, seed, in, err, sizeof err);
    cr_assert_eq(rc, 0, "build %s: %s", c->id, err);
}

static int same_bytes(const moects_inputs *a, const moects_inputs *b)
{
    if (a->nt != b->nt) return 0;
    for (int i = 0; i < a->nt; i++) {
        if (a->t[i].bytes != b->t[i].bytes) return 0;
        if (a->t[i].bytes && memcmp(a->t[i].host, b->t[i].host, a->t[i].bytes)) return 0;
    }
    return 1;
}

static int64_t id_at(const moects_inputs *in, int64_t i)
{
    return in->eg.id_dtype == MOECTS_I64 ? ((int64_t *)in->t[MOECTS_EG_IDS].host)[i]
                                         : ((int32_t *)in->t[MOECTS_EG_IDS].host)[i];
}

Test(hash, splitmix64_vector)
{
    /* Vigna's splitmix64.c seeded with 0: first outputs 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4 */
    cr_assert_eq(moects__input_u64(0, 0), 0xe220a8397b1dcdafull);
    cr_assert_eq(moects__input_u64(0, 1), 0x6e789e6aa1b965f4ull);
}

Test(hash, key_depends_on_each_part)
{
    uint64_t k = moects__input_key(1, "ep_gather/a/tp1/t1", "x");
    cr_assert_eq(k, moects__input_key(1, "ep_gather/a/tp1/t1", "x"));
    cr_assert_neq(k, moects__input_key(2, "ep_gather/a/tp1/t1", "x"));
    cr_assert_neq(k, moects__input_key(1, "ep_gather/a/tp1/t2", "x"));
    cr_assert_neq(k, moects__input_key(1, "ep_gather/a/tp1/t1", "topk_ids"));
}

Test(determinism, case_alone_equals_case_in_a_run)
{
    moects_case a = eg_case("ep_gather/m/ep4/t64", 64, 4, 384, 32, 4, 1, MOECTS_ROUTE_SKEWED,
                            MOECTS_DATA_ADVERSARIAL);
    moects_case b = fg_case("fp4_gemm.nvfp4/m/tp1/gemm1/m33", 33, 40, 96, MOECTS_FP4_NVFP4,
                            MOECTS_SCALES_SWIZZLED_128X4, MOECTS_DATA_NAN);
    moects_inputs a1, a2, b1, b2, other;
    build(&a, 7, &a1);                 /* alone */
    build(&b, 7, &b1);                 /* "a run": other cases first, other seeds in between */
    build(&b, 8, &other);
    moects__inputs_free(&other);
    build(&a, 7, &a2);
    build(&b, 7, &b2);
    cr_assert(same_bytes(&a1, &a2));
    cr_assert(same_bytes(&b1, &b2));
    cr_assert_eq(b1.alpha, b2.alpha);
    build(&a, 8, &other);              /* another seed: other bytes */
    cr_assert_not(same_bytes(&a1, &other));
    moects__inputs_free(&other);
    moects_case a3 = a;                /* same shape, other id: other bytes */
    snprintf(a3.id, sizeof a3.id, "ep_gather/m/ep4/t64b");
    build(&a3, 7, &other);
    cr_assert_not(same_bytes(&a1, &other));
    moects__inputs_free(&other);
    moects__inputs_free(&a1);
    moects__inputs_free(&a2);
    moects__inputs_free(&b1);
    moects__inputs_free(&b2);
}

Test(ep_gather, local_experts_follow_the_derivation)
{
    /* E = 10 over EP 4: 10/4 = 2 each, the first 10%4 = 2 ranks one more:
     * rank 0: 0..2, rank 1: 3..5, rank 2: 6..7, rank 3: 8..9 */
    int64_t first[4] = {0, 3, 6, 8}, n[4] = {3, 3, 2, 2};
    for (int r = 0; r < 4; r++) {
        moects_case c = eg_case("ep_gather/x/ep4/t8", 8, 2, 64, 10, 4, r, MOECTS_ROUTE_UNIFORM,
                                MOECTS_DATA_EXACT);
        moects_inputs in;
        build(&c, 1, &in);
        cr_assert_eq(in.first_local, first[r]);
        cr_assert_eq(in.n_local, n[r]);
        const int32_t *map = in.t[MOECTS_EG_MAP].host;
        for (int g = 0; g < 10; g++)
            cr_assert_eq(map[g], (g >= first[r] && g < first[r] + n[r]) ? g - first[r] : -1);
        moects__inputs_free(&in);
    }
}

/* Checks every ep_gather promise; returns the number of valid slots. */
static int64_t check_ep_gather(const moects_inputs *in)
{
    const moects_ep_gather_shape *s = &in->eg;
    const int32_t *idx = in->t[MOECTS_EG_IDX].host, *map = in->t[MOECTS_EG_MAP].host;
    const float *w = in->t[MOECTS_EG_W].host;
    int64_t valid = 0;
    cr_assert_eq(s->M_sum % 128, 0, "M_sum %lld not a multiple of 128", (long long)s->M_sum);
    static char used[1 << 20];
    memset(used, 0, sizeof used);
    cr_assert_lt(s->M_sum, (int64_t)sizeof used);
    for (int64_t t = 0; t < s->T; t++)
        for (int64_t j = 0; j < s->k; j++) {
            int64_t i = t * s->k + j, e = id_at(in, i);
            for (int64_t q = 0; q < j; q++)
                if (e >= 0 && e < s->E_global) cr_assert_neq(id_at(in, t * s->k + q), e, "duplicate expert");
            int ok = s->has_expert_map ? (e >= 0 && e < s->E_global && map[e] >= 0) : e >= 0;
            if (!ok) {
                cr_assert_eq(idx[i], INT32_MAX);
                cr_assert(isnan(w[i]));
                continue;
            }
            valid++;
            cr_assert(idx[i] >= 0 && idx[i] < s->M_sum);
            cr_assert_not(used[idx[i]], "two slots share row %d", idx[i]);
            used[idx[i]] = 1;
            cr_assert(isfinite(w[i]));
        }
    cr_assert_eq(valid, in->valid_slots);
    return valid;
}

Test(ep_gather, uniform_exact_values)
{
    moects_case c = eg_case("ep_gather/x/tp1/t100", 100, 8, 96, 64, 1, 0, MOECTS_ROUTE_UNIFORM,
                            MOECTS_DATA_EXACT);
    moects_inputs in;
    build(&c, 3, &in);
    cr_assert_eq(in.eg.has_expert_map, 0);
    cr_assert_null(in.t[MOECTS_EG_MAP].host);
    cr_assert_eq(check_ep_gather(&in), 800); /* no map, ids 0..63: every slot valid */
    const float *w = in.t[MOECTS_EG_W].host;
    for (int i = 0; i < 800; i++) {
        float v = w[i] * 64.0f;
        cr_assert(v == floorf(v) && v >= 1 && v <= 64, "weight %g is not k/64", w[i]);
    }
    /* valid rows: 4 significant bits, exponent within 2^-3..2^3 */
    const int32_t *idx = in.t[MOECTS_EG_IDX].host;
    const uint16_t *x = in.t[MOECTS_EG_X].host;
    for (int i = 0; i < 800; i++)
        for (int d = 0; d < 96; d++) {
            uint16_t b = x[(size_t)idx[i] * 96 + d];
            int e = (b >> 7) & 0xff;
            cr_assert_eq(b & 0xf, 0);
            cr_assert(e >= 124 && e <= 130);
        }
    moects__inputs_free(&in);
}

Test(ep_gather, rows_sorted_by_expert_and_padding_is_garbage)
{
    moects_case c = eg_case("ep_gather/x/ep2/t50", 50, 4, 32, 16, 2, 1, MOECTS_ROUTE_SKEWED,
                            MOECTS_DATA_EXACT);
    moects_inputs in;
    build(&c, 5, &in);
    check_ep_gather(&in);
    const int32_t *idx = in.t[MOECTS_EG_IDX].host, *map = in.t[MOECTS_EG_MAP].host;
    /* rows of local expert l form [start_l, start_l + cnt_l), start_l multiple of 128, ascending
     * in l and in token order */
    int64_t cnt[8] = {0}, minrow[8], maxrow[8], last[8];
    for (int l = 0; l < 8; l++) minrow[l] = INT64_MAX, maxrow[l] = -1, last[l] = -1;
    for (int64_t i = 0; i < 200; i++) {
        int64_t e = id_at(&in, i);
        if (idx[i] == INT32_MAX) continue;
        int l = map[e];
        cnt[l]++;
        if (idx[i] < minrow[l]) minrow[l] = idx[i];
        if (idx[i] > maxrow[l]) maxrow[l] = idx[i];
        cr_assert_gt(idx[i], last[l], "rows of one expert follow token order");
        last[l] = idx[i];
    }
    int64_t row = 0;
    const uint16_t *x = in.t[MOECTS_EG_X].host;
    int64_t pad_special = 0, pad_total = 0;
    for (int l = 0; l < 8; l++) {
        if (!cnt[l]) continue;
        cr_assert_eq(minrow[l], row);
        cr_assert_eq(maxrow[l], row + cnt[l] - 1);
        int64_t end = row + (cnt[l] + 127) / 128 * 128;
        for (int64_t r = row + cnt[l]; r < end; r++)
            for (int d = 0; d < 32; d++, pad_total++) pad_special += (x[r * 32 + d] & 0x7f80) == 0x7f80;
        row = end;
    }
    cr_assert_eq(row, in.eg.M_sum);
    cr_assert_gt(pad_total, 0);
    cr_assert_gt(pad_special, pad_total / 4, "padding rows should be mostly NaN/Inf garbage");
    moects__inputs_free(&in);
}

Test(ep_gather, zero_expert_and_one_expert)
{
    moects_case z = eg_case("ep_gather/x/ep4/zero", 300, 4, 16, 16, 4, 2, MOECTS_ROUTE_ZERO_EXPERT,
                            MOECTS_DATA_EXACT);
    moects_inputs in;
    build(&z, 9, &in);
    check_ep_gather(&in);
    int hits[16] = {0};
    for (int64_t i = 0; i < 1200; i++) hits[id_at(&in, i)]++;
    int zero_local = 0; /* rank 2 of 4 holds 8..11 */
    for (int e = 8; e < 12; e++) zero_local += hits[e] == 0;
    cr_assert_eq(zero_local, 1);
    moects__inputs_free(&in);

    moects_case o = eg_case("ep_gather/x/ep4/one", 300, 4, 16, 16, 4, 2, MOECTS_ROUTE_ONE_EXPERT,
                            MOECTS_DATA_EXACT);
    build(&o, 9, &in);
    check_ep_gather(&in);
    int64_t e0 = id_at(&in, 0);
    cr_assert(e0 >= 8 && e0 < 12);
    for (int64_t t = 0; t < 300; t++) cr_assert_eq(id_at(&in, t * 4), e0);
    moects__inputs_free(&in);
}

Test(ep_gather, stale_ids_with_map)
{
    moects_case c = eg_case("ep_gather/x/ep8/stale", 64, 8, 16, 64, 8, 0, MOECTS_ROUTE_STALE_IDS,
                            MOECTS_DATA_EXACT);
    moects_inputs in;
    build(&c, 1, &in);
    check_ep_gather(&in);
    int saw_example = 0, stale = 0;
    for (int64_t i = 0; i < 64 * 8; i++) {
        int64_t e = id_at(&in, i);
        saw_example += e == 2071690107;
        stale += e >= 64;
    }
    cr_assert_eq(saw_example, 1);
    cr_assert_gt(stale, 8);
    for (int j = 0; j < 8; j++) cr_assert_geq(id_at(&in, 63 * 8 + j), 64, "last token all stale");
    moects__inputs_free(&in);
}

Test(ep_gather, stale_int64_ids_truncate_to_local_experts)
{
    moects_case c = eg_case("ep_gather/x/ep8/stale64", 64, 8, 16, 64, 8, 3, MOECTS_ROUTE_STALE_IDS,
                            MOECTS_DATA_EXACT);
    c.id_dtype = MOECTS_I64;
    moects_inputs in;
    build(&c, 1, &in);
    check_ep_gather(&in);
    int trunc = 0;
    for (int64_t i = 0; i < 64 * 8; i++) {
        int64_t e = id_at(&in, i);
        if (e >= (1ll << 32)) {
            int32_t low = (int32_t)(uint32_t)e;
            cr_assert(low >= 24 && low < 32, "low word %d should be a local expert of rank 3", low);
            trunc++;
        }
    }
    cr_assert_gt(trunc, 0);
    moects__inputs_free(&in);
}

Test(ep_gather, stale_ids_without_map_are_valid_slots)
{
    /* DESIGN.md: without a map a slot is valid iff id >= 0, so stale ids read their row */
    moects_case c = eg_case("ep_gather/x/tp1/stale", 32, 4, 16, 16, 1, 0, MOECTS_ROUTE_STALE_IDS,
                            MOECTS_DATA_EXACT);
    moects_inputs in;
    build(&c, 1, &in);
    cr_assert_eq(check_ep_gather(&in), 128);
    moects__inputs_free(&in);
}

Test(ep_gather, negative_ids)
{
    moects_case c = eg_case("ep_gather/x/tp1/neg", 40, 4, 16, 16, 1, 0, MOECTS_ROUTE_NEG_IDS,
                            MOECTS_DATA_EXACT);
    moects_inputs in;
    build(&c, 1, &in);
    int64_t valid = check_ep_gather(&in);
    cr_assert_lt(valid, 160);
    for (int j = 0; j < 4; j++) cr_assert_lt(id_at(&in, 39 * 4 + j), 0, "last token has no valid slot");
    moects__inputs_free(&in);
}

Test(ep_gather, no_local_routes_every_slot_elsewhere)
{
    moects_case c = eg_case("ep_gather/x/ep8/nolocal", 16, 8, 64, 64, 8, 3, MOECTS_ROUTE_NO_LOCAL,
                            MOECTS_DATA_EXACT);
    moects_inputs in;
    build(&c, 1, &in);
    cr_assert_eq(check_ep_gather(&in), 0);
    cr_assert_eq(in.eg.M_sum, 0);
    cr_assert_null(in.t[MOECTS_EG_X].host);
    cr_assert_eq(in.out_bytes, 16 * 64 * 2);
    for (int64_t i = 0; i < 128; i++) {
        int64_t e = id_at(&in, i);
        cr_assert(e >= 0 && e < 64 && (e < 24 || e >= 32), "id %lld is local to rank 3 (24..31)", (long long)e);
    }
    moects__inputs_free(&in);
}

Test(ep_gather, zero_tokens_give_empty_tensors)
{
    moects_case c = eg_case("ep_gather/x/ep8/t0", 0, 8, 7168, 256, 8, 0, MOECTS_ROUTE_UNIFORM,
                            MOECTS_DATA_EXACT);
    moects_inputs in;
    build(&c, 1, &in);
    cr_assert_eq(in.eg.M_sum, 0);
    cr_assert_null(in.t[MOECTS_EG_X].host);
    cr_assert_null(in.t[MOECTS_EG_IDS].host);
    cr_assert_eq(in.out_bytes, 0);
    cr_assert_not_null(in.t[MOECTS_EG_MAP].host);
    moects__inputs_free(&in);
}

Test(ep_gather, adversarial_cancellation_pairs)
{
    moects_case c = eg_case("ep_gather/x/tp1/adv", 64, 4, 32, 16, 1, 0, MOECTS_ROUTE_UNIFORM,
                            MOECTS_DATA_ADVERSARIAL);
    moects_inputs in;
    build(&c, 2, &in);
    check_ep_gather(&in);
    const int32_t *idx = in.t[MOECTS_EG_IDX].host;
    const float *w = in.t[MOECTS_EG_W].host;
    const uint16_t *x = in.t[MOECTS_EG_X].host;
    int pairs = 0, inexact = 0;
    for (int t = 0; t < 64; t++) {
        const uint16_t *r0 = x + (size_t)idx[t * 4] * 32, *r1 = x + (size_t)idx[t * 4 + 1] * 32;
        int neg = w[t * 4] == w[t * 4 + 1];
        for (int d = 0; d < 32 && neg; d++) neg = r1[d] == (r0[d] ^ 0x8000);
        pairs += neg;
        float s = w[t * 4] * 16777216.0f; /* 2^24: full significands are not multiples of 2^-6 */
        inexact += (w[t * 4] * 64.0f) != floorf(w[t * 4] * 64.0f) && isfinite(s);
    }
    cr_assert(pairs > 10 && pairs < 54, "about half the tokens cancel, got %d", pairs);
    cr_assert_gt(inexact, 32);
    moects__inputs_free(&in);
}

Test(ep_gather, nan_data_has_nan_and_inf)
{
    moects_case c = eg_case("ep_gather/x/tp1/nan", 64, 4, 256, 16, 1, 0, MOECTS_ROUTE_UNIFORM,
                            MOECTS_DATA_NAN);
    moects_inputs in;
    build(&c, 2, &in);
    const int32_t *idx = in.t[MOECTS_EG_IDX].host;
    const uint16_t *x = in.t[MOECTS_EG_X].host;
    int nan = 0, inf = 0;
    for (int s = 0; s < 256; s++)
        for (int d = 0; d < 256; d++) {
            uint16_t b = x[(size_t)idx[s] * 256 + d] & 0x7fff;
            nan += b > 0x7f80;
            inf += b == 0x7f80;
        }
    cr_assert_gt(nan, 0);
    cr_assert_gt(inf, 0);
    moects__inputs_free(&in);
}

Test(ep_gather, pooled_generation_is_deterministic_and_rows_differ)
{
    moects_case c = eg_case("ep_gather/x/tp1/large", 512, 2, 640, 8, 1, 0, MOECTS_ROUTE_UNIFORM,
                            MOECTS_DATA_EXACT);
    moects_inputs a, b;
    char err[256];
    cr_assert_eq(moects__inputs_build_ex(&c, 1, 1000, &a, err, sizeof err), 0);
    cr_assert_eq(moects__inputs_build_ex(&c, 1, 1000, &b, err, sizeof err), 0);
    cr_assert(a.pooled);
    cr_assert(same_bytes(&a, &b));
    check_ep_gather(&a);
    const int32_t *idx = a.t[MOECTS_EG_IDX].host;
    const uint16_t *x = a.t[MOECTS_EG_X].host;
    int same = 0;
    for (int s = 1; s < 1024; s++) same += !memcmp(x + (size_t)idx[0] * 640, x + (size_t)idx[s] * 640, 1280);
    cr_assert_eq(same, 0, "each valid row holds its own values");
    moects__inputs_free(&a);
    moects__inputs_free(&b);
}

Test(ep_gather, bad_case_is_an_error_naming_the_field)
{
    moects_case c = eg_case("ep_gather/x/tp1/bad", 4, 20, 16, 16, 1, 0, MOECTS_ROUTE_UNIFORM,
                            MOECTS_DATA_EXACT);
    moects_inputs in;
    char err[256] = "";
    cr_assert_eq(moects__inputs_build(&c, 1, &in, err, sizeof err), -1);
    cr_assert(strstr(err, "ep_gather/x/tp1/bad") && strstr(err, "k:"), "%s", err);
}

/* ---- fp4_gemm ---- */

Test(fp4_gemm, swizzle_offsets_by_hand)
{
    /* DESIGN.md: ((r/128)*ceil(nkb/4) + kb/4)*512 + (r%32)*16 + ((r/32)%4)*4 + kb%4 */
    cr_assert_eq(moects__swizzle_offset(0, 0, 5), 0);
    cr_assert_eq(moects__swizzle_offset(129, 4, 5), 1552); /* (1*2+1)*512 + 1*16 + 0 + 0 */
    cr_assert_eq(moects__swizzle_offset(70, 2, 5), 106); /* 70%32 = 6: 6*16 + (70/32)%4 = 2: 2*4 + 2 */
    cr_assert_eq(moects_swizzle_bytes(130, 5), 256 * 8);
    cr_assert_eq(moects_swizzle_bytes(1, 1), 128 * 4);
}

Test(fp4_gemm, mxfp4_exact_scales_and_alpha)
{
    moects_case c = fg_case("fp4_gemm.mxfp4/x/tp1/gemm1/m5", 5, 7, 96, MOECTS_FP4_MXFP4,
                            MOECTS_SCALES_LINEAR, MOECTS_DATA_EXACT);
    moects_inputs in;
    build(&c, 1, &in);
    cr_assert_eq(in.alpha, 1.0f);
    cr_assert_eq(in.t[MOECTS_FG_A].bytes, 5 * 48);
    cr_assert_eq(in.t[MOECTS_FG_SA].bytes, 5 * 3);
    cr_assert_eq(in.t[MOECTS_FG_SB].bytes, 7 * 3);
    const uint8_t *sa = in.t[MOECTS_FG_SA].host;
    for (int i = 0; i < 15; i++) cr_assert(sa[i] >= 123 && sa[i] <= 131);
    int neg_zero = 0;
    const uint8_t *a = in.t[MOECTS_FG_A].host;
    for (int i = 0; i < 240; i++) neg_zero += (a[i] & 15) == 8 || (a[i] >> 4) == 8;
    cr_assert_gt(neg_zero, 0, "-0 codes appear");
    cr_assert_eq(in.out_elems, 35);
    moects__inputs_free(&in);
}

Test(fp4_gemm, nvfp4_scales_normal_and_alpha_from_global_scales)
{
    moects_case c = fg_case("fp4_gemm.nvfp4/x/tp1/gemm1/m9", 9, 4, 64, MOECTS_FP4_NVFP4,
                            MOECTS_SCALES_LINEAR, MOECTS_DATA_EXACT);
    moects_inputs in;
    build(&c, 1, &in);
    const uint8_t *sa = in.t[MOECTS_FG_SA].host;
    for (int i = 0; i < 9 * 4; i++) {
        int e = sa[i] >> 3;
        cr_assert(e >= 1 && e <= 14 && !(sa[i] & 0x80), "scale 0x%02x not a normal E4M3", sa[i]);
    }
    /* gs = 448*6/amax with amax a multiple of 1/16 in [1/16, 256] */
    double amax_a = 2688.0 / in.gs_a;
    cr_assert(amax_a >= 0.0625 * 0.999 && amax_a <= 256.001);
    volatile float p = in.gs_a * in.gs_b;
    cr_assert_eq(in.alpha, 1.0f / p);
    moects__inputs_free(&in);
}

Test(fp4_gemm, swizzled_holds_the_same_scales_as_linear)
{
    moects_case l = fg_case("fp4_gemm.mxfp4/x/tp1/gemm1/m130", 130, 3, 160, MOECTS_FP4_MXFP4,
                            MOECTS_SCALES_LINEAR, MOECTS_DATA_ADVERSARIAL);
    moects_case s = l;
    s.scale_layout = MOECTS_SCALES_SWIZZLED_128X4;
    moects_inputs li, si;
    build(&l, 4, &li);
    build(&s, 4, &si);
    cr_assert_eq(si.t[MOECTS_FG_SA].bytes, 256 * 8);
    cr_assert_eq(si.t[MOECTS_FG_SB].bytes, 128 * 8);
    const uint8_t *lin = li.t[MOECTS_FG_SA].host, *swz = si.t[MOECTS_FG_SA].host;
    size_t nonpad = 0;
    for (int r = 0; r < 130; r++)
        for (int kb = 0; kb < 5; kb++) {
            /* hand-expanded formula, nkb = 5 -> 2 groups of 4 K-blocks */
            size_t off = (size_t)(((r / 128) * 2 + kb / 4) * 512 + (r % 32) * 16 + ((r / 32) % 4) * 4 + kb % 4);
            cr_assert_eq(swz[off], lin[r * 5 + kb]);
            nonpad++;
        }
    size_t poison = 0;
    for (size_t i = 0; i < 2048; i++) poison += swz[i] == 0xff;
    /* padding is 0xFF poison (UE8M0 NaN: a kernel reading it fails); the 650 scales here are
     * adversarial MXFP4 codes (0..2, 107..147, 253, 254: never 0xFF), so exactly 2048 - 650 bytes are 0xFF */
    cr_assert_eq(poison, 2048 - nonpad, "padding of the swizzled layout is 0xFF poison");
    cr_assert_eq(memcmp(li.t[MOECTS_FG_A].host, si.t[MOECTS_FG_A].host, li.t[MOECTS_FG_A].bytes), 0);
    moects__inputs_free(&li);
    moects__inputs_free(&si);
}

Test(fp4_gemm, adversarial_and_nan_scales)
{
    moects_case c = fg_case("fp4_gemm.mxfp4/x/tp1/gemm1/adv", 64, 64, 256, MOECTS_FP4_MXFP4,
                            MOECTS_SCALES_LINEAR, MOECTS_DATA_ADVERSARIAL);
    moects_inputs in;
    build(&c, 1, &in);
    const uint8_t *sa = in.t[MOECTS_FG_SA].host;
    int c0 = 0, c1 = 0, c254 = 0, zero_blocks = 0;
    for (int i = 0; i < 64 * 8; i++) c0 += sa[i] == 0, c1 += sa[i] == 1, c254 += sa[i] == 254;
    cr_assert(c0 && c1 && c254);
    const uint8_t *a = in.t[MOECTS_FG_A].host;
    for (int r = 0; r < 64; r++)
        for (int kb = 0; kb < 8; kb++) {
            int z = 1;
            for (int q = 0; q < 16; q++) z &= (a[r * 128 + kb * 16 + q] & 0x77) == 0;
            zero_blocks += z;
        }
    cr_assert_gt(zero_blocks, 0);
    moects__inputs_free(&in);

    c = fg_case("fp4_gemm.nvfp4/x/tp1/gemm1/adv", 64, 64, 256, MOECTS_FP4_NVFP4,
                MOECTS_SCALES_LINEAR, MOECTS_DATA_ADVERSARIAL);
    build(&c, 1, &in);
    sa = in.t[MOECTS_FG_SA].host;
    int sub = 0, nan = 0;
    for (int i = 0; i < 64 * 16; i++) sub += sa[i] >= 1 && sa[i] <= 7, nan += (sa[i] & 0x7f) == 0x7f;
    cr_assert_gt(sub, 0);
    cr_assert_eq(nan, 0);
    moects__inputs_free(&in);

    c = fg_case("fp4_gemm.mxfp4/x/tp1/gemm1/nan", 64, 64, 256, MOECTS_FP4_MXFP4,
                MOECTS_SCALES_LINEAR, MOECTS_DATA_NAN);
    build(&c, 1, &in);
    sa = in.t[MOECTS_FG_SA].host;
    nan = 0;
    for (int i = 0; i < 64 * 8; i++) nan += sa[i] == 0xff;
    cr_assert_gt(nan, 0);
    moects__inputs_free(&in);
}

Test(fp4_gemm, odd_k_pad_nibble)
{
    moects_case c = fg_case("fp4_gemm.mxfp4/x/tp1/gemm1/k33", 3, 3, 33, MOECTS_FP4_MXFP4,
                            MOECTS_SCALES_LINEAR, MOECTS_DATA_EXACT);
    moects_inputs in;
    build(&c, 1, &in);
    cr_assert_eq(in.t[MOECTS_FG_A].bytes, 3 * 17);
    cr_assert_eq(in.t[MOECTS_FG_SA].bytes, 3 * 2);
    const uint8_t *a = in.t[MOECTS_FG_A].host;
    for (int r = 0; r < 3; r++) cr_assert_eq(a[r * 17 + 16] >> 4, 7);
    moects__inputs_free(&in);
}

/* ---- negzero (cases/regressions/21-signed-zero.json) ---- */

static unsigned nib(const uint8_t *row, int k) { return (row[k / 2] >> (k % 2 * 4)) & 0xfu; }

/* Hand premises of the construction (IEEE 754 binary32, RNE): UE8M0 codes 0 and 105 are 2^-127 and
 * 2^-22, their product 2^-149 is the least subnormal; fmaf(-0.25, 2^-149, +0) = -2^-151 rounded,
 * below half the least subnormal: -0. Then fmaf(+0, s, -0) = +0 + -0 = +0 under RNE, while
 * fmaf(-0, s, -0) = -0. */
Test(fp4_gemm, negzero_premises)
{
    volatile float s = 0x1p-127f, t = 0x1p-22f, p = -0.25f, z = 0.0f, nz = -0.0f;
    float st = s * t;
    cr_assert_eq(st, 0x1p-149f);
    float acc = fmaf(p, st, z);
    cr_assert(acc == 0.0f && signbit(acc), "block 0 leaves acc = -0");
    float good = fmaf(z, 1.0f, acc), bad = fmaf(nz, 1.0f, acc);
    cr_assert(good == 0.0f && !signbit(good));
    cr_assert(bad == 0.0f && signbit(bad));
}

/* One registered negzero case (M 64, N 128, K 200: 7 K-blocks, the last one of 8 elements): the
 * rewritten rows hold the intended codes and scale codes, and the reference gives, at every
 * (m % 4 == 1, n % 4 == 2): blockwise_v1 +0 (0x0000 / 0x00000000); exact_v1 -0 where
 * m % 8 == 1 (the exact value -0.25 * 2^-149 = -2^-151 rounds to -0) and +0 where m % 8 == 5
 * (every product -0: an exact zero sum is +0). */
Test(fp4_gemm, negzero_rows_and_reference)
{
    enum { M = 64, N = 128, K = 200, NKB = 7, KB = 100 };
    moects_case c = fg_case("fp4_gemm.mxfp4/regression/signed-zero/n128/k200/m64/linear/bf16", M, N, K,
                            MOECTS_FP4_MXFP4, MOECTS_SCALES_LINEAR, MOECTS_DATA_NEGZERO);
    moects_inputs in;
    build(&c, 1, &in);
    const uint8_t *a = in.t[MOECTS_FG_A].host, *b = in.t[MOECTS_FG_B].host;
    const uint8_t *sa = in.t[MOECTS_FG_SA].host, *sb = in.t[MOECTS_FG_SB].host;
    int chosen_a = 0, chosen_b = 0;
    for (int m = 1; m < M; m += 4, chosen_a++) {
        const uint8_t *r = a + m * KB;
        cr_assert_eq(nib(r, 0), m % 8 == 1 ? 0x9u : 0x8u, "A row %d k 0", m);
        for (int k = 1; k < 32; k++) cr_assert_eq(nib(r, k), m % 8 == 1 ? 0x0u : 0x8u, "A row %d k %d", m, k);
        for (int k = 32; k < K; k++) cr_assert_eq(nib(r, k), 0x8u, "A row %d k %d", m, k);
        cr_assert_eq(sa[m * NKB], 0, "sA row %d block 0", m);
        for (int kb = 1; kb < NKB; kb++) cr_assert(sa[m * NKB + kb] >= 123 && sa[m * NKB + kb] <= 131);
    }
    for (int n = 2; n < N; n += 4, chosen_b++) {
        const uint8_t *r = b + n * KB;
        cr_assert_eq(nib(r, 0), 0x1u, "B row %d k 0", n);
        for (int k = 32; k < K; k++) cr_assert_lt(nib(r, k), 0x8u, "B row %d k %d: sign bit set", n, k);
        cr_assert_eq(sb[n * NKB], 105, "sB row %d block 0", n);
    }
    cr_assert_eq(chosen_a, 16);
    cr_assert_eq(chosen_b, 32);
    /* an untouched row keeps exact data: A row 0 has some nonzero code in a later block */
    int nonzero = 0;
    for (int k = 32; k < K; k++) nonzero |= (nib(a, k) & 7) != 0;
    cr_assert(nonzero);

    for (int f32 = 0; f32 < 2; f32++) {
        moects_fp4_gemm_shape s = in.fg;
        s.out_dtype = f32 ? MOECTS_F32 : MOECTS_BF16;
        static uint32_t bw[M * N], ex[M * N];
        moects_fp4_gemm_args args = {.a = a, .b = b, .sa = sa, .sb = sb, .alpha = 1.0f, .d = bw};
        cr_assert_eq(moects__ref_fp4_gemm(&s, &args, MOECTS_RECIPE_FP4_BLOCKWISE_V1), 0);
        args.d = ex;
        cr_assert_eq(moects__ref_fp4_gemm(&s, &args, MOECTS_RECIPE_EXACT_V1), 0);
        for (int m = 1; m < M; m += 4)
            for (int n = 2; n < N; n += 4) {
                uint32_t vb = f32 ? bw[m * N + n] : ((uint16_t *)bw)[m * N + n];
                uint32_t ve = f32 ? ex[m * N + n] : ((uint16_t *)ex)[m * N + n];
                uint32_t neg = f32 ? 0x80000000u : 0x8000u;
                cr_assert_eq(vb, 0u, "blockwise_v1 %s D[%d][%d] = 0x%x, want +0", f32 ? "f32" : "bf16", m, n, vb);
                cr_assert_eq(ve, m % 8 == 1 ? neg : 0u, "exact_v1 %s D[%d][%d] = 0x%x", f32 ? "f32" : "bf16", m,
                             n, ve);
            }
    }
    moects__inputs_free(&in);
}

Test(fp4_gemm, negzero_needs_mxfp4)
{
    moects_case c = fg_case("fp4_gemm.nvfp4/x/negzero", 64, 128, 128, MOECTS_FP4_NVFP4, MOECTS_SCALES_LINEAR,
                            MOECTS_DATA_NEGZERO);
    moects_inputs in;
    char err[256] = "";
    cr_assert_eq(moects__inputs_build(&c, 1, &in, err, sizeof err), -1);
    cr_assert_str_eq(err, "case fp4_gemm.nvfp4/x/negzero: data: negzero is defined for MXFP4 only");
}

/* ---- moe_gemm ---- */

/* counts {1, 0, 130} cycled over E experts, N 40, K 96 (MXFP4: 3 K-blocks, NVFP4: 6). */
static moects_case mg_case(const char *id, int64_t E, moects_moe_format f, moects_row_layout rows,
                           moects_scale_layout l, moects_data d)
{
    moects_case c;
    memset(&c, 0, sizeof c);
    snprintf(c.id, sizeof c.id, "%s", id);
    c.op = MOECTS_OP_MOE_GEMM;
    c.E = E;
    c.N = 40;
    c.K = 96;
    c.moe_format = f;
    c.b_format = f == MOECTS_MOE_NVFP4 ? MOECTS_FP4_NVFP4 : MOECTS_FP4_MXFP4;
    c.rows = rows;
    c.align = rows == MOECTS_ROWS_CONTIGUOUS ? 128 : 1;
    c.a_scale_block = f == MOECTS_MOE_W4A8 ? 128 : 0;
    c.scale_layout = l;
    c.out_dtype = MOECTS_BF16;
    c.data = d;
    c.n_counts = 3;
    c.counts[0] = 1, c.counts[1] = 0, c.counts[2] = 130;
    return c;
}

/* Contiguous: groups padded to 128: rows 128 + 0 + 256 = 384; m_indices 0 at row 0, -1 at rows
 * 1..127, 2 at rows 128..257, -1 at 258..383; padding rows' A scales are NaN (0xFF); the tensor
 * names are the args fields; the same (seed, id) gives the same bytes, another seed other bytes. */
Test(inputs, moe_contiguous_rows_padding_and_names)
{
    moects_case c = mg_case("moe/t", 3, MOECTS_MOE_MXFP4, MOECTS_ROWS_CONTIGUOUS, MOECTS_SCALES_LINEAR,
                            MOECTS_DATA_EXACT);
    moects_inputs in, again, other;
    char err[256];
    cr_assert_eq(moects__inputs_build(&c, 7, &in, err, sizeof err), 0, "%s", err);
    static const char *const names[] = {"a", "sa", "b", "sb", "alpha", "gs_a", "gs_b", "m_indices", "masked_m",
                                        "expert_offsets"};
    for (int i = 0; i < MOECTS_MG_NT; i++) cr_expect_str_eq(in.t[i].name, names[i]);
    cr_expect_eq(in.mg.M, 384);
    cr_expect_eq(in.rows, 384);
    cr_expect_eq(in.valid_rows, 131);
    cr_expect_eq(in.out_elems, 384 * 40);
    const int32_t *mi = in.t[MOECTS_MG_M_INDICES].host;
    const uint8_t *sa = in.t[MOECTS_MG_SA].host;
    cr_expect(mi[0] == 0 && mi[1] == -1 && mi[127] == -1 && mi[128] == 2 && mi[257] == 2 && mi[258] == -1);
    for (int r = 0; r < 384; r++) {
        cr_expect_eq(in.row_valid[r], mi[r] >= 0);
        if (mi[r] < 0) cr_expect(sa[r * 3] == 0xFF && sa[r * 3 + 2] == 0xFF, "row %d", r);
        else cr_expect(sa[r * 3] != 0xFF, "row %d", r);
    }
    cr_expect_null(in.t[MOECTS_MG_MASKED_M].host);
    cr_expect_eq(in.t[MOECTS_MG_B].bytes, 3 * 40 * 48);
    const float *alpha = in.t[MOECTS_MG_ALPHA].host;
    cr_expect(alpha[0] == 1 && alpha[2] == 1);
    cr_assert_eq(moects__inputs_build(&c, 7, &again, err, sizeof err), 0);
    cr_assert_eq(moects__inputs_build(&c, 8, &other, err, sizeof err), 0);
    for (int i = 0; i < MOECTS_MG_NT; i++) {
        cr_expect_eq(in.t[i].bytes, again.t[i].bytes);
        if (in.t[i].bytes) cr_expect_eq(memcmp(in.t[i].host, again.t[i].host, in.t[i].bytes), 0, "%s", names[i]);
    }
    cr_expect_neq(memcmp(in.t[MOECTS_MG_B].host, other.t[MOECTS_MG_B].host, in.t[MOECTS_MG_B].bytes), 0);
    {
        moects_op_args a;
        void *p[MOECTS_INPUTS_MAX];
        for (int i = 0; i < MOECTS_INPUTS_MAX; i++) p[i] = in.t[i].host;
        moects__inputs_bind(&in, p, NULL, &a);
        cr_expect(a.mg.m_indices == mi && a.mg.masked_m == NULL && a.mg.expert_offsets == NULL && a.mg.gs_a == NULL);
    }
    moects__inputs_free(&in);
    moects__inputs_free(&again);
    moects__inputs_free(&other);
}

/* Masked: max_m = 130 rounded up to 256; masked_m = {1, 0, 130, 1}; rows e*256 + i valid iff
 * i < masked_m[e], A scales of the others NaN. Offsets: {0, 1, 1, 131, 132}, no padding rows. */
Test(inputs, moe_masked_and_offsets_rows)
{
    moects_case c = mg_case("moe/m", 4, MOECTS_MOE_MXFP4, MOECTS_ROWS_MASKED, MOECTS_SCALES_LINEAR, MOECTS_DATA_EXACT);
    moects_inputs in;
    char err[256];
    cr_assert_eq(moects__inputs_build(&c, 1, &in, err, sizeof err), 0, "%s", err);
    cr_expect_eq(in.mg.M, 256);
    cr_expect_eq(in.rows, 4 * 256);
    const int32_t *mm = in.t[MOECTS_MG_MASKED_M].host;
    cr_expect(mm[0] == 1 && mm[1] == 0 && mm[2] == 130 && mm[3] == 1);
    const uint8_t *sa = in.t[MOECTS_MG_SA].host;
    for (int e = 0; e < 4; e++)
        for (int i = 0; i < 256; i++) {
            cr_expect_eq(in.row_valid[e * 256 + i], i < mm[e]);
            if (i >= mm[e]) cr_expect_eq(sa[(e * 256 + i) * 3 + 1], 0xFF);
        }
    moects__inputs_free(&in);
    c = mg_case("moe/o", 4, MOECTS_MOE_W4A16, MOECTS_ROWS_OFFSETS, MOECTS_SCALES_LINEAR, MOECTS_DATA_EXACT);
    cr_assert_eq(moects__inputs_build(&c, 1, &in, err, sizeof err), 0, "%s", err);
    const int64_t *off = in.t[MOECTS_MG_EXPERT_OFFSETS].host;
    cr_expect(off[0] == 0 && off[1] == 1 && off[2] == 1 && off[3] == 131 && off[4] == 132);
    cr_expect_eq(in.rows, 132);
    cr_expect_eq(in.t[MOECTS_MG_A].bytes, 132 * 96 * 2);
    cr_expect_eq(in.t[MOECTS_MG_SA].bytes, 0);
    moects__inputs_free(&in);
}

/* NVFP4: alpha[e] = 1 / (gs_a[e] * gs_b[e]) in FP32, different per expert; swizzled B scales: each
 * expert's block is (40 -> 128 rows) x (6 -> 8 K-blocks) = 1024 bytes, padding 0xFF. NaN data: NaN
 * scales in expert 0 only, its first byte NaN. */
Test(inputs, moe_nvfp4_alpha_swizzle_padding_and_nan_expert)
{
    moects_case c = mg_case("moe/nv", 3, MOECTS_MOE_NVFP4, MOECTS_ROWS_CONTIGUOUS, MOECTS_SCALES_SWIZZLED_128X4,
                            MOECTS_DATA_NAN);
    moects_inputs in;
    char err[256];
    cr_assert_eq(moects__inputs_build(&c, 3, &in, err, sizeof err), 0, "%s", err);
    const float *alpha = in.t[MOECTS_MG_ALPHA].host, *ga = in.t[MOECTS_MG_GS_A].host, *gb = in.t[MOECTS_MG_GS_B].host;
    for (int e = 0; e < 3; e++) {
        float prod = ga[e] * gb[e];
        cr_expect_eq(alpha[e], 1.0f / prod);
    }
    cr_expect(alpha[0] != alpha[1] || alpha[1] != alpha[2]);
    cr_expect_eq(in.t[MOECTS_MG_SB].bytes, 3 * 1024);
    const uint8_t *sb = in.t[MOECTS_MG_SB].host;
    cr_expect_eq(sb[0], 0xFF);
    for (int e = 0; e < 3; e++) {
        cr_expect_eq(sb[e * 1024 + moects__swizzle_offset(40, 0, 6)], 0xFF, "row padding of expert %d", e);
        cr_expect_eq(sb[e * 1024 + moects__swizzle_offset(0, 7, 6)], 0xFF, "K-block padding of expert %d", e);
        if (e == 0) continue;
        for (int n = 0; n < 40; n++)
            for (int kb = 0; kb < 6; kb++) {
                uint8_t x = sb[e * 1024 + moects__swizzle_offset(n, kb, 6)];
                cr_expect(x != 0xFF && x != 0x7F, "expert %d has a NaN scale", e);
            }
    }
    moects__inputs_free(&in);
}

/* Routed counts: with every expert local (ep 1) the counts add up to T * k; zero-expert leaves one
 * local expert at 0; under EP 4 of 16 the rank's 4 experts get what the routing puts on them. */
Test(inputs, moe_counts_from_the_routing)
{
    moects_case c = mg_case("moe/r", 16, MOECTS_MOE_MXFP4, MOECTS_ROWS_OFFSETS, MOECTS_SCALES_LINEAR, MOECTS_DATA_EXACT);
    c.n_counts = 0, c.T = 100, c.k = 4, c.E_global = 16, c.ep_size = 1;
    int64_t cnt[16], sum = 0;
    char err[256];
    cr_assert_eq(moects__moe_counts(&c, 1, cnt, err, sizeof err), 0, "%s", err);
    for (int e = 0; e < 16; e++) sum += cnt[e];
    cr_expect_eq(sum, 400);
    c.routing = MOECTS_ROUTE_ZERO_EXPERT;
    cr_assert_eq(moects__moe_counts(&c, 1, cnt, err, sizeof err), 0, "%s", err);
    int zeros = 0;
    for (int e = 0; e < 16; e++) zeros += cnt[e] == 0;
    cr_expect_geq(zeros, 1);
    c.E = 4, c.ep_size = 4, c.routing = MOECTS_ROUTE_UNIFORM;
    cr_assert_eq(moects__moe_counts(&c, 1, cnt, err, sizeof err), 0, "%s", err);
    c.E = 5;
    cr_expect_eq(moects__moe_counts(&c, 1, cnt, err, sizeof err), -1);
    cr_expect_not_null(strstr(err, "E: 5 local experts"), "%s", err);
}
