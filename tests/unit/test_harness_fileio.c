/* test_harness_fileio.c: report sets are all or nothing (harness/model/fileio.c). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moects_harness.h"

static char dir[64];
static char pa[128], pb[128];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/moects-fileio-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(pa, sizeof pa, "%s/a", dir);
    snprintf(pb, sizeof pb, "%s/b", dir);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static void expect(const char *path, const char *want)
{
    char got[64] = "";
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s missing", path);
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    got[n] = '\0';
    cr_assert_str_eq(got, want, "%s", path);
}

static int entries(void) /* files in dir */
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

TestSuite(fileio, .init = setup, .fini = teardown);

/* A write that fails after another was staged leaves the old pair as it was and no temp file. */
Test(fileio, failed_stage_keeps_the_old_set)
{
    char err[256];
    cr_assert_eq(moects__write_file_atomic(pa, "old-a", 5, err, sizeof err), 0);
    cr_assert_eq(moects__write_file_atomic(pb, "old-b", 5, err, sizeof err), 0);
    static moects_report_set s;
    char bad[160];
    snprintf(bad, sizeof bad, "%s/no-such-dir/b", dir);
    cr_assert_eq(moects__report_stage(&s, pa, "new-a", 5, err, sizeof err), 0);
    cr_assert_eq(moects__report_stage(&s, bad, "new-b", 5, err, sizeof err), -1);
    cr_assert_not_null(strstr(err, bad), "%s", err);
    moects__report_abort(&s);
    expect(pa, "old-a");
    expect(pb, "old-b");
    cr_assert_eq(entries(), 2);
}

Test(fileio, commit_renames_every_file)
{
    char err[256];
    cr_assert_eq(moects__write_file_atomic(pa, "old-a", 5, err, sizeof err), 0);
    static moects_report_set s;
    cr_assert_eq(moects__report_stage(&s, pa, "new-a", 5, err, sizeof err), 0);
    cr_assert_eq(moects__report_stage(&s, pb, "new-b", 5, err, sizeof err), 0);
    /* a file the caller wrote at its temporary name itself (the kernels' log) */
    char pc[128], tmp[256];
    snprintf(pc, sizeof pc, "%s/c", dir);
    cr_assert_eq(moects__report_tmp(pc, tmp, sizeof tmp, err, sizeof err), 0);
    FILE *f = fopen(tmp, "wb");
    fputs("log", f);
    fclose(f);
    cr_assert_eq(moects__report_adopt(&s, pc, err, sizeof err), 0);
    cr_assert_eq(entries(), 4); /* old a, three temps */
    cr_assert_eq(moects__report_commit(&s, err, sizeof err), 0);
    expect(pa, "new-a");
    expect(pb, "new-b");
    expect(pc, "log");
    cr_assert_eq(entries(), 3);
}

/* A rename that fails (a directory in the way) names the path and removes the temps not placed. */
Test(fileio, failed_commit_removes_the_temps)
{
    char err[256];
    cr_assert_eq(mkdir(pb, 0777), 0);
    static moects_report_set s;
    cr_assert_eq(moects__report_stage(&s, pa, "new-a", 5, err, sizeof err), 0);
    cr_assert_eq(moects__report_stage(&s, pb, "new-b", 5, err, sizeof err), 0);
    cr_assert_eq(moects__report_commit(&s, err, sizeof err), -1);
    cr_assert_not_null(strstr(err, pb), "%s", err);
    cr_assert_eq(entries(), 2); /* a (renamed before the failure) and the directory b */
}
