//! What an endpoint that talks to many peers costs per turn of a worker's
//! loop, per statistics snapshot and per new peer (`BENCHMARKS.md`, "Many
//! peers: one idle turn of the loop").
//!
//! `many_peers/idle_turn`: one [`Endpoint`] under RCCC has written to N
//! peers: each write sent its
//! speculative first window and waits for credit, so every peer has a PDC
//! and a CCC whose credit timer runs. A measured step is what the daemon's
//! worker asks on every turn of its loop when nothing arrived:
//! `poll_timeout` (the next deadline) and `poll_transmit` (which finds
//! nothing to send). With N = 1, 100 and 2,000 peers the step should cost
//! the same: the PDS keeps PDC and CCC deadlines in heaps and looks again
//! only at what changed.
//!
//! `many_peers/per_peer_stats`: what a snapshot of every peer's
//! congestion state costs the same endpoints once each PDC has a round
//! trip (the target's ACKs fed back): the longest-RTO PDC per destination
//! and one CCC snapshot per destination, as `uetd`'s stats take them.
//!
//! `many_peers/first_writes`: an endpoint under RCCC submits a 4 KiB write
//! to each of N new peers and sends them: a PDC and a CCC opened per peer.
//! Criterion's time is for all N; its throughput (peers per second) should
//! not fall as N grows.
//!
//! `cargo bench -p uet-ses --bench many_peers`; for the first two,
//! criterion's time is per step.

use std::collections::HashMap;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration as StdDuration;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use uet_pds::{CcMode, RxMeta};
use uet_ses::{
    Endpoint, EndpointConfig, LocalBuf, LocalRegion, MemoryKey, Operation, RegionAddr, RemoteAddr,
};
use uet_wire::pds::PdsRepr;
use uet_wire::time::{Duration, Instant};
use uet_wire::{Ecn, JobId, PdcId, PidOnFep, ResourceIndex, RiGeneration};

/// Bytes of each peer's write: twice the first window (one BDP at
/// 100 Gb/s × 10 µs), so every write waits for credit.
const WRITE: u32 = 256 << 10;

/// A write of `len` bytes from `local` into the same remote region.
fn write(local: LocalRegion, len: u32) -> Operation {
    Operation::Write {
        dst: RemoteAddr {
            region: RegionAddr {
                job: JobId::new(7).unwrap(),
                pid: PidOnFep::new(3).unwrap(),
                ri: ResourceIndex::new(12).unwrap(),
            },
            generation: RiGeneration::from_masked(1),
            key: MemoryKey(0xabc),
            offset: 0,
        },
        src: LocalBuf {
            region: local,
            offset: 0,
        },
        len,
        header_data: None,
    }
}

/// The configuration of every endpoint here: RCCC at 100 Gb/s × 10 µs,
/// room for `n` PDCs.
fn config(n: u16) -> EndpointConfig {
    let mut cfg = EndpointConfig::default();
    cfg.pds.max_pdcs = usize::from(n).max(1);
    CcMode::Rccc.configure(
        &mut cfg.pds,
        100_000_000_000,
        Duration::from_micros(10),
        false,
    );
    cfg
}

/// When every benchmark's writes are submitted.
fn start() -> Instant {
    Instant::from_nanos(1_000_000)
}

/// Submits a write of `len` bytes from `local` to each of `n` peers
/// (10.1.0.0 and on).
fn submit_to_peers(ep: &mut Endpoint<Vec<u8>>, local: LocalRegion, n: u16, len: u32, now: Instant) {
    for i in 0..n {
        let [hi, lo] = i.to_be_bytes();
        let dst = IpAddr::V4(Ipv4Addr::new(10, 1, hi, lo));
        ep.submit(now, dst, write(local, len)).unwrap();
    }
}

/// An endpoint whose writes to `n` peers all wait for credit.
fn endpoint(n: u16) -> (Endpoint<Vec<u8>>, Instant) {
    let mut ep = Endpoint::new(config(n), 1);
    let local = ep.register_local(vec![0x5a; WRITE as usize]);
    let now = start();
    submit_to_peers(&mut ep, local, n, WRITE, now);
    let mut buf = vec![0; 9000];
    let mut sent = 0u64;
    while ep.poll_transmit(now, &mut buf).is_some() {
        sent += 1;
    }
    assert!(sent >= u64::from(n), "every peer got its first window");
    assert!(
        ep.poll_timeout().is_some_and(|t| t > now),
        "credit timers run, none due yet"
    );
    (ep, now)
}

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));

