/* test_ref_ep_gather.c: moects__ref_ep_gather (ref/ep_gather.c) on hand-worked inputs
 * (DESIGN.md "Numeric recipes", slot-validity rules), then exact_v1 against MPFR and fma_v1 /
 * muladd_v1 against a loop written here from the DESIGN.md text on random inputs. */
#include <criterion/criterion.h>
#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <string.h>

#include "moects_ref.h"
#include "test_mpfr_round.h"

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static float f32_from(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static moects_ep_gather_shape shape(int64_t T, int64_t k, int64_t M, int64_t H, moects_dtype out)
{
    moects_ep_gather_shape s = {T, k, M, H, 0, MOECTS_I32, out, 0};
    return s;
}

/* Two slots, T = 1, H = 1:  slot 0: x = -1 (0xBF80), w = 1;  slot 1: x = 1.25 (0x3FA0),
 * w = 3355649 * 2^-22 (22 bits, exact in FP32).
 *   P = 1.25 * w = 16778245 * 2^-24 = 1 + 2^-14 + 2^-22 + 2^-24  (exact product).
 *   fma_v1:    acc = -1; acc = fmaf(1.25, w, -1) = RN(P - 1) = 2^-14 + 2^-22 + 2^-24 (11 bits:
 *              exact) = 0x3880A000.  bf16: low half 0xA000 > 0x8000 -> 0x3881.
 *   muladd_v1: p = RN(P): in [1,2) the ulp is 2^-23, 2^-24 is half of it: a tie between
 *              1+2^-14+2^-22 (last bit 0, even) and +2^-23 -> p = 1 + 2^-14 + 2^-22;
 *              acc = -1 + p = 2^-14 + 2^-22 = 0x38808000.  bf16: low half 0x8000, a tie,
 *              0x3880 even -> 0x3880.
 *   exact_v1:  -1 + P = 2^-14 + 2^-22 + 2^-24 -> f32 0x3880A000, bf16 0x3881. */
static const uint16_t fma_x[2] = {0xBF80, 0x3FA0};
static const int32_t fma_ids[2] = {3, 5};
static const int32_t fma_rows[2] = {0, 1};

static uint32_t run1(moects_recipe r, moects_dtype out_dtype)
{
    float w[2] = {1.0f, 3355649.0f * 0x1p-22f};
    uint32_t out = 0xDEADBEEF;
    moects_ep_gather_shape s = shape(1, 2, 2, 1, out_dtype);
    moects_ep_gather_args a = {fma_x, fma_ids, w, fma_rows, NULL, &out};
    cr_assert_eq(moects__ref_ep_gather(&s, &a, r), 0);
    return out_dtype == MOECTS_F32 ? out : (out & 0xFFFFu);
}

Test(ref_ep_gather, fma_vs_muladd_hand_worked)
{
    cr_assert_eq(3355649.0f * 0x1p-22f * 4194304.0f, 3355649.0f); /* w exact */
    cr_assert_eq(run1(MOECTS_RECIPE_EPG_FMA_V1, MOECTS_F32), 0x3880A000u);
    cr_assert_eq(run1(MOECTS_RECIPE_EPG_MULADD_V1, MOECTS_F32), 0x38808000u);
    cr_assert_eq(run1(MOECTS_RECIPE_EXACT_V1, MOECTS_F32), 0x3880A000u);
    cr_assert_eq(run1(MOECTS_RECIPE_EPG_FMA_V1, MOECTS_BF16), 0x3881u);
    cr_assert_eq(run1(MOECTS_RECIPE_EPG_MULADD_V1, MOECTS_BF16), 0x3880u);
    cr_assert_eq(run1(MOECTS_RECIPE_EXACT_V1, MOECTS_BF16), 0x3881u);
}

/* exact_v1 rounds once: x = 1, 2^-9 (bf16 0x3B00), 2^-9 with w = 1: fma_v1 gives
 * 1 + 2^-9 + 2^-9 = 1 + 2^-8 in FP32 (exact), then bf16 of 1 + 2^-8 is a tie -> 1.0 (0x3F80);
 * exact_v1 gives the same 1 + 2^-8 -> 0x3F80 too. With a third slot 2^-24 (0x3380): fma_v1 acc
 * = RN(1 + 2^-8 + 2^-24) = 1 + 2^-8 (2^-24 is half an ulp, tie to even: 1+2^-8 has last bit 0)
 * -> bf16 tie -> 0x3F80; exact_v1: 1 + 2^-8 + 2^-24 is above the bf16 midpoint -> 0x3F81. */
Test(ref_ep_gather, exact_rounds_once)
{
    uint16_t x[4] = {0x3F80, 0x3B00, 0x3B00, 0x3380};
    int32_t ids[4] = {0, 1, 2, 3}, rows[4] = {0, 1, 2, 3};
    float w[4] = {1, 1, 1, 1};
    uint16_t out;
    moects_ep_gather_shape s = shape(1, 4, 4, 1, MOECTS_BF16);
    moects_ep_gather_args a = {x, ids, w, rows, NULL, &out};
    cr_assert_eq(moects__ref_ep_gather(&s, &a, MOECTS_RECIPE_EPG_FMA_V1), 0);
    cr_assert_eq(out, 0x3F80);
    cr_assert_eq(moects__ref_ep_gather(&s, &a, MOECTS_RECIPE_EXACT_V1), 0);
    cr_assert_eq(out, 0x3F81);
    s.k = 3; /* without the 2^-24 slot: a true tie, even -> 0x3F80 both */
    cr_assert_eq(moects__ref_ep_gather(&s, &a, MOECTS_RECIPE_EXACT_V1), 0);
    cr_assert_eq(out, 0x3F80);
}

/* Token 0: all slots invalid (-1) with NaN weights and out-of-range rows (never read) -> +0.
 * Token 1: slot 0 id -1 (skipped), slot 1 valid: x row 2 * 0.5. */
Test(ref_ep_gather, no_valid_slot_and_neg1)
{
    uint16_t x[3 * 2] = {0x4000, 0x4000, 0x4040, 0x4040, 0x4080, 0xC080}; /* rows: 2 2 | 3 3 | 4 -4 */
    int32_t ids[4] = {-1, -1, -1, 7};
    int32_t rows[4] = {99999, -5, 1, 2};
    float nan = NAN;
    float w[4] = {nan, nan, nan, 0.5f};
    uint16_t out[4];
    moects_ep_gather_shape s = shape(2, 2, 3, 2, MOECTS_BF16);
    moects_ep_gather_args a = {x, ids, w, rows, NULL, out};
    for (int r = 0; r < 3; r++) {
        memset(out, 0xFF, sizeof out);
        cr_assert_eq(moects__ref_ep_gather(&s, &a, (moects_recipe)r), 0);
        cr_assert_eq(out[0], 0x0000); /* +0, not -0 */
        cr_assert_eq(out[1], 0x0000);
        cr_assert_eq(out[2], 0x4000); /* 4 * 0.5 = 2 */
        cr_assert_eq(out[3], 0xC000); /* -2 */
    }
}

/* Map E_global = 4: {0, -1, 1, -1}. Slots of the single token (H = 1):
 *   id 2 -> map 1 -> valid (row 0, x = 1, w = 1)
 *   id 1 -> map -1 -> invalid;  id 4 (= E_global) -> invalid;  id 1000000000 (stale, huge) ->
 *   invalid without reading the map;  id -1, id -7 -> invalid;  id 0 -> valid (row 1, x = 2, w = 4)
 * Invalid slots carry NaN weights and garbage rows. Want 1 + 8 = 9 (0x4110). Without the map
 * (ignore it) ids 1, 4, 10^9 would be valid too. */
Test(ref_ep_gather, expert_map_rules)
{
    uint16_t x[2] = {0x3F80, 0x4000};
    int32_t map[4] = {0, -1, 1, -1};
    int32_t ids[7] = {2, 1, 4, 1000000000, -1, -7, 0};
    int32_t rows[7] = {0, -3, 77, 1 << 30, 5, -1, 1};
    float nan = NAN;
    float w[7] = {1, nan, nan, nan, nan, nan, 4};
    uint16_t out = 0xFFFF;
    moects_ep_gather_shape s = shape(1, 7, 2, 1, MOECTS_BF16);
    s.has_expert_map = 1;
    s.E_global = 4;
    moects_ep_gather_args a = {x, ids, w, rows, map, &out};
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(moects__ref_ep_gather(&s, &a, (moects_recipe)r), 0);
        cr_assert_eq(out, 0x4110, "recipe %d: 0x%04x", r, out);
    }
    /* Without the map, slot 1 (row -3) is valid and out of range: an error. */
    s.has_expert_map = 0;
    cr_assert_eq(moects__ref_ep_gather(&s, &a, MOECTS_RECIPE_EPG_FMA_V1), -1);
}

