//! The NSCC sender: one per CCC (`docs/protocol-notes.md` §5.2; SPEC-TR
//! §3.6.13.4-§3.6.13.7). Every function follows the spec pseudo-code line by
//! line; the spec's names are in the comments (`ccc.cwnd`, `quick_adapt`, …).
//!
//! Arithmetic: byte counts are integers (`ccc.cwnd` and `ccc.inflight` are
//! integers in Table 3-77); the increase terms (`alpha`, `fi`, `fi_scale`,
//! `eta`, the MD factor) are `f64`, as the spec allows any float precision
//! (SPEC-TR §3.6.13.3), and are truncated toward zero when they reach
//! `cwnd`. `ccc.base_rtt` is kept in 128 ns units (Table 3-77); RTT samples
//! and delays are nanoseconds.

use std::collections::VecDeque;

use uet_wire::time::{Duration, Instant};

use super::config::{NsccConfig, TIME_UNIT_NS, duration_ns};

/// Most events [`Nscc::poll_event`] keeps; older ones are dropped (and
/// counted) when the caller does not poll.
pub const EVENT_CAPACITY: usize = 256;

/// The largest `rcv_cwnd_pend` (7 bits, §2.7, §5.2 DFC).
pub const MAX_RCV_CWND_PEND: u8 = 127;

/// What NSCC needs from an ACK (the arguments of `NSCC.OnACK`, SPEC-TR
/// §3.6.13.5). The ACK's arrival time is [`arrival`](Self::arrival), else
/// the `now` passed with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NsccAck {
    /// `newly_rcvd_bytes`: growth of the destination's `rcvd_bytes` since the
    /// previous ACK of the PDC, in bytes (256-B units × 256, see
    /// [`RcvdBytesTracker`](crate::nscc::RcvdBytesTracker)).
    pub newly_rcvd_bytes: u64,
    /// `M_Flag`: the acknowledged packet arrived ECN-CE marked.
    pub ecn: bool,
    /// `pkt_tx_state.tx_timestamp`: when the acknowledged packet was last
    /// (re)transmitted.
    pub tx_time: Instant,
    /// `pkt_tx_state.rtx_count`: how often that packet was retransmitted
    /// (the spec's 2-bit counter saturates at "more than once").
    pub rtx_count: u32,
    /// `Retx_Flag`: the ACK echoes `pds.flags.retx`.
    pub retx: bool,
    /// `Service_Time`: time the packet spent at the destination.
    pub service_time: Duration,
    /// `Rcv_Cwnd_Pend`: destination window penalty 0-127 (larger values count
    /// as 127).
    pub rcv_cwnd_pend: u8,
    /// `Restore_Cwnd` (`rc`): restore the window saved when DFC began.
    pub restore_cwnd: bool,
    /// `ack_arrival_time`, when the host stamped the ACK's arrival before
    /// it was handled (an earlier time than `now` while it waited to be
    /// read); `None`: it arrived at `now`.
    pub arrival: Option<Instant>,
}

/// What NSCC needs from a NACK (the arguments of `NSCC.OnNACK`, SPEC-TR
/// §3.6.13.5). The NACK's arrival time is the `now` passed with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NsccNack {
    /// `nominal_pktsize` of the NACKed packet.
    pub bytes: u64,
    /// `pkt_tx_state.tx_timestamp`.
    pub tx_time: Instant,
    /// `pkt_tx_state.rtx_count`.
    pub rtx_count: u32,
    /// `Retx_Flag` echoed in the NACK.
    pub retx: bool,
    /// `reason` is `UET_TRIMMED` or `UET_TRIMMED_LASTHOP`.
    pub trimmed: bool,
    /// With `trimmed`: the reason is `UET_TRIMMED_LASTHOP`. Ignored when not
    /// trimmed.
    pub last_hop: bool,
    /// `rccc`: RCCC is enabled on this CCC (it owns last-hop trims).
    pub rccc_enabled: bool,
}

