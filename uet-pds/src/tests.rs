//! Trace-style tests of the engine: two engines, a recording upper layer,
//! and a hand-driven wire. Each test injects packets and asserts the exact
//! reply, like smoltcp's TCP socket tests.

use std::net::{IpAddr, Ipv4Addr};

use uet_wire::encap::Trim;
use uet_wire::pds::{
    CpPayload, DpdcidField, NackCode, NackTarget, NextHeader, PdsAckExt, PdsAckRequest, PdsCpRepr,
    PdsRepr, ReliableMode,
};
use uet_wire::ses::{ListKind, ResponseOpcode, ReturnCode, SesRepr, SesResponseRepr};
use uet_wire::time::{Duration, Instant};
use uet_wire::{Dscp, Ecn, EntropyValue, JobId, MessageId, Psn, RiGeneration, TrafficClass};

use crate::engine::{
    InitiatorKey, PdcRoundTrip, Pds, PdsError, PdsEvent, PktRef, Reply, RxMeta, RxRequest, SesHooks,
};
use crate::{DropReason, PdsConfig};

mod clean_link;
mod domain;
mod inflight;
mod liveness;
mod loss_detection;
mod offpath;
mod restart;
mod secure;
mod timers;

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

/// Records what the engine tells the upper layer; payload byte i of packet
/// (token, frag) is `token + frag + i`.
#[derive(Default)]
struct Rec {
    requests: Vec<(Psn, Vec<u8>)>,
    acked: Vec<PktRef>,
    failed: Vec<(PktRef, PdsError)>,
    responses: Vec<(PktRef, ReturnCode)>,
    /// Answer every request with this guaranteed response.
    reply_error: Option<ReturnCode>,
    /// Answer the requests of these PSNs with a guaranteed `RC_OK` (a
    /// message's completion at its last packet).
    complete_at: Vec<Psn>,
}

impl SesHooks for Rec {
    fn write_request(&mut self, _: Instant, pkt: &PktRef, buf: &mut [u8]) -> NextHeader {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (pkt.token as usize + pkt.frag as usize + i) as u8;
        }
        NextHeader::None
    }
    fn on_request(&mut self, _: Instant, rx: &RxRequest<'_>) -> Reply {
        self.requests.push((rx.psn, rx.payload.to_vec()));
        match self.reply_error {
            Some(rc) => Reply::Response {
                response: SesResponseRepr {
                    list: ListKind::Expected,
                    opcode: ResponseOpcode::Response,
                    return_code: rc,
                    message_id: MessageId::from_masked(1),
                    ri_generation: RiGeneration::from_masked(0),
                    job_id: JobId::from_masked(1),
                    modified_length: 0,
                },
                guaranteed: true,
            },
            None if self.complete_at.contains(&rx.psn) => Reply::Response {
                response: SesResponseRepr {
                    list: ListKind::Expected,
                    opcode: ResponseOpcode::Response,
                    return_code: ReturnCode::Ok,
                    message_id: MessageId::from_masked(1),
                    ri_generation: RiGeneration::from_masked(0),
                    job_id: JobId::from_masked(1),
                    modified_length: 0,
                },
                guaranteed: true,
            },
            None => Reply::None,
        }
    }
    fn on_acked(&mut self, _: Instant, pkt: PktRef) {
        self.acked.push(pkt);
    }
    fn on_response(&mut self, _: Instant, pkt: PktRef, r: &SesRepr, _: &[u8]) {
        if let SesRepr::Response(r) = r {
            self.responses.push((pkt, r.return_code));
        }
    }
    fn on_failed(&mut self, _: Instant, pkt: PktRef, e: PdsError) {
        self.failed.push((pkt, e));
    }
}

struct Host {
    pds: Pds,
    up: Rec,
    addr: IpAddr,
}

fn host(addr: IpAddr, seed: u64, config: PdsConfig) -> Host {
    Host {
        pds: Pds::new(config, seed),
        up: Rec::default(),
        addr,
    }
}

/// A datagram on the wire.
#[derive(Clone)]
struct Dgram {
    src: IpAddr,
    ev: EntropyValue,
    bytes: Vec<u8>,
    ecn: Ecn,
    dscp: Dscp,
    trimmed: Option<Trim>,
}

impl Dgram {
    fn pds(&self) -> PdsRepr {
        PdsRepr::parse(&self.bytes).unwrap()
    }
}

fn drain(h: &mut Host, now: Instant) -> Vec<Dgram> {
    drain_domains(h, now).into_iter().map(|(d, _)| d).collect()
}

/// Every datagram `h` has to send, with the security domain each names.
fn drain_domains(h: &mut Host, now: Instant) -> Vec<(Dgram, Option<uet_wire::pds::tss::Sdi>)> {
    drain_routed(h, now)
        .into_iter()
        .map(|(_, d, sdi)| (d, sdi))
        .collect()
}

/// Every datagram `h` has to send, with where it goes and the security
/// domain it names.
fn drain_routed(
    h: &mut Host,
    now: Instant,
) -> Vec<(IpAddr, Dgram, Option<uet_wire::pds::tss::Sdi>)> {
    let mut out = vec![];
    let mut buf = [0u8; 9000];
    // The general path, checked against the fast path's claim: when
    // `nothing_to_send` holds, it has nothing to send.
    loop {
        let idle = h.pds.nothing_to_send();
        let sent = h.pds.poll_transmit_general(now, &mut buf, &mut h.up);
        assert!(!idle || sent.is_none(), "nothing_to_send, yet {sent:?}");
        assert_timers_exact(&h.pds);
        let Some(t) = sent else { break };
        let d = Dgram {
            src: h.addr,
            ev: t.ev,
            bytes: buf[..t.len].to_vec(),
            ecn: t.ecn,
            dscp: t.dscp,
            trimmed: None,
        };
        out.push((t.dst, d, t.sdi));
    }
    out
}

/// `d` as the last switch before its destination trims it: its headers
/// only, marked trimmed at the last hop.
fn trimmed_at_last_hop(mut d: Dgram) -> Dgram {
    d.bytes.truncate(16);
    d.trimmed = Some(Trim::LastHop);
    d
}

fn deliver(h: &mut Host, now: Instant, d: &Dgram) {
    deliver_in(h, now, d, None);
}

/// Delivers `d` as authenticated by the security domain `sdi` (`None`: in
/// the clear).
fn deliver_in(h: &mut Host, now: Instant, d: &Dgram, sdi: Option<uet_wire::pds::tss::Sdi>) {
    let meta = RxMeta {
        src: d.src,
        ev: d.ev,
        ecn: d.ecn,
        trimmed: d.trimmed,
        nominal_size: d.bytes.len() as u32 + 48,
        sdi,
        arrived: None,
    };
    h.pds.handle_datagram(now, &meta, &d.bytes, &mut h.up);
    assert_timers_exact(&h.pds);
}

/// [`exchange_in`] in the clear.
fn exchange(a: &mut Host, b: &mut Host, now: Instant) {
    exchange_in(a, b, now, None);
}

/// Delivers everything either host has to send to the other, both ways,
/// until neither has anything (a lossless wire) at `now`, each datagram as
/// authenticated by `sdi`.
fn exchange_in(a: &mut Host, b: &mut Host, now: Instant, sdi: Option<uet_wire::pds::tss::Sdi>) {
    loop {
        let ab = drain(a, now);
        let ba = drain(b, now);
        if ab.is_empty() && ba.is_empty() {
            break;
        }
        for d in &ab {
            deliver_in(b, now, d, sdi);
        }
        for d in &ba {
            deliver_in(a, now, d, sdi);
        }
    }
}

/// `poll_timeout` (the deadline heap) says what looking at every PDC says:
/// checked after every packet sent and received in these tests.
fn assert_timers_exact(pds: &Pds) {
    assert_eq!(pds.poll_timeout(), pds.poll_timeout_by_scan());
}

fn key(mode: ReliableMode) -> InitiatorKey {
    InitiatorKey {
        job: JobId::from_masked(1),
        dst: B,
        tc: TrafficClass::from_masked(0),
        mode,
    }
}

