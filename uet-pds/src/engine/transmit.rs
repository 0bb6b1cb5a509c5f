//! The transmit path: what leaves next, and writing it.

use super::congestion::CcShare;
use super::pdc::{AckDue, Pdc, TxItem};
use super::{CONTROL_EV, Pds, PktRef, SesHooks, Transmit};
use std::net::IpAddr;

use uet_cms::nscc::service_time_to_wire;
use uet_wire::pds::tss::Sdi;
use uet_wire::pds::{
    AckCcState, CpPayload, CreditState, CwndPenalty, DpdcidField, NextHeader, NsccState, PdcInfo,
    PdsAckCc, PdsAckExt, PdsAckPsnField, PdsAckRepr, PdsAckRequest, PdsAckState, PdsCcFlags,
    PdsCpRepr, PdsNackRepr, PdsRepr, PdsRequestRepr, PdsRudiRepr, PdsUudRepr, ReliableMode,
    ReqCcState, RudiKind, SynPsnOffset,
};
use uet_wire::rand::Rng;
use uet_wire::time::Instant;
use uet_wire::{CccId, Credit24, EntropyValue, MessageId, PdcId, Psn, TrafficClass, Units256};

use crate::config::PdsConfig;

/// A control packet queued to go out ahead of ACKs and data
/// ([`Pds::poll_transmit`]'s priority): a NACK, or a CP that takes no PSN.
#[derive(Debug, Clone, Copy)]
pub(super) enum ControlPacket {
    Nack {
        dst: IpAddr,
        ev: EntropyValue,
        /// The domain of the packet it answers.
        sdi: Option<Sdi>,
        repr: PdsNackRepr,
    },
    Cp {
        dst: IpAddr,
        repr: PdsCpRepr,
    },
    /// A tail loss probe: a Probe CP on the data traffic class, so that it
    /// queues behind the data it asks about.
    TailProbe {
        dst: IpAddr,
        repr: PdsCpRepr,
    },
}

impl Pds {
    /// A Probe CP on `p` (§2.10): it takes no PSN of its own, and the
    /// target's answer carries `opaque` back. Before the PDC is
    /// established it carries SYN and the offset of its PSN from
    /// Start_PSN, as the data does, so the target can open the PDC from it.
    pub(super) fn probe_cp(p: &Pdc, opaque: u16) -> PdsCpRepr {
        let psn = p.ledger.next_psn();
        PdsCpRepr {
            mode: p.mode,
            retx: false,
            ar: true,
            psn,
            spdcid: Some(p.id),
            dpdcid: Self::dst_field(p, psn),
            payload: CpPayload::Probe {
                probe_opaque: opaque,
                sack_base: p.ledger.una(),
            },
        }
    }

    /// Puts a PDC on the send round robin once (fair service per PDC).
    pub(super) fn schedule(&mut self, id: PdcId) {
        if let Some(p) = self.pdcs.get_mut(&id)
            && !p.scheduled
        {
            p.scheduled = true;
            self.active.push_back(id);
        }
    }

