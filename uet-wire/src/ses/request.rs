//! SES request headers (`docs/protocol-notes.md` §4.1-§4.3): the standard
//! request `UET_HDR_REQUEST_STD` (44 B), the medium request
//! `UET_HDR_REQUEST_MEDIUM` (32 B) and the small request
//! `UET_HDR_REQUEST_SMALL` (20 B).
//!
//! All three start with the same 12 bytes (§4.1):
//!
//! ```text
//! byte 0   rsvd:2 | opcode:6
//! byte 1   version:2 | dc | ie | rel | hd | eom | som
//! 2-3      STD: message_id:16 · SMALL/MEDIUM: rsvd:2 | request_length:14
//! 4        ri_generation:8
//! 5-7      job_id:24
//! 8-9      rsvd:4 | pid_on_fep:12
//! 10-11    rsvd:4 | resource_index:12
//! ```
//!
//! Bytes 2-3 of the small and medium headers follow REFPROV and Wireshark
//! (rsvd 2 + `request_length` 14), not XDP2's `message_id` (§9 item 6).
//!
//! Reserved bits are ignored on parse and written as zero on emit; a version
//! other than 0 is [`ErrorKind::BadVersion`] at byte 1. Fields whose meaning
//! depends on a flag are enums ([`SomFields`], [`HeaderDataOrOffset`]), so the
//! flag and the field cannot disagree.

use core::fmt;

use crate::error::{Error, ErrorKind, Layer, Result};
use crate::field::{set_u16, set_u24, set_u32, set_u64, u16_at, u24_at, u32_at, u64_at};
use crate::types::{JobId, Len14, MessageId, PidOnFep, ResourceIndex, RiGeneration};

use super::opcode::Opcode;

/// Length of the part common to all request headers.
pub const COMMON_LEN: usize = 12;
/// Length of the standard request header (without extension headers).
pub const STANDARD_HEADER_LEN: usize = 44;
/// Length of the medium request header.
pub const MEDIUM_HEADER_LEN: usize = 32;
/// Length of the small request header.
pub const SMALL_HEADER_LEN: usize = 20;

/// The only SES version this implementation speaks (REFPROV `UET_SES_VER`).
pub const VERSION: u8 = 0;

mod field {
    pub(super) const OPCODE: usize = 0;
    pub(super) const VER_FLAGS: usize = 1;
    /// STD: `message_id`; SMALL/MEDIUM: rsvd 2 + `request_length` 14.
    pub(super) const WORD2: usize = 2;
    pub(super) const RI_GENERATION: usize = 4;
    pub(super) const JOB_ID: usize = 5;
    pub(super) const PID_ON_FEP: usize = 8;
    pub(super) const RESOURCE_INDEX: usize = 10;

    // Standard request.
    pub(super) const STD_BUFFER_OFFSET: usize = 12;
    pub(super) const STD_INITIATOR: usize = 20;
    pub(super) const STD_MEMORY_KEY: usize = 24;
    /// SOM: `header_data` 64; not SOM: rsvd 18 | `payload_length` 14 |
    /// `message_offset` 32.
    pub(super) const STD_SOM_WORD: usize = 32;
    pub(super) const STD_PAYLOAD_LENGTH: usize = 34;
    pub(super) const STD_MESSAGE_OFFSET: usize = 36;
    pub(super) const STD_REQUEST_LENGTH: usize = 40;

    // Medium request.
    pub(super) const MED_DATA_OR_OFFSET: usize = 12;
    pub(super) const MED_INITIATOR: usize = 20;
    pub(super) const MED_MEMORY_KEY: usize = 24;

    // Small request.
    pub(super) const SMALL_BUFFER_OFFSET: usize = 12;

    pub(super) const OPCODE_MASK: u8 = 0x3f;
    pub(super) const VERSION_SHIFT: u8 = 6;
    pub(super) const FLAGS_MASK: u8 = 0x3f;
    pub(super) const DC: u8 = 0x20;
    pub(super) const IE: u8 = 0x10;
    pub(super) const REL: u8 = 0x08;
    pub(super) const HD: u8 = 0x04;
    pub(super) const EOM: u8 = 0x02;
    pub(super) const SOM: u8 = 0x01;
    pub(super) const LEN14_MASK: u16 = 0x3fff;
    pub(super) const ID12_MASK: u16 = 0x0fff;
}

