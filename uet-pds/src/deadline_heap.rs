//! A min-heap of deadlines keyed by their owner, with lazy invalidation.
//!
//! Each key's owner (a PDC, a CCC) keeps a [`Timer`]: the deadline last
//! computed for it and the one it has live in the heap. An entry whose
//! deadline is not the live one is stale and is dropped when it reaches the
//! top or at the next compaction. So a deadline that moves costs one push,
//! never a search of the heap. [`DeadlineHeap::offer`] takes a recomputed
//! deadline, [`DeadlineHeap::settle`] makes the top exact and bounds the
//! stale entries (compacted once they outnumber twice the live keys plus a
//! constant: amortized O(1) per push), and [`DeadlineHeap::take_due`] pops
//! what has passed.

use core::cell::Cell;
use core::cmp::Reverse;
use std::collections::BinaryHeap;

use uet_wire::time::Instant;

/// A key's deadline as last computed, and the one it has live in the heap.
#[derive(Debug, Default)]
pub(crate) struct Timer {
    deadline: Cell<Option<Instant>>,
    queued: Cell<Option<Instant>>,
}

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

    /// `key`'s deadline was computed again as `d`: queued if earlier than
    /// the one it has live (a later one leaves its entry early in the heap,
    /// for [`Self::settle`]).
    pub(crate) fn offer(&mut self, key: K, d: Option<Instant>, timer: &Timer) {
        timer.deadline.set(d);
        if let Some(d) = d
            && timer.queued.get().is_none_or(|q| d < q)
        {
            self.push(d, key);
            timer.queued.set(Some(d));
        }
    }

    /// Makes the top exact and returns it: stale entries (keys `timer_of`
    /// no longer knows, superseded deadlines) are dropped, and an early one
    /// is replaced by its key's deadline. Compacts once the heap holds more
    /// than twice `live` keys plus 64.
    pub(crate) fn settle<'a>(
        &mut self,
        live: usize,
        timer_of: impl Fn(K) -> Option<&'a Timer>,
    ) -> Option<Instant> {
        while let Some((t, key)) = self.peek() {
            match timer_of(key) {
                Some(timer) if timer.queued.get() == Some(t) => {
                    if timer.deadline.get() == Some(t) {
                        break;
                    }
                    // Early: the key's deadline moved later (or went).
                    self.pop();
                    timer.queued.set(timer.deadline.get());
                    if let Some(d) = timer.deadline.get() {
                        self.push(d, key);
                    }
                }
                _ => {
                    self.pop();
                }
            }
        }
        if self.len() > 2 * live + 64 {
            self.compact(|t, key| timer_of(key).is_some_and(|x| x.queued.get() == Some(t)));
        }
        self.peek().map(|(t, _)| t)
    }

    /// Takes the keys whose deadline has passed at `now` off the heap into
    /// `out` (unordered; a key may appear twice). Call after
    /// [`Self::settle`]; a key taken has no entry left, and is expected to
    /// be recomputed ([`Self::offer`]) after its timer ran.
    pub(crate) fn take_due<'a>(
        &mut self,
        now: Instant,
        timer_of: impl Fn(K) -> Option<&'a Timer>,
        out: &mut Vec<K>,
    ) {
        while let Some((t, key)) = self.peek()
            && t <= now
        {
            self.pop();
            let Some(timer) = timer_of(key) else {
                continue;
            };
            if timer.queued.get() != Some(t) {
                continue;
            }
            match timer.deadline.get() {
                Some(d) if d == t => {
                    timer.queued.set(None);
                    out.push(key);
                }
                Some(d) => {
                    self.push(d, key);
                    timer.queued.set(Some(d));
                }
                None => timer.queued.set(None),
            }
        }
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
