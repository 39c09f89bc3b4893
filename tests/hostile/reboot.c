#define _GNU_SOURCE
#include <stdio.h>
#include <unistd.h>
#include <sys/reboot.h>
int main(void) { printf("%d\n", reboot(RB_POWER_OFF)); }
