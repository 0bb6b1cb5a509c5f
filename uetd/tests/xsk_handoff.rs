//! Hand-off between workers on a real kernel: a veth with two queues, one
//! AF_XDP worker per queue in namespace A, and senders in B that put each
//! peer's frames on the queue of the worker that does *not* own it. Every
//! frame is handed to its owner (descriptor only), processed there from the
//! origin's UMEM, and returned; sleeping workers are woken by the hand-off;
//! afterwards every frame of both UMEMs is back.

mod xsk_common;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use uet_lab::netns::{NetNs, run};
use uet_pds::Transmit;
use uet_wire::encap::EncapConfig;
use uet_wire::{Dscp, Ecn, EntropyValue};
use uetd::io::PacketIo;
use uetd::xdp::{SteerConfig, XdpMode, XdpSteer};
use uetd::xsk::{Handoff, XdpIo, XdpIoConfig, XskConfig};
use xsk_common::{StaticHop, mac_of};

const A: Ipv4Addr = Ipv4Addr::new(10, 77, 3, 1);
/// Owned by worker 0, sent on queue 1.
const P0: Ipv4Addr = Ipv4Addr::new(10, 77, 3, 2);
/// Owned by worker 1, sent on queue 0.
const P1: Ipv4Addr = Ipv4Addr::new(10, 77, 3, 3);
const N: usize = 200;

fn io_cfg(ifname: &str, queue: u32, local: Ipv4Addr) -> XdpIoConfig {
    XdpIoConfig {
        xsk: XskConfig {
            ifname: ifname.into(),
            queues: vec![queue],
            frame_count: 512,
            ring_size: 256,
            fill_size: 256,
            ..XskConfig::default()
        },
        local_ip: IpAddr::V4(local),
        encap: EncapConfig::default(),
        native_ip: false,
        mtu: None,
    }
}

