/* The kernel's floor for a fresh jail per run (make bench): what any
 * sandbox that gives each run namespaces of its own must have the kernel
 * do, with no code of ojrunner's (no helper, no socket, no cgroup, no
 * output handling).
 *
 *   floor PROGRAM INPUT UID DIR MODE N
 *
 * runs PROGRAM N times, one after another, its stdin INPUT (or /dev/null
 * for "-"), its stdout and stderr /dev/null, and prints each run's wall
 * time in microseconds, one a line. MODE "bare" is fork, exec, wait.
 * MODE "jail" is what a jail adds: clone into new PID, mount, IPC and UTS
 * namespaces; in that child (the jail's init) the mounts made private, a
 * tmpfs on DIR/tmp and a proc on DIR/proc; the program forked from it,
 * its uid and gid UID, no_new_privs, a filter of 40 comparisons, exec;
 * init waits for it and exits, and the caller waits for init. MODE
 * "plain" is "jail" without the namespaces and the mounts: what giving
 * them up would save. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *program, *input, *dir;
static unsigned uid;
static char tmp[4096], proc[4096];
static char stack[1 << 16];

static void stdio(void) {
    int in = strcmp(input, "-") ? open(input, O_RDONLY) : open("/dev/null", O_RDONLY);
    int out = open("/dev/null", O_WRONLY);
    if (in < 0 || out < 0) _exit(126);
    dup2(in, 0), dup2(out, 1), dup2(out, 2);
}

static void exec_program(void) {
    char *argv[] = {(char *)program, NULL};
    char *envp[] = {NULL};
    execve(program, argv, envp);
    _exit(127);
}

static int run_program(void) {
    struct sock_filter f[43];
    int n = 0;
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0);
    for (int i = 0; i < 40; i++) f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 1000 + i, 0, 0);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog fp = {.len = n, .filter = f};
    stdio();
    if (setresgid(uid, uid, uid) || setresuid(uid, uid, uid)) _exit(120);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp)) _exit(121);
    exec_program();
    return 0;
}

static int init(void *jailed) {
    if (jailed && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) _exit(110);
    if (jailed && mount("tmpfs", tmp, "tmpfs", MS_NOSUID | MS_NODEV, "size=64m")) _exit(111);
    if (jailed && mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL)) _exit(112);
    pid_t p = fork();
    if (p == 0) run_program();
    int st;
    if (p < 0 || waitpid(p, &st, 0) != p) _exit(113);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 114);
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: floor PROGRAM INPUT UID DIR bare|plain|jail N\n");
        return 2;
    }
    program = argv[1], input = argv[2], uid = (unsigned)atol(argv[3]), dir = argv[4];
    int jail = !strcmp(argv[5], "jail"), plain = !strcmp(argv[5], "plain"), n = atoi(argv[6]);
    snprintf(tmp, sizeof tmp, "%s/tmp", dir);
    snprintf(proc, sizeof proc, "%s/proc", dir);
    for (int i = 0; i < n; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        pid_t p;
        if (jail) {
            p = clone(init, stack + sizeof stack, CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | SIGCHLD, "");
        } else if (plain) {
            p = clone(init, stack + sizeof stack, SIGCHLD, NULL);
        } else if ((p = fork()) == 0) {
            stdio();
            exec_program();
        }
        int st;
        if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) >= 100) {
            fprintf(stderr, "floor: run %d failed (status %#x)\n", i, p < 0 ? -1 : st);
            return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        printf("%ld\n", (b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000);
    }
    return 0;
}
