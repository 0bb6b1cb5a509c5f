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

/// Behind a standing queue every packet outlives a PTO of the least round
/// trip. Once a probe's answer has found the packets in flight late, not
/// lost, the PTO follows the newest round trip: a flow sending one packet
/// per round trip (a window-based source at its floor, one of many into one
/// port) does not send a probe, and draw an ACK, for every packet.
#[test]
fn after_a_probe_finds_its_packets_late_the_pto_follows_the_queue() {
    let (mut a, mut b, pdc, now) = probing();
    let queue = Duration::from_micros(200);
    let mut t = now;
    let mut per_round = vec![];
    for round in 0..4 {
        let p = send(&mut a, pdc, t, 2 + round, 1);
        let arrives = t + queue;
        // Every timer that comes due while the packet waits in the queue.
        let mut probes = vec![];
        for _ in 0..8 {
            let Some(w) = a.pds.poll_timeout().filter(|&w| w < arrives) else {
                break;
            };
            a.pds.handle_timeout(w, &mut a.up);
            probes.extend(drain(&mut a, w));
        }
        assert!(probes.iter().all(is_probe));
        per_round.push(probes.len());
        // The packet arrives, then the probes that queued behind it.
        deliver(&mut b, arrives, &p[0]);
        exchange(&mut a, &mut b, arrives, &probes);
        assert!(drain(&mut a, arrives).is_empty(), "nothing found lost");
        t = arrives;
    }
    assert_eq!(per_round, [1, 0, 0, 0]);
    assert_eq!(a.pds.counters().tail_probe_lost, 0);
    assert_eq!(a.pds.counters().tx_retransmits, 0);
    assert_eq!(
        a.up.acked
            .iter()
            .filter(|k| (2..6).contains(&k.token))
            .count(),
        4
    );
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
    probing_unheard_in(cfg, size, 0)
}

