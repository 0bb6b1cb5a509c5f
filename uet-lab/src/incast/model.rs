//! What an incast experiment records (`uet lab incast`): the common
//! set-up, the calibration, and per run the raw measurements — per-flow
//! byte timelines, the bottleneck queue sampled at ≥ 1 kHz, one sender's
//! congestion state over time, counters — from which [`super::metrics`]
//! derives the `docs/congestion-evaluation.md` metrics. Every time is nanoseconds of
//! CLOCK_MONOTONIC (shared by all namespaces) relative to the run's common
//! start; serialized as-is into `results.json`.

use serde::{Deserialize, Serialize};

/// What every run of one invocation shares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    /// Bottleneck rate R, bits/s.
    pub bottleneck_bps: u64,
    /// The TBF's buffer (limit), bytes.
    pub buffer_bytes: u64,
    /// ECN thresholds (Kmin, Kmax) of the virtual queue, bytes.
    pub ecn: Option<(u64, u64)>,
    /// Start jitter: each sender starts at U[0, jitter] after the common
    /// start, ns (0: synchronized).
    pub jitter_ns: u64,
    /// Whether a victim ping-pong crossed the bottleneck during the runs.
    pub victim: bool,
    /// Whether the bottleneck trimmed what overflowed its buffer instead
    /// of dropping it (and the daemons ran `--trimming true`).
    #[serde(default)]
    pub trim: bool,
    /// Seeds per (cc, senders, size).
    pub seeds: usize,
    /// IP MTU of every link.
    pub mtu: u32,
    /// The daemons' datapath ("xdp" or "udp").
    pub backend: String,
    /// Bytes per write operation (the granularity of the byte timelines).
    pub chunk: u64,
    /// UET payload bytes in a full data packet.
    pub payload_per_packet: u64,
    /// Bytes the TBF counts per data packet beyond its payload (Ethernet,
    /// IP, UDP, PDS, SES headers).
    pub header_bytes_per_packet: u64,
    /// The machine while the runs ran: `nproc`, load average before.
    pub cpus: usize,
    /// 1-minute load average when the invocation started.
    pub load_before: f64,
    /// The daemons' base RTT (`uetd --base-rtt-us`): what NSCC's target
    /// delay and window and RCCC's credit bound plan for, µs.
    #[serde(default)]
    pub base_rtt_us: u64,
    /// The daemons' fabric RTT (`uetd --fabric-rtt-us`): NSCC's target
    /// delay, µs; 0 in reports from before it (the target was the base
    /// RTT then).
    #[serde(default)]
    pub fabric_rtt_us: u64,
    /// The daemons' RTO_INIT_TIME (`uetd --rto-init-us`), µs.
    #[serde(default)]
    pub rto_init_us: u64,
    /// RCCC's receiver slowed its pacer while the data arrived ECN-marked
    /// (`uetd --rccc-ecn-rate`); false in reports from before it.
    #[serde(default)]
    pub rccc_ecn_rate: bool,
}

impl Setup {
    /// Bytes the bottleneck carries for `payload` bytes of writes: each
    /// packet's payload plus its headers, Ethernet to SES — what the TBF,
    /// and so R, counts.
    #[must_use]
    pub fn wire_bytes(&self, payload: u64) -> u64 {
        payload + payload.div_ceil(self.payload_per_packet.max(1)) * self.header_bytes_per_packet
    }

    /// One flow of `payload` bytes that took `secs`, as a fraction of R
    /// in the bottleneck's own units (wire bytes; `docs/congestion-evaluation.md`,
    /// "Calibrate first": one flow reaches ≥ 95 % of R). Its payload
    /// goodput cannot: at MTU 1500 a full packet is 1412 payload bytes of
    /// 1514 on the wire, 93 %.
    #[must_use]
    pub fn single_flow_ratio(&self, payload: u64, secs: f64) -> f64 {
        self.wire_bytes(payload) as f64 * 8.0 / secs / self.bottleneck_bps as f64
    }
}

/// Latency of a series of small operations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    /// Operations measured.
    pub count: u64,
    /// Mean, ns.
    pub mean_ns: f64,
    /// Median, ns.
    pub p50_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// Maximum, ns.
    pub max_ns: u64,
    /// Completed operations per second.
    pub ops_per_s: f64,
}

