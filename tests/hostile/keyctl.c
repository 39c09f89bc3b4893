#define _GNU_SOURCE
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(void) { printf("%ld\n", syscall(SYS_keyctl, 0, -3, 0, 0, 0)); }
