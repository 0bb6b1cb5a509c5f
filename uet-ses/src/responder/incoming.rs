//! One arriving request packet, whatever its header form (small, medium or
//! standard, §4.1-§4.3), reduced to the fields the target acts on, plus the
//! per-packet rules that need nothing but the packet itself.

use uet_wire::ses::{
    ListKind, Opcode, RequestFlags, ResponseOpcode, ReturnCode, SesRepr, SesResponseRepr,
    StandardView,
};
use uet_wire::{JobId, MessageId, PidOnFep, ResourceIndex, RiGeneration};

use crate::memory::Addressing;
use crate::types::{InitiatorId, MatchBits, MemoryKey, RegionAddr};

/// Which request header carried the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// `UET_HDR_REQUEST_SMALL` (20 B): no key, no message ID.
    Small,
    /// `UET_HDR_REQUEST_MEDIUM` (32 B): no message ID.
    Medium,
    /// `UET_HDR_REQUEST_STD` (44 B).
    Standard,
}

/// A request packet, normalised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Incoming {
    pub(crate) form: Form,
    pub(crate) opcode: Opcode,
    pub(crate) flags: RequestFlags,
    pub(crate) som: bool,
    /// Standard requests only; small and medium carry none (§4.3).
    pub(crate) message_id: Option<MessageId>,
    pub(crate) generation: RiGeneration,
    pub(crate) addr: RegionAddr,
    pub(crate) buffer_offset: u64,
    pub(crate) initiator: InitiatorId,
    /// `memory_key` / `match_bits`; `None` in the small form.
    pub(crate) key: Option<u64>,
    /// Valid header data (SOM with `hd`).
    pub(crate) header_data: Option<u64>,
    pub(crate) request_length: u32,
    /// 0 for a SOM packet.
    pub(crate) message_offset: u32,
    /// The packet's SES payload length by the REFPROV rule (§4.2): with SOM
    /// `min(bytes present, request_length)`, otherwise the `payload_length`
    /// field (which may claim more than is present: see
    /// [`Incoming::packet_data`]).
    pub(crate) payload_len: usize,
}

impl Incoming {
    /// Normalises a request header; `None` for a response header.
    /// `present` is the number of bytes after the SES header.
    #[inline]
    pub(crate) fn from_repr(req: &SesRepr, present: usize) -> Option<Self> {
        let payload_len = req.payload_len(present);
        Some(match req {
            SesRepr::Standard(s) => {
                let h = s.header();
                Self {
                    form: Form::Standard,
                    opcode: h.opcode,
                    flags: h.flags,
                    som: h.is_som(),
                    message_id: Some(h.message_id),
                    generation: h.ri_generation,
                    addr: RegionAddr::new(h.job_id, h.pid_on_fep, h.resource_index),
                    buffer_offset: h.buffer_offset,
                    initiator: InitiatorId(h.initiator),
                    key: Some(h.memory_key),
                    header_data: h.header_data(),
                    request_length: h.request_length,
                    message_offset: h.message_offset(),
                    payload_len,
                }
            }
            SesRepr::Medium(m) => Self {
                form: Form::Medium,
                opcode: m.opcode,
                flags: m.flags,
                som: m.som,
                message_id: None,
                generation: m.ri_generation,
                addr: RegionAddr::new(m.job_id, m.pid_on_fep, m.resource_index),
                buffer_offset: m.buffer_offset(),
                initiator: InitiatorId(m.initiator),
                key: Some(m.memory_key),
                header_data: m.header_data(),
                request_length: u32::from(m.request_length.get()),
                message_offset: 0,
                payload_len,
            },
            SesRepr::Small(s) => Self {
                form: Form::Small,
                opcode: s.opcode,
                flags: s.flags,
                som: s.som,
                message_id: None,
                generation: s.ri_generation,
                addr: RegionAddr::new(s.job_id, s.pid_on_fep, s.resource_index),
                buffer_offset: s.buffer_offset,
                initiator: InitiatorId::default(),
                key: None,
                header_data: None,
                request_length: u32::from(s.request_length.get()),
                message_offset: 0,
                payload_len,
            },
            SesRepr::Response(_) | SesRepr::ResponseData(_) | SesRepr::ResponseDataSmall(_) => {
                return None;
            }
        })
    }

    /// [`Incoming::from_repr`] of the view's header, read straight from
    /// its bytes (tested against it).
    #[inline]
    pub(crate) fn from_standard(v: &StandardView<'_>, present: usize) -> Self {
        let p = v.packet();
        let som = p.som();
        let request_length = p.request_length();
        let (message_offset, payload_len, header_data) = if som {
            let len = present.min(usize::try_from(request_length).unwrap_or(usize::MAX));
            (0, len, p.hd().then(|| p.header_data()))
        } else {
            (p.message_offset(), usize::from(p.payload_length()), None)
        };
        Self {
            form: Form::Standard,
            opcode: Opcode::from_u8(p.opcode_raw()),
            flags: RequestFlags::from_bits(p.flags_raw()),
            som,
            message_id: Some(MessageId::from_masked(p.message_id())),
            generation: RiGeneration::from_masked(p.ri_generation()),
            addr: RegionAddr::new(
                JobId::from_masked(p.job_id()),
                PidOnFep::from_masked(p.pid_on_fep()),
                ResourceIndex::from_masked(p.resource_index()),
            ),
            buffer_offset: p.buffer_offset(),
            initiator: InitiatorId(p.initiator()),
            key: Some(p.memory_key()),
            header_data,
            request_length,
            message_offset,
            payload_len,
        }
    }

    /// Whether this packet is a whole message (`som` and `eom`).
    pub(crate) const fn is_single(&self) -> bool {
        self.som && self.flags.eom
    }

