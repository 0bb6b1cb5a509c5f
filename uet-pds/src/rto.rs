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
//! The RTO also stays above twice the longest round trip sampled in the
//! last one to two seconds (`PEAK_WINDOW`), which is ours too. SRTT and
//! RTTVAR take a sample per ACK, so a round trip that is long once in a
//! while — a host that does not run its receive loop for a few
//! milliseconds, as a busy or oversubscribed machine does every few
//! hundred milliseconds — is forgotten within a round trip: RTTVAR falls
//! back by a quarter per sample. The next stall of the same length then
//! outlasts an RTO sized from the round trips in between and resends a
//! packet that was not lost (measured on a 2-vCPU VM: the timeouts of 1
//! GiB writes over a clean veth were of that kind, each resend arriving
//! as a duplicate, and those traced came within a second of a 6 ms
//! sample; one later stall outlasted 1.5 times the peak). The peak
//! remembers what the path has shown, and the next stall may be up to
//! twice as long. A loss is still found sooner by SACK, RACK and tail
//! probes; the peak bounds only the timeout of a PDC whose target went
//! silent. Where the round trip is queueing alone, the peak is at most a
//! base round trip and a full buffer's drain, and twice that stays below
//! an `RTO_INIT_TIME` sized to cover several drains.
//!
//! A packet whose target has answered nothing sent after it waits at
//! least `PdsConfig::rto_silent` instead: that floor
//! is applied where the timer is set (`Pdc::rto_deadline`), since it
//! depends on what the PDC has heard, not on the round trips.
//!
//! One estimator per PDC: its samples are its own packets' round trips,
//! and its RTO guards its own ledger. PDCs to one destination share a
//! queue, but each learns it from its first ACK; before that `rto_init`
//! stands, as for any new PDC.

use uet_wire::time::{Duration, Instant};

/// How long the longest sample counts towards the RTO: the peak of the
/// window a sample falls in and of the window before it, so one to two
/// windows.
pub const PEAK_WINDOW: Duration = Duration::from_secs(1);

/// SRTT and RTTVAR of one PDC, in nanoseconds (integer arithmetic: a
/// sample is taken on every ACK), and the longest recent sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RttEstimator {
    /// 0 before the first sample.
    srtt_ns: u64,
    rttvar_ns: u64,
    /// The longest sample of the current window and of the one before.
    peak_ns: [u64; 2],
    /// When the current window began.
    window_start_ns: u64,
}

impl RttEstimator {
    /// Takes one round-trip sample, measured at `now`.
    #[inline]
    pub fn on_sample(&mut self, now: Instant, rtt: Duration) {
        let r = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX / 8).max(1);
        let now_ns = now.as_nanos();
        let w = u64::try_from(PEAK_WINDOW.as_nanos()).unwrap_or(u64::MAX);
        let elapsed = now_ns.saturating_sub(self.window_start_ns);
        if self.srtt_ns == 0 || elapsed >= w {
            // A window closed: it becomes the previous one, unless a
            // whole window passed without a sample.
            self.peak_ns = [
                0,
                if elapsed < w.saturating_mul(2) {
                    self.peak_ns[0]
                } else {
                    0
                },
            ];
            self.window_start_ns = now_ns;
        }
        self.peak_ns[0] = self.peak_ns[0].max(r);
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

    /// The longest sample of the last one to two [`PEAK_WINDOW`]s, as of
    /// the last sample.
    #[must_use]
    pub fn peak(&self) -> Duration {
        Duration::from_nanos(self.peak_ns[0].max(self.peak_ns[1]))
    }

    /// The RTO after `retries` timeouts: max(`floor`, SRTT + max(`g`,
    /// 4 · max(RTTVAR, SRTT/16)), 2 · peak) · 2^`retries` (just `floor`
    /// · 2^`retries` before the first sample), at most `max`.
    #[must_use]
    #[inline]
    pub fn rto(&self, floor: Duration, g: Duration, max: Duration, retries: u32) -> Duration {
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let floor_ns = ns(floor);
        let base = if self.srtt_ns == 0 {
            floor_ns
        } else {
            let var = self.rttvar_ns.max(self.srtt_ns / 16).saturating_mul(4);
            let peak = self.peak_ns[0].max(self.peak_ns[1]);
            self.srtt_ns
                .saturating_add(ns(g).max(var))
                .max(peak.saturating_mul(2))
                .max(floor_ns)
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
    const T0: Instant = Instant::from_nanos(1_000_000_000);

    #[test]
    fn before_any_sample_the_rto_is_rto_init() {
        let e = RttEstimator::default();
        assert_eq!(e.srtt(), None);
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 0), 5 * MS);
    }

