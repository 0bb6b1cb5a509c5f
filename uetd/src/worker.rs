//! The per-core worker (`docs/architecture.md` §1): one thread owns one
//! `uet_ses::Endpoint` and one [`PacketIo`] backend and runs
//!
//! ```text
//! now = clock()                       once per iteration
//! commands from the control thread    register, submit, stop
//! rx      io.recv → Endpoint::handle_datagram
//! timers  Endpoint::handle_timeout when poll_timeout() has passed, once
//!         what arrived before `now` is read (rx goes on while batches
//!         are full, up to a ring's worth)
//! tx      io.send ← Endpoint::poll_transmit, stamped with a fresh clock
//! out     completions and target events to the control thread
//! ```
//!
//! While `uet capture` runs, the backend also mirrors every frame it
//! receives and sends to the capture queue ([`crate::capture`]); the
//! worker attaches the capture to its backend once, at start, and without
//! a capture running that costs one relaxed atomic load per call.
//!
//! It busy-polls while there is work and, after a spell with nothing to
//! do, sleeps in `poll()` on the backend's fds and its wake eventfd (and
//! the doorbells of attached rings, through one epoll set) until the
//! endpoint's next timer — an idle daemon costs ~0 % CPU, so ten of them
//! share two cores in the lab. The spell adapts ([`IdlePolicy`]): it is at
//! most `busy_poll`, grows while work comes back within `busy_poll` of a
//! sleep (spinning would have caught it) and shrinks to nothing while
//! sleeps outlast it (spinning would have been wasted); an empty iteration
//! of the spell yields the CPU (`sched_yield`), so spinning workers give
//! way to threads that have work on a machine with fewer cores than
//! threads.
//!
//! Clients that opened a shared-memory ring (`uet_api::ring`) submit to
//! the worker directly: each iteration looks at every attached ring's SQ
//! and posts completions of its operations straight into its CQ, with no
//! other thread in between (`docs/latency.md`). Every entry is checked as
//! the control loop checks a socket operation: a handle the client holds
//! for this worker, bounds, the granted job (`NotYours`), a destination
//! this worker owns; a refusal is an error completion and a count.

use std::net::IpAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_queue::SegQueue;
use rustc_hash::FxHashMap;
use uet_pds::counters::Counters as PdsCounters;
use uet_ses::{
    Endpoint, LocalRegion, MemError, OpCompletion, OpId, Operation, RegionAddr, RegionSpec,
    RegisteredMemory, Registration, SesCounters, TargetEvent,
};
use uet_wire::RiGeneration;
use uet_wire::time::Instant;

use crate::capture::Capture;
use crate::io::{IoStats, PacketIo};
use crate::mem::SharedRegion;
use crate::neigh::NextHopHold;
use crate::sys::eventfd::EventFd;
use crate::sys::mem::monotonic_ns;
use crate::tss::WorkerTss;

/// The endpoint type the daemon runs.
pub type DaemonEndpoint = Endpoint<Box<dyn RegisteredMemory + Send>>;

/// Datagrams per receive or transmit batch.
const BATCH: usize = 64;
/// Datagrams a loop iteration reads at most before it expires a timer
/// that is due (the default AF_XDP RX ring's size): bounded, so a flood
/// cannot hold timers back for ever.
const DRAIN_BEFORE_TIMERS: usize = 2048;
/// How long an idle worker polls before it sleeps, unless configured
/// (`busy_poll_us`): long enough that the ACK of a small write and the
/// client's next operation find it awake on a veth round trip, short
/// enough that idle daemons cost nothing (they sleep until a timer).
pub const DEFAULT_BUSY_POLL: Duration = Duration::from_micros(200);

/// When an idle worker stops polling and sleeps: after `window` with
/// nothing to do, where the window adapts between 0 and `max` (the
/// configured `busy_poll_us`), as Linux's halt polling does. A sleep that
/// ends within `max` (work came back soon: a spin would have caught it)
/// doubles the window, from `max / 8`; a longer one halves it, to 0 below
/// `max / 8`. So a worker serving a ping-pong spins through the round trip,
/// and one whose work comes rarely, or one of many daemons sharing a few
/// cores, stops spinning after each burst. Pure arithmetic on the
/// caller's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdlePolicy {
    max_ns: u64,
    window_ns: u64,
}

impl IdlePolicy {
    /// A policy that spins at most `max`; it starts at `max`.
    pub fn new(max: Duration) -> Self {
        let max_ns = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
        Self {
            max_ns,
            window_ns: max_ns,
        }
    }

    /// How long to keep polling after the last work now.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window_ns)
    }

    /// Whether a worker idle for `idle_ns` should sleep.
    pub fn should_sleep(&self, idle_ns: u64) -> bool {
        idle_ns >= self.window_ns
    }

    /// A sleep of `slept_ns` ended: adapt the window.
    pub fn slept(&mut self, slept_ns: u64) {
        let floor = self.max_ns / 8;
        if slept_ns <= self.max_ns {
            self.window_ns = (self.window_ns.saturating_mul(2))
                .max(floor)
                .min(self.max_ns);
        } else {
            self.window_ns /= 2;
            if self.window_ns < floor {
                self.window_ns = 0;
            }
        }
    }
}
/// When the worker itself was kept from running, and how long its loss
/// timers wait after it ([`DaemonEndpoint::hold_loss_timers`]).
///
/// A retransmission timer measures how long the network has been silent;
/// a stretch in which this worker did not run is not that. When the host
/// takes the CPU away — a hypervisor that throttles the whole VM for tens
/// of milliseconds, say — the peer on the same host stopped too, and when
/// both resume every packet in flight is past its RTO although nothing was
/// lost: the peer has not yet had the moment it needs to answer. So when
/// the worker finds that it did not run for longer than [`Self::GAP_NS`]
/// (two points of its loop that are microseconds apart when it runs, or a
/// sleep that ended that much after its timeout), its RTOs and tail probes
/// wait for as long as it was away, at most [`Self::MAX_NS`]; it goes on
/// receiving, acknowledging and sending meanwhile. A packet that was
/// really lost is found that much later; one the peer answers is not
/// resent. Pure arithmetic on the caller's clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StallGrace {
    last_ns: u64,
    stalls: u64,
}

impl StallGrace {
    /// A gap between two points of the loop longer than this is a stall:
    /// the loop does at most a batch of work between them (well under a
    /// millisecond), so a longer gap is time the worker was not running,
    /// beyond the scheduler's usual slices.
    pub const GAP_NS: u64 = 2_000_000;
    /// The longest the loss timers wait after a stall.
    pub const MAX_NS: u64 = 50_000_000;

    /// The worker runs at `now_ns` and did not sleep since the last call.
    /// Returns until when loss timers wait, if it was kept from running.
    pub fn ran(&mut self, now_ns: u64) -> Option<u64> {
        let gap = now_ns.saturating_sub(self.last_ns);
        let first = self.last_ns == 0;
        self.last_ns = now_ns;
        (!first && gap > Self::GAP_NS).then(|| self.stalled(now_ns, gap))
    }

    /// A sleep that began at `asleep_ns` with `timeout` ended at `now_ns`.
    /// Only the part past the timeout can be a stall: a sleep woken by an
    /// event ended when the event came. Returns as [`Self::ran`] does.
    pub fn woke(&mut self, now_ns: u64, asleep_ns: u64, timeout: Option<Duration>) -> Option<u64> {
        self.last_ns = now_ns;
        let t = u64::try_from(timeout?.as_nanos()).unwrap_or(u64::MAX);
        let late = now_ns.saturating_sub(asleep_ns).saturating_sub(t);
        (late > Self::GAP_NS).then(|| self.stalled(now_ns, late))
    }

    fn stalled(&mut self, now_ns: u64, gap: u64) -> u64 {
        self.stalls += 1;
        now_ns + gap.min(Self::MAX_NS)
    }

    /// Stalls seen.
    pub fn stalls(&self) -> u64 {
        self.stalls
    }
}

/// Holds `ep`'s loss timers until `until` when a stall was seen.
fn hold_after_stall(ep: &mut DaemonEndpoint, until: Option<u64>) {
    if let Some(t) = until {
        ep.hold_loss_timers(Instant::from_nanos(t));
    }
}

