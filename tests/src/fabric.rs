//! A deterministic, virtual-time fabric: hosts, switches, links with rate
//! and latency, drop-tail egress queues, ECN marking, trimming and
//! impairments (`docs/architecture.md` §2 "tests/", the smoltcp `tests/netsim.rs` and
//! turmoil models).
//!
//! Time only moves when the fabric steps to the earliest of the next event
//! (a packet finishing serialization, a packet arriving) and every host's
//! `poll_timeout()`. All randomness comes from one seeded generator, so a
//! run is a pure function of its seed and parameters.
//!
//! Hosts are pulled, not pushed: the fabric asks a host for a frame only
//! while its NIC queue has room, which paces every host at its link rate
//! the way a NIC's transmit ring does.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};
use std::net::IpAddr;

use uet_wire::rand::{Rng, Xoshiro256};
use uet_wire::time::{Duration, Instant};

/// What the fabric needs to know about and do to a frame. Implemented over
/// `uet-wire` in [`crate::frame_ops`]; a trait so the fabric stays a pure
/// queueing model.
pub trait FrameOps {
    /// Destination IP address (for routing), if the frame is IP.
    fn dst(&self, frame: &[u8]) -> Option<IpAddr>;
    /// Entropy value (UDP source port or entropy header), for ECMP hashing.
    fn entropy(&self, frame: &[u8]) -> u16;
    /// Whether the frame is ECN-capable.
    fn ect(&self, frame: &[u8]) -> bool;
    /// Sets ECN-CE (keeping checksums valid).
    fn mark_ce(&self, frame: &mut [u8]);
    /// Whether a switch may trim the frame (a trimmable data packet).
    fn trimmable(&self, frame: &[u8]) -> bool;
    /// Whether the frame is a retransmission marked `DSCP_TRIMMABLE_RTX`
    /// (trimmed above [`Trimming::rtx_threshold`]).
    fn trimmable_rtx(&self, frame: &[u8]) -> bool {
        let _ = frame;
        false
    }
    /// Trims the frame to `ip_payload` bytes of IP payload and re-marks its
    /// DSCP with `dscp`; returns the new frame length.
    fn trim(&self, frame: &mut [u8], ip_payload: usize, dscp: u8) -> usize;
}

/// An endpoint attached to the fabric (a sans-IO engine and its glue).
pub trait Host {
    /// A frame arrived.
    fn handle_frame(&mut self, now: Instant, frame: &mut [u8]);
    /// The host's timer is due.
    fn handle_timeout(&mut self, now: Instant);
    /// The next frame to send, written into `buf`; its length.
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize>;
    /// When the host wants `handle_timeout`.
    fn poll_timeout(&self) -> Option<Instant>;
}

/// ECN marking on an egress queue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EcnMarking {
    /// Never mark.
    Off,
    /// Mark when the queue holds more than this many bytes.
    Threshold(u64),
    /// Mark with probability rising linearly from 0 at `kmin` to 1 at `kmax`
    /// bytes (RED-like, spec §6 "0.2–0.8 × Plane_BDP").
    Linear {
        /// Lower threshold in bytes.
        kmin: u64,
        /// Upper threshold in bytes.
        kmax: u64,
    },
}

/// Trimming on an egress queue (spec §7): a trimmable packet that would
/// overflow (or exceed `threshold` bytes of queue) is cut to `ip_payload`
/// bytes of IP payload, re-marked with `dscp`, and queued with priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trimming {
    /// Queue depth in bytes above which packets are trimmed.
    pub threshold: u64,
    /// IP payload bytes kept (spec MIN_TRIM_SIZE: 24 for UET/UDP).
    pub ip_payload: usize,
    /// DSCP of trimmed packets.
    pub dscp: u8,
    /// DSCP of packets trimmed on a port that leads to a host (the last
    /// hop: `DSCP_TRIMMED_LASTHOP`, §7), if distinct from `dscp`.
    pub dscp_last_hop: Option<u8>,
    /// Queue depth above which retransmissions marked
    /// `DSCP_TRIMMABLE_RTX` are trimmed (spec §6: 1.5 × Plane_BDP where the
    /// others are trimmed at Plane_BDP); `None`: the same `threshold`.
    pub rtx_threshold: Option<u64>,
}

impl Trimming {
    /// UET trimming above `threshold` bytes of queue (retransmissions
    /// above 1.5 × `threshold`, §6): 24 bytes of IP payload kept
    /// (MIN_TRIM_SIZE, §7), DSCP_TRIMMED 16 and DSCP_TRIMMED_LASTHOP 18
    /// (ASTERIA's example values, as `uet_wire::encap` decodes them).
    #[must_use]
    pub const fn uet(threshold: u64) -> Self {
        Self {
            threshold,
            ip_payload: 24,
            dscp: 16,
            dscp_last_hop: Some(18),
            rtx_threshold: Some(threshold + threshold / 2),
        }
    }
}

/// Faults applied to packets leaving a port.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Impairments {
    /// Probability a packet is lost.
    pub loss: f64,
    /// Probability a packet is delayed by an extra `reorder_delay`.
    pub reorder: f64,
    /// The extra delay of a reordered packet.
    pub reorder_delay: Duration,
    /// Probability a packet is delivered twice.
    pub duplicate: f64,
    /// Probability one byte of a packet is flipped (the receiver's
    /// checksum must drop it).
    pub corrupt: f64,
    /// Windows `[start, end)` in which every packet is lost.
    pub blackouts: Vec<(Instant, Instant)>,
    /// Each frame's latency grows by a uniform random [0, `jitter`], never
    /// overtaking the frame before it on the same link: the timing noise
    /// of real NICs and switch pipelines. Without it, senders at equal
    /// rates keep a fixed phase, and a drop-tail or trimming queue picks
    /// the same flow's packets every time (Floyd and Jacobson's "phase
    /// effects", 1992).
    pub jitter: Duration,
}

