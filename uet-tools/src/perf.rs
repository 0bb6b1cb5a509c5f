//! `uet perf`: RMA write, RMA read and send bandwidth and latency with
//! perftest's semantics (`ib_write_bw`, `ib_read_bw`, `ib_send_bw`,
//! `ib_*_lat`) and iperf3-shaped JSON.
//!
//! Two ways to run it:
//! - against a region a `uet serve` exposes (`uet perf uet://…`): writes or
//!   reads only, one direction, no numbers from the far side;
//! - against a `uet perf --server` (`uet perf HOST`): as perftest does, the
//!   client and the server meet over an out-of-band TCP connection (one
//!   per message size) that carries the test's settings, the addresses
//!   (the server's region and receiving process; the client's when the
//!   test is bidirectional) and, at the end, the server's results and its
//!   daemon's counters. Every test kind, bidirectional tests and the far
//!   daemon's retransmits, RTOs and CPU use need this form.
//!
//! The out-of-band messages are JSON objects, one per line: the client's
//! `hello` (the settings), the server's `ready` (or `error`), the client's
//! `start` and `done`, the server's `result`.
//!
//! Numbers, as perftest reports them: BW average is the bytes completed
//! over the time from the first post to the last completion; BW peak the
//! best rate over the run's [`PEAK_WINDOW`]-long windows (so peak ≥
//! average); MsgRate in Mpps. Latency is one operation's post-to-completion
//! time. A write or send completes with its acknowledgement and a read with
//! its data, so at depth 1 each is a full round trip — perftest's
//! `ib_write_lat` and `ib_send_lat` print half of a ping-pong round trip,
//! its `ib_read_lat` a whole read, as here.

use std::io::{BufRead, BufReader, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{Value, json};
use uet_api::{Access, Client, ClientError, Event, LocalRef, Peer, RemoteRegion, Status, Tag};

use crate::client::{DEFAULT_RING_SPIN, connect};
use crate::error::{Error, Result};

/// perftest's port, the server's default.
pub const DEFAULT_PORT: u16 = 18515;

/// `-a`: perftest's sweep, 2 B to 8 MiB in powers of two.
#[must_use]
pub fn all_sizes() -> Vec<u32> {
    (1..=23).map(|e| 1u32 << e).collect()
}

/// Width of the windows BW peak is the best of.
pub const PEAK_WINDOW: Duration = Duration::from_millis(10);

/// How long one wait for a completion may take before the test fails.
const OP_TIMEOUT: Duration = Duration::from_secs(60);

/// How long either side waits for the other's next out-of-band message
/// beyond the test's own length.
const OOB_GRACE: Duration = Duration::from_secs(60);

/// The operation under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Test {
    /// RMA write into the peer's region (`ib_write_*`).
    Write,
    /// RMA read from the peer's region (`ib_read_*`).
    Read,
    /// Untagged send into receives the peer posted (`ib_send_*`).
    Send,
}

impl Test {
    /// Its name on the command line and in JSON.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Read => "read",
            Self::Send => "send",
        }
    }
}

impl std::fmt::Display for Test {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Test {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "write" => Ok(Self::Write),
            "read" => Ok(Self::Read),
            "send" => Ok(Self::Send),
            _ => Err(format!("{s:?} is not a test: write, read or send")),
        }
    }
}

/// One test's settings (one message size).
#[derive(Debug, Clone, PartialEq)]
pub struct PerfConfig {
    /// The operation.
    pub test: Test,
    /// Message size, bytes.
    pub size: u32,
    /// Operations to complete (`None`: run for `duration`).
    pub iters: Option<u64>,
    /// How long to run when `iters` is `None`.
    pub duration: Duration,
    /// Operations in flight (perftest's `--tx-depth`).
    pub depth: usize,
    /// Submit writes and reads through the shared-memory ring
    /// (`uet_api::ring`) rather than the socket (sends always take the
    /// socket).
    pub ring: bool,
    /// How long a ring wait polls before it sleeps on the ring's futex.
    pub ring_spin: Duration,
    /// Per-interval sums this often (`None`: none).
    pub interval: Option<Duration>,
    /// Both sides run the test toward each other at once (server form
    /// only).
    pub bidirectional: bool,
    /// Bytes of the region each side exposes (operations cycle through
    /// it); against `uet serve`, the served region's length.
    pub region_len: u64,
}

impl Default for PerfConfig {
    fn default() -> Self {
        Self {
            test: Test::Write,
            size: 64 << 10,
            iters: None,
            duration: Duration::from_secs(3),
            depth: 16,
            ring: true,
            ring_spin: DEFAULT_RING_SPIN,
            interval: None,
            bidirectional: false,
            region_len: 64 << 20,
        }
    }
}

impl PerfConfig {
    fn check(&self) -> Result<()> {
        if self.size == 0 || u64::from(self.size) > self.region_len {
            return Err(Error::Invalid(format!(
                "the message size must be 1..={} (the region), not {}",
                self.region_len, self.size
            )));
        }
        if self.depth == 0 {
            return Err(Error::Invalid("the depth must be at least 1".into()));
        }
        if self.iters == Some(0) {
            return Err(Error::Invalid("--iters must be at least 1".into()));
        }
        if self.interval.is_some_and(|i| i.is_zero()) {
            return Err(Error::Invalid("--interval must be positive".into()));
        }
        Ok(())
    }

    fn to_json(&self) -> Value {
        json!({
            "test": self.test.name(),
            "size": self.size,
            "iters": self.iters,
            "duration": self.duration.as_secs_f64(),
            "depth": self.depth,
            "ring": self.ring,
            "interval": self.interval.map(|d| d.as_secs_f64()),
            "bidirectional": self.bidirectional,
            "region_len": self.region_len,
        })
    }

    fn from_json(v: &Value) -> Result<Self> {
        let bad = |what: &str| Error::Reply {
            what: format!("the client's settings lack a valid {what}: {v}"),
        };
        let secs = |k: &str| -> Result<Option<Duration>> {
            match &v[k] {
                Value::Null => Ok(None),
                n => n
                    .as_f64()
                    .and_then(|s| Duration::try_from_secs_f64(s).ok())
                    .map(Some)
                    .ok_or_else(|| bad(k)),
            }
        };
        Ok(Self {
            test: v["test"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad("test"))?,
            size: v["size"]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| bad("size"))?,
            iters: v["iters"].as_u64(),
            duration: secs("duration")?.ok_or_else(|| bad("duration"))?,
            depth: v["depth"]
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| bad("depth"))?,
            ring: v["ring"].as_bool().unwrap_or(true),
            ring_spin: DEFAULT_RING_SPIN,
            interval: secs("interval")?,
            bidirectional: v["bidirectional"].as_bool().unwrap_or(false),
            region_len: v["region_len"].as_u64().ok_or_else(|| bad("region_len"))?,
        })
    }

    /// How long a run may take at most, for the other side's patience.
    fn patience(&self) -> Duration {
        match self.iters {
            Some(_) => OOB_GRACE * 10,
            None => self.duration + OOB_GRACE,
        }
    }
}

/// perftest's latency columns, µs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LatencyStats {
    /// Operations measured.
    pub count: u64,
    /// Smallest.
    pub t_min: f64,
    /// Largest.
    pub t_max: f64,
    /// The median (perftest's t_typical).
    pub t_typical: f64,
    /// Mean.
    pub t_avg: f64,
    /// Standard deviation (of the population).
    pub t_stdev: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
}

