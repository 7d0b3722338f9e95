/* test_harness_gentwin.c: the input generator's per-element twin (gpu/gpuref/gen_elem.h, the code the
 * device runs: gpu/cuda/gen_twin.cu) against harness/ops/'s generator, bit for bit (issue 31, item 2):
 * the stream keys and draws, each value draw under every data mode and format, and every tensor kind
 * as the op files build it in the registry's cases, a few of each (op, data mode, format, layouts) (ep_gather x rows, padding rows and weights;
 * fp4_gemm codes and scales; moe_gemm E4M3 and BF16 activations, FP32 activation scales and B codes),
 * built unpooled so that every element is the generator's. Expected values come from the built
 * tensors, never from the twin's own output. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gpuref/gen_elem.h"
#include "moects_cases.h"
#include "moects_gen.h"
#include "moects_inputs.h"
#include "moects_op.h"

/* harness/ops/inputs.c's value draws (declared in that room's ops_internal.h, which stays in the room) */
uint16_t moects__bf16_input(moects_data d, uint64_t u, int64_t col);
uint8_t moects__fp4_scale_code(moects_fp4_format f, moects_data d, uint64_t u);

#define NDRAWS 200000
#define SEED 1 /* moects run's default seed */
#define MAX_CASE_BYTES (8.0 * 1048576) /* registry cases up to this size (moects__op_def.bytes) */
#define PER_BUCKET 2                   /* cases per (op, data, format, row and scale layout, A scale type) */

Test(gentwin, numbering_matches_the_cases)
{
    cr_assert_eq(GE_DATA_EXACT, MOECTS_DATA_EXACT);
    cr_assert_eq(GE_DATA_ADVERSARIAL, MOECTS_DATA_ADVERSARIAL);
    cr_assert_eq(GE_DATA_NAN, MOECTS_DATA_NAN);
    cr_assert_eq(GE_DATA_NEGZERO, MOECTS_DATA_NEGZERO);
    cr_assert_eq(GE_MXFP4, MOECTS_FP4_MXFP4);
    cr_assert_eq(GE_NVFP4, MOECTS_FP4_NVFP4);
}

Test(gentwin, keys_and_draws)
{
    const char *ids[] = {"", "ep_gather/kimi-k3/tp8/t128", "fp4_gemm.mxfp4/deepseek-v3/ep8/gemm1/m256"};
    const char *names[] = {"x", "topk_weights", "a.row_offset", "sa"};
    const uint64_t seeds[] = {0, 1, 0x5eedull, ~0ull};
    for (int s = 0; s < 4; s++)
        for (int i = 0; i < 3; i++)
            for (int n = 0; n < 4; n++) {
                uint64_t k = moects__input_key(seeds[s], ids[i], names[n]);
                cr_assert_eq(ge_key(seeds[s], ids[i], names[n]), k);
                for (uint64_t j = 0; j < 1000; j++) cr_assert_eq(ge_u64(k, j * 977), moects__input_u64(k, j * 977));
            }
}

Test(gentwin, value_draws_under_every_mode)
{
    const uint64_t key = moects__input_key(7, "gentwin", "values");
    for (int d = 0; d < 4; d++)
        for (uint64_t i = 0; i < NDRAWS; i++) {
            const uint64_t u = moects__input_u64(key, i);
            cr_assert_eq(ge_bf16_input(d, u, (int64_t)(i % 13)), moects__bf16_input((moects_data)d, u, (int64_t)(i % 13)),
                         "bf16 mode %d draw %llu", d, (unsigned long long)i);
            for (int f = GE_MXFP4; f <= GE_NVFP4; f++)
                cr_assert_eq(ge_fp4_scale_code(f, d, u), moects__fp4_scale_code((moects_fp4_format)f, (moects_data)d, u),
                             "scale format %d mode %d draw %llu", f, d, (unsigned long long)i);
        }
}

