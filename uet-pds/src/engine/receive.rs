//! The receive path: every arriving packet, by type.

use super::congestion::CcShare;
use super::pdc::{AckDue, Pdc, ReceiveState, TxItem};
use super::transmit::ControlPacket;
use super::{
    MAX_REOPENS, Pds, PdsError, PdsEvent, Reply, RxMeta, RxRequest, RxSes, SecureState, SesHooks,
};
use std::net::IpAddr;
use uet_cms::nscc::{RcvdBytesTracker, service_time_from_wire};
use uet_cms::rccc::Arrival;
use uet_cms::{AckEvent, CccState, NackEvent};
use uet_wire::encap::Trim;
use uet_wire::pds::tss::Sdi;
use uet_wire::pds::{
    AckCcState, CpPayload, DpdcidField, NackAction, NackCode, NackTarget, NextHeader, PdsAckCc,
    PdsAckExt, PdsAckPsnField, PdsAckRepr, PdsAckRequest, PdsAckState, PdsCpRepr, PdsNackRepr,
    PdsRepr, PdsRequestRepr, PdsRudiRepr, ReliableMode, RudiKind,
};
use uet_wire::ses::{ListKind, ResponseOpcode, ReturnCode, SesRepr, SesResponseRepr};
use uet_wire::time::{Duration, Instant};
use uet_wire::{
    Credit24, DeliveryMode, Ecn, EntropyValue, JobId, MessageId, PdcId, Psn, RiGeneration,
    TrafficClass,
};

use crate::config::{PdsConfig, SecureStart};
use crate::counters::DropReason;
use crate::deadline_heap::Timer;
use crate::pkt_queue::PktQueue;
use crate::rx_window::RxOutcome;
use crate::tail_probe::{Outstanding, TailProbe};
use crate::tx_ledger::{TxEntry, TxLedger};

