//! Next-hop resolution against an attacker on the same L2 and against
//! destinations that never resolve, on the real kernel (root). Every test
//! builds its own uniquely named namespaces (removed on drop, also when an
//! assertion fails); spoofed frames go out of an AF_PACKET socket in a
//! namespace the test made; waits are bounded polls.

mod xsk_common;

use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use uet_lab::netns::{NetNs, veth_pair};
use uet_lab::{Lab, LabConfig, WriteOpts};
use uet_pds::Transmit;
use uet_wire::encap::{EncapConfig, Transport, emit_frame};
use uet_wire::inet::{EtherType, EthernetAddress, EthernetRepr, IpRepr};
use uet_wire::{Dscp, Ecn, EntropyValue};
use uetd::io::{NextHop, PacketIo};
use uetd::neigh::{HINTS_PER_WORKER, MAX_DESTINATIONS, NeighConfig, Neighbours};
use uetd::packet::PacketSocket;
use uetd::xdp::{SteerConfig, XdpMode, XdpSteer};
use uetd::xsk::{Handoff, XdpIo, XdpIoConfig, XskConfig};
use xsk_common::mac_of;

/// A MAC no interface has: where a spoofed frame says the peer is.
const ATTACKER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0x66, 0x66]);

/// A UET-port UDP frame from `src` to `dst` with `src_mac` as its
/// Ethernet source: what an attacker on the L2 sends to claim `src`.
fn spoofed(
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src: Ipv4Addr,
    dst: Ipv4Addr,
) -> Vec<u8> {
    let encap = EncapConfig::default();
    let eth = EthernetRepr {
        dst: dst_mac,
        src: src_mac,
        vlan: None,
        ethertype: EtherType::Ipv4,
    };
    let ip = IpRepr::udp(src.into(), dst.into(), Dscp::from_masked(0), Ecn::NotEct).unwrap();
    let transport = Transport::udp(EntropyValue::from_masked(4242), &encap);
    let mut buf = vec![0u8; 256];
    let n = emit_frame(&eth, &ip, &transport, &encap, 32, &mut buf, |b| b.fill(0)).unwrap();
    buf.truncate(n);
    buf
}

/// Taken by every test here: the 2,000-address test fills the kernel's
/// neighbour table, which all namespaces share (1,024 entries by default),
/// and would starve the others' ARP if they ran beside it.
static KERNEL_NEIGH: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn kernel_neigh() -> std::sync::MutexGuard<'static, ()> {
    KERNEL_NEIGH
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn one_spoofed_frame_does_not_redirect_a_peers_replies() {
    let _serial = kernel_neigh();
    // Host 0 serves, host 1 writes, host 2 is the attacker: all on one
    // bridge. Only host 0's daemon runs before the attack.
    let mut lab = Lab::up(LabConfig {
        hosts: 3,
        region_bytes: 1 << 20,
        sender_daemons: false,
        subnet: 91,
        ..LabConfig::default()
    })
    .unwrap();
    let target_mac = mac_of(lab.host(0), "eth0");
    let attacker = lab
        .host(2)
        .run(|| PacketSocket::open("eth0"))
        .unwrap()
        .unwrap();
    // One frame claiming the writer's IP from another MAC, before the
    // writer ever spoke to the target.
    let frame = spoofed(ATTACKER_MAC, target_mac, lab.ip(1), lab.ip(0));
    attacker.send(&frame).unwrap();
    let opts = WriteOpts {
        bytes: 256 << 10,
        chunk: 64 << 10,
        timeout: Duration::from_secs(10),
        ..WriteOpts::default()
    };
    // The writer's operations complete: the target's ACKs and responses
    // reach the writer, not the MAC the spoofed frame named.
    let w = lab.write(1, 0, &opts).unwrap();
    assert!(w.verified(), "{w:?}");
    // And once the target knows the writer, another spoofed frame changes
    // nothing either.
    attacker.send(&frame).unwrap();
    let w = lab
        .write(
            1,
            0,
            &WriteOpts {
                seed: 2,
                ..opts.clone()
            },
        )
        .unwrap();
    assert!(w.verified(), "{w:?}");
}

fn io_cfg(ifname: &str, local: Ipv4Addr) -> XdpIoConfig {
    XdpIoConfig {
        xsk: XskConfig {
            ifname: ifname.into(),
            frame_count: 4096,
            ring_size: 2048,
            fill_size: 2048,
            ..XskConfig::default()
        },
        local_ip: IpAddr::V4(local),
        encap: EncapConfig::default(),
        native_ip: false,
        mtu: None,
    }
}

