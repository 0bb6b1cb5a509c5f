#!/usr/bin/env python3
"""Simulated incast sweep (CMS issue): every CC mode x sender count x seed
through `uet-sim incast`; prints a Markdown table of medians over seeds.

usage: scripts/incast-sweep.py [--senders 1,2,8,32,128] [--size 256KiB]
                               [--seeds 5] [--rate 100Gbps] [--latency-us 2]
                               [--buffer 1MiB] [--modes none,nscc,...]
                               [--trim-at 108KiB] [--timeout 600] [--random-ties] [--jitter-t0]
                               [--link-jitter-ns N] [--victim 64B] [--sim PATH]

A run that exceeds --timeout seconds of wall time is reported as such (the
fixed window with trimming at 128:1 is a trim storm of ~10^6 trims).
"""
import argparse, json, statistics, subprocess, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("--senders", default="1,2,8,32,128")
ap.add_argument("--size", default="256KiB")
ap.add_argument("--seeds", type=int, default=5)
ap.add_argument("--rate", default="100Gbps")
ap.add_argument("--latency-us", default="2")
ap.add_argument("--buffer", default="1MiB")
ap.add_argument("--max-ses-len", default="4096")
ap.add_argument("--modes", default="none,nscc,rccc,nscc+rccc,pft")
ap.add_argument("--trim-at", default=None, help="trim above this queue depth (e.g. 108KiB = 1 BDP)")
ap.add_argument("--random-ties", action="store_true", help="switches serve same-instant arrivals in seeded random order")
ap.add_argument("--jitter-t0", action="store_true", help="each sender starts at a seeded uniform time in [0, T0]")
ap.add_argument("--link-jitter-ns", default="0", help="each frame's latency grows by U[0, N] ns, in order per link")
ap.add_argument("--victim", default=None, help="add a victim ping-pong of this size per write and report its CIF (mean, p99)")
ap.add_argument("--timeout", type=float, default=600.0, help="wall-time limit per run, seconds")
ap.add_argument("--sim", default=None, help="run this uet-sim binary (another build) instead of building this tree's")
a = ap.parse_args()

sim = a.sim or "target/release/uet-sim"
if not a.sim:
    subprocess.run(["cargo", "build", "-q", "--release", "-p", "uet-tests", "--bin", "uet-sim"], check=True)
keys = ["ict_over_ideal", "spread", "jain", "drops", "retransmits_per_packet", "rtos", "peak_queue_bytes", "utilisation"]
vcols = " victim CIF mean | victim CIF p99 |" if a.victim else ""
print(f"| N | cc | ICT/ideal | spread | Jain | drops | after 1st RTT (data) | retx/pkt | RTOs | peak queue B | util |{vcols} ok | wall s |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if a.victim else ""))
for n in a.senders.split(","):
    for cc in a.modes.split(","):
        runs = []
        t = time.time()
        timed_out = False
        for seed in range(1, a.seeds + 1):
            try:
                out = subprocess.run([sim, "incast", "--senders", n, "--size", a.size, "--cc", cc, "--seed", str(seed),
                                      "--rate", a.rate, "--latency-us", a.latency_us, "--buffer", a.buffer,
                                      "--max-ses-len", a.max_ses_len, "--json"]
                                     + (["--trim-at", a.trim_at] if a.trim_at else [])
                                     + (["--random-ties"] if a.random_ties else [])
                                     + (["--jitter-t0"] if a.jitter_t0 else [])
                                     + ["--link-jitter-ns", a.link_jitter_ns]
                                     + (["--victim", a.victim] if a.victim else []),
                                     capture_output=True, text=True, check=True, timeout=a.timeout).stdout
            except subprocess.TimeoutExpired:
                timed_out = True
                break
            runs.append(json.loads(out))
        if timed_out:
            print(f"| {n} | {cc} | not finished in {a.timeout:.0f} s of wall time (seed {len(runs) + 1}) |"
                  + " |" * (12 if a.victim else 10), flush=True)
            continue
        med = {k: statistics.median(r[k] for r in runs) for k in keys}
        # Builds before the data/control split report only the total.
        late = statistics.median(r.get("drops_after_first_rtt", 0) for r in runs)
        late_data = (f'{statistics.median(r["data_drops_after_first_rtt"] for r in runs):.0f}'
                     if all("data_drops_after_first_rtt" in r for r in runs) else "?")
        ok = all(r["ok"] for r in runs)
        vcell = ""
        if a.victim:
            vm = statistics.median(r["victim"]["cif_mean"] for r in runs)
            vp = statistics.median(r["victim"]["cif_p99"] for r in runs)
            vcell = f" {vm:.2f} | {vp:.2f} |"
        print(f"| {n} | {cc} | {med['ict_over_ideal']:.3f} | {med['spread']:.3f} | {med['jain']:.3f} | {med['drops']:.0f} | "
              f"{late:.0f} ({late_data}) | {med['retransmits_per_packet']:.3f} | {med['rtos']:.0f} | {med['peak_queue_bytes']:.0f} | {med['utilisation']:.2f} |{vcell} "
              f"{'yes' if ok else 'NO'} | {time.time()-t:.1f} |", flush=True)
