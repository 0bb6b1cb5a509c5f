//! Datapath throughput over a veth pair in two namespaces:
//! a single-flow RMA write through uetd, beside the ceilings measured on
//! the same link in the same run — kernel UDP with the same datagram size,
//! and raw AF_XDP with the same frame size.
//!
//! ```text
//! sudo cargo bench -p uetd --bench datapath -- [--bytes 1GiB] [--mtu 1500] [--repeats 3]
//! ```
//!
//! Prints a markdown table of medians over the repeats (BENCHMARKS.md).

#[path = "../tests/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{Pair, field, write_once};

struct Opts {
    bytes: String,
    mtu: u32,
    repeats: usize,
    seconds: f64,
}

fn opts() -> Opts {
    let mut o = Opts {
        bytes: "1GiB".into(),
        mtu: 1500,
        repeats: 3,
        seconds: 2.0,
    };
    let args: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--bytes" => o.bytes = v,
            "--mtu" => o.mtu = v.parse().expect("--mtu N"),
            "--repeats" => o.repeats = v.parse().expect("--repeats N"),
            "--seconds" => o.seconds = v.parse().expect("--seconds S"),
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    o
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Kernel UDP: payload Gb/s of `size`-byte datagrams a → b.
fn kernel_udp(pair: &Pair, size: usize, seconds: f64) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    let bind: SocketAddr = format!("{}:9000", pair.b_ip).parse().unwrap();
    let (s2, r2) = (stop.clone(), ready.clone());
    let sink = pair
        .b
        .spawn(move || {
            uet_tools::blast::udp::sink(bind, None, Duration::from_millis(300), &s2, &r2)
        })
        .unwrap();
    while !ready.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    let src: SocketAddr = format!("{}:9001", pair.a_ip).parse().unwrap();
    let s3 = stop.clone();
    let blaster = pair
        .a
        .spawn(move || uet_tools::blast::udp::blast(src, bind, size, None, &s3))
        .unwrap();
    std::thread::park_timeout(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Release);
    let _sent = blaster.join().unwrap().unwrap().unwrap();
    let got = sink.join().unwrap().unwrap().unwrap();
    got.gbps()
}

/// Raw AF_XDP: Gb/s of `frame`-byte Ethernet frames the sink counted, and
/// the same expressed as UDP payload (what a write's goodput compares to).
fn raw_xsk(pair: &Pair, frame: usize, seconds: f64) -> (f64, f64) {
    let cfg = |ifname: &str| uetd::xsk::XskConfig {
        ifname: ifname.into(),
        frame_count: 8192,
        fill_size: 4096,
        // The ceiling: every chunk on its own, as a raw AF_XDP program runs.
        contiguous_chains: false,
        ..uetd::xsk::XskConfig::default()
    };
    let (_tx, rx) = uet_lab::ceiling::veth_ceiling(
        &pair.a,
        cfg("v0"),
        pair.a_ip.parse().unwrap(),
        &pair.b,
        cfg("v1"),
        pair.b_ip.parse().unwrap(),
        frame,
        Duration::from_secs_f64(seconds),
    )
    .unwrap();
    let payload = (frame - 14 - 28) as f64 / frame as f64;
    (rx.gbps(), rx.gbps() * payload)
}

/// uetd a → b, one RMA write flow of `bytes`: goodput Gb/s.
fn uetd_write(pair: &Pair, a_backend: &str, b_backend: &str, bytes: &str) -> f64 {
    let w = write_once(pair, a_backend, b_backend, bytes, &[]);
    field(&w.written, "gbps").parse().unwrap()
}

fn main() {
    let o = opts();
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let pair = Pair::new(90, o.mtu);
    // uetd's data packets are at most a 4 KiB payload behind its headers
    // (MAX_SES_LEN), however large the MTU: the ceilings are measured at
    // the frame size uetd sends (a multi-buffer chain of UMEM frames above
    // 3840 bytes).
    let frame = uetd::daemon::max_data_frame_len(o.mtu as usize);
    let dgram = frame - 14 - 28;
    let mut rows: Vec<(String, Vec<f64>)> = vec![
        (
            format!("kernel UDP ceiling, {dgram} B datagrams (payload)"),
            vec![],
        ),
        (
            format!("raw AF_XDP ceiling, {frame} B frames (frame bytes)"),
            vec![],
        ),
        ("raw AF_XDP ceiling as UDP payload".into(), vec![]),
        ("uetd udp -> udp, RMA write goodput".into(), vec![]),
        ("uetd xdp -> xdp, RMA write goodput".into(), vec![]),
    ];
    for r in 0..o.repeats {
        rows[0].1.push(kernel_udp(&pair, dgram, o.seconds));
        let (f, p) = raw_xsk(&pair, frame, o.seconds);
        rows[1].1.push(f);
        rows[2].1.push(p);
        rows[3].1.push(uetd_write(&pair, "udp", "udp", &o.bytes));
        rows[4].1.push(uetd_write(&pair, "xdp", "xdp", &o.bytes));
        eprintln!(
            "repeat {r}: {:?}",
            rows.iter().map(|r| r.1.last().copied()).collect::<Vec<_>>()
        );
    }
    let udp = median(rows[0].1.clone());
    let xsk = median(rows[2].1.clone());
    println!(
        "| path (veth, MTU {}, copy mode, {} repeats) | Gb/s median | runs | vs kernel UDP | vs raw AF_XDP |",
        o.mtu, o.repeats
    );
    println!("|---|---|---|---|---|");
    for (name, v) in &rows {
        let m = median(v.clone());
        let runs: Vec<String> = v.iter().map(|x| format!("{x:.2}")).collect();
        println!(
            "| {name} | {m:.2} | {} | {:.0} % | {:.0} % |",
            runs.join(", "),
            m / udp * 100.0,
            m / xsk * 100.0
        );
    }
}
