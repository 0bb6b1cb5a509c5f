//! `uet lab demo`: a two-host lab (no bottleneck); an RMA write over
//! AF_XDP through host 1's daemon (its control socket, as an application
//! writes), checked byte-exact by the target's hash; `uet perf`
//! ([`perf::perf_region`]) on the same daemons for bandwidth, message rate and
//! latency; and the two ceilings of the same path (host 1 → switch →
//! host 0) — raw AF_XDP frames and kernel UDP — so both read as a
//! fraction of what the path can carry.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{Lab, LabConfig, WriteOpts, WriteResult};
use crate::error::{Error, Result, require};
use uet_tools::client;
use uet_tools::perf::{self, PerfConfig, PerfReport};
use uetd::config::Backend;

/// What the demo does.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoOpts {
    /// Bytes to write (1 GiB by default; `UET_DEMO_BYTES` overrides the
    /// CLI's default).
    pub bytes: u64,
    /// `uet perf` runs this long.
    pub perf_time: Duration,
    /// `uet perf`'s message size.
    pub perf_size: u32,
    /// `uet perf`'s writes in flight.
    pub perf_depth: usize,
    /// Each ceiling is measured for this long.
    pub ceiling_time: Duration,
    /// IP MTU of the lab's links.
    pub mtu: u32,
    /// The daemons' congestion control.
    pub cc: String,
    /// More `uetd` arguments for both daemons (e.g. `--encap ip
    /// --crc-trailer`).
    pub daemon_args: Vec<String>,
    /// Secure the write with TSS ([`crate::LabConfig::tss`]).
    pub tss: bool,
}

impl Default for DemoOpts {
    fn default() -> Self {
        Self {
            bytes: 1 << 30,
            perf_time: Duration::from_secs(3),
            perf_size: 64 << 10,
            perf_depth: 16,
            ceiling_time: Duration::from_secs(2),
            mtu: 1500,
            cc: "none".into(),
            daemon_args: Vec::new(),
            tss: false,
        }
    }
}

/// `uet perf`'s numbers, as the demo reports them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerfSummary {
    /// Message size, bytes.
    pub size: u32,
    /// Writes in flight.
    pub depth: usize,
    /// Messages completed.
    pub messages: u64,
    /// Seconds it ran.
    pub seconds: f64,
    /// Goodput (BW average), Gb/s.
    pub gbps: f64,
    /// BW peak (the best 10 ms window), Gb/s.
    pub peak_gbps: f64,
    /// Messages per second.
    pub msg_rate: f64,
    /// Completion latency: smallest, µs.
    pub t_min_us: f64,
    /// Mean, µs.
    pub t_avg_us: f64,
    /// Standard deviation, µs.
    pub t_stdev_us: f64,
    /// Largest, µs.
    pub t_max_us: f64,
    /// Completion latency p50, µs.
    pub p50_us: f64,
    /// p99, µs.
    pub p99_us: f64,
    /// p99.9, µs.
    pub p999_us: f64,
}

impl PerfSummary {
    pub(crate) fn new(r: &PerfReport, depth: usize) -> Self {
        let (m, l) = (&r.local, &r.local.latency);
        Self {
            size: m.size,
            depth,
            messages: m.messages,
            seconds: m.seconds,
            gbps: m.gbps(),
            peak_gbps: m.peak_bytes_per_second * 8.0 / 1e9,
            msg_rate: m.msg_rate(),
            t_min_us: l.t_min,
            t_avg_us: l.t_avg,
            t_stdev_us: l.t_stdev,
            t_max_us: l.t_max,
            p50_us: l.t_typical,
            p99_us: l.p99,
            p999_us: l.p999,
        }
    }
}

/// The demo's numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DemoReport {
    /// The lab's name.
    pub lab: String,
    /// The write (goodput, hashes, retransmits, RTOs).
    pub write: WriteResult,
    /// `uet perf` from host 1 into host 0's region.
    pub perf: PerfSummary,
    /// Frame size of the ceilings (MTU + Ethernet header), bytes.
    pub frame_len: usize,
    /// Raw AF_XDP ceiling, Ethernet frame bytes, Gb/s.
    pub raw_xdp_frame_gbps: f64,
    /// The same as UDP payload (what the write's goodput compares to).
    pub raw_xdp_payload_gbps: f64,
    /// Kernel UDP ceiling (payload), Gb/s, with MTU-sized datagrams.
    pub kernel_udp_gbps: f64,
}

