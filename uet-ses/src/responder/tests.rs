//! Target traces: packets in, responses and events out.

use proptest::prelude::*;
use uet_wire::Len14;
use uet_wire::ses::{
    AtomicDatatype, AtomicOpcode, HeaderDataOrOffset, ListKind, Opcode, RequestFlags,
    ResponseOpcode, ReturnCode, SesAtomicExtRepr, SesExtRepr, SesMediumRepr, SesRepr,
    SesResponseRepr, SesSmallRepr, SesStandardRepr, SomFields, StandardRequest,
};

use super::*;
use crate::initiator::{Operation, OutgoingMessage, ReadProgress};
use crate::memory::{Access, RegionSpec, Registration};
use crate::testutil::*;
use crate::types::{InitiatorId, LocalBuf, LocalRegion, MatchBits, MemoryKey};

const RW: Access = Access::REMOTE_WRITE.union(Access::REMOTE_READ);

/// The standard header of packet `i` of `m`, for tampering.
fn header(m: &OutgoingMessage, i: usize) -> SesStandardRepr {
    *m.header(i).unwrap().header()
}

/// Hands a hand-made standard header and payload to the target.
fn deliver_std(
    t: &mut SesTarget<Vec<u8>>,
    from: Source,
    h: SesStandardRepr,
    payload: &[u8],
) -> TargetOutcome {
    let req = SesRepr::Standard(StandardRequest::new(h, None).unwrap());
    t.handle_request(from, &req, payload)
}

fn untouched(t: &SesTarget<Vec<u8>>, reg: &Registration) -> bool {
    region(t, reg.addr()).iter().all(|b| *b == FILL)
}

// ---------------------------------------------------------------------------
// UET_WRITE
// ---------------------------------------------------------------------------

#[test]
fn single_packet_write_places_and_responds() {
    let (mut t, reg) = target(RW, 64);
    let data = pattern(8, 1);
    let m = OutgoingMessage::new(write_op(&reg, 16, 8, None), msg_id(1), 1024).unwrap();
    let [pkt] = &packets(&m, &data)[..] else {
        panic!()
    };
    // UET_WRITE som eom msg=1 off=16 len=8 → RC_OK mod_len=8, guaranteed.
    let out = deliver(&mut t, src(1), pkt);
    let rsp = guaranteed_rsp(&out);
    assert_eq!(
        rsp,
        SesResponseRepr {
            list: ListKind::Expected,
            opcode: ResponseOpcode::Response,
            return_code: ReturnCode::Ok,
            message_id: msg_id(1),
            ri_generation: reg.generation,
            job_id: job(7),
            modified_length: 8,
        }
    );
    let mem = region(&t, reg.addr());
    assert_eq!(&mem[16..24], &data[..]);
    assert!(mem[..16].iter().chain(&mem[24..]).all(|b| *b == FILL));
    // No header data: no event.
    assert_eq!(t.poll_event(), None);
    assert_eq!(m.complete(&rsp), Completion::ok(msg_id(1), 8));
}

#[test]
fn multi_packet_write_completes_on_the_last_byte() {
    let (mut t, reg) = target(RW, 256);
    let data = pattern(100, 3);
    // 44 + 40 per packet: 40, 40, 20 bytes.
    let m = OutgoingMessage::new(write_op(&reg, 0, 100, Some(0xfeed)), msg_id(2), 84).unwrap();
    let p = packets(&m, &data);
    assert_eq!(p.len(), 3);
    // Last packet first, then the middle: nothing to answer yet.
    assert_eq!(deliver(&mut t, src(1), &p[2]), TargetOutcome::Accepted);
    assert_eq!(deliver(&mut t, src(1), &p[1]), TargetOutcome::Accepted);
    assert_eq!(t.inflight_messages(), 1);
    // The same middle packet again (a duplicate the PDS let through): idempotent.
    assert_eq!(deliver(&mut t, src(1), &p[1]), TargetOutcome::Accepted);
    assert_eq!(t.poll_event(), None);
    // The SOM packet completes it.
    let rsp = guaranteed_rsp(&deliver(&mut t, src(1), &p[0]));
    assert_eq!(
        (rsp.return_code, rsp.modified_length),
        (ReturnCode::Ok, 100)
    );
    assert_eq!(&region(&t, reg.addr())[..100], &data[..]);
    assert_eq!(t.inflight_messages(), 0);
    assert_eq!(
        t.poll_event(),
        Some(TargetEvent::WriteWithData(WriteEvent {
            source: src(1),
            message_id: msg_id(2),
            region: reg.addr(),
            offset: 0,
            len: 100,
            header_data: 0xfeed,
        }))
    );
    // A late duplicate after completion places nothing and completes nothing.
    assert_eq!(deliver(&mut t, src(1), &p[1]), TargetOutcome::Duplicate);
    assert_eq!(deliver(&mut t, src(1), &p[0]), TargetOutcome::Duplicate);
    assert_eq!(t.poll_event(), None);
    assert_eq!(t.inflight_messages(), 0);
}

#[test]
fn zero_length_write() {
    let (mut t, reg) = target(RW, 16);
    let m = OutgoingMessage::new(write_op(&reg, 16, 0, Some(7)), msg_id(3), 100).unwrap();
    let p = packets(&m, &[]);
    assert_eq!(p.len(), 1);
    let rsp = guaranteed_rsp(&deliver(&mut t, src(1), &p[0]));
    assert_eq!((rsp.return_code, rsp.modified_length), (ReturnCode::Ok, 0));
    assert!(untouched(&t, &reg));
    assert!(matches!(
        t.poll_event(),
        Some(TargetEvent::WriteWithData(WriteEvent {
            len: 0,
            header_data: 7,
            ..
        }))
    ));
}

/// Every bad-request class, single-packet and as a 3-packet message: the
/// code, every packet answered with it, the region untouched.
#[test]
fn bad_requests_are_refused_with_their_code_and_write_nothing() {
    type Tamper = fn(&mut SesTarget<Vec<u8>>, &Registration, &mut Operation);
    fn dst(op: &mut Operation) -> &mut crate::initiator::RemoteAddr {
        match op {
            Operation::Write { dst, .. } => dst,
            _ => unreachable!(),
        }
    }
    let cases: [(&str, Tamper, ReturnCode); 11] = [
        (
            "unknown job",
            |_, _, op| dst(op).region.job = job(8),
            ReturnCode::BadJobId,
        ),
        (
            "unknown pid",
            |_, _, op| dst(op).region.pid = pid(4),
            ReturnCode::BadPid,
        ),
        (
            "unknown ri",
            |_, _, op| dst(op).region.ri = ri(6),
            ReturnCode::BadIndex,
        ),
        (
            "stale generation",
            |t, reg, _| {
                let mem = t.memory_mut().deregister(reg.addr()).unwrap();
                let again = t
                    .memory_mut()
                    .register(RegionSpec::new(reg.addr(), KEY, RW), mem)
                    .unwrap();
                assert_eq!(again.generation.get(), 1);
            },
            ReturnCode::BadGeneration,
        ),
        (
            "wrong key",
            |_, _, op| dst(op).key = MemoryKey(1),
            ReturnCode::BadMkey,
        ),
        (
            "read-only region",
            |t, reg, op| {
                let mem = t.memory_mut().deregister(reg.addr()).unwrap();
                let spec = RegionSpec::new(reg.addr(), KEY, Access::REMOTE_READ);
                dst(op).generation = t.memory_mut().register(spec, mem).unwrap().generation;
            },
            ReturnCode::PermViolation,
        ),
        (
            "offset beyond the end",
            |_, _, op| dst(op).offset = 250,
            ReturnCode::BadAddr,
        ),
        (
            "offset + len overflows",
            |_, _, op| dst(op).offset = u64::MAX - 50,
            ReturnCode::BadAddr,
        ),
        (
            "longer than the region",
            |_, _, op| {
                if let Operation::Write { len, .. } = op {
                    *len = 300;
                }
            },
            ReturnCode::TooLong,
        ),
        (
            "disabled",
            |t, reg, _| t.memory_mut().disable(reg.addr()).unwrap(),
            ReturnCode::Disabled,
        ),
        (
            "disabled generation",
            |t, reg, _| t.memory_mut().disable_generation(reg.addr()).unwrap(),
            ReturnCode::DisabledGen,
        ),
    ];
    for (what, tamper, want) in cases {
        for max_ses_len in [1024, 44 + 40] {
            let (mut t, reg) = target(RW, 256);
            let mut op = write_op(&reg, 0, 100, None);
            tamper(&mut t, &reg, &mut op);
            let len = op.len() as usize;
            let m = OutgoingMessage::new(op, msg_id(9), max_ses_len).unwrap();
            let p = packets(&m, &pattern(len, 5));
            for pkt in p.iter().rev() {
                let rsp = guaranteed_rsp(&deliver(&mut t, src(1), pkt));
                assert_eq!(rsp.return_code, want, "{what}, {} packets", p.len());
                assert_eq!(rsp.modified_length, 0, "{what}");
            }
            assert!(untouched(&t, &reg), "{what}: region changed");
            assert_eq!(t.inflight_messages(), 0, "{what}: state left behind");
            assert_eq!(t.poll_event(), None);
        }
    }
}

#[test]
fn read_from_a_write_only_region_is_a_perm_violation() {
    let (mut t, reg) = target(Access::REMOTE_WRITE, 64);
    let op = Operation::Read {
        src: remote(&reg, 0),
        dst: LocalBuf::new(LocalRegion(1), 0),
        len: 16,
    };
    let m = OutgoingMessage::new(op, msg_id(4), 1024).unwrap();
    let out = deliver(&mut t, src(1), &packets(&m, &[])[0]);
    let rsp = guaranteed_rsp(&out);
    assert_eq!(rsp.return_code, ReturnCode::PermViolation);
    let mut sink = m.read_sink().unwrap();
    assert_eq!(
        sink.on_response(&rsp),
        ReadProgress::Complete(Completion::err(
            msg_id(4),
            CompletionError::Remote(ReturnCode::PermViolation),
            0
        ))
    );
}

