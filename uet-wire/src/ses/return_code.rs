//! SES return codes (6 bits, `docs/protocol-notes.md` §4.7), carried in every
//! response header.

use core::fmt;

/// A SES return code. Every value decodes: codes the notes do not name
/// (0x25-0x3F, including the vendor range 0x30-0x37 and the extended code
/// 0x3E) come back as `Unknown(v)` and re-emit unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReturnCode {
    /// 0x00 `RC_NULL`: no status (default responses).
    Null,
    /// 0x01 `RC_OK`.
    Ok,
    /// 0x02 `BAD_GENERATION`: resource-index generation mismatch.
    BadGeneration,
    /// 0x03 `DISABLED`: the resource is disabled.
    Disabled,
    /// 0x04 `DISABLED_GEN`: the generation is disabled.
    DisabledGen,
    /// 0x05 `NO_MATCH`: no matching receive or key.
    NoMatch,
    /// 0x06 `UNSUPPORTED_OP`.
    UnsupportedOp,
    /// 0x07 `UNSUPPORTED_SIZE`.
    UnsupportedSize,
    /// 0x08 `AT_INVALID`: address translation, invalid.
    AtInvalid,
    /// 0x09 `AT_PERM`: address translation, permission.
    AtPerm,
    /// 0x0A `AT_ATS_ERROR`: address translation service error.
    AtAtsError,
    /// 0x0B `AT_NO_TRANS`: no translation.
    AtNoTrans,
    /// 0x0C `AT_OUT_OF_RANGE`.
    AtOutOfRange,
    /// 0x0D `HOST_POISONED`: poisoned host memory.
    HostPoisoned,
    /// 0x0E `HOST_UNSUCCESS_CMPL`: unsuccessful host completion.
    HostUnsuccessCmpl,
    /// 0x0F `AMO_UNSUPPORTED_OP`.
    AmoUnsupportedOp,
    /// 0x10 `AMO_UNSUPPORTED_DT`.
    AmoUnsupportedDt,
    /// 0x11 `AMO_UNSUPPORTED_SIZE`.
    AmoUnsupportedSize,
    /// 0x12 `AMO_UNALIGNED`.
    AmoUnaligned,
    /// 0x13 `AMO_FP_NAN`.
    AmoFpNan,
    /// 0x14 `AMO_FP_UNDERFLOW`.
    AmoFpUnderflow,
    /// 0x15 `AMO_FP_OVERFLOW`.
    AmoFpOverflow,
    /// 0x16 `AMO_FP_INEXACT`.
    AmoFpInexact,
    /// 0x17 `PERM_VIOLATION`.
    PermViolation,
    /// 0x18 `OP_VIOLATION`: e.g. payload longer than `request_length`.
    OpViolation,
    /// 0x19 `BAD_INDEX`: unknown resource index.
    BadIndex,
    /// 0x1A `BAD_PID`.
    BadPid,
    /// 0x1B `BAD_JOB_ID`.
    BadJobId,
    /// 0x1C `BAD_MKEY`: bad memory key.
    BadMkey,
    /// 0x1D `BAD_ADDR`.
    BadAddr,
    /// 0x1E `CANCELLED`.
    Cancelled,
    /// 0x1F `UNDELIVERABLE`.
    Undeliverable,
    /// 0x20 `UNCOR`: uncorrectable error.
    Uncor,
    /// 0x21 `UNCOR_TRNSNT`: uncorrectable transient error.
    UncorTrnsnt,
    /// 0x22 `TOO_LONG`.
    TooLong,
    /// 0x23 `INITIATOR_ERR`: echoes the request's `ie` flag.
    InitiatorErr,
    /// 0x24 `DROPPED`.
    Dropped,
    /// Any other value (reserved, vendor 0x30-0x37, extended 0x3E).
    Unknown(u8),
}

