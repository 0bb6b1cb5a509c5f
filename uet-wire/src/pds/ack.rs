//! ACK (12 B; 16 B with REFPROV's EPSN variant), ACK_CC (32 B) and ACK_CCX
//! (40 B) (`docs/protocol-notes.md` §2.6, §2.7).
//!
//! ```text
//! 0      prologue          type 7/8/9 | next_hdr (SES response in the ACK) | flags
//!                          (epsn 0x40 [REFPROV], m 0x20, retx 0x10, p 0x08, req 0x06)
//! 2      ack_psn_offset    i16: ACK_PSN = cack_psn + offset; with p = 1: probe_opaque (u16)
//! 4      cack_psn          u32: every PSN <= this is ACKed and cleared
//! 8      spdcid            u16
//! 10     dpdcid            u16
//! 12     expected_psn      u32, ACK with epsn only (REFPROV closing ACK, secure PDCs)
//! 12     cc_type:4 | cc_flags:4   (ACK_CC; ACK_CCX: ccx_type:4 | cc_flags:4)
//! 13     mpr               u8
//! 14     sack_psn_offset   i16: SACK_BASE = cack_psn + offset
//! 16     sack_bitmap       u64 BE: bit i (LSB = bit 0) <-> PSN SACK_BASE + i
//! 24     ack_cc_state      8 B (ACK_CC), see `cc_state`
//! 24     ack_ccx_state     16 B (ACK_CCX)
//! ```
//!
//! EPSN (flag 0x40) is honoured on plain ACKs only, as REFPROV does; on
//! ACK_CC / ACK_CCX the bit is reserved (ignored, not emitted). ACK_CCX is
//! 40 B per REFPROV and WS (§9 item 4).

use core::fmt;

use super::cc_state::{AckCcState, AckCcxState, CCX_STATE_LEN, CcxType};
use super::prologue::{NextHeader, PdsType};
use super::{
    check_at_least, flags_of, fmt_flag, fmt_next_hdr, next_hdr_raw_of, parse_next_hdr,
    set_flags_of, set_next_hdr_raw_of, set_prologue, set_type_raw_of, type_raw_of, wrong_type,
};
use crate::error::Result;
use crate::field::{set_u16, set_u32, set_u64, u16_at, u32_at, u64_at};
use crate::types::{PdcId, Psn};

/// Length of a plain ACK.
pub const HEADER_LEN: usize = 12;
/// Length of a plain ACK with the EPSN payload.
pub const EPSN_HEADER_LEN: usize = 16;
/// Length of ACK_CC.
pub const CC_HEADER_LEN: usize = 32;
/// Length of ACK_CCX.
pub const CCX_HEADER_LEN: usize = 40;

/// REFPROV's MPR granularity: `MP_RANGE = mpr * 128` packets (§2.7; low
/// confidence, the old draft used `2^mpr`).
pub const MPR_GRANULARITY: u32 = 128;

/// ACK flag bits (§2.4).
pub mod flags {
    /// REFPROV: closing ACK carrying an Expected_PSN payload (plain ACK only).
    pub const EPSN: u8 = 0x40;
    /// The acknowledged packet was ECN-CE marked.
    pub const M: u8 = 0x20;
    /// ACK to a retransmission.
    pub const RETX: u8 = 0x10;
    /// ACK to a Probe CP: bytes 2-3 are `probe_opaque`.
    pub const P: u8 = 0x08;
    /// The 2-bit `req` field.
    pub const REQ_MASK: u8 = 0x06;
    /// Shift of `req`.
    pub const REQ_SHIFT: u8 = 1;
}

mod field {
    pub(super) const ACK_PSN_OFFSET: usize = 2;
    pub(super) const CACK_PSN: usize = 4;
    pub(super) const SPDCID: usize = 8;
    pub(super) const DPDCID: usize = 10;
    pub(super) const EPSN: usize = 12;
    pub(super) const CC_TYPE_FLAGS: usize = 12;
    pub(super) const MPR: usize = 13;
    pub(super) const SACK_PSN_OFFSET: usize = 14;
    pub(super) const SACK_BITMAP: usize = 16;
    pub(super) const CC_STATE: usize = 24;
}

bits_newtype!(
    /// The 4-bit `cc_flags` of ACK_CC / ACK_CCX (reserved in 1.0, kept).
    CcFlags, u8, 4
);

/// The ACK `req` field: what the target asks of the initiator (§2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AckRequest {
    /// 0: nothing.
    #[default]
    None,
    /// 1: the target requests a CLEAR.
    Clear,
    /// 2: the target requests a CLOSE.
    Close,
    /// 3: reserved (kept so it round-trips).
    Reserved,
}

impl AckRequest {
    /// From the 2-bit value (higher bits are ignored).
    #[must_use]
    pub const fn from_bits(v: u8) -> Self {
        match v & 3 {
            0 => Self::None,
            1 => Self::Clear,
            2 => Self::Close,
            _ => Self::Reserved,
        }
    }

    /// The 2-bit value.
    #[must_use]
    pub const fn bits(self) -> u8 {
        match self {
            Self::None => 0,
            Self::Clear => 1,
            Self::Close => 2,
            Self::Reserved => 3,
        }
    }

