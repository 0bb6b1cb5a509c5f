//! Next-hop MAC resolution for the AF_XDP backend, from the kernel's route
//! and neighbour tables over rtnetlink (`docs/architecture.md` §1).
//!
//! **Where next hops come from.** Only the kernel's tables: the resolver
//! thread asks `RTM_GETROUTE` for a destination's next hop (gateway or on
//! link) and `RTM_GETNEIGH` for that hop's MAC. When the kernel has no
//! usable entry it sends one kernel UDP datagram to the hop (discard port
//! 9), which makes the kernel resolve it (ARP / ND), and looks again later.
//! A peer that ARPs for us leaves a STALE entry in our kernel's table, so
//! the resolver finds a new peer's MAC there without sending anything.
//! Frames received on the AF_XDP rings never write this table: the kernel
//! validates its entries (ARP/ND and their timers), a frame's source MAC
//! proves nothing (any host on the L2 can put a peer's IP in a frame), and
//! a table a received frame could fill or overwrite would let one spoofed
//! frame redirect every reply meant for a peer. What the datapath learns
//! from frames is kept apart, per worker, as a short-lived [`Hints`] entry
//! that never outranks the kernel's answer.
//!
//! **The datapath side** ([`Neighbours`] as [`NextHop`]):
//! [`NextHop::lookup`] is one lock-free load of an immutable map
//! (`ArcSwap`) plus, the first time an entry is used after a refresh, one
//! relaxed store of its "used" flag; no syscall, no allocation.
//! [`NextHop::request`] pushes to a bounded queue
//! ([`REQUEST_QUEUE`]; overflow is counted and dropped — the next miss asks
//! again) and wakes the resolver at most once per resolver pass. Only the
//! resolver thread publishes a new map, at most once per pass, so a copy
//! of the map (at most [`MAX_DESTINATIONS`] entries) never happens on the
//! datapath.
//!
//! **Bounds and lifetimes** (defaults in [`NeighConfig`]):
//! - at most [`MAX_DESTINATIONS`] destinations are wanted (resolved or
//!   pending). A new one arriving at a full table evicts the pending
//!   destinations asked for least recently (a sixteenth of them at once);
//!   with none pending it is refused (counted). A resolved destination in
//!   use is never pushed out by new ones.
//! - a pending destination is tried at once, then with exponential
//!   backoff from 1 ms doubling up to 1 s (the kernel's own ARP retransmit
//!   interval), not at a fixed short period.
//! - a destination nothing has asked for — no `request`, no `lookup` that
//!   found it — for `forget_after` (10 s) is forgotten, resolved or not;
//!   the next miss asks afresh.
//! - a resolved entry is re-read from the kernel every `refresh` (1 s): a
//!   changed MAC is taken; an entry the kernel no longer has is kept for
//!   `lost_grace` (3 s) while the kernel re-resolves it (so neither a gap
//!   nor a hint can take its place), then dropped and tried again.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use crossbeam_queue::ArrayQueue;
use rustc_hash::FxHashMap;
use uet_wire::inet::EthernetAddress;

use crate::io::NextHop;
use crate::netlink::{Msg, NLM_F_REQUEST, Netlink, attrs};

const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const RTM_NEWNEIGH: u16 = 28;
const RTM_GETNEIGH: u16 = 30;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
/// NUD states with a usable link-layer address (<linux/neighbour.h>):
/// REACHABLE, STALE, DELAY, PROBE, NOARP, PERMANENT.
const NUD_USABLE: u16 = 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80;
const NTF_PROXY: u8 = 0x08;

/// Destinations the resolver keeps at most (resolved and pending).
pub const MAX_DESTINATIONS: usize = 4096;
/// Requests queued for the resolver at most (as many as destinations, so
/// one burst of misses to every destination the table can hold fits); more
/// are counted and dropped.
pub const REQUEST_QUEUE: usize = 4096;
/// Hints one worker keeps at most ([`Hints`]).
pub const HINTS_PER_WORKER: usize = 64;
/// How long a hint is used at most ([`Hints`]).
pub const HINT_TTL: Duration = Duration::from_secs(1);

/// The resolver's timing and bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeighConfig {
    /// Destinations kept at most.
    pub max_destinations: usize,
    /// How often a resolved entry is re-read from the kernel.
    pub refresh: Duration,
    /// A destination nothing asked for this long is forgotten.
    pub forget_after: Duration,
    /// First retry delay of a destination that did not resolve; doubles
    /// per failure.
    pub backoff_min: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
    /// How long an entry the kernel lost keeps its last MAC while the
    /// kernel re-resolves it.
    pub lost_grace: Duration,
}

impl Default for NeighConfig {
    fn default() -> Self {
        Self {
            max_destinations: MAX_DESTINATIONS,
            refresh: Duration::from_secs(1),
            forget_after: Duration::from_secs(10),
            backoff_min: Duration::from_millis(1),
            backoff_max: Duration::from_secs(1),
            lost_grace: Duration::from_secs(3),
        }
    }
}

/// What the resolver holds, for tests and stats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NeighCounts {
    /// Destinations wanted (resolved and pending).
    pub destinations: u64,
    /// Of those, resolved (published to the datapath).
    pub resolved: u64,
    /// Resolution attempts that asked the kernel (monotonic).
    pub attempts: u64,
    /// Destinations forgotten for want of use (monotonic).
    pub forgotten: u64,
    /// Pending destinations evicted by newer ones at a full table
    /// (monotonic).
    pub evicted: u64,
    /// New destinations refused at a table full of resolved ones
    /// (monotonic).
    pub refused: u64,
    /// Requests dropped at a full request queue (monotonic).
    pub requests_dropped: u64,
}

