/* main.c: the moects command line (placeholder until harness/cli lands). */
#include <stdio.h>

int main(void)
{
    fprintf(stderr, "moects: not built yet\n");
    return 2;
}