    /// Name for traces.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::None => "NONE",
            Self::Clear => "CLEAR",
            Self::Close => "CLOSE",
            Self::Reserved => "RESERVED",
        }
    }
}

impl fmt::Display for AckRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Bytes 2-3 of an ACK. The variant *is* the `p` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckPsnField {
    /// `p` = 0: `ack_psn_offset`, ACK_PSN = cack_psn + offset.
    Offset(i16),
    /// `p` = 1 (ACK to a Probe CP): `probe_opaque`, copied from the probe.
    ProbeOpaque(u16),
}

/// The ACK_CC / ACK_CCX extension (bytes 12-31 / 12-39).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AckCc {
    /// `cc_flags` (reserved in 1.0).
    pub cc_flags: CcFlags,
    /// Maximum PSN Range advertised by the receiver (see
    /// [`mp_range`](Self::mp_range)).
    pub mpr: u8,
    /// SACK_BASE = cack_psn + sack_psn_offset (signed, §9 item 16).
    pub sack_psn_offset: i16,
    /// Bit i (LSB of the big-endian u64 = bit 0) is PSN SACK_BASE + i. A 0
    /// bit means "no information", not "lost".
    pub sack_bitmap: u64,
    /// The CC state; its variant decides ACK_CC vs ACK_CCX.
    pub state: AckState,
}

impl AckCc {
    /// `MP_RANGE` in packets, decoded with REFPROV's ×128 granularity
    /// (`uet_pds_decode_mpr`). Low confidence (§2.7, §9 item 13): a helper,
    /// not a wire rule.
    #[must_use]
    pub const fn mp_range(&self) -> u32 {
        self.mpr as u32 * MPR_GRANULARITY
    }

    /// SACK_BASE for a given CACK_PSN.
    #[must_use]
    pub const fn sack_base(&self, cack_psn: Psn) -> Psn {
        cack_psn.offset(self.sack_psn_offset)
    }

    /// The byte-12 nibble: `cc_type` or `ccx_type`.
    #[must_use]
    pub const fn cc_type(&self) -> u8 {
        match &self.state {
            AckState::Cc(s) => s.cc_type(),
            AckState::Ccx(s) => s.ccx_type.get(),
        }
    }
}

/// The state of an ACK_CC (8 B) or ACK_CCX (16 B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckState {
    /// ACK_CC: `ack_cc_state`.
    Cc(AckCcState),
    /// ACK_CCX: `ack_ccx_state`.
    Ccx(AckCcxState),
}

/// What follows the first 12 bytes; decides the `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckExt {
    /// ACK (type 7). `Some` is REFPROV's EPSN variant: flag 0x40 and a 4-byte
    /// Expected_PSN after the header.
    Plain {
        /// Expected_PSN carried by a closing ACK (secure PDCs).
        expected_psn: Option<Psn>,
    },
    /// ACK_CC (type 8) or ACK_CCX (type 9).
    Cc(AckCc),
}

/// Iterator over the PSNs a SACK bitmap marks as received, lowest first.
#[derive(Debug, Clone)]
pub struct SackIter {
    base: Psn,
    bits: u64,
}

impl SackIter {
    /// Iterates the set bits of `bitmap` as PSNs from `base`.
    #[must_use]
    pub const fn new(base: Psn, bitmap: u64) -> Self {
        Self { base, bits: bitmap }
    }
}

impl Iterator for SackIter {
    type Item = Psn;

    fn next(&mut self) -> Option<Psn> {
        if self.bits == 0 {
            return None;
        }
        let i = self.bits.trailing_zeros();
        self.bits &= self.bits - 1;
        Some(self.base.add(i))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.bits.count_ones() as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for SackIter {}

/// A read/write view of an ACK, ACK_CC or ACK_CCX header.
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

    /// Checks that the buffer holds the whole header its `type` (and, for a
    /// plain ACK, the EPSN flag) announces.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        check_at_least(b, super::prologue::HEADER_LEN)?;
        check_at_least(b, self.header_len())
    }