/// A published entry: the MAC and the slot of its "used" flag.
#[derive(Debug, Clone, Copy)]
struct Published {
    mac: EthernetAddress,
    slot: u32,
}

/// The resolver's state, shared with the datapath.
#[derive(Debug)]
pub struct Neighbours {
    map: ArcSwap<FxHashMap<IpAddr, Published>>,
    /// One flag per slot: set by `lookup` when it finds the entry, cleared
    /// by the resolver when it looks (how it knows an entry is in use).
    used: Box<[AtomicBool]>,
    queue: ArrayQueue<IpAddr>,
    /// Set by `request` when it wakes the resolver, cleared by the resolver
    /// before it drains the queue: one wake-up per pass at most.
    kicked: AtomicBool,
    requests_dropped: AtomicU64,
    /// The resolver thread's id (0 until it runs).
    tid: AtomicU32,
    counts: std::sync::Mutex<NeighCounts>,
    stop: AtomicBool,
    thread: std::sync::Mutex<Option<JoinHandle<()>>>,
    waker: std::sync::OnceLock<std::thread::Thread>,
}

/// Where a destination's frames go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The next hop (the gateway, or the destination itself on link).
    pub hop: IpAddr,
    /// Outgoing interface index.
    pub oif: u32,
}

impl Neighbours {
    /// Starts the resolver thread (in the caller's network namespace) with
    /// the default [`NeighConfig`].
    pub fn start() -> std::io::Result<Arc<Self>> {
        Self::start_with(NeighConfig::default())
    }

    /// Starts the resolver thread with `cfg`.
    /// Refused (`InvalidInput`) when `max_destinations` is outside
    /// 1..2^32; otherwise fails only as its system calls do.
    pub fn start_with(cfg: NeighConfig) -> std::io::Result<Arc<Self>> {
        if cfg.max_destinations == 0 || u32::try_from(cfg.max_destinations).is_err() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "max_destinations must be in 1..2^32",
            ));
        }
        let me = Arc::new(Self {
            map: ArcSwap::from_pointee(FxHashMap::default()),
            used: (0..cfg.max_destinations)
                .map(|_| AtomicBool::new(false))
                .collect(),
            queue: ArrayQueue::new(REQUEST_QUEUE),
            kicked: AtomicBool::new(false),
            requests_dropped: AtomicU64::new(0),
            tid: AtomicU32::new(0),
            counts: std::sync::Mutex::new(NeighCounts::default()),
            stop: AtomicBool::new(false),
            thread: std::sync::Mutex::new(None),
            waker: std::sync::OnceLock::new(),
        });
        let nl = Netlink::open()?;
        let ns = crate::sys::ns::current_net_ns()?;
        let weak = Arc::downgrade(&me);
        let t = std::thread::Builder::new()
            .name("uet-neigh".into())
            .spawn(move || {
                // Follow the namespace of the thread that started us.
                let _ = crate::sys::ns::enter_net_ns(&ns);
                resolver(nl, &weak, cfg);
            })?;
        let _ = me.waker.set(t.thread().clone());
        if let Ok(mut g) = me.thread.lock() {
            *g = Some(t);
        }
        Ok(me)
    }

    /// Stops the resolver thread.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(w) = self.waker.get() {
            w.unpark();
        }
        if let Some(t) = self.thread.lock().ok().and_then(|mut g| g.take()) {
            let _ = t.join();
        }
    }

    /// What the resolver holds (as of its last pass).
    pub fn counts(&self) -> NeighCounts {
        let mut c = self.counts.lock().map(|g| *g).unwrap_or_default();
        c.requests_dropped = self.requests_dropped.load(Ordering::Relaxed);
        c
    }

    /// The resolver thread's id (`/proc/<pid>/task/<tid>`), once it runs.
    pub fn resolver_tid(&self) -> Option<u32> {
        match self.tid.load(Ordering::Acquire) {
            0 => None,
            t => Some(t),
        }
    }
}

impl NextHop for Neighbours {
    fn lookup(&self, dst: IpAddr) -> Option<EthernetAddress> {
        let map = self.map.load();
        let e = map.get(&dst)?;
        if let Some(u) = self.used.get(e.slot as usize)
            && !u.load(Ordering::Relaxed)
        {
            u.store(true, Ordering::Relaxed);
        }
        Some(e.mac)
    }

    fn request(&self, dst: IpAddr) {
        if self.queue.push(dst).is_err() {
            self.requests_dropped.fetch_add(1, Ordering::Relaxed);
        }
        if !self.kicked.load(Ordering::Acquire)
            && !self.kicked.swap(true, Ordering::AcqRel)
            && let Some(w) = self.waker.get()
        {
            w.unpark();
        }
    }
}

/// What the resolver needs from the kernel: a destination's next-hop MAC,
/// and when there is none, to start the kernel resolving it.
pub(crate) trait Kernel {
    /// The MAC of `dst`'s next hop if the kernel has a usable entry; when
    /// not, makes the kernel resolve the hop and returns `None`.
    fn resolve(&mut self, dst: IpAddr) -> Option<EthernetAddress>;
}

/// [`Kernel`] over rtnetlink, poking unresolved hops with a datagram.
struct NetlinkKernel {
    nl: Netlink,
    poke4: Option<UdpSocket>,
    poke6: Option<UdpSocket>,
}

