//! The glue between PDCs and congestion control: the CCC accounting
//! invariant, CCC lookup, RCCC credit requests and grants.

use super::Pds;
use super::pdc::{AckDue, Pdc, TxItem};
use super::transmit::ControlPacket;
use std::net::IpAddr;

use uet_cms::{Ccc, CccTrace};
use uet_wire::pds::{CpPayload, DpdcidField, PdsCpRepr};
use uet_wire::time::Instant;
use uet_wire::{PdcId, Psn, TrafficClass};

use crate::ccc_table::CccTable;
use crate::config::PdsConfig;
use crate::pdc_table::PdcTable;
use crate::tx_ledger::{TxEntry, TxLedger};
use rustc_hash::FxHashMap as HashMap;

/// A ledger entry's share of its CCC: the accounting invariant between the
/// retransmission ledgers and [`Ccc`].
///
/// A CCC's `inflight` is the sum of `Inflight(b)` over the ledgers of the
/// PDCs that share it, its `inflight_pkts` the number of those entries, and
/// its retransmit backlog the sum of `Rtx(b)`. Each data packet is counted
/// in at most one of them, by one rule (`docs/protocol-notes.md` §5.1: OnNACK and
/// OnInferredLoss mark for retransmission, OnSend adds, OnACK un-marks):
///
/// * (re)transmitted: `+b` to inflight (`Ccc::on_send`);
/// * declared lost — NACK, trim, RTO, SACK inference: moves from inflight to
///   the retransmit backlog (`on_nack` / `on_inferred_loss`), once: an entry
///   already marked is not declared lost again until it is resent;
/// * acknowledged — SACK, cumulative ACK, response: leaves whichever it is
///   in: inflight if outstanding, the retransmit backlog if it was marked
///   and not yet resent (`AckEvent::rtx_cancelled_bytes`). A SACKed entry is
///   never counted again, whatever later ACKs cover it;
/// * its PDC fails: leaves whichever it is in (`Ccc::abandon`).
///
/// CLOSE packets and the ACK_REQ probes that stand in for SACKed packets
/// are control traffic: never counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CcShare {
    Inflight(u64),
    Rtx(u64),
    None,
}

impl CcShare {
    /// A whole ledger's share of its CCC: (inflight bytes, inflight
    /// packets, retransmit backlog bytes), what a PDC hands back when it
    /// fails or is reopened.
    pub(super) fn of_ledger(config: &PdsConfig, ledger: &TxLedger<TxItem>) -> (u64, u32, u64) {
        let (mut infl, mut pkts, mut rtx) = (0u64, 0u32, 0u64);
        for e in ledger.iter() {
            match Self::of(config, e) {
                Self::Inflight(b) => {
                    infl += b;
                    pkts += 1;
                }
                Self::Rtx(b) => rtx += b,
                Self::None => {}
            }
        }
        (infl, pkts, rtx)
    }

    pub(super) fn of(config: &PdsConfig, e: &TxEntry<TxItem>) -> Self {
        match e.token {
            TxItem::Data(pkt) if !e.sacked => {
                let b = u64::from(config.nominal(pkt.len));
                if e.needs_rtx {
                    Self::Rtx(b)
                } else {
                    Self::Inflight(b)
                }
            }
            _ => Self::None,
        }
    }
}

impl Pds {
    /// CCCs: one per destination and traffic class some PDC refers to.
    pub fn ccc_count(&self) -> usize {
        self.cccs.len()
    }

    /// Sources the RCCC receiver addresses CREDIT CPs to (one per source
    /// FEP and `ccc_id` some PDC carries).
    pub fn rccc_source_count(&self) -> usize {
        self.rccc_pdc.len()
    }

    /// The CCC towards `dst` in `tc`, if one exists.
    pub fn ccc(&self, dst: IpAddr, tc: TrafficClass) -> Option<&Ccc> {
        self.cccs.get(&(dst, tc))
    }

