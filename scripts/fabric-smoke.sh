#!/usr/bin/env bash
# libfabric and MPI over a libfabric provider between two network namespaces
# (as root). Runs Debian's fi_info and fi_pingpong, our fi_rma_check (1 GiB of
# fi_write/fi_writedata/fi_read verified by hash), Open MPI with our
# mpi_check and mpi4py's own benchmarks, with one rank in each namespace.
#
#   scripts/fabric-smoke.sh [--provider NAME] [--profile release|debug]
#                           [--lib PATH] [--skip STEP[,STEP…]] [--pp-iters N] [--full]
#
# --provider  libfabric provider (default uet; libfabric's own, e.g. tcp or
#             sockets, to check the harness). For uet the provider library
#             must be built (cargo build --release -p uet-fabric); the script
#             presents it to libfabric as target/PROFILE/fabric/libuet-fi.so.
# --lib       the provider library (default target/PROFILE/libuet_fabric.so)
# UET_FABRIC_BIN_DIR: where uetd and uet are (default target/PROFILE)
# --skip      steps not to run: fi_info fi_pingpong fi_rma mpi mpi4py interop
#             (interop — libfabric <-> uetd in both directions — runs only
#             for the uet provider and needs target/PROFILE/uetd and uet)
# --pp-iters  fi_pingpong iterations per size (default 10)
# --full      mpi_check with its full repeat counts (the BENCHMARKS run)
# --bench     also the fi_pingpong comparison for BENCHMARKS.md: the provider
#             (RDM) beside libfabric's tcp (RDM) and udp (DGRAM) on the same
#             veth pair, per size, median of 5 runs
#
# Builds only its C programs (into target/fabric-tests/) and, once, a Python
# venv there with mpi4py compiled against the system's Open MPI. Exits 0 only
# when every step that ran passed; prints one summary line per step.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

PROV=${UET_FABRIC_PROVIDER:-uet}
PROFILE=release
LIB=""
SKIP=""
PP_ITERS=10
MPI_MODE=--quick
BENCH=0
while [ $# -gt 0 ]; do
    case $1 in
        --provider) PROV=$2; shift 2 ;;
        --profile) PROFILE=$2; shift 2 ;;
        --lib) LIB=$2; shift 2 ;;
        --skip) SKIP=",$2,"; shift 2 ;;
        --pp-iters) PP_ITERS=$2; shift 2 ;;
        --full) MPI_MODE=""; shift ;;
        --bench) BENCH=1; shift ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "fabric-smoke: unknown argument $1" >&2; exit 2 ;;
    esac
done

if [ "$(id -u)" != 0 ]; then
    echo "fabric-smoke: needs root (it creates network namespaces)" >&2
    exit 2
fi
for tool in ip fi_info fi_pingpong mpirun mpicc cc unshare ss python3; do
    command -v "$tool" >/dev/null || {
        echo "fabric-smoke: $tool not found (apt-get install libfabric-bin libfabric-dev openmpi-bin libopenmpi-dev libxxhash-dev iproute2)" >&2
        exit 2
    }
done

TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
OUT=$TARGET/fabric-tests
mkdir -p "$OUT"

# --- the provider under test -------------------------------------------------
if [ "$PROV" = uet ]; then
    so=${LIB:-$TARGET/$PROFILE/libuet_fabric.so}
    if [ ! -f "$so" ]; then
        echo "fabric-smoke: $so is missing: build it first (cargo build --$PROFILE -p uet-fabric)" >&2
        exit 2
    fi
    # libfabric loads external providers as lib<name>-fi.so from FI_PROVIDER_PATH.
    mkdir -p "$TARGET/$PROFILE/fabric"
    if [ -z "$LIB" ]; then
        ln -sfn ../libuet_fabric.so "$TARGET/$PROFILE/fabric/libuet-fi.so"
    else
        ln -sfn "$(realpath "$LIB")" "$TARGET/$PROFILE/fabric/libuet-fi.so"
    fi
    export FI_PROVIDER_PATH=$TARGET/$PROFILE/fabric
fi
BIN_DIR=${UET_FABRIC_BIN_DIR:-$TARGET/$PROFILE}
export FI_PROVIDER=$PROV

