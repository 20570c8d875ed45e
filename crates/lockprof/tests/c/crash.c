/* Takes a mutex 1000 times, then crashes with SIGSEGV. */
#include <pthread.h>
#include <stdio.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
int main(void) {
    for (int i = 0; i < 1000; i++) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); }
    printf("about to crash\n"); fflush(stdout);
    volatile int *p = (int *)0; *p = 1;
    return 0;
}
