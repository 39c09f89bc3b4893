#define _GNU_SOURCE
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(void) { char p[120] = {0}; printf("%ld\n", syscall(SYS_io_uring_setup, 8, p)); }
