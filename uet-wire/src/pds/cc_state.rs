//! Congestion-control state carried by ACK_CC (`ack_cc_state`, 8 B) and
//! ACK_CCX (`ack_ccx_state`, 16 B) (`docs/protocol-notes.md` §2.7).
//!
//! NSCC (`cc_type` 0), byte offsets within `ack_cc_state`:
//!
//! ```text
//! 0-1    service_time         u16 (units unconfirmed; 128 ns assumed, §2.7)
//! 2      rc:1 | rcv_cwnd_pend:7   (byte 2, after service_time: §9 item 16)
//! 3-5    rcvd_bytes           24 bits, 256-B units, rounded up, wraps
//! 6-7    ooo_count            u16
//! ```
//!
//! CREDIT (`cc_type` 1): `credit`:24 (bytes 0-2) | reserved 24 (bytes 3-5,
//! ignored on parse, zero on emit) | `ooo_count`:16 (bytes 6-7).
//!
//! Other `cc_type`s are kept raw. The `cc_type` nibble itself lives in byte
//! 12 of the ACK header; [`AckCcState::cc_type`] derives it from the variant
//! so the two cannot disagree.

use core::fmt;

use crate::types::{Credit24, OutOfRange, Units256};

/// Length of `ack_cc_state`.
pub const CC_STATE_LEN: usize = 8;
/// Length of `ack_ccx_state`.
pub const CCX_STATE_LEN: usize = 16;

/// `cc_type` of NSCC.
pub const CC_TYPE_NSCC: u8 = 0;
/// `cc_type` of CREDIT (RCCC / TFC).
pub const CC_TYPE_CREDIT: u8 = 1;

bits_newtype!(
    /// NSCC `rcv_cwnd_pend`: the destination's window penalty, 0-127
    /// (0 = none). The source applies `cwnd -= (pend * newly_rcvd) >> 7`
    /// (§5, §9 item 10).
    CwndPenalty, u8, 7
);

bits_newtype!(
    /// The 4-bit `ccx_type` of ACK_CCX / `nccx_type` of NACK_CCX. All values
    /// are reserved in 1.0; 14-15 are proprietary (§2.7, XDP2).
    CcxType, u8, 4
);

/// A `cc_type` other than NSCC (0) and CREDIT (1): 2-15.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UnknownCcType(u8);

impl UnknownCcType {
    /// Checked constructor: 2-15.
    pub const fn new(v: u8) -> Result<Self, OutOfRange> {
        if v >= 2 && v <= 15 {
            Ok(Self(v))
        } else {
            Err(OutOfRange {
                what: "UnknownCcType",
                value: v as u64,
                max: 15,
            })
        }
    }

    /// The raw 4-bit value.
    #[must_use]
    pub const fn get(self) -> u8 {
        self.0
    }
}

impl fmt::Display for UnknownCcType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// NSCC `ack_cc_state` (`cc_type` 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NsccState {
    /// Time the packet spent at the destination; the source subtracts it
    /// from the RTT. Units unconfirmed (128 ns assumed, §2.7).
    pub service_time: u16,
    /// `rc` (restore_cwnd): restore the saved cwnd when destination flow
    /// control ends.
    pub rc: bool,
    /// `rcv_cwnd_pend`: destination window penalty, 0-127.
    pub rcv_cwnd_pend: CwndPenalty,
    /// Cumulative received bytes of the PDC in 256-B units (rounded up,
    /// wrapping; [`Units256::from_bytes_round_up`]).
    pub rcvd_bytes: Units256,
    /// Out-of-order count at the receiver.
    pub ooo_count: u16,
}

/// CREDIT `ack_cc_state` (`cc_type` 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CreditState {
    /// Credit granted, in bytes (24 bits).
    pub credit: Credit24,
    /// Out-of-order count at the receiver.
    pub ooo_count: u16,
}

/// The 8-byte `ack_cc_state` of ACK_CC, typed by `cc_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckCcState {
    /// `cc_type` 0.
    Nscc(NsccState),
    /// `cc_type` 1.
    Credit(CreditState),
    /// Any other `cc_type`, kept raw.
    Other {
        /// The `cc_type` (2-15).
        cc_type: UnknownCcType,
        /// The 64 bits of state, big endian.
        raw: u64,
    },
}

impl AckCcState {
    /// Decodes `ack_cc_state` (the big-endian 64-bit value) for `cc_type`
    /// (masked to 4 bits). Total: every input decodes.
    #[must_use]
    pub const fn from_wire(cc_type: u8, raw: u64) -> Self {
        match cc_type & 0x0f {
            CC_TYPE_NSCC => {
                let b2 = (raw >> 40) as u8;
                Self::Nscc(NsccState {
                    service_time: (raw >> 48) as u16,
                    rc: b2 & 0x80 != 0,
                    rcv_cwnd_pend: CwndPenalty::from_masked(b2),
                    rcvd_bytes: Units256::from_masked((raw >> 16) as u32),
                    ooo_count: raw as u16,
                })
            }
            CC_TYPE_CREDIT => Self::Credit(CreditState {
                credit: Credit24::from_masked((raw >> 40) as u32),
                ooo_count: raw as u16,
            }),
            t => Self::Other {
                // 2..=15 by construction of the match.
                cc_type: UnknownCcType(t),
                raw,
            },
        }
    }

    /// The `cc_type` nibble this state is emitted with.
    #[must_use]
    pub const fn cc_type(&self) -> u8 {
        match self {
            Self::Nscc(_) => CC_TYPE_NSCC,
            Self::Credit(_) => CC_TYPE_CREDIT,
            Self::Other { cc_type, .. } => cc_type.get(),
        }
    }

