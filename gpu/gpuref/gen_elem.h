/* gen_elem.h: the counter-based input generator (DESIGN.md "Determinism") as per-element code, one
 * source compiled for the host (gpu/gen_twin.c: the twin CTest compares with harness/ops/inputs.c's
 * generator, tests/unit/test_harness_gentwin.c) and for the device (gpu/cuda/gen_twin.cu: one thread
 * an element), so that a case's inputs can be made on the GPU with the CPU's bits (issue 31, item 2).
 * Each function mirrors one of harness/ops/ and must stay bit-identical to it: a value is a function
 * of (seed, case id, tensor name, element index) through SplitMix64 (Steele et al. 2014), never of a
 * running state. Only integer operations and exact FP32 scalings (ldexpf of small integers, divisions
 * by powers of two): no rounding can differ between the two compilers. */
#ifndef MOECTS_GEN_ELEM_H
#define MOECTS_GEN_ELEM_H
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define GE_HD __host__ __device__ static inline
#else
#define GE_HD static inline
#endif

/* Data modes and FP4 formats, numbered as cases/moects_cases.h moects_data and moects_fp4_format
 * (gpu/ does not include cases/; the test checks the numbers). */
enum { GE_DATA_EXACT = 0, GE_DATA_ADVERSARIAL = 1, GE_DATA_NAN = 2, GE_DATA_NEGZERO = 3 };
enum { GE_MXFP4 = 1, GE_NVFP4 = 2 };

#define GE_GOLDEN 0x9e3779b97f4a7c15ull

GE_HD uint64_t ge_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

GE_HD uint64_t ge_fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* moects__input_key: a tensor's stream key from (seed, case id, tensor name). */
GE_HD uint64_t ge_key(uint64_t seed, const char *case_id, const char *tensor)
{
    uint64_t k = ge_mix64(seed + GE_GOLDEN);
    k = ge_mix64(k ^ ge_fnv1a(case_id));
    return ge_mix64(k ^ ge_fnv1a(tensor));
}

/* moects__input_u64 (moects__draw): draw i of a stream. */
GE_HD uint64_t ge_u64(uint64_t key, uint64_t i) { return ge_mix64(key + (i + 1) * GE_GOLDEN); }

GE_HD float ge_f32_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* moects__bf16_input (harness/ops/inputs.c): one BF16 activation (bits) of column col, data mode d. */
GE_HD uint16_t ge_bf16_input(int d, uint64_t u, int64_t col)
{
    uint16_t sign = (uint16_t)((u & 1) << 15);
    if (d == GE_DATA_NEGZERO && col % 4 != 3) {
        uint16_t sub = (uint16_t)(1 + (u >> 1) % 127);
        return col % 4 == 0 ? 0x8000 : col % 4 == 1 ? (uint16_t)(0x8000 | sub) : (uint16_t)(sign | sub);
    }
    if (d == GE_DATA_ADVERSARIAL) {
        uint16_t m = (uint16_t)((u >> 1) & 0x7f);
        unsigned sel = (unsigned)((u >> 8) & 63);
        int e = sel == 0 ? 0 : sel == 1 ? 1 : sel == 2 ? 254 : 127 + (int)((u >> 16) % 61) - 30;
        return (uint16_t)(sign | (uint16_t)(e << 7) | m);
    }
    if (d == GE_DATA_NAN && ((u >> 20) & 511) == 0) {
        const unsigned s = (unsigned)((u >> 29) & 3); /* NaN, -NaN, +Inf, -Inf */
        return s == 0 ? 0x7fc1 : s == 1 ? 0xffc1 : s == 2 ? 0x7f80 : 0xff80;
    }
    int e = 127 + (int)((u >> 4) % 7) - 3;
    uint16_t m = (uint16_t)(((u >> 1) & 7) << 4);
    return (uint16_t)(sign | (uint16_t)(e << 7) | m);
}

/* Byte i of a packed E2M1 stream (harness/ops/fp4_gemm.c fill_codes, moe_gemm.c gen_row kind 0). */
GE_HD uint8_t ge_fp4_byte(uint64_t key, uint64_t i) { return (uint8_t)(ge_u64(key, i / 8) >> (8 * (i % 8))); }

/* moects__fp4_scale_code: a block-scale code of format f (UE8M0 MXFP4, UE4M3 NVFP4), data mode d. */
GE_HD uint8_t ge_fp4_scale_code(int f, int d, uint64_t u)
{
    unsigned sel = (unsigned)(u & 63);
    if (f == GE_MXFP4) {
        if (d == GE_DATA_NAN && sel == 0) return 0xff;
        if (d == GE_DATA_ADVERSARIAL && sel < 8) return sel == 0 || sel == 5 ? 0 : sel == 1 || sel == 6 ? 1 : sel == 2 ? 2 : sel == 3 ? 253 : 254;
        if (d == GE_DATA_ADVERSARIAL) return (uint8_t)(127 + (int)((u >> 8) % 41) - 20);
        return (uint8_t)(127 + (int)((u >> 8) % 9) - 4);
    }
    uint8_t m = (uint8_t)((u >> 8) & 7);
    if (d == GE_DATA_NAN && sel == 0) return (u >> 16) & 1 ? 0xff : 0x7f;
    if (d == GE_DATA_ADVERSARIAL) {
        if (sel < 8) return (uint8_t)(1 + (u >> 8) % 7);
        if (sel == 8) return 0x00;
        uint8_t e = (uint8_t)(1 + (u >> 12) % 15);
        if (e == 15 && m == 7) m = 6;
        return (uint8_t)(e << 3 | m);
    }
    return (uint8_t)((4 + (u >> 12) % 7) << 3 | m);
}