/// Generates the accessors of the 12 common bytes for one request view.
macro_rules! request_common {
    ($name:ident) => {
        impl<T: AsRef<[u8]>> $name<T> {
            /// The raw 6-bit `opcode`.
            pub fn opcode_raw(&self) -> u8 {
                self.buffer.as_ref()[field::OPCODE] & field::OPCODE_MASK
            }

            /// The 2-bit `version`.
            pub fn version(&self) -> u8 {
                self.buffer.as_ref()[field::VER_FLAGS] >> field::VERSION_SHIFT
            }

            /// The six flag bits (`dc ie rel hd eom som`, 0x20 … 0x01).
            pub fn flags_raw(&self) -> u8 {
                self.buffer.as_ref()[field::VER_FLAGS] & field::FLAGS_MASK
            }

            /// `dc`: delivery complete requested.
            pub fn dc(&self) -> bool {
                self.flags_raw() & field::DC != 0
            }

            /// `ie`: initiator error.
            pub fn ie(&self) -> bool {
                self.flags_raw() & field::IE != 0
            }

            /// `rel`: relative (1) or absolute (0) addressing.
            pub fn rel(&self) -> bool {
                self.flags_raw() & field::REL != 0
            }

            /// `hd`: header data present (reserved in the small header).
            pub fn hd(&self) -> bool {
                self.flags_raw() & field::HD != 0
            }

            /// `eom`: end of message.
            pub fn eom(&self) -> bool {
                self.flags_raw() & field::EOM != 0
            }

            /// `som`: start of message.
            pub fn som(&self) -> bool {
                self.flags_raw() & field::SOM != 0
            }

            /// The 8-bit `ri_generation`.
            pub fn ri_generation(&self) -> u8 {
                self.buffer.as_ref()[field::RI_GENERATION]
            }

            /// The 24-bit `job_id`.
            pub fn job_id(&self) -> u32 {
                u24_at(self.buffer.as_ref(), field::JOB_ID)
            }

            /// The 12-bit `pid_on_fep`.
            pub fn pid_on_fep(&self) -> u16 {
                u16_at(self.buffer.as_ref(), field::PID_ON_FEP) & field::ID12_MASK
            }

            /// The 12-bit `resource_index`.
            pub fn resource_index(&self) -> u16 {
                u16_at(self.buffer.as_ref(), field::RESOURCE_INDEX) & field::ID12_MASK
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            /// Writes the opcode (masked to 6 bits; the reserved bits become 0).
            pub fn set_opcode_raw(&mut self, v: u8) {
                self.buffer.as_mut()[field::OPCODE] = v & field::OPCODE_MASK;
            }

            /// Writes `version` (2 bits) and the six flag bits.
            pub fn set_version_flags(&mut self, version: u8, flags: u8) {
                self.buffer.as_mut()[field::VER_FLAGS] =
                    ((version & 0x03) << field::VERSION_SHIFT) | (flags & field::FLAGS_MASK);
            }

            /// Writes `ri_generation`.
            pub fn set_ri_generation(&mut self, v: u8) {
                self.buffer.as_mut()[field::RI_GENERATION] = v;
            }

            /// Writes `job_id` (low 24 bits).
            pub fn set_job_id(&mut self, v: u32) {
                set_u24(self.buffer.as_mut(), field::JOB_ID, v);
            }

            /// Writes `pid_on_fep` (low 12 bits; the reserved bits become 0).
            pub fn set_pid_on_fep(&mut self, v: u16) {
                set_u16(
                    self.buffer.as_mut(),
                    field::PID_ON_FEP,
                    v & field::ID12_MASK,
                );
            }

            /// Writes `resource_index` (low 12 bits; the reserved bits become 0).
            pub fn set_resource_index(&mut self, v: u16) {
                set_u16(
                    self.buffer.as_mut(),
                    field::RESOURCE_INDEX,
                    v & field::ID12_MASK,
                );
            }
        }
    };
}

/// Generates the `request_length` accessors of the small and medium headers
/// (bytes 2-3: rsvd 2 + `request_length` 14).
macro_rules! request_length14 {
    ($name:ident) => {
        impl<T: AsRef<[u8]>> $name<T> {
            /// The 14-bit `request_length`.
            pub fn request_length(&self) -> u16 {
                u16_at(self.buffer.as_ref(), field::WORD2) & field::LEN14_MASK
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            /// Writes `request_length` (low 14 bits; the reserved bits become 0).
            pub fn set_request_length(&mut self, v: u16) {
                set_u16(self.buffer.as_mut(), field::WORD2, v & field::LEN14_MASK);
            }
        }
    };
}

/// The request flags whose meaning is the same in every request header.
///
/// `som` and `hd` are not here: in the standard and medium headers they
/// select how other fields read, so those `Repr`s carry them as enums
/// ([`SomFields`], [`HeaderDataOrOffset`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RequestFlags {
    /// `dc`: delivery complete requested.
    pub dc: bool,
    /// `ie`: initiator error.
    pub ie: bool,
    /// `rel`: relative addressing (`false`: absolute).
    pub rel: bool,
    /// `eom`: end of message.
    pub eom: bool,
}

impl RequestFlags {
    /// From the six flag bits (`hd` and `som` are ignored).
    #[must_use]
    pub const fn from_bits(bits: u8) -> Self {
        Self {
            dc: bits & field::DC != 0,
            ie: bits & field::IE != 0,
            rel: bits & field::REL != 0,
            eom: bits & field::EOM != 0,
        }
    }

    /// The flag bits, with `hd` and `som` added.
    #[must_use]
    pub const fn bits(self, hd: bool, som: bool) -> u8 {
        let mut b = 0;
        if self.dc {
            b |= field::DC;
        }
        if self.ie {
            b |= field::IE;
        }
        if self.rel {
            b |= field::REL;
        }
        if hd {
            b |= field::HD;
        }
        if self.eom {
            b |= field::EOM;
        }
        if som {
            b |= field::SOM;
        }
        b
    }
}

/// Writes the set flags as words (`som eom hd rel dc ie`), each preceded by a
/// space.
fn write_flags(
    f: &mut fmt::Formatter<'_>,
    flags: RequestFlags,
    hd: bool,
    som: bool,
) -> fmt::Result {
    for (set, name) in [
        (som, "som"),
        (flags.eom, "eom"),
        (hd, "hd"),
        (flags.rel, "rel"),
        (flags.dc, "dc"),
        (flags.ie, "ie"),
    ] {
        if set {
            write!(f, " {name}")?;
        }
    }
    Ok(())
}

/// Checks the version bits of byte 1.
fn check_version(version: u8) -> Result<()> {
    if version == VERSION {
        Ok(())
    } else {
        Err(Error::new(
            Layer::Ses,
            ErrorKind::BadVersion,
            field::VER_FLAGS,
        ))
    }
}

// ---------------------------------------------------------------------------
// Standard request
// ---------------------------------------------------------------------------

ses_packet!(
    /// A read/write view of a standard request header (44 B, §4.2).
    StandardPacket,
    STANDARD_HEADER_LEN
);
request_common!(StandardPacket);

impl<T: AsRef<[u8]>> StandardPacket<T> {
    /// The 16-bit `message_id`.
    pub fn message_id(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::WORD2)
    }

    /// The 64-bit `buffer_offset` (a restart token for the deferrable sends).
    pub fn buffer_offset(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::STD_BUFFER_OFFSET)
    }

    /// The 32-bit `initiator`.
    pub fn initiator(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::STD_INITIATOR)
    }

    /// The 64-bit `memory_key` / `match_bits` (a restart token for
    /// `UET_DEFERRABLE_RTR`).
    pub fn memory_key(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::STD_MEMORY_KEY)
    }

    /// Bytes 32-39 read as `header_data` (meaningful when `som` is set).
    pub fn header_data(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::STD_SOM_WORD)
    }

    /// The 14-bit `payload_length` (meaningful when `som` is clear).
    pub fn payload_length(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::STD_PAYLOAD_LENGTH) & field::LEN14_MASK
    }

    /// The 32-bit `message_offset` (meaningful when `som` is clear).
    pub fn message_offset(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::STD_MESSAGE_OFFSET)
    }

    /// The 32-bit `request_length`: the total message length.
    pub fn request_length(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::STD_REQUEST_LENGTH)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> StandardPacket<T> {
    /// Writes `message_id`.
    pub fn set_message_id(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::WORD2, v);
    }

    /// Writes `buffer_offset`.
    pub fn set_buffer_offset(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::STD_BUFFER_OFFSET, v);
    }

    /// Writes `initiator`.
    pub fn set_initiator(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::STD_INITIATOR, v);
    }

    /// Writes `memory_key` / `match_bits`.
    pub fn set_memory_key(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::STD_MEMORY_KEY, v);
    }

    /// Writes bytes 32-39 as `header_data` (SOM form).
    pub fn set_header_data(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::STD_SOM_WORD, v);
    }

    /// Writes bytes 32-39 in the non-SOM form: 18 reserved zero bits,
    /// `payload_length` (low 14 bits) and `message_offset`.
    pub fn set_payload_length_offset(&mut self, payload_length: u16, message_offset: u32) {
        let b = self.buffer.as_mut();
        set_u16(b, field::STD_SOM_WORD, 0);
        set_u16(
            b,
            field::STD_PAYLOAD_LENGTH,
            payload_length & field::LEN14_MASK,
        );
        set_u32(b, field::STD_MESSAGE_OFFSET, message_offset);
    }

    /// Writes `request_length`.
    pub fn set_request_length(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::STD_REQUEST_LENGTH, v);
    }

    /// Sets or clears the `eom` flag alone.
    pub fn set_eom(&mut self, eom: bool) {
        let b = &mut self.buffer.as_mut()[field::VER_FLAGS];
        *b = (*b & !field::EOM) | if eom { field::EOM } else { 0 };
    }
}

