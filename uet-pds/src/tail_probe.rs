//! Tail loss probing: finding lost packets that nothing sent later will
//! reveal, before their retransmission timeout.
//!
//! SACK inference (PSN order and transmission order, in the engine's
//! `on_ack`) needs a later packet to be delivered. The last packets of a
//! burst have none when the burst was lost whole at its tail, and they
//! often cannot get one: the window or the credit is held by the very
//! packets that were lost, and the earlier losses wait for it too. Only the
//! RTO then recovers them, at RTO_INIT_TIME, which must cover a full buffer
//! (200 µs on the simulated 100 Gb/s fabric, against a 10 µs round trip).
//!
//! A PDC that has packets in flight and has neither sent nor heard anything
//! for a probe timeout (PTO) sends a Probe CP (§2.10; HTSIM's SLEEK probes
//! do the same, `docs/protocol-notes.md` §4). The target answers it with an ACK
//! carrying its current cumulative and selective acknowledgement, sent
//! after the responses it has queued (§3: a response still to leave would
//! cut the bitmap short, and the answer cannot carry one). The probe
//! left after every packet in flight and went the same way (data traffic
//! class: a control class that overtakes data would prove nothing), so a
//! packet sent before it that the answer does not acknowledge was lost
//! (RACK-TLP, RFC 8985, which probes with a data segment instead).
//!
//! The probe timeout (PTO, [`TailProbe::deadline`]) follows the least round
//! trip, not the smoothed one as RFC 8985's does (2 · SRTT there): under an
//! incast SRTT includes the full queue and 2 · SRTT is as long as the RTO,
//! and a probe answered from behind that queue is still exact. One probe
//! per episode (see [`TailProbe::deadline`]). RTT samples come from the
//! ACKs of packets sent once (Karn); before the first, the configured
//! floor stands in for the least round trip. Once a probe's answer finds
//! nothing lost, the flow is behind a queue rather than a loss, and the PTO
//! follows the newest round trip until a probe or an RTO finds one
//! ([`TailProbe::found`]): otherwise a flow behind a standing queue
//! probes once per least round trip its packets wait.
//!
//! That includes an initiator that has heard nothing at all: its whole
//! first window may have been dropped by a full drop-tail buffer, so the
//! target does not know it and nothing it sent will ever be answered. Its
//! probe goes addressed as its SYN packets are (§2.2): the target opens
//! the PDC from it as from any SYN, and answers with an ACK that
//! establishes the PDC and acknowledges nothing. Every packet sent before
//! the probe is then known lost, instead of waiting for an RTO that must
//! cover a full buffer (an incast into a drop-tail buffer drops whole
//! speculative windows of some of its senders).

use uet_wire::time::{Duration, Instant};

/// Which round trip the PTO is twice of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PtoBasis {
    /// The least RTT sampled (the configured floor before the first
    /// sample); the PTO is never below the floor.
    MinRtt,
    /// The configured floor, the fabric's idle round trip, whatever the
    /// samples say. Under an incast every sample may include the queue
    /// (the first ACK of a 128:1 drop-tail incast arrives after 85 µs of
    /// it on a 9 µs fabric), and a PTO of twice that is as long as the RTO;
    /// the probe's answer is exact behind any queue on a FIFO path, so it
    /// need not wait. The engine uses it when the resends a probe finds
    /// wait for credit (RCCC), which paces them whenever they are found;
    /// a window-based source (NSCC) keeps [`PtoBasis::MinRtt`], because
    /// an early probe would only send its resends into the overloaded
    /// queue sooner.
    Floor,
}

/// A probe on its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outstanding {
    /// Its `probe_opaque`.
    pub(crate) opaque: u16,
    /// When it left.
    pub(crate) sent_at: Instant,
    /// The transmission number the next data packet would have taken when
    /// it left: every packet with a lower one was sent before it.
    pub(crate) next_tx: u32,
}

