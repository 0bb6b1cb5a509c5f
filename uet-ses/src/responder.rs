//! The responder: the target side of SES (the spec's "target"; the module
//! is not called `target` so that tools do not take its directory for
//! cargo's build output). One [`SesTarget`] per endpoint, fed every request
//! packet the PDS accepted (new, not a duplicate) with
//! [`SesTarget::handle_request`].
//!
//! # What happens to a request
//!
//! | opcode | action |
//! |---|---|
//! | `UET_WRITE` | validate against the [`MemoryTable`] (every packet), place at `buffer_offset + message_offset`, respond when all `request_length` bytes are placed |
//! | `UET_READ` | validate, answer with a [`ReadResponder`] |
//! | `UET_SEND`, `UET_TAGGED_SEND`, `UET_DATAGRAM_SEND` | match a posted receive (or become unexpected), place, respond and raise a [`TargetEvent::Recv`] when complete |
//! | `UET_NO_OP` | `RC_OK` |
//! | atomics, rendezvous and deferrable sends, `UET_DEFERRABLE_RTR`, `UET_MSG_ERROR`, reserved/vendor | `UNSUPPORTED_OP`: **not implemented yet** |
//!
//! # Order of checks for one packet
//!
//! 1. header form and opcode make sense together, else `OP_VIOLATION`: the
//!    small form carries only `UET_WRITE`, `UET_READ` and `UET_NO_OP` (it has
//!    no key or match bits), the medium form adds the sends; small and medium
//!    requests, `UET_NO_OP` and `UET_DATAGRAM_SEND` must be single packets
//!    (`som` and `eom`);
//! 2. opcode implemented, else `UNSUPPORTED_OP`;
//! 3. a packet of a failed message gets that message's code again and places
//!    nothing;
//! 4. the packet agrees with the earlier packets of its message (opcode,
//!    `request_length`, address, generation, key/match bits,
//!    `buffer_offset`, `rel`), else `OP_VIOLATION`;
//! 5. packet lengths (§4.2): a non-SOM `payload_length` no larger than the
//!    bytes present, the packet inside `request_length`, an `eom` packet
//!    ending exactly at it, else `OP_VIOLATION`; then `ie` set:
//!    `INITIATOR_ERR` (REFPROV checks lengths, then `ie`, §4.7);
//! 6. writes and reads: the memory checks of [`crate::memory`] over the
//!    *whole message* `buffer_offset .. + request_length`, so that every packet
//!    of a message gets the same verdict and nothing of a message that does
//!    not fit is written; sends: `BAD_JOB_ID` / `BAD_PID` for the receiving
//!    process, then matching.
//!
//! # Messages and responses
//!
//! Packets of a message may arrive in any order. A multi-packet message is
//! tracked by `(Source, message_id)`; its bytes are recorded in a range set,
//! so placement is idempotent, and it completes when the SOM packet has
//! arrived and all `request_length` bytes are covered. Small and medium
//! requests, and standard ones with `som` and `eom`, are single-packet and
//! not tracked.
//!
//! Every completion and every error yields a `UET_RESPONSE` flagged
//! *guaranteed* ([`TargetResponse::guaranteed`]): the PDS keeps it until
//! cleared and replays it for retransmissions (§3 "CACK / CLEAR / guaranteed
//! delivery"). An error is returned for the packet that found it and for every
//! later packet of the message; `modified_length` then counts the bytes of a
//! write already placed (0 for sends). A `UET_NO_OP` reply is the only
//! non-guaranteed response.
//!
//! The last few message IDs completed per source are remembered, so a
//! duplicate that slips past the PDS after its message completed is answered
//! [`TargetOutcome::Duplicate`] and places nothing.
//!
//! # Sends: truncation and the unexpected list
//!
//! * **Truncation.** A message longer than the receive buffer places what
//!   fits; the response is `RC_OK` with `modified_length` = bytes placed,
//!   smaller than `request_length`, as Portals reports `mlength` < `rlength`
//!   (the notes read `modified_length` the same way, §4.6). The receive event
//!   carries both lengths.
//! * **Unexpected messages.** A send that matches no posted receive is copied
//!   into a bounded pool ([`TargetConfig::max_unexpected_messages`],
//!   [`TargetConfig::max_unexpected_bytes`]) and answered, once complete,
//!   `RC_OK` with `list = OVERFLOW`. A later [`SesTarget::post_recv`] that
//!   accepts it completes from the pool (and raises its event at once, or
//!   when the message finishes arriving). When the pool is full the message
//!   is refused with `NO_MATCH` and `list = OVERFLOW`: neither a posted
//!   receive nor overflow space took it (Portals `PTL_NI_NO_MATCH`).
//! * **Peek and claim** (libfabric `FI_PEEK`, `FI_CLAIM`, `FI_DISCARD`).
//!   [`SesTarget::peek_unexpected`] names the message a receive would take
//!   without taking it; [`SesTarget::claim_unexpected`] takes it out of
//!   matching (it stays in the pool and counts against its limits) until
//!   [`SesTarget::post_claimed`] delivers it into a buffer or
//!   [`SesTarget::discard_claimed`] frees it.
//!
//! # Resource exhaustion
//!
//! When [`TargetConfig::max_inflight_messages`] partly received messages are
//! already tracked, the first packet of another multi-packet message gets
//! [`TargetOutcome::NoResource`]: the PDS should NACK it with
//! `NO_SES_MSG_AVAIL` (§2.9) and not record its PSN as received, so that the
//! initiator retransmits it later.

mod incoming;
mod matching;

use std::collections::VecDeque;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use uet_wire::ses::{
    ListKind, Opcode, RequestFlags, ReturnCode, SesRepr, SesResponseRepr, SesStandardPacket,
    StandardView,
};
use uet_wire::{JobId, MessageId, PidOnFep};

use crate::completion::{Completion, CompletionError, LocalError};
use crate::memory::{Access, AccessRequest, MemoryTable, RegisteredMemory, Window};
use crate::ranges::RangeSet;
use crate::read::{ReadResponder, ReadSource};
use crate::types::{InitiatorId, MatchBits, RecvId, RegionAddr, Source};

use incoming::{Incoming, ReplyTo};
use matching::{PostedRecv, RecvQueue, UnexpectedId};
pub use matching::{RecvBuffer, RecvKind, RecvSpec, Sender, SharedRecv};

/// Limits of a [`SesTarget`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetConfig {
    /// Multi-packet messages tracked at once (all sources).
    pub max_inflight_messages: usize,
    /// Unexpected messages held at once.
    pub max_unexpected_messages: usize,
    /// Bytes of unexpected messages held at once.
    pub max_unexpected_bytes: usize,
    /// Receives posted and waiting for a send, all processes together;
    /// more are refused ([`PostError::TooManyReceives`]).
    pub max_posted_receives: usize,
    /// Data bytes per read-response fragment (clamped to 1..=16383). Also
    /// the chunk a `som`-without-`eom` read request asks for.
    pub max_read_payload: usize,
    /// Completed message IDs remembered per source for late duplicates.
    pub recent_per_source: usize,
    /// The generation the memory table starts new RIs at
    /// ([`MemoryTable::with_first_generation`]; the daemon draws it at
    /// start so that addresses from before a restart fail).
    pub first_generation: uet_wire::RiGeneration,
}

