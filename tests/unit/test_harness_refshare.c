/* test_harness_refshare.c: a case's references shared between the workers that run its tasks
 * (harness/run/refshare.c, issue 31 item 4): what one worker writes another reads back bit for bit, and
 * a file of another case, seed, recipe or size, or with one byte changed, is refused (the reader then
 * computes the reference), and the directory goes away whole. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moects_harness.h"
#include "moects_task_internal.h"

#define BYTES 4099 /* not a multiple of 8: the XXH64 tail */

static unsigned char ref[BYTES];

static void fill(void)
{
    for (size_t i = 0; i < BYTES; i++) ref[i] = (unsigned char)(i * 131 + 7);
}

Test(refshare, written_then_read_back)
{
    char dir[512];
    fill();
    cr_assert_eq(moects__refshare_mkdir(dir, sizeof dir), 0);
    const uint64_t h = moects__xxh64(ref, BYTES);
    cr_assert_eq(moects__refshare_put(dir, 12, "ep_gather/x/t7", 1, 3, ref, BYTES, h, 1, 1), 0);
    uint64_t got_h = 0;
    int gpu = 0, check = 0;
    unsigned char *got = moects__refshare_get(dir, 12, "ep_gather/x/t7", 1, 3, BYTES, &got_h, &gpu, &check);
    cr_assert_not_null(got);
    cr_assert_eq(memcmp(got, ref, BYTES), 0);
    cr_assert_eq(got_h, h);
    cr_assert_eq(gpu, 1);
    cr_assert_eq(check, 1);
    free(got);
    /* another case id, seed, recipe, index or size: not this reference */
    cr_assert_null(moects__refshare_get(dir, 12, "ep_gather/x/t8", 1, 3, BYTES, &got_h, &gpu, &check));
    cr_assert_null(moects__refshare_get(dir, 12, "ep_gather/x/t7", 2, 3, BYTES, &got_h, &gpu, &check));
    cr_assert_null(moects__refshare_get(dir, 12, "ep_gather/x/t7", 1, 4, BYTES, &got_h, &gpu, &check));
    cr_assert_null(moects__refshare_get(dir, 13, "ep_gather/x/t7", 1, 3, BYTES, &got_h, &gpu, &check));
    cr_assert_null(moects__refshare_get(dir, 12, "ep_gather/x/t7", 1, 3, BYTES - 1, &got_h, &gpu, &check));
    /* dropped with its group: gone */
    moects__refshare_drop(dir, 12, 1u << 3);
    cr_assert_null(moects__refshare_get(dir, 12, "ep_gather/x/t7", 1, 3, BYTES, &got_h, &gpu, &check));
    moects__refshare_rmdir(dir);
    struct stat st;
    cr_assert_neq(stat(dir, &st), 0, "%s left behind", dir);
}

Test(refshare, a_changed_byte_is_refused)
{
    char dir[512], path[700];
    fill();
    cr_assert_eq(moects__refshare_mkdir(dir, sizeof dir), 0);
    cr_assert_eq(moects__refshare_put(dir, 0, "c", 5, 0, ref, BYTES, moects__xxh64(ref, BYTES), 0, 0), 0);
    snprintf(path, sizeof path, "%s/c0.r0", dir);
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f, "the file is %s", path);
    fseek(f, -1, SEEK_END); /* the reference's last byte, as a stray write of a dying kernel could */
    fputc(ref[BYTES - 1] ^ 0x10, f);
    fclose(f);
    uint64_t h;
    int gpu, check;
    cr_assert_null(moects__refshare_get(dir, 0, "c", 5, 0, BYTES, &h, &gpu, &check));
    /* a temporary file a killed worker left goes with the directory */
    snprintf(path, sizeof path, "%s/c1.r0.999.tmp", dir);
    f = fopen(path, "wb");
    cr_assert_not_null(f);
    fclose(f);
    moects__refshare_rmdir(dir);
    struct stat st;
    cr_assert_neq(stat(dir, &st), 0, "%s left behind", dir);
}
