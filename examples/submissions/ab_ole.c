/* Prints its answer, then blank lines forever: OLE once stdout reaches the
 * output limit. (Trailing white space may still match the answer, so the
 * judge reads on; anything else printed forever is WA as soon as it can
 * no longer match: judge-exec(8).) */
#include <stdio.h>

int main(void) {
    long long a, b;
    if (scanf("%lld %lld", &a, &b) != 2) return 1;
    printf("%lld\n", a + b);
    for (;;) fputs("                                        \n", stdout);
    return 0;
}
