# Helpers shared by the resend benchmarks (sourced, not run).

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
