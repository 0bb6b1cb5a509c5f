//! Model-based tests of RCCC: a closed credit loop between sources and one
//! receiver over a network that delays, reorders, trims and loses, plus
//! operation fuzzers for each half. Invariants:
//!
//! 1. a source never spends more than it was granted, plus its speculative
//!    first window, plus less than one packet (the `credit > 0` rule);
//! 2. a source never accepts more than the receiver issued;
//! 3. the receiver's grants over any window stay within link rate × pacing
//!    (one slice per on-time tick; at most `max_burst_slices` when late);
//! 4. every sender with demand is eventually served: all data is delivered;
//! 5. nothing panics.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use proptest::prelude::*;
use uet_wire::Credit24;
use uet_wire::rand::{Rng, Xoshiro256};
use uet_wire::time::{Duration, Instant};

use super::{Arrival, CreditUpdate, RcccConfig, RcccReceiver, RcccSource, diff24, wire24};

/// A message in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Msg {
    /// A data packet to the receiver.
    Data {
        src: usize,
        target: Credit24,
        bytes: u64,
        trimmed: bool,
        /// A retransmission (the receiver settles its original's credit).
        rtx: bool,
    },
    /// A CREDIT CP or a piggybacked ACK_CC credit to a source.
    Credit { src: usize, cum: Credit24 },
    /// An ACK (with optional credit) to a source.
    Ack { src: usize, cum: Option<Credit24> },
    /// A NACK for a last-hop-trimmed packet.
    Nack { src: usize, bytes: u64 },
    /// The sender's RTO firing for a dropped packet (the model knows).
    Loss { src: usize, bytes: u64 },
    /// A CREDIT_REQ CP to the receiver.
    Request { src: usize, target: Credit24 },
    /// The application queues data at a source.
    NewData { src: usize, bytes: u64 },
}

#[derive(Debug, Clone)]
struct Net {
    /// One-way delay.
    delay: Duration,
    /// Extra random delay up to this (reorders messages).
    jitter_ns: u64,
    /// Probability (per mille) that a CREDIT CP, ACK or CREDIT_REQ is lost.
    ctrl_loss: u64,
    /// Probability (per mille) that a data packet is trimmed at the last hop.
    trim: u64,
    /// Probability (per mille) that a data packet is dropped (RTO later).
    drop: u64,
    /// The pacer is driven up to this late (0: on time).
    late_ns: u64,
    /// Cap on the credit request, as NSCC's `cwnd + MTU` would be.
    nscc_cap: Option<u64>,
}

struct Sim {
    cfg: RcccConfig,
    net: Net,
    rng: Xoshiro256,
    now: Instant,
    seq: u64,
    queue: BinaryHeap<Reverse<(Instant, u64, Msg)>>,
    sources: Vec<RcccSource>,
    rx: RcccReceiver<usize>,
    injected: Vec<u64>,
    delivered: Vec<u64>,
    /// (tick time, bytes granted by that tick).
    ticks: Vec<(Instant, u64)>,
    /// When the receiver's pending tick will be driven (late by design).
    rx_due: Option<Instant>,
    /// When the last data byte arrived.
    last_delivery: Instant,
}

const RTO: Duration = Duration::from_micros(200);

impl Sim {
    fn new(cfg: RcccConfig, net: Net, n: usize, seed: u64) -> Self {
        Self {
            sources: (0..n)
                .map(|_| RcccSource::new(cfg.clone()).unwrap())
                .collect(),
            rx: RcccReceiver::new(cfg.clone()).unwrap(),
            cfg,
            net,
            rng: Xoshiro256::seed_from_u64(seed),
            now: Instant::ZERO,
            seq: 0,
            queue: BinaryHeap::new(),
            injected: vec![0; n],
            delivered: vec![0; n],
            ticks: Vec::new(),
            rx_due: None,
            last_delivery: Instant::ZERO,
        }
    }

    fn chance(&mut self, per_mille: u64) -> bool {
        per_mille > 0 && self.rng.below(1000) < per_mille
    }

    fn at(&mut self, t: Instant, m: Msg) {
        self.seq += 1;
        self.queue.push(Reverse((t, self.seq, m)));
    }

    /// Sends `m` over the network (delay + jitter), or loses it.
    fn send(&mut self, m: Msg, loss: u64) {
        if self.chance(loss) {
            return;
        }
        let j = if self.net.jitter_ns > 0 {
            self.rng.below(self.net.jitter_ns + 1)
        } else {
            0
        };
        let t = self.now + self.net.delay + Duration::from_nanos(j);
        self.at(t, m);
    }

    /// Lets every source send what its credit allows, and send requests.
    fn pump_sources(&mut self) {
        let mtu = u64::from(self.cfg.mtu);
        for i in 0..self.sources.len() {
            loop {
                let s = &self.sources[i];
                if s.need() == 0 {
                    break;
                }
                let is_rtx = s.rtx_backlog() > 0;
                let bytes = if is_rtx {
                    s.rtx_backlog().min(mtu)
                } else {
                    s.backlog().min(mtu)
                };
                if !s.can_send(bytes) {
                    break;
                }
                let target = s.credit_target_after(bytes, is_rtx, self.net.nscc_cap);
                self.sources[i].on_send(self.now, bytes, is_rtx);
                assert_eq!(target, self.sources[i].credit_target(self.net.nscc_cap));
                if self.chance(self.net.drop) {
                    self.at(self.now + RTO, Msg::Loss { src: i, bytes });
                } else {
                    let trimmed = self.chance(self.net.trim);
                    self.send(
                        Msg::Data {
                            src: i,
                            target,
                            bytes,
                            trimmed,
                            rtx: is_rtx,
                        },
                        0,
                    );
                }
            }
            let cap = self.net.nscc_cap;
            if let Some(target) = self.sources[i].poll_credit_request(self.now, cap) {
                let loss = self.net.ctrl_loss;
                self.send(Msg::Request { src: i, target }, loss);
            }
        }
    }