impl Default for TargetConfig {
    fn default() -> Self {
        Self {
            max_inflight_messages: 4096,
            max_unexpected_messages: 1024,
            max_unexpected_bytes: 64 << 20,
            max_posted_receives: 1 << 16,
            max_read_payload: 4096,
            recent_per_source: 16,
            first_generation: uet_wire::RiGeneration::default(),
        }
    }
}

/// A SES response to carry back to the initiator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetResponse {
    /// The `UET_HDR_RESPONSE` header.
    pub header: SesResponseRepr,
    /// Guaranteed delivery (§3): the PDS must keep the response until the
    /// initiator clears it and replay it for retransmitted requests.
    pub guaranteed: bool,
}

/// What the PDS engine does with a request packet after SES saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum TargetOutcome {
    /// Placed; the message is not complete, so there is no SES response yet
    /// (a plain ACK).
    Accepted,
    /// Carry this response back (in the ACK).
    Respond(TargetResponse),
    /// A `UET_READ` passed its checks: send the responder's fragments as
    /// return-direction requests.
    Read(ReadResponder),
    /// A late duplicate of a message that already completed: nothing placed,
    /// nothing to answer beyond what the PDS stored.
    Duplicate,
    /// No state left to track a new message: NACK `NO_SES_MSG_AVAIL` and do
    /// not record the PSN (see the module docs).
    NoResource,
    /// The header is a response, not a request: the caller routed it wrong.
    NotARequest,
}

impl TargetOutcome {
    /// The response, if this outcome carries one.
    #[must_use]
    pub const fn response(&self) -> Option<&TargetResponse> {
        match self {
            Self::Respond(r) => Some(r),
            _ => None,
        }
    }
}

/// Something the application should hear about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetEvent {
    /// A `UET_WRITE` with header data (`hd`) completed.
    WriteWithData(WriteEvent),
    /// A posted receive completed (or failed).
    Recv(RecvEvent),
}

/// A completed write that carried header data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteEvent {
    /// Who wrote.
    pub source: Source,
    /// The initiator's message ID.
    pub message_id: MessageId,
    /// The region written.
    pub region: RegionAddr,
    /// `buffer_offset` of the write (as sent: region-relative or absolute
    /// per `rel`).
    pub offset: u64,
    /// Bytes written.
    pub len: u32,
    /// The 64-bit header data.
    pub header_data: u64,
}

/// A receive's completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvEvent {
    /// Which receive.
    pub recv: RecvId,
    /// Who sent.
    pub source: Source,
    /// Status and bytes placed in the buffer (`modified_length`).
    pub completion: Completion,
    /// The message's length (`request_length`): larger than
    /// `completion.modified_length` when truncated.
    pub message_len: u32,
    /// The match bits of a tagged send.
    pub match_bits: Option<MatchBits>,
    /// Header data, if the send carried it.
    pub header_data: Option<u64>,
    /// The request's `initiator` field.
    pub initiator: InitiatorId,
    /// `EXPECTED` if the send found the receive posted, `OVERFLOW` if it
    /// waited in the unexpected list.
    pub list: ListKind,
}

impl RecvEvent {
    /// Whether the message was longer than the buffer.
    #[must_use]
    pub const fn truncated(&self) -> bool {
        self.completion.modified_length < self.message_len as u64
    }
}

/// Why a receive could not be posted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PostError {
    /// No region registered at the buffer's address.
    NotRegistered,
    /// The region lacks [`Access::RECV`].
    NoSendRight,
    /// The region is disabled.
    Disabled,
    /// `offset + len` lies beyond the region.
    OutOfBounds,
    /// [`SesTarget::post_claimed`]: no claimed unexpected message has that
    /// handle (never claimed, already posted or discarded, or gone because
    /// its sender's PDC closed).
    NotClaimed,
    /// [`TargetConfig::max_posted_receives`] receives are already waiting.
    TooManyReceives,
}

impl core::fmt::Display for PostError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::NotRegistered => "receive buffer region not registered",
            Self::NoSendRight => "receive buffer region lacks the SEND right",
            Self::Disabled => "receive buffer region disabled",
            Self::OutOfBounds => "receive buffer beyond its region",
            Self::NotClaimed => "no claimed unexpected message with that handle",
            Self::TooManyReceives => "too many receives posted and waiting",
        })
    }
}

impl core::error::Error for PostError {}

/// Most holes a message may have between its arrived packets. Arrival
/// order is bounded by the PDS window, so a real message has far fewer; a
/// peer scattering tiny packets across a huge message fails it
/// (`OP_VIOLATION`) instead of growing the range set without bound.
const MAX_RANGES: usize = 1 << 14;

/// A tracked message's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct MsgKey {
    src: Source,
    id: MessageId,
}

/// Where a message's bytes go.
#[derive(Debug)]
enum Dest {
    /// Not decided yet (no valid packet seen).
    Fresh,
    /// A write: each packet is checked and placed in registered memory.
    Write,
    /// A send matched to a posted receive.
    Posted(PostedRecv),
    /// A send held in the unexpected pool.
    Unexpected(UnexpectedId),
    /// Completed.
    Done,
    /// Failed with `rc`; later packets get the same answer.
    Failed { rc: ReturnCode, list: ListKind },
}

/// A message being received.
#[derive(Debug)]
struct Inbound {
    source: Source,
    /// The first packet's header, which every later packet must agree with.
    first: Incoming,
    coverage: RangeSet,
    som_seen: bool,
    header_data: Option<u64>,
    /// Bytes of a write placed so far.
    placed: u64,
    dest: Dest,
    /// What check step 4 compares, for a write: see
    /// [`SesTarget::write_continuation`].
    write: Option<WriteFields>,
    /// The memory window the write continuations of this message were
    /// last placed through.
    window: WindowCache,
}

/// The fields check step 4 compares ([`Inbound::agrees`]) as they lie in a
/// standard request header, masked: opcode, `rel`, `ri_generation`,
/// `job_id`, `pid_on_fep`, `resource_index`, `buffer_offset`,
/// `memory_key` (four words) and `request_length`. Equal for two headers
/// exactly where their decoded fields are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WriteFields {
    words: [u64; 4],
    request_length: u32,
}

/// The bytes of those fields in each word (the `message_id`, `initiator`
/// and SOM-dependent bytes, `version` and the other flags are not
/// compared).
const WRITE_FIELDS_MASK: [u64; 4] = [
    u64::from_ne_bytes([0x3f, 0x08, 0, 0, 0xff, 0xff, 0xff, 0xff]),
    u64::from_ne_bytes([0x0f, 0xff, 0x0f, 0xff, 0xff, 0xff, 0xff, 0xff]),
    u64::from_ne_bytes([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]),
    u64::MAX,
];

impl WriteFields {
    /// Of a header.
    #[inline]
    fn of(h: &[u8; uet_wire::ses::SES_STANDARD_HEADER_LEN]) -> Self {
        let word = |i: usize| {
            let mut w = [0u8; 8];
            if let Some(b) = h.get(8 * i..8 * i + 8) {
                w.copy_from_slice(b);
            }
            u64::from_ne_bytes(w) & WRITE_FIELDS_MASK.get(i).copied().unwrap_or(0)
        };
        let [.., a, b, c, d] = *h;
        Self {
            words: [word(0), word(1), word(2), word(3)],
            request_length: u32::from_ne_bytes([a, b, c, d]),
        }
    }

