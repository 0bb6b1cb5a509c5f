#!/bin/bash
# A/B of uetd builds on one xdp RMA write over a veth pair (root):
#   scripts/datapath-ab.sh MTU BYTES REPEATS UETD_BIN [UETD_BIN ...]
# Two namespaces of its own joined by one veth pair; per repeat, every
# binary in turn (interleaved) runs the daemons' built-in write test
# (`--expose` at the target, `--write-to ... --exit --stats` at the writer,
# verified by hash). One line per run: goodput, the two daemons' user and
# system CPU seconds per GB and the machine's (/proc/stat, other load
# included) over the write's window, the load, the writer's RTOs, and the
# datagrams the target's kernel dropped before its daemon saw them (udp:
# socket buffer full; xdp: RX ring full), the duplicates it dropped (a
# resend whose original had arrived), and its worker's loop iterations and
# sleeps (how often it slept in poll() rather than spinning).
# BUSY=N sets both daemons' busy_poll_us (unset: the default).
# BACKEND=udp runs the kernel-UDP backend instead of AF_XDP.
# PERF=DIR also records both daemons with `perf record -e cpu-clock -F 4000`
# from the write's first packets (the veth persists across runs: counted
# from each run's start) to the writer's exit, as DIR/<binary>-<repeat>.data;
# PERF_CALLGRAPH=1 adds call graphs (-g).
set -u
MTU=$1; BYTES=$2; BYTES_N=$(numfmt --from=iec-i "${2%B}"); REP=$3; shift 3
A=uet-ab-a-$$; B=uet-ab-b-$$
D=$(mktemp -d)
cleanup() {
  for n in $A $B; do ip netns pids $n 2>/dev/null | xargs -r kill 2>/dev/null; done
  sleep 0.2
  ip netns del $A 2>/dev/null; ip netns del $B 2>/dev/null
  rm -rf "$D"
}
trap cleanup EXIT
# shellcheck source=scripts/bench-common.sh
. "$(dirname "$0")/bench-common.sh"
veth_lab $A $B 88 "$MTU"
# The samplers and waits below use bash builtins only: a fork per sample
# (date, awk, grep, sleep every 20-50 ms) took a vCPU from the daemons in
# millisecond slices on a two-vCPU machine.
exec {NAP}<> <(:)
nap() { read -r -t "$1" -u $NAP || true; }
# A sample line: time, machine busy ticks (user nice system irq
# softirq), target utime stime, writer utime stime, and the ticks the
# hypervisor ran something else while a vCPU wanted to run (steal).
sample() {
  local _ u n s i w q sq st _r t a
  read -r _ u n s i w q sq st _r < /proc/stat
  read -ra t 2>/dev/null < /proc/$TP/stat || t=()
  read -ra a 2>/dev/null < /proc/$WP/stat || a=()
  printf '%s %s %s %s %s %s %s\n' "$EPOCHREALTIME" $((u + n + s + q + sq)) \
    "${t[13]:-0}" "${t[14]:-0}" "${a[13]:-0}" "${a[14]:-0}" "$st"
}
# Whether file $1 has a line matching the extended pattern $2.
has() { local l; while IFS= read -r l; do [[ $l =~ $2 ]] && return 0; done 2>/dev/null < "$1"; return 1; }
if [ -n "${BUSY:-}" ]; then
  printf 'interface = "v0"\nbusy_poll_us = %s\n' "$BUSY" > $D/a.toml
  printf 'interface = "v1"\nbusy_poll_us = %s\n' "$BUSY" > $D/b.toml
