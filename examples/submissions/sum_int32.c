/* Sum of N integers in a 32-bit int: right on task 0 (small sums), wrong
 * on task 1 (sums past 2^31): WA, score 40. */
#include <stdio.h>

int main(void) {
    int n, x, sum = 0;
    if (scanf("%d", &n) != 1)
        return 1;
    while (n-- > 0 && scanf("%d", &x) == 1)
        sum += x;
    printf("%d\n", sum);
    return 0;
}
