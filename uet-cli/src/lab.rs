//! `uet lab …`: build, inspect and remove veth labs (`uet_lab`), and the
//! README's demo.
//!
//! ```text
//! uet lab up --hosts 3 --bottleneck 1G --buffer 256KiB --ecn 30000,120000 --cc nscc
//! uet lab impair --name NAME --loss 0.01 --reorder 0.05
//! uet lab sample --name NAME --hz 1000 --count 5000
//! uet lab down --name NAME        # or --all
//! uet lab demo
//! uet lab bench --mtu 1500,3498,9000 --repeats 3 --json bench.json
//! ```
//!
//! Ctrl-C (or SIGTERM) while a command builds or runs a lab removes it
//! before `uet` exits (status 130).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use uet_lab::{Impairment, Lab, LabConfig, LabState, Sampler};
use uetd::config::{Backend, Encap, Profile, Rate, Size};

/// `uet lab` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum LabCmd {
    /// Build a lab and leave it running; prints its state as JSON.
    Up(UpArgs),
    /// Remove a lab (daemons, namespaces, BPF pins, state).
    Down(DownArgs),
    /// List the labs that have a state file.
    List,
    /// Switch a running lab's impairment program (all zero: off).
    Impair(ImpairArgs),
    /// Sample the bottleneck queue and ECN counters as JSON lines.
    Sample(SampleArgs),
    /// Two hosts, a verified RMA write over AF_XDP through the daemon,
    /// `uet perf`, the raw ceilings, a table; removes the lab afterwards.
    /// `UET_DEMO_BYTES` sets the size.
    Demo(DemoArgs),
    /// The datapath table: raw AF_XDP ceiling, kernel TCP/UDP, uetd xdp
    /// and udp writes, `uet perf`, latency, CPU per GB, on one veth pair
    /// per MTU, interleaved repeats, medians and ratios; removes its labs.
    Bench(BenchArgs),
    /// N senders into one receiver through the bottleneck, per congestion
    /// control mode: calibration, runs, metrics, report and figures.
    Incast(crate::incast::IncastArgs),
}

/// The daemons' wire settings (`uetd --profile/--encap/--crc-trailer`).
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct WireArgs {
    /// A preset of wire choices for the daemons: refprov = the UEC
    /// reference provider's (native IP 253, CRC trailer).
    #[arg(long, value_enum)]
    pub profile: Option<Profile>,
    /// The daemons' encapsulation: udp, or ip (protocol 253 behind the
    /// entropy header).
    #[arg(long, value_enum)]
    pub encap: Option<Encap>,
    /// The daemons add and require the CRC32C trailer.
    #[arg(long)]
    pub crc_trailer: bool,
    /// Secure the lab's job with TSS: a fresh key (mode 0600, in the lab's
    /// state directory) for every daemon (`docs/security.md`).
    #[arg(long)]
    pub tss: bool,
}

impl WireArgs {
    /// The `uetd` arguments these settings are.
    pub(crate) fn daemon_args(&self) -> Vec<String> {
        let mut a = Vec::new();
        if let Some(p) = self.profile {
            a.extend(["--profile".into(), format!("{p:?}").to_lowercase()]);
        }
        if let Some(e) = self.encap {
            a.extend(["--encap".into(), format!("{e:?}").to_lowercase()]);
        }
        if self.crc_trailer {
            a.push("--crc-trailer".into());
        }
        a
    }
}

/// `uet lab up`.
#[derive(Debug, Args)]
pub(crate) struct UpArgs {
    /// Hosts (host 0 receives).
    #[arg(long, default_value_t = 2)]
    pub hosts: usize,
    /// Bottleneck rate toward host 0, bits/s (e.g. 1G, 100M).
    #[arg(long)]
    pub bottleneck: Option<Rate>,
    /// The bottleneck's buffer, bytes (e.g. 256KiB).
    #[arg(long)]
    pub buffer: Option<Size>,
    /// ECN thresholds KMIN,KMAX in bytes of virtual backlog.
    #[arg(long, value_parser = crate::args::parse_ecn_pair)]
    pub ecn: Option<(u64, u64)>,
    /// A trimming switch: a packet that would overflow the buffer is cut
    /// to its headers and forwarded (the receiver NACKs it) instead of
    /// dropped; the daemons run --trimming true. Needs --bottleneck.
    #[arg(long, requires = "bottleneck")]
    pub trim: bool,
    /// The virtual queue drains at bottleneck × gamma.
    #[arg(long, default_value_t = 1.0)]
    pub gamma: f64,
    /// Congestion control of the daemons.
    #[arg(long, default_value = "none")]
    pub cc: String,
    /// Datapath of the daemons.
    #[arg(long, value_enum, default_value = "xdp")]
    pub backend: Backend,
    /// IP MTU of every link.
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// Size of the region each daemon exposes (RI 1, key 0x5eed).
    #[arg(long, default_value = "1GiB")]
    pub region: Size,
    /// The daemons' --base-rtt-us.
    #[arg(long)]
    pub base_rtt_us: Option<u64>,
    /// Only host 0 runs a daemon.
    #[arg(long)]
    pub receiver_only: bool,
    /// The lab's name (default uetlab-PID-N).
    #[arg(long)]
    pub name: Option<String>,
    /// Wire settings of the daemons.
    #[command(flatten)]
    pub wire: WireArgs,
}