    /// Of a write's first packet, as a standard header carries them;
    /// `None` for anything else (small requests have no key).
    fn of_write(f: &Incoming) -> Option<Self> {
        if f.opcode != Opcode::Write {
            return None;
        }
        let key = f.key?;
        let mut h = [0u8; uet_wire::ses::SES_STANDARD_HEADER_LEN];
        let mut p = SesStandardPacket::new_unchecked(&mut h[..]);
        p.set_opcode_raw(Opcode::Write.code());
        let rel = RequestFlags {
            rel: f.flags.rel,
            ..RequestFlags::default()
        };
        p.set_version_flags(0, rel.bits(false, false));
        p.set_ri_generation(f.generation.get());
        p.set_job_id(f.addr.job.get());
        p.set_pid_on_fep(f.addr.pid.get());
        p.set_resource_index(f.addr.ri.get());
        p.set_buffer_offset(f.buffer_offset);
        p.set_memory_key(key);
        p.set_request_length(f.request_length);
        Some(Self::of(&h))
    }
}

/// A cached [`Window`]: not part of a message's state (shows as `_`).
#[derive(Clone, Copy, Default)]
struct WindowCache(Option<Window>);

impl core::fmt::Debug for WindowCache {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("_")
    }
}

impl Inbound {
    fn new(source: Source, first: Incoming) -> Self {
        Self {
            source,
            first,
            coverage: RangeSet::new(),
            som_seen: false,
            header_data: None,
            placed: 0,
            dest: Dest::Fresh,
            write: WriteFields::of_write(&first),
            window: WindowCache::default(),
        }
    }

    /// Whether `p` can belong to this message (check step 4).
    fn agrees(&self, p: &Incoming) -> bool {
        let f = &self.first;
        f.opcode == p.opcode
            && f.request_length == p.request_length
            && f.addr == p.addr
            && f.generation == p.generation
            && f.key == p.key
            && f.buffer_offset == p.buffer_offset
            && f.flags.rel == p.flags.rel
    }

    /// Records a packet's bytes and its SOM data.
    fn cover(&mut self, p: &Incoming, n: usize) -> u64 {
        if p.som {
            self.som_seen = true;
            self.header_data = p.header_data;
        }
        let start = u64::from(p.message_offset);
        self.coverage.insert(start, p.message_end(n))
    }

    /// All bytes and the SOM packet seen.
    fn all_seen(&self) -> bool {
        self.som_seen && self.coverage.covered() == u64::from(self.first.request_length)
    }

    /// Nothing more will happen to it.
    fn finished(&self) -> bool {
        match self.dest {
            Dest::Done => true,
            Dest::Failed { .. } => self.all_seen(),
            _ => false,
        }
    }

    fn reply_to(&self) -> ReplyTo {
        self.first.reply_to()
    }
}

/// A send held in the unexpected pool.
#[derive(Debug)]
struct Held {
    source: Source,
    job: JobId,
    pid: PidOnFep,
    message_id: MessageId,
    tag: Option<MatchBits>,
    initiator: InitiatorId,
    /// The SOM packet's header data, once it arrived.
    header_data: Option<u64>,
    /// The message's bytes (emptied when it is discarded).
    data: Vec<u8>,
    /// `request_length`.
    len: u32,
    complete: bool,
    hold: Hold,
}

/// Who an unexpected message is held for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// Nobody yet: it waits in its process's unexpected list, where
    /// receives and peeks find it.
    Listed,
    /// The application claimed it ([`SesTarget::claim_unexpected`]): out of
    /// the list, waiting for [`SesTarget::post_claimed`] or
    /// [`SesTarget::discard_claimed`].
    Claimed,
    /// A receive took it before all of it arrived; it is delivered when
    /// complete. `by_claim`: the receive came from
    /// [`SesTarget::post_claimed`] (it matched nothing else, so it is not
    /// reposted if the message is abandoned).
    Bound { recv: PostedRecv, by_claim: bool },
    /// Discarded while still arriving: its bytes are freed, later packets
    /// are accepted and dropped, and it goes when the message ends.
    Discarded,
}

/// The handle of an unexpected message, from
/// [`SesTarget::peek_unexpected`]: unique per target, never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UnexpectedRef(UnexpectedId);

impl UnexpectedRef {
    /// The raw value.
    #[must_use]
    pub const fn get(self) -> u64 {
        self.0
    }
}

/// What [`SesTarget::peek_unexpected`] tells about an unexpected message:
/// what its first packet told (libfabric `FI_PEEK`; the message may still
/// be arriving).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unexpected {
    /// The handle to claim it by.
    pub id: UnexpectedRef,
    /// Who sent it.
    pub source: Source,
    /// The request's `initiator` field.
    pub initiator: InitiatorId,
    /// The message's length (`request_length`).
    pub message_len: u32,
    /// The match bits of a tagged send.
    pub match_bits: Option<MatchBits>,
    /// Header data, if the SOM packet has arrived and carried it.
    pub header_data: Option<u64>,
}

/// The target side of SES for one endpoint: registered memory, receive
/// queues, partly received messages and application events.
///
/// `M` is the memory type of its [`MemoryTable`] (by default a boxed `Send`
/// trait object).
pub struct SesTarget<M = Box<dyn RegisteredMemory + Send>> {
    config: TargetConfig,
    memory: MemoryTable<M>,
    /// Tracked messages: key → index in `msgs`.
    inflight: HashMap<MsgKey, usize>,
    /// The tracked messages' state (`None`: a free slot, listed in `free`).
    msgs: Vec<Option<Inbound>>,
    free: Vec<usize>,
    /// The message the last tracked packet belonged to, and its index: the
    /// next packet usually belongs to it too, and is then matched without
    /// hashing its key. Always an entry of `inflight`.
    last: Option<(MsgKey, usize)>,
    recent: HashMap<Source, VecDeque<MessageId>>,
    queues: HashMap<(JobId, PidOnFep), RecvQueue>,
    /// The claims of posted receives that are shared with other targets
    /// and not yet taken here ([`SharedRecv`]); one entry per such receive
    /// in `queues`.
    shared: HashMap<RecvId, Arc<SharedRecv>>,
    unexpected: HashMap<UnexpectedId, Held>,
    unexpected_bytes: usize,
    next_unexpected: UnexpectedId,
    next_recv: u64,
    events: VecDeque<TargetEvent>,
}

impl<M> core::fmt::Debug for SesTarget<M> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SesTarget")
            .field("memory", &self.memory)
            .field("inflight", &self.inflight.len())
            .field("unexpected", &self.unexpected.len())
            .field("unexpected_bytes", &self.unexpected_bytes)
            .field("events", &self.events.len())
            .finish_non_exhaustive()
    }
}

impl<M: RegisteredMemory> Default for SesTarget<M> {
    fn default() -> Self {
        Self::new(TargetConfig::default())
    }
}

/// A response flagged guaranteed.
fn guaranteed(header: SesResponseRepr) -> TargetOutcome {
    TargetOutcome::Respond(TargetResponse {
        header,
        guaranteed: true,
    })
}

impl<M: RegisteredMemory> SesTarget<M> {
    /// A target with no memory registered.
    #[must_use]
    pub fn new(config: TargetConfig) -> Self {
        let first_generation = config.first_generation;
        Self {
            inflight: HashMap::with_capacity_and_hasher(
                config.max_inflight_messages.min(1 << 12),
                Default::default(),
            ),
            msgs: Vec::new(),
            free: Vec::new(),
            last: None,
            config,
            memory: MemoryTable::with_first_generation(first_generation),
            recent: HashMap::default(),
            queues: HashMap::default(),
            shared: HashMap::default(),
            unexpected: HashMap::default(),
            unexpected_bytes: 0,
            next_unexpected: 0,
            next_recv: 0,
            events: VecDeque::new(),
        }
    }

