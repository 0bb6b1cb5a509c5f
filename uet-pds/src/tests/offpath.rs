//! An off-path sender knows both addresses but not the PSNs or the PDC IDs
//! in use: nothing it sends may close, stall or redirect a PDC. Each test
//! forges the packet a blind attacker would send, checks that it is a
//! counted drop that changes nothing, and then that the same packet with
//! the state an on-path peer knows is acted on (so the check is not simply
//! refusing everything).

use super::*;
use uet_wire::PdcId;
use uet_wire::pds::{PdsCpRepr, PdsNackRepr};

/// A datagram from `src` carrying `repr`.
fn forged(src: IpAddr, repr: PdsRepr) -> Dgram {
    let mut bytes = vec![0u8; repr.buffer_len()];
    repr.emit(&mut bytes);
    Dgram {
        src,
        ev: EntropyValue::from_masked(0x77),
        bytes,
        ecn: Ecn::Ect0,
        dscp: Dscp::from_masked(0),
        trimmed: None,
    }
}

fn nack(code: NackCode, psn: Psn, spdcid: Option<PdcId>, dpdcid: PdcId) -> PdsRepr {
    PdsRepr::Nack(PdsNackRepr {
        next_hdr: NextHeader::None,
        m: false,
        retx: false,
        target: NackTarget::Psn(psn),
        code,
        vendor_code: 0,
        spdcid,
        dpdcid: Some(dpdcid),
        payload: 0,
        ccx: None,
    })
}

/// A established PDC A→B with `n` packets of token 5 in flight (sent, not
/// yet delivered): their PSNs, the PDC at either end.
fn in_flight(a: &mut Host, b: &mut Host, n: u32) -> (PdcId, PdcId, Vec<Psn>, Vec<Dgram>) {
    let (pdc, now) = established(a, b);
    a.pds.enqueue(now, pdc, pkts(5, n, 100)).unwrap();
    let out = drain(a, now);
    let psns = out
        .iter()
        .map(|d| match d.pds() {
            PdsRepr::Request(r) => r.psn,
            _ => panic!("a request"),
        })
        .collect();
    let PdsRepr::Request(r) = out[0].pds() else {
        panic!()
    };
    let DpdcidField::Dpdcid(Some(target_pdc)) = r.dpdcid else {
        panic!("established")
    };
    (pdc, target_pdc, psns, out)
}

#[test]
fn a_close_class_nack_outside_the_unacknowledged_psns_is_dropped() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let (pdc, target_pdc, psns, out) = in_flight(&mut a, &mut b, 3);
    // Every close-class code, at PSNs the PDC never sent or already saw
    // acknowledged, and from the right source.
    let wrong = [psns[0].sub(1), psns[2].add(2), psns[0].add(1 << 20), Psn(0)];
    let mut n = 0;
    for code in [
        NackCode::InvDpdcid,
        NackCode::PdcHdrMismatch,
        NackCode::Closing,
        NackCode::ClosingInErr,
        NackCode::InvalidSyn,
        NackCode::PdcModeMismatch,
        NackCode::UnexpEvent,
    ] {
        for psn in wrong {
            deliver(&mut a, t(10), &forged(B, nack(code, psn, None, pdc)));
            n += 1;
        }
        // The right PSN but another PDC's ID as the sender's.
        let other = PdcId::new(target_pdc.get() ^ 1).unwrap();
        deliver(
            &mut a,
            t(10),
            &forged(B, nack(code, psns[1], Some(other), pdc)),
        );
        n += 1;
    }
    assert_eq!(a.pds.counters().drops(DropReason::Unverified), n);
    assert!(a.up.failed.is_empty(), "{:?}", a.up.failed);
    assert_eq!(a.pds.pdc_count(), 1);
    // The transfer completes.
    for d in &out {
        deliver(&mut b, t(11), d);
    }
    for d in drain(&mut b, t(11)) {
        deliver(&mut a, t(12), &d);
    }
    assert_eq!(a.up.acked.iter().filter(|p| p.token == 5).count(), 3);
    assert!(a.up.failed.is_empty());
}

#[test]
fn a_close_class_nack_for_a_packet_in_flight_closes_the_pdc() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let (pdc, target_pdc, psns, _) = in_flight(&mut a, &mut b, 3);
    let d = forged(
        B,
        nack(NackCode::PdcHdrMismatch, psns[1], Some(target_pdc), pdc),
    );
    deliver(&mut a, t(10), &d);
    assert_eq!(a.pds.counters().drops(DropReason::Unverified), 0);
    assert_eq!(a.up.failed.len(), 3, "every packet of the PDC fails");
    assert_eq!(a.pds.pdc_count(), 0);
}

