/* Binary search for the hidden number. */
#include <stdio.h>
int main(void) {
    long n, lo = 1, hi;
    if (scanf("%ld", &n) != 1) return 1;
    hi = n;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        char r[4];
        printf("? %ld\n", mid);
        fflush(stdout);
        if (scanf("%3s", r) != 1) return 1;
        if (r[0] == '=') { lo = hi = mid; break; }
        if (r[0] == '<') hi = mid - 1; else lo = mid + 1;
    }
    printf("! %ld\n", lo);
    fflush(stdout);
    return 0;
}
