//! Two endpoints joined by a hand-driven wire: operations end to end.

use std::net::{IpAddr, Ipv4Addr};

use uet_pds::RxMeta;
use uet_wire::ses::{ListKind, ReturnCode};
use uet_wire::time::Instant;
use uet_wire::{Ecn, JobId, PidOnFep, ResourceIndex};

use crate::endpoint::{Endpoint, EndpointConfig, OpCompletion, OpError};
use crate::initiator::{Operation, RemoteAddr};
use crate::memory::{Access, RegionSpec, Registration};
use crate::responder::{RecvBuffer, RecvKind, RecvSpec, TargetEvent};
use crate::types::{InitiatorId, LocalBuf, MatchBits, MemoryKey, RegionAddr};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

type Ep = Endpoint<Vec<u8>>;

fn addr(ri: u16) -> RegionAddr {
    RegionAddr {
        job: JobId::new(7).unwrap(),
        pid: PidOnFep::new(3).unwrap(),
        ri: ResourceIndex::new(ri).unwrap(),
    }
}

/// Moves every datagram between the two until both are quiet; `drop_nth`
/// loses the n-th datagram from A (to exercise recovery). Returns the time.
fn pump(a: &mut Ep, b: &mut Ep, now: Instant, drop_nth: Option<usize>) -> Instant {
    pump_sized(a, b, now, drop_nth, 16 * 1024)
}

/// [`pump`] with transmit buffers of exactly `buf_len` bytes (what a
/// datapath lends: PDS header + `max_ses_len`).
fn pump_sized(
    a: &mut Ep,
    b: &mut Ep,
    now: Instant,
    drop_nth: Option<usize>,
    buf_len: usize,
) -> Instant {
    pump_tapped(a, b, now, drop_nth, buf_len, &mut |_| {})
}

/// [`pump_sized`] that also shows `tap` every datagram A transmits.
fn pump_tapped(
    a: &mut Ep,
    b: &mut Ep,
    mut now: Instant,
    mut drop_nth: Option<usize>,
    buf_len: usize,
    tap: &mut dyn FnMut(&[u8]),
) -> Instant {
    let mut buf = vec![0u8; buf_len];
    let mut sent_by_a = 0;
    for _ in 0..100_000 {
        let mut moved = false;
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            moved = true;
            sent_by_a += 1;
            tap(&buf[..t.len]);
            if drop_nth == Some(sent_by_a) {
                drop_nth = None;
                continue;
            }
            let meta = RxMeta {
                src: A,
                ev: t.ev,
                ecn: Ecn::Ect0,
                trimmed: None,
                nominal_size: t.len as u32 + 48,
                sdi: None,
                arrived: None,
            };
            let bytes = buf[..t.len].to_vec();
            b.handle_datagram(now, &meta, &bytes);
        }
        while let Some(t) = b.poll_transmit(now, &mut buf) {
            moved = true;
            let meta = RxMeta {
                src: B,
                ev: t.ev,
                ecn: Ecn::Ect0,
                trimmed: None,
                nominal_size: t.len as u32 + 48,
                sdi: None,
                arrived: None,
            };
            let bytes = buf[..t.len].to_vec();
            a.handle_datagram(now, &meta, &bytes);
        }
        if !moved {
            // Only completions matter here: stop once nothing is in flight
            // and no timer other than idle close is pending.
            if a.in_flight() == 0 {
                return now;
            }
            let next = [a.poll_timeout(), b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let Some(next) = next else { return now };
            now = next.max(now);
            a.handle_timeout(now);
            b.handle_timeout(now);
        }
    }
    panic!(
        "did not settle: a={:?} b={:?} in_flight={}",
        a.pds().counters(),
        b.pds().counters(),
        a.in_flight()
    );
}

fn setup(len: usize) -> (Ep, Ep, Registration, crate::types::LocalRegion) {
    setup_with(len, &EndpointConfig::default())
}

fn setup_with(
    len: usize,
    cfg: &EndpointConfig,
) -> (Ep, Ep, Registration, crate::types::LocalRegion) {
    let mut a = Ep::new(cfg.clone(), 1);
    let mut b = Ep::new(cfg.clone(), 2);
    let reg = b
        .register(
            RegionSpec {
                addr: addr(12),
                key: MemoryKey(0xabc),
                access: Access::REMOTE_WRITE.union(Access::REMOTE_READ),
                base: 0,
            },
            vec![0u8; len],
        )
        .unwrap();
    let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    let local = a.register_local(data);
    (a, b, reg, local)
}

