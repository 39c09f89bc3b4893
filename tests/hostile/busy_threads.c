#define _GNU_SOURCE
/* Two threads spinning: CPU time counts both: TLE. */
#include <pthread.h>
void *spin(void *a) { for (volatile long i = 0;; i++) {} return a; }
int main(void) { pthread_t t; pthread_create(&t, 0, spin, 0); spin(0); }
