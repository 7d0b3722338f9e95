/* fuzz_results.c: libFuzzer target of moects__results_read (harness/model/results.c): results.json of
 * run, merge, gate, coverage. Seeds: reports/baseline, tests/fixtures/data/results, fuzz/corpus/results.
 * A file that reads is written back (moects__results_write) and must read again to the same text
 * when written a second time: the writer and the reader agree on every value the reader accepts. */
#include "fuzz_util.h"
#include "moects_harness.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) abort();
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) abort();
    fclose(f);
    *len = (size_t)n;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_path("results.json");
    fuzz_write(path, data, size);
    moects_run run;
    char err[1024] = "";
    if (moects__results_read(path, &run, err, sizeof err) != 0) {
        fuzz_check_err(err, path);
        return 0;
    }
    char out[300], out2[300];
    snprintf(out, sizeof out, "%s.out", path);
    snprintf(out2, sizeof out2, "%s.out2", path);
    if (moects__results_write(out, &run, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz: a file that reads does not write: %s\n", err);
        abort();
    }
    moects_run back;
    if (moects__results_read(out, &back, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz: what the writer wrote does not read: %s\n", err);
        abort();
    }
    if (moects__results_write(out2, &back, err, sizeof err) != 0) abort();
    size_t n1, n2;
    char *a = slurp(out, &n1), *b = slurp(out2, &n2);
    if (n1 != n2 || memcmp(a, b, n1) != 0) {
        fprintf(stderr, "fuzz: write(read(write(read(x)))) differs from write(read(x))\n");
        abort();
    }
    free(a), free(b);
    unlink(out), unlink(out2);
    moects__run_free(&back);
    moects__run_free(&run);
    return 0;
}
