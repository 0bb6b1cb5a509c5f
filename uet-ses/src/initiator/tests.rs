//! Initiator traces: operations into packets, responses into completions.

use uet_wire::pds::NextHeader;
use uet_wire::ses::{
    ListKind, Opcode, ResponseOpcode, ReturnCode, SesRepr, SesResponseDataRepr, SesResponseRepr,
    SesStandardRepr, SomFields,
};
use uet_wire::{Len14, RiGeneration};

use super::*;
use crate::testutil::{addr, job, msg_id, pattern, pid, ri};
use crate::types::{LocalRegion, MemoryKey};

fn dst(offset: u64) -> RemoteAddr {
    RemoteAddr {
        region: addr(5),
        generation: RiGeneration::new(3).unwrap(),
        key: MemoryKey(0xabc),
        offset,
    }
}

fn write(len: u32, hd: Option<u64>) -> Operation {
    Operation::Write {
        dst: dst(0x100),
        src: LocalBuf::new(LocalRegion(2), 10),
        len,
        header_data: hd,
    }
}

/// Writes packet `i` and parses it back: `(header, payload)`.
fn emit(m: &OutgoingMessage, i: usize, local: &[u8]) -> (SesStandardRepr, Vec<u8>) {
    let mut buf = vec![0xffu8; 20000];
    let (nh, n) = m.write_packet(i, local, &mut buf).unwrap();
    assert_eq!(nh, NextHeader::RequestStd);
    assert_eq!(Some(n), m.packet_len(i));
    let Some(SesRepr::Standard(req)) = SesRepr::parse(nh, &buf[..n]).unwrap() else {
        panic!("not a standard request")
    };
    assert_eq!(req.ext(), None);
    (*req.header(), buf[44..n].to_vec())
}

#[test]
fn a_write_becomes_som_middle_and_eom_packets() {
    let local = pattern(200, 0);
    // 84 - 44 = 40 payload bytes per packet: 40 + 40 + 20.
    let m = OutgoingMessage::new(write(100, Some(0xdead)), msg_id(9), 84)
        .unwrap()
        .with_initiator(InitiatorId(42));
    assert_eq!(m.packet_count(), 3);
    assert_eq!(
        (0..4).map(|i| m.packet_len(i)).collect::<Vec<_>>(),
        [Some(84), Some(84), Some(64), None]
    );

    // Packet 0: UET_WRITE som hd rel, header data, request_length 100.
    let (h, payload) = emit(&m, 0, &local);
    assert_eq!(
        h,
        SesStandardRepr {
            opcode: Opcode::Write,
            flags: RequestFlags {
                dc: false,
                ie: false,
                rel: true,
                eom: false,
            },
            hd: true,
            som: SomFields::Start {
                header_data: 0xdead
            },
            message_id: msg_id(9),
            ri_generation: RiGeneration::new(3).unwrap(),
            job_id: job(7),
            pid_on_fep: pid(3),
            resource_index: ri(5),
            buffer_offset: 0x100,
            initiator: 42,
            memory_key: 0xabc,
            request_length: 100,
        }
    );
    assert_eq!(payload, local[10..50]);

    // Packet 1: non-SOM, 40 bytes at message offset 40, no hd.
    let (h, payload) = emit(&m, 1, &local);
    assert_eq!(
        h.som,
        SomFields::Continuation {
            payload_length: Len14::new(40).unwrap(),
            message_offset: 40
        }
    );
    assert!(!h.hd && !h.flags.eom);
    assert_eq!((h.request_length, h.buffer_offset), (100, 0x100));
    assert_eq!(payload, local[50..90]);

    // Packet 2: the last 20 bytes, eom.
    let (h, payload) = emit(&m, 2, &local);
    assert_eq!(
        h.som,
        SomFields::Continuation {
            payload_length: Len14::new(20).unwrap(),
            message_offset: 80
        }
    );
    assert!(h.flags.eom);
    assert_eq!(payload, local[90..110]);
}

