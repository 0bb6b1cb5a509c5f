//! The daemon: configuration → backends → one worker per queue, and the
//! control thread's view of them (`docs/architecture.md` §1).
//!
//! Ownership: every PDC to or from one peer FEP lives in one worker,
//! `hash(peer) % workers` — all PDCs to a destination share one congestion
//! context (§5 of the spec notes: the CCC is per destination FEP and
//! traffic class), so the peer is the unit of ownership. Registrations are
//! given to every worker (a write from any peer must find the region).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rustc_hash::FxHasher;
use uet_pds::PdsConfig;
use uet_ses::{
    Access, EndpointConfig, LocalBuf, LocalRegion, MemoryKey, Operation, RegionAddr, RegionSpec,
    Registration, RemoteAddr, TargetConfig,
};
use uet_wire::time::Duration as WireDuration;
use uet_wire::{JobId, PidOnFep, ResourceIndex, RiGeneration};

use crate::capture::Capture;
use crate::config::{Backend, Config, ConfigError, Encap, XdpAttach};
use crate::io::PacketIo;
use crate::mem::SharedRegion;
use crate::neigh::Neighbours;
use crate::tss::WorkerTss;
use crate::udp::{UdpConfig, UdpIo, gso_run_len};
use crate::worker::{
    self, DaemonEndpoint, Output, Outputs, PER_PEER_WAIT, WorkerHandle, WorkerStats,
};
use crate::xdp::{SteerConfig, XdpError, XdpMode, XdpSteer};
use crate::xsk::{Handoff, XdpIo, XdpIoConfig, XskConfig, XskMode};

/// Why the daemon could not start or do what it was asked, by culprit.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The configuration is malformed or cannot work.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The XDP steering program could not be loaded, attached or driven.
    #[error(transparent)]
    Xdp(#[from] XdpError),
    /// The caller asked for something this daemon cannot do as set up
    /// (no address, ...).
    #[error("{0}")]
    Misuse(String),
    /// A system call or resource failed while doing what the message
    /// says; the source is the failure.
    #[error("{doing}")]
    Resource {
        /// What was being done.
        doing: String,
        /// The failure.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A worker thread is gone (it panicked or was stopped).
    #[error("a worker stopped")]
    WorkerGone,
    /// A worker refused a registration or withdrawal.
    #[error("{0}")]
    Refused(String),
    /// A transfer to a peer failed, was refused or made no progress.
    #[error("{0}")]
    Peer(String),
}

/// The result of the daemon's operations.
pub type Result<T, E = DaemonError> = std::result::Result<T, E>;

fn misuse(why: impl Into<String>) -> DaemonError {
    DaemonError::Misuse(why.into())
}

/// Names what a failing call was doing.
trait Doing<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> Doing<T> for std::result::Result<T, E> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| DaemonError::Resource {
            doing: what(),
            source: Box::new(e),
        })
    }
}

/// Header data that asks the target daemon to verify (hash) the first
/// `len` bytes of the region a write landed in: the top 16 bits are this
/// tag, the low 48 bits the length.
pub const VERIFY_TAG: u64 = 0x5645 << 48;

/// A region the daemon exposes, with what a peer needs to reach it.
#[derive(Debug, Clone)]
pub struct Exposed {
    /// The memory.
    pub mem: SharedRegion,
    /// Its registration.
    pub reg: Registration,
}

/// A running daemon.
#[derive(Debug)]
pub struct Daemon {
    cfg: Config,
    local: IpAddr,
    workers: Vec<WorkerHandle>,
    outputs: Outputs,
    exposed: Vec<Exposed>,
    next_tag: u64,
    /// The XDP program (detached on drop) and the neighbour resolver, for
    /// the xdp backend. Dropped after the workers stop.
    steer: Option<XdpSteer>,
    neigh: Option<Arc<Neighbours>>,
    /// The workers' capture switch and queue (`uet capture`).
    capture: Arc<Capture>,
    /// Set by SIGHUP: read the `[[tss]]` key files again.
    reload_keys: Arc<AtomicBool>,
    /// Each `[[tss]]` domain's key in use, to see a change.
    tss_keys: Vec<uet_tss::SecretKey>,
}

/// The result of [`Daemon::write_test`].
#[derive(Debug, Clone, PartialEq)]
pub struct WriteReport {
    /// Bytes written.
    pub bytes: u64,
    /// XXH3-64 of the source bytes.
    pub xxh3: u64,
    /// Wall time from the first submit to the last completion.
    pub seconds: f64,
    /// Goodput in Gb/s.
    pub gbps: f64,
}

impl Daemon {
    /// After SIGHUP: reads every `[[tss]]` key file again and, for each key
    /// that changed, has every worker install it on the domain's other AN
    /// and send with it from now on (the old key is accepted for the
    /// rotation window; `docs/security.md` §8). A file that is now refused
    /// keeps the key in use, with a warning. Returns how many domains
    /// rotated.
    pub fn reload_keys_if_asked(&mut self) -> usize {
        if !self.reload_keys.swap(false, Ordering::Relaxed) {
            return 0;
        }
        let mut rotated = 0;
        for (i, t) in self.cfg.tss.iter().enumerate() {
            let key = match t.read_key() {
                Ok(k) => k,
                Err(e) => {
                    tracing::warn!(job = t.job, "key not rotated: {e}");
                    continue;
                }
            };
            if self.tss_keys.get(i) == Some(&key) {
                continue;
            }
            let mut ok = true;
            for w in &self.workers {
                let (reply, r) = std::sync::mpsc::channel();
                w.send(worker::Command::TssRotate {
                    sdi: t.sdi,
                    key: key.clone(),
                    reply,
                });
                if let Ok(Err(e)) | Err(e) = r.recv().map_err(|e| e.to_string()) {
                    tracing::warn!(job = t.job, "key not rotated: {e}");
                    ok = false;
                }
            }
            if ok {
                tracing::info!(job = t.job, sdi = t.sdi, "key rotated");
                self.tss_keys[i] = key;
                rotated += 1;
            }
        }
        rotated
    }

