#define _GNU_SOURCE
/* Unbounded recursion: the stack meets its limit (RE) or the memory limit (MLE). */
#include <stdio.h>
int f(volatile int *p, int n) { volatile int a[256]; a[0] = n; return f(a, n + 1) + p[0]; }
int main(void) { int x = 0; printf("%d\n", f(&x, 0)); }
