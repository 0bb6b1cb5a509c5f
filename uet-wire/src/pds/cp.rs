//! Control packet (CP, type 11, 16 B) (`docs/protocol-notes.md` §2.10).
//!
//! ```text
//! 0      prologue        type 11 | ctl_type (in the next_hdr slot) | flags
//!                        (isrod 0x20, retx 0x10, ar 0x08, syn 0x04)
//! 2      rsvd / probe_opaque   u16 (probe_opaque for PROBE, echoed by the ACK with p = 1)
//! 4      psn             u32
//! 8      spdcid          u16
//! 10     dpdcid, or (syn) pdc_info:4 | psn_offset:12, as in a request
//! 12     payload         u32, meaning per ctl_type
//! ```
//!
//! | ctl_type | name | payload |
//! |---|---|---|
//! | 0 | NOOP | 0 |
//! | 1 | ACK_REQ | `[0x0000, message_id]` or 0 |
//! | 2 | CLEAR | CLEAR_PSN |
//! | 3 | CLEAR_REQ | PSN to clear |
//! | 4 | CLOSE | 0 |
//! | 5 | CLOSE_REQ | 0 |
//! | 6 | PROBE | SACK bitmap base PSN |
//! | 7 | CREDIT | credit (bytes) |
//! | 8 | CREDIT_REQ | target credit (bytes) |
//! | 9 | NEGOTIATION | not specified (kept raw) |
//! | 10-15 | reserved | kept raw |
//!
//! **Credit width.** The CP payload is 32 bits and the sources say only
//! "payload = credit"; RCCC credit elsewhere (`req_cc_state`, CREDIT
//! `ack_cc_state`) is 24 bits. The CP keeps the full 32-bit value, as a byte
//! count (`u32`), so nothing is lost; [`CpPayload::credit24`] converts when
//! the value fits the 24-bit fields.
//!
//! Parts of the header with no meaning for the `ctl_type` (bytes 2-3 outside
//! PROBE, the payload of NOOP/CLOSE/CLOSE_REQ, the high 16 bits of ACK_REQ)
//! are ignored on parse and written as zero.

use core::fmt;

use super::prologue::PdsType;
use super::req::{DpdcidField, ReliableMode};
use super::{
    check_at_least, flags_of, fmt_flag, next_hdr_raw_of, set_flags_of, set_next_hdr_raw_of,
    set_prologue, set_type_raw_of, type_raw_of, wrong_type,
};
use crate::error::Result;
use crate::field::{set_u16, set_u32, u16_at, u32_at};
use crate::types::{Credit24, MessageId, OutOfRange, PdcId, Psn};

/// Length of a CP.
pub const HEADER_LEN: usize = 16;

/// CP flag bits (§2.4).
pub mod flags {
    /// The PDC is ROD (0 = RUD).
    pub const ISROD: u8 = 0x20;
    /// The CP is a retransmission.
    pub const RETX: u8 = 0x10;
    /// ACK requested.
    pub const AR: u8 = 0x08;
    /// PDC establishment: bytes 10-11 hold `pdc_info` + `psn_offset`.
    pub const SYN: u8 = 0x04;
}

mod field {
    pub(super) const PROBE_OPAQUE: usize = 2;
    pub(super) const PSN: usize = 4;
    pub(super) const SPDCID: usize = 8;
    pub(super) const DPDCID: usize = 10;
    pub(super) const PAYLOAD: usize = 12;
}

/// The `ctl_type` of a CP (§2.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlType {
    /// 0: no-op.
    Noop,
    /// 1: request an ACK for `psn`.
    AckReq,
    /// 2: clear command (initiator → target).
    Clear,
    /// 3: clear request (target → initiator).
    ClearReq,
    /// 4: close command (initiator).
    Close,
    /// 5: the target asks the initiator to close.
    CloseReq,
    /// 6: probe (requests an ACK with `p` = 1).
    Probe,
    /// 7: credit grant (destination → source).
    Credit,
    /// 8: credit request (source → destination).
    CreditReq,
    /// 9: negotiation.
    Negotiation,
    /// 10-15: reserved.
    Reserved(u8),
}

