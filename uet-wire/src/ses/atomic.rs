//! Atomic opcodes and datatypes of the atomic extension header
//! (`docs/protocol-notes.md` §4.8).

use core::fmt;

/// An atomic (AMO) opcode (8 bits, §4.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicOpcode {
    /// 0x00 `MIN`.
    Min,
    /// 0x01 `MAX`.
    Max,
    /// 0x02 `SUM`.
    Sum,
    /// 0x03 `DIFF`.
    Diff,
    /// 0x04 `PROD`.
    Prod,
    /// 0x05 `LOR`: logical or.
    Lor,
    /// 0x06 `LAND`: logical and.
    Land,
    /// 0x07 `BOR`: bitwise or.
    Bor,
    /// 0x08 `BAND`: bitwise and.
    Band,
    /// 0x09 `LXOR`: logical xor.
    Lxor,
    /// 0x0A `BXOR`: bitwise xor.
    Bxor,
    /// 0x0B `READ`: atomic read.
    Read,
    /// 0x0C `WRITE`: atomic write.
    Write,
    /// 0x0D `CSWAP`: compare (equal) and swap.
    Cswap,
    /// 0x0E `CSWAP_NE`: swap if not equal.
    CswapNe,
    /// 0x0F `CSWAP_LE`: swap if compare ≤ target.
    CswapLe,
    /// 0x10 `CSWAP_LT`: swap if compare < target.
    CswapLt,
    /// 0x11 `CSWAP_GE`: swap if compare ≥ target.
    CswapGe,
    /// 0x12 `CSWAP_GT`: swap if compare > target.
    CswapGt,
    /// 0x13 `MSWAP`: masked swap (the compare operand carries the mask).
    Mswap,
    /// 0x14 `INVAL`: invalidate.
    Inval,
    /// 0xE0-0xFE: vendor defined. The raw value is kept.
    Vendor(u8),
    /// Any other value (0x15-0xDF reserved, 0xFF). The raw value is kept.
    Unknown(u8),
}

impl AtomicOpcode {
    /// Decodes an atomic opcode (total).
    #[must_use]
    pub const fn from_u8(v: u8) -> Self {
        match v {
            0x00 => Self::Min,
            0x01 => Self::Max,
            0x02 => Self::Sum,
            0x03 => Self::Diff,
            0x04 => Self::Prod,
            0x05 => Self::Lor,
            0x06 => Self::Land,
            0x07 => Self::Bor,
            0x08 => Self::Band,
            0x09 => Self::Lxor,
            0x0a => Self::Bxor,
            0x0b => Self::Read,
            0x0c => Self::Write,
            0x0d => Self::Cswap,
            0x0e => Self::CswapNe,
            0x0f => Self::CswapLe,
            0x10 => Self::CswapLt,
            0x11 => Self::CswapGe,
            0x12 => Self::CswapGt,
            0x13 => Self::Mswap,
            0x14 => Self::Inval,
            0xe0..=0xfe => Self::Vendor(v),
            other => Self::Unknown(other),
        }
    }

    /// The 8-bit wire value.
    #[must_use]
    pub const fn code(self) -> u8 {
        match self {
            Self::Min => 0x00,
            Self::Max => 0x01,
            Self::Sum => 0x02,
            Self::Diff => 0x03,
            Self::Prod => 0x04,
            Self::Lor => 0x05,
            Self::Land => 0x06,
            Self::Bor => 0x07,
            Self::Band => 0x08,
            Self::Lxor => 0x09,
            Self::Bxor => 0x0a,
            Self::Read => 0x0b,
            Self::Write => 0x0c,
            Self::Cswap => 0x0d,
            Self::CswapNe => 0x0e,
            Self::CswapLe => 0x0f,
            Self::CswapLt => 0x10,
            Self::CswapGe => 0x11,
            Self::CswapGt => 0x12,
            Self::Mswap => 0x13,
            Self::Inval => 0x14,
            Self::Vendor(v) | Self::Unknown(v) => v,
        }
    }

