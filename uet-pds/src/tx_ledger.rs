//! The send-side retransmission ledger of a PDC (`docs/protocol-notes.md` §3).
//!
//! One entry per PSN from the oldest unacknowledged (`una`) to the next to be
//! assigned (`next`). An entry stays until the cumulative ACK covers it — in
//! UET a CACK also *clears* the PSN — even after a SACK reported it, because
//! only the cumulative ACK frees the target's tracking state. SACKed entries
//! are never retransmitted; if their timer fires, the PDC sends an ACK_REQ
//! instead (REFPROV `dst_recvd`).

use std::cell::Cell;
use std::collections::VecDeque;

use uet_wire::time::Instant;
use uet_wire::{EntropyValue, Psn};

/// One packet in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxEntry<T> {
    /// Its PSN.
    pub psn: Psn,
    /// Nominal bytes (for congestion control).
    pub bytes: u32,
    /// When it was last (re)transmitted.
    pub sent_at: Instant,
    /// Retransmissions so far, whatever triggered them.
    pub rtx_count: u32,
    /// Retransmission timeouts fired for it so far: the retry count that
    /// sets its RTO backoff (`RTO_INIT_TIME * 2^retry_count`) and is
    /// bounded by `Max_RTO_Retx_Cnt` (§3 "Loss recovery"). Retransmissions
    /// after a NACK (bounded by `Max_NACK_Retx_Cnt`) or after SACK-inferred
    /// loss do not count: a packet delayed past its successors and resent
    /// early is not a dead path.
    pub rto_count: u32,
    /// NACK-triggered retransmissions so far.
    pub nack_count: u32,
    /// The EV it was last sent with.
    pub ev: EntropyValue,
    /// A SACK reported it received.
    pub sacked: bool,
    /// Marked for retransmission (NACK, trim or RTO), not yet resent.
    pub needs_rtx: bool,
    /// Marked by an RTO: the retransmission may leave even when congestion
    /// control would hold it (one packet per timeout, as HTSIM's RTS and
    /// TCP's RTO), so a source starved of credit or window can always make
    /// itself heard.
    pub rto_forced: bool,
    /// Its place in the PDC's transmission order at its latest
    /// (re)transmission: every data transmission, new or resent, takes the
    /// next number. A tail probe's answer condemns what left before the
    /// probe (`tail_probe.rs`).
    pub tx_seq: u32,
    /// What the layer above needs to rebuild the packet.
    pub token: T,
}

/// Transmission `a` (`TxEntry::tx_seq`) left after transmission `b`
/// (the numbers wrap; they are compared within half their range).
#[inline]
pub(crate) fn tx_after(a: u32, b: u32) -> bool {
    a.wrapping_sub(b) as i32 > 0
}

/// The ledger.
#[derive(Debug, Clone)]
pub struct TxLedger<T> {
    una: Psn,
    entries: VecDeque<TxEntry<T>>,
    /// `false` only if no entry has `needs_rtx` set: every method that
    /// hands out a `&mut TxEntry` sets it, and a search for an entry
    /// needing retransmission that finds none clears it. The transmit path
    /// asks on every packet; this keeps that O(1) instead of a scan of the
    /// whole window.
    rtx_maybe: bool,
    /// The transmission number the next (re)transmission takes.
    next_tx: u32,
    /// When the newest packet sent only once known delivered was sent.
    delivered_once: Option<Instant>,
    /// The highest PSN ever resent: above it, entries were sent once, so
    /// their transmission numbers grow with their PSNs.
    resent_hi: Option<Psn>,
    /// Every entry before this PSN is SACKed (or gone): where
    /// [`Self::first_unsacked_psn`] resumes its search. A SACK mark is
    /// never taken back, so the answer only moves forward, and the search
    /// costs O(1) per packet over a window's life instead of a scan of the
    /// SACKed run on every packet sent while the cumulative ACK lags.
    sacked_upto: Cell<Psn>,
}

impl<T> TxLedger<T> {
    /// An empty ledger whose first PSN is `start`.
    #[must_use]
    pub fn new(start: Psn) -> Self {
        Self {
            una: start,
            entries: VecDeque::new(),
            rtx_maybe: false,
            next_tx: 0,
            delivered_once: None,
            resent_hi: None,
            sacked_upto: Cell::new(start),
        }
    }

    /// Oldest PSN not cumulatively acknowledged.
    #[must_use]
    pub fn una(&self) -> Psn {
        self.una
    }

    /// The PSN the next new packet gets.
    #[must_use]
    pub fn next_psn(&self) -> Psn {
        self.una.add(self.entries.len() as u32)
    }