/// `uet lab down`.
#[derive(Debug, Args)]
pub(crate) struct DownArgs {
    /// The lab to remove.
    #[arg(long, conflicts_with = "all", required_unless_present = "all")]
    pub name: Option<String>,
    /// Remove every lab.
    #[arg(long)]
    pub all: bool,
}

/// `uet lab impair`.
#[derive(Debug, Args)]
pub(crate) struct ImpairArgs {
    /// The lab.
    #[arg(long)]
    pub name: String,
    /// Drop probability of UET frames.
    #[arg(long, default_value_t = 0.0)]
    pub loss: f64,
    /// Duplication probability.
    #[arg(long, default_value_t = 0.0)]
    pub duplicate: f64,
    /// Reordering (detour) probability.
    #[arg(long, default_value_t = 0.0)]
    pub reorder: f64,
    /// Trimming probability.
    #[arg(long, default_value_t = 0.0)]
    pub trim: f64,
    /// UDP payload bytes a trimmed frame keeps.
    #[arg(long, default_value_t = 64)]
    pub trim_to: u32,
    /// Impair only frames toward host 0.
    #[arg(long)]
    pub toward_receiver_only: bool,
}

/// `uet lab sample`.
#[derive(Debug, Args)]
pub(crate) struct SampleArgs {
    /// The lab.
    #[arg(long)]
    pub name: String,
    /// Samples per second.
    #[arg(long, default_value_t = 1000)]
    pub hz: u32,
    /// Samples to take.
    #[arg(long, default_value_t = 1)]
    pub count: u64,
}

/// `uet lab demo`.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Bytes to write (default 1GiB, or $UET_DEMO_BYTES).
    #[arg(long)]
    pub bytes: Option<Size>,
    /// Seconds `uet perf` runs.
    #[arg(long, default_value_t = 3.0)]
    pub perf_seconds: f64,
    /// Seconds each ceiling is measured.
    #[arg(long, default_value_t = 2.0)]
    pub ceiling_seconds: f64,
    /// Congestion control of the daemons.
    #[arg(long, default_value = "none")]
    pub cc: String,
    /// Print the report as JSON too.
    #[arg(long)]
    pub json: bool,
    /// Wire settings of the daemons.
    #[command(flatten)]
    pub wire: WireArgs,
}

/// `uet lab bench`.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// IP MTUs of the veth pair, comma-separated (one column each).
    #[arg(long, value_delimiter = ',', default_values_t = [1500u32, 3498, 9000])]
    pub mtu: Vec<u32>,
    /// Interleaved repeats of every row (medians over them).
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Bytes of each RMA write.
    #[arg(long, default_value = "1GiB")]
    pub bytes: Size,
    /// Seconds each timed row runs (ceilings, `uet perf`, latency; iperf3
    /// and sockperf run whole seconds).
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Congestion control of the daemons.
    #[arg(long, default_value = "none")]
    pub cc: String,
    /// The kernel UDP round trip: sockperf, our own ping-pong (builtin),
    /// or sockperf when installed (auto).
    #[arg(long, value_enum, default_value = "auto")]
    pub udp_rtt: RttArg,
    /// Also write every run's numbers as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Wire settings of the daemons.
    #[command(flatten)]
    pub wire: WireArgs,
}

/// `--udp-rtt`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum RttArg {
    Auto,
    Sockperf,
    Builtin,
}

/// On SIGINT/SIGTERM: remove the labs this process builds or runs, exit
/// 130.
fn cleanup_on_signals() -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).context("installing handlers")?;
    std::thread::Builder::new()
        .name("lab-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                eprintln!("uet lab: signal {sig}, removing the lab");
                uet_lab::abort_all();
                std::process::exit(130);
            }
        })?;
    Ok(())
}

