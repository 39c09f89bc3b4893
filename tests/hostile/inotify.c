#include <stdio.h>
#include <sys/inotify.h>
/* Watches the host's /usr: which files other runs (and the judge's
   compilers) open, live. */
int main(void) {
    int fd = inotify_init1(0);
    printf("%d %d\n", fd, inotify_add_watch(fd, "/usr/include", IN_OPEN | IN_ACCESS));
    return 0;
}
