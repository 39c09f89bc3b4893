#define _GNU_SOURCE
/* Looks for what a program should not learn: the host kernel's command
   line, the host's local configuration (/usr/local/etc), the host paths of
   its input and of its directory (which name the problem, the testdata and
   the case). Prints what it found on stdout, and everything it saw on
   stderr for the host to search. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void dump(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) fprintf(stderr, "%s: %s", path, line);
    fclose(f);
}

int main(void) {
    FILE *f = fopen("/proc/cmdline", "r");
    puts(f ? "cmdline seen" : "cmdline hidden");
    int entries = 0;
    DIR *d = opendir("/usr/local/etc");
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) entries++;
    puts(entries ? "local config seen" : "local config hidden");
    char link[4096] = "", cwd[4096] = "";
    readlink("/proc/self/fd/0", link, sizeof link - 1);
    puts(link);
    puts(getcwd(cwd, sizeof cwd) ? cwd : "no cwd");
    dump("/proc/self/mountinfo");
    dump("/proc/self/environ");
    int others = 0;
    d = opendir("/proc");
    for (struct dirent *e; d && (e = readdir(d));) {
        fprintf(stderr, "/proc/%s\n", e->d_name);
        if (e->d_name[0] > '9' && strcmp(e->d_name, "self") && strcmp(e->d_name, "thread-self") &&
            strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            others++;
    }
    puts(others ? "host proc seen" : "own proc only");
    return 0;
}
