#define _GNU_SOURCE
/* IPv6 flow labels: entries of a host-wide table (4,096 at most) that
   linger after their socket closes, each with 16 bytes of the maker's
   choosing, listed in /proc/self/net/ip6_flowlabel to every later run of
   the same network namespace. Says (on stderr) how many labels an earlier
   run left, then makes as many as it can and holds them. */
#include <linux/in6.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void) {
    FILE *f = fopen("/proc/self/net/ip6_flowlabel", "r");
    int found = -1;
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        found++;
    }
    fprintf(stderr, "found %d\n", found < 0 ? 0 : found);
    int held = 0;
    for (int s = 0; s < 200; s++) {
        int fd = socket(AF_INET6, SOCK_DGRAM, 0);
        for (int i = 0; i < 32; i++) {
            struct in6_flowlabel_req r;
            memset(&r, 0, sizeof r);
            r.flr_label = htonl(((s * 32 + i) & 0xfffff) | 1);
            r.flr_action = IPV6_FL_A_GET;
            r.flr_flags = IPV6_FL_F_CREATE;
            r.flr_share = IPV6_FL_S_ANY;
            r.flr_linger = 150;
            memcpy(&r.flr_dst, "the other input.", 16);
            if (setsockopt(fd, SOL_IPV6, IPV6_FLOWLABEL_MGR, &r, sizeof r) != 0) {
                break;
            }
            held++;
        }
    }
    printf("held %d\n", held);
    fflush(stdout);
    sleep(3);
    return 0;
}
