/* Reads N, then waits for an answer it never asked for: both sides block
 * until the program's wall limit. */
#include <stdio.h>
int main(void) {
    long n, m;
    if (scanf("%ld", &n) != 1) return 1;
    if (scanf("%ld", &m) != 1) return 1;
    return 0;
}
