//! The per-core worker (`docs/architecture.md` §1): one thread owns one
//! `uet_ses::Endpoint` and one [`PacketIo`] backend and runs
//!
//! ```text
//! now = clock()                       once per iteration
//! commands from the control thread    register, submit, stop
//! rx      io.recv → Endpoint::handle_datagram
//! timers  Endpoint::handle_timeout when poll_timeout() has passed
//! tx      io.send ← Endpoint::poll_transmit
//! out     completions and target events to the control thread
//! ```
//!
//! While `uet capture` runs, the backend also mirrors every frame it
//! receives and sends to the capture queue ([`crate::capture`]); the
//! worker attaches the capture to its backend once, at start, and without
//! a capture running that costs one relaxed atomic load per call.
//!
//! It busy-polls while there is work and, after a short spin with nothing
//! to do, sleeps in `poll()` on the backend's fds and its wake eventfd until
//! the endpoint's next timer — an idle daemon costs ~0 % CPU, so ten of them
//! share two cores in the lab.

use std::net::IpAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};
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

/// The endpoint type the daemon runs.
pub type DaemonEndpoint = Endpoint<Box<dyn RegisteredMemory + Send>>;

/// Datagrams per receive or transmit batch.
const BATCH: usize = 64;
/// Iterations with nothing to do before the worker sleeps.
const SPIN: u32 = 256;
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
    },
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
}

/// A snapshot of a worker's counters.
#[derive(Debug, Clone, Default)]
pub struct WorkerStats {
    /// The backend's.
    pub io: IoStats,
    /// The AF_XDP sockets' (xdp backend only).
    pub xsk: Option<crate::xsk::XskCounters>,
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
    /// Congestion contexts by destination.
    pub cccs: Vec<CccSnapshot>,
}

/// The control thread's handle on a worker.
#[derive(Debug)]
pub struct WorkerHandle {
    inbox: Arc<SegQueue<Command>>,
    wake: Arc<EventFd>,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<WorkerStats>>,
    thread: Option<JoinHandle<()>>,
}

impl WorkerHandle {
    /// Queues a command and wakes the worker.
    pub fn send(&self, cmd: Command) {
        self.inbox.push(cmd);
        self.wake.signal();
    }

    /// The latest published counters.
    pub fn stats(&self) -> WorkerStats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
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

/// Starts worker `id` on its own thread, pinned to `cpu` if given; it
/// mirrors frames into `capture` while one runs.
pub fn spawn(
    id: usize,
    mut io: Box<dyn PacketIo + Send>,
    mut ep: DaemonEndpoint,
    out: crossbeam_channel::Sender<(usize, Output)>,
    cpu: Option<usize>,
    capture: Arc<Capture>,
) -> std::io::Result<WorkerHandle> {
    let inbox = Arc::new(SegQueue::new());
    let wake = Arc::new(EventFd::new()?);
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(Mutex::new(WorkerStats::default()));
    let (i2, w2, s2, st2) = (inbox.clone(), wake.clone(), stop.clone(), stats.clone());
    io.attach_capture(capture);
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
            let shared = Shared {
                inbox: &i2,
                wake: &w2,
                stop: &s2,
                stats: &st2,
                out: &out,
            };
            run(id, &mut *io, &mut ep, &shared);
        })?;
    Ok(WorkerHandle {
        inbox,
        wake,
        stop,
        stats,
        thread: Some(thread),
    })
}

/// What a worker shares with the control thread.
#[derive(Clone, Copy)]
struct Shared<'a> {
    inbox: &'a SegQueue<Command>,
    wake: &'a EventFd,
    stop: &'a AtomicBool,
    stats: &'a Mutex<WorkerStats>,
    out: &'a crossbeam_channel::Sender<(usize, Output)>,
}