/// Measured once per invocation, before the runs (`docs/congestion-evaluation.md`,
/// "Calibrate first").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// T0: idle round trip of a one-packet write through the bottleneck
    /// path (client → daemon → wire → ACK → client). Its median is the
    /// lowest of [`Self::t0_batch_p50_ns`] (a stall of the machine during
    /// one batch does not set T0); count, mean, p99 and max are over
    /// every write.
    pub t0: LatencyStats,
    /// The median of each batch of T0's writes, in order, ns (empty in a
    /// report from before the batches: its T0 median is all writes').
    #[serde(default)]
    pub t0_batch_p50_ns: Vec<u64>,
    /// R · T0 (p50), bytes.
    pub bdp_bytes: u64,
    /// Each sender's solo goodput without the bottleneck, bits/s (must be
    /// ≥ 1.5 · R for an incast to exist).
    pub solo_bps: Vec<f64>,
    /// One flow's rate through the bottleneck in wire bytes (payload and
    /// headers, as R counts them: [`Setup::wire_bytes`]), bits/s.
    pub single_flow_bps: f64,
    /// `single_flow_bps` / R (target ≥ 0.95).
    pub single_flow_ratio: f64,
    /// The victim's ping-pong with no incast, when there is a victim.
    pub victim_isolated: Option<LatencyStats>,
    /// What all N senders fed together without the bottleneck, wire
    /// bits/s (N = the largest sender count asked for): the rate the
    /// lab's CPUs sustain with every sender and the receiver busy at once.
    #[serde(default)]
    pub all_senders_bps: f64,
    /// The bottleneck asked for, bits/s; [`Setup::bottleneck_bps`] is
    /// the one used, lower when the senders together could not feed this
    /// one ([`fit_bottleneck`]).
    #[serde(default)]
    pub requested_bottleneck_bps: u64,
    /// Every sender at once through the bottleneck with congestion
    /// control, each step of fitting R to what they fill.
    #[serde(default)]
    pub fit_steps: Vec<FitStep>,
}

/// One step of fitting the bottleneck to what the controlled senders fill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitStep {
    /// The congestion control the senders ran.
    pub cc: String,
    /// R during the step, bits/s.
    pub bottleneck_bps: u64,
    /// What all senders together put through it, wire bits/s.
    pub filled_bps: f64,
    /// With RCCC: the share of the receiver's pacer budget lost to ticks
    /// later than their catch-up, its worker having waited for a CPU
    /// (`late_bytes` over the whole budget, what the ECN rate control held
    /// back included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacer_late: Option<f64>,
    /// With RCCC: the share of the pacer's budget its ECN rate control held
    /// back while the data arrived marked (`ecn_slowed_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacer_ecn: Option<f64>,
    /// The share of the machine's CPU time the hypervisor took during the
    /// step (steal, `/proc/stat`), when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal: Option<f64>,
}

impl FitStep {
    /// The bottleneck the calibration tries next after this step, or
    /// `None` to keep this one: lower while the senders filled less than
    /// [`FILL_TARGET`] of what the pacer offered them (R, less the share
    /// its ECN rate control held back: credit withheld because a queue
    /// stood is the control at work, not hosts too slow to feed R; to that
    /// share of what they filled), or while
    /// the receiver's RCCC pacer lost more than [`LATE_TARGET`] of its
    /// budget to late ticks (by [`LATE_STEP`], not below
    /// [`LATE_FLOOR_BPS`]); in 10 Mb/s steps, at least 10 Mb/s.
    pub fn next_bottleneck(&self) -> Option<u64> {
        let r = self.bottleneck_bps;
        let step = |bps: f64| (bps as u64 / 10_000_000 * 10_000_000).max(10_000_000);
        let mut next = r;
        let offered = r as f64 * (1.0 - self.pacer_ecn.unwrap_or(0.0));
        if self.filled_bps < FILL_TARGET * offered {
            next = next.min(step(self.filled_bps * FILL_TARGET));
        }
        if self.pacer_late.is_some_and(|l| l > LATE_TARGET) && r > LATE_FLOOR_BPS {
            next = next.min(step(r as f64 * LATE_STEP).max(LATE_FLOOR_BPS));
        }
        (next < r).then_some(next)
    }

    /// Whether the hypervisor took more than [`STEAL_LIMIT`] of the
    /// machine during the step.
    pub fn stolen(&self) -> bool {
        self.steal.is_some_and(|s| s > STEAL_LIMIT)
    }

    /// Whether the calibration measures this step's R again instead of
    /// acting on it: the host took more than [`STEAL_LIMIT`] of the CPUs
    /// meanwhile and this R was not measured again yet (`retried_at`, the
    /// R last measured again). Once, so that a host that stays busy still
    /// ends the fit, at a rate its runs will see too.
    pub fn measure_again(&self, retried_at: Option<u64>) -> bool {
        self.stolen() && retried_at != Some(self.bottleneck_bps)
    }

