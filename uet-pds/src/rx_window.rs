//! The receive-side PSN window of a PDC (`docs/protocol-notes.md` §2.7 MPR, §3).
//!
//! Tracks which PSNs in `[base, base + range)` arrived, where `base` is the
//! first PSN not yet received: every PSN before `base` has arrived, so the
//! cumulative ACK is `base - 1`. A PSN before `base` is a duplicate (the
//! "previous MP_RANGE window" of §3 when within one range); a PSN at or past
//! `base + range` is out of window (NACK `PSN_OOR_WINDOW`).
//!
//! The SACK bitmap for an ACK is read out with [`RxWindow::sack_bitmap`]: bit
//! `i` (LSB first) is PSN `sack_base + i` (§2.7, REFPROV/HTSIM bit order).

use uet_wire::Psn;

/// Where an arriving PSN falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxOutcome {
    /// First arrival of an in-window PSN; recorded.
    New,
    /// Already received (before `base`, or set in the bitmap).
    Duplicate,
    /// Older than one full range before `base`: stale.
    Stale,
    /// At or past `base + range`.
    Beyond,
}

/// The PSN tracking window.
#[derive(Debug, Clone)]
pub struct RxWindow {
    base: Psn,
    range: u32,
    /// Bit `(psn - base)` set when received; stored as a ring indexed by
    /// `psn % range` so advancing `base` costs nothing.
    bits: Box<[u64]>,
    highest: Psn,
}

impl RxWindow {
    /// A window starting at `start` spanning `range` PSNs (rounded up to a
    /// multiple of 64, at least 64).
    #[must_use]
    pub fn new(start: Psn, range: u32) -> Self {
        let range = range.clamp(64, 1 << 20).div_ceil(64) * 64;
        Self {
            base: start,
            range,
            bits: vec![0u64; (range / 64) as usize].into_boxed_slice(),
            highest: start.sub(1),
        }
    }

    /// First PSN not yet received.
    #[must_use]
    pub fn base(&self) -> Psn {
        self.base
    }

    /// The cumulative ACK PSN: every PSN up to and including it arrived.
    #[must_use]
    pub fn cack(&self) -> Psn {
        self.base.sub(1)
    }

    /// Highest PSN received so far (or `base - 1` if none).
    #[must_use]
    pub fn highest(&self) -> Psn {
        self.highest
    }

    /// The window size in PSNs.
    #[must_use]
    pub fn range(&self) -> u32 {
        self.range
    }

    /// Whether a PSN arrived (anything before `base` counts as arrived).
    #[must_use]
    pub fn contains(&self, psn: Psn) -> bool {
        let d = psn.diff(self.base);
        if d < 0 {
            return true;
        }
        if d as u32 >= self.range {
            return false;
        }
        self.bit(psn)
    }

    /// Classifies `psn` without recording it.
    #[must_use]
    #[inline]
    pub fn classify(&self, psn: Psn) -> RxOutcome {
        // Inside the window with nothing received beyond `base`: no bit is
        // set (set bits lie in `base..=highest`), so it is new, decided
        // without reading the ring.
        let d = psn.diff(self.base);
        if d >= 0 && (d as u32) < self.range && !self.has_gap() {
            return RxOutcome::New;
        }
        self.classify_general(psn)
    }

    /// [`RxWindow::classify`] for every case.
    #[must_use]
    fn classify_general(&self, psn: Psn) -> RxOutcome {
        let d = psn.diff(self.base);
        if d < 0 {
            if d.unsigned_abs() > self.range {
                RxOutcome::Stale
            } else {
                RxOutcome::Duplicate
            }
        } else if d as u32 >= self.range {
            RxOutcome::Beyond
        } else if self.bit(psn) {
            RxOutcome::Duplicate
        } else {
            RxOutcome::New
        }
    }

