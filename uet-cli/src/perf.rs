//! `uet perf`: perftest's bandwidth and latency tests (`uet_tools::perf`).

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use uet_tools::client;
use uet_tools::perf::{self, IntervalSum, PerfConfig, Test, Units};

use crate::SocketArg;

/// How `uet perf --json` is shaped.
const JSON_HELP: &str = "\
JSON (--json): one document per message size, one per line, shaped like iperf3's:
  start:     version, protocol_version, timestamp.timesecs, connecting_to,
             test_start {test, size, iters, duration, depth, ring, interval,
             bidirectional, region_len}
  intervals: [{sum: {start, end, seconds, bytes, messages, bits_per_second},
              sum_bidir_reverse: {…} (bidirectional)}]
  end:       sum {start, end, seconds, bytes, messages, size, bits_per_second,
             peak_bits_per_second, msg_rate_mpps}, sum_bidir_reverse,
             sum_received {messages, bytes} (send: what the server received),
             latency_us {count, t_min, t_max, t_typical, t_avg, t_stdev, p99, p999},
             retransmits (this side's daemon),
             daemons {local, remote: {retransmits, rtos,
                      cpu_utilization_percent {total, user, system}}},
             cpu_utilization_percent {host_total, host_user, host_system,
                                      remote_total, remote_user, remote_system}
  remote and remote_* are null against a `uet serve` region.

Sizes: K, M, G are powers of 1024 (4K = 4KiB = 4096 bytes) in every uet command.";

/// `uet perf` (see `--help`).
#[derive(Args, Debug)]
#[command(after_long_help = JSON_HELP)]
pub(crate) struct PerfArgs {
    /// Where: a `uet perf --server` as HOST or HOST:PORT, or a region
    /// `uet serve` exposes, uet://FEP/JOB/PID/RI/GEN/0xKEY (write and read
    /// only, one direction).
    #[arg(required_unless_present = "server")]
    target: Option<String>,
    /// Be the server: listen for `uet perf HOST` clients (perftest's
    /// server), one test at a time, until Ctrl-C or --count tests.
    #[arg(long, conflicts_with = "target")]
    server: bool,
    /// The server's TCP port.
    #[arg(short = 'p', long, default_value_t = perf::DEFAULT_PORT)]
    port: u16,
    /// The address the server listens on.
    #[arg(long, default_value = "0.0.0.0")]
    bind: IpAddr,
    /// The server exits after this many tests.
    #[arg(long, requires = "server")]
    count: Option<u64>,
    /// The operation: write, read or send (ib_write_*, ib_read_*,
    /// ib_send_*).
    #[arg(long, default_value = "write")]
    test: Test,
    /// Latency test (ib_*_lat): depth 1, perftest's columns t_min, t_max,
    /// t_typical (median), t_avg, t_stdev, 99 % and 99.9 %; default size 2
    /// and 1000 iterations.
    #[arg(long, visible_alias = "lat")]
    latency: bool,
    /// Message sizes, comma separated (4K = 4096; default 65536, 2 with
    /// --latency).
    #[arg(short = 's', long, value_delimiter = ',')]
    size: Vec<uetd::config::Size>,
    /// Every size from 2 B to 8 MiB in powers of two (perftest's -a).
    #[arg(short = 'a', long, conflicts_with = "size")]
    all: bool,
    /// Operations per size (default 5000, 1000 with --latency, as
    /// perftest).
    #[arg(short = 'n', long, conflicts_with = "duration")]
    iters: Option<u64>,
    /// Seconds per size instead of a count.
    #[arg(short = 'D', long)]
    duration: Option<f64>,
    /// Operations in flight (perftest's --tx-depth; 1 with --latency).
    #[arg(
        short = 't',
        long = "tx-depth",
        visible_alias = "depth",
        default_value_t = 16
    )]
    depth: usize,
    /// Both sides run the test toward each other at once (needs a server);
    /// the table sums both directions, as perftest does.
    #[arg(short = 'b', long)]
    bidirectional: bool,
    /// Bandwidth in Gb/s (10^9 bits) instead of perftest's default MiB/s.
    #[arg(long)]
    report_gbits: bool,
    /// A line of sums every SECS seconds while a test runs.
    #[arg(long, value_name = "SECS")]
    interval: Option<f64>,
    /// Bytes of the region operations cycle through (the served region's
    /// length, or what each side exposes).
    #[arg(long, default_value = "64MiB")]
    region: uetd::config::Size,
    /// Submit writes and reads over the control socket instead of the
    /// shared-memory ring.
    #[arg(long)]
    no_ring: bool,
    /// Microseconds a ring wait polls before it sleeps (default 0: a
    /// spinning client only pays off with a core to spare).
    #[arg(long, default_value_t = 0)]
    spin_us: u64,
    /// iperf3-shaped JSON, one document per size (shape below).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    sock: SocketArg,
}