impl Kernel for NetlinkKernel {
    fn resolve(&mut self, dst: IpAddr) -> Option<EthernetAddress> {
        let r = route(&self.nl, dst).ok()??;
        if let Ok(Some(mac)) = neighbour(&self.nl, r.hop, r.oif) {
            return Some(mac);
        }
        // Any datagram to the hop makes the kernel resolve it (the peer
        // discards it).
        let s = if r.hop.is_ipv4() {
            &self.poke4
        } else {
            &self.poke6
        };
        if let Some(s) = s {
            let _ = s.send_to(&[], SocketAddr::new(r.hop, 9));
        }
        None
    }
}

#[derive(Debug, Clone, Copy)]
enum State {
    /// Not resolved: `attempts` failed so far; next try at `next_try`.
    Pending { attempts: u32, next_try: Instant },
    /// Published with `mac` in `slot`; re-read from the kernel at
    /// `checked + refresh`; the kernel lost it at `lost_since`.
    Resolved {
        mac: EthernetAddress,
        slot: u32,
        checked: Instant,
        lost_since: Option<Instant>,
    },
}

#[derive(Debug, Clone, Copy)]
struct Want {
    state: State,
    /// The last request, or the last time a lookup was seen to use it.
    last_asked: Instant,
}

/// The resolver's table: what is wanted, what is resolved, what is due.
/// No I/O and no clock of its own (the kernel and `now` are passed in),
/// so its rules are tested with a fake kernel and a made-up clock.
#[derive(Debug)]
pub(crate) struct Table {
    cfg: NeighConfig,
    wants: FxHashMap<IpAddr, Want>,
    free_slots: Vec<u32>,
    /// The published map is out of date.
    dirty: bool,
    counts: NeighCounts,
}

impl Table {
    pub(crate) fn new(cfg: NeighConfig) -> Self {
        let n = u32::try_from(cfg.max_destinations).unwrap_or(u32::MAX);
        Self {
            cfg,
            wants: FxHashMap::default(),
            free_slots: (0..n).rev().collect(),
            dirty: false,
            counts: NeighCounts::default(),
        }
    }

    /// A request for `dst`: a new destination is tried at the next pass; a
    /// known one only counts as asked for (a pending one keeps its
    /// backoff).
    pub(crate) fn ask(&mut self, dst: IpAddr, now: Instant) {
        if let Some(w) = self.wants.get_mut(&dst) {
            w.last_asked = now;
            return;
        }
        if self.wants.len() >= self.cfg.max_destinations && !self.evict_pending() {
            self.counts.refused += 1;
            return;
        }
        self.wants.insert(
            dst,
            Want {
                state: State::Pending {
                    attempts: 0,
                    next_try: now,
                },
                last_asked: now,
            },
        );
    }

    /// Evicts the least recently asked sixteenth (at least one) of the
    /// pending destinations; false when none is pending.
    fn evict_pending(&mut self) -> bool {
        let mut pending: Vec<(Instant, IpAddr)> = self
            .wants
            .iter()
            .filter(|(_, w)| matches!(w.state, State::Pending { .. }))
            .map(|(d, w)| (w.last_asked, *d))
            .collect();
        if pending.is_empty() {
            return false;
        }
        let k = (pending.len() / 16).max(1);
        if k < pending.len() {
            pending.select_nth_unstable(k - 1);
        }
        for (_, d) in &pending[..k] {
            self.wants.remove(d);
        }
        self.counts.evicted += k as u64;
        true
    }

    /// Does what is due at `now`: tries pending destinations whose time
    /// came, re-reads resolved ones whose refresh came (taking their "used"
    /// flag from `used`), forgets what nothing asked for.
    pub(crate) fn run(&mut self, now: Instant, kernel: &mut dyn Kernel, used: &[AtomicBool]) {
        let mut forget: Vec<IpAddr> = Vec::new();
        for (&dst, w) in &mut self.wants {
            match w.state {
                State::Pending { attempts, next_try } => {
                    if now.saturating_duration_since(w.last_asked) >= self.cfg.forget_after {
                        forget.push(dst);
                        continue;
                    }
                    if next_try > now {
                        continue;
                    }
                    self.counts.attempts += 1;
                    if let Some(mac) = kernel.resolve(dst) {
                        let Some(slot) = self.free_slots.pop() else {
                            // Cannot happen: a slot per destination.
                            continue;
                        };
                        if let Some(u) = used.get(slot as usize) {
                            u.store(false, Ordering::Relaxed);
                        }
                        w.state = State::Resolved {
                            mac,
                            slot,
                            checked: now,
                            lost_since: None,
                        };
                        self.dirty = true;
                    } else {
                        let attempts = attempts.saturating_add(1);
                        w.state = State::Pending {
                            attempts,
                            next_try: now + backoff(&self.cfg, attempts),
                        };
                    }
                }
                State::Resolved {
                    mac,
                    slot,
                    checked,
                    lost_since,
                } => {
                    if now.saturating_duration_since(checked) < self.cfg.refresh {
                        continue;
                    }
                    if used
                        .get(slot as usize)
                        .is_some_and(|u| u.swap(false, Ordering::Relaxed))
                    {
                        w.last_asked = now;
                    }
                    if now.saturating_duration_since(w.last_asked) >= self.cfg.forget_after {
                        forget.push(dst);
                        continue;
                    }
                    self.counts.attempts += 1;
                    match kernel.resolve(dst) {
                        Some(m) => {
                            if m != mac {
                                self.dirty = true;
                            }
                            w.state = State::Resolved {
                                mac: m,
                                slot,
                                checked: now,
                                lost_since: None,
                            };
                        }
                        None => {
                            let since = lost_since.unwrap_or(now);
                            if now.saturating_duration_since(since) >= self.cfg.lost_grace {
                                self.free_slots.push(slot);
                                w.state = State::Pending {
                                    attempts: 1,
                                    next_try: now + self.cfg.backoff_min,
                                };
                                self.dirty = true;
                            } else {
                                w.state = State::Resolved {
                                    mac,
                                    slot,
                                    checked: now,
                                    lost_since: Some(since),
                                };
                            }
                        }
                    }
                }
            }
        }
        for d in forget {
            if let Some(Want {
                state: State::Resolved { slot, .. },
                ..
            }) = self.wants.remove(&d)
            {
                self.free_slots.push(slot);
                self.dirty = true;
            }
            self.counts.forgotten += 1;
        }
    }

