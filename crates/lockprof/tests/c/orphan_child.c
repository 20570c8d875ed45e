/* The parent forks and exits at once, without waiting; the child sleeps 200 ms (its parent is
   gone by then), locks a mutex 11 times and exits. Its profile must not be lost. With an
   argument the child sleeps 60 s instead (a process left running: the test kills it); with a
   second the parent also sleeps 60 s after printing (a program still running). */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
int main(int argc, char **argv) {
    (void)argv;
    pid_t pid = fork();
    if (pid == 0) {
        /* Not holding the caller's output pipes open while it sleeps. */
        close(1);
        close(2);
        usleep(argc > 1 ? 60 * 1000 * 1000 : 200 * 1000);
        for (int i = 0; i < 11; i++) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); }
        return 0;
    }
    printf("child %d\n", (int)pid);
    if (argc > 2) {
        fflush(stdout);
        sleep(60);
    }
    return 0;
}