/// A host that loses its CPU now and then, as a vCPU of a busy VM does:
/// for `length` at a time, at intervals drawn uniformly from
/// `[0, 2 × every]` (mean `every`), it handles no frame and no timer and
/// sends nothing. The frames that reach it meanwhile wait in its NIC's
/// receive ring and are handled in one batch when it runs again, before it
/// sends anything (what a datapath polling its ring in batches does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pauses {
    /// The mean interval between pauses.
    pub every: Duration,
    /// How long each pause lasts.
    pub length: Duration,
}

/// Parameters of one direction of a link.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkParams {
    /// Bits per second.
    pub rate_bps: u64,
    /// One-way propagation latency.
    pub latency: Duration,
    /// Egress queue capacity in bytes (drop-tail).
    pub buffer: u64,
    /// ECN marking.
    pub ecn: EcnMarking,
    /// Trimming, if enabled.
    pub trim: Option<Trimming>,
    /// Faults.
    pub impair: Impairments,
}

impl LinkParams {
    /// A clean link: `rate_bps`, `latency`, a buffer of `buffer` bytes.
    #[must_use]
    pub fn new(rate_bps: u64, latency: Duration, buffer: u64) -> Self {
        Self {
            rate_bps,
            latency,
            buffer,
            ecn: EcnMarking::Off,
            trim: None,
            impair: Impairments::default(),
        }
    }

    fn serialization(&self, bytes: usize) -> Duration {
        Duration::from_nanos((bytes as u64 * 8 * 1_000_000_000).div_ceil(self.rate_bps.max(1)))
    }
}

/// Counters of one egress port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Packets sent onto the wire.
    pub tx_packets: u64,
    /// Bytes sent onto the wire.
    pub tx_bytes: u64,
    /// Packets dropped because the queue was full.
    pub drops: u64,
    /// Of those, the ones dropped after [`Fabric::late_drops_after`].
    pub late_drops: u64,
    /// Of those, data packets (trimmable ones: header-only control packets
    /// such as probes and credit requests are not).
    pub late_data_drops: u64,
    /// Packets marked CE.
    pub ecn_marked: u64,
    /// Packets trimmed.
    pub trimmed: u64,
    /// Packets lost, duplicated or corrupted by impairments.
    pub impaired: u64,
    /// Largest queue depth seen, in bytes.
    pub peak_queue: u64,
}

/// Index of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub usize);

/// Index of an egress port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortId(pub usize);

#[derive(Debug)]
struct Port {
    to: NodeId,
    params: LinkParams,
    queue: VecDeque<Vec<u8>>,
    queued_bytes: u64,
    /// The host whose NIC this port is, if any.
    owner: Option<usize>,
    /// Trimmed frames waiting at the front of `queue` (behind the one on
    /// the wire): the high-priority class, FIFO among themselves.
    prio: usize,
    busy: bool,
    stats: PortStats,
    /// When the last frame sent on this link arrives (jitter keeps FIFO).
    last_arrive: Instant,
}

enum Node {
    Host {
        host: Box<dyn Host>,
        nic: PortId,
    },
    Switch {
        /// Routes: destination → candidate egress ports (ECMP by entropy).
        routes: Vec<(IpAddr, Vec<PortId>)>,
        default: Vec<PortId>,
    },
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The head of a port's queue finished serialization.
    TxDone(PortId),
    /// A frame reaches a node.
    Arrive(NodeId, Vec<u8>),
    /// The scenario asked to look at a host at this time
    /// ([`Fabric::wake_at`]).
    Wake(NodeId),
    /// A host with [`Pauses`] stops running.
    Pause(NodeId),
    /// A paused host runs again.
    Resume(NodeId),
}

/// The fabric.
pub struct Fabric<O: FrameOps> {
    now: Instant,
    seq: u64,
    events: BinaryHeap<Reverse<(Instant, u64, Event)>>,
    nodes: Vec<Node>,
    ports: Vec<Port>,
    ops: O,
    rng: Xoshiro256,
    buf: Vec<u8>,
    /// Frames a host handed over that could not be routed.
    pub unroutable: u64,
    /// Host-side queue room: a host is polled while its NIC queue holds
    /// fewer than this many bytes.
    pub nic_queue_bytes: u64,
    /// Break ties between events at the same nanosecond at random (seeded)
    /// instead of in scheduling order. In a synchronized incast every
    /// sender's packet reaches the switch at the same instants; in
    /// scheduling order they queue in node order, so the same senders
    /// always find the queue full and are the ones trimmed or dropped. A
    /// real switch arbitrates between its ingress ports. Off by default:
    /// the published tables and CI use scheduling order.
    pub random_ties: bool,
    /// Drops after this instant also count as [`PortStats::late_drops`]
    /// (an incast's drops after its first round trip).
    pub late_drops_after: Option<Instant>,
    /// Per node: the host's timer as last read, and its bookkeeping.
    slots: Vec<HostSlot>,
    /// Host timers, earliest first: (when, node index).
    timers: BTreeSet<(Instant, usize)>,
    /// Hosts to poll for frames: interacted with since their last poll.
    dirty: Vec<usize>,
    /// Hosts interacted with since the last [`Fabric::take_touched`].
    touched: Vec<usize>,
    /// Per node: the frames that reached a paused host, in arrival order.
    held: Vec<Vec<Vec<u8>>>,
}

