/* Touches 512 MiB under a 64 MiB limit, 1 MiB at a time, writing every
 * page: MLE however the limit is enforced (resident memory, address space
 * or a cgroup). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    long long a, b, total = 0;
    scanf("%lld %lld", &a, &b);
    for (int i = 0; i < 512; i++) {
        char *p = malloc(1 << 20);
        if (!p) return 2;
        memset(p, i + 1, 1 << 20);
        total += p[4096 * (i % 256)];
    }
    printf("%lld\n", a + b + total * 0);
    return 0;
}