impl ControlType {
    /// Decodes a `ctl_type`; total (values ≥ 10 are `Reserved`).
    #[must_use]
    pub const fn from_u8(v: u8) -> Self {
        match v {
            0 => Self::Noop,
            1 => Self::AckReq,
            2 => Self::Clear,
            3 => Self::ClearReq,
            4 => Self::Close,
            5 => Self::CloseReq,
            6 => Self::Probe,
            7 => Self::Credit,
            8 => Self::CreditReq,
            9 => Self::Negotiation,
            other => Self::Reserved(other),
        }
    }

    /// The 4-bit wire value.
    #[must_use]
    pub const fn code(self) -> u8 {
        match self {
            Self::Noop => 0,
            Self::AckReq => 1,
            Self::Clear => 2,
            Self::ClearReq => 3,
            Self::Close => 4,
            Self::CloseReq => 5,
            Self::Probe => 6,
            Self::Credit => 7,
            Self::CreditReq => 8,
            Self::Negotiation => 9,
            Self::Reserved(v) => v,
        }
    }

    /// The spec name (`ACK_REQ`, …).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Noop => "NOOP",
            Self::AckReq => "ACK_REQ",
            Self::Clear => "CLEAR",
            Self::ClearReq => "CLEAR_REQ",
            Self::Close => "CLOSE",
            Self::CloseReq => "CLOSE_REQ",
            Self::Probe => "PROBE",
            Self::Credit => "CREDIT",
            Self::CreditReq => "CREDIT_REQ",
            Self::Negotiation => "NEGOTIATION",
            Self::Reserved(_) => "RESERVED",
        }
    }
}

impl fmt::Display for ControlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Reserved(v) => write!(f, "RESERVED({v})"),
            other => f.write_str(other.name()),
        }
    }
}

/// A reserved `ctl_type`: 10-15.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReservedCtlType(u8);

impl ReservedCtlType {
    /// Checked constructor: 10-15.
    pub const fn new(v: u8) -> core::result::Result<Self, OutOfRange> {
        if v >= 10 && v <= 15 {
            Ok(Self(v))
        } else {
            Err(OutOfRange {
                what: "ReservedCtlType",
                value: v as u64,
                max: 15,
            })
        }
    }

    /// The raw value.
    #[must_use]
    pub const fn get(self) -> u8 {
        self.0
    }
}

/// The `ctl_type` together with what the payload (and bytes 2-3) mean for
/// it. The variant *is* the `ctl_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CpPayload {
    /// NOOP; payload 0.
    Noop,
    /// ACK_REQ: ACK wanted for `psn`; payload `[0x0000, message_id]` (0 when
    /// no message is named).
    AckReq {
        /// The message ID (low 16 bits of the payload).
        message_id: MessageId,
    },
    /// CLEAR: payload CLEAR_PSN (cumulative).
    Clear {
        /// Every PSN up to and including this one may be cleared.
        clear_psn: Psn,
    },
    /// CLEAR_REQ: payload the PSN to clear.
    ClearReq {
        /// The PSN the target asks to be cleared.
        psn: Psn,
    },
    /// CLOSE; payload 0.
    Close,
    /// CLOSE_REQ; payload 0.
    CloseReq,
    /// PROBE: bytes 2-3 `probe_opaque`, payload the SACK bitmap base PSN.
    Probe {
        /// Echoed in the ACK (`p` = 1) in place of `ack_psn_offset`.
        probe_opaque: u16,
        /// Base PSN of the SACK bitmap wanted in the answer.
        sack_base: Psn,
    },
    /// CREDIT: payload the credit granted, in bytes (full 32 bits).
    Credit {
        /// Credit in bytes.
        credit: u32,
    },
    /// CREDIT_REQ: payload the target credit, in bytes (full 32 bits).
    CreditReq {
        /// Target credit in bytes.
        target_credit: u32,
    },
    /// NEGOTIATION: payload not specified by any source; kept raw.
    Negotiation {
        /// The payload.
        raw: u32,
    },
    /// A reserved `ctl_type` (10-15), payload kept raw.
    Reserved {
        /// The `ctl_type`.
        ctl_type: ReservedCtlType,
        /// The payload.
        raw: u32,
    },
}