/// The tail-probe state of one PDC's send half.
#[derive(Debug, Clone, Default)]
pub(crate) struct TailProbe {
    min_rtt: Option<Duration>,
    /// The newest RTT sample.
    latest_rtt: Option<Duration>,
    /// The last probe's answer found nothing lost: what was in flight was
    /// late, not lost, and the PTO follows the newest round trip until a
    /// probe or an RTO finds a loss ([`TailProbe::deadline`]).
    late: bool,
    /// The last data transmission, delivering ACK or probe.
    last_progress: Option<Instant>,
    outstanding: Option<Outstanding>,
    /// When the probe of the open episode left: no other probe until a
    /// packet sent after it is delivered.
    episode: Option<Instant>,
}

impl TailProbe {
    /// A packet sent once, at `sent_at`, was delivered (an ACK at `now`):
    /// an RTT sample, and the end of a probe episode if it left after the
    /// probe.
    pub(crate) fn on_delivery(&mut self, now: Instant, sent_at: Instant) {
        let rtt = now - sent_at;
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        self.latest_rtt = Some(rtt);
        if self.episode.is_some_and(|p| sent_at > p) {
            self.episode = None;
        }
    }

    /// The least round trip sampled.
    #[cfg(test)]
    pub(crate) fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// Something was sent, or an ACK delivered something: the PTO restarts.
    pub(crate) fn on_progress(&mut self, now: Instant) {
        self.last_progress = Some(now);
    }

    /// When a probe is due, if one may be sent at all (`min_pto` enables
    /// probing; `ack_delay` is the longest the target holds an ACK back;
    /// the caller checks that packets are in flight).
    ///
    /// PTO = max(2 · min RTT, `min_pto`) + `ack_delay` after the last
    /// progress: the longest an unloaded path takes to answer. Without an
    /// RTT sample, `min_pto` (the fabric's idle round trip) stands in for
    /// the min RTT. A probe is
    /// a 40-byte control packet and its answer is exact on a FIFO path even
    /// behind a deep queue, so it can go long before the RTO, which must
    /// cover a full buffer.
    ///
    /// One probe per episode (RFC 8985 §7.3): after a probe, the next waits
    /// until the probe is answered (RFC 8985 §7.4 ends a TLP episode with
    /// the probe's ACK; [`TailProbe::answered`]), until a packet sent after
    /// it is delivered, or until the probe is presumed lost. Probing again
    /// and again on every silence, without waiting for an answer, would take
    /// the RTO's backoff away from an overloaded bottleneck (1023:1
    /// drop-tail NSCC: 3.0 × ideal with repeated probes, 1.7 × without
    /// any).
    ///
    /// A probe still unanswered `unanswered` after it left was lost (the
    /// caller passes half of RTO_INIT_TIME, which covers a full buffer's
    /// drain several times): the episode reopens. A 40-byte probe is
    /// dropped by a full drop-tail buffer like any packet, and a source
    /// whose first window was dropped whole has nothing else to find out
    /// with before its RTO (its SYN-addressed probe may meet the same
    /// full buffer). This also
    /// keeps probing under RTO backoff, at most every half RTO_INIT_TIME
    /// while probes go unanswered: the backed-off timer doubles with every
    /// loss of the resend, to 40 ms after six at 1 Gb/s, while the
    /// bottleneck that dropped it may drain long before, leaving a flow
    /// waiting out tens of milliseconds on an idle link. It is no RTO: the
    /// retry budget and the backoff still end a PDC whose probes go
    /// unanswered (a dead path).
    ///
    /// With RCCC the resends a probe's answer condemns need credit, which no
    /// probe brings, and a condemned packet has no RTO running. Where the
    /// target has acknowledged nothing of the PDC its RCCC receiver has not
    /// heard of the source and would never grant; there the answer forces
    /// the oldest lost packet out, as an RTO does (the engine's `on_ack`).
    /// The rule covers every such answer, not only the one that
    /// establishes the PDC: a second probe in one episode could otherwise
    /// leave a source waiting for credit for good.
    ///
    /// After an answer that found nothing lost ([`TailProbe::found`]), a
    /// [`PtoBasis::MinRtt`] PTO is max(2 · newest RTT, `min_pto`) +
    /// `ack_delay`.
    ///
    /// With [`PtoBasis::Floor`] the PTO ignores the RTT samples: 2 ·
    /// `min_pto` + `ack_delay`. See [`PtoBasis`].
    pub(crate) fn deadline(
        &self,
        min_pto: Option<Duration>,
        ack_delay: Duration,
        basis: PtoBasis,
        unanswered: Duration,
    ) -> Option<Instant> {
        let floor = min_pto?;
        let rtt = match basis {
            PtoBasis::MinRtt if self.late => self.latest_rtt.max(self.min_rtt).unwrap_or(floor),
            PtoBasis::MinRtt => self.min_rtt.unwrap_or(floor),
            PtoBasis::Floor => floor,
        };
        let pto = (rtt * 2).max(floor) + ack_delay;
        let next = self.last_progress? + pto;
        // An open episode's probe is unanswered: `answered` closes both.
        Some(match self.episode {
            None => next,
            Some(probe) => next.max(probe + unanswered),
        })
    }

