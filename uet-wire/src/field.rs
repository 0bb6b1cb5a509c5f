#![allow(dead_code)] // helpers are used by the header modules as they land
//! Big-endian field access for packet views.
//!
//! Accessors index directly: a `Packet` only reaches them after its
//! `check_len` succeeded, which is the module-level contract that makes them
//! unable to panic (the smoltcp approach). Code that runs before a length
//! check uses `get()`.

/// A byte range inside a header.
pub type Field = core::ops::Range<usize>;

#[inline]
pub(crate) fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}

#[inline]
pub(crate) fn u24_at(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([0, b[off], b[off + 1], b[off + 2]])
}

#[inline]
pub(crate) fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

#[inline]
pub(crate) fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_be_bytes(a)
}

#[inline]
pub(crate) fn u128_at(b: &[u8], off: usize) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[off..off + 16]);
    u128::from_be_bytes(a)
}

#[inline]
pub(crate) fn set_u16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}

/// Writes the low 24 bits of `v`.
#[inline]
pub(crate) fn set_u24(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}

#[inline]
pub(crate) fn set_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn set_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn set_u128(b: &mut [u8], off: usize, v: u128) {
    b[off..off + 16].copy_from_slice(&v.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_endian_round_trip() {
        let mut b = [0u8; 16];
        set_u24(&mut b, 1, 0x00ab_cdef);
        assert_eq!(&b[..5], &[0, 0xab, 0xcd, 0xef, 0]);
        assert_eq!(u24_at(&b, 1), 0xab_cdef);
        set_u64(&mut b, 8, 0x0102_0304_0506_0708);
        assert_eq!(b[8], 1);
        assert_eq!(b[15], 8);
        assert_eq!(u64_at(&b, 8), 0x0102_0304_0506_0708);
        set_u16(&mut b, 0, 0xbeef);
        assert_eq!(u16_at(&b, 0), 0xbeef);
        set_u32(&mut b, 4, 0xdead_beef);
        assert_eq!(u32_at(&b, 4), 0xdead_beef);
    }
}