fn pkts(token: u64, n: u32, len: u32) -> Vec<PktRef> {
    (0..n)
        .map(|frag| PktRef {
            token,
            frag,
            len,
            last: frag + 1 == n,
        })
        .collect()
}

fn t(us: u64) -> Instant {
    Instant::from_nanos(us * 1000)
}

#[test]
fn zero_rtt_syn_then_established() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(7, 3, 100)).unwrap();
    let out = drain(&mut a, t(0));
    assert_eq!(out.len(), 3, "all three go before any ACK (zero RTT)");
    let mut start = None;
    for (i, d) in out.iter().enumerate() {
        let PdsRepr::Request(r) = d.pds() else {
            panic!()
        };
        assert!(r.syn(), "SYN until the first ACK");
        let DpdcidField::Syn { psn_offset, .. } = r.dpdcid else {
            panic!()
        };
        assert_eq!(u32::from(psn_offset.get()), i as u32);
        assert_eq!(r.spdcid, Some(pdc));
        assert_eq!(r.ar, i == 2, "ar on the message's last packet");
        let s = *start.get_or_insert_with(|| r.start_psn().unwrap());
        assert_eq!(r.start_psn(), Some(s));
        assert!(s.0 >= 1 << 16 && s.0 < 1 << 31, "REFPROV Start_PSN range");
        deliver(&mut b, t(1), d);
    }
    assert_eq!(b.up.requests.len(), 3);
    assert_eq!(b.up.requests[1].1[..3], [8, 9, 10]);
    // SYN packets are ACKed at once; coalescing keeps it to one ACK per
    // poll of the target.
    let acks = drain(&mut b, t(1));
    assert_eq!(acks.len(), 1);
    let PdsRepr::Ack(ack) = acks[0].pds() else {
        panic!()
    };
    assert_eq!(ack.cack_psn, start.unwrap().add(2));
    assert_eq!(ack.dpdcid, Some(pdc));
    assert_eq!(acks[0].ev, out[2].ev, "the ACK echoes the EV");
    deliver(&mut a, t(2), &acks[0]);
    assert_eq!(a.up.acked.len(), 3);
    assert!(
        core::iter::from_fn(|| a.pds.poll_event()).any(|e| e == PdsEvent::PdcEstablished { pdc })
    );
    // The next packet is no longer SYN and carries the target's PDC ID.
    a.pds.enqueue(t(3), pdc, pkts(8, 1, 10)).unwrap();
    let out = drain(&mut a, t(3));
    let PdsRepr::Request(r) = out[0].pds() else {
        panic!()
    };
    assert!(!r.syn());
    assert_eq!(r.dpdcid, DpdcidField::Dpdcid(ack.spdcid));
    assert_eq!(r.clear_psn(), start.unwrap().add(2), "CLEAR_PSN = una - 1");
}

#[test]
fn rto_backs_off_then_fails_every_operation() {
    let cfg = PdsConfig::default();
    let mut a = host(A, 1, cfg);
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 2, 100)).unwrap();
    assert_eq!(drain(&mut a, t(0)).len(), 2); // lost
    // A second PDC to B (another job) shares the CCC and outlives the
    // first: nothing to send, idle for less than its idle timeout.
    let mut k2 = key(ReliableMode::Rud);
    k2.job = JobId::from_masked(2);
    let other = a.pds.open(t(0), k2).unwrap();
    let mut now = t(0);
    let mut gaps = vec![];
    let mut last = now;
    while let Some(when) = a.pds.poll_timeout() {
        now = when;
        a.pds.handle_timeout(now, &mut a.up);
        if !a.up.failed.is_empty() {
            break;
        }
        let out = drain(&mut a, now);
        if out.is_empty() {
            continue;
        }
        for d in &out {
            let PdsRepr::Request(r) = d.pds() else {
                panic!()
            };
            assert!(r.retx && r.ar, "retransmissions carry retx and ar");
        }
        gaps.push(now - last);
        last = now;
    }
    assert_eq!(a.up.failed.len(), 2);
    assert!(a.up.failed.iter().all(|(_, e)| *e == PdsError::Timeout));
    // RTO_INIT * 2^k: 5, 10, 20, 40, 80 ms for the oldest packet.
    assert_eq!(gaps.first(), Some(&Duration::from_millis(5)));
    assert!(gaps.windows(2).all(|w| w[1] >= w[0]));
    assert_eq!(a.pds.pdc_count(), 1, "the PDC closed in error");
    assert!(a.pds.counters().rto_fired >= 5);
    // The failed PDC handed its share of the shared CCC back: the PDC still
    // on it, and a new PDC to the same destination, send a full window at
    // once.
    let ccc = a.pds.ccc(B, TrafficClass::from_masked(0)).unwrap();
    assert_eq!(ccc.inflight(), 0);
    a.pds.enqueue(now, other, pkts(3, 3, 100)).unwrap();
    assert_eq!(drain(&mut a, now).len(), 3);
    let pdc = a.pds.open(now, key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(now, pdc, pkts(2, 3, 100)).unwrap();
    assert_eq!(drain(&mut a, now).len(), 3);
}

#[test]
fn trimmed_packet_is_nacked_and_resent_at_once() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 1, 1000)).unwrap();
    let mut d = drain(&mut a, t(0)).remove(0);
    d.bytes.truncate(16);
    d.trimmed = Some(Trim::Trimmed);
    d.ecn = Ecn::Ce;
    deliver(&mut b, t(1), &d);
    assert!(b.up.requests.is_empty(), "trimmed data is never placed");
    let out = drain(&mut b, t(1));
    let PdsRepr::Nack(n) = out[0].pds() else {
        panic!()
    };
    assert_eq!(n.code, NackCode::Trimmed);
    assert!(n.m, "ECN-CE copied into m");
    let PdsRepr::Request(orig) = PdsRepr::parse(&d.bytes).unwrap() else {
        panic!()
    };
    assert_eq!(n.target, NackTarget::Psn(orig.psn));
    let trimmed = usize::from(NackCode::Trimmed.code());
    assert_eq!(b.pds.counters().tx_nack_codes.0[trimmed], 1);
    deliver(&mut a, t(2), &out[0]);
    assert_eq!(a.pds.counters().rx_nack_codes.0[trimmed], 1);
    assert_eq!(
        a.pds.counters().rx_nack_codes.nonzero().count(),
        1,
        "no other code counted"
    );
    let re = drain(&mut a, t(2));
    assert_eq!(re.len(), 1, "fast retransmit, no RTO wait");
    let PdsRepr::Request(r) = re[0].pds() else {
        panic!()
    };
    assert_eq!(r.psn, orig.psn);
    assert!(r.retx);
    deliver(&mut b, t(3), &re[0]);
    assert_eq!(b.up.requests.len(), 1);
}

#[test]
fn retransmissions_carry_dscp_trimmable_rtx() {
    // §6/§7: retransmissions may use their own trimmable class, which
    // switches trim only above 1.5 × Plane_BDP.
    let rtx = Dscp::from_masked(10);
    let cfg = PdsConfig {
        dscp_data_rtx: Some(rtx),
        ..PdsConfig::default()
    };
    let mut a = host(A, 1, cfg);
    let mut b = host(B, 2, PdsConfig::default());
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 1, 1000)).unwrap();
    let mut d = drain(&mut a, t(0)).remove(0);
    assert_eq!(d.dscp, PdsConfig::default().dscp_data);
    d.bytes.truncate(16);
    d.trimmed = Some(Trim::LastHop);
    deliver(&mut b, t(1), &d);
    let nack = drain(&mut b, t(1));
    deliver(&mut a, t(2), &nack[0]);
    let re = drain(&mut a, t(2));
    let PdsRepr::Request(r) = re[0].pds() else {
        panic!()
    };
    assert!(r.retx);
    assert_eq!(re[0].dscp, rtx);
}

