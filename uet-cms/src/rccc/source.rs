//! The source half of RCCC: one per source CCC (`docs/protocol-notes.md` §5.1
//! hooks `RCCC.OnACK/OnNACK/OnInferredLoss/OnSend/OnNewData/OnCreditUpdate/
//! CanSend/computeCreditTarget`; §5.3 HTSIM source model).

use std::collections::VecDeque;

use uet_wire::Credit24;
use uet_wire::time::{Duration, Instant};

use super::{RcccConfig, RcccConfigError, add24, diff24, wire24};

/// Most doublings of the credit timeout after unanswered requests (×64) \[I\].
const MAX_BACKOFF_EXP: u32 = 6;

/// Events kept for a consumer that does not poll; older ones are dropped.
const EVENT_CAP: usize = 1024;

/// What [`RcccSource::on_credit_update`] made of a cumulative credit value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditUpdate {
    /// The value is newer: this many bytes were newly granted.
    New(u64),
    /// The value equals the last one accepted (an ACK repeating it, a lost
    /// and resent CP, the echo of a CREDIT_REQ).
    Duplicate,
    /// The value is older than the last one accepted (reordered): ignored.
    Stale,
    /// The value is further from the last one accepted than two ends in
    /// step can ever be (±(2·max_credit + MTU), `MAX_CREDIT_LIMIT`): the
    /// receiver's counter started afresh (it forgot this source while our
    /// CCC lived on, or the reverse). Once a second such value follows the
    /// first in step, the source takes it as its new base; no credit is
    /// gained or lost by the re-base. Until then it is ignored, like a
    /// stale one.
    Resync,
}

/// Why the source wants a CREDIT_REQ CP sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestCause {
    /// Need grew while the source could not send: no data packet will carry
    /// the new `credit_target`.
    NewDemand,
    /// Blocked with backlog and no new grant for the credit timeout.
    Timeout,
}

/// A state change of the source, for tracing and plots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RcccSourceEvent {
    /// The speculative first window ended.
    SpeculationEnded {
        /// When.
        now: Instant,
        /// Unspent speculative credit dropped [HTSIM `stopSpeculating`].
        discarded: u64,
    },
    /// New credit arrived.
    Credit {
        /// When.
        now: Instant,
        /// Bytes newly granted.
        newly: u64,
        /// The balance after it (negative: debt of a packet an RTO forced).
        credit: i64,
    },
    /// The source asks for a CREDIT_REQ CP.
    RequestRaised {
        /// When.
        now: Instant,
        /// Why.
        cause: RequestCause,
    },
    /// The PDS took the request; the CP carries `target`.
    RequestSent {
        /// When.
        now: Instant,
        /// The CREDIT_REQ payload.
        target: Credit24,
    },
}

/// Counters of a source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RcccSourceStats {
    /// Bytes granted by the receiver and accepted (sum of increments).
    pub granted_bytes: u64,
    /// Bytes spent by sending (first transmissions and retransmissions).
    pub spent_bytes: u64,
    /// Unspent speculative credit dropped when speculation ended.
    pub discarded_bytes: u64,
    /// Granted credit dropped because the balance would exceed `max_credit`.
    pub clamped_bytes: u64,
    /// Credit updates that repeated the last value.
    pub duplicate_updates: u64,
    /// Credit updates older than the last value.
    pub stale_updates: u64,
    /// Updates that re-based the counter ([`CreditUpdate::Resync`]).
    pub resyncs: u64,
    /// CREDIT_REQ CPs taken by the PDS.
    pub requests: u64,
    /// Fresh starts after the receiver forgot the source
    /// ([`restart`](RcccSource::restart)).
    pub restarts: u64,
    /// Sends reported while `can_send` was false (caller misuse; counted).
    pub overdrafts: u64,
}

