//! A min-heap of deadlines keyed by their owner, with lazy invalidation.
//!
//! The owner of a key (the engine, for its PDCs) remembers which deadline
//! it last pushed for each key; an entry whose deadline is not that one is
//! stale and is dropped when it reaches the top or at the next compaction.
//! So a deadline that moves costs one push, never a search of the heap.
//! Stale entries are bounded by [`DeadlineHeap::compact`], which the owner
//! calls once the heap holds more than twice its live keys (plus a
//! constant): amortized O(1) per push.

use core::cmp::Reverse;
use std::collections::BinaryHeap;

use uet_wire::time::Instant;

/// Deadlines with their keys, earliest first.
#[derive(Debug)]
pub(crate) struct DeadlineHeap<K> {
    heap: BinaryHeap<Reverse<(Instant, K)>>,
}

impl<K: Ord + Copy> Default for DeadlineHeap<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Ord + Copy> DeadlineHeap<K> {
    pub(crate) fn new() -> Self {
        Self {
            heap: BinaryHeap::new(),
        }
    }

    /// Entries, stale ones included.
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    pub(crate) fn push(&mut self, at: Instant, key: K) {
        self.heap.push(Reverse((at, key)));
    }

    /// The earliest entry.
    pub(crate) fn peek(&self) -> Option<(Instant, K)> {
        self.heap.peek().map(|Reverse(e)| *e)
    }

    pub(crate) fn pop(&mut self) -> Option<(Instant, K)> {
        self.heap.pop().map(|Reverse(e)| e)
    }

    /// Keeps only the entries `live` accepts, each once.
    pub(crate) fn compact(&mut self, mut live: impl FnMut(Instant, K) -> bool) {
        let mut v = core::mem::take(&mut self.heap).into_vec();
        v.retain(|Reverse((at, k))| live(*at, *k));
        v.sort_unstable();
        v.dedup();
        self.heap = BinaryHeap::from(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uet_wire::time::Duration;

    fn t(us: u64) -> Instant {
        Instant::ZERO + Duration::from_micros(us)
    }

    #[test]
    fn earliest_first_and_compaction_keeps_live_entries_once() {
        let mut h = DeadlineHeap::new();
        h.push(t(30), 1u16);
        h.push(t(10), 2);
        h.push(t(20), 1);
        h.push(t(20), 1);
        assert_eq!(h.peek(), Some((t(10), 2)));
        // Key 1's deadline is now 20: its entry at 30 is stale.
        h.compact(|at, k| k == 2 || at == t(20));
        assert_eq!(h.len(), 2);
        assert_eq!(h.pop(), Some((t(10), 2)));
        assert_eq!(h.pop(), Some((t(20), 1)));
        assert_eq!(h.pop(), None);
    }
}
