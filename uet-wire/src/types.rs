//! Typed protocol values. No naked integers cross a crate boundary
//! (`docs/architecture.md` §8 rule 2): every value whose range is narrower than its
//! carrier is checked at construction, so an out-of-range value cannot exist.

use core::cmp::Ordering;
use core::fmt;
use core::num::NonZeroU16;

/// A value did not fit the field it is meant for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfRange {
    /// The type that refused the value.
    pub what: &'static str,
    /// The refused value.
    pub value: u64,
    /// The largest value the type accepts.
    pub max: u64,
}

impl fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} out of range (max {})",
            self.what, self.value, self.max
        )
    }
}

impl core::error::Error for OutOfRange {}

/// A 32-bit packet sequence number (`docs/protocol-notes.md` §2.12).
///
/// PSNs are serial numbers: they wrap, and ordering is the sign of the 32-bit
/// difference (REFPROV `UET_PDS_PSN_AFTER`). Because that order is not
/// transitive across half the space, `Psn` implements `PartialOrd` but not
/// `Ord`; two PSNs exactly 2^31 apart are unordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(pub u32);

impl Psn {
    /// Signed distance `self - other` (positive when `self` is after `other`).
    #[must_use]
    pub const fn diff(self, other: Self) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }

    /// `self + n`, wrapping.
    #[must_use]
    pub const fn add(self, n: u32) -> Self {
        Self(self.0.wrapping_add(n))
    }

    /// `self - n`, wrapping.
    #[must_use]
    pub const fn sub(self, n: u32) -> Self {
        Self(self.0.wrapping_sub(n))
    }

    /// `self + offset` for the signed 16-bit PSN offsets of the PDS headers
    /// (`clear_psn_offset`, `ack_psn_offset`, `sack_psn_offset`).
    #[must_use]
    pub const fn offset(self, offset: i16) -> Self {
        Self(self.0.wrapping_add(offset as i32 as u32))
    }

    /// The signed 16-bit offset that takes `base` to `self`, if it fits.
    #[must_use]
    pub fn offset_from(self, base: Self) -> Option<i16> {
        i16::try_from(self.diff(base)).ok()
    }

    /// The next PSN.
    #[must_use]
    pub const fn next(self) -> Self {
        self.add(1)
    }

    /// Whether `self` comes strictly after `other` in serial order.
    #[must_use]
    pub const fn is_after(self, other: Self) -> bool {
        self.diff(other) > 0
    }

    /// Whether `self` comes strictly before `other` in serial order.
    #[must_use]
    pub const fn is_before(self, other: Self) -> bool {
        self.diff(other) < 0
    }
}

impl PartialOrd for Psn {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        let d = self.diff(*other);
        if d == i32::MIN { None } else { Some(d.cmp(&0)) }
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A PDC identifier. Zero is reserved (spec §3.5.8.2 via REFPROV), so a
/// `PdcId` is never zero; header fields that may carry 0 ("no PDC") are
/// `Option<PdcId>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PdcId(NonZeroU16);

impl PdcId {
    /// A PDC ID, or `None` for the reserved value 0.
    #[must_use]
    pub const fn new(v: u16) -> Option<Self> {
        match NonZeroU16::new(v) {
            Some(n) => Some(Self(n)),
            None => None,
        }
    }

    /// The raw 16-bit value.
    #[must_use]
    pub const fn get(self) -> u16 {
        self.0.get()
    }

    /// The wire value of an optional PDC ID (0 for none).
    #[must_use]
    pub const fn to_wire(id: Option<Self>) -> u16 {
        match id {
            Some(i) => i.get(),
            None => 0,
        }
    }
}

impl fmt::Display for PdcId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.get(), f)
    }
}

