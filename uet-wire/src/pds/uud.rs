//! UUD_REQ (4 B) (`docs/protocol-notes.md` §2.11).
//!
//! ```text
//! 0      prologue   type 6 | next_hdr | flags (all reserved)
//! 2      rsvd       16, zero
//! ```
//!
//! UUD is best effort: no PDC, no PSN, not controlled by UET-CC (§2.11).

use core::fmt;

use super::prologue::{NextHeader, PdsType};
use super::{
    check_at_least, flags_of, fmt_next_hdr, next_hdr_raw_of, parse_next_hdr, set_flags_of,
    set_next_hdr_raw_of, set_prologue, set_type_raw_of, type_raw_of, wrong_type,
};
use crate::error::Result;
use crate::field::{set_u16, u16_at};

/// Length of a UUD_REQ header.
pub const HEADER_LEN: usize = 4;

mod field {
    pub(super) const RSVD: usize = 2;
}

/// A read/write view of a UUD_REQ header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it (for emitting into a buffer of the
    /// right size).
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer after checking its length: afterwards no accessor can
    /// panic.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the buffer holds the whole header.
    pub fn check_len(&self) -> Result<()> {
        check_at_least(self.buffer.as_ref(), HEADER_LEN)
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The raw 5-bit `type`.
    pub fn pds_type_raw(&self) -> u8 {
        type_raw_of(self.buffer.as_ref())
    }

    /// The raw 4-bit `next_hdr`.
    pub fn next_hdr_raw(&self) -> u8 {
        next_hdr_raw_of(self.buffer.as_ref())
    }

    /// The raw 7-bit `flags` (all reserved).
    pub fn flags(&self) -> u8 {
        flags_of(self.buffer.as_ref())
    }

    /// The reserved 16 bits.
    pub fn rsvd(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::RSVD)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes the whole prologue (values are masked to their widths).
    pub fn set_prologue(&mut self, ty: u8, next_hdr: u8, flags: u8) {
        set_prologue(self.buffer.as_mut(), ty, next_hdr, flags);
    }

    /// Sets the raw `type`.
    pub fn set_pds_type_raw(&mut self, v: u8) {
        set_type_raw_of(self.buffer.as_mut(), v);
    }

    /// Sets the raw `next_hdr`.
    pub fn set_next_hdr_raw(&mut self, v: u8) {
        set_next_hdr_raw_of(self.buffer.as_mut(), v);
    }

    /// Sets the raw `flags`.
    pub fn set_flags(&mut self, v: u8) {
        set_flags_of(self.buffer.as_mut(), v);
    }

    /// Sets the reserved 16 bits.
    pub fn set_rsvd(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::RSVD, v);
    }
}

/// A parsed UUD_REQ header: only the `next_hdr` carries information.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The SES header that follows.
    pub next_hdr: NextHeader,
}

impl Repr {
    /// Parses a UUD_REQ header. Flags and `rsvd` are reserved and ignored.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        packet.check_len()?;
        let ty = packet.pds_type_raw();
        if ty != PdsType::UudReq.code() {
            return Err(wrong_type(ty));
        }
        Ok(Self {
            next_hdr: parse_next_hdr(packet.next_hdr_raw())?,
        })
    }

    /// The packet type.
    #[must_use]
    pub const fn ty(&self) -> PdsType {
        PdsType::UudReq
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into a buffer of at least `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_prologue(self.ty().code(), self.next_hdr.code(), 0);
        packet.set_rsvd(0);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UUD_REQ")?;
        fmt_next_hdr(f, self.next_hdr)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::error::{Error, ErrorKind, Layer};
    use proptest::prelude::*;

    pub(crate) fn repr() -> impl Strategy<Value = Repr> {
        super::super::req::tests::next_hdr().prop_map(|next_hdr| Repr { next_hdr })
    }

    // UUD_REQ (6), next_hdr small request (1), flags 0:
    // 0b00110_0001_0000000 = 0x3080; rsvd 0.
    const UUD_SMALL: [u8; 4] = [0x30, 0x80, 0x00, 0x00];

    #[test]
    fn golden() {
        let r = Repr::parse(&Packet::new_checked(&UUD_SMALL[..]).unwrap()).unwrap();
        assert_eq!(
            r,
            Repr {
                next_hdr: NextHeader::RequestSmall
            }
        );
        let mut b = [0xffu8; 4];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, UUD_SMALL);
        assert_eq!(std::format!("{r}"), "UUD_REQ next=UET_HDR_REQUEST_SMALL");
    }

    #[test]
    fn reserved_bits_ignored_and_errors() {
        let r =
            Repr::parse(&Packet::new_checked(&[0x30u8, 0xff, 0xab, 0xcd][..]).unwrap()).unwrap();
        assert_eq!(r.next_hdr, NextHeader::RequestSmall);
        assert_eq!(
            Packet::new_checked(&UUD_SMALL[..3]).unwrap_err(),
            Error::truncated(Layer::Pds, 4, 3)
        );
        // next_hdr 15.
        let e = Repr::parse(&Packet::new_checked(&[0x37u8, 0x80, 0, 0][..]).unwrap()).unwrap_err();
        assert_eq!((e.kind, e.offset), (ErrorKind::Reserved(15), 0));
    }

    proptest! {
        #[test]
        fn round_trip(r in repr()) {
            let mut b = [0x5au8; HEADER_LEN];
            r.emit(&mut Packet::new_unchecked(&mut b[..r.buffer_len()]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(), r);
        }
    }
}
