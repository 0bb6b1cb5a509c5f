//! Applications through the control socket: RMA write
//! and read between two daemons driven by `uet_api::Client`, placed
//! straight into the clients' memfds; bad clients get their errors while
//! the daemon keeps serving the others; a client that disappears frees its
//! registrations.

mod common;

use std::io::Write as _;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::{Pair, Uetd, connect};
use uet_api::{Access, ErrorCode, Event, Status};

const T: Option<Duration> = Some(Duration::from_secs(30));

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    uetd::mem::pattern(seed, 0, &mut v);
    v
}

fn completed_ok(ev: Event) -> u64 {
    match ev {
        Event::Completion(c) => {
            assert_eq!(c.status, Status::Ok, "{c:?}");
            c.bytes
        }
        other => panic!("expected a completion, got {other:?}"),
    }
}

struct Two {
    pair: Pair,
    _a: Uetd,
    b: Uetd,
    sock_a: String,
    sock_b: String,
}

fn two(subnet: u8, backend: &str) -> Two {
    let pair = Pair::new(subnet, 1500);
    let mut a = Uetd::spawn(
        &pair.a,
        &[
            "--interface",
            "v0",
            "--backend",
            backend,
            "--expose",
            "1:1:4096",
        ],
    );
    let mut b = Uetd::spawn(
        &pair.b,
        &[
            "--interface",
            "v1",
            "--backend",
            backend,
            "--expose",
            "1:1:4096",
        ],
    );
    a.wait_line("\"exposed\"", Duration::from_secs(30));
    b.wait_line("\"exposed\"", Duration::from_secs(30));
    let sock_a = Uetd::socket_of(&pair.a);
    let sock_b = Uetd::socket_of(&pair.b);
    Two {
        pair,
        _a: a,
        b,
        sock_a,
        sock_b,
    }
}