/// What the fabric remembers about a host between interactions. A host's
/// `poll_timeout` and `poll_transmit` can only change when the fabric (or
/// the scenario, through [`Fabric::touch`]) interacts with it, so it is
/// polled and its timer re-read only then: every step stays O(log hosts)
/// instead of O(hosts), which is what makes 1023-sender incasts finish.
#[derive(Debug, Clone, Copy, Default)]
struct HostSlot {
    timer: Option<Instant>,
    dirty: bool,
    touched: bool,
    /// Polling stopped because its NIC queue was full; the NIC draining
    /// makes it dirty again.
    nic_blocked: bool,
    /// Its pauses, if it has any ([`Fabric::pause_host`]).
    pauses: Option<Pauses>,
    /// Paused: it neither handles frames or timers nor sends.
    paused: bool,
}

impl<O: FrameOps> core::fmt::Debug for Fabric<O> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Fabric")
            .field("now", &self.now)
            .field("nodes", &self.nodes.len())
            .field("ports", &self.ports)
            .finish_non_exhaustive()
    }
}

impl<O: FrameOps> Fabric<O> {
    /// An empty fabric at time zero.
    pub fn new(ops: O, seed: u64) -> Self {
        Self {
            now: Instant::ZERO,
            seq: 0,
            events: BinaryHeap::new(),
            nodes: Vec::new(),
            ports: Vec::new(),
            ops,
            rng: Xoshiro256::seed_from_u64(seed),
            buf: vec![0u8; 65_536],
            unroutable: 0,
            nic_queue_bytes: 2 * 9_000,
            random_ties: false,
            late_drops_after: None,
            slots: Vec::new(),
            timers: BTreeSet::new(),
            dirty: Vec::new(),
            touched: Vec::new(),
            held: Vec::new(),
        }
    }

    /// Gives host `id` [`Pauses`] from now on.
    pub fn pause_host(&mut self, id: NodeId, pauses: Pauses) {
        if let Some(slot) = self.slots.get_mut(id.0) {
            slot.pauses = Some(pauses);
            self.schedule_pause(id.0);
        }
    }

    fn schedule_pause(&mut self, i: usize) {
        if let Some(p) = self.slots[i].pauses {
            let gap = self.rng.below(2 * p.every.as_nanos() as u64 + 1);
            self.schedule(
                self.now + Duration::from_nanos(gap),
                Event::Pause(NodeId(i)),
            );
        }
    }

    /// The scenario changed host `id` from outside (submitted work, for
    /// instance): poll it for frames and re-read its timer before the next
    /// step.
    pub fn touch(&mut self, id: NodeId) {
        self.mark(id.0);
    }

    /// Makes the fabric step at `at` and report host `id` as touched then,
    /// so a scenario can act on it at that time (a delayed start, for
    /// instance) even if nothing else happens at that instant.
    pub fn wake_at(&mut self, at: Instant, id: NodeId) {
        self.schedule(at.max(self.now), Event::Wake(id));
    }

    /// Hosts the fabric (or [`touch`](Self::touch)) interacted with since
    /// the last call, in node order: only these can have new completions.
    pub fn take_touched(&mut self) -> Vec<NodeId> {
        let mut v = core::mem::take(&mut self.touched);
        v.sort_unstable();
        for &i in &v {
            self.slots[i].touched = false;
        }
        v.into_iter().map(NodeId).collect()
    }

    fn mark(&mut self, i: usize) {
        let Some(slot) = self.slots.get_mut(i) else {
            return;
        };
        if !slot.dirty {
            slot.dirty = true;
            self.dirty.push(i);
        }
        if !slot.touched {
            slot.touched = true;
            self.touched.push(i);
        }
    }

    /// Re-reads host `i`'s timer.
    fn refresh_timer(&mut self, i: usize) {
        let Node::Host { host, .. } = &self.nodes[i] else {
            return;
        };
        let t = host.poll_timeout();
        let slot = &mut self.slots[i];
        if slot.timer != t {
            if let Some(old) = slot.timer {
                self.timers.remove(&(old, i));
            }
            if let Some(new) = t {
                self.timers.insert((new, i));
            }
            slot.timer = t;
        }
    }

    /// Current virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Adds a switch.
    pub fn add_switch(&mut self) -> NodeId {
        self.nodes.push(Node::Switch {
            routes: Vec::new(),
            default: Vec::new(),
        });
        NodeId(self.nodes.len() - 1)
    }

    /// Adds a host attached to `switch` by a link with `up` parameters
    /// (host → switch) and `down` (switch → host); `addr` routes to it.
    pub fn add_host(
        &mut self,
        host: Box<dyn Host>,
        addr: IpAddr,
        switch: NodeId,
        up: LinkParams,
        down: LinkParams,
    ) -> NodeId {
        let id = NodeId(self.nodes.len());
        let nic = self.add_port(switch, up);
        self.ports[nic.0].owner = Some(id.0);
        self.nodes.push(Node::Host { host, nic });
        self.slots.resize(self.nodes.len(), HostSlot::default());
        self.held.resize(self.nodes.len(), Vec::new());
        self.mark(id.0);
        let downlink = self.add_port(id, down);
        self.add_route(switch, addr, vec![downlink]);
        id
    }

    /// Joins two switches with a link each way; returns (a→b, b→a).
    pub fn connect(&mut self, a: NodeId, b: NodeId, params: LinkParams) -> (PortId, PortId) {
        let ab = self.add_port(b, params.clone());
        let ba = self.add_port(a, params);
        (ab, ba)
    }

