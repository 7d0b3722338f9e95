/* derive.c: kernel cases of one model under every TP/EP layout (DESIGN.md "Cases", "Derivation").
 *
 * vLLM's rules. K = the routed experts' input width: the latent width for latent MoE, else
 * hidden_size; TP never divides it. I = moe_intermediate_size.
 *   TP t in {1,2,4,8,16}, when I % t == 0 (else the layout does not exist): every rank holds all E
 *     experts with I/t each: gemm1 [M, N = 2I/t (I/t non-gated), K], gemm2 [M, N = K, K' = I/t],
 *     ep_gather [T, H = K] with no expert_map.
 *   EP e in {2,4,8,16,32,64}, when e <= E: the rank holds E/e whole experts (the first E%e ranks one
 *     more), expert_map has -1 for the others, I is not divided.
 * M of a GEMM case is the token count of one expert. moe_gemm cases: cases/derive_moe.c; fused_moe
 * cases: cases/derive_fused.c.
 *
 * Ids: ep_gather/<model>/<layout>/t<T>[/<variant>]
 *      fp4_gemm.<mxfp4|nvfp4>/<model>/<layout>/<gemm1|gemm2>/m<M>[/<variant>]
 * Variants: skewed, zero-expert, hot-rank, last-rank, neg-ids, stale-ids, no-local, i64, f32-out,
 * adversarial, nan, swizzled. Ids depend only on the model's dims and these tables: changing a
 * table changes the suite (say so in the commit).
 *
 * Budget (the full tier must run in ~8 min on an H200 host with a 16-core CPU reference; the smoke
 * tier in a few minutes on 2 CPU cores, every CPU stand-in kernel and mutant included):
 * - FP4 GEMM cost is 2*M*N*K FLOPs (the reference's sgemm block partials, plus M*N*K/g scale FMAs)
 *   and (M+N)*K generated codes. Full tier: M up to 1024 on every layout but ep2/ep4/ep16..ep64
 *   (whose shapes repeat tp1's: M <= 200 there), M = 4096 only at tp8 and ep8. Total over the 23
 *   models: 9.0e13 FLOPs (+1.6e12 in regressions), under the 5e14 ceiling (~1 TFLOP/s of 16-core
 *   sgemm: ~1.5 min), and 1.6e11 generated codes. Smoke: M in {1, 16}, 2.5e10 FLOPs in all
 *   (grok-1 tp8 gemm1, 16 x 8192 x 6144, is the largest case).
 * - ep_gather costs T*k_local*H FMAs and M_sum*H*2 bytes of x. Full tier: T up to 4096 on
 *   every layout, 8192 at tp8/ep8: 2.8e10 FMAs in all. Smoke: T = 16 (+ one T = 64 EP case). */
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"
#include "moects_cases.h"

static const int TP_SIZES[] = {1, 2, 4, 8, 16};
static const int EP_SIZES[] = {2, 4, 8, 16, 32, 64};
static const int64_t T_FULL[] = {1, 2, 16, 64, 128, 512, 4096}; /* + 8192 at tp8, ep8 */
static const int64_t M_FULL[] = {1, 16, 100, 128, 200, 256, 1024}; /* + 4096 at tp8, ep8 */
static const int64_t M_EP_WIDE[] = {1, 16, 100, 200};           /* ep16..ep64 (and ep2/ep4) */
#define T_SMOKE 16
#define M_SMOKE 16
#define SMOKE_EP_WEIGHTS (1LL << 26) /* gemm1 B elements above which smoke uses tp16, not ep8 */
#define FUSED_SMOKE_EP_WEIGHTS (1LL << 24) /* fused_moe: an expert's weights up to which smoke has EP too */

typedef struct {
    char name[16];
    int tp, ep;
    int64_t I; /* the rank's share of moe_intermediate_size */
} layout;

typedef struct {
    const moects_model *m;
    moects_case_list *out;
    int64_t K;
    int rc;
} deriver;

