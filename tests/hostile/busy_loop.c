#define _GNU_SOURCE
int main(void) { for (volatile unsigned long i = 0;; i++) {} }
