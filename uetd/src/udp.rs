//! The kernel-UDP backend (`docs/architecture.md` §1): the same worker loop over plain
//! UDP sockets, so `uetd` runs without privileges, on any interface, and
//! talks to an AF_XDP peer — the bytes on the wire are the same.
//!
//! - One socket bound to `local:udp_port` receives; `recvmmsg` moves a
//!   batch, IP_RECVTOS / IPV6_RECVTCLASS report each datagram's ECN bits
//!   and DSCP (a trimmed packet is recognised by its DSCP, as on AF_XDP).
//! - The entropy value travels as the UDP source port (`docs/architecture.md` §4), so
//!   sending uses a pool of sockets bound to `ev_base + i` for every EV of
//!   the configured space (`2^ev_bits` sockets; the congestion context's EV
//!   space must be the same: the daemon gives both `ev_bits`). Each datagram's
//!   DSCP and ECN go in an IP_TOS / IPV6_TCLASS control message;
//!   `sendmmsg` sends each run of datagrams that share a socket, in order.
//!   An ACK's EV is therefore the peer's EV folded into this pool (the
//!   low `ev_bits` bits above `ev_base`), not the peer's value itself: a
//!   socket can only send from a port it has bound.
//! - Native IP (`encap = "ip"`, `docs/protocol-notes.md` §1): one raw IP socket
//!   for the configured protocol (253), bound to the local address, both
//!   receives (IPv4: the IP header comes along; IPv6: IPV6_RECVTCLASS) and
//!   sends (the kernel writes the IP header; we write the 4-byte entropy
//!   header, so every EV, the peer's echoed one included, goes out as it
//!   is). It needs CAP_NET_RAW.
//! - CRC32C trailer (`crc_trailer`): computed over the addresses and the
//!   UDP (checksum 0) or entropy header and the UET bytes — what REFPROV's
//!   coverage from the IP source address amounts to for a header without
//!   options — appended on send and checked and stripped on receive (a
//!   mismatch is a counted drop, `rx_bad_crc`). Under UDP the sockets send
//!   checksum 0 (SO_NO_CHECK / UDP_NO_CHECK6_TX), because the trailer covers
//!   the checksum field, and a received datagram is checked as if its
//!   checksum field were 0: the socket does not show the field, and a
//!   sender covering it with a trailer sends 0 (REFPROV, UE 1.0.3
//!   §3.5.10.1 as REFPROV cites it).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use uet_pds::{RxMeta, Transmit};
use uet_wire::encap::{
    CRC_TRAILER_LEN, ENTROPY_HEADER_LEN, EncapConfig, Transport, crc32c_of_payload, emit_frame,
    nominal_pktsize,
};
use uet_wire::inet::{EtherType, EthernetAddress, EthernetRepr, IpRepr};
use uet_wire::{Dscp, Ecn, EntropyValue};

use crate::capture::{Capture, Direction, Tap};
use crate::io::{EvMap, IoStats, PacketIo};
use crate::sys::eventfd::poll_in;
use crate::sys::udp::{GSO_MAX_SEGMENTS, MsgBatch};

/// IPv4 + UDP headers.
const V4_OVERHEAD: usize = 20 + 8;
/// IPv6 + UDP headers.
const V6_OVERHEAD: usize = 40 + 8;
/// UDP header length.
const UDP_HEADER_LEN: usize = 8;
/// Most UDP payload one GSO send carries (all its datagrams together:
/// the 16-bit IP and UDP lengths bound the unsegmented packet).
const GSO_MAX_BYTES: usize = 65_000;

/// Configuration of the UDP backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpConfig {
    /// Local address (the FEP address peers send to).
    pub local: IpAddr,
    /// UDP port of UET (4793).
    pub udp_port: u16,
    /// First EV / source port of the sending pool.
    pub ev_base: u16,
    /// log2 of the pool (and of the EV space).
    pub ev_bits: u8,
    /// IP MTU of the path.
    pub mtu: usize,
    /// Datagrams per batch.
    pub batch: usize,
    /// IP protocol number, CRC trailer, trimmed-DSCP recognition.
    pub encap: EncapConfig,
    /// UET directly over IP through a raw IP socket (CAP_NET_RAW) instead
    /// of UDP.
    pub native_ip: bool,
    /// Socket buffer sizes (bytes; the kernel doubles and caps them).
    pub socket_buffer: usize,
    /// UDP segmentation offloads: a run of datagrams that leave one after
    /// the other by the same socket to the same peer goes out as one GSO
    /// send, and the receive socket takes coalesced datagrams (GRO). Off
    /// with the CRC trailer (its zero UDP checksum rules GSO out) and for
    /// native IP. Runs need consecutive datagrams on one EV's socket, so
    /// they grow as `ev_bits` shrinks (one socket per peer at 0).
    pub offload: bool,
}

