//! Named scenarios over the fabric with real endpoints, each ending in a
//! [`Summary`] (what `uet-sim` prints as JSON).
//!
//! Data check without keeping every byte sent: the source buffer and the
//! destination region share one position-dependent pseudo-random pattern
//! space, and every write copies `src[off..off+len]` to
//! `dst[off..off+len]`. Whatever the order, overlap or repetition of writes,
//! a correct stack leaves `dst == src` on every byte any completed write
//! covered; a misplaced, corrupted, lost or doubly-applied stale byte shows
//! up as a mismatch.

use core::cell::RefCell;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::rc::Rc;

use uet_pds::PdsConfig;
use uet_ses::initiator::{Operation, RemoteAddr};
use uet_ses::memory::{Access, RegionSpec};
use uet_ses::types::{LocalBuf, MemoryKey, RegionAddr};
use uet_ses::{Endpoint, EndpointConfig, OpCompletion, OpError};
use uet_wire::encap::EncapConfig;
use uet_wire::pds::ReliableMode;
use uet_wire::rand::{Rng, Xoshiro256};
use uet_wire::time::{Duration, Instant};
use uet_wire::{JobId, PidOnFep, ResourceIndex, TrafficClass};

use crate::fabric::{Fabric, Impairments, LinkParams};
use crate::frame_ops::UetFrameOps;
use crate::host::{Engine, SimHost};
use crate::topology::single_switch;

/// The endpoint type scenarios use: memory is plain `Vec<u8>`.
pub type Ep = Endpoint<Vec<u8>>;

impl Engine for Ep {
    fn handle_datagram(&mut self, now: Instant, meta: &uet_pds::RxMeta, bytes: &[u8]) {
        Self::handle_datagram(self, now, meta, bytes);
    }
    fn handle_timeout(&mut self, now: Instant) {
        Self::handle_timeout(self, now);
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<uet_pds::Transmit> {
        Self::poll_transmit(self, now, buf)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Self::poll_timeout(self)
    }
}

/// Parameters of a many-writes scenario: `senders` hosts write to one
/// receiver through one switch.
#[derive(Debug, Clone)]
pub struct Writes {
    /// Sending hosts.
    pub senders: usize,
    /// Bytes each sender writes in total.
    pub bytes_per_sender: u64,
    /// Smallest and largest message.
    pub msg_size: (u32, u32),
    /// Region (and source buffer) size per sender.
    pub region: usize,
    /// Operations in flight per sender.
    pub in_flight: usize,
    /// RUD or ROD.
    pub mode: ReliableMode,
    /// Host links (both ways).
    pub link: LinkParams,
    /// Faults on every link.
    pub impair: Impairments,
    /// Trimming on every switch port (spec §7), if any.
    pub trim: Option<crate::fabric::Trimming>,
    /// PDS configuration of every endpoint.
    pub pds: PdsConfig,
    /// Seed of everything random.
    pub seed: u64,
    /// Simulated time limit.
    pub deadline: Duration,
    /// Same-instant events in seeded random order ([`Fabric::random_ties`]).
    pub random_ties: bool,
    /// When each sender submits its first operation (index = sender);
    /// senders past the end of the list start at time zero.
    pub start_at: Vec<Duration>,
    /// Record every congestion-control state change of the senders and
    /// the receiver's downlink queue into [`Summary::trace`].
    pub trace: bool,
    /// Drops after this time count as late
    /// ([`Summary::late_queue_drops`]).
    pub late_drops_after: Option<Duration>,
    /// A victim: one more host that writes small messages to the same
    /// receiver one at a time (a ping-pong crossing the senders'
    /// bottleneck, `docs/congestion-evaluation.md` metric 9).
    pub victim: Option<Victim>,
    /// Every host (senders and receiver) loses its CPU now and then.
    pub pauses: Option<crate::fabric::Pauses>,
    /// Every host's datagrams of the scenario's job sealed and opened by
    /// the transport security sublayer (one direct-mode domain and key),
    /// as the daemon runs it ([`crate::sealed::Sealed`]).
    pub tss: bool,
}

/// The victim ping-pong of [`Writes::victim`]: from time zero it writes
/// `size` bytes, waits for the write's completion, and writes again, while
/// any sender still has work and until it has completed `min_pings`
/// writes. Each write's latency (submission to completion) lands in
/// [`Summary::victim_latency_ns`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Victim {
    /// Bytes per write.
    pub size: u32,
    /// Writes to complete even when no sender has work (the latency alone).
    pub min_pings: u64,
}

impl Default for Writes {
    fn default() -> Self {
        Self {
            senders: 1,
            bytes_per_sender: 16 << 20,
            msg_size: (4096, 1 << 20),
            region: 8 << 20,
            in_flight: 8,
            mode: ReliableMode::Rud,
            link: LinkParams::new(100_000_000_000, Duration::from_micros(2), 4 << 20),
            impair: Impairments::default(),
            trim: None,
            pds: PdsConfig {
                rto_init: Duration::from_micros(200),
                max_rto_retx: 10,
                ..PdsConfig::default()
            },
            seed: 1,
            deadline: Duration::from_secs(600),
            random_ties: false,
            start_at: Vec::new(),
            trace: false,
            victim: None,
            late_drops_after: None,
            pauses: None,
            tss: false,
        }
    }
}

