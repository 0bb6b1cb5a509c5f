//! Applications through the shared-memory ring: writes and reads placed
//! in a client's ring complete with the right status and land in memory;
//! hostile entries (unknown or another client's handle, out of bounds,
//! another job, undecodable) end with error completions while the ring
//! keeps working; indices out of range break only that ring; a client
//! that leaves with entries in its ring is cleaned up; version-1 clients
//! keep being served.

mod common;

use std::time::{Duration, Instant};

use common::{Pair, Uetd, connect};
use uet_api::proto::{ClientMsg, DaemonMsg, FrameReader};
use uet_api::ring::{RingWaitError, SqEntry};
use uet_api::sock::{recv_frame, send_msg};
use uet_api::{Access, Completion, ErrorCode, Handle, LocalRef, Status};

const T: Option<Duration> = Some(Duration::from_secs(30));
const SPIN: Duration = Duration::from_micros(100);

struct Two {
    pair: Pair,
    _a: Uetd,
    _b: Uetd,
    sock_a: String,
    sock_b: String,
}

fn two(subnet: u8, backend: &str) -> Two {
    let pair = Pair::new(subnet, 1500);
    let spawn = |ns, ifname| {
        Uetd::spawn(
            ns,
            &[
                "--interface",
                ifname,
                "--backend",
                backend,
                "--expose",
                "1:1:4096",
            ],
        )
    };
    let mut a = spawn(&pair.a, "v0");
    let mut b = spawn(&pair.b, "v1");
    a.wait_line("\"exposed\"", Duration::from_secs(30));
    b.wait_line("\"exposed\"", Duration::from_secs(30));
    let sock_a = Uetd::socket_of(&pair.a);
    let sock_b = Uetd::socket_of(&pair.b);
    Two {
        pair,
        _a: a,
        _b: b,
        sock_a,
        sock_b,
    }
}

fn local_code(c: &Completion) -> ErrorCode {
    match &c.status {
        Status::Local { code, .. } => *code,
        s => panic!("expected a local refusal, got {s:?}"),
    }
}

/// Waits (bounded) until the published refusal count reaches `want`;
/// returns the count then (workers publish their counters every
/// millisecond).
fn refused_reaches(c: &mut uet_api::Client, want: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = ring_refused(c);
        if n >= want || Instant::now() >= deadline {
            return n;
        }
        std::thread::yield_now();
    }
}

