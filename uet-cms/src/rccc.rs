//! # RCCC — receiver credit-based congestion control
//!
//! Read before editing: `docs/protocol-notes.md` §5.1 (the RCCC hooks), §5.3 (what
//! is confirmed, and the EQDS/HTSIM pull model), §5.2 "NSCC + RCCC together",
//! §7 (last-hop trims belong to RCCC), §2.5/§2.7/§2.10 (the 24-bit
//! `credit_target` and `credit` fields, CREDIT / CREDIT_REQ CPs), §10 (gaps),
//! and the RCCC post of the NWK series (`docs/protocol-notes.md` §0) for
//! the worked numbers. The normative text
//! (spec §3.6.14) is **not** public; every rule below says where it comes
//! from: **\[seed\]** the RCCC blog, **\[HTSIM\]** UEC's simulator
//! (`uec.cpp`: `UecSrc::computePullTarget`, `handlePull`, `stopSpeculating`,
//! `UecPullPacer`), **\[C\]** confirmed in the notes, **\[I\]** our own choice.
//!
//! Two halves, both pure (time comes in as `now`):
//!
//! * [`RcccSource`] — one per source CCC. Holds the credit balance, the
//!   backlog it asks credit for, the speculative first window and the credit
//!   timer that triggers a CREDIT_REQ CP.
//! * [`RcccReceiver`] — one per receiving FEP (port). Owns the active sender
//!   table and the pacer that divides the link's rate among active senders in
//!   time slices and hands out cumulative grants (CREDIT CP or the ACK_CC
//!   `credit` field).
//!
//! ## The credit loop (how the pieces fit)
//!
//! ```text
//!  source                                            receiver (per FEP)
//!  credit = initial_window (speculative) ──data + credit_target──► table[src].target
//!  can_send: credit ≥ packet                                        pacer tick every slice:
//!  on_send: credit -= bytes                                           budget = rate × slice
//!  credit_target = cum + min(need, cap) - credit                      split among active senders
//!    (after the packet's own send)
//!                  ◄──────────── CREDIT CP / ACK_CC credit (cumulative) ──
//!  on_credit_update: credit += (new - cum) mod 2^24
//! ```
//!
//! ## Wiring it into the CCC and the PDS
//!
//! * Source CCC (RCCC on): `can_send` ANDs [`RcccSource::can_send`];
//!   GetSendParams puts [`RcccSource::credit_target_after`] (or
//!   `credit_target` read after `on_send`) into `req_cc_state.credit_target`
//!   with `cap = Some(cwnd + MTU)` when NSCC also runs; `OnSend`, `OnNewData`,
//!   `OnACK`, `OnNACK`, `OnInferredLoss` and `OnCreditUpdate` call the hooks
//!   of the same name; `poll_timeout`/`handle_timeout` join the CCC's timers;
//!   when [`RcccSource::needs_credit_request`] the PDS sends a CREDIT_REQ CP
//!   whose payload is [`RcccSource::poll_credit_request`].
//! * Destination: one [`RcccReceiver`] per FEP (or port), keyed by whatever
//!   names the source CCC (source FA + `ccc_id`). `OnRX` of every
//!   RUD_CC_REQ / ROD_CC_REQ (and of last-hop-trimmed ones) calls
//!   [`RcccReceiver::on_rx`]; a CREDIT_REQ CP calls
//!   [`RcccReceiver::on_credit_request`]; every ACK_CC with `cc_type` CREDIT
//!   takes its `credit` from [`RcccReceiver::grant_for`]; CREDIT CPs come from
//!   [`RcccReceiver::poll_grant`], sent on the control class like ACKs;
//!   [`RcccReceiver::remove_sender`] when the destination CCC is released.
//! * Both ends must use the same `initial_window` (one deployment config),
//!   and a source CCC and its destination entry must be created and released
//!   together: the cumulative counters only make sense as a pair.
//! * Not paced: the initial windows of new senders (speculation). In an
//!   incast of N new senders up to N × (initial window + one packet) arrive
//!   unpaced in the first RTT; that is where `docs/congestion-evaluation.md` allows drops.
//!   With trimming (§7) the excess arrives as last-hop-trimmed headers,
//!   which the receiver turns into demand at once and the source into a
//!   retransmit backlog that waits for paced credit (no RTO). The bytes of
//!   speculative packets that do arrive (SYN set, not a retransmission) are
//!   charged to their sender's share: [`RcccReceiver::on_data`].
//!
//! ## Units on the wire [I, documented gap §10]
//!
//! `credit` and `credit_target` are **bytes** (nominal sizes, §1) in a
//! **cumulative** 24-bit counter that wraps (2^24 B = 16 MiB), as
//! `uet_wire::Credit24` documents. The seed's numbers are bytes (cumulative
//! 12,500 → 25,000). HTSIM counts 256-B quanta instead; bytes keep the seed's
//! arithmetic exact and still leave 8 MiB of unambiguous range, far above
//! [`RcccConfig::max_credit`] (which [`RcccConfig::validate`] keeps below
//! 2^21). Both sides compare 24-bit values by signed (serial-number)
//! difference, like PSNs (§2.12): a difference in `1..2^23` is newer,
//! 0 a duplicate, anything else older (stale, reordered).
//!
//! A 24-bit field cannot carry the seed's absolute backlog (256 MB >
//! 16 MiB), so `credit_target` is, as HTSIM's pull target, the **cumulative
//! credit value at which the source's (capped) demand would be met**:
//! `cum + min(backlog + rtx_backlog, cap) - credit`, and a data packet carries
//! the value after its own send \[HTSIM\]. The receiver reads the outstanding
//! demand as `credit_target - granted` (mod 2^24).
//!
//! ## Choices, in one place (each is repeated next to its code)
//!
//! * **Time slice** 1 µs \[seed\]; the pacer grants `link_rate × pacing × slice`
//!   per slice (12,500 B at 100 Gb/s and pacing 1.0 \[seed\]; 12,375 B with the
//!   default pacing 0.99 [HTSIM `pull_rate_modifier`]; 1.0 again once ECN
//!   marks have shown that the path marks, with [`EcnRate`] \[I\]).
//! * **Division** \[seed\]: the slice's budget is split equally among the active
//!   senders (6,250 B each for two). When an equal share would be smaller
//!   than [`RcccConfig::min_grant`] (many senders), the slice goes to as
//!   many senders as get at least `min_grant`, least served first [HTSIM:
//!   one pull of several MTUs per sender, round robin; here start-time fair
//!   queueing on bytes, I], so grants stay packet-sized and the long-run
//!   shares stay equal. Grants are whole multiples of
//!   [`RcccConfig::quantum`] (one MTU by default \[HTSIM\]; 1 byte gives the
//!   seed's exact numbers).
//! * **Speculation is charged to the share** [I, after EQDS]: a sender's service
//!   counts its speculative bytes received, so senders whose first window
//!   was trimmed are served first and an incast's flows finish together
//!   (see [`RcccReceiver`], "Fair share").
//! * **Initial window** `link_rate × slice` = 12,500 B at 100 Gb/s \[seed\], i.e.
//!   one slice at line rate = BDP/12 on the 100 Gb/s × 12 µs reference
//!   network (BDP 150,000 B). Both sides count it as already granted: the
//!   receiver's cumulative counter for a new sender starts there, which is why
//!   its first grant reads 25,000 \[seed\]. Speculation ends with the first
//!   feedback (ACK, NACK, credit) or a loss, and unspent speculative credit is
//!   dropped then [HTSIM `stopSpeculating`].
//! * **Max credit** 1.5 BDP = `MaxWnd` [HTSIM `configured_maxwnd`]: caps the
//!   demand a source advertises and the credit it holds.
//! * **Reclaim** \[I\]: unused slice budget is never banked; a sender whose
//!   demand is met, or that has not answered a grant within
//!   [`RcccConfig::idle_timeout`], leaves the active table and its share goes
//!   to the others at the next slice. Grants already sent cannot be revoked
//!   (the counter is cumulative): the source keeps them, bounded by
//!   `max_credit`, and spends them on its next data.
//! * **Outstanding credit** \[I\]: the pacer grants no more than
//!   [`RcccConfig::max_outstanding`] (1.5 BDP) of paced credit that has not
//!   come back as data, summed over senders. Pacing bounds the rate of
//!   grants but not when sources spend them; a host that does not run its
//!   sources for a while lets them bank grants and then send them together
//!   (measured on the veth lab). Credit lost with a packet is settled by
//!   its retransmission, written off when the source asks again
//!   (CREDIT_REQ), when it stops answering grants, or an idle timeout after
//!   its demand was met. The simulator's incasts are unchanged by it.
//! * **Credit timeout** [I, HTSIM sends an RTS on RTO]: a source with backlog,
//!   no credit and no new grant for [`RcccConfig::credit_timeout`] (or twice
//!   its last wait for a grant, whichever is longer; doubled after each
//!   unanswered request, at most 64 × `credit_timeout`) asks for a
//!   CREDIT_REQ CP. Need that grows while the
//!   source is blocked (new data, a NACK, a loss) asks at once, because no
//!   data packet will carry the new target.

