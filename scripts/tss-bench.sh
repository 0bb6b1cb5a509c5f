#!/bin/bash
# TSS on vs off through two lab daemons at MTU 3498 (BENCHMARKS.md "TSS").
# usage (root, from the workspace): scripts/tss-bench.sh NAME [--tss]
# Prints: Gb/s and resends of `uet perf` (64 KiB writes, depth 16, 3 s).
set -e
U=${UET:-target/release/uet}
name=$1; shift
$U lab up --mtu 3498 --name "$name" --region 256MiB "$@" > /dev/null
trap '$U lab down --name "$name" >/dev/null 2>&1' EXIT
for _ in $(seq 100); do grep -q exposed "/run/uet/lab/$name/h0.log" 2>/dev/null && break; sleep 0.1; done
l=$(grep exposed "/run/uet/lab/$name/h0.log")
gen=$(echo "$l" | sed 's/.*"generation":\([0-9]*\).*/\1/')
addr=$(echo "$l" | sed 's/.*"address":"\([^"]*\)".*/\1/')
$U perf "uet://$addr/1/0/1/$gen/0x5eed" -s 64K -t 16 -D 3 --json \
    --socket "/run/uet/lab/$name/h1.sock" | tail -1 |
    python3 -c 'import json,sys; d=json.load(sys.stdin)["end"]; print("%.3f Gb/s, %d resends" % (d["sum"]["bits_per_second"]/1e9, d["retransmits"]))'
