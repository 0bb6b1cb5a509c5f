//! The wire protocol between an application and `uetd` on the local Unix
//! socket: frames, message types, their binary layout, and an incremental
//! [`FrameReader`] for either end.
//!
//! See the [crate documentation](crate) for the frame layout, the message
//! table and the sequencing rules.

mod codec;
mod reader;
#[cfg(test)]
mod tests;

use core::fmt;
use std::net::IpAddr;

use codec::{Dec, Enc};
pub use reader::{FrameReader, MAX_PENDING_FDS, Received};

/// The protocol version this crate speaks (carried in `Hello`/`HelloOk`).
/// Version 2 added the shared-memory ring (`RingOpen`/`RingOpened`).
pub const PROTOCOL_VERSION: u16 = 2;

/// The oldest version a daemon of this crate still serves: a version-1
/// client gets `HelloOk` with version 1 and everything but the ring.
pub const MIN_PROTOCOL_VERSION: u16 = 1;

/// The largest frame either side sends or accepts, length prefix included.
/// A longer length prefix is refused before anything is buffered for it.
pub const MAX_FRAME_LEN: usize = 64 * 1024;

/// Bytes before a frame's body: the `u32` length and the `u16` type.
pub const HEADER_LEN: usize = 6;

/// The most document bytes one `StatsChunk` carries: the frame limit less
/// the header, the `last` flag and the string's length.
pub const MAX_STATS_CHUNK: usize = MAX_FRAME_LEN - HEADER_LEN - 1 - 2;

/// The longest stats document a client reassembles from `StatsChunk`s;
/// a daemon that streams more is refused (the connection is then out of
/// step and unusable).
pub const MAX_STATS_LEN: usize = 64 << 20;

/// The first four body bytes of `Hello`: they tell a stray connection from
/// a uet client before anything else is read.
pub const HELLO_MAGIC: [u8; 4] = *b"UETa";

/// Widths of the spec's addressing fields (`docs/protocol-notes.md` §4.1); the
/// decoder refuses wider values.
const JOB_BITS: u32 = 24;
const PID_BITS: u32 = 12;
const RI_BITS: u32 = 12;

/// A region handle, chosen by the daemon and valid on one connection only.
/// `Register` and `RegisterLocal` share one handle space per connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle(pub u32);

impl fmt::Display for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "h{}", self.0)
    }
}

/// An operation's tag, chosen by the client and echoed in its completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tag(pub u64);

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Rights a registered region grants (`uet_wire::Access`, the type the
/// daemon registers and the SES target checks).
pub use uet_wire::Access;

/// The rights a client may ask for: remote write, remote read and posted
/// receives. Atomics are not implemented and key-less access is the
/// daemon's to grant, so a request with any other bit is a decode error.
pub const CLIENT_ACCESS: Access = Access::REMOTE_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::RECV);

/// Decodes requested rights: `None` unless every bit is one of
/// [`CLIENT_ACCESS`].
#[must_use]
pub const fn client_access(bits: u8) -> Option<Access> {
    match Access::from_bits(bits) {
        Some(a) if CLIENT_ACCESS.contains(a) => Some(a),
        _ => None,
    }
}

/// A position in one of this client's regions: the source of a write or
/// send, the destination of a read or receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LocalRef {
    /// The region (from `Registered` or `LocalRegistered`).
    pub handle: Handle,
    /// Byte offset in it.
    pub offset: u64,
}

/// Everything a remote peer needs to address a registered region: what
/// `Registered` returns, plus the FEP address from `HelloOk`.
///
/// Its text form (`Display` / `FromStr`) is
/// `uet://FEP/JOB/PID/RI/GENERATION/KEY` with the key in hex, e.g.
/// `uet://10.0.0.2/7/1/3/0/0x5eed`; an IPv6 FEP is written in brackets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteRegion {
    /// The target FEP's address.
    pub fep: IpAddr,
    /// `job_id` (24 bits).
    pub job: u32,
    /// `pid_on_fep` (12 bits).
    pub pid: u16,
    /// `resource_index` (12 bits).
    pub ri: u16,
    /// The RI generation (8 bits) the registration reported.
    pub generation: u8,
    /// The memory key.
    pub key: u64,
}

impl RemoteRegion {
    /// The position `offset` bytes into the region.
    #[must_use]
    pub const fn at(self, offset: u64) -> RemoteRef {
        RemoteRef {
            region: self,
            offset,
        }
    }
}

impl fmt::Display for RemoteRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.fep {
            IpAddr::V4(a) => write!(f, "uet://{a}")?,
            IpAddr::V6(a) => write!(f, "uet://[{a}]")?,
        }
        write!(
            f,
            "/{}/{}/{}/{}/{:#x}",
            self.job, self.pid, self.ri, self.generation, self.key
        )
    }
}

/// Why a `uet://…` region address did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseRegionError(&'static str);

impl fmt::Display for ParseRegionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad region address ({}): want uet://FEP/JOB/PID/RI/GENERATION/KEY",
            self.0
        )
    }
}

impl std::error::Error for ParseRegionError {}

impl core::str::FromStr for RemoteRegion {
    type Err = ParseRegionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let rest = s
            .strip_prefix("uet://")
            .ok_or(ParseRegionError("no uet:// prefix"))?;
        let mut parts = rest.split('/');
        let fep = parts.next().unwrap_or_default();
        let fep = fep
            .strip_prefix('[')
            .and_then(|f| f.strip_suffix(']'))
            .unwrap_or(fep);
        let fep: IpAddr = fep.parse().map_err(|_| ParseRegionError("FEP address"))?;
        let mut num = |what: &'static str, bits: u32| -> Result<u64, ParseRegionError> {
            let p = parts.next().ok_or(ParseRegionError(what))?;
            let v = match p.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => p.parse(),
            }
            .map_err(|_| ParseRegionError(what))?;
            if bits < 64 && v >> bits != 0 {
                return Err(ParseRegionError(what));
            }
            Ok(v)
        };
        let r = Self {
            fep,
            job: num("job", JOB_BITS)? as u32,
            pid: num("pid", PID_BITS)? as u16,
            ri: num("ri", RI_BITS)? as u16,
            generation: num("generation", 8)? as u8,
            key: num("key", 64)?,
        };
        if parts.next().is_some() {
            return Err(ParseRegionError("trailing fields"));
        }
        Ok(r)
    }
}

