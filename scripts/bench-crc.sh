#!/usr/bin/env bash
# The cost of the CRC32C trailer: 1 GiB RMA writes between two xdp daemons
# in two namespaces joined by veth (root), with the trailer off and on,
# interleaved in the same run. Prints per run: settings, goodput (Gb/s),
# CPU seconds of both daemons together (user + sys) and CPU seconds per GB
# written; then medians per setting (see BENCHMARKS.md).
# Usage: scripts/bench-crc.sh [REPEATS] [BYTES] [ENCAP]   (defaults 5 1GiB ip)
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-5}
BYTES=${2:-1GiB}
ENCAP=${3:-ip}
UETD=$PWD/target/release/uetd
[ -x "$UETD" ] || cargo build -q --release -p uetd --bin uetd
A=uetcrc-$$-a
B=uetcrc-$$-b
TMP=$(mktemp -d)
cleanup() {
  [ -n "${TPID:-}" ] && kill "$TPID" 2>/dev/null || true
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
# veth_lab
source scripts/bench-common.sh
veth_lab "$A" "$B" 93

ticks=$(getconf CLK_TCK)
cpu_of() { awk -v t="$ticks" '{print ($14 + $15) / t}' "/proc/$1/stat"; }

run() { # $1 = crc flag value
  local crc=$1
  ip netns exec "$B" "$UETD" --interface v1 --backend xdp --encap "$ENCAP" --crc-trailer="$crc" \
    --expose "1:0x5eed:$BYTES" --socket "$TMP/b.sock" >"$TMP/t.out" 2>/dev/null &
  TPID=$!
  for _ in $(seq 300); do grep -q exposed "$TMP/t.out" 2>/dev/null && break; sleep 0.1; done
  local gen
  gen=$(grep -o '"generation":[0-9]*' "$TMP/t.out" | head -1 | cut -d: -f2)
  local t0
  t0=$(cpu_of "$TPID")
  /usr/bin/time -f "%U %S" -o "$TMP/w.time" ip netns exec "$A" "$UETD" --interface v0 \
    --backend xdp --encap "$ENCAP" --crc-trailer="$crc" --write-to 10.93.0.2 --generation "$gen" --bytes "$BYTES" \
    --exit --stats --socket "$TMP/a.sock" >"$TMP/w.out" 2>/dev/null
  for _ in $(seq 300); do grep -q verified "$TMP/t.out" 2>/dev/null && break; sleep 0.1; done
  local t1
  t1=$(cpu_of "$TPID")
  kill "$TPID"; wait "$TPID" 2>/dev/null || true; TPID=
  python3 - "$crc" "$TMP/w.out" "$TMP/w.time" "$t0" "$t1" <<'EOF'
import json, sys
crc, wout, wtime, t0, t1 = sys.argv[1:]
w = next(json.loads(l) for l in open(wout) if '"written"' in l)
st = next(json.loads(l) for l in open(wout) if '"workers"' in l)
rtos = sum(x["pds"]["rtos"] for x in st["workers"])
bad = sum(x["io"]["rx_bad_crc"] for x in st["workers"])
u, s = map(float, open(wtime).read().split()[-2:])
cpu = u + s + float(t1) - float(t0)
gb = w["bytes"] / 1e9
print(f"crc={crc} gbps={w['gbps']:.3f} cpu_s={cpu:.2f} cpu_s_per_gb={cpu / gb:.3f} rtos={rtos} rx_bad_crc={bad}")
EOF
}

# Alternate which setting goes first, so neither always follows the other.
for i in $(seq "$REPEATS"); do
  if [ $((i % 2)) = 1 ]; then order="false true"; else order="true false"; fi
  for crc in $order; do run "$crc" | tee -a "$TMP/all"; done
done
python3 - "$TMP/all" <<'EOF'
import statistics, sys
rows = {}
for l in open(sys.argv[1]):
    d = dict(kv.split("=") for kv in l.split())
    rows.setdefault(d["crc"], []).append(d)
for crc, rs in rows.items():
    g = statistics.median(float(r["gbps"]) for r in rs)
    c = statistics.median(float(r["cpu_s_per_gb"]) for r in rs)
    t = statistics.median(int(r["rtos"]) for r in rs)
    print(f"median crc={crc}: {g:.3f} Gb/s, {c:.3f} CPU s/GB, {t} RTOs over {len(rs)} runs")
EOF
