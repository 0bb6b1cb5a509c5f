//! RUD/ROD requests: RUD_REQ / ROD_REQ (12 B) and RUD_CC_REQ / ROD_CC_REQ
//! (16 B) (`docs/protocol-notes.md` §2.5).
//!
//! ```text
//! 0      prologue            type 2/3 (13/14 with CC) | next_hdr | flags (retx 0x10, ar 0x08, syn 0x04)
//! 2      clear_psn_offset    i16: CLEAR_PSN = psn + clear_psn_offset
//! 4      psn                 u32
//! 8      spdcid              u16
//! 10     dpdcid              u16            (syn = 0)
//! 10     pdc_info:4 | psn_offset:12         (syn = 1; psn_offset = psn - Start_PSN)
//! 12     ccc_id:8 | credit_target:24        (*_CC_REQ only)
//! ```
//!
//! `use_rsv_pdc` is `pdc_info` value 0x1 (bit 12 of the 16-bit word), as in
//! REFPROV (§2.5, §9 item 3); the other three `pdc_info` bits are kept as
//! they came.

use core::fmt;

use super::prologue::{NextHeader, PdsType};
use super::{
    check_at_least, flags_of, fmt_flag, fmt_next_hdr, next_hdr_raw_of, parse_next_hdr,
    set_flags_of, set_next_hdr_raw_of, set_prologue, set_type_raw_of, type_raw_of, wrong_type,
};
use crate::error::Result;
use crate::field::{set_u16, set_u24, set_u32, u16_at, u24_at, u32_at};
use crate::types::{CccId, Credit24, PdcId, Psn};

/// Length of RUD_REQ / ROD_REQ.
pub const HEADER_LEN: usize = 12;
/// Length of RUD_CC_REQ / ROD_CC_REQ.
pub const CC_HEADER_LEN: usize = 16;

/// Request flag bits (§2.4).
pub mod flags {
    /// The request is a retransmission.
    pub const RETX: u8 = 0x10;
    /// ACK requested.
    pub const AR: u8 = 0x08;
    /// PDC establishment: bytes 10-11 hold `pdc_info` + `psn_offset`.
    pub const SYN: u8 = 0x04;
}

mod field {
    pub(super) const CLEAR_PSN_OFFSET: usize = 2;
    pub(super) const PSN: usize = 4;
    pub(super) const SPDCID: usize = 8;
    pub(super) const DPDCID: usize = 10;
    pub(super) const CCC_ID: usize = 12;
    pub(super) const CREDIT_TARGET: usize = 13;
    pub(super) const PDC_INFO_SHIFT: u16 = 12;
    pub(super) const PSN_OFFSET_MASK: u16 = 0x0fff;
}

bits_newtype!(
    /// The 4-bit `pdc_info` of a SYN request or CP (§2.5). Value 0x1 is
    /// `use_rsv_pdc`; the rest is reserved.
    PdcInfo, u8, 4
);

impl PdcInfo {
    /// `use_rsv_pdc`: use the reserved-PDC pool (e.g. for INC). REFPROV's
    /// position (value 0x1 of the nibble, bit 12 of the word).
    pub const USE_RSV_PDC: Self = Self(0x1);

    /// Whether `use_rsv_pdc` is set.
    #[must_use]
    pub const fn use_rsv_pdc(self) -> bool {
        self.0 & Self::USE_RSV_PDC.0 != 0
    }
}

bits_newtype!(
    /// The 12-bit `psn_offset` of a SYN request or CP: `psn - Start_PSN`.
    SynPsnOffset, u16, 12
);

/// The delivery mode of a reliable PDC: the only two a request or CP can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReliableMode {
    /// Reliable, unordered delivery.
    Rud,
    /// Reliable, ordered delivery.
    Rod,
}

impl ReliableMode {
    /// Spec name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Rud => "RUD",
            Self::Rod => "ROD",
        }
    }
}