/// A position in a remote registered region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteRef {
    /// The region.
    pub region: RemoteRegion,
    /// Byte offset from its start (`rel` = 1 addressing).
    pub offset: u64,
}

/// A remote process: the destination of a send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Peer {
    /// Its FEP's address.
    pub fep: IpAddr,
    /// `job_id` (24 bits).
    pub job: u32,
    /// `pid_on_fep` (12 bits).
    pub pid: u16,
}

/// Why the daemon refused something (`Error` frames and
/// [`Status::Local`]). Codes this version does not know decode as
/// `Unknown`, so a newer daemon's codes still reach the application.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 1: `Hello` carried a version the daemon does not speak.
    VersionMismatch,
    /// 2: a frame did not decode; the daemon closes the connection.
    Malformed,
    /// 3: no region with that handle on this connection.
    UnknownHandle,
    /// 4: the operation names something that belongs to someone else (a
    /// remote job other than the one granted to this client).
    NotYours,
    /// 5: a length or offset is zero, too large, or beyond the region.
    BadLength,
    /// 6: the daemon's policy refuses it.
    Refused,
    /// 7: the passed descriptor is missing, not sealed against shrinking,
    /// or shorter than the registered length.
    BadFd,
    /// 8: out of handles, resource indices, keys or operation slots.
    Exhausted,
    /// 9: a message out of sequence (anything before `Hello`, a second
    /// `Hello`, a reply-type message from the client).
    OutOfSequence,
    /// 10: the daemon failed internally.
    Internal,
    /// 11: the key asked for is already in use.
    KeyInUse,
    /// 12: the daemon is doing this for someone else already (a capture
    /// is running).
    Busy,
    /// 13: a limit of the daemon's configuration refuses it: connections
    /// (all together or per uid), the time to say `Hello`, registrations
    /// or registered bytes per client. The message names the limit.
    OverLimit,
    /// Any other code.
    Unknown(u16),
}

impl ErrorCode {
    /// The wire code.
    #[must_use]
    pub const fn code(self) -> u16 {
        match self {
            Self::VersionMismatch => 1,
            Self::Malformed => 2,
            Self::UnknownHandle => 3,
            Self::NotYours => 4,
            Self::BadLength => 5,
            Self::Refused => 6,
            Self::BadFd => 7,
            Self::Exhausted => 8,
            Self::OutOfSequence => 9,
            Self::Internal => 10,
            Self::KeyInUse => 11,
            Self::Busy => 12,
            Self::OverLimit => 13,
            Self::Unknown(c) => c,
        }
    }

    /// From the wire code.
    #[must_use]
    pub const fn from_code(c: u16) -> Self {
        match c {
            1 => Self::VersionMismatch,
            2 => Self::Malformed,
            3 => Self::UnknownHandle,
            4 => Self::NotYours,
            5 => Self::BadLength,
            6 => Self::Refused,
            7 => Self::BadFd,
            8 => Self::Exhausted,
            9 => Self::OutOfSequence,
            10 => Self::Internal,
            11 => Self::KeyInUse,
            12 => Self::Busy,
            13 => Self::OverLimit,
            c => Self::Unknown(c),
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown(c) => write!(f, "error code {c}"),
            known => fmt::Debug::fmt(known, f),
        }
    }
}

/// How an operation ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Status {
    /// It succeeded.
    Ok,
    /// The target answered with this SES return code (`docs/protocol-notes.md`
    /// §4.7, e.g. `BAD_GENERATION`).
    Remote {
        /// The SES return code.
        return_code: u8,
    },
    /// The daemon refused or failed it locally.
    Local {
        /// Why.
        code: ErrorCode,
        /// Details for a person.
        message: String,
    },
    /// Packet delivery gave up (retry budget spent, PDC closed, NACK).
    Transport {
        /// The daemon's transport error code (a PDS NACK code or the
        /// daemon's own, documented by uetd).
        code: u16,
        /// Details for a person.
        message: String,
    },
}

impl Status {
    /// Whether it is [`Status::Ok`].
    #[must_use]
    pub const fn is_ok(&self) -> bool {
        matches!(self, Self::Ok)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ok => f.write_str("ok"),
            Self::Remote { return_code } => write!(f, "target returned code {return_code:#04x}"),
            Self::Local { code, message } => write!(f, "local error {code}: {message}"),
            Self::Transport { code, message } => write!(f, "transport error {code}: {message}"),
        }
    }
}

/// The end of an operation (any of them; a successful receive ends with
/// [`RecvCompletion`] instead).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Completion {
    /// The operation.
    pub tag: Tag,
    /// Success, or why not.
    pub status: Status,
    /// Bytes placed at the destination (SES `modified_length`).
    pub bytes: u64,
}

/// A posted receive that a send filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecvCompletion {
    /// The receive's tag.
    pub tag: Tag,
    /// The sender's FEP.
    pub src_fep: IpAddr,
    /// Bytes placed in the buffer.
    pub bytes: u64,
    /// The message's length: larger than `bytes` when it was truncated.
    pub message_len: u32,
    /// Header data, if the send carried it.
    pub header_data: Option<u64>,
    /// The match bits of a tagged send.
    pub match_bits: Option<u64>,
}

/// A remote write that carried header data landed in one of this client's
/// regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WriteArrived {
    /// The region.
    pub handle: Handle,
    /// The writer's FEP.
    pub src_fep: IpAddr,
    /// Offset of the write in the region.
    pub offset: u64,
    /// Bytes written.
    pub len: u32,
    /// The write's header data.
    pub header_data: u64,
}

/// The most bytes of one frame a capture carries: a `CaptureFrame` must
/// fit in [`MAX_FRAME_LEN`]. The daemon clamps a larger snap length to it.
pub const MAX_SNAPLEN: u32 = 65_000;

/// Which way a captured frame went through the daemon's datapath.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Received (wire `1`).
    Rx,
    /// Sent (wire `2`).
    Tx,
}

impl Direction {
    /// The wire value.
    #[must_use]
    pub const fn code(self) -> u8 {
        match self {
            Self::Rx => 1,
            Self::Tx => 2,
        }
    }

