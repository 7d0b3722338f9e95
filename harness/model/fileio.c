/* fileio.c: atomic report writes, report sets, mkdir -p, the writable-directory probe and the clean-up
 * of a killed run's temporaries. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moects_harness.h"

/* Write data to tmp (created, flushed, fsynced, closed). 0, or -1 with err naming path and tmp removed. */
static int write_tmp(const char *path, const char *tmp, const void *data, size_t len, char *err, size_t errlen)
{
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno)); /* the user's path, not tmp */
        return -1;
    }
    int ok = fwrite(data, 1, len, f) == len;
    ok = (fflush(f) == 0) && ok;
    ok = (fsync(fileno(f)) == 0 || errno == EINVAL) && ok;
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* path.tmp.<pid> into tmp; 0, or -1 when it does not fit */
static int tmp_name(const char *path, char *tmp, size_t tmplen)
{
    return snprintf(tmp, tmplen, "%s.tmp.%ld", path, (long)getpid()) >= (int)tmplen ? -1 : 0;
}

int moects__report_tmp(const char *path, char *tmp, size_t tmplen, char *err, size_t errlen)
{
    if (tmp_name(path, tmp, tmplen)) {
        snprintf(err, errlen, "%s: path too long", path);
        return -1;
    }
    return 0;
}

void moects__report_remove_dead_tmps(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        const char *t = strstr(de->d_name, ".tmp.");
        char *end, p[4400];
        long pid = t ? strtol(t + 5, &end, 10) : 0;
        if (pid <= 0 || *end || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    if (d) closedir(d);
}

int moects__write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen)
{
    char tmp[4096];
    if (moects__report_tmp(path, tmp, sizeof tmp, err, errlen) || write_tmp(path, tmp, data, len, err, errlen))
        return -1;
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int moects__report_adopt(moects_report_set *s, const char *path, char *err, size_t errlen)
{
    if (s->n == MOECTS_REPORT_MAX || strlen(path) >= sizeof s->path[0]) {
        snprintf(err, errlen, "%s: too many reports or path too long", path);
        return -1;
    }
    memcpy(s->path[s->n++], path, strlen(path) + 1);
    return 0;
}

int moects__report_stage(moects_report_set *s, const char *path, const void *data, size_t len, char *err,
                        size_t errlen)
{
    char tmp[4096];
    if (moects__report_tmp(path, tmp, sizeof tmp, err, errlen) || write_tmp(path, tmp, data, len, err, errlen))
        return -1;
    if (moects__report_adopt(s, path, err, errlen)) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

int moects__report_commit(moects_report_set *s, char *err, size_t errlen)
{
    char tmp[4200]; /* path (< 4096) + ".tmp.<pid>" fits */
    for (size_t i = 0; i < s->n; i++) {
        tmp_name(s->path[i], tmp, sizeof tmp);
        if (rename(tmp, s->path[i]) != 0) {
            snprintf(err, errlen, "%s: cannot rename into place: %s", s->path[i], strerror(errno));
            for (size_t j = i; j < s->n; j++) { /* the ones not yet in place */
                tmp_name(s->path[j], tmp, sizeof tmp);
                unlink(tmp);
            }
            s->n = 0;
            return -1;
        }
    }
    s->n = 0;
    return 0;
}

void moects__report_abort(moects_report_set *s)
{
    char tmp[4200];
    for (size_t i = 0; i < s->n; i++) {
        tmp_name(s->path[i], tmp, sizeof tmp);
        unlink(tmp);
    }
    s->n = 0;
}

int moects__mkdirs(const char *path, char *err, size_t errlen)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        snprintf(err, errlen, "%s: bad directory path", path);
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
                snprintf(err, errlen, "%s: cannot create directory: %s", buf, strerror(errno));
                return -1;
            }
            *p = c;
            if (c == '\0') break;
        }
    }
    return 0;
}

int moects__dir_writable(const char *dir, char *err, size_t errlen)
{
    if (moects__mkdirs(dir, err, errlen)) return -1;
    char p[4200];
    if (snprintf(p, sizeof p, "%s/.moects-write-test.XXXXXX", dir) >= (int)sizeof p) {
        snprintf(err, errlen, "%.200s...: path too long", dir);
        return -1;
    }
    int fd = mkstemp(p);
    if (fd < 0) {
        snprintf(err, errlen, "%s: not writable (cannot create a file there: %s)", dir, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(p);
    return 0;
}