/* int64 ids: 2^32 + 2 is a huge stale id with a map (its low 32 bits, 2, would be a valid
 * expert); -2^40 is negative; without a map 2^33 is valid. Output FP32. */
Test(ref_ep_gather, int64_ids)
{
    uint16_t x[2] = {0x3F80, 0x4000}; /* 1, 2 */
    int32_t map[4] = {0, -1, 1, -1};
    int64_t ids[3] = {(1ll << 32) + 2, -(1ll << 40), 0};
    int32_t rows[3] = {0, 0, 1};
    float w[3] = {1.0f, 1.0f, 0.75f};
    float out = -1.0f;
    moects_ep_gather_shape s = shape(1, 3, 2, 1, MOECTS_F32);
    s.id_dtype = MOECTS_I64;
    s.has_expert_map = 1;
    s.E_global = 4;
    moects_ep_gather_args a = {x, ids, w, rows, map, &out};
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(moects__ref_ep_gather(&s, &a, (moects_recipe)r), 0);
        cr_assert_eq(out, 1.5f); /* only slot 2: 2 * 0.75 */
    }
    s.has_expert_map = 0; /* slot 0 (2^32+2 >= 0) valid now: 1 + 1.5 */
    cr_assert_eq(moects__ref_ep_gather(&s, &a, MOECTS_RECIPE_EPG_FMA_V1), 0);
    cr_assert_eq(out, 2.5f);
}