    /// The share of R the senders filled.
    pub fn fill(&self) -> f64 {
        self.filled_bps / self.bottleneck_bps.max(1) as f64
    }

    /// Whether this step, at a lower R than `before`, saw the senders fill
    /// a smaller share of it (less than [`FILL_WORSE`] × theirs): the
    /// calibration then goes back to `before`'s R and stops. Below some
    /// rate a lower R only makes it worse: RCCC keeps at most 1.5 BDP of
    /// R × base RTT granted and unused, and each sender's turn round a
    /// busy host takes longer than that credit lasts (64 senders on two
    /// vCPUs filled 76 % of 250 Mb/s, 46 % of 170, 24 % of 70).
    ///
    /// Only back to an R whose pacer kept time, or from below
    /// [`LATE_FLOOR_BPS`], where lateness no longer lowers R: above it a
    /// late pacer also fills less, and a write that is a little worse
    /// than the one before sent the fit back to an R it had just found
    /// too fast (8 senders: 82 % of 1000 Mb/s with the pacer 3.2 % late,
    /// then 73 % of 770 at 17 %; the runs at 1000 Mb/s took 1.4–1.6 ×
    /// ideal).
    pub fn worse_than(&self, before: &Self) -> bool {
        let back_to = before.pacer_late.is_none_or(|l| l <= LATE_TARGET)
            || self.bottleneck_bps < LATE_FLOOR_BPS;
        before.bottleneck_bps > self.bottleneck_bps
            && back_to
            && self.fill() < before.fill() * FILL_WORSE
    }

    fn describe(&self) -> String {
        let mut s = format!(
            "{:.0} of {} Mb/s",
            self.filled_bps / 1e6,
            self.bottleneck_bps / 1_000_000
        );
        match (self.pacer_late, self.pacer_ecn.filter(|e| *e > 0.0)) {
            (Some(l), Some(e)) => s.push_str(&format!(
                " (pacer {:.1} % late, {:.1} % held back on ECN marks)",
                l * 100.0,
                e * 100.0
            )),
            (Some(l), None) => s.push_str(&format!(" (pacer {:.1} % late)", l * 100.0)),
            _ => {}
        }
        if let Some(st) = self.steal.filter(|_| self.stolen()) {
            s.push_str(&format!(" (the host took {:.1} % of the CPUs)", st * 100.0));
        }
        s
    }
}

/// The most of its budget the receiver's RCCC pacer may lose to late
/// ticks in the calibration before R is lowered. The pacer ticks from the
/// receiver daemon's worker; on a machine whose CPUs the N + 1 daemons
/// keep busy it waits for one, and credit it could not hand out in time
/// is link time lost: on two vCPUs (8 × 1 MiB), the runs' ICT/ideal was
/// about 1.02 plus the share lost (200 Mb/s: 0.2–0.9 % late, 1.017–1.026;
/// 400 Mb/s: 1–20 %, 1.03–1.30). The fit's writes are shorter than the
/// runs and see less of it: where a fit kept R at 0.7–1.7 % late, the runs
/// at that R lost 3–10 % and took up to 1.13 × ideal. 1 % leaves room
/// for that and keeps RCCC's 1.05 within reach.
pub const LATE_TARGET: f64 = 0.01;

/// The most of the machine's CPU time the hypervisor may take during a
/// calibration step before the step is measured again
/// ([`FitStep::measure_again`]). On a virtual machine the host runs other
/// guests on our vCPUs in bursts (on a 2-vCPU VM: 0-6 % of the machine
/// over most writes, 18-25 % in some minutes), and a step whose senders
/// lost that much CPU fills less of R for a reason the runs that follow may
/// not share; the fit never raises R again. The fit accepts a shortfall
/// of 1 − [`FILL_TARGET`]: a host taking more than that can cause one on
/// its own.
pub const STEAL_LIMIT: f64 = 1.0 - FILL_TARGET;

/// How many writes of the calibration may be measured again for the
/// host's steal ([`FitStep::measure_again`]), on top of [`FIT_STEPS`]: in
/// four calibrations on a 2-vCPU VM one or two steps each went over
/// [`STEAL_LIMIT`], and with the retries counted among the eight steps
/// two fits ended on a rate no step had passed.
pub const FIT_RETRIES: usize = 3;

/// The least R a late pacer lowers the bottleneck to. Lateness falls with
/// the packet rate only while the packets are what keeps the CPUs busy;
/// with many senders the daemons' wake-ups keep the receiver's worker
/// waiting at any rate (64 senders on two vCPUs: one calibration went on
/// lowering R to 20 Mb/s), and a lower R then only lengthens the runs.
/// The report gives the share lost at the rate kept.
pub const LATE_FLOOR_BPS: u64 = 200_000_000;

