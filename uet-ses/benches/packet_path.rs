//! CPU cost of one data packet through the whole sans-IO stack, in ns per
//! packet (`BENCHMARKS.md`, "PDS+SES per-packet CPU cost").
//!
//! Two [`Endpoint`]s joined by a hand-driven, lossless, zero-latency wire.
//! One measured step is one data packet:
//!
//! 1. A `poll_transmit`: PDS + SES headers, payload copied from A's local
//!    memory into the wire buffer;
//! 2. B `handle_datagram` on those very bytes (no extra copy): parse, PSN
//!    window, SES checks, payload copied into B's registered region;
//! 3. B `poll_transmit` until quiet: the ACKs its coalescing policy produces
//!    (one per 16 KiB by default, plus one at each message's end), each fed
//!    straight to A `handle_datagram`;
//! 4. A's completions drained; a new 1 MiB write submitted whenever fewer
//!    than two are in flight, so the pipeline never drains.
//!
//! Benchmarks (`cargo bench -p uet-ses --bench packet_path`):
//!
//! * `packet_path/write_4k`: the above with 4096-byte payloads (the SES
//!   `max_ses_len` is 4096 + 44), writes walking a 64 MiB region;
//! * `packet_path/copy_only_4k`: only the two 4 KiB copies of that path
//!   (local → wire buffer → region, same offsets), so that
//!   `write_4k - copy_only_4k` is the stack's cost "excluding the copy";
//! * `packet_path/write_64b`: 64-byte payloads, the fixed per-packet cost;
//! * `packet_path/resident_4k` and `packet_path/resident_copy_4k`: write_4k
//!   and copy_only_4k with a 1 MiB region and local buffer instead of
//!   64 MiB, so that the copies hit the caches (2 MiB L2, 105 MiB L3 here):
//!   `resident_4k - resident_copy_4k` is the stack's cost for a 4 KiB
//!   packet without the copy's misses to memory, which the 64 MiB pair's
//!   difference still holds (the stores after a copy into cold lines
//!   wait for it, `BENCHMARKS.md`).
//!
//! Criterion's "time" is per packet (one iteration = one data packet).
//!
//! `UET_BENCH_ONESHOT=N [name]` skips criterion: each benchmark (or the one
//! whose name contains `name`) warms up, then runs N packets once inside its
//! `measured_*` function, for callgrind (instructions per packet = collected
//! Ir / N; the `stage_*` functions split it by stage):
//!
//! ```text
//! cargo bench -p uet-ses --bench packet_path --no-run   # prints the binary
//! UET_BENCH_ONESHOT=20000 valgrind --tool=callgrind \
//!     --toggle-collect='packet_path::measured_*' \
//!     target/release/deps/packet_path-<hash> write_4k
//! ```

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration as StdDuration;

use criterion::{Criterion, Throughput};
use uet_pds::RxMeta;
use uet_ses::{
    Access, Endpoint, EndpointConfig, LocalBuf, LocalRegion, MemoryKey, Operation, RegionAddr,
    RegionSpec, Registration, RemoteAddr,
};
use uet_wire::time::{Duration, Instant};
use uet_wire::{Ecn, EntropyValue, JobId, PidOnFep, ResourceIndex};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

/// SES standard request header.
const SES_HDR: usize = 44;
/// PDS RUD/ROD request header (no CC extension).
const PDS_HDR: usize = 12;
/// Bytes of one operation: 256 packets of 4 KiB.
const OP_LEN: u32 = 1 << 20;

type Ep = Endpoint<Vec<u8>>;

/// Two endpoints and the state of the steady write stream from A to B.
struct Pair {
    a: Ep,
    b: Ep,
    reg: Registration,
    local: LocalRegion,
    now: Instant,
    /// Simulated time per data packet (the wire time at 100 Gb/s).
    tick: Duration,
    buf: Vec<u8>,
    /// Entropy of the datagram in `buf`.
    ev: EntropyValue,
    ack_buf: Vec<u8>,
    region_len: u64,
    next_off: u64,
    /// Wire length of a full data packet.
    data_len: usize,
    data_pkts: u64,
    other_pkts: u64,
    acks: u64,
    ops_done: u64,
    /// Times A had nothing to send and timers had to be run.
    stalls: u64,
}

