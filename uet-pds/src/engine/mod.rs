//! The PDS engine: every PDC of one endpoint, sans-IO.
//!
//! Read `docs/protocol-notes.md` §2 (formats), §2.12 (PDC lifecycle) and §3
//! (reliability) before editing; comments cite them.
//!
//! Shape (quinn-proto's `Connection`, `docs/architecture.md` §3): inputs are
//! [`Pds::handle_datagram`], [`Pds::handle_timeout`] and [`Pds::enqueue`];
//! outputs are [`Pds::poll_transmit`], [`Pds::poll_timeout`] and
//! [`Pds::poll_event`]. The layer above (SES) is reached through [`SesHooks`]:
//! the engine asks it to write a request's SES header and payload at the
//! moment the packet leaves — first transmission or retransmission — so
//! payload is read from registered memory, never copied into the engine.
//!
//! A PDC is bidirectional: the initiator's requests use its PSN space and
//! the target's ACKs answer them; the target can send return-direction
//! requests (read response data) in its own PSN space on the same PDC
//! (§3 "Read responses"). Each PDC therefore has a send half (ledger, queue)
//! and a receive half (PSN window, ACK state).
//!
//! Where things are: this file holds the public types and API, the [`Pds`]
//! struct and the calls that only queue work; `pdc.rs` the state of one
//! PDC; `receive.rs` every arriving packet (`handle_datagram`, `on_request`,
//! `on_ack`, `on_nack`, `on_cp`, RUDI, the PDC lookup); `transmit.rs` what
//! leaves and in what order (`poll_transmit`, `write_data`, `write_ack`,
//! control packets); `timers.rs` `poll_timeout` / `handle_timeout` (RTO,
//! tail probes, delayed ACKs, holds, idle PDCs, the deadline heap);
//! `congestion.rs` the glue to the CCCs and RCCC (credit requests, grants,
//! the accounting invariant `CcShare`);
//! `lifecycle.rs` opening, confirming, closing, failing, removing and
//! reopening PDCs.

use crate::deadline_heap::DeadlineHeap;
#[cfg(test)]
use core::cell::Cell;
use core::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};

use rustc_hash::FxHashMap as HashMap;
use std::net::IpAddr;

use uet_cms::{Ccc, RcccReceiver};
use uet_wire::encap::Trim;
use uet_wire::pds::tss::Sdi;
use uet_wire::pds::{NackCode, NextHeader, ReliableMode};
use uet_wire::rand::{Rng, Xoshiro256};
use uet_wire::ses::{SesRepr, SesResponseRepr, StandardView};
use uet_wire::time::{Duration, Instant};
use uet_wire::{DeliveryMode, Dscp, Ecn, EntropyValue, JobId, PdcId, Psn, TrafficClass};

use crate::ccc_table::CccTable;
use crate::config::PdsConfig;
use crate::counters::Counters;
use crate::pdc_table::PdcTable;

mod congestion;
mod lifecycle;
mod pdc;
mod receive;
mod timers;
mod transmit;

pub use crate::pkt_ref::PktRef;
use congestion::CccMembers;
use pdc::Pdc;
use transmit::ControlPacket;

/// One PDC's round-trip estimate ([`Pds::round_trips`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PdcRoundTrip {
    /// The peer FEP.
    pub peer: IpAddr,
    /// Smoothed round trip.
    pub srtt: Duration,
    /// Round-trip variation.
    pub rttvar: Duration,
    /// The RTO a packet sent now would get.
    pub rto: Duration,
}

/// Entropy of control packets that answer no particular data packet
/// (REFPROV default 0x4242, §8).
const CONTROL_EV: EntropyValue = EntropyValue::from_masked(0x4242);

/// Times an initiator's PDC may be reopened after its peer refused it as
/// unknown, before it is given up: a restarted peer needs one; a peer that
/// refuses a fresh PDC again is not one we can reach.
const MAX_REOPENS: u32 = 3;

/// What an arriving request carries, as handed to [`SesHooks::on_request`].
#[derive(Debug, Clone, Copy)]
pub struct RxRequest<'a> {
    /// The local PDC (`None` for UUD).
    pub pdc: Option<PdcId>,
    /// The sender.
    pub peer: IpAddr,
    /// The PSN (for UUD: zero).
    pub psn: Psn,
    /// Delivery mode.
    pub mode: DeliveryMode,
    /// The SES header.
    pub ses: Option<RxSes<'a>>,
    /// The payload after the SES header.
    pub payload: &'a [u8],
}

