#define _GNU_SOURCE
#include <linux/aio_abi.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
/* Native AIO contexts count against fs.aio-max-nr, host-wide: takes all it
   can, and holds them. */
int main(void) {
    long held = 0;
    for (int i = 0; i < 4096; i++) {
        aio_context_t ctx = 0;
        if (syscall(SYS_io_setup, 65536, &ctx) != 0 && syscall(SYS_io_setup, 1024, &ctx) != 0) break;
        held++;
    }
    printf("held %ld\n", held);
    fflush(stdout);
    sleep(3);
    return 0;
}
