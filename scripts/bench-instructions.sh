#!/usr/bin/env bash
# Instructions per packet of the packet_path benchmarks under callgrind
# (machine-independent; see BENCHMARKS.md). Usage: scripts/bench-instructions.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}
BIN=$(cargo bench -q -p uet-ses --bench packet_path --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m["target"]["name"]=="packet_path" and m.get("executable"):
        print(m["executable"])' | tail -1)
tmp=$(mktemp -d)
for b in write_4k copy_only_4k write_64b; do
  UET_BENCH_ONESHOT=$N valgrind -q --tool=callgrind --toggle-collect='packet_path::measured_*' \
    --callgrind-out-file="$tmp/cg.$b" "$BIN" "$b" >/dev/null 2>&1
  total=$(callgrind_annotate "$tmp/cg.$b" 2>/dev/null | grep 'PROGRAM TOTALS' | awk '{gsub(",","",$1); print $1}')
  echo "$b: $((total / N)) instructions/packet"
done
rm -rf "$tmp"