/// Where the client form goes.
enum Target {
    Region(uet_api::RemoteRegion),
    Server(SocketAddr),
}

fn target(s: &str, port: u16) -> Result<Target> {
    if s.starts_with("uet://") {
        return Ok(Target::Region(s.parse().map_err(|e| anyhow!("{s}: {e}"))?));
    }
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(Target::Server(a));
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok(Target::Server(SocketAddr::new(ip, port)));
    }
    let addrs = if s.contains(':') {
        s.to_socket_addrs()
    } else {
        (s, port).to_socket_addrs()
    };
    addrs
        .with_context(|| format!("resolving {s}"))?
        .next()
        .ok_or_else(|| anyhow!("{s} has no address"))
        .map(Target::Server)
}

fn seconds(what: &str, s: f64) -> Result<Duration> {
    if !(s.is_finite() && s > 0.0) {
        bail!("{what} must be a positive number of seconds, not {s}");
    }
    Ok(Duration::from_secs_f64(s))
}

pub(crate) fn run(a: &PerfArgs) -> Result<()> {
    let sock = client::socket_path(a.sock.socket.clone());
    if a.server {
        let bind = SocketAddr::new(a.bind, a.port);
        return perf::perf_server(&sock, bind, a.count, &mut |v| {
            use std::io::Write as _;
            println!("{v}");
            let _ = std::io::stdout().flush();
        })
        .context("serving perf tests");
    }
    let target = target(a.target.as_deref().unwrap_or_default(), a.port)?;
    let sizes: Vec<u32> = if a.all {
        perf::all_sizes()
    } else if a.size.is_empty() {
        vec![if a.latency { 2 } else { 65536 }]
    } else {
        a.size
            .iter()
            .map(|s| u32::try_from(s.0).map_err(|_| anyhow!("a size must be < 4 GiB, not {}", s.0)))
            .collect::<Result<_>>()?
    };
    let iters = match (a.iters, a.duration) {
        (Some(n), _) => Some(n),
        (None, Some(_)) => None,
        (None, None) => Some(if a.latency { 1000 } else { 5000 }),
    };
    let units = if a.report_gbits {
        Units::Gbps
    } else {
        Units::MiBps
    };
    let base = PerfConfig {
        test: a.test,
        size: 0,
        iters,
        duration: match a.duration {
            Some(s) => seconds("--duration", s)?,
            None => Duration::ZERO,
        },
        depth: if a.latency { 1 } else { a.depth },
        ring: !a.no_ring,
        ring_spin: Duration::from_micros(a.spin_us),
        interval: a.interval.map(|s| seconds("--interval", s)).transpose()?,
        bidirectional: a.bidirectional,
        region_len: a.region.0,
    };
    if !a.json {
        println!(
            "{}",
            if a.latency {
                perf::lat_header()
            } else {
                perf::bw_header(units)
            }
        );
    }
    let json = a.json;
    let mut on_interval = |s: &IntervalSum| {
        if !json {
            println!("{}", perf::interval_line(s, units, false));
        }
    };
    for size in sizes {
        let cfg = PerfConfig {
            size,
            ..base.clone()
        };
        let r = match &target {
            Target::Region(to) => perf::perf_region(&sock, to, &cfg, &mut on_interval)
                .with_context(|| format!("uet perf, {size}-byte {}s to {to}", cfg.test))?,
            Target::Server(s) => perf::perf_client(&sock, *s, &cfg, &mut on_interval)
                .with_context(|| format!("uet perf, {size}-byte {}s with {s}", cfg.test))?,
        };
        if json {
            println!("{}", r.to_json());
        } else {
            if let Some(rev) = &r.reverse {
                for s in &rev.intervals {
                    println!("{}", perf::interval_line(s, units, true));
                }
            }
            if a.latency {
                println!("{}", perf::lat_row(&r));
            } else {
                println!("{}", perf::bw_row(&r, units));
            }
        }
    }
    Ok(())
}