/// Receives until `want` more datagrams arrived or `within` passed;
/// returns how many arrived.
fn drain(io: &mut XdpIo, want: usize, within: Duration) -> usize {
    let (wake_r, _wake_w) = std::io::pipe().unwrap();
    let deadline = Instant::now() + within;
    let mut got = 0;
    while got < want && Instant::now() < deadline {
        let n = io.recv(64, &mut |_, _| {}).unwrap();
        got += n;
        if n == 0 {
            io.wait(Some(Duration::from_millis(5)), wake_r.as_fd())
                .unwrap();
        }
    }
    got
}

#[test]
fn a_flood_of_spoofed_sources_stays_within_the_bounds_and_moves_no_known_peer() {
    let _serial = kernel_neigh();
    const A: Ipv4Addr = Ipv4Addr::new(10, 92, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 92, 0, 2);
    let a = NetNs::create("uet-nfl").unwrap();
    let b = NetNs::create("uet-nfl").unwrap();
    veth_pair(&a, "na", "10.92.0.1/16", &b, "nb", "10.92.0.2/16", 1500).unwrap();
    let (mac_a, mac_b) = (mac_of(&a, "na"), mac_of(&b, "nb"));
    let (neigh, steer, mut io) = a
        .run(move || {
            let neigh = Neighbours::start().unwrap();
            let mut steer = XdpSteer::attach("na", XdpMode::Auto, SteerConfig::default()).unwrap();
            let hop: Arc<dyn NextHop> = neigh.clone();
            let io = XdpIo::new(0, &io_cfg("na", A), Handoff::single().unwrap(), hop).unwrap();
            for (q, fd) in io.xsk().fds() {
                steer.register_socket(q, fd).unwrap();
            }
            (neigh, steer, io)
        })
        .unwrap();

    // B speaks first, from its own kernel: A's resolver takes B's MAC from
    // A's kernel (B's ARP for A left it there).
    b.run(|| uetd::xsk::set_tx_checksum_offload("nb", false))
        .unwrap()
        .unwrap();
    let udp = b.run(|| UdpSocket::bind((B, 4793)).unwrap()).unwrap();
    udp.send_to(b"hello", (A, 4793)).unwrap();
    assert_eq!(drain(&mut io, 1, Duration::from_secs(5)), 1);
    let deadline = Instant::now() + Duration::from_secs(5);
    while neigh.lookup(IpAddr::V4(B)).is_none() && Instant::now() < deadline {
        drain(&mut io, 1, Duration::from_millis(1));
    }
    assert_eq!(neigh.lookup(IpAddr::V4(B)), Some(mac_b));

    // The flood: 20,000 frames, each from another spoofed source (on link
    // and off link), every 100th claiming B; sent in bursts the receiver
    // drains between.
    let raw = b.run(|| PacketSocket::open("nb")).unwrap().unwrap();
    let n = 20_000u32;
    let burst = 500;
    let mut received = 0;
    let mut busy = Duration::ZERO;
    let spoof = |i: u32| -> Ipv4Addr {
        if i.is_multiple_of(100) {
            B
        } else {
            // 10.92.1.0 onwards: nobody's addresses.
            Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 92, 1, 0)) + i)
        }
    };
    for start in (0..n).step_by(burst) {
        for i in start..(start + burst as u32).min(n) {
            raw.send(&spoofed(ATTACKER_MAC, mac_a, spoof(i), A))
                .unwrap();
        }
        let t = Instant::now();
        received += drain(&mut io, burst, Duration::from_secs(5));
        busy += t.elapsed();
    }
    eprintln!(
        "flood: {received} of {n} spoofed frames received, {:.2} µs per frame (receive loop incl. waits)",
        busy.as_secs_f64() * 1e6 / f64::from(received.max(1) as u32)
    );
    assert!(received as u32 >= n * 9 / 10, "{received} of {n}");

    // Nothing moved: B's entry is B's MAC, no spoofed source has one in the
    // shared table, and every table stayed within its bound.
    assert_eq!(neigh.lookup(IpAddr::V4(B)), Some(mac_b));
    for i in (1..n).filter(|i| !i.is_multiple_of(100)).step_by(97) {
        assert_eq!(neigh.lookup(IpAddr::V4(spoof(i))), None, "{}", spoof(i));
    }
    assert!(io.hints().len() <= HINTS_PER_WORKER, "{}", io.hints().len());
    assert!(io.hints().refused() > 0);
    let c = neigh.counts();
    assert!(c.destinations <= MAX_DESTINATIONS as u64, "{c:?}");

    // A reply to B goes to B: a datagram A sends arrives at B's socket.
    udp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let sent = io
        .send(1, &mut |buf: &mut [u8]| {
            buf[..5].copy_from_slice(b"reply");
            Some(Transmit {
                dst: IpAddr::V4(B),
                ev: EntropyValue::from_masked(4793),
                dscp: Dscp::from_masked(0),
                ecn: Ecn::NotEct,
                len: 5,
                sdi: None,
            })
        })
        .unwrap();
    assert_eq!(sent, 1);
    let mut got = [0u8; 16];
    let (len, from) = udp.recv_from(&mut got).unwrap();
    assert_eq!((&got[..len], from.ip()), (&b"reply"[..], IpAddr::V4(A)));

    neigh.stop();
    drop(io);
    drop(steer);
}

