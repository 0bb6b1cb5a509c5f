//! Loss detection beyond PSN order: RACK's time rule (on packets sent
//! once only) and the tail loss probe (`tail_probe.rs`).

use super::*;

/// Sends `n` packets of token `token` on `pdc`, one per microsecond from
/// `now`, and returns them.
fn send(a: &mut Host, pdc: uet_wire::PdcId, now: Instant, token: u64, n: u32) -> Vec<Dgram> {
    let mut out = vec![];
    for (i, pkt) in (0u64..).zip(pkts(token, n, 100)) {
        let at = now + Duration::from_micros(i);
        a.pds.enqueue(at, pdc, [pkt]).unwrap();
        out.extend(drain(a, at));
    }
    assert_eq!(out.len(), n as usize);
    out
}

/// Delivers `ds` to B at `now` and B's answers back to A.
fn exchange(a: &mut Host, b: &mut Host, now: Instant, ds: &[Dgram]) {
    for d in ds {
        deliver(b, now, d);
    }
    for d in drain(b, now) {
        deliver(a, now, &d);
    }
}

/// An established PDC whose source uses RACK's time rule with `window`.
fn racking(window: Option<Duration>) -> (Host, Host, uet_wire::PdcId, Instant) {
    let cfg = PdsConfig {
        rack_window: window,
        ..PdsConfig::default()
    };
    let mut a = host(A, 1, cfg);
    let mut b = host(B, 2, PdsConfig::default());
    let (pdc, now) = established(&mut a, &mut b);
    (a, b, pdc, now)
}

fn psn_of(d: &Dgram) -> Psn {
    match d.pds() {
        PdsRepr::Request(r) => r.psn,
        other => panic!("not a request: {other:?}"),
    }
}

fn psns(ds: &[Dgram]) -> Vec<Psn> {
    ds.iter().map(psn_of).collect()
}

fn is_probe(d: &Dgram) -> bool {
    matches!(d.pds(), PdsRepr::Cp(c) if matches!(c.payload, CpPayload::Probe { .. }))
}

/// One packet (token 2) leaves at `now` and is lost; its PDC's first probe
/// goes at the PTO. Returns the packet, when the probe left and the probe.
fn a_lost_packet_and_its_probe(
    a: &mut Host,
    pdc: uet_wire::PdcId,
    now: Instant,
) -> (Vec<Dgram>, Instant, Vec<Dgram>) {
    let p = send(a, pdc, now, 2, 1);
    let when = a.pds.poll_timeout().unwrap();
    (p, when, probe_at(a, when))
}

/// Fires `a`'s timers at `at`, where a probe and nothing else is due.
fn probe_at(a: &mut Host, at: Instant) -> Vec<Dgram> {
    a.pds.handle_timeout(at, &mut a.up);
    let probe = drain(a, at);
    assert!(probe.len() == 1 && is_probe(&probe[0]), "one probe");
    probe
}

#[test]
fn a_delayed_first_copy_is_no_evidence_against_what_left_after_it() {
    let (mut a, mut b, pdc, now) = racking(Some(Duration::from_micros(5)));
    // p0..p6 leave 1 µs apart. p0 and p1 are held up, p6 is still on its
    // way; p2..p5 arrive, so p0 and p1 are presumed lost and resent 20 µs
    // after p0 left.
    let p = send(&mut a, pdc, now, 2, 7);
    let t1 = now + Duration::from_micros(20);
    exchange(&mut a, &mut b, t1, &p[2..6]);
    let re = drain(&mut a, t1);
    assert_eq!(psns(&re), psns(&p[0..2]));
    // p1's resend arrives, then p0's delayed first copy; one ACK answers
    // both. It names p0, whose first copy is no retransmission, so its
    // `retx` is clear (an OR over both would set it). Taking p0's resend
    // (20 µs after p6 left) as what arrived would condemn p6.
    let t2 = t1 + Duration::from_micros(3);
    deliver(&mut b, t2, &re[1]);
    exchange(&mut a, &mut b, t2, &p[0..1]);
    assert!(drain(&mut a, t2).is_empty(), "p6 is not presumed lost");
    exchange(&mut a, &mut b, t2, &p[6..7]);
    assert_eq!(a.up.acked.iter().filter(|k| k.token == 2).count(), 7);
    assert_eq!(a.pds.counters().tx_retransmits, 2);
}

