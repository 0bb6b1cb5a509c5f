#!/usr/bin/env bash
# Multi-worker scaling on one veth with as many queues as the receiver has
# workers: a receiver uetd (xdp backend, W workers, one AF_XDP socket per
# queue) and PEERS writer daemons (kernel-UDP backend, one address each, in
# one namespace, chosen so that `owner_of` gives each peer to a different
# worker where W allows) writing at once, each into its own region.
#
# Per run it prints one line: workers, message size, aggregate goodput (all
# peers' bytes over the longest peer's time), packets the receiver took in,
# the receiver's CPU seconds (utime + stime of its process: workers and
# control thread) and the peers' (GNU time), and the receiver's packets per
# second per CPU second — the per-worker cost model. Runs interleave sizes
# and worker counts; repeat with REPEATS.
#
# usage (root, from the workspace root, after `cargo build --release -p uetd -p uet-cli`):
#   scripts/multiworker-bench.sh
#   REPEATS=3 WORKERS="1 2 4" PEERS=2 SIZES="64 4096 1048576" scripts/multiworker-bench.sh
set -euo pipefail

BIN=${BIN:-./target/release}
REPEATS=${REPEATS:-3}
WORKERS=${WORKERS:-"1 2"}
PEERS=${PEERS:-2}
SIZES=${SIZES:-"64 4096 1048576"}
DEPTH=${DEPTH:-16}
# Peer addresses in 10.79.0.0/24 in the order that spreads them over 2 and
# 4 workers (owner_of: .4 → 0/0, .3 → 1/1, .14 → 0/2, .2 → 1/3).
HOSTS=(4 3 14 2)

R=uet-mwb-r-$$
P=uet-mwb-p-$$
SOCK=/tmp/uet-mwb-$$.sock
OUT=$(mktemp -d /tmp/uet-mwb-$$.XXXX)
RPID=

cleanup() {
    if [[ -n $RPID ]]; then kill "$RPID" 2>/dev/null || true; wait "$RPID" 2>/dev/null || true; fi
    ip netns del "$R" 2>/dev/null || true
    ip netns del "$P" 2>/dev/null || true
    rm -rf "$OUT" "$SOCK"
}
trap cleanup EXIT
trap 'echo "failed at line $LINENO" >&2; tail -n 5 "$OUT"/*.err >&2' ERR

ip netns add "$R"
ip netns add "$P"

# Bytes each peer writes per message size: about a second of traffic.
bytes_for() {
    case $1 in
    64) echo 4MiB ;;
    4096) echo 64MiB ;;
    *) echo 256MiB ;;
    esac
}

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

setup_link() {
    local q=$1
    ip -n "$R" link del mr 2>/dev/null || true
    ip link add mr netns "$R" numtxqueues "$q" numrxqueues "$q" type veth \
        peer name mp netns "$P" numtxqueues "$q" numrxqueues "$q"
    ip -n "$R" addr add 10.79.0.1/24 dev mr
    ip -n "$R" link set mr up
    for ((i = 0; i < PEERS; i++)); do
        ip -n "$P" addr add "10.79.0.${HOSTS[$i]}/24" dev mp
    done
    ip -n "$P" link set mp up
    # AF_XDP sees a veth-bound datagram's UDP checksum unfinished unless
    # the sending end computes it: `ethtool -K mp tx off`, without ethtool.
    ip netns exec "$P" python3 - mp <<'EOF'
import ctypes, fcntl, socket, struct, sys
ETHTOOL_STXCSUM, SIOCETHTOOL = 0x17, 0x8946
value = ctypes.create_string_buffer(struct.pack("II", ETHTOOL_STXCSUM, 0))
ifreq = struct.pack("16sP", sys.argv[1].encode(), ctypes.addressof(value)).ljust(40, b"\0")
fcntl.ioctl(socket.socket(socket.AF_INET, socket.SOCK_DGRAM), SIOCETHTOOL, ifreq)
EOF
}

run_one() {
    local w=$1 size=$2
    setup_link "$w"
    rm -f "$SOCK"
    local expose=()
    for ((i = 0; i < PEERS; i++)); do expose+=(--expose "$((i + 1)):0x5eed:256MiB"); done
    ip netns exec "$R" "$BIN/uetd" --interface mr --backend xdp --workers "$w" \
        "${expose[@]}" --socket "$SOCK" >"$OUT/recv" 2>"$OUT/recv.err" &
    RPID=$!
    local deadline=$((SECONDS + 30))
    until [[ $(grep -c '"exposed"' "$OUT/recv" 2>/dev/null) -ge $PEERS ]]; do
        ((SECONDS < deadline)) || { echo "receiver did not start" >&2; cat "$OUT/recv.err" >&2; exit 1; }
        sleep 0.05
    done
    local gen
    gen=$(grep -m1 '"exposed"' "$OUT/recv" | sed 's/.*"generation":\([0-9]*\).*/\1/')
    local before
    before=$(ticks "$RPID")
    local pids=()
    for ((i = 0; i < PEERS; i++)); do
        /usr/bin/time -f "cpu %U %S" -o "$OUT/time$i" \
            ip netns exec "$P" "$BIN/uetd" --interface mp --backend udp \
            --address "10.79.0.${HOSTS[$i]}" --write-to 10.79.0.1 --ri "$((i + 1))" \
            --key 0x5eed --generation "$gen" --bytes "$(bytes_for "$size")" \
            --chunk "$size" --depth "$DEPTH" --exit >"$OUT/peer$i" 2>"$OUT/peer$i.err" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || true; done
    local after
    after=$(ticks "$RPID")
    local stats
    stats=$("$BIN/uet" stats --socket "$SOCK")
    kill "$RPID"
    wait "$RPID" 2>/dev/null || true
    RPID=
    python3 - "$w" "$size" "$PEERS" "$((after - before))" "$(getconf CLK_TCK)" "$OUT" "$stats" <<'EOF'
import json, sys
w, size, peers, ticks, hz, out, stats = sys.argv[1:]
peers = int(peers)
total, longest, peer_cpu, failed = 0, 0.0, 0.0, 0
for i in range(peers):
    line = [l for l in open(f"{out}/peer{i}") if '"written"' in l or '"write_failed"' in l]
    if not line or '"written"' not in line[0]:
        failed += 1
        continue
    r = json.loads(line[0])
    total += r["bytes"]
    longest = max(longest, r["seconds"])
    t = open(f"{out}/time{i}").read().split()
    peer_cpu += float(t[-2]) + float(t[-1])
s = json.loads(stats)
rx = sum(x["io"]["rx_packets"] for x in s["workers"])
handed = sum(x["io"]["handed_off"] for x in s["workers"])
dropped = sum(x["io"]["rx_dropped"] for x in s["workers"])
rtos = sum(x["pds"]["rtos"] for x in s["workers"])
cpu = int(ticks) / int(hz)
gbps = total * 8 / longest / 1e9 if longest else 0.0
pps = rx / cpu if cpu else 0.0
print(f"workers={w} size={size} peers={peers} failed={failed} gbps={gbps:.3f} "
      f"rx_packets={rx} handed_off={handed} rx_dropped={dropped} rtos={rtos} "
      f"recv_cpu_s={cpu:.2f} peers_cpu_s={peer_cpu:.2f} "
      f"recv_pps_per_cpu_s={pps:.0f} seconds={longest:.3f}", flush=True)
EOF
}

echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD 2>/dev/null) load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= REPEATS; r++)); do
    for size in $SIZES; do
        for w in $WORKERS; do
            run_one "$w" "$size"
        done
    done
done
echo "# end load $(cut -d' ' -f1-3 /proc/loadavg)"
