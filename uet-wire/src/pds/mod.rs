//! PDS headers (`uet-spec-notes.md` §2).
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
