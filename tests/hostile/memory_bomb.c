#define _GNU_SOURCE
/* Allocates and touches 1 MiB at a time, forever: MLE. */
#include <stdlib.h>
#include <string.h>
int main(void) { for (;;) { char *p = malloc(1 << 20); if (p) memset(p, 1, 1 << 20); } }
