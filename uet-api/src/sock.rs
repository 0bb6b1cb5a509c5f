//! Frames on a Unix stream socket, with descriptors passed as `SCM_RIGHTS`,
//! and the peer's credentials: shared by the clients and the daemon.
//!
//! Every function works on blocking and non-blocking sockets alike: on a
//! non-blocking one, [`recv_into`] and [`send_some`] return
//! `ErrorKind::WouldBlock`, so they fit inside tokio's
//! `UnixStream::try_io`:
//!
//! ```no_run
//! # #[cfg(feature = "tokio")]
//! # async fn f(stream: tokio::net::UnixStream) -> std::io::Result<()> {
//! use tokio::io::Interest;
//! use uet_api::proto::{ClientMsg, FrameReader};
//! let mut reader = FrameReader::new();
//! loop {
//!     while let Some(frame) = reader.next_frame::<ClientMsg>().map_err(std::io::Error::other)? {
//!         // serve frame.msg (and frame.fd)
//!     }
//!     stream.readable().await?;
//!     match stream.try_io(Interest::READABLE, || uet_api::sock::recv_into(&stream, &mut reader)) {
//!         Ok(0) => return Ok(()), // peer gone
//!         Ok(_) => {}
//!         Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
//!         Err(e) => return Err(e),
//!     }
//! }
//! # }
//! ```

use core::fmt;
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd};

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, recvmsg, sendmsg,
};

use crate::proto::{DecodeError, FrameReader, MAX_PENDING_FDS, Message, Received};

/// One `recvmsg` into `reader`'s spare space, handing any `SCM_RIGHTS`
/// descriptors (received close-on-exec) to the reader. Returns the bytes
/// read; 0 is end of stream. Lost descriptors (`MSG_CTRUNC`) make the
/// reader fail with [`DecodeError::TooManyFds`].
///
/// # Errors
///
/// The socket's error (`WouldBlock` on a non-blocking socket with nothing
/// to read, `Interrupted`, a timeout as `WouldBlock`…).
pub fn recv_into(sock: impl AsFd, reader: &mut FrameReader) -> io::Result<usize> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_PENDING_FDS))];
    let mut cmsg = RecvAncillaryBuffer::new(&mut space);
    let r = {
        let mut iov = [IoSliceMut::new(reader.spare())];
        recvmsg(&sock, &mut iov, &mut cmsg, RecvFlags::CMSG_CLOEXEC)?
    };
    for m in cmsg.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = m {
            for fd in fds {
                reader.push_fd(fd);
            }
        }
    }
    if r.flags.contains(ReturnFlags::CTRUNC) {
        reader.fds_truncated();
    }
    reader.filled(r.bytes);
    Ok(r.bytes)
}

/// Why [`recv_frame`] got no frame.
#[derive(Debug)]
pub enum RecvError {
    /// The socket failed (or timed out: `WouldBlock`/`TimedOut`).
    Io(io::Error),
    /// The bytes did not decode.
    Decode(DecodeError),
    /// The peer closed the stream between frames.
    Closed,
    /// The peer closed the stream inside a frame.
    ClosedMidFrame {
        /// Bytes of the partial frame.
        buffered: usize,
    },
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "socket error: {e}"),
            Self::Decode(e) => write!(f, "malformed frame: {e}"),
            Self::Closed => f.write_str("connection closed"),
            Self::ClosedMidFrame { buffered } => {
                write!(f, "connection closed inside a frame ({buffered} bytes)")
            }
        }
    }
}

impl std::error::Error for RecvError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io(e) => Some(e),
            Self::Decode(e) => Some(e),
            _ => None,
        }
    }
}