#[test]
fn a_message_failing_midway_keeps_what_it_placed_and_refuses_the_rest() {
    let (mut t, reg) = target(RW, 256);
    let data = pattern(120, 9);
    let m = OutgoingMessage::new(write_op(&reg, 0, 120, None), msg_id(5), 84).unwrap();
    let p = packets(&m, &data);
    assert_eq!(deliver(&mut t, src(1), &p[0]), TargetOutcome::Accepted);
    // The region is disabled between packets.
    t.memory_mut().disable(reg.addr()).unwrap();
    let rsp = guaranteed_rsp(&deliver(&mut t, src(1), &p[1]));
    assert_eq!(rsp.return_code, ReturnCode::Disabled);
    assert_eq!(rsp.modified_length, 40);
    // Re-enabled: the message stays failed; its last packet places nothing.
    t.memory_mut().enable(reg.addr()).unwrap();
    let rsp = guaranteed_rsp(&deliver(&mut t, src(1), &p[2]));
    assert_eq!(rsp.return_code, ReturnCode::Disabled);
    let mem = region(&t, reg.addr());
    assert_eq!(&mem[..40], &data[..40]);
    assert!(mem[40..].iter().all(|b| *b == FILL));
    assert_eq!(t.inflight_messages(), 0);
}

#[test]
fn packet_rules_are_op_violations_and_ie_is_initiator_err() {
    let (mut t, reg) = target(RW, 256);
    let data = pattern(100, 1);
    let m = OutgoingMessage::new(write_op(&reg, 0, 100, None), msg_id(6), 84).unwrap();

    // A non-SOM packet claiming more payload than it carries.
    let h = header(&m, 1);
    assert_eq!(
        rc(&deliver_std(&mut t, src(1), h, &data[..39])),
        ReturnCode::OpViolation
    );
    // The message is failed: its other packets get the same code.
    assert_eq!(
        rc(&deliver_std(&mut t, src(1), header(&m, 2), &data[80..])),
        ReturnCode::OpViolation
    );

    // A packet reaching past request_length.
    let mut h = header(&m, 1);
    h.som = SomFields::Continuation {
        payload_length: Len14::new(40).unwrap(),
        message_offset: 70,
    };
    h.message_id = msg_id(7);
    assert_eq!(
        rc(&deliver_std(&mut t, src(1), h, &data[..40])),
        ReturnCode::OpViolation
    );

    // EOM on a packet that does not end the message.
    let mut h = header(&m, 1);
    h.flags.eom = true;
    h.message_id = msg_id(8);
    assert_eq!(
        rc(&deliver_std(&mut t, src(1), h, &data[..40])),
        ReturnCode::OpViolation
    );

    // A later packet disagreeing with the first on request_length.
    let mut h0 = header(&m, 0);
    h0.message_id = msg_id(10);
    let mut h1 = header(&m, 1);
    h1.message_id = msg_id(10);
    h1.request_length = 99;
    assert_eq!(
        deliver_std(&mut t, src(1), h0, &data[..40]),
        TargetOutcome::Accepted
    );
    assert_eq!(
        rc(&deliver_std(&mut t, src(1), h1, &data[..40])),
        ReturnCode::OpViolation
    );

    // The initiator-error flag.
    let mut h = header(&m, 0);
    h.message_id = msg_id(11);
    h.flags.ie = true;
    let rsp = guaranteed_rsp(&deliver_std(&mut t, src(1), h, &data[..40]));
    assert_eq!(rsp.return_code, ReturnCode::InitiatorErr);
    assert_eq!(rsp.message_id, msg_id(11));

    // Only message 10's first packet was placed.
    let mem = region(&t, reg.addr());
    assert_eq!(&mem[..40], &data[..40]);
    assert!(mem[40..].iter().all(|b| *b == FILL));
}

#[test]
fn form_and_opcode_combinations() {
    let (mut t, reg) = target(RW | Access::RECV, 64);
    let small = |opcode, som, eom| SesSmallRepr {
        opcode,
        flags: RequestFlags {
            eom,
            rel: true,
            ..RequestFlags::default()
        },
        som,
        request_length: Len14::new(4).unwrap(),
        ri_generation: reg.generation,
        job_id: reg.job,
        pid_on_fep: reg.pid,
        resource_index: reg.ri,
        buffer_offset: 0,
    };
    // A send in the small (non-matching) form.
    let out = t.handle_request(
        src(1),
        &small(Opcode::Send, true, true).into(),
        &[1, 2, 3, 4],
    );
    assert_eq!(rc(&out), ReturnCode::OpViolation);
    // A small write that is not a whole message.
    let out = t.handle_request(src(1), &small(Opcode::Write, true, false).into(), &[1, 2]);
    assert_eq!(rc(&out), ReturnCode::OpViolation);
    // An atomic in the medium form.
    let medium = SesMediumRepr {
        opcode: Opcode::Atomic,
        flags: RequestFlags {
            eom: true,
            ..RequestFlags::default()
        },
        som: true,
        request_length: Len14::new(8).unwrap(),
        ri_generation: reg.generation,
        job_id: reg.job,
        pid_on_fep: reg.pid,
        resource_index: reg.ri,
        data_or_offset: HeaderDataOrOffset::BufferOffset(0),
        initiator: 0,
        memory_key: KEY.0,
    };
    assert_eq!(
        rc(&t.handle_request(src(1), &medium.into(), &[0; 8])),
        ReturnCode::OpViolation
    );
    // A datagram send spread over packets.
    let m = OutgoingMessage::new(write_op(&reg, 0, 8, None), msg_id(1), 100).unwrap();
    let mut h = header(&m, 0);
    h.opcode = Opcode::DatagramSend;
    h.flags.eom = false;
    assert_eq!(
        rc(&deliver_std(&mut t, src(1), h, &[0; 4])),
        ReturnCode::OpViolation
    );
    assert!(untouched(&t, &reg));
}

#[test]
fn unimplemented_opcodes_are_unsupported() {
    let (mut t, reg) = target(RW | Access::ATOMIC, 64);
    let m = OutgoingMessage::new(write_op(&reg, 0, 8, None), msg_id(1), 100).unwrap();
    for opcode in [
        Opcode::DeferrableSend,
        Opcode::DeferrableTsend,
        Opcode::DeferrableRtr,
        Opcode::MsgError,
        Opcode::Reserved(0x20),
        Opcode::Vendor(0x31),
    ] {
        let mut h = header(&m, 0);
        h.opcode = opcode;
        let rsp = guaranteed_rsp(&deliver_std(&mut t, src(1), h, &[0; 8]));
        assert_eq!(rsp.return_code, ReturnCode::UnsupportedOp, "{opcode}");
    }
    let mut h = header(&m, 0);
    h.opcode = Opcode::FetchingAtomic;
    let ext = SesExtRepr::Atomic(SesAtomicExtRepr {
        opcode: AtomicOpcode::Sum,
        datatype: AtomicDatatype::Uint64,
        cacheable: false,
        cpu_coherent: false,
    });
    let req = SesRepr::Standard(StandardRequest::new(h, Some(ext)).unwrap());
    assert_eq!(
        rc(&t.handle_request(src(1), &req, &[0; 8])),
        ReturnCode::UnsupportedOp
    );
    assert!(untouched(&t, &reg));
}

#[test]
fn no_op_and_responses() {
    let (mut t, reg) = target(RW, 64);
    let m = OutgoingMessage::new(write_op(&reg, 0, 0, None), msg_id(1), 100).unwrap();
    let mut h = header(&m, 0);
    h.opcode = Opcode::NoOp;
    let r = response(&deliver_std(&mut t, src(1), h, &[]));
    assert!(!r.guaranteed);
    assert_eq!(r.header.return_code, ReturnCode::Ok);
    let rsp = SesRepr::Response(r.header);
    assert_eq!(
        t.handle_request(src(1), &rsp, &[]),
        TargetOutcome::NotARequest
    );
}

#[test]
fn small_requests_reach_only_unkeyed_regions() {
    let (mut t, reg) = target(RW, 32);
    let keyless = t
        .memory_mut()
        .register(
            RegionSpec::new(addr(6), KEY, Access::REMOTE_WRITE | Access::UNKEYED),
            vec![FILL; 32],
        )
        .unwrap();
    let small = |reg: &Registration| -> SesRepr {
        SesSmallRepr {
            opcode: Opcode::Write,
            flags: RequestFlags {
                eom: true,
                rel: true,
                ..RequestFlags::default()
            },
            som: true,
            request_length: Len14::new(4).unwrap(),
            ri_generation: reg.generation,
            job_id: reg.job,
            pid_on_fep: reg.pid,
            resource_index: reg.ri,
            buffer_offset: 2,
        }
        .into()
    };
    let out = t.handle_request(src(1), &small(&reg), &[1, 2, 3, 4]);
    assert_eq!(rc(&out), ReturnCode::BadMkey);
    assert!(untouched(&t, &reg));
    let out = t.handle_request(src(1), &small(&keyless), &[1, 2, 3, 4, 0xff]);
    let rsp = guaranteed_rsp(&out);
    // Small requests carry no message ID: the response says 0.
    assert_eq!((rsp.return_code, rsp.message_id.get()), (ReturnCode::Ok, 0));
    assert_eq!(
        &region(&t, keyless.addr())[..8],
        &[FILL, FILL, 1, 2, 3, 4, FILL, FILL]
    );
}

#[test]
fn absolute_addressing_goes_through_the_base() {
    let mut t: SesTarget<Vec<u8>> = SesTarget::default();
    let reg = t
        .memory_mut()
        .register(
            RegionSpec::new(addr(5), KEY, RW).with_base(0x10_0000),
            vec![FILL; 32],
        )
        .unwrap();
    let m = OutgoingMessage::new(write_op(&reg, 0x10_0008, 4, None), msg_id(1), 100).unwrap();
    let mut h = header(&m, 0);
    h.flags.rel = false;
    assert_eq!(
        rc(&deliver_std(&mut t, src(1), h, &[1, 2, 3, 4])),
        ReturnCode::Ok
    );
    assert_eq!(&region(&t, reg.addr())[8..12], &[1, 2, 3, 4]);
    // The same buffer_offset read relative is far beyond the region.
    let mut h = header(&m, 0);
    h.message_id = msg_id(2);
    assert_eq!(
        rc(&deliver_std(&mut t, src(1), h, &[1, 2, 3, 4])),
        ReturnCode::BadAddr
    );
}

