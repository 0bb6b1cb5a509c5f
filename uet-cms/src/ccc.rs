//! The congestion control context and its common hooks (`docs/protocol-notes.md`
//! §5.1, SPEC-TR §3.6.12).

use std::collections::VecDeque;

use uet_wire::rand::Rng;
use uet_wire::time::{Duration, Instant};
use uet_wire::{Credit24, EntropyValue};

use crate::entropy::{EvConfig, EvFeedback, EvSelector};
use crate::nscc::NsccEvent;
use crate::nscc::{Nscc, NsccAck, NsccConfig, NsccNack};
use crate::pft::{Pft, PftConfig, PftEvent};
use crate::rccc::{RcccConfig, RcccSource, RcccSourceEvent};

/// Configuration of one CCC: every CMS parameter lives below it, with the
/// spec defaults (`NsccConfig`, `RcccConfig`, `EvConfig`, `PftConfig`).
#[derive(Debug, Clone, PartialEq)]
pub struct CccConfig {
    /// Nominal size of a full packet (`transport_pktsize + 40`, §1), the unit
    /// of `can_send`.
    pub mtu: u32,
    /// The congestion-control algorithm(s).
    pub algorithm: Algorithm,
    /// Entropy-value selection (§6); ROD PDCs use a single path regardless.
    pub ev: EvConfig,
    /// Optional PFT source throttle on top of the algorithm (seed paper).
    pub pft: Option<PftConfig>,
}

impl Default for CccConfig {
    fn default() -> Self {
        Self {
            mtu: 4096 + 64,
            algorithm: Algorithm::Fixed { window: 64 * 4096 },
            ev: EvConfig::default(),
            pft: None,
        }
    }
}

/// The congestion-control algorithm(s) of a CCC (`can_send` is the AND of
/// the enabled ones, §5.1).
#[derive(Debug, Clone, PartialEq)]
pub enum Algorithm {
    /// A fixed window of `window` bytes in flight ("none" in `docs/congestion-evaluation.md`).
    Fixed {
        /// Bytes allowed in flight.
        window: u64,
    },
    /// NSCC alone (§5.2).
    Nscc(NsccConfig),
    /// RCCC alone (§5.3).
    Rccc(RcccConfig),
    /// NSCC and RCCC together: last-hop trims belong to RCCC and the credit
    /// request is capped at cwnd + MTU (§5.2 "NSCC + RCCC together").
    NsccRccc(NsccConfig, RcccConfig),
}

impl Algorithm {
    /// Whether RCCC is on.
    #[must_use]
    pub fn has_rccc(&self) -> bool {
        matches!(self, Self::Rccc(_) | Self::NsccRccc(..))
    }
}

/// CCC states (§5.1): IDLE → ACTIVE (has data) → READY (has data and the
/// algorithms permit sending) → PENDING (all sent, waiting for ACKs) → IDLE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CccState {
    /// Nothing to send, nothing in flight.
    Idle,
    /// Data waiting, congestion control does not permit sending.
    Active,
    /// Data waiting and permitted.
    Ready,
    /// Everything sent, waiting for acknowledgements.
    Pending,
}

/// What an ACK tells the CCC (the arguments of `OnACK`, §5.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AckEvent {
    /// Nominal bytes of the packets this ACK newly acknowledged (cumulatively
    /// or selectively), as the PDS retransmission ledger counts them.
    pub acked_bytes: u64,
    /// Packets newly acknowledged.
    pub acked_pkts: u32,
    /// Of `acked_bytes`, the bytes of packets that were waiting for
    /// retransmission (declared lost by a NACK, RTO or SACK inference, not
    /// yet resent). They left `inflight` when they were declared lost, so
    /// the ACK takes them out of the retransmit backlog instead.
    pub rtx_cancelled_bytes: u64,
    /// Of `acked_pkts`, the packets counted in `rtx_cancelled_bytes`.
    pub rtx_cancelled_pkts: u32,
    /// Newly received bytes reported by the destination (NSCC `rcvd_bytes`
    /// difference × 256), when the ACK carried NSCC state.
    pub newly_rcvd_bytes: Option<u64>,
    /// The EV the ACK echoes.
    pub ev: EntropyValue,
    /// The ACK's `m` flag: the acknowledged packet was ECN-CE marked.
    pub ecn_marked: bool,
    /// When the acknowledged packet was (last) sent.
    pub tx_time: Instant,
    /// How often that packet had been retransmitted.
    pub rtx_count: u32,
    /// The ACK's `retx` flag.
    pub retx: bool,
    /// Destination service time to subtract from the RTT.
    pub service_time: Duration,
    /// Destination window penalty 0–127 (NSCC DFC).
    pub rcv_cwnd_pend: u8,
    /// Restore the saved window (NSCC DFC).
    pub restore_cwnd: bool,
    /// Cumulative credit, when the ACK carried CREDIT state.
    pub credit: Option<Credit24>,
    /// When the ACK reached the host, if stamped before it was handled
    /// (NSCC times its RTT sample from it); `None`: at `now`.
    pub arrival: Option<Instant>,
}

/// What a NACK tells the CCC (the arguments of `OnNACK`, §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NackEvent {
    /// Nominal size of the NACKed packet.
    pub bytes: u64,
    /// The EV the NACK echoes.
    pub ev: EntropyValue,
    /// The NACK's `m` flag.
    pub ecn_marked: bool,
    /// The packet was trimmed at a switch that is not the last hop.
    pub trimmed: bool,
    /// The packet was trimmed at the last hop.
    pub trimmed_last_hop: bool,
    /// When the NACKed packet was (last) sent.
    pub tx_time: Instant,
    /// How often it had been retransmitted.
    pub rtx_count: u32,
    /// The NACK's `retx` flag.
    pub retx: bool,
}

/// What `GetSendParams` returns (§5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendParams {
    /// Entropy value for the packet.
    pub ev: EntropyValue,
    /// RCCC credit target to advertise, if RCCC is on.
    pub credit_target: Option<Credit24>,
    /// Whether congestion control asks for an immediate ACK (NSCC
    /// `AckRequest`).
    pub ack_req: bool,
}

