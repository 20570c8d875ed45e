/* A program with distinct thread roles for 'counterpoint heatmap' and the schedtask agent
 * (docs/schedtask.md): two I/O threads read /dev/zero and write /dev/null in 4 KiB calls, one
 * thread calls stat(2), and NCALC compute threads (default 1) loop on floating point in their own
 * code; runs SECONDS (default 4). Threads are named io, stat and calc (see /proc/PID/task/TID/comm).
 * cc -O1 -pthread -o /tmp/roles scripts/schedtask-roles.c && /tmp/roles [SECONDS [NCALC]] &
 * counterpoint heatmap --pid $(pgrep -n roles) --duration-ms 2000 */
#define _GNU_SOURCE
#include <pthread.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>
static volatile int stop;
static void *io(void *a){char b[4096];int z=open("/dev/zero",O_RDONLY),n=open("/dev/null",O_WRONLY);while(!stop){read(z,b,sizeof b);write(n,b,sizeof b);}return 0;}
static void *cpu(void *a){volatile double x=1;while(!stop){for(int i=0;i<100000;i++)x=x*1.0000001+1e-9;}return 0;}
static void *st(void *a){struct stat s;while(!stop){stat("/usr/bin",&s);stat("/etc/passwd",&s);}return 0;}
int main(int c,char**v){
  int secs=c>1?atoi(v[1]):4, ncalc=c>2?atoi(v[2]):1;
  if(secs<=0||ncalc<0||ncalc>64)return 2;
  pthread_t t[67];int n=0;
  void *(*role[3])(void*)={io,io,st};const char *name[3]={"io","io","stat"};
  for(int i=0;i<3;i++){pthread_create(&t[n],0,role[i],0);pthread_setname_np(t[n],name[i]);n++;}
  for(int i=0;i<ncalc;i++){pthread_create(&t[n],0,cpu,0);pthread_setname_np(t[n],"calc");n++;}
  sleep(secs);stop=1;for(int i=0;i<n;i++)pthread_join(t[i],0);return 0;}
