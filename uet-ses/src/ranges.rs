//! Which bytes of a message have arrived: a set of disjoint half-open byte
//! ranges, so that reassembly is order-independent and idempotent (a
//! repeated packet adds nothing).

/// Sorted, disjoint, non-adjacent half-open ranges `[start, end)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RangeSet {
    ranges: Vec<(u64, u64)>,
    covered: u64,
}

impl RangeSet {
    /// An empty set.
    pub(crate) const fn new() -> Self {
        Self {
            ranges: Vec::new(),
            covered: 0,
        }
    }

    /// Adds `[start, end)`; returns how many of its bytes were new.
    #[inline(always)]
    pub(crate) fn insert(&mut self, start: u64, end: u64) -> u64 {
        // In-order arrival, the common case: the range starts at the end of
        // the last one and extends it, decided here without a call.
        if let Some(last) = self.ranges.last_mut()
            && last.1 == start
            && start < end
        {
            last.1 = end;
            self.covered += end - start;
            return end - start;
        }
        self.insert_general(start, end)
    }

    /// [`RangeSet::insert`] for every case.
    #[inline(never)]
    fn insert_general(&mut self, start: u64, end: u64) -> u64 {
        if start >= end {
            return 0;
        }
        // The range starts at or after the end of the last one, so it
        // extends or follows it.
        if let Some(last) = self.ranges.last_mut()
            && last.1 <= start
        {
            if last.1 == start {
                last.1 = end;
            } else {
                self.ranges.push((start, end));
            }
            self.covered += end - start;
            return end - start;
        }
        // The first range that ends at or after `start` (touching counts, so
        // adjacent ranges merge).
        let first = self.ranges.partition_point(|&(_, e)| e < start);
        let mut last = first;
        let (mut lo, mut hi) = (start, end);
        let mut overlap = 0;
        while let Some(&(s, e)) = self.ranges.get(last) {
            if s > end {
                break;
            }
            overlap += e.min(end).saturating_sub(s.max(start));
            lo = lo.min(s);
            hi = hi.max(e);
            last += 1;
        }
        self.ranges.splice(first..last, [(lo, hi)]);
        let added = (end - start) - overlap;
        self.covered += added;
        added
    }

    /// Total bytes covered.
    pub(crate) const fn covered(&self) -> u64 {
        self.covered
    }

    /// Whether `[0, len)` is covered entirely.
    #[cfg(test)]
    pub(crate) fn is_complete(&self, len: u64) -> bool {
        len == 0 || self.ranges.first() == Some(&(0, len))
    }

    /// Number of disjoint ranges.
    pub(crate) const fn fragments(&self) -> usize {
        self.ranges.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn trace() {
        let mut r = RangeSet::new();
        assert_eq!(r.insert(10, 20), 10);
        assert_eq!(r.insert(30, 40), 10);
        assert_eq!(r.fragments(), 2);
        assert_eq!(r.insert(15, 35), 10); // bridges both
        assert_eq!(r.fragments(), 1);
        assert_eq!(r.insert(10, 40), 0); // duplicate
        assert_eq!(r.insert(40, 41), 1); // adjacent merges
        assert_eq!(r.fragments(), 1);
        assert_eq!(r.insert(0, 10), 10);
        assert!(r.is_complete(41));
        assert_eq!(r.covered(), 41);
        assert_eq!(r.insert(5, 5), 0);
        assert_eq!(r.insert(7, 3), 0);
        // Empty and reversed ranges at the end of the last one: nothing.
        assert_eq!(r.insert(41, 41), 0);
        assert_eq!(r.insert(41, 30), 0);
        assert!(r.is_complete(41));
        assert_eq!(r.covered(), 41);
    }

    proptest! {
        /// Against a bitmap oracle: every insert reports exactly the bytes it
        /// newly covers, and the ranges stay sorted and disjoint.
        #[test]
        fn matches_a_bitmap(ops in prop::collection::vec((0u64..200, 0u64..40), 0..40)) {
            let mut r = RangeSet::new();
            let mut bits = [false; 240];
            for (s, n) in ops {
                let e = s + n;
                let mut new = 0;
                for b in &mut bits[s as usize..e as usize] {
                    if !*b { *b = true; new += 1; }
                }
                prop_assert_eq!(r.insert(s, e), new);
                prop_assert_eq!(r.covered(), bits.iter().filter(|b| **b).count() as u64);
                for w in r.ranges.windows(2) {
                    prop_assert!(w[0].1 < w[1].0);
                }
            }
        }
    }
}
