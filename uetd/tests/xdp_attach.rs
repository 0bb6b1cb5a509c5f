//! The XDP steering program on a real kernel (root; `docs/architecture.md` §5, §6):
//! attach modes on veth, ping and non-UET traffic untouched, UET datagrams
//! without a socket passed to the kernel and counted, detach on drop, stale
//! netlink-attached programs replaced, live ones not stolen, and the
//! program's parsing checked frame by frame with `BPF_PROG_TEST_RUN`.
//!
//! Every test builds its own namespaces (`NetNs`, deleted on drop, also
//! when an assertion fails). No sleeps: conditions that settle
//! asynchronously are polled until a deadline.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use uet_lab::netns::{NetNs, veth_pair};
use uetd::xdp::{
    AttachedMode, StalePolicy, SteerConfig, SteerCounters, SteerProgram, XdpMode, XdpSteer,
};

const XDP_PASS: u32 = 2;

/// Two namespaces joined by veth `v0` (10.77.0.1) ↔ `v1` (10.77.0.2).
fn lab(mtu: u32) -> (NetNs, NetNs) {
    // The loader's logs (stale replacement, fallback) in the test output.
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_ansi(false)
        .with_env_filter("uetd=info")
        .try_init();
    let a = NetNs::create("uet-xdp").unwrap();
    let b = NetNs::create("uet-xdp").unwrap();
    veth_pair(&a, "v0", "10.77.0.1/24", &b, "v1", "10.77.0.2/24", mtu).unwrap();
    (a, b)
}

/// `(mode, program id)` of the XDP program on `ifname` per
/// `ip -d link show`, `None` when there is none. Mode as iproute2 prints
/// it: 1 native, 2 generic.
fn xdp_on(ns: &NetNs, ifname: &str) -> Option<(u64, u64)> {
    let out = ns.ip(&["-j", "-d", "link", "show", "dev", ifname]).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let xdp = v.get(0)?.get("xdp")?;
    Some((xdp["mode"].as_u64()?, xdp["prog"]["id"].as_u64()?))
}

/// Polls `cond` until it holds or 10 s pass.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

