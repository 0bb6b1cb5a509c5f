//! SES response headers (`docs/protocol-notes.md` §4.6):
//!
//! ```text
//! UET_HDR_RESPONSE (12 B)
//!   0      list:2 | opcode:6
//!   1      version:2 | return_code:6
//!   2-3    message_id:16
//!   4      ri_generation:8
//!   5-7    job_id:24
//!   8-11   modified_length:32
//!
//! UET_HDR_RESPONSE_DATA (20 B + data)
//!   0-1    as above
//!   2-3    message_id:16
//!   4      rsvd:8
//!   5-7    job_id:24
//!   8-9    read_request_message_id:16
//!   10-11  rsvd:2 | payload_length:14
//!   12-15  modified_length:32
//!   16-19  message_offset:32
//!
//! UET_HDR_RESPONSE_DATA_SMALL (12 B + data)
//!   0-1    as above
//!   2-3    rsvd:2 | payload_length:14
//!   4      rsvd:8
//!   5-7    job_id:24
//!   8-11   original_request_psn:32
//! ```
//!
//! `payload_length` is 14 bits (REFPROV and Wireshark; XDP2's 12 bits is
//! wrong). `ri_generation` exists only in `UET_HDR_RESPONSE` (REFPROV). A
//! version other than 0 is [`ErrorKind::BadVersion`] at byte 1; reserved bits
//! are ignored on parse and written as zero.

use core::fmt;

use crate::error::{Error, ErrorKind, Layer, Result};
use crate::field::{set_u16, set_u24, set_u32, u16_at, u24_at, u32_at};
use crate::types::{JobId, Len14, MessageId, Psn, RiGeneration};

use super::opcode::{ListKind, ResponseOpcode};
use super::return_code::ReturnCode;

/// Length of `UET_HDR_RESPONSE`.
pub const RESPONSE_HEADER_LEN: usize = 12;
/// Length of `UET_HDR_RESPONSE_DATA` (without the data).
pub const RESPONSE_DATA_HEADER_LEN: usize = 20;
/// Length of `UET_HDR_RESPONSE_DATA_SMALL` (without the data).
pub const RESPONSE_DATA_SMALL_HEADER_LEN: usize = 12;

mod field {
    pub(super) const LIST_OPCODE: usize = 0;
    pub(super) const VER_RC: usize = 1;
    /// RESPONSE / RESPONSE_DATA: `message_id`; DATA_SMALL: rsvd 2 +
    /// `payload_length` 14.
    pub(super) const WORD2: usize = 2;
    pub(super) const RI_GENERATION: usize = 4;
    pub(super) const JOB_ID: usize = 5;

    pub(super) const RSP_MODIFIED_LENGTH: usize = 8;

    pub(super) const RD_READ_REQUEST_MESSAGE_ID: usize = 8;
    pub(super) const RD_PAYLOAD_LENGTH: usize = 10;
    pub(super) const RD_MODIFIED_LENGTH: usize = 12;
    pub(super) const RD_MESSAGE_OFFSET: usize = 16;

    pub(super) const RDS_ORIGINAL_REQUEST_PSN: usize = 8;

    pub(super) const HIGH2_SHIFT: u8 = 6;
    pub(super) const LOW6_MASK: u8 = 0x3f;
    pub(super) const LEN14_MASK: u16 = 0x3fff;
}