    fn pump_receiver(&mut self) {
        while let Some((src, cum)) = self.rx.poll_grant() {
            let loss = self.net.ctrl_loss;
            self.send(Msg::Credit { src, cum }, loss);
        }
    }

    fn deliver(&mut self, m: Msg) {
        let now = self.now;
        match m {
            Msg::Data {
                src,
                target,
                bytes,
                trimmed,
                rtx,
            } => {
                if rtx {
                    self.rx
                        .on_data(now, src, target, bytes, trimmed, Arrival::Retransmission);
                } else {
                    self.rx.on_rx(now, src, target, bytes, trimmed);
                }
                if trimmed {
                    // NACKs travel on the control class and are not lost here.
                    self.send(Msg::Nack { src, bytes }, 0);
                } else {
                    self.delivered[src] += bytes;
                    self.last_delivery = now;
                    let cum = if self.rng.below(2) == 0 {
                        self.rx.grant_for(src)
                    } else {
                        None
                    };
                    let loss = self.net.ctrl_loss;
                    self.send(Msg::Ack { src, cum }, loss);
                }
            }
            Msg::Credit { src, cum } => {
                self.sources[src].on_credit_update(now, cum);
            }
            Msg::Ack { src, cum } => {
                self.sources[src].on_ack(now);
                if let Some(c) = cum {
                    self.sources[src].on_credit_update(now, c);
                }
            }
            Msg::Nack { src, bytes } => self.sources[src].on_nack(now, bytes, true),
            Msg::Loss { src, bytes } => self.sources[src].on_inferred_loss(now, bytes, true),
            Msg::Request { src, target } => self.rx.on_credit_request(now, src, target),
            Msg::NewData { src, bytes } => {
                self.injected[src] += bytes;
                self.sources[src].on_new_data(now, bytes);
            }
        }
    }

    /// The receiver's tick, driven `late_ns` at most after it is due.
    fn rx_deadline(&mut self) -> Option<Instant> {
        let due = self.rx.poll_timeout()?;
        if self.rx_due.is_none_or(|d| d < due) {
            let late = if self.net.late_ns > 0 {
                self.rng.below(self.net.late_ns + 1)
            } else {
                0
            };
            self.rx_due = Some(due + Duration::from_nanos(late));
        }
        self.rx_due
    }

    /// Everything delivered, nothing in flight, and the pacer idle (it may
    /// still owe the debt of a last overdrawn packet after the data is in).
    fn done(&self) -> bool {
        self.queue.is_empty() && self.injected == self.delivered && self.rx.poll_timeout().is_none()
    }

    /// Runs until everything injected is delivered or `limit`; returns
    /// whether it finished.
    fn run(&mut self, limit: Instant) -> bool {
        loop {
            self.check();
            if self.done() {
                return true;
            }
            let mut next = self.queue.peek().map(|Reverse((t, _, _))| *t);
            let rx_t = self.rx_deadline();
            for t in rx_t
                .into_iter()
                .chain(self.sources.iter().filter_map(RcccSource::poll_timeout))
            {
                next = Some(next.map_or(t, |n: Instant| n.min(t)));
            }
            let Some(t) = next else {
                return self.done();
            };
            if t > limit {
                return false;
            }
            self.now = self.now.max(t);
            let now = self.now;
            if rx_t.is_some_and(|d| d <= now) {
                self.rx_due = None;
                let before = self.rx.stats().granted_bytes;
                self.rx.handle_timeout(now);
                let granted = self.rx.stats().granted_bytes - before;
                self.ticks.push((now, granted));
            }
            for s in &mut self.sources {
                s.handle_timeout(now);
            }
            while let Some(Reverse((t, _, _))) = self.queue.peek() {
                if *t > now {
                    break;
                }
                let Some(Reverse((_, _, m))) = self.queue.pop() else {
                    break;
                };
                self.deliver(m);
            }
            self.pump_receiver();
            self.pump_sources();
        }
    }

    /// Invariants 1 and 2, after every step.
    fn check(&self) {
        let mtu = u64::from(self.cfg.mtu);
        for (i, s) in self.sources.iter().enumerate() {
            let st = s.stats();
            // 1. spent < initial window + granted + one packet.
            assert!(
                st.spent_bytes < self.cfg.initial_window + st.granted_bytes + mtu,
                "source {i} spent {} of {} granted",
                st.spent_bytes,
                st.granted_bytes
            );
            assert_eq!(st.overdrafts, 0, "the model only sends when allowed");
            assert!(s.credit() <= self.cfg.max_credit as i64);
            // 2. accepted ≤ issued.
            let issued = self
                .rx
                .granted(i)
                .map_or(0, |g| g - self.cfg.initial_window);
            assert!(
                st.granted_bytes <= issued,
                "source {i} accepted {} but the receiver issued {issued}",
                st.granted_bytes
            );
            // The target stays within the range the receiver can read.
            let ahead = diff24(s.credit_target(None), s.cumulative());
            assert!(ahead.unsigned_abs() <= self.cfg.max_credit + mtu);
        }
        assert!(self.rx.active_senders() <= self.sources.len());
    }

