/* bounds.c: the load-time upper bounds of sizes read from model and regression files
 * (cases_internal.h MOECTS__MAX_*). */
#include "cases_internal.h"

int moects__check_max(const char *path, const char *pre, const char *field, int64_t x, int64_t min, int64_t max,
                      char *err, size_t errlen)
{
    if (x <= max) return 0;
    return moects__fail(err, errlen, "%s: %s%s: out of range (%lld..%lld)", path, pre, field, (long long)min,
                        (long long)max);
}