mod receiver;
mod source;
#[cfg(test)]
mod tests;

use core::fmt;

use uet_wire::Credit24;
use uet_wire::time::Duration;

pub use receiver::{Arrival, LeaveReason, RcccReceiver, RcccReceiverEvent, RcccReceiverStats};
pub use source::{CreditUpdate, RcccSource, RcccSourceEvent, RcccSourceStats, RequestCause};

/// Bits in a credit time unit: `link_rate_bps × ppm × ns` is divided by this
/// to get bytes (8 bits × 10^6 ppm × 10^9 ns/s).
const BYTE_PPM_NS: u128 = 8 * 1_000_000 * 1_000_000_000;

/// The largest `max_credit` [`RcccConfig::validate`] accepts: 2 MiB. With
/// in-flight grants and one packet of debt, differences between the two
/// sides' counters stay within ±(2·max_credit + MTU) < 2^23, so the signed
/// 24-bit comparison is never ambiguous \[I\].
pub const MAX_CREDIT_LIMIT: u64 = 1 << 21;

/// Active senders per step of a grant's growth ([`RcccConfig::max_grant_steps`]):
/// up to 15 active senders a grant is `min_grant`, from 16 twice it, …
pub const SENDERS_PER_GRANT_STEP: usize = 8;

/// RCCC parameters, shared by the source and the receiver side (both must
/// agree on `initial_window`). Defaults are the 100 Gb/s, 12 µs reference
/// network (`docs/protocol-notes.md` §5.2; HTSIM; seed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RcccConfig {
    /// Receiver link rate in bits per second. Default 100 Gb/s \[seed\].
    pub link_rate_bps: u64,
    /// Pacing factor in parts per million of the link rate: credit is handed
    /// out just under line rate so queues drain. Default 990,000 (0.99)
    /// [HTSIM `pull_rate_modifier` "something like 0.99"; §5.3]. With
    /// [`ecn_rate`](Self::ecn_rate), the receiver paces at the link rate
    /// once the path has marked a packet ([`EcnRate`]).
    pub pacing_ppm: u32,
    /// The pacer's time slice. Default 1 µs [seed: "time-slices ...
    /// representing 1 microsecond of transmission"].
    pub slice: Duration,
    /// Base RTT of the fabric, from which the BDP, `max_credit` and the
    /// timeouts derive. Default 12 µs [§5.2 reference network].
    pub base_rtt: Duration,
    /// Nominal size of a full packet (`transport_pktsize + 40`, §1). Default
    /// 4096 + 64, as `CccConfig` [HTSIM MSS 4096, header 64].
    pub mtu: u32,
    /// Credit a new source may spend before it hears from the receiver (the
    /// speculative first window), and the receiver's starting cumulative
    /// count for a new sender. Default `link_rate × slice` = 12,500 B at
    /// 100 Gb/s \[seed\], BDP/12 on the reference network.
    pub initial_window: u64,
    /// Most credit a source asks for ahead of its sending, and most it holds.
    /// Default 1.5 × BDP = `MaxWnd` [HTSIM `configured_maxwnd`, §5.2], at
    /// least 4 × `mtu` \[I\], at most [`MAX_CREDIT_LIMIT`].
    pub max_credit: u64,
    /// Smallest grant the pacer hands one sender when the slice has to be
    /// shared by many (a sender may still get less if that finishes its
    /// demand). Default one `mtu` \[I\].
    pub min_grant: u64,
    /// Grants are whole multiples of this many bytes (or the sender's whole
    /// remaining demand); the remainder of a slice's budget carries to the
    /// next slice. Default one `mtu` [HTSIM: a pull grants whole packets,
    /// `_mtus_per_pull` × MSS, "need to credit in multiple of MTU"]: credit
    /// in fractions of a packet makes a source send one packet after one
    /// grant and two after the next, and when many senders start together
    /// they do so in step, so the arrival rate swings between ⅔ and 4/3 of
    /// the link rate (measured: 128:1 incast, BENCHMARKS.md). 1 gives the
    /// seed's exact division (12,500 B for one sender, 6,250 B each for
    /// two).
    pub quantum: u64,
    /// Most slices' worth of budget one late pacer tick may hand out (the
    /// daemon's poll loop is not exact). Default 2 \[I\].
    pub max_burst_slices: u32,
    /// With many active senders, grants grow from `min_grant` up to this
    /// many times it: one more `min_grant` per [`SENDERS_PER_GRANT_STEP`]
    /// active senders \[I; HTSIM pulls 4 × MSS\]. Each grant costs the
    /// receiver a CREDIT CP and wakes a sender, and with dozens of senders
    /// served one packet each in turn a software host spends its CPU on
    /// those wake-ups; with few senders, larger grants leave the link idle
    /// while the one sender holding them waits to run. Default 1 (the
    /// seed's division); the pacer's rate does not depend on it.
    pub max_grant_steps: u32,
    /// An active sender that has not been heard from this long after a grant
    /// leaves the active table (its demand is dropped). Default 8 × base RTT
    /// [I: a live sender answers a grant within about one RTT].
    pub idle_timeout: Duration,
    /// A blocked source with backlog re-requests credit after this long
    /// without a new grant. Default 8 × base RTT ≈ HTSIM's 100 µs minimum RTO
    /// at which it sends an RTS [HTSIM, I].
    pub credit_timeout: Duration,
    /// Most paced credit the receiver lets be outstanding — granted to its
    /// senders but not yet back as data — summed over senders; the pacer
    /// grants nothing beyond it. Default `max_credit` (1.5 × BDP) \[I\].
    ///
    /// Pacing alone bounds the *rate* of grants, not when they are spent: a
    /// source that cannot send for a while (a host that does not schedule
    /// its poll loop, on the lab's two shared CPUs for a millisecond and
    /// more) banks every grant up to `max_credit` and then sends it at once,
    /// and N such sources together overflow the buffer long after the first
    /// RTT (measured on the lab: 150 drops at N = 4, a queue standing at
    /// 125 KB). With the bound, in-flight data plus queue stay within it:
    /// one BDP on the wire and at most about half a BDP queued, cc-eval's
    /// "steady queue p50 ≤ 0.5 · BDP". Initial windows are not counted (the
    /// receiver cannot know whether a source used its window), and credit
    /// lost with a dropped packet is written off when the retransmission
    /// arrives, or when the idle timeout drops the sender from the table.
    pub max_outstanding: u64,
    /// Outstanding credit the pacer allows per active sender when that sums
    /// to more than `max_outstanding` (`RcccReceiver::outstanding_bound`).
    /// Default 0: the bound alone. A receiver whose senders' hosts take
    /// milliseconds to run them (a software pacer, `uetd`) sets one
    /// packet, so every active sender can hold a packet's credit at once
    /// \[I\].
    pub outstanding_per_sender: u64,
    /// Scales the pacer's rate down while the data arriving carries ECN-CE
    /// marks, and back up when it does not (see [`EcnRate`]). Default
    /// `None`: the pacer runs at `link_rate × pacing` whatever the marks.
    pub ecn_rate: Option<EcnRate>,
}

