//! `uet lab bench`: the datapath table from one command. Two hosts on one
//! veth pair ([`LabConfig::direct`]), for every MTU asked, `repeats`
//! interleaved repeats of every row (each repeat goes through every MTU
//! before the next starts), medians beside all runs:
//!
//! - the raw AF_XDP ceiling ([`crate::ceiling`]), UDP payload Gb/s and
//!   Mpps, and the machine's CPU per GB over it;
//! - kernel TCP (one stream, offloads on) and kernel UDP (MTU-sized
//!   datagrams, receiver goodput), both by iperf3;
//! - a verified RMA write through uetd, xdp and udp backends: Gb/s, both
//!   daemons' retransmits and RTOs, machine CPU per GB over the transfer;
//! - `uet perf` 64 KiB × depth 16 and 4 KiB × depth 64 (Gb/s, resends);
//! - 64 B write latency at depth 1 through the daemons beside a kernel UDP
//!   round trip measured in the same run (sockperf, or
//!   [`uet_tools::blast::udp::ping_pong`]);
//! - the ratios between them, from the medians.
//!
//! A row that cannot run (a tool missing, an MTU a datapath refuses) says
//! why and the run goes on. Machine CPU is every CPU's busy time from
//! `/proc/stat` ([`crate::cpu`]): other load on the machine counts too, so
//! the report carries `/proc/loadavg` before and after.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Error, Result, require};
use crate::{Lab, LabConfig, WriteOpts, sum_pds};
use uet_tools::client;
use uet_tools::perf::{self as uet_perf, PerfConfig};
use uetd::config::Backend;

/// Where the kernel UDP round trip comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RttTool {
    /// sockperf ping-pong if it is installed, else the built-in one.
    #[default]
    Auto,
    /// `sockperf ping-pong --full-rtt`.
    Sockperf,
    /// [`uet_tools::blast::udp::ping_pong`].
    Builtin,
}

/// What `uet lab bench` measures.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchOpts {
    /// IP MTUs of the veth pair, one column each.
    pub mtus: Vec<u32>,
    /// Interleaved repeats of every row.
    pub repeats: usize,
    /// Bytes of each RMA write (and of the target's region).
    pub bytes: u64,
    /// How long each timed row runs (ceilings, `uet perf`, latency; iperf3
    /// and sockperf run whole seconds, at least one).
    pub seconds: Duration,
    /// The daemons' congestion control.
    pub cc: String,
    /// More `uetd` arguments for every daemon.
    pub daemon_args: Vec<String>,
    /// The kernel UDP round trip's tool.
    pub rtt_tool: RttTool,
}

impl Default for BenchOpts {
    fn default() -> Self {
        Self {
            mtus: vec![1500, 3498, 9000],
            repeats: 3,
            bytes: 1 << 30,
            seconds: Duration::from_secs(2),
            cc: "none".into(),
            daemon_args: Vec::new(),
            rtt_tool: RttTool::Auto,
        }
    }
}

/// One row of one run: its numbers, or why there are none.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row<T> {
    /// The numbers, when the row ran.
    pub value: Option<T>,
    /// Why it did not.
    pub error: Option<String>,
}

impl<T> Row<T> {
    fn from(r: Result<T>) -> Self {
        match r {
            Ok(v) => Self {
                value: Some(v),
                error: None,
            },
            Err(e) => Self::failed(&e.chain()),
        }
    }

    fn failed(why: &str) -> Self {
        Self {
            value: None,
            error: Some(why.to_owned()),
        }
    }
}

/// The raw AF_XDP ceiling.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RawRow {
    /// Ethernet frame bytes (MTU + 14).
    pub frame_len: usize,
    /// Frames the sink received per second, millions.
    pub mpps: f64,
    /// Their UDP payload, Gb/s.
    pub payload_gbps: f64,
    /// The machine's busy CPUs over the window.
    pub busy_cpus: f64,
    /// Machine CPU-seconds per GB of UDP payload.
    pub cpu_s_per_gb: f64,
}

/// A kernel throughput by iperf3.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelRow {
    /// Receiver goodput, Gb/s.
    pub gbps: f64,
    /// Seconds it ran.
    pub seconds: f64,
    /// UDP datagram size (`None`: TCP).
    pub datagram: Option<usize>,
}

/// A verified RMA write through uetd.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WriteRow {
    /// Bytes written.
    pub bytes: u64,
    /// Seconds (first submit to last completion).
    pub seconds: f64,
    /// Goodput, Gb/s.
    pub gbps: f64,
    /// The writer's and the target's xxh3 agreed.
    pub verified: bool,
    /// The writer's hash.
    pub xxh3: String,
    /// Data packets the writer sent.
    pub tx_data: u64,
    /// The writer daemon's retransmits.
    pub writer_retransmits: u64,
    /// Its retransmission timeouts.
    pub writer_rtos: u64,
    /// The target daemon's retransmits.
    pub target_retransmits: u64,
    /// Its retransmission timeouts.
    pub target_rtos: u64,
    /// Machine CPU-seconds over the transfer.
    pub cpu_seconds: f64,
    /// Machine CPU-seconds per GB written.
    pub cpu_s_per_gb: f64,
}

/// `uet perf` through the daemons.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerfRow {
    /// What `uet perf` reported (the fields the demo shows too).
    #[serde(flatten)]
    pub perf: crate::demo::PerfSummary,
    /// Data packets the writer's daemon sent.
    pub tx_data: u64,
    /// Of them resent (retransmits).
    pub resends: u64,
    /// The writer's retransmission timeouts.
    pub rtos: u64,
}

/// A kernel UDP round trip.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RttRow {
    /// "sockperf" or "builtin".
    pub tool: String,
    /// Datagram size, bytes.
    pub size: usize,
    /// Round trips measured.
    pub samples: u64,
    /// Round-trip time p50, µs.
    pub p50_us: f64,
    /// p99, µs.
    pub p99_us: f64,
}