impl LatencyStats {
    /// As JSON.
    #[must_use]
    pub fn to_json(&self) -> Value {
        json!({
            "count": self.count,
            "t_min": self.t_min,
            "t_max": self.t_max,
            "t_typical": self.t_typical,
            "t_avg": self.t_avg,
            "t_stdev": self.t_stdev,
            "p99": self.p99,
            "p999": self.p999,
        })
    }
}

/// Latencies as they come, in bounded memory: an HDR histogram (three
/// significant figures) for the percentiles, exact min, max, mean and
/// variance (Welford's running sums) beside it.
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
    n: u64,
    mean: f64,
    m2: f64,
    min: u64,
    max: u64,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self {
            // Auto-resizing: creating it cannot fail.
            hist: Histogram::new(3).expect("3 significant figures are valid"),
            n: 0,
            mean: 0.0,
            m2: 0.0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl LatencyRecorder {
    /// One operation's latency, ns.
    pub fn record(&mut self, ns: u64) {
        // An auto-resizing histogram records any u64 where usize is 64 bits.
        let _ = self.hist.record(ns);
        self.n += 1;
        let x = ns as f64;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    /// The columns, µs (all zero when nothing was recorded).
    #[must_use]
    pub fn stats(&self) -> LatencyStats {
        if self.n == 0 {
            return LatencyStats::default();
        }
        let us = |ns: f64| ns / 1000.0;
        // A percentile is the lowest value of its bucket (the samples it
        // stands for are at most 0.1 % above it), kept between the exact
        // extremes.
        let q = |q: f64| {
            let v = self.hist.lowest_equivalent(self.hist.value_at_quantile(q));
            us(v.clamp(self.min, self.max) as f64)
        };
        LatencyStats {
            count: self.n,
            t_min: us(self.min as f64),
            t_max: us(self.max as f64),
            t_typical: q(0.5),
            t_avg: us(self.mean),
            t_stdev: us((self.m2 / self.n as f64).sqrt()),
            p99: q(0.99),
            p999: q(0.999),
        }
    }
}

/// Bytes completed per [`PEAK_WINDOW`], for BW peak.
#[derive(Debug, Clone, Default)]
pub struct PeakMeter {
    windows: Vec<u64>,
}

impl PeakMeter {
    /// `bytes` completed `at` after the start.
    pub fn record(&mut self, at: Duration, bytes: u64) {
        let i = (at.as_nanos() / PEAK_WINDOW.as_nanos()) as usize;
        if self.windows.len() <= i {
            self.windows.resize(i + 1, 0);
        }
        self.windows[i] += bytes;
    }

    /// The best window's rate, bytes/s, for a run of `total`. The last
    /// window counts for the time it lasted; one shorter than half a
    /// window is merged into the one before (its few completions over a
    /// sliver of time are noise, not a rate). The windows cover the run,
    /// so the average is their time-weighted mean and the peak is at
    /// least the average.
    #[must_use]
    pub fn peak(&self, total: Duration) -> f64 {
        let w = PEAK_WINDOW.as_secs_f64();
        let total = total.as_secs_f64();
        let n = self.windows.len();
        if n == 0 || total <= 0.0 {
            return 0.0;
        }
        let mut rates = Vec::with_capacity(n);
        for (i, &b) in self.windows.iter().enumerate() {
            let start = i as f64 * w;
            let len = (total - start).clamp(0.0, w);
            rates.push((b, len));
        }
        if n >= 2 && rates[n - 1].1 < w / 2.0 {
            let (b, len) = rates.pop().unwrap_or_default();
            let last = rates.last_mut().expect("two or more windows");
            last.0 += b;
            last.1 += len;
        }
        rates
            .iter()
            .filter(|(_, len)| *len > 0.0)
            .map(|(b, len)| *b as f64 / len)
            .fold(0.0, f64::max)
    }
}

/// One interval's sums, iperf3's `sum` object.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntervalSum {
    /// Seconds since the start.
    pub start: f64,
    /// Seconds since the start.
    pub end: f64,
    /// Bytes completed in it.
    pub bytes: u64,
    /// Operations completed in it.
    pub messages: u64,
}

impl IntervalSum {
    /// Its length, s.
    #[must_use]
    pub fn seconds(&self) -> f64 {
        self.end - self.start
    }

    /// Its rate, bits/s.
    #[must_use]
    pub fn bits_per_second(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.seconds().max(1e-9)
    }

    /// As iperf3 writes it.
    #[must_use]
    pub fn to_json(&self) -> Value {
        json!({
            "start": self.start,
            "end": self.end,
            "seconds": self.seconds(),
            "bytes": self.bytes,
            "messages": self.messages,
            "bits_per_second": self.bits_per_second(),
        })
    }

    fn from_json(v: &Value) -> Option<Self> {
        Some(Self {
            start: v["start"].as_f64()?,
            end: v["end"].as_f64()?,
            bytes: v["bytes"].as_u64()?,
            messages: v["messages"].as_u64()?,
        })
    }
}

/// What one side measured of its own operations.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// Message size.
    pub size: u32,
    /// Operations completed.
    pub messages: u64,
    /// Bytes they moved (`messages × size`).
    pub bytes: u64,
    /// From the first post to the last completion, s.
    pub seconds: f64,
    /// BW peak, bytes/s.
    pub peak_bytes_per_second: f64,
    /// Latency columns.
    pub latency: LatencyStats,
    /// Per-interval sums.
    pub intervals: Vec<IntervalSum>,
}

impl Measured {
    /// BW average, bytes/s.
    #[must_use]
    pub fn bytes_per_second(&self) -> f64 {
        self.bytes as f64 / self.seconds.max(1e-9)
    }

    /// BW average, Gb/s.
    #[must_use]
    pub fn gbps(&self) -> f64 {
        self.bytes_per_second() * 8.0 / 1e9
    }

    /// Messages per second.
    #[must_use]
    pub fn msg_rate(&self) -> f64 {
        self.messages as f64 / self.seconds.max(1e-9)
    }

    /// iperf3's `end.sum`, with perftest's peak and message rate.
    #[must_use]
    pub fn sum_json(&self) -> Value {
        json!({
            "start": 0.0,
            "end": self.seconds,
            "seconds": self.seconds,
            "bytes": self.bytes,
            "messages": self.messages,
            "size": self.size,
            "bits_per_second": self.bytes_per_second() * 8.0,
            "peak_bits_per_second": self.peak_bytes_per_second * 8.0,
            "msg_rate_mpps": self.msg_rate() / 1e6,
        })
    }

    fn to_json(&self) -> Value {
        json!({
            "sum": self.sum_json(),
            "latency_us": self.latency.to_json(),
            "intervals": self.intervals.iter().map(IntervalSum::to_json).collect::<Vec<_>>(),
        })
    }

    fn from_json(v: &Value) -> Option<Self> {
        let s = &v["sum"];
        let l = &v["latency_us"];
        let f = |v: &Value, k: &str| v[k].as_f64();
        Some(Self {
            size: u32::try_from(s["size"].as_u64()?).ok()?,
            messages: s["messages"].as_u64()?,
            bytes: s["bytes"].as_u64()?,
            seconds: f(s, "seconds")?,
            peak_bytes_per_second: f(s, "peak_bits_per_second")? / 8.0,
            latency: LatencyStats {
                count: l["count"].as_u64()?,
                t_min: f(l, "t_min")?,
                t_max: f(l, "t_max")?,
                t_typical: f(l, "t_typical")?,
                t_avg: f(l, "t_avg")?,
                t_stdev: f(l, "t_stdev")?,
                p99: f(l, "p99")?,
                p999: f(l, "p999")?,
            },
            intervals: v["intervals"]
                .as_array()?
                .iter()
                .map(IntervalSum::from_json)
                .collect::<Option<_>>()?,
        })
    }
}

