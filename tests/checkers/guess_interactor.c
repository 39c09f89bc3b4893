/* A testlib-style interactor (without testlib): interactor input output answer.
 * The input holds "N X": the program must find X in [1, N] with at most 40
 * queries "? y" (answered "<" if X < y, ">" if X > y, "=" if X == y), then
 * print "! X". Exit 0 AC, 1 WA, 2 PE (bad line / early end), 3 fail. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: interactor input output answer\n"); return 3; }
    FILE *in = fopen(argv[1], "r"), *ans = fopen(argv[3], "r"), *tout = fopen(argv[2], "w");
    long n, x, expect;
    if (!in || !ans || !tout || fscanf(in, "%ld %ld", &n, &x) != 2 || fscanf(ans, "%ld", &expect) != 1) {
        fprintf(stderr, "fail: cannot read input/answer/output\n");
        return 3;
    }
    if (expect != x) { fprintf(stderr, "fail: answer file disagrees with input\n"); return 3; }
    printf("%ld\n", n);
    fflush(stdout);
    char op[8];
    long y;
    for (int q = 0; q <= 40; q++) {
        if (scanf("%7s %ld", op, &y) != 2) { fprintf(stderr, "unexpected end after %d queries\n", q); return 2; }
        if (strcmp(op, "!") == 0) {
            fprintf(tout, "%d queries\n", q);
            if (y == x) return 0;
            fprintf(stderr, "wrong answer: %ld, hidden %ld\n", y, x);
            return 1;
        }
        if (strcmp(op, "?") != 0) { fprintf(stderr, "bad request %s\n", op); return 2; }
        printf("%s\n", x < y ? "<" : x > y ? ">" : "=");
        fflush(stdout);
    }
    fprintf(stderr, "wrong answer: too many queries\n");
    return 1;
}
