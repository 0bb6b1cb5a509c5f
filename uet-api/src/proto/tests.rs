//! Codec properties: every message round-trips with its frame length equal
//! to its encoded length; random and mutated bytes never panic; limits and
//! malformed frames are typed errors.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;

fn arb_ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<u32>().prop_map(|v| IpAddr::V4(Ipv4Addr::from_bits(v))),
        any::<u128>().prop_map(|v| IpAddr::V6(Ipv6Addr::from_bits(v))),
    ]
}

fn arb_str() -> impl Strategy<Value = String> {
    prop_oneof![".{0,40}", Just(String::new()), "[a-z]{0,300}"]
}

fn arb_local() -> impl Strategy<Value = LocalRef> {
    (any::<u32>(), any::<u64>()).prop_map(|(h, offset)| LocalRef {
        handle: Handle(h),
        offset,
    })
}

fn arb_region() -> impl Strategy<Value = RemoteRegion> {
    (
        arb_ip(),
        0u32..1 << 24,
        0u16..1 << 12,
        0u16..1 << 12,
        any::<u8>(),
        any::<u64>(),
    )
        .prop_map(|(fep, job, pid, ri, generation, key)| RemoteRegion {
            fep,
            job,
            pid,
            ri,
            generation,
            key,
        })
}

fn arb_remote() -> impl Strategy<Value = RemoteRef> {
    (arb_region(), any::<u64>()).prop_map(|(r, o)| r.at(o))
}

fn arb_peer() -> impl Strategy<Value = Peer> {
    (arb_ip(), 0u32..1 << 24, 0u16..1 << 12).prop_map(|(fep, job, pid)| Peer { fep, job, pid })
}

fn arb_access() -> impl Strategy<Value = Access> {
    (0u8..=0x0b).prop_filter_map("rights a client may ask for", client_access)
}

fn arb_code() -> impl Strategy<Value = ErrorCode> {
    any::<u16>().prop_map(ErrorCode::from_code)
}

fn arb_client_msg() -> impl Strategy<Value = ClientMsg> {
    prop_oneof![
        (any::<u16>(), arb_str()).prop_map(|(version, name)| ClientMsg::Hello { version, name }),
        Just(ClientMsg::Bye),
        Just(ClientMsg::Stats),
        Just(ClientMsg::StatsStream),
        (
            any::<u64>(),
            arb_access(),
            proptest::option::of(any::<u64>())
        )
            .prop_map(|(len, access, key)| ClientMsg::Register { len, access, key }),
        any::<u64>().prop_map(|len| ClientMsg::RegisterLocal { len }),
        (any::<u32>(), any::<u32>(), arb_ip()).prop_map(|(sq_entries, cq_entries, fep)| {
            ClientMsg::RingOpen {
                sq_entries,
                cq_entries,
                fep,
            }
        }),
        any::<u32>().prop_map(|h| ClientMsg::Deregister { handle: Handle(h) }),
        (
            any::<u64>(),
            arb_local(),
            arb_remote(),
            any::<u32>(),
            proptest::option::of(any::<u64>())
        )
            .prop_map(|(t, local, remote, len, header_data)| ClientMsg::Write {
                tag: Tag(t),
                local,
                remote,
                len,
                header_data
            }),
        (any::<u64>(), arb_local(), arb_remote(), any::<u32>()).prop_map(
            |(t, local, remote, len)| ClientMsg::Read {
                tag: Tag(t),
                local,
                remote,
                len
            }
        ),
        (
            any::<u64>(),
            arb_local(),
            arb_peer(),
            any::<u32>(),
            proptest::option::of(any::<u64>())
        )
            .prop_map(|(t, local, dst, len, header_data)| ClientMsg::Send {
                tag: Tag(t),
                local,
                dst,
                len,
                header_data
            }),
        (
            any::<u64>(),
            arb_local(),
            arb_peer(),
            any::<u32>(),
            any::<u64>(),
            proptest::option::of(any::<u64>())
        )
            .prop_map(|(t, local, dst, len, match_bits, header_data)| {
                ClientMsg::TaggedSend {
                    tag: Tag(t),
                    local,
                    dst,
                    len,
                    match_bits,
                    header_data,
                }
            }),
        (
            any::<u64>(),
            arb_local(),
            any::<u32>(),
            proptest::option::of((any::<u64>(), any::<u64>()))
        )
            .prop_map(|(t, local, len, tagged)| ClientMsg::PostRecv {
                tag: Tag(t),
                local,
                len,
                tagged
            }),
        arb_capture_spec().prop_map(ClientMsg::Capture),
        Just(ClientMsg::CaptureStop),
    ]
}

