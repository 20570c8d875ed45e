/* The parent forks and exits at once, without waiting; the child sleeps 200 ms (its parent is
   gone by then), locks a mutex 11 times and exits. Its profile must not be lost. Arguments:
   `long`: the child sleeps 60 s instead (a process left running: the test ends it);
   `stay`: the parent also sleeps 60 s after printing (a program still running);
   `deaf`: the child ignores SIGTERM (only a second signal to the command ends its wait). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int has(int argc, char **argv, const char *word) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], word) == 0) return 1;
    return 0;
}
int main(int argc, char **argv) {
    /* Before the fork, so the child ignores it from its first instruction (set in the child,
       a signal could come before the child had run at all). */
    if (has(argc, argv, "deaf")) signal(SIGTERM, SIG_IGN);
    pid_t pid = fork();
    if (pid == 0) {
        /* Not holding the caller's output pipes open while it sleeps. */
        close(1);
        close(2);
        usleep(has(argc, argv, "long") ? 60 * 1000 * 1000 : 200 * 1000);
        for (int i = 0; i < 11; i++) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); }
        return 0;
    }
    printf("child %d\n", (int)pid);
    if (has(argc, argv, "stay")) {
        fflush(stdout);
        sleep(60);
    }
    return 0;
}