    /// The big-endian 64-bit wire value (reserved bits zero).
    #[must_use]
    pub const fn to_wire(&self) -> u64 {
        match *self {
            Self::Nscc(s) => {
                ((s.service_time as u64) << 48)
                    | ((s.rc as u64) << 47)
                    | ((s.rcv_cwnd_pend.get() as u64) << 40)
                    | ((s.rcvd_bytes.get() as u64) << 16)
                    | s.ooo_count as u64
            }
            Self::Credit(s) => ((s.credit.get() as u64) << 40) | s.ooo_count as u64,
            Self::Other { raw, .. } => raw,
        }
    }
}

impl fmt::Display for AckCcState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Nscc(s) => {
                write!(f, "NSCC service_time={}", s.service_time)?;
                if s.rc {
                    f.write_str(" rc")?;
                }
                write!(
                    f,
                    " rcv_cwnd_pend={} rcvd_bytes={} ooo={}",
                    s.rcv_cwnd_pend, s.rcvd_bytes, s.ooo_count
                )
            }
            Self::Credit(s) => write!(f, "CREDIT credit={} ooo={}", s.credit, s.ooo_count),
            Self::Other { cc_type, raw } => write!(f, "cc_type={cc_type} state={raw:#018x}"),
        }
    }
}

/// The 16-byte `ack_ccx_state` of ACK_CCX: no layout is defined in 1.0, so it
/// is kept raw with its `ccx_type` (the `cc_type` nibble of byte 12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AckCcxState {
    /// `ccx_type`.
    pub ccx_type: CcxType,
    /// The 16 bytes of extended state (bytes 24-39 of ACK_CCX).
    pub raw: [u8; CCX_STATE_LEN],
}

impl fmt::Display for AckCcxState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ccx_type={} state={:#034x}",
            self.ccx_type,
            u128::from_be_bytes(self.raw)
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn ack_cc_state() -> impl Strategy<Value = AckCcState> {
        prop_oneof![
            (
                any::<u16>(),
                any::<bool>(),
                any::<u8>(),
                any::<u32>(),
                any::<u16>()
            )
                .prop_map(
                    |(service_time, rc, pend, rcvd, ooo_count)| AckCcState::Nscc(NsccState {
                        service_time,
                        rc,
                        rcv_cwnd_pend: CwndPenalty::from_masked(pend),
                        rcvd_bytes: Units256::from_masked(rcvd),
                        ooo_count,
                    })
                ),
            (any::<u32>(), any::<u16>()).prop_map(|(c, ooo_count)| AckCcState::Credit(
                CreditState {
                    credit: Credit24::from_masked(c),
                    ooo_count,
                }
            )),
            (2u8..=15, any::<u64>()).prop_map(|(t, raw)| AckCcState::Other {
                cc_type: UnknownCcType::new(t).unwrap(),
                raw,
            }),
        ]
    }

    pub(crate) fn ack_ccx_state() -> impl Strategy<Value = AckCcxState> {
        (any::<u8>(), any::<[u8; 16]>()).prop_map(|(t, raw)| AckCcxState {
            ccx_type: CcxType::from_masked(t),
            raw,
        })
    }

    #[test]
    fn nscc_layout() {
        // service_time 0x1234, rc, rcv_cwnd_pend 64 (byte 2 = 0xc0),
        // rcvd_bytes 64 units (16,384 B), ooo_count 3.
        let s = AckCcState::Nscc(NsccState {
            service_time: 0x1234,
            rc: true,
            rcv_cwnd_pend: CwndPenalty::new(64).unwrap(),
            rcvd_bytes: Units256::from_bytes_round_up(16_384),
            ooo_count: 3,
        });
        assert_eq!(
            s.to_wire().to_be_bytes(),
            [0x12, 0x34, 0xc0, 0x00, 0x00, 0x40, 0x00, 0x03]
        );
        assert_eq!(AckCcState::from_wire(0, s.to_wire()), s);
        assert_eq!(s.cc_type(), 0);
        assert_eq!(
            std::format!("{s}"),
            "NSCC service_time=4660 rc rcv_cwnd_pend=64 rcvd_bytes=64 ooo=3"
        );
    }

    #[test]
    fn credit_layout_reserved_ignored() {
        // credit 25,000 = 0x0061a8, reserved bytes set on the wire, ooo 0x0102.
        let wire = u64::from_be_bytes([0x00, 0x61, 0xa8, 0xff, 0xff, 0xff, 0x01, 0x02]);
        let s = AckCcState::from_wire(1, wire);
        assert_eq!(
            s,
            AckCcState::Credit(CreditState {
                credit: Credit24::new(25_000).unwrap(),
                ooo_count: 0x0102,
            })
        );
        assert_eq!(
            s.to_wire().to_be_bytes(),
            [0x00, 0x61, 0xa8, 0x00, 0x00, 0x00, 0x01, 0x02]
        );
    }

    #[test]
    fn unknown_cc_type_kept_raw() {
        let s = AckCcState::from_wire(0x37, 0x0102_0304_0506_0708);
        assert_eq!(s.cc_type(), 7);
        assert_eq!(s.to_wire(), 0x0102_0304_0506_0708);
        assert!(UnknownCcType::new(1).is_err());
        assert!(UnknownCcType::new(16).is_err());
        assert!(CwndPenalty::new(128).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(s in ack_cc_state()) {
            prop_assert_eq!(AckCcState::from_wire(s.cc_type(), s.to_wire()), s);
        }
    }
}
