/* moects_task_internal.h: one task in a worker process, between the runner's protocol
 * (harness/run/runner.c) and the task itself (harness/run/task.c). Not installed. */
#ifndef MOECTS_TASK_INTERNAL_H
#define MOECTS_TASK_INTERNAL_H
#include <stdint.h>

#include "moects_harness.h"
#include "moects_kernel.h"
#include "moects_ref.h"

#define MOECTS__NRECIPES MOECTS_RECIPES_MAX /* recipes a worker caches references of */

/* Phases a worker announces to the parent (timeouts, timing of a task that dies). */
enum { PH_OTHER = 0, PH_INPUTS = 1, PH_REFERENCE = 2, PH_KERNEL = 3, PH_COMPARE = 4 };

/* How a task runs: the reference's threads, the recipes the case's kernels want, and the phase
 * notices (notify(ctx, phase, r): r holds the task's timing so far). */
typedef struct {
    int threads;      /* OpenBLAS threads for a reference computed in this task; <= 0: as set */
    unsigned recipes; /* bit r: a kernel of this case compares under recipe r */
    void (*notify)(void *ctx, int phase, const moects_result *r);
    void *ctx;
    /* issue 31: the GPU reference's mode (moects_gpuref_mode, gpu/moects_gpuref.h) or -1 (the CPU path
     * alone), and whether this case's GPU references are re-checked by the CPU one whatever the verdicts
     * (a smoke case, the 1% sample); a FAIL is re-checked always. */
    int refmode;
    int check;
    /* issue 31, item 4: the run's share directory (harness/run/refshare.c; NULL none), where a
     * reference computed here is written when share is set (a later task of the case may kill its
     * worker) and where a worker without the case's reference looks first */
    const char *share_dir;
    int share;
} moects__task_ctl;

/* A worker's cache between tasks: the case in hand (its inputs, references, device copies, bounds). */
typedef struct moects__worker moects__worker;

/* A worker with no case yet; dump_dir: run --dump's folder (NULL none); dev_alone: it has its device
 * to itself (free device memory then measures its kernels). NULL out of memory. */
moects__worker *moects__worker_new(const char *dump_dir, int dev_alone);
/* Drops the case in hand and frees ws. */
void moects__worker_free(moects__worker *ws);
/* Runs kernel k on case c (index ci in the run's list: the cache key) and fills r. Returns 0, 1 when
 * this worker must exit after the task (a kernel left it unusable), 2 when a fresh worker must run
 * the task again (memory an earlier kernel kept may be the cause of a SKIP). */
int moects__worker_task(moects__worker *ws, long ci, const moects_case *c, const moects_kernel *k, uint64_t seed,
                        int perf, const moects__task_ctl *tc, moects_result *r);

/* The recipe kernel k is compared under: its declared one, else (bound or tolerance) exact_v1; -1
 * for a recipe the op does not have. */
int moects__kernel_recipe(const moects_kernel *k, moects_op op);
/* r's phase times rounded to whole microseconds (down; the wall time up), so they never add up to
 * more than the wall time. */
void moects__round_timing(moects_result *r);

/* ---- harness/run/refshare.c: a case's references shared between its workers (issue 31, item 4) ---- */
/* A fresh directory for the run's shared references in dir[len] (/dev/shm, else $TMPDIR or /tmp). 0, or
 * -1 (dir ""): the run goes on without sharing. */
int moects__refshare_mkdir(char *dir, size_t len);
/* Writes the reference (bytes of ref, its XXH64, whether it came from the GPU and its CPU re-check
 * state) of case ci (id, seed) under recipe: 0, or -1 (nothing left behind). */
int moects__refshare_put(const char *dir, long ci, const char *id, uint64_t seed, int recipe, const void *ref,
                         size_t bytes, uint64_t xxh64, int gpu, int check);
/* The reference written so, in a malloc'd buffer of bytes, when its header names this case, seed, recipe
 * and size and its bytes hash to its XXH64; else NULL (then compute it). */
void *moects__refshare_get(const char *dir, long ci, const char *id, uint64_t seed, int recipe, size_t bytes,
                           uint64_t *xxh64, int *gpu, int *check);
/* Removes case ci's files for the recipes of bitmask recipes (its group is over). */
void moects__refshare_drop(const char *dir, long ci, unsigned recipes);
/* Removes the directory and whatever is left in it (a killed worker's temporary file). */
void moects__refshare_rmdir(const char *dir);

/* Seconds on a monotonic clock. */
double moects__now_s(void);
/* The runner's pipe I/O (harness/run/runner.c): all n bytes written, 0, or -1; all n bytes read, 1,
 * or 0 at EOF before any byte, -1 short or an error (EINTR retried). */
int moects__write_full(int fd, const void *p, size_t n);
int moects__read_full(int fd, void *p, size_t n);

#endif