/// What a scenario did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// Bytes of successfully completed writes.
    pub bytes_placed: u64,
    /// Operations completed successfully.
    pub completions_ok: u64,
    /// Operations completed with an error, by reason.
    pub completions_err: BTreeMap<String, u64>,
    /// Data packets sent for the first time (all senders).
    pub data_packets: u64,
    /// Retransmissions (all endpoints).
    pub retransmits: u64,
    /// Retransmission timeouts (all endpoints).
    pub rtos: u64,
    /// Tail loss probes sent (all endpoints; not in [`Summary::to_json`],
    /// whose output the published tables were made from).
    pub tail_probes: u64,
    /// Packets dropped by switch queues.
    pub queue_drops: u64,
    /// Of those, the ones dropped after [`Writes::late_drops_after`].
    pub late_queue_drops: u64,
    /// Of those, data packets (not header-only control packets).
    pub late_queue_data_drops: u64,
    /// Packets lost, duplicated or corrupted by impairments.
    pub impaired: u64,
    /// Peak switch queue in bytes.
    pub peak_queue: u64,
    /// Packets trimmed by switches.
    pub trimmed: u64,
    /// Per sender: time of its last completion, in nanoseconds.
    pub flow_completion_ns: Vec<u64>,
    /// Whether every byte covered by a completed write matched.
    pub verified: bool,
    /// Bytes that did not match (0 when verified).
    pub mismatched_bytes: u64,
    /// Whether every submitted operation completed before the deadline.
    pub finished: bool,
    /// Simulated time at the end, in nanoseconds.
    pub sim_time_ns: u64,
    /// PDCs still open at the end (all endpoints).
    pub pdcs_open: usize,
    /// PDCs still open at the senders.
    pub sender_pdcs_open: usize,
    /// RCCC counters (zero without RCCC): the receiver's pacer and the
    /// sources' credit accounting, summed over sources.
    pub rccc: RcccCounters,
    /// With [`Writes::trace`]: the senders' congestion-control state
    /// changes and the bottleneck queue, in time order.
    pub trace: Vec<TraceRow>,
    /// With [`Writes::victim`]: the latency of each of its completed
    /// writes, in order, ns.
    pub victim_latency_ns: Vec<u64>,
}

/// One row of a scenario trace ([`Writes::trace`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRow {
    /// Simulated time in nanoseconds.
    pub t_ns: u64,
    /// The sender, or `None` for the receiver's downlink queue.
    pub sender: Option<usize>,
    /// What changed: `cwnd` (NSCC, bytes), `base_rtt_ns`, `state` (the
    /// CCC's), `credit` (RCCC balance in bytes; the note holds the credit
    /// received so far), `credit_request` (bytes asked for),
    /// `speculation_end` (speculative bytes dropped), `pft` (throttle
    /// state, `credit` units), `queue` (bytes).
    pub series: &'static str,
    /// The value.
    pub value: f64,
    /// Why, where the event says: NSCC's reason, the state, the cause.
    pub note: String,
}

impl TraceRow {
    /// Rows for one congestion-control event of `sender`; `granted` is
    /// that sender's running RCCC credit total.
    fn from_cc(sender: usize, e: uet_pds::CccTrace, granted: &mut u64) -> Option<Self> {
        use uet_cms::nscc::NsccEvent;
        use uet_cms::rccc::RcccSourceEvent;
        use uet_cms::{CmsEvent, PftEvent};
        use uet_pds::CccTrace;
        let row = |now: Instant, series, value: f64, note: String| Self {
            t_ns: now.as_nanos(),
            sender: Some(sender),
            series,
            value,
            note,
        };
        Some(match e {
            // NSCC's own event carries the reason.
            CccTrace::Ccc(CmsEvent::Window { .. }) => return None,
            CccTrace::Ccc(CmsEvent::State { now, state }) => {
                row(now, "state", state as u8 as f64, format!("{state:?}"))
            }
            CccTrace::Nscc(NsccEvent::Cwnd { now, cwnd, reason }) => {
                row(now, "cwnd", cwnd as f64, format!("{reason:?}"))
            }
            CccTrace::Nscc(NsccEvent::BaseRtt {
                now,
                base_rtt,
                max_wnd,
            }) => row(
                now,
                "base_rtt_ns",
                base_rtt.as_nanos() as f64,
                format!("max_wnd {max_wnd}"),
            ),
            CccTrace::Rccc(RcccSourceEvent::Credit { now, newly, credit }) => {
                *granted += newly;
                row(now, "credit", credit as f64, format!("granted {granted}"))
            }
            CccTrace::Rccc(RcccSourceEvent::RequestRaised { now, cause }) => {
                row(now, "credit_request", 0.0, format!("{cause:?}"))
            }
            CccTrace::Rccc(RcccSourceEvent::RequestSent { now, target }) => row(
                now,
                "credit_request",
                f64::from(target.get()),
                "sent".into(),
            ),
            CccTrace::Rccc(RcccSourceEvent::SpeculationEnded { now, discarded }) => {
                row(now, "speculation_end", discarded as f64, String::new())
            }
            CccTrace::Pft(PftEvent::State { now, state, credit }) => {
                row(now, "pft", credit as f64, format!("{state:?}"))
            }
        })
    }
}

/// RCCC counters of a scenario, for the reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RcccCounters {
    /// Grants the receiver's pacer handed out.
    pub grants: u64,
    /// Bytes the pacer granted.
    pub granted_bytes: u64,
    /// Speculative (first-window) bytes the receiver received.
    pub speculative_bytes: u64,
    /// Packets the receiver saw trimmed at the last hop.
    pub last_hop_trims: u64,
    /// CREDIT_REQ CPs the receiver got.
    pub credit_requests: u64,
    /// Senders dropped from the active table as idle.
    pub idle_evictions: u64,
    /// Speculative credit the sources dropped when speculation ended.
    pub discarded_bytes: u64,
    /// Granted credit the sources dropped at `max_credit`.
    pub clamped_bytes: u64,
}

impl RcccCounters {
    /// As JSON.
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "grants": self.grants,
            "granted_bytes": self.granted_bytes,
            "speculative_bytes": self.speculative_bytes,
            "last_hop_trims": self.last_hop_trims,
            "credit_requests": self.credit_requests,
            "idle_evictions": self.idle_evictions,
            "discarded_bytes": self.discarded_bytes,
            "clamped_bytes": self.clamped_bytes,
        })
    }
}

impl Summary {
    /// The summary as a JSON object.
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "bytes_placed": self.bytes_placed,
            "completions_ok": self.completions_ok,
            "completions_err": self.completions_err,
            "data_packets": self.data_packets,
            "retransmits": self.retransmits,
            "rtos": self.rtos,
            "queue_drops": self.queue_drops,
            "impaired": self.impaired,
            "peak_queue_bytes": self.peak_queue,
            "trimmed": self.trimmed,
            "flow_completion_ns": self.flow_completion_ns,
            "verified": self.verified,
            "mismatched_bytes": self.mismatched_bytes,
            "finished": self.finished,
            "sim_time_ns": self.sim_time_ns,
            "pdcs_open": self.pdcs_open,
            "sender_pdcs_open": self.sender_pdcs_open,
            "rccc": self.rccc.to_json(),
        })
    }
}