    /// From the wire value, `None` if undefined.
    #[must_use]
    pub const fn from_code(c: u8) -> Option<Self> {
        match c {
            1 => Some(Self::Rx),
            2 => Some(Self::Tx),
            _ => None,
        }
    }
}

/// Which frames a capture wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureDirection {
    /// Received frames only (wire `1`).
    Rx,
    /// Sent frames only (wire `2`).
    Tx,
    /// Both (wire `3`).
    Both,
}

impl CaptureDirection {
    /// The wire value: bit 0 received, bit 1 sent.
    #[must_use]
    pub const fn bits(self) -> u8 {
        match self {
            Self::Rx => 1,
            Self::Tx => 2,
            Self::Both => 3,
        }
    }

    /// From the wire value, `None` if undefined (0 or above 3).
    #[must_use]
    pub const fn from_bits(b: u8) -> Option<Self> {
        match b {
            1 => Some(Self::Rx),
            2 => Some(Self::Tx),
            3 => Some(Self::Both),
            _ => None,
        }
    }

    /// Whether frames going `d` are wanted.
    #[must_use]
    pub const fn wants(self, d: Direction) -> bool {
        self.bits() & d.code() != 0
    }
}

impl core::str::FromStr for CaptureDirection {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "rx" => Ok(Self::Rx),
            "tx" => Ok(Self::Tx),
            "both" => Ok(Self::Both),
            _ => Err(format!("{s:?} is not a direction: rx, tx or both")),
        }
    }
}

/// What a capture asks for (`ClientMsg::Capture`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CaptureSpec {
    /// End after this many frames (`None`: no limit).
    pub max_frames: Option<u64>,
    /// End after this many milliseconds (`None`: no limit).
    pub max_duration_ms: Option<u64>,
    /// Bytes kept of each frame (1 or more; clamped to [`MAX_SNAPLEN`]).
    pub snaplen: u32,
    /// Which frames.
    pub direction: CaptureDirection,
}

/// One frame as the daemon's datapath received or sent it, from the
/// Ethernet header on (the UDP backend's frames carry Ethernet, IP and UDP
/// headers the daemon rebuilt around the datagram).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CapturedFrame {
    /// Wall-clock time, nanoseconds since the Unix epoch.
    pub timestamp_ns: u64,
    /// Received or sent.
    pub direction: Direction,
    /// The frame's length on the wire (at least `data.len()`).
    pub orig_len: u32,
    /// Its first bytes, up to the snap length.
    pub data: Vec<u8>,
}

/// Why a capture ended. Reasons this version does not know decode as
/// `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureEndReason {
    /// 1: `max_frames` were delivered.
    Count,
    /// 2: `max_duration_ms` passed.
    Duration,
    /// 3: the client sent `CaptureStop`.
    Stopped,
    /// 4: the daemon is shutting down.
    Shutdown,
    /// Any other value.
    Unknown(u8),
}

impl CaptureEndReason {
    /// The wire value.
    #[must_use]
    pub const fn code(self) -> u8 {
        match self {
            Self::Count => 1,
            Self::Duration => 2,
            Self::Stopped => 3,
            Self::Shutdown => 4,
            Self::Unknown(c) => c,
        }
    }

    /// From the wire value.
    #[must_use]
    pub const fn from_code(c: u8) -> Self {
        match c {
            1 => Self::Count,
            2 => Self::Duration,
            3 => Self::Stopped,
            4 => Self::Shutdown,
            c => Self::Unknown(c),
        }
    }
}

impl fmt::Display for CaptureEndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Count => f.write_str("count"),
            Self::Duration => f.write_str("duration"),
            Self::Stopped => f.write_str("stopped"),
            Self::Shutdown => f.write_str("shutdown"),
            Self::Unknown(c) => write!(f, "reason {c}"),
        }
    }
}

/// The end of a capture (`DaemonMsg::CaptureEnd`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CaptureEnd {
    /// Frames delivered to the client.
    pub frames: u64,
    /// Frames the datapath saw but could not queue for the capture
    /// (the bounded queue toward the control thread was full).
    pub dropped: u64,
    /// Why it ended.
    pub reason: CaptureEndReason,
}