#[test]
fn zero_length_message_is_one_som_eom_packet() {
    let m = OutgoingMessage::new(write(0, None), msg_id(1), 100).unwrap();
    assert_eq!(m.packet_count(), 1);
    // No payload: the local memory is not even looked at.
    let (h, payload) = emit(&m, 0, &[]);
    assert!(h.is_som() && h.flags.eom && !h.hd);
    assert_eq!(h.request_length, 0);
    assert!(payload.is_empty());
}

#[test]
fn a_read_is_one_header_only_request() {
    let op = Operation::Read {
        src: dst(0x40),
        dst: LocalBuf::new(LocalRegion(1), 0),
        len: 1 << 20,
    };
    let m = OutgoingMessage::new(op, msg_id(5), 100).unwrap();
    assert_eq!((m.packet_count(), m.packet_len(0)), (1, Some(44)));
    let (h, payload) = emit(&m, 0, &[]);
    assert_eq!(h.opcode, Opcode::Read);
    assert!(h.is_som() && h.flags.eom);
    assert_eq!(
        (h.request_length, h.buffer_offset, h.memory_key),
        (1 << 20, 0x40, 0xabc)
    );
    assert!(payload.is_empty());
    let sink = m.read_sink().unwrap();
    assert_eq!(
        (sink.message_id(), sink.destination()),
        (msg_id(5), LocalBuf::new(LocalRegion(1), 0))
    );
    assert!(
        OutgoingMessage::new(write(1, None), msg_id(1), 100)
            .unwrap()
            .read_sink()
            .is_none()
    );
}

#[test]
fn sends_carry_match_bits_in_the_key_field() {
    let local = pattern(8, 3);
    let op = Operation::TaggedSend {
        dst: addr(0),
        src: LocalBuf::default(),
        len: 8,
        match_bits: MatchBits(0x1122_3344_5566_7788),
        header_data: Some(5),
    };
    let m = OutgoingMessage::new(op, msg_id(2), 100).unwrap();
    let (h, payload) = emit(&m, 0, &local);
    assert_eq!(h.opcode, Opcode::TaggedSend);
    assert_eq!(h.memory_key, 0x1122_3344_5566_7788);
    assert_eq!((h.buffer_offset, h.ri_generation.get()), (0, 0));
    assert_eq!(h.header_data(), Some(5));
    assert_eq!(payload, local);
    let op = Operation::Send {
        dst: addr(0),
        src: LocalBuf::default(),
        len: 8,
        header_data: None,
    };
    let (h, _) = emit(
        &OutgoingMessage::new(op, msg_id(3), 100).unwrap(),
        0,
        &local,
    );
    assert_eq!((h.opcode, h.memory_key), (Opcode::Send, 0));
}

#[test]
fn payload_per_packet_is_capped_by_the_14_bit_length() {
    let m = OutgoingMessage::new(write(40000, None), msg_id(1), 20000).unwrap();
    assert_eq!(m.packet_count(), 3);
    assert_eq!(m.packet_len(0), Some(44 + 16383));
    assert_eq!(m.packet_len(2), Some(44 + 40000 - 2 * 16383));
}

#[test]
fn misuse_is_refused_and_writes_nothing() {
    assert_eq!(
        OutgoingMessage::new(write(10, None), msg_id(1), 44),
        Err(SubmitError::MaxSesLenTooSmall { min: 45 })
    );
    let m = OutgoingMessage::new(write(100, None), msg_id(1), 84).unwrap();
    let local = pattern(110, 0);
    let mut buf = [0u8; 83];
    assert_eq!(
        m.write_packet(0, &local[..], &mut buf),
        Err(EmitError::BufferTooSmall { required: 84 })
    );
    assert_eq!(buf, [0; 83]);
    assert_eq!(
        m.write_packet(3, &local[..], &mut [0; 100]),
        Err(EmitError::NoSuchPacket)
    );
    // The source is local[10..110]: 109 bytes are not enough.
    let mut buf = [0u8; 84];
    assert_eq!(
        m.write_packet(0, &local[..109], &mut buf),
        Err(EmitError::LocalOutOfBounds)
    );
    assert_eq!(buf, [0; 84]);
    assert_eq!(m.header(3), None);
}

