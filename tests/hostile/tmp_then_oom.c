/* Leaves the run's memory group full once its own processes are gone: a
   System V segment (its IPC namespace keeps it) and /tmp (a tmpfs: its
   pages are the group's until the run's mounts go) filled until the
   kernel's OOM killer ends the writer. What is left is charged to the
   group with no process of the run alive: the next charge to the group
   makes its OOM killer look for another victim among the group's tasks. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
    static char block[1 << 16];
    memset(block, 'x', sizeof block);
    int id = shmget(IPC_PRIVATE, 8 << 20, IPC_CREAT | 0600);
    char *seg = id >= 0 ? shmat(id, NULL, 0) : (char *)-1;
    if (seg != (char *)-1) {
        memset(seg, 1, 8 << 20);
        shmdt(seg);
    }
    int fd = open("/tmp/fill", O_WRONLY | O_CREAT | O_TRUNC, 0600);
    while (fd >= 0 && write(fd, block, sizeof block) == (ssize_t)sizeof block) {
    }
    /* /tmp is full before the group is: the rest in memory. */
    for (;;) {
        char *p = sbrk(1 << 16);
        if (p == (void *)-1) break;
        memset(p, 1, 1 << 16);
    }
    puts("survived");
    return 0;
}
