//! SES extension headers (`docs/protocol-notes.md` §4.4), which follow a
//! standard request header for some opcodes:
//!
//! ```text
//! atomic (4 B)             atomic_opcode:8 | atomic_datatype:8 | semantic_control:8 | rsvd:8
//! compare-and-swap (36 B)  atomic (4 B) | compare_value:128 | swap_value:128
//! rendezvous (24 B)        eager_length:32
//!                          ri_generation:8 | pid_on_fep:12 | resource_index:12
//!                          read_offset:64
//!                          read_memory_key:64
//! ```
//!
//! Which extension follows is decided by [`ExtKind::for_request`]: the
//! rendezvous opcodes take the rendezvous extension; the atomic-carrying
//! opcodes take the compare-and-swap extension when the atomic opcode (the
//! first byte of the extension) is a two-operand one
//! ([`AtomicOpcode::is_compare_swap`]), the 4-byte atomic extension otherwise.
//!
//! The rendezvous word 2 follows REFPROV and XDP2 (`ri_generation` 8,
//! `pid_on_fep` 12, `resource_index` 12), not Wireshark (§9 item 8).
//! `semantic_control` uses the values 0x01 (cacheable) and 0x02 (CPU
//! coherent) of REFPROV and Wireshark, not XDP2's MSB bits. Reserved bits are
//! ignored on parse and written as zero.

use core::fmt;

use crate::error::{Error, Layer, Result};
use crate::field::{set_u32, set_u64, set_u128, u32_at, u64_at, u128_at};
use crate::types::{PidOnFep, ResourceIndex, RiGeneration};

use super::atomic::{AtomicDatatype, AtomicOpcode};
use super::opcode::Opcode;

/// Length of the atomic extension header.
pub const ATOMIC_EXT_LEN: usize = 4;
/// Length of the compare-and-swap extension header.
pub const CAS_EXT_LEN: usize = 36;
/// Length of the rendezvous extension header.
pub const RENDEZVOUS_EXT_LEN: usize = 24;

mod field {
    pub(super) const ATOMIC_OPCODE: usize = 0;
    pub(super) const ATOMIC_DATATYPE: usize = 1;
    pub(super) const SEMANTIC_CONTROL: usize = 2;
    pub(super) const ATOMIC_RSVD: usize = 3;
    pub(super) const COMPARE_VALUE: usize = 4;
    pub(super) const SWAP_VALUE: usize = 20;

    pub(super) const EAGER_LENGTH: usize = 0;
    pub(super) const READ_TARGET: usize = 4;
    pub(super) const READ_OFFSET: usize = 8;
    pub(super) const READ_MEMORY_KEY: usize = 16;

    pub(super) const CACHEABLE: u8 = 0x01;
    pub(super) const CPU_COHERENT: u8 = 0x02;
    pub(super) const GEN_SHIFT: u32 = 24;
    pub(super) const PID_SHIFT: u32 = 12;
    pub(super) const ID12_MASK: u32 = 0x0fff;
}

/// Which extension header follows a standard request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtKind {
    /// The 4-byte atomic extension.
    Atomic,
    /// The 36-byte compare-and-swap extension.
    CompareSwap,
    /// The 24-byte rendezvous extension.
    Rendezvous,
}

impl ExtKind {
    /// The extension carried by a standard request with `opcode`, whose
    /// extension starts with atomic opcode `amo` (`None` if unknown: only
    /// consulted for atomic-carrying opcodes, where `None` gives `Atomic`).
    #[must_use]
    pub const fn for_request(opcode: Opcode, amo: Option<AtomicOpcode>) -> Option<Self> {
        if opcode.has_rendezvous_ext() {
            Some(Self::Rendezvous)
        } else if opcode.has_atomic_ext() {
            match amo {
                Some(a) if a.is_compare_swap() => Some(Self::CompareSwap),
                _ => Some(Self::Atomic),
            }
        } else {
            None
        }
    }

    /// The length of the extension header.
    #[must_use]
    pub const fn header_len(self) -> usize {
        match self {
            Self::Atomic => ATOMIC_EXT_LEN,
            Self::CompareSwap => CAS_EXT_LEN,
            Self::Rendezvous => RENDEZVOUS_EXT_LEN,
        }
    }

