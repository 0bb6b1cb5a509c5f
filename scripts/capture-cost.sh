#!/bin/bash
# The cost of an ACK-only capture: a two-host lab running uetd $1, uet perf (64 KiB, depth 16, 3 s)
# without and with `uet capture --direction rx` on the writer's daemon; Gb/s, retransmits, ACKs and
# the daemon's context switches and CPU ticks in each window. Usage (root): scripts/capture-cost.sh UETD LABEL
set -u
BIN=$1; TAG=$2
UET=${UET:-./target/release/uet}
NAME=edgcap$RANDOM
UETD_BIN=$BIN $UET lab up --hosts 2 --region 64MiB --name $NAME > /tmp/$NAME.json 2>/dev/null || { echo "lab up failed"; exit 1; }
D=/run/uet/lab/$NAME
GEN=$(head -1 $D/h0.log | sed 's/.*"generation":\([0-9]*\).*/\1/')
IP=$(grep '"ip"' /tmp/$NAME.json | head -1 | sed 's/.*"ip": "\([^"]*\)".*/\1/')
ADDR="uet://$IP/1/0/1/$GEN/0x5eed"
perf() { $UET perf $ADDR --region 64MiB --size 64KiB --depth 16 --duration 3 --json --socket $D/h1.sock 2>&1 | tail -1; }
stats() { $UET stats --socket $D/h1.sock | python3 -c 'import json,sys; d=json.load(sys.stdin); w=d["workers"]; print(sum(x["pds"].get("tx_data",0) for x in w), sum(x["pds"].get("tx_retransmits",0) for x in w), sum(x["pds"].get("rx_acks",0) for x in w))'; }
PID=$(grep daemon_pid /tmp/$NAME.json | tail -1 | sed 's/[^0-9]//g')
csw() { cat /proc/$PID/task/*/status | awk '/^voluntary_ctxt_switches/ {v+=$2} /^nonvoluntary_ctxt_switches/ {n+=$2} END {print v+n}'; }
cpu() { cat /proc/$PID/task/*/stat | awk '{t+=$14+$15} END {print t}'; }
perf >/dev/null  # warm-up
s0=$(stats); c0=$(csw); u0=$(cpu); P0=$(perf); s1=$(stats); c1=$(csw); u1=$(cpu)
$UET capture --out /tmp/$NAME.pcap --direction rx --snaplen 128 --socket $D/h1.sock > /tmp/$NAME.cap 2>&1 &
CP=$!
for i in $(seq 100); do grep -q capturing /tmp/$NAME.cap && break; sleep 0.05; done
c1=$(csw); u1=$(cpu); P1=$(perf); s2=$(stats); c2=$(csw); u2=$(cpu)
kill -INT $CP; wait $CP
CAPLINE=$(tail -1 /tmp/$NAME.cap)
d() { python3 -c "a='$1'.split(); b='$2'.split(); t=int(b[0])-int(a[0]); r=int(b[1])-int(a[1]); k=int(b[2])-int(a[2]); print(f'tx_data {t} rtx {100*r/max(t,1):.2f}% rx_acks {k}')"; }
echo "$TAG nocap $(echo $P0 | python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum"]["bits_per_second"] / 1e9))') $(d "$s0" "$s1") csw $((c1-c0)) cpu_ticks $((u1-u0))"
echo "$TAG cap   $(echo $P1 | python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum"]["bits_per_second"] / 1e9))') $(d "$s1" "$s2") csw $((c2-c1)) cpu_ticks $((u2-u1)) frames $(echo $CAPLINE | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["frames"], "dropped", d["dropped"])')"
$UET lab down --name $NAME >/dev/null 2>&1
rm -f /tmp/$NAME.pcap /tmp/$NAME.json /tmp/$NAME.cap
