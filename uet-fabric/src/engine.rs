//! The transport inside the application's process: one sans-IO
//! [`uet_ses::Endpoint`] over one kernel UDP socket (`docs/libfabric.md`
//! "Where the transport runs").
//!
//! A libfabric domain owns one `Engine`: its FEP address, its memory table
//! (`fi_mr_reg`), its PDCs. Calls from the application (a send, a receive, a
//! CQ read) and the progress thread (`FI_PROGRESS_AUTO`) take the engine's
//! lock, feed the endpoint what arrived and what timed out, send what it
//! has to send, and turn its completions and events into CQ entries.
//!
//! Memory: the application's buffers are used in place. A send's or
//! write's payload is read from the caller's buffer when a packet leaves
//! (and again if it is resent), which is why libfabric forbids touching the
//! buffer before the completion; receives and remote writes land straight
//! in the posted buffer or the registered region.

use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::thread::JoinHandle;

use rustc_hash::FxHashMap as HashMap;
use uet_cms::Algorithm;
use uet_pds::{PdsConfig, RxMeta};
use uet_ses::{
    Access, Endpoint, EndpointConfig, FepAddr, InitiatorId, LocalBuf, LocalRegion, MatchBits,
    MemoryKey, OpCompletion, OpError, OpId, Operation, RecvBuffer, RecvEvent, RecvId, RecvKind,
    RecvSpec, RegionAddr, RegionSpec, RegisteredMemory, RemoteAddr, Sender, SubmitError,
    TargetEvent, UnexpectedRef,
};
use uet_wire::encap::nominal_pktsize;
use uet_wire::pds::ReliableMode;
use uet_wire::time::{Duration, Instant};
use uet_wire::{Ecn, EntropyValue, JobId, PidOnFep, ResourceIndex, RiGeneration, TrafficClass};

use crate::addr::Name;
use crate::cq::{Cq, Entry, ErrInfo};
use crate::errors::{self, Errno};

/// UET's UDP port (§1).
pub(crate) const UET_PORT: u16 = 4793;
/// Ports a second, third, … process on the same address binds, in order.
/// Disjoint from the entropy ports uetd sends from (0xc000 up), so a
/// datagram from one of these ports names that process.
pub(crate) const EXTRA_PORTS: std::ops::RangeInclusive<u16> = 4794..=4794 + 1023;
/// Peers at extra ports tracked at once (each gets an internal address).
const MAX_PORT_PEERS: usize = 4096;
/// The resource index receive buffers are placed through: the whole
/// address space, receive access only (`docs/libfabric.md` "Memory").
const RECV_RI: u16 = 0;
/// Messages held claimed at once (each also counts toward the target's
/// unexpected-message bounds).
const MAX_CLAIMED: usize = 4096;
/// PSN tracking window, packets (uetd's default `mp_range`).
const MP_RANGE: u32 = 1024;
/// Datagrams taken from the socket per progress call, so a flood cannot
/// starve the application's thread.
const RX_BATCH: usize = 256;

/// Memory the endpoint reads and writes in place: `len` bytes at `ptr` in
/// this process.
#[derive(Debug)]
pub(crate) struct AppMem {
    ptr: usize,
    len: u64,
}

impl AppMem {
    /// `len` bytes at `ptr`.
    ///
    /// # Safety
    /// The caller (the application, through libfabric's contract) keeps
    /// `ptr..ptr + len` valid and writable for as long as the endpoint may
    /// use it: until the registration is closed or the operation completes.
    pub(crate) const unsafe fn new(ptr: usize, len: u64) -> Self {
        Self { ptr, len }
    }

    /// The whole address space: local buffers are named by their address.
    const fn everything() -> Self {
        Self {
            ptr: 0,
            len: isize::MAX as u64,
        }
    }
}

impl RegisteredMemory for AppMem {
    fn len(&self) -> u64 {
        self.len
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) {
        if offset.saturating_add(data.len() as u64) > self.len || data.is_empty() {
            return;
        }
        // SAFETY: the range is inside the memory `AppMem::new`'s caller
        // promised valid (the endpoint checked it against `len`); `data` is
        // a packet buffer, never the application's memory.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                (self.ptr + offset as usize) as *mut u8,
                data.len(),
            );
        }
    }

    fn read_at(&self, offset: u64, out: &mut [u8]) {
        if offset.saturating_add(out.len() as u64) > self.len || out.is_empty() {
            return;
        }
        // SAFETY: as in `write_at`; `out` is a packet buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (self.ptr + offset as usize) as *const u8,
                out.as_mut_ptr(),
                out.len(),
            );
        }
    }
}