/// Frames from the client to the daemon.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClientMsg {
    /// `0x0001`: first frame of a connection.
    Hello {
        /// [`PROTOCOL_VERSION`] of the client.
        version: u16,
        /// A name for logs and stats.
        name: String,
    },
    /// `0x0002`: the client is leaving; the daemon frees everything and
    /// closes.
    Bye,
    /// `0x0003`, with one descriptor: register `len` bytes from offset 0
    /// of the passed memfd for remote access.
    Register {
        /// Bytes.
        len: u64,
        /// Rights granted to remote peers.
        access: Access,
        /// The memory key wanted; the daemon picks one if `None`.
        key: Option<u64>,
    },
    /// `0x0004`, with one descriptor: a local buffer (source of writes and
    /// sends, destination of reads); not reachable remotely.
    RegisterLocal {
        /// Bytes.
        len: u64,
    },
    /// `0x0005`: forget a region; its RI generation is bumped so stale keys
    /// fail with `BAD_GENERATION`.
    Deregister {
        /// The region.
        handle: Handle,
    },
    /// `0x0006`: ask for the daemon's counters in one `StatsReply`. A
    /// document that does not fit one frame comes without its
    /// per-destination entries (see [`DaemonMsg::StatsReply`]); ask with
    /// [`ClientMsg::StatsStream`] for all of it.
    Stats,
    /// `0x0009`: ask for the daemon's counters as a stream of
    /// `StatsChunk`s, however long the document.
    StatsStream,
    /// `0x000A`, with one descriptor (version 2): open a shared-memory
    /// ring ([`crate::ring`]) over the passed memfd, served by the worker
    /// that owns `fep`; answered by `RingOpened` or `Error`.
    RingOpen {
        /// SQ entries (a power of two up to
        /// [`crate::ring::MAX_RING_ENTRIES`]).
        sq_entries: u32,
        /// CQ entries (likewise).
        cq_entries: u32,
        /// A destination FEP; the ring is served by its worker.
        fep: IpAddr,
    },
    /// `0x0010`: `UET_WRITE` `len` bytes from `local` to `remote`.
    Write {
        /// Echoed in the completion.
        tag: Tag,
        /// Source.
        local: LocalRef,
        /// Destination.
        remote: RemoteRef,
        /// Bytes.
        len: u32,
        /// Delivered to the target application (`WriteArrived`).
        header_data: Option<u64>,
    },
    /// `0x0011`: `UET_READ` `len` bytes from `remote` into `local`.
    Read {
        /// Echoed in the completion.
        tag: Tag,
        /// Destination.
        local: LocalRef,
        /// Source.
        remote: RemoteRef,
        /// Bytes.
        len: u32,
    },
    /// `0x0012`: `UET_SEND` to `dst`'s untagged receives.
    Send {
        /// Echoed in the completion.
        tag: Tag,
        /// Source.
        local: LocalRef,
        /// The receiving process.
        dst: Peer,
        /// Bytes.
        len: u32,
        /// Delivered with the receive completion.
        header_data: Option<u64>,
    },
    /// `0x0013`: `UET_TAGGED_SEND` to `dst`'s tagged receives.
    TaggedSend {
        /// Echoed in the completion.
        tag: Tag,
        /// Source.
        local: LocalRef,
        /// The receiving process.
        dst: Peer,
        /// Bytes.
        len: u32,
        /// Matched against receives' match/ignore bits.
        match_bits: u64,
        /// Delivered with the receive completion.
        header_data: Option<u64>,
    },
    /// `0x0014`: post a receive buffer (in a region registered with
    /// [`Access::RECV`]).
    PostRecv {
        /// Echoed in the completion.
        tag: Tag,
        /// Where the message goes.
        local: LocalRef,
        /// Buffer bytes.
        len: u32,
        /// `None`: untagged; `Some((match_bits, ignore_bits))`: tagged.
        tagged: Option<(u64, u64)>,
    },
    /// `0x0007`: mirror the frames the datapath receives and sends to this
    /// connection (uid 0 or the daemon's own only; one capture per daemon
    /// at a time). Answered by `CaptureStarted` or `Error`; frames follow
    /// as `CaptureFrame` and the capture ends with `CaptureEnd`.
    Capture(CaptureSpec),
    /// `0x0008`: end the running capture (answered by its `CaptureEnd`).
    CaptureStop,
}

/// Frames from the daemon to the client.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DaemonMsg {
    /// `0x8001`: the answer to a good `Hello`.
    HelloOk {
        /// The version the daemon speaks on this connection.
        version: u16,
        /// The daemon's FEP address.
        fep: IpAddr,
        /// The job granted to this client by the daemon's configuration.
        job: u32,
        /// This client's `pid_on_fep`.
        pid: u16,
    },
    /// `0x8002`: a control request failed, or (outside a request) the
    /// connection is about to close.
    Error {
        /// Why.
        code: ErrorCode,
        /// Details for a person.
        message: String,
    },
    /// `0x8003`: the answer to `Register`.
    Registered {
        /// The region's handle on this connection.
        handle: Handle,
        /// `job_id` (24 bits).
        job: u32,
        /// `pid_on_fep` (12 bits).
        pid: u16,
        /// `resource_index` (12 bits).
        ri: u16,
        /// The memory key.
        key: u64,
        /// The RI generation.
        generation: u8,
    },
    /// `0x8009`, with one descriptor: the answer to `RingOpen`; the
    /// descriptor is the serving worker's doorbell (an eventfd the client
    /// writes to when the ring says the worker sleeps).
    RingOpened,
    /// `0x8004`: the answer to `RegisterLocal`.
    LocalRegistered {
        /// The region's handle on this connection.
        handle: Handle,
    },
    /// `0x8005`: the answer to `Deregister`.
    Deregistered {
        /// The handle, now free.
        handle: Handle,
    },
    /// `0x8006`: the answer to `Stats`.
    StatsReply {
        /// The counters as a JSON document. When the whole document would
        /// not fit one frame, each worker's `ccc` list is left empty and
        /// `ccc_omitted` says how many entries it had.
        json: String,
    },
    /// `0x8008`: one piece of the answer to `StatsStream`: the pieces, in
    /// order, concatenate to the JSON document; the last has `last` set.
    StatsChunk {
        /// The next bytes of the document (cut at a character boundary).
        data: String,
        /// Whether this is the last piece.
        last: bool,
    },
    /// `0x8010`: an operation ended.
    Completion(Completion),
    /// `0x8011`: a posted receive was filled.
    RecvCompletion(RecvCompletion),
    /// `0x8012`: a write with header data landed.
    WriteArrived(WriteArrived),
    /// `0x8007`: the answer to `Capture`: frames follow.
    CaptureStarted {
        /// The snap length in force (the request's, clamped to
        /// [`MAX_SNAPLEN`]).
        snaplen: u32,
    },
    /// `0x8020`: a captured frame.
    CaptureFrame(CapturedFrame),
    /// `0x8021`: the capture ended.
    CaptureEnd(CaptureEnd),
}

