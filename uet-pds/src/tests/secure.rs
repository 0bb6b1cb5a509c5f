//! Secure PDCs (§2.12 "Secure PDCs"): the Start_PSN of a PDC in a
//! security domain is agreed so that a replayed SYN of an earlier PDC
//! opens nothing, and a secure PDC ends before its PSNs come round.

use super::*;
use crate::SecureStart;
use uet_wire::pds::tss::Sdi;

const SDI: Sdi = Sdi::from_masked(7);

fn secure(start: SecureStart) -> PdsConfig {
    PdsConfig {
        secure_start: start,
        ..PdsConfig::default()
    }
}

/// A host whose job 1 is in domain `SDI`.
fn secure_host(addr: IpAddr, seed: u64, config: PdsConfig) -> Host {
    let mut h = host(addr, seed, config);
    h.pds.set_job_domain(JobId::from_masked(1), Some(SDI));
    h
}

fn start_of(d: &Dgram) -> Psn {
    let PdsRepr::Request(r) = d.pds() else {
        panic!("not a request: {:?}", d.pds())
    };
    r.start_psn().expect("a SYN")
}

fn new_start_nack(d: &Dgram) -> Option<u32> {
    match d.pds() {
        PdsRepr::Nack(n) if n.code == NackCode::NewStartPsn => Some(n.payload),
        _ => None,
    }
}

/// EXPECTED_0RTT_START: the target's closing ACK names the domain's next
/// Start_PSN, which the initiator's next PDC takes without a round trip;
/// the first PDC's SYNs, replayed after it closed, are told that Start_PSN
/// and deliver nothing.
#[test]
fn a_replayed_syn_of_a_closed_secure_pdc_opens_nothing_and_the_next_pdc_starts_in_zero_rtt() {
    let mut a = secure_host(A, 1, secure(SecureStart::Expected0Rtt));
    let mut b = secure_host(B, 2, secure(SecureStart::Expected0Rtt));
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 2, 100)).unwrap();
    let syns = drain(&mut a, t(0));
    assert_eq!(syns.len(), 2);
    let first = start_of(&syns[0]);
    for d in &syns {
        deliver_in(&mut b, t(1), d, Some(SDI));
    }
    assert_eq!(b.up.requests.len(), 2, "a fresh domain takes any Start_PSN");
    exchange_in(&mut a, &mut b, t(2), Some(SDI));
    assert_eq!(a.up.acked.len(), 2);

    // The PDC idles and closes; the target's ACK of the CLOSE is a plain
    // ACK naming Start_PSN + 1.
    let when = a.pds.poll_timeout().unwrap();
    a.pds.handle_timeout(when, &mut a.up);
    let close = drain(&mut a, when);
    assert_eq!(close.len(), 1);
    deliver_in(&mut b, when, &close[0], Some(SDI));
    let acks = drain(&mut b, when);
    let PdsRepr::Ack(ack) = acks[0].pds() else {
        panic!("{:?}", acks[0].pds())
    };
    assert_eq!(ack.expected_psn(), Some(first.next()), "EPSN");
    deliver_in(&mut a, when, &acks[0], Some(SDI));
    assert_eq!((a.pds.pdc_count(), b.pds.pdc_count()), (0, 0));

    // A replay of the first PDC's SYNs: refused with the floor, nothing
    // delivered, for every one of them.
    let later = when + Duration::from_millis(1);
    for d in &syns {
        deliver_in(&mut b, later, d, Some(SDI));
    }
    assert_eq!(b.up.requests.len(), 2, "the replay delivered nothing");
    let nacks = drain(&mut b, later);
    assert_eq!(nacks.len(), 2);
    for n in &nacks {
        assert_eq!(new_start_nack(n), Some(first.next().0));
    }
    assert_eq!(b.pds.counters().drops(DropReason::NewStartPsn), 2);

    // The initiator's next PDC starts at the Expected_PSN and is accepted
    // at once.
    let pdc = a.pds.open(later, key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(later, pdc, pkts(2, 1, 100)).unwrap();
    let syn = drain(&mut a, later);
    assert_eq!(start_of(&syn[0]), first.next());
    let b_before = b.pds.pdc_count();
    deliver_in(&mut b, later, &syn[0], Some(SDI));
    // (The replay's PDC waits for its Start_PSN; the new one is another.)
    assert_eq!(b.pds.pdc_count(), b_before + 1);
    assert_eq!(b.up.requests.len(), 3);
    assert!(
        drain(&mut b, later)
            .iter()
            .all(|d| new_start_nack(d).is_none())
    );
}