    /// A short name (`atomic`, `compare-and-swap`, `rendezvous`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Atomic => "atomic",
            Self::CompareSwap => "compare-and-swap",
            Self::Rendezvous => "rendezvous",
        }
    }
}

impl fmt::Display for ExtKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Generates the accessors of the 4 atomic bytes (at offset 0 of both the
/// atomic and the compare-and-swap extension).
macro_rules! atomic_fields {
    ($name:ident) => {
        impl<T: AsRef<[u8]>> $name<T> {
            /// The raw 8-bit `atomic_opcode`.
            pub fn atomic_opcode(&self) -> u8 {
                self.buffer.as_ref()[field::ATOMIC_OPCODE]
            }

            /// The raw 8-bit `atomic_datatype`.
            pub fn atomic_datatype(&self) -> u8 {
                self.buffer.as_ref()[field::ATOMIC_DATATYPE]
            }

            /// The raw 8-bit `semantic_control` (0x01 cacheable, 0x02 CPU
            /// coherent).
            pub fn semantic_control(&self) -> u8 {
                self.buffer.as_ref()[field::SEMANTIC_CONTROL]
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            /// Writes the four atomic bytes (the reserved byte becomes 0).
            pub fn set_atomic(&mut self, opcode: u8, datatype: u8, semantic_control: u8) {
                let b = self.buffer.as_mut();
                b[field::ATOMIC_OPCODE] = opcode;
                b[field::ATOMIC_DATATYPE] = datatype;
                b[field::SEMANTIC_CONTROL] = semantic_control;
                b[field::ATOMIC_RSVD] = 0;
            }
        }
    };
}

// ---------------------------------------------------------------------------
// Atomic extension
// ---------------------------------------------------------------------------

ses_packet!(
    /// A read/write view of the atomic extension header (4 B).
    AtomicExtPacket,
    ATOMIC_EXT_LEN
);
atomic_fields!(AtomicExtPacket);

/// A parsed atomic extension header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicExtRepr {
    /// The atomic operation.
    pub opcode: AtomicOpcode,
    /// The element type.
    pub datatype: AtomicDatatype,
    /// `semantic_control` 0x01: the target memory is cacheable.
    pub cacheable: bool,
    /// `semantic_control` 0x02: the operation must be coherent with the CPU.
    pub cpu_coherent: bool,
}

impl AtomicExtRepr {
    /// Parses the atomic extension (never fails once the length is checked).
    pub fn parse<T: AsRef<[u8]>>(packet: &AtomicExtPacket<T>) -> Result<Self> {
        Ok(Self::from_bytes(
            packet.atomic_opcode(),
            packet.atomic_datatype(),
            packet.semantic_control(),
        ))
    }

    fn from_bytes(opcode: u8, datatype: u8, semantic_control: u8) -> Self {
        Self {
            opcode: AtomicOpcode::from_u8(opcode),
            datatype: AtomicDatatype::from_u8(datatype),
            cacheable: semantic_control & field::CACHEABLE != 0,
            cpu_coherent: semantic_control & field::CPU_COHERENT != 0,
        }
    }

    /// The `semantic_control` byte.
    #[must_use]
    pub const fn semantic_control(&self) -> u8 {
        (if self.cacheable { field::CACHEABLE } else { 0 })
            | (if self.cpu_coherent {
                field::CPU_COHERENT
            } else {
                0
            })
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        ATOMIC_EXT_LEN
    }

    /// Writes the extension.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut AtomicExtPacket<T>) {
        packet.set_atomic(
            self.opcode.code(),
            self.datatype.code(),
            self.semantic_control(),
        );
    }
}