/// Why the window changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CwndReason {
    /// `fast_increase`: cwnd grew by `newly_rcvd_bytes * fi_scale`.
    FastIncrease,
    /// `fulfill_adjustment` applied the accumulated `inc_bytes / cwnd` and
    /// possibly `eta`. The flags say which increases were accumulated since
    /// the previous adjustment.
    Adjustment {
        /// `proportional_increase` contributed.
        proportional: bool,
        /// `fair_increase` contributed.
        fair: bool,
        /// `eta` was added (an adjust period passed).
        eta: bool,
    },
    /// `multiplicative_decrease`.
    MultiplicativeDecrease,
    /// `quick_adapt` set cwnd to the achieved bytes.
    QuickAdapt,
    /// `apply_cwnd_penalty` with `Rcv_Cwnd_Pend > 0` (destination flow
    /// control).
    DfcPenalty,
    /// `apply_cwnd_penalty` restored `saved_cwnd` on `Restore_Cwnd`.
    DfcRestore,
    /// A trim NACK took `nominal_pktsize` off cwnd (`OnNACK`).
    Nack,
    /// `OnInferredLoss` took `nominal_pktsize` off cwnd.
    InferredLoss,
    /// A lower base RTT shrank `max_wnd` below cwnd, which was clamped (see
    /// [`Nscc::on_ack`]).
    MaxWnd,
}

/// A state change, for tracing and plots.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NsccEvent {
    /// The window changed.
    Cwnd {
        /// When.
        now: Instant,
        /// The new window in bytes.
        cwnd: u64,
        /// Why.
        reason: CwndReason,
    },
    /// `update_base_rtt` lowered the base RTT and re-derived `max_wnd`.
    BaseRtt {
        /// When.
        now: Instant,
        /// The new base RTT (a multiple of 128 ns).
        base_rtt: Duration,
        /// The new `max_wnd` in bytes.
        max_wnd: u64,
    },
}

/// The NSCC sender state of one CCC (Table 3-77) and its event handlers.
#[derive(Debug, Clone)]
pub struct Nscc {
    cfg: NsccConfig,
    /// `ccc.cwnd`.
    cwnd: u64,
    /// `ccc.inflight` (signed).
    inflight: i64,
    /// `ccc.saved_cwnd`.
    saved_cwnd: u64,
    /// `ccc.base_rtt` in 128 ns units.
    base_rtt: u64,
    /// `ccc.max_wnd`.
    max_wnd: u64,
    /// `ccc.achieved_bytes`.
    achieved_bytes: u64,
    /// `ccc.received_bytes`.
    received_bytes: u64,
    /// `ccc.fi_count`.
    fi_count: u64,
    /// `ccc.trigger_qa`.
    trigger_qa: bool,
    /// `ccc.qa_endtime`; `None` is the spec's 0 ("never set").
    qa_endtime: Option<Instant>,
    /// `ccc.bytes_to_ignore`.
    bytes_to_ignore: u64,
    /// `ccc.bytes_ignored`.
    bytes_ignored: u64,
    /// `ccc.inc_bytes`.
    inc_bytes: f64,
    /// Which increases fed `inc_bytes` (for [`CwndReason::Adjustment`]).
    inc_proportional: bool,
    inc_fair: bool,
    /// `ccc.last_adjust_time`.
    last_adjust_time: Instant,
    /// `ccc.increase` (fast-increase mode).
    increase: bool,
    /// `ccc.last_dec_time`.
    last_dec_time: Instant,
    /// State behind `update_delay` / `get_avg_delay`, in ns.
    avg_delay: f64,
    probe: Probe,
    events: VecDeque<NsccEvent>,
    events_dropped: u64,
}

/// Base-RTT probing state (§3.6.13.7).
#[derive(Debug, Clone, Copy, Default)]
struct Probe {
    /// An ACK or NACK has arrived.
    feedback_seen: bool,
    /// A cached base RTT was given, or the transfer is at most one BDP.
    skip_cached: bool,
    skip_small: bool,
    /// A probe RTT sample arrived.
    done: bool,
    sent: u8,
    last_sent: Option<Instant>,
}

