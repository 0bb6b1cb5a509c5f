# Helpers shared by the benchmark scripts (sourced, not run).

# wait_for FILE PATTERN: until PATTERN shows up in FILE (30 s at most).
wait_for() {
  for _ in $(seq 300); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "timed out waiting for $2 in $1" >&2; return 1
}

# stats NS BIN_DIR SOCK: the daemon's "retransmits rtos sack_inferred
# duplicates", summed over its workers.
stats() {
  ip netns exec "$1" "$2/uet" stats --socket "$3" | python3 -c '
import json, sys
w = json.load(sys.stdin)["workers"]
p = [x["pds"] for x in w]
print(sum(x["tx_retransmits"] for x in p), sum(x["rtos"] for x in p),
      sum(x["sack_inferred"] for x in p), sum(x["drops"].get("duplicate", 0) for x in p))'
}

# veth_lab A B SUBNET [MTU]: namespaces A and B joined by veth v0 (in A,
# 10.SUBNET.0.1/24) and v1 (in B, 10.SUBNET.0.2/24), every link up, at
# MTU when given. The caller removes the namespaces (ip netns del) on exit.
veth_lab() {
  ip netns add "$1"
  ip netns add "$2"
  ip -n "$1" link add v0 ${4:+mtu "$4"} type veth peer name v1 netns "$2" ${4:+mtu "$4"}
  ip -n "$1" addr add "10.$3.0.1/24" dev v0
  ip -n "$2" addr add "10.$3.0.2/24" dev v1
  for ns in "$1" "$2"; do ip -n "$ns" link set lo up; done
  ip -n "$1" link set v0 up
  ip -n "$2" link set v1 up
}
