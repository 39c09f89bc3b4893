#define _GNU_SOURCE
/* Raw devices of the host. */
#include <stdio.h>
#include <fcntl.h>
int main(void) {
    const char *d[] = {"/dev/mem", "/dev/kmem", "/dev/port", "/dev/vda", "/dev/sda", "/dev/kmsg", "/dev/tty"};
    for (int i = 0; i < 7; i++) if (open(d[i], O_RDWR) >= 0) { printf("opened %s\n", d[i]); return 0; }
    puts("blocked");
}
