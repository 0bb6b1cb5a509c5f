//! PDC lifecycle (`docs/protocol-notes.md` §2.12): open, confirm, close,
//! fail, remove, reopen.

use super::congestion::CcShare;
use super::pdc::{Pdc, TxItem};
use super::transmit::ControlPacket;
use super::{InitiatorKey, OpenError, Pds, PdsError, PdsEvent, SesHooks};
use crate::deadline_heap::Timer;
use uet_cms::nscc::RcvdBytesTracker;
use uet_wire::pds::tss::Sdi;
use uet_wire::pds::{CpPayload, DpdcidField, NackCode, PdsCpRepr};
use uet_wire::rand::Rng;
use uet_wire::time::Instant;
use uet_wire::{EntropyValue, JobId, PdcId, Psn};

use crate::config::{PdsConfig, SecureStart};
use crate::pkt_queue::PktQueue;
use crate::tail_probe::TailProbe;
use crate::tx_ledger::TxLedger;

impl Pds {
    /// Puts `job`'s new initiator PDCs in the security domain `sdi` (or in
    /// none): their packets are sealed in it, and only packets it
    /// authenticated are accepted on them. PDCs already open keep theirs.
    pub fn set_job_domain(&mut self, job: JobId, sdi: Option<Sdi>) {
        match sdi {
            Some(s) => {
                self.job_domains.insert(job, s);
            }
            None => {
                self.job_domains.remove(&job);
            }
        }
    }

    /// Returns the initiator PDC for `key`, reusing an open one or creating
    /// one (zero-RTT: it sends SYN packets until the first ACK, §2.12).
    pub fn open(&mut self, now: Instant, key: InitiatorKey) -> Result<PdcId, OpenError> {
        if let Some(&id) = self.reuse.get(&key)
            && let Some(p) = self.pdcs.get_mut(&id)
            && !p.closing
        {
            if !Self::psn_space_spent(&self.config, p) {
                return Ok(id);
            }
            // A secure PDC near the end of its PSN space takes no new
            // message: it closes once what it holds is acknowledged, and a
            // new PDC carries the rest (§2.12).
            p.close_requested = true;
            self.schedule(id);
        }
        let id = self.alloc_id().ok_or(OpenError::NoPdcAvailable)?;
        let random = self.random_start();
        let sdi = self.job_domains.get(&key.job).copied();
        let start = self.initiator_start(sdi, random);
        let rod_ev = EntropyValue::from_masked(self.rng.next_u32() as u16);
        let pdc = Pdc {
            id,
            peer: key.dst,
            peer_id: None,
            initiator: true,
            mode: key.mode,
            key: Some(key),
            sdi,
            ccc: (key.dst, key.tc),
            ccc_ix: None,
            start,
            established: false,
            ledger: TxLedger::new(start),
            queue: PktQueue::new(),
            clear_needed: false,
            forced_at: None,
            unheard_loss_at: None,
            clear_sent: None,
            clear_out: None,
            delivered_at: None,
            delivered_tx: None,
            heard_from: None,
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
            rtt: crate::rto::RttEstimator::default(),
            pending: false,
            created: now,
            reopens: 0,
            awaiting_start: false,
            hold_until: None,
            timer: Timer::default(),
        };
        self.ensure_ccc(now, key.dst, key.tc);
        self.insert_pdc(id, pdc);
        self.reuse.insert(key, id);
        self.counters.pdcs_opened += 1;
        self.events.push_back(PdsEvent::PdcOpened {
            pdc: id,
            peer: key.dst,
            initiator: true,
        });
        Ok(id)
    }

    /// Whether secure PDC `p` is too near the end of its PSN space
    /// (`PdsConfig::secure_psn_span`) to take another message: what it
    /// has sent and queued, with room for a large message (1/8 of the
    /// span, at most 2^20 packets), reaches the span.
    pub(super) fn psn_space_spent(config: &PdsConfig, p: &Pdc) -> bool {
        if p.sdi.is_none() {
            return false;
        }
        let span = u64::from(config.secure_psn_span);
        let used = u64::from(p.ledger.next_psn().diff(p.start).max(0) as u32);
        used + p.queue.packets() + (span / 8).min(1 << 20) >= span
    }