impl DemoReport {
    /// The write's goodput as a percentage of the raw AF_XDP ceiling.
    pub fn percent_of_raw(&self) -> f64 {
        self.write.gbps / self.raw_xdp_payload_gbps * 100.0
    }

    /// The short table the CLI prints.
    pub fn table(&self) -> String {
        let pct = |g: f64| g / self.raw_xdp_payload_gbps * 100.0;
        let p = &self.perf;
        let mut t = String::new();
        t.push_str(&format!(
            "uet lab demo — lab {}, host 1 → switch → host 0, veth, MTU {}, AF_XDP copy mode\n\n",
            self.lab,
            self.frame_len - 14
        ));
        t.push_str("| path | Gb/s | % of raw AF_XDP |\n|---|---|---|\n");
        t.push_str(&format!(
            "| RMA write through uetd, {} bytes, verified | {:.2} | {:.0} % |\n",
            self.write.bytes,
            self.write.gbps,
            pct(self.write.gbps)
        ));
        t.push_str(&format!(
            "| uet perf, {} B writes × depth {} | {:.2} | {:.0} % |\n",
            p.size,
            p.depth,
            p.gbps,
            pct(p.gbps)
        ));
        t.push_str(&format!(
            "| raw AF_XDP ceiling, {} B frames (as UDP payload) | {:.2} | 100 % |\n",
            self.frame_len, self.raw_xdp_payload_gbps
        ));
        t.push_str(&format!(
            "| kernel UDP ceiling, {} B datagrams | {:.2} | {:.0} % |\n",
            self.frame_len - 42,
            self.kernel_udp_gbps,
            pct(self.kernel_udp_gbps)
        ));
        t.push_str(&format!(
            "\nwrite: {:.3} s, xxh3 {} (writer) = {} (target): verified; {} data packets, {} retransmits, {} RTOs\n",
            self.write.seconds,
            self.write.xxh3,
            self.write.target_xxh3,
            self.write.tx_data,
            self.write.retransmits,
            self.write.rtos
        ));
        t.push_str(&format!(
            "perf:  {} writes in {:.2} s, {:.0} msg/s, BW peak {:.2} Gb/s, latency p50 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs\n",
            p.messages, p.seconds, p.msg_rate, p.peak_gbps, p.p50_us, p.p99_us, p.p999_us
        ));
        t
    }
}

/// Builds the lab, writes, runs `uet perf`, measures the ceilings, removes
/// the lab (also on failure).
pub fn run(opts: &DemoOpts) -> Result<DemoReport> {
    require(
        u64::from(opts.perf_size) <= opts.bytes,
        "demo options",
        || {
            format!(
                "the perf message size ({}) exceeds the region ({} bytes)",
                opts.perf_size, opts.bytes
            )
        },
    )?;
    // Four steps (the write, uet perf, two ceilings) on a bar when stderr
    // is a terminal; the step lines print either way.
    let bar = uet_tools::progress::steps(4, "demo");
    bar.set_message("building the lab");
    let say = |line: String| bar.suspend(|| eprintln!("{line}"));
    let mut lab = Lab::up(LabConfig {
        hosts: 2,
        mtu: opts.mtu,
        backend: Backend::Xdp,
        cc: opts.cc.clone(),
        region_bytes: opts.bytes,
        sender_daemons: true,
        daemon_args: opts.daemon_args.clone(),
        tss: opts.tss,
        ..LabConfig::default()
    })?;
    say(format!(
        "lab {} up; writing {} bytes host 1 → host 0 through host 1's uetd",
        lab.name(),
        opts.bytes
    ));
    bar.set_message(format!("RMA write of {} bytes", opts.bytes));
    let write = lab.write(
        1,
        0,
        &WriteOpts {
            bytes: opts.bytes,
            timeout: Duration::from_secs(600),
            ..WriteOpts::default()
        },
    )?;
    if !write.verified() {
        return Err(Error::Check(format!(
            "the target's hash {} differs from the writer's {}",
            write.target_xxh3, write.xxh3
        )));
    }
    bar.inc(1);
    say(format!(
        "running uet perf ({} B writes, depth {}) for {:.1} s",
        opts.perf_size,
        opts.perf_depth,
        opts.perf_time.as_secs_f64()
    ));
    bar.set_message("uet perf");
    let to = lab.region(0)?;
    let perf = perf::perf_region(
        &lab.socket(1),
        &to,
        &PerfConfig {
            size: opts.perf_size,
            iters: None,
            duration: opts.perf_time,
            depth: opts.perf_depth,
            ring: true,
            ring_spin: client::DEFAULT_RING_SPIN,
            region_len: opts.bytes,
            ..PerfConfig::default()
        },
        &mut |_| {},
    )
    .map_err(|source| Error::Tool {
        what: "uet perf".into(),
        source,
    })?;
    // The ceilings own the interfaces: the daemons go first.
    lab.stop_daemon(0)?;
    lab.stop_daemon(1)?;
    let frame_len = opts.mtu as usize + 14;
    bar.inc(1);
    say("measuring the raw AF_XDP ceiling".into());
    bar.set_message("raw AF_XDP ceiling");
    let (frame_gbps, payload_gbps) = raw_xdp(&lab, frame_len, opts.ceiling_time)?;
    bar.inc(1);
    say("measuring the kernel UDP ceiling".into());
    bar.set_message("kernel UDP ceiling");
    let udp = kernel_udp(&lab, frame_len - 42, opts.ceiling_time)?;
    bar.finish_and_clear();
    Ok(DemoReport {
        lab: lab.name().to_owned(),
        write,
        perf: PerfSummary::new(&perf, opts.perf_depth),
        frame_len,
        raw_xdp_frame_gbps: frame_gbps,
        raw_xdp_payload_gbps: payload_gbps,
        kernel_udp_gbps: udp,
    })
}