impl CpPayload {
    /// Decodes the payload (and bytes 2-3) for a `ctl_type` (masked to 4 bits).
    #[must_use]
    pub const fn from_wire(ctl_type: u8, bytes_2_3: u16, payload: u32) -> Self {
        match ControlType::from_u8(ctl_type & 0x0f) {
            ControlType::Noop => Self::Noop,
            ControlType::AckReq => Self::AckReq {
                message_id: MessageId::from_masked(payload as u16),
            },
            ControlType::Clear => Self::Clear {
                clear_psn: Psn(payload),
            },
            ControlType::ClearReq => Self::ClearReq { psn: Psn(payload) },
            ControlType::Close => Self::Close,
            ControlType::CloseReq => Self::CloseReq,
            ControlType::Probe => Self::Probe {
                probe_opaque: bytes_2_3,
                sack_base: Psn(payload),
            },
            ControlType::Credit => Self::Credit { credit: payload },
            ControlType::CreditReq => Self::CreditReq {
                target_credit: payload,
            },
            ControlType::Negotiation => Self::Negotiation { raw: payload },
            ControlType::Reserved(v) => Self::Reserved {
                // 10..=15: from_u8 of a 4-bit value.
                ctl_type: ReservedCtlType(v),
                raw: payload,
            },
        }
    }

    /// The `ctl_type`.
    #[must_use]
    pub const fn ctl_type(&self) -> ControlType {
        match self {
            Self::Noop => ControlType::Noop,
            Self::AckReq { .. } => ControlType::AckReq,
            Self::Clear { .. } => ControlType::Clear,
            Self::ClearReq { .. } => ControlType::ClearReq,
            Self::Close => ControlType::Close,
            Self::CloseReq => ControlType::CloseReq,
            Self::Probe { .. } => ControlType::Probe,
            Self::Credit { .. } => ControlType::Credit,
            Self::CreditReq { .. } => ControlType::CreditReq,
            Self::Negotiation { .. } => ControlType::Negotiation,
            Self::Reserved { ctl_type, .. } => ControlType::Reserved(ctl_type.get()),
        }
    }

    /// Bytes 2-3 on the wire (`probe_opaque` for PROBE, else 0).
    #[must_use]
    pub const fn bytes_2_3(&self) -> u16 {
        match self {
            Self::Probe { probe_opaque, .. } => *probe_opaque,
            _ => 0,
        }
    }

    /// The 32-bit payload on the wire.
    #[must_use]
    pub const fn payload(&self) -> u32 {
        match *self {
            Self::Noop | Self::Close | Self::CloseReq => 0,
            Self::AckReq { message_id } => message_id.get() as u32,
            Self::Clear { clear_psn: p } | Self::ClearReq { psn: p } => p.0,
            Self::Probe { sack_base, .. } => sack_base.0,
            Self::Credit { credit: v }
            | Self::CreditReq { target_credit: v }
            | Self::Negotiation { raw: v }
            | Self::Reserved { raw: v, .. } => v,
        }
    }

    /// The credit of a CREDIT / CREDIT_REQ as the 24-bit RCCC credit, if it
    /// fits.
    #[must_use]
    pub const fn credit24(&self) -> Option<Credit24> {
        match *self {
            Self::Credit { credit: v } | Self::CreditReq { target_credit: v } => {
                match Credit24::new(v) {
                    Ok(c) => Some(c),
                    Err(_) => None,
                }
            }
            _ => None,
        }
    }
}

