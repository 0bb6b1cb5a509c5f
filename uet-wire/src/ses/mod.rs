//! SES headers (`docs/protocol-notes.md` §4): every request, extension and
//! response header of the Semantic Sublayer.
//!
//! The PDS `next_hdr` field (§2.3) says which SES header follows the PDS
//! header; [`SesRepr::parse`] takes it and the bytes after the PDS header and
//! returns the typed header, or `None` for `UET_HDR_NONE`:
//!
//! | `next_hdr` | module | header |
//! |---|---|---|
//! | 1 `UET_HDR_REQUEST_SMALL` | [`request`] | [`SesSmallRepr`], 20 B |
//! | 2 `UET_HDR_REQUEST_MEDIUM` | [`request`] | [`SesMediumRepr`], 32 B |
//! | 3 `UET_HDR_REQUEST_STD` | [`request`], [`ext`] | [`StandardRequest`]: [`SesStandardRepr`] (44 B) + the extension its opcode calls for |
//! | 4 `UET_HDR_RESPONSE` | [`response`] | [`SesResponseRepr`], 12 B |
//! | 5 `UET_HDR_RESPONSE_DATA` | [`response`] | [`SesResponseDataRepr`], 20 B + data |
//! | 6 `UET_HDR_RESPONSE_DATA_SMALL` | [`response`] | [`SesResponseDataSmallRepr`], 12 B + data |
//!
//! Decisions on points where the sources differ or are silent:
//!
//! * **Extension selection** (§4.2, §4.4). ATOMIC, FETCHING_ATOMIC,
//!   TSEND_ATOMIC and TSEND_FETCH_ATOMIC carry an atomic extension;
//!   RENDEZVOUS_SEND and RENDEZVOUS_TSEND the rendezvous extension. There is
//!   no compare-and-swap request opcode: the 36-byte compare-and-swap
//!   extension replaces the 4-byte atomic one when the atomic opcode (the
//!   extension's first byte) is CSWAP, CSWAP_NE/LE/LT/GE/GT or MSWAP. The
//!   parser peeks at that byte to size the extension. The 32 operand bytes
//!   are header, not payload: REFPROV emits the same bytes but counts them in
//!   `request_length` (32) and parses them as payload.
//! * Only the standard request carries extension headers (REFPROV; Wireshark
//!   also looks for an atomic extension after a small request).
//! * Small/medium bytes 2-3 are rsvd 2 + `request_length` 14 (§9 item 6);
//!   the rendezvous word 2 is `ri_generation` 8 / `pid_on_fep` 12 /
//!   `resource_index` 12 (§9 item 8); response-with-data `payload_length` is
//!   14 bits; `semantic_control` uses the values 0x01 / 0x02.
//! * Flag-dependent words are enums: [`SomFields`] (standard bytes 32-39 by
//!   `som`) and [`HeaderDataOrOffset`] (medium bytes 12-19 by `hd`), so the
//!   flag and the word cannot disagree; [`StandardRequest`] keeps its fields
//!   private so header and extension cannot disagree either.
//! * A version other than 0 is [`crate::ErrorKind::BadVersion`] at byte 1.
//!   Reserved bits are ignored on parse and written as zero. Codes the spec
//!   reserves or leaves to vendors parse to `Reserved`/`Vendor`/`Unknown`
//!   variants that keep the raw value.
//!
//! Error offsets are relative to the start of the SES header.

/// Declares a SES header view: the struct, `new_unchecked` / `new_checked` /
/// `check_len` / `into_inner` and the payload accessors, exactly as in
/// `pds/prologue.rs`. Field accessors are written per header.
macro_rules! ses_packet {
    ($(#[$m:meta])* $name:ident, $len:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Wraps a buffer without checking it (for emitting into a buffer
            /// of the right size).
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }

            /// Wraps a buffer after checking its length: afterwards no
            /// accessor can panic.
            pub fn new_checked(buffer: T) -> $crate::error::Result<Self> {
                let p = Self::new_unchecked(buffer);
                p.check_len()?;
                Ok(p)
            }

            /// Checks that the buffer holds the whole fixed-size header.
            pub fn check_len(&self) -> $crate::error::Result<()> {
                let len = self.buffer.as_ref().len();
                if len < $len {
                    return Err($crate::error::Error::truncated(
                        $crate::error::Layer::Ses,
                        $len,
                        len,
                    ));
                }
                Ok(())
            }

            /// The underlying buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }

            /// The bytes after the fixed-size header (extension headers, then
            /// payload and trailer, as far as the buffer reaches).
            pub fn payload(&self) -> &[u8] {
                &self.buffer.as_ref()[$len..]
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            /// The bytes after the fixed-size header, writable.
            pub fn payload_mut(&mut self) -> &mut [u8] {
                &mut self.buffer.as_mut()[$len..]
            }
        }
    };
}

