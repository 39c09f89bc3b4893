#define _GNU_SOURCE
/* A 32-bit system call from a 64-bit program (a way around filters that
   only look at x86-64 numbers): the filter kills it. */
#include <stdio.h>
int main(void) {
    long r;
    __asm__ volatile ("int $0x80" : "=a"(r) : "a"(20L) : "memory"); /* getpid (i386) */
    printf("%ld\n", r);
}
