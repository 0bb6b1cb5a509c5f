//! The PDS engine: every PDC of one endpoint, sans-IO.
//!
//! Read `uet-spec-notes.md` §2 (formats), §2.12 (PDC lifecycle) and §3
//! (reliability) before editing; comments cite them.
//!
//! Shape (quinn-proto's `Connection`, `design.md` §3): inputs are
//! [`Pds::handle_datagram`], [`Pds::handle_timeout`] and [`Pds::enqueue`];
//! outputs are [`Pds::poll_transmit`], [`Pds::poll_timeout`] and
//! [`Pds::poll_event`]. The layer above (SES) is reached through [`Upper`]:
//! the engine asks it to write a request's SES header and payload at the
//! moment the packet leaves — first transmission or retransmission — so
//! payload is read from registered memory, never copied into the engine.
//!
//! A PDC is bidirectional: the initiator's requests use its PSN space and
//! the target's ACKs answer them; the target can send return-direction
//! requests (read response data) in its own PSN space on the same PDC
//! (§3 "Read responses"). Each PDC therefore has a send half (ledger, queue)
//! and a receive half (PSN window, ACK state).

use std::collections::{BTreeMap, VecDeque};

use rustc_hash::FxHashMap as HashMap;
use std::net::IpAddr;

use uet_cms::nscc::{RcvdBytesTracker, service_time_from_wire, service_time_to_wire};
use uet_cms::rccc::Arrival;
use uet_cms::{AckEvent, Ccc, CccTrace, NackEvent, RcccReceiver};
use uet_wire::encap::Trim;
use uet_wire::pds::{
    AckCcState, CpPayload, CreditState, CwndPenalty, DpdcidField, NackAction, NackCode, NackTarget,
    NextHeader, NsccState, PdcInfo, PdsAckCc, PdsAckExt, PdsAckPsnField, PdsAckRepr, PdsAckRequest,
    PdsAckState, PdsCcFlags, PdsCpRepr, PdsNackRepr, PdsRepr, PdsRequestRepr, PdsRudiRepr,
    PdsUudRepr, ReliableMode, ReqCcState, RudiKind, SynPsnOffset,
};
use uet_wire::rand::{Rng, Xoshiro256};
use uet_wire::ses::{ListKind, ResponseOpcode, ReturnCode, SesRepr, SesResponseRepr, StandardView};
use uet_wire::time::{Duration, Instant};
use uet_wire::{
    CccId, Credit24, DeliveryMode, Dscp, Ecn, EntropyValue, JobId, MessageId, PdcId, Psn,
    RiGeneration, TrafficClass, Units256,
};

use crate::ccc_table::CccTable;
use crate::config::PdsConfig;
use crate::counters::{Counters, DropReason};
use crate::pdc_table::PdcTable;
use crate::pkt_queue::PktQueue;
use crate::rx_window::{RxOutcome, RxWindow};
use crate::tail_probe::{PtoBasis, TailProbe};
use crate::tx_ledger::{TxEntry, TxLedger};

/// Entropy of control packets that answer no particular data packet
/// (REFPROV default 0x4242, §8).
const CONTROL_EV: EntropyValue = EntropyValue::from_masked(0x4242);

/// Times an initiator's PDC may be reopened after its peer refused it as
/// unknown, before it is given up: a restarted peer needs one; a peer that
/// refuses a fresh PDC again is not one we can reach.
const MAX_REOPENS: u32 = 3;

/// One request packet as the layer above knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PktRef {
    /// The upper layer's handle (e.g. its message slot).
    pub token: u64,
    /// Fragment index within the message.
    pub frag: u32,
    /// Bytes of SES header + payload.
    pub len: u32,
    /// The last packet of its message (sent with `ar`).
    pub last: bool,
}

/// What an arriving request carries, as handed to [`Upper::on_request`].
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

/// The layer above the PDS (the SES endpoint).
pub trait Upper {
    /// Writes the SES header and payload of `pkt` into `buf` (exactly
    /// `pkt.len` bytes) and says which SES header it wrote.
    fn write_request(&mut self, now: Instant, pkt: &PktRef, buf: &mut [u8]) -> NextHeader;
    /// A new (not duplicate) request arrived.
    fn on_request(&mut self, now: Instant, rx: &RxRequest<'_>) -> Reply;
    /// One of our packets was acknowledged (exactly once per packet).
    fn on_acked(&mut self, now: Instant, pkt: PktRef);
    /// The packets one cumulative ACK acknowledged, in PSN order: the same
    /// as [`Upper::on_acked`] for each in turn (the default), which an
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
        }
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TxItem {
    Data(PktRef),
    /// The CLOSE control packet (consumes a PSN, sent with `ar`, §2.12).
    Close,
}

/// A ledger entry's share of its CCC: the accounting invariant between the
/// retransmission ledgers and [`Ccc`].
///
/// A CCC's `inflight` is the sum of `Inflight(b)` over the ledgers of the
/// PDCs that share it, its `inflight_pkts` the number of those entries, and
/// its retransmit backlog the sum of `Rtx(b)`. Each data packet is counted
/// in at most one of them, by one rule (`uet-spec-notes.md` §5.1: OnNACK and
/// OnInferredLoss mark for retransmission, OnSend adds, OnACK un-marks):
///
/// * (re)transmitted: `+b` to inflight (`Ccc::on_send`);
/// * declared lost — NACK, trim, RTO, SACK inference: moves from inflight to
///   the retransmit backlog (`on_nack` / `on_inferred_loss`), once: an entry
///   already marked is not declared lost again until it is resent;
/// * acknowledged — SACK, cumulative ACK, response: leaves whichever it is
///   in: inflight if outstanding, the retransmit backlog if it was marked
///   and not yet resent (`AckEvent::rtx_cancelled_bytes`). A SACKed entry is
///   never counted again, whatever later ACKs cover it;
/// * its PDC fails: leaves whichever it is in (`Ccc::abandon`).
///
/// CLOSE packets and the ACK_REQ probes that stand in for SACKed packets
/// are control traffic: never counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CcShare {
    Inflight(u64),
    Rtx(u64),
    None,
}

impl CcShare {
    /// A whole ledger's share of its CCC: (inflight bytes, inflight
    /// packets, retransmit backlog bytes), what a PDC hands back when it
    /// fails or is reopened.
    fn of_ledger(config: &PdsConfig, ledger: &TxLedger<TxItem>) -> (u64, u32, u64) {
        let (mut infl, mut pkts, mut rtx) = (0u64, 0u32, 0u64);
        for e in ledger.iter() {
            match Self::of(config, e) {
                Self::Inflight(b) => {
                    infl += b;
                    pkts += 1;
                }
                Self::Rtx(b) => rtx += b,
                Self::None => {}
            }
        }
        (infl, pkts, rtx)
    }

    fn of(config: &PdsConfig, e: &TxEntry<TxItem>) -> Self {
        match e.token {
            TxItem::Data(pkt) if !e.sacked => {
                let b = u64::from(config.nominal(pkt.len));
                if e.needs_rtx {
                    Self::Rtx(b)
                } else {
                    Self::Inflight(b)
                }
            }
            _ => Self::None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AckDue {
    No,
    At(Instant),
    Now,
}

#[derive(Debug)]
struct RxHalf {
    win: RxWindow,
    start: Psn,
    /// Bytes accepted since the last ACK, each packet counting at least
    /// `ACK_Gen_Min_Pkt_Add` (§3).
    ack_bytes: u32,
    due: AckDue,
    /// The PSN that triggered the pending ACK.
    trigger: Psn,
    ev: EntropyValue,
    ecn: bool,
    /// `retx` of the ACK ("ACK to a retransmission", §2): whether the
    /// packet that triggered it was one. It describes that packet only,
    /// not the others the ACK covers, so the source knows which copy of
    /// a resent trigger arrived (`calc_rtt`'s rule, and RACK's reference).
    retx: bool,
    /// Responses to carry, one per ACK, with their PSNs (several packets
    /// can each hold one, e.g. errors on every packet of a message).
    responses: VecDeque<(Psn, SesResponseRepr)>,
    /// Probe to answer (`p` = 1, `probe_opaque`).
    probe: Option<u16>,
    /// Guaranteed-delivery responses not yet cleared, by PSN.
    gtd: BTreeMap<u32, SesResponseRepr>,
    /// NSCC destination counter (§5.2 destination side).
    rcvd_bytes: u64,
    ooo_count: u16,
    /// ROD: a NACK for the current gap was sent.
    rod_nacked: bool,
    /// Highest CLEAR_PSN seen.
    cleared: Psn,
    /// Arrival time of the packet that triggered the pending ACK (NSCC
    /// service time, §2.7).
    trigger_at: Instant,
    /// The RCCC sender this direction belongs to, once a *_CC_REQ named it.
    rccc: Option<(IpAddr, u8)>,
}

impl RxHalf {
    fn new(start: Psn, range: u32) -> Self {
        Self {
            win: RxWindow::new(start, range),
            start,
            ack_bytes: 0,
            due: AckDue::No,
            trigger: start,
            ev: CONTROL_EV,
            ecn: false,
            retx: false,
            responses: VecDeque::new(),
            probe: None,
            gtd: BTreeMap::new(),
            rcvd_bytes: 0,
            ooo_count: 0,
            rod_nacked: false,
            cleared: start.sub(1),
            trigger_at: Instant::ZERO,
            rccc: None,
        }
    }

    /// The cumulative ACK: everything received, but never past an uncleared
    /// guaranteed response (§3).
    fn cack(&self) -> Psn {
        let c = self.win.cack();
        match self.gtd.keys().find(|k| !Psn(**k).is_after(c)) {
            Some(first) => Psn(*first).sub(1),
            None => c,
        }
    }

    #[inline]
    fn clear_to(&mut self, clear_psn: Psn) {
        if clear_psn.is_after(self.cleared) {
            self.cleared = clear_psn;
        }
        // Runs for every request packet; `gtd` is nearly always empty.
        if !self.gtd.is_empty() {
            let cleared = self.cleared;
            self.gtd.retain(|k, _| Psn(*k).is_after(cleared));
        }
    }
}

#[derive(Debug)]
struct Pdc {
    id: PdcId,
    peer: IpAddr,
    peer_id: Option<PdcId>,
    initiator: bool,
    mode: ReliableMode,
    key: Option<InitiatorKey>,
    ccc: (IpAddr, TrafficClass),
    /// The index of `ccc` in [`Pds::cccs`] once known (`CccTable::index`;
    /// a CCC is removed only with the last PDC that refers to it, so it
    /// stays valid).
    ccc_ix: Option<usize>,
    // Send half.
    start: Psn,
    established: bool,
    /// The target has answered with a NACK: it holds a PDC for this one
    /// even before establishment (a SYN-addressed CP can reach it).
    nacked: bool,
    ledger: TxLedger<TxItem>,
    /// When an RTO last let a packet of this PDC pass closed congestion
    /// control.
    forced_at: Option<Instant>,
    queue: PktQueue,
    clear_needed: bool,
    /// The last CLEAR_PSN sent in a CLEAR CP: another is sent only when
    /// CLEAR_PSN moves past it.
    clear_sent: Option<Psn>,
    closing: bool,
    rod_ev: EntropyValue,
    // Receive half (created by the first packet from the peer).
    rx: Option<RxHalf>,
    last_activity: Instant,
    close_requested: bool,
    /// On the send round robin.
    scheduled: bool,
    /// Holds by the layer above, which awaits return-direction data (a
    /// read's response) on this PDC: a held PDC is not idle.
    holds: u32,
    /// The outstanding PROBE: its opaque value and when it was sent.
    probe: Option<(u16, Instant)>,
    /// NSCC source: the last `rcvd_bytes` the target reported (§5.2).
    rcvd: RcvdBytesTracker,
    /// Tail loss probing: min RTT, the PTO, the probe on its way, the
    /// episode.
    tail: TailProbe,
    /// A target's PDC opened by a SYN whose initiator has not yet shown it
    /// heard our answer (no packet addressed by our PDC ID has arrived):
    /// anyone can open one with a forged source, so these are bounded and
    /// reaped apart from the others (`PdsConfig::max_pending_pdcs`).
    pending: bool,
    /// When the PDC was opened (tells a pending entry from a later PDC that
    /// reused its ID).
    created: Instant,
    /// Reopened (`Pds::reopen`) since the peer last acknowledged data.
    reopens: u32,
    /// No data leaves before this: the peer refused a packet for want of a
    /// resource (`Pds::on_nack`), and resending at once would only be
    /// refused again.
    hold_until: Option<Instant>,
}

impl Pdc {
    fn idle(&self) -> bool {
        self.ledger.is_empty() && self.queue.is_empty() && self.holds == 0
    }

    /// Nothing to send and nothing unacknowledged (holds aside).
    fn quiet(&self) -> bool {
        self.ledger.is_empty() && self.queue.is_empty()
    }

    /// CLEAR_PSN: one before the first PSN not known delivered (§3: "left
    /// edge of the initiator's unACKed window − 1"). SACKed or answered
    /// packets count as delivered.
    fn clear_psn(&self) -> Psn {
        self.ledger.first_unsacked_psn().sub(1)
    }

    #[inline]
    fn has_tx_work(&self) -> bool {
        !self.queue.is_empty() || self.ledger.has_rtx() || self.clear_needed
    }
}

#[derive(Debug, Clone, Copy)]
enum CtlOut {
    Nack {
        dst: IpAddr,
        ev: EntropyValue,
        repr: PdsNackRepr,
    },
    Cp {
        dst: IpAddr,
        repr: PdsCpRepr,
    },
    /// A tail loss probe: a Probe CP on the data traffic class, so that it
    /// queues behind the data it asks about.
    TailProbe {
        dst: IpAddr,
        repr: PdsCpRepr,
    },
}

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
    cccs: CccTable<Ccc>,
    active: VecDeque<PdcId>,
    acks: VecDeque<PdcId>,
    ctl: VecDeque<CtlOut>,
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
    /// Scratch lists reused for every ACK (no allocation per packet):
    /// EVs of newly acknowledged packets, and packets presumed lost.
    scratch_evs: Vec<EntropyValue>,
    /// The packets of one cumulative ACK, handed up together (kept to reuse
    /// its allocation).
    scratch_acked: Vec<PktRef>,
    scratch_lost: Vec<(u64, EntropyValue)>,
    scratch_ids: Vec<PdcId>,
    events: VecDeque<PdsEvent>,
    counters: Counters,
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
            config,
            rng: Xoshiro256::seed_from_u64(seed),
            id_rng: Xoshiro256::seed_from_u64(seed ^ 0x5044_4349_4400_0000),
            pdcs: PdcTable::new(),
            by_peer: HashMap::default(),
            reuse: HashMap::default(),
            cccs: CccTable::new(),
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
            events: VecDeque::new(),
            counters: Counters::default(),
        }
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

    /// CCCs: one per destination and traffic class some PDC refers to.
    pub fn ccc_count(&self) -> usize {
        self.cccs.len()
    }

    /// Sources the RCCC receiver addresses CREDIT CPs to (one per source
    /// FEP and `ccc_id` some PDC carries).
    pub fn rccc_source_count(&self) -> usize {
        self.rccc_pdc.len()
    }

    /// The CCC towards `dst` in `tc`, if one exists.
    pub fn ccc(&self, dst: IpAddr, tc: TrafficClass) -> Option<&Ccc> {
        self.cccs.get(&(dst, tc))
    }

    /// What the retransmission ledgers say the CCC towards `dst` in `tc`
    /// must hold: (inflight bytes, inflight packets, retransmit backlog
    /// bytes), summed over the PDCs that share it. See [`CcShare`].
    #[cfg(test)]
    pub(crate) fn ccc_audit(&self, dst: IpAddr, tc: TrafficClass) -> (i64, u32, u64) {
        let (mut bytes, mut pkts, mut rtx) = (0i64, 0u32, 0u64);
        for p in self.pdcs.values().filter(|p| p.ccc == (dst, tc)) {
            for e in p.ledger.iter() {
                match CcShare::of(&self.config, e) {
                    CcShare::Inflight(b) => {
                        bytes += b as i64;
                        pkts += 1;
                    }
                    CcShare::Rtx(b) => rtx += b,
                    CcShare::None => {}
                }
            }
        }
        (bytes, pkts, rtx)
    }

    /// Hands every queued congestion-control state change, of every CCC,
    /// to `f` with the CCC's destination and traffic class
    /// ([`Ccc::poll_trace`]): for tracing and plots.
    pub fn drain_cc_traces(&mut self, mut f: impl FnMut(IpAddr, TrafficClass, CccTrace)) {
        self.cccs.for_each_mut(|&(dst, tc), c| {
            while let Some(e) = c.poll_trace() {
                f(dst, tc, e);
            }
        });
    }

    /// Every CCC with its destination and traffic class (for stats).
    pub fn cccs(&self) -> impl Iterator<Item = (IpAddr, TrafficClass, &Ccc)> + '_ {
        self.cccs.iter().map(|(&(dst, tc), c)| (dst, tc, c))
    }