fn remote(reg: &Registration, offset: u64) -> RemoteAddr {
    RemoteAddr {
        region: RegionAddr {
            job: reg.job,
            pid: reg.pid,
            ri: reg.ri,
        },
        generation: reg.generation,
        key: reg.key,
        offset,
    }
}

fn completions(a: &mut Ep) -> Vec<OpCompletion> {
    core::iter::from_fn(|| a.poll_completion()).collect()
}

#[test]
fn write_lands_byte_exact_and_completes_once() {
    let (mut a, mut b, reg, local) = setup(100_000);
    let op = a
        .submit(
            Instant::ZERO,
            B,
            Operation::Write {
                dst: remote(&reg, 1000),
                src: LocalBuf {
                    region: local,
                    offset: 10,
                },
                len: 50_000,
                header_data: Some(42),
            },
        )
        .unwrap();
    pump(&mut a, &mut b, Instant::ZERO, None);
    let c = completions(&mut a);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].op, op);
    assert_eq!(c[0].status, Ok(()));
    assert_eq!(c[0].modified_length, 50_000);
    let target = b.memory().get(addr(12)).unwrap().memory();
    let src = a.local(local).unwrap();
    assert_eq!(&target[1000..51_000], &src[10..50_010]);
    assert!(
        target[..1000].iter().all(|b| *b == 0),
        "nothing before the range"
    );
    assert!(target[51_000..].iter().all(|b| *b == 0), "nothing after it");
    assert!(matches!(b.poll_event(), Some(TargetEvent::WriteWithData(w)) if w.header_data == 42));
}

#[test]
fn write_survives_a_lost_packet() {
    let (mut a, mut b, reg, local) = setup(40_000);
    a.submit(
        Instant::ZERO,
        B,
        Operation::Write {
            dst: remote(&reg, 0),
            src: LocalBuf {
                region: local,
                offset: 0,
            },
            len: 40_000,
            header_data: None,
        },
    )
    .unwrap();
    pump(&mut a, &mut b, Instant::ZERO, Some(3));
    let c = completions(&mut a);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].status, Ok(()));
    assert_eq!(
        b.memory().get(addr(12)).unwrap().memory()[..],
        a.local(local).unwrap()[..]
    );
    assert!(a.pds().counters().tx_retransmits > 0);
}

#[test]
fn read_responses_fit_the_packet_size_of_a_1500_byte_mtu() {
    // 1500 - IPv4 - UDP = 1472 B of UET; minus a 16-byte PDS header.
    let mut cfg = EndpointConfig::default();
    cfg.pds.max_ses_len = 1456;
    let (mut a, mut b, reg, _) = setup_with(30_000, &cfg);
    let d = a.register_local(vec![0u8; 30_000]);
    let op = a
        .submit(
            Instant::ZERO,
            B,
            Operation::Read {
                src: remote(&reg, 0),
                dst: LocalBuf {
                    region: d,
                    offset: 0,
                },
                len: 30_000,
            },
        )
        .unwrap();
    pump_sized(&mut a, &mut b, Instant::ZERO, None, 1472);
    let c = completions(&mut a);
    assert_eq!(c.len(), 1, "{:?}", b.pds().counters());
    assert_eq!(c[0].op, op);
    assert_eq!(c[0].status, Ok(()));
    assert_eq!(c[0].modified_length, 30_000);
}

#[test]
fn read_returns_the_remote_bytes() {
    let (mut a, mut b, reg, _) = setup(30_000);
    // Fill B's region by a write first, then read it back into a fresh buffer.
    let src: Vec<u8> = (0..30_000).map(|i| (i % 251) as u8).collect();
    let s = a.register_local(src.clone());
    let d = a.register_local(vec![0u8; 30_000]);
    a.submit(
        Instant::ZERO,
        B,
        Operation::Write {
            dst: remote(&reg, 0),
            src: LocalBuf {
                region: s,
                offset: 0,
            },
            len: 30_000,
            header_data: None,
        },
    )
    .unwrap();
    let now = pump(&mut a, &mut b, Instant::ZERO, None);
    assert_eq!(completions(&mut a).len(), 1);
    let op = a
        .submit(
            now,
            B,
            Operation::Read {
                src: remote(&reg, 0),
                dst: LocalBuf {
                    region: d,
                    offset: 0,
                },
                len: 30_000,
            },
        )
        .unwrap();
    pump(&mut a, &mut b, now, None);
    let c = completions(&mut a);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].op, op);
    assert_eq!(c[0].status, Ok(()));
    assert_eq!(a.local(d).unwrap(), &src);
}

