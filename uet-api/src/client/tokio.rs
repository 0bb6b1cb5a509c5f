//! The async client over `tokio::net::UnixStream` (feature `tokio`).

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::time::Duration;

use ::tokio::net::UnixStream;
use ::tokio::time::{Instant, timeout_at};

use super::{
    CaptureEvent, ClientError, Core, Event, LocalHandle, Registration, Routed, Session, ops,
};
use crate::proto::{
    Access, CaptureSpec, ClientMsg, DaemonMsg, FrameReader, Handle, LocalRef, Peer, RemoteRef, Tag,
};
use crate::region::Region;
use crate::sock;

/// An async connection to `uetd`: the operations of [`super::Client`],
/// awaited. Waiting (for an event or a reply) is cancel-safe: a dropped
/// `wait_event` future loses nothing.
#[derive(Debug)]
pub struct AsyncClient {
    stream: UnixStream,
    reader: FrameReader,
    core: Core,
    reply_timeout: Option<Duration>,
}

impl AsyncClient {
    /// Connects to the daemon socket at `path` and says `Hello` with
    /// `name`.
    ///
    /// # Errors
    ///
    /// As [`super::Client::connect`].
    pub async fn connect(path: impl AsRef<Path>, name: &str) -> Result<Self, ClientError> {
        let stream = UnixStream::connect(path).await?;
        Self::handshake(stream, name).await
    }

    /// Says `Hello` on an already connected stream.
    ///
    /// # Errors
    ///
    /// As [`super::Client::connect`].
    pub async fn handshake(stream: UnixStream, name: &str) -> Result<Self, ClientError> {
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
            reply_timeout: Some(super::blocking::DEFAULT_REPLY_TIMEOUT),
        };
        let reply = c.request(&Core::hello(name), None).await?;
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

    /// Registers all of `region` for remote access.
    ///
    /// # Errors
    ///
    /// As [`super::Client::register`].
    pub async fn register(
        &mut self,
        region: &Region,
        access: Access,
        key: Option<u64>,
    ) -> Result<Registration, ClientError> {
        let len = region.len();
        let msg = ClientMsg::Register { len, access, key };
        let reply = self.request(&msg, Some(region.as_fd())).await?;
        self.core.on_registered(reply, len, access)
    }

    /// Registers all of `region` as a local buffer.
    ///
    /// # Errors
    ///
    /// As [`super::Client::register`].
    pub async fn register_local(&mut self, region: &Region) -> Result<LocalHandle, ClientError> {
        let len = region.len();
        let reply = self
            .request(&ClientMsg::RegisterLocal { len }, Some(region.as_fd()))
            .await?;
        Core::on_local_registered(reply, len)
    }

    /// Deregisters a region (either kind).
    ///
    /// # Errors
    ///
    /// As [`super::Client::register`].
    pub async fn deregister(&mut self, handle: Handle) -> Result<(), ClientError> {
        let reply = self
            .request(&ClientMsg::Deregister { handle }, None)
            .await?;
        Core::on_deregistered(reply, handle)
    }

