/* Page faults inside a critical section, for counter deltas while held: mutex a is held while
   N fresh anonymous pages are touched (one minor fault each: huge pages are disabled for the
   region), mutex b is held N times around nothing. Prints the addresses. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 64;
    long page = sysconf(_SC_PAGESIZE);
    char *mem = mmap(NULL, (size_t)n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) { perror("mmap"); return 1; }
    madvise(mem, (size_t)n * page, MADV_NOHUGEPAGE);
    pthread_mutex_lock(&a);
    for (int i = 0; i < n; i++) ((volatile char *)mem)[(long)i * page] = 1;
    pthread_mutex_unlock(&a);
    for (int i = 0; i < n; i++) { pthread_mutex_lock(&b); pthread_mutex_unlock(&b); }
    printf("a %p b %p\n", (void *)&a, (void *)&b);
    return 0;
}
