//! IPv4 (RFC 791), as UET uses it: never fragmented, options tolerated.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Version|  IHL  |   DSCP    |ECN|          Total Length         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |         Identification        |R|D|M|      Fragment Offset    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Time to Live |    Protocol   |         Header Checksum       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                       Source Address                          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    Destination Address                        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    Options (IHL > 5)                          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! * `check_len` validates, in this order: at least 20 bytes, version 4
//!   (`BadVersion`), IHL ≥ 5 (`BadLength`), the whole header present
//!   (`Truncated`), `header_len ≤ total_length ≤ buffer` (`BadLength`).
//!   Afterwards the payload is bounded by `total_length`, so Ethernet padding
//!   after the packet is ignored.
//! * `Repr::parse` also rejects a bad header checksum (`BadChecksum`) and any
//!   fragment — MF set or a non-zero offset — with `OutOfRange` at offset 6:
//!   UET packets are never fragmented, and reassembly is not this layer's job.
//! * Options are skipped; `Repr::emit` writes none (IHL 5), the reserved flag
//!   bit as zero, and a fresh header checksum.
//! * [`Packet::set_dscp`] and [`Packet::set_ecn`] patch the checksum
//!   incrementally (RFC 1624), so a switch model marking CE leaves a valid
//!   header.

use core::fmt;
use core::net::Ipv4Addr;

use super::checksum;
use crate::error::{Error, ErrorKind, Layer, Result};
use crate::field::{set_u16, u16_at};
use crate::types::{Dscp, Ecn};

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;
/// The largest payload that fits the 16-bit total length (without options).
pub const MAX_PAYLOAD_LEN: usize = u16::MAX as usize - HEADER_LEN;
/// IP protocol number of UDP.
pub const PROTOCOL_UDP: u8 = 17;

mod field {
    use crate::field::Field;
    pub(super) const VER_IHL: usize = 0;
    pub(super) const TOS: usize = 1;
    pub(super) const LENGTH: usize = 2;
    pub(super) const IDENT: usize = 4;
    pub(super) const FLAGS_FRAG: usize = 6;
    pub(super) const TTL: usize = 8;
    pub(super) const PROTOCOL: usize = 9;
    pub(super) const CHECKSUM: usize = 10;
    pub(super) const SRC: Field = 12..16;
    pub(super) const DST: Field = 16..20;

    pub(super) const FLAG_RESERVED: u16 = 0x8000;
    pub(super) const FLAG_DF: u16 = 0x4000;
    pub(super) const FLAG_MF: u16 = 0x2000;
    pub(super) const FRAG_OFFSET_MASK: u16 = 0x1fff;
}

/// Byte offset of the protocol field (for errors that point at it).
pub const PROTOCOL_OFFSET: usize = field::PROTOCOL;
/// Byte offset of the source address: where the UET CRC coverage starts.
pub const SRC_ADDR_OFFSET: usize = field::SRC.start;

