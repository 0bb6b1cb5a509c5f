//! The 16-bit PDS prologue shared by every PDS header (`docs/protocol-notes.md`
//! §2.1): `type`:5 | `next_hdr` (or `ctl_type`):4 | `flags`:7, big endian.
//!
//! This module is the template for every header module of the crate:
//! a `Packet<T>` view whose accessors cannot panic after `new_checked`, a
//! `Repr` with `parse` / `emit` / `buffer_len`, and `Display`.

use core::fmt;

use crate::error::{Error, ErrorKind, Layer, Result};
use crate::field::{set_u16, u16_at};

/// Length of the prologue.
pub const HEADER_LEN: usize = 2;

/// PDS `type` codes (§2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PdsType {
    /// 1: TSS security header follows in place of a PDS header.
    Tss,
    /// 2: RUD request.
    RudReq,
    /// 3: ROD request.
    RodReq,
    /// 4: RUDI request.
    RudiReq,
    /// 5: RUDI response.
    RudiResp,
    /// 6: UUD request.
    UudReq,
    /// 7: ACK.
    Ack,
    /// 8: ACK with CC state.
    AckCc,
    /// 9: ACK with extended CC state.
    AckCcx,
    /// 10: NACK.
    Nack,
    /// 11: control packet.
    Cp,
    /// 12: NACK with extended CC state.
    NackCcx,
    /// 13: RUD request with CC state.
    RudCcReq,
    /// 14: ROD request with CC state.
    RodCcReq,
}

impl PdsType {
    /// Decodes a 5-bit type; 0 and 15-31 are reserved.
    pub const fn from_u8(v: u8) -> core::result::Result<Self, u8> {
        Ok(match v {
            1 => Self::Tss,
            2 => Self::RudReq,
            3 => Self::RodReq,
            4 => Self::RudiReq,
            5 => Self::RudiResp,
            6 => Self::UudReq,
            7 => Self::Ack,
            8 => Self::AckCc,
            9 => Self::AckCcx,
            10 => Self::Nack,
            11 => Self::Cp,
            12 => Self::NackCcx,
            13 => Self::RudCcReq,
            14 => Self::RodCcReq,
            other => return Err(other),
        })
    }

    /// The 5-bit wire value.
    #[must_use]
    pub const fn code(self) -> u8 {
        match self {
            Self::Tss => 1,
            Self::RudReq => 2,
            Self::RodReq => 3,
            Self::RudiReq => 4,
            Self::RudiResp => 5,
            Self::UudReq => 6,
            Self::Ack => 7,
            Self::AckCc => 8,
            Self::AckCcx => 9,
            Self::Nack => 10,
            Self::Cp => 11,
            Self::NackCcx => 12,
            Self::RudCcReq => 13,
            Self::RodCcReq => 14,
        }
    }

    /// The spec name (`RUD_CC_REQ`, …).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Tss => "TSS",
            Self::RudReq => "RUD_REQ",
            Self::RodReq => "ROD_REQ",
            Self::RudiReq => "RUDI_REQ",
            Self::RudiResp => "RUDI_RESP",
            Self::UudReq => "UUD_REQ",
            Self::Ack => "ACK",
            Self::AckCc => "ACK_CC",
            Self::AckCcx => "ACK_CCX",
            Self::Nack => "NACK",
            Self::Cp => "CP",
            Self::NackCcx => "NACK_CCX",
            Self::RudCcReq => "RUD_CC_REQ",
            Self::RodCcReq => "ROD_CC_REQ",
        }
    }
}

impl fmt::Display for PdsType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `next_hdr` codes (§2.3): which SES header follows the PDS header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NextHeader {
    /// 0: no SES header.
    None,
    /// 1: small request (20 B).
    RequestSmall,
    /// 2: medium request (32 B).
    RequestMedium,
    /// 3: standard request (44 B + extensions).
    RequestStd,
    /// 4: response (12 B).
    Response,
    /// 5: response with data (20 B + data).
    ResponseData,
    /// 6: small response with data (12 B + data).
    ResponseDataSmall,
}

impl NextHeader {
    /// Decodes a 4-bit `next_hdr`; 7-15 are reserved.
    pub const fn from_u8(v: u8) -> core::result::Result<Self, u8> {
        Ok(match v {
            0 => Self::None,
            1 => Self::RequestSmall,
            2 => Self::RequestMedium,
            3 => Self::RequestStd,
            4 => Self::Response,
            5 => Self::ResponseData,
            6 => Self::ResponseDataSmall,
            other => return Err(other),
        })
    }

    /// The 4-bit wire value.
    #[must_use]
    pub const fn code(self) -> u8 {
        match self {
            Self::None => 0,
            Self::RequestSmall => 1,
            Self::RequestMedium => 2,
            Self::RequestStd => 3,
            Self::Response => 4,
            Self::ResponseData => 5,
            Self::ResponseDataSmall => 6,
        }
    }