fn arb_capture_direction() -> impl Strategy<Value = CaptureDirection> {
    (1u8..=3).prop_filter_map("defined", CaptureDirection::from_bits)
}

fn arb_capture_spec() -> impl Strategy<Value = CaptureSpec> {
    (
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<u64>()),
        any::<u32>(),
        arb_capture_direction(),
    )
        .prop_map(
            |(max_frames, max_duration_ms, snaplen, direction)| CaptureSpec {
                max_frames,
                max_duration_ms,
                snaplen,
                direction,
            },
        )
}

fn arb_captured_frame() -> impl Strategy<Value = CapturedFrame> {
    (
        any::<u64>(),
        prop_oneof![Just(Direction::Rx), Just(Direction::Tx)],
        proptest::collection::vec(any::<u8>(), 0..200),
        any::<u32>(),
    )
        .prop_map(|(timestamp_ns, direction, data, extra)| CapturedFrame {
            timestamp_ns,
            direction,
            orig_len: (data.len() as u32).saturating_add(extra % 10_000),
            data,
        })
}

fn arb_status() -> impl Strategy<Value = Status> {
    prop_oneof![
        Just(Status::Ok),
        any::<u8>().prop_map(|return_code| Status::Remote { return_code }),
        (arb_code(), arb_str()).prop_map(|(code, message)| Status::Local { code, message }),
        (any::<u16>(), arb_str()).prop_map(|(code, message)| Status::Transport { code, message }),
    ]
}

fn arb_daemon_msg() -> impl Strategy<Value = DaemonMsg> {
    prop_oneof![
        (any::<u16>(), arb_ip(), 0u32..1 << 24, 0u16..1 << 12).prop_map(
            |(version, fep, job, pid)| DaemonMsg::HelloOk {
                version,
                fep,
                job,
                pid
            }
        ),
        (arb_code(), arb_str()).prop_map(|(code, message)| DaemonMsg::Error { code, message }),
        (any::<u32>(), arb_region(),).prop_map(|(h, r)| DaemonMsg::Registered {
            handle: Handle(h),
            job: r.job,
            pid: r.pid,
            ri: r.ri,
            key: r.key,
            generation: r.generation
        }),
        any::<u32>().prop_map(|h| DaemonMsg::LocalRegistered { handle: Handle(h) }),
        Just(DaemonMsg::RingOpened),
        any::<u32>().prop_map(|h| DaemonMsg::Deregistered { handle: Handle(h) }),
        arb_str().prop_map(|json| DaemonMsg::StatsReply { json }),
        (arb_str(), any::<bool>()).prop_map(|(data, last)| DaemonMsg::StatsChunk { data, last }),
        (any::<u64>(), arb_status(), any::<u64>()).prop_map(|(t, status, bytes)| {
            DaemonMsg::Completion(Completion {
                tag: Tag(t),
                status,
                bytes,
            })
        }),
        (
            any::<u64>(),
            arb_ip(),
            any::<u64>(),
            any::<u32>(),
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>())
        )
            .prop_map(
                |(t, src_fep, bytes, message_len, header_data, match_bits)| {
                    DaemonMsg::RecvCompletion(RecvCompletion {
                        tag: Tag(t),
                        src_fep,
                        bytes,
                        message_len,
                        header_data,
                        match_bits,
                    })
                }
            ),
        (
            any::<u32>(),
            arb_ip(),
            any::<u64>(),
            any::<u32>(),
            any::<u64>()
        )
            .prop_map(|(h, src_fep, offset, len, header_data)| {
                DaemonMsg::WriteArrived(WriteArrived {
                    handle: Handle(h),
                    src_fep,
                    offset,
                    len,
                    header_data,
                })
            }),
        any::<u32>().prop_map(|snaplen| DaemonMsg::CaptureStarted { snaplen }),
        arb_captured_frame().prop_map(DaemonMsg::CaptureFrame),
        (any::<u64>(), any::<u64>(), any::<u8>()).prop_map(|(frames, dropped, r)| {
            DaemonMsg::CaptureEnd(CaptureEnd {
                frames,
                dropped,
                reason: CaptureEndReason::from_code(r),
            })
        }),
    ]
}

