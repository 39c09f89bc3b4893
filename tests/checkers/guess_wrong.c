/* Guesses without asking: wrong unless the number is 1. */
#include <stdio.h>
int main(void) {
    long n;
    if (scanf("%ld", &n) != 1) return 1;
    printf("! 1\n");
    fflush(stdout);
    return 0;
}