/// The shared byte pattern: byte `i` of sender `s`'s space.
fn pattern(seed: u64, s: usize, len: usize) -> Vec<u8> {
    let mut r = Xoshiro256::seed_from_u64(seed ^ (s as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut v = vec![0u8; len];
    for c in v.chunks_mut(8) {
        let x = r.next_u64().to_le_bytes();
        c.copy_from_slice(&x[..c.len()]);
    }
    v
}

struct Sender {
    ep: Rc<RefCell<Ep>>,
    local: uet_ses::types::LocalRegion,
    region: RegionAddr,
    rng: Xoshiro256,
    submitted: u64,
    in_flight: usize,
    /// Ranges of completed writes (offset, len) — merged at the end.
    done: Vec<(u64, u64)>,
    ops: BTreeMap<u64, (u64, u64)>,
    last_completion: Instant,
}

fn err_name(e: &OpError) -> String {
    match e {
        OpError::Remote(rc) => rc.name().to_owned(),
        OpError::Local(l) => format!("{l:?}"),
        OpError::Transport(t) => format!("{t:?}"),
        _ => format!("{e:?}"),
    }
}

/// The victim's state in [`run_writes`].
struct VictimState {
    ep: Rc<RefCell<Ep>>,
    local: uet_ses::types::LocalRegion,
    region: RegionAddr,
    /// The write in flight and when it was submitted.
    pending: Option<(u64, Instant)>,
}

/// Registers region `ri` with key `0x1000 + index` on `receiver`.
fn target_region(receiver: &RefCell<Ep>, index: usize, len: usize) -> RegionAddr {
    let region = RegionAddr {
        job: JobId::from_masked(1),
        pid: PidOnFep::from_masked(1),
        ri: ResourceIndex::from_masked(index as u16 + 1),
    };
    receiver
        .borrow_mut()
        .register(
            RegionSpec {
                addr: region,
                key: MemoryKey(0x1000 + index as u64),
                access: Access::REMOTE_WRITE,
                base: 0,
            },
            vec![0u8; len],
        )
        .ok();
    region
}

/// The security domain of [`Writes::tss`] scenarios.
const TSS_SDI: uet_wire::pds::tss::Sdi = uet_wire::pds::tss::Sdi::from_masked(0x10);

/// Runs a many-writes scenario.
pub fn run_writes(p: &Writes) -> Summary {
    // Hosts: the senders, then the victim if any, then the receiver.
    let victim_slot = p.senders;
    let recv_addr = crate::topology::host_addr(p.senders + usize::from(p.victim.is_some()));
    let mut cfg = EndpointConfig {
        pds: p.pds.clone(),
        ..EndpointConfig::default()
    };
    if p.tss {
        cfg.pds.max_ses_len -= crate::sealed::Sealed::<Ep>::OVERHEAD;
    }
    let new_ep = |seed: u64| {
        let mut ep = Ep::new(cfg.clone(), seed);
        if p.tss {
            ep.set_job_domain(JobId::from_masked(1), Some(TSS_SDI));
        }
        ep
    };
    let receiver = Rc::new(RefCell::new(new_ep(p.seed)));
    let mut senders = Vec::new();
    for s in 0..p.senders {
        let region = target_region(&receiver, s, p.region);
        let mut ep = new_ep(p.seed + 1 + s as u64);
        let local = ep.register_local(pattern(p.seed, s, p.region));
        senders.push(Sender {
            ep: Rc::new(RefCell::new(ep)),
            local,
            region,
            rng: Xoshiro256::seed_from_u64(p.seed * 31 + s as u64),
            submitted: 0,
            in_flight: 0,
            done: Vec::new(),
            ops: BTreeMap::new(),
            last_completion: Instant::ZERO,
        });
    }
    let mut victim = p.victim.map(|v| {
        let len = v.size.max(1) as usize;
        let region = target_region(&receiver, victim_slot, len);
        let mut ep = new_ep(p.seed + 1 + victim_slot as u64);
        let local = ep.register_local(pattern(p.seed, victim_slot, len));
        VictimState {
            ep: Rc::new(RefCell::new(ep)),
            local,
            region,
            pending: None,
        }
    });
    let mut link = p.link.clone();
    link.impair = p.impair.clone();
    link.trim = p.trim;
    let mut fabric = Fabric::new(UetFrameOps::default(), p.seed);
    fabric.random_ties = p.random_ties;
    fabric.late_drops_after = p.late_drops_after.map(|d| Instant::ZERO + d);
    let enc = EncapConfig::default();
    let host = |ep: Rc<RefCell<Ep>>, addr| -> Box<dyn crate::fabric::Host> {
        if p.tss {
            let sealed = crate::sealed::Sealed::new(ep, addr, enc.udp_port, TSS_SDI, [0x5e; 32]);
            Box::new(SimHost::new(sealed, addr, enc))
        } else {
            Box::new(SimHost::new(ep, addr, enc))
        }
    };
    let mut hosts: Vec<Box<dyn crate::fabric::Host>> = senders
        .iter()
        .enumerate()
        .map(|(i, s)| host(s.ep.clone(), crate::topology::host_addr(i)))
        .collect();
    if let Some(v) = &victim {
        hosts.push(host(v.ep.clone(), crate::topology::host_addr(victim_slot)));
    }
    hosts.push(host(receiver.clone(), recv_addr));
    let built = single_switch(&mut fabric, hosts, &link);
    let victim_node = victim.as_ref().map(|_| built.hosts[victim_slot].0);
    if let Some(pauses) = p.pauses {
        for (id, _) in &built.hosts {
            fabric.pause_host(*id, pauses);
        }
    }
    // Node → sender index (the receiver is the last host).
    let sender_of: BTreeMap<usize, usize> = built
        .hosts
        .iter()
        .take(senders.len())
        .enumerate()
        .map(|(i, (id, _))| (id.0, i))
        .collect();

    let start_at = |i: usize| Instant::ZERO + p.start_at.get(i).copied().unwrap_or_default();
    let bottleneck = built.downlinks.last().copied();
    let mut granted = vec![0u64; senders.len()];
    // Queue samples at most every 1/64 of the idle round trip.
    let sample_every = (base_rtt(&p.link, &p.pds) / 64).max(Duration::from_nanos(1));
    let mut last_sample: Option<(Instant, u64)> = None;
    for i in 0..senders.len() {
        if start_at(i) > Instant::ZERO {
            fabric.wake_at(start_at(i), built.hosts[i].0);
        }
    }
    let mut summary = Summary::default();
    let deadline = Instant::ZERO + p.deadline;
    // Only senders the fabric touched since the last step can have new
    // completions (or room for more work): the first step looks at all.
    let mut first = true;
    let mut victim_due = true;
    let mut victim_granted = 0u64;
    let mut busy = senders.len();
    let mut idle = vec![false; senders.len()];
    let finished = fabric.run_while(deadline, |f| {
        let now = f.now();
        if p.trace
            && let Some(port) = bottleneck
        {
            let q = f.queue_bytes(port);
            let due = last_sample.is_none_or(|(t, v)| v != q && now >= t + sample_every);
            if due {
                last_sample = Some((now, q));
                summary.trace.push(TraceRow {
                    t_ns: now.as_nanos(),
                    sender: None,
                    series: "queue",
                    value: q as f64,
                    note: String::new(),
                });
            }
        }
        let list: Vec<usize> = if first {
            first = false;
            (0..senders.len()).collect()
        } else {
            let touched = f.take_touched();
            if victim_node.is_some_and(|v| touched.contains(&v)) {
                victim_due = true;
            }
            touched
                .iter()
                .filter_map(|id| sender_of.get(&id.0).copied())
                .collect()
        };
        for i in list {
            let s = &mut senders[i];
            let ep_rc = s.ep.clone();
            let mut ep = ep_rc.borrow_mut();
            if p.trace {
                let g = &mut granted[i];
                let t = &mut summary.trace;
                ep.drain_cc_traces(|_, _, e| t.extend(TraceRow::from_cc(i, e, g)));
            }
            while let Some(c) = ep.poll_completion() {
                complete(s, &c, &mut summary, now);
            }
            let mut submitted = false;
            while now >= start_at(i)
                && s.in_flight < p.in_flight
                && s.submitted < p.bytes_per_sender
            {
                let left = p.bytes_per_sender - s.submitted;
                let span = u64::from(p.msg_size.1 - p.msg_size.0) + 1;
                let len = (u64::from(p.msg_size.0) + s.rng.below(span))
                    .min(left)
                    .min(p.region as u64);
                let off = s.rng.below(p.region as u64 - len + 1);
                let op = Operation::Write {
                    dst: RemoteAddr {
                        region: s.region,
                        generation: uet_wire::RiGeneration::from_masked(0),
                        key: MemoryKey(0x1000 + i as u64),
                        offset: off,
                    },
                    src: LocalBuf {
                        region: s.local,
                        offset: off,
                    },
                    len: len as u32,
                    header_data: None,
                };
                let mode = p.mode;
                match ep.submit_with(now, recv_addr, op, mode, TrafficClass::from_masked(0)) {
                    Ok(id) => {
                        s.ops.insert(id.0, (off, len));
                        s.in_flight += 1;
                        s.submitted += len;
                        submitted = true;
                    }
                    Err(_) => break,
                }
            }
            if submitted {
                f.touch(built.hosts[i].0);
            }
            if !idle[i] && s.in_flight == 0 && s.submitted >= p.bytes_per_sender {
                idle[i] = true;
                busy -= 1;
            }
        }
        let mut victim_done = true;
        if let (Some(v), Some(spec), Some(node)) = (&mut victim, p.victim, victim_node) {
            if victim_due {
                victim_due = false;
                let mut ep = v.ep.borrow_mut();
                if p.trace {
                    let t = &mut summary.trace;
                    ep.drain_cc_traces(|_, _, e| {
                        t.extend(TraceRow::from_cc(victim_slot, e, &mut victim_granted));
                    });
                }
                while let Some(c) = ep.poll_completion() {
                    if let Some((id, at)) = v.pending
                        && id == c.op.0
                    {
                        v.pending = None;
                        match &c.status {
                            Ok(()) => summary
                                .victim_latency_ns
                                .push(now.as_nanos() - at.as_nanos()),
                            Err(e) => *summary.completions_err.entry(err_name(e)).or_default() += 1,
                        }
                    }
                }
                let pings = summary.victim_latency_ns.len() as u64;
                if v.pending.is_none() && (busy > 0 || pings < spec.min_pings) {
                    let op = Operation::Write {
                        dst: RemoteAddr {
                            region: v.region,
                            generation: uet_wire::RiGeneration::from_masked(0),
                            key: MemoryKey(0x1000 + victim_slot as u64),
                            offset: 0,
                        },
                        src: LocalBuf {
                            region: v.local,
                            offset: 0,
                        },
                        len: spec.size.max(1),
                        header_data: None,
                    };
                    let tc = TrafficClass::from_masked(0);
                    if let Ok(id) = ep.submit_with(now, recv_addr, op, p.mode, tc) {
                        v.pending = Some((id.0, now));
                        f.touch(node);
                    }
                }
            }
            victim_done = summary.victim_latency_ns.len() as u64 >= spec.min_pings;
        }
        busy == 0 && victim_done
    });
    summary.trace.sort_by_key(|r| r.t_ns);
    // Verify every byte a completed write covered.
    let recv = receiver.borrow();
    let mut mismatched = 0u64;
    for (s, snd) in senders.iter().enumerate() {
        let Some(entry) = recv.memory().get(snd.region) else {
            mismatched += 1;
            continue;
        };
        let dst = entry.memory();
        let src = pattern(p.seed, s, p.region);
        let mut ranges = snd.done.clone();
        ranges.sort_unstable();
        let mut covered_to = 0u64;
        for (off, len) in ranges {
            let start = off.max(covered_to);
            let end = off + len;
            if end > start {
                let (a, b) = (start as usize, end as usize);
                mismatched += dst[a..b]
                    .iter()
                    .zip(&src[a..b])
                    .filter(|(x, y)| x != y)
                    .count() as u64;
                covered_to = end;
            }
        }
        summary
            .flow_completion_ns
            .push(snd.last_completion.as_nanos());
    }
    let mut eps: Vec<std::cell::Ref<'_, Ep>> = senders.iter().map(|s| s.ep.borrow()).collect();
    if let Some(v) = &victim {
        let ep = v.ep.borrow();
        summary.data_packets += ep.pds().counters().tx_data;
        eps.push(ep);
    }
    eps.push(recv);
    for e in &eps {
        let c = e.pds().counters();
        summary.retransmits += c.tx_retransmits;
        summary.rtos += c.rto_fired;
        summary.tail_probes += c.tail_probes;
        summary.pdcs_open += e.pds().pdc_count();
    }
    for s in &senders {
        let ep = s.ep.borrow();
        summary.data_packets += ep.pds().counters().tx_data;
        summary.sender_pdcs_open += ep.pds().pdc_count();
        if let Some(st) = ep
            .pds()
            .ccc(recv_addr, TrafficClass::from_masked(0))
            .and_then(|c| c.rccc())
            .map(|r| *r.stats())
        {
            summary.rccc.discarded_bytes += st.discarded_bytes;
            summary.rccc.clamped_bytes += st.clamped_bytes;
        }
    }
    if let Some(st) = eps
        .last()
        .and_then(|e| e.pds().rccc_receiver())
        .map(|r| *r.stats())
    {
        summary.rccc.grants = st.grants;
        summary.rccc.granted_bytes = st.granted_bytes;
        summary.rccc.speculative_bytes = st.speculative_bytes;
        summary.rccc.last_hop_trims = st.last_hop_trims;
        summary.rccc.credit_requests = st.credit_requests;
        summary.rccc.idle_evictions = st.idle_evictions;
    }
    let st = fabric.total_stats();
    summary.queue_drops = st.drops;
    summary.late_queue_drops = st.late_drops;
    summary.late_queue_data_drops = st.late_data_drops;
    summary.impaired = st.impaired;
    summary.peak_queue = st.peak_queue;
    summary.trimmed = st.trimmed;
    summary.mismatched_bytes = mismatched;
    summary.verified = mismatched == 0;
    summary.finished = finished;
    summary.sim_time_ns = fabric.now().as_nanos();
    summary
}

fn complete(s: &mut Sender, c: &OpCompletion, summary: &mut Summary, now: Instant) {
    s.in_flight = s.in_flight.saturating_sub(1);
    s.last_completion = now;
    let Some((off, len)) = s.ops.remove(&c.op.0) else {
        return;
    };
    match &c.status {
        Ok(()) => {
            summary.completions_ok += 1;
            summary.bytes_placed += len;
            s.done.push((off, len));
        }
        Err(e) => *summary.completions_err.entry(err_name(e)).or_default() += 1,
    }
}

/// A host address for logs.
#[must_use]
pub fn addr(i: usize) -> IpAddr {
    crate::topology::host_addr(i)
}

/// The `docs/congestion-evaluation.md` metrics of a synchronized incast (every sender writes
/// `size` bytes at time 0 into one receiver through one switch).
#[derive(Debug, Clone, PartialEq)]
pub struct IncastReport {
    /// Senders.
    pub senders: usize,
    /// Bytes per sender.
    pub size: u64,
    /// Bottleneck rate, bits/s.
    pub rate_bps: u64,
    /// Idle round trip T0, ns.
    pub t0_ns: u64,
    /// ICT / (ΣW/R + T0).
    pub ict_over_ideal: f64,
    /// Incast completion time, ns.
    pub ict_ns: u64,
    /// Ideal ICT, ns.
    pub ideal_ns: u64,
    /// max FCT / min FCT.
    pub spread: f64,
    /// Jain index of per-flow goodput.
    pub jain: f64,
    /// Packets dropped by switch queues.
    pub drops: u64,
    /// Packets dropped after the first round trip: later than two idle
    /// round trips (2 · T0) after the last sender's start, when every
    /// speculative first window has arrived.
    pub drops_after_first_rtt: u64,
    /// Of those, data packets. The rest are header-only control packets
    /// (tail probes, credit requests) of senders that had heard nothing
    /// yet, sent into the first windows' queue before it drained.
    pub data_drops_after_first_rtt: u64,
    /// Retransmissions per data packet sent.
    pub retransmits_per_packet: f64,
    /// Retransmission timeouts.
    pub rtos: u64,
    /// Peak switch queue, bytes.
    pub peak_queue_bytes: u64,
    /// ΣW / (R · ICT).
    pub utilisation: f64,
    /// Whether every byte verified and every operation succeeded.
    pub ok: bool,
    /// Flow completion times: minimum, median and maximum, ns.
    pub fct_ns: [u64; 3],
    /// RCCC counters (zero without RCCC).
    pub rccc: RcccCounters,
    /// The trace, when [`IncastOptions::trace`] asked for it (not in the
    /// JSON).
    pub trace: Vec<TraceRow>,
    /// The victim ping-pong, when [`IncastOptions::victim`] asked for one.
    pub victim: Option<VictimReport>,
}

/// A victim ping-pong's latency during the incast against the same
/// ping-pong alone (`docs/congestion-evaluation.md` metric 9).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VictimReport {
    /// Bytes per write.
    pub size: u32,
    /// Writes completed during the incast.
    pub pings: usize,
    /// Latency during the incast: mean, p50, p99, max, ns.
    pub incast_ns: [f64; 4],
    /// Latency alone (no incast senders, same fabric): mean, p50, p99,
    /// max, ns.
    pub alone_ns: [f64; 4],
    /// CIF of the mean: mean during the incast ÷ mean alone.
    pub cif_mean: f64,
    /// CIF of the p99: p99 during the incast ÷ p99 alone.
    pub cif_p99: f64,
}

impl VictimReport {
    /// Pings the victim completes alone to measure its uncongested latency.
    pub const ALONE_PINGS: u64 = 64;

    /// Mean, p50, p99 and max of `lat` (nearest rank), ns; zeros if empty.
    #[must_use]
    pub fn stats(lat: &[u64]) -> [f64; 4] {
        if lat.is_empty() {
            return [0.0; 4];
        }
        let mut v = lat.to_vec();
        v.sort_unstable();
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1] as f64;
        let mean = v.iter().map(|x| *x as f64).sum::<f64>() / v.len() as f64;
        [mean, rank(0.50), rank(0.99), v[v.len() - 1] as f64]
    }

    /// As JSON.
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "size": self.size,
            "pings": self.pings,
            "incast_mean_p50_p99_max_ns": self.incast_ns,
            "alone_mean_p50_p99_max_ns": self.alone_ns,
            "cif_mean": self.cif_mean,
            "cif_p99": self.cif_p99,
        })
    }
}