    /// Records an arrival; returns what it was. Only `New` changes state.
    #[inline(always)]
    pub fn receive(&mut self, psn: Psn) -> RxOutcome {
        // In order with nothing received beyond `base`: no bit is set (set
        // bits lie in `base..=highest`), so the packet is new and `base`
        // moves past it without touching the ring.
        if psn == self.base && !self.has_gap() && self.range > 0 {
            self.highest = psn;
            self.base = psn.next();
            return RxOutcome::New;
        }
        self.receive_general(psn)
    }

    /// [`RxWindow::receive`] past its in-order case.
    #[inline(never)]
    fn receive_general(&mut self, psn: Psn) -> RxOutcome {
        let outcome = self.classify(psn);
        if outcome == RxOutcome::New {
            self.set_bit(psn, true);
            if psn.is_after(self.highest) {
                self.highest = psn;
            }
            while self.bit(self.base) {
                self.set_bit(self.base, false);
                self.base = self.base.next();
                if self.base.diff(self.highest) > 0 {
                    break;
                }
            }
        }
        outcome
    }

    /// Treats every PSN before `psn` as received (a CLEAR or CLOSE covering
    /// them, §3) and moves `base` there if it is ahead.
    pub fn advance_to(&mut self, psn: Psn) {
        if psn.diff(self.base) >= self.range as i32 {
            // The whole tracked range is covered: forget it in one step.
            self.bits.fill(0);
            self.base = psn;
        }
        while self.base.is_before(psn) {
            self.set_bit(self.base, false);
            self.base = self.base.next();
        }
        if self.highest.is_before(self.base.sub(1)) {
            self.highest = self.base.sub(1);
        }
        while self.bit(self.base) {
            self.set_bit(self.base, false);
            self.base = self.base.next();
        }
    }

    /// Whether any PSN after `base` has arrived (there is a gap).
    #[must_use]
    #[inline]
    pub fn has_gap(&self) -> bool {
        self.highest.diff(self.base) >= 0
    }

    /// The 64-bit SACK bitmap starting at `sack_base` (bit i ↔ `sack_base + i`).
    #[must_use]
    pub fn sack_bitmap(&self, sack_base: Psn) -> u64 {
        let d = sack_base.diff(self.base);
        if d >= 0 && d as u32 >= self.range {
            return 0;
        }
        let mut bm = 0u64;
        // Bits before `base` are received (all ones); the rest come from
        // the ring, read a word at a time.
        let (mut i, mut psn) = (0u32, sack_base);
        while i < 64 && psn.is_before(self.base) {
            bm |= 1 << i;
            i += 1;
            psn = psn.next();
        }
        while i < 64 {
            let off = psn.diff(self.base) as u32;
            if off >= self.range {
                break;
            }
            let slot = psn.0 % self.range;
            let (w, b) = ((slot / 64) as usize, slot % 64);
            // Take as many bits as remain in this ring word, the window and
            // the bitmap.
            let take = (64 - b).min(64 - i).min(self.range - off);
            let word = self.bits[w] >> b;
            let mask = if take == 64 {
                u64::MAX
            } else {
                (1u64 << take) - 1
            };
            bm |= (word & mask) << i;
            i += take;
            psn = psn.add(take);
        }
        bm
    }

    fn slot(&self, psn: Psn) -> (usize, u32) {
        let i = psn.0 % self.range;
        ((i / 64) as usize, i % 64)
    }

    fn bit(&self, psn: Psn) -> bool {
        let (w, b) = self.slot(psn);
        self.bits[w] >> b & 1 == 1
    }