impl Nscc {
    /// A new NSCC CCC created at `now`, with the Table 3-77 initial state:
    /// `cwnd` = `initial_cwnd` (MaxWnd by default), `base_rtt` =
    /// `config_base_rtt`, `last_adjust_time` = `last_dec_time` = `now`.
    #[must_use]
    pub fn new(config: NsccConfig, now: Instant) -> Self {
        let mtu = config.mtu.max(1);
        let max_wnd = config.max_wnd.max(mtu);
        let cwnd = config.initial_cwnd.clamp(mtu, max_wnd);
        let base_rtt = (duration_ns(config.config_base_rtt) / TIME_UNIT_NS).max(1);
        Self {
            cfg: NsccConfig {
                mtu,
                max_wnd,
                ..config
            },
            cwnd,
            inflight: 0,
            saved_cwnd: 0,
            base_rtt,
            max_wnd,
            achieved_bytes: 0,
            received_bytes: 0,
            fi_count: 0,
            trigger_qa: false,
            qa_endtime: None,
            bytes_to_ignore: 0,
            bytes_ignored: 0,
            inc_bytes: 0.0,
            inc_proportional: false,
            inc_fair: false,
            last_adjust_time: now,
            increase: false,
            last_dec_time: now,
            avg_delay: 0.0,
            probe: Probe::default(),
            events: VecDeque::new(),
            events_dropped: 0,
        }
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &NsccConfig {
        &self.cfg
    }

    /// `ccc.cwnd` in bytes.
    #[must_use]
    #[inline]
    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }

    /// `ccc.inflight` in bytes; may dip slightly below zero (256-B rounding of
    /// `rcvd_bytes`, reordered ACKs, SPEC-TR §3.6.13).
    #[must_use]
    pub fn inflight(&self) -> i64 {
        self.inflight
    }

    /// `ccc.base_rtt` (a multiple of 128 ns).
    #[must_use]
    pub fn base_rtt(&self) -> Duration {
        Duration::from_nanos(self.base_rtt.saturating_mul(TIME_UNIT_NS))
    }

    /// `ccc.max_wnd` in bytes.
    #[must_use]
    pub fn max_wnd(&self) -> u64 {
        self.max_wnd
    }

    /// `ccc.saved_cwnd`: the window saved when destination flow control
    /// began, 0 when none is saved.
    #[must_use]
    pub fn saved_cwnd(&self) -> u64 {
        self.saved_cwnd
    }

    /// `get_avg_delay()`: the delay EWMA.
    #[must_use]
    pub fn avg_delay(&self) -> Duration {
        Duration::from_nanos(self.avg_delay as u64)
    }

    /// Whether fast-increase mode (`ccc.increase`) is on.
    #[must_use]
    pub fn in_fast_increase(&self) -> bool {
        self.increase
    }

    /// `NSCC.CanSend()`: `inflight + bytes <= cwnd`. Pass the MTU for the
    /// spec's rule; the real packet size is allowed too (SPEC-TR §3.6.13.5,
    /// with the caveat that small packets may then starve large ones).
    #[must_use]
    #[inline]
    pub fn can_send(&self, bytes: u64) -> bool {
        i128::from(self.inflight) + i128::from(bytes) <= i128::from(self.cwnd)
    }

    /// `NSCC.AckRequest()`: `(cwnd - inflight) < MTU or cwnd <
    /// ACK_Gen_Trigger`. Call after [`on_send`](Self::on_send) counted the
    /// packet (SPEC-TR §3.6.13.5).
    #[must_use]
    #[inline]
    pub fn ack_request(&self) -> bool {
        i128::from(self.cwnd) - i128::from(self.inflight) < i128::from(self.cfg.mtu)
            || self.cwnd < self.cfg.ack_gen_trigger
    }

    /// `NSCC.OnSend(nominal_pktsize)`: `ccc.inflight += nominal_pktsize`.
    #[inline]
    pub fn on_send(&mut self, bytes: u64) {
        self.inflight = self.inflight.saturating_add(to_i64(bytes));
    }

    /// Packets of `bytes` that a NACK or loss inference had taken out of
    /// `inflight` were acknowledged before their retransmission left, so
    /// they will not be resent \[I\]. The pseudo-code has no such hook: its
    /// `OnACK` un-marks them and subtracts their `newly_rcvd_bytes` from
    /// `inflight` a second time, which leaves `inflight` low by their size
    /// for good. Adding them back here (before `on_ack` counts them as
    /// received) keeps `inflight` = bytes sent and neither received nor
    /// declared lost.
    pub fn on_rtx_cancelled(&mut self, bytes: u64) {
        self.inflight = self.inflight.saturating_add(to_i64(bytes));
    }