#[test]
fn rack_window_presumes_lost_what_left_long_before_a_delivered_packet() {
    for rack in [None, Some(Duration::from_micros(5))] {
        let (mut a, mut b, pdc, now) = racking(rack);
        // p0 leaves, then p1 8 µs later; p0 is lost, p1 arrives.
        let p0 = send(&mut a, pdc, now, 2, 1);
        let p1 = send(&mut a, pdc, now + Duration::from_micros(8), 3, 1);
        let now = now + Duration::from_micros(20);
        exchange(&mut a, &mut b, now, &p1);
        let re = drain(&mut a, now);
        match rack {
            // One packet behind: PSN order and dupthresh wait.
            None => assert!(re.is_empty()),
            // Sent 8 µs before a delivered packet, more than the window.
            Some(_) => assert_eq!(psns(&re), psns(&p0)),
        }
    }
}

#[test]
fn rack_window_spares_what_left_just_before_a_delivered_packet() {
    let (mut a, mut b, pdc, now) = racking(Some(Duration::from_micros(5)));
    // p0 and p1 leave 1 µs apart; p1 overtakes p0 (another path).
    let p = send(&mut a, pdc, now, 2, 2);
    let now = now + Duration::from_micros(20);
    exchange(&mut a, &mut b, now, &p[1..2]);
    assert!(drain(&mut a, now).is_empty(), "reordering, not loss");
    exchange(&mut a, &mut b, now, &p[0..1]);
    // (p0 is not the message's last packet: its ACK may wait for the
    // coalescing timer.)
    let later = now + PdsConfig::default().ack_delay;
    b.pds.handle_timeout(later, &mut b.up);
    exchange(&mut a, &mut b, later, &[]);
    assert_eq!(a.up.acked.iter().filter(|k| k.token == 2).count(), 2);
    assert_eq!(a.pds.counters().tx_retransmits, 0);
}

/// An established PDC with tail probes no sooner than 5 µs, whose one RTT
/// sample is 2 µs: its PTO is 5 µs + the ACK delay.
fn probing() -> (Host, Host, uet_wire::PdcId, Instant) {
    let cfg = PdsConfig {
        tail_probe: Some(Duration::from_micros(5)),
        ..PdsConfig::default()
    };
    let mut a = host(A, 1, cfg);
    let mut b = host(B, 2, PdsConfig::default());
    let (pdc, now) = established(&mut a, &mut b);
    (a, b, pdc, now)
}

#[test]
fn a_silent_lost_tail_is_probed_and_resent_long_before_its_rto() {
    let (mut a, mut b, pdc, now) = probing();
    let p = send(&mut a, pdc, now, 2, 2);
    // Both are lost. The next timer is the probe's, a PTO after the last
    // packet left (not the 5 ms RTO): max(2 × min RTT = 4 µs, the 5 µs
    // floor) + the target's 20 µs ACK delay.
    let last = now + Duration::from_micros(1);
    let when = a.pds.poll_timeout().unwrap();
    assert_eq!(when, last + Duration::from_micros(25));
    a.pds.handle_timeout(when, &mut a.up);
    let probe = drain(&mut a, when);
    assert_eq!(probe.len(), 1);
    let PdsRepr::Cp(c) = probe[0].pds() else {
        panic!("{:?}", probe[0].pds())
    };
    assert!(matches!(c.payload, CpPayload::Probe { .. }));
    // On the data traffic class: it queues behind the data it asks about.
    assert_eq!(probe[0].dscp, PdsConfig::default().dscp_data);
    assert_eq!(a.pds.counters().tail_probes, 1);
    // Its answer acknowledges neither packet: both were lost.
    let now = when + Duration::from_micros(3);
    exchange(&mut a, &mut b, now, &probe);
    let re = drain(&mut a, now);
    assert_eq!(psns(&re), psns(&p));
    assert_eq!(a.pds.counters().tail_probe_lost, 2);
    assert_eq!(a.pds.counters().rto_fired, 0);
    exchange(&mut a, &mut b, now + Duration::from_micros(3), &re);
    assert_eq!(a.up.acked.iter().filter(|k| k.token == 2).count(), 2);
}