/// Every row of one repeat at one MTU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    /// Which repeat (0-based).
    pub repeat: usize,
    /// IP MTU.
    pub mtu: u32,
    /// Raw AF_XDP ceiling.
    pub raw: Row<RawRow>,
    /// Kernel TCP, one stream, offloads on.
    pub kernel_tcp: Row<KernelRow>,
    /// Kernel UDP, MTU-sized datagrams.
    pub kernel_udp: Row<KernelRow>,
    /// RMA write, xdp backend on both daemons.
    pub write_xdp: Row<WriteRow>,
    /// RMA write, udp backend on both daemons.
    pub write_udp: Row<WriteRow>,
    /// `uet perf` 64 KiB × depth 16.
    pub perf_64k: Row<PerfRow>,
    /// `uet perf` 4 KiB × depth 64.
    pub perf_4k: Row<PerfRow>,
    /// 64 B writes at depth 1 (`uet perf`), for latency.
    pub latency_64b: Row<PerfRow>,
    /// Kernel UDP round trip, 64 B.
    pub udp_rtt: Row<RttRow>,
    /// The share of the machine's CPU time the hypervisor took over the
    /// whole repeat (steal, 0..=1; 0 on bare metal), if `/proc/stat` was
    /// readable: on a virtual machine whose host is busy, every row of
    /// the repeat ran on less CPU than it thought it had.
    pub steal: Option<f64>,
}

impl Run {
    fn new(repeat: usize, mtu: u32) -> Self {
        const N: &str = "not run";
        Self {
            repeat,
            mtu,
            raw: Row::failed(N),
            kernel_tcp: Row::failed(N),
            kernel_udp: Row::failed(N),
            write_xdp: Row::failed(N),
            write_udp: Row::failed(N),
            perf_64k: Row::failed(N),
            perf_4k: Row::failed(N),
            latency_64b: Row::failed(N),
            udp_rtt: Row::failed(N),
            steal: None,
        }
    }
}

/// Medians over the runs of one MTU that have the row (`None`: none has).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Medians {
    /// Raw AF_XDP, UDP payload Gb/s.
    pub raw_gbps: Option<f64>,
    /// Raw AF_XDP, Mpps.
    pub raw_mpps: Option<f64>,
    /// Raw AF_XDP, machine CPU-s per GB.
    pub raw_cpu_s_per_gb: Option<f64>,
    /// Kernel TCP Gb/s.
    pub tcp_gbps: Option<f64>,
    /// Kernel UDP Gb/s.
    pub udp_gbps: Option<f64>,
    /// xdp write Gb/s.
    pub write_xdp_gbps: Option<f64>,
    /// xdp write, machine CPU-s per GB.
    pub write_xdp_cpu_s_per_gb: Option<f64>,
    /// udp-backend write Gb/s.
    pub write_udp_gbps: Option<f64>,
    /// udp-backend write, machine CPU-s per GB.
    pub write_udp_cpu_s_per_gb: Option<f64>,
    /// `uet perf` 64 KiB × 16, Gb/s.
    pub perf_64k_gbps: Option<f64>,
    /// `uet perf` 4 KiB × 64, Gb/s.
    pub perf_4k_gbps: Option<f64>,
    /// 64 B write latency p50 at depth 1, µs.
    pub latency_p50_us: Option<f64>,
    /// Its p99, µs.
    pub latency_p99_us: Option<f64>,
    /// Kernel UDP round trip p50, µs.
    pub udp_rtt_p50_us: Option<f64>,
    /// Its p99, µs.
    pub udp_rtt_p99_us: Option<f64>,
}

/// Ratios of the medians.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Ratios {
    /// xdp write ÷ raw AF_XDP.
    pub write_over_raw: Option<f64>,
    /// xdp write ÷ kernel TCP.
    pub write_over_tcp: Option<f64>,
    /// xdp write ÷ kernel UDP.
    pub write_over_udp: Option<f64>,
    /// Machine CPU per GB, xdp write ÷ raw AF_XDP.
    pub cpu_per_gb_write_over_raw: Option<f64>,
    /// 64 B write p50 ÷ kernel UDP round-trip p50.
    pub latency_over_udp_rtt: Option<f64>,
    /// `uet perf` 64 KiB × 16 ÷ raw.
    pub perf_64k_over_raw: Option<f64>,
    /// `uet perf` 4 KiB × 64 ÷ raw.
    pub perf_4k_over_raw: Option<f64>,
    /// udp-backend write ÷ kernel UDP.
    pub write_udp_over_udp: Option<f64>,
    /// udp-backend write ÷ kernel TCP.
    pub write_udp_over_tcp: Option<f64>,
}

/// One ratio taken within each repeat (both sides measured in the same
/// repeat, a minute or less apart), and its median over the repeats.
///
/// The VM this runs on changes speed over minutes (the raw ceiling moved
/// 2.4–7.7 Gb/s at MTU 1500 between invocations): a ratio of two medians
/// can pair a fast repeat's numerator with a slow repeat's denominator,
/// while each repeat's own ratio moves both sides together.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Paired {
    /// The median of the repeats' ratios (`None`: no repeat has both sides).
    pub median: Option<f64>,
    /// Each repeat's ratio, in repeat order (`None`: a side is missing).
    pub runs: Vec<Option<f64>>,
}

impl Paired {
    fn of<'a>(runs: impl Iterator<Item = &'a Run>, f: impl Fn(&Run) -> Option<f64>) -> Self {
        let runs: Vec<Option<f64>> = runs.map(f).collect();
        Self {
            median: median(runs.iter().flatten().copied().collect()),
            runs,
        }
    }
}

/// The ratios the targets are stated in, each repeat's own ([`Paired`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PairedRatios {
    /// xdp write ÷ raw AF_XDP.
    pub write_over_raw: Paired,
    /// Machine CPU per GB, xdp write ÷ raw AF_XDP.
    pub cpu_per_gb_write_over_raw: Paired,
    /// xdp write ÷ kernel TCP.
    pub write_over_tcp: Paired,
    /// udp-backend write ÷ kernel TCP.
    pub write_udp_over_tcp: Paired,
    /// 64 B write p50 ÷ kernel UDP round-trip p50.
    pub latency_over_udp_rtt: Paired,
}

/// One MTU's medians and ratios.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MtuSummary {
    /// IP MTU.
    pub mtu: u32,
    /// Medians over the runs.
    pub medians: Medians,
    /// Ratios of the medians.
    pub ratios: Ratios,
    /// Each repeat's own ratios.
    pub paired: PairedRatios,
}

/// Everything `uet lab bench` measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchReport {
    /// `git describe` of the source tree, else the crate version.
    pub build: String,
    /// When it started (UTC, RFC 3339).
    pub date: String,
    /// `/proc/loadavg` before the first row.
    pub loadavg_before: String,
    /// And after the last.
    pub loadavg_after: String,
    /// MTUs, in column order.
    pub mtus: Vec<u32>,
    /// Repeats.
    pub repeats: usize,
    /// Bytes per write.
    pub bytes: u64,
    /// Seconds per timed row.
    pub seconds: f64,
    /// The daemons' congestion control.
    pub cc: String,
    /// The daemons' extra arguments.
    pub daemon_args: Vec<String>,
    /// Every run, in the order they ran.
    pub runs: Vec<Run>,
    /// Per MTU, in `mtus` order.
    pub summaries: Vec<MtuSummary>,
}