    /// The header length the `type` and flags announce. Never panics.
    pub fn header_len(&self) -> usize {
        let b = self.buffer.as_ref();
        let t = type_raw_of(b);
        if t == PdsType::AckCc.code() {
            CC_HEADER_LEN
        } else if t == PdsType::AckCcx.code() {
            CCX_HEADER_LEN
        } else if t == PdsType::Ack.code() && b.len() >= 2 && flags_of(b) & flags::EPSN != 0 {
            EPSN_HEADER_LEN
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

    /// The `epsn` flag (REFPROV).
    pub fn epsn(&self) -> bool {
        self.flags() & flags::EPSN != 0
    }

    /// The `m` flag.
    pub fn m(&self) -> bool {
        self.flags() & flags::M != 0
    }

    /// The `retx` flag.
    pub fn retx(&self) -> bool {
        self.flags() & flags::RETX != 0
    }

    /// The `p` flag.
    pub fn p(&self) -> bool {
        self.flags() & flags::P != 0
    }

    /// The raw 2-bit `req`.
    pub fn req_raw(&self) -> u8 {
        (self.flags() & flags::REQ_MASK) >> flags::REQ_SHIFT
    }

    /// Bytes 2-3 as `ack_psn_offset` (signed); meaningless when `p` is set.
    pub fn ack_psn_offset(&self) -> i16 {
        self.probe_opaque() as i16
    }

    /// Bytes 2-3 as `probe_opaque`; meaningless when `p` is clear.
    pub fn probe_opaque(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::ACK_PSN_OFFSET)
    }

    /// Bytes 2-3 decoded according to the `p` flag.
    pub fn ack_psn_field(&self) -> AckPsnField {
        if self.p() {
            AckPsnField::ProbeOpaque(self.probe_opaque())
        } else {
            AckPsnField::Offset(self.ack_psn_offset())
        }
    }

    /// `cack_psn`.
    pub fn cack_psn(&self) -> Psn {
        Psn(u32_at(self.buffer.as_ref(), field::CACK_PSN))
    }

    /// `spdcid` (0 = `None`).
    pub fn spdcid(&self) -> Option<PdcId> {
        PdcId::new(u16_at(self.buffer.as_ref(), field::SPDCID))
    }

    /// `dpdcid` (0 = `None`).
    pub fn dpdcid(&self) -> Option<PdcId> {
        PdcId::new(u16_at(self.buffer.as_ref(), field::DPDCID))
    }

    fn is_plain(&self) -> bool {
        self.pds_type_raw() == PdsType::Ack.code()
    }

    fn has_cc(&self) -> bool {
        let t = self.pds_type_raw();
        t == PdsType::AckCc.code() || t == PdsType::AckCcx.code()
    }

    /// The EPSN payload (Expected_PSN) of a plain ACK with `epsn` set.
    pub fn expected_psn(&self) -> Option<Psn> {
        let b = self.buffer.as_ref();
        (self.is_plain() && self.epsn() && b.len() >= EPSN_HEADER_LEN)
            .then(|| Psn(u32_at(b, field::EPSN)))
    }

    fn cc_bytes(&self) -> Option<&[u8]> {
        let b = self.buffer.as_ref();
        if self.has_cc() && b.len() >= CC_HEADER_LEN {
            Some(b)
        } else {
            None
        }
    }

    /// The byte-12 high nibble (`cc_type`, or `ccx_type` for ACK_CCX).
    pub fn cc_type(&self) -> Option<u8> {
        self.cc_bytes().map(|b| b[field::CC_TYPE_FLAGS] >> 4)
    }

    /// `cc_flags`.
    pub fn cc_flags(&self) -> Option<CcFlags> {
        self.cc_bytes()
            .map(|b| CcFlags::from_masked(b[field::CC_TYPE_FLAGS]))
    }

    /// `mpr`.
    pub fn mpr(&self) -> Option<u8> {
        self.cc_bytes().map(|b| b[field::MPR])
    }

    /// `sack_psn_offset` (signed).
    pub fn sack_psn_offset(&self) -> Option<i16> {
        self.cc_bytes()
            .map(|b| u16_at(b, field::SACK_PSN_OFFSET) as i16)
    }

    /// `sack_bitmap`.
    pub fn sack_bitmap(&self) -> Option<u64> {
        self.cc_bytes().map(|b| u64_at(b, field::SACK_BITMAP))
    }

    /// `ack_cc_state` (ACK_CC only), as the big-endian u64.
    pub fn ack_cc_state_raw(&self) -> Option<u64> {
        let b = self.buffer.as_ref();
        (self.pds_type_raw() == PdsType::AckCc.code() && b.len() >= CC_HEADER_LEN)
            .then(|| u64_at(b, field::CC_STATE))
    }

    /// `ack_ccx_state` (ACK_CCX only).
    pub fn ack_ccx_state_raw(&self) -> Option<[u8; CCX_STATE_LEN]> {
        let b = self.buffer.as_ref();
        if self.pds_type_raw() != PdsType::AckCcx.code() {
            return None;
        }
        b.get(field::CC_STATE..CCX_HEADER_LEN)
            .and_then(|s| <[u8; CCX_STATE_LEN]>::try_from(s).ok())
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

    /// Sets bytes 2-3 as `ack_psn_offset`.
    pub fn set_ack_psn_offset(&mut self, v: i16) {
        self.set_probe_opaque(v as u16);
    }

    /// Sets bytes 2-3 as `probe_opaque`.
    pub fn set_probe_opaque(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::ACK_PSN_OFFSET, v);
    }

    /// Sets `cack_psn`.
    pub fn set_cack_psn(&mut self, v: Psn) {
        set_u32(self.buffer.as_mut(), field::CACK_PSN, v.0);
    }

    /// Sets `spdcid`.
    pub fn set_spdcid(&mut self, v: Option<PdcId>) {
        set_u16(self.buffer.as_mut(), field::SPDCID, PdcId::to_wire(v));
    }

    /// Sets `dpdcid`.
    pub fn set_dpdcid(&mut self, v: Option<PdcId>) {
        set_u16(self.buffer.as_mut(), field::DPDCID, PdcId::to_wire(v));
    }

    /// Sets the EPSN payload.
    ///
    /// # Panics
    ///
    /// If the buffer is shorter than 16 bytes.
    pub fn set_expected_psn(&mut self, v: Psn) {
        set_u32(self.buffer.as_mut(), field::EPSN, v.0);
    }

    /// Sets byte 12: `cc_type` (or `ccx_type`) and `cc_flags`, 4 bits each.
    ///
    /// # Panics
    ///
    /// If the buffer is shorter than 13 bytes (as every CC setter does on a
    /// buffer shorter than its field).
    pub fn set_cc_type_flags(&mut self, cc_type: u8, cc_flags: CcFlags) {
        self.buffer.as_mut()[field::CC_TYPE_FLAGS] = (cc_type << 4) | cc_flags.get();
    }

    /// Sets `mpr`.
    pub fn set_mpr(&mut self, v: u8) {
        self.buffer.as_mut()[field::MPR] = v;
    }

    /// Sets `sack_psn_offset`.
    pub fn set_sack_psn_offset(&mut self, v: i16) {
        set_u16(self.buffer.as_mut(), field::SACK_PSN_OFFSET, v as u16);
    }

    /// Sets `sack_bitmap`.
    pub fn set_sack_bitmap(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::SACK_BITMAP, v);
    }

