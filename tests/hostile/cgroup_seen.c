#include <stdio.h>
#include <string.h>
/* What /proc/self/cgroup tells a run of the host: each line's path. */
int main(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[512];
    int lines = 0, root = 0;
    while (f && fgets(line, sizeof line, f)) {
        lines++;
        fputs(line, stderr);
        char *path = strrchr(line, ':');
        if (path && strcmp(path, ":/\n") == 0) root++;
    }
    puts(lines > 0 && lines == root ? "root only" : "host paths");
    return 0;
}