/// Runs the benchmark; `progress` hears what starts (the CLI prints it).
pub fn run(opts: &BenchOpts, mut progress: impl FnMut(&str)) -> Result<BenchReport> {
    const WHAT: &str = "bench options";
    require(!opts.mtus.is_empty(), WHAT, || "no MTU given".into())?;
    require(opts.repeats > 0, WHAT, || "repeats must be positive".into())?;
    require(opts.bytes > 0, WHAT, || "bytes must be positive".into())?;
    require(!opts.seconds.is_zero(), WHAT, || {
        "seconds must be positive".into()
    })?;
    let loadavg_before = loadavg();
    let date = utc_now();
    let mut runs = Vec::new();
    for repeat in 0..opts.repeats {
        for &mtu in &opts.mtus {
            progress(&format!(
                "repeat {} of {}, MTU {mtu}",
                repeat + 1,
                opts.repeats
            ));
            runs.push(run_once(opts, repeat, mtu, &mut progress));
        }
    }
    let summaries = opts
        .mtus
        .iter()
        .map(|&mtu| summarise(mtu, runs.iter().filter(|r| r.mtu == mtu)))
        .collect();
    Ok(BenchReport {
        build: build(),
        date,
        loadavg_before,
        loadavg_after: loadavg(),
        mtus: opts.mtus.clone(),
        repeats: opts.repeats,
        bytes: opts.bytes,
        seconds: opts.seconds.as_secs_f64(),
        cc: opts.cc.clone(),
        daemon_args: opts.daemon_args.clone(),
        runs,
        summaries,
    })
}

/// The lab of one backend, its daemons with their defaults (the udp
/// backend sprays runs of one GSO send's worth per EV, `ev_burst`) and the
/// caller's arguments.
fn lab_config(opts: &BenchOpts, mtu: u32, backend: Backend) -> LabConfig {
    LabConfig {
        hosts: 2,
        direct: true,
        mtu,
        backend,
        cc: opts.cc.clone(),
        region_bytes: opts.bytes.max(64 << 10),
        sender_daemons: true,
        daemon_args: opts.daemon_args.clone(),
        ..LabConfig::default()
    }
}

/// Every row of one repeat at one MTU, on two labs in turn: the udp
/// backend's (its write, then with the daemons stopped the ceilings and
/// kernel rows on the same veth pair), then the xdp backend's.
fn run_once(opts: &BenchOpts, repeat: usize, mtu: u32, progress: &mut dyn FnMut(&str)) -> Run {
    let mut run = Run::new(repeat, mtu);
    let cpu = crate::cpu::CpuSample::now().ok();
    match Lab::up(lab_config(opts, mtu, Backend::Udp)) {
        Err(e) => {
            let why = format!("building the udp-backend lab: {}", e.chain());
            run.write_udp = Row::failed(&why);
            run.raw = Row::failed(&why);
            run.kernel_tcp = Row::failed(&why);
            run.kernel_udp = Row::failed(&why);
            run.udp_rtt = Row::failed(&why);
        }
        Ok(mut lab) => {
            progress("  write, udp backend");
            run.write_udp = Row::from(write(&mut lab, opts.bytes));
            let stopped = lab.stop_daemon(0).and_then(|()| lab.stop_daemon(1));
            progress("  raw AF_XDP ceiling");
            run.raw = Row::from(stopped.and_then(|()| raw(&lab, mtu, opts.seconds)));
            // Kernel rows with the offloads a kernel application has (the
            // lab turns TX checksum offload off for AF_XDP's sake; TSO
            // follows it).
            let offload = set_offload(&lab, true).map_err(|e| e.chain());
            let kernel = |lab: &mut Lab, udp| match &offload {
                Ok(()) => Row::from(iperf3(lab, udp, opts.seconds)),
                Err(e) => Row::failed(e),
            };
            progress("  kernel TCP (iperf3)");
            run.kernel_tcp = kernel(&mut lab, None);
            progress("  kernel UDP (iperf3)");
            run.kernel_udp = kernel(&mut lab, Some(mtu as usize - 28));
            progress("  kernel UDP round trip");
            run.udp_rtt = Row::from(udp_rtt(&mut lab, opts.rtt_tool, opts.seconds));
        }
    }
    match Lab::up(lab_config(opts, mtu, Backend::Xdp)) {
        Err(e) => {
            let why = format!("building the xdp-backend lab: {}", e.chain());
            run.write_xdp = Row::failed(&why);
            run.perf_64k = Row::failed(&why);
            run.perf_4k = Row::failed(&why);
            run.latency_64b = Row::failed(&why);
        }
        Ok(mut lab) => {
            progress("  write, xdp backend");
            run.write_xdp = Row::from(write(&mut lab, opts.bytes));
            progress("  uet perf 64 KiB x 16");
            run.perf_64k = Row::from(perf(&mut lab, 64 << 10, 16, opts.seconds));
            progress("  uet perf 4 KiB x 64");
            run.perf_4k = Row::from(perf(&mut lab, 4 << 10, 64, opts.seconds));
            progress("  64 B write latency, depth 1");
            run.latency_64b = Row::from(perf(&mut lab, 64, 1, opts.seconds));
        }
    }
    run.steal = cpu.and_then(|c| c.steal_share().ok());
    run
}

/// Host `i`'s daemon's counters.
fn stats(lab: &Lab, i: usize) -> Result<serde_json::Value> {
    let text = lab
        .client(i, "uet lab bench")?
        .stats()
        .map_err(Error::client(format!("reading host {i}'s counters")))?;
    serde_json::from_str(&text).map_err(Error::json(format!("parsing host {i}'s counters")))
}

fn delta(before: &serde_json::Value, after: &serde_json::Value, k: &str) -> u64 {
    sum_pds(after, k).saturating_sub(sum_pds(before, k))
}

