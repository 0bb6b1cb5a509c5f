//! The raw blaster and sink on a veth pair: a fixed number of frames goes
//! through, every UMEM frame comes back, and zero-copy can be forced (and
//! fails on veth, which has no zero-copy AF_XDP).

mod xsk_common;

use std::sync::atomic::{AtomicBool, Ordering};

use uet_lab::netns::{NetNs, veth_pair};
use uet_tools::blast::xsk::{self as raw, BlastConfig};
use uetd::xdp::{SteerConfig, XdpMode, XdpSteer};
use uetd::xsk::{XskConfig, XskMode, XskSet};
use xsk_common::{mac_of, until};

fn cfg(ifname: &str, mode: XskMode) -> XskConfig {
    XskConfig {
        ifname: ifname.into(),
        mode,
        frame_count: 1024,
        ring_size: 512,
        fill_size: 512,
        // The ceiling: every chunk on its own, as a raw AF_XDP program runs.
        contiguous_chains: false,
        ..XskConfig::default()
    }
}

#[test]
fn xsk_raw_blast_and_sink_count_every_frame() {
    blast_and_sink(3000, 2000, true);
}

#[test]
fn xsk_raw_blast_and_sink_count_every_multi_buffer_frame_at_mtu_9000() {
    // 9014-byte frames: chains of three 4 KiB UMEM frames each way.
    blast_and_sink(9000, 9014, false);
}

fn blast_and_sink(mtu: u32, frame_len: usize, check_zero_copy: bool) {
    let a = NetNs::create("uet-xraw").unwrap();
    let b = NetNs::create("uet-xraw").unwrap();
    veth_pair(&a, "ra", "10.77.4.1/24", &b, "rb", "10.77.4.2/24", mtu).unwrap();
    let mac_b = mac_of(&b, "rb");

    if check_zero_copy {
        let forced = a
            .run(|| XskSet::open(&cfg("ra", XskMode::ZeroCopy)).err())
            .unwrap();
        assert!(forced.is_some(), "veth has no zero-copy AF_XDP");
    }

    let (steer, mut set) = b
        .run(|| {
            let mut steer = XdpSteer::attach("rb", XdpMode::Auto, SteerConfig::default()).unwrap();
            let set = XskSet::open(&cfg("rb", XskMode::Copy)).unwrap();
            for (q, fd) in set.fds() {
                steer.register_socket(q, fd).unwrap();
            }
            (steer, set)
        })
        .unwrap();
    let before = set.counts();
    let n = 3000;
    let blast = BlastConfig {
        xsk: cfg("ra", XskMode::Auto),
        dst_mac: mac_b,
        src_ip: "10.77.4.1".parse().unwrap(),
        dst_ip: "10.77.4.2".parse().unwrap(),
        udp_port: 4793,
        frame_len,
        batch: 16,
        count: Some(n),
    };
    let stop = AtomicBool::new(false);
    let sink = std::thread::scope(|s| {
        let h = s.spawn(|| raw::sink(&mut set, &stop, Some(n)));
        let tx = a
            .run(move || raw::blast(&blast, &AtomicBool::new(false)))
            .unwrap()
            .unwrap();
        assert_eq!(tx.packets, n);
        assert_eq!(tx.bytes, n * frame_len as u64);
        assert!(!tx.zero_copy);
        // Once XDP has steered every frame, the sink drains its rings and
        // stops.
        assert!(until(1_000_000, || steer.counters().unwrap().redirected == n));
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap().unwrap()
    });
    // Whatever the sink could not take in time is in the kernel's drop
    // counters, never lost silently.
    assert_eq!(
        sink.packets + sink.kernel.rx_ring_full + sink.kernel.rx_dropped,
        n,
        "{sink:?}"
    );
    assert_eq!(sink.bytes, sink.packets * frame_len as u64);
    assert_eq!(steer.counters().unwrap().redirected, n);
    let c = set.counts();
    assert!(c.accounted(), "{c:?}");
    assert_eq!(c, before);
}
