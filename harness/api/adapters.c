/* adapters.c: the layout adapters of libmoects (include/moects/moects.h "layout adapters") over
 * ref/layout.c, with the API's errors (moects_errmsg naming the adapter and the field). */
#include <inttypes.h>

#include "capi_internal.h"
#include "moects_layout.h"

size_t moects_adapter_count(void) { return moects__adapter_count(); }

const char *moects_adapter_name(size_t i)
{
    const moects_adapter *a = moects__adapter_at(i);
    if (!a) moects__set_error("adapter %zu: out of range (%zu adapters)", i, moects__adapter_count());
    return a ? a->name : NULL;
}

const char *moects_adapter_convention(size_t i)
{
    const moects_adapter *a = moects__adapter_at(i);
    if (!a) moects__set_error("adapter %zu: out of range (%zu adapters)", i, moects__adapter_count());
    return a ? a->convention : NULL;
}

/* The adapter named name, or NULL with the error set. */
static const moects_adapter *find(const char *name)
{
    const moects_adapter *a = moects__adapter_find(name);
    if (!a) moects__set_error("adapter \"%s\": no such adapter (moects_adapter_name lists them)", name ? name : "");
    return a;
}

int64_t moects_adapter_bytes(const char *name, int inverse, int64_t batch, int64_t rows, int64_t cols)
{
    const moects_adapter *a = find(name);
    char why[160];
    if (!a) return -1;
    const int64_t n = moects__adapter_bytes(a, inverse, batch, rows, cols, why, sizeof why);
    if (n < 0) moects__set_error("adapter %s: %s", name, why);
    return n;
}

int moects_adapt(const char *name, int inverse, int64_t batch, int64_t rows, int64_t cols, const void *src,
                 size_t src_bytes, void *dst, size_t dst_bytes)
{
    const int64_t in = moects_adapter_bytes(name, !inverse, batch, rows, cols);
    const int64_t out = moects_adapter_bytes(name, inverse, batch, rows, cols);
    if (in < 0 || out < 0) return -1;
    if ((uint64_t)in != src_bytes || (uint64_t)out != dst_bytes)
        return moects__set_error("adapter %s: src %zu bytes, dst %zu bytes: [%" PRId64 ", %" PRId64 ", %" PRId64
                                 "] %s takes %" PRId64 " and gives %" PRId64,
                                 name, src_bytes, dst_bytes, batch, rows, cols, inverse ? "back" : "forward", in,
                                 out), -1;
    if ((!src || !dst) && out > 0) return moects__set_error("adapter %s: src or dst is NULL", name), -1;
    char why[160];
    if (moects__adapt(moects__adapter_find(name), inverse, batch, rows, cols, src, dst, why, sizeof why) != 0)
        return moects__set_error("adapter %s: %s", name, why), -1;
    return 0;
}