fn close_cp(psn: Psn, spdcid: PdcId, dpdcid: PdcId, payload: CpPayload) -> PdsRepr {
    PdsRepr::Cp(PdsCpRepr {
        mode: ReliableMode::Rud,
        retx: false,
        ar: true,
        psn,
        spdcid: Some(spdcid),
        dpdcid: DpdcidField::Dpdcid(Some(dpdcid)),
        payload,
    })
}

#[test]
fn a_close_at_a_psn_other_than_the_next_expected_is_dropped() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let (pdc, target_pdc, psns, _) = in_flight(&mut a, &mut b, 3);
    // B has received up to psns[0] - 1 (the establishing packet); the next
    // PSN it expects is psns[0].
    for psn in [psns[0].add(1), psns[0].sub(1), psns[0].add(1 << 20), Psn(0)] {
        let d = forged(A, close_cp(psn, pdc, target_pdc, CpPayload::Close));
        deliver(&mut b, t(10), &d);
    }
    assert_eq!(b.pds.counters().drops(DropReason::Unverified), 4);
    assert!(drain(&mut b, t(10)).is_empty(), "no ACK for a forged CLOSE");
    assert_eq!(b.pds.pdc_count(), 1);
    // At the expected PSN (as A would send it once all is acknowledged), B
    // closes and acknowledges.
    let d = forged(A, close_cp(psns[0], pdc, target_pdc, CpPayload::Close));
    deliver(&mut b, t(11), &d);
    let out = drain(&mut b, t(11));
    assert!(
        matches!(out[0].pds(), PdsRepr::Ack(_)),
        "CLOSE acknowledged"
    );
}

#[test]
fn a_close_request_is_taken_only_from_the_peers_pdc() {
    let cfg = PdsConfig {
        idle_timeout: Duration::from_secs(60),
        ..PdsConfig::default()
    };
    let mut a = host(A, 1, cfg.clone());
    let mut b = host(B, 2, cfg);
    let (pdc, target_pdc, _, out) = in_flight(&mut a, &mut b, 1);
    let now = t(3);
    for d in &out {
        deliver(&mut b, now, d);
    }
    b.pds
        .handle_timeout(now + Duration::from_millis(1), &mut b.up);
    let c = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3));
    let other = PdcId::new(target_pdc.get() ^ 1).unwrap();
    // From another address, and from B naming another PDC as its own.
    deliver(
        &mut a,
        now,
        &forged(c, close_cp(Psn(0), target_pdc, pdc, CpPayload::CloseReq)),
    );
    deliver(
        &mut a,
        now,
        &forged(B, close_cp(Psn(0), other, pdc, CpPayload::CloseReq)),
    );
    assert_eq!(a.pds.counters().drops(DropReason::Unverified), 2);
    // Once A has the ACK, an idle PDC closes only after its own idle time.
    let later = now + Duration::from_millis(1);
    for d in drain(&mut b, later) {
        deliver(&mut a, later, &d);
    }
    assert_eq!(a.up.acked.len(), 2, "both writes acknowledged");
    a.pds.handle_timeout(later, &mut a.up);
    assert!(
        drain(&mut a, later).is_empty(),
        "no CLOSE on a forged request"
    );
    // The real one is acted on: A closes at once.
    deliver(
        &mut a,
        later,
        &forged(B, close_cp(Psn(0), target_pdc, pdc, CpPayload::CloseReq)),
    );
    a.pds.handle_timeout(later, &mut a.up);
    let out = drain(&mut a, later);
    let PdsRepr::Cp(c) = out[0].pds() else {
        panic!("{:?}", out.len())
    };
    assert_eq!(c.payload, CpPayload::Close);
}

/// A forged SYN request from `src` naming `spdcid`, at offset 0 of a
/// Start_PSN drawn from `seed`.
fn forged_syn(src: IpAddr, spdcid: u16, seed: u32) -> Dgram {
    forged(
        src,
        PdsRepr::Request(uet_wire::pds::PdsRequestRepr {
            mode: ReliableMode::Rud,
            next_hdr: NextHeader::None,
            retx: false,
            ar: true,
            clear_psn_offset: -1,
            psn: Psn((1 << 16) + seed.wrapping_mul(2_654_435_761) % (1 << 30)),
            spdcid: PdcId::new(spdcid),
            dpdcid: DpdcidField::syn(uet_wire::pds::SynPsnOffset::from_masked(0)),
            cc: None,
        }),
    )
}

