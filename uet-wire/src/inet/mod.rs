//! Ethernet, IPv4, IPv6 and UDP framing (AF_XDP hands us raw frames, so the
//! daemon builds and checks L2-L4 itself; `design.md` §4-§5).
//!
//! Each protocol has its own module with a `Packet` view and a `Repr`, in
//! the style of `pds::prologue` (smoltcp's wire layer): `new_checked` does
//! every length check once, accessors cannot panic afterwards, and `emit`
//! into a buffer of `buffer_len()` bytes cannot panic either. The names are
//! re-exported here with protocol prefixes (`Ipv4Repr`, `UdpPacket`, …).
//!
//! `IpRepr` joins the two IP versions for code that handles both. The UET
//! encapsulation on top (UDP port, entropy header, CRC32C trailer) and the
//! whole-frame builder and parser are in [`crate::encap`].

pub mod checksum;
pub mod ethernet;

pub use ethernet::{
    EtherType, EthernetAddress, Packet as EthernetPacket, Repr as EthernetRepr, VlanTag,
};
