//! PDS configuration with the defaults of the public sources
//! (`docs/protocol-notes.md` §3, §8: REFPROV `uet_pds.h`, "UEC 1.0.1 Table 3-28").

use uet_wire::Dscp;
use uet_wire::time::Duration;

use uet_cms::{CccConfig, RcccConfig};

use crate::rto::RttEstimator;

/// Configuration of one PDS engine.
#[derive(Debug, Clone, PartialEq)]
pub struct PdsConfig {
    /// Largest number of PDCs (initiator and target together). A SYN that
    /// finds the table full is refused with NACK `NO_PDC_AVAIL`.
    pub max_pdcs: usize,
    /// Largest number of a target's PDCs opened by a SYN and not yet
    /// confirmed by their initiator (anyone can open one with a forged
    /// source address). Past it, or with the table full, a new SYN evicts
    /// the oldest of them; confirmed PDCs are never evicted. Default:
    /// `max_pdcs`, so only a full table evicts: an incast of as many
    /// senders as the table holds opens every PDC by SYN at once, and each
    /// is confirmed only a round trip later.
    pub max_pending_pdcs: usize,
    /// PSN tracking window (MP_RANGE) in packets; REFPROV default 128.
    pub mp_range: u32,
    /// ACK coalescing trigger in bytes (`ACK_Gen_Trigger`). Default
    /// min(16 KiB, BDP/4): `docs/congestion-evaluation.md` shows a 16 KiB trigger caps a flow
    /// well below line rate when the BDP is ~20 KB.
    pub ack_gen_trigger: u32,
    /// Minimum a packet adds to the ACK trigger (`ACK_Gen_Min_Pkt_Add`, 1024).
    pub ack_gen_min_pkt_add: u32,
    /// First retransmission timeout (`RTO_INIT_TIME`), and the least RTO
    /// once the round trip is measured (`rto.rs`).
    pub rto_init: Duration,
    /// Upper bound of the RTO, measured and backed off (the spec's range
    /// ends at 8 s).
    pub rto_max: Duration,
    /// The RTO follows each PDC's measured round trip (SRTT/RTTVAR,
    /// `rto.rs`), so a standing queue longer than `rto_init` is not taken
    /// for loss. Off: `rto_init` doubled per timeout, whatever the path.
    pub rto_follows_rtt: bool,
    /// The least RTO of a packet while its target is silent: no ACK has
    /// acknowledged anything sent after the packet (`Pdc::silent_since`,
    /// `Pdc::rto_deadline`). Losses on a path that answers are found by
    /// SACK, RACK and tail probes, and keep `rto_init`; a target that
    /// answers nothing sent since is more likely a host that is not
    /// running than a path that lost every packet. `None`: silence changes
    /// nothing.
    pub rto_silent: Option<Duration>,
    /// Retransmissions by timeout before the PDC closes in error
    /// (`Max_RTO_Retx_Cnt`; REFPROV 5).
    pub max_rto_retx: u32,
    /// Retransmissions by NACK before the PDC closes in error
    /// (`Max_NACK_Retx_Cnt`).
    pub max_nack_retx: u32,
    /// A PDC with nothing in flight and nothing queued for this long closes.
    pub idle_timeout: Duration,
    /// SACK loss inference: a packet this many PSNs behind the highest
    /// delivered one is presumed lost (TCP's DupThresh, 3). `u32::MAX`:
    /// never by order alone.
    pub dupthresh: u32,
    /// ... and only if it was sent at least this long before the newest
    /// packet the ACK delivered (0: merely before it).
    pub reorder_window: Duration,
    /// RACK's reordering window (RFC 8985 §6.2): a packet sent at least
    /// this long before a delivered one is presumed lost, however few
    /// packets separate them. `None`: transmission order counts only with
    /// `dupthresh`.
    pub rack_window: Option<Duration>,
    /// Tail loss probing (`tail_probe.rs`): the least probe timeout, PTO =
    /// max(2 · SRTT, this). A PDC with packets in flight that has neither
    /// sent nor heard anything for a PTO sends a Probe CP on the data
    /// traffic class, and the packets sent before it that its answer does
    /// not acknowledge are presumed lost. `None`: no probes, the RTO alone
    /// recovers a lost tail.
    pub tail_probe: Option<Duration>,
    /// Longest an ACK is held back waiting for more packets to coalesce
    /// (a safety net under the byte trigger and the sender's `ar`).
    pub ack_delay: Duration,
    /// Largest SES header + payload per packet (negotiated down from the MTU
    /// by the caller).
    pub max_ses_len: usize,
    /// DSCP of requests (REFPROV CS0).
    pub dscp_data: Dscp,
    /// DSCP of retransmitted requests (`DSCP_TRIMMABLE_RTX`, §6/§7: switches
    /// trim them only above 1.5 × Plane_BDP instead of Plane_BDP, so a packet
    /// trimmed once is likely to get through the next time), or `None` to
    /// send retransmissions with `dscp_data`. The spec gives no value; the
    /// operator picks one with the switches.
    pub dscp_data_rtx: Option<Dscp>,
    /// DSCP of ACKs, NACKs and control packets (REFPROV EF = 46).
    pub dscp_control: Dscp,
    /// DSCP a switch writes into a trimmed packet (ASTERIA example 16).
    pub dscp_trimmed: Dscp,
    /// DSCP of a packet trimmed at the last hop (ASTERIA example 18).
    pub dscp_trimmed_lasthop: Dscp,
    /// Congestion control of the CCCs this engine creates.
    pub ccc: CccConfig,
    /// Receiver-side RCCC (credit pacing to the sources that ask for it),
    /// or `None` when this endpoint grants no credit.
    pub rccc_receiver: Option<RcccConfig>,
    /// How a secure PDC's Start_PSN is agreed (a PDC in a security domain:
    /// its job's, `Pds::set_job_domain`, or that of the SYN that opened
    /// it; `docs/protocol-notes.md` §2.12 "Secure PDCs").
    pub secure_start: SecureStart,
    /// PSNs a secure PDC may use from its Start_PSN: it must close when
    /// its PSN reaches Start_PSN + 2^31 (§2.12), so that no PSN of the
    /// PDC comes round again under the domain's keys. Below that only to
    /// test the rule.
    pub secure_psn_span: u32,
}