    /// When the next pass has work (`None`: nothing wanted).
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.wants
            .values()
            .map(|w| match w.state {
                State::Pending { next_try, .. } => {
                    next_try.min(w.last_asked + self.cfg.forget_after)
                }
                State::Resolved { checked, .. } => checked + self.cfg.refresh,
            })
            .min()
    }

    /// Whether the published map is out of date; clears the mark.
    pub(crate) fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// The resolved entries, for the datapath.
    fn published(&self) -> FxHashMap<IpAddr, Published> {
        self.wants
            .iter()
            .filter_map(|(d, w)| match w.state {
                State::Resolved { mac, slot, .. } => Some((*d, Published { mac, slot })),
                State::Pending { .. } => None,
            })
            .collect()
    }

    /// The MAC published for `dst`, if any.
    #[cfg(test)]
    fn mac(&self, dst: IpAddr) -> Option<EthernetAddress> {
        self.published().get(&dst).map(|p| p.mac)
    }

    pub(crate) fn counts(&self) -> NeighCounts {
        let resolved = self
            .wants
            .values()
            .filter(|w| matches!(w.state, State::Resolved { .. }))
            .count();
        NeighCounts {
            destinations: self.wants.len() as u64,
            resolved: resolved as u64,
            ..self.counts
        }
    }
}

/// The delay before the next try after `attempts` failures: `backoff_min`
/// doubling per failure, at most `backoff_max`.
fn backoff(cfg: &NeighConfig, attempts: u32) -> Duration {
    let shift = attempts.saturating_sub(1).min(30);
    cfg.backoff_min
        .saturating_mul(1 << shift)
        .min(cfg.backoff_max)
}

/// Timer-driven passes run at most this often (a pass looks at every
/// destination); requests wake the resolver at once.
const MIN_PASS_GAP: Duration = Duration::from_millis(1);
/// How long the resolver sleeps with nothing wanted (a request or `stop`
/// wakes it sooner).
const IDLE_WAIT: Duration = Duration::from_secs(1);

fn resolver(nl: Netlink, me: &std::sync::Weak<Neighbours>, cfg: NeighConfig) {
    // Non-blocking: the kernel queues a datagram to an unresolved hop on
    // the hop's neighbour entry, charged to this socket, until ARP/ND
    // answers or fails (seconds); with many unreachable hops the send
    // buffer fills, and a blocking send would stall the resolver. A poke
    // that finds it full is skipped (the hop is being resolved already, or
    // is tried again after its backoff).
    let poke = |addr: &str| {
        UdpSocket::bind(addr)
            .and_then(|s| s.set_nonblocking(true).map(|()| s))
            .ok()
    };
    let mut kernel = NetlinkKernel {
        nl,
        poke4: poke("0.0.0.0:0"),
        poke6: poke("[::]:0"),
    };
    let mut table = Table::new(cfg);
    if let Some(me) = me.upgrade() {
        // "/proc/thread-self" links to "<pid>/task/<tid>".
        let tid = std::fs::read_link("/proc/thread-self")
            .ok()
            .and_then(|p| p.file_name()?.to_str()?.parse().ok())
            .unwrap_or(0);
        me.tid.store(tid, Ordering::Release);
    }
    loop {
        let Some(me) = me.upgrade() else { return };
        if me.stop.load(Ordering::Acquire) {
            return;
        }
        // Cleared before draining: a request pushed after the drain sets it
        // again and wakes the next pass.
        me.kicked.store(false, Ordering::Release);
        let now = Instant::now();
        while let Some(d) = me.queue.pop() {
            table.ask(d, now);
        }
        table.run(now, &mut kernel, &me.used);
        if table.take_dirty() {
            me.map.store(Arc::new(table.published()));
        }
        if let Ok(mut c) = me.counts.lock() {
            *c = table.counts();
        }
        drop(me);
        let wait = table.next_due().map_or(IDLE_WAIT, |t| {
            t.saturating_duration_since(Instant::now())
                .max(MIN_PASS_GAP)
        });
        std::thread::park_timeout(wait);
    }
}

