//! The state of one PDC: its send half (ledger, queue) and its receive
//! half (PSN window, ACK state).

use super::{CONTROL_EV, InitiatorKey, PktRef};
use crate::deadline_heap::Timer;
use std::collections::{BTreeMap, VecDeque};

use std::net::IpAddr;

use uet_cms::nscc::RcvdBytesTracker;
use uet_wire::pds::ReliableMode;
use uet_wire::pds::tss::Sdi;
use uet_wire::ses::SesResponseRepr;
use uet_wire::time::Instant;
use uet_wire::{EntropyValue, PdcId, Psn, TrafficClass};

use crate::pkt_queue::PktQueue;
use crate::rto::RttEstimator;
use crate::rx_window::RxWindow;
use crate::tail_probe::TailProbe;
use crate::tx_ledger::TxLedger;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TxItem {
    Data(PktRef),
    /// The CLOSE control packet (consumes a PSN, sent with `ar`, §2.12).
    Close,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AckDue {
    No,
    At(Instant),
    Now,
}

/// The receive direction of a PDC: the PSN window of the peer's requests
/// and the ACK this end owes for them (created by the first packet from
/// the peer).
/// Whether `psn` left before its source heard from the target, given the
/// first PSN sent after it did (`None`: not yet).
#[inline]
pub(super) fn sent_unheard(heard_from: Option<Psn>, psn: Psn) -> bool {
    heard_from.is_none_or(|h| psn.is_before(h))
}

#[derive(Debug)]
pub(super) struct ReceiveState {
    pub(super) win: RxWindow,
    pub(super) start: Psn,
    /// Bytes accepted since the last ACK, each packet counting at least
    /// `ACK_Gen_Min_Pkt_Add` (§3).
    pub(super) ack_bytes: u32,
    pub(super) due: AckDue,
    /// The PSN that triggered the pending ACK.
    pub(super) trigger: Psn,
    /// Every PSN up to this one that had arrived when an ACK left was
    /// reported by it (a 1 in its bitmap, or its response): the next
    /// bitmap starts no later than just past it (`write_ack`, §3).
    pub(super) reported: Psn,
    pub(super) ev: EntropyValue,
    pub(super) ecn: bool,
    /// `retx` of the ACK ("ACK to a retransmission", §2): whether the
    /// packet that triggered it was one. It describes that packet only,
    /// not the others the ACK covers, so the source knows which copy of
    /// a resent trigger arrived (`calc_rtt`'s rule, and RACK's reference).
    pub(super) retx: bool,
    /// Responses to carry, one per ACK, with their PSNs (several packets
    /// can each hold one, e.g. errors on every packet of a message).
    pub(super) responses: VecDeque<(Psn, SesResponseRepr)>,
    /// Probe to answer (`p` = 1, `probe_opaque`).
    pub(super) probe: Option<u16>,
    /// Guaranteed-delivery responses not yet cleared, by PSN.
    pub(super) gtd: BTreeMap<u32, SesResponseRepr>,
    /// NSCC destination counter (§5.2 destination side).
    pub(super) rcvd_bytes: u64,
    pub(super) ooo_count: u16,
    /// ROD: a NACK for the current gap was sent.
    pub(super) rod_nacked: bool,
    /// Highest CLEAR_PSN seen.
    pub(super) cleared: Psn,
    /// Arrival time of the packet that triggered the pending ACK (NSCC
    /// service time, §2.7).
    pub(super) trigger_at: Instant,
    /// The RCCC sender this direction belongs to, once a *_CC_REQ named it
    /// or a CREDIT_REQ came first (see `rccc_provisional`).
    pub(super) rccc: Option<(IpAddr, u8)>,
    /// `rccc` came from a CREDIT_REQ before any *_CC_REQ: the CP names no
    /// CCC, so the sender was entered as `ccc_id` 0 (a source's only or
    /// default class); the first *_CC_REQ confirms the key or moves the
    /// PDC to the one it names.
    pub(super) rccc_provisional: bool,
    /// The lowest PSN seen on a first transmission without SYN: the source
    /// had heard from us when it sent it. Packets below it left with SYN,
    /// before the source heard anything (§2.2), on its initial window.
    pub(super) heard_from: Option<Psn>,
}

impl ReceiveState {
    /// Records a first transmission of `psn` with or without SYN.
    #[inline]
    pub(super) fn note_first_tx(&mut self, psn: Psn, syn: bool) {
        if !syn && self.heard_from.is_none_or(|h| psn.is_before(h)) {
            self.heard_from = Some(psn);
        }
    }

    /// Whether the first transmission of `psn` left before its source had
    /// heard from us (with SYN), as far as the arrivals tell: below the
    /// first PSN seen without SYN, or before any was seen.
    #[inline]
    pub(super) fn sent_unheard(&self, psn: Psn) -> bool {
        sent_unheard(self.heard_from, psn)
    }

    pub(super) fn new(start: Psn, range: u32) -> Self {
        Self {
            win: RxWindow::new(start, range),
            start,
            ack_bytes: 0,
            due: AckDue::No,
            trigger: start,
            reported: start.sub(1),
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
            rccc_provisional: false,
            heard_from: None,
        }
    }

    /// The cumulative ACK: everything received, but never past an uncleared
    /// guaranteed response (§3).
    pub(super) fn cack(&self) -> Psn {
        let c = self.win.cack();
        match self.gtd.keys().find(|k| !Psn(**k).is_after(c)) {
            Some(first) => Psn(*first).sub(1),
            None => c,
        }
    }

    #[inline]
    pub(super) fn clear_to(&mut self, clear_psn: Psn) {
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
pub(super) struct Pdc {
    pub(super) id: PdcId,
    pub(super) peer: IpAddr,
    pub(super) peer_id: Option<PdcId>,
    pub(super) initiator: bool,
    /// The security domain every packet of this PDC is sealed in and must
    /// be authenticated by (`None`: in the clear).
    pub(super) sdi: Option<Sdi>,
    pub(super) mode: ReliableMode,
    pub(super) key: Option<InitiatorKey>,
    pub(super) ccc: (IpAddr, TrafficClass),
    /// The index of `ccc` in [`Pds::cccs`] once known (`CccTable::index`;
    /// a CCC is removed only with the last PDC that refers to it, so it
    /// stays valid).
    pub(super) ccc_ix: Option<usize>,
    // Send half.
    pub(super) start: Psn,
    pub(super) established: bool,
    /// The target has answered with a NACK: it holds a PDC for this one
    /// even before establishment (a SYN-addressed CP can reach it).
    pub(super) nacked: bool,
    pub(super) ledger: TxLedger<TxItem>,
    /// When an RTO last let a packet of this PDC pass closed congestion
    /// control.
    pub(super) forced_at: Option<Instant>,
    /// When a probe's answer condemned packets of this PDC while the target
    /// had acknowledged none of its data (`Pds::note_unheard_loss`).
    pub(super) unheard_loss_at: Option<Instant>,
    pub(super) queue: PktQueue,
    pub(super) clear_needed: bool,
    /// The last CLEAR_PSN sent in a CLEAR CP: another is sent only when
    /// CLEAR_PSN moves past it.
    pub(super) clear_sent: Option<Psn>,
    /// The highest CLEAR_PSN any packet carried, and when the first packet
    /// carrying it left: the CACK of a packet answered with a guaranteed
    /// response cannot move before that CLEAR arrives (§3), so the timer
    /// that asks for an overdue CACK runs from then (`Pdc::rto_deadline`).
    pub(super) clear_out: Option<(Psn, Instant)>,
    /// When an ACK last acknowledged a data packet not acknowledged
    /// before: the path and the target were alive then
    /// (`Pdc::rto_deadline`).
    pub(super) delivered_at: Option<Instant>,
    /// The latest transmission (`TxEntry::tx_seq`) an ACK has
    /// acknowledged: the target answered what was sent up to it
    /// (`Pdc::silent_since`).
    pub(super) delivered_tx: Option<u32>,
    /// The first PSN sent after the target's first ACK or NACK on this PDC
    /// reached us (`None` until then): the packets before it left before
    /// the source heard anything, in the PDC's first round trip.
    pub(super) heard_from: Option<Psn>,
    pub(super) closing: bool,
    pub(super) rod_ev: EntropyValue,
    // Receive half (created by the first packet from the peer).
    pub(super) rx: Option<ReceiveState>,
    pub(super) last_activity: Instant,
    pub(super) close_requested: bool,
    /// On the send round robin.
    pub(super) scheduled: bool,
    /// Holds by the layer above, which awaits return-direction data (a
    /// read's response) on this PDC: a held PDC is not idle.
    pub(super) holds: u32,
    /// The outstanding PROBE: its opaque value and when it was sent.
    pub(super) probe: Option<(u16, Instant)>,
    /// NSCC source: the last `rcvd_bytes` the target reported (§5.2).
    pub(super) rcvd: RcvdBytesTracker,
    /// Tail loss probing: min RTT, the PTO, the probe on its way, the
    /// episode.
    pub(super) tail: TailProbe,
    /// SRTT and RTTVAR of the send half: its RTO (`rto.rs`).
    pub(super) rtt: RttEstimator,
    /// A target's PDC opened by a SYN whose initiator has not yet shown it
    /// heard our answer (no packet addressed by our PDC ID has arrived):
    /// anyone can open one with a forged source, so these are bounded and
    /// reaped apart from the others (`PdsConfig::max_pending_pdcs`).
    pub(super) pending: bool,
    /// When the PDC was opened (tells a pending entry from a later PDC that
    /// reused its ID).
    pub(super) created: Instant,
    /// Reopened (`Pds::reopen`) since the peer last acknowledged data.
    pub(super) reopens: u32,
    /// A secure target PDC that answered its first SYN with NEW_START_PSN
    /// and waits for its initiator to start again from `start`; nothing is
    /// delivered before (§2.12).
    pub(super) awaiting_start: bool,
    /// No data leaves before this: the peer refused a packet for want of a
    /// resource (`Pds::on_nack`), and resending at once would only be
    /// refused again.
    pub(super) hold_until: Option<Instant>,
    /// When this PDC's own timers next need `handle_timeout`, as of the
    /// last time the engine looked (`Pds::refresh_timers`; the PDC table
    /// lists the PDCs changed since), and its live entry in `Pds::timers`.
    pub(super) timer: Timer,
}

impl Pdc {
    /// Records that feedback from the target arrived: what is sent from
    /// now on is sent with something heard.
    #[inline]
    pub(super) fn note_heard(&mut self) {
        if self.heard_from.is_none() {
            self.heard_from = Some(self.ledger.next_psn());
        }
    }

    pub(super) fn idle(&self) -> bool {
        self.ledger.is_empty() && self.queue.is_empty() && self.holds == 0
    }

    /// Nothing to send and nothing unacknowledged (holds aside).
    pub(super) fn quiet(&self) -> bool {
        self.ledger.is_empty() && self.queue.is_empty()
    }

    /// CLEAR_PSN: one before the first PSN not known delivered (§3: "left
    /// edge of the initiator's unACKed window − 1"). SACKed or answered
    /// packets count as delivered.
    pub(super) fn clear_psn(&self) -> Psn {
        self.ledger.first_unsacked_psn().sub(1)
    }

    /// Records that a packet carrying CLEAR_PSN `clear` leaves now.
    #[inline]
    pub(super) fn note_clear(&mut self, now: Instant, clear: Psn) {
        if self.clear_out.is_none_or(|(c, _)| clear.is_after(c)) {
            self.clear_out = Some((clear, now));
        }
    }

    /// When the RTO of ledger entry `e` expires. A SACKed entry's RTO asks
    /// for the CACK that should have covered it (an ACK_REQ); when the
    /// CACK waits for our CLEAR (a guaranteed response, §3), it is
    /// overdue only an RTO after the CLEAR covering the entry left, not
    /// after the entry did: behind a standing queue that is two round
    /// trips after the entry left.
    ///
    /// The timer runs from the entry's send or from the last ACK that
    /// acknowledged new data, whichever is later, and at most one RTO past
    /// the send (so an entry times out between one and two RTOs after it
    /// left). Behind a standing queue a packet's round trip is most of its
    /// RTO (RTO ≥ 1.25 · SRTT): timed from its send alone, a few
    /// milliseconds in which the target's host does not run its receive
    /// loop would time it out, although the ACKs of the packets just ahead
    /// of it show the target alive and draining the queue. Timed from the
    /// last delivering ACK, as RFC 6298 §5.3 restarts TCP's timer on every
    /// ACK of new data, it fires only after an RTO of silence. Losses on a
    /// path that is answering are found by SACK inference, RACK and tail
    /// probes without the RTO; the cap keeps the one-RTO backoff of a
    /// packet that none of those finds.
    ///
    /// While the target is silent ([`Pdc::silent_since`] the entry left)
    /// the RTO is at least `rto_silent` (`PdsConfig::rto_silent`, backed
    /// off like the RTO). A host that does not run the target's receive
    /// loop for a few milliseconds (a busy or oversubscribed machine, a
    /// vCPU the hypervisor took away) answers nothing sent since it
    /// stopped; the packets wait in its ring and are all acknowledged when
    /// it runs again, so resending them at the RTO only adds duplicates. A
    /// path that answers keeps the shorter RTO for what SACK, RACK and the
    /// tail probes do not find.
    #[inline]
    pub(super) fn rto_deadline(
        &self,
        cfg: &crate::PdsConfig,
        e: &crate::tx_ledger::TxEntry<TxItem>,
    ) -> Instant {
        let from = match self.clear_out {
            Some((c, at)) if e.sacked && !e.psn.is_after(c) => e.sent_at.max(at),
            _ => e.sent_at,
        };
        let mut rto = self.rto(cfg, e.rto_count);
        if let Some(floor) = cfg.rto_silent_floor(e.rto_count)
            && self.silent_since(e.tx_seq)
        {
            rto = rto.max(floor);
        }
        let from = match self.delivered_at {
            Some(d) if d > from => d.min(from + rto),
            _ => from,
        };
        from + rto
    }

    /// The target has answered nothing sent since transmission `tx`
    /// (`TxEntry::tx_seq`): no ACK has acknowledged a packet that left
    /// after it. Transmission order, not send times: a batch leaves with
    /// one time stamp, and a target that stopped in the middle of it
    /// answered its first packets only. A packet lost on a path that
    /// answers has later packets acknowledged (and SACK or RACK finds it),
    /// or, sent last, a tail probe whose answer finds it.
    #[inline]
    pub(super) fn silent_since(&self, tx: u32) -> bool {
        self.delivered_tx
            .is_none_or(|d| !crate::tx_ledger::tx_after(d, tx))
    }

    /// The RTO of a packet of this PDC after `retries` timeouts.
    #[inline]
    pub(super) fn rto(&self, cfg: &crate::PdsConfig, retries: u32) -> uet_wire::time::Duration {
        cfg.rto_for(&self.rtt, retries)
    }

    #[inline]
    pub(super) fn has_tx_work(&self) -> bool {
        !self.queue.is_empty() || self.ledger.has_rtx() || self.clear_needed
    }
}
