//! IPv6 (RFC 8200), fixed header only.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Version|   DSCP    |ECN|              Flow Label               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |         Payload Length        |  Next Header  |   Hop Limit   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  Source Address (16 B)                        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |               Destination Address (16 B)                      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! The traffic class carries DSCP (upper 6 bits) and ECN (lower 2). Extension
//! headers are not walked: `next_header` is reported as is, and the frame
//! walker treats anything but UDP or the configured UET protocol as not UET.
//! Jumbograms (payload length 0 with a hop-by-hop option) are not supported.
//! `check_len` validates: at least 40 bytes, version 6 (`BadVersion`),
//! `40 + payload_len ≤ buffer` (`BadLength`); the payload is bounded by the
//! payload length, so Ethernet padding after the packet is ignored.

use core::fmt;
use core::net::Ipv6Addr;

use crate::error::{Error, ErrorKind, Layer, Result};
use crate::field::{set_u16, set_u32, u16_at, u32_at};
use crate::types::{Dscp, Ecn, OutOfRange};

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;
/// The largest payload the 16-bit payload length can describe.
pub const MAX_PAYLOAD_LEN: usize = u16::MAX as usize;

mod field {
    use crate::field::Field;
    pub(super) const VER_TC_FLOW: usize = 0;
    pub(super) const LENGTH: usize = 4;
    pub(super) const NEXT_HEADER: usize = 6;
    pub(super) const HOP_LIMIT: usize = 7;
    pub(super) const SRC: Field = 8..24;
    pub(super) const DST: Field = 24..40;
}

/// Byte offset of the next-header field (for errors that point at it).
pub const NEXT_HEADER_OFFSET: usize = field::NEXT_HEADER;
/// Byte offset of the source address: where the UET CRC coverage starts.
pub const SRC_ADDR_OFFSET: usize = field::SRC.start;

/// A 20-bit flow label, checked at construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FlowLabel(u32);

impl FlowLabel {
    /// The largest flow label.
    pub const MAX: u32 = 0x000f_ffff;

    /// Checked constructor.
    pub const fn new(v: u32) -> core::result::Result<Self, OutOfRange> {
        if v > Self::MAX {
            Err(OutOfRange {
                what: "FlowLabel",
                value: v as u64,
                max: Self::MAX as u64,
            })
        } else {
            Ok(Self(v))
        }
    }

    /// The low 20 bits of `v`.
    #[must_use]
    pub const fn from_masked(v: u32) -> Self {
        Self(v & Self::MAX)
    }

    /// The raw value.
    #[must_use]
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for FlowLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#07x}", self.0)
    }
}

