/* test_gpu_ep_gather_kernels.c: the CPU ep_gather kernels under test (gpu/cpu/ep_gather*.c),
 * found through the registry: the honest ones agree with the reference (bit for bit under their
 * recipe, or exactly on exactness-preserving inputs for the tolerance kernel); each mutant agrees
 * on inputs that hide its bug and differs on an input built to expose it. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../gpu/cpu/ep_gather_internal.h"
#include "moects_ref.h"
#include "moects_registry.h"

static const moects_kernel *find(const char *name)
{
    size_t n;
    const moects_kernel *const *all = moects__builtin_kernels(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(all[i]->name, name) == 0) return all[i];
    cr_assert_fail("kernel %s not registered", name);
    return NULL;
}

static const char *const ALL[] = {"cpu.ep_gather",
                                  "cpu.ep_gather.saxpy",
                                  "cpu.mutant.ep_gather.block_min1024",
                                  "cpu.mutant.ep_gather.muladd",
                                  "cpu.mutant.ep_gather.neg1_only",
                                  "cpu.mutant.ep_gather.ignore_map",
                                  "cpu.mutant.ep_gather.int32_offset"};
#define NALL (sizeof ALL / sizeof ALL[0])

Test(ep_gather_kernels, registered_with_abi_and_recipe)
{
    for (size_t i = 0; i < NALL; i++) {
        const moects_kernel *k = find(ALL[i]);
        cr_assert_eq(k->abi_version, MOECTS_KERNEL_ABI_VERSION);
        cr_assert_eq(k->op, MOECTS_OP_EP_GATHER);
        cr_assert_eq(k->device, MOECTS_DEVICE_CPU);
        int mutant = strncmp(ALL[i], "cpu.mutant.", 11) == 0;
        cr_assert_eq(k->bug != NULL, mutant, "%s: bug string", ALL[i]);
        if (strcmp(ALL[i], "cpu.ep_gather.saxpy") == 0) {
            cr_assert_null(k->recipe);
            cr_assert(k->tol.max_calc_diff > 0 && k->tol.max_calc_diff <= 1e-4);
        } else {
            cr_assert_str_eq(k->recipe, "ep_gather.fma_v1", "%s", ALL[i]);
        }
        /* every shape is taken: the bugs must show as failures, never as refusals */
        moects_ep_gather_shape s = {0, 8, 0, 3584, 384, MOECTS_I64, MOECTS_BF16, 1};
        char why[64] = "";
        cr_assert_eq(k->supports(&s, why, sizeof why), 1, "%s", ALL[i]);
        s.T = 4096;
        s.H = 7;
        cr_assert_eq(k->supports(&s, why, sizeof why), 1, "%s", ALL[i]);
    }
}

/* ---- a small problem, its buffers, and the runs ---- */
typedef struct {
    moects_ep_gather_shape s;
    uint16_t *x;
    void *ids;
    float *w;
    int32_t *rows;
    int32_t *map;
} prob;

static prob make(int64_t T, int64_t k, int64_t M, int64_t H, int64_t E, moects_dtype id, moects_dtype out,
                 int has_map)
{
    prob p = {{T, k, M, H, E, id, out, has_map}, NULL, NULL, NULL, NULL, NULL};
    p.x = calloc((size_t)(M * H + 1), sizeof *p.x);
    p.ids = calloc((size_t)(T * k + 1), 8);
    p.w = calloc((size_t)(T * k + 1), sizeof *p.w);
    p.rows = calloc((size_t)(T * k + 1), sizeof *p.rows);
    p.map = calloc((size_t)(E + 2), sizeof *p.map); /* one spare entry past E_global: see neg1_only */
    return p;
}
static void set_id(prob *p, int64_t i, int64_t v)
{
    if (p->s.id_dtype == MOECTS_I64) ((int64_t *)p->ids)[i] = v;
    else ((int32_t *)p->ids)[i] = (int32_t)v;
}
static void drop(prob *p)
{
    free(p->x);
    free(p->ids);
    free(p->w);
    free(p->rows);
    free(p->map);
}
static size_t out_bytes(const prob *p) { return (size_t)(p->s.T * p->s.H) * (p->s.out_dtype == MOECTS_F32 ? 4 : 2); }
static void *run_kernel(const char *name, prob *p)
{
    void *out = malloc(out_bytes(p) + 4);
    memset(out, 0xA5, out_bytes(p) + 4);
    moects_ep_gather_args a = {p->x, p->ids, p->w, p->rows, p->s.has_expert_map ? p->map : NULL, out};
    cr_assert_eq(find(name)->run(&p->s, &a, NULL), 0, "%s failed", name);
    return out;
}
static void *run_ref(prob *p, moects_recipe r)
{
    void *out = malloc(out_bytes(p) + 4);
    moects_ep_gather_args a = {p->x, p->ids, p->w, p->rows, p->s.has_expert_map ? p->map : NULL, out};
    cr_assert_eq(moects__ref_ep_gather(&p->s, &a, r), 0);
    return out;
}
static int same(const prob *p, const void *a, const void *b) { return memcmp(a, b, out_bytes(p)) == 0; }