/// The factor a step applies to R when the pacer was late: lateness
/// falls steeply with the packet rate, and one calibration write is a
/// noisy measure of it.
pub const LATE_STEP: f64 = 0.8;

/// How much smaller a share of a lower R the senders must fill before the
/// calibration takes it that lowering R made things worse
/// ([`FitStep::worse_than`]).
pub const FILL_WORSE: f64 = 0.9;

/// The share of R all senders together must fill through the bottleneck
/// with congestion control before the calibration accepts R.
pub const FILL_TARGET: f64 = 0.95;

/// How many writes the calibration makes at most while fitting R
/// ([`FitStep::next_bottleneck`]); R is kept once two in a row at it
/// passed. A step for a short fill cuts R to [`FILL_TARGET`] × what they
/// filled, about a fifth on two vCPUs, where the share they fill grows
/// only slowly as R falls (0.83, 0.86, 0.89 of 1000, 780, 630 Mb/s in
/// one calibration), so three steps often ended at a rate the last step
/// had not shown the senders could fill.
pub const FIT_STEPS: usize = 8;

/// How much faster than the bottleneck all senders together must feed it
/// for the incast to be limited by the bottleneck rather than by the
/// machine's CPUs: 1.25 × R.
pub const FEED_MARGIN: f64 = 1.25;

/// The bottleneck for a lab whose senders together feed `all_bps`
/// (wire bits/s) when `requested` was asked: `requested` if they feed at
/// least [`FEED_MARGIN`] × it, else `all_bps` / [`FEED_MARGIN`] rounded
/// down to 10 Mb/s (at least 10 Mb/s).
pub fn fit_bottleneck(requested: u64, all_bps: f64) -> u64 {
    if all_bps >= FEED_MARGIN * requested as f64 {
        return requested;
    }
    let fit = (all_bps / FEED_MARGIN) as u64 / 10_000_000 * 10_000_000;
    fit.clamp(10_000_000, requested)
}

impl Calibration {
    /// The sentence the report and the CLI give when the bottleneck was
    /// lowered below the one asked for, naming both rates and what the
    /// machine fed.
    pub fn lowered(&self, used_bps: u64, senders: usize) -> Option<String> {
        (self.requested_bottleneck_bps > used_bps).then(|| {
            let mut s = format!(
                "bottleneck lowered to {} Mb/s (asked {} Mb/s): this machine fed {:.0} Mb/s with {senders} senders at once",
                used_bps / 1_000_000,
                self.requested_bottleneck_bps / 1_000_000,
                self.all_senders_bps / 1e6
            );
            if let Some(f) = self.fit_steps.first() {
                let fills: Vec<String> = self.fit_steps.iter().map(FitStep::describe).collect();
                s.push_str(&format!(
                    "; with {} they filled {}",
                    f.cc,
                    fills.join(", then ")
                ));
            }
            s
        })
    }
}

/// One sender's flow in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flow {
    /// Host index of the sender (1..=N).
    pub sender: usize,
    /// Payload bytes S_i.
    pub bytes: u64,
    /// Bytes the bottleneck counts for it, W_i.
    pub wire_bytes: u64,
    /// When its first operation was submitted, ns after the common start.
    pub start_ns: u64,
    /// When its last operation completed, ns after the common start
    /// (delivery-complete: every byte acknowledged by the receiver).
    pub end_ns: u64,
    /// (ns after the common start, cumulative payload bytes completed),
    /// one point per completed operation, in time order.
    pub progress: Vec<(u64, u64)>,
    /// Its daemon's retransmitted packets during the run.
    pub retransmits: u64,
    /// Of `retransmits`, first resends of packets its daemon sent before
    /// hearing from the receiver (in each PDC's first round trip).
    #[serde(default)]
    pub first_rtt_resent: u64,
    /// Its daemon's retransmission timeouts during the run.
    pub rtos: u64,
    /// Its daemon's data packets sent (first transmissions and
    /// retransmissions) during the run.
    pub tx_data: u64,
    /// Its daemon's tail-loss probes during the run.
    #[serde(default)]
    pub tail_probes: u64,
    /// Its daemon's packets presumed lost from SACK information or a
    /// probe's answer (resent before their RTO) during the run.
    #[serde(default)]
    pub sack_inferred: u64,
    /// The error of a failed operation, if one failed.
    pub error: Option<String>,
}

