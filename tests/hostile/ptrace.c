#define _GNU_SOURCE
#include <stdio.h>
#include <sys/ptrace.h>
int main(void) { long r = ptrace(PTRACE_TRACEME, 0, 0, 0); printf("%ld\n", r); }
