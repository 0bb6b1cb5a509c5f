//! Clients of the daemon socket: the blocking [`Client`] and, with the
//! `tokio` feature, [`AsyncClient`]. Both offer the same operations over
//! the same sans-IO core (tags, reply matching, event buffering).
//!
//! Control requests (`connect`, `register`, `register_local`,
//! `deregister`, `stats`) wait for their reply. Operations (`write`,
//! `read`, `send`, `tagged_send`, `post_recv`) return a [`Tag`] at once;
//! their ends arrive as [`Event`]s, in whatever order the fabric finishes
//! them, through `wait_event` (the next event) or `wait_completion` (one
//! tag's end, other events kept for later).
//!
//! A capture (`capture_start`, then `capture_next` until
//! [`CaptureEvent::End`], `capture_stop` to end it early) streams the
//! frames the daemon's datapath sees; its frames are kept apart from the
//! events, so operations may run on the same connection meanwhile.

mod blocking;
#[cfg(feature = "tokio")]
mod tokio;

use core::fmt;
use std::collections::VecDeque;
use std::io;
use std::net::IpAddr;

pub use blocking::{Client, DEFAULT_REPLY_TIMEOUT};
#[cfg(feature = "tokio")]
pub use tokio::AsyncClient;

use crate::proto::{
    Access, CaptureEnd, CapturedFrame, ClientMsg, Completion, DaemonMsg, DecodeError, ErrorCode,
    FrameTooLarge, Handle, LocalRef, MAX_STATS_LEN, Message, PROTOCOL_VERSION, RecvCompletion,
    RemoteRef, RemoteRegion, Tag, WriteArrived,
};
use crate::sock::RecvError;

/// What the daemon granted this connection (`HelloOk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    /// The protocol version in use.
    pub version: u16,
    /// The daemon's FEP address.
    pub fep: IpAddr,
    /// The job granted by the daemon's configuration.
    pub job: u32,
    /// This client's `pid_on_fep`.
    pub pid: u16,
}

/// A region registered for remote access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    /// Its handle on this connection (also usable as a local buffer).
    pub handle: Handle,
    /// What a remote peer needs to address it; hand this (or its text
    /// form) to the peer.
    pub remote: RemoteRegion,
    /// Registered bytes.
    pub len: u64,
    /// Granted rights.
    pub access: Access,
}

impl Registration {
    /// A position in it, as a local buffer of this client.
    #[must_use]
    pub const fn local(&self, offset: u64) -> LocalRef {
        LocalRef {
            handle: self.handle,
            offset,
        }
    }

    /// A position in it, as a remote peer names it.
    #[must_use]
    pub const fn remote(&self, offset: u64) -> RemoteRef {
        self.remote.at(offset)
    }
}

/// A region registered as a local buffer only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalHandle {
    /// Its handle on this connection.
    pub handle: Handle,
    /// Registered bytes.
    pub len: u64,
}

impl LocalHandle {
    /// A position in it.
    #[must_use]
    pub const fn at(&self, offset: u64) -> LocalRef {
        LocalRef {
            handle: self.handle,
            offset,
        }
    }
}

/// Something that happened to this client's operations or regions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An operation ended (a failed receive too).
    Completion(Completion),
    /// A posted receive was filled.
    Recv(RecvCompletion),
    /// A remote write with header data landed in a registered region.
    WriteArrived(WriteArrived),
}

impl Event {
    /// The tag of the operation it ends, if it ends one.
    #[must_use]
    pub const fn tag(&self) -> Option<Tag> {
        match self {
            Self::Completion(c) => Some(c.tag),
            Self::Recv(r) => Some(r.tag),
            Self::WriteArrived(_) => None,
        }
    }
}

/// What a running capture delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaptureEvent {
    /// A frame the datapath received or sent.
    Frame(CapturedFrame),
    /// The capture ended; nothing of it follows.
    End(CaptureEnd),
}

