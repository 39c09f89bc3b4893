/* An unprivileged user namespace would give it "root" to mount with. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
int main(void) { printf("%d\n", unshare(CLONE_NEWUSER | CLONE_NEWNS)); }