impl fmt::Display for CpPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Noop | Self::Close | Self::CloseReq => Ok(()),
            Self::AckReq { message_id } => write!(f, " message_id={message_id}"),
            Self::Clear { clear_psn } => write!(f, " clear_psn={clear_psn}"),
            Self::ClearReq { psn } => write!(f, " clear_req_psn={psn}"),
            Self::Probe {
                probe_opaque,
                sack_base,
            } => write!(f, " probe_opaque={probe_opaque:#06x} sack_base={sack_base}"),
            Self::Credit { credit } => write!(f, " credit={credit}"),
            Self::CreditReq { target_credit } => write!(f, " target_credit={target_credit}"),
            Self::Negotiation { raw } | Self::Reserved { raw, .. } => {
                write!(f, " payload={raw:#010x}")
            }
        }
    }
}

/// A read/write view of a CP.
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

    /// The raw 4-bit `ctl_type` (the `next_hdr` slot).
    pub fn ctl_type_raw(&self) -> u8 {
        next_hdr_raw_of(self.buffer.as_ref())
    }

    /// The `ctl_type`.
    pub fn ctl_type(&self) -> ControlType {
        ControlType::from_u8(self.ctl_type_raw())
    }

    /// The raw 7-bit `flags`.
    pub fn flags(&self) -> u8 {
        flags_of(self.buffer.as_ref())
    }

    /// The `isrod` flag.
    pub fn isrod(&self) -> bool {
        self.flags() & flags::ISROD != 0
    }

    /// The `retx` flag.
    pub fn retx(&self) -> bool {
        self.flags() & flags::RETX != 0
    }

    /// The `ar` flag.
    pub fn ar(&self) -> bool {
        self.flags() & flags::AR != 0
    }

    /// The `syn` flag.
    pub fn syn(&self) -> bool {
        self.flags() & flags::SYN != 0
    }

    /// Bytes 2-3: `probe_opaque` for PROBE, reserved otherwise.
    pub fn probe_opaque(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::PROBE_OPAQUE)
    }

    /// `psn`.
    pub fn psn(&self) -> Psn {
        Psn(u32_at(self.buffer.as_ref(), field::PSN))
    }

    /// `spdcid` (0 = `None`).
    pub fn spdcid(&self) -> Option<PdcId> {
        PdcId::new(u16_at(self.buffer.as_ref(), field::SPDCID))
    }

    /// The raw 16 bits at bytes 10-11.
    pub fn dpdcid_raw(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::DPDCID)
    }

    /// Bytes 10-11 decoded according to the `syn` flag.
    pub fn dpdcid_field(&self) -> DpdcidField {
        DpdcidField::from_wire(self.syn(), self.dpdcid_raw())
    }

    /// The raw 32-bit `payload`.
    pub fn payload_raw(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::PAYLOAD)
    }

    /// The payload decoded according to `ctl_type`.
    pub fn payload(&self) -> CpPayload {
        CpPayload::from_wire(self.ctl_type_raw(), self.probe_opaque(), self.payload_raw())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes the whole prologue (values are masked to their widths).
    pub fn set_prologue(&mut self, ty: u8, ctl_type: u8, flags: u8) {
        set_prologue(self.buffer.as_mut(), ty, ctl_type, flags);
    }

    /// Sets the raw `type`.
    pub fn set_pds_type_raw(&mut self, v: u8) {
        set_type_raw_of(self.buffer.as_mut(), v);
    }

    /// Sets the raw `ctl_type`.
    pub fn set_ctl_type_raw(&mut self, v: u8) {
        set_next_hdr_raw_of(self.buffer.as_mut(), v);
    }

    /// Sets the raw `flags`.
    pub fn set_flags(&mut self, v: u8) {
        set_flags_of(self.buffer.as_mut(), v);
    }

    /// Sets bytes 2-3.
    pub fn set_probe_opaque(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::PROBE_OPAQUE, v);
    }

    /// Sets `psn`.
    pub fn set_psn(&mut self, v: Psn) {
        set_u32(self.buffer.as_mut(), field::PSN, v.0);
    }

    /// Sets `spdcid`.
    pub fn set_spdcid(&mut self, v: Option<PdcId>) {
        set_u16(self.buffer.as_mut(), field::SPDCID, PdcId::to_wire(v));
    }

    /// Sets bytes 10-11 raw.
    pub fn set_dpdcid_raw(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::DPDCID, v);
    }

    /// Sets bytes 10-11 from a [`DpdcidField`] (the `syn` flag is not touched).
    pub fn set_dpdcid_field(&mut self, v: DpdcidField) {
        self.set_dpdcid_raw(v.to_wire());
    }

    /// Sets the raw `payload`.
    pub fn set_payload_raw(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::PAYLOAD, v);
    }
}