/// Raw AF_XDP from host 1 to host 0 through the switch: (frame Gb/s, the
/// same as UDP payload Gb/s).
fn raw_xdp(lab: &Lab, frame: usize, time: Duration) -> Result<(f64, f64)> {
    let cfg = |ifname: &str| uetd::xsk::XskConfig {
        ifname: ifname.into(),
        frame_count: 8192,
        fill_size: 4096,
        // The ceiling: every chunk on its own, as a raw AF_XDP program runs.
        contiguous_chains: false,
        ..uetd::xsk::XskConfig::default()
    };
    let (_tx, rx) = crate::ceiling::veth_ceiling(
        lab.host(1),
        cfg("eth0"),
        IpAddr::V4(lab.ip(1)),
        lab.host(0),
        cfg("eth0"),
        IpAddr::V4(lab.ip(0)),
        frame,
        time,
    )?;
    let payload = (frame - 42) as f64 / frame as f64;
    Ok((rx.gbps(), rx.gbps() * payload))
}

/// Kernel UDP from host 1 to host 0 through the switch, `size`-byte
/// datagrams: payload Gb/s the sink counted.
fn kernel_udp(lab: &Lab, size: usize, time: Duration) -> Result<f64> {
    let bind = SocketAddr::new(IpAddr::V4(lab.ip(0)), 9999);
    let src = SocketAddr::new(IpAddr::V4(lab.ip(1)), 0);
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    let sink = {
        let (s, r) = (Arc::clone(&stop), Arc::clone(&ready));
        lab.host(0).spawn(move || {
            uet_tools::blast::udp::sink(bind, None, Duration::from_millis(300), &s, &r)
        })?
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ready.load(Ordering::Acquire) {
        if sink.is_finished() || Instant::now() > deadline {
            stop.store(true, Ordering::Relaxed);
            return Err(match sink.join() {
                Ok(Ok(Err(e))) => Error::io("the UDP sink did not start")(e),
                Ok(Err(e)) => Error::io("entering host 0")(e),
                Err(_) => Error::Panicked("UDP sink".into()),
                Ok(Ok(Ok(_))) => Error::Timeout {
                    awaiting: "the UDP sink to start".into(),
                    state: "it was not ready within 10 s".into(),
                },
            });
        }
        std::thread::park_timeout(Duration::from_millis(1));
    }
    let blaster = {
        let s = Arc::clone(&stop);
        lab.host(1)
            .spawn(move || uet_tools::blast::udp::blast(src, bind, size, None, &s))?
    };
    // The measurement window, not a synchronisation: both sides stop on
    // the flag and report what they counted.
    let end = Instant::now() + time;
    while Instant::now() < end {
        std::thread::park_timeout(end - Instant::now());
    }
    stop.store(true, Ordering::Release);
    let _ = blaster
        .join()
        .map_err(|_| Error::Panicked("UDP blaster".into()))?
        .map_err(Error::io("entering host 1"))?
        .map_err(Error::io("the UDP blaster"))?;
    let got = sink
        .join()
        .map_err(|_| Error::Panicked("UDP sink".into()))?
        .map_err(Error::io("entering host 0"))?
        .map_err(Error::io("the UDP sink"))?;
    Ok(got.gbps())
}
