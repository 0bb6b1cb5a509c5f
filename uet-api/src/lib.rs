//! The application ⇄ `uetd` contract (`docs/architecture.md` §2): the versioned
//! binary protocol spoken on the daemon's local Unix socket, its codec,
//! the blocking [`Client`] and the tokio [`AsyncClient`] (feature `tokio`,
//! on by default), and the helpers the daemon serves the socket with
//! ([`proto::FrameReader`], [`sock`], [`region::check_region_fd`]).
//!
//! Registered memory is shared, not copied: the client creates a memfd
//! ([`Region`]), passes it to the daemon with `SCM_RIGHTS`, and the daemon
//! maps it; remote writes land in it and the application reads it with
//! `pread` ([`Region::read_at`]) or its own mapping. The one mapping this
//! crate makes is the shared-memory operation ring ([`ring`]): its `unsafe`
//! stays in `ring/shm.rs`, each block with a `// SAFETY:` line.
//!
//! # The protocol, version 1
//!
//! New message types may be added within a version when no existing layout
//! changes and the daemon sends them only on a request that names them
//! (capture came so): a client of the same version never sees one
//! unasked, and a daemon that predates one answers it with
//! `Error{Malformed}` ("unknown message type"). A changed layout or a
//! message sent unasked bumps [`PROTOCOL_VERSION`].
//!
//! ## Frames
//!
//! A `SOCK_STREAM` Unix socket carries frames, all integers little-endian:
//!
//! ```text
//! +----------------+-------------+-------------------+
//! | len: u32       | type: u16   | body              |
//! +----------------+-------------+-------------------+
//!   len = 2 + body bytes;  4 + len ≤ MAX_FRAME_LEN (65536)
//! ```
//!
//! A length prefix over the limit or under 2, an unknown type, a body that
//! ends inside a field or has bytes left after the last one, a flag other
//! than 0/1, an address family other than 4/6, a `job` wider than 24
//! bits, a `pid`/`ri` wider than 12 bits, an undefined access bit, bad
//! UTF-8: each is a [`proto::DecodeError`] naming the field and its
//! offset. The daemon answers a client's malformed frame with
//! `Error{Malformed}` and closes that connection; no other client notices.
//!
//! Field encodings: `opt<u64>` is a `u8` 0 (absent) or 1 followed by the
//! `u64`; `ip` is a `u8` family (4 or 6) followed by 4 or 16 address
//! bytes; `str` is a `u16` byte count followed by UTF-8; `local` is
//! `handle: u32, offset: u64`; `remote` is `fep: ip, job: u32, pid: u16,
//! ri: u16, generation: u8, key: u64, offset: u64`; `peer` is `fep: ip,
//! job: u32, pid: u16`.
//!
//! ## Client → daemon
//!
//! | type | message | body |
//! |---|---|---|
//! | `0x0001` | `Hello` | `magic: [u8;4] = "UETa", version: u16, name: str` |
//! | `0x0002` | `Bye` | — |
//! | `0x0003` | `Register` + 1 fd | `len: u64, access: u8, key: opt<u64>` |
//! | `0x0004` | `RegisterLocal` + 1 fd | `len: u64` |
//! | `0x0005` | `Deregister` | `handle: u32` |
//! | `0x0006` | `Stats` | — |
//! | `0x0007` | `Capture` | `max_frames: opt<u64>, max_duration_ms: opt<u64>, snaplen: u32, direction: u8` |
//! | `0x0008` | `CaptureStop` | — |
//! | `0x0009` | `StatsStream` | — |
//! | `0x0010` | `Write` | `tag: u64, local, remote, len: u32, header_data: opt<u64>` |
//! | `0x0011` | `Read` | `tag: u64, local, remote, len: u32` |
//! | `0x0012` | `Send` | `tag: u64, local, peer, len: u32, header_data: opt<u64>` |
//! | `0x0013` | `TaggedSend` | `tag: u64, local, peer, len: u32, match_bits: u64, header_data: opt<u64>` |
//! | `0x0014` | `PostRecv` | `tag: u64, local, len: u32, tagged: u8 (0/1) [, match_bits: u64, ignore_bits: u64]` |
//!
//! `access` bits: `0x01` remote write, `0x02` remote read, `0x08` receive
//! buffer for sends (`uet_wire::Access`; any other bit is a decode error).
//!
//! ## Daemon → client
//!
//! | type | message | body |
//! |---|---|---|
//! | `0x8001` | `HelloOk` | `version: u16, fep: ip, job: u32, pid: u16` |
//! | `0x8002` | `Error` | `code: u16, message: str` |
//! | `0x8003` | `Registered` | `handle: u32, job: u32, pid: u16, ri: u16, key: u64, generation: u8` |
//! | `0x8004` | `LocalRegistered` | `handle: u32` |
//! | `0x8005` | `Deregistered` | `handle: u32` |
//! | `0x8006` | `StatsReply` | `json: str` |
//! | `0x8007` | `CaptureStarted` | `snaplen: u32` |
//! | `0x8008` | `StatsChunk` | `last: u8 (0/1), data: str` |
//! | `0x8010` | `Completion` | `tag: u64, status, bytes: u64` |
//! | `0x8011` | `RecvCompletion` | `tag: u64, src_fep: ip, bytes: u64, message_len: u32, header_data: opt<u64>, match_bits: opt<u64>` |
//! | `0x8012` | `WriteArrived` | `handle: u32, src_fep: ip, offset: u64, len: u32, header_data: u64` |
//! | `0x8020` | `CaptureFrame` | `timestamp_ns: u64, direction: u8, orig_len: u32, data: bytes` |
//! | `0x8021` | `CaptureEnd` | `frames: u64, dropped: u64, reason: u8` |
//!
//! Capture: `direction` in `Capture` is `1` received, `2` sent, `3` both
//! (anything else is a decode error); in `CaptureFrame` it is `1` or `2`.
//! `orig_len` is the frame's length on the wire and may not be less than
//! the bytes carried; `timestamp_ns` is wall-clock time since the Unix
//! epoch. `reason`: 1 count, 2 duration, 3 stopped by the client, 4 daemon
//! shutting down; others reach the client as `Unknown(n)`.
//!
//! `status` is a `u8` kind then its fields: `0` ok; `1` remote, `return_code:
//! u8` (SES return code); `2` local, `code: u16, message: str` (an
//! [`ErrorCode`]); `3` transport, `code: u16, message: str`.
//!
//! Error codes ([`ErrorCode`]): 1 `VersionMismatch`, 2 `Malformed`, 3
//! `UnknownHandle`, 4 `NotYours`, 5 `BadLength`, 6 `Refused`, 7 `BadFd`,
//! 8 `Exhausted`, 9 `OutOfSequence`, 10 `Internal`, 11 `KeyInUse`, 12
//! `Busy`, 13 `OverLimit` (a configured limit: connections in all or per
//! uid, the `Hello` timeout, registrations or registered bytes per
//! client); other values reach the application as `Unknown(n)`.
//!
//! ## Sequencing
//!
//! 1. The client's first frame is `Hello`, within the daemon's `Hello`
//!    timeout (5 s by default; later, `Error{OverLimit}` and the close).
//!    A connection beyond the daemon's limits (connections in all, per
//!    uid) gets `Error{OverLimit}` and is closed; to make room for a new
//!    connection the daemon may close the oldest one of the same uid (or,
//!    at the overall limit, of anyone) that has not said `Hello` yet.
//!    The daemon checks the magic and the version and answers `HelloOk` (with the job its configuration
//!    grants this client — a client never chooses its job — and the
//!    client's `pid_on_fep`) or `Error{VersionMismatch}` and closes.
//!    The layouts of `Hello`, `HelloOk` and `Error` never change between
//!    versions, so any two versions can tell each other they differ.
//! 2. Control requests — `Register`, `RegisterLocal`, `Deregister`,
//!    `Stats`, `StatsStream` — are answered in the order they arrive, each
//!    by exactly one frame: its reply (`Registered`, `LocalRegistered`,
//!    `Deregistered`, `StatsReply`) or `Error` — except `StatsStream`,
//!    answered by one or more `StatsChunk`s (events may come between
//!    them), the last one marked `last`; their `data` concatenated is the
//!    JSON document, of any length (clients refuse more than
//!    [`proto::MAX_STATS_LEN`]). `StatsReply` never exceeds the frame
//!    limit: a document too long for it comes with each worker's `ccc`
//!    list empty and `ccc_omitted` counting its entries.
//! 3. Operations — `Write`, `Read`, `Send`, `TaggedSend`, `PostRecv` — get
//!    no reply; each ends with exactly one `Completion` carrying its tag (a
//!    filled receive with `RecvCompletion` instead), in any order and
//!    interleaved with replies. An operation the daemon refuses (unknown
//!    handle, out of bounds, a remote `job` other than the granted one:
//!    jobs isolate clients) ends with a `Completion` whose status is
//!    `local`. Tags are the client's; the daemon only echoes them.
//! 4. `WriteArrived` may come at any time after a region was registered
//!    with remote write.
//! 5. An `Error` that answers no request means the daemon is closing the
//!    connection (after `Malformed`, `OutOfSequence`…).
//! 6. `Capture` is answered by `CaptureStarted` or `Error` (`Refused`: only
//!    a peer whose uid — `SO_PEERCRED` — is 0 or the daemon's may capture,
//!    since frames carry every job's data; `Busy`: the daemon runs one
//!    capture at a time; `BadLength`: a zero snap length). `CaptureFrame`s
//!    follow, interleaved with anything else, until exactly one
//!    `CaptureEnd` (count reached, duration passed, `CaptureStop`, daemon
//!    shutdown). `CaptureStop` gets no reply of its own and is ignored when
//!    no capture of this client runs; a client that disconnects ends its
//!    capture.
//! 7. `Bye`, or the connection closing, frees all of the client's
//!    registrations (their RI generations are bumped, so stale keys fail
//!    with `BAD_GENERATION`) and fails its operations in flight.
//!
//! ## Descriptors
//!
//! `Register` and `RegisterLocal` carry exactly one descriptor, sent as
//! `SCM_RIGHTS` in the same `sendmsg` as the frame's first byte
//! ([`sock::send_frame`]); every other frame carries none. The daemon
//! maps `len` bytes from offset 0 after [`region::check_region_fd`]: a
//! regular file sealed with `F_SEAL_SHRINK` (so the client cannot
//! truncate it under the mapping) and at least `len` bytes long;
//! otherwise `Error{BadFd}` or `Error{BadLength}`. A registration that
//! would take the client past the daemon's limits on registrations or
//! registered bytes per client (both kinds together) gets
//! `Error{OverLimit}` before the descriptor is looked at.
//! [`Region::new`] creates such a memfd.

pub mod client;
pub mod proto;
pub mod region;
pub mod ring;
pub mod sock;

#[cfg(feature = "tokio")]
pub use client::AsyncClient;
pub use client::{CaptureEvent, Client, ClientError, Event, LocalHandle, Registration, Session};
pub use proto::{
    Access, CaptureDirection, CaptureEnd, CaptureEndReason, CaptureSpec, CapturedFrame, Completion,
    Direction, ErrorCode, Handle, LocalRef, MAX_SNAPLEN, PROTOCOL_VERSION, Peer, RecvCompletion,
    RemoteRef, RemoteRegion, Status, Tag, WriteArrived,
};
pub use region::Region;