/// Generates the accessors of bytes 0-1 and 5-7, common to all responses.
macro_rules! response_common {
    ($name:ident) => {
        impl<T: AsRef<[u8]>> $name<T> {
            /// The raw 2-bit `list`.
            pub fn list_raw(&self) -> u8 {
                self.buffer.as_ref()[field::LIST_OPCODE] >> field::HIGH2_SHIFT
            }

            /// The raw 6-bit response `opcode`.
            pub fn opcode_raw(&self) -> u8 {
                self.buffer.as_ref()[field::LIST_OPCODE] & field::LOW6_MASK
            }

            /// The 2-bit `version`.
            pub fn version(&self) -> u8 {
                self.buffer.as_ref()[field::VER_RC] >> field::HIGH2_SHIFT
            }

            /// The raw 6-bit `return_code`.
            pub fn return_code_raw(&self) -> u8 {
                self.buffer.as_ref()[field::VER_RC] & field::LOW6_MASK
            }

            /// The 24-bit `job_id`.
            pub fn job_id(&self) -> u32 {
                u24_at(self.buffer.as_ref(), field::JOB_ID)
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            /// Writes `list` (2 bits) and `opcode` (6 bits).
            pub fn set_list_opcode(&mut self, list: u8, opcode: u8) {
                self.buffer.as_mut()[field::LIST_OPCODE] =
                    ((list & 0x03) << field::HIGH2_SHIFT) | (opcode & field::LOW6_MASK);
            }

            /// Writes `version` (2 bits) and `return_code` (6 bits).
            pub fn set_version_return_code(&mut self, version: u8, return_code: u8) {
                self.buffer.as_mut()[field::VER_RC] =
                    ((version & 0x03) << field::HIGH2_SHIFT) | (return_code & field::LOW6_MASK);
            }

            /// Writes `job_id` (low 24 bits).
            pub fn set_job_id(&mut self, v: u32) {
                set_u24(self.buffer.as_mut(), field::JOB_ID, v);
            }
        }
    };
}

/// The fields of bytes 0-1, parsed; a version other than 0 is an error.
fn parse_common(
    list: u8,
    opcode: u8,
    version: u8,
    rc: u8,
) -> Result<(ListKind, ResponseOpcode, ReturnCode)> {
    if version != super::request::VERSION {
        return Err(Error::new(Layer::Ses, ErrorKind::BadVersion, field::VER_RC));
    }
    Ok((
        ListKind::from_u8(list),
        ResponseOpcode::from_u8(opcode),
        ReturnCode::from_u8(rc),
    ))
}

/// Writes `opcode return_code` and, unless it is EXPECTED, `list=…`.
fn write_common(
    f: &mut fmt::Formatter<'_>,
    opcode: ResponseOpcode,
    small: bool,
    rc: ReturnCode,
    list: ListKind,
) -> fmt::Result {
    write!(f, "{opcode}")?;
    if small {
        f.write_str(" small")?;
    }
    write!(f, " {rc}")?;
    if list != ListKind::Expected {
        write!(f, " list={list}")?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// UET_HDR_RESPONSE
// ---------------------------------------------------------------------------

ses_packet!(
    /// A read/write view of a `UET_HDR_RESPONSE` header (12 B).
    ResponsePacket,
    RESPONSE_HEADER_LEN
);
response_common!(ResponsePacket);

impl<T: AsRef<[u8]>> ResponsePacket<T> {
    /// The 16-bit `message_id` of the request answered.
    pub fn message_id(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::WORD2)
    }

    /// The 8-bit `ri_generation`.
    pub fn ri_generation(&self) -> u8 {
        self.buffer.as_ref()[field::RI_GENERATION]
    }

    /// The 32-bit `modified_length`.
    pub fn modified_length(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::RSP_MODIFIED_LENGTH)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ResponsePacket<T> {
    /// Writes `message_id`.
    pub fn set_message_id(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::WORD2, v);
    }

    /// Writes `ri_generation`.
    pub fn set_ri_generation(&mut self, v: u8) {
        self.buffer.as_mut()[field::RI_GENERATION] = v;
    }

    /// Writes `modified_length`.
    pub fn set_modified_length(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::RSP_MODIFIED_LENGTH, v);
    }
}

/// A parsed `UET_HDR_RESPONSE` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResponseRepr {
    /// Which receive list matched.
    pub list: ListKind,
    /// The response opcode.
    pub opcode: ResponseOpcode,
    /// The return code.
    pub return_code: ReturnCode,
    /// `message_id` of the request answered.
    pub message_id: MessageId,
    /// `ri_generation`.
    pub ri_generation: RiGeneration,
    /// `job_id`.
    pub job_id: JobId,
    /// `modified_length`: bytes actually placed or modified at the target.
    pub modified_length: u32,
}