    /// Records a probe sent now.
    pub(crate) fn sent(&mut self, now: Instant, opaque: u16, next_tx: u32) {
        self.outstanding = Some(Outstanding {
            opaque,
            sent_at: now,
            next_tx,
        });
        self.last_progress = Some(now);
        self.episode = Some(now);
    }

    /// The probe answered at `now` by an ACK echoing `opaque`, if it is
    /// ours. The answer ends the probe's episode and counts as progress: the
    /// next probe may go a PTO later, for the resends of what this one found
    /// lost (RFC 8985 §7.4: the ACK of a loss probe ends its episode). Were
    /// the episode to last until a packet sent after the probe is
    /// delivered, resends lost again (an overfilled buffer drops them
    /// every round) would each wait for their RTO.
    pub(crate) fn answered(&mut self, now: Instant, opaque: u16) -> Option<Outstanding> {
        let o = self.outstanding.filter(|o| o.opaque == opaque)?;
        self.outstanding = None;
        self.episode = None;
        self.last_progress = Some(now);
        Some(o)
    }

    /// What the answer to a probe found: `lost` if it (or the SACK it
    /// carried) condemned a packet.
    ///
    /// An answer that finds nothing lost acknowledged everything sent
    /// before the probe, or will: the packets in flight were behind a
    /// queue the probe waited in too. Probed again a PTO of the least
    /// round trip later, a flow behind a standing queue (many window-based
    /// sources at one MTU each into one port) sends one probe for every
    /// least round trip its packets spend queued, each answered with an
    /// ACK — several control packets per data packet, and on software
    /// hosts as many wake-ups of both ends. The PTO then follows the newest
    /// round trip instead (RACK-TLP's 2 · SRTT, RFC 8985 §7.2, with the
    /// newest sample so that it falls as soon as the queue drains), until
    /// an answer or an RTO finds a loss.
    pub(crate) fn found(&mut self, lost: bool) {
        self.late = !lost;
    }

