/* case_list.c: a growable array of cases. */
#include <stdlib.h>

#include "moects_cases.h"

int moects__case_list_push(moects_case_list *l, const moects_case *c)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        moects_case *v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *c;
    return 0;
}

void moects__case_list_free(moects_case_list *l)
{
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}