impl UdpConfig {
    /// Defaults for `local`: port 4793, 16 EVs from 0xc000, MTU 1500, UDP,
    /// no trailer.
    pub fn new(local: IpAddr) -> Self {
        Self {
            local,
            udp_port: uet_wire::encap::UET_UDP_PORT,
            ev_base: 0xc000,
            ev_bits: 4,
            mtu: 1500,
            batch: 32,
            encap: EncapConfig::default(),
            native_ip: false,
            socket_buffer: 4 << 20,
            offload: true,
        }
    }

    /// IP header plus UDP or entropy header plus trailer.
    fn overhead(&self) -> usize {
        let ip = match self.local {
            IpAddr::V4(_) => V4_OVERHEAD - UDP_HEADER_LEN,
            IpAddr::V6(_) => V6_OVERHEAD - UDP_HEADER_LEN,
        };
        ip + self.l4_header_len() + self.encap.trailer_len()
    }

    const fn l4_header_len(&self) -> usize {
        if self.native_ip {
            ENTROPY_HEADER_LEN
        } else {
            UDP_HEADER_LEN
        }
    }
}

/// The UDP backend of one worker.
#[derive(Debug)]
pub struct UdpIo {
    cfg: UdpConfig,
    /// The UDP socket on the UET port, or the raw IP socket (native IP,
    /// which also sends).
    rx_sock: Socket,
    pool: Vec<Socket>,
    rx: MsgBatch,
    tx: MsgBatch,
    /// Per outgoing slot: the pool socket it leaves by.
    tx_sock: Vec<u16>,
    max_uet: usize,
    stats: IoStats,
    warned_crc: bool,
    /// Mirrors frames while `uet capture` runs (attached by the worker).
    capture: Option<Arc<Capture>>,
    /// Runs of datagrams go out as UDP GSO sends (until the kernel
    /// refuses one).
    gso: bool,
    offloads: UdpOffloadCounts,
    /// The receiving socket's drop count (SO_RXQ_OVFL) last read.
    rxq_seen: u32,
}

/// What the UDP segmentation offloads did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpOffloadCounts {
    /// GSO sends (each one `sendmsg` for a run of datagrams).
    pub gso_sends: u64,
    /// Datagrams those carried.
    pub gso_datagrams: u64,
    /// Received buffers that held datagrams the kernel coalesced (GRO).
    pub gro_buffers: u64,
    /// Datagrams those held.
    pub gro_datagrams: u64,
    /// Datagrams the kernel dropped at the receiving socket because its
    /// buffer was full (SO_RXQ_OVFL): this host's worker fell behind; no
    /// loss on the wire.
    pub rx_socket_drops: u64,
}

fn socket_options(s: &Socket, local: IpAddr, buffer: usize) -> io::Result<()> {
    if local.is_ipv6() {
        s.set_only_v6(true)?;
        s.set_recv_tclass_v6(true)?;
    } else {
        s.set_recv_tos_v4(true)?;
    }
    s.set_nonblocking(true)?;
    // Root may go past rmem_max/wmem_max; others get what the caps allow.
    if !crate::sys::udp::force_buffers(s.as_fd(), buffer) {
        let _ = s.set_recv_buffer_size(buffer);
        let _ = s.set_send_buffer_size(buffer);
    }
    Ok(())
}

fn bind(local: IpAddr, port: u16, buffer: usize, zero_checksum: bool) -> io::Result<Socket> {
    let domain = match local {
        IpAddr::V4(_) => Domain::IPV4,
        IpAddr::V6(_) => Domain::IPV6,
    };
    let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    socket_options(&s, local, buffer)?;
    if zero_checksum {
        crate::sys::udp::zero_udp_checksum(s.as_fd(), local.is_ipv6())?;
    }
    s.bind(&SocketAddr::new(local, port).into())?;
    Ok(s)
}

/// The raw IP socket of native-IP UET: protocol `proto`, bound to `local`.
fn open_raw(local: IpAddr, proto: u8, buffer: usize) -> io::Result<Socket> {
    let domain = match local {
        IpAddr::V4(_) => Domain::IPV4,
        IpAddr::V6(_) => Domain::IPV6,
    };
    let s =
        Socket::new(domain, Type::RAW, Some(Protocol::from(i32::from(proto)))).map_err(|e| {
            if e.raw_os_error() == Some(libc::EPERM) {
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "encap ip on the udp backend needs a raw IP socket for protocol {proto}, \
                     which needs CAP_NET_RAW (run as root, or `setcap cap_net_raw+ep uetd`); \
                     without it use --encap udp, or the xdp backend"
                    ),
                )
            } else {
                e
            }
        })?;
    socket_options(&s, local, buffer)?;
    s.bind(&SocketAddr::new(local, 0).into())?;
    Ok(s)
}

