//! The CCC's `inflight` against the retransmission ledgers (the invariant
//! documented on `engine::CcShare`): traces of the loss paths — RTO, NACK,
//! trim, SACK inference — with late and duplicate ACKs of originals and
//! retransmissions, and a property that drives two engines over a lossy,
//! reordering, duplicating, trimming wire and checks the books after every
//! step.

use proptest::prelude::*;

use super::*;
use uet_cms::{Algorithm, CccConfig, CccState};

const TC: TrafficClass = TrafficClass::from_masked(0);

/// The CCC towards B holds exactly what A's ledgers say: inflight bytes and
/// packets, retransmit backlog; and inflight is never negative.
fn assert_books(a: &Host, what: &str) {
    let Some(c) = a.pds.ccc(B, TC) else {
        return;
    };
    let (bytes, pkts, rtx) = a.pds.ccc_audit(B, TC);
    assert!(
        c.inflight() >= 0,
        "{what}: inflight {} < 0 (ledgers: {bytes})",
        c.inflight()
    );
    assert_eq!(
        (c.inflight(), c.inflight_pkts(), c.rtx_backlog()),
        (bytes, pkts, rtx),
        "{what}: CCC (inflight, inflight_pkts, rtx_backlog) vs the ledgers"
    );
}

/// Everything acknowledged: nothing in flight, nothing to resend, IDLE.
fn assert_drained(a: &Host, what: &str) {
    // With the last PDC to B its CCC goes too (`Pds::remove_pdc`).
    let Some(c) = a.pds.ccc(B, TC) else {
        assert_eq!(a.pds.pdc_count(), 0, "{what}: a PDC without its CCC");
        return;
    };
    assert_eq!(c.inflight(), 0, "{what}: inflight");
    assert_eq!(c.inflight_pkts(), 0, "{what}: inflight_pkts");
    assert_eq!(c.rtx_backlog(), 0, "{what}: rtx_backlog");
    assert_eq!(c.state(), CccState::Idle, "{what}: state");
}

fn requests(out: Vec<Dgram>) -> Vec<Dgram> {
    out.into_iter()
        .filter(|d| matches!(d.pds(), PdsRepr::Request(_)))
        .collect()
}

fn exchange(b: &mut Host, a: &mut Host, now: Instant, ds: &[Dgram]) {
    for d in ds {
        deliver(b, now, d);
    }
    for d in drain(b, now) {
        deliver(a, now, &d);
    }
}

fn trim(d: &Dgram) -> Dgram {
    let mut d = d.clone();
    d.bytes.truncate(64);
    d.trimmed = Some(Trim::Trimmed);
    d
}

/// An RTO declares the oldest packet lost; in the same turn of the event
/// loop, before the retransmission leaves, the late originals arrive and
/// are acknowledged. The packet left inflight when it was declared lost,
/// so its ACK must take it out of the retransmit backlog, not out of
/// inflight a second time.
#[test]
fn rto_then_ack_of_the_original_before_the_retransmission_leaves() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let (pdc, now) = established(&mut a, &mut b);
    assert_drained(&a, "established");
    a.pds.enqueue(now, pdc, pkts(2, 4, 1000)).unwrap();
    let out = requests(drain(&mut a, now));
    assert_eq!(out.len(), 4);
    let n = i64::from(a.pds.config().nominal(1000));
    assert_eq!(a.pds.ccc(B, TC).unwrap().inflight(), 4 * n);
    let rto = a.pds.poll_timeout().unwrap();
    a.pds.handle_timeout(rto, &mut a.up);
    assert_eq!(a.pds.counters().rto_fired, 1);
    assert_eq!(a.pds.ccc(B, TC).unwrap().inflight(), 3 * n);
    assert_eq!(a.pds.ccc(B, TC).unwrap().rtx_backlog(), n as u64);
    assert_books(&a, "after the RTO");
    exchange(&mut b, &mut a, rto, &out);
    assert_books(&a, "after the late ACK");
    assert!(
        requests(drain(&mut a, rto)).is_empty(),
        "acknowledged: not resent"
    );
    assert_drained(&a, "all acknowledged");
    // A duplicate of the ACK changes nothing.
    let ack = drain(&mut b, rto);
    assert!(ack.is_empty());
}