    /// Invariant 3 over the tick log.
    fn check_rate(&self) {
        let cfg = &self.cfg;
        let slice = cfg.slice;
        let b = cfg.slice_budget() + 1;
        // Exact paced bytes for a duration, rounded up.
        let paced = |d: Duration| -> u64 {
            let units = u128::from(cfg.link_rate_bps) * u128::from(cfg.pacing_ppm) * d.as_nanos();
            u64::try_from(units.div_ceil(super::BYTE_PPM_NS)).unwrap()
        };
        // On-time ticks never see two in one slice.
        if self.net.late_ns == 0 {
            for w in self.ticks.windows(2) {
                assert!(w[1].0 - w[0].0 >= slice, "{:?}", w);
            }
        }
        for k in [1u32, 2, 4, 8] {
            let win = slice * k;
            let mut sum = 0u64;
            let mut lo = 0;
            for hi in 0..self.ticks.len() {
                sum += self.ticks[hi].1;
                while self.ticks[hi].0 - self.ticks[lo].0 >= win {
                    sum -= self.ticks[lo].1;
                    lo += 1;
                }
                let bound = if self.net.late_ns == 0 {
                    // k ticks of one slice each, plus budget carried
                    // (< min_grant) into the window.
                    u64::from(k) * b + cfg.min_grant
                } else {
                    paced(win + slice * cfg.max_burst_slices) + cfg.min_grant + 1
                };
                assert!(
                    sum <= bound,
                    "{sum} B granted in a window of {k} slices (bound {bound})"
                );
            }
        }
    }
}

/// The default configuration paced at the full link rate (the seed's
/// arithmetic).
fn at_line_rate() -> RcccConfig {
    RcccConfig {
        pacing_ppm: 1_000_000,
        ..RcccConfig::default()
    }
}

fn config_for(rate_idx: usize, pacing: u32, rtt_us: u64) -> RcccConfig {
    let rates = [
        10_000_000_000,
        25_000_000_000,
        100_000_000_000,
        400_000_000_000,
    ];
    RcccConfig {
        pacing_ppm: pacing,
        ..RcccConfig::for_link(rates[rate_idx % rates.len()], Duration::from_micros(rtt_us))
    }
}

fn run_incast(cfg: RcccConfig, net: Net, n: usize, bytes: u64, seed: u64) -> Sim {
    let mut sim = Sim::new(cfg, net, n, seed);
    for src in 0..n {
        sim.at(Instant::ZERO, Msg::NewData { src, bytes });
    }
    let limit = Instant::ZERO + Duration::from_secs(1);
    assert!(sim.run(limit), "incast did not finish");
    sim.check_rate();
    sim
}

fn clean(rtt_us: u64) -> Net {
    Net {
        delay: Duration::from_micros(rtt_us) / 2,
        jitter_ns: 0,
        ctrl_loss: 0,
        trim: 0,
        drop: 0,
        late_ns: 0,
        nscc_cap: None,
    }
}

/// The seed's walk-through as a packet trace: a 256 MB RMA write at
/// 100 Gb/s, one sender, then a second one joining.
#[test]
fn seed_walk_through() {
    let cfg = RcccConfig {
        quantum: 1,
        ..at_line_rate()
    };
    let mut a = RcccSource::new(cfg.clone()).unwrap();
    let mut rx: RcccReceiver<u8> = RcccReceiver::new(cfg).unwrap();
    let t0 = Instant::ZERO;
    // Source CCC 0xA1: backlog 0 → 256 MB; pre-provisioned 12.5 KB.
    a.on_new_data(t0, 256_000_000);
    assert_eq!(a.credit(), 12_500);
    // The initial amount leaves in RUD_CC_REQs (4,160 + 4,160 + 4,180 B).
    for b in [4160, 4160, 4180] {
        a.on_send(t0, b, false);
        rx.on_rx(
            t0 + Duration::from_micros(6),
            0xA1,
            a.credit_target(None),
            b,
            false,
        );
    }
    assert_eq!(a.backlog(), 255_987_500);
    assert_eq!(a.credit(), 0);
    // The target: cumulative 12,500 plus the backlog, capped at max_credit
    // (a 24-bit field cannot hold 255,987,500).
    assert_eq!(a.credit_target(None), wire24(12_500 + 225_000));
    assert_eq!(rx.demand(0xA1), Some(225_000));
    // Active sender table: one sender; 12.5 GB/s × 1 µs ÷ 1 = 12.5 KB.
    let t1 = t0 + Duration::from_micros(6);
    rx.handle_timeout(t1);
    let (s, cum) = rx.poll_grant().unwrap();
    assert_eq!((s, cum), (0xA1, wire24(25_000)));
    // Source: 25,000 − 12,500 = 12,500 newly granted.
    let t2 = t1 + Duration::from_micros(6);
    assert_eq!(a.on_credit_update(t2, cum), CreditUpdate::New(12_500));
    a.on_send(t2, 12_500, false);
    assert_eq!(a.backlog(), 255_975_000);
    // A second sender (0xA2) joins: the same slice is now 6.25 KB each.
    rx.on_rx(t1, 0xA2, wire24(12_500 + 225_000), 4160, false);
    rx.on_rx(t1, 0xA1, a.credit_target(None), 4160, false);
    rx.handle_timeout(t1 + Duration::from_micros(1));
    let mut g: Vec<_> = core::iter::from_fn(|| rx.poll_grant()).collect();
    g.sort();
    assert_eq!(g, vec![(0xA1, wire24(31_250)), (0xA2, wire24(18_750))]);
}