/// The RCCC state of one source CCC.
///
/// Byte counts are nominal sizes (§1). The CCC calls the hooks in the order
/// of the spec's common code (§5.1): `on_new_data` when data is queued,
/// `can_send` before a packet, `credit_target_after` for its
/// `req_cc_state` (GetSendParams), `on_send` once it leaves, `on_ack` /
/// `on_nack` /
/// `on_inferred_loss` on feedback, `on_credit_update` for every CREDIT CP or
/// ACK_CC with `cc_type` CREDIT.
#[derive(Debug, Clone)]
pub struct RcccSource {
    config: RcccConfig,
    backlog: u64,
    rtx_backlog: u64,
    /// Spendable balance; negative only after a retransmission forced by an
    /// RTO (see [`can_send`](Self::can_send)).
    credit: i64,
    /// Last cumulative value accepted from the receiver. Starts at the
    /// initial window, which both sides count as granted \[seed\].
    cum: Credit24,
    /// A value out of step with `cum` (see [`CreditUpdate::Resync`]),
    /// awaiting a second one that follows it in step.
    resync_from: Option<Credit24>,
    speculating: bool,
    request: Option<RequestCause>,
    /// Since when the source has been blocked (backlog, no credit) without
    /// a new grant; `None` while not blocked.
    blocked_since: Option<Instant>,
    /// Start of the running credit timer: `blocked_since`, or the last
    /// CREDIT_REQ sent; `None` while not blocked.
    wait_start: Option<Instant>,
    /// Requests sent since the last new grant (the backoff exponent).
    retries: u32,
    /// How long the source last waited, blocked, for a new grant.
    last_wait: Option<Duration>,
    stats: RcccSourceStats,
    events: VecDeque<RcccSourceEvent>,
}

