//! UET encapsulation (`docs/protocol-notes.md` §1): the UDP port, the native-IP
//! entropy header, the CRC32C trailer, and the frame builder and L2-L4 parser
//! built from them.
//!
//! A UET frame is one of
//!
//! ```text
//! Ethernet [802.1Q] | IPv4/IPv6 | UDP (src port = entropy, dst port 4793) | UET bytes | [CRC32C]
//! Ethernet [802.1Q] | IPv4/IPv6 (protocol 253) | entropy header (4 B)     | UET bytes | [CRC32C]
//! ```
//!
//! where the UET bytes are the TSS/PDS/SES headers and payload. The trailer
//! lies inside the IP packet and, with UDP, inside the UDP datagram: IPv4
//! total length, IPv6 payload length and UDP length all count it (REFPROV:
//! "for IPv4, the total length already includes the length of the CRC").
//!
//! ## Open points and how this module settles them
//!
//! * **UDP port** (§9 item 1): 4793 by default, configurable
//!   ([`EncapConfig::udp_port`]).
//! * **Native-IP protocol**: 253, REFPROV's experimental value; the spec
//!   leaves it to deployment \[I]. Configurable ([`EncapConfig::ip_protocol`]).
//! * **CRC trailer presence** (§9 item 12): nothing in a 1.0 header signals
//!   it, so it is a configuration choice ([`EncapConfig::crc_trailer`]), never
//!   guessed from the bytes.
//! * **CRC coverage** \[C, REFPROV `uet_pds_sec_tx_pkt`, `uet_rudi_send`,
//!   `uet_uud_send`, the impairment shim]: CRC-32C from the IP *source
//!   address* (IPv4 offset 12, IPv6 offset 8) to the end of the UET bytes,
//!   trailer excluded. So the addresses, the UDP header (or entropy header)
//!   and every UET byte are covered, while the fields a switch may rewrite —
//!   DSCP/ECN, TTL/hop limit and the IPv4 header checksum — lie before the
//!   covered range: marking CE does not invalidate the trailer.
//! * **CRC byte order** \[C, REFPROV `util/crc32c.c`]: REFPROV's
//!   `crc32c_finish()` returns `htonl(~crc)` and the send path copies that
//!   value into the packet as it is, so the trailer is the final CRC-32C in
//!   **network order** (most significant byte first) on every host
//!   (`docs/protocol-notes.md` §1). It is written and checked that way here.
//! * **CRC parameters** \[I]: REFPROV's `crc32c.h` was not readable; the
//!   standard CRC-32C (Castagnoli, reflected, init and final XOR 0xFFFFFFFF,
//!   check value 0xE3069283) is assumed.
//! * **UDP checksum** \[I]: with the trailer configured the UDP checksum is
//!   sent as **zero** — the CRC covers the UDP header, so a UDP checksum
//!   (which covers the trailer) and the CRC cannot both be computed over each
//!   other; UET 1.0.3 §3.5.10.1, as cited by a public VPP UET plugin, even
//!   says the UDP checksum MUST be zero on send. Without the trailer the
//!   builder computes a real UDP checksum, the only end-to-end check left —
//!   except for a datagram whose UET bytes start with a TSS header, sent
//!   over IPv4 with checksum zero too: its ICV authenticates the UET bytes,
//!   and the addresses and ports are in its AAD, so the checksum would only
//!   repeat a weaker check over the same bytes (IPv6 requires one, and gets
//!   it). The parser verifies any non-zero UDP checksum and accepts zero.
//! * **Ethernet minimum size**: the builder does not pad to 60 bytes (the
//!   NIC or driver does); the parser ignores padding after the IP packet.

use core::fmt;
use core::net::IpAddr;
use core::ops::Range;

use crate::error::{Error, ErrorKind, Layer, Result};
use crate::inet::{
    EthernetPacket, EthernetRepr, IpRepr, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, UdpPacket,
    UdpRepr, checksum, ethernet::EtherType, ipv4, ipv6, udp,
};
use crate::types::{Dscp, EntropyValue};

/// UDP destination port of UET (`docs/protocol-notes.md` §1: WS, XDP2; REFPROV's
/// configurable default is 49150).
pub const UET_UDP_PORT: u16 = 4793;
/// IP protocol number of UET directly over IP: REFPROV's `UET_IPPROTO`, an
/// experimental value (RFC 3692); the spec leaves it to deployment \[I].
pub const UET_IP_PROTOCOL: u8 = 253;
/// Length of the CRC32C trailer.
pub const CRC_TRAILER_LEN: usize = 4;
/// Length of the native-IP entropy header.
pub const ENTROPY_HEADER_LEN: usize = entropy::HEADER_LEN;
/// What `nominal_pktsize` adds to the transport packet size.
pub const NOMINAL_OVERHEAD: usize = 40;

/// The CRC-32C (Castagnoli, the iSCSI parameters) of `bytes`. The
/// `crc32c` crate uses the CPU's CRC32 instruction where there is one
/// (SSE 4.2, ARMv8), a table otherwise: a 1 GiB write checks and computes
/// every byte once on each side, and the table version halved the write
/// goodput (BENCHMARKS.md "CRC32C trailer").
#[must_use]
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// The nominal packet size all congestion-control byte counts use
/// (`docs/protocol-notes.md` §1, SPEC-TR §3.6.12): `transport_pktsize + 40`,
/// where `transport_pktsize` is the UDP length when UDP is used, otherwise
/// the size from the entropy header to the end of the trailer. It must not
/// change in flight, which is why it ignores the L2/L3 headers actually used.
#[must_use]
pub const fn nominal_pktsize(transport_pktsize: usize) -> usize {
    transport_pktsize + NOMINAL_OVERHEAD
}

/// How UET is encapsulated on this deployment. Both ends must agree; nothing
/// on the wire says which choice was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EncapConfig {
    /// UDP destination port of UET traffic (default 4793).
    pub udp_port: u16,
    /// IP protocol number of UET directly over IP (default 253). Must not be
    /// 17: the parser reads protocol 17 as UDP first.
    pub ip_protocol: u8,
    /// Whether every UET packet without TSS ends in a CRC32C trailer (default
    /// false). The presence of the CRC is a configuration choice, not guessed.
    /// A packet with TSS never has one (its ICV takes the trailer's place):
    /// the parser does not look for it there, and a TSS frame is built with
    /// `crc_trailer: false` and the ICV counted in the UET bytes.
    pub crc_trailer: bool,
    /// DSCP a switch writes into a packet it trimmed (`DSCP_TRIMMED`, §7;
    /// default 16, the ASTERIA example value). `None`: trimming not deployed.
    pub dscp_trimmed: Option<Dscp>,
    /// DSCP of a packet trimmed at the last hop (`DSCP_TRIMMED_LASTHOP`;
    /// default 18).
    pub dscp_trimmed_lasthop: Option<Dscp>,
}

impl Default for EncapConfig {
    fn default() -> Self {
        Self {
            udp_port: UET_UDP_PORT,
            ip_protocol: UET_IP_PROTOCOL,
            crc_trailer: false,
            dscp_trimmed: Some(Dscp::from_masked(16)),
            dscp_trimmed_lasthop: Some(Dscp::from_masked(18)),
        }
    }
}

