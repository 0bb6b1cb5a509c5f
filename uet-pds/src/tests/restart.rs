//! A peer that restarts, or forgets a PDC, or is short of a resource: the
//! initiator opens the PDC afresh and sends again what the peer never had,
//! and waits before resending what the peer refused for want of room.

use super::*;

#[test]
fn a_write_after_the_peer_restarted_reopens_the_pdc_and_succeeds() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 3, 100)).unwrap();
    exchange(&mut a, &mut b, t(1));
    assert_eq!(a.up.acked.len(), 3);
    // B restarts: a new engine that never heard of the PDC.
    let mut b = host(B, 3, PdsConfig::default());
    a.pds.enqueue(t(10), pdc, pkts(2, 4, 100)).unwrap();
    exchange(&mut a, &mut b, t(11));
    assert!(a.up.failed.is_empty(), "{:?}", a.up.failed);
    assert_eq!(a.up.acked.iter().filter(|p| p.token == 2).count(), 4);
    assert_eq!(a.pds.counters().pdcs_reopened, 1);
    assert_eq!(b.up.requests.len(), 4, "the new B got every packet once");
    // The PDC keeps its local ID: the layer above saw it established twice
    // and never closed.
    let events: Vec<PdsEvent> = std::iter::from_fn(|| a.pds.poll_event()).collect();
    let est = events
        .iter()
        .filter(|e| matches!(e, PdsEvent::PdcEstablished { pdc: p } if *p == pdc))
        .count();
    assert_eq!(est, 2, "{events:?}");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, PdsEvent::PdcClosed { .. })),
        "{events:?}"
    );
}

#[test]
fn a_message_the_old_peer_acknowledged_in_part_fails_the_rest_go_again() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 1, 100)).unwrap();
    exchange(&mut a, &mut b, t(1));
    // Token 2: two packets, the first reaches the old B and is
    // acknowledged; then B restarts, and token 3 is queued behind.
    a.pds.enqueue(t(2), pdc, pkts(2, 2, 100)).unwrap();
    a.pds.enqueue(t(2), pdc, pkts(3, 2, 100)).unwrap();
    let out = drain(&mut a, t(2));
    assert_eq!(out.len(), 4);
    deliver(&mut b, t(3), &out[0]);
    b.pds
        .handle_timeout(t(3) + Duration::from_millis(1), &mut b.up);
    for d in drain(&mut b, t(3) + Duration::from_millis(1)) {
        deliver(&mut a, t(4), &d);
    }
    assert!(a.up.acked.iter().any(|p| p.token == 2 && p.frag == 0));
    let mut b = host(B, 3, PdsConfig::default());
    for d in &out[1..] {
        deliver(&mut b, t(5), d);
    }
    for d in drain(&mut b, t(5)) {
        deliver(&mut a, t(6), &d);
    }
    exchange(&mut a, &mut b, t(7));
    let failed: Vec<_> =
        a.up.failed
            .iter()
            .map(|(p, e)| (p.token, p.frag, *e))
            .collect();
    assert_eq!(
        failed,
        vec![(2, 1, PdsError::Nack(NackCode::InvDpdcid))],
        "only the half-delivered message fails"
    );
    assert_eq!(a.up.acked.iter().filter(|p| p.token == 3).count(), 2);
}

#[test]
fn a_peer_that_keeps_refusing_the_pdc_fails_it() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 1, 100)).unwrap();
    exchange(&mut a, &mut b, t(1));
    a.pds.enqueue(t(2), pdc, pkts(2, 1, 100)).unwrap();
    // Every packet A sends is refused as unknown, as by a peer that forgets
    // every PDC at once.
    for round in 0..10u64 {
        let now = t(10 + round);
        let out = drain(&mut a, now);
        if out.is_empty() {
            break;
        }
        for d in out {
            let PdsRepr::Request(r) = d.pds() else {
                continue;
            };
            let n = PdsRepr::Nack(uet_wire::pds::PdsNackRepr {
                next_hdr: NextHeader::None,
                m: false,
                retx: false,
                target: NackTarget::Psn(r.psn),
                code: NackCode::InvDpdcid,
                vendor_code: 0,
                spdcid: None,
                dpdcid: r.spdcid,
                payload: 0,
                ccx: None,
            });
            let mut bytes = vec![0; n.buffer_len()];
            n.emit(&mut bytes);
            let nack = Dgram {
                src: B,
                bytes,
                ..d.clone()
            };
            deliver(&mut a, now, &nack);
        }
    }
    assert_eq!(a.pds.counters().pdcs_reopened, 3);
    assert_eq!(
        a.up.failed
            .iter()
            .map(|(p, e)| (p.token, *e))
            .collect::<Vec<_>>(),
        vec![(2, PdsError::Nack(NackCode::InvDpdcid))]
    );
    assert_eq!(a.pds.pdc_count(), 0);
}

