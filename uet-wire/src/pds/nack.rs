//! NACK (16 B) and NACK_CCX (32 B) (`docs/protocol-notes.md` §2.8).
//!
//! ```text
//! 0      prologue      type 10 / 12 | next_hdr (normally NONE) | flags (m 0x20, retx 0x10, nt 0x08)
//! 2      nack_code     u8, see `nack_code`
//! 3      vendor_code   u8
//! 4      nack_psn      u32; with nt = 1 (RUDI): nack_pkt_id
//! 8      spdcid        u16 (0 with nt = 1 or when no PDC exists, e.g. NO_PDC_AVAIL)
//! 10     dpdcid        u16 (0 with nt = 1)
//! 12     payload       u32, meaning per code (e.g. the new Start_PSN of NEW_START_PSN)
//! 16     nccx_type:4 | nack_ccx_state1:60 | nack_ccx_state2:64    (NACK_CCX only)
//! ```
//!
//! NACK_CCX is 32 B per REFPROV and WS (XDP2's 24 B is wrong, §9 item 4).

use core::fmt;

use super::cc_state::CcxType;
use super::nack_code::NackCode;
use super::prologue::{NextHeader, PdsType};
use super::{
    check_at_least, flags_of, fmt_flag, fmt_next_hdr, next_hdr_raw_of, parse_next_hdr,
    set_flags_of, set_next_hdr_raw_of, set_prologue, set_type_raw_of, type_raw_of, wrong_type,
};
use crate::error::Result;
use crate::field::{set_u16, set_u32, set_u64, u16_at, u32_at, u64_at};
use crate::types::{PdcId, Psn};

/// Length of a NACK.
pub const HEADER_LEN: usize = 16;
/// Length of a NACK_CCX.
pub const CCX_HEADER_LEN: usize = 32;

/// NACK flag bits (§2.4).
pub mod flags {
    /// The NACKed packet was ECN-CE marked.
    pub const M: u8 = 0x20;
    /// NACK to a retransmission.
    pub const RETX: u8 = 0x10;
    /// NACK type: 0 = RUD/ROD (`nack_psn`), 1 = RUDI (`nack_pkt_id`).
    pub const NT: u8 = 0x08;
}

mod field {
    pub(super) const NACK_CODE: usize = 2;
    pub(super) const VENDOR_CODE: usize = 3;
    pub(super) const NACK_PSN: usize = 4;
    pub(super) const SPDCID: usize = 8;
    pub(super) const DPDCID: usize = 10;
    pub(super) const PAYLOAD: usize = 12;
    pub(super) const CCX_WORD1: usize = 16;
    pub(super) const CCX_WORD2: usize = 24;
    pub(super) const NCCX_TYPE_SHIFT: u32 = 60;
}

bits_newtype!(
    /// `nack_ccx_state1`: the 60 bits after `nccx_type`.
    NackCcxState1, u64, 60
);

/// The NACK_CCX extension: layout undefined in 1.0, kept raw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NackCcxState {
    /// `nccx_type`.
    pub nccx_type: CcxType,
    /// `nack_ccx_state1` (60 bits).
    pub state1: NackCcxState1,
    /// `nack_ccx_state2` (64 bits).
    pub state2: u64,
}

/// Bytes 4-7 of a NACK. The variant *is* the `nt` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NackTarget {
    /// `nt` = 0 (RUD/ROD): `nack_psn`, the PSN that triggered the NACK.
    Psn(Psn),
    /// `nt` = 1 (RUDI): `nack_pkt_id`, the RUDI packet ID.
    PktId(u32),
}

