//! `uet stats` shows the AF_XDP sockets' kernel counters (`xsk`): a
//! daemon stopped with SIGSTOP while UET-port datagrams arrive lets its
//! fill and RX rings run dry, and the kernel's drops at the socket then
//! show in `uet stats` (JSON and Prometheus) once it runs again. Runs as
//! root in namespaces of its own.

mod common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use common::{Pair, Uetd, uet};

#[test]
fn uet_stats_shows_drops_at_the_socket() {
    let pair = Pair::new(89, 1500);
    // Small rings: 64 RX slots and a fill ring of 128 frames.
    let dir = std::env::temp_dir().join(format!("uet-xsk-stats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("uetd.toml");
    std::fs::write(
        &conf,
        "interface = \"v1\"\nbackend = \"xdp\"\nring_size = 64\n",
    )
    .unwrap();
    let mut d = Uetd::spawn(
        &pair.b,
        &[
            "--config",
            conf.to_str().unwrap(),
            "--expose",
            "1:0x5eed:1MiB",
        ],
    );
    d.wait_line("\"exposed\"", Duration::from_secs(30));
    let socket = Uetd::socket_of(&pair.b);
    // The control socket may be bound just after the announcement.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::path::Path::new(&socket).exists() {
        assert!(Instant::now() < deadline, "no control socket at {socket}");
        std::thread::yield_now();
    }
    let before: serde_json::Value = serde_json::from_str(&uet(&socket, &["stats"])).unwrap();
    let x = &before["workers"][0]["xsk"];
    assert_eq!(x["rx_ring_full"], 0, "{before}");
    assert_eq!(x["rx_fill_ring_empty_descs"], 0, "{before}");

    // One datagram first, seen by the daemon: the sender's neighbour entry
    // is then resolved and the burst below is not held (and cut) in its
    // queue.
    let to = format!("{}:4793", pair.b_ip);
    let send = |n: u32| {
        let to = to.clone();
        pair.a
            .run(move || {
                let s = UdpSocket::bind("0.0.0.0:0").unwrap();
                for i in 0..n {
                    s.send_to(&i.to_be_bytes(), &to).unwrap();
                }
            })
            .unwrap();
    };
    send(1);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v: serde_json::Value = serde_json::from_str(&uet(&socket, &["stats"])).unwrap();
        if v["workers"][0]["io"]["rx_dropped"].as_u64().unwrap() > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the first datagram never arrived: {v}"
        );
        std::thread::yield_now();
    }

    // The worker cannot take anything while stopped: 1000 datagrams to the
    // UET port overrun its 64 RX slots and 128 fill frames. The counters
    // are published once it runs again. A burst the link itself cut
    // short (veth's own queue) is repeated, a bounded number of times.
    let pid = d.child.id();
    let stopped = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|t| t.trim_start().starts_with('T'))
        })
    };
    let mut after = None;
    for _round in 0..5 {
        d.signal("-STOP");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !stopped() {
            assert!(Instant::now() < deadline, "uetd did not stop");
            std::thread::yield_now();
        }
        send(1000);
        d.signal("-CONT");
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            let v: serde_json::Value = serde_json::from_str(&uet(&socket, &["stats"])).unwrap();
            let x = &v["workers"][0]["xsk"];
            let full = x["rx_ring_full"].as_u64().unwrap();
            let empty = x["rx_fill_ring_empty_descs"].as_u64().unwrap();
            if full + empty > 0 {
                after = Some(v);
                break;
            }
            std::thread::yield_now();
        }
        if after.is_some() {
            break;
        }
    }
    let after = after.expect("no drops at the socket in five bursts");
    let x = &after["workers"][0]["xsk"];
    // What the socket could not take is the kernel's count, not the
    // daemon's: the daemon saw at most what fitted its rings.
    let got = after["workers"][0]["io"]["rx_dropped"].as_u64().unwrap();
    assert!(got <= 1 + 5 * (64 + 128), "{after}");
    assert!(x["rx_dropped"].as_u64().unwrap() + x["rx_ring_full"].as_u64().unwrap() > 0);
    let prom = uet(&socket, &["stats", "--prometheus"]);
    assert!(
        prom.contains("uet_xsk_rx_ring_full_total{worker=\"0\"}"),
        "{prom}"
    );
    assert!(
        prom.contains("uet_xsk_rx_fill_ring_empty_descs_total{worker=\"0\"}"),
        "{prom}"
    );
    d.signal("-TERM");
    assert_eq!(d.wait_exit(Duration::from_secs(10)), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}
