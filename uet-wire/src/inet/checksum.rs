//! The Internet checksum (RFC 1071): the 16-bit ones-complement sum used by
//! the IPv4 header and by UDP.
//!
//! The helpers return *sums*, not checksums: a sum is the folded
//! ones-complement sum of the 16-bit big-endian words of the data, in
//! `1..=0xFFFF` unless the data is all zero. Sums of several pieces add up
//! with [`combine`]; the checksum written on the wire is `!combine(..)`.
//!
//! A region verifies when the sum over it, checksum field included, is
//! `0xFFFF` (ones-complement "negative zero").
//!
//! Byte order does not matter to the ones-complement sum (RFC 1071 §2(B)), so
//! [`data`] adds 32-bit words in the machine's order into a 64-bit
//! accumulator, folds once at the end ("deferred carries", RFC 1071 §2(C))
//! and swaps the two bytes of the result on a little-endian machine.

use core::net::{Ipv4Addr, Ipv6Addr};

/// Folds a wide accumulator of 16-bit word sums into a 16-bit
/// ones-complement sum (end-around carry).
#[inline]
const fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The ones-complement sum of `bytes`, read as big-endian 16-bit words. An
/// odd trailing byte is padded with a zero byte (RFC 1071 §4.1).
///
/// Sums of consecutive slices may be added with [`combine`] only when every
/// slice but the last has an even length.
///
/// Every packet without the CRC trailer is summed once on send and once on
/// receive, so this is on the datapath's hot path. The words are read in the
/// machine's byte order and the folded sum swapped at the end (RFC 1071
/// §2(B)); without a byte swap per word the loop vectorises, about twice as
/// fast as reading big-endian words.
///
/// Always inlined, so that a caller compiled for wider vectors than the
/// crate's target (a `#[target_feature]` function that a program picks at
/// run time, as `uetd` does for AVX2) vectorises this loop with them.
#[must_use]
#[inline(always)]
pub fn data(bytes: &[u8]) -> u16 {
    let mut words = bytes.chunks_exact(4);
    let mut acc: u64 = (&mut words)
        .map(|w| u64::from(u32::from_ne_bytes([w[0], w[1], w[2], w[3]])))
        .sum();
    // The last 0..=3 bytes, zero-padded on the right: in memory order, so
    // an odd last byte is the high byte of its big-endian word.
    let rest = words.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    acc += u64::from(u32::from_ne_bytes(tail));
    let sum = fold(acc);
    if cfg!(target_endian = "little") {
        sum.swap_bytes()
    } else {
        sum
    }
}

/// A function that computes what [`data`] does: the encapsulation's
/// `_with` variants take one, so that a program can hand them a
/// vectorised build of [`data`] picked for its CPU at run time.
pub type SumFn = fn(&[u8]) -> u16;

/// Adds ones-complement sums.
#[must_use]
pub fn combine(sums: &[u16]) -> u16 {
    fold(sums.iter().map(|&s| u64::from(s)).sum())
}

/// The sum of the IPv4 pseudo-header (RFC 768): source, destination, zero,
/// protocol and the upper-layer length.
#[must_use]
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u16) -> u16 {
    let s = u64::from(u32::from_be_bytes(src.octets()));
    let d = u64::from(u32::from_be_bytes(dst.octets()));
    fold(s + d + u64::from(protocol) + u64::from(length))
}

/// The sum of the IPv6 pseudo-header (RFC 8200 §8.1): source, destination,
/// the 32-bit upper-layer length, three zero bytes and the next header.
#[must_use]
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, length: u32) -> u16 {
    let mut acc: u64 = 0;
    for a in [src, dst] {
        let v = u128::from_be_bytes(a.octets());
        acc += (v >> 96) as u64 & 0xffff_ffff;
        acc += (v >> 64) as u64 & 0xffff_ffff;
        acc += (v >> 32) as u64 & 0xffff_ffff;
        acc += v as u64 & 0xffff_ffff;
    }
    fold(acc + u64::from(length) + u64::from(next_header))
}

/// Incremental update of a checksum field after one 16-bit word of the
/// covered data changed from `old` to `new` (RFC 1624 eqn. 3:
/// `HC' = ~(~HC + ~m + m')`).
///
/// For data that is not all zero this gives exactly the checksum a full
/// recomputation would (neither path can produce the sum `0x0000`).
#[must_use]
pub fn update(checksum: u16, old: u16, new: u16) -> u16 {
    !fold(u64::from(!checksum) + u64::from(!old) + u64::from(new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Reference: the textbook 16-bit loop.
    fn naive(bytes: &[u8]) -> u16 {
        let mut acc: u32 = 0;
        for c in bytes.chunks(2) {
            let w = u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]);
            acc += u32::from(w);
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: 00 01 f2 03 f4 f5 f6 f7 sums to 0xddf2.
        assert_eq!(
            data(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0xddf2
        );
        assert_eq!(data(&[]), 0);
        assert_eq!(data(&[0xab]), 0xab00);
    }

    #[test]
    fn rfc1624_example() {
        // RFC 1624 §4: HC = 0xdd2f, m = 0x5555 -> m' = 0x3285 gives 0x0000.
        assert_eq!(update(0xdd2f, 0x5555, 0x3285), 0x0000);
    }

    proptest! {
        #[test]
        fn matches_the_naive_sum(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            prop_assert_eq!(data(&bytes), naive(&bytes));
            // Any alignment and any length of tail.
            if !bytes.is_empty() {
                prop_assert_eq!(data(&bytes[1..]), naive(&bytes[1..]));
            }
        }

        #[test]
        fn combine_splits_at_even_offsets(
            bytes in proptest::collection::vec(any::<u8>(), 0..300),
            cut in 0usize..150,
        ) {
            let cut = (cut * 2).min(bytes.len() & !1);
            let (a, b) = bytes.split_at(cut);
            prop_assert_eq!(combine(&[data(a), data(b)]), data(&bytes));
        }

        #[test]
        fn incremental_update_equals_recompute(
            mut words in proptest::collection::vec(any::<u16>(), 2..40),
            idx in any::<prop::sample::Index>(),
            new in any::<u16>(),
        ) {
            // Word 0 is non-zero so the data is never all zero.
            words[0] |= 1;
            let i = 1 + idx.index(words.len() - 1);
            let bytes = |w: &[u16]| w.iter().flat_map(|x| x.to_be_bytes()).collect::<Vec<u8>>();
            let before = !data(&bytes(&words));
            let old = words[i];
            words[i] = new;
            prop_assert_eq!(update(before, old, new), !data(&bytes(&words)));
        }
    }
}