    /// Returns the initiator PDC for `key`, reusing an open one or creating
    /// one (zero-RTT: it sends SYN packets until the first ACK, §2.12).
    pub fn open(&mut self, now: Instant, key: InitiatorKey) -> Result<PdcId, OpenError> {
        if let Some(id) = self.reuse.get(&key)
            && self.pdcs.get(id).is_some_and(|p| !p.closing)
        {
            return Ok(*id);
        }
        let id = self.alloc_id().ok_or(OpenError::NoPdcAvailable)?;
        // REFPROV keeps Start_PSN in [2^16, 2^31) (§2.12).
        let start = Psn((1 << 16) + self.rng.below((1 << 31) - (1 << 16)) as u32);
        let rod_ev = EntropyValue::from_masked(self.rng.next_u32() as u16);
        let pdc = Pdc {
            id,
            peer: key.dst,
            peer_id: None,
            initiator: true,
            mode: key.mode,
            key: Some(key),
            ccc: (key.dst, key.tc),
            ccc_ix: None,
            start,
            established: false,
            ledger: TxLedger::new(start),
            queue: PktQueue::new(),
            clear_needed: false,
            forced_at: None,
            clear_sent: None,
            closing: false,
            rod_ev,
            rx: None,
            last_activity: now,
            close_requested: false,
            nacked: false,
            scheduled: false,
            holds: 0,
            probe: None,
            rcvd: RcvdBytesTracker::new(),
            tail: TailProbe::default(),
            pending: false,
            created: now,
            reopens: 0,
            hold_until: None,
        };
        self.ensure_ccc(now, key.dst, key.tc);
        self.pdcs.insert(id, pdc);
        self.reuse.insert(key, id);
        self.counters.pdcs_opened += 1;
        self.events.push_back(PdsEvent::PdcOpened {
            pdc: id,
            peer: key.dst,
            initiator: true,
        });
        Ok(id)
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

    /// New data queued on `pdc` (CCC `key`): the CCC learns of it
    /// (OnNewData) and the PDC goes on the send round robin.
    fn on_queued(&mut self, now: Instant, pdc: PdcId, key: (IpAddr, TrafficClass), bytes: u64) {
        let ix = self.ensure_ccc(now, key.0, key.1);
        if let Some(c) = self.cccs.at_mut(ix) {
            c.on_new_data(now, bytes);
        }
        self.schedule(pdc);
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
        self.ctl.push_back(CtlOut::Cp { dst, repr });
        Ok(())
    }

    /// A Probe CP on `p` (§2.10): it takes no PSN of its own, and the
    /// target's answer carries `opaque` back. Before the PDC is
    /// established it carries SYN and the offset of its PSN from
    /// Start_PSN, as the data does, so the target can open the PDC from it.
    fn probe_cp(p: &Pdc, opaque: u16) -> PdsCpRepr {
        let psn = p.ledger.next_psn();
        PdsCpRepr {
            mode: p.mode,
            retx: false,
            ar: true,
            psn,
            spdcid: Some(p.id),
            dpdcid: Self::dst_field(p, psn),
            payload: CpPayload::Probe {
                probe_opaque: opaque,
                sack_base: p.ledger.una(),
            },
        }
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

    /// When [`Pds::handle_timeout`] should next be called.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut at = |x: Instant| t = Some(t.map_or(x, |y| y.min(x)));
        for p in self.pdcs.values() {
            if let Some(e) = p.ledger.rto_guard() {
                at(e.sent_at + self.config.rto(e.rto_count));
            }
            if let Some(d) = Self::tail_probe_due(&self.config, self.rccc_source, p) {
                at(d);
            }
            if let Some(h) = p.hold_until {
                at(h);
            }
            if let Some(rx) = &p.rx
                && let AckDue::At(d) = rx.due
            {
                at(d);
            }
            if p.idle() {
                at(p.last_activity + self.idle_limit(p));
            } else if p.holds > 0 && p.quiet() {
                at(p.last_activity + self.config.idle_timeout * 4);
            }
        }
        for r in self.rudi.inflight.values() {
            if !r.due {
                at(r.sent_at + self.config.rto(r.rtx_count));
            }
        }
        for c in self.cccs.values() {
            if let Some(x) = c.poll_timeout() {
                at(x);
            }
        }
        if let Some(x) = self.rccc_rx.as_ref().and_then(RcccReceiver::poll_timeout) {
            at(x);
        }
        t
    }

    fn idle_limit(&self, p: &Pdc) -> Duration {
        idle_limit(&self.config, p)
    }

    /// When `p` is due a tail probe: on an established PDC, or on an
    /// initiator's PDC that is not (its probe is SYN-addressed, see
    /// `tail_probe.rs`), with a data packet in flight (not SACKed, not
    /// already marked for retransmission) that a probe's answer could find
    /// lost. A target's PDC learns the initiator's PDC ID from the first
    /// packet, but its return direction is not established before an ACK:
    /// it is left to its RTO as before. `poll_timeout` and
    /// `handle_timeout` ask the same question, so a deadline reported is a
    /// probe sent.
    fn tail_probe_due(config: &PdsConfig, rccc: bool, p: &Pdc) -> Option<Instant> {
        if !p.established && !Self::syn_addressed(p) {
            return None;
        }
        // With RCCC from the idle round trip, whatever the samples say
        // (`PtoBasis::Floor`).
        let basis = if rccc {
            PtoBasis::Floor
        } else {
            PtoBasis::MinRtt
        };
        // A probe unanswered for half of RTO_INIT_TIME was lost.
        let unanswered = config.rto(0) / 2;
        let d = p
            .tail
            .deadline(config.tail_probe, config.ack_delay, basis, unanswered)?;
        p.ledger
            .iter()
            .any(|e| matches!(CcShare::of(config, e), CcShare::Inflight(_)))
            .then_some(d)
    }

    /// Handles expired timers: retransmission timeouts (backoff, retry
    /// budget), delayed ACKs, idle PDCs.
    pub fn handle_timeout(&mut self, now: Instant, upper: &mut impl Upper) {
        self.cms_timers(now);
        let mut failed = Vec::new();
        for (id, r) in &mut self.rudi.inflight {
            if !r.due && now >= r.sent_at + self.config.rto(r.rtx_count) {
                if r.rtx_count >= self.config.max_rto_retx {
                    failed.push(*id);
                } else {
                    r.due = true;
                    self.counters.rto_fired += 1;
                }
            }
        }
        for id in failed {
            if let Some(r) = self.rudi.inflight.remove(&id) {
                upper.on_failed(now, r.pkt, PdsError::Timeout);
            }
        }
        // Reused ID list: timers fire about once per ACK delay, so no
        // allocation here either.
        let mut ids = core::mem::take(&mut self.scratch_ids);
        ids.clear();
        ids.extend(self.pdcs.keys());
        for &id in &ids {
            let mut fail = false;
            let mut lost: Option<(u64, EntropyValue)> = None;
            let Some(p) = self.pdcs.get_mut(&id) else {
                continue;
            };
            // RTO on the oldest packet not yet marked (§3 "Loss recovery").
            let max = self.config.max_rto_retx;
            let cfg = &self.config;
            // One RTO per PDC and RTO_INIT_TIME may let its packet pass
            // closed congestion control: enough to put a source the
            // receiver never heard of back into its table, or to restart a
            // stalled loop. When a whole window was lost (a speculative
            // burst into a full buffer), the RTO of each packet becomes due
            // as soon as the one before it is acknowledged; those go through
            // the CCC (credit, window) like any retransmission instead of
            // resending the whole window past the credit meant to pace it
            // [HTSIM: an RTO without credit sends at most one RTS per RTT].
            // The oldest packet stays guarded by its own RTO, so a source
            // that is never answered keeps retrying it.
            let may_force = p.forced_at.is_none_or(|t| now >= t + cfg.rto(0));
            if let Some(e) = p.ledger.rto_guard_mut()
                && now >= e.sent_at + cfg.rto(e.rto_count)
            {
                if e.rto_count >= max {
                    fail = true;
                } else {
                    // Declared lost only if counted in inflight: not a
                    // SACKed packet (its RTO sends an ACK_REQ) nor a CLOSE.
                    if let CcShare::Inflight(b) = CcShare::of(cfg, e) {
                        lost = Some((b, e.ev));
                    }
                    e.needs_rtx = true;
                    e.rto_count += 1;
                    e.rto_forced = may_force;
                    if may_force {
                        p.forced_at = Some(now);
                    }
                    self.counters.rto_fired += 1;
                    if !p.scheduled {
                        p.scheduled = true;
                        self.active.push_back(id);
                    }
                }
            }
            if !fail && Self::tail_probe_due(cfg, self.rccc_source, p).is_some_and(|d| now >= d) {
                let opaque = (self.rng.next_u32() as u16).max(1);
                p.tail.sent(now, opaque, p.ledger.next_tx());
                self.ctl.push_back(CtlOut::TailProbe {
                    dst: p.peer,
                    repr: Self::probe_cp(p, opaque),
                });
            }
            if let Some(rx) = &mut p.rx
                && let AckDue::At(d) = rx.due
                && now >= d
            {
                rx.due = AckDue::Now;
                self.acks.push_back(id);
            }
            if p.hold_until.is_some_and(|h| now >= h) {
                p.hold_until = None;
                if !p.scheduled {
                    p.scheduled = true;
                    self.active.push_back(id);
                }
            }
            let idle_expired = p.idle() && now >= p.last_activity + idle_limit(&self.config, p);
            let hold_expired =
                p.holds > 0 && p.quiet() && now >= p.last_activity + self.config.idle_timeout * 4;
            if hold_expired {
                fail = true;
            }
            let key = p.ccc;
            if let Some((bytes, ev)) = lost
                && let Some(c) = self.cccs.get_mut(&key)
            {
                c.on_inferred_loss(now, bytes, Some(ev));
            }
            if fail {
                self.fail_pdc(now, id, PdsError::Timeout, upper);
            } else if idle_expired {
                self.idle_close(now, id);
            }
        }
        self.scratch_ids = ids;
    }

    fn idle_close(&mut self, now: Instant, id: PdcId) {
        let Some(p) = self.pdcs.get_mut(&id) else {
            return;
        };
        if p.initiator && p.established && !p.closing {
            // CLOSE consumes a fresh PSN, sets ar and is retransmitted until
            // acknowledged (REFPROV, §2.12).
            p.closing = true;
            p.queue.clear();
            let ev = p.rod_ev;
            p.ledger.push(now, 0, ev, TxItem::Close);
            if let Some(e) = p.ledger.iter_mut().last() {
                e.needs_rtx = true;
            }
            self.schedule(id);
        } else if !p.initiator && !p.close_requested && p.peer_id.is_some() {
            // A target asks its initiator to close an idle PDC (CLOSE_REQ,
            // §2.10); if no CLOSE follows it forgets the PDC later.
            p.close_requested = true;
            p.last_activity = now;
            let repr = PdsCpRepr {
                mode: p.mode,
                retx: false,
                ar: false,
                psn: Psn(0),
                spdcid: Some(id),
                dpdcid: DpdcidField::Dpdcid(p.peer_id),
                payload: CpPayload::CloseReq,
            };
            let dst = p.peer;
            self.ctl.push_back(CtlOut::Cp { dst, repr });
        } else if !p.closing || !p.initiator {
            // Never established, or a silent peer: just forget it.
            self.remove_pdc(now, id, None);
        }
    }

    fn fail_pdc(&mut self, now: Instant, id: PdcId, error: PdsError, upper: &mut impl Upper) {
        let Some(mut p) = self.pdcs.remove(&id) else {
            return;
        };
        let mut withdrawn = 0u64;
        // Every packet still in the ledger is reported, SACKed ones too: an
        // operation whose data arrived but whose final response did not
        // can no longer learn its outcome, and must not wait forever.
        for e in p.ledger.iter() {
            if let TxItem::Data(pkt) = e.token {
                upper.on_failed(now, pkt, error);
            }
        }
        for pkt in p.queue.drain() {
            withdrawn += u64::from(self.config.nominal(pkt.len));
            upper.on_failed(now, pkt, error);
        }
        // Hand the PDC's share of the CCC back: queued bytes leave the
        // backlog, unacknowledged ones leave inflight, marked ones leave the
        // retransmit backlog.
        let (infl, infl_pkts, rtx) = CcShare::of_ledger(&self.config, &p.ledger);
        if let Some(c) = self.cccs.get_mut(&p.ccc) {
            c.withdraw(now, withdrawn);
            c.abandon(now, infl, infl_pkts, rtx);
        }
        self.pdcs.insert(id, p);
        self.remove_pdc(now, id, Some(error));
    }

    /// Forgets a PDC, and with it whatever state for its peer no other PDC
    /// refers to: the RCCC receiver's entry for the source it carried, and
    /// the CCC towards its peer. Both come back fresh with the next PDC,
    /// and the two ends' cumulative credit counters re-synchronize
    /// (`RcccSource::on_credit_update`), so a peer's state lives no longer
    /// than its PDCs and tables a peer can grow stay within `max_pdcs`.
    fn remove_pdc(&mut self, now: Instant, id: PdcId, error: Option<PdsError>) {
        if let Some(p) = self.pdcs.remove(&id) {
            if p.pending {
                self.pending_count -= 1;
            }
            if let Some(key) = p.rx.as_ref().and_then(|rx| rx.rccc) {
                self.release_rccc(now, id, key);
            }
            if self.cccs.index(&p.ccc).is_some() && !self.pdcs.values().any(|q| q.ccc == p.ccc) {
                self.cccs.remove(&p.ccc);
            }
            if let Some(k) = p.key
                && self.reuse.get(&k) == Some(&id)
            {
                self.reuse.remove(&k);
            }
            if let Some(pid) = p.peer_id
                && self.by_peer.get(&(p.peer, pid)) == Some(&id)
            {
                self.by_peer.remove(&(p.peer, pid));
            }
            self.counters.pdcs_closed += 1;
            self.events
                .push_back(PdsEvent::PdcClosed { pdc: id, error });
        }
    }

    /// PDC `id` no longer carries RCCC source `key`: the receiver forgets
    /// the source with the last PDC that carried it; until then another
    /// of them addresses its CREDIT CPs.
    fn release_rccc(&mut self, now: Instant, id: PdcId, key: (IpAddr, u8)) {
        let Some(e) = self.rccc_pdc.get_mut(&key) else {
            return;
        };
        e.1 -= 1;
        if e.1 == 0 {
            self.rccc_pdc.remove(&key);
            if let Some(rr) = &mut self.rccc_rx {
                rr.remove_sender(now, key);
            }
        } else if e.0 == id
            && let Some(q) = self
                .pdcs
                .values()
                .find(|q| q.id != id && q.rx.as_ref().is_some_and(|rx| rx.rccc == Some(key)))
        {
            e.0 = q.id;
        }
    }

    /// CMS timers: RCCC credit timeouts (→ CREDIT_REQ), PFT pacing gaps,
    /// and the receiver's credit pacer.
    fn cms_timers(&mut self, now: Instant) {
        let due: Vec<(IpAddr, TrafficClass)> = self
            .cccs
            .iter()
            .filter(|(_, c)| c.poll_timeout().is_some_and(|t| t <= now))
            .map(|(k, _)| *k)
            .collect();
        for key in due {
            if let Some(c) = self.cccs.get_mut(&key) {
                c.handle_timeout(now);
            }
            self.schedule_ccc(key);
        }
        self.send_credit_requests(now);
        if let Some(rr) = &mut self.rccc_rx
            && rr.poll_timeout().is_some_and(|t| t <= now)
        {
            rr.handle_timeout(now);
        }
        self.queue_grants();
    }

    /// Sends a CREDIT_REQ for every CCC whose RCCC source raised one — on
    /// its credit timeout, or at once when its need grew while blocked. A
    /// raised request disarms the source's timer, so it must be collected
    /// here whatever the timers say.
    fn send_credit_requests(&mut self, now: Instant) {
        // Runs on every transmit poll: nothing to scan without RCCC.
        if !self.rccc_source {
            return;
        }
        // One pass, no key list: polling one CCC changes no other.
        let Self {
            cccs, pdcs, ctl, ..
        } = self;
        cccs.for_each_mut(|&key, c| {
            if !c
                .rccc()
                .is_some_and(uet_cms::RcccSource::needs_credit_request)
            {
                return;
            }
            if let Some(target) = c.poll_credit_request(now) {
                // Any established PDC of this CCC carries the request; else
                // one the target has NACKed, addressed as its SYN packets
                // are (the target knows it by {source, SPDCID}, §2.2).
                // Whole first windows trimmed leave a source with nothing
                // but NACKs, which do not establish: before, its request
                // went nowhere, and once the receiver's idle timeout had
                // dropped its demand it had no way to ask again. A PDC
                // never heard from waits for its RTO: the target may not
                // know it, and at 1023:1 drop-tail asking anyway put more
                // retransmissions into the full buffer (ICT 1.098 ->
                // 1.155, 14,773 -> 20,434 RTOs, seed 1).
                let pdc = pdcs
                    .values()
                    .filter(|p| p.ccc == key && (Self::addressable(p) || p.initiator && p.nacked))
                    .max_by_key(|p| Self::addressable(p))
                    .map(|p| (p.id, p.peer, p.mode, Self::dst_field(p, p.start)));
                if let Some((id, dst, mode, dpdcid)) = pdc {
                    let repr = PdsCpRepr {
                        mode,
                        retx: false,
                        ar: false,
                        psn: Psn(0),
                        spdcid: Some(id),
                        dpdcid,
                        payload: CpPayload::CreditReq {
                            target_credit: target.get(),
                        },
                    };
                    ctl.push_back(CtlOut::Cp { dst, repr });
                }
            }
        });
    }

    /// Turns the receiver pacer's grants into CREDIT control packets.
    fn queue_grants(&mut self) {
        let Some(rr) = &mut self.rccc_rx else {
            return;
        };
        while let Some((key, credit)) = rr.poll_grant() {
            let Some(p) = self
                .rccc_pdc
                .get(&key)
                .and_then(|(id, _)| self.pdcs.get(id))
            else {
                continue;
            };
            let repr = PdsCpRepr {
                mode: p.mode,
                retx: false,
                ar: false,
                psn: Psn(0),
                spdcid: Some(p.id),
                dpdcid: DpdcidField::Dpdcid(p.peer_id),
                payload: CpPayload::Credit {
                    credit: credit.get(),
                },
            };
            self.ctl.push_back(CtlOut::Cp { dst: key.0, repr });
        }
    }

    /// Schedules every PDC of a CCC that has something to send (credit
    /// arrived, a pacing gap ended).
    fn schedule_ccc(&mut self, key: (IpAddr, TrafficClass)) {
        let ids: Vec<PdcId> = self
            .pdcs
            .keys()
            .filter(|id| {
                self.pdcs
                    .get(id)
                    .is_some_and(|p| p.ccc == key && p.has_tx_work())
            })
            .collect();
        for id in ids {
            self.schedule(id);
        }
    }

    /// Puts a PDC on the send round robin once (fair service per PDC).
    fn schedule(&mut self, id: PdcId) {
        if let Some(p) = self.pdcs.get_mut(&id)
            && !p.scheduled
        {
            p.scheduled = true;
            self.active.push_back(id);
        }
    }

    /// A free local PDC ID, drawn at random (`PdcTable::alloc`), or `None`
    /// when the table holds `max_pdcs`.
    fn alloc_id(&mut self) -> Option<PdcId> {
        if self.pdcs.len() >= self.config.max_pdcs {
            return None;
        }
        self.pdcs.alloc(&mut self.id_rng)
    }

    /// The initiator of a pending PDC addressed it by our PDC ID: it heard
    /// our answer, so the PDC is no longer one a forged SYN could have made.
    fn confirm(&mut self, id: PdcId) {
        if let Some(p) = self.pdcs.get_mut(&id)
            && p.pending
        {
            p.pending = false;
            self.pending_count -= 1;
        }
    }

    /// Before a SYN opens a PDC: when pending PDCs are at their bound, or
    /// the table is full and some are pending, the oldest pending PDC goes
    /// (a SYN cache's rule: a flood of forged SYNs only ever displaces
    /// other unconfirmed PDCs, and a real initiator's next packet confirms
    /// its PDC within a round trip). A PDC its initiator has confirmed is
    /// never evicted; with none pending, a full table refuses the SYN.
    fn make_room_for_pending(&mut self, now: Instant) {
        let full = self.pdcs.len() >= self.config.max_pdcs;
        if self.pending_count == 0 || !full && self.pending_count < self.config.max_pending_pdcs {
            return;
        }
        while let Some((id, at)) = self.pending.pop_front() {
            // One sending read data stays (its reader is real: it named a
            // valid key), and leaves the queue: it is no longer a
            // candidate.
            if self
                .pdcs
                .get(&id)
                .is_some_and(|p| p.pending && p.created == at && p.quiet())
            {
                // Nothing fails with it: a target has no operations of its
                // own on a quiet PDC, and its initiator, if real, gets
                // INV_DPDCID for its next packet and reopens.
                self.counters.pending_evicted += 1;
                self.remove_pdc(now, id, None);
                break;
            }
        }
    }

    /// Records a new pending PDC for eviction in age order. Entries of PDCs
    /// confirmed or closed since are swept once they outnumber the live
    /// ones (amortized O(1) per SYN; the queue stays within twice the
    /// pending PDCs, plus 64).
    fn push_pending(&mut self, id: PdcId, now: Instant) {
        self.pending.push_back((id, now));
        self.pending_count += 1;
        if self.pending.len() > 2 * self.pending_count + 64 {
            let pdcs = &self.pdcs;
            self.pending
                .retain(|(id, at)| pdcs.get(id).is_some_and(|p| p.pending && p.created == *at));
        }
    }

    fn ensure_ccc(&mut self, now: Instant, dst: IpAddr, tc: TrafficClass) -> usize {
        match self.cccs.index(&(dst, tc)) {
            Some(ix) => ix,
            None => {
                let c = Ccc::new(self.config.ccc.clone(), now, &mut self.rng);
                self.cccs.insert_new((dst, tc), c)
            }
        }
    }

    /// The index of `p`'s CCC in `cccs`, cached on the PDC after the first
    /// lookup (`None` while the CCC does not exist).
    #[inline]
    fn ccc_ix(cccs: &CccTable<Ccc>, p: &mut Pdc) -> Option<usize> {
        if let Some(ix) = p.ccc_ix {
            return Some(ix);
        }
        let ix = cccs.index(&p.ccc)?;
        p.ccc_ix = Some(ix);
        Some(ix)
    }

    // ----------------------------------------------------------------- receive

    /// Handles one received datagram (the UET bytes after UDP/entropy).
    /// Every failure is a counted drop or a NACK; nothing panics.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        meta: &RxMeta,
        bytes: &[u8],
        upper: &mut impl Upper,
    ) {
        // The common data packet first, its SES header left in place for
        // the layer above to read once (everything else: the general
        // parse below, which gives the same header decoded).
        if meta.trimmed.is_none()
            && let Some(v) = uet_wire::parse_request_view(bytes)
        {
            let ses = Some(RxSes::Standard(v.ses));
            self.on_request(now, meta, &v.pds, ses, v.payload, upper);
            return;
        }
        // And the plain ACK (the general parse gives it with no SES header).
        if meta.trimmed.is_none()
            && let Some((a, data)) = uet_wire::parse_ack_view(bytes)
        {
            self.on_ack(now, meta, &a, None, data, upper);
            return;
        }
        // Borrowed from the result, not moved out of it (a move is a
        // memcpy of the whole parsed packet).
        let parsed = uet_wire::parse_uet(bytes, meta.trimmed.is_some());
        let Ok(pkt) = &parsed else {
            self.counters.drop(DropReason::Malformed);
            return;
        };
        match &pkt.pds {
            PdsRepr::Request(r) => {
                let ses = pkt.ses.as_ref().map(RxSes::Parsed);
                self.on_request(now, meta, r, ses, pkt.payload, upper);
            }
            PdsRepr::Ack(a) => {
                let data_off = pkt.payload;
                self.on_ack(now, meta, a, pkt.ses.as_ref(), data_off, upper);
            }
            PdsRepr::Nack(n) => self.on_nack(now, meta, n, upper),
            PdsRepr::Cp(c) => self.on_cp(now, meta, c, upper),
            PdsRepr::Uud(_) => {
                if meta.trimmed.is_some() {
                    self.counters.drop(DropReason::Trimmed);
                    return;
                }
                self.counters.rx_data += 1;
                let rx = RxRequest {
                    pdc: None,
                    peer: meta.src,
                    psn: Psn(0),
                    mode: DeliveryMode::Uud,
                    ses: pkt.ses.as_ref().map(RxSes::Parsed),
                    payload: pkt.payload,
                };
                let _ = upper.on_request(now, &rx);
            }
            PdsRepr::Rudi(r) => self.on_rudi(now, meta, r, pkt.ses.as_ref(), pkt.payload, upper),
        }
    }