#[test]
fn a_syn_flood_displaces_only_unconfirmed_pdcs() {
    let cfg = PdsConfig {
        max_pdcs: 64,
        max_pending_pdcs: 32,
        ..PdsConfig::default()
    };
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, cfg);
    // A confirmed PDC A→B: its second packet addressed B's PDC by its ID.
    let (pdc, target_pdc, _, out) = in_flight(&mut a, &mut b, 2);
    for d in &out {
        deliver(&mut b, t(3), d);
    }
    for d in drain(&mut b, t(3)) {
        deliver(&mut a, t(4), &d);
    }
    // Forged SYNs with A's address and every SPDCID, and from other
    // addresses: they fill the pending bound and then displace each other.
    let c = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3));
    for sp in 1..=u16::MAX {
        let src = if sp % 2 == 0 { A } else { c };
        deliver(&mut b, t(5), &forged_syn(src, sp, u32::from(sp)));
        let _ = drain(&mut b, t(5));
        assert!(b.pds.pdc_count() <= 64);
    }
    assert!(b.pds.counters().pending_evicted >= u64::from(u16::MAX) - 64);
    assert_eq!(b.pds.pdc_count(), 1 + 32, "the confirmed PDC and the bound");
    // The confirmed PDC still carries traffic.
    a.pds.enqueue(t(6), pdc, pkts(8, 1, 10)).unwrap();
    let out = drain(&mut a, t(6));
    let PdsRepr::Request(r) = out[0].pds() else {
        panic!()
    };
    assert_eq!(r.dpdcid, DpdcidField::Dpdcid(Some(target_pdc)));
    deliver(&mut b, t(7), &out[0]);
    assert_eq!(
        b.up.requests.last().map(|r| r.0),
        Some(r.psn),
        "the write after the flood arrived"
    );
    // And a new PDC from A opens while the flood goes on.
    let mut k2 = key(ReliableMode::Rud);
    k2.job = JobId::from_masked(2);
    let p2 = a.pds.open(t(8), k2).unwrap();
    a.pds.enqueue(t(8), p2, pkts(9, 1, 10)).unwrap();
    for d in drain(&mut a, t(8)) {
        deliver(&mut b, t(8), &d);
    }
    deliver(&mut b, t(8), &forged_syn(c, 4242, 99));
    for d in drain(&mut b, t(8)) {
        match d.pds() {
            PdsRepr::Ack(ack) if ack.dpdcid == Some(p2) => deliver(&mut a, t(9), &d),
            PdsRepr::Nack(n) => assert_ne!(n.dpdcid, Some(p2), "{n:?}"),
            _ => {}
        }
    }
    assert!(
        a.up.acked.iter().any(|p| p.token == 9),
        "the new PDC's write was acknowledged"
    );
    assert!(a.up.failed.is_empty());
}

/// A forged RUD_CC_REQ SYN from `src` (RCCC's request form, §5.3).
fn forged_cc_syn(src: IpAddr, spdcid: u16) -> Dgram {
    let mut d = forged_syn(src, spdcid, u32::from(spdcid));
    let PdsRepr::Request(mut r) = d.pds() else {
        panic!()
    };
    r.cc = Some(uet_wire::pds::ReqCcState {
        ccc_id: uet_wire::CccId::from_masked(0),
        credit_target: uet_wire::Credit24::from_masked(1 << 20),
    });
    let repr = PdsRepr::Request(r);
    d.bytes = vec![0; repr.buffer_len()];
    repr.emit(&mut d.bytes);
    d
}

#[test]
fn rccc_state_of_forged_sources_is_bounded_and_goes_with_their_pdcs() {
    let cfg = PdsConfig {
        max_pdcs: 64,
        max_pending_pdcs: 32,
        rccc_receiver: Some(uet_cms::RcccConfig::default()),
        ..PdsConfig::default()
    };
    let mut b = host(B, 2, cfg);
    for i in 0..20_000u32 {
        let src = IpAddr::V4(Ipv4Addr::from(0x0a01_0000 + i));
        deliver(&mut b, t(0), &forged_cc_syn(src, 7));
        let _ = drain(&mut b, t(0));
        let known = b.pds.rccc_receiver().unwrap().known_senders();
        assert!(known <= 32, "{known} RCCC senders after {i} sources");
        assert!(b.pds.rccc_source_count() <= 32);
    }
    // Reaped with their PDCs: nothing is left of the sources.
    while b.pds.pdc_count() > 0 {
        let now = b.pds.poll_timeout().unwrap();
        b.pds.handle_timeout(now, &mut b.up);
        let _ = drain(&mut b, now);
    }
    assert_eq!(b.pds.rccc_receiver().unwrap().known_senders(), 0);
    assert_eq!(b.pds.rccc_source_count(), 0);
}