    /// A retransmission timeout fired: probes had not found the loss in
    /// time, so they go at the least round trip's pace again.
    pub(crate) fn on_rto(&mut self) {
        self.late = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe is presumed lost only after this long (far beyond the
    /// times these tests look at, where that is not what is tested).
    const NEVER: Duration = Duration::from_secs(1);

    #[test]
    fn the_floor_stands_in_for_a_missing_rtt_sample_and_none_disables() {
        let mut t = TailProbe::default();
        let d = Duration::from_micros(3);
        // The deadline with a floor of `us` µs (none: probing off).
        let at = |t: &TailProbe, us: Option<u64>| {
            t.deadline(us.map(Duration::from_micros), d, PtoBasis::MinRtt, NEVER)
        };
        assert_eq!(at(&t, Some(5)), None);
        t.on_progress(Instant::from_nanos(1_000));
        // No sample yet: PTO = 2 × floor + ACK delay = 13 µs.
        assert_eq!(at(&t, Some(5)), Some(Instant::from_nanos(14_000)));
        assert_eq!(at(&t, None), None);
        t.on_delivery(Instant::from_nanos(10_000), Instant::ZERO);
        t.on_delivery(Instant::from_nanos(90_000), Instant::ZERO);
        assert_eq!(t.min_rtt(), Some(Duration::from_micros(10)));
        assert_eq!(at(&t, None), None);
        // PTO = 2 × min RTT + ACK delay = 23 µs after the last progress.
        assert_eq!(at(&t, Some(5)), Some(Instant::from_nanos(24_000)));
        // ... never below the configured floor.
        assert_eq!(at(&t, Some(50)), Some(Instant::from_nanos(54_000)));
    }

    #[test]
    fn the_floor_basis_ignores_samples_inflated_by_a_queue() {
        let mut t = TailProbe::default();
        let (floor, d) = (Some(Duration::from_micros(9)), Duration::from_micros(3));
        // The only sample came from behind an 85 µs queue.
        t.on_delivery(Instant::from_nanos(85_000), Instant::ZERO);
        t.on_progress(Instant::from_nanos(85_000));
        assert_eq!(
            t.deadline(floor, d, PtoBasis::MinRtt, NEVER),
            Some(Instant::from_nanos(85_000 + 170_000 + 3_000))
        );
        assert_eq!(
            t.deadline(floor, d, PtoBasis::Floor, NEVER),
            Some(Instant::from_nanos(85_000 + 18_000 + 3_000))
        );
    }

    #[test]
    fn one_probe_per_episode() {
        let mut t = TailProbe::default();
        let (floor, d) = (Some(Duration::from_micros(5)), Duration::ZERO);
        t.on_delivery(Instant::from_nanos(10_000), Instant::ZERO);
        t.sent(Instant::from_nanos(30_000), 7, 0);
        // Unanswered, and no packet sent after it has arrived: no probe
        // until this one is presumed lost.
        let lost = Some(Instant::from_nanos(30_000) + NEVER);
        t.on_progress(Instant::from_nanos(40_000));
        assert_eq!(t.deadline(floor, d, PtoBasis::MinRtt, NEVER), lost);
        // A packet that left before the probe does not end the episode...
        t.on_delivery(Instant::from_nanos(50_000), Instant::from_nanos(29_000));
        assert_eq!(t.deadline(floor, d, PtoBasis::MinRtt, NEVER), lost);
        // ... one that left after it does.
        t.on_delivery(Instant::from_nanos(60_000), Instant::from_nanos(31_000));
        assert_eq!(
            t.deadline(floor, d, PtoBasis::MinRtt, NEVER),
            Some(Instant::from_nanos(60_000))
        );
    }

    #[test]
    fn only_the_outstanding_probe_is_answered_once() {
        let mut t = TailProbe::default();
        t.sent(Instant::from_nanos(7), 42, 9);
        let now = Instant::from_nanos(20);
        assert_eq!(t.answered(now, 41), None);
        let o = t.answered(now, 42).unwrap();
        assert_eq!((o.sent_at, o.next_tx), (Instant::from_nanos(7), 9));
        assert_eq!(t.answered(now, 42), None);
    }

    #[test]
    fn an_answer_ends_the_episode() {
        let (floor, d) = (Some(Duration::from_micros(5)), Duration::ZERO);
        let mut t = TailProbe::default();
        t.on_delivery(Instant::from_nanos(10_000), Instant::ZERO);
        t.sent(Instant::from_nanos(30_000), 7, 0);
        assert_eq!(
            t.deadline(floor, d, PtoBasis::MinRtt, NEVER),
            Some(Instant::from_nanos(30_000) + NEVER)
        );
        // The next probe a PTO (2 × 10 µs) after the answer.
        assert!(t.answered(Instant::from_nanos(45_000), 7).is_some());
        assert_eq!(
            t.deadline(floor, d, PtoBasis::MinRtt, NEVER),
            Some(Instant::from_nanos(65_000))
        );
    }

    #[test]
    fn after_an_answer_that_found_nothing_lost_the_pto_follows_the_newest_rtt() {
        let (floor, d) = (Some(Duration::from_micros(5)), Duration::ZERO);
        let at = |t: &TailProbe| t.deadline(floor, d, PtoBasis::MinRtt, NEVER);
        let mut t = TailProbe::default();
        t.on_delivery(Instant::from_nanos(10_000), Instant::ZERO);
        // A queue builds: the newest sample is 100 µs.
        t.on_delivery(Instant::from_nanos(200_000), Instant::from_nanos(100_000));
        t.on_progress(Instant::from_nanos(200_000));
        // 2 × the least RTT (10 µs) while no probe has come back empty.
        assert_eq!(at(&t), Some(Instant::from_nanos(220_000)));
        t.sent(Instant::from_nanos(220_000), 7, 0);
        assert!(t.answered(Instant::from_nanos(320_000), 7).is_some());
        t.found(false);
        // The answer found everything late, not lost: 2 × 100 µs now.
        assert_eq!(at(&t), Some(Instant::from_nanos(520_000)));
        // The queue drains: the PTO falls with the newest sample...
        t.on_delivery(Instant::from_nanos(340_000), Instant::from_nanos(310_000));
        assert_eq!(at(&t), Some(Instant::from_nanos(380_000)));
        // ... to the least RTT's.
        t.on_delivery(Instant::from_nanos(350_000), Instant::from_nanos(340_000));
        assert_eq!(at(&t), Some(Instant::from_nanos(340_000)));
        // A probe that finds a loss, or an RTO, returns to the least RTT.
        t.on_delivery(Instant::from_nanos(400_000), Instant::from_nanos(300_000));
        t.on_progress(Instant::from_nanos(400_000));
        assert_eq!(at(&t), Some(Instant::from_nanos(600_000)));
        t.found(true);
        assert_eq!(at(&t), Some(Instant::from_nanos(420_000)));
        t.found(false);
        t.on_rto();
        assert_eq!(at(&t), Some(Instant::from_nanos(420_000)));
        // The idle-RTT basis (RCCC) never follows the samples.
        t.found(false);
        assert_eq!(
            t.deadline(floor, d, PtoBasis::Floor, NEVER),
            Some(Instant::from_nanos(410_000))
        );
    }

    #[test]
    fn a_probe_unanswered_for_long_was_lost_and_the_episode_reopens() {
        let (floor, d) = (Some(Duration::from_micros(5)), Duration::ZERO);
        let lost_after = Duration::from_micros(100);
        let mut t = TailProbe::default();
        t.on_delivery(Instant::from_nanos(10_000), Instant::ZERO);
        t.sent(Instant::from_nanos(30_000), 7, 0);
        // Unanswered: again 100 µs after it left...
        assert_eq!(
            t.deadline(floor, d, PtoBasis::MinRtt, lost_after),
            Some(Instant::from_nanos(130_000))
        );
        // ... and never sooner than a PTO after the last progress.
        t.on_progress(Instant::from_nanos(125_000));
        assert_eq!(
            t.deadline(floor, d, PtoBasis::MinRtt, lost_after),
            Some(Instant::from_nanos(145_000))
        );
        // Probing disabled stays disabled.
        assert_eq!(t.deadline(None, d, PtoBasis::MinRtt, lost_after), None);
    }
}