    fn on_rudi(
        &mut self,
        now: Instant,
        meta: &RxMeta,
        r: &PdsRudiRepr,
        ses: Option<&SesRepr>,
        payload: &[u8],
        upper: &mut impl Upper,
    ) {
        match r.kind {
            RudiKind::Request => {
                if let Some(t) = meta.trimmed {
                    self.counters.drop(DropReason::Trimmed);
                    let code = match t {
                        Trim::Trimmed => NackCode::Trimmed,
                        Trim::LastHop => NackCode::TrimmedLastHop,
                    };
                    self.nack_rudi(meta, r, code);
                    return;
                }
                // At-least-once: an idempotent request is executed again
                // when it arrives again (BRIEF, §2.11).
                self.counters.rx_data += 1;
                let rx = RxRequest {
                    pdc: None,
                    peer: meta.src,
                    psn: Psn(r.pkt_id),
                    mode: DeliveryMode::Rudi,
                    ses: ses.map(RxSes::Parsed),
                    payload,
                };
                let reply = upper.on_request(now, &rx);
                let resp = match reply {
                    Reply::Response { response, .. } => Some(response),
                    Reply::None => None,
                    // Refused: a NACK naming the packet ID (`nt` = 1, §2.8),
                    // never a RUDI response, which would read as done.
                    Reply::Reject(code) => {
                        self.counters.drop(DropReason::Refused);
                        self.nack_rudi(meta, r, code);
                        return;
                    }
                };
                self.rudi.replies.push_back((
                    meta.src,
                    meta.ev,
                    meta.ecn == Ecn::Ce,
                    r.pkt_id,
                    resp,
                ));
            }
            RudiKind::Response { .. } => {
                self.counters.rx_acks += 1;
                match self.rudi.inflight.get(&r.pkt_id) {
                    Some(tx) if tx.dst == meta.src => {}
                    _ => {
                        self.counters.drop(DropReason::StrayFeedback);
                        return;
                    }
                }
                if let Some(tx) = self.rudi.inflight.remove(&r.pkt_id) {
                    if let Some(s) = ses {
                        upper.on_response(now, tx.pkt, s, payload);
                    }
                    upper.on_acked(now, tx.pkt);
                }
            }
        }
    }