#[test]
fn a_probe_behind_delayed_packets_finds_nothing_lost() {
    let (mut a, mut b, pdc, now) = probing();
    let p = send(&mut a, pdc, now, 2, 2);
    let when = a.pds.poll_timeout().unwrap();
    a.pds.handle_timeout(when, &mut a.up);
    let probe = drain(&mut a, when);
    assert_eq!(probe.len(), 1);
    // The packets were only queued: they arrive before the probe, which
    // followed them, and the answer covers them.
    let now = when + Duration::from_micros(30);
    for d in &p {
        deliver(&mut b, now, d);
    }
    exchange(&mut a, &mut b, now, &probe);
    assert!(drain(&mut a, now).is_empty());
    assert_eq!(a.up.acked.iter().filter(|k| k.token == 2).count(), 2);
    assert_eq!(a.pds.counters().tail_probe_lost, 0);
    assert_eq!(a.pds.counters().tx_retransmits, 0);
}

#[test]
fn no_probe_without_packets_in_flight_or_when_disabled() {
    // Disabled: the next timer after a lost packet is its RTO.
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let (pdc, now) = established(&mut a, &mut b);
    send(&mut a, pdc, now, 2, 1);
    assert_eq!(
        a.pds.poll_timeout(),
        Some(now + PdsConfig::default().rto_init)
    );
    // Enabled, but everything acknowledged: no probe is ever due.
    let (mut a, mut b, pdc, now) = probing();
    let p = send(&mut a, pdc, now, 2, 1);
    exchange(&mut a, &mut b, now + Duration::from_micros(2), &p);
    let until = now + Duration::from_millis(1);
    while let Some(w) = a.pds.poll_timeout().filter(|w| *w < until) {
        a.pds.handle_timeout(w, &mut a.up);
        assert!(drain(&mut a, w).is_empty(), "nothing to probe at {w}");
    }
    assert_eq!(a.pds.counters().tail_probes, 0);
}

#[test]
fn a_probe_answer_condemns_nothing_past_its_sack_bitmap() {
    let (mut a, mut b, pdc, now) = probing();
    // 70 packets leave at once; all but p0 arrive, and every ACK is lost.
    a.pds.enqueue(now, pdc, pkts(2, 70, 100)).unwrap();
    let p = drain(&mut a, now);
    assert_eq!(p.len(), 70);
    for d in &p[1..] {
        deliver(&mut b, now + Duration::from_micros(1), d);
    }
    drain(&mut b, now + Duration::from_micros(1));
    let when = a.pds.poll_timeout().unwrap();
    a.pds.handle_timeout(when, &mut a.up);
    let probe = drain(&mut a, when);
    assert_eq!(a.pds.counters().tail_probes, 1);
    // The answer's bitmap starts at p0 and covers 64 PSNs: p0 is missing
    // there, p64..p69 are past it, neither acknowledged nor lost.
    exchange(&mut a, &mut b, when + Duration::from_micros(2), &probe);
    let re = drain(&mut a, when + Duration::from_micros(2));
    assert_eq!(psns(&re), psns(&p[..1]));
}