/// The bottleneck, sampled (qdisc counters and the eBPF marker's maps).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QueueSample {
    /// ns after the common start (negative: before it).
    pub t_ns: i64,
    /// TBF backlog, bytes.
    pub backlog_bytes: u64,
    /// TBF backlog, packets.
    pub backlog_packets: u64,
    /// TBF drops since the run's first sample.
    pub drops: u64,
    /// Bytes the TBF sent since the run's first sample.
    pub sent_bytes: u64,
    /// The eBPF virtual queue, bytes.
    pub vq_bytes: u64,
    /// CE marks the eBPF marker set since the run's first sample.
    pub ce_marks: u64,
    /// Frames that found the eBPF virtual queue — the buffer drained at
    /// exactly R, by the clock — full, since the run's first sample (see
    /// [`Metrics::virtual_overflows`]).
    #[serde(default)]
    pub vq_overflows: u64,
    /// Packets the bottleneck trimmed since the run's first sample (a
    /// trimming switch).
    #[serde(default)]
    pub trimmed: u64,
}

/// One sender's congestion context toward the receiver, sampled.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CcSample {
    /// ns after the common start.
    pub t_ns: i64,
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// Bytes in flight.
    pub inflight: i64,
    /// Bytes waiting to be sent.
    pub backlog: u64,
    /// RCCC credit available, bytes (RCCC modes only).
    pub credit: Option<i64>,
}

/// The receiver's daemon during a run (deltas).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ReceiverCounters {
    /// Data packets received.
    pub rx_data: u64,
    /// ACK-type packets sent (ACK, ACK_CC, SACK; RCCC credit rides in
    /// ACK_CC).
    pub tx_acks: u64,
    /// NACKs sent.
    pub tx_nacks: u64,
    /// Data packets received with ECN CE.
    pub rx_ce: u64,
    /// Packets the receiver's datapath sent in all.
    pub tx_packets: u64,
    /// Ticks of its RCCC pacer (RCCC modes).
    #[serde(default)]
    pub pacer_ticks: u64,
    /// Credit its pacer granted, bytes (initial windows not counted).
    #[serde(default)]
    pub granted_bytes: u64,
    /// Pacer ticks that granted less than their budget because the credit
    /// not yet spent reached its cap.
    #[serde(default)]
    pub outstanding_limited: u64,
    /// Pacer budget lost to ticks later than the pacer may catch up, bytes.
    #[serde(default)]
    pub late_bytes: u64,
    /// Pacer budget withheld by the cap on credit not yet spent, bytes.
    #[serde(default)]
    pub withheld_bytes: u64,
    /// Pacer budget no active sender wanted, bytes.
    #[serde(default)]
    pub unclaimed_bytes: u64,
    /// Pacer budget the ECN rate control held back while the data arrived
    /// ECN-CE marked, bytes (`uetd`'s `rccc_ecn_rate`).
    #[serde(default)]
    pub ecn_slowed_bytes: u64,
    /// Senders its pacer dropped from the active table for not answering a
    /// grant within the idle timeout (a sender's host that did not run it).
    #[serde(default)]
    pub idle_evictions: u64,
    /// Outstanding credit its pacer wrote off on a sender's CREDIT_REQ.
    #[serde(default)]
    pub write_offs: u64,
}

impl ReceiverCounters {
    /// The RCCC pacer's budget over the run, bytes: what it granted and
    /// what it lost (late ticks, withheld by the cap, unclaimed, held back
    /// on ECN marks). At the pacer's rate, the sum is its rate times the
    /// time it ran.
    #[must_use]
    pub fn pacer_budget(&self) -> u64 {
        self.granted_bytes + self.pacer_lost()
    }

    /// The part of [`pacer_budget`](Self::pacer_budget) not granted, bytes.
    #[must_use]
    pub fn pacer_lost(&self) -> u64 {
        self.late_bytes + self.withheld_bytes + self.unclaimed_bytes + self.ecn_slowed_bytes
    }
}

/// The victim's ping-pong during one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VictimRun {
    /// Its latency while the incast ran.
    pub congested: LatencyStats,
    /// Its latency alone just before the run, with the run's daemons: the
    /// denominator of the run's CIFs. `None` in reports from before it,
    /// whose CIFs divide by the calibration's
    /// ([`Calibration::victim_isolated`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolated: Option<LatencyStats>,
}

