#define _GNU_SOURCE
/* Signals every process it can, and its parent: only its own run is in reach.
   (Its parent may be outside its PID namespace, where getppid() says 0: then
   it has none to signal, and kill(0) would be its own process group.) */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
    kill(-1, SIGKILL);
    pid_t parent = getppid();
    if (parent > 0) kill(parent, SIGKILL);
    kill(1, SIGKILL);
    puts("alive");
}