pub mod atomic;
pub mod ext;
pub mod opcode;
pub mod request;
pub mod response;
pub mod return_code;
#[cfg(test)]
pub(crate) mod testutil;

use core::fmt;

use crate::error::Result;
use crate::pds::NextHeader;
use crate::types::JobId;

pub use atomic::{AtomicDatatype, AtomicOpcode};
pub use ext::{
    ATOMIC_EXT_LEN as SES_ATOMIC_EXT_LEN, AtomicExtPacket as SesAtomicExtPacket,
    AtomicExtRepr as SesAtomicExtRepr, CAS_EXT_LEN as SES_CAS_EXT_LEN,
    CasExtPacket as SesCasExtPacket, CasExtRepr as SesCasExtRepr, ExtKind, ExtMismatch,
    ExtRepr as SesExtRepr, RENDEZVOUS_EXT_LEN as SES_RENDEZVOUS_EXT_LEN,
    RendezvousExtPacket as SesRendezvousExtPacket, RendezvousExtRepr as SesRendezvousExtRepr,
};
pub use opcode::{ListKind, Opcode, ResponseOpcode};
pub use request::{
    HeaderDataOrOffset, MEDIUM_HEADER_LEN as SES_MEDIUM_HEADER_LEN,
    MediumPacket as SesMediumPacket, MediumRepr as SesMediumRepr, RequestFlags,
    SMALL_HEADER_LEN as SES_SMALL_HEADER_LEN, STANDARD_HEADER_LEN as SES_STANDARD_HEADER_LEN,
    SmallPacket as SesSmallPacket, SmallRepr as SesSmallRepr, SomFields,
    StandardPacket as SesStandardPacket, StandardRepr as SesStandardRepr,
};
pub use response::{
    RESPONSE_DATA_HEADER_LEN as SES_RESPONSE_DATA_HEADER_LEN,
    RESPONSE_DATA_SMALL_HEADER_LEN as SES_RESPONSE_DATA_SMALL_HEADER_LEN,
    RESPONSE_HEADER_LEN as SES_RESPONSE_HEADER_LEN, ResponseDataPacket as SesResponseDataPacket,
    ResponseDataRepr as SesResponseDataRepr, ResponseDataSmallPacket as SesResponseDataSmallPacket,
    ResponseDataSmallRepr as SesResponseDataSmallRepr, ResponsePacket as SesResponsePacket,
    ResponseRepr as SesResponseRepr,
};
pub use return_code::ReturnCode;

use ext::ExtRepr;
use request::{
    MediumPacket, MediumRepr, STANDARD_HEADER_LEN, SmallPacket, SmallRepr, StandardPacket,
    StandardRepr,
};
use response::{
    ResponseDataPacket, ResponseDataRepr, ResponseDataSmallPacket, ResponseDataSmallRepr,
    ResponsePacket, ResponseRepr,
};

/// Bit `n` set: a standard request with opcode `n` carries an extension
/// header (`ExtKind::for_request(Opcode::from_u8(n), None)` is `Some`).
const NEEDS_EXT: u64 = {
    let mut mask = 0u64;
    let mut n = 0u8;
    while n < 64 {
        if ExtKind::for_request(Opcode::from_u8(n), None).is_some() {
            mask |= 1 << n;
        }
        n += 1;
    }
    mask
};

/// A standard request header that needs no extension header, validated
/// where it lies (version 0, an opcode without extension) and decoded
/// field by field only by whoever reads it: the receive path's view of the
/// common data packet, which the SES target normalises straight from the
/// bytes instead of from a [`StandardRequest`] decoded first.
/// [`StandardView::request`] is the same header as the general parser
/// gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StandardView<'a> {
    bytes: &'a [u8; STANDARD_HEADER_LEN],
}

impl<'a> StandardView<'a> {
    /// The view of `bytes`, or `None` where the general parser would not
    /// give a standard request without extension (a version other than 0,
    /// an opcode with an extension header).
    #[inline]
    #[must_use]
    pub fn new(bytes: &'a [u8; STANDARD_HEADER_LEN]) -> Option<Self> {
        let packet = StandardPacket::new_unchecked(bytes);
        // `opcode_raw` is 6 bits: the shift stays inside the mask.
        let needs_ext = (NEEDS_EXT >> packet.opcode_raw()) & 1 != 0;
        (packet.version() == request::VERSION && !needs_ext).then_some(Self { bytes })
    }