static uint64_t rs = 7;
static uint64_t rnd(void)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return rs >> 17;
}

/* Random routing with -1 slots, stale and out-of-map ids; values either exactness-preserving
 * (4-bit bf16 significands, weights k/64: FP32 sums exact) or full-precision. */
static void fill(prob *p, int exact_values)
{
    int64_t TK = p->s.T * p->s.k, E = p->s.E_global;
    for (int64_t i = 0; i < p->s.M_sum * p->s.H; i++)
        p->x[i] = exact_values ? (uint16_t)((rnd() & 0x8000) | ((124 + rnd() % 7) << 7) | ((rnd() & 7) << 4))
                               : (uint16_t)((rnd() & 0x8000) | (0x3800 + rnd() % 0x1000));
    for (int64_t e = 0; e < E; e++) p->map[e] = (rnd() % 3) ? (int32_t)e : -1;
    for (int64_t i = 0; i < TK; i++) {
        int64_t id = (int64_t)(rnd() % (uint64_t)E);
        switch (rnd() % 8) {
        case 0: id = -1; break;
        case 1: id = E + (int64_t)(rnd() % 1000) * 1000003; break; /* stale: beyond E_global */
        default: break;
        }
        set_id(p, i, id);
        p->rows[i] = (int32_t)(rnd() % (uint64_t)p->s.M_sum);
        p->w[i] = exact_values ? (float)(1 + rnd() % 64) / 64.0f
                               : (float)((rnd() % 0xFFFFFF) + 1) * 0x1p-25f;
    }
}

/* Hand-worked fma vs mul-add input (T = 1, k = 2, H = 1): slot 0: x = -1, w = 1; slot 1:
 * x = 1.25, w = 3355649 * 2^-22. P = 1.25 w = 1 + 2^-14 + 2^-22 + 2^-24 exactly.
 * fma: RN(P - 1) = 2^-14 + 2^-22 + 2^-24 = 0x3880A000 (exact, 11 bits).
 * mul-add: RN(P) = 1 + 2^-14 + 2^-22 (2^-24 is half an ulp of [1,2): tie to the even last bit),
 * then -1 + that = 2^-14 + 2^-22 = 0x38808000. */
static prob fma_case(moects_dtype out)
{
    prob p = make(1, 2, 2, 1, 4, MOECTS_I32, out, 0);
    p.x[0] = 0xBF80;
    p.x[1] = 0x3FA0;
    set_id(&p, 0, 0);
    set_id(&p, 1, 1);
    p.rows[0] = 0;
    p.rows[1] = 1;
    p.w[0] = 1.0f;
    p.w[1] = 3355649.0f * 0x1p-22f;
    return p;
}

Test(ep_gather_kernels, honest_equals_fma_reference_hand_worked)
{
    prob p = fma_case(MOECTS_F32);
    uint32_t *got = run_kernel("cpu.ep_gather", &p);
    cr_assert_eq(got[0], 0x3880A000u, "0x%08x", got[0]);
    free(got);
    drop(&p);
    p = fma_case(MOECTS_BF16);
    uint16_t *gb = run_kernel("cpu.ep_gather", &p);
    cr_assert_eq(gb[0], 0x3881); /* 0x3880A000: low half above 0x8000 -> round up */
    free(gb);
    drop(&p);
}

Test(ep_gather_kernels, honest_equals_reference_random)
{
    static const int64_t Hs[] = {1, 7, 384, 1000, 1024, 2880, 3584};
    for (int c = 0; c < 16; c++) {
        int64_t H = Hs[c % 7];
        prob p = make(1 + c % 5 * 3, 1 + c % 8, 9, H, 16, c & 1 ? MOECTS_I64 : MOECTS_I32,
                      c & 2 ? MOECTS_F32 : MOECTS_BF16, (c >> 2) & 1);
        fill(&p, 0);
        void *want = run_ref(&p, MOECTS_RECIPE_EPG_FMA_V1);
        void *got = run_kernel("cpu.ep_gather", &p);
        cr_assert(same(&p, got, want), "case %d: cpu.ep_gather differs from ep_gather.fma_v1", c);
        free(got);
        /* the mutants whose bug this input cannot reach agree bit for bit too */
        if (H % (H < 1024 ? H : 1024) == 0) {
            got = run_kernel("cpu.mutant.ep_gather.block_min1024", &p);
            cr_assert(same(&p, got, want), "case %d: block_min1024", c);
            free(got);
        }
        got = run_kernel("cpu.mutant.ep_gather.int32_offset", &p); /* M_sum*H < 2^31 */
        cr_assert(same(&p, got, want), "case %d: int32_offset", c);
        free(got);
        free(want);
        /* the tolerance kernel: on exactness-preserving values every FP32 sum is exact, so it
         * must equal exact_v1 bit for bit whether BLAS fuses or not */
        fill(&p, 1);
        want = run_ref(&p, MOECTS_RECIPE_EXACT_V1);
        got = run_kernel("cpu.ep_gather.saxpy", &p);
        cr_assert(same(&p, got, want), "case %d: saxpy differs from exact_v1 on exact values", c);
        free(got);
        free(want);
        drop(&p);
    }
}