fi
for r in $(seq "$REP"); do
 for BIN in "$@"; do
  rm -f $D/t.out $D/w.out
  ip netns exec $B env UET_LOG=warn "$BIN" ${BUSY:+--config $D/b.toml} --interface v1 --backend ${BACKEND:-xdp} \
    --expose 1:0x5eed:$BYTES --stats --socket $D/b.sock > $D/t.out 2>$D/t.err &
  TP=$!
  for i in $(seq 300); do has $D/t.out '"exposed"' && break; nap 0.1; done
  GEN=$(grep -o '"generation":[0-9]*' $D/t.out | head -1 | cut -d: -f2)
  TX0=$(ip netns exec $A cat /sys/class/net/v0/statistics/tx_packets)
  ip netns exec $A env UET_LOG=warn "$BIN" ${BUSY:+--config $D/a.toml} --interface v0 --backend ${BACKEND:-xdp} \
    --write-to 10.88.0.2 --generation "$GEN" --bytes $BYTES --exit --stats --socket $D/a.sock > $D/w.out 2>$D/w.err &
  WP=$!
  if [ -n "${PERF:-}" ]; then
    mkdir -p "$PERF"
    for i in $(seq 2000); do
      [ "$(ip netns exec $A cat /sys/class/net/v0/statistics/tx_packets)" -gt $((TX0 + 100)) ] && break; sleep 0.01
    done
    perf record -q ${PERF_CALLGRAPH:+-g} -e cpu-clock -F 4000 -p $TP,$WP -o "$PERF/$(basename "$BIN")-$r.data" 2>/dev/null &
    PP=$!
  fi
  ( while kill -0 $WP 2>/dev/null; do sample; nap 0.05; done ) > $D/samples &
  SP=$!
  for i in $(seq 30000); do has $D/w.out '"written"|write_failed' && break; nap 0.02; done
  TEND=$EPOCHREALTIME
  wait $WP; wait $SP
  [ -n "${PERF:-}" ] && { kill -INT $PP; wait $PP; }
  for i in $(seq 100); do grep -q '"verified"' $D/t.out && break; sleep 0.1; done
  kill $TP; wait $TP 2>/dev/null
  W=$(grep '"written"' $D/w.out)
  G=$(echo "$W" | grep -o '"gbps":[0-9.]*' | cut -d: -f2)
  S=$(echo "$W" | grep -o '"seconds":[0-9.]*' | cut -d: -f2)
  X1=$(echo "$W" | grep -o '"xxh3":"[0-9a-fx]*"'); X2=$(grep -o '"xxh3":"[0-9a-fx]*"' $D/t.out)
  OK=$([ -n "$X1" ] && [ "$X1" = "$X2" ] && echo verified || echo NOT-VERIFIED)
  CPU=$(awk -v ncpu="$(nproc)" -v e="$TEND" -v s="${S:-0}" -v b="$BYTES_N" 'BEGIN{st=e-s}
    $5>0{n++;t[n]=$1;m[n]=$2;u[n]=$3+$5;k[n]=$4+$6;sl[n]=$7}
    END{i0=1;for(i=1;i<=n;i++){if(t[i]<=st)i0=i; i1=i}; sp=t[i1]-t[i0]; if(sp<=0||s<=0){print "cpu=n/a";exit}
        f=s/sp/100/(b/1e9);
        printf "user_s_per_GB=%.3f sys_s_per_GB=%.3f machine_cpu_s_per_GB=%.3f steal_pct=%.1f", (u[i1]-u[i0])*f, (k[i1]-k[i0])*f, (m[i1]-m[i0])*f, (sl[i1]-sl[i0])/sp/ncpu}' $D/samples)
  # The target's drops before its stack (the socket's buffer, udp, or the
  # AF_XDP RX ring, xdp, full) and its duplicates.
  TD=$(grep -o '"rx_socket_drops":[0-9]*\|"rx_ring_full":[0-9]*\|"duplicate":[0-9]*\|"sleeps":[0-9]*\|"iterations":[0-9]*' $D/t.out | tr '\n' ' ')
  echo "$BIN mtu=$MTU gbps=${G:-failed} $CPU $OK load=$(cut -d' ' -f1 /proc/loadavg) $(grep -o '"rtos":[0-9]*' $D/w.out | tr '\n' ' ')target $TD"
 done
done
