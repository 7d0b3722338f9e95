/* main.c: the moects command line: `moects list|run|gate|coverage|merge ...` (DESIGN.md
 * "Harness"). Each subcommand parses its own options; see moects_commands.h. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moects_commands.h"
#include "moects_op.h"

#ifndef MOECTS_VERSION
#define MOECTS_VERSION "0.1"
#endif

static void usage(FILE *f)
{
    fputs("usage: moects COMMAND [ARGS]\n"
          "  list      case ids (and tiers), or --kernels\n"
          "  run       run kernels on cases against the references; TAP on stdout\n"
          "  gate      compare a run with a baseline or must-pass lists\n"
          "  coverage  models x layouts x kernels coverage report\n"
          "  merge     merge shard results into one run\n"
          "  export    cases as safetensors files (inputs, references) for a kernel in any language\n"
          "  verify    judge the outputs a program wrote beside exported cases\n"
          "  case      case add FILE: a local case from an op's captured inputs (tier local)\n"
          "  hashes    compare the input and reference hashes of two runs\n"
          "  killmatrix  mutants x case families: which cases caught each mutant\n"
          "`moects COMMAND --help` for a command's options.\n",
          f);
}

/* MOECTS_EXE: this binary, for the processes of a run that start moects again (the ranks of an
 * ep_dispatch_combine CUDA kernel: `moects __ep-rank`), unless the caller named another. */
static void name_self(void)
{
    char self[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || getenv("MOECTS_EXE")) return;
    self[n] = '\0';
    setenv("MOECTS_EXE", self, 0);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "__ep-rank")) return moects__ed_rank_main(argc - 1, argv + 1);
    name_self();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *c = argv[1];
    if (!strcmp(c, "list")) return moects__cmd_list(argc - 1, argv + 1);
    if (!strcmp(c, "run")) return moects__cmd_run(argc - 1, argv + 1);
    if (!strcmp(c, "gate")) return moects__cmd_gate(argc - 1, argv + 1);
    if (!strcmp(c, "coverage")) return moects__cmd_coverage(argc - 1, argv + 1);
    if (!strcmp(c, "merge")) return moects__cmd_merge(argc - 1, argv + 1);
    if (!strcmp(c, "export")) return moects__cmd_export(argc - 1, argv + 1);
    if (!strcmp(c, "verify")) return moects__cmd_verify(argc - 1, argv + 1);
    if (!strcmp(c, "case")) return moects__cmd_case(argc - 1, argv + 1);
    if (!strcmp(c, "hashes")) return moects__cmd_hashes(argc - 1, argv + 1);
    if (!strcmp(c, "killmatrix")) return moects__cmd_killmatrix(argc - 1, argv + 1);
    if (!strcmp(c, "--version") || !strcmp(c, "version")) {
        printf("moects %s\n", MOECTS_VERSION);
        return 0;
    }
    if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "moects: unknown command \"%s\" (list, run, gate, coverage, merge, export, verify, case, hashes, killmatrix)\n", c);
    return 2;
}
