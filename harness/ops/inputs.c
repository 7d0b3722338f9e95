/* inputs.c: what every op's inputs share (DESIGN.md "Determinism", "Cases", bug-reports.md): the
 * counter-based generator, guarded tensor slots, value draws two ops use, and the build/bind/free
 * entry points that call the op table. Every value is a function of (seed, case id, tensor name,
 * element index) through SplitMix64, never of a running generator state, so generation order and
 * the rest of the run do not matter. Bulk tensors of large cases are tiled from a random pool (one
 * memcpy per row) to stay fast. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_guard.h"
#include "moects_harness.h"
#include "moects_op.h"
#include "ops_internal.h"

#define GOLDEN 0x9e3779b97f4a7c15ull

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t moects__input_key(uint64_t seed, const char *case_id, const char *tensor)
{
    uint64_t k = mix64(seed + GOLDEN);
    k = mix64(k ^ fnv1a(case_id));
    return mix64(k ^ fnv1a(tensor));
}

uint64_t moects__input_u64(uint64_t key, uint64_t i) { return mix64(key + (i + 1) * GOLDEN); }


size_t moects__swizzle_offset(int64_t r, int64_t kb, int64_t nkb)
{
    int64_t kb4 = (nkb + 3) / 4;
    return (size_t)(((r / 128) * kb4 + kb / 4) * 512 + (r % 32) * 16 + ((r / 32) % 4) * 4 + kb % 4);
}

size_t moects_swizzle_bytes(int64_t rows, int64_t nkb)
{
    return (size_t)(((rows + 127) / 128) * 128) * (size_t)(((nkb + 3) / 4) * 4);
}


void moects__inputs_free(moects_inputs *in)
{
    for (int i = 0; i < in->nt; i++)
        if (!in->t[i].borrowed) moects__guard_free(&in->t[i].g);
    free(in->row_valid);
    free(in->row_expert);
    memset(in, 0, sizeof *in);
}

/* Allocate tensor slot i (zero bytes: NULL). -2 with a message when memory runs out. */
int moects__input_alloc(moects_inputs *in, int i, const char *name, size_t bytes, const char *id, char *err,
                        size_t errlen)
{
    in->t[i].name = name;
    in->t[i].bytes = bytes;
    in->t[i].host = NULL;
    in->t[i].borrowed = 0;
    if (i >= in->nt) in->nt = i + 1;
    if (bytes == 0) return 0;
    /* between guard pages (harness/model/buffer.c): a kernel's stray access faults at the access. Shared:
     * a fork for a kernel's call copies none of its page table (the child maps it read-only).
     * Measured against private mappings: 4 KiB pages built ~15% faster (48 ep_gather cases), with
     * MADV_HUGEPAGE the 5.5 GB addr64 case's inputs took 20-28 s instead of ~5 (page allocation). */
    if (moects__guard_alloc(&in->t[i].g, name, bytes, moects__guard_row_bytes(in, i), MOECTS_GUARD_SHARED) == 0)
        in->t[i].host = in->t[i].g.data;
    if (!in->t[i].host) {
        snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM " (%zu bytes for %s)", id, bytes, name);
        return -2;
    }
    return 0;
}

void moects__input_borrow(moects_inputs *dst, int i, const moects_inputs *src)
{
    dst->t[i] = src->t[i];
    dst->t[i].borrowed = 1;
    if (i >= dst->nt) dst->nt = i + 1;
}

float moects__f32_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* One x element (bf16 bits) of column col for data mode d from a 64-bit draw. negzero (signed
 * zeros and underflow, issue 13): columns col % 4 == 0 hold -0, == 1 negative subnormals, == 2
 * subnormals of either sign, == 3 exact values; with negzero's weights (weight_value) a product
 * of a subnormal underflows to a signed zero, so a token's sum is -0, +0 or the sign of the last
 * product (order), and a denormals-are-zero reading changes the sign. */
uint16_t moects__bf16_input(moects_data d, uint64_t u, int64_t col)
{
    uint16_t sign = (uint16_t)((u & 1) << 15);
    if (d == MOECTS_DATA_NEGZERO && col % 4 != 3) {
        uint16_t sub = (uint16_t)(1 + (u >> 1) % 127);
        return col % 4 == 0 ? 0x8000 : col % 4 == 1 ? (uint16_t)(0x8000 | sub) : (uint16_t)(sign | sub);
    }
    if (d == MOECTS_DATA_ADVERSARIAL) {
        uint16_t m = (uint16_t)((u >> 1) & 0x7f);
        unsigned sel = (unsigned)((u >> 8) & 63);
        int e;
        if (sel == 0) e = 0;             /* subnormal (or +-0 when m == 0) */
        else if (sel == 1) e = 1;        /* smallest normal binade, 2^-126 */
        else if (sel == 2) e = 254;      /* largest binade, 2^127 */
        else e = 127 + (int)((u >> 16) % 61) - 30; /* 2^-30 .. 2^30 */
        return (uint16_t)(sign | (uint16_t)(e << 7) | m);
    }
    if (d == MOECTS_DATA_NAN && ((u >> 20) & 511) == 0) {
        static const uint16_t special[4] = {0x7fc1, 0xffc1, 0x7f80, 0xff80}; /* NaN, -NaN, +-Inf */
        return special[(u >> 29) & 3];
    }
    /* exactness-preserving: 4 significant bits, exponents 2^-3 .. 2^3 */
    int e = 127 + (int)((u >> 4) % 7) - 3;
    uint16_t m = (uint16_t)(((u >> 1) & 7) << 4);
    return (uint16_t)(sign | (uint16_t)(e << 7) | m);
}

