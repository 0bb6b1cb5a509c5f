//! The receiver half of RCCC: the active sender table and the credit pacer
//! of one receiving FEP or port (`docs/protocol-notes.md` §5.1 `RCCC.OnRX`, §5.3;
//! the RCCC post of the NWK series, `docs/protocol-notes.md` §0, "Target RCCC Operation").

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use uet_wire::Credit24;
use uet_wire::time::{Duration, Instant};

use super::{BYTE_PPM_NS, RcccConfig, RcccConfigError, diff24, wire24};

/// Events kept for a consumer that does not poll; older ones are dropped.
const EVENT_CAP: usize = 1024;

/// Why a sender left the active table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaveReason {
    /// Everything it asked for has been granted.
    DemandMet,
    /// It did not answer a grant within the idle timeout; its demand was
    /// dropped and its share went to the others.
    Idle,
    /// The PDS removed it ([`RcccReceiver::remove_sender`]).
    Removed,
}

/// A change in the active sender table, for tracing and plots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RcccReceiverEvent<S> {
    /// A sender with demand joined the active table.
    Joined {
        /// When.
        now: Instant,
        /// Who.
        sender: S,
    },
    /// A sender left the active table.
    Left {
        /// When.
        now: Instant,
        /// Who.
        sender: S,
        /// Why.
        reason: LeaveReason,
    },
    /// A packet from `sender` was trimmed at the last hop (§7): the
    /// receiver's own link was oversubscribed, typically by speculative
    /// first windows.
    LastHopTrim {
        /// When.
        now: Instant,
        /// Whose packet.
        sender: S,
    },
}

/// Counters of a receiver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RcccReceiverStats {
    /// Grants handed out by the pacer.
    pub grants: u64,
    /// Bytes granted by the pacer (not counting initial windows).
    pub granted_bytes: u64,
    /// Pacer ticks run.
    pub ticks: u64,
    /// Data bytes received (nominal sizes, untrimmed packets).
    pub received_bytes: u64,
    /// Packets trimmed at the last hop.
    pub last_hop_trims: u64,
    /// CREDIT_REQ CPs received.
    pub credit_requests: u64,
    /// Senders dropped from the active table for not answering grants.
    pub idle_evictions: u64,
    /// CREDIT_REQs that wrote off the sender's outstanding credit (those
    /// that did not raise its target).
    pub write_offs: u64,
    /// Speculative bytes received (first-window packets that were not
    /// trimmed), counted against their senders' shares.
    pub speculative_bytes: u64,
    /// Pacer ticks that granted less than their budget because the credit
    /// outstanding reached [`RcccConfig::max_outstanding`].
    pub outstanding_limited: u64,
    /// Where the pacer's budget went other than to grants, in bytes of
    /// credit at the paced rate; with `granted_bytes` they tell a link left
    /// idle by a late pacer from one held back by the outstanding cap or by
    /// senders that wanted no more.
    ///
    /// Budget of the time a tick came later than `max_burst_slices` after
    /// the one before (the caller did not run the pacer for that long).
    pub late_bytes: u64,
    /// Budget withheld because the credit outstanding reached
    /// [`RcccConfig::max_outstanding`].
    pub withheld_bytes: u64,
    /// Budget no active sender had demand for (reclaimed, not banked).
    pub unclaimed_bytes: u64,
    /// Budget held back by the ECN rate control ([`RcccConfig::ecn_rate`]):
    /// what the link rate would have granted beyond the scaled rate.
    pub ecn_slowed_bytes: u64,
    /// Untrimmed data packets counted by the ECN rate control, and of them
    /// those that arrived with ECN-CE.
    pub ecn_packets: u64,
    /// See `ecn_packets`.
    pub ecn_marked: u64,
    /// Updates of the ECN rate control that lowered the rate.
    pub ecn_decreases: u64,
}

/// The state of [`RcccConfig::ecn_rate`]: the smoothed marked fraction
/// and where the current interval began.
#[derive(Debug, Clone, Copy, Default)]
struct EcnState {
    /// The smoothed marked fraction g, ppm.
    g_ppm: u32,
    /// `ecn_packets` and `ecn_marked` of the stats when the interval began.
    seen: (u64, u64),
    /// When the next update is due; `None` until the first tick.
    next_update: Option<Instant>,
    /// A marked packet has arrived: the path marks, and the pacer runs at
    /// the link rate before the cut (see [`super::EcnRate`]).
    path_marks: bool,
}

/// 1 in ppm.
const PPM: u32 = 1_000_000;

impl EcnState {
    /// The pacer's rate factor, ppm: `1 − g × max_cut`.
    fn rate_ppm(&self, c: Option<&super::EcnRate>) -> u32 {
        let Some(c) = c else {
            return PPM;
        };
        let cut = u64::from(self.g_ppm) * u64::from(c.max_cut_ppm) / u64::from(PPM);
        PPM - u32::try_from(cut).unwrap_or(PPM).min(PPM - 1)
    }
}

/// The positive part of a balance.
fn pos(balance: i64) -> u64 {
    balance.max(0).unsigned_abs()
}

/// Sets a sender's balance and keeps `total`, the receiver's outstanding
/// credit, equal to the sum of the positive balances.
fn set_balance(total: &mut u64, e: &mut Entry, balance: i64) {
    *total = *total - pos(e.balance) + pos(balance);
    e.balance = balance;
}

/// How a data packet came to be sent ([`RcccReceiver::on_data`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// On the initial window.
    Speculative,
    /// On paced credit (or forced past it by an RTO).
    Paced,
    /// A retransmission of a packet sent on paced credit: it settles its
    /// own credit and its lost original's. A retransmission of a
    /// speculative packet is [`Arrival::Paced`]: its original took none.
    Retransmission,
}

/// What the table keeps per sender.
#[derive(Debug, Clone)]
struct Entry {
    /// Cumulative bytes granted, extended beyond 24 bits; starts at the
    /// initial window \[seed\].
    granted: u64,
    /// Highest cumulative target seen, extended; `target - granted` is the
    /// outstanding demand.
    target: u64,
    /// The sender's service so far, in the pacer's fair-share clock: bytes
    /// granted by the pacer plus speculative bytes received, never below
    /// the clock of the active senders when it (re)joined (see
    /// [`RcccReceiver`], "Fair share").
    served: u64,
    /// In the active set.
    active: bool,
    /// In the CREDIT CP queue.
    queued: bool,
    /// A CREDIT CP should carry the current `granted`.
    cp_pending: bool,
    /// The first grant the sender has not answered (by a packet or a
    /// CREDIT_REQ) since.
    unanswered_since: Option<Instant>,
    /// Paced credit granted to it minus the data bytes that came back since
    /// (see [`RcccConfig::max_outstanding`]). Negative while the source
    /// spends its initial window (not counted as granted) or after an RTO
    /// forced a packet past its credit, down to
    /// [`RcccReceiver::balance_floor`].
    balance: i64,
    /// Bytes taken as speculative since the sender was entered: a source
    /// speculates at most its initial window per life (see
    /// [`RcccReceiver::on_data`]).
    speculated: u64,
}

impl Entry {
    fn demand(&self) -> u64 {
        self.target.saturating_sub(self.granted)
    }
}

/// The RCCC receiver of one FEP (or port): the active sender table and the
/// pacer that divides `link_rate × pacing` among active senders.
///
/// `S` identifies a source CCC (for example the source FEP address and its
/// `ccc_id`, or the PDC). Ties are broken by `S`, so every run with the same
/// inputs grants the same way.
///
/// ## Fair share, and speculative traffic
///
/// The seed divides each time slice equally among the active senders. With
/// many senders a slice holds only a few packet-sized grants, so the pacer
/// has to choose whom to serve; it serves the active senders with the
/// least *service* first (start-time fair queueing on bytes \[I\]), which is
/// the seed's equal division over any run of slices.
///
/// A sender's service counts what the receiver's link carried for it:
/// paced grants **and the speculative bytes it sent before any grant**
/// (packets that arrive with SYN set and are not retransmissions: the seed
/// says SYN stays set "until the first ACK_CC ... signaling to the target
/// that the connection handshake and credit-granting loop are in the
/// initialization phase", and speculation ends with that same first
/// feedback [HTSIM `stopSpeculating`]). Speculative data is paid for out
/// of the sender's share \[I, in the spirit of EQDS (NSDI'22), where
/// unscheduled first-RTT data shares the receiver's link with pulled data,
/// and of HTSIM, which marks it `DATA_SPEC`; neither source we have says
/// how a receiver should account for it, and the spec text (§3.6.14) is
/// not public\]: a sender whose first window went through is served after
/// those whose first window was trimmed or dropped, so every flow of an
/// incast progresses at the same rate and they finish together, instead of
/// the lucky ones finishing a whole first window earlier.
///
/// A sender that rejoins starts at the service of the least-served active
/// sender (the fair-share clock), so a long-idle sender cannot claim the
/// link back for the time it was away \[I, SFQ start tags\]. A sender heard
/// for the first time starts up to one initial window behind that clock:
/// in a synchronized incast through a drop-tail buffer the senders heard
/// first were charged for the speculative windows that got through, while
/// the late ones speculated too and lost theirs; starting them at the clock
/// made the flows finish in the order they were first heard (128:1 spread
/// 1.118, 1.011 with this) \[I\].
#[derive(Debug, Clone)]
pub struct RcccReceiver<S> {
    config: RcccConfig,
    senders: BTreeMap<S, Entry>,
    /// Active senders ordered by (service, id): the first is served first.
    active: BTreeSet<(u64, S)>,
    /// Senders owed a CREDIT CP.
    cps: VecDeque<S>,
    /// The pacer's next tick; `None` while no sender has demand.
    next_tick: Option<Instant>,
    last_tick: Option<Instant>,
    /// The next tick is the first after an idle period: it grants exactly
    /// one slice (no credit is banked while idle).
    resuming: bool,
    /// Fraction of a byte carried between ticks, in bit·ppm·ns units.
    frac: u128,
    /// Budget (always < `min_grant`) carried until a packet-sized grant is
    /// possible.
    carry: u64,
    /// The fair-share clock: the service of the least-served active sender
    /// when the set was last non-empty.
    clock: u64,
    /// Sum of the senders' positive `balance`s: a sender's unused initial
    /// window lowers only its own count, never another's.
    outstanding: u64,
    /// Senders whose demand was met, with when their balance is written
    /// off if they have not rejoined by then.
    settling: VecDeque<(Instant, S)>,
    ecn: EcnState,
    stats: RcccReceiverStats,
    events: VecDeque<RcccReceiverEvent<S>>,
}

