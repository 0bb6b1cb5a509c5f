//! NSCC traces: the seeds' worked numbers, each quadrant and each mechanism of
//! §5.2, then model-based property tests.

use uet_wire::Units256;
use uet_wire::time::{Duration, Instant};

use super::*;

const G100: u64 = 100_000_000_000;
const MTU: u64 = 4096;

fn us(v: u64) -> Duration {
    Duration::from_micros(v)
}

fn ns(v: u64) -> Duration {
    Duration::from_nanos(v)
}

fn at_ns(v: u64) -> Instant {
    Instant::from_nanos(v)
}

/// 100 Gb/s × 6 µs, MTU 4096, no trimming: the blog series' network.
/// BDP 75 000, MaxWnd 112 500, target_qdelay 6 µs, scaling_a = scaling_b =
/// 0.5, so alpha·target_qdelay = MTU, fi = 10 240, fi_scale = 0.125,
/// eta = 307.2, qa_threshold 24 µs, adjust_bytes_threshold 32 768. The
/// base RTT kept in 128 ns units is 46 units = 5 888 ns.
fn cfg6() -> NsccConfig {
    NsccConfig::new(G100, G100, us(6), 4096, false)
}

const BASE6: u64 = 5_888;

/// A sender and a clock, writing traces the way the spec's hooks are called.
struct Trace {
    n: Nscc,
    now: Instant,
}

impl Trace {
    /// Starts `start_ns` after an origin far enough from zero that every
    /// `tx_time = now - rtt` of a trace exists.
    fn new(cfg: NsccConfig, start_ns: u64) -> Self {
        let now = at_ns(1_000_000 + start_ns);
        Self {
            n: Nscc::new(cfg, now),
            now,
        }
    }

    fn with_cwnd(cwnd: u64) -> Self {
        let mut c = cfg6();
        c.initial_cwnd = cwnd;
        Self::new(c, 100_000)
    }

    fn advance(&mut self, d: Duration) -> &mut Self {
        self.now += d;
        self
    }

    fn send(&mut self, bytes: u64) -> &mut Self {
        self.n.on_send(bytes);
        self
    }

    /// An ACK arriving now for a first transmission whose RTT was `rtt_ns`.
    fn ack(&mut self, newly: u64, ecn: bool, rtt_ns: u64) -> &mut Self {
        let a = NsccAck {
            newly_rcvd_bytes: newly,
            ecn,
            tx_time: at_ns(self.now.as_nanos() - rtt_ns),
            rtx_count: 0,
            retx: false,
            service_time: Duration::ZERO,
            rcv_cwnd_pend: 0,
            restore_cwnd: false,
            arrival: None,
        };
        self.n.on_ack(self.now, &a);
        self
    }

    /// An ACK whose queueing delay (RTT − base RTT) is `delay_ns`.
    fn ack_delay(&mut self, newly: u64, ecn: bool, delay_ns: u64) -> &mut Self {
        let rtt = duration_ns(self.n.base_rtt()) + delay_ns;
        self.ack(newly, ecn, rtt)
    }

    fn nack(&mut self, bytes: u64, trimmed: bool, last_hop: bool, rccc: bool) -> &mut Self {
        let k = NsccNack {
            bytes,
            tx_time: at_ns(self.now.as_nanos() - BASE6),
            rtx_count: 0,
            retx: false,
            trimmed,
            last_hop,
            rccc_enabled: rccc,
        };
        self.n.on_nack(self.now, &k);
        self
    }

    fn events(&mut self) -> Vec<NsccEvent> {
        core::iter::from_fn(|| self.n.poll_event()).collect()
    }

    fn reasons(&mut self) -> Vec<CwndReason> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                NsccEvent::Cwnd { reason, .. } => Some(reason),
                NsccEvent::BaseRtt { .. } => None,
            })
            .collect()
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap()
}

// ---- the seeds' numbers ----

#[test]
fn blog_bdp_and_max_wnd_at_100g_6us() {
    // Blog "CC Config Parameters": 100 Gb/s × 6.0 µs = 600 000 bits = 75 000 B;
    // MaxWnd = 1.5 × 75 000 = 112 500 B, also the initial cwnd (Table 3-77).
    let c = cfg6();
    assert_eq!(c.bdp, 75_000);
    assert_eq!(c.max_wnd, 112_500);
    assert_eq!(c.initial_cwnd, 112_500);
    let n = Nscc::new(c.clone(), Instant::ZERO);
    assert_eq!(n.cwnd(), 112_500);
    assert_eq!(n.max_wnd(), 112_500);
    assert_eq!(n.inflight(), 0);
    // The slower end decides the BDP.
    let slow_rx = NsccConfig::new(4 * G100, G100, us(6), 4096, false);
    assert_eq!(slow_rx.bdp, 75_000);
    // The derived table at this network.
    assert_eq!(c.target_qdelay, us(6));
    assert_eq!(c.scaling_a, 0.5);
    assert_eq!(c.scaling_b, 0.5);
    assert!((c.alpha * 6e-6 - 4096.0).abs() < 1e-6);
    assert_eq!(c.fi, 10_240.0);
    assert_eq!(c.fi_scale, 0.125);
    assert!((c.eta - 307.2).abs() < 1e-9);
    assert_eq!(c.gamma, 0.8);
    assert_eq!(c.max_md_jump, 0.5);
    assert_eq!(c.qa_gate, 3);
    assert_eq!(c.qa_threshold, Some(us(24)));
    assert_eq!(c.adjust_bytes_threshold, 8 * 4096);
    assert_eq!(c.adjust_period_threshold, us(6));
    assert_eq!(c.near_zero_delay, us(1));
    assert!(!c.disable_quick_adapt);
    // base_rtt is kept in 128 ns units: 6 000 ns → 46 units.
    assert_eq!(n.base_rtt(), ns(BASE6));
}

