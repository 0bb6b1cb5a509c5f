//! PDCs in a security domain: a PDC takes the domain of its job (initiator)
//! or of the packet that opened it (target); every packet it sends names
//! that domain, and a packet authenticated by another domain, or one that
//! came in the clear, is never acted on — even one whose PDC IDs and PSNs
//! are right, as an on-path sender would forge them.

use super::*;
use uet_wire::pds::tss::Sdi;

const S: Option<Sdi> = Some(Sdi::from_masked(0x42));

#[test]
fn a_pdc_speaks_and_hears_only_its_domain() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    a.pds.set_job_domain(JobId::from_masked(1), S);
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(7, 2, 100)).unwrap();
    let out = drain_domains(&mut a, t(0));
    assert_eq!(out.len(), 2);
    assert!(
        out.iter().all(|(_, s)| *s == S),
        "sealed in the job's domain"
    );

    // The real ones open the PDC in their domain. (A first packet in the
    // clear for a job with a domain never reaches the PDS: the layer that
    // opens datagrams drops it, as the PDS does not know a SYN's job.)
    for (d, s) in &out {
        deliver_in(&mut b, t(1), d, *s);
    }
    assert_eq!(b.up.requests.len(), 2);
    // Now the same SYN in the clear, or under another domain, neither
    // joins nor replaces the PDC.
    deliver_in(&mut b, t(1), &out[1].0, None);
    deliver_in(&mut b, t(1), &out[1].0, Some(Sdi::from_masked(7)));
    assert_eq!(b.up.requests.len(), 2);
    assert_eq!(b.pds.counters().drops(DropReason::WrongDomain), 2);
    let acks = drain_domains(&mut b, t(1));
    assert_eq!(acks.len(), 1, "one ACK; nothing answers the forged copies");
    assert_eq!(acks[0].1, S, "the target answers in the PDC's domain");

    // The ACK in the clear (an on-path forger with every field right):
    // acknowledges nothing.
    deliver_in(&mut a, t(2), &acks[0].0, None);
    assert!(a.up.acked.is_empty());
    assert_eq!(a.pds.counters().drops(DropReason::WrongDomain), 1);
    // Authenticated, it does.
    deliver_in(&mut a, t(2), &acks[0].0, S);
    assert_eq!(a.up.acked.len(), 2);
}

#[test]
fn jobs_without_a_domain_stay_in_the_clear() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    a.pds.set_job_domain(JobId::from_masked(2), S);
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(7, 1, 100)).unwrap();
    let out = drain_domains(&mut a, t(0));
    assert_eq!(out[0].1, None);
    // A packet of a domain on a PDC in the clear is refused too.
    deliver_in(&mut b, t(1), &out[0].0, None);
    let acks = drain_domains(&mut b, t(1));
    assert_eq!(acks[0].1, None);
    deliver_in(&mut a, t(2), &acks[0].0, S);
    assert!(a.up.acked.is_empty());
    deliver_in(&mut a, t(2), &acks[0].0, None);
    assert_eq!(a.up.acked.len(), 1);
}