/// The receiver's ECN rate control: a pacer that hands out credit at the
/// link rate can still keep a standing queue at a bottleneck it does not
/// see, or one its senders' hosts fill in bursts, since a queue drains only
/// at the difference between what the link carries and what the pacer
/// grants (1 % of the link rate at the default `pacing_ppm`). ECN-CE marks
/// on the data that arrives tell the receiver that such a queue stands; it
/// then grants below the link rate, in proportion to the marks, so the
/// queue drains [after HTSIM `OversubscribedCC`, the receiver's answer to a
/// bottleneck inside an oversubscribed fabric].
///
/// Every `interval` the receiver takes the fraction `f` of the data
/// packets that arrived marked and smooths it as `g ← g/2 + f/2`
/// \[HTSIM\]; the pacer then runs at `1 − g × max_cut` of its rate. An
/// interval without data counts as unmarked. Trimmed packets do not count
/// (last-hop trims are RCCC's own signal, other trims NSCC's).
///
/// HTSIM cuts the rate multiplicatively above a marked fraction of 0.3 and
/// raises it by 0.01 per interval below it. On the veth lab, where the
/// senders' hosts run late and the queue is their jitter buffer, that cut
/// the rate until the queue was gone and left the link 26–29 % idle while it
/// climbed back (`uet lab incast --senders 4 --size 4MiB --cc rccc`: ICT
/// 1.39–1.67 × ideal against 1.04–1.09 without it). A cut in proportion to
/// the marks is never deeper than `max_cut` and lifts as soon as they
/// stop: while marks arrive a queue stands, so the link stays busy, and
/// the queue drains at up to `max_cut` of the link rate \[I\].
///
/// Once a marked packet has arrived, the path is known to mark, and the
/// pacer's rate before the cut is the link rate itself rather than
/// `pacing_ppm` of it. The pacing factor is a blind drain: a pacer that
/// sees no queue grants a little below the link so that one drains
/// anyway, and pays that little in link time at every moment, queue or
/// not. Where marks show the queue, the cut drains it faster and only
/// while it stands: on the veth lab (`uet lab incast --senders 8 --size
/// 1MiB --cc rccc`, six interleaved pairs of invocations) the median
/// ICT/ideal of 18 runs fell from 1.057 to 1.048, lower in five pairs of
/// six \[I\].
///
/// The spec recommends no ECN marking at the last hop when RCCC runs
/// (§5.3); there, no mark ever arrives and the pacer's rate is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EcnRate {
    /// How often the marked fraction is taken. [`EcnRate::for_base_rtt`]:
    /// one base RTT (a mark answers a grant about one RTT after it).
    pub interval: Duration,
    /// The cut at a smoothed marked fraction of 1, ppm of the pacer's
    /// rate. [`EcnRate::for_base_rtt`]: 100,000 (0.1) \[I\].
    pub max_cut_ppm: u32,
}

