//! The daemon's control socket: applications speak the
//! `uet-api` protocol on a local Unix socket; this module maps it onto the
//! datapath.
//!
//! Threads: one reader per client (blocking `recvmsg`, fds included) feeds
//! the control loop through a channel; the control loop (the daemon's main
//! thread) selects over client messages and worker outputs, owns every
//! piece of client state, and writes replies (with a send timeout: a client
//! that stops reading is disconnected rather than stalling everyone).
//!
//! Isolation: a client is granted a job by the daemon's configuration and a
//! `pid_on_fep` of its own; it can only use handles it registered, and its
//! operations may only address regions of its own job (`NotYours`).
//! Registered memory is the client's memfd mapped `MAP_SHARED` — after
//! `check_region_fd` made sure it is sealed against shrinking, so a client
//! cannot SIGBUS the daemon. When a client goes (Bye, disconnect, crash,
//! protocol error) its remote registrations are withdrawn at once
//! (generation bump: stale keys fail with BAD_GENERATION) and so are its
//! local buffers, so its operations in flight fail cleanly; completions
//! still arriving for it are dropped.
//!
//! Limits (`Config`'s `api_*` fields; defaults there): connections in all
//! (`api_max_clients`) and per uid (`api_max_clients_per_uid`, below the
//! former so that one uid cannot take every slot); a connection that does
//! not say `Hello` within `api_hello_timeout_ms` is closed, and at either
//! connection limit a new connection replaces the oldest one (of its uid,
//! or of anyone at the overall limit) still waiting for its `Hello` — so
//! idle connections cannot lock out other users, nor, for long, their own
//! uid. A reader thread runs per admitted connection only. Per client,
//! registrations (`api_max_registrations`) and registered bytes
//! (`api_max_registered_bytes`, remote and local regions together) are
//! capped, checked before the descriptor is mapped. Refusals are
//! `Error{OverLimit}` naming the limit.
//!
//! Capture (`uet capture`): frames carry every job's data, so only a
//! client whose `SO_PEERCRED` uid is 0 or the daemon's own may capture
//! (others get `Refused`). One capture runs per daemon at a time; a second
//! client asking meanwhile gets `Busy` (the workers' capture path stays a
//! single switch and queue). The control loop streams the frames to the
//! capturing client as they come and ends the capture on its count, its
//! duration, `CaptureStop`, the client leaving, or shutdown; everyone else
//! is served as usual meanwhile.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, select};
use uet_api::proto::MIN_PROTOCOL_VERSION;
use uet_api::proto::{
    CaptureEnd, CaptureEndReason, CaptureSpec, ClientMsg, DaemonMsg, FrameReader, MAX_SNAPLEN,
};
use uet_api::ring::{RingSizes, ServerRing};
use uet_api::sock::{RecvError, peer_credentials, recv_frame, send_msg};
use uet_api::{Access, Completion, ErrorCode, Handle, PROTOCOL_VERSION, Status, Tag};
use uet_ses::{
    LocalBuf, LocalRegion, MemoryKey, OpError, Operation, RecvBuffer, RecvKind, RecvSpec,
    RegionAddr, RegionSpec, RemoteAddr, TargetEvent,
};
use uet_wire::{JobId, PidOnFep, ResourceIndex, RiGeneration};

use crate::capture::{CapturedFrame, Started};
use crate::daemon::Daemon;
use crate::mem::SharedRegion;
use crate::sys::eventfd::EventFd;
use crate::worker::{Command, Output, RingAttachment};

/// Configuration of the control socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlConfig {
    /// Socket path.
    pub path: PathBuf,
    /// The job every client is granted.
    pub job: u32,
    /// Most operations one client may have in flight.
    pub max_in_flight: usize,
    /// Most connections at once, all uids together.
    pub max_clients: usize,
    /// Most connections of one uid at once.
    pub max_clients_per_uid: usize,
    /// How long a new connection has to say `Hello`.
    pub hello_timeout: Duration,
    /// Most regions one client holds registered (remote and local).
    pub max_registrations: usize,
    /// Most bytes one client holds registered (remote and local).
    pub max_registered_bytes: u64,
}

impl ControlConfig {
    /// The defaults of [`Config`](crate::config::Config) for `path`, and
    /// 4096 operations in flight per client.
    pub fn new(path: PathBuf) -> Self {
        Self::of(&crate::config::Config {
            socket: path,
            ..crate::config::Config::default()
        })
    }

    /// The control socket `cfg` describes.
    pub fn of(cfg: &crate::config::Config) -> Self {
        Self {
            path: cfg.socket.clone(),
            job: cfg.api_job,
            max_in_flight: 4096,
            max_clients: cfg.api_max_clients,
            max_clients_per_uid: cfg.api_max_clients_per_uid,
            hello_timeout: Duration::from_millis(cfg.api_hello_timeout_ms),
            max_registrations: cfg.api_max_registrations,
            max_registered_bytes: cfg.api_max_registered_bytes.0,
        }
    }
}

type ClientId = u64;

/// Builds an operation once its local buffer handle is known.
type BuildOp = Box<dyn Fn(LocalBuf) -> Operation>;

enum Ev {
    Connected(ClientId, UnixStream, u32),
    Msg(ClientId, ClientMsg, Option<OwnedFd>),
    Gone(ClientId, String),
}

/// A client's region registered for remote access (the endpoints hold
/// the mapping).
struct Remote {
    addr: RegionAddr,
    len: u64,
}

struct Local {
    mem: SharedRegion,
    per_worker: Vec<LocalRegion>,
}

struct Client {
    stream: UnixStream,
    uid: u32,
    name: String,
    pid: Option<u16>,
    next_handle: u32,
    next_ri: u16,
    remotes: HashMap<u32, Remote>,
    locals: HashMap<u32, Local>,
    /// Bytes of `remotes` and `locals` together.
    registered_bytes: u64,
    in_flight: usize,
    closing: bool,
    /// The protocol version agreed in `Hello`.
    version: u16,
    /// The client's ring: its id and serving worker.
    ring: Option<(u64, usize)>,
}

