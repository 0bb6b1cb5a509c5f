//! The clients against a scripted in-test server that speaks the protocol
//! with the crate's own daemon-side helpers (`FrameReader`, `sock`): a
//! harness, not a daemon. Every step is synchronised by the protocol
//! itself or by channels, never by sleeping.

use std::fs::File;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use uet_api::proto::{ClientMsg, DaemonMsg, FrameReader, Received};
use uet_api::region::{RegionFdError, check_region_fd};
use uet_api::sock::{self, RecvError};
use uet_api::{
    Access, CaptureDirection, CaptureEnd, CaptureEndReason, CaptureEvent, CaptureSpec,
    CapturedFrame, Client, ClientError, Completion, Direction, ErrorCode, Event, Handle,
    PROTOCOL_VERSION, Peer, Region, Status, Tag, WriteArrived,
};

const FEP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const JOB: u32 = 7;
const PID: u16 = 3;

/// The server end of a socketpair, driven by a test script.
struct Server {
    stream: UnixStream,
    reader: FrameReader,
}

impl Server {
    fn recv(&mut self) -> Received<ClientMsg> {
        sock::recv_frame(&self.stream, &mut self.reader).expect("client frame")
    }

    fn send(&self, m: &DaemonMsg) {
        sock::send_msg(&self.stream, m, None).expect("send to client");
    }

    /// Expects `Hello` and grants the standard session; returns the name.
    fn hello(&mut self) -> String {
        match self.recv().msg {
            ClientMsg::Hello { version, name } => {
                assert_eq!(version, PROTOCOL_VERSION);
                self.send(&DaemonMsg::HelloOk {
                    version: PROTOCOL_VERSION,
                    fep: FEP,
                    job: JOB,
                    pid: PID,
                });
                name
            }
            other => panic!("expected Hello, got {other:?}"),
        }
    }

    fn completion(&self, tag: Tag, status: Status, bytes: u64) {
        self.send(&DaemonMsg::Completion(Completion { tag, status, bytes }));
    }
}

/// A client end and a thread running `script` on the server end.
fn serve<T: Send + 'static>(
    script: impl FnOnce(Server) -> T + Send + 'static,
) -> (UnixStream, JoinHandle<T>) {
    let (c, s) = UnixStream::pair().unwrap();
    let h = thread::spawn(move || {
        script(Server {
            stream: s,
            reader: FrameReader::new(),
        })
    });
    (c, h)
}

fn remote_peer() -> Peer {
    Peer {
        fep: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        job: JOB,
        pid: 1,
    }
}

#[test]
fn hello_grants_the_session_and_the_server_sees_our_credentials() {
    let (c, h) = serve(|mut s| {
        let creds = sock::peer_credentials(&s.stream).unwrap();
        (s.hello(), creds)
    });
    let client = Client::handshake(c, "app-1").unwrap();
    let (name, creds) = h.join().unwrap();
    assert_eq!(name, "app-1");
    assert_eq!(creds.pid, std::process::id() as i32);
    assert_eq!(creds.uid, rustix::process::getuid().as_raw());
    assert_eq!(creds.gid, rustix::process::getgid().as_raw());
    let s = client.session();
    assert_eq!(
        (s.version, s.fep, s.job, s.pid),
        (PROTOCOL_VERSION, FEP, JOB, PID)
    );
}

