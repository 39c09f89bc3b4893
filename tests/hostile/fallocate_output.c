#define _GNU_SOURCE
/* Reserves host disk through its outputs: fallocate with KEEP_SIZE holds
   blocks that no file size shows, so no output limit sees them. The host
   checks the blocks its output files hold. */
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
    int held = 0;
    for (int fd = 1; fd <= 2; fd++) {
        if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 256L << 20) == 0) held++;
        if (posix_fallocate(fd, 0, 256L << 20) == 0) held++;
    }
    puts(held ? "reserved" : "blocked");
    return 0;
}
