/* moects_progress.h: the progress lines of `moects run` on stderr (harness/run/progress.c), for the
 * runner's parent (harness/run/runner.c). Internal. */
#ifndef MOECTS_PROGRESS_H
#define MOECTS_PROGRESS_H
#include <stddef.h>

#include "moects_cases.h"

typedef struct {
    int mode;                  /* 1 a terminal (a redrawn line), 2 a log (a line a minute) */
    size_t nt, ndone;          /* runs to do in this process, done */
    double est_total, est_done; /* estimated seconds (moects__progress_run_s) of those, of the done ones */
    double t0, next;           /* the start, when a timed line is next due (moects__now_s seconds) */
    int jobs;                  /* workers the estimate is divided by */
} moects__progress;

/* A run's estimated seconds on one worker (its case's cost times its op's fitted rate: rough). */
double moects__progress_run_s(const moects_case *c);
/* The first line, at once: "moects run: 1,038 cases, 24 kernels: 7,926 runs (...); about 6 min on this
 * machine (2 jobs; rough ...)", "(8 jobs over 4 GPUs; ...)" when gpus > 1. nruns: all runs, nprior of
 * them kept (--resume); est_s: the estimated seconds of the others on one worker, divided here by jobs. */
void moects__progress_start(moects__progress *pg, int mode, size_t ncases, size_t nkernels, size_t nruns, size_t nprior,
                           double est_s, int jobs, size_t gpus);
/* A run (kernel on case_id, est_s its estimated seconds) finished: counted, and the line redrawn (a
 * terminal) or said if due. */
void moects__progress_done(moects__progress *pg, double est_s, const char *kernel, const char *case_id);
/* The timed line if due (kernel NULL), or the terminal's line with this kernel and case. */
void moects__progress_tick(moects__progress *pg, const char *kernel, const char *case_id);
/* The terminal's line cleared. */
void moects__progress_end(moects__progress *pg);

#endif