/// A read/write view of an IPv6 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it (for emitting into a buffer of the
    /// right size).
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer after checking it (see the module docs): afterwards no
    /// accessor can panic.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the version and the payload length against the buffer.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::truncated(Layer::Ipv6, HEADER_LEN, len));
        }
        if self.version() != 6 {
            return Err(Error::new(
                Layer::Ipv6,
                ErrorKind::BadVersion,
                field::VER_TC_FLOW,
            ));
        }
        if HEADER_LEN + usize::from(self.payload_len()) > len {
            return Err(Error::new(Layer::Ipv6, ErrorKind::BadLength, field::LENGTH));
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn word0(&self) -> u32 {
        u32_at(self.b(), field::VER_TC_FLOW)
    }

    /// Version (6).
    pub fn version(&self) -> u8 {
        self.b()[field::VER_TC_FLOW] >> 4
    }

    /// The 8-bit traffic class.
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }

    /// DSCP (upper six bits of the traffic class).
    pub fn dscp(&self) -> Dscp {
        Dscp::from_masked(self.traffic_class() >> 2)
    }

    /// ECN (lower two bits of the traffic class).
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.traffic_class())
    }

    /// Flow label.
    pub fn flow_label(&self) -> FlowLabel {
        FlowLabel::from_masked(self.word0())
    }

    /// Payload length (extension headers included).
    pub fn payload_len(&self) -> u16 {
        u16_at(self.b(), field::LENGTH)
    }

    /// Next header.
    pub fn next_header(&self) -> u8 {
        self.b()[field::NEXT_HEADER]
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.b()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.b()[field::SRC]);
        Ipv6Addr::from(a)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.b()[field::DST]);
        Ipv6Addr::from(a)
    }

    /// The payload, bounded by the payload length.
    pub fn payload(&self) -> &[u8] {
        &self.b()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }

    /// The whole packet, bounded by the payload length: the slice the UET
    /// CRC trailer helpers take.
    pub fn packet(&self) -> &[u8] {
        &self.b()[..HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    fn set_word0(&mut self, w: u32) {
        set_u32(self.bm(), field::VER_TC_FLOW, w);
    }

    /// Writes version 6, the traffic class and the flow label at once.
    pub fn set_version_tc_flow(&mut self, traffic_class: u8, flow: FlowLabel) {
        self.set_word0((6 << 28) | (u32::from(traffic_class) << 20) | flow.get());
    }

    /// Sets the traffic class, keeping version and flow label.
    pub fn set_traffic_class(&mut self, tc: u8) {
        let w = (self.word0() & 0xf00f_ffff) | (u32::from(tc) << 20);
        self.set_word0(w);
    }

    /// Sets the DSCP, keeping the ECN bits.
    pub fn set_dscp(&mut self, dscp: Dscp) {
        let tc = (dscp.get() << 2) | (self.traffic_class() & 0x03);
        self.set_traffic_class(tc);
    }

    /// Sets the ECN bits, keeping the DSCP (IPv6 has no header checksum).
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let tc = (self.traffic_class() & 0xfc) | ecn.bits();
        self.set_traffic_class(tc);
    }

    /// Sets the flow label.
    pub fn set_flow_label(&mut self, flow: FlowLabel) {
        let w = (self.word0() & 0xfff0_0000) | flow.get();
        self.set_word0(w);
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        set_u16(self.bm(), field::LENGTH, v);
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, v: u8) {
        self.bm()[field::NEXT_HEADER] = v;
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.bm()[field::HOP_LIMIT] = v;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.bm()[field::SRC].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.bm()[field::DST].copy_from_slice(&a.octets());
    }

    /// The payload, bounded by the payload length, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.bm()[HEADER_LEN..end]
    }
}

/// A parsed IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Next header (not walked: an extension header is reported as is).
    pub next_header: u8,
    /// Payload length in bytes (at most [`MAX_PAYLOAD_LEN`]; `emit` clamps a
    /// larger value).
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// DSCP.
    pub dscp: Dscp,
    /// ECN.
    pub ecn: Ecn,
    /// Flow label.
    pub flow_label: FlowLabel,
}