/// `bytes` from host 1 into host 0's region, verified.
fn write(lab: &mut Lab, bytes: u64) -> Result<WriteRow> {
    let target_before = stats(lab, 0)?;
    let w = lab.write(
        1,
        0,
        &WriteOpts {
            bytes,
            timeout: Duration::from_secs(600),
            ..WriteOpts::default()
        },
    )?;
    let target_after = stats(lab, 0)?;
    if !w.verified() {
        return Err(Error::Check(format!(
            "the target's hash {} differs from the writer's {}",
            w.target_xxh3, w.xxh3
        )));
    }
    let cpu_seconds = w.machine_cpu_seconds.ok_or_else(|| Error::Output {
        what: "no machine CPU time over the write (/proc/stat unreadable)".into(),
        source: None,
    })?;
    Ok(WriteRow {
        bytes: w.bytes,
        seconds: w.seconds,
        gbps: w.gbps,
        verified: true,
        xxh3: w.xxh3,
        tx_data: w.tx_data,
        writer_retransmits: w.retransmits,
        writer_rtos: w.rtos,
        target_retransmits: delta(&target_before, &target_after, "tx_retransmits"),
        target_rtos: delta(&target_before, &target_after, "rtos"),
        cpu_seconds,
        cpu_s_per_gb: cpu_seconds / (w.bytes as f64 / 1e9),
    })
}

/// `uet perf` from host 1 into host 0's region.
fn perf(lab: &mut Lab, size: u32, depth: usize, time: Duration) -> Result<PerfRow> {
    let to = lab.region(0)?;
    let region = lab.state().config.region_bytes;
    let before = stats(lab, 1)?;
    let r = uet_perf::perf_region(
        &lab.socket(1),
        &to,
        &PerfConfig {
            size,
            iters: None,
            duration: time,
            depth,
            // Through the shared-memory ring, waiting as `uet perf` does
            // by default.
            ring: true,
            ring_spin: client::DEFAULT_RING_SPIN,
            region_len: region,
            ..PerfConfig::default()
        },
        &mut |_| {},
    )
    .map_err(|source| Error::Tool {
        what: format!("uet perf {size} B x depth {depth}"),
        source,
    })?;
    let after = stats(lab, 1)?;
    require(r.local.messages > 0, "uet perf", || {
        format!("no {size} B write completed in {:.2} s", r.local.seconds)
    })?;
    Ok(PerfRow {
        perf: crate::demo::PerfSummary::new(&r, depth),
        tx_data: delta(&before, &after, "tx_data"),
        resends: delta(&before, &after, "tx_retransmits"),
        rtos: delta(&before, &after, "rtos"),
    })
}

/// Raw AF_XDP frames from host 1 to host 0, at the size of uetd's largest
/// data frame: MTU-sized, but never more than a 4 KiB SES payload behind
/// uetd's headers (`uetd::daemon::MAX_SES_LEN`), so above MTU 4,200 the
/// ceiling is measured with the same multi-buffer chains uetd sends.
fn raw(lab: &Lab, mtu: u32, time: Duration) -> Result<RawRow> {
    let cfg = |ifname: &str| uetd::xsk::XskConfig {
        ifname: ifname.into(),
        frame_count: 8192,
        fill_size: 4096,
        // The ceiling: every chunk on its own, as a raw AF_XDP program runs.
        contiguous_chains: false,
        ..uetd::xsk::XskConfig::default()
    };
    let frame_len = uetd::daemon::max_data_frame_len(mtu as usize);
    let (_tx, rx, busy) = crate::ceiling::veth_ceiling_cpu(
        lab.host(1),
        cfg("eth0"),
        IpAddr::V4(lab.ip(1)),
        lab.host(0),
        cfg("eth0"),
        IpAddr::V4(lab.ip(0)),
        frame_len,
        time,
    )?;
    require(rx.packets > 0, "raw AF_XDP ceiling", || {
        "the sink received no frame".into()
    })?;
    let busy_cpus = busy.ok_or_else(|| Error::Output {
        what: "no machine CPU time over the ceiling (/proc/stat unreadable)".into(),
        source: None,
    })?;
    let payload_gbps = rx.gbps() * (frame_len - 42) as f64 / frame_len as f64;
    Ok(RawRow {
        frame_len,
        mpps: rx.pps() / 1e6,
        payload_gbps,
        busy_cpus,
        cpu_s_per_gb: busy_cpus / (payload_gbps / 8.0),
    })
}

fn set_offload(lab: &Lab, on: bool) -> Result<()> {
    for i in 0..2 {
        lab.host(i)
            .run(move || uetd::xsk::set_tx_checksum_offload("eth0", on))?
            .map_err(Error::io(format!(
                "turning TX checksum offload {} on eth0 of host {i}",
                if on { "on" } else { "off" }
            )))?;
    }
    Ok(())
}

/// Whether `program` is an executable on `PATH`.
fn installed(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            let f = d.join(program);
            std::fs::metadata(&f).is_ok_and(|m| {
                use std::os::unix::fs::PermissionsExt as _;
                m.is_file() && m.permissions().mode() & 0o111 != 0
            })
        })
    })
}

