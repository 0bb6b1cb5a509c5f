#!/usr/bin/env python3
"""Stops a process (SIGSTOP) for MS milliseconds every EVERY milliseconds, as
a host that takes a VM's vCPU away would, until the process exits or this
script gets SIGTERM; then prints the pauses' count, median and longest (ms).
Several PIDs (comma-separated) are stopped and continued together, as a
hypervisor that throttles the whole VM stops every process in it.
It runs SCHED_FIFO (as root) so that its own wake-ups, and with them the
pauses' lengths, do not wait for the CPUs the paused process's peers keep
busy.

Usage: scripts/pause-process.py PID[,PID...] MS EVERY
"""
import os
import signal
import sys
import time

pids = [int(p) for p in sys.argv[1].split(",")]
ms, every = float(sys.argv[2]) / 1e3, float(sys.argv[3]) / 1e3
got = []


def signal_all(sig):
    for pid in pids:
        os.kill(pid, sig)


def done(*_):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    got.sort()
    med = got[len(got) // 2] * 1e3 if got else 0.0
    top = got[-1] * 1e3 if got else 0.0
    print(f"pauses={len(got)} pause_median_ms={med:.2f} pause_max_ms={top:.2f}", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, done)
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(20))
except PermissionError:
    print("not root: pauses may last longer than asked", file=sys.stderr)
try:
    while True:
        time.sleep(every)
        signal_all(signal.SIGSTOP)
        t = time.monotonic()
        time.sleep(ms)
        signal_all(signal.SIGCONT)
        got.append(time.monotonic() - t)
except ProcessLookupError:
    done()
