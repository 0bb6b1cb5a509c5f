//! The congestion control context and its common hooks (`uet-spec-notes.md`
//! §5.1, SPEC-TR §3.6.12).

use std::collections::VecDeque;

use uet_wire::rand::Rng;
use uet_wire::time::{Duration, Instant};
use uet_wire::{Credit24, EntropyValue};

use crate::entropy::{EvFeedback, EvSelector};

/// Configuration of one CCC.
#[derive(Debug, Clone, PartialEq)]
pub struct CccConfig {
    /// Nominal size of a full packet (`transport_pktsize + 40`, §1), the unit
    /// of `can_send`.
    pub mtu: u32,
    /// The algorithm.
    pub algorithm: Algorithm,
    /// log2 of the EV space for spraying (spec "typically 256" → 8).
    pub ev_bits: u8,
    /// Base of the EV space (bits above the sprayed ones).
    pub ev_base: u16,
}

impl Default for CccConfig {
    fn default() -> Self {
        Self {
            mtu: 4096 + 64,
            algorithm: Algorithm::Fixed { window: 64 * 4096 },
            ev_bits: 8,
            ev_base: 0xc000,
        }
    }
}

/// The congestion-control algorithm of a CCC.
#[derive(Debug, Clone, PartialEq)]
pub enum Algorithm {
    /// A fixed window of `window` bytes in flight ("none" in `cc-eval.md`).
    Fixed {
        /// Bytes allowed in flight.
        window: u64,
    },
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
    events: VecDeque<CmsEvent>,
}

impl Ccc {
    /// A new CCC in the IDLE state.
    pub fn new(config: CccConfig, rng: &mut impl Rng) -> Self {
        let ev = EvSelector::oblivious(config.ev_base, config.ev_bits, rng);
        Self {
            config,
            state: CccState::Idle,
            backlog: 0,
            rtx_backlog: 0,
            inflight: 0,
            inflight_pkts: 0,
            ev,
            events: VecDeque::new(),
        }
    }

    /// A CCC that uses one EV for every packet (ROD single-path mode, §6).
    pub fn single_path(config: CccConfig, ev: EntropyValue) -> Self {
        Self {
            config,
            state: CccState::Idle,
            backlog: 0,
            rtx_backlog: 0,
            inflight: 0,
            inflight_pkts: 0,
            ev: EvSelector::Single(ev),
            events: VecDeque::new(),
        }
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
        match self.config.algorithm {
            Algorithm::Fixed { window } => window,
        }
    }

    /// `OnNewData`: `bytes` of new data became ready to send.
    pub fn on_new_data(&mut self, now: Instant, bytes: u64) {
        self.backlog = self.backlog.saturating_add(bytes);
        self.update_state(now);
    }

    /// Withdraws backlog that will not be sent (an operation failed).
    pub fn withdraw(&mut self, now: Instant, bytes: u64) {
        self.backlog = self.backlog.saturating_sub(bytes);
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
    /// enabled algorithms.
    pub fn can_send(&self, bytes: u32) -> bool {
        match self.config.algorithm {
            Algorithm::Fixed { window } => {
                self.inflight.saturating_add(i64::from(bytes)) <= window as i64
                    || self.inflight <= 0
            }
        }
    }

    /// `GetSendParams`: EV, credit target and ACK request for the next packet.
    pub fn send_params(&mut self, _now: Instant, rng: &mut impl Rng) -> SendParams {
        SendParams {
            ev: self.ev.next_ev(rng),
            credit_target: None,
            ack_req: false,
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
        self.update_state(now);
    }

    /// `OnACK`.
    pub fn on_ack(&mut self, now: Instant, ack: &AckEvent) {
        let feedback = if ack.ecn_marked {
            EvFeedback::Ecn
        } else {
            EvFeedback::Good
        };
        self.ev.process_ev(ack.ev, feedback);
        self.inflight = self.inflight.saturating_sub(ack.acked_bytes as i64);
        self.inflight_pkts = self.inflight_pkts.saturating_sub(ack.acked_pkts);
        self.update_state(now);
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
        self.ev.process_ev(nack.ev, feedback);
        self.mark_for_retransmit(nack.bytes);
        self.update_state(now);
    }

    /// `OnInferredLoss`: an RTO (or SACK inference) declared `bytes` lost.
    pub fn on_inferred_loss(&mut self, now: Instant, bytes: u64, ev: Option<EntropyValue>) {
        if let Some(ev) = ev {
            self.ev.process_ev(ev, EvFeedback::Timeout);
        }
        self.mark_for_retransmit(bytes);
        self.update_state(now);
    }

    /// `OnCreditUpdate`: cumulative credit from the destination (RCCC).
    pub fn on_credit_update(&mut self, _now: Instant, _credit: Credit24) {}

    /// The next state change, for tracing.
    pub fn poll_event(&mut self) -> Option<CmsEvent> {
        self.events.pop_front()
    }

    fn mark_for_retransmit(&mut self, bytes: u64) {
        self.inflight = self.inflight.saturating_sub(bytes as i64);
        self.inflight_pkts = self.inflight_pkts.saturating_sub(1);
        self.rtx_backlog = self.rtx_backlog.saturating_add(bytes);
    }

    fn update_state(&mut self, now: Instant) {
        let waiting = self.backlog > 0 || self.rtx_backlog > 0;
        let next = if waiting {
            if self.can_send(self.config.mtu) {
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
            // Bounded: a consumer that never polls loses old events, not memory.
            if self.events.len() >= 1024 {
                self.events.pop_front();
            }
            self.events.push_back(CmsEvent::State { now, state: next });
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
        let mut c = Ccc::new(cfg, &mut rng);
        let t = Instant::ZERO;
        assert_eq!(c.state(), CccState::Idle);
        c.on_new_data(t, 3000);
        assert_eq!(c.state(), CccState::Ready);
        c.on_send(t, 1000, false);
        c.on_send(t, 1000, false);
        assert!(!c.can_send(1000));
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
        let c = Ccc::new(cfg, &mut rng);
        assert!(c.can_send(4000));
    }
}
