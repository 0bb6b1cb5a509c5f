//! Small typed values shared by the target and the initiator side: peer
//! identity, region addresses, keys, match bits and local buffer handles
//! (docs/architecture.md §8 rule 2: no naked integers across the API).

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use uet_wire::{JobId, PdcId, PidOnFep, ResourceIndex, RiGeneration};

/// The fabric address of a peer FEP, as a 128-bit IPv6 address; an IPv4
/// address is kept in its IPv4-mapped form (`::ffff:a.b.c.d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FepAddr(u128);

impl FepAddr {
    /// From the 128 address bits (network order read as a big-endian
    /// integer).
    #[must_use]
    pub const fn from_bits(bits: u128) -> Self {
        Self(bits)
    }

    /// The 128 address bits.
    #[must_use]
    pub const fn to_bits(self) -> u128 {
        self.0
    }

    /// The address as an `IpAddr`: IPv4-mapped addresses come back as IPv4.
    #[must_use]
    pub fn to_ip(self) -> IpAddr {
        Ipv6Addr::from_bits(self.0).to_canonical()
    }
}

impl From<Ipv4Addr> for FepAddr {
    fn from(a: Ipv4Addr) -> Self {
        Self(a.to_ipv6_mapped().to_bits())
    }
}

impl From<Ipv6Addr> for FepAddr {
    fn from(a: Ipv6Addr) -> Self {
        Self(a.to_bits())
    }
}

impl From<IpAddr> for FepAddr {
    fn from(a: IpAddr) -> Self {
        match a {
            IpAddr::V4(v4) => v4.into(),
            IpAddr::V6(v6) => v6.into(),
        }
    }
}

impl fmt::Display for FepAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_ip(), f)
    }
}

/// Where a request came from: the peer FEP and the PDC it arrived on.
///
/// The target keys partly received messages by `(Source, message_id)`. All
/// packets of one message travel on one PDC (`docs/protocol-notes.md` §2.12, "one
/// message = one PDC"), so the caller may pass either end's PDC ID, as long
/// as it passes the same one for every packet of a PDC — the target's own
/// (local) PDC ID is the natural choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Source {
    /// The peer FEP's address.
    pub fep: FepAddr,
    /// The PDC the request arrived on.
    pub pdc: PdcId,
}

impl Source {
    /// A source from an address and a PDC ID.
    #[must_use]
    pub fn new(fep: impl Into<FepAddr>, pdc: PdcId) -> Self {
        Self {
            fep: fep.into(),
            pdc,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/pdc{}", self.fep, self.pdc)
    }
}

/// The relative address of a resource at a target (§4.1): job, process on
/// the FEP and resource index. Registered memory is keyed by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionAddr {
    /// `job_id`.
    pub job: JobId,
    /// `pid_on_fep`.
    pub pid: PidOnFep,
    /// `resource_index`.
    pub ri: ResourceIndex,
}

impl RegionAddr {
    /// The address `(job, pid, ri)`.
    #[must_use]
    pub const fn new(job: JobId, pid: PidOnFep, ri: ResourceIndex) -> Self {
        Self { job, pid, ri }
    }
}

impl fmt::Display for RegionAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job={} pid={} ri={}", self.job, self.pid, self.ri)
    }
}

/// A 64-bit memory key (`memory_key` of a standard or medium request,
/// §4.2): the remote access key of a registered region.
///
/// The target checks the key as 64 opaque bits. Keys that uetd picks and
/// that the libfabric provider hands out are laid out as `resource_index
/// << 52 | ri_generation << 44 | 44 random bits` ([`MemoryKey::compose`]):
/// a libfabric memory key is one `u64`, and an initiator holding only that
/// key finds the region's resource index and generation, which every
/// request must carry, in its top 20 bits ([`MemoryKey::ri`],
/// [`MemoryKey::generation`]). Keys chosen by an application need not
/// follow the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MemoryKey(pub u64);

impl MemoryKey {
    /// Bits of a composed key below the generation.
    const LOW_BITS: u32 = 44;