impl<S: Copy + Ord> RcccReceiver<S> {
    /// An empty table.
    pub fn new(config: RcccConfig) -> Result<Self, RcccConfigError> {
        config.validate()?;
        Ok(Self {
            config,
            senders: BTreeMap::new(),
            active: BTreeSet::new(),
            cps: VecDeque::new(),
            next_tick: None,
            last_tick: None,
            resuming: true,
            frac: 0,
            carry: 0,
            clock: 0,
            outstanding: 0,
            settling: VecDeque::new(),
            ecn: EcnState::default(),
            stats: RcccReceiverStats::default(),
            events: VecDeque::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RcccConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> &RcccReceiverStats {
        &self.stats
    }

    /// The ECN rate control's current factor on the pacer's rate, ppm
    /// (1,000,000 without [`RcccConfig::ecn_rate`] or while no marks come).
    pub fn ecn_rate_ppm(&self) -> u32 {
        self.ecn.rate_ppm(self.config.ecn_rate.as_ref())
    }

    /// An untrimmed data packet arrived, with ECN-CE (`ce`) or without: the
    /// input of the ECN rate control ([`RcccConfig::ecn_rate`]; nothing
    /// without it).
    pub fn on_ecn(&mut self, ce: bool) {
        if self.config.ecn_rate.is_some() {
            self.stats.ecn_packets += 1;
            self.stats.ecn_marked += u64::from(ce);
            self.ecn.path_marks |= ce;
        }
    }

    /// The pacer's rate before the ECN cut, ppm of the link rate:
    /// `pacing_ppm`, or the link rate itself once the ECN rate control has
    /// seen a mark (see [`super::EcnRate`]).
    pub fn pacing_ppm(&self) -> u32 {
        if self.ecn.path_marks {
            PPM
        } else {
            self.config.pacing_ppm
        }
    }

    /// `link_rate × pacing × ns` in bit·ppm units, at
    /// [`pacing_ppm`](Self::pacing_ppm).
    fn paced_units(&self, ns: u128) -> u128 {
        self.config.units_at(self.pacing_ppm(), ns)
    }

    /// Runs the ECN rate control's update if one is due by `now`: the
    /// interval's marked fraction f, `g ← g/2 + f/2`. Intervals that passed
    /// while the pacer slept had no data, so each halves g once more.
    fn update_ecn_rate(&mut self, now: Instant) {
        let Some(c) = self.config.ecn_rate else {
            return;
        };
        let Some(due) = self.ecn.next_update else {
            self.ecn.next_update = Some(now.saturating_add(c.interval));
            return;
        };
        if now < due {
            return;
        }
        let before = self.ecn.rate_ppm(Some(&c));
        let now_seen = (self.stats.ecn_packets, self.stats.ecn_marked);
        let packets = now_seen.0 - self.ecn.seen.0;
        let marked = now_seen.1 - self.ecn.seen.1;
        self.ecn.seen = now_seen;
        let f = (marked * u64::from(PPM))
            .checked_div(packets)
            .map_or(0, |f| u32::try_from(f).unwrap_or(PPM));
        let missed = now.saturating_since(due).as_nanos() / c.interval.as_nanos().max(1);
        let halvings = u32::try_from(missed).unwrap_or(u32::MAX).min(31);
        self.ecn.g_ppm = (self.ecn.g_ppm / 2 + f / 2) >> halvings;
        if self.ecn.rate_ppm(Some(&c)) < before {
            self.stats.ecn_decreases += 1;
        }
        self.ecn.next_update = Some(now.saturating_add(c.interval));
    }

    /// Senders with demand (the active sender table).
    pub fn active_senders(&self) -> usize {
        self.active.len()
    }

    /// Senders known, active or not.
    pub fn known_senders(&self) -> usize {
        self.senders.len()
    }

    /// Whether `sender` is in the active table.
    pub fn is_active(&self, sender: S) -> bool {
        self.senders.get(&sender).is_some_and(|e| e.active)
    }

    /// Bytes `sender` still asks for, if known.
    pub fn demand(&self, sender: S) -> Option<u64> {
        self.senders.get(&sender).map(Entry::demand)
    }

    /// Cumulative bytes granted to `sender` (initial window included),
    /// beyond 24 bits.
    pub fn granted(&self, sender: S) -> Option<u64> {
        self.senders.get(&sender).map(|e| e.granted)
    }

    /// `sender`'s paced credit granted and not yet back as data, if known:
    /// negative when more came back than was granted (see
    /// [`Self::outstanding`], which counts the positive balances).
    pub fn balance(&self, sender: S) -> Option<i64> {
        self.senders.get(&sender).map(|e| e.balance)
    }

    /// Paced credit granted and not yet back as data, over all senders
    /// (see [`RcccConfig::max_outstanding`]).
    pub fn outstanding(&self) -> u64 {
        self.outstanding
    }

    /// The service `sender` has had in the fair-share clock (paced grants
    /// plus speculative bytes received), if known.
    pub fn served(&self, sender: S) -> Option<u64> {
        self.senders.get(&sender).map(|e| e.served)
    }

    /// `RCCC.OnRX` (§5.1): a packet from `sender` carrying `credit_target`
    /// in its `req_cc_state` (RUD_CC_REQ / ROD_CC_REQ, §2.5), sent on
    /// granted credit (or a retransmission).
    ///
    /// `bytes` is the packet's nominal size as sent; a trimmed packet keeps
    /// its UDP length (§7), so it is known for those too. With
    /// `trimmed_last_hop` the packet was trimmed at the last hop (DSCP
    /// `DSCP_TRIMMED_LASTHOP`): its data did not arrive and the source will
    /// retransmit it (§7: last-hop trims belong to RCCC), so the receiver
    /// counts those bytes as demand already \[I\]; the source's own target will
    /// say the same once it has the NACK (the larger of the two is kept, so
    /// they are not added twice). Packets trimmed elsewhere are NSCC's
    /// signal; pass them with `bytes = 0` and `trimmed_last_hop = false`.
    ///
    /// An unknown sender gets an entry whose cumulative count starts at the
    /// initial window it may already have spent \[seed\].
    pub fn on_rx(
        &mut self,
        now: Instant,
        sender: S,
        credit_target: Credit24,
        bytes: u64,
        trimmed_last_hop: bool,
    ) {
        self.on_data(
            now,
            sender,
            credit_target,
            bytes,
            trimmed_last_hop,
            Arrival::Paced,
        );
    }

    /// [`on_rx`](Self::on_rx) for a packet sent other than on paced
    /// credit, as `arrival` says:
    ///
    /// * [`Arrival::Speculative`]: on the source's initial window before any
    ///   feedback (SYN set, not a retransmission). If it was not trimmed,
    ///   its bytes count against the sender's fair share (see
    ///   [`RcccReceiver`], "Fair share"); a trimmed one becomes demand like
    ///   any last-hop trim.
    /// * [`Arrival::Retransmission`]: besides its own credit, it settles the
    ///   credit its lost original took, so credit that went down with a
    ///   dropped packet does not stay outstanding
    ///   ([`RcccConfig::max_outstanding`]). When the original was not lost
    ///   after all, the sender's count is one packet low for a while, which
    ///   only loosens the bound by that much \[I\].
    pub fn on_data(
        &mut self,
        now: Instant,
        sender: S,
        credit_target: Credit24,
        bytes: u64,
        trimmed_last_hop: bool,
        arrival: Arrival,
    ) {
        let extra = if trimmed_last_hop {
            self.stats.last_hop_trims += 1;
            self.push_event(RcccReceiverEvent::LastHopTrim { now, sender });
            bytes
        } else {
            self.stats.received_bytes = self.stats.received_bytes.saturating_add(bytes);
            0
        };
        self.heard(now, sender, credit_target, extra);
        // A source speculates once per life, at most its initial window
        // (`RcccSource`); the PDS takes SYN for speculation, but a PDC
        // opened later on a source's CCC sends SYN packets on paced credit
        // until it is established. Past the initial window, then, a packet
        // is paced and settles its credit; counted speculative, it settled
        // nothing, the sender's balance stayed at the outstanding bound
        // and the pacer granted it nothing more [I].
        let arrival = match self.senders.get_mut(&sender) {
            Some(e) if arrival == Arrival::Speculative => {
                if e.speculated >= self.config.initial_window {
                    Arrival::Paced
                } else {
                    e.speculated = e.speculated.saturating_add(bytes);
                    arrival
                }
            }
            _ => arrival,
        };
        // Every paced or retransmitted byte that arrives settles credit, a
        // trimmed packet's too (it spent its credit and is no longer in
        // flight). Speculative bytes were sent on the initial window, which
        // was never counted as outstanding, so they settle nothing. They
        // used to take the balance below zero, and a sender's negative
        // balance takes grants that `outstanding` does not count (1 Gb/s
        // 32:1 drop-tail held its 32 KiB queue full for 2 ms, 59 RTOs).
        // Settling them down to zero only was not enough: the first windows
        // of an incast drain from the bottleneck for several round trips
        // after the pacer starts, and each late speculative packet settled
        // a paced grant still in flight. The pacer then granted the link
        // rate on top of the draining first windows, and the queue they
        // built stood for the whole incast (100 Gb/s 8:1 × 1 MiB: ~740 KB,
        // seven BDPs, from start to end; ~0.35 BDP with this) [I].
        if arrival == Arrival::Speculative && !trimmed_last_hop {
            self.stats.speculative_bytes = self.stats.speculative_bytes.saturating_add(bytes);
            self.add_service(sender, bytes);
        }
        let back = match arrival {
            Arrival::Retransmission => bytes.saturating_mul(2),
            Arrival::Speculative => 0,
            Arrival::Paced => bytes,
        };
        let floor = self.balance_floor();
        self.settle(sender, back, floor);
    }

    /// The most paced credit the pacer lets be outstanding with `active`
    /// senders in its table: `max_outstanding`, but at least
    /// `outstanding_per_sender` per active sender.
    ///
    /// A bound below one packet per sender lets the pacer serve only a few
    /// senders at a time. Where grants are spent at once that is the
    /// fair share in time slices, and the bound keeps the queue within the
    /// buffer (1 Gb/s, 32:1, 32 KiB: a floor of one packet per sender
    /// dropped 173 packets after the first round trip, against none). Where
    /// each sender holds its grant until its host runs it, milliseconds
    /// later, the link idles: on the veth lab, 64 senders through
    /// 280 Mb/s, a bound of fifteen packets gave utilisation 0.68 and
    /// 1.5 × ideal, one packet per sender 0.90 and 1.12 (with 20–39 drops
    /// per run and no RTO) \[I\].
    fn outstanding_bound(&self, active: usize) -> u64 {
        let per_sender = self
            .config
            .outstanding_per_sender
            .saturating_mul(active as u64);
        self.config.max_outstanding.max(per_sender)
    }

    /// The lowest a sender's balance goes: its initial window (a caller
    /// that reports the retransmission of a lost speculative packet as an
    /// [`Arrival::Retransmission`] settles it twice, though its original
    /// took no counted credit; the PDS reports it as paced) and two
    /// packets (one forced past its credit by an RTO or a probe, one
    /// retransmission settled twice when its original arrived after all).
    /// Bounds how far settled-but-unpaid bytes can loosen
    /// [`RcccConfig::max_outstanding`].
    fn balance_floor(&self) -> i64 {
        let f = self
            .config
            .initial_window
            .saturating_add(2 * u64::from(self.config.mtu));
        -i64::try_from(f).unwrap_or(i64::MAX)
    }

    /// `bytes` of `sender`'s outstanding credit came back; its balance goes
    /// no lower than `floor`, nor up if it was below.
    fn settle(&mut self, sender: S, bytes: u64, floor: i64) {
        if let Some(e) = self.senders.get_mut(&sender) {
            let b = e
                .balance
                .saturating_sub(i64::try_from(bytes).unwrap_or(i64::MAX))
                .max(floor)
                .min(e.balance);
            set_balance(&mut self.outstanding, e, b);
        }
    }

    /// A sender left the active table: what it still owes back is written
    /// off, at once if it did not answer grants (it holds them, or lost
    /// them), an idle timeout later if its demand was met (the data of its
    /// last grants is still on its way, and a source that cannot send for a
    /// while has its demand met by grants it banks). Either way credit that
    /// never comes back cannot hold the pacer at its bound for good.
    fn write_off_later(&mut self, now: Instant, sender: S, reason: LeaveReason) {
        match reason {
            LeaveReason::DemandMet => {
                let at = now.saturating_add(self.config.idle_timeout);
                self.settling.push_back((at, sender));
            }
            LeaveReason::Idle | LeaveReason::Removed => self.write_off(sender),
        }
    }

    /// Runs the write-offs that are due (of senders still inactive).
    fn write_offs_due(&mut self, now: Instant) {
        while let Some(&(at, s)) = self.settling.front() {
            if at > now {
                break;
            }
            self.settling.pop_front();
            if self.senders.get(&s).is_some_and(|e| !e.active) {
                self.write_off(s);
            }
        }
    }

    /// Forgets what `sender` still owes back. Data of it still in flight
    /// then settles against nothing (the floor bounds that).
    fn write_off(&mut self, sender: S) {
        if let Some(e) = self.senders.get_mut(&sender) {
            set_balance(&mut self.outstanding, e, e.balance.min(0));
        }
    }

    /// A CREDIT_REQ CP (§2.10 ctl_type 8) from `sender` with its target:
    /// updates the demand like [`on_rx`](Self::on_rx). If that leaves the
    /// sender without demand, it is answered at once with a CREDIT CP
    /// carrying the current cumulative count, even if unchanged: the source
    /// may have lost the last grant. A sender with demand gets its next
    /// (cumulative) grant at its turn, which answers it as well \[I\].
    pub fn on_credit_request(&mut self, now: Instant, sender: S, credit_target: Credit24) {
        self.stats.credit_requests += 1;
        let before = self.senders.get(&sender).map(|e| e.target);
        self.heard(now, sender, credit_target, 0);
        // A source asks for two reasons. Its need grew while it had no
        // credit (new data, a loss): the request only carries the new
        // target, and the credit it already holds or spent is still on its
        // way. Or it waited a credit timeout without a grant: the credit it
        // was granted was spent or lost, and what may still be on its way is
        // not worth holding the pacer for (see
        // `RcccConfig::max_outstanding`); without the write-off, credit lost
        // with packets dropped more than once would close the pacer for
        // good. A target that rose is the first kind. Writing that off too
        // let every new message of a blocked source free its credit in
        // flight, and the pacer granted it again on top: on the veth lab,
        // 4 × 1 MiB in 64 KiB messages, a buffer of nine packets held
        // eight outstanding and overflowed 20–100 times per run \[I\]. A
        // timeout that comes with new need is not written off until the
        // next, doubled, timeout.
        let rose = before.is_some_and(|b| self.senders.get(&sender).is_some_and(|e| e.target > b));
        if !rose {
            self.write_off(sender);
            self.stats.write_offs += 1;
        }
        if !self.is_active(sender) {
            self.queue_cp(sender);
        }
    }

    /// The cumulative credit for an ACK_CC (`cc_type` CREDIT, §2.7) to
    /// `sender`, or `None` for an unknown sender. The ACK carries it, so a
    /// CREDIT CP queued with the same value is no longer needed and is
    /// dropped.
    pub fn grant_for(&mut self, sender: S) -> Option<Credit24> {
        let e = self.senders.get_mut(&sender)?;
        e.cp_pending = false;
        Some(wire24(e.granted))
    }

    /// The next CREDIT CP to send (§2.10 ctl_type 7): the sender and its
    /// cumulative credit. Several grants to one sender before the PDS polls
    /// coalesce into one CP (the value is cumulative).
    #[must_use]
    pub fn poll_grant(&mut self) -> Option<(S, Credit24)> {
        while let Some(s) = self.cps.pop_front() {
            if let Some(e) = self.senders.get_mut(&s) {
                e.queued = false;
                if e.cp_pending {
                    e.cp_pending = false;
                    return Some((s, wire24(e.granted)));
                }
            }
        }
        None
    }

    /// Forgets `sender` (its destination CCC was released). Credit already
    /// granted stays with the source. Returns whether it was known.
    pub fn remove_sender(&mut self, now: Instant, sender: S) -> bool {
        let Some(e) = self.senders.remove(&sender) else {
            return false;
        };
        self.outstanding -= pos(e.balance);
        if e.active {
            self.active.remove(&(e.served, sender));
            self.push_event(RcccReceiverEvent::Left {
                now,
                sender,
                reason: LeaveReason::Removed,
            });
        }
        true
    }

    /// When [`handle_timeout`](Self::handle_timeout) should run: the next
    /// pacer tick, while any sender has demand.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_tick
    }

    /// Runs a pacer tick if one is due.
    ///
    /// A tick hands out the credit of the time since the previous tick —
    /// one slice when on time [seed: `rate × 1 µs ÷ active senders`], at
    /// most `max_burst_slices` when the caller is late, exactly one after an
    /// idle period — and schedules the next tick one slice later. Senders
    /// that have not answered a grant within the idle timeout leave first.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.next_tick {
            Some(t) if now >= t => self.tick(now),
            _ => {}
        }
    }