impl ResponseRepr {
    /// Parses the header; a version other than 0 is an error.
    pub fn parse<T: AsRef<[u8]>>(packet: &ResponsePacket<T>) -> Result<Self> {
        let (list, opcode, return_code) = parse_common(
            packet.list_raw(),
            packet.opcode_raw(),
            packet.version(),
            packet.return_code_raw(),
        )?;
        Ok(Self {
            list,
            opcode,
            return_code,
            message_id: MessageId::from_masked(packet.message_id()),
            ri_generation: RiGeneration::from_masked(packet.ri_generation()),
            job_id: JobId::from_masked(packet.job_id()),
            modified_length: packet.modified_length(),
        })
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        RESPONSE_HEADER_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ResponsePacket<T>) {
        packet.set_list_opcode(self.list.code(), self.opcode.code());
        packet.set_version_return_code(super::request::VERSION, self.return_code.code());
        packet.set_message_id(self.message_id.get());
        packet.set_ri_generation(self.ri_generation.get());
        packet.set_job_id(self.job_id.get());
        packet.set_modified_length(self.modified_length);
    }
}

impl fmt::Display for ResponseRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_common(f, self.opcode, false, self.return_code, self.list)?;
        write!(
            f,
            " job={} gen={} msg={} mod_len={}",
            self.job_id, self.ri_generation, self.message_id, self.modified_length
        )
    }
}

// ---------------------------------------------------------------------------
// UET_HDR_RESPONSE_DATA
// ---------------------------------------------------------------------------

ses_packet!(
    /// A read/write view of a `UET_HDR_RESPONSE_DATA` header (20 B + data).
    ResponseDataPacket,
    RESPONSE_DATA_HEADER_LEN
);
response_common!(ResponseDataPacket);

impl<T: AsRef<[u8]>> ResponseDataPacket<T> {
    /// The 16-bit `message_id`.
    pub fn message_id(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::WORD2)
    }

    /// The 16-bit `read_request_message_id`: the message ID of the read
    /// request this data answers.
    pub fn read_request_message_id(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::RD_READ_REQUEST_MESSAGE_ID)
    }

    /// The 14-bit `payload_length`.
    pub fn payload_length(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::RD_PAYLOAD_LENGTH) & field::LEN14_MASK
    }

    /// The 32-bit `modified_length`.
    pub fn modified_length(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::RD_MODIFIED_LENGTH)
    }

    /// The 32-bit `message_offset` of this data within the read.
    pub fn message_offset(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::RD_MESSAGE_OFFSET)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ResponseDataPacket<T> {
    /// Writes `message_id`.
    pub fn set_message_id(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::WORD2, v);
    }

    /// Writes the reserved byte 4 as zero.
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[field::RI_GENERATION] = 0;
    }

    /// Writes `read_request_message_id`.
    pub fn set_read_request_message_id(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::RD_READ_REQUEST_MESSAGE_ID, v);
    }

    /// Writes `payload_length` (low 14 bits; the reserved bits become 0).
    pub fn set_payload_length(&mut self, v: u16) {
        set_u16(
            self.buffer.as_mut(),
            field::RD_PAYLOAD_LENGTH,
            v & field::LEN14_MASK,
        );
    }

    /// Writes `modified_length`.
    pub fn set_modified_length(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::RD_MODIFIED_LENGTH, v);
    }

    /// Writes `message_offset`.
    pub fn set_message_offset(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::RD_MESSAGE_OFFSET, v);
    }
}

/// A parsed `UET_HDR_RESPONSE_DATA` header (the data follows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResponseDataRepr {
    /// Which receive list matched.
    pub list: ListKind,
    /// The response opcode (normally `UET_RESPONSE_W_DATA`).
    pub opcode: ResponseOpcode,
    /// The return code.
    pub return_code: ReturnCode,
    /// `message_id`.
    pub message_id: MessageId,
    /// `job_id`.
    pub job_id: JobId,
    /// `read_request_message_id`: the originator's read message ID (§3).
    pub read_request_message_id: MessageId,
    /// `payload_length`: data bytes in this packet.
    pub payload_length: Len14,
    /// `modified_length`.
    pub modified_length: u32,
    /// `message_offset` of this data within the read.
    pub message_offset: u32,
}

