//! The blocking client over `std::os::unix::net::UnixStream`.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{
    CaptureEvent, ClientError, Core, Event, LocalHandle, Registration, Routed, Session, ops,
};
use crate::proto::Message as _;
use crate::proto::{
    Access, CaptureSpec, ClientMsg, DaemonMsg, FrameReader, Handle, LocalRef, Peer, RemoteRef, Tag,
};
use crate::region::Region;
use crate::ring::{ClientRing, RingSizes};
use crate::sock::{self, RecvError};

/// How long control requests wait for their reply unless
/// [`Client::set_reply_timeout`] says otherwise.
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// A blocking connection to `uetd`.
///
/// ```no_run
/// use uet_api::{Access, Client};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut c = Client::connect("/run/uet/uetd.sock", "example")?;
/// let region = c.create_region(1 << 20)?;
/// let reg = c.register(&region, Access::REMOTE_WRITE, None)?;
/// println!("write to {}", reg.remote); // hand this to the peer
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    reader: FrameReader,
    core: Core,
    reply_timeout: Option<Duration>,
    /// Whether a read timeout is set on the socket.
    timeout_set: bool,
    /// The descriptor of the last reply that carried one (`RingOpened`).
    reply_fd: Option<OwnedFd>,
}

impl Client {
    /// Connects to the daemon socket at `path` and says `Hello` with
    /// `name`.
    ///
    /// # Errors
    ///
    /// The connection's error, [`ClientError::VersionMismatch`], or the
    /// daemon's refusal.
    pub fn connect(path: impl AsRef<Path>, name: &str) -> Result<Self, ClientError> {
        let stream = UnixStream::connect(path)?;
        Self::handshake(stream, name)
    }

    /// Says `Hello` on an already connected stream (a socketpair in
    /// tests, a socket inherited from a supervisor).
    ///
    /// # Errors
    ///
    /// As [`Client::connect`].
    pub fn handshake(stream: UnixStream, name: &str) -> Result<Self, ClientError> {
        let placeholder = Session {
            version: 0,
            fep: std::net::Ipv4Addr::UNSPECIFIED.into(),
            job: 0,
            pid: 0,
        };
        let mut c = Self {
            stream,
            reader: FrameReader::new(),
            core: Core::new(placeholder),
            reply_timeout: Some(DEFAULT_REPLY_TIMEOUT),
            timeout_set: false,
            reply_fd: None,
        };
        let reply = c.request(&Core::hello(name), None)?;
        c.core.session = Core::on_hello(reply)?;
        Ok(c)
    }

    /// What the daemon granted: FEP address, job, `pid_on_fep`.
    #[must_use]
    pub fn session(&self) -> &Session {
        &self.core.session
    }

    /// How long control requests wait for their reply (`None`: forever).
    pub fn set_reply_timeout(&mut self, timeout: Option<Duration>) {
        self.reply_timeout = timeout;
    }

    /// A new memfd-backed region of `len` bytes ([`Region::new`]).
    ///
    /// # Errors
    ///
    /// The kernel's error.
    pub fn create_region(&self, len: u64) -> io::Result<Region> {
        Region::new(len)
    }

    /// A new memfd-backed region of `len` bytes with its memory allocated
    /// now ([`Region::allocated`]): for a region remote writes land in.
    ///
    /// # Errors
    ///
    /// The kernel's error (`ENOMEM`/`ENOSPC` when the memory is not there).
    pub fn create_allocated_region(&self, len: u64) -> io::Result<Region> {
        Region::allocated(len)
    }

    /// Registers all of `region` for remote access with `access`, under
    /// `key` or one the daemon picks (`ri << 52 | generation << 44 | 44
    /// random bits`, the layout libfabric peers read the RI and
    /// generation from).
    ///
    /// # Errors
    ///
    /// The daemon's refusal ([`ClientError::Daemon`]) or a connection
    /// error.
    pub fn register(
        &mut self,
        region: &Region,
        access: Access,
        key: Option<u64>,
    ) -> Result<Registration, ClientError> {
        let len = region.len();
        let msg = ClientMsg::Register { len, access, key };
        let reply = self.request(&msg, Some(region.as_fd()))?;
        self.core.on_registered(reply, len, access)
    }

