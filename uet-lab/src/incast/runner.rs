//! Running incasts on a lab: the set-up, the calibration and the
//! synchronized runs; what they measure goes into [`super::model`].
//!
//! Every sender writes through its host's serving `uetd` (a control-socket
//! client per sender, as an application would): its flow is `size / chunk`
//! write operations submitted at once into its own part of the receiver's
//! exposed region, so the sender's PDS sees the whole flow as backlog from
//! the start and each completion (delivery-complete: every byte of it
//! acknowledged) is one point of the flow's byte timeline. While a run
//! goes, one thread samples the bottleneck (TBF counters by rtnetlink, the
//! eBPF marker's virtual queue) and the first sender's congestion context
//! (its daemon's published counters) at 1 kHz; all times are
//! CLOCK_MONOTONIC, which every namespace shares.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use uet_api::{Client, Event, LocalHandle, Region, RemoteRegion, Status};

use super::model::{
    Calibration, CcSample, FIT_RETRIES, FIT_STEPS, FitStep, Flow, LatencyStats, QueueSample,
    ReceiverCounters, Run, Setup, VictimRun,
};
use crate::error::{Error, Result, require};
use crate::{EcnSettings, Lab, LabConfig, Sample, Sampler};
use uetd::config::Backend;
use uetd::sys::mem::monotonic_ns;

/// The congestion-control modes an incast compares.
pub const CC_MODES: [&str; 5] = ["none", "nscc", "rccc", "nscc+rccc", "pft"];

/// What `uet lab incast` runs.
#[derive(Debug, Clone, PartialEq)]
pub struct IncastOpts {
    /// Sender counts N (one run set per value).
    pub senders: Vec<usize>,
    /// Flow sizes S, payload bytes.
    pub sizes: Vec<u64>,
    /// Congestion-control modes.
    pub ccs: Vec<String>,
    /// Bottleneck rate R, bits/s: the one used, or with `fit_bottleneck`
    /// the most the calibration may pick.
    pub bottleneck: u64,
    /// Lower R below what all senders feed together when they cannot feed
    /// `bottleneck` (`model::fit_bottleneck`), then while all of them with
    /// congestion control fill less than 95 % of it or the receiver's RCCC
    /// pacer runs late (`FitStep::next_bottleneck`): on a machine of few
    /// CPUs the incast is then limited by the bottleneck, not by the CPUs.
    pub fit_bottleneck: bool,
    /// The daemons' `--busy-poll-us`: how long an idle worker polls before
    /// it sleeps. 0 by default: N + 1 daemons share the machine's CPUs,
    /// and a worker polling after every packet takes a CPU another daemon
    /// needs.
    pub busy_poll_us: u64,
    /// The daemons' `--rccc-ecn-rate`: RCCC's receiver slows its pacer
    /// while the data arrives ECN-marked (the daemon's default, true).
    pub rccc_ecn_rate: bool,
    /// The TBF buffer, bytes; `None`: 5 · BDP (measured T0).
    pub buffer: Option<u64>,
    /// ECN thresholds, bytes; `None`: Kmin/Kmax = 0.2/0.8 × R × the
    /// daemons' base RTT.
    pub ecn: Option<(u64, u64)>,
    /// No ECN marking at all.
    pub no_ecn: bool,
    /// A trimming switch ([`crate::LabConfig::trim`]): the bottleneck
    /// trims a UET packet that would overflow the buffer to its headers
    /// and forwards it, and the daemons run `--trimming true`.
    pub trim: bool,
    /// Start jitter: senders start U[0, jitter] after the common start.
    pub jitter: Duration,
    /// Run a victim ping-pong across the bottleneck during the incasts.
    pub victim: bool,
    /// The victim's daemon and its pinging thread run SCHED_FIFO
    /// ([`crate::PROBE_PRIORITY`]): its latency then counts the network
    /// and the receiver, not the victim host waiting for one of the CPUs
    /// the senders' daemons keep busy. `false`: normal priority, as every
    /// other daemon.
    pub victim_realtime: bool,
    /// The receiver's daemon runs SCHED_FIFO ([`crate::PROBE_PRIORITY`]):
    /// its RCCC pacer then ticks when it should instead of waiting for a
    /// CPU behind N senders' daemons, and a late tick's catch-up burst (a
    /// base RTT of credit at once) is rarer.
    pub receiver_realtime: bool,
    /// The receiver's daemon and the victim's ask for the kernel's
    /// shortest scheduler slice ([`crate::LabConfig::prompt_hosts`]), so
    /// that their workers, woken by the pacer's timer or a packet, take a
    /// CPU before the senders' daemons. `false` (default): every daemon
    /// runs the kernel's slice. On two vCPUs it cut the pacer's budget
    /// lost to late ticks at 16 and 32 senders and their completion time,
    /// but not at 64, and with 4 senders and the victim it made the
    /// completion time longer (BENCHMARKS.md, "Lab: incast").
    pub prompt_receiver: bool,
    /// Seeds per (cc, N, size).
    pub seeds: usize,
    /// Link MTU.
    pub mtu: u32,
    /// The daemons' datapath.
    pub backend: Backend,
    /// Bytes per write operation; `None`: S/16, between 4 KiB and 64 KiB.
    pub chunk: Option<u64>,
    /// Give up on a run after this long.
    pub timeout: Duration,
    /// The daemons' `--rto-init-us` (RTO_INIT_TIME); `None`: what
    /// [`IncastLab::rto_init_us`] derives from the buffer and T0.
    pub rto_init_us: Option<u64>,
    /// The daemons' `--base-rtt-us` (what NSCC and RCCC plan for);
    /// `None`: 3 × the measured T0 (p50), see `BASE_RTT_PER_T0`.
    pub base_rtt_us: Option<u64>,
}

impl Default for IncastOpts {
    fn default() -> Self {
        Self {
            senders: vec![4],
            sizes: vec![1 << 20],
            ccs: CC_MODES.iter().map(|s| (*s).to_owned()).collect(),
            bottleneck: 1_000_000_000,
            fit_bottleneck: true,
            busy_poll_us: 0,
            rccc_ecn_rate: true,
            buffer: None,
            ecn: None,
            no_ecn: false,
            trim: false,
            jitter: Duration::ZERO,
            victim: false,
            victim_realtime: true,
            receiver_realtime: false,
            prompt_receiver: false,
            seeds: 3,
            mtu: 1500,
            backend: Backend::Xdp,
            chunk: None,
            timeout: Duration::from_secs(60),
            base_rtt_us: None,
            rto_init_us: None,
        }
    }
}

impl IncastOpts {
    fn check(&self) -> Result<()> {
        const WHAT: &str = "incast options";
        let why = |s: &str| -> String { s.into() };
        require(!self.senders.is_empty(), WHAT, || why("no sender counts"))?;
        require(
            self.senders.iter().all(|&n| (1..=64).contains(&n)),
            WHAT,
            || why("senders must be 1..=64"),
        )?;
        require(!self.sizes.is_empty(), WHAT, || why("no sizes"))?;
        require(
            self.sizes.iter().all(|&s| (1..=1 << 30).contains(&s)),
            WHAT,
            || why("sizes must be 1 B..=1 GiB"),
        )?;
        require(!self.ccs.is_empty(), WHAT, || {
            why("no congestion-control modes")
        })?;
        for cc in &self.ccs {
            require(CC_MODES.contains(&cc.as_str()), WHAT, || {
                format!("unknown cc {cc:?} (one of {})", CC_MODES.join(", "))
            })?;
        }
        require(self.seeds >= 1, WHAT, || why("at least one seed"))?;
        require(self.bottleneck >= 1_000_000, WHAT, || {
            why("bottleneck below 1 Mb/s")
        })?;
        Ok(())
    }

