//! The `docs/congestion-evaluation.md` metrics of an incast, derived from what
//! [`super::model`] recorded: per run ([`compute`], [`fill_f_c`]), per
//! (cc, senders, size) group over seeds ([`summarize`]), and its targets
//! ([`check_targets`], [`check_calibration`]). Pure: no I/O, no clock.
//!
//! Degenerate input (no flows, no queue samples, zero times or rates) never
//! panics: a ratio whose denominator is zero is 0, a metric that needs data
//! that is absent is 0 or `None` — each field's doc says which.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::model::{Calibration, Flow, Metrics, QueueSample, Run, Setup};

/// Minimum width of a windowed-Jain window, in T0 (`k` is at least this).
pub const MIN_WINDOW_T0: u64 = 8;

/// A windowed-Jain window holds at least this many chunk completions per
/// flow at the fair share R/N.
pub const CHUNKS_PER_WINDOW: u64 = 4;

/// The transient the steady-state metrics skip, in T0 (`docs/congestion-evaluation.md`:
/// "after 10·T0").
pub const STEADY_AFTER_T0: u64 = 10;

/// `num / den`, 0 when `den` is 0.
fn ratio(num: f64, den: f64) -> f64 {
    if den == 0.0 { 0.0 } else { num / den }
}

/// `bytes` at `bps` as nanoseconds (0 when `bps` is 0).
pub fn bytes_to_ns(bytes: f64, bps: u64) -> f64 {
    ratio(bytes * 8.0 * 1e9, bps as f64)
}

/// Jain's fairness index (Σx)² / (n·Σx²); 1 for one value, 0 for none or
/// all zero.
pub fn jain(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    ratio(sum * sum, xs.len() as f64 * sq)
}

/// Nearest-rank percentile (`p` in [0, 1]) of sorted values; `None` when
/// empty.
pub fn percentile_sorted<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Payload bytes a flow delivered when it ended: all of them, or for a
/// failed flow what its progress reached.
fn delivered(flow: &Flow) -> u64 {
    match flow.error {
        None => flow.bytes,
        Some(_) => flow.progress.last().map_or(0, |p| p.1),
    }
}

/// Cumulative payload bytes the flow had completed at `t_ns`: linear
/// between its progress points, starting from (start_ns, 0); 0 before its
/// start, the last point's bytes after it.
pub fn delivered_at(flow: &Flow, t_ns: f64) -> f64 {
    let mut prev = (flow.start_ns as f64, 0.0);
    if t_ns <= prev.0 {
        return 0.0;
    }
    // Progress points are in time order: find the first at or after t.
    let i = flow.progress.partition_point(|p| (p.0 as f64) < t_ns);
    if i == flow.progress.len() {
        return flow.progress.last().map_or(0.0, |p| p.1 as f64);
    }
    if i > 0 {
        let p = flow.progress[i - 1];
        prev = (p.0 as f64, p.1 as f64);
    }
    let next = (flow.progress[i].0 as f64, flow.progress[i].1 as f64);
    let span = next.0 - prev.0;
    if span <= 0.0 {
        return next.1;
    }
    prev.1 + (next.1 - prev.1) * (t_ns - prev.0) / span
}

/// The windowed-Jain window: k·T0 with k = max([`MIN_WINDOW_T0`],
/// ⌈[`CHUNKS_PER_WINDOW`]·N·chunk·8/R / T0⌉), so that at the fair share R/N
/// every flow completes at least [`CHUNKS_PER_WINDOW`] operations in a
/// window (goodput within a window is then measured, not an artefact of the
/// chunk granularity). ns; 0 when T0 or R is 0.
pub fn jain_window_ns(setup: &Setup, cal: &Calibration, senders: usize) -> u64 {
    let t0 = cal.t0.p50_ns;
    if t0 == 0 || setup.bottleneck_bps == 0 {
        return 0;
    }
    let chunks_ns = bytes_to_ns(
        (CHUNKS_PER_WINDOW * senders.max(1) as u64 * setup.chunk) as f64,
        setup.bottleneck_bps,
    );
    let k = ((chunks_ns / t0 as f64).ceil() as u64).max(MIN_WINDOW_T0);
    k * t0
}

/// The queue sample nearest to `t_ns`.
fn nearest(queue: &[QueueSample], t_ns: i64) -> Option<&QueueSample> {
    queue.iter().min_by_key(|s| s.t_ns.abs_diff(t_ns))
}