/// The SES header of an arriving request, in the form the receive path
/// parsed it in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxSes<'a> {
    /// Decoded by the general parser.
    Parsed(&'a SesRepr),
    /// The common data packet's standard request without extension,
    /// validated and left in the packet
    /// ([`uet_wire::parse_request_view`]). [`StandardView::request`] is
    /// what the general parser gives for it.
    Standard(StandardView<'a>),
}

impl RxSes<'_> {
    /// The header as the general parser gives it.
    #[must_use]
    pub fn repr(&self) -> SesRepr {
        match self {
            Self::Parsed(r) => **r,
            Self::Standard(v) => SesRepr::Standard(v.request()),
        }
    }
}

/// What the layer above answers for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Nothing beyond the acknowledgement.
    None,
    /// An SES response to carry in the ACK of this packet. A `guaranteed`
    /// response is stored until the initiator's CLEAR_PSN covers it and
    /// re-sent for duplicates (§3 "CACK / CLEAR / guaranteed delivery").
    Response {
        /// The response header.
        response: SesResponseRepr,
        /// Guaranteed delivery.
        guaranteed: bool,
    },
    /// The layer above cannot take the packet now (e.g. no message-tracking
    /// state): NACK it with this code and leave its PSN unreceived, so the
    /// initiator sends it again (`NO_SES_MSG_AVAIL` is a retransmit code).
    Reject(NackCode),
}

/// Why the engine gave up on a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PdsError {
    /// The retransmission budget ran out (`Max_RTO_Retx_Cnt`).
    Timeout,
    /// The NACK budget ran out, or a NACK closed the PDC.
    Nack(NackCode),
    /// The PDC closed before the packet was acknowledged.
    Closed,
}

/// What the PDS calls in the layer above it (the SES endpoint), in the
/// middle of handling a packet, a timer or a transmit poll.
///
/// Why calls and not queued events (quinn-proto's `poll_event` style,
/// which [`PdsEvent`] already follows for PDC lifecycle): each of these is
/// either a question whose answer the engine needs before it goes on, or
/// carries data borrowed from a buffer that is gone once the call returns.
/// * [`SesHooks::write_request`] writes the payload into the transmit
///   buffer at the moment the packet leaves (first send or resend), so
///   payload is read from registered memory, never copied into the engine.
/// * [`SesHooks::on_request`] answers with a [`Reply`] that decides
///   whether the PSN is recorded, whether a NACK goes back, and what the
///   ACK carries.
/// * [`SesHooks::on_response`] borrows the response data from the received
///   datagram; as an event it would need a copy per packet.
/// * [`SesHooks::on_acked`] / [`SesHooks::on_acked_all`] /
///   [`SesHooks::on_failed`] could be events, but there is one per packet:
///   queueing them adds a queue write and read per packet and moves the
///   SES bookkeeping away from the code that caused it.
///
/// An implementation cannot call back into the [`Pds`] (it holds no
/// reference to it); what it must ask of the PDS in return (queue read
/// responses, release holds) it records and does after the call returns
/// (`uet_ses::Endpoint`'s `apply_deferred`).
pub trait SesHooks {
    /// Writes the SES header and payload of `pkt` into `buf` (exactly
    /// `pkt.len` bytes) and says which SES header it wrote.
    fn write_request(&mut self, now: Instant, pkt: &PktRef, buf: &mut [u8]) -> NextHeader;
    /// A new (not duplicate) request arrived.
    fn on_request(&mut self, now: Instant, rx: &RxRequest<'_>) -> Reply;
    /// One of our packets was acknowledged (exactly once per packet).
    fn on_acked(&mut self, now: Instant, pkt: PktRef);
    /// The packets one cumulative ACK acknowledged, in PSN order: the same
    /// as [`SesHooks::on_acked`] for each in turn (the default), which an
    /// implementation may do once per run of packets of one token.
    fn on_acked_all(&mut self, now: Instant, pkts: &[PktRef]) {
        for &pkt in pkts {
            self.on_acked(now, pkt);
        }
    }
    /// An ACK carried an SES response for one of our packets.
    fn on_response(&mut self, now: Instant, pkt: PktRef, response: &SesRepr, data: &[u8]);
    /// The engine gave up on one of our packets (also on packets already
    /// reported acknowledged by SACK, whose PDC failed before the
    /// cumulative ACK or a response cleared them).
    fn on_failed(&mut self, now: Instant, pkt: PktRef, error: PdsError);
}

/// What identifies a reusable initiator PDC (§2.12: job, destination,
/// traffic class, mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InitiatorKey {
    /// Job.
    pub job: JobId,
    /// Destination FEP.
    pub dst: IpAddr,
    /// Traffic class.
    pub tc: TrafficClass,
    /// RUD or ROD.
    pub mode: ReliableMode,
}

