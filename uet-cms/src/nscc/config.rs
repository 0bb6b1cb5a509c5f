//! NSCC configuration: the parameters of spec Table 3-76 (1.0) / 3-82
//! (1.0.3) with their defaults and derivations (`docs/protocol-notes.md` §5.2,
//! "Configuration"; SPEC-TR §3.6.13.3; HTSIM `initNsccParams`; ASTERIA).

use uet_wire::time::Duration;

/// Granularity the spec asks base RTT and timestamps to be kept at
/// (SPEC-TR §3.6.13.3: "no coarser than 128 ns"; Table 3-77: `base_rtt` in
/// 128 ns units).
pub const TIME_UNIT_NS: u64 = 128;

/// NSCC parameters of one CCC.
///
/// Every field is public so an integrator can override a single value after
/// [`NsccConfig::new`] derived the rest; the derivations are recorded on each
/// field. Units: bytes, bits per second, and [`Duration`]s for times (the
/// spec writes its formulas in seconds, §3.6.13.3).
#[derive(Debug, Clone, PartialEq)]
pub struct NsccConfig {
    /// Sender link speed in bits per second (`sender.linkspeed`, §5.2). Also
    /// the speed `update_base_rtt` re-derives `max_wnd` from.
    pub sender_linkspeed: u64,
    /// Receiver link speed in bits per second (`receiver.linkspeed`; use the
    /// sender's when unknown, SPEC-TR §3.6.13.3).
    pub receiver_linkspeed: u64,
    /// `config_base_rtt`: RTT of an MTU packet over the longest fabric path
    /// with no load (§5.2, SPEC-TR §3.6.13.3).
    pub config_base_rtt: Duration,
    /// `MTU` in bytes: the unit of `CanSend`, the minimum window (§5.2
    /// "min cwnd 1 MTU") and the size in the increase formulas.
    pub mtu: u64,
    /// Whether the fabric trims packets (selects `target_qdelay` and whether
    /// `qa_threshold` is used, §5.2).
    pub trimming: bool,
    /// `BDP = min(sender.linkspeed, receiver.linkspeed) * config_base_rtt`
    /// in bytes (§5.2, SPEC-TR §3.6.13.3).
    pub bdp: u64,
    /// `MaxWnd = 1.5 * BDP` (§5.2, SPEC-TR Table 3-77, HTSIM, ASTERIA); at
    /// least one MTU.
    pub max_wnd: u64,
    /// Initial `ccc.cwnd`: `MaxWnd` by default (Table 3-77). The blog series
    /// notes a smaller start is allowed; kept within `[mtu, max_wnd]`.
    pub initial_cwnd: u64,
    /// `target_qdelay`: `0.75 * config_base_rtt` with trimming, `1.0 *
    /// config_base_rtt` without (§5.2 [C×3]).
    pub target_qdelay: Duration,
    /// `scaling_a = BDP / Base_BDP`, `Base_BDP` = 150 000 B (100 Gb/s × 12 µs
    /// reference network, §5.2 [C×2]).
    pub scaling_a: f64,
    /// `scaling_b = target_qdelay / 12 µs` (§5.2 [C×2]).
    pub scaling_b: f64,
    /// `alpha = 4.0 * scaling_a * scaling_b * MTU / target_qdelay`, in bytes
    /// per byte per **second** (§5.2 [C×3]).
    pub alpha: f64,
    /// `fi = 5 * MTU * scaling_a`: fair increase per received byte, divided
    /// by cwnd in `fulfill_adjustment` (§5.2 [C×2]).
    pub fi: f64,
    /// `fi_scale = 0.25 * scaling_a`: fast increase per received byte (§5.2
    /// [C×2]).
    pub fi_scale: f64,
    /// `eta = 0.15 * MTU * scaling_a`, added once per adjust period (§5.2
    /// [C×2]).
    pub eta: f64,
    /// `gamma = 0.8`, the multiplicative-decrease gain (§5.2 [C×2]).
    pub gamma: f64,
    /// `max_md_jump = 0.5`: the smallest factor one decrease may multiply cwnd
    /// by (§5.2, ASTERIA; HTSIM hard-codes 0.5).
    pub max_md_jump: f64,
    /// `qa_gate = 3`: quick adapt acts only if `achieved_bytes < max_wnd >>
    /// qa_gate` (§5.2 [C×2]).
    pub qa_gate: u8,
    /// `qa_threshold = (drop_threshold / Plane_BDP - 1) * config_base_rtt`
    /// (= `4 * target_qdelay` for the recommended 5 × Plane_BDP drop
    /// threshold) **without** trimming; `None` (disabled, "set very large")
    /// with trimming. This is the spec rule (§5.2, §9 item 11); HTSIM always
    /// uses `4 * target_qdelay`.
    pub qa_threshold: Option<Duration>,
    /// `adjust_bytes_threshold = 8 * MTU` (§5.2 [C×2]).
    pub adjust_bytes_threshold: u64,
    /// `adjust_period_threshold` = 1 × base RTT (`config_base_rtt`; HTSIM
    /// `network_rtt`, §5.2 [C×2]).
    pub adjust_period_threshold: Duration,
    /// Weight of a new sample in the delay EWMA behind `get_avg_delay()`:
    /// `avg = w * sample + (1 - w) * avg`, w = 0.0125 (implementation
    /// defined by the spec; value from HTSIM `_delay_alpha`, §5.2).
    pub delay_ewma_weight: f64,
    /// A delay below this counts as "delay ≈ 0" for `fast_increase` (1 µs in
    /// HTSIM and ASTERIA, §5.2).
    pub near_zero_delay: Duration,
    /// `disable_quick_adapt` (false, SPEC-TR Table 3-76).
    pub disable_quick_adapt: bool,
    /// `pds.ACK_Gen_Trigger` in bytes, used by `AckRequest` (SPEC-TR
    /// §3.6.13.5: the FEPs must agree on it). 16 KiB as in the reference
    /// provider and HTSIM (`_bytes_unacked_threshold`).
    pub ack_gen_trigger: u64,
    /// How long an unanswered base-RTT probe waits before
    /// [`Nscc::wants_probe`](crate::nscc::Nscc::wants_probe) asks again.
    /// \[I] Not in the spec (§3.6.13.7 says nothing on lost probes):
    /// `8 * config_base_rtt`.
    pub probe_timeout: Duration,
    /// How many base-RTT probes to send at most (\[I], 3).
    pub probe_attempts: u8,
    /// The least `max_wnd` that `update_base_rtt` may derive from a lower
    /// base RTT; 0 (the default): none, as the spec writes it. \[I] A
    /// software host sets it to the configured `MaxWnd`: its RTT samples
    /// leave out the time packets wait in the hosts' rings (the
    /// destination reports it as service time, the source stamps ACKs on
    /// arrival), so they fall to the bare wire's (tens of µs on a veth),
    /// while the window still has to cover the whole loop — measured on
    /// the veth lab at 400 Mb/s: a lone flow's window pinned at one or
    /// two packets, half the link idle. `config_base_rtt` is the loop such
    /// a host plans for.
    pub min_max_wnd: u64,
}