# --- namespaces, cleaned up on every exit -------------------------------------
AGENT=""
STEP_PID=""
NS_A=ufab-$$-a
NS_B=ufab-$$-b
NET=10.231.7.0/24
IP_A=10.231.7.1
IP_B=10.231.7.2
PIDS=()
cleanup() {
    local rc=$? ns p
    for p in "${PIDS[@]}" $STEP_PID; do kill "$p" 2>/dev/null || true; done
    # Whatever still runs in our namespaces (mpirun and its ranks run under
    # `timeout`, which makes a process group of its own) ends with them.
    for ns in "$NS_A" "$NS_B"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    local deadline=$((SECONDS + 5))
    while [ -n "$(ip netns pids "$NS_A" 2>/dev/null; ip netns pids "$NS_B" 2>/dev/null)" ] \
        && [ $SECONDS -lt $deadline ]; do
        sleep 0.1
    done
    for ns in "$NS_A" "$NS_B"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    done
    ip netns del "$NS_A" 2>/dev/null || true
    ip netns del "$NS_B" 2>/dev/null || true
    rm -f "$AGENT"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$NS_A"
ip netns add "$NS_B"
ip link add ufa0 netns "$NS_A" mtu 1500 type veth peer name ufb0 netns "$NS_B" mtu 1500
for side in A B; do
    ns_var=NS_$side ip_var=IP_$side
    ns=${!ns_var} addr=${!ip_var} dev=uf${side,,}0
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$addr/24" dev "$dev"
    ip -n "$ns" link set "$dev" up
done
in_a() { ip netns exec "$NS_A" "$@"; }
in_b() { ip netns exec "$NS_B" "$@"; }

# Waits (bounded) until something in namespace $1 listens on TCP port $2.
wait_listen() {
    local ns=$1 port=$2 deadline=$((SECONDS + ${3:-20}))
    until ip netns exec "$ns" ss -ltnH "sport = :$port" | grep -q .; do
        if [ $SECONDS -ge $deadline ]; then
            echo "nothing listens on TCP port $port in $ns" >&2
            return 1
        fi
        sleep 0.05
    done
}

# poll_for SECONDS CMD…: runs CMD until it succeeds, at most SECONDS.
poll_for() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@" 2>/dev/null; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.05
    done
}

SUMMARY=()
FAILED=0
# step NAME FUNCTION: runs FUNCTION in a subshell with errexit on and records
# its result; a failed step does not stop the steps after it.
step() {
    local name=$1 fn=$2 rc
    if [[ $SKIP == *",$name,"* ]]; then
        SUMMARY+=("SKIP  $name (--skip)")
        return
    fi
    echo
    echo "=== $name ($PROV) ==="
    rm -f "$OUT/$name.note"
    # In the background and waited for: `wait` returns when a signal comes,
    # so the cleanup trap runs at once (not after the step ends).
    set +e
    (set -e; "$fn") &
    STEP_PID=$!
    wait "$STEP_PID"
    rc=$?
    STEP_PID=""
    set -e
    # A step may leave a one-line result in $OUT/NAME.note for the summary.
    note=$(cat "$OUT/$name.note" 2>/dev/null || true)
    if [ $rc -eq 0 ]; then
        SUMMARY+=("PASS  $name${note:+: $note}")
    else
        SUMMARY+=("FAIL  $name (exit $rc)${note:+: $note}")
        FAILED=1
    fi
}

# --- our C programs ---------------------------------------------------------------
if [[ $SKIP != *,fi_rma,* || $SKIP != *,interop,* ]]; then
    cc -O2 -Wall -Wextra -Werror -o "$OUT/fi_rma_check" uet-fabric/tests/c/fi_rma_check.c -lfabric -lxxhash
fi
mpicc -O2 -Wall -Wextra -Werror -o "$OUT/mpi_check" uet-fabric/tests/c/mpi_check.c

# --- fi_info ----------------------------------------------------------------------
s_fi_info() {
    local out
    out=$(in_a timeout 30 fi_info -p "$PROV")
    echo "$out"
    echo "$out" | grep -q "provider: .*$PROV" || { echo "fi_info lists no $PROV provider" >&2; return 1; }
    # An RDM endpoint is what fi_pingpong and Open MPI need.
    in_a timeout 30 fi_info -p "$PROV" -t FI_EP_RDM >/dev/null
    echo "$(echo "$out" | grep -c '^provider:') entries, RDM present" > "$OUT/fi_info.note"
}