    /// The field accessors.
    #[inline]
    #[must_use]
    pub const fn packet(&self) -> StandardPacket<&'a [u8; STANDARD_HEADER_LEN]> {
        StandardPacket::new_unchecked(self.bytes)
    }

    /// The header's bytes.
    #[must_use]
    pub const fn bytes(&self) -> &'a [u8; STANDARD_HEADER_LEN] {
        self.bytes
    }

    /// The header decoded, as [`SesRepr::parse`] gives it.
    #[inline]
    #[must_use]
    pub fn request(&self) -> StandardRequest {
        StandardRequest {
            header: StandardRepr::decode(&self.packet()),
            ext: None,
        }
    }
}

/// A standard request header together with the extension header its opcode
/// calls for (§4.2): the atomic extension for the atomic opcodes, the
/// compare-and-swap extension when their atomic opcode is a two-operand one,
/// the rendezvous extension for the rendezvous sends, none otherwise.
///
/// The fields are private so that the pairing is always consistent:
/// [`StandardRequest::new`] checks it, and [`StandardRequest::parse`] derives
/// the extension from the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StandardRequest {
    header: StandardRepr,
    ext: Option<ExtRepr>,
}

impl StandardRequest {
    /// Pairs a header with its extension; fails if the extension is not the
    /// one `header.opcode` (and the extension's atomic opcode) calls for.
    #[inline]
    pub fn new(
        header: StandardRepr,
        ext: Option<ExtRepr>,
    ) -> core::result::Result<Self, ExtMismatch> {
        let amo = match &ext {
            Some(e) => e.atomic_opcode(),
            None => None,
        };
        let expected = ExtKind::for_request(header.opcode, amo);
        let found = ext.as_ref().map(ExtRepr::kind);
        if expected == found {
            Ok(Self { header, ext })
        } else {
            Err(ExtMismatch { expected, found })
        }
    }

    /// The 44-byte header.
    #[must_use]
    pub const fn header(&self) -> &StandardRepr {
        &self.header
    }

    /// The extension header, if the opcode has one.
    #[must_use]
    pub const fn ext(&self) -> Option<&ExtRepr> {
        self.ext.as_ref()
    }

    /// Header and extension.
    #[must_use]
    pub const fn into_parts(self) -> (StandardRepr, Option<ExtRepr>) {
        (self.header, self.ext)
    }

    /// Parses a standard request and its extension from the start of
    /// `bytes`. Error offsets are relative to the start of `bytes`.
    #[inline]
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let header = StandardRepr::parse(&StandardPacket::new_checked(bytes)?)?;
        let amo = if header.opcode.has_atomic_ext() {
            // The atomic opcode (first byte of the extension) decides between
            // the atomic and the compare-and-swap extension.
            match bytes.get(STANDARD_HEADER_LEN) {
                Some(&b) => Some(AtomicOpcode::from_u8(b)),
                None => {
                    return Err(ext::truncated_ext(
                        STANDARD_HEADER_LEN,
                        ExtKind::Atomic,
                        bytes.len(),
                    ));
                }
            }
        } else {
            None
        };
        let ext = match ExtKind::for_request(header.opcode, amo) {
            None => None,
            Some(kind) => {
                let rest = &bytes[STANDARD_HEADER_LEN..];
                if rest.len() < kind.header_len() {
                    return Err(ext::truncated_ext(STANDARD_HEADER_LEN, kind, bytes.len()));
                }
                Some(ExtRepr::parse(kind, rest).map_err(|e| e.at(STANDARD_HEADER_LEN))?)
            }
        };
        Ok(Self { header, ext })
    }

    /// Bytes `emit` writes: 44 plus the extension.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        STANDARD_HEADER_LEN
            + match &self.ext {
                Some(e) => e.buffer_len(),
                None => 0,
            }
    }

    /// Writes header and extension at the start of `buf`.
    ///
    /// # Panics
    ///
    /// If `buf` is shorter than [`StandardRequest::buffer_len`].
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) {
        let (head, rest) = buf.split_at_mut(STANDARD_HEADER_LEN);
        self.header.emit(&mut StandardPacket::new_unchecked(head));
        if let Some(e) = &self.ext {
            e.emit(rest);
        }
    }

    /// The SES payload length of this packet; see
    /// [`StandardRepr::payload_len`].
    #[must_use]
    pub fn payload_len(&self, packet_payload_len: usize) -> usize {
        self.header.payload_len(packet_payload_len)
    }
}

impl From<StandardRequest> for SesRepr {
    fn from(r: StandardRequest) -> Self {
        Self::Standard(r)
    }
}

impl fmt::Display for StandardRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.header)?;
        if let Some(e) = &self.ext {
            write!(f, " {e}")?;
        }
        Ok(())
    }
}

