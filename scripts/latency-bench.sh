#!/usr/bin/env bash
# 64 B write latency at depth 1 between two namespaces over one veth:
# uet perf through the ring, through the socket (--no-ring), and a kernel
# UDP round trip (sockperf ping-pong), interleaved, REPEATS times, for each
# backend. Needs root and sockperf; builds nothing (run
# `cargo build --release -p uetd -p uet-cli` first).
# Usage: scripts/latency-bench.sh [REPEATS] [SECONDS] [BACKENDS...]
# UETD_ARGS="..." adds flags to both daemons (e.g. "--busy-poll-us 0").
set -euo pipefail
read -r -a EXTRA <<<"${UETD_ARGS:-}"
REPEATS=${1:-3}
SECS=${2:-3}
shift 2 || true
BACKENDS=${*:-xdp udp}
BIN=$(cd "$(dirname "$0")/.." && pwd)/target/release
A=uetlat-a-$$
B=uetlat-b-$$
RUN=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  rm -rf "$RUN"
}
trap cleanup EXIT
ip netns add "$A"
ip netns add "$B"
ip link add v0 netns "$A" type veth peer name v1 netns "$B"
ip -n "$A" addr add 10.77.0.1/24 dev v0
ip -n "$B" addr add 10.77.0.2/24 dev v1
for ns in "$A" "$B"; do
  ip -n "$ns" link set lo up
done
ip -n "$A" link set v0 up
ip -n "$B" link set v1 up
ip netns exec "$B" sockperf sr -i 10.77.0.2 -p 5001 >/dev/null 2>&1 &
pids+=($!)

# uet perf --json is iperf3-shaped: end.latency_us holds perftest's columns
# (t_typical is the median).
field() { python3 -c "import json,sys; d=json.loads(sys.stdin.readline()); print(d['end']['latency_us'][sys.argv[1]])" "$1"; }

for be in $BACKENDS; do
  ip netns exec "$A" "$BIN/uetd" --interface v0 --backend "$be" --socket "$RUN/a.sock" ${EXTRA[@]+"${EXTRA[@]}"} >"$RUN/a.log" 2>&1 &
  da=$!
  ip netns exec "$B" "$BIN/uetd" --interface v1 --backend "$be" --socket "$RUN/b.sock" --expose 1:0x77:4096 ${EXTRA[@]+"${EXTRA[@]}"} >"$RUN/b.log" 2>&1 &
  db=$!
  pids+=("$da" "$db")
  for _ in $(seq 100); do
    grep -q exposed "$RUN/b.log" 2>/dev/null && [ -S "$RUN/a.sock" ] && [ -S "$RUN/b.sock" ] && break
    sleep 0.1
  done
  addr=$(grep '"exposed"' "$RUN/b.log" | head -1 | python3 -c \
    "import json,sys; d=json.loads(sys.stdin.readline()); print(f\"uet://{d['address']}/{d['job']}/{d['pid']}/{d['ri']}/{d['generation']}/{d['key']}\")")
  # Warm-up: next-hop resolution and first PDC.
  ip netns exec "$A" "$BIN/uet" perf "$addr" --region 4096 --size 64 --depth 1 --iters 200 \
    --socket "$RUN/a.sock" --json >/dev/null
  for r in $(seq "$REPEATS"); do
    for mode in ring ring-nospin socket kernel; do
      case $mode in
        ring*|socket)
          flag=(); [ "$mode" = socket ] && flag=(--no-ring)
          [ "$mode" = ring-nospin ] && flag=(--spin-us 0)
          out=$(ip netns exec "$A" "$BIN/uet" perf "$addr" --region 4096 --size 64 --depth 1 \
            --duration "$SECS" --socket "$RUN/a.sock" --json "${flag[@]}")
          p50=$(echo "$out" | field t_typical); p99=$(echo "$out" | field p99)
          ;;
        kernel)
          out=$(ip netns exec "$A" sockperf pp -i 10.77.0.2 -p 5001 -m 64 -t "$SECS" 2>&1)
          # sockperf reports one-way latency (RTT/2): double it for a round trip.
          p50=$(echo "$out" | awk '/percentile 50.000/ {print $NF*2}')
          p99=$(echo "$out" | awk '/percentile 99.000/ {print $NF*2}')
          ;;
      esac
      echo "$be $r $mode p50_us=$p50 p99_us=$p99"
    done
  done
  kill "$da" "$db"; wait "$da" "$db" 2>/dev/null || true
done