/// What a daemon tag stands for.
enum Pending {
    Op { client: ClientId, tag: Tag },
    Recv { client: ClientId, tag: Tag },
}

/// The running capture.
struct ActiveCapture {
    client: ClientId,
    started: Started,
    max_frames: Option<u64>,
    deadline: Option<Instant>,
    frames: u64,
}

/// The control loop's state.
struct Control {
    cfg: ControlConfig,
    clients: HashMap<ClientId, Client>,
    pending: HashMap<u64, Pending>,
    pids_in_use: Vec<bool>,
    /// The daemon's effective uid (who, besides root, may capture).
    daemon_uid: u32,
    capture: Option<ActiveCapture>,
    /// Connections yet to say `Hello`, oldest first, with the time they
    /// must have said it by. Entries of clients that said it or left are
    /// skipped when met (every entry leaves by its deadline, so the queue
    /// holds at most the connections of one timeout's span).
    waiting: VecDeque<(Instant, ClientId)>,
    /// Where reader threads of admitted connections send their events.
    events: Sender<Ev>,
    /// The last ring id handed out.
    next_ring: u64,
    /// Rings open now (at most `worker::MAX_RINGS`).
    rings_open: usize,
}

/// Whether a peer of uid `peer` may capture on a daemon running as
/// `daemon`: root, or the daemon's own user.
pub fn capture_permitted(peer: u32, daemon: u32) -> bool {
    peer == 0 || peer == daemon
}

/// Why the control socket could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// Another live daemon serves the socket path.
    #[error("another daemon serves {}", .0.display())]
    InUse(PathBuf),
    /// A file-system or socket call failed while doing what the message
    /// says.
    #[error("{doing}")]
    Io {
        /// What was being done.
        doing: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
}

/// Names what a failing call was doing.
fn doing(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ControlError {
    let doing = what.into();
    move |source| ControlError::Io { doing, source }
}

/// How long the control loop waits for anything before looking at the
/// capture deadline and the stop flag again.
const TICK: Duration = Duration::from_millis(100);

/// Binds the socket (0660; a stale socket file is replaced) and serves until
/// `stop` is set. Worker outputs not meant for clients go to `other`.
pub fn serve(
    daemon: &mut Daemon,
    cfg: ControlConfig,
    stop: &AtomicBool,
    mut other: impl FnMut(&Daemon, &Output),
) -> Result<(), ControlError> {
    let listener = bind(&cfg.path)?;
    let (tx, rx) = crossbeam_channel::unbounded();
    let accept_stop = Arc::new(AtomicBool::new(false));
    {
        let l = listener
            .try_clone()
            .map_err(doing("cloning the control socket"))?;
        let s = Arc::clone(&accept_stop);
        let tx = tx.clone();
        std::thread::Builder::new()
            .name("uet-accept".into())
            .spawn(move || accept_loop(&l, &tx, &s))
            .map_err(doing("starting the accept thread"))?;
    }
    tracing::info!(path = %cfg.path.display(), "control socket ready");
    let mut c = Control {
        pids_in_use: vec![false; 1 << 12],
        cfg,
        clients: HashMap::new(),
        pending: HashMap::new(),
        daemon_uid: crate::sys::cred::effective_uid(),
        capture: None,
        waiting: VecDeque::new(),
        events: tx,
        next_ring: 0,
        rings_open: 0,
    };
    // pid 0 is the daemon's own (its exposed regions).
    c.pids_in_use[0] = true;
    let outputs = daemon.outputs().clone();
    let doorbell = daemon.capture().doorbell().clone();
    while !stop.load(Ordering::Relaxed) {
        let tick = c
            .capture
            .as_ref()
            .and_then(|a| a.deadline)
            .map_or(TICK, |d| {
                d.saturating_duration_since(Instant::now()).min(TICK)
            });
        select! {
            recv(rx) -> ev => if let Ok(ev) = ev { c.on_event(daemon, ev) },
            recv(outputs) -> o => if let Ok((_, o)) = o
                && !c.on_output(daemon, &o)
            {
                other(daemon, &o);
            },
            recv(doorbell) -> _ => {},
            default(tick) => {}
        }
        // Captured frames come in batches: a worker rings once per batch,
        // and what is left of one is collected here at the next tick.
        while let Some(f) = daemon.capture().pop() {
            c.on_frame(daemon, f);
        }
        if c.capture
            .as_ref()
            .and_then(|a| a.deadline)
            .is_some_and(|d| Instant::now() >= d)
        {
            c.end_capture(daemon, CaptureEndReason::Duration);
        }
        c.close_silent(daemon, Instant::now());
        daemon.reload_keys_if_asked();
    }
    c.end_capture(daemon, CaptureEndReason::Shutdown);
    accept_stop.store(true, Ordering::Relaxed);
    // Unblock accept() with a connection of our own, then remove the file.
    let _ = UnixStream::connect(&c.cfg.path);
    let ids: Vec<ClientId> = c.clients.keys().copied().collect();
    for id in ids {
        c.drop_client(daemon, id, "daemon shutting down");
    }
    let _ = std::fs::remove_file(&c.cfg.path);
    Ok(())
}

fn bind(path: &Path) -> Result<UnixListener, ControlError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(doing(format!("creating {}", dir.display())))?;
    }
    if path.exists() {
        // A live daemon answers; a stale file from a crashed one does not.
        if UnixStream::connect(path).is_ok() {
            return Err(ControlError::InUse(path.to_owned()));
        }
        std::fs::remove_file(path).map_err(doing(format!("removing stale {}", path.display())))?;
    }
    let l = UnixListener::bind(path).map_err(doing(format!("binding {}", path.display())))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
        .map_err(doing(format!("setting the mode of {}", path.display())))?;
    Ok(l)
}

fn accept_loop(l: &UnixListener, tx: &Sender<Ev>, stop: &AtomicBool) {
    let mut next: ClientId = 1;
    for conn in l.incoming() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(stream) = conn else { continue };
        let uid = match peer_credentials(&stream) {
            Ok(c) => c.uid,
            Err(e) => {
                tracing::warn!("no peer credentials: {e}");
                continue;
            }
        };
        let id = next;
        next += 1;
        let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
        // The control loop admits it (or not) and starts its reader.
        if tx.send(Ev::Connected(id, stream, uid)).is_err() {
            return;
        }
    }
}