    /// Sets `ack_cc_state` (bytes 24-31).
    pub fn set_ack_cc_state_raw(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::CC_STATE, v);
    }

    /// Sets `ack_ccx_state` (bytes 24-39).
    pub fn set_ack_ccx_state_raw(&mut self, v: &[u8; CCX_STATE_LEN]) {
        self.buffer.as_mut()[field::CC_STATE..CCX_HEADER_LEN].copy_from_slice(v);
    }
}

/// A parsed ACK, ACK_CC or ACK_CCX header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The SES response header carried in the ACK, or `None`.
    pub next_hdr: NextHeader,
    /// `m`: the acknowledged packet was ECN-CE marked.
    pub m: bool,
    /// `retx`: ACK to a retransmission.
    pub retx: bool,
    /// `req`: CLEAR or CLOSE requested by the target.
    pub req: AckRequest,
    /// `ack_psn_offset`, or `probe_opaque` (which sets `p`).
    pub ack_psn_offset: AckPsnField,
    /// Cumulative ACK PSN.
    pub cack_psn: Psn,
    /// Source PDC ID (0 = `None`).
    pub spdcid: Option<PdcId>,
    /// Destination PDC ID (0 = `None`).
    pub dpdcid: Option<PdcId>,
    /// EPSN payload or CC extension; decides the type.
    pub ext: AckExt,
}