# --- fi_pingpong ------------------------------------------------------------------
s_fi_pingpong() {
    local srv=$OUT/fi_pingpong.server.log out rc=0
    in_b timeout 300 fi_pingpong -p "$PROV" -e rdm -S all -I "$PP_ITERS" -c >"$srv" 2>&1 &
    local spid=$!
    PIDS+=("$spid")
    wait_listen "$NS_B" 47592
    out=$(in_a timeout 300 fi_pingpong -p "$PROV" -e rdm -S all -I "$PP_ITERS" -c "$IP_B" 2>&1) || rc=$?
    echo "$out"
    wait "$spid" || { echo "fi_pingpong server failed:" >&2; cat "$srv" >&2; return 1; }
    [ $rc -eq 0 ] || { echo "fi_pingpong client failed ($rc)" >&2; return 1; }
    echo "$out" | grep -q '^bytes .*usec/xfer' || { echo "no result table" >&2; return 1; }
    echo "$out" | grep -q '^1m ' || { echo "no 1 MiB row in the table" >&2; return 1; }
    # (-I is small here: the per-size figures include fixed costs; --bench measures.)
    echo "$(grep -c '^[0-9.]*[km]\? .*=' <<<"$out") sizes up to $(awk '$3 ~ /^=/ {s = $1} END {print s}' <<<"$out"), -c data checks, -I $PP_ITERS" \
        > "$OUT/fi_pingpong.note"
}

# --- fi_rma_check: 1 GiB of fi_write / fi_writedata / fi_read -------------------------
s_fi_rma() {
    local srv=$OUT/fi_rma_check.server.log out rc=0
    in_b timeout 600 "$OUT/fi_rma_check" --provider "$PROV" --listen "$IP_B" >"$srv" 2>&1 &
    local spid=$!
    PIDS+=("$spid")
    wait_listen "$NS_B" 47600
    out=$(in_a timeout 600 "$OUT/fi_rma_check" --provider "$PROV" --connect "$IP_B" 2>&1) || rc=$?
    echo "$out"
    wait "$spid" || rc=$?
    echo "--- server:"
    cat "$srv"
    [ $rc -eq 0 ] || return 1
    grep -q '^fi_rma_check passed' <<<"$out" || return 1
    grep '^total' <<<"$out" | head -1 > "$OUT/fi_rma.note"
}

# --- Open MPI ------------------------------------------------------------------------
# Launch agent for mpirun (plm_rsh_agent): called as `agent [opts] HOST CMD…`,
# runs CMD inside the namespace that owns HOST's address, in a UTS namespace
# of its own named after it (so Open MPI sees two nodes, not one).
AGENT=$OUT/ns-agent-$$.sh
cat >"$AGENT" <<EOF
#!/usr/bin/env bash
set -euo pipefail
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
for ns in $NS_A $NS_B; do
    if ip -n "\$ns" -o -4 addr show | grep -q "inet \$host/"; then
        exec ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$0"; exec sh -c "\$1"' "\$ns" "\$*"
    fi
done
echo "ns-agent: no namespace has address \$host" >&2
exit 1
EOF
chmod +x "$AGENT"

# mpirun in namespace A (own UTS namespace) with one rank per namespace; the
# out-of-band channel over the veth; no TCP btl; pml cm over mtl ofi
# restricted to the provider. --bind-to none: each "node" believes it has the
# machine's cores and would bind both ranks to the same one.
mpirun_ab() {
    local env=()
    [ -n "${FI_PROVIDER_PATH:-}" ] && env=(-x FI_PROVIDER_PATH)
    # shellcheck disable=SC2016 # the inner sh expands them
    in_a unshare --uts sh -c 'hostname "$0"; exec "$@"' "$NS_A" \
        timeout 600 mpirun --allow-run-as-root --oversubscribe --bind-to none \
        -np 2 --host "$IP_A,$IP_B" \
        --mca plm_rsh_agent "$AGENT" \
        --mca oob_tcp_if_include "$NET" \
        --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "$PROV" \
        --mca mtl_ofi_verbose 1 \
        -x FI_PROVIDER "${env[@]}" "$@"
}