impl UdpIo {
    /// Binds the receive socket and the EV pool (UDP), or opens the raw IP
    /// socket (native IP).
    pub fn new(cfg: UdpConfig) -> io::Result<Self> {
        if cfg.ev_bits > 10 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the UDP backend binds one socket per EV: ev_bits must be ≤ 10",
            ));
        }
        let crc = cfg.encap.crc_trailer;
        let mut pool = Vec::new();
        let rx_sock = if cfg.native_ip {
            open_raw(cfg.local, cfg.encap.ip_protocol, cfg.socket_buffer)?
        } else {
            let rx = bind(cfg.local, cfg.udp_port, cfg.socket_buffer, crc)?;
            let n = 1usize << cfg.ev_bits;
            pool.reserve(n);
            for i in 0..n {
                let port = cfg.ev_base.checked_add(i as u16).ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidInput, "EV pool runs past port 65535")
                })?;
                pool.push(bind(cfg.local, port, cfg.socket_buffer, crc).map_err(|e| {
                    io::Error::new(e.kind(), format!("binding EV source port {port}: {e}"))
                })?);
            }
            rx
        };
        let max_uet = cfg.mtu.saturating_sub(cfg.overhead());
        let batch = cfg.batch.max(1);
        // A slot holds a whole IP packet (a raw IPv4 socket hands over the
        // header too).
        let slot = cfg.mtu.max(max_uet + 64);
        let offload = cfg.offload && !cfg.native_ip && !crc;
        // A coalesced receive is up to 64 KiB.
        let gro = offload && crate::sys::udp::enable_gro(rx_sock.as_fd());
        let rx_slot = if gro { 1 << 16 } else { slot };
        // Arrival stamps for congestion control's delay samples, as the
        // XDP program writes them for the xdp backend; without them the
        // samples include the wait in the socket's queue.
        crate::sys::udp::enable_rx_timestamps(rx_sock.as_fd());
        // Drops at the socket, told from drops on the wire.
        crate::sys::udp::enable_rxq_overflow(rx_sock.as_fd());
        Ok(Self {
            rx: MsgBatch::new(batch, rx_slot),
            tx: MsgBatch::new(batch, slot),
            tx_sock: vec![0; batch],
            rx_sock,
            pool,
            max_uet,
            stats: IoStats::default(),
            warned_crc: false,
            capture: None,
            gso: offload,
            offloads: UdpOffloadCounts::default(),
            rxq_seen: 0,
            cfg,
        })
    }

    /// Whether runs of datagrams leave as GSO sends by one socket per EV:
    /// then a run needs consecutive packets on one EV ([`gso_run_len`]).
    /// Not when sends are not segmented, nor when one socket carries every
    /// EV (runs form whatever the EVs).
    pub fn sprays_runs(&self) -> bool {
        self.gso && self.pool.len() >= 2
    }

    /// What the segmentation offloads did so far.
    pub const fn offload_counts(&self) -> UdpOffloadCounts {
        self.offloads
    }

    /// The pool socket an EV leaves by (`pool_len` a power of two).
    fn pool_index(ev_base: u16, pool_len: usize, ev: EntropyValue) -> usize {
        usize::from(
            EvMap::pool(ev_base, pool_len)
                .apply(ev.get())
                .wrapping_sub(ev_base),
        )
    }
}

/// The UDP header a datagram of `payload_len` bytes (trailer included)
/// carried, with checksum 0: what a trailer's coverage holds.
fn udp_header(src_port: u16, dst_port: u16, payload_len: usize) -> [u8; UDP_HEADER_LEN] {
    let mut h = [0u8; UDP_HEADER_LEN];
    h[0..2].copy_from_slice(&src_port.to_be_bytes());
    h[2..4].copy_from_slice(&dst_port.to_be_bytes());
    h[4..6].copy_from_slice(&((UDP_HEADER_LEN + payload_len) as u16).to_be_bytes());
    h
}

/// Rebuilds the frame a datagram of `uet` bytes from `src` to `dst` with
/// `tos` was (or will be) on the wire, for a capture: zero MACs, TTL 64,
/// `transport` (UDP ports or entropy header), the UDP checksum and the
/// trailer as `encap` says ([`crate::capture`]). False when the addresses
/// differ in family or the datagram does not fit.
fn wire_frame(
    src: IpAddr,
    dst: IpAddr,
    tos: u8,
    transport: &Transport,
    encap: &EncapConfig,
    uet: &[u8],
    buf: &mut [u8],
) -> bool {
    let Some(ip) = IpRepr::udp(src, dst, Dscp::from_masked(tos >> 2), Ecn::from_bits(tos)) else {
        return false;
    };
    let eth = EthernetRepr {
        dst: EthernetAddress([0; 6]),
        src: EthernetAddress([0; 6]),
        vlan: None,
        ethertype: EtherType::Ipv4,
    };
    emit_frame(&eth, &ip, transport, encap, uet.len(), buf, |b| {
        b.copy_from_slice(uet);
    })
    .is_ok()
}