#[test]
fn bad_key_fails_with_bad_mkey_and_writes_nothing() {
    let (mut a, mut b, reg, local) = setup(10_000);
    let mut r = remote(&reg, 0);
    r.key = MemoryKey(0xdead);
    a.submit(
        Instant::ZERO,
        B,
        Operation::Write {
            dst: r,
            src: LocalBuf {
                region: local,
                offset: 0,
            },
            len: 9_000,
            header_data: None,
        },
    )
    .unwrap();
    pump(&mut a, &mut b, Instant::ZERO, None);
    let c = completions(&mut a);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].status, Err(OpError::Remote(ReturnCode::BadMkey)));
    assert!(
        b.memory()
            .get(addr(12))
            .unwrap()
            .memory()
            .iter()
            .all(|x| *x == 0)
    );
}

#[test]
fn tagged_send_matches_a_posted_receive() {
    let (mut a, mut b, _, local) = setup(8_000);
    b.register(
        RegionSpec {
            addr: addr(20),
            key: MemoryKey(1),
            access: Access::RECV,
            base: 0,
        },
        vec![0u8; 8_000],
    )
    .unwrap();
    b.post_recv(RecvSpec {
        job: JobId::new(7).unwrap(),
        pid: PidOnFep::new(3).unwrap(),
        buffer: RecvBuffer {
            ri: ResourceIndex::new(20).unwrap(),
            offset: 0,
            len: 8_000,
        },
        kind: RecvKind::Tagged {
            match_bits: MatchBits(0x1200),
            ignore_bits: MatchBits(0x00ff),
        },
        from: None,
    })
    .unwrap();
    a.submit(
        Instant::ZERO,
        B,
        Operation::TaggedSend {
            dst: addr(20),
            src: LocalBuf {
                region: local,
                offset: 0,
            },
            len: 6_000,
            match_bits: MatchBits(0x1234),
            header_data: Some(9),
        },
    )
    .unwrap();
    pump(&mut a, &mut b, Instant::ZERO, None);
    assert_eq!(completions(&mut a)[0].status, Ok(()));
    let Some(TargetEvent::Recv(ev)) = b.poll_event() else {
        panic!("no receive")
    };
    assert_eq!(ev.completion.modified_length, 6_000);
    assert_eq!(ev.match_bits, Some(MatchBits(0x1234)));
    assert_eq!(ev.list, ListKind::Expected);
    assert_eq!(
        &b.memory().get(addr(20)).unwrap().memory()[..6_000],
        &a.local(local).unwrap()[..6_000]
    );
}

#[test]
fn unreachable_target_fails_every_operation() {
    let (mut a, _b, reg, local) = setup(5_000);
    for _ in 0..3 {
        a.submit(
            Instant::ZERO,
            B,
            Operation::Write {
                dst: remote(&reg, 0),
                src: LocalBuf {
                    region: local,
                    offset: 0,
                },
                len: 5_000,
                header_data: None,
            },
        )
        .unwrap();
    }
    let mut buf = vec![0u8; 16 * 1024];
    let mut now = Instant::ZERO;
    while a.in_flight() > 0 {
        while a.poll_transmit(now, &mut buf).is_some() {}
        now = a.poll_timeout().expect("a timer while work is pending");
        a.handle_timeout(now);
    }
    let c = completions(&mut a);
    assert_eq!(c.len(), 3);
    assert!(
        c.iter()
            .all(|c| matches!(c.status, Err(OpError::Transport(_))))
    );
}