/// A read/write view of a NACK or NACK_CCX header.
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

    /// Checks that the buffer holds the whole header its `type` announces.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        check_at_least(b, super::prologue::HEADER_LEN)?;
        check_at_least(b, self.header_len())
    }

    /// The header length the `type` announces. Never panics.
    pub fn header_len(&self) -> usize {
        if self.has_ccx() {
            CCX_HEADER_LEN
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

    /// Whether the type is NACK_CCX. Never panics.
    pub fn has_ccx(&self) -> bool {
        self.pds_type_raw() == PdsType::NackCcx.code()
    }

    /// The raw 4-bit `next_hdr`.
    pub fn next_hdr_raw(&self) -> u8 {
        next_hdr_raw_of(self.buffer.as_ref())
    }

    /// The raw 7-bit `flags`.
    pub fn flags(&self) -> u8 {
        flags_of(self.buffer.as_ref())
    }

    /// The `m` flag.
    pub fn m(&self) -> bool {
        self.flags() & flags::M != 0
    }

    /// The `retx` flag.
    pub fn retx(&self) -> bool {
        self.flags() & flags::RETX != 0
    }

    /// The `nt` flag (1 = RUDI).
    pub fn nt(&self) -> bool {
        self.flags() & flags::NT != 0
    }

    /// `nack_code`, raw.
    pub fn nack_code_raw(&self) -> u8 {
        self.buffer.as_ref()[field::NACK_CODE]
    }

    /// `nack_code`.
    pub fn nack_code(&self) -> NackCode {
        NackCode::from_u8(self.nack_code_raw())
    }

    /// `vendor_code`.
    pub fn vendor_code(&self) -> u8 {
        self.buffer.as_ref()[field::VENDOR_CODE]
    }

    /// Bytes 4-7 raw (`nack_psn` or `nack_pkt_id`).
    pub fn nack_psn_raw(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::NACK_PSN)
    }

    /// Bytes 4-7 decoded according to `nt`.
    pub fn target(&self) -> NackTarget {
        if self.nt() {
            NackTarget::PktId(self.nack_psn_raw())
        } else {
            NackTarget::Psn(Psn(self.nack_psn_raw()))
        }
    }

    /// `spdcid` (0 = `None`).
    pub fn spdcid(&self) -> Option<PdcId> {
        PdcId::new(u16_at(self.buffer.as_ref(), field::SPDCID))
    }

    /// `dpdcid` (0 = `None`).
    pub fn dpdcid(&self) -> Option<PdcId> {
        PdcId::new(u16_at(self.buffer.as_ref(), field::DPDCID))
    }

    /// `payload`.
    pub fn payload(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::PAYLOAD)
    }

    /// The NACK_CCX extension.
    pub fn ccx(&self) -> Option<NackCcxState> {
        let b = self.buffer.as_ref();
        if !self.has_ccx() || b.len() < CCX_HEADER_LEN {
            return None;
        }
        let w1 = u64_at(b, field::CCX_WORD1);
        Some(NackCcxState {
            nccx_type: CcxType::from_masked((w1 >> field::NCCX_TYPE_SHIFT) as u8),
            state1: NackCcxState1::from_masked(w1),
            state2: u64_at(b, field::CCX_WORD2),
        })
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

    /// Sets `nack_code`.
    pub fn set_nack_code(&mut self, v: NackCode) {
        self.buffer.as_mut()[field::NACK_CODE] = v.code();
    }

    /// Sets `vendor_code`.
    pub fn set_vendor_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::VENDOR_CODE] = v;
    }

    /// Sets bytes 4-7 raw (the `nt` flag is not touched).
    pub fn set_nack_psn_raw(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::NACK_PSN, v);
    }

    /// Sets `spdcid`.
    pub fn set_spdcid(&mut self, v: Option<PdcId>) {
        set_u16(self.buffer.as_mut(), field::SPDCID, PdcId::to_wire(v));
    }

    /// Sets `dpdcid`.
    pub fn set_dpdcid(&mut self, v: Option<PdcId>) {
        set_u16(self.buffer.as_mut(), field::DPDCID, PdcId::to_wire(v));
    }

    /// Sets `payload`.
    pub fn set_payload(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::PAYLOAD, v);
    }

    /// Sets the NACK_CCX extension.
    ///
    /// # Panics
    ///
    /// If the buffer is shorter than 32 bytes.
    pub fn set_ccx(&mut self, v: NackCcxState) {
        let w1 = (u64::from(v.nccx_type.get()) << field::NCCX_TYPE_SHIFT) | v.state1.get();
        set_u64(self.buffer.as_mut(), field::CCX_WORD1, w1);
        set_u64(self.buffer.as_mut(), field::CCX_WORD2, v.state2);
    }
}

/// A parsed NACK or NACK_CCX header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The SES header that follows (normally `None`).
    pub next_hdr: NextHeader,
    /// `m`: the NACKed packet was ECN-CE marked.
    pub m: bool,
    /// `retx`: NACK to a retransmission.
    pub retx: bool,
    /// `nack_psn` or `nack_pkt_id` (which sets `nt`).
    pub target: NackTarget,
    /// The NACK code.
    pub code: NackCode,
    /// Vendor-specific code.
    pub vendor_code: u8,
    /// Source PDC ID (0 = `None`, e.g. NO_PDC_AVAIL or RUDI).
    pub spdcid: Option<PdcId>,
    /// Destination PDC ID (0 = `None`).
    pub dpdcid: Option<PdcId>,
    /// Code-specific payload (e.g. the new Start_PSN for NEW_START_PSN).
    pub payload: u32,
    /// The NACK_CCX extension: `Some` for type 12.
    pub ccx: Option<NackCcxState>,
}

