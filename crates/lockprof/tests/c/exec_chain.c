/* Image 1 takes a mutex 50 times, fails an execv, takes it 5 times, fails an execl (variadic:
 * the failure returns straight to us), takes it 5 more times and execs itself with execv as
 * image 2, which takes its mutex 30 times and execs itself with execlp as image 3, which takes
 * it 20 times and exits. Each image prints its lock. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static void take(int n) { for (int i = 0; i < n; i++) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); } }
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "3") == 0) {
        take(20);
        printf("image 3 lock %p\n", (void *)&m);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "2") == 0) {
        take(30);
        printf("image 2 lock %p\n", (void *)&m);
        fflush(stdout);
        execlp(argv[0], argv[0], "3", (char *)NULL);
        perror("execlp");
        return 5;
    }
    take(50);
    char *none[] = {"/nonexistent/program", NULL};
    if (execv(none[0], none) == 0) return 3;
    take(5);
    if (execl("/nonexistent/program", "program", "a", "b", "c", "d", "e", "f", (char *)NULL) == 0) return 3;
    take(5);
    printf("image 1 lock %p\n", (void *)&m);
    fflush(stdout);
    char *again[] = {argv[0], "2", NULL};
    execv(argv[0], again);
    perror("execv");
    return 4;
}
