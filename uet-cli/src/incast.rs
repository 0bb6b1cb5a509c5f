//! `uet lab incast`: N hosts write into one receiver through the lab's
//! bottleneck, per congestion-control mode; results, report and figures in
//! `--out` (`uet_lab::incast`).
//!
//! ```text
//! uet lab incast --senders 8 --size 1MiB --cc rccc,nscc,none --seeds 5 --out incast
//! uet lab incast --sweep --out docs/incast
//! ```

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use uet_lab::incast::{self, CC_MODES, IncastOpts};
use uetd::config::{Backend, Rate, Size};

/// The sender counts of `--sweep`.
const SWEEP_SENDERS: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

/// `uet lab incast`.
#[derive(Debug, Args)]
pub(crate) struct IncastArgs {
    /// Senders N; a list (1,2,4) runs each.
    #[arg(long, value_delimiter = ',', default_value = "4")]
    pub senders: Vec<usize>,
    /// Payload bytes per flow; a list runs each.
    #[arg(long, value_delimiter = ',', default_value = "1MiB")]
    pub size: Vec<Size>,
    /// Congestion control: none, nscc, rccc, nscc+rccc, pft, or all; a list
    /// runs each.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    pub cc: Vec<String>,
    /// Bottleneck rate toward the receiver, bits/s: the most the
    /// calibration picks (it lowers R below what all senders feed together
    /// at once, then while with congestion control they fill less than
    /// 95 % of it or the receiver's RCCC pacer loses more than 1 % of its
    /// budget to late ticks, down to 200 Mb/s; the report says so).
    #[arg(long, default_value = "1G")]
    pub bottleneck: Rate,
    /// Use --bottleneck as it is, whatever the senders feed.
    #[arg(long)]
    pub fixed_bottleneck: bool,
    /// The daemons' --busy-poll-us (0: their workers sleep in poll() as
    /// soon as they are idle: N + 1 daemons share the CPUs).
    #[arg(long, default_value_t = 0)]
    pub busy_poll_us: u64,
    /// The daemons' RCCC receivers pace at their full rate whatever the ECN
    /// marks (`uetd --rccc-ecn-rate false`; by default they slow by up to
    /// a tenth while the data arrives marked).
    #[arg(long)]
    pub no_rccc_ecn_rate: bool,
    /// The bottleneck's buffer, bytes (default 5 × the measured BDP).
    #[arg(long)]
    pub buffer: Option<Size>,
    /// ECN thresholds KMIN,KMAX, bytes (default 0.2,0.8 × R × the daemons'
    /// base RTT).
    #[arg(long, value_parser = crate::args::parse_ecn_pair)]
    pub ecn: Option<(u64, u64)>,
    /// No ECN marking.
    #[arg(long, conflicts_with = "ecn")]
    pub no_ecn: bool,
    /// A trimming switch: a packet that would overflow the buffer is cut
    /// to its headers and forwarded (the receiver NACKs it) instead of
    /// dropped; the daemons take NSCC's parameters for trimming.
    #[arg(long)]
    pub trim: bool,
    /// Start jitter: each sender starts U[0, JITTER] µs after the common
    /// start.
    #[arg(long, default_value_t = 0)]
    pub jitter_us: u64,
    /// A victim ping-pong crosses the bottleneck during the incast.
    #[arg(long)]
    pub victim: bool,
    /// Run the victim's daemon and pings at normal priority like every
    /// other daemon (default: SCHED_FIFO, so the victim's latency is the
    /// network's and the receiver's, not its own host waiting for a CPU).
    #[arg(long, requires = "victim")]
    pub victim_normal_priority: bool,
    /// Run the receiver's daemon SCHED_FIFO: its RCCC pacer ticks on time
    /// instead of waiting for a CPU behind the senders' daemons.
    #[arg(long)]
    pub realtime_receiver: bool,
    /// The receiver's daemon and the victim's ask for the kernel's
    /// shortest scheduler slice (`uetd --worker-slice-us 100`), so that
    /// woken by the pacer's timer or a packet they take a CPU before the
    /// senders' daemons (default: every daemon runs the kernel's slice).
    #[arg(long)]
    pub prompt_receiver: bool,
    /// Runs per (cc, N, size).
    #[arg(long, default_value_t = 3)]
    pub seeds: usize,
    /// The matrix N ∈ {1,2,4,8,16,32,64} × size ∈ {256KiB, 1MiB} ×
    /// {rccc, nscc, none}, 3 seeds (overrides --senders, --size, --cc and
    /// --seeds).
    #[arg(long)]
    pub sweep: bool,
    /// Link MTU.
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// The daemons' datapath.
    #[arg(long, value_enum, default_value = "xdp")]
    pub backend: Backend,
    /// Bytes per write operation (default size/16, 4–64 KiB).
    #[arg(long)]
    pub chunk: Option<Size>,
    /// The daemons' base RTT in µs, what NSCC and RCCC plan for (default:
    /// 3 × the measured idle T0: the loops of an incast on two CPUs wait
    /// for schedulers).
    #[arg(long)]
    pub base_rtt_us: Option<u64>,
    /// The daemons' RTO_INIT_TIME in µs (default: 6 × the buffer's drain
    /// time + 4 × T0 p99, at least 5 ms).
    #[arg(long)]
    pub rto_init_us: Option<u64>,
    /// Where results.json, results.csv, report.md and the figures go.
    #[arg(long, default_value = "incast")]
    pub out: PathBuf,
}

