#define _GNU_SOURCE
/* Leaves a listening socket behind for a later run, and looks for one left
   by an earlier run. Sent in flight (SCM_RIGHTS) into a socket that is in
   flight in its own queue, it is closed by no exit: garbage the kernel's
   collector frees only when a later close wakes it. Its abstract name lives
   in the network namespace, which a run may share with the runs before it.
   Prints that namespace on stderr; exits 1 if the socket could not be
   left (nothing was tried, then). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void send_fd(int via, int fd) {
    char byte = 0, control[CMSG_SPACE(sizeof fd)];
    struct iovec io = {&byte, 1};
    struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fd);
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    if (sendmsg(via, &m, 0) != 1) {
        perror("sendmsg");
        exit(1);
    }
}

int main(void) {
    char ns[64] = "";
    if (readlink("/proc/self/ns/net", ns, sizeof ns - 1) > 0) fprintf(stderr, "%s\n", ns);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, "\0ojrunner-in-flight", 19);
    socklen_t len = offsetof(struct sockaddr_un, sun_path) + 19;
    int probe = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(probe, (struct sockaddr *)&a, len) == 0) {
        puts("found");
        return 0;
    }
    int listener = socket(AF_UNIX, SOCK_STREAM, 0), pair[2];
    if (bind(listener, (struct sockaddr *)&a, len) != 0 || listen(listener, 1) != 0) {
        puts("taken");
        return 0;
    }
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, pair) != 0) {
        perror("socketpair");
        return 1;
    }
    send_fd(pair[0], listener);
    send_fd(pair[0], pair[1]);
    puts("clean");
}