impl EcnRate {
    /// A cut of at most 0.1, the marks taken once per `base_rtt`.
    #[must_use]
    pub fn for_base_rtt(base_rtt: Duration) -> Self {
        Self {
            interval: base_rtt,
            max_cut_ppm: 100_000,
        }
    }

    fn validate(&self) -> Result<(), RcccConfigError> {
        if self.interval.is_zero() || self.max_cut_ppm >= 1_000_000 {
            return Err(RcccConfigError::EcnRateOutOfRange(*self));
        }
        Ok(())
    }
}

impl RcccConfig {
    /// The configuration for a receiver link of `link_rate_bps` on a fabric
    /// with `base_rtt`, every other parameter derived as documented on the
    /// fields.
    #[must_use]
    pub fn for_link(link_rate_bps: u64, base_rtt: Duration) -> Self {
        let slice = Duration::from_micros(1);
        let mtu = 4096 + 64;
        let mut c = Self {
            link_rate_bps,
            pacing_ppm: 990_000,
            slice,
            base_rtt,
            mtu,
            initial_window: 0,
            max_credit: 0,
            min_grant: u64::from(mtu),
            quantum: u64::from(mtu),
            max_burst_slices: 2,
            max_grant_steps: 1,
            idle_timeout: base_rtt.saturating_mul(8),
            credit_timeout: base_rtt.saturating_mul(8),
            max_outstanding: 0,
            outstanding_per_sender: 0,
            ecn_rate: None,
        };
        // Seed: the initial burst is one slice at line rate (12.5 KB at
        // 100 Gb/s and 1 µs).
        c.initial_window = c.line_rate_bytes(slice);
        c.derive_credit_bounds();
        c
    }

