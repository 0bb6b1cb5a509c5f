#!/usr/bin/env bash
# The test command of the README: every unit, property and integration test
# of the workspace. Property tests over random bytes run at a CI-sized count;
# set UET_FUZZ_CASES=1000000 for the full run recorded in BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --locked --release
