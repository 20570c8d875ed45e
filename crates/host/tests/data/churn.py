"""Threads that do some work and end, for the host's counting tests.

Prints `ready CPU` (CPU: this process's CPU time so far, ns, CLOCK_PROCESS_CPUTIME_ID, which
includes ended threads) and then answers one command per line on stdin:

  churn N MS   start N threads one after the other, each running until it has had MS ms of
               CPU, then ending; once all have been joined: `done SUM CPU`, SUM the threads' own
               CPU times (CLOCK_THREAD_CPUTIME_ID, taken as each ends)
  hold MS      start a thread that waits: `held TID`
  release      let it run until it has had MS ms of CPU and end; once joined: `released CPU_T`,
               its own CPU time
  fork MS      fork a child that runs until it has had MS ms of CPU, from the main thread and
               then from a new thread; once both are reaped: `forked CHILDREN CPU`, CHILDREN the
               two children's CPU times (rusage)
  cpu          `cpu CPU`
"""
import os
import sys
import threading
import time
import warnings

# Python 3.12 warns about fork in a process with threads: the children only burn and exit.
warnings.simplefilter("ignore", DeprecationWarning)


def burn(ms):
    start = time.thread_time_ns()
    x = 1
    while time.thread_time_ns() - start < ms * 1_000_000:
        for _ in range(200):
            x = (x * 6364136223846793005 + 1) & 0xFFFFFFFFFFFFFFFF
    return x


def cpu():
    return time.process_time_ns()


def say(*words):
    print(*words, flush=True)


def fork_and_reap(ms, out):
    pid = os.fork()
    if pid == 0:
        burn(ms)
        os._exit(0)
    _, _, ru = os.wait4(pid, 0)
    out.append(int((ru.ru_utime + ru.ru_stime) * 1e9))


say("ready", cpu())
held = None
for line in sys.stdin:
    cmd = line.split()
    if not cmd:
        continue
    if cmd[0] == "churn":
        n, ms = int(cmd[1]), float(cmd[2])
        times = []

        def work():
            burn(ms)
            times.append(time.thread_time_ns())

        for _ in range(n):
            t = threading.Thread(target=work)
            t.start()
            t.join()
        say("done", sum(times), cpu())
    elif cmd[0] == "hold":
        ms = float(cmd[1])
        go = threading.Event()
        box = []

        def wait_then_work():
            go.wait()
            burn(ms)
            box.append(time.thread_time_ns())

        t = threading.Thread(target=wait_then_work)
        t.start()  # returns once the thread runs: native_id is set
        held = (t, go, box)
        say("held", t.native_id)
    elif cmd[0] == "release":
        t, go, box = held
        go.set()
        t.join()
        say("released", box[0])
    elif cmd[0] == "fork":
        ms = float(cmd[1])
        children = []
        fork_and_reap(ms, children)
        t = threading.Thread(target=fork_and_reap, args=(ms, children))
        t.start()
        t.join()
        say("forked", sum(children), cpu())
    elif cmd[0] == "cpu":
        say("cpu", cpu())
