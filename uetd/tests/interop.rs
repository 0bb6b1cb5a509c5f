//! Wire settings for other UET implementations, between daemons in network
//! namespaces joined by veth (runs as root, as CI does): native IP
//! (protocol 253, entropy header) and UDP, each with the CRC32C trailer,
//! between two xdp daemons and between an xdp daemon and the udp backend
//! (its raw-socket counterpart for native IP); a pair whose settings
//! differ fails with the reason counted. One pair of namespaces serves
//! every variant: the daemons restart with other settings.

mod common;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use common::{Pair, Uetd, field, landed};
use uet_api::{Access, Client};
use uet_wire::encap::crc32c;
use uetd::packet::PacketSocket;

/// Bytes per transfer: 1 GiB; `UET_E2E_BYTES` shrinks it for quick local
/// runs.
fn bytes() -> String {
    std::env::var("UET_E2E_BYTES").unwrap_or_else(|_| "1GiB".into())
}

/// A target daemon exposing `size` bytes, and the generation of its
/// region (drawn at each start).
fn target(pair: &Pair, backend: &str, wire: &[&str], size: &str) -> (Uetd, String) {
    let expose = format!("1:0x5eed:{size}");
    let mut args = vec![
        "--interface",
        "v1",
        "--backend",
        backend,
        "--expose",
        &expose,
        "--stats",
    ];
    args.extend_from_slice(wire);
    let mut t = Uetd::spawn(&pair.b, &args);
    let exposed = t.wait_line("\"exposed\"", Duration::from_secs(30));
    let generation = field(&exposed, "generation").to_owned();
    (t, generation)
}

fn writer(pair: &Pair, backend: &str, wire: &[&str], size: &str, generation: &str) -> Uetd {
    let mut args = vec![
        "--interface",
        "v0",
        "--backend",
        backend,
        "--write-to",
        &pair.b_ip,
        "--generation",
        generation,
        "--bytes",
        size,
        "--exit",
        "--stats",
    ];
    args.extend_from_slice(wire);
    Uetd::spawn(&pair.a, &args)
}

