//! What one idle turn of a worker's loop costs an endpoint that talks to
//! many peers (`BENCHMARKS.md`, "Many peers: one idle turn of the loop").
//!
//! One [`Endpoint`] under RCCC has written to N peers: each write sent its
//! speculative first window and waits for credit, so every peer has a PDC
//! and a CCC whose credit timer runs. A measured step is what the daemon's
//! worker asks on every turn of its loop when nothing arrived:
//! `poll_timeout` (the next deadline) and `poll_transmit` (which finds
//! nothing to send). With N = 1, 100 and 2,000 peers the step should cost
//! the same: the PDS keeps PDC and CCC deadlines in heaps and looks again
//! only at what changed.
//!
//! `cargo bench -p uet-ses --bench many_peers`; criterion's time is per
//! step.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration as StdDuration;

use criterion::{BenchmarkId, Criterion};
use uet_pds::CcMode;
use uet_ses::{Endpoint, EndpointConfig, LocalBuf, MemoryKey, Operation, RegionAddr, RemoteAddr};
use uet_wire::time::{Duration, Instant};
use uet_wire::{JobId, PidOnFep, ResourceIndex, RiGeneration};

/// Bytes of each peer's write: twice the first window (one BDP at
/// 100 Gb/s × 10 µs), so every write waits for credit.
const WRITE: u32 = 256 << 10;

/// An endpoint whose writes to `n` peers all wait for credit.
fn endpoint(n: u16) -> (Endpoint<Vec<u8>>, Instant) {
    let mut cfg = EndpointConfig::default();
    cfg.pds.max_pdcs = usize::from(n).max(1);
    CcMode::Rccc.configure(
        &mut cfg.pds,
        100_000_000_000,
        Duration::from_micros(10),
        false,
    );
    let mut ep = Endpoint::new(cfg, 1);
    let local = ep.register_local(vec![0x5a; WRITE as usize]);
    let now = Instant::from_nanos(1_000_000);
    for i in 0..n {
        let [hi, lo] = i.to_be_bytes();
        let dst = IpAddr::V4(Ipv4Addr::new(10, 1, hi, lo));
        let op = Operation::Write {
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
            len: WRITE,
            header_data: None,
        };
        ep.submit(now, dst, op).unwrap();
    }
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
    g.finish();
}

criterion::criterion_group!(benches, idle_turn);
criterion::criterion_main!(benches);