/// How a received datagram arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxMeta {
    /// Source FEP address.
    pub src: IpAddr,
    /// The entropy value it carried.
    pub ev: EntropyValue,
    /// Its ECN bits.
    pub ecn: Ecn,
    /// Trimmed by a switch, as its DSCP says.
    pub trimmed: Option<Trim>,
    /// Its nominal size (`transport_pktsize + 40`, §1).
    pub nominal_size: u32,
    /// The security domain that authenticated it (`docs/security.md`), or
    /// `None` for a datagram that came in the clear. A PDC takes the domain
    /// of the packet that opened it and accepts no packet of another.
    pub sdi: Option<Sdi>,
    /// When it reached the host, when the receive path stamps arrivals
    /// (`uetd`'s XDP program does) and it then waited to be read; `None`:
    /// it arrived at the `now` it is handled at. Congestion control times
    /// its delays from it, as from a NIC's receive timestamp: NSCC's RTT
    /// takes an ACK's arrival, and a destination's service time runs
    /// from the arrival of the packet it acknowledges, so the time a
    /// datagram waited for its host to run is counted at neither end as
    /// fabric delay. Loss timers keep the time the datagram is handled.
    pub arrived: Option<Instant>,
}

/// A datagram to send: UET bytes in the caller's buffer plus where they go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Destination FEP.
    pub dst: IpAddr,
    /// Entropy value (UDP source port).
    pub ev: EntropyValue,
    /// DSCP.
    pub dscp: Dscp,
    /// ECN bits to send with.
    pub ecn: Ecn,
    /// UET bytes written at the start of the buffer.
    pub len: usize,
    /// The security domain to seal it in (its PDC's), or `None` to send it
    /// in the clear.
    pub sdi: Option<Sdi>,
}

impl Transmit {
    /// A request (data DSCP, ECN-capable).
    fn data(config: &PdsConfig, dst: IpAddr, ev: EntropyValue, len: usize) -> Self {
        Self {
            dst,
            ev,
            dscp: config.dscp_data,
            ecn: Ecn::Ect0,
            len,
            sdi: None,
        }
    }

    /// An ACK, NACK or control packet (control DSCP, ECN-capable).
    fn control(config: &PdsConfig, dst: IpAddr, ev: EntropyValue, len: usize) -> Self {
        Self {
            dst,
            ev,
            dscp: config.dscp_control,
            ecn: Ecn::Ect0,
            len,
            sdi: None,
        }
    }

    /// The same datagram, sealed in `sdi`.
    const fn in_domain(mut self, sdi: Option<Sdi>) -> Self {
        self.sdi = sdi;
        self
    }
}

/// Something that happened, for the layer above and for tracing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PdsEvent {
    /// A PDC was created.
    PdcOpened {
        /// Local ID.
        pdc: PdcId,
        /// Peer.
        peer: IpAddr,
        /// Whether we initiated it.
        initiator: bool,
    },
    /// A PDC learned its peer's ID (first ACK).
    PdcEstablished {
        /// Local ID.
        pdc: PdcId,
    },
    /// A PROBE was answered.
    ProbeAnswered {
        /// Local ID.
        pdc: PdcId,
        /// Round trip of the probe.
        rtt: Duration,
    },
    /// A PDC closed.
    PdcClosed {
        /// Local ID.
        pdc: PdcId,
        /// Why, when it closed in error.
        error: Option<PdsError>,
    },
}

/// Local misuse of [`Pds::open`] / [`Pds::enqueue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpenError {
    /// The PDC table is full.
    NoPdcAvailable,
    /// No such PDC.
    UnknownPdc,
    /// The PDC is closing.
    Closing,
}

impl core::fmt::Display for OpenError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::NoPdcAvailable => "PDC table full",
            Self::UnknownPdc => "unknown PDC",
            Self::Closing => "PDC is closing",
        })
    }
}

impl std::error::Error for OpenError {}

