/* names.c: the words used for routings, data kinds and tiers in case ids and case files. */
#include <string.h>

#include "moects_cases.h"

static const char *const ROUTING[] = {"uniform", "skewed", "zero-expert", "hot-rank", "stale-ids", "neg-ids",
                                      "no-local"};
static const char *const DATA[] = {"exact", "adversarial", "nan", "negzero"};

const char *moects_routing_name(moects_routing r)
{
    return (unsigned)r < sizeof ROUTING / sizeof *ROUTING ? ROUTING[r] : "?";
}

int moects_routing_parse(const char *s, moects_routing *out)
{
    for (unsigned i = 0; i < sizeof ROUTING / sizeof *ROUTING; i++)
        if (!strcmp(s, ROUTING[i])) {
            *out = (moects_routing)i;
            return 0;
        }
    return -1;
}

const char *moects_data_name(moects_data d) { return (unsigned)d < sizeof DATA / sizeof *DATA ? DATA[d] : "?"; }

int moects_data_parse(const char *s, moects_data *out)
{
    for (unsigned i = 0; i < sizeof DATA / sizeof *DATA; i++)
        if (!strcmp(s, DATA[i])) {
            *out = (moects_data)i;
            return 0;
        }
    return -1;
}

int moects_tier_parse(const char *s, moects_tier *out)
{
    if (!strcmp(s, "smoke")) *out = MOECTS_TIER_SMOKE;
    else if (!strcmp(s, "full")) *out = MOECTS_TIER_FULL;
    else if (!strcmp(s, "large")) *out = MOECTS_TIER_LARGE;
    else return -1;
    return 0;
}
