#define _GNU_SOURCE
/* Forks forever: the pids cgroup and RLIMIT_NPROC stop it; it spins: TLE. */
#include <unistd.h>
int main(void) { for (;;) fork(); }