/// utime + stime of thread `tid` of this process, in clock ticks.
fn cpu_ticks(tid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
    let rest = s.rsplit_once(')').unwrap().1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of stat(5); `rest` starts at field 3.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Clock ticks per second (`getconf CLK_TCK`).
fn clk_tck() -> u64 {
    let out = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

#[test]
fn two_thousand_unreachable_destinations_back_off_drain_and_leave_the_resolver_idle() {
    let _serial = kernel_neigh();
    let a = NetNs::create("uet-nun").unwrap();
    let b = NetNs::create("uet-nun").unwrap();
    // A /16 on link with one other host: the rest never answers ARP.
    veth_pair(&a, "ua", "10.93.0.1/16", &b, "ub", "10.93.0.2/16", 1500).unwrap();
    let forget_after = Duration::from_secs(2);
    let neigh = a
        .run(move || {
            Neighbours::start_with(NeighConfig {
                forget_after,
                ..NeighConfig::default()
            })
            .unwrap()
        })
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while neigh.resolver_tid().is_none() && Instant::now() < deadline {
        std::thread::yield_now();
    }
    let tid = neigh.resolver_tid().unwrap();
    let hz = clk_tck();
    let ghosts: Vec<IpAddr> = (0..2000u32)
        .map(|i| IpAddr::V4(Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 93, 1, 0)) + i)))
        .collect();

    // The peer is known to the kernel, as one we have talked to is.
    let pinged = a
        .command("ping")
        .args(["-c", "1", "-W", "2", "10.93.0.2"])
        .output()
        .unwrap();
    assert!(pinged.status.success(), "ping the peer");
    // Senders keep missing for 3 s (as retransmissions to them would),
    // asking 10 times a second.
    let t0 = cpu_ticks(tid);
    let start = Instant::now();
    let mut max_wanted = 0;
    while start.elapsed() < Duration::from_secs(3) {
        for &g in &ghosts {
            if neigh.lookup(g).is_none() {
                neigh.request(g);
            }
        }
        max_wanted = max_wanted.max(neigh.counts().destinations);
        std::thread::park_timeout(Duration::from_millis(100));
    }
    // With 2,000 unreachable destinations wanted, a reachable one still
    // resolves promptly: the resolver is neither stuck nor starved. (The
    // peer talked to us before the flood, so the kernel has its entry:
    // the kernel's neighbour table is one for all namespaces, 1,024
    // entries by default (`gc_thresh3`), and with 2,000 addresses in ARP it
    // refuses new entries until its garbage collector frees failed ones.)
    let peer = IpAddr::V4(Ipv4Addr::new(10, 93, 0, 2));
    neigh.request(peer);
    let by = Instant::now() + Duration::from_secs(3);
    while neigh.lookup(peer).is_none() && Instant::now() < by {
        std::thread::park_timeout(Duration::from_millis(5));
    }
    assert_eq!(
        neigh.lookup(peer),
        Some(mac_of(&b, "ub")),
        "the reachable peer"
    );
    let asking = cpu_ticks(tid) - t0;
    let c = neigh.counts();
    eprintln!(
        "2000 unreachable, asked for 3 s: resolver CPU {:.1} % of a core, {} kernel lookups, {c:?}",
        asking as f64 * 100.0 / (3.0 * hz as f64),
        c.attempts
    );
    assert!(max_wanted <= 2001 && c.destinations <= 2001, "{c:?}");
    // Backoff: each tried ~12 times in 3 s (1 ms doubling to 1 s), not
    // 3,000 times (every millisecond).
    assert!(c.attempts <= 2001 * 16, "{c:?}");

    // Nobody asks any more: the set drains within forget_after (+ a pass).
    let drained_by = Instant::now() + forget_after + Duration::from_secs(5);
    while neigh.counts().destinations > 0 && Instant::now() < drained_by {
        std::thread::park_timeout(Duration::from_millis(50));
    }
    let c = neigh.counts();
    assert_eq!(c.destinations, 0, "{c:?}");
    assert!(c.forgotten >= 2000, "{c:?}");
    // And the resolver is idle: at most a tick of CPU in the next 2 s.
    let t1 = cpu_ticks(tid);
    let idle_from = Instant::now();
    while idle_from.elapsed() < Duration::from_secs(2) {
        std::thread::park_timeout(Duration::from_millis(100));
    }
    let idle = cpu_ticks(tid) - t1;
    eprintln!(
        "after draining: resolver CPU {:.1} % of a core over 2 s",
        idle as f64 * 100.0 / (2.0 * hz as f64)
    );
    assert!(idle <= 1, "{idle} ticks in 2 s");
    neigh.stop();
}
