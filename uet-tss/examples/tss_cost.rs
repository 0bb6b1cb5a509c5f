//! What sealing and opening one frame costs, against copying the same frame
//! (a baseline measured in the same run): `cargo run --release -p uet-tss
//! --example tss_cost [mtu]`. Prints, per mode, the median over 7 rounds of
//! nanoseconds per frame, the ratio to the copy, and cycles at the clock
//! /proc/cpuinfo reports.

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::Instant as Clock;

use uet_tss::{DomainConfig, DomainKey, Flow, Mode, SecretKey, SecurityDomain};
use uet_wire::encap::{EncapConfig, Transport, emit_frame, frame_len};
use uet_wire::inet::{EtherType, EthernetAddress, EthernetRepr, IpRepr, Ipv4Repr};
use uet_wire::pds::tss::{ICV_LEN, Sdi};
use uet_wire::time::Instant;
use uet_wire::{Dscp, Ecn, EntropyValue};

const ROUNDS: usize = 7;
const FRAMES: usize = 10_000;

fn frame(mtu: usize, hl: usize) -> Vec<u8> {
    let eth = EthernetRepr {
        dst: EthernetAddress([2, 0, 0, 0, 0, 2]),
        src: EthernetAddress([2, 0, 0, 0, 0, 1]),
        vlan: None,
        ethertype: EtherType::Ipv4,
    };
    let ip = IpRepr::V4(Ipv4Repr {
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: Ipv4Addr::new(10, 0, 0, 2),
        protocol: 0,
        payload_len: 0,
        ttl: 64,
        dscp: Dscp::from_masked(0),
        ecn: Ecn::Ect0,
        ident: 1,
        dont_frag: true,
    });
    let cfg = EncapConfig::default();
    let t = Transport::udp(EntropyValue::from_masked(0xc001), &cfg);
    // IPv4 20 + UDP 8 inside the MTU.
    let uet_len = mtu - 28;
    let mut buf = vec![0u8; frame_len(&eth, &ip, &t, &cfg, uet_len)];
    emit_frame(&eth, &ip, &t, &cfg, uet_len, &mut buf, |u| {
        for (i, b) in u[hl..uet_len - ICV_LEN].iter_mut().enumerate() {
            *b = i as u8;
        }
    })
    .expect("frame fits");
    buf
}

/// The first CPU's clock in MHz as /proc/cpuinfo says (0 when unknown).
fn cpu_mhz() -> f64 {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("cpu MHz"))
                .and_then(|l| l.split(':').nth(1))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0.0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn per_frame(mut f: impl FnMut()) -> f64 {
    median(
        (0..ROUNDS)
            .map(|_| {
                let t = Clock::now();
                for _ in 0..FRAMES {
                    f();
                }
                t.elapsed().as_nanos() as f64 / FRAMES as f64
            })
            .collect(),
    )
}

/// Opening: a pool of `FRAMES` frames sealed by `seal` (distinct TSCs,
/// 35 MB at MTU 3498, so each is cold when copied in), copied in and
/// opened by `open` with a fresh receiver each round (so none is a
/// replay); the median ns per frame.
fn per_opened_frame(
    template: &[u8],
    rx_config: &DomainConfig,
    mut seal: impl FnMut(&mut [u8]),
    mut open: impl FnMut(&mut SecurityDomain, &mut [u8]),
) -> f64 {
    let sealed: Vec<Vec<u8>> = (0..FRAMES)
        .map(|_| {
            let mut f = template.to_vec();
            seal(&mut f);
            f
        })
        .collect();
    let mut work = template.to_vec();
    median(
        (0..ROUNDS)
            .map(|_| {
                let mut rx = SecurityDomain::new(rx_config.clone());
                rx.install_key(false, DomainKey::Key(SecretKey::new([7; 32])))
                    .expect("key");
                let t = Clock::now();
                for f in &sealed {
                    work.copy_from_slice(f);
                    open(&mut rx, &mut work);
                }
                t.elapsed().as_nanos() as f64 / FRAMES as f64
            })
            .collect(),
    )
}

