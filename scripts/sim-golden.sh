#!/usr/bin/env bash
# The simulator's standard scenarios, written one JSON file each with the
# wall-clock field stripped, so a refactor can prove that behaviour did not
# move: run it before and after and compare with `diff -r`.
# Usage: scripts/sim-golden.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/sim-golden.sh OUT_DIR}
mkdir -p "$out"
cargo build -q --release --locked --bin uet-sim
sim=target/release/uet-sim
one_gig=(--rate 1Gbps --latency-us 6 --max-ses-len 1446 --buffer 32KiB)
scenarios=(
  "writes-loss|writes --loss 0.01 --reorder 0.01 --duplicate 0.01 --corrupt 0.01 --bytes 16MiB"
  "writes-4senders|writes --senders 4 --loss 0.02 --seed 5 --bytes 8MiB"
  "writes-rod|writes --rod --loss 0.01 --reorder 0.02 --bytes 8MiB --seed 3"
  "writes-clean|writes --bytes 64MiB"
  "writes-sizes|writes --min-msg 64 --max-msg 8KiB --bytes 2MiB --loss 0.01 --seed 4"
  "blackout|blackout --bytes 4MiB --start-us 500 --duration-ms 5"
  "nscc-random-ties|incast --senders 8 --cc nscc --random-ties --seed 2"
  "nscc-jitter|incast --senders 8 --cc nscc --jitter-t0 --link-jitter-ns 100 --seed 1"
  "rccc-trim-32|incast --senders 32 --cc rccc --trim-at 108KiB"
  "nscc-trim-8|incast --senders 8 --cc nscc --trim-at 108KiB"
  "nscc-traced|incast --senders 8 --cc nscc+rccc --seed 3 --trace $out/nscc-rccc-8.trace.csv"
  "rccc-1023|incast --senders 1023 --size 100KiB --cc rccc --seed 1"
)
for cc in none nscc rccc nscc+rccc pft; do
  scenarios+=("incast-100g-$cc-8|incast --senders 8 --cc $cc --seed 1")
  scenarios+=("incast-1g-$cc-32|incast --senders 32 --cc $cc ${one_gig[*]} --seed 1")
done
run() {
  local name=${1%%|*} args=${1#*|}
  # shellcheck disable=SC2086
  "$sim" $args | sed -E 's/"wall_ms": *[0-9.]+/"wall_ms":0/g' >"$out/$name.json"
}
export -f run
export sim out
printf '%s\n' "${scenarios[@]}" | xargs -P "$(nproc)" -I{} bash -c 'run "$@"' _ {}
ls "$out" | wc -l
