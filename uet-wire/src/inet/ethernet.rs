//! Ethernet II with at most one IEEE 802.1Q tag.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  destination address (6 B)                    |
//! +                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                               |                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//! |                    source address (6 B)                       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |      EtherType (0x8100?)      | PCP |D|         VID           |  <- tag only
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+     with 0x8100
//! |       payload EtherType       |  payload ...
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! The header is 14 bytes, or 18 with one 802.1Q tag. Exactly one tag is
//! understood: a second tag (a nested 0x8100, or a QinQ 0x88A8 service tag)
//! is reported as the payload EtherType ([`EtherType::Vlan`] or
//! [`EtherType::Unknown`]) and the frame walker treats it as not UET. AF_XDP
//! hands frames over without the FCS; the payload is everything after the
//! header, including any padding to the 60-byte minimum (the IP length fields
//! bound the real payload).

use core::fmt;

use crate::error::{Error, Layer, Result};
use crate::field::{set_u16, u16_at};
use crate::types::OutOfRange;

/// Length of an untagged header.
pub const HEADER_LEN: usize = 14;
/// Length of an 802.1Q tag.
pub const VLAN_TAG_LEN: usize = 4;
/// Length of a header with one 802.1Q tag.
pub const VLAN_HEADER_LEN: usize = HEADER_LEN + VLAN_TAG_LEN;

mod field {
    use crate::field::Field;
    pub(super) const DST: Field = 0..6;
    pub(super) const SRC: Field = 6..12;
    pub(super) const TYPE: usize = 12;
    pub(super) const TCI: usize = 14;
    pub(super) const INNER_TYPE: usize = 16;
}

/// A 48-bit MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// The broadcast address ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: Self = Self([0xff; 6]);

    /// Reads an address from the first six bytes of `b`, if there are six.
    #[must_use]
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        b.get(..6)?.try_into().ok().map(Self)
    }

    /// The six bytes.
    #[must_use]
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// Whether the group (multicast) bit is set.
    #[must_use]
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 1 != 0
    }

    /// Whether this is the broadcast address.
    #[must_use]
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// An EtherType.
///
/// `Unknown` holds values without a named variant; `EtherType::from(u16)`
/// always picks the named variant, so `Unknown(0x0800)` is never produced by
/// parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EtherType {
    /// 0x0800.
    Ipv4,
    /// 0x86DD.
    Ipv6,
    /// 0x8100, an 802.1Q tag.
    Vlan,
    /// Any other value.
    Unknown(u16),
}

impl EtherType {
    /// The 16-bit wire value.
    #[must_use]
    pub const fn code(self) -> u16 {
        match self {
            Self::Ipv4 => 0x0800,
            Self::Ipv6 => 0x86dd,
            Self::Vlan => 0x8100,
            Self::Unknown(v) => v,
        }
    }
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        match v {
            0x0800 => Self::Ipv4,
            0x86dd => Self::Ipv6,
            0x8100 => Self::Vlan,
            other => Self::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(t: EtherType) -> Self {
        t.code()
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ipv4 => f.write_str("IPv4"),
            Self::Ipv6 => f.write_str("IPv6"),
            Self::Vlan => f.write_str("802.1Q"),
            Self::Unknown(v) => write!(f, "{v:#06x}"),
        }
    }
}

/// The tag control information of an 802.1Q tag. Fields are checked at
/// construction: PCP is 3 bits, VID 12 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanTag {
    pcp: u8,
    dei: bool,
    vid: u16,
}

impl VlanTag {
    /// The largest VLAN ID (0xFFF; 0xFFF itself is reserved by 802.1Q but
    /// carried as is).
    pub const MAX_VID: u16 = 0x0fff;
    /// The largest priority code point.
    pub const MAX_PCP: u8 = 7;

    /// A tag; refuses a PCP above 7 or a VID above 4095.
    pub const fn new(pcp: u8, dei: bool, vid: u16) -> core::result::Result<Self, OutOfRange> {
        if pcp > Self::MAX_PCP {
            return Err(OutOfRange {
                what: "VlanTag.pcp",
                value: pcp as u64,
                max: Self::MAX_PCP as u64,
            });
        }
        if vid > Self::MAX_VID {
            return Err(OutOfRange {
                what: "VlanTag.vid",
                value: vid as u64,
                max: Self::MAX_VID as u64,
            });
        }
        Ok(Self { pcp, dei, vid })
    }