impl Pair {
    fn new(payload: usize, region_len: usize) -> Self {
        let mut cfg = EndpointConfig::default();
        cfg.pds.max_ses_len = payload + SES_HDR;
        let mut a = Ep::new(cfg.clone(), 1);
        let mut b = Ep::new(cfg, 2);
        // Touch every page now, so that no page fault lands in a measurement.
        let reg = b
            .register(
                RegionSpec {
                    addr: RegionAddr {
                        job: JobId::new(7).unwrap(),
                        pid: PidOnFep::new(3).unwrap(),
                        ri: ResourceIndex::new(12).unwrap(),
                    },
                    key: MemoryKey(0xabc),
                    access: Access::REMOTE_WRITE,
                    base: 0,
                },
                vec![0xee; region_len],
            )
            .unwrap();
        let local = a.register_local((0..region_len).map(|i| (i * 7 + 3) as u8).collect());
        let wire = PDS_HDR + SES_HDR + payload;
        let mut p = Self {
            a,
            b,
            reg,
            local,
            now: Instant::from_nanos(1_000_000),
            tick: Duration::from_nanos((wire as u64 * 8).div_ceil(100)),
            buf: vec![0; wire + 64],
            ev: EntropyValue::from_masked(0),
            ack_buf: vec![0; wire + 64],
            region_len: region_len as u64,
            next_off: 0,
            data_len: wire,
            data_pkts: 0,
            other_pkts: 0,
            acks: 0,
            ops_done: 0,
            stalls: 0,
        };
        p.top_up();
        p
    }

    /// Keeps two operations in flight: the next one's packets are queued
    /// before the current one's last packet leaves.
    fn top_up(&mut self) {
        while self.a.in_flight() < 2 {
            let off = self.next_off;
            self.next_off = (off + u64::from(OP_LEN)) % self.region_len;
            let op = Operation::Write {
                dst: RemoteAddr {
                    region: self.reg.addr(),
                    generation: self.reg.generation,
                    key: self.reg.key,
                    offset: off,
                },
                src: LocalBuf {
                    region: self.local,
                    offset: off,
                },
                len: OP_LEN,
                header_data: None,
            };
            self.a.submit(self.now, B, op).unwrap();
        }
    }

    // The stages of one packet, each a separate function so that
    // callgrind (inclusive cost) and perf attribute the time to them.

    /// A writes the next datagram (PDS + SES headers, payload copy).
    #[inline(never)]
    fn stage_a_transmit(&mut self) -> Option<usize> {
        let t = self.a.poll_transmit(self.now, &mut self.buf)?;
        self.ev = t.ev;
        Some(t.len)
    }

    /// B takes the datagram straight from A's buffer (parse, PSN window,
    /// SES checks, payload copy into the region).
    #[inline(never)]
    fn stage_b_receive(&mut self, len: usize) {
        let meta = RxMeta {
            src: A,
            ev: self.ev,
            ecn: Ecn::Ect0,
            trimmed: None,
            nominal_size: len as u32 + 48,
            sdi: None,
            arrived: None,
        };
        self.b.handle_datagram(self.now, &meta, &self.buf[..len]);
    }

    /// Everything B has to send (the coalesced ACKs) goes to A.
    #[inline(never)]
    fn stage_acks(&mut self) -> bool {
        let mut moved = false;
        while let Some(t) = self.b.poll_transmit(self.now, &mut self.ack_buf) {
            moved = true;
            self.acks += 1;
            let meta = RxMeta {
                src: B,
                ev: t.ev,
                ecn: Ecn::Ect0,
                trimmed: None,
                nominal_size: t.len as u32 + 48,
                sdi: None,
                arrived: None,
            };
            self.a
                .handle_datagram(self.now, &meta, &self.ack_buf[..t.len]);
        }
        moved
    }