fn ping(from: &NetNs, to: &str) {
    let out = from
        .command("ping")
        .args(["-c", "3", "-i", "0.2", "-W", "2", to])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ping {to}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

fn attach_in(
    ns: &NetNs,
    ifname: &'static str,
    mode: XdpMode,
) -> Result<XdpSteer, uetd::xdp::XdpError> {
    ns.run(move || XdpSteer::attach(ifname, mode, SteerConfig::default()))
        .unwrap()
}

fn assert_balanced(c: &SteerCounters) {
    assert_eq!(c.seen, c.redirected + c.passed + c.malformed, "{c:?}");
    assert!(c.no_socket <= c.passed, "{c:?}");
}

fn check_attached_mode(mode: XdpMode, want: AttachedMode, ip_mode: u64) {
    let (a, b) = lab(1500);
    let steer = attach_in(&b, "v1", mode).unwrap();
    assert_eq!(steer.mode(), want);
    let id = u64::from(steer.program().program_id().unwrap());
    assert_eq!(xdp_on(&b, "v1"), Some((ip_mode, id)));

    let before = steer.counters().unwrap();
    ping(&a, "10.77.0.2");
    let d = steer.counters().unwrap().since(&before);
    // Three echo requests at least (plus ARP, and whatever IPv6 ND the
    // kernel sends meanwhile), none of them UET.
    assert!(d.seen >= 3 && d.passed >= 3, "{d:?}");
    assert_eq!((d.redirected, d.malformed, d.no_socket), (0, 0, 0), "{d:?}");
    assert_balanced(&steer.counters().unwrap());

    drop(steer);
    eventually("the program to be detached", || xdp_on(&b, "v1").is_none());
    ping(&a, "10.77.0.2");
}

#[test]
fn attaches_natively_on_veth_ping_passes_and_drop_detaches() {
    check_attached_mode(XdpMode::Native, AttachedMode::Native, 1);
}

#[test]
fn auto_mode_prefers_native() {
    check_attached_mode(XdpMode::Auto, AttachedMode::Native, 1);
}

#[test]
fn attaches_in_generic_mode_when_forced() {
    check_attached_mode(XdpMode::Generic, AttachedMode::Generic, 2);
}

#[test]
fn attaches_natively_on_veth_at_mtu_9000() {
    // veth takes native XDP above MTU 3498 only from a frags-aware program
    // (docs/architecture.md §5); the steering program is one.
    let (a, b) = lab(9000);
    let steer = attach_in(&b, "v1", XdpMode::Native).unwrap();
    assert_eq!(steer.mode(), AttachedMode::Native);
    assert_eq!(xdp_on(&b, "v1").map(|(m, _)| m), Some(1));
    ping(&a, "10.77.0.2");
    drop(steer);
    eventually("the program to be detached", || xdp_on(&b, "v1").is_none());
}

#[test]
fn auto_mode_falls_back_to_generic_when_native_is_refused() {
    // Loopback has no native XDP.
    let (_a, b) = lab(1500);
    assert!(attach_in(&b, "lo", XdpMode::Native).is_err());
    let steer = attach_in(&b, "lo", XdpMode::Auto).unwrap();
    assert_eq!(steer.mode(), AttachedMode::Generic);
    assert_eq!(xdp_on(&b, "lo").map(|(m, _)| m), Some(2));
    drop(steer);
    eventually("the program to be detached", || xdp_on(&b, "lo").is_none());
}

#[test]
fn uet_datagram_without_a_socket_goes_to_the_kernel_and_is_counted() {
    let (a, b) = lab(1500);
    // Sockets stay in the namespace they were created in, whichever thread
    // uses them later.
    let rx = b
        .run(|| UdpSocket::bind("10.77.0.2:4793"))
        .unwrap()
        .unwrap();
    let other = b
        .run(|| UdpSocket::bind("10.77.0.2:4794"))
        .unwrap()
        .unwrap();
    let tx = a.run(|| UdpSocket::bind("10.77.0.1:0")).unwrap().unwrap();
    for s in [&rx, &other] {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    }
    let steer = attach_in(&b, "v1", XdpMode::Native).unwrap();
    let before = steer.counters().unwrap();

    tx.send_to(b"uet, no socket", "10.77.0.2:4793").unwrap();
    let mut buf = [0u8; 64];
    let (n, from) = rx.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"uet, no socket");
    assert_eq!(from.ip().to_string(), "10.77.0.1");
    let d = steer.counters().unwrap().since(&before);
    assert_eq!((d.no_socket, d.redirected), (1, 0), "{d:?}");

    tx.send_to(b"not uet", "10.77.0.2:4794").unwrap();
    let n = other.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"not uet");
    let d = steer.counters().unwrap().since(&before);
    assert_eq!((d.no_socket, d.redirected, d.malformed), (1, 0, 0), "{d:?}");
    assert!(d.passed >= 2, "{d:?}");
    assert_balanced(&steer.counters().unwrap());
}

#[test]
fn registering_a_non_xdp_socket_is_refused() {
    let (_a, b) = lab(1500);
    let mut steer = attach_in(&b, "v1", XdpMode::Generic).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    use std::os::fd::AsFd as _;
    assert!(steer.register_socket(0, udp.as_fd()).is_err());
    assert!(
        steer.register_socket(64, udp.as_fd()).is_err(),
        "beyond the map"
    );
    steer.unregister(0).unwrap();
}

/// A `uet_steer` attached through netlink (what `ip link` or an older
/// daemon leaves behind, surviving its process) is found and replaced.
fn check_stale_replaced(stale_mode: &str, stale_ip_mode: u64, mode: XdpMode) {
    let (a, b) = lab(1500);
    let obj = std::env::temp_dir().join(format!("uet_steer-{}-{stale_mode}.o", std::process::id()));
    std::fs::write(&obj, xdp_prog::object()).unwrap();
    let r = b.ip(&[
        "link",
        "set",
        "dev",
        "v1",
        stale_mode,
        "obj",
        obj.to_str().unwrap(),
        "sec",
        xdp_prog::SECTION,
    ]);
    std::fs::remove_file(&obj).unwrap();
    r.unwrap();
    let (m, stale_id) = xdp_on(&b, "v1").expect("the stale program is attached");
    assert_eq!(m, stale_ip_mode);

    let steer = attach_in(&b, "v1", mode).unwrap();
    let id = u64::from(steer.program().program_id().unwrap());
    assert_ne!(id, stale_id);
    let (_, now) = xdp_on(&b, "v1").unwrap();
    assert_eq!(now, id, "ours replaced the stale program");
    ping(&a, "10.77.0.2");
    assert!(steer.counters().unwrap().passed >= 3);
    drop(steer);
    eventually("the program to be detached", || xdp_on(&b, "v1").is_none());
}

