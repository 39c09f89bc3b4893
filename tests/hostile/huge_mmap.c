#define _GNU_SOURCE
/* Reserves 64 GiB and touches it: RLIMIT_AS refuses it, or the memory limit kills it. */
#include <stdio.h>
#include <sys/mman.h>
int main(void) {
    size_t n = 64UL << 30;
    char *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) { puts("refused"); return 0; }
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
    puts("touched");
}
