//! `uet-sim`: run a named scenario on the deterministic fabric simulator and
//! print a JSON summary.
//!
//! ```text
//! uet-sim writes --bytes 1GiB --loss 0.01 --reorder 0.05 --duplicate 0.02
//! uet-sim incast --senders 8 --bytes 4MiB --rate 1Gbps
//! uet-sim blackout --start-us 1000 --duration-ms 10000
//! ```

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use uet_tests::fabric::{Impairments, LinkParams};
use uet_tests::scenario::{Writes, run_writes};
use uet_wire::pds::ReliableMode;
use uet_wire::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    name = "uet-sim",
    version,
    about = "UET on a deterministic simulated fabric"
)]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Subcommand, Debug)]
enum Scenario {
    /// One sender writes to one receiver through a switch.
    Writes(Common),
    /// N senders each write SIZE bytes to one receiver at the same instant
    /// (synchronized incast) through one switch whose port to the receiver
    /// is the bottleneck; prints the `docs/congestion-evaluation.md` metrics.
    Incast(IncastArgs),
    /// Writes while every link is black for a while.
    Blackout {
        #[command(flatten)]
        common: Common,
        /// When the blackout starts (µs).
        #[arg(long, default_value_t = 1000)]
        start_us: u64,
        /// How long it lasts (ms).
        #[arg(long, default_value_t = 10_000)]
        duration_ms: u64,
    },
}

#[derive(Args, Debug)]
struct IncastArgs {
    /// Senders.
    #[arg(long, default_value_t = 8)]
    senders: usize,
    /// Bytes each sender writes (one message).
    #[arg(long, default_value = "256KiB", value_parser = parse_size)]
    size: u64,
    /// Congestion control: none (fixed window), nscc, rccc, nscc+rccc, pft.
    #[arg(long, default_value = "none")]
    cc: String,
    /// Link rate (every link, so the receiver's port is the bottleneck).
    #[arg(long, default_value = "100Gbps", value_parser = parse_rate)]
    rate: u64,
    /// One-way link latency in µs.
    #[arg(long, default_value_t = 2)]
    latency_us: u64,
    /// Switch buffer per port.
    #[arg(long, default_value = "1MiB", value_parser = parse_size)]
    buffer: u64,
    /// Trim instead of dropping above this queue depth.
    #[arg(long, value_parser = parse_size)]
    trim_at: Option<u64>,
    /// SES header + payload per packet (4096 → 4052 B of payload).
    #[arg(long, default_value_t = 4096)]
    max_ses_len: usize,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Switches serve same-nanosecond arrivals in seeded random order
    /// instead of node order (`Fabric::random_ties`).
    #[arg(long)]
    random_ties: bool,
    /// Each sender starts at a seeded uniform time in [0, T0] instead of
    /// all at once (`docs/congestion-evaluation.md`'s jittered start); the ICT still counts
    /// from time zero.
    #[arg(long)]
    jitter_t0: bool,
    /// Every frame's latency grows by a uniform random [0, N] ns, in order
    /// per link (`Impairments::jitter`): breaks the phase lock of senders
    /// at equal rates.
    #[arg(long, default_value_t = 0)]
    link_jitter_ns: u64,
    /// Write every congestion-control state change of the senders (NSCC
    /// window with its reason, RCCC credit, CCC state, PFT state) and the
    /// bottleneck queue to this CSV file: t_ns,sender,series,value,note.
    #[arg(long)]
    trace: Option<std::path::PathBuf>,
    /// RTO_INIT_TIME in µs (default: the idle round trip plus six full
    /// buffer drains, UEC's simulator's rule; at least 200 µs).
    #[arg(long)]
    rto_us: Option<u64>,
    /// Add a victim: one more host writing this many bytes at a time to
    /// the receiver, one write in flight, for as long as the incast runs;
    /// reports its latency against the same ping-pong alone (CIF,
    /// `docs/congestion-evaluation.md` metric 9) under `victim`.
    #[arg(long, value_parser = parse_size)]
    victim: Option<u64>,
    /// RCCC's speculative first window in bytes, instead of the mode's
    /// one BDP (sources and receiver).
    #[arg(long, value_parser = parse_size)]
    rccc_initial_window: Option<u64>,
    /// Print JSON (the only format; accepted for scripts).
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct Common {
    /// Senders (incast).
    #[arg(long, default_value_t = 1)]
    senders: usize,
    /// Bytes each sender writes (suffixes KiB, MiB, GiB).
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    bytes: u64,
    /// Smallest message (bytes, suffixes allowed).
    #[arg(long, default_value = "4KiB", value_parser = parse_size)]
    min_msg: u64,
    /// Largest message.
    #[arg(long, default_value = "16MiB", value_parser = parse_size)]
    max_msg: u64,
    /// Operations in flight per sender.
    #[arg(long, default_value_t = 4)]
    in_flight: usize,
    /// Use ROD instead of RUD.
    #[arg(long)]
    rod: bool,
    /// Link rate in bits per second (suffixes Gbps, Mbps).
    #[arg(long, default_value = "100Gbps", value_parser = parse_rate)]
    rate: u64,
    /// One-way link latency in µs.
    #[arg(long, default_value_t = 2)]
    latency_us: u64,
    /// Switch buffer per port (bytes, suffixes allowed).
    #[arg(long, default_value = "4MiB", value_parser = parse_size)]
    buffer: u64,
    /// Loss probability per packet per link.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Reordering probability.
    #[arg(long, default_value_t = 0.0)]
    reorder: f64,
    /// Duplication probability.
    #[arg(long, default_value_t = 0.0)]
    duplicate: f64,
    /// Corruption probability.
    #[arg(long, default_value_t = 0.0)]
    corrupt: f64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mul) = [
        ("GiB", 1u64 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("B", 1),
    ]
    .iter()
    .find_map(|(suf, m)| s.strip_suffix(suf).map(|n| (n, *m)))
    .unwrap_or((s, 1));
    num.trim()
        .parse::<u64>()
        .map(|n| n * mul)
        .map_err(|_| format!("{s:?} is not a size (e.g. 4KiB, 16MiB, 1GiB)"))
}

fn parse_rate(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mul) = [("Gbps", 1_000_000_000u64), ("Mbps", 1_000_000), ("bps", 1)]
        .iter()
        .find_map(|(suf, m)| s.strip_suffix(suf).map(|n| (n, *m)))
        .unwrap_or((s, 1));
    num.trim()
        .parse::<u64>()
        .map(|n| n * mul)
        .map_err(|_| format!("{s:?} is not a rate (e.g. 1Gbps, 100Gbps)"))
}

