#define _GNU_SOURCE
/* Charges the run's memory where no process maps it, so the kernel's OOM
 * killer, which ranks processes by what they map, sees a tiny program: /tmp
 * filled to its cap (1 MiB files: the output limit caps each), then pipe
 * buffers. It must pick the program, never the sandbox helper: MLE. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    static char block[1 << 16];
    memset(block, 'x', sizeof block);
    for (int n = 0;; n++) {
        char name[32];
        snprintf(name, sizeof name, "/tmp/fill%d", n);
        int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            break;
        int written = 0;
        while (written < 16 && write(fd, block, sizeof block) == (ssize_t)sizeof block)
            written++;
        close(fd);
        if (written < 16)
            break;
    }
    for (;;) {
        int p[2];
        if (pipe2(p, O_NONBLOCK) != 0)
            break;
        fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
        while (write(p[1], block, sizeof block) > 0) {
        }
    }
    puts("not stopped");
    return 0;
}
