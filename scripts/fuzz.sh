#!/usr/bin/env bash
# Coverage-guided fuzzing of uet-wire's parsers (uet-wire/fuzz) with
# libFuzzer, on stable Rust: the sanitizer-coverage passes cargo-fuzz turns
# on are plain -C flags, and --target keeps them off the build scripts.
# Usage: scripts/fuzz.sh [SECONDS] (default 60). A crash leaves its input
# in uet-wire/fuzz/ and exits non-zero; the corpus grows in
# uet-wire/fuzz/corpus/frame (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../uet-wire/fuzz"
secs=${1:-60}
triple=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module \
 -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
 -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares \
 -Cdebug-assertions -Coverflow-checks"
cargo build -q --release --locked --target "$triple" --bin frame
mkdir -p corpus/frame
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "target/$triple/release/frame" -max_total_time="$secs" -max_len=512 corpus/frame >"$log" 2>&1; then
  tail -40 "$log"
  exit 1
fi
grep -E '^Done' "$log"
