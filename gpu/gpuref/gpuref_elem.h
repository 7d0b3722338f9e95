/* gpuref_elem.h: one output element of the GPU references (docs/gpu_reference.md), the same source
 * compiled for the device (gpu/cuda/gpuref.cu, one thread per element) and for the host (gpu/gpuref.c:
 * the CPU stand-in CTest runs, so the arithmetic the GPU runs is tested on every CPU build). Every
 * rounding is spelled out (fmaf, GR_MUL/GR_ADD: no contraction on either side), and what the GPU
 * cannot reproduce bit for bit is flagged per element (GR_INEXACT, GR_NAN, GR_REFUSE) so the case
 * takes the CPU path. Mirrors ref/ep_gather.c, ref/fp4_gemm.c + ref/exact.c (moects__exact_store) and
 * ref/moe_gemm.c's FP4 runs. */
#ifndef MOECTS_GPUREF_ELEM_H
#define MOECTS_GPUREF_ELEM_H
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define GR_HD __host__ __device__ static inline
#else
#define GR_HD static inline
#endif
#ifdef __CUDA_ARCH__ /* nvcc's device pass */
#define GR_ADD(a, b) __fadd_rn((a), (b))
#define GR_MUL(a, b) __fmul_rn((a), (b))
#else
#define GR_ADD(a, b) ((a) + (b)) /* gpu/gpuref.c is built with -ffp-contract=off */
#define GR_MUL(a, b) ((a) * (b))
#endif

/* Element flags (ORed over a case): the CPU path must compute the case. */
#define GR_INEXACT 1u /* exactness not proven for this element (docs/gpu_reference.md, lemma 1) */
#define GR_NAN 2u     /* a NaN output whose payload the CPU's libm/x86 may set otherwise */
#define GR_REFUSE 4u  /* the CPU reference refuses the case (a valid slot's row out of range) */
#define GR_CRMISS 8u  /* an exp/tanh/erf input near a rounding boundary missing from ref/crmath_table.c */

/* Recipes as the references number them (ref/moects_ref.h moects_recipe). */
enum { GR_EXACT = 0, GR_FMA = 1, GR_MULADD = 2 };