/// How a domain's engine is set up.
#[derive(Debug, Clone)]
pub(crate) struct EngineConfig {
    /// The FEP address.
    pub(crate) local: IpAddr,
    /// `job_id` of every request.
    pub(crate) job: u32,
    /// This process's `pid_on_fep`.
    pub(crate) pid: u16,
    /// IP MTU of the path.
    pub(crate) mtu: usize,
    /// Bytes in flight per destination (the fixed window).
    pub(crate) window: u64,
    /// Run a progress thread (`FI_PROGRESS_AUTO`).
    pub(crate) auto_progress: bool,
}

/// What a finished operation reports, and to which CQ.
#[derive(Debug)]
pub(crate) struct TxOp {
    pub(crate) cq: Option<Arc<Cq>>,
    /// Whether success is reported too (a failure always is, when there
    /// is a CQ).
    pub(crate) success: bool,
    pub(crate) context: usize,
    pub(crate) flags: u64,
    /// A copy of an injected buffer, alive until the operation ends.
    pub(crate) inject: Option<Box<[u8]>>,
}

/// A posted receive.
#[derive(Debug)]
pub(crate) struct RxOp {
    pub(crate) cq: Arc<Cq>,
    /// Whether success is reported too (a failure always is).
    pub(crate) success: bool,
    pub(crate) context: usize,
    pub(crate) flags: u64,
    pub(crate) buf: usize,
}

/// An operation, as the endpoint layer hands it over.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    Send {
        buf: usize,
        len: u32,
        data: Option<u64>,
        tag: Option<u64>,
    },
    Write {
        buf: usize,
        len: u32,
        data: Option<u64>,
        offset: u64,
        key: u64,
    },
    Read {
        buf: usize,
        len: u32,
        offset: u64,
        key: u64,
    },
}

/// Peers at extra ports get an internal IPv6 address under this prefix:
/// the endpoint keys its PDCs by address, and two processes that share an
/// IP address must not share PDCs.
const INTERNAL_PREFIX: u128 = 0xfd75_6574_6661_6272 << 64;

/// Internal addresses of peers that do not use port 4793.
#[derive(Debug, Default)]
struct Peers {
    by_sock: HashMap<SocketAddr, IpAddr>,
    by_ip: HashMap<IpAddr, SocketAddr>,
    next: u64,
}

impl Peers {
    /// The endpoint's address for a peer at `sa`, or `None` when the table
    /// is full.
    fn internal(&mut self, sa: SocketAddr) -> Option<IpAddr> {
        if sa.port() == UET_PORT || !EXTRA_PORTS.contains(&sa.port()) {
            return Some(sa.ip());
        }
        if let Some(&ip) = self.by_sock.get(&sa) {
            return Some(ip);
        }
        if self.by_sock.len() >= MAX_PORT_PEERS {
            return None;
        }
        self.next += 1;
        let ip = IpAddr::V6(Ipv6Addr::from(INTERNAL_PREFIX | u128::from(self.next)));
        self.by_sock.insert(sa, ip);
        self.by_ip.insert(ip, sa);
        Some(ip)
    }

    /// Where datagrams for the endpoint's address `ip` go.
    fn socket(&self, ip: IpAddr) -> SocketAddr {
        self.by_ip
            .get(&ip)
            .copied()
            .unwrap_or_else(|| SocketAddr::new(ip, UET_PORT))
    }
}

/// Reverse lookup of sources for `FI_SOURCE` (`fi_cq_readfrom`).
pub(crate) trait SourceLookup: Send + Sync {
    /// The `fi_addr_t` of the peer at `sa` with `pid`, or `FI_ADDR_NOTAVAIL`.
    fn lookup(&self, sa: SocketAddr, pid: u16) -> u64;
}