#[test]
fn incast_finishes_near_ideal_and_fair() {
    // 8:1 × 1 MB at 100 Gb/s, 12 µs RTT, pacing 0.99.
    let cfg = RcccConfig::default();
    let n = 8;
    let bytes = 1_000_000;
    let sim = run_incast(cfg.clone(), clean(12), n, bytes, 1);
    let total = n as u64 * bytes;
    // Ideal: total / (rate × pacing) + one RTT.
    let ideal_ns = total * 8 * 1_000_000_000 / 100_000_000_000 * 1_000_000 / 990_000 + 12_000;
    let end = sim.last_delivery.as_nanos();
    assert!(
        end as f64 <= 1.05 * ideal_ns as f64,
        "ICT {end} ns vs ideal {ideal_ns} ns"
    );
    // Every source was granted the same to within one slice share.
    let g: Vec<u64> = (0..n).map(|s| sim.rx.granted(s).unwrap()).collect();
    let (lo, hi) = (g.iter().min().unwrap(), g.iter().max().unwrap());
    assert!(hi - lo <= cfg.slice_budget(), "{g:?}");
    assert_eq!(sim.rx.active_senders(), 0);
    assert_eq!(sim.rx.poll_timeout(), None);
}

#[test]
fn lost_last_grant_is_recovered_by_the_credit_timeout() {
    let cfg = at_line_rate();
    let timeout = cfg.credit_timeout;
    let mut src = RcccSource::new(cfg.clone()).unwrap();
    let mut rx: RcccReceiver<u8> = RcccReceiver::new(cfg).unwrap();
    let t0 = Instant::ZERO;
    src.on_new_data(t0, 20_000);
    // The speculative window: the three packets it covers.
    while src.can_send(4160) {
        src.on_send(t0, 4160, false);
        rx.on_rx(t0, 1, src.credit_target(None), 4160, false);
    }
    assert_eq!(src.need(), 20_000 - 3 * 4160);
    assert_eq!(src.credit(), 12_500 - 3 * 4160);
    rx.handle_timeout(t0);
    // The grant that covers the rest is lost on the way.
    assert_eq!(rx.poll_grant(), Some((1, wire24(20_000))));
    assert!(!rx.is_active(1));
    // Blocked with backlog: the credit timer asks again.
    assert_eq!(src.poll_timeout(), Some(t0 + timeout));
    src.handle_timeout(t0 + timeout);
    let target = src.poll_credit_request(t0 + timeout, None).unwrap();
    assert_eq!(target, wire24(20_000));
    // The receiver answers with its cumulative count, unchanged.
    rx.on_credit_request(t0 + timeout, 1, target);
    let (_, cum) = rx.poll_grant().unwrap();
    assert_eq!(
        src.on_credit_update(t0 + timeout, cum),
        CreditUpdate::New(7_500)
    );
    assert!(src.can_send(4160));
    let t1 = t0 + timeout;
    src.on_send(t1, 4160, false);
    // The 20 B of speculative credit left were dropped when the grant
    // ended speculation, and the target rose by as much: the last packet
    // waits for them.
    assert!(!src.can_send(src.need()));
    assert_eq!(src.credit_target(None), wire24(20_020));
    rx.on_rx(t1, 1, src.credit_target(None), 4160, false);
    rx.handle_timeout(t1 + Duration::from_micros(1));
    assert_eq!(rx.poll_grant(), Some((1, wire24(20_020))));
    assert_eq!(
        src.on_credit_update(t1, wire24(20_020)),
        CreditUpdate::New(20)
    );
    assert!(src.can_send(src.need()));
    src.on_send(t1, src.need(), false);
    assert_eq!(src.credit(), 0);
    assert_eq!(src.poll_timeout(), None);
}

#[test]
fn lossy_control_traffic_still_completes() {
    let net = Net {
        ctrl_loss: 500,
        jitter_ns: 3_000,
        ..clean(12)
    };
    // Cumulative grants make most losses harmless: the next CP or ACK
    // carries the count; the credit timer covers the last one.
    let sim = run_incast(RcccConfig::default(), net, 8, 300_000, 7);
    let stale: u64 = sim.sources.iter().map(|s| s.stats().stale_updates).sum();
    assert!(stale > 0, "jitter reorders credit updates");
}

