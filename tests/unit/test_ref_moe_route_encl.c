/* test_ref_moe_route_encl.c: the router's enclosure for a bounded claim (moects__route_encl_weights,
 * moects__route_encl_check through moects__route_check_row, ref/moe_route_encl.c). Expected values are
 * independent of the code under test: FP32 weights of random admissible implementations (exp the
 * MPFR-rounded value moved up to fn_ulp floats, sums in random orders), the real-number weight of each method computed with MPFR at
 * 160 bits from its formula (softmax's max subtraction cancels: p_j = e^x_j / sum e^x; renormalized
 * sets: e^x_j / sum over the set; sigmoid 1 / (1 + e^-x), the + 1e-20 of the renormalization kept),
 * and a near tie worked out by hand: logits 1 and 1 + 2^-23 give softmax scores one exp ulp apart
 * (e^-2^-23 = 1 - 2^-23 + 2^-47 - ..., correctly rounded 1 - 2^-23: two floats below e^0 = 1),
 * so under fn=ulp2 either id is a top-1 and under the exact recipe only the higher logit's. */
#include <criterion/criterion.h>
#include <math.h>
#include <mpfr.h>
#include <string.h>

#include "moects_route.h"

#define PREC 160

static moects_moe_route_shape shape(int64_t E, int64_t k, moects_route_method m)
{
    return (moects_moe_route_shape){.T = 1, .E = E, .k = k, .method = m, .n_group = 1, .topk_group = 1,
                                    .renormalize = 0, .scale = 1.0f, .has_bias = 0, .logits_dtype = MOECTS_F32};
}

/* v = e^x, or the sigmoid 1 / (1 + e^-x). */
static void mp_fn(mpfr_t v, float x, int sig)
{
    mpfr_set_flt(v, sig ? -x : x, MPFR_RNDN);
    mpfr_exp(v, v, MPFR_RNDN);
    if (!sig) return;
    mpfr_add_ui(v, v, 1, MPFR_RNDN);
    mpfr_ui_div(v, 1, v, MPFR_RNDN);
}

/* The real weight of slot j of the set ids [k] of row x [E] into w. */
static void real_weight(mpfr_t w, const moects_moe_route_shape *s, const float *x, const int32_t *ids, int64_t j)
{
    const int sig = s->method == MOECTS_ROUTE_SIGMOID || s->method == MOECTS_ROUTE_LLAMA4;
    const int over_set = s->method == MOECTS_ROUTE_TOPK_SOFTMAX || (s->renormalize && s->method != MOECTS_ROUTE_LLAMA4);
    mpfr_t d, t;
    mpfr_inits2(PREC, d, t, (mpfr_ptr)0);
    mp_fn(w, x[ids[j]], sig);
    mpfr_set_ui(d, 0, MPFR_RNDN);
    for (int64_t i = 0; i < (over_set ? s->k : s->E); i++) mp_fn(t, x[over_set ? ids[i] : i], sig), mpfr_add(d, d, t, MPFR_RNDN);
    if (s->method == MOECTS_ROUTE_SIGMOID && s->renormalize) mpfr_add_d(d, d, (double)1e-20f, MPFR_RNDN);
    if (s->method == MOECTS_ROUTE_SOFTMAX || over_set) mpfr_div(w, w, d, MPFR_RNDN);
    if (s->method == MOECTS_ROUTE_SOFTMAX || s->method == MOECTS_ROUTE_SIGMOID) mpfr_mul_d(w, w, s->scale, MPFR_RNDN);
    mpfr_clears(d, t, (mpfr_ptr)0);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float uniform(float lo, float hi)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)((double)(rng >> 40) * 0x1p-24);
}

/* An admissible exp: the correctly rounded value (MPFR) moved a random number of floats in [-ulp, ulp]. */
static float any_exp(float v, int ulp)
{
    mpfr_t t;
    mpfr_init2(t, 24);
    mpfr_set_emin(-148), mpfr_set_emax(128);
    mpfr_set_flt(t, v, MPFR_RNDN);
    const int inex = mpfr_exp(t, t, MPFR_RNDN);
    mpfr_subnormalize(t, mpfr_check_range(t, inex, MPFR_RNDN), MPFR_RNDN);
    float f = mpfr_get_flt(t, MPFR_RNDN);
    mpfr_set_emin(mpfr_get_emin_min()), mpfr_set_emax(mpfr_get_emax_max());
    mpfr_clear(t);
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    for (int n = (int)(rng >> 33) % (2 * ulp + 1) - ulp; n; n += n > 0 ? -1 : 1)
        f = nextafterf(f, n > 0 ? INFINITY : 0.0f);
    return f;
}

/* The FP32 sum of v [n] in a random order (a random rotation, every other pass reversed). */
static float any_sum(const float *v, int64_t n)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    const int64_t r = (int64_t)(rng >> 33) % n, rev = (int64_t)(rng >> 20) & 1;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += v[(rev ? n - 1 - i : i + r) % n];
    return sum;
}

/* Slot j's weight as one admissible FP32 implementation computes it for the set ids [k]: the
 * recipe's operations (ref/moects_route.h), exp within ulp floats, the sums in a random order. */