struct State {
    ep: Endpoint<AppMem>,
    local: LocalRegion,
    peers: Peers,
    tx: HashMap<OpId, TxOp>,
    rx: HashMap<RecvId, RxOp>,
    /// Where remote writes with CQ data are reported (the receive CQ).
    remote_cq: Option<Arc<Cq>>,
    av: Option<Arc<dyn SourceLookup>>,
    txbuf: Box<[u8]>,
    rxbuf: Box<[u8]>,
    /// A datagram in `txbuf` the socket would not take yet.
    held: Option<(SocketAddr, usize)>,
    /// Messages claimed by `FI_PEEK | FI_CLAIM`, by the application's
    /// context.
    claimed: HashMap<usize, UnexpectedRef>,
    /// Resource indexes in use by registrations (bit per RI).
    ris: Vec<bool>,
    rng: u64,
    stats: Stats,
}

impl State {
    /// The sender a directed receive names: the peer's internal address
    /// and the `initiator` field its requests carry (its `pid_on_fep`).
    fn sender(&mut self, n: &Name) -> Result<Sender, Errno> {
        let ip = self.peers.internal(n.socket_addr()).ok_or(errors::EAGAIN)?;
        Ok(Sender {
            fep: FepAddr::from(ip),
            initiator: InitiatorId(u32::from(n.pid)),
        })
    }

    /// The `fi_addr_t` of a message's sender (`FI_SOURCE`), or
    /// `FI_ADDR_NOTAVAIL` when no AV is bound or the AV does not hold it.
    fn source_addr(&self, fep: FepAddr, initiator: InitiatorId) -> u64 {
        match &self.av {
            Some(av) => av.lookup(self.peers.socket(fep.to_ip()), initiator.0 as u16),
            None => crate::ffi_flags::ADDR_NOTAVAIL,
        }
    }
}

/// Counters of one engine.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Stats {
    pub(crate) rx_datagrams: u64,
    pub(crate) tx_datagrams: u64,
    pub(crate) rx_dropped: u64,
    pub(crate) tx_errors: u64,
    /// Remote CQ data dropped because the application let its CQ fill up
    /// ([`crate::cq::Cq::push_remote`]).
    pub(crate) cq_overruns: u64,
}

/// A domain's transport.
pub(crate) struct Engine {
    name: Name,
    cfg: EngineConfig,
    sock: UdpSocket,
    st: Mutex<State>,
    stop: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// When the application last drove progress (clock nanoseconds).
    app_progress: AtomicU64,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

fn clock() -> Instant {
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    let start = START.get_or_init(std::time::Instant::now);
    Instant::from_nanos(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX))
}

/// Binds UDP port 4793 on `ip`, or the first free extra port.
fn bind(ip: IpAddr) -> io::Result<UdpSocket> {
    match UdpSocket::bind((ip, UET_PORT)) {
        Ok(s) => return Ok(s),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => {}
        Err(e) => return Err(e),
    }
    for port in EXTRA_PORTS {
        match UdpSocket::bind((ip, port)) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        "every uet port on this address is taken",
    ))
}

