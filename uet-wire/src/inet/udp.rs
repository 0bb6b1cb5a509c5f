//! UDP (RFC 768). For UET the source port carries the entropy value and the
//! destination port is 4793 by default (`docs/protocol-notes.md` §1).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |          Source Port          |       Destination Port        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |            Length             |           Checksum            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! * `check_len`: at least 8 bytes, `8 ≤ length ≤ buffer` (`BadLength` at
//!   offset 4). The payload is bounded by the length field.
//! * The checksum covers a pseudo-header (RFC 768 for IPv4, RFC 8200 §8.1 for
//!   IPv6), the UDP header and the payload. A computed value of 0 is sent as
//!   0xFFFF. A received checksum of 0 means "none" and is accepted for both
//!   IPv4 and IPv6: RFC 8200 forbids it for IPv6 in general, but RFC 6935 /
//!   RFC 6936 allow it for tunnel protocols, and UET 1.0.3 §3.5.10.1 (as cited
//!   by a public VPP UET plugin; the PDF was not available) requires senders to
//!   send zero. A non-zero checksum is verified.
//! * Addresses are `IpAddr`s (smoltcp style). When the two families differ the
//!   IPv4 address is mapped into IPv6 (`::ffff:a.b.c.d`) and the IPv6
//!   pseudo-header is used: a total rule, never a panic.

use core::fmt;
use core::net::IpAddr;

use super::checksum;
use crate::error::{Error, ErrorKind, Layer, Result};
use crate::field::{set_u16, u16_at};

/// Length of the header.
pub const HEADER_LEN: usize = 8;
/// The largest payload the 16-bit length can describe.
pub const MAX_PAYLOAD_LEN: usize = u16::MAX as usize - HEADER_LEN;

mod field {
    pub(super) const SRC_PORT: usize = 0;
    pub(super) const DST_PORT: usize = 2;
    pub(super) const LENGTH: usize = 4;
    pub(super) const CHECKSUM: usize = 6;
}

/// Byte offset of the destination port (for errors that point at it).
pub const DST_PORT_OFFSET: usize = field::DST_PORT;

/// The sum of the pseudo-header for a UDP datagram of `length` bytes.
fn pseudo_header(src: IpAddr, dst: IpAddr, length: u16) -> u16 {
    use super::ipv4::PROTOCOL_UDP;
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => checksum::pseudo_header_v4(s, d, PROTOCOL_UDP, length),
        (s, d) => checksum::pseudo_header_v6(to_v6(s), to_v6(d), PROTOCOL_UDP, u32::from(length)),
    }
}

fn to_v6(a: IpAddr) -> core::net::Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// A read/write view of a UDP datagram.
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

    /// Wraps a buffer after checking it: afterwards no accessor can panic.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the header and the length field against the buffer.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::truncated(Layer::Udp, HEADER_LEN, len));
        }
        let l = usize::from(self.len());
        if !(HEADER_LEN..=len).contains(&l) {
            return Err(Error::new(Layer::Udp, ErrorKind::BadLength, field::LENGTH));
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

    /// Source port (the UET entropy value).
    pub fn src_port(&self) -> u16 {
        u16_at(self.b(), field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        u16_at(self.b(), field::DST_PORT)
    }

    /// Length (header and payload).
    pub fn len(&self) -> u16 {
        u16_at(self.b(), field::LENGTH)
    }

    /// Whether the datagram has no payload.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= HEADER_LEN
    }

    /// Checksum as stored (0: none).
    pub fn checksum(&self) -> u16 {
        u16_at(self.b(), field::CHECKSUM)
    }

    /// The whole datagram, bounded by the length field.
    pub fn datagram(&self) -> &[u8] {
        &self.b()[..usize::from(self.len())]
    }

    /// The payload, bounded by the length field.
    pub fn payload(&self) -> &[u8] {
        &self.b()[HEADER_LEN..usize::from(self.len())]
    }

    /// Whether the checksum verifies; a zero checksum ("none") verifies.
    ///
    /// # Fuzzing
    /// Always true under `cfg(fuzzing)`.
    pub fn verify_checksum(&self, src: IpAddr, dst: IpAddr) -> bool {
        self.verify_checksum_with(src, dst, checksum::data)
    }

    /// [`Packet::verify_checksum`], summing the datagram with `sum`.
    pub fn verify_checksum_with(&self, src: IpAddr, dst: IpAddr, sum: checksum::SumFn) -> bool {
        if cfg!(fuzzing) || self.checksum() == 0 {
            return true;
        }
        let total = checksum::combine(&[pseudo_header(src, dst, self.len()), sum(self.datagram())]);
        total == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        set_u16(self.bm(), field::SRC_PORT, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        set_u16(self.bm(), field::DST_PORT, v);
    }

    /// Sets the length.
    pub fn set_len(&mut self, v: u16) {
        set_u16(self.bm(), field::LENGTH, v);
    }

    /// Writes the checksum field as given (0 for "none").
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.bm(), field::CHECKSUM, v);
    }

    /// Computes and writes the checksum over the datagram (bounded by the
    /// length field, which must already be set and fit the buffer); a result
    /// of 0 is written as 0xFFFF.
    pub fn fill_checksum(&mut self, src: IpAddr, dst: IpAddr) {
        self.fill_checksum_with(src, dst, checksum::data);
    }

    /// [`Packet::fill_checksum`], summing the datagram with `sum`.
    pub fn fill_checksum_with(&mut self, src: IpAddr, dst: IpAddr, sum: checksum::SumFn) {
        self.set_checksum(0);
        let len = self.len();
        let end = usize::from(len).min(self.b().len());
        let total = checksum::combine(&[pseudo_header(src, dst, len), sum(&self.b()[..end])]);
        let c = !total;
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }

    /// The payload, bounded by the length field, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.bm()[HEADER_LEN..end]
    }
}