fn rsp(opcode: ResponseOpcode, rc: ReturnCode, modified: u32) -> SesResponseRepr {
    SesResponseRepr {
        list: ListKind::Expected,
        opcode,
        return_code: rc,
        message_id: msg_id(9),
        ri_generation: RiGeneration::default(),
        job_id: job(7),
        modified_length: modified,
    }
}

#[test]
fn responses_become_completions() {
    let m = OutgoingMessage::new(write(100, None), msg_id(9), 1000).unwrap();
    assert_eq!(
        m.complete(&rsp(ResponseOpcode::Response, ReturnCode::Ok, 60)),
        Completion::ok(msg_id(9), 60)
    );
    // A PDS default response for a duplicate: success, full length.
    assert_eq!(
        m.complete(&rsp(ResponseOpcode::DefaultResponse, ReturnCode::Null, 0)),
        Completion::ok(msg_id(9), 100)
    );
    let c = m.complete(&rsp(ResponseOpcode::Response, ReturnCode::BadMkey, 0));
    assert_eq!(c.status, Err(CompletionError::Remote(ReturnCode::BadMkey)));
    assert!(!c.is_ok());
    assert_eq!(
        c.to_string(),
        "msg=9 error: peer returned BAD_MKEY mod_len=0"
    );
}

fn data_hdr(rc: ReturnCode, offset: u32, len: u16) -> SesResponseDataRepr {
    SesResponseDataRepr {
        list: ListKind::Expected,
        opcode: ResponseOpcode::ResponseWithData,
        return_code: rc,
        message_id: msg_id(9),
        job_id: job(7),
        read_request_message_id: msg_id(9),
        payload_length: Len14::new(len).unwrap(),
        modified_length: 16,
        message_offset: offset,
    }
}

#[test]
fn read_sink_places_by_offset_and_rejects_strays() {
    let mut local = vec![0u8; 20];
    let mut sink = ReadSink::new(msg_id(9), LocalBuf::new(LocalRegion(0), 4), 16);

    // Another read's data.
    let mut other = data_hdr(ReturnCode::Ok, 0, 4);
    other.read_request_message_id = msg_id(8);
    assert_eq!(
        sink.on_data(&other, &[1; 4], &mut local),
        ReadProgress::Ignored(ReadIgnored::OtherMessage)
    );
    // payload_length beyond the bytes given, or data beyond the read.
    assert_eq!(
        sink.on_data(&data_hdr(ReturnCode::Ok, 0, 4), &[1; 3], &mut local),
        ReadProgress::Ignored(ReadIgnored::Malformed)
    );
    assert_eq!(
        sink.on_data(&data_hdr(ReturnCode::Ok, 14, 4), &[1; 4], &mut local),
        ReadProgress::Ignored(ReadIgnored::Malformed)
    );
    assert_eq!(local, [0; 20]);

    // The second half, then the first (with a trailing byte to ignore).
    assert_eq!(
        sink.on_data(&data_hdr(ReturnCode::Ok, 8, 8), &[2; 8], &mut local),
        ReadProgress::Pending
    );
    assert_eq!(sink.received(), 8);
    assert_eq!(
        sink.on_response(&rsp(ResponseOpcode::Response, ReturnCode::Ok, 16)),
        ReadProgress::Pending
    );
    assert_eq!(
        sink.on_data(&data_hdr(ReturnCode::Ok, 0, 8), &[1; 9], &mut local),
        ReadProgress::Complete(Completion::ok(msg_id(9), 16))
    );
    assert!(sink.is_complete());
    assert_eq!(local, [[0; 4], [1; 4], [1; 4], [2; 4], [2; 4]].concat());
    assert_eq!(
        sink.on_data(&data_hdr(ReturnCode::Ok, 0, 8), &[3; 8], &mut local),
        ReadProgress::Ignored(ReadIgnored::AlreadyComplete)
    );
    assert_eq!(&local[4..8], &[1; 4]);
}