/* Draw expert j of token t: distinct from the token's earlier slots, not excl, not in
 * [xlo, xhi), per the routing rule. */
int64_t moects__pick_expert(const moects_case *c, uint64_t key, const int64_t *prev, int64_t t,
                           int64_t j, int64_t first_local, int64_t excl, int64_t xlo, int64_t xhi)
{
    int64_t E = c->E_global;
    for (int a = 0;; a++) {
        uint64_t u = moects__draw(key, ((uint64_t)t * (uint64_t)c->k + (uint64_t)j) * 64 + (uint64_t)a);
        int64_t e;
        if (c->routing == MOECTS_ROUTE_SKEWED) {
            /* Zipf-like: density ~ f^-2/3 near 0, hot experts start at this rank's first */
            double f = (double)(u >> 11) * 0x1p-53;
            e = ((int64_t)((double)E * f * f * f) + first_local) % E;
        } else {
            e = (int64_t)(u % (uint64_t)E);
        }
        if (a >= 64) { /* give up drawing: probe upwards deterministically */
            for (int64_t p = 0; p < E; p++, e = (e + 1) % E) {
                int dup = e == excl || (e >= xlo && e < xhi);
                for (int64_t q = 0; q < j && !dup; q++) dup = prev[q] == e;
                if (!dup) return e;
            }
            return -1; /* unreachable: k <= E - excluded experts is checked */
        }
        int dup = e == excl || (e >= xlo && e < xhi);
        for (int64_t q = 0; q < j && !dup; q++) dup = prev[q] == e;
        if (!dup) return e;
    }
}

uint8_t moects__fp4_scale_code(moects_fp4_format f, moects_data d, uint64_t u)
{
    unsigned sel = (unsigned)(u & 63);
    if (f == MOECTS_FP4_MXFP4) {
        if (d == MOECTS_DATA_NAN && sel == 0) return 0xff;
        if (d == MOECTS_DATA_ADVERSARIAL && sel < 8) {
            static const uint8_t special[8] = {0, 1, 2, 253, 254, 0, 1, 254};
            return special[sel];
        }
        if (d == MOECTS_DATA_ADVERSARIAL) return (uint8_t)(127 + (int)((u >> 8) % 41) - 20);
        return (uint8_t)(127 + (int)((u >> 8) % 9) - 4); /* 2^-4 .. 2^4 */
    }
    uint8_t m = (uint8_t)((u >> 8) & 7);
    if (d == MOECTS_DATA_NAN && sel == 0) return (u >> 16) & 1 ? 0xff : 0x7f;
    if (d == MOECTS_DATA_ADVERSARIAL) {
        if (sel < 8) return (uint8_t)(1 + (u >> 8) % 7); /* subnormal: 2^-9 .. 7*2^-9 */
        if (sel == 8) return 0x00;                        /* zero scale */
        uint8_t e = (uint8_t)(1 + (u >> 12) % 15);
        if (e == 15 && m == 7) m = 6;                     /* 0x7F is NaN; 0x7E = 448 */
        return (uint8_t)(e << 3 | m);
    }
    return (uint8_t)((4 + (u >> 12) % 7) << 3 | m);       /* normal, 2^-3 .. 15 */
}

const void *moects__inputs_shape(const moects_inputs *in) { return moects__op_of_inputs(in)->shape(in); }

void moects__inputs_bind(const moects_inputs *in, void *const ptr[MOECTS_INPUTS_MAX], void *out,
                        moects_op_args *args)
{
    memset(args, 0, sizeof *args);
    moects__op_of_inputs(in)->bind(in, ptr, out, args);
}

size_t moects__guard_row_bytes(const moects_inputs *in, int i) { return moects__op_of_inputs(in)->row_bytes(in, i); }

int moects__inputs_build_ex(const moects_case *c, uint64_t seed, int64_t pool_min_elems, moects_inputs *in, char *err,
                           size_t errlen)
{
    memset(in, 0, sizeof *in);
    const moects__op_def *op = moects__op(c->op);
    if (!op) return snprintf(err, errlen, "case %s: op: unknown (%d)", c->id, (int)c->op), -1;
    in->op = c->op;
    /* a local case: the generator's slots and shape facts from the manifest's seed, then its tensors */
    moects_case gen;
    if (c->file[0] && moects__local_gen(c, &seed, &gen, err, errlen)) return -1;
    int rc = op->build(c->file[0] ? &gen : c, seed, pool_min_elems, in, err, errlen);
    if (!rc && c->file[0]) rc = moects__local_fill(c, in, err, errlen);
    if (rc) moects__inputs_free(in);
    return rc;
}

int moects__inputs_build(const moects_case *c, uint64_t seed, moects_inputs *in, char *err, size_t errlen)
{
    return moects__inputs_build_ex(c, seed, MOECTS_POOL_MIN_ELEMS, in, err, errlen);
}