impl IncastReport {
    /// As JSON.
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "senders": self.senders,
            "size": self.size,
            "rate_bps": self.rate_bps,
            "t0_ns": self.t0_ns,
            "ict_over_ideal": self.ict_over_ideal,
            "ict_ns": self.ict_ns,
            "ideal_ns": self.ideal_ns,
            "spread": self.spread,
            "jain": self.jain,
            "drops": self.drops,
            "drops_after_first_rtt": self.drops_after_first_rtt,
            "data_drops_after_first_rtt": self.data_drops_after_first_rtt,
            "retransmits_per_packet": self.retransmits_per_packet,
            "rtos": self.rtos,
            "peak_queue_bytes": self.peak_queue_bytes,
            "utilisation": self.utilisation,
            "ok": self.ok,
            "fct_min_p50_max_ns": self.fct_ns,
            "rccc": self.rccc.to_json(),
            "victim": self.victim.map(|v| v.to_json()),
        })
    }
}

/// Frame bytes of a packet carrying `payload` bytes of a write: Ethernet
/// 14 + IPv4 20 + UDP 8 + PDS request 12 + SES standard header 44.
pub const WRITE_OVERHEAD: u64 = 14 + 20 + 8 + 12 + 44;

/// Congestion-control modes of `docs/congestion-evaluation.md` (the daemon's and the
/// simulator's are the same type).
pub use uet_pds::CcMode;

