/* The clock variants (glibc 2.30+): N pthread_mutex_clocklock, N pthread_rwlock_clockrdlock and
 * N pthread_rwlock_clockwrlock, each with its unlock; then one mutex held across W
 * pthread_cond_clockwait calls that time out after 10 ms. argv: N W */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static struct timespec in_ms(long ms) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L; ts.tv_nsec %= 1000000000L;
    return ts;
}
int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: clock_variants N W\n"); return 2; }
    int n = atoi(argv[1]), w = atoi(argv[2]);
    for (int i = 0; i < n; i++) {
        struct timespec ts = in_ms(1000);
        if (pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &ts) != 0) return 3;
        pthread_mutex_unlock(&m);
        if (pthread_rwlock_clockrdlock(&rw, CLOCK_MONOTONIC, &ts) != 0) return 4;
        pthread_rwlock_unlock(&rw);
        if (pthread_rwlock_clockwrlock(&rw, CLOCK_MONOTONIC, &ts) != 0) return 5;
        pthread_rwlock_unlock(&rw);
    }
    pthread_mutex_lock(&cm);
    int timeouts = 0;
    for (int i = 0; i < w; i++) {
        struct timespec ts = in_ms(10);
        if (pthread_cond_clockwait(&c, &cm, CLOCK_MONOTONIC, &ts) == ETIMEDOUT) timeouts++;
    }
    pthread_mutex_unlock(&cm);
    printf("m %p rw %p cm %p c %p timeouts %d\n", (void *)&m, (void *)&rw, (void *)&cm, (void *)&c, timeouts);
    return 0;
}
