//! The control socket's limits against a live daemon: idle connections of
//! one uid leave room for other users and close after the `Hello`
//! timeout; registrations past a client's count or bytes are refused with
//! `OverLimit` while the daemon serves on; generations differ across
//! restarts so an address from before one fails; `uet stats` stays whole
//! with thousands of destinations. Each test makes its own namespaces;
//! waits are bounded polls.

mod common;

use std::io::Read as _;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt as _;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Pair, Uetd, connect, field};
use uet_api::proto::{ClientMsg, DaemonMsg, FrameReader, Message as _, frame_len};
use uet_api::sock::{recv_frame, send_msg};
use uet_api::{Access, Client, ClientError, ErrorCode, Event, RemoteRegion, Status};
use uet_lab::netns::NetNs;

const T: Option<Duration> = Some(Duration::from_secs(30));

/// `nobody`: a uid other than the test's (root).
const OTHER_UID: u32 = 65534;

/// A udp-backend daemon in `ns` on `address`, with more `config` (TOML)
/// and `extra` flags.
fn daemon(ns: &NetNs, address: &str, config: &str, extra: &[&str]) -> (Uetd, String) {
    let sock = Uetd::socket_of(ns);
    let path = format!("{sock}.toml");
    std::fs::create_dir_all(std::path::Path::new(&path).parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        format!("backend = \"udp\"\naddress = \"{address}\"\n{config}"),
    )
    .unwrap();
    let mut args = vec!["--config", path.as_str()];
    args.extend_from_slice(extra);
    let d = Uetd::spawn(ns, &args);
    (d, sock)
}

/// Runs `uet stats [--prometheus]` as `uid`; its stdout, or why it failed.
fn uet_stats(sock: &str, uid: u32, prometheus: bool) -> Result<String, String> {
    let mut cmd = Command::new(uet_lab::uet_bin().expect("the uet binary"));
    cmd.args(["stats", "--socket", sock]);
    if prometheus {
        cmd.arg("--prometheus");
    }
    if uid != 0 {
        cmd.uid(uid).gid(uid);
    }
    let out = cmd.output().unwrap();
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn is_over_limit(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Daemon {
            code: ErrorCode::OverLimit,
            ..
        }
    )
}

#[test]
fn idle_connections_of_one_uid_leave_room_for_others_and_silent_ones_are_closed() {
    let ns = NetNs::create("uet-ctl").unwrap();
    let hello_timeout = Duration::from_secs(2);
    let (_d, sock) = daemon(
        &ns,
        "127.0.0.1",
        &format!("api_hello_timeout_ms = {}\n", hello_timeout.as_millis()),
        &[],
    );
    // 300 idle clients that said Hello, all of the test's uid: the
    // per-uid limit (64 by default) admits some, refuses the rest.
    let mut idle = vec![connect(&sock)];
    let flood = Instant::now();
    let mut refused = 0;
    for _ in 1..300 {
        match Client::connect(&sock, "idle") {
            Ok(c) => idle.push(c),
            // Refused before the Hello was read: the error, or the close
            // if it came first.
            Err(e) if is_over_limit(&e) || matches!(e, ClientError::Closed) => refused += 1,
            Err(e) => panic!("unexpected refusal: {e}"),
        }
    }
    let flood = flood.elapsed();
    assert_eq!(idle.len(), 64, "api_max_clients_per_uid's default");
    assert_eq!(refused, 300 - 64);
    // Another user still gets in.
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let t = Instant::now();
    let json = uet_stats(&sock, OTHER_UID, false).expect("uet stats as another uid");
    eprintln!(
        "299 connections in {flood:?}; `uet stats` of another uid answered in {:?}",
        t.elapsed()
    );
    assert!(json.contains("\"workers\""), "{json}");
    drop(idle);

    // 300 connections that never say Hello: each is closed with an
    // OverLimit error — replaced by a newer one, or at the Hello timeout —
    // and the uid's own `uet stats` answers meanwhile.
    let opened = Instant::now();
    let mut silent: Vec<UnixStream> = (0..300)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    let t = Instant::now();
    let json = uet_stats(&sock, 0, false).expect("uet stats of the same uid");
    eprintln!(
        "300 silent connections opened in {:?}; `uet stats` of their uid answered in {:?}",
        t - opened,
        t.elapsed()
    );
    assert!(json.contains("\"workers\""), "{json}");
    let deadline = opened + hello_timeout + Duration::from_secs(20);
    for (i, s) in silent.iter_mut().enumerate() {
        let mut got = Vec::new();
        let mut buf = [0u8; 512];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "connection {i} still open at the deadline");
            s.set_read_timeout(Some(left)).unwrap();
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("connection {i}: {e}"),
            }
        }
        let n = frame_len(&got)
            .unwrap()
            .expect("an Error frame before the close");
        match DaemonMsg::decode(&got[..n]).unwrap() {
            DaemonMsg::Error {
                code: ErrorCode::OverLimit,
                ..
            } => {}
            other => panic!("connection {i}: {other:?}"),
        }
    }
    // Closed by the timeout, not sooner than it allows.
    assert!(opened.elapsed() >= hello_timeout);
    eprintln!(
        "all 300 closed {:?} after the first opened (Hello timeout {hello_timeout:?})",
        opened.elapsed()
    );
}

