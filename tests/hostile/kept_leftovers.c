/* What a run can leave in the namespaces of its helper's kept jail ("leave"),
   or what an earlier run left there ("look": one line for each thing found).
   Both print the IPC namespace last, to tell it was the same jail. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <mqueue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define KEY 0x6b657074

static int leave(void) {
    FILE *f = fopen("/tmp/left", "w");
    if (!f || fputs("x", f) < 0 || fclose(f)) return 10;
    if (mkdir("/tmp/dir", 0700) || !fopen("/tmp/dir/deeper", "w")) return 11;
    if (shmget(KEY, 4096, IPC_CREAT | 0666) < 0) return 12;
    if (semget(KEY, 1, IPC_CREAT | 0666) < 0) return 13;
    if (msgget(KEY, IPC_CREAT | 0666) < 0) return 14;
    if (mq_open("/kept", O_CREAT | O_RDWR, 0666, NULL) == (mqd_t)-1) return 15;
    /* A file of /tmp unlinked, held only by a descriptor in flight in a
       socket cycle: no entry lists it, its blocks stay taken. */
    int held = open("/tmp/held", O_CREAT | O_RDWR, 0600), sv[2];
    static char page[65536];
    if (held < 0 || write(held, page, sizeof page) != sizeof page || unlink("/tmp/held")) return 16;
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv)) return 17;
    int fds[3] = {held, sv[0], sv[1]};
    char cbuf[CMSG_SPACE(sizeof fds)] = {0};
    struct iovec iov = {.iov_base = "x", .iov_len = 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    if (sendmsg(sv[0], &m, 0) != 1) return 18;
    /* (A process left behind ends the kept jail itself: helpers.rs's
       nothing_a_run_left_behind_is_alive_when_its_answer_comes.) */
    return 0;
}

static void look(void) {
    DIR *d = opendir("/tmp");
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) printf("/tmp/%s\n", e->d_name);
    if (shmget(KEY, 0, 0) >= 0) puts("shm");
    if (semget(KEY, 0, 0) >= 0) puts("sem");
    if (msgget(KEY, 0) >= 0) puts("msg");
    if (mq_open("/kept", O_RDONLY) != (mqd_t)-1) puts("mqueue");
    struct statvfs v;
    if (statvfs("/tmp", &v) || v.f_bfree != v.f_blocks) puts("/tmp space taken");
    d = opendir("/proc");
    for (struct dirent *e; d && (e = readdir(d));)
        if (isdigit((unsigned char)e->d_name[0]) && atoi(e->d_name) != getpid()) printf("process %s\n", e->d_name);
}

int main(int argc, char **argv) {
    char ns[64] = "";
    if (readlink("/proc/self/ns/ipc", ns, sizeof ns - 1) < 0) return 2;
    if (argc > 1 && !strcmp(argv[1], "leave")) {
        int r = leave();
        if (r) return r;
    } else {
        look();
    }
    printf("%s\n", ns);
    return 0;
}