/// Bytes 32-39 of a standard request, whose reading depends on `som` (§4.2).
/// The variant *is* the `som` flag, so the word cannot be misread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SomFields {
    /// `som` = 1: the first packet of a message carries `header_data`
    /// (completion / immediate data, valid when `hd` is set).
    Start {
        /// The 64-bit header data.
        header_data: u64,
    },
    /// `som` = 0: a later packet carries its own length and position.
    Continuation {
        /// This packet's payload length.
        payload_length: Len14,
        /// This packet's offset within the message.
        message_offset: u32,
    },
}

impl SomFields {
    /// Whether this is the SOM form.
    #[must_use]
    pub const fn is_som(self) -> bool {
        matches!(self, Self::Start { .. })
    }
}

/// A parsed standard request header (44 B, without its extension header;
/// see `ses::StandardRequest` for header + extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StandardRepr {
    /// The request opcode.
    pub opcode: Opcode,
    /// `dc`, `ie`, `rel`, `eom`.
    pub flags: RequestFlags,
    /// `hd`: `header_data` is valid (only meaningful with SOM).
    pub hd: bool,
    /// The `som` flag and the SOM-dependent bytes 32-39.
    pub som: SomFields,
    /// `message_id`.
    pub message_id: MessageId,
    /// `ri_generation`.
    pub ri_generation: RiGeneration,
    /// `job_id`.
    pub job_id: JobId,
    /// `pid_on_fep`.
    pub pid_on_fep: PidOnFep,
    /// `resource_index`.
    pub resource_index: ResourceIndex,
    /// `buffer_offset` (a restart token for DEFERRABLE_SEND / _TSEND).
    pub buffer_offset: u64,
    /// `initiator`.
    pub initiator: u32,
    /// `memory_key`, or `match_bits` for tagged opcodes (a restart token for
    /// DEFERRABLE_RTR).
    pub memory_key: u64,
    /// `request_length`: total message length in bytes.
    pub request_length: u32,
}

impl StandardRepr {
    /// Parses a standard request header; a version other than 0 is an error.
    pub fn parse<T: AsRef<[u8]>>(packet: &StandardPacket<T>) -> Result<Self> {
        check_version(packet.version())?;
        Ok(Self::decode(packet))
    }

