//! The retransmission timeout of a PDC, following its measured round trip
//! (`docs/protocol-notes.md` §3 "Loss recovery").
//!
//! RFC 6298's estimator: the first sample R sets SRTT = R and RTTVAR =
//! R/2; each later one RTTVAR = 3/4 · RTTVAR + 1/4 · |SRTT − R|, then
//! SRTT = 7/8 · SRTT + 1/8 · R. RTO = SRTT + max(G, 4 · max(RTTVAR,
//! SRTT/16)), where G is the longest a target holds an ACK back
//! (`PdsConfig::ack_delay`: a sample varies by that much without any
//! change of the path). The SRTT/16 floor under RTTVAR (so RTO ≥ 1.25 ·
//! SRTT) is ours: a standing queue that holds steady for a while drives
//! RTTVAR towards zero, and then the first packet that waits a little
//! longer behind it (a second flow joining, a scheduling hiccup of a
//! host) would time out and be resent into the same queue; measured on
//! two 2 MiB windows into one 1 Gb/s port, RTTVAR fell to 3 µs under a
//! 14.4 ms SRTT and every packet of the next window timed out. Samples
//! come only from packets sent once, or from a resend the ACK says it
//! answers (Karn's rule, kept by the engine's `on_ack`).
//!
//! The RTO is never below `RTO_INIT_TIME` (`PdsConfig::rto_init`), the
//! RTO before any sample: the spec's timer starts there, operators size it
//! to cover their buffers, and losses on a working path are found sooner
//! by SACK, RACK and tail probes, so a shorter RTO would only add
//! spurious timeouts when the round trip varies little and SRTT +
//! 4 · RTTVAR hugs SRTT (RFC 6298 §2.4 floors its RTO at one second for
//! this reason). It rises above `RTO_INIT_TIME` when a queue makes the
//! round trip longer: a fixed window far beyond the path's BDP becomes a
//! standing queue, and a packet behind it is late, not lost. Each
//! timeout of a packet doubles its RTO (`RTO_INIT_TIME · 2^retry_count`
//! in the spec's words, here from the measured RTO), up to `rto_max`
//! (8 s, the top of the spec's range).
//!
//! One estimator per PDC: its samples are its own packets' round trips,
//! and its RTO guards its own ledger. PDCs to one destination share a
//! queue, but each learns it from its first ACK; before that `rto_init`
//! stands, as for any new PDC.

use uet_wire::time::Duration;

/// SRTT and RTTVAR of one PDC, in nanoseconds (integer arithmetic: a
/// sample is taken on every ACK).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RttEstimator {
    /// 0 before the first sample.
    srtt_ns: u64,
    rttvar_ns: u64,
}

impl RttEstimator {
    /// Takes one round-trip sample.
    #[inline]
    pub fn on_sample(&mut self, rtt: Duration) {
        let r = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX / 8).max(1);
        if self.srtt_ns == 0 {
            self.srtt_ns = r;
            self.rttvar_ns = r / 2;
        } else {
            let err = self.srtt_ns.abs_diff(r);
            self.rttvar_ns = (self.rttvar_ns.saturating_mul(3).saturating_add(err)) / 4;
            self.srtt_ns = (self.srtt_ns.saturating_mul(7).saturating_add(r)) / 8;
        }
    }

    /// The smoothed round trip, once sampled.
    #[must_use]
    pub fn srtt(&self) -> Option<Duration> {
        (self.srtt_ns > 0).then(|| Duration::from_nanos(self.srtt_ns))
    }

    /// The round-trip variation.
    #[must_use]
    pub fn rttvar(&self) -> Duration {
        Duration::from_nanos(self.rttvar_ns)
    }

    /// The RTO after `retries` timeouts: max(`floor`, SRTT + max(`g`,
    /// 4 · max(RTTVAR, SRTT/16))) · 2^`retries` (just `floor` ·
    /// 2^`retries` before the first sample), at most `max`.
    #[must_use]
    #[inline]
    pub fn rto(&self, floor: Duration, g: Duration, max: Duration, retries: u32) -> Duration {
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let floor_ns = ns(floor);
        let base = if self.srtt_ns == 0 {
            floor_ns
        } else {
            let var = self.rttvar_ns.max(self.srtt_ns / 16).saturating_mul(4);
            self.srtt_ns.saturating_add(ns(g).max(var)).max(floor_ns)
        };
        let max_ns = ns(max);
        let rto = base
            .checked_mul(1u64 << retries.min(20))
            .map_or(max_ns, |x| x.min(max_ns));
        Duration::from_nanos(rto)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const US: Duration = Duration::from_micros(1);
    const MAX: Duration = Duration::from_secs(8);

    #[test]
    fn before_any_sample_the_rto_is_rto_init() {
        let e = RttEstimator::default();
        assert_eq!(e.srtt(), None);
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 0), 5 * MS);
    }

    #[test]
    fn srtt_and_rttvar_follow_rfc_6298() {
        let mut e = RttEstimator::default();
        e.on_sample(8 * MS);
        assert_eq!(e.srtt(), Some(8 * MS));
        assert_eq!(e.rttvar(), 4 * MS);
        // RTO = 8 + 4·4 = 24 ms.
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 0), 24 * MS);
        e.on_sample(16 * MS);
        // RTTVAR = 3/4·4 + 1/4·|8 − 16| = 5; SRTT = 7/8·8 + 1/8·16 = 9.
        assert_eq!(e.rttvar(), 5 * MS);
        assert_eq!(e.srtt(), Some(9 * MS));
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 0), 29 * MS);
    }

    #[test]
    fn a_steady_round_trip_converges_and_g_bounds_the_variation() {
        let mut e = RttEstimator::default();
        for _ in 0..200 {
            e.on_sample(6 * MS);
        }
        assert_eq!(e.srtt(), Some(6 * MS));
        // RTTVAR decays towards 0; SRTT/16 stands in for it, so the RTO
        // keeps a quarter of SRTT above it.
        assert!(e.rttvar() < US);
        assert_eq!(e.rto(MS, 20 * US, MAX, 0), 6 * MS + 6 * MS / 4);
        // On a short round trip, G (the ACK delay) is the larger margin.
        let mut e = RttEstimator::default();
        for _ in 0..200 {
            e.on_sample(40 * US);
        }
        assert_eq!(e.rto(US, 20 * US, MAX, 0), 60 * US);
    }

    #[test]
    fn the_rto_never_falls_below_rto_init() {
        let mut e = RttEstimator::default();
        for _ in 0..50 {
            e.on_sample(10 * US);
        }
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 0), 5 * MS);
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 2), 20 * MS);
    }

    #[test]
    fn each_timeout_doubles_the_rto_up_to_rto_max() {
        let mut e = RttEstimator::default();
        e.on_sample(8 * MS);
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 1), 48 * MS);
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 3), 192 * MS);
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 9), MAX);
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 40), MAX);
        // A sample beyond the maximum is clamped too.
        e.on_sample(Duration::from_secs(30));
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 0), MAX);
    }
}
