/* Its own memory a little past a 64 MiB limit (66 MiB), and a file of its
   own read first by the run (so charged to its group) and read again and
   again: at the group's hard limit the kernel evicts the file's pages
   (clean, not mapped: always reclaimable) rather than end the program,
   which reads them back in, until some other limit ends it. An interpreter
   on a cold host does the same with its own files. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    int fd = open("cache", O_RDONLY);
    if (fd < 0) return 2;
    for (int mib = 0; mib < 66; mib++) {
        char *more = malloc(1 << 20);
        if (!more) return 4;
        memset(more, 1, 1 << 20);
    }
    static char buf[1 << 16];
    for (;;)
        for (off_t at = 0; pread(fd, buf, sizeof buf, at) > 0; at += sizeof buf) {}
}
