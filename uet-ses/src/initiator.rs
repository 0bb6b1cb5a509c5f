//! The initiator side of SES: an [`Operation`] becomes an
//! [`OutgoingMessage`], whose packets are written straight from local memory
//! into transmit buffers; a [`ReadSink`] reassembles read data.
//!
//! # Packets
//!
//! Every packet is a standard request (`UET_HDR_REQUEST_STD`, 44 B, §4.2)
//! followed by payload. The small and medium forms (§4.3) are never sent:
//! they carry no `message_id`, so their responses could only be matched by
//! PSN, which SES does not see, and the small form carries no key. (The
//! target accepts all three forms.)
//!
//! * Packet 0 is the SOM packet: `som`, `header_data` (with `hd` when the
//!   operation has header data) and `request_length`.
//! * Later packets are non-SOM: `payload_length` and `message_offset` in
//!   place of the header data; `request_length` repeated.
//! * The last packet has `eom`. A zero-length message is one packet with
//!   `som` and `eom`.
//! * Every packet carries the same message ID, address, key or match bits,
//!   and `rel` = 1 (relative addressing, see [`crate::memory`]).
//!
//! Payload per packet is `max_ses_len - 44` bytes, capped at 16383 (the
//! 14-bit `payload_length` of non-SOM packets). A read is a single request
//! packet with no payload asking for the whole length; the target splits the
//! data into response fragments.
//!
//! Because the header is rebuilt from the operation and the payload re-read
//! from local memory, [`OutgoingMessage::write_packet`] serves first
//! transmissions and retransmissions alike without storing packets.

use uet_wire::pds::NextHeader;
use uet_wire::ses::{
    Opcode, RequestFlags, ResponseOpcode, ReturnCode, SES_STANDARD_HEADER_LEN, SesResponseDataRepr,
    SesResponseRepr, SesStandardPacket, SesStandardRepr, SomFields, StandardRequest,
};
use uet_wire::{Len14, MessageId, RiGeneration};

use crate::completion::{Completion, CompletionError, LocalError};
use crate::error::{EmitError, SubmitError};
use crate::memory::RegisteredMemory;
use crate::ranges::RangeSet;
use crate::types::{InitiatorId, LocalBuf, MatchBits, MemoryKey, RegionAddr};

/// The most payload a packet can carry: non-SOM packets state it in the
/// 14-bit `payload_length` (§4.2).
const MAX_PAYLOAD: u32 = Len14::MAX as u32;

/// A remote registered region and a position in it: what a write or read
/// names at the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteAddr {
    /// `(job, pid, ri)`.
    pub region: RegionAddr,
    /// The region's generation, as its registration reported.
    pub generation: RiGeneration,
    /// The region's memory key.
    pub key: MemoryKey,
    /// Offset from the region start (`rel` = 1).
    pub offset: u64,
}

/// What the application asks for. Local memory is named by [`LocalBuf`]
/// handles the caller resolves; SES copies from it only while writing a
/// packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// `UET_WRITE`: `len` bytes from `src` to `dst`.
    Write {
        /// Where the bytes go.
        dst: RemoteAddr,
        /// Where they come from.
        src: LocalBuf,
        /// How many.
        len: u32,
        /// Delivered to the target application with the completion.
        header_data: Option<u64>,
    },
    /// `UET_READ`: `len` bytes from `src` into `dst`.
    Read {
        /// Where the bytes come from.
        src: RemoteAddr,
        /// Where they go.
        dst: LocalBuf,
        /// How many.
        len: u32,
    },
    /// `UET_SEND` to a process's untagged receives.
    Send {
        /// The receiving process (`ri` is sent but not interpreted by this
        /// crate's target).
        dst: RegionAddr,
        /// The bytes.
        src: LocalBuf,
        /// How many.
        len: u32,
        /// Delivered with the receive completion.
        header_data: Option<u64>,
    },
    /// `UET_TAGGED_SEND` to a process's tagged receives.
    TaggedSend {
        /// The receiving process.
        dst: RegionAddr,
        /// The bytes.
        src: LocalBuf,
        /// How many.
        len: u32,
        /// Matched against the receives' match and ignore bits.
        match_bits: MatchBits,
        /// Delivered with the receive completion.
        header_data: Option<u64>,
    },
}

impl Operation {
    /// The request opcode.
    #[must_use]
    pub const fn opcode(&self) -> Opcode {
        match self {
            Self::Write { .. } => Opcode::Write,
            Self::Read { .. } => Opcode::Read,
            Self::Send { .. } => Opcode::Send,
            Self::TaggedSend { .. } => Opcode::TaggedSend,
        }
    }