/// The length of [`wire_frame`]'s frame: Ethernet, IP and UDP/entropy
/// headers, the UET bytes and the trailer.
const fn wire_len(ip: IpAddr, transport: &Transport, encap: &EncapConfig, uet_len: usize) -> usize {
    14 + match ip {
        IpAddr::V4(_) => 20,
        IpAddr::V6(_) => 40,
    } + transport.header_len()
        + uet_len
        + encap.trailer_len()
}

/// One received datagram (UDP payload, or what the raw IP socket handed
/// over): its trailer checked, captured, and its UET bytes lent to `sink`;
/// whether it was delivered (a counted drop otherwise).
fn take_datagram(
    cfg: &UdpConfig,
    stats: &mut IoStats,
    warned_crc: &mut bool,
    mut tap: Option<&mut Tap<'_>>,
    (src, tos, arrived): (SocketAddr, u8, Option<u64>),
    dgram: &mut [u8],
    sink: &mut dyn FnMut(&RxMeta, &mut [u8]),
) -> bool {
    let local = cfg.local;
    let encap = cfg.encap;
    // The IP payload: the datagram (UDP payload, or what a raw IPv6
    // socket hands over), or after the header a raw IPv4 socket
    // keeps.
    let (l4, tos) = if cfg.native_ip && local.is_ipv4() {
        let ihl = dgram.first().map_or(0, |b| usize::from(b & 0x0f) * 4);
        match (dgram.get(ihl..), dgram.get(1)) {
            (Some(l4), Some(&tos)) if ihl >= 20 => (l4, tos),
            _ => {
                stats.rx_dropped += 1;
                return false;
            }
        }
    } else {
        (&*dgram, tos)
    };
    let dscp = Dscp::from_masked(tos >> 2);
    let trimmed = encap.trim_of(dscp);
    // The covered header (entropy, or UDP as it was with checksum
    // 0), the entropy value, and the rest.
    let (hdr, ev, body) = if cfg.native_ip {
        let Some((h, body)) = l4.split_first_chunk::<ENTROPY_HEADER_LEN>() else {
            stats.rx_dropped += 1;
            return false;
        };
        let ev = EntropyValue::from_masked(u16::from_be_bytes([h[0], h[1]]));
        let mut hdr = [0u8; UDP_HEADER_LEN];
        hdr[..ENTROPY_HEADER_LEN].copy_from_slice(h);
        (hdr, ev, body)
    } else {
        let Ok(ev) = EntropyValue::new(src.port()) else {
            stats.rx_dropped += 1;
            return false;
        };
        (udp_header(src.port(), cfg.udp_port, l4.len()), ev, l4)
    };
    let hdr = &hdr[..cfg.l4_header_len()];
    let transport_pktsize = hdr.len() + body.len();
    // A trimmed packet lost its trailer with its tail (§7).
    let uet = if encap.crc_trailer && trimmed.is_none() {
        let Some((uet, t)) = body.split_last_chunk::<CRC_TRAILER_LEN>() else {
            stats.rx_dropped += 1;
            stats.rx_bad_crc += 1;
            return false;
        };
        let want = crc32c_of_payload(src.ip(), local, &[hdr, uet]);
        if want != Some(u32::from_be_bytes(*t)) {
            stats.rx_dropped += 1;
            stats.rx_bad_crc += 1;
            if !*warned_crc {
                *warned_crc = true;
                tracing::warn!(
                    peer = %src.ip(),
                    "dropping UET packets whose CRC32C trailer does not match \
                     (counted in rx_bad_crc): check that both ends agree on \
                     --crc-trailer"
                );
            }
            return false;
        }
        uet
    } else {
        body
    };
    if let Some(t) = tap.as_mut() {
        let transport = if cfg.native_ip {
            Transport::Entropy(ev)
        } else {
            Transport::Udp {
                src_port: src.port(),
                dst_port: cfg.udp_port,
            }
        };
        t.build(
            Direction::Rx,
            wire_len(local, &transport, &encap, uet.len()),
            |buf| wire_frame(src.ip(), local, tos, &transport, &encap, uet, buf),
        );
    }
    let meta = RxMeta {
        src: src.ip(),
        ev,
        ecn: Ecn::from_bits(tos),
        trimmed,
        nominal_size: nominal_pktsize(transport_pktsize) as u32,
        sdi: None,
        arrived: arrived.map(uet_wire::time::Instant::from_nanos),
    };
    stats.rx_packets += 1;
    stats.rx_bytes += dgram.len() as u64;
    // Where the UET bytes lie in the datagram, to lend them out
    // mutably.
    let at = uet.as_ptr().addr() - dgram.as_ptr().addr();
    let len = uet.len();
    sink(&meta, &mut dgram[at..at + len]);
    true
}