/// Rings one worker serves at most (one per client connection; the
/// control loop refuses more).
pub const MAX_RINGS: usize = 256;
/// How often counters are published to the stats path.
const PUBLISH_NS: u64 = 1_000_000;

/// The daemon's clock as the protocol crates see it: CLOCK_MONOTONIC.
pub fn now() -> Instant {
    Instant::from_nanos(monotonic_ns())
}

/// What the control thread asks of a worker.
#[derive(Debug)]
pub enum Command {
    /// Expose `mem` to remote peers.
    Register {
        /// Address, key, rights.
        spec: RegionSpec,
        /// The bytes.
        mem: SharedRegion,
        /// The registration (or why not).
        reply: Sender<Result<Registration, MemError>>,
    },
    /// The generation a registration at `addr` would get now
    /// ([`uet_ses::MemoryTable::next_generation`]).
    NextGeneration {
        /// Which.
        addr: RegionAddr,
        /// The generation.
        reply: Sender<RiGeneration>,
    },
    /// Withdraw a registration (its generation moves on).
    Deregister {
        /// Which.
        addr: RegionAddr,
        /// Done (or why not).
        reply: Sender<Result<(), MemError>>,
    },
    /// Make `mem` usable as the local side of operations.
    RegisterLocal {
        /// The bytes.
        mem: SharedRegion,
        /// Its handle in this worker.
        reply: Sender<LocalRegion>,
    },
    /// Start an operation towards `dst`; its end comes back as
    /// [`Output::Completed`] or [`Output::Rejected`] with `tag`.
    Submit {
        /// The caller's tag.
        tag: u64,
        /// Destination FEP.
        dst: IpAddr,
        /// The operation.
        op: Operation,
    },
    /// Withdraw a local buffer.
    DeregisterLocal {
        /// Its handle in this worker.
        region: LocalRegion,
    },
    /// Post a receive buffer for sends; it ends as [`Output::Received`] or
    /// [`Output::RecvRejected`] with `tag`.
    PostRecv {
        /// The caller's tag.
        tag: u64,
        /// The receive.
        spec: uet_ses::RecvSpec,
        /// Set when the same receive is posted at other workers too (an
        /// any-source receive on a multi-worker daemon): only the worker
        /// that claims it reports its end, completion or refusal.
        shared: Option<Arc<uet_ses::SharedRecv>>,
    },
    /// Forget a process whose client left: its posted receives (ended
    /// without a report: nobody is there to take it) and the unexpected
    /// messages held for it.
    ReleaseProcess {
        /// Its job.
        job: uet_wire::JobId,
        /// Its PIDonFEP, free for the next client.
        pid: uet_wire::PidOnFep,
    },
    /// Serve a client's shared-memory ring.
    RingAttach(Box<RingAttachment>),
    /// A local buffer of a ring's client came (`Some`: its handle in this
    /// worker and length) or went (`None`).
    RingHandle {
        /// The ring.
        ring: u64,
        /// The client's handle.
        handle: u32,
        /// The buffer.
        local: Option<(LocalRegion, u64)>,
    },
    /// Stop serving a ring (its client left); its operations in flight end
    /// unreported.
    RingDetach {
        /// The ring.
        ring: u64,
    },
    /// An operation taken from a ring (made by the worker itself; it waits
    /// with the others for its next hop).
    RingSubmit {
        /// The ring.
        ring: u64,
        /// The client's tag.
        tag: u64,
        /// Destination FEP.
        dst: IpAddr,
        /// The operation.
        op: Operation,
    },
    /// Send with `key` in the security domain `sdi` from now on
    /// ([`crate::tss::WorkerTss::rotate`]).
    TssRotate {
        /// The domain.
        sdi: u32,
        /// The new key.
        key: uet_tss::SecretKey,
        /// Done (or why not).
        reply: Sender<Result<(), String>>,
    },
}

/// A client's ring, as the control loop hands it to the worker that owns
/// its destination.
#[derive(Debug)]
pub struct RingAttachment {
    /// Unique for the daemon's life.
    pub id: u64,
    /// The mapping.
    pub ring: uet_api::ring::ServerRing,
    /// What the client writes to when the ring says the worker sleeps.
    pub doorbell: Arc<EventFd>,
    /// The job granted to the client.
    pub job: u32,
    /// Workers of the daemon (a destination this worker does not own is
    /// refused).
    pub workers: usize,
    /// The client's local buffers now: handle, its region in this worker,
    /// length.
    pub handles: Vec<(u32, LocalRegion, u64)>,
}

/// What a worker tells the control thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// An operation ended.
    Completed {
        /// Its tag.
        tag: u64,
        /// How.
        completion: OpCompletion,
    },
    /// An operation was refused at submission.
    Rejected {
        /// Its tag.
        tag: u64,
        /// Why.
        error: uet_ses::SubmitError,
    },
    /// Something arrived for the target side (a write with header data;
    /// a receive posted without a tag).
    Target(TargetEvent),
    /// A posted receive completed.
    Received {
        /// Its tag.
        tag: u64,
        /// What arrived.
        event: uet_ses::RecvEvent,
    },
    /// A receive could not be posted.
    RecvRejected {
        /// Its tag.
        tag: u64,
        /// Why.
        error: uet_ses::PostError,
    },
}

/// One destination's congestion context, as last published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CccSnapshot {
    /// Destination FEP.
    pub dst: IpAddr,
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// Bytes in flight.
    pub inflight: i64,
    /// Bytes waiting to be sent.
    pub backlog: u64,
    /// RCCC credit available (bytes), when RCCC is on.
    pub credit: Option<i64>,
    /// The round trip of the PDC to this destination whose RTO is the
    /// longest (`Pds::round_trips`), once one has a sample.
    pub round_trip: Option<uet_pds::PdcRoundTrip>,
}

/// A snapshot of a worker's counters.
#[derive(Debug, Clone, Default)]
pub struct WorkerStats {
    /// The backend's.
    pub io: IoStats,
    /// The AF_XDP sockets' (xdp backend only).
    pub xsk: Option<crate::xsk::XskCounters>,
    /// The kernel-UDP backend's GSO/GRO counters (`None` for AF_XDP).
    pub udp: Option<crate::udp::UdpOffloadCounts>,
    /// The packet delivery sublayer's.
    pub pds: PdsCounters,
    /// The semantic sublayer's.
    pub ses: SesCounters,
    /// Operations in flight.
    pub in_flight: usize,
    /// Loop iterations, and of those, sleeps in `poll()`.
    pub iterations: u64,
    /// Sleeps in `poll()`.
    pub sleeps: u64,
    /// Stretches in which the worker did not run for longer than
    /// [`StallGrace::GAP_NS`] (the host took its CPU away); its timers
    /// waited after each.
    pub host_stalls: u64,
    /// Ring entries refused (bad handle, bounds, job, destination,
    /// undecodable) and rings broken (indices out of range).
    pub ring_refused: u64,
    /// Ring operations taken.
    pub ring_ops: u64,
    /// Congestion contexts by destination: taken only when a reader asks
    /// ([`Published::request`]), as of request [`Self::cccs_answer`].
    pub cccs: Vec<CccSnapshot>,
    /// The request for the per-peer snapshot that `cccs` answers (0: none
    /// yet; `u64::MAX`: the worker stopped, and `cccs` is its last state).
    pub cccs_answer: u64,
    /// The security sublayer's, when the daemon has `[[tss]]` domains.
    pub tss: Option<crate::tss::TssStats>,
    /// The RCCC receiver's pacer, when the daemon runs one.
    pub rccc_receiver: Option<uet_cms::rccc::RcccReceiverStats>,
    /// That pacer's rate now, ppm of the link rate: before the ECN cut
    /// (`RcccReceiver::pacing_ppm`) and the cut's factor
    /// (`RcccReceiver::ecn_rate_ppm`).
    pub rccc_rate_ppm: Option<(u32, u32)>,
}

/// How long a reader waits for a worker to answer a request for its
/// per-peer snapshot before it takes the last one: a worker answers at its
/// next loop turn (a sleeping one is woken), so this is reached only when
/// the host does not run the worker.
pub const PER_PEER_WAIT: Duration = Duration::from_millis(200);