/// The same through SACK inference: three later packets arrive, the first
/// is presumed lost; then the original turns up after all (reordering),
/// before its retransmission was sent, and a duplicate ACK follows.
#[test]
fn sack_inferred_loss_then_the_original_arrives() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let (pdc, now) = established(&mut a, &mut b);
    a.pds.enqueue(now, pdc, pkts(2, 5, 1000)).unwrap();
    let out = requests(drain(&mut a, now));
    assert_eq!(out.len(), 5);
    let later = now + Duration::from_micros(10);
    let mut acks = vec![];
    for d in &out[1..] {
        deliver(&mut b, later, d);
    }
    acks.extend(drain(&mut b, later));
    for d in &acks {
        deliver(&mut a, later, d);
    }
    assert_eq!(a.pds.counters().sack_inferred, 1);
    assert_books(&a, "after the inference");
    assert_eq!(a.pds.ccc(B, TC).unwrap().inflight(), 0);
    deliver(&mut b, later, &out[0]);
    // Without `ar` the target acknowledges it after its ACK delay.
    let w = b.pds.poll_timeout().unwrap();
    assert!(w < now + PdsConfig::default().rto_init);
    b.pds.handle_timeout(w, &mut b.up);
    let late = drain(&mut b, w);
    assert!(!late.is_empty());
    for d in late.iter().chain(&late).chain(&acks) {
        deliver(&mut a, w, d);
        assert_books(&a, "late and duplicate ACKs");
    }
    assert!(requests(drain(&mut a, w)).is_empty());
    assert_drained(&a, "all acknowledged");
}

/// A retransmission after an RTO is in flight when the trimmed original
/// reaches the target: the NACK declares the packet lost again, and then
/// the retransmission's ACK arrives — before the second retransmission
/// left. Then the second retransmission's own late ACK (a duplicate).
#[test]
fn nack_of_a_late_trimmed_original_then_the_retransmission_is_acked() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let (pdc, now) = established(&mut a, &mut b);
    a.pds.enqueue(now, pdc, pkts(2, 1, 1000)).unwrap();
    let orig = requests(drain(&mut a, now)).remove(0);
    let rto = a.pds.poll_timeout().unwrap();
    a.pds.handle_timeout(rto, &mut a.up);
    let rtx = requests(drain(&mut a, rto)).remove(0);
    assert_books(&a, "retransmitted");
    // The original arrives trimmed: NACK.
    deliver(&mut b, rto, &trim(&orig));
    let nack = drain(&mut b, rto);
    assert!(matches!(nack[0].pds(), PdsRepr::Nack(_)));
    deliver(&mut a, rto, &nack[0]);
    assert_books(&a, "after the NACK");
    // The first retransmission arrives and is ACKed before A resends.
    exchange(&mut b, &mut a, rto, core::slice::from_ref(&rtx));
    assert_books(&a, "after the ACK of the retransmission");
    assert!(requests(drain(&mut a, rto)).is_empty());
    // A duplicate of the retransmission: ACKed again, counted nowhere.
    exchange(&mut b, &mut a, rto, &[rtx]);
    assert_drained(&a, "all acknowledged");
}

/// RTO, retransmission, then late ACKs of both the original and the
/// retransmission (the spurious-RTO case of a long queue).
#[test]
fn spurious_rto_with_late_acks_of_original_and_retransmission() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let (pdc, now) = established(&mut a, &mut b);
    a.pds.enqueue(now, pdc, pkts(2, 3, 1000)).unwrap();
    let out = requests(drain(&mut a, now));
    let rto = a.pds.poll_timeout().unwrap();
    a.pds.handle_timeout(rto, &mut a.up);
    let rtx = requests(drain(&mut a, rto));
    assert_eq!(rtx.len(), 1);
    assert_books(&a, "retransmitted");
    exchange(&mut b, &mut a, rto, &out);
    assert_books(&a, "original acknowledged");
    exchange(&mut b, &mut a, rto, &rtx);
    assert_drained(&a, "retransmission acknowledged too");
}