macro_rules! bounded {
    ($(#[$m:meta])* $name:ident, $repr:ty, $bits:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name($repr);

        impl $name {
            /// Number of bits the value occupies on the wire.
            pub const BITS: u32 = $bits;
            /// The largest representable value.
            pub const MAX: $repr = ((1u64 << $bits) - 1) as $repr;

            /// Checked constructor.
            pub const fn new(v: $repr) -> Result<Self, OutOfRange> {
                if v as u64 > Self::MAX as u64 {
                    Err(OutOfRange { what: stringify!($name), value: v as u64, max: Self::MAX as u64 })
                } else {
                    Ok(Self(v))
                }
            }

            /// Builds the value from the low bits of `v`, discarding the rest
            /// (for wire fields whose width already bounds the value).
            #[must_use]
            pub const fn from_masked(v: $repr) -> Self {
                Self(v & Self::MAX)
            }

            /// The raw value.
            #[must_use]
            pub const fn get(self) -> $repr {
                self.0
            }
        }

        impl TryFrom<$repr> for $name {
            type Error = OutOfRange;
            fn try_from(v: $repr) -> Result<Self, OutOfRange> {
                Self::new(v)
            }
        }

        impl From<$name> for $repr {
            fn from(v: $name) -> $repr {
                v.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

bounded!(
    /// A 24-bit job identifier (SES common header, `docs/protocol-notes.md` §4.1).
    JobId, u32, 24
);
bounded!(
    /// A 12-bit process identifier on the fabric endpoint.
    PidOnFep, u16, 12
);
bounded!(
    /// A 12-bit resource index.
    ResourceIndex, u16, 12
);
bounded!(
    /// An 8-bit congestion-control-context ID (`req_cc_state.ccc_id`).
    CccId, u8, 8
);
bounded!(
    /// The 16-bit entropy value (UDP source port, or the entropy header).
    EntropyValue, u16, 16
);
bounded!(
    /// A 16-bit SES message ID.
    MessageId, u16, 16
);
bounded!(
    /// The 8-bit resource-index generation.
    RiGeneration, u8, 8
);
bounded!(
    /// A 6-bit DSCP code point.
    Dscp, u8, 6
);
bounded!(
    /// A traffic class. UET maps traffic classes to DSCP values per
    /// deployment; this implementation allows 16 classes (4 bits) [I].
    TrafficClass, u8, 4
);
bounded!(
    /// A 24-bit count of 256-byte units (NSCC `rcvd_bytes`, §2.7), wrapping.
    Units256, u32, 24
);
bounded!(
    /// A 24-bit byte count (RCCC `credit` and `credit_target`, §2.5, §2.7).
    Credit24, u32, 24
);
bounded!(
    /// A 14-bit length field (SES `request_length` of small/medium headers and
    /// `payload_length` fields).
    Len14, u16, 14
);

impl Units256 {
    /// Converts a cumulative byte count to the wire value: rounded up to 256-B
    /// units, modulo 2^24 (`(pdc.rcvd_bytes + 255) >> 8`, SPEC-TR §3.6.13.9).
    #[must_use]
    pub const fn from_bytes_round_up(bytes: u64) -> Self {
        Self::from_masked((bytes.wrapping_add(255) >> 8) as u32)
    }

    /// Newly received bytes between two reports: modular difference × 256.
    #[must_use]
    pub const fn bytes_since(self, earlier: Self) -> u64 {
        ((self.0.wrapping_sub(earlier.0)) & Self::MAX) as u64 * 256
    }
}

/// The two ECN bits of the IP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ecn {
    /// 00: not ECN-capable.
    NotEct,
    /// 01: ECN-capable, ECT(1).
    Ect1,
    /// 10: ECN-capable, ECT(0).
    Ect0,
    /// 11: congestion experienced.
    Ce,
}

impl Ecn {
    /// From the two low bits.
    #[must_use]
    pub const fn from_bits(b: u8) -> Self {
        match b & 3 {
            0 => Self::NotEct,
            1 => Self::Ect1,
            2 => Self::Ect0,
            _ => Self::Ce,
        }
    }

    /// The two-bit wire value.
    #[must_use]
    pub const fn bits(self) -> u8 {
        match self {
            Self::NotEct => 0,
            Self::Ect1 => 1,
            Self::Ect0 => 2,
            Self::Ce => 3,
        }
    }

    /// Short name as in RFC 3168.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::NotEct => "Not-ECT",
            Self::Ect1 => "ECT(1)",
            Self::Ect0 => "ECT(0)",
            Self::Ce => "CE",
        }
    }
}

impl fmt::Display for Ecn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// PDS delivery mode (`docs/protocol-notes.md` §2.2, §2.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryMode {
    /// Reliable, unordered delivery.
    Rud,
    /// Reliable, ordered delivery.
    Rod,
    /// Reliable, unordered delivery for idempotent operations (no PDC).
    Rudi,
    /// Unreliable, unordered delivery.
    Uud,
}

impl DeliveryMode {
    /// Spec name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Rud => "RUD",
            Self::Rod => "ROD",
            Self::Rudi => "RUDI",
            Self::Uud => "UUD",
        }
    }
}