    /// The message length (`request_length`).
    #[must_use]
    pub const fn len(&self) -> u32 {
        match self {
            Self::Write { len, .. }
            | Self::Read { len, .. }
            | Self::Send { len, .. }
            | Self::TaggedSend { len, .. } => *len,
        }
    }

    /// Whether the message has no bytes.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The local buffer: the source of a write or send, the destination of a
    /// read.
    #[must_use]
    pub const fn local(&self) -> LocalBuf {
        match self {
            Self::Write { src, .. } | Self::Send { src, .. } | Self::TaggedSend { src, .. } => *src,
            Self::Read { dst, .. } => *dst,
        }
    }

    const fn header_data(&self) -> Option<u64> {
        match self {
            Self::Write { header_data, .. }
            | Self::Send { header_data, .. }
            | Self::TaggedSend { header_data, .. } => *header_data,
            Self::Read { .. } => None,
        }
    }

    /// `(address, generation, buffer_offset, memory_key / match_bits)`.
    const fn target(&self) -> (RegionAddr, RiGeneration, u64, u64) {
        match self {
            Self::Write { dst: r, .. } | Self::Read { src: r, .. } => {
                (r.region, r.generation, r.offset, r.key.0)
            }
            Self::Send { dst, .. } => (*dst, RiGeneration::from_masked(0), 0, 0),
            Self::TaggedSend {
                dst, match_bits, ..
            } => (*dst, RiGeneration::from_masked(0), 0, match_bits.0),
        }
    }
}

/// An operation cut into request packets (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingMessage {
    op: Operation,
    message_id: MessageId,
    initiator: InitiatorId,
    /// Payload bytes per packet.
    chunk: u32,
    count: usize,
    /// The SES header of packet 1 (`None` for a single-packet message, or
    /// one without a valid header). Packets after the first differ only in
    /// `eom`, `payload_length` and `message_offset`, so `write_packet`
    /// copies this and patches those three instead of emitting every field.
    template: Option<[u8; SES_STANDARD_HEADER_LEN]>,
}

impl OutgoingMessage {
    /// Cuts `op` into packets of at most `max_ses_len` bytes of SES header
    /// plus payload. Fails if that leaves no room for payload.
    pub fn new(
        op: Operation,
        message_id: MessageId,
        max_ses_len: usize,
    ) -> Result<Self, SubmitError> {
        let min = SES_STANDARD_HEADER_LEN + 1;
        if max_ses_len < min {
            return Err(SubmitError::MaxSesLenTooSmall { min });
        }
        let chunk = (max_ses_len - SES_STANDARD_HEADER_LEN).min(usize::from(Len14::MAX));
        let chunk = u32::try_from(chunk).unwrap_or(MAX_PAYLOAD);
        let count = match op {
            Operation::Read { .. } => 1,
            _ => op.len().div_ceil(chunk).max(1) as usize,
        };
        Ok(Self {
            op,
            message_id,
            initiator: InitiatorId::default(),
            chunk,
            count,
            template: None,
        }
        .with_template())
    }

    /// Sets the `initiator` field every packet carries (default 0).
    #[must_use]
    pub fn with_initiator(mut self, initiator: InitiatorId) -> Self {
        self.initiator = initiator;
        self.with_template()
    }

    /// (Re)builds `template` from the other fields.
    fn with_template(mut self) -> Self {
        self.template = self.header(1).map(|h| {
            let mut t = [0; SES_STANDARD_HEADER_LEN];
            h.emit(&mut t);
            t
        });
        self
    }

    /// The operation.
    #[must_use]
    pub const fn operation(&self) -> &Operation {
        &self.op
    }

    /// The message ID.
    #[must_use]
    pub const fn message_id(&self) -> MessageId {
        self.message_id
    }

    /// Number of request packets.
    #[must_use]
    pub const fn packet_count(&self) -> usize {
        self.count
    }

    /// `(message_offset, payload bytes)` of packet `i`.
    #[inline]
    fn span(&self, i: usize) -> Option<(u32, u32)> {
        if i >= self.count {
            return None;
        }
        if matches!(self.op, Operation::Read { .. }) {
            return Some((0, 0));
        }
        let offset = u32::try_from(i).ok()?.checked_mul(self.chunk)?;
        Some((offset, (self.op.len() - offset).min(self.chunk)))
    }

    /// Bytes of packet `i`: SES header plus payload.
    #[must_use]
    pub fn packet_len(&self, i: usize) -> Option<usize> {
        let (_, n) = self.span(i)?;
        Some(SES_STANDARD_HEADER_LEN + n as usize)
    }