/// [`probing_unheard`] on a PDC of traffic class `tc`.
fn probing_unheard_in(cfg: PdsConfig, size: u32, tc: u8) -> (Host, Vec<Dgram>, Dgram, Instant) {
    let cfg = PdsConfig {
        tail_probe: Some(Duration::from_micros(5)),
        ..cfg
    };
    let mut a = host(A, 1, cfg);
    let k = InitiatorKey {
        tc: TrafficClass::from_masked(tc),
        ..key(ReliableMode::Rud)
    };
    let pdc = a.pds.open(t(0), k).unwrap();
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

fn is_credit_req(d: &Dgram) -> bool {
    matches!(d.pds(), PdsRepr::Cp(c) if matches!(c.payload, CpPayload::CreditReq { .. }))
}

fn is_data(d: &Dgram) -> bool {
    matches!(d.pds(), PdsRepr::Request(_))
}

/// Runs `a` and `b` on a lossless link with no delay until both are quiet
/// or `until`, from `now`: every timer when due, every packet delivered at
/// once. Returns A's data packets with the time each left.
pub(super) fn run_pair(
    a: &mut Host,
    b: &mut Host,
    mut now: Instant,
    until: Instant,
) -> Vec<(Instant, Psn)> {
    let mut sent = vec![];
    loop {
        for _ in 0..10_000 {
            let from_a = drain(a, now);
            let from_b = drain(b, now);
            if from_a.is_empty() && from_b.is_empty() {
                break;
            }
            for d in &from_a {
                if let PdsRepr::Request(r) = d.pds() {
                    sent.push((now, r.psn));
                }
                deliver(b, now, d);
            }
            for d in &from_b {
                deliver(a, now, d);
            }
        }
        let next = [a.pds.poll_timeout(), b.pds.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(w) if w < until => {
                now = w.max(now);
                a.pds.handle_timeout(now, &mut a.up);
                b.pds.handle_timeout(now, &mut b.up);
            }
            _ => return sent,
        }
    }
}

/// With RCCC the resends wait for credit, and the target's RCCC receiver
/// has heard no CC header of this source: the whole speculative window was
/// lost. The probe's answer establishes the PDC, so the CREDIT_REQ the loss
/// raises names it, and the target enters the source from that request;
/// the resends then go on the credit its pacer grants. No packet passes the
/// closed credit: when every sender of an incast loses its window, forced
/// packets arrive together as a burst at the queue the pacer is draining.
#[test]
fn after_a_syn_addressed_probe_a_credit_request_enters_the_source_and_credit_resends() {
    let (mut a, first, probe, when) = probing_unheard(rccc_source(2 * 4160), 4000);
    assert!(
        !first.is_empty() && first.len() < 4,
        "speculation admits a few"
    );
    assert!(drain(&mut a, when).is_empty(), "no credit, nothing leaves");
    let mut b = rccc_target(2 * 4160);
    let now = when + Duration::from_micros(3);
    exchange(&mut a, &mut b, now, &[probe]);
    let out = drain(&mut a, now);
    assert!(!out.iter().any(is_data), "nothing forced past the credit");
    let reqs: Vec<Dgram> = out.into_iter().filter(is_credit_req).collect();
    assert_eq!(reqs.len(), 1);
    let PdsRepr::Cp(c) = reqs[0].pds() else {
        panic!()
    };
    assert!(
        matches!(c.dpdcid, DpdcidField::Dpdcid(_)),
        "to the established PDC: {:?}",
        c.dpdcid
    );
    deliver(&mut b, now, &reqs[0]);
    let rr = b.pds.rccc_receiver().unwrap();
    assert_eq!(rr.stats().credit_requests, 1);
    assert_eq!(rr.known_senders(), 1, "entered from the request");
    assert_eq!(b.pds.counters().drops(DropReason::StrayFeedback), 0);
    let sent = run_pair(&mut a, &mut b, now, now + PdsConfig::default().rto_init);
    assert_eq!(a.up.acked.iter().filter(|k| k.token == 2).count(), 4);
    assert!(sent.len() >= 4, "every packet resent or sent on credit");
    assert_eq!(a.pds.counters().rto_fired, 0);
    assert!(b.pds.rccc_receiver().unwrap().stats().grants > 0);
    assert_eq!(
        b.pds.rccc_receiver().unwrap().known_senders(),
        1,
        "the data's CC header named the sender the request entered"
    );
}

/// A CREDIT_REQ names no CCC, so the target enters its sender as `ccc_id`
/// 0. A source in another traffic class names its CCC in the first data
/// packet's CC header, and the target moves the PDC to that sender: one
/// sender in the table, not a stale one beside it, and every packet
/// delivered.
#[test]
fn the_first_cc_header_moves_a_sender_entered_by_its_credit_request() {
    let (mut a, _first, probe, when) = probing_unheard_in(rccc_source(2 * 4160), 4000, 3);
    let mut b = rccc_target(2 * 4160);
    let now = when + Duration::from_micros(3);
    exchange(&mut a, &mut b, now, &[probe]);
    let reqs: Vec<Dgram> = drain(&mut a, now)
        .into_iter()
        .filter(is_credit_req)
        .collect();
    assert_eq!(reqs.len(), 1);
    deliver(&mut b, now, &reqs[0]);
    assert_eq!(b.pds.rccc_receiver().unwrap().known_senders(), 1);
    assert_eq!(b.pds.rccc_source_count(), 1);
    run_pair(&mut a, &mut b, now, now + 4 * PdsConfig::default().rto_init);
    assert_eq!(a.up.acked.iter().filter(|k| k.token == 2).count(), 4);
    assert_eq!(b.pds.counters().drops(DropReason::CccMismatch), 0);
    assert_eq!(b.pds.rccc_receiver().unwrap().known_senders(), 1);
    assert_eq!(b.pds.rccc_source_count(), 1);
}

/// The same against a target that cannot place the request (no RCCC
/// receiver here; a peer that keys senders by data packets alone): the
/// requests go unanswered, and with every packet condemned no RTO runs.
/// The first request an RTO_INIT_TIME after the condemning answer lets the
/// oldest packet pass the closed credit, and it alone; its CC header
/// reaches any receiver. Without it nothing would ever leave.
#[test]
fn an_unanswered_credit_request_forces_the_oldest_packet_after_rto_init() {
    let (mut a, first, probe, when) = probing_unheard(rccc_source(2 * 4160), 4000);
    let rto = PdsConfig::default().rto_init;
    let mut b = host(B, 2, PdsConfig::default());
    let now = when + Duration::from_micros(3);
    exchange(&mut a, &mut b, now, &[probe]);
    assert_eq!(a.pds.counters().tail_probe_lost, first.len() as u64);
    let out = drain(&mut a, now);
    assert!(!out.iter().any(is_data), "nothing forced yet");
    assert_eq!(out.iter().filter(|d| is_credit_req(d)).count(), 1);
    let mut t_now = now;
    let mut forced = vec![];
    let mut requests = 1;
    while let Some(w) = a.pds.poll_timeout() {
        if w > now + 4 * rto {
            break;
        }
        t_now = w.max(t_now);
        a.pds.handle_timeout(t_now, &mut a.up);
        for d in drain(&mut a, t_now) {
            if is_data(&d) {
                forced.push((t_now, d));
            } else if is_credit_req(&d) {
                requests += 1;
            }
        }
        if !forced.is_empty() {
            break;
        }
    }
    assert!(requests >= 2, "it kept asking");
    assert_eq!(forced.len(), 1, "the oldest alone");
    assert!(forced[0].0 >= now + rto, "not before RTO_INIT_TIME");
    assert_eq!(psns(&[forced[0].1.clone()]), psns(&first[..1]));
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

#[test]
fn only_losses_of_packets_sent_before_any_feedback_count_as_first_round_trip_losses() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    // The first window leaves blind; its first packet is lost, the other
    // four arrive and their ACKs have it resent (SACK inference).
    let first = send(&mut a, pdc, t(0), 1, 5);
    exchange(&mut a, &mut b, t(20), &first[1..]);
    let re = drain(&mut a, t(21));
    assert_eq!(re.len(), 1, "the lost first packet is resent");
    let c = a.pds.counters();
    assert_eq!((c.tx_retransmits, c.first_rtt_resent), (1, 1));
    // Its resend is lost too: a second resend of the same packet is not a
    // second first-round-trip loss.
    let mut again = vec![];
    let mut now = t(21);
    while again.is_empty() && now < t(50_000) {
        now = a.pds.poll_timeout().expect("the resend is timed");
        a.pds.handle_timeout(now, &mut a.up);
        again = drain(&mut a, now);
    }
    assert_eq!(again.len(), 1, "resent again when its timer fires");
    let rto = now;
    let c = a.pds.counters();
    assert_eq!((c.tx_retransmits, c.first_rtt_resent), (2, 1));
    exchange(&mut a, &mut b, rto, &again);
    // Sent after the source heard from the target: a loss, but not one of
    // the first round trip.
    let later = send(&mut a, pdc, rto, 2, 5);
    exchange(&mut a, &mut b, rto + Duration::from_micros(20), &later[1..]);
    let re = drain(&mut a, rto + Duration::from_micros(21));
    assert_eq!(re.len(), 1, "the lost later packet is resent");
    let c = a.pds.counters();
    assert_eq!((c.tx_retransmits, c.first_rtt_resent), (3, 1));
}

/// A retransmission settles its original's credit with its own at the RCCC
/// receiver, except when the original was speculative: that one took no
/// counted credit. Settled twice, the lost first packet left the sender's
/// balance a packet below what it owes, and the pacer granted that much
/// beyond its bound on outstanding credit.
#[test]
fn the_resend_of_a_lost_speculative_packet_settles_only_its_own_credit() {
    let (mut a, mut b, _) = rccc_write(2 * 4160, 6);
    let first = drain(&mut a, t(0));
    assert_eq!(first.len(), 2, "the speculative window");
    // The first packet is lost; the second arrives.
    exchange(&mut a, &mut b, t(3), &first[1..]);
    run_pair(&mut a, &mut b, t(3), t(50_000));
    assert_eq!(a.up.acked.len(), 6);
    assert_eq!(a.pds.counters().first_rtt_resent, 1);
    let rr = b.pds.rccc_receiver().unwrap();
    let sender = (A, 0);
    let paced_granted = rr.granted(sender).unwrap() - 2 * 4160;
    let st = rr.stats();
    let paced_back = st.received_bytes - st.speculative_bytes;
    assert_eq!(
        rr.balance(sender),
        Some(paced_granted as i64 - paced_back as i64),
        "every paced byte settled once: granted {paced_granted}, back {paced_back}"
    );
}
