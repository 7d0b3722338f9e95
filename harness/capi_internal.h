/* capi_internal.h: what the libmoects API files share (api/capi.c, api/export.c, run/casefile.c,
 * run/safetensors.c, run/task.c, cli/cmd_export.c, cli/cmd_verify.c). Internal: moects__ names. */
#ifndef MOECTS_CAPI_INTERNAL_H
#define MOECTS_CAPI_INTERNAL_H
#include "moects.h"
#include "moects_cases.h"
#include "moects_harness.h"
#include "moects_inputs.h"
#include "moects_ref.h"

#ifndef MOECTS_VERSION
#define MOECTS_VERSION "0.1"
/* ---- kernel_py.c ---- */
/* This build's libmoects: $MOECTS_LIB, else ../lib/libmoects.so.0 beside the running binary. 0 or -1. */
int moects__libmoects_path(char *buf, size_t len);
/* Append the kernels of --kernel-py specs (descriptions from `python -m moects._worker --describe`,
 * no callbacks) to *v. 0, or -1 with err. */
int moects__kernel_py_load(char *const *specs, size_t n, const char *lib, const moects_kernel ***v, size_t *nv,
                           char *err, size_t errlen);

#endif

/* Set the calling thread's moects_errmsg() (printf format). */
void moects__set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Case i of l, or NULL with the error set. */
const moects_case *moects__caselist_case(const moects_caselist *l, size_t i);
/* The JSON object of case c (moects_case_json); in: its built inputs, which fix the rows (ep_gather
 * M_sum, moe_gemm M), or NULL (-1 there). malloc'ed, NULL out of memory. */
char *moects__case_json(const moects_case *c, const moects_inputs *in);
/* Case data of case c for seed (moects_casedata_build). */
moects_casedata *moects__casedata_of(const moects_case *c, uint64_t seed);
const moects_case *moects__casedata_case(const moects_casedata *d);
const moects_inputs *moects__casedata_inputs(const moects_casedata *d);
/* The reference under recipe r, computed once (owned by d); NULL with the error set. */
const void *moects__casedata_ref(moects_casedata *d, moects_recipe r);
/* Input j / the output of in as a tensor description (moects_casedata_input / _output). */
void moects__tensor_describe(const moects_inputs *in, int j, moects_tensor_info *t);
void moects__output_describe(const moects_inputs *in, moects_tensor_info *t);
const moects_result *moects__judgement_result(const moects_judgement *j);
int moects__resultset_push(moects_resultset *s, const moects_result *r);
moects_run *moects__resultset_run(moects_resultset *s);
/* version, commit (of the working directory unless set), date, machine (unless set). */
void moects__run_metadata(moects_run *run);


/* ---- run/casefile.c (case files) and api/export.c ---- */
/* DIR/<case id, '/' -> "__"><suffix> into buf. */
void moects__case_file(char *buf, size_t len, const char *dir, const char *id, const char *suffix);
/* Write case c's exported file into dir: inputs, the references refs[r] under recipes[r] (nrec >= 1;
 * recipes[0] is the one verify uses unless told), metadata. 0, or -1 with err. */
int moects__export_case(const char *dir, const moects_case *c, uint64_t seed, const moects_inputs *in,
                        const char *const *recipes, const void *const *refs, int nrec, char *err, size_t errlen);
/* Write an output (the case's output dtype and dims) as path with one tensor "out". */
int moects__write_out(const char *path, const moects_inputs *in, const void *got, char *err, size_t errlen);
/* The case of an exported file's moects.case metadata (path names the file in err); a moe_gemm case is
 * the built-in registry's case of its id (api/export.c). */
int moects__case_from_json(const char *path, const char *json, moects_case *c, char *err, size_t errlen);

/* ---- run/localcase.c: local cases (issue 32), tier local ---- */
/* The case of a case file's moects.case JSON for an op whose shape holds its case: 0; 1 for a shape
 * whose rows per expert a local case's tensors give (moe_gemm: a registry case's come from its
 * model's routing, so `verify` takes the registry's case of that id); -1 with "PATH: moects.case:
 * FIELD: problem" in err; -2 for an op whose shape names a registry case, c's op and id set. */
int moects__case_parse(const char *path, const char *json, moects_case *c, char *err, size_t errlen);
/* `moects case add`: check a safetensors file of an op's inputs (export's names and layouts, its
 * moects.case, moects.seed, moects.recipe and moects.scalars metadata; ref.* tensors ignored) against
 * the op's contract, then store its tensors (blobs by content) and manifest in dir; the case's id
 * ("<op prefix>/local/[name-]<16 hex digits of content hash>") into id, *existed 1 when it was there
 * already. Nothing is written when the file is refused. 0, or -1 with one line "FILE: FIELD: rule". */
int moects__case_add(const char *file, const char *dir, const char *name, char *id, size_t idlen, int *existed,
                     char *err, size_t errlen);

/* ---- kernel_py.c ---- */
/* This build's libmoects: $MOECTS_LIB, else ../lib/libmoects.so.0 beside the running binary. 0 or -1. */
int moects__libmoects_path(char *buf, size_t len);
/* Append the kernels of --kernel-py specs (descriptions from `python -m moects._worker --describe`,
 * no callbacks) to *v. 0, or -1 with err. */
int moects__kernel_py_load(char *const *specs, size_t n, const char *lib, const moects_kernel ***v, size_t *nv,
                           char *err, size_t errlen);

#endif
