//! SES opcodes (`docs/protocol-notes.md` §4.5, §4.6): the 6-bit request opcode,
//! the 6-bit response opcode and the 2-bit `list` of responses.
//!
//! Every 6-bit value decodes: codes the spec leaves reserved or to vendors
//! keep their raw value, so a header with an opcode this implementation does
//! not know still parses, prints and re-emits unchanged.

use core::fmt;

use super::atomic::AtomicOpcode;

/// A SES request opcode (6 bits, §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// 0x00 `UET_NO_OP`.
    NoOp,
    /// 0x01 `UET_WRITE`: RMA write.
    Write,
    /// 0x02 `UET_READ`: RMA read.
    Read,
    /// 0x03 `UET_ATOMIC`: non-fetching atomic (atomic extension).
    Atomic,
    /// 0x04 `UET_FETCHING_ATOMIC` (atomic extension).
    FetchingAtomic,
    /// 0x05 `UET_SEND`: untagged send.
    Send,
    /// 0x06 `UET_RENDEZVOUS_SEND` (rendezvous extension).
    RendezvousSend,
    /// 0x07 `UET_DATAGRAM_SEND`: single-packet send (UUD).
    DatagramSend,
    /// 0x08 `UET_DEFERRABLE_SEND`: `buffer_offset` carries a restart token.
    DeferrableSend,
    /// 0x09 `UET_TAGGED_SEND` (TSEND).
    TaggedSend,
    /// 0x0A `UET_RENDEZVOUS_TSEND` (rendezvous extension).
    RendezvousTsend,
    /// 0x0B `UET_DEFERRABLE_TSEND`.
    DeferrableTsend,
    /// 0x0C `UET_DEFERRABLE_RTR` (ready to restart): `memory_key` carries a
    /// restart token.
    DeferrableRtr,
    /// 0x0D `UET_TSEND_ATOMIC` (atomic extension).
    TsendAtomic,
    /// 0x0E `UET_TSEND_FETCH_ATOMIC` (atomic extension).
    TsendFetchAtomic,
    /// 0x0F `UET_MSG_ERROR`.
    MsgError,
    /// 0x10-0x2F: reserved in 1.0 (REFPROV uses 0x10 `SYNC_WRITE` and 0x11
    /// `SYNC_ATOMIC`, probably post-1.0). The raw value is kept.
    Reserved(u8),
    /// 0x30-0x3E: vendor defined. The raw value is kept.
    Vendor(u8),
    /// 0x3F: extended opcode (XDP2).
    Extended,
}

impl Opcode {
    /// Decodes an opcode. Total: values outside 0x00-0x3F (which a 6-bit
    /// field cannot hold) come back as `Reserved(v)`.
    #[must_use]
    pub const fn from_u8(v: u8) -> Self {
        match v {
            0x00 => Self::NoOp,
            0x01 => Self::Write,
            0x02 => Self::Read,
            0x03 => Self::Atomic,
            0x04 => Self::FetchingAtomic,
            0x05 => Self::Send,
            0x06 => Self::RendezvousSend,
            0x07 => Self::DatagramSend,
            0x08 => Self::DeferrableSend,
            0x09 => Self::TaggedSend,
            0x0a => Self::RendezvousTsend,
            0x0b => Self::DeferrableTsend,
            0x0c => Self::DeferrableRtr,
            0x0d => Self::TsendAtomic,
            0x0e => Self::TsendFetchAtomic,
            0x0f => Self::MsgError,
            0x30..=0x3e => Self::Vendor(v),
            0x3f => Self::Extended,
            _ => Self::Reserved(v),
        }
    }

    /// The 6-bit wire value. A hand-built `Reserved`/`Vendor` value is masked
    /// to 6 bits; one outside its class re-parses as whatever it names.
    #[must_use]
    pub const fn code(self) -> u8 {
        match self {
            Self::NoOp => 0x00,
            Self::Write => 0x01,
            Self::Read => 0x02,
            Self::Atomic => 0x03,
            Self::FetchingAtomic => 0x04,
            Self::Send => 0x05,
            Self::RendezvousSend => 0x06,
            Self::DatagramSend => 0x07,
            Self::DeferrableSend => 0x08,
            Self::TaggedSend => 0x09,
            Self::RendezvousTsend => 0x0a,
            Self::DeferrableTsend => 0x0b,
            Self::DeferrableRtr => 0x0c,
            Self::TsendAtomic => 0x0d,
            Self::TsendFetchAtomic => 0x0e,
            Self::MsgError => 0x0f,
            Self::Reserved(v) | Self::Vendor(v) => v & 0x3f,
            Self::Extended => 0x3f,
        }
    }

