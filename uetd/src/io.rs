//! The `PacketIo` seam (`docs/architecture.md` §1): what a worker needs from a
//! datapath backend. Two implementations sit behind it — AF_XDP rings
//! ([`crate::xsk`]) and kernel UDP sockets ([`crate::udp`]) — and the worker
//! loop ([`crate::worker`]) is the same over both.
//!
//! The shape keeps the hot path free of copies and allocation:
//! - receive hands the worker the UET bytes *where they lie* (in the UMEM
//!   frame, or in the backend's receive buffer) together with the
//!   [`RxMeta`] the PDS needs (source, EV, ECN, trim, nominal size);
//! - transmit lends the worker a buffer positioned after the headroom the
//!   backend needs; the endpoint writes UET bytes there and returns a
//!   [`Transmit`] naming destination, EV, DSCP and ECN; the backend then
//!   wraps the bytes in place (AF_XDP) or hands them to `sendmsg` (UDP).

use std::io;
use std::net::IpAddr;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Duration;

use uet_pds::{RxMeta, Transmit};
use uet_wire::inet::EthernetAddress;

use crate::capture::Capture;

/// Counters of a backend (monotonic; read by the stats path).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoStats {
    /// Datagrams handed to the worker.
    pub rx_packets: u64,
    /// Their bytes (whole frames for AF_XDP, UDP payloads for UDP).
    pub rx_bytes: u64,
    /// Datagrams sent.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Received frames dropped by the backend's checks (not UET, bad
    /// checksum, not for us, malformed).
    pub rx_dropped: u64,
    /// Of `rx_dropped`: a CRC32C trailer that did not match, or was
    /// missing (`crc_trailer` on). A steady count means the peer's trailer
    /// setting differs from ours.
    pub rx_bad_crc: u64,
    /// Of `rx_dropped`: UET frames in the other encapsulation (UDP to the
    /// UET port while `encap = "ip"`, or the native-IP protocol while
    /// `encap = "udp"`): the peer's `encap` differs from ours.
    pub rx_other_encap: u64,
    /// Datagrams the worker produced that could not be sent (no neighbour
    /// entry, no route, address family mismatch, send error).
    pub tx_dropped: u64,
    /// Of those, for want of a neighbour entry (resolution was requested).
    pub tx_no_neighbour: u64,
    /// Frames handed to another worker (AF_XDP: the PDC's owner).
    pub handed_off: u64,
    /// Transmit attempts that found the TX ring (or socket buffer) full.
    pub tx_ring_full: u64,
}

/// A datapath backend driven by one worker thread.
pub trait PacketIo {
    /// Receives up to `max` datagrams, calling `sink` with each one's
    /// metadata and UET bytes (PDS prologue onwards). The bytes are lent
    /// for the call and the sink may change them — the TSS layer opens a
    /// sealed datagram where it lies instead of copying it — so a backend
    /// captures a frame before it hands it on. Returns how many were
    /// delivered — more than `max` when the kernel joined datagrams (UDP
    /// GRO): a joined buffer is delivered whole. Never blocks.
    fn recv(&mut self, max: usize, sink: &mut dyn FnMut(&RxMeta, &mut [u8])) -> io::Result<usize>;

    /// Sends up to `max` datagrams: for each, `source` writes UET bytes into
    /// the lent buffer and returns where they go, or `None` when it has
    /// nothing more. Returns how many were sent (or queued to the NIC).
    /// Never blocks; stops early when the ring or socket is full.
    fn send(
        &mut self,
        max: usize,
        source: &mut dyn FnMut(&mut [u8]) -> Option<Transmit>,
    ) -> io::Result<usize>;

    /// Gives the backend the daemon's capture switch, once, before the
    /// worker runs. While a capture runs ([`crate::capture`]) the backend
    /// hands every frame it receives or sends, whole as on the wire, to
    /// it; only the backend has the frame as on the wire (the UMEM
    /// frame; the headers the UDP socket keeps). It looks at the switch
    /// once per `recv`/`send` call, so nothing is spent per frame while no
    /// capture runs.
    fn attach_capture(&mut self, capture: Arc<Capture>);