/// CPU time a process spent, from `/proc/PID/stat`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct CpuTimes {
    user: f64,
    system: f64,
    at: Instant,
}

impl CpuTimes {
    /// `pid` (`None`: this process) now.
    fn of(pid: Option<u32>) -> Option<Self> {
        let path = match pid {
            Some(p) => format!("/proc/{p}/stat"),
            None => "/proc/self/stat".into(),
        };
        let text = std::fs::read_to_string(path).ok()?;
        let (user, system) = parse_stat_times(&text)?;
        let hz = rustix::param::clock_ticks_per_second() as f64;
        Some(Self {
            user: user as f64 / hz,
            system: system as f64 / hz,
            at: Instant::now(),
        })
    }

    /// What was spent since `before`, as percentages of the wall time.
    fn since(&self, before: &Self) -> CpuUse {
        let wall = self.at.duration_since(before.at).as_secs_f64().max(1e-9);
        let user = (self.user - before.user).max(0.0) / wall * 100.0;
        let system = (self.system - before.system).max(0.0) / wall * 100.0;
        CpuUse {
            total: user + system,
            user,
            system,
        }
    }
}

/// utime and stime (fields 14 and 15, clock ticks) of a `/proc/PID/stat`
/// line; the command name in parentheses may hold spaces and parentheses.
fn parse_stat_times(text: &str) -> Option<(u64, u64)> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

/// CPU use over a test, percent of one CPU (iperf3's
/// `cpu_utilization_percent`: above 100 on several cores).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CpuUse {
    /// user + system.
    pub total: f64,
    /// User time.
    pub user: f64,
    /// System time.
    pub system: f64,
}

impl CpuUse {
    fn to_json(self) -> Value {
        json!({"total": self.total, "user": self.user, "system": self.system})
    }

    fn from_json(v: &Value) -> Option<Self> {
        Some(Self {
            total: v["total"].as_f64()?,
            user: v["user"].as_f64()?,
            system: v["system"].as_f64()?,
        })
    }
}

/// A daemon's resends and CPU over a test.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DaemonUse {
    /// Packets resent (its workers' `tx_retransmits`).
    pub retransmits: u64,
    /// Retransmission timeouts that fired (`rtos`).
    pub rtos: u64,
    /// Its CPU use (`None` when its `/proc` entry could not be read).
    pub cpu: Option<CpuUse>,
}

impl DaemonUse {
    fn to_json(self) -> Value {
        json!({
            "retransmits": self.retransmits,
            "rtos": self.rtos,
            "cpu_utilization_percent": self.cpu.map(CpuUse::to_json),
        })
    }

    fn from_json(v: &Value) -> Option<Self> {
        Some(Self {
            retransmits: v["retransmits"].as_u64()?,
            rtos: v["rtos"].as_u64()?,
            cpu: CpuUse::from_json(&v["cpu_utilization_percent"]),
        })
    }
}

/// A daemon's counters and CPU time at one instant.
struct DaemonSnap {
    retransmits: u64,
    rtos: u64,
    cpu: Option<CpuTimes>,
}

impl DaemonSnap {
    /// Through `c`: its counters, and its CPU time through the pid its
    /// control socket's peer credentials name.
    fn take(c: &mut Client) -> Result<Self> {
        let text = c
            .stats()
            .map_err(Error::daemon("reading the daemon's counters"))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| Error::Reply {
            what: format!("the daemon's counters are not JSON: {e}"),
        })?;
        let sum = |k: &str| {
            v["workers"]
                .as_array()
                .map_or(0, |ws| ws.iter().filter_map(|w| w["pds"][k].as_u64()).sum())
        };
        let pid = rustix::net::sockopt::socket_peercred(&*c)
            .ok()
            .map(|cred| cred.pid.as_raw_nonzero().get().unsigned_abs());
        Ok(Self {
            retransmits: sum("tx_retransmits"),
            rtos: sum("rtos"),
            cpu: pid.and_then(|p| CpuTimes::of(Some(p))),
        })
    }

    fn since(&self, before: &Self) -> DaemonUse {
        DaemonUse {
            retransmits: self.retransmits.saturating_sub(before.retransmits),
            rtos: self.rtos.saturating_sub(before.rtos),
            cpu: match (&self.cpu, &before.cpu) {
                (Some(a), Some(b)) => Some(a.since(b)),
                _ => None,
            },
        }
    }
}

/// Where one side's operations go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// A region (writes and reads), of this length.
    Region(RemoteRegion, u64),
    /// A receiving process (sends) and the receives it keeps posted.
    Peer(Peer, u64),
}