/// A source whose PDC is not yet established, with RACK's time rule, that
/// has sent four packets whose first copies never arrive; returns the
/// packets and the RTO's resend of the first.
fn lost_before_establishment() -> (Host, Host, Vec<Dgram>, Dgram, Instant) {
    let cfg = PdsConfig {
        rack_window: Some(Duration::from_micros(5)),
        ..PdsConfig::default()
    };
    let mut a = host(A, 1, cfg);
    let b = host(B, 2, PdsConfig::default());
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(2, 4, 100)).unwrap();
    let first = drain(&mut a, t(0));
    assert_eq!(
        psns(&first).len(),
        4,
        "all four leave with SYN, and are lost"
    );
    let when = a.pds.poll_timeout().unwrap();
    a.pds.handle_timeout(when, &mut a.up);
    let re = drain(&mut a, when);
    assert_eq!(psns(&re), psns(&first[..1]), "the RTO resends the first");
    assert_eq!(a.pds.counters().rto_fired, 1);
    (a, b, first, re[0].clone(), when)
}

#[test]
fn the_answer_to_an_rto_resend_condemns_a_window_lost_before_establishment() {
    let (mut a, mut b, first, resend, when) = lost_before_establishment();
    // The resend arrives; its ACK says it answers a retransmission, so
    // what left before the resend and is not acknowledged is lost: all
    // three go at once, none waits for an RTO of its own.
    let now = when + Duration::from_micros(3);
    exchange(&mut a, &mut b, now, &[resend]);
    let re = drain(&mut a, now);
    assert_eq!(psns(&re), psns(&first[1..]));
    exchange(&mut a, &mut b, now, &re);
    assert_eq!(a.up.acked.iter().filter(|k| k.token == 2).count(), 4);
    assert_eq!(a.pds.counters().rto_fired, 1);
}

#[test]
fn a_late_first_copy_after_an_rto_resend_condemns_nothing() {
    let (mut a, mut b, first, _resend, when) = lost_before_establishment();
    // Not the resend but the first packet's first copy arrives, late: the
    // ACK does not say it answers a retransmission, and the other three
    // may be as late as it was.
    let now = when + Duration::from_micros(3);
    exchange(&mut a, &mut b, now, &first[..1]);
    assert!(
        psns(&drain(&mut a, now)).is_empty(),
        "nothing presumed lost"
    );
    exchange(&mut a, &mut b, now, &first[1..]);
    assert_eq!(a.up.acked.iter().filter(|k| k.token == 2).count(), 4);
    assert_eq!(a.pds.counters().tx_retransmits, 1);
}

/// A source with tail probes no sooner than 5 µs, configured by `cfg`,
/// whose PDC is not established: four packets leave with SYN and are all
/// lost (a full drop-tail buffer), so it has heard nothing and has no RTT
/// sample. `size` is each packet's payload. Returns the packets and the
/// probe, sent at the PTO.
fn probing_unheard(cfg: PdsConfig, size: u32) -> (Host, Vec<Dgram>, Dgram, Instant) {
    let cfg = PdsConfig {
        tail_probe: Some(Duration::from_micros(5)),
        ..cfg
    };
    let mut a = host(A, 1, cfg);
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(2, 4, size)).unwrap();
    let first = drain(&mut a, t(0));
    // No RTT sample: the 5 µs floor stands in for the least round trip,
    // PTO = 2 × 5 µs + the target's 20 µs ACK delay, long before the RTO.
    let when = a.pds.poll_timeout().unwrap();
    assert_eq!(when, t(30));
    a.pds.handle_timeout(when, &mut a.up);
    let probe = drain(&mut a, when);
    assert_eq!(probe.len(), 1, "one probe and nothing else");
    let PdsRepr::Cp(c) = probe[0].pds() else {
        panic!("{:?}", probe[0].pds())
    };
    assert!(matches!(c.payload, CpPayload::Probe { .. }));
    // Addressed as the PDC's data is (§2.2): the target can open the PDC
    // from it, and the PSN offset places it after the lost packets.
    assert!(
        matches!(c.dpdcid, DpdcidField::Syn { .. }),
        "SYN-addressed: {:?}",
        c.dpdcid
    );
    assert_eq!(a.pds.counters().tail_probes, 1);
    (a, first, probe[0].clone(), when)
}

