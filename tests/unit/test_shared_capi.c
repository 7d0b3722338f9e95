/* test_shared_capi.c: the public C API (include/moects/moects.h) through libmoects.so, as a user links it.
 * Expected values come from the case ids' own fields, from an ep_gather computed here by hand (the
 * fma recipe of DESIGN.md, written independently of ref/), and from bits flipped on purpose. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moects.h"

static moects_caselist *smoke(const char *glob)
{
    const char *g[] = {glob};
    moects_caselist *l = moects_cases_select(MOECTS_SOURCE_DIR, NULL, 0, 0, "smoke", g, 1);
    cr_assert(l, "%s", moects_errmsg());
    return l;
}

static float bf16f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f32_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* ep_gather.fma_v1 by hand from the tensors as the API describes them. */
static void my_ep_gather(moects_casedata *d, uint16_t *out)
{
    moects_tensor_info x, ids, w, idx, map, o;
    cr_assert_eq(moects_casedata_input(d, 0, &x), 0);
    cr_assert_eq(moects_casedata_input(d, 1, &ids), 0);
    cr_assert_eq(moects_casedata_input(d, 2, &w), 0);
    cr_assert_eq(moects_casedata_input(d, 3, &idx), 0);
    cr_assert_eq(moects_casedata_input(d, 4, &map), 0);
    cr_assert_eq(moects_casedata_output(d, &o), 0);
    int64_t T = o.dims[0], H = o.dims[1], k = ids.dims[1], E = map.ndim ? map.dims[0] : 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < H; c++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < k; j++) {
                int64_t e = !strcmp(ids.dtype, "I64") ? ((const int64_t *)ids.data)[t * k + j]
                                                      : ((const int32_t *)ids.data)[t * k + j];
                int valid = map.bytes ? (e >= 0 && e < E && ((const int32_t *)map.data)[e] >= 0) : e >= 0;
                if (!valid) continue;
                int32_t row = ((const int32_t *)idx.data)[t * k + j];
                acc = fmaf(bf16f(((const uint16_t *)x.data)[row * H + c]), ((const float *)w.data)[t * k + j], acc);
            }
            out[t * H + c] = f32_bf16(acc);
        }
}

static const moects_kernel fma_desc = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "test.ep_gather",
                                       .op = MOECTS_OP_EP_GATHER, .recipe = "ep_gather.fma_v1"};

Test(capi, version_and_selection)
{
    cr_assert_eq(moects_api_version(), MOECTS_API_VERSION);
    cr_assert_str_eq(moects_version(), "0.1");
    moects_caselist *l = smoke("ep_gather/kimi-k3/tp8/*");
    cr_assert_gt(moects_caselist_count(l), 0);
    for (size_t i = 0; i < moects_caselist_count(l); i++) {
        cr_assert_eq(strncmp(moects_case_id(l, i), "ep_gather/kimi-k3/tp8/", 22), 0);
        cr_assert_str_eq(moects_case_op(l, i), "ep_gather");
        /* Kimi K3's latent width is 3584 (DESIGN.md): every ep_gather case of it has H 3584 */
        cr_assert(strstr(moects_case_json(l, i), "\"H\":3584"), "%s", moects_case_json(l, i));
    }
    cr_assert_null(moects_case_id(l, moects_caselist_count(l)));
    cr_assert(strstr(moects_errmsg(), "out of range"), "%s", moects_errmsg());
    moects_caselist_free(l);
}

Test(capi, bad_tier_and_missing_config_name_the_problem)
{
    cr_assert_null(moects_cases_select(MOECTS_SOURCE_DIR, NULL, 0, 0, "smok", NULL, 0));
    cr_assert(strstr(moects_errmsg(), "smok"), "%s", moects_errmsg());
    cr_assert_null(moects_cases_select(NULL, "/nonexistent/config.json", 8, 0, "all", NULL, 0));
    cr_assert(strstr(moects_errmsg(), "/nonexistent/config.json"), "%s", moects_errmsg());
}