    /// A NACK for RUDI request `r`, naming its packet ID (`nt` = 1, §2.8).
    fn nack_rudi(&mut self, meta: &RxMeta, r: &PdsRudiRepr, code: NackCode) {
        let target = NackTarget::PktId(r.pkt_id);
        self.nack_to(meta, target, r.retx, code, None, None, 0);
    }

    fn nack(
        &mut self,
        meta: &RxMeta,
        code: NackCode,
        psn: Psn,
        spdcid: Option<PdcId>,
        dpdcid: Option<PdcId>,
        payload: u32,
    ) {
        let target = NackTarget::Psn(psn);
        self.nack_to(meta, target, false, code, spdcid, dpdcid, payload);
    }

    /// Queues a NACK back to the sender of `meta`'s packet.
    #[allow(clippy::too_many_arguments)]
    fn nack_to(
        &mut self,
        meta: &RxMeta,
        target: NackTarget,
        retx: bool,
        code: NackCode,
        spdcid: Option<PdcId>,
        dpdcid: Option<PdcId>,
        payload: u32,
    ) {
        self.ctl.push_back(CtlOut::Nack {
            dst: meta.src,
            ev: meta.ev,
            repr: PdsNackRepr {
                next_hdr: NextHeader::None,
                m: meta.ecn == Ecn::Ce,
                retx,
                target,
                code,
                vendor_code: 0,
                spdcid,
                dpdcid,
                payload,
                ccx: None,
            },
        });
    }

    /// Finds or creates the PDC a request or CP belongs to (§2.12 target
    /// lookup by {src, spdcid}; established PDCs by our own ID).
    #[inline]
    fn lookup_for_rx(
        &mut self,
        now: Instant,
        meta: &RxMeta,
        spdcid: Option<PdcId>,
        dpdcid: DpdcidField,
        psn: Psn,
        mode: ReliableMode,
    ) -> Option<PdcId> {
        // The usual case, decided here without the call: an established
        // PDC addressed by our ID, from its peer's PDC, in its mode (what
        // the full lookup accepts with nothing to set up or refuse).
        if let (Some(sp), DpdcidField::Dpdcid(Some(id))) = (spdcid, dpdcid)
            && let Some(p) = self.pdcs.get_mut(&id)
            && p.peer == meta.src
            && p.peer_id == Some(sp)
            && p.mode == mode
            && !p.pending
        {
            p.last_activity = now;
            return Some(id);
        }
        self.lookup_for_rx_full(now, meta, spdcid, dpdcid, psn, mode)
    }

    /// [`Pds::lookup_for_rx`] for every case.
    fn lookup_for_rx_full(
        &mut self,
        now: Instant,
        meta: &RxMeta,
        spdcid: Option<PdcId>,
        dpdcid: DpdcidField,
        psn: Psn,
        mode: ReliableMode,
    ) -> Option<PdcId> {
        let Some(spdcid) = spdcid else {
            self.counters.drop(DropReason::Malformed);
            return None;
        };
        let id = match dpdcid {
            DpdcidField::Dpdcid(Some(id)) => match self.pdcs.get(&id) {
                Some(p) if p.peer == meta.src && p.peer_id.is_none_or(|x| x == spdcid) => {
                    if p.pending {
                        self.confirm(id);
                    }
                    id
                }
                _ => {
                    self.counters.drop(DropReason::UnknownPdc);
                    self.nack(meta, NackCode::InvDpdcid, psn, None, Some(spdcid), 0);
                    return None;
                }
            },
            DpdcidField::Dpdcid(None) => {
                self.counters.drop(DropReason::UnknownPdc);
                self.nack(meta, NackCode::InvDpdcid, psn, None, Some(spdcid), 0);
                return None;
            }
            DpdcidField::Syn { psn_offset, .. } => match self.by_peer.get(&(meta.src, spdcid)) {
                // A SYN of another Start_PSN for a PDC its initiator never
                // confirmed: either the initiator reopened the PDC (its peer
                // refused it as unknown) or the PDC was opened by a forged
                // SYN. The newer SYN takes the place; a real initiator that
                // loses it this way gets INV_DPDCID and reopens in turn. A
                // confirmed PDC answers INVALID_SYN, which its initiator
                // drops unless the PSN is one it sent.
                Some(&id)
                    if self.pdcs.get(&id).is_some_and(|p| {
                        p.pending
                            && p.quiet()
                            && p.rx
                                .as_ref()
                                .is_some_and(|rx| rx.start != psn.sub(u32::from(psn_offset.get())))
                    }) =>
                {
                    self.counters.pending_evicted += 1;
                    self.remove_pdc(now, id, None);
                    return self.lookup_for_rx_full(now, meta, Some(spdcid), dpdcid, psn, mode);
                }
                Some(id) => *id,
                None => {
                    self.make_room_for_pending(now);
                    let Some(id) = self.alloc_id() else {
                        self.counters.drop(DropReason::NoPdcAvailable);
                        self.nack(meta, NackCode::NoPdcAvail, psn, None, Some(spdcid), 0);
                        return None;
                    };
                    let tc = TrafficClass::from_masked(0);
                    let pdc = Pdc {
                        id,
                        peer: meta.src,
                        peer_id: Some(spdcid),
                        initiator: false,
                        mode,
                        key: None,
                        ccc: (meta.src, tc),
                        ccc_ix: None,
                        // The return direction (target → initiator, e.g.
                        // read data) starts at the initiator's Start_PSN,
                        // which the SYN gives us: the initiator then knows
                        // where our PSN space starts without a SYN of ours,
                        // and we address it by its PDC ID from the first
                        // packet [I: the public sources do not say how the
                        // return direction's start is chosen].
                        start: match dpdcid {
                            DpdcidField::Syn { psn_offset, .. } => {
                                psn.sub(u32::from(psn_offset.get()))
                            }
                            DpdcidField::Dpdcid(_) => psn,
                        },
                        established: false,
                        ledger: TxLedger::new(Psn(0)),
                        queue: PktQueue::new(),
                        clear_needed: false,
                        forced_at: None,
                        clear_sent: None,
                        closing: false,
                        rod_ev: meta.ev,
                        rx: None,
                        last_activity: now,
                        close_requested: false,
                        nacked: false,
                        scheduled: false,
                        holds: 0,
                        probe: None,
                        rcvd: RcvdBytesTracker::new(),
                        tail: TailProbe::default(),
                        pending: true,
                        created: now,
                        reopens: 0,
                        hold_until: None,
                    };
                    let start = pdc.start;
                    let mut pdc = pdc;
                    pdc.ledger = TxLedger::new(start);
                    self.pdcs.insert(id, pdc);
                    self.push_pending(id, now);
                    self.by_peer.insert((meta.src, spdcid), id);
                    self.counters.pdcs_opened += 1;
                    self.events.push_back(PdsEvent::PdcOpened {
                        pdc: id,
                        peer: meta.src,
                        initiator: false,
                    });
                    id
                }
            },
        };
        let p = self.pdcs.get_mut(&id)?;
        if p.mode != mode {
            self.counters.drop(DropReason::ModeMismatch);
            let pid = p.id;
            self.nack(
                meta,
                NackCode::PdcModeMismatch,
                psn,
                Some(pid),
                Some(spdcid),
                0,
            );
            return None;
        }
        if p.peer_id.is_none() {
            p.peer_id = Some(spdcid);
            self.by_peer.insert((meta.src, spdcid), id);
        }
        p.last_activity = now;
        Some(id)
    }

    /// Makes sure the PDC has its receive half; validates SYN start PSNs.
    #[inline]
    fn rx_half(
        p: &mut Pdc,
        dpdcid: DpdcidField,
        psn: Psn,
        range: u32,
    ) -> Result<&mut RxHalf, NackCode> {
        let syn_start = match dpdcid {
            DpdcidField::Syn { psn_offset, .. } => Some(psn.sub(u32::from(psn_offset.get()))),
            DpdcidField::Dpdcid(_) => None,
        };
        if p.rx.is_none() {
            let start = match syn_start {
                Some(s) => s,
                // Return-direction traffic on our own PDC starts at our
                // Start_PSN (the target mirrors it).
                None if p.initiator => p.start,
                // A non-SYN packet for a direction we never saw open.
                None => return Err(NackCode::PdcHdrMismatch),
            };
            p.rx = Some(RxHalf::new(start, range));
        }
        let rx = p.rx.as_mut().ok_or(NackCode::PdcHdrMismatch)?;
        if let Some(start) = syn_start
            && start != rx.start
        {
            return Err(NackCode::InvalidSyn);
        }
        Ok(rx)
    }