/// Message type codes.
pub mod ty {
    /// `ClientMsg::Hello`.
    pub const HELLO: u16 = 0x0001;
    /// `ClientMsg::Bye`.
    pub const BYE: u16 = 0x0002;
    /// `ClientMsg::Register` (+1 fd).
    pub const REGISTER: u16 = 0x0003;
    /// `ClientMsg::RegisterLocal` (+1 fd).
    pub const REGISTER_LOCAL: u16 = 0x0004;
    /// `ClientMsg::Deregister`.
    pub const DEREGISTER: u16 = 0x0005;
    /// `ClientMsg::Stats`.
    pub const STATS: u16 = 0x0006;
    /// `ClientMsg::Capture`.
    pub const CAPTURE: u16 = 0x0007;
    /// `ClientMsg::CaptureStop`.
    pub const CAPTURE_STOP: u16 = 0x0008;
    /// `ClientMsg::StatsStream`.
    pub const STATS_STREAM: u16 = 0x0009;
    /// `ClientMsg::RingOpen` (+1 fd).
    pub const RING_OPEN: u16 = 0x000A;
    /// `DaemonMsg::RingOpened` (+1 fd).
    pub const RING_OPENED: u16 = 0x8009;
    /// `ClientMsg::Write`.
    pub const WRITE: u16 = 0x0010;
    /// `ClientMsg::Read`.
    pub const READ: u16 = 0x0011;
    /// `ClientMsg::Send`.
    pub const SEND: u16 = 0x0012;
    /// `ClientMsg::TaggedSend`.
    pub const TAGGED_SEND: u16 = 0x0013;
    /// `ClientMsg::PostRecv`.
    pub const POST_RECV: u16 = 0x0014;
    /// `DaemonMsg::HelloOk`.
    pub const HELLO_OK: u16 = 0x8001;
    /// `DaemonMsg::Error`.
    pub const ERROR: u16 = 0x8002;
    /// `DaemonMsg::Registered`.
    pub const REGISTERED: u16 = 0x8003;
    /// `DaemonMsg::LocalRegistered`.
    pub const LOCAL_REGISTERED: u16 = 0x8004;
    /// `DaemonMsg::Deregistered`.
    pub const DEREGISTERED: u16 = 0x8005;
    /// `DaemonMsg::StatsReply`.
    pub const STATS_REPLY: u16 = 0x8006;
    /// `DaemonMsg::CaptureStarted`.
    pub const CAPTURE_STARTED: u16 = 0x8007;
    /// `DaemonMsg::StatsChunk`.
    pub const STATS_CHUNK: u16 = 0x8008;
    /// `DaemonMsg::Completion`.
    pub const COMPLETION: u16 = 0x8010;
    /// `DaemonMsg::RecvCompletion`.
    pub const RECV_COMPLETION: u16 = 0x8011;
    /// `DaemonMsg::WriteArrived`.
    pub const WRITE_ARRIVED: u16 = 0x8012;
    /// `DaemonMsg::CaptureFrame`.
    pub const CAPTURE_FRAME: u16 = 0x8020;
    /// `DaemonMsg::CaptureEnd`.
    pub const CAPTURE_END: u16 = 0x8021;
}

/// Why bytes did not decode. Offsets (`at`) count from the first byte of
/// the frame (its length prefix). After any of these the stream is out of
/// step: the receiver drops the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The length prefix announces more than [`MAX_FRAME_LEN`].
    FrameTooLarge {
        /// The whole frame's announced length, prefix included.
        len: u64,
    },
    /// The length prefix is too small to hold a message type.
    FrameTooShort {
        /// The prefix's value.
        len: u32,
    },
    /// The slice handed to [`Message::decode`] is not exactly one frame.
    Incomplete {
        /// Bytes there.
        have: usize,
        /// Bytes the frame needs (at least).
        need: usize,
    },
    /// A message type this direction does not define.
    UnknownType {
        /// The type code.
        ty: u16,
    },
    /// The body ended inside a field.
    Truncated {
        /// Message type.
        ty: u16,
        /// The field.
        field: &'static str,
        /// Where it started.
        at: usize,
    },
    /// A field holds a value the protocol does not allow (an undefined
    /// enum code or flag, a value wider than its spec field, bad UTF-8,
    /// wrong magic).
    BadValue {
        /// Message type.
        ty: u16,
        /// The field.
        field: &'static str,
        /// Where it started.
        at: usize,
    },
    /// Bytes left in the body after the last field.
    TrailingBytes {
        /// Message type.
        ty: u16,
        /// How many.
        extra: usize,
        /// Where they start.
        at: usize,
    },
    /// A message that takes a descriptor arrived without one.
    MissingFd {
        /// Message type.
        ty: u16,
    },
    /// A descriptor arrived with frames that take none.
    UnexpectedFd,
    /// More descriptors arrived than [`MAX_PENDING_FDS`], or the kernel
    /// truncated the ancillary data (descriptors were lost).
    TooManyFds,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::FrameTooLarge { len } => {
                write!(
                    f,
                    "frame of {len} bytes exceeds the {MAX_FRAME_LEN}-byte limit"
                )
            }
            Self::FrameTooShort { len } => write!(f, "frame length prefix {len} is below 2"),
            Self::Incomplete { have, need } => {
                write!(f, "expected one whole frame of {need} bytes, got {have}")
            }
            Self::UnknownType { ty } => write!(f, "unknown message type {ty:#06x}"),
            Self::Truncated { ty, field, at } => {
                write!(
                    f,
                    "message {ty:#06x}: body ends inside `{field}` at byte {at}"
                )
            }
            Self::BadValue { ty, field, at } => {
                write!(f, "message {ty:#06x}: bad `{field}` at byte {at}")
            }
            Self::TrailingBytes { ty, extra, at } => {
                write!(f, "message {ty:#06x}: {extra} trailing bytes at byte {at}")
            }
            Self::MissingFd { ty } => {
                write!(
                    f,
                    "message {ty:#06x} needs a descriptor and came without one"
                )
            }
            Self::UnexpectedFd => f.write_str("a descriptor came with a frame that takes none"),
            Self::TooManyFds => f.write_str("too many descriptors, or descriptors were truncated"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A message that does not fit in [`MAX_FRAME_LEN`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameTooLarge {
    /// The frame's length, prefix included.
    pub len: usize,
}

impl fmt::Display for FrameTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "message of {} bytes exceeds the {MAX_FRAME_LEN}-byte frame limit",
            self.len
        )
    }
}

impl std::error::Error for FrameTooLarge {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::ClientMsg {}
    impl Sealed for super::DaemonMsg {}
}

/// One direction's messages: [`ClientMsg`] or [`DaemonMsg`].
pub trait Message: Sized + sealed::Sealed {
    /// The type code.
    fn msg_type(&self) -> u16;

    /// Whether the frame carries a descriptor (`SCM_RIGHTS`).
    fn takes_fd(&self) -> bool;

    #[doc(hidden)]
    fn encode_body(&self, out: &mut Vec<u8>);

    #[doc(hidden)]
    fn decode_body(ty: u16, body: &[u8]) -> Result<Self, DecodeError>;