/// Kills and reaps a server this module started, when it goes out of
/// scope (also on an early error).
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `program args…` in host `i` and waits (bounded) until something
/// listens on `proto` (`t` or `u`) port `port` there.
fn server(
    lab: &mut Lab,
    i: usize,
    program: &str,
    args: &[&str],
    proto: char,
    port: u16,
) -> Result<Server> {
    let mut cmd = lab.host(i).command(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut s = Server(lab.spawn_tracked(&mut cmd)?);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut pause = Duration::from_micros(500);
    loop {
        let out = crate::netns::run(lab.host(i).command("ss").args([
            &format!("-Hln{proto}"),
            "sport",
            "=",
            &format!(":{port}"),
        ]))?;
        if !out.stdout.iter().all(u8::is_ascii_whitespace) {
            return Ok(s);
        }
        if let Ok(Some(status)) = s.0.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = s.0.stderr.take() {
                use std::io::Read as _;
                let _ = e.read_to_string(&mut err);
            }
            return Err(Error::Output {
                what: format!("{program} in host {i} exited ({status}): {}", err.trim()),
                source: None,
            });
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                awaiting: format!("{program} to listen on port {port} in host {i}"),
                state: "nothing listened within 10 s".into(),
            });
        }
        std::thread::park_timeout(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Whole seconds, at least one, for tools that take no fractions.
fn whole_seconds(time: Duration) -> String {
    time.as_secs_f64().ceil().max(1.0).to_string()
}

/// iperf3 from host 1 to host 0: one TCP stream (`udp` None, the
/// kernel's autotuned buffers) or UDP datagrams of `udp` bytes at full
/// speed (4 MiB socket buffers); the receiver's goodput.
fn iperf3(lab: &mut Lab, udp: Option<usize>, time: Duration) -> Result<KernelRow> {
    if !installed("iperf3") {
        return Err(Error::Check(
            "iperf3 not installed (apt-get install iperf3)".into(),
        ));
    }
    const PORT: &str = "5201";
    let ip0 = lab.ip(0).to_string();
    let _srv = server(
        lab,
        0,
        "iperf3",
        &["-s", "-1", "-B", &ip0, "-p", PORT],
        't',
        5201,
    )?;
    let t = whole_seconds(time);
    let mut cmd = lab.host(1).command("iperf3");
    cmd.args(["-c", &ip0, "-p", PORT, "-t", &t, "-J"]);
    let len = udp.map(|n| n.to_string());
    if let Some(len) = &len {
        // 4 MiB socket buffers, as uetd's udp backend and our blasters
        // take: with the default ones the receiver drops most of what a
        // full-speed sender offers and the row measures its buffer.
        cmd.args(["-u", "-b", "0", "-l", len, "-w", "4M"]);
    }
    let out = cmd
        .output()
        .map_err(Error::io("running iperf3 in host 1"))?;
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(Error::json("parsing iperf3's JSON output"))?;
    if let Some(e) = v["error"].as_str() {
        return Err(Error::Output {
            what: format!("iperf3: {e}"),
            source: None,
        });
    }
    let sum = &v["end"]["sum_received"];
    let gbps = sum["bits_per_second"].as_f64().unwrap_or(0.0) / 1e9;
    require(gbps > 0.0, "iperf3", || {
        format!("no goodput in its report: {}", v["end"])
    })?;
    Ok(KernelRow {
        gbps,
        seconds: sum["seconds"].as_f64().unwrap_or(0.0),
        datagram: udp,
    })
}

/// A 64 B kernel UDP round trip from host 1 to host 0.
fn udp_rtt(lab: &mut Lab, tool: RttTool, time: Duration) -> Result<RttRow> {
    const SIZE: usize = 64;
    let sockperf = match tool {
        RttTool::Auto => installed("sockperf"),
        RttTool::Sockperf => true,
        RttTool::Builtin => false,
    };
    if sockperf {
        sockperf_rtt(lab, SIZE, time)
    } else {
        builtin_rtt(lab, SIZE, time)
    }
}

fn sockperf_rtt(lab: &mut Lab, size: usize, time: Duration) -> Result<RttRow> {
    if !installed("sockperf") {
        return Err(Error::Check(
            "sockperf not installed (apt-get install sockperf)".into(),
        ));
    }
    let ip0 = lab.ip(0).to_string();
    let _srv = server(
        lab,
        0,
        "sockperf",
        &["server", "-i", &ip0, "-p", "11111"],
        'u',
        11111,
    )?;
    let out = crate::netns::run(lab.host(1).command("sockperf").args([
        "ping-pong",
        "-i",
        &ip0,
        "-p",
        "11111",
        "-m",
        &size.to_string(),
        "-t",
        &whole_seconds(time),
        "--full-rtt",
    ]))?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_sockperf(&text, size)
}

/// sockperf's `---> percentile 50.000 = 18.442` lines (µs, full round
/// trip with `--full-rtt`) and its `Total N observations`.
fn parse_sockperf(text: &str, size: usize) -> Result<RttRow> {
    let value = |key: &str| {
        text.lines().find_map(|l| {
            let (_, rest) = l.split_once(key)?;
            rest.trim_start_matches([' ', '='])
                .split_whitespace()
                .next()?
                .parse::<f64>()
                .ok()
        })
    };
    let samples = text.lines().find_map(|l| {
        let (_, rest) = l.split_once("Total ")?;
        rest.split_whitespace().next()?.parse::<u64>().ok()
    });
    match (
        value("percentile 50.000"),
        value("percentile 99.000"),
        samples,
    ) {
        (Some(p50), Some(p99), Some(samples)) if samples > 0 => Ok(RttRow {
            tool: "sockperf".into(),
            size,
            samples,
            p50_us: p50,
            p99_us: p99,
        }),
        _ => Err(Error::Output {
            what: format!("no percentiles in sockperf's output: {}", text.trim()),
            source: None,
        }),
    }
}

fn builtin_rtt(lab: &Lab, size: usize, time: Duration) -> Result<RttRow> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let bind = SocketAddr::new(IpAddr::V4(lab.ip(0)), 11111);
    let src = SocketAddr::new(IpAddr::V4(lab.ip(1)), 0);
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let echo = {
        let s = Arc::clone(&stop);
        lab.host(0).spawn(move || {
            uet_tools::blast::udp::echo(bind, &s, |_| {
                let _ = ready_tx.send(());
            })
        })?
    };
    let ping = match ready.recv_timeout(Duration::from_secs(10)) {
        Ok(()) => lab
            .host(1)
            .run(move || uet_tools::blast::udp::ping_pong(src, bind, size, time))
            .map(|r| r.map_err(Error::io("the UDP ping-pong"))),
        Err(_) => Ok(Err(Error::Timeout {
            awaiting: "the UDP echo to start".into(),
            state: "it was not ready within 10 s (or it failed)".into(),
        })),
    };
    stop.store(true, Ordering::Release);
    echo.join()
        .map_err(|_| Error::Panicked("UDP echo".into()))?
        .map_err(Error::io("entering host 0"))?
        .map_err(Error::io("the UDP echo"))?;
    let r = ping??;
    require(r.samples > 0, "UDP ping-pong", || {
        format!("no round trip completed ({} lost)", r.lost)
    })?;
    Ok(RttRow {
        tool: "builtin".into(),
        size,
        samples: r.samples,
        p50_us: r.rtt_us[0],
        p99_us: r.rtt_us[1],
    })
}

