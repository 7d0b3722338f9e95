/* fuzz_regressions.c: libFuzzer target of moects__regressions_load (cases/regressions.c). Seeds:
 * cases/regressions/ *.json, fuzz/corpus/regressions. Loaded cases must have ids and stay within
 * the file bounds of cases_internal.h. */
#include "cases_internal.h"
#include "fuzz_util.h"
#include "moects_cases.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_path("regression.json");
    fuzz_write(path, data, size);
    moects_case_list l = {0};
    char err[1024] = "";
    if (moects__regressions_load(path, &l, err, sizeof err) == 0) {
        if (l.n > MOECTS__MAX_FILE_CASES) abort();
        for (size_t i = 0; i < l.n; i++) {
            const moects_case *c = &l.v[i];
            if (!c->id[0] || c->T > MOECTS__MAX_ROWS || c->M > MOECTS__MAX_ROWS || c->N > MOECTS__MAX_ROWS ||
                c->K > MOECTS__MAX_ROWS || c->H > MOECTS__MAX_WIDTH || c->T < 0 || c->M < 0) {
                fprintf(stderr, "fuzz: case %zu (%s) out of bounds\n", i, c->id);
                abort();
            }
        }
    } else {
        fuzz_check_err(err, path);
    }
    moects__case_list_free(&l);
    return 0;
}