/// The CLOSE packet is control traffic: when the PDC closes, the CCC it
/// shared is left empty and IDLE.
#[test]
fn closing_a_pdc_leaves_nothing_in_flight() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let (_, mut now) = established(&mut a, &mut b);
    for _ in 0..20 {
        let Some(w) = [a.pds.poll_timeout(), b.pds.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
        else {
            break;
        };
        now = now.max(w);
        a.pds.handle_timeout(now, &mut a.up);
        b.pds.handle_timeout(now, &mut b.up);
        for _ in 0..3 {
            for d in drain(&mut a, now) {
                deliver(&mut b, now, &d);
            }
            for d in drain(&mut b, now) {
                deliver(&mut a, now, &d);
            }
            assert_books(&a, "closing");
        }
    }
    assert_eq!(a.pds.pdc_count(), 0);
    assert_drained(&a, "closed");
}

/// What the wire does to one datagram.
#[derive(Debug, Clone, Copy)]
enum Fate {
    /// Delivered after this many microseconds.
    Deliver(u16),
    Drop,
    /// Delivered twice.
    Duplicate(u16, u16),
    /// Delivered after more than an RTO (spurious timeouts).
    Late(u16),
    /// A request is trimmed (other packets are delivered).
    Trim(u16, bool),
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        8 => (1u16..200).prop_map(Fate::Deliver),
        3 => Just(Fate::Drop),
        1 => (1u16..200, 1u16..8000).prop_map(|(x, y)| Fate::Duplicate(x, y)),
        2 => (0u16..8000).prop_map(Fate::Late),
        2 => ((1u16..200), any::<bool>()).prop_map(|(x, l)| Fate::Trim(x, l)),
    ]
}

struct Wire {
    q: Vec<(Instant, u64, bool, Dgram)>,
    seq: u64,
}

impl Wire {
    fn push(&mut self, at: Instant, to_b: bool, d: Dgram) {
        self.seq += 1;
        self.q.push((at, self.seq, to_b, d));
    }

    fn send(&mut self, now: Instant, to_b: bool, d: Dgram, f: Fate) {
        let us = |x: u16| now + Duration::from_micros(u64::from(x));
        match f {
            Fate::Deliver(x) => self.push(us(x), to_b, d),
            Fate::Drop => {}
            Fate::Duplicate(x, y) => {
                self.push(us(x), to_b, d.clone());
                self.push(us(y), to_b, d);
            }
            Fate::Late(x) => self.push(us(x) + Duration::from_millis(4), to_b, d),
            Fate::Trim(x, last_hop) => {
                if matches!(d.pds(), PdsRepr::Request(_)) {
                    let mut t = d;
                    t.bytes.truncate(64);
                    t.trimmed = Some(if last_hop {
                        Trim::LastHop
                    } else {
                        Trim::Trimmed
                    });
                    self.push(us(x), to_b, t);
                } else {
                    self.push(us(x), to_b, d);
                }
            }
        }
    }

    fn next(&self) -> Option<Instant> {
        self.q.iter().map(|e| e.0).min()
    }

    /// Takes the datagrams due by `now`, in arrival order.
    fn due(&mut self, now: Instant) -> Vec<(bool, Dgram)> {
        let mut due: Vec<_> = self.q.iter().filter(|e| e.0 <= now).cloned().collect();
        self.q.retain(|e| e.0 > now);
        due.sort_by_key(|e| (e.0, e.1));
        due.into_iter().map(|e| (e.2, e.3)).collect()
    }
}

