/* test_slurp.h: read a small text file of a test (at most 64 KiB - 1 bytes are kept). */
#ifndef TEST_SLURP_H
#define TEST_SLURP_H
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

/* The file's text, NUL-terminated, in a calloc'd 64 KiB buffer (free it); asserts it opens. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}
#endif