/* The host twin over a whole stream equals its element function (the device runs the same loop). */
Test(gentwin, fill_host_is_the_element_code)
{
    unsigned char buf[8 * 64], one[8];
    for (int kind = 0; kind < GE_NKINDS; kind++) {
        moects_gen_stream s = {kind, GE_DATA_ADVERSARIAL, GE_NVFP4, 5, 42, 64};
        cr_assert_eq(moects__gen_fill_host(&s, buf), 0);
        const size_t es = moects__gen_elem_bytes(kind);
        for (uint64_t i = 0; i < 64; i++) {
            ge_elem(kind, 42, GE_DATA_ADVERSARIAL, GE_NVFP4, 5, i, one);
            cr_assert_eq(memcmp(buf + i * es, one, es), 0, "kind %d element %llu", kind, (unsigned long long)i);
        }
    }
    moects_gen_stream bad = {GE_NKINDS, 0, 0, 1, 0, 1};
    cr_assert_eq(moects__gen_fill_host(&bad, buf), -1);
}

/* ---- every tensor kind as the ops build it: the registry's cases, unpooled ---- */

/* 1 when case c is one of the first PER_BUCKET of its kind (op, data, formats, layouts, dtypes). */
static int take(const moects_case *c)
{
    static struct {
        uint64_t key;
        int n;
    } b[512];
    static int nb;
    const uint64_t key = ge_mix64(((uint64_t)c->op << 56) ^ ((uint64_t)c->data << 48) ^ ((uint64_t)c->format << 40) ^
                                  ((uint64_t)c->moe_format << 32) ^ ((uint64_t)c->rows << 24) ^
                                  ((uint64_t)c->scale_layout << 16) ^ ((uint64_t)c->a_scale_f32 << 8) ^ (uint64_t)c->routing);
    for (int i = 0; i < nb; i++)
        if (b[i].key == key) return b[i].n < PER_BUCKET ? ++b[i].n : 0;
    if (nb == 512) return 0;
    b[nb].key = key, b[nb++].n = 1;
    return 1;
}

static uint64_t key_of(const moects_case *c, const char *tensor) { return ge_key(SEED, c->id, tensor); }

/* ep_gather: rows of x that slots read (adversarial data: only each token's first valid slot, whose
 * row the cancellation never rewrites), padding rows (read by no slot), valid slots' weights. */
static size_t check_ep_gather(const moects_case *c, const moects_inputs *in)
{
    const int64_t H = in->eg.H, k = in->eg.k, T = in->eg.T, M = in->eg.M_sum;
    const uint16_t *x = in->t[MOECTS_EG_X].host;
    const float *w = in->t[MOECTS_EG_W].host;
    const int32_t *idx = in->t[MOECTS_EG_IDX].host;
    const uint64_t kx = key_of(c, "x"), kpad = key_of(c, "x.padding"), kw = key_of(c, "topk_weights");
    unsigned char *read = calloc((size_t)M + 1, 1);
    size_t n = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0, first = 1; j < k; j++) {
            const int64_t s = t * k + j, r = idx[s];
            if (r == INT32_MAX) continue;
            read[r] = 1;
            if (c->data == MOECTS_DATA_ADVERSARIAL && !first) continue;
            first = 0;
            float g = ge_weight(c->data, ge_u64(kw, (uint64_t)s), t);
            cr_assert_eq(memcmp(&g, &w[s], 4), 0, "%s: weight of slot %lld", c->id, (long long)s);
            for (int64_t d = 0; d < H; d++, n++)
                cr_assert_eq(ge_bf16_input(c->data, ge_u64(kx, (uint64_t)(r * H + d)), d), x[r * H + d],
                             "%s: x[%lld][%lld]", c->id, (long long)r, (long long)d);
        }
    for (int64_t r = 0; r < M; r++)
        for (int64_t d = 0; !read[r] && d < H; d++, n++)
            cr_assert_eq(ge_pad(ge_u64(kpad, (uint64_t)(r * H + d))), x[r * H + d], "%s: padding x[%lld][%lld]", c->id,
                         (long long)r, (long long)d);
    free(read);
    return n;
}