    /// Appends the whole frame (prefix, type, body) to `out`; on error
    /// `out` is left as it was.
    ///
    /// # Errors
    ///
    /// [`FrameTooLarge`] when the frame exceeds [`MAX_FRAME_LEN`] (a long
    /// name, message or stats document).
    fn encode(&self, out: &mut Vec<u8>) -> Result<(), FrameTooLarge> {
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.msg_type().to_le_bytes());
        self.encode_body(out);
        let len = out.len() - start;
        if len > MAX_FRAME_LEN {
            out.truncate(start);
            return Err(FrameTooLarge { len });
        }
        let prefix = (len - 4) as u32;
        out[start..start + 4].copy_from_slice(&prefix.to_le_bytes());
        Ok(())
    }

    /// The whole frame as a new vector.
    ///
    /// # Errors
    ///
    /// As [`Message::encode`].
    fn to_frame(&self) -> Result<Vec<u8>, FrameTooLarge> {
        let mut v = Vec::new();
        self.encode(&mut v)?;
        Ok(v)
    }

    /// Decodes exactly one whole frame (descriptors are the
    /// [`FrameReader`]'s business).
    ///
    /// # Errors
    ///
    /// Any [`DecodeError`]; `frame` holding more or less than one frame
    /// is [`DecodeError::Incomplete`] (or a prefix error).
    fn decode(frame: &[u8]) -> Result<Self, DecodeError> {
        let need = frame_len(frame)?.ok_or(DecodeError::Incomplete {
            have: frame.len(),
            need: HEADER_LEN,
        })?;
        if frame.len() != need {
            return Err(DecodeError::Incomplete {
                have: frame.len(),
                need,
            });
        }
        let ty = u16::from_le_bytes([frame[4], frame[5]]);
        Self::decode_body(ty, &frame[HEADER_LEN..])
    }
}

/// The whole length of the frame that starts `buf`, prefix included, once
/// the prefix is there; the prefix is checked against [`MAX_FRAME_LEN`]
/// before anything is buffered for it.
///
/// # Errors
///
/// [`DecodeError::FrameTooLarge`] or [`DecodeError::FrameTooShort`].
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, DecodeError> {
    let Some(p) = buf.first_chunk::<4>() else {
        return Ok(None);
    };
    let len = u32::from_le_bytes(*p);
    if len < 2 {
        return Err(DecodeError::FrameTooShort { len });
    }
    let total = u64::from(len) + 4;
    if total > MAX_FRAME_LEN as u64 {
        return Err(DecodeError::FrameTooLarge { len: total });
    }
    Ok(Some(total as usize))
}

/// The `StatsChunk`s that carry `doc`, in order: pieces of at most
/// [`MAX_STATS_CHUNK`] bytes cut at character boundaries, the last one
/// marked (an empty document is one empty, last chunk). Each encodes
/// within [`MAX_FRAME_LEN`].
pub fn stats_chunks(doc: &str) -> impl Iterator<Item = DaemonMsg> + '_ {
    let mut rest = Some(doc);
    core::iter::from_fn(move || {
        let r = rest?;
        let mut n = r.len().min(MAX_STATS_CHUNK);
        while !r.is_char_boundary(n) {
            n -= 1;
        }
        let (data, tail) = r.split_at(n);
        let last = tail.is_empty();
        rest = (!last).then_some(tail);
        Some(DaemonMsg::StatsChunk {
            data: data.to_owned(),
            last,
        })
    })
}

fn enc_local(e: &mut Enc<'_>, l: &LocalRef) {
    e.u32(l.handle.0);
    e.u64(l.offset);
}

fn dec_local(d: &mut Dec<'_>) -> Result<LocalRef, DecodeError> {
    Ok(LocalRef {
        handle: Handle(d.u32("local.handle")?),
        offset: d.u64("local.offset")?,
    })
}

fn enc_remote(e: &mut Enc<'_>, r: &RemoteRef) {
    e.ip(r.region.fep);
    e.u32(r.region.job);
    e.u16(r.region.pid);
    e.u16(r.region.ri);
    e.u8(r.region.generation);
    e.u64(r.region.key);
    e.u64(r.offset);
}

fn dec_remote(d: &mut Dec<'_>) -> Result<RemoteRef, DecodeError> {
    Ok(RemoteRef {
        region: RemoteRegion {
            fep: d.ip("remote.fep")?,
            job: d.u32_bits(JOB_BITS, "remote.job")?,
            pid: d.u16_bits(PID_BITS, "remote.pid")?,
            ri: d.u16_bits(RI_BITS, "remote.ri")?,
            generation: d.u8("remote.generation")?,
            key: d.u64("remote.key")?,
        },
        offset: d.u64("remote.offset")?,
    })
}

fn enc_peer(e: &mut Enc<'_>, p: &Peer) {
    e.ip(p.fep);
    e.u32(p.job);
    e.u16(p.pid);
}

fn dec_peer(d: &mut Dec<'_>) -> Result<Peer, DecodeError> {
    Ok(Peer {
        fep: d.ip("dst.fep")?,
        job: d.u32_bits(JOB_BITS, "dst.job")?,
        pid: d.u16_bits(PID_BITS, "dst.pid")?,
    })
}

impl Message for ClientMsg {
    fn msg_type(&self) -> u16 {
        match self {
            Self::Hello { .. } => ty::HELLO,
            Self::Bye => ty::BYE,
            Self::Register { .. } => ty::REGISTER,
            Self::RegisterLocal { .. } => ty::REGISTER_LOCAL,
            Self::Deregister { .. } => ty::DEREGISTER,
            Self::Stats => ty::STATS,
            Self::StatsStream => ty::STATS_STREAM,
            Self::Write { .. } => ty::WRITE,
            Self::Read { .. } => ty::READ,
            Self::Send { .. } => ty::SEND,
            Self::TaggedSend { .. } => ty::TAGGED_SEND,
            Self::PostRecv { .. } => ty::POST_RECV,
            Self::Capture(_) => ty::CAPTURE,
            Self::CaptureStop => ty::CAPTURE_STOP,
            Self::RingOpen { .. } => ty::RING_OPEN,
        }
    }