/// RANDOM_1RTT_START: the target names a Start_PSN of its own for every
/// new secure PDC, the same one to each of its SYNs; the initiator starts
/// again from it and the data is delivered once.
#[test]
fn a_random_1rtt_start_is_named_by_the_target_and_the_initiator_starts_again_from_it() {
    let mut a = secure_host(A, 1, secure(SecureStart::Random1Rtt));
    let mut b = secure_host(B, 2, secure(SecureStart::Random1Rtt));
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 3, 100)).unwrap();
    let syns = drain(&mut a, t(0));
    let first = start_of(&syns[0]);
    for d in &syns {
        deliver_in(&mut b, t(1), d, Some(SDI));
    }
    assert!(b.up.requests.is_empty(), "nothing before the agreed start");
    let nacks = drain(&mut b, t(1));
    assert_eq!(nacks.len(), 3);
    let named = new_start_nack(&nacks[0]).expect("NEW_START_PSN");
    assert_ne!(named, first.0);
    assert!(nacks.iter().all(|n| new_start_nack(n) == Some(named)));
    for n in &nacks {
        deliver_in(&mut a, t(2), n, Some(SDI));
    }
    let again = drain(&mut a, t(2));
    assert_eq!(again.len(), 3, "every packet again, once");
    assert!(again.iter().all(|d| start_of(d) == Psn(named)));
    for d in &again {
        deliver_in(&mut b, t(3), d, Some(SDI));
    }
    assert_eq!(b.up.requests.len(), 3);
    exchange_in(&mut a, &mut b, t(4), Some(SDI));
    assert_eq!(a.up.acked.len(), 3);
    assert!(a.up.failed.is_empty());
}

/// A secure PDC ends at Start_PSN + 2^31 (§2.12; a small span here): a
/// message that would run past it fails its remaining packets, and the
/// next message goes on a new PDC while the spent one closes.
#[test]
fn a_secure_pdc_stops_at_the_end_of_its_psn_space_and_the_next_message_opens_another() {
    let config = PdsConfig {
        secure_psn_span: 64,
        ..secure(SecureStart::Expected0Rtt)
    };
    let mut a = secure_host(A, 1, config.clone());
    let mut b = secure_host(B, 2, config);
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 40, 100)).unwrap();
    exchange_in(&mut a, &mut b, t(1), Some(SDI));
    // 40 used, 8 kept for a message: the PDC takes the next one.
    assert_eq!(a.pds.open(t(2), key(ReliableMode::Rud)), Ok(pdc));
    a.pds.enqueue(t(2), pdc, pkts(2, 30, 100)).unwrap();
    exchange_in(&mut a, &mut b, t(3), Some(SDI));
    // PSNs start … start + 62 carry data; start + 63 is the CLOSE's.
    assert_eq!(a.up.acked.len(), 40 + 23);
    assert_eq!(b.up.requests.len(), 40 + 23);
    let failed: Vec<_> = a.up.failed.iter().map(|(p, e)| (p.token, *e)).collect();
    assert_eq!(failed, vec![(2, PdsError::Closed); 7]);
    let next = a.pds.open(t(4), key(ReliableMode::Rud)).unwrap();
    assert_ne!(next, pdc, "a spent PDC takes no new message");
    // The spent one closes at once, now that it is idle.
    assert!(a.pds.poll_timeout().is_some_and(|w| w <= t(4)));
    let when = t(4);
    a.pds.handle_timeout(when, &mut a.up);
    let close = drain(&mut a, when);
    let PdsRepr::Cp(c) = close[0].pds() else {
        panic!("{:?}", close[0].pds())
    };
    assert_eq!(c.payload, CpPayload::Close);
}
