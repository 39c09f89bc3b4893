#define _GNU_SOURCE
/* Rewrites its test input on the host: stdin opened again by name for
   writing (the input file is world-writable in this test), or written,
   truncated or grown through stdin itself. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    int changed = 0;
    int fd = open("/proc/self/fd/0", O_WRONLY);
    if (fd >= 0 && write(fd, "pwned\n", 6) == 6) changed++;
    fd = open("/dev/stdin", O_RDWR);
    if (fd >= 0 && pwrite(fd, "pwned\n", 6, 0) == 6) changed++;
    if (write(0, "pwned\n", 6) == 6) changed++;
    if (ftruncate(0, 0) == 0) changed++;
    if (ftruncate(0, 1 << 20) == 0) changed++;
    puts(changed ? "rewritten" : "blocked");
    return 0;
}