/* saxpy on full-precision values: within its declared calc_diff of exact_v1. */
Test(ep_gather_kernels, saxpy_within_declared_tolerance)
{
    prob p = make(64, 8, 40, 300, 16, MOECTS_I32, MOECTS_BF16, 1);
    fill(&p, 0);
    uint16_t *want = run_ref(&p, MOECTS_RECIPE_EXACT_V1), *got = run_kernel("cpu.ep_gather.saxpy", &p);
    double num = 0, den = 0;
    for (int64_t i = 0; i < p.s.T * p.s.H; i++) {
        double g = moects__bf16_to_f32(got[i]), w = moects__bf16_to_f32(want[i]);
        num += (g - w) * (g - w);
        den += g * g + w * w;
    }
    cr_assert(den > 0 && num / den <= find("cpu.ep_gather.saxpy")->tol.max_calc_diff, "calc_diff %g",
              num / den);
    free(want);
    free(got);
    drop(&p);
}

/* ---- each mutant against an input that exposes its bug ---- */

/* H = 3584 (Kimi K3's latent width): min(3584, 1024) = 1024 does not divide it: abort. */
Test(ep_gather_kernels, block_min1024_aborts_on_3584, .signal = SIGABRT)
{
    prob p = make(2, 2, 4, 3584, 4, MOECTS_I32, MOECTS_BF16, 0);
    fill(&p, 1);
    void *out = malloc(out_bytes(&p));
    moects_ep_gather_args a = {p.x, p.ids, p.w, p.rows, NULL, out};
    find("cpu.mutant.ep_gather.block_min1024")->run(&p.s, &a, NULL);
}

/* The assertion fires at launch, so even T = 0 aborts for H = 1536 ... */
Test(ep_gather_kernels, block_min1024_aborts_on_1536_even_without_tokens, .signal = SIGABRT)
{
    moects_ep_gather_shape s = {0, 8, 0, 1536, 4, MOECTS_I32, MOECTS_BF16, 0};
    moects_ep_gather_args a = {0};
    find("cpu.mutant.ep_gather.block_min1024")->run(&s, &a, NULL);
}

/* ... while the honest kernel takes both shapes. */
Test(ep_gather_kernels, honest_takes_non_multiple_of_1024)
{
    prob p = make(2, 2, 4, 3584, 4, MOECTS_I32, MOECTS_BF16, 0);
    fill(&p, 1);
    void *want = run_ref(&p, MOECTS_RECIPE_EPG_FMA_V1), *got = run_kernel("cpu.ep_gather", &p);
    cr_assert(same(&p, got, want));
    free(want);
    free(got);
    drop(&p);
}

Test(ep_gather_kernels, muladd_differs_on_fma_case)
{
    prob p = fma_case(MOECTS_F32);
    uint32_t *got = run_kernel("cpu.mutant.ep_gather.muladd", &p);
    cr_assert_eq(got[0], 0x38808000u, "0x%08x", got[0]); /* two roundings, not 0x3880A000 */
    free(got);
    drop(&p);
    p = fma_case(MOECTS_BF16); /* 0x38808000 is a bf16 tie -> even 0x3880, vs fma's 0x3881 */
    uint16_t *gb = run_kernel("cpu.mutant.ep_gather.muladd", &p);
    cr_assert_eq(gb[0], 0x3880);
    free(gb);
    drop(&p);
}

/* Without a map: ids {-2, 0}; -2 is invalid, so out = x[1] * w1 = 2 * 0.5 = 1 (0x3F80);
 * neg1_only counts the -2 slot too: 3 * 1 + 1 = 4 (0x4080). */