fn read_loop(id: ClientId, s: &UnixStream, tx: &Sender<Ev>) {
    let mut reader = FrameReader::new();
    loop {
        match recv_frame::<ClientMsg>(s, &mut reader) {
            Ok(r) => {
                let bye = matches!(r.msg, ClientMsg::Bye);
                if tx.send(Ev::Msg(id, r.msg, r.fd)).is_err() || bye {
                    return;
                }
            }
            Err(e) => {
                let why = match &e {
                    RecvError::Closed => "disconnected".to_owned(),
                    e => e.to_string(),
                };
                // A malformed frame gets its error before the close.
                if let RecvError::Decode(d) = &e {
                    let _ = send_msg(
                        s,
                        &DaemonMsg::Error {
                            code: ErrorCode::Malformed,
                            message: d.to_string(),
                        },
                        None,
                    );
                }
                let _ = tx.send(Ev::Gone(id, why));
                return;
            }
        }
    }
}

fn err(code: ErrorCode, message: impl Into<String>) -> DaemonMsg {
    DaemonMsg::Error {
        code,
        message: message.into(),
    }
}

fn local_err(tag: Tag, code: ErrorCode, message: impl Into<String>) -> DaemonMsg {
    DaemonMsg::Completion(Completion {
        tag,
        status: Status::Local {
            code,
            message: message.into(),
        },
        bytes: 0,
    })
}

impl Control {
    fn send(&mut self, daemon: &Daemon, id: ClientId, msg: &DaemonMsg) {
        let Some(c) = self.clients.get(&id) else {
            return;
        };
        if let Err(e) = send_msg(&c.stream, msg, None) {
            let why = format!("write failed: {e}");
            self.drop_client(daemon, id, &why);
        }
    }