    fn takes_fd(&self) -> bool {
        matches!(
            self,
            Self::Register { .. } | Self::RegisterLocal { .. } | Self::RingOpen { .. }
        )
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        let mut e = Enc(out);
        match self {
            Self::Hello { version, name } => {
                e.bytes(&HELLO_MAGIC);
                e.u16(*version);
                e.str(name);
            }
            Self::Bye | Self::Stats | Self::StatsStream | Self::CaptureStop => {}
            Self::Capture(c) => {
                e.opt_u64(c.max_frames);
                e.opt_u64(c.max_duration_ms);
                e.u32(c.snaplen);
                e.u8(c.direction.bits());
            }
            Self::Register { len, access, key } => {
                e.u64(*len);
                e.u8(access.bits());
                e.opt_u64(*key);
            }
            Self::RegisterLocal { len } => e.u64(*len),
            Self::RingOpen {
                sq_entries,
                cq_entries,
                fep,
            } => {
                e.u32(*sq_entries);
                e.u32(*cq_entries);
                e.ip(*fep);
            }
            Self::Deregister { handle } => e.u32(handle.0),
            Self::Write {
                tag,
                local,
                remote,
                len,
                header_data,
            } => {
                e.u64(tag.0);
                enc_local(&mut e, local);
                enc_remote(&mut e, remote);
                e.u32(*len);
                e.opt_u64(*header_data);
            }
            Self::Read {
                tag,
                local,
                remote,
                len,
            } => {
                e.u64(tag.0);
                enc_local(&mut e, local);
                enc_remote(&mut e, remote);
                e.u32(*len);
            }
            Self::Send {
                tag,
                local,
                dst,
                len,
                header_data,
            } => {
                e.u64(tag.0);
                enc_local(&mut e, local);
                enc_peer(&mut e, dst);
                e.u32(*len);
                e.opt_u64(*header_data);
            }
            Self::TaggedSend {
                tag,
                local,
                dst,
                len,
                match_bits,
                header_data,
            } => {
                e.u64(tag.0);
                enc_local(&mut e, local);
                enc_peer(&mut e, dst);
                e.u32(*len);
                e.u64(*match_bits);
                e.opt_u64(*header_data);
            }
            Self::PostRecv {
                tag,
                local,
                len,
                tagged,
            } => {
                e.u64(tag.0);
                enc_local(&mut e, local);
                e.u32(*len);
                match tagged {
                    None => e.u8(0),
                    Some((m, i)) => {
                        e.u8(1);
                        e.u64(*m);
                        e.u64(*i);
                    }
                }
            }
        }
    }

    fn decode_body(t: u16, body: &[u8]) -> Result<Self, DecodeError> {
        let mut d = Dec::new(t, body);
        let m = match t {
            ty::HELLO => {
                d.magic(HELLO_MAGIC, "magic")?;
                Self::Hello {
                    version: d.u16("version")?,
                    name: d.str("name")?,
                }
            }
            ty::BYE => Self::Bye,
            ty::STATS => Self::Stats,
            ty::STATS_STREAM => Self::StatsStream,
            ty::CAPTURE => Self::Capture(CaptureSpec {
                max_frames: d.opt_u64("max_frames")?,
                max_duration_ms: d.opt_u64("max_duration_ms")?,
                snaplen: d.u32("snaplen")?,
                direction: d.u8_map("direction", CaptureDirection::from_bits)?,
            }),
            ty::CAPTURE_STOP => Self::CaptureStop,
            ty::REGISTER => Self::Register {
                len: d.u64("len")?,
                access: d.u8_map("access", client_access)?,
                key: d.opt_u64("key")?,
            },
            ty::REGISTER_LOCAL => Self::RegisterLocal { len: d.u64("len")? },
            ty::RING_OPEN => Self::RingOpen {
                sq_entries: d.u32("sq_entries")?,
                cq_entries: d.u32("cq_entries")?,
                fep: d.ip("fep")?,
            },
            ty::DEREGISTER => Self::Deregister {
                handle: Handle(d.u32("handle")?),
            },
            ty::WRITE => Self::Write {
                tag: Tag(d.u64("tag")?),
                local: dec_local(&mut d)?,
                remote: dec_remote(&mut d)?,
                len: d.u32("len")?,
                header_data: d.opt_u64("header_data")?,
            },
            ty::READ => Self::Read {
                tag: Tag(d.u64("tag")?),
                local: dec_local(&mut d)?,
                remote: dec_remote(&mut d)?,
                len: d.u32("len")?,
            },
            ty::SEND => Self::Send {
                tag: Tag(d.u64("tag")?),
                local: dec_local(&mut d)?,
                dst: dec_peer(&mut d)?,
                len: d.u32("len")?,
                header_data: d.opt_u64("header_data")?,
            },
            ty::TAGGED_SEND => Self::TaggedSend {
                tag: Tag(d.u64("tag")?),
                local: dec_local(&mut d)?,
                dst: dec_peer(&mut d)?,
                len: d.u32("len")?,
                match_bits: d.u64("match_bits")?,
                header_data: d.opt_u64("header_data")?,
            },
            ty::POST_RECV => Self::PostRecv {
                tag: Tag(d.u64("tag")?),
                local: dec_local(&mut d)?,
                len: d.u32("len")?,
                tagged: if d.flag("tagged")? {
                    Some((d.u64("match_bits")?, d.u64("ignore_bits")?))
                } else {
                    None
                },
            },
            other => return Err(DecodeError::UnknownType { ty: other }),
        };
        d.finish()?;
        Ok(m)
    }
}

fn enc_status(e: &mut Enc<'_>, s: &Status) {
    match s {
        Status::Ok => e.u8(0),
        Status::Remote { return_code } => {
            e.u8(1);
            e.u8(*return_code);
        }
        Status::Local { code, message } => {
            e.u8(2);
            e.u16(code.code());
            e.str(message);
        }
        Status::Transport { code, message } => {
            e.u8(3);
            e.u16(*code);
            e.str(message);
        }
    }
}

fn dec_status(d: &mut Dec<'_>) -> Result<Status, DecodeError> {
    let bad = d.bad("status");
    Ok(match d.u8("status")? {
        0 => Status::Ok,
        1 => Status::Remote {
            return_code: d.u8("status.return_code")?,
        },
        2 => Status::Local {
            code: ErrorCode::from_code(d.u16("status.code")?),
            message: d.str("status.message")?,
        },
        3 => Status::Transport {
            code: d.u16("status.code")?,
            message: d.str("status.message")?,
        },
        _ => return Err(bad),
    })
}