/// Configures `pds` for `cc` on a path of `rate_bps` and idle round trip
/// `base_rtt` ([`CcMode::configure`], trimming as `link` says), and marks
/// ECN on `link` between 0.2 and 0.8 BDP (§6, spec-recommended) for the
/// NSCC modes.
pub fn configure_cc(
    cc: CcMode,
    pds: &mut PdsConfig,
    link: &mut LinkParams,
    rate_bps: u64,
    base_rtt: Duration,
) {
    cc.configure(pds, rate_bps, base_rtt, link.trim.is_some());
    if cc.uses_ecn() {
        let bdp = (rate_bps as f64 / 8.0 * base_rtt.as_secs_f64()) as u64;
        link.ecn = crate::fabric::EcnMarking::Linear {
            kmin: bdp / 5,
            kmax: bdp * 4 / 5,
        };
    }
}

/// The idle round trip of a data frame and its ACK over two hops each way.
#[must_use]
pub fn base_rtt(link: &LinkParams, pds: &PdsConfig) -> Duration {
    let payload = (pds.max_ses_len as u64).saturating_sub(44).max(1);
    let ser = |bytes: u64| bytes as f64 * 8.0 / link.rate_bps as f64 * 1e9;
    let t0 =
        2.0 * ser(payload + WRITE_OVERHEAD) + 2.0 * ser(74) + 4.0 * link.latency.as_nanos() as f64;
    Duration::from_nanos(t0 as u64)
}