/// What a worker publishes for readers on other threads (the control
/// socket's `uet stats`, the metrics endpoint). Its counters are copied
/// in every millisecond of work and before it sleeps. The per-peer part
/// ([`WorkerStats::cccs`]: each destination's congestion state and round
/// trip) visits every PDC and CCC, ≈ 0.15 µs each — 0.3 ms with 2,000
/// peers — so the worker takes it only when a reader asks: a reader counts
/// a request up and wakes the worker, which answers at its next loop turn.
#[derive(Debug)]
pub struct Published {
    stats: Mutex<WorkerStats>,
    /// Requests for the per-peer snapshot so far.
    wanted: AtomicU64,
    /// Signalled when the worker answered requests.
    answered: Condvar,
    wake: Arc<EventFd>,
}

impl Published {
    fn new(wake: Arc<EventFd>) -> Self {
        Self {
            stats: Mutex::new(WorkerStats::default()),
            wanted: AtomicU64::new(0),
            answered: Condvar::new(),
            wake,
        }
    }

    /// The latest counters as published; `cccs` as of the last request.
    pub fn counters(&self) -> WorkerStats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Asks the worker for a fresh per-peer snapshot and wakes it;
    /// returns the request's number for [`Self::answer`].
    pub fn request(&self) -> u64 {
        let n = self.wanted.fetch_add(1, Ordering::AcqRel) + 1;
        self.wake.signal();
        n
    }

    /// The counters once the worker answered request `n`, or after
    /// `timeout` the latest it published.
    pub fn answer(&self, n: u64, timeout: Duration) -> WorkerStats {
        let Ok(s) = self.stats.lock() else {
            return WorkerStats::default();
        };
        match self
            .answered
            .wait_timeout_while(s, timeout, |s| s.cccs_answer < n)
        {
            Ok((s, _)) => s.clone(),
            Err(_) => WorkerStats::default(),
        }
    }

    /// [`Self::request`], then [`Self::answer`] within [`PER_PEER_WAIT`].
    pub fn snapshot(&self) -> WorkerStats {
        let n = self.request();
        self.answer(n, PER_PEER_WAIT)
    }
}

/// The control thread's handle on a worker.
#[derive(Debug)]
pub struct WorkerHandle {
    inbox: Arc<SegQueue<Command>>,
    wake: Arc<EventFd>,
    stop: Arc<AtomicBool>,
    published: Arc<Published>,
    thread: Option<JoinHandle<()>>,
}

impl WorkerHandle {
    /// Queues a command and wakes the worker.
    pub fn send(&self, cmd: Command) {
        self.inbox.push(cmd);
        self.wake.signal();
    }

    /// The worker's counters with a fresh per-peer snapshot
    /// ([`Published::snapshot`]).
    pub fn stats(&self) -> WorkerStats {
        self.published.snapshot()
    }

    /// The latest published counters, without asking for the per-peer
    /// snapshot.
    pub fn counters(&self) -> WorkerStats {
        self.published.counters()
    }

    /// Where the worker publishes its counters, for readers on other
    /// threads ([`crate::stats::StatsSource`]).
    pub fn published(&self) -> Arc<Published> {
        Arc::clone(&self.published)
    }

    /// Asks the worker to stop and waits for it.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.wake.signal();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Registers `mem` and waits for the answer (`None`: the worker is
    /// gone).
    pub fn register(
        &self,
        spec: RegionSpec,
        mem: SharedRegion,
    ) -> Option<Result<Registration, MemError>> {
        let (tx, rx) = channel();
        self.send(Command::Register {
            spec,
            mem,
            reply: tx,
        });
        rx.recv().ok()
    }

    /// The generation a registration at `addr` would get now (`None`: the
    /// worker is gone).
    pub fn next_generation(&self, addr: RegionAddr) -> Option<RiGeneration> {
        let (tx, rx) = channel();
        self.send(Command::NextGeneration { addr, reply: tx });
        rx.recv().ok()
    }

    /// Registers local memory and waits for its handle.
    pub fn register_local(&self, mem: SharedRegion) -> Option<LocalRegion> {
        let (tx, rx) = channel();
        self.send(Command::RegisterLocal { mem, reply: tx });
        rx.recv().ok()
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How a worker's thread runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadConfig {
    /// The CPU it is pinned to, if any (`pin`).
    pub cpu: Option<usize>,
    /// How long it polls while idle before it sleeps, at most
    /// (`busy_poll_us`; see [`IdlePolicy`]).
    pub busy_poll: Duration,
    /// The fair scheduler's time slice it asks for (`worker_slice_us`;
    /// [`crate::sys::affinity::set_slice`]); `None` keeps the kernel's.
    pub slice: Option<Duration>,
}

impl Default for ThreadConfig {
    fn default() -> Self {
        Self {
            cpu: None,
            busy_poll: DEFAULT_BUSY_POLL,
            slice: None,
        }
    }
}

/// Starts worker `id` on its own thread, pinned to `cpu` if given, with
/// the kernel's default time slice; it mirrors frames into `capture`
/// while one runs.
pub fn spawn(
    id: usize,
    io: Box<dyn PacketIo + Send>,
    ep: DaemonEndpoint,
    out: crossbeam_channel::Sender<(usize, Output)>,
    cpu: Option<usize>,
    capture: Arc<Capture>,
    busy_poll: Duration,
) -> std::io::Result<WorkerHandle> {
    let thread = ThreadConfig {
        cpu,
        busy_poll,
        ..ThreadConfig::default()
    };
    spawn_with_tss(id, io, ep, out, capture, thread, None)
}

/// [`spawn`] with the thread's settings in full and the security sublayer
/// between the backend and the endpoint (`docs/security.md`); the
/// endpoint's jobs with a domain are set from `tss`.
pub fn spawn_with_tss(
    id: usize,
    mut io: Box<dyn PacketIo + Send>,
    mut ep: DaemonEndpoint,
    out: crossbeam_channel::Sender<(usize, Output)>,
    capture: Arc<Capture>,
    thread: ThreadConfig,
    mut tss: Option<WorkerTss>,
) -> std::io::Result<WorkerHandle> {
    for (job, sdi) in tss.iter().flat_map(WorkerTss::job_domains) {
        ep.set_job_domain(job, Some(sdi));
    }
    let inbox = Arc::new(SegQueue::new());
    let wake = Arc::new(EventFd::new()?);
    let stop = Arc::new(AtomicBool::new(false));
    let published = Arc::new(Published::new(Arc::clone(&wake)));
    // Published once before the thread runs: a reader of the statistics
    // (`uet stats`, /metrics) finds every section of this worker's backend
    // from the start, not only after the thread's first loop iteration.
    publish(
        &*io,
        &ep,
        tss.as_ref(),
        &published,
        (0, 0, 0),
        &Rings::default(),
    );
    let (i2, w2, s2, st2) = (inbox.clone(), wake.clone(), stop.clone(), published.clone());
    io.attach_capture(capture);
    let ThreadConfig {
        cpu,
        busy_poll,
        slice,
    } = thread;
    let thread = std::thread::Builder::new()
        .name(format!("uet-worker-{id}"))
        .spawn(move || {
            if let Some(cpu) = cpu
                && let Err(e) = crate::sys::affinity::pin_to_cpu(cpu)
            {
                tracing::warn!(worker = id, cpu, "pinning failed: {e}");
            }
            if let Err(e) = crate::sys::eventfd::set_timer_slack(1_000) {
                tracing::warn!(worker = id, "setting the timer slack failed: {e}");
            }
            if let Some(slice) = slice {
                ask_for_slice(id, slice);
            }
            let shared = Shared {
                inbox: &i2,
                wake: &w2,
                stop: &s2,
                published: &st2,
                out: &out,
            };
            run(id, &mut *io, &mut ep, &shared, busy_poll, &mut tss);
        })?;
    Ok(WorkerHandle {
        inbox,
        wake,
        stop,
        published,
        thread: Some(thread),
    })
}

/// Asks the scheduler for `slice` on the calling worker thread and says
/// in the log what came of it.
fn ask_for_slice(id: usize, slice: Duration) {
    use crate::sys::affinity::{SliceOutcome, set_slice};
    match set_slice(Some(slice)) {
        Ok(SliceOutcome::Set(got)) => {
            tracing::debug!(
                worker = id,
                slice_us = got.as_micros(),
                "scheduler slice set"
            );
        }
        Ok(SliceOutcome::NotFair) => {
            tracing::debug!(worker = id, "real-time policy: the scheduler slice is left");
        }
        Ok(SliceOutcome::Unsupported) => tracing::info!(
            worker = id,
            "this kernel has no per-thread scheduler slice (Linux < 6.12): the worker keeps the default"
        ),
        Err(e) => tracing::warn!(worker = id, "setting the scheduler slice failed: {e}"),
    }
}

/// What a worker shares with the control thread.
#[derive(Clone, Copy)]
struct Shared<'a> {
    inbox: &'a SegQueue<Command>,
    wake: &'a EventFd,
    stop: &'a AtomicBool,
    published: &'a Published,
    out: &'a crossbeam_channel::Sender<(usize, Output)>,
}