/// An endpoint that wrote 4 KiB to each of `n` peers and heard back from
/// a target that answers for every peer: each PDC then has a round-trip
/// sample. One endpoint plays all the
/// targets; its answers go back as if from the peer each PDC was opened
/// to (found by the PDC ID the answer names).
fn endpoint_with_round_trips(n: u16) -> Endpoint<Vec<u8>> {
    let mut cfg = config(n);
    let mut a = Endpoint::new(cfg.clone(), 1);
    let local = a.register_local(vec![0x5a; 4096]);
    let now = start();
    submit_to_peers(&mut a, local, n, 4096, now);
    // Every PDC opens at once at the target: none is confirmed yet.
    cfg.pds.max_pending_pdcs = cfg.pds.max_pdcs;
    let mut b = Endpoint::<Vec<u8>>::new(cfg, 2);
    let mut peer_of: HashMap<PdcId, IpAddr> = HashMap::new();
    let mut buf = vec![0; 9000];
    let later = now + Duration::from_micros(10);
    while let Some(t) = a.poll_transmit(now, &mut buf) {
        if let Ok(PdsRepr::Request(r)) = PdsRepr::parse(&buf[..t.len])
            && let Some(id) = r.spdcid
        {
            peer_of.insert(id, t.dst);
        }
        b.handle_datagram(later, &meta(A, t.len), &buf[..t.len]);
    }
    let mut answered = 0;
    while let Some(t) = b.poll_transmit(later, &mut buf) {
        let dpdcid = match PdsRepr::parse(&buf[..t.len]) {
            Ok(PdsRepr::Ack(r)) => r.dpdcid,
            _ => None,
        };
        if let Some(src) = dpdcid.and_then(|id| peer_of.get(&id)) {
            a.handle_datagram(later, &meta(*src, t.len), &buf[..t.len]);
            answered += 1;
        }
    }
    assert!(answered >= n, "every peer answered");
    assert!(
        a.pds().round_trips().count() >= usize::from(n),
        "every PDC has a round trip"
    );
    a
}

fn meta(src: IpAddr, len: usize) -> RxMeta {
    RxMeta {
        src,
        ev: uet_wire::EntropyValue::from_masked(0),
        ecn: Ecn::Ect0,
        trimmed: None,
        nominal_size: len as u32 + 48,
        sdi: None,
        arrived: None,
    }
}

fn idle_turn(c: &mut Criterion) {
    let mut g = c.benchmark_group("many_peers");
    g.measurement_time(StdDuration::from_secs(3));
    for n in [1u16, 100, 2_000] {
        let (mut ep, now) = endpoint(n);
        let mut buf = vec![0; 9000];
        g.bench_function(BenchmarkId::new("idle_turn", n), |b| {
            b.iter(|| {
                black_box(ep.poll_timeout());
                black_box(ep.poll_transmit(now, &mut buf).is_none())
            });
        });
    }
    for n in [1u16, 100, 2_000] {
        let ep = endpoint_with_round_trips(n);
        g.bench_function(BenchmarkId::new("per_peer_stats", n), |b| {
            let mut longest: HashMap<IpAddr, uet_pds::PdcRoundTrip> = HashMap::new();
            let mut snap = Vec::new();
            b.iter(|| {
                longest.clear();
                for r in ep.pds().round_trips() {
                    let e = longest.entry(r.peer).or_insert(r);
                    if r.rto > e.rto {
                        *e = r;
                    }
                }
                snap.clear();
                for (dst, _tc, c) in ep.pds().cccs() {
                    snap.push((
                        dst,
                        c.cwnd(),
                        c.inflight(),
                        c.backlog(),
                        longest.get(&dst).copied(),
                    ));
                }
                black_box(snap.len())
            });
        });
    }
    g.finish();
    let mut g = c.benchmark_group("many_peers");
    g.sample_size(10);
    for n in [1u16, 100, 2_000] {
        g.throughput(Throughput::Elements(u64::from(n)));
        g.bench_function(BenchmarkId::new("first_writes", n), |b| {
            b.iter_batched(
                || {
                    let mut ep = Endpoint::new(config(n), 1);
                    let local = ep.register_local(vec![0x5a; 4096]);
                    (ep, local, vec![0u8; 9000])
                },
                |(mut ep, local, mut buf)| {
                    let now = start();
                    submit_to_peers(&mut ep, local, n, 4096, now);
                    while ep.poll_transmit(now, &mut buf).is_some() {}
                    ep
                },
                BatchSize::LargeInput,
            );
        });
    }
    g.finish();
}

criterion::criterion_group!(benches, idle_turn);
criterion::criterion_main!(benches);
