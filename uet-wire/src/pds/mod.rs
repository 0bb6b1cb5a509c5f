//! PDS headers (`docs/protocol-notes.md` §2).
//!
//! Every PDS header starts with the 16-bit [`prologue`] (`type`:5 |
//! `next_hdr`:4 | `flags`:7). One module per header family, each with a
//! `Packet<T>` view (getters; setters when `T: AsMut<[u8]>`) and a `Repr`:
//!
//! | module | types | bytes |
//! |---|---|---|
//! | [`req`] | RUD_REQ, ROD_REQ, RUD_CC_REQ, ROD_CC_REQ (2, 3, 13, 14) | 12 / 16 |
//! | [`rudi`] | RUDI_REQ, RUDI_RESP (4, 5) | 8 |
//! | [`uud`] | UUD_REQ (6) | 4 |
//! | [`ack`] | ACK, ACK_CC, ACK_CCX (7, 8, 9), with [`cc_state`] | 12 (16 with EPSN) / 32 / 40 |
//! | [`nack`] | NACK, NACK_CCX (10, 12), with [`nack_code`] | 16 / 32 |
//! | [`cp`] | CP (11) | 16 |
//! | [`tss`] | the TSS security header (1) | 12 / 16 |
//!
//! [`PdsRepr`] is the sum of all PDS header `Repr`s: [`PdsRepr::parse`] reads
//! the prologue and dispatches on `type`.
//!
//! ## Decisions that apply to every header
//!
//! * **Reserved flag bits** are ignored on parse (be liberal) and written as
//!   zero on emit. So are reserved bytes and bit fields (RUDI/UUD `rsvd`, the
//!   24 reserved bits of the CREDIT `ack_cc_state`, CP bytes 2-3 outside
//!   PROBE, the unused parts of CP payloads, the TSS rsvd bit).
//! * **Reserved codes** are errors only where the value decides how the rest
//!   of the header is read: a reserved `type` (0, 15-31) and a reserved
//!   `next_hdr` (7-15) on any non-CP type are `ErrorKind::Reserved(v)` at byte
//!   0. Unknown NACK codes, CP `ctl_type`s 10-15 and unknown `cc_type`s parse
//!   into `Unknown`/`Reserved`/`Other` variants and round-trip.
//! * **Flags that change a field's meaning** (`syn`, ACK `p`, NACK `nt`, ACK
//!   `epsn`) are not stored as bools: the `Repr` holds an enum whose variant
//!   *is* the flag (e.g. [`DpdcidField`]), so flag and field
//!   cannot disagree. Accessors such as `syn()` derive the bit.
//! * **Sub-byte fields** are checked newtypes (`PdcInfo` 4 bits,
//!   `SynPsnOffset` 12 bits, `CwndPenalty` 7 bits, …): a `Repr` that can be
//!   built can be emitted and parses back to itself.
//! * **Wrong type for a module**: `X::Repr::parse` on a packet whose `type`
//!   belongs to another module is `ErrorKind::OutOfRange` at byte 0 (the
//!   `type` field is outside the range that module decodes).
//! * **TSS is not a `PdsRepr`**: it is a security header *in front of* a PDS
//!   header. [`PdsRepr::parse`] on type 1 returns `ErrorKind::OutOfRange` at
//!   byte 0; use [`parse_with_tss`] (or [`tss::Repr`] and then
//!   [`PdsRepr::parse`]) for frames that may carry one.
//!
//! Parsing never panics and never allocates; error offsets point at the
//! offending byte within the PDS header.

use core::fmt;

use crate::error::{Error, ErrorKind, Layer, Result};
use crate::field::{set_u16, u16_at};

