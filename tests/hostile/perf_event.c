#define _GNU_SOURCE
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(void) { char attr[128] = {0}; printf("%ld\n", syscall(SYS_perf_event_open, attr, 0, -1, -1, 0)); }
