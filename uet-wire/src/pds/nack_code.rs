//! NACK codes (`docs/protocol-notes.md` §2.9).
//!
//! Values per REFPROV, WS, XDP2 and KRFC, which agree (UETSIM's 0x11-0x13
//! differ and are wrong, §9 item 5). Everything the spec reserves parses as
//! [`NackCode::Unknown`], so new codes still parse:
//!
//! * 0x00 (`UET_NACK_NONE` in REFPROV, reserved) → `Unknown(0x00)`;
//! * 0x0C (reserved; FIRST_ROD_OOO in the pre-1.0 KRFC draft) → `Unknown(0x0C)`;
//! * 0x1B-0xFC → `Unknown(n)`.
//!
//! 0x03 `UET_TRIMMED_ACK` keeps its own variant so 1.0-1.0.2 peers are
//! understood, but it was removed (reserved) in 1.0.3: a trimmed ACK gets no
//! NACK and the RTO recovers (BRIEF). Do not send it.
//!
//! `from_u8` is total and canonical: it never returns `Unknown(n)` for a
//! code that has a variant. Building `Unknown(0x01)` by hand is possible; it
//! emits 0x01 and parses back as `Trimmed`.

use core::fmt;

/// A NACK code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NackCode {
    /// 0x01 UET_TRIMMED: trimmed, not at the last hop.
    Trimmed,
    /// 0x02 UET_TRIMMED_LASTHOP: trimmed at the last-hop switch.
    TrimmedLastHop,
    /// 0x03 UET_TRIMMED_ACK: an ACK carrying read-response data was trimmed.
    /// **Removed (reserved) in 1.0.3**; parsed for older peers, never sent.
    TrimmedAck,
    /// 0x04 NO_PDC_AVAIL: no PDC resource (spdcid = 0).
    NoPdcAvail,
    /// 0x05 NO_CCC_AVAIL: no CCC resource.
    NoCccAvail,
    /// 0x06 NO_BITMAP: no PSN-tracking resource.
    NoBitmap,
    /// 0x07 NO_PKT_BUFFER: no packet buffer.
    NoPktBuffer,
    /// 0x08 NO_GTD_DEL_AVAIL: no guaranteed-delivery response slot.
    NoGtdDelAvail,
    /// 0x09 NO_SES_MSG_AVAIL: no message-tracking state.
    NoSesMsgAvail,
    /// 0x0A NO_RESOURCE: general resource shortage.
    NoResource,
    /// 0x0B PSN_OOR_WINDOW: PSN outside the tracking window (beyond MPR).
    PsnOorWindow,
    /// 0x0D ROD_OOO: out-of-order PSN on a ROD PDC.
    RodOoo,
    /// 0x0E INV_DPDCID: DPDCID unknown and SYN not set.
    InvDpdcid,
    /// 0x0F PDC_HDR_MISMATCH: non-SYN packet does not match the PDC state.
    PdcHdrMismatch,
    /// 0x10 CLOSING: the target PDC is closing and the packet advances the PSN.
    Closing,
    /// 0x11 CLOSING_IN_ERR: timeout at the target during close.
    ClosingInErr,
    /// 0x12 PKT_NOT_RCVD: an ACK_REQ CP names a PSN that was not received.
    PktNotRcvd,
    /// 0x13 GTD_RESP_UNAVAIL: duplicate PSN, stored guaranteed response missing.
    GtdRespUnavail,
    /// 0x14 ACK_WITH_DATA: ACK request for a PSN with read-response data.
    AckWithData,
    /// 0x15 INVALID_SYN: SYN with a PSN outside the expected SYN range.
    InvalidSyn,
    /// 0x16 PDC_MODE_MISMATCH: RUD/ROD mode mismatch.
    PdcModeMismatch,
    /// 0x17 NEW_START_PSN: resend everything from the Start_PSN in `payload`.
    NewStartPsn,
    /// 0x18 RCVD_SES_PROCG: duplicate arrived while SES is still processing.
    RcvdSesProcg,
    /// 0x19 UNEXP_EVENT: unexpected event / unsupported feature.
    UnexpEvent,
    /// 0x1A RCVR_INFER_LOSS: the destination infers a loss.
    RcvrInferLoss,
    /// 0xFD EXP_NACK_NORMAL: experimental.
    ExpNackNormal,
    /// 0xFE EXP_NACK_ERR: experimental.
    ExpNackErr,
    /// 0xFF EXP_NACK_FATAL: experimental.
    ExpNackFatal,
    /// A reserved or unassigned code (0x00, 0x0C, 0x1B-0xFC).
    Unknown(u8),
}

/// What a sender does on a NACK. The mapping in [`NackCode::sender_action`]
/// is REFPROV's `uet_pds_nack_action` (§2.9): an implementation policy, not
/// a normative rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NackAction {
    /// Retransmit the NACKed PSN (bounded by `Max_NACK_Retx_Cnt`).
    Retransmit,
    /// Close the PDC in error.
    Close,
    /// Adopt the new Start_PSN from `payload` and re-drive the PDC.
    ReDrive,
    /// Ignore the NACK; the RTO recovers.
    Drop,
}

