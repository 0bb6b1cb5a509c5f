//! The kernel-UDP backend (`design.md` §1): the same worker loop over plain
//! UDP sockets, so `uetd` runs without privileges, on any interface, and
//! talks to an AF_XDP peer — the bytes on the wire are the same.
//!
//! - One socket bound to `local:udp_port` receives; `recvmmsg` moves a
//!   batch, IP_RECVTOS / IPV6_RECVTCLASS report each datagram's ECN bits
//!   and DSCP (a trimmed packet is recognised by its DSCP, as on AF_XDP).
//! - The entropy value travels as the UDP source port (`design.md` §4), so
//!   sending uses a pool of sockets bound to `ev_base + i` for every EV of
//!   the configured space (`2^ev_bits` sockets; the congestion context's EV
//!   space must be the same: the daemon gives both `ev_bits`). Each datagram's
//!   DSCP and ECN go in an IP_TOS / IPV6_TCLASS control message;
//!   `sendmmsg` sends each run of datagrams that share a socket, in order.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use uet_pds::{RxMeta, Transmit};
use uet_wire::encap::{EncapConfig, Transport, emit_frame, nominal_pktsize};
use uet_wire::inet::{EtherType, EthernetAddress, EthernetRepr, IpRepr};
use uet_wire::{Dscp, Ecn, EntropyValue};

use crate::capture::{Direction, Tap};
use crate::io::{IoStats, PacketIo};
use crate::sys::eventfd::poll_in;
use crate::sys::udp::MsgBatch;

pub mod raw;

/// IPv4 + UDP headers.
const V4_OVERHEAD: usize = 20 + 8;
/// IPv6 + UDP headers.
const V6_OVERHEAD: usize = 40 + 8;

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
    /// Trimmed-DSCP recognition.
    pub encap: EncapConfig,
    /// Socket buffer sizes (bytes; the kernel doubles and caps them).
    pub socket_buffer: usize,
}

impl UdpConfig {
    /// Defaults for `local`: port 4793, 16 EVs from 0xc000, MTU 1500.
    pub fn new(local: IpAddr) -> Self {
        Self {
            local,
            udp_port: uet_wire::encap::UET_UDP_PORT,
            ev_base: 0xc000,
            ev_bits: 4,
            mtu: 1500,
            batch: 32,
            encap: EncapConfig::default(),
            socket_buffer: 4 << 20,
        }
    }

    fn overhead(&self) -> usize {
        match self.local {
            IpAddr::V4(_) => V4_OVERHEAD,
            IpAddr::V6(_) => V6_OVERHEAD,
        }
    }
}

/// The UDP backend of one worker.
#[derive(Debug)]
pub struct UdpIo {
    cfg: UdpConfig,
    rx_sock: Socket,
    pool: Vec<Socket>,
    rx: MsgBatch,
    tx: MsgBatch,
    /// Per outgoing slot: the pool socket it leaves by.
    tx_sock: Vec<u16>,
    max_uet: usize,
    stats: IoStats,
}

fn bind(local: IpAddr, port: u16, buffer: usize) -> io::Result<Socket> {
    let domain = match local {
        IpAddr::V4(_) => Domain::IPV4,
        IpAddr::V6(_) => Domain::IPV6,
    };
    let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
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
    s.bind(&SocketAddr::new(local, port).into())?;
    Ok(s)
}

impl UdpIo {
    /// Binds the receive socket and the EV pool.
    pub fn new(cfg: UdpConfig) -> io::Result<Self> {
        if cfg.ev_bits > 10 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the UDP backend binds one socket per EV: ev_bits must be ≤ 10",
            ));
        }
        if cfg.encap.crc_trailer {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the CRC32C trailer covers IP headers the UDP backend does not see; use the xdp backend",
            ));
        }
        let rx_sock = bind(cfg.local, cfg.udp_port, cfg.socket_buffer)?;
        let n = 1usize << cfg.ev_bits;
        let mut pool = Vec::with_capacity(n);
        for i in 0..n {
            let port = cfg.ev_base.checked_add(i as u16).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "EV pool runs past port 65535")
            })?;
            pool.push(bind(cfg.local, port, cfg.socket_buffer).map_err(|e| {
                io::Error::new(e.kind(), format!("binding EV source port {port}: {e}"))
            })?);
        }
        let max_uet = cfg.mtu.saturating_sub(cfg.overhead());
        let batch = cfg.batch.max(1);
        Ok(Self {
            rx: MsgBatch::new(batch, max_uet.max(64)),
            tx: MsgBatch::new(batch, max_uet.max(64)),
            tx_sock: vec![0; batch],
            rx_sock,
            pool,
            max_uet,
            stats: IoStats::default(),
            cfg,
        })
    }

    fn pool_index(&self, ev: EntropyValue) -> usize {
        usize::from(ev.get().wrapping_sub(self.cfg.ev_base)) & (self.pool.len() - 1)
    }
}

/// Rebuilds the frame a datagram of `uet` bytes from `src` to `dst` with
/// `tos` was (or will be) on the wire, for a capture: zero MACs, TTL 64,
/// the UDP checksum filled ([`crate::capture`]). False when the addresses
/// differ in family or the datagram does not fit.
fn wire_frame(
    src: SocketAddr,
    dst: SocketAddr,
    tos: u8,
    encap: &EncapConfig,
    uet: &[u8],
    buf: &mut [u8],
) -> bool {
    let Some(ip) = IpRepr::udp(
        src.ip(),
        dst.ip(),
        Dscp::from_masked(tos >> 2),
        Ecn::from_bits(tos),
    ) else {
        return false;
    };
    let eth = EthernetRepr {
        dst: EthernetAddress([0; 6]),
        src: EthernetAddress([0; 6]),
        vlan: None,
        ethertype: EtherType::Ipv4,
    };
    let transport = Transport::Udp {
        src_port: src.port(),
        dst_port: dst.port(),
    };
    emit_frame(&eth, &ip, &transport, encap, uet.len(), buf, |b| {
        b.copy_from_slice(uet);
    })
    .is_ok()
}