impl ResponseDataRepr {
    /// Parses the header; a version other than 0 is an error.
    pub fn parse<T: AsRef<[u8]>>(packet: &ResponseDataPacket<T>) -> Result<Self> {
        let (list, opcode, return_code) = parse_common(
            packet.list_raw(),
            packet.opcode_raw(),
            packet.version(),
            packet.return_code_raw(),
        )?;
        Ok(Self {
            list,
            opcode,
            return_code,
            message_id: MessageId::from_masked(packet.message_id()),
            job_id: JobId::from_masked(packet.job_id()),
            read_request_message_id: MessageId::from_masked(packet.read_request_message_id()),
            payload_length: Len14::from_masked(packet.payload_length()),
            modified_length: packet.modified_length(),
            message_offset: packet.message_offset(),
        })
    }

    /// Bytes `emit` writes (the header only).
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        RESPONSE_DATA_HEADER_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ResponseDataPacket<T>) {
        packet.set_list_opcode(self.list.code(), self.opcode.code());
        packet.set_version_return_code(super::request::VERSION, self.return_code.code());
        packet.set_message_id(self.message_id.get());
        packet.clear_reserved();
        packet.set_job_id(self.job_id.get());
        packet.set_read_request_message_id(self.read_request_message_id.get());
        packet.set_payload_length(self.payload_length.get());
        packet.set_modified_length(self.modified_length);
        packet.set_message_offset(self.message_offset);
    }
}

impl fmt::Display for ResponseDataRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_common(f, self.opcode, false, self.return_code, self.list)?;
        write!(
            f,
            " job={} msg={} rd_msg={} msg_off={} plen={} mod_len={}",
            self.job_id,
            self.message_id,
            self.read_request_message_id,
            self.message_offset,
            self.payload_length,
            self.modified_length
        )
    }
}

// ---------------------------------------------------------------------------
// UET_HDR_RESPONSE_DATA_SMALL
// ---------------------------------------------------------------------------

ses_packet!(
    /// A read/write view of a `UET_HDR_RESPONSE_DATA_SMALL` header (12 B +
    /// data).
    ResponseDataSmallPacket,
    RESPONSE_DATA_SMALL_HEADER_LEN
);
response_common!(ResponseDataSmallPacket);

impl<T: AsRef<[u8]>> ResponseDataSmallPacket<T> {
    /// The 14-bit `payload_length`.
    pub fn payload_length(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::WORD2) & field::LEN14_MASK
    }

    /// The 32-bit `original_request_psn`: the PSN of the read request (small
    /// and medium requests have no message ID, §3).
    pub fn original_request_psn(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::RDS_ORIGINAL_REQUEST_PSN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ResponseDataSmallPacket<T> {
    /// Writes `payload_length` (low 14 bits; the reserved bits become 0).
    pub fn set_payload_length(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::WORD2, v & field::LEN14_MASK);
    }

    /// Writes the reserved byte 4 as zero.
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[field::RI_GENERATION] = 0;
    }

    /// Writes `original_request_psn`.
    pub fn set_original_request_psn(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::RDS_ORIGINAL_REQUEST_PSN, v);
    }
}

/// A parsed `UET_HDR_RESPONSE_DATA_SMALL` header (the data follows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResponseDataSmallRepr {
    /// Which receive list matched.
    pub list: ListKind,
    /// The response opcode (normally `UET_RESPONSE_W_DATA`).
    pub opcode: ResponseOpcode,
    /// The return code.
    pub return_code: ReturnCode,
    /// `payload_length`: data bytes in this packet.
    pub payload_length: Len14,
    /// `job_id`.
    pub job_id: JobId,
    /// `original_request_psn`: the PSN of the read request answered.
    pub original_request_psn: Psn,
}

impl ResponseDataSmallRepr {
    /// Parses the header; a version other than 0 is an error.
    pub fn parse<T: AsRef<[u8]>>(packet: &ResponseDataSmallPacket<T>) -> Result<Self> {
        let (list, opcode, return_code) = parse_common(
            packet.list_raw(),
            packet.opcode_raw(),
            packet.version(),
            packet.return_code_raw(),
        )?;
        Ok(Self {
            list,
            opcode,
            return_code,
            payload_length: Len14::from_masked(packet.payload_length()),
            job_id: JobId::from_masked(packet.job_id()),
            original_request_psn: Psn(packet.original_request_psn()),
        })
    }