    /// Packets not yet cumulatively acknowledged.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether everything sent is cumulatively acknowledged.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Records a new packet and returns its PSN.
    pub fn push(&mut self, now: Instant, bytes: u32, ev: EntropyValue, token: T) -> Psn {
        let psn = self.next_psn();
        let tx_seq = self.next_tx;
        self.next_tx = tx_seq.wrapping_add(1);
        self.entries.push_back(TxEntry {
            psn,
            bytes,
            sent_at: now,
            rtx_count: 0,
            rto_count: 0,
            nack_count: 0,
            ev,
            sacked: false,
            needs_rtx: false,
            rto_forced: false,
            tx_seq,
            token,
        });
        psn
    }

    /// The entry of `psn`, if it is in flight.
    #[must_use]
    pub fn get(&self, psn: Psn) -> Option<&TxEntry<T>> {
        let d = psn.diff(self.una);
        if d < 0 {
            return None;
        }
        self.entries.get(d as usize)
    }

    /// Mutable access to the entry of `psn`.
    pub fn get_mut(&mut self, psn: Psn) -> Option<&mut TxEntry<T>> {
        let d = psn.diff(self.una);
        if d < 0 {
            return None;
        }
        let e = self.entries.get_mut(d as usize)?;
        self.rtx_maybe = true;
        Some(e)
    }

    /// The first PSN not SACKed, `next_psn` if all are: searched from
    /// where the last search ended (entries before it were SACKed then and
    /// still are).
    #[must_use]
    pub fn first_unsacked_psn(&self) -> Psn {
        let from = self.sacked_upto.get().diff(self.una).max(0) as usize;
        let i = self
            .entries
            .range(from.min(self.entries.len())..)
            .position(|e| !e.sacked)
            .map_or(self.entries.len(), |p| from + p);
        let psn = self.una.add(i as u32);
        self.sacked_upto.set(psn);
        psn
    }