    /// The same configuration for packets of nominal size `mtu`: sets `mtu`,
    /// `min_grant` and `quantum` to it (grants of whole packets, as HTSIM)
    /// and derives `max_credit` and `max_outstanding` again, whose floor of
    /// four packets depends on it.
    ///
    /// Setting `mtu` alone after [`for_link`](Self::for_link) keeps the
    /// floor of four 4,160-byte packets: on the veth lab (1,500-byte MTU,
    /// 500 Mb/s, base RTT 128 µs) that allowed 16,640 B of outstanding
    /// credit — eleven packets into a buffer of nine — instead of 1.5 × BDP
    /// = 12,000 B, and RCCC dropped in steady state \[I\].
    #[must_use]
    pub fn with_mtu(mut self, mtu: u32) -> Self {
        self.mtu = mtu;
        self.min_grant = u64::from(mtu);
        self.quantum = u64::from(mtu);
        self.derive_credit_bounds();
        self
    }

    /// `max_credit` and `max_outstanding` from the BDP and `mtu`.
    fn derive_credit_bounds(&mut self) {
        // HTSIM: configured_maxwnd = 1.5 × BDP; at least four packets [I] so
        // a source on a tiny-BDP fabric can ask for the next packet while one
        // is in flight; above 2 MiB (≈ 930 Gb/s at 12 µs) clamped so the
        // 24-bit counters stay unambiguous.
        self.max_credit = (self.bdp().saturating_mul(3) / 2)
            .max(4 * u64::from(self.mtu))
            .min(MAX_CREDIT_LIMIT);
        self.max_outstanding = self.max_credit;
    }