    /// Routes `dst` at `switch` over `ports` (several = ECMP by entropy).
    pub fn add_route(&mut self, switch: NodeId, dst: IpAddr, ports: Vec<PortId>) {
        if let Some(Node::Switch { routes, .. }) = self.nodes.get_mut(switch.0) {
            routes.push((dst, ports));
        }
    }

    /// Default route of `switch` (ECMP over `ports`).
    pub fn set_default_route(&mut self, switch: NodeId, ports: Vec<PortId>) {
        if let Some(Node::Switch { default, .. }) = self.nodes.get_mut(switch.0) {
            *default = ports;
        }
    }

    /// Egress port parameters, e.g. to change impairments mid-run.
    pub fn link_mut(&mut self, port: PortId) -> &mut LinkParams {
        &mut self.ports[port.0].params
    }

    /// Counters of an egress port.
    pub fn port_stats(&self, port: PortId) -> &PortStats {
        &self.ports[port.0].stats
    }

    /// Current queue depth of an egress port in bytes.
    pub fn queue_bytes(&self, port: PortId) -> u64 {
        self.ports[port.0].queued_bytes
    }

    /// The NIC (uplink) port of a host.
    pub fn nic(&self, host: NodeId) -> Option<PortId> {
        match self.nodes.get(host.0) {
            Some(Node::Host { nic, .. }) => Some(*nic),
            _ => None,
        }
    }

    /// The port of `switch` that leads to `dst` (first ECMP member).
    pub fn port_towards(&self, switch: NodeId, dst: IpAddr) -> Option<PortId> {
        match self.nodes.get(switch.0) {
            Some(Node::Switch { routes, .. }) => routes
                .iter()
                .find(|(a, _)| *a == dst)
                .and_then(|(_, p)| p.first().copied()),
            _ => None,
        }
    }

    /// Every port's counters, summed.
    pub fn total_stats(&self) -> PortStats {
        let mut t = PortStats::default();
        for p in &self.ports {
            t.tx_packets += p.stats.tx_packets;
            t.tx_bytes += p.stats.tx_bytes;
            t.drops += p.stats.drops;
            t.late_drops += p.stats.late_drops;
            t.late_data_drops += p.stats.late_data_drops;
            t.ecn_marked += p.stats.ecn_marked;
            t.trimmed += p.stats.trimmed;
            t.impaired += p.stats.impaired;
            t.peak_queue = t.peak_queue.max(p.stats.peak_queue);
        }
        t
    }

    /// Borrow a host back, e.g. to submit work or read results.
    pub fn host_mut(&mut self, id: NodeId) -> Option<&mut dyn Host> {
        self.mark(id.0);
        match self.nodes.get_mut(id.0) {
            Some(Node::Host { host, .. }) => Some(host.as_mut()),
            _ => None,
        }
    }

    fn add_port(&mut self, to: NodeId, params: LinkParams) -> PortId {
        self.ports.push(Port {
            to,
            params,
            queue: VecDeque::new(),
            queued_bytes: 0,
            owner: None,
            prio: 0,
            busy: false,
            stats: PortStats::default(),
            last_arrive: Instant::ZERO,
        });
        PortId(self.ports.len() - 1)
    }

    /// Events at the same instant run in the order they were scheduled,
    /// or with [`Fabric::random_ties`] in an order drawn from the fabric's
    /// seeded generator (the high 32 bits of the key; the low 32 keep it
    /// unique).
    fn schedule(&mut self, at: Instant, ev: Event) {
        self.seq += 1;
        let key = if self.random_ties {
            (self.rng.next_u64() & !0xffff_ffff) | (self.seq & 0xffff_ffff)
        } else {
            self.seq
        };
        self.events.push(Reverse((at, key, ev)));
    }

    /// Runs until `deadline` or until nothing can happen any more; returns
    /// whether the fabric went quiet (no events, no host timers).
    pub fn run_until(&mut self, deadline: Instant) -> bool {
        loop {
            self.poll_hosts();
            let next_event = self.events.peek().map(|Reverse((t, _, _))| *t);
            let next_timer = self.next_host_timer();
            let next = match (next_event, next_timer) {
                (None, None) => return true,
                (a, b) => a.into_iter().chain(b).min().unwrap_or(deadline),
            };
            if next > deadline {
                self.now = deadline;
                return false;
            }
            self.now = self.now.max(next);
            if next_event == Some(next) {
                if let Some(Reverse((_, _, ev))) = self.events.pop() {
                    self.process(ev);
                }
            } else {
                self.fire_timers();
            }
        }
    }

    /// Runs until `done` holds (checked after every step) or `deadline`;
    /// returns whether `done` held.
    pub fn run_while(
        &mut self,
        deadline: Instant,
        mut done: impl FnMut(&mut Self) -> bool,
    ) -> bool {
        loop {
            if done(self) {
                return true;
            }
            // Hosts `done` touched may send before the earliest event known
            // so far: poll them first, or the step would run past their
            // frames without calling `done` in between.
            self.poll_hosts();
            let step_to = self
                .events
                .peek()
                .map(|Reverse((t, _, _))| *t)
                .into_iter()
                .chain(self.next_host_timer())
                .min();
            let Some(t) = step_to else {
                self.poll_hosts();
                if self.events.is_empty() && self.next_host_timer().is_none() {
                    return done(self);
                }
                continue;
            };
            if t > deadline {
                self.now = deadline;
                return done(self);
            }
            self.run_until(t);
        }
    }

    fn next_host_timer(&self) -> Option<Instant> {
        self.timers.first().map(|(t, _)| (*t).max(self.now))
    }