#[test]
fn a_window_lost_before_establishment_is_found_by_a_syn_addressed_probe() {
    let (mut a, first, probe, when) = probing_unheard(PdsConfig::default(), 100);
    assert_eq!(first.len(), 4);
    // The target has never heard of the source: it opens the PDC from the
    // probe and answers with an ACK that establishes it and acknowledges
    // nothing, so all four are known lost at once.
    let mut b = host(B, 2, PdsConfig::default());
    let now = when + Duration::from_micros(3);
    exchange(&mut a, &mut b, now, &[probe]);
    assert_eq!(b.pds.counters().drops(DropReason::UnknownPdc), 0);
    let re = drain(&mut a, now);
    assert_eq!(psns(&re), psns(&first));
    assert_eq!(a.pds.counters().tail_probe_lost, 4);
    exchange(&mut a, &mut b, now + Duration::from_micros(3), &re);
    assert_eq!(a.up.acked.iter().filter(|k| k.token == 2).count(), 4);
    assert_eq!(a.pds.counters().rto_fired, 0);
}

/// With RCCC the resends wait for credit, and the target's RCCC receiver
/// grants only to sources it has heard a CC header from, which the probe
/// does not carry. The oldest lost packet passes the closed credit, as on
/// an RTO, and nothing else does.
#[test]
fn after_a_syn_addressed_probe_the_oldest_lost_packet_passes_closed_credit() {
    let (mut a, first, probe, when) = probing_unheard(rccc_source(2 * 4160), 4000);
    assert!(
        !first.is_empty() && first.len() < 4,
        "speculation admits a few"
    );
    assert!(drain(&mut a, when).is_empty(), "no credit, nothing leaves");
    let mut b = host(B, 2, PdsConfig::default());
    let now = when + Duration::from_micros(3);
    exchange(&mut a, &mut b, now, &[probe]);
    // Beside the resend goes a CREDIT_REQ, now to the established PDC.
    let (re, ctl): (Vec<_>, Vec<_>) = drain(&mut a, now)
        .into_iter()
        .partition(|d| matches!(d.pds(), PdsRepr::Request(_)));
    assert_eq!(psns(&re), psns(&first[..1]), "the oldest alone");
    assert!(
        ctl.iter().all(|d| matches!(
            d.pds(),
            PdsRepr::Cp(c) if matches!(c.payload, CpPayload::CreditReq { .. })
        )),
        "only credit requests beside it"
    );
    assert_eq!(a.pds.counters().tail_probe_lost, first.len() as u64);
    assert_eq!(a.pds.counters().rto_fired, 0);
}