/// A RUDI request carrying a write (here: with a wrong key) is refused
/// with a NACK naming its packet ID, never answered with a RUDI response
/// that an initiator would read as done; nothing is placed.
#[test]
fn a_rudi_write_is_refused_not_acknowledged() {
    use uet_wire::pds::{NackCode, NackTarget, PdsRepr, PdsRudiRepr, RudiKind};
    let (mut a, mut b, reg, local) = setup(10_000);
    let mut r = remote(&reg, 0);
    r.key = MemoryKey(0xdead);
    a.submit(
        Instant::ZERO,
        B,
        Operation::Write {
            dst: r,
            src: LocalBuf {
                region: local,
                offset: 0,
            },
            len: 100,
            header_data: None,
        },
    )
    .unwrap();
    // A's request, its PDS header swapped for RUDI's (same SES bytes).
    let mut buf = vec![0u8; 16 * 1024];
    let t = a.poll_transmit(Instant::ZERO, &mut buf).unwrap();
    let PdsRepr::Request(req) = PdsRepr::parse(&buf[..t.len]).unwrap() else {
        panic!("a request")
    };
    let rudi = PdsRepr::Rudi(PdsRudiRepr {
        kind: RudiKind::Request,
        next_hdr: req.next_hdr,
        retx: false,
        pkt_id: 77,
    });
    let mut frame = vec![0u8; rudi.buffer_len()];
    rudi.emit(&mut frame);
    frame.extend_from_slice(&buf[PdsRepr::Request(req).buffer_len()..t.len]);
    let meta = RxMeta {
        src: A,
        ev: t.ev,
        ecn: Ecn::Ect0,
        trimmed: None,
        nominal_size: frame.len() as u32 + 48,
        sdi: None,
        arrived: None,
    };
    b.handle_datagram(Instant::ZERO, &meta, &frame);
    let t = b.poll_transmit(Instant::ZERO, &mut buf).unwrap();
    let PdsRepr::Nack(n) = PdsRepr::parse(&buf[..t.len]).unwrap() else {
        panic!("a NACK, not a RUDI response")
    };
    assert_eq!(n.target, NackTarget::PktId(77));
    assert_eq!(n.code, NackCode::UnexpEvent);
    assert_eq!(b.counters().refused, 1);
    assert!(b.poll_transmit(Instant::ZERO, &mut buf).is_none());
    assert!(
        b.memory()
            .get(addr(12))
            .unwrap()
            .memory()
            .iter()
            .all(|x| *x == 0)
    );
}

#[test]
fn every_request_carries_the_configured_initiator() {
    let cfg = EndpointConfig {
        initiator: InitiatorId(0xabc),
        ..EndpointConfig::default()
    };
    let (mut a, mut b, reg, local) = setup_with(20_000, &cfg);
    b.register(
        RegionSpec {
            addr: addr(20),
            key: MemoryKey(1),
            access: Access::RECV,
            base: 0,
        },
        vec![0u8; 20_000],
    )
    .unwrap();
    let d = a.register_local(vec![0u8; 100]);
    let from = LocalBuf::new(local, 0);
    let ops = [
        Operation::Write {
            dst: remote(&reg, 0),
            src: from,
            len: 10_000,
            header_data: None,
        },
        Operation::Read {
            src: remote(&reg, 0),
            dst: LocalBuf::new(d, 0),
            len: 100,
        },
        // Unexpected (no receive posted yet), then taken by a receive.
        Operation::Send {
            dst: addr(20),
            src: from,
            len: 9_000,
            header_data: None,
        },
    ];
    for op in ops {
        a.submit(Instant::ZERO, B, op).unwrap();
    }
    let mut requests = 0;
    pump_tapped(
        &mut a,
        &mut b,
        Instant::ZERO,
        None,
        16 * 1024,
        &mut |bytes| {
            let p = uet_wire::frame::parse_uet(bytes, false).unwrap();
            if let Some(uet_wire::ses::SesRepr::Standard(r)) = p.ses {
                assert_eq!(r.header().initiator, 0xabc, "{r:?}");
                requests += 1;
            }
        },
    );
    // 3 write packets, 1 read request, 3 send packets (retransmissions
    // would only add more).
    assert!(requests >= 7, "{requests} requests seen");
    let done = completions(&mut a);
    assert_eq!(done.len(), 3);
    assert!(done.iter().all(|c| c.status.is_ok()), "{done:?}");
    b.post_recv(RecvSpec {
        job: JobId::new(7).unwrap(),
        pid: PidOnFep::new(3).unwrap(),
        buffer: RecvBuffer {
            ri: ResourceIndex::new(20).unwrap(),
            offset: 0,
            len: 20_000,
        },
        kind: RecvKind::Untagged,
        from: None,
    })
    .unwrap();
    let Some(TargetEvent::Recv(ev)) = b.poll_event() else {
        panic!("no receive")
    };
    assert_eq!(ev.initiator, InitiatorId(0xabc));
    assert_eq!(ev.completion.modified_length, 9_000);
}

