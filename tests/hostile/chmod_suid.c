#define _GNU_SOURCE
/* Makes a set-uid copy of a shell in its /tmp and runs it: nosuid. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(void) {
    system("cp /usr/bin/id /tmp/id && chmod 4755 /tmp/id");
    FILE *p = popen("/tmp/id -u 2>/dev/null", "r");
    char buf[32] = {0};
    if (p) { fgets(buf, sizeof buf, p); pclose(p); }
    puts(buf[0] == '0' ? "root" : "blocked");
}