/// Turns the kernel's socket timestamps (CLOCK_REALTIME) into the daemon's
/// clock (CLOCK_MONOTONIC): both read once per receive batch, so a
/// datagram's stamp is off by the two clocks' drift over how long it
/// waited — nanoseconds, where the wait is what the stamp takes out.
#[derive(Debug, Clone, Copy)]
struct StampClock {
    /// CLOCK_MONOTONIC now.
    mono: u64,
    /// CLOCK_REALTIME now.
    real: u64,
}

impl StampClock {
    fn now() -> Self {
        Self {
            mono: crate::sys::mem::monotonic_ns(),
            real: crate::sys::mem::realtime_ns(),
        }
    }

    /// The monotonic time of realtime stamp `t`, never later than now (a
    /// clock step between the kernel's stamp and here would put it in the
    /// future); none for a stamp older than [`StampClock::MAX_AGE_NS`] (a
    /// step the other way, or a datagram that lay in the queue that long:
    /// either way no delay sample to take).
    fn monotonic(self, t: u64) -> Option<u64> {
        let age = self.real.saturating_sub(t);
        (age <= Self::MAX_AGE_NS).then(|| self.mono.saturating_sub(age))
    }

    const MAX_AGE_NS: u64 = 1_000_000_000;
}

/// Datagrams of `datagram` bytes (UDP payload) that one GSO send carries:
/// as many consecutive packets to a peer should share an EV for their run
/// to leave as one send.
#[must_use]
pub fn gso_run_len(datagram: usize) -> u32 {
    GSO_MAX_SEGMENTS.min(GSO_MAX_BYTES / datagram.max(1)).max(1) as u32
}

/// The end of the GSO run that begins at outgoing datagram `x` (before
/// `end`): the datagrams after it to the same destination with the same
/// TOS and the same length — the last may be shorter, and ends the run —
/// as many as one GSO send carries (64, and 64 KiB of UDP payload).
fn gso_run(tx: &MsgBatch, x: usize, end: usize) -> usize {
    let (first, dst, tos) = tx.received(x);
    let seg = first.len();
    if seg == 0 {
        return x + 1;
    }
    let most = GSO_MAX_SEGMENTS.min(GSO_MAX_BYTES / seg);
    let mut y = x + 1;
    while y < end && y - x < most {
        let (d, d_dst, d_tos) = tx.received(y);
        if d_dst != dst || d_tos != tos || d.len() > seg || d.is_empty() {
            break;
        }
        y += 1;
        if d.len() < seg {
            break;
        }
    }
    y
}

/// Counts outgoing datagrams `range` as sent and captures them; returns
/// how many.
fn account_sent(
    tx: &MsgBatch,
    range: std::ops::Range<usize>,
    sock: u16,
    cfg: &UdpConfig,
    stats: &mut IoStats,
    mut tap: Option<&mut Tap<'_>>,
) -> usize {
    let (local, encap) = (cfg.local, cfg.encap);
    let n = range.len();
    for slot in range {
        let (bytes, dst, tos) = tx.received(slot);
        stats.tx_bytes += bytes.len() as u64;
        if let (Some(t), Some(dst)) = (tap.as_mut(), dst) {
            let (transport, uet) = if cfg.native_ip {
                let ev = u16::from_be_bytes([bytes[0], bytes[1]]);
                (
                    Transport::Entropy(EntropyValue::from_masked(ev)),
                    &bytes[ENTROPY_HEADER_LEN..],
                )
            } else {
                (
                    Transport::Udp {
                        src_port: cfg.ev_base.wrapping_add(sock),
                        dst_port: dst.port(),
                    },
                    bytes,
                )
            };
            let uet = &uet[..uet.len() - encap.trailer_len()];
            t.build(
                Direction::Tx,
                wire_len(local, &transport, &encap, uet.len()),
                |buf| wire_frame(local, dst.ip(), tos, &transport, &encap, uet, buf),
            );
        }
    }
    n
}

/// Datagrams the kernel did not take (socket buffer full, or an error
/// such as no route): counted; the PDS recovers them like any loss.
fn count_unsent(stats: &mut IoStats, n: usize) {
    if n > 0 {
        stats.tx_ring_full += 1;
        stats.tx_dropped += n as u64;
    }
}

impl PacketIo for UdpIo {
    fn attach_capture(&mut self, capture: Arc<Capture>) {
        self.capture = Some(capture);
    }

