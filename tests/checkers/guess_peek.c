/* Tries to read the hidden answer from every place it could be (the test
 * replaces ANSWER_PATHS with the paths); answers with what it found, else
 * "! 0". */
#include <stdio.h>
int main(void) {
    const char *paths[] = { ANSWER_PATHS, 0 };
    long n, x = 0;
    if (scanf("%ld", &n) != 1) return 1;
    for (int i = 0; paths[i]; i++) {
        FILE *f = fopen(paths[i], "r");
        if (f && fscanf(f, "%ld", &x) == 1) { fprintf(stderr, "read %s\n", paths[i]); break; }
        fprintf(stderr, "cannot read %s\n", paths[i]);
    }
    printf("! %ld\n", x);
    fflush(stdout);
    return 0;
}