static float fp32_weight(const moects_moe_route_shape *s, const float *x, const int32_t *ids, int64_t j, int ulp)
{
    float e[256], w[32], m = x[0];
    const int tk = s->method == MOECTS_ROUTE_TOPK_SOFTMAX, sig = s->method != MOECTS_ROUTE_SOFTMAX && !tk;
    for (int64_t i = 1; i < s->E; i++) m = x[i] > m ? x[i] : m;
    if (tk) for (int64_t i = 0; i < s->k; i++) m = i == 0 || x[ids[i]] > m ? x[ids[i]] : m;
    for (int64_t i = 0; i < s->E && !tk; i++) e[i] = sig ? 1.0f / (1.0f + any_exp(-x[i], ulp)) : any_exp(x[i] - m, ulp);
    const float S = sig || tk ? 1.0f : any_sum(e, s->E);
    for (int64_t i = 0; i < s->k; i++) w[i] = tk ? any_exp(x[ids[i]] - m, ulp) : sig ? e[ids[i]] : e[ids[i]] / S;
    if (s->method == MOECTS_ROUTE_LLAMA4) return w[0];
    float r = w[j];
    if (tk || s->renormalize) r = r / (any_sum(w, s->k) + (s->method == MOECTS_ROUTE_SIGMOID ? 1e-20f : 0.0f));
    return tk ? r : r * s->scale;
}

/* n random rows of shape s under fn=ulpN (N = 1 << (fn - 1)), sums in any order: the enclosure of the
 * reference's set holds the reference's weight, a random admissible FP32 implementation's, and, within
 * the 3 roundings every FP32 implementation shares at the end (sigmoid's 1 + e and 1 / d, the
 * renormalizing division, the scale), the real weight. */
static void random_rows(moects_moe_route_shape s, int fn, int n)
{
    const moects_route_recipe r = {.fn = fn, .sum_any = 1};
    float x[256], b[256], w[32], lo[32], hi[32];
    int32_t ids[32];
    mpfr_t rw;
    mpfr_init2(rw, PREC);
    for (int row = 0; row < n; row++) {
        for (int64_t e = 0; e < s.E; e++) x[e] = uniform(-4.0f, 4.0f), b[e] = uniform(-0.25f, 0.25f);
        moects_moe_route_args a = {.logits = x, .bias = s.has_bias ? b : NULL, .topk_ids = ids, .topk_weights = w};
        cr_assert_eq(moects__ref_moe_route(&s, &a), 0);
        cr_assert_eq(moects__route_encl_weights(&s, &a, &r, 0, ids, lo, hi), 0);
        for (int64_t j = 0; j < s.k; j++) {
            real_weight(rw, &s, x, ids, j);
            cr_assert(lo[j] <= w[j] && w[j] <= hi[j], "method %d row %d slot %lld: ref %a not in [%a, %a]", s.method, row,
                      (long long)j, (double)w[j], (double)lo[j], (double)hi[j]);
            const float rl = nextafterf(nextafterf(nextafterf(lo[j], 0.0f), 0.0f), 0.0f),
                        rh = nextafterf(nextafterf(nextafterf(hi[j], INFINITY), INFINITY), INFINITY);
            cr_assert(mpfr_cmp_d(rw, rl) >= 0 && mpfr_cmp_d(rw, rh) <= 0, "method %d row %d slot %lld: real %a "
                      "not in [%a, %a]", s.method, row, (long long)j, mpfr_get_d(rw, MPFR_RNDN), (double)lo[j], (double)hi[j]);
            const float fw = fp32_weight(&s, x, ids, j, fn ? 1 << (fn - 1) : 0);
            cr_assert(lo[j] <= fw && fw <= hi[j], "method %d row %d slot %lld: an admissible FP32 weight %a not in "
                      "[%a, %a]", s.method, row, (long long)j, (double)fw, (double)lo[j], (double)hi[j]);
            cr_assert(hi[j] - lo[j] < 0x1p-10f * w[j], "enclosure too wide: [%a, %a]", (double)lo[j], (double)hi[j]);
        }
        int slot;
        cr_assert_eq(moects__route_check_row(&s, &a, &r, 0, ids, w, &slot), MOECTS_ROUTE_ROW_SAME);
    }
    mpfr_clear(rw);
}

Test(ref_moe_route_encl, softmax_holds_the_real_weight)
{
    moects_moe_route_shape s = shape(64, 6, MOECTS_ROUTE_SOFTMAX);
    s.renormalize = 1;
    random_rows(s, 1, 40);
    random_rows(s, 3, 40);
    s = shape(128, 8, MOECTS_ROUTE_SOFTMAX);
    s.has_bias = 1, s.scale = 2.5f;
    random_rows(s, 2, 40);
}

Test(ref_moe_route_encl, sigmoid_grouped_holds_the_real_weight)
{
    moects_moe_route_shape s = shape(256, 8, MOECTS_ROUTE_SIGMOID);
    s.n_group = 8, s.topk_group = 4, s.has_bias = 1, s.renormalize = 1, s.scale = 2.5f;
    random_rows(s, 2, 40);
    s.renormalize = 0, s.n_group = 1, s.topk_group = 1;
    random_rows(s, 4, 40);
}