impl IncastArgs {
    /// The experiment these arguments describe.
    pub(crate) fn opts(&self) -> IncastOpts {
        let all = || CC_MODES.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let mut o = IncastOpts {
            senders: self.senders.clone(),
            sizes: self.size.iter().map(|s| s.0).collect(),
            ccs: if self.cc.iter().any(|c| c == "all") {
                all()
            } else {
                self.cc.clone()
            },
            bottleneck: self.bottleneck.0,
            fit_bottleneck: !self.fixed_bottleneck,
            busy_poll_us: self.busy_poll_us,
            rccc_ecn_rate: !self.no_rccc_ecn_rate,
            buffer: self.buffer.map(|b| b.0),
            ecn: self.ecn,
            no_ecn: self.no_ecn,
            trim: self.trim,
            jitter: Duration::from_micros(self.jitter_us),
            victim: self.victim,
            victim_realtime: !self.victim_normal_priority,
            receiver_realtime: self.realtime_receiver,
            prompt_receiver: self.prompt_receiver,
            seeds: self.seeds,
            mtu: self.mtu,
            backend: self.backend,
            chunk: self.chunk.map(|c| c.0),
            base_rtt_us: self.base_rtt_us,
            rto_init_us: self.rto_init_us,
            ..IncastOpts::default()
        };
        if self.sweep {
            o.senders = SWEEP_SENDERS.to_vec();
            o.sizes = vec![256 << 10, 1 << 20];
            o.ccs = ["rccc", "nscc", "none"].map(String::from).to_vec();
            o.seeds = 3;
        }
        o
    }
}

/// Runs `uet lab incast`.
pub(crate) fn run(a: &IncastArgs) -> Result<()> {
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let opts = a.opts();
    let total = opts.ccs.len() * opts.senders.len() * opts.sizes.len() * opts.seeds;
    // A bar over the runs on a terminal; the per-run lines print either way.
    let bar = uet_tools::progress::steps(total as u64, "incast");
    bar.set_message("building the lab, calibrating");
    let result = incast::run(opts, &a.out, &command, |r| {
        let ict = r.flows.iter().map(|f| f.end_ns).max().unwrap_or(0);
        let line = format!(
            "{:>9} N={:<2} size={:<8} seed={} ICT {:.3} ms  drops {}  rtx {}  rtos {}",
            r.cc,
            r.senders,
            r.size,
            r.seed,
            ict as f64 / 1e6,
            r.queue.last().map_or(0, |q| q.drops),
            r.flows.iter().map(|f| f.retransmits).sum::<u64>(),
            r.flows.iter().map(|f| f.rtos).sum::<u64>(),
        );
        bar.suspend(|| eprintln!("{line}"));
        bar.inc(1);
        bar.set_message(format!("last: {} N={} seed={}", r.cc, r.senders, r.seed));
    });
    bar.finish_and_clear();
    let (report, files) = result?;
    let c = &report.calibration;
    match c.lowered(report.setup.bottleneck_bps, c.solo_bps.len()) {
        Some(why) => eprintln!("{why}"),
        None => eprintln!(
            "bottleneck {} Mb/s: this machine fed {:.0} Mb/s with {} senders at once",
            report.setup.bottleneck_bps / 1_000_000,
            c.all_senders_bps / 1e6,
            c.solo_bps.len()
        ),
    }
    eprintln!(
        "T0 p50 {:.1} µs, BDP {} B, buffer {} B; {} runs",
        report.calibration.t0.p50_ns as f64 / 1e3,
        report.calibration.bdp_bytes,
        report.setup.buffer_bytes,
        report.runs.len()
    );
    for f in files {
        println!("{}", f.display());
    }
    Ok(())
}