    /// `(length of every packet but the last, length of the last)`: only
    /// the last packet can be shorter ([`OutgoingMessage::packet_len`]).
    #[must_use]
    pub fn packet_lens(&self) -> (usize, usize) {
        let last = self.packet_len(self.count - 1).unwrap_or(0);
        (self.packet_len(0).unwrap_or(last), last)
    }

    /// The header of packet `i`.
    #[must_use]
    pub fn header(&self, i: usize) -> Option<StandardRequest> {
        let (offset, n) = self.span(i)?;
        let (addr, generation, buffer_offset, key) = self.op.target();
        let som = i == 0;
        let header_data = self.op.header_data();
        let header = SesStandardRepr {
            opcode: self.op.opcode(),
            flags: RequestFlags {
                dc: false,
                ie: false,
                rel: true,
                eom: i + 1 == self.count,
            },
            hd: som && header_data.is_some(),
            som: if som {
                SomFields::Start {
                    header_data: header_data.unwrap_or(0),
                }
            } else {
                SomFields::Continuation {
                    payload_length: Len14::from_masked(u16::try_from(n).unwrap_or(0)),
                    message_offset: offset,
                }
            },
            message_id: self.message_id,
            ri_generation: generation,
            job_id: addr.job,
            pid_on_fep: addr.pid,
            resource_index: addr.ri,
            buffer_offset,
            initiator: self.initiator.0,
            memory_key: key,
            request_length: self.op.len(),
        };
        // Writes, reads and sends carry no extension header.
        StandardRequest::new(header, None).ok()
    }

    /// Writes packet `i` (SES header, then the payload read from `local`) at
    /// the start of `buf`. Returns the `next_hdr` for the PDS header and the
    /// bytes written. `local` is the memory the operation's [`LocalBuf`]
    /// names (unused for a read request).
    #[inline]
    pub fn write_packet<L: RegisteredMemory + ?Sized>(
        &self,
        i: usize,
        local: &L,
        buf: &mut [u8],
    ) -> Result<(NextHeader, usize), EmitError> {
        let (offset, n) = self.span(i).ok_or(EmitError::NoSuchPacket)?;
        // Packet 0 is the only SOM packet; the others patch the template.
        let template = self.template.as_ref().filter(|_| i > 0);
        let header = match template {
            Some(_) => None,
            None => Some(self.header(i).ok_or(EmitError::NoSuchPacket)?),
        };
        let need = SES_STANDARD_HEADER_LEN + n as usize;
        if buf.len() < need {
            return Err(EmitError::BufferTooSmall { required: need });
        }
        if n > 0 {
            let src = self.op.local().offset;
            let fits = src
                .checked_add(u64::from(self.op.len()))
                .is_some_and(|end| end <= local.len());
            if !fits {
                return Err(EmitError::LocalOutOfBounds);
            }
        }
        // `buf` holds `need` bytes (checked above).
        let (head, rest) = buf
            .split_first_chunk_mut::<SES_STANDARD_HEADER_LEN>()
            .ok_or(EmitError::BufferTooSmall { required: need })?;
        match (header, template) {
            (Some(h), _) => h.emit(head),
            (None, Some(t)) => {
                *head = *t;
                let mut p = SesStandardPacket::new_unchecked(head);
                p.set_eom(i + 1 == self.count);
                // `n` is at most `chunk`, which fits 14 bits.
                p.set_payload_length_offset(u16::try_from(n).unwrap_or(0), offset);
            }
            (None, None) => return Err(EmitError::NoSuchPacket),
        }
        if let Some(out) = rest.get_mut(..n as usize) {
            local.read_at(self.op.local().offset + u64::from(offset), out);
        }
        Ok((NextHeader::RequestStd, need))
    }

    /// The completion a plain response means for a write or send: `RC_OK`
    /// succeeds with the response's `modified_length`; a PDS default
    /// response (`UET_DEFAULT_RESPONSE`, `RC_NULL`, sent for a duplicate
    /// whose original response was not stored, §3) succeeds with the full
    /// length; any other code fails. For a read use [`ReadSink`].
    #[must_use]
    pub fn complete(&self, rsp: &SesResponseRepr) -> Completion {
        match (rsp.opcode, rsp.return_code) {
            (_, ReturnCode::Ok) => Completion::ok(self.message_id, u64::from(rsp.modified_length)),
            (ResponseOpcode::DefaultResponse, ReturnCode::Null) => {
                Completion::ok(self.message_id, u64::from(self.op.len()))
            }
            (_, rc) => Completion::err(
                self.message_id,
                CompletionError::Remote(rc),
                u64::from(rsp.modified_length),
            ),
        }
    }