/// The last sample at or before `t_ns` among `queue`, else the first.
/// Every [`Metrics`] field of one run per `docs/congestion-evaluation.md` (see each field's
/// doc); `f_c` stays `None` ([`fill_f_c`] compares runs).
///
/// - ICT: the latest flow end (the common start is 0). ICT* = ΣW_i/R + T0
///   (T0 = the calibration's p50). `ict_over_ideal` 0 when ICT* is 0.
/// - FCT = end − start per flow; `spread` = max/min, 0 when there is no
///   flow or a zero FCT. `jain` over delivered bytes / FCT (0 without flows).
/// - `jain_windowed`: windows of [`jain_window_ns`] from 10·T0 up to ICT;
///   a window counts when ≥ 2 flows are active through all of it, and its
///   index is over those flows' bytes in it ([`delivered_at`]); the median
///   over windows, `None` when no window counts.
/// - Queue metrics from the samples at t ≥ 0: drops and CE marks are the
///   last sample's counter minus the first's; `drops_after_first_rtt`
///   subtracts the packets the senders lost in their PDCs' first round
///   trip (`Flow::first_rtt_resent`): each flow's own first round trip,
///   which on a loaded host starts milliseconds after the common start.
///   With a trimming bottleneck (`Setup::trim`) those losses were trims,
///   and `trimmed_after_first_rtt` subtracts them from the trims instead.
///   Steady p50/p99 over samples in
///   [10·T0, ICT] (0 without). Utilisation = TBF bytes sent between the
///   samples nearest 0 and ICT / (R·ICT/8) (0 without samples or time).
/// - Ratios with a zero denominator are 0; victim CIFs are `None` without a
///   victim, an isolated baseline or with a zero denominator.
pub fn compute(run: &Run, setup: &Setup, cal: &Calibration) -> Metrics {
    let r = setup.bottleneck_bps;
    let t0 = cal.t0.p50_ns;
    let flows = &run.flows;

    let ict_ns = flows.iter().map(|f| f.end_ns).max().unwrap_or(0);
    let wire: u64 = flows.iter().map(|f| f.wire_bytes).sum();
    let ideal_ns = bytes_to_ns(wire as f64, r).round() as u64 + t0;

    let fcts: Vec<u64> = flows
        .iter()
        .map(|f| f.end_ns.saturating_sub(f.start_ns))
        .collect();
    let (min_fct, max_fct) = (
        fcts.iter().copied().min().unwrap_or(0),
        fcts.iter().copied().max().unwrap_or(0),
    );
    let goodputs: Vec<f64> = flows
        .iter()
        .zip(&fcts)
        .map(|(f, &fct)| ratio(delivered(f) as f64, fct as f64))
        .collect();

    let window_ns = jain_window_ns(setup, cal, flows.len());
    let jain_windowed = windowed_jain(flows, STEADY_AFTER_T0 * t0, window_ns, ict_ns);

    // The bottleneck during the run: samples from the common start on.
    let queue: Vec<QueueSample> = run.queue.iter().copied().filter(|s| s.t_ns >= 0).collect();
    let (first, last) = (queue.first(), queue.last());
    let counter = |f: fn(&QueueSample) -> u64| match (first, last) {
        (Some(a), Some(b)) => f(b).saturating_sub(f(a)),
        _ => 0,
    };
    let drops = counter(|s| s.drops);
    let trimmed = counter(|s| s.trimmed);
    let ce_marks = counter(|s| s.ce_marks);
    let virtual_overflows = counter(|s| s.vq_overflows);
    // The senders resent these first-round-trip losses once each; on the
    // lab's one bottleneck they are its drops of first-window packets.
    let first_rtt_lost: u64 = flows.iter().map(|f| f.first_rtt_resent).sum();
    let (drops_after_first_rtt, trimmed_after_first_rtt) = if setup.trim {
        (drops, trimmed.saturating_sub(first_rtt_lost))
    } else {
        (drops.saturating_sub(first_rtt_lost), trimmed)
    };
    let peak_queue_bytes = queue.iter().map(|s| s.backlog_bytes).max().unwrap_or(0);
    let mut steady: Vec<u64> = queue
        .iter()
        .filter(|s| s.t_ns >= (STEADY_AFTER_T0 * t0) as i64 && s.t_ns <= ict_ns as i64)
        .map(|s| s.backlog_bytes)
        .collect();
    steady.sort_unstable();
    let steady_queue_p50_bytes = percentile_sorted(&steady, 0.5).unwrap_or(0);
    let steady_queue_p99_bytes = percentile_sorted(&steady, 0.99).unwrap_or(0);
    let utilisation = match (nearest(&queue, 0), nearest(&queue, ict_ns as i64)) {
        (Some(a), Some(b)) => ratio(
            b.sent_bytes.saturating_sub(a.sent_bytes) as f64,
            r as f64 * ict_ns as f64 / 8e9,
        ),
        _ => 0.0,
    };

    let retransmits: u64 = flows.iter().map(|f| f.retransmits).sum();
    let first_tx: u64 = flows
        .iter()
        .map(|f| f.tx_data.saturating_sub(f.retransmits))
        .sum();

    let rx = &run.receiver;
    // Each run's CIFs divide by the victim alone just before it, with the
    // same daemons; a single calibration's p99 alone moved 565–3,189 µs
    // between invocations on two vCPUs and decided most of the CIF.
    let isolated = run
        .victim
        .as_ref()
        .and_then(|v| v.isolated.as_ref())
        .or(cal.victim_isolated.as_ref());
    let (victim_cif_avg, victim_cif_p99, victim_bw_cif) = match (&run.victim, isolated) {
        (Some(v), Some(iso)) => {
            let c = &v.congested;
            let opt = |n: f64, d: f64| (d > 0.0).then(|| n / d);
            (
                opt(c.mean_ns, iso.mean_ns),
                opt(c.p99_ns as f64, iso.p99_ns as f64),
                opt(iso.ops_per_s, c.ops_per_s),
            )
        }
        _ => (None, None, None),
    };

    Metrics {
        ict_ns,
        ideal_ns,
        ict_over_ideal: ratio(ict_ns as f64, ideal_ns as f64),
        spread: ratio(max_fct as f64, min_fct as f64),
        jain: jain(&goodputs),
        jain_windowed,
        jain_window_ns: window_ns,
        drops,
        drops_after_first_rtt,
        trimmed,
        trimmed_after_first_rtt,
        virtual_overflows,
        retransmits_per_packet: ratio(retransmits as f64, first_tx as f64),
        rtos: flows.iter().map(|f| f.rtos).sum(),
        peak_queue_bytes,
        steady_queue_p50_bytes,
        steady_queue_p99_bytes,
        steady_delay_p50_ns: bytes_to_ns(steady_queue_p50_bytes as f64, r).round() as u64,
        utilisation,
        acks_per_data: ratio(rx.tx_acks as f64, rx.rx_data as f64),
        ce_per_data: ratio(ce_marks as f64, rx.rx_data as f64),
        victim_cif_avg,
        victim_cif_p99,
        victim_bw_cif,
        f_c: None,
        failed_flows: flows.iter().filter(|f| f.error.is_some()).count(),
        cpu_busy: run.cpu_busy.unwrap_or(0.0),
        cpu_steal: run.cpu_steal.unwrap_or(0.0),
    }
}

/// Median over windows [from + j·w, from + (j+1)·w) ⊆ [from, until] of the
/// Jain index of the bytes each flow active through the whole window
/// delivered in it; windows with < 2 such flows are skipped.
fn windowed_jain(flows: &[Flow], from: u64, w: u64, until: u64) -> Option<f64> {
    if w == 0 {
        return None;
    }
    let mut values = Vec::new();
    let mut a = from;
    while a + w <= until {
        let b = a + w;
        let got: Vec<f64> = flows
            .iter()
            .filter(|f| f.start_ns <= a && f.end_ns >= b)
            .map(|f| delivered_at(f, b as f64) - delivered_at(f, a as f64))
            .collect();
        if got.len() >= 2 {
            values.push(jain(&got));
        }
        a = b;
    }
    values.sort_by(f64::total_cmp);
    median_sorted(&values)
}

/// The median of sorted values (mean of the middle two for an even count).
fn median_sorted(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// The PFT control factor F_C = (B_C·D_0)/(B_0·D_C) (`docs/congestion-evaluation.md` 10) of
/// every run with a victim against the `none` run with the same (senders,
/// size, seed): B = the victim's ops/s, D = its p50 latency while the
/// incast ran. The `none` run itself gets 1. Runs without a victim, without
/// such a `none` run or with a zero B_0 or D_C keep `None`. The calibration
/// is not needed: F_C compares two congested runs, not the isolated victim.
pub fn fill_f_c(runs: &mut [Run], _cal: &Calibration) {
    let baselines: BTreeMap<(usize, u64, u64), (f64, f64)> = runs
        .iter()
        .filter(|r| r.cc == "none")
        .filter_map(|r| {
            let v = r.victim.as_ref()?;
            Some((
                (r.senders, r.size, r.seed),
                (v.congested.ops_per_s, v.congested.p50_ns as f64),
            ))
        })
        .collect();
    for run in runs.iter_mut() {
        let Some(v) = &run.victim else { continue };
        let Some(&(b0, d0)) = baselines.get(&(run.senders, run.size, run.seed)) else {
            continue;
        };
        let (bc, dc) = (v.congested.ops_per_s, v.congested.p50_ns as f64);
        let den = b0 * dc;
        run.metrics.f_c = (den > 0.0).then(|| bc * d0 / den);
    }
}

/// Median, 90th percentile (nearest rank) and maximum of one metric over
/// the seeds of a group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// 90th percentile, nearest rank.
    pub p90: f64,
    /// Maximum.
    pub max: f64,
    /// Runs that had a value.
    pub count: usize,
}

impl Stat {
    /// The statistic of `values`; `None` when empty.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        let mut v: Vec<f64> = values.into_iter().collect();
        v.sort_by(f64::total_cmp);
        Some(Self {
            median: median_sorted(&v)?,
            p90: percentile_sorted(&v, 0.9)?,
            max: *v.last()?,
            count: v.len(),
        })
    }
}