#[test]
fn too_many_partial_messages_is_no_resource() {
    let mut t: SesTarget<Vec<u8>> = SesTarget::new(TargetConfig {
        max_inflight_messages: 2,
        ..TargetConfig::default()
    });
    let reg = t
        .memory_mut()
        .register(RegionSpec::new(addr(5), KEY, RW), vec![FILL; 64])
        .unwrap();
    let data = pattern(60, 0);
    let msgs: Vec<_> = (1..=3)
        .map(|id| {
            let m = OutgoingMessage::new(write_op(&reg, 0, 60, None), msg_id(id), 74).unwrap();
            packets(&m, &data)
        })
        .collect();
    assert_eq!(
        deliver(&mut t, src(1), &msgs[0][0]),
        TargetOutcome::Accepted
    );
    assert_eq!(
        deliver(&mut t, src(1), &msgs[1][0]),
        TargetOutcome::Accepted
    );
    assert_eq!(
        deliver(&mut t, src(1), &msgs[2][0]),
        TargetOutcome::NoResource
    );
    // Single-packet messages need no tracking and still go through.
    let one = OutgoingMessage::new(write_op(&reg, 0, 4, None), msg_id(4), 100).unwrap();
    assert_eq!(
        rc(&deliver(&mut t, src(1), &packets(&one, &data)[0])),
        ReturnCode::Ok
    );
    // Finishing message 1 frees a slot for message 3.
    assert_eq!(rc(&deliver(&mut t, src(1), &msgs[0][1])), ReturnCode::Ok);
    assert_eq!(
        deliver(&mut t, src(1), &msgs[2][0]),
        TargetOutcome::Accepted
    );
    // Closing the PDC drops what its peer left half-sent.
    assert_eq!(t.forget_source(src(1)), 2);
    assert_eq!(t.inflight_messages(), 0);
}

#[test]
fn scattered_packets_cannot_grow_state_without_bound() {
    let (mut t, reg) = target(RW, 1 << 16);
    let len = 2 * MAX_RANGES + 8;
    let m = OutgoingMessage::new(write_op(&reg, 0, len as u32, None), msg_id(1), 45).unwrap();
    let data = pattern(len, 0);
    // Every other 1-byte packet: each one opens a new hole.
    let mut last = TargetOutcome::Accepted;
    let mut sent = 0;
    for i in (1..m.packet_count()).step_by(2) {
        let mut buf = [0u8; 45];
        m.write_packet(i, &data[..], &mut buf).unwrap();
        last = deliver(&mut t, src(1), &buf);
        sent += 1;
        if last != TargetOutcome::Accepted {
            break;
        }
    }
    assert_eq!(sent, MAX_RANGES + 1);
    assert_eq!(rc(&last), ReturnCode::OpViolation);
}

#[test]
fn the_default_target_holds_boxed_memory_and_is_send() {
    fn is_send<T: Send>(_: &T) {}
    let mut t: SesTarget = SesTarget::default();
    is_send(&t);
    let reg = t
        .memory_mut()
        .register(RegionSpec::new(addr(5), KEY, RW), Box::new(vec![0u8; 8]))
        .unwrap();
    let m = OutgoingMessage::new(write_op(&reg, 2, 3, None), msg_id(1), 100).unwrap();
    let pkt = &packets(&m, &[1, 2, 3])[0];
    let repr = SesRepr::parse(uet_wire::pds::NextHeader::RequestStd, pkt)
        .unwrap()
        .unwrap();
    let out = t.handle_request(src(1), &repr, &pkt[44..]);
    assert_eq!(rc(&out), ReturnCode::Ok);
    let mut back = [0u8; 8];
    t.memory()
        .get(reg.addr())
        .unwrap()
        .memory()
        .read_at(0, &mut back);
    assert_eq!(back, [0, 0, 1, 2, 3, 0, 0, 0]);
}

// ---------------------------------------------------------------------------
// Sends
// ---------------------------------------------------------------------------

/// A receive of `len` bytes at `offset` in region (7, 3, 5).
fn recv_spec(offset: u64, len: u64, kind: RecvKind) -> RecvSpec {
    RecvSpec {
        job: job(7),
        pid: pid(3),
        buffer: RecvBuffer {
            ri: ri(5),
            offset,
            len,
        },
        kind,
        from: None,
    }
}

fn tagged(bits: u64, ignore: u64) -> RecvKind {
    RecvKind::Tagged {
        match_bits: MatchBits(bits),
        ignore_bits: MatchBits(ignore),
    }
}

fn send_op(len: u32, tag: Option<u64>, header_data: Option<u64>) -> Operation {
    let dst = addr(0);
    let src = LocalBuf::new(LocalRegion(0), 0);
    match tag {
        None => Operation::Send {
            dst,
            src,
            len,
            header_data,
        },
        Some(bits) => Operation::TaggedSend {
            dst,
            src,
            len,
            match_bits: MatchBits(bits),
            header_data,
        },
    }
}

/// Sends a message of `data` in packets of `max_ses_len`; returns the last
/// outcome.
fn send(
    t: &mut SesTarget<Vec<u8>>,
    id: u16,
    tag: Option<u64>,
    data: &[u8],
    max_ses_len: usize,
) -> TargetOutcome {
    let m = OutgoingMessage::new(
        send_op(data.len() as u32, tag, Some(u64::from(id))),
        msg_id(id),
        max_ses_len,
    )
    .unwrap();
    let mut last = TargetOutcome::Accepted;
    for p in packets(&m, data) {
        last = deliver(t, src(1), &p);
    }
    last
}

fn recv_event(t: &mut SesTarget<Vec<u8>>) -> RecvEvent {
    match t.poll_event() {
        Some(TargetEvent::Recv(e)) => e,
        other => panic!("expected a receive event, got {other:?}"),
    }
}

#[test]
fn tagged_matching_honours_ignore_bits() {
    let (mut t, _) = target(Access::RECV, 256);
    let exact = t.post_recv(recv_spec(0, 16, tagged(0xab00, 0))).unwrap();
    let low_ignored = t
        .post_recv(recv_spec(16, 16, tagged(0xcd00, 0xff)))
        .unwrap();
    let untagged = t.post_recv(recv_spec(32, 16, RecvKind::Untagged)).unwrap();

    // 0xcd42 differs from 0xcd00 only in ignored bits: the second receive.
    let out = send(&mut t, 1, Some(0xcd42), b"tagged-1", 1024);
    let rsp = guaranteed_rsp(&out);
    assert_eq!(
        (rsp.return_code, rsp.list, rsp.modified_length),
        (ReturnCode::Ok, ListKind::Expected, 8)
    );
    let e = recv_event(&mut t);
    assert_eq!(e.recv, low_ignored);
    assert_eq!(e.match_bits, Some(MatchBits(0xcd42)));
    assert_eq!(e.header_data, Some(1));
    assert_eq!(e.completion, Completion::ok(msg_id(1), 8));
    assert_eq!(&region(&t, addr(5))[16..24], b"tagged-1");

    // 0xab01 matches no posted tagged receive (exact wants 0xab00, the
    // ignoring one is used up): unexpected, answered OVERFLOW.
    let rsp = guaranteed_rsp(&send(&mut t, 2, Some(0xab01), b"x", 1024));
    assert_eq!(
        (rsp.return_code, rsp.list),
        (ReturnCode::Ok, ListKind::Overflow)
    );
    assert_eq!(t.poll_event(), None);

    // 0xab00 matches exactly; the untagged receive is never a candidate.
    assert_eq!(
        rc(&send(&mut t, 3, Some(0xab00), b"tagged-3", 1024)),
        ReturnCode::Ok
    );
    assert_eq!(recv_event(&mut t).recv, exact);
    assert_eq!(t.posted_receives(job(7), pid(3)), 1);
    assert!(t.cancel_recv(untagged));
    assert!(!t.cancel_recv(untagged));
}

#[test]
fn untagged_sends_match_receives_in_posting_order() {
    let (mut t, _) = target(Access::RECV, 64);
    let r: Vec<RecvId> = (0..3)
        .map(|i| {
            t.post_recv(recv_spec(i * 16, 16, RecvKind::Untagged))
                .unwrap()
        })
        .collect();
    let tag_recv = t.post_recv(recv_spec(48, 16, tagged(0, u64::MAX))).unwrap();
    for (i, word) in [b"first", b"secnd", b"third"].iter().enumerate() {
        assert_eq!(
            rc(&send(&mut t, i as u16, None, *word, 1024)),
            ReturnCode::Ok
        );
        let e = recv_event(&mut t);
        assert_eq!(e.recv, r[i]);
        assert_eq!(e.match_bits, None);
        assert_eq!(e.list, ListKind::Expected);
    }
    let mem = region(&t, addr(5));
    assert_eq!(
        (&mem[0..5], &mem[16..21], &mem[32..37]),
        (&b"first"[..], &b"secnd"[..], &b"third"[..])
    );
    // The fourth untagged send finds only a tagged receive: unexpected.
    let rsp = guaranteed_rsp(&send(&mut t, 4, None, b"4th", 1024));
    assert_eq!(rsp.list, ListKind::Overflow);
    assert_eq!(t.posted_receives(job(7), pid(3)), 1);
    assert!(t.cancel_recv(tag_recv));
}

#[test]
fn unexpected_messages_complete_later_receives() {
    let (mut t, _) = target(Access::RECV, 256);
    // Two unexpected messages, one tagged, one untagged (3 packets).
    let tagged_data = pattern(10, 1);
    let untagged_data = pattern(100, 2);
    let rsp = guaranteed_rsp(&send(&mut t, 1, Some(0x77), &tagged_data, 1024));
    assert_eq!(rsp.list, ListKind::Overflow);
    let rsp = guaranteed_rsp(&send(&mut t, 2, None, &untagged_data, 84));
    assert_eq!((rsp.list, rsp.modified_length), (ListKind::Overflow, 100));
    assert_eq!(t.unexpected_usage(), (2, 110));
    assert_eq!(t.poll_event(), None);

    // An untagged receive takes the untagged message at once.
    let r1 = t.post_recv(recv_spec(0, 128, RecvKind::Untagged)).unwrap();
    let e = recv_event(&mut t);
    assert_eq!(
        (e.recv, e.list, e.message_len),
        (r1, ListKind::Overflow, 100)
    );
    assert_eq!(e.completion, Completion::ok(msg_id(2), 100));
    assert_eq!(e.header_data, Some(2));
    assert_eq!(&region(&t, addr(5))[..100], &untagged_data[..]);

    // A tagged receive with a short buffer takes the tagged one, truncated.
    let r2 = t.post_recv(recv_spec(200, 4, tagged(0x70, 0x0f))).unwrap();
    let e = recv_event(&mut t);
    assert_eq!(e.recv, r2);
    assert!(e.truncated());
    assert_eq!((e.completion.modified_length, e.message_len), (4, 10));
    assert_eq!(
        &region(&t, addr(5))[200..205],
        &[
            tagged_data[0],
            tagged_data[1],
            tagged_data[2],
            tagged_data[3],
            FILL
        ]
    );
    assert_eq!(t.unexpected_usage(), (0, 0));
    assert_eq!(t.posted_receives(job(7), pid(3)), 0);
}

