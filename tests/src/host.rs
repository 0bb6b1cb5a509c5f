//! A simulated host: a sans-IO engine behind a NIC that speaks frames.
//!
//! Frames arriving from the fabric are checked and unwrapped with
//! `uet_wire::encap::parse_l2_l4` (bad checksums — e.g. from the corruption
//! impairment — are counted and dropped here, as a NIC would); the engine
//! writes UET bytes at the frame's header offset and `emit_frame` wraps them
//! in place, the same zero-copy shape the AF_XDP datapath uses.

use core::net::IpAddr;

use uet_pds::{RxMeta, Transmit};
use uet_wire::encap::{EncapConfig, Transport, emit_frame, frame_len, parse_l2_l4};
use uet_wire::inet::{EtherType, EthernetAddress, EthernetRepr, IpRepr};
use uet_wire::time::Instant;
use uet_wire::{Dscp, Ecn};

use crate::fabric::Host;

/// What the simulator needs from an endpoint (implemented by
/// `uet_ses::Endpoint` and by test engines).
pub trait Engine {
    /// A datagram's UET bytes arrived.
    fn handle_datagram(&mut self, now: Instant, meta: &RxMeta, bytes: &[u8]);
    /// Timers are due.
    fn handle_timeout(&mut self, now: Instant);
    /// Writes the next datagram's UET bytes.
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit>;
    /// Next timer.
    fn poll_timeout(&self) -> Option<Instant>;
}

/// Frame-level counters of one host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NicStats {
    /// Frames handed to the engine.
    pub rx_frames: u64,
    /// Frames dropped by the NIC's checks (checksum, not UET, malformed).
    pub rx_dropped: u64,
    /// Frames sent.
    pub tx_frames: u64,
}

/// A host on the fabric.
#[derive(Debug)]
pub struct SimHost<E> {
    /// The engine.
    pub engine: E,
    addr: IpAddr,
    mac: EthernetAddress,
    encap: EncapConfig,
    /// Counters.
    pub stats: NicStats,
}

impl<E: Engine> SimHost<E> {
    /// A host with address `addr` (its MAC is derived from it).
    pub fn new(engine: E, addr: IpAddr, encap: EncapConfig) -> Self {
        let b = match addr {
            IpAddr::V4(a) => a.octets(),
            IpAddr::V6(a) => {
                let o = a.octets();
                [o[12], o[13], o[14], o[15]]
            }
        };
        Self {
            engine,
            addr,
            mac: EthernetAddress([2, 0, b[0], b[1], b[2], b[3]]),
            encap,
            stats: NicStats::default(),
        }
    }

    fn ip_repr(&self, dst: IpAddr, dscp: Dscp, ecn: Ecn) -> Option<IpRepr> {
        IpRepr::udp(self.addr, dst, dscp, ecn)
    }

    fn headroom(&self) -> usize {
        let l4 = 8;
        match self.addr {
            IpAddr::V4(_) => 14 + 20 + l4,
            IpAddr::V6(_) => 14 + 40 + l4,
        }
    }
}

impl<E: Engine> Host for SimHost<E> {
    fn handle_frame(&mut self, now: Instant, frame: &mut [u8]) {
        let Ok((h, range)) = parse_l2_l4(frame, &self.encap) else {
            self.stats.rx_dropped += 1;
            return;
        };
        if h.ip.dst_addr() != self.addr {
            self.stats.rx_dropped += 1;
            return;
        }
        self.stats.rx_frames += 1;
        let meta = RxMeta {
            src: h.ip.src_addr(),
            ev: h.entropy,
            ecn: h.ip.ecn(),
            trimmed: h.trimmed,
            nominal_size: h.nominal_pktsize() as u32,
            sdi: None,
            arrived: None,
        };
        self.engine.handle_datagram(now, &meta, &frame[range]);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.engine.handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let hr = self.headroom();
        loop {
            let t = self.engine.poll_transmit(now, &mut buf[hr..])?;
            let Some(ip) = self.ip_repr(t.dst, t.dscp, t.ecn) else {
                continue;
            };
            let eth = EthernetRepr {
                dst: EthernetAddress([2, 0, 0, 0, 0, 0xfe]),
                src: self.mac,
                vlan: None,
                ethertype: EtherType::Ipv4,
            };
            let transport = Transport::udp(t.ev, &self.encap);
            debug_assert_eq!(
                frame_len(&eth, &ip, &transport, &self.encap, t.len),
                hr + t.len + self.encap.trailer_len()
            );
            // The UET bytes are already in place: the closure has nothing to
            // write, emit_frame fills the headers, checksum and trailer.
            let n = emit_frame(&eth, &ip, &transport, &self.encap, t.len, buf, |_| {}).ok()?;
            self.stats.tx_frames += 1;
            return Some(n);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.engine.poll_timeout()
    }
}

/// A shared engine: the scenario keeps a handle to submit work and read
/// completions while the fabric drives it.
impl<E: Engine> Engine for std::rc::Rc<core::cell::RefCell<E>> {
    fn handle_datagram(&mut self, now: Instant, meta: &RxMeta, bytes: &[u8]) {
        self.borrow_mut().handle_datagram(now, meta, bytes);
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.borrow_mut().handle_timeout(now);
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.borrow_mut().poll_transmit(now, buf)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.borrow().poll_timeout()
    }
}