impl Engine {
    /// Opens the socket and the endpoint; starts the progress thread when
    /// asked.
    pub(crate) fn open(cfg: EngineConfig) -> io::Result<Arc<Self>> {
        let sock = bind(cfg.local)?;
        sock.set_nonblocking(true)?;
        // Room for the windows in flight toward us (a uetd peer sends up to
        // its own window, 2 MiB by default, in one burst): as root past
        // rmem_max/wmem_max (SO_RCVBUFFORCE), else as far as they allow.
        let want = (cfg.window as usize).saturating_mul(4).max(8 << 20);
        force_buffer(&sock, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, want);
        force_buffer(&sock, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, want);
        let port = sock.local_addr()?.port();
        let name = Name {
            ip: cfg.local,
            port,
            pid: cfg.pid,
            job: cfg.job,
        };
        let overhead = if cfg.local.is_ipv4() { 28 } else { 48 };
        let max_uet = cfg.mtu.saturating_sub(overhead).max(256);
        let max_ses_len = max_uet.saturating_sub(uet_wire::pds::req::CC_HEADER_LEN);
        let mut pds = PdsConfig {
            max_ses_len,
            ..PdsConfig::default()
        };
        pds.ccc.algorithm = Algorithm::Fixed { window: cfg.window };
        // The PSN tracking window uetd uses by default: a uetd sender keeps
        // up to its own MP_RANGE in flight, and a narrower window here drops
        // what lies beyond it whenever the application falls behind.
        pds.mp_range = MP_RANGE;
        pds.ccc.mtu = u32::try_from(cfg.mtu).unwrap_or(1500);
        let seed = random_seed();
        let first_generation = RiGeneration::from_masked((seed >> 8) as u8);
        let mut ep = Endpoint::new(
            EndpointConfig {
                pds,
                target: uet_ses::TargetConfig {
                    first_generation,
                    ..uet_ses::TargetConfig::default()
                },
                tc: TrafficClass::from_masked(0),
                // Receivers name the sender by FEP address and this
                // (FI_SOURCE).
                initiator: InitiatorId(u32::from(cfg.pid)),
            },
            seed,
        );
        let local = ep.register_local(AppMem::everything());
        let recv_space = RegionSpec::new(
            region(cfg.job, cfg.pid, RECV_RI).map_err(|()| invalid("job or pid out of range"))?,
            MemoryKey(0),
            Access::RECV,
        );
        ep.register(recv_space, AppMem::everything())
            .map_err(|e| invalid(&e.to_string()))?;
        let mut ris = vec![false; 1 << 12];
        ris[usize::from(RECV_RI)] = true;
        let buf = vec![0u8; 65536].into_boxed_slice();
        let engine = Arc::new(Self {
            name,
            sock,
            st: Mutex::new(State {
                ep,
                local,
                peers: Peers::default(),
                tx: HashMap::default(),
                rx: HashMap::default(),
                remote_cq: None,
                av: None,
                txbuf: buf.clone(),
                rxbuf: buf,
                held: None,
                claimed: HashMap::default(),
                ris,
                rng: seed | 1,
                stats: Stats::default(),
            }),
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
            app_progress: AtomicU64::new(0),
            cfg,
        });
        if engine.cfg.auto_progress {
            let weak = Arc::downgrade(&engine);
            let h = std::thread::Builder::new()
                .name("uet-progress".into())
                .spawn(move || progress_thread(&weak))?;
            *engine.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
        }
        Ok(engine)
    }