#[test]
fn trimming_changes_target_qdelay_and_disables_qa_threshold() {
    let c = NsccConfig::new(G100, G100, us(6), 4096, true);
    assert_eq!(c.target_qdelay, ns(4_500));
    assert_eq!(c.scaling_b, 0.375);
    assert_eq!(c.qa_threshold, None);
    // A different drop threshold moves qa_threshold only without trimming.
    assert_eq!(c.with_drop_threshold_ratio(3.0).qa_threshold, None);
    assert_eq!(
        cfg6().with_drop_threshold_ratio(3.0).qa_threshold,
        Some(us(12))
    );
}

#[test]
fn default_is_the_reference_network() {
    let c = NsccConfig::default();
    assert_eq!(c.bdp, NsccConfig::BASE_BDP);
    assert_eq!(c.max_wnd, 225_000);
    assert_eq!(c.mtu, 4096);
    assert_eq!(c.scaling_a, 1.0);
    assert_eq!(c.scaling_b, 1.0);
    assert_eq!(c.fi, 5.0 * 4096.0);
    assert!((c.eta - 614.4).abs() < 1e-9);
    assert_eq!(c.qa_threshold, Some(us(48)));
}

#[test]
fn blog_increase_step_base_bdp_over_1024() {
    // Blog "Calculating New CWND": Step = Base_BDP / 1024 ≈ 146.5 B and
    // 75 000 + 146.5 = 75 146.5 B, where Base_BDP = 150 000 B is the
    // 100 Gb/s × 12 µs reference network.
    let base_bdp = NsccConfig::default().bdp;
    assert_eq!(base_bdp, NsccConfig::BASE_BDP);
    let step = base_bdp as f64 / 1024.0;
    assert_eq!(step, 146.484_375);
    assert_eq!((step * 10.0).round() / 10.0, 146.5);
    assert_eq!(cfg6().bdp as f64 + step, 75_146.484_375);
    // As a shift, the hardware form the blog recommends: 150 000 >> 10.
    assert_eq!(NsccConfig::BASE_BDP >> 10, 146);
    // The spec's increases are normalised by the same constant: every step
    // is proportional to scaling_a = BDP / Base_BDP, so at 6 µs (BDP
    // 75 000) each is exactly half of the reference network's.
    let (r, h) = (NsccConfig::default(), cfg6());
    assert_eq!(h.scaling_a, h.bdp as f64 / NsccConfig::BASE_BDP as f64);
    assert_eq!(h.fi * 2.0, r.fi);
    assert_eq!(h.fi_scale * 2.0, r.fi_scale);
    assert!((h.eta * 2.0 - r.eta).abs() < 1e-9);
}

#[test]
fn blog_dfc_penalty_4096_times_64_takes_75776_to_73728() {
    // NWK "Destination Flow Control": rcvd_bytes 12 288 → 16 384, so
    // newly_rcvd_bytes = 4 096; 4 096 × 64 = 262 144; >> 7 = 2 048;
    // cwnd 75 776 − 2 048 = 73 728. In the steady state inflight equals cwnd.
    let mut src = RcvdBytesTracker::new();
    assert_eq!(src.advance(Units256::from_bytes_round_up(12_288)), 12_288);
    let newly = src.advance(Units256::from_bytes_round_up(16_384));
    assert_eq!(newly, 4_096);
    assert_eq!((newly * 64) >> 7, 2_048);

    let mut t = Trace::with_cwnd(75_776);
    t.send(75_776 + newly);
    t.advance(ns(5_900));
    let a = NsccAck {
        newly_rcvd_bytes: newly,
        ecn: false,
        tx_time: at_ns(t.now.as_nanos() - 5_900),
        rtx_count: 0,
        retx: false,
        service_time: Duration::ZERO,
        rcv_cwnd_pend: 64,
        restore_cwnd: false,
        arrival: None,
    };
    t.n.on_ack(t.now, &a);
    assert_eq!(t.n.inflight(), 75_776);
    assert_eq!(t.n.cwnd(), 73_728);
    assert_eq!(t.n.saved_cwnd(), 75_776);
    assert_eq!(t.reasons(), vec![CwndReason::DfcPenalty]);
    // inflight now exceeds cwnd by 2 048: the PDC must wait.
    assert!(!t.n.can_send(MTU));

    // The pressure ends: the destination sets rc once and the window saved
    // when DFC began comes back (still within the first adjust period).
    t.advance(ns(50));
    let restore = NsccAck {
        rcv_cwnd_pend: 0,
        restore_cwnd: true,
        tx_time: at_ns(t.now.as_nanos() - 5_900),
        ..a
    };
    t.n.on_ack(t.now, &restore);
    assert_eq!(t.n.cwnd(), 75_776);
    assert_eq!(t.n.saved_cwnd(), 0);
    assert_eq!(t.reasons(), vec![CwndReason::DfcRestore]);
}

#[test]
fn dfc_end_to_end_through_the_destination() {
    // A placement backlog half way between the thresholds asks for 64.
    let mut pressure = LinearPressure::new(1 << 20, 2 << 20);
    pressure.set_backlog(3 << 19);
    let mut dest = NsccDest::new();
    let mut src = RcvdBytesTracker::new();
    let mut t = Trace::with_cwnd(75_776);
    t.send(79_872);
    for _ in 0..4 {
        dest.on_rx(4096, false, false);
    }
    let arrival = t.now;
    let st = dest.ack_cc_state(&pressure, arrival, arrival + ns(300), 0);
    assert_eq!(st.rcv_cwnd_pend.get(), 64);
    assert!(!st.rc);
    assert_eq!(st.rcvd_bytes.get(), 64);
    assert_eq!(st.service_time, 2); // 300 ns → 2 units of 128 ns
    // The source: the tracker saw 12 288 already, so this ACK is 4 096 new.
    src.advance(Units256::from_bytes_round_up(12_288));
    t.advance(ns(1_000));
    let ack = NsccAck {
        newly_rcvd_bytes: src.advance(st.rcvd_bytes),
        ecn: false,
        tx_time: at_ns(t.now.as_nanos() - 5_900 - 256),
        rtx_count: 0,
        retx: false,
        service_time: service_time_from_wire(st.service_time),
        rcv_cwnd_pend: st.rcv_cwnd_pend.get(),
        restore_cwnd: st.rc,
        arrival: None,
    };
    t.n.on_ack(t.now, &ack);
    assert_eq!(t.n.cwnd(), 73_728);

    // Backlog drained: the next ACK carries rc once, later ones do not.
    pressure.set_backlog(0);
    let st = dest.ack_cc_state(&pressure, arrival, arrival, 0);
    assert!(st.rc);
    assert_eq!(st.rcv_cwnd_pend.get(), 0);
    assert!(!dest.ack_cc_state(&pressure, arrival, arrival, 0).rc);
    let ack = NsccAck {
        newly_rcvd_bytes: 0,
        rcv_cwnd_pend: 0,
        restore_cwnd: true,
        ..ack
    };
    t.n.on_ack(t.now, &ack);
    assert_eq!(t.n.cwnd(), 75_776);
}