/// The operations of one side: `cfg.depth` in flight until `cfg.iters`
/// completed or `cfg.duration` passed, or `stop` is raised. Calls
/// `on_interval` with each interval's sums as it ends.
fn run_ops(
    c: &mut Client,
    target: Target,
    cfg: &PerfConfig,
    stop: &AtomicBool,
    on_interval: &mut dyn FnMut(&IntervalSum),
) -> Result<Measured> {
    let size = u64::from(cfg.size);
    let src = c
        .create_allocated_region(size)
        .map_err(Error::io("creating the local buffer"))?;
    src.write_at(0, &vec![0xa5; cfg.size as usize])
        .map_err(Error::io("filling the local buffer"))?;
    let local = c
        .register_local(&src)
        .map_err(Error::daemon("registering the local buffer"))?;
    let mut ring = match (target, cfg.ring) {
        (Target::Region(r, _), true) => {
            let n = u32::try_from(cfg.depth.next_power_of_two())
                .unwrap_or(uet_api::ring::MAX_RING_ENTRIES)
                .min(uet_api::ring::MAX_RING_ENTRIES);
            Some(
                c.open_ring(r.fep, n, n)
                    .map_err(Error::daemon("opening a ring"))?,
            )
        }
        _ => None,
    };
    let depth = match &ring {
        Some(r) => cfg.depth.min(r.sizes().sq() as usize),
        None => cfg.depth,
    };
    let slots = match target {
        Target::Region(_, len) => (len / size).max(1),
        Target::Peer(..) => 1,
    };
    let mut lat = LatencyRecorder::default();
    let mut peak = PeakMeter::default();
    let mut intervals = Vec::new();
    let mut cur = IntervalSum {
        start: 0.0,
        end: 0.0,
        bytes: 0,
        messages: 0,
    };
    let mut started: std::collections::HashMap<Tag, Instant> =
        std::collections::HashMap::with_capacity(depth);
    let (mut posted, mut done) = (0u64, 0u64);
    let start = Instant::now();
    let mut last = start;
    let more = |posted: u64| {
        !stop.load(Ordering::Relaxed)
            && match cfg.iters {
                Some(n) => posted < n,
                None => start.elapsed() < cfg.duration,
            }
    };
    let post = |c: &mut Client,
                ring: &mut Option<uet_api::ring::ClientRing>,
                at: LocalRef,
                n: u64|
     -> Result<Tag> {
        let off = (n % slots) * size;
        match (target, ring) {
            (Target::Region(r, _), Some(ring)) => match cfg.test {
                Test::Read => ring.read(at, r.at(off), cfg.size),
                _ => ring.write(at, r.at(off), cfg.size, None),
            }
            .map_err(|_| Error::Invalid("the ring is full".into())),
            (Target::Region(r, _), None) => match cfg.test {
                Test::Read => c.read(at, r.at(off), cfg.size),
                _ => c.write(at, r.at(off), cfg.size, None),
            }
            .map_err(Error::daemon("submitting an operation")),
            (Target::Peer(p, _), _) => c
                .send(at, p, cfg.size, None)
                .map_err(Error::daemon("submitting a send")),
        }
    };
    loop {
        while started.len() < depth && more(posted) {
            let tag = post(c, &mut ring, local.at(0), posted)?;
            started.insert(tag, Instant::now());
            posted += 1;
        }
        if started.is_empty() {
            break;
        }
        let ev = match &mut ring {
            Some(r) => r
                .wait(cfg.ring_spin, Some(OP_TIMEOUT))
                .map(Event::Completion)
                .map_err(|e| Error::Invalid(format!("waiting on the ring: {e:?}")))?,
            None => c
                .wait_event(Some(OP_TIMEOUT))
                .map_err(Error::daemon("waiting for completions"))?,
        };
        let Event::Completion(cmp) = &ev else {
            continue;
        };
        let Some(t0) = started.remove(&cmp.tag) else {
            continue;
        };
        if cmp.status != Status::Ok {
            return Err(Error::Operation {
                tag: cmp.tag.0,
                status: format!("{:?}", cmp.status),
            });
        }
        let now = Instant::now();
        lat.record(u64::try_from(now.duration_since(t0).as_nanos()).unwrap_or(u64::MAX));
        let at = now.duration_since(start);
        peak.record(at, size);
        done += 1;
        last = now;
        if let Some(every) = cfg.interval {
            let at = at.as_secs_f64();
            while at >= cur.start + every.as_secs_f64() {
                cur.end = cur.start + every.as_secs_f64();
                on_interval(&cur);
                intervals.push(cur);
                cur = IntervalSum {
                    start: cur.end,
                    end: cur.end,
                    bytes: 0,
                    messages: 0,
                };
            }
            cur.bytes += size;
            cur.messages += 1;
        }
    }
    let total = last.duration_since(start);
    let seconds = total.as_secs_f64();
    if let Target::Peer(p, posts) = target {
        drain(c, p, posts, local.at(0))?;
    }
    if cfg.interval.is_some() && cur.messages > 0 {
        cur.end = seconds.max(cur.start);
        on_interval(&cur);
        intervals.push(cur);
    }
    Ok(Measured {
        size: cfg.size,
        messages: done,
        bytes: done * size,
        seconds,
        peak_bytes_per_second: peak.peak(total),
        latency: lat.stats(),
        intervals,
    })
}

/// A process that keeps receives posted for sends, on a connection of its
/// own, until told how many to expect; it reports what it received.
struct Receiver {
    peer: Peer,
    /// Receives it keeps posted.
    posts: u64,
    /// `u64::MAX` while the test runs, then the sends to wait for.
    expect: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<Result<(u64, u64)>>,
}

/// How long a receiver waits for the last sends once told how many came.
const RECV_DRAIN: Duration = Duration::from_secs(5);

/// Header data of the sends that take a receiver's last posted receives
/// after a test, so that the receiver ends each test with none posted and
/// its counts are exact (a receive left over would take a send of the
/// next test, and a receive buffer the receiver frees must not be matched
/// afterwards). The daemon itself withdraws a departed client's receives.
const DRAIN_TAG: u64 = 0x7065_7266_6472_6169;

/// After a send test: one 1-byte send carrying [`DRAIN_TAG`] per receive
/// `peer` keeps posted, each waited for (the receiver does not repost
/// them).
fn drain(c: &mut Client, peer: Peer, posts: u64, src: LocalRef) -> Result<()> {
    let mut open = std::collections::HashSet::new();
    for _ in 0..posts {
        let tag = c
            .send(src, peer, 1, Some(DRAIN_TAG))
            .map_err(Error::daemon("submitting a draining send"))?;
        open.insert(tag);
    }
    while !open.is_empty() {
        let ev = c
            .wait_event(Some(OP_TIMEOUT))
            .map_err(Error::daemon("waiting for the draining sends"))?;
        if let Event::Completion(cmp) = &ev
            && open.remove(&cmp.tag)
            && cmp.status != Status::Ok
        {
            return Err(Error::Operation {
                tag: cmp.tag.0,
                status: format!("a draining send ended with {:?}", cmp.status),
            });
        }
    }
    Ok(())
}

impl Receiver {
    fn start(socket: &Path, size: u32, depth: usize, region_len: u64) -> Result<Self> {
        let mut c = connect(socket, "uet perf receiver")?;
        let s = c.session();
        let peer = Peer {
            fep: s.fep,
            job: s.job,
            pid: s.pid,
        };
        // Twice the sender's depth, as many as the region holds; all posted
        // before the sender hears of this receiver.
        let posts = (2 * depth as u64).clamp(1, (region_len / u64::from(size)).max(1));
        let region = c
            .create_allocated_region(posts * u64::from(size))
            .map_err(Error::io("creating the receive buffers"))?;
        // Receives land in a region registered for them (Access::RECV).
        let reg = c
            .register(&region, Access::RECV, None)
            .map_err(Error::daemon("registering the receive buffers"))?;
        let mut slot_of = std::collections::HashMap::new();
        for i in 0..posts {
            let at = reg.local(i * u64::from(size));
            let tag = c
                .post_recv(at, size, None)
                .map_err(Error::daemon("posting a receive"))?;
            slot_of.insert(tag, at);
        }
        let expect = Arc::new(AtomicU64::new(u64::MAX));
        let want = Arc::clone(&expect);
        let thread = std::thread::spawn(move || {
            let _region = region;
            let (mut msgs, mut bytes, mut drained) = (0u64, 0u64, 0u64);
            let mut deadline = None;
            loop {
                let w = want.load(Ordering::Acquire);
                if w != u64::MAX {
                    let d = *deadline.get_or_insert_with(|| Instant::now() + RECV_DRAIN);
                    if (msgs >= w && drained >= posts) || Instant::now() > d {
                        break;
                    }
                }
                let ev = match c.wait_event(Some(Duration::from_millis(20))) {
                    Ok(ev) => ev,
                    Err(ClientError::Timeout) => continue,
                    Err(e) => return Err(Error::daemon("waiting for sends")(e)),
                };
                let (tag, n) = match ev {
                    Event::Recv(r) if r.header_data == Some(DRAIN_TAG) => {
                        slot_of.remove(&r.tag);
                        drained += 1;
                        continue;
                    }
                    Event::Recv(r) => (r.tag, r.bytes),
                    Event::Completion(cmp) if slot_of.contains_key(&cmp.tag) => {
                        return Err(Error::Operation {
                            tag: cmp.tag.0,
                            status: format!("a receive ended with {:?}", cmp.status),
                        });
                    }
                    _ => continue,
                };
                let Some(at) = slot_of.remove(&tag) else {
                    continue;
                };
                msgs += 1;
                bytes += n;
                let tag = c
                    .post_recv(at, size, None)
                    .map_err(Error::daemon("posting a receive"))?;
                slot_of.insert(tag, at);
            }
            Ok((msgs, bytes))
        });
        Ok(Self {
            peer,
            posts,
            expect,
            thread,
        })
    }