/// Who asked for an operation: the control loop (its tag) or a ring.
#[derive(Debug, Clone, Copy)]
enum Origin {
    Control(u64),
    Ring { ring: u64, tag: u64 },
}

/// A ring this worker serves.
struct Ring {
    id: u64,
    ring: uet_api::ring::ServerRing,
    doorbell: Arc<EventFd>,
    job: u32,
    workers: usize,
    handles: FxHashMap<u32, (LocalRegion, u64)>,
    /// SQ entries seen before the inbox was drained (see `run`).
    pending: u32,
    /// Whether its breaking was counted.
    counted_broken: bool,
}

/// The rings of a worker and the epoll set that lets one `poll()` wait
/// on its wake eventfd and every ring's doorbell.
#[derive(Default)]
struct Rings {
    list: Vec<Ring>,
    wake_set: Option<crate::sys::eventfd::WakeSet>,
    refused: u64,
    ops: u64,
}

impl Rings {
    fn get(&mut self, id: u64) -> Option<&mut Ring> {
        self.list.iter_mut().find(|r| r.id == id)
    }

    /// Ends a ring operation with `status` (nothing if the ring is gone).
    fn complete(&mut self, id: u64, tag: u64, status: uet_api::Status, bytes: u64) {
        if let Some(r) = self.get(id) {
            r.ring.complete(&uet_api::Completion {
                tag: uet_api::Tag(tag),
                status,
                bytes,
            });
        }
    }

    /// Refuses a ring entry with an error completion, counted.
    fn refuse(&mut self, id: u64, tag: u64, code: uet_api::ErrorCode) {
        self.refused += 1;
        self.complete(
            id,
            tag,
            uet_api::Status::Local {
                code,
                message: String::new(),
            },
            0,
        );
    }
}

fn run(
    id: usize,
    io: &mut dyn PacketIo,
    ep: &mut DaemonEndpoint,
    sh: &Shared<'_>,
    busy_poll: Duration,
    tss: &mut Option<WorkerTss>,
) {
    let Shared {
        inbox,
        wake,
        stop,
        published,
        out,
    } = *sh;
    let mut tags: FxHashMap<OpId, Origin> = FxHashMap::default();
    let mut recv_tags: FxHashMap<uet_ses::RecvId, u64> = FxHashMap::default();
    let mut rings = Rings::default();
    let mut idle = IdlePolicy::new(busy_poll);
    let mut last_busy = 0u64;
    let mut iterations = 0u64;
    let mut sleeps = 0u64;
    let mut last_publish = 0u64;
    // The last request for the per-peer snapshot answered, and scratch for
    // it: each destination's PDC with the longest RTO.
    let mut answered = 0u64;
    let mut rtts = FxHashMap::default();
    // Submits waiting for their peer's next-hop MAC.
    let mut held: NextHopHold<Command> = NextHopHold::default();
    tracing::debug!(worker = id, max_uet = io.max_uet_len(), "worker running");
    let mut grace = StallGrace::default();
    loop {
        iterations += 1;
        let now = now();
        hold_after_stall(ep, grace.ran(now.as_nanos()));
        let mut busy = false;
        let mut cx = Cx {
            id,
            now,
            tags: &mut tags,
            recv_tags: &mut recv_tags,
            out,
            rings: &mut rings,
            wake,
            tss,
        };

        // Operations held for their peer's next hop go first, in order.
        let released = held.release(
            now.as_nanos(),
            |dst| io.ready_for(dst),
            |cmd| handle_command(ep, cmd, &mut cx),
        );
        busy |= released > 0;
        // What the rings hold is seen before the inbox is drained: a
        // client writes an entry only after the reply to the registration
        // it uses, and that reply leaves after the registration's command
        // was queued here — so the command is in the inbox by now.
        for r in &mut cx.rings.list {
            r.pending = r.ring.pending();
        }
        while let Some(cmd) = inbox.pop() {
            busy = true;
            let cmd = match cmd {
                Command::Submit { dst, .. } => {
                    match held.admit(now.as_nanos(), dst, cmd, |d| io.ready_for(d)) {
                        Some(cmd) => cmd,
                        None => continue,
                    }
                }
                cmd => cmd,
            };
            handle_command(ep, cmd, &mut cx);
        }
        if stop.load(Ordering::Acquire) {
            break;
        }
        for i in 0..cx.rings.list.len() {
            while let Some(cmd) = take_from_ring(id, cx.rings, i) {
                busy = true;
                let Command::RingSubmit { dst, .. } = &cmd else {
                    continue;
                };
                let dst = *dst;
                if let Some(cmd) = held.admit(now.as_nanos(), dst, cmd, |d| io.ready_for(d)) {
                    handle_command(ep, cmd, &mut cx);
                }
            }
        }

        let mut rx = 0;
        let timer_due = loop {
            let n = match io.recv(BATCH, &mut |meta, bytes| match tss {
                None => ep.handle_datagram(now, meta, bytes),
                Some(t) => t.receive(now, meta, bytes, ep),
            }) {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(worker = id, "receive failed: {e}");
                    0
                }
            };
            rx += n;
            // A stall of the worker's own while it read (`StallGrace`)
            // holds the loss timers before they are looked at; checked per
            // batch, which takes well under the stall threshold.
            hold_after_stall(ep, grace.ran(monotonic_ns()));
            // Timers expire at `now` only once everything that arrived
            // before `now` has been read: after a stall (the thread
            // descheduled) the ACKs that would stop an RTO may sit behind
            // a full batch. So while a timer is due and the last batch was
            // full, read on, up to one RX ring's worth.
            let due = ep.poll_timeout().is_some_and(|t| t <= now);
            if !due || n < BATCH || rx >= DRAIN_BEFORE_TIMERS {
                break due;
            }
        };
        if timer_due {
            ep.handle_timeout(now);
        }
        if let Some(t) = tss {
            t.handle_timeout(now);
        }
        // What leaves is stamped with the time it leaves, not the
        // iteration's start: the receive above may have taken long (a
        // batch to process, the thread descheduled), and a send time
        // stamped before it would bring the packet's RTO that much closer.
        let now = self::now();
        hold_after_stall(ep, grace.ran(now.as_nanos()));
        // Datagrams the engine produced count as work whether or not the
        // backend could send them: one it drops (no neighbour entry yet)
        // leaves the engine's next ones still waiting, and an engine with
        // datagrams to send has no timer that would wake a sleep for them.
        let mut produced = 0usize;
        if let Err(e) = io.send(BATCH, &mut |buf| {
            let t = match tss {
                None => ep.poll_transmit(now, buf),
                Some(s) => s.transmit(now, buf, ep),
            };
            produced += usize::from(t.is_some());
            t
        }) {
            tracing::warn!(worker = id, "send failed: {e}");
        }
        while let Some(c) = ep.poll_completion() {
            busy = true;
            match tags.remove(&c.op) {
                Some(Origin::Ring { ring, tag }) => {
                    let bytes = c.modified_length;
                    rings.complete(ring, tag, crate::control::status_of(&c), bytes);
                }
                Some(Origin::Control(tag)) => {
                    let _ = out.send((id, Output::Completed { tag, completion: c }));
                }
                None => {
                    let tag = c.op.0;
                    let _ = out.send((id, Output::Completed { tag, completion: c }));
                }
            }
        }
        while let Some(e) = ep.poll_event() {
            busy = true;
            let o = match e {
                TargetEvent::Recv(ev) => match recv_tags.remove(&ev.recv) {
                    Some(tag) => Output::Received { tag, event: ev },
                    None => Output::Target(TargetEvent::Recv(ev)),
                },
                e => Output::Target(e),
            };
            let _ = out.send((id, o));
        }
        busy |= rx > 0 || produced > 0;

        if now.as_nanos().saturating_sub(last_publish) >= PUBLISH_NS {
            last_publish = now.as_nanos();
            publish(
                io,
                ep,
                tss.as_ref(),
                published,
                (iterations, sleeps, grace.stalls()),
                &rings,
            );
        }
        // A reader asked for the per-peer snapshot (and woke us if we slept).
        let wanted = published.wanted.load(Ordering::Acquire);
        if wanted != answered {
            answered = wanted;
            publish(
                io,
                ep,
                tss.as_ref(),
                published,
                (iterations, sleeps, grace.stalls()),
                &rings,
            );
            publish_peers(ep, published, wanted, &mut rtts);
        }

        if busy {
            last_busy = now.as_nanos();
            continue;
        }
        if !idle.should_sleep(now.as_nanos().saturating_sub(last_busy)) {
            // Polling with nothing to do: give the CPU to any thread that
            // has work (the rings are looked at again when it comes back).
            std::thread::yield_now();
            continue;
        }
        // Nothing to do: sleep until a packet, a command, a doorbell or
        // the next timer.
        let timeout = ep
            .poll_timeout()
            .map(|t| Duration::from_nanos(t.as_nanos().saturating_sub(monotonic_ns())));
        // Held operations look again for their next hop every 50 µs.
        let timeout = held.sleep_bound(timeout);
        if timeout.is_some_and(|t| t.is_zero()) {
            continue;
        }
        // Clients ring the doorbell only while the ring says the worker
        // sleeps; an entry that came meanwhile cancels the sleep.
        let mut arrived = false;
        for r in &mut rings.list {
            arrived |= r.ring.set_sleeping(true);
        }
        if !arrived {
            publish(
                io,
                ep,
                tss.as_ref(),
                published,
                (iterations, sleeps, grace.stalls()),
                &rings,
            );
            sleeps += 1;
            let wake_fd = rings
                .wake_set
                .as_ref()
                .map_or_else(|| wake.as_fd(), AsFd::as_fd);
            let asleep = monotonic_ns();
            if let Err(e) = io.wait(timeout, wake_fd) {
                tracing::warn!(worker = id, "poll failed: {e}");
            }
            let woke = monotonic_ns();
            // A reader asking for the per-peer snapshot woke us: that is
            // not work coming back, and must not make the worker spin.
            if published.wanted.load(Ordering::Acquire) == answered {
                idle.slept(woke.saturating_sub(asleep));
            }
            hold_after_stall(ep, grace.woke(woke, asleep, timeout));
            wake.drain();
            for r in &rings.list {
                r.doorbell.drain();
            }
        }
        for r in &mut rings.list {
            r.ring.set_sleeping(false);
        }
        last_busy = monotonic_ns();
    }
    publish(
        io,
        ep,
        tss.as_ref(),
        published,
        (iterations, sleeps, grace.stalls()),
        &rings,
    );
    // The last state, current for every request from now on.
    publish_peers(ep, published, u64::MAX, &mut rtts);
    tracing::debug!(worker = id, "worker stopped");
}