/// What sending a new packet got from the CCC ([`Ccc::send_new`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewSend {
    /// `GetSendParams` before the send.
    pub params: SendParams,
    /// The same packet could not leave again now (`!CanSend` after the
    /// send): the window is closing behind it.
    pub window_closing: bool,
    /// The RCCC credit target after the send, the one the packet carries.
    pub credit_target: Option<Credit24>,
}

/// A state change, for tracing and plots.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CmsEvent {
    /// The CCC changed state.
    State {
        /// When.
        now: Instant,
        /// The new state.
        state: CccState,
    },
    /// The window changed.
    Window {
        /// When.
        now: Instant,
        /// The new window in bytes.
        cwnd: u64,
    },
}

/// A state change of a CCC or of an algorithm in it ([`Ccc::poll_trace`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CccTrace {
    /// The CCC's own state or window.
    Ccc(CmsEvent),
    /// NSCC's window, with the reason, or its base RTT.
    Nscc(NsccEvent),
    /// The RCCC source: credit, requests, the end of speculation.
    Rccc(RcccSourceEvent),
    /// PFT's throttle state.
    Pft(PftEvent),
}

/// A congestion control context: shared by the PDCs to one destination FEP
/// in one traffic class.
#[derive(Debug, Clone)]
pub struct Ccc {
    config: CccConfig,
    state: CccState,
    /// Bytes of new data waiting (nominal sizes).
    backlog: u64,
    /// Bytes waiting for retransmission.
    rtx_backlog: u64,
    /// Bytes in flight. Invariant: the sum of the nominal sizes of the
    /// packets currently outstanding, each counted at most once — added by
    /// `on_send` when (re)transmitted, removed exactly once: when declared
    /// lost (`on_nack`, `on_inferred_loss`: the bytes move to `rtx_backlog`),
    /// or when acknowledged while outstanding (`on_ack`), or when their PDC
    /// is abandoned. A packet acknowledged while waiting for retransmission
    /// leaves `rtx_backlog`, not `inflight` (`AckEvent::rtx_cancelled_bytes`).
    /// The caller's ledger decides which applies (`uet-pds` `CcShare`), so
    /// this never goes below zero. Signed only to match NSCC's own
    /// `inflight`, which follows the receiver's `rcvd_bytes` and may dip.
    inflight: i64,
    /// Packets counted in `inflight`.
    inflight_pkts: u32,
    ev: EvSelector,
    /// The EV of the current run and how many more packets it carries
    /// (`EvConfig::burst` > 1).
    ev_held: Option<(EntropyValue, u32)>,
    nscc: Option<Nscc>,
    rccc: Option<RcccSource>,
    pft: Option<Pft>,
    events: VecDeque<CmsEvent>,
}

impl Ccc {
    /// A new CCC in the IDLE state.
    pub fn new(config: CccConfig, now: Instant, rng: &mut impl Rng) -> Self {
        let ev = EvSelector::from_config(&config.ev, rng);
        Self::with_ev(config, now, ev, rng)
    }

    /// A CCC that uses one EV for every packet (ROD single-path mode, §6).
    pub fn single_path(
        config: CccConfig,
        now: Instant,
        ev: EntropyValue,
        rng: &mut impl Rng,
    ) -> Self {
        Self::with_ev(config, now, EvSelector::Single(ev), rng)
    }

    fn with_ev(config: CccConfig, now: Instant, ev: EvSelector, rng: &mut impl Rng) -> Self {
        let (nscc, rccc) = match &config.algorithm {
            Algorithm::Fixed { .. } => (None, None),
            Algorithm::Nscc(n) => (Some(Nscc::new(n.clone(), now)), None),
            Algorithm::Rccc(r) => (None, RcccSource::new(r.clone()).ok()),
            Algorithm::NsccRccc(n, r) => (
                Some(Nscc::new(n.clone(), now)),
                RcccSource::new(r.clone()).ok(),
            ),
        };
        let pft = config.pft.map(|p| Pft::new(p, rng));
        Self {
            config,
            state: CccState::Idle,
            backlog: 0,
            rtx_backlog: 0,
            inflight: 0,
            inflight_pkts: 0,
            ev,
            ev_held: None,
            nscc,
            rccc,
            pft,
            events: VecDeque::new(),
        }
    }

    /// NSCC, when enabled.
    pub fn nscc(&self) -> Option<&Nscc> {
        self.nscc.as_ref()
    }

    /// NSCC, mutably (probing: `wants_probe`, `on_probe_rtt`).
    pub fn nscc_mut(&mut self) -> Option<&mut Nscc> {
        self.nscc.as_mut()
    }

    /// RCCC's source side, when enabled.
    pub fn rccc(&self) -> Option<&RcccSource> {
        self.rccc.as_ref()
    }

    /// The configuration.
    pub fn config(&self) -> &CccConfig {
        &self.config
    }

    /// The current state.
    pub fn state(&self) -> CccState {
        self.state
    }

    /// Bytes in flight.
    pub fn inflight(&self) -> i64 {
        self.inflight
    }

    /// Packets in flight.
    pub fn inflight_pkts(&self) -> u32 {
        self.inflight_pkts
    }

    /// Bytes of new data waiting.
    pub fn backlog(&self) -> u64 {
        self.backlog
    }

    /// Bytes waiting for retransmission (declared lost, not yet resent).
    pub fn rtx_backlog(&self) -> u64 {
        self.rtx_backlog
    }

    /// The congestion window in bytes.
    pub fn cwnd(&self) -> u64 {
        match (&self.config.algorithm, &self.nscc) {
            (Algorithm::Fixed { window }, _) => *window,
            (_, Some(n)) => n.cwnd(),
            // RCCC alone: the credit held is the window.
            _ => self.rccc.as_ref().map_or(0, |r| r.credit().max(0) as u64),
        }
    }

    /// The RCCC credit target to advertise now (cumulative, §5.3), capped
    /// at cwnd + MTU when NSCC is also on.
    #[inline]
    pub fn credit_target(&self) -> Option<Credit24> {
        let r = self.rccc.as_ref()?;
        let cap = self
            .nscc
            .as_ref()
            .map(|n| n.cwnd() + u64::from(self.config.mtu));
        Some(r.credit_target(cap))
    }