    /// Waits for `expected` sends (at most [`RECV_DRAIN`] more), then
    /// stops: (messages, bytes) received.
    fn finish(self, expected: u64) -> Result<(u64, u64)> {
        self.expect.store(expected, Ordering::Release);
        self.thread
            .join()
            .map_err(|_| Error::Invalid("the receiving thread panicked".into()))?
    }
}

fn peer_json(p: &Peer) -> Value {
    json!({"fep": p.fep.to_string(), "job": p.job, "pid": p.pid})
}

fn peer_from_json(v: &Value) -> Option<Peer> {
    Some(Peer {
        fep: v["fep"].as_str()?.parse().ok()?,
        job: u32::try_from(v["job"].as_u64()?).ok()?,
        pid: u16::try_from(v["pid"].as_u64()?).ok()?,
    })
}

/// One out-of-band connection: JSON objects, one per line.
struct Oob {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Oob {
    fn new(s: TcpStream) -> Result<Self> {
        let _ = s.set_nodelay(true);
        let writer = s
            .try_clone()
            .map_err(Error::io("cloning the out-of-band socket"))?;
        Ok(Self {
            reader: BufReader::new(s),
            writer,
        })
    }

    fn send(&mut self, v: &Value) -> Result<()> {
        let mut line = v.to_string();
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .map_err(Error::io("writing to the out-of-band connection"))
    }

    /// The next message, whose one key must be `key`; an `error` message
    /// from the other side becomes an error.
    fn recv(&mut self, key: &str, within: Duration) -> Result<Value> {
        self.writer
            .set_read_timeout(Some(within))
            .map_err(Error::io("setting the out-of-band timeout"))?;
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).map_err(|e| {
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) {
                Error::Timeout {
                    awaiting: format!("the peer's {key:?} ({within:?})"),
                }
            } else {
                Error::io("reading the out-of-band connection")(e)
            }
        })?;
        if n == 0 {
            return Err(Error::Reply {
                what: format!("the peer closed the out-of-band connection before {key:?}"),
            });
        }
        let v: Value = serde_json::from_str(&line).map_err(|e| Error::Reply {
            what: format!("the peer sent something that is not JSON ({e}): {line:?}"),
        })?;
        if let Some(msg) = v["error"].as_str() {
            return Err(Error::Reply {
                what: format!("the perf server: {msg}"),
            });
        }
        match v.get(key) {
            Some(inner) => Ok(inner.clone()),
            None => Err(Error::Reply {
                what: format!("expected {key:?} from the peer, got {v}"),
            }),
        }
    }
}

/// A whole test's results: one message size, both sides.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfReport {
    /// The settings.
    pub config: PerfConfig,
    /// Where it ran (`uet://…` or the server's address).
    pub target: String,
    /// The daemon's protocol version.
    pub protocol_version: u16,
    /// Unix time it started, s.
    pub timestamp: u64,
    /// This side's operations.
    pub local: Measured,
    /// The server's operations toward this side (bidirectional tests).
    pub reverse: Option<Measured>,
    /// Sends the server received: (messages, bytes).
    pub received: Option<(u64, u64)>,
    /// This side's daemon.
    pub local_daemon: DaemonUse,
    /// The server's daemon (server form only).
    pub remote_daemon: Option<DaemonUse>,
    /// This process's CPU use.
    pub cpu: Option<CpuUse>,
    /// The server process's CPU use.
    pub remote_cpu: Option<CpuUse>,
}

impl PerfReport {
    /// Operations completed, both directions.
    #[must_use]
    pub fn messages(&self) -> u64 {
        self.local.messages + self.reverse.as_ref().map_or(0, |r| r.messages)
    }

    /// BW average, bytes/s, both directions (perftest sums them).
    #[must_use]
    pub fn bytes_per_second(&self) -> f64 {
        self.local.bytes_per_second()
            + self
                .reverse
                .as_ref()
                .map_or(0.0, Measured::bytes_per_second)
    }

    /// BW peak, bytes/s, both directions.
    #[must_use]
    pub fn peak_bytes_per_second(&self) -> f64 {
        self.local.peak_bytes_per_second
            + self
                .reverse
                .as_ref()
                .map_or(0.0, |r| r.peak_bytes_per_second)
    }

    /// Messages per second, both directions.
    #[must_use]
    pub fn msg_rate(&self) -> f64 {
        self.local.msg_rate() + self.reverse.as_ref().map_or(0.0, Measured::msg_rate)
    }

    /// The iperf3-shaped document: `start`, `intervals`, `end` (see
    /// `uet perf --help`).
    #[must_use]
    pub fn to_json(&self) -> Value {
        let intervals: Vec<Value> = self
            .local
            .intervals
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut o = json!({"sum": s.to_json()});
                if let Some(r) = self.reverse.as_ref().and_then(|r| r.intervals.get(i)) {
                    o["sum_bidir_reverse"] = r.to_json();
                }
                o
            })
            .collect();
        let mut end = json!({
            "sum": self.local.sum_json(),
            "latency_us": self.local.latency.to_json(),
            "retransmits": self.local_daemon.retransmits,
            "daemons": {
                "local": self.local_daemon.to_json(),
                "remote": self.remote_daemon.map(DaemonUse::to_json),
            },
            "cpu_utilization_percent": {
                "host_total": self.cpu.map(|c| c.total),
                "host_user": self.cpu.map(|c| c.user),
                "host_system": self.cpu.map(|c| c.system),
                "remote_total": self.remote_cpu.map(|c| c.total),
                "remote_user": self.remote_cpu.map(|c| c.user),
                "remote_system": self.remote_cpu.map(|c| c.system),
            },
        });
        if let Some(r) = &self.reverse {
            end["sum_bidir_reverse"] = r.sum_json();
            end["latency_us_bidir_reverse"] = r.latency.to_json();
        }
        if let Some((m, b)) = self.received {
            end["sum_received"] = json!({"messages": m, "bytes": b});
        }
        json!({
            "start": {
                "version": concat!("uet ", env!("CARGO_PKG_VERSION")),
                "protocol_version": self.protocol_version,
                "timestamp": {"timesecs": self.timestamp},
                "connecting_to": self.target,
                "test_start": self.config.to_json(),
            },
            "intervals": intervals,
            "end": end,
        })
    }
}

/// Bandwidth units, perftest's: MiB/s by default, Gb/s with
/// `--report-gbits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Units {
    /// 2^20 bytes per second (perftest's `MB/sec`).
    MiBps,
    /// 10^9 bits per second.
    Gbps,
}

impl Units {
    /// `bytes_per_second` in these units.
    #[must_use]
    pub fn of(self, bytes_per_second: f64) -> f64 {
        match self {
            Self::MiBps => bytes_per_second / f64::from(1u32 << 20),
            Self::Gbps => bytes_per_second * 8.0 / 1e9,
        }
    }

    /// Their column label.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::MiBps => "MiB/sec",
            Self::Gbps => "Gb/sec",
        }
    }
}

