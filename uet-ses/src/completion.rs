//! The outcome of a message, as both sides report it.

use core::fmt;

use uet_wire::MessageId;
use uet_wire::ses::ReturnCode;

/// How a message ended: at the initiator (a write, read or send it issued)
/// or at the target (a receive it completed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The message: the initiator's `message_id` (0 for the small and medium
    /// request forms, which carry none, §4.3).
    pub message_id: MessageId,
    /// `Ok`, or why not.
    pub status: Result<(), CompletionError>,
    /// Bytes placed at the destination: the response's `modified_length`
    /// (§4.6) at the initiator, the bytes put into the receive buffer at the
    /// target. Less than the message length after truncation.
    pub modified_length: u64,
}

impl Completion {
    /// A successful completion.
    #[must_use]
    pub const fn ok(message_id: MessageId, modified_length: u64) -> Self {
        Self {
            message_id,
            status: Ok(()),
            modified_length,
        }
    }

    /// A failed completion.
    #[must_use]
    pub const fn err(message_id: MessageId, error: CompletionError, modified_length: u64) -> Self {
        Self {
            message_id,
            status: Err(error),
            modified_length,
        }
    }

    /// Whether it succeeded.
    #[must_use]
    pub const fn is_ok(&self) -> bool {
        self.status.is_ok()
    }
}

impl fmt::Display for Completion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "msg={} ", self.message_id)?;
        match self.status {
            Ok(()) => f.write_str("ok")?,
            Err(e) => write!(f, "error: {e}")?,
        }
        write!(f, " mod_len={}", self.modified_length)
    }
}

/// Why a message failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompletionError {
    /// The peer answered with this SES return code (§4.7).
    Remote(ReturnCode),
    /// Something on this side went wrong.
    Local(LocalError),
}

impl fmt::Display for CompletionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Remote(rc) => write!(f, "peer returned {rc}"),
            Self::Local(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl core::error::Error for CompletionError {}

/// Failures on this side of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LocalError {
    /// The local buffer named by the operation does not hold the message
    /// (offset + length beyond the local memory).
    LocalOutOfBounds,
    /// A receive buffer's region was deregistered or disabled while a
    /// message was being placed into it.
    RecvBufferGone,
}

impl fmt::Display for LocalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::LocalOutOfBounds => "local buffer too small for the message",
            Self::RecvBufferGone => "receive buffer deregistered or disabled",
        })
    }
}

impl core::error::Error for LocalError {}