# Checks that rank 0 ran in namespace A and rank 1 in B (mpi_check's
# "location" lines carry the network namespace inode).
check_locations() {
    local out=$1 ino_a ino_b
    ino_a=$(stat -L -c %i "/run/netns/$NS_A")
    ino_b=$(stat -L -c %i "/run/netns/$NS_B")
    grep -q "^location rank=0 host=$NS_A netns=$ino_a " <<<"$out" || { echo "rank 0 not in $NS_A" >&2; return 1; }
    grep -q "^location rank=1 host=$NS_B netns=$ino_b " <<<"$out" || { echo "rank 1 not in $NS_B" >&2; return 1; }
}

# mtl ofi's verbose lines, but for the one naming the provider it chose.
quiet_mtl() { awk '/mtl:ofi:prov:/ || !/mtl_ofi_component.c/'; }

# The provider mtl ofi chose, from its verbose output.
check_mtl_provider() {
    local out=$1
    grep -Eq "mtl:ofi:prov: $PROV(;|\$)" <<<"$out" || { echo "mtl ofi did not select $PROV" >&2; return 1; }
}

OSC=""
s_mpi() {
    local out rc=0 osc_note
    # One-sided over osc rdma needs btl ofi with RMA and atomics on the
    # provider; try it alone first, else let osc pt2pt carry it over the
    # pml (that is, over mtl ofi and the same provider).
    echo "--- one-sided over osc rdma + btl ofi:"
    if out=$(mpirun_ab --mca btl self,ofi --mca btl_ofi_provider_include "$PROV" --mca osc rdma \
            "$OUT/mpi_check" --onesided-only 2>&1); then
        OSC="--mca btl self,ofi --mca btl_ofi_provider_include $PROV --mca osc rdma"
        osc_note="one-sided over osc rdma + btl ofi ($PROV)"
        echo "passed"
    else
        echo "$out" | grep -v '^\[.*mtl' | tail -n 15
        OSC="--mca btl self --mca osc pt2pt"
        osc_note="one-sided over osc pt2pt on pml cm/mtl ofi ($PROV): osc rdma + btl ofi failed"
        echo "failed; one-sided falls back to osc pt2pt (active messages over the pml)"
    fi
    echo "--- mpi_check $MPI_MODE with $OSC:"
    # shellcheck disable=SC2086
    out=$(mpirun_ab $OSC "$OUT/mpi_check" $MPI_MODE 2>&1) || rc=$?
    echo "$out" | quiet_mtl
    [ $rc -eq 0 ] || return 1
    check_mtl_provider "$out"
    check_locations "$out"
    grep -q '^mpi_check passed' <<<"$out"
    {
        grep '^pingpong' <<<"$out" | awk '{printf "%s %s %s; ", $2, $3, $5}'
        echo "$osc_note"
    } > "$OUT/mpi.note"
}

# --- mpi4py ------------------------------------------------------------------------------
s_mpi4py() {
    local venv=$OUT/venv out
    if ! "$venv/bin/python" -c 'import mpi4py.MPI' 2>/dev/null; then
        rm -rf "$venv"
        python3 -m venv "$venv"
        # From source (no wheel), compiled against the system's Open MPI;
        # -O1 without debug info builds its one large C file in a fraction
        # of the default -O3 -g time (the benchmarks time MPI, not Python).
        MPICC=mpicc CFLAGS="-O1 -g0" "$venv/bin/pip" install --quiet --no-cache-dir \
            --no-binary mpi4py mpi4py
    fi
    "$venv/bin/python" -c 'from mpi4py import MPI; print("mpi4py", __import__("mpi4py").__version__, "on", MPI.Get_library_version().splitlines()[0])'
    out=$(mpirun_ab --mca btl self "$venv/bin/python" -m mpi4py.bench helloworld 2>&1)
    echo "$out" | quiet_mtl
    check_mtl_provider "$out"
    grep -q "Hello, World! I am process 0 of 2 on $NS_A" <<<"$out"
    grep -q "Hello, World! I am process 1 of 2 on $NS_B" <<<"$out"
    # Up to 4 MiB, 100 round trips a size (20 above 32 KiB): a smoke run.
    out=$(mpirun_ab --mca btl self "$venv/bin/python" -m mpi4py.bench pingpong --max-size $((4 << 20)) \
        --loop 100 --skip 10 --loop-large 20 --skip-large 2 2>&1)
    echo "$out" | quiet_mtl
    check_mtl_provider "$out"
    grep -Eq '^ *[0-9]+ +[0-9.]+' <<<"$out"
    echo "helloworld on $NS_A and $NS_B; pingpong table printed" > "$OUT/mpi4py.note"
}

