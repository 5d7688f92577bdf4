#!/usr/bin/env python3
"""Does a SCHED_IDLE batch make two waking threads share one CPU?

Two worker processes wake at the same instant every 10 ms and each burns
3 ms of CPU; each records when it finished, after the instant it woke for.
On two or more free CPUs both finish about 3 ms after the instant. When
the kernel places both on one CPU they finish at about 6 ms: a p50 near
6 ms means stacked most of the time, a p99 near 6 ms stacked in the tail. Each round runs the workers alone, then beside
a batch of CPU-saturating processes under SCHED_IDLE (what corepin's BE
class gives a batch), then beside the same batch at nice 19.

No root and no cgroup are needed. Usage: sched-stacking.py [rounds]
(see docs/reference/nri.md, "What limits a service's tail beside a BE
batch").
"""
import os
import sys
import time

PERIOD, BURN, TICKS = 0.010, 0.003, 600


def worker(out):
    done = []
    t0 = time.monotonic()
    for k in range(1, TICKS + 1):
        tick = t0 + k * PERIOD
        wait = tick - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        start = time.thread_time()
        while time.thread_time() - start < BURN:
            pass
        done.append((time.monotonic() - tick) * 1000)
    done.sort()
    os.write(out, b"%.2f %.2f\n" % (done[TICKS // 2], done[int(TICKS * 0.99)]))


def spin(policy):
    if policy == "idle":
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    else:
        os.nice(19)
    while True:
        pass


def measure(label, batch, procs):
    spinners = []
    for _ in range(procs if batch else 0):
        pid = os.fork()
        if pid == 0:
            spin(batch)
        spinners.append(pid)
    time.sleep(0.5)
    r, w = os.pipe()
    workers = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            worker(w)
            os._exit(0)
        workers.append(pid)
    for pid in workers:
        os.waitpid(pid, 0)
    for pid in spinners:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    os.close(w)
    lines = os.read(r, 4096).decode().split()
    p50 = max(float(x) for x in lines[0::2])
    p99 = max(float(x) for x in lines[1::2])
    if p50 > 1.5 * BURN * 1000:
        verdict = "stacked most of the time"
    elif p99 > 1.5 * BURN * 1000:
        verdict = "stacked in the tail"
    else:
        verdict = "apart"
    print(f"{label:<22} finished after the tick: p50 {p50:5.2f} ms  p99 {p99:5.2f} ms  ({verdict})", flush=True)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    cpus = len(os.sched_getaffinity(0))
    print(f"{cpus} CPUs, kernel {os.uname().release}; two workers, {BURN*1000:.0f} ms each every {PERIOD*1000:.0f} ms")
    for _ in range(rounds):
        measure("alone", None, 0)
        measure(f"SCHED_IDLE batch x{cpus}", "idle", cpus)
        measure("SCHED_IDLE batch x1", "idle", 1)
        measure(f"nice 19 batch x{cpus}", "nice", cpus)


if __name__ == "__main__":
    main()