#[test]
fn version_refused_by_the_daemon_is_a_typed_error() {
    let (c, h) = serve(|mut s| {
        let _ = s.recv();
        s.send(&DaemonMsg::Error {
            code: ErrorCode::VersionMismatch,
            message: "uetd speaks version 2".into(),
        });
    });
    let e = Client::handshake(c, "old").unwrap_err();
    h.join().unwrap();
    match e {
        ClientError::VersionMismatch {
            ours,
            theirs,
            message,
        } => {
            assert_eq!(ours, PROTOCOL_VERSION);
            assert_eq!(theirs, None);
            assert_eq!(message, "uetd speaks version 2");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn daemon_answering_another_version_is_a_mismatch() {
    let (c, h) = serve(|mut s| {
        let _ = s.recv();
        s.send(&DaemonMsg::HelloOk {
            version: PROTOCOL_VERSION + 1,
            fep: FEP,
            job: JOB,
            pid: PID,
        });
    });
    let e = Client::handshake(c, "x").unwrap_err();
    h.join().unwrap();
    assert!(
        matches!(e, ClientError::VersionMismatch { theirs: Some(v), .. } if v == PROTOCOL_VERSION + 1),
        "{e:?}"
    );
}

#[test]
fn register_passes_the_memfd_itself() {
    // The server checks the descriptor like the daemon will, reads what the
    // client wrote with pwrite, writes back into it (what a remote write
    // does through the daemon's mapping), then answers.
    let (c, h) = serve(|mut s| {
        s.hello();
        let Received { msg, fd } = s.recv();
        let ClientMsg::Register { len, access, key } = msg else {
            panic!("expected Register, got {msg:?}")
        };
        assert_eq!((len, access, key), (8192, Access::REMOTE_WRITE, None));
        let fd = fd.expect("descriptor with Register");
        assert_eq!(check_region_fd(&fd, len).unwrap(), 8192);
        let file = File::from(fd);
        let mut got = [0u8; 5];
        file.read_exact_at(&mut got, 100).unwrap();
        file.write_all_at(b"from-daemon", 4000).unwrap();
        s.send(&DaemonMsg::Registered {
            handle: Handle(1),
            job: JOB,
            pid: PID,
            ri: 9,
            key: 0x5eed,
            generation: 2,
        });
        got
    });
    let mut client = Client::handshake(c, "reg").unwrap();
    let region = client.create_region(8192).unwrap();
    region.write_at(100, b"hello").unwrap();
    let reg = client
        .register(&region, Access::REMOTE_WRITE, None)
        .unwrap();
    assert_eq!(&h.join().unwrap(), b"hello");
    assert_eq!(reg.handle, Handle(1));
    assert_eq!(reg.len, 8192);
    let r = reg.remote;
    assert_eq!((r.fep, r.job, r.pid, r.ri), (FEP, JOB, PID, 9));
    assert_eq!((r.key, r.generation), (0x5eed, 2));
    assert_eq!(r.to_string(), "uet://10.0.0.1/7/3/9/2/0x5eed");
    let mut back = [0u8; 11];
    region.read_at(4000, &mut back).unwrap();
    assert_eq!(&back, b"from-daemon");
}

#[test]
fn region_bounds_and_daemon_side_fd_checks() {
    let region = Region::new(64).unwrap();
    assert_eq!(region.len(), 64);
    assert!(region.write_at(60, &[0; 5]).is_err());
    assert!(region.read_at(u64::MAX, &mut [0; 1]).is_err());
    // Sealed against shrinking: the client cannot pull memory out from
    // under the daemon's mapping.
    assert!(region.file().set_len(0).is_err());
    assert!(matches!(
        check_region_fd(&region, 65),
        Err(e @ RegionFdError::TooShort { size: 64, len: 65 }) if e.code() == ErrorCode::BadLength
    ));
    let unsealed = rustix::fs::memfd_create("plain", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&unsealed, 64).unwrap();
    assert!(matches!(
        check_region_fd(&unsealed, 64),
        Err(RegionFdError::NotSealed)
    ));
    let (a, _b) = UnixStream::pair().unwrap();
    assert!(matches!(
        check_region_fd(&a, 1),
        Err(RegionFdError::NotAFile)
    ));
    // An existing descriptor is taken at its current length.
    let r2 = Region::from_fd(unsealed).unwrap();
    assert_eq!(r2.len(), 64);
}

#[test]
fn refusals_are_typed_and_leave_the_connection_usable() {
    let (c, h) = serve(|mut s| {
        s.hello();
        let reg = s.recv();
        assert!(matches!(reg.msg, ClientMsg::RegisterLocal { len: 16 }) && reg.fd.is_some());
        s.send(&DaemonMsg::LocalRegistered { handle: Handle(4) });
        assert_eq!(s.recv().msg, ClientMsg::Deregister { handle: Handle(99) });
        s.send(&DaemonMsg::Error {
            code: ErrorCode::UnknownHandle,
            message: "no handle 99".into(),
        });
        assert_eq!(s.recv().msg, ClientMsg::Deregister { handle: Handle(4) });
        s.send(&DaemonMsg::Deregistered { handle: Handle(4) });
        assert_eq!(s.recv().msg, ClientMsg::StatsStream);
        s.send(&DaemonMsg::StatsChunk {
            data: r#"{"ok":1}"#.into(),
            last: true,
        });
        assert_eq!(s.recv().msg, ClientMsg::Bye);
    });
    let mut client = Client::handshake(c, "x").unwrap();
    let region = Region::new(16).unwrap();
    let local = client.register_local(&region).unwrap();
    assert_eq!(local.handle, Handle(4));
    match client.deregister(Handle(99)).unwrap_err() {
        ClientError::Daemon { code, message } => {
            assert_eq!(code, ErrorCode::UnknownHandle);
            assert_eq!(message, "no handle 99");
        }
        other => panic!("{other:?}"),
    }
    client.deregister(local.handle).unwrap();
    assert_eq!(client.stats().unwrap(), r#"{"ok":1}"#);
    client.close().unwrap();
    h.join().unwrap();
}

#[test]
fn completions_out_of_order_are_buffered_per_tag() {
    let (c, h) = serve(|mut s| {
        s.hello();
        let mut tags = Vec::new();
        for _ in 0..3 {
            match s.recv().msg {
                ClientMsg::Write { tag, .. }
                | ClientMsg::Send { tag, .. }
                | ClientMsg::PostRecv { tag, .. } => tags.push(tag),
                other => panic!("{other:?}"),
            }
        }
        // Ends in reverse order, with a WriteArrived in between; then a
        // Stats request whose reply comes after another completion.
        s.completion(tags[2], Status::Ok, 0);
        s.send(&DaemonMsg::WriteArrived(WriteArrived {
            handle: Handle(1),
            src_fep: FEP,
            offset: 8,
            len: 4,
            header_data: 77,
        }));
        s.completion(tags[1], Status::Remote { return_code: 0x0f }, 0);
        s.completion(tags[0], Status::Ok, 4096);
        assert_eq!(s.recv().msg, ClientMsg::StatsStream);
        s.completion(Tag(1000), Status::Ok, 1);
        s.send(&DaemonMsg::StatsChunk {
            data: "{}".into(),
            last: true,
        });
        tags
    });
    let mut client = Client::handshake(c, "x").unwrap();
    let local = uet_api::LocalRef {
        handle: Handle(1),
        offset: 0,
    };
    let dst = uet_api::RemoteRegion {
        fep: FEP,
        job: JOB,
        pid: 1,
        ri: 2,
        generation: 0,
        key: 5,
    };
    let t0 = client.write(local, dst.at(0), 4096, Some(1)).unwrap();
    let t1 = client.send(local, remote_peer(), 10, None).unwrap();
    let t2 = client.post_recv(local, 100, Some((1, 0))).unwrap();
    assert!(t0 < t1 && t1 < t2, "tags increase");
    // The first op's completion arrives last; waiting for it keeps the
    // others.
    match client.wait_completion(t0, None).unwrap() {
        Event::Completion(c) => {
            assert_eq!((c.tag, c.status, c.bytes), (t0, Status::Ok, 4096));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(client.stats().unwrap(), "{}");
    assert_eq!(h.join().unwrap(), vec![t0, t1, t2]);
    // The rest, in arrival order, including the one that came during the
    // control request.
    let rest: Vec<Event> = (0..4)
        .map(|_| client.wait_event(Some(Duration::ZERO)).unwrap())
        .collect();
    assert_eq!(rest[0].tag(), Some(t2));
    assert!(matches!(
        rest[1],
        Event::WriteArrived(WriteArrived {
            header_data: 77,
            ..
        })
    ));
    assert!(matches!(
        &rest[2],
        Event::Completion(Completion { tag, status: Status::Remote { return_code: 0x0f }, .. }) if *tag == t1
    ));
    assert_eq!(rest[3].tag(), Some(Tag(1000)));
}

#[test]
fn wait_times_out_and_the_connection_survives() {
    let (tx, rx) = mpsc::channel::<()>();
    let (c, h) = serve(move |mut s| {
        s.hello();
        let tag = match s.recv().msg {
            ClientMsg::TaggedSend {
                tag, match_bits, ..
            } => {
                assert_eq!(match_bits, 0xabc);
                tag
            }
            other => panic!("{other:?}"),
        };
        rx.recv().unwrap(); // until the client has timed out
        s.completion(tag, Status::Ok, 3);
    });
    let mut client = Client::handshake(c, "x").unwrap();
    let local = uet_api::LocalRef {
        handle: Handle(1),
        offset: 0,
    };
    let tag = client
        .tagged_send(local, remote_peer(), 3, 0xabc, Some(9))
        .unwrap();
    assert!(matches!(
        client.wait_event(Some(Duration::from_millis(20))),
        Err(ClientError::Timeout)
    ));
    assert!(matches!(
        client.wait_event(Some(Duration::ZERO)),
        Err(ClientError::Timeout)
    ));
    tx.send(()).unwrap();
    let e = client
        .wait_completion(tag, Some(Duration::from_secs(30)))
        .unwrap();
    assert_eq!(e.tag(), Some(tag));
    h.join().unwrap();
}

#[test]
fn server_closing_mid_request_is_a_clean_error() {
    let (c, h) = serve(|mut s| {
        s.hello();
        let r = s.recv();
        assert!(matches!(r.msg, ClientMsg::Register { .. }));
        // Drop the stream (and the fd) without answering.
    });
    let mut client = Client::handshake(c, "x").unwrap();
    let region = Region::new(4096).unwrap();
    let e = client
        .register(&region, Access::REMOTE_READ, Some(1))
        .unwrap_err();
    h.join().unwrap();
    assert!(matches!(e, ClientError::Closed), "{e:?}");
    // The connection stays failed; nothing hangs.
    assert!(matches!(client.stats(), Err(ClientError::Closed)));
    assert!(matches!(client.wait_event(None), Err(ClientError::Closed)));
}

#[test]
fn stats_longer_than_a_frame_arrive_whole_with_events_between_pieces() {
    // A document three frames long, as the daemon streams it, with a
    // completion between two pieces.
    let doc: String = (0..9000)
        .map(|i| format!(r#"{{"dst":"10.0.{}.{}"}},"#, i / 250, i % 250))
        .collect();
    assert!(doc.len() > 2 * uet_api::proto::MAX_FRAME_LEN);
    let served = doc.clone();
    let (c, h) = serve(move |mut s| {
        s.hello();
        assert_eq!(s.recv().msg, ClientMsg::StatsStream);
        for (i, chunk) in uet_api::proto::stats_chunks(&served).enumerate() {
            if i == 1 {
                s.completion(Tag(7), Status::Ok, 1);
            }
            s.send(&chunk);
        }
        // A refusal of the next request leaves the connection usable.
        assert_eq!(s.recv().msg, ClientMsg::StatsStream);
        s.send(&DaemonMsg::Error {
            code: ErrorCode::Busy,
            message: "not now".into(),
        });
        assert_eq!(s.recv().msg, ClientMsg::Bye);
    });
    let mut client = Client::handshake(c, "x").unwrap();
    assert_eq!(client.stats().unwrap(), doc);
    assert!(matches!(
        client.wait_event(Some(Duration::ZERO)).unwrap(),
        Event::Completion(c) if c.tag == Tag(7)
    ));
    assert!(matches!(
        client.stats(),
        Err(ClientError::Daemon {
            code: ErrorCode::Busy,
            ..
        })
    ));
    client.close().unwrap();
    h.join().unwrap();
}

#[test]
fn a_daemon_without_streamed_stats_is_named_in_the_error() {
    let (c, h) = serve(|mut s| {
        s.hello();
        let _ = s.recv();
        s.send(&DaemonMsg::Error {
            code: ErrorCode::Malformed,
            message: "unknown message type 0x0009".into(),
        });
    });
    let mut client = Client::handshake(c, "x").unwrap();
    let e = client.stats().unwrap_err();
    h.join().unwrap();
    assert!(e.to_string().contains("without streamed stats"), "{e}");
}

#[test]
fn server_closing_inside_a_frame_is_unexpected_eof() {
    let (c, h) = serve(|mut s| {
        s.hello();
        let _ = s.recv();
        let f = uet_api::proto::Message::to_frame(&DaemonMsg::StatsReply {
            json: "partial".into(),
        })
        .unwrap();
        sock::send_frame(&s.stream, &f[..7], None).unwrap();
    });
    let mut client = Client::handshake(c, "x").unwrap();
    let e = client.stats().unwrap_err();
    h.join().unwrap();
    assert!(
        matches!(&e, ClientError::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof),
        "{e:?}"
    );
}

#[test]
fn garbage_from_the_daemon_is_a_protocol_error() {
    let (c, h) = serve(|mut s| {
        let _ = s.recv();
        sock::send_frame(&s.stream, &u32::MAX.to_le_bytes(), None).unwrap();
    });
    let e = Client::handshake(c, "x").unwrap_err();
    h.join().unwrap();
    assert!(
        matches!(
            e,
            ClientError::Protocol(uet_api::proto::DecodeError::FrameTooLarge { .. })
        ),
        "{e:?}"
    );
}

#[test]
fn fatal_error_outside_a_request_ends_wait_event() {
    let (c, h) = serve(|mut s| {
        s.hello();
        s.send(&DaemonMsg::Error {
            code: ErrorCode::Malformed,
            message: "bye".into(),
        });
    });
    let mut client = Client::handshake(c, "x").unwrap();
    h.join().unwrap();
    assert!(matches!(
        client.wait_event(None),
        Err(ClientError::Daemon {
            code: ErrorCode::Malformed,
            ..
        })
    ));
    assert!(matches!(client.wait_event(None), Err(ClientError::Closed)));
}

#[test]
fn server_side_recv_rejects_a_stray_fd() {
    // A client that sends a descriptor with a frame that takes none is
    // caught by the daemon-side reader.
    let (c, s) = UnixStream::pair().unwrap();
    let region = Region::new(1).unwrap();
    sock::send_msg(
        &c,
        &ClientMsg::Stats,
        Some(std::os::fd::AsFd::as_fd(&region)),
    )
    .unwrap();
    let mut reader = FrameReader::new();
    let e = sock::recv_frame::<ClientMsg>(&s, &mut reader).unwrap_err();
    assert!(
        matches!(
            e,
            RecvError::Decode(uet_api::proto::DecodeError::UnexpectedFd)
        ),
        "{e}"
    );
}

#[test]
fn many_registrations_in_one_burst_pair_each_frame_with_its_fd() {
    // Frames with descriptors sent back to back, read in whatever chunks
    // the kernel gives: each Register gets its own memfd.
    let (c, s) = UnixStream::pair().unwrap();
    let regions: Vec<Region> = (0..20u64).map(|i| Region::new(16 + i).unwrap()).collect();
    for (i, r) in regions.iter().enumerate() {
        r.write_at(0, &[i as u8]).unwrap();
        let m = ClientMsg::Register {
            len: r.len(),
            access: Access::REMOTE_WRITE | Access::RECV,
            key: Some(i as u64),
        };
        sock::send_msg(&c, &m, Some(std::os::fd::AsFd::as_fd(r))).unwrap();
        sock::send_msg(&c, &ClientMsg::Stats, None).unwrap();
    }
    drop(c);
    let mut reader = FrameReader::new();
    let mut n = 0;
    loop {
        match sock::recv_frame::<ClientMsg>(&s, &mut reader) {
            Ok(Received {
                msg: ClientMsg::Register { len, key, .. },
                fd: Some(fd),
            }) => {
                let i = key.unwrap();
                assert_eq!(len, 16 + i);
                assert_eq!(check_region_fd(&fd, len).unwrap(), len);
                let mut b = [0u8];
                File::from(fd).read_exact_at(&mut b, 0).unwrap();
                assert_eq!(u64::from(b[0]), i);
                n += 1;
            }
            Ok(Received {
                msg: ClientMsg::Stats,
                fd: None,
            }) => {}
            Ok(other) => panic!("{other:?}"),
            Err(RecvError::Closed) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(n, 20);
}

fn frame(n: u8, direction: Direction) -> CapturedFrame {
    CapturedFrame {
        timestamp_ns: 1_700_000_000_000_000_000 + u64::from(n),
        direction,
        orig_len: 60,
        data: vec![n; 14],
    }
}

#[test]
fn capture_streams_frames_apart_from_events_until_its_end() {
    let spec = CaptureSpec {
        max_frames: Some(100),
        max_duration_ms: None,
        snaplen: 128,
        direction: CaptureDirection::Both,
    };
    let (c, h) = serve(move |mut s| {
        s.hello();
        assert_eq!(s.recv().msg, ClientMsg::Capture(spec));
        s.send(&DaemonMsg::CaptureStarted { snaplen: 128 });
        s.send(&DaemonMsg::CaptureFrame(frame(1, Direction::Rx)));
        // An event of an operation in the middle of the stream.
        s.completion(Tag(9), Status::Ok, 5);
        s.send(&DaemonMsg::CaptureFrame(frame(2, Direction::Tx)));
        assert_eq!(s.recv().msg, ClientMsg::CaptureStop);
        s.send(&DaemonMsg::CaptureEnd(CaptureEnd {
            frames: 2,
            dropped: 3,
            reason: CaptureEndReason::Stopped,
        }));
    });
    let mut client = Client::handshake(c, "cap").unwrap();
    assert_eq!(client.capture_start(spec).unwrap(), 128);
    assert_eq!(
        client.capture_next(None).unwrap(),
        CaptureEvent::Frame(frame(1, Direction::Rx))
    );
    assert_eq!(
        client.capture_next(None).unwrap(),
        CaptureEvent::Frame(frame(2, Direction::Tx))
    );
    client.capture_stop().unwrap();
    assert_eq!(
        client.capture_next(None).unwrap(),
        CaptureEvent::End(CaptureEnd {
            frames: 2,
            dropped: 3,
            reason: CaptureEndReason::Stopped,
        })
    );
    // The completion was kept for wait_event.
    assert_eq!(client.wait_event(None).unwrap().tag(), Some(Tag(9)));
    h.join().unwrap();
}

#[test]
fn capture_refusals_are_typed_and_an_old_daemon_is_explained() {
    let spec = CaptureSpec {
        max_frames: None,
        max_duration_ms: Some(1000),
        snaplen: 64,
        direction: CaptureDirection::Rx,
    };
    let (c, h) = serve(|mut s| {
        s.hello();
        let _ = s.recv();
        s.send(&DaemonMsg::Error {
            code: ErrorCode::Busy,
            message: "busy: a capture is already running".into(),
        });
        // What a daemon without capture answers (then it closes).
        let _ = s.recv();
        s.send(&DaemonMsg::Error {
            code: ErrorCode::Malformed,
            message: "unknown message type 0x0007".into(),
        });
    });
    let mut client = Client::handshake(c, "cap").unwrap();
    match client.capture_start(spec).unwrap_err() {
        ClientError::Daemon { code, .. } => assert_eq!(code, ErrorCode::Busy),
        other => panic!("{other:?}"),
    }
    match client.capture_start(spec).unwrap_err() {
        ClientError::Daemon { code, message } => {
            assert_eq!(code, ErrorCode::Malformed);
            assert!(message.contains("without capture support"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    h.join().unwrap();
}

#[cfg(feature = "tokio")]
mod tokio_client {
    use super::*;
    use uet_api::AsyncClient;

    fn async_end(c: UnixStream) -> tokio::net::UnixStream {
        c.set_nonblocking(true).unwrap();
        tokio::net::UnixStream::from_std(c).unwrap()
    }

    #[tokio::test]
    async fn capture_start_next_and_end() {
        let spec = CaptureSpec {
            max_frames: Some(1),
            max_duration_ms: None,
            snaplen: 32,
            direction: CaptureDirection::Tx,
        };
        let (c, h) = serve(move |mut s| {
            s.hello();
            assert_eq!(s.recv().msg, ClientMsg::Capture(spec));
            s.send(&DaemonMsg::CaptureStarted { snaplen: 32 });
            s.send(&DaemonMsg::CaptureFrame(frame(7, Direction::Tx)));
            s.send(&DaemonMsg::CaptureEnd(CaptureEnd {
                frames: 1,
                dropped: 0,
                reason: CaptureEndReason::Count,
            }));
        });
        let mut client = AsyncClient::handshake(async_end(c), "cap").await.unwrap();
        assert_eq!(client.capture_start(spec).await.unwrap(), 32);
        assert_eq!(
            client.capture_next(None).await.unwrap(),
            CaptureEvent::Frame(frame(7, Direction::Tx))
        );
        assert!(matches!(
            client.capture_next(None).await.unwrap(),
            CaptureEvent::End(CaptureEnd {
                reason: CaptureEndReason::Count,
                ..
            })
        ));
        h.join().unwrap();
    }

    #[tokio::test]
    async fn register_and_out_of_order_completions() {
        let (c, h) = serve(|mut s| {
            s.hello();
            let Received { msg, fd } = s.recv();
            assert!(matches!(
                msg,
                ClientMsg::Register {
                    len: 4096,
                    key: Some(3),
                    ..
                }
            ));
            let file = File::from(fd.unwrap());
            let mut got = [0u8; 4];
            file.read_exact_at(&mut got, 0).unwrap();
            s.send(&DaemonMsg::Registered {
                handle: Handle(2),
                job: JOB,
                pid: PID,
                ri: 1,
                key: 3,
                generation: 0,
            });
            let a = match s.recv().msg {
                ClientMsg::Read { tag, len: 64, .. } => tag,
                other => panic!("{other:?}"),
            };
            let b = match s.recv().msg {
                ClientMsg::Write { tag, .. } => tag,
                other => panic!("{other:?}"),
            };
            s.completion(b, Status::Ok, 10);
            s.completion(
                a,
                Status::Transport {
                    code: 2,
                    message: "retry budget spent".into(),
                },
                0,
            );
            got
        });
        let mut client = AsyncClient::handshake(async_end(c), "async").await.unwrap();
        assert_eq!(client.session().job, JOB);
        let region = client.create_region(4096).unwrap();
        region.write_at(0, b"abcd").unwrap();
        let reg = client
            .register(&region, Access::REMOTE_READ, Some(3))
            .await
            .unwrap();
        assert_eq!(reg.remote.ri, 1);
        let a = client.read(reg.local(0), reg.remote(8), 64).await.unwrap();
        let b = client
            .write(reg.local(0), reg.remote(0), 10, None)
            .await
            .unwrap();
        match client.wait_completion(a, None).await.unwrap() {
            Event::Completion(Completion {
                status: Status::Transport { code: 2, message },
                ..
            }) => assert_eq!(message, "retry budget spent"),
            other => panic!("{other:?}"),
        }
        assert_eq!(client.wait_event(None).await.unwrap().tag(), Some(b));
        assert_eq!(&h.join().unwrap(), b"abcd");
    }

    #[tokio::test]
    async fn stats_longer_than_a_frame_arrive_whole() {
        let doc = "{\"ccc\":[".to_owned() + &"{\"dst\":\"10.0.0.9\"},".repeat(9000) + "]}";
        assert!(doc.len() > 2 * uet_api::proto::MAX_FRAME_LEN);
        let served = doc.clone();
        let (c, h) = serve(move |mut s| {
            s.hello();
            assert_eq!(s.recv().msg, ClientMsg::StatsStream);
            for chunk in uet_api::proto::stats_chunks(&served) {
                s.send(&chunk);
            }
        });
        let mut client = AsyncClient::handshake(async_end(c), "a").await.unwrap();
        assert_eq!(client.stats().await.unwrap(), doc);
        h.join().unwrap();
    }

    #[tokio::test]
    async fn timeout_then_close_mid_operation() {
        let (tx, rx) = mpsc::channel::<()>();
        let (c, h) = serve(move |mut s| {
            s.hello();
            let _ = s.recv();
            rx.recv().unwrap();
            // Close without completing the operation.
        });
        let mut client = AsyncClient::handshake(async_end(c), "a").await.unwrap();
        let local = uet_api::LocalRef {
            handle: Handle(1),
            offset: 0,
        };
        client.send(local, remote_peer(), 1, None).await.unwrap();
        assert!(matches!(
            client.wait_event(Some(Duration::from_millis(20))).await,
            Err(ClientError::Timeout)
        ));
        tx.send(()).unwrap();
        h.join().unwrap();
        assert!(matches!(
            client.wait_event(None).await,
            Err(ClientError::Closed)
        ));
        assert!(matches!(client.stats().await, Err(ClientError::Closed)));
    }

    #[tokio::test]
    async fn version_mismatch() {
        let (c, h) = serve(|mut s| {
            let _ = s.recv();
            s.send(&DaemonMsg::Error {
                code: ErrorCode::VersionMismatch,
                message: String::new(),
            });
        });
        let e = AsyncClient::handshake(async_end(c), "a").await.unwrap_err();
        h.join().unwrap();
        assert!(matches!(e, ClientError::VersionMismatch { .. }), "{e:?}");
    }

    /// The daemon's side under tokio: frames and descriptors from a
    /// blocking client through `recv_frame_async`, replies through
    /// `send_frame_async`.
    #[tokio::test]
    async fn daemon_side_async_helpers_serve_a_blocking_client() {
        let (c, s) = UnixStream::pair().unwrap();
        let s = async_end(s);
        let client = thread::spawn(move || {
            let mut client = Client::handshake(c, "blocking").unwrap();
            let region = Region::new(100).unwrap();
            region.write_at(50, b"zz").unwrap();
            let reg = client
                .register(&region, Access::REMOTE_WRITE, None)
                .unwrap();
            client.close().unwrap();
            reg
        });
        let mut reader = FrameReader::new();
        let send = |m: DaemonMsg| uet_api::proto::Message::to_frame(&m).unwrap();
        let hello = sock::recv_frame_async::<ClientMsg>(&s, &mut reader)
            .await
            .unwrap();
        assert!(matches!(hello.msg, ClientMsg::Hello { ref name, .. } if name == "blocking"));
        let f = send(DaemonMsg::HelloOk {
            version: PROTOCOL_VERSION,
            fep: FEP,
            job: JOB,
            pid: PID,
        });
        sock::send_frame_async(&s, &f, None).await.unwrap();
        let reg = sock::recv_frame_async::<ClientMsg>(&s, &mut reader)
            .await
            .unwrap();
        let fd = reg.fd.expect("fd");
        assert_eq!(check_region_fd(&fd, 100).unwrap(), 100);
        let mut b = [0u8; 2];
        File::from(fd).read_exact_at(&mut b, 50).unwrap();
        assert_eq!(&b, b"zz");
        let f = send(DaemonMsg::Registered {
            handle: Handle(1),
            job: JOB,
            pid: PID,
            ri: 4,
            key: 0xfeed,
            generation: 1,
        });
        sock::send_frame_async(&s, &f, None).await.unwrap();
        let bye = sock::recv_frame_async::<ClientMsg>(&s, &mut reader)
            .await
            .unwrap();
        assert_eq!(bye.msg, ClientMsg::Bye);
        assert!(matches!(
            sock::recv_frame_async::<ClientMsg>(&s, &mut reader).await,
            Err(RecvError::Closed)
        ));
        let reg = client.join().unwrap();
        assert_eq!((reg.remote.ri, reg.remote.key), (4, 0xfeed));
    }
}