#[test]
fn ccc_state_goes_with_the_last_pdc_to_a_destination() {
    let mut a = host(A, 1, PdsConfig::default());
    for i in 0..200u32 {
        let mut k = key(ReliableMode::Rud);
        k.dst = IpAddr::V4(Ipv4Addr::from(0x0a02_0000 + i));
        let p = a.pds.open(t(0), k).unwrap();
        a.pds.enqueue(t(0), p, pkts(u64::from(i), 1, 100)).unwrap();
    }
    let _ = drain(&mut a, t(0));
    assert_eq!(a.pds.ccc_count(), 200);
    // Nobody answers: every PDC runs out of retries and fails.
    let mut now = t(0);
    while a.pds.pdc_count() > 0 {
        now = a.pds.poll_timeout().unwrap();
        a.pds.handle_timeout(now, &mut a.up);
        let _ = drain(&mut a, now);
    }
    assert_eq!(a.up.failed.len(), 200);
    assert_eq!(a.pds.ccc_count(), 0, "no CCC outlives its PDCs");
    // A destination written to again gets a fresh CCC.
    let p = a.pds.open(now, key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(now, p, pkts(1, 1, 100)).unwrap();
    assert_eq!(drain(&mut a, now).len(), 1);
    assert_eq!(a.pds.ccc_count(), 1);
}

#[test]
fn one_pdc_names_one_rccc_source() {
    let cfg = PdsConfig {
        rccc_receiver: Some(uet_cms::RcccConfig::default()),
        ..PdsConfig::default()
    };
    let mut b = host(B, 2, cfg);
    let c = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3));
    // One PDC (one SPDCID, one Start_PSN), its packets naming every
    // ccc_id in turn.
    let first = forged_cc_syn(c, 7);
    let PdsRepr::Request(r0) = first.pds() else {
        panic!()
    };
    for i in 0..100u8 {
        let mut r = r0;
        r.psn = r0.psn.add(u32::from(i));
        r.dpdcid = DpdcidField::syn(uet_wire::pds::SynPsnOffset::from_masked(u16::from(i)));
        r.cc = Some(uet_wire::pds::ReqCcState {
            ccc_id: uet_wire::CccId::from_masked(i),
            credit_target: uet_wire::Credit24::from_masked(1 << 20),
        });
        deliver(&mut b, t(0), &forged(c, PdsRepr::Request(r)));
    }
    assert_eq!(b.pds.pdc_count(), 1);
    assert_eq!(b.pds.rccc_receiver().unwrap().known_senders(), 1);
    assert_eq!(b.pds.rccc_source_count(), 1);
    assert_eq!(b.pds.counters().drops(DropReason::CccMismatch), 99);
}

#[test]
fn the_queue_of_unconfirmed_pdcs_stays_bounded_as_pdcs_are_confirmed() {
    let cfg = PdsConfig {
        max_pdcs: 8192,
        max_pending_pdcs: 8192,
        ..PdsConfig::default()
    };
    let mut b = host(B, 2, cfg);
    for i in 0..5_000u32 {
        let src = IpAddr::V4(Ipv4Addr::from(0x0a03_0000 + i));
        let syn = forged_syn(src, 9, i);
        deliver(&mut b, t(0), &syn);
        let ack = drain(&mut b, t(0));
        let PdsRepr::Ack(a) = ack[0].pds() else {
            panic!()
        };
        // The initiator's next packet, addressed by B's PDC ID.
        let PdsRepr::Request(mut r) = syn.pds() else {
            panic!()
        };
        r.psn = r.psn.add(1);
        r.dpdcid = DpdcidField::Dpdcid(a.spdcid);
        deliver(&mut b, t(0), &forged(src, PdsRepr::Request(r)));
        let _ = drain(&mut b, t(0));
        assert!(
            b.pds.pending_queue_len() <= 64 + 2,
            "{i}: {}",
            b.pds.pending_queue_len()
        );
    }
    assert_eq!(b.pds.pdc_count(), 5_000);
}
