/* ep_gather_internal.h: internals shared by the CPU ep_gather kernels under test
 * (gpu/cpu/ep_gather*.c); the offsets are exposed for tests/unit/test_gpu_ep_gather_kernels.c. */
#ifndef MOECTS_EP_GATHER_INTERNAL_H
#define MOECTS_EP_GATHER_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "moects_kernel.h"

/* Element offset of x[row][d] in a [M_sum, H] row-major tensor: 64-bit (correct). */
int64_t moects__epg_offset64(int64_t row, int64_t H, int64_t d);
/* The same in 32-bit arithmetic, as the int32_offset mutant computes it: row*H + d wrapped
 * modulo 2^32 and read as int32 (negative past 2^31). */
int64_t moects__epg_offset32(int64_t row, int64_t H, int64_t d);

/* supports() of a kernel that takes every shape: 1. */
static inline int moects__epg_supports_all(const void *shape, char *why, size_t why_len)
{
    (void)shape;
    (void)why;
    (void)why_len;
    return 1;
}

/* 1 when T, k, H, M_sum >= 0, ids are int32/int64 and out is bf16/fp32; else 0. */
static inline int moects__epg_shape_ok(const moects_ep_gather_shape *s)
{
    if (s->T < 0 || s->k < 0 || s->H < 0 || s->M_sum < 0) return 0;
    if (s->id_dtype != MOECTS_I32 && s->id_dtype != MOECTS_I64) return 0;
    if (s->out_dtype != MOECTS_BF16 && s->out_dtype != MOECTS_F32) return 0;
    return 1;
}

/* topk_ids[slot] (slot = t*k + j), int32 or int64 as s->id_dtype says. */
static inline int64_t moects__epg_slot_id(const moects_ep_gather_shape *s, const moects_ep_gather_args *a,
                                          int64_t slot)
{
    return s->id_dtype == MOECTS_I64 ? ((const int64_t *)a->topk_ids)[slot] : ((const int32_t *)a->topk_ids)[slot];
}

/* DESIGN.md "ep_gather" slot validity: id >= 0, and with an expert map also id < E_global and
 * expert_map[id] >= 0. */
static inline int moects__epg_slot_valid(const moects_ep_gather_shape *s, const moects_ep_gather_args *a,
                                         int64_t slot)
{
    int64_t id = moects__epg_slot_id(s, a, slot);
    return id >= 0 && (!s->has_expert_map || (id < s->E_global && a->expert_map[id] >= 0));
}

/* FP32 -> BF16, round to nearest even; NaN stays a quiet NaN. */
static inline uint16_t moects__epg_bf16_rne(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* Token t's output row from an FP32 accumulator row acc[H]: copied (F32 out) or RNE to BF16. */
static inline void moects__epg_store_row(const moects_ep_gather_shape *s, const moects_ep_gather_args *a,
                                         int64_t t, const float *acc)
{
    const int64_t H = s->H;
    if (s->out_dtype == MOECTS_F32)
        memcpy((float *)a->out + t * H, acc, (size_t)H * sizeof *acc);
    else
        for (int64_t d = 0; d < H; d++) ((uint16_t *)a->out)[t * H + d] = moects__epg_bf16_rne(acc[d]);
}

/* BF16 -> FP32 (exact). */
static inline float moects__epg_bf16_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
#endif