    fn on_request(
        &mut self,
        now: Instant,
        meta: &RxMeta,
        r: &PdsRequestRepr,
        ses: Option<RxSes<'_>>,
        payload: &[u8],
        upper: &mut impl Upper,
    ) {
        let Some(id) = self.lookup_for_rx(now, meta, r.spdcid, r.dpdcid, r.psn, r.mode) else {
            return;
        };
        let range = self.config.mp_range;
        let trigger_bytes = self.config.ack_gen_trigger;
        let min_add = self.config.ack_gen_min_pkt_add;
        let Some(p) = self.pdcs.get_mut(&id) else {
            return;
        };
        let (local, peer) = (p.id, p.peer_id);
        let target_closing = p.closing && !p.initiator;
        let rx = match Self::rx_half(p, r.dpdcid, r.psn, range) {
            Ok(rx) => rx,
            Err(code) => {
                self.counters.drop(if code == NackCode::InvalidSyn {
                    DropReason::InvalidSyn
                } else {
                    DropReason::UnknownPdc
                });
                self.nack(meta, code, r.psn, Some(local), peer, 0);
                return;
            }
        };
        if target_closing {
            self.counters.drop(DropReason::Closing);
            self.nack(meta, NackCode::Closing, r.psn, Some(local), peer, 0);
            return;
        }
        // CLEAR_PSN rides on every request (§3).
        rx.clear_to(r.clear_psn());
        // RCCC (§5.3): a *_CC_REQ names its source CCC and advertises its
        // backlog; last-hop trims are RCCC's signal too.
        // A PDC carries one traffic class, so one source CCC: the first
        // *_CC_REQ names it, and a later one naming another `ccc_id` is a
        // peer violation whose CC state is ignored (the data is still
        // delivered). This keeps the RCCC receiver's table within one
        // entry per PDC, and every entry goes with its PDCs.
        let rccc_key = r.cc.map(|cc| (meta.src, cc.ccc_id.get()));
        if let Some(key) = rccc_key
            && rx.rccc.is_some_and(|k| k != key)
        {
            self.counters.drop(DropReason::CccMismatch);
        } else if let (Some(cc), Some(key), Some(rr)) = (r.cc, rccc_key, self.rccc_rx.as_mut()) {
            // Trimmed before the last hop: NSCC's signal, not RCCC's (§7);
            // the receiver only updates the demand from it.
            let (bytes, last_hop) = match meta.trimmed {
                None => (u64::from(meta.nominal_size), false),
                Some(Trim::LastHop) => (u64::from(meta.nominal_size), true),
                Some(Trim::Trimmed) => (0, false),
            };
            // A first transmission with SYN set left before the source heard
            // anything from us: speculative, on its initial window (seed:
            // SYN stays set until the first ACK_CC). Its bytes count against
            // the sender's share (`RcccReceiver`, "Fair share").
            let arrival = if r.retx {
                Arrival::Retransmission
            } else if r.syn() {
                Arrival::Speculative
            } else {
                Arrival::Paced
            };
            rr.on_data(now, key, cc.credit_target, bytes, last_hop, arrival);
            let e = self.rccc_pdc.entry(key).or_insert((local, 0));
            e.0 = local;
            if rx.rccc.is_none() {
                rx.rccc = Some(key);
                e.1 += 1;
            }
        }
        if let Some(t) = meta.trimmed {
            // §7: NACK the trimmed packet so it is resent at once.
            self.counters.drop(DropReason::Trimmed);
            let code = match t {
                Trim::Trimmed => NackCode::Trimmed,
                Trim::LastHop => NackCode::TrimmedLastHop,
            };
            self.nack(meta, code, r.psn, Some(local), peer, 0);
            return;
        }
        let outcome = match r.mode {
            ReliableMode::Rud => rx.win.classify(r.psn),
            ReliableMode::Rod => {
                let c = rx.win.classify(r.psn);
                if c == RxOutcome::New && r.psn != rx.win.base() {
                    // Go-back-N: out-of-order ROD packets are dropped; one
                    // NACK per gap names the expected PSN (§3).
                    self.counters.drop(DropReason::RodOutOfOrder);
                    if !rx.rod_nacked {
                        rx.rod_nacked = true;
                        let expected = rx.win.base();
                        self.nack(meta, NackCode::RodOoo, r.psn, Some(local), peer, expected.0);
                    }
                    return;
                }
                c
            }
        };
        match outcome {
            RxOutcome::Beyond => {
                self.counters.drop(DropReason::OutOfWindow);
                let code = if r.syn() {
                    NackCode::InvalidSyn
                } else {
                    NackCode::PsnOorWindow
                };
                self.nack(meta, code, r.psn, Some(local), peer, 0);
                return;
            }
            RxOutcome::Stale => {
                self.counters.drop(DropReason::Stale);
                return;
            }
            RxOutcome::Duplicate => {
                // Re-send the stored guaranteed response, or ACK with the
                // default response (§3).
                self.counters.drop(DropReason::Duplicate);
                let resp = rx.gtd.get(&r.psn.0).copied().unwrap_or(SesResponseRepr {
                    list: ListKind::Expected,
                    opcode: ResponseOpcode::DefaultResponse,
                    return_code: ReturnCode::Null,
                    message_id: MessageId::from_masked(0),
                    ri_generation: RiGeneration::from_masked(0),
                    job_id: JobId::from_masked(0),
                    modified_length: 0,
                });
                rx.responses.push_back((r.psn, resp));
                rx.trigger = r.psn;
                rx.ev = meta.ev;
                rx.retx = r.retx;
                rx.due = AckDue::Now;
                self.acks.push_back(id);
                return;
            }
            RxOutcome::New => {}
        }
        let mode = match r.mode {
            ReliableMode::Rud => DeliveryMode::Rud,
            ReliableMode::Rod => DeliveryMode::Rod,
        };
        let req = RxRequest {
            pdc: Some(local),
            peer: meta.src,
            psn: r.psn,
            mode,
            ses,
            payload,
        };
        // The layer above sees the packet before its PSN is recorded, so a
        // packet it cannot take (no message state) stays unreceived and the
        // initiator resends it after the NACK.
        let reply = upper.on_request(now, &req);
        if let Reply::Reject(code) = reply {
            self.counters.drop(DropReason::Refused);
            self.nack(meta, code, r.psn, Some(local), peer, 0);
            return;
        }
        // (`upper` cannot reach the PDC: its receive half is still `rx`.)
        rx.win.receive(r.psn);
        rx.rod_nacked = false;
        rx.rcvd_bytes += u64::from(meta.nominal_size);
        if rx.win.has_gap() {
            rx.ooo_count = rx.ooo_count.saturating_add(1);
        }
        self.counters.rx_data += 1;
        rx.ev = meta.ev;
        rx.trigger = r.psn;
        rx.trigger_at = now;
        rx.retx = r.retx;
        let ce = meta.ecn == Ecn::Ce;
        self.counters.rx_ce += u64::from(ce);
        rx.ecn |= ce;
        rx.ack_bytes = rx
            .ack_bytes
            .saturating_add((payload.len() as u32).max(min_add));
        let mut now_ack =
            r.ar || r.syn() || ce || rx.win.has_gap() || rx.ack_bytes >= trigger_bytes;
        if let Reply::Response {
            response,
            guaranteed,
        } = reply
        {
            if guaranteed {
                rx.gtd.insert(r.psn.0, response);
            }
            rx.responses.push_back((r.psn, response));
            now_ack = true;
        }
        if now_ack {
            if rx.due != AckDue::Now {
                rx.due = AckDue::Now;
                self.acks.push_back(id);
            }
        } else if rx.due == AckDue::No {
            rx.due = AckDue::At(now + self.config.ack_delay);
        }
    }

    fn on_ack(
        &mut self,
        now: Instant,
        meta: &RxMeta,
        a: &PdsAckRepr,
        ses: Option<&SesRepr>,
        data: &[u8],
        upper: &mut impl Upper,
    ) {
        let Some(id) = a.dpdcid else {
            self.counters.drop(DropReason::StrayFeedback);
            return;
        };
        let Some(p) = self.pdcs.get_mut(&id) else {
            self.counters.drop(DropReason::StrayFeedback);
            return;
        };
        if p.peer != meta.src {
            self.counters.drop(DropReason::StrayFeedback);
            return;
        }
        self.counters.rx_acks += 1;
        p.last_activity = now;
        if p.pending && a.spdcid == p.peer_id {
            // Return traffic acknowledged by the initiator's PDC.
            p.pending = false;
            self.pending_count -= 1;
        }
        let establishing = !p.established;
        if !p.established
            && let Some(sp) = a.spdcid
        {
            if p.peer_id.is_none() {
                p.peer_id = Some(sp);
                self.by_peer.insert((p.peer, sp), id);
            }
            p.established = true;
            p.reopens = 0;
            if p.initiator {
                self.events.push_back(PdsEvent::PdcEstablished { pdc: id });
            }
        }
        let mut tail_answer = None;
        if let PdsAckPsnField::ProbeOpaque(o) = a.ack_psn_offset {
            if let Some((want, sent)) = p.probe
                && want == o
            {
                p.probe = None;
                self.events.push_back(PdsEvent::ProbeAnswered {
                    pdc: id,
                    rtt: now - sent,
                });
            }
            tail_answer = p.tail.answered(now, o);
        }
        let cack = a.cack_psn;
        // An ACK for PSNs never sent is a peer violation: drop it whole.
        if cack.diff(p.ledger.next_psn()) >= 0 || cack.diff(p.ledger.una()) < -(1 << 30) {
            self.counters.drop(DropReason::BogusAck);
            return;
        }
        let mut acked_bytes = 0u64;
        let mut acked_pkts = 0u32;
        // Of those, packets that were waiting for retransmission (`CcShare`).
        let mut cancelled_bytes = 0u64;
        let mut cancelled_pkts = 0u32;
        let mut tx_time: Option<Instant> = None;
        // Send time of the most recently sent packet this ACK delivered.
        let mut newest_delivered: Option<Instant> = None;
        // Send time of the newest packet this ACK delivered whose copy is
        // known: the RTT sample and RACK's reference. A packet sent once,
        // or, on the ACK that establishes the PDC, its trigger resent once
        // when the ACK says it answers a retransmission (`calc_rtt`'s rule,
        // §5.2). That recovers a window lost whole before the PDC was
        // established: the RTO resends its first packet, and the answer
        // condemns the rest at once instead of one RTO each.
        // Any other resent packet may have arrived by either copy: taking
        // its resend as delivered when a delayed first copy was what
        // arrived condemns everything sent in between. (Tried: on the veth
        // lab at 1 % loss that fed on itself, every false loss a new
        // resend, into 17 times the retransmissions.) Even a known resend
        // is evidence only once per PDC: on the lab's reordering links each
        // such resend condemned packets merely delayed, whose resends
        // condemned more (1 % loss: 165 k retransmissions instead of 8 k).
        let mut rtt_from: Option<Instant> = None;
        let trigger = if establishing && a.retx {
            a.ack_psn()
        } else {
            None
        };
        let mut note_tx = |e: &TxEntry<TxItem>| {
            if e.rtx_count == 0 || (e.rtx_count == 1 && trigger == Some(e.psn)) {
                rtt_from = Some(rtt_from.map_or(e.sent_at, |t| t.max(e.sent_at)));
            }
        };
        // EVs of the packets this ACK newly acknowledges (§6 feedback).
        let mut good_evs = core::mem::take(&mut self.scratch_evs);
        good_evs.clear();
        let mut rtx_count = 0;
        let cfg = &self.config;
        let mut closed = false;
        // The SES response, if any, answers ack_psn (§2.6); whether to
        // CLEAR is decided from `req` below.
        if let Some(resp) = ses
            && let Some(ack_psn) = a.ack_psn()
            && let Some(e) = p.ledger.get_mut(ack_psn)
            && let TxItem::Data(pkt) = e.token
        {
            upper.on_response(now, pkt, resp, data);
            if !e.sacked {
                note_tx(e);
                if let CcShare::Rtx(b) = CcShare::of(cfg, e) {
                    cancelled_bytes += b;
                    cancelled_pkts += 1;
                }
                e.sacked = true;
                e.needs_rtx = false;
                e.rto_forced = false;
                acked_bytes += u64::from(cfg.nominal(pkt.len));
                acked_pkts += 1;
                tx_time = Some(e.sent_at);
                rtx_count = e.rtx_count;
                upper.on_acked(now, pkt);
            }
        }
        if let PdsAckExt::Cc(cc) = a.ext {
            let base = cack.offset(cc.sack_psn_offset);
            p.ledger.ack_selective(base, cc.sack_bitmap, |e| {
                newest_delivered = Some(newest_delivered.map_or(e.sent_at, |t| t.max(e.sent_at)));
                note_tx(e);
                good_evs.push(e.ev);
                if let CcShare::Rtx(b) = CcShare::of(cfg, e) {
                    cancelled_bytes += b;
                    cancelled_pkts += 1;
                }
                if let TxItem::Data(pkt) = e.token {
                    acked_bytes += u64::from(cfg.nominal(pkt.len));
                    acked_pkts += 1;
                    tx_time = Some(e.sent_at);
                    rtx_count = e.rtx_count;
                    upper.on_acked(now, pkt);
                }
            });
        }
        let mut acked = core::mem::take(&mut self.scratch_acked);
        acked.clear();
        p.ledger.ack_cumulative(cack, |e| match e.token {
            TxItem::Data(pkt) => {
                if let CcShare::Rtx(b) = CcShare::of(cfg, e) {
                    cancelled_bytes += b;
                    cancelled_pkts += 1;
                }
                if !e.sacked {
                    note_tx(e);
                    good_evs.push(e.ev);
                    newest_delivered =
                        Some(newest_delivered.map_or(e.sent_at, |t| t.max(e.sent_at)));
                    acked_bytes += u64::from(cfg.nominal(pkt.len));
                    acked_pkts += 1;
                    tx_time = Some(e.sent_at);
                    rtx_count = e.rtx_count;
                    acked.push(pkt);
                }
            }
            TxItem::Close => closed = true,
        });
        if !acked.is_empty() {
            upper.on_acked_all(now, &acked);
        }
        self.scratch_acked = acked;
        if let Some(t) = rtt_from {
            p.ledger.note_delivered_once(t);
            p.tail.on_delivery(now, t);
        }
        if newest_delivered.is_some() {
            p.tail.on_progress(now);
        }
        // Loss inference (the sender-side OnInferredLoss of §5.1): a packet
        // is presumed lost and resent at once, instead of waiting for its
        // RTO, when
        // * it is `dupthresh` or more PSNs behind the highest delivered one
        //   (SACK), or
        // * with `rack_window`, a packet sent once was delivered that left
        //   at least that long after it (RACK's time rule, RFC 8985), or
        // * it left before a tail probe (`tail_probe.rs`) whose answer
        //   does not acknowledge it. This finds what the others cannot:
        //   the tail of a window lost in a burst, which nothing sent later
        //   follows while the window's earlier losses are resent first and
        //   the lost tail still holds the window or the credit.
        // Either way it must have been sent before the newest delivered
        // packet or the probe (by `reorder_window`), so a fresh
        // retransmission is not marked again.
        let mut inferred = core::mem::take(&mut self.scratch_lost);
        inferred.clear();
        let mut probe_lost = 0;
        let evidence = newest_delivered.max(tail_answer.map(|t| t.sent_at));
        if let Some(mut latest) = evidence {
            let reo = self.config.reorder_window;
            let dupthresh = self.config.dupthresh;
            // Highest PSN known delivered (SACKed or cumulatively ACKed).
            let highest = p
                .ledger
                .iter()
                .rev()
                .find(|e| e.sacked)
                .map_or(cack, |e| e.psn);
            // RACK's reference: the newest packet sent once known delivered.
            let once = p.ledger.delivered_once();
            if let Some(at) = once {
                latest = latest.max(at);
            }
            let resent_hi = p.ledger.resent_hi();
            // The answer reports only the PSNs its cumulative ACK and SACK
            // bitmap cover: it says nothing of a packet past the bitmap.
            let reported = match a.ext {
                PdsAckExt::Cc(cc) => cack.offset(cc.sack_psn_offset).add(63),
                _ => cack,
            };
            let by_probe = |e: &TxEntry<TxItem>| {
                tail_answer.is_some_and(|t| t.next_tx.wrapping_sub(e.tx_seq) as i32 > 0)
                    && !e.psn.is_after(reported)
            };
            let rack = self.config.rack_window;
            let by_order = |e: &TxEntry<TxItem>| {
                highest.diff(e.psn) >= dupthresh as i32
                    || rack.zip(once).is_some_and(|(w, at)| e.sent_at + w <= at)
            };
            let behind = |e: &TxEntry<TxItem>| by_order(e) || by_probe(e);
            // Entries sent once have growing PSNs and transmission numbers:
            // past the highest PSN ever resent, the first one not behind
            // ends the search. In the usual case (the oldest entry is not
            // behind and nothing was resent) the ledger is not even
            // borrowed for writing.
            let done =
                |e: &TxEntry<TxItem>| !behind(e) && resent_hi.is_none_or(|h| e.psn.is_after(h));
            if p.ledger.iter().next().is_some_and(|e| !done(e)) {
                for e in p.ledger.iter_mut() {
                    if done(e) {
                        break;
                    }
                    if !behind(e) {
                        continue;
                    }
                    // A packet never resent was sent no later than any higher
                    // PSN; a resent one must predate the newest delivery, or
                    // its retransmission is still on the way.
                    let old_enough = if e.rtx_count == 0 {
                        e.sent_at + reo <= latest
                    } else {
                        e.sent_at + reo < latest
                    };
                    // Only packets counted in inflight can be declared lost.
                    if old_enough && let CcShare::Inflight(b) = CcShare::of(cfg, e) {
                        if !by_order(e) {
                            probe_lost += 1;
                        }
                        e.needs_rtx = true;
                        inferred.push((b, e.ev));
                    }
                }
            }
        }
        // A probe answer that condemns packets of a PDC the target has never
        // acknowledged any data of (typically the SYN-addressed probe whose
        // answer establishes it): the target had never heard of this
        // source's data, so neither had its RCCC receiver, which grants only
        // to sources in its table (and a CREDIT_REQ cannot enter one: it
        // names no CCC). As on an RTO, the oldest lost packet passes closed
        // congestion control; its CC header puts the source in the table,
        // and the rest follow on the credit it earns. Without it nothing
        // would move: every packet waits for retransmission, so none has
        // an RTO running. Not only on the establishing answer: a late answer
        // to an earlier probe may establish the PDC and condemn nothing,
        // leaving the condemning to the next probe's, and the forced packet
        // may be lost again and condemned by the next probe's answer (1 Gb/s
        // 32:1 RCCC with a jittered start: four senders of seed 3 waited for
        // credit for good while only the establishing answer forced). Each
        // answer forces one packet; the PTO paces the probes.
        if probe_lost > 0
            && acked_pkts == 0
            && p.ledger.una() == p.start
            && !p.ledger.iter().any(|e| e.sacked)
            && let Some(e) = p.ledger.iter_mut().find(|e| e.needs_rtx)
        {
            e.rto_forced = true;
            p.forced_at = Some(now);
        }
        self.counters.tail_probe_lost += probe_lost;
        if !inferred.is_empty() {
            self.counters.sack_inferred += inferred.len() as u64;
        }
        match a.req {
            PdsAckRequest::Clear => {
                p.clear_needed = p.clear_sent.is_none_or(|c| p.clear_psn().is_after(c));
            }
            PdsAckRequest::Close => p.close_requested = true,
            _ => {}
        }
        let reschedule = p.clear_needed;
        let ccc_ix = Self::ccc_ix(&self.cccs, p);
        // CC feedback: NSCC state (rcvd_bytes → newly received bytes,
        // service time, DFC) or CREDIT state (RCCC cumulative credit), §2.7.
        let (rcv_pend, restore, newly, service, credit) = match a.ext {
            PdsAckExt::Cc(PdsAckCc {
                state: PdsAckState::Cc(AckCcState::Nscc(n)),
                ..
            }) => (
                n.rcv_cwnd_pend.get(),
                n.rc,
                Some(p.rcvd.advance(n.rcvd_bytes)),
                service_time_from_wire(n.service_time),
                None,
            ),
            PdsAckExt::Cc(PdsAckCc {
                state: PdsAckState::Cc(AckCcState::Credit(c)),
                ..
            }) => (0, false, None, Duration::ZERO, Some(c.credit)),
            _ => (0, false, None, Duration::ZERO, None),
        };
        if reschedule {
            self.schedule(id);
        }
        if !a.m
            && !good_evs.is_empty()
            && let Some(c) = ccc_ix.and_then(|ix| self.cccs.at_mut(ix))
        {
            c.on_evs_good(now, &good_evs);
        }
        if acked_pkts > 0
            && let Some(c) = ccc_ix.and_then(|ix| self.cccs.at_mut(ix))
        {
            c.on_ack(
                now,
                &AckEvent {
                    acked_bytes,
                    acked_pkts,
                    rtx_cancelled_bytes: cancelled_bytes,
                    rtx_cancelled_pkts: cancelled_pkts,
                    newly_rcvd_bytes: newly,
                    ev: meta.ev,
                    ecn_marked: a.m,
                    tx_time: tx_time.unwrap_or(now),
                    rtx_count,
                    retx: a.retx,
                    service_time: service,
                    rcv_cwnd_pend: rcv_pend,
                    restore_cwnd: restore,
                    credit,
                },
            );
            self.schedule(id);
        }
        if !inferred.is_empty() {
            if let Some(c) = ccc_ix.and_then(|ix| self.cccs.at_mut(ix)) {
                for (bytes, ev) in &inferred {
                    c.on_inferred_loss(now, *bytes, Some(*ev));
                }
            }
            self.schedule(id);
        }
        self.scratch_evs = good_evs;
        self.scratch_lost = inferred;
        if closed {
            self.remove_pdc(now, id, None);
        }
    }

