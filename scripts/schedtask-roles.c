/* A 4-thread program with distinct thread roles for 'counterpoint heatmap' (docs/schedtask.md):
 * two threads read /dev/zero and write /dev/null, one computes, one calls stat(2); runs 4 s.
 * cc -O1 -pthread -o /tmp/roles scripts/schedtask-roles.c && /tmp/roles &
 * counterpoint heatmap --pid $(pgrep -n roles) --duration-ms 2000 */
#include <pthread.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include <time.h>
static volatile int stop;
static void *io(void *a){char b[4096];int z=open("/dev/zero",O_RDONLY),n=open("/dev/null",O_WRONLY);while(!stop){read(z,b,sizeof b);write(n,b,sizeof b);}return 0;}
static void *cpu(void *a){volatile double x=1;while(!stop){for(int i=0;i<100000;i++)x=x*1.0000001+1e-9;}return 0;}
static void *st(void *a){struct stat s;while(!stop){stat("/usr/bin",&s);stat("/etc/passwd",&s);}return 0;}
int main(int c,char**v){pthread_t t[4];pthread_create(&t[0],0,io,0);pthread_create(&t[1],0,io,0);pthread_create(&t[2],0,cpu,0);pthread_create(&t[3],0,st,0);sleep(4);stop=1;for(int i=0;i<4;i++)pthread_join(t[i],0);return 0;}