#[test]
fn dfc_suppresses_increases_and_floors_at_mtu() {
    let mut t = Trace::with_cwnd(50_000);
    t.send(10_000);
    t.advance(ns(1_000));
    let a = NsccAck {
        newly_rcvd_bytes: 36_864,
        ecn: false,
        tx_time: at_ns(t.now.as_nanos() - BASE6),
        rtx_count: 0,
        retx: false,
        service_time: Duration::ZERO,
        rcv_cwnd_pend: 127,
        restore_cwnd: false,
        arrival: None,
    };
    t.n.on_ack(t.now, &a);
    // cwnd = min(cwnd, inflight) = −26 864, minus the penalty → floor MTU.
    assert_eq!(t.n.cwnd(), MTU);
    assert_eq!(t.n.saved_cwnd(), 50_000);
    // A second penalty keeps the first saved window.
    t.n.on_ack(t.now, &a);
    assert_eq!(t.n.saved_cwnd(), 50_000);
    // Out-of-range penalties count as 127 (and rc without a saved window is a no-op).
    let mut u = Trace::with_cwnd(50_000);
    u.send(60_000);
    let b = NsccAck {
        newly_rcvd_bytes: 1_280,
        rcv_cwnd_pend: 255,
        ..a
    };
    u.n.on_ack(u.now, &b);
    assert_eq!(u.n.cwnd(), 50_000 - ((127 * 1_280) >> 7));
    let mut v = Trace::with_cwnd(50_000);
    v.n.on_ack(
        v.now,
        &NsccAck {
            newly_rcvd_bytes: 0,
            rcv_cwnd_pend: 0,
            restore_cwnd: true,
            ..a
        },
    );
    assert_eq!(v.n.cwnd(), 50_000);
}

// ---- the four quadrants ----

#[test]
fn quadrant_no_ecn_low_delay_is_proportional_increase() {
    // delay 3 µs of a 6 µs target: inc_bytes += alpha × newly × 3 µs
    // = 4 096 × 0.5 × 36 864 = 75 497 472; received 36 864 > 32 768 fulfils:
    // cwnd += 75 497 472 / 50 000 = 1 509.9 → 51 509 (no eta: 1 µs < period).
    let mut t = Trace::with_cwnd(50_000);
    t.send(60_000)
        .advance(us(1))
        .ack_delay(36_864, false, 3_000);
    assert_eq!(t.n.cwnd(), 51_509);
    assert!(!t.n.in_fast_increase());
    assert_eq!(
        t.reasons(),
        vec![CwndReason::Adjustment {
            proportional: true,
            fair: false,
            eta: false
        }]
    );
}

#[test]
fn quadrant_no_ecn_high_delay_is_fair_increase() {
    // delay = target: inc_bytes += fi × newly = 10 240 × 36 864;
    // cwnd += 377 487 360 / 50 000 = 7 549.7 → 57 549.
    let mut t = Trace::with_cwnd(50_000);
    t.send(60_000)
        .advance(us(1))
        .ack_delay(36_864, false, 6_000);
    assert_eq!(t.n.cwnd(), 57_549);
    assert_eq!(
        t.reasons(),
        vec![CwndReason::Adjustment {
            proportional: false,
            fair: true,
            eta: false
        }]
    );
}

#[test]
fn quadrant_ecn_low_delay_changes_nothing() {
    let mut t = Trace::with_cwnd(50_000);
    t.send(60_000).advance(us(1)).ack_delay(36_864, true, 3_000);
    assert_eq!(t.n.cwnd(), 50_000);
    assert!(t.reasons().is_empty());
}

fn md_cfg() -> NsccConfig {
    // The average is the last sample, so the decrease factor is exact.
    // No eta either: only the decrease moves cwnd.
    let mut c = cfg6();
    c.delay_ewma_weight = 1.0;
    c.disable_quick_adapt = true;
    c.eta = 0.0;
    c
}

#[test]
fn quadrant_ecn_high_delay_is_multiplicative_decrease() {
    // avg_delay 12 µs, target 6 µs: factor 1 − 0.8 × 6/12 = 0.6;
    // 112 500 × 0.6 = 67 500.
    let mut t = Trace::new(md_cfg(), 0);
    t.send(100_000)
        .advance(us(10))
        .ack_delay(4096, true, 12_000);
    assert_eq!(t.n.avg_delay(), us(12));
    assert_eq!(t.n.cwnd(), 67_500);
    assert_eq!(t.reasons(), vec![CwndReason::MultiplicativeDecrease]);
}

#[test]
fn md_is_bounded_by_max_md_jump_and_once_per_base_rtt() {
    let mut t = Trace::new(md_cfg(), 0);
    t.send(100_000).advance(us(10));
    // avg 100 µs: 1 − 0.8 × 94/100 = 0.248 < max_md_jump → × 0.5.
    t.ack_delay(1024, true, 100_000);
    assert_eq!(t.n.cwnd(), 56_250);
    // Within one base RTT (5 888 ns) of the last decrease: no second one,
    // not even at exactly base_rtt ("> base_rtt").
    t.advance(ns(BASE6)).ack_delay(1024, true, 100_000);
    assert_eq!(t.n.cwnd(), 56_250);
    t.advance(ns(1)).ack_delay(1024, true, 100_000);
    assert_eq!(t.n.cwnd(), 28_125);
    // MTU is the floor.
    for _ in 0..20 {
        t.advance(us(6)).ack_delay(0, true, 100_000);
    }
    assert_eq!(t.n.cwnd(), MTU);
}