/// The same when the answer that establishes the PDC is not the probe's: the
/// first probe was only late, a second went half an RTO_INIT later, and the
/// late answer to the first established the PDC without condemning anything.
/// The second probe's answer condemns the window, and the oldest packet
/// still passes closed credit: the target has acknowledged nothing of this
/// PDC, so its RCCC receiver has not heard of the source, and with every
/// packet condemned no RTO runs. Without this nothing would ever leave.
#[test]
fn an_answer_that_condemns_a_window_the_target_never_acknowledged_forces_its_oldest_packet() {
    let (mut a, first, probe1, when) = probing_unheard(rccc_source(2 * 4160), 4000);
    let rto = PdsConfig::default().rto_init;
    assert!(drain(&mut a, when).is_empty(), "no credit, nothing leaves");
    // Half an RTO_INIT later the first probe is presumed lost (credit
    // requests, unanswerable yet, go meanwhile).
    let probes = |ds: Vec<Dgram>| -> Vec<Dgram> { ds.into_iter().filter(is_probe).collect() };
    let before = when + (rto / 2 - Duration::from_nanos(1));
    a.pds.handle_timeout(before, &mut a.up);
    assert!(probes(drain(&mut a, before)).is_empty());
    let when2 = when + rto / 2;
    a.pds.handle_timeout(when2, &mut a.up);
    let probe2 = probes(drain(&mut a, when2));
    assert_eq!(probe2.len(), 1);
    let mut b = host(B, 2, PdsConfig::default());
    // The late answer to the first probe establishes the PDC; it is not the
    // outstanding probe's, so it condemns nothing.
    let t1 = when2 + Duration::from_micros(1);
    exchange(&mut a, &mut b, t1, &[probe1]);
    assert!(
        drain(&mut a, t1)
            .iter()
            .all(|d| !matches!(d.pds(), PdsRepr::Request(_))),
        "no data yet"
    );
    assert_eq!(a.pds.counters().tail_probe_lost, 0);
    let t2 = t1 + Duration::from_micros(2);
    exchange(&mut a, &mut b, t2, &probe2);
    let re: Vec<_> = drain(&mut a, t2)
        .into_iter()
        .filter(|d| matches!(d.pds(), PdsRepr::Request(_)))
        .collect();
    assert_eq!(a.pds.counters().tail_probe_lost, first.len() as u64);
    assert_eq!(psns(&re), psns(&first[..1]), "the oldest alone");
    assert_eq!(a.pds.counters().rto_fired, 0);
}

/// A probe is dropped like any packet. One still unanswered half an
/// RTO_INIT_TIME after it left was lost, and another goes, before the RTO:
/// its answer finds the lost packet, which goes again at once.
#[test]
fn a_lost_probe_is_followed_by_another_half_an_rto_init_later() {
    let (mut a, mut b, pdc, now) = probing();
    let rto = PdsConfig::default().rto_init;
    // The packet and the episode's probe are both lost.
    let (p, when, _) = a_lost_packet_and_its_probe(&mut a, pdc, now);
    let when2 = a.pds.poll_timeout().unwrap();
    assert_eq!(when2, when + rto / 2);
    assert!(when2 < now + rto, "before the RTO");
    let probe = probe_at(&mut a, when2);
    assert_eq!(a.pds.counters().tail_probes, 2);
    second_probe_finds_the_loss(&mut a, &mut b, when2, &probe, &p);
}

/// The second probe (sent at `at`) arrives: its answer finds `lost` (token
/// 2) lost, which goes again at once and is acknowledged, with no RTO.
fn second_probe_finds_the_loss(
    a: &mut Host,
    b: &mut Host,
    at: Instant,
    probe: &[Dgram],
    lost: &[Dgram],
) {
    let t = at + Duration::from_micros(3);
    exchange(a, b, t, probe);
    let again = drain(a, t);
    assert_eq!(psns(&again), psns(lost));
    exchange(a, b, t, &again);
    assert_eq!(a.up.acked.iter().filter(|k| k.token == 2).count(), 1);
    assert_eq!(a.pds.counters().rto_fired, 0);
}

/// The answer to a probe ends its episode (RFC 8985 §7.4): when the resend
/// it found is lost as well, the next probe goes a PTO after it, not the
/// RTO.
#[test]
fn an_answered_probe_ends_its_episode_and_a_lost_resend_is_probed_again() {
    let (mut a, mut b, pdc, now) = probing();
    let rto = PdsConfig::default().rto_init;
    let (p, when, probe) = a_lost_packet_and_its_probe(&mut a, pdc, now);
    let t = when + Duration::from_micros(3);
    exchange(&mut a, &mut b, t, &probe);
    // Found lost and resent; the resend is lost too.
    let re = drain(&mut a, t);
    assert_eq!(psns(&re), psns(&p));
    let when2 = a.pds.poll_timeout().unwrap();
    assert!(when2 < t + rto / 2, "a PTO after the resend, not later");
    let probe2 = probe_at(&mut a, when2);
    assert_eq!(a.pds.counters().tail_probes, 2);
    second_probe_finds_the_loss(&mut a, &mut b, when2, &probe2, &p);
}