/// A read/write view of an IPv4 packet.
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

    /// Checks version, header length and total length against the buffer.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::truncated(Layer::Ipv4, HEADER_LEN, len));
        }
        if self.version() != 4 {
            return Err(Error::new(
                Layer::Ipv4,
                ErrorKind::BadVersion,
                field::VER_IHL,
            ));
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(Error::new(
                Layer::Ipv4,
                ErrorKind::BadLength,
                field::VER_IHL,
            ));
        }
        if len < hl {
            return Err(Error::truncated(Layer::Ipv4, hl, len));
        }
        let total = usize::from(self.total_len());
        if total < hl || total > len {
            return Err(Error::new(Layer::Ipv4, ErrorKind::BadLength, field::LENGTH));
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

    /// Version (4).
    pub fn version(&self) -> u8 {
        self.b()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[field::VER_IHL] & 0x0f) * 4
    }

    /// DSCP (upper six bits of the former TOS byte).
    pub fn dscp(&self) -> Dscp {
        Dscp::from_masked(self.b()[field::TOS] >> 2)
    }

    /// ECN (lower two bits of the former TOS byte).
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.b()[field::TOS])
    }

    /// Total length (header and payload).
    pub fn total_len(&self) -> u16 {
        u16_at(self.b(), field::LENGTH)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        u16_at(self.b(), field::IDENT)
    }

    fn flags_frag(&self) -> u16 {
        u16_at(self.b(), field::FLAGS_FRAG)
    }

    /// The reserved ("evil") flag bit.
    pub fn reserved_flag(&self) -> bool {
        self.flags_frag() & field::FLAG_RESERVED != 0
    }

    /// Don't fragment.
    pub fn dont_frag(&self) -> bool {
        self.flags_frag() & field::FLAG_DF != 0
    }

    /// More fragments.
    pub fn more_frags(&self) -> bool {
        self.flags_frag() & field::FLAG_MF != 0
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (self.flags_frag() & field::FRAG_OFFSET_MASK) << 3
    }

    /// Whether this is a fragment (MF set or a non-zero offset).
    pub fn is_fragment(&self) -> bool {
        self.flags_frag() & (field::FLAG_MF | field::FRAG_OFFSET_MASK) != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.b()[field::TTL]
    }

    /// Protocol of the payload.
    pub fn protocol(&self) -> u8 {
        self.b()[field::PROTOCOL]
    }

    /// Header checksum as stored.
    pub fn checksum(&self) -> u16 {
        u16_at(self.b(), field::CHECKSUM)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.b()[field::SRC];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.b()[field::DST];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// The options (empty when IHL is 5).
    pub fn options(&self) -> &[u8] {
        &self.b()[HEADER_LEN..self.header_len()]
    }

    /// Whether the header checksum verifies.
    ///
    /// # Fuzzing
    /// Always true under `cfg(fuzzing)`, so the fuzzer reaches the layers
    /// above.
    pub fn verify_checksum(&self) -> bool {
        if cfg!(fuzzing) {
            return true;
        }
        checksum::data(&self.b()[..self.header_len()]) == 0xffff
    }

    /// The payload, bounded by the total length.
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..usize::from(self.total_len())]
    }

    /// The whole packet (header and payload), bounded by the total length:
    /// the slice the UET CRC trailer helpers take.
    pub fn packet(&self) -> &[u8] {
        &self.b()[..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets version 4 and the header length (a multiple of 4, 20..=60).
    pub fn set_version_and_header_len(&mut self, header_len: usize) {
        self.bm()[field::VER_IHL] = 0x40 | ((header_len / 4) as u8 & 0x0f);
    }

    /// Writes the DSCP and ECN byte without touching the checksum.
    pub fn set_dscp_ecn_raw(&mut self, dscp: Dscp, ecn: Ecn) {
        self.bm()[field::TOS] = (dscp.get() << 2) | ecn.bits();
    }

    /// Replaces the first header word and patches the checksum (RFC 1624).
    fn patch_word0(&mut self, tos: u8) {
        let b = self.bm();
        let old = u16::from_be_bytes([b[field::VER_IHL], b[field::TOS]]);
        b[field::TOS] = tos;
        let new = u16::from_be_bytes([b[field::VER_IHL], tos]);
        let c = u16_at(b, field::CHECKSUM);
        set_u16(b, field::CHECKSUM, checksum::update(c, old, new));
    }

    /// Sets the DSCP and updates the header checksum in place.
    pub fn set_dscp(&mut self, dscp: Dscp) {
        let tos = (dscp.get() << 2) | (self.b()[field::TOS] & 0x03);
        self.patch_word0(tos);
    }

    /// Sets the ECN bits and updates the header checksum in place (what a
    /// switch does when it marks CE).
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let tos = (self.b()[field::TOS] & 0xfc) | ecn.bits();
        self.patch_word0(tos);
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, v: u16) {
        set_u16(self.bm(), field::LENGTH, v);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, v: u16) {
        set_u16(self.bm(), field::IDENT, v);
    }

    /// Writes the flags (reserved bit zero, MF clear, offset zero) with DF as
    /// given: the only form UET sends.
    pub fn set_unfragmented(&mut self, dont_frag: bool) {
        let v = if dont_frag { field::FLAG_DF } else { 0 };
        set_u16(self.bm(), field::FLAGS_FRAG, v);
    }

    /// Writes the raw flags and fragment-offset word.
    pub fn set_flags_frag_raw(&mut self, v: u16) {
        set_u16(self.bm(), field::FLAGS_FRAG, v);
    }

    /// Sets the time to live.
    pub fn set_ttl(&mut self, v: u8) {
        self.bm()[field::TTL] = v;
    }

    /// Sets the protocol.
    pub fn set_protocol(&mut self, v: u8) {
        self.bm()[field::PROTOCOL] = v;
    }

    /// Writes the checksum field as given.
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.bm(), field::CHECKSUM, v);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.bm()[field::SRC].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.bm()[field::DST].copy_from_slice(&a.octets());
    }

    /// Computes and writes the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = !checksum::data(&self.b()[..hl]);
        self.set_checksum(c);
    }

    /// The payload, bounded by the total length, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), usize::from(self.total_len()));
        &mut self.bm()[h..t]
    }
}

/// A parsed IPv4 header (options dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol of the payload.
    pub protocol: u8,
    /// Payload length in bytes (at most [`MAX_PAYLOAD_LEN`]; `emit` clamps a
    /// larger value).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// DSCP.
    pub dscp: Dscp,
    /// ECN.
    pub ecn: Ecn,
    /// Identification.
    pub ident: u16,
    /// Don't fragment.
    pub dont_frag: bool,
}

