/* N threads x M iterations over K mutexes: thread t locks mutex (t+i) % K. argv: N M K */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static int N, M, K;
static pthread_mutex_t *locks;
static long *counters;
static void *worker(void *arg) {
    long t = (long)arg;
    for (int i = 0; i < M; i++) {
        int k = (int)((t + i) % K);
        pthread_mutex_lock(&locks[k]);
        counters[k]++;
        pthread_mutex_unlock(&locks[k]);
    }
    return NULL;
}
int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: mutex_grid N M K\n"); return 2; }
    N = atoi(argv[1]); M = atoi(argv[2]); K = atoi(argv[3]);
    locks = calloc(K, sizeof *locks);
    counters = calloc(K, sizeof *counters);
    for (int k = 0; k < K; k++) pthread_mutex_init(&locks[k], NULL);
    pthread_t *th = calloc(N, sizeof *th);
    for (long t = 0; t < N; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 0; t < N; t++) pthread_join(th[t], NULL);
    long total = 0;
    for (int k = 0; k < K; k++) { total += counters[k]; printf("lock %d %p %ld\n", k, (void *)&locks[k], counters[k]); }
    printf("total %ld\n", total);
    return 0;
}