#[test]
fn a_receive_posted_while_an_unexpected_message_arrives_completes_with_it() {
    let (mut t, _) = target(Access::RECV, 256);
    let data = pattern(100, 4);
    let m = OutgoingMessage::new(send_op(100, None, None), msg_id(5), 84).unwrap();
    let p = packets(&m, &data);
    assert_eq!(deliver(&mut t, src(1), &p[1]), TargetOutcome::Accepted);
    // Posted now: it claims the half-arrived message.
    let r = t.post_recv(recv_spec(0, 256, RecvKind::Untagged)).unwrap();
    assert_eq!(t.poll_event(), None);
    assert_eq!(deliver(&mut t, src(1), &p[0]), TargetOutcome::Accepted);
    let rsp = guaranteed_rsp(&deliver(&mut t, src(1), &p[2]));
    assert_eq!(rsp.list, ListKind::Overflow);
    let e = recv_event(&mut t);
    assert_eq!((e.recv, e.completion), (r, Completion::ok(msg_id(5), 100)));
    assert_eq!(&region(&t, addr(5))[..100], &data[..]);
    // A second receive does not see the message again.
    t.post_recv(recv_spec(0, 8, RecvKind::Untagged)).unwrap();
    assert_eq!(t.poll_event(), None);
}

#[test]
fn a_full_unexpected_list_refuses_with_no_match() {
    let mut t: SesTarget<Vec<u8>> = SesTarget::new(TargetConfig {
        max_unexpected_messages: 2,
        max_unexpected_bytes: 100,
        ..TargetConfig::default()
    });
    t.memory_mut()
        .register(RegionSpec::new(addr(5), KEY, Access::RECV), vec![FILL; 256])
        .unwrap();
    assert_eq!(
        guaranteed_rsp(&send(&mut t, 1, None, &[1; 10], 1024)).list,
        ListKind::Overflow
    );
    // 10 + 95 bytes would pass the byte limit.
    let rsp = guaranteed_rsp(&send(&mut t, 2, None, &[2; 95], 1024));
    assert_eq!(
        (rsp.return_code, rsp.list),
        (ReturnCode::NoMatch, ListKind::Overflow)
    );
    assert_eq!(
        guaranteed_rsp(&send(&mut t, 3, None, &[3; 10], 1024)).return_code,
        ReturnCode::Ok
    );
    // Two held: the count limit.
    let rsp = guaranteed_rsp(&send(&mut t, 4, None, &[4; 1], 1024));
    assert_eq!(
        (rsp.return_code, rsp.list),
        (ReturnCode::NoMatch, ListKind::Overflow)
    );
    // A multi-packet message refused at its first packet is refused at every
    // packet, and matches nothing later.
    let m = OutgoingMessage::new(send_op(60, None, None), msg_id(5), 74).unwrap();
    for p in packets(&m, &[5; 60]) {
        assert_eq!(rc(&deliver(&mut t, src(1), &p)), ReturnCode::NoMatch);
    }
    assert_eq!(t.unexpected_usage(), (2, 20));
    // Draining the list makes room again.
    t.post_recv(recv_spec(0, 16, RecvKind::Untagged)).unwrap();
    assert_eq!(recv_event(&mut t).completion.message_id, msg_id(1));
    assert_eq!(
        guaranteed_rsp(&send(&mut t, 6, None, &[6; 1], 1024)).return_code,
        ReturnCode::Ok
    );
}

#[test]
fn truncation_reports_the_bytes_placed() {
    let (mut t, _) = target(Access::RECV, 64);
    let r = t.post_recv(recv_spec(8, 10, RecvKind::Untagged)).unwrap();
    let data = pattern(50, 6);
    // Three packets; the last two land entirely past the buffer.
    let rsp = guaranteed_rsp(&send(&mut t, 1, None, &data, 44 + 20));
    assert_eq!((rsp.return_code, rsp.modified_length), (ReturnCode::Ok, 10));
    let e = recv_event(&mut t);
    assert_eq!(e.recv, r);
    assert!(e.truncated());
    let mem = region(&t, addr(5));
    assert_eq!(&mem[8..18], &data[..10]);
    assert!(mem[..8].iter().chain(&mem[18..]).all(|b| *b == FILL));
}

#[test]
fn sends_to_unknown_processes() {
    let (mut t, _) = target(Access::RECV, 64);
    let m = OutgoingMessage::new(send_op(4, None, None), msg_id(1), 100).unwrap();
    let mut h = header(&m, 0);
    h.pid_on_fep = pid(9);
    assert_eq!(
        rc(&deliver_std(&mut t, src(1), h, &[1; 4])),
        ReturnCode::BadPid
    );
    // (A new message ID: the same one again would be a duplicate.)
    h.message_id = msg_id(2);
    h.job_id = job(9);
    assert_eq!(
        rc(&deliver_std(&mut t, src(1), h, &[1; 4])),
        ReturnCode::BadJobId
    );
    assert_eq!(t.unexpected_usage(), (0, 0));
}

#[test]
fn post_recv_checks_its_buffer() {
    let (mut t, _) = target(Access::RECV, 64);
    t.memory_mut()
        .register(
            RegionSpec::new(addr(6), KEY, Access::REMOTE_WRITE),
            vec![0; 64],
        )
        .unwrap();
    let mut s = recv_spec(0, 64, RecvKind::Untagged);
    assert!(t.post_recv(s).is_ok());
    s.buffer.len = 65;
    assert_eq!(t.post_recv(s), Err(PostError::OutOfBounds));
    s.buffer.offset = u64::MAX;
    assert_eq!(t.post_recv(s), Err(PostError::OutOfBounds));
    s.buffer = RecvBuffer {
        ri: ri(6),
        offset: 0,
        len: 8,
    };
    assert_eq!(t.post_recv(s), Err(PostError::NoSendRight));
    s.buffer.ri = ri(7);
    assert_eq!(t.post_recv(s), Err(PostError::NotRegistered));
    t.memory_mut().disable(addr(5)).unwrap();
    assert_eq!(
        t.post_recv(recv_spec(0, 8, RecvKind::Untagged)),
        Err(PostError::Disabled)
    );
}

#[test]
fn a_receive_buffer_deregistered_midway_fails_the_message() {
    let (mut t, reg) = target(Access::RECV, 256);
    let r = t.post_recv(recv_spec(0, 256, RecvKind::Untagged)).unwrap();
    let m = OutgoingMessage::new(send_op(100, None, None), msg_id(1), 84).unwrap();
    let p = packets(&m, &pattern(100, 0));
    assert_eq!(deliver(&mut t, src(1), &p[0]), TargetOutcome::Accepted);
    let mem = t.memory_mut().deregister(reg.addr()).unwrap();
    t.memory_mut()
        .register(RegionSpec::new(reg.addr(), KEY, Access::RECV), mem)
        .unwrap();
    assert_eq!(
        rc(&deliver(&mut t, src(1), &p[1])),
        ReturnCode::Undeliverable
    );
    let e = recv_event(&mut t);
    assert_eq!(e.recv, r);
    assert_eq!(
        e.completion.status,
        Err(CompletionError::Local(LocalError::RecvBufferGone))
    );
    assert_eq!(
        rc(&deliver(&mut t, src(1), &p[2])),
        ReturnCode::Undeliverable
    );
    assert_eq!(t.inflight_messages(), 0);
}

#[test]
fn forgetting_a_source_gives_its_receives_back() {
    let (mut t, _) = target(Access::RECV, 256);
    let r = t.post_recv(recv_spec(0, 256, RecvKind::Untagged)).unwrap();
    let m = OutgoingMessage::new(send_op(100, None, None), msg_id(1), 84).unwrap();
    let p = packets(&m, &pattern(100, 0));
    assert_eq!(deliver(&mut t, src(1), &p[0]), TargetOutcome::Accepted);
    assert_eq!(t.posted_receives(job(7), pid(3)), 0);
    assert_eq!(t.forget_source(src(1)), 1);
    assert_eq!(t.posted_receives(job(7), pid(3)), 1);
    // The next send gets the same receive.
    assert_eq!(rc(&send(&mut t, 2, None, b"again", 1024)), ReturnCode::Ok);
    assert_eq!(recv_event(&mut t).recv, r);
    // A half-arrived unexpected message is dropped, its space freed.
    let m = OutgoingMessage::new(send_op(100, None, None), msg_id(3), 84).unwrap();
    let first = &packets(&m, &pattern(100, 0))[0];
    assert_eq!(deliver(&mut t, src(1), first), TargetOutcome::Accepted);
    assert_eq!(t.unexpected_usage(), (1, 100));
    assert_eq!(t.forget_source(src(1)), 1);
    assert_eq!(t.unexpected_usage(), (0, 0));
}

// ---------------------------------------------------------------------------
// Peeking at and claiming unexpected messages
// ---------------------------------------------------------------------------

/// The packets of a send from `initiator`, header data `id`, in packets of
/// `max_ses_len`.
fn send_packets(
    id: u16,
    tag: Option<u64>,
    data: &[u8],
    max_ses_len: usize,
    initiator: u32,
) -> Vec<Vec<u8>> {
    let m = OutgoingMessage::new(
        send_op(data.len() as u32, tag, Some(u64::from(id))),
        msg_id(id),
        max_ses_len,
    )
    .unwrap()
    .with_initiator(InitiatorId(initiator));
    packets(&m, data)
}

/// Delivers every packet; the last outcome.
fn deliver_all(t: &mut SesTarget<Vec<u8>>, from: Source, pkts: &[Vec<u8>]) -> TargetOutcome {
    let mut last = TargetOutcome::Accepted;
    for p in pkts {
        last = deliver(t, from, p);
    }
    last
}

fn peek_id(t: &SesTarget<Vec<u8>>, kind: RecvKind) -> Option<UnexpectedRef> {
    t.peek_unexpected(job(7), pid(3), kind).map(|u| u.id)
}