/// Why a client call failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError {
    /// The socket failed; the connection is unusable.
    Io(io::Error),
    /// The daemon sent bytes that do not decode; the connection is
    /// unusable.
    Protocol(DecodeError),
    /// The daemon speaks another protocol version.
    VersionMismatch {
        /// This crate's [`PROTOCOL_VERSION`].
        ours: u16,
        /// The daemon's, if it said (a `HelloOk` with another version).
        theirs: Option<u16>,
        /// The daemon's explanation, if it refused.
        message: String,
    },
    /// The daemon refused the request. After a refusal outside a request
    /// (from `wait_event`) the daemon closes the connection.
    Daemon {
        /// Why.
        code: ErrorCode,
        /// Details.
        message: String,
    },
    /// The daemon answered with a message of the wrong kind; the
    /// connection is unusable.
    Unexpected {
        /// What the client waited for.
        expected: &'static str,
        /// The type code that came.
        got: u16,
    },
    /// The daemon closed the connection, or an earlier error left it
    /// unusable.
    Closed,
    /// Nothing arrived in time. After a control request's timeout the
    /// connection is unusable (a late reply would be taken for the next
    /// request's); after `wait_event`'s it is fine.
    Timeout,
    /// A message exceeds the frame limit (a long client name).
    TooLarge(FrameTooLarge),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "daemon socket: {e}"),
            Self::Protocol(e) => write!(f, "daemon sent a malformed frame: {e}"),
            Self::VersionMismatch {
                ours,
                theirs,
                message,
            } => {
                write!(f, "protocol version mismatch: client speaks {ours}")?;
                if let Some(t) = theirs {
                    write!(f, ", daemon {t}")?;
                }
                if !message.is_empty() {
                    write!(f, " ({message})")?;
                }
                Ok(())
            }
            Self::Daemon { code, message } => write!(f, "daemon refused: {code}: {message}"),
            Self::Unexpected { expected, got } => {
                write!(f, "daemon answered {got:#06x}, expected {expected}")
            }
            Self::Closed => f.write_str("connection to the daemon closed"),
            Self::Timeout => f.write_str("timed out waiting for the daemon"),
            Self::TooLarge(e) => fmt::Display::fmt(e, f),
        }
    }
}

/// A leaf: each `Display` above already carries the message of the error
/// it wraps (`daemon socket: No such file or directory`), so `source()` is
/// empty and a chain printed with `{:#}` says the cause once. The wrapped
/// error stays reachable by matching the variant.
impl std::error::Error for ClientError {}

impl From<RecvError> for ClientError {
    fn from(e: RecvError) -> Self {
        match e {
            RecvError::Io(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Self::Timeout
            }
            RecvError::Io(e) => Self::Io(e),
            RecvError::Decode(e) => Self::Protocol(e),
            RecvError::Closed => Self::Closed,
            RecvError::ClosedMidFrame { .. } => Self::Io(io::ErrorKind::UnexpectedEof.into()),
        }
    }
}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe || e.kind() == io::ErrorKind::ConnectionReset {
            Self::Closed
        } else {
            Self::Io(e)
        }
    }
}

impl ClientError {
    /// Whether the connection survives this error.
    const fn keeps_connection(&self) -> bool {
        matches!(self, Self::Daemon { .. } | Self::TooLarge(_))
    }
}

/// The sans-IO part both clients share.
#[derive(Debug)]
struct Core {
    session: Session,
    next_tag: u64,
    events: VecDeque<Event>,
    /// Frames and the end of a running capture, apart from `events`.
    captured: VecDeque<CaptureEvent>,
    broken: bool,
    /// Encoding scratch.
    out: Vec<u8>,
}

/// What a received frame is for.
enum Routed {
    /// Kept in the event queue.
    Event,
    /// A reply to the pending control request (or a fatal `Error`).
    Reply(DaemonMsg),
}

impl Core {
    fn new(session: Session) -> Self {
        Self {
            session,
            next_tag: 1,
            events: VecDeque::new(),
            captured: VecDeque::new(),
            broken: false,
            out: Vec::with_capacity(256),
        }
    }

    fn hello(name: &str) -> ClientMsg {
        ClientMsg::Hello {
            version: PROTOCOL_VERSION,
            name: name.to_owned(),
        }
    }

