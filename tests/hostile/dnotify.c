#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
/* The older way to watch a directory of the host's /usr: a signal for
   every access in it. */
int main(void) {
    int fd = open("/usr/include", O_RDONLY | O_DIRECTORY);
    printf("%d\n", fcntl(fd, F_NOTIFY, DN_ACCESS | DN_MULTISHOT));
    return 0;
}