    fn recv(&mut self, max: usize, sink: &mut dyn FnMut(&RxMeta, &mut [u8])) -> io::Result<usize> {
        let mut tap = self.capture.as_deref().and_then(Capture::tap);
        let n = self.rx.recv(self.rx_sock.as_fd(), max)?;
        if let Some(total) = self.rx.rxq_drops() {
            let new = total.wrapping_sub(self.rxq_seen);
            self.rxq_seen = total;
            self.offloads.rx_socket_drops += u64::from(new);
        }
        let mut delivered = 0;
        let to_monotonic = (n > 0).then(StampClock::now);
        for i in 0..n {
            let (_, src, tos) = self.rx.received(i);
            let seg = self.rx.segment(i);
            let arrived = self
                .rx
                .stamp_realtime_ns(i)
                .zip(to_monotonic)
                .and_then(|(t, c)| c.monotonic(t));
            let buf = self.rx.received_mut(i);
            let Some(src) = src else {
                self.stats.rx_dropped += 1;
                continue;
            };
            // A coalesced buffer (GRO) is delivered whole, datagram by
            // datagram, even past `max`: what the kernel joined arrived
            // together.
            let step = if seg == 0 { buf.len().max(1) } else { seg };
            if seg != 0 {
                self.offloads.gro_buffers += 1;
                self.offloads.gro_datagrams += buf.len().div_ceil(step) as u64;
            }
            for dgram in buf.chunks_mut(step) {
                delivered += usize::from(take_datagram(
                    &self.cfg,
                    &mut self.stats,
                    &mut self.warned_crc,
                    tap.as_mut(),
                    (src, tos, arrived),
                    dgram,
                    sink,
                ));
            }
        }
        Ok(delivered)
    }

    fn send(
        &mut self,
        max: usize,
        source: &mut dyn FnMut(&mut [u8]) -> Option<Transmit>,
    ) -> io::Result<usize> {
        let mut tap = self.capture.as_deref().and_then(Capture::tap);
        let k = max.min(self.tx.capacity());
        let max_uet = self.max_uet;
        let native = self.cfg.native_ip;
        let encap = self.cfg.encap;
        let local = self.cfg.local;
        let at = if native { ENTROPY_HEADER_LEN } else { 0 };
        let mut filled = 0;
        while filled < k {
            let buf = self.tx.buf_mut(filled);
            let Some(t) = source(&mut buf[at..at + max_uet]) else {
                break;
            };
            if t.dst.is_ipv4() != local.is_ipv4() || t.len > max_uet {
                self.stats.tx_dropped += 1;
                continue;
            }
            let sock = if native {
                0
            } else {
                Self::pool_index(self.cfg.ev_base, self.pool.len(), t.ev)
            };
            let hdr = if native {
                let ev = t.ev.get().to_be_bytes();
                buf[..ENTROPY_HEADER_LEN].copy_from_slice(&[ev[0], ev[1], 0, 0]);
                let mut h = [0u8; UDP_HEADER_LEN];
                h[..ENTROPY_HEADER_LEN].copy_from_slice(&buf[..ENTROPY_HEADER_LEN]);
                h
            } else {
                let src_port = self.cfg.ev_base.wrapping_add(sock as u16);
                udp_header(src_port, self.cfg.udp_port, t.len + encap.trailer_len())
            };
            let mut len = at + t.len;
            if encap.crc_trailer {
                let hdr = &hdr[..self.cfg.l4_header_len()];
                let Some(v) = crc32c_of_payload(local, t.dst, &[hdr, &buf[at..len]]) else {
                    self.stats.tx_dropped += 1;
                    continue;
                };
                buf[len..len + CRC_TRAILER_LEN].copy_from_slice(&v.to_be_bytes());
                len += CRC_TRAILER_LEN;
            }
            let tos = (t.dscp.get() << 2) | t.ecn.bits();
            let port = if native { 0 } else { self.cfg.udp_port };
            self.tx
                .set_outgoing(filled, len, SocketAddr::new(t.dst, port), tos);
            self.tx_sock[filled] = sock as u16;
            filled += 1;
        }
        if filled == 0 {
            return Ok(0);
        }
        // Send in production order (reordering here would read as loss to
        // the peer's SACK inference): per run of consecutive datagrams that
        // leave by the same socket, its stretches of equal datagrams to one
        // peer as UDP GSO sends, the rest by sendmmsg.
        let mut sent = 0;
        let mut a = 0;
        while a < filled {
            let sock = self.tx_sock[a];
            let mut b = a + 1;
            while b < filled && self.tx_sock[b] == sock {
                b += 1;
            }
            let fd = if native {
                self.rx_sock.as_fd()
            } else {
                self.pool[usize::from(sock)].as_fd()
            };
            // `plain` begins the datagrams not yet sent that go by
            // sendmmsg; `x` the next one to look at.
            let mut plain = a;
            let mut x = a;
            while x <= b {
                let y = if x < b && self.gso {
                    gso_run(&self.tx, x, b)
                } else {
                    x + 1
                };
                if x < b && y - x < 2 {
                    x = y;
                    continue;
                }
                // Before a GSO run (or at the end): the plain ones.
                if plain < x {
                    let got = self.tx.send(fd, plain..x).unwrap_or_default();
                    sent += account_sent(
                        &self.tx,
                        plain..plain + got,
                        sock,
                        &self.cfg,
                        &mut self.stats,
                        tap.as_mut(),
                    );
                    count_unsent(&mut self.stats, x - plain - got);
                }
                if x == b {
                    break;
                }
                let seg = self.tx.received(x).0.len() as u16;
                match self.tx.send_gso(fd, x..y, seg) {
                    Ok(got) => {
                        if got > 0 {
                            self.offloads.gso_sends += 1;
                            self.offloads.gso_datagrams += got as u64;
                        }
                        sent += account_sent(
                            &self.tx,
                            x..x + got,
                            sock,
                            &self.cfg,
                            &mut self.stats,
                            tap.as_mut(),
                        );
                        count_unsent(&mut self.stats, y - x - got);
                        plain = y;
                    }
                    Err(e) => {
                        // The path cannot segment (a device without
                        // checksum offload, say): plain sends from now on.
                        tracing::info!("UDP GSO refused ({e}); sending datagram by datagram");
                        self.gso = false;
                        plain = x;
                    }
                }
                x = y;
            }
            a = b;
        }
        self.stats.tx_packets += sent as u64;
        Ok(sent)
    }