Test(capi, config_with_tp_keeps_that_layout)
{
    moects_caselist *l = moects_cases_select(NULL, MOECTS_SOURCE_DIR "/cases/models/kimi-k3.json", 8, 0, "all", NULL, 0);
    cr_assert(l, "%s", moects_errmsg());
    cr_assert_gt(moects_caselist_count(l), 0);
    for (size_t i = 0; i < moects_caselist_count(l); i++) cr_assert(strstr(moects_case_id(l, i), "/tp8/"));
    moects_caselist_free(l);
}

/* A hand-computed fma ep_gather passes exactly; one flipped bit is one mismatch; results.json reads back. */
Test(capi, judge_hand_computed_output)
{
    moects_caselist *l = smoke("ep_gather/kimi-k3/tp8/*");
    moects_casedata *d = moects_casedata_build(l, 0, MOECTS_DEFAULT_SEED);
    cr_assert(d, "%s", moects_errmsg());
    moects_tensor_info o;
    cr_assert_eq(moects_casedata_output(d, &o), 0);
    cr_assert_str_eq(o.dtype, "BF16");
    cr_assert_eq(o.bytes, (size_t)(o.dims[0] * o.dims[1] * 2));
    uint16_t *out = malloc(o.bytes + 2);
    my_ep_gather(d, out);
    moects_judgement *j = moects_judge(d, &fma_desc, out, o.bytes);
    cr_assert(j, "%s", moects_errmsg());
    cr_assert_str_eq(moects_judgement_verdict(j), "PASS_EXACT", "%s", moects_judgement_text(j));
    cr_assert_eq(moects_judgement_passed(j), 1);
    moects_resultset *s = moects_resultset_new("test", MOECTS_DEFAULT_SEED);
    cr_assert_eq(moects_resultset_add(s, j), 0);
    moects_judgement_free(j);

    out[o.bytes / 2 - 1] ^= 1; /* the last element, lowest mantissa bit */
    j = moects_judge(d, &fma_desc, out, o.bytes);
    cr_assert_str_eq(moects_judgement_verdict(j), "FAIL_MISMATCH");
    cr_assert_eq(moects_judgement_passed(j), 0);
    cr_assert(strstr(moects_judgement_text(j), "mismatches: 1\n"), "%s", moects_judgement_text(j));
    cr_assert(strstr(moects_judgement_text(j), "max_ulp: 1\n"), "%s", moects_judgement_text(j));
    cr_assert(strstr(moects_judgement_json(j), "\"verdict\": \"FAIL_MISMATCH\""), "%s", moects_judgement_json(j));
    cr_assert_eq(moects_resultset_add(s, j), 0);
    moects_judgement_free(j);

    cr_assert_null(moects_judge(d, &fma_desc, out, o.bytes - 2));
    cr_assert(strstr(moects_errmsg(), "bytes"), "%s", moects_errmsg());

    moects_kernel other = fma_desc;
    other.name = "test.other";
    j = moects_judge_outcome(d, &other, "FAIL_CRASH", "ValueError: boom");
    cr_assert(strstr(moects_judgement_text(j), "ValueError: boom"));
    cr_assert_eq(moects_resultset_add(s, j), 0);
    moects_judgement_free(j);

    char path[] = "/tmp/moects_capi_XXXXXX";
    cr_assert(mkdtemp(path));
    char file[64];
    snprintf(file, sizeof file, "%s/results.json", path);
    cr_assert_eq(moects_resultset_write(s, file), 0, "%s", moects_errmsg());
    moects_resultset *back = moects_resultset_read(file);
    cr_assert(back, "%s", moects_errmsg());
    cr_assert_eq(moects_resultset_count(back), 2); /* the second test.ep_gather result replaced the first */
    moects_resultset_free(back);
    unlink(file);
    rmdir(path);
    moects_resultset_free(s);
    free(out);
    moects_casedata_free(d);
    moects_caselist_free(l);
}

/* The reference the API gives equals the hand computation (fma_v1), and the inputs are the same
 * bytes on a second build (determinism). */
