//! The anti-replay window over the 48-bit TSC of one sender and one key
//! (`docs/security.md` §4): RFC 4303 §3.4.3 style, a sliding bitmap whose
//! right edge is the highest TSC authenticated so far.
//!
//! A packet is checked before its tag is verified ([`ReplayWindow::check`])
//! and recorded only once the tag has verified ([`ReplayWindow::record`]), so
//! a forged packet can never move the window. A TSC above the right edge is
//! new, however far ahead (the window jumps); one at or below it is new only
//! if it is inside the window and not yet seen. The TSC never wraps: a
//! sender stops at its fatal limit below 2^48 (`docs/security.md` §3).

/// The most bits a window may have.
pub const MAX_WINDOW: u32 = 64 * WORDS as u32;
const WORDS: usize = 16;

/// Why [`ReplayWindow::check`] refused a TSC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Replay {
    /// This TSC was authenticated before.
    Duplicate,
    /// Further left than the window reaches: it cannot be told apart from a
    /// replay.
    TooOld,
}

/// A sliding window of `size` bits over TSC values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayWindow {
    /// Highest TSC recorded, `None` before the first.
    top: Option<u64>,
    /// Bit `t % size` says whether `t` (within the window) was recorded.
    bits: [u64; WORDS],
    size: u32,
}

impl ReplayWindow {
    /// A window of `size` bits, rounded up to a multiple of 64 and clamped to
    /// 64..=[`MAX_WINDOW`].
    #[must_use]
    pub fn new(size: u32) -> Self {
        let size = size.clamp(64, MAX_WINDOW).div_ceil(64) * 64;
        Self {
            top: None,
            bits: [0; WORDS],
            size,
        }
    }

    /// The window's size in bits.
    #[must_use]
    pub const fn size(&self) -> u32 {
        self.size
    }

    /// The highest TSC recorded.
    #[must_use]
    pub const fn top(&self) -> Option<u64> {
        self.top
    }

    fn slot(&self, tsc: u64) -> (usize, u64) {
        let i = tsc % u64::from(self.size);
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    /// Whether `tsc` may be new. Does not change the window.
    ///
    /// # Errors
    /// [`Replay::Duplicate`] or [`Replay::TooOld`].
    pub fn check(&self, tsc: u64) -> Result<(), Replay> {
        let Some(top) = self.top else { return Ok(()) };
        if tsc > top {
            return Ok(());
        }
        if top - tsc >= u64::from(self.size) {
            return Err(Replay::TooOld);
        }
        let (w, m) = self.slot(tsc);
        if self.bits[w] & m != 0 {
            Err(Replay::Duplicate)
        } else {
            Ok(())
        }
    }

    /// Records an authenticated `tsc` (which [`Self::check`] accepted),
    /// sliding the window right when it is a new right edge.
    pub fn record(&mut self, tsc: u64) {
        match self.top {
            Some(top) if tsc <= top => {}
            Some(top) if tsc - top < u64::from(self.size) => {
                // Clear the slots of top+1 ..= tsc: they now stand for new
                // TSC values.
                for t in top + 1..=tsc {
                    let (w, m) = self.slot(t);
                    self.bits[w] &= !m;
                }
                self.top = Some(tsc);
            }
            _ => {
                self.bits = [0; WORDS];
                self.top = Some(tsc);
            }
        }
        let (w, m) = self.slot(tsc);
        self.bits[w] |= m;
    }

    /// [`Self::check`], then [`Self::record`] if it passed.
    ///
    /// # Errors
    /// As [`Self::check`].
    pub fn check_and_record(&mut self, tsc: u64) -> Result<(), Replay> {
        self.check(tsc)?;
        self.record(tsc);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn in_order_duplicates_and_window_edge() {
        let mut w = ReplayWindow::new(64);
        assert_eq!(w.size(), 64);
        for t in 0..200 {
            w.check_and_record(t).unwrap();
            assert_eq!(w.check(t), Err(Replay::Duplicate));
        }
        assert_eq!(w.top(), Some(199));
        // 199 - 63 = 136 is the left edge: inside, already seen.
        assert_eq!(w.check(136), Err(Replay::Duplicate));
        assert_eq!(w.check(135), Err(Replay::TooOld));
        assert_eq!(w.check(0), Err(Replay::TooOld));
    }

    #[test]
    fn late_arrivals_inside_the_window_are_accepted_once() {
        let mut w = ReplayWindow::new(128);
        w.check_and_record(1000).unwrap();
        w.check_and_record(1000 - 127).unwrap();
        assert_eq!(w.check(1000 - 127), Err(Replay::Duplicate));
        assert_eq!(w.check(1000 - 128), Err(Replay::TooOld));
        w.check_and_record(999).unwrap();
        assert_eq!(w.top(), Some(1000));
    }

    #[test]
    fn far_ahead_jumps_and_forgets() {
        let mut w = ReplayWindow::new(64);
        w.check_and_record(5).unwrap();
        // Far ahead, up to the largest 48-bit TSC.
        let far = (1u64 << 48) - 1;
        w.check_and_record(far).unwrap();
        assert_eq!(w.top(), Some(far));
        assert_eq!(w.check(5), Err(Replay::TooOld));
        assert_eq!(w.check(far), Err(Replay::Duplicate));
        w.check_and_record(far - 63).unwrap();
        assert_eq!(w.check(far - 64), Err(Replay::TooOld));
        // Exactly one window ahead: everything before is forgotten.
        let mut w = ReplayWindow::new(64);
        w.check_and_record(10).unwrap();
        w.check_and_record(74).unwrap();
        assert_eq!(w.check(10), Err(Replay::TooOld));
        assert_eq!(w.check(11), Ok(()));
    }

    #[test]
    fn sizes_are_rounded_and_clamped() {
        assert_eq!(ReplayWindow::new(0).size(), 64);
        assert_eq!(ReplayWindow::new(65).size(), 128);
        assert_eq!(ReplayWindow::new(u32::MAX).size(), MAX_WINDOW);
    }

    proptest! {
        /// Against a model that remembers every TSC: a TSC is accepted iff it
        /// was never accepted and lies within `size` of the highest accepted.
        #[test]
        fn matches_a_model(
            size in prop::sample::select(vec![64u32, 128, 1024]),
            tscs in prop::collection::vec(0u64..3000, 1..400),
        ) {
            let mut w = ReplayWindow::new(size);
            let mut seen = BTreeSet::new();
            let mut top: Option<u64> = None;
            for t in tscs {
                let fresh = !seen.contains(&t)
                    && top.is_none_or(|top| t > top || top - t < u64::from(size));
                let got = w.check_and_record(t);
                prop_assert_eq!(got.is_ok(), fresh, "tsc {} top {:?}", t, top);
                if fresh {
                    seen.insert(t);
                    top = Some(top.map_or(t, |x| x.max(t)));
                }
            }
        }
    }
}
