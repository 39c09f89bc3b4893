/* An interactor for tests/interactive_rules.rs: interactor input output answer.
 * The input's first word says how it talks, so that one interactor plays
 * every order of events:
 *   flood     writes 1 MiB first (more than a pipe holds), then reads a line:
 *             "ok" is AC (exit 0), anything else or the end WA (exit 2)
 *   farewell  writes "hello", reads a line; "ok" is AC, but first it writes
 *             1 MiB of farewell the program never reads
 *   late      reads the program's output to its end, then writes "bye" and
 *             says WA (exit 1)
 *   wa        reads a line (or the end) and says WA (exit 1) at once
 *   ac        reads a line: AC; the end: WA (exit 2)
 *   fail      fails at once (exit 3), before reading anything
 *   slow      works 2.5 s of CPU time first, then writes "hello" and reads a
 *             line: "ok" is AC
 * Its writes are checked: a failed one is reported and fails it (exit 3),
 * and SIGPIPE, if it comes, kills it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void say(const char *s) {
    if (fputs(s, stdout) == EOF || fflush(stdout) == EOF) {
        perror("interactor: write");
        exit(3);
    }
}

static void flood(void) {
    char line[64];
    memset(line, 'x', sizeof line - 1);
    line[sizeof line - 2] = '\n';
    line[sizeof line - 1] = 0;
    for (int i = 0; i < (1 << 20) / 63; i++) say(line);
}

static int got_ok(void) {
    char buf[64];
    return fgets(buf, sizeof buf, stdin) && strncmp(buf, "ok", 2) == 0;
}

int main(int argc, char **argv) {
    char mode[32] = "";
    FILE *in = argc > 1 ? fopen(argv[1], "r") : NULL;
    if (!in || fscanf(in, "%31s", mode) != 1) { fprintf(stderr, "fail: no input\n"); return 3; }
    if (!strcmp(mode, "flood")) { flood(); return got_ok() ? 0 : 2; }
    if (!strcmp(mode, "farewell")) {
        say("hello\n");
        if (!got_ok()) return 2;
        flood();
        return 0;
    }
    if (!strcmp(mode, "late")) {
        while (getchar() != EOF) {}
        say("bye\n");
        fprintf(stderr, "wrong answer: the program left early\n");
        return 1;
    }
    if (!strcmp(mode, "wa")) {
        char buf[64];
        (void)!fgets(buf, sizeof buf, stdin);
        fprintf(stderr, "wrong answer\n");
        return 1;
    }
    if (!strcmp(mode, "ac")) return got_ok() ? 0 : 2;
    if (!strcmp(mode, "slow")) {
        while (clock() < 5 * CLOCKS_PER_SEC / 2) {}
        say("hello\n");
        return got_ok() ? 0 : 2;
    }
    if (!strcmp(mode, "fail")) { fprintf(stderr, "fail: broken on purpose\n"); return 3; }
    fprintf(stderr, "fail: unknown mode %s\n", mode);
    return 3;
}