/// How many random inputs the never-panics properties run: a CI-sized
/// default; `UET_FUZZ_CASES=1000000 cargo test -p uet-api --release
/// proto::` is the long run.
fn fuzz_cases() -> u32 {
    std::env::var("UET_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

fn check_round_trip<M: Message + PartialEq + fmt::Debug>(m: &M) -> Result<(), TestCaseError> {
    let f = m.to_frame().unwrap();
    let prefix = u32::from_le_bytes(f[..4].try_into().unwrap()) as usize;
    prop_assert_eq!(prefix + 4, f.len(), "frame length == encoded length");
    prop_assert_eq!(u16::from_le_bytes([f[4], f[5]]), m.msg_type());
    prop_assert_eq!(frame_len(&f).unwrap(), Some(f.len()));
    let back = M::decode(&f).unwrap();
    prop_assert_eq!(&back, m);
    // One byte short of the body is never a valid message of the same
    // shape, one byte more is trailing.
    let mut long = f;
    long.push(0);
    long[..4].copy_from_slice(&((prefix + 1) as u32).to_le_bytes());
    prop_assert!(
        matches!(
            M::decode(&long),
            Err(DecodeError::TrailingBytes { extra: 1, .. })
        ),
        "{:?}",
        M::decode(&long)
    );
    Ok(())
}

/// Feeds `bytes` to a reader in the given chunk sizes, collecting frames.
fn feed_chunks<M: Message>(bytes: &[u8], chunks: &[usize]) -> Result<Vec<M>, DecodeError> {
    let mut r = FrameReader::new();
    let mut out = Vec::new();
    let mut rest = bytes;
    let mut sizes = chunks.iter().copied().cycle();
    while !rest.is_empty() {
        let n = sizes.next().unwrap_or(1).clamp(1, rest.len());
        let took = r.extend(&rest[..n]);
        rest = &rest[took..];
        while let Some(f) = r.next_frame::<M>()? {
            out.push(f.msg);
        }
    }
    assert_eq!(r.buffered(), 0);
    Ok(out)
}

proptest! {
    #[test]
    fn client_msgs_round_trip(m in arb_client_msg()) {
        check_round_trip(&m)?;
    }

    #[test]
    fn daemon_msgs_round_trip(m in arb_daemon_msg()) {
        check_round_trip(&m)?;
    }

    /// A stream of frames split anywhere comes out of the reader whole and
    /// in order (frames that carry a descriptor need one: not here).
    #[test]
    fn reader_reassembles_any_split(msgs in proptest::collection::vec(
                                        arb_daemon_msg().prop_filter("no descriptor", |m| !m.takes_fd()),
                                        1..12),
                                    chunks in proptest::collection::vec(1usize..200, 1..8)) {
        let mut bytes = Vec::new();
        for m in &msgs {
            m.encode(&mut bytes).unwrap();
        }
        let got = feed_chunks::<DaemonMsg>(&bytes, &chunks).unwrap();
        prop_assert_eq!(got, msgs);
    }

    #[test]
    fn region_text_round_trips(r in arb_region()) {
        let s = r.to_string();
        prop_assert_eq!(s.parse::<RemoteRegion>(), Ok(r));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: fuzz_cases(), ..ProptestConfig::default() })]

    /// Arbitrary bytes never panic either direction's decoder or the
    /// reader, and whatever decodes re-encodes to the same bytes.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300),
                                   ty in prop_oneof![Just(None), any::<u16>().prop_map(Some)]) {
        let mut bytes = bytes;
        if let Some(ty) = ty {
            // A plausible header, so bodies get exercised too.
            let len = bytes.len().max(6);
            bytes.resize(len, 0);
            bytes[..4].copy_from_slice(&((len - 4) as u32).to_le_bytes());
            bytes[4..6].copy_from_slice(&ty.to_le_bytes());
        }
        if let Ok(m) = ClientMsg::decode(&bytes) {
            prop_assert_eq!(m.to_frame().unwrap(), bytes.clone());
        }
        if let Ok(m) = DaemonMsg::decode(&bytes) {
            prop_assert_eq!(m.to_frame().unwrap(), bytes.clone());
        }
        let mut r = FrameReader::new();
        r.extend(&bytes);
        while let Ok(Some(_)) = r.next_frame::<ClientMsg>() {}
    }

    /// Valid frames with flipped bytes, cut or extended, never panic, and
    /// an error names a position inside the frame.
    #[test]
    fn mutated_frames_never_panic(c in arb_client_msg(), d in arb_daemon_msg(),
                                  flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..), 0..4),
                                  cut in proptest::option::of(any::<prop::sample::Index>())) {
        for mut buf in [c.to_frame().unwrap(), d.to_frame().unwrap()] {
            let n = buf.len();
            for (i, x) in &flips {
                buf[i.index(n)] ^= x;
            }
            if let Some(c) = &cut {
                buf.truncate(c.index(n + 1));
            }
            for e in [ClientMsg::decode(&buf).err(), DaemonMsg::decode(&buf).err()].into_iter().flatten() {
                let _ = e.to_string();
                match e {
                    DecodeError::Truncated { at, .. }
                    | DecodeError::BadValue { at, .. }
                    | DecodeError::TrailingBytes { at, .. } => prop_assert!(at <= buf.len()),
                    _ => {}
                }
            }
            let mut r = FrameReader::new();
            r.extend(&buf);
            while let Ok(Some(_)) = r.next_frame::<DaemonMsg>() {}
        }
    }
}

