//! Ethernet, IPv4, IPv6 and UDP framing (AF_XDP hands us raw frames, so the
//! daemon builds and checks L2-L4 itself; `docs/architecture.md` §4-§5).
//!
//! Each protocol has its own module with a `Packet` view and a `Repr`, in
//! the style of `pds::prologue` (smoltcp's wire layer): `new_checked` does
//! every length check once, accessors cannot panic afterwards, and `emit`
//! into a buffer of `buffer_len()` bytes cannot panic either. The names are
//! re-exported here with protocol prefixes (`Ipv4Repr`, `UdpPacket`, …).
//!
//! [`IpRepr`] joins the two IP versions for code that handles both. The UET
//! encapsulation on top (UDP port, entropy header, CRC32C trailer) and the
//! whole-frame builder and parser are in [`crate::encap`].

pub mod checksum;
pub mod ethernet;
pub mod ipv4;
pub mod ipv6;
pub mod udp;

use core::fmt;
use core::net::IpAddr;

pub use ethernet::{
    EtherType, EthernetAddress, Packet as EthernetPacket, Repr as EthernetRepr, VlanTag,
};
pub use ipv4::{Packet as Ipv4Packet, Repr as Ipv4Repr};
pub use ipv6::{FlowLabel, Packet as Ipv6Packet, Repr as Ipv6Repr};
pub use udp::{Packet as UdpPacket, Repr as UdpRepr};

use crate::types::{Dscp, Ecn};

/// An IPv4 or IPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpRepr {
    /// IPv4.
    V4(Ipv4Repr),
    /// IPv6.
    V6(Ipv6Repr),
}

impl IpRepr {
    /// The IP header of a UDP datagram from `src` to `dst` with `dscp` and
    /// `ecn`: DF set, TTL / hop limit 64, lengths and checksum left to
    /// [`crate::encap::emit_frame`]. `None` when the families differ.
    #[must_use]
    pub fn udp(src: IpAddr, dst: IpAddr, dscp: Dscp, ecn: Ecn) -> Option<Self> {
        Some(match (src, dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => Self::V4(Ipv4Repr {
                src,
                dst,
                protocol: 17,
                payload_len: 0,
                ttl: 64,
                dscp,
                ecn,
                ident: 0,
                dont_frag: true,
            }),
            (IpAddr::V6(src), IpAddr::V6(dst)) => Self::V6(Ipv6Repr {
                src,
                dst,
                next_header: 17,
                payload_len: 0,
                hop_limit: 64,
                dscp,
                ecn,
                flow_label: Default::default(),
            }),
            _ => return None,
        })
    }

    /// Source address.
    #[must_use]
    pub fn src_addr(&self) -> IpAddr {
        match self {
            Self::V4(r) => IpAddr::V4(r.src),
            Self::V6(r) => IpAddr::V6(r.src),
        }
    }

    /// Destination address.
    #[must_use]
    pub fn dst_addr(&self) -> IpAddr {
        match self {
            Self::V4(r) => IpAddr::V4(r.dst),
            Self::V6(r) => IpAddr::V6(r.dst),
        }
    }

    /// The protocol (IPv4) or next header (IPv6).
    #[must_use]
    pub const fn protocol(&self) -> u8 {
        match self {
            Self::V4(r) => r.protocol,
            Self::V6(r) => r.next_header,
        }
    }

    /// Payload length in bytes.
    #[must_use]
    pub const fn payload_len(&self) -> usize {
        match self {
            Self::V4(r) => r.payload_len,
            Self::V6(r) => r.payload_len,
        }
    }

    /// DSCP.
    #[must_use]
    pub const fn dscp(&self) -> Dscp {
        match self {
            Self::V4(r) => r.dscp,
            Self::V6(r) => r.dscp,
        }
    }

    /// ECN.
    #[must_use]
    pub const fn ecn(&self) -> Ecn {
        match self {
            Self::V4(r) => r.ecn,
            Self::V6(r) => r.ecn,
        }
    }

    /// The EtherType that carries this header.
    #[must_use]
    pub const fn ethertype(&self) -> EtherType {
        match self {
            Self::V4(_) => EtherType::Ipv4,
            Self::V6(_) => EtherType::Ipv6,
        }
    }

    /// Length of the header `emit` writes (20 or 40).
    #[must_use]
    pub const fn header_len(&self) -> usize {
        match self {
            Self::V4(_) => ipv4::HEADER_LEN,
            Self::V6(_) => ipv6::HEADER_LEN,
        }
    }

    /// The largest payload the header can describe.
    #[must_use]
    pub const fn max_payload_len(&self) -> usize {
        match self {
            Self::V4(_) => ipv4::MAX_PAYLOAD_LEN,
            Self::V6(_) => ipv6::MAX_PAYLOAD_LEN,
        }
    }

    /// The same header with another protocol / next header.
    #[must_use]
    pub const fn with_protocol(self, protocol: u8) -> Self {
        match self {
            Self::V4(r) => Self::V4(Ipv4Repr { protocol, ..r }),
            Self::V6(r) => Self::V6(Ipv6Repr {
                next_header: protocol,
                ..r
            }),
        }
    }

    /// The same header with another payload length.
    #[must_use]
    pub const fn with_payload_len(self, payload_len: usize) -> Self {
        match self {
            Self::V4(r) => Self::V4(Ipv4Repr { payload_len, ..r }),
            Self::V6(r) => Self::V6(Ipv6Repr { payload_len, ..r }),
        }
    }

    /// Writes the header (with its checksum for IPv4) at the start of `buf`,
    /// which must hold `header_len()` bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        match self {
            Self::V4(r) => r.emit(&mut Ipv4Packet::new_unchecked(buf)),
            Self::V6(r) => r.emit(&mut Ipv6Packet::new_unchecked(buf)),
        }
    }
}

impl From<Ipv4Repr> for IpRepr {
    fn from(r: Ipv4Repr) -> Self {
        Self::V4(r)
    }
}

impl From<Ipv6Repr> for IpRepr {
    fn from(r: Ipv6Repr) -> Self {
        Self::V6(r)
    }
}

impl fmt::Display for IpRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::V4(r) => fmt::Display::fmt(r, f),
            Self::V6(r) => fmt::Display::fmt(r, f),
        }
    }
}