    fn on_event(&mut self, daemon: &mut Daemon, ev: Ev) {
        match ev {
            Ev::Connected(id, stream, uid) => {
                if let Err(why) = self.make_room(daemon, uid) {
                    // Not a warning: a flood of attempts would flood the log.
                    tracing::debug!(uid, "connection refused: {why}");
                    let _ = send_msg(&stream, &err(ErrorCode::OverLimit, why), None);
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                    return;
                }
                let reader = match stream.try_clone() {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::warn!("connection dropped: {e}");
                        return;
                    }
                };
                let tx = self.events.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("uet-client-{id}"))
                    .spawn(move || read_loop(id, &reader, &tx));
                if let Err(e) = spawned {
                    tracing::warn!("connection dropped: no reader thread: {e}");
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                    return;
                }
                self.waiting
                    .push_back((Instant::now() + self.cfg.hello_timeout, id));
                self.clients.insert(
                    id,
                    Client {
                        stream,
                        uid,
                        name: String::new(),
                        pid: None,
                        next_handle: 1,
                        next_ri: 1,
                        remotes: HashMap::new(),
                        locals: HashMap::new(),
                        registered_bytes: 0,
                        in_flight: 0,
                        closing: false,
                        version: 0,
                        ring: None,
                    },
                );
            }
            Ev::Gone(id, why) => self.drop_client(daemon, id, &why),
            Ev::Msg(id, msg, fd) => self.on_msg(daemon, id, msg, fd),
        }
    }

    /// Makes room for a new connection of `uid` within the connection
    /// limits, closing the oldest connection still waiting for its
    /// `Hello` (of `uid` at the per-uid limit, of anyone at the overall
    /// limit) where that is what stands in the way; or says which limit
    /// refuses it.
    fn make_room(&mut self, daemon: &Daemon, uid: u32) -> Result<(), String> {
        let of_uid = self.clients.values().filter(|c| c.uid == uid).count();
        if of_uid >= self.cfg.max_clients_per_uid {
            let Some(old) = self.oldest_waiting(|c| c.uid == uid) else {
                return Err(format!(
                    "uid {uid} has {of_uid} connections, the most api_max_clients_per_uid allows"
                ));
            };
            self.fatal(
                daemon,
                old,
                ErrorCode::OverLimit,
                format!("replaced by a newer connection of uid {uid} before saying Hello"),
            );
        }
        if self.clients.len() >= self.cfg.max_clients {
            let Some(old) = self.oldest_waiting(|_| true) else {
                return Err(format!(
                    "{} connections, the most api_max_clients allows",
                    self.clients.len()
                ));
            };
            self.fatal(
                daemon,
                old,
                ErrorCode::OverLimit,
                "replaced by a newer connection before saying Hello",
            );
        }
        Ok(())
    }

    /// The oldest connection still waiting for its `Hello` that `pick`
    /// picks.
    fn oldest_waiting(&self, pick: impl Fn(&Client) -> bool) -> Option<ClientId> {
        self.waiting.iter().find_map(|&(_, id)| {
            self.clients
                .get(&id)
                .filter(|c| c.pid.is_none() && pick(c))
                .map(|_| id)
        })
    }

    /// Closes the connections that did not say `Hello` by their deadline.
    fn close_silent(&mut self, daemon: &Daemon, now: Instant) {
        while let Some(&(deadline, id)) = self.waiting.front() {
            let waits = self.clients.get(&id).is_some_and(|c| c.pid.is_none());
            if waits && deadline > now {
                return;
            }
            self.waiting.pop_front();
            if waits {
                let ms = self.cfg.hello_timeout.as_millis();
                self.fatal(
                    daemon,
                    id,
                    ErrorCode::OverLimit,
                    format!("no Hello within {ms} ms (api_hello_timeout_ms)"),
                );
            }
        }
    }

    fn on_msg(&mut self, daemon: &mut Daemon, id: ClientId, msg: ClientMsg, fd: Option<OwnedFd>) {
        let Some(client) = self.clients.get(&id) else {
            return;
        };
        if client.closing {
            return;
        }
        let hello_done = client.pid.is_some();
        match msg {
            ClientMsg::Hello { version, name } => {
                if hello_done {
                    self.fatal(daemon, id, ErrorCode::OutOfSequence, "a second Hello");
                    return;
                }
                if !(MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&version) {
                    self.fatal(
                        daemon,
                        id,
                        ErrorCode::VersionMismatch,
                        format!(
                            "daemon speaks versions {MIN_PROTOCOL_VERSION}..={PROTOCOL_VERSION}, \
                             client {version}"
                        ),
                    );
                    return;
                }
                let Some(pid) = self.pids_in_use.iter().position(|u| !u) else {
                    self.fatal(daemon, id, ErrorCode::Exhausted, "no pid_on_fep left");
                    return;
                };
                self.pids_in_use[pid] = true;
                let job = self.cfg.job;
                if let Some(c) = self.clients.get_mut(&id) {
                    c.pid = Some(pid as u16);
                    c.name = name;
                    c.version = version;
                    tracing::info!(client = %c.name, uid = c.uid, job, pid, "client connected");
                }
                let reply = DaemonMsg::HelloOk {
                    version,
                    fep: daemon.local(),
                    job,
                    pid: pid as u16,
                };
                self.send(daemon, id, &reply);
            }
            _ if !hello_done => {
                self.fatal(daemon, id, ErrorCode::OutOfSequence, "Hello first");
            }
            ClientMsg::Bye => self.drop_client(daemon, id, "bye"),
            ClientMsg::Register { len, access, key } => {
                let reply = self.register(daemon, id, len, access, key, fd);
                self.send(daemon, id, &reply);
            }
            ClientMsg::RegisterLocal { len } => {
                let reply = self.register_local(daemon, id, len, fd);
                self.send(daemon, id, &reply);
            }
            ClientMsg::Deregister { handle } => {
                let reply = self.deregister(daemon, id, handle);
                self.send(daemon, id, &reply);
            }
            ClientMsg::Stats | ClientMsg::StatsStream => {
                let streamed = matches!(msg, ClientMsg::StatsStream);
                for r in
                    crate::stats::replies(&daemon.stats(), daemon.neigh_counts().as_ref(), streamed)
                {
                    self.send(daemon, id, &r);
                }
            }
            ClientMsg::Capture(spec) => {
                let reply = self.start_capture(daemon, id, &spec);
                self.send(daemon, id, &reply);
            }
            ClientMsg::RingOpen {
                sq_entries,
                cq_entries,
                fep,
            } => match self.open_ring(daemon, id, sq_entries, cq_entries, fep, fd) {
                Ok(doorbell) => {
                    if let Some(c) = self.clients.get(&id)
                        && let Err(e) =
                            send_msg(&c.stream, &DaemonMsg::RingOpened, Some(doorbell.as_fd()))
                    {
                        let why = format!("write failed: {e}");
                        self.drop_client(daemon, id, &why);
                    }
                }
                Err(reply) => self.send(daemon, id, &reply),
            },
            ClientMsg::CaptureStop => {
                if self.capture.as_ref().is_some_and(|a| a.client == id) {
                    self.end_capture(daemon, CaptureEndReason::Stopped);
                }
            }
            op => self.operation(daemon, id, op),
        }
    }

    /// Starts a capture for client `id`, or says why not.
    fn start_capture(&mut self, daemon: &Daemon, id: ClientId, spec: &CaptureSpec) -> DaemonMsg {
        let Some(c) = self.clients.get(&id) else {
            return err(ErrorCode::Internal, "no client");
        };
        if !capture_permitted(c.uid, self.daemon_uid) {
            return err(
                ErrorCode::Refused,
                format!(
                    "a capture shows every job's frames: only root or uid {} (the daemon's) \
                     may capture, not uid {}",
                    self.daemon_uid, c.uid
                ),
            );
        }
        if let Some(a) = &self.capture {
            let who = self
                .clients
                .get(&a.client)
                .map_or("another client", |o| o.name.as_str());
            return err(
                ErrorCode::Busy,
                format!("busy: a capture is already running (for {who}); one at a time"),
            );
        }
        if spec.snaplen == 0 {
            return err(ErrorCode::BadLength, "the snap length must be at least 1");
        }
        if spec.max_frames == Some(0) || spec.max_duration_ms == Some(0) {
            return err(
                ErrorCode::BadLength,
                "a frame count or duration limit must be positive",
            );
        }
        let snaplen = spec.snaplen.min(MAX_SNAPLEN);
        let deadline = spec.max_duration_ms.map(|ms| {
            let d = Duration::from_millis(ms);
            let now = Instant::now();
            // A duration past what the clock can hold is no limit.
            now.checked_add(d)
                .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400))
        });
        let started = daemon.capture().start(spec.direction, snaplen);
        tracing::info!(client = %c.name, uid = c.uid, ?spec, "capture started");
        self.capture = Some(ActiveCapture {
            client: id,
            started,
            max_frames: spec.max_frames,
            deadline,
            frames: 0,
        });
        DaemonMsg::CaptureStarted { snaplen }
    }

    /// Streams a captured frame to the capturing client.
    fn on_frame(&mut self, daemon: &Daemon, f: CapturedFrame) {
        let Some(a) = &mut self.capture else {
            daemon.capture().recycle(f.data);
            return;
        };
        if f.generation != a.started.generation {
            daemon.capture().recycle(f.data);
            return;
        }
        a.frames += 1;
        let client = a.client;
        let done = a.max_frames.is_some_and(|m| a.frames >= m);
        let msg = DaemonMsg::CaptureFrame(uet_api::CapturedFrame {
            timestamp_ns: a.started.wall_ns(f.mono_ns),
            direction: f.direction,
            orig_len: f.orig_len,
            data: f.data,
        });
        // A client that cannot keep up is dropped by the send timeout (and
        // its capture with it); frames the queue cannot hold meanwhile are
        // counted as drops by the workers.
        self.send(daemon, client, &msg);
        if let DaemonMsg::CaptureFrame(cf) = msg {
            daemon.capture().recycle(cf.data);
        }
        if done {
            self.end_capture(daemon, CaptureEndReason::Count);
        }
    }

    /// Ends the running capture (if any): stops the workers, delivers the
    /// frames they queued before that (unless the count is reached) and
    /// sends `CaptureEnd`.
    fn end_capture(&mut self, daemon: &Daemon, reason: CaptureEndReason) {
        let Some(mut a) = self.capture.take() else {
            return;
        };
        let cap = daemon.capture();
        cap.stop();
        let full = |a: &ActiveCapture| a.max_frames.is_some_and(|m| a.frames >= m);
        while !full(&a)
            && let Some(f) = cap.pop()
        {
            if f.generation != a.started.generation {
                cap.recycle(f.data);
                continue;
            }
            a.frames += 1;
            let msg = DaemonMsg::CaptureFrame(uet_api::CapturedFrame {
                timestamp_ns: a.started.wall_ns(f.mono_ns),
                direction: f.direction,
                orig_len: f.orig_len,
                data: f.data,
            });
            self.send(daemon, a.client, &msg);
            if let DaemonMsg::CaptureFrame(cf) = msg {
                cap.recycle(cf.data);
            }
        }
        let end = CaptureEnd {
            frames: a.frames,
            dropped: cap.dropped(),
            reason,
        };
        tracing::info!(client = a.client, frames = end.frames, dropped = end.dropped, %reason, "capture ended");
        self.send(daemon, a.client, &DaemonMsg::CaptureEnd(end));
    }

    /// Sends an error that ends the connection, and ends it.
    fn fatal(&mut self, daemon: &Daemon, id: ClientId, code: ErrorCode, msg: impl Into<String>) {
        let msg = msg.into();
        if let Some(c) = self.clients.get(&id) {
            let _ = send_msg(&c.stream, &err(code, msg.clone()), None);
        }
        self.drop_client(daemon, id, &msg);
    }

    /// Whether client `id` may register `len` more bytes in one more
    /// region; the refusal names the limit.
    fn within_limits(&self, id: ClientId, len: u64) -> Result<(), DaemonMsg> {
        let Some(c) = self.clients.get(&id) else {
            return Err(err(ErrorCode::Internal, "no client"));
        };
        let regions = c.remotes.len() + c.locals.len();
        if regions >= self.cfg.max_registrations {
            return Err(err(
                ErrorCode::OverLimit,
                format!(
                    "{regions} regions registered, the most api_max_registrations allows per client"
                ),
            ));
        }
        let max = self.cfg.max_registered_bytes;
        if len > max - c.registered_bytes.min(max) {
            return Err(err(
                ErrorCode::OverLimit,
                format!(
                    "{len} bytes more on {} registered would pass api_max_registered_bytes \
                     ({max} per client)",
                    c.registered_bytes
                ),
            ));
        }
        Ok(())
    }

    fn register(
        &mut self,
        daemon: &mut Daemon,
        id: ClientId,
        len: u64,
        access: Access,
        key: Option<u64>,
        fd: Option<OwnedFd>,
    ) -> DaemonMsg {
        let Some(fd) = fd else {
            return err(ErrorCode::BadFd, "Register needs a memfd");
        };
        if let Err(refusal) = self.within_limits(id, len) {
            return refusal;
        }
        if let Err(e) = uet_api::region::check_region_fd(&fd, len) {
            return err(e.code(), e.to_string());
        }
        let Ok(ulen) = usize::try_from(len) else {
            return err(ErrorCode::BadLength, "too long");
        };
        let mem = match SharedRegion::from_fd(fd.as_fd(), ulen) {
            Ok(m) => m,
            Err(e) => return err(ErrorCode::BadFd, format!("mapping: {e}")),
        };
        let job = self.cfg.job;
        let Some(c) = self.clients.get_mut(&id) else {
            return err(ErrorCode::Internal, "no client");
        };
        let pid = c.pid.unwrap_or(0);
        if c.next_ri >= 1 << 12 {
            return err(ErrorCode::Exhausted, "no resource index left");
        }
        let ri = c.next_ri;
        let (Ok(j), Ok(p), Ok(r)) = (JobId::new(job), PidOnFep::new(pid), ResourceIndex::new(ri))
        else {
            return err(ErrorCode::Internal, "address out of range");
        };
        let addr = RegionAddr::new(j, p, r);
        // A key the daemon picks carries the RI and the generation the
        // region gets (`MemoryKey::compose`), so that a libfabric peer
        // holding only the key can address the region.
        let (key, composed) = match key {
            Some(k) => (k, None),
            None => match daemon.next_generation(addr) {
                Ok(g) => (MemoryKey::compose(r, g, random_key(id, ri)).0, Some(g)),
                Err(e) => return err(ErrorCode::Internal, format!("{e:#}")),
            },
        };
        match daemon.register(RegionSpec::new(addr, MemoryKey(key), access), mem) {
            Ok(reg) if composed.is_some_and(|g| g != reg.generation) => {
                // Only the control thread registers, so this does not
                // happen; never hand out a key that lies about it.
                let _ = daemon.deregister(addr);
                err(
                    ErrorCode::Internal,
                    "the generation moved during registration",
                )
            }
            Ok(reg) => {
                let handle = c.next_handle;
                c.next_handle += 1;
                c.next_ri += 1;
                c.registered_bytes += len;
                c.remotes.insert(handle, Remote { addr, len });
                DaemonMsg::Registered {
                    handle: Handle(handle),
                    job,
                    pid,
                    ri,
                    key,
                    generation: reg.generation.get(),
                }
            }
            Err(e) => err(ErrorCode::Refused, format!("{e:#}")),
        }
    }

    fn register_local(
        &mut self,
        daemon: &Daemon,
        id: ClientId,
        len: u64,
        fd: Option<OwnedFd>,
    ) -> DaemonMsg {
        let Some(fd) = fd else {
            return err(ErrorCode::BadFd, "RegisterLocal needs a memfd");
        };
        if let Err(refusal) = self.within_limits(id, len) {
            return refusal;
        }
        if let Err(e) = uet_api::region::check_region_fd(&fd, len) {
            return err(e.code(), e.to_string());
        }
        let Ok(ulen) = usize::try_from(len) else {
            return err(ErrorCode::BadLength, "too long");
        };
        let mem = match SharedRegion::from_fd(fd.as_fd(), ulen) {
            Ok(m) => m,
            Err(e) => return err(ErrorCode::BadFd, format!("mapping: {e}")),
        };
        let per_worker = match daemon.register_local(&mem) {
            Ok(v) => v,
            Err(e) => return err(ErrorCode::Internal, format!("{e:#}")),
        };
        let Some(c) = self.clients.get_mut(&id) else {
            return err(ErrorCode::Internal, "no client");
        };
        let handle = c.next_handle;
        c.next_handle += 1;
        c.registered_bytes += len;
        // Before the reply: the client may use the handle in its ring as
        // soon as it has it (the worker drains its inbox before it reads
        // entries it saw).
        if let Some((ring, w)) = c.ring {
            daemon.send_to(
                w,
                Command::RingHandle {
                    ring,
                    handle,
                    local: Some((per_worker[w], len)),
                },
            );
        }
        c.locals.insert(handle, Local { mem, per_worker });
        DaemonMsg::LocalRegistered {
            handle: Handle(handle),
        }
    }

    fn deregister(&mut self, daemon: &Daemon, id: ClientId, handle: Handle) -> DaemonMsg {
        let Some(c) = self.clients.get_mut(&id) else {
            return err(ErrorCode::Internal, "no client");
        };
        if let Some(r) = c.remotes.remove(&handle.0) {
            c.registered_bytes -= r.len;
            return match daemon.deregister(r.addr) {
                Ok(()) => DaemonMsg::Deregistered { handle },
                Err(e) => err(ErrorCode::Internal, format!("{e:#}")),
            };
        }
        if let Some(l) = c.locals.remove(&handle.0) {
            c.registered_bytes -= l.mem.len() as u64;
            if let Some((ring, w)) = c.ring {
                daemon.send_to(
                    w,
                    Command::RingHandle {
                        ring,
                        handle: handle.0,
                        local: None,
                    },
                );
            }
            // Operations still using it fail cleanly (see
            // Endpoint::deregister_local).
            daemon.deregister_local(&l.per_worker);
            return DaemonMsg::Deregistered { handle };
        }
        err(ErrorCode::UnknownHandle, format!("no handle {}", handle.0))
    }

    /// The local buffer `handle` of client `id`, checked for
    /// `offset + len`: its per-worker handles.
    fn local_of(
        &self,
        id: ClientId,
        handle: Handle,
        offset: u64,
        len: u64,
    ) -> Result<Vec<LocalRegion>, (ErrorCode, String)> {
        let c = self
            .clients
            .get(&id)
            .ok_or_else(|| (ErrorCode::Internal, "no client".into()))?;
        let l = c.locals.get(&handle.0).ok_or_else(|| {
            (
                ErrorCode::UnknownHandle,
                format!("no local handle {}", handle.0),
            )
        })?;
        let end = offset
            .checked_add(len)
            .ok_or_else(|| (ErrorCode::BadLength, "offset + length overflows".into()))?;
        if end > l.mem.len() as u64 {
            return Err((
                ErrorCode::BadLength,
                format!("{end} > local buffer of {}", l.mem.len()),
            ));
        }
        Ok(l.per_worker.clone())
    }

    fn operation(&mut self, daemon: &mut Daemon, id: ClientId, op: ClientMsg) {
        let job = self.cfg.job;
        if let ClientMsg::PostRecv {
            tag,
            local,
            len,
            tagged,
        } = op
        {
            self.post_recv(daemon, id, tag, local, len, tagged);
            return;
        }
        let (tag, local, len, dst, build) = match build_op(op, job) {
            Ok(Some(b)) => b,
            Ok(None) => return,
            Err((tag, code, m)) => {
                self.send(daemon, id, &local_err(tag, code, m));
                return;
            }
        };
        let in_flight = self.clients.get(&id).map_or(0, |c| c.in_flight);
        if in_flight >= self.cfg.max_in_flight {
            self.send(
                daemon,
                id,
                &local_err(tag, ErrorCode::Exhausted, "too many operations in flight"),
            );
            return;
        }
        let per_worker = match self.local_of(id, local.handle, local.offset, u64::from(len)) {
            Ok(v) => v,
            Err((code, m)) => {
                self.send(daemon, id, &local_err(tag, code, m));
                return;
            }
        };
        let region = per_worker[daemon.owner(dst)];
        let t = daemon.next_tag();
        self.pending.insert(t, Pending::Op { client: id, tag });
        if let Some(c) = self.clients.get_mut(&id) {
            c.in_flight += 1;
        }
        daemon.submit(t, dst, build(LocalBuf::new(region, local.offset)));
    }

    fn post_recv(
        &mut self,
        daemon: &mut Daemon,
        id: ClientId,
        tag: Tag,
        local: uet_api::LocalRef,
        len: u32,
        tagged: Option<(u64, u64)>,
    ) {
        let Some(c) = self.clients.get(&id) else {
            return;
        };
        let Some(r) = c.remotes.get(&local.handle.0) else {
            self.send(
                daemon,
                id,
                &local_err(
                    tag,
                    ErrorCode::UnknownHandle,
                    "a receive buffer is a registered region (Access::RECV)",
                ),
            );
            return;
        };
        let spec = RecvSpec {
            job: r.addr.job,
            pid: r.addr.pid,
            buffer: RecvBuffer {
                ri: r.addr.ri,
                offset: local.offset,
                len: u64::from(len),
            },
            kind: match tagged {
                None => RecvKind::Untagged,
                Some((m, i)) => RecvKind::Tagged {
                    match_bits: uet_ses::MatchBits(m),
                    ignore_bits: uet_ses::MatchBits(i),
                },
            },
            from: None,
        };
        let t = daemon.next_tag();
        match daemon.post_recv(t, spec) {
            Ok(()) => {
                self.pending.insert(t, Pending::Recv { client: id, tag });
                if let Some(c) = self.clients.get_mut(&id) {
                    c.in_flight += 1;
                }
            }
            Err(e) => self.send(
                daemon,
                id,
                &local_err(tag, ErrorCode::Refused, format!("{e:#}")),
            ),
        }
    }

    /// Handles a worker output addressed to a client; false when it was
    /// not one.
    fn on_output(&mut self, daemon: &Daemon, o: &Output) -> bool {
        match o {
            Output::Completed { tag, completion } => {
                let Some(Pending::Op { client, tag: ctag }) = self.pending.remove(tag) else {
                    return false;
                };
                let status = status_of(completion);
                self.finish(
                    daemon,
                    client,
                    &DaemonMsg::Completion(Completion {
                        tag: ctag,
                        status,
                        bytes: completion.modified_length,
                    }),
                );
                true
            }
            Output::Rejected { tag, error } => {
                let Some(Pending::Op { client, tag: ctag }) = self.pending.remove(tag) else {
                    return false;
                };
                self.finish(
                    daemon,
                    client,
                    &local_err(ctag, ErrorCode::Refused, error.to_string()),
                );
                true
            }
            Output::Received { tag, event } => {
                let Some(Pending::Recv { client, tag: ctag }) = self.pending.remove(tag) else {
                    return false;
                };
                let msg = match event.completion.status {
                    Ok(()) => DaemonMsg::RecvCompletion(uet_api::RecvCompletion {
                        tag: ctag,
                        src_fep: event.source.fep.to_ip(),
                        bytes: event.completion.modified_length,
                        message_len: event.message_len,
                        header_data: event.header_data,
                        match_bits: event.match_bits.map(|m| m.0),
                    }),
                    Err(e) => local_err(ctag, ErrorCode::Refused, format!("{e:?}")),
                };
                self.finish(daemon, client, &msg);
                true
            }
            Output::RecvRejected { tag, error } => {
                let Some(Pending::Recv { client, tag: ctag }) = self.pending.remove(tag) else {
                    return false;
                };
                self.finish(
                    daemon,
                    client,
                    &local_err(ctag, ErrorCode::Refused, format!("{error:?}")),
                );
                true
            }
            Output::Target(TargetEvent::WriteWithData(ev)) => {
                let owner = self.clients.iter().find_map(|(id, c)| {
                    c.remotes
                        .iter()
                        .find(|(_, r)| r.addr == ev.region)
                        .map(|(h, _)| (*id, *h))
                });
                let Some((client, handle)) = owner else {
                    return false;
                };
                let msg = DaemonMsg::WriteArrived(uet_api::WriteArrived {
                    handle: Handle(handle),
                    src_fep: ev.source.fep.to_ip(),
                    offset: ev.offset,
                    len: ev.len,
                    header_data: ev.header_data,
                });
                self.send(daemon, client, &msg);
                true
            }
            Output::Target(_) => false,
        }
    }

    /// Delivers an operation's end and releases what a departed client
    /// left behind once its last operation ended.
    fn finish(&mut self, daemon: &Daemon, client: ClientId, msg: &DaemonMsg) {
        if let Some(c) = self.clients.get_mut(&client) {
            c.in_flight = c.in_flight.saturating_sub(1);
            self.send(daemon, client, msg);
        }
    }

    /// Maps client `id`'s ring and hands it to the worker that owns
    /// `fep`; returns the doorbell to pass back, or the refusal.
    fn open_ring(
        &mut self,
        daemon: &Daemon,
        id: ClientId,
        sq: u32,
        cq: u32,
        fep: IpAddr,
        fd: Option<OwnedFd>,
    ) -> Result<Arc<EventFd>, DaemonMsg> {
        let Some(fd) = fd else {
            return Err(err(ErrorCode::BadFd, "RingOpen needs a memfd"));
        };
        let Some(c) = self.clients.get(&id) else {
            return Err(err(ErrorCode::Internal, "no client"));
        };
        if c.version < 2 {
            return Err(err(
                ErrorCode::OutOfSequence,
                "the ring needs protocol version 2 (said in Hello)",
            ));
        }
        if c.ring.is_some() {
            return Err(err(ErrorCode::Busy, "this connection has a ring already"));
        }
        if self.rings_open >= crate::worker::MAX_RINGS {
            return Err(err(
                ErrorCode::OverLimit,
                format!("{} rings open, the most a daemon serves", self.rings_open),
            ));
        }
        let sizes = RingSizes::new(sq, cq).map_err(|m| err(ErrorCode::BadLength, m))?;
        uet_api::region::check_region_fd(&fd, sizes.len() as u64)
            .map_err(|e| err(e.code(), e.to_string()))?;
        let ring = ServerRing::map(&fd, sizes)
            .map_err(|e| err(ErrorCode::BadFd, format!("mapping: {e}")))?;
        let doorbell = Arc::new(
            EventFd::new().map_err(|e| err(ErrorCode::Internal, format!("eventfd: {e}")))?,
        );
        let w = daemon.owner(fep);
        let handles = c
            .locals
            .iter()
            .map(|(h, l)| (*h, l.per_worker[w], l.mem.len() as u64))
            .collect();
        self.next_ring += 1;
        let ring_id = self.next_ring;
        daemon.send_to(
            w,
            Command::RingAttach(Box::new(RingAttachment {
                id: ring_id,
                ring,
                doorbell: Arc::clone(&doorbell),
                job: self.cfg.job,
                workers: daemon.workers(),
                handles,
            })),
        );
        self.rings_open += 1;
        if let Some(c) = self.clients.get_mut(&id) {
            c.ring = Some((ring_id, w));
            tracing::info!(client = %c.name, sq, cq, worker = w, "ring opened");
        }
        Ok(doorbell)
    }

    fn drop_client(&mut self, daemon: &Daemon, id: ClientId, why: &str) {
        let Some(c) = self.clients.remove(&id) else {
            return;
        };
        if self.capture.as_ref().is_some_and(|a| a.client == id) {
            self.capture = None;
            daemon.capture().stop();
            tracing::info!(client = %c.name, id, "capture ended: the client left");
        }
        let _ = c.stream.shutdown(std::net::Shutdown::Both);
        // The ring goes first: nothing more is taken from it, and the
        // operations it started end unreported like the socket's.
        if let Some((ring, w)) = c.ring {
            daemon.send_to(w, Command::RingDetach { ring });
            self.rings_open -= 1;
        }
        let mut processes: Vec<(JobId, PidOnFep)> = Vec::new();
        for r in c.remotes.values() {
            if let Err(e) = daemon.deregister(r.addr) {
                tracing::warn!("deregistering a departed client's region: {e:#}");
            }
            if !processes.contains(&(r.addr.job, r.addr.pid)) {
                processes.push((r.addr.job, r.addr.pid));
            }
        }
        // Its receives go too: the next client given this PIDonFEP would
        // otherwise have its sends matched by receives whose buffers are
        // gone (UNDELIVERABLE).
        for (job, pid) in processes {
            daemon.release_process(job, pid);
        }
        // Withdrawn at once: an operation still in flight fails cleanly
        // (its remaining packets carry nothing the target accepts, a read
        // finds no buffer) and never touches the memory again.
        for l in c.locals.into_values() {
            daemon.deregister_local(&l.per_worker);
        }
        if let Some(pid) = c.pid {
            self.pids_in_use[usize::from(pid)] = false;
        }
        tracing::info!(client = %c.name, id, "client gone: {why}");
    }
}