#[test]
fn peek_shows_the_oldest_message_a_receive_would_take_and_leaves_it() {
    let (mut t, _) = target(Access::RECV, 256);
    let untagged = pattern(100, 2);
    let held = deliver_all(
        &mut t,
        src(1),
        &send_packets(1, Some(0x77), &pattern(10, 1), 1024, 41),
    );
    assert_eq!(guaranteed_rsp(&held).list, ListKind::Overflow);
    let held = deliver_all(&mut t, src(1), &send_packets(2, None, &untagged, 84, 42));
    assert_eq!(guaranteed_rsp(&held).list, ListKind::Overflow);
    let held = deliver_all(
        &mut t,
        src(2),
        &send_packets(3, Some(0x78), &pattern(5, 3), 1024, 43),
    );
    assert_eq!(guaranteed_rsp(&held).list, ListKind::Overflow);
    let first = t
        .peek_unexpected(job(7), pid(3), RecvKind::Untagged)
        .unwrap();
    assert_eq!(
        (
            first.source,
            first.initiator,
            first.message_len,
            first.match_bits,
            first.header_data
        ),
        (src(1), InitiatorId(42), 100, None, Some(2))
    );
    // Nothing removed: a second peek sees it again.
    assert_eq!(
        t.peek_unexpected(job(7), pid(3), RecvKind::Untagged),
        Some(first)
    );
    // Tagged: the oldest message the bits accept, as a receive takes them.
    let t1 = t
        .peek_unexpected(job(7), pid(3), tagged(0x70, 0x0f))
        .unwrap();
    assert_eq!(
        (t1.match_bits, t1.initiator, t1.message_len),
        (Some(MatchBits(0x77)), InitiatorId(41), 10)
    );
    let t3 = t.peek_unexpected(job(7), pid(3), tagged(0x78, 0)).unwrap();
    assert_eq!((t3.source, t3.header_data), (src(2), Some(3)));
    assert_ne!(t1.id, t3.id);
    assert_eq!(peek_id(&t, tagged(0x79, 0)), None);
    assert_eq!(t.peek_unexpected(job(7), pid(4), RecvKind::Untagged), None);
    assert_eq!(t.unexpected_usage(), (3, 115));
    assert_eq!(t.poll_event(), None);
    // A receive still takes what was peeked.
    t.post_recv(recv_spec(0, 128, RecvKind::Untagged)).unwrap();
    let e = recv_event(&mut t);
    assert_eq!(e.completion, Completion::ok(msg_id(2), 100));
    assert_eq!(&region(&t, addr(5))[..100], &untagged[..]);
    assert_eq!(peek_id(&t, RecvKind::Untagged), None);
}

#[test]
fn a_claimed_message_is_skipped_by_receives_and_peeks_until_posted() {
    let (mut t, _) = target(Access::RECV, 256);
    assert_eq!(rc(&send(&mut t, 1, None, b"first", 1024)), ReturnCode::Ok);
    assert_eq!(rc(&send(&mut t, 2, None, b"second", 1024)), ReturnCode::Ok);
    let a = peek_id(&t, RecvKind::Untagged).unwrap();
    assert!(t.claim_unexpected(a));
    assert!(!t.claim_unexpected(a), "claimed twice");
    let b = peek_id(&t, RecvKind::Untagged).unwrap();
    assert_ne!(a, b);
    // A receive skips the claimed (older) message.
    let r = t.post_recv(recv_spec(0, 16, RecvKind::Untagged)).unwrap();
    let e = recv_event(&mut t);
    assert_eq!((e.recv, e.header_data), (r, Some(2)));
    assert_eq!(&region(&t, addr(5))[..6], b"second");
    // Still held and counted.
    assert_eq!(t.unexpected_usage(), (1, 5));
    assert_eq!(peek_id(&t, RecvKind::Untagged), None);
    t.post_recv(recv_spec(16, 16, RecvKind::Untagged)).unwrap();
    assert_eq!(t.poll_event(), None);

    let rc_ = t.post_claimed(a, recv_spec(100, 16, tagged(0, 0))).unwrap();
    let e = recv_event(&mut t);
    assert_eq!(
        (e.recv, e.completion, e.message_len, e.list, e.header_data),
        (
            rc_,
            Completion::ok(msg_id(1), 5),
            5,
            ListKind::Overflow,
            Some(1)
        )
    );
    assert_eq!(&region(&t, addr(5))[100..106], b"first\xee");
    assert_eq!(t.unexpected_usage(), (0, 0));
    // Gone: nothing more to do with it.
    assert_eq!(
        t.post_claimed(a, recv_spec(0, 16, RecvKind::Untagged)),
        Err(PostError::NotClaimed)
    );
    assert!(!t.discard_claimed(a));
    assert!(!t.claim_unexpected(a));
}

#[test]
fn post_claimed_completes_a_message_still_arriving_truncated_to_its_buffer() {
    let (mut t, _) = target(Access::RECV, 256);
    let data = pattern(100, 9);
    let p = send_packets(5, Some(0x9), &data, 84, 0x55);
    assert_eq!(p.len(), 3);
    // The middle packet first: the peek knows the length, tag and sender,
    // not yet the header data.
    assert_eq!(deliver(&mut t, src(1), &p[1]), TargetOutcome::Accepted);
    let u = t.peek_unexpected(job(7), pid(3), tagged(0x9, 0)).unwrap();
    assert_eq!(
        (u.message_len, u.match_bits, u.initiator, u.header_data),
        (100, Some(MatchBits(0x9)), InitiatorId(0x55), None)
    );
    assert_eq!(deliver(&mut t, src(1), &p[0]), TargetOutcome::Accepted);
    let u = t.peek_unexpected(job(7), pid(3), tagged(0x9, 0)).unwrap();
    assert_eq!(u.header_data, Some(5));
    assert!(t.claim_unexpected(u.id));
    let r = t
        .post_claimed(u.id, recv_spec(10, 60, RecvKind::Untagged))
        .unwrap();
    assert_eq!(t.poll_event(), None, "not complete yet");
    assert_eq!(
        t.post_claimed(u.id, recv_spec(0, 8, RecvKind::Untagged)),
        Err(PostError::NotClaimed),
        "posted twice"
    );
    let rsp = guaranteed_rsp(&deliver(&mut t, src(1), &p[2]));
    assert_eq!(
        (rsp.return_code, rsp.list, rsp.modified_length),
        (ReturnCode::Ok, ListKind::Overflow, 100)
    );
    let e = recv_event(&mut t);
    assert_eq!(e.recv, r);
    assert_eq!((e.completion.modified_length, e.message_len), (60, 100));
    assert_eq!(e.initiator, InitiatorId(0x55));
    let mem = region(&t, addr(5));
    assert_eq!(&mem[10..70], &data[..60]);
    assert!(mem[..10].iter().chain(&mem[70..]).all(|b| *b == FILL));
    assert_eq!(t.unexpected_usage(), (0, 0));
    assert_eq!(t.poll_event(), None);
}

#[test]
fn discarding_a_claimed_message_frees_its_room() {
    let mut t: SesTarget<Vec<u8>> = SesTarget::new(TargetConfig {
        max_unexpected_messages: 2,
        max_unexpected_bytes: 100,
        ..TargetConfig::default()
    });
    t.memory_mut()
        .register(RegionSpec::new(addr(5), KEY, Access::RECV), vec![FILL; 256])
        .unwrap();
    assert_eq!(rc(&send(&mut t, 1, None, &[1; 90], 1024)), ReturnCode::Ok);
    assert_eq!(
        rc(&send(&mut t, 2, None, &[2; 20], 1024)),
        ReturnCode::NoMatch
    );
    let a = peek_id(&t, RecvKind::Untagged).unwrap();
    assert!(t.claim_unexpected(a));
    // Claimed, it still takes its room.
    assert_eq!(
        rc(&send(&mut t, 3, None, &[3; 20], 1024)),
        ReturnCode::NoMatch
    );
    assert!(t.discard_claimed(a));
    assert!(!t.discard_claimed(a));
    assert_eq!(t.unexpected_usage(), (0, 0));
    assert_eq!(rc(&send(&mut t, 4, None, &[4; 20], 1024)), ReturnCode::Ok);
    assert_eq!(t.unexpected_usage(), (1, 20));

    // Discarded while arriving: its bytes are freed at once, the rest of
    // it is accepted and dropped, and its sender hears RC_OK.
    let p = send_packets(5, None, &[5; 60], 84, 0);
    assert_eq!(deliver(&mut t, src(1), &p[0]), TargetOutcome::Accepted);
    assert_eq!(t.unexpected_usage(), (2, 80));
    let older = peek_id(&t, RecvKind::Untagged).unwrap();
    t.post_recv(recv_spec(0, 32, RecvKind::Untagged)).unwrap();
    assert_eq!(recv_event(&mut t).completion.message_id, msg_id(4));
    assert!(!t.claim_unexpected(older), "taken by the receive");
    let b = peek_id(&t, RecvKind::Untagged).unwrap();
    assert!(t.claim_unexpected(b));
    assert!(t.discard_claimed(b));
    assert_eq!(t.unexpected_usage(), (1, 0));
    let rsp = guaranteed_rsp(&deliver(&mut t, src(1), &p[1]));
    assert_eq!(
        (rsp.return_code, rsp.list, rsp.modified_length),
        (ReturnCode::Ok, ListKind::Overflow, 60)
    );
    assert_eq!(t.unexpected_usage(), (0, 0));
    assert_eq!(t.inflight_messages(), 0);
    t.post_recv(recv_spec(0, 64, RecvKind::Untagged)).unwrap();
    assert_eq!(t.poll_event(), None);
    assert_eq!(&region(&t, addr(5))[32..64], &[FILL; 32]);
}

#[test]
fn bad_unexpected_handles_are_refused() {
    let (mut t, _) = target(Access::RECV, 64);
    let nobody = UnexpectedRef(12345);
    assert!(!t.claim_unexpected(nobody));
    assert!(!t.discard_claimed(nobody));
    assert_eq!(
        t.post_claimed(nobody, recv_spec(0, 8, RecvKind::Untagged)),
        Err(PostError::NotClaimed)
    );
    assert_eq!(rc(&send(&mut t, 1, None, b"held", 1024)), ReturnCode::Ok);
    let a = peek_id(&t, RecvKind::Untagged).unwrap();
    // Not claimed: neither posted nor discarded, and still listed.
    assert_eq!(
        t.post_claimed(a, recv_spec(0, 8, RecvKind::Untagged)),
        Err(PostError::NotClaimed)
    );
    assert!(!t.discard_claimed(a));
    assert_eq!(peek_id(&t, RecvKind::Untagged), Some(a));
    // A bad buffer is refused and the claim stays.
    assert!(t.claim_unexpected(a));
    assert_eq!(
        t.post_claimed(a, recv_spec(60, 8, RecvKind::Untagged)),
        Err(PostError::OutOfBounds)
    );
    let mut other = recv_spec(0, 8, RecvKind::Untagged);
    other.buffer.ri = ri(9);
    assert_eq!(t.post_claimed(a, other), Err(PostError::NotRegistered));
    assert_eq!(t.poll_event(), None);
    let r = t
        .post_claimed(a, recv_spec(0, 8, RecvKind::Untagged))
        .unwrap();
    assert_eq!(recv_event(&mut t).recv, r);
    assert_eq!(&region(&t, addr(5))[..4], b"held");
}