/// The PDS engine of one endpoint.
#[derive(Debug)]
pub struct Pds {
    config: PdsConfig,
    rng: Xoshiro256,
    /// Draws local PDC IDs: a stream of its own, so how many IDs are drawn
    /// changes no Start_PSN or entropy choice.
    id_rng: Xoshiro256,
    pdcs: PdcTable<Pdc>,
    by_peer: HashMap<(IpAddr, PdcId), PdcId>,
    reuse: HashMap<InitiatorKey, PdcId>,
    /// The security domain of each job that has one (from configuration;
    /// as many entries as the configuration names).
    job_domains: HashMap<JobId, Sdi>,
    cccs: CccTable<Ccc>,
    /// The PDCs of each CCC, for [`Pds::schedule_ccc`].
    ccc_members: CccMembers,
    active: VecDeque<PdcId>,
    acks: VecDeque<PdcId>,
    ctl: VecDeque<ControlPacket>,
    uud: VecDeque<(IpAddr, PktRef)>,
    rudi: RudiState,
    /// Receiver-side RCCC (§5.3): the active-sender table and credit pacer,
    /// keyed by (source FEP, ccc_id), with the PDC to address CREDIT CPs
    /// (the last one that carried the source's data) and how many PDCs
    /// carry it.
    rccc_rx: Option<RcccReceiver<(IpAddr, u8)>>,
    rccc_pdc: HashMap<(IpAddr, u8), (PdcId, u32)>,
    /// Pending target PDCs (`Pdc::pending`) in the order they opened, with
    /// when: the oldest is evicted first. Entries of PDCs that since were
    /// confirmed or closed are skipped when met, and swept when they
    /// outnumber the live ones.
    pending: VecDeque<(PdcId, Instant)>,
    /// PDCs with `Pdc::pending` set.
    pending_count: usize,
    /// `config.ccc.algorithm.has_rccc()`, read on every poll (the
    /// configuration does not change).
    rccc_source: bool,
    /// Until when no packet is taken for lost by time (RTO, tail probe):
    /// the caller's host did not run for a while ([`Pds::hold_loss_timers`]).
    loss_timers_held: Option<Instant>,
    /// Scratch lists reused for every ACK (no allocation per packet):
    /// EVs of newly acknowledged packets, and packets presumed lost.
    scratch_evs: Vec<EntropyValue>,
    /// The packets of one cumulative ACK, handed up together (kept to reuse
    /// its allocation).
    scratch_acked: Vec<PktRef>,
    scratch_lost: Vec<(u64, EntropyValue)>,
    scratch_ids: Vec<PdcId>,
    /// CCC indices due or flagged (`CccTable::take_due`, `take_flagged`).
    scratch_cccs: Vec<usize>,
    /// The PDCs' timer deadlines, earliest first (`timers.rs`): an entry is
    /// live while it equals its PDC's `timer_queued`, and the top is kept
    /// exact, so `poll_timeout` reads the earliest PDC deadline without
    /// looking at every PDC. Holds at most one live entry per PDC; stale
    /// ones are compacted away once they outnumber the PDCs. In a `RefCell`
    /// because `poll_timeout` takes `&self` and brings it up to date.
    timers: RefCell<DeadlineHeap<PdcId>>,
    /// PDC deadlines computed (tests: `poll_timeout` must not scale with
    /// the PDC count).
    #[cfg(test)]
    deadline_evals: Cell<u64>,
    /// CCC deadlines computed (tests: nor with the CCC count).
    #[cfg(test)]
    ccc_deadline_evals: Cell<u64>,
    events: VecDeque<PdsEvent>,
    counters: Counters,
    /// Secure PDC establishment per security domain (§2.12).
    secure: SecureState,
}

/// Start_PSNs of secure PDCs, per security domain (§2.12 "Secure PDCs").
/// One entry per domain: the target learns domains only from datagrams the
/// layer below authenticated (so from its configuration), the initiator
/// from its jobs' domains; beyond [`SecureState::MAX_DOMAINS`] a domain
/// keeps no floor and its PDCs start in one round trip.
#[derive(Debug, Default)]
struct SecureState {
    /// Target: the least Start_PSN a new PDC of the domain may take
    /// (EXPECTED_0RTT_START's Expected_PSN).
    floor: HashMap<Sdi, Psn>,
    /// Initiator: the Start_PSN the domain's next PDC takes, from the
    /// last closing ACK's Expected_PSN.
    next_start: HashMap<Sdi, Psn>,
}

impl SecureState {
    const MAX_DOMAINS: usize = 4096;

