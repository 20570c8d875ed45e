/* R readers x M rdlocks and W writers x M wrlocks on one rwlock; then a producer/consumer pair
   over a condition variable passing M items. argv: R W M */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static int R, W, M;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t qm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qc = PTHREAD_COND_INITIALIZER;
static long value, items, consumed;
static void *reader(void *a) { (void)a; long s = 0;
    for (int i = 0; i < M; i++) { pthread_rwlock_rdlock(&rw); s += value; pthread_rwlock_unlock(&rw); }
    return (void *)s; }
static void *writer(void *a) { (void)a;
    for (int i = 0; i < M; i++) { pthread_rwlock_wrlock(&rw); value++; pthread_rwlock_unlock(&rw); }
    return NULL; }
static void *producer(void *a) { (void)a;
    for (int i = 0; i < M; i++) { pthread_mutex_lock(&qm); items++; pthread_cond_signal(&qc); pthread_mutex_unlock(&qm); }
    return NULL; }
static void *consumer(void *a) { (void)a;
    while (consumed < M) {
        pthread_mutex_lock(&qm);
        while (items == 0) pthread_cond_wait(&qc, &qm);
        consumed += items; items = 0;
        pthread_mutex_unlock(&qm);
    }
    return NULL; }
int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: rwlock_cond R W M\n"); return 2; }
    R = atoi(argv[1]); W = atoi(argv[2]); M = atoi(argv[3]);
    pthread_t th[64]; int n = 0;
    for (int i = 0; i < R; i++) pthread_create(&th[n++], NULL, reader, NULL);
    for (int i = 0; i < W; i++) pthread_create(&th[n++], NULL, writer, NULL);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    pthread_t p, c;
    pthread_create(&c, NULL, consumer, NULL);
    pthread_create(&p, NULL, producer, NULL);
    pthread_join(p, NULL); pthread_join(c, NULL);
    printf("rw %p qm %p qc %p value %ld consumed %ld\n", (void *)&rw, (void *)&qm, (void *)&qc, value, consumed);
    return 0;
}