/// Where a packet was trimmed (spec §7), as its DSCP tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trim {
    /// Trimmed by a switch that is not the last hop (NACK `UET_TRIMMED`).
    Trimmed,
    /// Trimmed at the last hop (NACK `UET_TRIMMED_LASTHOP`).
    LastHop,
}

impl EncapConfig {
    /// Whether `dscp` marks a trimmed packet, and where it was trimmed.
    #[must_use]
    pub fn trim_of(&self, dscp: Dscp) -> Option<Trim> {
        if self.dscp_trimmed_lasthop == Some(dscp) {
            Some(Trim::LastHop)
        } else if self.dscp_trimmed == Some(dscp) {
            Some(Trim::Trimmed)
        } else {
            None
        }
    }
}

impl EncapConfig {
    /// Trailer bytes per packet (0 or 4).
    #[must_use]
    pub const fn trailer_len(&self) -> usize {
        if self.crc_trailer { CRC_TRAILER_LEN } else { 0 }
    }
}

/// The native-IP entropy header.
///
/// ```text
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |            entropy            |           reserved            |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// ```
///
/// \[C×3] REFPROV `struct uet_entropy`, XDP2 `uet_entropy_hdr`, WS. The
/// reserved half is written as zero and ignored on parse.
pub mod entropy {
    use core::fmt;

    use crate::error::{Error, Layer, Result};
    use crate::field::{set_u16, u16_at};
    use crate::types::EntropyValue;

    /// Length of the header.
    pub const HEADER_LEN: usize = 4;

    mod field {
        pub(super) const ENTROPY: usize = 0;
        pub(super) const RESERVED: usize = 2;
    }

    /// A read/write view of an entropy header.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Packet<T: AsRef<[u8]>> {
        buffer: T,
    }

    impl<T: AsRef<[u8]>> Packet<T> {
        /// Wraps a buffer without checking it (for emitting into a buffer of
        /// the right size).
        pub const fn new_unchecked(buffer: T) -> Self {
            Self { buffer }
        }

        /// Wraps a buffer after checking its length: afterwards no accessor
        /// can panic.
        pub fn new_checked(buffer: T) -> Result<Self> {
            let p = Self::new_unchecked(buffer);
            p.check_len()?;
            Ok(p)
        }

        /// Checks that the buffer holds the whole header.
        pub fn check_len(&self) -> Result<()> {
            let len = self.buffer.as_ref().len();
            if len < HEADER_LEN {
                return Err(Error::truncated(Layer::Entropy, HEADER_LEN, len));
            }
            Ok(())
        }

        /// The underlying buffer.
        pub fn into_inner(self) -> T {
            self.buffer
        }

        /// The entropy value.
        pub fn entropy(&self) -> EntropyValue {
            EntropyValue::from_masked(u16_at(self.buffer.as_ref(), field::ENTROPY))
        }

        /// The reserved half (zero when sent by us).
        pub fn reserved(&self) -> u16 {
            u16_at(self.buffer.as_ref(), field::RESERVED)
        }

        /// What follows the header (the UET bytes).
        pub fn payload(&self) -> &[u8] {
            &self.buffer.as_ref()[HEADER_LEN..]
        }
    }

    impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
        /// Sets the entropy value.
        pub fn set_entropy(&mut self, v: EntropyValue) {
            set_u16(self.buffer.as_mut(), field::ENTROPY, v.get());
        }

        /// Sets the reserved half.
        pub fn set_reserved(&mut self, v: u16) {
            set_u16(self.buffer.as_mut(), field::RESERVED, v);
        }
    }

    /// A parsed entropy header.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Repr {
        /// The entropy value.
        pub entropy: EntropyValue,
    }

    impl Repr {
        /// Parses a header; the reserved half is ignored.
        pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
            packet.check_len()?;
            Ok(Self {
                entropy: packet.entropy(),
            })
        }

        /// Bytes `emit` writes.
        #[must_use]
        pub const fn buffer_len(&self) -> usize {
            HEADER_LEN
        }

        /// Writes the header, reserved half zero.
        pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
            packet.set_entropy(self.entropy);
            packet.set_reserved(0);
        }
    }

    impl fmt::Display for Repr {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "UET entropy {:#06x}", self.entropy.get())
        }
    }
}

pub use entropy::{Packet as EntropyPacket, Repr as EntropyRepr};

/// The CRC range of an IP packet (header, payload, trailer slot): from the
/// source address to the trailer.
fn crc_coverage(ip_packet: &[u8]) -> Result<Range<usize>> {
    let len = ip_packet.len();
    let Some(&first) = ip_packet.first() else {
        return Err(Error::truncated(Layer::Trailer, 1, 0));
    };
    let (start, min) = match first >> 4 {
        4 => (ipv4::SRC_ADDR_OFFSET, ipv4::HEADER_LEN),
        6 => (ipv6::SRC_ADDR_OFFSET, ipv6::HEADER_LEN),
        _ => return Err(Error::new(Layer::Trailer, ErrorKind::BadVersion, 0)),
    };
    let need = min + CRC_TRAILER_LEN;
    if len < need {
        return Err(Error::truncated(Layer::Trailer, need, len));
    }
    Ok(start..len - CRC_TRAILER_LEN)
}

/// The CRC32C trailer value of an IP packet, computed over the REFPROV
/// coverage (see the module docs). `ip_packet` is the whole IP packet,
/// header through trailer; the last 4 bytes (the trailer slot) are not read.
/// `None` when the bytes do not start with an IPv4/IPv6 version nibble or are
/// too short to hold a header and a trailer.
#[must_use]
pub fn crc32c_trailer(ip_packet: &[u8]) -> Option<u32> {
    let r = crc_coverage(ip_packet).ok()?;
    ip_packet.get(r).map(crc32c)
}

/// The CRC32C trailer value of a packet from `src` to `dst` whose IP payload
/// (UDP header or entropy header, UET bytes; trailer excluded) is the
/// concatenation of `l4`: the
/// same value as [`crc32c_trailer`] for an IPv4 header without options or an
/// IPv6 header without extension headers, whose covered range is exactly
/// the two addresses followed by the payload (`docs/protocol-notes.md` §1). For
/// socket backends, which see the addresses and the payload but not the IP
/// header. `None` when the addresses differ in family.
#[must_use]
pub fn crc32c_of_payload(src: IpAddr, dst: IpAddr, l4: &[&[u8]]) -> Option<u32> {
    let mut c = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            crc32c::crc32c_append(crc32c::crc32c(&s.octets()), &d.octets())
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            crc32c::crc32c_append(crc32c::crc32c(&s.octets()), &d.octets())
        }
        _ => return None,
    };
    for part in l4 {
        c = crc32c::crc32c_append(c, part);
    }
    Some(c)
}

/// Computes the trailer of `ip_packet` (header through trailer slot) and
/// writes it in network order (big-endian, `docs/protocol-notes.md` §1) into the
/// last 4 bytes. Returns the value.
pub fn append_crc_trailer(ip_packet: &mut [u8]) -> Result<u32> {
    let r = crc_coverage(ip_packet)?;
    let end = r.end;
    let v = crc32c(&ip_packet[r]);
    ip_packet[end..].copy_from_slice(&v.to_be_bytes());
    Ok(v)
}

