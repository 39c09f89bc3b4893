#define _GNU_SOURCE
/* Four processes of 24 MiB each: 96 MiB in all under a 64 MiB limit: MLE
   (the limit is the whole run's, not each process's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
int main(void) {
    for (int i = 0; i < 3; i++) if (fork() == 0) break;
    volatile char *p = malloc(24 << 20);
    for (size_t i = 0; i < (24 << 20); i += 4096) p[i] = 1;
    sleep(3);
    while (wait(NULL) > 0) {}
    printf("%d\n", p[4096]);
    return 0;
}