# --- uetd interop: the provider and a uetd (udp backend) in the other namespace --------
# Leg 1: fi_rma_check --url writes into a region `uet serve` exposes through
# the uetd in B; the XXH3 `uet serve` prints equals the writer's.
# Leg 2: `uet write` through the uetd in B into fi_rma_check --serve's
# fi_mr_reg'd region in A; the XXH3 of what landed equals `uet write`'s.
s_interop() {
    local uetd=$BIN_DIR/uetd uet=$BIN_DIR/uet sock=$OUT/uetd-$$.sock
    local serve_log=$OUT/interop.serve.log fserve_log=$OUT/interop.fi-serve.log
    local line addr want got len=$((64 << 20))
    for b in "$uetd" "$uet"; do
        [ -x "$b" ] || { echo "$b is missing (cargo build --$PROFILE -p uetd -p uet-cli)" >&2; return 1; }
    done
    # No log of an earlier run may satisfy the polls below before the
    # background program's redirection truncates it.
    rm -f "$sock" "$serve_log" "$fserve_log"
    in_b "$uetd" --backend udp --address "$IP_B" --socket "$sock" >"$OUT/interop.uetd.log" 2>&1 &
    PIDS+=("$!")
    poll_for 20 test -S "$sock" || { echo "uetd did not open $sock" >&2; cat "$OUT/interop.uetd.log" >&2; return 1; }

    echo "--- libfabric ($PROV) in $NS_A writes into a region uet serve exposes in $NS_B"
    in_b "$uet" serve --size 64MiB --count 1 --socket "$sock" >"$serve_log" 2>&1 &
    local serve_pid=$!
    PIDS+=("$serve_pid")
    poll_for 20 grep -q '"serving"' "$serve_log" || { cat "$serve_log" >&2; return 1; }
    addr=$(grep -o '"address":"[^"]*"' "$serve_log" | head -1 | cut -d'"' -f4)
    echo "uet serve: $addr"
    line=$(in_a timeout 120 "$OUT/fi_rma_check" --provider "$PROV" --url "$addr" --len "$len")
    echo "$line"
    want=$(awk '/^xxh3 /{print $2}' <<<"$line")
    wait "$serve_pid" || { echo "uet serve failed" >&2; cat "$serve_log" >&2; return 1; }
    got=$(grep '"write_arrived"' "$serve_log" | grep -o '"xxh3":"[0-9a-f]*"' | cut -d'"' -f4)
    echo "uet serve saw xxh3 $got over $(grep -o '"verified_bytes":[0-9]*' "$serve_log" | cut -d: -f2) B"
    if [ -z "$want" ] || [ "$want" != "$got" ]; then
        echo "hash mismatch: libfabric wrote ${want:-?}, uet serve saw ${got:-?}" >&2
        return 1
    fi

    echo "--- uet write through the uetd in $NS_B into fi_mr_reg'd memory of libfabric ($PROV) in $NS_A"
    in_a timeout 120 "$OUT/fi_rma_check" --provider "$PROV" --serve --size "$len" >"$fserve_log" 2>&1 &
    local fserve_pid=$!
    PIDS+=("$fserve_pid")
    # The whole line, address and all (a reader can see a line half written).
    poll_for 20 grep -Eq '^serving [0-9]+ B at uet://[^ ]+/0x[0-9a-f]+$' "$fserve_log" \
        || { cat "$fserve_log" >&2; return 1; }
    addr=$(awk '/^serving /{print $NF}' "$fserve_log")
    echo "fi_rma_check --serve: $addr"
    head -c "$len" /dev/urandom >"$OUT/interop.in"
    line=$(in_b timeout 120 "$uet" write "$OUT/interop.in" "$addr" --socket "$sock")
    echo "$line"
    want=$(grep -o '"xxh3":"[0-9a-f]*"' <<<"$line" | cut -d'"' -f4)
    wait "$fserve_pid" || { echo "fi_rma_check --serve failed" >&2; cat "$fserve_log" >&2; return 1; }
    cat "$fserve_log"
    got=$(awk '/^verified_bytes /{print $4}' "$fserve_log")
    if [ -z "$want" ] || [ "$want" != "$got" ]; then
        echo "hash mismatch: uet write sent ${want:-?}, libfabric got ${got:-?}" >&2
        return 1
    fi
    echo "both directions: hashes equal" > "$OUT/interop.note"
}