    fn wait(&mut self, timeout: Option<Duration>, wake: BorrowedFd<'_>) -> io::Result<()> {
        poll_in(&[self.rx_sock.as_fd(), wake], timeout)?;
        Ok(())
    }

    fn max_uet_len(&self) -> usize {
        self.max_uet
    }

    fn ev_map(&self) -> EvMap {
        if self.cfg.native_ip {
            EvMap::IDENTITY
        } else {
            EvMap::pool(self.cfg.ev_base, self.pool.len())
        }
    }

    fn stats(&self) -> IoStats {
        self.stats
    }

    fn udp_offloads(&self) -> Option<UdpOffloadCounts> {
        Some(self.offloads)
    }
}

#[cfg(test)]
mod capture_tests {
    use uet_wire::encap::parse_l2_l4;

    use super::*;

    #[test]
    fn a_rebuilt_frame_parses_back_to_the_datagram() {
        let src: SocketAddr = "10.0.0.1:49157".parse().unwrap();
        let dst: SocketAddr = "10.0.0.2:4793".parse().unwrap();
        let uet = [0x11u8, 0x22, 0x33, 0x44, 0x55];
        let cfg = EncapConfig::default();
        // DSCP 10, ECN CE.
        let tos = (10 << 2) | 0b11;
        let t = Transport::Udp {
            src_port: src.port(),
            dst_port: dst.port(),
        };
        let mut buf = vec![0; wire_len(src.ip(), &t, &cfg, uet.len())];
        assert!(wire_frame(
            src.ip(),
            dst.ip(),
            tos,
            &t,
            &cfg,
            &uet,
            &mut buf
        ));
        let (h, range) = parse_l2_l4(&buf, &cfg).unwrap();
        assert_eq!(&buf[range], &uet);
        assert_eq!((h.ip.src_addr(), h.ip.dst_addr()), (src.ip(), dst.ip()));
        assert_eq!(h.entropy.get(), 49157);
        assert_eq!(h.ip.ecn(), Ecn::Ce);
        // Families that differ build nothing.
        let v6: SocketAddr = "[fd00::2]:4793".parse().unwrap();
        assert!(!wire_frame(
            src.ip(),
            v6.ip(),
            tos,
            &t,
            &cfg,
            &uet,
            &mut buf
        ));
    }
}

#[cfg(test)]
mod offload_tests {
    use std::net::Ipv4Addr;

    use uet_wire::EntropyValue;

    use super::*;