/// One (cc, senders, size) group over its seeds: median / p90 / max of
/// every numeric metric. Optional metrics are `None` when no run had one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Congestion-control mode.
    pub cc: String,
    /// N.
    pub senders: usize,
    /// S, payload bytes per flow.
    pub size: u64,
    /// The seeds summarized, in run order.
    pub seeds: Vec<u64>,
    /// ICT, ns.
    pub ict_ns: Stat,
    /// ICT / ICT*.
    pub ict_over_ideal: Stat,
    /// max FCT / min FCT.
    pub spread: Stat,
    /// Whole-flow Jain index.
    pub jain: Stat,
    /// Windowed Jain index.
    pub jain_windowed: Option<Stat>,
    /// TBF drops.
    pub drops: Stat,
    /// TBF drops of packets sent after their flow's first round trip.
    pub drops_after_first_rtt: Stat,
    /// Packets the bottleneck trimmed.
    #[serde(default)]
    pub trimmed: Stat,
    /// Of those, packets sent after their flow's first round trip.
    #[serde(default)]
    pub trimmed_after_first_rtt: Stat,
    /// Frames that found the virtual queue full
    /// ([`Metrics::virtual_overflows`]).
    #[serde(default)]
    pub virtual_overflows: Stat,
    /// Retransmits per first transmission.
    pub retransmits_per_packet: Stat,
    /// RTOs.
    pub rtos: Stat,
    /// Peak TBF backlog, bytes.
    pub peak_queue_bytes: Stat,
    /// Steady TBF backlog p50, bytes.
    pub steady_queue_p50_bytes: Stat,
    /// Steady TBF backlog p99, bytes.
    pub steady_queue_p99_bytes: Stat,
    /// Steady queueing delay p50, ns.
    pub steady_delay_p50_ns: Stat,
    /// Bottleneck utilisation.
    pub utilisation: Stat,
    /// ACK-type packets per data packet.
    pub acks_per_data: Stat,
    /// CE marks per data packet.
    pub ce_per_data: Stat,
    /// Victim latency CIF, mean.
    pub victim_cif_avg: Option<Stat>,
    /// Victim latency CIF, p99.
    pub victim_cif_p99: Option<Stat>,
    /// Victim bandwidth CIF.
    pub victim_bw_cif: Option<Stat>,
    /// PFT control factor.
    pub f_c: Option<Stat>,
    /// Failed flows.
    pub failed_flows: Stat,
    /// Share of the CPUs busy during the runs.
    pub cpu_busy: Stat,
    /// Share of the CPU time the hypervisor took during the runs.
    pub cpu_steal: Stat,
}

/// The order modes are shown in: the baseline first.
pub fn cc_rank(cc: &str) -> usize {
    ["none", "nscc", "rccc", "nscc+rccc", "pft"]
        .iter()
        .position(|&m| m == cc)
        .unwrap_or(usize::MAX)
}

/// One [`Summary`] per (cc, senders, size) present in `runs`, ordered by
/// senders, size, then mode (none, nscc, rccc, nscc+rccc, pft, others by
/// name).
pub fn summarize(runs: &[Run]) -> Vec<Summary> {
    let mut groups: BTreeMap<(usize, u64, usize, &str), Vec<&Run>> = BTreeMap::new();
    for r in runs {
        groups
            .entry((r.senders, r.size, cc_rank(&r.cc), r.cc.as_str()))
            .or_default()
            .push(r);
    }
    groups
        .into_iter()
        .map(|((senders, size, _, cc), rs)| summary(cc, senders, size, &rs))
        .collect()
}

fn summary(cc: &str, senders: usize, size: u64, rs: &[&Run]) -> Summary {
    // Every group has at least one run, so `Stat::of` over all of them is
    // `Some`; the default only keeps this total.
    let empty = Stat {
        median: 0.0,
        p90: 0.0,
        max: 0.0,
        count: 0,
    };
    let all = |f: fn(&Metrics) -> f64| Stat::of(rs.iter().map(|r| f(&r.metrics))).unwrap_or(empty);
    let some = |f: fn(&Metrics) -> Option<f64>| Stat::of(rs.iter().filter_map(|r| f(&r.metrics)));
    Summary {
        cc: cc.to_string(),
        senders,
        size,
        seeds: rs.iter().map(|r| r.seed).collect(),
        ict_ns: all(|m| m.ict_ns as f64),
        ict_over_ideal: all(|m| m.ict_over_ideal),
        spread: all(|m| m.spread),
        jain: all(|m| m.jain),
        jain_windowed: some(|m| m.jain_windowed),
        drops: all(|m| m.drops as f64),
        drops_after_first_rtt: all(|m| m.drops_after_first_rtt as f64),
        trimmed: all(|m| m.trimmed as f64),
        trimmed_after_first_rtt: all(|m| m.trimmed_after_first_rtt as f64),
        virtual_overflows: all(|m| m.virtual_overflows as f64),
        retransmits_per_packet: all(|m| m.retransmits_per_packet),
        rtos: all(|m| m.rtos as f64),
        peak_queue_bytes: all(|m| m.peak_queue_bytes as f64),
        steady_queue_p50_bytes: all(|m| m.steady_queue_p50_bytes as f64),
        steady_queue_p99_bytes: all(|m| m.steady_queue_p99_bytes as f64),
        steady_delay_p50_ns: all(|m| m.steady_delay_p50_ns as f64),
        utilisation: all(|m| m.utilisation),
        acks_per_data: all(|m| m.acks_per_data),
        ce_per_data: all(|m| m.ce_per_data),
        victim_cif_avg: some(|m| m.victim_cif_avg),
        victim_cif_p99: some(|m| m.victim_cif_p99),
        victim_bw_cif: some(|m| m.victim_bw_cif),
        f_c: some(|m| m.f_c),
        failed_flows: all(|m| m.failed_flows as f64),
        cpu_busy: all(|m| m.cpu_busy),
        cpu_steal: all(|m| m.cpu_steal),
    }
}

/// A bound a metric must meet.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Bound {
    /// value ≤ bound.
    AtMost(f64),
    /// value ≥ bound.
    AtLeast(f64),
    /// lo ≤ value ≤ hi.
    Within(f64, f64),
}

impl Bound {
    /// Signed distance from the value to the bound in the metric's unit:
    /// ≥ 0 is met with that much room, < 0 is missed by that much.
    pub fn margin(self, value: f64) -> f64 {
        match self {
            Self::AtMost(b) => b - value,
            Self::AtLeast(b) => value - b,
            Self::Within(lo, hi) => (value - lo).min(hi - value),
        }
    }

    /// The bound the margin is measured against (for a relative margin).
    fn reference(self, value: f64) -> f64 {
        match self {
            Self::AtMost(b) | Self::AtLeast(b) => b,
            Self::Within(lo, hi) => {
                if value - lo < hi - value {
                    lo
                } else {
                    hi
                }
            }
        }
    }

    /// "≤ 1.05", "≥ 0.99", "in [a, b]" with `fmt` for the numbers.
    pub fn describe(self, fmt: impl Fn(f64) -> String) -> String {
        match self {
            Self::AtMost(b) => format!("≤ {}", fmt(b)),
            Self::AtLeast(b) => format!("≥ {}", fmt(b)),
            Self::Within(lo, hi) => format!("in [{}, {}]", fmt(lo), fmt(hi)),
        }
    }
}

/// The unit a check's numbers are shown in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unit {
    /// A plain ratio or index.
    Ratio,
    /// A count.
    Count,
    /// Nanoseconds (shown as µs).
    Ns,
    /// Bits per second (shown as Mb/s).
    Bps,
}