    fn fire_timers(&mut self) {
        let now = self.now;
        let mut due: Vec<usize> = Vec::new();
        while let Some(&(t, i)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.remove(&(t, i));
            self.slots[i].timer = None;
            due.push(i);
        }
        // Node order, as when every host was asked in turn.
        due.sort_unstable();
        for i in due {
            // A paused host's timers wait: it reads them again when it
            // resumes.
            if self.slots[i].paused {
                continue;
            }
            if let Node::Host { host, .. } = &mut self.nodes[i] {
                host.handle_timeout(now);
            }
            self.mark(i);
            self.refresh_timer(i);
        }
    }

    fn poll_hosts(&mut self) {
        let now = self.now;
        let mut list = core::mem::take(&mut self.dirty);
        // Node order, as when every host was asked in turn.
        list.sort_unstable();
        for &i in &list {
            self.slots[i].dirty = false;
            if self.slots[i].paused {
                // Polled when it resumes.
                continue;
            }
            while let Node::Host { host, nic } = &mut self.nodes[i] {
                let nic = *nic;
                if self.ports[nic.0].queued_bytes >= self.nic_queue_bytes {
                    self.slots[i].nic_blocked = true;
                    break;
                }
                let Some(len) = host.poll_transmit(now, &mut self.buf) else {
                    break;
                };
                let frame = self.buf[..len].to_vec();
                self.enqueue(nic, frame);
            }
            self.refresh_timer(i);
        }
        list.clear();
        if self.dirty.is_empty() {
            // Keep the allocation.
            self.dirty = list;
        }
    }

