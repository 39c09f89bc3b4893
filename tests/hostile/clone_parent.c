#define _GNU_SOURCE
/* A child of its parent's (CLONE_PARENT): out of the run's reach, and in the
   kept jail a child of the helper's. Denied, named. */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(void) {
    long pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) {
        sleep(60);
        _exit(0);
    }
    puts(pid > 0 ? "cloned" : "refused");
}
