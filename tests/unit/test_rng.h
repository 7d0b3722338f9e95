/* test_rng.h: splitmix64, the seeded generator of the tests (a test sets rng_state first). */
#ifndef TEST_RNG_H
#define TEST_RNG_H
#include <stdint.h>

static uint64_t rng_state;
static inline uint64_t rnd64(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* The high 32 bits of rnd64(). */
static inline uint32_t rnd(void) { return (uint32_t)(rnd64() >> 32); }
#endif