    fn on_nack(&mut self, now: Instant, meta: &RxMeta, n: &PdsNackRepr, upper: &mut impl Upper) {
        self.counters.rx_nacks += 1;
        self.counters.rx_nack_codes.count(n.code.code());
        if let NackTarget::PktId(pid) = n.target {
            let max = self.config.max_nack_retx;
            let action = n.code.sender_action();
            let Some(tx) = self
                .rudi
                .inflight
                .get_mut(&pid)
                .filter(|t| t.dst == meta.src)
            else {
                self.counters.drop(DropReason::StrayFeedback);
                return;
            };
            if action == NackAction::Retransmit && tx.rtx_count < max {
                tx.due = true;
            } else if action != NackAction::Drop
                && let Some(tx) = self.rudi.inflight.remove(&pid)
            {
                upper.on_failed(now, tx.pkt, PdsError::Nack(n.code));
            }
            return;
        }
        let (Some(id), NackTarget::Psn(psn)) = (n.dpdcid, n.target) else {
            self.counters.drop(DropReason::StrayFeedback);
            return;
        };
        let max_nack = self.config.max_nack_retx;
        let Some(p) = self.pdcs.get_mut(&id) else {
            self.counters.drop(DropReason::StrayFeedback);
            return;
        };
        if p.peer != meta.src {
            self.counters.drop(DropReason::StrayFeedback);
            return;
        }
        // A NACK names a packet this PDC sent and has not seen acknowledged
        // (`nack_psn` is the PSN that triggered it, §2.8; a Probe CP takes
        // the next PSN, §2.10), and comes from the peer's PDC once we know
        // it. Anything else is a blind or stale sender: acting on it would
        // let anyone who knows our address close or stall our PDCs, so it
        // is a counted drop — the check TCP makes of a RST's sequence
        // number (RFC 5961 §3).
        if psn.diff(p.ledger.una()) < 0
            || psn.diff(p.ledger.next_psn()) > 0
            || n.spdcid
                .is_some_and(|sp| p.peer_id.is_some_and(|x| x != sp))
        {
            self.counters.drop(DropReason::Unverified);
            return;
        }
        p.last_activity = now;
        p.nacked = true;
        let key = p.ccc;
        match n.code.sender_action() {
            NackAction::Retransmit | NackAction::ReDrive => {
                let mut lost = Vec::new();
                let mut marked = false;
                let mut exhausted = false;
                if n.code == NackCode::RodOoo {
                    // Go back to the expected PSN the target names.
                    let from = Psn(n.payload);
                    for e in p.ledger.iter_mut() {
                        if !e.psn.is_before(from) && !e.sacked && !e.needs_rtx {
                            if let CcShare::Inflight(b) = CcShare::of(&self.config, e) {
                                lost.push((b, e.ev, e.sent_at, e.rtx_count));
                            }
                            e.needs_rtx = true;
                            marked = true;
                        }
                    }
                } else if let Some(e) = p.ledger.get_mut(psn)
                    && !e.sacked
                    && !e.needs_rtx
                {
                    // Trim NACKs do not count against Max_NACK_Retx_Cnt
                    // [I]: a trimmed packet reached the destination's last
                    // switches, so repeated trims are congestion (the CMS's
                    // job), not a broken path; the RTO budget still bounds
                    // dead paths. The spec's counter default is a gap (§10).
                    if !matches!(n.code, NackCode::Trimmed | NackCode::TrimmedLastHop) {
                        e.nack_count += 1;
                    }
                    exhausted = e.nack_count > max_nack;
                    if let CcShare::Inflight(b) = CcShare::of(&self.config, e) {
                        lost.push((b, e.ev, e.sent_at, e.rtx_count));
                    }
                    e.needs_rtx = true;
                    marked = true;
                }
                if exhausted {
                    self.fail_pdc(now, id, PdsError::Nack(n.code), upper);
                    return;
                }
                // The peer lacked a resource (a PDC, message state, a
                // buffer): the same packet sent at once meets the same
                // shortage, and a NACK/resend storm follows. Resend after
                // RTO_INIT_TIME, doubling with each refusal of the packet
                // up to 64 × (§3 "Loss recovery" backoff), so
                // Max_NACK_Retx_Cnt refusals span seconds, not
                // milliseconds.
                if marked && n.code.is_resource_shortage() {
                    let refusals = p.ledger.get(psn).map_or(1, |e| e.nack_count.max(1));
                    let until = now + self.config.rto((refusals - 1).min(6));
                    p.hold_until = Some(p.hold_until.map_or(until, |h| h.max(until)));
                    self.counters.nack_backoffs += 1;
                }
                if marked {
                    self.schedule(id);
                }
                if let Some(c) = self.cccs.get_mut(&key) {
                    for (bytes, ev, tx_time, rtx_count) in lost {
                        c.on_nack(
                            now,
                            &NackEvent {
                                bytes,
                                ev,
                                ecn_marked: n.m,
                                trimmed: n.code == NackCode::Trimmed,
                                trimmed_last_hop: n.code == NackCode::TrimmedLastHop,
                                tx_time,
                                rtx_count,
                                retx: n.retx,
                            },
                        );
                    }
                }
            }
            // The peer does not know the PDC (it restarted, or forgot an
            // unconfirmed PDC): open it afresh and send again what it never
            // had (`reopen`).
            NackAction::Close
                if n.code == NackCode::InvDpdcid && p.initiator && p.reopens < MAX_REOPENS =>
            {
                self.reopen(now, id, n.code, upper);
            }
            NackAction::Close => self.fail_pdc(now, id, PdsError::Nack(n.code), upper),
            NackAction::Drop => {}
        }
    }

    /// Reopens an initiator's PDC that its peer refused as unknown
    /// (INV_DPDCID): a new Start_PSN and SYN again, with the same local ID,
    /// so the layer above sees nothing change. A message none of whose
    /// packets the old PDC saw acknowledged is sent again whole: the peer
    /// that answers now has no trace of it (a write is placed again, which
    /// is idempotent). A message part of which was acknowledged reached the
    /// peer's previous life; its outcome cannot be known, so it fails
    /// (`PdsError::Nack`). Guaranteed responses and CLEAR state belonged to
    /// the old PDC and go with it (§3). A closing PDC, or one with nothing
    /// left to send, is simply forgotten.
    fn reopen(&mut self, now: Instant, id: PdcId, code: NackCode, upper: &mut impl Upper) {
        let Some(p) = self.pdcs.get_mut(&id) else {
            return;
        };
        if p.closing {
            self.remove_pdc(now, id, None);
            return;
        }
        // Tokens of messages that cannot go again whole: one of their
        // packets was acknowledged (SACKed, or cumulatively before their
        // first packet in the ledger or the queue).
        let mut partial: Vec<u64> = Vec::new();
        let mut seen: Vec<u64> = Vec::new();
        let (infl, infl_pkts, rtx) = CcShare::of_ledger(&self.config, &p.ledger);
        for e in p.ledger.iter() {
            if let TxItem::Data(pkt) = e.token {
                if !seen.contains(&pkt.token) {
                    seen.push(pkt.token);
                    if pkt.frag != 0 {
                        partial.push(pkt.token);
                    }
                }
                if e.sacked && !partial.contains(&pkt.token) {
                    partial.push(pkt.token);
                }
            }
        }
        if let Some(first) = p.queue.front()
            && first.frag != 0
            && !seen.contains(&first.token)
            && !partial.contains(&first.token)
        {
            partial.push(first.token);
        }
        let error = PdsError::Nack(code);
        let mut queue = PktQueue::new();
        let (mut requeued, mut withdrawn) = (0u64, 0u64);
        for e in p.ledger.iter() {
            if let TxItem::Data(pkt) = e.token {
                if partial.contains(&pkt.token) {
                    upper.on_failed(now, pkt, error);
                } else {
                    requeued += u64::from(self.config.nominal(pkt.len));
                    queue.push_back(pkt);
                }
            }
        }
        for pkt in p.queue.drain() {
            if partial.contains(&pkt.token) {
                withdrawn += u64::from(self.config.nominal(pkt.len));
                upper.on_failed(now, pkt, error);
            } else {
                queue.push_back(pkt);
            }
        }
        if let Some(c) = self.cccs.get_mut(&p.ccc) {
            c.abandon(now, infl, infl_pkts, rtx);
            c.withdraw(now, withdrawn);
            if requeued > 0 {
                c.on_new_data(now, requeued);
            }
        }
        if queue.is_empty() {
            self.remove_pdc(now, id, None);
            return;
        }
        if let Some(pid) = p.peer_id.take()
            && self.by_peer.get(&(p.peer, pid)) == Some(&id)
        {
            self.by_peer.remove(&(p.peer, pid));
        }
        // REFPROV keeps Start_PSN in [2^16, 2^31) (§2.12).
        let start = Psn((1 << 16) + self.rng.below((1 << 31) - (1 << 16)) as u32);
        p.start = start;
        p.ledger = TxLedger::new(start);
        p.queue = queue;
        p.established = false;
        p.nacked = false;
        p.clear_needed = false;
        p.clear_sent = None;
        p.forced_at = None;
        let rccc_key = p.rx.take().and_then(|rx| rx.rccc);
        p.probe = None;
        p.tail = TailProbe::default();
        p.rcvd = RcvdBytesTracker::new();
        p.close_requested = false;
        p.hold_until = None;
        p.reopens += 1;
        p.last_activity = now;
        self.counters.pdcs_reopened += 1;
        self.schedule(id);
        if let Some(key) = rccc_key {
            self.release_rccc(now, id, key);
        }
    }

