/* Uncontended lock+unlock cost: one thread, one mutex, ITER pairs timed 5 times; prints the
   median ns per pair. An idle second thread exists so that glibc takes its multithreaded
   (atomic) paths, as in the programs one profiles. argv: ITER */
#include <unistd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static double now_ns(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static void *idle(void *a) { (void)a; for (;;) pause(); return NULL; }
int main(int argc, char **argv) {
    pthread_t t; pthread_create(&t, NULL, idle, NULL);
    long iter = argc > 1 ? atol(argv[1]) : 1000000;
    double r[5];
    for (long i = 0; i < iter / 10; i++) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); }
    for (int k = 0; k < 5; k++) {
        double t0 = now_ns();
        for (long i = 0; i < iter; i++) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); }
        r[k] = (now_ns() - t0) / iter;
    }
    qsort(r, 5, sizeof r[0], cmp);
    printf("%.3f\n", r[2]);
    return 0;
}