/// An operation message, checked: its tag, local buffer, length,
/// destination FEP and a builder for the endpoint operation; `Ok(None)` for
/// messages that are not operations; `Err` with the tag and the refusal.
#[allow(clippy::type_complexity)]
fn build_op(
    op: ClientMsg,
    job: u32,
) -> Result<Option<(Tag, uet_api::LocalRef, u32, IpAddr, BuildOp)>, (Tag, ErrorCode, &'static str)>
{
    Ok(Some(match op {
        ClientMsg::Write {
            tag,
            local,
            remote,
            len,
            header_data,
        } => {
            let dst = remote_addr(&remote, job).map_err(|(c, m)| (tag, c, m))?;
            let build: BuildOp = Box::new(move |src| Operation::Write {
                dst,
                src,
                len,
                header_data,
            });
            (tag, local, len, remote.region.fep, build)
        }
        ClientMsg::Read {
            tag,
            local,
            remote,
            len,
        } => {
            let src = remote_addr(&remote, job).map_err(|(c, m)| (tag, c, m))?;
            let build: BuildOp = Box::new(move |dst| Operation::Read { src, dst, len });
            (tag, local, len, remote.region.fep, build)
        }
        ClientMsg::Send {
            tag,
            local,
            dst,
            len,
            header_data,
        } => {
            let addr = peer_addr(&dst, job).map_err(|(c, m)| (tag, c, m))?;
            let build: BuildOp = Box::new(move |src| Operation::Send {
                dst: addr,
                src,
                len,
                header_data,
            });
            (tag, local, len, dst.fep, build)
        }
        ClientMsg::TaggedSend {
            tag,
            local,
            dst,
            len,
            match_bits,
            header_data,
        } => {
            let addr = peer_addr(&dst, job).map_err(|(c, m)| (tag, c, m))?;
            let build: BuildOp = Box::new(move |src| Operation::TaggedSend {
                dst: addr,
                src,
                len,
                match_bits: uet_ses::MatchBits(match_bits),
                header_data,
            });
            (tag, local, len, dst.fep, build)
        }
        _ => return Ok(None),
    }))
}

/// The remote region of an operation, if it is in the client's job.
pub(crate) fn remote_addr(
    r: &uet_api::RemoteRef,
    job: u32,
) -> Result<RemoteAddr, (ErrorCode, &'static str)> {
    if r.region.job != job {
        return Err((ErrorCode::NotYours, "remote region of another job"));
    }
    let bad = || (ErrorCode::Malformed, "bad remote address");
    Ok(RemoteAddr {
        region: RegionAddr::new(
            JobId::new(r.region.job).map_err(|_| bad())?,
            PidOnFep::new(r.region.pid).map_err(|_| bad())?,
            ResourceIndex::new(r.region.ri).map_err(|_| bad())?,
        ),
        generation: RiGeneration::new(r.region.generation).map_err(|_| bad())?,
        key: MemoryKey(r.region.key),
        offset: r.offset,
    })
}

/// The receiving process of a send, if it is in the client's job.
fn peer_addr(p: &uet_api::Peer, job: u32) -> Result<RegionAddr, (ErrorCode, &'static str)> {
    if p.job != job {
        return Err((ErrorCode::NotYours, "peer of another job"));
    }
    let bad = || (ErrorCode::Malformed, "bad peer address");
    Ok(RegionAddr::new(
        JobId::new(p.job).map_err(|_| bad())?,
        PidOnFep::new(p.pid).map_err(|_| bad())?,
        ResourceIndex::new(0).map_err(|_| bad())?,
    ))
}

/// An operation's end as the API reports it (socket and ring alike).
pub(crate) fn status_of(completion: &uet_ses::OpCompletion) -> Status {
    match completion.status {
        Ok(()) => Status::Ok,
        Err(OpError::Remote(rc)) => Status::Remote {
            return_code: rc.code(),
        },
        Err(OpError::Local(e)) => Status::Local {
            code: ErrorCode::BadLength,
            message: format!("{e:?}"),
        },
        Err(OpError::Transport(e)) => Status::Transport {
            code: transport_code(e),
            message: format!("{e:?}"),
        },
        Err(e) => Status::Local {
            code: ErrorCode::Internal,
            message: e.to_string(),
        },
    }
}

fn transport_code(e: uet_pds::PdsError) -> u16 {
    match e {
        uet_pds::PdsError::Nack(c) => u16::from(u8::from(c)),
        _ => 0x100,
    }
}

/// A memory key nobody can guess from the outside (std's hasher keys come
/// from the OS's randomness).
fn random_key(id: ClientId, ri: u16) -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one((id, ri))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_root_or_the_daemons_user_may_capture() {
        // A daemon run by root: only root.
        assert!(capture_permitted(0, 0));
        assert!(!capture_permitted(1000, 0));
        // A daemon run by uid 1000: root and 1000, nobody else.
        assert!(capture_permitted(0, 1000));
        assert!(capture_permitted(1000, 1000));
        assert!(!capture_permitted(1001, 1000));
        assert!(!capture_permitted(65534, 1000));
    }
}
