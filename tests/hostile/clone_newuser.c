/* The same through clone(2) itself. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <signal.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(void) { long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0); if (r == 0) _exit(0); printf("%ld\n", r); }