    /// Decodes the 16-bit TCI: PCP:3 | DEI:1 | VID:12.
    #[must_use]
    pub const fn from_tci(tci: u16) -> Self {
        Self {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }

    /// The 16-bit TCI.
    #[must_use]
    pub const fn tci(self) -> u16 {
        ((self.pcp as u16) << 13) | ((self.dei as u16) << 12) | self.vid
    }

    /// Priority code point (0-7).
    #[must_use]
    pub const fn pcp(self) -> u8 {
        self.pcp
    }

    /// Drop-eligible indicator.
    #[must_use]
    pub const fn dei(self) -> bool {
        self.dei
    }

    /// VLAN identifier (0-4095).
    #[must_use]
    pub const fn vid(self) -> u16 {
        self.vid
    }
}

impl fmt::Display for VlanTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "vlan={} pcp={} dei={}",
            self.vid,
            self.pcp,
            u8::from(self.dei)
        )
    }
}

/// A read/write view of an Ethernet II header (and its payload).
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

    /// Wraps a buffer after checking its length: afterwards no accessor can
    /// panic.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the buffer holds the whole header, tag included.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::truncated(Layer::Ethernet, HEADER_LEN, len));
        }
        if self.has_vlan() && len < VLAN_HEADER_LEN {
            return Err(Error::truncated(Layer::Ethernet, VLAN_HEADER_LEN, len));
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination address.
    pub fn dst_addr(&self) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        EthernetAddress(a)
    }

    /// Source address.
    pub fn src_addr(&self) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        EthernetAddress(a)
    }

    /// The EtherType at offset 12 (0x8100 when a tag follows).
    pub fn outer_ethertype(&self) -> EtherType {
        EtherType::from(u16_at(self.buffer.as_ref(), field::TYPE))
    }

    /// Whether an 802.1Q tag follows the addresses.
    pub fn has_vlan(&self) -> bool {
        self.outer_ethertype() == EtherType::Vlan
    }

    /// The 802.1Q tag, if any.
    pub fn vlan(&self) -> Option<VlanTag> {
        self.has_vlan()
            .then(|| VlanTag::from_tci(u16_at(self.buffer.as_ref(), field::TCI)))
    }

    /// Offset of the EtherType that names the payload (12, or 16 after a tag).
    pub fn ethertype_offset(&self) -> usize {
        if self.has_vlan() {
            field::INNER_TYPE
        } else {
            field::TYPE
        }
    }

    /// The EtherType of the payload.
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(u16_at(self.buffer.as_ref(), self.ethertype_offset()))
    }

    /// Header length: 14, or 18 with a tag.
    pub fn header_len(&self) -> usize {
        if self.has_vlan() {
            VLAN_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Everything after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.0);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.0);
    }

    /// Writes the tag (or its absence) and the payload EtherType. The buffer
    /// must hold 18 bytes when `vlan` is `Some`, 14 otherwise.
    pub fn set_vlan_and_ethertype(&mut self, vlan: Option<VlanTag>, ethertype: EtherType) {
        let b = self.buffer.as_mut();
        match vlan {
            Some(tag) => {
                set_u16(b, field::TYPE, EtherType::Vlan.code());
                set_u16(b, field::TCI, tag.tci());
                set_u16(b, field::INNER_TYPE, ethertype.code());
            }
            None => set_u16(b, field::TYPE, ethertype.code()),
        }
    }

    /// Everything after the header, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buffer.as_mut()[h..]
    }
}

/// A parsed Ethernet header.
///
/// With `vlan: None`, `ethertype` must not be [`EtherType::Vlan`]: that frame
/// would parse back as tagged. (With a tag, `ethertype: Vlan` is a nested
/// tag, carried as payload.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Destination address.
    pub dst: EthernetAddress,
    /// Source address.
    pub src: EthernetAddress,
    /// The 802.1Q tag, if any.
    pub vlan: Option<VlanTag>,
    /// The EtherType of the payload.
    pub ethertype: EtherType,
}