    /// A CREDIT_REQ payload when RCCC's credit timeout says the source needs
    /// credit it has not been given (§5.3).
    #[must_use]
    pub fn poll_credit_request(&mut self, now: Instant) -> Option<Credit24> {
        let cap = self
            .nscc
            .as_ref()
            .map(|n| n.cwnd() + u64::from(self.config.mtu));
        self.rccc
            .as_mut()
            .and_then(|r| r.poll_credit_request(now, cap))
    }

    /// The CMS timers (RCCC credit timeout, PFT pacing).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let a = self.rccc.as_ref().and_then(RcccSource::poll_timeout);
        let b = self.pft.as_ref().and_then(Pft::poll_timeout);
        a.into_iter().chain(b).min()
    }

    /// Runs the CMS timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(r) = &mut self.rccc {
            r.handle_timeout(now);
        }
        if let Some(p) = &mut self.pft {
            p.handle_timeout(now);
        }
        self.update_state(now);
    }

    /// `OnNewData`: `bytes` of new data became ready to send.
    pub fn on_new_data(&mut self, now: Instant, bytes: u64) {
        self.backlog = self.backlog.saturating_add(bytes);
        if let Some(r) = &mut self.rccc {
            r.on_new_data(now, bytes);
        }
        self.update_state(now);
    }

    /// The peer no longer knows this CCC's RCCC source: it starts afresh
    /// ([`RcccSource::restart`]). Nothing else changes.
    pub fn restart_rccc(&mut self, now: Instant) {
        if let Some(r) = &mut self.rccc {
            r.restart(now);
        }
        self.update_state(now);
    }

    /// Withdraws backlog that will not be sent (an operation failed).
    pub fn withdraw(&mut self, now: Instant, bytes: u64) {
        self.backlog = self.backlog.saturating_sub(bytes);
        if let Some(r) = &mut self.rccc {
            r.withdraw(now, bytes, 0);
        }
        self.update_state(now);
    }

    /// A PDC closed in error: its packets will never be acknowledged or
    /// resent, so their bytes leave `inflight` (and the retransmit backlog)
    /// without a congestion signal — otherwise the CCC, shared with other
    /// PDCs to the destination, would stay blocked forever.
    ///
    /// `inflight_bytes` / `inflight_pkts` are the PDC's packets still counted
    /// in `inflight`, `rtx_bytes` those waiting for retransmission; NSCC's
    /// window, RCCC's demand and PFT's used bytes give them back too.
    pub fn abandon(
        &mut self,
        now: Instant,
        inflight_bytes: u64,
        inflight_pkts: u32,
        rtx_bytes: u64,
    ) {
        self.inflight = self.inflight.saturating_sub(inflight_bytes as i64);
        self.inflight_pkts = self.inflight_pkts.saturating_sub(inflight_pkts);
        self.rtx_backlog = self.rtx_backlog.saturating_sub(rtx_bytes);
        if let Some(n) = &mut self.nscc {
            n.on_abandon(inflight_bytes);
        }
        if let Some(r) = &mut self.rccc {
            r.withdraw(now, 0, rtx_bytes);
        }
        if let Some(p) = &mut self.pft {
            p.on_loss(now, inflight_bytes);
        }
        self.update_state(now);
    }

    /// `CanSend`: whether a packet of `bytes` may leave now — the AND of the
    /// enabled algorithms (§5.1), and PFT's pacing when it throttles.
    #[inline]
    pub fn can_send(&self, now: Instant, bytes: u32) -> bool {
        let b = u64::from(bytes);
        let window_ok = match self.config.algorithm {
            Algorithm::Fixed { window } => {
                self.inflight.saturating_add(i64::from(bytes)) <= window as i64
                    || self.inflight <= 0
            }
            _ => self.nscc.as_ref().is_none_or(|n| n.can_send(b)),
        };
        window_ok
            && self.rccc.as_ref().is_none_or(|r| r.can_send(b))
            && self.pft.as_ref().is_none_or(|p| p.can_send(now))
    }

    /// `GetSendParams`: EV, credit target and ACK request for the next packet.
    pub fn send_params(&mut self, now: Instant, rng: &mut impl Rng) -> SendParams {
        SendParams {
            ev: self.next_ev(now, rng),
            credit_target: self.credit_target(),
            ack_req: self.nscc.as_ref().is_some_and(Nscc::ack_request),
        }
    }

    /// The next packet's EV: the held one while its run lasts
    /// ([`EvConfig::burst`](crate::entropy::EvConfig::burst)), else the
    /// selector's next.
    fn next_ev(&mut self, now: Instant, rng: &mut impl Rng) -> EntropyValue {
        if let Some((ev, left)) = &mut self.ev_held
            && *left > 0
        {
            *left -= 1;
            return *ev;
        }
        let ev = self.ev.next_ev_at(now, rng);
        let burst = self.config.ev.burst;
        self.ev_held = (burst > 1).then_some((ev, burst - 1));
        ev
    }

    /// Feedback about `ev` to the selector; anything but GOOD also ends a
    /// run on it, so the next packet takes another path.
    fn ev_feedback(&mut self, now: Instant, ev: EntropyValue, feedback: EvFeedback) {
        self.ev.process_ev_at(now, ev, feedback);
        if feedback != EvFeedback::Good && self.ev_held.is_some_and(|(held, _)| held == ev) {
            self.ev_held = None;
        }
    }

    /// A new packet of `bytes` (not a retransmission), in one call:
    /// `None`, with nothing changed, unless [`Ccc::can_send`]; otherwise
    /// [`Ccc::send_params`], [`Ccc::on_send`], then [`Ccc::can_send`] and
    /// [`Ccc::credit_target`] again, exactly as those calls in turn
    /// (tested).
    #[inline(never)]
    pub fn send_new(&mut self, now: Instant, bytes: u32, rng: &mut impl Rng) -> Option<NewSend> {
        if !self.can_send(now, bytes) {
            return None;
        }
        let params = self.send_params(now, rng);
        self.on_send(now, u64::from(bytes), false);
        Some(NewSend {
            params,
            window_closing: !self.can_send(now, bytes),
            credit_target: self.credit_target(),
        })
    }

    /// `OnSend`: a packet of `bytes` left (a retransmission if `is_rtx`).
    #[inline]
    pub fn on_send(&mut self, now: Instant, bytes: u64, is_rtx: bool) {
        if is_rtx {
            self.rtx_backlog = self.rtx_backlog.saturating_sub(bytes);
        } else {
            self.backlog = self.backlog.saturating_sub(bytes);
        }
        self.inflight = self.inflight.saturating_add(bytes as i64);
        self.inflight_pkts = self.inflight_pkts.saturating_add(1);
        if let Some(n) = &mut self.nscc {
            n.on_send(bytes);
        }
        if let Some(r) = &mut self.rccc {
            r.on_send(now, bytes, is_rtx);
        }
        if let Some(p) = &mut self.pft {
            p.on_send(now, bytes);
        }
        self.update_state(now);
    }

    /// `OnACK`.
    pub fn on_ack(&mut self, now: Instant, ack: &AckEvent) {
        let feedback = if ack.ecn_marked {
            EvFeedback::Ecn
        } else {
            EvFeedback::Good
        };
        self.ev_feedback(now, ack.ev, feedback);
        // Outstanding packets leave inflight; those waiting for
        // retransmission left it when declared lost and now leave the
        // retransmit backlog: each packet is removed exactly once.
        let cancelled = ack.rtx_cancelled_bytes.min(ack.acked_bytes);
        let outstanding = ack.acked_bytes - cancelled;
        self.inflight = self.inflight.saturating_sub(outstanding as i64);
        self.inflight_pkts = self
            .inflight_pkts
            .saturating_sub(ack.acked_pkts.saturating_sub(ack.rtx_cancelled_pkts));
        self.rtx_backlog = self.rtx_backlog.saturating_sub(cancelled);
        if let Some(n) = &mut self.nscc {
            if cancelled > 0 {
                n.on_rtx_cancelled(cancelled);
            }
            let before = n.cwnd();
            n.on_ack(
                now,
                &NsccAck {
                    // From the ACK's rcvd_bytes when it carried NSCC state;
                    // otherwise (CREDIT state) from the ledger.
                    newly_rcvd_bytes: ack.newly_rcvd_bytes.unwrap_or(ack.acked_bytes),
                    ecn: ack.ecn_marked,
                    tx_time: ack.tx_time,
                    rtx_count: ack.rtx_count,
                    retx: ack.retx,
                    service_time: ack.service_time,
                    rcv_cwnd_pend: ack.rcv_cwnd_pend,
                    restore_cwnd: ack.restore_cwnd,
                    arrival: ack.arrival,
                },
            );
            let after = n.cwnd();
            if after != before {
                self.push_event(CmsEvent::Window { now, cwnd: after });
            }
        }
        if let Some(r) = &mut self.rccc {
            if cancelled > 0 {
                r.withdraw(now, 0, cancelled);
            }
            r.on_ack(now);
            if let Some(c) = ack.credit {
                r.on_credit_update(now, c);
            }
        }
        if let Some(p) = &mut self.pft {
            // PFT's used bytes follow the same rule as `inflight`.
            p.on_ack(now, outstanding);
        }
        self.update_state(now);
    }

    /// EV feedback for a packet acknowledged without an ECN mark by a
    /// coalesced ACK (§6): the destination ORs CE over the packets an ACK
    /// covers, so `m` = 0 proves each of them arrived unmarked, and every
    /// one of their EVs — not only the one the ACK echoes — is GOOD.
    pub fn on_ev_good(&mut self, now: Instant, ev: EntropyValue) {
        self.ev.process_ev_at(now, ev, EvFeedback::Good);
    }

    /// [`Ccc::on_ev_good`] for every EV of `evs`, in order, in one call.
    pub fn on_evs_good(&mut self, now: Instant, evs: &[EntropyValue]) {
        self.ev.process_good_at(now, evs);
    }

    /// `OnNACK`: the packet is marked for retransmission.
    pub fn on_nack(&mut self, now: Instant, nack: &NackEvent) {
        let feedback = if nack.trimmed && !nack.trimmed_last_hop {
            EvFeedback::Nack
        } else if nack.ecn_marked {
            EvFeedback::Ecn
        } else {
            EvFeedback::Good
        };
        self.ev_feedback(now, nack.ev, feedback);
        self.mark_for_retransmit(nack.bytes);
        let rccc_on = self.rccc.is_some();
        if let Some(n) = &mut self.nscc {
            n.on_nack(
                now,
                &NsccNack {
                    bytes: nack.bytes,
                    tx_time: nack.tx_time,
                    rtx_count: nack.rtx_count,
                    retx: nack.retx,
                    trimmed: nack.trimmed || nack.trimmed_last_hop,
                    last_hop: nack.trimmed_last_hop,
                    rccc_enabled: rccc_on,
                },
            );
        }
        if let Some(r) = &mut self.rccc {
            r.on_nack(now, nack.bytes, true);
        }
        if let Some(p) = &mut self.pft {
            p.on_loss(now, nack.bytes);
        }
        self.update_state(now);
    }

    /// `OnInferredLoss`: an RTO (or SACK inference) declared `bytes` lost.
    pub fn on_inferred_loss(&mut self, now: Instant, bytes: u64, ev: Option<EntropyValue>) {
        if let Some(ev) = ev {
            self.ev_feedback(now, ev, EvFeedback::Timeout);
        }
        self.mark_for_retransmit(bytes);
        if let Some(n) = &mut self.nscc {
            n.on_inferred_loss(now, bytes);
        }
        if let Some(r) = &mut self.rccc {
            r.on_inferred_loss(now, bytes, true);
        }
        if let Some(p) = &mut self.pft {
            p.on_loss(now, bytes);
        }
        self.update_state(now);
    }

    /// `OnCreditUpdate`: cumulative credit from the destination (RCCC).
    pub fn on_credit_update(&mut self, now: Instant, credit: Credit24) {
        if let Some(r) = &mut self.rccc {
            r.on_credit_update(now, credit);
        }
        self.update_state(now);
    }

    /// The next state change, for tracing.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<CmsEvent> {
        self.events.pop_front()
    }

    /// The next state change of the CCC or of its algorithms: the CCC's
    /// own first, then NSCC's, RCCC's and PFT's. Each source is in time
    /// order and every event carries its time; each keeps a bounded queue,
    /// so a tracer that drains after every step loses nothing.
    #[must_use]
    pub fn poll_trace(&mut self) -> Option<CccTrace> {
        if let Some(e) = self.events.pop_front() {
            return Some(CccTrace::Ccc(e));
        }
        if let Some(e) = self.nscc.as_mut().and_then(Nscc::poll_event) {
            return Some(CccTrace::Nscc(e));
        }
        if let Some(e) = self.rccc.as_mut().and_then(RcccSource::poll_event) {
            return Some(CccTrace::Rccc(e));
        }
        self.pft
            .as_mut()
            .and_then(Pft::poll_event)
            .map(CccTrace::Pft)
    }

    fn push_event(&mut self, ev: CmsEvent) {
        // Bounded: a consumer that never polls loses old events, not memory.
        if self.events.len() >= 1024 {
            self.events.pop_front();
        }
        self.events.push_back(ev);
    }

    fn mark_for_retransmit(&mut self, bytes: u64) {
        self.inflight = self.inflight.saturating_sub(bytes as i64);
        self.inflight_pkts = self.inflight_pkts.saturating_sub(1);
        self.rtx_backlog = self.rtx_backlog.saturating_add(bytes);
    }

    #[inline]
    fn update_state(&mut self, now: Instant) {
        // NSCC's own inflight follows the destination's byte counts; it may
        // not claim more than the ledger has outstanding (`clamp_inflight`).
        if let Some(n) = &mut self.nscc {
            n.clamp_inflight(self.inflight);
        }
        let waiting = self.backlog > 0 || self.rtx_backlog > 0;
        let next = if waiting {
            // READY when the next packet may leave. RCCC's credit must
            // cover it: at most one MTU, and no more than is waiting. The
            // windows (NSCC, fixed) keep room for a full MTU.
            let next_packet = if self.rccc.is_some() {
                self.backlog
                    .saturating_add(self.rtx_backlog)
                    .min(u64::from(self.config.mtu)) as u32
            } else {
                self.config.mtu
            };
            if self.can_send(now, next_packet) {
                CccState::Ready
            } else {
                CccState::Active
            }
        } else if self.inflight_pkts > 0 {
            CccState::Pending
        } else {
            CccState::Idle
        };
        if next != self.state {
            self.state = next;
            self.push_event(CmsEvent::State { now, state: next });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uet_wire::rand::Xoshiro256;

    fn ack(bytes: u64) -> AckEvent {
        AckEvent {
            acked_bytes: bytes,
            acked_pkts: 1,
            rtx_cancelled_bytes: 0,
            rtx_cancelled_pkts: 0,
            newly_rcvd_bytes: None,
            ev: EntropyValue::from_masked(1),
            ecn_marked: false,
            tx_time: Instant::ZERO,
            rtx_count: 0,
            retx: false,
            service_time: Duration::ZERO,
            rcv_cwnd_pend: 0,
            restore_cwnd: false,
            credit: None,
            arrival: None,
        }
    }

    #[test]
    fn fixed_window_walks_the_state_machine() {
        let mut rng = Xoshiro256::seed_from_u64(3);
        let cfg = CccConfig {
            mtu: 1000,
            algorithm: Algorithm::Fixed { window: 2000 },
            ..CccConfig::default()
        };
        let mut c = Ccc::new(cfg, Instant::ZERO, &mut rng);
        let t = Instant::ZERO;
        assert_eq!(c.state(), CccState::Idle);
        c.on_new_data(t, 3000);
        assert_eq!(c.state(), CccState::Ready);
        c.on_send(t, 1000, false);
        c.on_send(t, 1000, false);
        assert!(!c.can_send(Instant::ZERO, 1000));
        assert_eq!(c.state(), CccState::Active);
        c.on_ack(t, &ack(1000));
        assert_eq!(c.state(), CccState::Ready);
        c.on_send(t, 1000, false);
        assert_eq!(c.state(), CccState::Pending);
        // A NACK puts the bytes into the retransmit backlog.
        c.on_nack(
            t,
            &NackEvent {
                bytes: 1000,
                ev: EntropyValue::from_masked(2),
                ecn_marked: false,
                trimmed: true,
                trimmed_last_hop: false,
                tx_time: Instant::ZERO,
                rtx_count: 0,
                retx: false,
            },
        );
        assert_eq!(c.state(), CccState::Ready);
        c.on_send(t, 1000, true);
        c.on_ack(t, &ack(1000));
        c.on_ack(t, &ack(1000));
        assert_eq!(c.state(), CccState::Idle);
        assert_eq!(c.inflight(), 0);
        let states: Vec<_> = core::iter::from_fn(|| c.poll_event()).collect();
        assert!(states.len() >= 6);
    }

    /// NSCC for a `rate_bps` link (and NIC) with base RTT `rtt`.
    pub(super) fn nscc_for(rate_bps: u64, rtt: Duration, mtu: u32, trimming: bool) -> NsccConfig {
        NsccConfig::new(rate_bps, rate_bps, rtt, mtu, trimming)
    }

    /// A CCC running `algorithm` with packets of `mtu`, at time zero.
    pub(super) fn ccc_with(mtu: u32, algorithm: Algorithm) -> Ccc {
        let mut rng = Xoshiro256::seed_from_u64(3);
        let cfg = CccConfig {
            mtu,
            algorithm,
            ..CccConfig::default()
        };
        Ccc::new(cfg, Instant::ZERO, &mut rng)
    }

    #[test]
    fn a_window_smaller_than_a_packet_still_sends_one() {
        let mut rng = Xoshiro256::seed_from_u64(3);
        let cfg = CccConfig {
            mtu: 4000,
            algorithm: Algorithm::Fixed { window: 100 },
            ..CccConfig::default()
        };
        let c = Ccc::new(cfg, Instant::ZERO, &mut rng);
        assert!(c.can_send(Instant::ZERO, 4000));
    }

    /// `EvConfig::burst` = 4: the EVs come in runs of four, each run's EV
    /// the selector's next (as without runs), and loss feedback on the
    /// run's EV ends it at once.
    #[test]
    fn evs_come_in_runs_that_end_on_bad_feedback() {
        let cfg = |burst| CccConfig {
            mtu: 1000,
            algorithm: Algorithm::Fixed { window: 1 << 20 },
            ev: EvConfig {
                mode: crate::entropy::EvMode::Oblivious,
                burst,
                ..EvConfig::default()
            },
            ..CccConfig::default()
        };
        let t = Instant::ZERO;
        let evs = |burst, n| {
            let mut rng = Xoshiro256::seed_from_u64(9);
            let mut c = Ccc::new(cfg(burst), t, &mut rng);
            (0..n)
                .map(|_| c.send_params(t, &mut rng).ev)
                .collect::<Vec<_>>()
        };
        let single = evs(1, 3);
        let runs = evs(4, 12);
        assert_eq!(runs[..4], [single[0]; 4]);
        assert_eq!(runs[4..8], [single[1]; 4]);
        assert_eq!(runs[8..], [single[2]; 4]);
        assert_ne!(single[0], single[1]);

        let mut rng = Xoshiro256::seed_from_u64(9);
        let mut c = Ccc::new(cfg(4), t, &mut rng);
        let first = c.send_params(t, &mut rng).ev;
        assert_eq!(c.send_params(t, &mut rng).ev, first);
        // Feedback on another EV leaves the run alone; a loss on its own
        // ends it.
        c.on_inferred_loss(t, 1000, Some(EntropyValue::from_masked(1)));
        assert_eq!(c.send_params(t, &mut rng).ev, first);
        c.on_inferred_loss(t, 1000, Some(first));
        let next = c.send_params(t, &mut rng).ev;
        assert_ne!(next, first);
        assert_eq!(c.send_params(t, &mut rng).ev, next);
    }

    #[test]
    fn nscc_window_gates_sending() {
        let n = nscc_for(100_000_000_000, Duration::from_micros(6), 4096, true);
        let max = n.max_wnd;
        let mut c = ccc_with(4096, Algorithm::Nscc(n));
        assert_eq!(
            c.cwnd(),
            112_500,
            "initial cwnd = MaxWnd = 1.5 BDP at 100G x 6us"
        );
        assert_eq!(max, 112_500);
        c.on_new_data(Instant::ZERO, 1 << 20);
        let mut sent = 0u64;
        while c.can_send(Instant::ZERO, 4096) {
            c.on_send(Instant::ZERO, 4096, false);
            sent += 4096;
        }
        assert!(
            sent <= max && sent + 4096 > max,
            "sent {sent} of window {max}"
        );
        assert_eq!(c.state(), CccState::Active, "data waits for the window");
    }

    #[test]
    fn nscc_cannot_stall_on_bytes_the_ledger_no_longer_has_in_flight() {
        let n = nscc_for(1_000_000_000, Duration::from_micros(100), 1500, false);
        let mut c = ccc_with(1500, Algorithm::Nscc(n));
        let t = Instant::ZERO;
        c.on_new_data(t, 1 << 20);
        for _ in 0..3 {
            c.on_send(t, 1500, false);
        }
        // The ledger sees all three acknowledged; the destination's count
        // (256-byte units, NSCC state) reports fewer bytes than were sent.
        c.on_ack(
            t,
            &AckEvent {
                acked_bytes: 4500,
                acked_pkts: 3,
                newly_rcvd_bytes: Some(4096),
                ..ack(4500)
            },
        );
        assert_eq!(c.inflight(), 0);
        assert_eq!(
            c.nscc().map(Nscc::inflight),
            Some(0),
            "nothing is outstanding, so nothing is in flight"
        );
        assert!(c.can_send(t, 1500));
    }

    #[test]
    fn rccc_credit_gates_sending_and_the_target_advertises_backlog() {
        let mut rng = Xoshiro256::seed_from_u64(3);
        let cfg = CccConfig {
            mtu: 4096,
            algorithm: Algorithm::Rccc(RcccConfig::default()),
            ..CccConfig::default()
        };
        let mut c = Ccc::new(cfg, Instant::ZERO, &mut rng);
        c.on_new_data(Instant::ZERO, 1 << 20);
        let mut sent = 0u64;
        while c.can_send(Instant::ZERO, 4096) && sent < (1 << 20) {
            c.on_send(Instant::ZERO, 4096, false);
            sent += 4096;
        }
        assert!(
            sent < (1 << 20),
            "the speculative first window is bounded: {sent}"
        );
        assert!(c.credit_target().is_some(), "the backlog is advertised");
        assert_eq!(c.state(), CccState::Active);
    }
}

#[cfg(test)]
mod pft_tests {
    use super::*;
    use uet_wire::rand::Xoshiro256;

    #[test]
    fn pft_throttles_a_source_whose_acks_stop() {
        let mut rng = Xoshiro256::seed_from_u64(3);
        let cfg = CccConfig {
            mtu: 4160,
            algorithm: Algorithm::Fixed { window: 1 << 30 },
            pft: Some(PftConfig::default()),
            ..CccConfig::default()
        };
        let mut c = Ccc::new(cfg, Instant::ZERO, &mut rng);
        c.on_new_data(Instant::ZERO, 1 << 30);
        let mut now = Instant::ZERO;
        let mut blocked_at = None;
        for i in 0..20_000u32 {
            while let Some(t) = c.poll_timeout().filter(|t| *t <= now) {
                c.handle_timeout(t);
            }
            if c.can_send(now, 4160) {
                c.on_send(now, 4160, false);
            } else if blocked_at.is_none() {
                blocked_at = Some(i);
            }
            now += Duration::from_nanos(333);
        }
        assert!(
            blocked_at.is_some(),
            "PFT never throttled an unacknowledged sender"
        );
    }
}

/// The accounting contract of `inflight`, packet by packet: a model of the
/// caller's ledger (outstanding, marked for retransmission, acknowledged)
/// drives the hooks the way the PDS does, through RTOs, NACKs, SACK-inferred
/// losses, retransmissions, late ACKs of originals and of retransmissions,
/// and duplicate ACKs.
#[cfg(test)]
mod accounting_tests {
    use super::tests::{ccc_with, nscc_for};
    use super::*;
    use proptest::prelude::*;
    use uet_wire::rand::Xoshiro256;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Pkt {
        Outstanding,
        Marked,
        Acked,
    }

    #[derive(Debug, Clone, Copy)]
    enum Op {
        Send,
        /// RTO or SACK inference on packet i (mod the packets sent).
        Loss(usize),
        Nack(usize),
        /// Sends the first marked packet again.
        Retransmit,
        /// An ACK (cumulative or selective, original or retransmission)
        /// reaches packet i; a duplicate if it was acknowledged already.
        Ack(usize),
        /// A PDC holding the packets from i on fails.
        Abandon(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => Just(Op::Send),
            2 => any::<usize>().prop_map(Op::Loss),
            1 => any::<usize>().prop_map(Op::Nack),
            2 => Just(Op::Retransmit),
            4 => any::<usize>().prop_map(Op::Ack),
            1 => any::<usize>().prop_map(Op::Abandon),
        ]
    }

    fn algorithm() -> impl Strategy<Value = (Algorithm, bool)> {
        let nscc = nscc_for(100_000_000_000, Duration::from_micros(6), 1000, true);
        prop_oneof![
            (1u64..40).prop_map(|w| Algorithm::Fixed { window: w * 1000 }),
            Just(Algorithm::Nscc(nscc.clone())),
            Just(Algorithm::Rccc(RcccConfig::default())),
            Just(Algorithm::NsccRccc(nscc, RcccConfig::default())),
        ]
        .prop_flat_map(|a| (Just(a), any::<bool>()))
    }

    fn ack_of(bytes: u64, cancelled: bool, newly: Option<u64>) -> AckEvent {
        AckEvent {
            acked_bytes: bytes,
            acked_pkts: 1,
            rtx_cancelled_bytes: if cancelled { bytes } else { 0 },
            rtx_cancelled_pkts: u32::from(cancelled),
            newly_rcvd_bytes: newly,
            ev: EntropyValue::from_masked(1),
            ecn_marked: false,
            tx_time: Instant::ZERO,
            rtx_count: 0,
            retx: false,
            service_time: Duration::ZERO,
            rcv_cwnd_pend: 0,
            restore_cwnd: false,
            credit: None,
            arrival: None,
        }
    }

    fn run(alg: Algorithm, pft: bool, ops: &[Op]) -> Result<(), TestCaseError> {
        let mut rng = Xoshiro256::seed_from_u64(5);
        let cfg = CccConfig {
            mtu: 1000,
            algorithm: alg,
            pft: pft.then(PftConfig::default),
            ..CccConfig::default()
        };
        let mut c = Ccc::new(cfg, Instant::ZERO, &mut rng);
        let mut now = Instant::ZERO;
        // Packets of 1000 B + i: sizes differ, so a packet subtracted in the
        // place of another shows.
        let size = |i: usize| 1000 + i as u64;
        let mut pkts: Vec<(Pkt, bool)> = Vec::new(); // (state, abandoned)
        c.on_new_data(now, 1 << 30);
        for &o in ops {
            now += Duration::from_micros(1);
            let live: Vec<usize> = (0..pkts.len()).filter(|&i| !pkts[i].1).collect();
            let pick = |k: usize| (!live.is_empty()).then(|| live[k % live.len()]);
            match o {
                Op::Send => {
                    let i = pkts.len();
                    c.on_send(now, size(i), false);
                    pkts.push((Pkt::Outstanding, false));
                }
                Op::Loss(k) | Op::Nack(k) => {
                    // The ledger declares only outstanding packets lost.
                    if let Some(i) = pick(k)
                        && pkts[i].0 == Pkt::Outstanding
                    {
                        pkts[i].0 = Pkt::Marked;
                        if matches!(o, Op::Loss(_)) {
                            c.on_inferred_loss(now, size(i), None);
                        } else {
                            c.on_nack(
                                now,
                                &NackEvent {
                                    bytes: size(i),
                                    ev: EntropyValue::from_masked(2),
                                    ecn_marked: false,
                                    trimmed: true,
                                    trimmed_last_hop: false,
                                    tx_time: now,
                                    rtx_count: 0,
                                    retx: false,
                                },
                            );
                        }
                    }
                }
                Op::Retransmit => {
                    if let Some(i) = live.iter().copied().find(|&i| pkts[i].0 == Pkt::Marked) {
                        pkts[i].0 = Pkt::Outstanding;
                        c.on_send(now, size(i), true);
                    }
                }
                Op::Ack(k) => {
                    // Late ACKs of an original or of a retransmission look
                    // alike: whichever comes first acknowledges the packet,
                    // the other is a duplicate the ledger ignores.
                    if let Some(i) = pick(k)
                        && pkts[i].0 != Pkt::Acked
                    {
                        let cancelled = pkts[i].0 == Pkt::Marked;
                        pkts[i].0 = Pkt::Acked;
                        // The receiver counts the packet once, on arrival.
                        c.on_ack(now, &ack_of(size(i), cancelled, Some(size(i))));
                    }
                }
                Op::Abandon(k) => {
                    if let Some(first) = pick(k) {
                        let (mut b, mut n, mut r) = (0, 0, 0);
                        for (i, p) in pkts.iter_mut().enumerate().skip(first) {
                            if !p.1 {
                                match p.0 {
                                    Pkt::Outstanding => (b, n) = (b + size(i), n + 1),
                                    Pkt::Marked => r += size(i),
                                    Pkt::Acked => {}
                                }
                                p.1 = true;
                            }
                        }
                        c.abandon(now, b, n, r);
                    }
                }
            }
            let count = |s: Pkt| {
                pkts.iter()
                    .enumerate()
                    .filter(|(_, p)| p.0 == s && !p.1)
                    .map(|(i, _)| size(i))
                    .sum::<u64>()
            };
            let outstanding = count(Pkt::Outstanding);
            prop_assert!(c.inflight() >= 0, "inflight {} < 0", c.inflight());
            prop_assert_eq!(c.inflight(), outstanding as i64, "inflight after {:?}", o);
            prop_assert_eq!(
                c.rtx_backlog(),
                count(Pkt::Marked),
                "rtx_backlog after {:?}",
                o
            );
            let n_out = pkts
                .iter()
                .filter(|p| p.0 == Pkt::Outstanding && !p.1)
                .count();
            prop_assert_eq!(c.inflight_pkts() as usize, n_out);
            if let Some(n) = c.nscc() {
                prop_assert_eq!(
                    n.inflight(),
                    outstanding as i64,
                    "NSCC inflight after {:?}",
                    o
                );
            }
            if let Some(r) = c.rccc() {
                prop_assert_eq!(r.rtx_backlog(), count(Pkt::Marked), "RCCC rtx_backlog");
            }
            if let Some(p) = &c.pft {
                prop_assert_eq!(p.used_bytes(), outstanding, "PFT used bytes");
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// `inflight` (and NSCC's, RCCC's retransmit backlog, PFT's used
        /// bytes) = the bytes of the packets outstanding, never negative,
        /// whatever mix of losses, retransmissions and late or duplicate
        /// ACKs the ledger reports.
        #[test]
        fn inflight_is_the_outstanding_bytes(
            (alg, pft) in algorithm(),
            ops in proptest::collection::vec(op(), 0..300),
        ) {
            run(alg, pft, &ops)?;
        }
    }

    /// The trace of the veth lab in miniature: a packet declared lost by an
    /// RTO is acknowledged (its original was only late) before its
    /// retransmission leaves.
    #[test]
    fn an_ack_of_a_packet_waiting_for_retransmission_cancels_it() {
        let nscc = nscc_for(100_000_000_000, Duration::from_micros(6), 1000, true);
        let mut c = ccc_with(1000, Algorithm::NsccRccc(nscc, RcccConfig::default()));
        let t = Instant::ZERO;
        c.on_new_data(t, 2000);
        c.on_send(t, 1000, false);
        c.on_send(t, 1000, false);
        c.on_inferred_loss(t, 1000, None);
        assert_eq!((c.inflight(), c.rtx_backlog()), (1000, 1000));
        // One ACK covers both: one outstanding, one waiting to be resent.
        let mut a = ack_of(2000, false, Some(2000));
        a.acked_pkts = 2;
        a.rtx_cancelled_bytes = 1000;
        a.rtx_cancelled_pkts = 1;
        c.on_ack(t, &a);
        assert_eq!(c.inflight(), 0);
        assert_eq!(c.inflight_pkts(), 0);
        assert_eq!(c.rtx_backlog(), 0);
        assert_eq!(c.nscc().unwrap().inflight(), 0);
        assert_eq!(c.rccc().unwrap().rtx_backlog(), 0);
        assert_eq!(c.state(), CccState::Idle);
    }

    /// An operation on two CCCs at once ([`send_new_is_the_calls_in_turn`]).
    #[derive(Debug, Clone, Copy)]
    enum TwinOp {
        Send(u32),
        NewData(u64),
        Ack(u64, bool),
        Loss(u64),
        Wait(u64),
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// `send_new` answers and changes exactly what `can_send`,
        /// `send_params`, `on_send`, `can_send` and `credit_target` in turn
        /// do (and draws the same random numbers), for every algorithm,
        /// with and without PFT, through sends, new data, ACKs (ECN marked
        /// or not), losses and time.
        #[test]
        fn send_new_is_the_calls_in_turn(
            (alg, pft) in algorithm(),
            ops in prop::collection::vec(prop_oneof![
                6 => (1u32..3000).prop_map(TwinOp::Send),
                1 => (0u64..20_000).prop_map(TwinOp::NewData),
                3 => ((1u64..3000), any::<bool>()).prop_map(|(b, e)| TwinOp::Ack(b, e)),
                1 => (1u64..3000).prop_map(TwinOp::Loss),
                2 => (0u64..50).prop_map(TwinOp::Wait),
            ], 0..200),
        ) {
            use uet_wire::rand::Rng as WireRng;
            let cfg = CccConfig {
                mtu: 1000,
                algorithm: alg,
                pft: pft.then(PftConfig::default),
                ..CccConfig::default()
            };
            let (mut ra, mut rb) = (Xoshiro256::seed_from_u64(3), Xoshiro256::seed_from_u64(3));
            let mut a = Ccc::new(cfg.clone(), Instant::ZERO, &mut ra);
            let mut b = Ccc::new(cfg, Instant::ZERO, &mut rb);
            let mut now = Instant::ZERO;
            a.on_new_data(now, 10_000);
            b.on_new_data(now, 10_000);
            for op in ops {
                match op {
                    TwinOp::Send(n) => {
                        let one = a.send_new(now, n, &mut ra);
                        let calls = if b.can_send(now, n) {
                            let params = b.send_params(now, &mut rb);
                            b.on_send(now, u64::from(n), false);
                            Some(NewSend {
                                params,
                                window_closing: !b.can_send(now, n),
                                credit_target: b.credit_target(),
                            })
                        } else {
                            None
                        };
                        prop_assert_eq!(one, calls);
                    }
                    TwinOp::NewData(n) => {
                        a.on_new_data(now, n);
                        b.on_new_data(now, n);
                    }
                    TwinOp::Ack(n, ecn) => {
                        let mut ack = ack_of(n, false, Some(n));
                        ack.ecn_marked = ecn;
                        ack.tx_time = now;
                        a.on_ack(now, &ack);
                        b.on_ack(now, &ack);
                    }
                    TwinOp::Loss(n) => {
                        a.on_inferred_loss(now, n, None);
                        b.on_inferred_loss(now, n, None);
                    }
                    TwinOp::Wait(us) => now += Duration::from_micros(us),
                }
                prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
                prop_assert_eq!(WireRng::next_u64(&mut ra), WireRng::next_u64(&mut rb));
            }
        }
    }
}