/// The median of the values (`None` when there are none).
fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        f64::midpoint(v[n / 2 - 1], v[n / 2])
    })
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn summarise<'a>(mtu: u32, runs: impl Iterator<Item = &'a Run> + Clone) -> MtuSummary {
    fn m<'a, T: 'a>(
        runs: impl Iterator<Item = &'a Run>,
        row: impl Fn(&'a Run) -> &'a Row<T>,
        f: impl Fn(&T) -> f64,
    ) -> Option<f64> {
        median(runs.filter_map(|r| row(r).value.as_ref().map(&f)).collect())
    }
    let r = || runs.clone();
    let md = Medians {
        raw_gbps: m(r(), |r| &r.raw, |v| v.payload_gbps),
        raw_mpps: m(r(), |r| &r.raw, |v| v.mpps),
        raw_cpu_s_per_gb: m(r(), |r| &r.raw, |v| v.cpu_s_per_gb),
        tcp_gbps: m(r(), |r| &r.kernel_tcp, |v| v.gbps),
        udp_gbps: m(r(), |r| &r.kernel_udp, |v| v.gbps),
        write_xdp_gbps: m(r(), |r| &r.write_xdp, |v| v.gbps),
        write_xdp_cpu_s_per_gb: m(r(), |r| &r.write_xdp, |v| v.cpu_s_per_gb),
        write_udp_gbps: m(r(), |r| &r.write_udp, |v| v.gbps),
        write_udp_cpu_s_per_gb: m(r(), |r| &r.write_udp, |v| v.cpu_s_per_gb),
        perf_64k_gbps: m(r(), |r| &r.perf_64k, |v| v.perf.gbps),
        perf_4k_gbps: m(r(), |r| &r.perf_4k, |v| v.perf.gbps),
        latency_p50_us: m(r(), |r| &r.latency_64b, |v| v.perf.p50_us),
        latency_p99_us: m(r(), |r| &r.latency_64b, |v| v.perf.p99_us),
        udp_rtt_p50_us: m(r(), |r| &r.udp_rtt, |v| v.p50_us),
        udp_rtt_p99_us: m(r(), |r| &r.udp_rtt, |v| v.p99_us),
    };
    let ratios = Ratios {
        write_over_raw: ratio(md.write_xdp_gbps, md.raw_gbps),
        write_over_tcp: ratio(md.write_xdp_gbps, md.tcp_gbps),
        write_over_udp: ratio(md.write_xdp_gbps, md.udp_gbps),
        cpu_per_gb_write_over_raw: ratio(md.write_xdp_cpu_s_per_gb, md.raw_cpu_s_per_gb),
        latency_over_udp_rtt: ratio(md.latency_p50_us, md.udp_rtt_p50_us),
        perf_64k_over_raw: ratio(md.perf_64k_gbps, md.raw_gbps),
        perf_4k_over_raw: ratio(md.perf_4k_gbps, md.raw_gbps),
        write_udp_over_udp: ratio(md.write_udp_gbps, md.udp_gbps),
        write_udp_over_tcp: ratio(md.write_udp_gbps, md.tcp_gbps),
    };
    let raw = |r: &Run| {
        r.raw
            .value
            .as_ref()
            .map(|v| (v.payload_gbps, v.cpu_s_per_gb))
    };
    let xdp = |r: &Run| r.write_xdp.value.as_ref().map(|v| (v.gbps, v.cpu_s_per_gb));
    let tcp = |r: &Run| r.kernel_tcp.value.as_ref().map(|v| v.gbps);
    let paired = PairedRatios {
        write_over_raw: Paired::of(r(), |r| ratio(xdp(r).map(|v| v.0), raw(r).map(|v| v.0))),
        cpu_per_gb_write_over_raw: Paired::of(r(), |r| {
            ratio(xdp(r).map(|v| v.1), raw(r).map(|v| v.1))
        }),
        write_over_tcp: Paired::of(r(), |r| ratio(xdp(r).map(|v| v.0), tcp(r))),
        write_udp_over_tcp: Paired::of(r(), |r| {
            ratio(r.write_udp.value.as_ref().map(|v| v.gbps), tcp(r))
        }),
        latency_over_udp_rtt: Paired::of(r(), |r| {
            ratio(
                r.latency_64b.value.as_ref().map(|v| v.perf.p50_us),
                r.udp_rtt.value.as_ref().map(|v| v.p50_us),
            )
        }),
    };
    MtuSummary {
        mtu,
        medians: md,
        ratios,
        paired,
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map_or_else(|e| format!("unreadable: {e}"), |s| s.trim().to_owned())
}

/// `git describe` of the tree this crate was built from, else the crate
/// version.
fn build() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["describe", "--always", "--dirty", "--tags"])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("uet-lab {}", env!("CARGO_PKG_VERSION")))
}

/// The time now, UTC, RFC 3339.
fn utc_now() -> String {
    rfc3339(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    )
}