impl Repr {
    /// Parses a header. Nothing in an Ethernet header can be invalid once the
    /// length is checked.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        packet.check_len()?;
        Ok(Self {
            dst: packet.dst_addr(),
            src: packet.src_addr(),
            vlan: packet.vlan(),
            ethertype: packet.ethertype(),
        })
    }

    /// Bytes `emit` writes: 14, or 18 with a tag.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        if self.vlan.is_some() {
            VLAN_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Writes the header into a buffer of at least `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_dst_addr(self.dst);
        packet.set_src_addr(self.src);
        packet.set_vlan_and_ethertype(self.vlan, self.ethertype);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ethernet {} > {}", self.src, self.dst)?;
        if let Some(tag) = self.vlan {
            write!(f, " {tag}")?;
        }
        write!(f, " type={}", self.ethertype)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use proptest::prelude::*;

    const DST: EthernetAddress = EthernetAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x02]);
    const SRC: EthernetAddress = EthernetAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x01]);

    // Golden vector: untagged IPv4 frame header.
    const UNTAGGED: [u8; 14] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // src
        0x08, 0x00, // IPv4
    ];

    // Golden vector: 802.1Q tag PCP 5, DEI 0, VID 100 (TCI 0xa064), IPv6.
    const TAGGED: [u8; 18] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // src
        0x81, 0x00, 0xa0, 0x64, // 802.1Q, TCI
        0x86, 0xdd, // IPv6
    ];

    #[test]
    fn golden_untagged() {
        let p = Packet::new_checked(&UNTAGGED[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr {
                dst: DST,
                src: SRC,
                vlan: None,
                ethertype: EtherType::Ipv4
            }
        );
        assert_eq!(p.header_len(), 14);
        assert_eq!(p.payload(), &[] as &[u8]);
        let mut b = [0u8; 14];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, UNTAGGED);
        assert_eq!(
            r.to_string(),
            "Ethernet 02:00:00:00:00:01 > 02:00:00:00:00:02 type=IPv4"
        );
    }

    #[test]
    fn golden_tagged() {
        let p = Packet::new_checked(&TAGGED[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        let tag = VlanTag::new(5, false, 100).unwrap();
        assert_eq!(tag.tci(), 0xa064);
        assert_eq!(
            r,
            Repr {
                dst: DST,
                src: SRC,
                vlan: Some(tag),
                ethertype: EtherType::Ipv6
            }
        );
        assert_eq!(p.header_len(), 18);
        assert_eq!(p.ethertype_offset(), 16);
        let mut b = [0u8; 18];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, TAGGED);
        assert_eq!(
            r.to_string(),
            "Ethernet 02:00:00:00:00:01 > 02:00:00:00:00:02 vlan=100 pcp=5 dei=0 type=IPv6"
        );
    }

    #[test]
    fn truncation_and_second_tags() {
        assert_eq!(
            Packet::new_checked(&UNTAGGED[..13]).unwrap_err(),
            Error::truncated(Layer::Ethernet, 14, 13)
        );
        let e = Packet::new_checked(&TAGGED[..17]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Truncated { need: 18 });
        // QinQ: the 0x88a8 service tag is an unknown payload type.
        let mut qinq = TAGGED;
        qinq[12] = 0x88;
        qinq[13] = 0xa8;
        let r = Repr::parse(&Packet::new_checked(&qinq[..]).unwrap()).unwrap();
        assert_eq!(r.vlan, None);
        assert_eq!(r.ethertype, EtherType::Unknown(0x88a8));
        // A nested 802.1Q tag is reported as the payload type.
        let mut nested = TAGGED;
        nested[16] = 0x81;
        nested[17] = 0x00;
        let r = Repr::parse(&Packet::new_checked(&nested[..]).unwrap()).unwrap();
        assert_eq!(r.ethertype, EtherType::Vlan);
    }

    #[test]
    fn vlan_tag_is_checked() {
        assert!(VlanTag::new(8, false, 1).is_err());
        assert!(VlanTag::new(7, true, 4096).is_err());
        let t = VlanTag::new(7, true, 4095).unwrap();
        assert_eq!(t.tci(), 0xffff);
        assert_eq!(VlanTag::from_tci(0xffff), t);
    }

    pub(crate) fn arb_repr() -> impl Strategy<Value = Repr> {
        (
            any::<[u8; 6]>(),
            any::<[u8; 6]>(),
            proptest::option::of(any::<u16>().prop_map(VlanTag::from_tci)),
            any::<u16>(),
        )
            .prop_map(|(d, s, vlan, t)| {
                let mut ethertype = EtherType::from(t);
                if vlan.is_none() && ethertype == EtherType::Vlan {
                    ethertype = EtherType::Ipv4;
                }
                Repr {
                    dst: EthernetAddress(d),
                    src: EthernetAddress(s),
                    vlan,
                    ethertype,
                }
            })
    }

    proptest! {
        #[test]
        fn round_trip(r in arb_repr()) {
            let mut b = vec![0u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut b[..]));
            let p = Packet::new_checked(&b[..]).unwrap();
            prop_assert_eq!(p.header_len(), r.buffer_len());
            prop_assert_eq!(Repr::parse(&p).unwrap(), r);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = Repr::parse(&p).map(|r| r.to_string());
                let _ = p.payload();
            }
        }
    }
}