    /// The spec name (`SUM`, `CSWAP_NE`, …; REFPROV prefixes them with
    /// `UET_AMO_`); `VENDOR` or `UNKNOWN` otherwise.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Min => "MIN",
            Self::Max => "MAX",
            Self::Sum => "SUM",
            Self::Diff => "DIFF",
            Self::Prod => "PROD",
            Self::Lor => "LOR",
            Self::Land => "LAND",
            Self::Bor => "BOR",
            Self::Band => "BAND",
            Self::Lxor => "LXOR",
            Self::Bxor => "BXOR",
            Self::Read => "READ",
            Self::Write => "WRITE",
            Self::Cswap => "CSWAP",
            Self::CswapNe => "CSWAP_NE",
            Self::CswapLe => "CSWAP_LE",
            Self::CswapLt => "CSWAP_LT",
            Self::CswapGe => "CSWAP_GE",
            Self::CswapGt => "CSWAP_GT",
            Self::Mswap => "MSWAP",
            Self::Inval => "INVAL",
            Self::Vendor(_) => "VENDOR",
            Self::Unknown(_) => "UNKNOWN",
        }
    }

    /// Whether the operation takes two operands and so travels with the
    /// 36-byte compare-and-swap extension (§4.4) instead of the 4-byte atomic
    /// extension: the CSWAP family (`CSWAP` … `CSWAP_GT`) and `MSWAP`, whose
    /// `compare_value` carries the mask.
    ///
    /// Sources: REFPROV defines the compare/swap extension for these
    /// compare-style operations; Wireshark selects it for the six CSWAP codes
    /// only. `MSWAP` is included here because it is a two-operand operation
    /// (libfabric groups it with the compare atomics) and has nowhere else to
    /// carry its mask \[I\].
    #[must_use]
    pub const fn is_compare_swap(self) -> bool {
        matches!(
            self,
            Self::Cswap
                | Self::CswapNe
                | Self::CswapLe
                | Self::CswapLt
                | Self::CswapGe
                | Self::CswapGt
                | Self::Mswap
        )
    }
}

impl fmt::Display for AtomicOpcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Vendor(v) | Self::Unknown(v) => write!(f, "{}({v:#04x})", self.name()),
            _ => f.write_str(self.name()),
        }
    }
}

/// An atomic datatype (8 bits, §4.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicDatatype {
    /// 0x00 `INT8`.
    Int8,
    /// 0x01 `UINT8`.
    Uint8,
    /// 0x02 `INT16`.
    Int16,
    /// 0x03 `UINT16`.
    Uint16,
    /// 0x04 `INT32`.
    Int32,
    /// 0x05 `UINT32`.
    Uint32,
    /// 0x06 `INT64`.
    Int64,
    /// 0x07 `UINT64`.
    Uint64,
    /// 0x08 `INT128`.
    Int128,
    /// 0x09 `UINT128`.
    Uint128,
    /// 0x0A `FLOAT` (IEEE 754 binary32).
    Float,
    /// 0x0B `DOUBLE` (binary64).
    Double,
    /// 0x0C `FLOAT_COMPLEX` (two binary32).
    FloatComplex,
    /// 0x0D `DOUBLE_COMPLEX` (two binary64).
    DoubleComplex,
    /// 0x0E `LONG_DOUBLE`.
    LongDouble,
    /// 0x0F `LONG_DOUBLE_COMPLEX`.
    LongDoubleComplex,
    /// 0x10 `BF16` (bfloat16).
    Bf16,
    /// 0x11 `FP16` (binary16).
    Fp16,
    /// Any other value. The raw value is kept.
    Unknown(u8),
}

impl AtomicDatatype {
    /// Decodes a datatype (total).
    #[must_use]
    pub const fn from_u8(v: u8) -> Self {
        match v {
            0x00 => Self::Int8,
            0x01 => Self::Uint8,
            0x02 => Self::Int16,
            0x03 => Self::Uint16,
            0x04 => Self::Int32,
            0x05 => Self::Uint32,
            0x06 => Self::Int64,
            0x07 => Self::Uint64,
            0x08 => Self::Int128,
            0x09 => Self::Uint128,
            0x0a => Self::Float,
            0x0b => Self::Double,
            0x0c => Self::FloatComplex,
            0x0d => Self::DoubleComplex,
            0x0e => Self::LongDouble,
            0x0f => Self::LongDoubleComplex,
            0x10 => Self::Bf16,
            0x11 => Self::Fp16,
            other => Self::Unknown(other),
        }
    }

    /// The 8-bit wire value.
    #[must_use]
    pub const fn code(self) -> u8 {
        match self {
            Self::Int8 => 0x00,
            Self::Uint8 => 0x01,
            Self::Int16 => 0x02,
            Self::Uint16 => 0x03,
            Self::Int32 => 0x04,
            Self::Uint32 => 0x05,
            Self::Int64 => 0x06,
            Self::Uint64 => 0x07,
            Self::Int128 => 0x08,
            Self::Uint128 => 0x09,
            Self::Float => 0x0a,
            Self::Double => 0x0b,
            Self::FloatComplex => 0x0c,
            Self::DoubleComplex => 0x0d,
            Self::LongDouble => 0x0e,
            Self::LongDoubleComplex => 0x0f,
            Self::Bf16 => 0x10,
            Self::Fp16 => 0x11,
            Self::Unknown(v) => v,
        }
    }