    /// The spec name (`UET_WRITE`, `UET_TAGGED_SEND`, …); `RESERVED`,
    /// `VENDOR` and `EXTENDED` for the unnamed ranges.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::NoOp => "UET_NO_OP",
            Self::Write => "UET_WRITE",
            Self::Read => "UET_READ",
            Self::Atomic => "UET_ATOMIC",
            Self::FetchingAtomic => "UET_FETCHING_ATOMIC",
            Self::Send => "UET_SEND",
            Self::RendezvousSend => "UET_RENDEZVOUS_SEND",
            Self::DatagramSend => "UET_DATAGRAM_SEND",
            Self::DeferrableSend => "UET_DEFERRABLE_SEND",
            Self::TaggedSend => "UET_TAGGED_SEND",
            Self::RendezvousTsend => "UET_RENDEZVOUS_TSEND",
            Self::DeferrableTsend => "UET_DEFERRABLE_TSEND",
            Self::DeferrableRtr => "UET_DEFERRABLE_RTR",
            Self::TsendAtomic => "UET_TSEND_ATOMIC",
            Self::TsendFetchAtomic => "UET_TSEND_FETCH_ATOMIC",
            Self::MsgError => "UET_MSG_ERROR",
            Self::Reserved(_) => "RESERVED",
            Self::Vendor(_) => "VENDOR",
            Self::Extended => "EXTENDED",
        }
    }

    /// Whether a standard request with this opcode is followed by the atomic
    /// extension header (§4.2: ATOMIC, FETCHING_ATOMIC, TSEND_ATOMIC,
    /// TSEND_FETCH_ATOMIC; REFPROV includes TSEND_ATOMIC, which Wireshark
    /// leaves out — a Wireshark bug per the notes).
    ///
    /// Whether that extension is the 4-byte atomic one or the 36-byte
    /// compare-and-swap one depends on the atomic opcode: see
    /// [`Opcode::has_cas_ext`].
    #[must_use]
    pub const fn has_atomic_ext(self) -> bool {
        matches!(
            self,
            Self::Atomic | Self::FetchingAtomic | Self::TsendAtomic | Self::TsendFetchAtomic
        )
    }

    /// Whether a standard request with this opcode and atomic opcode `amo`
    /// carries the 36-byte compare-and-swap extension in place of the 4-byte
    /// atomic extension.
    ///
    /// There is no separate request opcode for compare-and-swap: it is an
    /// atomic-carrying request (see [`Opcode::has_atomic_ext`]) whose
    /// `atomic_opcode` is a two-operand one (the CSWAP family or MSWAP, see
    /// [`AtomicOpcode::is_compare_swap`]). The extension length therefore
    /// depends on the first byte of the extension itself.
    #[must_use]
    pub const fn has_cas_ext(self, amo: AtomicOpcode) -> bool {
        self.has_atomic_ext() && amo.is_compare_swap()
    }

    /// Whether a standard request with this opcode is followed by the
    /// 24-byte rendezvous extension (RENDEZVOUS_SEND, RENDEZVOUS_TSEND).
    #[must_use]
    pub const fn has_rendezvous_ext(self) -> bool {
        matches!(self, Self::RendezvousSend | Self::RendezvousTsend)
    }

    /// Whether the opcode is a tagged operation, whose 64-bit
    /// `memory_key`/`match_bits` field carries match bits.
    #[must_use]
    pub const fn is_tagged(self) -> bool {
        matches!(
            self,
            Self::TaggedSend
                | Self::RendezvousTsend
                | Self::DeferrableTsend
                | Self::TsendAtomic
                | Self::TsendFetchAtomic
        )
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Reserved(v) | Self::Vendor(v) => write!(f, "{}({v:#04x})", self.name()),
            _ => f.write_str(self.name()),
        }
    }
}

/// A SES response opcode (6 bits, §4.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResponseOpcode {
    /// 0 `UET_DEFAULT_RESPONSE`: generated by the PDS for a duplicate or
    /// otherwise unanswered request.
    DefaultResponse,
    /// 1 `UET_RESPONSE`.
    Response,
    /// 2 `UET_RESPONSE_W_DATA`: a response carrying read data.
    ResponseWithData,
    /// 3 `UET_NO_RESPONSE`.
    NoResponse,
    /// 4-0x2F: reserved. The raw value is kept.
    Reserved(u8),
    /// 0x30-0x3F: vendor defined (XDP2). The raw value is kept.
    Vendor(u8),
}

impl ResponseOpcode {
    /// Decodes a response opcode (total).
    #[must_use]
    pub const fn from_u8(v: u8) -> Self {
        match v {
            0 => Self::DefaultResponse,
            1 => Self::Response,
            2 => Self::ResponseWithData,
            3 => Self::NoResponse,
            0x30..=0x3f => Self::Vendor(v),
            _ => Self::Reserved(v),
        }
    }

    /// The 6-bit wire value (raw values are masked to 6 bits).
    #[must_use]
    pub const fn code(self) -> u8 {
        match self {
            Self::DefaultResponse => 0,
            Self::Response => 1,
            Self::ResponseWithData => 2,
            Self::NoResponse => 3,
            Self::Reserved(v) | Self::Vendor(v) => v & 0x3f,
        }
    }