fn main() {
    let mtu: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3498);
    let cfg = EncapConfig::default();
    let template = frame(mtu, 12);
    let mut work = template.clone();
    let copy = per_frame(|| {
        work.copy_from_slice(black_box(&template));
        black_box(&mut work);
    });
    println!(
        "frame {} B (MTU {mtu}), {ROUNDS} rounds x {FRAMES} frames, median ns/frame",
        template.len()
    );
    // Cycles at the clock the kernel reports (no cycle counter is read:
    // a VM may hide it).
    let mhz = cpu_mhz();
    println!(
        "{:<22} {:>9} {:>8} {:>9} {:>9}",
        "what", "ns", "x copy", "Gb/s", "cycles"
    );
    let line = |name: &str, ns: f64| {
        println!(
            "{name:<22} {ns:>9.1} {:>8.1} {:>9.2} {:>9.0}",
            ns / copy,
            template.len() as f64 * 8.0 / ns,
            ns * mhz / 1000.0
        );
    };
    line("copy (baseline)", copy);
    // The AEAD alone over the same bytes, to tell the primitive's cost
    // from the framing's.
    {
        use uet_tss::crypto::{Aead, Provider, Ring, RustCrypto};
        let k = Ring.aead(&[7; 32]);
        let raw = per_frame(|| {
            work.copy_from_slice(&template);
            black_box(k.seal(&[1; 12], &[0; 24], &mut work[54..]).expect("seal"));
        });
        line("copy+AES-GCM (ring)", raw);
        // Opening with the primitive alone: a frame sealed once, copied in
        // and opened (decrypt + verify) each time.
        let mut sealed = template.clone();
        let tag = k.seal(&[1; 12], &[0; 24], &mut sealed[54..]).expect("seal");
        let raw = per_frame(|| {
            work.copy_from_slice(&sealed);
            k.open(&[1; 12], &[0; 24], &mut work[54..], &tag)
                .expect("open");
            black_box(&mut work);
        });
        line("copy+AES-GCM open", raw);
        let k = RustCrypto.aead(&[7; 32]);
        let raw = per_frame(|| {
            work.copy_from_slice(&template);
            black_box(k.seal(&[1; 12], &[0; 24], &mut work[54..]).expect("seal"));
        });
        line("copy+AES-GCM (aes-gcm)", raw);
    }
    for mode in [Mode::Direct, Mode::Cluster] {
        let c = DomainConfig::new(Sdi::new(1).expect("sdi"), mode);
        let rx_config = c.clone();
        let mut tx = SecurityDomain::new(c);
        tx.install_key(false, DomainKey::Key(SecretKey::new([7; 32])))
            .expect("key");
        // Seal: copy the plaintext template, then seal (the copy is the
        // baseline's work, so the difference is the sealing).
        let seal = per_frame(|| {
            work.copy_from_slice(&template);
            tx.seal(&mut work, &cfg).expect("seal");
        });
        line(&format!("{mode:?} copy+seal"), seal);
        let open = per_opened_frame(
            &template,
            &rx_config,
            |f| {
                tx.seal(f, &cfg).expect("seal");
            },
            |rx, f| {
                rx.open(Instant::ZERO, f, &cfg).expect("open");
            },
        );
        line(&format!("{mode:?} copy+open"), open);
        // What the daemon's worker does: UET bytes only (its backend has
        // taken the L2-L4 headers off), the flow given.
        let uet = 42..template.len();
        let flow = Flow::udp(
            Ipv4Addr::new(10, 0, 0, 1).into(),
            Ipv4Addr::new(10, 0, 0, 2).into(),
            0xc001,
            4793,
        )
        .expect("flow");
        let seal_uet = per_frame(|| {
            work.copy_from_slice(&template);
            tx.seal_uet(&mut work[uet.clone()], &flow).expect("seal");
        });
        line(&format!("{mode:?} copy+seal_uet"), seal_uet);
        let open_uet = per_opened_frame(
            &template,
            &rx_config,
            |f| {
                tx.seal_uet(&mut f[uet.clone()], &flow).expect("seal");
            },
            |rx, f| {
                rx.open_uet(Instant::ZERO, &mut f[uet.clone()], &flow)
                    .expect("open");
            },
        );
        line(&format!("{mode:?} copy+open_uet"), open_uet);
    }
}