/// Checks the trailer of `ip_packet` (header through trailer), read in
/// network order (`docs/protocol-notes.md` §1). Returns the trailer value, or `Error { layer: Trailer, kind: BadChecksum, offset }`
/// with the offset of the trailer within `ip_packet` when it does not match.
///
/// # Fuzzing
/// Under `cfg(fuzzing)` a mismatch is accepted, so the fuzzer reaches the
/// UET headers.
pub fn verify_crc_trailer(ip_packet: &[u8]) -> Result<u32> {
    let r = crc_coverage(ip_packet)?;
    let end = r.end;
    let mut stored = [0u8; CRC_TRAILER_LEN];
    stored.copy_from_slice(&ip_packet[end..]);
    let stored = u32::from_be_bytes(stored);
    if !cfg!(fuzzing) && crc32c(&ip_packet[r]) != stored {
        return Err(Error::new(Layer::Trailer, ErrorKind::BadChecksum, end));
    }
    Ok(stored)
}

/// The header right after IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// UET over UDP: the source port carries the entropy value.
    Udp {
        /// Source port = entropy value.
        src_port: u16,
        /// Destination port (the configured UET port).
        dst_port: u16,
    },
    /// UET directly over IP: the 4-byte entropy header.
    Entropy(EntropyValue),
}

impl Transport {
    /// UDP to the configured port, the entropy value in the source port.
    #[must_use]
    pub const fn udp(entropy: EntropyValue, config: &EncapConfig) -> Self {
        Self::Udp {
            src_port: entropy.get(),
            dst_port: config.udp_port,
        }
    }

    /// The entropy value carried (UDP source port or entropy header).
    #[must_use]
    pub const fn entropy(&self) -> EntropyValue {
        match self {
            Self::Udp { src_port, .. } => EntropyValue::from_masked(*src_port),
            Self::Entropy(e) => *e,
        }
    }

    /// Header length (8 or 4).
    #[must_use]
    pub const fn header_len(&self) -> usize {
        match self {
            Self::Udp { .. } => udp::HEADER_LEN,
            Self::Entropy(_) => entropy::HEADER_LEN,
        }
    }

    /// IP protocol that carries this header (17, or the configured one).
    #[must_use]
    pub const fn ip_protocol(&self, config: &EncapConfig) -> u8 {
        match self {
            Self::Udp { .. } => ipv4::PROTOCOL_UDP,
            Self::Entropy(_) => config.ip_protocol,
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Udp { src_port, dst_port } => write!(f, "UDP {src_port} > {dst_port}"),
            Self::Entropy(e) => write!(f, "UET entropy {:#06x}", e.get()),
        }
    }
}

/// The transport packet size of a packet carrying `uet_len` UET bytes:
/// the UDP length, or the entropy header through the trailer
/// (`docs/protocol-notes.md` §1). Feed it to [`nominal_pktsize`].
#[must_use]
pub const fn transport_pktsize(
    transport: &Transport,
    config: &EncapConfig,
    uet_len: usize,
) -> usize {
    transport.header_len() + uet_len + config.trailer_len()
}

/// The L2-L4 headers of a parsed UET frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Headers {
    /// Ethernet header (its `ethertype` is the IP version's).
    pub ethernet: EthernetRepr,
    /// IP header, with DSCP and ECN.
    pub ip: IpRepr,
    /// UDP ports or the entropy header.
    pub transport: Transport,
    /// The entropy value (UDP source port or entropy header).
    pub entropy: EntropyValue,
    /// The CRC32C trailer (verified) when the configuration has one.
    pub trailer: Option<u32>,
    /// The transport packet size (UDP length, or entropy header through
    /// trailer); see [`nominal_pktsize`]. For a trimmed packet this is the
    /// size before trimming when UDP still says so.
    pub transport_pktsize: usize,
    /// The packet was trimmed by a switch (recognised by DSCP): its UDP
    /// checksum and CRC trailer are not checked, and the UET bytes end
    /// where the IP packet ends.
    pub trimmed: Option<Trim>,
}

impl Headers {
    /// `nominal_pktsize(self.transport_pktsize)`.
    #[must_use]
    pub const fn nominal_pktsize(&self) -> usize {
        nominal_pktsize(self.transport_pktsize)
    }
}

impl fmt::Display for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} | {} | {}", self.ethernet, self.ip, self.transport)?;
        if let Some(crc) = self.trailer {
            write!(f, " | crc32c={crc:#010x}")?;
        }
        Ok(())
    }
}

/// Length of the frame [`emit_frame`] writes for `uet_len` UET bytes:
/// Ethernet (14/18) + IP (20/40) + UDP (8) or entropy (4) + `uet_len` +
/// trailer (0/4).
#[must_use]
pub fn frame_len(
    ethernet: &EthernetRepr,
    ip: &IpRepr,
    transport: &Transport,
    config: &EncapConfig,
    uet_len: usize,
) -> usize {
    ethernet.buffer_len() + ip.header_len() + transport_pktsize(transport, config, uet_len)
}

/// Builds a whole UET frame at the start of `buf` and returns its length
/// ([`frame_len`]).
///
/// Writes, in order: the Ethernet header (its `ethertype` is set from the IP
/// version), the IP header (its protocol / next header is set from
/// `transport` and `config`, its payload length computed, the IPv4 checksum
/// filled), the UDP header (checksum still zero) or the entropy header; then
/// calls `write_uet` on exactly `uet_len` bytes; then, **after** the UET
/// bytes are in place, the CRC trailer (if configured) and the UDP checksum
/// (zero when the trailer is configured, and over IPv4 when the UET bytes
/// start with a TSS header; see the module docs). The
/// `ethertype`, `protocol`/`next_header` and `payload_len` values of the
/// given reprs are ignored.
///
/// Errors (offsets relative to the frame start): `buf` shorter than the
/// frame — `Ethernet`, `Truncated { need: frame_len }`; a packet too long for
/// the IP length field — `Ipv4`/`Ipv6`, `BadLength` at the length field;
/// `Transport::Entropy` with `config.ip_protocol == 17` — `Entropy`,
/// `OutOfRange` at the protocol field.
pub fn emit_frame(
    ethernet: &EthernetRepr,
    ip: &IpRepr,
    transport: &Transport,
    config: &EncapConfig,
    uet_len: usize,
    buf: &mut [u8],
    write_uet: impl FnOnce(&mut [u8]),
) -> Result<usize> {
    emit_frame_with(
        ethernet,
        ip,
        transport,
        config,
        uet_len,
        buf,
        write_uet,
        checksum::data,
    )
}

