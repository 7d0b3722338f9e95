/* ep_gather_mutants.c: CPU ep_gather kernels with one known bug each (DESIGN.md "GPU side"):
 * each declares ep_gather.fma_v1 and is otherwise correct, so the suite must catch the bug as a
 * mismatch or a crash, never as a refusal (supports() accepts every shape). One core loop,
 * parameterised by the bug. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_gather_internal.h"
#include "moects_kernel.h"

enum bug { BUG_BLOCK_MIN1024, BUG_MULADD, BUG_NEG1_ONLY, BUG_IGNORE_MAP, BUG_INT32_OFFSET };

int64_t moects__epg_offset64(int64_t row, int64_t H, int64_t d) { return row * H + d; }

int64_t moects__epg_offset32(int64_t row, int64_t H, int64_t d)
{
    uint32_t u = (uint32_t)row * (uint32_t)H + (uint32_t)d; /* unsigned: wraps, no UB */
    return (int64_t)(int32_t)u; /* GCC/Clang: modulo 2^32 (implementation-defined, not UB) */
}

static int slot_valid(enum bug b, const moects_ep_gather_shape *s, const moects_ep_gather_args *a,
                      int64_t slot)
{
    int64_t id = moects__epg_slot_id(s, a, slot);
    if (b == BUG_NEG1_ONLY) /* only -1 is "invalid"; no range check before reading the map */
        return id != -1 && (!s->has_expert_map || a->expert_map[id] >= 0);
    if (id < 0) return 0;
    if (b == BUG_IGNORE_MAP || !s->has_expert_map) return 1;
    return id < s->E_global && a->expert_map[id] >= 0;
}

static int run_core(enum bug b, const void *shape, const void *args)
{
    const moects_ep_gather_shape *s = shape;
    const moects_ep_gather_args *a = args;
    if (!moects__epg_shape_ok(s)) return -1;
    const int64_t T = s->T, k = s->k, H = s->H;
    /* vLLM before PR 50458: BLOCK_D = min(hidden, 1024); assert hidden % BLOCK_D == 0, checked
     * at launch whatever T is (Kimi K3's latent width 3584 fails it). */
    int64_t block = H;
    if (b == BUG_BLOCK_MIN1024 && H > 0) {
        block = H < 1024 ? H : 1024;
        if (H % block != 0) {
            fprintf(stderr, "cpu.mutant.ep_gather.block_min1024: assertion hidden %% BLOCK_D == 0 "
                            "failed (hidden %lld, BLOCK_D %lld)\n", (long long)H, (long long)block);
            abort();
        }
    }
    if (T == 0 || H == 0) return 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t d0 = 0; d0 < H; d0 += block) /* column blocks (one block unless block_min1024) */
            for (int64_t d = d0; d < d0 + block && d < H; d++) {
                float acc = 0.0f;
                for (int64_t j = 0; j < k; j++) {
                    int64_t slot = t * k + j;
                    if (!slot_valid(b, s, a, slot)) continue;
                    int64_t row = a->input_index[slot];
                    if (row < 0 || row >= s->M_sum) return -1;
                    int64_t off = b == BUG_INT32_OFFSET ? moects__epg_offset32(row, H, d)
                                                        : moects__epg_offset64(row, H, d);
                    float xv = moects__epg_bf16_f32(a->x[off]), wv = a->topk_weights[slot];
                    if (b == BUG_MULADD) {
                        volatile float p = xv * wv; /* rounded to FP32 here, never fused */
                        acc = acc + p;
                    } else {
                        acc = fmaf(xv, wv, acc);
                    }
                }
                if (s->out_dtype == MOECTS_F32) ((float *)a->out)[t * H + d] = acc;
                else ((uint16_t *)a->out)[t * H + d] = moects__epg_bf16_rne(acc);
            }
    return 0;
}

#define MUTANT(sym, bugid, nm, text)                                                          \
    static int run_##sym(const void *shape, const void *args, void *stream)                    \
    {                                                                                          \
        (void)stream;                                                                          \
        return run_core(bugid, shape, args);                                                   \
    }                                                                                          \
    const moects_kernel sym = {.abi_version = MOECTS_KERNEL_ABI_VERSION,                       \
                               .name = nm,                                                     \
                               .op = MOECTS_OP_EP_GATHER,                                      \
                               .device = MOECTS_DEVICE_CPU,                                    \
                               .recipe = "ep_gather.fma_v1",                                   \
                               .bug = text,                                                    \
                               .supports = moects__epg_supports_all,                                           \
                               .run = run_##sym};

MUTANT(moects_cpu_mutant_ep_gather_block_min1024, BUG_BLOCK_MIN1024,
       "cpu.mutant.ep_gather.block_min1024",
       "BLOCK_D = min(H, 1024) with assert H % BLOCK_D == 0: aborts when H > 1024 is not a "
       "multiple of 1024 (vLLM PR 50458, Kimi K3 latent 3584)")
MUTANT(moects_cpu_mutant_ep_gather_muladd, BUG_MULADD, "cpu.mutant.ep_gather.muladd",
       "acc = acc + x*w with two roundings where the declared recipe fuses (fmaf)")
MUTANT(moects_cpu_mutant_ep_gather_neg1_only, BUG_NEG1_ONLY, "cpu.mutant.ep_gather.neg1_only",
       "only id == -1 is invalid: other negative ids count, and expert_map[id] is read without "
       "the 0 <= id < E_global check (stale huge ids read out of bounds)")
MUTANT(moects_cpu_mutant_ep_gather_ignore_map, BUG_IGNORE_MAP, "cpu.mutant.ep_gather.ignore_map",
       "ignores expert_map: every id >= 0 is valid, experts of other ranks included")
MUTANT(moects_cpu_mutant_ep_gather_int32_offset, BUG_INT32_OFFSET,
       "cpu.mutant.ep_gather.int32_offset",
       "element offset row*H + d in 32-bit arithmetic: wraps when M_sum*H > 2^31")