static void push(deriver *d, moects_case *c, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void push(deriver *d, moects_case *c, const char *fmt, ...)
{
    if (d->rc) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(c->id, sizeof c->id, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof c->id || moects__case_list_push(d->out, c)) d->rc = -1;
}

static moects_case base_case(const deriver *d, const layout *L, moects_op op)
{
    moects_case c;
    memset(&c, 0, sizeof c);
    moects__copy(c.model, sizeof c.model, d->m->name);
    moects__copy(c.layout, sizeof c.layout, L->name);
    snprintf(c.source, sizeof c.source, "%s%s%s%s", d->m->name, d->m->hf_id[0] ? " (" : "", d->m->hf_id,
             d->m->hf_id[0] ? ")" : "");
    c.op = op;
    c.tiers = MOECTS_TIER_FULL;
    c.data = MOECTS_DATA_EXACT;
    c.out_dtype = MOECTS_BF16;
    return c;
}

static moects_case gather_case(const deriver *d, const layout *L, int64_t T)
{
    moects_case c = base_case(d, L, MOECTS_OP_EP_GATHER);
    c.T = T;
    c.k = d->m->experts_per_token;
    c.H = d->K;
    c.E_global = d->m->routed_experts;
    c.ep_size = L->ep ? L->ep : 1;
    c.ep_rank = 0;
    c.has_map = L->ep > 1;
    c.id_dtype = MOECTS_I32;
    c.routing = MOECTS_ROUTE_UNIFORM;
    return c;
}

/* A variant case: the plain case at T (ep_gather) or M (fp4_gemm), then the fields it sets (a zero
 * field keeps the plain case's value); id <plain id>/<name>. */
typedef struct {
    int64_t n;
    const char *name;
    moects_routing routing;
    moects_dtype id_dtype, out_dtype;
    moects_data data;
    moects_scale_layout scale_layout;
    int last_rank; /* ep_rank = ep - 1: holds the fewer experts when E % e != 0 */
    int smoke;     /* in the smoke tier (ep_gather: on the smoke EP layout only) */
    int g2_only;   /* fp4_gemm: gemm2 only */
} variant;

static const variant GATHER_ALL[] = {{128, "skewed", .routing = MOECTS_ROUTE_SKEWED}};
static const variant GATHER_EP[] = {
    {64, "skewed", .routing = MOECTS_ROUTE_SKEWED, .smoke = 1},
    {128, "zero-expert", .routing = MOECTS_ROUTE_ZERO_EXPERT},
    {64, "hot-rank", .routing = MOECTS_ROUTE_ONE_EXPERT},
    {128, "last-rank", .last_rank = 1},
};
static const variant GATHER_EP8[] = {
    {4096, "skewed", .routing = MOECTS_ROUTE_SKEWED},
    {128, "i64", .id_dtype = MOECTS_I64},
    {128, "stale-ids", .routing = MOECTS_ROUTE_STALE_IDS},
    {16, "no-local", .routing = MOECTS_ROUTE_NO_LOCAL},
};
static const variant GATHER_TP1[] = {
    {128, "neg-ids", .routing = MOECTS_ROUTE_NEG_IDS},
    {128, "i64", .id_dtype = MOECTS_I64},
    {128, "f32-out", .out_dtype = MOECTS_F32},
    {128, "adversarial", .data = MOECTS_DATA_ADVERSARIAL},
};
static const variant GEMM_TP8[] = {
    {100, "swizzled", .scale_layout = MOECTS_SCALES_SWIZZLED_128X4},
    {M_SMOKE, "swizzled", .scale_layout = MOECTS_SCALES_SWIZZLED_128X4, .smoke = 1, .g2_only = 1},
    {128, "f32-out", .out_dtype = MOECTS_F32, .g2_only = 1},
    {16, "nan", .data = MOECTS_DATA_NAN, .g2_only = 1},
    {100, "adversarial", .data = MOECTS_DATA_ADVERSARIAL},
};
static const variant GEMM_EP8[] = {{128, "swizzled", .scale_layout = MOECTS_SCALES_SWIZZLED_128X4}};
#define VARIANTS(t) t, sizeof t / sizeof *t

/* Sets the fields variant v changes on its plain case c; smoke_ok: whether v->smoke applies. */
static void set_variant(moects_case *c, const variant *v, const layout *L, int smoke_ok)
{
    if (v->routing) c->routing = v->routing;
    if (v->id_dtype) c->id_dtype = v->id_dtype;
    if (v->out_dtype) c->out_dtype = v->out_dtype;
    if (v->data) c->data = v->data;
    if (v->scale_layout) c->scale_layout = v->scale_layout;
    if (v->last_rank) c->ep_rank = L->ep - 1;
    if (v->smoke && smoke_ok) c->tiers |= MOECTS_TIER_SMOKE;
}

static void push_gather_variants(deriver *d, const layout *L, int smoke_ep, const variant *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        moects_case c = gather_case(d, L, v[i].n);
        set_variant(&c, &v[i], L, smoke_ep);
        push(d, &c, "ep_gather/%s/%s/t%lld/%s", d->m->name, L->name, (long long)v[i].n, v[i].name);
    }
}

