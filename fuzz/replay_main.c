/* replay_main.c: the fuzz targets without libFuzzer, for the normal build's tests (fuzz/CMakeLists.txt):
 * `replay_TARGET PATH...` feeds every file (of each directory, sorted, or the file itself) to
 * LLVMFuzzerTestOneInput, whose checks abort on a broken rule. A file X with a sibling X.err (a kept
 * crash input) must also produce that error message, its path written as FILE. Prints one line,
 * "replay: N files, N errors as expected", exit 0; 1 when a message differs. With REPLAY_PRINT=1
 * in the environment, also each file's message (to write a new X.err). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *moects_fuzz_last_error(void);
void moects_fuzz_clear_error(void);

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    char *s = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n == cap && !(s = realloc(s, cap = cap ? 2 * cap : 65536))) exit(2);
        got = fread(s + n, 1, cap - n, f);
        n += got;
    } while (got);
    fclose(f);
    *len = n;
    return s;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* One input file; 0, or 1 when its expected message differs. */
static int replay_file(const char *path, int *nfiles, int *nexpect)
{
    size_t n;
    char *data = slurp(path, &n);
    char *copy = malloc(n ? n : 1); /* an exact-size buffer: ASan sees reads past the input */
    memcpy(copy, data, n);
    free(data);
    char errpath[4096];
    snprintf(errpath, sizeof errpath, "%s.err", path);
    moects_fuzz_clear_error();
    LLVMFuzzerTestOneInput((const uint8_t *)copy, n);
    free(copy);
    (*nfiles)++;
    if (getenv("REPLAY_PRINT")) printf("%s: %s\n", path, moects_fuzz_last_error());
    FILE *f = fopen(errpath, "r");
    if (!f) return 0;
    char want[1024] = "";
    if (!fgets(want, sizeof want, f)) want[0] = '\0';
    fclose(f);
    want[strcspn(want, "\n")] = '\0';
    (*nexpect)++;
    if (strcmp(want, moects_fuzz_last_error())) {
        fprintf(stderr, "replay: %s: got \"%s\", want \"%s\"\n", path, moects_fuzz_last_error(), want);
        return 1;
    }
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

int main(int argc, char **argv)
{
    int nfiles = 0, nexpect = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) continue; /* an optional corpus directory not there */
        if (!S_ISDIR(st.st_mode)) {
            bad |= replay_file(argv[i], &nfiles, &nexpect);
            continue;
        }
        struct dirent **e;
        int n = scandir(argv[i], &e, NULL, by_name);
        for (int j = 0; j < n; j++) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", argv[i], e[j]->d_name);
            if (e[j]->d_name[0] != '.' && !ends_with(p, ".err") && stat(p, &st) == 0 &&
                S_ISREG(st.st_mode))
                bad |= replay_file(p, &nfiles, &nexpect);
            free(e[j]);
        }
        free(e);
    }
    printf("replay: %d files, %d errors as expected%s\n", nfiles, nexpect, bad ? ", some not" : "");
    return bad || !nfiles;
}