    /// Caps `inflight` at `outstanding`, the bytes the source's ledger
    /// still has in flight \[I\]. `OnACK` takes `newly_rcvd_bytes` from the
    /// destination's count (256-byte units, only on ACKs that carry NSCC
    /// state), the source counts what it sent; when the two disagree the
    /// difference stays in `inflight` for good, and a window shrunk to a
    /// few MTUs can then stay shut with nothing in flight — no ACK, no RTO
    /// ever opens it (seen on the veth lab: a sender with 181 KB of backlog,
    /// cwnd 3 KB and an empty ledger, stalled for good). Bytes the source
    /// no longer has outstanding cannot be in flight.
    #[inline]
    pub fn clamp_inflight(&mut self, outstanding: i64) {
        self.inflight = self.inflight.min(outstanding.max(0));
    }

    /// Packets of `bytes` still counted in `inflight` will never be
    /// acknowledged (their PDC closed in error): they leave `inflight`
    /// without a congestion signal \[I\].
    pub fn on_abandon(&mut self, bytes: u64) {
        self.inflight = self.inflight.saturating_sub(to_i64(bytes));
    }

    /// `NSCC.OnACK` (SPEC-TR §3.6.13.5), the ACK arriving at `now`.
    ///
    /// Two guards the pseudo-code leaves implicit: an RTT sample that is not
    /// positive (the reported service time exceeds the measured RTT) is
    /// `INVALID_RTT`, so a bad `Service_Time` cannot drive `base_rtt` to zero;
    /// and when a lower base RTT shrinks `max_wnd` below cwnd, cwnd is clamped
    /// at once rather than at the next `fulfill_adjustment`, so `cwnd <=
    /// max_wnd` always holds.
    pub fn on_ack(&mut self, now: Instant, ack: &NsccAck) {
        self.probe.feedback_seen = true;
        let newly = ack.newly_rcvd_bytes;
        // ccc.inflight -= newly_rcvd_bytes
        self.inflight = self.inflight.saturating_sub(to_i64(newly));
        // ccc.bytes_ignored / received_bytes / achieved_bytes += newly_rcvd_bytes
        self.bytes_ignored = self.bytes_ignored.saturating_add(newly);
        self.received_bytes = self.received_bytes.saturating_add(newly);
        self.achieved_bytes = self.achieved_bytes.saturating_add(newly);

        // rtt_sample = calculate_rtt(pkt_tx_state, ack_arrival_time, Service_Time, Retx_Flag)
        let arrival = ack.arrival.map_or(now, |t| t.min(now));
        let rtt = calculate_rtt(
            ack.tx_time,
            ack.rtx_count,
            arrival,
            ack.service_time,
            ack.retx,
        );
        // rcv_limit_mode = apply_cwnd_penalty(Rcv_Cwnd_Pend, Restore_Cwnd, newly_rcvd_bytes)
        let rcv_limit_mode =
            self.apply_cwnd_penalty(now, ack.rcv_cwnd_pend, ack.restore_cwnd, newly);

        // if rtt_sample != INVALID_RTT: update_base_rtt; delay = rtt - base_rtt; update_delay
        // else: return
        let Some(rtt) = rtt else { return };
        self.update_base_rtt(now, rtt);
        let delay = rtt.saturating_sub(self.base_rtt_ns());
        self.update_delay(delay);

        // if quick_adapt(is_loss=False, M_Flag, delay): return
        if self.quick_adapt(now, false, ack.ecn, delay) {
            return;
        }

        // The four quadrants (three act).
        let tq = duration_ns(self.cfg.target_qdelay);
        if !ack.ecn && delay >= tq && !rcv_limit_mode {
            self.fair_increase(newly);
        } else if !ack.ecn && delay < tq && !rcv_limit_mode {
            self.proportional_increase(now, newly, delay);
        } else if ack.ecn && delay >= tq {
            self.multiplicative_decrease(now);
        }

        // if (now - last_adjust_time) >= adjust_period_threshold
        //    or received_bytes > adjust_bytes_threshold: fulfill_adjustment()
        if now.saturating_since(self.last_adjust_time) >= self.cfg.adjust_period_threshold
            || self.received_bytes > self.cfg.adjust_bytes_threshold
        {
            self.fulfill_adjustment(now);
        }
    }

