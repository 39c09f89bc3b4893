#define _GNU_SOURCE
/* The host's page cache of a shared file (its path on stdin): evicted by
   advice (every page the host had cached, gone for every judging after),
   and probed without timing, through RWF_NOWAIT ("would block": not
   cached) and cachestat. Prints what each probe could learn. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <errno.h>
#include <unistd.h>

int main(void) {
    char path[4096];
    if (scanf("%4095s", path) != 1) return 2;
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) { perror(path); return 1; }
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    void *m = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (m != MAP_FAILED) {
        madvise(m, st.st_size, MADV_PAGEOUT);
        madvise(m, st.st_size, MADV_COLD);
        munmap(m, st.st_size);
    }
    char b;
    struct iovec io = {&b, 1};
    ssize_t n = preadv2(fd, &io, 1, 0, RWF_NOWAIT);
    puts(n < 0 && errno == EOPNOTSUPP ? "nowait refused" : "nowait answered");
    return 0;
}
