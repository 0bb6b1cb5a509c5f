//! The one error type of the wire layer.
//!
//! Every failure names the header it happened in ([`Layer`]), what was wrong
//! ([`ErrorKind`]) and the byte offset where it was detected. Offsets start
//! relative to the header being parsed; [`crate::frame::parse_frame`] rebases
//! them onto the whole frame with [`Error::at`], so `uet decode` can say
//! "PDS: truncated header (need 12 bytes) at byte 42".

use core::fmt;

/// The protocol layer a parse error was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layer {
    /// Ethernet II and its optional 802.1Q tag.
    Ethernet,
    /// IPv4.
    Ipv4,
    /// IPv6.
    Ipv6,
    /// UDP.
    Udp,
    /// The 4-byte entropy header of UET directly over IP.
    Entropy,
    /// The TSS security header.
    Tss,
    /// A PDS header.
    Pds,
    /// A SES request, extension or response header.
    Ses,
    /// The CRC32C trailer.
    Trailer,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Ethernet => "Ethernet",
            Self::Ipv4 => "IPv4",
            Self::Ipv6 => "IPv6",
            Self::Udp => "UDP",
            Self::Entropy => "entropy header",
            Self::Tss => "TSS",
            Self::Pds => "PDS",
            Self::Ses => "SES",
            Self::Trailer => "CRC trailer",
        })
    }
}

/// What was wrong with the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The buffer ends before the header does: `need` bytes were required.
    Truncated {
        /// Bytes the header needs from its start.
        need: usize,
    },
    /// A length field disagrees with the buffer or with the header's minimum.
    BadLength,
    /// A checksum or CRC did not verify.
    BadChecksum,
    /// A version field holds a value this implementation does not speak.
    BadVersion,
    /// A type or code field holds a value the spec reserves (the value is given).
    Reserved(u8),
    /// A field holds a value outside its defined range.
    OutOfRange,
    /// The frame is not UET (wrong EtherType, protocol or port): not an error of
    /// the bytes, but nothing the UET parser can walk further.
    NotUet,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated { need } => write!(f, "truncated header (need {need} bytes)"),
            Self::BadLength => f.write_str("bad length field"),
            Self::BadChecksum => f.write_str("checksum mismatch"),
            Self::BadVersion => f.write_str("unsupported version"),
            Self::Reserved(v) => write!(f, "reserved value {v:#x}"),
            Self::OutOfRange => f.write_str("value out of range"),
            Self::NotUet => f.write_str("not a UET packet"),
        }
    }
}

/// A parse error: layer, kind and byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Error {
    /// The header the error is in.
    pub layer: Layer,
    /// What was wrong.
    pub kind: ErrorKind,
    /// Byte offset of the offending field (relative to the header, or to the
    /// frame once [`Error::at`] rebased it).
    pub offset: usize,
}

impl Error {
    /// An error at `offset` within the header.
    #[must_use]
    pub const fn new(layer: Layer, kind: ErrorKind, offset: usize) -> Self {
        Self {
            layer,
            kind,
            offset,
        }
    }

    /// A truncation error: the header of `layer` needs `need` bytes.
    #[must_use]
    pub const fn truncated(layer: Layer, need: usize, have: usize) -> Self {
        Self::new(layer, ErrorKind::Truncated { need }, have)
    }

    /// The same error with its offset moved by `base` bytes (the header's
    /// position in the enclosing buffer).
    #[must_use]
    pub const fn at(self, base: usize) -> Self {
        Self {
            offset: self.offset.saturating_add(base),
            ..self
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} at byte {}", self.layer, self.kind, self.offset)
    }
}

impl core::error::Error for Error {}

/// Result alias of the wire layer.
pub type Result<T> = core::result::Result<T, Error>;