    /// `NSCC.OnNACK` (SPEC-TR §3.6.13.5), the NACK arriving at `now`.
    /// Non-trim NACKs only return the bytes from `inflight` (and may lower
    /// the base RTT).
    pub fn on_nack(&mut self, now: Instant, nack: &NsccNack) {
        self.probe.feedback_seen = true;
        // adjust_cwnd = False; ccc.inflight -= nominal_pktsize
        let mut adjust_cwnd = false;
        self.inflight = self.inflight.saturating_sub(to_i64(nack.bytes));

        // rtt_sample = calculate_rtt(pkt_tx_state, nack_arrival_time, service_time=0, Retx_Flag)
        if let Some(rtt) =
            calculate_rtt(nack.tx_time, nack.rtx_count, now, Duration::ZERO, nack.retx)
        {
            self.update_base_rtt(now, rtt);
        }

        // if reason in {UET_TRIMMED, UET_TRIMMED_LASTHOP}:
        //     update_delay(config_base_rtt); bytes_ignored += nominal_pktsize
        if nack.trimmed {
            self.update_delay(duration_ns(self.cfg.config_base_rtt));
            self.bytes_ignored = self.bytes_ignored.saturating_add(nack.bytes);
        }

        // if reason == UET_TRIMMED or (reason == UET_TRIMMED_LASTHOP and not rccc):
        if nack.trimmed && (!nack.last_hop || !nack.rccc_enabled) {
            adjust_cwnd = true;
            self.trigger_qa = true;
            // quick_adapt(is_loss=True, M_Flag=1, delay=0)
            if self.quick_adapt(now, true, true, 0) {
                adjust_cwnd = false;
            }
        }

        // if adjust_cwnd: cwnd = max(cwnd - nominal_pktsize, MTU)
        if adjust_cwnd {
            let old = self.cwnd;
            self.cwnd = self.cwnd.saturating_sub(nack.bytes).max(self.cfg.mtu);
            self.emit_cwnd(now, old, CwndReason::Nack);
        }
    }

    /// `NSCC.OnInferredLoss(nominal_pktsize)` (SPEC-TR §3.6.13.5): an RTO or
    /// SACK inference declared `bytes` lost at `now`.
    pub fn on_inferred_loss(&mut self, now: Instant, bytes: u64) {
        // cwnd = max(cwnd - nominal_pktsize, MTU)
        let old = self.cwnd;
        self.cwnd = self.cwnd.saturating_sub(bytes).max(self.cfg.mtu);
        self.emit_cwnd(now, old, CwndReason::InferredLoss);
        // ccc.bytes_ignored += nominal_pktsize; ccc.inflight -= nominal_pktsize
        self.bytes_ignored = self.bytes_ignored.saturating_add(bytes);
        self.inflight = self.inflight.saturating_sub(to_i64(bytes));
    }

    // ---- base-RTT probing (SPEC-TR §3.6.13.7) ----

    /// Starts from a base RTT cached from an earlier CCC to the same
    /// destination: it lowers `base_rtt` (and `max_wnd`) if smaller, and
    /// makes the probe unnecessary (§3.6.13.7).
    pub fn use_cached_base_rtt(&mut self, now: Instant, base_rtt: Duration) {
        self.probe.skip_cached = true;
        if let Some(ns) = positive_ns(base_rtt) {
            self.update_base_rtt(now, ns);
        }
    }

    /// Tells NSCC how many bytes the transfer will carry when known: a
    /// transfer of at most one BDP needs no probe (§3.6.13.7).
    pub fn set_transfer_hint(&mut self, total_bytes: u64) {
        self.probe.skip_small = total_bytes <= self.cfg.bdp;
    }

    /// Whether the caller should send a PROBE CP on the control traffic class
    /// now (§3.6.13.7): after the first ACK or NACK of this CCC, unless a
    /// cached base RTT was given, the transfer is at most one BDP, or a probe
    /// already answered. An unanswered probe is repeated after
    /// `probe_timeout`, at most `probe_attempts` times in all (\[I]).
    #[must_use]
    pub fn wants_probe(&self, now: Instant) -> bool {
        let p = &self.probe;
        p.feedback_seen
            && !p.skip_cached
            && !p.skip_small
            && !p.done
            && p.sent < self.cfg.probe_attempts
            && p.last_sent
                .is_none_or(|t| now.saturating_since(t) >= self.cfg.probe_timeout)
    }

