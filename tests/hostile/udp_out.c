#define _GNU_SOURCE
/* A UDP datagram to the outside world. */
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
int main(void) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {0}; a.sin_family = AF_INET; a.sin_port = htons(53);
    inet_pton(AF_INET, "8.8.8.8", &a.sin_addr);
    puts(s >= 0 && sendto(s, "x", 1, 0, (struct sockaddr *)&a, sizeof a) == 1 ? "sent" : "blocked");
}