impl RcccSource {
    /// A new source CCC: speculating, with `initial_window` of credit.
    pub fn new(config: RcccConfig) -> Result<Self, RcccConfigError> {
        config.validate()?;
        Ok(Self {
            credit: config.initial_window as i64,
            cum: wire24(config.initial_window),
            resync_from: None,
            speculating: true,
            backlog: 0,
            rtx_backlog: 0,
            request: None,
            blocked_since: None,
            wait_start: None,
            retries: 0,
            last_wait: None,
            stats: RcccSourceStats::default(),
            events: VecDeque::new(),
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RcccConfig {
        &self.config
    }

    /// The credit balance in bytes (negative: an RTO forced a retransmission
    /// past it).
    pub fn credit(&self) -> i64 {
        self.credit
    }

    /// Bytes of new data waiting.
    pub fn backlog(&self) -> u64 {
        self.backlog
    }

    /// Bytes waiting for retransmission.
    pub fn rtx_backlog(&self) -> u64 {
        self.rtx_backlog
    }

    /// Everything waiting: `backlog + rtx_backlog` (§5.3 `need`).
    pub fn need(&self) -> u64 {
        self.backlog.saturating_add(self.rtx_backlog)
    }

    /// Whether the speculative first window is still open.
    pub fn is_speculating(&self) -> bool {
        self.speculating
    }

    /// The last cumulative credit value accepted.
    pub fn cumulative(&self) -> Credit24 {
        self.cum
    }

    /// Counters.
    pub fn stats(&self) -> &RcccSourceStats {
        &self.stats
    }

    /// Starts afresh, as a new source would: speculating, with the initial
    /// window as both balance and cumulative count, no request pending and
    /// the credit timer reset. What waits to be sent stays.
    ///
    /// For a source the receiver no longer knows: the receiver forgets a
    /// source with the last PDC that carried it, and a source left without
    /// credit then has nothing to reach it with. Its PDCs are either closed
    /// or never heard from, so no data packet can carry a credit target
    /// and no CREDIT_REQ can be addressed; a packet never sent never times
    /// out. A new CCC would start exactly this way, and the receiver enters
    /// a new source at the same cumulative count.
    pub fn restart(&mut self, now: Instant) {
        self.credit = self.config.initial_window as i64;
        self.cum = wire24(self.config.initial_window);
        self.resync_from = None;
        self.speculating = true;
        self.request = None;
        self.blocked_since = None;
        self.wait_start = None;
        self.retries = 0;
        self.last_wait = None;
        self.stats.restarts += 1;
        self.refresh(now);
    }

    /// `OnNewData`: `bytes` of new data were queued.
    pub fn on_new_data(&mut self, now: Instant, bytes: u64) {
        let before = self.ahead(None);
        self.backlog = self.backlog.saturating_add(bytes);
        self.need_grew(now, before);
        self.refresh(now);
    }

    /// Data that will not be sent after all: `backlog_bytes` of queued data
    /// (an operation failed) and `rtx_bytes` of retransmissions that became
    /// unnecessary (acknowledged before they were resent, or their PDC
    /// closed). The receiver may have granted for them already; the credit
    /// stays with the source for later data.
    pub fn withdraw(&mut self, now: Instant, backlog_bytes: u64, rtx_bytes: u64) {
        self.backlog = self.backlog.saturating_sub(backlog_bytes);
        self.rtx_backlog = self.rtx_backlog.saturating_sub(rtx_bytes);
        self.refresh(now);
    }

    /// `CanSend`: a packet of `bytes` may leave when the balance covers it.
    ///
    /// The spec's rule is that a source sends only while `credit > 0`
    /// (§5.3 \[C\]); HTSIM's `can_send_RCCC` sends whenever it holds, so a
    /// packet may overdraw by less than its size. This is stricter \[I\]: a
    /// packet never leaves on credit it was not granted. Overdraws are
    /// invisible to the receiver's bound on outstanding credit
    /// ([`RcccConfig::max_outstanding`]), and they add up: on the veth lab
    /// (4 senders × 1 MiB in 64 KiB messages, whose last packets leave
    /// fractions of a grant behind) up to four packets more than the
    /// receiver granted reached a buffer of nine (BENCHMARKS.md, "Design
    /// choices and the measurements behind them"). Grants are whole packets
    /// ([`RcccConfig::quantum`]), so full-size packets see no difference.
    /// Only a retransmission forced by an RTO leaves without credit.
    #[inline]
    pub fn can_send(&self, bytes: u64) -> bool {
        self.credit > 0 && self.credit as u64 >= bytes
    }

    /// The most credit the next packet can need: `min(need, mtu)` (a packet
    /// carries at most one `mtu`, and no more than is waiting). Below it
    /// the source may be unable to send; at or above it, it can.
    fn next_packet(&self) -> i64 {
        to_i64(self.need().min(u64::from(self.config.mtu)))
    }

    /// `OnSend`: a packet of `bytes` left (a retransmission if `is_rtx`).
    pub fn on_send(&mut self, now: Instant, bytes: u64, is_rtx: bool) {
        if self.credit < to_i64(bytes) {
            self.stats.overdrafts += 1;
        }
        self.credit = self.credit.saturating_sub(to_i64(bytes));
        self.stats.spent_bytes = self.stats.spent_bytes.saturating_add(bytes);
        if is_rtx {
            self.rtx_backlog = self.rtx_backlog.saturating_sub(bytes);
        } else {
            self.backlog = self.backlog.saturating_sub(bytes);
        }
        self.refresh(now);
    }

    /// `computeCreditTarget` (§5.1 GetSendParams): the current credit
    /// target, as a CREDIT_REQ CP carries it.
    ///
    /// `cum + min(backlog + rtx_backlog, cap, max_credit) - credit`, modulo
    /// 2^24 [HTSIM `computePullTarget`]. `cap` is `cwnd + MTU` when NSCC also
    /// runs on this CCC (§5.2 "NSCC + RCCC together"), else `None`.
    ///
    /// A data packet carries the target *after* its own send [HTSIM
    /// `sendNewPacket` computes the pull target after spending]: call this
    /// after [`on_send`](Self::on_send), or use
    /// [`credit_target_after`](Self::credit_target_after) while the header
    /// is written first. Otherwise, when the cap binds (a long backlog), the
    /// receiver learns each packet's demand one packet late, and a source
    /// whose last packet used up its credit waits for the credit timeout.
    pub fn credit_target(&self, cap: Option<u64>) -> Credit24 {
        add24(self.cum, self.ahead(cap))
    }

    /// The credit target a packet of `bytes` carries: the value
    /// [`credit_target`](Self::credit_target) will have once
    /// [`on_send`](Self::on_send)`(bytes, is_rtx)` has run.
    pub fn credit_target_after(&self, bytes: u64, is_rtx: bool, cap: Option<u64>) -> Credit24 {
        let (backlog, rtx) = if is_rtx {
            (self.backlog, self.rtx_backlog.saturating_sub(bytes))
        } else {
            (self.backlog.saturating_sub(bytes), self.rtx_backlog)
        };
        let credit = self.credit.saturating_sub(to_i64(bytes));
        add24(
            self.cum,
            self.ahead_with(backlog.saturating_add(rtx), credit, cap),
        )
    }

    /// `RCCC.OnACK` (§5.1): feedback from the receiver ends speculation
    /// [HTSIM `processAck` → `stopSpeculating`].
    pub fn on_ack(&mut self, now: Instant) {
        self.end_speculation(now);
        self.refresh(now);
    }

    /// `RCCC.OnNACK(pdc_present)` (§5.1): the packet of `bytes` was NACKed.
    ///
    /// `pdc_present` [I: the spec passes it to both OnNACK and
    /// OnInferredLoss, so it describes the source side]: the packet's PDC
    /// still exists and will retransmit it, so its bytes join the
    /// retransmit backlog and the credit target. A NACK also ends
    /// speculation [HTSIM `processNack`]. A last-hop trim needs nothing more
    /// here: the receiver side has already seen it (§7).
    pub fn on_nack(&mut self, now: Instant, bytes: u64, pdc_present: bool) {
        self.end_speculation(now);
        self.lost(now, bytes, pdc_present);
    }

    /// `RCCC.OnInferredLoss(pdc_present)` (§5.1): an RTO or SACK inference
    /// declared `bytes` lost. Ends speculation too: retransmissions are not
    /// sent on speculative credit [HTSIM `rtxTimerExpired`].
    pub fn on_inferred_loss(&mut self, now: Instant, bytes: u64, pdc_present: bool) {
        self.end_speculation(now);
        self.lost(now, bytes, pdc_present);
    }

    /// `OnCreditUpdate(credit)` (§5.1): a cumulative credit value from a
    /// CREDIT CP or an ACK_CC (`cc_type` CREDIT).
    ///
    /// Newly granted = `(cumulative - last) mod 2^24` when that is in
    /// `1..2^23` [seed: 25,000 − 12,500 = 12,500]; repeats and older values
    /// are ignored. Any credit update ends speculation [HTSIM
    /// `processPull`]. The balance is capped at `max_credit` [HTSIM
    /// `handlePull`].
    pub fn on_credit_update(&mut self, now: Instant, cumulative: Credit24) -> CreditUpdate {
        self.end_speculation(now);
        let d = diff24(cumulative, self.cum);
        // In step, the two counters differ by less than in-flight grants
        // plus the most credit asked ahead and a packet of debt
        // (`MAX_CREDIT_LIMIT`'s bound).
        let in_step = 2 * to_i64(self.config.max_credit) + i64::from(self.config.mtu);
        // A value that follows a stray one in step confirms the re-base even
        // when it looks merely old against ours: a receiver that started
        // afresh at a small count grants up from it, and its next values
        // can be nearer our count than the bound while still behind it.
        let follows_stray = self
            .resync_from
            .is_some_and(|from| (0..=in_step).contains(&diff24(cumulative, from)));
        // A re-base begins only from a value far ahead (a receiver that
        // went on while this source started afresh) or from one near the
        // initial window (a receiver that started afresh). A value far
        // behind anywhere else is an old one, reordered past many grants:
        // re-basing on it and the next old one counted the grants between
        // twice (the closed-loop test, with control packets jittered by ten
        // round trips) [I].
        let fresh_receiver =
            (0..=in_step).contains(&diff24(cumulative, wire24(self.config.initial_window)));
        let update = if d.abs() > in_step || (d < 0 && follows_stray) {
            match self.resync_from {
                Some(from) if (0..=in_step).contains(&diff24(cumulative, from)) => {
                    self.stats.resyncs += 1;
                    self.cum = cumulative;
                    self.resync_from = None;
                    CreditUpdate::Resync
                }
                _ if d > 0 || fresh_receiver => {
                    self.resync_from = Some(cumulative);
                    CreditUpdate::Resync
                }
                _ => {
                    self.stats.stale_updates += 1;
                    CreditUpdate::Stale
                }
            }
        } else if d == 0 {
            self.stats.duplicate_updates += 1;
            CreditUpdate::Duplicate
        } else if d < 0 {
            self.stats.stale_updates += 1;
            CreditUpdate::Stale
        } else {
            let newly = d.unsigned_abs();
            self.cum = cumulative;
            // A newer grant cancels a re-base the stray value began.
            self.resync_from = None;
            self.stats.granted_bytes = self.stats.granted_bytes.saturating_add(newly);
            self.credit = self.credit.saturating_add(d);
            let max = to_i64(self.config.max_credit);
            if self.credit > max {
                self.stats.clamped_bytes += (self.credit - max).unsigned_abs();
                self.credit = max;
            }
            if let Some(w) = self.blocked_since {
                self.last_wait = Some(now.saturating_since(w));
            }
            self.blocked_since = None;
            self.wait_start = None;
            self.retries = 0;
            self.push_event(RcccSourceEvent::Credit {
                now,
                newly,
                credit: self.credit,
            });
            CreditUpdate::New(newly)
        };
        self.refresh(now);
        update
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next run: the
    /// credit timer, while the source is blocked with no request pending.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.request.is_some() {
            return None;
        }
        self.wait_start
            .map(|w| w.saturating_add(self.wait_timeout()))
    }

    /// Runs the credit timer: a source blocked with backlog and no new grant
    /// for the timeout raises a CREDIT_REQ.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.poll_timeout().is_some_and(|t| now >= t) {
            self.raise(now, RequestCause::Timeout);
        }
    }

