//! The `pds` object: every PDS header type (`docs/protocol-notes.md` §2).
//!
//! Common keys: `type` (spec name, `RUD_CC_REQ`, …), `header_len`,
//! `next_hdr` (spec name, `UET_HDR_REQUEST_STD`, …; a CP has `ctl_type`
//! instead) and `flags`, one boolean per flag the type defines (§2.4;
//! ACK `req` is a string). Then, per type:
//!
//! | type | flags | fields (derived values in *italics*) |
//! |---|---|---|
//! | RUD/ROD_REQ, *_CC_REQ | `retx ar syn` | `clear_psn_offset` *`clear_psn`*, `psn`, `spdcid`, `dpdcid` — or with `syn`: `pdc_info` *`use_rsv_pdc`*, `psn_offset` *`start_psn`*; CC types: `ccc_id`, `credit_target` |
//! | RUDI_REQ/RESP | `retx m` | `pkt_id` |
//! | UUD_REQ | (none) | |
//! | ACK, ACK_CC, ACK_CCX | `m retx p req epsn` | `ack_psn_offset` *`ack_psn`* — or with `p`: `probe_opaque`; `cack_psn`, `spdcid`, `dpdcid`; ACK with `epsn`: `expected_psn` |
//! | ACK_CC, ACK_CCX | | `cc_flags`, `mpr` *`mp_range`*, `sack_psn_offset` *`sack_base`*, `sack_bitmap` *`sacked_psns`* |
//! | ACK_CC, NSCC | | `cc_type: "NSCC"`, `service_time`, `rc`, `rcv_cwnd_pend`, `rcvd_bytes` (256-B units) *`rcvd_bytes_in_bytes`*, `ooo_count` |
//! | ACK_CC, CREDIT | | `cc_type: "CREDIT"`, `credit`, `ooo_count` |
//! | ACK_CC, other | | `cc_type: "RESERVED(n)"`, `ack_cc_state` |
//! | ACK_CCX | | `ccx_type`, `ack_ccx_state` |
//! | NACK, NACK_CCX | `m retx nt` | `nack_code` (spec name), `vendor_code`, `nack_psn` — or with `nt`: `nack_pkt_id`; `spdcid`, `dpdcid`, `payload`; NACK_CCX: `nccx_type`, `nack_ccx_state1`, `nack_ccx_state2` |
//! | CP | `isrod retx ar syn` | `ctl_type` (spec name), `psn`, `spdcid`, `dpdcid` or the `syn` form as in a request, `payload`; and the payload's meaning: ACK_REQ `message_id`, CLEAR / CLEAR_REQ `clear_psn`, PROBE `probe_opaque` + `sack_base`, CREDIT `credit`, CREDIT_REQ `target_credit` |
//!
//! A PDC ID of 0 ("none") is printed as 0; `probe_opaque` is a hex string.

use serde_json::{Value, json};
use uet_wire::pds::{
    AckCcState, CpPayload, DpdcidField, NackTarget, PdsAckCc, PdsAckExt, PdsAckPsnField,
    PdsAckRepr, PdsAckState, PdsCpRepr, PdsNackRepr, PdsRepr, PdsRequestRepr, PdsRudiRepr,
};
use uet_wire::{PdcId, Psn};

use super::{Obj, hex, hex64, put};

/// The `pds` object of a PDS header.
#[must_use]
pub fn pds_json(p: &PdsRepr) -> Value {
    let mut o = Obj::new();
    put(&mut o, "type", p.ty().name());
    put(&mut o, "header_len", p.header_len());
    if let Some(nh) = p.next_hdr() {
        put(&mut o, "next_hdr", nh.name());
    }
    match p {
        PdsRepr::Request(r) => request(r, &mut o),
        PdsRepr::Rudi(r) => rudi(r, &mut o),
        PdsRepr::Uud(_) => put(&mut o, "flags", json!({})),
        PdsRepr::Ack(r) => ack(r, &mut o),
        PdsRepr::Nack(r) => nack(r, &mut o),
        PdsRepr::Cp(r) => cp(r, &mut o),
    }
    Value::Object(o)
}

fn pdc(id: Option<PdcId>) -> u16 {
    PdcId::to_wire(id)
}

/// Bytes 10-11 of a request or CP: `dpdcid`, or (with `syn`) `pdc_info` and
/// `psn_offset` plus the derived `use_rsv_pdc` and `start_psn`.
fn dpdcid_field(d: DpdcidField, start_psn: Option<Psn>, o: &mut Obj) {
    match d {
        DpdcidField::Dpdcid(id) => put(o, "dpdcid", pdc(id)),
        DpdcidField::Syn {
            pdc_info,
            psn_offset,
        } => {
            put(o, "pdc_info", pdc_info.get());
            put(o, "use_rsv_pdc", pdc_info.use_rsv_pdc());
            put(o, "psn_offset", psn_offset.get());
            if let Some(s) = start_psn {
                put(o, "start_psn", s.0);
            }
        }
    }
}

fn request(r: &PdsRequestRepr, o: &mut Obj) {
    put(
        o,
        "flags",
        json!({ "retx": r.retx, "ar": r.ar, "syn": r.syn() }),
    );
    put(o, "clear_psn_offset", r.clear_psn_offset);
    put(o, "clear_psn", r.clear_psn().0);
    put(o, "psn", r.psn.0);
    put(o, "spdcid", pdc(r.spdcid));
    dpdcid_field(r.dpdcid, r.start_psn(), o);
    if let Some(cc) = r.cc {
        put(o, "ccc_id", cc.ccc_id.get());
        put(o, "credit_target", cc.credit_target.get());
    }
}