    /// What the retransmission ledgers say the CCC towards `dst` in `tc`
    /// must hold: (inflight bytes, inflight packets, retransmit backlog
    /// bytes), summed over the PDCs that share it. See [`CcShare`].
    #[cfg(test)]
    pub(crate) fn ccc_audit(&self, dst: IpAddr, tc: TrafficClass) -> (i64, u32, u64) {
        let (mut bytes, mut pkts, mut rtx) = (0i64, 0u32, 0u64);
        for p in self.pdcs.values().filter(|p| p.ccc == (dst, tc)) {
            for e in p.ledger.iter() {
                match CcShare::of(&self.config, e) {
                    CcShare::Inflight(b) => {
                        bytes += b as i64;
                        pkts += 1;
                    }
                    CcShare::Rtx(b) => rtx += b,
                    CcShare::None => {}
                }
            }
        }
        (bytes, pkts, rtx)
    }

    /// Every PDC's state, for a test's failure message.
    #[cfg(test)]
    pub(crate) fn pdc_dump(&self) -> Vec<String> {
        self.pdcs
            .values()
            .map(|p| {
                format!(
                    "pdc {:?} peer {:?} init {} est {} closing {} nacked {} start {:?} next {:?} ledger {} queue {} sched {} peer_id {:?} rx_rccc {:?}",
                    p.id,
                    p.peer,
                    p.initiator,
                    p.established,
                    p.closing,
                    p.nacked,
                    p.start,
                    p.ledger.next_psn(),
                    p.ledger.len(),
                    p.queue.packets(),
                    p.scheduled,
                    p.peer_id,
                    p.rx.as_ref().map(|r| r.rccc)
                )
            })
            .collect()
    }

    /// Hands every queued congestion-control state change, of every CCC,
    /// to `f` with the CCC's destination and traffic class
    /// ([`Ccc::poll_trace`]): for tracing and plots.
    pub fn drain_cc_traces(&mut self, mut f: impl FnMut(IpAddr, TrafficClass, CccTrace)) {
        self.cccs.for_each_mut(|&(dst, tc), c| {
            while let Some(e) = c.poll_trace() {
                f(dst, tc, e);
            }
        });
    }

