//! Timers: RTO, tail loss probes, delayed ACKs, resource holds, idle
//! PDCs; `poll_timeout` and `handle_timeout`.

use super::congestion::CcShare;
use super::pdc::{AckDue, Pdc};
use super::transmit::ControlPacket;
use super::{Pds, PdsError, SesHooks};
use uet_cms::RcccReceiver;
use uet_wire::rand::Rng;
use uet_wire::time::{Duration, Instant};
use uet_wire::{EntropyValue, PdcId};

use crate::config::PdsConfig;
use crate::tail_probe::PtoBasis;

impl Pds {
    /// When [`Pds::handle_timeout`] should next be called.
    ///
    /// The PDCs' part comes from a heap of their deadlines
    /// (`Pds::refresh_timers`): O(log n) per PDC changed since the last
    /// call, nothing per idle PDC. RUDI requests, CCCs and the RCCC
    /// receiver are asked directly.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t: Option<Instant> = self.refresh_timers();
        let mut at = |x: Instant| t = Some(t.map_or(x, |y| y.min(x)));
        for r in self.rudi.inflight.values() {
            if !r.due {
                at(self.loss_timer(r.sent_at + self.config.rto(r.rtx_count)));
            }
        }
        if let Some(x) = self.refresh_ccc_timers() {
            at(x);
        }
        if let Some(x) = self.rccc_rx.as_ref().and_then(RcccReceiver::poll_timeout) {
            at(x);
        }
        t
    }

    /// When `p`'s own timers next need [`Pds::handle_timeout`]: the
    /// earliest of its RTO, tail probe, resource hold, delayed ACK and idle
    /// (or held-and-silent) deadline. `handle_timeout` acts on a PDC
    /// exactly when this has passed.
    fn pdc_deadline(&self, p: &Pdc) -> Option<Instant> {
        #[cfg(test)]
        self.deadline_evals.set(self.deadline_evals.get() + 1);
        let mut t: Option<Instant> = None;
        let mut at = |x: Instant| t = Some(t.map_or(x, |y| y.min(x)));
        if let Some(e) = p.ledger.rto_guard() {
            at(self.loss_timer(p.rto_deadline(&self.config, e)));
        }
        if let Some(d) = Self::tail_probe_due(&self.config, self.rccc_source, p) {
            at(self.loss_timer(d));
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
        t
    }

    /// Brings the deadline heap up to date and returns the earliest PDC
    /// deadline. Every PDC changed since the last call (the PDC table lists
    /// them) gets its deadline recomputed; a deadline that moved earlier
    /// is pushed, one that moved later leaves its entry early in the heap.
    /// Then the top is made exact: stale entries (removed PDCs, superseded
    /// deadlines) are dropped and an early one is replaced by its PDC's
    /// deadline.
    pub(super) fn refresh_timers(&self) -> Option<Instant> {
        let mut heap = self.timers.borrow_mut();
        self.pdcs
            .drain_touched(|id, p| heap.offer(id, self.pdc_deadline(p), &p.timer));
        heap.settle(self.pdcs.len(), |id| self.pdcs.get(&id).map(|p| &p.timer))
    }

    /// Takes the PDCs whose deadline has passed at `now` off the heap into
    /// `ids`, in the PDC table's order (the order `handle_timeout` has
    /// always visited PDCs in, which decides, e.g., the order tail probes
    /// draw their opaque values). Call after [`Pds::refresh_timers`];
    /// `handle_timeout` takes each PDC mutably, so the next refresh queues
    /// its new deadline.
    fn take_due(&mut self, now: Instant, ids: &mut Vec<PdcId>) {
        let pdcs = &self.pdcs;
        self.timers
            .get_mut()
            .take_due(now, |id| pdcs.get(&id).map(|p| &p.timer), ids);
        ids.sort_unstable_by_key(|id| pdcs.position(id));
        ids.dedup();
    }

    /// Entries in the deadline heap, stale ones included.
    #[cfg(test)]
    pub(crate) fn timer_heap_len(&self) -> usize {
        self.timers.borrow().len()
    }

    /// PDC deadlines computed so far.
    #[cfg(test)]
    pub(crate) fn deadline_evals(&self) -> u64 {
        self.deadline_evals.get()
    }

    /// CCC deadlines computed so far.
    #[cfg(test)]
    pub(crate) fn ccc_deadline_evals(&self) -> u64 {
        self.ccc_deadline_evals.get()
    }

    /// [`Pds::poll_timeout`] by looking at every PDC, as a reference.
    #[cfg(test)]
    pub(crate) fn poll_timeout_by_scan(&self) -> Option<Instant> {
        let pdcs = self
            .pdcs
            .values()
            .filter_map(|p| self.pdc_deadline(p))
            .min();
        let rest = {
            let mut t: Option<Instant> = None;
            for r in self.rudi.inflight.values() {
                if !r.due {
                    let x = r.sent_at + self.config.rto(r.rtx_count);
                    t = Some(t.map_or(x, |y| y.min(x)));
                }
            }
            let c = self
                .cccs
                .values()
                .filter_map(uet_cms::Ccc::poll_timeout)
                .min();
            let r = self.rccc_rx.as_ref().and_then(RcccReceiver::poll_timeout);
            [t, c, r].into_iter().flatten().min()
        };
        [pdcs, rest].into_iter().flatten().min()
    }

    pub(super) fn idle_limit(&self, p: &Pdc) -> Duration {
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
    pub(super) fn tail_probe_due(config: &PdsConfig, rccc: bool, p: &Pdc) -> Option<Instant> {
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

    /// Holds the timers that take a packet for lost by time alone — RTOs
    /// and tail probes — until `until` (the latest of all calls wins);
    /// delayed ACKs, congestion control, idle and resource timers run on.
    ///
    /// For a caller whose host did not run it for a while: the silence it
    /// then finds is its own, not the network's, and a peer stopped with
    /// it (a hypervisor throttling the whole machine, say) needs a moment
    /// after both resume to answer what it holds. Loss found by ACKs
    /// (SACK inference, NACKs) is not held.
    pub fn hold_loss_timers(&mut self, until: Instant) {
        self.loss_timers_held = Some(self.loss_timers_held.map_or(until, |h| h.max(until)));
    }

    /// `deadline`, or later while loss timers are held.
    #[inline]
    fn loss_timer(&self, deadline: Instant) -> Instant {
        self.loss_timers_held.map_or(deadline, |h| deadline.max(h))
    }

    /// Handles expired timers: retransmission timeouts (backoff, retry
    /// budget), delayed ACKs, idle PDCs.
    pub fn handle_timeout(&mut self, now: Instant, upper: &mut impl SesHooks) {
        self.cms_timers(now);
        let held = self.loss_timers_held.filter(|&h| now < h);
        let loss_due = |d: Instant| now >= held.map_or(d, |h| d.max(h));
        let mut failed = Vec::new();
        for (id, r) in &mut self.rudi.inflight {
            if !r.due && loss_due(r.sent_at + self.config.rto(r.rtx_count)) {
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
        // Only the PDCs whose deadline has passed: for any other the loop
        // below does nothing.
        let mut ids = core::mem::take(&mut self.scratch_ids);
        ids.clear();
        self.refresh_timers();
        self.take_due(now, &mut ids);
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
            let may_force = p.forced_at.is_none_or(|t| now >= t + p.rto(cfg, 0));
            let expired = p
                .ledger
                .rto_guard()
                .is_some_and(|e| loss_due(p.rto_deadline(cfg, e)));
            if expired && let Some(e) = p.ledger.rto_guard_mut() {
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
                    p.tail.on_rto();
                    self.counters.rto_fired += 1;
                    if !p.scheduled {
                        p.scheduled = true;
                        self.active.push_back(id);
                    }
                }
            }
            if !fail && Self::tail_probe_due(cfg, self.rccc_source, p).is_some_and(loss_due) {
                let opaque = (self.rng.next_u32() as u16).max(1);
                p.tail.sent(now, opaque, p.ledger.next_tx());
                self.ctl.push_back(ControlPacket::TailProbe {
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
}

pub(super) fn idle_limit(config: &PdsConfig, p: &Pdc) -> Duration {
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
