//! A PDC's queue of packets not yet sent, stored as runs.
//!
//! A message is queued as many consecutive packets of one token whose
//! fragments count up and whose lengths are all the same except the last
//! one's. Storing one entry per run instead of one per packet makes
//! queueing a message O(1) per packet without a copy of each [`PktRef`],
//! and taking the next packet a counter step. The queue behaves exactly like
//! a `VecDeque<PktRef>` of the same packets (tested against one).

use std::collections::VecDeque;

use crate::pkt_ref::PktRef;

/// `n` packets `token`/`frag`, `frag + 1`, … of `len` bytes each; only the
/// last of them may have `last` set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    token: u64,
    frag: u32,
    len: u32,
    n: u32,
    last: bool,
}

impl Run {
    const fn single(p: PktRef) -> Self {
        Self {
            token: p.token,
            frag: p.frag,
            len: p.len,
            n: 1,
            last: p.last,
        }
    }

    /// The first packet.
    #[inline]
    const fn front(&self) -> PktRef {
        PktRef {
            token: self.token,
            frag: self.frag,
            len: self.len,
            last: self.last && self.n == 1,
        }
    }

    /// Whether `p` is the packet that comes right after this run.
    #[inline]
    fn continued_by(&self, p: &PktRef) -> bool {
        !self.last
            && p.token == self.token
            && p.len == self.len
            && self.n < u32::MAX
            && self.frag.checked_add(self.n) == Some(p.frag)
    }
}

/// Packets waiting to be sent, in order (see the module docs).
#[derive(Debug, Clone, Default)]
pub(crate) struct PktQueue {
    runs: VecDeque<Run>,
}

impl PktQueue {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    #[inline]
    /// Packets queued (a sum over runs: called when a PDC is reused, not
    /// per packet).
    pub(crate) fn packets(&self) -> u64 {
        self.runs.iter().map(|r| u64::from(r.n)).sum()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Appends one packet (extending the last run when it continues it).
    #[inline]
    pub(crate) fn push_back(&mut self, p: PktRef) {
        match self.runs.back_mut() {
            Some(r) if r.continued_by(&p) => {
                r.n += 1;
                r.last = p.last;
            }
            _ => self.runs.push_back(Run::single(p)),
        }
    }

    /// Appends the packets of one message: `frag` 0 to `count - 1` of
    /// `token`, each `len` bytes except the last (`last_len`, with `last`
    /// set). The same as `push_back` of each of them, in O(1).
    pub(crate) fn push_message(&mut self, token: u64, count: u32, len: u32, last_len: u32) {
        if count == 0 {
            return;
        }
        if count > 1 {
            let first = PktRef {
                token,
                frag: 0,
                len,
                last: false,
            };
            self.push_back(first);
            if let Some(r) = self.runs.back_mut() {
                // `push_back` either started a run with `first` or extended
                // one with it; the rest of the message continues it.
                r.n += count - 2;
            }
        }
        self.push_back(PktRef {
            token,
            frag: count - 1,
            len: last_len,
            last: true,
        });
    }

    /// The next packet.
    #[inline]
    pub(crate) fn front(&self) -> Option<PktRef> {
        self.runs.front().map(Run::front)
    }

    /// Removes the next packet and returns it (the transmit path uses
    /// [`PktQueue::front`] and [`PktQueue::advance`]).
    #[cfg(test)]
    pub(crate) fn pop_front(&mut self) -> Option<PktRef> {
        let p = self.front()?;
        self.advance();
        Some(p)
    }

    /// Removes the next packet, which the caller already has from
    /// [`PktQueue::front`] (without building it again, inline: the
    /// transmit path takes one packet per call).
    #[inline(always)]
    pub(crate) fn advance(&mut self) {
        if let Some(r) = self.runs.front_mut() {
            if r.n == 1 {
                self.runs.pop_front();
            } else {
                r.n -= 1;
                r.frag += 1;
            }
        }
    }

    pub(crate) fn clear(&mut self) {
        self.runs.clear();
    }

    /// Removes and returns every packet, in order.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = PktRef> + use<> {
        core::mem::take(&mut self.runs).into_iter().flat_map(|r| {
            (0..r.n).map(move |i| PktRef {
                token: r.token,
                frag: r.frag + i,
                len: r.len,
                last: r.last && i + 1 == r.n,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Push(PktRef),
        /// A whole message: `n` packets of `len`, the last one `last_len`.
        Message {
            token: u64,
            n: u32,
            len: u32,
            last_len: u32,
        },
        /// `push_message`.
        Bulk {
            token: u64,
            n: u32,
            len: u32,
            last_len: u32,
        },
        Pop,
        /// `advance`.
        Advance,
        Front,
        Drain,
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        let pkt = (
            0u64..3,
            0u32..6,
            prop_oneof![Just(100u32), 0u32..200],
            any::<bool>(),
        )
            .prop_map(|(token, frag, len, last)| PktRef {
                token,
                frag,
                len,
                last,
            });
        prop_oneof![
            3 => pkt.prop_map(Op::Push),
            2 => (0u64..3, 0u32..5, prop_oneof![Just(100u32), 1u32..200], 0u32..200)
                .prop_map(|(token, n, len, last_len)| Op::Message { token, n, len, last_len }),
            2 => (0u64..3, 0u32..5, prop_oneof![Just(100u32), 1u32..200], 0u32..200)
                .prop_map(|(token, n, len, last_len)| Op::Bulk { token, n, len, last_len }),
            4 => Just(Op::Pop),
            2 => Just(Op::Advance),
            2 => Just(Op::Front),
            1 => Just(Op::Drain),
            1 => Just(Op::Clear),
        ]
    }

    proptest! {
        /// The queue answers every call as a `VecDeque<PktRef>` does.
        #[test]
        fn behaves_like_a_deque_of_packets(ops in proptest::collection::vec(op(), 0..60)) {
            let mut q = PktQueue::new();
            let mut model: VecDeque<PktRef> = VecDeque::new();
            for op in ops {
                match op {
                    Op::Push(p) => {
                        q.push_back(p);
                        model.push_back(p);
                    }
                    Op::Message { token, n, len, last_len } => {
                        for frag in 0..n {
                            let last = frag + 1 == n;
                            let p = PktRef { token, frag, len: if last { last_len } else { len }, last };
                            q.push_back(p);
                            model.push_back(p);
                        }
                    }
                    Op::Bulk { token, n, len, last_len } => {
                        q.push_message(token, n, len, last_len);
                        for frag in 0..n {
                            let last = frag + 1 == n;
                            let p = PktRef { token, frag, len: if last { last_len } else { len }, last };
                            model.push_back(p);
                        }
                    }
                    Op::Pop => prop_assert_eq!(q.pop_front(), model.pop_front()),
                    Op::Advance => {
                        q.advance();
                        model.pop_front();
                    }
                    Op::Front => prop_assert_eq!(q.front(), model.front().copied()),
                    Op::Drain => {
                        let got: Vec<PktRef> = q.drain().collect();
                        let want: Vec<PktRef> = model.drain(..).collect();
                        prop_assert_eq!(got, want);
                    }
                    Op::Clear => {
                        q.clear();
                        model.clear();
                    }
                }
                prop_assert_eq!(q.is_empty(), model.is_empty());
            }
            let got: Vec<PktRef> = q.drain().collect();
            prop_assert_eq!(got, Vec::from(model));
        }
    }
}