    /// A's finished operations, B's application events (none for plain
    /// writes), and a new operation when fewer than two are in flight.
    #[inline(never)]
    fn stage_completions(&mut self) {
        while let Some(c) = self.a.poll_completion() {
            debug_assert_eq!(c.status, Ok(()));
            self.ops_done += 1;
        }
        while self.b.poll_event().is_some() {}
        self.top_up();
    }

    /// Moves packets until `n` more data packets have reached B.
    fn run(&mut self, n: u64) {
        let goal = self.data_pkts + n;
        while self.data_pkts < goal {
            match self.stage_a_transmit() {
                Some(len) => {
                    if len == self.data_len {
                        self.data_pkts += 1;
                        self.now += self.tick;
                    } else {
                        self.other_pkts += 1;
                    }
                    self.stage_b_receive(len);
                    self.stage_acks();
                    self.stage_completions();
                }
                None => {
                    // Not expected in steady state (counted): run the timers.
                    self.stalls += 1;
                    if !self.stage_acks() {
                        let next = [self.a.poll_timeout(), self.b.poll_timeout()]
                            .into_iter()
                            .flatten()
                            .min()
                            .expect("a timer while work is pending");
                        self.now = next.max(self.now);
                        self.a.handle_timeout(self.now);
                        self.b.handle_timeout(self.now);
                    }
                    self.stage_completions();
                }
            }
        }
    }

    /// Checks the stream is healthy: no loss, no retransmission, the bytes
    /// landed.
    fn check(&self) {
        let (ta, rb) = (self.a.pds().counters(), self.b.pds().counters());
        assert_eq!(ta.tx_retransmits, 0, "{ta:?}");
        assert_eq!(rb.rx_data, self.data_pkts, "{rb:?}");
        assert_eq!(self.a.counters().ops_failed, 0);
        let region = self.b.memory().get(self.reg.addr()).unwrap().memory();
        let local = self.a.local(self.local).unwrap();
        let done = (self.ops_done * u64::from(OP_LEN)).min(self.region_len) as usize;
        assert_eq!(region[..done], local[..done], "payload placed byte-exact");
    }

    fn report(&self, name: &str) {
        eprintln!(
            "{name}: {} data packets, {} ACKs ({:.2}/data packet), {} other from A, {} ops, {} stalls",
            self.data_pkts,
            self.acks,
            self.acks as f64 / self.data_pkts.max(1) as f64,
            self.other_pkts,
            self.ops_done,
            self.stalls,
        );
    }
}

/// Just the two payload copies of the packet path, at the same offsets and
/// alignments: local memory → wire buffer (after PDS + SES headers) →
/// registered region.
struct CopyOnly {
    src: Vec<u8>,
    wire: Vec<u8>,
    dst: Vec<u8>,
    payload: usize,
    off: usize,
}

impl CopyOnly {
    fn new(payload: usize, region_len: usize) -> Self {
        Self {
            src: (0..region_len).map(|i| (i * 7 + 3) as u8).collect(),
            wire: vec![0; PDS_HDR + SES_HDR + payload + 64],
            dst: vec![0xee; region_len],
            payload,
            off: 0,
        }
    }

    fn run(&mut self, n: u64) {
        let at = PDS_HDR + SES_HDR;
        for _ in 0..n {
            let (o, len) = (self.off, self.payload);
            self.wire[at..at + len].copy_from_slice(&self.src[o..o + len]);
            self.dst[o..o + len].copy_from_slice(&self.wire[at..at + len]);
            self.off = (o + len) % self.dst.len();
        }
        black_box(&mut self.dst);
    }
}