#[test]
fn a_peeked_and_claimed_send_is_delivered_by_post_claimed() {
    let cfg = EndpointConfig {
        initiator: InitiatorId(9),
        ..EndpointConfig::default()
    };
    let (mut a, mut b, _, local) = setup_with(20_000, &cfg);
    b.register(
        RegionSpec {
            addr: addr(20),
            key: MemoryKey(1),
            access: Access::RECV,
            base: 0,
        },
        vec![0u8; 20_000],
    )
    .unwrap();
    a.submit(
        Instant::ZERO,
        B,
        Operation::TaggedSend {
            dst: addr(20),
            src: LocalBuf::new(local, 0),
            len: 10_000,
            match_bits: MatchBits(0x42),
            header_data: Some(7),
        },
    )
    .unwrap();
    pump(&mut a, &mut b, Instant::ZERO, None);
    assert_eq!(completions(&mut a)[0].status, Ok(()));
    let (job, pid) = (JobId::new(7).unwrap(), PidOnFep::new(3).unwrap());
    let any_tag = RecvKind::Tagged {
        match_bits: MatchBits(0),
        ignore_bits: MatchBits(u64::MAX),
    };
    let u = b.peek_unexpected(job, pid, any_tag).unwrap();
    assert_eq!(
        (u.initiator, u.message_len, u.match_bits, u.header_data),
        (InitiatorId(9), 10_000, Some(MatchBits(0x42)), Some(7))
    );
    assert!(b.claim_unexpected(u.id));
    assert_eq!(b.peek_unexpected(job, pid, any_tag), None);
    let spec = RecvSpec {
        job,
        pid,
        buffer: RecvBuffer {
            ri: ResourceIndex::new(20).unwrap(),
            offset: 100,
            len: 10_000,
        },
        kind: any_tag,
        from: None,
    };
    let r = b.post_claimed(u.id, spec).unwrap();
    let Some(TargetEvent::Recv(ev)) = b.poll_event() else {
        panic!("no receive")
    };
    assert_eq!((ev.recv, ev.completion.modified_length), (r, 10_000));
    assert_eq!(
        &b.memory().get(addr(20)).unwrap().memory()[100..10_100],
        &a.local(local).unwrap()[..10_000]
    );
    assert!(!b.discard_claimed(u.id));
}

/// Feeds every datagram `a` transmits back into `a`, from its own address,
/// until it is quiet and nothing is in flight, losing the datagrams whose
/// numbers (from 1) are in `lose`. Returns the time.
fn pump_self(a: &mut Ep, me: IpAddr, mut now: Instant, lose: &[usize]) -> Instant {
    let mut buf = vec![0u8; 16 * 1024];
    let mut sent = 0;
    for _ in 0..100_000 {
        let mut moved = false;
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            moved = true;
            sent += 1;
            if lose.contains(&sent) {
                continue;
            }
            let meta = RxMeta {
                src: me,
                ev: t.ev,
                ecn: Ecn::Ect0,
                trimmed: None,
                nominal_size: t.len as u32 + 48,
                sdi: None,
                arrived: None,
            };
            let bytes = buf[..t.len].to_vec();
            a.handle_datagram(now, &meta, &bytes);
        }
        if !moved {
            if a.in_flight() == 0 {
                return now;
            }
            let Some(next) = a.poll_timeout() else {
                return now;
            };
            now = next.max(now);
            a.handle_timeout(now);
        }
    }
    panic!(
        "did not settle: {:?} in_flight={}",
        a.pds().counters(),
        a.in_flight()
    );
}