#[test]
fn md_needs_the_average_above_target() {
    // The plain EWMA (w = 0.0125) lags: one 12 µs sample moves it to 150 ns.
    let mut c = cfg6();
    c.disable_quick_adapt = true;
    let mut t = Trace::new(c, 0);
    t.send(100_000)
        .advance(us(10))
        .ack_delay(4096, true, 12_000);
    assert_eq!(t.n.avg_delay(), ns(150));
    assert_eq!(t.n.cwnd(), 112_500);
    // Enough marked samples raise it: after 56 of them 12 000 × (1 − 0.9875^56)
    // exceeds the 6 µs target and the next spaced decrease happens.
    for _ in 0..80 {
        t.advance(us(1)).ack_delay(0, true, 12_000);
    }
    assert!(t.n.avg_delay() > us(6));
    assert!(t.n.cwnd() < 112_500);
}

// ---- fast increase, fulfill_adjustment ----

#[test]
fn fast_increase_after_a_cwnd_of_near_zero_delay() {
    let mut t = Trace::with_cwnd(16_384);
    t.send(200_000).advance(us(1));
    // Four ACKs of 4 096 at delay 0: fi_count reaches 16 384 = cwnd, not above.
    for _ in 0..4 {
        t.ack_delay(4096, false, 0);
    }
    assert_eq!(t.n.cwnd(), 16_384);
    assert!(!t.n.in_fast_increase());
    // The fifth passes cwnd: cwnd += 4 096 × fi_scale (0.125) = 512.
    t.ack_delay(4096, false, 0);
    assert!(t.n.in_fast_increase());
    assert_eq!(t.n.cwnd(), 16_896);
    // In increase mode every near-zero ACK grows the window.
    t.ack_delay(4096, false, 500);
    assert_eq!(t.n.cwnd(), 17_408);
    assert_eq!(
        t.reasons(),
        vec![CwndReason::FastIncrease, CwndReason::FastIncrease]
    );
    // A delay of 1 µs is not ≈ 0: the mode ends (and fi_count restarts).
    t.ack_delay(4096, false, 1_000);
    assert!(!t.n.in_fast_increase());
    t.ack_delay(4096, false, 0);
    assert!(!t.n.in_fast_increase());
}

#[test]
fn fast_increase_stops_at_max_wnd_and_on_ecn_decrease() {
    let mut t = Trace::with_cwnd(112_000);
    t.send(400_000).advance(us(1));
    for _ in 0..30 {
        t.ack_delay(4096, false, 0);
    }
    assert!(t.n.in_fast_increase());
    assert_eq!(t.n.cwnd(), 112_500);
    // multiplicative_decrease() turns the mode off even without decreasing.
    t.ack_delay(4096, true, 7_000);
    assert!(!t.n.in_fast_increase());
}

#[test]
fn fulfill_adjustment_adds_eta_once_per_period() {
    // ECN at low delay accumulates nothing, so only eta moves cwnd.
    let mut t = Trace::with_cwnd(50_000);
    t.send(100_000);
    t.advance(us(6)).ack_delay(1024, true, 0);
    assert_eq!(t.n.cwnd(), 50_307); // + 307.2
    t.advance(us(1)).ack_delay(1024, true, 0);
    assert_eq!(t.n.cwnd(), 50_307);
    // Enough bytes force an adjustment, but eta waits for the period.
    t.advance(us(1)).ack_delay(40_000, true, 0);
    assert_eq!(t.n.cwnd(), 50_307);
    t.advance(us(4)).ack_delay(1024, true, 0);
    assert_eq!(t.n.cwnd(), 50_614); // 50 307 + 307.2
    assert_eq!(
        t.reasons(),
        vec![
            CwndReason::Adjustment {
                proportional: false,
                fair: false,
                eta: true
            };
            2
        ]
    );
}

#[test]
fn fulfill_adjustment_clamps_to_max_wnd() {
    let mut t = Trace::with_cwnd(112_000);
    t.send(200_000)
        .advance(us(7))
        .ack_delay(36_864, false, 6_000);
    assert_eq!(t.n.cwnd(), 112_500);
}

// ---- RTT validity ----

fn ack_with(t: &mut Trace, rtt_ns: u64, rtx_count: u32, retx: bool, svc: Duration) {
    let a = NsccAck {
        newly_rcvd_bytes: 1024,
        ecn: false,
        tx_time: at_ns(t.now.as_nanos() - rtt_ns),
        rtx_count,
        retx,
        service_time: svc,
        rcv_cwnd_pend: 0,
        restore_cwnd: false,
        arrival: None,
    };
    t.n.on_ack(t.now, &a);
}

#[test]
fn rtt_is_valid_only_when_rtx_count_and_retx_agree() {
    // A 3 µs sample lowers base_rtt to 23 units (2 944 ns) when valid.
    for (rtx_count, retx, valid) in [
        (0, false, true),
        (1, true, true),
        (1, false, false), // ACK of the original, or of the retransmission?
        (0, true, false),
        (2, true, false), // retransmitted twice: ambiguous
        (3, false, false),
    ] {
        let mut t = Trace::new(cfg6(), 0);
        t.advance(us(1));
        ack_with(&mut t, 3_000, rtx_count, retx, Duration::ZERO);
        let want = if valid { ns(2_944) } else { ns(BASE6) };
        assert_eq!(t.n.base_rtt(), want, "rtx_count {rtx_count} retx {retx}");
    }
}

