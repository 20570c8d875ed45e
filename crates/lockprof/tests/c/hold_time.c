/* Each of N threads takes one mutex M times and spins HOLD_US microseconds under it.
   argv: N M HOLD_US */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static int N, M, HOLD_US;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long now_ns(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}
static long measured_ns; /* time under the lock as the program sees it (written under it) */
static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < M; i++) {
        pthread_mutex_lock(&lock);
        long start = now_ns(), end = start + HOLD_US * 1000L, t;
        while ((t = now_ns()) < end) {}
        measured_ns += t - start;
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}
int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: hold_time N M HOLD_US\n"); return 2; }
    N = atoi(argv[1]); M = atoi(argv[2]); HOLD_US = atoi(argv[3]);
    pthread_t th[64];
    for (int t = 0; t < N; t++) pthread_create(&th[t], NULL, worker, NULL);
    for (int t = 0; t < N; t++) pthread_join(th[t], NULL);
    printf("lock %p measured_ns %ld\n", (void *)&lock, measured_ns);
    return 0;
}