/// A parsed UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length in bytes (at most [`MAX_PAYLOAD_LEN`]; `emit` clamps a
    /// larger value).
    pub payload_len: usize,
}

impl Repr {
    /// Parses a datagram, verifying a non-zero checksum against the
    /// pseudo-header of `src` and `dst` (`BadChecksum` at offset 6).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>, src: IpAddr, dst: IpAddr) -> Result<Self> {
        Self::parse_with(packet, src, dst, checksum::data)
    }

    /// [`Repr::parse`], summing the datagram with `sum`.
    pub fn parse_with<T: AsRef<[u8]>>(
        packet: &Packet<T>,
        src: IpAddr,
        dst: IpAddr,
        sum: checksum::SumFn,
    ) -> Result<Self> {
        packet.check_len()?;
        if !packet.verify_checksum_with(src, dst, sum) {
            return Err(Error::new(
                Layer::Udp,
                ErrorKind::BadChecksum,
                field::CHECKSUM,
            ));
        }
        Ok(Self {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: usize::from(packet.len()) - HEADER_LEN,
        })
    }

    /// Header length (8).
    #[must_use]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Bytes `emit` writes: header and payload.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the header, lets `emit_payload` fill the `payload_len` payload
    /// bytes in place, then computes the checksum. The buffer must hold
    /// `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Packet<T>,
        src: IpAddr,
        dst: IpAddr,
        emit_payload: impl FnOnce(&mut [u8]),
    ) {
        self.emit_header(packet, 0);
        emit_payload(packet.payload_mut());
        packet.fill_checksum(src, dst);
    }

    /// Writes the header only, with the checksum field as given (0 for
    /// "none", or a placeholder to fill once the payload is in place).
    pub fn emit_header<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>, checksum: u16) {
        let len = (HEADER_LEN + self.payload_len.min(MAX_PAYLOAD_LEN)) as u16;
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(len);
        packet.set_checksum(checksum);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "UDP {} > {} len={}",
            self.src_port, self.dst_port, self.payload_len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};
    use proptest::prelude::*;

    const V4_SRC: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const V4_DST: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    const V6_SRC: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1));
    const V6_DST: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2));

    // Golden vector: entropy 0xbeef in the source port, to 4793 (0x12b9),
    // 4-byte payload de ad be ef, over IPv4 10.0.0.1 > 10.0.0.2.
    // Checksum by hand: pseudo 0a00+0001+0a00+0002+0011+000c = 0x1420;
    // header beef+12b9+000c = 0xd1b4; payload dead+beef = 0x19d9c -> 0x9d9d;
    // 0x1420 + 0xd1b4 + 0x9d9d = 0x18371 -> 0x8372 -> ~ = 0x7c8d.
    const V4_DGRAM: [u8; 12] = [
        0xbe, 0xef, 0x12, 0xb9, 0x00, 0x0c, 0x7c, 0x8d, 0xde, 0xad, 0xbe, 0xef,
    ];

    // Same datagram over IPv6 fd00::1 > fd00::2. Pseudo-header by hand:
    // fd00+0001+fd00+0002 = 0x1fa03 -> 0xfa04; + 000c + 0011 = 0xfa21;
    // + d1b4 + 9d9d = 0x26972 -> 0x6974 -> ~ = 0x968b.
    const V6_DGRAM: [u8; 12] = [
        0xbe, 0xef, 0x12, 0xb9, 0x00, 0x0c, 0x96, 0x8b, 0xde, 0xad, 0xbe, 0xef,
    ];

    #[test]
    fn golden_v4_and_v6() {
        for (src, dst, golden) in [(V4_SRC, V4_DST, V4_DGRAM), (V6_SRC, V6_DST, V6_DGRAM)] {
            let p = Packet::new_checked(&golden[..]).unwrap();
            let r = Repr::parse(&p, src, dst).unwrap();
            assert_eq!(
                r,
                Repr {
                    src_port: 0xbeef,
                    dst_port: 4793,
                    payload_len: 4
                }
            );
            assert_eq!(p.payload(), &[0xde, 0xad, 0xbe, 0xef]);
            assert_eq!(r.to_string(), "UDP 48879 > 4793 len=4");
            let mut b = [0u8; 12];
            r.emit(&mut Packet::new_unchecked(&mut b[..]), src, dst, |pl| {
                pl.copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
            });
            assert_eq!(b, golden);
        }
    }

    #[test]
    fn corruption_is_detected_and_zero_means_none() {
        let mut b = V4_DGRAM;
        b[9] ^= 0x40;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            Repr::parse(&p, V4_SRC, V4_DST).unwrap_err(),
            Error::new(Layer::Udp, ErrorKind::BadChecksum, 6)
        );
        // Wrong pseudo-header (another destination) is detected too.
        let p = Packet::new_checked(&V4_DGRAM[..]).unwrap();
        assert!(!p.verify_checksum(V4_SRC, V4_SRC));
        b[6] = 0;
        b[7] = 0;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(Repr::parse(&p, V6_SRC, V6_DST).is_ok());
    }

    #[test]
    fn zero_result_is_sent_as_ffff() {
        // A payload word that makes the sum 0xffff: the checksum would be 0 and
        // must go out as 0xffff (which verifies as well).
        let mut b = [0u8; 10];
        let r = Repr {
            src_port: 1,
            dst_port: 4793,
            payload_len: 2,
        };
        r.emit(
            &mut Packet::new_unchecked(&mut b[..]),
            V4_SRC,
            V4_DST,
            |_| {},
        );
        let c = u16::from_be_bytes([b[6], b[7]]);
        // With the payload word set to c = ~S the sum becomes S + ~S = 0xffff.
        r.emit(
            &mut Packet::new_unchecked(&mut b[..]),
            V4_SRC,
            V4_DST,
            |pl| {
                pl.copy_from_slice(&c.to_be_bytes());
            },
        );
        assert_eq!(&b[6..8], &[0xff, 0xff]);
        assert!(
            Packet::new_checked(&b[..])
                .unwrap()
                .verify_checksum(V4_SRC, V4_DST)
        );
    }

    #[test]
    fn length_rejections() {
        let err = |b: &[u8]| Packet::new_checked(b).unwrap_err();
        assert_eq!(err(&V4_DGRAM[..7]), Error::truncated(Layer::Udp, 8, 7));
        assert_eq!(
            err(&V4_DGRAM[..11]),
            Error::new(Layer::Udp, ErrorKind::BadLength, 4)
        );
        let mut b = V4_DGRAM;
        b[5] = 7;
        assert_eq!(err(&b), Error::new(Layer::Udp, ErrorKind::BadLength, 4));
        // A shorter length bounds the payload.
        b[5] = 10;
        assert_eq!(
            Packet::new_checked(&b[..]).unwrap().payload(),
            &[0xde, 0xad]
        );
    }

    fn arb_addrs() -> impl Strategy<Value = (IpAddr, IpAddr)> {
        prop_oneof![
            (any::<[u8; 4]>(), any::<[u8; 4]>())
                .prop_map(|(s, d)| (IpAddr::from(s), IpAddr::from(d))),
            (any::<[u8; 16]>(), any::<[u8; 16]>())
                .prop_map(|(s, d)| (IpAddr::from(s), IpAddr::from(d))),
            (any::<[u8; 4]>(), any::<[u8; 16]>())
                .prop_map(|(s, d)| (IpAddr::from(s), IpAddr::from(d))),
        ]
    }

    proptest! {
        #[test]
        fn round_trip(
            src_port: u16,
            dst_port: u16,
            payload in proptest::collection::vec(any::<u8>(), 0..300),
            (src, dst) in arb_addrs(),
            flip in any::<prop::sample::Index>(),
        ) {
            let r = Repr { src_port, dst_port, payload_len: payload.len() };
            let mut b = vec![0u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut b[..]), src, dst, |pl| pl.copy_from_slice(&payload));
            let p = Packet::new_checked(&b[..]).unwrap();
            prop_assert_eq!(Repr::parse(&p, src, dst).unwrap(), r);
            prop_assert_eq!(p.payload(), &payload[..]);
            // Any single flipped bit outside the checksum field is detected.
            let i = flip.index(b.len());
            if !(6..8).contains(&i) {
                b[i] ^= 0x01;
                if let Ok(p) = Packet::new_checked(&b[..]) {
                    prop_assert!(Repr::parse(&p, src, dst).is_err());
                }
            }
        }

        #[test]
        fn parse_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            (src, dst) in arb_addrs(),
        ) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = (p.payload(), p.datagram(), p.is_empty());
                let _ = Repr::parse(&p, src, dst).map(|r| r.to_string());
            }
        }
    }
}
