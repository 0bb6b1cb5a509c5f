//! Raw ceilings of a lab link: what the link carries with no protocol on
//! it, measured in the same run as the protocol it is compared with.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use uet_tools::blast::xsk::{BlastConfig, RawReport, blast, sink_on};
use uetd::xsk::XskConfig;

use crate::error::{Error, Result};

/// The raw ceiling of a veth pair: sinks on `b_if` (in `b`) and blasts
/// `frame_len`-byte UDP frames from `a_if` (in `a`) for `duration`.
/// Returns (blaster, sink) reports.
#[allow(clippy::too_many_arguments)]
pub fn veth_ceiling(
    a: &crate::netns::NetNs,
    a_xsk: XskConfig,
    a_ip: IpAddr,
    b: &crate::netns::NetNs,
    b_xsk: XskConfig,
    b_ip: IpAddr,
    frame_len: usize,
    duration: Duration,
) -> Result<(RawReport, RawReport)> {
    veth_ceiling_cpu(a, a_xsk, a_ip, b, b_xsk, b_ip, frame_len, duration)
        .map(|(tx, rx, _)| (tx, rx))
}

/// [`veth_ceiling`], and the machine's busy CPUs (CPU-seconds per second,
/// [`crate::cpu::CpuSample`]) over the measurement window — from the
/// blaster's start to the stop — if `/proc/stat` was readable.
#[allow(clippy::too_many_arguments)]
pub fn veth_ceiling_cpu(
    a: &crate::netns::NetNs,
    a_xsk: XskConfig,
    a_ip: IpAddr,
    b: &crate::netns::NetNs,
    b_xsk: XskConfig,
    b_ip: IpAddr,
    frame_len: usize,
    duration: Duration,
) -> Result<(RawReport, RawReport, Option<f64>)> {
    use std::sync::Arc;
    let port = uetd::xdp::SteerConfig::default().udp_port;
    let stop = Arc::new(AtomicBool::new(false));
    let (mac_tx, mac_rx) = std::sync::mpsc::channel();
    let sink = {
        let stop = Arc::clone(&stop);
        b.spawn(move || {
            sink_on(&b_xsk, port, &stop, |mac| {
                let _ = mac_tx.send(mac);
            })
        })?
    };
    let Ok(dst_mac) = mac_rx.recv_timeout(Duration::from_secs(10)) else {
        stop.store(true, Ordering::Relaxed);
        return Err(match sink.join() {
            Ok(Ok(Err(e))) => Error::Tool {
                what: "the raw AF_XDP sink did not start".into(),
                source: e,
            },
            Ok(Err(e)) => Error::io(format!("entering namespace {}", b.name()))(e),
            Err(_) => Error::Panicked("raw AF_XDP sink".into()),
            Ok(Ok(Ok(_))) => Error::Timeout {
                awaiting: "the raw AF_XDP sink to start".into(),
                state: "it was not ready within 10 s".into(),
            },
        });
    };
    let cfg = BlastConfig {
        xsk: a_xsk,
        dst_mac,
        src_ip: a_ip,
        dst_ip: b_ip,
        udp_port: port,
        frame_len,
        batch: 64,
        count: None,
    };
    let cpu = crate::cpu::CpuSample::now().ok();
    let started = Instant::now();
    let blaster = {
        let stop = Arc::clone(&stop);
        a.spawn(move || blast(&cfg, &stop))?
    };
    // The measurement window (not a synchronisation: both sides stop on
    // the flag and report what they counted).
    let deadline = Instant::now() + duration;
    while Instant::now() < deadline {
        std::thread::park_timeout(deadline - Instant::now());
    }
    stop.store(true, Ordering::Relaxed);
    let busy_cpus = cpu
        .and_then(|c| c.busy_seconds().ok())
        .map(|s| s / started.elapsed().as_secs_f64().max(1e-9));
    let tx = blaster
        .join()
        .map_err(|_| Error::Panicked("raw AF_XDP blaster".into()))?
        .map_err(Error::io(format!("entering namespace {}", a.name())))?
        .map_err(Error::io("the raw AF_XDP blaster"))?;
    let rx = sink
        .join()
        .map_err(|_| Error::Panicked("raw AF_XDP sink".into()))?
        .map_err(Error::io(format!("entering namespace {}", b.name())))?
        .map_err(|source| Error::Tool {
            what: "the raw AF_XDP sink".into(),
            source,
        })?;
    Ok((tx, rx, busy_cpus))
}