#[test]
fn large_incast_does_not_flood_credit_requests() {
    // 256 senders at 100 Gb/s: two grants per slice, so each waits ~128
    // slices for its turn, longer than the credit timeout (96 µs). The
    // timeout learns the wait after the first one: at most about one
    // CREDIT_REQ per sender for the whole incast.
    let cfg = RcccConfig::default();
    let n = 256;
    let sim = run_incast(cfg, clean(12), n, 40_000, 3);
    let requests: u64 = sim.sources.iter().map(|s| s.stats().requests).sum();
    assert!(
        requests <= n as u64,
        "{requests} CREDIT_REQs from {n} senders"
    );
    assert_eq!(sim.rx.stats().idle_evictions, 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The closed loop under delay, reordering, loss, trims, a late pacer and
    /// an NSCC cap: invariants 1–5.
    #[test]
    fn closed_loop_invariants(
        n in 1usize..10,
        rate_idx in 0usize..4,
        pacing in prop_oneof![Just(990_000u32), Just(1_000_000), 500_000u32..1_000_000],
        rtt_us in prop_oneof![Just(2u64), Just(12), 1u64..40],
        jitter_ns in prop_oneof![Just(0u64), 0u64..20_000],
        ctrl_loss in prop_oneof![Just(0u64), 0u64..200],
        trim in prop_oneof![Just(0u64), 0u64..100],
        drop in prop_oneof![Just(0u64), 0u64..30],
        late_ns in prop_oneof![Just(0u64), 0u64..3_000],
        nscc_cap in prop::option::of(4160u64..300_000),
        jobs in prop::collection::vec((0usize..10, 1u64..300_000, 0u64..400), 1..20),
        seed in any::<u64>(),
    ) {
        let cfg = config_for(rate_idx, pacing, rtt_us);
        let net = Net {
            delay: Duration::from_micros(rtt_us) / 2,
            jitter_ns,
            ctrl_loss,
            trim,
            drop,
            late_ns,
            nscc_cap,
        };
        let mut sim = Sim::new(cfg, net, n, seed);
        for (src, bytes, at_us) in jobs {
            sim.at(Instant::from_nanos(at_us * 1000), Msg::NewData { src: src % n, bytes });
        }
        // 4. no starvation: everything is delivered in bounded time.
        let finished = sim.run(Instant::ZERO + Duration::from_secs(2));
        prop_assert!(finished, "not delivered: {:?} of {:?}", sim.delivered, sim.injected);
        sim.check_rate();
        for s in &sim.sources {
            prop_assert_eq!(s.need(), 0);
            prop_assert_eq!(s.poll_timeout(), None);
        }
    }

    /// Receiver fuzz: arbitrary (also hostile) targets, requests, removals
    /// and tick timing. Grants stay within the rate bound and within what
    /// senders asked; CPs carry the current cumulative count.
    #[test]
    fn receiver_fuzz(ops in prop::collection::vec(rx_op(), 1..300), late in any::<bool>()) {
        let cfg = RcccConfig::default();
        let mut rx: RcccReceiver<u8> = RcccReceiver::new(cfg.clone()).unwrap();
        let mut now = Instant::ZERO;
        let mut ticks = Vec::new();
        for op in ops {
            match op {
                RxOp::Rx { s, ahead, bytes, trimmed } => {
                    let g = rx.granted(s).unwrap_or(cfg.initial_window);
                    let t = wire24(g.wrapping_add_signed(ahead));
                    rx.on_rx(now, s, t, bytes, trimmed);
                }
                RxOp::Raw { s, target } => rx.on_rx(now, s, Credit24::from_masked(target), 0, false),
                RxOp::Request { s, ahead } => {
                    let g = rx.granted(s).unwrap_or(cfg.initial_window);
                    rx.on_credit_request(now, s, wire24(g.wrapping_add_signed(ahead)));
                }
                RxOp::GrantFor { s } => {
                    let v = rx.grant_for(s);
                    prop_assert_eq!(v, rx.granted(s).map(wire24));
                }
                RxOp::Remove { s } => {
                    rx.remove_sender(now, s);
                }
                RxOp::Advance { ns } => {
                    let target = now + Duration::from_nanos(ns);
                    while let Some(t) = rx.poll_timeout() {
                        if t > target {
                            break;
                        }
                        let at = if late { target } else { t.max(now) };
                        now = at;
                        let before = rx.stats().granted_bytes;
                        rx.handle_timeout(now);
                        ticks.push((now, rx.stats().granted_bytes - before));
                        if late {
                            break;
                        }
                    }
                    now = now.max(target);
                }
            }
            while let Some((s, c)) = rx.poll_grant() {
                prop_assert_eq!(Some(c), rx.granted(s).map(wire24));
            }
            // Paced credit not yet back never exceeds the bound.
            prop_assert!(rx.outstanding() <= cfg.max_outstanding);
            for s in 0..8u8 {
                if let Some(d) = rx.demand(s) {
                    prop_assert!(d <= cfg.max_credit + u64::from(cfg.mtu) * 2);
                }
            }
        }
        let sim_like = Sim {
            ticks,
            net: Net { late_ns: u64::from(late), ..clean(12) },
            ..Sim::new(cfg, clean(12), 0, 0)
        };
        sim_like.check_rate();
    }

    /// Source fuzz: arbitrary hook sequences (a caller that only sends when
    /// `can_send`), credit values in any order, duplicates and wraps.
    #[test]
    fn source_fuzz(ops in prop::collection::vec(src_op(), 1..300)) {
        let cfg = RcccConfig::default();
        let mtu = u64::from(cfg.mtu);
        let mut s = RcccSource::new(cfg.clone()).unwrap();
        let mut now = Instant::ZERO;
        // What a receiver issued, extended; the source sees it out of order.
        let mut issued = cfg.initial_window;
        let mut history = VecDeque::from([issued]);
        for op in ops {
            match op {
                SrcOp::NewData(b) => s.on_new_data(now, b),
                SrcOp::Send(rtx) => {
                    let use_rtx = s.rtx_backlog() > 0 && (rtx || s.backlog() == 0);
                    let b = if use_rtx { s.rtx_backlog() } else { s.backlog() }.min(mtu);
                    if b > 0 && s.can_send(b) {
                        s.on_send(now, b, use_rtx);
                    }
                }
                SrcOp::Grant(b) => {
                    issued += b;
                    // Reordering reaches back a few grants (< 2^23 bytes), as
                    // any real network does.
                    if history.len() == 16 {
                        history.pop_front();
                    }
                    history.push_back(issued);
                    s.on_credit_update(now, wire24(issued));
                }
                SrcOp::Replay(i) => {
                    // Reordering reaches back no further than two ends in
                    // step can differ (`MAX_CREDIT_LIMIT`); a value beyond
                    // that is a receiver that started afresh
                    // (`a_receiver_that_forgot_the_source_…`).
                    let in_step = 2 * cfg.max_credit + mtu;
                    let recent: Vec<u64> =
                        history.iter().copied().filter(|v| issued - v <= in_step).collect();
                    let v = recent[i % recent.len()];
                    s.on_credit_update(now, wire24(v));
                }
                SrcOp::Ack => s.on_ack(now),
                SrcOp::Nack(b, p) => s.on_nack(now, b, p),
                SrcOp::Loss(b, p) => s.on_inferred_loss(now, b, p),
                SrcOp::Withdraw(a, b) => s.withdraw(now, a, b),
                SrcOp::Advance(ns) => {
                    now += Duration::from_nanos(ns);
                    s.handle_timeout(now);
                }
                SrcOp::TakeRequest => {
                    let wanted = s.needs_credit_request();
                    prop_assert_eq!(s.poll_credit_request(now, None).is_some(), wanted);
                }
            }
            let st = s.stats();
            prop_assert!(st.spent_bytes < cfg.initial_window + st.granted_bytes + mtu);
            prop_assert!(st.granted_bytes <= issued - cfg.initial_window);
            prop_assert!(s.credit() <= cfg.max_credit as i64);
            prop_assert!(s.credit() > -(mtu as i64));
            let ahead = diff24(s.credit_target(None), s.cumulative());
            prop_assert!(ahead.unsigned_abs() <= cfg.max_credit + mtu);
            // The timer runs only while blocked with backlog: the credit
            // may not cover the next packet.
            if s.poll_timeout().is_some() {
                prop_assert!(s.need() > 0 && s.credit() < s.need().min(mtu) as i64);
            }
        }
    }
}

#[derive(Debug, Clone)]
enum RxOp {
    Rx {
        s: u8,
        ahead: i64,
        bytes: u64,
        trimmed: bool,
    },
    Raw {
        s: u8,
        target: u32,
    },
    Request {
        s: u8,
        ahead: i64,
    },
    GrantFor {
        s: u8,
    },
    Remove {
        s: u8,
    },
    Advance {
        ns: u64,
    },
}

fn rx_op() -> impl Strategy<Value = RxOp> {
    prop_oneof![
        4 => (0u8..8, -50_000i64..300_000, 0u64..9000, any::<bool>())
            .prop_map(|(s, ahead, bytes, trimmed)| RxOp::Rx { s, ahead, bytes, trimmed }),
        1 => (0u8..8, any::<u32>()).prop_map(|(s, target)| RxOp::Raw { s, target }),
        1 => (0u8..8, -50_000i64..300_000).prop_map(|(s, ahead)| RxOp::Request { s, ahead }),
        1 => (0u8..8).prop_map(|s| RxOp::GrantFor { s }),
        1 => (0u8..8).prop_map(|s| RxOp::Remove { s }),
        4 => (0u64..200_000).prop_map(|ns| RxOp::Advance { ns }),
    ]
}

#[derive(Debug, Clone)]
enum SrcOp {
    NewData(u64),
    Send(bool),
    Grant(u64),
    Replay(usize),
    Ack,
    Nack(u64, bool),
    Loss(u64, bool),
    Withdraw(u64, u64),
    Advance(u64),
    TakeRequest,
}

fn src_op() -> impl Strategy<Value = SrcOp> {
    prop_oneof![
        2 => (0u64..2_000_000).prop_map(SrcOp::NewData),
        6 => any::<bool>().prop_map(SrcOp::Send),
        3 => (1u64..300_000).prop_map(SrcOp::Grant),
        1 => any::<usize>().prop_map(SrcOp::Replay),
        1 => Just(SrcOp::Ack),
        1 => (1u64..9000, any::<bool>()).prop_map(|(b, p)| SrcOp::Nack(b, p)),
        1 => (1u64..9000, any::<bool>()).prop_map(|(b, p)| SrcOp::Loss(b, p)),
        1 => (0u64..100_000, 0u64..10_000).prop_map(|(a, b)| SrcOp::Withdraw(a, b)),
        2 => (0u64..2_000_000).prop_map(SrcOp::Advance),
        1 => Just(SrcOp::TakeRequest),
    ]
}

/// A receiver that has heard `n` packets of `bytes` from sender 1 (with a
/// large backlog) that no grant paid for, sent as `arrival` says; returns
/// it and the sender's cumulative grant (its initial window).
fn unpaid_arrivals(
    cfg: RcccConfig,
    n: usize,
    bytes: u64,
    arrival: Arrival,
) -> (RcccReceiver<u8>, u64) {
    let mut rx: RcccReceiver<u8> = RcccReceiver::new(cfg).unwrap();
    for _ in 0..n {
        rx.on_data(Instant::ZERO, 1, wire24(1_000_000), bytes, false, arrival);
    }
    assert_eq!(rx.outstanding(), 0);
    let initial = rx.granted(1).unwrap();
    (rx, initial)
}

/// Runs the receiver's pacer until `end`, dropping its grants.
fn pace_until(rx: &mut RcccReceiver<u8>, end: Instant) {
    while let Some(t) = rx.poll_timeout().filter(|t| *t <= end) {
        rx.handle_timeout(t);
        while rx.poll_grant().is_some() {}
    }
}

/// Speculative bytes were sent on the initial window, which no grant
/// counted: they settle a sender's balance down to zero and no further.
/// Below zero, the grants that follow would hide inside the deficit and
/// `outstanding` would not count them, so with many speculating senders
/// the receiver's bound on outstanding credit stopped bounding (1 Gb/s
/// 32:1 drop-tail kept its buffer full and dropped paced packets).
#[test]
fn speculative_bytes_do_not_hide_later_grants_from_the_outstanding_bound() {
    let cfg = at_line_rate();
    let t0 = Instant::ZERO;
    // Three packets of the initial window arrive, with a large backlog.
    // Every paced byte granted from now on is outstanding until its data
    // arrives.
    let (mut rx, initial) = unpaid_arrivals(cfg, 3, 4160, Arrival::Speculative);
    rx.handle_timeout(t0 + Duration::from_micros(1));
    let (s, _) = rx.poll_grant().expect("a grant");
    assert_eq!(s, 1);
    let paced = rx.granted(1).unwrap() - initial;
    assert!(paced > 0);
    assert_eq!(rx.outstanding(), paced);
    // Paced data settles it, byte for byte.
    rx.on_data(t0, 1, wire24(1_000_000), 4160, false, Arrival::Paced);
    assert_eq!(rx.outstanding(), paced.saturating_sub(4160));
}

/// A receiver that took sender 1's first 4,160 B packet as speculative
/// and then ran its first slice: the receiver and the paced credit that
/// slice granted (at least a packet).
fn granted_after_one_speculative_packet(cfg: RcccConfig) -> (RcccReceiver<u8>, u64) {
    let (mut rx, initial) = unpaid_arrivals(cfg, 1, 4160, Arrival::Speculative);
    rx.handle_timeout(Instant::ZERO + Duration::from_micros(1));
    assert!(rx.poll_grant().is_some(), "a grant");
    let paced = rx.granted(1).unwrap() - initial;
    assert!(paced >= 4160);
    (rx, paced)
}

/// Speculative packets that were queued behind other senders' first
/// windows arrive after the pacer has granted: they were sent on the
/// initial window, not on those grants, so they must not settle them.
/// When they did, every late speculative packet took one paced grant off
/// `outstanding`, and the pacer granted the link rate on top of the first
/// windows draining: a 100 Gb/s 8:1 incast held its speculative queue
/// (about seven BDPs) for the whole incast, and a victim ping-pong waited
/// behind it on every crossing.
#[test]
fn late_speculative_packets_do_not_settle_paced_credit() {
    let t0 = Instant::ZERO;
    let (mut rx, paced) = granted_after_one_speculative_packet(at_line_rate());
    // The rest of the initial window arrives after the grant.
    for _ in 0..3 {
        rx.on_data(t0, 1, wire24(1_000_000), 4160, false, Arrival::Speculative);
    }
    assert_eq!(rx.outstanding(), paced, "the grant is still out");
    assert_eq!(rx.stats().speculative_bytes, 4 * 4160);
    rx.on_data(t0, 1, wire24(1_000_000), 4160, false, Arrival::Paced);
    assert_eq!(rx.outstanding(), paced - 4160);
}

/// A source speculates at most its initial window once per life; more
/// packets taken for speculative (SYN set, as a PDC opened later on the
/// same CCC sends them on paced credit until it is established) settle
/// their credit as paced ones do. Otherwise they settled nothing, the
/// sender's balance stayed at the outstanding bound, and the pacer stopped
/// granting it (two engines writing both ways, several jobs each: a write
/// waited for a credit timeout's write-off, and failed when the target's
/// idle timeout came first).
#[test]
fn speculative_arrivals_past_the_initial_window_settle_as_paced() {
    let cfg = at_line_rate();
    let window = cfg.initial_window;
    let t0 = Instant::ZERO;
    let (mut rx, paced) = granted_after_one_speculative_packet(cfg);
    // The rest of the initial window: speculative, it settles nothing.
    let mut speculated = 4160;
    while speculated < window {
        rx.on_data(t0, 1, wire24(1_000_000), 4160, false, Arrival::Speculative);
        speculated += 4160;
    }
    assert_eq!(rx.outstanding(), paced);
    assert_eq!(rx.stats().speculative_bytes, speculated);
    // Past it, a SYN packet came on the grant.
    rx.on_data(t0, 1, wire24(1_000_000), 4160, false, Arrival::Speculative);
    assert_eq!(rx.outstanding(), paced - 4160);
    assert_eq!(rx.stats().speculative_bytes, speculated);
}

/// A sender that sent past its credit (packets forced by RTOs or a probe's
/// answer) owes the receiver: the grants that fill the deficit cannot be
/// answered with data, and must not get it evicted as idle.
#[test]
fn grants_that_fill_a_deficit_need_no_answer() {
    let cfg = RcccConfig {
        link_rate_bps: 1_000_000_000,
        mtu: 1500,
        quantum: 1500,
        min_grant: 1500,
        initial_window: 30_000,
        ..RcccConfig::default()
    };
    let idle = cfg.idle_timeout;
    // Twenty packets arrive that no grant paid for: 30,000 B of debt.
    let (mut rx, initial) = unpaid_arrivals(cfg, 20, 1500, Arrival::Paced);
    // The pacer grants at 1 Gb/s, 1,500 B every 12 µs: 40 µs after an
    // idle timeout it has granted less than the debt, and the sender, which
    // has sent nothing on those grants, is still served.
    let end = Instant::ZERO + idle + Duration::from_micros(40);
    pace_until(&mut rx, end);
    let paid = rx.granted(1).unwrap() - initial;
    assert!(paid > 0 && paid < 30_000, "granted {paid}");
    assert!(rx.is_active(1), "evicted while paying off its debt");
    assert_eq!(rx.stats().idle_evictions, 0);
    // Once grants pass the debt, they are expected to be answered again.
    pace_until(&mut rx, end + idle * 4);
    assert_eq!(rx.stats().idle_evictions, 1);
}

/// The receiver forgot the source (its entry went with the last PDC) while
/// the source's CCC lived on: its grants restart from the initial window,
/// far behind the source's counter. The source re-bases on the first of
/// them instead of taking every later grant as stale, and credit flows
/// again with the next.
#[test]
fn a_receiver_that_forgot_the_source_is_followed_after_one_resync() {
    let cfg = RcccConfig {
        quantum: 1,
        ..at_line_rate()
    };
    let mut a = RcccSource::new(cfg.clone()).unwrap();
    let t0 = Instant::ZERO;
    a.on_new_data(t0, 64_000_000);
    // Many grants from the first receiver: the counter moves far ahead.
    let mut cum = 12_500u64;
    let mut now = t0;
    for _ in 0..400 {
        cum += 10_000;
        now += Duration::from_micros(1);
        assert_eq!(
            a.on_credit_update(now, wire24(cum)),
            CreditUpdate::New(10_000)
        );
        a.on_send(now, 10_000, false);
    }
    // A fresh receiver entry: its counter starts at the initial window.
    let mut rx: RcccReceiver<u8> = RcccReceiver::new(cfg).unwrap();
    rx.on_rx(now, 1, a.credit_target(None), 4160, false);
    rx.handle_timeout(now);
    let (_, g1) = rx.poll_grant().unwrap();
    assert_eq!(a.on_credit_update(now, g1), CreditUpdate::Resync);
    assert_eq!(a.stats().resyncs, 0, "one value alone may be a stray");
    // The receiver repeats its count (a CREDIT CP, an ACK): the source
    // re-bases on it.
    assert_eq!(a.on_credit_update(now, g1), CreditUpdate::Resync);
    assert_eq!(a.stats().resyncs, 1);
    // Its next grant is credit again.
    rx.on_rx(now, 1, a.credit_target(None), 4160, false);
    let later = now + Duration::from_micros(5);
    rx.handle_timeout(later);
    let (_, g2) = rx.poll_grant().unwrap();
    assert!(matches!(a.on_credit_update(later, g2), CreditUpdate::New(n) if n > 0));
}

/// The same when the source's count is only a little more than the bound
/// ahead of the receiver's fresh one: the first grant is far off, the
/// next ones, a packet further on, fall within the bound behind the
/// source's count. They follow the stray value in step and confirm the
/// re-base; taken for stale, every grant after the first was ignored and
/// the source starved (two engines writing both ways, a target PDC closed
/// while the source's CCC lived on).
#[test]
fn grants_that_follow_a_stray_value_re_base_even_when_they_look_old() {
    let cfg = at_line_rate();
    let in_step = 2 * cfg.max_credit + u64::from(cfg.mtu);
    let initial = cfg.initial_window;
    let mut a = RcccSource::new(cfg).unwrap();
    let now = Instant::ZERO;
    a.on_new_data(now, 64_000_000);
    a.on_ack(now);
    // The source's count: just past the bound ahead of a fresh receiver's.
    let ours = initial + in_step + 100;
    for cum in [initial + in_step / 2, ours] {
        assert!(matches!(
            a.on_credit_update(now, wire24(cum)),
            CreditUpdate::New(_)
        ));
        a.on_send(now, a.credit().unsigned_abs(), false);
    }
    let credit = a.credit();
    // The fresh receiver's count, then its next grant of a packet.
    assert_eq!(
        a.on_credit_update(now, wire24(initial)),
        CreditUpdate::Resync
    );
    let next = initial + 4160;
    assert!(ours - next <= in_step, "looks merely old");
    assert_eq!(a.on_credit_update(now, wire24(next)), CreditUpdate::Resync);
    assert_eq!(a.stats().resyncs, 1);
    assert_eq!(
        a.credit(),
        credit,
        "no credit gained or lost by the re-base"
    );
    assert_eq!(
        a.on_credit_update(now, wire24(next + 4160)),
        CreditUpdate::New(4160)
    );
}