impl fmt::Display for ReliableMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Bytes 10-11 of a request or CP: the destination PDC ID, or (with `syn`)
/// the establishment info. The variant *is* the `syn` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DpdcidField {
    /// `syn` = 0: the destination PDC ID (0 on the wire = `None`).
    Dpdcid(Option<PdcId>),
    /// `syn` = 1: the PDC is being established.
    Syn {
        /// `pdc_info` (4 bits).
        pdc_info: PdcInfo,
        /// `psn - Start_PSN` (12 bits).
        psn_offset: SynPsnOffset,
    },
}

impl DpdcidField {
    /// A SYN form with `pdc_info` 0.
    #[must_use]
    pub const fn syn(psn_offset: SynPsnOffset) -> Self {
        Self::Syn {
            pdc_info: PdcInfo(0),
            psn_offset,
        }
    }

    /// Whether this is the SYN form (the `syn` flag).
    #[must_use]
    pub const fn is_syn(&self) -> bool {
        matches!(self, Self::Syn { .. })
    }

    /// Decodes the 16-bit slot given the `syn` flag.
    #[must_use]
    #[inline]
    pub const fn from_wire(syn: bool, w: u16) -> Self {
        if syn {
            Self::Syn {
                pdc_info: PdcInfo::from_masked((w >> field::PDC_INFO_SHIFT) as u8),
                psn_offset: SynPsnOffset::from_masked(w & field::PSN_OFFSET_MASK),
            }
        } else {
            Self::Dpdcid(PdcId::new(w))
        }
    }

    /// The 16-bit wire value.
    #[must_use]
    pub const fn to_wire(&self) -> u16 {
        match *self {
            Self::Dpdcid(id) => PdcId::to_wire(id),
            Self::Syn {
                pdc_info,
                psn_offset,
            } => ((pdc_info.0 as u16) << field::PDC_INFO_SHIFT) | psn_offset.get(),
        }
    }

    /// `Start_PSN = psn - psn_offset` for the SYN form.
    #[must_use]
    pub const fn start_psn(&self, psn: Psn) -> Option<Psn> {
        match *self {
            Self::Syn { psn_offset, .. } => Some(psn.sub(psn_offset.get() as u32)),
            Self::Dpdcid(_) => None,
        }
    }
}

impl fmt::Display for DpdcidField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Dpdcid(id) => write!(f, "dpdcid={}", PdcId::to_wire(id)),
            Self::Syn {
                pdc_info,
                psn_offset,
            } => {
                write!(f, "syn psn_offset={psn_offset}")?;
                if pdc_info.get() != 0 {
                    write!(f, " pdc_info={:#x}", pdc_info.get())?;
                }
                Ok(())
            }
        }
    }
}

/// `req_cc_state` of the *_CC_REQ types (§2.5: `ccc_id`:8 | `credit_target`:24).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReqCcState {
    /// Congestion-control context ID.
    pub ccc_id: CccId,
    /// RCCC credit request, in bytes.
    pub credit_target: Credit24,
}