/* fp4_gemm: A and B codes (the last byte of a row of odd K has its top nibble set), linear scales of
 * exact and NaN data (adversarial and negzero data rewrite some rows). */
static size_t check_fp4_gemm(const moects_case *c, const moects_inputs *in)
{
    const moects_fp4_gemm_shape *s = &in->fg;
    const int64_t kbytes = (s->K + 1) / 2, rows[2] = {s->M, s->N}, nkb = (s->K + moects_fp4_block(s->format) - 1) / moects_fp4_block(s->format);
    const char *names[2] = {"a", "b"}, *snames[2] = {"sa", "sb"};
    size_t n = 0;
    if (c->data == MOECTS_DATA_ADVERSARIAL || c->data == MOECTS_DATA_NEGZERO) return 0;
    for (int o = 0; o < 2; o++) {
        const uint8_t *p = in->t[o == 0 ? MOECTS_FG_A : MOECTS_FG_B].host;
        const uint64_t key = key_of(c, names[o]), ks = key_of(c, snames[o]);
        for (int64_t i = 0; i < rows[o] * kbytes; i++, n++)
            if (!(s->K % 2 && i % kbytes == kbytes - 1))
                cr_assert_eq(ge_fp4_byte(key, (uint64_t)i), p[i], "%s: %s byte %lld", c->id, names[o], (long long)i);
        if (s->scale_layout != MOECTS_SCALES_LINEAR) continue;
        const uint8_t *sc = in->t[o == 0 ? MOECTS_FG_SA : MOECTS_FG_SB].host;
        for (int64_t i = 0; i < rows[o] * nkb; i++, n++)
            cr_assert_eq(ge_fp4_scale_code(s->format, c->data, ge_u64(ks, (uint64_t)i)), sc[i], "%s: %s[%lld]", c->id,
                         snames[o], (long long)i);
    }
    return n;
}

/* moe_gemm (contiguous rows, not adversarial: its A and B get zero and cancelling blocks): valid rows
 * of A as E4M3 (W4A8) or BF16 (W4A16), W4A8's FP32 scales, B's codes (even K). NaN data draws A as
 * exact data (its NaNs sit in expert 0's B scales). */
static size_t check_moe_gemm(const moects_case *c, const moects_inputs *in)
{
    const moects_moe_gemm_shape *s = &in->mg;
    const int d = c->data == MOECTS_DATA_NAN ? MOECTS_DATA_EXACT : c->data;
    size_t n = 0;
    if (c->data == MOECTS_DATA_ADVERSARIAL || s->rows != MOECTS_ROWS_CONTIGUOUS) return 0;
    const uint64_t ka = key_of(c, "a"), ks = key_of(c, "sa"), kb = key_of(c, "b");
    const int64_t K = s->K, nkb = s->format == MOECTS_MOE_W4A8 ? (K + s->a_scale_block - 1) / s->a_scale_block : 0;
    const uint8_t *a = in->t[MOECTS_MG_A].host;
    for (int64_t r = 0; r < in->rows; r++) {
        if (!in->row_valid[r]) continue;
        for (int64_t i = 0; s->format == MOECTS_MOE_W4A8 && i < K; i++, n++)
            cr_assert_eq(ge_e4m3(d, ge_u64(ka, (uint64_t)(r * K + i))), a[r * K + i], "%s: a[%lld][%lld]", c->id,
                         (long long)r, (long long)i);
        for (int64_t i = 0; s->format == MOECTS_MOE_W4A16 && i < K; i++, n++) {
            uint16_t v;
            memcpy(&v, a + 2 * (r * K + i), 2);
            cr_assert_eq(ge_bf16_input(d, ge_u64(ka, (uint64_t)(r * K + i)), i), v, "%s: a[%lld][%lld]", c->id,
                         (long long)r, (long long)i);
        }
        for (int64_t b = 0; s->format == MOECTS_MOE_W4A8 && s->a_scale_f32 && b < nkb; b++, n++) {
            float g = ge_f32_scale(d, ge_u64(ks, (uint64_t)(r * nkb + b))), v;
            memcpy(&v, (const uint8_t *)in->t[MOECTS_MG_SA].host + 4 * (r * nkb + b), 4);
            cr_assert_eq(memcmp(&g, &v, 4), 0, "%s: sa[%lld][%lld]", c->id, (long long)r, (long long)b);
        }
    }
    const uint8_t *bb = in->t[MOECTS_MG_B].host;
    for (size_t i = 0; K % 2 == 0 && i < in->t[MOECTS_MG_B].bytes; i++, n++)
        cr_assert_eq(ge_fp4_byte(kb, i), bb[i], "%s: b byte %zu", c->id, i);
    return n;
}

