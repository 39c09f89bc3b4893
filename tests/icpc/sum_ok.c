/* Prints two nonnegative integers that sum to the input S: 1 and S - 1. */
#include <stdio.h>
int main(void) {
    long s;
    if (scanf("%ld", &s) != 1) return 1;
    printf("1 %ld\n", s - 1);
    return 0;
}