/// [`emit_frame`], summing the UDP datagram for its checksum with `sum`
/// (a build of [`checksum::data`] for the running CPU's vectors, say).
#[allow(clippy::too_many_arguments)]
pub fn emit_frame_with(
    ethernet: &EthernetRepr,
    ip: &IpRepr,
    transport: &Transport,
    config: &EncapConfig,
    uet_len: usize,
    buf: &mut [u8],
    write_uet: impl FnOnce(&mut [u8]),
    sum: checksum::SumFn,
) -> Result<usize> {
    let l3 = ethernet.buffer_len();
    let l4 = l3 + ip.header_len();
    let l4_len = transport_pktsize(transport, config, uet_len);
    let total = l4 + l4_len;
    let (ip_layer, len_off, proto_off) = match ip {
        IpRepr::V4(_) => (Layer::Ipv4, 2, ipv4::PROTOCOL_OFFSET),
        IpRepr::V6(_) => (Layer::Ipv6, 4, ipv6::NEXT_HEADER_OFFSET),
    };
    if l4_len > ip.max_payload_len() {
        return Err(Error::new(ip_layer, ErrorKind::BadLength, l3 + len_off));
    }
    let protocol = transport.ip_protocol(config);
    if matches!(transport, Transport::Entropy(_)) && protocol == ipv4::PROTOCOL_UDP {
        return Err(Error::new(
            Layer::Entropy,
            ErrorKind::OutOfRange,
            l3 + proto_off,
        ));
    }
    let Some(frame) = buf.get_mut(..total) else {
        return Err(Error::truncated(Layer::Ethernet, total, buf.len()));
    };

    let eth = EthernetRepr {
        ethertype: ip.ethertype(),
        ..*ethernet
    };
    eth.emit(&mut EthernetPacket::new_unchecked(&mut frame[..l3]));
    let ip = ip.with_protocol(protocol).with_payload_len(l4_len);
    ip.emit(&mut frame[l3..l4]);

    let uet_start = l4 + transport.header_len();
    let uet_end = uet_start + uet_len;
    match transport {
        Transport::Udp { src_port, dst_port } => {
            let r = UdpRepr {
                src_port: *src_port,
                dst_port: *dst_port,
                payload_len: l4_len - udp::HEADER_LEN,
            };
            r.emit_header(&mut UdpPacket::new_unchecked(&mut frame[l4..]), 0);
        }
        Transport::Entropy(e) => {
            EntropyRepr { entropy: *e }
                .emit(&mut EntropyPacket::new_unchecked(&mut frame[l4..uet_start]));
        }
    }

    write_uet(&mut frame[uet_start..uet_end]);

    if config.crc_trailer {
        append_crc_trailer(&mut frame[l3..]).map_err(|e| e.at(l3))?;
    } else if matches!(transport, Transport::Udp { .. })
        && !(matches!(ip, IpRepr::V4(_)) && crate::is_tss(&frame[uet_start..uet_end]))
    {
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        UdpPacket::new_unchecked(&mut frame[l4..]).fill_checksum_with(src, dst, sum);
    }
    Ok(total)
}

/// Parses and checks the Ethernet, IP and UDP/entropy headers of a UET frame
/// and, when configured, its CRC trailer. Returns the headers and the byte
/// range of the UET part (after UDP/entropy, before the trailer) for the
/// frame walker.
///
/// Checked: every length; the IPv4 header checksum; no IP fragments; the
/// UDP checksum when non-zero; the trailer. Errors carry offsets relative to
/// the frame start. A frame that is well formed but not UET — another
/// EtherType (including a second VLAN tag), another IP protocol / next header
/// (including IPv6 extension headers), or a UDP destination port other than
/// the configured one — is `ErrorKind::NotUet`, pointing at that field (in
/// layer `Ethernet`, `Ipv4`/`Ipv6` or `Udp`). Bytes after the IP packet
/// (Ethernet padding) and after the UDP datagram are ignored.
pub fn parse_l2_l4(buf: &[u8], config: &EncapConfig) -> Result<(Headers, Range<usize>)> {
    parse_l2_l4_with(buf, config, checksum::data)
}