    fn on_hello(reply: DaemonMsg) -> Result<Session, ClientError> {
        match reply {
            DaemonMsg::HelloOk {
                version,
                fep,
                job,
                pid,
            } if version == PROTOCOL_VERSION => Ok(Session {
                version,
                fep,
                job,
                pid,
            }),
            DaemonMsg::HelloOk { version, .. } => Err(ClientError::VersionMismatch {
                ours: PROTOCOL_VERSION,
                theirs: Some(version),
                message: String::new(),
            }),
            DaemonMsg::Error {
                code: ErrorCode::VersionMismatch,
                message,
            } => Err(ClientError::VersionMismatch {
                ours: PROTOCOL_VERSION,
                theirs: None,
                message,
            }),
            // Refused (a connection limit, the Hello timeout): typed.
            other => Err(refusal("HelloOk", other)),
        }
    }

    /// Fails fast on a connection an earlier error broke.
    fn usable(&self) -> Result<(), ClientError> {
        if self.broken {
            Err(ClientError::Closed)
        } else {
            Ok(())
        }
    }

    /// Marks the connection broken if `r` is an error that breaks it.
    fn track<T>(&mut self, r: Result<T, ClientError>) -> Result<T, ClientError> {
        if let Err(e) = &r
            && !e.keeps_connection()
        {
            self.broken = true;
        }
        r
    }

    /// Encodes `msg` into the scratch buffer.
    fn encode(&mut self, msg: &ClientMsg) -> Result<(), ClientError> {
        self.out.clear();
        msg.encode(&mut self.out).map_err(ClientError::TooLarge)
    }

    /// A new tag and the operation built with it.
    fn op(&mut self, build: impl FnOnce(Tag) -> ClientMsg) -> (Tag, ClientMsg) {
        let tag = Tag(self.next_tag);
        self.next_tag += 1;
        (tag, build(tag))
    }

    fn route(&mut self, msg: DaemonMsg) -> Routed {
        let ev = match msg {
            DaemonMsg::Completion(c) => Event::Completion(c),
            DaemonMsg::RecvCompletion(r) => Event::Recv(r),
            DaemonMsg::WriteArrived(w) => Event::WriteArrived(w),
            DaemonMsg::CaptureFrame(f) => {
                self.captured.push_back(CaptureEvent::Frame(f));
                return Routed::Event;
            }
            DaemonMsg::CaptureEnd(e) => {
                self.captured.push_back(CaptureEvent::End(e));
                return Routed::Event;
            }
            reply => return Routed::Reply(reply),
        };
        self.events.push_back(ev);
        Routed::Event
    }

    /// The first buffered event matching `want`.
    fn take_event(&mut self, want: Option<Tag>) -> Option<Event> {
        let i = match want {
            None => 0,
            Some(t) => self.events.iter().position(|e| e.tag() == Some(t))?,
        };
        self.events.remove(i)
    }

    /// A reply outside a control request: only a fatal `Error` is allowed.
    fn stray_reply(msg: DaemonMsg) -> ClientError {
        match msg {
            DaemonMsg::Error { code, message } => ClientError::Daemon { code, message },
            other => unexpected("an event", other),
        }
    }

    fn on_registered(
        &self,
        reply: DaemonMsg,
        len: u64,
        access: Access,
    ) -> Result<Registration, ClientError> {
        match reply {
            DaemonMsg::Registered {
                handle,
                job,
                pid,
                ri,
                key,
                generation,
            } => Ok(Registration {
                handle,
                remote: RemoteRegion {
                    fep: self.session.fep,
                    job,
                    pid,
                    ri,
                    generation,
                    key,
                },
                len,
                access,
            }),
            other => Err(refusal("Registered", other)),
        }
    }

    fn on_local_registered(reply: DaemonMsg, len: u64) -> Result<LocalHandle, ClientError> {
        match reply {
            DaemonMsg::LocalRegistered { handle } => Ok(LocalHandle { handle, len }),
            other => Err(refusal("LocalRegistered", other)),
        }
    }

