/* ep_gather_mutants.c: CPU ep_gather kernels with one known bug each (DESIGN.md "GPU side"), and
 * the ep_gather half of the mutant pool (gpu/cpu/pool.def): each declares ep_gather.fma_v1 and is
 * otherwise correct, so the suite must catch the bug as a mismatch or a crash, never as a refusal
 * (supports() accepts every shape). One core loop, parameterised by the mutation (mutation.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_gather_internal.h"
#include "moects_kernel.h"
#include "mutation.h"

int64_t moects__epg_offset64(int64_t row, int64_t H, int64_t d) { return row * H + d; }

int64_t moects__epg_offset32(int64_t row, int64_t H, int64_t d)
{
    uint32_t u = (uint32_t)row * (uint32_t)H + (uint32_t)d; /* unsigned: wraps, no UB */
    return (int64_t)(int32_t)u; /* GCC/Clang: modulo 2^32 (implementation-defined, not UB) */
}

/* Inlined into each mutant's run(), where m is a constant: every other operator's test folds away
 * (one generic loop testing m->op per element ran mutants twice as slow as the loops they replaced). */
#define MOECTS__SPECIALISE __attribute__((always_inline)) inline

MOECTS__SPECIALISE static int64_t slot_id(const moects__mut *m, const moects_ep_gather_shape *s, const moects_ep_gather_args *a,
                       int64_t slot)
{
    if (m->op == MOECTS__EPG_ID32 && s->id_dtype == MOECTS_I64)
        return (int32_t)(uint32_t)((const int64_t *)a->topk_ids)[slot];
    return moects__epg_slot_id(s, a, slot);
}

MOECTS__SPECIALISE static int slot_valid(const moects__mut *m, const moects_ep_gather_shape *s, const moects_ep_gather_args *a,
                      int64_t slot)
{
    int64_t id = slot_id(m, s, a, slot);
    if (m->op == MOECTS__EPG_NEG1_ONLY) /* only -1 is "invalid"; no range check before reading the map */
        return id != -1 && (!s->has_expert_map || a->expert_map[id] >= 0);
    if (id < 0 || (m->op == MOECTS__EPG_OFF_ID0 && id == 0)) return 0;
    if (m->op == MOECTS__EPG_IGNORE_MAP || !s->has_expert_map) return 1;
    int64_t lim = s->E_global + (m->op == MOECTS__EPG_OFF_EMAP);
    return id < lim && a->expert_map[id] >= 0;
}

MOECTS__SPECIALISE static float read_x(const moects__mut *m, const moects_ep_gather_shape *s, const moects_ep_gather_args *a,
                    int64_t row, int64_t d)
{
    const int64_t H = s->H;
    if (m->op == MOECTS__EPG_WRAP_ROW) row %= m->p;
    if (m->op == MOECTS__EPG_NARROW_ROW) row = moects__wrap_bits(row, m->p);
    if (m->op == MOECTS__EPG_NARROW_D) d = moects__wrap_bits(d, m->p);
    int64_t off = m->op == MOECTS__EPG_XOFF32 ? moects__epg_offset32(row, H, d) : moects__epg_offset64(row, H, d);
    float v = moects__epg_bf16_f32(a->x[off]);
    if (m->op == MOECTS__EPG_DAZ_X && fpclassify(v) == FP_SUBNORMAL) v = copysignf(0.0f, v);
    return v;
}

MOECTS__SPECIALISE static void store(const moects__mut *m, const moects_ep_gather_shape *s, const moects_ep_gather_args *a, int64_t t,
                  int64_t d, float acc)
{
    const int64_t H = s->H;
    if (m->op == MOECTS__EPG_NARROW_T) t = moects__wrap_bits(t, m->p);
    int64_t off = m->op == MOECTS__EPG_OOFF32 ? moects__epg_offset32(t, H, d) : t * H + d;
    if (m->op == MOECTS__EPG_ZERO_SIGN && acc == 0.0f) acc = 0.0f;
    if (s->out_dtype == MOECTS_F32) {
        if (m->op == MOECTS__EPG_F32_VIA_BF16) acc = moects__epg_bf16_f32(moects__epg_bf16_rne(acc));
        ((float *)a->out)[off] = acc;
        return;
    }
    uint16_t b = moects__bf16_round(acc, m->op == MOECTS__EPG_ROUND ? (int)m->p : 0);
    if (m->op == MOECTS__EPG_SATFINITE && (b & 0x7FFFu) == 0x7F80u) b = (uint16_t)((b & 0x8000u) | 0x7F7Fu);
    ((uint16_t *)a->out)[off] = b;
}