impl NackCode {
    /// Decodes a code; total.
    #[must_use]
    pub const fn from_u8(v: u8) -> Self {
        match v {
            0x01 => Self::Trimmed,
            0x02 => Self::TrimmedLastHop,
            0x03 => Self::TrimmedAck,
            0x04 => Self::NoPdcAvail,
            0x05 => Self::NoCccAvail,
            0x06 => Self::NoBitmap,
            0x07 => Self::NoPktBuffer,
            0x08 => Self::NoGtdDelAvail,
            0x09 => Self::NoSesMsgAvail,
            0x0a => Self::NoResource,
            0x0b => Self::PsnOorWindow,
            0x0d => Self::RodOoo,
            0x0e => Self::InvDpdcid,
            0x0f => Self::PdcHdrMismatch,
            0x10 => Self::Closing,
            0x11 => Self::ClosingInErr,
            0x12 => Self::PktNotRcvd,
            0x13 => Self::GtdRespUnavail,
            0x14 => Self::AckWithData,
            0x15 => Self::InvalidSyn,
            0x16 => Self::PdcModeMismatch,
            0x17 => Self::NewStartPsn,
            0x18 => Self::RcvdSesProcg,
            0x19 => Self::UnexpEvent,
            0x1a => Self::RcvrInferLoss,
            0xfd => Self::ExpNackNormal,
            0xfe => Self::ExpNackErr,
            0xff => Self::ExpNackFatal,
            other => Self::Unknown(other),
        }
    }

    /// The 8-bit wire value.
    #[must_use]
    pub const fn code(self) -> u8 {
        match self {
            Self::Trimmed => 0x01,
            Self::TrimmedLastHop => 0x02,
            Self::TrimmedAck => 0x03,
            Self::NoPdcAvail => 0x04,
            Self::NoCccAvail => 0x05,
            Self::NoBitmap => 0x06,
            Self::NoPktBuffer => 0x07,
            Self::NoGtdDelAvail => 0x08,
            Self::NoSesMsgAvail => 0x09,
            Self::NoResource => 0x0a,
            Self::PsnOorWindow => 0x0b,
            Self::RodOoo => 0x0d,
            Self::InvDpdcid => 0x0e,
            Self::PdcHdrMismatch => 0x0f,
            Self::Closing => 0x10,
            Self::ClosingInErr => 0x11,
            Self::PktNotRcvd => 0x12,
            Self::GtdRespUnavail => 0x13,
            Self::AckWithData => 0x14,
            Self::InvalidSyn => 0x15,
            Self::PdcModeMismatch => 0x16,
            Self::NewStartPsn => 0x17,
            Self::RcvdSesProcg => 0x18,
            Self::UnexpEvent => 0x19,
            Self::RcvrInferLoss => 0x1a,
            Self::ExpNackNormal => 0xfd,
            Self::ExpNackErr => 0xfe,
            Self::ExpNackFatal => 0xff,
            Self::Unknown(v) => v,
        }
    }