    /// Every CCC with its destination and traffic class (for stats).
    pub fn cccs(&self) -> impl Iterator<Item = (IpAddr, TrafficClass, &Ccc)> + '_ {
        self.cccs.iter().map(|(&(dst, tc), c)| (dst, tc, c))
    }

    /// New data queued on `pdc` (CCC `key`): the CCC learns of it
    /// (OnNewData) and the PDC goes on the send round robin.
    pub(super) fn on_queued(
        &mut self,
        now: Instant,
        pdc: PdcId,
        key: (IpAddr, TrafficClass),
        bytes: u64,
    ) {
        let ix = self.ensure_ccc(now, key.0, key.1);
        if let Some(c) = self.cccs.at_mut(ix) {
            c.on_new_data(now, bytes);
        }
        self.schedule(pdc);
    }

    /// PDC `id` no longer carries RCCC source `key`: the receiver forgets
    /// the source with the last PDC that carried it; until then another
    /// of them addresses its CREDIT CPs.
    pub(super) fn release_rccc(&mut self, now: Instant, id: PdcId, key: (IpAddr, u8)) {
        let Some(e) = self.rccc_pdc.get_mut(&key) else {
            return;
        };
        e.1 -= 1;
        if e.1 == 0 {
            self.rccc_pdc.remove(&key);
            if let Some(rr) = &mut self.rccc_rx {
                rr.remove_sender(now, key);
            }
        } else if e.0 == id
            && let Some(q) = self
                .pdcs
                .values()
                .find(|q| q.id != id && q.rx.as_ref().is_some_and(|rx| rx.rccc == Some(key)))
        {
            e.0 = q.id;
        }
    }

    /// Brings the CCCs' timer deadlines up to date and returns the
    /// earliest (RCCC credit timeouts, PFT pacing gaps), noting on the way
    /// the CCCs whose RCCC source raised a CREDIT_REQ. Looks only at the
    /// CCCs handed out mutably since the last call (`CccTable::refresh`).
    pub(super) fn refresh_ccc_timers(&self) -> Option<Instant> {
        self.cccs.refresh(
            |c| {
                #[cfg(test)]
                self.ccc_deadline_evals
                    .set(self.ccc_deadline_evals.get() + 1);
                c.poll_timeout()
            },
            |c| {
                c.rccc()
                    .is_some_and(uet_cms::RcccSource::needs_credit_request)
            },
        )
    }

    /// CMS timers: RCCC credit timeouts (→ CREDIT_REQ), PFT pacing gaps,
    /// and the receiver's credit pacer.
    pub(super) fn cms_timers(&mut self, now: Instant) {
        self.refresh_ccc_timers();
        let mut due = core::mem::take(&mut self.scratch_cccs);
        self.cccs.take_due(now, &mut due);
        // What a scan of every CCC would have found, in the same order.
        debug_assert_eq!(
            due.iter()
                .filter_map(|&ix| self.cccs.key_at(ix))
                .collect::<Vec<_>>(),
            self.cccs
                .iter()
                .filter(|(_, c)| c.poll_timeout().is_some_and(|t| t <= now))
                .map(|(k, _)| *k)
                .collect::<Vec<_>>()
        );
        for &ix in &due {
            let Some(key) = self.cccs.key_at(ix) else {
                continue;
            };
            if let Some(c) = self.cccs.at_mut(ix) {
                c.handle_timeout(now);
            }
            self.schedule_ccc(key);
        }
        due.clear();
        self.scratch_cccs = due;
        self.send_credit_requests(now);
        if let Some(rr) = &mut self.rccc_rx
            && rr.poll_timeout().is_some_and(|t| t <= now)
        {
            rr.handle_timeout(now);
        }
        self.queue_grants();
    }

    /// Sends a CREDIT_REQ for every CCC whose RCCC source raised one — on
    /// its credit timeout, or at once when its need grew while blocked. A
    /// raised request disarms the source's timer, so it must be collected
    /// here whatever the timers say.
    pub(super) fn send_credit_requests(&mut self, now: Instant) {
        // Runs on every transmit poll: nothing to scan without RCCC.
        if !self.rccc_source {
            return;
        }
        // Only a CCC handed out mutably can have raised a request since
        // the last pass, and each pass takes every raised one: the
        // refresh lists exactly those that still hold one.
        self.refresh_ccc_timers();
        let mut raised = core::mem::take(&mut self.scratch_cccs);
        self.cccs.take_flagged(&mut raised);
        // Every CCC holding a request is among them, in the map's order.
        debug_assert!({
            let holding: Vec<_> = self
                .cccs
                .iter()
                .filter(|(_, c)| {
                    c.rccc()
                        .is_some_and(uet_cms::RcccSource::needs_credit_request)
                })
                .filter_map(|(k, _)| self.cccs.index(k))
                .collect();
            let mut it = raised.iter();
            holding.iter().all(|ix| it.any(|r| r == ix))
        });
        let mut forgotten = Vec::new();
        let Self {
            cccs,
            pdcs,
            ccc_members,
            ctl,
            config,
            active,
            ..
        } = self;
        for &ix in &raised {
            let (Some(key), Some(c)) = (cccs.key_at(ix), cccs.at_mut(ix)) else {
                continue;
            };
            if !c
                .rccc()
                .is_some_and(uet_cms::RcccSource::needs_credit_request)
            {
                continue;
            }
            if let Some(target) = c.poll_credit_request(now) {
                // A PDC of this CCC that has sent data carries the request:
                // the target's receiver knows the source by the CC headers
                // of that data. (A target PDC that has only acknowledged
                // the peer's writes does not: at the peer it is an
                // initiator PDC the receiver never took data on, and the
                // request would be dropped there.) An established one, by
                // PDC ID; else one the target has NACKed, addressed as its
                // SYN packets are (the target knows it by {source,
                // SPDCID}, §2.2). A source whose whole first window was
                // trimmed holds nothing but NACKs, which do not establish
                // its PDC; this is how it still reaches the receiver once
                // the receiver's idle timeout has dropped its demand. A PDC
                // never heard from waits for its RTO instead: the target
                // may not know it, and a request it cannot place only adds
                // packets to a full buffer.
                let members = ccc_members.get(key);
                let pdc = members
                    .iter()
                    .filter_map(|id| pdcs.get(id))
                    .filter(|p| {
                        !Self::sent_nothing(p) && (Self::addressable(p) || p.initiator && p.nacked)
                    })
                    .max_by_key(|p| Self::addressable(p))
                    .map(|p| {
                        // Addressed by PDC ID, the request names the PDC's
                        // next PSN, as a PROBE does: a target that no
                        // longer knows the PDC NACKs it with that PSN,
                        // which the PDC can verify (`on_nack`) and reopen.
                        let psn = if Self::addressable(p) {
                            p.ledger.next_psn()
                        } else {
                            Psn(0)
                        };
                        (p.id, p.peer, p.mode, Self::dst_field(p, p.start), psn)
                    });
                if pdc.is_none()
                    && members
                        .iter()
                        .filter_map(|id| pdcs.get(id))
                        .all(Self::sent_nothing)
                {
                    // Nothing can carry the request, and the target knows
                    // none of this CCC's PDCs.
                    forgotten.push(key);
                    continue;
                }
                if let Some((id, dst, mode, dpdcid, psn)) = pdc {
                    let repr = PdsCpRepr {
                        mode,
                        retx: false,
                        ar: false,
                        psn,
                        spdcid: Some(id),
                        dpdcid,
                        payload: CpPayload::CreditReq {
                            target_credit: target.get(),
                        },
                    };
                    ctl.push_back(ControlPacket::Cp { dst, repr });
                }
                // A PDC whose whole window the target never heard of, and
                // whose requests have gone unanswered for RTO_INIT_TIME.
                for &id in members {
                    // Only these are taken mutably: a PDC handed out
                    // mutably has its timers looked at again.
                    if pdcs.get(&id).is_some_and(|p| p.unheard_loss_at.is_some())
                        && let Some(p) = pdcs.get_mut(&id)
                        && Self::force_unheard(config, now, p)
                        && !p.scheduled
                    {
                        p.scheduled = true;
                        active.push_back(id);
                    }
                }
            }
        }
        raised.clear();
        self.scratch_cccs = raised;
        for key in forgotten {
            self.restart_forgotten_source(now, key);
        }
    }

    /// Restarts the RCCC source of CCC `key` when the target knows none of
    /// its PDCs: every one left has sent nothing yet (an initiator PDC
    /// opened while the last one closed, or reopened because the target
    /// had forgotten it; a target PDC that has only acknowledged the
    /// peer's writes). The target forgets a source with the last
    /// PDC that carried it, and a source without credit could never reach
    /// it again: no data packet may leave to carry a credit target, no PDC
    /// the target knows can carry a CREDIT_REQ, and a packet never sent
    /// never times out. So it starts as a new CCC's source would
    /// (`RcccSource::restart`), and its PDCs are scheduled.
    pub(super) fn restart_forgotten_source(&mut self, now: Instant, key: (IpAddr, TrafficClass)) {
        let forgotten = {
            let Self {
                pdcs, ccc_members, ..
            } = self;
            let left = ccc_members.get(key);
            !left.is_empty()
                && left
                    .iter()
                    .filter_map(|id| pdcs.get(id))
                    .all(Self::sent_nothing)
        };
        if !forgotten {
            return;
        }
        if let Some(c) = self.cccs.get_mut(&key)
            && c.rccc().is_some()
        {
            c.restart_rccc(now);
            self.schedule_ccc(key);
        }
    }

    /// Sends the receiver pacer's grants: in the ACK its PDC owes anyway,
    /// or else in a CREDIT control packet.
    ///
    /// A PDC that holds arrivals it has not acknowledged yet (its ACK
    /// waits for the coalescing trigger or `ack_delay`) acknowledges them
    /// now, and the ACK_CC carries the cumulative credit (`cc_type`
    /// CREDIT, §2.7; [`RcccReceiver::grant_for`]) in place of a CREDIT CP.
    /// One packet instead of two for the source to read, and the ACK it
    /// would have sent a little later is not needed: with grants of one
    /// or two packets, the usual case while several sources share the
    /// link, a source's stream of grants then carries all its ACKs. An
    /// earlier ACK reports the same state a later one would have \[I:
    /// ACK coalescing is the target's choice, §3\].
    ///
    /// [`RcccReceiver::grant_for`]: uet_cms::RcccReceiver::grant_for
    pub(super) fn queue_grants(&mut self) {
        let Some(rr) = &mut self.rccc_rx else {
            return;
        };
        while let Some((key, credit)) = rr.poll_grant() {
            let Some(&(id, _)) = self.rccc_pdc.get(&key) else {
                continue;
            };
            let Some(p) = self.pdcs.get(&id) else {
                continue;
            };
            // (A closing PDC's last ACK may be a plain one, without CC
            // state: its grants go in CPs.)
            let owed =
                p.rx.as_ref()
                    .filter(|rx| !p.closing && rx.rccc == Some(key) && rx.due != AckDue::No);
            if let Some(rx) = owed {
                if rx.due != AckDue::Now
                    && let Some(rx) = self.pdcs.get_mut(&id).and_then(|p| p.rx.as_mut())
                {
                    rx.due = AckDue::Now;
                    self.acks.push_back(id);
                }
                continue;
            }
            let repr = PdsCpRepr {
                mode: p.mode,
                retx: false,
                ar: false,
                psn: Psn(0),
                spdcid: Some(p.id),
                dpdcid: DpdcidField::Dpdcid(p.peer_id),
                payload: CpPayload::Credit {
                    credit: credit.get(),
                },
            };
            self.ctl.push_back(ControlPacket::Cp { dst: key.0, repr });
        }
    }

    /// Schedules every PDC of a CCC that has something to send (credit
    /// arrived, a pacing gap ended).
    pub(super) fn schedule_ccc(&mut self, key: (IpAddr, TrafficClass)) {
        let Self {
            pdcs,
            ccc_members,
            active,
            ..
        } = self;
        for &id in ccc_members.get(key) {
            // Looked at first, taken mutably only to be queued: a PDC
            // handed out mutably has its timers looked at again.
            if pdcs
                .get(&id)
                .is_some_and(|p| p.has_tx_work() && !p.scheduled)
                && let Some(p) = pdcs.get_mut(&id)
            {
                p.scheduled = true;
                active.push_back(id);
            }
        }
    }

    pub(super) fn ensure_ccc(&mut self, now: Instant, dst: IpAddr, tc: TrafficClass) -> usize {
        match self.cccs.index(&(dst, tc)) {
            Some(ix) => ix,
            None => {
                let c = Ccc::new(self.config.ccc.clone(), now, &mut self.rng);
                self.cccs.insert_new((dst, tc), c)
            }
        }
    }

    /// The index of `p`'s CCC in `cccs`, cached on the PDC after the first
    /// lookup (`None` while the CCC does not exist).
    #[inline]
    pub(super) fn ccc_ix(cccs: &CccTable<Ccc>, p: &mut Pdc) -> Option<usize> {
        if let Some(ix) = p.ccc_ix {
            return Some(ix);
        }
        let ix = cccs.index(&p.ccc)?;
        p.ccc_ix = Some(ix);
        Some(ix)
    }
}

