//! A raw AF_XDP blaster and sink: the packets/s and Gb/s the AF_XDP
//! machinery alone reaches on a link, to report uetd's throughput beside
//! (`docs/architecture.md` §7: "throughput figures are always reported beside a
//! ceiling measured in the same run").
//!
//! The blaster writes one UDP frame of the requested size into every
//! sending frame once, then only cycles descriptors: free list → TX ring →
//! completion ring → free list. The sink takes frames off the RX rings,
//! counts them and puts them straight back into the fill rings, without
//! reading them. Neither touches the protocol code.

use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use uet_wire::EntropyValue;
use uet_wire::encap::{EncapConfig, Transport, emit_frame};
use uet_wire::inet::{EtherType, EthernetAddress, EthernetRepr, IpRepr};
use uet_wire::{Dscp, Ecn};

use uetd::xsk::{XskConfig, XskKernelStats, XskSet};

use crate::error::{Error, Result};

/// What the blaster sends.
#[derive(Debug, Clone)]
pub struct BlastConfig {
    /// Sockets (the blaster sends on the first queue).
    pub xsk: XskConfig,
    /// Destination MAC (the sink interface's).
    pub dst_mac: EthernetAddress,
    /// Source IP.
    pub src_ip: IpAddr,
    /// Destination IP.
    pub dst_ip: IpAddr,
    /// UDP destination port (the port the XDP program steers).
    pub udp_port: u16,
    /// Ethernet frame length (headers included, FCS excluded).
    pub frame_len: usize,
    /// Descriptors per ring submit.
    pub batch: u32,
    /// Stop after this many frames (`None`: when `stop` is set).
    pub count: Option<u64>,
}

/// What a blaster or sink measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RawReport {
    /// Frames sent (completed) or received.
    pub packets: u64,
    /// Their bytes (Ethernet header to end of payload).
    pub bytes: u64,
    /// From the first to the last frame.
    pub elapsed: Duration,
    /// Zero-copy mode.
    pub zero_copy: bool,
    /// The sockets' kernel counters.
    pub kernel: XskKernelStats,
}

impl RawReport {
    /// Frames per second.
    #[must_use]
    pub fn pps(&self) -> f64 {
        self.packets as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Gigabits per second of Ethernet frames (without preamble, FCS and
    /// inter-frame gap).
    #[must_use]
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.elapsed.as_secs_f64().max(1e-9) / 1e9
    }
}

fn ip_repr(src: IpAddr, dst: IpAddr) -> io::Result<IpRepr> {
    IpRepr::udp(src, dst, Dscp::from_masked(0), Ecn::NotEct).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "source and destination of different families",
        )
    })
}