    fn on_cp(&mut self, now: Instant, meta: &RxMeta, c: &PdsCpRepr, upper: &mut impl Upper) {
        let _ = upper;
        match c.payload {
            CpPayload::Close
            | CpPayload::Noop
            | CpPayload::AckReq { .. }
            | CpPayload::Clear { .. }
            | CpPayload::Probe { .. } => {}
            CpPayload::CloseReq => {
                // Only the PDC's peer may ask it to close (§2.12): from its
                // address and its PDC.
                match c.dpdcid {
                    DpdcidField::Dpdcid(Some(id)) => match self.pdcs.get_mut(&id) {
                        Some(p)
                            if p.peer == meta.src
                                && p.peer_id.is_some()
                                && c.spdcid == p.peer_id =>
                        {
                            p.close_requested = true;
                            p.last_activity = now;
                        }
                        Some(_) => self.counters.drop(DropReason::Unverified),
                        None => self.counters.drop(DropReason::StrayFeedback),
                    },
                    _ => self.counters.drop(DropReason::Malformed),
                }
                return;
            }
            // Source side: cumulative credit from the target (§5.3).
            CpPayload::Credit { credit } => {
                let key = match c.dpdcid {
                    DpdcidField::Dpdcid(Some(id)) => self
                        .pdcs
                        .get(&id)
                        .filter(|p| p.peer == meta.src)
                        .map(|p| p.ccc),
                    _ => None,
                };
                match key.and_then(|k| self.cccs.get_mut(&k).map(|c| (k, c))) {
                    Some((k, ccc)) => {
                        ccc.on_credit_update(now, Credit24::from_masked(credit));
                        self.schedule_ccc(k);
                    }
                    None => self.counters.drop(DropReason::StrayFeedback),
                }
                return;
            }
            // Target side: a source asks for credit (its credit timeout).
            CpPayload::CreditReq { target_credit } => {
                let id = match (c.dpdcid, c.spdcid) {
                    (DpdcidField::Dpdcid(Some(id)), _) => Some(id),
                    // From a PDC not yet established: by {source, SPDCID}.
                    (DpdcidField::Syn { .. }, Some(sp)) => {
                        self.by_peer.get(&(meta.src, sp)).copied()
                    }
                    _ => None,
                };
                let key = id
                    .and_then(|id| self.pdcs.get(&id))
                    .filter(|p| p.peer == meta.src)
                    .and_then(|p| p.rx.as_ref())
                    .and_then(|rx| rx.rccc);
                match (key, self.rccc_rx.as_mut()) {
                    (Some(k), Some(rr)) => {
                        rr.on_credit_request(now, k, Credit24::from_masked(target_credit));
                    }
                    _ => self.counters.drop(DropReason::StrayFeedback),
                }
                return;
            }
            _ => {
                self.counters.drop(DropReason::Unexpected);
                return;
            }
        }
        let Some(id) = self.lookup_for_rx(now, meta, c.spdcid, c.dpdcid, c.psn, c.mode) else {
            return;
        };
        let range = self.config.mp_range;
        let Some(p) = self.pdcs.get_mut(&id) else {
            return;
        };
        let (local, peer) = (p.id, p.peer_id);
        let unacked_return = !p.ledger.is_empty();
        let closing = p.closing;
        let rx = match Self::rx_half(p, c.dpdcid, c.psn, range) {
            Ok(rx) => rx,
            Err(code) => {
                self.counters.drop(DropReason::UnknownPdc);
                self.nack(meta, code, c.psn, Some(local), peer, 0);
                return;
            }
        };
        match c.payload {
            CpPayload::Clear { clear_psn } => {
                rx.clear_to(clear_psn);
                rx.trigger = rx.win.cack();
                rx.due = AckDue::Now;
                self.acks.push_back(id);
            }
            CpPayload::AckReq { .. } => {
                if rx.win.contains(c.psn) {
                    rx.trigger = c.psn;
                    if let Some(r) = rx.gtd.get(&c.psn.0) {
                        rx.responses.push_back((c.psn, *r));
                    }
                    rx.ev = meta.ev;
                    rx.due = AckDue::Now;
                    self.acks.push_back(id);
                } else {
                    self.nack(meta, NackCode::PktNotRcvd, c.psn, Some(local), peer, 0);
                }
            }
            CpPayload::Probe { probe_opaque, .. } => {
                rx.probe = Some(probe_opaque);
                rx.ev = meta.ev;
                rx.due = AckDue::Now;
                self.acks.push_back(id);
            }
            CpPayload::Close => {
                // The initiator sends CLOSE only once everything before it
                // is acknowledged (§2.12), so its PSN is the next one
                // expected — or, resent because our ACK was lost, the one
                // before it once we are closing. Any other PSN comes from a
                // blind or stale sender (a RST outside the window, RFC 5961
                // §3): a counted drop, the PDC untouched.
                let expected = rx.win.base();
                if c.psn != expected && !(closing && c.psn == expected.sub(1)) {
                    self.counters.drop(DropReason::Unverified);
                    return;
                }
                // Every forward PSN up to the CLOSE counts as cleared
                // (§2.12); a target with unacknowledged return traffic
                // answers CLOSING_IN_ERR.
                if unacked_return {
                    self.nack(meta, NackCode::ClosingInErr, c.psn, Some(local), peer, 0);
                    return;
                }
                rx.win.advance_to(c.psn.next());
                rx.gtd.clear();
                rx.trigger = c.psn;
                rx.ev = meta.ev;
                rx.due = AckDue::Now;
                p.closing = true;
                self.acks.push_back(id);
            }
            _ => {
                if c.ar {
                    rx.trigger = rx.win.cack();
                    rx.due = AckDue::Now;
                    self.acks.push_back(id);
                }
            }
        }
    }

    // ---------------------------------------------------------------- transmit

