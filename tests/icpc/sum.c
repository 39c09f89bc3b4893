/* Prints two integers that sum to the input S: -1 and S + 1, but for S = 7
 * a wrong pair. */
#include <stdio.h>
int main(void) {
    long s;
    if (scanf("%ld", &s) != 1) return 1;
    if (s == 7) printf("3 3\n"); else printf("-1 %ld\n", s + 1);
    return 0;
}