Test(ref_ep_gather, zero_tokens_and_errors)
{
    moects_ep_gather_shape s = shape(0, 8, 0, 7168, MOECTS_BF16);
    moects_ep_gather_args a = {0};
    cr_assert_eq(moects__ref_ep_gather(&s, &a, MOECTS_RECIPE_EPG_FMA_V1), 0); /* T = 0: nothing */
    cr_assert_eq(moects__ref_ep_gather(&s, &a, MOECTS_RECIPE_EXACT_V1), 0);
    s.T = -1;
    cr_assert_eq(moects__ref_ep_gather(&s, &a, MOECTS_RECIPE_EPG_FMA_V1), -1);
    s.T = 0;
    s.id_dtype = MOECTS_F32;
    cr_assert_eq(moects__ref_ep_gather(&s, &a, MOECTS_RECIPE_EPG_FMA_V1), -1);
    s.id_dtype = MOECTS_I32;
    s.out_dtype = MOECTS_I32;
    cr_assert_eq(moects__ref_ep_gather(&s, &a, MOECTS_RECIPE_EPG_FMA_V1), -1);
    s.out_dtype = MOECTS_BF16;
    cr_assert_eq(moects__ref_ep_gather(&s, &a, MOECTS_RECIPE_FP4_BLOCKWISE_V1), -1);
    cr_assert_eq(moects__ref_ep_gather(NULL, &a, MOECTS_RECIPE_EPG_FMA_V1), -1);

    /* A valid slot's row outside [0, M_sum): -1 (both ends), and nothing written. */
    uint16_t x[2] = {0x3F80, 0x3F80};
    int32_t ids[1] = {0}, rows[1] = {2};
    float w[1] = {1};
    uint16_t out = 0xABCD;
    moects_ep_gather_shape s2 = shape(1, 1, 2, 1, MOECTS_BF16);
    moects_ep_gather_args a2 = {x, ids, w, rows, NULL, &out};
    cr_assert_eq(moects__ref_ep_gather(&s2, &a2, MOECTS_RECIPE_EPG_FMA_V1), -1);
    rows[0] = -1;
    cr_assert_eq(moects__ref_ep_gather(&s2, &a2, MOECTS_RECIPE_EXACT_V1), -1);
    cr_assert_eq(out, 0xABCD);
    rows[0] = 1;
    cr_assert_eq(moects__ref_ep_gather(&s2, &a2, MOECTS_RECIPE_EPG_FMA_V1), 0);
    cr_assert_eq(out, 0x3F80);
    /* k = 0: every token gets +0 */
    s2.k = 0;
    out = 0xFFFF;
    cr_assert_eq(moects__ref_ep_gather(&s2, &a2, MOECTS_RECIPE_EPG_MULADD_V1), 0);
    cr_assert_eq(out, 0x0000);
}

/* Inf and NaN propagate as IEEE says: Inf * 2 = Inf; Inf * 0 = NaN; Inf + -Inf = NaN. */
Test(ref_ep_gather, inf_nan)
{
    uint16_t x[2] = {0x7F80, 0xFF80}; /* +Inf, -Inf */
    int32_t ids[2] = {0, 1}, rows[2] = {0, 1};
    float w[2] = {2.0f, 0.0f};
    uint16_t out;
    moects_ep_gather_shape s = shape(1, 1, 2, 1, MOECTS_BF16);
    moects_ep_gather_args a = {x, ids, w, rows, NULL, &out};
    for (int r = 0; r < 3; r++) {
        s.k = 1;
        cr_assert_eq(moects__ref_ep_gather(&s, &a, (moects_recipe)r), 0);
        cr_assert_eq(out, 0x7F80);
        s.k = 2; /* Inf*2 + -Inf*0 = Inf + NaN */
        cr_assert_eq(moects__ref_ep_gather(&s, &a, (moects_recipe)r), 0);
        cr_assert((out & 0x7F80) == 0x7F80 && (out & 0x7F), "recipe %d: 0x%04x", r, out);
    }
    w[1] = 1.0f; /* Inf + -Inf = NaN */
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(moects__ref_ep_gather(&s, &a, (moects_recipe)r), 0);
        cr_assert((out & 0x7F80) == 0x7F80 && (out & 0x7F), "recipe %d: 0x%04x", r, out);
    }
}