#[test]
fn hello_keeps_any_version_for_the_daemon_to_judge() {
    // The codec carries a foreign version; refusing it is the daemon's
    // (Error{VersionMismatch}) and the client's (ClientError) business.
    let m = ClientMsg::Hello {
        version: PROTOCOL_VERSION + 1,
        name: "future".into(),
    };
    assert_eq!(ClientMsg::decode(&m.to_frame().unwrap()).unwrap(), m);
    // The Hello layout is frozen: magic, then the version at bytes 10..12.
    let f = m.to_frame().unwrap();
    assert_eq!(&f[6..10], b"UETa");
    assert_eq!(u16::from_le_bytes([f[10], f[11]]), PROTOCOL_VERSION + 1);
}

#[test]
fn hello_with_wrong_magic_is_bad_value() {
    let mut f = ClientMsg::Hello {
        version: 1,
        name: "x".into(),
    }
    .to_frame()
    .unwrap();
    f[6] = b'X';
    assert_eq!(
        ClientMsg::decode(&f),
        Err(DecodeError::BadValue {
            ty: ty::HELLO,
            field: "magic",
            at: 6
        })
    );
}

#[test]
fn oversized_prefix_is_refused_before_buffering() {
    let mut r = FrameReader::new();
    // A prefix announcing 4 GiB: refused as soon as its 4 bytes are in.
    r.extend(&u32::MAX.to_le_bytes());
    assert_eq!(
        r.next_frame::<ClientMsg>().unwrap_err(),
        DecodeError::FrameTooLarge {
            len: u64::from(u32::MAX) + 4
        }
    );
    // Sticky.
    assert!(r.next_frame::<ClientMsg>().is_err());
    // Exactly one byte over the limit.
    let over = (MAX_FRAME_LEN - 4 + 1) as u32;
    assert!(matches!(
        frame_len(&over.to_le_bytes()),
        Err(DecodeError::FrameTooLarge { len }) if len == MAX_FRAME_LEN as u64 + 1
    ));
    // The limit itself is fine.
    assert_eq!(
        frame_len(&((MAX_FRAME_LEN - 4) as u32).to_le_bytes()),
        Ok(Some(MAX_FRAME_LEN))
    );
    assert_eq!(
        frame_len(&1u32.to_le_bytes()),
        Err(DecodeError::FrameTooShort { len: 1 })
    );
}

#[test]
fn oversized_message_does_not_encode() {
    let m = DaemonMsg::StatsReply {
        json: "x".repeat(MAX_FRAME_LEN),
    };
    let mut out = vec![1, 2, 3];
    assert!(m.encode(&mut out).is_err());
    assert_eq!(out, [1, 2, 3], "output untouched on error");
    // The largest string that fits does encode, in one max-size frame.
    let fits = DaemonMsg::StatsReply {
        json: "x".repeat(MAX_FRAME_LEN - HEADER_LEN - 2),
    };
    let f = fits.to_frame().unwrap();
    assert_eq!(f.len(), MAX_FRAME_LEN);
    let mut r = FrameReader::new();
    assert_eq!(r.extend(&f), MAX_FRAME_LEN);
    assert_eq!(r.next_frame::<DaemonMsg>().unwrap().unwrap().msg, fits);
}

/// Concatenated `data` of `chunks`, checking that each encodes within
/// the frame limit and only the last is marked.
fn reassemble(chunks: Vec<DaemonMsg>) -> String {
    let n = chunks.len();
    let mut doc = String::new();
    for (i, c) in chunks.into_iter().enumerate() {
        let f = c.to_frame().expect("a chunk fits one frame");
        assert!(f.len() <= MAX_FRAME_LEN);
        assert_eq!(DaemonMsg::decode(&f).unwrap(), c);
        let DaemonMsg::StatsChunk { data, last } = c else {
            panic!("{c:?}");
        };
        assert_eq!(last, i + 1 == n, "only the last chunk is marked");
        doc.push_str(&data);
    }
    doc
}