    /// The caller sent a PROBE CP at `now`.
    pub fn on_probe_sent(&mut self, now: Instant) {
        self.probe.sent = self.probe.sent.saturating_add(1);
        self.probe.last_sent = Some(now);
    }

    /// The probe's ACK arrived at `now` with round trip `rtt` (service time
    /// already subtracted by the caller): `update_base_rtt(rtt)`.
    pub fn on_probe_rtt(&mut self, now: Instant, rtt: Duration) {
        self.probe.done = true;
        if let Some(ns) = positive_ns(rtt) {
            self.update_base_rtt(now, ns);
        }
    }

    // ---- events ----

    /// The next window or base-RTT change, oldest first.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<NsccEvent> {
        self.events.pop_front()
    }

    /// Events dropped because more than [`EVENT_CAPACITY`] were pending.
    #[must_use]
    pub fn events_dropped(&self) -> u64 {
        self.events_dropped
    }

    // ---- internal functions (SPEC-TR §3.6.13.6) ----

    fn base_rtt_ns(&self) -> u64 {
        self.base_rtt.saturating_mul(TIME_UNIT_NS)
    }

    /// `fulfill_adjustment()`.
    fn fulfill_adjustment(&mut self, now: Instant) {
        let old = self.cwnd;
        // ccc.cwnd += ccc.inc_bytes / ccc.cwnd
        let mut cwnd = self.cwnd as f64 + self.inc_bytes / self.cwnd as f64;
        // if (now - last_adjust_time) >= adjust_period_threshold:
        //     last_adjust_time = now; cwnd += eta
        let eta = now.saturating_since(self.last_adjust_time) >= self.cfg.adjust_period_threshold;
        if eta {
            self.last_adjust_time = now;
            cwnd += self.cfg.eta;
        }
        // if ccc.cwnd > ccc.max_wnd: ccc.cwnd = ccc.max_wnd
        self.cwnd = (cwnd as u64).min(self.max_wnd).max(self.cfg.mtu);
        let reason = CwndReason::Adjustment {
            proportional: self.inc_proportional,
            fair: self.inc_fair,
            eta,
        };
        // ccc.inc_bytes = 0; ccc.received_bytes = 0
        self.clear_increase();
        self.emit_cwnd(now, old, reason);
    }

    /// `fair_increase(newly_rcvd_bytes)`: `inc_bytes += fi * newly`.
    fn fair_increase(&mut self, newly: u64) {
        self.inc_bytes += self.cfg.fi * newly as f64;
        self.inc_fair = true;
    }

    /// `proportional_increase(newly_rcvd_bytes, delay)`.
    fn proportional_increase(&mut self, now: Instant, newly: u64, delay: u64) {
        // fast_increase(newly_rcvd_bytes, delay); if ccc.increase: return
        self.fast_increase(now, newly, delay);
        if self.increase {
            return;
        }
        // ccc.inc_bytes += alpha * newly_rcvd_bytes * (target_qdelay - delay)
        let tq = duration_ns(self.cfg.target_qdelay);
        let headroom_s = tq.saturating_sub(delay) as f64 * 1e-9;
        self.inc_bytes += self.cfg.alpha * newly as f64 * headroom_s;
        self.inc_proportional = true;
    }

    /// `multiplicative_decrease()`.
    fn multiplicative_decrease(&mut self, now: Instant) {
        // ccc.increase = FALSE; ccc.fi_count = 0
        self.increase = false;
        self.fi_count = 0;
        // avg_delay = get_avg_delay()
        let avg = self.avg_delay;
        let tq = duration_ns(self.cfg.target_qdelay) as f64;
        // if avg_delay > target_qdelay and (now - last_dec_time) > base_rtt:
        if avg > tq && now.saturating_since(self.last_dec_time) > self.base_rtt() {
            // cwnd *= max(1 - gamma * (avg_delay - target_qdelay) / avg_delay, max_md_jump)
            let factor = (1.0 - self.cfg.gamma * (avg - tq) / avg).max(self.cfg.max_md_jump);
            let old = self.cwnd;
            // cwnd = max(cwnd, MTU); last_dec_time = now
            self.cwnd = ((self.cwnd as f64 * factor) as u64)
                .max(self.cfg.mtu)
                .min(self.max_wnd);
            self.last_dec_time = now;
            self.emit_cwnd(now, old, CwndReason::MultiplicativeDecrease);
        }
    }

    /// `quick_adapt(is_loss, M_Flag, qdelay)`; `qdelay` in ns.
    fn quick_adapt(&mut self, now: Instant, is_loss: bool, ecn: bool, qdelay: u64) -> bool {
        // if disable_quick_adapt: return FALSE
        if self.cfg.disable_quick_adapt {
            return false;
        }
        let mut qa_done_or_ignore = false;
        if self.bytes_ignored < self.bytes_to_ignore && ecn {
            // Still ignoring the marks of packets sent before the last quick adapt.
            qa_done_or_ignore = true;
        } else if self.qa_endtime.is_none_or(|end| now >= end) {
            // qa_endtime != 0 and (trigger_qa or is_loss or qdelay > qa_threshold)
            //   and achieved_bytes < (max_wnd >> qa_gate)
            let over_threshold = self
                .cfg
                .qa_threshold
                .is_some_and(|th| qdelay > duration_ns(th));
            let gate = self
                .max_wnd
                .checked_shr(u32::from(self.cfg.qa_gate))
                .unwrap_or(0);
            if self.qa_endtime.is_some()
                && (self.trigger_qa || is_loss || over_threshold)
                && self.achieved_bytes < gate
            {
                // cwnd = max(achieved_bytes, MTU); bytes_to_ignore = inflight;
                // bytes_ignored = 0; trigger_qa = FALSE
                let old = self.cwnd;
                self.cwnd = self.achieved_bytes.max(self.cfg.mtu).min(self.max_wnd);
                self.bytes_to_ignore = u64::try_from(self.inflight).unwrap_or(0);
                self.bytes_ignored = 0;
                self.trigger_qa = false;
                qa_done_or_ignore = true;
                self.emit_cwnd(now, old, CwndReason::QuickAdapt);
            }
            // achieved_bytes = 0; qa_endtime = now + base_rtt + target_qdelay
            self.achieved_bytes = 0;
            self.qa_endtime = Some(now + self.base_rtt() + self.cfg.target_qdelay);
        }
        // Ignoring or adapted: reset the fulfill-adjustment counters.
        if qa_done_or_ignore {
            self.clear_increase();
        }
        qa_done_or_ignore
    }

    /// `fast_increase(newly_rcvd_bytes, delay)`.
    fn fast_increase(&mut self, now: Instant, newly: u64, delay: u64) {
        // if delay ~= 0:
        if delay < duration_ns(self.cfg.near_zero_delay) {
            // ccc.fi_count += newly_rcvd_bytes
            self.fi_count = self.fi_count.saturating_add(newly);
            // if fi_count > cwnd or increase:
            if self.fi_count > self.cwnd || self.increase {
                // cwnd += newly * fi_scale; cwnd = min(cwnd, max_wnd); increase = TRUE
                let old = self.cwnd;
                let step = (newly as f64 * self.cfg.fi_scale) as u64;
                self.cwnd = self.cwnd.saturating_add(step).min(self.max_wnd);
                self.increase = true;
                self.emit_cwnd(now, old, CwndReason::FastIncrease);
                return;
            }
        } else {
            self.fi_count = 0;
        }
        self.increase = false;
    }

    /// `update_base_rtt(raw_rtt)`, `raw_rtt` in ns (kept at 128 ns).
    fn update_base_rtt(&mut self, now: Instant, raw_rtt_ns: u64) {
        let units = (raw_rtt_ns / TIME_UNIT_NS).max(1);
        // if ccc.base_rtt > raw_rtt:
        if units < self.base_rtt {
            // base_rtt = raw_rtt; max_wnd = 1.5 * sender.linkspeed * base_rtt
            self.base_rtt = units;
            self.max_wnd = self.cfg.max_wnd_for(self.base_rtt());
            self.push_event(NsccEvent::BaseRtt {
                now,
                base_rtt: self.base_rtt(),
                max_wnd: self.max_wnd,
            });
            if self.cwnd > self.max_wnd {
                let old = self.cwnd;
                self.cwnd = self.max_wnd;
                self.emit_cwnd(now, old, CwndReason::MaxWnd);
            }
        }
    }

    /// `apply_cwnd_penalty(Rcv_Cwnd_Pend, Restore_Cwnd, newly_rcvd_bytes)`
    /// (destination flow control, §3.6.13.2).
    fn apply_cwnd_penalty(&mut self, now: Instant, pend: u8, restore: bool, newly: u64) -> bool {
        let pend = pend.min(MAX_RCV_CWND_PEND);
        if pend > 0 {
            // if saved_cwnd == 0: saved_cwnd = cwnd
            if self.saved_cwnd == 0 {
                self.saved_cwnd = self.cwnd;
            }
            // window_decrease = (Rcv_Cwnd_Pend * newly_rcvd_bytes) >> 7
            let window_decrease = u64::from(pend).saturating_mul(newly) >> 7;
            // cwnd = min(cwnd, inflight); cwnd = max(mtu, cwnd - window_decrease)
            let old = self.cwnd;
            let limited = to_i64(self.cwnd).min(self.inflight);
            let cwnd = limited.saturating_sub(to_i64(window_decrease));
            self.cwnd = u64::try_from(cwnd).unwrap_or(0).max(self.cfg.mtu);
            self.emit_cwnd(now, old, CwndReason::DfcPenalty);
        } else if restore && self.saved_cwnd > 0 {
            // cwnd = saved_cwnd; saved_cwnd = 0 (within max_wnd, which may
            // have shrunk meanwhile)
            let old = self.cwnd;
            self.cwnd = self.saved_cwnd.min(self.max_wnd).max(self.cfg.mtu);
            self.saved_cwnd = 0;
            self.emit_cwnd(now, old, CwndReason::DfcRestore);
        }
        pend > 0
    }

    /// `update_delay(delay)`: `avg = w * delay + (1 - w) * avg` (implementation
    /// defined; HTSIM's weight 0.0125). The spec's `update_delay` sees only
    /// the delay, so HTSIM's variant — feeding `0.25 * base_rtt` instead of
    /// an unmarked sample above target — is not applied.
    fn update_delay(&mut self, delay_ns: u64) {
        let w = self.cfg.delay_ewma_weight;
        self.avg_delay = w * delay_ns as f64 + (1.0 - w) * self.avg_delay;
    }

    fn clear_increase(&mut self) {
        self.inc_bytes = 0.0;
        self.received_bytes = 0;
        self.inc_proportional = false;
        self.inc_fair = false;
    }

    fn emit_cwnd(&mut self, now: Instant, old: u64, reason: CwndReason) {
        if self.cwnd != old {
            self.push_event(NsccEvent::Cwnd {
                now,
                cwnd: self.cwnd,
                reason,
            });
        }
    }

    fn push_event(&mut self, e: NsccEvent) {
        if self.events.len() >= EVENT_CAPACITY {
            self.events.pop_front();
            self.events_dropped = self.events_dropped.saturating_add(1);
        }
        self.events.push_back(e);
    }
}

/// `calculate_rtt(pkt_tx_state, arrival, Service_Time, Retx_Flag)` in ns:
/// valid only if `(rtx_count == 0 and not Retx_Flag) or (rtx_count == 1 and
/// Retx_Flag)` (SPEC-TR §3.6.13.1, §3.6.13.6), and — our guard — only if
/// positive.
fn calculate_rtt(
    tx_time: Instant,
    rtx_count: u32,
    arrival: Instant,
    service_time: Duration,
    retx: bool,
) -> Option<u64> {
    let unambiguous = (rtx_count == 0 && !retx) || (rtx_count == 1 && retx);
    if !unambiguous {
        return None;
    }
    // rtt_sample = ack_arrival_time - (pkt_tx_state.tx_timestamp + Service_Time)
    let sent = tx_time.as_nanos().checked_add(duration_ns(service_time))?;
    arrival.as_nanos().checked_sub(sent).filter(|&r| r > 0)
}

fn positive_ns(d: Duration) -> Option<u64> {
    Some(duration_ns(d)).filter(|&n| n > 0)
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
