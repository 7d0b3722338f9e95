/* test_tmpdir.h: a flat scratch directory for a test file's fixtures. */
#ifndef TEST_TMPDIR_H
#define TEST_TMPDIR_H
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char tmpdir[256];

/* mkdtemp from tmpl ("/tmp/...-XXXXXX") into tmpdir; asserts it worked. */
static void mk_tmpdir(const char *tmpl)
{
    snprintf(tmpdir, sizeof tmpdir, "%s", tmpl);
    cr_assert_not_null(mkdtemp(tmpdir));
}

/* Removes the files in tmpdir (no subdirectories), then tmpdir. */
static void rm_tmp(void)
{
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(tmpdir);
}
#endif