#[test]
fn a_stats_document_of_any_length_streams_in_chunks_that_fit_a_frame() {
    // Empty, exactly one chunk, one byte more, and several chunks with
    // multi-byte characters straddling every cut.
    for doc in [
        String::new(),
        "x".repeat(MAX_STATS_CHUNK),
        "x".repeat(MAX_STATS_CHUNK + 1),
        "é→€𝄞".repeat(3 * MAX_STATS_CHUNK / 10 + 7),
    ] {
        let chunks: Vec<_> = stats_chunks(&doc).collect();
        // Every piece but the last is full up to a character boundary.
        for c in &chunks[..chunks.len() - 1] {
            let DaemonMsg::StatsChunk { data, .. } = c else {
                panic!("{c:?}");
            };
            assert!(data.len() + 3 >= MAX_STATS_CHUNK, "{}", data.len());
        }
        if doc.is_ascii() {
            assert_eq!(chunks.len(), doc.len().div_ceil(MAX_STATS_CHUNK).max(1));
        }
        assert_eq!(reassemble(chunks), doc);
    }
    // A chunk of the maximum size is a frame of the maximum size.
    let full = stats_chunks(&"y".repeat(MAX_STATS_CHUNK))
        .next()
        .unwrap()
        .to_frame()
        .unwrap();
    assert_eq!(full.len(), MAX_FRAME_LEN);
}

#[test]
fn unknown_type_and_wrong_direction_are_errors() {
    let f = DaemonMsg::Deregistered { handle: Handle(1) }
        .to_frame()
        .unwrap();
    assert_eq!(
        ClientMsg::decode(&f),
        Err(DecodeError::UnknownType {
            ty: ty::DEREGISTERED
        })
    );
    let f = [2, 0, 0, 0, 0x99, 0x99];
    assert_eq!(
        DaemonMsg::decode(&f),
        Err(DecodeError::UnknownType { ty: 0x9999 })
    );
}

#[test]
fn spec_field_widths_are_enforced() {
    let mut f = DaemonMsg::HelloOk {
        version: 1,
        fep: Ipv4Addr::LOCALHOST.into(),
        job: 7,
        pid: 1,
    }
    .to_frame()
    .unwrap();
    // job at 6 + 2 (version) + 5 (ip) = 13: set bit 24.
    f[16] = 1;
    assert_eq!(
        DaemonMsg::decode(&f),
        Err(DecodeError::BadValue {
            ty: ty::HELLO_OK,
            field: "job",
            at: 13
        })
    );
    let mut f = ClientMsg::Register {
        len: 1,
        access: Access::REMOTE_WRITE,
        key: None,
    }
    .to_frame()
    .unwrap();
    f[14] = 0x04; // the reserved atomic bit
    assert_eq!(
        ClientMsg::decode(&f),
        Err(DecodeError::BadValue {
            ty: ty::REGISTER,
            field: "access",
            at: 14
        })
    );
}

#[test]
fn truncated_body_names_the_field() {
    let f = ClientMsg::Deregister { handle: Handle(5) }
        .to_frame()
        .unwrap();
    let mut short = f[..8].to_vec();
    short[..4].copy_from_slice(&4u32.to_le_bytes());
    assert_eq!(
        ClientMsg::decode(&short),
        Err(DecodeError::Truncated {
            ty: ty::DEREGISTER,
            field: "handle",
            at: 6
        })
    );
}

mod fds {
    use std::os::fd::OwnedFd;

    use super::*;

    fn some_fd() -> OwnedFd {
        rustix::fs::memfd_create("t", rustix::fs::MemfdFlags::CLOEXEC).unwrap()
    }

    #[test]
    fn register_takes_the_fd_that_came_with_it() {
        let mut r = FrameReader::new();
        let reg = ClientMsg::Register {
            len: 4096,
            access: Access::REMOTE_WRITE,
            key: Some(9),
        };
        let mut bytes = ClientMsg::Stats.to_frame().unwrap();
        reg.encode(&mut bytes).unwrap();
        r.extend(&bytes);
        r.push_fd(some_fd());
        let a = r.next_frame::<ClientMsg>().unwrap().unwrap();
        assert_eq!(a.msg, ClientMsg::Stats);
        assert!(a.fd.is_none());
        let b = r.next_frame::<ClientMsg>().unwrap().unwrap();
        assert_eq!(b.msg, reg);
        assert!(b.fd.is_some());
        assert_eq!(r.pending_fds(), 0);
    }

