/* layout.c: the layout adapters (API, shapes and conventions in moects_layout.h; sources in
 * docs/adapters.md): W13 row orders, the 128x4 block-scale tiles, the FP4 nibble order. */
#include <stdio.h>
#include <string.h>

#include "moects_layer.h"
#include "moects_layout.h"

static const moects_adapter ADAPTERS[] = {
    {"w13.up_gate.v1", MOECTS_ADAPT_W13, MOECTS_W13_UP_GATE,
     "W13 halves [up | gate]: CUTLASS fused MoE, trtllm-gen (vLLM tests/kernels/moe/test_mxfp4_moe.py@02d0c80)"},
    {"w13.interleave1.v1", MOECTS_ADAPT_W13, MOECTS_W13_INTERLEAVE1,
     "W13 rows interleaved by 1, gate even, up odd: gpt-oss swiglu (openai/gpt-oss gpt_oss/torch/model.py@a194b99)"},
    {"w13.interleave8.v1", MOECTS_ADAPT_W13, MOECTS_W13_INTERLEAVE8,
     "W13 rows in granules of 8, gate then up: DeepGEMM mega MoE (deep_gemm/mega/__init__.py@5e012d4 "
     "_interleave_weights)"},
    {"scales.nvfp4.swizzle_128x4.v1", MOECTS_ADAPT_SCALES, 16,
     "NVFP4 UE4M3 scales in cuBLASLt's 128x4 tiles (VEC16_UE4M3; vLLM quant_utils.py@01693a6 swizzle_blockscale)"},
    {"scales.mxfp4.swizzle_128x4.v1", MOECTS_ADAPT_SCALES, 32,
     "MXFP4 UE8M0 scales in cuBLASLt's 128x4 tiles (VEC32_UE8M0; the NVFP4 tiles with 32-element blocks)"},
    {"fp4.hi_first.v1", MOECTS_ADAPT_FP4, 0,
     "E2M1 codes with element 2j in the high nibble (the reverse of OCP / cuda_fp4.h __nv_fp4x2 order)"},
};

#define NADAPTERS (sizeof ADAPTERS / sizeof ADAPTERS[0])

size_t moects__adapter_count(void) { return NADAPTERS; }

const moects_adapter *moects__adapter_at(size_t i) { return i < NADAPTERS ? &ADAPTERS[i] : NULL; }

const moects_adapter *moects__adapter_find(const char *name)
{
    for (size_t i = 0; name && i < NADAPTERS; i++)
        if (!strcmp(ADAPTERS[i].name, name)) return &ADAPTERS[i];
    return NULL;
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Bytes of one batch's 128x4 tiles: rows padded to 128, K-blocks to 4. */
static int64_t tile_bytes(int64_t rows, int64_t nkb) { return cdiv(rows, 128) * 128 * cdiv(nkb, 4) * 4; }

int64_t moects__adapter_w13_row(const moects_adapter *a, int64_t rows, int64_t n)
{
    const int64_t I = rows / 2, i = n < I ? n : n - I, up = n >= I;
    switch (a->param) {
    case MOECTS_W13_UP_GATE: return up ? i : I + i;
    case MOECTS_W13_INTERLEAVE1: return 2 * i + up;
    case MOECTS_W13_INTERLEAVE8: return 16 * (i / 8) + 8 * up + i % 8;
    default: return n;
    }
}

int64_t moects__adapter_bytes(const moects_adapter *a, int inverse, int64_t batch, int64_t rows, int64_t cols,
                              char *why, size_t len)
{
    if (!a) return snprintf(why, len, "no such adapter"), -1;
    if (batch < 0 || rows < 0 || cols < 0)
        return snprintf(why, len, "[%lld, %lld, %lld]: negative size", (long long)batch, (long long)rows,
                        (long long)cols), -1;
    if (a->kind == MOECTS_ADAPT_W13 && rows % 2)
        return snprintf(why, len, "rows %lld: W13 has 2I rows, an even count", (long long)rows), -1;
    if (a->kind == MOECTS_ADAPT_W13 && a->param == MOECTS_W13_INTERLEAVE8 && rows % 16)
        return snprintf(why, len, "rows %lld: granules of 8 need I a multiple of 8", (long long)rows), -1;
    if (a->kind == MOECTS_ADAPT_SCALES && !inverse) return batch * tile_bytes(rows, cols);
    return batch * rows * cols;
}

/* W13: dst[batch][engine_row(n)] = src[batch][n] (forward) or its inverse. */
static void w13_rows(const moects_adapter *a, int inverse, int64_t batch, int64_t rows, int64_t cols,
                     const uint8_t *src, uint8_t *dst)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t n = 0; n < rows; n++) {
            const int64_t e = moects__adapter_w13_row(a, rows, n);
            const int64_t from = inverse ? e : n, to = inverse ? n : e;
            memcpy(dst + (b * rows + to) * cols, src + (b * rows + from) * cols, (size_t)cols);
        }
}

/* Byte of (row r, K-block kb) in one batch's tiles (DESIGN.md "Scale layouts"; cuBLAS "1D Block
 * Scaling Factors Layout"). */
static int64_t tile_offset(int64_t r, int64_t kb, int64_t nkb)
{
    return ((r / 128) * cdiv(nkb, 4) + kb / 4) * 512 + (r % 32) * 16 + ((r / 32) % 4) * 4 + kb % 4;
}

static void scale_tiles(int inverse, int64_t batch, int64_t rows, int64_t nkb, const uint8_t *src, uint8_t *dst)
{
    const int64_t tb = tile_bytes(rows, nkb);
    if (!inverse) memset(dst, MOECTS_ADAPT_PAD, (size_t)(batch * tb));
    for (int64_t b = 0; b < batch; b++) {
        const uint8_t *s = src + b * (inverse ? tb : rows * nkb);
        uint8_t *d = dst + b * (inverse ? rows * nkb : tb);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t kb = 0; kb < nkb; kb++) {
                const int64_t t = tile_offset(r, kb, nkb);
                if (inverse) d[r * nkb + kb] = s[t];
                else d[t] = s[r * nkb + kb];
            }
    }
}

int moects__adapt(const moects_adapter *a, int inverse, int64_t batch, int64_t rows, int64_t cols,
                  const uint8_t *src, uint8_t *dst, char *why, size_t len)
{
    if (moects__adapter_bytes(a, inverse, batch, rows, cols, why, len) < 0) return -1;
    switch (a->kind) {
    case MOECTS_ADAPT_W13: w13_rows(a, inverse, batch, rows, cols, src, dst); break;
    case MOECTS_ADAPT_SCALES: scale_tiles(inverse, batch, rows, cols, src, dst); break;
    case MOECTS_ADAPT_FP4:
        for (int64_t i = 0; i < batch * rows * cols; i++) dst[i] = (uint8_t)((src[i] >> 4) | (src[i] << 4));
        break;
    }
    return 0;
}