    /// Writes the next datagram's UET bytes into `buf` (sized for the
    /// largest packet: PDS header + `max_ses_len`) and says where it goes.
    /// Priority: NACKs and control, ACKs, retransmissions, new data.
    #[inline]
    #[must_use]
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        upper: &mut impl SesHooks,
    ) -> Option<Transmit> {
        // The usual answer of a receiver between its ACKs, decided here
        // without entering the general path (whose entry and exit alone,
        // saving and restoring registers, cost more than these checks).
        if self.nothing_to_send() {
            return None;
        }
        self.poll_transmit_general(now, buf, upper)
    }

    /// Nothing [`Pds::poll_transmit_general`] could send now: no PDC on
    /// the send round robin, no ACK, control packet, UUD or RUDI work, and
    /// no RCCC (whose grants and credit requests it would first collect).
    /// When this holds it returns `None` and changes nothing (tested on
    /// every poll of the engine tests).
    #[inline]
    pub(crate) fn nothing_to_send(&self) -> bool {
        self.active.is_empty()
            && self.acks.is_empty()
            && self.ctl.is_empty()
            && self.uud.is_empty()
            && self.rudi.replies.is_empty()
            && self.rudi.inflight.is_empty()
            && self.rccc_rx.is_none()
            && !self.rccc_source
    }

    /// [`Pds::poll_transmit`] for every case.
    #[must_use]
    pub(crate) fn poll_transmit_general(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        upper: &mut impl SesHooks,
    ) -> Option<Transmit> {
        // Without RCCC (the common case) neither has anything to do: the
        // checks are here so that no call is made for them.
        if self.rccc_rx.is_some() {
            self.queue_grants();
        }
        if self.rccc_source {
            self.send_credit_requests(now);
        }
        if let Some(c) = self.ctl.pop_front() {
            return self.write_ctl(c, buf);
        }
        while let Some(id) = self.acks.pop_front() {
            if let Some(t) = self.write_ack(now, id, buf) {
                return Some(t);
            }
        }
        if let Some((dst, pkt)) = self.uud.pop_front() {
            return self.write_uud(now, dst, pkt, buf, upper);
        }
        // (Without RUDI work, the usual case, `write_rudi` has nothing to
        // send: not called.)
        if !(self.rudi.replies.is_empty() && self.rudi.inflight.is_empty())
            && let Some(t) = self.write_rudi(now, buf, upper)
        {
            return Some(t);
        }
        let mut spins = self.active.len();
        while spins > 0 {
            spins -= 1;
            // `write_data` neither schedules nor reads `scheduled`, so the
            // PDC is only taken off the queue once its fate is known.
            let Some(&id) = self.active.front() else {
                break;
            };
            let t = self.write_data(now, id, buf, upper);
            match self.pdcs.get_mut(&id) {
                // Round robin: the PDC goes to the back while it has work
                // (it stays scheduled).
                // (Alone on it, it already is at the back.)
                Some(p) if t.is_some() && p.has_tx_work() => {
                    if self.active.len() > 1 {
                        self.active.rotate_left(1);
                    }
                }
                p => {
                    self.active.pop_front();
                    if let Some(p) = p {
                        p.scheduled = false;
                    }
                }
            }
            if t.is_some() {
                return t;
            }
        }
        None
    }

    pub(super) fn write_ctl(&mut self, c: ControlPacket, buf: &mut [u8]) -> Option<Transmit> {
        // (A tail probe rides the data class: it must queue behind the
        // data it asks about.)
        // A CP goes in the domain of the PDC that sends it.
        let domain_of =
            |id: Option<PdcId>| id.and_then(|id| self.pdcs.get(&id)).and_then(|p| p.sdi);
        let (dst, ev, repr, data_class, sdi) = match c {
            ControlPacket::Nack { dst, ev, sdi, repr } => {
                self.counters.tx_nacks += 1;
                self.counters.tx_nack_codes.count(repr.code.code());
                (dst, ev, PdsRepr::Nack(repr), false, sdi)
            }
            ControlPacket::Cp { dst, repr } => {
                self.counters.tx_control += 1;
                let sdi = domain_of(repr.spdcid);
                (dst, CONTROL_EV, PdsRepr::Cp(repr), false, sdi)
            }
            ControlPacket::TailProbe { dst, repr } => {
                self.counters.tx_control += 1;
                self.counters.tail_probes += 1;
                let sdi = domain_of(repr.spdcid);
                (dst, CONTROL_EV, PdsRepr::Cp(repr), true, sdi)
            }
        };
        let len = repr.buffer_len();
        repr.emit(buf.get_mut(..len)?);
        Some(
            if data_class {
                Transmit::data(&self.config, dst, ev, len)
            } else {
                Transmit::control(&self.config, dst, ev, len)
            }
            .in_domain(sdi),
        )
    }

    pub(super) fn write_ack(
        &mut self,
        now: Instant,
        id: PdcId,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let mpr = (self.config.mp_range / 128).clamp(1, 255) as u8;
        let p = self.pdcs.get_mut(&id)?;
        let peer_id = p.peer_id;
        let closing_target = p.closing && !p.initiator;
        let rx = p.rx.as_mut()?;
        if rx.due != AckDue::Now {
            return None;
        }
        let cack = rx.cack();
        // Bounded: a peer replaying duplicates cannot grow the queue.
        while rx.responses.len() > 256 {
            rx.responses.pop_front();
        }
        // A probe's answer goes after every queued response, in an ACK of
        // its own (§3 "What uet does"): its `probe_opaque` takes the place
        // of the ACK_PSN a response is matched by, and its bitmap must end
        // at no response still to leave, or the source would take the
        // arrivals past that response, sent before the probe, for losses.
        let response = rx.responses.pop_front();
        let probe = if response.is_none() {
            rx.probe.take()
        } else {
            None
        };
        let (next_hdr, resp_psn) = match response {
            Some((psn, _)) => (NextHeader::Response, Some(psn)),
            None => (NextHeader::None, None),
        };
        let (ack_field, sack_base) = match probe {
            // A probe asks what has arrived since the CACK: the bitmap
            // starts there (a lost tail lies just past it).
            Some(o) => (PdsAckPsnField::ProbeOpaque(o), cack.next()),
            None => {
                // The ACK names the packet its response answers, but its
                // bitmap reports the newest arrivals whatever it names.
                let trig = resp_psn.unwrap_or(rx.trigger);
                // ... but no later than the first arrival no ACK has
                // reported yet: when more arrive before the ACKs for the
                // last batch have all left (one ACK per response, and a
                // send batch ends), the newest 64 would otherwise skip
                // packets that only the CACK, many CLEAR round trips
                // later, could report.
                let unreported = if rx.reported.is_after(cack) {
                    rx.reported.next()
                } else {
                    cack.next()
                };
                let base = sack_base(cack, rx.trigger);
                (
                    PdsAckPsnField::Offset(trig.offset_from(cack).unwrap_or(0)),
                    if unreported.is_before(base) {
                        unreported
                    } else {
                        base
                    },
                )
            }
        };
        let sack_off = sack_base.offset_from(cack).unwrap_or(1);
        let sack_base = cack.offset(sack_off);
        // PSNs holding an uncleared guaranteed response are not SACKed: the
        // initiator must fetch the response (§3).
        let mut bitmap = rx.win.sack_bitmap(sack_base);
        for k in rx.gtd.keys() {
            let d = Psn(*k).diff(sack_base);
            if (0..64).contains(&d) {
                bitmap &= !(1u64 << d);
            }
        }
        // Such a 0 below reported arrivals reads as a loss to the source.
        // Shown only once its response has left, it reads so only if that
        // response was lost (the resend then fetches it again): the bitmap
        // ends below the first response still waiting for its ACK.
        let mut reported_to = sack_base.add(63);
        if let Some(d) = rx
            .responses
            .iter()
            .map(|(psn, _)| psn.diff(sack_base))
            .filter(|d| (0..64).contains(d))
            .min()
        {
            bitmap &= (1u64 << d) - 1;
            reported_to = sack_base.add(d as u32).sub(1);
        }
        // What this bitmap reported of the arrivals so far (it starts no
        // later than the first unreported one).
        if rx.win.highest().is_before(reported_to) {
            reported_to = rx.win.highest();
        }
        // Arrivals left unreported (more than 64 past the first, or past
        // a response still waiting) go in the next ACK at once, unless
        // this one could report none of them (a base the offset field
        // cannot express).
        let mut unreported_left = false;
        if reported_to.is_after(rx.reported) {
            rx.reported = reported_to;
            unreported_left = rx.reported.is_before(rx.win.highest());
        }
        // An RCCC source gets its cumulative credit in the ACK (cc_type
        // CREDIT); everyone else NSCC state: rcvd_bytes in 256-B units and
        // the service time since the triggering packet arrived (§2.7).
        let credit = rx
            .rccc
            .and_then(|k| self.rccc_rx.as_mut().and_then(|rr| rr.grant_for(k)));
        let state = match credit {
            Some(credit) => AckCcState::Credit(CreditState {
                credit,
                ooo_count: rx.ooo_count,
            }),
            None => AckCcState::Nscc(NsccState {
                service_time: service_time_to_wire(rx.trigger_at, now),
                rc: false,
                rcv_cwnd_pend: CwndPenalty::from_masked(0),
                rcvd_bytes: Units256::from_bytes_round_up(rx.rcvd_bytes),
                ooo_count: rx.ooo_count,
            }),
        };
        // A secure PDC's closing ACK is a plain ACK naming the Start_PSN
        // the domain's next PDC takes (flag EPSN, REFPROV's
        // EXPECTED_0RTT_START, §2.12); everything before the CLOSE is
        // cleared, so it needs no SACK.
        // The floor this PDC leaves when it goes (`remove_pdc` raises it
        // past the PDC's Start_PSN right after this ACK).
        let epsn = match p.sdi {
            Some(d) if closing_target && response.is_none() && probe.is_none() => {
                let past = p.start.next();
                Some(match self.secure.floor.get(&d) {
                    Some(f) if f.is_after(past) => *f,
                    _ => past,
                })
            }
            _ => None,
        };
        let ext = match epsn {
            Some(e) => PdsAckExt::Plain {
                expected_psn: Some(e),
            },
            None => PdsAckExt::Cc(PdsAckCc {
                cc_flags: PdsCcFlags::from_masked(0),
                mpr,
                sack_psn_offset: sack_off,
                sack_bitmap: bitmap,
                state: PdsAckState::Cc(state),
            }),
        };
        let ack = PdsAckRepr {
            next_hdr,
            m: rx.ecn,
            retx: rx.retx,
            req: if rx.gtd.is_empty() {
                PdsAckRequest::None
            } else {
                PdsAckRequest::Clear
            },
            ack_psn_offset: ack_field,
            cack_psn: cack,
            spdcid: Some(id),
            dpdcid: peer_id,
            ext,
        };
        let hl = ack.buffer_len();
        let mut len = hl;
        // Straight to the ACK view (what `PdsRepr::emit` does after its
        // dispatch on the type); the usual ACK_CC through a fixed-size view,
        // so that no field write checks the length again.
        use uet_wire::pds::ack::{CC_HEADER_LEN, Packet};
        if hl == CC_HEADER_LEN {
            ack.emit(&mut Packet::new_unchecked(
                buf.first_chunk_mut::<CC_HEADER_LEN>()?,
            ));
        } else {
            ack.emit(&mut Packet::new_unchecked(buf.get_mut(..hl)?));
        }
        if let Some((_, resp)) = response {
            let rl = resp.buffer_len();
            let out = buf.get_mut(hl..hl + rl)?;
            resp.emit(&mut uet_wire::ses::SesResponsePacket::new_unchecked(out));
            len += rl;
        }
        let ev = rx.ev;
        if !rx.responses.is_empty() || rx.probe.is_some() || unreported_left {
            // More responses, the probe's answer or unreported arrivals
            // wait: another ACK goes next.
            self.acks.push_back(id);
            let dst = p.peer;
            self.counters.tx_acks += 1;
            return Some(Transmit::control(&self.config, dst, ev, len).in_domain(p.sdi));
        }
        rx.due = AckDue::No;
        rx.ack_bytes = 0;
        rx.ecn = false;
        rx.retx = false;
        let dst = p.peer;
        let sdi = p.sdi;
        p.last_activity = now;
        self.counters.tx_acks += 1;
        if closing_target {
            // The ACK of the CLOSE is out: the target forgets the PDC.
            self.remove_pdc(now, id, None);
        }
        Some(Transmit::control(&self.config, dst, ev, len).in_domain(sdi))
    }

    pub(super) fn write_rudi(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        upper: &mut impl SesHooks,
    ) -> Option<Transmit> {
        if let Some((dst, ev, m, pkt_id, resp)) = self.rudi.replies.pop_front() {
            let hl = 8;
            let (nh, rl) = match resp {
                Some(r) => {
                    let rl = r.buffer_len();
                    let out = buf.get_mut(hl..hl + rl)?;
                    r.emit(&mut uet_wire::ses::SesResponsePacket::new_unchecked(out));
                    (NextHeader::Response, rl)
                }
                None => (NextHeader::None, 0),
            };
            PdsRepr::Rudi(PdsRudiRepr {
                kind: RudiKind::Response { m },
                next_hdr: nh,
                retx: false,
                pkt_id,
            })
            .emit(buf.get_mut(..hl)?);
            self.counters.tx_acks += 1;
            return Some(Transmit::control(&self.config, dst, ev, hl + rl));
        }
        let (&pkt_id, tx) = self.rudi.inflight.iter_mut().find(|(_, t)| t.due)?;
        let first = !tx.sent;
        tx.sent = true;
        tx.due = false;
        if !first {
            tx.rtx_count += 1;
            self.counters.tx_retransmits += 1;
        } else {
            self.counters.tx_data += 1;
        }
        tx.sent_at = now;
        let (dst, pkt) = (tx.dst, tx.pkt);
        let hl = 8;
        let ses = buf.get_mut(hl..hl + pkt.len as usize)?;
        let nh = upper.write_request(now, &pkt, ses);
        PdsRepr::Rudi(PdsRudiRepr {
            kind: RudiKind::Request,
            next_hdr: nh,
            retx: !first,
            pkt_id,
        })
        .emit(buf.get_mut(..hl)?);
        Some(Transmit::data(
            &self.config,
            dst,
            EntropyValue::from_masked(self.rng.next_u32() as u16),
            hl + pkt.len as usize,
        ))
    }

    pub(super) fn write_uud(
        &mut self,
        now: Instant,
        dst: IpAddr,
        pkt: PktRef,
        buf: &mut [u8],
        upper: &mut impl SesHooks,
    ) -> Option<Transmit> {
        let hl = 4;
        let ses = buf.get_mut(hl..hl + pkt.len as usize)?;
        let nh = upper.write_request(now, &pkt, ses);
        PdsRepr::Uud(PdsUudRepr { next_hdr: nh }).emit(buf.get_mut(..hl)?);
        upper.on_acked(now, pkt);
        self.counters.tx_data += 1;
        Some(Transmit::data(
            &self.config,
            dst,
            EntropyValue::from_masked(self.rng.next_u32() as u16),
            hl + pkt.len as usize,
        ))
    }

    pub(super) fn write_data(
        &mut self,
        now: Instant,
        id: PdcId,
        buf: &mut [u8],
        upper: &mut impl SesHooks,
    ) -> Option<Transmit> {
        let range = self.config.mp_range;
        if self.rccc_source && self.waits_for_close(id) {
            // `remove_pdc` schedules it when the close completes.
            return None;
        }
        let p = self.pdcs.get_mut(&id)?;
        if p.hold_until.is_some_and(|h| now < h) {
            // `handle_timeout` schedules it again when the hold ends.
            return None;
        }
        let ccc = self.cccs.at_mut(Self::ccc_ix(&self.cccs, p)?)?;
        // 1. Retransmissions (SACKed ones become ACK_REQ probes, §3). Data
        // retransmissions go through the CCC like new data: a NACK or loss
        // already moved their bytes from inflight to the retransmit backlog
        // (`CcShare`). Probes and CLOSE are control traffic, never counted.
        let rtx_blocked = p.ledger.first_rtx().is_some_and(|e| {
            matches!(CcShare::of(&self.config, e), CcShare::Rtx(_))
                && !e.rto_forced
                && !ccc.can_send(now, self.config.nominal(item_len(&e.token)))
        });
        if rtx_blocked {
            return None;
        }
        if let Some(e) = p.ledger.resend_first(now) {
            let psn = e.psn;
            let item = e.token;
            let sacked = e.sacked;
            let ev = match p.mode {
                ReliableMode::Rod => p.rod_ev,
                ReliableMode::Rud => ccc.send_params(now, &mut self.rng).ev,
            };
            e.ev = ev;
            self.counters.tx_retransmits += 1;
            if !sacked && e.rtx_count == 1 && matches!(item, TxItem::Data(_)) {
                let unheard = super::pdc::sent_unheard(p.heard_from, psn);
                self.counters.first_rtt_resent += u64::from(unheard);
            }
            if sacked {
                let cp = PdsCpRepr {
                    mode: p.mode,
                    retx: true,
                    ar: true,
                    psn,
                    spdcid: Some(p.id),
                    dpdcid: Self::dst_field(p, psn),
                    payload: CpPayload::AckReq {
                        message_id: MessageId::from_masked(0),
                    },
                };
                // A probe for a SACKed packet usually means the target holds
                // a guaranteed response we already have and waits for the
                // CLEAR: the CLEAR CP is unreliable, so every probe carries a
                // fresh one (idempotent, cumulative).
                if p.clear_psn().diff(p.ledger.una()) >= 0 || p.clear_needed {
                    p.clear_needed = false;
                    p.clear_sent = Some(p.clear_psn());
                    p.note_clear(now, p.clear_psn());
                    let clear = PdsCpRepr {
                        payload: CpPayload::Clear {
                            clear_psn: p.clear_psn(),
                        },
                        ar: false,
                        psn: Psn(0),
                        ..cp
                    };
                    self.ctl.push_back(ControlPacket::Cp {
                        dst: p.peer,
                        repr: clear,
                    });
                }
                let repr = PdsRepr::Cp(cp);
                let len = repr.buffer_len();
                repr.emit(buf.get_mut(..len)?);
                return Some(Transmit::control(&self.config, p.peer, ev, len).in_domain(p.sdi));
            }
            if let TxItem::Data(pkt) = item {
                ccc.on_send(now, u64::from(self.config.nominal(pkt.len)), true);
            }
            let cc = req_cc_state(ccc.credit_target(), p.ccc.1);
            return Self::write_item(
                &self.config,
                p,
                now,
                psn,
                item,
                (true, true),
                cc,
                ev,
                buf,
                upper,
            );
        }
        // 2. A CLEAR the target asked for and no request to carry it: none
        // queued, or none that may leave now. The target's CACK waits for
        // the CLEAR (§3), and the PSN window moves only with the CACK: a
        // window full of packets the target has all answered would
        // otherwise wait for an RTO to carry the CLEAR.
        let data_blocked = |p: &Pdc, ccc: &mut uet_cms::Ccc| match p.queue.front() {
            None => true,
            Some(pkt) => {
                let next = p.ledger.next_psn();
                next.diff(p.ledger.una()) as u32 >= range
                    || (!p.established && next.diff(p.start) >= SynPsnOffset::MAX as i32)
                    || !ccc.can_send(now, self.config.nominal(pkt.len))
            }
        };
        if p.clear_needed && data_blocked(p, ccc) {
            p.clear_needed = false;
            p.clear_sent = Some(p.clear_psn());
            p.note_clear(now, p.clear_psn());
            let repr = PdsRepr::Cp(PdsCpRepr {
                mode: p.mode,
                retx: false,
                ar: true,
                psn: Psn(0),
                spdcid: Some(p.id),
                dpdcid: DpdcidField::Dpdcid(p.peer_id),
                payload: CpPayload::Clear {
                    clear_psn: p.clear_psn(),
                },
            });
            let len = repr.buffer_len();
            repr.emit(buf.get_mut(..len)?);
            self.counters.tx_control += 1;
            return Some(Transmit::control(&self.config, p.peer, CONTROL_EV, len).in_domain(p.sdi));
        }
        // 3. New data, within the MPR window, the SYN range and the CCC.
        let pkt = p.queue.front()?;
        let next = p.ledger.next_psn();
        // A secure PDC ends at Start_PSN + 2^31 (§2.12; the last PSN is
        // left for its CLOSE). What would go past it fails: a message
        // larger than the room `open` keeps (`psn_space_spent`) on a PDC
        // that long-lived.
        if p.sdi.is_some() && next.diff(p.start) as u32 >= self.config.secure_psn_span - 1 {
            p.close_requested = true;
            let mut withdrawn = 0;
            for pkt in p.queue.drain() {
                withdrawn += u64::from(self.config.nominal(pkt.len));
                upper.on_failed(now, pkt, super::PdsError::Closed);
            }
            ccc.withdraw(now, withdrawn);
            return None;
        }
        let in_flight = next.diff(p.ledger.una()) as u32;
        if in_flight >= range {
            return None;
        }
        if !p.established && next.diff(p.start) >= SynPsnOffset::MAX as i32 {
            return None;
        }
        // `can_send`, `send_params`, `on_send`, `can_send` again and the
        // credit target, in one call.
        let sent = ccc.send_new(now, self.config.nominal(pkt.len), &mut self.rng)?;
        p.queue.advance();
        let ev = match p.mode {
            ReliableMode::Rod => p.rod_ev,
            ReliableMode::Rud => sent.params.ev,
        };
        let psn = p.ledger.push(now, pkt.len, ev, TxItem::Data(pkt));
        self.counters.tx_data += 1;
        let ar = pkt.last || p.queue.is_empty() || sent.window_closing || sent.params.ack_req;
        // The credit target a packet carries is the one after its own send
        // (RCCC: otherwise a capped source stalls until its credit timeout).
        let cc = req_cc_state(sent.credit_target, p.ccc.1);
        Self::write_item(
            &self.config,
            p,
            now,
            psn,
            TxItem::Data(pkt),
            (false, ar),
            cc,
            ev,
            buf,
            upper,
        )
    }

    /// Whether PDC `id`, which has sent nothing yet, must wait for its
    /// CCC's closing PDCs: every PDC of the CCC that carried this RCCC
    /// source's data is closing. The target forgets the source when the
    /// last of them closes there; a first packet sent before that, on the
    /// old credit, enters it afresh at the initial window while our count
    /// goes on, and the two counts may sit too close for a re-base
    /// (`RcccSource::on_credit_update`), leaving every grant looking old.
    /// Held until the close completes, the PDC finds the source restarted
    /// (`restart_forgotten_source`), in step with the target. Costs a
    /// round trip, and only to a write that races an idle close.
    fn waits_for_close(&self, id: PdcId) -> bool {
        let Some(p) = self.pdcs.get(&id) else {
            return false;
        };
        if !p.initiator || !Self::sent_nothing(p) || p.queue.is_empty() {
            return false;
        }
        let mut closing = false;
        for q in self
            .ccc_members
            .get(p.ccc)
            .iter()
            .filter_map(|q| self.pdcs.get(q))
        {
            if q.id == id || Self::sent_nothing(q) {
                continue;
            }
            if !q.closing {
                return false;
            }
            closing = true;
        }
        closing
    }

    /// Whether a CP can name the peer's PDC ID (`dst_field` without SYN).
    pub(super) fn addressable(p: &Pdc) -> bool {
        p.peer_id.is_some() && !Self::syn_addressed(p)
    }

    /// Whether `p`'s packets still carry SYN in place of the DPDCID: only
    /// the initiator establishes with SYN; the target always knows the
    /// initiator's PDC ID (see the return-direction start above).
    pub(super) fn syn_addressed(p: &Pdc) -> bool {
        p.initiator && !p.established
    }

    pub(super) fn dst_field(p: &Pdc, psn: Psn) -> DpdcidField {
        if !Self::syn_addressed(p) {
            DpdcidField::Dpdcid(p.peer_id)
        } else {
            DpdcidField::Syn {
                pdc_info: PdcInfo::from_masked(0),
                psn_offset: SynPsnOffset::from_masked(psn.diff(p.start) as u16),
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_item(
        config: &PdsConfig,
        p: &mut Pdc,
        now: Instant,
        psn: Psn,
        item: TxItem,
        (retx, ar): (bool, bool),
        cc: Option<ReqCcState>,
        ev: EntropyValue,
        buf: &mut [u8],
        upper: &mut impl SesHooks,
    ) -> Option<Transmit> {
        p.last_activity = now;
        p.tail.on_progress(now);
        let dst = Self::dst_field(p, psn);
        let clear = p.clear_psn();
        let clear_off = clear.offset_from(psn).unwrap_or(i16::MIN);
        match item {
            TxItem::Close => {
                let repr = PdsRepr::Cp(PdsCpRepr {
                    mode: p.mode,
                    retx,
                    ar: true,
                    psn,
                    spdcid: Some(p.id),
                    dpdcid: dst,
                    payload: CpPayload::Close,
                });
                let len = repr.buffer_len();
                repr.emit(buf.get_mut(..len)?);
                Some(Transmit::control(config, p.peer, CONTROL_EV, len).in_domain(p.sdi))
            }
            TxItem::Data(pkt) => {
                // RUD_CC_REQ/ROD_CC_REQ (16 B) when RCCC advertises a
                // credit target, plain RUD_REQ/ROD_REQ (12 B) otherwise.
                let hl = if cc.is_some() { 16 } else { 12 };
                let ses = buf.get_mut(hl..hl + pkt.len as usize)?;
                let nh = upper.write_request(now, &pkt, ses);
                let repr = PdsRequestRepr {
                    mode: p.mode,
                    next_hdr: nh,
                    retx,
                    ar,
                    clear_psn_offset: clear_off,
                    psn,
                    spdcid: Some(p.id),
                    dpdcid: dst,
                    cc,
                };
                // Straight to the request view (what `PdsRepr::emit` does
                // after its dispatch on the type), sized at compile time so
                // that no field write checks the length again.
                use uet_wire::pds::req::{CC_HEADER_LEN, HEADER_LEN, Packet};
                if cc.is_some() {
                    let head = buf.first_chunk_mut::<CC_HEADER_LEN>()?;
                    repr.emit(&mut Packet::new_unchecked(head));
                } else {
                    let head = buf.first_chunk_mut::<HEADER_LEN>()?;
                    repr.emit(&mut Packet::new_unchecked(head));
                }
                if clear_off != i16::MIN {
                    // The request carried the CLEAR.
                    p.clear_needed = false;
                    p.note_clear(now, clear);
                }
                let mut t =
                    Transmit::data(config, p.peer, ev, hl + pkt.len as usize).in_domain(p.sdi);
                if retx && let Some(d) = config.dscp_data_rtx {
                    // DSCP_TRIMMABLE_RTX (§6/§7).
                    t.dscp = d;
                }
                Some(t)
            }
        }
    }
}

/// The SACK bitmap's base for an ACK when the CACK is `cack` and `trigger`
/// is the packet that arrived last: the bitmap ends at that packet, and starts no lower than
/// just past the CACK (HTSIM's `max(psn − 63, cack + 1)`, §3). A CACK held
/// back by an uncleared guaranteed response (§3) can trail the PSNs
/// arriving by far more than the bitmap's 64; a bitmap fixed at the CACK
/// would then never report them, and the initiator, unable to tell that
/// they arrived, could neither move CLEAR_PSN past them nor stop their
/// timers. Each packet is the newest, or among the 63 before it, for
/// several consecutive ACKs, so every arrival is reported while ACKs keep
/// up with arrivals; `write_ack` starts lower when they do not (see
/// `ReceiveState::reported`).
#[inline]
pub(super) fn sack_base(cack: Psn, trigger: Psn) -> Psn {
    let lo = trigger.sub(63);
    if lo.is_after(cack) { lo } else { cack.next() }
}

/// The `req_cc_state` of a request when the CCC runs RCCC (a credit
/// target, [`Ccc::credit_target`]): that cumulative target, and `ccc_id` =
/// the traffic class (a source has one CCC per destination and class, so
/// (source, class) names it at the target).
#[inline]
pub(super) fn req_cc_state(
    credit_target: Option<Credit24>,
    tc: TrafficClass,
) -> Option<ReqCcState> {
    credit_target.map(|credit_target| ReqCcState {
        ccc_id: CccId::from_masked(tc.get()),
        credit_target,
    })
}

pub(super) fn item_len(item: &TxItem) -> u32 {
    match item {
        TxItem::Data(p) => p.len,
        TxItem::Close => 0,
    }
}