/// The next operation of ring `i`, checked as the control loop checks a
/// socket operation; refusals end with an error completion here and the
/// loop goes on to the next entry.
fn take_from_ring(id: usize, rings: &mut Rings, i: usize) -> Option<Command> {
    use uet_api::ErrorCode;
    use uet_api::ring::{SqOp, Taken};
    loop {
        let r = &mut rings.list[i];
        let taken = r.ring.take(&mut r.pending);
        if r.ring.broken().is_some() && !r.counted_broken {
            r.counted_broken = true;
            tracing::info!(worker = id, ring = r.id, why = ?r.ring.broken(), "ring broken");
            rings.refused += 1;
        }
        let r = &mut rings.list[i];
        let ring = r.id;
        let e = match taken? {
            Taken::Entry(e) => e,
            Taken::Malformed(tag, _) => {
                rings.refuse(ring, tag.0, ErrorCode::Malformed);
                continue;
            }
        };
        let tag = e.tag.0;
        let Some(&(region, len)) = r.handles.get(&e.local.handle.0) else {
            rings.refuse(ring, tag, ErrorCode::UnknownHandle);
            continue;
        };
        if e.local
            .offset
            .checked_add(u64::from(e.len))
            .is_none_or(|end| end > len)
        {
            rings.refuse(ring, tag, ErrorCode::BadLength);
            continue;
        }
        let remote = match crate::control::remote_addr(&e.remote, r.job) {
            Ok(a) => a,
            Err((code, _)) => {
                rings.refuse(ring, tag, code);
                continue;
            }
        };
        let dst = e.remote.region.fep;
        if crate::daemon::owner_of(dst, r.workers) != id {
            rings.refuse(ring, tag, ErrorCode::Refused);
            continue;
        }
        rings.ops += 1;
        let local = uet_ses::LocalBuf::new(region, e.local.offset);
        let op = match e.op {
            SqOp::Write { header_data } => Operation::Write {
                dst: remote,
                src: local,
                len: e.len,
                header_data,
            },
            SqOp::Read => Operation::Read {
                src: remote,
                dst: local,
                len: e.len,
            },
        };
        return Some(Command::RingSubmit { ring, tag, dst, op });
    }
}

/// Copies the worker's counters (the security sublayer's too, with
/// `tss`) into `published`, under one lock, where the control thread reads
/// them: every millisecond of work, and before each sleep. Costs the same
/// whatever the number of peers; the per-peer part is [`publish_peers`].
fn publish(
    io: &dyn PacketIo,
    ep: &DaemonEndpoint,
    tss: Option<&WorkerTss>,
    published: &Published,
    (iterations, sleeps, host_stalls): (u64, u64, u64),
    rings: &Rings,
) {
    if let Ok(mut s) = published.stats.lock() {
        s.ring_refused = rings.refused;
        s.ring_ops = rings.ops;
        s.io = io.stats();
        s.xsk = io.xsk_counters();
        s.udp = io.udp_offloads();
        s.pds = ep.pds().counters().clone();
        let rccc = ep.pds().rccc_receiver();
        s.rccc_receiver = rccc.map(|r| *r.stats());
        s.rccc_rate_ppm = rccc.map(|r| (r.pacing_ppm(), r.ecn_rate_ppm()));
        s.ses = ep.counters();
        s.in_flight = ep.in_flight();
        s.iterations = iterations;
        s.sleeps = sleeps;
        s.host_stalls = host_stalls;
        if let Some(t) = tss {
            s.tss = Some(t.stats());
        }
    }
}

/// Answers request `answer` for the per-peer snapshot: each destination's
/// congestion state with the round trip of its PDC whose RTO is the
/// longest (the one a timeout waits longest for; several PDCs to one peer
/// share its CCC). `rtts` is scratch space kept by the caller, so that an
/// answer allocates nothing once warm.
fn publish_peers(
    ep: &DaemonEndpoint,
    published: &Published,
    answer: u64,
    rtts: &mut FxHashMap<IpAddr, uet_pds::PdcRoundTrip>,
) {
    rtts.clear();
    for r in ep.pds().round_trips() {
        let e = rtts.entry(r.peer).or_insert(r);
        if r.rto > e.rto {
            *e = r;
        }
    }
    if let Ok(mut s) = published.stats.lock() {
        s.cccs.clear();
        for (dst, _tc, c) in ep.pds().cccs() {
            s.cccs.push(CccSnapshot {
                dst,
                cwnd: c.cwnd(),
                inflight: c.inflight(),
                backlog: c.backlog(),
                credit: c.rccc().map(uet_cms::RcccSource::credit),
                round_trip: rtts.get(&dst).copied(),
            });
        }
        s.cccs_answer = answer;
    }
    published.answered.notify_all();
}

