/* Writes through a null pointer: SIGSEGV, RE. */
#include <stdio.h>

int main(void) {
    volatile int *p = NULL;
    *p = 42;
    printf("unreachable\n");
    return 0;
}