    /// Iterates over the entries in PSN order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &TxEntry<T>> {
        self.entries.iter()
    }

    /// Iterates mutably over the entries in PSN order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut TxEntry<T>> {
        self.rtx_maybe = true;
        self.entries.iter_mut()
    }

    /// Iterates mutably, in PSN order, over the entries from `from` to
    /// `to` inclusive (those of them still in the ledger).
    pub fn range_mut(&mut self, from: Psn, to: Psn) -> impl Iterator<Item = &mut TxEntry<T>> {
        let len = self.entries.len();
        let lo = from.diff(self.una).clamp(0, len as i32) as usize;
        let hi = (to.diff(self.una) + 1).clamp(0, len as i32) as usize;
        self.rtx_maybe = true;
        self.entries.range_mut(lo..hi.max(lo))
    }

    /// Applies a cumulative ACK: every PSN up to and including `cack` is
    /// acknowledged and removed; `f` sees each removed entry (already-SACKed
    /// ones too, flagged by `sacked`). A `cack` before `una` or beyond what
    /// was sent changes nothing and returns false.
    #[inline(always)]
    pub fn ack_cumulative(&mut self, cack: Psn, mut f: impl FnMut(&TxEntry<T>)) -> bool {
        let d = cack.diff(self.una);
        if d < 0 || d as usize >= self.entries.len() {
            return false;
        }
        // Looked at in place, then dropped together (no move per entry).
        let n = d as usize + 1;
        for e in self.entries.range(..n) {
            f(e);
        }
        self.entries.drain(..n);
        self.una = cack.next();
        true
    }

    /// Applies a SACK bitmap (bit i ↔ `base + i`): marks the entries it
    /// reports and calls `f` for each newly SACKed one, as it was before the
    /// SACK (`needs_rtx` tells whether it was waiting for retransmission);
    /// the mark for retransmission is then dropped.
    pub fn ack_selective(&mut self, base: Psn, bitmap: u64, mut f: impl FnMut(&TxEntry<T>)) {
        let mut bm = bitmap;
        while bm != 0 {
            let i = bm.trailing_zeros();
            bm &= bm - 1;
            if let Some(e) = self.get_mut(base.add(i))
                && !e.sacked
            {
                f(e);
                e.sacked = true;
                e.needs_rtx = false;
                e.rto_forced = false;
            }
        }
    }

    /// The entry the RTO timer guards: the oldest one neither SACKed nor
    /// waiting for retransmission; failing that, when nothing waits for
    /// retransmission, the oldest SACKed one (its RTO sends an ACK_REQ: the
    /// cumulative ACK that should have covered it is overdue). While an
    /// entry waits for retransmission the cumulative ACK cannot move past
    /// it, so no ACK_REQ is sent for the SACKed entries after it.
    #[must_use]
    pub fn rto_guard(&self) -> Option<&TxEntry<T>> {
        let i = self.rto_guard_index()?;
        self.entries.get(i)
    }

    /// [`Self::rto_guard`], mutably.
    pub fn rto_guard_mut(&mut self) -> Option<&mut TxEntry<T>> {
        let i = self.rto_guard_index()?;
        self.rtx_maybe = true;
        self.entries.get_mut(i)
    }

    fn rto_guard_index(&self) -> Option<usize> {
        let mut pending = false;
        let mut first_sacked = None;
        for (i, e) in self.entries.iter().enumerate() {
            if e.needs_rtx {
                pending = true;
            } else if !e.sacked {
                return Some(i);
            } else if first_sacked.is_none() {
                first_sacked = Some(i);
            }
        }
        first_sacked.filter(|_| !pending)
    }

    /// Takes the first entry marked for retransmission and records that it
    /// is being resent now: its marks are cleared, `sent_at`, `rtx_count`
    /// and its transmission number move on.
    #[inline]
    pub fn resend_first(&mut self, now: Instant) -> Option<&mut TxEntry<T>> {
        // Nothing marked, the usual answer, without a call.
        if !self.rtx_maybe {
            return None;
        }
        self.resend_first_marked(now)
    }

    /// [`TxLedger::resend_first`] once an entry may be marked.
    fn resend_first_marked(&mut self, now: Instant) -> Option<&mut TxEntry<T>> {
        let i = self.first_rtx_index()?;
        let e = self.entries.get_mut(i)?;
        e.needs_rtx = false;
        e.rto_forced = false;
        e.sent_at = now;
        e.rtx_count += 1;
        e.tx_seq = self.next_tx;
        self.next_tx = self.next_tx.wrapping_add(1);
        if self.resent_hi.is_none_or(|h| e.psn.is_after(h)) {
            self.resent_hi = Some(e.psn);
        }
        Some(e)
    }

    /// The transmission number the next (re)transmission will take.
    #[must_use]
    pub fn next_tx(&self) -> u32 {
        self.next_tx
    }

    /// Records that a packet sent only once, at `sent_at`, was delivered.
    pub fn note_delivered_once(&mut self, sent_at: Instant) {
        self.delivered_once = Some(self.delivered_once.map_or(sent_at, |t| t.max(sent_at)));
    }

    /// When the newest packet sent only once known delivered was sent.
    #[must_use]
    pub fn delivered_once(&self) -> Option<Instant> {
        self.delivered_once
    }

    /// The highest PSN ever resent: entries above it were sent once, so
    /// their transmission numbers grow with their PSNs.
    #[must_use]
    pub fn resent_hi(&self) -> Option<Psn> {
        self.resent_hi
    }

    /// The oldest entry waiting for retransmission, to look at.
    #[inline]
    pub fn first_rtx(&mut self) -> Option<&TxEntry<T>> {
        if !self.rtx_maybe {
            return None;
        }
        let i = self.first_rtx_index()?;
        self.entries.get(i)
    }

    /// Whether an entry is waiting for retransmission.
    #[must_use]
    #[inline]
    pub fn has_rtx(&self) -> bool {
        self.rtx_maybe && self.entries.iter().any(|e| e.needs_rtx)
    }

    fn first_rtx_index(&mut self) -> Option<usize> {
        if !self.rtx_maybe {
            return None;
        }
        let i = self.entries.iter().position(|e| e.needs_rtx);
        self.rtx_maybe = i.is_some();
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn ev() -> EntropyValue {
        EntropyValue::from_masked(9)
    }

    #[test]
    fn cumulative_and_selective() {
        let mut l = TxLedger::new(Psn(u32::MAX - 1));
        for i in 0..5u32 {
            assert_eq!(
                l.push(Instant::ZERO, 100, ev(), i),
                Psn(u32::MAX - 1).add(i)
            );
        }
        let mut sacked = vec![];
        l.ack_selective(Psn(u32::MAX - 1), 0b11010, |e| sacked.push(e.token));
        assert_eq!(sacked, vec![1, 3, 4]);
        assert_eq!(l.rto_guard().map(|e| e.token), Some(0));
        let mut acked = vec![];
        assert!(l.ack_cumulative(Psn(u32::MAX), |e| acked.push((e.token, e.sacked))));
        assert_eq!(acked, vec![(0, false), (1, true)]);
        assert_eq!(l.una(), Psn(0));
        assert_eq!(l.rto_guard().map(|e| e.token), Some(2));
        // Stale or future cumulative ACKs change nothing.
        assert!(!l.ack_cumulative(Psn(u32::MAX - 1), |_| panic!()));
        assert!(!l.ack_cumulative(Psn(9), |_| panic!()));
        assert_eq!(l.len(), 3);
    }

    #[test]
    fn the_rto_guards_no_sacked_entry_behind_a_pending_retransmission() {
        let mut l = TxLedger::new(Psn(10));
        for i in 0..3u32 {
            l.push(Instant::ZERO, 100, ev(), i);
        }
        // 11 and 12 SACKed, 10 in flight: 10 is guarded.
        l.ack_selective(Psn(11), 0b11, |_| {});
        assert_eq!(l.rto_guard().map(|e| e.token), Some(0));
        // 10 marked for retransmission: the cumulative ACK cannot pass it,
        // so no ACK_REQ for 11 or 12 either; nothing is guarded.
        l.get_mut(Psn(10)).unwrap().needs_rtx = true;
        assert!(l.rto_guard().is_none());
        // A later packet in flight is guarded again.
        l.push(Instant::ZERO, 100, ev(), 3);
        assert_eq!(l.rto_guard_mut().map(|e| e.token), Some(3));
        // 10 SACKed too: everything delivered but not cumulatively ACKed;
        // the oldest SACKed entry is guarded (its RTO asks for the ACK).
        l.ack_selective(Psn(10), 0b1001, |_| {});
        assert_eq!(l.rto_guard().map(|e| e.token), Some(0));
    }

    #[test]
    fn transmissions_are_numbered_in_the_order_they_leave() {
        let mut l = TxLedger::new(Psn(0));
        for i in 0..3u32 {
            l.push(Instant::ZERO, 100, ev(), i);
        }
        l.get_mut(Psn(1)).unwrap().needs_rtx = true;
        let e = l.resend_first(Instant::from_nanos(5)).unwrap();
        assert_eq!((e.psn, e.tx_seq, e.rtx_count), (Psn(1), 3, 1));
        assert!(!e.needs_rtx);
        assert_eq!(l.resent_hi(), Some(Psn(1)));
        assert_eq!(l.next_tx(), 4);
        l.note_delivered_once(Instant::from_nanos(5));
        l.note_delivered_once(Instant::ZERO);
        assert_eq!(
            l.delivered_once(),
            Some(Instant::from_nanos(5)),
            "only newer moves it"
        );
    }

    proptest! {
        /// Every packet is reported acknowledged exactly once by the
        /// cumulative path, whatever mix of ACKs arrives.
        #[test]
        fn each_packet_leaves_once(start: u32, n in 1u32..200,
                                   acks in proptest::collection::vec((0u32..220, any::<u64>(), any::<bool>()), 0..60)) {
            let mut l = TxLedger::new(Psn(start));
            for i in 0..n { l.push(Instant::ZERO, 1, ev(), i); }
            let mut left: BTreeSet<u32> = BTreeSet::new();
            let mut sacked: BTreeSet<u32> = BTreeSet::new();
            let mut twice = false;
            for (off, bm, cum) in acks {
                if cum {
                    l.ack_cumulative(Psn(start).add(off), |e| { twice |= !left.insert(e.token); });
                } else {
                    l.ack_selective(Psn(start).add(off), bm, |e| { sacked.insert(e.token); });
                }
            }
            prop_assert!(!twice, "a packet was acknowledged twice");
            for t in &sacked { prop_assert!(left.contains(t) || l.iter().any(|e| e.token == *t && e.sacked)); }
            let in_flight: BTreeSet<u32> = l.iter().map(|e| e.token).collect();
            prop_assert!(left.is_disjoint(&in_flight));
            prop_assert_eq!(left.len() + in_flight.len(), n as usize);
        }

        /// The first unSACKed PSN (CLEAR_PSN's source, asked on every
        /// packet sent) is always the one a scan from the oldest entry
        /// finds, however pushes, SACKs (in-window, stale, beyond) and
        /// cumulative ACKs interleave with the questions.
        #[test]
        fn first_unsacked_is_what_a_scan_finds(start: u32,
                                              ops in proptest::collection::vec((0u8..4, 0u32..80, any::<u64>()), 0..200)) {
            let mut l = TxLedger::new(Psn(start));
            let scan = |l: &TxLedger<u32>| l.iter().find(|e| !e.sacked).map_or_else(|| l.next_psn(), |e| e.psn);
            for (op, off, bm) in ops {
                match op {
                    0 => { for i in 0..off % 8 { l.push(Instant::ZERO, 1, ev(), i); } }
                    1 => l.ack_selective(l.una().add(off).sub(8), bm, |_| {}),
                    2 => { l.ack_cumulative(l.una().add(off % 16).sub(2), |_| {}); }
                    _ => {}
                }
                prop_assert_eq!(l.first_unsacked_psn(), scan(&l));
            }
        }
    }
}
