/* Deterministic owner changes and the remaining lock kinds. Thread A takes mutex m N times,
   then (after A is joined) thread B N times, then main once: exactly 2 owner changes (A->B,
   B->main; the first acquisition is not a change). Then, in main: N timedlocks of t, N timed
   read and N timed write locks of rwlock r, N spin lock/unlock pairs and N spin trylocks of s,
   3 cond signals and 2 broadcasts of c (nobody waits). With "quick" as the second argument the
   program ends with _exit(0), otherwise by returning from main. Prints the addresses. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t t = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t r = PTHREAD_RWLOCK_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static pthread_spinlock_t s;
static int n;
static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < n; i++) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); }
    return NULL;
}
int main(int argc, char **argv) {
    n = argc > 1 ? atoi(argv[1]) : 100;
    int quick = argc > 2 && strcmp(argv[2], "quick") == 0;
    pthread_t a, b;
    pthread_create(&a, NULL, worker, NULL);
    pthread_join(a, NULL);
    pthread_create(&b, NULL, worker, NULL);
    pthread_join(b, NULL);
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    pthread_spin_init(&s, PTHREAD_PROCESS_PRIVATE);
    for (int i = 0; i < n; i++) {
        if (pthread_mutex_timedlock(&t, &ts) == 0) pthread_mutex_unlock(&t);
        if (pthread_rwlock_timedrdlock(&r, &ts) == 0) pthread_rwlock_unlock(&r);
        if (pthread_rwlock_timedwrlock(&r, &ts) == 0) pthread_rwlock_unlock(&r);
        pthread_spin_lock(&s); pthread_spin_unlock(&s);
        if (pthread_spin_trylock(&s) == 0) pthread_spin_unlock(&s);
    }
    for (int i = 0; i < 3; i++) pthread_cond_signal(&c);
    for (int i = 0; i < 2; i++) pthread_cond_broadcast(&c);
    printf("m %p t %p r %p s %p c %p\n", (void *)&m, (void *)&t, (void *)&r, (void *)&s, (void *)&c);
    fflush(stdout);
    if (quick) _exit(0);
    return 0;
}
