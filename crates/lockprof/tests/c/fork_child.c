/* Parent locks a mutex 100 times, forks while holding it; the child unlocks, locks it 7 times
   and exits; the parent unlocks and waits. */
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
int main(void) {
    for (int i = 0; i < 100; i++) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); }
    pthread_mutex_lock(&m);
    pid_t pid = fork();
    if (pid == 0) {
        pthread_mutex_unlock(&m);
        for (int i = 0; i < 7; i++) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); }
        return 0;
    }
    pthread_mutex_unlock(&m);
    int st; waitpid(pid, &st, 0);
    printf("lock %p child %d\n", (void *)&m, (int)pid);
    return 0;
}
