/* caseadd.c: moects_case_add (include/moects/moects.h), the library's door to `moects case add`: the
 * same checks and store (harness/run/localcase.c moects__case_add) that harness/cli/cmd_case.c calls,
 * for bindings (python/moects/capture.py writes an engine's tensors as a file and adds it here). */
#include <stdio.h>

#include "capi_internal.h"
#include "moects_runner.h"

int moects_case_add(const char *file, const char *cases_dir, const char *name, char *id, size_t idlen)
{
    if (!file || !id || !idlen) return moects__set_error("case add: no file or id buffer"), -1;
    char dir[1024], err[4600];
    if (cases_dir && *cases_dir) snprintf(dir, sizeof dir, "%s", cases_dir);
    else moects__local_dir(moects_default_root(), dir, sizeof dir);
    int existed = 0;
    if (moects__case_add(file, dir, name, id, idlen, &existed, err, sizeof err)) return moects__set_error("%s", err), -1;
    return existed ? 1 : 0;
}