const REGION_4K: usize = 64 << 20;
const REGION_64B: usize = 4 << 20;
/// One operation's worth: the two in flight write the same bytes.
const REGION_RESIDENT: usize = OP_LEN as usize;

/// Times `run(iters)` as one criterion benchmark of `g` named `name`.
fn timed(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    mut run: impl FnMut(u64),
) {
    g.bench_function(name, |bch| {
        bch.iter_custom(|iters| {
            let t = std::time::Instant::now();
            run(iters);
            t.elapsed()
        });
    });
}

/// Runs the write benchmark `name` over a fresh pair, then checks it.
fn timed_pair(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    payload: usize,
    region: usize,
) {
    let mut p = Pair::new(payload, region);
    timed(g, name, |n| p.run(n));
    p.check();
    p.report(name);
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("packet_path");
    g.throughput(Throughput::Elements(1));
    g.measurement_time(StdDuration::from_secs(10));
    timed_pair(&mut g, "write_4k", 4096, REGION_4K);
    let mut cp = CopyOnly::new(4096, REGION_4K);
    timed(&mut g, "copy_only_4k", |n| cp.run(n));
    drop(cp);
    timed_pair(&mut g, "resident_4k", 4096, REGION_RESIDENT);
    let mut cp = CopyOnly::new(4096, REGION_RESIDENT);
    timed(&mut g, "resident_copy_4k", |n| cp.run(n));
    drop(cp);
    timed_pair(&mut g, "write_64b", 64, REGION_64B);
    g.finish();
}

// One function per benchmark, never inlined, so callgrind's
// `--toggle-collect='packet_path::measured_*'` counts exactly the N packets.
// The `black_box` tags keep LLVM from merging the two identical `Pair`
// functions into one symbol.
#[inline(never)]
fn measured_write_4k(p: &mut Pair, n: u64) {
    black_box(4096);
    p.run(n);
}

#[inline(never)]
fn measured_copy_only_4k(c: &mut CopyOnly, n: u64) {
    c.run(n);
}

#[inline(never)]
fn measured_write_64b(p: &mut Pair, n: u64) {
    black_box(64);
    p.run(n);
}

/// `UET_BENCH_ONESHOT=N [filter]`: for each benchmark whose name contains
/// `filter` (all without one), warm up (one pass over the region, so every
/// page and every table is hot), then N packets, once.
/// A `measured_*` function.
type Measured = fn(&mut Pair, u64);

fn oneshot(n: u64, filter: &str) {
    // The pair benchmarks: name, payload, region, measured function.
    let pairs: [(&str, usize, usize, Measured); 3] = [
        ("write_4k", 4096, REGION_4K, measured_write_4k),
        ("resident_4k", 4096, REGION_RESIDENT, measured_write_4k),
        ("write_64b", 64, REGION_64B, measured_write_64b),
    ];
    for (name, payload, region, measured) in pairs {
        if !name.contains(filter) {
            continue;
        }
        let mut p = Pair::new(payload, region);
        p.run((region / payload) as u64);
        let t = std::time::Instant::now();
        measured(&mut p, n);
        let e = t.elapsed();
        p.check();
        p.report(name);
        eprintln!("{name}: {n} packets in {e:?}");
    }
    for (name, region) in [
        ("copy_only_4k", REGION_4K),
        ("resident_copy_4k", REGION_RESIDENT),
    ] {
        if !name.contains(filter) {
            continue;
        }
        let mut c = CopyOnly::new(4096, region);
        c.run((region / 4096) as u64);
        let t = std::time::Instant::now();
        measured_copy_only_4k(&mut c, n);
        eprintln!("{name}: {n} packets in {:?}", t.elapsed());
    }
}

fn main() {
    if let Ok(n) = std::env::var("UET_BENCH_ONESHOT") {
        let filter = std::env::args()
            .skip(1)
            .find(|a| !a.starts_with('-'))
            .unwrap_or_default();
        oneshot(n.parse().expect("UET_BENCH_ONESHOT=<packets>"), &filter);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
