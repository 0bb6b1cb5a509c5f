#!/usr/bin/env bash
# How long starting and stopping an xdp daemon keeps this machine's CPUs
# from running other work (root): per cycle, for each build in turn
# (interleaved), start `uetd` on one end of a veth pair exposing a region,
# wait for it to say `exposed`, let it run 1 s, stop it, wait 1 s; meanwhile
# scripts/cpu-hiccups.py reports every stall over LIMIT ms. Prints per build
# the stalls that fell in the start windows (start to `exposed`, plus 0.5 s)
# and in the stop windows (stop to 1 s after).
# Usage: scripts/start-stop-stalls.sh CYCLES UETD_DIR [UETD_DIR...]
#   REGION=1GiB (the exposed region), LIMIT=3 (ms)
set -euo pipefail
cd "$(dirname "$0")/.."
CYCLES=${1:?usage: scripts/start-stop-stalls.sh CYCLES UETD_DIR [UETD_DIR...]}
shift
[ $# -gt 0 ] || { echo "name at least one directory holding uetd" >&2; exit 2; }
A=uetss-$$-a
B=uetss-$$-b
TMP=$(mktemp -d)
PROBE=
cleanup() {
  [ -z "$PROBE" ] || kill "$PROBE" 2>/dev/null || true
  pkill -f "cpu-hiccups.py ${LIMIT:-3} $TMP" 2>/dev/null || true
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
# wait_for, veth_lab
source scripts/bench-common.sh
veth_lab "$A" "$B" 99

# The probe's extra argument only marks its processes as this run's.
python3 scripts/cpu-hiccups.py "${LIMIT:-3}" "$TMP" >"$TMP/probe" &
PROBE=$!
for _ in $(seq "$CYCLES"); do
  for dir in "$@"; do
    t0=$(date +%s.%N)
    ip netns exec "$B" "$dir/uetd" --interface v1 --backend xdp \
      --expose "1:0x5eed:${REGION:-1GiB}" --socket "$TMP/b.sock" >"$TMP/out" 2>/dev/null &
    pid=$!
    wait_for "$TMP/out" exposed
    t1=$(date +%s.%N)
    sleep 1
    t2=$(date +%s.%N)
    kill "$pid"
    wait "$pid" || true
    sleep 1
    t3=$(date +%s.%N)
    echo "$dir $t0 $t1 $t2 $t3" >>"$TMP/cycles"
  done
done
python3 - "$TMP/cycles" "$TMP/probe" <<'EOF'
import sys
from collections import defaultdict

stalls = []
for line in open(sys.argv[2]):
    f = line.split()
    if len(f) >= 3 and f[2].startswith("slept_ms="):
        stalls.append((float(f[0]), float(f[2].split("=")[1])))
got = defaultdict(lambda: {"start": [], "stop": []})
cycles = defaultdict(int)
for line in open(sys.argv[1]):
    d, t0, t1, t2, t3 = line.split()
    t0, t1, t2, t3 = map(float, (t0, t1, t2, t3))
    cycles[d] += 1
    for t, ms in stalls:
        if t0 <= t <= t1 + 0.5:
            got[d]["start"].append(ms)
        elif t2 <= t <= t3:
            got[d]["stop"].append(ms)
for d in cycles:
    parts = []
    for k in ("start", "stop"):
        s = got[d][k]
        parts.append(f"{k}: over_3ms={sum(x > 3 for x in s)} over_5ms={sum(x > 5 for x in s)} longest_ms={max(s, default=0):.1f}")
    print(f"build={d} cycles={cycles[d]} " + " ".join(parts))
EOF
