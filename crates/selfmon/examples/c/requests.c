/* Per-request attribution from C: 100 requests served on the main thread, and request 1000
 * begun on the main thread and finished on a worker (stitched by id). Writes the finished
 * requests as JSON lines to argv[1]. */
#include "counterpoint.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned long sink;

static void work(void) {
    for (unsigned long i = 0; i < 200000; i++) sink += i;
}

static void *worker(void *arg) {
    (void)arg;
    if (cp_request_begin(1000, "handoff") != 0) return (void *)1;
    work();
    if (cp_request_end(1000) != 0) return (void *)1;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    if (cp_init("task-clock,page-faults") != 0) {
        fprintf(stderr, "cp_init: %s\n", cp_last_error());
        return 1;
    }
    for (uint64_t id = 0; id < 100; id++) {
        if (cp_request_begin(id, id % 2 ? "odd" : "even") != 0) return 1;
        work();
        if (cp_request_end(id) != 0) return 1;
    }
    if (cp_request_begin(1000, "handoff") != 0) return 1;
    work();
    if (cp_request_end(1000) != 0) return 1;
    pthread_t t;
    void *rc = NULL;
    if (pthread_create(&t, NULL, worker, NULL) != 0 || pthread_join(t, &rc) != 0 || rc) return 1;
    /* Ending a request that is not open here is refused with a message. */
    if (cp_request_end(7) != -1) return 1;
    fprintf(stderr, "refused: %s\n", cp_last_error());
    int n = cp_requests_take(argv[1]);
    if (n != 101) {
        fprintf(stderr, "took %d requests: %s\n", n, cp_last_error());
        return 1;
    }
    return 0;
}