    /// For a read, the sink that collects its data.
    #[must_use]
    pub const fn read_sink(&self) -> Option<ReadSink> {
        match self.op {
            Operation::Read { dst, len, .. } => Some(ReadSink::new(self.message_id, dst, len)),
            _ => None,
        }
    }
}

/// What a [`ReadSink`] made of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum ReadProgress {
    /// Placed; more to come.
    Pending,
    /// The read finished (successfully or not). Reported once.
    Complete(Completion),
    /// Not used.
    Ignored(ReadIgnored),
}

/// Why a [`ReadSink`] ignored a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadIgnored {
    /// It answers another read (`read_request_message_id` differs).
    OtherMessage,
    /// `payload_length` exceeds the bytes present, or the data lies beyond
    /// the read's length.
    Malformed,
    /// The read already completed.
    AlreadyComplete,
}

/// Reassembles the response data of one read into local memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadSink {
    message_id: MessageId,
    dst: LocalBuf,
    len: u32,
    coverage: RangeSet,
    done: bool,
}

impl ReadSink {
    /// A sink for read `message_id` of `len` bytes into `dst`.
    #[must_use]
    pub const fn new(message_id: MessageId, dst: LocalBuf, len: u32) -> Self {
        Self {
            message_id,
            dst,
            len,
            coverage: RangeSet::new(),
            done: false,
        }
    }

    /// The read's message ID.
    #[must_use]
    pub const fn message_id(&self) -> MessageId {
        self.message_id
    }

    /// Where the data goes.
    #[must_use]
    pub const fn destination(&self) -> LocalBuf {
        self.dst
    }

    /// Bytes received so far.
    #[must_use]
    pub const fn received(&self) -> u64 {
        self.coverage.covered()
    }

    /// Whether the read completed.
    #[must_use]
    pub const fn is_complete(&self) -> bool {
        self.done
    }

    /// A `UET_HDR_RESPONSE_DATA` packet: `data` is what follows its 20-byte
    /// header (extra bytes after `payload_length` are ignored). Places the
    /// data at `dst + message_offset` in `local`, the memory `dst` names.
    /// Fragments may come in any order and more than once.
    pub fn on_data<L: RegisteredMemory + ?Sized>(
        &mut self,
        hdr: &SesResponseDataRepr,
        data: &[u8],
        local: &mut L,
    ) -> ReadProgress {
        if self.done {
            return ReadProgress::Ignored(ReadIgnored::AlreadyComplete);
        }
        if hdr.read_request_message_id != self.message_id {
            return ReadProgress::Ignored(ReadIgnored::OtherMessage);
        }
        if hdr.return_code != ReturnCode::Ok {
            return self.finish(Err(CompletionError::Remote(hdr.return_code)));
        }
        let Some(bytes) = data.get(..usize::from(hdr.payload_length.get())) else {
            return ReadProgress::Ignored(ReadIgnored::Malformed);
        };
        let start = u64::from(hdr.message_offset);
        let end = start + u64::from(hdr.payload_length.get());
        if end > u64::from(self.len) {
            return ReadProgress::Ignored(ReadIgnored::Malformed);
        }
        let fits = self
            .dst
            .offset
            .checked_add(u64::from(self.len))
            .is_some_and(|e| e <= local.len());
        if !fits {
            return self.finish(Err(CompletionError::Local(LocalError::LocalOutOfBounds)));
        }
        local.write_at(self.dst.offset + start, bytes);
        self.coverage.insert(start, end);
        if self.coverage.covered() == u64::from(self.len) {
            self.finish(Ok(()))
        } else {
            ReadProgress::Pending
        }
    }

    /// A plain `UET_HDR_RESPONSE` to the read request: an error code fails
    /// the read; `RC_OK` (or a default response) completes a zero-length read
    /// and is otherwise only an acknowledgement (the data follows).
    pub fn on_response(&mut self, rsp: &SesResponseRepr) -> ReadProgress {
        if self.done {
            return ReadProgress::Ignored(ReadIgnored::AlreadyComplete);
        }
        if rsp.message_id != self.message_id {
            return ReadProgress::Ignored(ReadIgnored::OtherMessage);
        }
        match rsp.return_code {
            ReturnCode::Ok | ReturnCode::Null if self.len == 0 => self.finish(Ok(())),
            ReturnCode::Ok | ReturnCode::Null => ReadProgress::Pending,
            rc => self.finish(Err(CompletionError::Remote(rc))),
        }
    }

    fn finish(&mut self, status: Result<(), CompletionError>) -> ReadProgress {
        self.done = true;
        ReadProgress::Complete(Completion {
            message_id: self.message_id,
            status,
            modified_length: self.coverage.covered(),
        })
    }
}

#[cfg(test)]
mod tests;