/// One target or calibration check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetCheck {
    /// What was measured: "rccc N=4 S=1 MiB", "calibration", "sender 3".
    pub subject: String,
    /// The metric ("ICT/ideal (median)", …).
    pub metric: String,
    /// The measured value.
    pub value: f64,
    /// The bound it must meet.
    pub bound: Bound,
    /// The unit of `value` and `bound`.
    pub unit: Unit,
    /// Whether it met the bound.
    pub pass: bool,
    /// [`Bound::margin`]: ≥ 0 room to spare, < 0 missed by.
    pub margin: f64,
    /// The margin relative to the bound (0 when the bound is 0).
    pub margin_rel: f64,
}

impl TargetCheck {
    fn new(subject: &str, metric: &str, value: f64, bound: Bound, unit: Unit) -> Self {
        let margin = bound.margin(value);
        Self {
            subject: subject.to_string(),
            metric: metric.to_string(),
            value,
            bound,
            unit,
            pass: margin >= 0.0,
            margin,
            margin_rel: ratio(margin, bound.reference(value).abs()),
        }
    }

    /// A number in this check's unit, for people.
    pub fn show(&self, v: f64) -> String {
        match self.unit {
            Unit::Ratio => format!("{v:.3}"),
            // A median over an even number of runs can fall between two
            // counts; rounding 0.5 to "0" made "0 ≤ 0: MISS".
            Unit::Count if v.fract() != 0.0 => format!("{v:.1}"),
            Unit::Count => format!("{v:.0}"),
            Unit::Ns => format!("{:.1} µs", v / 1e3),
            Unit::Bps => format!("{:.0} Mb/s", v / 1e6),
        }
    }

    /// "PASS" or "MISS".
    pub fn verdict(&self) -> &'static str {
        if self.pass { "PASS" } else { "MISS" }
    }

    /// "met with 0.030 (2.9 %) to spare" / "missed by 0.020 (1.9 %)".
    pub fn margin_text(&self) -> String {
        let rel = if self.margin_rel == 0.0 {
            String::new()
        } else {
            format!(" ({:.1} %)", self.margin_rel.abs() * 100.0)
        };
        if self.pass {
            format!("{} to spare{rel}", self.show(self.margin))
        } else {
            format!("missed by {}{rel}", self.show(-self.margin))
        }
    }
}

/// Largest N the targets apply to.
pub const TARGET_MAX_SENDERS: usize = 16;
/// Smallest flow size the targets apply to, bytes.
pub const TARGET_MIN_SIZE: u64 = 256 * 1024;

/// The `docs/congestion-evaluation.md` targets for one group's medians, as the lab holds them
/// (empty where it sets none: N > 16, S < 256 KiB, and the modes other than `rccc` and `nscc`,
/// which are measured only):
/// - rccc: ICT ≤ 1.05·ICT*, spread ≤ 1.10, Jain ≥ 0.99, RTOs 0, no drops
///   after the first RTT, victim CIF p99 ≤ 2 (when there is a victim);
/// - nscc: ICT ≤ 1.10·ICT*, Jain ≥ 0.90, RTOs 0, steady queueing delay in
///   0.5–2 × the NSCC target delay. The target delay is `target_qdelay`
///   (`docs/protocol-notes.md` §5.2 table): 0.75 × the daemons' fabric RTT
///   with a trimming bottleneck (`Setup::trim`), 1.0 × without.
///
/// The set-up is not consulted: the bounds are fixed, whatever R and
/// buffer the invocation used; the report prints both beside the checks.
pub fn check_targets(s: &Summary, setup: &Setup, cal: &Calibration) -> Vec<TargetCheck> {
    if s.senders > TARGET_MAX_SENDERS || s.size < TARGET_MIN_SIZE {
        return Vec::new();
    }
    let subject = format!("{} N={} S={}", s.cc, s.senders, size_label(s.size));
    let check = |metric: &str, value: f64, bound: Bound, unit: Unit| {
        TargetCheck::new(&subject, metric, value, bound, unit)
    };
    let mut out = Vec::new();
    match s.cc.as_str() {
        "rccc" => {
            out.push(check(
                "ICT/ideal",
                s.ict_over_ideal.median,
                Bound::AtMost(1.05),
                Unit::Ratio,
            ));
            out.push(check(
                "spread",
                s.spread.median,
                Bound::AtMost(1.10),
                Unit::Ratio,
            ));
            out.push(check(
                "Jain",
                s.jain.median,
                Bound::AtLeast(0.99),
                Unit::Ratio,
            ));
            out.push(check(
                "RTOs",
                s.rtos.median,
                Bound::AtMost(0.0),
                Unit::Count,
            ));
            // A trimmed packet is resent as a dropped one is: with a
            // trimming bottleneck both count.
            out.push(if setup.trim {
                check(
                    "drops and trims after the first RTT",
                    s.drops_after_first_rtt.median + s.trimmed_after_first_rtt.median,
                    Bound::AtMost(0.0),
                    Unit::Count,
                )
            } else {
                check(
                    "drops after the first RTT",
                    s.drops_after_first_rtt.median,
                    Bound::AtMost(0.0),
                    Unit::Count,
                )
            });
            if let Some(cif) = s.victim_cif_p99 {
                out.push(check(
                    "victim CIF p99",
                    cif.median,
                    Bound::AtMost(2.0),
                    Unit::Ratio,
                ));
            }
        }
        "nscc" => {
            out.push(check(
                "ICT/ideal",
                s.ict_over_ideal.median,
                Bound::AtMost(1.10),
                Unit::Ratio,
            ));
            out.push(check(
                "Jain",
                s.jain.median,
                Bound::AtLeast(0.90),
                Unit::Ratio,
            ));
            out.push(check(
                "RTOs",
                s.rtos.median,
                Bound::AtMost(0.0),
                Unit::Count,
            ));
            let target = nscc_target_delay_ns(setup, cal) as f64;
            out.push(check(
                if setup.trim {
                    "steady queueing delay (0.5–2 × target_qdelay = 0.75 × fabric RTT)"
                } else {
                    "steady queueing delay (0.5–2 × target_qdelay = fabric RTT)"
                },
                s.steady_delay_p50_ns.median,
                Bound::Within(0.5 * target, 2.0 * target),
                Unit::Ns,
            ));
        }
        _ => {}
    }
    out
}

/// NSCC's `target_qdelay` in the lab, ns: the daemons' fabric RTT
/// (`Setup::fabric_rtt_us`), else their base RTT for a report from before
/// the fabric RTT, else T0 p50 for one older still; × 0.75 with a trimming
/// bottleneck, as the daemons run `--trimming true` there.
pub fn nscc_target_delay_ns(setup: &Setup, cal: &Calibration) -> u64 {
    let rtt = if setup.fabric_rtt_us > 0 {
        setup.fabric_rtt_us * 1000
    } else if setup.base_rtt_us > 0 {
        setup.base_rtt_us * 1000
    } else {
        cal.t0.p50_ns
    };
    if setup.trim { rtt * 3 / 4 } else { rtt }
}

/// The calibration checks (`docs/congestion-evaluation.md`, "Calibrate first"): every
/// sender's solo rate ≥ 1.5·R, and one flow through the bottleneck ≥ 95 %
/// of R.
pub fn check_calibration(setup: &Setup, cal: &Calibration) -> Vec<TargetCheck> {
    let r = setup.bottleneck_bps as f64;
    let mut out: Vec<TargetCheck> = cal
        .solo_bps
        .iter()
        .enumerate()
        .map(|(i, &bps)| {
            TargetCheck::new(
                &format!("sender {}", i + 1),
                "solo rate without the bottleneck",
                bps,
                Bound::AtLeast(1.5 * r),
                Unit::Bps,
            )
        })
        .collect();
    if cal.all_senders_bps > 0.0 {
        out.push(TargetCheck::new(
            "all senders",
            "rate of every sender at once without the bottleneck",
            cal.all_senders_bps,
            Bound::AtLeast(crate::incast::model::FEED_MARGIN * r),
            Unit::Bps,
        ));
    }
    out.push(TargetCheck::new(
        "calibration",
        "single flow through the bottleneck / R",
        cal.single_flow_ratio,
        Bound::AtLeast(0.95),
        Unit::Ratio,
    ));
    out
}

