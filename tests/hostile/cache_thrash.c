/* Its own memory a little past a 64 MiB limit (66 MiB), and a file of its
   own read first by the run (so charged to its group) and touched again
   and again: at the group's hard limit the kernel evicts the file's pages
   rather than end the program, which reads them back in, until some other
   limit ends it. An interpreter on a cold host does the same with its own
   files. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

int main(void) {
    int fd = open("cache", O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) return 2;
    volatile const char *file = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (file == MAP_FAILED) return 3;
    for (int mib = 0; mib < 66; mib++) {
        char *more = malloc(1 << 20);
        if (!more) return 4;
        memset(more, 1, 1 << 20);
    }
    for (unsigned long sum = 0;;)
        for (off_t i = 0; i < st.st_size; i += 4096) sum += file[i];
}