impl Repr {
    /// Parses the fixed header.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        packet.check_len()?;
        Ok(Self {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            flow_label: packet.flow_label(),
        })
    }

    /// Bytes `emit` writes: the 40-byte fixed header.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the fixed header into a buffer of at least `buffer_len()`
    /// bytes. The payload is the caller's.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_version_tc_flow((self.dscp.get() << 2) | self.ecn.bits(), self.flow_label);
        packet.set_payload_len(self.payload_len.min(MAX_PAYLOAD_LEN) as u16);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src);
        packet.set_dst_addr(self.dst);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IPv6 {} > {} nh={} dscp={} ecn={} flow={} hlim={} len={}",
            self.src,
            self.dst,
            self.next_header,
            self.dscp,
            self.ecn,
            self.flow_label,
            self.hop_limit,
            self.payload_len
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    // Golden vector: fd00::1 > fd00::2, traffic class 0xba = DSCP 46 (EF) +
    // ECN ECT(0), flow label 0x12345, payload 16 bytes, UDP, hop limit 64.
    // Word 0 = 6 << 28 | 0xba << 20 | 0x12345 = 0x6ba12345.
    pub(crate) const EF_ECT0: [u8; 40] = [
        0x6b, 0xa1, 0x23, 0x45, 0x00, 0x10, 0x11, 0x40, // ver/tc/flow, len, nh, hlim
        0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // src
        0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, // dst
    ];

    #[test]
    fn golden_ef_ect0() {
        let mut buf = EF_ECT0.to_vec();
        buf.resize(40 + 16 + 4, 0xee); // 4 bytes of trailing padding
        let p = Packet::new_checked(&buf[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr {
                src: "fd00::1".parse().unwrap(),
                dst: "fd00::2".parse().unwrap(),
                next_header: 17,
                payload_len: 16,
                hop_limit: 64,
                dscp: Dscp::new(46).unwrap(),
                ecn: Ecn::Ect0,
                flow_label: FlowLabel::new(0x12345).unwrap(),
            }
        );
        assert_eq!(p.traffic_class(), 0xba);
        assert_eq!(p.payload().len(), 16);
        assert_eq!(p.packet().len(), 56);
        assert_eq!(
            r.to_string(),
            "IPv6 fd00::1 > fd00::2 nh=17 dscp=46 ecn=ECT(0) flow=0x12345 hlim=64 len=16"
        );
        let mut b = [0u8; 40];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, EF_ECT0);
    }

    #[test]
    fn set_ecn_and_dscp_touch_only_the_traffic_class() {
        let mut b = EF_ECT0;
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_ecn(Ecn::Ce);
        assert_eq!(p.ecn(), Ecn::Ce);
        assert_eq!(p.dscp().get(), 46);
        p.set_dscp(Dscp::new(10).unwrap());
        assert_eq!(p.dscp().get(), 10);
        assert_eq!(p.ecn(), Ecn::Ce);
        assert_eq!(p.flow_label().get(), 0x12345);
        assert_eq!(p.version(), 6);
        assert_eq!(&b[4..], &EF_ECT0[4..]);
    }

    #[test]
    fn rejections() {
        let mut full = EF_ECT0.to_vec();
        full.resize(56, 0);
        let err = |b: &[u8]| Packet::new_checked(b).unwrap_err();
        assert_eq!(err(&full[..39]), Error::truncated(Layer::Ipv6, 40, 39));
        assert_eq!(
            err(&full[..55]),
            Error::new(Layer::Ipv6, ErrorKind::BadLength, 4)
        );
        let mut b = full.clone();
        b[0] = 0x4b;
        assert_eq!(err(&b), Error::new(Layer::Ipv6, ErrorKind::BadVersion, 0));
        assert!(FlowLabel::new(0x10_0000).is_err());
    }

    pub(crate) fn arb_repr() -> impl Strategy<Value = Repr> {
        (
            any::<[u8; 16]>(),
            any::<[u8; 16]>(),
            any::<u8>(),
            0usize..=MAX_PAYLOAD_LEN,
            any::<u8>(),
            0u8..64,
            0u8..4,
            0u32..=FlowLabel::MAX,
        )
            .prop_map(|(s, d, nh, payload_len, hop_limit, dscp, ecn, flow)| Repr {
                src: Ipv6Addr::from(s),
                dst: Ipv6Addr::from(d),
                next_header: nh,
                payload_len,
                hop_limit,
                dscp: Dscp::from_masked(dscp),
                ecn: Ecn::from_bits(ecn),
                flow_label: FlowLabel::from_masked(flow),
            })
    }

    proptest! {
        #[test]
        fn round_trip(r in arb_repr()) {
            let r = Repr { payload_len: r.payload_len % 300, ..r };
            let mut b = vec![0u8; r.buffer_len() + r.payload_len];
            r.emit(&mut Packet::new_unchecked(&mut b[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = (p.payload(), p.packet());
                let _ = Repr::parse(&p).map(|r| r.to_string());
            }
        }
    }
}