    /// Bytes the link carries at full line rate in `d` (rounded down).
    #[must_use]
    pub fn line_rate_bytes(&self, d: Duration) -> u64 {
        let b = u128::from(self.link_rate_bps) * d.as_nanos() / 8_000_000_000;
        u64::try_from(b).unwrap_or(u64::MAX)
    }

    /// Bandwidth-delay product `link_rate × base_rtt` in bytes (§5.2).
    #[must_use]
    pub fn bdp(&self) -> u64 {
        self.line_rate_bytes(self.base_rtt)
    }

    /// Credit one on-time slice hands out: `link_rate × pacing × slice`,
    /// rounded down (the pacer carries the fraction to the next slice).
    #[must_use]
    pub fn slice_budget(&self) -> u64 {
        let b = self.paced_units(self.slice.as_nanos()) / BYTE_PPM_NS;
        u64::try_from(b).unwrap_or(u64::MAX)
    }

    /// The initial window as a fraction of the BDP (1/12 by default).
    #[must_use]
    pub fn initial_window_bdp_fraction(&self) -> f64 {
        let bdp = self.bdp();
        if bdp == 0 {
            0.0
        } else {
            self.initial_window as f64 / bdp as f64
        }
    }

    /// Checks the parameters the arithmetic relies on.
    pub fn validate(&self) -> Result<(), RcccConfigError> {
        if self.link_rate_bps == 0 {
            return Err(RcccConfigError::ZeroLinkRate);
        }
        if self.pacing_ppm == 0 || self.pacing_ppm > 1_000_000 {
            return Err(RcccConfigError::PacingOutOfRange(self.pacing_ppm));
        }
        if self.slice.is_zero() || self.slice.as_nanos() > u128::from(u32::MAX) {
            return Err(RcccConfigError::SliceOutOfRange(self.slice));
        }
        if self.mtu == 0 || self.min_grant == 0 {
            return Err(RcccConfigError::ZeroMtu);
        }
        if self.max_credit > MAX_CREDIT_LIMIT || self.initial_window > MAX_CREDIT_LIMIT {
            return Err(RcccConfigError::CreditTooLarge {
                max_credit: self.max_credit,
                initial_window: self.initial_window,
            });
        }
        if self.max_burst_slices == 0 {
            return Err(RcccConfigError::ZeroBurst);
        }
        if let Some(e) = &self.ecn_rate {
            e.validate()?;
        }
        Ok(())
    }