/// perftest's bandwidth table header.
#[must_use]
pub fn bw_header(u: Units) -> String {
    format!(
        " {:<10} {:<14} {:<20} {:<22} {:<14}",
        "#bytes",
        "#iterations",
        format!("BW peak[{}]", u.label()),
        format!("BW average[{}]", u.label()),
        "MsgRate[Mpps]"
    )
}

/// One bandwidth row.
#[must_use]
pub fn bw_row(r: &PerfReport, u: Units) -> String {
    format!(
        " {:<10} {:<14} {:<20.2} {:<22.2} {:<14.6}",
        r.config.size,
        r.messages(),
        u.of(r.peak_bytes_per_second()),
        u.of(r.bytes_per_second()),
        r.msg_rate() / 1e6
    )
}

/// perftest's latency table header.
#[must_use]
pub fn lat_header() -> String {
    format!(
        " {:<7} {:<12} {:<12} {:<12} {:<16} {:<12} {:<14} {:<22} {:<22}",
        "#bytes",
        "#iterations",
        "t_min[usec]",
        "t_max[usec]",
        "t_typical[usec]",
        "t_avg[usec]",
        "t_stdev[usec]",
        "99% percentile[usec]",
        "99.9% percentile[usec]"
    )
}

/// One latency row.
#[must_use]
pub fn lat_row(r: &PerfReport) -> String {
    let l = &r.local.latency;
    format!(
        " {:<7} {:<12} {:<12.2} {:<12.2} {:<16.2} {:<12.2} {:<14.2} {:<22.2} {:<22.2}",
        r.config.size, l.count, l.t_min, l.t_max, l.t_typical, l.t_avg, l.t_stdev, l.p99, l.p999
    )
}

/// One interval line, iperf3-style.
#[must_use]
pub fn interval_line(s: &IntervalSum, u: Units, reverse: bool) -> String {
    format!(
        "[{}] {:7.2}-{:<7.2} sec {:>14} bytes {:>12.2} {} {:>10.6} Mpps",
        if reverse { "REV" } else { "SUM" },
        s.start,
        s.end,
        s.bytes,
        u.of(s.bytes as f64 / s.seconds().max(1e-9)),
        u.label(),
        s.messages as f64 / s.seconds().max(1e-9) / 1e6
    )
}

/// An error and its causes, `: `-separated.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `uet perf uet://…`: writes or reads against a region `uet serve`
/// exposes (`cfg.region_len` bytes of it), one direction.
pub fn perf_region(
    socket: &Path,
    to: &RemoteRegion,
    cfg: &PerfConfig,
    on_interval: &mut dyn FnMut(&IntervalSum),
) -> Result<PerfReport> {
    cfg.check()?;
    if cfg.test == Test::Send || cfg.bidirectional {
        return Err(Error::Invalid(
            "send and bidirectional tests need a `uet perf --server` peer: give its HOST".into(),
        ));
    }
    let mut c = connect(socket, "uet perf")?;
    let timestamp = unix_now();
    let cpu0 = CpuTimes::of(None);
    let d0 = DaemonSnap::take(&mut c)?;
    let stop = AtomicBool::new(false);
    let local = run_ops(
        &mut c,
        Target::Region(*to, cfg.region_len),
        cfg,
        &stop,
        on_interval,
    )?;
    let d1 = DaemonSnap::take(&mut c)?;
    let cpu1 = CpuTimes::of(None);
    Ok(PerfReport {
        config: cfg.clone(),
        target: to.to_string(),
        protocol_version: c.session().version,
        timestamp,
        local,
        reverse: None,
        received: None,
        local_daemon: d1.since(&d0),
        remote_daemon: None,
        cpu: cpu1.zip(cpu0).map(|(a, b)| a.since(&b)),
        remote_cpu: None,
    })
}

/// What this side exposes to the other for a test: a region (writes and
/// reads toward it) or a receiver (sends).
enum Exposed {
    /// The memory stays mapped while the registration is in use.
    Region(#[allow(dead_code)] uet_api::Region, uet_api::Registration),
    Receiver(Receiver),
    Nothing,
}

impl Exposed {
    fn new(c: &mut Client, socket: &Path, cfg: &PerfConfig) -> Result<Self> {
        Ok(match cfg.test {
            Test::Send => Self::Receiver(Receiver::start(
                socket,
                cfg.size,
                cfg.depth,
                cfg.region_len,
            )?),
            Test::Write | Test::Read => {
                let region = c
                    .create_allocated_region(cfg.region_len)
                    .map_err(Error::io("creating the region to expose"))?;
                let reg = c
                    .register(&region, Access::REMOTE_WRITE | Access::REMOTE_READ, None)
                    .map_err(Error::daemon("registering the region to expose"))?;
                Self::Region(region, reg)
            }
        })
    }

    fn to_json(&self, len: u64) -> Value {
        match self {
            Self::Region(_, reg) => json!({"region": reg.remote.to_string(), "region_len": len}),
            Self::Receiver(r) => json!({"peer": peer_json(&r.peer), "posts": r.posts}),
            Self::Nothing => Value::Null,
        }
    }

