/* run_gpus.c: `moects run --gpus LIST|all` (issue 33 item 1; docs/scale-out.md "Every GPU of a host"):
 * the GPUs a run's workers are spread over, one worker set per GPU (harness/run/runner.c starts each
 * worker with CUDA_VISIBLE_DEVICES set to its GPU and stamps its results with it). A list's numbers
 * are ordinals of the devices the driver reports to this process (cudaGetDeviceCount, asked of a
 * child: moects__probe_devices): with CUDA_VISIBLE_DEVICES already set, its entries in order, and a
 * worker gets the entry itself ("3", "GPU-<uuid>", "MIG-..."); else "0".."count-1".
 * MOECTS_FAKE_GPUS=N stands in for the driver on a host where it reports no device: N GPUs
 * "0".."N-1" with no CUDA behind them (the CUDA kernels still SKIP), so that a CPU run is spread over
 * several in the tests. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"

/* A decimal ordinal 0..MOECTS_GPUS_MAX-1 (digits only): 0, or -1. */
static int parse_ordinal(const char *s, int *out)
{
    char *e;
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (*e || errno || v >= MOECTS_GPUS_MAX) return -1;
    *out = (int)v;
    return 0;
}

int moects__cli_gpus_parse(cli *o, const char *spec)
{
    o->gpus = spec;
    o->ngpu_ids = 0;
    if (!strcmp(spec, "all")) return 0;
    char tok[32];
    for (const char *p = spec;; p++) {
        size_t n = strcspn(p, ",");
        int v;
        snprintf(tok, sizeof tok, "%.*s", (int)(n < sizeof tok ? n : sizeof tok - 1), p);
        if (n >= sizeof tok || parse_ordinal(tok, &v))
            return moects__cli_bad(o, "--gpus %s: \"%.*s\" is not a GPU number (a comma list of ordinals, "
                                      "--gpus 0,1,2, or all)", spec, (int)n, p);
        for (size_t i = 0; i < o->ngpu_ids; i++)
            if (o->gpu_ids[i] == v) return moects__cli_bad(o, "--gpus %s: GPU %d listed twice", spec, v);
        if (o->ngpu_ids == MOECTS_GPUS_MAX) return moects__cli_bad(o, "--gpus %s: more than %d GPUs", spec, MOECTS_GPUS_MAX);
        o->gpu_ids[o->ngpu_ids++] = v;
        if (!p[n]) return 0;
        p += n;
    }
}

/* The visible GPUs' CUDA_VISIBLE_DEVICES values into g->ids (all of them, in ordinal order): the probed
 * count's, named by the variable already set or by number, else MOECTS_FAKE_GPUS's. 0, or 2. */
static int visible(const cli *o, const moects_device_info *dev, moects_gpu_list *g, int *count, const char **whose)
{
    const char *fake = getenv("MOECTS_FAKE_GPUS"), *cvd = getenv("CUDA_VISIBLE_DEVICES");
    int nfake = 0;
    if (fake && *fake && (parse_ordinal(fake, &nfake) || nfake < 1))
        return moects__cli_bad(o, "MOECTS_FAKE_GPUS=%s: not a count of GPUs 1..%d", fake, MOECTS_GPUS_MAX - 1);
    if (nfake && dev->count > 0)
        fprintf(stderr, "moects run: MOECTS_FAKE_GPUS=%s ignored: the driver reports %d CUDA device%s\n", fake,
                dev->count, dev->count == 1 ? "" : "s");
    g->fake = dev->count <= 0 && nfake > 0;
    *count = g->fake ? nfake : dev->count > 0 ? dev->count : 0;
    *whose = g->fake ? "of MOECTS_FAKE_GPUS" : "the driver reports";
    size_t cap = (size_t)*count * 12 + (cvd ? strlen(cvd) + 1 : 0) + 1;
    if (!(g->buf = malloc(cap)) || !(g->all = calloc((size_t)*count + 1, sizeof *g->all)))
        return moects__cli_bad(o, "out of memory");
    char *save = NULL, *t = NULL;
    if (!g->fake && cvd && *cvd) t = strtok_r(strcpy(g->buf + (size_t)*count * 12, cvd), ",", &save);
    for (int i = 0; i < *count; i++) { /* CUDA counts the entries up to the first it cannot use */
        if (t) g->all[i] = t, t = strtok_r(NULL, ",", &save);
        else g->all[i] = g->buf + 12 * (size_t)i, snprintf(g->all[i], 12, "%d", i);
    }
    return 0;
}

int moects__cli_gpus_resolve(const cli *o, const moects_device_info *dev, moects_gpu_list *g)
{
    int count = 0, rc;
    const char *whose = "";
    memset(g, 0, sizeof *g);
    if ((rc = visible(o, dev, g, &count, &whose))) return rc;
    for (size_t i = 0; i < o->ngpu_ids; i++)
        if (o->gpu_ids[i] >= count) {
            if (count) return moects__cli_bad(o, "--gpus %s: GPU %d is beyond the %d GPU%s %s (0..%d)", o->gpus,
                                              o->gpu_ids[i], count, count == 1 ? "" : "s", whose, count - 1);
            return moects__cli_bad(o, "--gpus %s: GPU %d is beyond the 0 GPUs the driver reports (no CUDA device: %s)",
                                   o->gpus, o->gpu_ids[i], dev->why[0] ? dev->why : "not asked");
        }
    size_t n = o->ngpu_ids ? o->ngpu_ids : (size_t)count;
    if (!(g->ids = calloc(n + 1, sizeof *g->ids))) return moects__cli_bad(o, "out of memory");
    for (size_t i = 0; i < n; i++) g->ids[i] = g->all[o->ngpu_ids ? o->gpu_ids[i] : (int)i];
    g->n = n;
    return 0;
}

void moects__cli_gpus_free(moects_gpu_list *g)
{
    free(g->ids), free(g->all), free(g->buf);
    memset(g, 0, sizeof *g);
}