/// Seconds since the Unix epoch as a UTC RFC 3339 time (the civil date
/// from the day count).
fn rfc3339(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to year/month/day (proleptic Gregorian).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

impl BenchReport {
    /// The markdown table: one column per MTU, medians with every run's
    /// value in brackets, then the ratios.
    pub fn table(&self) -> String {
        let mut t = format!(
            "uet lab bench — one veth pair between two namespaces, {} repeats interleaved (median [all runs]), {} B writes, {:.1} s per timed row; build {}, {}\nload before: {}; after: {}\n\n",
            self.repeats,
            self.bytes,
            self.seconds,
            self.build,
            self.date,
            self.loadavg_before,
            self.loadavg_after
        );
        t.push_str(&self.mtu_header());
        let rows: [(&str, Cell<'_>); 11] = [
            ("raw AF_XDP, UDP payload", &|s, runs| {
                format!(
                    "{} Gb/s ({} Mpps) {}",
                    num(s.medians.raw_gbps, 2),
                    num(s.medians.raw_mpps, 2),
                    all(
                        runs,
                        |r| r.raw.value.as_ref().map(|v| v.payload_gbps),
                        |r| &r.raw.error
                    )
                )
            }),
            ("uetd xdp, RMA write (verified)", &|s, runs| {
                format!(
                    "{} Gb/s = **{}× raw** {}; retransmits/RTOs writer {} target {}",
                    num(s.medians.write_xdp_gbps, 2),
                    num(s.ratios.write_over_raw, 2),
                    all(
                        runs,
                        |r| r.write_xdp.value.as_ref().map(|v| v.gbps),
                        |r| &r.write_xdp.error
                    ),
                    counts(runs, |r| r
                        .write_xdp
                        .value
                        .as_ref()
                        .map(|v| (v.writer_retransmits, v.writer_rtos))),
                    counts(runs, |r| r
                        .write_xdp
                        .value
                        .as_ref()
                        .map(|v| (v.target_retransmits, v.target_rtos))),
                )
            }),
            ("`uet perf` 64 KiB × depth 16", &|s, runs| {
                format!(
                    "{} Gb/s = {}× raw {}; resends {}",
                    num(s.medians.perf_64k_gbps, 2),
                    num(s.ratios.perf_64k_over_raw, 2),
                    all(
                        runs,
                        |r| r.perf_64k.value.as_ref().map(|v| v.perf.gbps),
                        |r| &r.perf_64k.error
                    ),
                    resends(runs, |r| &r.perf_64k),
                )
            }),
            ("`uet perf` 4 KiB × depth 64", &|s, runs| {
                format!(
                    "{} Gb/s = {}× raw {}; resends {}",
                    num(s.medians.perf_4k_gbps, 2),
                    num(s.ratios.perf_4k_over_raw, 2),
                    all(
                        runs,
                        |r| r.perf_4k.value.as_ref().map(|v| v.perf.gbps),
                        |r| &r.perf_4k.error
                    ),
                    resends(runs, |r| &r.perf_4k),
                )
            }),
            (
                "kernel TCP, 1 stream (offloads on) / uetd write ÷ it",
                &|s, runs| {
                    format!(
                        "{} Gb/s / {} {}",
                        num(s.medians.tcp_gbps, 2),
                        num(s.ratios.write_over_tcp, 2),
                        all(
                            runs,
                            |r| r.kernel_tcp.value.as_ref().map(|v| v.gbps),
                            |r| &r.kernel_tcp.error
                        )
                    )
                },
            ),
            ("kernel UDP (iperf3) / uetd write ÷ it", &|s, runs| {
                format!(
                    "{} Gb/s / {} {}",
                    num(s.medians.udp_gbps, 2),
                    num(s.ratios.write_over_udp, 2),
                    all(
                        runs,
                        |r| r.kernel_udp.value.as_ref().map(|v| v.gbps),
                        |r| &r.kernel_udp.error
                    )
                )
            }),
            (
                "machine CPU per GB: uetd write ÷ raw AF_XDP",
                &|s, runs| {
                    format!(
                        "{}× ({} vs {} CPU-s/GB) {}",
                        num(s.ratios.cpu_per_gb_write_over_raw, 2),
                        num(s.medians.write_xdp_cpu_s_per_gb, 3),
                        num(s.medians.raw_cpu_s_per_gb, 3),
                        all(
                            runs,
                            |r| r.write_xdp.value.as_ref().map(|v| v.cpu_s_per_gb),
                            |r| &r.write_xdp.error
                        )
                    )
                },
            ),
            (
                "64 B write p50 at depth 1 ÷ kernel UDP round trip",
                &|s, runs| {
                    let tool = runs
                        .iter()
                        .find_map(|r| r.udp_rtt.value.as_ref().map(|v| v.tool.as_str()))
                        .unwrap_or("-");
                    format!(
                        "{}× ({} µs vs {}; p99 {} vs {}; {tool}) {}",
                        num(s.ratios.latency_over_udp_rtt, 2),
                        num(s.medians.latency_p50_us, 1),
                        num(s.medians.udp_rtt_p50_us, 1),
                        num(s.medians.latency_p99_us, 1),
                        num(s.medians.udp_rtt_p99_us, 1),
                        all(
                            runs,
                            |r| r.latency_64b.value.as_ref().map(|v| v.perf.p50_us),
                            |r| &r.latency_64b.error
                        )
                    )
                },
            ),
            ("kernel UDP round trip p50, µs", &|_, runs| {
                all(
                    runs,
                    |r| r.udp_rtt.value.as_ref().map(|v| v.p50_us),
                    |r| &r.udp_rtt.error,
                )
            }),
            (
                "uetd udp backend (GSO/GRO), RMA write (verified) / ÷ kernel UDP / ÷ kernel TCP",
                &|s, runs| {
                    format!(
                        "{} Gb/s / {} / {} {}; retransmits/RTOs writer {}",
                        num(s.medians.write_udp_gbps, 2),
                        num(s.ratios.write_udp_over_udp, 2),
                        num(s.ratios.write_udp_over_tcp, 2),
                        all(
                            runs,
                            |r| r.write_udp.value.as_ref().map(|v| v.gbps),
                            |r| &r.write_udp.error
                        ),
                        counts(runs, |r| r
                            .write_udp
                            .value
                            .as_ref()
                            .map(|v| (v.writer_retransmits, v.writer_rtos))),
                    )
                },
            ),
            (
                "CPU time the hypervisor took (steal), % of the machine",
                &|_, runs| {
                    let vals: Vec<String> = runs
                        .iter()
                        .map(|r| {
                            r.steal
                                .map_or_else(|| "n/a".into(), |v| format!("{:.1}", v * 100.0))
                        })
                        .collect();
                    format!("[{}]", vals.join(", "))
                },
            ),
        ];
        for (name, cell) in rows {
            t.push_str(&format!("| {name}"));
            for s in &self.summaries {
                let runs: Vec<&Run> = self.runs.iter().filter(|r| r.mtu == s.mtu).collect();
                t.push_str(&format!(" | {}", cell(s, &runs)));
            }
            t.push_str(" |\n");
        }
        t.push_str(&self.paired_table());
        let mut errors: Vec<String> = Vec::new();
        for r in &self.runs {
            for (row, e) in [
                ("raw", &r.raw.error),
                ("kernel TCP", &r.kernel_tcp.error),
                ("kernel UDP", &r.kernel_udp.error),
                ("write xdp", &r.write_xdp.error),
                ("write udp", &r.write_udp.error),
                ("perf 64 KiB", &r.perf_64k.error),
                ("perf 4 KiB", &r.perf_4k.error),
                ("latency", &r.latency_64b.error),
                ("UDP round trip", &r.udp_rtt.error),
            ] {
                if let Some(e) = e {
                    let line = format!("- MTU {}, {row}: {e}", r.mtu);
                    if !errors.contains(&line) {
                        errors.push(line);
                    }
                }
            }
        }
        if !errors.is_empty() {
            t.push_str("\nRows that did not run:\n");
            for e in errors {
                t.push_str(&e);
                t.push('\n');
            }
        }
        t
    }
}

impl BenchReport {
    /// A markdown table's first two lines: an empty corner, then one
    /// column per MTU.
    fn mtu_header(&self) -> String {
        let mut t = String::from("|");
        for mtu in &self.mtus {
            t.push_str(&format!(" | MTU {mtu}"));
        }
        t.push_str(" |\n|---");
        for _ in &self.mtus {
            t.push_str("|---");
        }
        t.push_str("|\n");
        t
    }

    /// The targets' ratios taken within each repeat ([`Paired`]): one
    /// row per ratio, the median with every repeat's in brackets.
    fn paired_table(&self) -> String {
        let mut t = String::from("\nEach repeat's own ratios (median [repeat 1, 2, …]):\n\n");
        t.push_str(&self.mtu_header());
        let rows: [(&str, PickPaired); 5] = [
            ("xdp write ÷ raw AF_XDP", |p| &p.write_over_raw),
            ("machine CPU per GB, xdp write ÷ raw AF_XDP", |p| {
                &p.cpu_per_gb_write_over_raw
            }),
            ("xdp write ÷ kernel TCP", |p| &p.write_over_tcp),
            ("udp backend write ÷ kernel TCP", |p| &p.write_udp_over_tcp),
            ("64 B write p50 ÷ kernel UDP round trip", |p| {
                &p.latency_over_udp_rtt
            }),
        ];
        for (name, pick) in rows {
            t.push_str(&format!("| {name}"));
            for s in &self.summaries {
                let p = pick(&s.paired);
                let each: Vec<String> = p.runs.iter().map(|v| num(*v, 2)).collect();
                t.push_str(&format!(" | {} [{}]", num(p.median, 2), each.join(", ")));
            }
            t.push_str(" |\n");
        }
        t
    }
}

/// One of [`PairedRatios`].
type PickPaired = fn(&PairedRatios) -> &Paired;

/// A table cell: one MTU's summary and runs to text.
type Cell<'a> = &'a dyn Fn(&MtuSummary, &[&Run]) -> String;

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.digits$}"))
}