    /// A backend on loopback address 127.0.0.`host`, one EV (one socket).
    fn io(host: u8, offload: bool) -> UdpIo {
        let mut cfg = UdpConfig::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, host)));
        cfg.udp_port = 47_931;
        cfg.ev_base = 0xd200;
        cfg.ev_bits = 0;
        cfg.batch = 64;
        cfg.offload = offload;
        UdpIo::new(cfg).unwrap()
    }

    /// Sends one datagram per entry of `lens` (UET bytes `[i; len]`) to
    /// `dst` in one call; returns how many left.
    fn send(io: &mut UdpIo, dst: IpAddr, lens: &[usize]) -> usize {
        let mut next = lens.iter().enumerate();
        io.send(lens.len(), &mut |buf: &mut [u8]| {
            let (i, &len) = next.next()?;
            buf[..len].fill(i as u8);
            Some(Transmit {
                dst,
                ev: EntropyValue::from_masked(0xd200),
                dscp: Dscp::from_masked(0),
                ecn: Ecn::NotEct,
                len,
                sdi: None,
            })
        })
        .unwrap()
    }

    /// Everything `io` receives until `want` datagrams came (bounded).
    fn receive(io: &mut UdpIo, want: usize) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        for _ in 0..1000 {
            poll_in(&[io.rx_sock.as_fd()], Some(Duration::from_millis(10))).unwrap();
            io.recv(64, &mut |_, uet| got.push(uet.to_vec())).unwrap();
            if got.len() >= want {
                break;
            }
        }
        got
    }

    /// A datagram carries when the kernel received it, on the daemon's
    /// clock: after it was sent, and well before a daemon that let it wait
    /// in the socket's queue read it. The kernel turns arrival stamping on
    /// a little after the first socket asks (a deferred static key) and
    /// stamps at the read until then, so the wait shows within a few tries.
    #[test]
    fn a_datagram_carries_its_arrival_on_the_daemons_clock() {
        for offload in [true, false] {
            let host = if offload { 4 } else { 6 };
            let mut a = io(host, offload);
            let mut b = io(host + 1, offload);
            let mut waits = Vec::new();
            for _ in 0..20 {
                let sent = crate::sys::mem::monotonic_ns();
                let to = IpAddr::V4(Ipv4Addr::new(127, 0, 0, host + 1));
                assert_eq!(send(&mut a, to, &[100]), 1);
                // Not synchronisation: the datagram waits in b's queue.
                std::thread::sleep(Duration::from_millis(20));
                let mut stamps = Vec::new();
                for _ in 0..1000 {
                    poll_in(&[b.rx_sock.as_fd()], Some(Duration::from_millis(10))).unwrap();
                    b.recv(64, &mut |m, _| stamps.push(m.arrived)).unwrap();
                    if !stamps.is_empty() {
                        break;
                    }
                }
                let read = crate::sys::mem::monotonic_ns();
                assert_eq!(stamps.len(), 1, "offload {offload}");
                let at = stamps[0].expect("stamped").as_nanos();
                assert!(sent <= at && at <= read, "{sent} {at} {read}");
                waits.push(read - at);
                if read - at >= 10_000_000 {
                    break;
                }
            }
            assert!(
                waits.iter().any(|&w| w >= 10_000_000),
                "offload {offload}: waits {waits:?} ns"
            );
        }
    }

    #[test]
    fn stamps_older_than_a_second_or_in_the_future_are_dropped_or_clamped() {
        let c = StampClock {
            mono: 5_000_000_000,
            real: 1_700_000_000_000_000_000,
        };
        assert_eq!(c.monotonic(c.real - 300), Some(c.mono - 300));
        assert_eq!(c.monotonic(c.real + 300), Some(c.mono));
        assert_eq!(c.monotonic(c.real - 2_000_000_000), None);
    }

    /// A run of one EV is one GSO send: 64 datagrams and 65,000 bytes at
    /// most (full data packets at MTU 1500, 3498 and 9000: 4 KiB payload).
    #[test]
    fn runs_per_ev_fill_one_gso_send() {
        assert_eq!(gso_run_len(1472), 44);
        assert_eq!(gso_run_len(3470), 18);
        assert_eq!(gso_run_len(16 + 44 + 4096), 15);
        assert_eq!(gso_run_len(100), 64);
        assert_eq!(gso_run_len(70_000), 1);
        assert_eq!(gso_run_len(0), 64);
    }

    #[test]
    fn a_run_to_one_peer_leaves_as_one_gso_send_and_arrives_whole_in_order() {
        for offload in [true, false] {
            let mut a = io(2, offload);
            let mut b = io(3, offload);
            // 30 datagrams of 1,400 bytes, one of 900 (ends the run), then
            // two more of 1,400 (a run of their own).
            let mut lens = vec![1400; 30];
            lens.push(900);
            lens.extend([1400, 1400]);
            assert_eq!(
                send(&mut a, IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3)), &lens),
                lens.len()
            );
            let got = receive(&mut b, lens.len());
            assert_eq!(got.len(), lens.len(), "offload {offload}");
            for (i, (d, &len)) in got.iter().zip(&lens).enumerate() {
                assert_eq!(d.len(), len, "datagram {i}, offload {offload}");
                assert!(d.iter().all(|&x| x == i as u8), "datagram {i} out of order");
            }
            let (ca, cb) = (a.offload_counts(), b.offload_counts());
            if offload {
                assert_eq!((ca.gso_sends, ca.gso_datagrams), (2, 33), "{ca:?}");
                // Loopback hands a GSO send to a GRO socket unsegmented.
                assert!(cb.gro_buffers >= 1 && cb.gro_datagrams >= 31, "{cb:?}");
            } else {
                assert_eq!((ca, cb), Default::default());
            }
            assert_eq!(a.stats().tx_packets, lens.len() as u64);
            assert_eq!(b.stats().rx_packets, lens.len() as u64);
        }
    }
}