impl Repr {
    /// Parses an ACK header. Reserved flags are ignored (including 0x40 on
    /// ACK_CC / ACK_CCX).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        packet.check_len()?;
        let ty = packet.pds_type_raw();
        let ext = match PdsType::from_u8(ty) {
            Ok(PdsType::Ack) => AckExt::Plain {
                expected_psn: packet.expected_psn(),
            },
            Ok(PdsType::AckCc | PdsType::AckCcx) => {
                let state = match (packet.ack_cc_state_raw(), packet.ack_ccx_state_raw()) {
                    (Some(raw), _) => {
                        AckState::Cc(AckCcState::from_wire(packet.cc_type().unwrap_or(0), raw))
                    }
                    (None, Some(raw)) => AckState::Ccx(AckCcxState {
                        ccx_type: CcxType::from_masked(packet.cc_type().unwrap_or(0)),
                        raw,
                    }),
                    // check_len passed for a CC type: unreachable, but a
                    // parser must not panic.
                    (None, None) => return Err(wrong_type(ty)),
                };
                AckExt::Cc(AckCc {
                    cc_flags: packet.cc_flags().unwrap_or_default(),
                    mpr: packet.mpr().unwrap_or(0),
                    sack_psn_offset: packet.sack_psn_offset().unwrap_or(0),
                    sack_bitmap: packet.sack_bitmap().unwrap_or(0),
                    state,
                })
            }
            _ => return Err(wrong_type(ty)),
        };
        Ok(Self {
            next_hdr: parse_next_hdr(packet.next_hdr_raw())?,
            m: packet.m(),
            retx: packet.retx(),
            req: AckRequest::from_bits(packet.req_raw()),
            ack_psn_offset: packet.ack_psn_field(),
            cack_psn: packet.cack_psn(),
            spdcid: packet.spdcid(),
            dpdcid: packet.dpdcid(),
            ext,
        })
    }

    /// The packet type this header is emitted as.
    #[must_use]
    pub const fn ty(&self) -> PdsType {
        match &self.ext {
            AckExt::Plain { .. } => PdsType::Ack,
            AckExt::Cc(AckCc {
                state: AckState::Cc(_),
                ..
            }) => PdsType::AckCc,
            AckExt::Cc(AckCc {
                state: AckState::Ccx(_),
                ..
            }) => PdsType::AckCcx,
        }
    }

    /// The `p` flag (derived: ACK to a probe).
    #[must_use]
    pub const fn p(&self) -> bool {
        matches!(self.ack_psn_offset, AckPsnField::ProbeOpaque(_))
    }

    /// The `epsn` flag (derived: a plain ACK with an Expected_PSN).
    #[must_use]
    pub const fn epsn(&self) -> bool {
        self.expected_psn().is_some()
    }

    /// The 7-bit `flags` this header is emitted with.
    #[must_use]
    pub const fn flags(&self) -> u8 {
        (if self.epsn() { flags::EPSN } else { 0 })
            | (if self.m { flags::M } else { 0 })
            | (if self.retx { flags::RETX } else { 0 })
            | (if self.p() { flags::P } else { 0 })
            | (self.req.bits() << flags::REQ_SHIFT)
    }

    /// ACK_PSN = cack_psn + ack_psn_offset: the PSN that triggered this ACK
    /// (`None` for an ACK to a probe).
    #[must_use]
    pub const fn ack_psn(&self) -> Option<Psn> {
        match self.ack_psn_offset {
            AckPsnField::Offset(o) => Some(self.cack_psn.offset(o)),
            AckPsnField::ProbeOpaque(_) => None,
        }
    }

    /// `probe_opaque`, for an ACK to a probe.
    #[must_use]
    pub const fn probe_opaque(&self) -> Option<u16> {
        match self.ack_psn_offset {
            AckPsnField::ProbeOpaque(v) => Some(v),
            AckPsnField::Offset(_) => None,
        }
    }

    /// The EPSN payload (plain ACK only).
    #[must_use]
    pub const fn expected_psn(&self) -> Option<Psn> {
        match self.ext {
            AckExt::Plain { expected_psn } => expected_psn,
            AckExt::Cc(_) => None,
        }
    }

    /// The CC extension (ACK_CC / ACK_CCX).
    #[must_use]
    pub const fn cc(&self) -> Option<&AckCc> {
        match &self.ext {
            AckExt::Cc(cc) => Some(cc),
            AckExt::Plain { .. } => None,
        }
    }

    /// SACK_BASE = cack_psn + sack_psn_offset (ACK_CC / ACK_CCX only).
    #[must_use]
    pub const fn sack_base(&self) -> Option<Psn> {
        match self.cc() {
            Some(cc) => Some(cc.sack_base(self.cack_psn)),
            None => None,
        }
    }

    /// The PSNs the SACK bitmap marks as received, lowest first (empty for a
    /// plain ACK). PSNs covered by `cack_psn` are not included unless their
    /// bit is set.
    #[must_use]
    pub const fn sacked(&self) -> SackIter {
        match self.cc() {
            Some(cc) => SackIter::new(cc.sack_base(self.cack_psn), cc.sack_bitmap),
            None => SackIter::new(self.cack_psn, 0),
        }
    }

    /// Whether the SACK bitmap marks `psn` as received.
    #[must_use]
    pub const fn is_sacked(&self, psn: Psn) -> bool {
        match self.cc() {
            Some(cc) => {
                let i = psn.diff(cc.sack_base(self.cack_psn));
                i >= 0 && i < 64 && cc.sack_bitmap & (1u64 << i) != 0
            }
            None => false,
        }
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        match self.ty() {
            PdsType::AckCc => CC_HEADER_LEN,
            PdsType::AckCcx => CCX_HEADER_LEN,
            _ if self.epsn() => EPSN_HEADER_LEN,
            _ => HEADER_LEN,
        }
    }

    /// Writes the header into a buffer of at least `buffer_len()` bytes.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_prologue(self.ty().code(), self.next_hdr.code(), self.flags());
        match self.ack_psn_offset {
            AckPsnField::Offset(o) => packet.set_ack_psn_offset(o),
            AckPsnField::ProbeOpaque(v) => packet.set_probe_opaque(v),
        }
        packet.set_cack_psn(self.cack_psn);
        packet.set_spdcid(self.spdcid);
        packet.set_dpdcid(self.dpdcid);
        match &self.ext {
            AckExt::Plain { expected_psn } => {
                if let Some(e) = expected_psn {
                    packet.set_expected_psn(*e);
                }
            }
            AckExt::Cc(cc) => {
                packet.set_cc_type_flags(cc.cc_type(), cc.cc_flags);
                packet.set_mpr(cc.mpr);
                packet.set_sack_psn_offset(cc.sack_psn_offset);
                packet.set_sack_bitmap(cc.sack_bitmap);
                match &cc.state {
                    AckState::Cc(s) => packet.set_ack_cc_state_raw(s.to_wire()),
                    AckState::Ccx(s) => packet.set_ack_ccx_state_raw(&s.raw),
                }
            }
        }
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.ty())?;
        match self.ack_psn_offset {
            AckPsnField::Offset(o) => write!(f, " ack_psn={}", self.cack_psn.offset(o))?,
            AckPsnField::ProbeOpaque(v) => write!(f, " probe_opaque={v:#06x}")?,
        }
        write!(
            f,
            " cack_psn={} spdcid={} dpdcid={}",
            self.cack_psn,
            PdcId::to_wire(self.spdcid),
            PdcId::to_wire(self.dpdcid)
        )?;
        match &self.ext {
            AckExt::Plain {
                expected_psn: Some(e),
            } => write!(f, " expected_psn={e}")?,
            AckExt::Plain { expected_psn: None } => {}
            AckExt::Cc(cc) => {
                write!(
                    f,
                    " mpr={} sack_base={} sack_bitmap={:#018x}",
                    cc.mpr,
                    cc.sack_base(self.cack_psn),
                    cc.sack_bitmap
                )?;
                if cc.cc_flags.get() != 0 {
                    write!(f, " cc_flags={:#x}", cc.cc_flags.get())?;
                }
                match &cc.state {
                    AckState::Cc(s) => write!(f, " {s}")?,
                    AckState::Ccx(s) => write!(f, " {s}")?,
                }
            }
        }
        fmt_flag(f, self.m, "m")?;
        fmt_flag(f, self.retx, "retx")?;
        if self.req != AckRequest::None {
            write!(f, " req={}", self.req)?;
        }
        fmt_next_hdr(f, self.next_hdr)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::error::{Error, ErrorKind, Layer};
    use crate::pds::cc_state::{self, CreditState, CwndPenalty, NsccState};
    use crate::pds::req::tests::{next_hdr, pdc_id};
    use crate::types::{Credit24, Units256};
    use proptest::prelude::*;

    fn ack_cc() -> impl Strategy<Value = AckCc> {
        (
            any::<u8>(),
            any::<u8>(),
            any::<i16>(),
            any::<u64>(),
            prop_oneof![
                cc_state::tests::ack_cc_state().prop_map(AckState::Cc),
                cc_state::tests::ack_ccx_state().prop_map(AckState::Ccx),
            ],
        )
            .prop_map(|(fl, mpr, sack_psn_offset, sack_bitmap, state)| AckCc {
                cc_flags: CcFlags::from_masked(fl),
                mpr,
                sack_psn_offset,
                sack_bitmap,
                state,
            })
    }

    pub(crate) fn repr() -> impl Strategy<Value = Repr> {
        (
            next_hdr(),
            any::<bool>(),
            any::<bool>(),
            (0u8..4).prop_map(AckRequest::from_bits),
            prop_oneof![
                any::<i16>().prop_map(AckPsnField::Offset),
                any::<u16>().prop_map(AckPsnField::ProbeOpaque),
            ],
            any::<u32>(),
            pdc_id(),
            pdc_id(),
            prop_oneof![
                proptest::option::of(any::<u32>()).prop_map(|e| AckExt::Plain {
                    expected_psn: e.map(Psn)
                }),
                ack_cc().prop_map(AckExt::Cc),
            ],
        )
            .prop_map(
                |(next_hdr, m, retx, req, ack_psn_offset, cack, spdcid, dpdcid, ext)| Repr {
                    next_hdr,
                    m,
                    retx,
                    req,
                    ack_psn_offset,
                    cack_psn: Psn(cack),
                    spdcid,
                    dpdcid,
                    ext,
                },
            )
    }

    fn base(ext: AckExt) -> Repr {
        Repr {
            next_hdr: NextHeader::None,
            m: false,
            retx: false,
            req: AckRequest::None,
            ack_psn_offset: AckPsnField::Offset(2),
            cack_psn: Psn(100),
            spdcid: PdcId::new(7),
            dpdcid: PdcId::new(5),
            ext,
        }
    }

    fn nscc(rc: bool, rcvd: u64) -> AckCc {
        AckCc {
            cc_flags: CcFlags::default(),
            mpr: 1,
            sack_psn_offset: 1,
            sack_bitmap: 0x8000_0000_0000_0003,
            state: AckState::Cc(AckCcState::Nscc(NsccState {
                service_time: 16,
                rc,
                rcv_cwnd_pend: CwndPenalty::new(64).unwrap(),
                rcvd_bytes: Units256::from_bytes_round_up(rcvd),
                ooo_count: 0,
            })),
        }
    }

    // ACK_CC (8), next_hdr none, flags m (0x20): 0b01000_0000_0100000 = 0x4020.
    // ack_psn_offset 2 (ACK_PSN 102), cack_psn 100, spdcid 7, dpdcid 5;
    // cc_type NSCC / cc_flags 0, mpr 1, sack_psn_offset 1 (SACK_BASE 101),
    // sack_bitmap 0x8000000000000003: bit 0 (LSB) = PSN 101, bit 1 = 102,
    // bit 63 = 164. NSCC state: service_time 16, byte 2 = 0x40
    // (rcv_cwnd_pend 64, rc 0), rcvd_bytes 12,288 B = 48 units, ooo 0.
    const ACK_CC_NSCC_48: [u8; 32] = [
        0x40, 0x20, 0x00, 0x02, 0x00, 0x00, 0x00, 0x64, 0x00, 0x07, 0x00, 0x05, // ACK
        0x00, 0x01, 0x00, 0x01, // cc_type|cc_flags, mpr, sack_psn_offset
        0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, // sack_bitmap
        0x00, 0x10, 0x40, 0x00, 0x00, 0x30, 0x00, 0x00, // ack_cc_state
    ];

    // The next report: 16,384 B = 64 units, rc set -> byte 2 = 0xc0.
    const ACK_CC_NSCC_64_RC: [u8; 32] = [
        0x40, 0x20, 0x00, 0x02, 0x00, 0x00, 0x00, 0x64, 0x00, 0x07, 0x00, 0x05, //
        0x00, 0x01, 0x00, 0x01, //
        0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, //
        0x00, 0x10, 0xc0, 0x00, 0x00, 0x40, 0x00, 0x00,
    ];

    #[test]
    fn golden_ack_cc_nscc() {
        for (bytes, rc, rcvd, units) in [
            (ACK_CC_NSCC_48, false, 12_288, 48),
            (ACK_CC_NSCC_64_RC, true, 16_384, 64),
        ] {
            let p = Packet::new_checked(&bytes[..]).unwrap();
            assert_eq!(p.mpr(), Some(1));
            assert_eq!(
                p.ack_cc_state_raw().map(|s| s.to_be_bytes()[5]),
                Some(units)
            );
            let r = Repr::parse(&p).unwrap();
            let want = Repr {
                m: true,
                ..base(AckExt::Cc(nscc(rc, rcvd)))
            };
            assert_eq!(r, want);
            assert_eq!(r.ty(), PdsType::AckCc);
            assert_eq!(r.ack_psn(), Some(Psn(102)));
            let mut b = [0xeeu8; 32];
            r.emit(&mut Packet::new_unchecked(&mut b[..]));
            assert_eq!(b, bytes);
        }
        let r = Repr::parse(&Packet::new_checked(&ACK_CC_NSCC_64_RC[..]).unwrap()).unwrap();
        assert_eq!(
            std::format!("{r}"),
            "ACK_CC ack_psn=102 cack_psn=100 spdcid=7 dpdcid=5 mpr=1 sack_base=101 \
             sack_bitmap=0x8000000000000003 NSCC service_time=16 rc rcv_cwnd_pend=64 \
             rcvd_bytes=64 ooo=0 m"
        );
    }

    #[test]
    fn sack_bitmap_lsb_is_sack_base() {
        let r = Repr::parse(&Packet::new_checked(&ACK_CC_NSCC_48[..]).unwrap()).unwrap();
        assert_eq!(r.sack_base(), Some(Psn(101)));
        let got: Vec<Psn> = r.sacked().collect();
        assert_eq!(got, [Psn(101), Psn(102), Psn(164)]);
        assert_eq!(r.sacked().len(), 3);
        assert!(r.is_sacked(Psn(101)));
        assert!(r.is_sacked(Psn(164)));
        assert!(!r.is_sacked(Psn(103)));
        assert!(!r.is_sacked(Psn(100)));
        assert!(!r.is_sacked(Psn(165)));
        assert_eq!(AckCc::mp_range(&nscc(false, 0)), 128);
    }

    #[test]
    fn sack_across_psn_wrap_with_negative_offset() {
        let cc = AckCc {
            sack_psn_offset: -2,
            sack_bitmap: 0b101,
            ..nscc(false, 0)
        };
        let r = Repr {
            cack_psn: Psn(0),
            ..base(AckExt::Cc(cc))
        };
        assert_eq!(r.sack_base(), Some(Psn(u32::MAX - 1)));
        let got: Vec<Psn> = r.sacked().collect();
        assert_eq!(got, [Psn(u32::MAX - 1), Psn(0)]);
        assert!(r.is_sacked(Psn(0)) && !r.is_sacked(Psn(u32::MAX)));
    }

    // ACK_CC (8), flags req=CLEAR (0x02): 0x4002; ack_psn_offset 0, cack_psn
    // 1000 (0x3e8), spdcid 7, dpdcid 5; cc_type CREDIT (0x10), mpr 0,
    // sack_psn_offset 0, bitmap 0; state: credit 25,000 (0x0061a8), rsvd, ooo 0.
    const ACK_CC_CREDIT: [u8; 32] = [
        0x40, 0x02, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8, 0x00, 0x07, 0x00, 0x05, //
        0x10, 0x00, 0x00, 0x00, //
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
        0x00, 0x61, 0xa8, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn golden_ack_cc_credit() {
        let r = Repr::parse(&Packet::new_checked(&ACK_CC_CREDIT[..]).unwrap()).unwrap();
        let want = Repr {
            req: AckRequest::Clear,
            ack_psn_offset: AckPsnField::Offset(0),
            cack_psn: Psn(1000),
            ..base(AckExt::Cc(AckCc {
                cc_flags: CcFlags::default(),
                mpr: 0,
                sack_psn_offset: 0,
                sack_bitmap: 0,
                state: AckState::Cc(AckCcState::Credit(CreditState {
                    credit: Credit24::new(25_000).unwrap(),
                    ooo_count: 0,
                })),
            }))
        };
        assert_eq!(r, want);
        let mut b = [0xeeu8; 32];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, ACK_CC_CREDIT);
        assert_eq!(
            std::format!("{r}"),
            "ACK_CC ack_psn=1000 cack_psn=1000 spdcid=7 dpdcid=5 mpr=0 sack_base=1000 \
             sack_bitmap=0x0000000000000000 CREDIT credit=25000 ooo=0 req=CLEAR"
        );
    }

    // ACK (7), flags epsn (0x40): 0b00111_0000_1000000 = 0x3840. A closing
    // ACK: ack_psn_offset 0, cack_psn 1000, spdcid 3, dpdcid 4, then the
    // Expected_PSN payload 1001 (0x3e9).
    const ACK_EPSN: [u8; 16] = [
        0x38, 0x40, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8, 0x00, 0x03, 0x00, 0x04, 0x00, 0x00, 0x03,
        0xe9,
    ];

    #[test]
    fn golden_ack_epsn() {
        let p = Packet::new_checked(&ACK_EPSN[..]).unwrap();
        assert_eq!(p.header_len(), 16);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.expected_psn(), Some(Psn(1001)));
        assert!(r.epsn());
        assert_eq!(r.buffer_len(), 16);
        let mut b = [0xeeu8; 16];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, ACK_EPSN);
        assert_eq!(
            std::format!("{r}"),
            "ACK ack_psn=1000 cack_psn=1000 spdcid=3 dpdcid=4 expected_psn=1001"
        );
        // Truncated: the EPSN flag announces 16 bytes.
        assert_eq!(
            Packet::new_checked(&ACK_EPSN[..12]).unwrap_err(),
            Error::truncated(Layer::Pds, 16, 12)
        );
    }

    // ACK (7), next_hdr response (4), flags retx|p|req=CLOSE (0x10|0x08|0x04):
    // 0b00111_0100_0011100 = 0x3a1c; probe_opaque 0xbeef, cack_psn 7, spdcid 1,
    // dpdcid 2.
    const ACK_PROBE: [u8; 12] = [
        0x3a, 0x1c, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x07, 0x00, 0x01, 0x00, 0x02,
    ];

    #[test]
    fn golden_ack_to_probe() {
        let r = Repr::parse(&Packet::new_checked(&ACK_PROBE[..]).unwrap()).unwrap();
        assert_eq!(r.ack_psn_offset, AckPsnField::ProbeOpaque(0xbeef));
        assert!(r.p() && r.retx && !r.m);
        assert_eq!(r.ack_psn(), None);
        assert_eq!(r.probe_opaque(), Some(0xbeef));
        assert_eq!(r.req, AckRequest::Close);
        assert_eq!(r.next_hdr, NextHeader::Response);
        assert_eq!(r.sacked().count(), 0);
        let mut b = [0u8; 12];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, ACK_PROBE);
        assert_eq!(
            std::format!("{r}"),
            "ACK probe_opaque=0xbeef cack_psn=7 spdcid=1 dpdcid=2 retx req=CLOSE next=UET_HDR_RESPONSE"
        );
    }

    #[test]
    fn golden_ack_ccx() {
        // ACK_CCX (9): 0x4800; ack_psn_offset -1, cack_psn 0x01020304, spdcid 1,
        // dpdcid 2; ccx_type 14 | cc_flags 3 = 0xe3, mpr 2, sack_psn_offset 0,
        // bitmap 1; 16 raw bytes 0x10..0x1f.
        let mut bytes = [0u8; 40];
        bytes[..24].copy_from_slice(&[
            0x48, 0x00, 0xff, 0xff, 0x01, 0x02, 0x03, 0x04, 0x00, 0x01, 0x00, 0x02, 0xe3, 0x02,
            0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 1,
        ]);
        for (i, b) in bytes[24..].iter_mut().enumerate() {
            *b = 0x10 + i as u8;
        }
        let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        let AckExt::Cc(cc) = r.ext else {
            panic!("expected CC")
        };
        assert_eq!(r.ty(), PdsType::AckCcx);
        assert_eq!(cc.cc_type(), 14);
        assert_eq!(cc.cc_flags.get(), 3);
        let AckState::Ccx(s) = cc.state else {
            panic!("expected CCX")
        };
        assert_eq!(s.ccx_type.get(), 14);
        assert_eq!(s.raw[0], 0x10);
        assert_eq!(s.raw[15], 0x1f);
        assert_eq!(r.ack_psn(), Some(Psn(0x0102_0303)));
        assert_eq!(r.buffer_len(), 40);
        let mut b = [0xeeu8; 40];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, bytes);
        assert_eq!(
            Packet::new_checked(&bytes[..32]).unwrap_err(),
            Error::truncated(Layer::Pds, 40, 32)
        );
    }

    #[test]
    fn reserved_flags_ignored_and_zeroed() {
        // 0x01 is reserved everywhere; 0x40 is reserved on ACK_CC.
        let mut bytes = ACK_CC_NSCC_48;
        bytes[1] |= 0x41;
        let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(r.expected_psn(), None);
        let mut b = [0u8; 32];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, ACK_CC_NSCC_48);
        // Reserved req value 3 round-trips.
        let mut bytes = ACK_PROBE;
        bytes[1] |= 0x06;
        let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(r.req, AckRequest::Reserved);
    }

    #[test]
    fn wrong_type_is_an_error() {
        let mut bytes = ACK_PROBE;
        bytes[0] = 0x50; // NACK
        let e = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap_err();
        assert_eq!((e.kind, e.offset), (ErrorKind::OutOfRange, 0));
    }

    proptest! {
        #[test]
        fn round_trip(r in repr()) {
            let mut b = [0x5au8; CCX_HEADER_LEN];
            let n = r.buffer_len();
            r.emit(&mut Packet::new_unchecked(&mut b[..n]));
            let p = Packet::new_checked(&b[..n]).unwrap();
            prop_assert_eq!(p.header_len(), n);
            prop_assert_eq!(Repr::parse(&p).unwrap(), r);
        }

        #[test]
        fn sacked_agrees_with_is_sacked(r in repr(), probe: u32) {
            for psn in r.sacked() {
                prop_assert!(r.is_sacked(psn));
            }
            let bits = r.cc().map_or(0, |c| c.sack_bitmap);
            prop_assert_eq!(r.sacked().count() as u32, bits.count_ones());
            if r.is_sacked(Psn(probe)) {
                prop_assert!(r.sacked().any(|p| p == Psn(probe)));
            }
        }
    }
}