#[test]
fn a_claimed_message_abandoned_by_its_sender_ends_its_receive() {
    let (mut t, _) = target(Access::RECV, 256);
    let r0 = t.post_recv(recv_spec(200, 8, tagged(1, 0))).unwrap();
    let p = send_packets(1, None, &pattern(100, 0), 84, 0);
    assert_eq!(deliver(&mut t, src(1), &p[0]), TargetOutcome::Accepted);
    let a = peek_id(&t, RecvKind::Untagged).unwrap();
    assert!(t.claim_unexpected(a));
    let r = t
        .post_claimed(a, recv_spec(0, 128, RecvKind::Untagged))
        .unwrap();
    assert_eq!(t.forget_source(src(1)), 1);
    let e = recv_event(&mut t);
    assert_eq!(e.recv, r);
    assert_eq!(
        e.completion.status,
        Err(CompletionError::Remote(ReturnCode::Undeliverable))
    );
    // The claim's receive is not put back among the posted ones.
    assert_eq!(t.posted_receives(job(7), pid(3)), 1);
    assert!(t.cancel_recv(r0));
    assert_eq!(t.unexpected_usage(), (0, 0));
    // A claimed message not yet posted goes too.
    let p = send_packets(2, None, &pattern(100, 0), 84, 0);
    assert_eq!(deliver(&mut t, src(1), &p[0]), TargetOutcome::Accepted);
    let b = peek_id(&t, RecvKind::Untagged).unwrap();
    assert!(t.claim_unexpected(b));
    assert_eq!(t.forget_source(src(1)), 1);
    assert_eq!(
        t.post_claimed(b, recv_spec(0, 128, RecvKind::Untagged)),
        Err(PostError::NotClaimed)
    );
    assert_eq!(t.unexpected_usage(), (0, 0));
}

// ---------------------------------------------------------------------------
// Reads
// ---------------------------------------------------------------------------

fn read_op(reg: &Registration, offset: u64, len: u32) -> Operation {
    Operation::Read {
        src: remote(reg, offset),
        dst: LocalBuf::new(LocalRegion(1), 0),
        len,
    }
}

#[test]
fn read_returns_fragments_the_sink_reassembles() {
    let data = pattern(256, 11);
    let mut t2: SesTarget<Vec<u8>> = SesTarget::new(TargetConfig {
        max_read_payload: 64,
        ..TargetConfig::default()
    });
    let reg = t2
        .memory_mut()
        .register(RegionSpec::new(addr(5), KEY, RW), data.clone())
        .unwrap();

    let m = OutgoingMessage::new(read_op(&reg, 10, 150), msg_id(7), 1024).unwrap();
    let p = packets(&m, &[]);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].len(), 44);
    let TargetOutcome::Read(rr) = deliver(&mut t2, src(1), &p[0]) else {
        panic!("not a read")
    };
    assert_eq!(
        (rr.len(), rr.total_len(), rr.fragment_count()),
        (150, 150, 3)
    );
    let frags = fragments(&t2, &rr);
    let shape: Vec<_> = frags
        .iter()
        .map(|(h, d)| {
            (
                h.message_offset,
                h.payload_length.get(),
                h.modified_length,
                d.len(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [(0, 64, 150, 64), (64, 64, 150, 64), (128, 22, 150, 22)]
    );
    assert!(
        frags
            .iter()
            .all(|(h, _)| h.read_request_message_id == msg_id(7)
                && h.return_code == ReturnCode::Ok
                && h.opcode == ResponseOpcode::ResponseWithData)
    );

    let mut sink = m.read_sink().unwrap();
    let mut local = vec![0u8; 150];
    assert_eq!(
        sink.on_data(&frags[2].0, &frags[2].1, &mut local),
        ReadProgress::Pending
    );
    assert_eq!(
        sink.on_data(&frags[0].0, &frags[0].1, &mut local),
        ReadProgress::Pending
    );
    assert_eq!(
        sink.on_data(&frags[0].0, &frags[0].1, &mut local),
        ReadProgress::Pending
    );
    assert_eq!(
        sink.on_data(&frags[1].0, &frags[1].1, &mut local),
        ReadProgress::Complete(Completion::ok(msg_id(7), 150))
    );
    assert_eq!(local, data[10..160]);
}

#[test]
fn zero_length_read_is_one_empty_fragment() {
    let (mut t, reg) = target(RW, 16);
    let m = OutgoingMessage::new(read_op(&reg, 16, 0), msg_id(1), 100).unwrap();
    let TargetOutcome::Read(rr) = deliver(&mut t, src(1), &packets(&m, &[])[0]) else {
        panic!()
    };
    let frags = fragments(&t, &rr);
    assert_eq!(frags.len(), 1);
    let mut sink = m.read_sink().unwrap();
    assert_eq!(
        sink.on_data(&frags[0].0, &frags[0].1, &mut Vec::new()),
        ReadProgress::Complete(Completion::ok(msg_id(1), 0))
    );
}

#[test]
fn read_errors() {
    let (mut t, reg) = target(RW, 64);
    let read = |t: &mut SesTarget<Vec<u8>>, op| {
        let m = OutgoingMessage::new(op, msg_id(1), 100).unwrap();
        deliver(t, src(1), &packets(&m, &[])[0])
    };
    assert_eq!(rc(&read(&mut t, read_op(&reg, 60, 8))), ReturnCode::BadAddr);
    assert_eq!(rc(&read(&mut t, read_op(&reg, 0, 65))), ReturnCode::TooLong);
    let mut op = read_op(&reg, 0, 8);
    if let Operation::Read { src, .. } = &mut op {
        src.key = MemoryKey(3);
    }
    assert_eq!(rc(&read(&mut t, op)), ReturnCode::BadMkey);
    // ie on a read.
    let m = OutgoingMessage::new(read_op(&reg, 0, 8), msg_id(2), 100).unwrap();
    let mut h = header(&m, 0);
    h.flags.ie = true;
    assert_eq!(
        rc(&deliver_std(&mut t, src(1), h, &[])),
        ReturnCode::InitiatorErr
    );
    // A read in the medium form is not implemented.
    let medium = SesMediumRepr {
        opcode: Opcode::Read,
        flags: RequestFlags {
            eom: true,
            rel: true,
            ..RequestFlags::default()
        },
        som: true,
        request_length: Len14::new(8).unwrap(),
        ri_generation: reg.generation,
        job_id: reg.job,
        pid_on_fep: reg.pid,
        resource_index: reg.ri,
        data_or_offset: HeaderDataOrOffset::BufferOffset(0),
        initiator: 0,
        memory_key: KEY.0,
    };
    assert_eq!(
        rc(&t.handle_request(src(1), &medium.into(), &[])),
        ReturnCode::UnsupportedOp
    );
}

#[test]
fn a_region_deregistered_under_a_read_sends_the_error_instead_of_data() {
    let (mut t, reg) = target(RW, 64);
    let m = OutgoingMessage::new(read_op(&reg, 0, 32), msg_id(1), 100).unwrap();
    let TargetOutcome::Read(rr) = deliver(&mut t, src(1), &packets(&m, &[])[0]) else {
        panic!()
    };
    t.memory_mut().deregister(reg.addr()).unwrap();
    let frags = fragments(&t, &rr);
    assert_eq!(frags[0].0.return_code, ReturnCode::BadGeneration);
    assert!(frags[0].1.is_empty());
    let mut sink = m.read_sink().unwrap();
    assert_eq!(
        sink.on_data(&frags[0].0, &frags[0].1, &mut vec![0; 32]),
        ReadProgress::Complete(Completion::err(
            msg_id(1),
            CompletionError::Remote(ReturnCode::BadGeneration),
            0
        ))
    );
}

#[test]
fn multi_packet_read_requests_ask_for_chunks() {
    // REFPROV-style: a read split into request packets, each asking for
    // payload_length bytes at message_offset.
    let (mut t, reg) = target(RW, 64);
    let data = pattern(64, 3);
    t.memory_mut()
        .get_mut(reg.addr())
        .unwrap()
        .memory_mut()
        .copy_from_slice(&data);
    let m = OutgoingMessage::new(read_op(&reg, 0, 40), msg_id(1), 100).unwrap();
    let mut h = header(&m, 0);
    h.som = SomFields::Continuation {
        payload_length: Len14::new(16).unwrap(),
        message_offset: 24,
    };
    let TargetOutcome::Read(rr) = deliver_std(&mut t, src(1), h, &[]) else {
        panic!()
    };
    let frags = fragments(&t, &rr);
    assert_eq!(frags.len(), 1);
    assert_eq!(
        (frags[0].0.message_offset, frags[0].0.modified_length),
        (24, 40)
    );
    assert_eq!(frags[0].1, data[24..40]);
    // A chunk past the read's end.
    h.som = SomFields::Continuation {
        payload_length: Len14::new(17).unwrap(),
        message_offset: 24,
    };
    assert_eq!(
        rc(&deliver_std(&mut t, src(1), h, &[])),
        ReturnCode::OpViolation
    );
}

#[test]
fn fragment_buffers_and_indices_are_checked() {
    let (mut t, reg) = target(RW, 64);
    let m = OutgoingMessage::new(read_op(&reg, 0, 32), msg_id(1), 100).unwrap();
    let TargetOutcome::Read(rr) = deliver(&mut t, src(1), &packets(&m, &[])[0]) else {
        panic!()
    };
    let mut small = [0u8; 51];
    assert_eq!(
        rr.write_fragment(0, t.memory(), &mut small),
        Err(crate::EmitError::BufferTooSmall { required: 52 })
    );
    assert_eq!(small, [0; 51]);
    assert_eq!(
        rr.write_fragment(1, t.memory(), &mut [0; 100]),
        Err(crate::EmitError::NoSuchPacket)
    );
    assert_eq!(rr.fragment_len(1), None);
    assert_eq!(rr.fragment_header(0).unwrap().payload_length.get(), 32);
}

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

/// A delivery schedule: a permutation of `0..n` with some packets repeated.
fn schedule(n: usize, order: &[usize], dups: &[usize]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    for (i, &k) in order.iter().enumerate().take(n) {
        idx.swap(i, i + k % (n - i));
    }
    for &d in dups {
        let at = d % (idx.len() + 1);
        idx.insert(at, d % n);
    }
    idx
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A write cut by OutgoingMessage and delivered in any order, with
    /// duplicates, lands byte-exact, completes exactly once and touches
    /// nothing outside [offset, offset + len).
    #[test]
    fn fragmented_write_in_any_order(
        (len, max_ses_len) in (0usize..65536)
            .prop_flat_map(|len| (Just(len), (45 + len / 1024)..9000usize)),
        offset in 0u64..4096,
        order in prop::collection::vec(any::<usize>(), 0..2000),
        dups in prop::collection::vec(any::<usize>(), 0..8),
        seed in any::<u8>(),
    ) {
        let region_len = 65536 + 4096;
        let (mut t, reg) = target(RW, region_len);
        let data = pattern(len, seed);
        let m = OutgoingMessage::new(
            write_op(&reg, offset, len as u32, Some(0x1234)),
            msg_id(77),
            max_ses_len,
        ).unwrap();
        let p = packets(&m, &data);
        let mut completions = 0;
        for i in schedule(p.len(), &order, &dups) {
            let outcome = deliver(&mut t, src(2), &p[i]);
            prop_assert!(t.lookups_agree());
            match outcome {
                TargetOutcome::Respond(r) => {
                    prop_assert!(r.guaranteed);
                    prop_assert_eq!(r.header.return_code, ReturnCode::Ok);
                    prop_assert_eq!(r.header.modified_length, len as u32);
                    completions += 1;
                }
                TargetOutcome::Accepted | TargetOutcome::Duplicate => {}
                other => prop_assert!(false, "unexpected {:?}", other),
            }
        }
        prop_assert_eq!(completions, 1);
        let mem = region(&t, reg.addr());
        let (o, e) = (offset as usize, offset as usize + len);
        prop_assert_eq!(&mem[o..e], &data[..]);
        prop_assert!(mem[..o].iter().chain(&mem[e..]).all(|b| *b == FILL));
        prop_assert!(matches!(t.poll_event(), Some(TargetEvent::WriteWithData(_))));
        prop_assert_eq!(t.poll_event(), None);
        prop_assert_eq!(t.inflight_messages(), 0);
    }

    /// Several multi-packet writes interleaved, from two sources (two of
    /// them with the same message ID), with sources forgotten in between:
    /// the tracked message a packet belongs to is found where the keyed
    /// lookup finds it after every packet, and every write whose source
    /// was never forgotten lands byte-exact and completes exactly once.
    #[test]
    fn interleaved_messages_are_found_by_key(
        lens in prop::collection::vec(1usize..6000, 1..5),
        max_ses_len in 100usize..1500,
        order in prop::collection::vec(any::<usize>(), 0..200),
        forget in prop::collection::vec(any::<usize>(), 0..3),
    ) {
        let (mut t, reg) = target(RW, 4 * 8192);
        // Message i: from source 1 + i % 2, ID 10 + i / 2 (so messages 0
        // and 1 share an ID), at offset 8192 * i.
        let mut queue: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut datas = Vec::new();
        for (i, &len) in lens.iter().enumerate() {
            let data = pattern(len, i as u8);
            let m = OutgoingMessage::new(
                write_op(&reg, 8192 * i as u64, len as u32, None),
                msg_id(10 + (i / 2) as u16),
                max_ses_len,
            ).unwrap();
            queue.extend(packets(&m, &data).into_iter().map(|p| (i, p)));
            datas.push(data);
        }
        for (i, &k) in order.iter().enumerate().take(queue.len()) {
            let n = queue.len();
            queue.swap(i, i + k % (n - i));
        }
        let forget_at: Vec<usize> = forget.iter().map(|f| f % (queue.len() + 1)).collect();
        let mut forgotten = [false; 2];
        let mut completions = vec![0; lens.len()];
        for (at, (i, p)) in queue.iter().enumerate() {
            for f in forget_at.iter().filter(|&&f| f == at) {
                let s = f % 2;
                t.forget_source(src(1 + s as u8));
                forgotten[s] = true;
                prop_assert!(t.lookups_agree());
            }
            let outcome = deliver(&mut t, src(1 + (i % 2) as u8), p);
            prop_assert!(t.lookups_agree());
            if let TargetOutcome::Respond(r) = outcome {
                prop_assert_eq!(r.header.return_code, ReturnCode::Ok);
                completions[*i] += 1;
            }
        }
        let mem = region(&t, reg.addr());
        for (i, data) in datas.iter().enumerate() {
            if !forgotten[i % 2] {
                prop_assert_eq!(completions[i], 1);
                prop_assert_eq!(&mem[8192 * i..8192 * i + data.len()], &data[..]);
            }
        }
    }

    /// Read fragments in any order, with duplicates, reassemble byte-exact
    /// into the initiator's buffer, completing once.
    #[test]
    fn read_fragments_reassemble(
        (len, max_read_payload) in (0u32..65536)
            .prop_flat_map(|len| (Just(len), (1 + len as usize / 1024)..20000usize)),
        offset in 0u64..4096,
        order in prop::collection::vec(any::<usize>(), 0..2000),
        dups in prop::collection::vec(any::<usize>(), 0..8),
        seed in any::<u8>(),
    ) {
        let region_len = 65536 + 4096;
        let mut t: SesTarget<Vec<u8>> = SesTarget::new(TargetConfig {
            max_read_payload,
            ..TargetConfig::default()
        });
        let data = pattern(region_len, seed);
        let reg = t
            .memory_mut()
            .register(RegionSpec::new(addr(5), KEY, RW), data.clone())
            .unwrap();
        let m = OutgoingMessage::new(read_op(&reg, offset, len), msg_id(3), 100).unwrap();
        let TargetOutcome::Read(rr) = deliver(&mut t, src(1), &packets(&m, &[])[0]) else {
            panic!("read refused")
        };
        let frags = fragments(&t, &rr);
        let mut sink = m.read_sink().unwrap();
        let mut local = vec![0u8; len as usize + 8];
        let mut done = 0;
        for i in schedule(frags.len(), &order, &dups) {
            let (h, d) = &frags[i];
            match sink.on_data(h, d, &mut local) {
                ReadProgress::Complete(c) => {
                    prop_assert_eq!(c, Completion::ok(msg_id(3), u64::from(len)));
                    done += 1;
                }
                ReadProgress::Pending | ReadProgress::Ignored(crate::ReadIgnored::AlreadyComplete) => {}
                other => prop_assert!(false, "unexpected {:?}", other),
            }
        }
        prop_assert_eq!(done, 1);
        let o = offset as usize;
        prop_assert_eq!(&local[..len as usize], &data[o..o + len as usize]);
        prop_assert!(local[len as usize..].iter().all(|b| *b == 0));
    }

    /// Whatever bytes arrive as a request, the target answers without
    /// panicking and never writes outside a region's checked window.
    #[test]
    fn arbitrary_requests_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..128),
        nh in 1u8..4,
    ) {
        let (mut t, _) = target(RW | Access::RECV | Access::UNKEYED, 64);
        t.post_recv(recv_spec(0, 8, RecvKind::Untagged)).unwrap();
        let nh = uet_wire::pds::NextHeader::from_u8(nh).unwrap();
        let mut b = bytes;
        if let Some(x) = b.get_mut(1) {
            *x &= 0x3f; // version 0
        }
        if let Ok(Some(repr)) = SesRepr::parse(nh, &b) {
            let payload = &b[repr.header_len()..];
            let _ = t.handle_request(src(1), &repr, payload);
            let _ = t.handle_request(src(1), &repr, payload);
            while t.poll_event().is_some() {}
            prop_assert_eq!(region(&t, addr(5)).len(), 64);
        }
    }
}