#[test]
fn rtt_subtracts_service_time_and_updates_max_wnd() {
    let mut t = Trace::new(cfg6(), 0);
    t.advance(us(20));
    // 10 µs round trip, 7 µs of it at the destination: 3 µs.
    ack_with(&mut t, 10_000, 0, false, us(7));
    assert_eq!(t.n.base_rtt(), ns(2_944));
    // max_wnd = 1.5 × sender.linkspeed × base_rtt = 1.5 × 12.5 GB/s × 2 944 ns.
    assert_eq!(t.n.max_wnd(), 55_200);
    assert_eq!(t.n.cwnd(), 55_200); // clamped at once
    assert_eq!(
        t.events()[..2],
        [
            NsccEvent::BaseRtt {
                now: t.now,
                base_rtt: ns(2_944),
                max_wnd: 55_200
            },
            NsccEvent::Cwnd {
                now: t.now,
                cwnd: 55_200,
                reason: CwndReason::MaxWnd
            }
        ]
    );
    // A service time longer than the round trip is no sample at all.
    let mut u = Trace::new(cfg6(), 0);
    u.advance(us(20));
    ack_with(&mut u, 10_000, 0, false, us(11));
    assert_eq!(u.n.base_rtt(), ns(BASE6));
    assert_eq!(u.n.avg_delay(), Duration::ZERO);
}

#[test]
fn the_rtt_ends_at_the_acks_stamped_arrival_not_when_it_was_read() {
    // Sent 13 µs ago; the ACK reached the host 3 µs after the send and
    // waited 10 µs to be read: a 3 µs sample, as without the wait.
    let mut t = Trace::new(cfg6(), 0);
    t.advance(us(20));
    let sent = t.now.as_nanos() - 13_000;
    let a = NsccAck {
        newly_rcvd_bytes: 1024,
        ecn: false,
        tx_time: at_ns(sent),
        rtx_count: 0,
        retx: false,
        service_time: Duration::ZERO,
        rcv_cwnd_pend: 0,
        restore_cwnd: false,
        arrival: Some(at_ns(sent + 3_000)),
    };
    t.n.on_ack(t.now, &a);
    assert_eq!(t.n.base_rtt(), ns(2_944));
    // The same ACK unstamped is a 13 µs sample: above the 6 µs base.
    let mut u = Trace::new(cfg6(), 0);
    u.advance(us(20));
    u.n.on_ack(
        u.now,
        &NsccAck {
            tx_time: at_ns(u.now.as_nanos() - 13_000),
            arrival: None,
            ..a
        },
    );
    assert_eq!(u.n.base_rtt(), ns(BASE6));
    assert!(u.n.avg_delay() > Duration::ZERO);
    // A stamp later than `now` (clocks disagreeing) counts as `now`.
    let mut v = Trace::new(cfg6(), 0);
    v.advance(us(20));
    v.n.on_ack(
        v.now,
        &NsccAck {
            tx_time: at_ns(v.now.as_nanos() - 3_000),
            arrival: Some(v.now + us(50)),
            ..a
        },
    );
    assert_eq!(v.n.base_rtt(), ns(2_944));
}

#[test]
fn a_floor_keeps_max_wnd_when_the_base_rtt_falls() {
    // 3 µs of a 6 µs configured RTT: max_wnd halves without a floor...
    let mut t = Trace::new(cfg6(), 0);
    let configured = t.n.max_wnd();
    t.advance(us(20));
    ack_with(&mut t, 3_000, 0, false, Duration::ZERO);
    assert_eq!(t.n.base_rtt(), ns(2_944));
    assert!(t.n.max_wnd() < configured);
    // ...and stays at the configured MaxWnd with it; the delay baseline
    // still follows the sample.
    let mut c = cfg6();
    c.min_max_wnd = c.max_wnd;
    let mut u = Trace::new(c, 0);
    u.advance(us(20));
    ack_with(&mut u, 3_000, 0, false, Duration::ZERO);
    assert_eq!(u.n.base_rtt(), ns(2_944));
    assert_eq!(u.n.max_wnd(), configured);
    assert_eq!(u.n.cwnd(), configured);
}

#[test]
fn invalid_rtt_still_counts_bytes_and_dfc_but_not_signals() {
    let mut t = Trace::with_cwnd(50_000);
    t.send(60_000).advance(us(7));
    let a = NsccAck {
        newly_rcvd_bytes: 36_864,
        ecn: true,
        tx_time: at_ns(t.now.as_nanos() - 50_000),
        rtx_count: 2,
        retx: true,
        service_time: Duration::ZERO,
        rcv_cwnd_pend: 0,
        restore_cwnd: false,
        arrival: None,
    };
    t.n.on_ack(t.now, &a);
    assert_eq!(t.n.inflight(), 60_000 - 36_864);
    assert_eq!(t.n.cwnd(), 50_000); // no increase, no eta, no decrease
    assert_eq!(t.n.avg_delay(), Duration::ZERO);
}

// ---- quick adapt ----

#[test]
fn quick_adapt_on_a_very_large_delay_then_ignores_old_marks() {
    let mut t = Trace::new(cfg6(), 0);
    t.send(100_000);
    // The first ACK only opens the quick-adapt window:
    // qa_endtime = now + base_rtt + target_qdelay = 10 µs + 5 888 + 6 000.
    t.advance(us(10)).ack_delay(4096, false, 0);
    assert_eq!(t.n.cwnd(), 112_500);
    // Before qa_endtime nothing happens, however large the delay.
    t.advance(ns(11_887)).ack_delay(1024, false, 30_000);
    assert_eq!(t.n.cwnd(), 112_500);
    // At qa_endtime (">=" per the spec; HTSIM uses ">"): delay 30 µs >
    // qa_threshold 24 µs and achieved_bytes 2 048 < max_wnd >> 3 = 14 062.
    t.advance(ns(1)).ack_delay(1024, false, 30_000);
    assert_eq!(t.n.cwnd(), 2_048.max(MTU));
    assert!(t.reasons().contains(&CwndReason::QuickAdapt));
    // bytes_to_ignore = inflight (100 000 − 6 144): marked ACKs of packets
    // sent before are ignored, so no decrease piles on top.
    assert_eq!(t.n.inflight(), 93_856);
    t.advance(us(20)).ack_delay(1024, true, 20_000);
    assert_eq!(t.n.cwnd(), MTU);
    assert!(t.reasons().is_empty());
}