#[test]
fn registrations_past_a_clients_limits_are_refused_and_the_daemon_serves_on() {
    let ns = NetNs::create("uet-reg").unwrap();
    let (_d, sock) = daemon(
        &ns,
        "127.0.0.1",
        "api_max_registrations = 3\napi_max_registered_bytes = \"1MiB\"\n",
        &[],
    );
    let mut c = connect(&sock);
    // A 1 TiB sparse memfd: refused at registration, either kind.
    let huge = c.create_region(1 << 40).unwrap();
    match c.register(&huge, Access::REMOTE_WRITE, None) {
        Err(ClientError::Daemon {
            code: ErrorCode::OverLimit,
            message,
        }) => assert!(message.contains("api_max_registered_bytes"), "{message}"),
        other => panic!("1 TiB registered: {other:?}"),
    }
    let e = c.register_local(&huge).unwrap_err();
    assert!(is_over_limit(&e), "{e:?}");
    drop(huge);

    // Bytes: two halves fill the budget; one page more is refused.
    let half = c.create_region(512 << 10).unwrap();
    let remote = c.register(&half, Access::REMOTE_WRITE, None).unwrap();
    let local = c.register_local(&half).unwrap();
    let page = c.create_region(4096).unwrap();
    let e = c.register_local(&page).unwrap_err();
    assert!(is_over_limit(&e) && e.to_string().contains("bytes"), "{e}");
    // Deregistering gives them back; then the count is the limit.
    c.deregister(local.handle).unwrap();
    let local = c.register_local(&page).unwrap();
    c.register(&page, Access::REMOTE_WRITE, None).unwrap();
    let e = c.register_local(&page).unwrap_err();
    assert!(
        is_over_limit(&e) && e.to_string().contains("api_max_registrations"),
        "{e}"
    );
    // The client and the daemon serve on: an operation completes, stats
    // answer, and the limits are per client.
    let tag = c
        .write(local.at(0), remote.remote(4096), 4096, None)
        .unwrap();
    match c.wait_completion(tag, T).unwrap() {
        Event::Completion(done) => assert_eq!(done.status, Status::Ok, "{done:?}"),
        other => panic!("{other:?}"),
    }
    c.stats().unwrap();
    let mut other = connect(&sock);
    let r = other.create_region(512 << 10).unwrap();
    other.register(&r, Access::REMOTE_WRITE, None).unwrap();
}

#[test]
fn generations_differ_across_restarts_and_an_address_from_before_fails() {
    let pair = Pair::new(122, 1500);
    let target_args = [
        "--interface",
        "v1",
        "--backend",
        "udp",
        "--expose",
        "1:0x5eed:64KiB",
    ];
    let start = || {
        let mut t = Uetd::spawn(&pair.b, &target_args);
        let line = t.wait_line("\"exposed\"", Duration::from_secs(30));
        let g: u8 = field(&line, "generation").parse().unwrap();
        (t, g)
    };
    // The same fixed key on every start; the generation is drawn anew (two
    // draws meet 1 time in 256, so up to four restarts look for a change).
    let (first, old) = start();
    drop(first);
    let mut seen = vec![old];
    let (target, new) = loop {
        let (t, g) = start();
        seen.push(g);
        if g != old || seen.len() > 4 {
            break (t, g);
        }
        drop(t);
    };
    assert_ne!(new, old, "generations of successive starts: {seen:?}");

    let _writer = Uetd::spawn(&pair.a, &["--interface", "v0", "--backend", "udp"]);
    let mut c = connect(&Uetd::socket_of(&pair.a));
    let src = c.create_region(4096).unwrap();
    let local = c.register_local(&src).unwrap();
    let region = |generation| RemoteRegion {
        fep: pair.b_ip.parse().unwrap(),
        job: 1,
        pid: 0,
        ri: 1,
        generation,
        key: 0x5eed,
    };
    let status = |c: &mut Client, generation| {
        let tag = c
            .write(local.at(0), region(generation).at(0), 4096, None)
            .unwrap();
        match c.wait_completion(tag, T).unwrap() {
            Event::Completion(done) => done.status,
            other => panic!("{other:?}"),
        }
    };
    // The address from before the restart: BAD_GENERATION (SES 0x02).
    assert_eq!(
        status(&mut c, old),
        Status::Remote {
            return_code: uet_wire::ses::ReturnCode::BadGeneration.code()
        }
    );
    assert_eq!(status(&mut c, new), Status::Ok);
    drop(target);
}

