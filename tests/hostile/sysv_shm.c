#define _GNU_SOURCE
/* Leaves a System V shared memory segment behind for a later run (its own
   IPC namespace is gone with it), and looks for one left by an earlier run. */
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
int main(void) {
    int old = shmget(0x0badcafe, 4096, 0);
    int id = shmget(0x0badcafe, 4096, IPC_CREAT | 0666);
    char *p = id >= 0 ? shmat(id, 0, 0) : 0;
    if (p && p != (char *)-1) strcpy(p, "secret");
    puts(old >= 0 ? "found" : "clean");
}