/// Runs a `uet lab` subcommand.
pub(crate) fn run(cmd: LabCmd) -> Result<()> {
    match cmd {
        LabCmd::Up(a) => up(a),
        LabCmd::Down(a) => {
            if a.all {
                for n in uet_lab::down_all()? {
                    println!("removed {n}");
                }
            } else if let Some(n) = a.name {
                uet_lab::down(&n)?;
                println!("removed {n}");
            }
            Ok(())
        }
        LabCmd::List => {
            for n in uet_lab::list()? {
                println!("{n}");
            }
            Ok(())
        }
        LabCmd::Impair(a) => {
            let state = LabState::load(&a.name)?;
            uet_lab::impair_state(
                &state,
                &Impairment {
                    loss: a.loss,
                    duplicate: a.duplicate,
                    reorder: a.reorder,
                    trim: a.trim,
                    trim_to: a.trim_to,
                    toward_receiver_only: a.toward_receiver_only,
                },
            )
            .with_context(|| format!("switching the impairments of lab {}", a.name))
        }
        LabCmd::Sample(a) => sample(&a),
        LabCmd::Demo(a) => demo(&a),
        LabCmd::Bench(a) => bench(&a),
        LabCmd::Incast(a) => {
            cleanup_on_signals()?;
            crate::incast::run(&a)
        }
    }
}

fn up(a: UpArgs) -> Result<()> {
    cleanup_on_signals()?;
    let lab = Lab::up(LabConfig {
        hosts: a.hosts,
        bottleneck: a.bottleneck.map(|s| s.0),
        buffer: a.buffer.map(|s| s.0),
        ecn: a.ecn,
        trim: a.trim,
        gamma: a.gamma,
        mtu: a.mtu,
        backend: a.backend,
        cc: a.cc,
        base_rtt_us: a.base_rtt_us,
        region_bytes: a.region.0,
        sender_daemons: !a.receiver_only,
        name: a.name,
        daemon_args: a.wire.daemon_args(),
        tss: a.wire.tss,
        ..LabConfig::default()
    })?;
    let state = lab.keep();
    println!("{}", serde_json::to_string_pretty(&state)?);
    Ok(())
}

fn sample(a: &SampleArgs) -> Result<()> {
    if a.hz == 0 {
        bail!("--hz must be positive");
    }
    let s = Sampler::open(&LabState::load(&a.name)?)
        .with_context(|| format!("opening the samplers of lab {}", a.name))?;
    let period = Duration::from_secs_f64(1.0 / f64::from(a.hz));
    let start = Instant::now();
    for i in 0..a.count {
        let next = start + period.mul_f64(i as f64);
        while Instant::now() < next {
            std::thread::park_timeout(next - Instant::now());
        }
        let sample = s
            .sample()
            .with_context(|| format!("sampling lab {}", a.name))?;
        println!("{}", serde_json::to_string(&sample)?);
    }
    Ok(())
}

fn demo(a: &DemoArgs) -> Result<()> {
    cleanup_on_signals()?;
    let bytes = match (&a.bytes, std::env::var("UET_DEMO_BYTES")) {
        (Some(b), _) => b.0,
        (None, Ok(v)) => {
            v.parse::<Size>()
                .map_err(anyhow::Error::msg)
                .context("UET_DEMO_BYTES")?
                .0
        }
        (None, Err(_)) => 1 << 30,
    };
    let report = uet_lab::demo::run(&uet_lab::demo::DemoOpts {
        bytes,
        perf_time: Duration::try_from_secs_f64(a.perf_seconds).context("--perf-seconds")?,
        ceiling_time: Duration::try_from_secs_f64(a.ceiling_seconds)
            .context("--ceiling-seconds")?,
        cc: a.cc.clone(),
        daemon_args: a.wire.daemon_args(),
        tss: a.wire.tss,
        ..uet_lab::demo::DemoOpts::default()
    })?;
    print!("{}", report.table());
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    }
    Ok(())
}

fn bench(a: &BenchArgs) -> Result<()> {
    use uet_lab::bench::{BenchOpts, RttTool};
    cleanup_on_signals()?;
    let report = uet_lab::bench::run(
        &BenchOpts {
            mtus: a.mtu.clone(),
            repeats: a.repeats,
            bytes: a.bytes.0,
            seconds: Duration::try_from_secs_f64(a.seconds).context("--seconds")?,
            cc: a.cc.clone(),
            daemon_args: a.wire.daemon_args(),
            rtt_tool: match a.udp_rtt {
                RttArg::Auto => RttTool::Auto,
                RttArg::Sockperf => RttTool::Sockperf,
                RttArg::Builtin => RttTool::Builtin,
            },
        },
        |step| eprintln!("{step}"),
    )?;
    print!("{}", report.table());
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_args_become_uetd_flags() {
        let w = WireArgs {
            profile: Some(Profile::Refprov),
            encap: Some(Encap::Ip),
            crc_trailer: true,
            tss: true,
        };
        // TSS is the lab's (it writes the key), not a daemon flag here.
        assert_eq!(
            w.daemon_args(),
            ["--profile", "refprov", "--encap", "ip", "--crc-trailer"]
        );
        assert!(WireArgs::default().daemon_args().is_empty());
    }
}
