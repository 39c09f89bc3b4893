#define _GNU_SOURCE
/* Takes all it can of one host-wide or per-user quota (its name on
   stdin), says how much, and holds it for two seconds: the host checks
   meanwhile that it can still take one. */
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <linux/in6.h>
#include <mqueue.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static int take(const char *what, int i) {
    if (!strcmp(what, "aio")) {
        aio_context_t ctx = 0;
        return syscall(SYS_io_setup, i == 0 ? 65536 : 1024, &ctx) == 0;
    }
    if (!strcmp(what, "flowlabel")) {
        static int fd = -1, on = 0;
        if (fd < 0 || on == 32) fd = socket(AF_INET6, SOCK_DGRAM, 0), on = 0;
        struct in6_flowlabel_req r;
        memset(&r, 0, sizeof r);
        r.flr_label = htonl((i & 0xfffff) | 1);
        r.flr_action = IPV6_FL_A_GET;
        r.flr_flags = IPV6_FL_F_CREATE;
        r.flr_share = IPV6_FL_S_ANY;
        r.flr_linger = 150;
        memcpy(&r.flr_dst, "the other input.", 16);
        on++;
        return setsockopt(fd, SOL_IPV6, IPV6_FLOWLABEL_MGR, &r, sizeof r) == 0;
    }
    if (!strcmp(what, "inotify")) return inotify_init1(0) >= 0;
    if (!strcmp(what, "keys")) {
        char name[32];
        snprintf(name, sizeof name, "k%d", i);
        return syscall(SYS_add_key, "user", name, "x", 1, -3 /* KEY_SPEC_SESSION_KEYRING */) >= 0;
    }
    if (!strcmp(what, "shm")) return shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600) >= 0;
    if (!strcmp(what, "msg")) return msgget(IPC_PRIVATE, IPC_CREAT | 0600) >= 0;
    if (!strcmp(what, "sem")) return semget(IPC_PRIVATE, 1, IPC_CREAT | 0600) >= 0;
    if (!strcmp(what, "mq")) {
        char name[32];
        snprintf(name, sizeof name, "/q%d", i);
        struct mq_attr a = {.mq_maxmsg = 1, .mq_msgsize = 64};
        return mq_open(name, O_CREAT | O_RDWR, 0600, &a) >= 0;
    }
    if (!strcmp(what, "pipes")) {
        int p[2];
        if (pipe(p) != 0) return 0;
        return fcntl(p[1], F_SETPIPE_SZ, 1 << 20) > 0 || fcntl(p[1], F_SETPIPE_SZ, 4096) > 0;
    }
    return 0;
}

int main(void) {
    char what[32];
    if (scanf("%31s", what) != 1) return 2;
    int held = 0;
    for (int i = 0; i < 5000 && take(what, i); i++) held++;
    printf("held %d %s\n", held, what);
    fflush(stdout);
    sleep(2);
    return 0;
}