    #[test]
    fn register_without_fd_is_missing_fd() {
        let mut r = FrameReader::new();
        r.extend(&ClientMsg::RegisterLocal { len: 1 }.to_frame().unwrap());
        assert_eq!(
            r.next_frame::<ClientMsg>().unwrap_err(),
            DecodeError::MissingFd {
                ty: ty::REGISTER_LOCAL
            }
        );
    }

    #[test]
    fn fd_with_a_frame_that_takes_none_is_unexpected() {
        let mut r = FrameReader::new();
        r.extend(&ClientMsg::Stats.to_frame().unwrap());
        r.push_fd(some_fd());
        assert_eq!(
            r.next_frame::<ClientMsg>().unwrap_err(),
            DecodeError::UnexpectedFd
        );
    }

    #[test]
    fn too_many_fds() {
        let mut r = FrameReader::new();
        r.extend(&ClientMsg::RegisterLocal { len: 1 }.to_frame().unwrap());
        for _ in 0..=MAX_PENDING_FDS {
            r.push_fd(some_fd());
        }
        assert_eq!(
            r.next_frame::<ClientMsg>().unwrap_err(),
            DecodeError::TooManyFds
        );
        assert_eq!(r.pending_fds(), 0, "descriptors closed on failure");
    }
}

#[test]
fn capture_frame_of_full_snaplen_fits_a_frame() {
    let m = DaemonMsg::CaptureFrame(CapturedFrame {
        timestamp_ns: 1,
        direction: Direction::Tx,
        orig_len: MAX_SNAPLEN,
        data: vec![0xab; MAX_SNAPLEN as usize],
    });
    let f = m
        .to_frame()
        .expect("MAX_SNAPLEN bytes fit in MAX_FRAME_LEN");
    assert_eq!(DaemonMsg::decode(&f), Ok(m));
}

#[test]
fn capture_frame_shorter_than_its_data_is_bad_value() {
    let m = DaemonMsg::CaptureFrame(CapturedFrame {
        timestamp_ns: 7,
        direction: Direction::Rx,
        orig_len: 4,
        data: vec![1, 2, 3, 4],
    });
    let mut f = m.to_frame().unwrap();
    // orig_len sits after the type, the timestamp and the direction.
    let at = HEADER_LEN + 8 + 1;
    f[at..at + 4].copy_from_slice(&3u32.to_le_bytes());
    assert_eq!(
        DaemonMsg::decode(&f),
        Err(DecodeError::BadValue {
            ty: ty::CAPTURE_FRAME,
            field: "orig_len",
            at
        })
    );
}

#[test]
fn capture_directions_outside_the_defined_ones_are_bad_value() {
    let spec = CaptureSpec {
        max_frames: None,
        max_duration_ms: None,
        snaplen: 128,
        direction: CaptureDirection::Both,
    };
    let mut f = ClientMsg::Capture(spec).to_frame().unwrap();
    let at = f.len() - 1;
    for bad in [0u8, 4, 0xff] {
        f[at] = bad;
        assert_eq!(
            ClientMsg::decode(&f),
            Err(DecodeError::BadValue {
                ty: ty::CAPTURE,
                field: "direction",
                at
            })
        );
    }
    let end = DaemonMsg::CaptureFrame(CapturedFrame {
        timestamp_ns: 0,
        direction: Direction::Rx,
        orig_len: 0,
        data: Vec::new(),
    });
    let mut f = end.to_frame().unwrap();
    f[HEADER_LEN + 8] = 3;
    assert!(matches!(
        DaemonMsg::decode(&f),
        Err(DecodeError::BadValue {
            field: "direction",
            ..
        })
    ));
}

#[test]
fn capture_direction_filter() {
    use CaptureDirection as C;
    assert!(C::Rx.wants(Direction::Rx) && !C::Rx.wants(Direction::Tx));
    assert!(C::Tx.wants(Direction::Tx) && !C::Tx.wants(Direction::Rx));
    assert!(C::Both.wants(Direction::Rx) && C::Both.wants(Direction::Tx));
    assert_eq!("both".parse::<C>(), Ok(C::Both));
    assert!("up".parse::<C>().is_err());
}