/// Every run's value in brackets; `n/a` for a run without the row.
fn all(
    runs: &[&Run],
    v: impl Fn(&Run) -> Option<f64>,
    e: impl Fn(&Run) -> &Option<String>,
) -> String {
    let vals: Vec<String> = runs
        .iter()
        .map(|r| match (v(r), e(r)) {
            (Some(v), _) => format!("{v:.2}"),
            (None, Some(_)) | (None, None) => "n/a".into(),
        })
        .collect();
    format!("[{}]", vals.join(", "))
}

/// Every run's (retransmits, RTOs), "r/t" each.
fn counts(runs: &[&Run], v: impl Fn(&Run) -> Option<(u64, u64)>) -> String {
    let vals: Vec<String> = runs
        .iter()
        .map(|r| v(r).map_or_else(|| "n/a".into(), |(a, b)| format!("{a}/{b}")))
        .collect();
    vals.join(", ")
}

/// Every run's resends of `uet perf`, "resent of sent".
fn resends(runs: &[&Run], row: impl Fn(&Run) -> &Row<PerfRow>) -> String {
    let vals: Vec<String> = runs
        .iter()
        .map(|r| {
            row(r)
                .value
                .as_ref()
                .map_or_else(|| "n/a".into(), |v| format!("{}/{}", v.resends, v.tx_data))
        })
        .collect();
    vals.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repeat whose raw ceiling and xdp write ran at `raw` and `write`
    /// Gb/s (CPU-s per GB 1 and `cpu`), kernel TCP at `tcp`; no other row.
    fn repeat(repeat: usize, raw: f64, write: f64, cpu: f64, tcp: Option<f64>) -> Run {
        let mut r = Run::new(repeat, 1500);
        r.raw = Row::from(Ok(RawRow {
            frame_len: 1514,
            mpps: 0.0,
            payload_gbps: raw,
            busy_cpus: 0.0,
            cpu_s_per_gb: 1.0,
        }));
        r.write_xdp = Row::from(Ok(WriteRow {
            bytes: 1 << 30,
            seconds: 1.0,
            gbps: write,
            verified: true,
            xxh3: String::new(),
            tx_data: 0,
            writer_retransmits: 0,
            writer_rtos: 0,
            target_retransmits: 0,
            target_rtos: 0,
            cpu_seconds: 0.0,
            cpu_s_per_gb: cpu,
        }));
        if let Some(gbps) = tcp {
            r.kernel_tcp = Row::from(Ok(KernelRow {
                gbps,
                seconds: 1.0,
                datagram: None,
            }));
        }
        r
    }

    #[test]
    fn paired_ratios_divide_within_each_repeat() {
        // The VM slows down between repeats. The write keeps up with its
        // own repeat's ceiling in two of three (0.4, 1.0, 1.1), but the
        // median write (4) over the median ceiling (8) says 0.5.
        let runs = [
            repeat(1, 10.0, 4.0, 1.2, Some(20.0)),
            repeat(2, 8.0, 8.0, 1.1, None),
            repeat(3, 2.0, 2.2, 1.3, Some(10.0)),
        ];
        let s = summarise(1500, runs.iter());
        assert!((s.ratios.write_over_raw.unwrap() - 0.5).abs() < 1e-9);
        let p = &s.paired.write_over_raw;
        assert_eq!(p.runs.len(), 3);
        assert!((p.median.unwrap() - 1.0).abs() < 1e-9, "{p:?}");
        // CPU per GB pairs the same way (the ceiling's is 1 here).
        assert!((s.paired.cpu_per_gb_write_over_raw.median.unwrap() - 1.2).abs() < 1e-9);
        // A repeat missing a side has no ratio; the median is over the
        // others; no repeat with both sides, no median.
        let tcp = &s.paired.write_over_tcp;
        assert_eq!(tcp.runs[1], None);
        assert!(
            (tcp.median.unwrap() - f64::midpoint(0.2, 0.22)).abs() < 1e-9,
            "{tcp:?}"
        );
        assert_eq!(s.paired.write_udp_over_tcp.median, None);
        let table = BenchReport {
            build: String::new(),
            date: String::new(),
            loadavg_before: String::new(),
            loadavg_after: String::new(),
            mtus: vec![1500],
            repeats: 3,
            bytes: 1 << 30,
            seconds: 1.0,
            cc: "none".into(),
            daemon_args: Vec::new(),
            runs: runs.to_vec(),
            summaries: vec![s],
        }
        .table();
        assert!(
            table.contains("| xdp write ÷ raw AF_XDP | 1.00 [0.40, 1.00, 1.10] |"),
            "{table}"
        );
    }

    #[test]
    fn medians_of_odd_and_even_counts_and_none_of_nothing() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(Some(1.0), Some(4.0)), Some(0.25));
    }

    #[test]
    fn sockperf_percentiles_are_read_from_its_summary() {
        let text = "sockperf: \x1b[2;35mTotal 29107 observations\x1b[0m; each percentile contains 291.07 observations\n\
            sockperf: ---> percentile 99.000 =   38.004\n\
            sockperf: ---> percentile 90.000 =   21.488\n\
            sockperf: ---> percentile 50.000 =   18.442\n";
        let r = parse_sockperf(text, 64).unwrap();
        assert_eq!(r.samples, 29107);
        assert_eq!(r.p50_us, 18.442);
        assert_eq!(r.p99_us, 38.004);
        assert!(parse_sockperf("sockperf: error", 64).is_err());
    }

    #[test]
    fn dates_are_utc_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(utc_now().len(), 20);
    }
}