#[test]
fn stale_generic_program_attached_via_netlink_is_replaced() {
    check_stale_replaced("xdpgeneric", 2, XdpMode::Auto);
}

#[test]
fn stale_native_program_attached_via_netlink_is_replaced_in_generic_mode() {
    check_stale_replaced("xdpdrv", 1, XdpMode::Generic);
}

#[test]
fn a_program_held_by_a_live_link_is_not_taken_over() {
    let (_a, b) = lab(1500);
    let first = attach_in(&b, "v1", XdpMode::Native).unwrap();
    let id = u64::from(first.program().program_id().unwrap());
    let err = attach_in(&b, "v1", XdpMode::Auto).unwrap_err();
    assert!(format!("{err:#}").contains("bpf_link"), "{err:#}");
    assert_eq!(
        xdp_on(&b, "v1"),
        Some((1, id)),
        "the first one is untouched"
    );
    // Also under the permissive policy: a live link is never stolen.
    let err = b
        .run(|| {
            SteerProgram::load(SteerConfig::default())?.attach(
                "v1",
                XdpMode::Auto,
                StalePolicy::ReplaceAny,
            )
        })
        .unwrap()
        .unwrap_err();
    assert!(format!("{err:#}").contains("bpf_link"), "{err:#}");
}

// ---- the program's parser, frame by frame (BPF_PROG_TEST_RUN) ------------

const MAC: [u8; 12] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];