#[test]
fn unknown_dpdcid_and_full_table_are_nacked() {
    let cfg = PdsConfig {
        max_pdcs: 1,
        ..PdsConfig::default()
    };
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, cfg);
    // A first PDC fills B's table, confirmed by a second packet that
    // addresses B's PDC by its ID (a SYN could evict an unconfirmed one).
    let p1 = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), p1, pkts(1, 1, 10)).unwrap();
    for d in drain(&mut a, t(0)) {
        deliver(&mut b, t(0), &d);
    }
    for d in drain(&mut b, t(0)) {
        deliver(&mut a, t(0), &d);
    }
    a.pds.enqueue(t(0), p1, pkts(3, 1, 10)).unwrap();
    for d in drain(&mut a, t(0)) {
        deliver(&mut b, t(0), &d);
    }
    let _ = drain(&mut b, t(0));
    let mut k2 = key(ReliableMode::Rud);
    k2.job = JobId::from_masked(2);
    let p2 = a.pds.open(t(0), k2).unwrap();
    assert_ne!(p1, p2);
    a.pds.enqueue(t(0), p2, pkts(2, 1, 10)).unwrap();
    for d in drain(&mut a, t(0)) {
        deliver(&mut b, t(0), &d);
    }
    let out = drain(&mut b, t(0));
    let nack = out
        .iter()
        .find_map(|d| match d.pds() {
            PdsRepr::Nack(n) => Some(n),
            _ => None,
        })
        .unwrap();
    assert_eq!(nack.code, NackCode::NoPdcAvail);
    assert_eq!(nack.spdcid, None, "no PDC at the target");
    assert_eq!(nack.dpdcid, Some(p2));
    assert_eq!(b.pds.counters().drops(DropReason::NoPdcAvailable), 1);
    // A non-SYN request for a PDC that does not exist.
    let mut forged = drain(&mut a, t(0));
    assert!(forged.is_empty());
    let mut bytes = [0u8; 12];
    PdsRepr::Request(uet_wire::pds::PdsRequestRepr {
        mode: ReliableMode::Rud,
        next_hdr: NextHeader::None,
        retx: false,
        ar: false,
        clear_psn_offset: -1,
        psn: Psn(5),
        spdcid: uet_wire::PdcId::new(9),
        dpdcid: DpdcidField::Dpdcid(uet_wire::PdcId::new(777)),
        cc: None,
    })
    .emit(&mut bytes);
    forged.push(Dgram {
        src: A,
        ev: EntropyValue::from_masked(1),
        bytes: bytes.to_vec(),
        ecn: Ecn::Ect0,
        dscp: Dscp::from_masked(0),
        trimmed: None,
    });
    deliver(&mut b, t(1), &forged[0]);
    let out = drain(&mut b, t(1));
    let PdsRepr::Nack(n) = out[0].pds() else {
        panic!()
    };
    assert_eq!(n.code, NackCode::InvDpdcid);
    // Garbage is a counted drop.
    let junk = Dgram {
        bytes: vec![0xff; 3],
        ..forged[0].clone()
    };
    deliver(&mut b, t(1), &junk);
    assert_eq!(b.pds.counters().drops(DropReason::Malformed), 1);
}

#[test]
fn rud_sack_covers_a_hole_and_the_gap_is_resent() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 5, 100)).unwrap();
    let out = drain(&mut a, t(0));
    for (i, d) in out.iter().enumerate() {
        if i != 1 {
            deliver(&mut b, t(1), d);
        }
    }
    let acks = drain(&mut b, t(1));
    for d in &acks {
        let PdsRepr::Ack(ack) = d.pds() else { panic!() };
        let PdsAckExt::Cc(cc) = ack.ext else { panic!() };
        let base = ack.sack_base().unwrap();
        assert_eq!(base, ack.cack_psn.next());
        assert_eq!(cc.sack_bitmap & 1, 0, "the hole");
        deliver(&mut a, t(2), d);
    }
    // 4 of 5 acknowledged (1 cumulatively, 3 by SACK).
    assert_eq!(a.up.acked.len(), 4);
    // Three later packets arrived: the hole is presumed lost and resent at
    // once, without an RTO.
    let when = t(2);
    let re = drain(&mut a, when);
    assert_eq!(re.len(), 1);
    assert_eq!(a.pds.counters().rto_fired, 0);
    deliver(&mut b, when, &re[0]);
    for d in drain(&mut b, when) {
        deliver(&mut a, when, &d);
    }
    assert_eq!(a.up.acked.len(), 5);
    assert_eq!(b.up.requests.len(), 5);
}

#[test]
fn rod_drops_out_of_order_and_goes_back_n() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let pdc = a.pds.open(t(0), key(ReliableMode::Rod)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 4, 100)).unwrap();
    let out = drain(&mut a, t(0));
    let evs: Vec<_> = out.iter().map(|d| d.ev).collect();
    assert!(evs.windows(2).all(|w| w[0] == w[1]), "ROD is single path");
    deliver(&mut b, t(1), &out[0]);
    deliver(&mut b, t(1), &out[2]); // out of order: dropped, one NACK
    deliver(&mut b, t(1), &out[3]); // dropped, no second NACK
    let replies = drain(&mut b, t(1));
    let nacks: Vec<_> = replies
        .iter()
        .filter_map(|d| match d.pds() {
            PdsRepr::Nack(n) => Some(n),
            _ => None,
        })
        .collect();
    assert_eq!(nacks.len(), 1);
    assert_eq!(nacks[0].code, NackCode::RodOoo);
    assert_eq!(
        b.up.requests.len(),
        1,
        "only in-order packets are delivered"
    );
    for d in &replies {
        deliver(&mut a, t(2), d);
    }
    let re = drain(&mut a, t(2));
    assert_eq!(
        re.len(),
        3,
        "go back to the expected PSN and resend all after it"
    );
    for d in &re {
        deliver(&mut b, t(3), d);
    }
    let psns: Vec<_> = b.up.requests.iter().map(|(p, _)| p.0).collect();
    assert!(
        psns.windows(2).all(|w| w[1] == w[0] + 1),
        "delivered in order: {psns:?}"
    );
    assert_eq!(psns.len(), 4);
}

#[test]
fn guaranteed_response_survives_a_lost_ack_and_is_cleared() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    b.up.reply_error = Some(ReturnCode::BadMkey);
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 1, 100)).unwrap();
    let d = drain(&mut a, t(0)).remove(0);
    deliver(&mut b, t(1), &d);
    let lost_ack = drain(&mut b, t(1));
    assert_eq!(lost_ack.len(), 1);
    let PdsRepr::Ack(ack) = lost_ack[0].pds() else {
        panic!()
    };
    assert_eq!(ack.next_hdr, NextHeader::Response);
    assert_eq!(
        ack.req,
        PdsAckRequest::Clear,
        "the target holds a guaranteed response"
    );
    let PdsRepr::Request(r) = d.pds() else {
        panic!()
    };
    assert_eq!(
        ack.cack_psn,
        r.psn.sub(1),
        "CACK does not pass an uncleared response"
    );
    let PdsAckExt::Cc(cc) = ack.ext else { panic!() };
    assert_eq!(
        cc.sack_bitmap, 0,
        "nor does the SACK: the response must be fetched"
    );
    // The ACK is lost; the RTO resends the request; the duplicate gets the
    // stored response, and no second placement happens.
    let when = a.pds.poll_timeout().unwrap();
    a.pds.handle_timeout(when, &mut a.up);
    let re = drain(&mut a, when);
    deliver(&mut b, when, &re[0]);
    assert_eq!(b.up.requests.len(), 1);
    let acks = drain(&mut b, when);
    deliver(&mut a, when, &acks[0]);
    assert_eq!(a.up.responses.len(), 1);
    assert_eq!(a.up.responses[0].1, ReturnCode::BadMkey);
    assert_eq!(a.up.acked.len(), 1);
    // The initiator clears it: a CLEAR CP covering the PSN.
    let out = drain(&mut a, when);
    let clear = out
        .iter()
        .find(|d| matches!(d.pds(), PdsRepr::Cp(c) if matches!(c.payload, CpPayload::Clear { .. })))
        .expect("a CLEAR");
    deliver(&mut b, when, clear);
    let acks = drain(&mut b, when);
    let PdsRepr::Ack(ack) = acks[0].pds() else {
        panic!()
    };
    assert_eq!(ack.cack_psn, r.psn, "cleared: CACK advances");
    assert_eq!(ack.req, PdsAckRequest::None);
}

