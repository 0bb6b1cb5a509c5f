#!/usr/bin/env python3
"""How long this machine takes CPUs away: one SCHED_FIFO sleeper pinned to
each CPU sleeps 1 ms at a time and prints every sleep that took longer than
LIMIT_MS, with the steal ticks (/proc/stat, time the hypervisor ran someone
else) every CPU gained since its last report. A real-time sleeper is late
only when the kernel or the host does not run it: what it reports is what
a uetd worker would also lose, whatever its priority. Runs until killed
(root, for SCHED_FIFO).

Usage: scripts/cpu-hiccups.py [LIMIT_MS]   (default 3)
"""
import os
import sys
import time

LIMIT = float(sys.argv[1]) / 1e3 if len(sys.argv) > 1 else 0.003


def steal():
    out = {}
    for line in open("/proc/stat"):
        if line.startswith("cpu") and line[3] != " ":
            f = line.split()
            out[f[0]] = int(f[8])
    return out


def run(cpu):
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
    last = steal()
    while True:
        t = time.monotonic()
        time.sleep(0.001)
        d = time.monotonic() - t
        if d > LIMIT:
            s = steal()
            gained = " ".join(f"{k}={s[k] - last[k]}" for k in sorted(s))
            print(f"{time.time():.3f} cpu{cpu} slept_ms={d * 1e3:.2f} steal_ticks {gained}", flush=True)
            last = s


for c in sorted(os.sched_getaffinity(0)):
    if os.fork() == 0:
        run(c)
os.wait()