    /// The fields, once `parse` checked the version: never fails, and
    /// panics only if `packet` is shorter than 44 bytes.
    #[inline(always)]
    pub(crate) fn decode<T: AsRef<[u8]>>(packet: &StandardPacket<T>) -> Self {
        let som = if packet.som() {
            SomFields::Start {
                header_data: packet.header_data(),
            }
        } else {
            SomFields::Continuation {
                payload_length: Len14::from_masked(packet.payload_length()),
                message_offset: packet.message_offset(),
            }
        };
        Self {
            opcode: Opcode::from_u8(packet.opcode_raw()),
            flags: RequestFlags::from_bits(packet.flags_raw()),
            hd: packet.hd(),
            som,
            message_id: MessageId::from_masked(packet.message_id()),
            ri_generation: RiGeneration::from_masked(packet.ri_generation()),
            job_id: JobId::from_masked(packet.job_id()),
            pid_on_fep: PidOnFep::from_masked(packet.pid_on_fep()),
            resource_index: ResourceIndex::from_masked(packet.resource_index()),
            buffer_offset: packet.buffer_offset(),
            initiator: packet.initiator(),
            memory_key: packet.memory_key(),
            request_length: packet.request_length(),
        }
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        STANDARD_HEADER_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut StandardPacket<T>) {
        packet.set_opcode_raw(self.opcode.code());
        packet.set_version_flags(VERSION, self.flags.bits(self.hd, self.som.is_som()));
        packet.set_message_id(self.message_id.get());
        packet.set_ri_generation(self.ri_generation.get());
        packet.set_job_id(self.job_id.get());
        packet.set_pid_on_fep(self.pid_on_fep.get());
        packet.set_resource_index(self.resource_index.get());
        packet.set_buffer_offset(self.buffer_offset);
        packet.set_initiator(self.initiator);
        packet.set_memory_key(self.memory_key);
        match self.som {
            SomFields::Start { header_data } => packet.set_header_data(header_data),
            SomFields::Continuation {
                payload_length,
                message_offset,
            } => packet.set_payload_length_offset(payload_length.get(), message_offset),
        }
        packet.set_request_length(self.request_length);
    }

    /// Whether this packet starts a message.
    #[must_use]
    pub const fn is_som(&self) -> bool {
        self.som.is_som()
    }

    /// The header data, if this is a SOM packet with `hd` set.
    #[must_use]
    pub const fn header_data(&self) -> Option<u64> {
        match self.som {
            SomFields::Start { header_data } if self.hd => Some(header_data),
            _ => None,
        }
    }

    /// This packet's offset within the message: 0 for a SOM packet.
    #[must_use]
    pub const fn message_offset(&self) -> u32 {
        match self.som {
            SomFields::Start { .. } => 0,
            SomFields::Continuation { message_offset, .. } => message_offset,
        }
    }

    /// The SES payload length of this packet (REFPROV
    /// `uet_get_ses_req_payload_len`, §4.2): with SOM,
    /// `min(packet_payload_len, request_length)`; otherwise the
    /// `payload_length` field.
    ///
    /// `packet_payload_len` is what follows the SES header (and extension)
    /// up to the trailer. For a `UET_READ` request, which carries no data,
    /// REFPROV passes its maximum payload size here instead: the result is
    /// then the length of the first read chunk.
    #[must_use]
    pub fn payload_len(&self, packet_payload_len: usize) -> usize {
        match self.som {
            SomFields::Start { .. } => {
                packet_payload_len.min(usize::try_from(self.request_length).unwrap_or(usize::MAX))
            }
            SomFields::Continuation { payload_length, .. } => usize::from(payload_length.get()),
        }
    }

    /// Where this packet's data goes in the target buffer:
    /// `buffer_offset + message_offset` (§4.2), `None` if it overflows.
    #[must_use]
    pub const fn target_offset(&self) -> Option<u64> {
        self.buffer_offset.checked_add(self.message_offset() as u64)
    }
}

impl fmt::Display for StandardRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.opcode)?;
        write_flags(f, self.flags, self.hd, self.is_som())?;
        write!(
            f,
            " job={} pid={} ri={} gen={} msg={}",
            self.job_id, self.pid_on_fep, self.resource_index, self.ri_generation, self.message_id
        )?;
        if self.initiator != 0 {
            write!(f, " ini={}", self.initiator)?;
        }
        write!(f, " off={}", self.buffer_offset)?;
        match self.som {
            SomFields::Start { header_data } => {
                if self.hd {
                    write!(f, " hdr={header_data:#x}")?;
                }
            }
            SomFields::Continuation {
                payload_length,
                message_offset,
            } => write!(f, " msg_off={message_offset} plen={payload_length}")?,
        }
        let key = if self.opcode.is_tagged() {
            "tag"
        } else {
            "key"
        };
        write!(
            f,
            " {key}={:#x} req_len={}",
            self.memory_key, self.request_length
        )
    }
}

// ---------------------------------------------------------------------------
// Medium request
// ---------------------------------------------------------------------------

ses_packet!(
    /// A read/write view of a medium request header (32 B, §4.3).
    MediumPacket,
    MEDIUM_HEADER_LEN
);
request_common!(MediumPacket);
request_length14!(MediumPacket);

impl<T: AsRef<[u8]>> MediumPacket<T> {
    /// Bytes 12-19: `header_data` when `hd` is set, `buffer_offset` otherwise.
    pub fn data_or_offset(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::MED_DATA_OR_OFFSET)
    }

    /// The 32-bit `initiator`.
    pub fn initiator(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::MED_INITIATOR)
    }

    /// The 64-bit `memory_key` / `match_bits`.
    pub fn memory_key(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::MED_MEMORY_KEY)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MediumPacket<T> {
    /// Writes bytes 12-19 (`header_data` or `buffer_offset`).
    pub fn set_data_or_offset(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::MED_DATA_OR_OFFSET, v);
    }

    /// Writes `initiator`.
    pub fn set_initiator(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::MED_INITIATOR, v);
    }

    /// Writes `memory_key` / `match_bits`.
    pub fn set_memory_key(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::MED_MEMORY_KEY, v);
    }
}