/// The PDS configuration `uet-sim incast` uses on `link` (and the CI
/// incasts): RTO_INIT_TIME the idle round trip plus six full buffer drains,
/// at least 200 µs; 12 RTO retries; and retransmissions marked
/// DSCP_TRIMMABLE_RTX, which trimming switches cut only above 1.5 × their
/// threshold (§6).
///
/// Six drains is UEC's simulator's rule (`docs/protocol-notes.md` §8: 15 µs
/// plus six queue drains), which `uet lab incast` follows as well. A full
/// queue must not look like loss, and neither may the time it takes to
/// learn of a loss behind one: a lost packet's evidence (a later packet's
/// ACK, or a tail probe's answer) queues behind the same full buffer, and
/// the packet that brings it may leave only once the window reopens, a
/// drain later. Twice the round trip plus one drain (622 µs at 1 Gb/s with
/// a 32 KiB buffer, which alone takes 262 µs to drain) fired 96–113 RTOs
/// at 1 Gb/s 32:1 drop-tail NSCC on packets whose probe was on its way;
/// 1,622 µs fires none (`BENCHMARKS.md`, "Design choices and the
/// measurements behind them").
#[must_use]
pub fn incast_pds_config(link: &LinkParams, max_ses_len: usize) -> PdsConfig {
    let pds = PdsConfig {
        max_ses_len,
        ..PdsConfig::default()
    };
    let drain_ns = link.buffer.saturating_mul(8_000_000_000) / link.rate_bps.max(1);
    let rto = base_rtt(link, &pds) + Duration::from_nanos(drain_ns) * 6;
    PdsConfig {
        rto_init: rto.max(Duration::from_micros(200)),
        max_rto_retx: 12,
        dscp_data_rtx: Some(crate::frame_ops::DSCP_TRIMMABLE_RTX),
        ..pds
    }
}

/// Runs a synchronized incast with congestion control `cc` and computes its
/// `docs/congestion-evaluation.md` metrics.
pub fn run_incast_cc(
    senders: usize,
    size: u64,
    cc: CcMode,
    link: &LinkParams,
    pds: &PdsConfig,
    seed: u64,
) -> IncastReport {
    run_incast_cc_with(senders, size, cc, link, pds, seed, IncastOptions::default())
}

