//! Access rights of registered memory: what a region lets remote requests
//! do. One type for the whole stack: applications ask for rights through
//! `uet-api`, the daemon registers the region with them and the SES target
//! checks every request against them (`docs/protocol-notes.md` §4).

use core::fmt;
use core::ops::{BitOr, BitOrAssign};

/// Access rights of a registered region (a small bit set).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    /// No rights (a region only its owner uses).
    pub const NONE: Self = Self(0);
    /// Target of `UET_WRITE`.
    pub const REMOTE_WRITE: Self = Self(0x01);
    /// Source of `UET_READ`.
    pub const REMOTE_READ: Self = Self(0x02);
    /// Target of atomics (reserved: atomics are not implemented, so no
    /// request uses it yet).
    pub const ATOMIC: Self = Self(0x04);
    /// Holds posted receives for `UET_SEND` / `UET_TAGGED_SEND`.
    pub const RECV: Self = Self(0x08);
    /// Accepts requests without a memory key: the small request form
    /// (`UET_HDR_REQUEST_SMALL`, §4.3) has no `memory_key` field, so it can
    /// only reach regions registered with this right. Not a remote right on
    /// its own.
    pub const UNKEYED: Self = Self(0x10);
    /// Every right defined.
    pub const ALL: Self = Self(0x1f);

    const NAMES: [(Self, &'static str); 5] = [
        (Self::REMOTE_WRITE, "REMOTE_WRITE"),
        (Self::REMOTE_READ, "REMOTE_READ"),
        (Self::ATOMIC, "ATOMIC"),
        (Self::RECV, "RECV"),
        (Self::UNKEYED, "UNKEYED"),
    ];

    /// Both sets.
    #[must_use]
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Whether every right in `other` is in `self`.
    #[must_use]
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// The raw bits.
    #[must_use]
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// From raw bits, `None` if a bit no right defines is set.
    #[must_use]
    pub const fn from_bits(bits: u8) -> Option<Self> {
        if bits & !Self::ALL.0 == 0 {
            Some(Self(bits))
        } else {
            None
        }
    }

    /// From raw bits; bits no right defines are dropped.
    #[must_use]
    pub const fn from_bits_truncate(bits: u8) -> Self {
        Self(bits & Self::ALL.0)
    }
}

impl BitOr for Access {
    type Output = Self;

    fn bitor(self, rhs: Self) -> Self {
        self.union(rhs)
    }
}

impl BitOrAssign for Access {
    fn bitor_assign(&mut self, rhs: Self) {
        *self = self.union(rhs);
    }
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("NONE");
        }
        let mut first = true;
        for (a, name) in Self::NAMES {
            if self.contains(a) {
                if !first {
                    f.write_str(" | ")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_round_trip_and_undefined_bits_are_refused_or_dropped() {
        for b in 0..=u8::MAX {
            match Access::from_bits(b) {
                Some(a) => assert_eq!(a.bits(), b),
                None => assert_ne!(b & !0x1f, 0),
            }
            assert_eq!(Access::from_bits_truncate(b).bits(), b & 0x1f);
        }
    }

    #[test]
    fn debug_names_every_right() {
        extern crate std;
        use std::format;
        assert_eq!(format!("{:?}", Access::NONE), "NONE");
        assert_eq!(
            format!("{:?}", Access::REMOTE_WRITE | Access::RECV),
            "REMOTE_WRITE | RECV"
        );
        assert!(Access::ALL.contains(Access::UNKEYED | Access::ATOMIC));
    }
}