    /// The spec name (`UET_TRIMMED`, `NO_PDC_AVAIL`, …); `UNKNOWN` for
    /// reserved codes.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Trimmed => "UET_TRIMMED",
            Self::TrimmedLastHop => "UET_TRIMMED_LASTHOP",
            Self::TrimmedAck => "UET_TRIMMED_ACK",
            Self::NoPdcAvail => "NO_PDC_AVAIL",
            Self::NoCccAvail => "NO_CCC_AVAIL",
            Self::NoBitmap => "NO_BITMAP",
            Self::NoPktBuffer => "NO_PKT_BUFFER",
            Self::NoGtdDelAvail => "NO_GTD_DEL_AVAIL",
            Self::NoSesMsgAvail => "NO_SES_MSG_AVAIL",
            Self::NoResource => "NO_RESOURCE",
            Self::PsnOorWindow => "PSN_OOR_WINDOW",
            Self::RodOoo => "ROD_OOO",
            Self::InvDpdcid => "INV_DPDCID",
            Self::PdcHdrMismatch => "PDC_HDR_MISMATCH",
            Self::Closing => "CLOSING",
            Self::ClosingInErr => "CLOSING_IN_ERR",
            Self::PktNotRcvd => "PKT_NOT_RCVD",
            Self::GtdRespUnavail => "GTD_RESP_UNAVAIL",
            Self::AckWithData => "ACK_WITH_DATA",
            Self::InvalidSyn => "INVALID_SYN",
            Self::PdcModeMismatch => "PDC_MODE_MISMATCH",
            Self::NewStartPsn => "NEW_START_PSN",
            Self::RcvdSesProcg => "RCVD_SES_PROCG",
            Self::UnexpEvent => "UNEXP_EVENT",
            Self::RcvrInferLoss => "RCVR_INFER_LOSS",
            Self::ExpNackNormal => "EXP_NACK_NORMAL",
            Self::ExpNackErr => "EXP_NACK_ERR",
            Self::ExpNackFatal => "EXP_NACK_FATAL",
            Self::Unknown(_) => "UNKNOWN",
        }
    }

    /// The receiver lacked a resource for the packet (§2.9 codes 0x04–0x0A:
    /// NO_PDC_AVAIL … NO_RESOURCE): worth sending again, but not at once.
    #[must_use]
    pub const fn is_resource_shortage(self) -> bool {
        matches!(
            self,
            Self::NoPdcAvail
                | Self::NoCccAvail
                | Self::NoBitmap
                | Self::NoPktBuffer
                | Self::NoGtdDelAvail
                | Self::NoSesMsgAvail
                | Self::NoResource
        )
    }

    /// What the sender does, per REFPROV's `uet_pds_nack_action` (§2.9):
    /// **implementation policy**, not normative. NEW_START_PSN re-drives
    /// (REFPROV handles it before the table); RCVD_SES_PROCG and every
    /// unknown code are dropped and left to the RTO.
    #[must_use]
    pub const fn sender_action(self) -> NackAction {
        match self {
            Self::Trimmed
            | Self::TrimmedLastHop
            | Self::TrimmedAck
            | Self::NoPdcAvail
            | Self::NoCccAvail
            | Self::NoBitmap
            | Self::NoPktBuffer
            | Self::NoGtdDelAvail
            | Self::NoSesMsgAvail
            | Self::NoResource
            | Self::PsnOorWindow
            | Self::RodOoo
            | Self::PktNotRcvd
            | Self::AckWithData
            | Self::RcvrInferLoss
            | Self::ExpNackNormal
            | Self::ExpNackErr => NackAction::Retransmit,
            Self::InvDpdcid
            | Self::PdcHdrMismatch
            | Self::Closing
            | Self::ClosingInErr
            | Self::GtdRespUnavail
            | Self::InvalidSyn
            | Self::PdcModeMismatch
            | Self::UnexpEvent
            | Self::ExpNackFatal => NackAction::Close,
            Self::NewStartPsn => NackAction::ReDrive,
            Self::RcvdSesProcg | Self::Unknown(_) => NackAction::Drop,
        }
    }
}

impl From<u8> for NackCode {
    fn from(v: u8) -> Self {
        Self::from_u8(v)
    }
}

impl From<NackCode> for u8 {
    fn from(c: NackCode) -> Self {
        c.code()
    }
}

impl fmt::Display for NackCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown(v) => write!(f, "UNKNOWN({v:#04x})"),
            other => f.write_str(other.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_shortages_are_codes_4_to_10() {
        for c in 0..=255u8 {
            let code = NackCode::from_u8(c);
            assert_eq!(code.is_resource_shortage(), (4..=10).contains(&c), "{c:#x}");
        }
    }

    #[test]
    fn every_code_round_trips() {
        for v in 0..=u8::MAX {
            let c = NackCode::from_u8(v);
            assert_eq!(c.code(), v);
            // Canonical: a named code never decodes to Unknown.
            if let NackCode::Unknown(_) = c {
                assert!(matches!(v, 0x00 | 0x0c | 0x1b..=0xfc), "{v:#x}");
            }
        }
    }

    #[test]
    fn names_and_actions() {
        assert_eq!(NackCode::from_u8(0x01).name(), "UET_TRIMMED");
        assert_eq!(NackCode::from_u8(0x04), NackCode::NoPdcAvail);
        assert_eq!(NackCode::from_u8(0x0b).name(), "PSN_OOR_WINDOW");
        assert_eq!(NackCode::from_u8(0x0d).name(), "ROD_OOO");
        assert_eq!(NackCode::from_u8(0x0e).name(), "INV_DPDCID");
        assert_eq!(NackCode::from_u8(0x1a).name(), "RCVR_INFER_LOSS");
        assert_eq!(NackCode::from_u8(0xfe).name(), "EXP_NACK_ERR");
        assert_eq!(NackCode::from_u8(0x42), NackCode::Unknown(0x42));
        assert_eq!(std::format!("{}", NackCode::Unknown(0x42)), "UNKNOWN(0x42)");
        assert_eq!(NackCode::from_u8(0x0c), NackCode::Unknown(0x0c));
        assert_eq!(NackCode::from_u8(0x00), NackCode::Unknown(0x00));
        assert_eq!(NackCode::TrimmedAck.code(), 0x03);

        assert_eq!(NackCode::Trimmed.sender_action(), NackAction::Retransmit);
        assert_eq!(NackCode::NoPdcAvail.sender_action(), NackAction::Retransmit);
        assert_eq!(NackCode::InvDpdcid.sender_action(), NackAction::Close);
        assert_eq!(NackCode::ExpNackFatal.sender_action(), NackAction::Close);
        assert_eq!(NackCode::NewStartPsn.sender_action(), NackAction::ReDrive);
        assert_eq!(NackCode::RcvdSesProcg.sender_action(), NackAction::Drop);
        assert_eq!(NackCode::Unknown(0x42).sender_action(), NackAction::Drop);
    }
}