/// Any SES header, as announced by the PDS `next_hdr` field (§2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SesRepr {
    /// `UET_HDR_REQUEST_SMALL` (20 B).
    Small(SmallRepr),
    /// `UET_HDR_REQUEST_MEDIUM` (32 B).
    Medium(MediumRepr),
    /// `UET_HDR_REQUEST_STD` (44 B + extension).
    Standard(StandardRequest),
    /// `UET_HDR_RESPONSE` (12 B).
    Response(ResponseRepr),
    /// `UET_HDR_RESPONSE_DATA` (20 B + data).
    ResponseData(ResponseDataRepr),
    /// `UET_HDR_RESPONSE_DATA_SMALL` (12 B + data).
    ResponseDataSmall(ResponseDataSmallRepr),
}

impl SesRepr {
    /// Parses the SES header that `next_hdr` announces from the start of
    /// `bytes`: `Ok(None)` for [`NextHeader::None`]. A standard request
    /// includes its extension header; everything after
    /// [`SesRepr::header_len`] bytes is payload (and trailer). Error offsets
    /// are relative to the start of `bytes`.
    #[inline]
    pub fn parse(next_hdr: NextHeader, bytes: &[u8]) -> Result<Option<Self>> {
        Ok(Some(match next_hdr {
            NextHeader::None => return Ok(None),
            NextHeader::RequestSmall => {
                Self::Small(SmallRepr::parse(&SmallPacket::new_checked(bytes)?)?)
            }
            NextHeader::RequestMedium => {
                Self::Medium(MediumRepr::parse(&MediumPacket::new_checked(bytes)?)?)
            }
            NextHeader::RequestStd => Self::Standard(StandardRequest::parse(bytes)?),
            NextHeader::Response => {
                Self::Response(ResponseRepr::parse(&ResponsePacket::new_checked(bytes)?)?)
            }
            NextHeader::ResponseData => Self::ResponseData(ResponseDataRepr::parse(
                &ResponseDataPacket::new_checked(bytes)?,
            )?),
            NextHeader::ResponseDataSmall => Self::ResponseDataSmall(ResponseDataSmallRepr::parse(
                &ResponseDataSmallPacket::new_checked(bytes)?,
            )?),
        }))
    }

    /// The `next_hdr` value that announces this header.
    #[must_use]
    pub const fn next_hdr(&self) -> NextHeader {
        match self {
            Self::Small(_) => NextHeader::RequestSmall,
            Self::Medium(_) => NextHeader::RequestMedium,
            Self::Standard(_) => NextHeader::RequestStd,
            Self::Response(_) => NextHeader::Response,
            Self::ResponseData(_) => NextHeader::ResponseData,
            Self::ResponseDataSmall(_) => NextHeader::ResponseDataSmall,
        }
    }

    /// Length of the SES header, extension included: where the payload
    /// starts.
    #[must_use]
    pub const fn header_len(&self) -> usize {
        match self {
            Self::Small(r) => r.buffer_len(),
            Self::Medium(r) => r.buffer_len(),
            Self::Standard(r) => r.buffer_len(),
            Self::Response(r) => r.buffer_len(),
            Self::ResponseData(r) => r.buffer_len(),
            Self::ResponseDataSmall(r) => r.buffer_len(),
        }
    }

    /// Bytes `emit` writes (the same as [`SesRepr::header_len`]).
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Writes the header (and extension) at the start of `buf`.
    ///
    /// # Panics
    ///
    /// If `buf` is shorter than [`SesRepr::buffer_len`].
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) {
        let buf = &mut buf[..self.buffer_len()];
        match self {
            Self::Small(r) => r.emit(&mut SmallPacket::new_unchecked(buf)),
            Self::Medium(r) => r.emit(&mut MediumPacket::new_unchecked(buf)),
            Self::Standard(r) => r.emit(buf),
            Self::Response(r) => r.emit(&mut ResponsePacket::new_unchecked(buf)),
            Self::ResponseData(r) => r.emit(&mut ResponseDataPacket::new_unchecked(buf)),
            Self::ResponseDataSmall(r) => r.emit(&mut ResponseDataSmallPacket::new_unchecked(buf)),
        }
    }

    /// The SES payload length of the packet, given `packet_payload_len`, the
    /// bytes after the SES header up to the trailer: the REFPROV rule for
    /// standard requests (see [`StandardRepr::payload_len`]),
    /// `min(packet_payload_len, request_length)` for small and medium
    /// requests, the `payload_length` field for responses with data, 0 for a
    /// plain response. The caller checks the result against the bytes it has.
    #[must_use]
    #[inline]
    pub fn payload_len(&self, packet_payload_len: usize) -> usize {
        match self {
            Self::Small(r) => r.payload_len(packet_payload_len),
            Self::Medium(r) => r.payload_len(packet_payload_len),
            Self::Standard(r) => r.payload_len(packet_payload_len),
            Self::Response(_) => 0,
            Self::ResponseData(r) => usize::from(r.payload_length.get()),
            Self::ResponseDataSmall(r) => usize::from(r.payload_length.get()),
        }
    }

    /// The `job_id` every SES header carries.
    #[must_use]
    pub const fn job_id(&self) -> JobId {
        match self {
            Self::Small(r) => r.job_id,
            Self::Medium(r) => r.job_id,
            Self::Standard(r) => r.header.job_id,
            Self::Response(r) => r.job_id,
            Self::ResponseData(r) => r.job_id,
            Self::ResponseDataSmall(r) => r.job_id,
        }
    }
}