#[test]
fn idle_pdcs_close_on_both_sides() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 1, 10)).unwrap();
    for d in drain(&mut a, t(0)) {
        deliver(&mut b, t(0), &d);
    }
    for d in drain(&mut b, t(0)) {
        deliver(&mut a, t(0), &d);
    }
    assert_eq!(b.pds.pdc_count(), 1);
    let when = a.pds.poll_timeout().unwrap();
    assert_eq!(when, t(0) + PdsConfig::default().idle_timeout);
    a.pds.handle_timeout(when, &mut a.up);
    let out = drain(&mut a, when);
    let PdsRepr::Cp(c) = out[0].pds() else {
        panic!()
    };
    assert_eq!(c.payload, CpPayload::Close);
    assert!(c.ar);
    deliver(&mut b, when, &out[0]);
    let acks = drain(&mut b, when);
    assert_eq!(
        b.pds.pdc_count(),
        0,
        "the target forgets the PDC after ACKing CLOSE"
    );
    deliver(&mut a, when, &acks[0]);
    assert_eq!(a.pds.pdc_count(), 0);
    assert!(a.up.failed.is_empty());
}

#[test]
fn thousand_pdcs_open_and_close_without_leaks() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let mut now = t(0);
    for round in 0..1000u32 {
        let mut k = key(ReliableMode::Rud);
        k.job = JobId::from_masked(round);
        let pdc = a.pds.open(now, k).unwrap();
        a.pds
            .enqueue(now, pdc, pkts(u64::from(round), 1, 8))
            .unwrap();
    }
    assert_eq!(a.pds.pdc_count(), 1000);
    for _ in 0..10 {
        for d in drain(&mut a, now) {
            deliver(&mut b, now, &d);
        }
        for d in drain(&mut b, now) {
            deliver(&mut a, now, &d);
        }
        if let Some(w) = a.pds.poll_timeout() {
            now = w;
            a.pds.handle_timeout(now, &mut a.up);
            b.pds.handle_timeout(now, &mut b.up);
        }
    }
    assert_eq!(a.up.acked.len(), 1000);
    assert_eq!(a.pds.pdc_count(), 0);
    assert_eq!(b.pds.pdc_count(), 0);
    assert_eq!(a.pds.counters().pdcs_opened, a.pds.counters().pdcs_closed);
}

#[test]
fn rudi_retries_until_answered_and_fails_after_its_budget() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let pkt = PktRef {
        token: 3,
        frag: 0,
        len: 16,
        last: true,
    };
    let id = a.pds.send_rudi(t(0), B, pkt);
    let first = drain(&mut a, t(0));
    let PdsRepr::Rudi(r) = first[0].pds() else {
        panic!()
    };
    assert_eq!(r.pkt_id, id);
    assert!(!r.retx);
    // Lost: the retry carries retx and the same packet ID.
    let when = a.pds.poll_timeout().unwrap();
    a.pds.handle_timeout(when, &mut a.up);
    let retry = drain(&mut a, when);
    let PdsRepr::Rudi(r2) = retry[0].pds() else {
        panic!()
    };
    assert!(r2.retx);
    assert_eq!(r2.pkt_id, id);
    // Both copies arrive: at-least-once, both are executed and answered.
    deliver(&mut b, when, &first[0]);
    deliver(&mut b, when, &retry[0]);
    assert_eq!(b.up.requests.len(), 2);
    let resp = drain(&mut b, when);
    assert_eq!(resp.len(), 2);
    deliver(&mut a, when, &resp[0]);
    deliver(&mut a, when, &resp[1]);
    assert_eq!(a.up.acked, vec![pkt], "completes once");
    assert_eq!(a.pds.counters().drops(DropReason::StrayFeedback), 1);
    // A request nobody answers fails after the retry budget.
    a.pds.send_rudi(when, B, pkt);
    assert_eq!(drain(&mut a, when).len(), 1);
    while let Some(w) = a.pds.poll_timeout() {
        a.pds.handle_timeout(w, &mut a.up);
        drain(&mut a, w);
    }
    assert_eq!(a.up.failed, vec![(pkt, PdsError::Timeout)]);
}

#[test]
fn uud_is_fire_and_forget() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let pkt = PktRef {
        token: 1,
        frag: 0,
        len: 20,
        last: true,
    };
    a.pds.send_unreliable(B, pkt);
    let out = drain(&mut a, t(0));
    assert_eq!(out.len(), 1);
    assert!(matches!(out[0].pds(), PdsRepr::Uud(_)));
    assert_eq!(a.pds.poll_timeout(), None, "nothing to retry");
    deliver(&mut b, t(1), &out[0]);
    assert_eq!(b.up.requests.len(), 1);
    assert!(drain(&mut b, t(1)).is_empty(), "no acknowledgement");
}

#[test]
fn sack_infers_a_loss_three_packets_later_without_waiting_for_rto() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    // Establish first, so later ACKs are plain coalescing ACKs.
    a.pds.enqueue(t(0), pdc, pkts(1, 1, 100)).unwrap();
    for d in drain(&mut a, t(0)) {
        deliver(&mut b, t(0), &d);
    }
    for d in drain(&mut b, t(0)) {
        deliver(&mut a, t(0), &d);
    }
    a.pds.enqueue(t(1), pdc, pkts(2, 5, 100)).unwrap();
    let out: Vec<Dgram> = (0..5).flat_map(|i| drain(&mut a, t(1 + i))).collect();
    assert_eq!(out.len(), 5);
    let lost = out[0].pds();
    // Two later packets arrive: not yet enough to presume the first lost.
    for d in &out[1..3] {
        deliver(&mut b, t(10), d);
    }
    for d in drain(&mut b, t(10)) {
        deliver(&mut a, t(11), &d);
    }
    assert!(
        drain(&mut a, t(11)).is_empty(),
        "two later deliveries: wait"
    );
    deliver(&mut b, t(12), &out[3]);
    for d in drain(&mut b, t(12)) {
        deliver(&mut a, t(13), &d);
    }
    let re = drain(&mut a, t(13));
    assert_eq!(
        re.len(),
        1,
        "three later deliveries: resend now, long before the 5 ms RTO"
    );
    let (PdsRepr::Request(orig), PdsRepr::Request(r)) = (lost, re[0].pds()) else {
        panic!()
    };
    assert_eq!(r.psn, orig.psn);
    assert!(r.retx);
    assert_eq!(a.pds.counters().sack_inferred, 1);
    assert_eq!(a.pds.counters().rto_fired, 0);
}

/// Sets up an established PDC A→B and returns its ID and the time.
fn established(a: &mut Host, b: &mut Host) -> (uet_wire::PdcId, Instant) {
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 1, 10)).unwrap();
    for d in drain(a, t(0)) {
        deliver(b, t(1), &d);
    }
    for d in drain(b, t(1)) {
        deliver(a, t(2), &d);
    }
    while a.pds.poll_event().is_some() {}
    (pdc, t(2))
}