impl Message for DaemonMsg {
    fn msg_type(&self) -> u16 {
        match self {
            Self::HelloOk { .. } => ty::HELLO_OK,
            Self::Error { .. } => ty::ERROR,
            Self::Registered { .. } => ty::REGISTERED,
            Self::LocalRegistered { .. } => ty::LOCAL_REGISTERED,
            Self::RingOpened => ty::RING_OPENED,
            Self::Deregistered { .. } => ty::DEREGISTERED,
            Self::StatsReply { .. } => ty::STATS_REPLY,
            Self::StatsChunk { .. } => ty::STATS_CHUNK,
            Self::Completion(_) => ty::COMPLETION,
            Self::RecvCompletion(_) => ty::RECV_COMPLETION,
            Self::WriteArrived(_) => ty::WRITE_ARRIVED,
            Self::CaptureStarted { .. } => ty::CAPTURE_STARTED,
            Self::CaptureFrame(_) => ty::CAPTURE_FRAME,
            Self::CaptureEnd(_) => ty::CAPTURE_END,
        }
    }

    fn takes_fd(&self) -> bool {
        matches!(self, Self::RingOpened)
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        let mut e = Enc(out);
        match self {
            Self::HelloOk {
                version,
                fep,
                job,
                pid,
            } => {
                e.u16(*version);
                e.ip(*fep);
                e.u32(*job);
                e.u16(*pid);
            }
            Self::Error { code, message } => {
                e.u16(code.code());
                e.str(message);
            }
            Self::Registered {
                handle,
                job,
                pid,
                ri,
                key,
                generation,
            } => {
                e.u32(handle.0);
                e.u32(*job);
                e.u16(*pid);
                e.u16(*ri);
                e.u64(*key);
                e.u8(*generation);
            }
            Self::LocalRegistered { handle } | Self::Deregistered { handle } => e.u32(handle.0),
            Self::RingOpened => {}
            Self::StatsReply { json } => e.str(json),
            Self::StatsChunk { data, last } => {
                e.u8(u8::from(*last));
                e.str(data);
            }
            Self::Completion(c) => {
                e.u64(c.tag.0);
                enc_status(&mut e, &c.status);
                e.u64(c.bytes);
            }
            Self::RecvCompletion(r) => {
                e.u64(r.tag.0);
                e.ip(r.src_fep);
                e.u64(r.bytes);
                e.u32(r.message_len);
                e.opt_u64(r.header_data);
                e.opt_u64(r.match_bits);
            }
            Self::WriteArrived(w) => {
                e.u32(w.handle.0);
                e.ip(w.src_fep);
                e.u64(w.offset);
                e.u32(w.len);
                e.u64(w.header_data);
            }
            Self::CaptureStarted { snaplen } => e.u32(*snaplen),
            Self::CaptureFrame(f) => {
                e.u64(f.timestamp_ns);
                e.u8(f.direction.code());
                e.u32(f.orig_len);
                e.blob(&f.data);
            }
            Self::CaptureEnd(c) => {
                e.u64(c.frames);
                e.u64(c.dropped);
                e.u8(c.reason.code());
            }
        }
    }

    fn decode_body(t: u16, body: &[u8]) -> Result<Self, DecodeError> {
        let mut d = Dec::new(t, body);
        let m = match t {
            ty::HELLO_OK => Self::HelloOk {
                version: d.u16("version")?,
                fep: d.ip("fep")?,
                job: d.u32_bits(JOB_BITS, "job")?,
                pid: d.u16_bits(PID_BITS, "pid")?,
            },
            ty::ERROR => Self::Error {
                code: ErrorCode::from_code(d.u16("code")?),
                message: d.str("message")?,
            },
            ty::REGISTERED => Self::Registered {
                handle: Handle(d.u32("handle")?),
                job: d.u32_bits(JOB_BITS, "job")?,
                pid: d.u16_bits(PID_BITS, "pid")?,
                ri: d.u16_bits(RI_BITS, "ri")?,
                key: d.u64("key")?,
                generation: d.u8("generation")?,
            },
            ty::RING_OPENED => Self::RingOpened,
            ty::LOCAL_REGISTERED => Self::LocalRegistered {
                handle: Handle(d.u32("handle")?),
            },
            ty::DEREGISTERED => Self::Deregistered {
                handle: Handle(d.u32("handle")?),
            },
            ty::STATS_REPLY => Self::StatsReply {
                json: d.str("json")?,
            },
            ty::STATS_CHUNK => Self::StatsChunk {
                last: d.flag("last")?,
                data: d.str("data")?,
            },
            ty::COMPLETION => Self::Completion(Completion {
                tag: Tag(d.u64("tag")?),
                status: dec_status(&mut d)?,
                bytes: d.u64("bytes")?,
            }),
            ty::RECV_COMPLETION => Self::RecvCompletion(RecvCompletion {
                tag: Tag(d.u64("tag")?),
                src_fep: d.ip("src_fep")?,
                bytes: d.u64("bytes")?,
                message_len: d.u32("message_len")?,
                header_data: d.opt_u64("header_data")?,
                match_bits: d.opt_u64("match_bits")?,
            }),
            ty::WRITE_ARRIVED => Self::WriteArrived(WriteArrived {
                handle: Handle(d.u32("handle")?),
                src_fep: d.ip("src_fep")?,
                offset: d.u64("offset")?,
                len: d.u32("len")?,
                header_data: d.u64("header_data")?,
            }),
            ty::CAPTURE_STARTED => Self::CaptureStarted {
                snaplen: d.u32("snaplen")?,
            },
            ty::CAPTURE_FRAME => {
                let timestamp_ns = d.u64("timestamp_ns")?;
                let direction = d.u8_map("direction", Direction::from_code)?;
                // A frame cannot be shorter than the bytes kept of it.
                let bad_len = d.bad("orig_len");
                let orig_len = d.u32("orig_len")?;
                let data = d.blob("data")?;
                if (orig_len as usize) < data.len() {
                    return Err(bad_len);
                }
                Self::CaptureFrame(CapturedFrame {
                    timestamp_ns,
                    direction,
                    orig_len,
                    data: data.to_vec(),
                })
            }
            ty::CAPTURE_END => Self::CaptureEnd(CaptureEnd {
                frames: d.u64("frames")?,
                dropped: d.u64("dropped")?,
                reason: CaptureEndReason::from_code(d.u8("reason")?),
            }),
            other => return Err(DecodeError::UnknownType { ty: other }),
        };
        d.finish()?;
        Ok(m)
    }
}