# --- fi_pingpong comparison (--bench) ---------------------------------------------------
# One fi_pingpong run of one size: prints "MB/s usec/xfer" of its row.
pp_once() {
    local prov=$1 ep=$2 size=$3 iters=$4 srv out spid
    srv=$OUT/bench.server.log
    in_b env FI_PROVIDER="$prov" timeout 120 fi_pingpong -p "$prov" -e "$ep" -S "$size" -I "$iters" >"$srv" 2>&1 &
    spid=$!
    # fi_pingpong exchanges addresses over its TCP control port (also for DGRAM).
    wait_listen "$NS_B" 47592
    out=$(in_a env FI_PROVIDER="$prov" timeout 120 fi_pingpong -p "$prov" -e "$ep" -S "$size" -I "$iters" "$IP_B" 2>&1) \
        || { echo "fi_pingpong -p $prov -e $ep -S $size failed: $out" >&2; return 1; }
    wait "$spid" || { echo "fi_pingpong server failed: $(cat "$srv")" >&2; return 1; }
    awk '$3 ~ /^=/ {print $6, $7; exit}' <<<"$out"
}

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# fi_pingpong over each provider on the same veth pair, the providers
# interleaved within every repeat (so a burst of load elsewhere on the machine
# hits all of them alike); medians of 5.
bench_pingpong() {
    local provs=("$PROV rdm") p prov ep size iters rep row m u
    [ "$PROV" != tcp ] && provs+=("tcp rdm")
    provs+=("udp dgram")
    declare -A MB US
    for size in 8 64 1024 4096 65536 1048576; do
        iters=10000
        [ "$size" -ge 65536 ] && iters=1000
        [ "$size" -ge 1048576 ] && iters=100
        for rep in 1 2 3 4 5; do
            for p in "${provs[@]}"; do
                read -r prov ep <<<"$p"
                # DGRAM messages must fit one datagram.
                [ "$ep" = dgram ] && [ "$size" -gt 1024 ] && continue
                row=$(pp_once "$prov" "$ep" "$size" "$iters")
                read -r m u <<<"$row"
                MB[$prov.$size]+="$m "
                US[$prov.$size]+="$u "
            done
        done
    done
    echo "fi_pingpong, median of 5 interleaved runs (MB/s as fi_pingpong counts it; usec/xfer = half round trip)"
    printf '%-6s %-6s %9s %12s %14s\n' provider ep bytes "MB/s" "usec/xfer"
    for p in "${provs[@]}"; do
        read -r prov ep <<<"$p"
        for size in 8 64 1024 4096 65536 1048576; do
            [ -n "${MB[$prov.$size]:-}" ] || continue
            printf '%-6s %-6s %9s %12s %14s\n' "$prov" "$ep" "$size" \
                "$(tr ' ' '\n' <<<"${MB[$prov.$size]}" | grep . | median)" \
                "$(tr ' ' '\n' <<<"${US[$prov.$size]}" | grep . | median)"
        done
    done
}