#[test]
fn quick_adapt_needs_low_achieved_bytes() {
    let mut t = Trace::new(cfg6(), 0);
    t.send(300_000).advance(us(10)).ack_delay(4096, false, 0);
    // 16 384 bytes achieved in the window ≥ 112 500 >> 3: no quick adapt.
    t.advance(us(12)).ack_delay(16_384, false, 30_000);
    assert!(!t.reasons().contains(&CwndReason::QuickAdapt));
    assert!(t.n.cwnd() > 100_000);
}

#[test]
fn quick_adapt_ignores_delay_with_trimming_and_can_be_disabled() {
    let mut t = Trace::new(NsccConfig::new(G100, G100, us(6), 4096, true), 0);
    t.send(100_000).advance(us(10)).ack_delay(4096, false, 0);
    t.advance(us(12)).ack_delay(1024, false, 60_000);
    assert!(!t.reasons().contains(&CwndReason::QuickAdapt));

    let mut c = cfg6();
    c.disable_quick_adapt = true;
    let mut u = Trace::new(c, 0);
    u.send(100_000).advance(us(10)).ack_delay(4096, false, 0);
    u.advance(us(12)).ack_delay(1024, false, 60_000);
    assert!(!u.reasons().contains(&CwndReason::QuickAdapt));
}

// ---- NACK, loss ----

#[test]
fn trim_nack_takes_the_packet_off_cwnd() {
    let mut t = Trace::new(cfg6(), 0);
    t.send(20_000)
        .advance(us(10))
        .nack(4096, true, false, false);
    assert_eq!(t.n.inflight(), 20_000 - 4096);
    assert_eq!(t.n.cwnd(), 112_500 - 4096);
    // update_delay(config_base_rtt): 0.0125 × 6 µs.
    assert_eq!(t.n.avg_delay(), ns(75));
    assert_eq!(t.reasons(), vec![CwndReason::Nack]);
}

#[test]
fn last_hop_trim_is_rcccs_when_rccc_is_on() {
    // With RCCC: no window change (but the delay sample still counts).
    let mut t = Trace::new(cfg6(), 0);
    t.send(20_000).advance(us(10)).nack(4096, true, true, true);
    assert_eq!(t.n.cwnd(), 112_500);
    assert_eq!(t.n.inflight(), 20_000 - 4096);
    assert_eq!(t.n.avg_delay(), ns(75));
    // Without RCCC a last-hop trim is a congestion signal like any trim.
    let mut u = Trace::new(cfg6(), 0);
    u.send(20_000).advance(us(10)).nack(4096, true, true, false);
    assert_eq!(u.n.cwnd(), 112_500 - 4096);
    // A non-last-hop trim counts with RCCC too.
    let mut v = Trace::new(cfg6(), 0);
    v.send(20_000).advance(us(10)).nack(4096, true, false, true);
    assert_eq!(v.n.cwnd(), 112_500 - 4096);
}

#[test]
fn other_nacks_only_return_inflight() {
    let mut t = Trace::new(cfg6(), 0);
    t.send(20_000)
        .advance(us(10))
        .nack(4096, false, false, false);
    assert_eq!(t.n.cwnd(), 112_500);
    assert_eq!(t.n.inflight(), 20_000 - 4096);
    assert_eq!(t.n.avg_delay(), Duration::ZERO);
}

#[test]
fn trim_nack_triggers_quick_adapt_after_the_window() {
    let mut t = Trace::new(cfg6(), 0);
    t.send(100_000);
    // Opens the quick-adapt window (qa_endtime = 10 µs + 11 888 ns) and
    // takes the first trimmed packet off cwnd; trigger_qa stays set.
    t.advance(us(10)).nack(4096, true, false, false);
    assert_eq!(t.n.cwnd(), 108_404);
    t.advance(us(2)).ack_delay(8_192, false, 0);
    // After the window, the next trim adapts: cwnd = achieved = 8 192.
    t.advance(us(10)).nack(4096, true, false, false);
    assert_eq!(t.n.cwnd(), 8_192);
    let r = t.reasons();
    assert_eq!(r.last(), Some(&CwndReason::QuickAdapt));
    // In the ignore phase the next trim neither adapts nor subtracts.
    t.advance(us(1)).nack(4096, true, false, false);
    assert_eq!(t.n.cwnd(), 8_192);
}

#[test]
fn inferred_loss_takes_the_packet_off_cwnd_and_inflight() {
    let mut t = Trace::with_cwnd(10_000);
    t.send(12_000);
    t.n.on_inferred_loss(t.now, 4096);
    assert_eq!(t.n.cwnd(), 10_000 - 4096);
    assert_eq!(t.n.inflight(), 12_000 - 4096);
    t.n.on_inferred_loss(t.now, 4096);
    assert_eq!(t.n.cwnd(), MTU);
    assert_eq!(
        t.reasons(),
        vec![CwndReason::InferredLoss, CwndReason::InferredLoss]
    );
}

// ---- CanSend, AckRequest ----

#[test]
fn can_send_and_ack_request() {
    let mut t = Trace::new(cfg6(), 0);
    assert!(t.n.can_send(MTU));
    assert!(!t.n.ack_request());
    // 27 packets: 112 500 − 110 592 = 1 908 < MTU left.
    for _ in 0..27 {
        assert!(t.n.can_send(MTU));
        t.send(MTU);
    }
    assert!(!t.n.can_send(MTU));
    assert!(t.n.can_send(1_908));
    assert!(t.n.ack_request());
    // A window below ACK_Gen_Trigger (16 KiB) always asks.
    let mut u = Trace::with_cwnd(16_383);
    assert!(u.n.ack_request());
    // inflight may be negative; CanSend still works.
    u.ack_delay(512, false, 0);
    assert_eq!(u.n.inflight(), -512);
    assert!(u.n.can_send(16_383 + 512));
    assert!(!u.n.can_send(16_383 + 513));
}