/// Sends `frame_len`-byte UDP frames as fast as the socket takes them until
/// `stop` is set or `count` frames are sent. Run on a thread inside the
/// interface's network namespace.
pub fn blast(cfg: &BlastConfig, stop: &AtomicBool) -> io::Result<RawReport> {
    let mut set = XskSet::open(&cfg.xsk)?;
    let ip = ip_repr(cfg.src_ip, cfg.dst_ip)?;
    let eth = EthernetRepr {
        dst: cfg.dst_mac,
        src: set.interface().1,
        vlan: None,
        ethertype: EtherType::Ipv4,
    };
    let encap = EncapConfig {
        udp_port: cfg.udp_port,
        ..EncapConfig::default()
    };
    let hdr = 14 + ip.header_len() + 8;
    // A frame longer than a UMEM frame goes out as a multi-buffer chain,
    // as uetd sends it at the same MTU.
    let room = set.frame_room() * set.max_frags() as usize;
    if cfg.frame_len < hdr || cfg.frame_len > room {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("frame length must be within {hdr}..={room}"),
        ));
    }
    let payload = cfg.frame_len - hdr;
    let per_packet = u64::from(set.frames_per_packet(cfg.frame_len as u32));
    // Write the frame's start into every frame we send from, once (a
    // chain's later frames carry whatever start they hold: the sink does
    // not read payloads).
    let mut whole = vec![0u8; cfg.frame_len];
    set.write_free_frames(|i, buf| {
        let t = Transport::udp(
            EntropyValue::from_masked(0xc000 | (i as u16 & 0xff)),
            &encap,
        );
        emit_frame(&eth, &ip, &t, &encap, payload, &mut whole, |p| {
            p.fill(0x5a);
        })
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let n = buf.len().min(whole.len());
        buf[..n].copy_from_slice(&whole[..n]);
        Ok(n as u32)
    })?;
    let batch = cfg.batch.max(1);
    let limit = cfg.count.unwrap_or(u64::MAX);
    let mut submitted = 0u64;
    let mut completed = 0u64;
    let mut start = None;
    // Frames still with the kernel, in packets (whole chains complete).
    let outstanding = |set: &mut XskSet| u64::from(set.tx_outstanding()).div_ceil(per_packet);
    while completed < limit && !stop.load(Ordering::Relaxed) {
        completed = submitted - outstanding(&mut set);
        let want = batch.min((limit - submitted).min(u64::from(batch)) as u32);
        let n = set.resend_free_frames(want, cfg.frame_len as u32)?;
        if n > 0 {
            submitted += u64::from(n);
            start.get_or_insert_with(Instant::now);
        }
    }
    // Let the last frames complete (bounded).
    for _ in 0..1000 {
        if set.tx_outstanding() == 0 {
            break;
        }
        set.kick()?;
    }
    completed = submitted - outstanding(&mut set);
    let elapsed = start.map_or(Duration::ZERO, |s| s.elapsed());
    Ok(RawReport {
        packets: completed,
        bytes: completed * cfg.frame_len as u64,
        elapsed,
        zero_copy: set.zero_copy(),
        kernel: set.kernel_stats()?,
    })
}

/// Receives frames on every socket of `set` and recycles them at once,
/// until `stop` is set (what is in the RX rings then is still counted) or
/// `count` frames arrived. The clock runs from the first frame to the last.
/// The caller has opened `set` and registered its sockets with the XDP
/// program.
pub fn sink(set: &mut XskSet, stop: &AtomicBool, count: Option<u64>) -> io::Result<RawReport> {
    let limit = count.unwrap_or(u64::MAX);
    let mut packets = 0u64;
    let mut bytes = 0u64;
    let mut first = None;
    let mut last = Instant::now();
    while packets < limit {
        let stopping = stop.load(Ordering::Relaxed);
        let (got, b) = set.recycle_received();
        if got > 0 {
            let now = Instant::now();
            first.get_or_insert(now);
            last = now;
            packets += u64::from(got);
            bytes += b;
        } else if stopping {
            break;
        } else {
            set.wait_readable(Duration::from_millis(10))?;
        }
    }
    Ok(RawReport {
        packets,
        bytes,
        elapsed: first.map_or(Duration::ZERO, |f| last - f),
        zero_copy: set.zero_copy(),
        kernel: set.kernel_stats()?,
    })
}

/// Attaches the steering program to `ifname`, opens sockets on `queues`,
/// calls `ready` with the interface's MAC, and sinks until `stop`.
/// Run on a thread inside the interface's namespace.
pub fn sink_on(
    xsk: &XskConfig,
    udp_port: u16,
    stop: &AtomicBool,
    ready: impl FnOnce(EthernetAddress),
) -> Result<RawReport> {
    use uetd::xdp::{SteerConfig, XdpMode, XdpSteer};
    let ifname = xsk.ifname.as_str();
    let mut steer = XdpSteer::attach(
        ifname,
        XdpMode::Auto,
        SteerConfig {
            udp_port,
            ..SteerConfig::default()
        },
    )
    .map_err(|e| Error::Xdp {
        what: format!("attaching the steering program to {ifname}"),
        source: e.into(),
    })?;
    let mut set =
        XskSet::open(xsk).map_err(Error::io(format!("opening AF_XDP sockets on {ifname}")))?;
    for (q, fd) in set.fds() {
        steer.register_socket(q, fd).map_err(|e| Error::Xdp {
            what: format!("registering the AF_XDP socket of queue {q}"),
            source: e.into(),
        })?;
    }
    ready(set.interface().1);
    sink(&mut set, stop, None).map_err(Error::io("sinking frames"))
}
