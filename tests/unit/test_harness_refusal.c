/* test_harness_refusal.c: the closed list of refusal classes (moects_refusal, include/moects/
 * moects_kernel.h): a reason's class is the word before ": " at its start, when it is one of the
 * list; results.json carries it on UNSUPPORTED results; and every built-in kernel, CPU and CUDA,
 * refuses every registry case it refuses (every tier) with a classed reason. */
#include <criterion/criterion.h>
#include <string.h>

#include "moects_harness.h"
#include "moects_op.h"
#include "moects_registry.h"
#include "reports_internal.h"

Test(refusal, class_is_the_opening_word)
{
    /* by hand from the contract: "<class>: " opens the reason */
    cr_assert_eq(moects__refusal_of("shape: K not a multiple of 32"), MOECTS_REFUSE_SHAPE);
    cr_assert_eq(moects__refusal_of("format: NVFP4 only"), MOECTS_REFUSE_FORMAT);
    cr_assert_eq(moects__refusal_of("scope: mutant of the masked layout only"), MOECTS_REFUSE_SCOPE);
    cr_assert_eq(moects__refusal_of("resource: cuBLAS not available"), MOECTS_REFUSE_RESOURCE);
    cr_assert_eq(moects__refusal_of("shapes: plural is not a class"), MOECTS_REFUSE_UNSPECIFIED);
    cr_assert_eq(moects__refusal_of("shape:no space"), MOECTS_REFUSE_UNSPECIFIED);
    cr_assert_eq(moects__refusal_of("K not a multiple of 32 (shape: no)"), MOECTS_REFUSE_UNSPECIFIED);
    cr_assert_eq(moects__refusal_of("unspecified: not a word a kernel gives"), MOECTS_REFUSE_UNSPECIFIED);
    cr_assert_eq(moects__refusal_of(""), MOECTS_REFUSE_UNSPECIFIED);
    cr_assert_eq(moects__refusal_of(NULL), MOECTS_REFUSE_UNSPECIFIED);
}

Test(refusal, names_are_the_abi_words)
{
    static const char *const words[] = {"unspecified", "format", "shape", "layout", "activation",
                                        "routing", "recipe", "scope", "resource"};
    cr_assert_eq(MOECTS_REFUSE_COUNT, 9);
    for (int c = 0; c < 9; c++) {
        moects_refusal got;
        cr_assert_str_eq(moects__refusal_name((moects_refusal)c), words[c]);
        cr_assert_eq(moects__refusal_parse(words[c], &got), 0);
        cr_assert_eq(got, (moects_refusal)c);
    }
    moects_refusal got;
    cr_assert_eq(moects__refusal_parse("dtype", &got), -1);
    cr_assert_str_eq(moects__refusal_name(MOECTS_REFUSE_COUNT), "?");
}

Test(refusal, results_json_carries_the_class)
{
    moects_result r = {.verdict = MOECTS_UNSUPPORTED, .first_index = -1};
    snprintf(r.kernel, sizeof r.kernel, "cpu.k");
    snprintf(r.case_id, sizeof r.case_id, "ep_gather/m/tp1/t1");
    snprintf(r.reason, sizeof r.reason, "layout: masked rows only");
    moects__buf b = {0};
    moects__buf_result(&b, &r);
    cr_assert_not_null(strstr(b.s, "\"reason\": \"layout: masked rows only\", \"refusal\": \"layout\""), "%s", b.s);
    moects__buf_free(&b);
    r.verdict = MOECTS_PASS_EXACT; /* only a refusal has a class */
    moects__buf_result(&b, &r);
    cr_assert_null(strstr(b.s, "\"refusal\""), "%s", b.s);
    moects__buf_free(&b);
}

Test(refusal, every_builtin_refusal_is_classed, .timeout = 600)
{
    moects_case_list all = {0};
    char err[512] = "";
    cr_assert_eq(moects__cases_builtin(MOECTS_SOURCE_DIR, &all, err, sizeof err), 0, "%s", err);
    size_t nk, refused = 0;
    const moects_kernel *const *k = moects__builtin_kernels(&nk);
    for (size_t i = 0; i < all.n; i++) {
        moects__kshape s;
        moects__case_kshape(&all.v[i], &s);
        for (size_t j = 0; j < nk; j++) {
            char why[256] = "";
            if (k[j]->op != all.v[i].op || !k[j]->supports || k[j]->supports(&s, why, sizeof why)) continue;
            refused++;
            cr_expect_neq(moects__refusal_of(why), MOECTS_REFUSE_UNSPECIFIED, "%s on %s: \"%s\" has no class",
                          k[j]->name, all.v[i].id, why);
        }
    }
    cr_expect_gt(refused, 100, "only %zu refusals: the registry or the kernels are not what this test expects", refused);
}
