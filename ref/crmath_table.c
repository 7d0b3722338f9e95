/* crmath_table.c: the hard cases of ref/crmath.c (moects_crmath.h), empty until
 * tools/crmath_scan.c generates them. */
#include "moects_crmath.h"

static const moects_cr_entry none[] = {{0, 0}};
const moects_cr_entry *const moects__cr_table[MOECTS_CR_NFN] = {none, none, none};
const size_t moects__cr_count[MOECTS_CR_NFN] = {0, 0, 0};