/// Bytes 12-19 of a medium request, selected by `hd` (§4.3). The variant
/// *is* the `hd` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeaderDataOrOffset {
    /// `hd` = 1: header data; the buffer offset is implicitly 0.
    HeaderData(u64),
    /// `hd` = 0: the offset into the target buffer.
    BufferOffset(u64),
}

impl HeaderDataOrOffset {
    /// The value of the `hd` flag.
    #[must_use]
    pub const fn hd(self) -> bool {
        matches!(self, Self::HeaderData(_))
    }

    /// The raw 64-bit word.
    #[must_use]
    pub const fn raw(self) -> u64 {
        match self {
            Self::HeaderData(v) | Self::BufferOffset(v) => v,
        }
    }
}

/// A parsed medium request header (32 B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MediumRepr {
    /// The request opcode.
    pub opcode: Opcode,
    /// `dc`, `ie`, `rel`, `eom`.
    pub flags: RequestFlags,
    /// `som` (medium requests are single-packet messages: `som` and `eom` are
    /// normally both set, per Wireshark; not enforced).
    pub som: bool,
    /// `request_length` (14 bits).
    pub request_length: Len14,
    /// `ri_generation`.
    pub ri_generation: RiGeneration,
    /// `job_id`.
    pub job_id: JobId,
    /// `pid_on_fep`.
    pub pid_on_fep: PidOnFep,
    /// `resource_index`.
    pub resource_index: ResourceIndex,
    /// `hd` and bytes 12-19.
    pub data_or_offset: HeaderDataOrOffset,
    /// `initiator`.
    pub initiator: u32,
    /// `memory_key`, or `match_bits` for tagged opcodes.
    pub memory_key: u64,
}

impl MediumRepr {
    /// Parses a medium request header; a version other than 0 is an error.
    pub fn parse<T: AsRef<[u8]>>(packet: &MediumPacket<T>) -> Result<Self> {
        check_version(packet.version())?;
        let word = packet.data_or_offset();
        Ok(Self {
            opcode: Opcode::from_u8(packet.opcode_raw()),
            flags: RequestFlags::from_bits(packet.flags_raw()),
            som: packet.som(),
            request_length: Len14::from_masked(packet.request_length()),
            ri_generation: RiGeneration::from_masked(packet.ri_generation()),
            job_id: JobId::from_masked(packet.job_id()),
            pid_on_fep: PidOnFep::from_masked(packet.pid_on_fep()),
            resource_index: ResourceIndex::from_masked(packet.resource_index()),
            data_or_offset: if packet.hd() {
                HeaderDataOrOffset::HeaderData(word)
            } else {
                HeaderDataOrOffset::BufferOffset(word)
            },
            initiator: packet.initiator(),
            memory_key: packet.memory_key(),
        })
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        MEDIUM_HEADER_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut MediumPacket<T>) {
        packet.set_opcode_raw(self.opcode.code());
        packet.set_version_flags(VERSION, self.flags.bits(self.data_or_offset.hd(), self.som));
        packet.set_request_length(self.request_length.get());
        packet.set_ri_generation(self.ri_generation.get());
        packet.set_job_id(self.job_id.get());
        packet.set_pid_on_fep(self.pid_on_fep.get());
        packet.set_resource_index(self.resource_index.get());
        packet.set_data_or_offset(self.data_or_offset.raw());
        packet.set_initiator(self.initiator);
        packet.set_memory_key(self.memory_key);
    }

    /// The buffer offset (0 when the word carries header data).
    #[must_use]
    pub const fn buffer_offset(&self) -> u64 {
        match self.data_or_offset {
            HeaderDataOrOffset::HeaderData(_) => 0,
            HeaderDataOrOffset::BufferOffset(v) => v,
        }
    }

    /// The header data, if `hd` is set.
    #[must_use]
    pub const fn header_data(&self) -> Option<u64> {
        match self.data_or_offset {
            HeaderDataOrOffset::HeaderData(v) => Some(v),
            HeaderDataOrOffset::BufferOffset(_) => None,
        }
    }

    /// The SES payload length: `min(packet_payload_len, request_length)`
    /// (a single-packet message, as a SOM standard request).
    #[must_use]
    pub fn payload_len(&self, packet_payload_len: usize) -> usize {
        packet_payload_len.min(usize::from(self.request_length.get()))
    }
}

impl fmt::Display for MediumRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} medium", self.opcode)?;
        write_flags(f, self.flags, self.data_or_offset.hd(), self.som)?;
        write!(
            f,
            " job={} pid={} ri={} gen={}",
            self.job_id, self.pid_on_fep, self.resource_index, self.ri_generation
        )?;
        if self.initiator != 0 {
            write!(f, " ini={}", self.initiator)?;
        }
        match self.data_or_offset {
            HeaderDataOrOffset::HeaderData(v) => write!(f, " hdr={v:#x}")?,
            HeaderDataOrOffset::BufferOffset(v) => write!(f, " off={v}")?,
        }
        let key = if self.opcode.is_tagged() {
            "tag"
        } else {
            "key"
        };
        write!(
            f,
            " {key}={:#x} req_len={}",
            self.memory_key, self.request_length
        )
    }
}

// ---------------------------------------------------------------------------
// Small request
// ---------------------------------------------------------------------------

ses_packet!(
    /// A read/write view of a small ("optimized non-matching") request
    /// header (20 B, §4.3).
    SmallPacket,
    SMALL_HEADER_LEN
);
request_common!(SmallPacket);
request_length14!(SmallPacket);

