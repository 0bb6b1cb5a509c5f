#!/usr/bin/env bash
# Resends between long-lived daemons (root): per build one veth pair
# between two namespaces of its own, with an xdp target (1 GiB exposed) and
# an xdp writer daemon that stay up for the whole run; then RUNS rounds, each
# running `uet perf` 64 KiB x 16 for SECS seconds through every pair in
# turn (interleaved). One line per run: the build, the round, goodput and
# the writer's retransmissions and RTOs over the run, and the span of the
# run (t=START-END, Unix seconds, as scripts/cpu-hiccups.py prints them).
# Unlike scripts/bench-resends.sh, which starts daemons (and maps their 1 GiB
# regions) for every phase, this shows daemons that have been running for a
# while.
# Usage: scripts/bench-long-lived.sh [RUNS] [SECS] [MTU] [BIN_DIR...]
#   defaults: 20 3 1500 target/release; a BIN_DIR holds `uetd` and `uet`
#   (a `uetd` may be a wrapper adding flags).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-20}
SECS=${2:-3}
MTU=${3:-1500}
shift $(($# < 3 ? $# : 3))
DIRS=("$@")
[ ${#DIRS[@]} -gt 0 ] || DIRS=("$PWD/target/release")
TMP=$(mktemp -d)
NS=()
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  for n in "${NS[@]}"; do ip netns del "$n" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT
# wait_for, stats
source scripts/bench-common.sh
URIS=()
for i in "${!DIRS[@]}"; do
  d=${DIRS[$i]}
  a=uetll-$$-$i-a b=uetll-$$-$i-b
  NS+=("$a" "$b")
  ip netns add "$a"; ip netns add "$b"
  ip -n "$a" link add v0 mtu "$MTU" type veth peer name v1 netns "$b" mtu "$MTU"
  ip -n "$a" addr add "10.96.$i.1/24" dev v0
  ip -n "$b" addr add "10.96.$i.2/24" dev v1
  ip -n "$a" link set v0 up; ip -n "$b" link set v1 up
  ip netns exec "$b" "$d/uetd" --interface v1 --backend xdp --expose 1:0x5eed:1GiB \
    --socket "$TMP/$i-b.sock" >"$TMP/$i-t.out" 2>/dev/null &
  PIDS+=($!)
  wait_for "$TMP/$i-t.out" exposed
  gen=$(grep -o '"generation":[0-9]*' "$TMP/$i-t.out" | head -1 | cut -d: -f2)
  ip netns exec "$a" "$d/uetd" --interface v0 --backend xdp --socket "$TMP/$i-a.sock" \
    >/dev/null 2>"$TMP/$i-a.err" &
  PIDS+=($!)
  wait_for "$TMP/$i-a.err" "control socket ready"
  URIS+=("uet://10.96.$i.2/1/0/1/$gen/0x5eed")
done
echo "load before: $(cat /proc/loadavg)"
for r in $(seq "$RUNS"); do
  for i in "${!DIRS[@]}"; do
    d=${DIRS[$i]} a=uetll-$$-$i-a
    read -r r0 t0 _ _ <<<"$(stats "$a" "$d" "$TMP/$i-a.sock")"
    began=$(date +%s.%N)
    g=$(ip netns exec "$a" "$d/uet" perf --socket "$TMP/$i-a.sock" "${URIS[$i]}" --region 1GiB \
      --size 65536 --depth 16 --duration "$SECS" --json |
      python3 -c 'import json,sys; print(round(json.loads(sys.stdin.read().strip().splitlines()[-1])["end"]["sum"]["bits_per_second"] / 1e9, 2))')
    ended=$(date +%s.%N)
    read -r r1 t1 _ _ <<<"$(stats "$a" "$d" "$TMP/$i-a.sock")"
    printf 'build=%s round=%s mtu=%s gbps=%s retransmits=%s rtos=%s t=%.3f-%.3f\n' \
      "$(basename "$d")" "$r" "$MTU" "$g" $((r1 - r0)) $((t1 - t0)) "$began" "$ended"
  done
done
echo "load after: $(cat /proc/loadavg)"