    /// Sleeps until a datagram may be ready, `wake` becomes readable (an
    /// eventfd other threads signal), or `timeout` passes (`None`: no
    /// timeout). Returns early on EINTR.
    fn wait(&mut self, timeout: Option<Duration>, wake: BorrowedFd<'_>) -> io::Result<()>;

    /// Whether frames to `dst` can leave now (the AF_XDP backend: its
    /// next-hop MAC is known; if not, resolution is requested). The worker
    /// holds new operations to a `dst` that is not ready, as the kernel
    /// holds packets while ARP resolves, rather than lose their first
    /// window. Default: always.
    fn ready_for(&mut self, dst: IpAddr) -> bool {
        let _ = dst;
        true
    }

    /// The largest UET datagram (PDS prologue to the end of the payload)
    /// this backend can carry: MTU and frame size minus its headers.
    fn max_uet_len(&self) -> usize;

    /// The EV a datagram given with EV `ev` carries on the wire. A TSS
    /// datagram authenticates its flow bytes, so it is sealed with these.
    /// Default: `ev` itself.
    fn ev_map(&self) -> EvMap {
        EvMap::IDENTITY
    }

    /// Counters.
    fn stats(&self) -> IoStats;

    /// The AF_XDP sockets' counters (kernel and multi-buffer), for the
    /// stats path; `None` for backends without AF_XDP sockets.
    fn xsk_counters(&self) -> Option<crate::xsk::XskCounters> {
        None
    }

    /// The kernel-UDP backend's segmentation offload counters, for the
    /// stats path; `None` for other backends.
    fn udp_offloads(&self) -> Option<crate::udp::UdpOffloadCounts> {
        None
    }
}

/// Where an IP destination's Ethernet frames go: the AF_XDP backend writes
/// its own Ethernet header and asks this (backed by the kernel's route and
/// neighbour tables, [`crate::neigh`]). Received frames never write it: what
/// a backend learns from them is its own short-lived hint
/// ([`crate::neigh::Hints`]), used only where this has no entry.
pub trait NextHop: Send + Sync {
    /// The destination MAC for `dst`, if the neighbour entry is known.
    /// Called per packet: lock-free, no syscall, no allocation.
    fn lookup(&self, dst: IpAddr) -> Option<EthernetAddress>;
    /// Asks for resolution of `dst` (non-blocking, bounded: a request that
    /// finds the queue full is dropped and counted; a later `lookup` sees
    /// the answer).
    fn request(&self, dst: IpAddr);
}

/// How a backend maps a datagram's EV to the one on the wire:
/// `base + ((ev - base) & mask)` (the kernel-UDP backend sends from a pool
/// of `mask + 1` ports from `base`, so an EV outside it — a peer's, echoed
/// in an ACK — leaves folded into it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvMap {
    base: u16,
    mask: u16,
}

impl EvMap {
    /// Every EV as it is.
    pub const IDENTITY: Self = Self {
        base: 0,
        mask: u16::MAX,
    };

    /// A pool of `len` (a power of two) values from `base`.
    #[must_use]
    pub const fn pool(base: u16, len: usize) -> Self {
        let len = if len == 0 { 1 } else { len };
        Self {
            base,
            mask: (len - 1) as u16,
        }
    }

    /// The EV on the wire.
    #[must_use]
    pub const fn apply(self, ev: u16) -> u16 {
        self.base
            .wrapping_add(ev.wrapping_sub(self.base) & self.mask)
    }
}

#[cfg(test)]
mod tests {
    use super::EvMap;

    #[test]
    fn ev_maps_fold_into_their_pool_and_keep_what_is_in_it() {
        assert_eq!(EvMap::IDENTITY.apply(0x1234), 0x1234);
        let m = EvMap::pool(0xc000, 256);
        assert_eq!(m.apply(0xc007), 0xc007);
        assert_eq!(m.apply(0xc0ff), 0xc0ff);
        // A peer's EV outside the pool leaves from inside it.
        assert_eq!(m.apply(0x1234), 0xc034);
        assert_eq!(m.apply(0xc100), 0xc000);
        for ev in [0u16, 0x1234, 0xbfff, 0xffff] {
            assert_eq!(m.apply(m.apply(ev)), m.apply(ev));
        }
        assert_eq!(EvMap::pool(0xc000, 1).apply(0x4321), 0xc000);
    }
}