    /// `ri << 52 | generation << 44 | low44` (only the low 44 bits of
    /// `low44` are used).
    #[must_use]
    pub const fn compose(ri: ResourceIndex, generation: RiGeneration, low44: u64) -> Self {
        Self(
            (ri.get() as u64) << (Self::LOW_BITS + 8)
                | (generation.get() as u64) << Self::LOW_BITS
                | low44 & ((1 << Self::LOW_BITS) - 1),
        )
    }

    /// The resource index a composed key carries (its top 12 bits).
    #[must_use]
    pub const fn ri(self) -> ResourceIndex {
        ResourceIndex::from_masked((self.0 >> (Self::LOW_BITS + 8)) as u16)
    }

    /// The generation a composed key carries (bits 44..52).
    #[must_use]
    pub const fn generation(self) -> RiGeneration {
        RiGeneration::from_masked((self.0 >> Self::LOW_BITS) as u8)
    }
}

impl fmt::Display for MemoryKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// 64 match bits of a tagged send (carried in the `memory_key` field of a
/// tagged request, §4.2), or the mask of bits a receive ignores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MatchBits(pub u64);

impl fmt::Display for MatchBits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// The 32-bit `initiator` field of standard and medium requests (§4.2): the
/// initiator's identity as the application sees it. The target reports it in
/// receive events; matching does not use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct InitiatorId(pub u32);

impl fmt::Display for InitiatorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// The handle of a posted receive, assigned by [`crate::SesTarget::post_recv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecvId(pub(crate) u64);

impl RecvId {
    /// The raw value (unique per target, increasing).
    #[must_use]
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for RecvId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "recv#{}", self.0)
    }
}

/// The caller's name for a piece of local memory. SES never interprets it:
/// it travels inside an [`crate::Operation`] so that the caller can find the
/// memory to pass to [`crate::OutgoingMessage::write_packet`] or
/// [`crate::ReadSink::on_data`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct LocalRegion(pub u32);

/// A position in local memory: the caller's region handle and a byte offset
/// into it. The source of a write or send, the destination of a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct LocalBuf {
    /// Which local region (the caller's handle).
    pub region: LocalRegion,
    /// Byte offset into it.
    pub offset: u64,
}

impl LocalBuf {
    /// `offset` bytes into `region`.
    #[must_use]
    pub const fn new(region: LocalRegion, offset: u64) -> Self {
        Self { region, offset }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fep_addr_keeps_ipv4_as_mapped() {
        let a = FepAddr::from(Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(a.to_bits(), 0xffff_0a00_0001);
        assert_eq!(a.to_ip(), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(a.to_string(), "10.0.0.1");
        let b = FepAddr::from(IpAddr::V6(Ipv6Addr::LOCALHOST));
        assert_eq!(b.to_bits(), 1);
        assert_eq!(FepAddr::from_bits(1), b);
    }

    #[test]
    fn composed_keys_carry_ri_and_generation() {
        let ri = ResourceIndex::new(0xabc).unwrap();
        let g = RiGeneration::from_masked(0x5d);
        let k = MemoryKey::compose(ri, g, 0xffff_f123_4567_89ab);
        assert_eq!(k.0, 0xabc5_d123_4567_89ab);
        assert_eq!((k.ri(), k.generation()), (ri, g));
        let top = MemoryKey::compose(
            ResourceIndex::new(0xfff).unwrap(),
            RiGeneration::from_masked(0xff),
            u64::MAX,
        );
        assert_eq!(top.0, u64::MAX);
        let zero = MemoryKey::compose(ResourceIndex::new(0).unwrap(), g, 0);
        assert_eq!((zero.0, zero.ri().get()), (0x5d << 44, 0));
    }

    #[test]
    fn source_display() {
        let s = Source::new(Ipv4Addr::new(192, 0, 2, 7), PdcId::new(9).unwrap());
        assert_eq!(s.to_string(), "192.0.2.7/pdc9");
    }
}