static void gather_cases(deriver *d, const layout *L, int smoke_ep)
{
    const char *mn = d->m->name, *ln = L->name;
    int big = (L->tp == 8 || L->ep == 8);
    for (size_t i = 0; i < sizeof T_FULL / sizeof *T_FULL + (size_t)big; i++) {
        int64_t T = i < sizeof T_FULL / sizeof *T_FULL ? T_FULL[i] : 8192;
        moects_case c = gather_case(d, L, T);
        if (T == T_SMOKE) c.tiers |= MOECTS_TIER_SMOKE;
        push(d, &c, "ep_gather/%s/%s/t%lld", mn, ln, (long long)T);
    }
    push_gather_variants(d, L, smoke_ep, VARIANTS(GATHER_ALL));
    if (L->ep) push_gather_variants(d, L, smoke_ep, VARIANTS(GATHER_EP));
    if (L->ep == 8) push_gather_variants(d, L, smoke_ep, VARIANTS(GATHER_EP8));
    if (L->tp == 1) push_gather_variants(d, L, smoke_ep, VARIANTS(GATHER_TP1));
}

static const char *fmt_name(moects_fp4_format f) { return f == MOECTS_FP4_NVFP4 ? "nvfp4" : "mxfp4"; }

static moects_case gemm_case(const deriver *d, const layout *L, moects_fp4_format f, int g2, int64_t M)
{
    moects_case c = base_case(d, L, MOECTS_OP_FP4_GEMM);
    c.M = M;
    c.N = g2 ? d->K : (d->m->gated ? 2 : 1) * L->I;
    c.K = g2 ? L->I : d->K;
    c.format = f;
    c.scale_layout = MOECTS_SCALES_LINEAR;
    moects__copy(c.gemm, sizeof c.gemm, g2 ? "gemm2" : "gemm1");
    return c;
}

static void push_gemm_variants(deriver *d, const layout *L, moects_fp4_format f, int g2, const variant *v,
                               size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (v[i].g2_only && !g2) continue;
        moects_case c = gemm_case(d, L, f, g2, v[i].n);
        set_variant(&c, &v[i], L, 1);
        push(d, &c, "fp4_gemm.%s/%s/%s/%s/m%lld/%s", fmt_name(f), d->m->name, L->name, g2 ? "gemm2" : "gemm1",
             (long long)v[i].n, v[i].name);
    }
}

/* smoke_m: the M that this layout contributes to the smoke tier (0: none). */
static void gemm_cases(deriver *d, const layout *L, int64_t smoke_m)
{
    const int64_t *Ms = M_FULL;
    size_t nM = sizeof M_FULL / sizeof *M_FULL;
    if (L->ep && L->ep != 8) {
        Ms = M_EP_WIDE;
        nM = sizeof M_EP_WIDE / sizeof *M_EP_WIDE;
    }
    int big = (L->tp == 8 || L->ep == 8);
    const char *mn = d->m->name, *ln = L->name;
    for (int fi = 0; fi < 2; fi++) {
        moects_fp4_format f = fi ? MOECTS_FP4_NVFP4 : MOECTS_FP4_MXFP4;
        const char *fn = fmt_name(f);
        for (int g2 = 0; g2 < 2; g2++) {
            const char *gn = g2 ? "gemm2" : "gemm1";
            int smoke_done = 0;
            for (size_t i = 0; i < nM + (size_t)big; i++) {
                int64_t M = i < nM ? Ms[i] : 4096;
                moects_case c = gemm_case(d, L, f, g2, M);
                if (M == smoke_m) {
                    c.tiers |= MOECTS_TIER_SMOKE;
                    smoke_done = 1;
                }
                push(d, &c, "fp4_gemm.%s/%s/%s/%s/m%lld", fn, mn, ln, gn, (long long)M);
            }
            if (smoke_m && !smoke_done) {
                moects_case c = gemm_case(d, L, f, g2, smoke_m);
                c.tiers |= MOECTS_TIER_SMOKE;
                push(d, &c, "fp4_gemm.%s/%s/%s/%s/m%lld", fn, mn, ln, gn, (long long)smoke_m);
            }
            if (L->tp == 8) push_gemm_variants(d, L, f, g2, VARIANTS(GEMM_TP8));
            if (L->ep == 8) push_gemm_variants(d, L, f, g2, VARIANTS(GEMM_EP8));
        }
    }
}

