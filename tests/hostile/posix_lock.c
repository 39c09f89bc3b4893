#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
/* A read lock (fcntl) on a file every run shares; F_GETLK in another run
   sees it, and the holder's pid. */
int main(void) {
    int fd = open("/usr/include/stdio.h", O_RDONLY);
    struct flock l = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
    printf("%d\n", fcntl(fd, F_SETLK, &l));
    return 0;
}