impl fmt::Display for AtomicExtRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "amo={} dt={}", self.opcode, self.datatype)?;
        if self.cacheable {
            f.write_str(" cacheable")?;
        }
        if self.cpu_coherent {
            f.write_str(" coherent")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Compare-and-swap extension
// ---------------------------------------------------------------------------

ses_packet!(
    /// A read/write view of the compare-and-swap extension header (36 B).
    CasExtPacket,
    CAS_EXT_LEN
);
atomic_fields!(CasExtPacket);

impl<T: AsRef<[u8]>> CasExtPacket<T> {
    /// The 128-bit `compare_value` (big endian; the mask for MSWAP).
    pub fn compare_value(&self) -> u128 {
        u128_at(self.buffer.as_ref(), field::COMPARE_VALUE)
    }

    /// The 128-bit `swap_value` (big endian).
    pub fn swap_value(&self) -> u128 {
        u128_at(self.buffer.as_ref(), field::SWAP_VALUE)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> CasExtPacket<T> {
    /// Writes `compare_value`.
    pub fn set_compare_value(&mut self, v: u128) {
        set_u128(self.buffer.as_mut(), field::COMPARE_VALUE, v);
    }

    /// Writes `swap_value`.
    pub fn set_swap_value(&mut self, v: u128) {
        set_u128(self.buffer.as_mut(), field::SWAP_VALUE, v);
    }
}

/// A parsed compare-and-swap extension header: the atomic extension followed
/// by the two 16-byte operands. Operands narrower than 16 bytes sit in the
/// low-order bytes of the big-endian 128-bit value \[I\].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CasExtRepr {
    /// The atomic part (its opcode is normally a CSWAP variant or MSWAP).
    pub atomic: AtomicExtRepr,
    /// `compare_value` (the mask for MSWAP).
    pub compare: u128,
    /// `swap_value`.
    pub swap: u128,
}

impl CasExtRepr {
    /// Parses the compare-and-swap extension (never fails once the length is
    /// checked).
    pub fn parse<T: AsRef<[u8]>>(packet: &CasExtPacket<T>) -> Result<Self> {
        Ok(Self {
            atomic: AtomicExtRepr::from_bytes(
                packet.atomic_opcode(),
                packet.atomic_datatype(),
                packet.semantic_control(),
            ),
            compare: packet.compare_value(),
            swap: packet.swap_value(),
        })
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        CAS_EXT_LEN
    }

    /// Writes the extension.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut CasExtPacket<T>) {
        packet.set_atomic(
            self.atomic.opcode.code(),
            self.atomic.datatype.code(),
            self.atomic.semantic_control(),
        );
        packet.set_compare_value(self.compare);
        packet.set_swap_value(self.swap);
    }
}

impl fmt::Display for CasExtRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} cmp={:#x} swap={:#x}",
            self.atomic, self.compare, self.swap
        )
    }
}

// ---------------------------------------------------------------------------
// Rendezvous extension
// ---------------------------------------------------------------------------

ses_packet!(
    /// A read/write view of the rendezvous extension header (24 B).
    RendezvousExtPacket,
    RENDEZVOUS_EXT_LEN
);

impl<T: AsRef<[u8]>> RendezvousExtPacket<T> {
    /// The 32-bit `eager_length`: bytes sent eagerly with this request.
    pub fn eager_length(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::EAGER_LENGTH)
    }

    fn read_target(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::READ_TARGET)
    }

    /// The 8-bit `ri_generation` of the read-back source.
    pub fn ri_generation(&self) -> u8 {
        (self.read_target() >> field::GEN_SHIFT) as u8
    }

    /// The 12-bit `pid_on_fep` of the read-back source.
    pub fn pid_on_fep(&self) -> u16 {
        ((self.read_target() >> field::PID_SHIFT) & field::ID12_MASK) as u16
    }

    /// The 12-bit `resource_index` of the read-back source.
    pub fn resource_index(&self) -> u16 {
        (self.read_target() & field::ID12_MASK) as u16
    }

    /// The 64-bit `read_offset`.
    pub fn read_offset(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::READ_OFFSET)
    }

    /// The 64-bit `read_memory_key` (Wireshark: "read match bits").
    pub fn read_memory_key(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::READ_MEMORY_KEY)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RendezvousExtPacket<T> {
    /// Writes `eager_length`.
    pub fn set_eager_length(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::EAGER_LENGTH, v);
    }

    /// Writes word 2: `ri_generation`, `pid_on_fep` and `resource_index`
    /// (each masked to 12 bits).
    pub fn set_read_target(&mut self, ri_generation: u8, pid_on_fep: u16, resource_index: u16) {
        let w = (u32::from(ri_generation) << field::GEN_SHIFT)
            | ((u32::from(pid_on_fep) & field::ID12_MASK) << field::PID_SHIFT)
            | (u32::from(resource_index) & field::ID12_MASK);
        set_u32(self.buffer.as_mut(), field::READ_TARGET, w);
    }

    /// Writes `read_offset`.
    pub fn set_read_offset(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::READ_OFFSET, v);
    }

    /// Writes `read_memory_key`.
    pub fn set_read_memory_key(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::READ_MEMORY_KEY, v);
    }
}