    /// Bytes `emit` writes (the header only).
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        RESPONSE_DATA_SMALL_HEADER_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ResponseDataSmallPacket<T>) {
        packet.set_list_opcode(self.list.code(), self.opcode.code());
        packet.set_version_return_code(super::request::VERSION, self.return_code.code());
        packet.set_payload_length(self.payload_length.get());
        packet.clear_reserved();
        packet.set_job_id(self.job_id.get());
        packet.set_original_request_psn(self.original_request_psn.0);
    }
}

impl fmt::Display for ResponseDataSmallRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_common(f, self.opcode, true, self.return_code, self.list)?;
        write!(
            f,
            " job={} orig_psn={} plen={}",
            self.job_id, self.original_request_psn, self.payload_length
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ses::testutil::{arb_response, arb_response_data, arb_response_data_small};
    use proptest::prelude::*;

    /// UET_RESPONSE, RC_OK, EXPECTED list, msg 9, gen 1, job 7, 4096 bytes.
    #[rustfmt::skip]
    const RESPONSE_OK: [u8; 12] = [
        0x01,                   // list 0 EXPECTED | opcode 1 UET_RESPONSE
        0x01,                   // version 0 | RC_OK
        0x00, 0x09,             // message_id 9
        0x01,                   // ri_generation 1
        0x00, 0x00, 0x07,       // job_id 7
        0x00, 0x00, 0x10, 0x00, // modified_length 4096
    ];

    fn response_ok() -> ResponseRepr {
        ResponseRepr {
            list: ListKind::Expected,
            opcode: ResponseOpcode::Response,
            return_code: ReturnCode::Ok,
            message_id: MessageId::new(9).unwrap(),
            ri_generation: RiGeneration::new(1).unwrap(),
            job_id: JobId::new(7).unwrap(),
            modified_length: 4096,
        }
    }

    /// UET_RESPONSE_W_DATA from the OVERFLOW list, RC_OK: 1024 bytes of read
    /// message 0x55 at offset 2048.
    #[rustfmt::skip]
    const RESPONSE_DATA: [u8; 20] = [
        0x42,                   // list 1 OVERFLOW | opcode 2 UET_RESPONSE_W_DATA
        0x01,                   // version 0 | RC_OK
        0x00, 0x0a,             // message_id 10
        0x00,                   // rsvd
        0x00, 0x00, 0x07,       // job_id 7
        0x00, 0x55,             // read_request_message_id 0x55
        0x04, 0x00,             // rsvd 2 | payload_length 1024
        0x00, 0x00, 0x10, 0x00, // modified_length 4096
        0x00, 0x00, 0x08, 0x00, // message_offset 2048
    ];

    fn response_data() -> ResponseDataRepr {
        ResponseDataRepr {
            list: ListKind::Overflow,
            opcode: ResponseOpcode::ResponseWithData,
            return_code: ReturnCode::Ok,
            message_id: MessageId::new(10).unwrap(),
            job_id: JobId::new(7).unwrap(),
            read_request_message_id: MessageId::new(0x55).unwrap(),
            payload_length: Len14::new(1024).unwrap(),
            modified_length: 4096,
            message_offset: 2048,
        }
    }

    /// UET_RESPONSE_W_DATA small: 64 bytes answering the read at PSN
    /// 0x1000_0001, return code BAD_MKEY.
    #[rustfmt::skip]
    const RESPONSE_DATA_SMALL: [u8; 12] = [
        0x02,                   // list 0 | opcode 2
        0x1c,                   // version 0 | BAD_MKEY
        0x00, 0x40,             // rsvd 2 | payload_length 64
        0x00,                   // rsvd
        0x12, 0x34, 0x56,       // job_id 0x123456
        0x10, 0x00, 0x00, 0x01, // original_request_psn
    ];

    fn response_data_small() -> ResponseDataSmallRepr {
        ResponseDataSmallRepr {
            list: ListKind::Expected,
            opcode: ResponseOpcode::ResponseWithData,
            return_code: ReturnCode::BadMkey,
            payload_length: Len14::new(64).unwrap(),
            job_id: JobId::new(0x12_3456).unwrap(),
            original_request_psn: Psn(0x1000_0001),
        }
    }

    #[test]
    fn response_golden() {
        let p = ResponsePacket::new_checked(&RESPONSE_OK[..]).unwrap();
        let r = ResponseRepr::parse(&p).unwrap();
        assert_eq!(r, response_ok());
        let mut b = [0xffu8; 12];
        r.emit(&mut ResponsePacket::new_unchecked(&mut b[..]));
        assert_eq!(b, RESPONSE_OK);
        assert_eq!(
            r.to_string(),
            "UET_RESPONSE RC_OK job=7 gen=1 msg=9 mod_len=4096"
        );
    }

    #[test]
    fn response_data_golden() {
        let p = ResponseDataPacket::new_checked(&RESPONSE_DATA[..]).unwrap();
        assert_eq!(p.read_request_message_id(), 0x55);
        let r = ResponseDataRepr::parse(&p).unwrap();
        assert_eq!(r, response_data());
        let mut b = [0xffu8; 20];
        r.emit(&mut ResponseDataPacket::new_unchecked(&mut b[..]));
        assert_eq!(b, RESPONSE_DATA);
        assert_eq!(
            r.to_string(),
            "UET_RESPONSE_W_DATA RC_OK list=OVERFLOW job=7 msg=10 rd_msg=85 msg_off=2048 \
             plen=1024 mod_len=4096"
        );
    }

    #[test]
    fn response_data_small_golden() {
        let p = ResponseDataSmallPacket::new_checked(&RESPONSE_DATA_SMALL[..]).unwrap();
        let r = ResponseDataSmallRepr::parse(&p).unwrap();
        assert_eq!(r, response_data_small());
        let mut b = [0xffu8; 12];
        r.emit(&mut ResponseDataSmallPacket::new_unchecked(&mut b[..]));
        assert_eq!(b, RESPONSE_DATA_SMALL);
        assert_eq!(
            r.to_string(),
            "UET_RESPONSE_W_DATA small BAD_MKEY job=1193046 orig_psn=268435457 plen=64"
        );
    }

    #[test]
    fn reserved_bits_are_ignored() {
        let mut b = RESPONSE_DATA;
        b[4] = 0xff;
        b[10] |= 0xc0;
        let r = ResponseDataRepr::parse(&ResponseDataPacket::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r, response_data());
    }

    #[test]
    fn unknown_return_code_parses() {
        let mut b = RESPONSE_OK;
        b[1] = 0x2a;
        let r = ResponseRepr::parse(&ResponsePacket::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r.return_code, ReturnCode::Unknown(0x2a));
        let mut out = [0u8; 12];
        r.emit(&mut ResponsePacket::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
    }

    #[test]
    fn bad_version() {
        for v in 1..4u8 {
            let mut b = RESPONSE_OK;
            b[1] |= v << 6;
            assert_eq!(
                ResponseRepr::parse(&ResponsePacket::new_checked(&b[..]).unwrap()).unwrap_err(),
                Error::new(Layer::Ses, ErrorKind::BadVersion, 1)
            );
        }
    }

    #[test]
    fn truncation() {
        assert_eq!(
            ResponseDataPacket::new_checked(&RESPONSE_DATA[..19]).unwrap_err(),
            Error::truncated(Layer::Ses, 20, 19)
        );
    }

    proptest! {
        #[test]
        fn response_round_trip(r in arb_response()) {
            let mut b = [0u8; RESPONSE_HEADER_LEN];
            r.emit(&mut ResponsePacket::new_unchecked(&mut b[..]));
            prop_assert_eq!(r.buffer_len(), b.len());
            prop_assert_eq!(ResponseRepr::parse(&ResponsePacket::new_checked(&b[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn response_data_round_trip(r in arb_response_data()) {
            let mut b = [0u8; RESPONSE_DATA_HEADER_LEN];
            r.emit(&mut ResponseDataPacket::new_unchecked(&mut b[..]));
            prop_assert_eq!(r.buffer_len(), b.len());
            prop_assert_eq!(ResponseDataRepr::parse(&ResponseDataPacket::new_checked(&b[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn response_data_small_round_trip(r in arb_response_data_small()) {
            let mut b = [0u8; RESPONSE_DATA_SMALL_HEADER_LEN];
            r.emit(&mut ResponseDataSmallPacket::new_unchecked(&mut b[..]));
            prop_assert_eq!(r.buffer_len(), b.len());
            prop_assert_eq!(
                ResponseDataSmallRepr::parse(&ResponseDataSmallPacket::new_checked(&b[..]).unwrap()).unwrap(),
                r
            );
        }
    }
}