/// Declares a checked unsigned newtype of `$bits` bits (the pattern of
/// `types.rs`, for sub-byte fields that only the PDS headers use).
macro_rules! bits_newtype {
    ($(#[$m:meta])* $name:ident, $repr:ty, $bits:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name($repr);

        impl $name {
            /// Number of bits the value occupies on the wire.
            pub const BITS: u32 = $bits;
            /// The largest representable value.
            pub const MAX: $repr = ((1u64 << $bits) - 1) as $repr;

            /// Checked constructor.
            pub const fn new(v: $repr) -> core::result::Result<Self, crate::types::OutOfRange> {
                if v as u64 > Self::MAX as u64 {
                    Err(crate::types::OutOfRange {
                        what: stringify!($name),
                        value: v as u64,
                        max: Self::MAX as u64,
                    })
                } else {
                    Ok(Self(v))
                }
            }

            /// Builds the value from the low bits of `v`, discarding the rest
            /// (for wire fields whose width already bounds the value).
            #[must_use]
            pub const fn from_masked(v: $repr) -> Self {
                Self(v & Self::MAX)
            }

            /// The raw value.
            #[must_use]
            pub const fn get(self) -> $repr {
                self.0
            }
        }

        impl TryFrom<$repr> for $name {
            type Error = crate::types::OutOfRange;
            fn try_from(v: $repr) -> core::result::Result<Self, crate::types::OutOfRange> {
                Self::new(v)
            }
        }

        impl From<$name> for $repr {
            fn from(v: $name) -> $repr {
                v.0
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

pub mod ack;
pub mod cc_state;
pub mod cp;
pub mod nack;
pub mod nack_code;
pub mod prologue;
pub mod req;
pub mod rudi;
pub mod tss;
pub mod uud;

pub use ack::{
    AckCc as PdsAckCc, AckExt as PdsAckExt, AckPsnField as PdsAckPsnField,
    AckRequest as PdsAckRequest, AckState as PdsAckState, CcFlags as PdsCcFlags,
    Packet as PdsAckPacket, Repr as PdsAckRepr, SackIter as PdsSackIter,
};
pub use cc_state::{
    AckCcState, AckCcxState, CcxType, CreditState, CwndPenalty, NsccState, UnknownCcType,
};
pub use cp::{ControlType, CpPayload, Packet as PdsCpPacket, Repr as PdsCpRepr, ReservedCtlType};
pub use nack::{
    NackCcxState, NackCcxState1, NackTarget, Packet as PdsNackPacket, Repr as PdsNackRepr,
};
pub use nack_code::{NackAction, NackCode};
pub use prologue::{NextHeader, Packet as PdsProloguePacket, PdsType, Repr as PdsPrologueRepr};
pub use req::{
    DpdcidField, Packet as PdsRequestPacket, PdcInfo, ReliableMode, Repr as PdsRequestRepr,
    ReqCcState, SynPsnOffset,
};
pub use rudi::{Packet as PdsRudiPacket, Repr as PdsRudiRepr, RudiKind};
pub use tss::{Packet as TssPacket, Repr as TssRepr, Sdi, Tsc};
pub use uud::{Packet as PdsUudPacket, Repr as PdsUudRepr};

// ---------------------------------------------------------------------------
// Prologue helpers shared by the header modules (§2.1). They index directly:
// callers have checked that the buffer holds at least the 2-byte prologue.

const TYPE_SHIFT: u16 = 11;
const NH_SHIFT: u16 = 7;
const NH_MASK: u16 = 0x0780;
const FLAGS_MASK: u16 = 0x007f;

/// Raw 5-bit `type` of the prologue at the start of `b`, or 0 (reserved) if
/// `b` is shorter than the prologue. Never panics.
fn type_raw_of(b: &[u8]) -> u8 {
    match b {
        [hi, ..] => hi >> 3,
        [] => 0,
    }
}

fn next_hdr_raw_of(b: &[u8]) -> u8 {
    ((u16_at(b, 0) & NH_MASK) >> NH_SHIFT) as u8
}

fn flags_of(b: &[u8]) -> u8 {
    (u16_at(b, 0) & FLAGS_MASK) as u8
}

fn set_prologue(b: &mut [u8], ty: u8, next_hdr: u8, flags: u8) {
    let w = (u16::from(ty & 0x1f) << TYPE_SHIFT)
        | (u16::from(next_hdr & 0x0f) << NH_SHIFT)
        | u16::from(flags & 0x7f);
    set_u16(b, 0, w);
}

fn set_type_raw_of(b: &mut [u8], ty: u8) {
    let (nh, fl) = (next_hdr_raw_of(b), flags_of(b));
    set_prologue(b, ty, nh, fl);
}

fn set_next_hdr_raw_of(b: &mut [u8], nh: u8) {
    let (ty, fl) = (type_raw_of(b), flags_of(b));
    set_prologue(b, ty, nh, fl);
}

fn set_flags_of(b: &mut [u8], flags: u8) {
    let (ty, nh) = (type_raw_of(b), next_hdr_raw_of(b));
    set_prologue(b, ty, nh, flags);
}

/// Checks that `b` holds at least `need` bytes.
fn check_at_least(b: &[u8], need: usize) -> Result<()> {
    if b.len() < need {
        Err(Error::truncated(Layer::Pds, need, b.len()))
    } else {
        Ok(())
    }
}

/// The error for a `type` that is not one of the calling module's types:
/// `Reserved(v)` for the reserved codes, `OutOfRange` for a valid type of
/// another module. Both at byte 0.
fn wrong_type(v: u8) -> Error {
    let kind = match PdsType::from_u8(v) {
        Ok(_) => ErrorKind::OutOfRange,
        Err(v) => ErrorKind::Reserved(v),
    };
    Error::new(Layer::Pds, kind, 0)
}

/// Decodes a `next_hdr`; 7-15 are `Reserved(v)` at byte 0 (the field starts
/// in byte 0).
fn parse_next_hdr(v: u8) -> Result<NextHeader> {
    NextHeader::from_u8(v).map_err(|v| Error::new(Layer::Pds, ErrorKind::Reserved(v), 0))
}

/// Writes ` next=NAME` for a header that carries an SES header.
fn fmt_next_hdr(f: &mut fmt::Formatter<'_>, nh: NextHeader) -> fmt::Result {
    if nh == NextHeader::None {
        Ok(())
    } else {
        write!(f, " next={nh}")
    }
}

/// Writes ` name` when `on`.
fn fmt_flag(f: &mut fmt::Formatter<'_>, on: bool, name: &str) -> fmt::Result {
    if on { write!(f, " {name}") } else { Ok(()) }
}

// ---------------------------------------------------------------------------

/// Any PDS header (every type except TSS), parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PdsRepr {
    /// RUD_REQ, ROD_REQ, RUD_CC_REQ, ROD_CC_REQ.
    Request(req::Repr),
    /// RUDI_REQ, RUDI_RESP.
    Rudi(rudi::Repr),
    /// UUD_REQ.
    Uud(uud::Repr),
    /// ACK, ACK_CC, ACK_CCX.
    Ack(ack::Repr),
    /// NACK, NACK_CCX.
    Nack(nack::Repr),
    /// Control packet.
    Cp(cp::Repr),
}

impl PdsRepr {
    /// Parses the PDS header at the start of `bytes` (bytes after the header
    /// are ignored; `header_len()` says where the SES header starts).
    ///
    /// Errors: truncation, a reserved `type` or `next_hdr`
    /// (`ErrorKind::Reserved`), and TSS (type 1, `ErrorKind::OutOfRange` at
    /// byte 0: TSS is not a PDS header, see [`parse_with_tss`]).
    #[inline]
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let pro = prologue::Repr::parse(&prologue::Packet::new_checked(bytes)?)?;
        Ok(match pro.ty {
            PdsType::Tss => return Err(Error::new(Layer::Pds, ErrorKind::OutOfRange, 0)),
            PdsType::RudReq | PdsType::RodReq | PdsType::RudCcReq | PdsType::RodCcReq => {
                Self::Request(req::Repr::parse(&req::Packet::new_checked(bytes)?)?)
            }
            PdsType::RudiReq | PdsType::RudiResp => {
                Self::Rudi(rudi::Repr::parse(&rudi::Packet::new_checked(bytes)?)?)
            }
            PdsType::UudReq => Self::Uud(uud::Repr::parse(&uud::Packet::new_checked(bytes)?)?),
            PdsType::Ack | PdsType::AckCc | PdsType::AckCcx => {
                Self::Ack(ack::Repr::parse(&ack::Packet::new_checked(bytes)?)?)
            }
            PdsType::Nack | PdsType::NackCcx => {
                Self::Nack(nack::Repr::parse(&nack::Packet::new_checked(bytes)?)?)
            }
            PdsType::Cp => Self::Cp(cp::Repr::parse(&cp::Packet::new_checked(bytes)?)?),
        })
    }

    /// The packet type.
    #[must_use]
    pub const fn ty(&self) -> PdsType {
        match self {
            Self::Request(r) => r.ty(),
            Self::Rudi(r) => r.ty(),
            Self::Uud(r) => r.ty(),
            Self::Ack(r) => r.ty(),
            Self::Nack(r) => r.ty(),
            Self::Cp(r) => r.ty(),
        }
    }

    /// The SES header that follows, or `None` for a CP (whose `next_hdr`
    /// slot holds `ctl_type`).
    #[must_use]
    pub const fn next_hdr(&self) -> Option<NextHeader> {
        match self {
            Self::Request(r) => Some(r.next_hdr),
            Self::Rudi(r) => Some(r.next_hdr),
            Self::Uud(r) => Some(r.next_hdr),
            Self::Ack(r) => Some(r.next_hdr),
            Self::Nack(r) => Some(r.next_hdr),
            Self::Cp(_) => None,
        }
    }

    /// Length of the PDS header in bytes (where the SES header starts).
    #[must_use]
    pub const fn header_len(&self) -> usize {
        match self {
            Self::Request(r) => r.buffer_len(),
            Self::Rudi(r) => r.buffer_len(),
            Self::Uud(r) => r.buffer_len(),
            Self::Ack(r) => r.buffer_len(),
            Self::Nack(r) => r.buffer_len(),
            Self::Cp(r) => r.buffer_len(),
        }
    }

    /// Bytes `emit` writes (same as [`header_len`](Self::header_len)).
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Writes the header into the first `buffer_len()` bytes of `buf`; later
    /// bytes are left untouched.
    ///
    /// # Panics
    ///
    /// If `buf` is shorter than `buffer_len()`.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) {
        let buf = &mut buf[..self.buffer_len()];
        match self {
            Self::Request(r) => r.emit(&mut req::Packet::new_unchecked(buf)),
            Self::Rudi(r) => r.emit(&mut rudi::Packet::new_unchecked(buf)),
            Self::Uud(r) => r.emit(&mut uud::Packet::new_unchecked(buf)),
            Self::Ack(r) => r.emit(&mut ack::Packet::new_unchecked(buf)),
            Self::Nack(r) => r.emit(&mut nack::Packet::new_unchecked(buf)),
            Self::Cp(r) => r.emit(&mut cp::Packet::new_unchecked(buf)),
        }
    }
}

impl From<req::Repr> for PdsRepr {
    fn from(r: req::Repr) -> Self {
        Self::Request(r)
    }
}

impl From<rudi::Repr> for PdsRepr {
    fn from(r: rudi::Repr) -> Self {
        Self::Rudi(r)
    }
}

impl From<uud::Repr> for PdsRepr {
    fn from(r: uud::Repr) -> Self {
        Self::Uud(r)
    }
}

impl From<ack::Repr> for PdsRepr {
    fn from(r: ack::Repr) -> Self {
        Self::Ack(r)
    }
}

impl From<nack::Repr> for PdsRepr {
    fn from(r: nack::Repr) -> Self {
        Self::Nack(r)
    }
}

impl From<cp::Repr> for PdsRepr {
    fn from(r: cp::Repr) -> Self {
        Self::Cp(r)
    }
}

impl fmt::Display for PdsRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Request(r) => fmt::Display::fmt(r, f),
            Self::Rudi(r) => fmt::Display::fmt(r, f),
            Self::Uud(r) => fmt::Display::fmt(r, f),
            Self::Ack(r) => fmt::Display::fmt(r, f),
            Self::Nack(r) => fmt::Display::fmt(r, f),
            Self::Cp(r) => fmt::Display::fmt(r, f),
        }
    }
}