    fn chunk_for(&self, size: u64) -> u64 {
        self.chunk
            .unwrap_or_else(|| (size / 16).clamp(4096, 64 << 10))
            .min(size)
            .max(1)
    }
}

/// Bytes of a data packet the TBF counts beyond its payload: Ethernet 14,
/// IPv4 20, UDP 8, the PDS request header with its CC extension 16 (the
/// longest; plain requests are 4 B shorter) and the standard SES header 44
/// (`uet_ses::initiator`: payload per packet is `max_ses_len − 44`).
const HEADER_BYTES: u64 = 14 + 20 + 8 + 16 + 44;

/// The daemons' base RTT as a multiple of the idle T0. T0 is one sender
/// alone on idle CPUs; in an incast, N+1 busy daemons share two CPUs and
/// every hop of the control loops (credit out, data back; data out, ACK
/// back) waits for a scheduler, so the loop round trip is several T0.
/// Windows and credit bounds sized to one idle BDP starve the senders;
/// much larger ones bring spurious RTOs. 3 × T0 lies where ICT/ideal
/// no longer falls with a larger base RTT and before the RTOs begin.
const BASE_RTT_PER_T0: u64 = 3;

/// T0 is measured in batches of this many one-packet writes; T0 is the
/// lowest batch median ([`Writer::ping_t0`]).
const T0_BATCH: u64 = 100;

/// At least this many T0 batches, and more until two batches' medians
/// agree ([`t0_settled`]), up to [`T0_MAX_BATCHES`].
const T0_MIN_BATCHES: usize = 4;

/// The most T0 batches (a machine that never settles gets its quickest).
const T0_MAX_BATCHES: usize = 16;

/// Bytes each sender writes alone in the calibration.
const SOLO_BYTES: u64 = 16 << 20;

/// What one flow did (CLOCK_MONOTONIC ns).
#[derive(Debug)]
struct Outcome {
    /// First submit.
    start: u64,
    /// (completion time, cumulative bytes) per completed operation.
    progress: Vec<(u64, u64)>,
    /// The first failed operation's status.
    error: Option<String>,
}

/// A host writing through its daemon: a client and a registered local
/// region holding its test pattern.
struct Writer {
    host: usize,
    client: Client,
    region: Region,
    local: LocalHandle,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl Writer {
    fn new(lab: &Lab, host: usize, bytes: u64) -> Result<Self> {
        let mut client = lab.client(host, &format!("incast-h{host}"))?;
        let region = client
            .create_region(bytes.max(4096))
            .map_err(Error::io(format!(
                "host {host}: creating the source region"
            )))?;
        let mut buf = vec![0u8; region.len() as usize];
        uetd::mem::pattern(host as u64, 0, &mut buf);
        region
            .write_at(0, &buf)
            .map_err(Error::io(format!("host {host}: filling the source region")))?;
        let local = client
            .register_local(&region)
            .map_err(Error::client(format!(
                "host {host}: registering the source region"
            )))?;
        Ok(Self {
            host,
            client,
            region,
            local,
        })
    }

    /// Writes `bytes` at `dst` as operations of `chunk` bytes, all submitted
    /// at once.
    fn flow(
        &mut self,
        dst: &RemoteRegion,
        dst_off: u64,
        bytes: u64,
        chunk: u64,
        timeout: Duration,
    ) -> Result<Outcome> {
        require(bytes <= self.region.len(), "incast flow", || {
            format!(
                "{bytes} bytes are more than the region of {}",
                self.region.len()
            )
        })?;
        let start = monotonic_ns();
        let mut lens = std::collections::HashMap::new();
        let mut off = 0;
        while off < bytes {
            let len = chunk.min(bytes - off);
            // `chunk` is at most 64 KiB unless the caller chose it, and a
            // write operation carries at most 4 GiB.
            let op_len = u32::try_from(len)
                .map_err(|_| Error::invalid("incast flow", "chunk must be < 4 GiB"))?;
            let tag = self
                .client
                .write(self.local.at(off), dst.at(dst_off + off), op_len, None)
                .map_err(|e| Error::client(format!("host {}: submitting a write", self.host))(e))?;
            lens.insert(tag, len);
            off += len;
        }
        let mut progress = Vec::with_capacity(lens.len());
        let (mut done, mut error) = (0u64, None);
        while !lens.is_empty() {
            let ev = self.client.wait_event(Some(timeout)).map_err(|e| {
                Error::client(format!("host {}: waiting for completions", self.host))(e)
            })?;
            if let Event::Completion(c) = ev
                && let Some(len) = lens.remove(&c.tag)
            {
                if c.status == Status::Ok {
                    done += len;
                    progress.push((monotonic_ns(), done));
                } else if error.is_none() {
                    error = Some(format!("{:?}", c.status));
                }
            }
        }
        Ok(Outcome {
            start,
            progress,
            error,
        })
    }

    fn end(o: &Outcome) -> u64 {
        o.progress.last().map_or(o.start, |p| p.0)
    }

    /// One-packet writes one after another for `until` (or `count`
    /// operations), latency of each.
    fn ping(
        &mut self,
        dst: &RemoteRegion,
        dst_off: u64,
        count: Option<u64>,
        stop: &AtomicBool,
    ) -> Result<LatencyStats> {
        let mut h = new_histogram();
        let secs = self.ping_into(&mut h, dst, dst_off, count, stop)?;
        Ok(latency(&h, secs))
    }

    /// T0: batches of [`T0_BATCH`] one-packet writes, at least
    /// [`T0_MIN_BATCHES`] and more until two batch medians agree
    /// ([`t0_settled`]). The distribution is every write's, except its
    /// median: the lowest of the batches' medians (returned beside it, in
    /// order). A slow spell of the machine — it doubled the median of
    /// 400 writes in some calibrations on a shared two-vCPU host — then
    /// does not set the BDP, the buffer, the base RTT the daemons plan
    /// for (3 × T0) and NSCC's fabric RTT (T0: its target delay and
    /// window): with T0 doubled, NSCC resent 0.06–0.20 packets per packet
    /// in those invocations against 0.01–0.03 in the others. The tail
    /// keeps every write: RTO_INIT is sized from it.
    fn ping_t0(
        &mut self,
        dst: &RemoteRegion,
        stop: &AtomicBool,
    ) -> Result<(LatencyStats, Vec<u64>)> {
        let mut hs = Vec::with_capacity(T0_MAX_BATCHES);
        let mut secs = 0.0;
        while hs.len() < T0_MAX_BATCHES {
            let mut h = new_histogram();
            secs += self.ping_into(&mut h, dst, 0, Some(T0_BATCH), stop)?;
            hs.push(h);
            let medians: Vec<u64> = hs.iter().map(|h| h.value_at_quantile(0.5)).collect();
            if hs.len() >= T0_MIN_BATCHES && t0_settled(&medians) {
                break;
            }
        }
        Ok(t0_from_batches(&hs, secs))
    }

    /// [`Self::ping`] into `h`; seconds it took.
    fn ping_into(
        &mut self,
        h: &mut Histogram<u64>,
        dst: &RemoteRegion,
        dst_off: u64,
        count: Option<u64>,
        stop: &AtomicBool,
    ) -> Result<f64> {
        let start = monotonic_ns();
        let mut n = 0u64;
        while count.map_or_else(|| !stop.load(Ordering::Relaxed), |c| n < c) {
            let t = monotonic_ns();
            let tag = self
                .client
                .write(self.local.at(0), dst.at(dst_off), 64, None)
                .map_err(|e| Error::client(format!("host {}: submitting a ping", self.host))(e))?;
            let ev = self
                .client
                .wait_completion(tag, Some(Duration::from_secs(10)))
                .map_err(|e| Error::client(format!("host {}: waiting for a ping", self.host))(e))?;
            if let Event::Completion(c) = &ev
                && c.status != Status::Ok
            {
                return Err(Error::Operation {
                    what: format!("host {}: a ping write", self.host),
                    status: format!("{:?}", c.status),
                });
            }
            h.record(monotonic_ns() - t)
                .expect("an auto-resizing histogram records any u64");
            n += 1;
        }
        Ok((monotonic_ns() - start) as f64 / 1e9)
    }
}

/// Whether T0's batch medians have settled: another batch's median is
/// within a quarter of the lowest, so the lowest was no lucky batch and
/// the machine has had a quiet spell.
fn t0_settled(medians: &[u64]) -> bool {
    let Some(&low) = medians.iter().min() else {
        return false;
    };
    medians.iter().filter(|&&m| m <= low + low / 4).count() >= 2
}

/// T0 from its batches ([`Writer::ping_t0`]): every write's distribution
/// with the lowest batch median as its median; the batch medians in order.
fn t0_from_batches(batches: &[Histogram<u64>], secs: f64) -> (LatencyStats, Vec<u64>) {
    let mut all = new_histogram();
    for h in batches {
        all.add(h).expect("auto-resizing histograms add");
    }
    let medians: Vec<u64> = batches.iter().map(|h| h.value_at_quantile(0.5)).collect();
    let mut t0 = latency(&all, secs);
    t0.p50_ns = medians.iter().copied().min().unwrap_or(t0.p50_ns);
    (t0, medians)
}

/// Auto-resizing with 3 significant figures: creating it cannot fail, and
/// recording a u64 only where usize is narrower than 64 bits.
fn new_histogram() -> Histogram<u64> {
    Histogram::<u64>::new(3).expect("3 significant figures are valid")
}

fn latency(h: &Histogram<u64>, secs: f64) -> LatencyStats {
    LatencyStats {
        count: h.len(),
        mean_ns: h.mean(),
        p50_ns: h.value_at_quantile(0.5),
        p99_ns: h.value_at_quantile(0.99),
        max_ns: h.max(),
        ops_per_s: if secs > 0.0 {
            h.len() as f64 / secs
        } else {
            0.0
        },
    }
}

/// Counters of one daemon that a run reports as deltas.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    tx_data: u64,
    retransmits: u64,
    first_rtt_resent: u64,
    rtos: u64,
    tail_probes: u64,
    sack_inferred: u64,
    rx_data: u64,
    tx_acks: u64,
    tx_nacks: u64,
    rx_ce: u64,
    tx_packets: u64,
    pacer_ticks: u64,
    granted_bytes: u64,
    outstanding_limited: u64,
    late_bytes: u64,
    withheld_bytes: u64,
    unclaimed_bytes: u64,
    ecn_slowed_bytes: u64,
    idle_evictions: u64,
    write_offs: u64,
    /// PDCs open now (opened minus closed; not a delta).
    pdcs_open: u64,
}