#[test]
fn stats_stay_whole_with_thousands_of_destinations() {
    // Destinations routed through the peer namespace, which forwards
    // nothing: sent into the void, never answered.
    let pair = Pair::new(123, 1500);
    pair.a
        .ip(&["route", "add", "10.124.0.0/16", "via", &pair.b_ip])
        .unwrap();
    // A long first RTO keeps every write (and its destination's state) in
    // flight while the test looks.
    let (_d, sock) = daemon(&pair.a, &pair.a_ip, "", &["--rto-init-us", "2000000"]);
    let mut c = connect(&sock);
    let src = c.create_region(4096).unwrap();
    let local = c.register_local(&src).unwrap();
    // Fewer than a worker's PDCs (1024), more than one frame's worth
    // (about 800).
    let n = 1000;
    for i in 0..n {
        let dst = RemoteRegion {
            fep: format!("10.124.{}.{}", 1 + i / 250, 1 + i % 250)
                .parse()
                .unwrap(),
            job: 1,
            pid: 0,
            ri: 1,
            generation: 0,
            key: 1,
        };
        c.write(local.at(0), dst.at(0), 64, None).unwrap();
    }
    let cccs = |json: &str| -> usize {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        v["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["ccc"].as_array().map_or(0, Vec::len))
            .sum()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let json = loop {
        let json = c.stats().expect("stats through the client");
        if cccs(&json) >= n as usize {
            break json;
        }
        assert!(
            Instant::now() < deadline,
            "{} destinations in the stats",
            cccs(&json)
        );
        std::thread::yield_now();
    };
    assert!(
        json.len() > uet_api::proto::MAX_FRAME_LEN,
        "a document longer than a frame ({} bytes)",
        json.len()
    );
    let t = Instant::now();
    c.stats().unwrap();
    let client_took = t.elapsed();
    // The CLI: whole JSON, and the Prometheus form.
    let t = Instant::now();
    let cli = uet_stats(&sock, 0, false).expect("uet stats");
    eprintln!(
        "{n} destinations: a {} byte document in {} chunks; Client::stats {client_took:?}, \
         `uet stats` {:?}",
        json.len(),
        json.len().div_ceil(uet_api::proto::MAX_STATS_CHUNK),
        t.elapsed()
    );
    assert!(cccs(&cli) >= n as usize);
    let prom = uet_stats(&sock, 0, true).expect("uet stats --prometheus");
    assert!(prom.contains("uet_pds_tx_data_total{worker="), "{prom}");
    // The one-frame request of older clients: the counters, with the
    // destinations counted rather than listed.
    let s = UnixStream::connect(&sock).unwrap();
    let hello = ClientMsg::Hello {
        version: uet_api::PROTOCOL_VERSION,
        name: "old".into(),
    };
    send_msg(&s, &hello, None).unwrap();
    let mut r = FrameReader::new();
    let ok = recv_frame::<DaemonMsg>(&s, &mut r).unwrap();
    assert!(matches!(ok.msg, DaemonMsg::HelloOk { .. }), "{:?}", ok.msg);
    send_msg(&s, &ClientMsg::Stats, None).unwrap();
    match recv_frame::<DaemonMsg>(&s, &mut r).unwrap().msg {
        DaemonMsg::StatsReply { json } => {
            let v: serde_json::Value = serde_json::from_str(&json).unwrap();
            let omitted: u64 = v["workers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w["ccc_omitted"].as_u64().unwrap_or(0))
                .sum();
            assert!(omitted >= n, "{omitted}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn keys_the_daemon_picks_carry_the_ri_and_generation_of_the_region() {
    let ns = NetNs::create("uet-key").unwrap();
    let (_d, sock) = daemon(&ns, "127.0.0.1", "", &[]);
    let composed = |r: &uet_api::Registration| {
        let key = uet_ses::MemoryKey(r.remote.key);
        assert_eq!(
            (key.ri().get(), key.generation().get()),
            (r.remote.ri, r.remote.generation),
            "key {key} of {:?}",
            r.remote
        );
    };
    let mut c = connect(&sock);
    let pid = c.session().pid;
    let region = c.create_region(4096).unwrap();
    let first = c.register(&region, Access::REMOTE_WRITE, None).unwrap();
    composed(&first);
    let second = c.register(&region, Access::REMOTE_WRITE, None).unwrap();
    composed(&second);
    assert_ne!(first.remote.ri, second.remote.ri);
    assert_ne!(
        first.remote.key & ((1 << 44) - 1),
        second.remote.key & ((1 << 44) - 1),
        "random low bits"
    );
    // A key the client asks for is kept as it is.
    let own = c
        .register(&region, Access::REMOTE_WRITE, Some(0x5eed))
        .unwrap();
    assert_eq!(own.remote.key, 0x5eed);
    c.close().unwrap();

    // The next client with the same pid_on_fep registers the same RI again:
    // the generation moved on (the departed client's registration left a
    // tombstone), and the key says so.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut again = loop {
        let c = connect(&sock);
        if c.session().pid == pid {
            break c;
        }
        assert!(Instant::now() < deadline, "pid {pid} never freed");
        drop(c);
        std::thread::yield_now();
    };
    let region = again.create_region(4096).unwrap();
    let reg = again.register(&region, Access::REMOTE_WRITE, None).unwrap();
    assert_eq!(reg.remote.ri, first.remote.ri);
    assert_eq!(
        reg.remote.generation,
        first.remote.generation.wrapping_add(1)
    );
    composed(&reg);
}
