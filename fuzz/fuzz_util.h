/* fuzz_util.h: what every libFuzzer target of moects shares. The readers under test take a path,
 * so each input is written to a file first (in /dev/shm when there is one: no disk traffic), and
 * every error they return must be the project's one-line form: non-empty, starting with the path
 * it names, without a newline or other control character (a file's bytes quoted in a message must
 * not break the line or reach the terminal as escape sequences). A broken rule aborts: libFuzzer
 * keeps the input as a crash. */
#ifndef MOECTS_FUZZ_UTIL_H
#define MOECTS_FUZZ_UTIL_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A per-process file path ending in name ("model.json"), made once. */
static const char *fuzz_path(const char *name)
{
    static char path[256];
    if (!path[0]) {
        struct stat st;
        const char *base = stat("/dev/shm", &st) == 0 && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof path, "%s/moects-fuzz-%d-%s", base, (int)getpid(), name);
    }
    return path;
}

/* Write the input to path (truncating). Aborts when the file cannot be written. */
static void fuzz_write(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

/* The last error a target checked, its path replaced by "FILE" (fuzz/replay_main.c compares it
 * with a crash input's expected message). */
static char fuzz_last_error[1024];
const char *moects_fuzz_last_error(void);
void moects_fuzz_clear_error(void);
const char *moects_fuzz_last_error(void) { return fuzz_last_error; }
void moects_fuzz_clear_error(void) { fuzz_last_error[0] = '\0'; }

/* An error message of a reader of path: one line naming the file. */
static void fuzz_check_err(const char *err, const char *path)
{
    snprintf(fuzz_last_error, sizeof fuzz_last_error, "FILE%s", err + strnlen(err, strlen(path)));
    if (!err[0] || strncmp(err, path, strlen(path)) != 0) {
        fprintf(stderr, "fuzz: error does not start with the file name %s: \"%s\"\n", path, err);
        abort();
    }
    for (const char *p = err; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            fprintf(stderr, "fuzz: error holds control byte 0x%02x at %td: \"%s\"\n", (unsigned char)*p, p - err, err);
            abort();
        }
}
#endif
