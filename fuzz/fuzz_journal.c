/* fuzz_journal.c: libFuzzer target of moects__journal_resume and moects__journal_prior
 * (harness/report/journal.c): OUT/results.journal of a run that was killed, read back by `moects run
 * --resume OUT`. Seeds: fuzz/corpus/journal. An input whose first byte is even is the journal's body
 * after a valid header of the selection below (written by moects__journal_start), so the fuzzer reaches
 * the result lines; an odd one is the whole file. A journal that resumes must map each of its results
 * to a (case, kernel) of the selection whose names are the result's, once. */
#include <sys/stat.h>

#include "fuzz_util.h"
#include "moects_journal.h"

static const moects_kernel K_EP = {.name = "cpu.ep_gather", .op = MOECTS_OP_EP_GATHER};
static const moects_kernel K_FP4 = {.name = "cpu.fp4_gemm.blockwise", .op = MOECTS_OP_FP4_GEMM};
static const moects_kernel *const KERNELS[] = {&K_EP, &K_FP4};
enum { NK = 2, NC = 3 };

/* The selection a journal must name: two kernels, three cases (ep_gather, fp4_gemm, ep_gather). */
static void selection(moects_journal_sel *s, moects_run *run, moects_case *cases)
{
    memset(run, 0, sizeof *run);
    snprintf(run->moects_version, sizeof run->moects_version, "0.1");
    snprintf(run->commit, sizeof run->commit, "0123456789abcdef0123456789abcdef01234567");
    snprintf(run->filter, sizeof run->filter, "--tier smoke");
    run->seed = 1;
    const char *ids[NC] = {"ep_gather/kimi-k3/tp8/t128", "fp4_gemm.mxfp4/kimi-k3/tp8/gemm1/m16",
                           "ep_gather/deepseek-v3/ep8/t1"};
    for (int c = 0; c < NC; c++) {
        memset(&cases[c], 0, sizeof cases[c]);
        snprintf(cases[c].id, sizeof cases[c].id, "%s", ids[c]);
        cases[c].op = c == 1 ? MOECTS_OP_FP4_GEMM : MOECTS_OP_EP_GATHER;
    }
    *s = (moects_journal_sel){.run = run, .tier = "smoke", .kernels = KERNELS, .nkernels = NK, .cases = cases,
                              .ncases = NC, .known_findings = "cases/known-findings.txt", .config_xxh64 = ""};
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_path("journal");
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, MOECTS_JOURNAL);
    mkdir(dir, 0700);
    static moects_run run, done;
    static moects_case cases[NC];
    moects_journal_sel sel;
    selection(&sel, &run, cases);
    char err[1024] = "";
    moects_journal j = {0};
    if (size && !(data[0] & 1)) { /* a valid header, then the input after its first byte */
        if (moects__journal_start(&j, dir, &sel, err, sizeof err) != 0) abort();
        moects__journal_close(&j, 0);
        FILE *f = fopen(path, "ab");
        if (!f || (size > 1 && fwrite(data + 1, 1, size - 1, f) != size - 1) || fclose(f) != 0) abort();
    } else {
        fuzz_write(path, data, size);
    }
    if (moects__journal_resume(&j, dir, &sel, &done, err, sizeof err) != 0) {
        fuzz_check_err(err, path);
        return 0;
    }
    moects__journal_close(&j, 0);
    const moects_result **prior = NULL;
    if (moects__journal_prior(&done, path, &sel, &prior, err, sizeof err) != 0) {
        fuzz_check_err(err, path);
    } else {
        size_t mapped = 0;
        for (size_t c = 0; c < NC; c++)
            for (size_t k = 0; k < NK; k++) {
                const moects_result *r = prior[c * NK + k];
                if (!r) continue;
                mapped++;
                if (strcmp(r->kernel, KERNELS[k]->name) || strcmp(r->case_id, cases[c].id)) abort();
            }
        if (mapped != done.n) abort(); /* every result in its one place */
    }
    free(prior);
    moects__run_free(&done);
    return 0;
}