    fn process(&mut self, ev: Event) {
        match ev {
            Event::TxDone(port) => self.tx_done(port),
            Event::Wake(node) => self.mark(node.0),
            Event::Pause(node) => {
                let slot = &mut self.slots[node.0];
                if let Some(p) = slot.pauses {
                    slot.paused = true;
                    self.schedule(self.now + p.length, Event::Resume(node));
                }
            }
            Event::Resume(node) => {
                self.slots[node.0].paused = false;
                let held = core::mem::take(&mut self.held[node.0]);
                if let Node::Host { host, .. } = &mut self.nodes[node.0] {
                    for mut frame in held {
                        host.handle_frame(self.now, &mut frame);
                    }
                }
                self.mark(node.0);
                // Its overdue timers fire at once.
                self.slots[node.0].timer = None;
                self.timers.retain(|&(_, i)| i != node.0);
                self.refresh_timer(node.0);
                self.schedule_pause(node.0);
            }
            Event::Arrive(node, frame) if self.slots.get(node.0).is_some_and(|s| s.paused) => {
                self.held[node.0].push(frame);
            }
            Event::Arrive(node, mut frame) => match &mut self.nodes[node.0] {
                Node::Host { host, .. } => {
                    host.handle_frame(self.now, &mut frame);
                    self.mark(node.0);
                }
                Node::Switch { routes, default } => {
                    let dst = self.ops.dst(&frame);
                    let cands = dst
                        .and_then(|d| routes.iter().find(|(a, _)| *a == d))
                        .map(|(_, p)| p.as_slice())
                        .unwrap_or(default.as_slice());
                    if cands.is_empty() {
                        self.unroutable += 1;
                        return;
                    }
                    let ev = self.ops.entropy(&frame);
                    // A fixed hash of the EV picks the ECMP member (§6: a
                    // stable EV→path mapping, like static ECMP).
                    let h = (u64::from(ev).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize;
                    let port = cands[h % cands.len()];
                    self.enqueue(port, frame);
                }
            },
        }
    }

    fn enqueue(&mut self, port_id: PortId, mut frame: Vec<u8>) {
        let now = self.now;
        let last_hop = matches!(self.nodes[self.ports[port_id.0].to.0], Node::Host { .. });
        let p = &mut self.ports[port_id.0];
        let len = frame.len() as u64;
        let over = p.queued_bytes + len > p.params.buffer;
        if let Some(t) = p.params.trim
            && (over
                || p.queued_bytes + len
                    > if self.ops.trimmable_rtx(&frame) {
                        t.rtx_threshold.unwrap_or(t.threshold)
                    } else {
                        t.threshold
                    })
            && self.ops.trimmable(&frame)
        {
            let dscp = if last_hop {
                t.dscp_last_hop.unwrap_or(t.dscp)
            } else {
                t.dscp
            };
            let n = self.ops.trim(&mut frame, t.ip_payload, dscp);
            frame.truncate(n);
            p.stats.trimmed += 1;
            // Trimmed headers go to the high-priority queue: ahead of data,
            // behind the packet on the wire and earlier trimmed headers.
            let pos = (usize::from(p.busy) + p.prio).min(p.queue.len());
            p.queued_bytes += frame.len() as u64;
            p.queue.insert(pos, frame);
            p.prio += 1;
        } else if over && !p.queue.is_empty() {
            p.stats.drops += 1;
            if self.late_drops_after.is_some_and(|t| self.now > t) {
                p.stats.late_drops += 1;
                if self.ops.trimmable(&frame) {
                    p.stats.late_data_drops += 1;
                }
            }
            return;
        } else {
            let mark = match p.params.ecn {
                EcnMarking::Off => false,
                EcnMarking::Threshold(k) => p.queued_bytes > k,
                EcnMarking::Linear { kmin, kmax } => {
                    if p.queued_bytes <= kmin {
                        false
                    } else if p.queued_bytes >= kmax {
                        true
                    } else {
                        let prob = (p.queued_bytes - kmin) as f64 / (kmax - kmin).max(1) as f64;
                        self.rng.unit_f64() < prob
                    }
                }
            };
            if mark && self.ops.ect(&frame) {
                self.ops.mark_ce(&mut frame);
                p.stats.ecn_marked += 1;
            }
            p.queued_bytes += len;
            p.queue.push_back(frame);
        }
        p.stats.peak_queue = p.stats.peak_queue.max(p.queued_bytes);
        if !p.busy {
            p.busy = true;
            p.prio = p.prio.saturating_sub(1);
            let d = p.params.serialization(p.queue.front().map_or(0, Vec::len));
            self.schedule(now + d, Event::TxDone(port_id));
        }
    }

    fn tx_done(&mut self, port_id: PortId) {
        let now = self.now;
        let p = &mut self.ports[port_id.0];
        let Some(mut frame) = p.queue.pop_front() else {
            p.busy = false;
            return;
        };
        p.queued_bytes -= frame.len() as u64;
        if let Some(o) = p.owner
            && p.queued_bytes < self.nic_queue_bytes
            && self.slots[o].nic_blocked
        {
            self.slots[o].nic_blocked = false;
            self.mark(o);
        }
        let p = &mut self.ports[port_id.0];
        p.stats.tx_packets += 1;
        p.stats.tx_bytes += frame.len() as u64;
        let to = p.to;
        let mut arrive = now + p.params.latency;
        let imp = &p.params.impair;
        let blackout = imp.blackouts.iter().any(|(s, e)| *s <= now && now < *e);
        let lost = blackout || (imp.loss > 0.0 && self.rng.unit_f64() < imp.loss);
        let mut dup = false;
        if lost {
            p.stats.impaired += 1;
        } else {
            if imp.jitter > Duration::ZERO {
                let j = self.rng.below(imp.jitter.as_nanos() as u64 + 1);
                arrive = (arrive + Duration::from_nanos(j)).max(p.last_arrive);
                p.last_arrive = arrive;
            }
            if imp.reorder > 0.0 && self.rng.unit_f64() < imp.reorder {
                arrive += imp.reorder_delay;
            }
            if imp.corrupt > 0.0 && self.rng.unit_f64() < imp.corrupt && !frame.is_empty() {
                let i = self.rng.below(frame.len() as u64) as usize;
                frame[i] ^= 1 << self.rng.below(8);
                p.stats.impaired += 1;
            }
            dup = imp.duplicate > 0.0 && self.rng.unit_f64() < imp.duplicate;
        }
        // Start the next packet.
        let next = p.queue.front().map(Vec::len);
        match next {
            Some(n) => {
                p.prio = p.prio.saturating_sub(1);
                let d = p.params.serialization(n);
                self.schedule(now + d, Event::TxDone(port_id));
            }
            None => p.busy = false,
        }
        if !lost {
            if dup {
                self.ports[port_id.0].stats.impaired += 1;
                self.schedule(arrive, Event::Arrive(to, frame.clone()));
            }
            self.schedule(arrive, Event::Arrive(to, frame));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::net::Ipv4Addr;
    use std::rc::Rc;

    /// Test frames: [dst ipv4 (4)] [ev (2)] [flags: 1 = ECT, 2 = CE, 4 = trimmed] [payload…].
    struct TestOps;
    impl FrameOps for TestOps {
        fn dst(&self, f: &[u8]) -> Option<IpAddr> {
            Some(IpAddr::V4(Ipv4Addr::new(f[0], f[1], f[2], f[3])))
        }
        fn entropy(&self, f: &[u8]) -> u16 {
            u16::from_be_bytes([f[4], f[5]])
        }
        fn ect(&self, f: &[u8]) -> bool {
            f[6] & 1 == 1
        }
        fn mark_ce(&self, f: &mut [u8]) {
            f[6] |= 2;
        }
        fn trimmable(&self, _: &[u8]) -> bool {
            true
        }
        fn trim(&self, f: &mut [u8], keep: usize, _dscp: u8) -> usize {
            f[6] |= 4;
            (7 + keep).min(f.len())
        }
    }

    type Log = Rc<RefCell<Vec<(Instant, Vec<u8>)>>>;

    /// Sends `count` frames of `len` bytes to `dst` with EVs 0, 1, 2, …
    struct Sender {
        dst: [u8; 4],
        count: u16,
        len: usize,
        sent: u16,
        /// Written into byte 7 (when the frame is long enough).
        tag: u8,
    }
    impl Host for Sender {
        fn handle_frame(&mut self, _: Instant, _: &mut [u8]) {}
        fn handle_timeout(&mut self, _: Instant) {}
        fn poll_transmit(&mut self, _: Instant, buf: &mut [u8]) -> Option<usize> {
            if self.sent == self.count {
                return None;
            }
            buf[..4].copy_from_slice(&self.dst);
            buf[4..6].copy_from_slice(&self.sent.to_be_bytes());
            buf[6] = 1;
            if self.len > 7 {
                buf[7] = self.tag;
            }
            self.sent += 1;
            Some(self.len)
        }
        fn poll_timeout(&self) -> Option<Instant> {
            None
        }
    }
    struct Sink(Log);
    impl Host for Sink {
        fn handle_frame(&mut self, now: Instant, f: &mut [u8]) {
            self.0.borrow_mut().push((now, f.to_vec()));
        }
        fn handle_timeout(&mut self, _: Instant) {}
        fn poll_transmit(&mut self, _: Instant, _: &mut [u8]) -> Option<usize> {
            None
        }
        fn poll_timeout(&self) -> Option<Instant> {
            None
        }
    }

    const A: [u8; 4] = [10, 0, 0, 1];
    const B: [u8; 4] = [10, 0, 0, 2];
    fn ip(a: [u8; 4]) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(a))
    }

    /// One sender → switch → sink; returns the fabric, the log and the
    /// switch's port towards the sink.
    fn line(
        count: u16,
        len: usize,
        up: LinkParams,
        down: LinkParams,
    ) -> (Fabric<TestOps>, Log, PortId) {
        let mut f = Fabric::new(TestOps, 1);
        let sw = f.add_switch();
        let log: Log = Rc::default();
        f.add_host(
            Box::new(Sender {
                dst: B,
                count,
                len,
                sent: 0,
                tag: 0,
            }),
            ip(A),
            sw,
            up.clone(),
            up,
        );
        f.add_host(Box::new(Sink(log.clone())), ip(B), sw, down.clone(), down);
        let port = f.port_towards(sw, ip(B)).unwrap();
        (f, log, port)
    }

    #[test]
    fn serialization_and_latency_add_up() {
        // 1250 B at 10 Mb/s = 1 ms per hop, plus 10 µs latency per hop.
        let l = LinkParams::new(10_000_000, Duration::from_micros(10), 1 << 20);
        let (mut f, log, _) = line(2, 1250, l.clone(), l);
        assert!(f.run_until(Instant::from_nanos(1_000_000_000)));
        let log = log.borrow();
        assert_eq!(log.len(), 2);
        assert_eq!(log[0].0, Instant::from_nanos(2_020_000));
        // The second frame queues behind the first on the host NIC.
        assert_eq!(log[1].0, Instant::from_nanos(3_020_000));
    }

    #[test]
    fn a_paused_host_handles_what_arrived_meanwhile_in_one_batch_in_order() {
        // A frame every 1 ms; the sink (node 2) pauses for 3 ms at a time.
        let l = LinkParams::new(10_000_000, Duration::from_micros(10), 1 << 20);
        let (mut f, log, _) = line(100, 1250, l.clone(), l);
        f.pause_host(
            NodeId(2),
            Pauses {
                every: Duration::from_millis(5),
                length: Duration::from_millis(3),
            },
        );
        let end = Instant::from_nanos(10_000_000_000);
        assert!(f.run_while(end, |_| log.borrow().len() == 100));
        let log = log.borrow();
        let evs: Vec<u16> = log.iter().map(|(_, fr)| f.ops.entropy(fr)).collect();
        assert_eq!(evs, (0..100).collect::<Vec<u16>>(), "every frame, in order");
        // Unpaused, frame i is handled at 2.02 ms + i ms; a paused sink
        // handles it later, together with the frames after it.
        let mut late = 0;
        for (i, (t, _)) in log.iter().enumerate() {
            let due = Instant::from_nanos(2_020_000 + i as u64 * 1_000_000);
            assert!(*t >= due);
            late += usize::from(*t > due);
        }
        let batches = log.windows(2).filter(|w| w[0].0 == w[1].0).count();
        assert!(late > 10 && batches > 10, "{late} late, {batches} batched");
    }

    #[test]
    fn drop_tail_and_ecn_at_a_bottleneck() {
        let fast = LinkParams::new(100_000_000, Duration::from_micros(1), 1 << 20);
        let mut slow = LinkParams::new(10_000_000, Duration::from_micros(1), 10_000);
        slow.ecn = EcnMarking::Threshold(3_000);
        let (mut f, log, port) = line(100, 1000, fast, slow);
        f.nic_queue_bytes = 1 << 20;
        f.run_until(Instant::from_nanos(1_000_000_000));
        let st = f.port_stats(port).clone();
        let got = log.borrow().len() as u64;
        assert_eq!(got + st.drops, 100);
        assert!(
            st.drops > 0,
            "a 10:1 rate step with a 10 KB buffer must drop"
        );
        assert!(st.peak_queue <= 10_000);
        let marked = log.borrow().iter().filter(|(_, fr)| fr[6] & 2 != 0).count() as u64;
        assert_eq!(marked, st.ecn_marked);
        assert!(marked > 0);
    }

    #[test]
    fn trimming_replaces_drops() {
        let fast = LinkParams::new(100_000_000, Duration::from_micros(1), 1 << 20);
        let mut slow = LinkParams::new(10_000_000, Duration::from_micros(1), 10_000);
        slow.trim = Some(Trimming {
            threshold: 5_000,
            ip_payload: 24,
            dscp: 16,
            dscp_last_hop: None,
            rtx_threshold: None,
        });
        let (mut f, log, port) = line(100, 1000, fast, slow);
        f.nic_queue_bytes = 1 << 20;
        f.run_until(Instant::from_nanos(1_000_000_000));
        let st = f.port_stats(port);
        assert_eq!(st.drops, 0);
        assert!(st.trimmed > 0);
        assert_eq!(log.borrow().len(), 100);
        let short = log.borrow().iter().filter(|(_, fr)| fr.len() == 31).count() as u64;
        assert_eq!(short, st.trimmed);
    }

    /// Two senders at the same rate whose frames reach a one-frame queue at
    /// the same instants (1000 of 1000 B each, tagged 1 and 2): how many of
    /// each got through, with `random` ties and `jitter` on their links.
    fn two_senders_into_one_slot(random: bool, jitter: Duration) -> (usize, usize) {
        let mut fast = LinkParams::new(100_000_000, Duration::from_micros(1), 1 << 20);
        fast.impair.jitter = jitter;
        let slow = LinkParams::new(10_000_000, Duration::from_micros(1), 2_000);
        let mut f = Fabric::new(TestOps, 7);
        f.random_ties = random;
        f.nic_queue_bytes = 1 << 20;
        let sw = f.add_switch();
        let log: Log = Rc::default();
        // The senders are told apart by a tag byte.
        for (a, tag) in [(A, 1), ([10, 0, 0, 3], 2)] {
            let s = Sender {
                dst: B,
                count: 1000,
                len: 1000,
                sent: 0,
                tag,
            };
            f.add_host(Box::new(s), ip(a), sw, fast.clone(), fast.clone());
        }
        f.add_host(Box::new(Sink(log.clone())), ip(B), sw, slow.clone(), slow);
        f.run_until(Instant::from_nanos(1_000_000_000));
        let first = log.borrow().iter().filter(|(_, fr)| fr[7] == 1).count();
        (first, log.borrow().len() - first)
    }

    /// In scheduling order the first host always wins the free slot; with
    /// random ties both get a share.
    #[test]
    fn random_ties_share_simultaneous_arrivals() {
        let (a, b) = two_senders_into_one_slot(false, Duration::ZERO);
        assert!(
            b < a / 4,
            "scheduling order favours the first host: {a} vs {b}"
        );
        let (a, b) = two_senders_into_one_slot(true, Duration::ZERO);
        assert!(a.abs_diff(b) * 3 < a + b, "random ties share: {a} vs {b}");
    }

    /// Link jitter delays each frame by at most its bound per link and
    /// never reorders a link.
    #[test]
    fn jitter_delays_within_bounds_in_order() {
        let arrivals = |jitter: Duration| {
            let mut l = LinkParams::new(100_000_000, Duration::from_micros(10), 1 << 20);
            l.impair.jitter = jitter;
            let (mut f, log, _) = line(200, 500, l.clone(), l);
            assert!(f.run_until(Instant::from_nanos(1_000_000_000)));
            let v: Vec<(Instant, u16)> = log
                .borrow()
                .iter()
                .map(|(t, fr)| (*t, u16::from_be_bytes([fr[4], fr[5]])))
                .collect();
            v
        };
        let plain = arrivals(Duration::ZERO);
        // Longer than a frame time (40 µs), so unordered jitter would reorder.
        let j = Duration::from_micros(100);
        let jittered = arrivals(j);
        assert_eq!(plain.len(), 200);
        assert_eq!(jittered.len(), 200);
        let seqs: Vec<u16> = jittered.iter().map(|(_, s)| *s).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "reordered: {seqs:?}");
        let mut later = 0;
        for ((t0, _), (t1, _)) in plain.iter().zip(&jittered) {
            assert!(*t1 >= *t0 && *t1 <= *t0 + j * 2, "{t0:?} -> {t1:?}");
            later += usize::from(t1 > t0);
        }
        assert!(later > 150, "only {later} frames delayed");
    }