/// Next hops learnt from received frames, one table per worker, used only
/// while the kernel's table (through [`NextHop::lookup`]) has no entry.
///
/// Why keep any learning: a new peer's first frames need answers before
/// the resolver has read the kernel's entry for it (a few tens of µs
/// later); without a hint those first ACKs are lost and the peer waits for
/// a retransmission timeout. Why it cannot redirect an established peer's
/// replies:
/// - the kernel's answer always wins: the datapath looks at the kernel
///   table first, so a hint is never used for a peer the resolver has
///   published, and a frame never changes a published entry;
/// - every new hint asks the resolver for the kernel's entry, which
///   replaces it within one resolver pass when the kernel knows the peer
///   (a peer that ARPed for us), or once the kernel's ARP/ND answers;
/// - the first hint for an address stands until it expires ([`HINT_TTL`]);
///   later frames neither refresh nor replace it;
/// - at most [`HINTS_PER_WORKER`] live hints; at a full table new hints
///   are refused (the kernel resolves those peers instead), so a flood of
///   spoofed sources costs one lookup per frame and changes nothing;
/// - new operations wait for the kernel's entry (`PacketIo::ready_for`
///   ignores hints); hints carry replies and the data of exchanges the
///   peer already runs.
///
/// Without the security sublayer a frame passing the PDS's checks proves
/// no more than its headers do (an attacker on the L2 can send a valid
/// SYN), so the limits above, not the frame's contents, are what keep a
/// spoofed frame from steering traffic for longer than the kernel takes
/// to answer.
#[derive(Debug)]
pub struct Hints {
    entries: Vec<(IpAddr, EthernetAddress, Instant)>,
    cap: usize,
    ttl: Duration,
    refused: u64,
    /// The last source [`Hints::observe`] looked at.
    last_src: Option<IpAddr>,
}

impl Default for Hints {
    fn default() -> Self {
        Self::new(HINTS_PER_WORKER, HINT_TTL)
    }
}

impl Hints {
    /// At most `cap` hints, each used for `ttl` at most.
    pub fn new(cap: usize, ttl: Duration) -> Self {
        Self {
            entries: Vec::with_capacity(cap),
            cap,
            ttl,
            refused: 0,
            last_src: None,
        }
    }

    /// A frame from `src` was delivered: when `next_hop` (the kernel's
    /// table) has no entry for `src`, takes the frame's source MAC as a
    /// hint and asks `next_hop` to resolve `src`. Costs a lookup only when
    /// the source differs from the last one (frames come in runs per
    /// peer).
    pub fn observe(&mut self, next_hop: &dyn NextHop, src: IpAddr, frame: &[u8]) {
        if self.last_src == Some(src) {
            return;
        }
        self.last_src = Some(src);
        if next_hop.lookup(src).is_none()
            && let Some(mac) = frame.get(6..12).and_then(EthernetAddress::from_bytes)
            && self.glean(src, mac, Instant::now())
        {
            next_hop.request(src);
        }
    }

    /// Records `mac` as `src`'s next hop at `now`, unless `src` has a live
    /// hint already or the table is full of live ones. Returns whether a
    /// hint was recorded (the caller then asks the resolver to confirm it
    /// from the kernel).
    pub fn glean(&mut self, src: IpAddr, mac: EthernetAddress, now: Instant) -> bool {
        let ttl = self.ttl;
        self.entries
            .retain(|&(_, _, at)| now.saturating_duration_since(at) < ttl);
        if self.entries.iter().any(|&(ip, _, _)| ip == src) {
            return false;
        }
        if self.entries.len() >= self.cap {
            self.refused += 1;
            return false;
        }
        self.entries.push((src, mac, now));
        true
    }

    /// The live hint for `dst` at `now`.
    pub fn get(&self, dst: IpAddr, now: Instant) -> Option<EthernetAddress> {
        self.entries
            .iter()
            .find(|&&(ip, _, at)| ip == dst && now.saturating_duration_since(at) < self.ttl)
            .map(|&(_, mac, _)| mac)
    }

    /// Hints held (live or not yet pruned).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Hints refused at a full table (monotonic).
    pub const fn refused(&self) -> u64 {
        self.refused
    }
}

/// `RTM_GETROUTE` for `dst`: the next hop and outgoing interface.
pub(crate) fn route(nl: &Netlink, dst: IpAddr) -> std::io::Result<Option<Route>> {
    let (family, bytes, plen) = addr_bytes(dst);
    // struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope,
    // type, flags (u32).
    let mut hdr = [0u8; 12];
    hdr[0] = family;
    hdr[1] = plen;
    let mut m = Msg::new(RTM_GETROUTE, NLM_F_REQUEST, &hdr);
    m.attr(RTA_DST, &bytes);
    let mut found = None;
    nl.transact(&m.finish(), |ty, payload| {
        if ty == RTM_NEWROUTE && payload.len() >= 12 {
            let mut hop = dst;
            let mut oif = 0;
            for (t, p) in attrs(&payload[12..]) {
                match t {
                    RTA_GATEWAY => {
                        if let Some(a) = parse_addr(p) {
                            hop = a;
                        }
                    }
                    RTA_OIF if p.len() >= 4 => {
                        oif = u32::from_ne_bytes([p[0], p[1], p[2], p[3]]);
                    }
                    _ => {}
                }
            }
            found = Some(Route { hop, oif });
        }
        Ok(())
    })?;
    Ok(found)
}