/// A read/write view of a request header.
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

    /// Checks that the buffer holds the whole header its `type` announces
    /// (16 B for the CC types, 12 B otherwise).
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        check_at_least(b, super::prologue::HEADER_LEN)?;
        check_at_least(b, self.header_len())
    }

    /// The header length the `type` announces. Never panics.
    pub fn header_len(&self) -> usize {
        if self.has_cc() {
            CC_HEADER_LEN
        } else {
            HEADER_LEN
        }
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

    /// Whether the `type` is a *_CC_REQ (carries `req_cc_state`). Never panics.
    pub fn has_cc(&self) -> bool {
        let t = type_raw_of(self.buffer.as_ref());
        t == PdsType::RudCcReq.code() || t == PdsType::RodCcReq.code()
    }

    /// `clear_psn_offset` (signed).
    pub fn clear_psn_offset(&self) -> i16 {
        u16_at(self.buffer.as_ref(), field::CLEAR_PSN_OFFSET) as i16
    }

    /// `psn`.
    pub fn psn(&self) -> Psn {
        Psn(u32_at(self.buffer.as_ref(), field::PSN))
    }

    /// `spdcid` (0 = `None`).
    pub fn spdcid(&self) -> Option<PdcId> {
        PdcId::new(u16_at(self.buffer.as_ref(), field::SPDCID))
    }

    /// The raw 16 bits at bytes 10-11: `dpdcid`, or `pdc_info`|`psn_offset`.
    pub fn dpdcid_raw(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::DPDCID)
    }

    /// Bytes 10-11 decoded according to the `syn` flag.
    #[inline]
    pub fn dpdcid_field(&self) -> DpdcidField {
        DpdcidField::from_wire(self.syn(), self.dpdcid_raw())
    }

    /// `req_cc_state.ccc_id`, for the CC types.
    pub fn ccc_id(&self) -> Option<CccId> {
        let b = self.buffer.as_ref();
        if self.has_cc() {
            b.get(field::CCC_ID).map(|&v| CccId::from_masked(v))
        } else {
            None
        }
    }

    /// `req_cc_state.credit_target`, for the CC types.
    pub fn credit_target(&self) -> Option<Credit24> {
        let b = self.buffer.as_ref();
        if self.has_cc() && b.len() >= CC_HEADER_LEN {
            Some(Credit24::from_masked(u24_at(b, field::CREDIT_TARGET)))
        } else {
            None
        }
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

    /// Sets `clear_psn_offset`.
    pub fn set_clear_psn_offset(&mut self, v: i16) {
        set_u16(self.buffer.as_mut(), field::CLEAR_PSN_OFFSET, v as u16);
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

    /// Sets `req_cc_state.ccc_id`.
    ///
    /// # Panics
    ///
    /// If the buffer is shorter than 16 bytes.
    pub fn set_ccc_id(&mut self, v: CccId) {
        self.buffer.as_mut()[field::CCC_ID] = v.get();
    }

    /// Sets `req_cc_state.credit_target`.
    ///
    /// # Panics
    ///
    /// If the buffer is shorter than 16 bytes.
    pub fn set_credit_target(&mut self, v: Credit24) {
        set_u24(self.buffer.as_mut(), field::CREDIT_TARGET, v.get());
    }
}

/// A parsed RUD/ROD request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// RUD (types 2/13) or ROD (types 3/14).
    pub mode: ReliableMode,
    /// The SES header that follows.
    pub next_hdr: NextHeader,
    /// `retx`: this is a retransmission.
    pub retx: bool,
    /// `ar`: ACK requested.
    pub ar: bool,
    /// `clear_psn_offset`: CLEAR_PSN = psn + offset.
    pub clear_psn_offset: i16,
    /// The packet sequence number.
    pub psn: Psn,
    /// Source PDC ID (0 = `None`).
    pub spdcid: Option<PdcId>,
    /// `dpdcid`, or the SYN form (which sets the `syn` flag).
    pub dpdcid: DpdcidField,
    /// `req_cc_state`: `Some` for RUD_CC_REQ / ROD_CC_REQ.
    pub cc: Option<ReqCcState>,
}

