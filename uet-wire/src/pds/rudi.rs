//! RUDI_REQ / RUDI_RESP (8 B) (`docs/protocol-notes.md` §2.11).
//!
//! ```text
//! 0      prologue   type 4 (request) / 5 (response) | next_hdr | flags (m 0x20 responses only, retx 0x10)
//! 2      rsvd       16, zero
//! 4      pkt_id     u32: locally unique packet ID, echoed in the response and in NACKs with nt = 1
//! ```
//!
//! RUDI is reliable at-least-once delivery for idempotent operations, with
//! no PDC and no ACKs (§2.11).

use core::fmt;

use super::prologue::{NextHeader, PdsType};
use super::{
    check_at_least, flags_of, fmt_flag, fmt_next_hdr, next_hdr_raw_of, parse_next_hdr,
    set_flags_of, set_next_hdr_raw_of, set_prologue, set_type_raw_of, type_raw_of, wrong_type,
};
use crate::error::Result;
use crate::field::{set_u16, set_u32, u16_at, u32_at};

/// Length of a RUDI header.
pub const HEADER_LEN: usize = 8;

/// RUDI flag bits (§2.4).
pub mod flags {
    /// Response only: the request was ECN-CE marked.
    pub const M: u8 = 0x20;
    /// The packet is a retransmission.
    pub const RETX: u8 = 0x10;
}

mod field {
    pub(super) const RSVD: usize = 2;
    pub(super) const PKT_ID: usize = 4;
}

/// Request or response; the `m` flag exists only in responses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RudiKind {
    /// RUDI_REQ (type 4).
    Request,
    /// RUDI_RESP (type 5).
    Response {
        /// `m`: the request was ECN-CE marked.
        m: bool,
    },
}

/// A read/write view of a RUDI header.
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

    /// The raw 7-bit `flags`.
    pub fn flags(&self) -> u8 {
        flags_of(self.buffer.as_ref())
    }

    /// The `m` flag (meaningful in responses only).
    pub fn m(&self) -> bool {
        self.flags() & flags::M != 0
    }

    /// The `retx` flag.
    pub fn retx(&self) -> bool {
        self.flags() & flags::RETX != 0
    }

    /// The reserved 16 bits.
    pub fn rsvd(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::RSVD)
    }

    /// `pkt_id`.
    pub fn pkt_id(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::PKT_ID)
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

    /// Sets `pkt_id`.
    pub fn set_pkt_id(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::PKT_ID, v);
    }
}

/// A parsed RUDI_REQ or RUDI_RESP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Request or response (with its `m` flag).
    pub kind: RudiKind,
    /// The SES header that follows.
    pub next_hdr: NextHeader,
    /// `retx`: this is a retransmission.
    pub retx: bool,
    /// The packet ID.
    pub pkt_id: u32,
}

impl Repr {
    /// Parses a RUDI header. Reserved flags and `rsvd` are ignored, and so
    /// is `m` on a request.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        packet.check_len()?;
        let ty = packet.pds_type_raw();
        let kind = match PdsType::from_u8(ty) {
            Ok(PdsType::RudiReq) => RudiKind::Request,
            Ok(PdsType::RudiResp) => RudiKind::Response { m: packet.m() },
            _ => return Err(wrong_type(ty)),
        };
        Ok(Self {
            kind,
            next_hdr: parse_next_hdr(packet.next_hdr_raw())?,
            retx: packet.retx(),
            pkt_id: packet.pkt_id(),
        })
    }

    /// The packet type.
    #[must_use]
    pub const fn ty(&self) -> PdsType {
        match self.kind {
            RudiKind::Request => PdsType::RudiReq,
            RudiKind::Response { .. } => PdsType::RudiResp,
        }
    }

    /// The `m` flag (always false for a request).
    #[must_use]
    pub const fn m(&self) -> bool {
        matches!(self.kind, RudiKind::Response { m: true })
    }

    /// The 7-bit `flags` this header is emitted with.
    #[must_use]
    pub const fn flags(&self) -> u8 {
        (if self.m() { flags::M } else { 0 }) | (if self.retx { flags::RETX } else { 0 })
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into a buffer of at least `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_prologue(self.ty().code(), self.next_hdr.code(), self.flags());
        packet.set_rsvd(0);
        packet.set_pkt_id(self.pkt_id);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} pkt_id={}", self.ty(), self.pkt_id)?;
        fmt_flag(f, self.m(), "m")?;
        fmt_flag(f, self.retx, "retx")?;
        fmt_next_hdr(f, self.next_hdr)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::error::{Error, Layer};
    use proptest::prelude::*;

    pub(crate) fn repr() -> impl Strategy<Value = Repr> {
        (
            proptest::option::of(any::<bool>()),
            super::super::req::tests::next_hdr(),
            any::<bool>(),
            any::<u32>(),
        )
            .prop_map(|(resp, next_hdr, retx, pkt_id)| Repr {
                kind: resp.map_or(RudiKind::Request, |m| RudiKind::Response { m }),
                next_hdr,
                retx,
                pkt_id,
            })
    }

    // RUDI_REQ (4), next_hdr standard (3), flags retx (0x10):
    // 0b00100_0011_0010000 = 0x2190; rsvd 0; pkt_id 0xdeadbeef.
    const RUDI_REQ: [u8; 8] = [0x21, 0x90, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef];
    // RUDI_RESP (5), next_hdr response (4), flags m (0x20):
    // 0b00101_0100_0100000 = 0x2a20; pkt_id 0xdeadbeef.
    const RUDI_RESP: [u8; 8] = [0x2a, 0x20, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef];

    #[test]
    fn golden() {
        let req = Repr::parse(&Packet::new_checked(&RUDI_REQ[..]).unwrap()).unwrap();
        assert_eq!(
            req,
            Repr {
                kind: RudiKind::Request,
                next_hdr: NextHeader::RequestStd,
                retx: true,
                pkt_id: 0xdead_beef,
            }
        );
        let resp = Repr::parse(&Packet::new_checked(&RUDI_RESP[..]).unwrap()).unwrap();
        assert_eq!(
            resp,
            Repr {
                kind: RudiKind::Response { m: true },
                next_hdr: NextHeader::Response,
                retx: false,
                pkt_id: 0xdead_beef,
            }
        );
        let mut b = [0xffu8; 8];
        req.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, RUDI_REQ);
        resp.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, RUDI_RESP);
        assert_eq!(
            std::format!("{resp}"),
            "RUDI_RESP pkt_id=3735928559 m next=UET_HDR_RESPONSE"
        );
    }

    #[test]
    fn reserved_bits_and_m_on_request_ignored() {
        let mut b = RUDI_REQ;
        b[1] |= 0x6f; // reserved flags and m
        b[2] = 0xff; // rsvd
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert!(!r.m());
        let mut out = [0u8; 8];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, RUDI_REQ);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Packet::new_checked(&RUDI_REQ[..7]).unwrap_err(),
            Error::truncated(Layer::Pds, 8, 7)
        );
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