fn counters(c: &mut Client) -> Result<Counters> {
    let text = c
        .stats()
        .map_err(Error::client("reading a daemon's counters"))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(Error::json("parsing a daemon's counters"))?;
    Ok(counters_of(&v))
}

/// The counters of one `uet stats` document, summed over its workers.
fn counters_of(v: &serde_json::Value) -> Counters {
    let mut k = Counters::default();
    for w in v["workers"].as_array().into_iter().flatten() {
        let p = &w["pds"];
        let pds = |key: &str| p[key].as_u64().unwrap_or(0);
        k.tx_data += pds("tx_data");
        k.retransmits += pds("tx_retransmits");
        k.first_rtt_resent += pds("first_rtt_resent");
        k.rtos += pds("rtos");
        k.tail_probes += pds("tail_probes");
        k.sack_inferred += pds("sack_inferred");
        k.rx_data += pds("rx_data");
        k.tx_acks += pds("tx_acks");
        k.rx_ce += pds("rx_ce");
        k.tx_nacks += p["tx_nacks"].as_object().map_or(0, |m| {
            m.values().filter_map(serde_json::Value::as_u64).sum()
        });
        k.pdcs_open += pds("pdcs_opened").saturating_sub(pds("pdcs_closed"));
        k.tx_packets += w["io"]["tx_packets"].as_u64().unwrap_or(0);
        let r = &w["rccc_receiver"];
        let pacer = |key: &str| r[key].as_u64().unwrap_or(0);
        k.pacer_ticks += pacer("ticks");
        k.granted_bytes += pacer("granted_bytes");
        k.outstanding_limited += pacer("outstanding_limited");
        k.late_bytes += pacer("late_bytes");
        k.withheld_bytes += pacer("withheld_bytes");
        k.unclaimed_bytes += pacer("unclaimed_bytes");
        k.ecn_slowed_bytes += pacer("ecn_slowed_bytes");
        k.idle_evictions += pacer("idle_evictions");
        k.write_offs += pacer("write_offs");
    }
    k
}

/// How long an idle PDC lives in the lab's daemons (`uetd --pdc-idle-ms`).
/// Every run starts with none open, so each is an incast of new PDCs and
/// new congestion-control state, speculative first windows included, as
/// the simulator's runs are; with the daemon's default (2 s) the seeds
/// after the first reused the first one's PDCs and credit state. Long
/// enough that a sender the CPUs kept waiting does not lose its PDC in
/// the middle of a flow (stalls of tens of ms are common here).
const LAB_PDC_IDLE_MS: u64 = 300;