#[test]
fn round_trips_give_each_sending_pdcs_estimate_and_rto() {
    // An RTO floor below the round trip, so the RTO shows the estimate.
    let cfg = PdsConfig {
        rto_init: Duration::from_nanos(100),
        ..PdsConfig::default()
    };
    let mut a = host(A, 1, cfg.clone());
    let mut b = host(B, 2, cfg.clone());
    assert_eq!(a.pds.round_trips().count(), 0);
    established(&mut a, &mut b);
    let rt: Vec<PdcRoundTrip> = a.pds.round_trips().collect();
    assert_eq!(rt.len(), 1);
    let r = rt[0];
    assert_eq!(r.peer, B);
    // One sample of at most the 2 µs from send to ACK: SRTT is it and
    // RTTVAR half of it (RFC 6298's first sample).
    let srtt = r.srtt.as_nanos();
    assert!(srtt > 0 && srtt <= 2_000, "{srtt}");
    assert_eq!(r.rttvar.as_nanos(), srtt / 2);
    let var = (4 * r.rttvar.as_nanos()).max(cfg.ack_delay.as_nanos());
    assert_eq!(r.rto.as_nanos(), srtt + var);
    // The target has sent no data of its own: no estimate.
    assert_eq!(b.pds.round_trips().count(), 0);
    // With the default floor the RTO is RTO_INIT_TIME.
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    established(&mut a, &mut b);
    let r = a.pds.round_trips().next().unwrap();
    assert_eq!(r.rto, PdsConfig::default().rto_init);
}

#[test]
fn probe_is_answered_with_p_and_its_opaque_value() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let (pdc, now) = established(&mut a, &mut b);
    a.pds.probe(now, pdc).unwrap();
    let out = drain(&mut a, now);
    let PdsRepr::Cp(c) = out[0].pds() else {
        panic!()
    };
    let CpPayload::Probe { probe_opaque, .. } = c.payload else {
        panic!()
    };
    deliver(&mut b, now + Duration::from_micros(3), &out[0]);
    let acks = drain(&mut b, now + Duration::from_micros(3));
    let PdsRepr::Ack(ack) = acks[0].pds() else {
        panic!()
    };
    assert!(ack.p());
    assert_eq!(ack.probe_opaque(), Some(probe_opaque));
    deliver(&mut a, now + Duration::from_micros(7), &acks[0]);
    assert_eq!(
        a.pds.poll_event(),
        Some(PdsEvent::ProbeAnswered {
            pdc,
            rtt: Duration::from_micros(7)
        })
    );
}

#[test]
fn an_idle_target_asks_for_close_and_the_initiator_closes() {
    let cfg = PdsConfig {
        // The initiator would wait longer than the target.
        idle_timeout: Duration::from_secs(2),
        ..PdsConfig::default()
    };
    let mut a = host(
        A,
        1,
        PdsConfig {
            idle_timeout: Duration::from_secs(60),
            ..cfg.clone()
        },
    );
    let mut b = host(B, 2, cfg);
    let (_pdc, now) = established(&mut a, &mut b);
    let when = b.pds.poll_timeout().unwrap();
    assert_eq!(
        when,
        t(1) + Duration::from_secs(2),
        "B last heard from A at t(1)"
    );
    let _ = now;
    b.pds.handle_timeout(when, &mut b.up);
    let out = drain(&mut b, when);
    let PdsRepr::Cp(c) = out[0].pds() else {
        panic!()
    };
    assert_eq!(c.payload, CpPayload::CloseReq);
    deliver(&mut a, when, &out[0]);
    // The initiator closes at once instead of after its own 60 s.
    let w = a.pds.poll_timeout().unwrap();
    assert!(w <= when, "close is due now");
    a.pds.handle_timeout(when, &mut a.up);
    let close = drain(&mut a, when);
    let PdsRepr::Cp(c) = close[0].pds() else {
        panic!()
    };
    assert_eq!(c.payload, CpPayload::Close);
    deliver(&mut b, when, &close[0]);
    for d in drain(&mut b, when) {
        deliver(&mut a, when, &d);
    }
    assert_eq!(a.pds.pdc_count(), 0);
    assert_eq!(b.pds.pdc_count(), 0);
}

/// A PDS whose sources run RCCC with an `initial_window` of speculative
/// credit and 4,160-byte packets.
fn rccc_source(initial_window: u64) -> PdsConfig {
    use uet_cms::{Algorithm, CccConfig, RcccConfig};
    PdsConfig {
        ccc: CccConfig {
            mtu: 4160,
            algorithm: Algorithm::Rccc(RcccConfig {
                initial_window,
                ..RcccConfig::default()
            }),
            ..CccConfig::default()
        },
        ..PdsConfig::default()
    }
}

/// A target whose PDS runs an RCCC receiver with `initial_window`.
fn rccc_target(initial_window: u64) -> Host {
    host(
        B,
        2,
        PdsConfig {
            rccc_receiver: Some(uet_cms::RcccConfig {
                initial_window,
                ..uet_cms::RcccConfig::default()
            }),
            ..PdsConfig::default()
        },
    )
}

/// An RCCC source A and target B, both with `initial_window`, and `n`
/// packets of 4,000 B queued at A at t = 0 on a new RUD PDC.
fn rccc_write(initial_window: u64, n: u32) -> (Host, Host, uet_wire::PdcId) {
    let mut a = host(A, 1, rccc_source(initial_window));
    let b = rccc_target(initial_window);
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, n, 4000)).unwrap();
    (a, b, pdc)
}

/// The RCCC receiver's ECN rate control hears of every untrimmed data
/// packet that asks for credit, marked or not, and of no trimmed one (a
/// trim is its own signal, not a mark).
#[test]
fn the_rccc_receiver_counts_the_marks_of_untrimmed_data() {
    let mut a = host(A, 1, rccc_source(4 * 4160));
    let mut b = host(
        B,
        2,
        PdsConfig {
            rccc_receiver: Some(uet_cms::RcccConfig {
                initial_window: 4 * 4160,
                ecn_rate: Some(uet_cms::rccc::EcnRate::for_base_rtt(Duration::from_micros(
                    12,
                ))),
                ..uet_cms::RcccConfig::default()
            }),
            ..PdsConfig::default()
        },
    );
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 3, 4000)).unwrap();
    let mut sent: Vec<Dgram> = drain(&mut a, t(0))
        .into_iter()
        .filter(|d| matches!(d.pds(), PdsRepr::Request(_)))
        .collect();
    assert_eq!(sent.len(), 3);
    sent[0].ecn = Ecn::Ce;
    sent[2].trimmed = Some(Trim::Trimmed);
    sent[2].ecn = Ecn::Ce;
    for d in &sent {
        deliver(&mut b, t(1), d);
    }
    let s = b.pds.rccc_receiver().unwrap().stats();
    assert_eq!((s.ecn_packets, s.ecn_marked), (2, 1));
}

/// A source whose congestion control admits nothing (here: RCCC with its
/// speculative window spent on packets that were all lost) must still be
/// able to make itself heard: each RTO lets one retransmission through,
/// whatever the credit (HTSIM's RTS, TCP's one segment after an RTO).
/// A window is lost and no credit ever comes. The RTO of the oldest packet
/// lets it pass the closed credit. Once it is acknowledged, the next
/// packet's RTO is long overdue, but only one RTO per PDC and
/// RTO_INIT_TIME forces its packet through: the second waits for credit
/// and asks for it, instead of the whole lost window bypassing the CCC one
/// acknowledgement after another.
#[test]
fn a_lost_window_forces_one_packet_per_rto_not_all() {
    let cfg = rccc_source(2 * 4160);
    let rto = cfg.rto_init;
    let mut a = host(A, 1, cfg);
    let mut b = host(B, 2, PdsConfig::default());
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 2, 4000)).unwrap();
    let is_req = |d: &Dgram| matches!(d.pds(), PdsRepr::Request(_));
    let first: Vec<Dgram> = drain(&mut a, t(0)).into_iter().filter(is_req).collect();
    assert_eq!(first.len(), 2, "both leave on speculation, and are lost");
    // The first RTO forces the oldest packet out; it arrives and is ACKed.
    // The timer is handled half an RTO late (the loop was busy), so the
    // second packet, whose timer that ACK may delay by an RTO after its
    // send at most, falls due within RTO_INIT_TIME of the first.
    let due = a.pds.poll_timeout().unwrap();
    assert!(due >= t(0) + rto);
    let when = due + rto / 2;
    a.pds.handle_timeout(when, &mut a.up);
    let re: Vec<Dgram> = drain(&mut a, when).into_iter().filter(is_req).collect();
    assert_eq!(re.len(), 1);
    deliver(&mut b, when, &re[0]);
    for d in drain(&mut b, when) {
        deliver(&mut a, when, &d);
    }
    // The second packet's RTO is overdue: it is marked lost, but it may not
    // pass the closed credit within RTO_INIT_TIME of the first. It asks for
    // credit instead (a CREDIT_REQ CP, the PDC being established now).
    let mut resent = 0;
    let mut credit_reqs = 0;
    let mut now = when;
    while let Some(w) = a.pds.poll_timeout() {
        if w >= when + rto {
            break;
        }
        now = w.max(now);
        a.pds.handle_timeout(now, &mut a.up);
        for d in drain(&mut a, now) {
            match d.pds() {
                PdsRepr::Request(_) => resent += 1,
                PdsRepr::Cp(c) if matches!(c.payload, CpPayload::CreditReq { .. }) => {
                    credit_reqs += 1;
                }
                _ => {}
            }
        }
    }
    assert!(a.pds.counters().rto_fired >= 2, "both packets timed out");
    assert_eq!(resent, 0, "not forced again within RTO_INIT_TIME");
    assert!(credit_reqs >= 1, "it waits for credit and asks for it");
}

