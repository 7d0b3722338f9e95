/* journal.c: the journal of a run in progress, OUT/results.journal (moects_journal.h; DESIGN.md
 * "Harness"). JSON Lines: the first line a header naming the run's selection, then one line per
 * finished (kernel, case), the object results.json holds for it (moects__buf_result), each appended
 * whole by one write(2) in the parent as the result arrives. A run killed at any moment leaves every
 * finished result and at most a torn last line; `moects run --resume OUT` reads them back, runs the
 * rest and writes the reports of the whole run; a run whose reports are written removes its journal.
 *
 *   {"moects_journal": 2, "moects_version": "0.1", "commit": "858abae...", "seed": "1",
 *    "filter": "--kernel cpu.* --tier smoke", "tier": "smoke", "shard": "",
 *    "kernels": ["cpu.ep_gather", ...], "kernel_libs": [{"path": "/abs/lib.so", "sha256": "..."}],
 *    "known_findings": "cases/known-findings.txt", "cases": 918, "cases_xxh64": "0f1e2d3c4b5a6978",
 *    "config_xxh64": ""}
 *
 * seed is its decimal digits (a u64); cases_xxh64 is the XXH64 of the selected case ids, each followed
 * by '\n', in run order (the registry's, whatever the globs' order); config_xxh64 the XXH64 of the
 * --config file's bytes, "" without --config. A run resumes the journal when every field is equal but
 * filter and tier, the selection as it was spelled (kept for the error line): the same cases and
 * kernels however they were selected. Format 1 (without config_xxh64) is still read, by its own rule:
 * every field equal, filter and tier too (its filter held --config's path, its only record of it). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cases_internal.h"
#include "moects_journal.h"
#include "reports_internal.h"

#define FORMAT 2 /* the header this moects writes; it reads 1 too (moects_journal's value) */

/* The header object of selection s in format fmt (1 or FORMAT); NULL out of memory. */
static json_t *header_json(const moects_journal_sel *s, int fmt)
{
    const moects_run *run = s->run;
    char seed[24], xx[24];
    snprintf(seed, sizeof seed, "%" PRIu64, run->seed);
    moects__buf ids = {0};
    for (size_t c = 0; c < s->ncases; c++) moects__buf_printf(&ids, "%s\n", s->cases[c].id);
    snprintf(xx, sizeof xx, "%016" PRIx64, moects__xxh64(ids.s, ids.n));
    int oom = ids.oom;
    moects__buf_free(&ids);
    json_t *kernels = json_array(), *libs = json_array();
    for (size_t k = 0; k < s->nkernels; k++) oom |= json_array_append_new(kernels, json_string(s->kernels[k]->name));
    for (size_t i = 0; i < run->nlibs && i < MOECTS_RUN_LIBS; i++)
        oom |= json_array_append_new(libs, json_pack("{s:s, s:s}", "path", run->libs[i].path, "sha256",
                                                     run->libs[i].sha256));
    json_t *h = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:s, s:I, s:s}", "moects_journal", fmt,
                          "moects_version", run->moects_version, "commit", run->commit, "seed", seed, "filter",
                          run->filter, "tier", s->tier, "shard", run->shard, "kernels", kernels, "kernel_libs", libs,
                          "known_findings", s->known_findings, "cases", (json_int_t)s->ncases, "cases_xxh64", xx);
    if (h && fmt >= 2)
        oom |= json_object_set_new(h, "config_xxh64", json_string(s->config_xxh64 ? s->config_xxh64 : ""));
    if (oom && h) json_decref(h);
    return oom ? NULL : h;
}