    #[test]
    fn srtt_and_rttvar_follow_rfc_6298() {
        let mut e = RttEstimator::default();
        e.on_sample(T0, 8 * MS);
        assert_eq!(e.srtt(), Some(8 * MS));
        assert_eq!(e.rttvar(), 4 * MS);
        // RTO = 8 + 4·4 = 24 ms.
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 0), 24 * MS);
        e.on_sample(T0, 16 * MS);
        // RTTVAR = 3/4·4 + 1/4·|8 − 16| = 5; SRTT = 7/8·8 + 1/8·16 = 9.
        assert_eq!(e.rttvar(), 5 * MS);
        assert_eq!(e.srtt(), Some(9 * MS));
        // SRTT + 4 · RTTVAR = 29 ms; twice the peak, 32 ms, is the larger.
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 0), 32 * MS);
    }

    #[test]
    fn a_steady_round_trip_converges_and_g_bounds_the_variation() {
        let mut e = RttEstimator::default();
        for _ in 0..200 {
            e.on_sample(T0, 6 * MS);
        }
        assert_eq!(e.srtt(), Some(6 * MS));
        // RTTVAR decays towards 0; SRTT/16 stands in for it, so the RTO
        // would keep a quarter of SRTT above it; the peak (the same 6 ms)
        // keeps it at twice that.
        assert!(e.rttvar() < US);
        assert_eq!(e.peak(), 6 * MS);
        assert_eq!(e.rto(MS, 20 * US, MAX, 0), 12 * MS);
        // On a round trip shorter than G (the ACK delay), G is the larger
        // margin: 8 + 20 µs against twice 8.
        let mut e = RttEstimator::default();
        for _ in 0..200 {
            e.on_sample(T0, 8 * US);
        }
        assert_eq!(e.rto(US, 20 * US, MAX, 0), 28 * US);
    }

    #[test]
    fn the_rto_never_falls_below_rto_init() {
        let mut e = RttEstimator::default();
        for _ in 0..50 {
            e.on_sample(T0, 10 * US);
        }
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 0), 5 * MS);
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 2), 20 * MS);
    }

    #[test]
    fn each_timeout_doubles_the_rto_up_to_rto_max() {
        let mut e = RttEstimator::default();
        e.on_sample(T0, 8 * MS);
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 1), 48 * MS);
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 3), 192 * MS);
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 9), MAX);
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 40), MAX);
        // A sample beyond the maximum is clamped too.
        e.on_sample(T0, Duration::from_secs(30));
        assert_eq!(e.rto(5 * MS, 20 * US, MAX, 0), MAX);
    }

    #[test]
    fn a_long_round_trip_keeps_the_rto_above_it_for_a_window_or_two() {
        // 200 µs round trips, one of 5 ms (the target's host did not run
        // for a while), then 200 µs again: SRTT and RTTVAR forget the
        // stall within a few dozen samples, the peak does not.
        let mut e = RttEstimator::default();
        let at = |ms: u64| T0 + Duration::from_millis(ms);
        for i in 0..100 {
            e.on_sample(at(i), 200 * US);
        }
        assert_eq!(e.rto(MS, 20 * US, MAX, 0), MS);
        e.on_sample(at(100), 5 * MS);
        for i in 101..300 {
            e.on_sample(at(i), 200 * US);
        }
        assert!(e.srtt().unwrap() < 250 * US && e.rttvar() < 10 * US);
        // A second stall of 5 ms, or of nearly twice that, is within the
        // RTO.
        assert_eq!(e.rto(MS, 20 * US, MAX, 0), 10 * MS);
        assert_eq!(e.rto(MS, 20 * US, MAX, 1), 20 * MS);
        // The stall's window (from the first sample) closes with the first
        // sample a second later, at 1.5 s, which opens the next; the stall
        // counts through that one, until a sample at 2.5 s or later.
        e.on_sample(at(1_500), 200 * US);
        assert_eq!(e.peak(), 5 * MS);
        e.on_sample(at(2_499), 200 * US);
        assert_eq!(e.peak(), 5 * MS);
        e.on_sample(at(2_500), 200 * US);
        assert_eq!(e.peak(), 200 * US);
        assert_eq!(e.rto(MS, 20 * US, MAX, 0), MS);
    }

    #[test]
    fn a_pdc_silent_for_two_windows_starts_a_fresh_peak() {
        let mut e = RttEstimator::default();
        e.on_sample(T0, 4 * MS);
        e.on_sample(T0 + Duration::from_millis(2_500), 100 * US);
        assert_eq!(e.peak(), 100 * US);
    }
}