    /// The spec name (`UINT64`, `FP16`, …; REFPROV prefixes them with
    /// `UET_TYPE_`); `UNKNOWN` otherwise.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Int8 => "INT8",
            Self::Uint8 => "UINT8",
            Self::Int16 => "INT16",
            Self::Uint16 => "UINT16",
            Self::Int32 => "INT32",
            Self::Uint32 => "UINT32",
            Self::Int64 => "INT64",
            Self::Uint64 => "UINT64",
            Self::Int128 => "INT128",
            Self::Uint128 => "UINT128",
            Self::Float => "FLOAT",
            Self::Double => "DOUBLE",
            Self::FloatComplex => "FLOAT_COMPLEX",
            Self::DoubleComplex => "DOUBLE_COMPLEX",
            Self::LongDouble => "LONG_DOUBLE",
            Self::LongDoubleComplex => "LONG_DOUBLE_COMPLEX",
            Self::Bf16 => "BF16",
            Self::Fp16 => "FP16",
            Self::Unknown(_) => "UNKNOWN",
        }
    }

    /// The size of one element in bytes, `None` for an unknown datatype.
    ///
    /// `LONG_DOUBLE` is taken as 16 bytes (the storage size of the x86-64
    /// and AArch64 `long double`, as libfabric's `FI_LONG_DOUBLE` uses) \[I\]:
    /// the notes do not give its width.
    #[must_use]
    pub const fn size_bytes(self) -> Option<usize> {
        Some(match self {
            Self::Int8 | Self::Uint8 => 1,
            Self::Int16 | Self::Uint16 | Self::Bf16 | Self::Fp16 => 2,
            Self::Int32 | Self::Uint32 | Self::Float => 4,
            Self::Int64 | Self::Uint64 | Self::Double | Self::FloatComplex => 8,
            Self::Int128 | Self::Uint128 | Self::DoubleComplex | Self::LongDouble => 16,
            Self::LongDoubleComplex => 32,
            Self::Unknown(_) => return None,
        })
    }
}

impl fmt::Display for AtomicDatatype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown(v) => write!(f, "UNKNOWN({v:#04x})"),
            _ => f.write_str(self.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn opcodes() {
        assert_eq!(AtomicOpcode::from_u8(0x02), AtomicOpcode::Sum);
        assert_eq!(AtomicOpcode::from_u8(0x14), AtomicOpcode::Inval);
        assert_eq!(AtomicOpcode::from_u8(0x15), AtomicOpcode::Unknown(0x15));
        assert_eq!(AtomicOpcode::from_u8(0xe0), AtomicOpcode::Vendor(0xe0));
        assert_eq!(AtomicOpcode::from_u8(0xfe), AtomicOpcode::Vendor(0xfe));
        assert_eq!(AtomicOpcode::from_u8(0xff), AtomicOpcode::Unknown(0xff));
        assert_eq!(AtomicOpcode::CswapNe.to_string(), "CSWAP_NE");
        let cas: [u8; 7] = [0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13];
        for v in 0..=255u8 {
            assert_eq!(
                AtomicOpcode::from_u8(v).is_compare_swap(),
                cas.contains(&v),
                "{v}"
            );
        }
    }

    #[test]
    fn datatypes() {
        assert_eq!(AtomicDatatype::from_u8(0x07), AtomicDatatype::Uint64);
        assert_eq!(AtomicDatatype::Uint64.size_bytes(), Some(8));
        assert_eq!(AtomicDatatype::Uint128.size_bytes(), Some(16));
        assert_eq!(AtomicDatatype::Fp16.size_bytes(), Some(2));
        assert_eq!(AtomicDatatype::DoubleComplex.size_bytes(), Some(16));
        assert_eq!(AtomicDatatype::from_u8(0x12), AtomicDatatype::Unknown(0x12));
        assert_eq!(AtomicDatatype::Unknown(0x12).size_bytes(), None);
        assert_eq!(AtomicDatatype::Bf16.name(), "BF16");
    }

    proptest! {
        #[test]
        fn round_trip(v: u8) {
            prop_assert_eq!(AtomicOpcode::from_u8(v).code(), v);
            prop_assert_eq!(AtomicDatatype::from_u8(v).code(), v);
        }
    }
}