    /// The spec name (`UET_RESPONSE`, …); `RESERVED` or `VENDOR` otherwise.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::DefaultResponse => "UET_DEFAULT_RESPONSE",
            Self::Response => "UET_RESPONSE",
            Self::ResponseWithData => "UET_RESPONSE_W_DATA",
            Self::NoResponse => "UET_NO_RESPONSE",
            Self::Reserved(_) => "RESERVED",
            Self::Vendor(_) => "VENDOR",
        }
    }
}

impl fmt::Display for ResponseOpcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Reserved(v) | Self::Vendor(v) => write!(f, "{}({v:#04x})", self.name()),
            _ => f.write_str(self.name()),
        }
    }
}

/// The 2-bit `list` of a response (§4.6): which receive list matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListKind {
    /// 0 `EXPECTED`: matched a posted receive.
    Expected,
    /// 1 `OVERFLOW`: landed in the overflow (unexpected) list.
    Overflow,
    /// 2-3: vendor defined (XDP2). The raw value is kept.
    Vendor(u8),
}

impl ListKind {
    /// Decodes a list value (total).
    #[must_use]
    pub const fn from_u8(v: u8) -> Self {
        match v {
            0 => Self::Expected,
            1 => Self::Overflow,
            _ => Self::Vendor(v),
        }
    }

    /// The 2-bit wire value (a raw value is masked to 2 bits).
    #[must_use]
    pub const fn code(self) -> u8 {
        match self {
            Self::Expected => 0,
            Self::Overflow => 1,
            Self::Vendor(v) => v & 0x03,
        }
    }

    /// The spec name (`EXPECTED`, `OVERFLOW`, `VENDOR`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Expected => "EXPECTED",
            Self::Overflow => "OVERFLOW",
            Self::Vendor(_) => "VENDOR",
        }
    }
}

impl fmt::Display for ListKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Vendor(v) => write!(f, "VENDOR({v})"),
            _ => f.write_str(self.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn named_opcodes() {
        assert_eq!(Opcode::from_u8(0x01), Opcode::Write);
        assert_eq!(Opcode::Write.name(), "UET_WRITE");
        assert_eq!(Opcode::from_u8(0x09).name(), "UET_TAGGED_SEND");
        assert_eq!(Opcode::from_u8(0x0f).name(), "UET_MSG_ERROR");
        assert_eq!(Opcode::from_u8(0x10), Opcode::Reserved(0x10));
        assert_eq!(Opcode::from_u8(0x2f), Opcode::Reserved(0x2f));
        assert_eq!(Opcode::from_u8(0x30), Opcode::Vendor(0x30));
        assert_eq!(Opcode::from_u8(0x3e), Opcode::Vendor(0x3e));
        assert_eq!(Opcode::from_u8(0x3f), Opcode::Extended);
        assert_eq!(Opcode::Reserved(0x11).to_string(), "RESERVED(0x11)");
        assert_eq!(Opcode::Extended.code(), 0x3f);
    }

    #[test]
    fn extension_predicates() {
        for op in [
            Opcode::Atomic,
            Opcode::FetchingAtomic,
            Opcode::TsendAtomic,
            Opcode::TsendFetchAtomic,
        ] {
            assert!(op.has_atomic_ext(), "{op}");
            assert!(!op.has_rendezvous_ext());
            assert!(op.has_cas_ext(AtomicOpcode::Cswap));
            assert!(op.has_cas_ext(AtomicOpcode::Mswap));
            assert!(!op.has_cas_ext(AtomicOpcode::Sum));
        }
        assert!(!Opcode::Write.has_cas_ext(AtomicOpcode::Cswap));
        assert!(Opcode::RendezvousSend.has_rendezvous_ext());
        assert!(Opcode::RendezvousTsend.has_rendezvous_ext());
        assert!(Opcode::RendezvousTsend.is_tagged());
        assert!(!Opcode::Send.is_tagged());
        assert!(!Opcode::Vendor(0x31).has_atomic_ext());
    }

    #[test]
    fn response_codes() {
        assert_eq!(ResponseOpcode::from_u8(2).name(), "UET_RESPONSE_W_DATA");
        assert_eq!(ResponseOpcode::from_u8(4), ResponseOpcode::Reserved(4));
        assert_eq!(ResponseOpcode::from_u8(0x3f), ResponseOpcode::Vendor(0x3f));
        assert_eq!(ListKind::from_u8(1), ListKind::Overflow);
        assert_eq!(ListKind::from_u8(3).to_string(), "VENDOR(3)");
    }

    proptest! {
        #[test]
        fn six_bit_codes_round_trip(v in 0u8..64) {
            prop_assert_eq!(Opcode::from_u8(v).code(), v);
            prop_assert_eq!(ResponseOpcode::from_u8(v).code(), v);
        }

        #[test]
        fn list_round_trip(v in 0u8..4) {
            prop_assert_eq!(ListKind::from_u8(v).code(), v);
        }
    }
}