#[test]
fn write_and_read_through_the_api_land_in_the_clients_memory() {
    let t = two(
        101,
        std::env::var("UET_API_BACKEND").as_deref().unwrap_or("xdp"),
    );
    let mut target = connect(&t.sock_b);
    let mut init = connect(&t.sock_a);
    assert_eq!(target.session().fep.to_string(), t.pair.b_ip);
    assert_eq!(target.session().job, 1, "the job is the daemon's grant");

    let len = 3 << 20;
    let exposed = target.create_region(len).unwrap();
    let reg = target
        .register(&exposed, Access::REMOTE_WRITE | Access::REMOTE_READ, None)
        .unwrap();

    let src = init.create_region(len).unwrap();
    let data = pattern(7, len as usize);
    src.write_at(0, &data).unwrap();
    let local = init.register_local(&src).unwrap();

    // Several writes in flight; the last carries header data.
    let chunk = 1 << 20;
    let mut tags = Vec::new();
    for i in 0..3u64 {
        let hd = (i == 2).then_some(0xfeed);
        tags.push(
            init.write(local.at(i * chunk), reg.remote(i * chunk), chunk as u32, hd)
                .unwrap(),
        );
    }
    for tag in tags {
        assert_eq!(completed_ok(init.wait_completion(tag, T).unwrap()), chunk);
    }
    match target.wait_event(T).unwrap() {
        Event::WriteArrived(w) => {
            assert_eq!(w.header_data, 0xfeed);
            assert_eq!(w.handle, reg.handle);
            assert_eq!(w.offset, 2 * chunk);
        }
        other => panic!("{other:?}"),
    }
    let mut got = vec![0u8; len as usize];
    exposed.read_at(0, &mut got).unwrap();
    assert!(
        got == data,
        "the target's memfd holds exactly what was written"
    );

    // Fresh daemons, a first transfer: the initiator held its operations
    // until its neighbour entry for the target was there, and the target
    // learnt the initiator's MAC from its first frame — neither dropped a
    // frame for want of a next hop (on the xdp backend it did before: the
    // first window was lost and recovered by RTOs).
    for (who, c) in [("initiator", &mut init), ("target", &mut target)] {
        let s: serde_json::Value = serde_json::from_str(&c.stats().unwrap()).unwrap();
        let misses: u64 = s["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["io"]["tx_no_neighbour"].as_u64().unwrap())
            .sum();
        assert_eq!(misses, 0, "{who} dropped frames for want of a MAC: {s}");
    }

    // Read it back into a second local buffer.
    let back = init.create_region(len).unwrap();
    let back_h = init.register_local(&back).unwrap();
    let tag = init.read(back_h.at(0), reg.remote(0), len as u32).unwrap();
    assert_eq!(completed_ok(init.wait_completion(tag, T).unwrap()), len);
    let mut got = vec![0u8; len as usize];
    back.read_at(0, &mut got).unwrap();
    assert!(got == data);

    // Deregistration bumps the generation: the old address fails.
    target.deregister(reg.handle).unwrap();
    let tag = init.write(local.at(0), reg.remote(0), 4096, None).unwrap();
    match init.wait_completion(tag, T).unwrap() {
        Event::Completion(c) => assert!(
            matches!(c.status, Status::Remote { .. }),
            "a stale registration is refused: {c:?}"
        ),
        other => panic!("{other:?}"),
    }
    let stats: serde_json::Value = serde_json::from_str(&init.stats().unwrap()).unwrap();
    assert!(stats["workers"][0]["ses"]["ops_ok"].as_u64().unwrap() >= 4);
}

#[test]
fn bad_clients_get_errors_and_others_keep_working() {
    let t = two(102, "udp");
    let mut target = connect(&t.sock_b);
    let exposed = target.create_region(1 << 20).unwrap();
    let reg = target
        .register(&exposed, Access::REMOTE_WRITE, None)
        .unwrap();
    let mut good = connect(&t.sock_a);
    let src = good.create_region(1 << 20).unwrap();
    src.write_at(0, &pattern(3, 1 << 20)).unwrap();
    let local = good.register_local(&src).unwrap();

    // Garbage on the socket, then a huge length prefix: each such client
    // is told and disconnected.
    for junk in [
        &b"\x05\x00\x00\x00\xff\xff garbage"[..],
        &[0xff, 0xff, 0xff, 0x7f, 1, 0],
    ] {
        let mut s = UnixStream::connect(&t.sock_a).unwrap();
        s.write_all(junk).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = Vec::new();
        let _ = std::io::Read::read_to_end(&mut s, &mut buf);
        assert!(buf.len() > 6, "an Error frame before the close: {buf:?}");
    }

    // Registering more than the memfd holds: spoken by hand, since the
    // client library always sends the region's true length.
    {
        use uet_api::proto::{ClientMsg, DaemonMsg, FrameReader};
        use uet_api::sock::{recv_frame, send_msg};
        let s = UnixStream::connect(&t.sock_a).unwrap();
        let hello = ClientMsg::Hello {
            version: uet_api::PROTOCOL_VERSION,
            name: "liar".into(),
        };
        send_msg(&s, &hello, None).unwrap();
        let mut r = FrameReader::new();
        let ok = recv_frame::<DaemonMsg>(&s, &mut r).unwrap();
        assert!(matches!(ok.msg, DaemonMsg::HelloOk { .. }), "{:?}", ok.msg);
        let small = uet_api::Region::new(4096).unwrap();
        let reg = ClientMsg::Register {
            len: 1 << 20,
            access: Access::REMOTE_WRITE,
            key: None,
        };
        send_msg(&s, &reg, Some(std::os::fd::AsFd::as_fd(&small))).unwrap();
        let reply = recv_frame::<DaemonMsg>(&s, &mut r).unwrap();
        assert!(
            matches!(
                reply.msg,
                DaemonMsg::Error {
                    code: ErrorCode::BadLength,
                    ..
                }
            ),
            "a region beyond its memfd is refused: {:?}",
            reply.msg
        );
    }

    let mut bad = connect(&t.sock_a);
    let small = bad.create_region(4096).unwrap();
    bad.register(&small, Access::REMOTE_WRITE, None).unwrap();
    // Another client's handle is not usable.
    let e = bad.write(local.at(0), reg.remote(0), 4096, None).unwrap();
    match bad.wait_completion(e, T).unwrap() {
        Event::Completion(c) => assert!(
            matches!(
                c.status,
                Status::Local {
                    code: ErrorCode::UnknownHandle,
                    ..
                }
            ),
            "{c:?}"
        ),
        other => panic!("{other:?}"),
    }
    // A region of another job is not reachable.
    let mut foreign = reg.remote(0);
    foreign.region.job = 2;
    let own = bad.register_local(&small).unwrap();
    let e = bad.write(own.at(0), foreign, 4096, None).unwrap();
    match bad.wait_completion(e, T).unwrap() {
        Event::Completion(c) => assert!(
            matches!(
                c.status,
                Status::Local {
                    code: ErrorCode::NotYours,
                    ..
                }
            ),
            "{c:?}"
        ),
        other => panic!("{other:?}"),
    }
    // Past the end of its own buffer.
    let e = bad.write(own.at(4000), reg.remote(0), 4096, None).unwrap();
    match bad.wait_completion(e, T).unwrap() {
        Event::Completion(c) => assert!(
            matches!(
                c.status,
                Status::Local {
                    code: ErrorCode::BadLength,
                    ..
                }
            ),
            "{c:?}"
        ),
        other => panic!("{other:?}"),
    }
    // Disconnect mid-transfer: many writes in flight, then gone.
    for i in 0..64u64 {
        let _ = bad.write(own.at(0), reg.remote(i * 4096 % (1 << 20)), 4096, None);
    }
    drop(bad);

    // The good client is unaffected (it writes the half the departed one
    // never addressed).
    let half = 1 << 19;
    let tag = good
        .write(local.at(half), reg.remote(half), half as u32, None)
        .unwrap();
    assert_eq!(completed_ok(good.wait_completion(tag, T).unwrap()), half);
    let mut got = vec![0u8; half as usize];
    exposed.read_at(half, &mut got).unwrap();
    assert!(got[..] == pattern(3, 1 << 20)[half as usize..]);
}

#[test]
fn a_second_hello_and_a_wrong_version_are_refused() {
    use uet_api::proto::{ClientMsg, DaemonMsg, FrameReader};
    use uet_api::sock::{recv_frame, send_msg};
    let t = two(103, "udp");
    let hello = |version| ClientMsg::Hello {
        version,
        name: "raw".into(),
    };
    // The daemon prints `exposed` before its control socket is bound: wait
    // until it answers (a raw connect right away failed with ENOENT once).
    drop(connect(&t.sock_a));
    // A wrong version is refused in the handshake.
    let s = UnixStream::connect(&t.sock_a).unwrap();
    send_msg(&s, &hello(99), None).unwrap();
    let mut r = FrameReader::new();
    let got = recv_frame::<DaemonMsg>(&s, &mut r).unwrap();
    assert!(
        matches!(
            got.msg,
            DaemonMsg::Error {
                code: ErrorCode::VersionMismatch,
                ..
            }
        ),
        "{:?}",
        got.msg
    );
    // A second Hello after a good one ends the connection.
    let s = UnixStream::connect(&t.sock_a).unwrap();
    let mut r = FrameReader::new();
    send_msg(&s, &hello(uet_api::PROTOCOL_VERSION), None).unwrap();
    let ok = recv_frame::<DaemonMsg>(&s, &mut r).unwrap();
    assert!(matches!(ok.msg, DaemonMsg::HelloOk { .. }), "{:?}", ok.msg);
    send_msg(&s, &hello(uet_api::PROTOCOL_VERSION), None).unwrap();
    let again = recv_frame::<DaemonMsg>(&s, &mut r).unwrap();
    assert!(
        matches!(
            again.msg,
            DaemonMsg::Error {
                code: ErrorCode::OutOfSequence,
                ..
            }
        ),
        "{:?}",
        again.msg
    );
    // The daemon still serves.
    assert!(connect(&t.sock_a).stats().unwrap().contains("workers"));
}

#[test]
fn a_peer_killed_mid_write_fails_the_operation_and_the_local_daemon_stays_up() {
    let t = two(104, "xdp");
    let mut target = connect(&t.sock_b);
    // Far more than can land in the moment `kill` takes.
    let len = 256 << 20;
    let exposed = target.create_region(len).unwrap();
    let reg = target
        .register(&exposed, Access::REMOTE_WRITE, None)
        .unwrap();
    let mut init = connect(&t.sock_a);
    let src = init.create_region(len).unwrap();
    let local = init.register_local(&src).unwrap();
    let tag = init
        .write(local.at(0), reg.remote(0), len as u32, None)
        .unwrap();
    t.b.signal("-KILL");
    let start = Instant::now();
    match init
        .wait_completion(tag, Some(Duration::from_secs(60)))
        .unwrap()
    {
        Event::Completion(c) => {
            assert!(matches!(c.status, Status::Transport { .. }), "{c:?}");
        }
        other => panic!("{other:?}"),
    }
    // The retry budget (5 RTOs from 5 ms, doubling) is well under this.
    assert!(start.elapsed() < Duration::from_secs(30));
    // The local daemon still serves: a new client, stats.
    let mut again = connect(&t.sock_a);
    assert!(again.stats().unwrap().contains("workers"));
    drop(target);
}