/// The sum over workers of an `io` counter in a stats line.
fn io_counter(stats: &str, name: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_str(stats).unwrap();
    v["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["io"][name].as_u64().unwrap())
        .sum()
}

/// Stops a target and returns its final stats line.
fn stop(mut t: Uetd) -> String {
    t.signal("-TERM");
    let stats = t.wait_line("\"workers\"", Duration::from_secs(30));
    assert_eq!(t.wait_exit(Duration::from_secs(10)), Some(0));
    stats
}

/// A write of `bytes()` from an xdp daemon on `a` to a daemon with
/// `b_backend` on `b`, both with `wire`: it lands (the target's hash of its
/// region is the writer's), nothing is dropped for the wire settings, and
/// the frames were the encapsulation asked for.
fn transfer(pair: &Pair, b_backend: &str, wire: &[&str]) {
    let size = bytes();
    let (mut t, generation) = target(pair, b_backend, wire, &size);
    // Without XDP on the target's interface its AF_PACKET tap sees what the
    // writer's xdp daemon sent.
    let sniff =
        (b_backend == "udp").then(|| pair.b.run(|| PacketSocket::open("v1")).unwrap().unwrap());
    let mut w = writer(pair, "xdp", wire, &size, &generation);
    let (written, _) = landed(&mut w, &mut t, Duration::from_secs(600));
    let w_stats = w.wait_line("\"workers\"", Duration::from_secs(30));
    assert_eq!(w.wait_exit(Duration::from_secs(30)), Some(0));
    let t_stats = stop(t);
    for (who, s) in [("writer", &w_stats), ("target", &t_stats)] {
        for c in ["rx_bad_crc", "rx_other_encap"] {
            assert_eq!(io_counter(s, c), 0, "{who} {c}: {s}");
        }
        assert!(io_counter(s, "rx_packets") > 0, "{who}: {s}");
    }
    if let Some(sniff) = sniff {
        let a: Ipv4Addr = pair.a_ip.parse().unwrap();
        let native = !wire.contains(&"udp");
        let f = sniff
            .recv_matching(Duration::from_secs(5), |f| ipv4_from(f, a).is_some())
            .unwrap()
            .expect("a frame from the writer");
        let ip = ipv4_from(&f, a).unwrap();
        assert_eq!(ip[9], if native { 253 } else { 17 }, "{:02x?}", &f[..64]);
        assert_eq!(
            trailer_of(ip),
            crc_of(ip),
            "network-order trailer: {:02x?}",
            &f[..64]
        );
    }
    eprintln!("xdp->{b_backend} {wire:?}: {written}");
}

/// The IPv4 packet of an Ethernet frame from `src`.
fn ipv4_from(frame: &[u8], src: Ipv4Addr) -> Option<&[u8]> {
    let ip = frame.get(14..).filter(|_| frame[12..14] == [0x08, 0x00])?;
    let len = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
    let ip = ip.get(..len)?;
    (ip.get(12..16)? == src.octets()).then_some(ip)
}

/// The last 4 bytes of an IP packet read in network order.
fn trailer_of(ip: &[u8]) -> u32 {
    u32::from_be_bytes(ip[ip.len() - 4..].try_into().unwrap())
}

/// The CRC-32C REFPROV puts in the trailer: from the IPv4 source address
/// to the trailer.
fn crc_of(ip: &[u8]) -> u32 {
    crc32c(&ip[12..ip.len() - 4])
}

#[test]
fn writes_land_with_native_ip_or_udp_and_the_crc_trailer_and_mismatches_are_counted() {
    let pair = Pair::new(91, 1500);
    // The udp backend's kernel datagrams leave the veth with their checksum
    // unfinished (CHECKSUM_PARTIAL) and XDP hands them to AF_XDP as they
    // are; a real NIC fills it in (see the datapath tests).
    pair.b
        .run(|| uetd::xsk::set_tx_checksum_offload("v1", false))
        .unwrap()
        .unwrap();

    let ip_crc: &[&str] = &["--encap", "ip", "--crc-trailer"];
    let refprov: &[&str] = &["--profile", "refprov"];
    let udp_crc: &[&str] = &["--encap", "udp", "--crc-trailer"];
    transfer(&pair, "xdp", ip_crc);
    transfer(&pair, "udp", refprov);
    transfer(&pair, "xdp", udp_crc);
    transfer(&pair, "udp", udp_crc);

    // A trailer on one side only: the writer's daemon drops every answer
    // for its trailer and says so in the failure.
    let size = "8MiB";
    let (t, generation) = target(&pair, "xdp", &["--encap", "ip"], size);
    let mut w = writer(&pair, "xdp", ip_crc, size, &generation);
    let failed = w.wait_line("\"write_failed\"", Duration::from_secs(60));
    assert!(
        failed.contains("rx_bad_crc") && failed.contains("crc_trailer on"),
        "{failed}"
    );
    let w_stats = w.wait_line("\"workers\"", Duration::from_secs(30));
    assert_eq!(w.wait_exit(Duration::from_secs(30)), Some(2));
    assert!(io_counter(&w_stats, "rx_bad_crc") > 0, "{w_stats}");
    drop(stop(t));

    // Native IP against UDP: the target counts every frame as the other
    // encapsulation, and the writer's write fails rather than hangs.
    let (t, generation) = target(&pair, "xdp", &["--encap", "udp"], size);
    let mut w = writer(&pair, "xdp", &["--encap", "ip"], size, &generation);
    let failed = w.wait_line("\"write_failed\"", Duration::from_secs(60));
    assert_eq!(w.wait_exit(Duration::from_secs(30)), Some(2), "{failed}");
    let t_stats = stop(t);
    assert!(io_counter(&t_stats, "rx_other_encap") > 0, "{t_stats}");
    assert_eq!(io_counter(&t_stats, "rx_packets"), 0, "{t_stats}");
}

/// Lays out a frame as the UEC reference provider does (`uet_pkt_hdr.h`;
/// `docs/protocol-notes.md` §1, §2.5, §4.1, §4.2), byte by byte: IPv4 protocol
/// 253, the entropy header, a RUD_REQ with SYN and AR, a standard SES RMA
/// WRITE request (SOM, EOM) with `payload`, and the CRC-32C trailer in
/// network order.
#[allow(clippy::too_many_arguments)]
fn ref_write_frame(
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    ev: u16,
    region: &uet_api::RemoteRegion,
    offset: u64,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&[0x08, 0x00]);
    let ip_len = 20 + 4 + 12 + 44 + payload.len() + 4;
    let mut ip = vec![
        0x45, 0x00, // version 4, IHL 5; DSCP CS0, Not-ECT
    ];
    ip.extend_from_slice(&(ip_len as u16).to_be_bytes());
    ip.extend_from_slice(&[0x00, 0x01, 0x40, 0x00, 64, 253, 0, 0]); // id, DF, TTL, proto
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    let mut sum: u32 = ip
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    // Entropy header: EV, reserved.
    ip.extend_from_slice(&ev.to_be_bytes());
    ip.extend_from_slice(&[0, 0]);
    // RUD_REQ: type 2, next header 3 (standard request), flags SYN 0x04 |
    // AR 0x08; clear_psn_offset -1; PSN 0x1000; SPDCID 0x42; pdc_info 0,
    // psn_offset 0 (this PSN is the start PSN).
    let prologue: u16 = (2 << 11) | (3 << 7) | 0x04 | 0x08;
    ip.extend_from_slice(&prologue.to_be_bytes());
    ip.extend_from_slice(&(-1i16).to_be_bytes());
    ip.extend_from_slice(&0x1000u32.to_be_bytes());
    ip.extend_from_slice(&0x0042u16.to_be_bytes());
    ip.extend_from_slice(&0u16.to_be_bytes());
    // Standard request: opcode WRITE 0x01; version 0, SOM | EOM; message
    // ID 1; RI generation, job ID (24 bits); pid_on_fep, resource index
    // (12 bits each); buffer offset; initiator 0; memory key; header data
    // 0 (SOM); request length.
    ip.extend_from_slice(&[0x01, 0x03]);
    ip.extend_from_slice(&1u16.to_be_bytes());
    ip.push(region.generation);
    ip.extend_from_slice(&region.job.to_be_bytes()[1..]);
    ip.extend_from_slice(&(region.pid & 0x0fff).to_be_bytes());
    ip.extend_from_slice(&(region.ri & 0x0fff).to_be_bytes());
    ip.extend_from_slice(&offset.to_be_bytes());
    ip.extend_from_slice(&0u32.to_be_bytes());
    ip.extend_from_slice(&region.key.to_be_bytes());
    ip.extend_from_slice(&0u64.to_be_bytes());
    ip.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    ip.extend_from_slice(payload);
    ip.extend_from_slice(&[0; 4]);
    let crc = crc_of(&ip);
    let n = ip.len();
    ip[n - 4..].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(ip.len(), ip_len);
    f.extend_from_slice(&ip);
    f
}

