#define _GNU_SOURCE
#include <stdio.h>
int main(void) {
    const char *files[] = {"/etc/shadow", "/etc/gshadow", "/root/.bashrc", "/proc/1/environ", "/proc/kcore"};
    char buf[64];
    for (int i = 0; i < 5; i++) {
        FILE *f = fopen(files[i], "r");
        if (f && fread(buf, 1, sizeof buf, f) > 0) { printf("read %s\n", files[i]); return 0; }
    }
    puts("blocked");
}