impl Repr {
    /// Parses a NACK header. Reserved flags are ignored.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        packet.check_len()?;
        let ty = packet.pds_type_raw();
        if ty != PdsType::Nack.code() && ty != PdsType::NackCcx.code() {
            return Err(wrong_type(ty));
        }
        Ok(Self {
            next_hdr: parse_next_hdr(packet.next_hdr_raw())?,
            m: packet.m(),
            retx: packet.retx(),
            target: packet.target(),
            code: packet.nack_code(),
            vendor_code: packet.vendor_code(),
            spdcid: packet.spdcid(),
            dpdcid: packet.dpdcid(),
            payload: packet.payload(),
            ccx: packet.ccx(),
        })
    }

    /// The packet type.
    #[must_use]
    pub const fn ty(&self) -> PdsType {
        if self.ccx.is_some() {
            PdsType::NackCcx
        } else {
            PdsType::Nack
        }
    }

    /// The `nt` flag (derived: RUDI NACK).
    #[must_use]
    pub const fn nt(&self) -> bool {
        matches!(self.target, NackTarget::PktId(_))
    }

    /// The NACKed PSN (RUD/ROD only).
    #[must_use]
    pub const fn nack_psn(&self) -> Option<Psn> {
        match self.target {
            NackTarget::Psn(p) => Some(p),
            NackTarget::PktId(_) => None,
        }
    }

    /// The NACKed RUDI packet ID (RUDI only).
    #[must_use]
    pub const fn nack_pkt_id(&self) -> Option<u32> {
        match self.target {
            NackTarget::PktId(p) => Some(p),
            NackTarget::Psn(_) => None,
        }
    }

    /// The 7-bit `flags` this header is emitted with.
    #[must_use]
    pub const fn flags(&self) -> u8 {
        (if self.m { flags::M } else { 0 })
            | (if self.retx { flags::RETX } else { 0 })
            | (if self.nt() { flags::NT } else { 0 })
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        if self.ccx.is_some() {
            CCX_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Writes the header into a buffer of at least `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_prologue(self.ty().code(), self.next_hdr.code(), self.flags());
        packet.set_nack_code(self.code);
        packet.set_vendor_code(self.vendor_code);
        packet.set_nack_psn_raw(match self.target {
            NackTarget::Psn(p) => p.0,
            NackTarget::PktId(id) => id,
        });
        packet.set_spdcid(self.spdcid);
        packet.set_dpdcid(self.dpdcid);
        packet.set_payload(self.payload);
        if let Some(ccx) = self.ccx {
            packet.set_ccx(ccx);
        }
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.ty(), self.code)?;
        match self.target {
            NackTarget::Psn(p) => write!(f, " psn={p}")?,
            NackTarget::PktId(id) => write!(f, " pkt_id={id}")?,
        }
        write!(
            f,
            " spdcid={} dpdcid={}",
            PdcId::to_wire(self.spdcid),
            PdcId::to_wire(self.dpdcid)
        )?;
        if self.payload != 0 {
            write!(f, " payload={:#010x}", self.payload)?;
        }
        if self.vendor_code != 0 {
            write!(f, " vendor={:#04x}", self.vendor_code)?;
        }
        if let Some(c) = self.ccx {
            write!(
                f,
                " nccx_type={} state1={:#x} state2={:#x}",
                c.nccx_type,
                c.state1.get(),
                c.state2
            )?;
        }
        fmt_flag(f, self.m, "m")?;
        fmt_flag(f, self.retx, "retx")?;
        fmt_next_hdr(f, self.next_hdr)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::error::{Error, Layer};
    use crate::pds::req::tests::{next_hdr, pdc_id};
    use proptest::prelude::*;

    pub(crate) fn repr() -> impl Strategy<Value = Repr> {
        (
            next_hdr(),
            any::<bool>(),
            any::<bool>(),
            prop_oneof![
                any::<u32>().prop_map(|p| NackTarget::Psn(Psn(p))),
                any::<u32>().prop_map(NackTarget::PktId),
            ],
            any::<u8>().prop_map(NackCode::from_u8),
            any::<u8>(),
            pdc_id(),
            pdc_id(),
            any::<u32>(),
            proptest::option::of((any::<u8>(), any::<u64>(), any::<u64>()).prop_map(
                |(t, s1, s2)| NackCcxState {
                    nccx_type: CcxType::from_masked(t),
                    state1: NackCcxState1::from_masked(s1),
                    state2: s2,
                },
            )),
        )
            .prop_map(
                |(next_hdr, m, retx, target, code, vendor_code, spdcid, dpdcid, payload, ccx)| {
                    Repr {
                        next_hdr,
                        m,
                        retx,
                        target,
                        code,
                        vendor_code,
                        spdcid,
                        dpdcid,
                        payload,
                        ccx,
                    }
                },
            )
    }

    // NACK (10), next_hdr none, flags 0: 0b01010_0000_0000000 = 0x5000.
    // NO_PDC_AVAIL (0x04), vendor 0, nack_psn 336, spdcid 0 (no PDC was
    // created), dpdcid 5 (the initiator's PDC), payload 0.
    const NACK_NO_PDC: [u8; 16] = [
        0x50, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01, 0x50, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
        0x00,
    ];

    // NACK (10), flags m|nt (0x28): 0x5028. Unknown code 0x42, vendor 0x99,
    // nack_pkt_id 0xdeadbeef, spdcid 0, dpdcid 0, payload 0x12345678.
    const NACK_RUDI_UNKNOWN: [u8; 16] = [
        0x50, 0x28, 0x42, 0x99, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x00, 0x12, 0x34, 0x56,
        0x78,
    ];

    #[test]
    fn golden_no_pdc_avail() {
        let r = Repr::parse(&Packet::new_checked(&NACK_NO_PDC[..]).unwrap()).unwrap();
        assert_eq!(
            r,
            Repr {
                next_hdr: NextHeader::None,
                m: false,
                retx: false,
                target: NackTarget::Psn(Psn(336)),
                code: NackCode::NoPdcAvail,
                vendor_code: 0,
                spdcid: None,
                dpdcid: PdcId::new(5),
                payload: 0,
                ccx: None,
            }
        );
        assert_eq!(r.nack_psn(), Some(Psn(336)));
        assert_eq!(r.nack_pkt_id(), None);
        let mut b = [0xeeu8; 16];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, NACK_NO_PDC);
        assert_eq!(
            std::format!("{r}"),
            "NACK NO_PDC_AVAIL psn=336 spdcid=0 dpdcid=5"
        );
    }

    #[test]
    fn golden_unknown_code_rudi() {
        let p = Packet::new_checked(&NACK_RUDI_UNKNOWN[..]).unwrap();
        assert!(p.nt());
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.code, NackCode::Unknown(0x42));
        assert_eq!(r.target, NackTarget::PktId(0xdead_beef));
        assert_eq!(r.nack_psn(), None);
        assert!(r.m && r.nt());
        assert_eq!((r.spdcid, r.dpdcid), (None, None));
        assert_eq!(r.payload, 0x1234_5678);
        let mut b = [0u8; 16];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, NACK_RUDI_UNKNOWN);
        assert_eq!(
            std::format!("{r}"),
            "NACK UNKNOWN(0x42) pkt_id=3735928559 spdcid=0 dpdcid=0 payload=0x12345678 vendor=0x99 m"
        );
    }

    #[test]
    fn golden_nack_ccx() {
        // NACK_CCX (12): 0x6000, PSN_OOR_WINDOW (0x0b), psn 1, spdcid 2,
        // dpdcid 3, payload 0; nccx_type 15 | state1 0x0123456789abcde,
        // state2 0x1122334455667788.
        let bytes: [u8; 32] = [
            0x60, 0x00, 0x0b, 0x00, 0, 0, 0, 1, 0, 2, 0, 3, 0, 0, 0, 0, //
            0xf0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, //
            0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
        ];
        let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(r.ty(), PdsType::NackCcx);
        assert_eq!(r.code, NackCode::PsnOorWindow);
        let c = r.ccx.unwrap();
        assert_eq!(c.nccx_type.get(), 15);
        assert_eq!(c.state1.get(), 0x0012_3456_789a_bcde);
        assert_eq!(c.state2, 0x1122_3344_5566_7788);
        let mut b = [0xeeu8; 32];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, bytes);
        assert_eq!(
            Packet::new_checked(&bytes[..16]).unwrap_err(),
            Error::truncated(Layer::Pds, 32, 16)
        );
    }

    #[test]
    fn reserved_flags_ignored() {
        let mut b = NACK_NO_PDC;
        b[1] |= 0x47;
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        let mut out = [0u8; 16];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, NACK_NO_PDC);
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
    }
}