#[test]
fn a_syn_replaces_an_unconfirmed_pdc_with_another_start() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 2, 100)).unwrap();
    let out = drain(&mut a, t(0));
    // A forged SYN with A's address and PDC ID, another Start_PSN, gets
    // there first.
    let PdsRepr::Request(mut r) = out[0].pds() else {
        panic!()
    };
    r.psn = r.psn.add(1 << 24);
    let forged = PdsRepr::Request(r);
    let mut bytes = vec![0; forged.buffer_len()];
    forged.emit(&mut bytes);
    deliver(
        &mut b,
        t(1),
        &Dgram {
            bytes,
            ..out[0].clone()
        },
    );
    for d in &out {
        deliver(&mut b, t(2), d);
    }
    let replies = drain(&mut b, t(2));
    assert!(
        replies.iter().all(|d| !matches!(d.pds(), PdsRepr::Nack(_))),
        "no INVALID_SYN for the real initiator"
    );
    for d in &replies {
        deliver(&mut a, t(3), d);
    }
    exchange(&mut a, &mut b, t(4));
    assert!(a.up.failed.is_empty(), "{:?}", a.up.failed);
    assert_eq!(a.up.acked.len(), 2);
    assert_eq!(b.pds.counters().pending_evicted, 1);
}

#[test]
fn a_refusal_for_want_of_a_pdc_is_resent_after_a_backoff() {
    let cfg = PdsConfig {
        max_pdcs: 1,
        ..PdsConfig::default()
    };
    let c = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3));
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, cfg);
    let mut other = host(c, 4, PdsConfig::default());
    // Another initiator holds B's only PDC, confirmed.
    let mut kc = key(ReliableMode::Rud);
    kc.job = JobId::from_masked(9);
    let pc = other.pds.open(t(0), kc).unwrap();
    other.pds.enqueue(t(0), pc, pkts(1, 1, 10)).unwrap();
    exchange(&mut other, &mut b, t(0));
    other.pds.enqueue(t(0), pc, pkts(2, 1, 10)).unwrap();
    exchange(&mut other, &mut b, t(0));
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(3, 1, 10)).unwrap();
    let rto = PdsConfig::default().rto_init;
    let mut sends = Vec::new();
    let mut now = t(0);
    // Five refusals: each resend waits RTO_INIT_TIME · 2^(refusals - 1).
    while sends.len() < 5 {
        let out = drain(&mut a, now);
        if !out.is_empty() {
            sends.push(now);
        }
        for d in &out {
            deliver(&mut b, now, d);
        }
        for d in drain(&mut b, now) {
            deliver(&mut a, now, &d);
        }
        let next = a.pds.poll_timeout().unwrap();
        assert!(next > now, "nothing due at once after a refusal");
        now = next;
        a.pds.handle_timeout(now, &mut a.up);
    }
    let gaps: Vec<Duration> = sends.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps, vec![rto, rto * 2, rto * 4, rto * 8]);
    assert_eq!(a.pds.counters().nack_backoffs, 5);
    assert!(a.up.failed.is_empty());
}

/// A (an RCCC source) writes two packets to B on its speculative window;
/// both are acknowledged, which ends the speculation with the window spent.
/// Returns A's PDC and one of B's ACKs.
fn spend_the_first_window(a: &mut Host, b: &mut Host) -> (uet_wire::PdcId, Dgram) {
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 2, 4000)).unwrap();
    for d in &drain(a, t(0)) {
        deliver(b, t(1), d);
    }
    let acks = drain(b, t(1));
    for d in &acks {
        deliver(a, t(2), d);
    }
    assert_eq!(a.up.acked.len(), 2);
    (pdc, acks[0].clone())
}

