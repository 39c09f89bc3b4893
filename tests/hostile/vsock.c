/* A socket family a network namespace does not cover: AF_VSOCK reaches the
   VM host's port space. */
#include <stdio.h>
#include <sys/socket.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

int main(void) {
    int s = socket(AF_VSOCK, SOCK_STREAM, 0);
    puts(s >= 0 ? "open" : "refused");
    return 0;
}
