//! Entropy-value selection (`uet-spec-notes.md` §6).
//!
//! Oblivious spraying: every EV of the configured space is used once, in a
//! pseudo-random order, before any repeats; the order is re-randomized on each
//! wrap (HTSIM `uec_mp.cpp`: `ev = (idx ^ xor) & (N-1)`, the xor redrawn per
//! wrap). Single-path mode (ROD, §6 "Single path") keeps one EV. REPS and the
//! bitmap scheme arrive with the CMS issue behind the same `next_ev` /
//! `process_ev` interface.

use uet_wire::EntropyValue;
use uet_wire::rand::Rng;

/// Feedback for an EV, as `process_ev` receives it (§5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvFeedback {
    /// ACKed without an ECN mark.
    Good,
    /// ACKed or NACKed with `m` = 1.
    Ecn,
    /// NACKed for a non-last-hop trim.
    Nack,
    /// Inferred lost (RTO).
    Timeout,
}

/// Chooses the entropy value of each packet.
#[derive(Debug, Clone)]
pub enum EvSelector {
    /// One fixed EV (ROD's single-path mode).
    Single(EntropyValue),
    /// Oblivious spraying over `2^bits` EVs starting at `base`.
    Oblivious {
        /// Base of the EV space (the bits above the mask).
        base: u16,
        /// log2 of the EV space size (≤ 16).
        bits: u8,
        /// Position in the current permutation.
        idx: u32,
        /// The xor that defines the current permutation.
        xor: u16,
    },
}

impl EvSelector {
    /// Oblivious spraying over `2^bits` values above `base` (bits ≤ 16).
    #[must_use]
    pub fn oblivious(base: u16, bits: u8, rng: &mut impl Rng) -> Self {
        let bits = bits.min(16);
        Self::Oblivious {
            base,
            bits,
            idx: 0,
            xor: rng.next_u32() as u16,
        }
    }

    /// The EV for the next packet.
    pub fn next_ev(&mut self, rng: &mut impl Rng) -> EntropyValue {
        match self {
            Self::Single(ev) => *ev,
            Self::Oblivious {
                base,
                bits,
                idx,
                xor,
            } => {
                let mask: u32 = if *bits >= 16 {
                    0xffff
                } else {
                    (1u32 << *bits) - 1
                };
                let ev = ((*idx ^ u32::from(*xor)) & mask) as u16 | (*base & !(mask as u16));
                *idx += 1;
                if *idx > mask {
                    *idx = 0;
                    *xor = rng.next_u32() as u16;
                }
                EntropyValue::from_masked(ev)
            }
        }
    }

    /// Feedback about an EV. Oblivious spraying ignores it by design.
    pub fn process_ev(&mut self, _ev: EntropyValue, _feedback: EvFeedback) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use uet_wire::rand::Xoshiro256;

    #[test]
    fn oblivious_uses_every_ev_once_per_round() {
        let mut rng = Xoshiro256::seed_from_u64(7);
        let mut sel = EvSelector::oblivious(0xc000, 8, &mut rng);
        for _round in 0..3 {
            let mut seen = [false; 256];
            for _ in 0..256 {
                let ev = sel.next_ev(&mut rng).get();
                assert_eq!(ev & 0xff00, 0xc000);
                let i = usize::from(ev & 0xff);
                assert!(!seen[i], "EV {ev:#x} repeated within a round");
                seen[i] = true;
            }
        }
    }

    #[test]
    fn single_path_keeps_its_ev() {
        let mut rng = Xoshiro256::seed_from_u64(1);
        let mut sel = EvSelector::Single(EntropyValue::from_masked(0x4242));
        assert!((0..10).all(|_| sel.next_ev(&mut rng).get() == 0x4242));
    }
}