impl ReturnCode {
    /// Decodes a return code (total).
    #[must_use]
    pub const fn from_u8(v: u8) -> Self {
        match v {
            0x00 => Self::Null,
            0x01 => Self::Ok,
            0x02 => Self::BadGeneration,
            0x03 => Self::Disabled,
            0x04 => Self::DisabledGen,
            0x05 => Self::NoMatch,
            0x06 => Self::UnsupportedOp,
            0x07 => Self::UnsupportedSize,
            0x08 => Self::AtInvalid,
            0x09 => Self::AtPerm,
            0x0a => Self::AtAtsError,
            0x0b => Self::AtNoTrans,
            0x0c => Self::AtOutOfRange,
            0x0d => Self::HostPoisoned,
            0x0e => Self::HostUnsuccessCmpl,
            0x0f => Self::AmoUnsupportedOp,
            0x10 => Self::AmoUnsupportedDt,
            0x11 => Self::AmoUnsupportedSize,
            0x12 => Self::AmoUnaligned,
            0x13 => Self::AmoFpNan,
            0x14 => Self::AmoFpUnderflow,
            0x15 => Self::AmoFpOverflow,
            0x16 => Self::AmoFpInexact,
            0x17 => Self::PermViolation,
            0x18 => Self::OpViolation,
            0x19 => Self::BadIndex,
            0x1a => Self::BadPid,
            0x1b => Self::BadJobId,
            0x1c => Self::BadMkey,
            0x1d => Self::BadAddr,
            0x1e => Self::Cancelled,
            0x1f => Self::Undeliverable,
            0x20 => Self::Uncor,
            0x21 => Self::UncorTrnsnt,
            0x22 => Self::TooLong,
            0x23 => Self::InitiatorErr,
            0x24 => Self::Dropped,
            other => Self::Unknown(other),
        }
    }

    /// The 6-bit wire value (an `Unknown` value is masked to 6 bits).
    #[must_use]
    pub const fn code(self) -> u8 {
        match self {
            Self::Null => 0x00,
            Self::Ok => 0x01,
            Self::BadGeneration => 0x02,
            Self::Disabled => 0x03,
            Self::DisabledGen => 0x04,
            Self::NoMatch => 0x05,
            Self::UnsupportedOp => 0x06,
            Self::UnsupportedSize => 0x07,
            Self::AtInvalid => 0x08,
            Self::AtPerm => 0x09,
            Self::AtAtsError => 0x0a,
            Self::AtNoTrans => 0x0b,
            Self::AtOutOfRange => 0x0c,
            Self::HostPoisoned => 0x0d,
            Self::HostUnsuccessCmpl => 0x0e,
            Self::AmoUnsupportedOp => 0x0f,
            Self::AmoUnsupportedDt => 0x10,
            Self::AmoUnsupportedSize => 0x11,
            Self::AmoUnaligned => 0x12,
            Self::AmoFpNan => 0x13,
            Self::AmoFpUnderflow => 0x14,
            Self::AmoFpOverflow => 0x15,
            Self::AmoFpInexact => 0x16,
            Self::PermViolation => 0x17,
            Self::OpViolation => 0x18,
            Self::BadIndex => 0x19,
            Self::BadPid => 0x1a,
            Self::BadJobId => 0x1b,
            Self::BadMkey => 0x1c,
            Self::BadAddr => 0x1d,
            Self::Cancelled => 0x1e,
            Self::Undeliverable => 0x1f,
            Self::Uncor => 0x20,
            Self::UncorTrnsnt => 0x21,
            Self::TooLong => 0x22,
            Self::InitiatorErr => 0x23,
            Self::Dropped => 0x24,
            Self::Unknown(v) => v & 0x3f,
        }
    }

