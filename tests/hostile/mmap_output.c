#define _GNU_SOURCE
/* Uses its outputs as memory the limit does not see: a shared writable
   mapping of stdout or stderr (directly, or opened again by name) is page
   cache of a host file, not the run's memory. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int maps(int fd) {
    void *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return 0;
    munmap(p, 1 << 20);
    return 1;
}

int main(void) {
    int mapped = 0;
    for (int fd = 1; fd <= 2; fd++) {
        char path[32];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        int again = open(path, O_RDWR);
        mapped += maps(fd) + (again >= 0 && maps(again));
    }
    puts(mapped ? "mapped" : "blocked");
    return 0;
}