impl Repr {
    /// Parses a header: see the module docs for what is rejected.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        packet.check_len()?;
        if !packet.verify_checksum() {
            return Err(Error::new(
                Layer::Ipv4,
                ErrorKind::BadChecksum,
                field::CHECKSUM,
            ));
        }
        if packet.is_fragment() {
            return Err(Error::new(
                Layer::Ipv4,
                ErrorKind::OutOfRange,
                field::FLAGS_FRAG,
            ));
        }
        Ok(Self {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len()) - packet.header_len(),
            ttl: packet.ttl(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
        })
    }

    /// Bytes `emit` writes: the 20-byte header.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header (no options) with its checksum into a buffer of at
    /// least `buffer_len()` bytes. The payload is the caller's.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let payload = self.payload_len.min(MAX_PAYLOAD_LEN);
        packet.set_version_and_header_len(HEADER_LEN);
        packet.set_dscp_ecn_raw(self.dscp, self.ecn);
        packet.set_total_len((HEADER_LEN + payload) as u16);
        packet.set_ident(self.ident);
        packet.set_unfragmented(self.dont_frag);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src);
        packet.set_dst_addr(self.dst);
        packet.fill_checksum();
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IPv4 {} > {} proto={} dscp={} ecn={} ttl={} id={:#06x}{} len={}",
            self.src,
            self.dst,
            self.protocol,
            self.dscp,
            self.ecn,
            self.ttl,
            self.ident,
            if self.dont_frag { " DF" } else { "" },
            self.payload_len
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    // Golden vector: the worked example of Wikipedia's "Internet checksum"
    // article, 192.168.0.1 > 192.168.0.199, UDP, checksum 0xb861. By hand:
    // 4500 + 0073 + 0000 + 4000 + 4011 + c0a8 + 0001 + c0a8 + 00c7
    // = 0x2479c -> 0x479e -> ~ = 0xb861.
    const CLASSIC: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    // Golden vector: 10.0.0.1 > 10.0.0.2, UDP, DSCP 46 (EF), ECN CE
    // (TOS 0xbb), total length 104, id 0x1234, DF, TTL 64.
    // Checksum by hand: 45bb + 0068 + 1234 + 4000 + 4011 + 0a00 + 0001
    // + 0a00 + 0002 = 0xec6b -> ~ = 0x1394.
    pub(crate) const EF_CE: [u8; 20] = [
        0x45, 0xbb, 0x00, 0x68, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x13, 0x94, 0x0a, 0x00, 0x00,
        0x01, 0x0a, 0x00, 0x00, 0x02,
    ];

    fn with_payload(hdr: &[u8; 20]) -> Vec<u8> {
        let mut v = hdr.to_vec();
        let total = usize::from(u16::from_be_bytes([hdr[2], hdr[3]]));
        v.resize(total, 0);
        v
    }

    #[test]
    fn golden_classic_checksum() {
        let buf = with_payload(&CLASSIC);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.checksum(), 0xb861);
        let mut hdr = CLASSIC;
        hdr[10] = 0;
        hdr[11] = 0;
        assert_eq!(!checksum::data(&hdr), 0xb861);
    }

    #[test]
    fn golden_ef_ce() {
        let buf = with_payload(&EF_CE);
        let p = Packet::new_checked(&buf[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr {
                src: Ipv4Addr::new(10, 0, 0, 1),
                dst: Ipv4Addr::new(10, 0, 0, 2),
                protocol: 17,
                payload_len: 84,
                ttl: 64,
                dscp: Dscp::new(46).unwrap(),
                ecn: Ecn::Ce,
                ident: 0x1234,
                dont_frag: true,
            }
        );
        assert_eq!(
            r.to_string(),
            "IPv4 10.0.0.1 > 10.0.0.2 proto=17 dscp=46 ecn=CE ttl=64 id=0x1234 DF len=84"
        );
        let mut b = [0u8; 20];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, EF_CE);
    }

    #[test]
    fn set_ecn_keeps_the_checksum_valid() {
        let mut buf = with_payload(&EF_CE);
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set_ecn(Ecn::Ect0);
        assert!(p.verify_checksum());
        assert_eq!(p.ecn(), Ecn::Ect0);
        assert_eq!(p.dscp().get(), 46);
        p.set_dscp(Dscp::new(0).unwrap());
        assert!(p.verify_checksum());
        p.set_ecn(Ecn::Ce);
        assert!(p.verify_checksum());
        let patched = p.checksum();
        p.fill_checksum();
        assert_eq!(p.checksum(), patched);
    }

    #[test]
    fn rejections() {
        let good = with_payload(&EF_CE);
        let kind = |b: &[u8]| {
            Packet::new_checked(b)
                .and_then(|p| Repr::parse(&p))
                .unwrap_err()
        };
        assert_eq!(kind(&good[..19]), Error::truncated(Layer::Ipv4, 20, 19));
        let mut b = good.clone();
        b[0] = 0x65;
        assert_eq!(kind(&b).kind, ErrorKind::BadVersion);
        let mut b = good.clone();
        b[0] = 0x44;
        assert_eq!(kind(&b), Error::new(Layer::Ipv4, ErrorKind::BadLength, 0));
        let mut b = good.clone();
        b[0] = 0x4f; // 60-byte header, but only 20 + 84 bytes, total 104: fits
        assert_eq!(kind(&b[..40]).kind, ErrorKind::Truncated { need: 60 });
        assert_eq!(
            kind(&good[..103]),
            Error::new(Layer::Ipv4, ErrorKind::BadLength, 2)
        );
        let mut b = good.clone();
        b[2] = 0;
        b[3] = 19;
        assert_eq!(kind(&b).kind, ErrorKind::BadLength);
        let mut b = good.clone();
        b[15] ^= 0x01; // corrupt the source address
        assert_eq!(
            kind(&b),
            Error::new(Layer::Ipv4, ErrorKind::BadChecksum, 10)
        );
        // Fragments: MF, then a non-zero offset.
        for ff in [0x2000u16, 0x0001] {
            let mut b = good.clone();
            let mut p = Packet::new_unchecked(&mut b[..]);
            p.set_flags_frag_raw(ff);
            p.fill_checksum();
            assert_eq!(kind(&b), Error::new(Layer::Ipv4, ErrorKind::OutOfRange, 6));
        }
    }

    #[test]
    fn options_are_skipped_and_padding_ignored() {
        // IHL 6 with one 4-byte option (NOP NOP NOP EOL), 8-byte payload, and
        // 6 bytes of Ethernet padding after the packet.
        let mut b = [0u8; 24 + 8 + 6];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_version_and_header_len(24);
        p.set_total_len(32);
        p.set_ttl(1);
        p.set_protocol(17);
        b[20..24].copy_from_slice(&[1, 1, 1, 0]);
        b[24..32].copy_from_slice(b"payload!");
        b[32..].fill(0xee);
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.fill_checksum();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!(p.payload(), b"payload!");
        assert_eq!(p.packet().len(), 32);
        assert_eq!(Repr::parse(&p).unwrap().payload_len, 8);
    }

    pub(crate) fn arb_repr() -> impl Strategy<Value = Repr> {
        (
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
            any::<u8>(),
            0usize..=MAX_PAYLOAD_LEN,
            any::<u8>(),
            0u8..64,
            0u8..4,
            any::<u16>(),
            any::<bool>(),
        )
            .prop_map(
                |(s, d, protocol, payload_len, ttl, dscp, ecn, ident, df)| Repr {
                    src: Ipv4Addr::from(s),
                    dst: Ipv4Addr::from(d),
                    protocol,
                    payload_len,
                    ttl,
                    dscp: Dscp::from_masked(dscp),
                    ecn: Ecn::from_bits(ecn),
                    ident,
                    dont_frag: df,
                },
            )
    }

    proptest! {
        #[test]
        fn round_trip(r in arb_repr()) {
            let r = Repr { payload_len: r.payload_len % 300, ..r };
            let mut b = vec![0u8; r.buffer_len() + r.payload_len];
            r.emit(&mut Packet::new_unchecked(&mut b[..]));
            let p = Packet::new_checked(&b[..]).unwrap();
            prop_assert_eq!(p.header_len(), r.buffer_len());
            prop_assert_eq!(Repr::parse(&p).unwrap(), r);
        }

        #[test]
        fn set_dscp_ecn_equals_recompute(r in arb_repr(), dscp in 0u8..64, ecn in 0u8..4) {
            let mut b = [0u8; HEADER_LEN];
            let r = Repr { payload_len: 0, ..r };
            r.emit(&mut Packet::new_unchecked(&mut b[..]));
            let mut p = Packet::new_unchecked(&mut b[..]);
            p.set_ecn(Ecn::from_bits(ecn));
            p.set_dscp(Dscp::from_masked(dscp));
            prop_assert!(p.verify_checksum());
            let c = p.checksum();
            p.fill_checksum();
            prop_assert_eq!(p.checksum(), c);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = (p.payload(), p.options(), p.packet(), p.frag_offset());
                let _ = Repr::parse(&p).map(|r| r.to_string());
            }
        }
    }
}