/// The IDs of each CCC's PDCs, in the PDC table's slab order: the order a
/// scan of the whole table meets them, so that [`Pds::schedule_ccc`] queues
/// them as that scan did, without visiting every other PDC each time a
/// credit or window update arrives (a host writing to a thousand peers has
/// a thousand PDCs and a CCC per peer). A PDC's CCC never changes, so the
/// index changes only when a PDC enters or leaves the table, which the
/// engine does through [`Pds::insert_pdc`] and [`Pds::take_pdc`] alone: each
/// keeps the index in step, at the cost of the CCC's own members (its slot
/// is found by binary search on their slots), not of every PDC.
#[derive(Debug, Default)]
pub(super) struct CccMembers {
    by_ccc: HashMap<(IpAddr, TrafficClass), Vec<PdcId>>,
}

impl CccMembers {
    /// PDC `id`, of CCC `key`, is now in `pdcs`: listed at its slot's place.
    pub(super) fn added<T>(&mut self, pdcs: &PdcTable<T>, key: (IpAddr, TrafficClass), id: PdcId) {
        let pos = pdcs.position(&id);
        let ids = self.by_ccc.entry(key).or_default();
        let at = ids.partition_point(|x| pdcs.position(x) < pos);
        ids.insert(at, id);
    }

    /// PDC `id`, of CCC `key`, left the table. A CCC without a PDC left
    /// goes, so the map stays as large as the number of CCCs in use.
    pub(super) fn removed(&mut self, key: (IpAddr, TrafficClass), id: PdcId) {
        if let Some(ids) = self.by_ccc.get_mut(&key) {
            ids.retain(|&x| x != id);
            if ids.is_empty() {
                self.by_ccc.remove(&key);
            }
        }
    }