fn ring_refused(c: &mut uet_api::Client) -> u64 {
    let s: serde_json::Value = serde_json::from_str(&c.stats().unwrap()).unwrap();
    s["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["ring"]["refused"].as_u64().unwrap())
        .sum()
}

#[test]
fn ring_operations_complete_hostile_entries_are_refused_and_others_keep_working() {
    let backend = std::env::var("UET_API_BACKEND");
    let t = two(111, backend.as_deref().unwrap_or("xdp"));
    let mut target = connect(&t.sock_b);
    let mut init = connect(&t.sock_a);
    let fep_b = t.pair.b_ip.parse().unwrap();

    let exposed = target.create_region(1 << 16).unwrap();
    let reg = target
        .register(&exposed, Access::REMOTE_WRITE | Access::REMOTE_READ, None)
        .unwrap();
    let src = init.create_region(4096).unwrap();
    src.write_at(0, &[0x5a; 64]).unwrap();
    let local = init.register_local(&src).unwrap();

    let mut ring = init.open_ring(fep_b, 8, 8).unwrap();
    // A second ring on one connection is refused; the connection stays.
    match init.open_ring(fep_b, 8, 8) {
        Err(uet_api::ClientError::Daemon { code, .. }) => assert_eq!(code, ErrorCode::Busy),
        other => panic!("{other:?}"),
    }

    // A 64 B write and a read back, through the ring.
    let tag = ring.write(local.at(0), reg.remote(128), 64, None).unwrap();
    let c = ring.wait(SPIN, T).unwrap();
    assert_eq!((c.tag, &c.status, c.bytes), (tag, &Status::Ok, 64));
    let mut got = [0u8; 64];
    exposed.read_at(128, &mut got).unwrap();
    assert_eq!(got, [0x5a; 64]);
    exposed.write_at(1024, &[0xc3; 100]).unwrap();
    let tag = ring.read(local.at(200), reg.remote(1024), 100).unwrap();
    let c = ring.wait(SPIN, T).unwrap();
    assert_eq!((c.tag, &c.status, c.bytes), (tag, &Status::Ok, 100));
    let mut got = [0u8; 100];
    src.read_at(200, &mut got).unwrap();
    assert_eq!(got, [0xc3; 100]);

    // A buffer registered after the ring opened is usable at once.
    let late = init.create_region(64).unwrap();
    let late_h = init.register_local(&late).unwrap();
    ring.write(late_h.at(0), reg.remote(0), 64, None).unwrap();
    assert_eq!(ring.wait(SPIN, T).unwrap().status, Status::Ok);

    // Another client's handle: it holds handles this one does not.
    let mut other = connect(&t.sock_a);
    let mut theirs = Handle(0);
    for _ in 0..4 {
        let r = other.create_region(64).unwrap();
        theirs = other.register_local(&r).unwrap().handle;
    }
    assert!(
        theirs.0 > late_h.handle.0,
        "the other client's handle is not ours"
    );

    let before = ring_refused(&mut init);
    let mut other_job = reg.remote(0);
    other_job.region.job += 1;
    let hostile: [(LocalRef, uet_api::RemoteRef, u32, ErrorCode); 6] = [
        (
            LocalRef {
                handle: Handle(999),
                offset: 0,
            },
            reg.remote(0),
            64,
            ErrorCode::UnknownHandle,
        ),
        (
            LocalRef {
                handle: theirs,
                offset: 0,
            },
            reg.remote(0),
            64,
            ErrorCode::UnknownHandle,
        ),
        (local.at(4090), reg.remote(0), 64, ErrorCode::BadLength),
        (
            local.at(u64::MAX - 8),
            reg.remote(0),
            64,
            ErrorCode::BadLength,
        ),
        (local.at(0), other_job, 64, ErrorCode::NotYours),
        (late_h.at(0), reg.remote(0), 65, ErrorCode::BadLength),
    ];
    for (l, r, len, want) in hostile {
        let tag = ring.write(l, r, len, None).unwrap();
        let c = ring.wait(SPIN, T).unwrap();
        assert_eq!(c.tag, tag);
        assert_eq!(local_code(&c), want, "{l:?} {len}");
    }
    // An entry that does not decode still gets its tag answered.
    let mut raw = SqEntry {
        op: uet_api::ring::SqOp::Read,
        tag: ring.next_tag(),
        local: local.at(0),
        remote: reg.remote(0),
        len: 8,
    }
    .encode();
    raw[0] = 77;
    ring.submit_raw(&raw).unwrap();
    let c = ring.wait(SPIN, T).unwrap();
    assert_eq!(c.tag, SqEntry::tag_of(&raw));
    assert_eq!(local_code(&c), ErrorCode::Malformed);
    // A deregistered buffer is gone from the ring too.
    init.deregister(late_h.handle).unwrap();
    ring.write(late_h.at(0), reg.remote(0), 64, None).unwrap();
    assert_eq!(
        local_code(&ring.wait(SPIN, T).unwrap()),
        ErrorCode::UnknownHandle
    );
    // Counted; and the ring still serves.
    assert_eq!(refused_reaches(&mut init, before + 8), before + 8);
    ring.write(local.at(0), reg.remote(0), 64, None).unwrap();
    assert_eq!(ring.wait(SPIN, T).unwrap().status, Status::Ok);

    // The other client's ring works meanwhile, and after this one breaks.
    let mut ring2 = other.open_ring(fep_b, 4, 4).unwrap();
    let r2 = other.create_region(64).unwrap();
    let h2 = other.register_local(&r2).unwrap();
    ring2.write(h2.at(0), reg.remote(64), 64, None).unwrap();
    assert_eq!(ring2.wait(SPIN, T).unwrap().status, Status::Ok);

    // A tail far ahead breaks this ring only: counted, the client told.
    let before = ring_refused(&mut init);
    ring.poke_sq_tail(1 << 30);
    assert!(matches!(ring.wait(SPIN, T), Err(RingWaitError::Broken(1))));
    assert_eq!(refused_reaches(&mut init, before + 1), before + 1);
    // Its socket path still works, and so does the other ring.
    let tag = init.write(local.at(0), reg.remote(0), 64, None).unwrap();
    match init.wait_completion(tag, T).unwrap() {
        uet_api::Event::Completion(c) => assert_eq!(c.status, Status::Ok),
        e => panic!("{e:?}"),
    }
    ring2.write(h2.at(0), reg.remote(64), 64, None).unwrap();
    assert_eq!(ring2.wait(SPIN, T).unwrap().status, Status::Ok);

    // A client leaving with entries in its ring: the daemon cleans up
    // and serves the next one.
    drop(other);
    for _ in 0..4 {
        let _ = ring2.write(h2.at(0), reg.remote(64), 64, None);
    }
    drop(ring2);
    let mut third = connect(&t.sock_a);
    let r3 = third.create_region(64).unwrap();
    let h3 = third.register_local(&r3).unwrap();
    let mut ring3 = third.open_ring(fep_b, 4, 4).unwrap();
    ring3.write(h3.at(0), reg.remote(0), 64, None).unwrap();
    assert_eq!(ring3.wait(SPIN, T).unwrap().status, Status::Ok);
}

#[test]
fn a_version_1_client_is_served_but_gets_no_ring() {
    let t = two(112, "udp");
    drop(connect(&t.sock_a));
    let s = std::os::unix::net::UnixStream::connect(&t.sock_a).unwrap();
    let mut r = FrameReader::new();
    let hello = ClientMsg::Hello {
        version: 1,
        name: "old".into(),
    };
    send_msg(&s, &hello, None).unwrap();
    let ok = recv_frame::<DaemonMsg>(&s, &mut r).unwrap();
    assert!(
        matches!(ok.msg, DaemonMsg::HelloOk { version: 1, .. }),
        "{:?}",
        ok.msg
    );
    let mem =
        uet_api::Region::new(uet_api::ring::RingSizes::new(4, 4).unwrap().len() as u64).unwrap();
    let open = ClientMsg::RingOpen {
        sq_entries: 4,
        cq_entries: 4,
        fep: t.pair.b_ip.parse().unwrap(),
    };
    send_msg(&s, &open, Some(std::os::fd::AsFd::as_fd(&mem))).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let got = recv_frame::<DaemonMsg>(&s, &mut r).unwrap();
    assert!(Instant::now() < deadline);
    assert!(
        matches!(
            got.msg,
            DaemonMsg::Error {
                code: ErrorCode::OutOfSequence,
                ..
            }
        ),
        "{:?}",
        got.msg
    );
    send_msg(&s, &ClientMsg::Stats, None).unwrap();
    let st = recv_frame::<DaemonMsg>(&s, &mut r).unwrap();
    assert!(
        matches!(st.msg, DaemonMsg::StatsReply { .. }),
        "{:?}",
        st.msg
    );
    let _ = t.sock_b;
}
