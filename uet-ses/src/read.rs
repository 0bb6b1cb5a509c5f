//! The target's answer to a `UET_READ`: the read data, cut into
//! `UET_HDR_RESPONSE_DATA` fragments (§4.6) that the PDS engine sends as
//! return-direction requests on the same PDC (§3 "Read responses").
//!
//! A [`ReadResponder`] holds no data: [`ReadResponder::write_fragment`]
//! copies a fragment's bytes from registered memory straight into the
//! caller's transmit buffer, at first transmission and again at every
//! retransmission (zero copy). If the region was deregistered or disabled in
//! between, the fragment goes out with the return code that a new request
//! would get and no data, so the initiator's read fails instead of
//! receiving bytes from memory the application gave back.

use uet_wire::ses::{
    ListKind, ResponseOpcode, ReturnCode, SES_RESPONSE_DATA_HEADER_LEN, SesResponseDataPacket,
    SesResponseDataRepr,
};
use uet_wire::{JobId, Len14, MessageId, RiGeneration};

use crate::error::EmitError;
use crate::memory::{MemoryTable, RegisteredMemory};
use crate::types::RegionAddr;

/// The most data a fragment can carry (14-bit `payload_length`, §4.6).
const MAX_PAYLOAD: u32 = Len14::MAX as u32;

/// The data fragments answering one read request packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResponder {
    region: RegionAddr,
    generation: RiGeneration,
    /// Region-relative offset of the byte at message offset `first`.
    region_start: u64,
    /// Message offset of the first byte this responder covers.
    first: u32,
    /// Bytes it covers.
    len: u32,
    /// The whole read (`request_length`), reported as `modified_length`.
    total: u32,
    /// Data bytes per fragment, 1..=16383.
    max_payload: u32,
    job: JobId,
    message_id: MessageId,
}

/// Where a read's bytes come from, after validation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadSource {
    pub(crate) region: RegionAddr,
    pub(crate) generation: RiGeneration,
    pub(crate) region_start: u64,
    pub(crate) first: u32,
    pub(crate) len: u32,
    pub(crate) total: u32,
}

impl ReadResponder {
    /// Fragments of at most `max_payload` data bytes (clamped to
    /// 1..=16383, the 14-bit `payload_length`).
    pub(crate) fn new(
        src: ReadSource,
        max_payload: usize,
        job: JobId,
        message_id: MessageId,
    ) -> Self {
        let max_payload =
            u32::try_from(max_payload.clamp(1, usize::from(Len14::MAX))).unwrap_or(MAX_PAYLOAD);
        Self {
            region: src.region,
            generation: src.generation,
            region_start: src.region_start,
            first: src.first,
            len: src.len,
            total: src.total,
            max_payload,
            job,
            message_id,
        }
    }

    /// The read request's `message_id`, echoed as `read_request_message_id`.
    #[must_use]
    pub const fn read_message_id(&self) -> MessageId {
        self.message_id
    }

    /// Bytes this responder returns.
    #[must_use]
    pub const fn len(&self) -> u32 {
        self.len
    }

    /// Whether it returns no bytes (a zero-length read: one empty fragment).
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole read's length (`request_length`).
    #[must_use]
    pub const fn total_len(&self) -> u32 {
        self.total
    }

    /// Number of fragments: `ceil(len / max_payload)`, and one (empty) for a
    /// zero-length read so that the initiator sees a completion.
    #[must_use]
    pub const fn fragment_count(&self) -> usize {
        if self.len == 0 {
            1
        } else {
            self.len.div_ceil(self.max_payload) as usize
        }
    }

    /// `(message_offset, data length)` of fragment `i`.
    fn span(&self, i: usize) -> Option<(u32, u32)> {
        if i >= self.fragment_count() {
            return None;
        }
        let rel = u32::try_from(i).ok()?.checked_mul(self.max_payload)?;
        let n = (self.len - rel).min(self.max_payload);
        Some((self.first + rel, n))
    }

    /// The header of fragment `i` (return code `RC_OK`).
    #[must_use]
    pub fn fragment_header(&self, i: usize) -> Option<SesResponseDataRepr> {
        let (offset, n) = self.span(i)?;
        Some(self.header(ReturnCode::Ok, offset, n))
    }

    /// Bytes [`ReadResponder::write_fragment`] writes for fragment `i`:
    /// 20-byte header plus data.
    #[must_use]
    pub fn fragment_len(&self, i: usize) -> Option<usize> {
        let (_, n) = self.span(i)?;
        Some(SES_RESPONSE_DATA_HEADER_LEN + n as usize)
    }

    /// Writes fragment `i` (header, then data read from `memory`) at the
    /// start of `buf` and returns its length. The next header is
    /// `UET_HDR_RESPONSE_DATA`.
    ///
    /// If the region no longer passes its checks (deregistered, disabled),
    /// writes a header-only fragment carrying that return code instead.
    pub fn write_fragment<M: RegisteredMemory>(
        &self,
        i: usize,
        memory: &MemoryTable<M>,
        buf: &mut [u8],
    ) -> Result<usize, EmitError> {
        let (offset, n) = self.span(i).ok_or(EmitError::NoSuchPacket)?;
        let need = SES_RESPONSE_DATA_HEADER_LEN + n as usize;
        if buf.len() < need {
            return Err(EmitError::BufferTooSmall { required: need });
        }
        let (head, rest) = buf.split_at_mut(SES_RESPONSE_DATA_HEADER_LEN);
        let at = self.region_start + u64::from(offset - self.first);
        match self.source_check(memory, at, n) {
            Ok(()) => {
                self.header(ReturnCode::Ok, offset, n)
                    .emit(&mut SesResponseDataPacket::new_unchecked(head));
                if let (Some(entry), Some(out)) =
                    (memory.get(self.region), rest.get_mut(..n as usize))
                {
                    entry.memory().read_at(at, out);
                }
                Ok(need)
            }
            Err(rc) => {
                self.header(rc, offset, 0)
                    .emit(&mut SesResponseDataPacket::new_unchecked(head));
                Ok(SES_RESPONSE_DATA_HEADER_LEN)
            }
        }
    }

    /// Whether the region still serves `n` bytes at `at`, with the code a new
    /// request would get if not.
    fn source_check<M: RegisteredMemory>(
        &self,
        memory: &MemoryTable<M>,
        at: u64,
        n: u32,
    ) -> Result<(), ReturnCode> {
        let entry = memory.get(self.region).ok_or(ReturnCode::BadGeneration)?;
        if let Some(rc) = entry.disabled_code() {
            return Err(rc);
        }
        if entry.generation() != self.generation {
            return Err(ReturnCode::BadGeneration);
        }
        match at.checked_add(u64::from(n)) {
            Some(end) if end <= entry.len() => Ok(()),
            _ => Err(ReturnCode::BadAddr),
        }
    }

    fn header(&self, rc: ReturnCode, offset: u32, n: u32) -> SesResponseDataRepr {
        SesResponseDataRepr {
            list: ListKind::Expected,
            opcode: ResponseOpcode::ResponseWithData,
            return_code: rc,
            message_id: self.message_id,
            job_id: self.job,
            read_request_message_id: self.message_id,
            payload_length: Len14::from_masked(u16::try_from(n).unwrap_or(0)),
            modified_length: self.total,
            message_offset: offset,
        }
    }
}