/// A parsed rendezvous extension header: where the target reads the rest
/// of the message from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RendezvousExtRepr {
    /// `eager_length`: bytes carried eagerly.
    pub eager_length: u32,
    /// `ri_generation` of the read-back source.
    pub ri_generation: RiGeneration,
    /// `pid_on_fep` of the read-back source.
    pub pid_on_fep: PidOnFep,
    /// `resource_index` of the read-back source.
    pub resource_index: ResourceIndex,
    /// `read_offset`.
    pub read_offset: u64,
    /// `read_memory_key`.
    pub read_memory_key: u64,
}

impl RendezvousExtRepr {
    /// Parses the rendezvous extension (never fails once the length is
    /// checked).
    pub fn parse<T: AsRef<[u8]>>(packet: &RendezvousExtPacket<T>) -> Result<Self> {
        Ok(Self {
            eager_length: packet.eager_length(),
            ri_generation: RiGeneration::from_masked(packet.ri_generation()),
            pid_on_fep: PidOnFep::from_masked(packet.pid_on_fep()),
            resource_index: ResourceIndex::from_masked(packet.resource_index()),
            read_offset: packet.read_offset(),
            read_memory_key: packet.read_memory_key(),
        })
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        RENDEZVOUS_EXT_LEN
    }

    /// Writes the extension.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut RendezvousExtPacket<T>) {
        packet.set_eager_length(self.eager_length);
        packet.set_read_target(
            self.ri_generation.get(),
            self.pid_on_fep.get(),
            self.resource_index.get(),
        );
        packet.set_read_offset(self.read_offset);
        packet.set_read_memory_key(self.read_memory_key);
    }
}

impl fmt::Display for RendezvousExtRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "eager={} rd_pid={} rd_ri={} rd_gen={} rd_off={} rd_key={:#x}",
            self.eager_length,
            self.pid_on_fep,
            self.resource_index,
            self.ri_generation,
            self.read_offset,
            self.read_memory_key
        )
    }
}

// ---------------------------------------------------------------------------
// Any extension
// ---------------------------------------------------------------------------

/// One parsed extension header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtRepr {
    /// The atomic extension.
    Atomic(AtomicExtRepr),
    /// The compare-and-swap extension.
    CompareSwap(CasExtRepr),
    /// The rendezvous extension.
    Rendezvous(RendezvousExtRepr),
}

impl ExtRepr {
    /// Parses an extension of the given kind from the start of `bytes`.
    /// Offsets of errors are relative to the start of the extension.
    pub fn parse(kind: ExtKind, bytes: &[u8]) -> Result<Self> {
        Ok(match kind {
            ExtKind::Atomic => {
                Self::Atomic(AtomicExtRepr::parse(&AtomicExtPacket::new_checked(bytes)?)?)
            }
            ExtKind::CompareSwap => {
                Self::CompareSwap(CasExtRepr::parse(&CasExtPacket::new_checked(bytes)?)?)
            }
            ExtKind::Rendezvous => Self::Rendezvous(RendezvousExtRepr::parse(
                &RendezvousExtPacket::new_checked(bytes)?,
            )?),
        })
    }

    /// Which kind of extension this is.
    #[must_use]
    pub const fn kind(&self) -> ExtKind {
        match self {
            Self::Atomic(_) => ExtKind::Atomic,
            Self::CompareSwap(_) => ExtKind::CompareSwap,
            Self::Rendezvous(_) => ExtKind::Rendezvous,
        }
    }

    /// The atomic opcode, for the atomic and compare-and-swap extensions.
    #[must_use]
    pub const fn atomic_opcode(&self) -> Option<AtomicOpcode> {
        match self {
            Self::Atomic(a) => Some(a.opcode),
            Self::CompareSwap(c) => Some(c.atomic.opcode),
            Self::Rendezvous(_) => None,
        }
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        self.kind().header_len()
    }

