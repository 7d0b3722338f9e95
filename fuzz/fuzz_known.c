/* fuzz_known.c: libFuzzer target of moects__known_load (harness/report/known.c): the known-findings file
 * (cases/known-findings.txt). Seeds: cases/known-findings.txt, fuzz/corpus/known. Parsed entries
 * have both globs and a reason of at most 255 bytes, and matching works on them. */
#include "fuzz_util.h"
#include "moects_known.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_path("known-findings.txt");
    fuzz_write(path, data, size);
    moects_known kf = {0};
    char err[1024] = "";
    if (moects__known_load(path, &kf, err, sizeof err) != 0) {
        fuzz_check_err(err, path);
        return 0;
    }
    for (size_t i = 0; i < kf.n; i++) {
        const moects_known_entry *e = &kf.v[i];
        if (!e->kernel_glob[0] || !e->case_glob[0] || !e->reason[0] || strlen(e->reason) > 255) abort();
    }
    (void)moects__known_match(&kf, "cpu.fp4_gemm.dequant_sgemm", "fp4_gemm.mxfp4/regression/x/m16");
    moects__known_free(&kf);
    return 0;
}
