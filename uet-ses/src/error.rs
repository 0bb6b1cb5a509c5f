//! Errors of the packet-writing calls and of building a message (local
//! misuse or resources; wire-side failures are SES return codes instead).

use core::fmt;

/// Why a packet could not be written into the caller's buffer. Nothing is
/// written when this is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EmitError {
    /// The buffer is shorter than the packet; `required` bytes are needed.
    BufferTooSmall {
        /// Bytes the packet needs.
        required: usize,
    },
    /// The packet index is past the last packet.
    NoSuchPacket,
    /// The local memory does not hold the bytes the operation names
    /// (offset + length beyond it).
    LocalOutOfBounds,
}

impl fmt::Display for EmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BufferTooSmall { required } => {
                write!(f, "buffer too small: need {required} bytes")
            }
            Self::NoSuchPacket => f.write_str("no such packet"),
            Self::LocalOutOfBounds => f.write_str("local buffer too small for the message"),
        }
    }
}

impl core::error::Error for EmitError {}

/// Why [`crate::Endpoint::submit`] (or building a message) refused an
/// operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubmitError {
    /// The local buffer is not registered with
    /// [`crate::Endpoint::register_local`].
    UnknownLocalRegion,
    /// The local buffer is shorter than offset + length.
    LocalOutOfBounds,
    /// No PDC could be opened (table full).
    NoPdc,
    /// Every message ID is in use towards this PDC.
    TooManyInFlight,
    /// `max_ses_len` leaves no room for payload after the 44-byte standard
    /// header; at least `min` is needed.
    MaxSesLenTooSmall {
        /// The smallest usable `max_ses_len`.
        min: usize,
    },
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownLocalRegion => f.write_str("local region not registered"),
            Self::LocalOutOfBounds => f.write_str("local buffer too short"),
            Self::NoPdc => f.write_str("no PDC available"),
            Self::TooManyInFlight => f.write_str("too many operations in flight"),
            Self::MaxSesLenTooSmall { min } => {
                write!(f, "max SES length too small: need at least {min}")
            }
        }
    }
}

impl core::error::Error for SubmitError {}
