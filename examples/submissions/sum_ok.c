/* Sum of N integers in 64 bits: AC, score 100. */
#include <stdio.h>

int main(void) {
    int n;
    long long x, sum = 0;
    scanf("%d", &n);
    for (int i = 0; i < n; i++) {
        scanf("%lld", &x);
        sum += x;
    }
    printf("%lld\n", sum);
    return 0;
}