    /// `expected`: the sends the other side completed.
    fn finish(self, expected: u64) -> Result<Option<(u64, u64)>> {
        match self {
            Self::Receiver(r) => r.finish(expected).map(Some),
            Self::Region(..) | Self::Nothing => Ok(None),
        }
    }
}

/// Where the other side's `to_json` says to aim.
fn target_from_json(v: &Value, test: Test) -> Result<Target> {
    let bad = || Error::Reply {
        what: format!("the peer's address for a {test} test is missing or malformed: {v}"),
    };
    match test {
        Test::Send => Ok(Target::Peer(
            peer_from_json(&v["peer"]).ok_or_else(bad)?,
            v["posts"].as_u64().ok_or_else(bad)?,
        )),
        Test::Write | Test::Read => {
            let r: RemoteRegion = v["region"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .ok_or_else(bad)?;
            Ok(Target::Region(r, v["region_len"].as_u64().ok_or_else(bad)?))
        }
    }
}

/// `uet perf HOST`: the test against a `uet perf --server` at `server`.
pub fn perf_client(
    socket: &Path,
    server: SocketAddr,
    cfg: &PerfConfig,
    on_interval: &mut dyn FnMut(&IntervalSum),
) -> Result<PerfReport> {
    cfg.check()?;
    let mut c = connect(socket, "uet perf")?;
    let tcp = TcpStream::connect_timeout(&server, Duration::from_secs(10)).map_err(Error::io(
        format!("connecting to the perf server at {server}"),
    ))?;
    let mut oob = Oob::new(tcp)?;
    let exposed = if cfg.bidirectional {
        Exposed::new(&mut c, socket, cfg)?
    } else {
        Exposed::Nothing
    };
    oob.send(&json!({"hello": {
        "version": env!("CARGO_PKG_VERSION"),
        "config": cfg.to_json(),
        "target": exposed.to_json(cfg.region_len),
    }}))?;
    let ready = oob.recv("ready", OOB_GRACE)?;
    let target = target_from_json(&ready, cfg.test)?;
    let timestamp = unix_now();
    let cpu0 = CpuTimes::of(None);
    let d0 = DaemonSnap::take(&mut c)?;
    oob.send(&json!({"start": {}}))?;
    let stop = AtomicBool::new(false);
    let local = run_ops(&mut c, target, cfg, &stop, on_interval);
    // The server waits for `done` whatever happened here.
    oob.send(&json!({"done": {
        "ok": local.is_ok(),
        "messages": local.as_ref().map_or(0, |m| m.messages),
    }}))?;
    let local = local?;
    let result = oob.recv("result", cfg.patience())?;
    let d1 = DaemonSnap::take(&mut c)?;
    let cpu1 = CpuTimes::of(None);
    let reverse_messages = result["measured"]["sum"]["messages"].as_u64().unwrap_or(0);
    exposed.finish(reverse_messages)?;
    let bad = |what: &str| Error::Reply {
        what: format!("the perf server's result lacks a valid {what}: {result}"),
    };
    let reverse = match &result["measured"] {
        Value::Null => None,
        m => Some(Measured::from_json(m).ok_or_else(|| bad("measured"))?),
    };
    if cfg.bidirectional && reverse.is_none() {
        return Err(bad("measured (the reverse direction)"));
    }
    Ok(PerfReport {
        config: cfg.clone(),
        target: server.to_string(),
        protocol_version: c.session().version,
        timestamp,
        local,
        reverse,
        received: match &result["received"] {
            Value::Null => None,
            r => Some((
                r["messages"].as_u64().ok_or_else(|| bad("received"))?,
                r["bytes"].as_u64().ok_or_else(|| bad("received"))?,
            )),
        },
        local_daemon: d1.since(&d0),
        remote_daemon: Some(DaemonUse::from_json(&result["daemon"]).ok_or_else(|| bad("daemon"))?),
        cpu: cpu1.zip(cpu0).map(|(a, b)| a.since(&b)),
        remote_cpu: CpuUse::from_json(&result["cpu_utilization_percent"]),
    })
}

/// `uet perf --server`: listens on `bind` and serves tests, one client
/// connection (one message size) at a time, until `count` tests ran or
/// SIGINT/SIGTERM. Calls `on_event` with a JSON line per event
/// (`listening`, then `result` or `failed` per test).
pub fn perf_server(
    socket: &Path,
    bind: SocketAddr,
    count: Option<u64>,
    on_event: &mut dyn FnMut(&Value),
) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(Error::io("installing the SIGINT/SIGTERM handlers"))?;
    }
    let listener = TcpListener::bind(bind).map_err(Error::io(format!("binding {bind}")))?;
    listener
        .set_nonblocking(true)
        .map_err(Error::io("making the listener non-blocking"))?;
    let local = listener
        .local_addr()
        .map_err(Error::io("reading the listening address"))?;
    on_event(&json!({"event": "listening", "address": local.to_string()}));
    let mut served = 0;
    while !stop.load(Ordering::Relaxed) && count.is_none_or(|n| served < n) {
        let (tcp, from) = match listener.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::park_timeout(Duration::from_millis(50));
                continue;
            }
            Err(e) => return Err(Error::io("accepting a perf client")(e)),
        };
        served += 1;
        let _ = tcp.set_nonblocking(false);
        match serve_one(socket, tcp) {
            Ok(v) => on_event(&json!({"event": "result", "from": from.to_string(), "result": v})),
            Err(e) => on_event(&json!({
                "event": "failed",
                "from": from.to_string(),
                "error": chain(&e),
            })),
        }
    }
    Ok(())
}