/// "256 KiB", "4 MiB", "1000 B".
pub fn size_label(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::incast::model::{LatencyStats, ReceiverCounters, VictimRun};

    /// A fresh directory under the system's temp dir, removed on drop.
    #[derive(Debug)]
    pub(crate) struct TestDir(std::path::PathBuf);

    impl TestDir {
        pub(crate) fn new(name: &str) -> Self {
            let p = std::env::temp_dir().join(format!("uet-test-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Self(p)
        }

        pub(crate) fn path(&self) -> &std::path::Path {
            &self.0
        }
    }

    impl Drop for TestDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// 1 Gb/s, 5 BDP of 50 KB, 1000-byte chunks.
    pub(crate) fn setup() -> Setup {
        Setup {
            bottleneck_bps: 1_000_000_000,
            buffer_bytes: 31_250,
            ecn: Some((1_250, 5_000)),
            jitter_ns: 0,
            victim: false,
            trim: false,
            seeds: 3,
            mtu: 1500,
            backend: "xdp".into(),
            chunk: 1000,
            payload_per_packet: 1400,
            header_bytes_per_packet: 100,
            cpus: 2,
            load_before: 0.5,
            base_rtt_us: 0,
            fabric_rtt_us: 0,
            rto_init_us: 0,
            rccc_ecn_rate: true,
        }
    }

    #[test]
    fn nsccs_target_delay_is_the_fabric_rtt_else_the_base_rtt_else_t0_and_less_with_trimming() {
        let c = cal(120_000);
        let mut s = setup();
        assert_eq!(nscc_target_delay_ns(&s, &c), 120_000);
        s.base_rtt_us = 360;
        assert_eq!(nscc_target_delay_ns(&s, &c), 360_000);
        s.fabric_rtt_us = 120;
        assert_eq!(nscc_target_delay_ns(&s, &c), 120_000);
        // A trimming bottleneck: the daemons' NSCC targets 0.75 × it.
        s.trim = true;
        assert_eq!(nscc_target_delay_ns(&s, &c), 90_000);
    }

    pub(crate) fn cal(t0_ns: u64) -> Calibration {
        Calibration {
            t0: LatencyStats {
                count: 100,
                mean_ns: t0_ns as f64,
                p50_ns: t0_ns,
                p99_ns: 2 * t0_ns,
                max_ns: 3 * t0_ns,
                ops_per_s: 1e9 / t0_ns.max(1) as f64,
            },
            t0_batch_p50_ns: vec![t0_ns; 4],
            bdp_bytes: t0_ns / 8,
            solo_bps: vec![2e9, 1.2e9],
            single_flow_bps: 0.97e9,
            single_flow_ratio: 0.97,
            victim_isolated: None,
            all_senders_bps: 3e9,
            requested_bottleneck_bps: 1_000_000_000,
            fit_steps: Vec::new(),
        }
    }

    /// A flow sending `rate` bytes per µs from `start` to `end` (ns), one
    /// progress point every 10 µs.
    pub(crate) fn flow(sender: usize, start: u64, end: u64, bytes_per_us: u64) -> Flow {
        let progress: Vec<(u64, u64)> = (1..)
            .map(|i| start + i * 10_000)
            .take_while(|&t| t <= end)
            .map(|t| (t, (t - start) / 1000 * bytes_per_us))
            .collect();
        let bytes = progress.last().map_or(0, |p| p.1);
        Flow {
            sender,
            bytes,
            wire_bytes: bytes,
            start_ns: start,
            end_ns: end,
            progress,
            retransmits: 0,
            first_rtt_resent: 0,
            rtos: 0,
            tx_data: bytes / 1000,
            tail_probes: 0,
            sack_inferred: 0,
            error: None,
        }
    }

    pub(crate) fn sample(t_ns: i64, backlog_bytes: u64) -> QueueSample {
        QueueSample {
            t_ns,
            backlog_bytes,
            backlog_packets: backlog_bytes / 1500,
            drops: 0,
            sent_bytes: 0,
            vq_bytes: backlog_bytes / 2,
            ce_marks: 0,
            vq_overflows: 0,
            trimmed: 0,
        }
    }

    pub(crate) fn run(cc: &str, seed: u64, flows: Vec<Flow>, queue: Vec<QueueSample>) -> Run {
        Run {
            cc: cc.into(),
            senders: flows.len(),
            size: flows.first().map_or(0, |f| f.bytes),
            seed,
            flows,
            queue,
            cc_trace_sender: 1,
            cc_trace: Vec::new(),
            receiver: ReceiverCounters::default(),
            victim: None,
            cpu_busy: None,
            cpu_steal: None,
            metrics: Metrics::default(),
        }
    }

    /// A whole invocation with plausible data: every mode × N × size ×
    /// seed, flows sharing 1 Gb/s with a per-mode inefficiency, the queue
    /// sampled every 10 µs, a traced sender, a victim; metrics computed.
    pub(crate) fn synthetic_report(
        modes: &[&str],
        senders: &[usize],
        sizes: &[u64],
        seeds: u64,
    ) -> crate::incast::model::Report {
        use crate::incast::model::{CcSample, Report};
        let mut setup = setup();
        setup.chunk = 16 * 1024;
        setup.buffer_bytes = 5 * 6_250;
        setup.victim = true;
        let mut cal = cal(50_000);
        cal.bdp_bytes = 6_250;
        cal.victim_isolated = Some(LatencyStats {
            count: 1000,
            mean_ns: 60_000.0,
            p50_ns: 55_000,
            p99_ns: 90_000,
            max_ns: 120_000,
            ops_per_s: 16_000.0,
        });
        let mut runs = Vec::new();
        for &cc in modes {
            let slow = match cc {
                "none" => 1.35,
                "nscc" => 1.06,
                _ => 1.02,
            };
            for &n in senders {
                for &size in sizes {
                    for seed in 0..seeds {
                        let fair_ns = size as f64 * 8.0 * n as f64; // at 1 Gb/s
                        let flows: Vec<Flow> = (0..n)
                            .map(|i| {
                                let skew = 1.0 + 0.03 * ((i as u64 + seed) % 3) as f64;
                                let end = (fair_ns * slow * skew) as u64 + 50_000;
                                let start = 1_000 * i as u64;
                                let chunks = size / setup.chunk;
                                let progress = (1..=chunks)
                                    .map(|c| {
                                        let t = start + (end - start) * c / chunks;
                                        (t, c * setup.chunk)
                                    })
                                    .collect();
                                Flow {
                                    sender: i + 1,
                                    bytes: size,
                                    wire_bytes: size / 1400 * 1500 + 1500,
                                    start_ns: start,
                                    end_ns: end,
                                    progress,
                                    retransmits: if cc == "none" { 7 } else { 0 },
                                    first_rtt_resent: 0,
                                    rtos: u64::from(cc == "none"),
                                    tx_data: size / 1400 + 8,
                                    tail_probes: 0,
                                    sack_inferred: 0,
                                    error: None,
                                }
                            })
                            .collect();
                        let ict = flows.iter().map(|f| f.end_ns).max().unwrap_or(0);
                        let peak = if cc == "none" {
                            31_000
                        } else {
                            4_000 + 500 * n as u64
                        };
                        let queue = (-5..=(ict / 10_000) as i64 + 5)
                            .map(|k| {
                                let t = k * 10_000;
                                let mut s = sample(
                                    t,
                                    if t < 0 || t > ict as i64 {
                                        0
                                    } else {
                                        peak - (k as u64 * 97) % (peak / 2)
                                    },
                                );
                                s.drops = if cc == "none" {
                                    (t.max(0) / 100_000) as u64
                                } else {
                                    u64::from(t > 20_000)
                                };
                                s.sent_bytes = (t.max(0) as u64).min(ict) / 8 * 95 / 100;
                                s.ce_marks = (t.max(0) / 20_000) as u64;
                                s
                            })
                            .collect();
                        let cc_trace = (0..(ict / 20_000) as i64)
                            .map(|k| CcSample {
                                t_ns: k * 20_000,
                                cwnd: 20_000 + (k as u64 % 7) * 1000,
                                inflight: 15_000 + (k % 5) * 1000,
                                backlog: size / 2,
                                credit: cc.contains("rccc").then_some(3_000 + (k % 3) * 500),
                            })
                            .collect();
                        let mut r = run(cc, seed, flows, queue);
                        r.size = size;
                        r.cc_trace = cc_trace;
                        r.receiver = ReceiverCounters {
                            rx_data: n as u64 * (size / 1400 + 1),
                            tx_acks: n as u64 * (size / 1400 + 1) / 4,
                            tx_nacks: 0,
                            rx_ce: 3,
                            tx_packets: n as u64 * (size / 1400 + 1) / 4,
                            ..ReceiverCounters::default()
                        };
                        r.victim = Some(VictimRun {
                            congested: LatencyStats {
                                count: 100,
                                mean_ns: 70_000.0 * slow,
                                p50_ns: (60_000.0 * slow) as u64,
                                p99_ns: (150_000.0 * slow) as u64,
                                max_ns: 400_000,
                                ops_per_s: 14_000.0 / slow,
                            },
                            isolated: None,
                        });
                        r.metrics = compute(&r, &setup, &cal);
                        runs.push(r);
                    }
                }
            }
        }
        fill_f_c(&mut runs, &cal);
        Report {
            command: "uet lab incast --senders 4 --size 1MiB --cc all --seeds 2 --out /tmp/x"
                .into(),
            setup,
            calibration: cal,
            runs,
        }
    }

    #[test]
    fn synthetic_report_orders_modes_as_expected() {
        let r = synthetic_report(&["none", "rccc"], &[4], &[256 * 1024], 2);
        let s = summarize(&r.runs);
        let (none, rccc) = (&s[0], &s[1]);
        assert!(none.ict_over_ideal.median > rccc.ict_over_ideal.median);
        assert!(none.peak_queue_bytes.median > rccc.peak_queue_bytes.median);
        assert!(none.drops.median > rccc.drops.median);
        assert_eq!(rccc.f_c.map(|f| f.count), Some(2));
        assert!(rccc.f_c.unwrap().median > 1.0);
        assert!(rccc.jain_windowed.is_some());
        assert!(
            (rccc.utilisation.median - 0.95).abs() < 0.01,
            "{:?}",
            rccc.utilisation
        );
    }

    #[test]
    fn jain_of_equal_flows_is_one_and_of_one_to_three_is_four_fifths() {
        assert_eq!(jain(&[5.0, 5.0, 5.0, 5.0]), 1.0);
        assert!((jain(&[1.0, 3.0]) - 0.8).abs() < 1e-12);
        assert_eq!(jain(&[7.0]), 1.0);
        assert_eq!(jain(&[]), 0.0);
        assert_eq!(jain(&[0.0, 0.0]), 0.0);
    }

    #[test]
    fn whole_flow_and_windowed_jain_of_flows_at_one_and_three() {
        let r = run(
            "rccc",
            1,
            vec![flow(1, 0, 1_000_000, 100), flow(2, 0, 1_000_000, 300)],
            Vec::new(),
        );
        let m = compute(&r, &setup(), &cal(1000));
        assert!((m.jain - 0.8).abs() < 1e-9, "{}", m.jain);
        // k = max(8, 4 chunks · 2 flows · 1000 B · 8 / 1 Gb/s / 1 µs) = 64.
        assert_eq!(m.jain_window_ns, 64_000);
        let w = m.jain_windowed.expect("windows after 10·T0 with 2 flows");
        assert!((w - 0.8).abs() < 1e-9, "{w}");

        let equal = run(
            "rccc",
            1,
            vec![flow(1, 0, 1_000_000, 200), flow(2, 0, 1_000_000, 200)],
            Vec::new(),
        );
        let m = compute(&equal, &setup(), &cal(1000));
        assert!((m.jain - 1.0).abs() < 1e-12);
        assert!((m.jain_windowed.unwrap() - 1.0).abs() < 1e-12);
        assert!((m.spread - 1.0).abs() < 1e-12);
    }

    #[test]
    fn windowed_jain_skips_windows_with_one_active_flow() {
        // Flow 2 runs only in the first 100 µs: no window after 10·T0 has
        // two flows active through it.
        let r = run(
            "nscc",
            1,
            vec![flow(1, 0, 1_000_000, 100), flow(2, 0, 100_000, 100)],
            Vec::new(),
        );
        let m = compute(&r, &setup(), &cal(20_000));
        assert_eq!(m.jain_windowed, None);
        assert!((m.spread - 10.0).abs() < 1e-12);
    }

    #[test]
    fn ict_over_ideal_uses_wire_bytes_rate_and_t0() {
        let mut f1 = flow(1, 0, 2_000_000, 50);
        let mut f2 = flow(2, 5_000, 2_255_000, 50);
        f1.wire_bytes = 125_000;
        f2.wire_bytes = 125_000;
        let m = compute(
            &run("rccc", 1, vec![f1, f2], Vec::new()),
            &setup(),
            &cal(50_000),
        );
        // ΣW = 250 kB at 1 Gb/s = 2 ms, + T0 = 50 µs.
        assert_eq!(m.ideal_ns, 2_050_000);
        assert_eq!(m.ict_ns, 2_255_000);
        assert!((m.ict_over_ideal - 1.1).abs() < 1e-12);
        // FCTs 2 ms and 2.25 ms.
        assert!((m.spread - 1.125).abs() < 1e-12);
    }

    #[test]
    fn drops_count_from_the_start_and_after_each_flows_first_round_trip() {
        let mut q = Vec::new();
        for (t, d) in [
            (-1000, 2),
            (0, 5),
            (30_000, 8),
            (50_000, 9),
            (60_000, 12),
            (2_000_000, 15),
        ] {
            let mut s = sample(t, 0);
            s.drops = d;
            s.ce_marks = 2 * d;
            // The virtual queue overflowed for fewer of them.
            s.vq_overflows = d / 2;
            q.push(s);
        }
        // Two senders lost 3 and 1 packets of their first round trips (the
        // second started 1.5 ms late, so its losses came long after T0).
        let mut f = vec![flow(1, 0, 2_000_000, 50), flow(2, 1_500_000, 2_000_000, 50)];
        f[0].first_rtt_resent = 3;
        f[1].first_rtt_resent = 1;
        let mut r = run("none", 1, f, q);
        r.receiver.rx_data = 20;
        r.receiver.tx_acks = 5;
        let m = compute(&r, &setup(), &cal(50_000));
        assert_eq!(m.drops, 10);
        assert_eq!(m.drops_after_first_rtt, 6);
        // From the run's first sample on, as the drops: 7 - 2.
        assert_eq!(m.virtual_overflows, 5);
        // More first-round-trip resends than drops (losses elsewhere): none
        // is counted after the first round trip, not a wrapped count.
        r.flows[0].first_rtt_resent = 30;
        assert_eq!(compute(&r, &setup(), &cal(50_000)).drops_after_first_rtt, 0);
        // Through a trimming bottleneck the first round trips' losses were
        // trims: the trims after them are the rest.
        r.flows[0].first_rtt_resent = 3;
        for (s, trims) in r.queue.iter_mut().zip([0, 0, 4, 6, 7, 9]) {
            s.trimmed = trims;
        }
        let mut trimming = setup();
        trimming.trim = true;
        let t = compute(&r, &trimming, &cal(50_000));
        assert_eq!((t.trimmed, t.trimmed_after_first_rtt), (9, 5));
        assert_eq!(t.drops_after_first_rtt, 10);
        assert!((m.ce_per_data - 1.0).abs() < 1e-12);
        assert!((m.acks_per_data - 0.25).abs() < 1e-12);
    }

    #[test]
    fn steady_queue_percentiles_skip_the_first_ten_t0_and_the_tail() {
        let t0 = 10_000;
        let mut q = vec![sample(0, 0), sample(50_000, 90_000)];
        // 100 samples in [10·T0, ICT]: backlog 1..=100 (shuffled order).
        for i in 0..100u64 {
            q.push(sample(100_000 + (i as i64) * 1000, (i * 37) % 100 + 1));
        }
        q.push(sample(1_500_000, 80_000)); // after ICT
        let r = run("rccc", 1, vec![flow(1, 0, 1_000_000, 50)], q);
        let m = compute(&r, &setup(), &cal(t0));
        assert_eq!(m.peak_queue_bytes, 90_000);
        assert_eq!(m.steady_queue_p50_bytes, 50);
        assert_eq!(m.steady_queue_p99_bytes, 99);
        // 50 bytes at 1 Gb/s = 400 ns.
        assert_eq!(m.steady_delay_p50_ns, 400);
    }

    #[test]
    fn utilisation_is_bytes_sent_between_the_samples_nearest_zero_and_ict() {
        // ICT = 1 ms at 1 Gb/s: 125 000 bytes possible; 112 500 sent.
        let mut q = Vec::new();
        for (t, sent) in [
            (-20_000, 0),
            (1_000, 1_000),
            (500_000, 60_000),
            (999_000, 113_500),
        ] {
            let mut s = sample(t, 0);
            s.sent_bytes = sent;
            q.push(s);
        }
        let m = compute(
            &run("rccc", 1, vec![flow(1, 0, 1_000_000, 50)], q),
            &setup(),
            &cal(10_000),
        );
        assert!((m.utilisation - 0.9).abs() < 1e-12, "{}", m.utilisation);
    }

    #[test]
    fn retransmits_rtos_and_failed_flows_are_summed() {
        let mut f1 = flow(1, 0, 1_000_000, 50);
        let mut f2 = flow(2, 0, 1_000_000, 50);
        (f1.tx_data, f1.retransmits, f1.rtos) = (110, 10, 1);
        (f2.tx_data, f2.retransmits, f2.rtos) = (105, 5, 2);
        f2.error = Some("timed out".into());
        let m = compute(
            &run("none", 1, vec![f1, f2], Vec::new()),
            &setup(),
            &cal(10_000),
        );
        assert!((m.retransmits_per_packet - 15.0 / 200.0).abs() < 1e-12);
        assert_eq!(m.rtos, 3);
        assert_eq!(m.failed_flows, 1);
    }

    #[test]
    fn degenerate_runs_give_zeros_and_nones() {
        let empty = run("none", 1, Vec::new(), Vec::new());
        let m = compute(&empty, &setup(), &cal(0));
        assert_eq!(m, Metrics::default());
        // One flow that took no time, one sample, zero rate and T0.
        let mut s = setup();
        s.bottleneck_bps = 0;
        let f = Flow {
            progress: Vec::new(),
            ..flow(1, 0, 0, 0)
        };
        let m = compute(&run("rccc", 1, vec![f], vec![sample(0, 10)]), &s, &cal(0));
        assert_eq!((m.ict_ns, m.ideal_ns, m.ict_over_ideal), (0, 0, 0.0));
        assert_eq!((m.spread, m.jain, m.utilisation), (0.0, 0.0, 0.0));
        assert_eq!(m.jain_windowed, None);
        assert_eq!(m.peak_queue_bytes, 10);
        assert_eq!(m.steady_delay_p50_ns, 0);
        // Victim without an isolated baseline: no CIF.
        let mut r = run("rccc", 1, vec![flow(1, 0, 100_000, 50)], Vec::new());
        r.victim = Some(VictimRun {
            congested: LatencyStats::default(),
            isolated: None,
        });
        assert_eq!(compute(&r, &setup(), &cal(1000)).victim_cif_p99, None);
    }

    #[test]
    fn victim_cifs_against_the_isolated_victim() {
        let mut c = cal(10_000);
        c.victim_isolated = Some(LatencyStats {
            mean_ns: 20_000.0,
            p99_ns: 40_000,
            ops_per_s: 50_000.0,
            ..LatencyStats::default()
        });
        let mut r = run("rccc", 1, vec![flow(1, 0, 100_000, 50)], Vec::new());
        r.victim = Some(VictimRun {
            congested: LatencyStats {
                mean_ns: 30_000.0,
                p99_ns: 100_000,
                ops_per_s: 25_000.0,
                ..LatencyStats::default()
            },
            isolated: None,
        });
        let m = compute(&r, &setup(), &c);
        assert_eq!(m.victim_cif_avg, Some(1.5));
        assert_eq!(m.victim_cif_p99, Some(2.5));
        assert_eq!(m.victim_bw_cif, Some(2.0));
        // The run's own measurement alone, where it has one, comes first.
        if let Some(v) = r.victim.as_mut() {
            v.isolated = Some(LatencyStats {
                mean_ns: 10_000.0,
                p99_ns: 20_000,
                ops_per_s: 100_000.0,
                ..LatencyStats::default()
            });
        }
        let m = compute(&r, &setup(), &c);
        assert_eq!(m.victim_cif_avg, Some(3.0));
        assert_eq!(m.victim_cif_p99, Some(5.0));
        assert_eq!(m.victim_bw_cif, Some(4.0));
    }

    fn with_victim(mut r: Run, ops_per_s: f64, p50_ns: u64) -> Run {
        r.victim = Some(VictimRun {
            congested: LatencyStats {
                ops_per_s,
                p50_ns,
                ..LatencyStats::default()
            },
            isolated: None,
        });
        r
    }

    #[test]
    fn f_c_compares_the_victim_with_the_none_run_of_the_same_seed() {
        let fl = || vec![flow(1, 0, 100_000, 50)];
        let mut runs = vec![
            with_victim(run("none", 1, fl(), Vec::new()), 1000.0, 100_000),
            with_victim(run("rccc", 1, fl(), Vec::new()), 2000.0, 50_000),
            with_victim(run("nscc", 2, fl(), Vec::new()), 2000.0, 50_000),
            run("pft", 1, fl(), Vec::new()),
        ];
        fill_f_c(&mut runs, &cal(1000));
        assert_eq!(runs[0].metrics.f_c, Some(1.0));
        // (2000 · 100 µs) / (1000 · 50 µs) = 4.
        assert_eq!(runs[1].metrics.f_c, Some(4.0));
        assert_eq!(runs[2].metrics.f_c, None, "no none run with seed 2");
        assert_eq!(runs[3].metrics.f_c, None, "no victim");
    }

    #[test]
    fn delivered_at_interpolates_between_progress_points() {
        let f = Flow {
            progress: vec![(1_000, 100), (3_000, 500)],
            ..flow(1, 500, 3_000, 0)
        };
        assert_eq!(delivered_at(&f, 0.0), 0.0);
        assert_eq!(delivered_at(&f, 750.0), 50.0);
        assert_eq!(delivered_at(&f, 1_000.0), 100.0);
        assert_eq!(delivered_at(&f, 2_000.0), 300.0);
        assert_eq!(delivered_at(&f, 9_000.0), 500.0);
    }

    pub(crate) fn with_metrics(mut r: Run, m: Metrics) -> Run {
        r.metrics = m;
        r
    }

    #[test]
    fn summarize_groups_by_mode_senders_and_size_with_median_p90_max() {
        let fl = || vec![flow(1, 0, 100_000, 50)];
        let m = |ict: f64| Metrics {
            ict_over_ideal: ict,
            ..Metrics::default()
        };
        let runs = vec![
            with_metrics(run("rccc", 1, fl(), Vec::new()), m(1.04)),
            with_metrics(run("none", 1, fl(), Vec::new()), m(2.0)),
            with_metrics(run("rccc", 2, fl(), Vec::new()), m(1.01)),
            with_metrics(run("rccc", 3, fl(), Vec::new()), m(1.20)),
        ];
        let s = summarize(&runs);
        assert_eq!(
            s.iter().map(|s| s.cc.as_str()).collect::<Vec<_>>(),
            ["none", "rccc"]
        );
        let rccc = &s[1];
        assert_eq!(rccc.seeds, [1, 2, 3]);
        assert_eq!(rccc.ict_over_ideal.median, 1.04);
        assert_eq!(rccc.ict_over_ideal.p90, 1.20);
        assert_eq!(rccc.ict_over_ideal.max, 1.20);
        assert_eq!(rccc.ict_over_ideal.count, 3);
        assert_eq!(rccc.f_c, None);
        let even = Stat::of([1.0, 2.0, 3.0, 10.0]).unwrap();
        assert_eq!((even.median, even.p90, even.max), (2.5, 10.0, 10.0));
    }

    pub(crate) fn rccc_summary(ict_over_ideal: f64) -> Summary {
        let fl = || vec![flow(1, 0, 100_000, 50)];
        let mut r = run("rccc", 1, fl(), Vec::new());
        r.size = 1 << 20;
        r.senders = 4;
        r.metrics = Metrics {
            ict_over_ideal,
            spread: 1.02,
            jain: 0.995,
            drops: 3,
            ..Metrics::default()
        };
        summarize(&[r]).remove(0)
    }

    #[test]
    fn rccc_targets_say_pass_or_miss_and_by_how_much() {
        let checks = check_targets(&rccc_summary(1.07), &setup(), &cal(50_000));
        let names: Vec<&str> = checks.iter().map(|c| c.metric.as_str()).collect();
        assert_eq!(
            names,
            [
                "ICT/ideal",
                "spread",
                "Jain",
                "RTOs",
                "drops after the first RTT"
            ]
        );
        let ict = &checks[0];
        assert!(!ict.pass);
        assert_eq!(ict.verdict(), "MISS");
        assert!((ict.margin + 0.02).abs() < 1e-9);
        assert_eq!(ict.margin_text(), "missed by 0.020 (1.9 %)");
        assert_eq!(ict.subject, "rccc N=4 S=1 MiB");
        assert!(checks[1..].iter().all(|c| c.pass), "{checks:?}");

        let ok = check_targets(&rccc_summary(1.03), &setup(), &cal(50_000));
        assert!(ok[0].pass);
        assert_eq!(ok[0].margin_text(), "0.020 to spare (1.9 %)");
    }

    /// A count's median over an even number of runs can be half a count: it
    /// is shown as such, not rounded to a value that passes its bound.
    #[test]
    fn a_half_count_median_shows_its_half() {
        let mut s = rccc_summary(1.03);
        s.drops_after_first_rtt = Stat::of([0.0, 1.0]).unwrap();
        let checks = check_targets(&s, &setup(), &cal(50_000));
        let late = checks
            .iter()
            .find(|c| c.metric == "drops after the first RTT")
            .unwrap();
        assert!(!late.pass);
        assert_eq!(late.show(late.value), "0.5");
        assert_eq!(late.margin_text(), "missed by 0.5");
        assert_eq!(late.show(3.0), "3");
    }

    #[test]
    fn targets_apply_only_to_small_n_large_flows_and_rccc_nscc() {
        let mut s = rccc_summary(1.5);
        s.senders = 32;
        assert!(check_targets(&s, &setup(), &cal(50_000)).is_empty());
        let mut s = rccc_summary(1.5);
        s.size = 64 * 1024;
        assert!(check_targets(&s, &setup(), &cal(50_000)).is_empty());
        let mut s = rccc_summary(1.5);
        s.cc = "none".into();
        assert!(check_targets(&s, &setup(), &cal(50_000)).is_empty());
    }

    #[test]
    fn nscc_steady_delay_is_checked_against_half_to_twice_t0() {
        let mut s = rccc_summary(1.08);
        s.cc = "nscc".into();
        s.jain.median = 0.93;
        s.steady_delay_p50_ns.median = 30_000.0;
        let checks = check_targets(&s, &setup(), &cal(50_000));
        assert_eq!(checks.len(), 4);
        assert!(checks[..3].iter().all(|c| c.pass), "{checks:?}");
        let d = &checks[3];
        assert_eq!(d.bound, Bound::Within(25_000.0, 100_000.0));
        assert!(d.pass);
        assert!((d.margin - 5_000.0).abs() < 1e-9);
        s.steady_delay_p50_ns.median = 150_000.0;
        let d = &check_targets(&s, &setup(), &cal(50_000))[3];
        assert!(!d.pass);
        assert_eq!(d.margin_text(), "missed by 50.0 µs (50.0 %)");
    }

    #[test]
    fn calibration_checks_every_sender_all_at_once_and_the_single_flow() {
        let checks = check_calibration(&setup(), &cal(50_000));
        assert_eq!(checks.len(), 4);
        assert!(checks[0].pass, "2 Gb/s ≥ 1.5 Gb/s");
        assert!(!checks[1].pass, "1.2 Gb/s < 1.5 Gb/s");
        assert_eq!(checks[1].margin_text(), "missed by 300 Mb/s (20.0 %)");
        assert!(checks[2].pass, "all at once: 3 Gb/s ≥ 1.25 Gb/s");
        assert!(checks[3].pass);
        let mut slow = cal(50_000);
        slow.all_senders_bps = 1.1e9;
        let checks = check_calibration(&setup(), &slow);
        assert!(!checks[2].pass, "all at once: 1.1 Gb/s < 1.25 Gb/s");
    }

    #[test]
    fn size_labels() {
        assert_eq!(size_label(256 * 1024), "256 KiB");
        assert_eq!(size_label(4 << 20), "4 MiB");
        assert_eq!(size_label(1000), "1000 B");
    }
}