    /// Raises `map[sdi]` to `psn` (PSN order), within the bound.
    fn raise(map: &mut HashMap<Sdi, Psn>, sdi: Sdi, psn: Psn) {
        let full = map.len() >= Self::MAX_DOMAINS;
        match map.get_mut(&sdi) {
            Some(p) if psn.is_after(*p) => *p = psn,
            Some(_) => {}
            None if !full => {
                map.insert(sdi, psn);
            }
            None => {}
        }
    }
}

/// RUDI (§2.11): reliable at-least-once delivery of idempotent operations
/// without a PDC. Each request has a locally unique packet ID, echoed by the
/// RUDI response or by a NACK with `nt` = 1; the source retries on timeout.
#[derive(Debug, Default)]
struct RudiState {
    next_id: u32,
    inflight: BTreeMap<u32, RudiTx>,
    /// Responses to send: (destination, ev, ECN-CE seen, pkt id, response).
    replies: VecDeque<(IpAddr, EntropyValue, bool, u32, Option<SesResponseRepr>)>,
}

#[derive(Debug, Clone, Copy)]
struct RudiTx {
    dst: IpAddr,
    pkt: PktRef,
    sent_at: Instant,
    rtx_count: u32,
    due: bool,
    sent: bool,
}

impl Pds {
    /// A new engine; `seed` drives Start_PSN and entropy choices.
    #[must_use]
    pub fn new(config: PdsConfig, seed: u64) -> Self {
        let rccc_rx = config
            .rccc_receiver
            .clone()
            .and_then(|c| RcccReceiver::new(c).ok());
        Self {
            rccc_source: config.ccc.algorithm.has_rccc(),
            loss_timers_held: None,
            config,
            rng: Xoshiro256::seed_from_u64(seed),
            id_rng: Xoshiro256::seed_from_u64(seed ^ 0x5044_4349_4400_0000),
            pdcs: PdcTable::new(),
            by_peer: HashMap::default(),
            reuse: HashMap::default(),
            job_domains: HashMap::default(),
            cccs: CccTable::new(),
            ccc_members: CccMembers::default(),
            active: VecDeque::new(),
            acks: VecDeque::new(),
            ctl: VecDeque::new(),
            uud: VecDeque::new(),
            rudi: RudiState::default(),
            rccc_rx,
            rccc_pdc: HashMap::default(),
            pending: VecDeque::new(),
            pending_count: 0,
            scratch_evs: Vec::new(),
            scratch_acked: Vec::new(),
            scratch_lost: Vec::new(),
            scratch_ids: Vec::new(),
            scratch_cccs: Vec::new(),
            timers: RefCell::new(DeadlineHeap::new()),
            #[cfg(test)]
            deadline_evals: Cell::new(0),
            #[cfg(test)]
            ccc_deadline_evals: Cell::new(0),
            events: VecDeque::new(),
            counters: Counters::default(),
            secure: SecureState::default(),
        }
    }

    /// A random Start_PSN in REFPROV's range [2^16, 2^31) (§2.12).
    pub(super) fn random_start(&mut self) -> Psn {
        Psn((1 << 16) + self.rng.below((1 << 31) - (1 << 16)) as u32)
    }

    /// The configuration.
    pub fn config(&self) -> &PdsConfig {
        &self.config
    }

    /// Counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Open PDCs.
    pub fn pdc_count(&self) -> usize {
        self.pdcs.len()
    }