/// What commands act on besides the endpoint.
struct Cx<'a> {
    id: usize,
    now: Instant,
    tags: &'a mut FxHashMap<OpId, Origin>,
    recv_tags: &'a mut FxHashMap<uet_ses::RecvId, u64>,
    out: &'a crossbeam_channel::Sender<(usize, Output)>,
    rings: &'a mut Rings,
    wake: &'a EventFd,
    tss: &'a mut Option<WorkerTss>,
}

fn handle_command(ep: &mut DaemonEndpoint, cmd: Command, cx: &mut Cx<'_>) {
    let (id, now, out) = (cx.id, cx.now, cx.out);
    match cmd {
        Command::Register { spec, mem, reply } => {
            let _ = reply.send(ep.register(spec, Box::new(mem)));
        }
        Command::NextGeneration { addr, reply } => {
            let _ = reply.send(ep.memory().next_generation(addr));
        }
        Command::Deregister { addr, reply } => {
            let _ = reply.send(ep.deregister(addr).map(drop));
        }
        Command::RegisterLocal { mem, reply } => {
            let _ = reply.send(ep.register_local(Box::new(mem)));
        }
        Command::Submit { tag, dst, op } => match ep.submit(now, dst, op) {
            Ok(op) => {
                cx.tags.insert(op, Origin::Control(tag));
            }
            Err(error) => {
                let _ = out.send((id, Output::Rejected { tag, error }));
            }
        },
        Command::RingSubmit { ring, tag, dst, op } => match ep.submit(now, dst, op) {
            Ok(op) => {
                cx.tags.insert(op, Origin::Ring { ring, tag });
            }
            Err(_) => cx.rings.refuse(ring, tag, uet_api::ErrorCode::Refused),
        },
        Command::DeregisterLocal { region } => {
            drop(ep.deregister_local(region));
        }
        Command::PostRecv { tag, spec, shared } => {
            // Copies other workers took go first, so that they count
            // neither toward the bound nor in `recv_tags`.
            for gone in ep.sweep_shared_recvs() {
                cx.recv_tags.remove(&gone);
            }
            // `Ok(None)`: a shared receive another worker took already.
            let posted = match &shared {
                Some(c) => ep.post_shared_recv(spec, Arc::clone(c)),
                None => ep.post_recv(spec).map(Some),
            };
            match posted {
                Ok(Some(r)) => {
                    cx.recv_tags.insert(r, tag);
                }
                Ok(None) => {}
                // A refusal ends the receive everywhere, and is reported
                // once: by whichever worker claims it.
                Err(error) => {
                    if shared.is_none_or(|c| c.claim()) {
                        let _ = out.send((id, Output::RecvRejected { tag, error }));
                    }
                }
            }
        }
        Command::ReleaseProcess { job, pid } => {
            for r in ep.release_process(job, pid) {
                cx.recv_tags.remove(&r);
            }
        }
        Command::TssRotate { sdi, key, reply } => {
            let r = match cx.tss.as_mut() {
                Some(t) => t.rotate(now, sdi, key),
                None => Err("no security domains".into()),
            };
            let _ = reply.send(r);
        }
        Command::RingAttach(a) => attach(id, cx.rings, cx.wake, *a),
        Command::RingHandle {
            ring,
            handle,
            local,
        } => {
            if let Some(r) = cx.rings.get(ring) {
                match local {
                    Some(l) => {
                        r.handles.insert(handle, l);
                    }
                    None => {
                        r.handles.remove(&handle);
                    }
                }
            }
        }
        Command::RingDetach { ring } => {
            if let Some(i) = cx.rings.list.iter().position(|r| r.id == ring) {
                let r = cx.rings.list.swap_remove(i);
                if let Some(set) = &cx.rings.wake_set {
                    set.remove(r.doorbell.as_fd());
                }
            }
        }
    }
}

fn attach(id: usize, rings: &mut Rings, wake: &EventFd, a: RingAttachment) {
    if rings.list.len() >= MAX_RINGS {
        tracing::warn!(worker = id, "ring refused: {MAX_RINGS} rings attached");
        return;
    }
    if rings.wake_set.is_none() {
        match crate::sys::eventfd::WakeSet::new(wake.as_fd()) {
            Ok(s) => rings.wake_set = Some(s),
            Err(e) => {
                tracing::warn!(worker = id, "ring refused: no epoll set: {e}");
                return;
            }
        }
    }
    if let Some(set) = &rings.wake_set
        && let Err(e) = set.add(a.doorbell.as_fd())
    {
        tracing::warn!(worker = id, "ring refused: {e}");
        return;
    }
    rings.list.push(Ring {
        id: a.id,
        ring: a.ring,
        doorbell: a.doorbell,
        job: a.job,
        workers: a.workers,
        handles: a.handles.into_iter().map(|(h, r, l)| (h, (r, l))).collect(),
        pending: 0,
        counted_broken: false,
    });
}