/// A packet's view and payload, as the receive path's parse step hands
/// them over (`None` where it would use the general parser).
fn view_of(pkt: &[u8]) -> Option<(StandardView<'_>, &[u8])> {
    let (head, payload) = pkt.split_first_chunk::<44>()?;
    Some((StandardView::new(head)?, payload))
}

/// What the memory table goes through between two packets.
#[derive(Debug, Clone, Copy)]
enum MemOp {
    Disable,
    Enable,
    DisableGeneration,
    Reregister,
    Forget,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `handle_standard` (whose write-continuation step places most packets
    /// of a write) does exactly what `handle_request` of the same header
    /// does: interleaved multi-packet writes from two sources, mostly in
    /// order, with duplicates, tampered header bytes (every field the step
    /// reads), and memory disabled, re-enabled, re-registered and sources
    /// forgotten in between. Same outcomes, same bytes in memory, same
    /// tracked state and events after every packet.
    #[test]
    fn write_continuation_agrees_with_general_path(
        lens in prop::collection::vec(1usize..3000, 1..4),
        max_ses_len in 60usize..400,
        swaps in prop::collection::vec((any::<prop::sample::Index>(), 0usize..3), 0..6),
        dups in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        tamper in prop::collection::vec(
            (
                any::<prop::sample::Index>(),
                // Mostly the bytes of the fields the step reads (byte 1:
                // the flags), sometimes any.
                prop_oneof![
                    prop::sample::select(vec![
                        0usize, 1, 1, 1, 1, 2, 3, 4, 7, 9, 11, 12, 19, 24, 31, 35, 36, 39, 40, 43,
                    ]),
                    0usize..44,
                ],
                0u8..8,
                proptest::option::of(any::<u8>()),
            ),
            0..6,
        ),
        mem_ops in prop::collection::vec(
            (any::<prop::sample::Index>(), prop::sample::select(vec![
                MemOp::Disable, MemOp::Enable, MemOp::DisableGeneration, MemOp::Reregister,
                MemOp::Forget,
            ])), 0..3),
        cut in prop::collection::vec((any::<prop::sample::Index>(), 0usize..8), 0..3),
        flags in prop::collection::vec((any::<prop::sample::Index>(), 0u8..6), 0..3),
        same_len: bool,
        burst in 1usize..12,
    ) {
        let mut lens = lens;
        if same_len && lens.len() > 1 {
            lens[1] = lens[0];
        }
        let (mut fast, reg) = target(RW, 4 * 4096);
        let (mut general, _) = target(RW, 4 * 4096);
        // Message i: from source 1 + i % 2, ID 20 + i / 2, at offset
        // 4096 * (i / 2): messages 0 and 1 share ID and place (and differ
        // in source), 2 and 3 too. Their packets interleaved in bursts.
        let mut per_msg = Vec::new();
        for (i, &len) in lens.iter().enumerate() {
            let data = pattern(len, i as u8);
            let m = OutgoingMessage::new(
                write_op(&reg, 4096 * (i / 2) as u64, len as u32, (i == 1).then_some(0xabc)),
                msg_id(20 + (i / 2) as u16),
                max_ses_len,
            ).unwrap();
            per_msg.push(packets(&m, &data));
        }
        let mut queue: Vec<(u8, Vec<u8>)> = Vec::new();
        for k in (0..per_msg.iter().map(Vec::len).max().unwrap_or(0)).step_by(burst) {
            for (i, pkts) in per_msg.iter().enumerate() {
                for p in pkts.iter().skip(k).take(burst) {
                    queue.push((1 + (i % 2) as u8, p.clone()));
                }
            }
        }
        // Mostly in order: a few packets moved by up to two places.
        for (at, by) in swaps {
            let i = at.index(queue.len());
            let j = (i + by).min(queue.len() - 1);
            queue.swap(i, j);
        }
        for d in dups {
            let p = queue[d.index(queue.len())].clone();
            let at = d.index(queue.len() + 1);
            queue.insert(at, p);
        }
        for (at, byte, bit, set) in tamper {
            let i = at.index(queue.len());
            let p = &mut queue[i].1;
            if byte < p.len() {
                p[byte] = set.unwrap_or(p[byte] ^ (1 << bit));
            }
        }
        // Flag bits (`ie`, `rel`, `hd`, `eom`, `som`, `dc`).
        for (at, bit) in flags {
            let i = at.index(queue.len());
            queue[i].1[1] ^= 1 << bit;
        }
        for (at, n) in cut {
            let i = at.index(queue.len());
            let p = &mut queue[i].1;
            p.truncate(p.len().saturating_sub(n));
        }
        let ops: Vec<(usize, MemOp)> =
            mem_ops.iter().map(|(at, op)| (at.index(queue.len() + 1), *op)).collect();
        for (at, (from, pkt)) in queue.iter().enumerate() {
            for &(_, op) in ops.iter().filter(|(a, _)| *a == at) {
                for t in [&mut fast, &mut general] {
                    let a = reg.addr();
                    match op {
                        MemOp::Disable => { let _ = t.memory_mut().disable(a); }
                        MemOp::Enable => { let _ = t.memory_mut().enable(a); }
                        MemOp::DisableGeneration => {
                            let _ = t.memory_mut().disable_generation(a);
                        }
                        MemOp::Reregister => {
                            let _ = t.memory_mut().deregister(a);
                            let spec = RegionSpec::new(a, KEY, RW);
                            let _ = t.memory_mut().register(spec, vec![FILL; 4 * 4096]);
                        }
                        MemOp::Forget => { t.forget_source(src(1)); }
                    }
                }
            }
            let Some((view, payload)) = view_of(pkt) else {
                continue;
            };
            let a = fast.handle_standard(src(*from), view, payload);
            let req = SesRepr::Standard(view.request());
            let b = general.handle_request(src(*from), &req, payload);
            prop_assert_eq!(a, b);
            prop_assert_eq!(region(&fast, reg.addr()), region(&general, reg.addr()));
            prop_assert_eq!(format!("{:?}", fast.msgs), format!("{:?}", general.msgs));
            prop_assert_eq!(fast.last, general.last);
            prop_assert_eq!(fast.inflight_messages(), general.inflight_messages());
            prop_assert!(fast.lookups_agree());
            prop_assert_eq!(fast.poll_event(), general.poll_event());
        }
    }
}

// ---------------------------------------------------------------------------
// Receives shared between targets
// ---------------------------------------------------------------------------

/// Posts the same untagged receive at both targets, as a multi-worker
/// daemon offers an any-source receive to every worker.
fn post_shared(
    a: &mut SesTarget<Vec<u8>>,
    b: &mut SesTarget<Vec<u8>>,
    offset: u64,
) -> (RecvId, RecvId) {
    let c = Arc::new(SharedRecv::new());
    let spec = recv_spec(offset, 16, RecvKind::Untagged);
    (
        a.post_shared_recv(spec, Arc::clone(&c)).unwrap().unwrap(),
        b.post_shared_recv(spec, c).unwrap().unwrap(),
    )
}

#[test]
fn a_shared_receive_takes_exactly_one_send_across_targets_in_posting_order() {
    let (mut a, _) = target(Access::RECV, 64);
    let (mut b, _) = target(Access::RECV, 64);
    let r: Vec<(RecvId, RecvId)> = (0..3)
        .map(|i| post_shared(&mut a, &mut b, i * 16))
        .collect();

    // b's sender is first: it takes the oldest receive.
    assert_eq!(rc(&send(&mut b, 1, None, b"from-b", 1024)), ReturnCode::Ok);
    assert_eq!(recv_event(&mut b).recv, r[0].1);
    // a's sender skips the copy b took and takes the next two, in order.
    for (i, word) in [b"a-one", b"a-two"].iter().enumerate() {
        let rsp = guaranteed_rsp(&send(&mut a, 2 + i as u16, None, *word, 1024));
        assert_eq!(rsp.list, ListKind::Expected);
        assert_eq!(recv_event(&mut a).recv, r[1 + i].0);
    }
    assert_eq!(&region(&a, addr(5))[16..21], b"a-one");
    assert_eq!(&region(&a, addr(5))[32..37], b"a-two");
    // Nothing is left for either: both hold the next send as unexpected.
    let rsp = guaranteed_rsp(&send(&mut a, 4, None, b"late", 1024));
    assert_eq!(rsp.list, ListKind::Overflow);
    let rsp = guaranteed_rsp(&send(&mut b, 5, None, b"late", 1024));
    assert_eq!(rsp.list, ListKind::Overflow);
    assert_eq!((a.poll_event(), b.poll_event()), (None, None));
    assert_eq!(a.unexpected_usage().0, 1);
    assert_eq!(b.unexpected_usage().0, 1);
    // The copies each lost wait for a sweep to report them.
    assert_eq!((a.shared_recvs(), b.shared_recvs()), (1, 2));
    assert_eq!(a.sweep_shared_recvs(), vec![r[0].0]);
    let mut lost = b.sweep_shared_recvs();
    lost.sort();
    assert_eq!(lost, vec![r[1].1, r[2].1]);
    assert_eq!((a.shared_recvs(), b.shared_recvs()), (0, 0));
    assert_eq!(b.posted_receives(job(7), pid(3)), 0);
}

#[test]
fn shared_copies_taken_elsewhere_are_swept_and_take_no_unexpected_message() {
    let (mut a, _) = target(Access::RECV, 64);
    let (mut b, _) = target(Access::RECV, 64);
    // A send waits unexpected at each target.
    for t in [&mut a, &mut b] {
        let rsp = guaranteed_rsp(&send(t, 1, None, b"early", 1024));
        assert_eq!(rsp.list, ListKind::Overflow);
    }
    // Posted at a first: a takes its message; b's copy takes nothing and
    // is not posted.
    let c = Arc::new(SharedRecv::new());
    let spec = recv_spec(0, 16, RecvKind::Untagged);
    let ra = a.post_shared_recv(spec, Arc::clone(&c)).unwrap().unwrap();
    assert_eq!(b.post_shared_recv(spec, c), Ok(None));
    assert_eq!(recv_event(&mut a).recv, ra);
    assert_eq!(b.poll_event(), None);
    assert_eq!((a.unexpected_usage().0, b.unexpected_usage().0), (0, 1));
    assert_eq!(b.posted_receives(job(7), pid(3)), 0);

    // The next one waits at a and takes b's message at b; a's copy is
    // passed over by a's next send, which takes the receive after it.
    let (ra, rb) = post_shared(&mut a, &mut b, 16);
    assert_eq!(recv_event(&mut b).recv, rb);
    assert_eq!(b.unexpected_usage().0, 0);
    assert_eq!(a.posted_receives(job(7), pid(3)), 1);
    // Posted where nothing waits, then taken at a: b's copy stays queued
    // until a sweep drops it.
    let (ra2, rb2) = post_shared(&mut a, &mut b, 32);
    assert_ne!(ra, ra2);
    assert_eq!(rc(&send(&mut a, 2, None, b"now", 1024)), ReturnCode::Ok);
    assert_eq!(recv_event(&mut a).recv, ra2);
    assert_eq!(a.posted_receives(job(7), pid(3)), 0);
    // The copy a's send passed over is reported by a's sweep.
    assert_eq!(a.sweep_shared_recvs(), vec![ra]);
    assert_eq!(b.posted_receives(job(7), pid(3)), 1);
    assert_eq!(b.sweep_shared_recvs(), vec![rb2]);
    assert_eq!(b.posted_receives(job(7), pid(3)), 0);
    assert_eq!(a.sweep_shared_recvs(), vec![]);
    assert_eq!(b.sweep_shared_recvs(), vec![]);
    assert_eq!((a.shared_recvs(), b.shared_recvs()), (0, 0));
}

#[test]
fn posted_receives_are_bounded_and_refused_beyond() {
    let mut t: SesTarget<Vec<u8>> = SesTarget::new(TargetConfig {
        max_posted_receives: 2,
        ..TargetConfig::default()
    });
    t.memory_mut()
        .register(RegionSpec::new(addr(5), KEY, Access::RECV), vec![FILL; 64])
        .unwrap();
    let spec = recv_spec(0, 16, RecvKind::Untagged);
    let first = t.post_recv(spec).unwrap();
    t.post_recv(spec).unwrap();
    assert_eq!(t.post_recv(spec), Err(PostError::TooManyReceives));
    let shared = Arc::new(SharedRecv::new());
    assert_eq!(
        t.post_shared_recv(spec, shared),
        Err(PostError::TooManyReceives)
    );
    // A send takes one: room for one more.
    assert_eq!(rc(&send(&mut t, 1, None, b"x", 1024)), ReturnCode::Ok);
    assert_eq!(recv_event(&mut t).recv, first);
    t.post_recv(spec).unwrap();
    assert_eq!(t.post_recv(spec), Err(PostError::TooManyReceives));
}

#[test]
fn a_released_process_leaves_no_receive_or_unexpected_message_behind() {
    let (mut t, _) = target(Access::RECV, 256);
    // The process posted two receives and has one unexpected message.
    let r0 = t.post_recv(recv_spec(0, 16, RecvKind::Untagged)).unwrap();
    let r1 = t.post_recv(recv_spec(16, 16, tagged(0x77, 0))).unwrap();
    let rsp = guaranteed_rsp(&send(&mut t, 1, Some(0x99), b"early", 1024));
    assert_eq!(rsp.list, ListKind::Overflow);
    assert!(t.peek_unexpected(job(7), pid(3), tagged(0x99, 0)).is_some());

    // It goes: both receives are withdrawn, without events, and the
    // unexpected message is freed.
    let mut gone = t.release_process(job(7), pid(3));
    gone.sort_by_key(|r| r.0);
    assert_eq!(gone, vec![r0, r1]);
    assert_eq!(t.posted_receives(job(7), pid(3)), 0);
    assert!(t.peek_unexpected(job(7), pid(3), tagged(0x99, 0)).is_none());
    assert_eq!(t.poll_event(), None);
    assert!(!t.cancel_recv(r0));

    // The next process with that PIDonFEP: a send waits for its own
    // receive instead of landing in the old one's buffer.
    let rsp = guaranteed_rsp(&send(&mut t, 2, None, b"fresh", 1024));
    assert_eq!(rsp.list, ListKind::Overflow);
    assert_eq!(t.poll_event(), None);
    let r2 = t.post_recv(recv_spec(32, 16, RecvKind::Untagged)).unwrap();
    let e = recv_event(&mut t);
    assert_eq!((e.recv, e.list), (r2, ListKind::Overflow));
    assert_eq!(&region(&t, addr(5))[32..37], b"fresh");
}