    /// `link_rate × pacing × ns` in bit·ppm units ([`BYTE_PPM_NS`] per byte).
    fn paced_units(&self, ns: u128) -> u128 {
        self.units_at(self.pacing_ppm, ns)
    }

    /// `link_rate × ppm × ns` in bit·ppm units.
    fn units_at(&self, ppm: u32, ns: u128) -> u128 {
        u128::from(self.link_rate_bps) * u128::from(ppm) * ns
    }
}

impl Default for RcccConfig {
    /// 100 Gb/s receiver link, 12 µs base RTT: slice budget 12,375 B,
    /// initial window 12,500 B, `max_credit` 225,000 B.
    fn default() -> Self {
        Self::for_link(100_000_000_000, Duration::from_micros(12))
    }
}

/// A configuration the RCCC arithmetic cannot work with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RcccConfigError {
    /// `link_rate_bps` is zero.
    ZeroLinkRate,
    /// `pacing_ppm` is zero or above 1,000,000 (faster than the link).
    PacingOutOfRange(u32),
    /// `slice` is zero or longer than ~4.29 s.
    SliceOutOfRange(Duration),
    /// `mtu` or `min_grant` is zero.
    ZeroMtu,
    /// `max_credit` or `initial_window` exceeds [`MAX_CREDIT_LIMIT`], which
    /// would make the 24-bit cumulative counters ambiguous.
    CreditTooLarge {
        /// The configured `max_credit`.
        max_credit: u64,
        /// The configured `initial_window`.
        initial_window: u64,
    },
    /// `max_burst_slices` is zero.
    ZeroBurst,
    /// An [`EcnRate`] with a zero interval or a cut of the whole rate.
    EcnRateOutOfRange(EcnRate),
}

impl fmt::Display for RcccConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroLinkRate => f.write_str("RCCC link rate is zero"),
            Self::PacingOutOfRange(p) => write!(f, "RCCC pacing {p} ppm is not in 1..=1000000"),
            Self::SliceOutOfRange(d) => write!(f, "RCCC time slice {d:?} is out of range"),
            Self::ZeroMtu => f.write_str("RCCC mtu or min_grant is zero"),
            Self::CreditTooLarge {
                max_credit,
                initial_window,
            } => write!(
                f,
                "RCCC max_credit {max_credit} or initial_window {initial_window} exceeds \
                 {MAX_CREDIT_LIMIT} bytes (24-bit counters would be ambiguous)"
            ),
            Self::ZeroBurst => f.write_str("RCCC max_burst_slices is zero"),
            Self::EcnRateOutOfRange(e) => write!(f, "RCCC ECN rate control {e:?} is out of range"),
        }
    }
}

impl core::error::Error for RcccConfigError {}

/// Half the 24-bit space: differences at or beyond it are "older".
const HALF24: i64 = 1 << 23;

