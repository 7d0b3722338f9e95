/* names.c: the words used for routings, data kinds and tiers in case ids and case files. */
#include <string.h>

#include "moects_cases.h"

static const char *const ROUTING[] = {"uniform", "skewed", "zero-expert", "hot-rank", "stale-ids", "neg-ids",
                                      "no-local", "dispatched"};
static const char *const DATA[] = {"exact", "adversarial", "nan", "negzero"};

const char *moects__routing_name(moects_routing r)
{
    return (unsigned)r < sizeof ROUTING / sizeof *ROUTING ? ROUTING[r] : "?";
}

int moects__routing_parse(const char *s, moects_routing *out)
{
    for (unsigned i = 0; i < sizeof ROUTING / sizeof *ROUTING; i++)
        if (!strcmp(s, ROUTING[i])) {
            *out = (moects_routing)i;
            return 0;
        }
    return -1;
}

const char *moects__data_name(moects_data d) { return (unsigned)d < sizeof DATA / sizeof *DATA ? DATA[d] : "?"; }

int moects__data_parse(const char *s, moects_data *out)
{
    for (unsigned i = 0; i < sizeof DATA / sizeof *DATA; i++)
        if (!strcmp(s, DATA[i])) {
            *out = (moects_data)i;
            return 0;
        }
    return -1;
}

int moects__tier_parse(const char *s, moects_tier *out)
{
    if (!strcmp(s, "smoke")) *out = MOECTS_TIER_SMOKE;
    else if (!strcmp(s, "full")) *out = MOECTS_TIER_FULL;
    else if (!strcmp(s, "large")) *out = MOECTS_TIER_LARGE;
    else if (!strcmp(s, "local")) *out = MOECTS_TIER_LOCAL;
    else return -1;
    return 0;
}

const int64_t moects_tile_windows[23] = {0, 1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33,
                                         63, 64, 65, 127, 128, 129, 255, 256, 257};

static const char *const MOE_FORMAT[] = {"?", "mxfp4", "nvfp4", "w4a8", "w4a16"};
static const char *const ROW_LAYOUT[] = {"?", "contiguous", "masked", "offsets"};

const char *moects__moe_format_name(moects_moe_format f)
{
    return f >= MOECTS_MOE_MXFP4 && f <= MOECTS_MOE_W4A16 ? MOE_FORMAT[f] : "?";
}

int moects__moe_format_parse(const char *s, moects_moe_format *out)
{
    for (int i = MOECTS_MOE_MXFP4; i <= MOECTS_MOE_W4A16; i++)
        if (!strcmp(s, MOE_FORMAT[i])) {
            *out = (moects_moe_format)i;
            return 0;
        }
    return -1;
}

const char *moects__row_layout_name(moects_row_layout r)
{
    return r >= MOECTS_ROWS_CONTIGUOUS && r <= MOECTS_ROWS_OFFSETS ? ROW_LAYOUT[r] : "?";
}

int moects__row_layout_parse(const char *s, moects_row_layout *out)
{
    for (int i = MOECTS_ROWS_CONTIGUOUS; i <= MOECTS_ROWS_OFFSETS; i++)
        if (!strcmp(s, ROW_LAYOUT[i])) {
            *out = (moects_row_layout)i;
            return 0;
        }
    return -1;
}
