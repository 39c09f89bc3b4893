/* An IP socket of a protocol a judged program has no use for: asking for
   DCCP makes the kernel load its module (the road to CVE-2017-6074),
   network namespace or not. */
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>

int main(void) {
    int s = socket(AF_INET, SOCK_DCCP, IPPROTO_DCCP);
    puts(s >= 0 ? "open" : "refused");
    return 0;
}