/// How a secure PDC's Start_PSN is agreed (§2.12 "Secure PDCs"): a
/// replayed SYN of an earlier PDC must not open a PDC again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecureStart {
    /// EXPECTED_0RTT_START: the target keeps a floor per security domain,
    /// raised past the Start_PSN of every secure PDC it forgets and told to
    /// the initiator in its closing ACK (flag EPSN); a SYN whose Start_PSN
    /// is below it is answered NEW_START_PSN with the floor, and the
    /// initiator starts the PDC again from there. An initiator that knows
    /// the floor opens its next PDC at it, in zero round trips.
    #[default]
    Expected0Rtt,
    /// RANDOM_1RTT_START: the target answers every new secure PDC's first
    /// SYN with a Start_PSN of its own choosing (one round trip).
    Random1Rtt,
}

impl Default for PdsConfig {
    fn default() -> Self {
        Self {
            max_pdcs: 1024,
            max_pending_pdcs: 1024,
            mp_range: 128,
            ack_gen_trigger: 16 * 1024,
            ack_gen_min_pkt_add: 1024,
            rto_init: Duration::from_millis(5),
            rto_max: Duration::from_secs(8),
            rto_follows_rtt: true,
            rto_silent: None,
            max_rto_retx: 5,
            max_nack_retx: 64,
            idle_timeout: Duration::from_secs(2),
            ack_delay: Duration::from_micros(20),
            dupthresh: 3,
            reorder_window: Duration::ZERO,
            tail_probe: None,
            rack_window: None,
            max_ses_len: 4096,
            dscp_data: Dscp::from_masked(0),
            dscp_data_rtx: None,
            dscp_control: Dscp::from_masked(46),
            dscp_trimmed: Dscp::from_masked(16),
            dscp_trimmed_lasthop: Dscp::from_masked(18),
            ccc: CccConfig::default(),
            rccc_receiver: None,
            secure_start: SecureStart::Expected0Rtt,
            secure_psn_span: 1 << 31,
        }
    }
}

impl PdsConfig {
    /// Sets the ACK trigger to min(16 KiB, BDP/4) for a path of `bdp_bytes`,
    /// never below one minimum packet add.
    pub fn with_bdp(&mut self, bdp_bytes: u64) -> &mut Self {
        let quarter = u32::try_from(bdp_bytes / 4).unwrap_or(u32::MAX);
        self.ack_gen_trigger = quarter.clamp(self.ack_gen_min_pkt_add, 16 * 1024);
        self
    }

    /// Nominal size (§1: `transport_pktsize + 40`) of a request carrying
    /// `ses_len` bytes of SES header and payload over UDP: UDP 8 + PDS 12.
    #[must_use]
    pub const fn nominal(&self, ses_len: u32) -> u32 {
        ses_len + 8 + 12 + 40
    }

    /// The RTO after `retries` backoffs: `RTO_INIT_TIME * 2^retries`, capped
    /// at `rto_max` (`docs/protocol-notes.md` §3 "Loss recovery").
    #[must_use]
    pub fn rto(&self, retries: u32) -> Duration {
        self.backed_off(self.rto_init, retries)
    }

    /// `base · 2^retries`, at most `rto_max`.
    fn backed_off(&self, base: Duration, retries: u32) -> Duration {
        base.checked_mul(1u32 << retries.min(20))
            .unwrap_or(self.rto_max)
            .min(self.rto_max)
    }

    /// The RTO of a PDC whose round trip `rtt` measured, after `retries`
    /// timeouts: SRTT + max(`ack_delay`, 4 · RTTVAR), never below
    /// `rto_init` nor twice the longest recent sample, doubled per
    /// timeout, at most `rto_max` (`rto.rs`). With
    /// `rto_follows_rtt` off, [`PdsConfig::rto`].
    #[must_use]
    pub fn rto_for(&self, rtt: &RttEstimator, retries: u32) -> Duration {
        if !self.rto_follows_rtt {
            return self.rto(retries);
        }
        rtt.rto(self.rto_init, self.ack_delay, self.rto_max, retries)
    }

    /// The least RTO after `retries` timeouts of a packet whose target is
    /// silent: `rto_silent` doubled per timeout, at most `rto_max`.
    #[must_use]
    pub fn rto_silent_floor(&self, retries: u32) -> Option<Duration> {
        Some(self.backed_off(self.rto_silent?, retries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rto_backs_off_and_caps() {
        let c = PdsConfig::default();
        assert_eq!(c.rto(0), Duration::from_millis(5));
        assert_eq!(c.rto(3), Duration::from_millis(40));
        assert_eq!(c.rto(40), Duration::from_secs(8));
    }

    #[test]
    fn ack_trigger_follows_the_bdp() {
        let mut c = PdsConfig::default();
        assert_eq!(c.with_bdp(20_000).ack_gen_trigger, 5_000);
        assert_eq!(c.with_bdp(10_000_000).ack_gen_trigger, 16 * 1024);
        assert_eq!(c.with_bdp(100).ack_gen_trigger, 1024);
    }
}
