#!/usr/bin/env bash
# Set up a fresh machine and run the main job: a two-host veth lab, 1 GiB of
# RMA writes over AF_XDP verified end to end, beside the raw AF_XDP and
# kernel-UDP ceilings of the same link; the lab is removed afterwards.
# Needs root (namespaces, XDP). Extra arguments go to `uet lab demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
    echo "demo.sh: run as root (it installs packages, creates namespaces and attaches XDP)" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
need=()
for pkg in ca-certificates pkg-config clang llvm libbpf-dev iproute2 iputils-ping fonts-dejavu-core; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

cargo build --release --locked --bin uet --bin uetd
exec ./target/release/uet lab demo "$@"