/* moe_gemm cases of layout L (cases/derive_moe.c); grid: the layout carries the full grid. */
static void moe_cases(deriver *d, const layout *L, int grid, int smoke)
{
    if (d->rc) return;
    moects_case base = base_case(d, L, MOECTS_OP_MOE_GEMM);
    if (moects__derive_moe_cases(d->m, &base, L->tp, L->ep, L->I, grid, smoke, d->out)) d->rc = -1;
}

/* moe_route cases, once a model: the router is replicated on every rank (cases/derive_route.c). */
static void route_cases(deriver *d)
{
    const layout none = {"-", 0, 0, 0};
    if (d->rc) return;
    moects_case base = base_case(d, &none, MOECTS_OP_MOE_ROUTE);
    if (moects__derive_route_cases(d->m, &base, d->out)) d->rc = -1;
}

/* fused_moe cases of layout L (cases/derive_fused.c). */
static void fused_cases(deriver *d, const layout *L, int grid, int smoke)
{
    if (d->rc) return;
    moects_case base = base_case(d, L, MOECTS_OP_FUSED_MOE);
    if (moects__derive_fused_cases(d->m, &base, L->tp, L->ep, L->I, grid, smoke, d->out)) d->rc = -1;
}

/* ep_dispatch_combine cases of layout L (cases/derive_dispatch.c: EP 2, 4 and 8). */
static void dispatch_cases(deriver *d, const layout *L)
{
    if (d->rc) return;
    moects_case base = base_case(d, L, MOECTS_OP_EP_DISPATCH_COMBINE);
    if (moects__derive_dispatch_cases(d->m, &base, L->ep, d->out)) d->rc = -1;
}