    fn set_bit(&mut self, psn: Psn, on: bool) {
        let (w, b) = self.slot(psn);
        if on {
            self.bits[w] |= 1 << b;
        } else {
            self.bits[w] &= !(1 << b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn in_order_and_gap() {
        let mut w = RxWindow::new(Psn(100), 64);
        assert_eq!(w.receive(Psn(100)), RxOutcome::New);
        assert_eq!(w.cack(), Psn(100));
        assert_eq!(w.receive(Psn(102)), RxOutcome::New);
        assert_eq!(w.cack(), Psn(100));
        assert!(w.has_gap());
        assert_eq!(w.sack_bitmap(Psn(101)), 0b10);
        assert_eq!(w.receive(Psn(101)), RxOutcome::New);
        assert_eq!(w.cack(), Psn(102));
        assert!(!w.has_gap());
        assert_eq!(w.receive(Psn(101)), RxOutcome::Duplicate);
        assert_eq!(w.receive(Psn(103 + 64)), RxOutcome::Beyond);
        assert_eq!(w.receive(Psn(103 + 63)), RxOutcome::New);
    }

    #[test]
    fn wraps_around_the_psn_space() {
        let mut w = RxWindow::new(Psn(u32::MAX - 2), 64);
        for i in 0..10 {
            assert_eq!(w.receive(Psn(u32::MAX - 2).add(i)), RxOutcome::New);
        }
        assert_eq!(w.cack(), Psn(6));
    }

    proptest! {
        /// The window agrees with a BTreeSet model on every arrival, the
        /// cumulative ACK and the SACK bitmap.
        #[test]
        fn matches_a_set_model(start: u32, arrivals in proptest::collection::vec(0u32..200, 0..400)) {
            let range = 128u32;
            let mut w = RxWindow::new(Psn(start), range);
            let mut got: BTreeSet<u32> = BTreeSet::new(); // offsets from start
            for a in arrivals {
                let psn = Psn(start).add(a);
                // Model: base = smallest offset not in `got`.
                let base = (0u32..).find(|o| !got.contains(o)).unwrap_or(0);
                let expect = if got.contains(&a) || a < base {
                    RxOutcome::Duplicate
                } else if a >= base + range {
                    RxOutcome::Beyond
                } else {
                    RxOutcome::New
                };
                prop_assert_eq!(w.receive(psn), expect);
                if expect == RxOutcome::New {
                    got.insert(a);
                }
                let base = (0u32..).find(|o| !got.contains(o)).unwrap_or(0);
                prop_assert_eq!(w.base(), Psn(start).add(base));
                let bm = w.sack_bitmap(Psn(start).add(base));
                for i in 0..64u32 {
                    prop_assert_eq!(bm >> i & 1 == 1, got.contains(&(base + i)));
                }
            }
        }

        /// Mostly in-order arrivals (each a small step past the model's
        /// base, 0 = the next expected PSN), so the in-order fast path and
        /// the general path alternate; duplicates of recent PSNs too.
        #[test]
        fn in_order_runs_match_the_model(
            start: u32,
            steps in proptest::collection::vec((0u32..5, any::<bool>()), 0..400),
        ) {
            let range = 64u32;
            let mut w = RxWindow::new(Psn(start), range);
            let mut got: BTreeSet<u32> = BTreeSet::new();
            for (step, back) in steps {
                let base = (0u32..).find(|o| !got.contains(o)).unwrap_or(0);
                let a = if back { base.saturating_sub(step) } else { base + step };
                // `classify`'s no-gap answer is the ring's, here and across
                // and past the window.
                for o in [a, base, base + 1, base + range - 1, base + range, a + range] {
                    let p = Psn(start).add(o);
                    prop_assert_eq!(w.classify(p), w.classify_general(p));
                }
                let expect = if got.contains(&a) || a < base {
                    RxOutcome::Duplicate
                } else {
                    RxOutcome::New
                };
                prop_assert_eq!(w.receive(Psn(start).add(a)), expect);
                if expect == RxOutcome::New {
                    got.insert(a);
                }
                let base = (0u32..).find(|o| !got.contains(o)).unwrap_or(0);
                let highest = got.iter().next_back().map_or_else(|| base.wrapping_sub(1), |h| *h);
                prop_assert_eq!(w.base(), Psn(start).add(base));
                prop_assert_eq!(w.has_gap(), highest >= base && highest != base.wrapping_sub(1));
                let bm = w.sack_bitmap(Psn(start).add(base));
                for i in 0..64u32 {
                    prop_assert_eq!(bm >> i & 1 == 1, got.contains(&(base + i)));
                }
            }
        }
    }
}
