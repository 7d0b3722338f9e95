/* errline.c: the one-line errors: the command line's for an argument a command does not take
 * (moects__bad_arg, harness/moects_commands.h) and libmoects' last error (moects_errmsg,
 * include/moects/moects.h; moects__set_error, capi_internal.h), per thread. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "capi_internal.h"
#include "moects.h"

#include "moects_commands.h"

void moects__bad_arg(const char *cmd, const char *arg, const char *const *valued)
{
    for (; *valued; valued++)
        if (!strcmp(arg, *valued)) {
            fprintf(stderr, "moects %s: %s: missing value\n", cmd, arg);
            return;
        }
    fprintf(stderr, "moects %s: unexpected argument \"%s\"\n", cmd, arg);
}

static _Thread_local char errbuf[1024];

const char *moects_errmsg(void) { return errbuf; }

void moects__set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
}
