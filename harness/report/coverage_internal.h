/* coverage_internal.h: what the coverage report (coverage.c) and the pre-launch check (prelaunch.c)
 * share inside harness/report/; `moects coverage` itself is harness/cli/cmd_coverage.c. */
#ifndef MOECTS_COVERAGE_INTERNAL_H
#define MOECTS_COVERAGE_INTERNAL_H
#include <stddef.h>

#include "moects.h"
#include "moects_cases.h"
#include "moects_registry.h"

/* The cases and models a coverage report is made over. */
typedef struct {
    moects_case_list cases;
    moects_model *models;
    int nmodels;
    char where[4096];      /* what was loaded, for the report */
    char models_dir[4096]; /* where the model files were looked for */
} moects__cov_registry;

/* dir: NULL (built-in of root), a source tree with cases/models, or a directory of model files.
 * 0, or -1 with "DIR: --registry: problem" in err. */
int moects__cov_registry_load(moects__cov_registry *r, const char *dir, const char *root, char *err, size_t errlen);
/* A registry without model files checks nothing: -1 with "DIR: --registry: no model files (*.json)". */
int moects__cov_registry_has_models(const moects__cov_registry *r, const char *registry_dir);
void moects__cov_registry_free(moects__cov_registry *r);
/* moects__dir_writable (as `moects run` checks --out): 0, or -1 with one line
 * "moects coverage: OPT: DIR: problem" on stderr. */
int moects__cov_dir_writable(const char *opt, const char *dir);
/* 1 when kernel k takes case c (its supports() on the op's kernel shape); else 0 with the reason in why. */
int moects__cov_kernel_takes(const moects_kernel *k, const moects_case *c, char *why, size_t wl);

#endif
