//! The congestion control context and its common hooks (`uet-spec-notes.md`
//! §5.1, SPEC-TR §3.6.12).

use std::collections::VecDeque;

use uet_wire::rand::Rng;
use uet_wire::time::{Duration, Instant};
use uet_wire::{Credit24, EntropyValue};

use crate::entropy::{EvConfig, EvFeedback, EvSelector};
use crate::nscc::{Nscc, NsccAck, NsccConfig, NsccNack};
use crate::pft::{Pft, PftConfig};
use crate::rccc::{RcccConfig, RcccSource};

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
    /// A fixed window of `window` bytes in flight ("none" in `cc-eval.md`).
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
    /// Bytes in flight (signed, as NSCC's `inflight`: reordering may make it
    /// dip below zero transiently).
    inflight: i64,
    inflight_pkts: u32,
    ev: EvSelector,
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
    pub fn credit_target(&self) -> Option<Credit24> {
        let cap = self
            .nscc
            .as_ref()
            .map(|n| n.cwnd() + u64::from(self.config.mtu));
        self.rccc.as_ref().map(|r| r.credit_target(cap))
    }

    /// A CREDIT_REQ payload when RCCC's credit timeout says the source needs
    /// credit it has not been given (§5.3).
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
    pub fn abandon(
        &mut self,
        now: Instant,
        inflight_bytes: u64,
        inflight_pkts: u32,
        rtx_bytes: u64,
    ) {
        self.inflight = self.inflight.saturating_sub(inflight_bytes as i64).max(0);
        self.inflight_pkts = self.inflight_pkts.saturating_sub(inflight_pkts);
        self.rtx_backlog = self.rtx_backlog.saturating_sub(rtx_bytes);
        self.update_state(now);
    }

    /// `CanSend`: whether a packet of `bytes` may leave now — the AND of the
    /// enabled algorithms (§5.1), and PFT's pacing when it throttles.
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
            ev: self.ev.next_ev_at(now, rng),
            credit_target: self.credit_target(),
            ack_req: self.nscc.as_ref().is_some_and(Nscc::ack_request),
        }
    }

    /// `OnSend`: a packet of `bytes` left (a retransmission if `is_rtx`).
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
        self.ev.process_ev_at(now, ack.ev, feedback);
        self.inflight = self.inflight.saturating_sub(ack.acked_bytes as i64);
        self.inflight_pkts = self.inflight_pkts.saturating_sub(ack.acked_pkts);
        if let Some(n) = &mut self.nscc {
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
                },
            );
            let after = n.cwnd();
            if after != before {
                self.push_event(CmsEvent::Window { now, cwnd: after });
            }
        }
        if let Some(r) = &mut self.rccc {
            r.on_ack(now);
            if let Some(c) = ack.credit {
                r.on_credit_update(now, c);
            }
        }
        if let Some(p) = &mut self.pft {
            p.on_ack(now, ack.acked_bytes);
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

    /// `OnNACK`: the packet is marked for retransmission.
    pub fn on_nack(&mut self, now: Instant, nack: &NackEvent) {
        let feedback = if nack.trimmed && !nack.trimmed_last_hop {
            EvFeedback::Nack
        } else if nack.ecn_marked {
            EvFeedback::Ecn
        } else {
            EvFeedback::Good
        };
        self.ev.process_ev_at(now, nack.ev, feedback);
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
            self.ev.process_ev_at(now, ev, EvFeedback::Timeout);
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
    pub fn poll_event(&mut self) -> Option<CmsEvent> {
        self.events.pop_front()
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

    fn update_state(&mut self, now: Instant) {
        let waiting = self.backlog > 0 || self.rtx_backlog > 0;
        let next = if waiting {
            if self.can_send(now, self.config.mtu) {
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

    #[test]
    fn nscc_window_gates_sending() {
        let mut rng = Xoshiro256::seed_from_u64(3);
        let n = NsccConfig::new(
            100_000_000_000,
            100_000_000_000,
            Duration::from_micros(6),
            4096,
            true,
        );
        let max = n.max_wnd;
        let cfg = CccConfig {
            mtu: 4096,
            algorithm: Algorithm::Nscc(n),
            ..CccConfig::default()
        };
        let mut c = Ccc::new(cfg, Instant::ZERO, &mut rng);
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