GR_HD uint64_t gr_bits64(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}
GR_HD double gr_from64(uint64_t u)
{
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}
GR_HD uint32_t gr_bits32(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}
GR_HD float gr_from32(uint32_t u)
{
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* ref/bf16.c moects__bf16_from_f32: RNE on the bits; NaN keeps sign and top payload, quiet bit set. */
GR_HD uint16_t gr_bf16_from_f32(float f)
{
    uint32_t u = gr_bits32(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
GR_HD float gr_bf16_to_f32(uint16_t b) { return gr_from32((uint32_t)b << 16); }

/* ref/exact.c bf16_from_double: RNE of a finite double p (0 or |p| >= 2^-1000) to BF16, +0 for 0. */
GR_HD uint16_t gr_bf16_from_double(double p)
{
    if (p == 0.0) return 0x0000u;
    uint64_t u = gr_bits64(p);
    double r;
    if ((int)((u >> 52) & 0x7FF) - 1023 >= -126) {
        u += ((uint64_t)1 << 44) - 1 + ((u >> 45) & 1);
        u &= ~(((uint64_t)1 << 45) - 1);
        r = gr_from64(u);
    } else {
        const double q = 0x1p-133;
        r = rint(p / q) * q; /* p / q and * q: exact scalings by powers of two */
    }
    if (fabs(r) >= 0x1p128) return r < 0 ? 0xFF80u : 0x7F80u;
    return (uint16_t)(gr_bits32((float)r) >> 16); /* exact: at most 8 significant bits */
}

/* The exponent L of the lowest set bit of a finite nonzero double t: t is an integer times 2^L. */
GR_HD int gr_low_exp(double t)
{
    uint64_t u = gr_bits64(t), f = u & (((uint64_t)1 << 52) - 1);
    int e = (int)((u >> 52) & 0x7FF), base = e ? e - 1075 : -1074;
    if (e) f |= (uint64_t)1 << 52;
    int z = 0;
    while (!(f & 1)) f >>= 1, z++;
    return base + z;
}

/* An FP64 sum that is proven exact or flagged (docs/gpu_reference.md, lemma 1): h the RN sum of the
 * terms in order from +0, a the RN sum of their magnitudes, lmin the lowest bit exponent of any term.
 * When a < 2^(lmin+53) every partial sum of the terms is an integer multiple of 2^lmin below 2^53
 * units, so every addition into h was exact and h is the exact sum. */
typedef struct {
    double h, a;
    int lmin, bad;
} gr_xacc;

GR_HD void gr_xacc_init(gr_xacc *x)
{
    x->h = 0.0, x->a = 0.0, x->lmin = 1 << 20, x->bad = 0;
}
GR_HD void gr_xacc_add(gr_xacc *x, double t)
{
    if (t == 0.0) return; /* adds nothing: an exact zero sum stays +0, as moects_xsum gives */
    if (!isfinite(t)) {
        x->bad = 1;
        return;
    }
    int l = gr_low_exp(t);
    if (l < x->lmin) x->lmin = l;
    x->h = x->h + t;
    x->a = x->a + fabs(t);
}
/* 1 when h is the exact sum. */
GR_HD int gr_xacc_exact(const gr_xacc *x)
{
    if (x->bad) return 0;
    if (x->a == 0.0) return 1;
    return x->lmin + 53 > 1023 || x->a < ldexp(1.0, x->lmin + 53);
}

/* ---- ep_gather (ref/ep_gather.c) ---- */
typedef struct {
    int64_t T, k, H, M_sum, E_global;
    int id64, has_map, out_bf16, recipe; /* recipe: GR_EXACT, GR_FMA, GR_MULADD */
    const uint16_t *x;
    const void *ids;
    const float *w;
    const int32_t *idx, *map;
    void *out;
} gr_eg;

GR_HD int gr_eg_valid(const gr_eg *p, int64_t slot)
{
    int64_t id = p->id64 ? ((const int64_t *)p->ids)[slot] : (int64_t)((const int32_t *)p->ids)[slot];
    if (!p->has_map) return id >= 0;
    return id >= 0 && id < p->E_global && p->map[id] >= 0;
}

/* Output (t, d): written, and its flags returned. */
GR_HD unsigned gr_eg_elem(const gr_eg *p, int64_t t, int64_t d)
{
    float acc = 0.0f;
    gr_xacc xs;
    gr_xacc_init(&xs);
    for (int64_t j = 0; j < p->k; j++) {
        const int64_t slot = t * p->k + j;
        if (!gr_eg_valid(p, slot)) continue;
        const int64_t row = p->idx[slot];
        if (row < 0 || row >= p->M_sum) return GR_REFUSE;
        const float xv = gr_bf16_to_f32(p->x[row * p->H + d]), w = p->w[slot];
        if (p->recipe == GR_FMA) acc = fmaf(xv, w, acc);
        else if (p->recipe == GR_MULADD) acc = GR_ADD(acc, GR_MUL(xv, w));
        else gr_xacc_add(&xs, (double)xv * (double)w); /* 8 + 24 bits: exact in double */
    }
    const int64_t o = t * p->H + d;
    if (p->recipe == GR_EXACT) {
        if (!gr_xacc_exact(&xs)) return GR_INEXACT;
        if (p->out_bf16) ((uint16_t *)p->out)[o] = gr_bf16_from_double(xs.h);
        else ((float *)p->out)[o] = (float)xs.h; /* one rounding of the exact sum */
        return 0;
    }
    if (p->out_bf16) ((uint16_t *)p->out)[o] = gr_bf16_from_f32(acc);
    else ((float *)p->out)[o] = acc;
    return acc != acc ? GR_NAN : 0;
}

/* ---- fp4_gemm exact_v1 (ref/fp4_gemm.c, ref/exact.c moects__exact_store) ---- */
typedef struct {
    int64_t M, N, K;
    int nv, swz, out_bf16; /* NVFP4 (else MXFP4), swizzled 128x4 scales (else linear), BF16 out */
    const uint8_t *a, *b, *sa, *sb;
    float alpha;
    void *d;
} gr_fg;

GR_HD double gr_e2m1(unsigned c)
{
    const double mag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
    return (c & 8u) ? -mag[c & 7u] : mag[c & 7u];
}
/* A block scale as the reference decodes it: UE8M0 2^(x-127) (0xFF NaN) or E4M3 (ref/e4m3.c). */
GR_HD double gr_scale(int nv, uint8_t x)
{
    if (!nv) return x == 0xFFu ? (double)NAN : ldexp(1.0, (int)x - 127);
    unsigned e = (x >> 3) & 0xFu, m = x & 7u;
    if (e == 0xFu && m == 7u) return (double)NAN;
    double v = e == 0 ? ldexp((double)m, -9) : ldexp((double)(8u + m), (int)e - 10);
    return (x & 0x80u) ? -v : v;
}
/* Byte of scale (row r, K-block kb) of nkb blocks: linear or the 128x4 tile layout (DESIGN.md). */
GR_HD int64_t gr_scale_at(int swz, int64_t r, int64_t kb, int64_t nkb)
{
    if (!swz) return r * nkb + kb;
    return ((r / 128) * ((nkb + 3) / 4) + kb / 4) * 512 + (r % 32) * 16 + ((r / 32) % 4) * 4 + kb % 4;
}

/* exact_v1's store (ref/exact.c moects__exact_store's fast path, lemma 2): the exact sum xs times alpha,
 * rounded once into d[o]; GR_INEXACT when either step is not proven exact. */
GR_HD unsigned gr_exact_out(const gr_xacc *xs, float alpha, int out_bf16, void *d, int64_t o)
{
    if (!gr_xacc_exact(xs)) return GR_INEXACT;
    const double h = xs->h, al = (double)alpha, pr = h * al;
    if (!isfinite(pr) || fma(h, al, -pr) != 0.0 || (pr != 0.0 && fabs(pr) < 0x1p-1000)) return GR_INEXACT;
    if (out_bf16) ((uint16_t *)d)[o] = gr_bf16_from_double(pr);
    else ((float *)d)[o] = pr == 0.0 ? 0.0f : (float)pr; /* an exact zero is +0 */
    return 0;
}

/* One FP4 x FP4 exact_v1 output (ref/fp4_gemm.c's job, shared by fp4_gemm and moe_gemm): A's row ar and
 * B's row br (E2M1 codes, K of them), their scales at sa + gr_scale_at(swa, ra, kb, nkb) and
 * sb + gr_scale_at(swb, rb, kb, nkb), alpha; d[o] written when exact, its flags returned. */
GR_HD unsigned gr_fp4_elem(int nv, int swa, int swb, int out_bf16, int64_t K, const uint8_t *ar, const uint8_t *br,
                           const uint8_t *sa, int64_t ra, const uint8_t *sb, int64_t rb, float alpha, void *d,
                           int64_t o)
{
    const int64_t g = nv ? 16 : 32, nkb = (K + g - 1) / g;
    int nan = 0;
    gr_xacc xs;
    gr_xacc_init(&xs);
    for (int64_t kb = 0; kb < nkb; kb++) {
        const double sav = gr_scale(nv, sa[gr_scale_at(swa, ra, kb, nkb)]);
        const double sbv = gr_scale(nv, sb[gr_scale_at(swb, rb, kb, nkb)]);
        if (sav != sav || sbv != sbv) nan = 1;
        double part = 0.0; /* quarter multiples below 2^11: exact in any order */
        for (int64_t k = kb * g; k < K && k < (kb + 1) * g; k++) {
            const unsigned ca = (ar[k / 2] >> ((k & 1) * 4)) & 15u, cb = (br[k / 2] >> ((k & 1) * 4)) & 15u;
            part += gr_e2m1(ca) * gr_e2m1(cb);
        }
        if (!nan) gr_xacc_add(&xs, part * (sav * sbv)); /* at most 21 significant bits: exact */
    }
    if (nan) { /* every output a NaN scale touches is NaN (canonical quiet NaN, as the reference) */
        if (out_bf16) ((uint16_t *)d)[o] = 0x7FC0u;
        else ((float *)d)[o] = gr_from32(0x7FC00000u);
        return 0;
    }
    return gr_exact_out(&xs, alpha, out_bf16, d, o);
}

/* base + off, NULL staying NULL (K = 0 cases may pass no operands). */
GR_HD const uint8_t *gr_at(const uint8_t *base, int64_t off) { return base ? base + off : base; }

/* Output (m, n) under exact_v1: written when exact, its flags returned. */
GR_HD unsigned gr_fg_elem(const gr_fg *p, int64_t m, int64_t n)
{
    const int64_t rb = (p->K + 1) / 2;
    return gr_fp4_elem(p->nv, p->swz, p->swz, p->out_bf16, p->K, gr_at(p->a, m * rb), gr_at(p->b, n * rb), p->sa, m,
                       p->sb, n, p->alpha, p->d, m * p->N + n);
}

/* ---- moe_gemm exact_v1, MXFP4 and NVFP4 (ref/moe_gemm.c: each valid row's run is fp4_gemm's job) ---- */
typedef struct {
    int64_t rows, N, K, sb_bytes; /* rows of A and D; one expert's B scale bytes */
    int nv, swz, out_bf16, a_swz;  /* B NVFP4 (else MXFP4); a_swz: FP4 A's scales swizzled (offsets: linear) */
    int wxa, a16, a_f32;           /* W4A8 (E4M3 A) or W4A16 (BF16 A, a16); W4A8's A scales FP32 (else UE8M0) */
    int64_t asb;                   /* W4A8: K columns per A scale (32 or 128) */
    const int32_t *row_e;          /* [rows] the row's expert, -1 not valid (not written) */
    const int64_t *sa_base;        /* [rows] the byte offset of the row's A scale tensor (masked: per expert) */
    const int64_t *sa_row;         /* [rows] the row's index in that tensor */
    const uint8_t *a, *b, *sa, *sb; /* A: E2M1 codes, E4M3 bytes or BF16 (as bytes) */
    const float *alpha;            /* [E] or NULL (1) */
    void *d;
} gr_mg;

/* W4A8 / W4A16 (ref/wxa_gemm.c exact_v1): every term dec(A) dec(B) (sA sB) exact in double (at most
 * 6 + 2 and 24 + 4 significant bits, in [2^-286, 2^258]), their FP64 sum proven exact (lemma 1), then
 * alpha. A NaN or Inf scale or term: GR_INEXACT (the CPU decides its NaN). */
GR_HD unsigned gr_wxa_elem(const gr_mg *p, int64_t r, int64_t e, int64_t n)
{
    const int64_t g = p->a16 ? (p->nv ? 16 : 32) : 32, nkb = (p->K + g - 1) / g, rb = (p->K + 1) / 2;
    const int64_t nsa = p->a16 ? 0 : (p->K + p->asb - 1) / p->asb; /* W4A16: no A scales */
    const uint8_t *br = p->b + (e * p->N + n) * rb, *sb = p->sb + e * p->sb_bytes;
    gr_xacc xs;
    gr_xacc_init(&xs);
    for (int64_t kb = 0; kb < nkb; kb++) {
        double sa = 1.0;
        if (!p->a16 && p->a_f32) {
            float f;
            memcpy(&f, p->sa + (r * nsa + kb * 32 / p->asb) * 4, 4);
            sa = f;
        } else if (!p->a16) {
            sa = gr_scale(0, p->sa[r * nsa + kb * 32 / p->asb]);
        }
        const double s = sa * gr_scale(p->nv, sb[gr_scale_at(p->swz, n, kb, nkb)]);
        if (!isfinite(s)) return GR_INEXACT;
        for (int64_t k = kb * g; k < p->K && k < (kb + 1) * g; k++) {
            const double av = p->a16 ? (double)gr_bf16_to_f32(((const uint16_t *)p->a)[r * p->K + k])
                                     : gr_scale(1, p->a[r * p->K + k]);
            gr_xacc_add(&xs, av * gr_e2m1((br[k / 2] >> ((k & 1) * 4)) & 15u) * s);
        }
    }
    return gr_exact_out(&xs, p->alpha ? p->alpha[e] : 1.0f, p->out_bf16, p->d, r * p->N + n);
}

/* Output (r, n): written when the row is valid and the element exact, its flags returned. */
GR_HD unsigned gr_mg_elem(const gr_mg *p, int64_t r, int64_t n)
{
    const int64_t e = p->row_e[r], rb = (p->K + 1) / 2;
    if (e < 0) return 0;
    if (p->wxa) return gr_wxa_elem(p, r, e, n);
    const uint8_t *ar = gr_at(p->a, r * rb), *br = gr_at(p->b, (e * p->N + n) * rb);
    return gr_fp4_elem(p->nv, p->a_swz, p->swz, p->out_bf16, p->K, ar, br,
                       gr_at(p->sa, p->sa_base[r]), p->sa_row[r], gr_at(p->sb, e * p->sb_bytes), n,
                       p->alpha ? p->alpha[e] : 1.0f, p->d, r * p->N + n);
}
#endif