/// A receiver of worker outputs.
pub type Outputs = crossbeam_channel::Receiver<(usize, Output)>;

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::time::Instant as StdInstant;

    use uet_ses::{EndpointConfig, LocalBuf, MemoryKey, RemoteAddr};
    use uet_wire::{JobId, PidOnFep, ResourceIndex};

    use super::*;
    use crate::capture::{CaptureDirection, Direction};
    use crate::sys::eventfd::poll_in;

    /// A backend that "receives" four frames per call, handing them to the
    /// capture while one runs, and counts calls with and without a tap.
    struct FakeIo {
        capture: Option<Arc<Capture>>,
        tapped: Arc<AtomicU64>,
        untapped: Arc<AtomicU64>,
    }

    impl PacketIo for FakeIo {
        fn attach_capture(&mut self, capture: Arc<Capture>) {
            self.capture = Some(capture);
        }

        fn recv(
            &mut self,
            _max: usize,
            _sink: &mut dyn FnMut(&uet_pds::RxMeta, &mut [u8]),
        ) -> std::io::Result<usize> {
            match self.capture.as_deref().and_then(Capture::tap) {
                Some(mut t) => {
                    for i in 0..4u8 {
                        t.frame(Direction::Rx, &[i; 60]);
                    }
                    self.tapped.fetch_add(1, Ordering::Relaxed);
                }
                None => {
                    self.untapped.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(0)
        }

        fn send(
            &mut self,
            _max: usize,
            _source: &mut dyn FnMut(&mut [u8]) -> Option<uet_pds::Transmit>,
        ) -> std::io::Result<usize> {
            Ok(0)
        }

        fn wait(
            &mut self,
            _timeout: Option<Duration>,
            wake: std::os::fd::BorrowedFd<'_>,
        ) -> std::io::Result<()> {
            poll_in(&[wake], Some(Duration::from_millis(1))).map(drop)?;
            Ok(())
        }

        fn max_uet_len(&self) -> usize {
            1400
        }

        fn stats(&self) -> IoStats {
            IoStats::default()
        }
    }

    /// [`FakeIo`] with AF_XDP counters, whose `recv` holds the worker
    /// until `open` is set: what the statistics show before the loop ran.
    struct GatedIo {
        inner: FakeIo,
        open: Arc<AtomicBool>,
    }

    impl PacketIo for GatedIo {
        fn attach_capture(&mut self, capture: Arc<Capture>) {
            self.inner.attach_capture(capture);
        }

        fn recv(
            &mut self,
            max: usize,
            sink: &mut dyn FnMut(&uet_pds::RxMeta, &mut [u8]),
        ) -> std::io::Result<usize> {
            while !self.open.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            self.inner.recv(max, sink)
        }

        fn send(
            &mut self,
            max: usize,
            source: &mut dyn FnMut(&mut [u8]) -> Option<uet_pds::Transmit>,
        ) -> std::io::Result<usize> {
            self.inner.send(max, source)
        }

        fn wait(
            &mut self,
            timeout: Option<Duration>,
            wake: std::os::fd::BorrowedFd<'_>,
        ) -> std::io::Result<()> {
            self.inner.wait(timeout, wake)
        }

        fn max_uet_len(&self) -> usize {
            self.inner.max_uet_len()
        }

        fn stats(&self) -> IoStats {
            self.inner.stats()
        }

        fn xsk_counters(&self) -> Option<crate::xsk::XskCounters> {
            Some(crate::xsk::XskCounters::default())
        }
    }

    #[test]
    fn a_worker_s_statistics_hold_its_backend_s_sections_before_its_loop_runs() {
        let open = Arc::new(AtomicBool::new(false));
        let (out, _outputs) = crossbeam_channel::unbounded();
        let mut w = spawn(
            0,
            Box::new(GatedIo {
                inner: FakeIo {
                    capture: None,
                    tapped: Arc::default(),
                    untapped: Arc::default(),
                },
                open: open.clone(),
            }),
            DaemonEndpoint::new(EndpointConfig::default(), 1),
            out,
            None,
            Arc::new(Capture::new(2)),
            Duration::ZERO,
        )
        .unwrap();
        // The thread is held in its first receive, before any publish of
        // its own: /metrics served now must still show the xsk series.
        let s = w.stats();
        open.store(true, Ordering::Release);
        w.stop();
        assert_eq!(s.iterations, 0, "the loop published: {s:?}");
        assert!(s.xsk.is_some(), "{s:?}");
    }

    /// A backend on which nothing arrives and whose every datagram is
    /// dropped, as the AF_XDP one drops those to a destination without a
    /// neighbour entry. It counts the datagrams the engine produced, and the
    /// sleeps the loop began while the engine still had datagrams to send
    /// (the last `send` stopped at `max`, not at the engine's `None`);
    /// `wait` sleeps at most `longest_wait` (or until woken).
    struct DroppingIo {
        produced: Arc<AtomicU64>,
        sleeps_with_work: Arc<AtomicU64>,
        engine_drained: bool,
        buf: Vec<u8>,
        longest_wait: Duration,
    }

    impl DroppingIo {
        fn new(longest_wait: Duration) -> Self {
            Self {
                produced: Arc::default(),
                sleeps_with_work: Arc::default(),
                engine_drained: true,
                buf: vec![0; 1400],
                longest_wait,
            }
        }
    }

    impl PacketIo for DroppingIo {
        fn attach_capture(&mut self, _capture: Arc<Capture>) {}

        fn recv(
            &mut self,
            _max: usize,
            _sink: &mut dyn FnMut(&uet_pds::RxMeta, &mut [u8]),
        ) -> std::io::Result<usize> {
            Ok(0)
        }

        fn send(
            &mut self,
            max: usize,
            source: &mut dyn FnMut(&mut [u8]) -> Option<uet_pds::Transmit>,
        ) -> std::io::Result<usize> {
            self.engine_drained = false;
            for _ in 0..max {
                if source(&mut self.buf).is_none() {
                    self.engine_drained = true;
                    break;
                }
                self.produced.fetch_add(1, Ordering::Relaxed);
            }
            Ok(0)
        }

        fn wait(
            &mut self,
            timeout: Option<Duration>,
            wake: std::os::fd::BorrowedFd<'_>,
        ) -> std::io::Result<()> {
            if !self.engine_drained {
                self.sleeps_with_work.fetch_add(1, Ordering::Relaxed);
            }
            let t = timeout.map_or(self.longest_wait, |t| t.min(self.longest_wait));
            poll_in(&[wake], Some(t)).map(drop)?;
            Ok(())
        }

        fn max_uet_len(&self) -> usize {
            1400
        }

        fn stats(&self) -> IoStats {
            IoStats::default()
        }
    }

    /// A worker over `io`, without busy polling, whose endpoint has one
    /// 4 KiB local region.
    fn dropping_worker(io: DroppingIo) -> (WorkerHandle, LocalRegion) {
        let (out, _outputs) = crossbeam_channel::unbounded();
        let mut ep = DaemonEndpoint::new(EndpointConfig::default(), 1);
        let local = ep.register_local(Box::new(vec![0u8; 4096]));
        let w = spawn(
            0,
            Box::new(io),
            ep,
            out,
            None,
            Arc::new(Capture::new(2)),
            Duration::ZERO,
        )
        .unwrap();
        (w, local)
    }

    /// A 64-byte write from `local` into a region nobody serves.
    fn write_64(local: LocalRegion) -> Operation {
        Operation::Write {
            dst: RemoteAddr {
                region: RegionAddr::new(
                    JobId::new(1).unwrap(),
                    PidOnFep::new(0).unwrap(),
                    ResourceIndex::new(1).unwrap(),
                ),
                generation: RiGeneration::new(0).unwrap(),
                key: MemoryKey(1),
                offset: 0,
            },
            src: LocalBuf::new(local, 0),
            len: 64,
            header_data: None,
        }
    }

    /// Writes to many destinations whose datagrams are all dropped: the
    /// loop keeps asking the engine for more until it has none, and only
    /// then sleeps. (A loop that took "nothing sent" for "nothing to
    /// send" slept with the rest queued and, once every PDC waited for a
    /// resend, with no timer at all: the writes never ended.)
    #[test]
    fn the_loop_sleeps_only_once_the_engine_has_nothing_to_send() {
        let io = DroppingIo::new(Duration::from_millis(1));
        let (produced, sleeps_with_work) =
            (Arc::clone(&io.produced), Arc::clone(&io.sleeps_with_work));
        let (mut w, local) = dropping_worker(io);
        let n = 8 * BATCH as u64;
        for i in 0..n {
            let dst = IpAddr::from([10, 1, (i / 250) as u8, 1 + (i % 250) as u8]);
            let op = write_64(local);
            w.send(Command::Submit { tag: i, dst, op });
        }
        until("every first send", || produced.load(Ordering::Relaxed) >= n);
        w.stop();
        assert_eq!(sleeps_with_work.load(Ordering::Relaxed), 0);
    }

    /// The per-peer part of the statistics is taken only when a reader
    /// asks: the worker's own publishing (every millisecond of work,
    /// before each sleep) leaves it alone, a request is answered at the
    /// worker's next turn (a sleeping worker is woken for it), and a
    /// stopped worker's last state answers every later request.
    #[test]
    fn the_per_peer_snapshot_is_taken_only_when_a_reader_asks() {
        let io = DroppingIo::new(Duration::from_secs(5));
        let produced = Arc::clone(&io.produced);
        let (mut w, local) = dropping_worker(io);
        for i in 0..3u8 {
            let op = write_64(local);
            let dst = IpAddr::from([10, 1, 0, 1 + i]);
            w.send(Command::Submit {
                tag: u64::from(i),
                dst,
                op,
            });
        }
        until("three first sends", || {
            produced.load(Ordering::Relaxed) >= 3
        });
        until("a sleep", || w.counters().sleeps >= 1);
        let c = w.counters();
        assert!(c.cccs.is_empty() && c.cccs_answer == 0, "{c:?}");
        // The worker sleeps for up to 5 s (its resends' timers are later):
        // the request wakes it, and it answers well before the reader
        // would give up.
        let p = w.published();
        let n = p.request();
        let t = std::time::Instant::now();
        let s = p.answer(n, Duration::from_secs(10));
        assert!(t.elapsed() < PER_PEER_WAIT, "{:?}", t.elapsed());
        assert_eq!(s.cccs_answer, n);
        assert_eq!(s.cccs.len(), 3, "{s:?}");
        w.stop();
        let last = w.stats();
        assert_eq!(last.cccs_answer, u64::MAX);
        assert_eq!(last.cccs.len(), 3);
    }

    /// The polling spell shrinks to nothing while sleeps outlast the
    /// configured busy poll, grows back while they end within it, never
    /// passes it, and a zero busy poll never spins.
    #[test]
    fn the_idle_spell_adapts_to_how_soon_work_comes_back() {
        let us = |n: u64| n * 1000;
        let mut p = IdlePolicy::new(Duration::from_micros(200));
        assert_eq!(p.window(), Duration::from_micros(200));
        assert!(!p.should_sleep(us(199)));
        assert!(p.should_sleep(us(200)));
        // Work comes back after a millisecond each time: spinning is
        // wasted, and after a few sleeps the worker sleeps at once.
        for _ in 0..4 {
            p.slept(us(1000));
        }
        assert_eq!(p.window(), Duration::ZERO);
        assert!(p.should_sleep(0));
        // Work comes back 30 µs after each sleep: a spin would catch it.
        p.slept(us(30));
        assert_eq!(p.window(), Duration::from_micros(25));
        for _ in 0..8 {
            p.slept(us(30));
        }
        assert_eq!(p.window(), Duration::from_micros(200));
        // One long sleep halves it; it does not drop at once.
        p.slept(us(5000));
        assert_eq!(p.window(), Duration::from_micros(100));

        let mut zero = IdlePolicy::new(Duration::ZERO);
        zero.slept(0);
        zero.slept(us(10));
        assert_eq!(zero.window(), Duration::ZERO);
        assert!(zero.should_sleep(0));
    }

    /// A gap in a running loop longer than 2 ms holds the loss timers for
    /// as long as the gap (at most 50 ms); shorter gaps, a sleep that ends
    /// at its timeout and one an event ends do not; a sleep that overran
    /// its timeout holds them for the overrun.
    #[test]
    fn loss_timers_wait_as_long_as_the_worker_was_kept_from_running() {
        let ms = |n: u64| n * 1_000_000;
        let mut g = StallGrace::default();
        assert_eq!(g.ran(ms(100)), None);
        assert_eq!(g.ran(ms(101)), None);
        // 2 ms exactly: the scheduler's slices.
        assert_eq!(g.ran(ms(103)), None);
        // The VM stopped for 30 ms between two points of the loop.
        assert_eq!(g.ran(ms(133)), Some(ms(163)));
        assert_eq!(g.stalls(), 1);
        // Sleeps: to the timeout, or woken early by an event.
        let mut g = StallGrace::default();
        let t = Duration::from_millis;
        assert_eq!(g.woke(ms(210), ms(200), Some(t(10))), None);
        assert_eq!(g.woke(ms(400), ms(210), None), None);
        assert_eq!(g.woke(ms(401), ms(400), Some(t(5))), None);
        assert_eq!(g.ran(ms(402)), None);
        // A 5 ms sleep that ended 25 ms late.
        assert_eq!(g.woke(ms(431), ms(401), Some(t(5))), Some(ms(456)));
        // A gap of a second holds them 50 ms, not a second.
        assert_eq!(g.ran(ms(1431)), Some(ms(1481)));
        assert_eq!(g.stalls(), 2);
    }

    /// A worker whose sleeps outlast its busy poll (nothing comes back
    /// within 2 ms) stops polling after each wake-up: it soon goes from
    /// one sleep to the next in an iteration or two, where a fixed 2 ms
    /// spell spins hundreds of iterations between sleeps; wake-ups that
    /// only answer a reader's request do not change that.
    /// The thread id of this process's thread named `name`, once it has
    /// taken that name.
    fn tid_of(name: &str) -> i32 {
        let find = || {
            std::fs::read_dir("/proc/self/task").ok()?.find_map(|t| {
                let t = t.ok()?;
                let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
                (comm.trim_end() == name)
                    .then(|| t.file_name().to_str()?.parse().ok())
                    .flatten()
            })
        };
        until(name, || find().is_some());
        find().unwrap()
    }

    #[test]
    fn a_worker_thread_runs_with_the_scheduler_slice_it_was_given() {
        use crate::sys::affinity::thread_slice;
        let (out, _outputs) = crossbeam_channel::unbounded();
        let ep = DaemonEndpoint::new(EndpointConfig::default(), 1);
        let slice = Duration::from_micros(300);
        let thread = ThreadConfig {
            slice: Some(slice),
            ..ThreadConfig::default()
        };
        let mut w = spawn_with_tss(
            42,
            Box::new(DroppingIo::new(Duration::from_millis(10))),
            ep,
            out,
            Arc::new(Capture::new(2)),
            thread,
            None,
        )
        .unwrap();
        let tid = tid_of("uet-worker-42");
        // This thread, and a worker not given one, keep the kernel's
        // (none before Linux 6.12).
        let base = thread_slice(0).unwrap();
        assert_ne!(base, Some(slice));
        if base.is_some() {
            until("the worker's slice", || {
                thread_slice(tid).unwrap() == Some(slice)
            });
        }
        let (out, _outputs) = crossbeam_channel::unbounded();
        let ep = DaemonEndpoint::new(EndpointConfig::default(), 1);
        let mut plain = spawn(
            43,
            Box::new(DroppingIo::new(Duration::from_millis(10))),
            ep,
            out,
            None,
            Arc::new(Capture::new(2)),
            DEFAULT_BUSY_POLL,
        )
        .unwrap();
        assert_eq!(thread_slice(tid_of("uet-worker-43")).unwrap(), base);
        w.stop();
        plain.stop();
    }

    #[test]
    fn an_idle_worker_stops_polling_when_polling_is_wasted() {
        let (out, _outputs) = crossbeam_channel::unbounded();
        let ep = DaemonEndpoint::new(EndpointConfig::default(), 1);
        let mut w = spawn(
            0,
            Box::new(DroppingIo::new(Duration::from_millis(10))),
            ep,
            out,
            None,
            Arc::new(Capture::new(2)),
            Duration::from_millis(2),
        )
        .unwrap();
        // Read as a monitor does, without asking for the per-peer part
        // (which wakes the worker).
        until("twenty sleeps", || w.counters().sleeps >= 20);
        let first = w.counters();
        until("twenty more", || w.counters().sleeps >= first.sleeps + 20);
        let then = w.counters();
        let per_sleep =
            (then.iterations - first.iterations) as f64 / (then.sleeps - first.sleeps) as f64;
        assert!(per_sleep <= 3.0, "{per_sleep:.1} iterations per sleep");
        // A reader asking for the per-peer snapshot over and over wakes the
        // worker each time, but that is not work: it answers and sleeps
        // again without spinning.
        for _ in 0..50 {
            assert!(w.stats().cccs_answer > 0);
        }
        let asked = w.counters();
        w.stop();
        let per_sleep =
            (asked.iterations - then.iterations) as f64 / (asked.sleeps - then.sleeps) as f64;
        assert!(
            per_sleep <= 3.0,
            "{per_sleep:.1} iterations per sleep while asked"
        );
    }

    fn until(what: &str, cond: impl Fn() -> bool) {
        let deadline = StdInstant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(StdInstant::now() < deadline, "timed out waiting for {what}");
            std::thread::yield_now();
        }
    }

    #[test]
    fn the_loop_taps_only_while_capturing_and_counts_drops_when_full() {
        let tapped = Arc::new(AtomicU64::new(0));
        let untapped = Arc::new(AtomicU64::new(0));
        let io = FakeIo {
            capture: None,
            tapped: Arc::clone(&tapped),
            untapped: Arc::clone(&untapped),
        };
        let capture = Arc::new(Capture::new(2));
        let (out, _outputs) = crossbeam_channel::unbounded();
        let ep = DaemonEndpoint::new(EndpointConfig::default(), 1);
        let mut w = spawn(
            0,
            Box::new(io),
            ep,
            out,
            None,
            Arc::clone(&capture),
            DEFAULT_BUSY_POLL,
        )
        .unwrap();

        until("an iteration", || untapped.load(Ordering::Relaxed) > 0);
        assert_eq!(tapped.load(Ordering::Relaxed), 0);
        assert_eq!(capture.queued(), 0);

        capture.start(CaptureDirection::Both, 16);
        // One tapped call offers four frames to a queue of two: two are
        // queued, the rest (and everything after) are counted drops.
        until("drops", || capture.dropped() >= 2);
        assert_eq!(capture.queued(), 2);
        let f = capture.pop().unwrap();
        assert_eq!((f.orig_len, f.data.len()), (60, 16));

        capture.stop();
        let seen = tapped.load(Ordering::Relaxed);
        let before = untapped.load(Ordering::Relaxed);
        until("untapped again", || {
            untapped.load(Ordering::Relaxed) > before
        });
        // At most the iteration that was running when it stopped.
        assert!(tapped.load(Ordering::Relaxed) <= seen + 1);
        w.stop();
    }
}