    /// Writes the extension at the start of `buf`.
    ///
    /// # Panics
    ///
    /// If `buf` is shorter than [`ExtRepr::buffer_len`].
    pub fn emit(&self, buf: &mut [u8]) {
        let buf = &mut buf[..self.buffer_len()];
        match self {
            Self::Atomic(a) => a.emit(&mut AtomicExtPacket::new_unchecked(buf)),
            Self::CompareSwap(c) => c.emit(&mut CasExtPacket::new_unchecked(buf)),
            Self::Rendezvous(r) => r.emit(&mut RendezvousExtPacket::new_unchecked(buf)),
        }
    }
}

impl fmt::Display for ExtRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Atomic(a) => fmt::Display::fmt(a, f),
            Self::CompareSwap(c) => fmt::Display::fmt(c, f),
            Self::Rendezvous(r) => fmt::Display::fmt(r, f),
        }
    }
}

/// An extension that does not fit the opcode it was paired with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExtMismatch {
    /// The extension the opcode (and atomic opcode) call for.
    pub expected: Option<ExtKind>,
    /// The extension that was supplied.
    pub found: Option<ExtKind>,
}

impl fmt::Display for ExtMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |k: Option<ExtKind>| k.map_or("no", ExtKind::name);
        write!(
            f,
            "request needs {} extension, got {} extension",
            name(self.expected),
            name(self.found)
        )
    }
}

impl core::error::Error for ExtMismatch {}