/// One synchronized incast.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Congestion control: none, nscc, rccc, nscc+rccc or pft.
    pub cc: String,
    /// N.
    pub senders: usize,
    /// S, payload bytes per flow.
    pub size: u64,
    /// The run's seed (start jitter, write pattern).
    pub seed: u64,
    /// One per sender.
    pub flows: Vec<Flow>,
    /// From shortly before the start to shortly after the last completion.
    pub queue: Vec<QueueSample>,
    /// Host index whose congestion state `cc_trace` follows.
    pub cc_trace_sender: usize,
    /// That sender's congestion state over the run.
    pub cc_trace: Vec<CcSample>,
    /// The receiver's counters.
    pub receiver: ReceiverCounters,
    /// The victim, when there is one.
    pub victim: Option<VictimRun>,
    /// Share of all CPUs busy (user, system, irq, softirq, steal — from
    /// /proc/stat) from the common start to the last completion.
    #[serde(default)]
    pub cpu_busy: Option<f64>,
    /// Share of all CPU time the hypervisor took over the same window
    /// (steal; 0 on bare metal): a virtual machine's host running
    /// something else, inside [`Run::cpu_busy`].
    #[serde(default)]
    pub cpu_steal: Option<f64>,
    /// What [`super::metrics::compute`] derived.
    pub metrics: Metrics,
}

/// The `docs/congestion-evaluation.md` metrics of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Incast completion time: last flow's end − common start, ns.
    pub ict_ns: u64,
    /// ICT* = ΣW_i / R + T0, ns.
    pub ideal_ns: u64,
    /// ICT / ICT*.
    pub ict_over_ideal: f64,
    /// max FCT / min FCT (FCT = end − own start).
    pub spread: f64,
    /// Jain's index of whole-flow goodputs (bytes / FCT).
    pub jain: f64,
    /// Median over k·T0 windows (while ≥ 2 flows are active, after the
    /// first 10·T0) of Jain's index of the flows' goodput in the window;
    /// `None` when there are no such windows.
    pub jain_windowed: Option<f64>,
    /// The window of `jain_windowed`, k·T0 ns (`metrics::jain_window_ns`);
    /// 0 when T0 or R is 0.
    #[serde(default)]
    pub jain_window_ns: u64,
    /// TBF drops during the run.
    pub drops: u64,
    /// Of those, drops of packets sent after their flow's first round
    /// trip: the drops less the senders' first-round-trip losses
    /// ([`Flow::first_rtt_resent`]; through a trimming bottleneck those
    /// were trims, and this is every drop).
    pub drops_after_first_rtt: u64,
    /// Packets the bottleneck trimmed during the run (a trimming switch;
    /// 0 with drop-tail).
    #[serde(default)]
    pub trimmed: u64,
    /// Of those, trims of packets sent after their flow's first round
    /// trip: the trims less the senders' first-round-trip losses.
    #[serde(default)]
    pub trimmed_after_first_rtt: u64,
    /// Frames that arrived when the virtual queue (the same buffer,
    /// drained at exactly R by the clock) was full: with drop-tail, what
    /// a switch whose link never pauses would have dropped. The TBF
    /// drains only when the host runs its timer, so when the host is late
    /// it holds more than the buffer would and drops what the virtual
    /// queue still had room for: `drops` above this count are the
    /// emulated link's lateness, not the senders'. With trimming, the
    /// trims (and any non-UET frame dropped for the buffer).
    #[serde(default)]
    pub virtual_overflows: u64,
    /// Σ retransmits / Σ first transmissions.
    pub retransmits_per_packet: f64,
    /// Σ RTOs.
    pub rtos: u64,
    /// Peak TBF backlog, bytes.
    pub peak_queue_bytes: u64,
    /// Median TBF backlog after 10·T0 while data is pending, bytes.
    pub steady_queue_p50_bytes: u64,
    /// 99th percentile of the same.
    pub steady_queue_p99_bytes: u64,
    /// `steady_queue_p50_bytes` as queueing delay at R, ns.
    pub steady_delay_p50_ns: u64,
    /// Bytes the TBF sent while data was pending / (R · that time).
    pub utilisation: f64,
    /// Receiver ACK-type packets per data packet received.
    pub acks_per_data: f64,
    /// CE marks per data packet the bottleneck forwarded.
    pub ce_per_data: f64,
    /// Victim CIF: congested / isolated latency, mean.
    pub victim_cif_avg: Option<f64>,
    /// Victim CIF: congested / isolated latency, p99.
    pub victim_cif_p99: Option<f64>,
    /// Victim bandwidth CIF: isolated / congested ops per second.
    pub victim_bw_cif: Option<f64>,
    /// PFT control factor F_C = (B_C·D_0)/(B_0·D_C) of the victim against
    /// the `none` run of the same (senders, size, seed); filled when both
    /// exist.
    pub f_c: Option<f64>,
    /// Failed flows.
    pub failed_flows: usize,
    /// The run's [`Run::cpu_busy`] (0 when not measured).
    #[serde(default)]
    pub cpu_busy: f64,
    /// The run's [`Run::cpu_steal`] (0 when not measured).
    #[serde(default)]
    pub cpu_steal: f64,
}