/// Drives A → B through `fates` (then a clean wire) until everything is
/// acknowledged and the PDCs closed, checking A's books after every turn
/// of the event loop. A turn runs the expired timers and the deliveries
/// due, and only then transmits: an RTO and a late ACK can meet in one
/// turn, as in the daemon. `batch` skips transmitting in some of the first
/// turns (a busy event loop).
fn run_trace(
    window_pkts: u64,
    msgs: &[(u16, u8)],
    fates: &[Fate],
    batch: &[bool],
) -> Result<(), TestCaseError> {
    let len = 1000u32;
    let mut cfg = PdsConfig {
        max_rto_retx: 40,
        rto_max: Duration::from_millis(20),
        ..PdsConfig::default()
    };
    let n = u64::from(cfg.nominal(len));
    cfg.ccc = CccConfig {
        mtu: n as u32,
        algorithm: Algorithm::Fixed {
            window: window_pkts * n,
        },
        ..CccConfig::default()
    };
    let mut a = host(A, 1, cfg.clone());
    let mut b = host(B, 2, cfg);
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    let mut plan: Vec<(Instant, u32)> = msgs
        .iter()
        .scan(0u64, |at, &(gap, k)| {
            *at += u64::from(gap);
            Some((t(*at), u32::from(k % 8) + 1))
        })
        .collect();
    plan.reverse();
    let mut wire = Wire { q: vec![], seq: 0 };
    let mut fates = fates.iter().copied();
    let mut batch = batch.iter().copied().cycle();
    let mut now = t(0);
    let mut token = 0;
    // A busy turn leaves A's transmissions to the next turn.
    let mut kick: Option<Instant> = None;
    for step in 0..20_000 {
        let next = [
            kick.take(),
            wire.next(),
            a.pds.poll_timeout(),
            b.pds.poll_timeout(),
            plan.last().map(|p| p.0),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else { break };
        now = now.max(next);
        if a.pds.pdc_count() > 0 {
            while plan.last().is_some_and(|p| p.0 <= now) {
                let (_, k) = plan.pop().unwrap();
                token += 1;
                a.pds.enqueue(now, pdc, pkts(token, k, len)).unwrap();
            }
        } else {
            plan.clear();
        }
        a.pds.handle_timeout(now, &mut a.up);
        b.pds.handle_timeout(now, &mut b.up);
        for (to_b, d) in wire.due(now) {
            if to_b {
                deliver(&mut b, now, &d);
            } else {
                deliver(&mut a, now, &d);
            }
            assert_books(&a, &format!("step {step} t={now:?} delivery"));
        }
        // Busy turns only early on: later every turn transmits.
        if batch.next().unwrap_or(true) || step >= 2_000 {
            for d in drain(&mut a, now) {
                let f = fates.next().unwrap_or(Fate::Deliver(1));
                wire.send(now, true, d, f);
            }
        } else {
            kick = Some(now + Duration::from_micros(1));
        }
        for d in drain(&mut b, now) {
            let f = fates.next().unwrap_or(Fate::Deliver(1));
            wire.send(now, false, d, f);
        }
        assert_books(&a, &format!("step {step} t={now:?} transmit"));
    }
    prop_assert!(
        a.up.failed.is_empty(),
        "nothing fails: {:?}",
        &a.up.failed[..a.up.failed.len().min(3)]
    );
    prop_assert_eq!(a.pds.pdc_count(), 0, "the PDC closed when idle");
    assert_drained(&a, "the end");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the wire does — loss, reordering, duplicates, trims, late
    /// originals after RTOs, duplicate and late ACKs, SACK-inferred losses
    /// — the CCC's inflight equals the ledgers' count after every step, is
    /// never negative, and returns to exactly 0 (nothing to resend, IDLE)
    /// once everything is acknowledged.
    #[test]
    fn inflight_matches_the_ledgers_and_ends_at_zero(
        window_pkts in 1u64..24,
        msgs in proptest::collection::vec((0u16..300, any::<u8>()), 1..12),
        fates in proptest::collection::vec(fate(), 0..200),
        batch in proptest::collection::vec(prop_oneof![4 => Just(true), 1 => Just(false)], 1..16),
    ) {
        run_trace(window_pkts, &msgs, &fates, &batch)?;
    }
}