/// `RTM_GETNEIGH` for `hop` on interface `oif`.
pub(crate) fn neighbour(
    nl: &Netlink,
    hop: IpAddr,
    oif: u32,
) -> std::io::Result<Option<EthernetAddress>> {
    let (family, bytes, _) = addr_bytes(hop);
    // struct ndmsg: family, pad1, pad2, ifindex (i32), state (u16),
    // flags (u8), type (u8).
    let mut hdr = [0u8; 12];
    hdr[0] = family;
    hdr[4..8].copy_from_slice(&oif.to_ne_bytes());
    let mut m = Msg::new(RTM_GETNEIGH, NLM_F_REQUEST, &hdr);
    m.attr(NDA_DST, &bytes);
    let mut found = None;
    let r = nl.transact(&m.finish(), |ty, payload| {
        if ty == RTM_NEWNEIGH && payload.len() >= 12 {
            let state = u16::from_ne_bytes([payload[8], payload[9]]);
            let flags = payload[10];
            if state & NUD_USABLE == 0 || flags & NTF_PROXY != 0 {
                return Ok(());
            }
            for (t, p) in attrs(&payload[12..]) {
                if t == NDA_LLADDR && p.len() == 6 {
                    let mut mac = [0u8; 6];
                    mac.copy_from_slice(p);
                    found = Some(EthernetAddress(mac));
                }
            }
        }
        Ok(())
    });
    match r {
        Ok(()) => Ok(found),
        // No entry at all: ENOENT.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

fn addr_bytes(a: IpAddr) -> (u8, Vec<u8>, u8) {
    match a {
        IpAddr::V4(v4) => (libc::AF_INET as u8, v4.octets().to_vec(), 32),
        IpAddr::V6(v6) => (libc::AF_INET6 as u8, v6.octets().to_vec(), 128),
    }
}

fn parse_addr(p: &[u8]) -> Option<IpAddr> {
    match p.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(p).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(p).ok()?)),
        _ => None,
    }
}

/// Work held until its destination's next hop is known, as the kernel
/// holds packets while ARP resolves, so that a transfer does not lose its
/// first window to a missing neighbour entry. The worker holds new
/// operations here (its backend's `ready_for` says whether a destination
/// is ready and, if not, requests resolution).
///
/// Items for one destination leave in arrival order; each waits at most
/// [`NextHopHold::MAX_WAIT_NS`], then goes anyway and the PDS's retry
/// budget reports a peer that does not answer. It holds no more than the
/// operations the control socket admitted (each client's are bounded
/// there).
#[derive(Debug)]
pub struct NextHopHold<T> {
    /// (held since, destination, item), in arrival order.
    held: Vec<(u64, IpAddr, T)>,
    /// Scratch for [`Self::release`]: destinations still waiting.
    waiting: Vec<IpAddr>,
}

impl<T> Default for NextHopHold<T> {
    fn default() -> Self {
        Self {
            held: Vec::new(),
            waiting: Vec::new(),
        }
    }
}

impl<T> NextHopHold<T> {
    /// How long an item waits for its next hop before it goes anyway: the
    /// kernel gives ARP ~1 s; a peer that does not answer within 100 ms is
    /// better reported by the retry budget than hidden here.
    pub const MAX_WAIT_NS: u64 = 100_000_000;
    /// How often held items look for their next hop while the worker
    /// sleeps.
    pub const RECHECK: Duration = Duration::from_micros(50);

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// `item` for `dst` arrives at `now` (ns): it is returned, to go now,
    /// when nothing for `dst` is held and `ready(dst)`; held otherwise
    /// (`ready` is not asked when an earlier item for `dst` waits).
    pub fn admit(
        &mut self,
        now: u64,
        dst: IpAddr,
        item: T,
        ready: impl FnOnce(IpAddr) -> bool,
    ) -> Option<T> {
        if self.held.iter().any(|(_, d, _)| *d == dst) || !ready(dst) {
            self.held.push((now, dst, item));
            return None;
        }
        Some(item)
    }

    /// Hands `go` every held item, in order, whose destination is ready or
    /// whose wait has expired at `now`, except behind an earlier item for
    /// the same destination that still waits. Returns how many went.
    pub fn release(
        &mut self,
        now: u64,
        mut ready: impl FnMut(IpAddr) -> bool,
        mut go: impl FnMut(T),
    ) -> usize {
        if self.held.is_empty() {
            return 0;
        }
        let mut went = 0;
        self.waiting.clear();
        let held = std::mem::take(&mut self.held);
        for (since, dst, item) in held {
            let expired = now.saturating_sub(since) >= Self::MAX_WAIT_NS;
            if !self.waiting.contains(&dst) && (expired || ready(dst)) {
                go(item);
                went += 1;
            } else {
                self.waiting.push(dst);
                self.held.push((since, dst, item));
            }
        }
        went
    }