Test(ep_gather_kernels, neg1_only_counts_other_negatives)
{
    prob p = make(1, 2, 2, 1, 4, MOECTS_I32, MOECTS_BF16, 0);
    p.x[0] = 0x4040; /* 3 */
    p.x[1] = 0x4000; /* 2 */
    set_id(&p, 0, -2);
    set_id(&p, 1, 0);
    p.rows[0] = 0;
    p.rows[1] = 1;
    p.w[0] = 1.0f;
    p.w[1] = 0.5f;
    uint16_t *h = run_kernel("cpu.ep_gather", &p), *m = run_kernel("cpu.mutant.ep_gather.neg1_only", &p);
    cr_assert_eq(h[0], 0x3F80);
    cr_assert_eq(m[0], 0x4080);
    free(h);
    free(m);
    drop(&p);
}

/* With a map of E_global = 4 and a stale id 4 (= E_global): invalid, out = x[1]*w1 = 1.
 * neg1_only reads expert_map[4] without the range check; the buffer here has a spare entry
 * there holding 0 (>= 0), so the slot counts: 3 + 1 = 4. (In the harness the read lands past
 * the map: garbage or a crash.) Also int64 ids: 2^32 + 4 would read far out of bounds, not
 * tried here. */
Test(ep_gather_kernels, neg1_only_reads_map_out_of_range)
{
    prob p = make(1, 2, 2, 1, 4, MOECTS_I64, MOECTS_BF16, 1);
    p.x[0] = 0x4040;
    p.x[1] = 0x4000;
    p.map[0] = 0;
    p.map[1] = p.map[2] = p.map[3] = -1;
    p.map[4] = 0; /* past E_global */
    set_id(&p, 0, 4);
    set_id(&p, 1, 0);
    p.rows[0] = 0;
    p.rows[1] = 1;
    p.w[0] = 1.0f;
    p.w[1] = 0.5f;
    uint16_t *h = run_kernel("cpu.ep_gather", &p), *m = run_kernel("cpu.mutant.ep_gather.neg1_only", &p);
    cr_assert_eq(h[0], 0x3F80);
    cr_assert_eq(m[0], 0x4080);
    free(h);
    free(m);
    drop(&p);
}

/* Map {0, -1, -1, -1}: id 1 belongs to another rank. Honest: 2 * 0.5 = 1; ignore_map: 3 + 1 = 4. */
Test(ep_gather_kernels, ignore_map_counts_remote_experts)
{
    prob p = make(1, 2, 2, 1, 4, MOECTS_I32, MOECTS_BF16, 1);
    p.x[0] = 0x4040;
    p.x[1] = 0x4000;
    p.map[0] = 0;
    p.map[1] = p.map[2] = p.map[3] = -1;
    set_id(&p, 0, 1);
    set_id(&p, 1, 0);
    p.rows[0] = 0;
    p.rows[1] = 1;
    p.w[0] = 1.0f;
    p.w[1] = 0.5f;
    uint16_t *h = run_kernel("cpu.ep_gather", &p), *m = run_kernel("cpu.mutant.ep_gather.ignore_map", &p);
    cr_assert_eq(h[0], 0x3F80);
    cr_assert_eq(m[0], 0x4080);
    free(h);
    free(m);
    drop(&p);
}

/* Row 300000 of H = 7168 (DeepSeek-V3 hidden): 300000 * 7168 = 2150400000 > 2^31 = 2147483648.
 * 64-bit: 2150400000 + 5. 32-bit: 2150400005 - 2^32 = -2144567291 (a read before x). */
Test(ep_gather_kernels, int32_offset_wraps_past_2_31)
{
    cr_assert_eq(moects__epg_offset64(300000, 7168, 5), 2150400005ll);
    cr_assert_eq(moects__epg_offset32(300000, 7168, 5), -2144567291ll);
    /* 299593 * 7168 = 2147482624: + 1023 is 2^31 - 1, the last offset both agree on; + 1024
     * is 2^31, which the 32-bit form reads as -2^31. */
    cr_assert_eq(moects__epg_offset32(299593, 7168, 1023), 2147483647ll);
    cr_assert_eq(moects__epg_offset64(299593, 7168, 1023), 2147483647ll);
    cr_assert_eq(moects__epg_offset32(299593, 7168, 1024), -2147483648ll);
    cr_assert_eq(moects__epg_offset64(299593, 7168, 1024), 2147483648ll);
}

Test(ep_gather_kernels, zero_tokens_all_kernels)
{
    moects_ep_gather_shape s = {0, 8, 0, 1024, 16, MOECTS_I32, MOECTS_BF16, 1};
    moects_ep_gather_args a = {0};
    for (size_t i = 0; i < NALL; i++) cr_assert_eq(find(ALL[i])->run(&s, &a, NULL), 0, "%s", ALL[i]);
}