Test(ref_moe_route_encl, topk_softmax_and_llama4_hold_the_real_weight)
{
    random_rows(shape(32, 4, MOECTS_ROUTE_TOPK_SOFTMAX), 2, 40);
    random_rows(shape(16, 1, MOECTS_ROUTE_LLAMA4), 2, 40);
}

/* Logits {1, 1 + 2^-23, 0, -1}, top-1 softmax: the reference picks id 1 (the higher logit); its
 * neighbour's score is one exp rounding away. Under fn=ulp2 id 0 is a tie within the enclosure
 * (weight: its real p_0 rounded to FP32, inside), id 2 is not a top-1 of any admissible scores, and
 * p_0 rounded to BF16 lies outside: p_0 = e / (e + e^(1 + 2^-23) + 1 + e^-1) = 0x1.9912eecf...p-2
 * (double arithmetic by hand: 0.39949...), BF16 0x1.9ap-2. Under the exact recipe id 0 is
 * refused. */
Test(ref_moe_route_encl, near_tie_row)
{
    const float x[4] = {1.0f, 1.0f + 0x1p-23f, 0.0f, -1.0f};
    const moects_moe_route_shape s = shape(4, 1, MOECTS_ROUTE_SOFTMAX);
    const moects_route_recipe ulp2 = {.fn = 2}, exact = {0};
    moects_moe_route_args a = {.logits = x};
    mpfr_t rw;
    mpfr_init2(rw, PREC);
    real_weight(rw, &s, x, (int32_t[]){0}, 0);
    const float p0 = mpfr_get_flt(rw, MPFR_RNDN), p0_bf16 = 0x1.9ap-2f;
    mpfr_clear(rw);
    cr_assert_eq(p0, 0x1.9912eep-2f, "p0 %a", (double)p0);
    int slot;
    cr_assert_eq(moects__route_check_row(&s, &a, &ulp2, 0, (int32_t[]){0}, &p0, &slot), MOECTS_ROUTE_ROW_TIE);
    cr_assert_eq(moects__route_check_row(&s, &a, &ulp2, 0, (int32_t[]){2}, &p0, &slot), MOECTS_ROUTE_ROW_IDS);
    cr_assert_eq(moects__route_check_row(&s, &a, &ulp2, 0, (int32_t[]){0}, &p0_bf16, &slot), MOECTS_ROUTE_ROW_WEIGHT);
    cr_assert_eq(slot, 0);
    cr_assert_eq(moects__route_check_row(&s, &a, &exact, 0, (int32_t[]){0}, &p0, &slot), MOECTS_ROUTE_ROW_IDS);
}

/* Sorted slots under fn=ulp2: {1, 0} (tied within the enclosure) may come in either order, a far
 * lower score not before a higher one. Top-2 of {1, 1 + 2^-23, -3, -1}, renormalized: the two weights
 * are about 1/2 each. */
Test(ref_moe_route_encl, near_tie_slot_order)
{
    const float x[4] = {1.0f, 1.0f + 0x1p-23f, -3.0f, -1.0f};
    moects_moe_route_shape s = shape(4, 2, MOECTS_ROUTE_SOFTMAX);
    s.renormalize = 1;
    const moects_route_recipe ulp2 = {.fn = 2};
    moects_moe_route_args a = {.logits = x};
    const float w[2] = {0.5f, 0.5f};
    int slot;
    cr_assert_eq(moects__route_check_row(&s, &a, &ulp2, 0, (int32_t[]){1, 0}, w, &slot), MOECTS_ROUTE_ROW_SAME);
    cr_assert_eq(moects__route_check_row(&s, &a, &ulp2, 0, (int32_t[]){0, 1}, w, &slot), MOECTS_ROUTE_ROW_SAME);
    s.k = 3;
    const float w3[3] = {0.45f, 0.45f, 0.1f};
    cr_assert_eq(moects__route_check_row(&s, &a, &ulp2, 0, (int32_t[]){3, 0, 1}, w3, &slot), MOECTS_ROUTE_ROW_ORDER);
    cr_assert_eq(slot, 1);
}

Test(ref_moe_route_encl, recipe_keys)
{
    moects_route_recipe r;
    char err[200];
    cr_assert_eq(moects__route_recipe_parse("moe_route.v1(fn=ulp4,sum=any,ties=any)", &r, err, sizeof err), 0);
    cr_assert(r.fn == 3 && r.sum_any && r.ties_any && !r.slots_any && moects__route_fn_ulp(&r) == 4);
    cr_assert(moects__route_bounded(&r));
    cr_assert_eq(moects__route_recipe_value(&r), MOECTS_RECIPE_ROUTE_BASE + 1);
    cr_assert_eq(moects__route_recipe_parse("moe_route.v1(fn=ulp3)", &r, err, sizeof err), -1);
    cr_assert_eq(moects__route_recipe_parse("moe_route.v1(slots=sorted)", &r, err, sizeof err), 0);
    cr_assert(!moects__route_bounded(&r));
}
