/* moects_layout.h: the layout adapters (ref/layout.c): engine layouts of a case's tensors and back,
 * each a named, versioned convention (docs/adapters.md gives each one's source file and commit).
 * Pure byte permutations: no I/O, no arithmetic on values, so inverse(forward(x)) == x bit for bit.
 *
 * Every adapter sees its tensor as the canonical (moects) layout [batch][rows][cols] of bytes:
 *   w13.*    rows = N1 = 2I rows of W13 in moects' [gate | up] order (recipe w13=gate_up), cols =
 *            the bytes of one row (W13 BF16: 2H; MXFP4 codes: H/2; its scales: H/32; b13: 4);
 *            forward gives the engine's row order, same size;
 *   scales.* rows x cols = rows x K-blocks of linear block scales (one byte each: UE8M0 or UE4M3);
 *            forward gives per batch the 128x4 tiles (moects__adapter_bytes), padding 0xFF;
 *   fp4.*    cols = bytes of packed E2M1 codes (element 2j in the low nibble); forward swaps the
 *            nibbles of every byte, same size.
 * The inverse takes the forward's result and gives the canonical tensor back. */
#ifndef MOECTS_LAYOUT_H
#define MOECTS_LAYOUT_H
#include <stddef.h>
#include <stdint.h>

typedef enum {
    MOECTS_ADAPT_W13 = 1,    /* a row permutation of W13 (and of its scales and bias) */
    MOECTS_ADAPT_SCALES = 2, /* linear block scales <-> the 128x4 tile layout */
    MOECTS_ADAPT_FP4 = 3     /* the nibble order of packed E2M1 codes */
} moects_adapter_kind;

typedef struct {
    const char *name;       /* "w13.interleave1.v1": what it does, and the version of the convention */
    moects_adapter_kind kind;
    int param;              /* W13: the moects_w13_order it gives (ref/moects_layer.h); scales: the
                               block (16 NVFP4, 32 MXFP4); FP4: 0 */
    const char *convention; /* one line: the engine convention it implements and where it is read */
} moects_adapter;

/* The scale swizzle's padding byte: 0xFF, the NaN of UE8M0 and of E4M3 (DESIGN.md "Scale layouts":
 * a kernel that reads padding fails). vLLM's swizzle_blockscale pads with zeros; no kernel may read it. */
#define MOECTS_ADAPT_PAD 0xFF

size_t moects__adapter_count(void);
/* Adapter i (0 <= i < count), or NULL. */
const moects_adapter *moects__adapter_at(size_t i);
/* The adapter named name, or NULL. */
const moects_adapter *moects__adapter_find(const char *name);
/* Bytes of the result of adapting [batch][rows][cols] (forward: the engine layout; inverse: the
 * canonical one), or -1 with why ("rows 7: W13 has 2I rows, an even count") for a shape the
 * adapter cannot take: negative sizes, odd rows (w13), rows not a multiple of 16 (interleave8). */
int64_t moects__adapter_bytes(const moects_adapter *a, int inverse, int64_t batch, int64_t rows, int64_t cols,
                              char *why, size_t len);
/* Adapt src (moects__adapter_bytes(a, !inverse, ...) bytes) into dst (moects__adapter_bytes(a,
 * inverse, ...) bytes); src and dst must not overlap. Returns 0, or -1 with why as above. */
int moects__adapt(const moects_adapter *a, int inverse, int64_t batch, int64_t rows, int64_t cols,
                  const uint8_t *src, uint8_t *dst, char *why, size_t len);
/* The engine row of canonical W13 row n (0 <= n < rows) under W13 order adapter a: the row
 * permutation forward applies (dst[engine_row(n)] = src[n]). */
int64_t moects__adapter_w13_row(const moects_adapter *a, int64_t rows, int64_t n);
#endif
