#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
/* A lock on a file every run shares: a bit another run, at the same time,
   reads by trying the lock. */
int main(void) {
    int fd = open("/usr/include/stdio.h", O_RDONLY);
    printf("%d\n", flock(fd, LOCK_SH | LOCK_NB));
    return 0;
}