impl Repr {
    /// Parses a request header. Reserved flag bits are ignored.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        packet.check_len()?;
        let ty = packet.pds_type_raw();
        let (mode, has_cc) = match PdsType::from_u8(ty) {
            Ok(PdsType::RudReq) => (ReliableMode::Rud, false),
            Ok(PdsType::RodReq) => (ReliableMode::Rod, false),
            Ok(PdsType::RudCcReq) => (ReliableMode::Rud, true),
            Ok(PdsType::RodCcReq) => (ReliableMode::Rod, true),
            _ => return Err(wrong_type(ty)),
        };
        let next_hdr = parse_next_hdr(packet.next_hdr_raw())?;
        let cc = match (packet.ccc_id(), packet.credit_target()) {
            (Some(ccc_id), Some(credit_target)) if has_cc => Some(ReqCcState {
                ccc_id,
                credit_target,
            }),
            _ => None,
        };
        Ok(Self::decode(packet, mode, next_hdr, cc))
    }

    /// The fields after the checks `parse` makes, given what those decided:
    /// never fails, and panics only if `packet` is shorter than 12 bytes.
    #[inline(always)]
    pub(crate) fn decode<T: AsRef<[u8]>>(
        packet: &Packet<T>,
        mode: ReliableMode,
        next_hdr: NextHeader,
        cc: Option<ReqCcState>,
    ) -> Self {
        Self {
            mode,
            next_hdr,
            retx: packet.retx(),
            ar: packet.ar(),
            clear_psn_offset: packet.clear_psn_offset(),
            psn: packet.psn(),
            spdcid: packet.spdcid(),
            dpdcid: packet.dpdcid_field(),
            cc,
        }
    }

    /// The packet type this header is emitted as.
    #[must_use]
    pub const fn ty(&self) -> PdsType {
        match (self.mode, self.cc.is_some()) {
            (ReliableMode::Rud, false) => PdsType::RudReq,
            (ReliableMode::Rod, false) => PdsType::RodReq,
            (ReliableMode::Rud, true) => PdsType::RudCcReq,
            (ReliableMode::Rod, true) => PdsType::RodCcReq,
        }
    }

    /// The `syn` flag (derived from the form of `dpdcid`).
    #[must_use]
    pub const fn syn(&self) -> bool {
        self.dpdcid.is_syn()
    }

    /// The 7-bit `flags` this header is emitted with.
    #[must_use]
    pub const fn flags(&self) -> u8 {
        (if self.retx { flags::RETX } else { 0 })
            | (if self.ar { flags::AR } else { 0 })
            | (if self.syn() { flags::SYN } else { 0 })
    }

    /// `CLEAR_PSN = psn + clear_psn_offset` (§2.5).
    #[must_use]
    pub const fn clear_psn(&self) -> Psn {
        self.psn.offset(self.clear_psn_offset)
    }

    /// `Start_PSN = psn - psn_offset`, for a SYN request.
    #[must_use]
    pub const fn start_psn(&self) -> Option<Psn> {
        self.dpdcid.start_psn(self.psn)
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        if self.cc.is_some() {
            CC_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Writes the header into a buffer of at least `buffer_len()` bytes.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_prologue(self.ty().code(), self.next_hdr.code(), self.flags());
        packet.set_clear_psn_offset(self.clear_psn_offset);
        packet.set_psn(self.psn);
        packet.set_spdcid(self.spdcid);
        packet.set_dpdcid_field(self.dpdcid);
        if let Some(cc) = self.cc {
            packet.set_ccc_id(cc.ccc_id);
            packet.set_credit_target(cc.credit_target);
        }
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} psn={} clear_psn={} spdcid={} {}",
            self.ty(),
            self.psn,
            self.clear_psn(),
            PdcId::to_wire(self.spdcid),
            self.dpdcid
        )?;
        if let Some(cc) = self.cc {
            write!(f, " ccc={} credit_target={}", cc.ccc_id, cc.credit_target)?;
        }
        fmt_flag(f, self.ar, "ar")?;
        fmt_flag(f, self.retx, "retx")?;
        fmt_next_hdr(f, self.next_hdr)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::error::{Error, ErrorKind, Layer};
    use proptest::prelude::*;

    pub(crate) fn pdc_id() -> impl Strategy<Value = Option<PdcId>> {
        any::<u16>().prop_map(PdcId::new)
    }

    pub(crate) fn next_hdr() -> impl Strategy<Value = NextHeader> {
        (0u8..7).prop_map(|v| NextHeader::from_u8(v).unwrap())
    }

    pub(crate) fn dpdcid_field() -> impl Strategy<Value = DpdcidField> {
        prop_oneof![
            pdc_id().prop_map(DpdcidField::Dpdcid),
            (any::<u8>(), any::<u16>()).prop_map(|(i, o)| DpdcidField::Syn {
                pdc_info: PdcInfo::from_masked(i),
                psn_offset: SynPsnOffset::from_masked(o),
            }),
        ]
    }

    pub(crate) fn repr() -> impl Strategy<Value = Repr> {
        (
            any::<bool>(),
            next_hdr(),
            any::<bool>(),
            any::<bool>(),
            any::<i16>(),
            any::<u32>(),
            pdc_id(),
            dpdcid_field(),
            proptest::option::of((any::<u8>(), any::<u32>())),
        )
            .prop_map(
                |(rod, next_hdr, retx, ar, cpo, psn, spdcid, dpdcid, cc)| Repr {
                    mode: if rod {
                        ReliableMode::Rod
                    } else {
                        ReliableMode::Rud
                    },
                    next_hdr,
                    retx,
                    ar,
                    clear_psn_offset: cpo,
                    psn: Psn(psn),
                    spdcid,
                    dpdcid,
                    cc: cc.map(|(c, t)| ReqCcState {
                        ccc_id: CccId::from_masked(c),
                        credit_target: Credit24::from_masked(t),
                    }),
                },
            )
    }

    // ROD_REQ (3), next_hdr standard (3), flags ar (0x08):
    // 0b00011_0011_0001000 = 0x1988. CLEAR_PSN 335 sent as psn 336 with
    // clear_psn_offset -1 (SPEC-TR §3.5.20.2.8), spdcid 5, dpdcid 9.
    const ROD_REQ_CLEAR: [u8; 12] = [
        0x19, 0x88, 0xff, 0xff, 0x00, 0x00, 0x01, 0x50, 0x00, 0x05, 0x00, 0x09,
    ];

    fn rod_req_clear() -> Repr {
        Repr {
            mode: ReliableMode::Rod,
            next_hdr: NextHeader::RequestStd,
            retx: false,
            ar: true,
            clear_psn_offset: -1,
            psn: Psn(336),
            spdcid: PdcId::new(5),
            dpdcid: DpdcidField::Dpdcid(PdcId::new(9)),
            cc: None,
        }
    }

    // RUD_CC_REQ (13), next_hdr none, flags ar|syn (0x0c):
    // 0b01101_0000_0001100 = 0x680c. psn 336, clear_psn_offset -1, spdcid 5,
    // SYN with pdc_info 0 and psn_offset 0 (the first packet: Start_PSN 336),
    // ccc_id 1, credit_target 12,500 (0x0030d4).
    const RUD_CC_REQ_SYN: [u8; 16] = [
        0x68, 0x0c, 0xff, 0xff, 0x00, 0x00, 0x01, 0x50, 0x00, 0x05, 0x00, 0x00, 0x01, 0x00, 0x30,
        0xd4,
    ];

    fn rud_cc_req_syn() -> Repr {
        Repr {
            mode: ReliableMode::Rud,
            next_hdr: NextHeader::None,
            retx: false,
            ar: true,
            clear_psn_offset: -1,
            psn: Psn(336),
            spdcid: PdcId::new(5),
            dpdcid: DpdcidField::syn(SynPsnOffset::new(0).unwrap()),
            cc: Some(ReqCcState {
                ccc_id: CccId::new(1).unwrap(),
                credit_target: Credit24::new(12_500).unwrap(),
            }),
        }
    }

    // RUD_REQ (2), next_hdr small (1), flags retx|syn (0x14):
    // 0b00010_0001_0010100 = 0x1094. psn 1,000,010 (0x000f424a), SYN with
    // use_rsv_pdc (pdc_info 0x1) and psn_offset 10 -> word 0x100a; Start_PSN
    // 1,000,000. clear_psn_offset 9 (0x0009), spdcid 0x1234.
    const RUD_REQ_SYN_OFFSET: [u8; 12] = [
        0x10, 0x94, 0x00, 0x09, 0x00, 0x0f, 0x42, 0x4a, 0x12, 0x34, 0x10, 0x0a,
    ];

    #[test]
    fn golden_clear_psn() {
        let p = Packet::new_checked(&ROD_REQ_CLEAR[..]).unwrap();
        assert_eq!(p.clear_psn_offset(), -1);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r, rod_req_clear());
        assert_eq!(r.clear_psn(), Psn(335));
        assert_eq!(r.start_psn(), None);
        assert_eq!(r.buffer_len(), 12);
        let mut b = [0xee; 12];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, ROD_REQ_CLEAR);
    }

    #[test]
    fn golden_cc_syn() {
        let r = Repr::parse(&Packet::new_checked(&RUD_CC_REQ_SYN[..]).unwrap()).unwrap();
        assert_eq!(r, rud_cc_req_syn());
        assert!(r.syn());
        assert_eq!(r.ty(), PdsType::RudCcReq);
        assert_eq!(r.start_psn(), Some(Psn(336)));
        let mut b = [0xee; 16];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, RUD_CC_REQ_SYN);
        assert_eq!(
            std::format!("{r}"),
            "RUD_CC_REQ psn=336 clear_psn=335 spdcid=5 syn psn_offset=0 ccc=1 credit_target=12500 ar"
        );
    }

    #[test]
    fn golden_syn_psn_offset() {
        let p = Packet::new_checked(&RUD_REQ_SYN_OFFSET[..]).unwrap();
        assert!(p.syn());
        assert_eq!(p.dpdcid_raw(), 0x100a);
        let r = Repr::parse(&p).unwrap();
        let DpdcidField::Syn {
            pdc_info,
            psn_offset,
        } = r.dpdcid
        else {
            panic!("expected the SYN form")
        };
        assert!(pdc_info.use_rsv_pdc());
        assert_eq!(pdc_info, PdcInfo::USE_RSV_PDC);
        assert_eq!(psn_offset.get(), 10);
        assert_eq!(r.psn, Psn(1_000_010));
        assert_eq!(r.start_psn(), Some(Psn(1_000_000)));
        assert!(r.retx && !r.ar);
        assert_eq!(r.next_hdr, NextHeader::RequestSmall);
        let mut b = [0u8; 12];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, RUD_REQ_SYN_OFFSET);
        assert_eq!(
            std::format!("{r}"),
            "RUD_REQ psn=1000010 clear_psn=1000019 spdcid=4660 syn psn_offset=10 pdc_info=0x1 retx next=UET_HDR_REQUEST_SMALL"
        );
    }

    #[test]
    fn reserved_flags_ignored_and_zeroed() {
        let mut b = ROD_REQ_CLEAR;
        b[1] |= 0x63; // every reserved request flag bit
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r, rod_req_clear());
        let mut out = [0u8; 12];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, ROD_REQ_CLEAR);
    }

    #[test]
    fn errors() {
        // Truncated CC request: type 13 needs 16 bytes.
        let e = Packet::new_checked(&RUD_CC_REQ_SYN[..12]).unwrap_err();
        assert_eq!(e, Error::truncated(Layer::Pds, 16, 12));
        // Reserved next_hdr.
        let mut b = ROD_REQ_CLEAR;
        b[0] = 0x1b; // next_hdr 0b0111 = 7 (high 3 bits), low bit from byte 1
        let e = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap_err();
        assert_eq!((e.kind, e.offset), (ErrorKind::Reserved(7), 0));
        // Type of another module.
        let mut b = ROD_REQ_CLEAR;
        b[0] = 0x38; // ACK
        let e = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap_err();
        assert_eq!((e.kind, e.offset), (ErrorKind::OutOfRange, 0));
    }

    #[test]
    fn checked_sub_byte_fields() {
        assert!(PdcInfo::new(16).is_err());
        assert!(SynPsnOffset::new(4095).is_ok());
        assert!(SynPsnOffset::new(4096).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(r in repr()) {
            let mut b = [0xa5u8; CC_HEADER_LEN];
            let n = r.buffer_len();
            r.emit(&mut Packet::new_unchecked(&mut b[..n]));
            let p = Packet::new_checked(&b[..n]).unwrap();
            prop_assert_eq!(p.header_len(), n);
            prop_assert_eq!(Repr::parse(&p).unwrap(), r);
        }
    }
}