/// A write queued while the last PDC towards its peer closes goes on a new
/// PDC that shares the CCC, whose RCCC source ended its speculation long
/// ago and holds no credit. The target forgets the source with the last
/// PDC that carried it, so once the old PDC is gone nothing of this source
/// is known there: the source starts afresh, as a new CCC's would, with
/// its speculative window. Before, the new PDC never sent: no credit, no
/// established PDC to carry a CREDIT_REQ, and no packet to time out.
#[test]
fn a_write_queued_while_the_last_pdc_closes_starts_its_rccc_source_afresh() {
    use super::loss_detection::run_pair;
    let window = 2 * 4160;
    let mut a = host(A, 1, rccc_source(window));
    let mut b = rccc_target(window);
    let tc = TrafficClass::from_masked(0);
    let (old, _) = spend_the_first_window(&mut a, &mut b);
    let source = |a: &Host| a.pds.ccc(B, tc).unwrap().rccc().unwrap().clone();
    assert!(!source(&a).is_speculating());
    assert_eq!(source(&a).credit(), 0);
    // The idle timeout closes the PDC; the target forgets it on CLOSE.
    let when = a.pds.poll_timeout().unwrap();
    a.pds.handle_timeout(when, &mut a.up);
    let close = drain(&mut a, when);
    assert!(
        matches!(close[0].pds(), PdsRepr::Cp(c) if c.payload == CpPayload::Close),
        "a CLOSE"
    );
    deliver(&mut b, when, &close[0]);
    let close_ack = drain(&mut b, when);
    assert_eq!(b.pds.rccc_receiver().unwrap().known_senders(), 0);
    // A write comes before the CLOSE's ACK: a new PDC on the same CCC.
    let new = a.pds.open(when, key(ReliableMode::Rud)).unwrap();
    assert_ne!(new, old);
    a.pds.enqueue(when, new, pkts(2, 4, 4000)).unwrap();
    assert!(!source(&a).is_speculating());
    for d in drain(&mut a, when) {
        deliver(&mut b, when, &d);
    }
    for d in &close_ack {
        deliver(&mut a, when, d);
    }
    assert_eq!(a.pds.pdc_count(), 1, "the old PDC is gone");
    assert!(source(&a).is_speculating(), "the source starts afresh");
    assert_eq!(source(&a).credit(), window as i64);
    assert_eq!(source(&a).stats().restarts, 1);
    let rto = PdsConfig::default().rto_init;
    run_pair(&mut a, &mut b, when, when + 4 * rto);
    assert_eq!(a.up.acked.iter().filter(|p| p.token == 2).count(), 4);
    assert!(a.up.failed.is_empty(), "{:?}", a.up.failed);
    assert_eq!(a.pds.counters().rto_fired, 0);
    assert_eq!(b.pds.rccc_receiver().unwrap().known_senders(), 1);
}

/// A source waiting for credit sends nothing but CREDIT_REQs. When the
/// target has forgotten the PDC meanwhile (here: it restarted), each
/// request names the PDC's next PSN and the target NACKs it INV_DPDCID,
/// as any packet of a PDC it does not know; the source verifies the PSN,
/// reopens the PDC and, the target knowing none of its PDCs, speculates
/// again. Before, the target dropped such requests unanswered and the
/// write waited for good.
#[test]
fn a_credit_request_to_a_forgotten_pdc_is_refused_and_the_pdc_reopens() {
    use super::loss_detection::run_pair;
    let window = 2 * 4160;
    let mut a = host(A, 1, rccc_source(window));
    let mut b = rccc_target(window);
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 2, 4000)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(2, 4, 4000)).unwrap();
    // The speculative window carries token 1; its ACKs end speculation.
    let first = drain(&mut a, t(0));
    assert_eq!(first.len(), 2);
    for d in &first {
        deliver(&mut b, t(1), d);
    }
    for d in drain(&mut b, t(1)) {
        deliver(&mut a, t(2), &d);
    }
    assert_eq!(a.up.acked.len(), 2);
    assert!(drain(&mut a, t(2)).is_empty(), "no credit for token 2");
    // The target restarts before it grants anything.
    let mut b = rccc_target(window);
    let rto = PdsConfig::default().rto_init;
    run_pair(&mut a, &mut b, t(2), t(2) + 4 * rto);
    assert_eq!(a.pds.counters().pdcs_reopened, 1);
    assert_eq!(
        a.pds.counters().rx_nack_codes.0[usize::from(NackCode::InvDpdcid.code())],
        1
    );
    assert_eq!(a.up.acked.iter().filter(|p| p.token == 2).count(), 4);
    assert!(a.up.failed.is_empty(), "{:?}", a.up.failed);
    assert_eq!(b.up.requests.len(), 4, "the new target got token 2 once");
}