Test(capi, reference_and_inputs_deterministic)
{
    moects_caselist *l = smoke("ep_gather/*");
    moects_casedata *a = moects_casedata_build(l, 1, 7), *b = moects_casedata_build(l, 1, 7);
    cr_assert(a && b, "%s", moects_errmsg());
    for (int j = 0; j < moects_casedata_ninputs(a); j++) {
        moects_tensor_info x, y;
        moects_casedata_input(a, j, &x);
        moects_casedata_input(b, j, &y);
        cr_assert_eq(x.bytes, y.bytes);
        cr_assert(x.bytes == 0 || memcmp(x.data, y.data, x.bytes) == 0, "%s", x.name);
    }
    moects_tensor_info r, o;
    cr_assert_eq(moects_casedata_reference(a, "ep_gather.fma_v1", &r), 0, "%s", moects_errmsg());
    moects_casedata_output(a, &o);
    uint16_t *mine = malloc(o.bytes + 2);
    my_ep_gather(a, mine);
    cr_assert(o.bytes == 0 || memcmp(mine, r.data, o.bytes) == 0);
    cr_assert_eq(moects_casedata_reference(a, "fp4_gemm.blockwise_v1", &r), -1);
    cr_assert(strstr(moects_errmsg(), "fp4_gemm.blockwise_v1"), "%s", moects_errmsg());
    free(mine);
    moects_casedata_free(a);
    moects_casedata_free(b);
    moects_caselist_free(l);
}

/* moe_gemm through the API: Kimi K2 (config.json: 384 routed experts, hidden 7168, moe_intermediate
 * 2048) at EP64 has 6 local experts; its W4A8 masked gemm2 case: A [E, max_m, K] E4M3 bytes, UE8M0 A
 * scales per 128 along K, B [E, N, K/2], linear B scales [E, N, K/32], masked_m [E]; W4A16's A scale,
 * the NVFP4 global scales and the other layouts' row tensors are absent (ndim 0, no data). */
Test(capi, moe_gemm_tensors)
{
    moects_caselist *l = smoke("moe_gemm.w4a8/kimi-k2/ep64/masked/gemm2/t16");
    cr_assert_eq(moects_caselist_count(l), 1);
    moects_casedata *d = moects_casedata_build(l, 0, 1);
    cr_assert(d, "%s", moects_errmsg());
    cr_assert_eq(moects_casedata_ninputs(d), 10);
    const char *js = moects_casedata_json(d);
    cr_assert(strstr(js, "\"E\":6") && strstr(js, "\"format\":\"w4a8\"") && strstr(js, "\"rows\":\"masked\""), "%s", js);
    moects_tensor_info t[10], o;
    for (int j = 0; j < 10; j++) cr_assert_eq(moects_casedata_input(d, j, &t[j]), 0);
    cr_assert_eq(moects_casedata_output(d, &o), 0);
    int64_t maxm = t[0].dims[1];
    cr_assert(maxm > 0 && maxm % 128 == 0, "max_m %lld", (long long)maxm);
    cr_assert_str_eq(t[0].name, "a");
    cr_assert(t[0].ndim == 3 && t[0].dims[0] == 6 && t[0].dims[2] == 2048 && !strcmp(t[0].dtype, "U8"));
    cr_assert(t[1].ndim == 3 && t[1].dims[0] == 6 && t[1].dims[1] == maxm && t[1].dims[2] == 2048 / 128);
    cr_assert(t[2].ndim == 3 && t[2].dims[0] == 6 && t[2].dims[1] == 7168 && t[2].dims[2] == 1024);
    cr_assert(t[3].ndim == 3 && t[3].dims[2] == 2048 / 32 && t[3].bytes == 6 * 7168 * 64);
    cr_assert(t[4].ndim == 1 && t[4].dims[0] == 6 && !strcmp(t[4].dtype, "F32"));
    const int absent[] = {5, 6, 7, 9}; /* gs_a, gs_b, m_indices, expert_offsets */
    for (int i = 0; i < 4; i++)
        cr_assert(t[absent[i]].ndim == 0 && !t[absent[i]].data && t[absent[i]].bytes == 0 && t[absent[i]].name,
                  "input %d", absent[i]);
    cr_assert(!strcmp(t[8].name, "masked_m") && !strcmp(t[8].dtype, "I32") && t[8].dims[0] == 6);
    cr_assert(o.ndim == 3 && o.dims[0] == 6 && o.dims[1] == maxm && o.dims[2] == 7168 && !strcmp(o.dtype, "BF16"));
    moects_casedata_free(d);
    moects_caselist_free(l);
}