fn rx_bad_crc(c: &mut Client) -> u64 {
    io_counter(&c.stats().unwrap(), "rx_bad_crc")
}

#[test]
fn a_reference_provider_frame_over_af_packet_lands_and_is_answered_in_kind() {
    let pair = Pair::new(92, 1500);
    let mut daemon = Uetd::spawn(
        &pair.b,
        &[
            "--interface",
            "v1",
            "--backend",
            "xdp",
            "--profile",
            "refprov",
        ],
    );
    // The control socket answers once the daemon serves.
    let path = Uetd::socket_of(&pair.b);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut client = loop {
        match Client::connect(&path, "refprov-test") {
            Ok(c) => break c,
            Err(e) => {
                assert!(Instant::now() < deadline, "connecting to {path}: {e}");
                std::thread::yield_now();
            }
        }
    };
    let len = 4096u64;
    let mem = client.create_region(len).unwrap();
    let reg = client.register(&mem, Access::REMOTE_WRITE, None).unwrap();

    let inject = pair.a.run(|| PacketSocket::open("v0")).unwrap().unwrap();
    let b_mac = pair
        .b
        .run(|| PacketSocket::open("v1").map(|s| s.mac()))
        .unwrap()
        .unwrap();
    let (a, b): (Ipv4Addr, Ipv4Addr) = (pair.a_ip.parse().unwrap(), pair.b_ip.parse().unwrap());
    let payload: Vec<u8> = (0..512u32).map(|i| (i * 7 + 3) as u8).collect();
    let good = ref_write_frame(
        b_mac.0,
        inject.mac().0,
        a,
        b,
        0x1234,
        &reg.remote,
        256,
        &payload,
    );

    // One trailer bit flipped: dropped, counted, nothing placed.
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0x01;
    let before = rx_bad_crc(&mut client);
    inject.send(&bad).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while rx_bad_crc(&mut client) == before {
        assert!(Instant::now() < deadline, "the bad frame was not counted");
        std::thread::yield_now();
    }
    let mut got = vec![0u8; len as usize];
    mem.read_at(0, &mut got).unwrap();
    assert!(got.iter().all(|&b| b == 0), "memory touched by a bad frame");

    // The good frame: the data lands, and the answer is native IP with the
    // EV echoed and a network-order trailer.
    inject.send(&good).unwrap();
    let reply = inject
        .recv_matching(Duration::from_secs(10), |f| {
            ipv4_from(f, b).is_some_and(|ip| ip[9] == 253)
        })
        .unwrap()
        .expect("an answer from the daemon");
    let ip = ipv4_from(&reply, b).unwrap();
    assert_eq!(&ip[16..20], &a.octets());
    assert_eq!(trailer_of(ip), crc_of(ip), "trailer: {reply:02x?}");
    assert_eq!(u16::from_be_bytes([ip[20], ip[21]]), 0x1234, "EV echoed");
    let pds_type = ip[24] >> 3;
    assert!(
        matches!(pds_type, 7..=9),
        "an ACK, not type {pds_type}: {reply:02x?}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        mem.read_at(0, &mut got).unwrap();
        if got[256..768] == payload[..] {
            break;
        }
        assert!(Instant::now() < deadline, "the write did not land");
        std::thread::yield_now();
    }
    assert!(got[..256].iter().chain(&got[768..]).all(|&b| b == 0));
    assert_eq!(rx_bad_crc(&mut client), before + 1);
    drop(client);
    daemon.signal("-TERM");
    assert_eq!(daemon.wait_exit(Duration::from_secs(10)), Some(0));
}