/// Everything one `uet lab incast` invocation measured: `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The exact command line.
    pub command: String,
    /// Shared set-up.
    pub setup: Setup,
    /// Calibration.
    pub calibration: Calibration,
    /// Every run, in the order run.
    pub runs: Vec<Run>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runner's set-up at MTU 1500 and 1 Gb/s: 1412 payload bytes in
    /// a 1514-byte frame.
    fn mtu_1500() -> Setup {
        Setup {
            bottleneck_bps: 1_000_000_000,
            buffer_bytes: 0,
            ecn: None,
            jitter_ns: 0,
            victim: false,
            trim: false,
            seeds: 1,
            mtu: 1500,
            backend: "xdp".into(),
            chunk: 1 << 20,
            payload_per_packet: 1412,
            header_bytes_per_packet: 102,
            cpus: 2,
            load_before: 0.0,
            base_rtt_us: 0,
            fabric_rtt_us: 0,
            rto_init_us: 0,
            rccc_ecn_rate: true,
        }
    }

    #[test]
    fn a_flow_at_line_rate_is_all_of_r_in_wire_bytes() {
        let s = mtu_1500();
        // 4 MiB in full packets and one partial: 2971 packets.
        let payload: u64 = 4 << 20;
        let packets = payload.div_ceil(1412);
        assert_eq!(s.wire_bytes(payload), payload + packets * 102);
        // The TBF sends exactly those wire bytes at R.
        let secs = s.wire_bytes(payload) as f64 * 8.0 / 1e9;
        let ratio = s.single_flow_ratio(payload, secs);
        assert!((ratio - 1.0).abs() < 1e-12, "{ratio}");
        // Its payload goodput is 93 % of R: below the 95 % target at any
        // speed, which is why the calibration counts wire bytes.
        let goodput = payload as f64 * 8.0 / secs / 1e9;
        assert!(goodput < 0.95 && goodput > 0.93, "{goodput}");
        // A flow at 96 % of the line passes, one at 94 % does not.
        assert!(s.single_flow_ratio(payload, secs / 0.96) >= 0.95);
        assert!(s.single_flow_ratio(payload, secs / 0.94) < 0.95);
    }

    #[test]
    fn the_bottleneck_is_lowered_below_what_all_senders_feed() {
        // Enough: 1.25 Gb/s feeds 1 Gb/s.
        assert_eq!(fit_bottleneck(1_000_000_000, 1.3e9), 1_000_000_000);
        assert_eq!(fit_bottleneck(1_000_000_000, 1.25e9), 1_000_000_000);
        // Not enough: 0.9 Gb/s feeds 720 Mb/s.
        assert_eq!(fit_bottleneck(1_000_000_000, 0.9e9), 720_000_000);
        assert_eq!(fit_bottleneck(1_000_000_000, 0.0), 10_000_000);
        let c = Calibration {
            t0: LatencyStats::default(),
            t0_batch_p50_ns: Vec::new(),
            bdp_bytes: 0,
            solo_bps: vec![],
            single_flow_bps: 0.0,
            single_flow_ratio: 0.0,
            victim_isolated: None,
            all_senders_bps: 0.9e9,
            requested_bottleneck_bps: 1_000_000_000,
            fit_steps: Vec::new(),
        };
        assert_eq!(
            c.lowered(720_000_000, 8).as_deref(),
            Some(
                "bottleneck lowered to 720 Mb/s (asked 1000 Mb/s): this machine fed 900 Mb/s with 8 senders at once"
            )
        );
        assert_eq!(c.lowered(1_000_000_000, 8), None);
        let mut c = c;
        c.fit_steps = vec![
            FitStep {
                cc: "rccc".into(),
                bottleneck_bps: 720_000_000,
                filled_bps: 500e6,
                pacer_late: None,
                pacer_ecn: None,
                steal: None,
            },
            FitStep {
                cc: "rccc".into(),
                bottleneck_bps: 470_000_000,
                filled_bps: 460e6,
                pacer_late: Some(0.071),
                pacer_ecn: Some(0.0),
                steal: Some(0.01),
            },
        ];
        assert_eq!(
            c.lowered(470_000_000, 8).as_deref(),
            Some(
                "bottleneck lowered to 470 Mb/s (asked 1000 Mb/s): this machine fed 900 Mb/s with 8 senders at once; with rccc they filled 500 of 720 Mb/s, then 460 of 470 Mb/s (pacer 7.1 % late)"
            )
        );
    }

    #[test]
    fn the_calibration_lowers_r_for_a_short_fill_or_a_late_pacer() {
        let step = |r: u64, filled: f64, late: Option<f64>| FitStep {
            cc: "rccc".into(),
            bottleneck_bps: r,
            filled_bps: filled,
            pacer_late: late,
            pacer_ecn: None,
            steal: None,
        };
        // (R, filled, pacer late) → the next R, or None to keep R.
        let cases: [(u64, f64, Option<f64>, Option<u64>); 11] = [
            // Filled and on time: kept.
            (400_000_000, 383e6, Some(0.005), None),
            (400_000_000, 383e6, Some(0.015), Some(320_000_000)),
            (400_000_000, 383e6, None, None),
            // Filled short: 95 % of what they filled.
            (1_000_000_000, 758e6, None, Some(720_000_000)),
            // Filled, but the pacer lost 7 %: a fifth lower.
            (400_000_000, 383e6, Some(0.07), Some(320_000_000)),
            // Both: the lower of the two.
            (1_000_000_000, 900e6, Some(0.2), Some(800_000_000)),
            (1_000_000_000, 500e6, Some(0.2), Some(470_000_000)),
            // A late pacer lowers R to 200 Mb/s at most; a short fill below.
            (240_000_000, 239e6, Some(0.05), Some(200_000_000)),
            (200_000_000, 199e6, Some(0.5), None),
            (200_000_000, 150e6, Some(0.5), Some(140_000_000)),
            // Never below 10 Mb/s, and no step that does not lower.
            (10_000_000, 1e6, Some(0.5), None),
        ];
        for (r, filled, late, next) in cases {
            assert_eq!(
                step(r, filled, late).next_bottleneck(),
                next,
                "R {r}, filled {filled}, late {late:?}"
            );
        }
        // Credit the ECN rate control held back is not the hosts' shortfall:
        // 90 % of R filled with 8 % held back is 98 % of what was offered.
        let held = |ecn: f64| FitStep {
            pacer_ecn: Some(ecn),
            ..step(200_000_000, 180e6, Some(0.005))
        };
        assert_eq!(held(0.08).next_bottleneck(), None);
        assert_eq!(held(0.0).next_bottleneck(), Some(170_000_000));
        let says = |f: FitStep, tail: &str| {
            let d = f.describe();
            assert!(d.ends_with(tail), "{d}");
        };
        says(
            held(0.08),
            "(pacer 0.5 % late, 8.0 % held back on ECN marks)",
        );
        // A step the host took more than 5 % of the CPUs from is measured
        // again, once per R, and says so.
        let stolen = |s: f64| FitStep {
            steal: Some(s),
            ..step(1_000_000_000, 340e6, Some(0.669))
        };
        assert!(!stolen(0.05).measure_again(None));
        assert!(stolen(0.185).measure_again(None));
        assert!(stolen(0.185).measure_again(Some(320_000_000)));
        assert!(!stolen(0.185).measure_again(Some(1_000_000_000)));
        assert!(!step(1_000_000_000, 340e6, None).measure_again(None));
        says(
            stolen(0.185),
            "(pacer 66.9 % late) (the host took 18.5 % of the CPUs)",
        );
        assert!(!stolen(0.01).describe().contains("host"));
        // A lower R they fill a smaller share of is worse.
        let a = step(250_000_000, 189e6, Some(0.02));
        assert!(step(170_000_000, 79e6, None).worse_than(&a));
        assert!(!step(170_000_000, 130e6, None).worse_than(&a));
        assert!(!a.worse_than(&step(170_000_000, 79e6, None)), "not lower");
        // Above the floor, not back to an R whose pacer was late.
        let late = step(1_000_000_000, 816e6, Some(0.032));
        assert!(!step(770_000_000, 563e6, Some(0.17)).worse_than(&late));
        let on_time = step(1_000_000_000, 816e6, Some(0.005));
        assert!(step(770_000_000, 563e6, Some(0.17)).worse_than(&on_time));
    }

    #[test]
    fn wire_bytes_count_a_header_per_packet_partial_ones_too() {
        let s = mtu_1500();
        assert_eq!(s.wire_bytes(0), 0);
        assert_eq!(s.wire_bytes(1), 1 + 102);
        assert_eq!(s.wire_bytes(1412), 1514);
        assert_eq!(s.wire_bytes(1413), 1413 + 2 * 102);
    }
}
