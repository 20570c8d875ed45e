/* Takes a mutex N times, says so on stdout, then waits to be ended by a signal. argv: N */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    for (int i = 0; i < n; i++) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); }
    printf("lock %p pid %d ready\n", (void *)&m, (int)getpid());
    fflush(stdout);
    for (;;) pause();
}