/* harness/ops/moe_gemm.c e4m3_value: an E4M3 activation code that is not NaN unless data mode NaN. */
GE_HD uint8_t ge_e4m3(int d, uint64_t u)
{
    uint8_t b = (uint8_t)u;
    if (d == GE_DATA_NAN && ((u >> 20) & 255) == 0) return (u >> 8) & 1 ? 0xff : 0x7f;
    if (d != GE_DATA_ADVERSARIAL) b = (uint8_t)((b & 0x87) | (uint8_t)((4 + (u >> 8) % 8) << 3));
    return (b & 0x7f) == 0x7f ? (uint8_t)(b - 1) : b;
}

/* harness/ops/moe_gemm.c f32_scale_value: a W4A8 FP32 activation scale (8 significant bits, exact). */
GE_HD float ge_f32_scale(int d, uint64_t u)
{
    if (d == GE_DATA_NAN && (u & 63) == 0) return ge_f32_bits(0x7fc00000u);
    int e = (int)((u >> 8) % 9) - 4 + (d == GE_DATA_ADVERSARIAL ? (int)((u >> 20) % 41) - 20 : 0);
    return ldexpf((float)(128 + (u >> 32) % 128) / 128.0f, e);
}

/* harness/ops/ep_gather.c weight_value: one routing weight of token t (exact: small integers times
 * powers of two, or a bit pattern). */
GE_HD float ge_weight(int d, uint64_t u, int64_t t)
{
    if (d == GE_DATA_NEGZERO) return ldexpf((float)(1 + (int)(u % 64)), t % 2 ? -136 : -36);
    if (d != GE_DATA_ADVERSARIAL) return (float)(1 + (int)(u % 64)) / 64.0f;
    uint32_t e = 126 - (uint32_t)((u >> 8) % 6);
    unsigned sel = (unsigned)((u >> 40) & 15);
    if (sel == 0) e += 60;
    if (sel == 1) e -= 60;
    uint32_t bits = (e << 23) | (uint32_t)((u >> 41) & 0x7fffff);
    if (((u >> 4) & 7) == 0) bits |= 0x80000000u;
    return ge_f32_bits(bits);
}

/* harness/ops/ep_gather.c pad_value: garbage for x's padding rows, half with an all-ones exponent. */
GE_HD uint16_t ge_pad(uint64_t u)
{
    uint16_t b = (uint16_t)u;
    return (u >> 16) & 1 ? (uint16_t)(b | 0x7f80) : b;
}

/* Tensor kinds a stream can be filled as (moects__gen_fill): element i of n, its bytes at out + i*size. */
enum {
    GE_KIND_U64 = 0,    /* the draw itself (8 bytes) */
    GE_KIND_BF16 = 1,   /* ge_bf16_input, column i % cols (2 bytes) */
    GE_KIND_FP4 = 2,    /* ge_fp4_byte (1 byte) */
    GE_KIND_SCALE = 3,  /* ge_fp4_scale_code of format fmt (1 byte) */
    GE_KIND_E4M3 = 4,   /* ge_e4m3 (1 byte) */
    GE_KIND_F32SC = 5,  /* ge_f32_scale (4 bytes) */
    GE_KIND_WEIGHT = 6, /* ge_weight, token i / cols (4 bytes) */
    GE_KIND_PAD = 7,    /* ge_pad (2 bytes) */
    GE_NKINDS = 8
};

GE_HD int ge_kind_size(int kind)
{
    return kind == GE_KIND_U64 ? 8 : kind == GE_KIND_BF16 || kind == GE_KIND_PAD ? 2 : kind == GE_KIND_F32SC || kind == GE_KIND_WEIGHT ? 4 : 1;
}

/* Element i of a kind-filled stream (key, data mode d, format fmt, cols) into out (ge_kind_size bytes). */
GE_HD void ge_elem(int kind, uint64_t key, int d, int fmt, int64_t cols, uint64_t i, unsigned char *out)
{
    const uint64_t u = ge_u64(key, i);
    uint16_t h;
    uint32_t w;
    switch (kind) {
    case GE_KIND_U64: memcpy(out, &u, 8); break;
    case GE_KIND_BF16: h = ge_bf16_input(d, u, (int64_t)(i % (uint64_t)cols)), memcpy(out, &h, 2); break;
    case GE_KIND_FP4: out[0] = ge_fp4_byte(key, i); break;
    case GE_KIND_SCALE: out[0] = ge_fp4_scale_code(fmt, d, u); break;
    case GE_KIND_E4M3: out[0] = ge_e4m3(d, u); break;
    case GE_KIND_F32SC: { float f = ge_f32_scale(d, u); memcpy(&w, &f, 4), memcpy(out, &w, 4); } break;
    case GE_KIND_WEIGHT: { float f = ge_weight(d, u, (int64_t)(i / (uint64_t)cols)); memcpy(&w, &f, 4), memcpy(out, &w, 4); } break;
    default: h = ge_pad(u), memcpy(out, &h, 2); break;
    }
}

#endif
