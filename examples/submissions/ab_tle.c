/* A busy loop that never ends: TLE (killed at the 1 s CPU limit). */
#include <stdio.h>

int main(void) {
    volatile unsigned long long n = 0;
    for (;;) n++;
    return 0;
}
