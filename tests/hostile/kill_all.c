#define _GNU_SOURCE
/* Signals every process it can, and its parent: only its own run is in reach. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
    kill(-1, SIGKILL);
    kill(getppid(), SIGKILL);
    kill(1, SIGKILL);
    puts("alive");
}
