#!/bin/bash
# Kernel TCP moving 1 GiB between two never-touched 1 GiB buffers, beside
# iperf3 (one 128 KiB buffer, always in cache), over one veth pair (root):
#   scripts/tcp-cold.sh MTU REPEATS
# What the cold-buffer penalty of kernel TCP is, for comparing it with an
# RMA write that reads and writes 1 GiB regions (BENCHMARKS.md, "What a
# gather sendmsg would save"). One line per run: Gb/s at the receiver.
# Offloads stay on (a veth's defaults), as in `uet lab bench`'s TCP row.
set -u
MTU=$1; REP=$2
A=uet-tcpcold-a-$$; B=uet-tcpcold-b-$$
D=$(mktemp -d)
cleanup() {
  for n in $A $B; do ip netns pids $n 2>/dev/null | xargs -r kill 2>/dev/null; done
  ip netns del $A 2>/dev/null; ip netns del $B 2>/dev/null
  rm -rf "$D"
}
trap cleanup EXIT
# shellcheck source=scripts/bench-common.sh
. "$(dirname "$0")/bench-common.sh"
veth_lab $A $B 87 "$MTU"
cat > $D/cold.py <<'EOF'
# send|recv ADDR PORT: 1 GiB from/into a fresh 1 GiB anonymous mapping,
# 1 MiB per call; the receiver prints its goodput from the first byte.
import mmap, socket, sys, time
mode, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
N, CH = 1 << 30, 1 << 20
buf = mmap.mmap(-1, N)
mv = memoryview(buf)
if mode == "recv":
    for i in range(0, N, 4096):  # populated, as a registered region is
        buf[i] = 0
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(1)
    print("ready", flush=True)
    c, _ = s.accept()
    got, t0 = 0, None
    while got < N:
        n = c.recv_into(mv[got:got + min(CH, N - got)])
        if n == 0:
            break
        if t0 is None:
            t0 = time.monotonic()
        got += n
    print(f"{got * 8 / (time.monotonic() - t0) / 1e9:.2f}")
else:
    for i in range(0, N, CH):  # written once, then out of cache
        buf[i:i + CH] = bytes([i >> 20 & 0xff]) * CH
    s = socket.create_connection((addr, port))
    sent = 0
    while sent < N:
        sent += s.send(mv[sent:sent + min(CH, N - sent)])
    s.close()
EOF
for r in $(seq "$REP"); do
  ip netns exec $B python3 $D/cold.py recv 10.87.0.2 5301 > $D/r.out &
  RP=$!
  for i in $(seq 300); do grep -q ready $D/r.out 2>/dev/null && break; sleep 0.05; done
  ip netns exec $A python3 $D/cold.py send 10.87.0.2 5301
  wait $RP
  echo "run $r mtu=$MTU tcp_cold_gbps=$(tail -1 $D/r.out)"
  ip netns exec $B iperf3 -s -1 > /dev/null &
  SP=$!
  for i in $(seq 100); do ip netns exec $B ss -ltn 2>/dev/null | grep -q ':5201 ' && break; sleep 0.05; done
  G=$(ip netns exec $A iperf3 -c 10.87.0.2 -t 3 -J |
      python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e9))')
  wait $SP
  echo "run $r mtu=$MTU iperf3_gbps=$G"
done
