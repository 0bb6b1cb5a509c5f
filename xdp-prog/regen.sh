#!/usr/bin/env bash
# Regenerates the committed xdp-prog/obj/*.bpf.o and their stamps
# (source and object SHA-256, clang version) from src/*.bpf.c.
# Needs clang and libbpf-dev; run after every change to the C source, and
# commit both files. The staleness test (tests/committed_object.rs) does
# the writing, so the object is exactly what the build script compiles.
set -euo pipefail
cd "$(dirname "$0")/.."
XDP_PROG_REQUIRE_CLANG=1 XDP_PROG_BLESS=1 \
    cargo test -p xdp-prog --test committed_object -- --nocapture