/// A window the target NACKed (trimmed) before the PDC was established
/// waits for credit, and its credit requests are addressed as its SYN
/// packets are. A target that has forgotten the unconfirmed PDC since
/// (here: it restarted) drops them, and nothing is in flight to time out:
/// after RTO_INIT_TIME of unanswered requests the oldest packet passes
/// closed credit, opens the PDC at the target, and the rest follow on the
/// credit it earns.
#[test]
fn a_nacked_window_whose_target_forgot_the_pdc_forces_its_oldest_packet() {
    use super::loss_detection::run_pair;
    let window = 2 * 4160;
    let rto = PdsConfig::default().rto_init;
    let mut a = host(A, 1, rccc_source(window));
    let mut b = rccc_target(window);
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 4, 4000)).unwrap();
    let first = drain(&mut a, t(0));
    assert_eq!(first.len(), 2, "the speculative window");
    for d in first {
        deliver(&mut b, t(1), &trimmed_at_last_hop(d));
    }
    for d in drain(&mut b, t(1)) {
        deliver(&mut a, t(2), &d);
    }
    assert!(
        drain(&mut a, t(2))
            .iter()
            .all(|d| !matches!(d.pds(), PdsRepr::Request(_)))
    );
    let mut b = rccc_target(window);
    run_pair(&mut a, &mut b, t(2), t(2) + 4 * rto);
    assert_eq!(a.up.acked.iter().filter(|p| p.token == 1).count(), 4);
    assert!(a.up.failed.is_empty(), "{:?}", a.up.failed);
    assert_eq!(a.pds.counters().rto_fired, 0);
}

/// A write that races an idle close: the closing PDC is the last that
/// carried the source's data, and the CCC still holds credit the target
/// granted it. The new PDC does not spend that credit: its first packet
/// would reach the target after the CLOSE made it forget the source, and
/// enter the source afresh at the initial window while our count went on
/// (two counts a re-base cannot always reconcile). It waits for the close
/// to complete, then starts with the source, in step with the target.
#[test]
fn a_write_racing_an_idle_close_waits_for_it_and_starts_in_step() {
    use super::loss_detection::run_pair;
    use uet_wire::pds::PdsCpRepr;
    let window = 2 * 4160;
    let mut a = host(A, 1, rccc_source(window));
    let mut b = rccc_target(window);
    let tc = TrafficClass::from_masked(0);
    let (old, ack) = spend_the_first_window(&mut a, &mut b);
    let PdsRepr::Ack(a_repr) = ack.pds() else {
        panic!("an ACK")
    };
    // A grant arrives that nothing queued will spend.
    let source = |a: &Host| a.pds.ccc(B, tc).unwrap().rccc().unwrap().clone();
    let cum = source(&a).cumulative().get();
    let grant = PdsRepr::Cp(PdsCpRepr {
        mode: ReliableMode::Rud,
        retx: false,
        ar: false,
        psn: Psn(0),
        spdcid: a_repr.spdcid,
        dpdcid: DpdcidField::Dpdcid(Some(old)),
        payload: CpPayload::Credit { credit: cum + 8320 },
    });
    let mut bytes = vec![0u8; grant.buffer_len()];
    grant.emit(&mut bytes);
    let grant = Dgram { bytes, ..ack };
    deliver(&mut a, t(3), &grant);
    assert_eq!(source(&a).credit(), 8320);
    // The idle timeout closes the old PDC; a write comes before the ACK.
    let when = a.pds.poll_timeout().unwrap();
    a.pds.handle_timeout(when, &mut a.up);
    let close = drain(&mut a, when);
    assert_eq!(close.len(), 1);
    let new = a.pds.open(when, key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(when, new, pkts(2, 2, 4000)).unwrap();
    assert!(drain(&mut a, when).is_empty(), "it waits for the close");
    deliver(&mut b, when, &close[0]);
    for d in drain(&mut b, when) {
        deliver(&mut a, when, &d);
    }
    assert_eq!(a.pds.pdc_count(), 1, "the old PDC is gone");
    assert!(source(&a).is_speculating(), "the source starts afresh");
    let sent = drain(&mut a, when);
    assert_eq!(sent.len(), 2, "both packets leave on the initial window");
    for d in &sent {
        deliver(&mut b, when, d);
    }
    run_pair(
        &mut a,
        &mut b,
        when,
        when + 4 * PdsConfig::default().rto_init,
    );
    assert_eq!(a.up.acked.iter().filter(|p| p.token == 2).count(), 2);
    assert!(a.up.failed.is_empty(), "{:?}", a.up.failed);
    assert_eq!(b.pds.rccc_receiver().unwrap().stats().credit_requests, 0);
}
