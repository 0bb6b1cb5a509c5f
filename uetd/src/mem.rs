//! Registered memory the daemon's workers place into: a shared mapping
//! (anonymous, or a client's memfd) behind `Arc`, so the same region can be
//! registered with the endpoint of every worker (a write from any peer
//! lands in it, whichever worker owns that peer).

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use uet_ses::RegisteredMemory;

use crate::sys::mem::Mapping;

/// A region of shared memory; clones share the bytes.
#[derive(Debug, Clone)]
pub struct SharedRegion(Arc<Mapping>);

impl SharedRegion {
    /// `len` zeroed bytes of anonymous shared memory (pages are committed
    /// on first touch).
    pub fn anonymous(len: usize) -> io::Result<Self> {
        Ok(Self(Arc::new(Mapping::anonymous(len)?)))
    }

    /// The first `len` bytes of `fd` (a memfd a client passed).
    pub fn from_fd(fd: BorrowedFd<'_>, len: usize) -> io::Result<Self> {
        Ok(Self(Arc::new(Mapping::of_fd(fd, len)?)))
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it is empty (never: mappings are at least one byte).
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }

    /// Copies `data` to `offset..`; false when it does not fit.
    pub fn write(&self, offset: usize, data: &[u8]) -> bool {
        self.0.write_at(offset, data)
    }

    /// Copies `offset..offset + out.len()` into `out`; false when it does
    /// not fit.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> bool {
        self.0.read_at(offset, out)
    }

    /// Fills `offset..offset + len` with the deterministic test pattern of
    /// `seed` (what the write tests send and verify).
    pub fn fill_pattern(&self, seed: u64, len: usize) {
        let mut buf = vec![0u8; 1 << 20];
        let mut off = 0;
        while off < len {
            let n = buf.len().min(len - off);
            pattern(seed, off as u64, &mut buf[..n]);
            self.write(off, &buf[..n]);
            off += n;
        }
    }

    /// XXH3-64 of the first `len` bytes (how a write is verified end to end).
    pub fn hash(&self, len: usize) -> u64 {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut off = 0;
        let len = len.min(self.len());
        while off < len {
            let n = buf.len().min(len - off);
            self.read(off, &mut buf[..n]);
            h.update(&buf[..n]);
            off += n;
        }
        h.digest()
    }
}

/// The test pattern: bytes of a SplitMix64 stream keyed by `seed` and the
/// 8-byte-aligned position, so any slice can be generated on its own.
pub fn pattern(seed: u64, offset: u64, out: &mut [u8]) {
    let word = |w: u64| {
        let mut z = seed ^ w.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)).to_le_bytes()
    };
    let mut pos = offset;
    let mut i = 0;
    while i < out.len() {
        let w = word(pos / 8);
        let start = (pos % 8) as usize;
        let n = (8 - start).min(out.len() - i);
        out[i..i + n].copy_from_slice(&w[start..start + n]);
        i += n;
        pos += n as u64;
    }
}

impl RegisteredMemory for SharedRegion {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) {
        if let Ok(off) = usize::try_from(offset) {
            self.0.write_at(off, data);
        }
    }

    fn read_at(&self, offset: u64, out: &mut [u8]) {
        if let Ok(off) = usize::try_from(offset) {
            self.0.read_at(off, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_bytes_and_bounds_are_checked() {
        let a = SharedRegion::anonymous(4096).unwrap();
        let b = a.clone();
        assert!(a.write(4090, b"hello!"));
        let mut out = [0u8; 6];
        assert!(b.read(4090, &mut out));
        assert_eq!(&out, b"hello!");
        assert!(!a.write(4091, b"hello!"), "one byte past the end");
        assert!(!a.write(usize::MAX, b"x"), "offset overflow");
        assert!(!b.read(4096, &mut out));
    }

    #[test]
    fn pattern_slices_agree_and_hash_sees_every_byte() {
        let mut whole = vec![0u8; 100];
        pattern(7, 0, &mut whole);
        let mut part = vec![0u8; 37];
        pattern(7, 13, &mut part);
        assert_eq!(&whole[13..50], &part[..]);
        let r = SharedRegion::anonymous(3 << 20).unwrap();
        r.fill_pattern(7, 3 << 20);
        let h = r.hash(3 << 20);
        r.write((2 << 20) + 5, &[!whole[0]]);
        assert_ne!(r.hash(3 << 20), h);
    }
}
