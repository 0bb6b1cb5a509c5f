//! Incremental frame decoding over a byte stream plus the descriptors that
//! arrived with it.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;

use super::{DecodeError, MAX_FRAME_LEN, Message, frame_len};

/// Descriptors the reader holds before frames claim them; one more is
/// [`DecodeError::TooManyFds`]. Each frame takes at most one, and a
/// descriptor arrives with the first bytes of its frame, so a well-behaved
/// peer never has more than one pending.
pub const MAX_PENDING_FDS: usize = 4;

/// A decoded frame and the descriptor it carried (`Some` exactly when
/// [`Message::takes_fd`]).
#[derive(Debug)]
pub struct Received<M> {
    /// The message.
    pub msg: M,
    /// Its descriptor.
    pub fd: Option<OwnedFd>,
}

/// Reassembles frames from a stream socket's reads, in any split, together
/// with the descriptors received beside them.
///
/// Feed it with [`FrameReader::spare`] + [`FrameReader::filled`] (or
/// [`FrameReader::extend`]) and [`FrameReader::push_fd`] —
/// [`crate::sock::recv_into`] does both from one `recvmsg` — then take
/// frames with [`FrameReader::next_frame`] until it returns `Ok(None)`.
///
/// Descriptors: Linux hands the descriptors of a `sendmsg` to the
/// `recvmsg` that reads the first byte the `sendmsg` sent, so when a frame
/// that takes a descriptor is complete its descriptor has arrived; frames
/// claim pending descriptors in order. A descriptor still pending when the
/// buffer runs empty came with a frame that takes none:
/// [`DecodeError::UnexpectedFd`].
///
/// It never holds more than [`MAX_FRAME_LEN`] bytes; a length prefix above
/// that is refused as soon as its four bytes are in. Errors are sticky: the
/// stream is out of step and the connection should be dropped.
#[derive(Debug)]
pub struct FrameReader {
    buf: Box<[u8]>,
    head: usize,
    tail: usize,
    fds: VecDeque<OwnedFd>,
    failed: Option<DecodeError>,
}

impl Default for FrameReader {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameReader {
    /// An empty reader with a [`MAX_FRAME_LEN`] buffer.
    #[must_use]
    pub fn new() -> Self {
        Self {
            buf: vec![0; MAX_FRAME_LEN].into_boxed_slice(),
            head: 0,
            tail: 0,
            fds: VecDeque::new(),
            failed: None,
        }
    }

    /// Bytes buffered and not yet taken as frames.
    #[must_use]
    pub fn buffered(&self) -> usize {
        self.tail - self.head
    }

    /// Descriptors received and not yet claimed by a frame.
    #[must_use]
    pub fn pending_fds(&self) -> usize {
        self.fds.len()
    }

    /// Free space to read into; never empty after [`FrameReader::next_frame`]
    /// returned `Ok(None)`, because a partial frame is shorter than the
    /// buffer.
    pub fn spare(&mut self) -> &mut [u8] {
        if self.head == self.tail {
            self.head = 0;
            self.tail = 0;
        } else if self.head > 0 && self.tail == self.buf.len() {
            self.buf.copy_within(self.head..self.tail, 0);
            self.tail -= self.head;
            self.head = 0;
        }
        &mut self.buf[self.tail..]
    }

    /// Marks `n` bytes of [`FrameReader::spare`] as read.
    ///
    /// # Panics
    ///
    /// If `n` exceeds the spare space (a caller bug).
    pub fn filled(&mut self, n: usize) {
        assert!(
            self.tail + n <= self.buf.len(),
            "filled past the spare space"
        );
        self.tail += n;
    }

    /// Copies `bytes` in, as much as fits; returns how many were taken
    /// (take frames out and call again for the rest).
    pub fn extend(&mut self, bytes: &[u8]) -> usize {
        let spare = self.spare();
        let n = spare.len().min(bytes.len());
        spare[..n].copy_from_slice(&bytes[..n]);
        self.filled(n);
        n
    }

    /// Hands over a descriptor received with the bytes of the last read.
    pub fn push_fd(&mut self, fd: OwnedFd) {
        if self.fds.len() >= MAX_PENDING_FDS {
            self.fail(DecodeError::TooManyFds);
            return;
        }
        self.fds.push_back(fd);
    }

    /// Records that descriptors were lost (`MSG_CTRUNC`).
    pub fn fds_truncated(&mut self) {
        self.fail(DecodeError::TooManyFds);
    }

    fn fail(&mut self, e: DecodeError) {
        if self.failed.is_none() {
            self.failed = Some(e);
        }
        self.fds.clear();
    }

    /// The error this reader failed with, if any.
    #[must_use]
    pub fn error(&self) -> Option<&DecodeError> {
        self.failed.as_ref()
    }

    /// The next whole frame, `Ok(None)` if more bytes are needed.
    ///
    /// # Errors
    ///
    /// A [`DecodeError`]; once one is returned, every later call returns it
    /// again.
    pub fn next_frame<M: Message>(&mut self) -> Result<Option<Received<M>>, DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let r = self.take_frame();
        if let Err(e) = &r {
            self.fail(e.clone());
        }
        r
    }

    fn take_frame<M: Message>(&mut self) -> Result<Option<Received<M>>, DecodeError> {
        let data = &self.buf[self.head..self.tail];
        let Some(total) = frame_len(data)? else {
            return self.check_stray_fds().map(|()| None);
        };
        if data.len() < total {
            return Ok(None);
        }
        let msg = M::decode(&data[..total])?;
        self.head += total;
        let fd = if msg.takes_fd() {
            Some(
                self.fds
                    .pop_front()
                    .ok_or_else(|| DecodeError::MissingFd { ty: msg.msg_type() })?,
            )
        } else {
            None
        };
        self.check_stray_fds()?;
        Ok(Some(Received { msg, fd }))
    }

    fn check_stray_fds(&self) -> Result<(), DecodeError> {
        if self.head == self.tail && !self.fds.is_empty() {
            return Err(DecodeError::UnexpectedFd);
        }
        Ok(())
    }
}
