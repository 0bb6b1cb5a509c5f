//! Receive-path failures are counted per reason, never propagated as panics
//! (`docs/architecture.md` §3, §8 rule 7).

use core::fmt;

macro_rules! reasons {
    ($($(#[$m:meta])* $v:ident => $name:literal,)*) => {
        /// Why a received packet was dropped or refused.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum DropReason { $($(#[$m])* $v,)* }

        impl DropReason {
            /// Every reason, in counter order.
            pub const ALL: &'static [Self] = &[$(Self::$v,)*];

            /// A stable snake_case name for metrics.
            #[must_use]
            pub const fn name(self) -> &'static str {
                match self { $(Self::$v => $name,)* }
            }
        }
    };
}

reasons! {
    /// The bytes did not parse.
    Malformed => "malformed",
    /// Not addressed to this engine's UET port/protocol.
    NotUet => "not_uet",
    /// A request for a DPDCID that does not exist, without SYN (NACK INV_DPDCID).
    UnknownPdc => "unknown_pdc",
    /// An ACK/NACK/CP for a PDC that does not exist.
    StrayFeedback => "stray_feedback",
    /// The PDC table is full (NACK NO_PDC_AVAIL).
    NoPdcAvailable => "no_pdc_available",
    /// PSN beyond the tracking window (NACK PSN_OOR_WINDOW).
    OutOfWindow => "out_of_window",
    /// A duplicate request (answered with the stored or default response).
    Duplicate => "duplicate",
    /// A stale PSN more than one window old.
    Stale => "stale",
    /// ROD packet out of order (NACK ROD_OOO).
    RodOutOfOrder => "rod_out_of_order",
    /// RUD/ROD mode does not match the PDC (NACK PDC_MODE_MISMATCH).
    ModeMismatch => "mode_mismatch",
    /// A SYN outside the valid range (NACK INVALID_SYN).
    InvalidSyn => "invalid_syn",
    /// The PDC is closing (NACK CLOSING).
    Closing => "closing",
    /// A trimmed packet (NACK UET_TRIMMED / UET_TRIMMED_LASTHOP).
    Trimmed => "trimmed",
    /// An ACK acknowledging PSNs never sent.
    BogusAck => "bogus_ack",
    /// A packet type this engine does not accept in this direction.
    Unexpected => "unexpected",
    /// The layer above refused the packet for now (NACKed, resent later).
    Refused => "refused",
    /// A NACK or control packet for a live PDC whose PSN or PDC IDs do not
    /// match what that PDC sent or expects: from a blind or stale sender,
    /// never acted on.
    Unverified => "unverified",
    /// A request whose RCCC state names another source CCC than the one its
    /// PDC carries: its data is delivered, its CC state ignored.
    CccMismatch => "ccc_mismatch",
    /// A packet for a PDC of another security domain than the one that
    /// authenticated it — or one in the clear for a PDC in a domain, or
    /// the reverse: never acted on, never answered (`docs/security.md`).
    WrongDomain => "wrong_domain",
    /// A SYN of a secure PDC whose Start_PSN the target does not accept
    /// (below the domain's floor, or not the one it named): NACK
    /// NEW_START_PSN with the one to use (§2.12).
    NewStartPsn => "new_start_psn",
}

/// Counters of one engine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    drops: [u64; DropReason::ALL.len()],
    /// Data packets sent for the first time.
    pub tx_data: u64,
    /// Data packets retransmitted.
    pub tx_retransmits: u64,
    /// Of `tx_retransmits`, the first resends of data packets that left
    /// before their PDC heard anything from the target (its first ACK or
    /// NACK): packets lost, or presumed lost, in the PDC's first round
    /// trip, before congestion control had any feedback to act on. A
    /// bottleneck's drops minus these are the drops congestion control
    /// could have avoided.
    pub first_rtt_resent: u64,
    /// Retransmission timeouts that fired.
    pub rto_fired: u64,
    /// Packets presumed lost from SACK information and resent early.
    pub sack_inferred: u64,
    /// Tail loss probes sent (Probe CPs of PDCs silent for a PTO).
    pub tail_probes: u64,
    /// Of `sack_inferred`, packets a tail probe's answer found lost.
    pub tail_probe_lost: u64,
    /// ACKs sent.
    pub tx_acks: u64,
    /// NACKs sent.
    pub tx_nacks: u64,
    /// Control packets sent.
    pub tx_control: u64,
    /// Request packets accepted and handed up.
    pub rx_data: u64,
    /// ACKs received.
    pub rx_acks: u64,
    /// NACKs received.
    pub rx_nacks: u64,
    /// PDCs opened.
    pub pdcs_opened: u64,
    /// PDCs closed (normally or in error).
    pub pdcs_closed: u64,
    /// Unconfirmed target PDCs evicted to make room for a new SYN
    /// (`PdsConfig::max_pending_pdcs`).
    pub pending_evicted: u64,
    /// Initiator PDCs reopened after the peer refused them as unknown
    /// (INV_DPDCID: the peer restarted or forgot an unconfirmed PDC).
    pub pdcs_reopened: u64,
    /// Resends held back after a NACK for want of a resource at the peer.
    pub nack_backoffs: u64,
    /// Requests accepted that arrived marked ECN-CE.
    pub rx_ce: u64,
    /// NACKs received, by code (index = the 8-bit code).
    pub rx_nack_codes: NackCounts,
    /// NACKs sent, by code.
    pub tx_nack_codes: NackCounts,
}

/// Counts per 8-bit NACK code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NackCounts(pub [u64; 256]);

impl Default for NackCounts {
    fn default() -> Self {
        Self([0; 256])
    }
}

impl NackCounts {
    /// Counts one NACK with `code`.
    pub fn count(&mut self, code: u8) {
        self.0[usize::from(code)] += 1;
    }

    /// The non-zero counts as `(code, count)`.
    pub fn nonzero(&self) -> impl Iterator<Item = (u8, u64)> + '_ {
        (0u8..=255)
            .zip(self.0.iter().copied())
            .filter(|&(_, n)| n > 0)
    }
}

impl Counters {
    /// Counts one drop.
    pub fn drop(&mut self, reason: DropReason) {
        if let Some(i) = DropReason::ALL.iter().position(|r| *r == reason)
            && let Some(c) = self.drops.get_mut(i)
        {
            *c += 1;
        }
    }

    /// Drops counted for `reason`.
    #[must_use]
    pub fn drops(&self, reason: DropReason) -> u64 {
        DropReason::ALL
            .iter()
            .position(|r| *r == reason)
            .and_then(|i| self.drops.get(i).copied())
            .unwrap_or(0)
    }

    /// All drop counters with their names.
    pub fn drop_counts(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL
            .iter()
            .copied()
            .zip(self.drops.iter().copied())
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_a_counter() {
        let mut c = Counters::default();
        for (i, r) in DropReason::ALL.iter().enumerate() {
            for _ in 0..=i {
                c.drop(*r);
            }
        }
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(c.drops(*r), i as u64 + 1, "{r}");
        }
    }
}