/* Write all of data to fd (a regular file: one write(2) but for EINTR or a full disk). 0 or -1 (errno). */
static int write_all(int fd, const char *data, size_t n)
{
    while (n) {
        ssize_t w = write(fd, data, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        data += w, n -= (size_t)w;
    }
    return 0;
}

/* Truncate j's file to keep bytes and write the header line of s there. 0, or -1 with err. */
static int write_header(moects_journal *j, const moects_journal_sel *s, off_t keep, char *err, size_t errlen)
{
    json_t *h = header_json(s, FORMAT);
    char *text = h ? json_dumps(h, JSON_PRESERVE_ORDER) : NULL;
    json_decref(h);
    int rc = -1;
    if (!text) snprintf(err, errlen, "%s: out of memory", j->path);
    else if (ftruncate(j->fd, keep) != 0 || write_all(j->fd, text, strlen(text)) != 0 || write_all(j->fd, "\n", 1) != 0)
        snprintf(err, errlen, "%s: cannot write: %s", j->path, strerror(errno));
    else rc = 0;
    free(text);
    return rc;
}

int moects__journal_start(moects_journal *j, const char *outdir, const moects_journal_sel *s, char *err,
                         size_t errlen)
{
    snprintf(j->path, sizeof j->path, "%s/%s", outdir, MOECTS_JOURNAL);
    j->fd = open(j->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (j->fd < 0) {
        snprintf(err, errlen, "%s: cannot create: %s", j->path, strerror(errno));
        return -1;
    }
    if (write_header(j, s, 0, err, errlen) == 0) return 0;
    moects__journal_close(j, 1);
    return -1;
}

/* json v in at most len - 1 characters ("..." at the end when cut), or "nothing" for NULL. */
static void short_json(const json_t *v, char *buf, size_t len)
{
    char *t = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    const char *s = t ? t : v ? "?" : "nothing";
    if (strlen(s) < len) snprintf(buf, len, "%s", s);
    else snprintf(buf, len, "%.*s...", (int)len - 4, s);
    free(t);
}

/* Whether headers of format fmt must agree on key: from format 2 on, filter and tier (the selection as
 * it was spelled) need not, the cases and kernels they selected must. */
static int compared(const char *key, int fmt)
{
    return fmt < 2 || (strcmp(key, "filter") && strcmp(key, "tier"));
}

/* err for the header field key where got (the journal's) and want (this run's) differ; its selection as
 * the interrupted run spelled it, when it has one, says what to pass. */
static void field_error(const char *path, const json_t *got, const json_t *want, const char *key, char *err,
                        size_t errlen)
{
    char a[160], b[160], given[1000], sel[1024] = "";
    short_json(json_object_get(got, key), a, sizeof a);
    short_json(json_object_get(want, key), b, sizeof b);
    const json_t *f = json_object_get(got, "filter");
    if (json_is_string(f) && json_string_length(f)) {
        short_json(f, given, sizeof given);
        snprintf(sel, sizeof sel, "; its selection: %s", given);
    }
    snprintf(err, errlen, "%s: header field %s: the interrupted run had %s, this run %s (resume with its arguments%s)",
             path, key, a, b, sel);
}

/* The header line (len bytes at line) against selection s, by the rule of the line's format. 0, or -1
 * with err naming the field. */
static int check_header(const char *path, const moects_journal_sel *s, const char *line, size_t len, char *err,
                        size_t errlen)
{
    json_error_t je;
    json_t *got = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je), *want = NULL, *v;
    if (!json_is_object(got)) {
        snprintf(err, errlen, "%s: line 1: not a journal header (%s)", path, got ? "not an object" : je.text);
        json_decref(got);
        return -1;
    }
    const json_t *f = json_object_get(got, "moects_journal");
    json_int_t fmt = json_is_integer(f) ? json_integer_value(f) : 0;
    const char *key, *bad = NULL;
    if (fmt != 1 && fmt != FORMAT) {
        char a[160];
        short_json(f, a, sizeof a);
        snprintf(err, errlen, "%s: header field moects_journal: the interrupted run had %s, this moects reads formats "
                 "1 and %d (resume with the moects that wrote it)", path, a, FORMAT);
        bad = "moects_journal";
    } else if (!(want = header_json(s, (int)fmt))) {
        snprintf(err, errlen, "%s: out of memory", path);
        bad = "";
    }
    json_object_foreach(want, key, v) if (!bad && compared(key, (int)fmt) && !json_equal(v, json_object_get(got, key))) {
        bad = key;
        field_error(path, got, want, key, err, errlen);
    }
    json_object_foreach(got, key, v) if (!bad && !json_object_get(want, key)) {
        bad = key;
        snprintf(err, errlen, "%s: header field %s: unknown field", path, key);
    }
    json_decref(want);
    json_decref(got);
    return bad ? -1 : 0;
}

/* The whole file at fd into *text (malloc'ed, NUL-terminated), its size in *n. 0 or -1 (errno). */
static int slurp_fd(int fd, char **text, size_t *n)
{
    struct stat st;
    if (fstat(fd, &st) != 0) return -1;
    char *t = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (t && got < (size_t)st.st_size) {
        ssize_t r = pread(fd, t + got, (size_t)st.st_size - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    if (!t || got < (size_t)st.st_size) {
        free(t);
        if (!errno) errno = EIO;
        return -1;
    }
    t[got] = '\0';
    *text = t, *n = got;
    return 0;
}

/* The result lines of text (after the header, at from) into done; *keep: the bytes up to the last
 * whole result. A line is written whole with its newline last, so only a last line without a newline
 * is torn (left out of *keep); a line ending in a newline that is not a result is -1 with err, the
 * last one too. */
static int read_results(const char *path, const char *text, size_t n, size_t from, moects_run *done, size_t *keep,
                        char *err, size_t errlen)
{
    static moects_result r; /* large: not on the stack */
    *keep = from;
    for (size_t at = from, line = 2; at < n; line++) {
        const char *nl = memchr(text + at, '\n', n - at);
        if (!nl) return 0; /* torn: the run was killed while writing it */
        size_t end = (size_t)(nl - text) + 1;
        char where[40];
        snprintf(where, sizeof where, "line %zu ", line);
        if (moects__result_parse(text + at, end - 1 - at, path, where, &r, err, errlen) != 0) return -1;
        if (moects__run_push(done, &r) != 0) {
            snprintf(err, errlen, "%s: out of memory", path);
            return -1;
        }
        at = *keep = end;
    }
    return 0;
}

int moects__journal_resume(moects_journal *j, const char *outdir, const moects_journal_sel *s, moects_run *done,
                          char *err, size_t errlen)
{
    memset(done, 0, sizeof *done);
    snprintf(j->path, sizeof j->path, "%s/%s", outdir, MOECTS_JOURNAL);
    char *text = NULL;
    size_t n = 0, keep = 0;
    j->fd = open(j->path, O_RDWR | O_APPEND | O_CLOEXEC);
    if (j->fd < 0 || slurp_fd(j->fd, &text, &n) != 0) {
        snprintf(err, errlen, "%s: cannot open: %s", j->path, strerror(errno));
        moects__journal_close(j, 0);
        return -1;
    }
    const char *nl = memchr(text, '\n', n);
    int rc;
    if (!nl) rc = write_header(j, s, 0, err, errlen); /* killed while writing the header: afresh */
    else if (!(rc = check_header(j->path, s, text, (size_t)(nl - text), err, errlen)) &&
             !(rc = read_results(j->path, text, n, (size_t)(nl - text) + 1, done, &keep, err, errlen)) &&
             keep < n && ftruncate(j->fd, (off_t)keep) != 0) {
        snprintf(err, errlen, "%s: cannot cut its torn last line: %s", j->path, strerror(errno));
        rc = -1;
    }
    free(text);
    if (rc) {
        moects__oneline(err); /* jansson's "near '...'" quotes the file's bytes */
        moects__run_free(done);
        moects__journal_close(j, 0);
    }
    return rc;
}

int moects__journal_prior(const moects_run *done, const char *path, const moects_journal_sel *s,
                         const moects_result ***prior, char *err, size_t errlen)
{
    size_t nk = s->nkernels;
    moects__index ix = {0};
    char *used = calloc(done->n + 1, 1);
    *prior = calloc(s->ncases * nk + 1, sizeof **prior);
    if (!used || !*prior || moects__index_build(&ix, done) != 0) {
        free(used), free(*prior), *prior = NULL;
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    for (size_t c = 0; c < s->ncases; c++)
        for (size_t k = 0; k < nk; k++) {
            long i = s->kernels[k]->op == s->cases[c].op ? moects__index_find(&ix, s->kernels[k]->name, s->cases[c].id) : -1;
            if (i >= 0) (*prior)[c * nk + k] = &done->v[i], used[i] = 1;
        }
    moects__index_free(&ix);
    size_t i = 0;
    while (i < done->n && used[i]) i++;
    free(used);
    if (i == done->n) return 0;
    snprintf(err, errlen, "%s: line %zu: kernel %s on case %s: not in this run's selection, or journaled twice", path,
             i + 2, done->v[i].kernel, done->v[i].case_id);
    moects__oneline(err);
    free(*prior), *prior = NULL;
    return -1;
}

void moects__journal_add(moects_journal *j, const moects_result *r)
{
    if (!j->path[0] || j->fd < 0) return;
    moects__buf b = {0};
    moects__buf_result(&b, r);
    moects__buf_add(&b, "\n");
    if (b.oom || write_all(j->fd, b.s, b.n) != 0) {
        fprintf(stderr, "moects run: %s: %s: the journal stops here (the run goes on)\n", j->path,
                b.oom ? "out of memory" : strerror(errno));
        moects__journal_close(j, 0);
    }
    moects__buf_free(&b);
}

void moects__journal_close(moects_journal *j, int remove)
{
    if (!j->path[0]) return; /* never opened (a zeroed journal) */
    if (j->fd >= 0) close(j->fd);
    j->fd = -1;
    if (remove) unlink(j->path);
}