impl From<SmallRepr> for SesRepr {
    fn from(r: SmallRepr) -> Self {
        Self::Small(r)
    }
}

impl From<MediumRepr> for SesRepr {
    fn from(r: MediumRepr) -> Self {
        Self::Medium(r)
    }
}

impl From<ResponseRepr> for SesRepr {
    fn from(r: ResponseRepr) -> Self {
        Self::Response(r)
    }
}

impl From<ResponseDataRepr> for SesRepr {
    fn from(r: ResponseDataRepr) -> Self {
        Self::ResponseData(r)
    }
}

impl From<ResponseDataSmallRepr> for SesRepr {
    fn from(r: ResponseDataSmallRepr) -> Self {
        Self::ResponseDataSmall(r)
    }
}

impl fmt::Display for SesRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Small(r) => fmt::Display::fmt(r, f),
            Self::Medium(r) => fmt::Display::fmt(r, f),
            Self::Standard(r) => fmt::Display::fmt(r, f),
            Self::Response(r) => fmt::Display::fmt(r, f),
            Self::ResponseData(r) => fmt::Display::fmt(r, f),
            Self::ResponseDataSmall(r) => fmt::Display::fmt(r, f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, ErrorKind, Layer};
    use crate::types::{MessageId, PidOnFep, ResourceIndex, RiGeneration};
    use proptest::prelude::*;
    use testutil::{arb_ses_repr, arb_standard_request};

    /// The 44-byte standard header used by the extension vectors below:
    /// `opcode`, SOM + EOM, message 1, gen 0, job 7, pid 3, ri 5,
    /// buffer_offset 0x100, initiator 0, memory_key 0x77, header_data 0 and
    /// `request_length`.
    #[rustfmt::skip]
    const fn std_header(opcode: u8, request_length: u8) -> [u8; 44] {
        [
            opcode,
            0x03,                       // version 0 | eom | som
            0x00, 0x01,                 // message_id 1
            0x00,                       // ri_generation 0
            0x00, 0x00, 0x07,           // job_id 7
            0x00, 0x03,                 // pid_on_fep 3
            0x00, 0x05,                 // resource_index 5
            0, 0, 0, 0, 0, 0, 0x01, 0x00, // buffer_offset 0x100
            0, 0, 0, 0,                 // initiator 0
            0, 0, 0, 0, 0, 0, 0, 0x77,  // memory_key 0x77
            0, 0, 0, 0, 0, 0, 0, 0,     // header_data 0
            0, 0, 0, request_length,    // request_length
        ]
    }

    fn header(opcode: Opcode, request_length: u32) -> StandardRepr {
        StandardRepr {
            opcode,
            flags: RequestFlags {
                eom: true,
                ..RequestFlags::default()
            },
            hd: false,
            som: SomFields::Start { header_data: 0 },
            message_id: MessageId::new(1).unwrap(),
            ri_generation: RiGeneration::new(0).unwrap(),
            job_id: JobId::new(7).unwrap(),
            pid_on_fep: PidOnFep::new(3).unwrap(),
            resource_index: ResourceIndex::new(5).unwrap(),
            buffer_offset: 0x100,
            initiator: 0,
            memory_key: 0x77,
            request_length,
        }
    }

    fn concat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    /// UET_FETCHING_ATOMIC, SUM on UINT64, cacheable, one 8-byte operand.
    fn fetch_add_bytes() -> Vec<u8> {
        concat(&[
            &std_header(0x04, 8),
            &[0x02, 0x07, 0x01, 0x00], // SUM | UINT64 | cacheable | rsvd
            &[0, 0, 0, 0, 0, 0, 0, 1], // operand: 1
        ])
    }

    #[test]
    fn fetching_atomic_sum_golden() {
        let bytes = fetch_add_bytes();
        let r = SesRepr::parse(NextHeader::RequestStd, &bytes)
            .unwrap()
            .unwrap();
        let ext = SesAtomicExtRepr {
            opcode: AtomicOpcode::Sum,
            datatype: AtomicDatatype::Uint64,
            cacheable: true,
            cpu_coherent: false,
        };
        let want = StandardRequest::new(
            header(Opcode::FetchingAtomic, 8),
            Some(SesExtRepr::Atomic(ext)),
        )
        .unwrap();
        assert_eq!(r, SesRepr::Standard(want));
        assert_eq!(r.header_len(), 48);
        assert_eq!(&bytes[r.header_len()..], &[0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(r.payload_len(bytes.len() - r.header_len()), 8);
        assert_eq!(r.next_hdr(), NextHeader::RequestStd);
        let mut out = [0xffu8; 48];
        r.emit(&mut out);
        assert_eq!(&out[..], &bytes[..48]);
        assert_eq!(
            r.to_string(),
            "UET_FETCHING_ATOMIC som eom job=7 pid=3 ri=5 gen=0 msg=1 off=256 key=0x77 \
             req_len=8 amo=SUM dt=UINT64 cacheable"
        );
    }

    /// UET_FETCHING_ATOMIC with CSWAP on UINT64: the 36-byte extension.
    fn cswap_bytes() -> Vec<u8> {
        concat(&[
            &std_header(0x04, 8),
            &[0x0d, 0x07, 0x02, 0x00], // CSWAP | UINT64 | cpu coherent | rsvd
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x2a], // compare 42
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x2b], // swap 43
        ])
    }

    #[test]
    fn cswap_golden() {
        let bytes = cswap_bytes();
        let r = SesRepr::parse(NextHeader::RequestStd, &bytes)
            .unwrap()
            .unwrap();
        let ext = SesCasExtRepr {
            atomic: SesAtomicExtRepr {
                opcode: AtomicOpcode::Cswap,
                datatype: AtomicDatatype::Uint64,
                cacheable: false,
                cpu_coherent: true,
            },
            compare: 42,
            swap: 43,
        };
        let want = StandardRequest::new(
            header(Opcode::FetchingAtomic, 8),
            Some(SesExtRepr::CompareSwap(ext)),
        )
        .unwrap();
        assert_eq!(r, SesRepr::Standard(want));
        assert_eq!(r.header_len(), 80);
        let mut out = vec![0xffu8; 80];
        r.emit(&mut out);
        assert_eq!(out, bytes);
        assert!(
            r.to_string()
                .ends_with("amo=CSWAP dt=UINT64 coherent cmp=0x2a swap=0x2b")
        );
    }

    /// UET_RENDEZVOUS_SEND with 4 eager bytes; the rest is read from gen 2,
    /// pid 9, ri 10 at offset 0x1000 with key 0x5151.
    fn rendezvous_bytes() -> Vec<u8> {
        concat(&[
            &std_header(0x06, 0xff),
            &[0x00, 0x00, 0x00, 0x04],       // eager_length 4
            &[0x02, 0x00, 0x90, 0x0a],       // gen 2 | pid 9 | ri 10
            &[0, 0, 0, 0, 0, 0, 0x10, 0x00], // read_offset 0x1000
            &[0, 0, 0, 0, 0, 0, 0x51, 0x51], // read_memory_key
            &[0xaa, 0xbb, 0xcc, 0xdd],       // eager payload
        ])
    }

    #[test]
    fn rendezvous_golden() {
        let bytes = rendezvous_bytes();
        let r = SesRepr::parse(NextHeader::RequestStd, &bytes)
            .unwrap()
            .unwrap();
        let ext = SesRendezvousExtRepr {
            eager_length: 4,
            ri_generation: RiGeneration::new(2).unwrap(),
            pid_on_fep: PidOnFep::new(9).unwrap(),
            resource_index: ResourceIndex::new(10).unwrap(),
            read_offset: 0x1000,
            read_memory_key: 0x5151,
        };
        let want = StandardRequest::new(
            header(Opcode::RendezvousSend, 0xff),
            Some(SesExtRepr::Rendezvous(ext)),
        )
        .unwrap();
        assert_eq!(r, SesRepr::Standard(want));
        assert_eq!(r.header_len(), 68);
        assert_eq!(&bytes[r.header_len()..], &[0xaa, 0xbb, 0xcc, 0xdd]);
        let mut out = [0u8; 68];
        r.emit(&mut out);
        assert_eq!(&out[..], &bytes[..68]);
        assert!(r.to_string().starts_with("UET_RENDEZVOUS_SEND som eom"));
        assert!(
            r.to_string()
                .ends_with("eager=4 rd_pid=9 rd_ri=10 rd_gen=2 rd_off=4096 rd_key=0x5151")
        );
    }

    #[test]
    fn plain_write_has_no_extension() {
        let mut bytes = std_header(0x01, 0xff).to_vec();
        bytes.extend_from_slice(&[0x0d; 40]); // payload that looks like a CSWAP
        let r = SesRepr::parse(NextHeader::RequestStd, &bytes)
            .unwrap()
            .unwrap();
        let SesRepr::Standard(req) = r else {
            panic!("not a standard request: {r:?}")
        };
        assert_eq!(req.ext(), None);
        assert_eq!(r.header_len(), 44);
        assert_eq!(r.payload_len(40), 40);
    }

    #[test]
    fn every_header_type_parses_through_ses_repr() {
        // Response: UET_RESPONSE RC_OK, modified_length 4096.
        let rsp = [0x01, 0x01, 0, 9, 1, 0, 0, 7, 0, 0, 0x10, 0];
        let r = SesRepr::parse(NextHeader::Response, &rsp).unwrap().unwrap();
        assert_eq!(
            r.to_string(),
            "UET_RESPONSE RC_OK job=7 gen=1 msg=9 mod_len=4096"
        );
        assert_eq!((r.header_len(), r.payload_len(100)), (12, 0));

        // Response with data: read message 5, 3 bytes at offset 16.
        let rd = [
            0x02, 0x01, 0, 9, 0, 0, 0, 7, 0, 5, 0, 3, 0, 0, 0, 3, 0, 0, 0, 16, 1, 2, 3,
        ];
        let r = SesRepr::parse(NextHeader::ResponseData, &rd)
            .unwrap()
            .unwrap();
        let SesRepr::ResponseData(d) = r else {
            panic!("{r:?}")
        };
        assert_eq!(d.read_request_message_id.get(), 5);
        assert_eq!(d.message_offset, 16);
        assert_eq!((r.header_len(), r.payload_len(3)), (20, 3));

        // Small response with data.
        let rds = [0x02, 0x01, 0, 2, 0, 0, 0, 7, 0, 0, 1, 0, 0xee, 0xff];
        let r = SesRepr::parse(NextHeader::ResponseDataSmall, &rds)
            .unwrap()
            .unwrap();
        assert_eq!(
            r.to_string(),
            "UET_RESPONSE_W_DATA small RC_OK job=7 orig_psn=256 plen=2"
        );
        assert_eq!(r.header_len(), 12);

        // Small and medium requests.
        let small = [
            0x01, 0x03, 0, 4, 0, 0, 0, 7, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 8,
        ];
        let r = SesRepr::parse(NextHeader::RequestSmall, &small)
            .unwrap()
            .unwrap();
        assert_eq!(r.header_len(), 20);
        assert_eq!(r.job_id().get(), 7);
        let mut medium = [0u8; 32];
        medium[..2].copy_from_slice(&[0x05, 0x03]);
        let r = SesRepr::parse(NextHeader::RequestMedium, &medium)
            .unwrap()
            .unwrap();
        assert_eq!(r.next_hdr(), NextHeader::RequestMedium);
        assert_eq!(r.header_len(), 32);

        assert_eq!(SesRepr::parse(NextHeader::None, &rsp), Ok(None));
    }

    #[test]
    fn unknown_return_code_is_unknown() {
        let rsp = [0x01, 0x2f, 0, 9, 1, 0, 0, 7, 0, 0, 0x10, 0];
        let Some(SesRepr::Response(r)) = SesRepr::parse(NextHeader::Response, &rsp).unwrap() else {
            panic!()
        };
        assert_eq!(r.return_code, ReturnCode::Unknown(0x2f));
    }

    #[test]
    fn bad_version_for_every_header() {
        for nh in [
            NextHeader::RequestSmall,
            NextHeader::RequestMedium,
            NextHeader::RequestStd,
            NextHeader::Response,
            NextHeader::ResponseData,
            NextHeader::ResponseDataSmall,
        ] {
            let mut b = [0u8; 96];
            b[1] = 0x40;
            assert_eq!(
                SesRepr::parse(nh, &b),
                Err(Error::new(Layer::Ses, ErrorKind::BadVersion, 1)),
                "{nh}"
            );
        }
    }

    #[test]
    fn truncated_extension_reports_total_length() {
        let bytes = fetch_add_bytes();
        assert_eq!(
            SesRepr::parse(NextHeader::RequestStd, &bytes[..44]),
            Err(Error::truncated(Layer::Ses, 48, 44))
        );
        assert_eq!(
            SesRepr::parse(NextHeader::RequestStd, &bytes[..47]),
            Err(Error::truncated(Layer::Ses, 48, 47))
        );
        let bytes = cswap_bytes();
        assert_eq!(
            SesRepr::parse(NextHeader::RequestStd, &bytes[..79]),
            Err(Error::truncated(Layer::Ses, 80, 79))
        );
        let bytes = rendezvous_bytes();
        assert_eq!(
            SesRepr::parse(NextHeader::RequestStd, &bytes[..50]),
            Err(Error::truncated(Layer::Ses, 68, 50))
        );
        assert_eq!(
            SesRepr::parse(NextHeader::RequestStd, &bytes[..10]),
            Err(Error::truncated(Layer::Ses, 44, 10))
        );
    }

    #[test]
    fn standard_request_checks_its_extension() {
        let atomic = SesExtRepr::Atomic(SesAtomicExtRepr {
            opcode: AtomicOpcode::Cswap,
            datatype: AtomicDatatype::Uint64,
            cacheable: false,
            cpu_coherent: false,
        });
        assert_eq!(
            StandardRequest::new(header(Opcode::Write, 1), Some(atomic)),
            Err(ExtMismatch {
                expected: None,
                found: Some(ExtKind::Atomic)
            })
        );
        assert_eq!(
            StandardRequest::new(header(Opcode::Atomic, 1), None),
            Err(ExtMismatch {
                expected: Some(ExtKind::Atomic),
                found: None
            })
        );
        // A CSWAP atomic opcode needs the compare-and-swap extension.
        assert_eq!(
            StandardRequest::new(header(Opcode::Atomic, 1), Some(atomic)),
            Err(ExtMismatch {
                expected: Some(ExtKind::CompareSwap),
                found: Some(ExtKind::Atomic)
            })
        );
        let req = StandardRequest::new(header(Opcode::Write, 1), None).unwrap();
        assert_eq!(req.into_parts(), (header(Opcode::Write, 1), None));
    }

    const ALL_NEXT_HDRS: [NextHeader; 7] = [
        NextHeader::None,
        NextHeader::RequestSmall,
        NextHeader::RequestMedium,
        NextHeader::RequestStd,
        NextHeader::Response,
        NextHeader::ResponseData,
        NextHeader::ResponseDataSmall,
    ];

    /// Parse, and on success check that re-emitting and re-parsing gives the
    /// same value.
    fn parse_reemit(nh: NextHeader, bytes: &[u8]) -> core::result::Result<(), TestCaseError> {
        match SesRepr::parse(nh, bytes) {
            Ok(None) => prop_assert_eq!(nh, NextHeader::None),
            Ok(Some(r)) => {
                prop_assert_eq!(r.next_hdr(), nh);
                prop_assert!(r.header_len() <= bytes.len());
                let mut out = vec![0u8; r.buffer_len()];
                r.emit(&mut out);
                prop_assert_eq!(SesRepr::parse(nh, &out), Ok(Some(r)));
                let _ = r.to_string();
            }
            Err(e) => {
                prop_assert_eq!(e.layer, Layer::Ses);
                prop_assert!(e.offset <= bytes.len().max(1));
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn ses_repr_round_trip(r in arb_ses_repr(), payload in prop::collection::vec(any::<u8>(), 0..16)) {
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut buf);
            prop_assert_eq!(SesRepr::parse(r.next_hdr(), &buf), Ok(Some(r)));
            // Payload after the header does not change the header.
            buf.extend_from_slice(&payload);
            let p = SesRepr::parse(r.next_hdr(), &buf).unwrap().unwrap();
            prop_assert_eq!(p, r);
            prop_assert_eq!(p.header_len(), buf.len() - payload.len());
        }

        #[test]
        fn standard_request_round_trip(r in arb_standard_request()) {
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut buf);
            prop_assert_eq!(StandardRequest::parse(&buf), Ok(r));
            prop_assert_eq!(StandardRequest::new(*r.header(), r.ext().copied()), Ok(r));
        }

        /// The view answers exactly where the general parser gives a
        /// standard request without extension, and gives the same header;
        /// valid headers (most opcodes need none) and arbitrary bytes.
        #[test]
        fn standard_view_agrees_with_parse(
            r in arb_standard_request(),
            bytes in prop::array::uniform32(any::<u8>()),
            tail in prop::array::uniform12(any::<u8>()),
            arbitrary: bool,
            v0: bool,
        ) {
            let mut b = [0u8; 44];
            if arbitrary {
                b[..32].copy_from_slice(&bytes);
                b[32..].copy_from_slice(&tail);
                if v0 {
                    b[1] &= 0x3f;
                }
            } else {
                r.header().emit(&mut StandardPacket::new_unchecked(&mut b[..]));
            }
            let general = match StandardRequest::parse(&b) {
                Ok(g) if g.ext().is_none() => Some(g),
                _ => None,
            };
            prop_assert_eq!(StandardView::new(&b).map(|v| v.request()), general);
        }

        #[test]
        fn parse_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..96), nh in 0usize..7) {
            let nh = ALL_NEXT_HDRS[nh];
            parse_reemit(nh, &bytes)?;
            // Again with version 0, so that most inputs get past the version
            // check and exercise the field decoding.
            let mut v0 = bytes;
            if let Some(b) = v0.get_mut(1) {
                *b &= 0x3f;
            }
            parse_reemit(nh, &v0)?;
        }
    }
}