/// Waits until none of `clients`' daemons holds an open PDC: the PDCs of
/// the previous run have idled out and closed. An error after `limit`.
fn wait_until_pdcs_closed(clients: &mut [&mut Client], limit: Duration) -> Result<()> {
    let start = Instant::now();
    loop {
        let mut open = 0;
        for c in clients.iter_mut() {
            open += counters(c)?.pdcs_open;
        }
        if open == 0 {
            return Ok(());
        }
        if start.elapsed() > limit {
            return Err(Error::Timeout {
                awaiting: format!(
                    "the previous run's PDCs to close ({LAB_PDC_IDLE_MS} ms idle, `uetd --pdc-idle-ms`)"
                ),
                state: format!("{open} still open after {} ms", limit.as_millis()),
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Counters {
    /// The receiver's part, as a run records it.
    fn receiver(&self) -> ReceiverCounters {
        ReceiverCounters {
            rx_data: self.rx_data,
            tx_acks: self.tx_acks,
            tx_nacks: self.tx_nacks,
            rx_ce: self.rx_ce,
            tx_packets: self.tx_packets,
            pacer_ticks: self.pacer_ticks,
            granted_bytes: self.granted_bytes,
            outstanding_limited: self.outstanding_limited,
            late_bytes: self.late_bytes,
            withheld_bytes: self.withheld_bytes,
            unclaimed_bytes: self.unclaimed_bytes,
            ecn_slowed_bytes: self.ecn_slowed_bytes,
            idle_evictions: self.idle_evictions,
            write_offs: self.write_offs,
        }
    }

    fn since(self, b: Self) -> Self {
        Self {
            tx_data: self.tx_data.saturating_sub(b.tx_data),
            retransmits: self.retransmits.saturating_sub(b.retransmits),
            first_rtt_resent: self.first_rtt_resent.saturating_sub(b.first_rtt_resent),
            rtos: self.rtos.saturating_sub(b.rtos),
            tail_probes: self.tail_probes.saturating_sub(b.tail_probes),
            sack_inferred: self.sack_inferred.saturating_sub(b.sack_inferred),
            rx_data: self.rx_data.saturating_sub(b.rx_data),
            tx_acks: self.tx_acks.saturating_sub(b.tx_acks),
            tx_nacks: self.tx_nacks.saturating_sub(b.tx_nacks),
            rx_ce: self.rx_ce.saturating_sub(b.rx_ce),
            tx_packets: self.tx_packets.saturating_sub(b.tx_packets),
            pacer_ticks: self.pacer_ticks.saturating_sub(b.pacer_ticks),
            granted_bytes: self.granted_bytes.saturating_sub(b.granted_bytes),
            outstanding_limited: self
                .outstanding_limited
                .saturating_sub(b.outstanding_limited),
            late_bytes: self.late_bytes.saturating_sub(b.late_bytes),
            withheld_bytes: self.withheld_bytes.saturating_sub(b.withheld_bytes),
            unclaimed_bytes: self.unclaimed_bytes.saturating_sub(b.unclaimed_bytes),
            ecn_slowed_bytes: self.ecn_slowed_bytes.saturating_sub(b.ecn_slowed_bytes),
            idle_evictions: self.idle_evictions.saturating_sub(b.idle_evictions),
            write_offs: self.write_offs.saturating_sub(b.write_offs),
            pdcs_open: self.pdcs_open,
        }
    }
}

/// The first congestion context toward `dst` in a daemon's counters, at
/// `t_ns`.
fn ccc_of(stats: &str, dst: &str, t_ns: i64) -> Option<CcSample> {
    let v: serde_json::Value = serde_json::from_str(stats).ok()?;
    v["workers"]
        .as_array()?
        .iter()
        .flat_map(|w| w["ccc"].as_array().into_iter().flatten())
        .find(|c| c["dst"] == dst)
        .map(|c| CcSample {
            t_ns,
            cwnd: c["cwnd"].as_u64().unwrap_or(0),
            inflight: c["inflight"].as_i64().unwrap_or(0),
            backlog: c["backlog"].as_u64().unwrap_or(0),
            credit: c["credit"].as_i64(),
        })
}

/// Paces a sampling loop: every `period_ns` until `stop`.
fn paced(period_ns: u64, stop: &AtomicBool, mut f: impl FnMut() -> Result<()>) -> Result<()> {
    let mut next = monotonic_ns();
    while !stop.load(Ordering::Relaxed) {
        f()?;
        next += period_ns;
        let now = monotonic_ns();
        if next > now {
            // Pacing the sampler, not waiting for an event.
            std::thread::park_timeout(Duration::from_nanos(next - now));
        } else {
            next = now;
        }
    }
    f()
}

/// Makes the calling (victim) thread SCHED_FIFO at the priority of its
/// daemon when `realtime`; warns when the system refuses.
fn probe_priority(realtime: bool) {
    if realtime
        && let Err(e) = uetd::sys::affinity::set_fifo_priority(i32::from(crate::PROBE_PRIORITY))
    {
        tracing::warn!("the victim pings without real-time priority: {e}");
    }
}

/// Samples the bottleneck every 500 µs until `stop`, as a SCHED_FIFO
/// thread (the incast's writers and daemons load both CPUs; a normal
/// thread fell below 1 kHz).
fn queue_loop(sampler: &Sampler, stop: &AtomicBool) -> Result<Vec<Sample>> {
    if let Err(e) = uetd::sys::affinity::set_fifo_priority(10) {
        tracing::warn!("the queue sampler runs without real-time priority: {e}");
    }
    let mut out = Vec::with_capacity(4096);
    paced(500_000, stop, || {
        out.push(sampler.sample()?);
        Ok(())
    })?;
    Ok(out)
}

/// Samples `dst`'s congestion context in a daemon's published counters
/// every millisecond (they are published at most that often) until `stop`.
fn trace_loop(c: &mut Client, dst: &str, stop: &AtomicBool) -> Result<Vec<CcSample>> {
    let mut out = Vec::with_capacity(2048);
    paced(1_000_000, stop, || {
        let stats = c
            .stats()
            .map_err(Error::client("reading the traced sender's counters"))?;
        if let Some(s) = ccc_of(&stats, dst, monotonic_ns() as i64) {
            out.push(s);
        }
        Ok(())
    })?;
    Ok(out)
}

/// What the sampling threads collected.
#[derive(Debug, Default)]
struct Samples {
    queue: Vec<Sample>,
    /// Absolute CLOCK_MONOTONIC times in `t_ns`.
    cc: Vec<CcSample>,
}

fn queue_samples(raw: &[Sample], t0: u64) -> Vec<QueueSample> {
    let Some(first) = raw
        .iter()
        .find(|s| s.qdisc.t_ns >= t0)
        .or_else(|| raw.first())
    else {
        return Vec::new();
    };
    let (d0, b0, m0) = (first.qdisc.drops, first.qdisc.bytes, first.ecn.marked);
    let v0 = first.ecn.vq_drops;
    let t0_trimmed = first.ecn.trimmed;
    raw.iter()
        .map(|s| QueueSample {
            t_ns: s.qdisc.t_ns as i64 - t0 as i64,
            backlog_bytes: u64::from(s.qdisc.backlog),
            backlog_packets: u64::from(s.qdisc.qlen),
            drops: u64::from(s.qdisc.drops.saturating_sub(d0)),
            sent_bytes: s.qdisc.bytes.saturating_sub(b0),
            vq_bytes: s.ecn.vq_backlog,
            ce_marks: s.ecn.marked.saturating_sub(m0),
            vq_overflows: s.ecn.vq_drops.saturating_sub(v0),
            trimmed: s.ecn.trimmed.saturating_sub(t0_trimmed),
        })
        .collect()
}

/// Replaces the bottleneck's TBF (rate, buffer) in the switch.
fn set_tbf(lab: &Lab, rate: u64, limit: u64) -> Result<()> {
    let burst = (2 * u64::from(lab.state.config.mtu + 14)).max(rate / 8 / 50_000);
    crate::tbf(lab.switch(), "replace", rate, burst, limit)
        .map_err(Error::during("changing the TBF bottleneck"))
}

impl Lab {
    /// Restarts every serving daemon with congestion control `cc`, base
    /// RTT `base_rtt_us` and fabric RTT `fabric_rtt_us` (`uetd` refuses
    /// one above the base RTT).
    fn restart_daemons(&mut self, cc: &str, base_rtt_us: u64, fabric_rtt_us: u64) -> Result<()> {
        self.state.config.cc = cc.to_owned();
        self.state.config.base_rtt_us = Some(base_rtt_us.max(1));
        self.state.config.fabric_rtt_us = Some(fabric_rtt_us);
        for i in 0..self.state.hosts.len() {
            if self.daemons[i].is_some() {
                self.stop_daemon(i)?;
                self.start_daemon(i)?;
            }
        }
        self.state.save()
    }
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// The daemons' arguments besides the lab's own: the busy poll, the PDC
/// idle time ([`LAB_PDC_IDLE_MS`]), and the RTO once the calibration
/// derived it.
///
/// The incast's RTO is the one the lab sizes from its buffer and T0, also
/// while a target is silent (`--rto-silent-us 0`): with the daemon's
/// 20 ms floor for silent targets (as first defined: a tail probe
/// unanswered), 64 senders × 256 KiB at a fixed 200 Mb/s dropped more
/// after the first round trip in four of four interleaved pairs
/// (BENCHMARKS.md, "A longer RTO while the target answers nothing").
fn daemon_args(opts: &IncastOpts, rto_init_us: Option<u64>) -> Vec<String> {
    let mut a = vec![
        "--busy-poll-us".into(),
        opts.busy_poll_us.to_string(),
        "--pdc-idle-ms".into(),
        LAB_PDC_IDLE_MS.to_string(),
        "--rto-silent-us".into(),
        "0".into(),
    ];
    if let Some(rto) = rto_init_us {
        a.extend(["--rto-init-us".into(), rto.to_string()]);
    }
    if !opts.rccc_ecn_rate {
        a.extend(["--rccc-ecn-rate".into(), "false".into()]);
    }
    a
}

/// A small xorshift for the start jitter (seeded per run: reproducible
/// offsets).
fn jitter_ns(seed: u64, sender: usize, max: u64) -> u64 {
    if max == 0 {
        return 0;
    }
    let mut z = seed ^ (sender as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % (max + 1)
}

/// A lab built for incasts, calibrated.
#[derive(Debug)]
pub struct IncastLab {
    lab: Lab,
    opts: IncastOpts,
    /// What every run shares.
    pub setup: Setup,
    /// What the calibration measured.
    pub calibration: Calibration,
    victim_host: Option<usize>,
    max_size: u64,
}

impl IncastLab {
    /// Builds the lab (max N senders, a receiver, a victim if asked) and
    /// calibrates: T0, each sender's solo rate, the buffer and ECN
    /// thresholds from the measured BDP, the victim alone.
    pub fn up(opts: IncastOpts) -> Result<Self> {
        opts.check()?;
        let load_before = load_average();
        let max_n = *opts.senders.iter().max().expect("checked");
        let max_size = *opts.sizes.iter().max().expect("checked");
        let victim_host = opts.victim.then_some(max_n + 1);
        let hosts = max_n + 1 + usize::from(opts.victim);
        let r = opts.bottleneck;
        let lab = Lab::up(LabConfig {
            hosts,
            bottleneck: Some(r),
            buffer: Some(opts.buffer.unwrap_or(r / 8 / 1000).max(64 << 10)),
            ecn: None,
            mtu: opts.mtu,
            backend: opts.backend,
            cc: "none".into(),
            link_rate: Some(r),
            daemon_args: daemon_args(&opts, None),
            realtime_hosts: victim_host
                .filter(|_| opts.victim_realtime)
                .into_iter()
                .chain(opts.receiver_realtime.then_some(0))
                .collect(),
            prompt_hosts: if opts.prompt_receiver {
                std::iter::once(0).chain(victim_host).collect()
            } else {
                Vec::new()
            },
            // Room for every flow, then the victim's slot; and for the
            // calibration's solo writes.
            region_bytes: ((max_n as u64 + 1) * max_size.next_multiple_of(4096)).max(SOLO_BYTES),
            ..LabConfig::default()
        })?;
        let payload = u64::from(opts.mtu) + 14 - HEADER_BYTES;
        let setup = Setup {
            bottleneck_bps: r,
            buffer_bytes: 0,
            ecn: None,
            jitter_ns: u64::try_from(opts.jitter.as_nanos()).unwrap_or(u64::MAX),
            victim: opts.victim,
            trim: opts.trim,
            rccc_ecn_rate: opts.rccc_ecn_rate,
            seeds: opts.seeds,
            mtu: opts.mtu,
            backend: match opts.backend {
                Backend::Xdp => "xdp",
                Backend::Udp => "udp",
            }
            .into(),
            chunk: opts.chunk_for(max_size),
            payload_per_packet: payload,
            header_bytes_per_packet: HEADER_BYTES,
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
            load_before,
            base_rtt_us: 0,
            fabric_rtt_us: 0,
            rto_init_us: 0,
        };
        let me = Self {
            lab,
            opts,
            setup,
            calibration: Calibration {
                t0: LatencyStats::default(),
                t0_batch_p50_ns: Vec::new(),
                bdp_bytes: 0,
                solo_bps: Vec::new(),
                single_flow_bps: 0.0,
                single_flow_ratio: 0.0,
                victim_isolated: None,
                all_senders_bps: 0.0,
                requested_bottleneck_bps: r,
                fit_steps: Vec::new(),
            },
            victim_host,
            max_size,
        };
        Ok(me)
    }

    /// Calibrates the lab (T0, the senders' rates, and with
    /// `fit_bottleneck` R fitted to what they feed and control).
    pub fn calibrate_all(&mut self) -> Result<()> {
        self.calibrate()?;
        if self.opts.fit_bottleneck {
            self.fit_to_control()?;
        }
        Ok(())
    }

    /// The lab underneath.
    pub fn lab(&mut self) -> &mut Lab {
        &mut self.lab
    }

    fn calibrate(&mut self) -> Result<()> {
        let dst = self.lab.region(0)?;
        let stop = AtomicBool::new(false);

        // Each sender alone, no bottleneck (a 100 Gb/s TBF does not shape).
        let max_n = *self.opts.senders.iter().max().expect("checked");
        set_tbf(&self.lab, 100_000_000_000, 4 << 20)?;
        let solo_bytes = SOLO_BYTES;
        let mut solo = Vec::with_capacity(max_n);
        for host in 1..=max_n {
            let mut w = Writer::new(&self.lab, host, solo_bytes)?;
            let o = w.flow(&dst, 0, solo_bytes, 1 << 20, self.opts.timeout)?;
            if let Some(e) = o.error {
                return Err(Error::Operation {
                    what: format!("calibration: a write of host {host} alone"),
                    status: e,
                });
            }
            let secs = (Writer::end(&o) - o.start).max(1) as f64 / 1e9;
            solo.push(solo_bytes as f64 * 8.0 / secs);
        }
        self.calibration.solo_bps = solo;

        // Every sender at once, no bottleneck: what the machine feeds
        // with all the daemons busy, and the bottleneck below it.
        let all = self.all_senders_bps(&dst, max_n)?;
        self.calibration.all_senders_bps = all;
        if self.opts.fit_bottleneck {
            let r = crate::incast::model::fit_bottleneck(self.opts.bottleneck, all);
            self.opts.bottleneck = r;
            self.setup.bottleneck_bps = r;
            self.lab.state.config.bottleneck = Some(r);
            self.lab.state.config.link_rate = Some(r);
        }
        let r = self.opts.bottleneck;

        // T0: one-packet writes through the bottleneck path, idle.
        set_tbf(&self.lab, r, (r / 8 / 1000).max(64 << 10))?;
        let mut w = Writer::new(&self.lab, 1, 1 << 20)?;
        w.ping(&dst, 0, Some(50), &stop)?; // warm-up: PDC, neighbours
        let (t0, medians) = w.ping_t0(&dst, &stop)?;
        self.calibration.t0 = t0;
        self.calibration.t0_batch_p50_ns = medians;

        self.apply_bottleneck(r)?;

        if let Some(v) = self.victim_host {
            let mut w = Writer::new(&self.lab, v, 4096)?;
            let isolated = self.victim_alone(&mut w, &dst)?;
            self.calibration.victim_isolated = Some(isolated);
        }
        Ok(())
    }

    /// The victim's ping-pong alone: 50 writes to warm its path (PDC,
    /// neighbours), then 1,000 timed, from a thread at the victim's
    /// priority.
    fn victim_alone(&self, w: &mut Writer, dst: &RemoteRegion) -> Result<LatencyStats> {
        let off = self.victim_offset();
        let realtime = self.opts.victim_realtime;
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                probe_priority(realtime);
                w.ping(dst, off, Some(50), &stop)?;
                w.ping(dst, off, Some(1000), &stop)
            })
            .join()
            .expect("victim panicked")
        })
    }

    /// Sets the bottleneck to `r`: the rate the daemons plan for (at their
    /// next start), the TBF, and the buffer and marking thresholds from
    /// the BDP at the measured T0.
    fn apply_bottleneck(&mut self, r: u64) -> Result<()> {
        self.opts.bottleneck = r;
        self.setup.bottleneck_bps = r;
        self.lab.state.config.bottleneck = Some(r);
        self.lab.state.config.link_rate = Some(r);
        let bdp = (r as f64 / 8.0 * self.calibration.t0.p50_ns as f64 / 1e9).round() as u64;
        self.calibration.bdp_bytes = bdp;
        // The buffer and the marking thresholds from the measured BDP.
        let buffer = self
            .opts
            .buffer
            .unwrap_or(5 * bdp)
            .max(4 * u64::from(self.opts.mtu + 14));
        // Marking at 0.2/0.8 of the BDP the daemons plan for (R × base
        // RTT), not of the idle one: senders whose loops run several T0
        // long send bursts that thresholds of 0.2/0.8 × R·T0 would mark
        // nearly always, holding NSCC far below its window.
        let cc_bdp = r / 8 * self.base_rtt_us() / 1_000_000;
        let ecn = if self.opts.no_ecn {
            None
        } else {
            Some(self.opts.ecn.unwrap_or((cc_bdp / 5, cc_bdp * 4 / 5)))
        };
        self.lab.state.config.buffer = Some(buffer);
        self.lab.state.config.ecn = ecn;
        // Trimming from here on, not in the calibration before: with the
        // TBF wide open the virtual queue, still draining at R, would trim
        // the senders' solo writes. The daemons take `--trimming` at
        // their next start.
        self.lab.state.config.trim = self.opts.trim;
        set_tbf(&self.lab, r, crate::tbf_limit(buffer, self.opts.trim, r))?;
        self.lab.ecn_maps()?.configure(&EcnSettings {
            rate_bps: r,
            thresholds: ecn,
            limit: buffer,
            trim: self.lab.state.config.trim,
        })?;
        self.setup.buffer_bytes = buffer;
        self.setup.ecn = ecn;

        Ok(())
    }

    /// With the congestion control the runs use (RCCC if asked for, else
    /// the first mode other than none), every sender at once writes its
    /// largest flow through the bottleneck; while together they fill less
    /// than [`FILL_TARGET`] of R (the CPUs, not the bottleneck, hold them
    /// back: a controlled sender sends a few packets per wake-up where an
    /// uncontrolled one sends a window), R drops to that share of what
    /// they filled; with RCCC, also while the receiver's pacer lost more
    /// than [`crate::incast::model::LATE_TARGET`] of its budget to late
    /// ticks ([`FitStep::next_bottleneck`]). [`FIT_STEPS`] times at most,
    /// besides up to [`FIT_RETRIES`] writes measured again because the
    /// host took the CPUs ([`FitStep::measure_again`]).
    fn fit_to_control(&mut self) -> Result<()> {
        let Some(cc) = ["rccc", "nscc", "nscc+rccc", "pft"]
            .into_iter()
            .find(|c| self.opts.ccs.iter().any(|x| x == c))
        else {
            return Ok(());
        };
        let n = *self.opts.senders.iter().max().expect("checked");
        let paced = cc.contains("rccc");
        // R is kept once two steps in a row at it passed: one write is a
        // noisy measure on a busy machine (one passed at 680 Mb/s with
        // the pacer 1 % late; the runs there lost 19–22 %).
        let mut passed_at = None;
        // The R last measured again for the host's steal, and how many
        // writes were: those come on top of the FIT_STEPS, up to
        // FIT_RETRIES.
        let mut retried_at = None;
        let mut retries = 0;
        let mut steps = 0;
        while steps < FIT_STEPS {
            let r = self.opts.bottleneck;
            self.lab.state.config.daemon_args = daemon_args(&self.opts, Some(self.rto_init_us()));
            self.lab
                .restart_daemons(cc, self.base_rtt_us(), self.fabric_rtt_us())?;
            let dst = self.lab.region(0)?;
            let mut receiver = self.lab.client(0, "incast-calibration")?;
            let before = counters(&mut receiver)?;
            let chunk = self.opts.chunk_for(self.max_size);
            let cpu = crate::cpu::CpuSample::now().ok();
            let filled = self.all_at_once_bps(&dst, n, self.max_size, chunk)?;
            let steal = cpu.and_then(|c| c.steal_share().ok());
            let rx = counters(&mut receiver)?.since(before).receiver();
            let budget = rx.pacer_budget();
            let step = FitStep {
                cc: cc.to_owned(),
                bottleneck_bps: r,
                filled_bps: filled,
                pacer_late: (paced && budget > 0).then(|| rx.late_bytes as f64 / budget as f64),
                pacer_ecn: (paced && budget > 0)
                    .then(|| rx.ecn_slowed_bytes as f64 / budget as f64),
                steal,
            };
            if retries < FIT_RETRIES && step.measure_again(retried_at) {
                // The host took the CPUs: the fill says more about the
                // neighbours than about the lab. The same R once more.
                retried_at = Some(r);
                retries += 1;
                self.calibration.fit_steps.push(step);
                continue;
            }
            steps += 1;
            let next = step.next_bottleneck();
            let back = self
                .calibration
                .fit_steps
                .last()
                .filter(|before| step.worse_than(before))
                .map(|before| before.bottleneck_bps);
            self.calibration.fit_steps.push(step);
            if let Some(r) = back {
                // Lowering R made them fill less of it: the higher one.
                self.apply_bottleneck(r)?;
                break;
            }
            match next {
                None if passed_at == Some(r) => break,
                None => passed_at = Some(r),
                Some(next) => {
                    passed_at = None;
                    self.apply_bottleneck(next)?;
                }
            }
        }
        Ok(())
    }

    /// Wire bits/s that `n` senders feed together without a bottleneck:
    /// each writes its share of the receiver's region (at most
    /// `SOLO_BYTES`) from a common start.
    fn all_senders_bps(&self, dst: &RemoteRegion, n: usize) -> Result<f64> {
        let share =
            (self.lab.state.config.region_bytes / n as u64 / 4096 * 4096).clamp(4096, SOLO_BYTES);
        self.all_at_once_bps(dst, n, share, share.min(1 << 20))
    }

    /// Wire bits/s of `n` senders writing `share` bytes each into their
    /// own parts of the receiver's region from a common start: their wire
    /// bytes over the time from the first submit to the last completion.
    fn all_at_once_bps(&self, dst: &RemoteRegion, n: usize, share: u64, chunk: u64) -> Result<f64> {
        let stride = share.next_multiple_of(4096);
        let mut writers = (1..=n)
            .map(|h| Writer::new(&self.lab, h, share))
            .collect::<Result<Vec<_>>>()?;
        let barrier = Barrier::new(n);
        let timeout = self.opts.timeout;
        let outcomes = std::thread::scope(|s| {
            let handles: Vec<_> = writers
                .iter_mut()
                .enumerate()
                .map(|(i, w)| {
                    let barrier = &barrier;
                    s.spawn(move || {
                        barrier.wait();
                        w.flow(dst, i as u64 * stride, share, chunk, timeout)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("calibration writer panicked"))
                .collect::<Result<Vec<_>>>()
        })?;
        if let Some(e) = outcomes.iter().find_map(|o| o.error.clone()) {
            return Err(Error::Operation {
                what: format!("calibration: {n} senders at once"),
                status: e,
            });
        }
        let start = outcomes.iter().map(|o| o.start).min().unwrap_or(0);
        let end = outcomes.iter().map(Writer::end).max().unwrap_or(start);
        let secs = (end - start).max(1) as f64 / 1e9;
        Ok(n as f64 * self.setup.wire_bytes(share) as f64 * 8.0 / secs)
    }

    /// What the daemons plan for: `--base-rtt-us`, else
    /// [`BASE_RTT_PER_T0`] × T0 (p50).
    /// The daemons' fabric RTT, NSCC's target delay: the idle T0 (p50).
    /// NSCC times its delays from the XDP program's arrival stamps, so
    /// they leave out the daemons' wake-ups that the base RTT's 3 × T0
    /// makes room for; a target of 3 × T0 kept three BDPs queued in a
    /// buffer of five, and bursts overflowed it. At most the base RTT (a
    /// `--base-rtt-us` below T0).
    fn fabric_rtt_us(&self) -> u64 {
        self.calibration
            .t0
            .p50_ns
            .div_ceil(1000)
            .clamp(1, self.base_rtt_us().max(1))
    }

    fn base_rtt_us(&self) -> u64 {
        self.opts
            .base_rtt_us
            .unwrap_or_else(|| (self.calibration.t0.p50_ns * BASE_RTT_PER_T0).div_ceil(1000))
    }

    /// RTO_INIT_TIME for the daemons (the spec leaves it to the fabric's
    /// configuration): `--rto-init-us`, else UEC's simulator's rule — 6 ×
    /// the time to drain a full buffer — plus 4 × the idle path's p99 round
    /// trip (scheduler jitter on a shared host reaches milliseconds, which
    /// the default RTO alone would turn into timeouts with no drop), and at
    /// least the daemon's default 5 ms.
    pub fn rto_init_us(&self) -> u64 {
        self.opts.rto_init_us.unwrap_or_else(|| {
            let drain_us = self.setup.buffer_bytes * 8 * 1_000_000 / self.opts.bottleneck.max(1);
            let jitter_us = self.calibration.t0.p99_ns.div_ceil(1000);
            (6 * drain_us + 4 * jitter_us).clamp(5_000, 1_000_000)
        })
    }

    fn victim_offset(&self) -> u64 {
        let max_n = *self.opts.senders.iter().max().expect("checked") as u64;
        max_n * self.max_size.next_multiple_of(4096)
    }

    /// Every run of `cc`: the daemons restart with it (base RTT = T0), one
    /// flow through the bottleneck is measured, then every (N, size, seed);
    /// `done` sees each run as it finishes.
    pub fn runs(&mut self, cc: &str, mut done: impl FnMut(&Run)) -> Result<Vec<Run>> {
        let base_rtt_us = self.base_rtt_us();
        self.setup.base_rtt_us = base_rtt_us;
        let fabric_rtt_us = self.fabric_rtt_us();
        self.setup.fabric_rtt_us = fabric_rtt_us;
        let rto = self.rto_init_us();
        self.setup.rto_init_us = rto;
        self.lab.state.config.daemon_args = daemon_args(&self.opts, Some(rto));
        self.lab.restart_daemons(cc, base_rtt_us, fabric_rtt_us)?;
        let max_n = *self.opts.senders.iter().max().expect("checked");
        let mut writers = (1..=max_n)
            .map(|h| Writer::new(&self.lab, h, self.max_size))
            .collect::<Result<Vec<_>>>()?;
        let mut victim = self
            .victim_host
            .map(|v| Writer::new(&self.lab, v, 4096))
            .transpose()?;
        let mut receiver = self.lab.client(0, "incast-receiver")?;
        let mut tracer = self.lab.client(1, "incast-tracer")?;
        let sampler = self.lab.sampler()?;
        let dst = self.lab.region(0)?;

        // One flow through the bottleneck (cc-eval: ≥ 95 % of R).
        {
            let bytes = self.max_size.max(4 << 20).min(writers[0].region.len());
            let o = writers[0].flow(
                &dst,
                0,
                bytes,
                self.opts.chunk_for(bytes),
                self.opts.timeout,
            )?;
            if o.error.is_none() {
                // In wire bytes, the units of R: payload goodput alone
                // cannot reach 95 % of R at MTU 1500.
                let secs = (Writer::end(&o) - o.start).max(1) as f64 / 1e9;
                let ratio = self.setup.single_flow_ratio(bytes, secs);
                if ratio > self.calibration.single_flow_ratio {
                    self.calibration.single_flow_bps =
                        self.setup.wire_bytes(bytes) as f64 * 8.0 / secs;
                    self.calibration.single_flow_ratio = ratio;
                }
            }
        }

        let mut runs = Vec::new();
        for &n in &self.opts.senders.clone() {
            for &size in &self.opts.sizes.clone() {
                for seed in 0..self.opts.seeds as u64 {
                    let run = self.one(
                        cc,
                        n,
                        size,
                        seed,
                        &mut writers[..n],
                        victim.as_mut(),
                        &mut receiver,
                        &mut tracer,
                        &sampler,
                        &dst,
                    )?;
                    done(&run);
                    runs.push(run);
                }
            }
        }
        Ok(runs)
    }

    #[allow(clippy::too_many_arguments)]
    fn one(
        &self,
        cc: &str,
        n: usize,
        size: u64,
        seed: u64,
        writers: &mut [Writer],
        victim: Option<&mut Writer>,
        receiver: &mut Client,
        tracer: &mut Client,
        sampler: &Sampler,
        dst: &RemoteRegion,
    ) -> Result<Run> {
        let chunk = self.opts.chunk_for(size);
        let slot = self.max_size.next_multiple_of(4096);
        let timeout = self.opts.timeout;
        let jitter = self.setup.jitter_ns;
        let mut victim = victim;
        {
            let mut clients: Vec<&mut Client> = writers.iter_mut().map(|w| &mut w.client).collect();
            if let Some(v) = victim.as_mut() {
                clients.push(&mut v.client);
            }
            clients.push(&mut *receiver);
            wait_until_pdcs_closed(
                &mut clients,
                Duration::from_millis(20 * LAB_PDC_IDLE_MS + 2_000),
            )?;
        }
        // The victim alone, with this run's daemons, a moment before the
        // incast: the run's CIFs divide by it (its PDC stays open into the
        // run; the incast's senders start with new ones).
        let victim_isolated = match victim.as_mut() {
            Some(v) => Some(self.victim_alone(v, dst)?),
            None => None,
        };
        let before: Vec<Counters> = writers
            .iter_mut()
            .map(|w| counters(&mut w.client))
            .collect::<Result<_>>()?;
        let rx_before = counters(receiver)?;
        let receiver_ip = self.lab.ip(0).to_string();
        let victim_off = self.victim_offset();
        let stop_sampling = AtomicBool::new(false);
        let stop_victim = AtomicBool::new(false);
        let barrier = Barrier::new(n + 1);
        let t0_cell = Mutex::new(0u64);
        let (flows, samples, victim_lat, cpu) = std::thread::scope(|s| -> Result<_> {
            let sampling = s.spawn(|| queue_loop(sampler, &stop_sampling));
            let tracer_t = s.spawn(|| trace_loop(tracer, &receiver_ip, &stop_sampling));
            let realtime = self.opts.victim_realtime;
            let stop_v = &stop_victim;
            let victim_t = victim.map(|v| {
                s.spawn(move || {
                    probe_priority(realtime);
                    v.ping(dst, victim_off, None, stop_v)
                })
            });
            let handles: Vec<_> = writers
                .iter_mut()
                .enumerate()
                .map(|(i, w)| {
                    let barrier = &barrier;
                    s.spawn(move || {
                        barrier.wait();
                        let j = jitter_ns(seed, i, jitter);
                        if j > 0 {
                            // The run's start offset for this sender.
                            std::thread::sleep(Duration::from_nanos(j));
                        }
                        w.flow(dst, i as u64 * slot, size, chunk, timeout)
                    })
                })
                .collect();
            // Let the sampler and the victim see the idle queue first.
            std::thread::sleep(Duration::from_millis(5));
            barrier.wait();
            *t0_cell.lock().expect("not poisoned") = monotonic_ns();
            let cpu_before = crate::cpu::CpuSample::now().ok();
            let flows: Vec<_> = handles
                .into_iter()
                .map(|h| h.join().expect("writer thread panicked"))
                .collect();
            // (busy, stolen) shares of all CPU time over the window; a
            // vCPU the host ran something else on counts as busy.
            let cpu = cpu_before
                .zip(crate::cpu::CpuSample::now().ok())
                .and_then(|(a, b)| a.shares_until(&b));
            // A few samples of the drained queue after the last completion.
            std::thread::sleep(Duration::from_millis(3));
            stop_sampling.store(true, Ordering::Relaxed);
            stop_victim.store(true, Ordering::Relaxed);
            let samples = Samples {
                queue: sampling.join().expect("sampler panicked")?,
                cc: tracer_t.join().expect("tracer panicked")?,
            };
            let victim_lat = victim_t
                .map(|h| h.join().expect("victim panicked"))
                .transpose()?;
            Ok((flows, samples, victim_lat, cpu))
        })?;
        let flows: Vec<_> = flows.into_iter().collect::<Result<_>>()?;
        let barrier_t = *t0_cell.lock().expect("not poisoned");
        // The common start: the barrier's release, or the first submit if
        // a sender got there first.
        let t0 = flows
            .iter()
            .map(|f| f.start)
            .min()
            .map_or(barrier_t, |f| f.min(barrier_t));
        let mut out = Vec::with_capacity(n);
        for (i, (o, w)) in flows.into_iter().zip(writers.iter_mut()).enumerate() {
            let d = counters(&mut w.client)?.since(before[i]);
            out.push(Flow {
                sender: w.host,
                bytes: size,
                wire_bytes: self.setup.wire_bytes(size),
                start_ns: o.start - t0,
                end_ns: Writer::end(&o) - t0,
                progress: o.progress.iter().map(|&(t, b)| (t - t0, b)).collect(),
                retransmits: d.retransmits,
                first_rtt_resent: d.first_rtt_resent,
                rtos: d.rtos,
                // The PDS counts first transmissions as tx_data.
                tx_data: d.tx_data + d.retransmits,
                tail_probes: d.tail_probes,
                sack_inferred: d.sack_inferred,
                error: o.error,
            });
        }
        let rx = counters(receiver)?.since(rx_before);
        let cc_trace = samples
            .cc
            .iter()
            .map(|c| CcSample {
                t_ns: c.t_ns - t0 as i64,
                ..*c
            })
            .collect();
        Ok(Run {
            cc: cc.to_owned(),
            senders: n,
            size,
            seed,
            flows: out,
            queue: queue_samples(&samples.queue, t0),
            cc_trace_sender: 1,
            cc_trace,
            receiver: rx.receiver(),
            victim: victim_lat.map(|congested| VictimRun {
                congested,
                isolated: victim_isolated,
            }),
            cpu_busy: cpu.map(|c| c.0),
            cpu_steal: cpu.map(|c| c.1),
            metrics: Default::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_incasts_daemons_take_the_rto_the_lab_sized_also_while_silent() {
        let a = daemon_args(&IncastOpts::default(), Some(9_000));
        let pair = |flag: &str| a.windows(2).find(|w| w[0] == flag).map(|w| w[1].clone());
        assert_eq!(pair("--rto-init-us").as_deref(), Some("9000"));
        assert_eq!(pair("--rto-silent-us").as_deref(), Some("0"));
        let before = daemon_args(&IncastOpts::default(), None);
        assert!(!before.iter().any(|x| x == "--rto-init-us"));
        assert!(before.iter().any(|x| x == "--rto-silent-us"));
    }

    #[test]
    fn t0_is_the_quickest_batch_s_median_and_its_tail_keeps_every_write() {
        let batch = |ns: u64| {
            let mut h = new_histogram();
            for _ in 0..100 {
                h.record(ns).unwrap();
            }
            h
        };
        // One batch in a stall (600 µs a write), three quick ones; the
        // slow one alone would not move the median of all 400, two would.
        let (t0, medians) = t0_from_batches(
            &[
                batch(600_000),
                batch(300_000),
                batch(650_000),
                batch(320_000),
            ],
            0.2,
        );
        assert_eq!(medians.len(), 4);
        assert!(medians[0].abs_diff(600_000) < 1_000, "{medians:?}");
        assert!(t0.p50_ns.abs_diff(300_000) < 1_000, "{t0:?}");
        assert_eq!(t0.count, 400);
        assert!(t0.p99_ns.abs_diff(650_000) < 1_000, "{t0:?}");
        assert!(t0.max_ns.abs_diff(650_000) < 1_000, "{t0:?}");
        assert!((t0.ops_per_s - 2000.0).abs() < 1e-6, "{t0:?}");
    }

    #[test]
    fn t0_settles_when_two_batches_agree_with_the_quickest() {
        assert!(!t0_settled(&[]));
        assert!(!t0_settled(&[300]));
        // Four slow batches and nothing near the quickest: measure on.
        assert!(!t0_settled(&[713, 943, 1263, 900]));
        assert!(!t0_settled(&[594, 301, 674, 559]));
        // A second batch within a quarter of the quickest.
        assert!(t0_settled(&[594, 301, 674, 370]));
        assert!(t0_settled(&[249, 221, 215, 296]));
        assert!(t0_settled(&[713, 943, 700, 867]));
    }

    /// Two workers' `uet stats` objects, one of them pacing RCCC sources.
    fn doc() -> serde_json::Value {
        serde_json::json!({ "workers": [
            { "pds": { "tx_data": 10, "rx_data": 3, "pdcs_opened": 5, "pdcs_closed": 2,
                       "tx_nacks": { "psn_oor_window": 1, "unknown": 2 } },
              "io": { "tx_packets": 20 },
              "rccc_receiver": { "ticks": 7, "granted_bytes": 4000, "late_bytes": 100,
                                 "idle_evictions": 2, "write_offs": 1 } },
            { "pds": { "tx_data": 1, "pdcs_opened": 4, "pdcs_closed": 4 },
              "io": { "tx_packets": 2 } }
        ]})
    }

    #[test]
    fn a_daemons_counters_sum_its_workers_and_its_open_pdcs_come_from_the_pds() {
        let k = counters_of(&doc());
        assert_eq!(
            (k.tx_data, k.rx_data, k.tx_nacks, k.tx_packets),
            (11, 3, 3, 22)
        );
        // The lab waits between runs until this is 0 on every daemon: it
        // must count the PDS's PDCs, not read fields the pacer lacks.
        assert_eq!(k.pdcs_open, 3);
        assert_eq!(
            (k.pacer_ticks, k.granted_bytes, k.late_bytes),
            (7, 4000, 100)
        );
        assert_eq!((k.idle_evictions, k.write_offs), (2, 1));
    }
}