/// The error for an extension cut short, relative to the SES header start.
pub(super) fn truncated_ext(header_len: usize, kind: ExtKind, have: usize) -> Error {
    Error::truncated(Layer::Ses, header_len + kind.header_len(), have)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ses::testutil::{arb_atomic_ext, arb_cas_ext, arb_ext, arb_rendezvous_ext};
    use proptest::prelude::*;

    /// SUM on UINT64, cacheable.
    const ATOMIC_SUM_U64: [u8; 4] = [0x02, 0x07, 0x01, 0x00];

    /// CSWAP on UINT64, compare 5, swap 9.
    #[rustfmt::skip]
    const CSWAP_U64: [u8; 36] = [
        0x0d, 0x07, 0x00, 0x00,                         // CSWAP UINT64, no control
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, // compare_value 5
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, // swap_value 9
    ];

    /// Rendezvous: eager 8192, read from gen 3 pid 0xabc ri 0x123.
    #[rustfmt::skip]
    const RNDV: [u8; 24] = [
        0x00, 0x00, 0x20, 0x00,             // eager_length 8192
        0x03, 0xab, 0xc1, 0x23,             // gen 3 | pid 0xabc | ri 0x123
        0, 0, 0, 0, 0, 0x01, 0x00, 0x00,    // read_offset 65536
        0, 0, 0, 0, 0xca, 0xfe, 0xf0, 0x0d, // read_memory_key
    ];

    fn rndv() -> RendezvousExtRepr {
        RendezvousExtRepr {
            eager_length: 8192,
            ri_generation: RiGeneration::new(3).unwrap(),
            pid_on_fep: PidOnFep::new(0xabc).unwrap(),
            resource_index: ResourceIndex::new(0x123).unwrap(),
            read_offset: 65536,
            read_memory_key: 0xcafe_f00d,
        }
    }

    #[test]
    fn atomic_golden() {
        let r = AtomicExtRepr::parse(&AtomicExtPacket::new_checked(&ATOMIC_SUM_U64[..]).unwrap())
            .unwrap();
        assert_eq!(
            r,
            AtomicExtRepr {
                opcode: AtomicOpcode::Sum,
                datatype: AtomicDatatype::Uint64,
                cacheable: true,
                cpu_coherent: false,
            }
        );
        let mut b = [0xffu8; 4];
        r.emit(&mut AtomicExtPacket::new_unchecked(&mut b[..]));
        assert_eq!(b, ATOMIC_SUM_U64);
        assert_eq!(r.to_string(), "amo=SUM dt=UINT64 cacheable");
    }

    #[test]
    fn cas_golden() {
        let r = CasExtRepr::parse(&CasExtPacket::new_checked(&CSWAP_U64[..]).unwrap()).unwrap();
        assert_eq!(r.atomic.opcode, AtomicOpcode::Cswap);
        assert_eq!(r.compare, 5);
        assert_eq!(r.swap, 9);
        let mut b = [0xffu8; 36];
        r.emit(&mut CasExtPacket::new_unchecked(&mut b[..]));
        assert_eq!(b, CSWAP_U64);
    }

    #[test]
    fn rendezvous_golden() {
        let p = RendezvousExtPacket::new_checked(&RNDV[..]).unwrap();
        assert_eq!(p.pid_on_fep(), 0xabc);
        assert_eq!(p.resource_index(), 0x123);
        let r = RendezvousExtRepr::parse(&p).unwrap();
        assert_eq!(r, rndv());
        let mut b = [0xffu8; 24];
        r.emit(&mut RendezvousExtPacket::new_unchecked(&mut b[..]));
        assert_eq!(b, RNDV);
    }

    #[test]
    fn semantic_control_reserved_bits_ignored() {
        let r = AtomicExtRepr::parse(
            &AtomicExtPacket::new_checked(&[0x02, 0x07, 0xfe, 0xff][..]).unwrap(),
        )
        .unwrap();
        assert!(!r.cacheable && r.cpu_coherent);
        assert_eq!(r.semantic_control(), 0x02);
    }

    #[test]
    fn kind_selection() {
        assert_eq!(ExtKind::for_request(Opcode::Write, None), None);
        assert_eq!(
            ExtKind::for_request(Opcode::RendezvousSend, None),
            Some(ExtKind::Rendezvous)
        );
        assert_eq!(
            ExtKind::for_request(Opcode::FetchingAtomic, Some(AtomicOpcode::Sum)),
            Some(ExtKind::Atomic)
        );
        assert_eq!(
            ExtKind::for_request(Opcode::Atomic, Some(AtomicOpcode::CswapGt)),
            Some(ExtKind::CompareSwap)
        );
        assert_eq!(
            ExtKind::for_request(Opcode::TsendFetchAtomic, Some(AtomicOpcode::Mswap)),
            Some(ExtKind::CompareSwap)
        );
        assert_eq!(ExtKind::CompareSwap.header_len(), 36);
    }

    #[test]
    fn truncated_extension() {
        assert_eq!(
            ExtRepr::parse(ExtKind::CompareSwap, &CSWAP_U64[..35]).unwrap_err(),
            Error::truncated(Layer::Ses, 36, 35)
        );
    }

    #[test]
    fn mismatch_display() {
        let e = ExtMismatch {
            expected: Some(ExtKind::Atomic),
            found: None,
        };
        assert_eq!(
            e.to_string(),
            "request needs atomic extension, got no extension"
        );
    }

    proptest! {
        #[test]
        fn atomic_round_trip(r in arb_atomic_ext()) {
            let mut b = [0u8; ATOMIC_EXT_LEN];
            r.emit(&mut AtomicExtPacket::new_unchecked(&mut b[..]));
            prop_assert_eq!(r.buffer_len(), b.len());
            prop_assert_eq!(AtomicExtRepr::parse(&AtomicExtPacket::new_checked(&b[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn cas_round_trip(r in arb_cas_ext()) {
            let mut b = [0u8; CAS_EXT_LEN];
            r.emit(&mut CasExtPacket::new_unchecked(&mut b[..]));
            prop_assert_eq!(r.buffer_len(), b.len());
            prop_assert_eq!(CasExtRepr::parse(&CasExtPacket::new_checked(&b[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn rendezvous_round_trip(r in arb_rendezvous_ext()) {
            let mut b = [0u8; RENDEZVOUS_EXT_LEN];
            r.emit(&mut RendezvousExtPacket::new_unchecked(&mut b[..]));
            prop_assert_eq!(r.buffer_len(), b.len());
            prop_assert_eq!(RendezvousExtRepr::parse(&RendezvousExtPacket::new_checked(&b[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn any_ext_round_trip(r in arb_ext()) {
            let mut b = [0u8; CAS_EXT_LEN];
            r.emit(&mut b);
            prop_assert_eq!(ExtRepr::parse(r.kind(), &b[..r.buffer_len()]).unwrap(), r);
        }
    }
}