// ---- base-RTT probing ----

#[test]
fn probe_after_first_feedback_unless_cached_or_small() {
    let mut t = Trace::new(cfg6(), 0);
    assert!(!t.n.wants_probe(t.now));
    t.send(4096).advance(us(8)).ack_delay(4096, false, 0);
    assert!(t.n.wants_probe(t.now));
    t.n.on_probe_sent(t.now);
    assert!(!t.n.wants_probe(t.now));
    // Unanswered for probe_timeout (8 × 6 µs): ask again, up to 3 times.
    t.advance(us(48));
    assert!(t.n.wants_probe(t.now));
    t.n.on_probe_sent(t.now);
    t.advance(us(48));
    t.n.on_probe_sent(t.now);
    t.advance(us(48));
    assert!(!t.n.wants_probe(t.now));
    // The sample arrives late: it still lowers base_rtt.
    t.n.on_probe_rtt(t.now, us(5));
    assert_eq!(t.n.base_rtt(), ns(4_992));

    let mut c = Trace::new(cfg6(), 0);
    c.n.use_cached_base_rtt(c.now, ns(5_000));
    assert_eq!(c.n.base_rtt(), ns(4_992));
    c.nack(4096, false, false, false);
    assert!(!c.n.wants_probe(c.now));

    let mut s = Trace::new(cfg6(), 0);
    s.n.set_transfer_hint(75_000);
    s.nack(4096, false, false, false);
    assert!(!s.n.wants_probe(s.now));
    s.n.set_transfer_hint(75_001);
    assert!(s.n.wants_probe(s.now));
    s.n.on_probe_rtt(s.now, us(6));
    assert!(!s.n.wants_probe(s.now));
}

// ---- events ----

#[test]
fn events_are_bounded() {
    let mut t = Trace::with_cwnd(1_000_000);
    for _ in 0..EVENT_CAPACITY + 10 {
        t.n.on_inferred_loss(t.now, 1);
    }
    assert_eq!(t.events().len(), EVENT_CAPACITY);
    assert_eq!(t.n.events_dropped(), 10);
}

// ---- destination ----

#[test]
fn destination_counts_new_untrimmed_bytes_in_256_b_units() {
    let mut d = NsccDest::new();
    d.on_rx(4096, false, false);
    d.on_rx(4096, true, false); // trimmed
    d.on_rx(4096, false, true); // duplicate
    d.on_rx(8_192, false, false);
    assert_eq!(d.rcvd_bytes(), 12_288);
    assert_eq!(d.rcvd_units().get(), 48);
    d.on_rx(1, false, false);
    assert_eq!(d.rcvd_units().get(), 49); // rounded up
}

#[test]
fn service_time_is_128_ns_units_saturating() {
    let t = at_ns(1_000);
    assert_eq!(service_time_to_wire(t, t), 0);
    assert_eq!(service_time_to_wire(t, t + ns(127)), 0);
    assert_eq!(service_time_to_wire(t, t + ns(1_000)), 7); // rounded down
    assert_eq!(service_time_to_wire(t, t + ns(8_388_480)), 0xFFFF);
    assert_eq!(
        service_time_to_wire(t, t + Duration::from_millis(10)),
        0xFFFF
    );
    assert_eq!(service_time_to_wire(t + ns(500), t), 0);
    assert_eq!(service_time_from_wire(0xFFFF), ns(8_388_480));
    assert_eq!(SERVICE_TIME_UNIT, ns(128));
}

#[test]
fn linear_pressure_maps_backlog_to_0_through_127() {
    let mut p = LinearPressure::new(1_000, 2_000);
    for (backlog, pend) in [
        (0, 0),
        (1_000, 0),
        (1_001, 1),
        (1_500, 64),
        (1_991, 126),
        (1_992, 126),
        (1_993, 127),
        (2_000, 127),
        (u64::MAX, 127),
    ] {
        p.set_backlog(backlog);
        assert_eq!(p.rcv_cwnd_pend(), pend, "backlog {backlog}");
    }
    assert_eq!(LinearPressure::new(5, 5).thresholds(), (5, 6));
    assert_eq!(NoPressure.rcv_cwnd_pend(), 0);
}

#[test]
fn rc_goes_out_once_per_pdc_after_the_penalty_ends() {
    let mut p = LinearPressure::new(0, 100);
    let (mut a, mut b) = (NsccDest::new(), NsccDest::new());
    p.set_backlog(50);
    assert_eq!(a.dfc(&p).rcv_cwnd_pend, 64);
    p.set_backlog(0);
    // b never saw a penalty: nothing to restore.
    assert_eq!(b.dfc(&p), DfcFields::default());
    let end = a.dfc(&p);
    assert!(end.restore_cwnd);
    assert_eq!(end.rcv_cwnd_pend, 0);
    assert!(!a.dfc(&p).restore_cwnd);
    // Through a trait object too.
    let dynp: &dyn ReceiverPressure = &p;
    assert_eq!(a.dfc(dynp), DfcFields::default());
}

#[test]
fn rcvd_bytes_tracker_handles_wrap_and_stale_acks() {
    let mut s = RcvdBytesTracker::new();
    let hi = Units256::from_masked(Units256::MAX);
    assert_eq!(s.advance(Units256::from_masked(10)), 2_560);
    // An older ACK arriving late reports nothing and is not remembered.
    assert_eq!(s.advance(Units256::from_masked(4)), 0);
    assert_eq!(s.last().get(), 10);
    let mut w = RcvdBytesTracker::new();
    assert_eq!(w.advance(Units256::from_masked(1 << 22)), (1 << 22) * 256);
    assert_eq!(w.advance(Units256::from_masked(1 << 23)), (1 << 22) * 256);
    assert_eq!(w.advance(hi), ((1 << 23) - 1) * 256);
    assert_eq!(w.advance(Units256::from_masked(1)), 512); // wrapped
}

// ---- model-based properties ----