fn writes(c: &Common) -> Result<Writes, String> {
    if c.min_msg == 0 || c.min_msg > c.max_msg || c.max_msg > u64::from(u32::MAX) {
        return Err("need 0 < --min-msg <= --max-msg < 4GiB".into());
    }
    let mut link = LinkParams::new(c.rate, Duration::from_micros(c.latency_us), c.buffer);
    link.impair = Impairments {
        loss: c.loss,
        reorder: c.reorder,
        reorder_delay: Duration::from_micros(c.latency_us * 10),
        duplicate: c.duplicate,
        corrupt: c.corrupt,
        ..Impairments::default()
    };
    Ok(Writes {
        senders: c.senders.max(1),
        bytes_per_sender: c.bytes,
        msg_size: (c.min_msg as u32, c.max_msg as u32),
        region: (c.max_msg as usize).max(1 << 20) * 2,
        in_flight: c.in_flight.max(1),
        mode: if c.rod {
            ReliableMode::Rod
        } else {
            ReliableMode::Rud
        },
        impair: link.impair.clone(),
        link,
        seed: c.seed,
        ..Writes::default()
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Scenario::Incast(a) = &cli.scenario {
        return incast(a);
    }
    let params = match &cli.scenario {
        Scenario::Writes(c) => writes(c),
        Scenario::Incast(_) => return ExitCode::SUCCESS, // handled above
        Scenario::Blackout {
            common,
            start_us,
            duration_ms,
        } => writes(common).map(|mut w| {
            let s = Instant::from_nanos(start_us * 1000);
            w.impair
                .blackouts
                .push((s, s + Duration::from_millis(*duration_ms)));
            w
        }),
    };
    let params = match params {
        Ok(p) => p,
        Err(e) => {
            eprintln!("uet-sim: {e}");
            return ExitCode::from(2);
        }
    };
    let started = std::time::Instant::now();
    let summary = run_writes(&params);
    let mut json = summary.to_json();
    json["scenario"] = serde_json::Value::from(match cli.scenario {
        Scenario::Writes(_) => "writes",
        Scenario::Incast(_) => "incast",
        Scenario::Blackout { .. } => "blackout",
    });
    json["wall_ms"] = serde_json::Value::from(started.elapsed().as_millis() as u64);
    println!("{json}");
    ExitCode::SUCCESS
}

fn incast(a: &IncastArgs) -> ExitCode {
    let Some(cc) = uet_tests::scenario::CcMode::parse(&a.cc) else {
        eprintln!(
            "uet-sim: --cc {}: one of none, nscc, rccc, nscc+rccc, pft",
            a.cc
        );
        return ExitCode::from(2);
    };
    let mut link = LinkParams::new(a.rate, Duration::from_micros(a.latency_us), a.buffer);
    if let Some(t) = a.trim_at {
        link.trim = Some(uet_tests::fabric::Trimming::uet(t));
    }
    link.impair.jitter = Duration::from_nanos(a.link_jitter_ns);
    let mut pds = uet_tests::scenario::incast_pds_config(&link, a.max_ses_len);
    if let Some(us) = a.rto_us {
        pds.rto_init = Duration::from_micros(us);
    }
    let started = std::time::Instant::now();
    let opts = uet_tests::scenario::IncastOptions {
        random_ties: a.random_ties,
        jitter_t0: a.jitter_t0,
        trace: a.trace.is_some(),
        victim: a.victim.map(|v| v.clamp(1, 1 << 20) as u32),
        rccc_initial_window: a.rccc_initial_window,
    };
    let r = uet_tests::scenario::run_incast_cc_with(
        a.senders.max(1),
        a.size,
        cc,
        &link,
        &pds,
        a.seed,
        opts,
    );
    if let Some(path) = &a.trace
        && let Err(e) = write_trace(path, &r.trace)
    {
        eprintln!("uet-sim: --trace {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    let mut json = r.to_json();
    json["scenario"] = serde_json::Value::from("incast");
    json["cc"] = serde_json::Value::from(a.cc.as_str());
    json["seed"] = serde_json::Value::from(a.seed);
    json["wall_ms"] = serde_json::Value::from(started.elapsed().as_millis() as u64);
    println!("{json}");
    ExitCode::SUCCESS
}

/// The trace as CSV; notes are quoted (NSCC's reasons contain commas).
fn write_trace(
    path: &std::path::Path,
    rows: &[uet_tests::scenario::TraceRow],
) -> std::io::Result<()> {
    use std::io::Write;
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(w, "t_ns,sender,series,value,note")?;
    for r in rows {
        let sender = r.sender.map(|s| s.to_string()).unwrap_or_default();
        let note = r.note.replace('"', "\"\"");
        writeln!(w, "{},{sender},{},{},\"{note}\"", r.t_ns, r.series, r.value)?;
    }
    w.flush()
}