/* Token t's valid slots in summation order: rows[], weights[]; returns their count, or -1 for an
 * input_index outside [0, M_sum). */
MOECTS__SPECIALISE static int64_t token_slots(const moects__mut *m, const moects_ep_gather_shape *s, const moects_ep_gather_args *a,
                           int64_t t, int64_t *rows, float *ws)
{
    const int64_t k = s->k;
    int64_t j0 = m->op == MOECTS__EPG_OFF_J0 ? 1 : 0, j1 = m->op == MOECTS__EPG_OFF_K ? k - 1 : k, n = 0;
    for (int64_t i = j0; i < j1; i++) {
        int64_t j = m->op == MOECTS__EPG_REVERSE ? k - 1 - (i - j0) : i, slot = t * k + j;
        if (!slot_valid(m, s, a, slot)) continue;
        int64_t row = a->input_index[slot];
        if (row < 0 || row >= s->M_sum) return -1;
        float wv = a->topk_weights[slot];
        if (m->op == MOECTS__EPG_DAZ_W && fpclassify(wv) == FP_SUBNORMAL) wv = copysignf(0.0f, wv);
        rows[n] = row;
        ws[n++] = wv;
    }
    return n;
}

/* acc of column d over a token's n valid slots, started at init. */
MOECTS__SPECIALISE static float combine(const moects__mut *m, const moects_ep_gather_shape *s, const moects_ep_gather_args *a,
                     const int64_t *rows, const float *ws, int64_t n, int64_t d, float init)
{
    float acc = m->op == MOECTS__EPG_ACC_NEGZERO ? -0.0f : init;
    double dacc = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float xv = read_x(m, s, a, rows[i], d), wv = ws[i];
        if (m->op == MOECTS__EPG_ACC_DOUBLE) {
            dacc = fma((double)xv, (double)wv, dacc);
        } else if (m->op == MOECTS__EPG_MULADD || (m->op == MOECTS__EPG_ACC_FIRST && i == 0)) {
            volatile float p = xv * wv; /* rounded to FP32 here, never fused */
            acc = m->op == MOECTS__EPG_ACC_FIRST ? p : acc + p;
        } else {
            acc = fmaf(xv, wv, acc);
        }
    }
    return m->op == MOECTS__EPG_ACC_DOUBLE ? (float)dacc : acc;
}

/* vLLM before PR 50458: BLOCK_D = min(hidden, 1024); assert hidden % BLOCK_D == 0, checked at
 * launch whatever T is (Kimi K3's latent width 3584 fails it). */
static void block_assert(const moects_ep_gather_shape *s)
{
    int64_t H = s->H, block = H < 1024 ? H : 1024;
    if (H > 0 && H % block != 0) {
        fprintf(stderr, "cpu.mutant.ep_gather.block_min1024: assertion hidden %% BLOCK_D == 0 "
                        "failed (hidden %lld, BLOCK_D %lld)\n", (long long)H, (long long)block);
        abort();
    }
}