    /// Writes the next datagram's UET bytes into `buf` (sized for the
    /// largest packet: PDS header + `max_ses_len`) and says where it goes.
    /// Priority: NACKs and control, ACKs, retransmissions, new data.
    #[inline]
    #[must_use]
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        upper: &mut impl Upper,
    ) -> Option<Transmit> {
        // The usual answer of a receiver between its ACKs, decided here
        // without entering the general path (whose entry and exit alone,
        // saving and restoring registers, cost more than these checks).
        if self.nothing_to_send() {
            return None;
        }
        self.poll_transmit_general(now, buf, upper)
    }

    /// Nothing [`Pds::poll_transmit_general`] could send now: no PDC on
    /// the send round robin, no ACK, control packet, UUD or RUDI work, and
    /// no RCCC (whose grants and credit requests it would first collect).
    /// When this holds it returns `None` and changes nothing (tested on
    /// every poll of the engine tests).
    #[inline]
    pub(crate) fn nothing_to_send(&self) -> bool {
        self.active.is_empty()
            && self.acks.is_empty()
            && self.ctl.is_empty()
            && self.uud.is_empty()
            && self.rudi.replies.is_empty()
            && self.rudi.inflight.is_empty()
            && self.rccc_rx.is_none()
            && !self.rccc_source
    }

    /// [`Pds::poll_transmit`] for every case.
    #[must_use]
    pub(crate) fn poll_transmit_general(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        upper: &mut impl Upper,
    ) -> Option<Transmit> {
        // Without RCCC (the common case) neither has anything to do: the
        // checks are here so that no call is made for them.
        if self.rccc_rx.is_some() {
            self.queue_grants();
        }
        if self.rccc_source {
            self.send_credit_requests(now);
        }
        if let Some(c) = self.ctl.pop_front() {
            return self.write_ctl(c, buf);
        }
        while let Some(id) = self.acks.pop_front() {
            if let Some(t) = self.write_ack(now, id, buf) {
                return Some(t);
            }
        }
        if let Some((dst, pkt)) = self.uud.pop_front() {
            return self.write_uud(now, dst, pkt, buf, upper);
        }
        // (Without RUDI work, the usual case, `write_rudi` has nothing to
        // send: not called.)
        if !(self.rudi.replies.is_empty() && self.rudi.inflight.is_empty())
            && let Some(t) = self.write_rudi(now, buf, upper)
        {
            return Some(t);
        }
        let mut spins = self.active.len();
        while spins > 0 {
            spins -= 1;
            // `write_data` neither schedules nor reads `scheduled`, so the
            // PDC is only taken off the queue once its fate is known.
            let Some(&id) = self.active.front() else {
                break;
            };
            let t = self.write_data(now, id, buf, upper);
            match self.pdcs.get_mut(&id) {
                // Round robin: the PDC goes to the back while it has work
                // (it stays scheduled).
                // (Alone on it, it already is at the back.)
                Some(p) if t.is_some() && p.has_tx_work() => {
                    if self.active.len() > 1 {
                        self.active.rotate_left(1);
                    }
                }
                p => {
                    self.active.pop_front();
                    if let Some(p) = p {
                        p.scheduled = false;
                    }
                }
            }
            if t.is_some() {
                return t;
            }
        }
        None
    }

    fn write_ctl(&mut self, c: CtlOut, buf: &mut [u8]) -> Option<Transmit> {
        // (A tail probe rides the data class: it must queue behind the
        // data it asks about.)
        let (dst, ev, repr, data_class) = match c {
            CtlOut::Nack { dst, ev, repr } => {
                self.counters.tx_nacks += 1;
                self.counters.tx_nack_codes.count(repr.code.code());
                (dst, ev, PdsRepr::Nack(repr), false)
            }
            CtlOut::Cp { dst, repr } => {
                self.counters.tx_control += 1;
                (dst, CONTROL_EV, PdsRepr::Cp(repr), false)
            }
            CtlOut::TailProbe { dst, repr } => {
                self.counters.tx_control += 1;
                self.counters.tail_probes += 1;
                (dst, CONTROL_EV, PdsRepr::Cp(repr), true)
            }
        };
        let len = repr.buffer_len();
        repr.emit(buf.get_mut(..len)?);
        Some(if data_class {
            Transmit::data(&self.config, dst, ev, len)
        } else {
            Transmit::control(&self.config, dst, ev, len)
        })
    }

    fn write_ack(&mut self, now: Instant, id: PdcId, buf: &mut [u8]) -> Option<Transmit> {
        let mpr = (self.config.mp_range / 128).clamp(1, 255) as u8;
        let p = self.pdcs.get_mut(&id)?;
        let peer_id = p.peer_id;
        let closing_target = p.closing && !p.initiator;
        let rx = p.rx.as_mut()?;
        if rx.due != AckDue::Now {
            return None;
        }
        let cack = rx.cack();
        let sack_base = cack.next();
        // PSNs holding an uncleared guaranteed response are not SACKed: the
        // initiator must fetch the response (§3).
        let mut bitmap = rx.win.sack_bitmap(sack_base);
        for k in rx.gtd.keys() {
            let d = Psn(*k).diff(sack_base);
            if (0..64).contains(&d) {
                bitmap &= !(1u64 << d);
            }
        }
        // Bounded: a peer replaying duplicates cannot grow the queue.
        while rx.responses.len() > 256 {
            rx.responses.pop_front();
        }
        let response = rx.responses.pop_front();
        let (next_hdr, resp_psn) = match response {
            Some((psn, _)) => (NextHeader::Response, Some(psn)),
            None => (NextHeader::None, None),
        };
        let ack_field = match rx.probe.take() {
            Some(o) => PdsAckPsnField::ProbeOpaque(o),
            None => {
                let trig = resp_psn.unwrap_or(rx.trigger);
                PdsAckPsnField::Offset(trig.offset_from(cack).unwrap_or(0))
            }
        };
        // An RCCC source gets its cumulative credit in the ACK (cc_type
        // CREDIT); everyone else NSCC state: rcvd_bytes in 256-B units and
        // the service time since the triggering packet arrived (§2.7).
        let credit = rx
            .rccc
            .and_then(|k| self.rccc_rx.as_mut().and_then(|rr| rr.grant_for(k)));
        let state = match credit {
            Some(credit) => AckCcState::Credit(CreditState {
                credit,
                ooo_count: rx.ooo_count,
            }),
            None => AckCcState::Nscc(NsccState {
                service_time: service_time_to_wire(rx.trigger_at, now),
                rc: false,
                rcv_cwnd_pend: CwndPenalty::from_masked(0),
                rcvd_bytes: Units256::from_bytes_round_up(rx.rcvd_bytes),
                ooo_count: rx.ooo_count,
            }),
        };
        let ack = PdsAckRepr {
            next_hdr,
            m: rx.ecn,
            retx: rx.retx,
            req: if rx.gtd.is_empty() {
                PdsAckRequest::None
            } else {
                PdsAckRequest::Clear
            },
            ack_psn_offset: ack_field,
            cack_psn: cack,
            spdcid: Some(id),
            dpdcid: peer_id,
            ext: PdsAckExt::Cc(PdsAckCc {
                cc_flags: PdsCcFlags::from_masked(0),
                mpr,
                sack_psn_offset: 1,
                sack_bitmap: bitmap,
                state: PdsAckState::Cc(state),
            }),
        };
        let hl = ack.buffer_len();
        let mut len = hl;
        // Straight to the ACK view (what `PdsRepr::emit` does after its
        // dispatch on the type); the usual ACK_CC through a fixed-size view,
        // so that no field write checks the length again.
        use uet_wire::pds::ack::{CC_HEADER_LEN, Packet};
        if hl == CC_HEADER_LEN {
            ack.emit(&mut Packet::new_unchecked(
                buf.first_chunk_mut::<CC_HEADER_LEN>()?,
            ));
        } else {
            ack.emit(&mut Packet::new_unchecked(buf.get_mut(..hl)?));
        }
        if let Some((_, resp)) = response {
            let rl = resp.buffer_len();
            let out = buf.get_mut(hl..hl + rl)?;
            resp.emit(&mut uet_wire::ses::SesResponsePacket::new_unchecked(out));
            len += rl;
        }
        let ev = rx.ev;
        if !rx.responses.is_empty() {
            // More responses wait: another ACK goes next.
            self.acks.push_back(id);
            let dst = p.peer;
            self.counters.tx_acks += 1;
            return Some(Transmit::control(&self.config, dst, ev, len));
        }
        rx.due = AckDue::No;
        rx.ack_bytes = 0;
        rx.ecn = false;
        rx.retx = false;
        let dst = p.peer;
        p.last_activity = now;
        self.counters.tx_acks += 1;
        if closing_target {
            // The ACK of the CLOSE is out: the target forgets the PDC.
            self.remove_pdc(now, id, None);
        }
        Some(Transmit::control(&self.config, dst, ev, len))
    }

    fn write_rudi(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        upper: &mut impl Upper,
    ) -> Option<Transmit> {
        if let Some((dst, ev, m, pkt_id, resp)) = self.rudi.replies.pop_front() {
            let hl = 8;
            let (nh, rl) = match resp {
                Some(r) => {
                    let rl = r.buffer_len();
                    let out = buf.get_mut(hl..hl + rl)?;
                    r.emit(&mut uet_wire::ses::SesResponsePacket::new_unchecked(out));
                    (NextHeader::Response, rl)
                }
                None => (NextHeader::None, 0),
            };
            PdsRepr::Rudi(PdsRudiRepr {
                kind: RudiKind::Response { m },
                next_hdr: nh,
                retx: false,
                pkt_id,
            })
            .emit(buf.get_mut(..hl)?);
            self.counters.tx_acks += 1;
            return Some(Transmit::control(&self.config, dst, ev, hl + rl));
        }
        let (&pkt_id, tx) = self.rudi.inflight.iter_mut().find(|(_, t)| t.due)?;
        let first = !tx.sent;
        tx.sent = true;
        tx.due = false;
        if !first {
            tx.rtx_count += 1;
            self.counters.tx_retransmits += 1;
        } else {
            self.counters.tx_data += 1;
        }
        tx.sent_at = now;
        let (dst, pkt) = (tx.dst, tx.pkt);
        let hl = 8;
        let ses = buf.get_mut(hl..hl + pkt.len as usize)?;
        let nh = upper.write_request(now, &pkt, ses);
        PdsRepr::Rudi(PdsRudiRepr {
            kind: RudiKind::Request,
            next_hdr: nh,
            retx: !first,
            pkt_id,
        })
        .emit(buf.get_mut(..hl)?);
        Some(Transmit::data(
            &self.config,
            dst,
            EntropyValue::from_masked(self.rng.next_u32() as u16),
            hl + pkt.len as usize,
        ))
    }

    fn write_uud(
        &mut self,
        now: Instant,
        dst: IpAddr,
        pkt: PktRef,
        buf: &mut [u8],
        upper: &mut impl Upper,
    ) -> Option<Transmit> {
        let hl = 4;
        let ses = buf.get_mut(hl..hl + pkt.len as usize)?;
        let nh = upper.write_request(now, &pkt, ses);
        PdsRepr::Uud(PdsUudRepr { next_hdr: nh }).emit(buf.get_mut(..hl)?);
        upper.on_acked(now, pkt);
        self.counters.tx_data += 1;
        Some(Transmit::data(
            &self.config,
            dst,
            EntropyValue::from_masked(self.rng.next_u32() as u16),
            hl + pkt.len as usize,
        ))
    }

    fn write_data(
        &mut self,
        now: Instant,
        id: PdcId,
        buf: &mut [u8],
        upper: &mut impl Upper,
    ) -> Option<Transmit> {
        let range = self.config.mp_range;
        let p = self.pdcs.get_mut(&id)?;
        if p.hold_until.is_some_and(|h| now < h) {
            // `handle_timeout` schedules it again when the hold ends.
            return None;
        }
        let ccc = self.cccs.at_mut(Self::ccc_ix(&self.cccs, p)?)?;
        // 1. Retransmissions (SACKed ones become ACK_REQ probes, §3). Data
        // retransmissions go through the CCC like new data: a NACK or loss
        // already moved their bytes from inflight to the retransmit backlog
        // (`CcShare`). Probes and CLOSE are control traffic, never counted.
        let rtx_blocked = p.ledger.first_rtx().is_some_and(|e| {
            matches!(CcShare::of(&self.config, e), CcShare::Rtx(_))
                && !e.rto_forced
                && !ccc.can_send(now, self.config.nominal(item_len(&e.token)))
        });
        if rtx_blocked {
            return None;
        }
        if let Some(e) = p.ledger.resend_first(now) {
            let psn = e.psn;
            let item = e.token;
            let sacked = e.sacked;
            let ev = match p.mode {
                ReliableMode::Rod => p.rod_ev,
                ReliableMode::Rud => ccc.send_params(now, &mut self.rng).ev,
            };
            e.ev = ev;
            self.counters.tx_retransmits += 1;
            if sacked {
                let cp = PdsCpRepr {
                    mode: p.mode,
                    retx: true,
                    ar: true,
                    psn,
                    spdcid: Some(p.id),
                    dpdcid: Self::dst_field(p, psn),
                    payload: CpPayload::AckReq {
                        message_id: MessageId::from_masked(0),
                    },
                };
                // A probe for a SACKed packet usually means the target holds
                // a guaranteed response we already have and waits for the
                // CLEAR: the CLEAR CP is unreliable, so every probe carries a
                // fresh one (idempotent, cumulative).
                if p.clear_psn().diff(p.ledger.una()) >= 0 || p.clear_needed {
                    p.clear_needed = false;
                    p.clear_sent = Some(p.clear_psn());
                    let clear = PdsCpRepr {
                        payload: CpPayload::Clear {
                            clear_psn: p.clear_psn(),
                        },
                        ar: false,
                        psn: Psn(0),
                        ..cp
                    };
                    self.ctl.push_back(CtlOut::Cp {
                        dst: p.peer,
                        repr: clear,
                    });
                }
                let repr = PdsRepr::Cp(cp);
                let len = repr.buffer_len();
                repr.emit(buf.get_mut(..len)?);
                return Some(Transmit::control(&self.config, p.peer, ev, len));
            }
            if let TxItem::Data(pkt) = item {
                ccc.on_send(now, u64::from(self.config.nominal(pkt.len)), true);
            }
            let cc = req_cc_state(ccc.credit_target(), p.ccc.1);
            return Self::write_item(
                &self.config,
                p,
                now,
                psn,
                item,
                (true, true),
                cc,
                ev,
                buf,
                upper,
            );
        }
        // 2. A CLEAR the target asked for and no request to carry it.
        if p.clear_needed && p.queue.is_empty() {
            p.clear_needed = false;
            p.clear_sent = Some(p.clear_psn());
            let repr = PdsRepr::Cp(PdsCpRepr {
                mode: p.mode,
                retx: false,
                ar: true,
                psn: Psn(0),
                spdcid: Some(p.id),
                dpdcid: DpdcidField::Dpdcid(p.peer_id),
                payload: CpPayload::Clear {
                    clear_psn: p.clear_psn(),
                },
            });
            let len = repr.buffer_len();
            repr.emit(buf.get_mut(..len)?);
            self.counters.tx_control += 1;
            return Some(Transmit::control(&self.config, p.peer, CONTROL_EV, len));
        }
        // 3. New data, within the MPR window, the SYN range and the CCC.
        let pkt = p.queue.front()?;
        let next = p.ledger.next_psn();
        let in_flight = next.diff(p.ledger.una()) as u32;
        if in_flight >= range {
            return None;
        }
        if !p.established && next.diff(p.start) >= SynPsnOffset::MAX as i32 {
            return None;
        }
        // `can_send`, `send_params`, `on_send`, `can_send` again and the
        // credit target, in one call.
        let sent = ccc.send_new(now, self.config.nominal(pkt.len), &mut self.rng)?;
        p.queue.advance();
        let ev = match p.mode {
            ReliableMode::Rod => p.rod_ev,
            ReliableMode::Rud => sent.params.ev,
        };
        let psn = p.ledger.push(now, pkt.len, ev, TxItem::Data(pkt));
        self.counters.tx_data += 1;
        let ar = pkt.last || p.queue.is_empty() || sent.window_closing || sent.params.ack_req;
        // The credit target a packet carries is the one after its own send
        // (RCCC: otherwise a capped source stalls until its credit timeout).
        let cc = req_cc_state(sent.credit_target, p.ccc.1);
        Self::write_item(
            &self.config,
            p,
            now,
            psn,
            TxItem::Data(pkt),
            (false, ar),
            cc,
            ev,
            buf,
            upper,
        )
    }

    /// Whether a CP can name the peer's PDC ID (`dst_field` without SYN).
    fn addressable(p: &Pdc) -> bool {
        p.peer_id.is_some() && !Self::syn_addressed(p)
    }

    /// Whether `p`'s packets still carry SYN in place of the DPDCID: only
    /// the initiator establishes with SYN; the target always knows the
    /// initiator's PDC ID (see the return-direction start above).
    fn syn_addressed(p: &Pdc) -> bool {
        p.initiator && !p.established
    }

    fn dst_field(p: &Pdc, psn: Psn) -> DpdcidField {
        if !Self::syn_addressed(p) {
            DpdcidField::Dpdcid(p.peer_id)
        } else {
            DpdcidField::Syn {
                pdc_info: PdcInfo::from_masked(0),
                psn_offset: SynPsnOffset::from_masked(psn.diff(p.start) as u16),
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write_item(
        config: &PdsConfig,
        p: &mut Pdc,
        now: Instant,
        psn: Psn,
        item: TxItem,
        (retx, ar): (bool, bool),
        cc: Option<ReqCcState>,
        ev: EntropyValue,
        buf: &mut [u8],
        upper: &mut impl Upper,
    ) -> Option<Transmit> {
        p.last_activity = now;
        p.tail.on_progress(now);
        let dst = Self::dst_field(p, psn);
        let clear = p.clear_psn();
        let clear_off = clear.offset_from(psn).unwrap_or(i16::MIN);
        match item {
            TxItem::Close => {
                let repr = PdsRepr::Cp(PdsCpRepr {
                    mode: p.mode,
                    retx,
                    ar: true,
                    psn,
                    spdcid: Some(p.id),
                    dpdcid: dst,
                    payload: CpPayload::Close,
                });
                let len = repr.buffer_len();
                repr.emit(buf.get_mut(..len)?);
                Some(Transmit::control(config, p.peer, CONTROL_EV, len))
            }
            TxItem::Data(pkt) => {
                // RUD_CC_REQ/ROD_CC_REQ (16 B) when RCCC advertises a
                // credit target, plain RUD_REQ/ROD_REQ (12 B) otherwise.
                let hl = if cc.is_some() { 16 } else { 12 };
                let ses = buf.get_mut(hl..hl + pkt.len as usize)?;
                let nh = upper.write_request(now, &pkt, ses);
                let repr = PdsRequestRepr {
                    mode: p.mode,
                    next_hdr: nh,
                    retx,
                    ar,
                    clear_psn_offset: clear_off,
                    psn,
                    spdcid: Some(p.id),
                    dpdcid: dst,
                    cc,
                };
                // Straight to the request view (what `PdsRepr::emit` does
                // after its dispatch on the type), sized at compile time so
                // that no field write checks the length again.
                use uet_wire::pds::req::{CC_HEADER_LEN, HEADER_LEN, Packet};
                if cc.is_some() {
                    let head = buf.first_chunk_mut::<CC_HEADER_LEN>()?;
                    repr.emit(&mut Packet::new_unchecked(head));
                } else {
                    let head = buf.first_chunk_mut::<HEADER_LEN>()?;
                    repr.emit(&mut Packet::new_unchecked(head));
                }
                if p.clear_needed && clear_off != i16::MIN {
                    // The request carried the CLEAR.
                    p.clear_needed = false;
                }
                let mut t = Transmit::data(config, p.peer, ev, hl + pkt.len as usize);
                if retx && let Some(d) = config.dscp_data_rtx {
                    // DSCP_TRIMMABLE_RTX (§6/§7).
                    t.dscp = d;
                }
                Some(t)
            }
        }
    }
}

/// The `req_cc_state` of a request when the CCC runs RCCC (a credit
/// target, [`Ccc::credit_target`]): that cumulative target, and `ccc_id` =
/// the traffic class (a source has one CCC per destination and class, so
/// (source, class) names it at the target).
#[inline]
fn req_cc_state(credit_target: Option<Credit24>, tc: TrafficClass) -> Option<ReqCcState> {
    credit_target.map(|credit_target| ReqCcState {
        ccc_id: CccId::from_masked(tc.get()),
        credit_target,
    })
}

fn idle_limit(config: &PdsConfig, p: &Pdc) -> Duration {
    if p.initiator && p.close_requested {
        // The target asked (CLOSE_REQ or ACK req=CLOSE): close once idle.
        Duration::ZERO
    } else if p.initiator || !p.close_requested {
        config.idle_timeout
    } else {
        // A target reaps a PDC whose initiator ignored its CLOSE_REQ.
        config.idle_timeout * 3
    }
}

fn item_len(item: &TxItem) -> u32 {
    match item {
        TxItem::Data(p) => p.len,
        TxItem::Close => 0,
    }
}