    /// Whether the PDS should send a CREDIT_REQ CP (§2.10 ctl_type 8).
    pub fn needs_credit_request(&self) -> bool {
        self.request.is_some()
    }

    /// Takes the pending CREDIT_REQ: returns its payload (the credit target,
    /// with the same `cap` as [`credit_target`](Self::credit_target)) and
    /// restarts the credit timer with backoff. `None` if nothing is pending.
    #[must_use]
    pub fn poll_credit_request(&mut self, now: Instant, cap: Option<u64>) -> Option<Credit24> {
        self.request.take()?;
        let target = self.credit_target(cap);
        self.stats.requests += 1;
        self.retries = (self.retries + 1).min(MAX_BACKOFF_EXP);
        if self.blocked() {
            self.wait_start = Some(now);
        }
        self.push_event(RcccSourceEvent::RequestSent { now, target });
        Some(target)
    }

    /// The next event, for tracing.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<RcccSourceEvent> {
        self.events.pop_front()
    }

    /// Demand ahead of the accepted cumulative count: the credit target minus
    /// `cum`, in `-max_credit ..= max_credit + MTU` \[HTSIM\].
    fn ahead(&self, cap: Option<u64>) -> i64 {
        self.ahead_with(self.need(), self.credit, cap)
    }

    fn ahead_with(&self, need: u64, credit: i64, cap: Option<u64>) -> i64 {
        let need = need
            .min(cap.unwrap_or(u64::MAX))
            .min(self.config.max_credit);
        to_i64(need).saturating_sub(credit)
    }

    /// Need waiting that the credit may not cover: no data packet may
    /// leave to carry the target, so the credit timer runs.
    fn blocked(&self) -> bool {
        self.need() > 0 && self.credit < self.next_packet()
    }

    fn lost(&mut self, now: Instant, bytes: u64, pdc_present: bool) {
        if pdc_present {
            let before = self.ahead(None);
            self.rtx_backlog = self.rtx_backlog.saturating_add(bytes);
            self.need_grew(now, before);
        }
        self.refresh(now);
    }

    /// Need grew: if the source cannot send, no data packet will tell the
    /// receiver, so ask with a CREDIT_REQ at once [I; HTSIM sends an RTS
    /// when it has a retransmission and no credit].
    fn need_grew(&mut self, now: Instant, before: i64) {
        if self.blocked() && self.ahead(None) > before {
            self.raise(now, RequestCause::NewDemand);
        }
    }

    fn raise(&mut self, now: Instant, cause: RequestCause) {
        if self.request.is_none() {
            self.request = Some(cause);
            self.push_event(RcccSourceEvent::RequestRaised { now, cause });
        }
    }

    /// Speculation ends with the first feedback; unspent speculative credit
    /// is dropped so that from then on the source sends on paced credit only
    /// [HTSIM `stopSpeculating`]. The credit target rises by what was
    /// dropped, so the receiver's accounting stays exact.
    fn end_speculation(&mut self, now: Instant) {
        if self.speculating {
            self.speculating = false;
            let discarded = self.credit.max(0).unsigned_abs();
            self.credit -= to_i64(discarded);
            self.stats.discarded_bytes += discarded;
            self.push_event(RcccSourceEvent::SpeculationEnded { now, discarded });
        }
    }

    /// Re-derives the credit timer after any input.
    fn refresh(&mut self, now: Instant) {
        if self.blocked() {
            if self.blocked_since.is_none() {
                self.blocked_since = Some(now);
                self.wait_start = Some(now);
            }
        } else {
            self.blocked_since = None;
            self.wait_start = None;
            self.retries = 0;
            // Whatever the request was for, the next data packet carries the
            // current target.
            self.request = None;
        }
    }

    /// `max(credit_timeout, 2 × last wait for a grant) × 2^retries`, at most
    /// `credit_timeout × 64`: in a large incast grants come rarely (every
    /// `senders / grants-per-slice` slices), and re-requesting faster than
    /// they come only adds CPs to the congested link \[I\].
    fn wait_timeout(&self) -> Duration {
        let base = self.config.credit_timeout;
        let adaptive = self
            .last_wait
            .map_or(base, |w| base.max(w.saturating_mul(2)));
        let cap = base.saturating_mul(1 << MAX_BACKOFF_EXP);
        adaptive.saturating_mul(1 << self.retries).min(cap)
    }

    fn push_event(&mut self, e: RcccSourceEvent) {
        if self.events.len() >= EVENT_CAP {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Instant {
        Instant::from_nanos(n * 1000)
    }

    fn seed_config() -> RcccConfig {
        // The seed's arithmetic is at line rate (pacing 1.0).
        RcccConfig {
            pacing_ppm: 1_000_000,
            ..RcccConfig::default()
        }
    }

    #[test]
    fn seed_first_window_then_cumulative_grant() {
        let mut s = RcccSource::new(seed_config()).unwrap();
        let t = us(0);
        // 256 MB RMA write; the CCC is pre-provisioned with 12.5 KB.
        s.on_new_data(t, 256_000_000);
        assert_eq!(s.credit(), 12_500);
        assert!(s.can_send(4160));
        // The initial amount leaves (as the seed: exactly 12,500 bytes).
        for b in [4160, 4160, 4160, 20] {
            assert!(s.can_send(b));
            s.on_send(t, b, false);
        }
        assert_eq!(s.backlog(), 255_987_500);
        assert_eq!(s.credit(), 0);
        assert!(!s.can_send(1));
        // The local cumulative credit is the 12,500 already granted.
        assert_eq!(s.cumulative(), Credit24::new(12_500).unwrap());
        // The target asks for the backlog, capped at max_credit (a 24-bit
        // field cannot carry 255,987,500).
        assert_eq!(
            s.credit_target(None),
            Credit24::new(12_500 + 225_000).unwrap()
        );
        // Receiver: new cumulative credit 25,000 → incremental 12,500.
        let u = s.on_credit_update(us(13), Credit24::new(25_000).unwrap());
        assert_eq!(u, CreditUpdate::New(12_500));
        assert_eq!(s.credit(), 12_500);
        assert!(!s.is_speculating());
        // Duplicates and reordered older values grant nothing.
        assert_eq!(
            s.on_credit_update(us(14), Credit24::new(25_000).unwrap()),
            CreditUpdate::Duplicate
        );
        assert_eq!(
            s.on_credit_update(us(14), Credit24::new(18_750).unwrap()),
            CreditUpdate::Stale
        );
        assert_eq!(s.credit(), 12_500);
        assert_eq!(s.stats().granted_bytes, 12_500);
    }

    #[test]
    fn first_window_is_bounded() {
        let mut s = RcccSource::new(seed_config()).unwrap();
        let t = us(0);
        s.on_new_data(t, 1_000_000);
        let mut sent = 0;
        while s.can_send(4160) {
            s.on_send(t, 4160, false);
            sent += 4160;
        }
        // Only the packets the window covers: no overdraw.
        assert_eq!(sent, 3 * 4160);
        assert_eq!(s.credit(), 12_500 - 3 * 4160);
        assert_eq!(s.stats().overdrafts, 0);
        // A smaller packet the rest covers may still leave.
        assert!(!s.can_send(21) && s.can_send(20));
        // The first grant ends speculation: the 20 B left are dropped.
        s.on_credit_update(us(12), Credit24::new(25_000).unwrap());
        assert_eq!(s.credit(), 25_000 - 12_500);
    }

    #[test]
    fn speculation_ends_with_first_feedback_and_drops_the_rest() {
        let mut s = RcccSource::new(seed_config()).unwrap();
        s.on_new_data(us(0), 4160);
        s.on_send(us(0), 4160, false);
        assert_eq!(s.credit(), 12_500 - 4160);
        let before = s.credit_target(None);
        s.on_ack(us(12));
        assert!(!s.is_speculating());
        assert_eq!(s.credit(), 0);
        assert_eq!(s.stats().discarded_bytes, 12_500 - 4160);
        assert_eq!(
            s.poll_event(),
            Some(RcccSourceEvent::SpeculationEnded {
                now: us(12),
                discarded: 8340
            })
        );
        // Nothing waiting: the target is just the cumulative count, which
        // the receiver has already granted — no demand.
        assert_eq!(s.credit_target(None), s.cumulative());
        assert_ne!(before, s.credit_target(None));
    }

    #[test]
    fn nscc_cap_limits_the_request() {
        let mut s = RcccSource::new(seed_config()).unwrap();
        s.on_new_data(us(0), 1_000_000);
        s.on_ack(us(0));
        // cwnd + MTU = 40,000 + 4,160.
        assert_eq!(
            s.credit_target(Some(44_160)),
            Credit24::new(12_500 + 44_160).unwrap()
        );
        assert_eq!(
            s.credit_target(None),
            Credit24::new(12_500 + 225_000).unwrap()
        );
    }

    #[test]
    fn a_packet_carries_the_target_after_its_send() {
        let mut s = RcccSource::new(seed_config()).unwrap();
        s.on_new_data(us(0), 1_000_000);
        // The cap binds (backlog ≫ max_credit): each packet sent asks for
        // its own bytes again.
        let before = s.credit_target(None);
        let carried = s.credit_target_after(4160, false, None);
        assert_eq!(diff24(carried, before), 4160);
        s.on_send(us(0), 4160, false);
        assert_eq!(s.credit_target(None), carried);
        s.on_nack(us(1), 4160, true);
        let carried = s.credit_target_after(4160, true, Some(44_160));
        s.on_send(us(1), 4160, true);
        assert_eq!(s.credit_target(Some(44_160)), carried);
    }

    #[test]
    fn sending_and_granting_leave_the_target_unchanged_below_the_cap() {
        let mut s = RcccSource::new(seed_config()).unwrap();
        s.on_new_data(us(0), 100_000);
        s.on_ack(us(0));
        let t0 = s.credit_target(None);
        s.on_credit_update(us(1), Credit24::new(12_500 + 8_000).unwrap());
        assert_eq!(s.credit_target(None), t0);
        s.on_send(us(1), 4160, false);
        assert_eq!(s.credit_target(None), t0);
    }

    #[test]
    fn credit_timeout_re_requests_with_backoff() {
        let cfg = seed_config();
        let to = cfg.credit_timeout;
        let mut s = RcccSource::new(cfg).unwrap();
        s.on_new_data(us(0), 100_000);
        s.on_send(us(0), 12_500, false);
        // Blocked since t=0: the timer runs.
        assert_eq!(s.poll_timeout(), Some(us(0) + to));
        s.handle_timeout(us(50));
        assert!(!s.needs_credit_request());
        s.handle_timeout(us(0) + to);
        assert!(s.needs_credit_request());
        assert_eq!(s.poll_timeout(), None);
        let t1 = us(0) + to;
        let target = s.poll_credit_request(t1, None).unwrap();
        assert_eq!(target, s.credit_target(None));
        assert!(!s.needs_credit_request());
        assert_eq!(s.poll_credit_request(t1, None), None);
        // The next request waits twice as long.
        assert_eq!(s.poll_timeout(), Some(t1 + to * 2));
        // A grant resets the backoff and unblocks.
        s.on_credit_update(t1 + to, Credit24::new(30_000).unwrap());
        assert_eq!(s.poll_timeout(), None);
        assert_eq!(s.stats().requests, 1);
    }

    #[test]
    fn timeout_adapts_to_slow_grants() {
        let cfg = seed_config();
        let to = cfg.credit_timeout;
        let mut s = RcccSource::new(cfg).unwrap();
        s.on_new_data(us(0), 1_000_000);
        s.on_send(us(0), 12_500, false);
        // The grant took 300 µs (a 1000:1 incast).
        s.on_credit_update(us(300), Credit24::new(16_660).unwrap());
        s.on_send(us(300), 4160, false);
        assert!(to < Duration::from_micros(600));
        assert_eq!(s.poll_timeout(), Some(us(300 + 600)));
    }

    #[test]
    fn new_data_while_blocked_asks_at_once() {
        let mut s = RcccSource::new(seed_config()).unwrap();
        s.on_new_data(us(0), 4160);
        s.on_send(us(0), 4160, false);
        s.on_ack(us(12));
        assert!(!s.needs_credit_request());
        s.on_new_data(us(100), 50_000);
        assert!(s.needs_credit_request());
        assert_eq!(
            s.poll_credit_request(us(100), None),
            Some(Credit24::new(12_500 + 50_000).unwrap())
        );
    }

    #[test]
    fn nack_with_pdc_asks_for_the_retransmission() {
        let mut s = RcccSource::new(seed_config()).unwrap();
        s.on_new_data(us(0), 8320);
        s.on_send(us(0), 4160, false);
        s.on_send(us(0), 4160, false);
        // Speculative credit left: 4,180 (dropped on the NACK).
        s.on_nack(us(12), 4160, true);
        assert_eq!(s.rtx_backlog(), 4160);
        assert_eq!(s.credit(), 0);
        assert!(s.needs_credit_request());
        assert_eq!(
            s.poll_credit_request(us(12), None),
            Some(Credit24::new(12_500 + 4160).unwrap())
        );
        // A packet whose PDC is gone is not resent and asks for nothing.
        let mut s = RcccSource::new(seed_config()).unwrap();
        s.on_new_data(us(0), 4160);
        s.on_send(us(0), 4160, false);
        s.on_inferred_loss(us(100), 4160, false);
        assert_eq!(s.rtx_backlog(), 0);
        assert!(!s.needs_credit_request());
        s.on_send(us(101), 4160, true);
        assert_eq!(s.stats().overdrafts, 1);
    }

    #[test]
    fn cumulative_credit_wraps_at_24_bits() {
        let mut s = RcccSource::new(seed_config()).unwrap();
        s.on_new_data(us(0), 40_000_000);
        let mut cum: u64 = 12_500;
        let mut t = 0;
        // 20 MB of grants cross 2^24 once.
        while cum < 12_500 + 20_000_000 {
            let c = s.credit();
            if c > 0 {
                s.on_send(us(t), c.unsigned_abs(), false);
            }
            cum += 12_500;
            t += 1;
            let u = s.on_credit_update(us(t), wire24(cum));
            assert_eq!(u, CreditUpdate::New(12_500));
        }
        assert_eq!(s.stats().granted_bytes, cum - 12_500);
        assert_eq!(s.cumulative(), wire24(cum));
        assert!(cum > 1 << 24);
    }

    #[test]
    fn a_restart_speculates_again_and_keeps_what_waits() {
        let mut s = RcccSource::new(seed_config()).unwrap();
        s.on_new_data(us(0), 12_500);
        s.on_send(us(0), 12_500, false);
        s.on_ack(us(12));
        s.on_credit_update(us(20), Credit24::new(30_000).unwrap());
        s.on_send(us(21), 17_500, false);
        // Blocked with new demand: a request pending, no credit.
        s.on_new_data(us(30), 50_000);
        assert!(s.needs_credit_request());
        assert_eq!(s.credit(), 0);
        s.restart(us(40));
        assert!(s.is_speculating());
        assert_eq!(s.credit(), 12_500);
        assert_eq!(s.cumulative(), Credit24::new(12_500).unwrap());
        assert_eq!(s.backlog(), 50_000);
        assert!(
            !s.needs_credit_request(),
            "the next packet carries the target"
        );
        assert_eq!(s.poll_timeout(), None, "not blocked");
        assert_eq!(s.stats().restarts, 1);
        // The receiver enters it afresh at the same count: its first grant
        // is new credit, not a value to resynchronize on.
        assert!(s.can_send(12_500));
        s.on_send(us(41), 12_500, false);
        assert_eq!(
            s.on_credit_update(us(50), Credit24::new(25_000).unwrap()),
            CreditUpdate::New(12_500)
        );
    }

    #[test]
    fn held_credit_is_capped() {
        let mut s = RcccSource::new(seed_config()).unwrap();
        s.on_ack(us(0));
        s.on_credit_update(us(1), Credit24::new(12_500 + 300_000).unwrap());
        assert_eq!(s.credit(), 225_000);
        assert_eq!(s.stats().clamped_bytes, 75_000);
        // With more credit than need, the target is behind the count.
        s.on_new_data(us(2), 1000);
        assert!(diff24(s.credit_target(None), s.cumulative()) < 0);
    }
}