/// Signed serial-number difference `a - b` of two 24-bit counters, in
/// `-2^23..2^23` (same rule as PSNs, §2.12).
fn diff24(a: Credit24, b: Credit24) -> i64 {
    let d = i64::from(a.get().wrapping_sub(b.get()) & Credit24::MAX);
    if d >= HALF24 { d - (1 << 24) } else { d }
}

/// The low 24 bits of a cumulative byte count, as carried on the wire.
fn wire24(v: u64) -> Credit24 {
    Credit24::from_masked((v & u64::from(Credit24::MAX)) as u32)
}

/// `c + d` modulo 2^24.
fn add24(c: Credit24, d: i64) -> Credit24 {
    Credit24::from_masked((i64::from(c.get()) + d).rem_euclid(1 << 24) as u32)
}

#[cfg(test)]
mod config_tests {
    use super::*;

    #[test]
    fn the_packet_floor_follows_the_mtu() {
        // The veth lab: 500 Mb/s, base RTT 128 µs (BDP 8,000 B), packets of
        // 1,450 nominal bytes.
        let link = RcccConfig::for_link(500_000_000, Duration::from_micros(128));
        assert_eq!(link.max_credit, 4 * 4160, "four default packets");
        let c = link.with_mtu(1450);
        assert_eq!((c.mtu, c.min_grant, c.quantum), (1450, 1450, 1450));
        // 1.5 × BDP, now above the four-packet floor.
        assert_eq!((c.max_credit, c.max_outstanding), (12_000, 12_000));
        // A BDP below four packets: the floor, in the packets sent.
        let tiny = RcccConfig::for_link(100_000_000, Duration::from_micros(100)).with_mtu(1450);
        assert_eq!((tiny.max_credit, tiny.max_outstanding), (5_800, 5_800));
    }

    #[test]
    fn defaults_derive_the_seed_numbers() {
        let c = RcccConfig::default();
        c.validate().unwrap();
        // Seed: 12.5 GB/s × 1 µs = 12.5 KB initial burst; BDP 150,000 B on
        // the 100 Gb/s × 12 µs reference network, so 1/12 of a BDP.
        assert_eq!(c.initial_window, 12_500);
        assert_eq!(c.bdp(), 150_000);
        assert!((c.initial_window_bdp_fraction() - 1.0 / 12.0).abs() < 1e-12);
        // HTSIM: MaxWnd = 1.5 BDP.
        assert_eq!(c.max_credit, 225_000);
        // 0.99 × 12,500.
        assert_eq!(c.slice_budget(), 12_375);
        let full = RcccConfig {
            pacing_ppm: 1_000_000,
            ..c
        };
        assert_eq!(full.slice_budget(), 12_500);
    }

    #[test]
    fn validation_rejects_ambiguous_counters() {
        let c = RcccConfig {
            max_credit: MAX_CREDIT_LIMIT + 1,
            ..RcccConfig::default()
        };
        assert!(matches!(
            c.validate(),
            Err(RcccConfigError::CreditTooLarge { .. })
        ));
        let c = RcccConfig {
            pacing_ppm: 1_000_001,
            ..RcccConfig::default()
        };
        assert_eq!(
            c.validate(),
            Err(RcccConfigError::PacingOutOfRange(1_000_001))
        );
        // 800 Gb/s still fits (1.5 × 1.2 MB = 1.8 MB < 2 MiB).
        RcccConfig::for_link(800_000_000_000, Duration::from_micros(12))
            .validate()
            .unwrap();
    }

    #[test]
    fn serial_arithmetic_wraps() {
        let a = Credit24::from_masked(5);
        let b = Credit24::from_masked(Credit24::MAX - 4);
        assert_eq!(diff24(a, b), 10);
        assert_eq!(diff24(b, a), -10);
        assert_eq!(add24(b, 10), a);
        assert_eq!(add24(a, -10), b);
        assert_eq!(wire24((1 << 24) + 7), Credit24::from_masked(7));
    }
}