/// How an incast's senders start, how its switches break ties, and
/// whether it is traced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IncastOptions {
    /// Same-instant events in seeded random order
    /// ([`Fabric::random_ties`]): switches arbitrate between simultaneous
    /// arrivals instead of always queueing them in node order.
    pub random_ties: bool,
    /// Each sender starts at its own seeded uniform time in [0, T0]
    /// (`docs/congestion-evaluation.md`'s jittered start) instead of all at time zero. The
    /// ICT still counts from time zero, the common start; the ideal and
    /// each flow's completion time count from the starts.
    pub jitter_t0: bool,
    /// Record the trace ([`Writes::trace`]) into [`IncastReport::trace`].
    pub trace: bool,
    /// Add a victim ping-pong of this many bytes per write
    /// ([`Writes::victim`]) and report its CIF ([`IncastReport::victim`]).
    pub victim: Option<u32>,
    /// Replace RCCC's speculative first window (sources and receiver)
    /// with this many bytes instead of the mode's (one BDP), to measure
    /// what the first window costs and buys.
    pub rccc_initial_window: Option<u64>,
}

/// [`run_incast_cc`] with `opts`.
pub fn run_incast_cc_with(
    senders: usize,
    size: u64,
    cc: CcMode,
    link: &LinkParams,
    pds: &PdsConfig,
    seed: u64,
    opts: IncastOptions,
) -> IncastReport {
    let mut link = link.clone();
    let mut pds = pds.clone();
    let rtt = base_rtt(&link, &pds);
    let rate = link.rate_bps;
    configure_cc(cc, &mut pds, &mut link, rate, rtt);
    if let Some(w) = opts.rccc_initial_window {
        if let uet_cms::Algorithm::Rccc(r) | uet_cms::Algorithm::NsccRccc(_, r) =
            &mut pds.ccc.algorithm
        {
            r.initial_window = w;
        }
        if let Some(r) = &mut pds.rccc_receiver {
            r.initial_window = w;
        }
    }
    run_incast_with(senders, size, &link, &pds, seed, opts)
}

/// Runs a synchronized incast and computes its `docs/congestion-evaluation.md` metrics.
pub fn run_incast(
    senders: usize,
    size: u64,
    link: &LinkParams,
    pds: &PdsConfig,
    seed: u64,
) -> IncastReport {
    run_incast_with(senders, size, link, pds, seed, IncastOptions::default())
}

/// Each sender's start: uniform in [0, T0] from a generator of its own (so
/// the unjittered runs draw exactly what they drew before).
fn jittered_starts(senders: usize, t0: Duration, seed: u64) -> Vec<Duration> {
    let mut rng = Xoshiro256::seed_from_u64(seed ^ 0x6a69_7474_6572_0000);
    let t0_ns = t0.as_nanos() as u64;
    (0..senders)
        .map(|_| Duration::from_nanos(rng.below(t0_ns + 1)))
        .collect()
}

fn run_incast_with(
    senders: usize,
    size: u64,
    link: &LinkParams,
    pds: &PdsConfig,
    seed: u64,
    opts: IncastOptions,
) -> IncastReport {
    let payload = (pds.max_ses_len as u64).saturating_sub(44).max(1);
    let w = Writes {
        senders,
        bytes_per_sender: size,
        msg_size: (
            size.min(u64::from(u32::MAX)) as u32,
            size.min(u64::from(u32::MAX)) as u32,
        ),
        region: (size as usize).max(4096),
        in_flight: 1,
        link: link.clone(),
        impair: link.impair.clone(),
        trim: link.trim,
        pds: pds.clone(),
        seed,
        random_ties: opts.random_ties,
        trace: opts.trace,
        victim: opts.victim.map(|size| Victim { size, min_pings: 0 }),
        start_at: if opts.jitter_t0 {
            jittered_starts(senders, base_rtt(link, pds), seed)
        } else {
            Vec::new()
        },
        ..Writes::default()
    };
    let last_start = w.start_at.iter().copied().max().unwrap_or_default();
    let w = Writes {
        late_drops_after: Some(last_start + base_rtt(link, pds) * 2),
        ..w
    };
    let s = run_writes(&w);
    let victim = opts.victim.map(|size| {
        // The same ping-pong on the same fabric with no incast senders.
        let alone = run_writes(&Writes {
            senders: 0,
            trace: false,
            start_at: Vec::new(),
            victim: Some(Victim {
                size,
                min_pings: VictimReport::ALONE_PINGS,
            }),
            ..w.clone()
        });
        let incast_ns = VictimReport::stats(&s.victim_latency_ns);
        let alone_ns = VictimReport::stats(&alone.victim_latency_ns);
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        VictimReport {
            size,
            pings: s.victim_latency_ns.len(),
            incast_ns,
            alone_ns,
            cif_mean: ratio(incast_ns[0], alone_ns[0]),
            cif_p99: ratio(incast_ns[2], alone_ns[2]),
        }
    });
    let rate = link.rate_bps as f64;
    let pkts = size.div_ceil(payload);
    let wire_per_flow = pkts * (payload + WRITE_OVERHEAD) - (pkts * payload - size);
    let total_wire = wire_per_flow * senders as u64;
    // T0: a full data frame over two hops plus an ACK_CC frame (14+20+8+32)
    // back over two hops, plus four propagation delays.
    let ser = |bytes: u64| bytes as f64 * 8.0 / rate * 1e9;
    let t0 =
        2.0 * ser(payload + WRITE_OVERHEAD) + 2.0 * ser(74) + 4.0 * link.latency.as_nanos() as f64;
    // With staggered starts no schedule can beat either the bytes of all
    // flows from the first start, or the last flow's own bytes from its
    // start; each is the plain ΣW/R + T0 when all start at zero.
    let starts: Vec<f64> = (0..senders)
        .map(|i| w.start_at.get(i).map_or(0.0, |d| d.as_nanos() as f64))
        .collect();
    let first_start = starts.iter().copied().fold(f64::INFINITY, f64::min);
    let flow_ns = wire_per_flow as f64 * 8.0 / rate * 1e9;
    let last_alone = starts.iter().fold(0.0_f64, |m, st| m.max(st + flow_ns));
    let ideal = (first_start + total_wire as f64 * 8.0 / rate * 1e9).max(last_alone) + t0;
    let ict = s.flow_completion_ns.iter().copied().max().unwrap_or(0) as f64;
    // Each flow's completion time counts from its own start.
    let fcts: Vec<f64> = s
        .flow_completion_ns
        .iter()
        .zip(&starts)
        .map(|(x, st)| *x as f64 - st)
        .collect();
    let min = fcts.iter().copied().fold(f64::INFINITY, f64::min);
    let max = fcts.iter().copied().fold(0.0, f64::max);
    let goodput: Vec<f64> = fcts.iter().map(|f| size as f64 / f.max(1.0)).collect();
    let mut sorted: Vec<u64> = fcts.iter().map(|f| *f as u64).collect();
    sorted.sort_unstable();
    let fct_ns = [
        sorted.first().copied().unwrap_or(0),
        sorted.get(sorted.len() / 2).copied().unwrap_or(0),
        sorted.last().copied().unwrap_or(0),
    ];
    let sum: f64 = goodput.iter().sum();
    let sq: f64 = goodput.iter().map(|x| x * x).sum();
    let jain = if sq > 0.0 {
        sum * sum / (goodput.len() as f64 * sq)
    } else {
        0.0
    };
    IncastReport {
        senders,
        size,
        rate_bps: link.rate_bps,
        t0_ns: t0 as u64,
        ict_over_ideal: ict / ideal,
        ict_ns: ict as u64,
        ideal_ns: ideal as u64,
        spread: if min > 0.0 { max / min } else { f64::INFINITY },
        jain,
        drops: s.queue_drops,
        drops_after_first_rtt: s.late_queue_drops,
        data_drops_after_first_rtt: s.late_queue_data_drops,
        retransmits_per_packet: s.retransmits as f64 / s.data_packets.max(1) as f64,
        rtos: s.rtos,
        peak_queue_bytes: s.peak_queue,
        utilisation: if ict > 0.0 {
            total_wire as f64 * 8.0 / rate / (ict / 1e9)
        } else {
            0.0
        },
        ok: s.finished && s.verified && s.completions_err.is_empty(),
        fct_ns,
        rccc: s.rccc,
        trace: s.trace,
        victim,
    }
}

