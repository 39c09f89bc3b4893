#define _GNU_SOURCE
/* Asks for root directly. */
#include <stdio.h>
#include <unistd.h>
int main(void) { puts(setuid(0) == 0 || setgid(0) == 0 ? "root" : "blocked"); }