/// A parsed control packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The PDC's mode: the `isrod` flag.
    pub mode: ReliableMode,
    /// `retx`: this is a retransmission.
    pub retx: bool,
    /// `ar`: ACK requested.
    pub ar: bool,
    /// The PSN (meaning per `ctl_type`: consumed by CLOSE, reused by
    /// ACK_REQ, 0 for CLEAR in REFPROV; §2.10).
    pub psn: Psn,
    /// Source PDC ID (0 = `None`).
    pub spdcid: Option<PdcId>,
    /// `dpdcid`, or the SYN form (which sets the `syn` flag).
    pub dpdcid: DpdcidField,
    /// `ctl_type` and its payload.
    pub payload: CpPayload,
}

impl Repr {
    /// Parses a CP. Reserved flags and unused fields are ignored.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        packet.check_len()?;
        let ty = packet.pds_type_raw();
        if ty != PdsType::Cp.code() {
            return Err(wrong_type(ty));
        }
        Ok(Self {
            mode: if packet.isrod() {
                ReliableMode::Rod
            } else {
                ReliableMode::Rud
            },
            retx: packet.retx(),
            ar: packet.ar(),
            psn: packet.psn(),
            spdcid: packet.spdcid(),
            dpdcid: packet.dpdcid_field(),
            payload: packet.payload(),
        })
    }

    /// The packet type.
    #[must_use]
    pub const fn ty(&self) -> PdsType {
        PdsType::Cp
    }

    /// The `ctl_type`.
    #[must_use]
    pub const fn ctl_type(&self) -> ControlType {
        self.payload.ctl_type()
    }

    /// The `isrod` flag.
    #[must_use]
    pub const fn isrod(&self) -> bool {
        matches!(self.mode, ReliableMode::Rod)
    }

    /// The `syn` flag (derived from the form of `dpdcid`).
    #[must_use]
    pub const fn syn(&self) -> bool {
        self.dpdcid.is_syn()
    }

    /// `Start_PSN = psn - psn_offset`, for a SYN CP.
    #[must_use]
    pub const fn start_psn(&self) -> Option<Psn> {
        self.dpdcid.start_psn(self.psn)
    }

    /// The 7-bit `flags` this header is emitted with.
    #[must_use]
    pub const fn flags(&self) -> u8 {
        (if self.isrod() { flags::ISROD } else { 0 })
            | (if self.retx { flags::RETX } else { 0 })
            | (if self.ar { flags::AR } else { 0 })
            | (if self.syn() { flags::SYN } else { 0 })
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into a buffer of at least `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_prologue(self.ty().code(), self.ctl_type().code(), self.flags());
        packet.set_probe_opaque(self.payload.bytes_2_3());
        packet.set_psn(self.psn);
        packet.set_spdcid(self.spdcid);
        packet.set_dpdcid_field(self.dpdcid);
        packet.set_payload_raw(self.payload.payload());
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CP {} psn={} spdcid={} {}{}",
            self.ctl_type(),
            self.psn,
            PdcId::to_wire(self.spdcid),
            self.dpdcid,
            self.payload
        )?;
        fmt_flag(f, self.isrod(), "isrod")?;
        fmt_flag(f, self.ar, "ar")?;
        fmt_flag(f, self.retx, "retx")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::error::{Error, ErrorKind, Layer};
    use crate::pds::req::tests::{dpdcid_field, pdc_id};
    use crate::pds::req::{PdcInfo, SynPsnOffset};
    use proptest::prelude::*;

    fn payload() -> impl Strategy<Value = CpPayload> {
        (0u8..16, any::<u16>(), any::<u32>()).prop_map(|(t, b23, raw)| {
            // Normalise through the wire so ignored parts are zero.
            let p = CpPayload::from_wire(t, b23, raw);
            CpPayload::from_wire(t, p.bytes_2_3(), p.payload())
        })
    }

    pub(crate) fn repr() -> impl Strategy<Value = Repr> {
        (
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<u32>(),
            pdc_id(),
            dpdcid_field(),
            payload(),
        )
            .prop_map(|(rod, retx, ar, psn, spdcid, dpdcid, payload)| Repr {
                mode: if rod {
                    ReliableMode::Rod
                } else {
                    ReliableMode::Rud
                },
                retx,
                ar,
                psn: Psn(psn),
                spdcid,
                dpdcid,
                payload,
            })
    }

    fn cp(payload: CpPayload) -> Repr {
        Repr {
            mode: ReliableMode::Rud,
            retx: false,
            ar: false,
            psn: Psn(0),
            spdcid: PdcId::new(5),
            dpdcid: DpdcidField::Dpdcid(PdcId::new(7)),
            payload,
        }
    }

    fn check(bytes: &[u8; 16], want: Repr, text: &str) {
        let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(r, want);
        let mut b = [0xeeu8; 16];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(&b, bytes);
        assert_eq!(std::format!("{r}"), text);
    }

    #[test]
    fn golden_credit_grants() {
        // CP (11), ctl_type CREDIT (7), flags 0: 0b01011_0111_0000000 = 0x5b80.
        // psn 0, spdcid 5, dpdcid 7, payload 12,500 (0x30d4) then 25,000 (0x61a8).
        let credit_12500 = [
            0x5b, 0x80, 0x00, 0x00, 0, 0, 0, 0, 0x00, 0x05, 0x00, 0x07, 0x00, 0x00, 0x30, 0xd4,
        ];
        let credit_25000 = [
            0x5b, 0x80, 0x00, 0x00, 0, 0, 0, 0, 0x00, 0x05, 0x00, 0x07, 0x00, 0x00, 0x61, 0xa8,
        ];
        check(
            &credit_12500,
            cp(CpPayload::Credit { credit: 12_500 }),
            "CP CREDIT psn=0 spdcid=5 dpdcid=7 credit=12500",
        );
        check(
            &credit_25000,
            cp(CpPayload::Credit { credit: 25_000 }),
            "CP CREDIT psn=0 spdcid=5 dpdcid=7 credit=25000",
        );
        assert_eq!(
            CpPayload::Credit { credit: 25_000 }.credit24(),
            Some(Credit24::new(25_000).unwrap())
        );
        assert_eq!(CpPayload::Credit { credit: 1 << 24 }.credit24(), None);
        // CREDIT_REQ (8): 0b01011_1000_0000000 = 0x5c00, target 12,500.
        let credit_req = [
            0x5c, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0x00, 0x05, 0x00, 0x07, 0x00, 0x00, 0x30, 0xd4,
        ];
        check(
            &credit_req,
            cp(CpPayload::CreditReq {
                target_credit: 12_500,
            }),
            "CP CREDIT_REQ psn=0 spdcid=5 dpdcid=7 target_credit=12500",
        );
    }

    #[test]
    fn golden_probe() {
        // PROBE (6), flags ar: 0b01011_0110_0001000 = 0x5b08; probe_opaque
        // 0xbeef, psn 42, spdcid 5, dpdcid 7, payload sack_base 30.
        let probe = [
            0x5b, 0x08, 0xbe, 0xef, 0, 0, 0, 42, 0x00, 0x05, 0x00, 0x07, 0, 0, 0, 30,
        ];
        check(
            &probe,
            Repr {
                ar: true,
                psn: Psn(42),
                ..cp(CpPayload::Probe {
                    probe_opaque: 0xbeef,
                    sack_base: Psn(30),
                })
            },
            "CP PROBE psn=42 spdcid=5 dpdcid=7 probe_opaque=0xbeef sack_base=30 ar",
        );
    }

    #[test]
    fn golden_clear_on_rod() {
        // CLEAR (2), flags isrod: 0b01011_0010_0100000 = 0x5920; psn 0,
        // payload CLEAR_PSN 335 (0x14f).
        let clear = [
            0x59, 0x20, 0x00, 0x00, 0, 0, 0, 0, 0x00, 0x05, 0x00, 0x07, 0x00, 0x00, 0x01, 0x4f,
        ];
        check(
            &clear,
            Repr {
                mode: ReliableMode::Rod,
                ..cp(CpPayload::Clear {
                    clear_psn: Psn(335),
                })
            },
            "CP CLEAR psn=0 spdcid=5 dpdcid=7 clear_psn=335 isrod",
        );
    }

    #[test]
    fn golden_syn_ack_req() {
        // ACK_REQ (1), flags ar|syn: 0b01011_0001_0001100 = 0x588c; psn 1000,
        // spdcid 5, SYN psn_offset 3 (Start_PSN 997), payload message_id 0x42.
        let ack_req = [
            0x58, 0x8c, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8, 0x00, 0x05, 0x00, 0x03, 0x00, 0x00,
            0x00, 0x42,
        ];
        let want = Repr {
            ar: true,
            psn: Psn(1000),
            dpdcid: DpdcidField::Syn {
                pdc_info: PdcInfo::default(),
                psn_offset: SynPsnOffset::new(3).unwrap(),
            },
            ..cp(CpPayload::AckReq {
                message_id: MessageId::new(0x42).unwrap(),
            })
        };
        check(
            &ack_req,
            want,
            "CP ACK_REQ psn=1000 spdcid=5 syn psn_offset=3 message_id=66 ar",
        );
        assert_eq!(want.start_psn(), Some(Psn(997)));
    }

    #[test]
    fn ignored_parts_are_zeroed() {
        // CLOSE (4) with garbage in bytes 2-3 and the payload, and every
        // reserved flag: 0b01011_0100_1000011 = 0x5a43.
        let bytes = [
            0x5a, 0x43, 0xab, 0xcd, 0, 0, 0, 9, 0x00, 0x05, 0x00, 0x07, 0xff, 0xff, 0xff, 0xff,
        ];
        let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(r.payload, CpPayload::Close);
        let mut b = [0u8; 16];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(
            b,
            [
                0x5a, 0x00, 0, 0, 0, 0, 0, 9, 0x00, 0x05, 0x00, 0x07, 0, 0, 0, 0
            ]
        );
    }

    #[test]
    fn every_ctl_type_and_reserved() {
        for t in 0u8..16 {
            let p = CpPayload::from_wire(t, 0, 0x0102_0304);
            assert_eq!(p.ctl_type().code(), t);
            assert_eq!(ControlType::from_u8(t).code(), t);
        }
        let p = CpPayload::from_wire(12, 0, 0x0102_0304);
        assert_eq!(
            p,
            CpPayload::Reserved {
                ctl_type: ReservedCtlType::new(12).unwrap(),
                raw: 0x0102_0304
            }
        );
        assert_eq!(ControlType::Reserved(12).to_string(), "RESERVED(12)");
        assert!(ReservedCtlType::new(9).is_err());
        assert!(ReservedCtlType::new(16).is_err());
        assert_eq!(
            CpPayload::from_wire(9, 0, 7),
            CpPayload::Negotiation { raw: 7 }
        );
    }

    #[test]
    fn errors() {
        let e = Packet::new_checked(&[0x5bu8, 0x80, 0, 0][..]).unwrap_err();
        assert_eq!(e, Error::truncated(Layer::Pds, 16, 4));
        let e = Repr::parse(&Packet::new_checked(&[0x10u8; 16][..]).unwrap()).unwrap_err();
        assert_eq!((e.kind, e.offset), (ErrorKind::OutOfRange, 0));
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