    /// The round trip of every PDC that has sent data: its peer, SRTT and
    /// RTTVAR (`rto.rs`) and the RTO its next packet would get (before any
    /// timeout's doubling). For `uet stats`: what a timeout waits for.
    pub fn round_trips(&self) -> impl Iterator<Item = PdcRoundTrip> + '_ {
        self.pdcs.values().filter_map(|p| {
            let srtt = p.rtt.srtt()?;
            Some(PdcRoundTrip {
                peer: p.peer,
                srtt,
                rttvar: p.rtt.rttvar(),
                rto: self.config.rto_for(&p.rtt, 0),
            })
        })
    }

    /// The receiver-side RCCC (active-sender table and credit pacer), when
    /// `PdsConfig::rccc_receiver` configured one.
    pub fn rccc_receiver(&self) -> Option<&RcccReceiver<(IpAddr, u8)>> {
        self.rccc_rx.as_ref()
    }

    /// Entries in the queue of pending PDCs (`Pds::push_pending`).
    #[cfg(test)]
    pub(crate) fn pending_queue_len(&self) -> usize {
        self.pending.len()
    }

    /// Queues request packets on a PDC (either direction: the target queues
    /// return-direction packets on the PDC a request came in on).
    pub fn enqueue(
        &mut self,
        now: Instant,
        pdc: PdcId,
        pkts: impl IntoIterator<Item = PktRef>,
    ) -> Result<(), OpenError> {
        let p = self.pdcs.get_mut(&pdc).ok_or(OpenError::UnknownPdc)?;
        if p.closing {
            return Err(OpenError::Closing);
        }
        let mut pushed = false;
        let mut bytes = 0u64;
        for pkt in pkts {
            bytes += u64::from(self.config.nominal(pkt.len));
            p.queue.push_back(pkt);
            pushed = true;
        }
        p.last_activity = now;
        if pushed {
            let key = p.ccc;
            self.on_queued(now, pdc, key, bytes);
        }
        Ok(())
    }

    /// [`Pds::enqueue`] of one whole message in O(1): packets `frag` 0 to
    /// `count - 1` of `token`, each `len` bytes of SES header and payload
    /// except the last (`last_len`, with `last` set). Nothing is queued for
    /// `count` 0.
    pub fn enqueue_message(
        &mut self,
        now: Instant,
        pdc: PdcId,
        token: u64,
        count: u32,
        len: u32,
        last_len: u32,
    ) -> Result<(), OpenError> {
        let p = self.pdcs.get_mut(&pdc).ok_or(OpenError::UnknownPdc)?;
        if p.closing {
            return Err(OpenError::Closing);
        }
        p.last_activity = now;
        if count == 0 {
            return Ok(());
        }
        let bytes = u64::from(count - 1) * u64::from(self.config.nominal(len))
            + u64::from(self.config.nominal(last_len));
        p.queue.push_message(token, count, len, last_len);
        let key = p.ccc;
        self.on_queued(now, pdc, key, bytes);
        Ok(())
    }

    /// Keeps a PDC open while the layer above awaits return-direction data
    /// on it (a read's response data). A held PDC is not closed for being
    /// idle; one that stays silent for four idle timeouts while held fails
    /// with [`PdsError::Timeout`], so nothing waits forever.
    pub fn hold(&mut self, pdc: PdcId) {
        if let Some(p) = self.pdcs.get_mut(&pdc) {
            p.holds += 1;
        }
    }

    /// Sends a PROBE control packet on an established PDC (§2.10): the
    /// target answers with an ACK whose `p` flag is set and whose
    /// `probe_opaque` echoes ours, and [`PdsEvent::ProbeAnswered`] reports
    /// the round trip. It uses the control traffic class, so it measures the
    /// path without data queueing (NSCC base-RTT probing, §5.2).
    pub fn probe(&mut self, now: Instant, pdc: PdcId) -> Result<(), OpenError> {
        let p = self.pdcs.get_mut(&pdc).ok_or(OpenError::UnknownPdc)?;
        if !p.established {
            return Err(OpenError::UnknownPdc);
        }
        let opaque = (self.rng.next_u32() as u16).max(1);
        p.probe = Some((opaque, now));
        let (dst, repr) = (p.peer, Self::probe_cp(p, opaque));
        self.ctl.push_back(ControlPacket::Cp { dst, repr });
        Ok(())
    }

    /// Releases a [`Pds::hold`].
    pub fn release(&mut self, now: Instant, pdc: PdcId) {
        if let Some(p) = self.pdcs.get_mut(&pdc) {
            p.holds = p.holds.saturating_sub(1);
            p.last_activity = now;
        }
    }

    /// Sends one UUD packet (best effort, single packet, no PDC; §2.11).
    pub fn send_unreliable(&mut self, dst: IpAddr, pkt: PktRef) {
        self.uud.push_back((dst, pkt));
    }

    /// Sends one RUDI request (§2.11); it is retried until a RUDI response
    /// arrives or the retry budget runs out. Returns its packet ID.
    pub fn send_rudi(&mut self, now: Instant, dst: IpAddr, pkt: PktRef) -> u32 {
        let id = self.rudi.next_id;
        self.rudi.next_id = self.rudi.next_id.wrapping_add(1);
        self.rudi.inflight.insert(
            id,
            RudiTx {
                dst,
                pkt,
                sent_at: now,
                rtx_count: 0,
                due: true,
                sent: false,
            },
        );
        id
    }

    /// The next event.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<PdsEvent> {
        self.events.pop_front()
    }

    /// Whether [`Pds::poll_event`] has an event to return.
    #[must_use]
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }
}