    /// Without jitter the first host always wins the one-frame queue (the
    /// phase effect); a jitter of a quarter of a frame time (80 µs at
    /// 100 Mb/s) shares it between them.
    #[test]
    fn jitter_breaks_the_phase_lock() {
        let (a, b) = two_senders_into_one_slot(false, Duration::ZERO);
        assert!(b < a / 4, "phase lock favours the first host: {a} vs {b}");
        let (a, b) = two_senders_into_one_slot(false, Duration::from_micros(20));
        assert!(a.abs_diff(b) * 3 < a + b, "jitter shares: {a} vs {b}");
    }

    #[test]
    fn blackout_and_loss_are_counted() {
        let fast = LinkParams::new(100_000_000, Duration::from_micros(1), 1 << 20);
        let mut down = fast.clone();
        down.impair
            .blackouts
            .push((Instant::ZERO, Instant::from_nanos(1_000_000_000)));
        let (mut f, log, port) = line(10, 100, fast, down);
        f.run_until(Instant::from_nanos(2_000_000_000));
        assert!(log.borrow().is_empty());
        assert_eq!(f.port_stats(port).impaired, 10);
    }

    #[test]
    fn ecmp_spreads_by_entropy_and_is_stable() {
        // Two leaves joined by 4 spines; EVs must use several spines, and
        // one EV always the same one.
        let l = LinkParams::new(1_000_000_000, Duration::from_micros(1), 1 << 20);
        let mut f = Fabric::new(TestOps, 1);
        let leaf_a = f.add_switch();
        let leaf_b = f.add_switch();
        let log: Log = Rc::default();
        f.add_host(
            Box::new(Sender {
                dst: B,
                count: 64,
                len: 100,
                sent: 0,
                tag: 0,
            }),
            ip(A),
            leaf_a,
            l.clone(),
            l.clone(),
        );
        f.add_host(
            Box::new(Sink(log.clone())),
            ip(B),
            leaf_b,
            l.clone(),
            l.clone(),
        );
        let mut ups = vec![];
        for _ in 0..4 {
            let spine = f.add_switch();
            let (up, _) = f.connect(leaf_a, spine, l.clone());
            let (down, _) = f.connect(spine, leaf_b, l.clone());
            f.set_default_route(spine, vec![down]);
            ups.push(up);
        }
        f.set_default_route(leaf_a, ups.clone());
        f.run_until(Instant::from_nanos(1_000_000_000));
        assert_eq!(log.borrow().len(), 64);
        let used = ups
            .iter()
            .filter(|p| f.port_stats(**p).tx_packets > 0)
            .count();
        assert!(used >= 3, "64 EVs over 4 spines used only {used}");
        let total: u64 = ups.iter().map(|p| f.port_stats(*p).tx_packets).sum();
        assert_eq!(total, 64);
    }
}