/// Receives the next frame (and its descriptor), reading as often as it
/// takes; frames already buffered in `reader` come first. For blocking
/// sockets (a socket read timeout surfaces as `RecvError::Io` with
/// `WouldBlock`, and the reader keeps any partial frame for the next call).
///
/// # Errors
///
/// See [`RecvError`].
pub fn recv_frame<M: Message>(
    sock: impl AsFd,
    reader: &mut FrameReader,
) -> Result<Received<M>, RecvError> {
    loop {
        if let Some(f) = reader.next_frame::<M>().map_err(RecvError::Decode)? {
            return Ok(f);
        }
        match recv_into(&sock, reader) {
            Ok(0) if reader.buffered() == 0 => return Err(RecvError::Closed),
            Ok(0) => {
                return Err(RecvError::ClosedMidFrame {
                    buffered: reader.buffered(),
                });
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(RecvError::Io(e)),
        }
    }
}

/// One `sendmsg` of (a prefix of) `bytes`, with `fd` as `SCM_RIGHTS` if
/// given, and `MSG_NOSIGNAL` (a closed peer is `BrokenPipe`, not
/// `SIGPIPE`). Returns the bytes sent; the descriptor went with them if at
/// least one byte did.
///
/// # Errors
///
/// The socket's error.
pub fn send_some(sock: impl AsFd, bytes: &[u8], fd: Option<BorrowedFd<'_>>) -> io::Result<usize> {
    let fds: [BorrowedFd<'_>; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    if let Some(fd) = fd {
        fds = [fd];
        let pushed = cmsg.push(SendAncillaryMessage::ScmRights(&fds));
        debug_assert!(pushed, "ancillary space sized for one descriptor");
    }
    Ok(sendmsg(
        &sock,
        &[IoSlice::new(bytes)],
        &mut cmsg,
        SendFlags::NOSIGNAL,
    )?)
}

/// Sends a whole frame on a blocking socket, the descriptor with its first
/// byte (which is where [`FrameReader`] looks for it).
///
/// # Errors
///
/// The socket's error; the stream is then out of step unless nothing was
/// sent.
pub fn send_frame(sock: impl AsFd, frame: &[u8], fd: Option<BorrowedFd<'_>>) -> io::Result<()> {
    let mut off = 0;
    let mut fd = fd;
    while off < frame.len() {
        match send_some(&sock, &frame[off..], fd) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                off += n;
                fd = None;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Encodes `msg` and sends it with [`send_frame`].
///
/// # Errors
///
/// The socket's error, or `InvalidInput` if the message exceeds the frame
/// limit.
pub fn send_msg<M: Message>(
    sock: impl AsFd,
    msg: &M,
    fd: Option<BorrowedFd<'_>>,
) -> io::Result<()> {
    let frame = msg
        .to_frame()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    send_frame(sock, &frame, fd)
}

/// The credentials of the process at the other end of a Unix socket, as
/// the kernel recorded them at `connect` (`SO_PEERCRED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCredentials {
    /// Process ID (0 if the peer is in a PID namespace the reader cannot
    /// see).
    pub pid: i32,
    /// Effective user ID.
    pub uid: u32,
    /// Effective group ID.
    pub gid: u32,
}

/// `getsockopt(SO_PEERCRED)` on a connected Unix socket.
///
/// # Errors
///
/// The kernel's error (`ENOTCONN`, `ENOTSOCK`…).
pub fn peer_credentials(sock: impl AsFd) -> io::Result<PeerCredentials> {
    let c = rustix::net::sockopt::socket_peercred(sock)?;
    Ok(PeerCredentials {
        pid: c.pid.as_raw_pid(),
        uid: c.uid.as_raw(),
        gid: c.gid.as_raw(),
    })
}

/// Receives the next frame on a tokio stream: the async counterpart of
/// [`recv_frame`]. Cancel-safe: bytes and descriptors read stay in
/// `reader`, so it can sit in a `select!` or under a timeout.
///
/// # Errors
///
/// See [`RecvError`].
#[cfg(feature = "tokio")]
pub async fn recv_frame_async<M: Message>(
    stream: &tokio::net::UnixStream,
    reader: &mut FrameReader,
) -> Result<Received<M>, RecvError> {
    use tokio::io::Interest;
    loop {
        if let Some(f) = reader.next_frame::<M>().map_err(RecvError::Decode)? {
            return Ok(f);
        }
        stream.readable().await.map_err(RecvError::Io)?;
        match stream.try_io(Interest::READABLE, || recv_into(stream, reader)) {
            Ok(0) if reader.buffered() == 0 => return Err(RecvError::Closed),
            Ok(0) => {
                return Err(RecvError::ClosedMidFrame {
                    buffered: reader.buffered(),
                });
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(RecvError::Io(e)),
        }
    }
}

/// Sends a whole frame on a tokio stream, the descriptor with its first
/// byte: the async counterpart of [`send_frame`].
///
/// Not cancel-safe: a future dropped after part of the frame went out
/// leaves the stream out of step.
///
/// # Errors
///
/// The socket's error.
#[cfg(feature = "tokio")]
pub async fn send_frame_async(
    stream: &tokio::net::UnixStream,
    frame: &[u8],
    fd: Option<BorrowedFd<'_>>,
) -> io::Result<()> {
    use tokio::io::Interest;
    let mut off = 0;
    let mut fd = fd;
    while off < frame.len() {
        stream.writable().await?;
        match stream.try_io(Interest::WRITABLE, || send_some(stream, &frame[off..], fd)) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                off += n;
                fd = None;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