impl NsccConfig {
    /// `Base_BDP`: the reference network's BDP, 100 Gb/s × 12 µs = 150 000 B
    /// (§5.2 [C×2]; the blog series' "universal Base_BDP").
    pub const BASE_BDP: u64 = 150_000;
    /// The reference network's RTT, 12 µs (§5.2).
    pub const REFERENCE_RTT: Duration = Duration::from_micros(12);
    /// Tail-drop threshold in Plane_BDPs the spec recommends (5, SPEC-TR
    /// §3.6.13.3), giving `qa_threshold = 4 * config_base_rtt`.
    pub const RECOMMENDED_DROP_THRESHOLD_RATIO: f64 = 5.0;

    /// Derives every parameter from the link speeds (bits/s),
    /// `config_base_rtt`, the MTU and whether the fabric trims, with the
    /// recommended drop threshold of 5 × Plane_BDP.
    ///
    /// Degenerate inputs are clamped rather than rejected: an MTU of 0 counts
    /// as 1 byte, and `max_wnd` is at least one MTU.
    #[must_use]
    pub fn new(
        sender_linkspeed: u64,
        receiver_linkspeed: u64,
        config_base_rtt: Duration,
        mtu: u32,
        trimming: bool,
    ) -> Self {
        let mtu = u64::from(mtu.max(1));
        let rtt_ns = duration_ns(config_base_rtt);
        let bdp = bdp_bytes(sender_linkspeed.min(receiver_linkspeed), rtt_ns);
        // MaxWnd = 1.5 * BDP, in integers.
        let max_wnd = (bdp.saturating_mul(3) / 2).max(mtu);
        // target_qdelay = 0.75 (trimming) or 1.0 (no trimming) × config_base_rtt.
        let tq_ns = if trimming {
            u64::try_from(u128::from(rtt_ns) * 3 / 4).unwrap_or(u64::MAX)
        } else {
            rtt_ns
        };
        let target_qdelay = Duration::from_nanos(tq_ns);
        let scaling_a = bdp as f64 / Self::BASE_BDP as f64;
        let scaling_b = tq_ns as f64 / duration_ns(Self::REFERENCE_RTT) as f64;
        let mtu_f = mtu as f64;
        let alpha = if tq_ns == 0 {
            0.0
        } else {
            4.0 * scaling_a * scaling_b * mtu_f / (tq_ns as f64 * 1e-9)
        };
        let mut c = Self {
            sender_linkspeed,
            receiver_linkspeed,
            config_base_rtt,
            mtu,
            trimming,
            bdp,
            max_wnd,
            initial_cwnd: max_wnd,
            target_qdelay,
            scaling_a,
            scaling_b,
            alpha,
            fi: 5.0 * mtu_f * scaling_a,
            fi_scale: 0.25 * scaling_a,
            eta: 0.15 * mtu_f * scaling_a,
            gamma: 0.8,
            max_md_jump: 0.5,
            qa_gate: 3,
            qa_threshold: None,
            adjust_bytes_threshold: 8 * mtu,
            adjust_period_threshold: config_base_rtt,
            delay_ewma_weight: 0.0125,
            near_zero_delay: Duration::from_micros(1),
            disable_quick_adapt: false,
            ack_gen_trigger: 16_384,
            probe_timeout: config_base_rtt.saturating_mul(8),
            probe_attempts: 3,
            min_max_wnd: 0,
        };
        c.set_drop_threshold_ratio(Self::RECOMMENDED_DROP_THRESHOLD_RATIO);
        c
    }

