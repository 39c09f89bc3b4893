/* A testlib-style special judge (without testlib): accepts any permutation
 * of the answer's numbers. checker input output answer; exit 0 AC, 1 WA. */
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static long *read_all(const char *path, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(3); }
    long *v = malloc(sizeof(long) * 100000);
    *n = 0;
    while (*n < 100000 && fscanf(f, "%ld", &v[*n]) == 1) ++*n;
    fclose(f);
    qsort(v, *n, sizeof(long), cmp);
    return v;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: checker input output answer\n"); return 3; }
    int n, m;
    long *out = read_all(argv[2], &n), *ans = read_all(argv[3], &m);
    if (n != m) { fprintf(stderr, "wrong answer: %d numbers, expected %d\n", n, m); return 1; }
    for (int i = 0; i < n; i++)
        if (out[i] != ans[i]) { fprintf(stderr, "wrong answer: not a permutation\n"); return 1; }
    fprintf(stderr, "ok %d numbers\n", n);
    return 0;
}