/// A opens a PDC to B and queues four 4,000 B packets; its speculative
/// window (two of them) arrives trimmed at the last hop, and B's NACKs
/// come back. Two packets to resend and no credit: A asks at once, still
/// unestablished. Returns the PDC and that CREDIT_REQ.
fn trimmed_first_window(a: &mut Host, b: &mut Host, at: Instant) -> (uet_wire::PdcId, Dgram) {
    let pdc = a.pds.open(at, key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(at, pdc, pkts(1, 4, 4000)).unwrap();
    let first: Vec<Dgram> = drain(a, at)
        .into_iter()
        .filter(|d| matches!(d.pds(), PdsRepr::Request(_)))
        .collect();
    assert_eq!(first.len(), 2, "the speculative window");
    let later = at + Duration::from_micros(1);
    for d in first {
        deliver(b, later, &trimmed_at_last_hop(d));
    }
    let nacks = drain(b, later);
    assert!(nacks.iter().all(|d| matches!(d.pds(), PdsRepr::Nack(_))));
    for d in &nacks {
        deliver(a, later, d);
    }
    let mut reqs: Vec<Dgram> = drain(a, later)
        .into_iter()
        .filter(|d| {
            matches!(d.pds(), PdsRepr::Cp(c) if matches!(c.payload, CpPayload::CreditReq { .. }))
        })
        .collect();
    assert_eq!(reqs.len(), 1);
    (pdc, reqs.remove(0))
}

/// A source that has heard nothing but NACKs is not established, yet its
/// RCCC may need credit: its CREDIT_REQ goes out addressed like its SYN
/// packets, and the target finds the PDC by {source, SPDCID} and counts
/// the request. Before, the request was taken from the source and never
/// sent (a 32:1 incast of 100 KiB flows whose first windows were all
/// trimmed hung once credit had to cover whole packets).
#[test]
fn a_nacked_unestablished_source_still_asks_for_credit() {
    let mut a = host(A, 1, rccc_source(2 * 4160));
    let mut b = rccc_target(2 * 4160);
    let (_, req) = trimmed_first_window(&mut a, &mut b, t(0));
    let PdsRepr::Cp(c) = req.pds() else { panic!() };
    assert!(
        matches!(c.dpdcid, DpdcidField::Syn { .. }),
        "addressed as a SYN packet: {:?}",
        c.dpdcid
    );
    deliver(&mut b, t(3), &req);
    assert_eq!(
        b.pds.counters().drops(DropReason::StrayFeedback),
        0,
        "not dropped as stray"
    );
    assert_eq!(b.pds.rccc_receiver().unwrap().stats().credit_requests, 1);
}

/// A source never heard from (its first window lost, or only its ACK) does
/// not ask: the target may hold no PDC for it, and its RTO resends. At
/// 1023:1 drop-tail, asking put more retransmissions into the full buffer
/// (BENCHMARKS.md).
#[test]
fn an_unheard_source_waits_for_its_rto() {
    let cfg = rccc_source(2 * 4160);
    let rto = cfg.rto_init;
    let mut a = host(A, 1, cfg);
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 4, 4000)).unwrap();
    drop(drain(&mut a, t(0)));
    let mut now = t(0);
    while let Some(w) = a.pds.poll_timeout() {
        if w >= t(0) + rto {
            break;
        }
        now = w.max(now);
        a.pds.handle_timeout(now, &mut a.up);
        assert!(
            drain(&mut a, now).is_empty(),
            "nothing leaves before the RTO"
        );
    }
}

#[test]
fn an_rto_lets_one_packet_through_a_closed_window() {
    let cfg = rccc_source(4160);
    let mut a = host(A, 1, cfg);
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 4, 4000)).unwrap();
    let first = drain(&mut a, t(0));
    assert!(
        !first.is_empty() && first.len() < 4,
        "the speculative window admits a few"
    );
    assert!(
        drain(&mut a, t(1)).is_empty(),
        "then no credit, nothing leaves"
    );
    // It is lost; no credit ever arrives (CREDIT_REQs go unanswered). The
    // RTO must resend it anyway.
    let mut resent = None;
    for _ in 0..20 {
        let Some(when) = a.pds.poll_timeout() else {
            break;
        };
        a.pds.handle_timeout(when, &mut a.up);
        if let Some(d) = drain(&mut a, when)
            .into_iter()
            .find(|d| matches!(d.pds(), PdsRepr::Request(_)))
        {
            resent = Some(d);
            break;
        }
    }
    let re = resent.expect("a retransmission despite zero credit");
    assert!(a.pds.counters().rto_fired >= 1);
    let PdsRepr::Request(r) = re.pds() else {
        panic!()
    };
    assert!(r.retx && r.cc.is_some(), "it carries the credit target");
}

/// `Max_RTO_Retx_Cnt` bounds retransmissions *by timeout*: a packet resent
/// early again and again because later packets overtook it (SACK-inferred
/// loss) has not spent its RTO budget. Counting every retransmission against
/// it closed a healthy PDC in error on the lab at 5 % loss with reordering.
#[test]
fn fast_retransmissions_do_not_spend_the_rto_budget() {
    let cfg = PdsConfig::default();
    let max = cfg.max_rto_retx;
    let mut a = host(A, 1, cfg);
    let mut b = host(B, 2, PdsConfig::default());
    let (pdc, mut now) = established(&mut a, &mut b);
    let step = |now: &mut Instant| *now += Duration::from_micros(10);
    a.pds.enqueue(now, pdc, pkts(2, 1, 100)).unwrap();
    let victim = drain(&mut a, now);
    assert_eq!(victim.len(), 1, "the victim leaves; it is lost");
    let PdsRepr::Request(v) = victim[0].pds() else {
        panic!()
    };
    let rounds = max + 2;
    for k in 0..rounds {
        // Three later packets overtake it and are SACKed...
        step(&mut now);
        a.pds
            .enqueue(now, pdc, pkts(10 + u64::from(k), 3, 100))
            .unwrap();
        let fresh = drain(&mut a, now);
        assert_eq!(fresh.len(), 3);
        step(&mut now);
        for d in &fresh {
            deliver(&mut b, now, d);
        }
        for d in drain(&mut b, now) {
            deliver(&mut a, now, &d);
        }
        // ...so it is resent at once, and that copy is lost too.
        let re = drain(&mut a, now);
        assert_eq!(re.len(), 1, "round {k}: one early retransmission");
        let PdsRepr::Request(r) = re[0].pds() else {
            panic!()
        };
        assert!(r.retx && r.psn == v.psn);
    }
    assert_eq!(a.pds.counters().sack_inferred, u64::from(rounds));
    // Now its timer fires: the first RTO, not the budget's end.
    let when = a.pds.poll_timeout().expect("the victim's RTO");
    a.pds.handle_timeout(when, &mut a.up);
    assert!(a.up.failed.is_empty(), "{:?}", a.up.failed);
    let re = drain(&mut a, when);
    assert_eq!(re.len(), 1, "resent by the RTO");
    assert_eq!(a.pds.counters().rto_fired, 1);
    deliver(&mut b, when, &re[0]);
    for d in drain(&mut b, when) {
        deliver(&mut a, when, &d);
    }
    assert!(a.up.acked.iter().any(|p| p.token == 2), "the victim landed");
    assert!(a.up.failed.is_empty());
}

