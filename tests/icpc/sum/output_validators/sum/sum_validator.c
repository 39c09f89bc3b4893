/* An ICPC output validator written to the problem package format:
 *     validator input answer feedback_dir [flags] < team_output
 * exit 42 accepted, 43 wrong answer, anything else a judge error; why, in
 * feedback_dir/judgemessage.txt. The problem: the input holds S > 0; print
 * two integers whose sum is S (the answer file holds one such pair). Flag
 * "nonnegative": both must be >= 0. Input 9 plants a symbolic link as the
 * message (a validator the judge must not trust to read files for it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[4096];

static int verdict(int code, const char *why, long a, long b) {
    FILE *f = fopen(path, "w");
    if (!f) return 2;
    fprintf(f, why, a, b);
    fclose(f);
    return code;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: validator input answer feedback_dir\n"); return 1; }
    snprintf(path, sizeof path, "%sjudgemessage.txt", argv[3]);
    int nonnegative = 0;
    for (int i = 4; i < argc; i++) nonnegative |= strcmp(argv[i], "nonnegative") == 0;
    FILE *in = fopen(argv[1], "r"), *ans = fopen(argv[2], "r");
    long s, x, y, a, b;
    if (!in || !ans || fscanf(in, "%ld", &s) != 1 || fscanf(ans, "%ld %ld", &x, &y) != 2 || x + y != s || s <= 0) {
        fprintf(stderr, "bad input or answer\n");
        return 1;
    }
    if (s == 9) {
        symlink("/etc/shadow", path);
        return 43;
    }
    if (scanf("%ld %ld", &a, &b) != 2) return verdict(43, "expected two integers\n", 0, 0);
    char extra;
    if (scanf(" %c", &extra) == 1) return verdict(43, "trailing output\n", 0, 0);
    if (a + b != s) return verdict(43, "sum of %ld and %ld is wrong\n", a, b);
    if (nonnegative && (a < 0 || b < 0)) return verdict(43, "negative: %ld %ld\n", a, b);
    return verdict(42, "ok: %ld + %ld\n", a, b);
}
