//! AF_XDP transmit on a real kernel: frames sent by `XdpIo` in one
//! namespace reach a kernel UDP socket in another with the exact bytes
//! (so the IPv4 and UDP checksums are right: the kernel drops otherwise),
//! the entropy value as source port, and every UMEM frame comes back.

mod xsk_common;

use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

use uet_lab::netns::{NetNs, veth_pair};
use uet_pds::Transmit;
use uet_wire::encap::EncapConfig;
use uet_wire::{Dscp, Ecn, EntropyValue};
use uetd::io::PacketIo;
use uetd::xsk::{Handoff, XdpIo, XdpIoConfig, XskConfig, XskMode};
use xsk_common::{StaticHop, mac_of, until};

const A: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 2);
const C: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 3);

fn payload(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|k| (i * 31 + k * 7) as u8).collect()
}

/// The worker loop takes a `Box<dyn PacketIo + Send>`.
#[test]
fn xsk_io_is_send() {
    fn send<T: Send>() {}
    send::<XdpIo>();
    send::<uetd::xsk::XskSet>();
}

#[test]
fn xsk_tx_reaches_kernel_udp_with_exact_bytes_and_frames_come_back() {
    let a = NetNs::create("uet-xtx").unwrap();
    let b = NetNs::create("uet-xtx").unwrap();
    veth_pair(&a, "xa", "10.77.1.1/24", &b, "xb", "10.77.1.2/24", 1500).unwrap();
    let mac_b = mac_of(&b, "xb");
    let sock = b.run(|| UdpSocket::bind((B, 4793)).unwrap()).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();

    let hop = Arc::new(StaticHop::with(&[(IpAddr::V4(B), mac_b)]));
    let cfg = XdpIoConfig {
        xsk: XskConfig {
            ifname: "xa".into(),
            mode: XskMode::Auto,
            frame_count: 256,
            ring_size: 64,
            fill_size: 64,
            ..XskConfig::default()
        },
        local_ip: IpAddr::V4(A),
        encap: EncapConfig::default(),
        native_ip: false,
        mtu: None,
    };
    let hop2 = Arc::clone(&hop);
    let mut io = a
        .run(move || XdpIo::new(0, &cfg, Handoff::single().unwrap(), hop2).unwrap())
        .unwrap();
    assert!(!io.xsk().zero_copy(), "veth has no zero-copy AF_XDP");
    // MTU 1500 - 20 (IPv4) - 8 (UDP).
    assert_eq!(io.max_uet_len(), 1472);
    let before = io.frame_counts();
    assert!(before.accounted(), "{before:?}");

    // 300 datagrams of varied sizes, in batches, more than the TX ring and
    // the UMEM hold at once.
    let n = 300;
    let sizes = |i: usize| [1, 64, 1000, 1472][i % 4];
    let mut next = 0;
    let mut sent = 0;
    let mut received = 0;
    let mut buf = [0u8; 2048];
    while received < n {
        if next < n {
            sent += io
                .send(16, &mut |frame: &mut [u8]| {
                    if next >= n {
                        return None;
                    }
                    let len = sizes(next);
                    frame[..len].copy_from_slice(&payload(next, len));
                    let t = Transmit {
                        dst: IpAddr::V4(B),
                        ev: EntropyValue::from_masked(1000 + next as u16),
                        dscp: Dscp::from_masked(10),
                        ecn: Ecn::Ect0,
                        len,
                        sdi: None,
                    };
                    next += 1;
                    Some(t)
                })
                .unwrap();
        }
        // Drain what arrived so far, in order (one veth queue).
        loop {
            sock.set_nonblocking(next < n).unwrap();
            match sock.recv_from(&mut buf) {
                Ok((len, from)) => {
                    assert_eq!(len, sizes(received), "datagram {received}");
                    assert_eq!(&buf[..len], &payload(received, len)[..]);
                    assert_eq!(from, (A, 1000 + received as u16).into());
                    received += 1;
                    if received == n {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("after {received} datagrams: {e} ({:?})", io.stats()),
            }
        }
    }
    assert_eq!(sent, n);
    let st = io.stats();
    assert_eq!(st.tx_packets, n as u64);
    assert_eq!(st.tx_dropped, 0);

    // No neighbour: counted, resolution requested, the frame recycled.
    let sent = io
        .send(4, &mut |frame: &mut [u8]| {
            frame[0] = 1;
            Some(Transmit {
                dst: IpAddr::V4(C),
                ev: EntropyValue::from_masked(1),
                dscp: Dscp::from_masked(0),
                ecn: Ecn::NotEct,
                len: 1,
                sdi: None,
            })
        })
        .unwrap();
    assert_eq!(sent, 0);
    let st = io.stats();
    assert_eq!(st.tx_no_neighbour, 4);
    assert_eq!(st.tx_dropped, 4);
    assert_eq!(hop.requests.load(std::sync::atomic::Ordering::Relaxed), 4);

    // Every frame comes back once the completions are in.
    assert!(
        until(100_000, || {
            io.flush().unwrap();
            io.frame_counts().tx == 0
        }),
        "{:?}",
        io.frame_counts()
    );
    let c = io.frame_counts();
    assert!(c.accounted(), "{c:?}");
    assert_eq!((c.lent, c.rx_held, c.tx), (0, 0, 0));
    assert_eq!(c, before);
    let k = io.xsk().kernel_stats().unwrap();
    assert_eq!(k.tx_invalid_descs, 0);
}