/* "1, 2, 4, 8, 16": a size table for a message. */
static void sizes_text(char *dst, size_t cap, const int *v, size_t n)
{
    size_t used = 0;
    dst[0] = '\0';
    for (size_t i = 0; i < n && used < cap; i++) {
        int w = snprintf(dst + used, cap - used, "%s%d", i ? ", " : "", v[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
}

int moects__layout_exists(const moects_model *m, int tp, int ep, char *why, size_t whylen)
{
    char sizes[64], scratch[160];
    if (!why || !whylen) {
        why = scratch;
        whylen = sizeof scratch;
    }
    if (!m || (tp > 0) == (ep > 0) || tp < 0 || ep < 0) {
        snprintf(why, whylen, "a layout is TP t or EP e, one size > 0");
        return 0;
    }
    if (tp) {
        if (m->moe_intermediate_size < 1 || m->moe_intermediate_size % tp) {
            snprintf(why, whylen, "the expert width %lld (moe_intermediate_size, or intermediate_size where a "
                     "config has none) is not divisible by %d",
                     (long long)m->moe_intermediate_size, tp);
            return 0;
        }
        for (size_t i = 0; i < sizeof TP_SIZES / sizeof *TP_SIZES; i++)
            if (TP_SIZES[i] == tp) return 1;
        sizes_text(sizes, sizeof sizes, TP_SIZES, sizeof TP_SIZES / sizeof *TP_SIZES);
        snprintf(why, whylen, "the derivation's TP sizes are %s", sizes);
        return 0;
    }
    if (ep > m->routed_experts) {
        snprintf(why, whylen, "more EP ranks than the %lld routed experts", (long long)m->routed_experts);
        return 0;
    }
    for (size_t i = 0; i < sizeof EP_SIZES / sizeof *EP_SIZES; i++)
        if (EP_SIZES[i] == ep) return 1;
    sizes_text(sizes, sizeof sizes, EP_SIZES, sizeof EP_SIZES / sizeof *EP_SIZES);
    snprintf(why, whylen, "the derivation's EP sizes are %s%s", sizes, ep == 1 ? " (EP 1 is tp1)" : "");
    return 0;
}

int moects__derive_cases(const moects_model *m, moects_case_list *out)
{
    if (!m || !out || m->hidden_size < 1 || m->moe_intermediate_size < 1 || m->routed_experts < 2 ||
        m->experts_per_token < 1 || m->experts_per_token > m->routed_experts || m->latent_size < 0 || !m->name[0])
        return -1;
    deriver d = {m, out, m->latent_size > 0 ? m->latent_size : m->hidden_size, 0};
    const int64_t I = m->moe_intermediate_size, E = m->routed_experts;
    /* Smoke GEMM layouts: tp8 (or the largest TP there is) at M = 16, and one more at M = 1: ep8 unless one expert's gemm1
     * weights are large (grok-1, mixtral, dbrx...), then the largest TP other than tp8. */
    int smoke_tp1 = 1; /* tp8, or the largest TP dividing I */
    for (size_t i = 0; i < sizeof TP_SIZES / sizeof *TP_SIZES; i++)
        if (I % TP_SIZES[i] == 0 && smoke_tp1 != 8) smoke_tp1 = TP_SIZES[i];
    int smoke_ep8 = E >= 8 && (m->gated ? 2 : 1) * I * d.K <= SMOKE_EP_WEIGHTS;
    int smoke_tp2 = 0;
    if (!smoke_ep8)
        for (int i = (int)(sizeof TP_SIZES / sizeof *TP_SIZES) - 1; i >= 0 && !smoke_tp2; i--)
            if (TP_SIZES[i] != smoke_tp1 && I % TP_SIZES[i] == 0) smoke_tp2 = TP_SIZES[i];
    /* The smoke ep_gather EP case: ep8, or the largest EP when E < 8. */
    int smoke_gather_ep = 0;
    for (size_t i = 0; i < sizeof EP_SIZES / sizeof *EP_SIZES; i++)
        if (EP_SIZES[i] <= E && (smoke_gather_ep != 8)) smoke_gather_ep = EP_SIZES[i];

    /* moe_gemm: the smoke case sits on the layout whose local experts hold the fewest weights */
    int64_t least_w = -1;
    int smoke_moe_tp = 0, smoke_moe_ep = 0;
    for (size_t i = 0; i < sizeof TP_SIZES / sizeof *TP_SIZES + sizeof EP_SIZES / sizeof *EP_SIZES; i++) {
        int t = i < sizeof TP_SIZES / sizeof *TP_SIZES ? TP_SIZES[i] : 0;
        int e = t ? 0 : EP_SIZES[i - sizeof TP_SIZES / sizeof *TP_SIZES];
        if (!moects__layout_exists(m, t, e, NULL, 0)) continue;
        int64_t w = (e ? moects__ep_local_experts(E, e, 0, NULL) : E) * (t ? I / t : I);
        if (least_w < 0 || w < least_w) least_w = w, smoke_moe_tp = t, smoke_moe_ep = e;
    }
    int fused_smoke_tp = 1; /* fused_moe: the largest TP, the fewest products a slot */
    for (size_t i = 0; i < sizeof TP_SIZES / sizeof *TP_SIZES; i++)
        if (I % TP_SIZES[i] == 0) fused_smoke_tp = TP_SIZES[i];
    for (size_t i = 0; i < sizeof TP_SIZES / sizeof *TP_SIZES; i++) {
        int t = TP_SIZES[i];
        if (!moects__layout_exists(m, t, 0, NULL, 0)) continue;
        layout L = {"", t, 0, I / t};
        snprintf(L.name, sizeof L.name, "tp%d", t);
        gather_cases(&d, &L, 0);
        gemm_cases(&d, &L, t == smoke_tp1 ? M_SMOKE : (t == smoke_tp2 ? 1 : 0));
        moe_cases(&d, &L, t == smoke_tp1, t == smoke_moe_tp);
        fused_cases(&d, &L, t == smoke_tp1, t == fused_smoke_tp);
    }
    for (size_t i = 0; i < sizeof EP_SIZES / sizeof *EP_SIZES; i++) {
        int e = EP_SIZES[i];
        if (!moects__layout_exists(m, 0, e, NULL, 0)) continue;
        layout L = {"", 0, e, I};
        snprintf(L.name, sizeof L.name, "ep%d", e);
        gather_cases(&d, &L, e == smoke_gather_ep);
        gemm_cases(&d, &L, (e == 8 && smoke_ep8) ? 1 : 0);
        moe_cases(&d, &L, e == 8, e == smoke_moe_ep);
        fused_cases(&d, &L, e == 8, e == smoke_gather_ep && 3 * I * d.K <= FUSED_SMOKE_EP_WEIGHTS);
        dispatch_cases(&d, &L);
    }
    route_cases(&d);
    return d.rc;
}