fn rudi(r: &PdsRudiRepr, o: &mut Obj) {
    put(o, "flags", json!({ "retx": r.retx, "m": r.m() }));
    put(o, "pkt_id", r.pkt_id);
}

fn ack(r: &PdsAckRepr, o: &mut Obj) {
    put(
        o,
        "flags",
        json!({
            "m": r.m,
            "retx": r.retx,
            "p": r.p(),
            "req": r.req.name(),
            "epsn": r.epsn(),
        }),
    );
    match r.ack_psn_offset {
        PdsAckPsnField::Offset(off) => {
            put(o, "ack_psn_offset", off);
            put(o, "ack_psn", r.cack_psn.offset(off).0);
        }
        PdsAckPsnField::ProbeOpaque(v) => put(o, "probe_opaque", hex(v)),
    }
    put(o, "cack_psn", r.cack_psn.0);
    put(o, "spdcid", pdc(r.spdcid));
    put(o, "dpdcid", pdc(r.dpdcid));
    match &r.ext {
        PdsAckExt::Plain { expected_psn } => {
            if let Some(e) = expected_psn {
                put(o, "expected_psn", e.0);
            }
        }
        PdsAckExt::Cc(cc) => ack_cc(cc, r, o),
    }
}

/// The ACK_CC / ACK_CCX extension (§2.7).
fn ack_cc(cc: &PdsAckCc, r: &PdsAckRepr, o: &mut Obj) {
    put(o, "cc_flags", cc.cc_flags.get());
    put(o, "mpr", cc.mpr);
    put(o, "mp_range", cc.mp_range());
    put(o, "sack_psn_offset", cc.sack_psn_offset);
    put(o, "sack_base", cc.sack_base(r.cack_psn).0);
    put(o, "sack_bitmap", hex64(cc.sack_bitmap));
    let sacked: Vec<u32> = r.sacked().map(|p| p.0).collect();
    put(o, "sacked_psns", sacked);
    match &cc.state {
        PdsAckState::Cc(AckCcState::Nscc(s)) => {
            put(o, "cc_type", "NSCC");
            put(o, "service_time", s.service_time);
            put(o, "rc", s.rc);
            put(o, "rcv_cwnd_pend", s.rcv_cwnd_pend.get());
            put(o, "rcvd_bytes", s.rcvd_bytes.get());
            put(
                o,
                "rcvd_bytes_in_bytes",
                u64::from(s.rcvd_bytes.get()) * 256,
            );
            put(o, "ooo_count", s.ooo_count);
        }
        PdsAckState::Cc(AckCcState::Credit(s)) => {
            put(o, "cc_type", "CREDIT");
            put(o, "credit", s.credit.get());
            put(o, "ooo_count", s.ooo_count);
        }
        PdsAckState::Cc(AckCcState::Other { cc_type, raw }) => {
            put(o, "cc_type", format!("RESERVED({cc_type})"));
            put(o, "ack_cc_state", hex64(*raw));
        }
        PdsAckState::Ccx(s) => {
            put(o, "ccx_type", s.ccx_type.get());
            put(
                o,
                "ack_ccx_state",
                format!("{:#034x}", u128::from_be_bytes(s.raw)),
            );
        }
    }
}

fn nack(r: &PdsNackRepr, o: &mut Obj) {
    put(
        o,
        "flags",
        json!({ "m": r.m, "retx": r.retx, "nt": r.nt() }),
    );
    put(o, "nack_code", r.code.to_string());
    put(o, "vendor_code", r.vendor_code);
    match r.target {
        NackTarget::Psn(p) => put(o, "nack_psn", p.0),
        NackTarget::PktId(id) => put(o, "nack_pkt_id", id),
    }
    put(o, "spdcid", pdc(r.spdcid));
    put(o, "dpdcid", pdc(r.dpdcid));
    put(o, "payload", r.payload);
    if let Some(c) = r.ccx {
        put(o, "nccx_type", c.nccx_type.get());
        put(o, "nack_ccx_state1", format!("{:#017x}", c.state1.get()));
        put(o, "nack_ccx_state2", hex64(c.state2));
    }
}

fn cp(r: &PdsCpRepr, o: &mut Obj) {
    put(o, "ctl_type", r.ctl_type().to_string());
    put(
        o,
        "flags",
        json!({
            "isrod": r.isrod(),
            "retx": r.retx,
            "ar": r.ar,
            "syn": r.syn(),
        }),
    );
    put(o, "psn", r.psn.0);
    put(o, "spdcid", pdc(r.spdcid));
    dpdcid_field(r.dpdcid, r.start_psn(), o);
    put(o, "payload", r.payload.payload());
    match r.payload {
        CpPayload::AckReq { message_id } => put(o, "message_id", message_id.get()),
        CpPayload::Clear { clear_psn: p } | CpPayload::ClearReq { psn: p } => {
            put(o, "clear_psn", p.0);
        }
        CpPayload::Probe {
            probe_opaque,
            sack_base,
        } => {
            put(o, "probe_opaque", hex(probe_opaque));
            put(o, "sack_base", sack_base.0);
        }
        CpPayload::Credit { credit } => put(o, "credit", credit),
        CpPayload::CreditReq { target_credit } => put(o, "target_credit", target_credit),
        CpPayload::Noop
        | CpPayload::Close
        | CpPayload::CloseReq
        | CpPayload::Negotiation { .. }
        | CpPayload::Reserved { .. } => {}
    }
}