#[test]
fn read_sink_failures() {
    // An error code in a data fragment.
    let mut sink = ReadSink::new(msg_id(9), LocalBuf::default(), 16);
    assert_eq!(
        sink.on_data(&data_hdr(ReturnCode::Disabled, 0, 0), &[], &mut vec![0; 16]),
        ReadProgress::Complete(Completion::err(
            msg_id(9),
            CompletionError::Remote(ReturnCode::Disabled),
            0
        ))
    );
    // An error response.
    let mut sink = ReadSink::new(msg_id(9), LocalBuf::default(), 16);
    assert_eq!(
        sink.on_response(&rsp(ResponseOpcode::Response, ReturnCode::BadAddr, 0)),
        ReadProgress::Complete(Completion::err(
            msg_id(9),
            CompletionError::Remote(ReturnCode::BadAddr),
            0
        ))
    );
    assert_eq!(
        sink.on_response(&rsp(ResponseOpcode::Response, ReturnCode::Ok, 0)),
        ReadProgress::Ignored(ReadIgnored::AlreadyComplete)
    );
    // Local memory too small for the read.
    let mut sink = ReadSink::new(msg_id(9), LocalBuf::new(LocalRegion(0), 8), 16);
    let mut local = vec![0u8; 16];
    assert_eq!(
        sink.on_data(&data_hdr(ReturnCode::Ok, 0, 4), &[1; 4], &mut local),
        ReadProgress::Complete(Completion::err(
            msg_id(9),
            CompletionError::Local(LocalError::LocalOutOfBounds),
            0
        ))
    );
    assert_eq!(local, [0; 16]);
    // A zero-length read completes on a plain RC_OK response.
    let mut sink = ReadSink::new(msg_id(9), LocalBuf::default(), 0);
    assert_eq!(
        sink.on_response(&rsp(ResponseOpcode::Response, ReturnCode::Ok, 0)),
        ReadProgress::Complete(Completion::ok(msg_id(9), 0))
    );
    let mut sink = ReadSink::new(msg_id(9), LocalBuf::default(), 0);
    let mut r = rsp(ResponseOpcode::Response, ReturnCode::Ok, 0);
    r.message_id = msg_id(1);
    assert_eq!(
        sink.on_response(&r),
        ReadProgress::Ignored(ReadIgnored::OtherMessage)
    );
}

proptest::proptest! {
    /// `write_packet` patches a template for packets after the first: every
    /// packet must be byte for byte what emitting `header(i)` writes.
    #[test]
    fn template_packets_match_full_emit(
        kind in 0u8..4,
        len in 0u32..20_000,
        max_ses_len in 45usize..4200,
        hd in proptest::option::of(proptest::num::u64::ANY),
        initiator in proptest::option::of(proptest::num::u32::ANY),
        offset in proptest::num::u64::ANY,
        bits in proptest::num::u64::ANY,
    ) {
        let src = LocalBuf::new(LocalRegion(2), 3);
        let op = match kind {
            0 => Operation::Write { dst: dst(offset), src, len, header_data: hd },
            1 => Operation::Send { dst: addr(6), src, len, header_data: hd },
            2 => Operation::TaggedSend {
                dst: addr(7),
                src,
                len,
                match_bits: MatchBits(bits),
                header_data: hd,
            },
            _ => Operation::Read { src: dst(offset), dst: LocalBuf::new(LocalRegion(2), 0), len },
        };
        let mut m = OutgoingMessage::new(op, msg_id(0x1234), max_ses_len).unwrap();
        if let Some(i) = initiator {
            m = m.with_initiator(InitiatorId(i));
        }
        let local = pattern(len as usize + 3, 9);
        let (full, last) = m.packet_lens();
        for i in 0..m.packet_count() {
            let want = if i + 1 == m.packet_count() { last } else { full };
            proptest::prop_assert_eq!(m.packet_len(i), Some(want), "packet {}", i);
        }
        for i in 0..m.packet_count() {
            let mut got = vec![0xa5u8; 4300];
            let (nh, n) = m.write_packet(i, &local[..], &mut got).unwrap();
            let mut want = vec![0x5au8; 4300];
            m.header(i).unwrap().emit(&mut want);
            proptest::prop_assert_eq!(nh, NextHeader::RequestStd);
            proptest::prop_assert_eq!(&got[..SES_STANDARD_HEADER_LEN], &want[..SES_STANDARD_HEADER_LEN], "packet {}", i);
            proptest::prop_assert_eq!(Some(n), m.packet_len(i));
        }
    }
}