MOECTS__SPECIALISE static int run_core(const moects__mut *m, const void *shape, const void *args)
{
    const moects_ep_gather_shape *s = shape;
    const moects_ep_gather_args *a = args;
    if (!moects__epg_shape_ok(s)) return -1;
    if (m->op == MOECTS__EPG_BLOCK_MIN1024) block_assert(s);
    const int64_t T = s->T, H = s->H;
    if (T == 0 || H == 0) return 0;
    size_t nk = (size_t)(s->k > 0 ? s->k : 1);
    float *carry = calloc((size_t)H, sizeof *carry), *ws = malloc(nk * sizeof *ws);
    int64_t *rows = malloc(nk * sizeof *rows);
    int rc = carry && ws && rows ? 0 : -1;
    int64_t tend = m->op == MOECTS__EPG_OFF_T ? T - 1 : m->op == MOECTS__EPG_CAP_T && T > m->p ? m->p : T;
    int64_t dend = m->op == MOECTS__EPG_OFF_H ? H - 1 : m->op == MOECTS__EPG_CAP_H && H > m->p ? m->p : H;
    for (int64_t t = 0; t < tend && rc == 0; t++) {
        int64_t n = token_slots(m, s, a, t, rows, ws);
        if (n < 0) {
            rc = -1;
            break;
        }
        for (int64_t d = 0; d < dend; d++) {
            float acc = combine(m, s, a, rows, ws, n, d, m->op == MOECTS__EPG_ACC_CARRY ? carry[d] : 0.0f);
            carry[d] = acc;
            if (m->op == MOECTS__EPG_EMPTY_NEGZERO && n == 0) acc = -0.0f;
            store(m, s, a, t, d, acc);
        }
    }
    free(carry);
    free(ws);
    free(rows);
    return rc;
}

#define MUTANT(sym, opv, par, nm, text)                                                        \
    static int run_##sym(const void *shape, const void *args, void *stream)                    \
    {                                                                                          \
        static const moects__mut m = {opv, par};                                               \
        (void)stream;                                                                          \
        return run_core(&m, shape, args);                                                      \
    }                                                                                          \
    const moects_kernel sym = {.abi_version = MOECTS_KERNEL_ABI_VERSION,                       \
                               .name = nm,                                                     \
                               .op = MOECTS_OP_EP_GATHER,                                      \
                               .device = MOECTS_DEVICE_CPU,                                    \
                               .recipe = "ep_gather.fma_v1",                                   \
                               .bug = text,                                                    \
                               .supports = moects__epg_supports_all,                           \
                               .run = run_##sym};

MUTANT(moects_cpu_mutant_ep_gather_block_min1024, MOECTS__EPG_BLOCK_MIN1024, 0,
       "cpu.mutant.ep_gather.block_min1024",
       "BLOCK_D = min(H, 1024) with assert H % BLOCK_D == 0: aborts when H > 1024 is not a "
       "multiple of 1024 (vLLM PR 50458, Kimi K3 latent 3584)")
MUTANT(moects_cpu_mutant_ep_gather_muladd, MOECTS__EPG_MULADD, 0, "cpu.mutant.ep_gather.muladd",
       "acc = acc + x*w with two roundings where the declared recipe fuses (fmaf)")
MUTANT(moects_cpu_mutant_ep_gather_neg1_only, MOECTS__EPG_NEG1_ONLY, 0, "cpu.mutant.ep_gather.neg1_only",
       "only id == -1 is invalid: other negative ids count, and expert_map[id] is read without "
       "the 0 <= id < E_global check (stale huge ids read out of bounds)")
MUTANT(moects_cpu_mutant_ep_gather_ignore_map, MOECTS__EPG_IGNORE_MAP, 0, "cpu.mutant.ep_gather.ignore_map",
       "ignores expert_map: every id >= 0 is valid, experts of other ranks included")
MUTANT(moects_cpu_mutant_ep_gather_int32_offset, MOECTS__EPG_XOFF32, 0,
       "cpu.mutant.ep_gather.int32_offset",
       "element offset row*H + d in 32-bit arithmetic: wraps when M_sum*H > 2^31")

/* the pool's ep_gather mutants (gpu/cpu/pool.def) */
#define MOECTS_POOL_EPG(sym, opv, par, nm, text) MUTANT(sym, opv, par, nm, text)
#define MOECTS_POOL_FP4(sym, opv, par, nm, text)
#define MOECTS_POOL_MOE(sym, fn, sup, nm, text)
#include "pool.def"