mod model {
    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        Send(u64),
        Ack {
            newly: u64,
            ecn: bool,
            rtt_ns: u64,
            rtx_count: u32,
            retx: bool,
            svc_ns: u64,
            pend: u8,
            rc: bool,
        },
        Nack {
            bytes: u64,
            rtt_ns: u64,
            trimmed: bool,
            last_hop: bool,
            rccc: bool,
        },
        Loss(u64),
        Advance(u64),
        Probe(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (1u64..=9_000).prop_map(Op::Send),
            4 => (
                (0u64..=64).prop_map(|u| u * 256),
                any::<bool>(),
                0u64..200_000,
                0u32..4,
                any::<bool>(),
                0u64..20_000,
                prop_oneof![4 => Just(0u8), 1 => 0u8..=255],
                any::<bool>(),
            )
                .prop_map(|(newly, ecn, rtt_ns, rtx_count, retx, svc_ns, pend, rc)| {
                    Op::Ack { newly, ecn, rtt_ns, rtx_count, retx, svc_ns, pend, rc }
                }),
            1 => (1u64..=9_000, 0u64..200_000, any::<bool>(), any::<bool>(), any::<bool>())
                .prop_map(|(bytes, rtt_ns, trimmed, last_hop, rccc)| Op::Nack {
                    bytes, rtt_ns, trimmed, last_hop, rccc
                }),
            1 => (1u64..=9_000).prop_map(Op::Loss),
            2 => (0u64..50_000).prop_map(Op::Advance),
            1 => (1u64..20_000).prop_map(Op::Probe),
        ]
    }

    fn config() -> impl Strategy<Value = NsccConfig> {
        (
            prop_oneof![Just(1u64), Just(10), Just(100), Just(400)],
            prop_oneof![Just(1u64), Just(10), Just(100), Just(400)],
            1u64..50_000,
            prop_oneof![Just(1500u32), Just(4096), Just(9000), 1u32..10_000],
            any::<bool>(),
            0.0f64..1.0,
            any::<bool>(),
        )
            .prop_map(|(s, r, rtt, mtu, trim, w, no_qa)| {
                let mut c =
                    NsccConfig::new(s * 1_000_000_000, r * 1_000_000_000, ns(rtt), mtu, trim);
                c.delay_ewma_weight = w;
                c.disable_quick_adapt = no_qa;
                c
            })
    }

    /// Runs `ops`; `bounded` keeps every ACK, NACK and loss within what is
    /// outstanding, as a correct PDS does.
    fn run(cfg: NsccConfig, ops: &[Op], bounded: bool) -> Result<(), TestCaseError> {
        let mtu = cfg.mtu.max(1);
        let mut now = at_ns(1_000_000);
        let mut n = Nscc::new(cfg, now);
        let mut model: i64 = 0;
        for op in ops {
            let room = |want: u64, model: i64| -> u64 {
                if bounded {
                    want.min(u64::try_from(model).unwrap_or(0))
                } else {
                    want
                }
            };
            match *op {
                Op::Send(b) => {
                    n.on_send(b);
                    model += b as i64;
                }
                Op::Ack {
                    newly,
                    ecn,
                    rtt_ns,
                    rtx_count,
                    retx,
                    svc_ns,
                    pend,
                    rc,
                } => {
                    let newly = room(newly, model);
                    let a = NsccAck {
                        newly_rcvd_bytes: newly,
                        ecn,
                        tx_time: at_ns(now.as_nanos().saturating_sub(rtt_ns)),
                        rtx_count,
                        retx,
                        service_time: ns(svc_ns),
                        rcv_cwnd_pend: pend,
                        restore_cwnd: rc,
                        arrival: None,
                    };
                    n.on_ack(now, &a);
                    model -= newly as i64;
                }
                Op::Nack {
                    bytes,
                    rtt_ns,
                    trimmed,
                    last_hop,
                    rccc,
                } => {
                    let bytes = room(bytes, model);
                    let k = NsccNack {
                        bytes,
                        tx_time: at_ns(now.as_nanos().saturating_sub(rtt_ns)),
                        rtx_count: 0,
                        retx: false,
                        trimmed,
                        last_hop,
                        rccc_enabled: rccc,
                    };
                    n.on_nack(now, &k);
                    model -= bytes as i64;
                }
                Op::Loss(b) => {
                    let b = room(b, model);
                    n.on_inferred_loss(now, b);
                    model -= b as i64;
                }
                Op::Advance(d) => now += ns(d),
                Op::Probe(rtt) => {
                    let _ = n.wants_probe(now);
                    n.on_probe_sent(now);
                    n.on_probe_rtt(now, ns(rtt));
                }
            }
            prop_assert_eq!(n.inflight(), model);
            if bounded {
                prop_assert!(n.inflight() >= 0);
            }
            prop_assert!(n.cwnd() >= mtu, "cwnd {} < mtu {}", n.cwnd(), mtu);
            prop_assert!(
                n.cwnd() <= n.max_wnd(),
                "cwnd {} > max_wnd {}",
                n.cwnd(),
                n.max_wnd()
            );
            prop_assert!(n.max_wnd() >= mtu);
            prop_assert_eq!(n.base_rtt().as_nanos() % 128, 0);
            prop_assert!(n.avg_delay() <= Duration::from_secs(1));
            let _ = (n.can_send(mtu), n.ack_request());
        }
        let drained = core::iter::from_fn(|| n.poll_event()).count();
        prop_assert!(drained <= EVENT_CAPACITY);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn window_stays_in_bounds_and_inflight_matches(
            cfg in config(),
            ops in proptest::collection::vec(op(), 0..300),
        ) {
            run(cfg, &ops, false)?;
        }

        #[test]
        fn inflight_never_negative_when_acks_never_exceed_sends(
            cfg in config(),
            ops in proptest::collection::vec(op(), 0..300),
        ) {
            run(cfg, &ops, true)?;
        }

        #[test]
        fn default_network_random_walk(ops in proptest::collection::vec(op(), 0..600)) {
            run(NsccConfig::default(), &ops, true)?;
        }
    }
}
