/* moects_commands.h: the subcommands of the moects CLI; harness/cli/main.c dispatches argv to them.
 * One file each, harness/cli/cmd_<name>.c: the command's usage, its arguments and its stages; the
 * work of gate, merge, killmatrix and hashes is a function of harness/report/ on the parsed
 * arguments (harness/reports_commands.h), coverage's too (reports_internal.h). Each takes argv from
 * the command's name on (argv[0] "gate", argc >= 1), returns the process exit status (0 ok, 1
 * failures found, 2 bad usage or bad input) and prints one-line errors on stderr. */
#ifndef MOECTS_COMMANDS_H
#define MOECTS_COMMANDS_H

int moects__cmd_list(int argc, char **argv);     /* harness/cli/cmd_list.c */
int moects__cmd_run(int argc, char **argv);      /* harness/cli/cmd_run.c */
int moects__cmd_gate(int argc, char **argv);     /* harness/cli/cmd_gate.c */
int moects__cmd_coverage(int argc, char **argv); /* harness/cli/cmd_coverage.c */
int moects__cmd_merge(int argc, char **argv);    /* harness/cli/cmd_merge.c */
int moects__cmd_killmatrix(int argc, char **argv); /* harness/cli/cmd_killmatrix.c */
int moects__cmd_export(int argc, char **argv);   /* harness/cli/cmd_export.c */
int moects__cmd_verify(int argc, char **argv);   /* harness/cli/cmd_verify.c */
int moects__cmd_case(int argc, char **argv);     /* harness/cli/cmd_case.c */
int moects__cmd_hashes(int argc, char **argv);   /* harness/cli/cmd_hashes.c */

/* The one-line error for an argument command cmd does not take: "moects CMD: ARG: missing value"
 * when arg is one of the NULL-terminated value-taking options (given last), else "moects CMD:
 * unexpected argument "ARG"". harness/model/errline.c. */
void moects__bad_arg(const char *cmd, const char *arg, const char *const *valued);

#endif