    /// The addressing mode (`rel`).
    pub(crate) const fn addressing(&self) -> Addressing {
        Addressing::from_rel(self.flags.rel)
    }

    /// The memory key, if the form carries one.
    pub(crate) fn memory_key(&self) -> Option<MemoryKey> {
        self.key.map(MemoryKey)
    }

    /// The match bits of a tagged send; `None` for every other opcode.
    pub(crate) fn match_bits(&self) -> Option<MatchBits> {
        if self.opcode.is_tagged() {
            self.key.map(MatchBits)
        } else {
            None
        }
    }

    /// Header form and opcode combinations that make no sense: `OP_VIOLATION`.
    ///
    /// * The small form ("optimized non-matching", §4.3) carries only
    ///   `UET_WRITE`, `UET_READ` and `UET_NO_OP`: it has no key, match bits
    ///   or extension.
    /// * The medium form adds the sends; atomics and rendezvous need the
    ///   extension headers only the standard form has.
    /// * Small and medium requests are single-packet messages (Wireshark:
    ///   `som` and `eom` both set), and so are `UET_NO_OP` and
    ///   `UET_DATAGRAM_SEND` in any form (§2.11: UUD datagrams are
    ///   single-packet).
    pub(crate) fn check_form(&self) -> Result<(), ReturnCode> {
        let opcode_ok = match self.form {
            Form::Small => matches!(self.opcode, Opcode::Write | Opcode::Read | Opcode::NoOp),
            Form::Medium => matches!(
                self.opcode,
                Opcode::Write
                    | Opcode::Read
                    | Opcode::Send
                    | Opcode::TaggedSend
                    | Opcode::DatagramSend
                    | Opcode::NoOp
            ),
            Form::Standard => true,
        };
        let must_be_single = self.form != Form::Standard
            || matches!(self.opcode, Opcode::NoOp | Opcode::DatagramSend);
        if !opcode_ok || (must_be_single && !self.is_single()) {
            return Err(ReturnCode::OpViolation);
        }
        Ok(())
    }

    /// The packet's data, after the per-packet rules of a data-carrying
    /// request (write, send), in this order:
    ///
    /// 1. a non-SOM packet's `payload_length` must not exceed the bytes
    ///    present (`OP_VIOLATION`; extra bytes after it are ignored, as REFPROV
    ///    does);
    /// 2. `message_offset + payload` must not exceed `request_length`
    ///    (`OP_VIOLATION`, REFPROV "payload > request length");
    /// 3. an `eom` packet must end exactly at `request_length`
    ///    (`OP_VIOLATION`);
    /// 4. `ie` set: `INITIATOR_ERR` (§4.7, after the length checks as in
    ///    REFPROV).
    pub(crate) fn packet_data<'p>(&self, payload: &'p [u8]) -> Result<&'p [u8], ReturnCode> {
        let data = payload
            .get(..self.payload_len)
            .ok_or(ReturnCode::OpViolation)?;
        let end = self.message_end(data.len());
        let total = u64::from(self.request_length);
        if end > total || (self.flags.eom && end != total) {
            return Err(ReturnCode::OpViolation);
        }
        if self.flags.ie {
            return Err(ReturnCode::InitiatorErr);
        }
        Ok(data)
    }

    /// `message_offset + n`.
    pub(crate) fn message_end(&self, n: usize) -> u64 {
        u64::from(self.message_offset) + u64::try_from(n).unwrap_or(u64::MAX)
    }

    /// Who a response to this packet is addressed to.
    pub(crate) fn reply_to(&self) -> ReplyTo {
        ReplyTo {
            message_id: self.message_id.unwrap_or_default(),
            generation: self.generation,
            job: self.addr.job,
        }
    }
}

/// The fields a response copies from its request (§4.6): `message_id` (0
/// for small and medium requests, which have none), `ri_generation`,
/// `job_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplyTo {
    pub(crate) message_id: MessageId,
    pub(crate) generation: RiGeneration,
    pub(crate) job: JobId,
}

impl ReplyTo {
    /// A `UET_RESPONSE` with `rc`, `list` and `modified_length` (saturated
    /// at `u32::MAX`).
    pub(crate) fn response(self, rc: ReturnCode, list: ListKind, modified: u64) -> SesResponseRepr {
        SesResponseRepr {
            list,
            opcode: ResponseOpcode::Response,
            return_code: rc,
            message_id: self.message_id,
            ri_generation: self.generation,
            job_id: self.job,
            modified_length: u32::try_from(modified).unwrap_or(u32::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The view's normalisation is the general one of the header the
        /// general parser gives: arbitrary 44-byte headers the view
        /// accepts (version forced to 0 on half of them), any bytes
        /// present, SOM or not, `hd` or not.
        #[test]
        fn from_standard_agrees_with_from_repr(
            head in prop::array::uniform32(any::<u8>()),
            tail in prop::array::uniform12(any::<u8>()),
            opcode in prop::sample::select(vec![0u8, 1, 2, 3, 5, 6, 0x0f, 0x3f]),
            v0: bool,
            present in 0usize..20_000,
        ) {
            let mut b = [0u8; 44];
            b[..32].copy_from_slice(&head);
            b[32..].copy_from_slice(&tail);
            b[0] = (b[0] & 0xc0) | opcode;
            if v0 {
                b[1] &= 0x3f;
            }
            if let Some(v) = StandardView::new(&b) {
                let general = Incoming::from_repr(&SesRepr::Standard(v.request()), present);
                prop_assert_eq!(Some(Incoming::from_standard(&v, present)), general);
            }
        }
    }
}