    /// The configuration.
    #[must_use]
    pub const fn config(&self) -> &TargetConfig {
        &self.config
    }

    /// The registered memory.
    #[must_use]
    pub const fn memory(&self) -> &MemoryTable<M> {
        &self.memory
    }

    /// The registered memory, to register, deregister, disable.
    pub const fn memory_mut(&mut self) -> &mut MemoryTable<M> {
        &mut self.memory
    }

    /// Handles one request packet the PDS accepted. `payload` is everything
    /// after the SES header (and extension) up to, not including, the
    /// trailer.
    pub fn handle_request(&mut self, src: Source, req: &SesRepr, payload: &[u8]) -> TargetOutcome {
        let Some(inc) = Incoming::from_repr(req, payload.len()) else {
            return TargetOutcome::NotARequest;
        };
        self.handle_incoming(src, &inc, payload)
    }

    /// [`SesTarget::handle_request`] for a standard request without
    /// extension still in the packet (the common data packet, validated by
    /// the parse step), normalised once, straight from its bytes: the same
    /// outcome as `handle_request` of [`StandardView::request`] (tested).
    pub fn handle_standard(
        &mut self,
        src: Source,
        req: StandardView<'_>,
        payload: &[u8],
    ) -> TargetOutcome {
        if self.write_continuation(src, &req, payload) {
            return TargetOutcome::Accepted;
        }
        self.handle_standard_general(src, req, payload)
    }

    /// [`SesTarget::handle_standard`] without its first step, for a caller
    /// that tried [`SesTarget::write_continuation`] itself.
    pub(crate) fn handle_standard_general(
        &mut self,
        src: Source,
        req: StandardView<'_>,
        payload: &[u8],
    ) -> TargetOutcome {
        let inc = Incoming::from_standard(&req, payload.len());
        self.handle_incoming(src, &inc, payload)
    }

    /// The usual packet of a write, decided and placed straight from the
    /// header's bytes: a continuation (not SOM, not EOM) of the message the
    /// last tracked packet belonged to, a write, agreeing with it (check
    /// step 4, on [`WriteFields`]), inside it (step 5), placed through the
    /// message's memory window (step 6: checked once, used again while
    /// the memory table is unchanged), and neither completing the message
    /// nor failing it for too many holes. `false`, with nothing changed, for
    /// anything else, which [`SesTarget::handle_standard_general`] then
    /// handles; where it answers (placed: [`TargetOutcome::Accepted`]), it
    /// does exactly what that does (tested against it).
    #[inline]
    pub(crate) fn write_continuation(
        &mut self,
        src: Source,
        req: &StandardView<'_>,
        payload: &[u8],
    ) -> bool {
        let p = req.packet();
        if p.som() || p.eom() || p.ie() || p.opcode_raw() != Opcode::Write.code() {
            return false;
        }
        let Some((k, ix)) = self.last else {
            return false;
        };
        if k.src != src || k.id != MessageId::from_masked(p.message_id()) {
            return false;
        }
        let Some(msg) = self.msgs.get_mut(ix).and_then(Option::as_mut) else {
            return false;
        };
        if !matches!(msg.dest, Dest::Write) || msg.write != Some(WriteFields::of(req.bytes())) {
            return false;
        }
        let Some(data) = payload.get(..usize::from(p.payload_length())) else {
            return false;
        };
        let at = u64::from(p.message_offset());
        let n = data.len() as u64;
        let total = u64::from(msg.first.request_length);
        // Inside the message, and not the packet that completes it (all
        // bytes and the SOM) or gives it one hole too many.
        if at + n > total
            || msg.coverage.fragments() >= MAX_RANGES
            || (msg.som_seen && msg.coverage.covered() + n >= total)
        {
            return false;
        }
        let window = match msg.window.0.and_then(|w| self.memory.window(&w)) {
            Some(w) => w,
            None => {
                let f = &msg.first;
                let access = AccessRequest {
                    addr: f.addr,
                    generation: f.generation,
                    key: f.memory_key(),
                    needed: Access::REMOTE_WRITE,
                    addressing: f.addressing(),
                    offset: f.buffer_offset,
                    len: total,
                };
                let Ok(w) = self.memory.check_window(&access) else {
                    return false;
                };
                msg.window.0 = Some(w);
                let Some(window) = self.memory.window(&w) else {
                    return false;
                };
                window
            }
        };
        let mut window = window;
        // The window is the whole message: the packet fits.
        if !window.write(at, data) {
            return false;
        }
        msg.placed += msg.coverage.insert(at, at + n);
        true
    }

    /// Steps 1 and 2 of the check order, and the dispatch by opcode.
    #[inline(always)]
    fn handle_incoming(&mut self, src: Source, inc: &Incoming, payload: &[u8]) -> TargetOutcome {
        let reply = inc.reply_to();
        if let Err(rc) = inc.check_form() {
            return guaranteed(reply.response(rc, ListKind::Expected, 0));
        }
        match inc.opcode {
            Opcode::NoOp => TargetOutcome::Respond(TargetResponse {
                header: reply.response(ReturnCode::Ok, ListKind::Expected, 0),
                guaranteed: false,
            }),
            Opcode::Read => self.on_read(inc),
            Opcode::Write | Opcode::Send | Opcode::TaggedSend | Opcode::DatagramSend => {
                self.on_message(src, inc, payload)
            }
            // Atomics, rendezvous, deferrable sends, RTR, MSG_ERROR, reserved
            // and vendor codes: not implemented yet.
            _ => guaranteed(reply.response(ReturnCode::UnsupportedOp, ListKind::Expected, 0)),
        }
    }