/// [`parse_l2_l4`], summing the UDP datagram to verify its checksum with
/// `sum`.
pub fn parse_l2_l4_with(
    buf: &[u8],
    config: &EncapConfig,
    sum: checksum::SumFn,
) -> Result<(Headers, Range<usize>)> {
    let eth = EthernetPacket::new_checked(buf)?;
    let ethernet = EthernetRepr::parse(&eth)?;
    let l3 = eth.header_len();
    let at = |base: usize| move |e: Error| e.at(base);

    let (ip, ip_len, l4, proto_off) = match ethernet.ethertype {
        EtherType::Ipv4 => {
            let p = Ipv4Packet::new_checked(&buf[l3..]).map_err(at(l3))?;
            let r = Ipv4Repr::parse(&p).map_err(at(l3))?;
            (
                IpRepr::V4(r),
                p.packet().len(),
                l3 + p.header_len(),
                ipv4::PROTOCOL_OFFSET,
            )
        }
        EtherType::Ipv6 => {
            let p = Ipv6Packet::new_checked(&buf[l3..]).map_err(at(l3))?;
            let r = Ipv6Repr::parse(&p).map_err(at(l3))?;
            (
                IpRepr::V6(r),
                p.packet().len(),
                l3 + ipv6::HEADER_LEN,
                ipv6::NEXT_HEADER_OFFSET,
            )
        }
        _ => {
            return Err(Error::new(
                Layer::Ethernet,
                ErrorKind::NotUet,
                eth.ethertype_offset(),
            ));
        }
    };
    let ip_end = l3 + ip_len;
    let l4_bytes = &buf[l4..ip_end];
    let trimmed = config.trim_of(ip.dscp());

    let (transport, l4_end, uet_start) = match ip.protocol() {
        ipv4::PROTOCOL_UDP => {
            // A trimming switch cuts the IP packet and leaves the UDP length
            // and checksum stale (§7, ASTERIA): for a trimmed packet only the
            // 8 header bytes must be there, and IP says where it ends.
            let p = if trimmed.is_some() && l4_bytes.len() >= udp::HEADER_LEN {
                UdpPacket::new_unchecked(l4_bytes)
            } else {
                UdpPacket::new_checked(l4_bytes).map_err(at(l4))?
            };
            if p.dst_port() != config.udp_port {
                return Err(Error::new(
                    Layer::Udp,
                    ErrorKind::NotUet,
                    l4 + udp::DST_PORT_OFFSET,
                ));
            }
            let t = Transport::Udp {
                src_port: p.src_port(),
                dst_port: p.dst_port(),
            };
            if trimmed.is_some() {
                let headers = Headers {
                    ethernet,
                    ip,
                    transport: t,
                    entropy: t.entropy(),
                    trailer: None,
                    transport_pktsize: usize::from(p.len()).max(l4_bytes.len()),
                    trimmed,
                };
                return Ok((headers, l4 + udp::HEADER_LEN..ip_end));
            }
            UdpRepr::parse_with(&p, ip.src_addr(), ip.dst_addr(), sum).map_err(at(l4))?;
            (t, l4 + usize::from(p.len()), l4 + udp::HEADER_LEN)
        }
        proto if proto == config.ip_protocol => {
            let p = EntropyPacket::new_checked(l4_bytes).map_err(at(l4))?;
            let r = EntropyRepr::parse(&p).map_err(at(l4))?;
            (
                Transport::Entropy(r.entropy),
                ip_end,
                l4 + entropy::HEADER_LEN,
            )
        }
        _ => {
            let layer = match ip {
                IpRepr::V4(_) => Layer::Ipv4,
                IpRepr::V6(_) => Layer::Ipv6,
            };
            return Err(Error::new(layer, ErrorKind::NotUet, l3 + proto_off));
        }
    };

    // Behind TSS the 16-byte ICV takes the place of the CRC trailer
    // (REFPROV `uet_parse_pkt`: "CRC is auto enabled when security is not
    // used"; `docs/protocol-notes.md` §1, §2.13).
    let secured = buf.get(uet_start).is_some_and(|b| b >> 3 == 1);
    let (uet_end, trailer) = if config.crc_trailer && trimmed.is_none() && !secured {
        let have = l4_end - uet_start;
        if have < CRC_TRAILER_LEN {
            return Err(Error::truncated(Layer::Trailer, CRC_TRAILER_LEN, have).at(uet_start));
        }
        let v = verify_crc_trailer(&buf[l3..l4_end]).map_err(at(l3))?;
        (l4_end - CRC_TRAILER_LEN, Some(v))
    } else {
        (l4_end, None)
    };

    let headers = Headers {
        ethernet,
        ip,
        transport,
        entropy: transport.entropy(),
        trailer,
        transport_pktsize: l4_end - l4,
        trimmed,
    };
    Ok((headers, uet_start..uet_end))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::inet::ethernet::{self, EthernetAddress, VlanTag};
    use crate::inet::{FlowLabel, checksum};
    use crate::types::{Dscp, Ecn};
    use core::net::Ipv4Addr;
    use proptest::prelude::*;

    // Golden vector, worked by hand. Ethernet 02:..:01 > 02:..:02, IPv4
    // 10.0.0.1 > 10.0.0.2 (ECT(0), id 1, DF, TTL 64, checksum 0x26c4), UDP
    // 0xbeef > 4793 (length 16, checksum 0 because the trailer is on), 4
    // UET bytes (a UUD_REQ prologue 0x3000 and 2 reserved bytes), then the
    // trailer. The CRC-32C (Castagnoli, reflected, init and final XOR
    // 0xffffffff) runs over IP bytes 12..32, i.e. the 20 bytes
    //   0a 00 00 01  0a 00 00 02          source, destination address
    //   be ef 12 b9  00 10 00 00          UDP ports, length, checksum 0
    //   30 00 00 00                       UET bytes
    // and is 0x50c940c9 (also worked with a bit-at-a-time CRC-32C, whose
    // check value over "123456789" is 0xe3069283). On the wire it goes in
    // network order, most significant byte first: 50 c9 40 c9 (REFPROV's
    // htonl(~crc), `docs/protocol-notes.md` §1).
    const V4_UDP_CRC: [u8; 50] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08,
        0x00, // eth
        0x45, 0x02, 0x00, 0x24, 0x00, 0x01, 0x40, 0x00, 0x40, 0x11, 0x26, 0xc4, // ip
        0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, // ip addrs
        0xbe, 0xef, 0x12, 0xb9, 0x00, 0x10, 0x00, 0x00, // udp
        0x30, 0x00, 0x00, 0x00, // UET
        0x50, 0xc9, 0x40, 0xc9, // CRC32C trailer, network order
    ];
    const UET4: [u8; 4] = [0x30, 0x00, 0x00, 0x00];

    // Golden vector: 802.1Q VID 100 PCP 5, IPv6 fd00::1 > fd00::2 with
    // traffic class 0xb8 (EF, Not-ECT), next header 253, payload 8: the
    // entropy header 0xbeef (reserved 0) and the same 4 UET bytes; no CRC.
    const V6_ENTROPY: [u8; 66] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // macs
        0x81, 0x00, 0xa0, 0x64, 0x86, 0xdd, // 802.1Q, IPv6
        0x6b, 0x80, 0x00, 0x00, 0x00, 0x08, 0xfd, 0x40, // ver/tc/flow, len 8, nh 253, hlim
        0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // src
        0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, // dst
        0xbe, 0xef, 0x00, 0x00, // entropy header
        0x30, 0x00, 0x00, 0x00, // UET
    ];

    fn macs() -> (EthernetAddress, EthernetAddress) {
        (
            EthernetAddress([2, 0, 0, 0, 0, 2]),
            EthernetAddress([2, 0, 0, 0, 0, 1]),
        )
    }

    fn v4_headers() -> (EthernetRepr, IpRepr, Transport) {
        let (dst, src) = macs();
        let eth = EthernetRepr {
            dst,
            src,
            vlan: None,
            ethertype: EtherType::Ipv4,
        };
        let ip = IpRepr::V4(Ipv4Repr {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            protocol: 0,
            payload_len: 0,
            ttl: 64,
            dscp: Dscp::new(0).unwrap(),
            ecn: Ecn::Ect0,
            ident: 1,
            dont_frag: true,
        });
        (
            eth,
            ip,
            Transport::Udp {
                src_port: 0xbeef,
                dst_port: 4793,
            },
        )
    }

    fn v6_headers() -> (EthernetRepr, IpRepr, Transport) {
        let (dst, src) = macs();
        let eth = EthernetRepr {
            dst,
            src,
            vlan: Some(VlanTag::new(5, false, 100).unwrap()),
            ethertype: EtherType::Ipv6,
        };
        let ip = IpRepr::V6(Ipv6Repr {
            src: "fd00::1".parse().unwrap(),
            dst: "fd00::2".parse().unwrap(),
            next_header: 0,
            payload_len: 0,
            hop_limit: 64,
            dscp: Dscp::new(46).unwrap(),
            ecn: Ecn::NotEct,
            flow_label: FlowLabel::default(),
        });
        (
            eth,
            ip,
            Transport::Entropy(EntropyValue::from_masked(0xbeef)),
        )
    }

    const CRC_ON: EncapConfig = EncapConfig {
        udp_port: 4793,
        ip_protocol: 253,
        crc_trailer: true,
        dscp_trimmed: None,
        dscp_trimmed_lasthop: None,
    };

    #[test]
    fn crc32c_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn entropy_header_golden() {
        let b = [0xbe, 0xef, 0x12, 0x34, 0xaa];
        let p = EntropyPacket::new_checked(&b[..]).unwrap();
        let r = EntropyRepr::parse(&p).unwrap();
        assert_eq!(r.entropy.get(), 0xbeef);
        assert_eq!(p.reserved(), 0x1234); // ignored on parse
        assert_eq!(p.payload(), &[0xaa]);
        assert_eq!(r.to_string(), "UET entropy 0xbeef");
        let mut out = [0xffu8; 4];
        r.emit(&mut EntropyPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, [0xbe, 0xef, 0x00, 0x00]);
        assert_eq!(
            EntropyPacket::new_checked(&b[..3]).unwrap_err(),
            Error::truncated(Layer::Entropy, 4, 3)
        );
    }

    #[test]
    fn golden_v4_udp_crc_build_and_parse() {
        let (eth, ip, t) = v4_headers();
        assert_eq!(frame_len(&eth, &ip, &t, &CRC_ON, 4), 50);
        let mut buf = [0u8; 64];
        let n = emit_frame(&eth, &ip, &t, &CRC_ON, 4, &mut buf, |u| {
            u.copy_from_slice(&UET4)
        })
        .unwrap();
        assert_eq!(&buf[..n], &V4_UDP_CRC[..]);
        assert_eq!(crc32c_trailer(&V4_UDP_CRC[14..]), Some(0x50c9_40c9));

        let (h, uet) = parse_l2_l4(&V4_UDP_CRC, &CRC_ON).unwrap();
        assert_eq!(uet, 42..46);
        assert_eq!(&V4_UDP_CRC[uet], &UET4);
        assert_eq!(h.trailer, Some(0x50c9_40c9));
        assert_eq!(h.entropy.get(), 0xbeef);
        assert_eq!(h.transport, t);
        assert_eq!(h.transport_pktsize, 16);
        assert_eq!(h.nominal_pktsize(), 56);
        assert_eq!(h.ip.ecn(), Ecn::Ect0);
        assert_eq!(h.ip.payload_len(), 16);
        assert_eq!(
            h.to_string(),
            "Ethernet 02:00:00:00:00:01 > 02:00:00:00:00:02 type=IPv4 | IPv4 10.0.0.1 > \
             10.0.0.2 proto=17 dscp=0 ecn=ECT(0) ttl=64 id=0x0001 DF len=16 | UDP 48879 > 4793 \
             | crc32c=0x50c940c9"
        );
    }

    /// A sealed datagram (UET bytes starting with a TSS header) goes with
    /// UDP checksum zero over IPv4, where its ICV covers what the checksum
    /// would; a datagram in the clear gets a real checksum, and so does a
    /// sealed one over IPv6, which requires it.
    #[test]
    fn sealed_datagrams_skip_the_udp_checksum_over_ipv4_only() {
        let clear = EncapConfig::default();
        // A TSS header's first byte: type 1 in the top five bits.
        let sealed_uet = |u: &mut [u8]| {
            u.fill(0x5a);
            u[0] = 1 << 3;
        };
        let plain_uet = |u: &mut [u8]| u.copy_from_slice(&UET4);
        let (eth, ip, t) = v4_headers();
        let udp_checksum =
            |eth: &EthernetRepr, ip: &IpRepr, t: &Transport, f: &dyn Fn(&mut [u8])| {
                let mut buf = [0u8; 128];
                let n = emit_frame(eth, ip, t, &clear, 4, &mut buf, f).unwrap();
                let (h, uet) = parse_l2_l4(&buf[..n], &clear).unwrap();
                let l4 = uet.start - h.transport.header_len();
                u16::from_be_bytes([buf[l4 + 6], buf[l4 + 7]])
            };
        assert_eq!(udp_checksum(&eth, &ip, &t, &sealed_uet), 0);
        assert_ne!(udp_checksum(&eth, &ip, &t, &plain_uet), 0);
        let (eth6, ip6, _) = v6_headers();
        assert_ne!(udp_checksum(&eth6, &ip6, &t, &sealed_uet), 0);
    }

    #[test]
    fn trailer_goes_in_network_order() {
        // The trailer bytes are the CRC's big-endian bytes, and the same
        // frame with them in little-endian order (what an earlier version
        // wrote) is a mismatch.
        assert_eq!(&V4_UDP_CRC[46..], &0x50c9_40c9u32.to_be_bytes());
        let mut swapped = V4_UDP_CRC;
        swapped[46..].copy_from_slice(&0x50c9_40c9u32.to_le_bytes());
        assert_eq!(
            parse_l2_l4(&swapped, &CRC_ON).unwrap_err(),
            Error::new(Layer::Trailer, ErrorKind::BadChecksum, 46)
        );
        // The same value from the addresses and the IP payload alone.
        assert_eq!(
            crc32c_of_payload(
                Ipv4Addr::new(10, 0, 0, 1).into(),
                Ipv4Addr::new(10, 0, 0, 2).into(),
                &[&V4_UDP_CRC[34..42], &V4_UDP_CRC[42..46]]
            ),
            Some(0x50c9_40c9)
        );
        assert_eq!(
            crc32c_of_payload(
                Ipv4Addr::new(10, 0, 0, 1).into(),
                "fd00::2".parse().unwrap(),
                &[&[]]
            ),
            None
        );
    }

    // Golden vector, worked by hand: native-IP UET as REFPROV sends it.
    // IPv4 10.0.0.1 > 10.0.0.2, protocol 253, total length 32 (20 + entropy
    // 4 + UET 4 + trailer 4), id 1, DF, TTL 64, checksum 0x25de; the entropy
    // header 0x1234 (reserved 0); the UET bytes 30 00 00 00; the CRC-32C of
    //   0a 00 00 01 0a 00 00 02 12 34 00 00 30 00 00 00
    // = 0x370caf53, sent most significant byte first.
    const V4_ENTROPY_CRC: [u8; 46] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08,
        0x00, // eth
        0x45, 0x00, 0x00, 0x20, 0x00, 0x01, 0x40, 0x00, 0x40, 0xfd, 0x25, 0xde, // ip
        0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, // ip addrs
        0x12, 0x34, 0x00, 0x00, // entropy header
        0x30, 0x00, 0x00, 0x00, // UET
        0x37, 0x0c, 0xaf, 0x53, // CRC32C trailer, network order
    ];

    #[test]
    fn golden_v4_entropy_crc_build_and_parse() {
        let (eth, ip, _) = v4_headers();
        let ip = match ip {
            IpRepr::V4(r) => IpRepr::V4(Ipv4Repr {
                ecn: Ecn::NotEct,
                ..r
            }),
            IpRepr::V6(_) => unreachable!(),
        };
        let t = Transport::Entropy(EntropyValue::from_masked(0x1234));
        let mut buf = [0u8; 46];
        let n = emit_frame(&eth, &ip, &t, &CRC_ON, 4, &mut buf, |u| {
            u.copy_from_slice(&UET4)
        })
        .unwrap();
        assert_eq!(&buf[..n], &V4_ENTROPY_CRC[..]);
        let (h, uet) = parse_l2_l4(&V4_ENTROPY_CRC, &CRC_ON).unwrap();
        assert_eq!(&V4_ENTROPY_CRC[uet], &UET4);
        assert_eq!(h.trailer, Some(0x370c_af53));
        assert_eq!(h.entropy.get(), 0x1234);
        assert_eq!(h.transport_pktsize, 12);
    }

    #[test]
    fn golden_v6_entropy_build_and_parse() {
        let (eth, ip, t) = v6_headers();
        let cfg = EncapConfig::default();
        let mut buf = [0u8; 66];
        let n = emit_frame(&eth, &ip, &t, &cfg, 4, &mut buf, |u| {
            u.copy_from_slice(&UET4)
        })
        .unwrap();
        assert_eq!(n, 66);
        assert_eq!(buf, V6_ENTROPY);
        let (h, uet) = parse_l2_l4(&V6_ENTROPY, &cfg).unwrap();
        assert_eq!(&V6_ENTROPY[uet], &UET4);
        assert_eq!(h.transport, t);
        assert_eq!(h.entropy.get(), 0xbeef);
        assert_eq!(h.trailer, None);
        assert_eq!(h.transport_pktsize, 8);
        assert_eq!(h.ip.dscp().get(), 46);
        assert_eq!(h.ethernet.vlan.map(VlanTag::vid), Some(100));
    }

    #[test]
    fn crc_is_detected_and_ecn_marking_does_not_break_it() {
        // Every byte from the IP source address to the end is covered.
        for i in 14 + 12..V4_UDP_CRC.len() {
            let mut f = V4_UDP_CRC;
            f[i] ^= 0x10;
            let e = parse_l2_l4(&f, &CRC_ON).unwrap_err();
            if (36..38).contains(&i) {
                // The UDP destination port: not UET any more.
                assert_eq!(e.kind, ErrorKind::NotUet);
            } else if i < 34 {
                // An address: the IPv4 header checksum fails first.
                assert_eq!(e, Error::new(Layer::Ipv4, ErrorKind::BadChecksum, 24));
            } else if (38..40).contains(&i) {
                // The UDP length: now disagrees with the IP length.
                assert_eq!(e, Error::new(Layer::Udp, ErrorKind::BadLength, 38));
            } else if (40..42).contains(&i) {
                // The UDP checksum is no longer "none" and does not verify.
                assert_eq!(e, Error::new(Layer::Udp, ErrorKind::BadChecksum, 40));
            } else {
                assert_eq!(
                    e,
                    Error::new(Layer::Trailer, ErrorKind::BadChecksum, 46),
                    "byte {i}"
                );
            }
        }
        // A switch marking CE (with the incremental IPv4 checksum update) and
        // decrementing the TTL leaves the trailer valid.
        let mut f = V4_UDP_CRC;
        let mut ip = Ipv4Packet::new_checked(&mut f[14..]).unwrap();
        ip.set_ecn(Ecn::Ce);
        ip.set_ttl(63);
        ip.fill_checksum();
        let (h, _) = parse_l2_l4(&f, &CRC_ON).unwrap();
        assert_eq!(h.ip.ecn(), Ecn::Ce);
        // A wrong trailer on its own.
        let mut f = V4_UDP_CRC;
        f[49] ^= 1;
        assert_eq!(
            parse_l2_l4(&f, &CRC_ON).unwrap_err(),
            Error::new(Layer::Trailer, ErrorKind::BadChecksum, 46)
        );
        assert_eq!(
            verify_crc_trailer(&f[14..]).unwrap_err(),
            Error::new(Layer::Trailer, ErrorKind::BadChecksum, 32)
        );
    }

    #[test]
    fn udp_checksum_without_crc_is_computed_and_checked() {
        let (eth, ip, t) = v4_headers();
        let cfg = EncapConfig::default();
        let mut buf = [0u8; 46];
        emit_frame(&eth, &ip, &t, &cfg, 4, &mut buf, |u| {
            u.copy_from_slice(&UET4)
        })
        .unwrap();
        assert_ne!(&buf[40..42], &[0, 0]);
        // The UDP checksum verifies over the pseudo-header and datagram.
        let pseudo = checksum::pseudo_header_v4(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            17,
            12,
        );
        assert_eq!(
            checksum::combine(&[pseudo, checksum::data(&buf[34..])]),
            0xffff
        );
        assert!(parse_l2_l4(&buf, &cfg).is_ok());
        let mut bad = buf;
        bad[44] ^= 0x01;
        assert_eq!(
            parse_l2_l4(&bad, &cfg).unwrap_err(),
            Error::new(Layer::Udp, ErrorKind::BadChecksum, 40)
        );
        // A corrupted IPv4 header byte fails the header checksum.
        let mut bad = buf;
        bad[22] ^= 0x01; // TTL
        assert_eq!(
            parse_l2_l4(&bad, &cfg).unwrap_err(),
            Error::new(Layer::Ipv4, ErrorKind::BadChecksum, 24)
        );
    }

    #[test]
    fn not_uet_points_at_the_field() {
        let cfg = EncapConfig::default();
        // Another UDP port.
        let other = EncapConfig {
            udp_port: 5000,
            ..CRC_ON
        };
        assert_eq!(
            parse_l2_l4(&V4_UDP_CRC, &other).unwrap_err(),
            Error::new(Layer::Udp, ErrorKind::NotUet, 36)
        );
        // Another protocol (the entropy frame with the UET protocol moved).
        let moved = EncapConfig {
            ip_protocol: 254,
            ..cfg
        };
        assert_eq!(
            parse_l2_l4(&V6_ENTROPY, &moved).unwrap_err(),
            Error::new(Layer::Ipv6, ErrorKind::NotUet, 18 + 6)
        );
        // Another EtherType (ARP), and a QinQ outer tag.
        let mut f = V4_UDP_CRC;
        f[12] = 0x08;
        f[13] = 0x06;
        assert_eq!(
            parse_l2_l4(&f, &cfg).unwrap_err(),
            Error::new(Layer::Ethernet, ErrorKind::NotUet, 12)
        );
        let mut f = V6_ENTROPY;
        f[16] = 0x81;
        f[17] = 0x00;
        assert_eq!(
            parse_l2_l4(&f, &cfg).unwrap_err(),
            Error::new(Layer::Ethernet, ErrorKind::NotUet, 16)
        );
    }

    #[test]
    fn errors_are_rebased_and_padding_ignored() {
        // Truncated IPv6 payload: BadLength at the payload-length field.
        assert_eq!(
            parse_l2_l4(&V6_ENTROPY[..65], &EncapConfig::default()).unwrap_err(),
            Error::new(Layer::Ipv6, ErrorKind::BadLength, 18 + 4)
        );
        // Ethernet padding after the IP packet is ignored.
        let mut padded = V4_UDP_CRC.to_vec();
        padded.extend_from_slice(&[0; 10]);
        let (_, uet) = parse_l2_l4(&padded, &CRC_ON).unwrap();
        assert_eq!(uet, 42..46);
        // A CRC configured but fewer than 4 bytes after the entropy header.
        let (eth, ip, t) = v6_headers();
        let mut buf = [0u8; 64];
        let n = emit_frame(&eth, &ip, &t, &EncapConfig::default(), 2, &mut buf, |_| {}).unwrap();
        let crc = EncapConfig {
            crc_trailer: true,
            ..EncapConfig::default()
        };
        assert_eq!(
            parse_l2_l4(&buf[..n], &crc).unwrap_err(),
            Error::new(Layer::Trailer, ErrorKind::Truncated { need: 4 }, n)
        );
    }

    #[test]
    fn trimmed_packets_are_recognised_by_dscp() {
        // A switch trimmed the frame to 24 B of IP payload (UDP 8 + a 16 B
        // PDS request header, §7) and re-marked DSCP 16; UDP still claims
        // the old length and checksum.
        let (eth, ip, t) = v4_headers();
        let cfg = EncapConfig::default();
        let mut buf = [0u8; 14 + 20 + 8 + 100];
        emit_frame(&eth, &ip, &t, &cfg, 100, &mut buf, |u| u.fill(7)).unwrap();
        let mut p = Ipv4Packet::new_checked(&mut buf[14..]).unwrap();
        p.set_total_len(20 + 24);
        p.set_dscp(Dscp::new(16).unwrap());
        p.fill_checksum();
        let trimmed = &buf[..14 + 20 + 24];
        let (h, uet) = parse_l2_l4(trimmed, &cfg).unwrap();
        assert_eq!(h.trimmed, Some(Trim::Trimmed));
        assert_eq!(uet, 42..58);
        assert_eq!(h.transport_pktsize, 108, "UDP's pre-trim size is kept");
        // Without trimming configured the stale UDP length is an error.
        let off = EncapConfig {
            dscp_trimmed: None,
            ..cfg
        };
        assert_eq!(
            parse_l2_l4(trimmed, &off).unwrap_err(),
            Error::new(Layer::Udp, ErrorKind::BadLength, 38)
        );
        // The last-hop code point.
        let mut p = Ipv4Packet::new_checked(&mut buf[14..]).unwrap();
        p.set_dscp(Dscp::new(18).unwrap());
        p.fill_checksum();
        let (h, _) = parse_l2_l4(&buf[..58], &cfg).unwrap();
        assert_eq!(h.trimmed, Some(Trim::LastHop));
        // Untrimmed traffic never reports a trim.
        let mut clean = [0u8; 46];
        emit_frame(&eth, &ip, &t, &cfg, 4, &mut clean, |_| {}).unwrap();
        assert_eq!(parse_l2_l4(&clean, &cfg).unwrap().0.trimmed, None);
    }

    #[test]
    fn builder_errors() {
        let (eth, ip, t) = v4_headers();
        let mut small = [0u8; 49];
        assert_eq!(
            emit_frame(&eth, &ip, &t, &CRC_ON, 4, &mut small, |_| {}).unwrap_err(),
            Error::truncated(Layer::Ethernet, 50, 49)
        );
        let mut big = vec![0u8; 70_000];
        assert_eq!(
            emit_frame(&eth, &ip, &t, &CRC_ON, 65_504, &mut big, |_| {}).unwrap_err(),
            Error::new(Layer::Ipv4, ErrorKind::BadLength, 16)
        );
        // 65_503 UET bytes + 8 + 4 = 65_515: the largest IPv4 payload.
        assert!(emit_frame(&eth, &ip, &t, &CRC_ON, 65_503, &mut big, |_| {}).is_ok());
        let udp17 = EncapConfig {
            ip_protocol: 17,
            ..CRC_ON
        };
        let (_, _, e) = v6_headers();
        assert_eq!(
            emit_frame(&eth, &ip, &e, &udp17, 4, &mut big, |_| {}).unwrap_err(),
            Error::new(Layer::Entropy, ErrorKind::OutOfRange, 14 + 9)
        );
    }

    #[test]
    fn nominal_pktsize_adds_forty() {
        assert_eq!(nominal_pktsize(0), 40);
        let cfg = EncapConfig::default();
        let t = Transport::udp(EntropyValue::from_masked(7), &cfg);
        assert_eq!(
            t,
            Transport::Udp {
                src_port: 7,
                dst_port: 4793
            }
        );
        assert_eq!(transport_pktsize(&t, &cfg, 100), 108);
        let e = Transport::Entropy(EntropyValue::from_masked(7));
        assert_eq!(transport_pktsize(&e, &CRC_ON, 100), 108);
    }

    fn arb_ip() -> impl Strategy<Value = IpRepr> {
        prop_oneof![
            ipv4::tests::arb_repr().prop_map(IpRepr::V4),
            ipv6::tests::arb_repr().prop_map(IpRepr::V6),
        ]
    }

    fn arb_config() -> impl Strategy<Value = EncapConfig> {
        (any::<u16>(), any::<u8>(), any::<bool>()).prop_map(|(udp_port, p, crc_trailer)| {
            let ip_protocol = if p == 17 { 253 } else { p };
            // Trimming is off here: random DSCPs would otherwise collide
            // with the trimmed code points (tested on its own below).
            EncapConfig {
                udp_port,
                ip_protocol,
                crc_trailer,
                dscp_trimmed: None,
                dscp_trimmed_lasthop: None,
            }
        })
    }

    pub(crate) fn arb_frame()
    -> impl Strategy<Value = (EthernetRepr, IpRepr, Transport, EncapConfig, Vec<u8>)> {
        (
            ethernet::tests::arb_repr(),
            arb_ip(),
            arb_config(),
            any::<u16>(),
            any::<bool>(),
            proptest::collection::vec(any::<u8>(), 0..200),
        )
            .prop_map(|(eth, ip, cfg, ev, udp, uet)| {
                let ev = EntropyValue::from_masked(ev);
                let t = if udp {
                    Transport::udp(ev, &cfg)
                } else {
                    Transport::Entropy(ev)
                };
                (eth, ip, t, cfg, uet)
            })
    }

    proptest! {
        #[test]
        fn builder_round_trip((eth, ip, t, cfg, uet) in arb_frame(), slack in 0usize..8) {
            // A packet with TSS never carries the CRC trailer (its ICV does
            // the job), so with the trailer on the UET bytes are not TSS.
            // They are not empty either (every UET packet has a PDS
            // prologue): the parser tells TSS from the rest by the first
            // UET byte, which for empty UET bytes is the trailer's first.
            let mut uet = uet;
            if cfg.crc_trailer && uet.is_empty() {
                uet.push(0);
            }
            if cfg.crc_trailer && uet.first().is_some_and(|b| b >> 3 == 1) {
                uet[0] ^= 0x10;
            }
            let n = frame_len(&eth, &ip, &t, &cfg, uet.len());
            let mut buf = vec![0u8; n + slack];
            let written = emit_frame(&eth, &ip, &t, &cfg, uet.len(), &mut buf, |u| {
                u.copy_from_slice(&uet);
            })
            .unwrap();
            prop_assert_eq!(written, n);
            let (h, range) = parse_l2_l4(&buf, &cfg).unwrap();
            prop_assert_eq!(&buf[range], &uet[..]);
            let l4_len = transport_pktsize(&t, &cfg, uet.len());
            let expected_ip = ip.with_protocol(t.ip_protocol(&cfg)).with_payload_len(l4_len);
            prop_assert_eq!(h.ethernet, EthernetRepr { ethertype: ip.ethertype(), ..eth });
            prop_assert_eq!(h.ip, expected_ip);
            prop_assert_eq!(h.transport, t);
            prop_assert_eq!(h.entropy, t.entropy());
            prop_assert_eq!(h.transport_pktsize, l4_len);
            let l3 = eth.buffer_len();
            prop_assert_eq!(h.trailer, cfg.crc_trailer.then(|| crc32c_trailer(&buf[l3..n]).unwrap()));
            let _ = h.to_string();
        }

        #[test]
        fn corrupted_frames_never_panic(
            (eth, ip, t, cfg, uet) in arb_frame(),
            idx in any::<prop::sample::Index>(),
            xor in 1u8..,
        ) {
            let n = frame_len(&eth, &ip, &t, &cfg, uet.len());
            let mut buf = vec![0u8; n];
            emit_frame(&eth, &ip, &t, &cfg, uet.len(), &mut buf, |u| u.copy_from_slice(&uet))
                .unwrap();
            let i = idx.index(n);
            buf[i] ^= xor;
            if let Ok((_, range)) = parse_l2_l4(&buf, &cfg) {
                prop_assert!(range.end <= buf.len());
            }
        }

        #[test]
        fn parse_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            cfg in arb_config(),
        ) {
            if let Ok((h, range)) = parse_l2_l4(&bytes, &cfg) {
                prop_assert!(range.start <= range.end && range.end <= bytes.len());
                let _ = h.to_string();
            }
            let _ = crc32c_trailer(&bytes);
            let _ = verify_crc_trailer(&bytes);
            if let Ok(p) = EntropyPacket::new_checked(&bytes[..]) {
                let _ = EntropyRepr::parse(&p).map(|r| r.to_string());
            }
        }

        #[test]
        fn entropy_round_trip(e: u16) {
            let r = EntropyRepr { entropy: EntropyValue::from_masked(e) };
            let mut b = [0u8; ENTROPY_HEADER_LEN];
            r.emit(&mut EntropyPacket::new_unchecked(&mut b[..]));
            prop_assert_eq!(r.buffer_len(), b.len());
            prop_assert_eq!(EntropyRepr::parse(&EntropyPacket::new_checked(&b[..]).unwrap()).unwrap(), r);
        }
    }
}