    /// Asks for the key files to be read again, as SIGHUP does.
    pub fn request_key_reload(&self) {
        self.reload_keys.store(true, Ordering::Relaxed);
    }

    /// Starts the workers.
    pub fn start(cfg: Config) -> Result<Self> {
        cfg.check()?;
        let info = match &cfg.interface {
            Some(name) => Some(
                crate::sys::ifaddr::interface(name)
                    .doing(|| format!("looking up interface {name}"))?,
            ),
            None => None,
        };
        let local = match (cfg.address, &info) {
            (Some(a), _) => a,
            (None, Some(i)) => *i
                .addrs
                .iter()
                .find(|a| a.is_ipv4())
                .or_else(|| i.addrs.first())
                .ok_or_else(|| misuse("the interface has no address; give one with --address"))?,
            (None, None) => return Err(misuse("give an interface or an address")),
        };
        let mtu = cfg.mtu.unwrap_or_else(|| {
            cfg.interface
                .as_deref()
                .and_then(interface_mtu)
                .unwrap_or(1500)
        });
        let mode = cfg.cc_mode()?;
        let seed = cfg.seed.unwrap_or_else(os_seed);
        // Every worker's table starts new RIs at one generation drawn from
        // the OS at each start (also under a fixed `seed`): addresses handed
        // out before a restart then fail BAD_GENERATION, fixed keys or not
        // (uet_ses::memory "Generations").
        let first_generation = RiGeneration::from_masked(os_seed() as u8);
        // Keys first: a key file refused stops the start before anything
        // is attached.
        let mut tss_keys = Vec::with_capacity(cfg.tss.len());
        for t in &cfg.tss {
            tss_keys.push(
                t.read_key()
                    .map_err(|e| misuse(format!("[[tss]] job {}: {e}", t.job)))?,
            );
        }
        let tss_overhead = if cfg.tss.is_empty() {
            0
        } else {
            crate::tss::overhead(cfg.tss.iter().any(|t| t.ssi.is_some()))
        };
        let (out_tx, outputs) = crossbeam_channel::unbounded();
        let mut workers = Vec::with_capacity(cfg.workers);
        let capture = Arc::new(Capture::new(crate::capture::QUEUE_FRAMES));
        let (mut steer, neigh, hub) = if cfg.backend == Backend::Xdp {
            let ifname = cfg
                .interface
                .clone()
                .ok_or_else(|| misuse("the xdp backend needs an interface"))?;
            let mode = match cfg.xdp_attach {
                XdpAttach::Auto => XdpMode::Auto,
                XdpAttach::Native => XdpMode::Native,
                XdpAttach::Generic => XdpMode::Generic,
            };
            let steer = XdpSteer::attach(
                ifname.as_str(),
                mode,
                // Both encapsulations are steered, so that frames from a peer
                // using the other one are counted (rx_other_encap) rather
                // than answered by the kernel with ICMP unreachables.
                SteerConfig {
                    udp_port: cfg.port,
                    ip_proto: Some(cfg.ip_protocol()),
                },
            )
            .doing(|| format!("attaching the XDP program to {ifname}"))?;
            let n = cfg.workers;
            let hub = Handoff::new(n, 4096, Box::new(move |peer| owner_of(peer, n)))
                .doing(|| "creating the hand-off queues".into())?;
            let neigh = Neighbours::start().doing(|| "starting neighbour resolution".into())?;
            (Some(steer), Some(neigh), Some(hub))
        } else {
            (None, None, None)
        };
        for w in 0..cfg.workers {
            // Whether the backend sends runs of one EV as one GSO send
            // (`Config::ev_burst`).
            let mut sprays_runs = false;
            let io: Box<dyn PacketIo + Send> = match cfg.backend {
                Backend::Udp => {
                    if cfg.workers > 1 {
                        return Err(misuse(
                            "the udp backend runs one worker (the kernel spreads a PDC's \
                             datagrams over sockets by source port)",
                        ));
                    }
                    let mut u = UdpConfig::new(local);
                    u.udp_port = cfg.port;
                    u.ev_bits = cfg.ev_bits;
                    u.offload = cfg.udp_offload;
                    u.socket_buffer = usize::try_from(cfg.udp_socket_buffer.0)
                        .map_err(|e| misuse(format!("udp_socket_buffer: {e}")))?;
                    u.mtu = mtu;
                    u.encap = cfg.encap_config();
                    u.native_ip = cfg.encap() == Encap::Ip;
                    let udp = UdpIo::new(u).doing(|| "opening the UDP sockets".into())?;
                    sprays_runs = udp.sprays_runs();
                    Box::new(udp)
                }
                Backend::Xdp => {
                    let (Some(steer), Some(neigh), Some(hub)) = (&mut steer, &neigh, &hub) else {
                        unreachable!("the xdp backend sets up steering, neighbours and hand-off");
                    };
                    let io_cfg = XdpIoConfig {
                        xsk: XskConfig {
                            ifname: steer.ifname().to_owned(),
                            queues: vec![w as u32],
                            mode: if cfg.xdp_copy {
                                XskMode::Copy
                            } else {
                                XskMode::Auto
                            },
                            frame_size: cfg.frame_size as u32,
                            frame_count: cfg.umem_frames,
                            ring_size: cfg.ring_size,
                            fill_size: cfg.ring_size * 2,
                            ..XskConfig::default()
                        },
                        local_ip: local,
                        encap: cfg.encap_config(),
                        native_ip: cfg.encap() == Encap::Ip,
                        mtu: cfg.mtu.map(|m| m as u32),
                    };
                    let io = XdpIo::new(w, &io_cfg, Arc::clone(hub), Arc::clone(neigh) as _)
                        .doing(|| format!("opening AF_XDP sockets on queue {w}"))?;
                    for (q, fd) in io.xsk().fds() {
                        steer.register_socket(q, fd)?;
                    }
                    Box::new(io)
                }
            };
            let mut pds = PdsConfig {
                max_ses_len: io
                    .max_uet_len()
                    .saturating_sub(uet_wire::pds::req::CC_HEADER_LEN + tss_overhead)
                    .min(MAX_SES_LEN),
                ..PdsConfig::default()
            };
            pds.mp_range = cfg.mp_range;
            pds.secure_start = cfg.tss_start.into();
            pds.rto_init = WireDuration::from_micros(cfg.rto_init_us);
            pds.rto_silent =
                (cfg.rto_silent_us > 0).then(|| WireDuration::from_micros(cfg.rto_silent_us));
            pds.idle_timeout = WireDuration::from_millis(cfg.pdc_idle_ms);
            pds.ccc.algorithm = uet_cms::Algorithm::Fixed {
                window: cfg.window.0,
            };
            pds.ccc.ev.base = 0xc000;
            pds.ccc.ev.ev_bits = cfg.ev_bits;
            // By default a run of one EV is one full GSO send of
            // full-size data packets.
            let datagram = pds.max_ses_len + uet_wire::pds::req::CC_HEADER_LEN + tss_overhead;
            let burst = if sprays_runs {
                gso_run_len(datagram)
            } else {
                1
            };
            pds.ccc.ev.burst = cfg.ev_burst.unwrap_or(burst);
            configure_cc(&mut pds, mode, &cfg);
            let ep = DaemonEndpoint::new(
                EndpointConfig {
                    pds,
                    target: TargetConfig {
                        first_generation,
                        ..TargetConfig::default()
                    },
                    ..EndpointConfig::default()
                },
                seed ^ (w as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            );
            let cpu = cfg.pin.then_some(w);
            let tss = (!cfg.tss.is_empty()).then(|| {
                WorkerTss::new(
                    w,
                    &cfg.tss,
                    tss_keys.clone(),
                    local,
                    cfg.port,
                    cfg.encap() == Encap::Ip,
                    io.ev_map(),
                )
            });
            workers.push(
                worker::spawn_with_tss(
                    w,
                    io,
                    ep,
                    out_tx.clone(),
                    Arc::clone(&capture),
                    worker::ThreadConfig {
                        cpu,
                        busy_poll: Duration::from_micros(cfg.busy_poll_us),
                        slice: (cfg.worker_slice_us > 0)
                            .then(|| Duration::from_micros(cfg.worker_slice_us)),
                    },
                    tss,
                )
                .doing(|| format!("starting worker {w}"))?,
            );
        }
        tracing::info!(%local, backend = ?cfg.backend, workers = cfg.workers, cc = %mode, mtu, "uetd started");
        let mut d = Self {
            cfg,
            local,
            workers,
            outputs,
            exposed: Vec::new(),
            next_tag: 1,
            steer,
            neigh,
            capture,
            reload_keys: Arc::new(AtomicBool::new(false)),
            tss_keys,
        };
        if !d.cfg.tss.is_empty() {
            signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&d.reload_keys))
                .doing(|| "installing the SIGHUP handler".into())?;
        }
        for e in d.cfg.expose.clone() {
            let spec = RegionSpec::new(
                RegionAddr::new(
                    JobId::new(e.job).map_err(|e| misuse(format!("job: {e}")))?,
                    PidOnFep::new(e.pid).map_err(|e| misuse(format!("pid: {e}")))?,
                    ResourceIndex::new(e.ri).map_err(|e| misuse(format!("ri: {e}")))?,
                ),
                MemoryKey(e.key),
                Access::REMOTE_WRITE | Access::REMOTE_READ,
            );
            let len = usize::try_from(e.size.0).map_err(|e| misuse(format!("size: {e}")))?;
            let mem = SharedRegion::anonymous(len).doing(|| "mapping an exposed region".into())?;
            let reg = d.register(spec, mem.clone())?;
            tracing::info!(job = e.job, pid = e.pid, ri = e.ri, key = e.key, generation = ?reg.generation, bytes = len, "exposed");
            d.exposed.push(Exposed { mem, reg });
        }
        Ok(d)
    }

    /// The FEP address.
    pub fn local(&self) -> IpAddr {
        self.local
    }

    /// The configuration it runs.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The capture switch the workers mirror frames into.
    pub fn capture(&self) -> &Capture {
        &self.capture
    }

    /// The regions the daemon exposes itself.
    pub fn exposed(&self) -> &[Exposed] {
        &self.exposed
    }

    /// The worker that owns PDCs with `peer`.
    /// Workers running.
    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// Queues `cmd` for worker `w` (the control loop's ring commands).
    pub fn send_to(&self, w: usize, cmd: worker::Command) {
        if let Some(h) = self.workers.get(w) {
            h.send(cmd);
        }
    }

    /// The worker that serves `peer`.
    pub fn owner(&self, peer: IpAddr) -> usize {
        owner_of(peer, self.workers.len())
    }

    /// Registers `mem` with every worker; all must agree on the
    /// registration.
    pub fn register(&mut self, spec: RegionSpec, mem: SharedRegion) -> Result<Registration> {
        let mut reg = None;
        for w in &self.workers {
            let r = w
                .register(spec, mem.clone())
                .ok_or(DaemonError::WorkerGone)?
                .map_err(|e| DaemonError::Refused(format!("registration refused: {e:?}")))?;
            if reg.is_some_and(|x| x != r) {
                return Err(DaemonError::Refused(
                    "workers disagree on a registration".into(),
                ));
            }
            reg = Some(r);
        }
        reg.ok_or(DaemonError::WorkerGone)
    }

    /// The generation a registration at `addr` would get now (every
    /// worker's table moves in step; worker 0 answers).
    pub fn next_generation(&self, addr: RegionAddr) -> Result<RiGeneration> {
        self.workers
            .first()
            .and_then(|w| w.next_generation(addr))
            .ok_or(DaemonError::WorkerGone)
    }

    /// Asks for `peer`'s next-hop MAC ahead of the first packet (xdp
    /// backend) and waits up to `within` for it, so a transfer does not
    /// start by losing its first window to a missing neighbour entry.
    /// Returns whether it is known (always true for the udp backend).
    pub fn resolve(&self, peer: IpAddr, within: Duration) -> bool {
        use crate::io::NextHop as _;
        let Some(n) = &self.neigh else {
            return true;
        };
        let deadline = std::time::Instant::now() + within;
        n.request(peer);
        while n.lookup(peer).is_none() {
            if std::time::Instant::now() >= deadline {
                tracing::warn!(%peer, "no neighbour entry yet; sending anyway");
                return false;
            }
            std::thread::park_timeout(Duration::from_millis(1));
        }
        true
    }

    /// The worker outputs (completions, target events), for a control loop
    /// that selects over them.
    pub fn outputs(&self) -> &Outputs {
        &self.outputs
    }

    /// A fresh tag for [`Daemon::submit`].
    pub fn next_tag(&mut self) -> u64 {
        self.next_tag += 1;
        self.next_tag
    }

    /// Submits `op` to the worker that owns `peer`; its end arrives as an
    /// output with `tag`. `locals` are the local buffer's handles per worker
    /// ([`Daemon::register_local`]).
    pub fn submit(&self, tag: u64, peer: IpAddr, op: Operation) {
        self.workers[self.owner(peer)].send(worker::Command::Submit { tag, dst: peer, op });
    }

    /// Registers a local buffer with every worker; returns its handle in
    /// each (index = worker).
    pub fn register_local(&self, mem: &SharedRegion) -> Result<Vec<LocalRegion>> {
        self.workers
            .iter()
            .map(|w| w.register_local(mem.clone()).ok_or(DaemonError::WorkerGone))
            .collect()
    }

    /// Forgets a departed client's process on every worker: its posted
    /// receives and the unexpected messages held for it. Sent before its
    /// PIDonFEP can be handed out again, so a new client's receives and
    /// sends never meet the old one's.
    pub fn release_process(&self, job: JobId, pid: PidOnFep) {
        for w in &self.workers {
            w.send(worker::Command::ReleaseProcess { job, pid });
        }
    }

    /// Withdraws a local buffer from every worker.
    pub fn deregister_local(&self, handles: &[LocalRegion]) {
        for (w, r) in self.workers.iter().zip(handles) {
            w.send(worker::Command::DeregisterLocal { region: *r });
        }
    }

    /// Withdraws a registration from every worker (the generation moves
    /// on, so stale keys fail with BAD_GENERATION).
    pub fn deregister(&self, addr: RegionAddr) -> Result<()> {
        for w in &self.workers {
            let (tx, rx) = std::sync::mpsc::channel();
            w.send(worker::Command::Deregister { addr, reply: tx });
            rx.recv()
                .map_err(|_| DaemonError::WorkerGone)?
                .map_err(|e| DaemonError::Refused(format!("deregistration refused: {e:?}")))?;
        }
        Ok(())
    }

    /// Posts a receive; it ends as [`Output::Received`] or
    /// [`Output::RecvRejected`] with `tag`, once (`docs/architecture.md`
    /// §10). A send is matched by the worker that owns its sender's PDCs,
    /// so a receive directed at one sender goes to that sender's owner,
    /// and a receive from any source is offered to every worker as one
    /// [`uet_ses::SharedRecv`]: the first worker whose send would match it
    /// claims it, the other copies are dropped. Each worker matches in
    /// posting order, so receives posted in order take one sender's sends
    /// in order.
    pub fn post_recv(&self, tag: u64, spec: uet_ses::RecvSpec) -> Result<()> {
        match spec.from {
            Some(s) => self.workers[self.owner(s.fep.to_ip())].send(worker::Command::PostRecv {
                tag,
                spec,
                shared: None,
            }),
            None if self.workers.len() == 1 => self.workers[0].send(worker::Command::PostRecv {
                tag,
                spec,
                shared: None,
            }),
            None => {
                let shared = Arc::new(uet_ses::SharedRecv::new());
                for w in &self.workers {
                    w.send(worker::Command::PostRecv {
                        tag,
                        spec,
                        shared: Some(Arc::clone(&shared)),
                    });
                }
            }
        }
        Ok(())
    }

    /// Counters of every worker, each with a fresh per-peer snapshot
    /// (every worker is asked first, then each answer is awaited).
    pub fn stats(&self) -> Vec<WorkerStats> {
        let asked: Vec<u64> = self
            .workers
            .iter()
            .map(|w| w.published().request())
            .collect();
        self.workers
            .iter()
            .zip(asked)
            .map(|(w, n)| w.published().answer(n, PER_PEER_WAIT))
            .collect()
    }

    /// The workers' and the resolver's counters, readable from another
    /// thread (the metrics endpoint) while the control loop owns `self`.
    pub fn stats_source(&self) -> crate::stats::StatsSource {
        crate::stats::StatsSource::new(
            self.workers.iter().map(WorkerHandle::published).collect(),
            self.neigh.clone(),
        )
    }

    /// The next-hop resolver's counters (the xdp backend has one).
    pub fn neigh_counts(&self) -> Option<crate::neigh::NeighCounts> {
        self.neigh.as_ref().map(|n| n.counts())
    }

    /// What the receive counters say about a peer whose wire settings
    /// differ from ours (empty when nothing was dropped for that), to end
    /// a failed operation's message with.
    pub fn wire_mismatch_hint(&self) -> String {
        let (mut crc, mut encap) = (0, 0);
        for s in self.workers.iter().map(WorkerHandle::counters) {
            crc += s.io.rx_bad_crc;
            encap += s.io.rx_other_encap;
        }
        let mut hint = String::new();
        if crc > 0 {
            hint += &format!(
                "; {crc} received frames dropped for a CRC32C trailer that did not match \
                 (rx_bad_crc; this daemon has crc_trailer {}): does the peer agree?",
                if self.cfg.crc_trailer() { "on" } else { "off" }
            );
        }
        if encap > 0 {
            hint += &format!(
                "; {encap} received frames dropped for arriving in the other encapsulation \
                 (rx_other_encap; this daemon has encap {:?}): does the peer agree?",
                self.cfg.encap()
            );
        }
        hint
    }

    /// Waits up to `timeout` for the next worker output.
    pub fn next_output(&self, timeout: Duration) -> Option<(usize, Output)> {
        self.outputs.recv_timeout(timeout).ok()
    }

    /// Handles an output addressed to the daemon itself: a write carrying
    /// [`VERIFY_TAG`] into an exposed region is hashed and reported.
    /// Returns the report line, if it was one.
    pub fn handle_output(&self, out: &Output) -> Option<String> {
        let Output::Target(uet_ses::TargetEvent::WriteWithData(ev)) = out else {
            return None;
        };
        if ev.header_data >> 48 != VERIFY_TAG >> 48 {
            return None;
        }
        let len = (ev.header_data & ((1 << 48) - 1)) as usize;
        let e = self.exposed.iter().find(|e| {
            e.reg.job == ev.region.job && e.reg.pid == ev.region.pid && e.reg.ri == ev.region.ri
        })?;
        let h = e.mem.hash(len);
        Some(format!(
            r#"{{"event":"verified","source":"{}","ri":{},"bytes":{},"xxh3":"{:016x}"}}"#,
            ev.source.fep,
            ev.region.ri.get(),
            len.min(e.mem.len()),
            h
        ))
    }

    /// The built-in RMA write test (a stand-in driver until the application
    /// API lands; it runs the real endpoint code): writes `bytes` of the
    /// test pattern of `seed` to `peer`'s region `ri`/`generation`/`key` in
    /// `chunk`-byte writes, `depth` in flight, the last one asking the
    /// target to verify.
    #[allow(clippy::too_many_arguments)]
    pub fn write_test(
        &mut self,
        peer: IpAddr,
        ri: u16,
        generation: u8,
        key: u64,
        bytes: u64,
        chunk: u32,
        depth: usize,
        seed: u64,
    ) -> Result<WriteReport> {
        if bytes == 0 || chunk == 0 || depth == 0 {
            return Err(misuse("bytes, chunk and depth must be positive"));
        }
        let w = self.owner(peer);
        self.resolve(peer, Duration::from_secs(3));
        let len = usize::try_from(bytes).map_err(|e| misuse(format!("bytes: {e}")))?;
        let src = SharedRegion::anonymous(len).doing(|| "mapping the source buffer".into())?;
        src.fill_pattern(seed, len);
        let xxh3 = src.hash(len);
        let local: LocalRegion = self.workers[w]
            .register_local(src)
            .ok_or(DaemonError::WorkerGone)?;
        let dst_region = RegionAddr::new(
            JobId::new(1).map_err(|e| misuse(format!("job: {e}")))?,
            PidOnFep::new(0).map_err(|e| misuse(format!("pid: {e}")))?,
            ResourceIndex::new(ri).map_err(|e| misuse(format!("ri: {e}")))?,
        );
        let chunks = bytes.div_ceil(u64::from(chunk));
        let op = |i: u64, header_data: Option<u64>| {
            let off = i * u64::from(chunk);
            let n = (bytes - off).min(u64::from(chunk)) as u32;
            Operation::Write {
                dst: RemoteAddr {
                    region: dst_region,
                    generation: RiGeneration::from_masked(generation),
                    key: MemoryKey(key),
                    offset: off,
                },
                src: LocalBuf::new(local, off),
                len: n,
                header_data,
            }
        };
        let start = std::time::Instant::now();
        let base = self.next_tag + 1;
        self.next_tag += chunks;
        let mut next = 0u64;
        let mut done = 0u64;
        let mut in_flight = 0usize;
        // Every chunk but the last first; the last carries the verify
        // request once all others have completed (delivery complete), so
        // the target hashes a region that is whole.
        let body = chunks - 1;
        loop {
            while in_flight < depth && next < body {
                self.workers[w].send(worker::Command::Submit {
                    tag: base + next,
                    dst: peer,
                    op: op(next, None),
                });
                next += 1;
                in_flight += 1;
            }
            if done == body && next == body {
                self.workers[w].send(worker::Command::Submit {
                    tag: base + next,
                    dst: peer,
                    op: op(next, Some(VERIFY_TAG | bytes)),
                });
                next += 1;
                in_flight += 1;
            }
            let Some((_, out)) = self.next_output(Duration::from_secs(30)) else {
                return Err(DaemonError::Peer(format!(
                    "no progress for 30 s ({done} of {chunks} writes done){}",
                    self.wire_mismatch_hint()
                )));
            };
            match out {
                Output::Completed { tag, completion } if (base..base + chunks).contains(&tag) => {
                    if let Err(e) = completion.status {
                        return Err(DaemonError::Peer(format!(
                            "write {} failed: {e}{}",
                            tag - base,
                            self.wire_mismatch_hint()
                        )));
                    }
                    done += 1;
                    in_flight -= 1;
                    if done == chunks {
                        break;
                    }
                }
                Output::Rejected { tag, error } if (base..base + chunks).contains(&tag) => {
                    return Err(DaemonError::Peer(format!(
                        "write {} refused: {error}",
                        tag - base
                    )));
                }
                other => {
                    if let Some(line) = self.handle_output(&other) {
                        println!("{line}");
                    }
                }
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        Ok(WriteReport {
            bytes,
            xxh3,
            seconds,
            gbps: bytes as f64 * 8.0 / seconds / 1e9,
        })
    }

    /// Stops every worker and returns their final counters.
    pub fn shutdown(mut self) -> Vec<WorkerStats> {
        for w in &mut self.workers {
            w.stop();
        }
        let stats = self.stats();
        if let Some(n) = self.neigh.take() {
            n.stop();
        }
        // Detaches the XDP program.
        drop(self.steer.take());
        stats
    }
}

/// `hash(peer) % workers`.
pub fn owner_of(peer: IpAddr, workers: usize) -> usize {
    let mut h = FxHasher::default();
    peer.hash(&mut h);
    (h.finish() % workers.max(1) as u64) as usize
}

/// Largest SES header + payload per packet: UET's 4 KiB payload (the
/// UEC models' MSS, docs/protocol-notes.md §0) behind a standard SES header.
/// An MTU of 4200 and above carries it whole; a jumbo MTU of 9000 too, one
/// 4 KiB payload per packet rather than two, so a packet stays the unit the
/// congestion control and the receiver's buffers are sized for. Smaller
/// MTUs carry what fits.
pub const MAX_SES_LEN: usize = uet_wire::ses::SES_STANDARD_HEADER_LEN + 4096;

/// The largest Ethernet frame of an IPv4/UDP data packet uetd sends at IP
/// MTU `mtu`: MTU-sized, but never more than [`MAX_SES_LEN`] behind the
/// headers (a `*_CC_REQ` PDS header), so above MTU 4,200 it stays 4,198
/// bytes. Ceilings meant to compare with uetd are measured at this size.
#[must_use]
pub fn max_data_frame_len(mtu: usize) -> usize {
    let largest = 14 + 20 + 8 + uet_wire::pds::req::CC_HEADER_LEN + MAX_SES_LEN;
    (mtu + 14).min(largest)
}

fn interface_mtu(name: &str) -> Option<usize> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/mtu"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// 64 bits from the OS (std's hasher keys are drawn from getrandom).
fn os_seed() -> u64 {
    RandomState::new().hash_one(std::process::id())
}

/// How late a worker's pacer tick may come and still hand out the budget
/// it missed, at least: ppoll wake-ups land within tens of microseconds
/// here, later on a loaded machine.
const PACER_CATCH_UP: Duration = Duration::from_micros(100);

/// Most packets a software pacer grants a sender at a time, reached with 32
/// active senders (`RcccConfig::max_grant_steps`; HTSIM pulls 4 × MSS).
/// Each grant wakes the sender's worker and each CREDIT CP costs the
/// receiver's: on the veth lab, 64 senders × 256 KiB through 200 Mb/s
/// completed in 1.21–1.82 × the ideal time with grants of one packet,
/// 1.05–1.07 × with four. With one or eight senders two A/B runs at
/// 350 Mb/s disagreed within the machine's ±10 % (BENCHMARKS.md, "Lab:
/// incast"), so grants stay one packet there, as measured before, and grow
/// with the number of active senders. The pacer's rate is the same either
/// way.
const PACER_GRANT_STEPS: u32 = 4;

/// Fits RCCC's receiver pacer to a software timer. The seed's 1 µs slices
/// with at most 2 slices of budget per tick assume a hardware pacer: a
/// worker that wakes every ~50 µs would grant 2 µs of budget per 50 µs —
/// measured: two 1 MiB flows through a 1 Gb/s bottleneck took 3.5× the
/// ideal time, senders waiting on credit. Here a slice is one full packet
/// at the link rate (12 µs at 1 Gb/s, 0.12 µs → 1 µs at 100 Gb/s) and a
/// late tick may catch up one base RTT of budget, at least
/// [`PACER_CATCH_UP`] (one BDP: a worker descheduled for longer left the
/// link idle that long, and a BDP more arriving at once is what the
/// buffer is sized for; the lab's buffer is 5 × BDP). Grants grow to
/// [`PACER_GRANT_STEPS`] packets with many senders, and every active
/// sender may hold a packet's credit however many there are
/// (`RcccConfig::outstanding_per_sender`): senders' hosts run them
/// milliseconds late, and with the bound alone the pacer's credit waited
/// at a few of them while the link idled. The simulator keeps the seed's
/// values: its timers are exact and its hosts cost nothing per wake-up.
fn software_pacer(pds: &mut PdsConfig, link_rate_bps: u64, base_rtt: Duration) {
    let Some(r) = pds.rccc_receiver.as_mut() else {
        return;
    };
    let packet_ns = (r.mtu as u128 * 8 * 1_000_000_000 / u128::from(link_rate_bps.max(1))) as u64;
    r.slice = r.slice.max(WireDuration::from_nanos(packet_ns));
    r.max_grant_steps = r.max_grant_steps.max(PACER_GRANT_STEPS);
    let catch_up = PACER_CATCH_UP.max(base_rtt).as_nanos();
    let slices = catch_up.div_ceil(r.slice.as_nanos().max(1));
    r.max_burst_slices = r
        .max_burst_slices
        .max(u32::try_from(slices).unwrap_or(u32::MAX));
    r.outstanding_per_sender = r.outstanding_per_sender.max(r.min_grant);
}

/// The congestion control of `cfg` (`cc`, `link_rate`, `base_rtt_us`,
/// `fabric_rtt_us`, `trimming`) in a worker's PDS configuration, with the
/// software host's adjustments below.
fn configure_cc(pds: &mut PdsConfig, mode: uet_pds::CcMode, cfg: &Config) {
    mode.configure(
        pds,
        cfg.link_rate.0,
        WireDuration::from_micros(cfg.base_rtt_us),
        cfg.trimming,
    );
    software_pacer(pds, cfg.link_rate.0, Duration::from_micros(cfg.base_rtt_us));
    if cfg.rccc_ecn_rate
        && let Some(r) = pds.rccc_receiver.as_mut()
    {
        r.ecn_rate = Some(uet_cms::rccc::EcnRate::for_base_rtt(
            WireDuration::from_micros(cfg.base_rtt_us),
        ));
    }
    software_window(
        pds,
        cfg.link_rate.0,
        cfg.fabric_rtt_us.map(WireDuration::from_micros),
    );
}

/// Keeps NSCC's window cap at the configured `MaxWnd` (1.5 × link rate ×
/// `--base-rtt-us`) when base-RTT samples fall below that RTT
/// ([`uet_cms::nscc::NsccConfig::min_max_wnd`]). A daemon's samples
/// leave out the time packets wait for the hosts to read them — the
/// target reports it as service time, and both ends time a packet from
/// the XDP program's arrival stamp — so they come down to the bare link's
/// round trip, while the packets a window must cover include those
/// waiting in the hosts' rings. The simulator's hosts take no time, and
/// keep the spec's rule.
///
/// With `fabric_rtt` (`--fabric-rtt-us`), NSCC's target delay and what
/// derives from it (the increase gains, the quick-adapt threshold, the
/// adjust period) come from the fabric's round trip instead, since the
/// stamped delay samples hold the fabric's delay alone; the window, from
/// its start, still covers the whole loop; and RCCC speculates one
/// fabric BDP ([`speculate_one_fabric_bdp`]).
fn software_window(pds: &mut PdsConfig, link_rate_bps: u64, fabric_rtt: Option<WireDuration>) {
    if let uet_cms::Algorithm::Nscc(n) | uet_cms::Algorithm::NsccRccc(n, _) = &mut pds.ccc.algorithm
    {
        let loop_wnd = n.max_wnd;
        if let Some(f) = fabric_rtt {
            let mtu = u32::try_from(n.mtu).unwrap_or(u32::MAX);
            *n = uet_cms::nscc::NsccConfig::new(link_rate_bps, link_rate_bps, f, mtu, n.trimming);
            n.max_wnd = n.max_wnd.max(loop_wnd);
            n.initial_cwnd = n.max_wnd;
        }
        n.min_max_wnd = loop_wnd;
    }
    if let Some(f) = fabric_rtt {
        speculate_one_fabric_bdp(pds, link_rate_bps, f);
    }
}

/// RCCC's speculative first window, at both ends, as one BDP of the
/// fabric's round trip instead of the loop's (`--base-rtt-us`, which
/// covers the time packets wait for the hosts to run). A first window
/// lands on the bottleneck's buffer, which is sized in the fabric's BDPs;
/// the hosts' delay is not room in it. On the veth lab the loop is 3 × the
/// fabric's round trip, so every sender speculated three fabric BDPs into
/// a buffer of five, and a sender whose host started it milliseconds late
/// sent them onto a queue the pacer already kept: drops of the others'
/// paced packets, after their first round trip \[I\]. At least one packet,
/// as `CcMode::configure` sets it.
fn speculate_one_fabric_bdp(pds: &mut PdsConfig, link_rate_bps: u64, fabric_rtt: WireDuration) {
    let bdp = u64::try_from(u128::from(link_rate_bps) * fabric_rtt.as_nanos() / 8_000_000_000)
        .unwrap_or(u64::MAX);
    let sources = match &mut pds.ccc.algorithm {
        uet_cms::Algorithm::Rccc(r) | uet_cms::Algorithm::NsccRccc(_, r) => Some(r),
        _ => None,
    };
    for r in sources.into_iter().chain(pds.rccc_receiver.as_mut()) {
        r.initial_window = bdp.max(u64::from(r.mtu)).min(r.initial_window);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a software pacer fitted to 200 Mb/s with `n` senders that always
    /// want more (each grant's data, here at once, raises its target as a
    /// source's does) until it has handed out `grants` grants; returns each
    /// grant's time and size, and the configuration.
    fn pace(n: u32, grants: usize) -> (Vec<(uet_wire::time::Instant, u64)>, uet_cms::RcccConfig) {
        use uet_cms::RcccReceiver;
        use uet_wire::Credit24;
        use uet_wire::time::Instant;
        let mut pds = PdsConfig::default();
        uet_pds::CcMode::Rccc.configure(
            &mut pds,
            200_000_000,
            WireDuration::from_micros(300),
            false,
        );
        software_pacer(&mut pds, 200_000_000, Duration::from_micros(300));
        // Open loop: no data comes back, so the bound on outstanding
        // credit would stop the pacer.
        let cfg = uet_cms::RcccConfig {
            max_outstanding: u64::MAX,
            ..pds.rccc_receiver.clone().unwrap()
        };
        let mtu = u64::from(cfg.mtu);
        let mut r = RcccReceiver::new(cfg.clone()).unwrap();
        let want = |cum: u64| Credit24::from_masked((cum + 100 * mtu) as u32);
        let mut now = Instant::ZERO;
        for s in 0..n {
            r.on_rx(now, s, want(cfg.initial_window), mtu, false);
        }
        let mut cum = vec![cfg.initial_window; n as usize];
        let mut out = vec![];
        while out.len() < grants {
            if let Some(t) = r.poll_timeout() {
                now = now.max(t);
            }
            r.handle_timeout(now);
            while let Some((s, c)) = r.poll_grant() {
                let c = u64::from(c.get());
                out.push((now, c - cum[s as usize]));
                cum[s as usize] = c;
                r.on_rx(now, s, want(c), mtu, false);
            }
        }
        (out, cfg)
    }

    #[test]
    fn a_daemons_nscc_window_cap_keeps_its_configured_max_wnd() {
        for mode in [uet_pds::CcMode::Nscc, uet_pds::CcMode::NsccRccc] {
            let mut pds = PdsConfig::default();
            mode.configure(&mut pds, 400_000_000, WireDuration::from_micros(470), false);
            software_window(&mut pds, 400_000_000, None);
            let (uet_cms::Algorithm::Nscc(n) | uet_cms::Algorithm::NsccRccc(n, _)) =
                &pds.ccc.algorithm
            else {
                panic!("{mode}: no NSCC");
            };
            // 1.5 × 50 MB/s × 470 µs.
            assert_eq!(n.max_wnd, 35_250, "{mode}");
            assert_eq!(n.min_max_wnd, n.max_wnd, "{mode}");
            // A base RTT of 20 µs leaves it there.
            assert_eq!(n.max_wnd_for(Duration::from_micros(20)), 35_250, "{mode}");
            assert_eq!(n.target_qdelay, Duration::from_micros(470), "{mode}");
        }
    }

    #[test]
    fn a_fabric_rtt_sets_nsccs_target_delay_and_the_loop_its_window() {
        let mut pds = PdsConfig::default();
        uet_pds::CcMode::NsccRccc.configure(
            &mut pds,
            400_000_000,
            WireDuration::from_micros(470),
            false,
        );
        let credit = pds.rccc_receiver.as_ref().map(|r| r.max_credit);
        software_window(&mut pds, 400_000_000, Some(WireDuration::from_micros(150)));
        let uet_cms::Algorithm::NsccRccc(n, r) = &pds.ccc.algorithm else {
            panic!("no NSCC+RCCC");
        };
        assert_eq!(n.target_qdelay, Duration::from_micros(150));
        assert_eq!(n.config_base_rtt, Duration::from_micros(150));
        // The quick-adapt threshold: 4 × the target (a 5 × BDP buffer).
        assert_eq!(n.qa_threshold, Some(Duration::from_micros(600)));
        // The window and its floor cover the loop: 1.5 × 50 MB/s × 470 µs.
        assert_eq!(
            (n.max_wnd, n.initial_cwnd, n.min_max_wnd),
            (35_250, 35_250, 35_250)
        );
        // RCCC keeps planning for the loop, but speculates one fabric BDP
        // (50 MB/s × 150 µs), at the source and as the receiver expects.
        assert_eq!(r.base_rtt, Duration::from_micros(470));
        assert_eq!(r.initial_window, 7_500);
        assert_eq!(pds.rccc_receiver.as_ref().map(|r| r.max_credit), credit);
        assert_eq!(
            pds.rccc_receiver.as_ref().map(|r| r.initial_window),
            Some(7_500)
        );
    }

    #[test]
    fn rccc_s_receiver_slows_on_ecn_marks_unless_told_not_to() {
        for (cc, on, want) in [
            ("rccc", true, true),
            ("nscc+rccc", true, true),
            ("rccc", false, false),
            // No receiver to slow.
            ("nscc", true, false),
        ] {
            let cfg = Config {
                cc: cc.into(),
                base_rtt_us: 470,
                rccc_ecn_rate: on,
                ..Config::default()
            };
            let mut pds = PdsConfig::default();
            configure_cc(&mut pds, cfg.cc_mode().unwrap(), &cfg);
            let ecn = pds.rccc_receiver.as_ref().and_then(|r| r.ecn_rate);
            assert_eq!(ecn.is_some(), want, "{cc} {on}");
            if let Some(e) = ecn {
                // Once per base RTT, a tenth of the rate at most.
                assert_eq!(e.interval, WireDuration::from_micros(470));
                assert_eq!(e.max_cut_ppm, 100_000);
            }
        }
    }

    #[test]
    fn a_trimming_fabric_gives_nscc_the_specs_trimming_parameters() {
        for trimming in [false, true] {
            let cfg = Config {
                cc: "nscc".into(),
                link_rate: crate::config::Rate(400_000_000),
                base_rtt_us: 470,
                fabric_rtt_us: Some(160),
                trimming,
                ..Config::default()
            };
            let mut pds = PdsConfig::default();
            configure_cc(&mut pds, cfg.cc_mode().unwrap(), &cfg);
            let uet_cms::Algorithm::Nscc(n) = &pds.ccc.algorithm else {
                panic!("no NSCC");
            };
            assert_eq!(n.trimming, trimming);
            if trimming {
                // 0.75 × the fabric RTT, and no quick adapt on a delay
                // threshold: a loss comes back as a NACK.
                assert_eq!(n.target_qdelay, Duration::from_micros(120));
                assert_eq!(n.qa_threshold, None);
            } else {
                assert_eq!(n.target_qdelay, Duration::from_micros(160));
                assert_eq!(n.qa_threshold, Some(Duration::from_micros(640)));
            }
        }
    }

    #[test]
    fn rccc_speculates_one_fabric_bdp_and_at_least_a_packet() {
        for (rate, fabric, window) in [
            // Without a fabric RTT: one BDP of the loop, 50 MB/s × 470 µs.
            (400_000_000, None, 23_500),
            (400_000_000, Some(150), 7_500),
            // Under a packet: one packet (of the PDS's nominal size).
            (10_000_000, Some(150), 4_156),
        ] {
            let mut pds = PdsConfig::default();
            uet_pds::CcMode::Rccc.configure(&mut pds, rate, WireDuration::from_micros(470), false);
            software_window(&mut pds, rate, fabric.map(WireDuration::from_micros));
            let uet_cms::Algorithm::Rccc(r) = &pds.ccc.algorithm else {
                panic!("no RCCC");
            };
            let rx = pds.rccc_receiver.as_ref().expect("an RCCC receiver");
            assert_eq!(
                (r.initial_window, rx.initial_window),
                (window, window),
                "{rate} {fabric:?}"
            );
        }
    }

    /// Through 200 Mb/s a slice is one packet time. With 8 senders waiting
    /// the pacer grants one packet a slice; with 32 or more, four packets
    /// every fourth slice, in turn: the same rate, a quarter of the grants.
    #[test]
    fn a_software_pacer_grants_more_at_a_time_to_many_senders() {
        for (n, packets) in [(8, 1), (16, 2), (64, 4)] {
            let (grants, cfg) = pace(n, 64);
            let mtu = u64::from(cfg.mtu);
            assert!(
                grants.iter().all(|g| g.1 == packets * mtu),
                "{n} senders: {packets} packets at a time: {grants:?}"
            );
            // One packet per slice on average.
            let span = grants.last().unwrap().0.saturating_since(grants[0].0);
            let slices = span.as_nanos() / cfg.slice.as_nanos();
            let sent = grants.len() as u128 * u128::from(packets);
            assert!(
                sent <= slices + 8 && sent + 8 >= slices,
                "{n} senders: {sent} packets in {slices} slices"
            );
        }
    }

    #[test]
    fn the_largest_data_frame_follows_the_mtu_up_to_a_4k_payload() {
        assert_eq!(max_data_frame_len(1500), 1514);
        assert_eq!(max_data_frame_len(3498), 3512);
        // 14 + 20 + 8 (Ethernet, IPv4, UDP) + 16 (RUD_CC_REQ) + 44 + 4096.
        assert_eq!(max_data_frame_len(4200), 4198);
        assert_eq!(max_data_frame_len(9000), 4198);
    }
}