    /// The spec name (`RC_OK`, `BAD_GENERATION`, …). Unnamed codes give
    /// `VENDOR` (0x30-0x37), `EXTENDED` (0x3E) or `UNKNOWN`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Null => "RC_NULL",
            Self::Ok => "RC_OK",
            Self::BadGeneration => "BAD_GENERATION",
            Self::Disabled => "DISABLED",
            Self::DisabledGen => "DISABLED_GEN",
            Self::NoMatch => "NO_MATCH",
            Self::UnsupportedOp => "UNSUPPORTED_OP",
            Self::UnsupportedSize => "UNSUPPORTED_SIZE",
            Self::AtInvalid => "AT_INVALID",
            Self::AtPerm => "AT_PERM",
            Self::AtAtsError => "AT_ATS_ERROR",
            Self::AtNoTrans => "AT_NO_TRANS",
            Self::AtOutOfRange => "AT_OUT_OF_RANGE",
            Self::HostPoisoned => "HOST_POISONED",
            Self::HostUnsuccessCmpl => "HOST_UNSUCCESS_CMPL",
            Self::AmoUnsupportedOp => "AMO_UNSUPPORTED_OP",
            Self::AmoUnsupportedDt => "AMO_UNSUPPORTED_DT",
            Self::AmoUnsupportedSize => "AMO_UNSUPPORTED_SIZE",
            Self::AmoUnaligned => "AMO_UNALIGNED",
            Self::AmoFpNan => "AMO_FP_NAN",
            Self::AmoFpUnderflow => "AMO_FP_UNDERFLOW",
            Self::AmoFpOverflow => "AMO_FP_OVERFLOW",
            Self::AmoFpInexact => "AMO_FP_INEXACT",
            Self::PermViolation => "PERM_VIOLATION",
            Self::OpViolation => "OP_VIOLATION",
            Self::BadIndex => "BAD_INDEX",
            Self::BadPid => "BAD_PID",
            Self::BadJobId => "BAD_JOB_ID",
            Self::BadMkey => "BAD_MKEY",
            Self::BadAddr => "BAD_ADDR",
            Self::Cancelled => "CANCELLED",
            Self::Undeliverable => "UNDELIVERABLE",
            Self::Uncor => "UNCOR",
            Self::UncorTrnsnt => "UNCOR_TRNSNT",
            Self::TooLong => "TOO_LONG",
            Self::InitiatorErr => "INITIATOR_ERR",
            Self::Dropped => "DROPPED",
            Self::Unknown(0x30..=0x37) => "VENDOR",
            Self::Unknown(0x3e) => "EXTENDED",
            Self::Unknown(_) => "UNKNOWN",
        }
    }

    /// Whether the code reports success (`RC_OK`, or `RC_NULL` of a default
    /// response).
    #[must_use]
    pub const fn is_ok(self) -> bool {
        matches!(self, Self::Ok | Self::Null)
    }
}

impl fmt::Display for ReturnCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown(v) => write!(f, "{}({v:#04x})", self.name()),
            _ => f.write_str(self.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn spec_names() {
        assert_eq!(ReturnCode::from_u8(0x00).name(), "RC_NULL");
        assert_eq!(ReturnCode::from_u8(0x01).name(), "RC_OK");
        assert_eq!(ReturnCode::from_u8(0x02).name(), "BAD_GENERATION");
        assert_eq!(ReturnCode::from_u8(0x17).name(), "PERM_VIOLATION");
        assert_eq!(ReturnCode::from_u8(0x1b).name(), "BAD_JOB_ID");
        assert_eq!(ReturnCode::from_u8(0x22).name(), "TOO_LONG");
        assert_eq!(ReturnCode::from_u8(0x24).name(), "DROPPED");
    }

    #[test]
    fn unnamed_codes_are_unknown() {
        assert_eq!(ReturnCode::from_u8(0x25), ReturnCode::Unknown(0x25));
        assert_eq!(ReturnCode::from_u8(0x31).to_string(), "VENDOR(0x31)");
        assert_eq!(ReturnCode::from_u8(0x3e).name(), "EXTENDED");
        assert_eq!(ReturnCode::from_u8(0x2a).to_string(), "UNKNOWN(0x2a)");
        assert_eq!(ReturnCode::from_u8(0xff), ReturnCode::Unknown(0xff));
    }

    proptest! {
        #[test]
        fn six_bit_round_trip(v in 0u8..64) {
            prop_assert_eq!(ReturnCode::from_u8(v).code(), v);
        }

        #[test]
        fn total(v: u8) {
            let rc = ReturnCode::from_u8(v);
            prop_assert!(!rc.name().is_empty());
        }
    }
}