    /// How long the worker may sleep given its own `timeout`: at most
    /// [`Self::RECHECK`] while anything is held.
    pub fn sleep_bound(&self, timeout: Option<Duration>) -> Option<Duration> {
        if self.held.is_empty() {
            timeout
        } else {
            Some(timeout.map_or(Self::RECHECK, |t| t.min(Self::RECHECK)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_work_leaves_in_order_per_destination_when_ready_or_expired() {
        use std::net::Ipv4Addr;
        let (a, b) = (
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        );
        let mut h = NextHopHold::default();
        let mut asked = Vec::new();
        // a is not ready: held; the next item for a is held without asking.
        assert_eq!(
            h.admit(0, a, 1, |d| {
                asked.push(d);
                false
            }),
            None
        );
        assert_eq!(
            h.admit(10, a, 2, |d| {
                asked.push(d);
                true
            }),
            None
        );
        assert_eq!(asked, [a]);
        // b is ready: goes at once.
        assert_eq!(h.admit(20, b, 3, |_| true), Some(3));
        assert_eq!(h.admit(30, b, 4, |_| false), None);
        assert!(!h.is_empty());
        assert_eq!(
            h.sleep_bound(Some(Duration::from_secs(1))),
            Some(NextHopHold::<u32>::RECHECK)
        );
        // b becomes ready, a does not: only b's item goes.
        let mut went = Vec::new();
        assert_eq!(h.release(40, |d| d == b, |i| went.push(i)), 1);
        assert_eq!(went, [4]);
        // a's wait expires: both of a's go, in order.
        let t = NextHopHold::<u32>::MAX_WAIT_NS;
        assert_eq!(h.release(t, |_| false, |i| went.push(i)), 1);
        assert_eq!(h.release(t + 10, |_| false, |i| went.push(i)), 1);
        assert_eq!(went, [4, 1, 2]);
        assert!(h.is_empty());
        assert_eq!(h.sleep_bound(None), None);
    }

    /// A kernel whose table the test sets, recording when each
    /// destination was asked for.
    #[derive(Default)]
    struct FakeKernel {
        table: FxHashMap<IpAddr, EthernetAddress>,
        asked: Vec<IpAddr>,
    }

    impl Kernel for FakeKernel {
        fn resolve(&mut self, dst: IpAddr) -> Option<EthernetAddress> {
            self.asked.push(dst);
            self.table.get(&dst).copied()
        }
    }

    fn ip(i: u32) -> IpAddr {
        IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i))
    }

    const MAC_A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xa]);
    const MAC_B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xb]);

    fn flags(n: usize) -> Vec<AtomicBool> {
        (0..n).map(|_| AtomicBool::new(false)).collect()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn an_unresolved_destination_is_retried_with_doubling_backoff_up_to_the_cap() {
        let cfg = NeighConfig::default();
        let mut t = Table::new(cfg);
        let mut k = FakeKernel::default();
        let used = flags(cfg.max_destinations);
        let t0 = Instant::now();
        t.ask(ip(1), t0);
        // Step a made-up clock by 1 ms for 5 s, asking for the destination
        // all along (as a sender that keeps missing would).
        let mut tries = Vec::new();
        for step in 0..=5000u64 {
            let now = t0 + ms(step);
            t.ask(ip(1), now);
            let before = k.asked.len();
            t.run(now, &mut k, &used);
            if k.asked.len() > before {
                tries.push(step);
            }
        }
        // Tried at once, then after 1, 2, 4, … ms, then every second.
        assert_eq!(
            tries,
            [
                0, 1, 3, 7, 15, 31, 63, 127, 255, 511, 1023, 2023, 3023, 4023
            ]
        );
        assert_eq!(t.next_due(), Some(t0 + ms(5023)));
        assert_eq!(t.mac(ip(1)), None);
        // The kernel answers: published at the next try.
        k.table.insert(ip(1), MAC_A);
        t.run(t0 + ms(5023), &mut k, &used);
        assert_eq!(t.mac(ip(1)), Some(MAC_A));
        assert!(t.take_dirty());
    }

    #[test]
    fn destinations_nothing_asks_for_are_forgotten_and_the_table_goes_quiet() {
        let cfg = NeighConfig::default();
        let mut t = Table::new(cfg);
        let mut k = FakeKernel::default();
        let used = flags(cfg.max_destinations);
        let t0 = Instant::now();
        for i in 0..2000 {
            t.ask(ip(i), t0);
        }
        k.table.insert(ip(0), MAC_A);
        let mut now = t0;
        while let Some(due) = t.next_due() {
            now = due.max(now + MIN_PASS_GAP);
            t.run(now, &mut k, &used);
            assert!(now < t0 + Duration::from_secs(60), "{:?}", t.counts());
        }
        // Pending ones go forget_after after the last request; the resolved
        // one (never used) at its first refresh after that.
        let c = t.counts();
        assert_eq!((c.destinations, c.resolved, c.forgotten), (0, 0, 2000));
        assert!(now <= t0 + cfg.forget_after + cfg.refresh, "{now:?}");
        assert_eq!(t.mac(ip(0)), None);
        // Nothing left to do: no wake-up is due.
        assert_eq!(t.next_due(), None);
        let asked = k.asked.len();
        t.run(now + Duration::from_secs(100), &mut k, &used);
        assert_eq!(k.asked.len(), asked);
    }

    #[test]
    fn a_resolved_destination_in_use_stays_and_follows_the_kernel() {
        let cfg = NeighConfig::default();
        let mut t = Table::new(cfg);
        let mut k = FakeKernel::default();
        let used = flags(cfg.max_destinations);
        let t0 = Instant::now();
        k.table.insert(ip(7), MAC_A);
        t.ask(ip(7), t0);
        t.run(t0, &mut k, &used);
        let slot = match t.wants[&ip(7)].state {
            State::Resolved { slot, .. } => slot as usize,
            State::Pending { .. } => panic!("not resolved"),
        };
        // Used (as lookup marks it) every second for a minute: kept.
        for s in 1..=60u64 {
            used[slot].store(true, Ordering::Relaxed);
            t.run(t0 + Duration::from_secs(s), &mut k, &used);
        }
        assert_eq!(t.mac(ip(7)), Some(MAC_A));
        // The kernel's entry changes: followed at the next refresh.
        k.table.insert(ip(7), MAC_B);
        used[slot].store(true, Ordering::Relaxed);
        t.run(t0 + Duration::from_secs(61), &mut k, &used);
        assert_eq!(t.mac(ip(7)), Some(MAC_B));
        // The kernel loses it: the last MAC stays for lost_grace while the
        // kernel re-resolves, then the entry is unpublished and retried.
        k.table.remove(&ip(7));
        for s in 62..=64u64 {
            used[slot].store(true, Ordering::Relaxed);
            t.run(t0 + Duration::from_secs(s), &mut k, &used);
            assert_eq!(t.mac(ip(7)), Some(MAC_B), "at {s} s");
        }
        used[slot].store(true, Ordering::Relaxed);
        t.run(t0 + Duration::from_secs(65), &mut k, &used);
        assert_eq!(t.mac(ip(7)), None);
        assert_eq!(t.counts().destinations, 1, "still wanted, pending");
    }

    #[test]
    fn a_full_table_evicts_pending_destinations_never_resolved_ones() {
        let cfg = NeighConfig {
            max_destinations: 64,
            ..NeighConfig::default()
        };
        let mut t = Table::new(cfg);
        let mut k = FakeKernel::default();
        let used = flags(cfg.max_destinations);
        let t0 = Instant::now();
        for i in 0..8 {
            k.table.insert(ip(i), MAC_A);
            t.ask(ip(i), t0);
        }
        t.run(t0, &mut k, &used);
        assert_eq!(t.counts().resolved, 8);
        // A flood of new destinations that never resolve.
        for i in 1000..11_000 {
            t.ask(ip(i), t0 + Duration::from_micros(u64::from(i)));
            assert!(t.wants.len() <= 64);
        }
        t.run(t0 + ms(11), &mut k, &used);
        let c = t.counts();
        // Evictions go a sixteenth of the pending ones at a time.
        assert!((61..=64).contains(&c.destinations), "{c:?}");
        assert_eq!(c.resolved, 8, "{c:?}");
        assert!(c.evicted >= 10_000 - 56, "{c:?}");
        for i in 0..8 {
            assert_eq!(t.mac(ip(i)), Some(MAC_A));
        }
        // The most recently asked flood entries are the ones kept.
        assert!(t.wants.contains_key(&ip(10_999)));
        // A table full of resolved ones refuses newcomers.
        let mut full = Table::new(NeighConfig {
            max_destinations: 2,
            ..cfg
        });
        for i in 0..2 {
            full.ask(ip(i), t0);
        }
        full.run(t0, &mut k, &used);
        full.ask(ip(5000), t0);
        let c = full.counts();
        assert_eq!((c.destinations, c.resolved, c.refused), (2, 2, 1));
    }

    #[test]
    fn hints_first_wins_expire_and_are_bounded() {
        let t0 = Instant::now();
        let mut h = Hints::new(4, ms(1000));
        assert!(h.glean(ip(1), MAC_A, t0));
        // A later frame claiming another MAC changes nothing.
        assert!(!h.glean(ip(1), MAC_B, t0 + ms(1)));
        assert_eq!(h.get(ip(1), t0 + ms(999)), Some(MAC_A));
        // Expired: not used, and a new hint may be taken.
        assert_eq!(h.get(ip(1), t0 + ms(1000)), None);
        assert!(h.glean(ip(1), MAC_B, t0 + ms(1000)));
        assert_eq!(h.get(ip(1), t0 + ms(1001)), Some(MAC_B));
        // Bounded: a flood of sources fills the table, the rest is refused
        // until hints expire.
        for i in 2..10_000 {
            h.glean(ip(i), MAC_A, t0 + ms(1001));
            assert!(h.len() <= 4);
        }
        assert_eq!(h.refused(), 10_000 - 2 - 3);
        assert_eq!(h.get(ip(9999), t0 + ms(1001)), None);
        assert!(h.glean(ip(9999), MAC_A, t0 + ms(2001)));
        assert_eq!(h.len(), 1);
    }
    use uet_lab::netns::{NetNs, veth_pair};

    fn mac_of(ns: &NetNs, ifname: &str) -> EthernetAddress {
        let out = ns.ip(&["-o", "link", "show", ifname]).unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let at = text.find("link/ether ").unwrap() + "link/ether ".len();
        let mut mac = [0u8; 6];
        for (i, h) in text[at..at + 17].split(':').enumerate() {
            mac[i] = u8::from_str_radix(h, 16).unwrap();
        }
        EthernetAddress(mac)
    }

    #[test]
    fn resolves_an_on_link_peer_the_kernel_has_not_seen_and_ignores_a_missing_one() {
        let a = NetNs::create("uet-n").unwrap();
        let b = NetNs::create("uet-n").unwrap();
        veth_pair(&a, "v0", "10.83.0.1/24", &b, "v1", "10.83.0.2/24", 1500).unwrap();
        let want = mac_of(&b, "v1");
        let got = a
            .run(move || {
                let n = Neighbours::start().unwrap();
                let peer: IpAddr = "10.83.0.2".parse().unwrap();
                let ghost: IpAddr = "10.83.0.99".parse().unwrap();
                assert_eq!(n.lookup(peer), None, "nothing before a request");
                n.request(peer);
                n.request(ghost);
                let deadline = Instant::now() + Duration::from_secs(10);
                let mut got = None;
                while got.is_none() && Instant::now() < deadline {
                    got = n.lookup(peer);
                    std::thread::yield_now();
                }
                assert_eq!(n.lookup(ghost), None);
                n.stop();
                got
            })
            .unwrap();
        assert_eq!(got, Some(want));
    }
}