#[test]
fn an_endpoint_writes_and_sends_to_itself() {
    let mut a = Ep::new(EndpointConfig::default(), 1);
    let reg = a
        .register(
            RegionSpec {
                addr: addr(12),
                key: MemoryKey(0xabc),
                access: Access::REMOTE_WRITE | Access::REMOTE_READ,
                base: 0,
            },
            vec![0u8; 50_000],
        )
        .unwrap();
    a.register(
        RegionSpec {
            addr: addr(20),
            key: MemoryKey(1),
            access: Access::RECV,
            base: 0,
        },
        vec![0u8; 20_000],
    )
    .unwrap();
    let data: Vec<u8> = (0..50_000).map(|i| (i * 13 + 5) as u8).collect();
    let local = a.register_local(data.clone());
    let back = a.register_local(vec![0u8; 1_000]);
    let recv = a
        .post_recv(RecvSpec {
            job: JobId::new(7).unwrap(),
            pid: PidOnFep::new(3).unwrap(),
            buffer: RecvBuffer {
                ri: ResourceIndex::new(20).unwrap(),
                offset: 0,
                len: 20_000,
            },
            kind: RecvKind::Untagged,
            from: None,
        })
        .unwrap();
    let write = a
        .submit(
            Instant::ZERO,
            A,
            Operation::Write {
                dst: remote(&reg, 0),
                src: LocalBuf::new(local, 0),
                len: 50_000,
                header_data: None,
            },
        )
        .unwrap();
    let send = a
        .submit(
            Instant::ZERO,
            A,
            Operation::Send {
                dst: addr(20),
                src: LocalBuf::new(local, 1_000),
                len: 15_000,
                header_data: Some(3),
            },
        )
        .unwrap();
    let now = pump_self(&mut a, A, Instant::ZERO, &[]);
    let mut done = completions(&mut a);
    done.sort_by_key(|c| c.op);
    assert_eq!(done.len(), 2, "{done:?} {:?}", a.pds().counters());
    assert_eq!((done[0].op, done[0].status), (write, Ok(())));
    assert_eq!((done[1].op, done[1].status), (send, Ok(())));
    assert_eq!(a.memory().get(addr(12)).unwrap().memory(), &data[..]);
    let Some(TargetEvent::Recv(ev)) = a.poll_event() else {
        panic!("no receive")
    };
    assert_eq!((ev.recv, ev.completion.modified_length), (recv, 15_000));
    assert_eq!(
        &a.memory().get(addr(20)).unwrap().memory()[..15_000],
        &data[1_000..16_000]
    );
    // A read of its own memory as well.
    let read = a
        .submit(
            now,
            A,
            Operation::Read {
                src: remote(&reg, 2_000),
                dst: LocalBuf::new(back, 0),
                len: 1_000,
            },
        )
        .unwrap();
    pump_self(&mut a, A, now, &[]);
    let done = completions(&mut a);
    assert_eq!(done.len(), 1);
    assert_eq!((done[0].op, done[0].status), (read, Ok(())));
    assert_eq!(a.local(back).unwrap(), &data[2_000..3_000]);
    // Nothing was lost or refused on the way: one PDC each way (the
    // initiator's and the target's, both toward the endpoint's own
    // address), no retransmission, no NACK.
    let c = a.pds().counters();
    assert_eq!(
        (c.pdcs_opened, c.tx_retransmits, c.tx_nacks, c.rx_nacks),
        (2, 0, 0, 0),
        "{c:?}"
    );
    assert_eq!(a.counters().stray, 0);
}

#[test]
fn an_endpoint_writing_to_itself_recovers_lost_datagrams() {
    let mut a = Ep::new(EndpointConfig::default(), 1);
    let reg = a
        .register(
            RegionSpec {
                addr: addr(12),
                key: MemoryKey(0xabc),
                access: Access::REMOTE_WRITE,
                base: 0,
            },
            vec![0u8; 40_000],
        )
        .unwrap();
    let data: Vec<u8> = (0..40_000).map(|i| (i * 11 + 1) as u8).collect();
    let local = a.register_local(data.clone());
    a.submit(
        Instant::ZERO,
        A,
        Operation::Write {
            dst: remote(&reg, 0),
            src: LocalBuf::new(local, 0),
            len: 40_000,
            header_data: None,
        },
    )
    .unwrap();
    // A data packet, and later whatever comes then (an ACK or data).
    pump_self(&mut a, A, Instant::ZERO, &[2, 9, 14]);
    let done = completions(&mut a);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].status, Ok(()));
    assert_eq!(a.memory().get(addr(12)).unwrap().memory(), &data[..]);
    assert!(a.pds().counters().tx_retransmits > 0);
}
