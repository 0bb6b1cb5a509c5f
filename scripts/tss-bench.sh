#!/bin/bash
# TSS on vs off through two lab daemons at MTU 3498 (BENCHMARKS.md "TSS").
# usage (root, from the workspace): scripts/tss-bench.sh NAME [--tss]
# Prints: Gb/s and resends of `uet perf` (64 KiB writes, depth 16, 3 s),
# and the CPU time both daemons spent per GB moved (user + system, from
# /proc/PID/stat; less sensitive to other load on the machine than Gb/s).
set -e
U=${UET:-target/release/uet}
name=$1; shift
$U lab up --mtu 3498 --name "$name" --region 256MiB "$@" > /dev/null
trap '$U lab down --name "$name" >/dev/null 2>&1' EXIT
for _ in $(seq 100); do grep -q exposed "/run/uet/lab/$name/h0.log" 2>/dev/null && break; sleep 0.1; done
l=$(grep exposed "/run/uet/lab/$name/h0.log")
gen=$(echo "$l" | sed 's/.*"generation":\([0-9]*\).*/\1/')
addr=$(echo "$l" | sed 's/.*"address":"\([^"]*\)".*/\1/')
pids=$(pgrep -d ' ' -f "uetd .*--socket /run/uet/lab/$name/")
ticks() { for p in $pids; do awk '{print $14 + $15}' "/proc/$p/stat"; done | paste -sd+ | bc; }
t0=$(ticks)
out=$($U perf "uet://$addr/1/0/1/$gen/0x5eed" -s 64K -t 16 -D 3 --json \
    --socket "/run/uet/lab/$name/h1.sock" | tail -1)
t1=$(ticks)
echo "$out" | python3 -c '
import json, sys, os
d = json.load(sys.stdin)["end"]
bits = d["sum"]["bits_per_second"]; secs = d["sum"].get("seconds", 3.0)
cpu = (int(sys.argv[1]) / os.sysconf("SC_CLK_TCK"))
gb = bits * secs / 8e9
print("%.3f Gb/s, %d resends, %.2f CPU-s per GB" % (bits / 1e9, d["retransmits"], cpu / gb))
' "$((t1 - t0))"
