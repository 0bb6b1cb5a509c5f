//! The Internet checksum's sum (RFC 1071) built for the widest vectors the
//! running CPU has.
//!
//! `uet_wire::inet::checksum::data` is plain Rust that the compiler
//! vectorises for the crate's target, which for `x86_64` is SSE2: every
//! packet without the CRC trailer is summed once when it is sent and once
//! when it arrives, and with 128-bit vectors the sum of a 3.4 KB frame costs
//! about as much as copying it. The same code compiled with AVX2 enabled
//! (on nearly every x86 server since 2013) took the writer's checksum from
//! 2.7–2.9 % of a 1 GiB write's CPU samples to 1.1 % (BENCHMARKS.md,
//! "Per-packet cost"); [`data`] picks that build when the CPU reports AVX2, once per call (a
//! cached flag), and the portable one otherwise. Both compute the same
//! function.

use uet_wire::inet::checksum;

/// The ones-complement sum of `bytes`, exactly as
/// [`checksum::data`], with AVX2 when the CPU has it.
#[inline]
#[must_use]
pub fn data(bytes: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: `data_avx2` only requires AVX2, and the CPU reported it.
        return unsafe { data_avx2(bytes) };
    }
    checksum::data(bytes)
}

/// `checksum::data` (always inlined) compiled with AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn data_avx2(bytes: &[u8]) -> u16 {
    checksum::data(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vector_build_sums_what_the_portable_one_does() {
        // Every length up to two AVX2 blocks past a 4 KiB frame's worth
        // and every start alignment, over bytes that carry into the high
        // half of the accumulator.
        let mut x = 0x9e37_79b9_u32;
        let buf: Vec<u8> = (0..9100)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        for start in 0..4 {
            for len in (0..300).chain([1471, 1472, 3412, 4095, 4096, 4097, 9000]) {
                let b = &buf[start..start + len];
                assert_eq!(data(b), checksum::data(b), "start {start}, len {len}");
            }
        }
        let ones = vec![0xffu8; 9000];
        assert_eq!(data(&ones), checksum::data(&ones));
        assert_eq!(data(&ones), 0xffff);
        assert_eq!(data(&[]), 0);
    }
}