/// Parses an optional TSS header followed by the PDS header (§1: "a TSS
/// security header (if prologue type = 1), then the PDS header").
///
/// Returns the TSS header if there was one and the PDS header after it. The
/// PDS header starts at `tss.map_or(0, |t| t.buffer_len())`. Errors in the
/// PDS header have their offset rebased onto `bytes`; TSS errors carry
/// `Layer::Tss`. No cryptography happens here.
#[inline]
pub fn parse_with_tss(bytes: &[u8]) -> Result<(Option<tss::Repr>, PdsRepr)> {
    if type_raw_of(bytes) == PdsType::Tss.code() {
        let t = tss::Repr::parse(&tss::Packet::new_checked(bytes)?)?;
        let off = t.buffer_len();
        let rest = bytes.get(off..).unwrap_or_default();
        let pds = PdsRepr::parse(rest).map_err(|e| e.at(off))?;
        Ok((Some(t), pds))
    } else {
        Ok((None, PdsRepr::parse(bytes)?))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn pds_repr() -> impl Strategy<Value = PdsRepr> {
        prop_oneof![
            req::tests::repr().prop_map(PdsRepr::from),
            rudi::tests::repr().prop_map(PdsRepr::from),
            uud::tests::repr().prop_map(PdsRepr::from),
            ack::tests::repr().prop_map(PdsRepr::from),
            nack::tests::repr().prop_map(PdsRepr::from),
            cp::tests::repr().prop_map(PdsRepr::from),
        ]
    }

    #[test]
    fn dispatches_on_type() {
        // NACK, NO_PDC_AVAIL (see nack.rs golden vector).
        let nack = [
            0x50, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01, 0x50, 0x00, 0x00, 0x00, 0x05, 0, 0, 0, 0,
        ];
        let r = PdsRepr::parse(&nack).unwrap();
        assert_eq!(r.ty(), PdsType::Nack);
        assert_eq!(r.header_len(), 16);
        assert_eq!(r.next_hdr(), Some(NextHeader::None));
        // CP: next_hdr slot is ctl_type.
        let cp = [0x5b, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0];
        let r = PdsRepr::parse(&cp).unwrap();
        assert_eq!(r.ty(), PdsType::Cp);
        assert_eq!(r.next_hdr(), None);
    }

    #[test]
    fn reserved_type_next_hdr_and_tss_are_errors() {
        // Reserved type 0 and 15.
        let e = PdsRepr::parse(&[0x00; 16]).unwrap_err();
        assert_eq!((e.kind, e.offset), (ErrorKind::Reserved(0), 0));
        let e = PdsRepr::parse(&[0x78; 16]).unwrap_err();
        assert_eq!((e.kind, e.offset), (ErrorKind::Reserved(15), 0));
        // RUD_REQ (2) with next_hdr 7: 0b00010_0111_0000000 = 0x1380.
        let mut b = [0u8; 12];
        b[0] = 0x13;
        b[1] = 0x80;
        let e = PdsRepr::parse(&b).unwrap_err();
        assert_eq!(
            (e.layer, e.kind, e.offset),
            (Layer::Pds, ErrorKind::Reserved(7), 0)
        );
        // TSS is not a PDS header.
        let e = PdsRepr::parse(&[0x08; 16]).unwrap_err();
        assert_eq!((e.kind, e.offset), (ErrorKind::OutOfRange, 0));
        // Truncation names what was needed.
        let e = PdsRepr::parse(&[0x10, 0x00, 0, 0]).unwrap_err();
        assert_eq!(e, Error::truncated(Layer::Pds, 12, 4));
        assert_eq!(
            PdsRepr::parse(&[]).unwrap_err(),
            Error::truncated(Layer::Pds, 2, 0)
        );
    }

    #[test]
    fn tss_then_pds() {
        // TSS without SSI (12 B), then a UUD_REQ (4 B).
        let b = [
            0x08, 0x00, 0x00, 0x07, 0, 1, 0, 0, 0, 0, 0, 9, // TSS: sdi 7, epoch 1, tsc 9
            0x30, 0x80, 0x00, 0x00, // UUD_REQ, next_hdr small request
        ];
        let (t, p) = parse_with_tss(&b).unwrap();
        let t = t.unwrap();
        assert_eq!(t.sdi.get(), 7);
        assert_eq!(t.buffer_len(), 12);
        assert_eq!(p.ty(), PdsType::UudReq);
        assert_eq!(p.next_hdr(), Some(NextHeader::RequestSmall));
        // An error in the PDS header behind it is rebased onto the frame.
        let e = parse_with_tss(&b[..14]).unwrap_err();
        assert_eq!(e, Error::truncated(Layer::Pds, 4, 2).at(12));
        // Without TSS it is a plain parse.
        let (t, p) = parse_with_tss(&b[12..]).unwrap();
        assert!(t.is_none());
        assert_eq!(p.ty(), PdsType::UudReq);
    }

    #[test]
    fn emit_leaves_trailing_bytes() {
        let r = PdsRepr::parse(&[0x30, 0x80, 0xff, 0xff]).unwrap();
        let mut b = [0xaa; 6];
        r.emit(&mut b);
        // rsvd zeroed on emit, bytes after the header untouched.
        assert_eq!(b, [0x30, 0x80, 0, 0, 0xaa, 0xaa]);
    }

    proptest! {
        #[test]
        fn repr_round_trip(r in pds_repr()) {
            // Emit into exactly buffer_len() bytes, over two different fills:
            // identical output means every one of those bytes was written.
            let n = r.buffer_len();
            let mut b = [0u8; 64];
            let mut c = [0xffu8; 64];
            r.emit(&mut b[..n]);
            r.emit(&mut c[..n]);
            prop_assert_eq!(&b[..n], &c[..n]);
            let p = PdsRepr::parse(&b[..n]).unwrap();
            prop_assert_eq!(p, r);
            prop_assert_eq!(p.header_len(), n);
        }

        #[test]
        fn parse_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(r) = PdsRepr::parse(&bytes) {
                let n = r.buffer_len();
                prop_assert!(n <= bytes.len());
                let mut b = [0u8; 64];
                r.emit(&mut b[..n]);
                prop_assert_eq!(PdsRepr::parse(&b[..n]).unwrap(), r);
                // Display never panics either.
                let _ = std::format!("{r}");
            }
            let _ = parse_with_tss(&bytes);
        }

        #[test]
        fn parse_arbitrary_bytes_with_valid_type(
            ty in 2u8..=14,
            rest in proptest::collection::vec(any::<u8>(), 0..63),
        ) {
            // Steer random bytes to real types so every parser is exercised.
            let mut bytes = std::vec![ty << 3];
            bytes.extend_from_slice(&rest);
            if let Ok(r) = PdsRepr::parse(&bytes) {
                let mut b = [0u8; 64];
                r.emit(&mut b[..r.buffer_len()]);
                prop_assert_eq!(PdsRepr::parse(&b[..r.buffer_len()]).unwrap(), r);
            }
        }
    }
}