    /// The next application event.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<TargetEvent> {
        self.events.pop_front()
    }

    /// Posts a receive. It first takes the oldest unexpected message it
    /// accepts (completing at once if that message is whole); otherwise it
    /// waits, behind earlier receives, for a matching send.
    pub fn post_recv(&mut self, spec: RecvSpec) -> Result<RecvId, PostError> {
        self.post(spec, None, &mut false)
    }

    /// Posts a receive that is also posted at other targets
    /// ([`SharedRecv`]): as [`SesTarget::post_recv`], but it takes a
    /// message (an unexpected one now, or a send later) only if it wins
    /// `claim`. `Ok(None)`: another target had taken it already, nothing
    /// is posted here. A copy that loses later ends without an event and
    /// is reported by [`SesTarget::sweep_shared_recvs`]. An error is
    /// returned by every target that finds the buffer unusable; the caller
    /// reports it once.
    pub fn post_shared_recv(
        &mut self,
        spec: RecvSpec,
        claim: Arc<SharedRecv>,
    ) -> Result<Option<RecvId>, PostError> {
        let mut taken = false;
        let id = self.post(spec, Some(claim), &mut taken)?;
        Ok((!taken).then_some(id))
    }

    /// Drops the posted copies of shared receives that another target
    /// has taken (those a send passed over, and those still queued, which
    /// would otherwise wait for a send that never comes); returns their
    /// IDs. Each ID is returned once.
    pub fn sweep_shared_recvs(&mut self) -> Vec<RecvId> {
        let gone: Vec<RecvId> = self
            .shared
            .iter()
            .filter(|(_, c)| c.is_claimed())
            .map(|(id, _)| *id)
            .collect();
        for id in &gone {
            self.shared.remove(id);
            self.queues.values_mut().any(|q| q.remove(*id).is_some());
        }
        gone
    }

    /// Shared receives posted here and neither taken nor dropped yet.
    #[must_use]
    pub fn shared_recvs(&self) -> usize {
        self.shared.len()
    }

    /// Posts a receive; `taken` is set when it is a shared receive that
    /// another target took first.
    fn post(
        &mut self,
        spec: RecvSpec,
        claim: Option<Arc<SharedRecv>>,
        taken: &mut bool,
    ) -> Result<RecvId, PostError> {
        let recv = self.check_recv(spec)?;
        if self.queues.values().map(RecvQueue::posted).sum::<usize>()
            >= self.config.max_posted_receives
        {
            return Err(PostError::TooManyReceives);
        }
        self.next_recv += 1;

        let queue = self.queues.entry((spec.job, spec.pid)).or_default();
        let unexpected = &self.unexpected;
        let found = queue.unexpected.iter().position(|id| {
            unexpected
                .get(id)
                .is_some_and(|m| spec.accepts(m.tag, m.source.fep, m.initiator))
        });
        // A shared receive that another target took already takes nothing
        // here, and waits for nothing.
        if found.is_some() && claim.as_ref().is_some_and(|c| !c.claim()) {
            *taken = true;
            return Ok(recv.id);
        }
        match found.and_then(|pos| queue.unexpected.remove(pos)) {
            None => {
                if let Some(c) = claim {
                    if c.is_claimed() {
                        *taken = true;
                        return Ok(recv.id);
                    }
                    self.shared.insert(recv.id, c);
                }
                queue.push_back(recv);
            }
            Some(uid) => {
                let whole = match self.unexpected.get_mut(&uid) {
                    Some(m) if !m.complete => {
                        m.hold = Hold::Bound {
                            recv,
                            by_claim: false,
                        };
                        false
                    }
                    _ => true,
                };
                if whole {
                    self.deliver_unexpected(uid, recv);
                }
            }
        }
        Ok(recv.id)
    }

    /// Checks a receive's buffer; the receive it would be, with the next
    /// receive ID (not consumed).
    fn check_recv(&self, spec: RecvSpec) -> Result<PostedRecv, PostError> {
        let entry = self
            .memory
            .get(spec.region())
            .ok_or(PostError::NotRegistered)?;
        if !entry.access().contains(Access::RECV) {
            return Err(PostError::NoSendRight);
        }
        if !entry.is_enabled() {
            return Err(PostError::Disabled);
        }
        match spec.buffer.offset.checked_add(spec.buffer.len) {
            Some(end) if end <= entry.len() => {}
            _ => return Err(PostError::OutOfBounds),
        }
        Ok(PostedRecv {
            id: RecvId(self.next_recv),
            spec,
            generation: entry.generation(),
        })
    }

    /// Removes a posted receive that no message has matched yet; `false` if
    /// there is none with that ID (unknown, completed, or already bound to
    /// an arriving message).
    pub fn cancel_recv(&mut self, id: RecvId) -> bool {
        self.shared.remove(&id);
        self.queues.values_mut().any(|q| q.remove(id).is_some())
    }

    /// The oldest unexpected message of process `(job, pid)` that a receive
    /// of `kind` would take (the order [`SesTarget::post_recv`] matches
    /// in), without taking it: libfabric `FI_PEEK`. Claimed messages, and
    /// messages a receive already took while they arrive, are not seen.
    #[must_use]
    pub fn peek_unexpected(&self, job: JobId, pid: PidOnFep, kind: RecvKind) -> Option<Unexpected> {
        self.peek_unexpected_from(job, pid, kind, None)
    }

    /// [`SesTarget::peek_unexpected`] for a receive directed at `from`
    /// (`FI_DIRECTED_RECV`).
    #[must_use]
    pub fn peek_unexpected_from(
        &self,
        job: JobId,
        pid: PidOnFep,
        kind: RecvKind,
        from: Option<Sender>,
    ) -> Option<Unexpected> {
        let queue = self.queues.get(&(job, pid))?;
        queue.unexpected.iter().find_map(|&uid| {
            let m = self.unexpected.get(&uid)?;
            let from_ok = from.is_none_or(|s| s.fep == m.source.fep && s.initiator == m.initiator);
            (from_ok && kind.accepts(m.tag)).then_some(Unexpected {
                id: UnexpectedRef(uid),
                source: m.source,
                initiator: m.initiator,
                message_len: m.len,
                match_bits: m.tag,
                header_data: m.header_data,
            })
        })
    }

    /// Claims an unexpected message (libfabric `FI_PEEK | FI_CLAIM`): no
    /// receive and no peek finds it any more; it stays held, counting
    /// toward [`TargetConfig::max_unexpected_messages`] and
    /// [`TargetConfig::max_unexpected_bytes`], until
    /// [`SesTarget::post_claimed`] or [`SesTarget::discard_claimed`].
    /// `false` if `id` names no listed message (unknown, gone, already
    /// claimed or taken by a receive).
    pub fn claim_unexpected(&mut self, id: UnexpectedRef) -> bool {
        let Some(m) = self.unexpected.get_mut(&id.0) else {
            return false;
        };
        if m.hold != Hold::Listed {
            return false;
        }
        m.hold = Hold::Claimed;
        if let Some(q) = self.queues.get_mut(&(m.job, m.pid)) {
            q.unexpected.retain(|&u| u != id.0);
        }
        true
    }

    /// Delivers a claimed message into `spec`'s buffer (libfabric
    /// `FI_CLAIM` receive), as a receive that matched it would: the
    /// [`TargetEvent::Recv`] with the returned ID comes at once if the
    /// message is whole, otherwise when its last byte arrives; a message
    /// longer than the buffer is truncated. `spec.kind` is not used. The
    /// buffer is checked as [`SesTarget::post_recv`] checks it;
    /// [`PostError::NotClaimed`] if `id` names no claimed message.
    pub fn post_claimed(&mut self, id: UnexpectedRef, spec: RecvSpec) -> Result<RecvId, PostError> {
        if self
            .unexpected
            .get(&id.0)
            .is_none_or(|m| m.hold != Hold::Claimed)
        {
            return Err(PostError::NotClaimed);
        }
        let recv = self.check_recv(spec)?;
        self.next_recv += 1;
        let whole = match self.unexpected.get_mut(&id.0) {
            Some(m) if !m.complete => {
                m.hold = Hold::Bound {
                    recv,
                    by_claim: true,
                };
                false
            }
            _ => true,
        };
        if whole {
            self.deliver_unexpected(id.0, recv);
        }
        Ok(recv.id)
    }

    /// Forgets process `(job, pid)` on this target, when it has gone (its
    /// client left the daemon, and its PIDonFEP may be handed to the next
    /// one): its posted receives are withdrawn without an event, and the
    /// unexpected messages held for it are freed (one still arriving keeps
    /// its slot until its last packet, whose data is dropped, as
    /// [`SesTarget::discard_claimed`] does). Otherwise the next process with
    /// that PIDonFEP would have its sends matched by receives whose buffers
    /// are gone. Returns the withdrawn receives' IDs.
    pub fn release_process(&mut self, job: JobId, pid: PidOnFep) -> Vec<RecvId> {
        let ids: Vec<RecvId> = self
            .queues
            .remove(&(job, pid))
            .map(|q| q.posted_ids().collect())
            .unwrap_or_default();
        for id in &ids {
            self.shared.remove(id);
        }
        let held: Vec<UnexpectedId> = self
            .unexpected
            .iter()
            .filter(|(_, m)| m.job == job && m.pid == pid)
            .map(|(id, _)| *id)
            .collect();
        for uid in held {
            let complete = self.unexpected.get(&uid).is_some_and(|m| m.complete);
            if complete {
                if let Some(m) = self.unexpected.remove(&uid) {
                    self.unexpected_bytes -= m.data.len();
                }
            } else if let Some(m) = self.unexpected.get_mut(&uid) {
                m.hold = Hold::Discarded;
                self.unexpected_bytes -= m.data.len();
                m.data = Vec::new();
            }
        }
        ids
    }

    /// Drops a claimed message (libfabric `FI_CLAIM | FI_DISCARD`) and frees
    /// its bytes. One still arriving stays counted as a message (not in
    /// bytes) until its last packet, whose data is dropped; its sender
    /// still gets `RC_OK`. `false` if `id` names no claimed message.
    pub fn discard_claimed(&mut self, id: UnexpectedRef) -> bool {
        let Some(m) = self.unexpected.get_mut(&id.0) else {
            return false;
        };
        if m.hold != Hold::Claimed {
            return false;
        }
        if m.complete {
            self.drop_unexpected(id.0);
        } else {
            m.hold = Hold::Discarded;
            self.unexpected_bytes -= m.data.len();
            m.data = Vec::new();
        }
        true
    }

    /// Drops the partly received messages and the duplicate memory of a
    /// source. Call it when the PDC closes: a message abandoned mid-way (or
    /// failed before all its packets were seen) otherwise keeps its slot of
    /// [`TargetConfig::max_inflight_messages`], and the per-source duplicate
    /// memory stays. A receive bound to a dropped message goes back to the
    /// head of its queue. Returns how many messages were dropped.
    pub fn forget_source(&mut self, src: Source) -> usize {
        self.recent.remove(&src);
        let keys: Vec<MsgKey> = self
            .inflight
            .keys()
            .filter(|k| k.src == src)
            .copied()
            .collect();
        for k in &keys {
            let Some(msg) = self.untrack(k) else {
                continue;
            };
            match msg.dest {
                Dest::Posted(recv) => self.repost(recv),
                Dest::Unexpected(uid) => match self.drop_unexpected(uid) {
                    Some((recv, false)) => self.repost(recv),
                    // The receive was for this message alone: it ends with
                    // it, as a receive bound to a message that fails does.
                    Some((recv, true)) => {
                        let failed = Completion::err(
                            msg.reply_to().message_id,
                            CompletionError::Remote(ReturnCode::Undeliverable),
                            0,
                        );
                        self.push_recv_event(recv, &msg, ListKind::Overflow, failed);
                    }
                    None => {}
                },
                _ => {}
            }
        }
        keys.len()
    }

    /// Number of multi-packet messages being received.
    #[must_use]
    pub fn inflight_messages(&self) -> usize {
        self.inflight.len()
    }

    /// Unexpected messages held, and their bytes.
    #[must_use]
    pub fn unexpected_usage(&self) -> (usize, usize) {
        (self.unexpected.len(), self.unexpected_bytes)
    }

    /// Receives posted and not yet matched, for one process.
    #[must_use]
    pub fn posted_receives(&self, job: JobId, pid: PidOnFep) -> usize {
        self.queues.get(&(job, pid)).map_or(0, RecvQueue::posted)
    }

    // -- reads --------------------------------------------------------------

    /// A read request packet (§3 "Read responses"). A `som` + `eom` packet
    /// asks for the whole `request_length`; a non-SOM packet for
    /// `payload_length` bytes at `message_offset` (REFPROV splits reads into
    /// such packets); a SOM packet without `eom` for the first
    /// [`TargetConfig::max_read_payload`] bytes. Small and medium reads are
    /// not implemented (their response must carry the request's PSN, which
    /// SES does not see): `UNSUPPORTED_OP`.
    fn on_read(&self, inc: &Incoming) -> TargetOutcome {
        let reply = inc.reply_to();
        let fail = |rc| guaranteed(reply.response(rc, ListKind::Expected, 0));
        let Some(message_id) = inc.message_id else {
            return fail(ReturnCode::UnsupportedOp);
        };
        let total = inc.request_length;
        let (first, len) = if inc.is_single() {
            (0, total)
        } else if !inc.som {
            let n = u32::try_from(inc.payload_len).unwrap_or(u32::MAX);
            (inc.message_offset, n)
        } else {
            let n = u32::try_from(self.config.max_read_payload).unwrap_or(u32::MAX);
            (0, total.min(n))
        };
        if first.checked_add(len).is_none_or(|end| end > total) {
            return fail(ReturnCode::OpViolation);
        }
        if inc.flags.ie {
            return fail(ReturnCode::InitiatorErr);
        }
        let req = AccessRequest {
            addr: inc.addr,
            generation: inc.generation,
            key: inc.memory_key(),
            needed: Access::REMOTE_READ,
            addressing: inc.addressing(),
            offset: inc.buffer_offset,
            len: u64::from(total),
        };
        match self.memory.resolve(&req) {
            Err(rc) => fail(rc),
            Ok(start) => TargetOutcome::Read(ReadResponder::new(
                ReadSource {
                    region: inc.addr,
                    generation: inc.generation,
                    region_start: start + u64::from(first),
                    first,
                    len,
                    total,
                },
                self.config.max_read_payload,
                inc.addr.job,
                message_id,
            )),
        }
    }

    // -- writes and sends ---------------------------------------------------

    /// A packet of a write or send. A packet of a message already tracked
    /// is handled in place in its slot of `msgs` (found without a lookup
    /// when it is the last packet's message, no move of the message's
    /// state); a new message's state is built here and tracked only if it
    /// is not finished by its first packet.
    fn on_message(&mut self, src: Source, inc: &Incoming, payload: &[u8]) -> TargetOutcome {
        let key = match inc.message_id {
            Some(id) if !inc.is_single() => Some(MsgKey { src, id }),
            _ => None,
        };
        if let Some(k) = key
            && let Some(ix) = self.find(&k)
        {
            // `on_packet` never touches `msgs`: take the slots out for the
            // call so that the message can be borrowed from them while
            // `self` is borrowed mutably (an empty vector costs no
            // allocation).
            let mut msgs = core::mem::take(&mut self.msgs);
            let tracked = msgs.get_mut(ix).and_then(Option::as_mut).map(|msg| {
                let outcome = self.on_packet(msg, inc, payload);
                (outcome, msg.finished())
            });
            self.msgs = msgs;
            match tracked {
                Some((outcome, true)) => {
                    self.untrack(&k);
                    self.remember(src, k.id);
                    return outcome;
                }
                Some((outcome, false)) => {
                    self.last = Some((k, ix));
                    return outcome;
                }
                None => {}
            }
        }
        if inc.message_id.is_some_and(|id| self.is_recent(src, id)) {
            return TargetOutcome::Duplicate;
        }
        if key.is_some() && self.inflight.len() >= self.config.max_inflight_messages {
            return TargetOutcome::NoResource;
        }
        let mut msg = Inbound::new(src, *inc);
        let outcome = self.on_packet(&mut msg, inc, payload);
        if msg.finished() {
            if let Some(id) = inc.message_id {
                self.remember(src, id);
            }
        } else if let Some(k) = key {
            let ix = match self.free.pop() {
                Some(ix) => ix,
                None => {
                    self.msgs.push(None);
                    self.msgs.len() - 1
                }
            };
            if let Some(slot) = self.msgs.get_mut(ix) {
                *slot = Some(msg);
            }
            self.inflight.insert(k, ix);
            self.last = Some((k, ix));
        }
        outcome
    }

    /// The slot of a tracked message: the last one's without a lookup,
    /// otherwise [`SesTarget::find_general`]'s.
    #[inline]
    fn find(&self, k: &MsgKey) -> Option<usize> {
        match self.last {
            Some((lk, ix)) if lk == *k => Some(ix),
            _ => self.find_general(k),
        }
    }

    /// The slot of a tracked message, by its key.
    fn find_general(&self, k: &MsgKey) -> Option<usize> {
        self.inflight.get(k).copied()
    }

    /// Stops tracking a message; returns its state.
    fn untrack(&mut self, k: &MsgKey) -> Option<Inbound> {
        let ix = self.inflight.remove(k)?;
        if self.last.is_some_and(|(lk, _)| lk == *k) {
            self.last = None;
        }
        let msg = self.msgs.get_mut(ix).and_then(Option::take);
        self.free.push(ix);
        msg
    }

    /// Every tracked message is found by [`SesTarget::find`] where
    /// [`SesTarget::find_general`] finds it, holds state there, and no
    /// other slot does.
    #[cfg(test)]
    fn lookups_agree(&self) -> bool {
        let held = self.msgs.iter().filter(|m| m.is_some()).count();
        held == self.inflight.len()
            && self
                .last
                .is_none_or(|(k, ix)| self.find_general(&k) == Some(ix))
            && self.inflight.iter().all(|(k, &ix)| {
                self.find(k) == Some(ix) && self.msgs.get(ix).is_some_and(Option::is_some)
            })
    }

    /// Steps 3-6 of the check order, then placement and completion.
    fn on_packet(&mut self, msg: &mut Inbound, inc: &Incoming, payload: &[u8]) -> TargetOutcome {
        let data = if msg.agrees(inc) {
            inc.packet_data(payload)
        } else {
            Err(ReturnCode::OpViolation)
        };
        if let Dest::Failed { rc, list } = msg.dest {
            if let Ok(d) = data
                && msg.coverage.fragments() < MAX_RANGES
            {
                msg.cover(inc, d.len());
            }
            return guaranteed(msg.reply_to().response(rc, list, msg.placed));
        }
        let data = match data {
            Ok(d) => d,
            Err(rc) => return self.fail(msg, rc, ListKind::Expected, None),
        };
        if matches!(msg.dest, Dest::Fresh) {
            match self.open(msg.source, inc) {
                Ok(dest) => msg.dest = dest,
                Err((rc, list)) => {
                    msg.cover(inc, data.len());
                    return self.fail(msg, rc, list, None);
                }
            }
        }
        let at = u64::from(inc.message_offset);
        let placed = match &msg.dest {
            Dest::Write => self.place_write(inc, data),
            Dest::Posted(recv) => place_in_recv(&mut self.memory, recv, at, data),
            Dest::Unexpected(uid) => self.place_unexpected(*uid, at, data),
            Dest::Fresh | Dest::Done | Dest::Failed { .. } => {
                Err(PlaceError::Code(ReturnCode::OpViolation))
            }
        };
        let newly = msg.cover(inc, data.len());
        if inc.som
            && let Dest::Unexpected(uid) = msg.dest
            && let Some(m) = self.unexpected.get_mut(&uid)
        {
            // What a peek reports before the message is whole.
            m.header_data = msg.header_data;
        }
        match placed {
            Ok(()) => {
                if matches!(msg.dest, Dest::Write) {
                    msg.placed += newly;
                }
            }
            Err(PlaceError::Code(rc)) => return self.fail(msg, rc, ListKind::Expected, None),
            Err(PlaceError::BufferGone) => {
                return self.fail(
                    msg,
                    ReturnCode::Undeliverable,
                    ListKind::Expected,
                    Some(LocalError::RecvBufferGone),
                );
            }
        }
        if msg.coverage.fragments() > MAX_RANGES {
            return self.fail(msg, ReturnCode::OpViolation, ListKind::Expected, None);
        }
        if msg.all_seen() {
            self.complete(msg)
        } else {
            TargetOutcome::Accepted
        }
    }

    /// Decides where a new message goes (its first valid packet).
    fn open(&mut self, src: Source, inc: &Incoming) -> Result<Dest, (ReturnCode, ListKind)> {
        if inc.opcode == Opcode::Write {
            return Ok(Dest::Write);
        }
        let (job, pid) = (inc.addr.job, inc.addr.pid);
        self.memory
            .check_process(job, pid)
            .map_err(|rc| (rc, ListKind::Expected))?;
        let tag = inc.match_bits();
        let shared = &mut self.shared;
        // A shared receive takes the send only if no other target took it
        // first.
        // A copy that loses stays listed in `shared` until a sweep reports
        // it to the caller.
        let claim = |r: &PostedRecv| match shared.get(&r.id) {
            None => true,
            Some(c) if c.claim() => {
                shared.remove(&r.id);
                true
            }
            Some(_) => false,
        };
        if let Some(recv) = self
            .queues
            .get_mut(&(job, pid))
            .and_then(|q| q.take_posted_if(tag, src.fep, inc.initiator, claim))
        {
            return Ok(Dest::Posted(recv));
        }
        let len = usize::try_from(inc.request_length).unwrap_or(usize::MAX);
        let room = self.unexpected.len() < self.config.max_unexpected_messages
            && self
                .unexpected_bytes
                .checked_add(len)
                .is_some_and(|b| b <= self.config.max_unexpected_bytes);
        if !room {
            return Err((ReturnCode::NoMatch, ListKind::Overflow));
        }
        let uid = self.next_unexpected;
        self.next_unexpected += 1;
        self.unexpected.insert(
            uid,
            Held {
                source: src,
                job,
                pid,
                message_id: inc.message_id.unwrap_or_default(),
                tag,
                initiator: inc.initiator,
                header_data: None,
                data: vec![0; len],
                len: inc.request_length,
                complete: false,
                hold: Hold::Listed,
            },
        );
        self.unexpected_bytes += len;
        self.queues
            .entry((job, pid))
            .or_default()
            .unexpected
            .push_back(uid);
        Ok(Dest::Unexpected(uid))
    }

    /// Places a write packet after checking the whole message's range.
    fn place_write(&mut self, inc: &Incoming, data: &[u8]) -> Result<(), PlaceError> {
        let req = AccessRequest {
            addr: inc.addr,
            generation: inc.generation,
            key: inc.memory_key(),
            needed: Access::REMOTE_WRITE,
            addressing: inc.addressing(),
            offset: inc.buffer_offset,
            len: u64::from(inc.request_length),
        };
        let mut window = self.memory.check(&req).map_err(PlaceError::Code)?;
        // `packet_data` keeps the packet inside the message, so this fits.
        if window.write(u64::from(inc.message_offset), data) {
            Ok(())
        } else {
            Err(PlaceError::Code(ReturnCode::BadAddr))
        }
    }

    fn place_unexpected(
        &mut self,
        uid: UnexpectedId,
        at: u64,
        data: &[u8],
    ) -> Result<(), PlaceError> {
        if self
            .unexpected
            .get(&uid)
            .is_some_and(|m| m.hold == Hold::Discarded)
        {
            return Ok(());
        }
        let dst = self
            .unexpected
            .get_mut(&uid)
            .and_then(|m| {
                let start = usize::try_from(at).ok()?;
                m.data.get_mut(start..start.checked_add(data.len())?)
            })
            .ok_or(PlaceError::Code(ReturnCode::Undeliverable))?;
        dst.copy_from_slice(data);
        Ok(())
    }

    /// All bytes arrived: the response, the event, the bookkeeping.
    fn complete(&mut self, msg: &mut Inbound) -> TargetOutcome {
        let reply = msg.reply_to();
        let total = u64::from(msg.first.request_length);
        match core::mem::replace(&mut msg.dest, Dest::Done) {
            Dest::Write => {
                if let Some(hd) = msg.header_data {
                    self.events
                        .push_back(TargetEvent::WriteWithData(WriteEvent {
                            source: msg.source,
                            message_id: reply.message_id,
                            region: msg.first.addr,
                            offset: msg.first.buffer_offset,
                            len: msg.first.request_length,
                            header_data: hd,
                        }));
                }
                guaranteed(reply.response(ReturnCode::Ok, ListKind::Expected, total))
            }
            Dest::Posted(recv) => {
                let placed = total.min(recv.spec.buffer.len);
                self.push_recv_event(
                    recv,
                    msg,
                    ListKind::Expected,
                    Completion::ok(reply.message_id, placed),
                );
                guaranteed(reply.response(ReturnCode::Ok, ListKind::Expected, placed))
            }
            Dest::Unexpected(uid) => {
                let hold = self.unexpected.get_mut(&uid).map(|m| {
                    m.complete = true;
                    m.header_data = msg.header_data;
                    m.hold
                });
                match hold {
                    Some(Hold::Bound { recv, .. }) => self.deliver_unexpected(uid, recv),
                    Some(Hold::Discarded) => {
                        self.drop_unexpected(uid);
                    }
                    _ => {}
                }
                guaranteed(reply.response(ReturnCode::Ok, ListKind::Overflow, total))
            }
            Dest::Fresh | Dest::Done | Dest::Failed { .. } => {
                msg.dest = Dest::Failed {
                    rc: ReturnCode::OpViolation,
                    list: ListKind::Expected,
                };
                guaranteed(reply.response(ReturnCode::OpViolation, ListKind::Expected, 0))
            }
        }
    }

    /// Fails the message: later packets get the same code. A receive bound
    /// to it completes with the error (`recv_err`, or the code).
    fn fail(
        &mut self,
        msg: &mut Inbound,
        rc: ReturnCode,
        list: ListKind,
        recv_err: Option<LocalError>,
    ) -> TargetOutcome {
        let reply = msg.reply_to();
        let err = recv_err.map_or(CompletionError::Remote(rc), CompletionError::Local);
        let failed = Completion::err(reply.message_id, err, 0);
        match core::mem::replace(&mut msg.dest, Dest::Failed { rc, list }) {
            Dest::Posted(recv) => self.push_recv_event(recv, msg, ListKind::Expected, failed),
            Dest::Unexpected(uid) => {
                if let Some((recv, _)) = self.drop_unexpected(uid) {
                    self.push_recv_event(recv, msg, ListKind::Overflow, failed);
                }
            }
            _ => {}
        }
        guaranteed(reply.response(rc, list, msg.placed))
    }

    fn push_recv_event(
        &mut self,
        recv: PostedRecv,
        msg: &Inbound,
        list: ListKind,
        completion: Completion,
    ) {
        self.events.push_back(TargetEvent::Recv(RecvEvent {
            recv: recv.id,
            source: msg.source,
            completion,
            message_len: msg.first.request_length,
            match_bits: msg.first.match_bits(),
            header_data: msg.header_data,
            initiator: msg.first.initiator,
            list,
        }));
    }

    /// Copies a whole unexpected message into `recv`'s buffer, frees it and
    /// raises the receive's event.
    fn deliver_unexpected(&mut self, uid: UnexpectedId, recv: PostedRecv) {
        let Some(m) = self.unexpected.remove(&uid) else {
            return;
        };
        self.unexpected_bytes -= m.data.len();
        let total = u64::try_from(m.data.len()).unwrap_or(u64::MAX);
        let completion = match place_in_recv(&mut self.memory, &recv, 0, &m.data) {
            Ok(()) => Completion::ok(m.message_id, total.min(recv.spec.buffer.len)),
            Err(_) => Completion::err(
                m.message_id,
                CompletionError::Local(LocalError::RecvBufferGone),
                0,
            ),
        };
        self.events.push_back(TargetEvent::Recv(RecvEvent {
            recv: recv.id,
            source: m.source,
            completion,
            message_len: m.len,
            match_bits: m.tag,
            header_data: m.header_data,
            initiator: m.initiator,
            list: ListKind::Overflow,
        }));
    }

    /// Frees an unexpected message; returns the receive that was bound to
    /// it, and whether that receive came from [`SesTarget::post_claimed`].
    fn drop_unexpected(&mut self, uid: UnexpectedId) -> Option<(PostedRecv, bool)> {
        let m = self.unexpected.remove(&uid)?;
        self.unexpected_bytes -= m.data.len();
        match m.hold {
            Hold::Listed => {
                if let Some(q) = self.queues.get_mut(&(m.job, m.pid)) {
                    q.unexpected.retain(|&id| id != uid);
                }
                None
            }
            Hold::Bound { recv, by_claim } => Some((recv, by_claim)),
            Hold::Claimed | Hold::Discarded => None,
        }
    }

    fn repost(&mut self, recv: PostedRecv) {
        self.queues
            .entry((recv.spec.job, recv.spec.pid))
            .or_default()
            .push_front(recv);
    }

    fn is_recent(&self, src: Source, id: MessageId) -> bool {
        self.recent.get(&src).is_some_and(|r| r.contains(&id))
    }

    fn remember(&mut self, src: Source, id: MessageId) {
        let cap = self.config.recent_per_source;
        if cap == 0 {
            return;
        }
        let r = self.recent.entry(src).or_default();
        if r.len() >= cap {
            r.pop_front();
        }
        r.push_back(id);
    }
}