    /// Re-derives `qa_threshold` for a switch tail-drop threshold of `ratio`
    /// × Plane_BDP: `(ratio - 1) * config_base_rtt` without trimming (never
    /// below zero), disabled with trimming (SPEC-TR §3.6.13.3).
    #[must_use]
    pub fn with_drop_threshold_ratio(mut self, ratio: f64) -> Self {
        self.set_drop_threshold_ratio(ratio);
        self
    }

    fn set_drop_threshold_ratio(&mut self, ratio: f64) {
        self.qa_threshold = if self.trimming {
            None
        } else {
            let k = (ratio - 1.0).max(0.0);
            Some(Duration::from_nanos(
                (k * duration_ns(self.config_base_rtt) as f64) as u64,
            ))
        };
    }

    /// `max_wnd` for a base RTT: `1.5 * sender.linkspeed * base_rtt`, at
    /// least one MTU and [`min_max_wnd`](Self::min_max_wnd)
    /// (`update_base_rtt`, §5.2). The spec and HTSIM both use
    /// the *sender's* speed here, while the initial MaxWnd uses the slower
    /// end; with a slower receiver a lower base RTT can therefore raise
    /// `max_wnd`. Kept as the spec writes it.
    #[must_use]
    pub fn max_wnd_for(&self, base_rtt: Duration) -> u64 {
        (bdp_bytes(self.sender_linkspeed, duration_ns(base_rtt)).saturating_mul(3) / 2)
            .max(self.mtu)
            .max(self.min_max_wnd)
    }
}

impl Default for NsccConfig {
    /// The reference network: 100 Gb/s both ends, `config_base_rtt` 12 µs,
    /// MTU 4096, no trimming (so quick adapt also reacts to delay; declare
    /// trimming only for a fabric that trims). BDP 150 000 B, MaxWnd
    /// 225 000 B, `target_qdelay` 12 µs, `scaling_a` = `scaling_b` = 1.
    fn default() -> Self {
        Self::new(
            100_000_000_000,
            100_000_000_000,
            Duration::from_micros(12),
            4096,
            false,
        )
    }
}

/// Whole nanoseconds of `d`, saturating.
pub(crate) fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `linkspeed (bits/s) * rtt` in bytes, rounded down, saturating.
fn bdp_bytes(linkspeed_bps: u64, rtt_ns: u64) -> u64 {
    let b = u128::from(linkspeed_bps) * u128::from(rtt_ns) / 8_000_000_000;
    u64::try_from(b).unwrap_or(u64::MAX)
}
