//! Congestion-control modes by name, and how each configures a PDS engine
//! for a path: the one place the simulator (`uet-sim`) and the daemon
//! (`uetd --cc`) turn "nscc" or "rccc" into a `CccConfig`
//! (`docs/architecture.md` §8 rule 8).

use uet_cms::{Algorithm, NsccConfig, PftConfig, RcccConfig};
use uet_wire::time::Duration;

use crate::PdsConfig;

/// A congestion-control mode (`docs/congestion-evaluation.md`: none / NSCC / RCCC /
/// NSCC+RCCC / PFT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CcMode {
    /// The fixed window.
    None,
    /// NSCC alone.
    Nscc,
    /// RCCC alone.
    Rccc,
    /// NSCC and RCCC together.
    NsccRccc,
    /// The fixed window with the PFT throttle.
    Pft,
}

impl CcMode {
    /// Every mode, in report order.
    pub const ALL: [Self; 5] = [
        Self::None,
        Self::Nscc,
        Self::Rccc,
        Self::NsccRccc,
        Self::Pft,
    ];

    /// The name used on command lines and in config files.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Nscc => "nscc",
            Self::Rccc => "rccc",
            Self::NsccRccc => "nscc+rccc",
            Self::Pft => "pft",
        }
    }

    /// Parses a mode name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == s)
    }

    /// Whether the mode relies on ECN marks from the network (NSCC).
    #[must_use]
    pub const fn uses_ecn(self) -> bool {
        matches!(self, Self::Nscc | Self::NsccRccc)
    }

    /// Configures `pds` (sources and receiver) for this mode on a path of
    /// `rate_bps` and idle round trip `base_rtt`; `trimming` says whether
    /// switches trim (NSCC's target delay depends on it, §5).
    pub fn configure(self, pds: &mut PdsConfig, rate_bps: u64, base_rtt: Duration, trimming: bool) {
        let mtu = pds.nominal(pds.max_ses_len as u32);
        let nscc = || NsccConfig::new(rate_bps, rate_bps, base_rtt, mtu, trimming);
        // RCCC's first (speculative) window: one BDP, as HTSIM/EQDS
        // speculate (up to 1.5 BDP), rather than the seed's conservative
        // 12.5 KB, which leaves a lone sender waiting a round trip for
        // credit. At least one full packet: a speculating source that
        // cannot send its first packet has nothing in flight to time out
        // and no PDC the receiver knows to ask for credit on, so a path
        // whose BDP is under a packet (10 Mb/s × 1 ms) would never send.
        let rccc = || {
            // Grants in whole packets of the size the PDS sends (split
            // grants put many senders in lock step; HTSIM grants packets),
            // and the four-packet floors of `max_credit` and
            // `max_outstanding` in those packets.
            let mut r = RcccConfig::for_link(rate_bps, base_rtt).with_mtu(mtu);
            r.initial_window = r.bdp().max(u64::from(mtu));
            r
        };
        pds.ccc.mtu = mtu;
        let bdp = (rate_bps as f64 / 8.0 * base_rtt.as_secs_f64()) as u64;
        match self {
            Self::None => {}
            Self::Nscc => pds.ccc.algorithm = Algorithm::Nscc(nscc()),
            Self::Rccc => pds.ccc.algorithm = Algorithm::Rccc(rccc()),
            Self::NsccRccc => pds.ccc.algorithm = Algorithm::NsccRccc(nscc(), rccc()),
            Self::Pft => pds.ccc.pft = Some(PftConfig::default()),
        }
        if matches!(self, Self::Rccc | Self::NsccRccc) {
            pds.rccc_receiver = Some(rccc());
        }
        // ACK coalescing at most BDP/4 (docs/congestion-evaluation.md calibration note).
        pds.with_bdp(bdp);
        // Tail loss probes no sooner than one idle round trip.
        pds.tail_probe = Some(base_rtt);
        pds.rack_window = Some(base_rtt / 4);
    }
}

impl core::fmt::Display for CcMode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_modes_pick_their_algorithms() {
        for m in CcMode::ALL {
            assert_eq!(CcMode::parse(m.name()), Some(m));
        }
        assert_eq!(CcMode::parse("cubic"), None);
        let rtt = Duration::from_micros(50);
        let mut p = PdsConfig::default();
        CcMode::Rccc.configure(&mut p, 1_000_000_000, rtt, false);
        assert!(matches!(p.ccc.algorithm, Algorithm::Rccc(_)));
        assert!(p.rccc_receiver.is_some());
        // 1 Gb/s x 50 us = 6,250 B BDP: ACK trigger BDP/4.
        assert_eq!(p.ack_gen_trigger, 1_562);
        // A BDP under one packet (10 Mb/s x 500 us = 625 B): the first
        // window is still a full packet.
        let mut p = PdsConfig::default();
        CcMode::Rccc.configure(&mut p, 10_000_000, Duration::from_micros(500), false);
        let mtu = u64::from(p.nominal(p.max_ses_len as u32));
        let Algorithm::Rccc(r) = &p.ccc.algorithm else {
            panic!("{:?}", p.ccc.algorithm)
        };
        assert_eq!(r.initial_window, mtu);
        assert_eq!(p.rccc_receiver.as_ref().unwrap().initial_window, mtu);
        let mut p = PdsConfig::default();
        CcMode::Nscc.configure(&mut p, 100_000_000_000, rtt, true);
        assert!(matches!(p.ccc.algorithm, Algorithm::Nscc(_)));
        assert!(p.rccc_receiver.is_none());
        let mut p = PdsConfig::default();
        CcMode::None.configure(&mut p, 1_000_000_000, rtt, false);
        assert!(matches!(p.ccc.algorithm, Algorithm::Fixed { .. }));
    }
}
