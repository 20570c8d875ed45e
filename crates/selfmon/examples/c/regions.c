/* Two threads, each running ITER outer regions with one inner region inside, then a fork whose
 * child runs CHILD_ITER regions of its own and writes its report to argv[1].child; the parent's
 * JSON report goes to argv[1] at exit. Build:
 *   cc regions.c -I include -L <target/debug> -lcounterpoint_selfmon */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "counterpoint.h"

#define ITER 1000
#define CHILD_ITER 3

static volatile unsigned long sink;

static void *work(void *arg) {
    (void)arg;
    for (int i = 0; i < ITER; i++) {
        int outer = cp_region_begin("outer");
        if (outer < 0) { fprintf(stderr, "begin: %s\n", cp_last_error()); exit(1); }
        for (int j = 0; j < 1000; j++) sink += (unsigned long)j * i;
        int inner = cp_region_begin("inner");
        for (int j = 0; j < 1000; j++) sink ^= (unsigned long)j + i;
        if (cp_region_end(inner) != 0 || cp_region_end(outer) != 0) {
            fprintf(stderr, "end: %s\n", cp_last_error());
            exit(1);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s REPORT.json\n", argv[0]); return 2; }
    if (cp_init("task-clock,page-faults") != 0) {
        fprintf(stderr, "cp_init: %s\n", cp_last_error());
        return 1;
    }
    if (cp_init("bogus-event") == 0) { fprintf(stderr, "bad init accepted\n"); return 1; }
    fprintf(stderr, "expected error: %s\n", cp_last_error());
    if (cp_region_end(42) == 0) { fprintf(stderr, "bad handle accepted\n"); return 1; }
    if (cp_report_at_exit(argv[1]) != 0) {
        fprintf(stderr, "at exit: %s\n", cp_last_error());
        return 1;
    }
    pthread_t t[2];
    for (int k = 0; k < 2; k++) pthread_create(&t[k], NULL, work, NULL);
    for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
    /* The forking thread has counters and a mapped control page of its own. */
    int h = cp_region_begin("main");
    if (h < 0 || cp_region_end(h) != 0) { fprintf(stderr, "main: %s\n", cp_last_error()); return 1; }
    if (cp_report(NULL) != 0) {
        fprintf(stderr, "report: %s\n", cp_last_error());
        return 1;
    }
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 1; }
    if (pid == 0) {
        for (int i = 0; i < CHILD_ITER; i++) {
            int c = cp_region_begin("child");
            if (c < 0 || cp_region_end(c) != 0) {
                fprintf(stderr, "child region: %s\n", cp_last_error());
                _exit(3);
            }
        }
        char path[4096];
        snprintf(path, sizeof path, "%s.child", argv[1]);
        if (cp_report_json(path) != 0) { fprintf(stderr, "child report: %s\n", cp_last_error()); _exit(4); }
        exit(0); /* runs the at-exit handlers: the parent's report must not be printed again */
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "child failed: wait status %d\n", st);
        return 1;
    }
    return 0;
}