fn run(id: usize, io: &mut dyn PacketIo, ep: &mut DaemonEndpoint, sh: &Shared<'_>) {
    let Shared {
        inbox,
        wake,
        stop,
        stats,
        out,
    } = *sh;
    let mut tags: FxHashMap<OpId, u64> = FxHashMap::default();
    let mut recv_tags: FxHashMap<uet_ses::RecvId, u64> = FxHashMap::default();
    let mut idle = 0u32;
    let mut iterations = 0u64;
    let mut sleeps = 0u64;
    let mut last_publish = 0u64;
    // Submits waiting for their peer's next-hop MAC.
    let mut held: NextHopHold<Command> = NextHopHold::default();
    tracing::debug!(worker = id, max_uet = io.max_uet_len(), "worker running");
    loop {
        iterations += 1;
        let now = now();
        let mut busy = false;

        // Operations held for their peer's next hop go first, in order.
        let released = held.release(
            now.as_nanos(),
            |dst| io.ready_for(dst),
            |cmd| handle_command(id, ep, cmd, now, &mut tags, &mut recv_tags, out),
        );
        busy |= released > 0;
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
            handle_command(id, ep, cmd, now, &mut tags, &mut recv_tags, out);
        }
        if stop.load(Ordering::Acquire) {
            break;
        }

        let rx = match io.recv(BATCH, &mut |meta, bytes| {
            ep.handle_datagram(now, meta, bytes);
        }) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(worker = id, "receive failed: {e}");
                0
            }
        };
        if ep.poll_timeout().is_some_and(|t| t <= now) {
            ep.handle_timeout(now);
        }
        let tx = match io.send(BATCH, &mut |buf| ep.poll_transmit(now, buf)) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(worker = id, "send failed: {e}");
                0
            }
        };
        while let Some(c) = ep.poll_completion() {
            busy = true;
            let tag = tags.remove(&c.op).unwrap_or(c.op.0);
            let _ = out.send((id, Output::Completed { tag, completion: c }));
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
        busy |= rx > 0 || tx > 0;

        if now.as_nanos().saturating_sub(last_publish) >= PUBLISH_NS {
            last_publish = now.as_nanos();
            publish(io, ep, stats, iterations, sleeps);
        }

        if busy {
            idle = 0;
            continue;
        }
        idle += 1;
        if idle < SPIN {
            continue;
        }
        // Nothing to do: sleep until a packet, a command or the next timer.
        let timeout = ep
            .poll_timeout()
            .map(|t| Duration::from_nanos(t.as_nanos().saturating_sub(monotonic_ns())));
        // Held operations look again for their next hop every 50 µs.
        let timeout = held.sleep_bound(timeout);
        if timeout.is_some_and(|t| t.is_zero()) {
            continue;
        }
        publish(io, ep, stats, iterations, sleeps);
        sleeps += 1;
        if let Err(e) = io.wait(timeout, wake.as_fd()) {
            tracing::warn!(worker = id, "poll failed: {e}");
        }
        wake.drain();
        idle = 0;
    }
    publish(io, ep, stats, iterations, sleeps);
    tracing::debug!(worker = id, "worker stopped");
}

fn publish(
    io: &dyn PacketIo,
    ep: &DaemonEndpoint,
    stats: &Mutex<WorkerStats>,
    iterations: u64,
    sleeps: u64,
) {
    if let Ok(mut s) = stats.lock() {
        s.io = io.stats();
        s.xsk = io.xsk_counters();
        s.pds = ep.pds().counters().clone();
        s.ses = ep.counters();
        s.in_flight = ep.in_flight();
        s.iterations = iterations;
        s.sleeps = sleeps;
        s.cccs.clear();
        for (dst, _tc, c) in ep.pds().cccs() {
            s.cccs.push(CccSnapshot {
                dst,
                cwnd: c.cwnd(),
                inflight: c.inflight(),
                backlog: c.backlog(),
                credit: c.rccc().map(uet_cms::RcccSource::credit),
            });
        }
    }
}

fn handle_command(
    id: usize,
    ep: &mut DaemonEndpoint,
    cmd: Command,
    now: Instant,
    tags: &mut FxHashMap<OpId, u64>,
    recv_tags: &mut FxHashMap<uet_ses::RecvId, u64>,
    out: &crossbeam_channel::Sender<(usize, Output)>,
) {
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
                tags.insert(op, tag);
            }
            Err(error) => {
                let _ = out.send((id, Output::Rejected { tag, error }));
            }
        },
        Command::DeregisterLocal { region } => {
            drop(ep.deregister_local(region));
        }
        Command::PostRecv { tag, spec } => match ep.post_recv(spec) {
            Ok(r) => {
                recv_tags.insert(r, tag);
            }
            Err(error) => {
                let _ = out.send((id, Output::RecvRejected { tag, error }));
            }
        },
    }
}

/// A receiver of worker outputs.
pub type Outputs = crossbeam_channel::Receiver<(usize, Output)>;

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::time::Instant as StdInstant;

    use uet_ses::EndpointConfig;

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
            _sink: &mut dyn FnMut(&uet_pds::RxMeta, &[u8]),
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
        let mut w = spawn(0, Box::new(io), ep, out, None, Arc::clone(&capture)).unwrap();

        until("an iteration", || untapped.load(Ordering::Relaxed) > 0);
        assert_eq!(tapped.load(Ordering::Relaxed), 0);
        assert!(capture.frames().is_empty());

        capture.start(CaptureDirection::Both, 16);
        // One tapped call offers four frames to a queue of two: two are
        // queued, the rest (and everything after) are counted drops.
        until("drops", || capture.dropped() >= 2);
        assert_eq!(capture.frames().len(), 2);
        let f = capture.frames().try_recv().unwrap();
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
