/* api_demo.c: an out-of-tree program over the installed libmoects (tests/install_test.sh builds it
 * with pkg-config and with find_package(moects)): the first smoke case matching argv[1], its
 * fma_v1 reference judged as if a kernel had returned it: PASS_EXACT. Prints the verdict. */
#include <stdio.h>

#include "moects.h"

int main(int argc, char **argv)
{
    const char *glob = argc > 1 ? argv[1] : "ep_gather/*";
    moects_caselist *l = moects_cases_select(NULL, NULL, 0, 0, "smoke", &glob, 1);
    if (!l || !moects_caselist_count(l)) {
        fprintf(stderr, "api_demo: %s\n", l ? "no case" : moects_errmsg());
        return 2;
    }
    moects_casedata *d = moects_casedata_build(l, 0, MOECTS_DEFAULT_SEED);
    moects_tensor_info ref;
    if (!d || moects_casedata_reference(d, "ep_gather.fma_v1", &ref) != 0) {
        fprintf(stderr, "api_demo: %s\n", moects_errmsg());
        return 2;
    }
    moects_kernel k = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "demo.reference_as_output",
                       .op = MOECTS_OP_EP_GATHER, .recipe = "ep_gather.fma_v1"};
    moects_judgement *j = moects_judge(d, &k, ref.data, ref.bytes);
    if (!j) {
        fprintf(stderr, "api_demo: %s\n", moects_errmsg());
        return 2;
    }
    printf("%s %s %s\n", moects_version(), moects_casedata_id(d), moects_judgement_verdict(j));
    int rc = moects_judgement_passed(j) == 1 ? 0 : 1;
    moects_judgement_free(j);
    moects_casedata_free(d);
    moects_caselist_free(l);
    return rc;
}