impl<T: AsRef<[u8]>> SmallPacket<T> {
    /// The 64-bit `buffer_offset`.
    pub fn buffer_offset(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::SMALL_BUFFER_OFFSET)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SmallPacket<T> {
    /// Writes `buffer_offset`.
    pub fn set_buffer_offset(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::SMALL_BUFFER_OFFSET, v);
    }
}

/// A parsed small request header (20 B). `hd` is reserved in this header:
/// ignored on parse, written as 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SmallRepr {
    /// The request opcode.
    pub opcode: Opcode,
    /// `dc`, `ie`, `rel`, `eom`.
    pub flags: RequestFlags,
    /// `som` (single-packet: normally set together with `eom`; not enforced).
    pub som: bool,
    /// `request_length` (14 bits).
    pub request_length: Len14,
    /// `ri_generation`.
    pub ri_generation: RiGeneration,
    /// `job_id`.
    pub job_id: JobId,
    /// `pid_on_fep`.
    pub pid_on_fep: PidOnFep,
    /// `resource_index`.
    pub resource_index: ResourceIndex,
    /// `buffer_offset`.
    pub buffer_offset: u64,
}

impl SmallRepr {
    /// Parses a small request header; a version other than 0 is an error.
    pub fn parse<T: AsRef<[u8]>>(packet: &SmallPacket<T>) -> Result<Self> {
        check_version(packet.version())?;
        Ok(Self {
            opcode: Opcode::from_u8(packet.opcode_raw()),
            flags: RequestFlags::from_bits(packet.flags_raw()),
            som: packet.som(),
            request_length: Len14::from_masked(packet.request_length()),
            ri_generation: RiGeneration::from_masked(packet.ri_generation()),
            job_id: JobId::from_masked(packet.job_id()),
            pid_on_fep: PidOnFep::from_masked(packet.pid_on_fep()),
            resource_index: ResourceIndex::from_masked(packet.resource_index()),
            buffer_offset: packet.buffer_offset(),
        })
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        SMALL_HEADER_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut SmallPacket<T>) {
        packet.set_opcode_raw(self.opcode.code());
        packet.set_version_flags(VERSION, self.flags.bits(false, self.som));
        packet.set_request_length(self.request_length.get());
        packet.set_ri_generation(self.ri_generation.get());
        packet.set_job_id(self.job_id.get());
        packet.set_pid_on_fep(self.pid_on_fep.get());
        packet.set_resource_index(self.resource_index.get());
        packet.set_buffer_offset(self.buffer_offset);
    }

    /// The SES payload length: `min(packet_payload_len, request_length)`.
    #[must_use]
    pub fn payload_len(&self, packet_payload_len: usize) -> usize {
        packet_payload_len.min(usize::from(self.request_length.get()))
    }
}