    /// Registers all of `region` as a local buffer.
    ///
    /// # Errors
    ///
    /// As [`Client::register`].
    pub fn register_local(&mut self, region: &Region) -> Result<LocalHandle, ClientError> {
        let len = region.len();
        let reply = self.request(&ClientMsg::RegisterLocal { len }, Some(region.as_fd()))?;
        Core::on_local_registered(reply, len)
    }

    /// Deregisters a region (either kind).
    ///
    /// # Errors
    ///
    /// As [`Client::register`] (`UnknownHandle` for a handle not held).
    pub fn deregister(&mut self, handle: Handle) -> Result<(), ClientError> {
        let reply = self.request(&ClientMsg::Deregister { handle }, None)?;
        Core::on_deregistered(reply, handle)
    }

    /// The daemon's counters as JSON, the whole document however long
    /// (streamed in `StatsChunk`s; the reply timeout covers them all).
    ///
    /// # Errors
    ///
    /// As [`Client::register`].
    pub fn stats(&mut self) -> Result<String, ClientError> {
        self.core.usable()?;
        self.send_msg(&ClientMsg::StatsStream, None)?;
        let deadline = self.reply_timeout.map(|t| Instant::now() + t);
        let mut doc = String::new();
        loop {
            let reply = self.reply(deadline)?;
            let first = doc.is_empty();
            match Core::on_stats_chunk(&mut doc, reply) {
                Ok(true) => return Ok(doc),
                Ok(false) => {}
                // A refusal of the request leaves the connection in step;
                // anything after the first piece does not.
                Err(e) => {
                    if !first || !e.keeps_connection() {
                        self.core.broken = true;
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Opens a shared-memory ring ([`crate::ring`]) with `sq` submission
    /// and `cq` completion entries, served by the daemon worker that owns
    /// `fep` (the destination of its operations). Writes and reads placed
    /// in it bypass the socket; it stays valid while this connection is
    /// open. Needs a daemon of protocol version 2.
    ///
    /// # Errors
    ///
    /// The daemon's refusal (`Busy`: this connection has a ring already;
    /// `BadLength`: sizes), a memfd or mapping error, or a connection
    /// error.
    pub fn open_ring(&mut self, fep: IpAddr, sq: u32, cq: u32) -> Result<ClientRing, ClientError> {
        let sizes = RingSizes::new(sq, cq).map_err(|message| ClientError::Daemon {
            code: crate::ErrorCode::BadLength,
            message,
        })?;
        let mem = Region::new(sizes.len() as u64)?;
        let mut ring = ClientRing::create(mem.as_fd(), sizes)?;
        let msg = ClientMsg::RingOpen {
            sq_entries: sq,
            cq_entries: cq,
            fep,
        };
        self.reply_fd = None;
        match self.request(&msg, Some(mem.as_fd()))? {
            DaemonMsg::RingOpened => {
                let fd = self.reply_fd.take().ok_or(ClientError::Unexpected {
                    expected: "RingOpened with a doorbell",
                    got: crate::proto::ty::RING_OPENED,
                })?;
                ring.set_doorbell(fd);
                Ok(ring)
            }
            DaemonMsg::Error { code, message } => Err(ClientError::Daemon { code, message }),
            other => {
                self.core.broken = true;
                Err(ClientError::Unexpected {
                    expected: "RingOpened",
                    got: other.msg_type(),
                })
            }
        }
    }

    /// Starts an RMA write of `len` bytes from `src` to `dst`.
    ///
    /// # Errors
    ///
    /// A connection error (refusals come back as a failed completion).
    pub fn write(
        &mut self,
        src: LocalRef,
        dst: RemoteRef,
        len: u32,
        header_data: Option<u64>,
    ) -> Result<Tag, ClientError> {
        self.submit(ops::write(src, dst, len, header_data))
    }

    /// Starts an RMA read of `len` bytes from `src` into `dst`.
    ///
    /// # Errors
    ///
    /// As [`Client::write`].
    pub fn read(&mut self, dst: LocalRef, src: RemoteRef, len: u32) -> Result<Tag, ClientError> {
        self.submit(ops::read(dst, src, len))
    }

    /// Starts an untagged send.
    ///
    /// # Errors
    ///
    /// As [`Client::write`].
    pub fn send(
        &mut self,
        src: LocalRef,
        dst: Peer,
        len: u32,
        header_data: Option<u64>,
    ) -> Result<Tag, ClientError> {
        self.submit(ops::send(src, dst, len, header_data))
    }

    /// Starts a tagged send.
    ///
    /// # Errors
    ///
    /// As [`Client::write`].
    pub fn tagged_send(
        &mut self,
        src: LocalRef,
        dst: Peer,
        len: u32,
        match_bits: u64,
        header_data: Option<u64>,
    ) -> Result<Tag, ClientError> {
        self.submit(ops::tagged_send(src, dst, len, match_bits, header_data))
    }

    /// Posts a receive buffer; `tagged` is `(match_bits, ignore_bits)`.
    ///
    /// # Errors
    ///
    /// As [`Client::write`].
    pub fn post_recv(
        &mut self,
        dst: LocalRef,
        len: u32,
        tagged: Option<(u64, u64)>,
    ) -> Result<Tag, ClientError> {
        self.submit(ops::post_recv(dst, len, tagged))
    }

    /// The next event, buffered ones first; `None` waits forever,
    /// `Some(Duration::ZERO)` only looks.
    ///
    /// # Errors
    ///
    /// [`ClientError::Timeout`] (the connection stays usable), the
    /// daemon's closing `Error`, or a connection error.
    pub fn wait_event(&mut self, timeout: Option<Duration>) -> Result<Event, ClientError> {
        self.wait(None, timeout)
    }

    /// The end of operation `tag` (a [`Event::Completion`], or
    /// [`Event::Recv`] for a receive); other events that arrive meanwhile
    /// are kept for [`Client::wait_event`].
    ///
    /// # Errors
    ///
    /// As [`Client::wait_event`].
    pub fn wait_completion(
        &mut self,
        tag: Tag,
        timeout: Option<Duration>,
    ) -> Result<Event, ClientError> {
        self.wait(Some(tag), timeout)
    }

    /// Starts a capture of the frames the daemon's datapath receives and
    /// sends; returns the snap length in force. Frames then arrive through
    /// [`Self::capture_next`] until its [`CaptureEvent::End`].
    ///
    /// # Errors
    ///
    /// The daemon's refusal ([`ClientError::Daemon`]: `Refused` for a uid
    /// other than 0 or the daemon's, `Busy` while another capture runs,
    /// `BadLength` for a zero snap length) or a connection error.
    pub fn capture_start(&mut self, spec: CaptureSpec) -> Result<u32, ClientError> {
        let reply = self.request(&ClientMsg::Capture(spec), None)?;
        Core::on_capture_started(reply)
    }

    /// The next frame of the running capture, or its end; `None` waits
    /// forever. Events of operations that arrive meanwhile are kept for
    /// `wait_event`.
    ///
    /// # Errors
    ///
    /// [`ClientError::Timeout`] (the connection stays usable), the
    /// daemon's closing `Error`, or a connection error.
    pub fn capture_next(&mut self, timeout: Option<Duration>) -> Result<CaptureEvent, ClientError> {
        self.wait_for(timeout, |core| core.captured.pop_front())
    }

    /// Asks the daemon to end the running capture; its
    /// [`CaptureEvent::End`] follows the frames already sent (ignored
    /// when no capture runs).
    ///
    /// # Errors
    ///
    /// A connection error.
    pub fn capture_stop(&mut self) -> Result<(), ClientError> {
        self.core.usable()?;
        self.send_msg(&ClientMsg::CaptureStop, None)
    }

    /// Says `Bye` and closes.
    ///
    /// # Errors
    ///
    /// A connection error.
    pub fn close(mut self) -> Result<(), ClientError> {
        self.core.usable()?;
        self.send_msg(&ClientMsg::Bye, None)
    }

    fn submit(&mut self, build: impl FnOnce(Tag) -> ClientMsg) -> Result<Tag, ClientError> {
        self.core.usable()?;
        let (tag, msg) = self.core.op(build);
        self.send_msg(&msg, None)?;
        Ok(tag)
    }

    fn send_msg(&mut self, msg: &ClientMsg, fd: Option<BorrowedFd<'_>>) -> Result<(), ClientError> {
        self.core.encode(msg)?;
        let r = sock::send_frame(&self.stream, &self.core.out, fd).map_err(ClientError::from);
        self.core.track(r)
    }

    /// Sends a control request and waits for its reply, keeping events.
    fn request(
        &mut self,
        msg: &ClientMsg,
        fd: Option<BorrowedFd<'_>>,
    ) -> Result<DaemonMsg, ClientError> {
        self.core.usable()?;
        self.send_msg(msg, fd)?;
        let deadline = self.reply_timeout.map(|t| Instant::now() + t);
        self.reply(deadline)
    }

    /// Waits for the next reply by `deadline`, keeping events.
    fn reply(&mut self, deadline: Option<Instant>) -> Result<DaemonMsg, ClientError> {
        let r = loop {
            match self.recv(deadline) {
                Ok(m) => match self.core.route(m) {
                    Routed::Event => {}
                    Routed::Reply(reply) => break Ok(reply),
                },
                Err(e) => break Err(e),
            }
        };
        // Any failure to get the reply leaves the stream out of step.
        if r.is_err() {
            self.core.broken = true;
        }
        r
    }

    fn wait(&mut self, tag: Option<Tag>, timeout: Option<Duration>) -> Result<Event, ClientError> {
        self.wait_for(timeout, |core| core.take_event(tag))
    }

    /// Reads frames until `take` finds what the caller waits for (an
    /// operation's event, a captured frame), by `timeout`.
    fn wait_for<T>(
        &mut self,
        timeout: Option<Duration>,
        mut take: impl FnMut(&mut Core) -> Option<T>,
    ) -> Result<T, ClientError> {
        if let Some(e) = take(&mut self.core) {
            return Ok(e);
        }
        self.core.usable()?;
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let m = match self.recv(deadline) {
                Ok(m) => m,
                Err(ClientError::Timeout) => return Err(ClientError::Timeout),
                Err(e) => return self.core.track(Err(e)),
            };
            match self.core.route(m) {
                Routed::Event => {
                    if let Some(e) = take(&mut self.core) {
                        return Ok(e);
                    }
                }
                Routed::Reply(r) => {
                    self.core.broken = true;
                    return Err(Core::stray_reply(r));
                }
            }
        }
    }

    /// The next frame, by `deadline`.
    fn recv(&mut self, deadline: Option<Instant>) -> Result<DaemonMsg, ClientError> {
        loop {
            if let Some(f) = self
                .reader
                .next_frame::<DaemonMsg>()
                .map_err(ClientError::Protocol)?
            {
                if f.fd.is_some() {
                    self.reply_fd = f.fd;
                }
                return Ok(f.msg);
            }
            let n = match deadline {
                None => {
                    self.set_timeout(None)?;
                    sock::recv_into(&self.stream, &mut self.reader)
                }
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        self.stream.set_nonblocking(true)?;
                        let r = sock::recv_into(&self.stream, &mut self.reader);
                        self.stream.set_nonblocking(false)?;
                        r
                    } else {
                        self.set_timeout(Some(left))?;
                        sock::recv_into(&self.stream, &mut self.reader)
                    }
                }
            };
            match n {
                Ok(0) if self.reader.buffered() == 0 => return Err(RecvError::Closed.into()),
                Ok(0) => {
                    return Err(RecvError::ClosedMidFrame {
                        buffered: self.reader.buffered(),
                    }
                    .into());
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(RecvError::Io(e).into()),
            }
        }
    }

    fn set_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
        if t.is_none() && !self.timeout_set {
            return Ok(());
        }
        self.stream.set_read_timeout(t)?;
        self.timeout_set = t.is_some();
        Ok(())
    }
}

impl AsFd for Client {
    /// The socket, e.g. to poll it with others.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }
}