    /// The next event, for tracing.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<RcccReceiverEvent<S>> {
        self.events.pop_front()
    }

    fn heard(&mut self, now: Instant, sender: S, credit_target: Credit24, extra: u64) {
        let initial = self.config.initial_window;
        // Defensive bound on what one sender may claim: a correct source asks
        // at most max_credit ahead plus one packet of debt [I].
        let max_demand = self
            .config
            .max_credit
            .saturating_add(u64::from(self.config.mtu));
        let clock = self.clock();
        // A sender heard for the first time starts up to one initial window
        // behind the clock: it speculated that window too, and when the
        // buffer dropped it instead of trimming it, the senders heard
        // first were charged for theirs and moved the clock meanwhile.
        let first = clock.saturating_sub(initial);
        let fresh = !self.senders.contains_key(&sender);
        let e = self.senders.entry(sender).or_insert(Entry {
            granted: initial,
            target: initial,
            served: first,
            active: false,
            queued: false,
            cp_pending: false,
            unanswered_since: None,
            balance: 0,
            speculated: 0,
        });
        e.unanswered_since = None;
        // The target relative to what was granted, by serial arithmetic; a
        // reordered older packet or a source that holds more credit than it
        // needs gives a value at or behind `granted`: no demand from it.
        let ahead = diff24(credit_target, wire24(e.granted)).saturating_add_unsigned(extra);
        if ahead > 0 {
            let candidate = e.granted + ahead.unsigned_abs().min(max_demand);
            // Keep the highest target seen [HTSIM `_highest_pull_target`]:
            // spraying reorders packets, so an older, lower target must not
            // undo a newer one. A target that really shrank (the source's
            // NSCC cap fell, data was withdrawn) costs at most that much
            // extra credit, which the source keeps for later data.
            if candidate > e.target {
                e.target = candidate;
            }
        }
        if e.demand() > 0 && !e.active {
            e.active = true;
            // Rejoin at the fair-share clock [I, SFQ start tag], one byte
            // ahead of the senders that are there, and up to one packet of
            // its own lead forgiven: a sender that went idle is served at
            // the next tick rather than after a whole round of the
            // backlogged ones [I, as fq_codel serves a flow that was empty
            // ahead of the others, for one quantum]. Ties are otherwise
            // broken by sender id, and a sender whose last small grant put
            // it just past the clock waited for every backlogged sender to
            // get a packet first: a victim ping-pong of 64 B writes waited
            // 43 µs a message at 100 Gb/s 128:1 (16 µs alone; 19 µs with
            // this) and up to 390 µs at 1 Gb/s 32:1 (66 µs alone). The
            // advantage is bounded by one packet of service per rejoin, and
            // a rejoin needs the sender's demand met first.
            if !fresh {
                let lead_forgiven = e.served.saturating_sub(u64::from(self.config.mtu));
                e.served = lead_forgiven.max(clock.saturating_sub(1));
            }
            self.active.insert((e.served, sender));
            self.push_event(RcccReceiverEvent::Joined { now, sender });
            self.wake(now);
        }
    }

    /// The fair-share clock: the least service among active senders, or the
    /// last such value while none is active.
    fn clock(&self) -> u64 {
        self.active.first().map_or(self.clock, |(v, _)| *v)
    }

    /// Adds `bytes` to `sender`'s service, keeping the active set ordered.
    fn add_service(&mut self, sender: S, bytes: u64) {
        let Some(e) = self.senders.get_mut(&sender) else {
            return;
        };
        if e.active {
            self.active.remove(&(e.served, sender));
        }
        e.served = e.served.saturating_add(bytes);
        if e.active {
            self.active.insert((e.served, sender));
        }
    }

    /// Starts the pacer if it is idle: first tick now, but never sooner than
    /// a slice after the previous tick, so no window of one slice ever sees
    /// two ticks.
    fn wake(&mut self, now: Instant) {
        if self.next_tick.is_none() {
            let earliest = self
                .last_tick
                .map_or(now, |t| t.saturating_add(self.config.slice));
            self.next_tick = Some(now.max(earliest));
            self.resuming = true;
            self.carry = 0;
        }
    }

    fn tick(&mut self, now: Instant) {
        self.stats.ticks += 1;
        let slice_ns = self.config.slice.as_nanos();
        let elapsed = if self.resuming {
            slice_ns
        } else {
            let since = self
                .last_tick
                .map_or(Duration::ZERO, |t| now.saturating_since(t))
                .as_nanos();
            let most = slice_ns * u128::from(self.config.max_burst_slices);
            let late = self.paced_units(since.saturating_sub(most)) / BYTE_PPM_NS;
            self.stats.late_bytes = self
                .stats
                .late_bytes
                .saturating_add(u64::try_from(late).unwrap_or(u64::MAX));
            since.min(most)
        };
        self.resuming = false;
        self.last_tick = Some(now);
        self.update_ecn_rate(now);
        let paced = self.paced_bytes(elapsed);
        let keep = u128::from(paced) * u128::from(self.ecn_rate_ppm()) / u128::from(PPM);
        let slowed = paced - u64::try_from(keep).unwrap_or(paced);
        self.stats.ecn_slowed_bytes += slowed;
        let mut budget = self.carry.saturating_add(paced - slowed);
        self.carry = 0;

        self.evict_idle(now);
        self.write_offs_due(now);
        let n = self.active.len();
        if n == 0 {
            self.stats.unclaimed_bytes += budget;
            self.next_tick = None;
            return;
        }
        // Never more outstanding than the bound (`max_outstanding`, or
        // `outstanding_per_sender` per active sender if that is more): what
        // is over it is not granted, nor banked (see
        // `RcccConfig::max_outstanding`).
        let headroom = self.outstanding_bound(n).saturating_sub(self.outstanding());
        if budget > headroom {
            self.stats.outstanding_limited += 1;
            self.stats.withheld_bytes += budget - headroom;
            budget = headroom;
        }

        // Time-slice division [seed]: the slice's budget is split equally
        // among the senders it serves. It serves every active sender when
        // each share is at least `min_grant` (one sender: 12,500 B; two:
        // 6,250 B each at 100 Gb/s); otherwise only as many as get
        // `min_grant` each — the least served first (see "Fair share") —
        // and the others at the next slices [HTSIM pulls of a few MTUs].
        // Shares are water-filled: a sender whose demand is below its share
        // takes only its demand, and the share of the next one is worked
        // out again from what is left.
        let steps = (n / super::SENDERS_PER_GRANT_STEP)
            .clamp(1, self.config.max_grant_steps.max(1) as usize) as u64;
        let min_grant = self.config.min_grant.saturating_mul(steps);
        let q = self.config.quantum.max(1);
        let min_units = min_grant.div_ceil(q).max(1);
        // The senders served leave the ordered set while the slice is
        // divided and go back in with their new service afterwards.
        let mut picked: Vec<S> = Vec::new();
        let mut carried = false;
        while budget > 0 {
            let Some(&(v, s)) = self.active.first() else {
                break;
            };
            let Some(e) = self.senders.get(&s) else {
                self.active.remove(&(v, s));
                continue;
            };
            let demand = e.demand();
            // Whole quanta left, shared by as many senders as get at least
            // `min_grant` each.
            let units = budget / q;
            let slots = (units / min_units).clamp(1, self.active.len() as u64);
            let portion = units.div_ceil(slots) * q;
            if (portion < min_grant || portion == 0) && demand > portion {
                // Less than a packet's worth for a sender that wants more:
                // keep it for the next slice rather than grant sub-packet
                // credit [I].
                self.carry = budget;
                carried = true;
                break;
            }
            self.active.remove(&(v, s));
            picked.push(s);
            let g = portion.min(demand);
            self.grant(now, s, g);
            budget -= g;
        }
        if budget < q {
            // The sub-quantum remainder carries to the next slice, so the
            // long-run rate stays exact.
            self.carry = self.carry.max(budget);
        } else if !carried {
            // Budget nobody could use is not banked: unused credit is
            // reclaimed [I].
            self.stats.unclaimed_bytes += budget;
        }

        // Back into the set with their new service; those whose demand is
        // met leave the active table.
        for s in picked {
            let Some(e) = self.senders.get_mut(&s) else {
                continue;
            };
            if e.demand() > 0 {
                self.active.insert((e.served, s));
            } else {
                e.active = false;
                self.write_off_later(now, s, LeaveReason::DemandMet);
                self.push_event(RcccReceiverEvent::Left {
                    now,
                    sender: s,
                    reason: LeaveReason::DemandMet,
                });
            }
        }
        if let Some((v, _)) = self.active.first() {
            self.clock = *v;
        }
        self.next_tick = if self.active.is_empty() {
            None
        } else {
            Some(now.saturating_add(self.config.slice))
        };
    }

    /// Drops senders that have not answered a grant for the idle timeout:
    /// they leave the active table and their demand is forgotten until they
    /// speak again; their share goes to the others from this tick on.
    fn evict_idle(&mut self, now: Instant) {
        let timeout = self.config.idle_timeout;
        let leaving: Vec<(u64, S, LeaveReason)> = self
            .active
            .iter()
            .filter_map(|&(v, s)| {
                let e = self.senders.get(&s)?;
                let stale = e
                    .unanswered_since
                    .is_some_and(|t| now.saturating_since(t) >= timeout);
                if stale {
                    Some((v, s, LeaveReason::Idle))
                } else if e.demand() == 0 {
                    Some((v, s, LeaveReason::DemandMet))
                } else {
                    None
                }
            })
            .collect();
        for (v, s, reason) in leaving {
            self.active.remove(&(v, s));
            if let Some(e) = self.senders.get_mut(&s) {
                e.active = false;
                e.target = e.granted;
                e.unanswered_since = None;
            }
            self.write_off_later(now, s, reason);
            if reason == LeaveReason::Idle {
                self.stats.idle_evictions += 1;
            }
            self.push_event(RcccReceiverEvent::Left {
                now,
                sender: s,
                reason,
            });
        }
    }

    fn grant(&mut self, now: Instant, s: S, bytes: u64) {
        if bytes == 0 {
            return;
        }
        if let Some(e) = self.senders.get_mut(&s) {
            e.granted += bytes;
            let b = e
                .balance
                .saturating_add(i64::try_from(bytes).unwrap_or(i64::MAX));
            set_balance(&mut self.outstanding, e, b);
            // A grant that only fills a deficit (a sender that sent past
            // its credit, forced by an RTO or a probe's answer) cannot be
            // answered: the source is paying the debt off and has nothing
            // to send on it. Counting it as unanswered evicted such senders
            // as idle, and only their backed-off credit timer brought them
            // back (1023:1 drop-tail: the last flows waited 1.3, 2.7 and
            // 4.4 ms for it) [I].
            if b > 0 {
                e.unanswered_since.get_or_insert(now);
            }
            self.stats.grants += 1;
            self.stats.granted_bytes = self.stats.granted_bytes.saturating_add(bytes);
            // The caller holds `s` out of the ordered set.
            e.served = e.served.saturating_add(bytes);
        }
        self.queue_cp(s);
    }

    fn queue_cp(&mut self, s: S) {
        if let Some(e) = self.senders.get_mut(&s) {
            e.cp_pending = true;
            if !e.queued {
                e.queued = true;
                self.cps.push_back(s);
            }
        }
    }

    /// Whole bytes of paced credit for `ns` nanoseconds, carrying the
    /// fraction so the long-run rate is exact.
    fn paced_bytes(&mut self, ns: u128) -> u64 {
        self.frac += self.paced_units(ns);
        let bytes = self.frac / BYTE_PPM_NS;
        self.frac %= BYTE_PPM_NS;
        u64::try_from(bytes).unwrap_or(u64::MAX)
    }

    fn push_event(&mut self, e: RcccReceiverEvent<S>) {
        if self.events.len() >= EVENT_CAP {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Instant {
        Instant::from_nanos(n * 1000)
    }

    /// The seed's arithmetic: line rate, credit divided to the byte. Open
    /// loop (no bound on outstanding credit), as the seed's walk-through
    /// never sends the data back.
    fn seed_config() -> RcccConfig {
        RcccConfig {
            pacing_ppm: 1_000_000,
            quantum: 1,
            ..open_loop()
        }
    }

    /// The defaults without the bound on outstanding credit: for tests of
    /// the pacer's division that do not return data.
    fn open_loop() -> RcccConfig {
        RcccConfig {
            max_outstanding: u64::MAX,
            ..RcccConfig::default()
        }
    }

    fn c24(v: u64) -> Credit24 {
        wire24(v)
    }

    /// The target a source with a 256 MB backlog sends after its initial
    /// 12,500 B: cumulative 12,500 plus `max_credit` ahead.
    const SEED_TARGET: u64 = 12_500 + 225_000;

    #[test]
    fn one_sender_gets_the_whole_slice() {
        let mut r = RcccReceiver::new(seed_config()).unwrap();
        r.on_rx(us(0), 1u32, c24(SEED_TARGET), 4160, false);
        assert_eq!(r.demand(1), Some(225_000));
        assert!(r.is_active(1));
        assert_eq!(r.poll_timeout(), Some(us(0)));
        r.handle_timeout(us(0));
        // 12.5 GB/s × 1 µs ÷ 1 = 12.5 KB; cumulative 12,500 → 25,000.
        assert_eq!(r.poll_grant(), Some((1, c24(25_000))));
        assert_eq!(r.poll_grant(), None);
        assert_eq!(r.poll_timeout(), Some(us(1)));
        r.handle_timeout(us(1));
        assert_eq!(r.poll_grant(), Some((1, c24(37_500))));
        assert_eq!(r.stats().granted_bytes, 25_000);
    }

    /// The seed's pacer with the ECN rate control, the marks taken every
    /// 4 µs (four slices) and a cut of at most a tenth.
    fn ecn_config() -> RcccConfig {
        RcccConfig {
            ecn_rate: Some(crate::rccc::EcnRate {
                interval: Duration::from_micros(4),
                max_cut_ppm: 100_000,
            }),
            ..seed_config()
        }
    }

    /// Ticks the pacer at 1 µs from `from` to `to` µs; after each tick one
    /// packet arrives, marked as `ce` says. Returns the bytes granted.
    fn tick_marked(r: &mut RcccReceiver<u32>, from: u64, to: u64, ce: bool) -> u64 {
        let before = r.stats().granted_bytes;
        for t in from..=to {
            r.handle_timeout(us(t));
            while r.poll_grant().is_some() {}
            r.on_ecn(ce);
        }
        r.stats().granted_bytes - before
    }

    #[test]
    fn ecn_marks_slow_the_pacer_in_proportion_and_the_cut_lifts_when_they_stop() {
        let mut r = RcccReceiver::new(ecn_config()).unwrap();
        r.on_rx(us(0), 1u32, c24(SEED_TARGET), 4160, false);
        // The first tick starts the interval; every packet of it is marked:
        // g = ½, the rate 1 − ½ × 0.1 from the next.
        assert_eq!(tick_marked(&mut r, 0, 3, true), 4 * 12_500);
        assert_eq!(r.ecn_rate_ppm(), 1_000_000);
        assert_eq!(tick_marked(&mut r, 4, 7, true), 4 * 11_875);
        assert_eq!(r.ecn_rate_ppm(), 950_000);
        // The marks of 4–7 count at 8: g = ¾. From here nothing is marked.
        assert_eq!(tick_marked(&mut r, 8, 11, false), 4 * 11_562);
        assert_eq!(r.ecn_rate_ppm(), 925_000);
        // No marks: g halves at every interval, and so does the cut.
        assert_eq!(tick_marked(&mut r, 12, 15, false), 4 * 12_031);
        assert_eq!(r.ecn_rate_ppm(), 962_500);
        assert_eq!(r.stats().ecn_decreases, 2);
        // What the cut held back is counted, and with the grants it is the
        // whole budget of the 16 slices.
        let s = r.stats();
        assert_eq!(s.granted_bytes + s.ecn_slowed_bytes, 16 * 12_500);
        assert_eq!((s.ecn_packets, s.ecn_marked), (16, 8));
    }

    /// [`tick_marked`] for a source that keeps asking `max_credit` ahead
    /// of what it was granted, so its demand outlasts the ticks.
    fn tick_asking(r: &mut RcccReceiver<u32>, from: u64, to: u64, ce: bool) -> u64 {
        (from..=to)
            .map(|t| {
                let g = r.granted(1).unwrap_or(12_500);
                r.on_rx(us(t), 1u32, c24(g + 225_000), 4160, false);
                tick_marked(r, t, t, ce)
            })
            .sum()
    }

    #[test]
    fn once_the_path_has_marked_the_pacer_runs_at_the_link_rate_before_the_cut() {
        let cfg = RcccConfig {
            pacing_ppm: 990_000,
            ..ecn_config()
        };
        let mut r = RcccReceiver::new(cfg.clone()).unwrap();
        // No mark yet: 0.99 of the 12,500 B a slice carries.
        assert_eq!(tick_asking(&mut r, 0, 7, false), 8 * 12_375);
        assert_eq!(r.pacing_ppm(), 990_000);
        // One marked packet: the path marks.
        tick_asking(&mut r, 8, 8, true);
        assert_eq!(r.pacing_ppm(), 1_000_000);
        // Its cut decays away (g halves at every 4 µs interval); then the
        // pacer grants the whole slice.
        tick_asking(&mut r, 9, 199, false);
        assert_eq!(r.ecn_rate_ppm(), 1_000_000);
        assert_eq!(tick_asking(&mut r, 200, 207, false), 8 * 12_500);
        // Without the rate control, marks change nothing.
        let mut r = RcccReceiver::new(RcccConfig {
            ecn_rate: None,
            ..cfg
        })
        .unwrap();
        tick_asking(&mut r, 0, 7, true);
        assert_eq!(r.pacing_ppm(), 990_000);
        assert_eq!(tick_asking(&mut r, 8, 15, false), 8 * 12_375);
    }

    #[test]
    fn a_long_sleep_lifts_the_ecn_cut() {
        let mut r = RcccReceiver::new(ecn_config()).unwrap();
        r.on_rx(us(0), 1u32, c24(SEED_TARGET), 4160, false);
        tick_marked(&mut r, 0, 11, true);
        assert!(r.ecn_rate_ppm() < 930_000, "{}", r.ecn_rate_ppm());
        // Twenty intervals without a tick (the pacer slept): each one had no
        // data, so no marks.
        r.handle_timeout(us(92));
        assert!(r.ecn_rate_ppm() > 999_990, "{}", r.ecn_rate_ppm());
    }

    #[test]
    fn without_ecn_rate_control_marks_change_nothing() {
        let mut r = RcccReceiver::new(seed_config()).unwrap();
        r.on_rx(us(0), 1u32, c24(SEED_TARGET), 4160, false);
        assert_eq!(tick_marked(&mut r, 0, 15, true), 16 * 12_500);
        assert_eq!(r.ecn_rate_ppm(), 1_000_000);
        let s = r.stats();
        assert_eq!((s.ecn_packets, s.ecn_slowed_bytes), (0, 0));
    }

    #[test]
    fn an_ecn_rate_control_that_could_stop_the_pacer_is_refused() {
        for (interval, cut) in [(0, 100_000), (4, 1_000_000)] {
            let c = RcccConfig {
                ecn_rate: Some(crate::rccc::EcnRate {
                    interval: Duration::from_micros(interval),
                    max_cut_ppm: cut,
                }),
                ..seed_config()
            };
            assert!(matches!(
                RcccReceiver::<u32>::new(c),
                Err(RcccConfigError::EcnRateOutOfRange(_))
            ));
        }
    }

    #[test]
    fn two_senders_share_a_slice_equally() {
        let mut r = RcccReceiver::new(seed_config()).unwrap();
        r.on_rx(us(0), 1u32, c24(SEED_TARGET), 4160, false);
        r.on_rx(us(0), 2u32, c24(SEED_TARGET), 4160, false);
        assert_eq!(r.active_senders(), 2);
        r.handle_timeout(us(0));
        // 12.5 KB ÷ 2 = 6.25 KB each.
        assert_eq!(r.poll_grant(), Some((1, c24(18_750))));
        assert_eq!(r.poll_grant(), Some((2, c24(18_750))));
        r.handle_timeout(us(1));
        let mut g: Vec<_> = core::iter::from_fn(|| r.poll_grant()).collect();
        g.sort();
        assert_eq!(g, vec![(1, c24(25_000)), (2, c24(25_000))]);
    }

    #[test]
    fn default_pacing_is_just_under_line_rate() {
        let mut r = RcccReceiver::new(open_loop()).unwrap();
        r.on_rx(us(0), 1u32, c24(SEED_TARGET), 4160, false);
        for t in 0..10 {
            r.handle_timeout(us(t));
        }
        // Whole packets (4,160 B) of the 10 × 12,375 B paced; the rest
        // carries to the next slice, so the long-run rate is exact.
        assert_eq!(r.stats().granted_bytes, 29 * 4160);
        for t in 10..1000 {
            // Keep the sender asking.
            let g = r.granted(1).unwrap();
            r.on_rx(us(t), 1u32, c24(g + 225_000), 0, false);
            r.handle_timeout(us(t));
        }
        let granted = r.stats().granted_bytes;
        assert_eq!(granted % 4160, 0);
        assert!(1000 * 12_375 - granted < 4160, "{granted}");
    }

    #[test]
    fn many_senders_take_packet_sized_turns() {
        let mut r = RcccReceiver::new(seed_config()).unwrap();
        for s in 0..32u32 {
            r.on_rx(us(0), s, c24(SEED_TARGET), 4160, false);
        }
        // 12,500 / 4,160 → 3 grants of ~4,167 per slice, round robin.
        r.handle_timeout(us(0));
        let g: Vec<_> = core::iter::from_fn(|| r.poll_grant()).collect();
        assert_eq!(
            g,
            vec![
                (0, c24(12_500 + 4167)),
                (1, c24(12_500 + 4167)),
                (2, c24(12_500 + 4166))
            ]
        );
        for t in 1..64 {
            // Keep everyone "answering" so nobody idles out.
            for s in 0..32u32 {
                r.on_rx(us(t), s, c24(SEED_TARGET), 0, false);
            }
            r.handle_timeout(us(t));
        }
        // 64 slices × 12,500 B, shared equally to within one grant.
        let got: Vec<u64> = (0..32u32).map(|s| r.granted(s).unwrap() - 12_500).collect();
        assert_eq!(got.iter().sum::<u64>(), 64 * 12_500);
        let (lo, hi) = (got.iter().min().unwrap(), got.iter().max().unwrap());
        assert!(hi - lo <= 4167, "{got:?}");
    }

    #[test]
    fn speculative_bytes_count_against_the_share() {
        // Default pacing (12,375 B per slice) in whole 4,160 B packets.
        let mut r = RcccReceiver::new(open_loop()).unwrap();
        // Sender 0's first window arrived (two packets); senders 1 and 2
        // had theirs trimmed at the last hop.
        for _ in 0..2 {
            r.on_data(
                us(0),
                0u32,
                c24(SEED_TARGET),
                4160,
                false,
                Arrival::Speculative,
            );
            r.on_data(
                us(0),
                1u32,
                c24(SEED_TARGET),
                4160,
                true,
                Arrival::Speculative,
            );
            r.on_data(
                us(0),
                2u32,
                c24(SEED_TARGET),
                4160,
                true,
                Arrival::Speculative,
            );
        }
        assert_eq!(r.served(0), Some(8320));
        assert_eq!(r.stats().speculative_bytes, 8320);
        // The first slice goes to the two that got nothing through.
        r.handle_timeout(us(0));
        let mut g: Vec<_> = core::iter::from_fn(|| r.poll_grant()).collect();
        g.sort();
        assert_eq!(g, vec![(1, c24(12_500 + 4160)), (2, c24(12_500 + 4160))]);
        for t in 1..40 {
            for s in 0..3u32 {
                let target = r.granted(s).unwrap() + 200_000;
                r.on_rx(us(t), s, c24(target), 0, false);
            }
            r.handle_timeout(us(t));
        }
        // Service (grants + speculative bytes) stays equal to within one
        // packet, so sender 0 has been granted its first window less.
        let served: Vec<u64> = (0..3u32).map(|s| r.served(s).unwrap()).collect();
        let (lo, hi) = (served.iter().min().unwrap(), served.iter().max().unwrap());
        assert!(hi - lo <= 4160, "{served:?}");
        let g0 = r.granted(0).unwrap();
        let g1 = r.granted(1).unwrap();
        assert!(g1 - g0 >= 8320 - 4160, "{g0} {g1}");
        // Every grant is whole packets.
        assert_eq!((g0 - 12_500) % 4160, 0);
    }

    #[test]
    fn a_new_sender_starts_one_initial_window_behind_the_fair_share_clock() {
        let initial = open_loop().initial_window;
        let mut r = RcccReceiver::new(open_loop()).unwrap();
        r.on_rx(us(0), 1u32, c24(12_500 + 2_000_000), 4160, false);
        for t in 0..100 {
            r.on_rx(us(t), 1u32, c24(12_500 + 2_000_000), 0, false);
            r.handle_timeout(us(t));
        }
        let s1 = r.served(1).unwrap();
        assert!(s1 > 1_000_000);
        // Sender 2 joins late: it does not get the link to itself until it
        // has caught up with 1.2 MB; it starts one initial window (the
        // speculation it may have lost) behind sender 1's service.
        r.on_rx(us(100), 2u32, c24(12_500 + 2_000_000), 4160, false);
        assert_eq!(r.served(2), Some(s1 - initial));
        let (a1, a2) = (r.granted(1).unwrap(), r.granted(2).unwrap());
        for t in 100..200 {
            r.on_rx(us(t), 1u32, c24(12_500 + 2_000_000), 0, false);
            r.on_rx(us(t), 2u32, c24(12_500 + 2_000_000), 0, false);
            r.handle_timeout(us(t));
        }
        let (d1, d2) = (r.granted(1).unwrap() - a1, r.granted(2).unwrap() - a2);
        assert!(d2 >= d1 && d2 - d1 <= initial + 4160, "{d1} {d2}");
    }

    #[test]
    fn demand_met_leaves_and_stops_the_pacer() {
        let mut r = RcccReceiver::new(seed_config()).unwrap();
        // Source wants 20,000 more beyond its initial window.
        r.on_rx(us(0), 7u32, c24(12_500 + 20_000), 4160, false);
        r.handle_timeout(us(0));
        assert_eq!(r.poll_grant(), Some((7, c24(25_000))));
        r.handle_timeout(us(1));
        assert_eq!(r.poll_grant(), Some((7, c24(32_500))));
        assert!(!r.is_active(7));
        assert_eq!(r.poll_timeout(), None);
        // The second slice's 12,500 B met the last 7,500 B of demand; the
        // rest was nobody's.
        assert_eq!(r.stats().unclaimed_bytes, 5_000);
        assert_eq!((r.stats().late_bytes, r.stats().withheld_bytes), (0, 0));
        assert!(core::iter::from_fn(|| r.poll_event()).any(|e| e
            == RcccReceiverEvent::Left {
                now: us(1),
                sender: 7,
                reason: LeaveReason::DemandMet
            }));
        // A later packet with a new target brings it back, no sooner than a
        // slice after the last tick.
        r.on_rx(us(1), 7u32, c24(32_500 + 5_000), 4160, false);
        assert_eq!(r.poll_timeout(), Some(us(2)));
    }

    #[test]
    fn idle_sender_leaves_and_its_share_goes_to_the_other() {
        // A short idle timeout, so sender 2's demand is not met before it.
        let cfg = RcccConfig {
            idle_timeout: Duration::from_micros(20),
            ..seed_config()
        };
        let idle = cfg.idle_timeout;
        let mut r = RcccReceiver::new(cfg).unwrap();
        r.on_rx(us(0), 1u32, c24(SEED_TARGET), 4160, false);
        r.on_rx(us(0), 2u32, c24(SEED_TARGET), 4160, false);
        let mut t = 0;
        // Sender 1 keeps answering; sender 2 falls silent after t = 0.
        while us(t) < us(0) + idle {
            r.on_rx(us(t), 1u32, c24(SEED_TARGET + 12_500 * t), 4160, false);
            r.handle_timeout(us(t));
            t += 1;
        }
        assert_eq!(r.granted(2), Some(12_500 + 6_250 * t));
        // At the idle timeout sender 2 leaves; sender 1 gets the whole slice.
        let before = r.granted(1).unwrap();
        r.on_rx(us(t), 1u32, c24(SEED_TARGET + 12_500 * t), 4160, false);
        r.handle_timeout(us(t));
        assert!(!r.is_active(2));
        assert_eq!(r.demand(2), Some(0));
        assert_eq!(r.granted(1).unwrap() - before, 12_500);
        assert_eq!(r.stats().idle_evictions, 1);
        // Sender 2 speaks again and rejoins one byte ahead of the
        // fair-share clock (sender 1's service): served next, but no
        // catching up for the time it was away.
        r.on_rx(us(t), 2u32, c24(12_500 + 6_250 * t + 50_000), 4160, false);
        assert!(r.is_active(2));
        assert_eq!(r.served(2), r.served(1).map(|v| v - 1));
    }

    /// A sender that goes idle between small messages rejoins ahead of the
    /// backlogged senders even when its last grant left it just past the
    /// clock: its next message is granted at the next tick, not after a
    /// round of every backlogged sender.
    #[test]
    fn a_sparse_sender_is_served_at_the_next_tick() {
        let cfg = RcccConfig {
            quantum: 4160,
            min_grant: 4160,
            ..open_loop()
        };
        let initial = cfg.initial_window;
        let mut r = RcccReceiver::new(cfg).unwrap();
        let big = 1_000_000;
        // Twelve backlogged senders and a sparse one asking for 168 B.
        for s in 1..=12u32 {
            r.on_rx(us(0), s, c24(initial + big), 4160, false);
        }
        r.on_rx(us(0), 99u32, c24(initial + 168), 168, false);
        let mut t = 1;
        while r.demand(99) != Some(0) {
            r.handle_timeout(us(t));
            t += 1;
        }
        // Its next message, right after that grant, while the backlogged
        // senders are mid-round.
        r.on_rx(us(t), 99u32, c24(initial + 2 * 168), 168, false);
        r.handle_timeout(us(t));
        assert_eq!(r.demand(99), Some(0), "granted at the next tick");
    }

    #[test]
    fn last_hop_trim_anticipates_the_retransmission() {
        let mut r = RcccReceiver::new(seed_config()).unwrap();
        // The trimmed packet's target says "no more" (speculative credit
        // covers the rest), but its 4,160 bytes will be resent.
        r.on_rx(us(0), 3u32, c24(12_500), 4160, true);
        assert_eq!(r.demand(3), Some(4160));
        assert_eq!(r.stats().last_hop_trims, 1);
        // The source's NACK-driven target says the same: not added twice.
        r.on_rx(us(1), 3u32, c24(12_500 + 4160), 0, false);
        assert_eq!(r.demand(3), Some(4160));
    }

    #[test]
    fn older_targets_do_not_undo_newer_ones() {
        let mut r = RcccReceiver::new(seed_config()).unwrap();
        r.on_rx(us(0), 1u32, c24(100_000), 4160, false);
        r.on_rx(us(0), 1u32, c24(50_000), 4160, false);
        assert_eq!(r.demand(1), Some(100_000 - 12_500));
        // A target behind the cumulative count (the source holds more than
        // it needs) asks for nothing.
        r.on_rx(us(0), 9u32, c24(2_000), 4160, false);
        assert_eq!(r.demand(9), Some(0));
        assert!(!r.is_active(9));
        // A runaway target is clamped to max_credit + one MTU.
        r.on_rx(us(0), 8u32, c24(12_500 + 8_000_000), 4160, false);
        assert_eq!(r.demand(8), Some(225_000 + 4160));
    }

    #[test]
    fn credit_request_is_answered_and_acks_replace_cps() {
        let mut r = RcccReceiver::new(seed_config()).unwrap();
        r.on_rx(us(0), 1u32, c24(12_500), 4160, false);
        // Known, no demand: the request still gets the current count back.
        r.on_credit_request(us(5), 1, c24(12_500));
        assert_eq!(r.poll_grant(), Some((1, c24(12_500))));
        r.on_credit_request(us(6), 1, c24(12_500 + 30_000));
        r.handle_timeout(us(6));
        // The ACK_CC carries the new count: the queued CP is dropped.
        assert_eq!(r.grant_for(1), Some(c24(25_000)));
        assert_eq!(r.poll_grant(), None);
        assert_eq!(r.grant_for(2), None);
        assert_eq!(r.stats().credit_requests, 2);
    }

    #[test]
    fn late_ticks_catch_up_at_most_the_burst_limit() {
        let mut r = RcccReceiver::new(seed_config()).unwrap();
        r.on_rx(us(0), 1u32, c24(SEED_TARGET), 4160, false);
        r.handle_timeout(us(0));
        // Half a slice late: the tick grants the 1.5 slices since the last.
        r.handle_timeout(Instant::from_nanos(1_500));
        assert_eq!(r.granted(1), Some(12_500 + 12_500 + 18_750));
        assert_eq!(r.poll_timeout(), Some(Instant::from_nanos(2_500)));
        // Ten slices late: at most `max_burst_slices` (2) of credit.
        r.on_rx(us(12), 1u32, c24(SEED_TARGET + 60_000), 0, false);
        r.handle_timeout(Instant::from_nanos(12_500));
        assert_eq!(r.granted(1), Some(12_500 + 12_500 + 18_750 + 25_000));
        // The 9 µs beyond the two slices' catch-up are counted as late.
        assert_eq!(r.stats().late_bytes, 9 * 12_500);
        assert_eq!(r.stats().unclaimed_bytes, 0);
    }

    #[test]
    fn slow_links_carry_budget_until_a_packet_fits() {
        // 10 Gb/s: 1,250 B per 1 µs slice, less than one MTU.
        let cfg = RcccConfig {
            pacing_ppm: 1_000_000,
            ..RcccConfig::for_link(10_000_000_000, Duration::from_micros(12))
        };
        assert_eq!(cfg.initial_window, 1_250);
        let mut r = RcccReceiver::new(cfg).unwrap();
        r.on_rx(us(0), 1u32, c24(1_250 + 20_000), 4160, false);
        for t in 0..3 {
            r.handle_timeout(us(t));
            assert_eq!(r.poll_grant(), None);
        }
        // Four slices' budget (5,000 B) is the first packet-sized grant:
        // one packet of 4,160 B; the remaining 840 B carry on.
        r.handle_timeout(us(3));
        assert_eq!(r.poll_grant(), Some((1, c24(1_250 + 4_160))));
        for t in 4..6 {
            r.handle_timeout(us(t));
            assert_eq!(r.poll_grant(), None);
        }
        // 840 + 3 × 1,250 = 4,590 B at the seventh slice.
        r.handle_timeout(us(6));
        assert_eq!(r.poll_grant(), Some((1, c24(1_250 + 2 * 4_160))));
    }

    #[test]
    fn removed_sender_is_forgotten() {
        let mut r = RcccReceiver::new(seed_config()).unwrap();
        r.on_rx(us(0), 1u32, c24(SEED_TARGET), 4160, false);
        r.handle_timeout(us(0));
        assert!(r.remove_sender(us(0), 1));
        assert!(!r.remove_sender(us(0), 1));
        assert_eq!(r.poll_grant(), None);
        assert_eq!(r.known_senders(), 0);
        r.handle_timeout(us(1));
        assert_eq!(r.poll_timeout(), None);
    }

    #[test]
    fn grants_wrap_at_24_bits() {
        let mut r = RcccReceiver::new(seed_config()).unwrap();
        let mut t = 0;
        let mut last = c24(12_500);
        while r.granted(1).unwrap_or(0) < (1 << 24) + 100_000 {
            let g = r.granted(1).unwrap_or(12_500);
            // The source keeps asking max_credit ahead of what it has.
            r.on_rx(us(t), 1u32, c24(g + 225_000), 4160, false);
            r.handle_timeout(us(t));
            if let Some((_, c)) = r.poll_grant() {
                assert_eq!(diff24(c, last), 12_500);
                last = c;
            }
            t += 1;
        }
        assert!(r.is_active(1));
    }

    /// A sender that keeps asking (the target stays 2 MB ahead of what it
    /// was granted) but sends nothing back, as a source whose host does not
    /// run it: the pacer stops at `max_outstanding` of unanswered credit.
    fn banked_to_the_bound() -> (RcccReceiver<u32>, u64) {
        let cfg = RcccConfig::default();
        let bound = cfg.max_outstanding;
        let mut r = RcccReceiver::new(cfg).unwrap();
        for t in 0..100 {
            let g = r.granted(1).unwrap_or(12_500);
            r.on_rx(us(t), 1u32, c24(g + 2_000_000), 0, false);
            r.handle_timeout(us(t));
        }
        (r, bound)
    }

    #[test]
    fn outstanding_credit_stops_the_pacer_until_data_comes_back() {
        let (mut r, bound) = banked_to_the_bound();
        assert_eq!(bound, 225_000, "1.5 BDP at 100 Gb/s × 12 µs");
        let paced = r.granted(1).unwrap() - 12_500;
        // 100 slices at 12,375 B would be 1.2 MB; it stopped at the bound.
        assert!(paced <= bound && paced > bound - 2 * 4160, "{paced}");
        assert_eq!(r.outstanding(), paced);
        assert!(r.stats().outstanding_limited > 0);
        // The budget of the 100 slices went to grants or was withheld (up
        // to the sub-packet carry of the last tick).
        let budget = 100 * 12_375;
        let accounted = paced + r.stats().withheld_bytes;
        assert!(
            accounted <= budget && accounted + 4160 > budget,
            "{accounted}"
        );
        assert_eq!(r.stats().late_bytes + r.stats().unclaimed_bytes, 0);
        // Ten packets arrive: exactly that much may be granted again.
        for _ in 0..10 {
            r.on_rx(us(100), 1u32, c24(paced + 12_500 + 2_000_000), 4160, false);
        }
        for t in 100..200 {
            r.handle_timeout(us(t));
        }
        let more = r.granted(1).unwrap() - 12_500 - paced;
        assert!(more <= 41_600 + (bound - paced), "{more}");
        assert!(more >= 41_600 - 4160, "{more}");
    }

    #[test]
    fn a_retransmission_settles_the_credit_of_its_lost_original() {
        let (mut r, _) = banked_to_the_bound();
        let out = r.outstanding();
        let pkts = out / 4160;
        // All but one packet of it arrive; the last was dropped.
        for _ in 0..pkts - 1 {
            r.on_rx(us(100), 1u32, c24(0), 4160, false);
        }
        assert_eq!(r.outstanding(), out - (pkts - 1) * 4160);
        // Its retransmission brings its own credit and its original's back.
        r.on_data(us(101), 1u32, c24(0), 4160, false, Arrival::Retransmission);
        assert_eq!(r.outstanding(), out.saturating_sub((pkts + 1) * 4160));
    }

    #[test]
    fn with_more_senders_than_the_bound_holds_packets_each_may_hold_one() {
        let cfg = RcccConfig {
            outstanding_per_sender: RcccConfig::default().min_grant,
            ..RcccConfig::default()
        };
        let (bound, grant) = (cfg.max_outstanding, cfg.min_grant);
        let n = 2 * bound / grant;
        let mut r = RcccReceiver::new(cfg).unwrap();
        for s in 0..n as u32 {
            r.on_rx(us(0), s, c24(12_500 + 2_000_000), 0, false);
        }
        // No sender sends anything back (within the idle timeout, 96 µs):
        // the pacer stops at one grant each.
        for t in 0..90 {
            r.handle_timeout(us(t));
        }
        assert_eq!(r.outstanding(), n * grant);
        for s in 0..n as u32 {
            assert_eq!(r.granted(s), Some(12_500 + grant), "sender {s}");
        }
        assert!(r.stats().outstanding_limited > 0);
        // Without the floor, the bound alone.
        let mut r = RcccReceiver::new(RcccConfig::default()).unwrap();
        for s in 0..n as u32 {
            r.on_rx(us(0), s, c24(12_500 + 2_000_000), 0, false);
        }
        for t in 0..90 {
            r.handle_timeout(us(t));
        }
        assert!(r.outstanding() <= bound && r.outstanding() > bound - grant);
    }

    #[test]
    fn a_credit_request_writes_off_what_the_source_no_longer_has() {
        let (mut r, bound) = banked_to_the_bound();
        assert!(r.outstanding() > bound - 2 * 4160);
        let g = r.granted(1).unwrap();
        // Its packets were lost; it has no credit and asks again.
        r.on_credit_request(us(100), 1u32, c24(g + 2_000_000));
        assert_eq!(r.outstanding(), 0);
        r.handle_timeout(us(100));
        assert!(r.granted(1).unwrap() > g, "the pacer grants again");
    }

    #[test]
    fn a_credit_request_for_new_need_keeps_the_credit_in_flight() {
        let mut r = RcccReceiver::new(RcccConfig::default()).unwrap();
        // Two packets' demand beyond the initial window, granted at once.
        r.on_rx(us(0), 1u32, c24(12_500 + 8_320), 0, false);
        r.handle_timeout(us(0));
        assert_eq!(r.granted(1), Some(12_500 + 8_320));
        assert_eq!(r.outstanding(), 8_320);
        // New data while the source has no credit: its request raises the
        // target. The two packets are still on their way: nothing written
        // off.
        r.on_credit_request(us(1), 1u32, c24(12_500 + 8_320 + 4_160));
        assert_eq!(r.outstanding(), 8_320);
        assert_eq!(r.stats().write_offs, 0);
        // The same target again (its credit timeout): written off.
        r.on_credit_request(us(2), 1u32, c24(12_500 + 8_320 + 4_160));
        assert_eq!(r.outstanding(), 0);
        assert_eq!(r.stats().write_offs, 1);
    }

    #[test]
    fn a_satisfied_sender_counts_until_the_idle_timeout() {
        let cfg = RcccConfig::default();
        let idle = cfg.idle_timeout;
        let mut r = RcccReceiver::new(cfg).unwrap();
        // Sender 1 asks 50 kB and gets it: its demand is met, it leaves.
        r.on_rx(us(0), 1u32, c24(12_500 + 49_920), 0, false);
        // Sender 2 keeps the pacer running.
        r.on_rx(us(0), 2u32, c24(12_500 + 2_000_000), 0, false);
        let mut t = 0;
        while r.is_active(1) {
            r.handle_timeout(us(t));
            t += 1;
        }
        // It left in the tick at t - 1.
        let left = us(t - 1);
        let owed = r.granted(1).unwrap() - 12_500;
        assert_eq!(owed, 49_920);
        // Until the idle timeout its credit still counts against the bound
        // (its data may still be on the way)...
        let before = r.outstanding();
        assert!(before >= owed);
        // ...after it, it is written off. Sender 2 sends back what it gets,
        // so only sender 1's share can keep the count up.
        let end = left
            .saturating_add(idle)
            .saturating_add(Duration::from_micros(2));
        let mut now = left;
        while now < end {
            now = now.saturating_add(Duration::from_micros(1));
            let g2 = r.granted(2).unwrap();
            let o = r.outstanding();
            // Everything sender 2 was granted comes back at once.
            r.on_rx(
                now,
                2u32,
                c24(g2 + 2_000_000),
                o.saturating_sub(owed),
                false,
            );
            r.handle_timeout(now);
            if now < left.saturating_add(idle) {
                assert!(r.outstanding() >= owed, "written off too early");
            }
        }
        assert!(r.outstanding() < owed, "{} still counted", r.outstanding());
    }
}