impl fmt::Display for SmallRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} small", self.opcode)?;
        write_flags(f, self.flags, false, self.som)?;
        write!(
            f,
            " job={} pid={} ri={} gen={} off={} req_len={}",
            self.job_id,
            self.pid_on_fep,
            self.resource_index,
            self.ri_generation,
            self.buffer_offset,
            self.request_length
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ses::testutil::{arb_medium, arb_small, arb_standard};
    use proptest::prelude::*;

    /// UET_WRITE, SOM + EOM + HD, standard header (§4.1/§4.2 tables).
    #[rustfmt::skip]
    const STD_WRITE_SOM_HD: [u8; 44] = [
        0x01,                   // rsvd 0 | opcode 0x01 UET_WRITE
        0x07,                   // version 0 | hd 0x04 | eom 0x02 | som 0x01
        0x00, 0x09,             // message_id 9
        0x01,                   // ri_generation 1
        0x00, 0x00, 0x07,       // job_id 7
        0x00, 0x03,             // rsvd | pid_on_fep 3
        0x00, 0x0c,             // rsvd | resource_index 12
        0, 0, 0, 0, 0, 0, 0x10, 0x00,             // buffer_offset 4096
        0x00, 0x00, 0x00, 0x2a,                   // initiator 42
        0, 0, 0, 0, 0, 0, 0x0a, 0xbc,             // memory_key 0xabc
        0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04, // header_data
        0x00, 0x01, 0x00, 0x00,                   // request_length 65536
    ];

    fn std_write_som_hd() -> StandardRepr {
        StandardRepr {
            opcode: Opcode::Write,
            flags: RequestFlags {
                dc: false,
                ie: false,
                rel: false,
                eom: true,
            },
            hd: true,
            som: SomFields::Start {
                header_data: 0xdead_beef_0102_0304,
            },
            message_id: MessageId::new(9).unwrap(),
            ri_generation: RiGeneration::new(1).unwrap(),
            job_id: JobId::new(7).unwrap(),
            pid_on_fep: PidOnFep::new(3).unwrap(),
            resource_index: ResourceIndex::new(12).unwrap(),
            buffer_offset: 4096,
            initiator: 42,
            memory_key: 0xabc,
            request_length: 65536,
        }
    }

    /// UET_SEND, neither SOM nor EOM, rel + dc: a middle packet.
    #[rustfmt::skip]
    const STD_SEND_MIDDLE: [u8; 44] = [
        0x05,                   // UET_SEND
        0x28,                   // version 0 | dc 0x20 | rel 0x08
        0x12, 0x34,             // message_id 0x1234
        0xff,                   // ri_generation 255
        0xab, 0xcd, 0xef,       // job_id 0xabcdef
        0x0f, 0xff,             // pid_on_fep 4095
        0x08, 0x00,             // resource_index 2048
        0, 0, 0, 0, 0, 0, 0, 0,                   // buffer_offset 0
        0, 0, 0, 0,                               // initiator 0
        0, 0, 0, 0, 0, 0, 0, 0x05,                // memory_key 5
        0x00, 0x00, 0x10, 0x00,                   // rsvd 18 | payload_length 4096
        0x00, 0x00, 0x20, 0x00,                   // message_offset 8192
        0x00, 0x00, 0x40, 0x00,                   // request_length 16384
    ];

    fn std_send_middle() -> StandardRepr {
        StandardRepr {
            opcode: Opcode::Send,
            flags: RequestFlags {
                dc: true,
                ie: false,
                rel: true,
                eom: false,
            },
            hd: false,
            som: SomFields::Continuation {
                payload_length: Len14::new(4096).unwrap(),
                message_offset: 8192,
            },
            message_id: MessageId::new(0x1234).unwrap(),
            ri_generation: RiGeneration::new(255).unwrap(),
            job_id: JobId::new(0xab_cdef).unwrap(),
            pid_on_fep: PidOnFep::new(4095).unwrap(),
            resource_index: ResourceIndex::new(2048).unwrap(),
            buffer_offset: 0,
            initiator: 0,
            memory_key: 5,
            request_length: 16384,
        }
    }

    /// UET_TAGGED_SEND medium request with header data, SOM + EOM + HD.
    #[rustfmt::skip]
    const MEDIUM_TSEND_HD: [u8; 32] = [
        0x09,                   // UET_TAGGED_SEND
        0x07,                   // hd | eom | som
        0x00, 0x40,             // rsvd 2 | request_length 64
        0x02,                   // ri_generation 2
        0x00, 0x01, 0x00,       // job_id 256
        0x00, 0x11,             // pid_on_fep 17
        0x00, 0x22,             // resource_index 34
        0, 0, 0, 0, 0, 0, 0x12, 0x34,             // header_data 0x1234
        0x00, 0x00, 0x00, 0x07,                   // initiator 7
        0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10, // match_bits
    ];

    fn medium_tsend_hd() -> MediumRepr {
        MediumRepr {
            opcode: Opcode::TaggedSend,
            flags: RequestFlags {
                eom: true,
                ..RequestFlags::default()
            },
            som: true,
            request_length: Len14::new(64).unwrap(),
            ri_generation: RiGeneration::new(2).unwrap(),
            job_id: JobId::new(256).unwrap(),
            pid_on_fep: PidOnFep::new(17).unwrap(),
            resource_index: ResourceIndex::new(34).unwrap(),
            data_or_offset: HeaderDataOrOffset::HeaderData(0x1234),
            initiator: 7,
            memory_key: 0xfedc_ba98_7654_3210,
        }
    }

    /// UET_WRITE small request, SOM + EOM, rel.
    #[rustfmt::skip]
    const SMALL_WRITE: [u8; 20] = [
        0x01,                   // UET_WRITE
        0x0b,                   // rel 0x08 | eom | som
        0x3f, 0xff,             // rsvd 2 | request_length 16383
        0x00,                   // ri_generation 0
        0x00, 0x00, 0x01,       // job_id 1
        0x00, 0x02,             // pid_on_fep 2
        0x00, 0x03,             // resource_index 3
        0, 0, 0, 0, 0, 0, 0x80, 0x00,             // buffer_offset 32768
    ];

    fn small_write() -> SmallRepr {
        SmallRepr {
            opcode: Opcode::Write,
            flags: RequestFlags {
                rel: true,
                eom: true,
                ..RequestFlags::default()
            },
            som: true,
            request_length: Len14::new(16383).unwrap(),
            ri_generation: RiGeneration::new(0).unwrap(),
            job_id: JobId::new(1).unwrap(),
            pid_on_fep: PidOnFep::new(2).unwrap(),
            resource_index: ResourceIndex::new(3).unwrap(),
            buffer_offset: 32768,
        }
    }

    #[test]
    fn standard_som_golden_parse() {
        let p = StandardPacket::new_checked(&STD_WRITE_SOM_HD[..]).unwrap();
        assert_eq!(p.opcode_raw(), 0x01);
        assert!(p.som() && p.eom() && p.hd() && !p.rel());
        let r = StandardRepr::parse(&p).unwrap();
        assert_eq!(r, std_write_som_hd());
        assert_eq!(r.header_data(), Some(0xdead_beef_0102_0304));
        assert_eq!(r.target_offset(), Some(4096));
        assert_eq!(r.payload_len(100_000), 65536);
        assert_eq!(r.payload_len(1024), 1024);
    }

    #[test]
    fn standard_som_golden_emit() {
        let mut b = [0xffu8; 44];
        std_write_som_hd().emit(&mut StandardPacket::new_unchecked(&mut b[..]));
        assert_eq!(b, STD_WRITE_SOM_HD);
    }

    #[test]
    fn standard_continuation_golden() {
        let r = StandardRepr::parse(&StandardPacket::new_checked(&STD_SEND_MIDDLE[..]).unwrap())
            .unwrap();
        assert_eq!(r, std_send_middle());
        assert!(!r.is_som());
        assert_eq!(r.header_data(), None);
        assert_eq!(r.payload_len(9000), 4096);
        assert_eq!(r.target_offset(), Some(8192));
        let mut b = [0xffu8; 44];
        r.emit(&mut StandardPacket::new_unchecked(&mut b[..]));
        assert_eq!(b, STD_SEND_MIDDLE);
    }

    #[test]
    fn reserved_bits_are_ignored() {
        let mut b = STD_SEND_MIDDLE;
        b[0] |= 0xc0; // rsvd above the opcode
        b[8] |= 0xf0; // rsvd above pid_on_fep
        b[10] |= 0xf0; // rsvd above resource_index
        b[32] = 0xff; // 18 rsvd bits of the non-SOM word
        b[34] |= 0xc0;
        let r = StandardRepr::parse(&StandardPacket::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r, std_send_middle());
    }

    #[test]
    fn target_offset_overflow_is_none() {
        let mut r = std_send_middle();
        r.buffer_offset = u64::MAX;
        assert_eq!(r.target_offset(), None);
    }

    #[test]
    fn medium_golden() {
        let p = MediumPacket::new_checked(&MEDIUM_TSEND_HD[..]).unwrap();
        assert_eq!(p.request_length(), 64);
        let r = MediumRepr::parse(&p).unwrap();
        assert_eq!(r, medium_tsend_hd());
        assert_eq!(r.header_data(), Some(0x1234));
        assert_eq!(r.buffer_offset(), 0);
        let mut b = [0xffu8; 32];
        r.emit(&mut MediumPacket::new_unchecked(&mut b[..]));
        assert_eq!(b, MEDIUM_TSEND_HD);
    }

    #[test]
    fn small_golden() {
        let p = SmallPacket::new_checked(&SMALL_WRITE[..]).unwrap();
        let r = SmallRepr::parse(&p).unwrap();
        assert_eq!(r, small_write());
        assert_eq!(r.payload_len(20_000), 16383);
        let mut b = [0xffu8; 20];
        r.emit(&mut SmallPacket::new_unchecked(&mut b[..]));
        assert_eq!(b, SMALL_WRITE);
    }

    #[test]
    fn small_hd_is_reserved() {
        let mut b = SMALL_WRITE;
        b[1] |= 0x04;
        let r = SmallRepr::parse(&SmallPacket::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r, small_write());
    }

    #[test]
    fn bad_version_points_at_byte_1() {
        let mut b = STD_WRITE_SOM_HD;
        b[1] |= 0x40;
        let e = StandardRepr::parse(&StandardPacket::new_checked(&b[..]).unwrap()).unwrap_err();
        assert_eq!(e, Error::new(Layer::Ses, ErrorKind::BadVersion, 1));
        let mut m = MEDIUM_TSEND_HD;
        m[1] |= 0x80;
        let e = MediumRepr::parse(&MediumPacket::new_checked(&m[..]).unwrap()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadVersion);
        let mut s = SMALL_WRITE;
        s[1] |= 0xc0;
        let e = SmallRepr::parse(&SmallPacket::new_checked(&s[..]).unwrap()).unwrap_err();
        assert_eq!(e.offset, 1);
    }

    #[test]
    fn truncation() {
        assert_eq!(
            StandardPacket::new_checked(&STD_WRITE_SOM_HD[..43]).unwrap_err(),
            Error::truncated(Layer::Ses, 44, 43)
        );
        assert_eq!(
            MediumPacket::new_checked(&MEDIUM_TSEND_HD[..31]).unwrap_err(),
            Error::truncated(Layer::Ses, 32, 31)
        );
        assert_eq!(
            SmallPacket::new_checked(&[][..]).unwrap_err(),
            Error::truncated(Layer::Ses, 20, 0)
        );
    }

    #[test]
    fn display() {
        let mut r = std_write_som_hd();
        r.hd = false;
        r.initiator = 0;
        assert_eq!(
            r.to_string(),
            "UET_WRITE som eom job=7 pid=3 ri=12 gen=1 msg=9 off=4096 key=0xabc req_len=65536"
        );
        assert_eq!(
            std_send_middle().to_string(),
            "UET_SEND rel dc job=11259375 pid=4095 ri=2048 gen=255 msg=4660 off=0 \
             msg_off=8192 plen=4096 key=0x5 req_len=16384"
        );
        assert_eq!(
            medium_tsend_hd().to_string(),
            "UET_TAGGED_SEND medium som eom hd job=256 pid=17 ri=34 gen=2 ini=7 hdr=0x1234 \
             tag=0xfedcba9876543210 req_len=64"
        );
        assert_eq!(
            small_write().to_string(),
            "UET_WRITE small som eom rel job=1 pid=2 ri=3 gen=0 off=32768 req_len=16383"
        );
    }

    proptest! {
        #[test]
        fn standard_round_trip(r in arb_standard()) {
            let mut b = [0u8; STANDARD_HEADER_LEN];
            r.emit(&mut StandardPacket::new_unchecked(&mut b[..]));
            prop_assert_eq!(r.buffer_len(), b.len());
            prop_assert_eq!(StandardRepr::parse(&StandardPacket::new_checked(&b[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn medium_round_trip(r in arb_medium()) {
            let mut b = [0u8; MEDIUM_HEADER_LEN];
            r.emit(&mut MediumPacket::new_unchecked(&mut b[..]));
            prop_assert_eq!(r.buffer_len(), b.len());
            prop_assert_eq!(MediumRepr::parse(&MediumPacket::new_checked(&b[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn small_round_trip(r in arb_small()) {
            let mut b = [0u8; SMALL_HEADER_LEN];
            r.emit(&mut SmallPacket::new_unchecked(&mut b[..]));
            prop_assert_eq!(r.buffer_len(), b.len());
            prop_assert_eq!(SmallRepr::parse(&SmallPacket::new_checked(&b[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn flags_round_trip(bits in 0u8..64) {
            let f = RequestFlags::from_bits(bits);
            prop_assert_eq!(f.bits(bits & 0x04 != 0, bits & 0x01 != 0), bits);
        }
    }
}
