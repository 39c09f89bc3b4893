#define _GNU_SOURCE
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(void) { char attr[128] = {0}; printf("%ld\n", syscall(SYS_bpf, 0, attr, sizeof attr)); }