#[test]
fn xsk_handoff_frames_reach_their_owner_and_come_back() {
    let a = NetNs::create("uet-xho").unwrap();
    let b = NetNs::create("uet-xho").unwrap();
    run(std::process::Command::new("ip").args([
        "link",
        "add",
        "ha",
        "netns",
        a.name(),
        "numtxqueues",
        "2",
        "numrxqueues",
        "2",
        "type",
        "veth",
        "peer",
        "name",
        "hb",
        "netns",
        b.name(),
        "numtxqueues",
        "2",
        "numrxqueues",
        "2",
    ]))
    .unwrap();
    a.ip(&["addr", "add", "10.77.3.1/24", "dev", "ha"]).unwrap();
    a.ip(&["link", "set", "ha", "up"]).unwrap();
    b.ip(&["link", "set", "hb", "up"]).unwrap();
    let mac_a = mac_of(&a, "ha");

    // Worker 0 owns P0, worker 1 owns P1.
    let hub = Handoff::new(2, 256, Box::new(|peer| usize::from(peer == IpAddr::V4(P1)))).unwrap();
    let hub2 = Arc::clone(&hub);
    let (steer, workers) = a
        .run(move || {
            let mut steer = XdpSteer::attach("ha", XdpMode::Auto, SteerConfig::default()).unwrap();
            let hop = Arc::new(StaticHop::default());
            let mut ws = Vec::new();
            for w in 0..2u32 {
                let io = XdpIo::new(
                    w as usize,
                    &io_cfg("ha", w, A),
                    Arc::clone(&hub2),
                    Arc::clone(&hop) as _,
                )
                .unwrap();
                for (q, fd) in io.xsk().fds() {
                    steer.register_socket(q, fd).unwrap();
                }
                ws.push(io);
            }
            (steer, ws)
        })
        .unwrap();
    let before: Vec<_> = workers.iter().map(XdpIo::frame_counts).collect();

    // The workers: receive, sleep in wait() when idle; stop when both have
    // everything (the wake pipe becomes readable).
    let (wake_r, mut wake_w) = std::io::pipe().unwrap();
    let wake_r = Arc::new(wake_r);
    let total = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    for (w, mut io) in workers.into_iter().enumerate() {
        let wake_r = Arc::clone(&wake_r);
        let total = Arc::clone(&total);
        let stop_tx = stop_tx.clone();
        handles.push(std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut longest = Duration::ZERO;
            let deadline = Instant::now() + Duration::from_secs(20);
            while total.load(Ordering::SeqCst) < 2 * N {
                assert!(Instant::now() < deadline, "worker {w}: {:?}", io.stats());
                let n = io
                    .recv(64, &mut |m, b| got.push((m.src, b.to_vec(), m.arrived)))
                    .unwrap();
                if n > 0 {
                    if total.fetch_add(n, Ordering::SeqCst) + n == 2 * N {
                        let _ = stop_tx.send(());
                    }
                    continue;
                }
                let t = Instant::now();
                io.wait(Some(Duration::from_secs(3)), wake_r.as_fd())
                    .unwrap();
                longest = longest.max(t.elapsed());
            }
            (io, got, longest)
        }));
    }

    // Senders in B: P1's frames on queue 0 (worker 0 receives, worker 1
    // owns), P0's on queue 1.
    let hop_b = Arc::new(StaticHop::with(&[(IpAddr::V4(A), mac_a)]));
    let mut senders = b
        .run(move || {
            [(0, P1), (1, P0)].map(|(q, ip)| {
                XdpIo::new(
                    0,
                    &io_cfg("hb", q, ip),
                    Handoff::single().unwrap(),
                    Arc::clone(&hop_b) as _,
                )
                .unwrap()
            })
        })
        .unwrap();
    for (s, io) in senders.iter_mut().enumerate() {
        let mut i = 0usize;
        while i < N {
            io.send(32, &mut |buf: &mut [u8]| {
                if i == N {
                    return None;
                }
                buf[..2].copy_from_slice(&(i as u16).to_be_bytes());
                buf[2] = s as u8;
                i += 1;
                Some(Transmit {
                    dst: IpAddr::V4(A),
                    ev: EntropyValue::from_masked(i as u16),
                    dscp: Dscp::from_masked(0),
                    ecn: Ecn::NotEct,
                    len: 100,
                    sdi: None,
                })
            })
            .unwrap();
            io.flush().unwrap();
        }
    }

    // Wake the workers out of their last wait once everything arrived.
    stop_rx.recv_timeout(Duration::from_secs(20)).unwrap();
    wake_w.write_all(b"x").unwrap();
    let mut workers = Vec::new();
    for (w, h) in handles.into_iter().enumerate() {
        let (io, got, longest) = h.join().unwrap();
        // Worker 0 owns P0 (sender 1), worker 1 owns P1 (sender 0).
        let want = if w == 0 { P0 } else { P1 };
        assert_eq!(got.len(), N, "worker {w}");
        assert!(
            got.iter()
                .all(|(src, b, _)| *src == IpAddr::V4(want) && b.len() == 100)
        );
        // The receiving worker took each arrival stamp and lent it on.
        assert!(got.iter().all(|(_, _, at)| at.is_some()), "worker {w}");
        let mut seq: Vec<u16> = got
            .iter()
            .map(|(_, b, _)| u16::from_be_bytes([b[0], b[1]]))
            .collect();
        seq.sort_unstable();
        assert_eq!(seq, (0..N as u16).collect::<Vec<_>>());
        // Every frame went through the other worker.
        let st = io.stats();
        assert_eq!(st.handed_off, N as u64, "worker {w}: {st:?}");
        assert_eq!(io.extra_stats().handed_in, N as u64, "worker {w}");
        assert_eq!(st.rx_dropped, 0);
        // A hand-off wakes a sleeping owner: no wait ran to its timeout.
        assert!(
            longest < Duration::from_secs(3),
            "worker {w} slept {longest:?}"
        );
        workers.push(io);
    }
    for (w, io) in workers.iter_mut().enumerate() {
        io.flush().unwrap();
        let c = io.frame_counts();
        assert!(c.accounted(), "{c:?}");
        assert_eq!(c, before[w], "worker {w}");
    }
    drop(workers);
    drop(steer);
}
