#!/usr/bin/env bash
# Resends on a clean link: two xdp daemons in two namespaces joined by one
# veth pair (root), per MTU: a 1 GiB RMA write (`uetd --write-to`), then
# `uet perf` 64 KiB x 16 and 4 KiB x 64. Prints one line per phase: the
# build, MTU, goodput, the writer's retransmissions, RTOs and SACK-inferred
# losses, and the duplicates the target dropped (every resend on a clean
# link arrives as one). Builds given as directories holding `uetd` and
# `uet` are interleaved, so each repeat runs them under the same load.
# Usage: scripts/bench-resends.sh [REPEATS] [MTUS] [PERF_SECONDS] [BIN_DIR...]
#   defaults: 3 "1500 3498" 3 target/release
# PAUSE_MS=N stops the target's daemon for N ms every PAUSE_EVERY_MS (default
# 200) while each phase runs (scripts/pause-process.py), as a host that takes
# the target's vCPU away would; the phase lines then end with the pauses'
# count, median and longest. PAUSE_BOTH=1 stops both daemons together in the
# `uet perf` phases, as a hypervisor that throttles the whole VM does (the
# write phase's writer is not known beforehand: its target alone). Every
# phase line ends with t=START-END (Unix seconds), to line up with the
# stalls scripts/cpu-hiccups.py prints.
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
MTUS=${2:-"1500 3498"}
SECS=${3:-3}
shift $(($# < 3 ? $# : 3))
DIRS=("$@")
[ ${#DIRS[@]} -gt 0 ] || DIRS=("$PWD/target/release")
A=uetrs-$$-a
B=uetrs-$$-b
TMP=$(mktemp -d)
PIDS=()
stop() { for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; PIDS=(); }
PAUSER=
pause_start() { # pid of the target's daemon
  [ -n "${PAUSE_MS:-}" ] || return 0
  scripts/pause-process.py "$1" "$PAUSE_MS" "${PAUSE_EVERY_MS:-200}" >"$TMP/pauses" &
  PAUSER=$!
}
pause_end() { # prints " pauses=… pause_median_ms=… pause_max_ms=…", or nothing
  [ -n "$PAUSER" ] || return 0
  kill -TERM "$PAUSER" 2>/dev/null || true
  wait "$PAUSER" 2>/dev/null || true
  PAUSER=
  printf ' %s' "$(cat "$TMP/pauses")"
}
cleanup() {
  stop
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
# wait_for, stats, veth_lab
source scripts/bench-common.sh
veth_lab "$A" "$B" 95

phase() { # label bin mtu gbps before-writer after-writer before-target after-target
  python3 - "$@" <<'EOF'
import sys
label, bin_, mtu, gbps = sys.argv[1:5]
wb, wa, tb, ta = (list(map(int, s.split())) for s in sys.argv[5:9])
d = [a - b for a, b in zip(wa, wb)]
dup = ta[3] - tb[3]
print(f"build={bin_} mtu={mtu} phase={label} gbps={float(gbps):.2f} retransmits={d[0]} rtos={d[1]} sack_inferred={d[2]} target_duplicates={dup}", end="")
EOF
}

span() { # start -> " t=START-END" (Unix seconds, to line up with scripts/cpu-hiccups.py)
  printf ' t=%.3f-%.3f' "$1" "$(date +%s.%N)"
}

run() { # bin mtu
  local bin=$1 mtu=$2
  ip -n "$A" link set v0 mtu "$mtu"
  ip -n "$B" link set v1 mtu "$mtu"
  ip netns exec "$B" "$bin/uetd" --interface v1 --backend xdp --expose 1:0x5eed:1GiB \
    --socket "$TMP/b.sock" >"$TMP/t.out" 2>/dev/null &
  PIDS+=($!)
  wait_for "$TMP/t.out" exposed
  local gen
  gen=$(grep -o '"generation":[0-9]*' "$TMP/t.out" | head -1 | cut -d: -f2)
  local t0 t1
  t0=$(stats "$B" "$bin" "$TMP/b.sock")
  local target=${PIDS[0]} paused
  pause_start "$target"
  local began
  began=$(date +%s.%N)
  ip netns exec "$A" "$bin/uetd" --interface v0 --backend xdp --write-to 10.95.0.2 \
    --generation "$gen" --bytes 1GiB --exit --stats --socket "$TMP/w.sock" >"$TMP/w.out" 2>/dev/null
  paused=$(pause_end)
  wait_for "$TMP/t.out" verified
  t1=$(stats "$B" "$bin" "$TMP/b.sock")
  python3 - "$TMP/w.out" >"$TMP/w.sum" <<'EOF'
import json, sys
w = next(json.loads(l) for l in open(sys.argv[1]) if '"written"' in l)
st = next(json.loads(l) for l in open(sys.argv[1]) if '"workers"' in l)
p = [x["pds"] for x in st["workers"]]
print(w["gbps"])
print(sum(x["tx_retransmits"] for x in p), sum(x["rtos"] for x in p), sum(x["sack_inferred"] for x in p), 0)
EOF
  echo "$(phase write_1GiB "$(basename "$(dirname "$bin")")/$(basename "$bin")" "$mtu" "$(sed -n 1p "$TMP/w.sum")" \
    "0 0 0 0" "$(sed -n 2p "$TMP/w.sum")" "$t0" "$t1")$(span "$began")$paused"
  ip netns exec "$A" "$bin/uetd" --interface v0 --backend xdp --socket "$TMP/a.sock" \
    >"$TMP/a.out" 2>"$TMP/a.err" &
  PIDS+=($!)
  wait_for "$TMP/a.err" "control socket ready"
  local uri="uet://10.95.0.2/1/0/1/$gen/0x5eed"
  for sd in "65536 16" "4096 64"; do
    set -- $sd
    local w0 w1
    w0=$(stats "$A" "$bin" "$TMP/a.sock"); t0=$(stats "$B" "$bin" "$TMP/b.sock")
    local g
    pause_start "$target${PAUSE_BOTH:+,${PIDS[1]}}"
    began=$(date +%s.%N)
    g=$(ip netns exec "$A" "$bin/uet" perf --socket "$TMP/a.sock" "$uri" --region 1GiB \
      --size "$1" --depth "$2" --duration "$SECS" --json | python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["end"]["sum"]["bits_per_second"] / 1e9)')
    paused=$(pause_end)
    w1=$(stats "$A" "$bin" "$TMP/a.sock"); t1=$(stats "$B" "$bin" "$TMP/b.sock")
    echo "$(phase "perf_${1}x$2" "$(basename "$(dirname "$bin")")/$(basename "$bin")" "$mtu" "$g" "$w0" "$w1" "$t0" "$t1")$(span "$began")$paused"
  done
  stop
}

echo "load before: $(cat /proc/loadavg)"
for i in $(seq "$REPEATS"); do
  for mtu in $MTUS; do
    for d in "${DIRS[@]}"; do run "$d" "$mtu"; done
  done
done
echo "load after: $(cat /proc/loadavg)"
