//! AF_XDP receive on a real kernel: UET datagrams sent into a veth reach
//! `XdpIo` in the other namespace through the XDP steering program, with
//! the right metadata (the program's arrival stamp included) and bytes in place; other traffic stays with the
//! kernel; frames not for us are counted drops; every frame comes back.

mod xsk_common;

use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use uet_lab::netns::{NetNs, veth_pair};
use uet_pds::Transmit;
use uet_wire::encap::EncapConfig;
use uet_wire::{Dscp, Ecn, EntropyValue};
use uetd::io::PacketIo;
use uetd::xdp::{SteerConfig, XdpMode, XdpSteer};
use uetd::xsk::{Handoff, XdpIo, XdpIoConfig, XskConfig};
use xsk_common::{StaticHop, mac_of};

const A: Ipv4Addr = Ipv4Addr::new(10, 77, 2, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 77, 2, 2);
const OTHER: Ipv4Addr = Ipv4Addr::new(10, 77, 2, 9);

fn io_cfg(ifname: &str, local: Ipv4Addr) -> XdpIoConfig {
    XdpIoConfig {
        xsk: XskConfig {
            ifname: ifname.into(),
            frame_count: 512,
            ring_size: 128,
            fill_size: 128,
            ..XskConfig::default()
        },
        local_ip: IpAddr::V4(local),
        encap: EncapConfig::default(),
        native_ip: false,
        mtu: None,
    }
}

/// Receives until `want` datagrams arrived (bounded by a deadline),
/// sleeping in `wait` between batches.
fn recv_n(io: &mut XdpIo, want: usize) -> Vec<(uet_pds::RxMeta, Vec<u8>)> {
    let (wake_r, _wake_w) = std::io::pipe().unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < want {
        assert!(
            Instant::now() < deadline,
            "got {} of {want}: {:?}",
            got.len(),
            io.stats()
        );
        let n = io.recv(64, &mut |m, b| got.push((*m, b.to_vec()))).unwrap();
        if n == 0 {
            io.wait(Some(Duration::from_millis(50)), wake_r.as_fd())
                .unwrap();
        }
    }
    got
}

#[test]
fn xsk_rx_kernel_udp_and_xsk_frames_arrive_through_xdp() {
    let a = NetNs::create("uet-xrx").unwrap();
    let b = NetNs::create("uet-xrx").unwrap();
    veth_pair(&a, "ya", "10.77.2.1/24", &b, "yb", "10.77.2.2/24", 1500).unwrap();
    let mac_a = mac_of(&a, "ya");

    let hop_a = Arc::new(StaticHop::default());
    let (steer, mut io) = a
        .run(move || {
            let mut steer = XdpSteer::attach("ya", XdpMode::Auto, SteerConfig::default()).unwrap();
            let io = XdpIo::new(0, &io_cfg("ya", A), Handoff::single().unwrap(), hop_a).unwrap();
            for (q, fd) in io.xsk().fds() {
                steer.register_socket(q, fd).unwrap();
            }
            (steer, io)
        })
        .unwrap();
    let before = io.frame_counts();

    // Kernel UDP in B: to the UET port (steered to us) and to another
    // port (left to the kernel, which answers nothing: no socket there).
    // (veth leaves the UDP checksum of kernel datagrams to the "device"
    // unless transmit checksum offload is off.)
    b.run(|| uetd::xsk::set_tx_checksum_offload("yb", false))
        .unwrap()
        .unwrap();
    let udp = b.run(|| UdpSocket::bind((B, 5555)).unwrap()).unwrap();
    let n = 50;
    let sent_from = uetd::worker::now();
    for i in 0..n {
        let p: Vec<u8> = (0..(i * 20 + 1)).map(|k| (i + k) as u8).collect();
        udp.send_to(&p, (A, 4793)).unwrap();
        udp.send_to(b"not uet", (A, 4794)).unwrap();
    }
    let got = recv_n(&mut io, n);
    let read_by = uetd::worker::now();
    for (i, (m, bytes)) in got.iter().enumerate() {
        // The steering program stamped each one's arrival (CLOCK_MONOTONIC,
        // the daemon's clock) between its send and its read.
        let at = m
            .arrived
            .unwrap_or_else(|| panic!("datagram {i} has no arrival stamp"));
        assert!(
            sent_from <= at && at <= read_by,
            "datagram {i} arrived at {at:?}"
        );
        let p: Vec<u8> = (0..(i * 20 + 1)).map(|k| (i + k) as u8).collect();
        assert_eq!(bytes, &p, "datagram {i}");
        assert_eq!(m.src, IpAddr::V4(B));
        assert_eq!(m.ev.get(), 5555);
        assert_eq!(m.ecn, Ecn::NotEct);
        assert_eq!(m.trimmed, None);
        // UDP length + 40.
        assert_eq!(m.nominal_size as usize, 8 + p.len() + 40);
    }

    // AF_XDP in B (no XDP there: it only sends): ECN and EV carried; a
    // frame for another address on our MAC is a counted drop.
    let hop_b = Arc::new(StaticHop::with(&[
        (IpAddr::V4(A), mac_a),
        (IpAddr::V4(OTHER), mac_a),
    ]));
    let mut tx = b
        .run(move || XdpIo::new(0, &io_cfg("yb", B), Handoff::single().unwrap(), hop_b).unwrap())
        .unwrap();
    let mut k = 0;
    let sent = tx
        .send(8, &mut |buf: &mut [u8]| {
            k += 1;
            buf[..3].copy_from_slice(&[k, k, k]);
            Some(Transmit {
                dst: IpAddr::V4(if k == 4 { OTHER } else { A }),
                ev: EntropyValue::from_masked(40_000 + u16::from(k)),
                dscp: Dscp::from_masked(0),
                ecn: Ecn::Ect1,
                len: 3,
                sdi: None,
            })
        })
        .unwrap();
    assert_eq!(sent, 8);
    let got = recv_n(&mut io, 7);
    let ks: Vec<u8> = got.iter().map(|(_, b)| b[0]).collect();
    assert_eq!(ks, [1, 2, 3, 5, 6, 7, 8]);
    for (m, b) in &got {
        assert!(m.arrived.is_some_and(|at| at <= uetd::worker::now()));
        assert_eq!(m.ev.get(), 40_000 + u16::from(b[0]));
        assert_eq!(m.ecn, Ecn::Ect1);
        assert_eq!(b.len(), 3);
    }
    let st = io.stats();
    assert_eq!(st.rx_packets, n as u64 + 7);
    assert_eq!(st.rx_dropped, 1);
    assert_eq!(io.extra_stats().rx_not_for_us, 1);
    let c = steer.counters().unwrap();
    assert!(c.redirected >= n as u64 + 8, "{c:?}");

    // Every frame is back in the free list or the fill ring.
    io.flush().unwrap();
    let c = io.frame_counts();
    assert!(c.accounted(), "{c:?}");
    assert_eq!(c, before);
    let k = io.xsk().kernel_stats().unwrap();
    assert_eq!((k.rx_dropped, k.rx_invalid_descs), (0, 0), "{k:?}");
    drop(io);
    drop(steer);
}