    /// The IDs of CCC `key`'s PDCs, in slab order.
    pub(super) fn get(&self, key: (IpAddr, TrafficClass)) -> &[PdcId] {
        self.by_ccc.get(&key).map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uet_wire::rand::{Rng, Xoshiro256};

    /// Through random opens and closes, each CCC's members are exactly the
    /// PDCs a scan of the whole table finds for it, in the scan's order.
    #[test]
    fn a_ccc_s_members_are_what_a_scan_of_the_table_finds_in_its_order() {
        let keys: Vec<(IpAddr, TrafficClass)> = (0..4u8)
            .map(|i| {
                (
                    IpAddr::from([10, 0, 0, i]),
                    TrafficClass::from_masked(i % 2),
                )
            })
            .collect();
        let mut rng = Xoshiro256::seed_from_u64(7);
        let mut table: PdcTable<(IpAddr, TrafficClass)> = PdcTable::new();
        let mut members = CccMembers::default();
        let mut live: Vec<PdcId> = Vec::new();
        for step in 0..2000 {
            if live.is_empty() || rng.below(3) > 0 {
                let id = table.alloc(&mut rng).expect("free IDs");
                let k = keys[rng.below(keys.len() as u64) as usize];
                table.insert(id, k);
                members.added(&table, k, id);
                live.push(id);
            } else {
                let id = live.swap_remove(rng.below(live.len() as u64) as usize);
                let k = table.remove(&id).expect("live");
                members.removed(k, id);
            }
            if step % 7 == 0 {
                continue; // several changes between two looks
            }
            for &k in &keys {
                let scan: Vec<PdcId> = table
                    .keys()
                    .zip(table.values())
                    .filter(|(_, c)| **c == k)
                    .map(|(id, _)| id)
                    .collect();
                assert_eq!(members.get(k), scan.as_slice(), "step {step}");
            }
        }
        // A CCC no PDC uses has no members, and is not kept.
        let unused = (IpAddr::from([10, 0, 0, 9]), TrafficClass::from_masked(0));
        assert!(members.get(unused).is_empty());
        assert!(members.by_ccc.len() <= keys.len());
    }
}