impl Pds {
    /// Handles one received datagram (the UET bytes after UDP/entropy).
    /// Every failure is a counted drop or a NACK; nothing panics.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        meta: &RxMeta,
        bytes: &[u8],
        upper: &mut impl SesHooks,
    ) {
        // The common data packet first, its SES header left in place for
        // the layer above to read once (everything else: the general
        // parse below, which gives the same header decoded).
        if meta.trimmed.is_none()
            && let Some(v) = uet_wire::parse_request_view(bytes)
        {
            let ses = Some(RxSes::Standard(v.ses));
            self.on_request(now, meta, &v.pds, ses, v.payload, upper);
            return;
        }
        // And the plain ACK (the general parse gives it with no SES header).
        if meta.trimmed.is_none()
            && let Some((a, data)) = uet_wire::parse_ack_view(bytes)
        {
            self.on_ack(now, meta, &a, None, data, upper);
            return;
        }
        // Borrowed from the result, not moved out of it (a move is a
        // memcpy of the whole parsed packet).
        let parsed = uet_wire::parse_uet(bytes, meta.trimmed.is_some());
        let Ok(pkt) = &parsed else {
            self.counters.drop(DropReason::Malformed);
            return;
        };
        match &pkt.pds {
            PdsRepr::Request(r) => {
                let ses = pkt.ses.as_ref().map(RxSes::Parsed);
                self.on_request(now, meta, r, ses, pkt.payload, upper);
            }
            PdsRepr::Ack(a) => {
                let data_off = pkt.payload;
                self.on_ack(now, meta, a, pkt.ses.as_ref(), data_off, upper);
            }
            PdsRepr::Nack(n) => self.on_nack(now, meta, n, upper),
            PdsRepr::Cp(c) => self.on_cp(now, meta, c, upper),
            PdsRepr::Uud(_) => {
                if meta.trimmed.is_some() {
                    self.counters.drop(DropReason::Trimmed);
                    return;
                }
                self.counters.rx_data += 1;
                let rx = RxRequest {
                    pdc: None,
                    peer: meta.src,
                    psn: Psn(0),
                    mode: DeliveryMode::Uud,
                    ses: pkt.ses.as_ref().map(RxSes::Parsed),
                    payload: pkt.payload,
                };
                let _ = upper.on_request(now, &rx);
            }
            PdsRepr::Rudi(r) => self.on_rudi(now, meta, r, pkt.ses.as_ref(), pkt.payload, upper),
        }
    }

    pub(super) fn on_rudi(
        &mut self,
        now: Instant,
        meta: &RxMeta,
        r: &PdsRudiRepr,
        ses: Option<&SesRepr>,
        payload: &[u8],
        upper: &mut impl SesHooks,
    ) {
        match r.kind {
            RudiKind::Request => {
                if let Some(t) = meta.trimmed {
                    self.counters.drop(DropReason::Trimmed);
                    let code = match t {
                        Trim::Trimmed => NackCode::Trimmed,
                        Trim::LastHop => NackCode::TrimmedLastHop,
                    };
                    self.nack_rudi(meta, r, code);
                    return;
                }
                // At-least-once: an idempotent request is executed again
                // when it arrives again (BRIEF, §2.11).
                self.counters.rx_data += 1;
                let rx = RxRequest {
                    pdc: None,
                    peer: meta.src,
                    psn: Psn(r.pkt_id),
                    mode: DeliveryMode::Rudi,
                    ses: ses.map(RxSes::Parsed),
                    payload,
                };
                let reply = upper.on_request(now, &rx);
                let resp = match reply {
                    Reply::Response { response, .. } => Some(response),
                    Reply::None => None,
                    // Refused: a NACK naming the packet ID (`nt` = 1, §2.8),
                    // never a RUDI response, which would read as done.
                    Reply::Reject(code) => {
                        self.counters.drop(DropReason::Refused);
                        self.nack_rudi(meta, r, code);
                        return;
                    }
                };
                self.rudi.replies.push_back((
                    meta.src,
                    meta.ev,
                    meta.ecn == Ecn::Ce,
                    r.pkt_id,
                    resp,
                ));
            }
            RudiKind::Response { .. } => {
                self.counters.rx_acks += 1;
                match self.rudi.inflight.get(&r.pkt_id) {
                    Some(tx) if tx.dst == meta.src => {}
                    _ => {
                        self.counters.drop(DropReason::StrayFeedback);
                        return;
                    }
                }
                if let Some(tx) = self.rudi.inflight.remove(&r.pkt_id) {
                    if let Some(s) = ses {
                        upper.on_response(now, tx.pkt, s, payload);
                    }
                    upper.on_acked(now, tx.pkt);
                }
            }
        }
    }

    /// A NACK for RUDI request `r`, naming its packet ID (`nt` = 1, §2.8).
    pub(super) fn nack_rudi(&mut self, meta: &RxMeta, r: &PdsRudiRepr, code: NackCode) {
        let target = NackTarget::PktId(r.pkt_id);
        self.nack_to(meta, target, r.retx, code, None, None, 0);
    }

    pub(super) fn nack(
        &mut self,
        meta: &RxMeta,
        code: NackCode,
        psn: Psn,
        spdcid: Option<PdcId>,
        dpdcid: Option<PdcId>,
        payload: u32,
    ) {
        let target = NackTarget::Psn(psn);
        self.nack_to(meta, target, false, code, spdcid, dpdcid, payload);
    }

    /// Queues a NACK back to the sender of `meta`'s packet.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn nack_to(
        &mut self,
        meta: &RxMeta,
        target: NackTarget,
        retx: bool,
        code: NackCode,
        spdcid: Option<PdcId>,
        dpdcid: Option<PdcId>,
        payload: u32,
    ) {
        self.ctl.push_back(ControlPacket::Nack {
            dst: meta.src,
            ev: meta.ev,
            sdi: meta.sdi,
            repr: PdsNackRepr {
                next_hdr: NextHeader::None,
                m: meta.ecn == Ecn::Ce,
                retx,
                target,
                code,
                vendor_code: 0,
                spdcid,
                dpdcid,
                payload,
                ccx: None,
            },
        });
    }

    /// Finds or creates the PDC a request or CP belongs to (§2.12 target
    /// lookup by {src, spdcid}; established PDCs by our own ID).
    // Always inlined into its two callers: the fast path is a few
    // compares, cheaper than the call.
    #[inline(always)]
    pub(super) fn lookup_for_rx(
        &mut self,
        now: Instant,
        meta: &RxMeta,
        spdcid: Option<PdcId>,
        dpdcid: DpdcidField,
        psn: Psn,
        mode: ReliableMode,
    ) -> Option<PdcId> {
        // The usual case, decided here without the call: an established
        // PDC addressed by our ID, from its peer's PDC, in its mode (what
        // the full lookup accepts with nothing to set up or refuse).
        if let (Some(sp), DpdcidField::Dpdcid(Some(id))) = (spdcid, dpdcid)
            && let Some(p) = self.pdcs.get_mut(&id)
            && p.peer == meta.src
            && p.peer_id == Some(sp)
            && p.mode == mode
            && !p.pending
            && p.sdi == meta.sdi
        {
            p.last_activity = now;
            return Some(id);
        }
        self.lookup_for_rx_full(now, meta, spdcid, dpdcid, psn, mode)
    }

    /// [`Pds::lookup_for_rx`] for every case.
    pub(super) fn lookup_for_rx_full(
        &mut self,
        now: Instant,
        meta: &RxMeta,
        spdcid: Option<PdcId>,
        dpdcid: DpdcidField,
        psn: Psn,
        mode: ReliableMode,
    ) -> Option<PdcId> {
        let Some(spdcid) = spdcid else {
            self.counters.drop(DropReason::Malformed);
            return None;
        };
        let id = match dpdcid {
            DpdcidField::Dpdcid(Some(id)) => match self.pdcs.get(&id) {
                Some(p) if p.sdi != meta.sdi => {
                    self.counters.drop(DropReason::WrongDomain);
                    return None;
                }
                Some(p) if p.peer == meta.src && p.peer_id.is_none_or(|x| x == spdcid) => {
                    if p.pending {
                        self.confirm(id);
                    }
                    id
                }
                _ => {
                    self.counters.drop(DropReason::UnknownPdc);
                    self.nack(meta, NackCode::InvDpdcid, psn, None, Some(spdcid), 0);
                    return None;
                }
            },
            DpdcidField::Dpdcid(None) => {
                self.counters.drop(DropReason::UnknownPdc);
                self.nack(meta, NackCode::InvDpdcid, psn, None, Some(spdcid), 0);
                return None;
            }
            DpdcidField::Syn { psn_offset, .. } => match self.by_peer.get(&(meta.src, spdcid)) {
                // A packet of another domain (or in the clear) neither
                // replaces nor joins a PDC of a domain.
                Some(&id) if self.pdcs.get(&id).is_some_and(|p| p.sdi != meta.sdi) => {
                    self.counters.drop(DropReason::WrongDomain);
                    return None;
                }
                // A secure PDC that named the Start_PSN its initiator must
                // start from (NEW_START_PSN, §2.12) opens only with that
                // one; any other is told again.
                Some(&id) if self.pdcs.get(&id).is_some_and(|p| p.awaiting_start) => {
                    let syn_start = psn.sub(u32::from(psn_offset.get()));
                    let p = self.pdcs.get_mut(&id)?;
                    if p.start != syn_start {
                        let base = p.start;
                        self.counters.drop(DropReason::NewStartPsn);
                        let code = NackCode::NewStartPsn;
                        self.nack(meta, code, psn, Some(id), Some(spdcid), base.0);
                        return None;
                    }
                    p.awaiting_start = false;
                    id
                }
                // A SYN of another Start_PSN for a PDC its initiator never
                // confirmed: either the initiator reopened the PDC (its peer
                // refused it as unknown) or the PDC was opened by a forged
                // SYN. The newer SYN takes the place; a real initiator that
                // loses it this way gets INV_DPDCID and reopens in turn. A
                // confirmed PDC answers INVALID_SYN, which its initiator
                // drops unless the PSN is one it sent.
                Some(&id)
                    if self.pdcs.get(&id).is_some_and(|p| {
                        p.pending
                            && p.quiet()
                            && p.rx
                                .as_ref()
                                .is_some_and(|rx| rx.start != psn.sub(u32::from(psn_offset.get())))
                    }) =>
                {
                    self.counters.pending_evicted += 1;
                    self.remove_pdc(now, id, None);
                    return self.lookup_for_rx_full(now, meta, Some(spdcid), dpdcid, psn, mode);
                }
                Some(id) => *id,
                None => {
                    self.make_room_for_pending(now);
                    let Some(id) = self.alloc_id() else {
                        self.counters.drop(DropReason::NoPdcAvailable);
                        self.nack(meta, NackCode::NoPdcAvail, psn, None, Some(spdcid), 0);
                        return None;
                    };
                    let tc = TrafficClass::from_masked(0);
                    let pdc = Pdc {
                        id,
                        peer: meta.src,
                        peer_id: Some(spdcid),
                        initiator: false,
                        sdi: meta.sdi,
                        mode,
                        key: None,
                        ccc: (meta.src, tc),
                        ccc_ix: None,
                        // The return direction (target → initiator, e.g.
                        // read data) starts at the initiator's Start_PSN,
                        // which the SYN gives us: the initiator then knows
                        // where our PSN space starts without a SYN of ours,
                        // and we address it by its PDC ID from the first
                        // packet [I: the public sources do not say how the
                        // return direction's start is chosen].
                        start: match dpdcid {
                            DpdcidField::Syn { psn_offset, .. } => {
                                psn.sub(u32::from(psn_offset.get()))
                            }
                            DpdcidField::Dpdcid(_) => psn,
                        },
                        established: false,
                        ledger: TxLedger::new(Psn(0)),
                        queue: PktQueue::new(),
                        clear_needed: false,
                        forced_at: None,
                        unheard_loss_at: None,
                        clear_sent: None,
                        clear_out: None,
                        delivered_at: None,
                        delivered_tx: None,
                        heard_from: None,
                        closing: false,
                        rod_ev: meta.ev,
                        rx: None,
                        last_activity: now,
                        close_requested: false,
                        nacked: false,
                        scheduled: false,
                        holds: 0,
                        probe: None,
                        rcvd: RcvdBytesTracker::new(),
                        tail: TailProbe::default(),
                        rtt: crate::rto::RttEstimator::default(),
                        pending: true,
                        created: now,
                        reopens: 0,
                        awaiting_start: false,
                        hold_until: None,
                        timer: Timer::default(),
                    };
                    let mut pdc = pdc;
                    // A SYN authenticated in a security domain opens a
                    // secure PDC, which may have to start elsewhere.
                    let told = meta.sdi.and_then(|d| self.secure_start_for(d, pdc.start));
                    if let Some(base) = told {
                        pdc.start = base;
                        pdc.awaiting_start = true;
                    }
                    let start = pdc.start;
                    pdc.ledger = TxLedger::new(start);
                    self.insert_pdc(id, pdc);
                    self.push_pending(id, now);
                    self.by_peer.insert((meta.src, spdcid), id);
                    self.counters.pdcs_opened += 1;
                    self.events.push_back(PdsEvent::PdcOpened {
                        pdc: id,
                        peer: meta.src,
                        initiator: false,
                    });
                    if let Some(base) = told {
                        self.counters.drop(DropReason::NewStartPsn);
                        let code = NackCode::NewStartPsn;
                        self.nack(meta, code, psn, Some(id), Some(spdcid), base.0);
                        return None;
                    }
                    id
                }
            },
        };
        let p = self.pdcs.get_mut(&id)?;
        if p.mode != mode {
            self.counters.drop(DropReason::ModeMismatch);
            let pid = p.id;
            self.nack(
                meta,
                NackCode::PdcModeMismatch,
                psn,
                Some(pid),
                Some(spdcid),
                0,
            );
            return None;
        }
        if p.peer_id.is_none() {
            p.peer_id = Some(spdcid);
            self.by_peer.insert((meta.src, spdcid), id);
        }
        p.last_activity = now;
        Some(id)
    }

    /// The Start_PSN a new secure PDC of domain `sdi` must take instead of
    /// `syn_start`, if not that one (§2.12): RANDOM_1RTT_START names a new
    /// one every time; EXPECTED_0RTT_START refuses a Start_PSN below the
    /// domain's floor (a replayed SYN of an earlier PDC) and names the
    /// floor.
    fn secure_start_for(&mut self, sdi: Sdi, syn_start: Psn) -> Option<Psn> {
        match self.config.secure_start {
            SecureStart::Random1Rtt => Some(self.random_start()),
            SecureStart::Expected0Rtt => match self.secure.floor.get(&sdi) {
                Some(f) if syn_start.is_before(*f) => Some(*f),
                Some(_) => None,
                // A domain past the table's bound keeps no floor: its PDCs
                // start in one round trip instead.
                None if self.secure.floor.len() >= SecureState::MAX_DOMAINS => {
                    Some(self.random_start())
                }
                None => None,
            },
        }
    }

    /// Makes sure the PDC has its receive half; validates SYN start PSNs.
    #[inline]
    pub(super) fn receive_state(
        p: &mut Pdc,
        dpdcid: DpdcidField,
        psn: Psn,
        range: u32,
    ) -> Result<&mut ReceiveState, NackCode> {
        let syn_start = match dpdcid {
            DpdcidField::Syn { psn_offset, .. } => Some(psn.sub(u32::from(psn_offset.get()))),
            DpdcidField::Dpdcid(_) => None,
        };
        if p.rx.is_none() {
            let start = match syn_start {
                Some(s) => s,
                // Return-direction traffic on our own PDC starts at our
                // Start_PSN (the target mirrors it).
                None if p.initiator => p.start,
                // A non-SYN packet for a direction we never saw open.
                None => return Err(NackCode::PdcHdrMismatch),
            };
            p.rx = Some(ReceiveState::new(start, range));
        }
        let rx = p.rx.as_mut().ok_or(NackCode::PdcHdrMismatch)?;
        if let Some(start) = syn_start
            && start != rx.start
        {
            return Err(NackCode::InvalidSyn);
        }
        Ok(rx)
    }

    pub(super) fn on_request(
        &mut self,
        now: Instant,
        meta: &RxMeta,
        r: &PdsRequestRepr,
        ses: Option<RxSes<'_>>,
        payload: &[u8],
        upper: &mut impl SesHooks,
    ) {
        let Some(id) = self.lookup_for_rx(now, meta, r.spdcid, r.dpdcid, r.psn, r.mode) else {
            return;
        };
        let range = self.config.mp_range;
        let trigger_bytes = self.config.ack_gen_trigger;
        let min_add = self.config.ack_gen_min_pkt_add;
        let Some(mut p) = self.pdcs.get_mut(&id) else {
            return;
        };
        // A provisional RCCC key (a CREDIT_REQ came first) that this
        // *_CC_REQ contradicts is given up; the one it names is taken below.
        if let Some(cc) = r.cc
            && let Some(rx) = p.rx.as_mut()
            && rx.rccc_provisional
            && let Some(old) = rx.rccc.filter(|&k| k != (meta.src, cc.ccc_id.get()))
        {
            rx.rccc = None;
            rx.rccc_provisional = false;
            self.release_rccc(now, id, old);
            let Some(q) = self.pdcs.get_mut(&id) else {
                return;
            };
            p = q;
        }
        let (local, peer) = (p.id, p.peer_id);
        let target_closing = p.closing && !p.initiator;
        let rx = match Self::receive_state(p, r.dpdcid, r.psn, range) {
            Ok(rx) => rx,
            Err(code) => {
                self.counters.drop(if code == NackCode::InvalidSyn {
                    DropReason::InvalidSyn
                } else {
                    DropReason::UnknownPdc
                });
                self.nack(meta, code, r.psn, Some(local), peer, 0);
                return;
            }
        };
        if target_closing {
            self.counters.drop(DropReason::Closing);
            self.nack(meta, NackCode::Closing, r.psn, Some(local), peer, 0);
            return;
        }
        // CLEAR_PSN rides on every request (§3).
        rx.clear_to(r.clear_psn());
        // RCCC (§5.3): a *_CC_REQ names its source CCC and advertises its
        // backlog; last-hop trims are RCCC's signal too.
        // A PDC carries one traffic class, so one source CCC: the first
        // *_CC_REQ names it, and a later one naming another `ccc_id` is a
        // peer violation whose CC state is ignored (the data is still
        // delivered). This keeps the RCCC receiver's table within one
        // entry per PDC, and every entry goes with its PDCs.
        let rccc_key = r.cc.map(|cc| (meta.src, cc.ccc_id.get()));
        if let Some(key) = rccc_key
            && rx.rccc.is_some_and(|k| k != key)
        {
            self.counters.drop(DropReason::CccMismatch);
        } else if let (Some(cc), Some(key), Some(rr)) = (r.cc, rccc_key, self.rccc_rx.as_mut()) {
            // Trimmed before the last hop: NSCC's signal, not RCCC's (§7);
            // the receiver only updates the demand from it.
            let (bytes, last_hop) = match meta.trimmed {
                None => (u64::from(meta.nominal_size), false),
                Some(Trim::LastHop) => (u64::from(meta.nominal_size), true),
                Some(Trim::Trimmed) => (0, false),
            };
            // A first transmission with SYN set left before the source heard
            // anything from us: speculative, on its initial window (seed:
            // SYN stays set until the first ACK_CC). Its bytes count against
            // the sender's share (`RcccReceiver`, "Fair share").
            //
            // A retransmission settles its original's credit as well as its
            // own, unless the original was speculative: that one took no
            // counted credit, and settling it too took the sender's balance
            // below zero, so the pacer granted that much beyond its bound on
            // outstanding credit. On the veth lab, where a few speculative
            // first windows are lost in every incast, the bound came loose
            // by up to a BDP per sender, and paced bursts overflowed the
            // buffer long after the first round trip \[I\].
            if !r.retx {
                rx.note_first_tx(r.psn, r.syn());
            }
            let arrival = if r.retx && !rx.sent_unheard(r.psn) {
                Arrival::Retransmission
            } else if r.retx {
                Arrival::Paced
            } else if r.syn() {
                Arrival::Speculative
            } else {
                Arrival::Paced
            };
            rr.on_data(now, key, cc.credit_target, bytes, last_hop, arrival);
            if meta.trimmed.is_none() {
                rr.on_ecn(meta.ecn == Ecn::Ce);
            }
            let e = self.rccc_pdc.entry(key).or_insert((local, 0));
            e.0 = local;
            if rx.rccc.is_none() {
                rx.rccc = Some(key);
                e.1 += 1;
            }
            rx.rccc_provisional = false;
        }
        if let Some(t) = meta.trimmed {
            // §7: NACK the trimmed packet so it is resent at once.
            self.counters.drop(DropReason::Trimmed);
            let code = match t {
                Trim::Trimmed => NackCode::Trimmed,
                Trim::LastHop => NackCode::TrimmedLastHop,
            };
            self.nack(meta, code, r.psn, Some(local), peer, 0);
            return;
        }
        let outcome = match r.mode {
            ReliableMode::Rud => rx.win.classify(r.psn),
            ReliableMode::Rod => {
                let c = rx.win.classify(r.psn);
                if c == RxOutcome::New && r.psn != rx.win.base() {
                    // Go-back-N: out-of-order ROD packets are dropped; one
                    // NACK per gap names the expected PSN (§3).
                    self.counters.drop(DropReason::RodOutOfOrder);
                    if !rx.rod_nacked {
                        rx.rod_nacked = true;
                        let expected = rx.win.base();
                        self.nack(meta, NackCode::RodOoo, r.psn, Some(local), peer, expected.0);
                    }
                    return;
                }
                c
            }
        };
        match outcome {
            RxOutcome::Beyond => {
                self.counters.drop(DropReason::OutOfWindow);
                let code = if r.syn() {
                    NackCode::InvalidSyn
                } else {
                    NackCode::PsnOorWindow
                };
                self.nack(meta, code, r.psn, Some(local), peer, 0);
                return;
            }
            RxOutcome::Stale => {
                self.counters.drop(DropReason::Stale);
                return;
            }
            RxOutcome::Duplicate => {
                // Re-send the stored guaranteed response, or ACK with the
                // default response (§3).
                self.counters.drop(DropReason::Duplicate);
                let resp = rx.gtd.get(&r.psn.0).copied().unwrap_or(SesResponseRepr {
                    list: ListKind::Expected,
                    opcode: ResponseOpcode::DefaultResponse,
                    return_code: ReturnCode::Null,
                    message_id: MessageId::from_masked(0),
                    ri_generation: RiGeneration::from_masked(0),
                    job_id: JobId::from_masked(0),
                    modified_length: 0,
                });
                rx.responses.push_back((r.psn, resp));
                rx.trigger = r.psn;
                rx.ev = meta.ev;
                rx.retx = r.retx;
                rx.due = AckDue::Now;
                self.acks.push_back(id);
                return;
            }
            RxOutcome::New => {}
        }
        let mode = match r.mode {
            ReliableMode::Rud => DeliveryMode::Rud,
            ReliableMode::Rod => DeliveryMode::Rod,
        };
        let req = RxRequest {
            pdc: Some(local),
            peer: meta.src,
            psn: r.psn,
            mode,
            ses,
            payload,
        };
        // The layer above sees the packet before its PSN is recorded, so a
        // packet it cannot take (no message state) stays unreceived and the
        // initiator resends it after the NACK.
        let reply = upper.on_request(now, &req);
        if let Reply::Reject(code) = reply {
            self.counters.drop(DropReason::Refused);
            self.nack(meta, code, r.psn, Some(local), peer, 0);
            return;
        }
        // (`upper` cannot reach the PDC: its receive half is still `rx`.)
        rx.win.receive(r.psn);
        rx.rod_nacked = false;
        rx.rcvd_bytes += u64::from(meta.nominal_size);
        if rx.win.has_gap() {
            rx.ooo_count = rx.ooo_count.saturating_add(1);
        }
        self.counters.rx_data += 1;
        rx.ev = meta.ev;
        rx.trigger = r.psn;
        // The service time the ACK reports runs from the packet's arrival
        // (`RxMeta::arrived`): a wait for this host to read it is the
        // destination's, not the fabric's.
        rx.trigger_at = meta.arrived.map_or(now, |t| t.min(now));
        rx.retx = r.retx;
        let ce = meta.ecn == Ecn::Ce;
        self.counters.rx_ce += u64::from(ce);
        rx.ecn |= ce;
        rx.ack_bytes = rx
            .ack_bytes
            .saturating_add((payload.len() as u32).max(min_add));
        let mut now_ack =
            r.ar || r.syn() || ce || rx.win.has_gap() || rx.ack_bytes >= trigger_bytes;
        if let Reply::Response {
            response,
            guaranteed,
        } = reply
        {
            if guaranteed {
                rx.gtd.insert(r.psn.0, response);
            }
            rx.responses.push_back((r.psn, response));
            now_ack = true;
        }
        if now_ack {
            if rx.due != AckDue::Now {
                rx.due = AckDue::Now;
                self.acks.push_back(id);
            }
        } else if rx.due == AckDue::No {
            rx.due = AckDue::At(now + self.config.ack_delay);
        }
    }

    pub(super) fn on_ack(
        &mut self,
        now: Instant,
        meta: &RxMeta,
        a: &PdsAckRepr,
        ses: Option<&SesRepr>,
        data: &[u8],
        upper: &mut impl SesHooks,
    ) {
        let Some(id) = a.dpdcid else {
            self.counters.drop(DropReason::StrayFeedback);
            return;
        };
        let Some(p) = self.pdcs.get_mut(&id) else {
            self.counters.drop(DropReason::StrayFeedback);
            return;
        };
        if p.peer != meta.src {
            self.counters.drop(DropReason::StrayFeedback);
            return;
        }
        if p.sdi != meta.sdi {
            self.counters.drop(DropReason::WrongDomain);
            return;
        }
        self.counters.rx_acks += 1;
        p.last_activity = now;
        p.note_heard();
        if p.pending && a.spdcid == p.peer_id {
            // Return traffic acknowledged by the initiator's PDC.
            p.pending = false;
            self.pending_count -= 1;
        }
        let establishing = !p.established;
        if !p.established
            && let Some(sp) = a.spdcid
        {
            if p.peer_id.is_none() {
                p.peer_id = Some(sp);
                self.by_peer.insert((p.peer, sp), id);
            }
            p.established = true;
            p.reopens = 0;
            if p.initiator {
                self.events.push_back(PdsEvent::PdcEstablished { pdc: id });
            }
        }
        let mut tail_answer = None;
        if let PdsAckPsnField::ProbeOpaque(o) = a.ack_psn_offset {
            if let Some((want, sent)) = p.probe
                && want == o
            {
                p.probe = None;
                self.events.push_back(PdsEvent::ProbeAnswered {
                    pdc: id,
                    rtt: now - sent,
                });
            }
            tail_answer = p.tail.answered(now, o);
        }
        let cack = a.cack_psn;
        // An ACK for PSNs never sent is a peer violation: drop it whole.
        if cack.diff(p.ledger.next_psn()) >= 0 || cack.diff(p.ledger.una()) < -(1 << 30) {
            self.counters.drop(DropReason::BogusAck);
            return;
        }
        let mut acked_bytes = 0u64;
        let mut acked_pkts = 0u32;
        // Of those, packets that were waiting for retransmission (`CcShare`).
        let mut cancelled_bytes = 0u64;
        let mut cancelled_pkts = 0u32;
        let mut tx_time: Option<Instant> = None;
        // Send time of the most recently sent packet this ACK delivered.
        let mut newest_delivered: Option<Instant> = None;
        // The latest transmission acknowledged (`Pdc::delivered_tx`).
        let mut newest_tx: Option<u32> = None;
        // Send time of the newest packet this ACK delivered whose copy is
        // known: the RTT sample and RACK's reference. A packet sent once,
        // or, on the ACK that establishes the PDC, its trigger resent once
        // when the ACK says it answers a retransmission (`calc_rtt`'s rule,
        // §5.2). That recovers a window lost whole before the PDC was
        // established: the RTO resends its first packet, and the answer
        // condemns the rest at once instead of one RTO each.
        // Any other resent packet may have arrived by either copy: taking
        // its resend as delivered when a delayed first copy was what
        // arrived condemns everything sent in between, and each false loss
        // is a new resend that can condemn more. For the same reason a
        // known resend is evidence only once per PDC: on reordering links
        // it would otherwise condemn packets that are merely delayed.
        let mut rtt_from: Option<Instant> = None;
        let trigger = if establishing && a.retx {
            a.ack_psn()
        } else {
            None
        };
        let mut note_tx = |e: &TxEntry<TxItem>| {
            if e.rtx_count == 0 || (e.rtx_count == 1 && trigger == Some(e.psn)) {
                rtt_from = Some(rtt_from.map_or(e.sent_at, |t| t.max(e.sent_at)));
            }
        };
        // EVs of the packets this ACK newly acknowledges (§6 feedback).
        let mut good_evs = core::mem::take(&mut self.scratch_evs);
        good_evs.clear();
        let mut rtx_count = 0;
        let cfg = &self.config;
        let mut closed = false;
        // The SES response, if any, answers ack_psn (§2.6); whether to
        // CLEAR is decided from `req` below.
        if let Some(resp) = ses
            && let Some(ack_psn) = a.ack_psn()
            && let Some(e) = p.ledger.get_mut(ack_psn)
            && let TxItem::Data(pkt) = e.token
        {
            upper.on_response(now, pkt, resp, data);
            if !e.sacked {
                newest_tx = later_tx(newest_tx, e.tx_seq);
                note_tx(e);
                if let CcShare::Rtx(b) = CcShare::of(cfg, e) {
                    cancelled_bytes += b;
                    cancelled_pkts += 1;
                }
                e.sacked = true;
                e.needs_rtx = false;
                e.rto_forced = false;
                acked_bytes += u64::from(cfg.nominal(pkt.len));
                acked_pkts += 1;
                tx_time = Some(e.sent_at);
                rtx_count = e.rtx_count;
                upper.on_acked(now, pkt);
            }
        }
        if let PdsAckExt::Cc(cc) = a.ext {
            let base = cack.offset(cc.sack_psn_offset);
            p.ledger.ack_selective(base, cc.sack_bitmap, |e| {
                newest_delivered = Some(newest_delivered.map_or(e.sent_at, |t| t.max(e.sent_at)));
                newest_tx = later_tx(newest_tx, e.tx_seq);
                note_tx(e);
                good_evs.push(e.ev);
                if let CcShare::Rtx(b) = CcShare::of(cfg, e) {
                    cancelled_bytes += b;
                    cancelled_pkts += 1;
                }
                if let TxItem::Data(pkt) = e.token {
                    acked_bytes += u64::from(cfg.nominal(pkt.len));
                    acked_pkts += 1;
                    tx_time = Some(e.sent_at);
                    rtx_count = e.rtx_count;
                    upper.on_acked(now, pkt);
                }
            });
        }
        let mut acked = core::mem::take(&mut self.scratch_acked);
        acked.clear();
        let una_moved = p.ledger.ack_cumulative(cack, |e| match e.token {
            TxItem::Data(pkt) => {
                if let CcShare::Rtx(b) = CcShare::of(cfg, e) {
                    cancelled_bytes += b;
                    cancelled_pkts += 1;
                }
                if !e.sacked {
                    note_tx(e);
                    good_evs.push(e.ev);
                    newest_tx = later_tx(newest_tx, e.tx_seq);
                    newest_delivered =
                        Some(newest_delivered.map_or(e.sent_at, |t| t.max(e.sent_at)));
                    acked_bytes += u64::from(cfg.nominal(pkt.len));
                    acked_pkts += 1;
                    tx_time = Some(e.sent_at);
                    rtx_count = e.rtx_count;
                    acked.push(pkt);
                }
            }
            TxItem::Close => closed = true,
        });
        if !acked.is_empty() {
            upper.on_acked_all(now, &acked);
        }
        self.scratch_acked = acked;
        if let Some(t) = rtt_from {
            p.ledger.note_delivered_once(t);
            p.tail.on_delivery(now, t);
            p.rtt.on_sample(now, now - t);
        }
        if newest_delivered.is_some() {
            p.tail.on_progress(now);
        }
        if acked_pkts > 0 {
            p.delivered_at = Some(now);
        }
        if let Some(t) = newest_tx {
            p.delivered_tx = later_tx(p.delivered_tx, t);
        }
        let mut inferred = core::mem::take(&mut self.scratch_lost);
        inferred.clear();
        let evidence = newest_delivered.max(tail_answer.map(|t| t.sent_at));
        let probe_lost = Self::infer_losses(cfg, p, a, evidence, tail_answer, &mut inferred);
        if tail_answer.is_some() {
            p.tail.found(!inferred.is_empty());
        }
        if probe_lost > 0 && acked_pkts == 0 {
            Self::note_unheard_loss(now, p, self.rccc_source);
        }
        self.counters.tail_probe_lost += probe_lost;
        if !inferred.is_empty() {
            self.counters.sack_inferred += inferred.len() as u64;
        }
        match a.req {
            PdsAckRequest::Clear => {
                p.clear_needed = p.clear_sent.is_none_or(|c| p.clear_psn().is_after(c));
            }
            PdsAckRequest::Close => p.close_requested = true,
            _ => {}
        }
        // The PSN window moved: queued data it held back may go now, even
        // when this ACK delivered nothing new (every packet it covers was
        // SACKed before, the CACK having waited for a CLEAR, §3).
        let reschedule = p.clear_needed || (una_moved && !p.queue.is_empty());
        let ccc_key = p.ccc;
        let ccc_ix = Self::ccc_ix(&self.cccs, p);
        // CC feedback: NSCC state (rcvd_bytes → newly received bytes,
        // service time, DFC) or CREDIT state (RCCC cumulative credit), §2.7.
        let (rcv_pend, restore, newly, service, credit) = match a.ext {
            PdsAckExt::Cc(PdsAckCc {
                state: PdsAckState::Cc(AckCcState::Nscc(n)),
                ..
            }) => (
                n.rcv_cwnd_pend.get(),
                n.rc,
                Some(p.rcvd.advance(n.rcvd_bytes)),
                service_time_from_wire(n.service_time),
                None,
            ),
            PdsAckExt::Cc(PdsAckCc {
                state: PdsAckState::Cc(AckCcState::Credit(c)),
                ..
            }) => (0, false, None, Duration::ZERO, Some(c.credit)),
            _ => (0, false, None, Duration::ZERO, None),
        };
        if reschedule {
            self.schedule(id);
        }
        if !a.m
            && !good_evs.is_empty()
            && let Some(c) = ccc_ix.and_then(|ix| self.cccs.at_mut(ix))
        {
            c.on_evs_good(now, &good_evs);
        }
        if acked_pkts > 0
            && let Some(c) = ccc_ix.and_then(|ix| self.cccs.at_mut(ix))
        {
            let blocked = c.state() == CccState::Active;
            c.on_ack(
                now,
                &AckEvent {
                    acked_bytes,
                    acked_pkts,
                    rtx_cancelled_bytes: cancelled_bytes,
                    rtx_cancelled_pkts: cancelled_pkts,
                    newly_rcvd_bytes: newly,
                    ev: meta.ev,
                    ecn_marked: a.m,
                    tx_time: tx_time.unwrap_or(now),
                    rtx_count,
                    retx: a.retx,
                    service_time: service,
                    rcv_cwnd_pend: rcv_pend,
                    restore_cwnd: restore,
                    credit,
                    arrival: meta.arrived,
                },
            );
            if blocked && c.state() == CccState::Ready {
                // The CCC held data back and may send again (window room,
                // credit on the ACK): every PDC it held, not only this
                // one, which may have nothing left to send. Others that
                // share the CCC were taken off the send round robin when
                // it blocked them.
                self.schedule_ccc(ccc_key);
            } else {
                self.schedule(id);
            }
        } else if let Some(credit) = credit
            && let Some(c) = ccc_ix.and_then(|ix| self.cccs.at_mut(ix))
        {
            // An ACK that acknowledges nothing new (it answers a CLEAR, an
            // ACK request or a probe) still carries the cumulative credit:
            // the target's pacer puts its grants in the ACK a PDC owes, so
            // ignoring it loses the grant, as a lost CREDIT CP would, and
            // the source waits out its credit timeout. On the veth lab a
            // victim writing 64 B through an RCCC incast waited up to
            // 64 credit timeouts, 140-260 ms per write at its p99 [I].
            c.on_credit_update(now, credit);
            self.schedule_ccc(ccc_key);
        }
        if !inferred.is_empty() {
            if let Some(c) = ccc_ix.and_then(|ix| self.cccs.at_mut(ix)) {
                for (bytes, ev) in &inferred {
                    c.on_inferred_loss(now, *bytes, Some(*ev));
                }
            }
            self.schedule(id);
        }
        self.scratch_evs = good_evs;
        self.scratch_lost = inferred;
        if closed {
            // The target's closing ACK of a secure PDC names the Start_PSN
            // the domain's next PDC takes (EXPECTED_0RTT_START, §2.12).
            if let (Some(d), Some(e)) = (self.pdcs.get(&id).and_then(|p| p.sdi), a.expected_psn())
                && self.config.secure_start == SecureStart::Expected0Rtt
            {
                SecureState::raise(&mut self.secure.next_start, d, e);
            }
            self.remove_pdc(now, id, None);
        }
    }

    /// Loss inference (the sender-side OnInferredLoss of §5.1): a packet
    /// is presumed lost and resent at once, instead of waiting for its
    /// RTO, when
    /// * it is `dupthresh` or more PSNs behind the highest delivered one
    ///   (SACK), or
    /// * with `rack_window`, a packet sent once was delivered that left
    ///   at least that long after it (RACK's time rule, RFC 8985), or
    /// * it left before a tail probe (`tail_probe.rs`) whose answer
    ///   does not acknowledge it. This finds what the others cannot:
    ///   the tail of a window lost in a burst, which nothing sent later
    ///   follows while the window's earlier losses are resent first and
    ///   the lost tail still holds the window or the credit.
    ///
    /// Either way it must have been sent before the newest delivered
    /// packet or the probe (by `reorder_window`), so a fresh
    /// retransmission is not marked again.
    ///
    /// Marks the packets of `p` presumed lost on the `evidence` of ACK `a`
    /// (the newest delivery, or the answered tail probe `tail_answer`),
    /// adds each to `inferred` (inflight bytes, EV) and returns how many of
    /// them only the probe condemned.
    #[inline]
    fn infer_losses(
        cfg: &PdsConfig,
        p: &mut Pdc,
        a: &PdsAckRepr,
        evidence: Option<Instant>,
        tail_answer: Option<Outstanding>,
        inferred: &mut Vec<(u64, EntropyValue)>,
    ) -> u64 {
        let cack = a.cack_psn;
        let mut probe_lost = 0;
        if let Some(mut latest) = evidence {
            let reo = cfg.reorder_window;
            let dupthresh = cfg.dupthresh;
            // Highest PSN known delivered (SACKed or cumulatively ACKed).
            let highest = p
                .ledger
                .iter()
                .rev()
                .find(|e| e.sacked)
                .map_or(cack, |e| e.psn);
            // RACK's reference: the newest packet sent once known delivered.
            let once = p.ledger.delivered_once();
            if let Some(at) = once {
                latest = latest.max(at);
            }
            let resent_hi = p.ledger.resent_hi();
            // The answer reports only the PSNs its cumulative ACK and SACK
            // bitmap cover. A PSN past the cumulative ACK and outside the
            // bitmap may well have arrived: the answer says nothing of it,
            // however far behind the highest delivered PSN it lies (a
            // guaranteed response holds the target's CACK back, and the
            // packets of the messages after it arrive meanwhile, §3). Only
            // a 0 bit inside the bitmap tells that a packet had not arrived.
            let Some((lo, hi)) = (match a.ext {
                PdsAckExt::Cc(cc) => {
                    let base = cack.offset(cc.sack_psn_offset);
                    Some((base, base.add(63)))
                }
                _ => None,
            }) else {
                return 0;
            };
            let by_probe = |e: &TxEntry<TxItem>| {
                tail_answer.is_some_and(|t| t.next_tx.wrapping_sub(e.tx_seq) as i32 > 0)
            };
            let rack = cfg.rack_window;
            let by_order = |e: &TxEntry<TxItem>| {
                i64::from(highest.diff(e.psn)) >= i64::from(dupthresh)
                    || rack.zip(once).is_some_and(|(w, at)| e.sent_at + w <= at)
            };
            let behind = |e: &TxEntry<TxItem>| by_order(e) || by_probe(e);
            // Entries sent once have growing PSNs and transmission numbers:
            // past the highest PSN ever resent, the first one not behind
            // ends the search. In the usual case (the bitmap's first
            // unacknowledged entry is not behind and nothing was resent)
            // the ledger is not even borrowed for writing.
            let done =
                |e: &TxEntry<TxItem>| !behind(e) && resent_hi.is_none_or(|h| e.psn.is_after(h));
            let first = if lo.is_after(cack) { lo } else { cack.next() };
            if p.ledger.get(first).is_some_and(|e| !done(e)) {
                for e in p.ledger.range_mut(first, hi) {
                    if done(e) {
                        break;
                    }
                    if e.sacked || !behind(e) {
                        continue;
                    }
                    // A packet never resent was sent no later than any higher
                    // PSN; a resent one must predate the newest delivery, or
                    // its retransmission is still on the way.
                    let old_enough = if e.rtx_count == 0 {
                        e.sent_at + reo <= latest
                    } else {
                        e.sent_at + reo < latest
                    };
                    // Only packets counted in inflight can be declared lost.
                    if old_enough && let CcShare::Inflight(b) = CcShare::of(cfg, e) {
                        if !by_order(e) {
                            probe_lost += 1;
                        }
                        e.needs_rtx = true;
                        inferred.push((b, e.ev));
                    }
                }
            }
        }
        probe_lost
    }

    /// A probe answer that condemns packets of a PDC the target has never
    /// acknowledged any data of (typically the SYN-addressed probe whose
    /// answer establishes it): the whole speculative window was lost, so
    /// the target's RCCC receiver has not heard of this source from a data
    /// packet. Every packet now waits for retransmission, so none has an
    /// RTO running, and the retransmissions wait for credit. The answer
    /// established the PDC, so the CREDIT_REQ that the loss raises can name
    /// it, and the receiver enters the source from it (HTSIM's RTS; see
    /// `on_credit_request_cp`).
    ///
    /// With RCCC nothing is forced here. When every sender of a large
    /// incast loses its whole window, their probes fall due together, and
    /// one packet forced past closed credit by each answer arrived as a
    /// burst at the queue the credit was pacing: at 1 Gb/s 64:1 into
    /// 32 KiB, 14 of them were dropped a round trip after the first windows
    /// had drained. Only a target that cannot place the request (one
    /// without an RCCC receiver, or one that keys senders by data packets
    /// alone) leaves the source waiting; then the first credit request an
    /// RTO_INIT_TIME after this answer forces the oldest packet
    /// ([`Self::force_unheard`]).
    ///
    /// Without RCCC (`rccc` false) there is no credit request to wait for,
    /// and the oldest packet passes closed congestion control at once, as
    /// on an RTO (no packet in flight runs an RTO or a probe any more). A
    /// window-based source usually has room by then (the condemned packets
    /// left its inflight), so this rarely changes what it sends.
    #[inline]
    fn note_unheard_loss(now: Instant, p: &mut Pdc, rccc: bool) {
        if !Self::unheard_window(p) {
            return;
        }
        if !rccc {
            Self::force_oldest_lost(now, p);
        } else if p.unheard_loss_at.is_none() {
            p.unheard_loss_at = Some(now);
        }
    }

    /// Whether the target has acknowledged nothing of `p`'s data and its
    /// window waits for retransmission, none forced yet.
    #[inline]
    pub(super) fn unheard_window(p: &Pdc) -> bool {
        p.ledger.una() == p.start
            && !p.ledger.iter().any(|e| e.sacked || e.rto_forced)
            && p.ledger.iter().any(|e| e.needs_rtx)
    }

    /// The fallback of [`Self::note_unheard_loss`], as a credit request
    /// leaves for `p`'s CCC: if an RTO_INIT_TIME has passed since the
    /// window was found lost (or since the last packet forced this way)
    /// and no credit has let a packet go, the oldest lost packet passes
    /// closed congestion control; its CC header enters the source in any
    /// RCCC receiver, and the rest follow on the credit it earns. Returns
    /// whether it forced one.
    pub(super) fn force_unheard(cfg: &PdsConfig, now: Instant, p: &mut Pdc) -> bool {
        let Some(t) = p.unheard_loss_at else {
            return false;
        };
        if !Self::unheard_window(p) {
            p.unheard_loss_at = None;
            return false;
        }
        if now < t + p.rto(cfg, 0) || !Self::force_oldest_lost(now, p) {
            return false;
        }
        p.unheard_loss_at = Some(now);
        true
    }

    /// Lets the oldest packet marked for retransmission pass closed
    /// congestion control, as an RTO does; false if none is marked.
    #[inline]
    fn force_oldest_lost(now: Instant, p: &mut Pdc) -> bool {
        let Some(e) = p.ledger.iter_mut().find(|e| e.needs_rtx) else {
            return false;
        };
        e.rto_forced = true;
        p.forced_at = Some(now);
        true
    }

    /// The RCCC sender a CREDIT_REQ on PDC `id` speaks for. A PDC that has
    /// carried a *_CC_REQ names it. One that has not — its source lost its
    /// whole speculative window, and a probe's answer established it — is
    /// entered now, as `ccc_id` 0 until a *_CC_REQ says otherwise
    /// (`ReceiveState::rccc_provisional`): the request is the source's way
    /// into the active table (HTSIM's RTS), and without it the source could
    /// only force a packet past closed credit to be heard.
    fn rccc_key_for_request(&mut self, id: PdcId, meta: &RxMeta) -> Option<(IpAddr, u8)> {
        let p = self
            .pdcs
            .get_mut(&id)
            .filter(|p| p.peer == meta.src && p.sdi == meta.sdi)?;
        let rx = p.rx.as_mut()?;
        if rx.rccc.is_none() && self.rccc_rx.is_some() {
            let key = (meta.src, 0);
            rx.rccc = Some(key);
            rx.rccc_provisional = true;
            let e = self.rccc_pdc.entry(key).or_insert((id, 0));
            e.0 = id;
            e.1 += 1;
        }
        rx.rccc
    }

    pub(super) fn on_nack(
        &mut self,
        now: Instant,
        meta: &RxMeta,
        n: &PdsNackRepr,
        upper: &mut impl SesHooks,
    ) {
        self.counters.rx_nacks += 1;
        self.counters.rx_nack_codes.count(n.code.code());
        if let NackTarget::PktId(pid) = n.target {
            let max = self.config.max_nack_retx;
            let action = n.code.sender_action();
            let Some(tx) = self
                .rudi
                .inflight
                .get_mut(&pid)
                .filter(|t| t.dst == meta.src)
            else {
                self.counters.drop(DropReason::StrayFeedback);
                return;
            };
            if action == NackAction::Retransmit && tx.rtx_count < max {
                tx.due = true;
            } else if action != NackAction::Drop
                && let Some(tx) = self.rudi.inflight.remove(&pid)
            {
                upper.on_failed(now, tx.pkt, PdsError::Nack(n.code));
            }
            return;
        }
        let (Some(id), NackTarget::Psn(psn)) = (n.dpdcid, n.target) else {
            self.counters.drop(DropReason::StrayFeedback);
            return;
        };
        let max_nack = self.config.max_nack_retx;
        let Some(p) = self.pdcs.get_mut(&id) else {
            self.counters.drop(DropReason::StrayFeedback);
            return;
        };
        if p.peer != meta.src {
            self.counters.drop(DropReason::StrayFeedback);
            return;
        }
        if p.sdi != meta.sdi {
            self.counters.drop(DropReason::WrongDomain);
            return;
        }
        // A NACK names a packet this PDC sent and has not seen acknowledged
        // (`nack_psn` is the PSN that triggered it, §2.8; a Probe CP takes
        // the next PSN, §2.10), and comes from the peer's PDC once we know
        // it. Anything else is a blind or stale sender: acting on it would
        // let anyone who knows our address close or stall our PDCs, so it
        // is a counted drop — the check TCP makes of a RST's sequence
        // number (RFC 5961 §3).
        if psn.diff(p.ledger.una()) < 0
            || psn.diff(p.ledger.next_psn()) > 0
            || n.spdcid
                .is_some_and(|sp| p.peer_id.is_some_and(|x| x != sp))
        {
            self.counters.drop(DropReason::Unverified);
            return;
        }
        // The target of a secure PDC names the Start_PSN to use (§2.12):
        // start again from it, once per Start_PSN named, before anything
        // was acknowledged (an established PDC's start is settled).
        if n.code == NackCode::NewStartPsn && p.sdi.is_some() {
            let start = Psn(n.payload);
            if !p.initiator || p.established || start == p.start {
                return;
            }
            if p.reopens >= MAX_REOPENS {
                self.fail_pdc(now, id, PdsError::Nack(n.code), upper);
            } else {
                self.reopen(now, id, n.code, Some(start), upper);
            }
            return;
        }
        p.last_activity = now;
        p.nacked = true;
        p.note_heard();
        let key = p.ccc;
        match n.code.sender_action() {
            NackAction::Retransmit | NackAction::ReDrive => {
                let mut lost = Vec::new();
                let mut marked = false;
                let mut exhausted = false;
                if n.code == NackCode::RodOoo {
                    // Go back to the expected PSN the target names.
                    let from = Psn(n.payload);
                    for e in p.ledger.iter_mut() {
                        if !e.psn.is_before(from) && !e.sacked && !e.needs_rtx {
                            if let CcShare::Inflight(b) = CcShare::of(&self.config, e) {
                                lost.push((b, e.ev, e.sent_at, e.rtx_count));
                            }
                            e.needs_rtx = true;
                            marked = true;
                        }
                    }
                } else if let Some(e) = p.ledger.get_mut(psn)
                    && !e.sacked
                    && !e.needs_rtx
                {
                    // Trim NACKs do not count against Max_NACK_Retx_Cnt
                    // [I]: a trimmed packet reached the destination's last
                    // switches, so repeated trims are congestion (the CMS's
                    // job), not a broken path; the RTO budget still bounds
                    // dead paths. The spec's counter default is a gap (§10).
                    if !matches!(n.code, NackCode::Trimmed | NackCode::TrimmedLastHop) {
                        e.nack_count += 1;
                    }
                    exhausted = e.nack_count > max_nack;
                    if let CcShare::Inflight(b) = CcShare::of(&self.config, e) {
                        lost.push((b, e.ev, e.sent_at, e.rtx_count));
                    }
                    e.needs_rtx = true;
                    marked = true;
                }
                if exhausted {
                    self.fail_pdc(now, id, PdsError::Nack(n.code), upper);
                    return;
                }
                // The peer lacked a resource (a PDC, message state, a
                // buffer): the same packet sent at once meets the same
                // shortage, and a NACK/resend storm follows. Resend after
                // RTO_INIT_TIME, doubling with each refusal of the packet
                // up to 64 × (§3 "Loss recovery" backoff), so
                // Max_NACK_Retx_Cnt refusals span seconds, not
                // milliseconds.
                if marked && n.code.is_resource_shortage() {
                    let refusals = p.ledger.get(psn).map_or(1, |e| e.nack_count.max(1));
                    let until = now + self.config.rto((refusals - 1).min(6));
                    p.hold_until = Some(p.hold_until.map_or(until, |h| h.max(until)));
                    self.counters.nack_backoffs += 1;
                }
                // A window the target NACKed before it established the
                // PDC: the retransmissions wait for credit, and the credit
                // requests are addressed as SYN packets are, by {source,
                // SPDCID}. A target that has forgotten that PDC since (an
                // unconfirmed PDC it reaped) drops them, and no packet is
                // in flight to time out, so after RTO_INIT_TIME of
                // unanswered requests the oldest packet is forced
                // (`force_unheard`).
                if marked
                    && self.rccc_source
                    && !p.established
                    && p.unheard_loss_at.is_none()
                    && Self::unheard_window(p)
                {
                    p.unheard_loss_at = Some(now);
                }
                if marked {
                    self.schedule(id);
                }
                if let Some(c) = self.cccs.get_mut(&key) {
                    for (bytes, ev, tx_time, rtx_count) in lost {
                        c.on_nack(
                            now,
                            &NackEvent {
                                bytes,
                                ev,
                                ecn_marked: n.m,
                                trimmed: n.code == NackCode::Trimmed,
                                trimmed_last_hop: n.code == NackCode::TrimmedLastHop,
                                tx_time,
                                rtx_count,
                                retx: n.retx,
                            },
                        );
                    }
                }
            }
            // The peer does not know the PDC (it restarted, or forgot an
            // unconfirmed PDC): open it afresh and send again what it never
            // had (`reopen`).
            NackAction::Close
                if n.code == NackCode::InvDpdcid && p.initiator && p.reopens < MAX_REOPENS =>
            {
                self.reopen(now, id, n.code, None, upper);
            }
            NackAction::Close => self.fail_pdc(now, id, PdsError::Nack(n.code), upper),
            NackAction::Drop => {}
        }
    }

    pub(super) fn on_cp(
        &mut self,
        now: Instant,
        meta: &RxMeta,
        c: &PdsCpRepr,
        upper: &mut impl SesHooks,
    ) {
        let _ = upper;
        match c.payload {
            CpPayload::Close
            | CpPayload::Noop
            | CpPayload::AckReq { .. }
            | CpPayload::Clear { .. }
            | CpPayload::Probe { .. } => {}
            CpPayload::CloseReq => {
                // Only the PDC's peer may ask it to close (§2.12): from its
                // address and its PDC.
                match c.dpdcid {
                    DpdcidField::Dpdcid(Some(id)) => match self.pdcs.get_mut(&id) {
                        Some(p)
                            if p.peer == meta.src
                                && p.sdi == meta.sdi
                                && p.peer_id.is_some()
                                && c.spdcid == p.peer_id =>
                        {
                            p.close_requested = true;
                            p.last_activity = now;
                        }
                        Some(_) => self.counters.drop(DropReason::Unverified),
                        None => self.counters.drop(DropReason::StrayFeedback),
                    },
                    _ => self.counters.drop(DropReason::Malformed),
                }
                return;
            }
            // Source side: cumulative credit from the target (§5.3).
            CpPayload::Credit { credit } => {
                let key = match c.dpdcid {
                    DpdcidField::Dpdcid(Some(id)) => self
                        .pdcs
                        .get(&id)
                        .filter(|p| p.peer == meta.src && p.sdi == meta.sdi)
                        .map(|p| p.ccc),
                    _ => None,
                };
                match key.and_then(|k| self.cccs.get_mut(&k).map(|c| (k, c))) {
                    Some((k, ccc)) => {
                        ccc.on_credit_update(now, Credit24::from_masked(credit));
                        self.schedule_ccc(k);
                    }
                    None => self.counters.drop(DropReason::StrayFeedback),
                }
                return;
            }
            // Target side: a source asks for credit (its credit timeout).
            CpPayload::CreditReq { target_credit } => {
                let id = match (c.dpdcid, c.spdcid) {
                    // A PDC we do not know (forgotten after its idle
                    // timeout while the source still held it open): the
                    // source is told, as for any packet of a PDC we do not
                    // know, and opens it afresh. Otherwise a source whose
                    // credit ran out could only ever ask again.
                    (DpdcidField::Dpdcid(Some(id)), Some(sp))
                        if self.pdcs.get(&id).is_none_or(|p| p.peer != meta.src) =>
                    {
                        self.counters.drop(DropReason::UnknownPdc);
                        self.nack(meta, NackCode::InvDpdcid, c.psn, None, Some(sp), 0);
                        return;
                    }
                    (DpdcidField::Dpdcid(Some(id)), _) => Some(id),
                    // From a PDC not yet established: by {source, SPDCID}.
                    (DpdcidField::Syn { .. }, Some(sp)) => {
                        self.by_peer.get(&(meta.src, sp)).copied()
                    }
                    _ => None,
                };
                // A source asking for credit holds the PDC open with data
                // to send: it is as active as one whose data flows, and
                // must not be asked to close or forgotten as idle while
                // the pacer serves others (`idle_close`). Reaped, its
                // next request would draw INV_DPDCID, and reopening fails
                // the messages it had partly delivered.
                if let Some(p) = id.and_then(|id| self.pdcs.get_mut(&id))
                    && p.peer == meta.src
                    && p.sdi == meta.sdi
                    && p.peer_id.is_none_or(|x| c.spdcid == Some(x))
                {
                    p.last_activity = now;
                }
                let key = id.and_then(|id| self.rccc_key_for_request(id, meta));
                match (key, self.rccc_rx.as_mut()) {
                    (Some(k), Some(rr)) => {
                        rr.on_credit_request(now, k, Credit24::from_masked(target_credit));
                    }
                    _ => self.counters.drop(DropReason::StrayFeedback),
                }
                return;
            }
            _ => {
                self.counters.drop(DropReason::Unexpected);
                return;
            }
        }
        let Some(id) = self.lookup_for_rx(now, meta, c.spdcid, c.dpdcid, c.psn, c.mode) else {
            return;
        };
        let range = self.config.mp_range;
        let Some(p) = self.pdcs.get_mut(&id) else {
            return;
        };
        let (local, peer) = (p.id, p.peer_id);
        let unacked_return = !p.ledger.is_empty();
        let closing = p.closing;
        let rx = match Self::receive_state(p, c.dpdcid, c.psn, range) {
            Ok(rx) => rx,
            Err(code) => {
                self.counters.drop(DropReason::UnknownPdc);
                self.nack(meta, code, c.psn, Some(local), peer, 0);
                return;
            }
        };
        match c.payload {
            CpPayload::Clear { clear_psn } => {
                rx.clear_to(clear_psn);
                rx.trigger = rx.win.cack();
                rx.due = AckDue::Now;
                self.acks.push_back(id);
            }
            CpPayload::AckReq { .. } => {
                if rx.win.contains(c.psn) {
                    rx.trigger = c.psn;
                    if let Some(r) = rx.gtd.get(&c.psn.0) {
                        rx.responses.push_back((c.psn, *r));
                    }
                    rx.ev = meta.ev;
                    rx.due = AckDue::Now;
                    self.acks.push_back(id);
                } else {
                    self.nack(meta, NackCode::PktNotRcvd, c.psn, Some(local), peer, 0);
                }
            }
            CpPayload::Probe { probe_opaque, .. } => {
                rx.probe = Some(probe_opaque);
                rx.ev = meta.ev;
                rx.due = AckDue::Now;
                self.acks.push_back(id);
            }
            CpPayload::Close => {
                // The initiator sends CLOSE only once everything before it
                // is acknowledged (§2.12), so its PSN is the next one
                // expected — or, resent because our ACK was lost, the one
                // before it once we are closing. Any other PSN comes from a
                // blind or stale sender (a RST outside the window, RFC 5961
                // §3): a counted drop, the PDC untouched.
                let expected = rx.win.base();
                if c.psn != expected && !(closing && c.psn == expected.sub(1)) {
                    self.counters.drop(DropReason::Unverified);
                    return;
                }
                // Every forward PSN up to the CLOSE counts as cleared
                // (§2.12); a target with unacknowledged return traffic
                // answers CLOSING_IN_ERR.
                if unacked_return {
                    self.nack(meta, NackCode::ClosingInErr, c.psn, Some(local), peer, 0);
                    return;
                }
                rx.win.advance_to(c.psn.next());
                rx.gtd.clear();
                rx.trigger = c.psn;
                rx.ev = meta.ev;
                rx.due = AckDue::Now;
                p.closing = true;
                self.acks.push_back(id);
            }
            _ => {
                if c.ar {
                    rx.trigger = rx.win.cack();
                    rx.due = AckDue::Now;
                    self.acks.push_back(id);
                }
            }
        }
    }
}

/// The later of transmission `b` and the transmission `a`, if any.
fn later_tx(a: Option<u32>, b: u32) -> Option<u32> {
    match a {
        Some(a) if crate::tx_ledger::tx_after(a, b) => Some(a),
        _ => Some(b),
    }
}