/// One test for one client; the `result` it sent back.
fn serve_one(socket: &Path, tcp: TcpStream) -> Result<Value> {
    let mut oob = Oob::new(tcp)?;
    let hello = oob.recv("hello", OOB_GRACE)?;
    let setup = (|| {
        let cfg = PerfConfig::from_json(&hello["config"])?;
        cfg.check()?;
        let reverse_target = if cfg.bidirectional {
            Some(target_from_json(&hello["target"], cfg.test)?)
        } else {
            None
        };
        let mut c = connect(socket, "uet perf server")?;
        let exposed = Exposed::new(&mut c, socket, &cfg)?;
        Ok((cfg, reverse_target, c, exposed))
    })();
    let (cfg, reverse_target, mut c, exposed) = match setup {
        Ok(x) => x,
        Err(e) => {
            let _ = oob.send(&json!({"error": chain(&e)}));
            return Err(e);
        }
    };
    oob.send(&json!({"ready": exposed.to_json(cfg.region_len)}))?;
    oob.recv("start", OOB_GRACE)?;
    let cpu0 = CpuTimes::of(None);
    let d0 = DaemonSnap::take(&mut c)?;
    let measured = match reverse_target {
        Some(t) => {
            let stop = AtomicBool::new(false);
            Some(run_ops(&mut c, t, &cfg, &stop, &mut |_| {})?)
        }
        None => None,
    };
    let done = oob.recv("done", cfg.patience())?;
    let received = exposed.finish(done["messages"].as_u64().unwrap_or(0))?;
    let d1 = DaemonSnap::take(&mut c)?;
    let cpu1 = CpuTimes::of(None);
    let result = json!({
        "ok": done["ok"],
        "measured": measured.as_ref().map(Measured::to_json),
        "received": received.map(|(m, b)| json!({"messages": m, "bytes": b})),
        "daemon": d1.since(&d0).to_json(),
        "cpu_utilization_percent": cpu1.zip(cpu0).map(|(a, b)| a.since(&b).to_json()),
    });
    oob.send(&json!({"result": result}))?;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_is_perftests_2_bytes_to_8_mib() {
        let s = all_sizes();
        assert_eq!(s.len(), 23);
        assert_eq!((s[0], s[22]), (2, 8 << 20));
        assert!(s.windows(2).all(|w| w[1] == 2 * w[0]));
    }

    #[test]
    fn latency_columns_of_a_known_population() {
        let mut r = LatencyRecorder::default();
        // 1..=1000 µs, shuffled: order does not matter.
        for i in (1..=1000u64).rev() {
            r.record(i * 1000);
        }
        let s = r.stats();
        assert_eq!(s.count, 1000);
        assert_eq!((s.t_min, s.t_max), (1.0, 1000.0));
        assert!((s.t_avg - 500.5).abs() < 1e-9, "{s:?}");
        // Population stdev of 1..=n: sqrt((n² − 1) / 12).
        let sd = ((1000.0f64 * 1000.0 - 1.0) / 12.0).sqrt();
        assert!((s.t_stdev - sd).abs() < 1e-6, "{s:?}");
        // Three significant figures.
        let near = |a: f64, b: f64| (a - b).abs() <= b * 1e-3 + 1e-9;
        assert!(near(s.t_typical, 500.0), "{s:?}");
        assert!(near(s.p99, 990.0), "{s:?}");
        assert!(near(s.p999, 999.0), "{s:?}");
        assert!(s.t_min <= s.t_typical && s.t_typical <= s.p99);
        assert!(s.p99 <= s.p999 && s.p999 <= s.t_max);
    }

    #[test]
    fn outliers_move_the_tail_and_not_the_median() {
        let mut r = LatencyRecorder::default();
        for _ in 0..998 {
            r.record(10_000);
        }
        // The slowest 0.2 %: above the 99.9th percentile's rank.
        r.record(5_000_000);
        r.record(5_000_000);
        let s = r.stats();
        assert_eq!((s.t_min, s.t_typical, s.p99), (10.0, 10.0, 10.0));
        assert_eq!(s.t_max, 5000.0);
        assert!(s.p999 >= 4990.0, "{s:?}");
        assert!((s.t_avg - (998.0 * 10.0 + 2.0 * 5000.0) / 1000.0).abs() < 1e-9);
        assert!(s.t_stdev > 100.0, "{s:?}");
    }

    #[test]
    fn nothing_recorded_is_all_zero() {
        assert_eq!(LatencyRecorder::default().stats(), LatencyStats::default());
    }

    #[test]
    fn a_steady_stream_peaks_at_its_average_and_a_burst_above_it() {
        let ms = Duration::from_millis;
        let mut m = PeakMeter::default();
        // 1000 bytes every ms for 100 ms.
        for i in 1..=100 {
            m.record(ms(i) - Duration::from_micros(1), 1000);
        }
        let avg = 100_000.0 / 0.1;
        let p = m.peak(ms(100));
        assert!((p - avg).abs() / avg < 1e-6, "{p} vs {avg}");

        // Nothing for 90 ms, then 100 000 bytes within the last window.
        let mut m = PeakMeter::default();
        m.record(ms(95), 100_000);
        let p = m.peak(ms(100));
        assert!((p - 100_000.0 / 0.01).abs() < 1e-3, "{p}");
        assert!(p >= 100_000.0 / 0.1);
    }

    #[test]
    fn a_sliver_of_a_last_window_does_not_make_a_peak() {
        let ms = Duration::from_millis;
        let mut m = PeakMeter::default();
        for i in 0..20 {
            m.record(ms(i) + Duration::from_micros(500), 1000);
        }
        // 10 completions' worth lands 0.1 ms into the third window.
        m.record(ms(20) + Duration::from_micros(50), 10_000);
        let total = ms(20) + Duration::from_micros(100);
        let p = m.peak(total);
        let avg = 30_000.0 / total.as_secs_f64();
        assert!(p >= avg, "{p} < {avg}");
        assert!(p < 2.0 * avg, "{p}: the sliver was taken as a rate");
    }

    #[test]
    fn units_are_perftests_mib_and_gbits() {
        assert_eq!(Units::MiBps.of(f64::from(1u32 << 20)), 1.0);
        assert_eq!(Units::Gbps.of(125_000_000.0), 1.0);
    }

    #[test]
    fn stat_times_survive_a_command_name_with_parentheses() {
        let line = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 17 5 0 0 20 0 3 0";
        assert_eq!(parse_stat_times(line), Some((17, 5)));
        assert_eq!(parse_stat_times("garbage"), None);
    }

    fn report() -> PerfReport {
        let m = |n: u64| Measured {
            size: 4096,
            messages: n,
            bytes: n * 4096,
            seconds: 2.0,
            peak_bytes_per_second: n as f64 * 4096.0,
            latency: LatencyStats {
                count: n,
                t_min: 1.0,
                t_max: 9.0,
                t_typical: 2.0,
                t_avg: 2.5,
                t_stdev: 0.5,
                p99: 8.0,
                p999: 9.0,
            },
            intervals: vec![
                IntervalSum {
                    start: 0.0,
                    end: 1.0,
                    bytes: n / 2 * 4096,
                    messages: n / 2,
                },
                IntervalSum {
                    start: 1.0,
                    end: 2.0,
                    bytes: n / 2 * 4096,
                    messages: n / 2,
                },
            ],
        };
        PerfReport {
            config: PerfConfig {
                size: 4096,
                bidirectional: true,
                interval: Some(Duration::from_secs(1)),
                ..PerfConfig::default()
            },
            target: "10.0.0.1:18515".into(),
            protocol_version: 2,
            timestamp: 1,
            local: m(1000),
            reverse: Some(m(600)),
            received: None,
            local_daemon: DaemonUse {
                retransmits: 3,
                rtos: 1,
                cpu: Some(CpuUse {
                    total: 50.0,
                    user: 20.0,
                    system: 30.0,
                }),
            },
            remote_daemon: Some(DaemonUse::default()),
            cpu: None,
            remote_cpu: None,
        }
    }

    #[test]
    fn the_json_has_iperf3s_start_intervals_and_end() {
        let r = report();
        let v = r.to_json();
        assert_eq!(v["start"]["test_start"]["test"], "write");
        assert_eq!(v["start"]["test_start"]["size"], 4096);
        assert!(v["start"]["version"].as_str().unwrap().starts_with("uet "));
        assert!(v["start"]["timestamp"]["timesecs"].is_u64());
        let iv = v["intervals"].as_array().unwrap();
        assert_eq!(iv.len(), 2);
        assert_eq!(iv[1]["sum"]["start"], 1.0);
        assert_eq!(iv[1]["sum"]["bits_per_second"], 500.0 * 4096.0 * 8.0);
        assert_eq!(iv[0]["sum_bidir_reverse"]["messages"], 300);
        let end = &v["end"];
        assert_eq!(end["sum"]["bytes"], 1000 * 4096);
        assert_eq!(end["sum"]["messages"], 1000);
        assert_eq!(end["sum"]["bits_per_second"], 1000.0 * 4096.0 * 8.0 / 2.0);
        assert_eq!(end["sum_bidir_reverse"]["messages"], 600);
        assert_eq!(end["latency_us"]["t_typical"], 2.0);
        assert_eq!(end["retransmits"], 3);
        assert_eq!(end["daemons"]["local"]["rtos"], 1);
        assert_eq!(
            end["daemons"]["local"]["cpu_utilization_percent"]["system"],
            30.0
        );
        assert_eq!(end["daemons"]["remote"]["retransmits"], 0);
        assert!(end["cpu_utilization_percent"]["host_total"].is_null());
        // What the server sends back reads back the same.
        let m = r.reverse.clone().unwrap();
        assert_eq!(Measured::from_json(&m.to_json()), Some(m));
        assert_eq!(
            PerfConfig::from_json(&r.config.to_json()).unwrap(),
            r.config
        );
    }

    #[test]
    fn the_tables_sum_both_directions_as_perftest_does() {
        let r = report();
        let row = bw_row(&r, Units::Gbps);
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[0], "4096");
        assert_eq!(cols[1], "1600");
        let avg: f64 = cols[3].parse().unwrap();
        assert!(
            (avg - 1600.0 * 4096.0 * 8.0 / 2.0 / 1e9).abs() < 0.01,
            "{row}"
        );
        assert_eq!(bw_header(Units::MiBps).split_whitespace().count(), 7);
        let row = lat_row(&r);
        let lat: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            lat,
            [
                "4096", "1000", "1.00", "9.00", "2.00", "2.50", "0.50", "8.00", "9.00"
            ]
        );
    }

    #[test]
    fn bad_settings_are_refused_before_connecting() {
        let sock = Path::new("/nonexistent/uetd.sock");
        let to: RemoteRegion = "uet://10.0.0.1/1/2/1/0/0x5eed".parse().unwrap();
        let mut quiet = |_: &IntervalSum| {};
        for cfg in [
            PerfConfig {
                size: 0,
                ..PerfConfig::default()
            },
            PerfConfig {
                size: 1 << 20,
                region_len: 1 << 10,
                ..PerfConfig::default()
            },
            PerfConfig {
                depth: 0,
                ..PerfConfig::default()
            },
            PerfConfig {
                test: Test::Send,
                ..PerfConfig::default()
            },
            PerfConfig {
                bidirectional: true,
                ..PerfConfig::default()
            },
        ] {
            let e = perf_region(sock, &to, &cfg, &mut quiet).unwrap_err();
            assert!(matches!(e, Error::Invalid(_)), "{cfg:?}: {e:?}");
        }
    }
}