/// The leaf–spine hash-collision case (CMS issue): `flows` flows from leaf 0
/// to leaf 1 over `spines` spines, every link at `rate_bps`. With spraying
/// each flow spreads over every spine; with one fixed EV per flow whose
/// hashes collide they share one spine. Returns each flow's goodput as a
/// fraction of its link rate.
pub fn run_collision(
    flows: usize,
    spines: usize,
    size: u64,
    ev: uet_cms::EvConfig,
    rate_bps: u64,
    seed: u64,
) -> Vec<f64> {
    use crate::topology::leaf_spine;
    // Switches mark ECN between 0.2 and 0.8 BDP (§6): REPS and the bitmap
    // steer by those marks; without them every path looks good.
    let mut link = LinkParams::new(rate_bps, Duration::from_micros(1), 4 << 20);
    let bdp = rate_bps / 8 * 10 / 1_000_000; // ~10 µs round trip
    link.ecn = crate::fabric::EcnMarking::Linear {
        kmin: bdp / 5,
        kmax: bdp * 4 / 5,
    };
    let mut cfg = EndpointConfig::default();
    cfg.pds.ccc.ev = ev;
    cfg.pds.rto_init = Duration::from_micros(200);
    let eps: Vec<Rc<RefCell<Ep>>> = (0..2 * flows)
        .map(|i| Rc::new(RefCell::new(Ep::new(cfg.clone(), seed + i as u64))))
        .collect();
    let region = RegionAddr {
        job: JobId::from_masked(1),
        pid: PidOnFep::from_masked(1),
        ri: ResourceIndex::from_masked(1),
    };
    let mut locals = Vec::new();
    for f in 0..flows {
        eps[flows + f]
            .borrow_mut()
            .register(
                RegionSpec {
                    addr: region,
                    key: MemoryKey(7),
                    access: Access::REMOTE_WRITE,
                    base: 0,
                },
                vec![0u8; size as usize],
            )
            .ok();
        locals.push(
            eps[f]
                .borrow_mut()
                .register_local(pattern(seed, f, size as usize)),
        );
    }
    let mut fabric = Fabric::new(UetFrameOps::default(), seed);
    let enc = EncapConfig::default();
    let hosts: Vec<Box<dyn crate::fabric::Host>> = eps
        .iter()
        .enumerate()
        .map(|(i, e)| {
            Box::new(SimHost::new(e.clone(), crate::topology::host_addr(i), enc))
                as Box<dyn crate::fabric::Host>
        })
        .collect();
    leaf_spine(&mut fabric, hosts, 2, spines, &link, &link);
    for f in 0..flows {
        let op = Operation::Write {
            dst: RemoteAddr {
                region,
                generation: uet_wire::RiGeneration::from_masked(0),
                key: MemoryKey(7),
                offset: 0,
            },
            src: LocalBuf {
                region: locals[f],
                offset: 0,
            },
            len: size as u32,
            header_data: None,
        };
        eps[f]
            .borrow_mut()
            .submit(Instant::ZERO, crate::topology::host_addr(flows + f), op)
            .ok();
    }
    let mut done: Vec<Option<Instant>> = vec![None; flows];
    fabric.run_while(Instant::ZERO + Duration::from_secs(10), |f| {
        for (i, d) in done.iter_mut().enumerate() {
            while let Some(c) = eps[i].borrow_mut().poll_completion() {
                if c.status.is_ok() {
                    *d = Some(f.now());
                }
            }
        }
        done.iter().all(Option::is_some)
    });
    done.iter()
        .map(|d| {
            d.map_or(0.0, |t| {
                size as f64 * 8.0 / (t.as_nanos() as f64 / 1e9) / rate_bps as f64
            })
        })
        .collect()
}