fn eth(ethertype: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = MAC.to_vec();
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

fn vlan(tpid: u16, ethertype: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = MAC.to_vec();
    f.extend_from_slice(&tpid.to_be_bytes());
    f.extend_from_slice(&0x0064u16.to_be_bytes()); // VID 100
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

fn udp(dport: u16) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&50000u16.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&16u16.to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(b"payload!");
    u
}

/// IPv4 with `ihl` words of header (options zero-filled) and `frag_off`.
fn ipv4(proto: u8, ihl: u8, frag_off: u16, l4: &[u8]) -> Vec<u8> {
    let hlen = usize::from(ihl.max(5)) * 4;
    let mut h = vec![0u8; hlen];
    h[0] = 0x40 | ihl;
    h[2..4].copy_from_slice(&((hlen + l4.len()) as u16).to_be_bytes());
    h[6..8].copy_from_slice(&frag_off.to_be_bytes());
    h[8] = 64;
    h[9] = proto;
    h[12..16].copy_from_slice(&[10, 77, 0, 1]);
    h[16..20].copy_from_slice(&[10, 77, 0, 2]);
    h.extend_from_slice(l4);
    h
}

fn ipv6(next: u8, l4: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; 40];
    h[0] = 0x60;
    h[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
    h[6] = next;
    h[7] = 64;
    h[23] = 1;
    h[39] = 2;
    h.extend_from_slice(l4);
    h
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// UET: would be redirected (no socket in a test run: `no_socket`).
    Uet,
    /// Well-formed, not UET: `passed` only.
    Other,
    /// `malformed`.
    Malformed,
}

fn classify(p: &SteerProgram, frame: &[u8]) -> Class {
    let before = p.counters().unwrap();
    assert_eq!(
        p.test_run(frame).unwrap(),
        XDP_PASS,
        "every verdict is PASS"
    );
    let d = p.counters().unwrap().since(&before);
    assert_eq!(d.seen, 1, "{d:?}");
    assert_eq!(d.redirected, 0, "{d:?}");
    match (d.passed, d.malformed, d.no_socket) {
        (1, 0, 1) => Class::Uet,
        (1, 0, 0) => Class::Other,
        (0, 1, 0) => Class::Malformed,
        _ => panic!("inconsistent counters {d:?}"),
    }
}

#[test]
fn the_program_parses_what_its_comment_says() {
    // Loading runs the verifier; test runs need no interface.
    let mut p = SteerProgram::load(SteerConfig::default()).unwrap();
    const IP: u16 = 0x0800;
    const IP6: u16 = 0x86dd;
    let u4 = |port| ipv4(17, 5, 0, &udp(port));

    let cases: Vec<(&str, Vec<u8>, Class)> = vec![
        ("IPv4 UDP 4793", eth(IP, &u4(4793)), Class::Uet),
        ("IPv4 UDP 4794", eth(IP, &u4(4794)), Class::Other),
        (
            "802.1Q IPv4 UDP 4793",
            vlan(0x8100, IP, &u4(4793)),
            Class::Uet,
        ),
        (
            "802.1ad IPv6 UDP 4793",
            vlan(0x88a8, IP6, &ipv6(17, &udp(4793))),
            Class::Uet,
        ),
        ("IPv6 UDP 4793", eth(IP6, &ipv6(17, &udp(4793))), Class::Uet),
        ("IPv6 UDP 53", eth(IP6, &ipv6(17, &udp(53))), Class::Other),
        (
            "IPv4 with options",
            eth(IP, &ipv4(17, 15, 0, &udp(4793))),
            Class::Uet,
        ),
        (
            "IPv4 first fragment",
            eth(IP, &ipv4(17, 5, 0x2000, &udp(4793))),
            Class::Other,
        ),
        (
            "IPv4 later fragment",
            eth(IP, &ipv4(17, 5, 0x0010, &udp(4793))),
            Class::Other,
        ),
        (
            "IPv4 DF is no fragment",
            eth(IP, &ipv4(17, 5, 0x4000, &udp(4793))),
            Class::Uet,
        ),
        (
            "IPv4 proto 253, native off",
            eth(IP, &ipv4(253, 5, 0, b"uet")),
            Class::Other,
        ),
        (
            "IPv6 hop-by-hop header",
            eth(IP6, &ipv6(0, &udp(4793))),
            Class::Other,
        ),
        ("ICMP", eth(IP, &ipv4(1, 5, 0, &[8, 0, 0, 0])), Class::Other),
        ("ARP", eth(0x0806, &[0u8; 28]), Class::Other),
        (
            "IPv4 header cut",
            eth(IP, &u4(4793)[..12]),
            Class::Malformed,
        ),
        (
            "IPv4 IHL 4",
            eth(IP, &ipv4(17, 4, 0, &udp(4793))),
            Class::Malformed,
        ),
        (
            "IPv4 options cut",
            eth(IP, &ipv4(17, 15, 0, &[])[..40]),
            Class::Malformed,
        ),
        ("UDP header cut", eth(IP, &u4(4793)[..24]), Class::Malformed),
        (
            "IPv6 header cut",
            eth(IP6, &ipv6(17, &[])[..30]),
            Class::Malformed,
        ),
        ("IPv6 version 4", eth(IP6, &u4(4793)[..]), Class::Malformed),
        (
            "VLAN tag cut",
            vlan(0x8100, IP, &[])[..16].to_vec(),
            Class::Malformed,
        ),
    ];
    for (what, frame, want) in &cases {
        assert_eq!(classify(&p, frame), *want, "{what}");
    }

    // Native-IP UET when enabled; and another UDP port.
    p.set_config(SteerConfig {
        udp_port: 5000,
        ip_proto: Some(253),
    })
    .unwrap();
    let switched: Vec<(&str, Vec<u8>, Class)> = vec![
        (
            "IPv4 proto 253",
            eth(IP, &ipv4(253, 5, 0, b"uet")),
            Class::Uet,
        ),
        (
            "IPv6 next header 253",
            eth(IP6, &ipv6(253, b"uet")),
            Class::Uet,
        ),
        (
            "IPv4 proto 254",
            eth(IP, &ipv4(254, 5, 0, b"uet")),
            Class::Other,
        ),
        ("UDP 5000", eth(IP, &u4(5000)), Class::Uet),
        ("UDP 4793 no longer", eth(IP, &u4(4793)), Class::Other),
    ];
    for (what, frame, want) in &switched {
        assert_eq!(classify(&p, frame), *want, "{what}");
    }
    assert_balanced(&p.counters().unwrap());
}