# `uet perf` (RMA writes through uetd, udp backend, one daemon per namespace)
# on the same veth pair: depth 1 for latency, depth 16 for bandwidth; median of
# 3 runs of 2 s per size.
bench_uet_perf() {
    local uetd=$BIN_DIR/uetd uet=$BIN_DIR/uet sa=$OUT/bench-uetd-a-$$.sock sb=$OUT/bench-uetd-b-$$.sock
    local serve_log=$OUT/bench.serve.log addr depth rep out mine=() p
    # `ip netns exec` directly, not in_a/in_b: a function sent to the
    # background runs in a subshell, and $! would name the subshell.
    ip netns exec "$NS_A" "$uetd" --backend udp --address "$IP_A" --socket "$sa" \
        >"$OUT/bench.uetd-a.log" 2>&1 &
    mine+=($!)
    ip netns exec "$NS_B" "$uetd" --backend udp --address "$IP_B" --socket "$sb" \
        >"$OUT/bench.uetd-b.log" 2>&1 &
    mine+=($!)
    PIDS+=("${mine[@]}")
    poll_for 20 test -S "$sa" && poll_for 20 test -S "$sb" || { echo "uetd did not start" >&2; return 1; }
    ip netns exec "$NS_B" "$uet" serve --size 64MiB --socket "$sb" >"$serve_log" 2>&1 &
    mine+=($!)
    PIDS+=("${mine[@]: -1}")
    poll_for 20 grep -q '"serving"' "$serve_log" || { cat "$serve_log" >&2; return 1; }
    addr=$(grep -o '"address":"[^"]*"' "$serve_log" | head -1 | cut -d'"' -f4)
    declare -A LAT GB
    for rep in 1 2 3; do
        for depth in 1 16; do
            out=$(in_a "$uet" perf "$addr" --socket "$sa" --size 8,64,1024,4096,65536,1048576 \
                --depth "$depth" --duration 2 --json)
            while read -r size lat gbps; do
                LAT[$depth.$size]+="$lat "
                GB[$depth.$size]+="$gbps "
            done < <(python3 -c '
import json, sys
for l in sys.stdin:
    if l.strip().startswith("{"):
        j = json.loads(l)
        print(j["start"]["test_start"]["size"], j["end"]["latency_us"]["t_typical"],
              "%.3f" % (j["end"]["sum"]["bits_per_second"] / 1e9))' <<<"$out")
        done
    done
    # The daemons own port 4793 in both namespaces: gone before the next step.
    for p in "${mine[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${mine[@]}"; do wait "$p" 2>/dev/null || true; done
    echo "uet perf (RMA write through uetd, udp backend), median of 3 runs of 2 s"
    printf '%9s %16s %18s\n' bytes "p50 us, depth 1" "Gb/s, depth 16"
    for size in 8 64 1024 4096 65536 1048576; do
        printf '%9s %16s %18s\n' "$size" \
            "$(tr ' ' '\n' <<<"${LAT[1.$size]:-}" | grep . | median)" \
            "$(tr ' ' '\n' <<<"${GB[16.$size]:-}" | grep . | median)"
    done
}

# MPI ping-pong (mpi_check --full: 8 B, 64 KiB, 4 MiB) over the provider and
# over tcp, alternated three times; medians.
bench_mpi() {
    local provs=("$PROV") prov rep out size us gbps
    [ "$PROV" != tcp ] && provs+=(tcp)
    declare -A US GB
    for rep in 1 2 3; do
        for prov in "${provs[@]}"; do
            out=$(PROV=$prov FI_PROVIDER=$prov mpirun_ab --mca btl self --mca osc pt2pt \
                "$OUT/mpi_check" --full 2>&1) || { echo "$out" >&2; return 1; }
            while read -r size us gbps; do
                US[$prov.$size]+="$us "
                GB[$prov.$size]+="$gbps "
            done < <(sed -n 's/^pingpong size=\([0-9]*\) half_rtt_us=\([0-9.]*\) .*Gbps=\([0-9.]*\).*/\1 \2 \3/p' <<<"$out")
        done
    done
    echo "MPI ping-pong (Open MPI pml cm + mtl ofi), median of 3 alternated runs"
    printf '%-6s %9s %16s %10s\n' provider bytes "half RTT us" "Gb/s"
    for prov in "${provs[@]}"; do
        for size in 8 65536 4194304; do
            printf '%-6s %9s %16s %10s\n' "$prov" "$size" \
                "$(tr ' ' '\n' <<<"${US[$prov.$size]:-}" | grep . | median)" \
                "$(tr ' ' '\n' <<<"${GB[$prov.$size]:-}" | grep . | median)"
        done
    done
}

s_bench() {
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    bench_pingpong
    if [ "$PROV" = uet ]; then
        bench_uet_perf
    fi
    bench_mpi
    echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
}

step fi_info s_fi_info
step fi_pingpong s_fi_pingpong
step fi_rma s_fi_rma
step mpi s_mpi
step mpi4py s_mpi4py
if [ "$PROV" = uet ]; then
    step interop s_interop
else
    SUMMARY+=("SKIP  interop (needs the uet provider; this run uses $PROV)")
fi
if [ "$BENCH" = 1 ]; then
    step bench s_bench
fi

echo
echo "=== summary (provider $PROV) ==="
printf '%s\n' "${SUMMARY[@]}"
if [ $FAILED -ne 0 ]; then
    echo "fabric-smoke: FAILED"
    exit 1
fi
echo "fabric-smoke: all steps passed"