/// Why a packet's bytes could not be placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PlaceError {
    /// Answer with this code.
    Code(ReturnCode),
    /// The receive buffer's region went away (`UNDELIVERABLE`).
    BufferGone,
}

/// Places `data` at message offset `at` in a receive buffer, truncating at
/// the buffer's end.
fn place_in_recv<M: RegisteredMemory>(
    memory: &mut MemoryTable<M>,
    recv: &PostedRecv,
    at: u64,
    data: &[u8],
) -> Result<(), PlaceError> {
    let entry = memory
        .get_mut(recv.spec.region())
        .ok_or(PlaceError::BufferGone)?;
    if entry.generation() != recv.generation || !entry.is_enabled() {
        return Err(PlaceError::BufferGone);
    }
    let buf = recv.spec.buffer;
    let Some(room) = buf.len.checked_sub(at).filter(|r| *r > 0) else {
        return Ok(()); // entirely past the buffer: truncated away
    };
    let n = usize::try_from(room).map_or(data.len(), |r| r.min(data.len()));
    let start = buf.offset + at;
    match start.checked_add(u64::try_from(n).unwrap_or(u64::MAX)) {
        Some(end) if end <= entry.len() => {}
        _ => return Err(PlaceError::BufferGone),
    }
    if let Some(bytes) = data.get(..n) {
        entry.memory_mut().write_at(start, bytes);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
