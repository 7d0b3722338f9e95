/* kernel_py.c: the parent's view of `moects run --kernel-py MODULE:NAME` kernels. The parent never
 * imports Python (nor initialises CUDA): it asks `$MOECTS_PYTHON -m moects._worker --describe` for the
 * kernels' descriptions (one JSON line: name, op, device, recipe, tol, acc, bug, batch_invariant) and
 * makes descriptor copies without callbacks, used to pair kernels with cases and to report; the tasks
 * run in exec'd workers (harness/run/runner.c). DESIGN.md "Kernels from Python, and from any language". */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capi_internal.h"
#include "moects_runner.h"
#include "moects_op.h"

int moects__libmoects_path(char *buf, size_t len)
{
    const char *e = getenv("MOECTS_LIB");
    if (e && *e) return snprintf(buf, len, "%s", e) < (int)len ? 0 : -1;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = '\0';
    snprintf(buf, len, "%s/../lib/libmoects.so.0", exe); /* build/bin -> build/lib; PREFIX/bin -> PREFIX/lib */
    char *real = realpath(buf, NULL);
    if (!real) return -1;
    snprintf(buf, len, "%s", real);
    free(real);
    return 0;
}

/* What to do when py cannot import the moects package (README.md "Test your kernel"), naming this
 * build's checkout when it has the package. */
static void no_package_hint(const char *py, char *buf, size_t len)
{
    const char *src = "CHECKOUT";
#ifdef MOECTS_SOURCE_DIR
    if (access(MOECTS_SOURCE_DIR "/python/moects/_worker.py", R_OK) == 0) src = MOECTS_SOURCE_DIR;
#endif
    snprintf(buf, len, "; %s cannot import the moects package: set PYTHONPATH=%s/python, or MOECTS_PYTHON to a "
             "Python that has it (pip install %s/python in a venv, then MOECTS_PYTHON=VENV/bin/python)", py, src, src);
}

/* Run the describe command, its stdout and stderr in one pipe (no deadlock on a noisy import): the
 * last line that starts with '[' (the JSON) in *out (malloc'ed); on failure the last other line in err. */
static int describe(char *const *specs, size_t n, const char *lib, char **out, char *err, size_t errlen)
{
    const char *py = getenv("MOECTS_PYTHON");
    py = py && *py ? py : "python3";
    int op[2];
    if (pipe(op)) return snprintf(err, errlen, "pipe: %s", strerror(errno)), -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return snprintf(err, errlen, "fork: %s", strerror(errno)), -1;
    if (pid == 0) {
        dup2(op[1], 1), dup2(op[1], 2);
        close(op[0]), close(op[1]);
        const char **argv = calloc(5 + 2 * n, sizeof *argv);
        size_t k = 0;
        if (!argv) _exit(127);
        argv[k++] = py, argv[k++] = "-m", argv[k++] = "moects._worker", argv[k++] = "--describe";
        for (size_t i = 0; i < n; i++) argv[k++] = "--kernel-py", argv[k++] = specs[i];
        setenv("MOECTS_LIB", lib, 1);
        execvp(py, (char *const *)argv);
        fprintf(stderr, "cannot start %s: %s\n", py, strerror(errno));
        _exit(127);
    }
    close(op[1]);
    FILE *f = fdopen(op[0], "r");
    char *line = NULL, *json = NULL, last[1024] = "";
    size_t cap = 0;
    for (ssize_t l; f && (l = getline(&line, &cap, f)) > 0;) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '[') free(json), json = strdup(line);
        else if (line[0]) snprintf(last, sizeof last, "%s", line);
    }
    free(line);
    if (f) fclose(f);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !json) {
        free(json);
        int m = snprintf(err, errlen, "%s -m moects._worker --describe failed (%s%d)%s%s", py,
                         WIFEXITED(st) ? "exit " : "signal ", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
                         last[0] ? ": " : "", last);
        /* "No module named 'moects'", or "No module named moects._worker" when a folder named moects
         * in the working directory (a checkout) shadows the package */
        if (m >= 0 && (size_t)m < errlen &&
            (strstr(last, "No module named 'moects") || strstr(last, "No module named moects")))
            no_package_hint(py, err + m, errlen - (size_t)m);
        return -1;
    }
    *out = json;
    return 0;
}

static char *dup_or_null(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? strdup(s) : NULL;
}

/* One description into a descriptor (no callbacks). */
static int from_json(json_t *o, size_t i, moects_kernel *k, char *err, size_t errlen)
{
    json_t *tol = json_object_get(o, "tol"), *acc = json_object_get(o, "acc");
    k->abi_version = MOECTS_KERNEL_ABI_VERSION;
    k->name = dup_or_null(o, "name");
    k->op = (moects_op)json_integer_value(json_object_get(o, "op"));
    k->device = (moects_device)json_integer_value(json_object_get(o, "device"));
    k->recipe = dup_or_null(o, "recipe");
    k->bug = dup_or_null(o, "bug");
    k->tol.max_calc_diff = json_number_value(json_object_get(tol, "max_calc_diff"));
    k->tol.max_ulp = (uint32_t)json_integer_value(json_object_get(tol, "max_ulp"));
    k->acc.bits = (uint32_t)json_integer_value(json_object_get(acc, "bits"));
    k->acc.truncation = (int)json_integer_value(json_object_get(acc, "truncation"));
    k->split_k.max_splits = (uint32_t)json_integer_value(json_object_get(acc, "bf16_split_k"));
    k->split_k.dtype = k->split_k.max_splits ? MOECTS_BF16 : 0;
    k->flags = json_is_true(json_object_get(o, "batch_invariant")) ? MOECTS_KERNEL_BATCH_INVARIANT : 0;
    moects_recipe r;
    if (!k->name || !moects__op(k->op) ||
        (k->device != MOECTS_DEVICE_CPU && k->device != MOECTS_DEVICE_CUDA))
        return snprintf(err, errlen, "kernel %zu: name, op or device missing or unknown", i), -1;
    if (k->recipe && moects__recipe_parse(k->recipe, k->op, &r) != 0)
        return snprintf(err, errlen, "kernel %s: recipe: unknown \"%s\"", k->name, k->recipe), -1;
    return 0;
}

int moects__kernel_py_load(char *const *specs, size_t n, const char *lib, const moects_kernel ***v, size_t *nv,
                           char *err, size_t errlen)
{
    char *text = NULL;
    if (describe(specs, n, lib, &text, err, errlen)) return -1;
    json_error_t je;
    json_t *a = json_loads(text, JSON_DISABLE_EOF_CHECK, &je);
    free(text);
    if (!json_is_array(a)) {
        json_decref(a);
        return snprintf(err, errlen, "--describe: not a JSON array: %s", je.text), -1;
    }
    int rc = 0;
    size_t m = json_array_size(a);
    const moects_kernel **nvv = realloc(*v, (*nv + m + 1) * sizeof **v);
    moects_kernel *ks = calloc(m + 1, sizeof *ks); /* live for the run (the process) */
    if (!nvv || !ks) rc = (snprintf(err, errlen, "out of memory"), -1);
    if (nvv) *v = nvv;
    for (size_t i = 0; rc == 0 && i < m; i++) {
        rc = from_json(json_array_get(a, i), i, &ks[i], err, errlen);
        if (rc == 0) (*v)[(*nv)++] = &ks[i];
    }
    json_decref(a);
    return rc;
}