#[test]
fn the_service_time_runs_from_the_packets_stamped_arrival() {
    use uet_wire::pds::{AckCcState, PdsAckCc, PdsAckState};
    let mut cfg = PdsConfig::default();
    crate::CcMode::Nscc.configure(&mut cfg, 100_000_000_000, Duration::from_micros(12), false);
    let service_of = |arrived: Option<Instant>| {
        let mut a = host(A, 1, cfg.clone());
        let mut b = host(B, 2, cfg.clone());
        let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
        a.pds.enqueue(t(0), pdc, pkts(7, 1, 100)).unwrap();
        let out = drain(&mut a, t(0));
        assert_eq!(out.len(), 1);
        let d = &out[0];
        let meta = RxMeta {
            src: d.src,
            ev: d.ev,
            ecn: d.ecn,
            trimmed: None,
            nominal_size: d.bytes.len() as u32 + 48,
            sdi: None,
            arrived,
        };
        // Read at 105 µs.
        b.pds.handle_datagram(t(105), &meta, &d.bytes, &mut b.up);
        let acks = drain(&mut b, t(105));
        let Some(PdsRepr::Ack(ack)) = acks.first().map(Dgram::pds) else {
            panic!("no ACK");
        };
        let PdsAckExt::Cc(PdsAckCc {
            state: PdsAckState::Cc(AckCcState::Nscc(n)),
            ..
        }) = ack.ext
        else {
            panic!("no NSCC state in {:?}", ack.ext);
        };
        uet_cms::nscc::service_time_from_wire(n.service_time)
    };
    // Stamped on arrival at 5 µs: it waited 100 µs for the host, which is
    // the destination's time, not the fabric's.
    let stamped = service_of(Some(t(5)));
    assert!(
        stamped >= Duration::from_micros(99) && stamped <= Duration::from_micros(101),
        "{stamped:?}"
    );
    // Unstamped: it arrived when it was read.
    assert!(service_of(None) < Duration::from_micros(1));
}

/// Two PDCs towards one destination share its CCC. The one the CCC held
/// back left the send round robin; the ACK that opens the window answers
/// the other PDC, which has nothing left to send. The ACK schedules every
/// PDC of the CCC, so the held one sends. Before, it waited for good: only
/// the PDC the ACK named was scheduled.
#[test]
fn an_ack_that_opens_a_shared_window_schedules_the_pdc_it_held_back() {
    let mut cfg = PdsConfig::default();
    let window = 2 * cfg.nominal(1000);
    cfg.ccc.algorithm = uet_cms::Algorithm::Fixed {
        window: u64::from(window),
    };
    let mut a = host(A, 1, cfg);
    let mut b = host(B, 2, PdsConfig::default());
    let first = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    let mut k = key(ReliableMode::Rud);
    k.job = JobId::from_masked(2);
    let second = a.pds.open(t(0), k).unwrap();
    assert_ne!(first, second);
    a.pds.enqueue(t(0), first, pkts(1, 2, 1000)).unwrap();
    let out = drain(&mut a, t(0));
    assert_eq!(out.len(), 2, "the window is full");
    a.pds.enqueue(t(1), second, pkts(2, 2, 1000)).unwrap();
    assert!(drain(&mut a, t(1)).is_empty(), "held back by the window");
    for d in &out {
        deliver(&mut b, t(2), d);
    }
    for d in drain(&mut b, t(2)) {
        deliver(&mut a, t(3), &d);
    }
    assert_eq!(a.up.acked.len(), 2);
    let sent = drain(&mut a, t(3));
    assert_eq!(sent.len(), 2, "the held PDC sends once the window opens");
}

/// An RCCC receiver's grant goes in the ACK the PDC owes anyway: while
/// data it has not acknowledged yet waits for the coalescing trigger (four
/// 4,000 B packets) or `ack_delay`, the grant makes that ACK leave now
/// with the credit in it, instead of a CREDIT CP beside a later ACK. A
/// 64-packet write on a clean wire, the receiver's 1 µs pacer granting a
/// packet or three per slice: every CP the receiver sends finds all the
/// data acknowledged, and it sends fewer packets in all than before (one
/// per grant, and no ACK of its own for most grants).
#[test]
fn a_grant_to_a_source_owed_an_ack_rides_in_the_ack() {
    use std::collections::VecDeque;
    use uet_wire::pds::{AckCcState, PdsAckState as AckState};
    let (mut a, mut b, _) = rccc_write(4160, 64);
    let later = |x: Option<Psn>, y: Psn| Some(x.filter(|p| p.is_after(y)).unwrap_or(y));
    // Each way takes 3 µs; the hosts run every 1 µs.
    let hop = Duration::from_micros(3);
    let mut to_b: VecDeque<(Instant, Dgram)> = VecDeque::new();
    let mut to_a: VecDeque<(Instant, Dgram)> = VecDeque::new();
    let (mut delivered, mut acked) = (None::<Psn>, None::<Psn>);
    let (mut cps, mut acks, mut credit_acks, mut data) = (0, 0, 0, 0);
    let mut now = t(0);
    while a.up.acked.len() < 64 && now < t(2_000) {
        while let Some((_, d)) = to_b.front().filter(|(at, _)| *at <= now).cloned() {
            to_b.pop_front();
            if let PdsRepr::Request(r) = d.pds() {
                delivered = later(delivered, r.psn);
            }
            deliver(&mut b, now, &d);
        }
        while let Some((_, d)) = to_a.front().filter(|(at, _)| *at <= now).cloned() {
            to_a.pop_front();
            deliver(&mut a, now, &d);
        }
        for h in [&mut a, &mut b] {
            if h.pds.poll_timeout().is_some_and(|w| w <= now) {
                h.pds.handle_timeout(now, &mut h.up);
            }
        }
        for d in drain(&mut a, now) {
            data += u32::from(matches!(d.pds(), PdsRepr::Request(_)));
            to_b.push_back((now + hop, d));
        }
        for d in drain(&mut b, now) {
            match d.pds() {
                PdsRepr::Ack(ack) => {
                    acks += 1;
                    acked = later(acked, ack.cack_psn);
                    if let PdsAckExt::Cc(cc) = ack.ext
                        && matches!(cc.state, AckState::Cc(AckCcState::Credit(_)))
                    {
                        credit_acks += 1;
                    }
                }
                PdsRepr::Cp(c) if matches!(c.payload, CpPayload::Credit { .. }) => {
                    cps += 1;
                    assert_eq!(
                        acked, delivered,
                        "a CREDIT CP while data waited for its ACK, at {now:?}"
                    );
                }
                _ => {}
            }
            to_a.push_back((now + hop, d));
        }
        now += Duration::from_micros(1);
    }
    assert_eq!(a.up.acked.len(), 64, "the write completes");
    assert_eq!(data, 64, "a clean wire: nothing resent");
    assert!(credit_acks > 8, "grants rode in ACKs ({credit_acks})");
    assert!(
        cps + acks < data,
        "fewer packets back than data packets: {cps} CPs + {acks} ACKs for {data}"
    );
}

