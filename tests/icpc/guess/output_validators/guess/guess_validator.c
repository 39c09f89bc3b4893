/* An ICPC interactor (an output validator run as one), written to the
 * problem package format: validator input answer feedback_dir < program's
 * output > program's input; exit 42 accepted, 43 wrong answer, anything
 * else a judge error; why, in feedback_dir/judgemessage.txt.
 * The input holds "N X": the program gets N, must find X in [1, N] with at
 * most 30 queries "? y" (answered "<", ">" or "="), then print "! X". */
#include <signal.h>
#include <stdio.h>
#include <string.h>

static FILE *message;

static int verdict(int code, const char *why, long a) {
    fprintf(message, why, a);
    fprintf(message, "\n");
    fclose(message);
    return code;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: validator input answer feedback_dir\n"); return 1; }
    /* A program that is gone is a wrong answer, not the validator's death. */
    signal(SIGPIPE, SIG_IGN);
    char path[4096];
    snprintf(path, sizeof path, "%sjudgemessage.txt", argv[3]);
    message = fopen(path, "w");
    FILE *in = fopen(argv[1], "r");
    long n, x, y;
    if (!message || !in || fscanf(in, "%ld %ld", &n, &x) != 2) { fprintf(stderr, "bad input\n"); return 1; }
    printf("%ld\n", n);
    fflush(stdout);
    char op[8];
    for (int q = 0; q <= 30; q++) {
        if (scanf("%7s %ld", op, &y) != 2) return verdict(43, "no answer after %ld queries", q);
        if (strcmp(op, "!") == 0) {
            if (y != x) return verdict(43, "guessed %ld", y);
            return verdict(42, "found in %ld queries", q);
        }
        if (strcmp(op, "?") != 0) return verdict(43, "bad request after %ld queries", q);
        if (printf("%s\n", x < y ? "<" : x > y ? ">" : "=") < 0 || fflush(stdout) != 0)
            return verdict(43, "the program left after %ld queries", q);
    }
    return verdict(43, "more than %ld queries", 30);
}