Test(gentwin, every_tensor_kind_of_the_registry_cases, .timeout = 600)
{
    moects_case_list all = {0};
    char err[512] = "";
    cr_assert_eq(moects__cases_builtin(MOECTS_SOURCE_DIR, &all, err, sizeof err), 0, "%s", err);
    size_t checked[3] = {0}, cases = 0, kinds = 0;
    int seen[8] = {0}; /* 0 x, 1 padding, 2 weights, 3 codes, 4 scales, 5 e4m3, 6 bf16 A, 7 f32 scales */
    moects_case f32; /* the registry's W4A8 cases with FP32 A scales are all big: a small one made so */
    f32.id[0] = '\0';
    for (size_t i = 0; i <= all.n; i++) {
        const moects_case *c = &all.v[i];
        if (i == all.n) {
            if (seen[7] || !f32.id[0]) break;
            c = &f32;
        } else if (c->op == MOECTS_OP_MOE_GEMM && c->moe_format == MOECTS_MOE_W4A8 && c->rows == MOECTS_ROWS_CONTIGUOUS &&
                   !c->a_scale_f32 && c->data != MOECTS_DATA_ADVERSARIAL && moects__op(c->op)->bytes(c) <= MAX_CASE_BYTES) {
            f32 = *c, f32.a_scale_f32 = 1;
            snprintf(f32.id, sizeof f32.id, "moe_gemm.w4a8/gentwin/a-f32");
        }
        const int op = c->op == MOECTS_OP_EP_GATHER ? 0 : c->op == MOECTS_OP_FP4_GEMM ? 1 : c->op == MOECTS_OP_MOE_GEMM ? 2 : -1;
        if (op < 0 || moects__op(c->op)->bytes(c) > MAX_CASE_BYTES || (c != &f32 && !take(c))) continue;
        moects_inputs in;
        cr_assert_eq(moects__inputs_build_ex(c, SEED, INT64_MAX, &in, err, sizeof err), 0, "%s", err);
        size_t n = op == 0 ? check_ep_gather(c, &in) : op == 1 ? check_fp4_gemm(c, &in) : check_moe_gemm(c, &in);
        if (n && op == 0) seen[0] = seen[2] = 1, seen[1] |= in.eg.M_sum > in.valid_slots;
        if (n && op == 1) seen[3] = 1, seen[4] |= in.fg.scale_layout == MOECTS_SCALES_LINEAR;
        if (n && op == 2) seen[5] |= in.mg.format == MOECTS_MOE_W4A8, seen[6] |= in.mg.format == MOECTS_MOE_W4A16,
                          seen[7] |= in.mg.format == MOECTS_MOE_W4A8 && in.mg.a_scale_f32;
        checked[op] += n, cases += n > 0;
        moects__inputs_free(&in);
    }
    for (int j = 0; j < 8; j++) kinds += seen[j];
    moects__case_list_free(&all);
    cr_log_info("generator twin: %llu cases, %llu/%llu/%llu elements (ep_gather/fp4_gemm/moe_gemm), %llu of 8 kinds",
                (unsigned long long)cases, (unsigned long long)checked[0], (unsigned long long)checked[1],
                (unsigned long long)checked[2], (unsigned long long)kinds);
    for (int j = 0; j < 8; j++) cr_expect(seen[j], "tensor kind %d not met in the registry's cases", j);
}