    /// The spec name (`UET_HDR_REQUEST_STD`, …).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::None => "UET_HDR_NONE",
            Self::RequestSmall => "UET_HDR_REQUEST_SMALL",
            Self::RequestMedium => "UET_HDR_REQUEST_MEDIUM",
            Self::RequestStd => "UET_HDR_REQUEST_STD",
            Self::Response => "UET_HDR_RESPONSE",
            Self::ResponseData => "UET_HDR_RESPONSE_DATA",
            Self::ResponseDataSmall => "UET_HDR_RESPONSE_DATA_SMALL",
        }
    }
}

impl fmt::Display for NextHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod field {
    pub(super) const WORD: usize = 0;
    pub(super) const TYPE_SHIFT: u16 = 11;
    pub(super) const NH_SHIFT: u16 = 7;
    pub(super) const NH_MASK: u16 = 0x0780;
    pub(super) const FLAGS_MASK: u16 = 0x007f;
}

/// A read/write view of a prologue.
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

    /// Checks that the buffer holds the whole prologue.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::truncated(Layer::Pds, HEADER_LEN, len));
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn word(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::WORD)
    }

    /// The raw 5-bit `type`.
    pub fn type_raw(&self) -> u8 {
        (self.word() >> field::TYPE_SHIFT) as u8
    }

    /// The raw 4-bit `next_hdr` (or `ctl_type` of a CP).
    pub fn next_hdr_raw(&self) -> u8 {
        ((self.word() & field::NH_MASK) >> field::NH_SHIFT) as u8
    }

    /// The raw 7-bit `flags`.
    pub fn flags(&self) -> u8 {
        (self.word() & field::FLAGS_MASK) as u8
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes all three prologue fields (values are masked to their widths).
    pub fn set(&mut self, ty: u8, next_hdr: u8, flags: u8) {
        let w = (u16::from(ty & 0x1f) << field::TYPE_SHIFT)
            | (u16::from(next_hdr & 0x0f) << field::NH_SHIFT)
            | u16::from(flags & 0x7f);
        set_u16(self.buffer.as_mut(), field::WORD, w);
    }
}

/// A parsed prologue. `next_hdr` and `flags` stay raw here because their
/// meaning depends on the type; each header's `Repr` types them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The packet type.
    pub ty: PdsType,
    /// `next_hdr`, or `ctl_type` for a CP (4 bits).
    pub next_hdr: u8,
    /// The 7 flag bits.
    pub flags: u8,
}

impl Repr {
    /// Parses a prologue; a reserved type is an error.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        let ty = PdsType::from_u8(packet.type_raw())
            .map_err(|v| Error::new(Layer::Pds, ErrorKind::Reserved(v), 0))?;
        Ok(Self {
            ty,
            next_hdr: packet.next_hdr_raw(),
            flags: packet.flags(),
        })
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the prologue.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set(self.ty.code(), self.next_hdr, self.flags);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PDS {} nh={} flags={:#04x}",
            self.ty, self.next_hdr, self.flags
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Golden vector: RUD_CC_REQ (13), next_hdr = standard request (3), flags
    // syn|ar = 0x0c -> 0b01101_0011_0001100 = 0x698c.
    const RUD_CC_STD_SYN_AR: [u8; 2] = [0x69, 0x8c];

    #[test]
    fn golden_parse() {
        let p = Packet::new_checked(&RUD_CC_STD_SYN_AR[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.ty, PdsType::RudCcReq);
        assert_eq!(NextHeader::from_u8(r.next_hdr), Ok(NextHeader::RequestStd));
        assert_eq!(r.flags, 0x0c);
    }

    #[test]
    fn golden_emit() {
        let mut b = [0u8; 2];
        Repr {
            ty: PdsType::RudCcReq,
            next_hdr: 3,
            flags: 0x0c,
        }
        .emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, RUD_CC_STD_SYN_AR);
    }

    #[test]
    fn reserved_type_and_truncation_are_errors() {
        let p = Packet::new_checked(&[0x00u8, 0x00][..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap_err().kind, ErrorKind::Reserved(0));
        assert_eq!(
            Packet::new_checked(&[0x10u8][..]).unwrap_err(),
            Error::truncated(Layer::Pds, 2, 1)
        );
    }

    proptest! {
        #[test]
        fn round_trip(ty in 1u8..=14, nh in 0u8..16, flags in 0u8..128) {
            let r = Repr { ty: PdsType::from_u8(ty).unwrap(), next_hdr: nh, flags };
            let mut b = [0u8; HEADER_LEN];
            r.emit(&mut Packet::new_unchecked(&mut b[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(), r);
        }
    }
}