/// The length of [`wire_frame`]'s frame: Ethernet, IP and UDP headers and
/// the datagram.
const fn wire_len(ip: IpAddr, uet_len: usize) -> usize {
    14 + match ip {
        IpAddr::V4(_) => V4_OVERHEAD,
        IpAddr::V6(_) => V6_OVERHEAD,
    } + uet_len
}

impl PacketIo for UdpIo {
    fn recv_tapped(
        &mut self,
        max: usize,
        sink: &mut dyn FnMut(&RxMeta, &[u8]),
        mut tap: Option<&mut Tap<'_>>,
    ) -> io::Result<usize> {
        let n = self.rx.recv(self.rx_sock.as_fd(), max)?;
        let mut delivered = 0;
        for i in 0..n {
            let (bytes, src, tos) = self.rx.received(i);
            if let (Some(t), Some(src)) = (tap.as_deref_mut(), src) {
                let local = SocketAddr::new(self.cfg.local, self.cfg.udp_port);
                t.build(Direction::Rx, wire_len(local.ip(), bytes.len()), |buf| {
                    wire_frame(src, local, tos, &self.cfg.encap, bytes, buf)
                });
            }
            let Some(src) = src else {
                self.stats.rx_dropped += 1;
                continue;
            };
            let Ok(ev) = EntropyValue::new(src.port()) else {
                self.stats.rx_dropped += 1;
                continue;
            };
            let dscp = Dscp::from_masked(tos >> 2);
            let meta = RxMeta {
                src: src.ip(),
                ev,
                ecn: Ecn::from_bits(tos),
                trimmed: self.cfg.encap.trim_of(dscp),
                nominal_size: nominal_pktsize(bytes.len() + 8) as u32,
            };
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += bytes.len() as u64;
            sink(&meta, bytes);
            delivered += 1;
        }
        Ok(delivered)
    }

    fn send_tapped(
        &mut self,
        max: usize,
        source: &mut dyn FnMut(&mut [u8]) -> Option<Transmit>,
        mut tap: Option<&mut Tap<'_>>,
    ) -> io::Result<usize> {
        let k = max.min(self.tx.capacity());
        let max_uet = self.max_uet;
        let mut filled = 0;
        while filled < k {
            let Some(t) = source(&mut self.tx.buf_mut(filled)[..max_uet]) else {
                break;
            };
            if t.dst.is_ipv4() != self.cfg.local.is_ipv4() {
                self.stats.tx_dropped += 1;
                continue;
            }
            let tos = (t.dscp.get() << 2) | t.ecn.bits();
            let dst = SocketAddr::new(t.dst, self.cfg.udp_port);
            self.tx.set_outgoing(filled, t.len, dst, tos);
            self.tx_sock[filled] = self.pool_index(t.ev) as u16;
            filled += 1;
        }
        if filled == 0 {
            return Ok(0);
        }
        // Send in production order (reordering here would read as loss to
        // the peer's SACK inference), one sendmmsg per run of consecutive
        // datagrams that leave by the same socket.
        let mut sent = 0;
        let mut a = 0;
        while a < filled {
            let sock = self.tx_sock[a];
            let mut b = a + 1;
            while b < filled && self.tx_sock[b] == sock {
                b += 1;
            }
            let want = b - a;
            let fd = self.pool[usize::from(sock)].as_fd();
            let got = self.tx.send(fd, a..b).unwrap_or_default();
            for slot in a..a + got {
                let (bytes, dst, tos) = self.tx.received(slot);
                self.stats.tx_bytes += bytes.len() as u64;
                if let (Some(t), Some(dst)) = (tap.as_deref_mut(), dst) {
                    let src = SocketAddr::new(self.cfg.local, self.cfg.ev_base.wrapping_add(sock));
                    t.build(Direction::Tx, wire_len(src.ip(), bytes.len()), |buf| {
                        wire_frame(src, dst, tos, &self.cfg.encap, bytes, buf)
                    });
                }
            }
            sent += got;
            if got < want {
                // Socket buffer full (or an error such as no route): the
                // PDS recovers these like any loss.
                self.stats.tx_ring_full += 1;
                self.stats.tx_dropped += (want - got) as u64;
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

    fn stats(&self) -> IoStats {
        self.stats
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
        let mut buf = vec![0; wire_len(src.ip(), uet.len())];
        assert!(wire_frame(src, dst, tos, &cfg, &uet, &mut buf));
        let (h, range) = parse_l2_l4(&buf, &cfg).unwrap();
        assert_eq!(&buf[range], &uet);
        assert_eq!((h.ip.src_addr(), h.ip.dst_addr()), (src.ip(), dst.ip()));
        assert_eq!(h.entropy.get(), 49157);
        assert_eq!(h.ip.ecn(), Ecn::Ce);
        // Families that differ build nothing.
        let v6: SocketAddr = "[fd00::2]:4793".parse().unwrap();
        assert!(!wire_frame(src, v6, tos, &cfg, &uet, &mut buf));
    }
}