    fn on_deregistered(reply: DaemonMsg, handle: Handle) -> Result<(), ClientError> {
        match reply {
            DaemonMsg::Deregistered { handle: h } if h == handle => Ok(()),
            other => Err(refusal("Deregistered", other)),
        }
    }

    fn on_capture_started(reply: DaemonMsg) -> Result<u32, ClientError> {
        match reply {
            DaemonMsg::CaptureStarted { snaplen } => Ok(snaplen),
            // A daemon older than capture does not know the message type.
            DaemonMsg::Error {
                code: ErrorCode::Malformed,
                message,
            } if message.contains("unknown message type") => Err(ClientError::Daemon {
                code: ErrorCode::Malformed,
                message: format!("{message} (a uetd without capture support?)"),
            }),
            other => Err(refusal("CaptureStarted", other)),
        }
    }

    /// Adds a `StatsChunk` to `doc`; `Ok(true)` after the last one.
    fn on_stats_chunk(doc: &mut String, reply: DaemonMsg) -> Result<bool, ClientError> {
        match reply {
            DaemonMsg::StatsChunk { data, last } => {
                if doc.len() + data.len() > MAX_STATS_LEN {
                    return Err(ClientError::Unexpected {
                        expected: "a stats document within MAX_STATS_LEN",
                        got: crate::proto::ty::STATS_CHUNK,
                    });
                }
                doc.push_str(&data);
                Ok(last)
            }
            // A daemon older than streamed stats does not know the request.
            DaemonMsg::Error {
                code: ErrorCode::Malformed,
                message,
            } if message.contains("unknown message type") => Err(ClientError::Daemon {
                code: ErrorCode::Malformed,
                message: format!("{message} (a uetd without streamed stats?)"),
            }),
            other => Err(refusal("StatsChunk", other)),
        }
    }
}

fn unexpected(expected: &'static str, got: DaemonMsg) -> ClientError {
    ClientError::Unexpected {
        expected,
        got: got.msg_type(),
    }
}

/// An `Error` reply as [`ClientError::Daemon`], anything else unexpected.
fn refusal(expected: &'static str, got: DaemonMsg) -> ClientError {
    match got {
        DaemonMsg::Error { code, message } => ClientError::Daemon { code, message },
        other => unexpected(expected, other),
    }
}

/// Builds the operation messages both clients send.
mod ops {
    use crate::proto::{ClientMsg, LocalRef, Peer, RemoteRef, Tag};

    pub(super) fn write(
        local: LocalRef,
        remote: RemoteRef,
        len: u32,
        header_data: Option<u64>,
    ) -> impl FnOnce(Tag) -> ClientMsg {
        move |tag| ClientMsg::Write {
            tag,
            local,
            remote,
            len,
            header_data,
        }
    }

    pub(super) fn read(
        local: LocalRef,
        remote: RemoteRef,
        len: u32,
    ) -> impl FnOnce(Tag) -> ClientMsg {
        move |tag| ClientMsg::Read {
            tag,
            local,
            remote,
            len,
        }
    }

    pub(super) fn send(
        local: LocalRef,
        dst: Peer,
        len: u32,
        header_data: Option<u64>,
    ) -> impl FnOnce(Tag) -> ClientMsg {
        move |tag| ClientMsg::Send {
            tag,
            local,
            dst,
            len,
            header_data,
        }
    }

    pub(super) fn tagged_send(
        local: LocalRef,
        dst: Peer,
        len: u32,
        match_bits: u64,
        header_data: Option<u64>,
    ) -> impl FnOnce(Tag) -> ClientMsg {
        move |tag| ClientMsg::TaggedSend {
            tag,
            local,
            dst,
            len,
            match_bits,
            header_data,
        }
    }

    pub(super) fn post_recv(
        local: LocalRef,
        len: u32,
        tagged: Option<(u64, u64)>,
    ) -> impl FnOnce(Tag) -> ClientMsg {
        move |tag| ClientMsg::PostRecv {
            tag,
            local,
            len,
            tagged,
        }
    }
}