    /// The Start_PSN of a new initiator PDC in security domain `sdi`
    /// (`random` is drawn by the caller for every PDC, so that secure ones
    /// change no other draw): with EXPECTED_0RTT_START, the Expected_PSN
    /// the domain's last closing ACK named, if any (§2.12).
    fn initiator_start(&self, sdi: Option<Sdi>, random: Psn) -> Psn {
        match (sdi, self.config.secure_start) {
            (Some(d), SecureStart::Expected0Rtt) => {
                self.secure.next_start.get(&d).copied().unwrap_or(random)
            }
            _ => random,
        }
    }

    pub(super) fn idle_close(&mut self, now: Instant, id: PdcId) {
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
            self.ctl.push_back(ControlPacket::Cp { dst, repr });
        } else if !p.closing || !p.initiator {
            // Never established, or a silent peer: just forget it.
            self.remove_pdc(now, id, None);
        }
    }

    pub(super) fn fail_pdc(
        &mut self,
        now: Instant,
        id: PdcId,
        error: PdsError,
        upper: &mut impl SesHooks,
    ) {
        let Some(mut p) = self.take_pdc(id) else {
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
        let key = p.ccc;
        if let Some(c) = self.cccs.get_mut(&key) {
            c.withdraw(now, withdrawn);
            c.abandon(now, infl, infl_pkts, rtx);
        }
        self.insert_pdc(id, p);
        self.remove_pdc(now, id, Some(error));
        // What it had in flight no longer holds the CCC: the PDCs it held
        // back may send (they were taken off the send round robin).
        self.schedule_ccc(key);
    }

    /// Puts PDC `p` in the table as `id`, and in its CCC's members
    /// (`CccMembers`): every PDC enters the table here.
    pub(super) fn insert_pdc(&mut self, id: PdcId, p: Pdc) {
        let key = p.ccc;
        if let Some(old) = self.pdcs.insert(id, p) {
            // Replaced in place (no caller does): it leaves its CCC first.
            self.ccc_members.removed(old.ccc, id);
        }
        self.ccc_members.added(&self.pdcs, key, id);
        debug_assert!(self.members_as_scanned(key));
    }

    /// Takes PDC `id` out of the table and out of its CCC's members: every
    /// PDC leaves the table here.
    pub(super) fn take_pdc(&mut self, id: PdcId) -> Option<Pdc> {
        let p = self.pdcs.remove(&id)?;
        self.ccc_members.removed(p.ccc, id);
        debug_assert!(self.members_as_scanned(p.ccc));
        Some(p)
    }

    /// Whether CCC `key`'s members are what a scan of the PDC table finds,
    /// in its order (debug builds check it at every change).
    fn members_as_scanned(&self, key: crate::ccc_table::CccKey) -> bool {
        self.pdcs
            .values()
            .filter(|p| p.ccc == key)
            .map(|p| p.id)
            .eq(self.ccc_members.get(key).iter().copied())
    }

    /// Forgets a PDC, and with it whatever state for its peer no other PDC
    /// refers to: the RCCC receiver's entry for the source it carried, and
    /// the CCC towards its peer. Both come back fresh with the next PDC,
    /// and the two ends' cumulative credit counters re-synchronize
    /// (`RcccSource::on_credit_update`), so a peer's state lives no longer
    /// than its PDCs and tables a peer can grow stay within `max_pdcs`.
    ///
    /// A CCC left only with PDCs that have sent nothing yet (a write queued
    /// while the last PDC closed) is kept, but its RCCC source starts
    /// afresh (`restart_forgotten_source`).
    pub(super) fn remove_pdc(&mut self, now: Instant, id: PdcId, error: Option<PdsError>) {
        if let Some(p) = self.take_pdc(id) {
            if p.pending {
                self.pending_count -= 1;
            }
            // However a secure target PDC that delivered anything goes
            // (closed, reaped, failed), its Start_PSN is spent: a replay
            // of its SYNs must not open it again (§2.12).
            if let Some(d) = p.sdi
                && !p.initiator
                && !p.awaiting_start
            {
                super::SecureState::raise(&mut self.secure.floor, d, p.start.next());
            }
            if let Some(key) = p.rx.as_ref().and_then(|rx| rx.rccc) {
                self.release_rccc(now, id, key);
            }
            if self.cccs.index(&p.ccc).is_some() {
                if !self.ccc_members.get(p.ccc).is_empty() {
                    self.restart_forgotten_source(now, p.ccc);
                } else {
                    self.cccs.remove(&p.ccc);
                }
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

    /// Whether `q` has sent nothing the peer could know this end's RCCC
    /// source by: no packet with a PSN of this PDC's life (no request,
    /// response or CLOSE). A target PDC that has only acknowledged sends
    /// none either: the peer's receiver learns of a source from its data.
    pub(super) fn sent_nothing(q: &Pdc) -> bool {
        q.ledger.next_psn() == q.start
    }

    /// A free local PDC ID, drawn at random (`PdcTable::alloc`), or `None`
    /// when the table holds `max_pdcs`.
    pub(super) fn alloc_id(&mut self) -> Option<PdcId> {
        if self.pdcs.len() >= self.config.max_pdcs {
            return None;
        }
        self.pdcs.alloc(&mut self.id_rng)
    }

    /// The initiator of a pending PDC addressed it by our PDC ID: it heard
    /// our answer, so the PDC is no longer one a forged SYN could have made.
    pub(super) fn confirm(&mut self, id: PdcId) {
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
    pub(super) fn make_room_for_pending(&mut self, now: Instant) {
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
    pub(super) fn push_pending(&mut self, id: PdcId, now: Instant) {
        self.pending.push_back((id, now));
        self.pending_count += 1;
        if self.pending.len() > 2 * self.pending_count + 64 {
            let pdcs = &self.pdcs;
            self.pending
                .retain(|(id, at)| pdcs.get(id).is_some_and(|p| p.pending && p.created == *at));
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
    ///
    /// A secure PDC's target may also name the Start_PSN to use
    /// (NEW_START_PSN, §2.12): `start` then, before anything was
    /// acknowledged, so every message goes again whole.
    pub(super) fn reopen(
        &mut self,
        now: Instant,
        id: PdcId,
        code: NackCode,
        start: Option<Psn>,
        upper: &mut impl SesHooks,
    ) {
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
            let key = p.ccc;
            self.remove_pdc(now, id, None);
            self.schedule_ccc(key);
            return;
        }
        if let Some(pid) = p.peer_id.take()
            && self.by_peer.get(&(p.peer, pid)) == Some(&id)
        {
            self.by_peer.remove(&(p.peer, pid));
        }
        let sdi = p.sdi;
        let start = match start {
            Some(s) => s,
            None => {
                let random = self.random_start();
                self.initiator_start(sdi, random)
            }
        };
        let Some(p) = self.pdcs.get_mut(&id) else {
            return;
        };
        p.start = start;
        p.ledger = TxLedger::new(start);
        p.queue = queue;
        p.established = false;
        p.nacked = false;
        p.clear_needed = false;
        p.clear_sent = None;
        p.clear_out = None;
        p.delivered_at = None;
        p.delivered_tx = None;
        p.heard_from = None;
        p.forced_at = None;
        p.unheard_loss_at = None;
        let rccc_key = p.rx.take().and_then(|rx| rx.rccc);
        p.probe = None;
        p.tail = TailProbe::default();
        p.rcvd = RcvdBytesTracker::new();
        p.close_requested = false;
        p.hold_until = None;
        p.reopens += 1;
        p.last_activity = now;
        self.counters.pdcs_reopened += 1;
        let ccc = p.ccc;
        // It sends again from the start, and what it had in flight no
        // longer holds the CCC: the other PDCs it held back may send too.
        self.schedule_ccc(ccc);
        self.schedule(id);
        if let Some(key) = rccc_key {
            self.release_rccc(now, id, key);
        }
        self.restart_forgotten_source(now, ccc);
    }
}