/// RCCC on a path whose BDP is less than one packet (10 Mb/s, 500 µs:
/// 625 B): the source's first packet leaves on its speculative window, and
/// the write completes. With a first window of one BDP the source held
/// 625 B of credit for a 4 KiB packet: nothing could leave, nothing was in
/// flight to time out, and no PDC the receiver knew could carry a credit
/// request (on the veth lab, a calibration that lowered R to 20 Mb/s hung
/// every sender).
#[test]
fn a_path_whose_bdp_is_under_a_packet_still_sends_its_first_packet() {
    let mut cfg = PdsConfig::default();
    crate::CcMode::Rccc.configure(&mut cfg, 10_000_000, Duration::from_micros(500), false);
    let mut a = host(A, 1, cfg.clone());
    let mut b = host(B, 2, cfg);
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 4, 4000)).unwrap();
    let mut now = t(0);
    while a.up.acked.len() < 4 && now < t(1_000_000) {
        if a.pds.poll_timeout().is_some_and(|w| w <= now) {
            a.pds.handle_timeout(now, &mut a.up);
        }
        if b.pds.poll_timeout().is_some_and(|w| w <= now) {
            b.pds.handle_timeout(now, &mut b.up);
        }
        exchange(&mut a, &mut b, now);
        now += Duration::from_micros(100);
    }
    assert_eq!(a.up.acked.len(), 4, "the write completes");
    assert!(a.up.failed.is_empty());
}

/// A source that waits for credit with data queued sends nothing but
/// CREDIT_REQs, by PDC ID, for as long as the receiver's pacer serves
/// others (seconds in a large incast on a busy host). Its PDC is not idle:
/// the target neither asks it to close nor forgets it, as it would after
/// `idle_timeout` of silence. Before, a request did not count as the
/// PDC's activity; the target reaped such PDCs, the source's next request
/// drew INV_DPDCID, and reopening failed every message part of which had
/// been acknowledged (64 lab senders into one receiver). Once the
/// requests stop, the idle close goes on as before.
#[test]
fn a_source_asking_for_credit_keeps_its_pdc_open_at_the_target() {
    let idle = Duration::from_millis(2);
    let mut a = host(A, 1, rccc_source(4160));
    let mut b = host(
        B,
        2,
        PdsConfig {
            rccc_receiver: Some(uet_cms::RcccConfig {
                initial_window: 4160,
                ..uet_cms::RcccConfig::default()
            }),
            idle_timeout: idle,
            ..PdsConfig::default()
        },
    );
    let pdc = a.pds.open(t(0), key(ReliableMode::Rud)).unwrap();
    a.pds.enqueue(t(0), pdc, pkts(1, 1, 4000)).unwrap();
    let first = drain(&mut a, t(0));
    for d in &first {
        deliver(&mut b, t(1), d);
    }
    let mut b_pdc = None;
    for d in drain(&mut b, t(1)) {
        if let PdsRepr::Ack(ack) = d.pds() {
            b_pdc = ack.spdcid;
        }
        deliver(&mut a, t(2), &d);
    }
    assert_eq!(a.up.acked.len(), 1);
    // A's request for credit, as it sends it on a credit timeout.
    let repr = PdsCpRepr {
        mode: ReliableMode::Rud,
        retx: false,
        ar: false,
        psn: Psn(0),
        spdcid: Some(pdc),
        dpdcid: DpdcidField::Dpdcid(b_pdc),
        payload: CpPayload::CreditReq {
            target_credit: 4 * 4160,
        },
    };
    let mut bytes = vec![0u8; PdsRepr::Cp(repr).buffer_len()];
    PdsRepr::Cp(repr).emit(&mut bytes);
    let req = Dgram {
        bytes,
        ..first[0].clone()
    };
    let close_req = |out: &[Dgram]| {
        out.iter()
            .any(|d| matches!(d.pds(), PdsRepr::Cp(c) if c.payload == CpPayload::CloseReq))
    };
    // Ten idle timeouts of requests, one every half idle timeout.
    let mut now = t(2);
    for _ in 0..20 {
        now += idle / 2;
        deliver(&mut b, now, &req);
        if b.pds.poll_timeout().is_some_and(|w| w <= now) {
            b.pds.handle_timeout(now, &mut b.up);
        }
        assert!(!close_req(&drain(&mut b, now)), "asked to close at {now:?}");
        assert_eq!(b.pds.pdc_count(), 1, "forgotten at {now:?}");
    }
    // The requests stop: an idle timeout later the target asks to close.
    now += idle;
    b.pds.handle_timeout(now, &mut b.up);
    assert!(close_req(&drain(&mut b, now)));
}

/// A source whose first window was trimmed asks for credit (as in
/// `a_nacked_unestablished_source_still_asks_for_credit`) while its peer
/// also writes to it: the CCC towards the peer holds the target PDC of the
/// peer's write too. That PDC is
/// established and addressable, but it has sent no data, so the peer's
/// receiver does not know this source by it (at the peer it is an
/// initiator PDC): the request goes on the PDC that sent the data. Before,
/// it went on the addressable target PDC and was dropped at the peer.
#[test]
fn a_credit_request_goes_on_the_pdc_that_carried_the_data() {
    let mut a = host(A, 1, rccc_source(2 * 4160));
    let mut b = rccc_target(2 * 4160);
    // B writes to A first: A holds a target PDC towards B, on the same CCC.
    let mut kb = key(ReliableMode::Rud);
    kb.dst = A;
    let from_b = b.pds.open(t(0), kb).unwrap();
    b.pds.enqueue(t(0), from_b, pkts(9, 1, 100)).unwrap();
    exchange(&mut b, &mut a, t(0));
    assert_eq!(b.up.acked.len(), 1);
    let (pdc, req) = trimmed_first_window(&mut a, &mut b, t(1));
    let PdsRepr::Cp(c) = req.pds() else { panic!() };
    assert_eq!(c.spdcid, Some(pdc), "from the PDC that sent the data");
    deliver(&mut b, t(4), &req);
    assert_eq!(b.pds.counters().drops(DropReason::StrayFeedback), 0);
    assert_eq!(b.pds.rccc_receiver().unwrap().stats().credit_requests, 1);
}

/// The target puts a grant in the ACK a PDC owes, and that ACK may
/// acknowledge nothing new (it answers a CLEAR, an ACK request or a
/// probe). Its cumulative credit counts all the same: ignored, the grant
/// was lost and a blocked source waited out its credit timeout.
#[test]
fn credit_in_an_ack_that_acknowledges_nothing_new_is_taken() {
    use uet_wire::pds::{AckCcState, PdsAckCc, PdsAckState};
    let (mut a, mut b, _) = rccc_write(4160, 4);
    let first = drain(&mut a, t(0));
    assert_eq!(first.len(), 1, "a one-packet speculative window");
    deliver(&mut b, t(3), &first[0]);
    let acks: Vec<Dgram> = drain(&mut b, t(3))
        .into_iter()
        .filter(|d| matches!(d.pds(), PdsRepr::Ack(_)))
        .collect();
    let template = acks.last().expect("an ACK").clone();
    deliver(&mut a, t(6), &template);
    assert_eq!(a.up.acked.len(), 1);
    // What that ACK's credit allows leaves; then the source waits.
    let sent = drain(&mut a, t(6))
        .iter()
        .filter(|d| matches!(d.pds(), PdsRepr::Request(_)))
        .count();
    assert!(drain(&mut a, t(7)).is_empty(), "blocked on credit");
    // The same ACK again, acknowledging nothing new, with one more
    // packet's credit.
    let PdsRepr::Ack(mut ack) = template.pds() else {
        panic!("not an ACK")
    };
    let PdsAckExt::Cc(PdsAckCc {
        state: PdsAckState::Cc(AckCcState::Credit(c)),
        ..
    }) = &mut ack.ext
    else {
        panic!("no credit in {:?}", ack.ext)
    };
    c.credit = uet_wire::Credit24::from_masked(c.credit.get() + 4160);
    let repr = PdsRepr::Ack(ack);
    let mut bytes = vec![0; repr.buffer_len()];
    repr.emit(&mut bytes);
    let grant = Dgram { bytes, ..template };
    deliver(&mut a, t(8), &grant);
    let more = drain(&mut a, t(8))
        .iter()
        .filter(|d| matches!(d.pds(), PdsRepr::Request(_)))
        .count();
    assert_eq!(
        more, 1,
        "the grant's packet leaves (after {sent} on the first ACK)"
    );
}