    /// This engine's address.
    pub(crate) const fn name(&self) -> &Name {
        &self.name
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops the progress thread (the domain is closing).
    pub(crate) fn shutdown(&self) {
        self.stop.store(true, Ordering::Release);
        if std::env::var_os("FI_UET_STATS").is_some() {
            let st = self.lock();
            eprintln!(
                "uet {}: {:?} pds {:?} ses {:?}",
                self.name,
                st.stats,
                st.ep.pds().counters(),
                st.ep.counters()
            );
        }

        let h = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = h
            && h.thread().id() != std::thread::current().id()
        {
            let _ = h.join();
        }
    }

    /// Sets where remote writes with CQ data are reported, and the AV for
    /// source lookups.
    pub(crate) fn bind_rx(&self, cq: Option<Arc<Cq>>, av: Option<Arc<dyn SourceLookup>>) {
        let mut st = self.lock();
        if cq.is_some() {
            st.remote_cq = cq;
        }
        if av.is_some() {
            st.av = av;
        }
    }

    /// Registers `len` bytes at `ptr` for remote access; returns the key.
    ///
    /// # Safety
    /// As [`AppMem::new`]: valid until [`Engine::deregister`].
    pub(crate) unsafe fn register(
        &self,
        ptr: usize,
        len: u64,
        access: Access,
    ) -> Result<u64, Errno> {
        let mut st = self.lock();
        let Some(ri) = st.ris.iter().position(|used| !used) else {
            return Err(errors::ENOSPC);
        };
        let ri = ri as u16;
        let addr = region(self.cfg.job, self.cfg.pid, ri).map_err(|()| errors::EINVAL)?;
        let generation = st.ep.memory().next_generation(addr);
        st.rng = xorshift(st.rng);
        let key = MemoryKey::compose(
            ResourceIndex::new(ri).map_err(|_| errors::EINVAL)?,
            generation,
            st.rng,
        );
        // SAFETY: forwarded from the caller.
        let mem = unsafe { AppMem::new(ptr, len) };
        st.ep
            .register(RegionSpec::new(addr, key, access), mem)
            .map_err(|_| errors::EINVAL)?;
        st.ris[usize::from(ri)] = true;
        Ok(key.0)
    }

    /// Removes a registration made by [`Engine::register`].
    pub(crate) fn deregister(&self, key: u64) {
        let mut st = self.lock();
        let ri = MemoryKey(key).ri();
        if let Ok(addr) = region(self.cfg.job, self.cfg.pid, ri.get())
            && st.ep.deregister(addr).is_ok()
        {
            st.ris[usize::from(ri.get())] = false;
        }
    }

    /// Submits an operation to `dst`; its completion goes to `done.cq`.
    pub(crate) fn submit(&self, dst: &Name, op: Op, done: TxOp) -> Result<(), Errno> {
        let mut st = self.lock();
        let st = &mut *st;
        let Some(peer) = st.peers.internal(dst.socket_addr()) else {
            return Err(errors::EAGAIN);
        };
        let local = st.local;
        let (job, pid) = (
            JobId::new(dst.job).map_err(|_| errors::EINVAL)?,
            PidOnFep::new(dst.pid).map_err(|_| errors::EINVAL)?,
        );
        let remote = |offset: u64, key: u64| -> Result<RemoteAddr, Errno> {
            let key = MemoryKey(key);
            Ok(RemoteAddr {
                region: RegionAddr::new(job, pid, key.ri()),
                generation: key.generation(),
                key,
                offset,
            })
        };
        let inject_ptr = done.inject.as_ref().map(|b| b.as_ptr() as usize);
        let (operation, mode) = match op {
            Op::Send {
                buf,
                len,
                data,
                tag,
            } => {
                let src = LocalBuf::new(local, inject_ptr.unwrap_or(buf) as u64);
                let dst = RegionAddr::new(
                    job,
                    pid,
                    ResourceIndex::new(RECV_RI).map_err(|_| errors::EINVAL)?,
                );
                let op = match tag {
                    Some(t) => Operation::TaggedSend {
                        dst,
                        src,
                        len,
                        match_bits: MatchBits(t),
                        header_data: data,
                    },
                    None => Operation::Send {
                        dst,
                        src,
                        len,
                        header_data: data,
                    },
                };
                // Messages are matched in the order they were sent
                // (FI_ORDER_SAS): ordered delivery.
                (op, ReliableMode::Rod)
            }
            Op::Write {
                buf,
                len,
                data,
                offset,
                key,
            } => (
                Operation::Write {
                    dst: remote(offset, key)?,
                    src: LocalBuf::new(local, inject_ptr.unwrap_or(buf) as u64),
                    len,
                    header_data: data,
                },
                ReliableMode::Rud,
            ),
            Op::Read {
                buf,
                len,
                offset,
                key,
            } => (
                Operation::Read {
                    src: remote(offset, key)?,
                    dst: LocalBuf::new(local, buf as u64),
                    len,
                },
                ReliableMode::Rud,
            ),
        };
        let now = clock();
        if st.tx.len() >= crate::info::QUEUE_SIZE {
            return Err(errors::EAGAIN);
        }
        let id = st
            .ep
            .submit_with(now, peer, operation, mode, TrafficClass::from_masked(0))
            .map_err(|e| match e {
                SubmitError::TooManyInFlight | SubmitError::NoPdc => errors::EAGAIN,
                _ => errors::EINVAL,
            })?;
        st.tx.insert(id, done);
        self.flush(st, now);
        Ok(())
    }

    /// Posts a receive of `len` bytes at `buf`.
    pub(crate) fn post_recv(
        &self,
        buf: usize,
        len: u64,
        tag: Option<(u64, u64)>,
        from: Option<&Name>,
        done: RxOp,
    ) -> Result<(), Errno> {
        let mut st = self.lock();
        let from = from.map(|n| st.sender(n)).transpose()?;
        let kind = match tag {
            Some((t, ignore)) => RecvKind::Tagged {
                match_bits: MatchBits(t),
                ignore_bits: MatchBits(ignore),
            },
            None => RecvKind::Untagged,
        };
        let spec = self.recv_spec(buf, len, kind, from)?;
        if st.rx.len() >= crate::info::QUEUE_SIZE {
            return Err(errors::EAGAIN);
        }
        let id = st.ep.post_recv(spec).map_err(|_| errors::EAGAIN)?;
        st.rx.insert(id, done);
        // The receive may have taken an unexpected message at once.
        self.deliver(&mut st);
        Ok(())
    }

    /// `FI_PEEK` / `FI_CLAIM` / `FI_DISCARD` on tagged receives
    /// (`fi_tagged(3)`): looks for an unexpected message without receiving
    /// it, keeps it for a later claim under the application's `context`,
    /// receives a claimed message into `buf`, or drops one.
    pub(crate) fn probe(
        &self,
        tag: (u64, u64),
        flags: u64,
        buf: usize,
        len: u64,
        from: Option<&Name>,
        done: RxOp,
    ) -> Result<(), Errno> {
        use crate::ffi_flags::{CLAIM, DISCARD, PEEK};
        let mut st = self.lock();
        let st = &mut *st;
        let from = from.map(|n| st.sender(n)).transpose()?;
        let job = JobId::new(self.cfg.job).map_err(|_| errors::EINVAL)?;
        let pid = PidOnFep::new(self.cfg.pid).map_err(|_| errors::EINVAL)?;
        if flags & PEEK == 0 {
            // A claim (or discard) of what an earlier peek claimed.
            if flags & CLAIM == 0 {
                return Err(errors::EINVAL);
            }
            let id = st.claimed.remove(&done.context).ok_or(errors::EINVAL)?;
            if flags & DISCARD != 0 {
                st.ep.discard_claimed(id);
                done.cq.push(Entry {
                    context: done.context,
                    flags: done.flags,
                    ..Entry::default()
                });
                return Ok(());
            }
            let spec = self.recv_spec(buf, len, RecvKind::Untagged, None)?;
            let rid = st.ep.post_claimed(id, spec).map_err(|_| errors::EINVAL)?;
            st.rx.insert(rid, done);
            self.deliver(st);
            return Ok(());
        }
        self.progress_locked(st);
        let kind = RecvKind::Tagged {
            match_bits: MatchBits(tag.0),
            ignore_bits: MatchBits(tag.1),
        };
        let Some(m) = st.ep.peek_unexpected_from(job, pid, kind, from) else {
            done.cq.push(Entry {
                context: done.context,
                flags: done.flags,
                err: Some(ErrInfo {
                    err: errors::ENOMSG.0,
                    prov_errno: 0,
                    olen: 0,
                }),
                ..Entry::default()
            });
            return Ok(());
        };
        if flags & DISCARD != 0 {
            st.ep.claim_unexpected(m.id);
            st.ep.discard_claimed(m.id);
        } else if flags & CLAIM != 0 {
            if st.claimed.len() >= MAX_CLAIMED || !st.ep.claim_unexpected(m.id) {
                return Err(errors::EAGAIN);
            }
            st.claimed.insert(done.context, m.id);
        }
        let src = st.source_addr(m.source.fep, m.initiator);
        let mut eflags = done.flags;
        if m.header_data.is_some() {
            eflags |= crate::ffi_flags::REMOTE_CQ_DATA;
        }
        done.cq.push(Entry {
            context: done.context,
            flags: eflags,
            len: m.message_len as usize,
            data: m.header_data.unwrap_or(0),
            tag: m.match_bits.map_or(0, |b| b.0),
            src,
            ..Entry::default()
        });
        Ok(())
    }

    /// A receive of `len` bytes at `buf`, placed through the receive space.
    fn recv_spec(
        &self,
        buf: usize,
        len: u64,
        kind: RecvKind,
        from: Option<Sender>,
    ) -> Result<RecvSpec, Errno> {
        let home = region(self.cfg.job, self.cfg.pid, RECV_RI).map_err(|()| errors::EINVAL)?;
        Ok(RecvSpec {
            job: home.job,
            pid: home.pid,
            buffer: RecvBuffer {
                ri: home.ri,
                offset: buf as u64,
                len,
            },
            kind,
            from,
        })
    }

    /// Cancels the posted receive with `context`; its CQ gets an
    /// `FI_ECANCELED` entry. Returns whether one was found.
    pub(crate) fn cancel(&self, context: usize) -> bool {
        let mut st = self.lock();
        let found = st
            .rx
            .iter()
            .find(|(_, r)| r.context == context)
            .map(|(id, _)| *id);
        let Some(id) = found else {
            return false;
        };
        if !st.ep.cancel_recv(id) {
            return false;
        }
        if let Some(r) = st.rx.remove(&id) {
            r.cq.push(Entry {
                context: r.context,
                flags: r.flags,
                buf: r.buf,
                err: Some(ErrInfo {
                    err: errors::ECANCELED.0,
                    prov_errno: 0,
                    olen: 0,
                }),
                ..Entry::default()
            });
        }
        true
    }

    /// Receives, handles timers, sends, and reports completions.
    pub(crate) fn progress(&self) {
        self.app_progress
            .store(clock().as_nanos(), Ordering::Relaxed);
        let mut st = self.lock();
        self.progress_locked(&mut st);
    }

    fn progress_locked(&self, st: &mut State) {
        let now = clock();
        for _ in 0..RX_BATCH {
            let (n, src) = match self.sock.recv_from(&mut st.rxbuf) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // ICMP errors surface here (a peer's port closed): the
                    // PDS's timers deal with the loss.
                    st.stats.rx_dropped += 1;
                    continue;
                }
            };
            let Some(ip) = st.peers.internal(src) else {
                st.stats.rx_dropped += 1;
                continue;
            };
            let Ok(ev) = EntropyValue::new(src.port()) else {
                st.stats.rx_dropped += 1;
                continue;
            };
            st.stats.rx_datagrams += 1;
            let meta = RxMeta {
                src: ip,
                ev,
                ecn: Ecn::NotEct,
                trimmed: None,
                nominal_size: nominal_pktsize(8 + n) as u32,
                sdi: None,
                arrived: None,
            };
            let State { ep, rxbuf, .. } = st;
            ep.handle_datagram(now, &meta, &rxbuf[..n]);
        }
        if st.ep.poll_timeout().is_some_and(|t| t <= now) {
            st.ep.handle_timeout(now);
        }
        self.flush(st, now);
    }

    /// Sends what the endpoint has to send, then reports completions.
    fn flush(&self, st: &mut State, now: Instant) {
        loop {
            if let Some((sa, len)) = st.held {
                match self.sock.send_to(&st.txbuf[..len], sa) {
                    Ok(_) => {
                        st.stats.tx_datagrams += 1;
                        st.held = None;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        // Unreachable peer and the like: the datagram is
                        // lost; the PDS resends or gives up.
                        st.stats.tx_errors += 1;
                        st.held = None;
                    }
                }
            }
            let State {
                ep, txbuf, peers, ..
            } = st;
            let Some(t) = ep.poll_transmit(now, txbuf) else {
                break;
            };
            st.held = Some((peers.socket(t.dst), t.len));
        }
        self.deliver(st);
    }

    /// Turns the endpoint's completions and events into CQ entries.
    fn deliver(&self, st: &mut State) {
        while let Some(c) = st.ep.poll_completion() {
            complete_tx(st, c);
        }
        while let Some(ev) = st.ep.poll_event() {
            match ev {
                TargetEvent::Recv(r) => complete_rx(st, &r),
                TargetEvent::WriteWithData(w) => {
                    if let Some(cq) = &st.remote_cq
                        && !cq.push_remote(Entry {
                            flags: crate::ffi_flags::REMOTE_WRITE_DATA,
                            len: w.len as usize,
                            data: w.header_data,
                            ..Entry::default()
                        })
                    {
                        st.stats.cq_overruns += 1;
                    }
                }
            }
        }
    }

    /// When the endpoint next needs attention without input.
    fn next_timeout(&self, st: &State) -> Option<Instant> {
        if st.held.is_some() {
            return Some(clock());
        }
        st.ep.poll_timeout()
    }

    fn raw_fd(&self) -> i32 {
        self.sock.as_raw_fd()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

fn complete_tx(st: &mut State, c: OpCompletion) {
    let Some(op) = st.tx.remove(&c.op) else {
        return;
    };
    let Some(cq) = op.cq else {
        return;
    };
    let err = match c.status {
        Ok(()) => None,
        Err(e) => Some(ErrInfo {
            err: errors::op_errno(&e).0,
            prov_errno: errors::prov_errno(&e),
            olen: 0,
        }),
    };
    if err.is_none() && !op.success {
        return;
    }
    cq.push(Entry {
        context: op.context,
        flags: op.flags,
        err,
        ..Entry::default()
    });
}

fn complete_rx(st: &mut State, r: &RecvEvent) {
    let Some(op) = st.rx.remove(&r.recv) else {
        return;
    };
    let failed = r.truncated() || r.completion.status.is_err();
    if !failed && !op.success {
        return;
    }
    let src = st.source_addr(r.source.fep, r.initiator);
    let mut flags = op.flags;
    if r.header_data.is_some() {
        flags |= crate::ffi_flags::REMOTE_CQ_DATA;
    }
    let len = r.completion.modified_length as usize;
    let err = match r.completion.status {
        Ok(()) if r.truncated() => Some(ErrInfo {
            err: errors::ETRUNC.0,
            prov_errno: 0,
            olen: (u64::from(r.message_len) - r.completion.modified_length) as usize,
        }),
        Ok(()) => None,
        Err(e) => {
            let e = match e {
                uet_ses::CompletionError::Remote(rc) => OpError::Remote(rc),
                uet_ses::CompletionError::Local(l) => OpError::Local(l),
                _ => OpError::Local(uet_ses::LocalError::RecvBufferGone),
            };
            Some(ErrInfo {
                err: errors::op_errno(&e).0,
                prov_errno: errors::prov_errno(&e),
                olen: 0,
            })
        }
    };
    op.cq.push(Entry {
        context: op.context,
        flags,
        len,
        buf: op.buf,
        data: r.header_data.unwrap_or(0),
        tag: r.match_bits.map_or(0, |m| m.0),
        src,
        err,
    });
}

fn progress_thread(engine: &Weak<Engine>) {
    let debug = std::env::var_os("FI_UET_DEBUG").is_some();
    let mut last_dump = clock();
    loop {
        let Some(e) = engine.upgrade() else {
            return;
        };
        if e.stop.load(Ordering::Acquire) {
            return;
        }
        let now = clock();
        if debug && now.saturating_since(last_dump) > Duration::from_secs(2) {
            last_dump = now;
            let st = e.lock();
            eprintln!(
                "uet {}: {:?} tx-ops {} rx-ops {} in-flight {} pds {:?} ses {:?}",
                e.name,
                st.stats,
                st.tx.len(),
                st.rx.len(),
                st.ep.in_flight(),
                st.ep.pds().counters(),
                st.ep.counters()
            );
        }
        // While the application drives progress itself (it is polling a
        // CQ), stay out of its way: two threads spinning on one lock on a
        // small machine cost a scheduler quantum per packet.
        let app_busy = now
            .saturating_since(Instant::from_nanos(e.app_progress.load(Ordering::Relaxed)))
            < APP_BUSY;
        let wait = if app_busy {
            Some(now.saturating_add(APP_BUSY_SLEEP))
        } else {
            let mut st = e.lock();
            e.progress_locked(&mut st);
            e.next_timeout(&st)
        };
        // Sleep until a datagram arrives or the next timer, at most 10 ms:
        // an operation submitted meanwhile may need an earlier timer, and
        // the stop flag is read between waits.
        let d: Duration = wait.map_or(Duration::from_millis(10), |t| {
            t.saturating_since(clock()).min(Duration::from_millis(10))
        });
        let fd = e.raw_fd();
        drop(e);
        let mut pfd = libc::pollfd {
            fd,
            events: if app_busy { 0 } else { libc::POLLIN },
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: d.as_nanos() as libc::c_long,
        };
        // SAFETY: one valid pollfd and timespec; the socket outlives the
        // wait (the domain joins this thread before closing it).
        unsafe {
            libc::ppoll(&raw mut pfd, 1, &raw const ts, std::ptr::null());
        }
    }
}

/// How long after the application's last progress call the progress
/// thread leaves the work to it.
const APP_BUSY: Duration = Duration::from_millis(1);
/// How long the progress thread then sleeps before it looks again: waking
/// more often steals the CPU from the polling application on a small
/// machine (seen as 5 ms retransmission timeouts on a 2-vCPU VM).
const APP_BUSY_SLEEP: Duration = Duration::from_millis(10);

/// Sets a socket buffer size with `force` (needs CAP_NET_ADMIN), falling
/// back to `plain` (capped by the sysctl maximum).
fn force_buffer(sock: &UdpSocket, force: i32, plain: i32, bytes: usize) {
    let v = i32::try_from(bytes).unwrap_or(i32::MAX);
    let set = |opt: i32| {
        // SAFETY: an int option on a socket we own.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&raw const v).cast(),
                size_of::<i32>() as libc::socklen_t,
            )
        }
    };
    if set(force) != 0 {
        set(plain);
    }
}

fn region(job: u32, pid: u16, ri: u16) -> Result<RegionAddr, ()> {
    Ok(RegionAddr::new(
        JobId::new(job).map_err(|_| ())?,
        PidOnFep::new(pid).map_err(|_| ())?,
        ResourceIndex::new(ri).map_err(|_| ())?,
    ))
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_owned())
}

fn random_seed() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        return t ^ u64::from(std::process::id()) << 32;
    }
    u64::from_le_bytes(b)
}

const fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}
