/* fuzz_idlist.c: libFuzzer target of moects__idlist_load (cases/idlist.c): case-id lists
 * (cases/mustpass/ *.txt). Seeds: cases/mustpass, fuzz/corpus/idlist. Every id read is non-empty,
 * shorter than a case id field, without blanks. */
#include "fuzz_util.h"
#include "moects_cases.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_path("ids.txt");
    fuzz_write(path, data, size);
    char **ids = NULL;
    char err[1024] = "";
    int n = moects__idlist_load(path, &ids, err, sizeof err);
    if (n < 0) {
        fuzz_check_err(err, path);
        return 0;
    }
    for (int i = 0; i < n; i++)
        if (!ids[i][0] || strlen(ids[i]) >= sizeof(((moects_case *)0)->id) || strpbrk(ids[i], " \t\n")) {
            fprintf(stderr, "fuzz: bad id %d: \"%s\"\n", i, ids[i]);
            abort();
        }
    moects__idlist_free(ids, (size_t)n);
    return 0;
}