impl fmt::Display for DeliveryMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn psn_orders_across_the_wrap() {
        let a = Psn(u32::MAX - 1);
        let b = a.add(3);
        assert_eq!(b, Psn(1));
        assert!(b.is_after(a));
        assert!(a < b);
        assert_eq!(b.diff(a), 3);
        assert_eq!(a.diff(b), -3);
        assert_eq!(Psn(0).partial_cmp(&Psn(1 << 31)), None);
    }

    #[test]
    fn clear_psn_worked_example() {
        // SPEC-TR §3.5.20.2.8: CLEAR_PSN 335 is sent as psn 336, offset -1.
        assert_eq!(Psn(336).offset(-1), Psn(335));
        assert_eq!(Psn(335).offset_from(Psn(336)), Some(-1));
    }

    #[test]
    fn bounded_values_refuse_out_of_range() {
        assert!(JobId::new(0xff_ffff).is_ok());
        assert_eq!(
            JobId::new(0x100_0000),
            Err(OutOfRange {
                what: "JobId",
                value: 0x100_0000,
                max: 0xff_ffff
            })
        );
        assert!(PidOnFep::new(4095).is_ok());
        assert!(PidOnFep::new(4096).is_err());
        assert!(ResourceIndex::new(4096).is_err());
        assert!(Dscp::new(64).is_err());
        assert_eq!(PdcId::new(0), None);
        assert_eq!(PdcId::to_wire(PdcId::new(7)), 7);
    }

    #[test]
    fn rcvd_bytes_units() {
        // ACK_CC worked number (seeds): 12,288 B received -> 48 units; a later
        // report of 16,384 B -> 64 units; the source derives 4,096 new bytes.
        let a = Units256::from_bytes_round_up(12_288);
        let b = Units256::from_bytes_round_up(16_384);
        assert_eq!(a.get(), 48);
        assert_eq!(b.get(), 64);
        assert_eq!(b.bytes_since(a), 4_096);
        // Rounds up and wraps modulo 2^24.
        assert_eq!(Units256::from_bytes_round_up(1).get(), 1);
        let hi = Units256::from_masked(Units256::MAX);
        assert_eq!(Units256::from_masked(1).bytes_since(hi), 512);
    }

    proptest! {
        #[test]
        fn psn_add_then_diff(a: u32, n in 0u32..(1 << 31)) {
            let p = Psn(a);
            prop_assert_eq!(p.add(n).diff(p), n as i32);
            prop_assert_eq!(p.add(n).sub(n), p);
        }

        #[test]
        fn psn_offset_round_trip(a: u32, o: i16) {
            let p = Psn(a).offset(o);
            prop_assert_eq!(p.offset_from(Psn(a)), Some(o));
        }
    }
}