    /// The daemon's counters as JSON, the whole document however long
    /// (as [`super::Client::stats`]).
    ///
    /// # Errors
    ///
    /// As [`super::Client::register`].
    pub async fn stats(&mut self) -> Result<String, ClientError> {
        self.core.usable()?;
        self.send_msg(&ClientMsg::StatsStream, None).await?;
        let deadline = self.reply_timeout.map(|t| Instant::now() + t);
        let mut doc = String::new();
        loop {
            let reply = self.reply(deadline).await?;
            let first = doc.is_empty();
            match Core::on_stats_chunk(&mut doc, reply) {
                Ok(true) => return Ok(doc),
                Ok(false) => {}
                Err(e) => {
                    if !first || !e.keeps_connection() {
                        self.core.broken = true;
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Starts an RMA write.
    ///
    /// # Errors
    ///
    /// As [`super::Client::write`].
    pub async fn write(
        &mut self,
        src: LocalRef,
        dst: RemoteRef,
        len: u32,
        header_data: Option<u64>,
    ) -> Result<Tag, ClientError> {
        self.submit(ops::write(src, dst, len, header_data)).await
    }

    /// Starts an RMA read.
    ///
    /// # Errors
    ///
    /// As [`super::Client::write`].
    pub async fn read(
        &mut self,
        dst: LocalRef,
        src: RemoteRef,
        len: u32,
    ) -> Result<Tag, ClientError> {
        self.submit(ops::read(dst, src, len)).await
    }

    /// Starts an untagged send.
    ///
    /// # Errors
    ///
    /// As [`super::Client::write`].
    pub async fn send(
        &mut self,
        src: LocalRef,
        dst: Peer,
        len: u32,
        header_data: Option<u64>,
    ) -> Result<Tag, ClientError> {
        self.submit(ops::send(src, dst, len, header_data)).await
    }

    /// Starts a tagged send.
    ///
    /// # Errors
    ///
    /// As [`super::Client::write`].
    pub async fn tagged_send(
        &mut self,
        src: LocalRef,
        dst: Peer,
        len: u32,
        match_bits: u64,
        header_data: Option<u64>,
    ) -> Result<Tag, ClientError> {
        self.submit(ops::tagged_send(src, dst, len, match_bits, header_data))
            .await
    }

    /// Posts a receive buffer; `tagged` is `(match_bits, ignore_bits)`.
    ///
    /// # Errors
    ///
    /// As [`super::Client::write`].
    pub async fn post_recv(
        &mut self,
        dst: LocalRef,
        len: u32,
        tagged: Option<(u64, u64)>,
    ) -> Result<Tag, ClientError> {
        self.submit(ops::post_recv(dst, len, tagged)).await
    }

    /// The next event, buffered ones first (`None`: no time limit).
    ///
    /// # Errors
    ///
    /// As [`super::Client::wait_event`].
    pub async fn wait_event(&mut self, timeout: Option<Duration>) -> Result<Event, ClientError> {
        self.wait(None, timeout).await
    }

    /// The end of operation `tag`; other events are kept.
    ///
    /// # Errors
    ///
    /// As [`super::Client::wait_event`].
    pub async fn wait_completion(
        &mut self,
        tag: Tag,
        timeout: Option<Duration>,
    ) -> Result<Event, ClientError> {
        self.wait(Some(tag), timeout).await
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
    pub async fn capture_start(&mut self, spec: CaptureSpec) -> Result<u32, ClientError> {
        let reply = self.request(&ClientMsg::Capture(spec), None).await?;
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
    pub async fn capture_next(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<CaptureEvent, ClientError> {
        self.wait_for(timeout, |core| core.captured.pop_front())
            .await
    }

    /// Asks the daemon to end the running capture; its
    /// [`CaptureEvent::End`] follows the frames already sent (ignored
    /// when no capture runs).
    ///
    /// # Errors
    ///
    /// A connection error.
    pub async fn capture_stop(&mut self) -> Result<(), ClientError> {
        self.core.usable()?;
        self.send_msg(&ClientMsg::CaptureStop, None).await
    }

    /// Says `Bye` and closes.
    ///
    /// # Errors
    ///
    /// A connection error.
    pub async fn close(mut self) -> Result<(), ClientError> {
        self.core.usable()?;
        self.send_msg(&ClientMsg::Bye, None).await
    }

    async fn submit(&mut self, build: impl FnOnce(Tag) -> ClientMsg) -> Result<Tag, ClientError> {
        self.core.usable()?;
        let (tag, msg) = self.core.op(build);
        self.send_msg(&msg, None).await?;
        Ok(tag)
    }

    async fn send_msg(
        &mut self,
        msg: &ClientMsg,
        fd: Option<BorrowedFd<'_>>,
    ) -> Result<(), ClientError> {
        self.core.encode(msg)?;
        let r = sock::send_frame_async(&self.stream, &self.core.out, fd)
            .await
            .map_err(ClientError::from);
        self.core.track(r)
    }

    async fn request(
        &mut self,
        msg: &ClientMsg,
        fd: Option<BorrowedFd<'_>>,
    ) -> Result<DaemonMsg, ClientError> {
        self.core.usable()?;
        self.send_msg(msg, fd).await?;
        let deadline = self.reply_timeout.map(|t| Instant::now() + t);
        self.reply(deadline).await
    }

    /// Waits for the next reply by `deadline`, keeping events.
    async fn reply(&mut self, deadline: Option<Instant>) -> Result<DaemonMsg, ClientError> {
        let r = loop {
            match self.recv(deadline).await {
                Ok(m) => match self.core.route(m) {
                    Routed::Event => {}
                    Routed::Reply(reply) => break Ok(reply),
                },
                Err(e) => break Err(e),
            }
        };
        if r.is_err() {
            self.core.broken = true;
        }
        r
    }

    async fn wait(
        &mut self,
        tag: Option<Tag>,
        timeout: Option<Duration>,
    ) -> Result<Event, ClientError> {
        self.wait_for(timeout, |core| core.take_event(tag)).await
    }

    /// Reads frames until `take` finds what the caller waits for (an
    /// operation's event, a captured frame), by `timeout`.
    async fn wait_for<T>(
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
            let m = match self.recv(deadline).await {
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
    async fn recv(&mut self, deadline: Option<Instant>) -> Result<DaemonMsg, ClientError> {
        match deadline {
            None => self.recv_frame().await,
            Some(d) => match timeout_at(d, self.recv_frame()).await {
                Ok(r) => r,
                Err(_) => Err(ClientError::Timeout),
            },
        }
    }

    /// Cancel-safe: bytes read stay in the reader.
    async fn recv_frame(&mut self) -> Result<DaemonMsg, ClientError> {
        let f = sock::recv_frame_async::<DaemonMsg>(&self.stream, &mut self.reader).await?;
        Ok(f.msg)
    }
}

impl AsFd for AsyncClient {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }
}