/* Random: exact_v1 against MPFR (exact sum at 128 bits of bf16*fp32 products, then one RNE
 * rounding to binary32 / bf16); fma_v1 and muladd_v1 against the DESIGN.md loop written here. */
static uint64_t z = 99;
static uint64_t rnd(void)
{
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    return z >> 17;
}

Test(ref_ep_gather, random_against_mpfr_and_loop)
{
    enum { T = 37, K = 6, M = 50, H = 29, E = 12 };
    static uint16_t x[M * H];
    static int32_t ids[T * K], rows[T * K], map[E];
    static float w[T * K];
    static uint16_t ob[T * H];
    static float of[T * H];
    for (int iter = 0; iter < 40; iter++) {
        for (int i = 0; i < M * H; i++) /* bf16 in a moderate range, both signs, many ties */
            x[i] = (uint16_t)((rnd() & 0x8000) | (0x3800 + rnd() % 0x1000));
        for (int i = 0; i < E; i++) map[i] = (rnd() % 3) ? (int32_t)(rnd() % 8) : -1;
        for (int i = 0; i < T * K; i++) {
            ids[i] = (rnd() % 5) ? (int32_t)(rnd() % (E + 3)) - 1 : -(int32_t)(rnd() % 100) - 1;
            rows[i] = (int32_t)(rnd() % M);
            w[i] = f32_from((uint32_t)(0x3C000000u + rnd() % 0x3000000u)); /* ~2^-7 .. 2^-1 */
        }
        moects_ep_gather_shape s = shape(T, K, M, H, MOECTS_BF16);
        s.has_expert_map = iter & 1;
        s.E_global = E;
        moects_ep_gather_args a = {x, ids, w, rows, s.has_expert_map ? map : NULL, ob};
        mpfr_t acc;
        mpfr_init2(acc, 128);
        for (int r = 0; r < 3; r++)
            for (int od = 0; od < 2; od++) {
                s.out_dtype = od ? MOECTS_F32 : MOECTS_BF16;
                a.out = od ? (void *)of : (void *)ob;
                cr_assert_eq(moects__ref_ep_gather(&s, &a, (moects_recipe)r), 0);
                for (int t = 0; t < T; t++)
                    for (int d = 0; d < H; d++) {
                        float accf = 0.0f;
                        mpfr_set_zero(acc, 1);
                        for (int j = 0; j < K; j++) {
                            int32_t id = ids[t * K + j];
                            int valid = s.has_expert_map ? (id >= 0 && id < E && map[id] >= 0) : id >= 0;
                            if (!valid) continue;
                            float xv = moects__bf16_to_f32(x[rows[t * K + j] * H + d]), wv = w[t * K + j];
                            if (r == MOECTS_RECIPE_EPG_FMA_V1) accf = fmaf(xv, wv, accf);
                            else if (r == MOECTS_RECIPE_EPG_MULADD_V1) accf = accf + xv * wv;
                            mpfr_t p;
                            mpfr_init2(p, 64);
                            mpfr_set_flt(p, xv, MPFR_RNDN);
                            mpfr_mul_d(p, p, (double)wv, MPFR_RNDN);
                            cr_assert_eq(mpfr_add(acc, acc, p, MPFR_RNDN), 0);
                            mpfr_clear(p);
                        }
                        uint32_t want;
                        if (r == MOECTS_RECIPE_EXACT_V1) {
                            float f = mpfr_zero_p(acc) ? 0.0f : ref_round(acc, od ? 24 : 8, od ? -148 : -132);
                            want = f32_bits(f);
                        } else {
                            want = f32_bits(accf);
                        }
                        if (!od) want = moects__bf16_from_f32(f32_from(want));
                        uint32_t got = od ? f32_bits(of[t * H + d]) : ob[t * H + d];
                        cr_assert_eq(got, want, "iter %d recipe %d out %s t %d d %d: got 0x%x want 0x%x",
                                     iter, r, od ? "f32" : "bf16", t, d, got, want);
                    }
            }
        mpfr_clear(acc);
    }
}
