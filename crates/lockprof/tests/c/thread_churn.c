/* T threads created one after another (more than the profiler's slot table), each locking one
   mutex M times. argv: T M */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int M;
static long count;
static void *worker(void *a) { (void)a;
    for (int i = 0; i < M; i++) { pthread_mutex_lock(&m); count++; pthread_mutex_unlock(&m); }
    return NULL; }
int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: thread_churn T M\n"); return 2; }
    int T = atoi(argv[1]); M = atoi(argv[2]);
    for (int t = 0; t < T; t++) { pthread_t th; pthread_create(&th, NULL, worker, NULL); pthread_join(th, NULL); }
    printf("lock %p count %ld\n", (void *)&m, count);
    return 0;
}
