//! The frame → JSON mapping, header by header. Frames are built with
//! `uet-wire`'s `emit_frame` and Repr `emit`s (through the sample
//! helpers), decoded with [`frame_json`], and the objects compared with the
//! field names and values of `docs/protocol-notes.md`.

use proptest::prelude::*;
use serde_json::{Value, json};
use uet_wire::encap::{EncapConfig, Transport};
use uet_wire::inet::VlanTag;
use uet_wire::pds::{
    AckCcState, AckCcxState, CcxType, CpPayload, CreditState, CwndPenalty, DpdcidField,
    NackCcxState, NackCcxState1, NackCode, NackTarget, NextHeader, NsccState, PdcInfo, PdsAckCc,
    PdsAckExt, PdsAckPsnField, PdsAckRepr, PdsAckRequest, PdsAckState, PdsCcFlags, PdsCpRepr,
    PdsNackRepr, PdsRepr, PdsRequestRepr, PdsRudiRepr, PdsUudRepr, ReliableMode, ReqCcState,
    RudiKind, Sdi, SynPsnOffset, Tsc, TssPacket, TssRepr, UnknownCcType,
};
use uet_wire::ses::{
    AtomicDatatype, AtomicOpcode, HeaderDataOrOffset, ListKind, Opcode, RequestFlags,
    ResponseOpcode, ReturnCode, SesAtomicExtRepr, SesCasExtRepr, SesExtRepr, SesMediumRepr,
    SesRendezvousExtRepr, SesRepr, SesResponseDataRepr, SesResponseDataSmallRepr, SesResponseRepr,
    SesSmallRepr, SesStandardRepr, SomFields, StandardRequest,
};
use uet_wire::{
    CccId, Credit24, Ecn, EntropyValue, JobId, Len14, MessageId, PdcId, PidOnFep, Psn,
    ResourceIndex, RiGeneration, Units256,
};

use super::*;
use crate::sample_pcap::{self as sample, INI, TGT};

// ---------------------------------------------------------------------------
// Builders

fn cfg() -> EncapConfig {
    EncapConfig::default()
}

/// An IPv4/UDP frame from the initiator to the target around the packet.
fn frame_of(pds: &PdsRepr, ses: Option<&SesRepr>, payload: &[u8]) -> Vec<u8> {
    let l3 = sample::v4(INI, TGT, 0, Ecn::Ect0);
    let uet = sample::uet_bytes(pds, ses, payload);
    sample::frame(&l3, &sample::udp(0xc001), &cfg(), &uet)
}

fn decode(frame: &[u8]) -> Value {
    frame_json(frame, &cfg())
}

/// The `pds` object of a header sent alone.
fn pds_of(pds: impl Into<PdsRepr>) -> Value {
    let v = decode(&frame_of(&pds.into(), None, &[]));
    assert!(v.get("ses").is_none(), "{v}");
    v["pds"].clone()
}

/// The `ses` object of an SES header behind a RUD_REQ announcing it.
fn ses_of(ses: impl Into<SesRepr>, payload: &[u8]) -> Value {
    let ses = ses.into();
    let mut pds = rud_req(100);
    pds.next_hdr = ses.next_hdr();
    let v = decode(&frame_of(&pds.into(), Some(&ses), payload));
    assert_eq!(v["payload_len"], payload.len(), "{v}");
    v["ses"].clone()
}

fn pdc(v: u16) -> Option<PdcId> {
    PdcId::new(v)
}

fn rud_req(psn: u32) -> PdsRequestRepr {
    PdsRequestRepr {
        mode: ReliableMode::Rud,
        next_hdr: NextHeader::None,
        retx: false,
        ar: false,
        clear_psn_offset: 0,
        psn: Psn(psn),
        spdcid: pdc(5),
        dpdcid: DpdcidField::Dpdcid(pdc(9)),
        cc: None,
    }
}

fn ack(ext: PdsAckExt) -> PdsAckRepr {
    PdsAckRepr {
        next_hdr: NextHeader::None,
        m: false,
        retx: false,
        req: PdsAckRequest::None,
        ack_psn_offset: PdsAckPsnField::Offset(0),
        cack_psn: Psn(1000),
        spdcid: pdc(9),
        dpdcid: pdc(5),
        ext,
    }
}

fn ack_cc(state: PdsAckState) -> PdsAckRepr {
    ack(PdsAckExt::Cc(PdsAckCc {
        cc_flags: PdsCcFlags::default(),
        mpr: 1,
        sack_psn_offset: 0,
        sack_bitmap: 0,
        state,
    }))
}

fn nack(code: NackCode, target: NackTarget) -> PdsNackRepr {
    PdsNackRepr {
        next_hdr: NextHeader::None,
        m: false,
        retx: false,
        target,
        code,
        vendor_code: 0,
        spdcid: pdc(9),
        dpdcid: pdc(5),
        payload: 0,
        ccx: None,
    }
}

fn cp(payload: CpPayload) -> PdsCpRepr {
    PdsCpRepr {
        mode: ReliableMode::Rud,
        retx: false,
        ar: false,
        psn: Psn(0),
        spdcid: pdc(9),
        dpdcid: DpdcidField::Dpdcid(pdc(5)),
        payload,
    }
}

/// A standard request of job 7 to PID 3, RI 12.
fn std_hdr(opcode: Opcode, som: SomFields) -> SesStandardRepr {
    SesStandardRepr {
        opcode,
        flags: RequestFlags {
            dc: true,
            ie: false,
            rel: true,
            eom: true,
        },
        hd: false,
        som,
        message_id: MessageId::from_masked(9),
        ri_generation: RiGeneration::from_masked(1),
        job_id: JobId::from_masked(7),
        pid_on_fep: PidOnFep::from_masked(3),
        resource_index: ResourceIndex::from_masked(12),
        buffer_offset: 4096,
        initiator: 1,
        memory_key: 0xabc,
        request_length: 8,
    }
}

fn std_req(h: SesStandardRepr, ext: Option<SesExtRepr>) -> StandardRequest {
    StandardRequest::new(h, ext).unwrap()
}

// ---------------------------------------------------------------------------
// L2-L4 and the top level

#[test]
fn json_shape_of_a_request() {
    // The documented shape (`decode`'s module doc): ip, udp, pds (type,
    // next_hdr, flags, fields), ses (opcode, fields), payload_len.
    let mut pds = rud_req(336);
    pds.next_hdr = NextHeader::RequestStd;
    let ses = std_req(
        std_hdr(Opcode::Write, SomFields::Start { header_data: 0 }),
        None,
    );
    let f = frame_of(&pds.into(), Some(&ses.into()), &[1, 2, 3, 4, 5, 6, 7, 8]);
    let v = decode(&f);
    assert_eq!(
        v["ip"],
        json!({
            "version": 4, "src": "10.0.0.1", "dst": "10.0.0.2", "dscp": 0, "ecn": "ECT(0)",
            "ttl": 64, "protocol": 17, "ident": 0, "dont_frag": true, "payload_len": 8 + 12 + 44 + 8,
        })
    );
    assert_eq!(v["udp"], json!({ "src_port": 0xc001, "dst_port": 4793 }));
    assert_eq!(v["entropy"], 0xc001);
    assert_eq!(v["transport_pktsize"], 8 + 12 + 44 + 8);
    assert_eq!(
        v["eth"],
        json!({ "src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02", "ethertype": "IPv4", "vlan": null })
    );
    assert_eq!(v["pds"]["type"], "RUD_REQ");
    assert_eq!(v["pds"]["next_hdr"], "UET_HDR_REQUEST_STD");
    assert_eq!(v["ses"]["opcode"], "UET_WRITE");
    assert_eq!(v["payload_len"], 8);
    assert_eq!(v["frame_len"], f.len());
    for absent in ["tss", "trimmed", "crc32c", "error"] {
        assert!(v.get(absent).is_none(), "{absent} in {v}");
    }
}

#[test]
fn ipv6_with_vlan() {
    let vlan = VlanTag::new(5, true, 100).unwrap();
    let l3 = sample::v6(INI, TGT, 46, Ecn::Ce, Some(vlan));
    let uet = sample::uet_bytes(&rud_req(1).into(), None, &[]);
    let f = sample::frame(&l3, &sample::udp(0xbeef), &cfg(), &uet);
    let v = decode(&f);
    assert_eq!(
        v["eth"]["vlan"],
        json!({ "vid": 100, "pcp": 5, "dei": true })
    );
    assert_eq!(v["eth"]["ethertype"], "IPv6");
    assert_eq!(
        v["ip"],
        json!({
            "version": 6, "src": "fd00::1", "dst": "fd00::2", "dscp": 46, "ecn": "CE",
            "hop_limit": 64, "next_header": 17, "flow_label": 0x1_2345, "payload_len": 8 + 12,
        })
    );
    assert_eq!(v["udp"]["src_port"], 0xbeef);
    assert_eq!(v["pds"]["type"], "RUD_REQ");
}

#[test]
fn native_ip_has_entropy_and_no_udp() {
    let l3 = sample::v4(INI, TGT, 0, Ecn::NotEct);
    let t = Transport::Entropy(EntropyValue::from_masked(0xbeef));
    let uet = sample::uet_bytes(&rud_req(1).into(), None, &[]);
    let v = decode(&sample::frame(&l3, &t, &cfg(), &uet));
    assert!(v.get("udp").is_none(), "{v}");
    assert_eq!(v["entropy"], 0xbeef);
    assert_eq!(v["ip"]["protocol"], 253);
    assert_eq!(v["ip"]["ecn"], "Not-ECT");
    assert_eq!(v["transport_pktsize"], 4 + 12);
    assert_eq!(v["pds"]["psn"], 1);
}

#[test]
fn crc_trailer_is_reported_and_checked() {
    let crc = EncapConfig {
        crc_trailer: true,
        ..cfg()
    };
    let l3 = sample::v4(INI, TGT, 0, Ecn::Ect0);
    let uet = sample::uet_bytes(&rud_req(1).into(), None, &[0xaa; 4]);
    let mut f = sample::frame(&l3, &sample::udp(0xc001), &crc, &uet);
    let v = frame_json(&f, &crc);
    let trailer = u32::from_be_bytes(f[f.len() - 4..].try_into().unwrap());
    assert_eq!(v["crc32c"], format!("{trailer:#010x}"));
    assert_eq!(v["payload_len"], 4, "the trailer is not payload");
    // One flipped payload bit: the trailer no longer verifies.
    let at = f.len() - 5;
    f[at] ^= 1;
    let e = frame_json(&f, &crc);
    assert_eq!(
        e,
        json!({ "error": format!("CRC trailer: checksum mismatch at byte {}", f.len() - 4) })
    );
}

#[test]
fn trimmed_packet() {
    let mut pds = rud_req(340);
    pds.next_hdr = NextHeader::RequestStd;
    let ses = std_req(
        std_hdr(Opcode::Write, SomFields::Start { header_data: 0 }),
        None,
    );
    let l3 = sample::v4(INI, TGT, sample::DSCP_TRIMMED, Ecn::Ect0);
    let uet = sample::uet_bytes(&pds.into(), Some(&ses.into()), &[7; 100]);
    let full = sample::frame(&l3, &sample::udp(0xc001), &cfg(), &uet);
    let v = decode(&sample::trim_v4(full, 12));
    assert_eq!(v["trimmed"], "TRIMMED");
    assert_eq!(v["pds"]["psn"], 340);
    assert_eq!(v["pds"]["next_hdr"], "UET_HDR_REQUEST_STD");
    assert!(v.get("ses").is_none(), "the SES part was cut: {v}");
    assert_eq!(v["payload_len"], 0);
    assert_eq!(v["transport_pktsize"], 8 + 12 + 44 + 100, "the UDP length");
    // The last-hop DSCP.
    let l3 = sample::v4(INI, TGT, 18, Ecn::Ect0);
    let full = sample::frame(&l3, &sample::udp(0xc001), &cfg(), &uet);
    assert_eq!(
        decode(&sample::trim_v4(full, 12))["trimmed"],
        "TRIMMED_LASTHOP"
    );
}

#[test]
fn tss_is_shown_and_the_rest_is_ciphertext() {
    let tss = TssRepr {
        an: true,
        sdi: Sdi::new(0x0102).unwrap(),
        ssi: Some(0xdead_beef),
        epoch: 2,
        tsc: Tsc::new(3).unwrap(),
    };
    let mut uet = vec![0u8; tss.buffer_len()];
    tss.emit(&mut TssPacket::new_unchecked(&mut uet[..]));
    // Everything after the TSS header is ciphertext (here: bytes that would
    // not even parse as a PDS header), then the ICV.
    uet.extend([0xee; 9]);
    uet.extend([0xaa; 16]); // ICV
    let l3 = sample::v4(INI, TGT, 0, Ecn::Ect0);
    let f = sample::frame(&l3, &sample::udp(0xc001), &cfg(), &uet);
    let v = decode(&f);
    assert_eq!(
        v["tss"],
        json!({ "sdi": 0x0102, "sp": true, "ssi": 0xdead_beef_u32, "an": true, "epoch": 2, "tsc": 3, "header_len": 16, "ciphertext_len": 9 })
    );
    assert!(v.get("pds").is_none(), "{v}");
    assert!(v.get("ses").is_none(), "{v}");
    assert_eq!(v["udp"]["src_port"], 0xc001);
    let line = frame_text(&f, &cfg());
    assert!(line.ends_with("| ciphertext 9"), "{line}");
    assert!(line.contains("TSS sdi=258"), "{line}");
}

// ---------------------------------------------------------------------------
// PDS, type by type

#[test]
fn rud_cc_req_syn_spec_example() {
    // §2.5: CLEAR_PSN 335 is sent as psn 336, clear_psn_offset -1.
    let pds = PdsRequestRepr {
        next_hdr: NextHeader::RequestStd,
        ar: true,
        clear_psn_offset: -1,
        psn: Psn(336),
        dpdcid: DpdcidField::Syn {
            pdc_info: PdcInfo::USE_RSV_PDC,
            psn_offset: SynPsnOffset::new(2).unwrap(),
        },
        cc: Some(ReqCcState {
            ccc_id: CccId::from_masked(1),
            credit_target: Credit24::from_masked(12_500),
        }),
        ..rud_req(336)
    };
    let ses = std_req(
        std_hdr(Opcode::Write, SomFields::Start { header_data: 0 }),
        None,
    );
    let v = decode(&frame_of(&pds.into(), Some(&ses.into()), &[0; 8]));
    assert_eq!(
        v["pds"],
        json!({
            "type": "RUD_CC_REQ",
            "header_len": 16,
            "next_hdr": "UET_HDR_REQUEST_STD",
            "flags": { "retx": false, "ar": true, "syn": true },
            "clear_psn_offset": -1,
            "clear_psn": 335,
            "psn": 336,
            "spdcid": 5,
            "pdc_info": 1,
            "use_rsv_pdc": true,
            "psn_offset": 2,
            "start_psn": 334,
            "ccc_id": 1,
            "credit_target": 12_500,
        })
    );
}

#[test]
fn rod_req_established_has_dpdcid_and_no_cc() {
    let pds = PdsRequestRepr {
        mode: ReliableMode::Rod,
        retx: true,
        clear_psn_offset: -3,
        ..rud_req(0xffff_fffe)
    };
    assert_eq!(
        pds_of(pds),
        json!({
            "type": "ROD_REQ",
            "header_len": 12,
            "next_hdr": "UET_HDR_NONE",
            "flags": { "retx": true, "ar": false, "syn": false },
            "clear_psn_offset": -3,
            "clear_psn": 0xffff_fffb_u32,
            "psn": 0xffff_fffe_u32,
            "spdcid": 5,
            "dpdcid": 9,
        })
    );
    let cc = PdsRequestRepr {
        mode: ReliableMode::Rod,
        cc: Some(ReqCcState {
            ccc_id: CccId::from_masked(200),
            credit_target: Credit24::from_masked(Credit24::MAX),
        }),
        ..rud_req(1)
    };
    let v = pds_of(cc);
    assert_eq!(v["type"], "ROD_CC_REQ");
    assert_eq!(
        (v["ccc_id"].clone(), v["credit_target"].clone()),
        (json!(200), json!(0xff_ffff))
    );
}

#[test]
fn rudi_request_and_response() {
    let req = PdsRudiRepr {
        kind: RudiKind::Request,
        next_hdr: NextHeader::None,
        retx: true,
        pkt_id: 7001,
    };
    assert_eq!(
        pds_of(req),
        json!({
            "type": "RUDI_REQ", "header_len": 8, "next_hdr": "UET_HDR_NONE",
            "flags": { "retx": true, "m": false }, "pkt_id": 7001,
        })
    );
    let resp = PdsRudiRepr {
        kind: RudiKind::Response { m: true },
        retx: false,
        ..req
    };
    let v = pds_of(resp);
    assert_eq!(v["type"], "RUDI_RESP");
    assert_eq!(v["flags"], json!({ "retx": false, "m": true }));
}

#[test]
fn uud_req_has_no_flags_and_no_fields() {
    let v = pds_of(PdsUudRepr {
        next_hdr: NextHeader::None,
    });
    assert_eq!(
        v,
        json!({ "type": "UUD_REQ", "header_len": 4, "next_hdr": "UET_HDR_NONE", "flags": {} })
    );
}

#[test]
fn ack_cc_with_nscc_state() {
    // rcvd_bytes is in 256-B units (§2.7): 16,384 B -> 64.
    let a = PdsAckRepr {
        m: true,
        req: PdsAckRequest::Close,
        ack_psn_offset: PdsAckPsnField::Offset(3),
        ext: PdsAckExt::Cc(PdsAckCc {
            cc_flags: PdsCcFlags::default(),
            mpr: 2,
            sack_psn_offset: -2,
            sack_bitmap: 0b1011,
            state: PdsAckState::Cc(AckCcState::Nscc(NsccState {
                service_time: 100,
                rc: true,
                rcv_cwnd_pend: CwndPenalty::new(64).unwrap(),
                rcvd_bytes: Units256::from_bytes_round_up(16_384),
                ooo_count: 3,
            })),
        }),
        ..ack(PdsAckExt::Plain { expected_psn: None })
    };
    assert_eq!(
        pds_of(a),
        json!({
            "type": "ACK_CC",
            "header_len": 32,
            "next_hdr": "UET_HDR_NONE",
            "flags": { "m": true, "retx": false, "p": false, "req": "CLOSE", "epsn": false },
            "ack_psn_offset": 3,
            "ack_psn": 1003,
            "cack_psn": 1000,
            "spdcid": 9,
            "dpdcid": 5,
            "cc_flags": 0,
            "mpr": 2,
            "mp_range": 256,
            "sack_psn_offset": -2,
            "sack_base": 998,
            "sack_bitmap": "0x000000000000000b",
            "sacked_psns": [998, 999, 1001],
            "cc_type": "NSCC",
            "service_time": 100,
            "rc": true,
            "rcv_cwnd_pend": 64,
            "rcvd_bytes": 64,
            "rcvd_bytes_in_bytes": 16_384,
            "ooo_count": 3,
        })
    );
}

#[test]
fn ack_cc_with_credit_state() {
    let mut a = ack_cc(PdsAckState::Cc(AckCcState::Credit(CreditState {
        credit: Credit24::from_masked(25_000),
        ooo_count: 2,
    })));
    a.req = PdsAckRequest::Clear;
    a.retx = true;
    let v = pds_of(a);
    assert_eq!(v["cc_type"], "CREDIT");
    assert_eq!(v["credit"], 25_000);
    assert_eq!(v["ooo_count"], 2);
    assert_eq!(
        v["flags"],
        json!({ "m": false, "retx": true, "p": false, "req": "CLEAR", "epsn": false })
    );
    assert_eq!(v["sacked_psns"], json!([]));
    for nscc_only in ["service_time", "rc", "rcv_cwnd_pend", "rcvd_bytes"] {
        assert!(v.get(nscc_only).is_none(), "{nscc_only} in {v}");
    }
}

#[test]
fn ack_cc_with_reserved_cc_type_and_ack_ccx() {
    let other = ack_cc(PdsAckState::Cc(AckCcState::Other {
        cc_type: UnknownCcType::new(5).unwrap(),
        raw: 0x0102_0304_0506_0708,
    }));
    let v = pds_of(other);
    assert_eq!(v["cc_type"], "RESERVED(5)");
    assert_eq!(v["ack_cc_state"], "0x0102030405060708");

    let mut raw = [0u8; 16];
    raw[15] = 0x2a;
    let ccx = ack_cc(PdsAckState::Ccx(AckCcxState {
        ccx_type: CcxType::new(14).unwrap(),
        raw,
    }));
    let v = pds_of(ccx);
    assert_eq!(v["type"], "ACK_CCX");
    assert_eq!(v["header_len"], 40);
    assert_eq!(v["ccx_type"], 14);
    assert_eq!(v["ack_ccx_state"], format!("0x{:032x}", 0x2a));
    assert!(v.get("cc_type").is_none(), "{v}");
}

#[test]
fn plain_ack_epsn_and_probe_reply() {
    let a = ack(PdsAckExt::Plain {
        expected_psn: Some(Psn(0x1_0001)),
    });
    let v = pds_of(a);
    assert_eq!(v["type"], "ACK");
    assert_eq!(v["header_len"], 16);
    assert_eq!(v["flags"]["epsn"], true);
    assert_eq!(v["expected_psn"], 0x1_0001);
    assert!(v.get("sack_bitmap").is_none(), "{v}");

    let mut probe = ack(PdsAckExt::Plain { expected_psn: None });
    probe.ack_psn_offset = PdsAckPsnField::ProbeOpaque(0x5a5a);
    let v = pds_of(probe);
    assert_eq!(v["flags"]["p"], true);
    assert_eq!(v["probe_opaque"], "0x5a5a");
    assert!(
        v.get("ack_psn").is_none() && v.get("ack_psn_offset").is_none(),
        "{v}"
    );
    assert!(v.get("expected_psn").is_none(), "{v}");
}

#[test]
fn nack_codes_by_name() {
    let mut n = nack(NackCode::NoPdcAvail, NackTarget::Psn(Psn(77)));
    n.spdcid = None;
    n.vendor_code = 0x42;
    n.payload = 0x1234;
    n.m = true;
    assert_eq!(
        pds_of(n),
        json!({
            "type": "NACK",
            "header_len": 16,
            "next_hdr": "UET_HDR_NONE",
            "flags": { "m": true, "retx": false, "nt": false },
            "nack_code": "NO_PDC_AVAIL",
            "vendor_code": 0x42,
            "nack_psn": 77,
            "spdcid": 0,
            "dpdcid": 5,
            "payload": 0x1234,
        })
    );
    // A RUDI NACK names the packet ID, not a PSN.
    let v = pds_of(nack(NackCode::Trimmed, NackTarget::PktId(7001)));
    assert_eq!(v["flags"]["nt"], true);
    assert_eq!(v["nack_pkt_id"], 7001);
    assert_eq!(v["nack_code"], "UET_TRIMMED");
    assert!(v.get("nack_psn").is_none(), "{v}");
    // A reserved code keeps its value.
    let v = pds_of(nack(NackCode::from_u8(0x1b), NackTarget::Psn(Psn(1))));
    assert_eq!(v["nack_code"], "UNKNOWN(0x1b)");
}

#[test]
fn nack_ccx_state() {
    let mut n = nack(NackCode::NewStartPsn, NackTarget::Psn(Psn(5)));
    n.ccx = Some(NackCcxState {
        nccx_type: CcxType::new(15).unwrap(),
        state1: NackCcxState1::new(0xabc).unwrap(),
        state2: 0xdead_beef,
    });
    let v = pds_of(n);
    assert_eq!(v["type"], "NACK_CCX");
    assert_eq!(v["header_len"], 32);
    assert_eq!(v["nccx_type"], 15);
    assert_eq!(v["nack_ccx_state1"], "0x000000000000abc");
    assert_eq!(v["nack_ccx_state2"], "0x00000000deadbeef");
    assert_eq!(v["nack_code"], "NEW_START_PSN");
}

#[test]
fn credit_cp() {
    assert_eq!(
        pds_of(cp(CpPayload::Credit { credit: 25_000 })),
        json!({
            "type": "CP",
            "header_len": 16,
            "ctl_type": "CREDIT",
            "flags": { "isrod": false, "retx": false, "ar": false, "syn": false },
            "psn": 0,
            "spdcid": 9,
            "dpdcid": 5,
            "payload": 25_000,
            "credit": 25_000,
        })
    );
}

#[test]
fn every_ctl_type() {
    use uet_wire::pds::ReservedCtlType;
    let cases: Vec<(CpPayload, &str, Value)> = vec![
        (CpPayload::Noop, "NOOP", json!({})),
        (
            CpPayload::AckReq {
                message_id: MessageId::from_masked(3),
            },
            "ACK_REQ",
            json!({ "message_id": 3 }),
        ),
        (
            CpPayload::Clear {
                clear_psn: Psn(341),
            },
            "CLEAR",
            json!({ "clear_psn": 341 }),
        ),
        (
            CpPayload::ClearReq { psn: Psn(17) },
            "CLEAR_REQ",
            json!({ "clear_psn": 17 }),
        ),
        (CpPayload::Close, "CLOSE", json!({})),
        (CpPayload::CloseReq, "CLOSE_REQ", json!({})),
        (
            CpPayload::Probe {
                probe_opaque: 0xbeef,
                sack_base: Psn(342),
            },
            "PROBE",
            json!({ "probe_opaque": "0xbeef", "sack_base": 342 }),
        ),
        (
            CpPayload::Credit { credit: 25_000 },
            "CREDIT",
            json!({ "credit": 25_000 }),
        ),
        (
            CpPayload::CreditReq {
                target_credit: 65_536,
            },
            "CREDIT_REQ",
            json!({ "target_credit": 65_536 }),
        ),
        (
            CpPayload::Negotiation { raw: 0x0102 },
            "NEGOTIATION",
            json!({}),
        ),
        (
            CpPayload::Reserved {
                ctl_type: ReservedCtlType::new(12).unwrap(),
                raw: 9,
            },
            "RESERVED(12)",
            json!({}),
        ),
    ];
    let common = [
        "type",
        "header_len",
        "ctl_type",
        "flags",
        "psn",
        "spdcid",
        "dpdcid",
        "payload",
    ];
    for (payload, name, extra) in cases {
        let v = pds_of(cp(payload));
        assert_eq!(v["ctl_type"], name);
        assert_eq!(v["payload"], payload.payload(), "{name}");
        assert!(v.get("next_hdr").is_none(), "a CP has ctl_type: {v}");
        let Value::Object(o) = &v else { panic!() };
        for (k, val) in extra.as_object().unwrap() {
            assert_eq!(&o[k], val, "{name}.{k}");
        }
        let n_extra = extra.as_object().unwrap().len();
        assert_eq!(o.len(), common.len() + n_extra, "{name}: {v}");
    }
}

#[test]
fn syn_cp_on_a_rod_pdc() {
    let c = PdsCpRepr {
        mode: ReliableMode::Rod,
        retx: true,
        ar: true,
        psn: Psn(1010),
        dpdcid: DpdcidField::Syn {
            pdc_info: PdcInfo::default(),
            psn_offset: SynPsnOffset::new(10).unwrap(),
        },
        ..cp(CpPayload::Close)
    };
    let v = pds_of(c);
    assert_eq!(
        v["flags"],
        json!({ "isrod": true, "retx": true, "ar": true, "syn": true })
    );
    assert_eq!(v["psn_offset"], 10);
    assert_eq!(v["start_psn"], 1000);
    assert_eq!(v["use_rsv_pdc"], false);
    assert!(v.get("dpdcid").is_none(), "{v}");
}

// ---------------------------------------------------------------------------
// SES, header by header

#[test]
fn standard_request_som_with_header_data() {
    let mut h = std_hdr(
        Opcode::Write,
        SomFields::Start {
            header_data: 0xfeed,
        },
    );
    h.hd = true;
    assert_eq!(
        ses_of(std_req(h, None), &[0; 8]),
        json!({
            "header_len": 44,
            "opcode": "UET_WRITE",
            "version": 0,
            "flags": { "dc": true, "ie": false, "rel": true, "hd": true, "eom": true, "som": true },
            "message_id": 9,
            "ri_generation": 1,
            "job_id": 7,
            "pid_on_fep": 3,
            "resource_index": 12,
            "buffer_offset": 4096,
            "initiator": 1,
            "memory_key": "0xabc",
            "header_data": "0xfeed",
            "request_length": 8,
        })
    );
}

#[test]
fn standard_request_continuation_and_tagged() {
    let h = std_hdr(
        Opcode::TaggedSend,
        SomFields::Continuation {
            payload_length: Len14::from_masked(256),
            message_offset: 512,
        },
    );
    let v = ses_of(std_req(h, None), &[0; 256]);
    assert_eq!(v["flags"]["som"], false);
    assert_eq!(v["payload_length"], 256);
    assert_eq!(v["message_offset"], 512);
    assert_eq!(v["match_bits"], "0xabc");
    assert!(
        v.get("memory_key").is_none() && v.get("header_data").is_none(),
        "{v}"
    );
    assert_eq!(v["opcode"], "UET_TAGGED_SEND");
}

#[test]
fn standard_request_extensions() {
    let amo = SesAtomicExtRepr {
        opcode: AtomicOpcode::Sum,
        datatype: AtomicDatatype::Uint64,
        cacheable: true,
        cpu_coherent: true,
    };
    let h = std_hdr(Opcode::Atomic, SomFields::Start { header_data: 0 });
    let v = ses_of(std_req(h, Some(SesExtRepr::Atomic(amo))), &[0; 8]);
    assert_eq!(v["header_len"], 48);
    assert_eq!(
        v["ext"],
        json!({
            "type": "atomic", "header_len": 4, "atomic_opcode": "SUM", "atomic_datatype": "UINT64",
            "semantic_control": 3, "cacheable": true, "cpu_coherent": true,
        })
    );

    let cas = SesCasExtRepr {
        atomic: SesAtomicExtRepr {
            opcode: AtomicOpcode::Cswap,
            cpu_coherent: false,
            ..amo
        },
        compare: 5,
        swap: u128::MAX,
    };
    let h = std_hdr(Opcode::FetchingAtomic, SomFields::Start { header_data: 0 });
    let v = ses_of(std_req(h, Some(SesExtRepr::CompareSwap(cas))), &[]);
    assert_eq!(v["ext"]["type"], "compare-and-swap");
    assert_eq!(v["ext"]["atomic_opcode"], "CSWAP");
    assert_eq!(v["ext"]["compare_value"], "0x5");
    assert_eq!(v["ext"]["swap_value"], format!("0x{}", "f".repeat(32)));
    assert_eq!(v["header_len"], 44 + 36);

    let rdv = SesRendezvousExtRepr {
        eager_length: 4096,
        ri_generation: RiGeneration::from_masked(2),
        pid_on_fep: PidOnFep::from_masked(4),
        resource_index: ResourceIndex::from_masked(5),
        read_offset: 0x1_0000,
        read_memory_key: 0xcafe,
    };
    let h = std_hdr(Opcode::RendezvousSend, SomFields::Start { header_data: 0 });
    let v = ses_of(std_req(h, Some(SesExtRepr::Rendezvous(rdv))), &[]);
    assert_eq!(
        v["ext"],
        json!({
            "type": "rendezvous", "header_len": 24, "eager_length": 4096, "ri_generation": 2,
            "pid_on_fep": 4, "resource_index": 5, "read_offset": 0x1_0000, "read_memory_key": "0xcafe",
        })
    );
}

fn medium(data_or_offset: HeaderDataOrOffset) -> SesMediumRepr {
    SesMediumRepr {
        opcode: Opcode::Send,
        flags: RequestFlags {
            eom: true,
            ..RequestFlags::default()
        },
        som: true,
        request_length: Len14::from_masked(64),
        ri_generation: RiGeneration::from_masked(1),
        job_id: JobId::from_masked(7),
        pid_on_fep: PidOnFep::from_masked(3),
        resource_index: ResourceIndex::from_masked(0),
        data_or_offset,
        initiator: 1,
        memory_key: 0x77,
    }
}

#[test]
fn medium_request() {
    let v = ses_of(medium(HeaderDataOrOffset::HeaderData(0x1122)), &[0; 64]);
    assert_eq!(
        v,
        json!({
            "header_len": 32,
            "opcode": "UET_SEND",
            "version": 0,
            "flags": { "dc": false, "ie": false, "rel": false, "hd": true, "eom": true, "som": true },
            "request_length": 64,
            "ri_generation": 1,
            "job_id": 7,
            "pid_on_fep": 3,
            "resource_index": 0,
            "header_data": "0x1122",
            "initiator": 1,
            "memory_key": "0x77",
        })
    );
    let v = ses_of(medium(HeaderDataOrOffset::BufferOffset(4096)), &[]);
    assert_eq!(v["flags"]["hd"], false);
    assert_eq!(v["buffer_offset"], 4096);
    assert!(v.get("header_data").is_none(), "{v}");
}

#[test]
fn small_request_has_no_hd_flag() {
    let s = SesSmallRepr {
        opcode: Opcode::DatagramSend,
        flags: RequestFlags {
            eom: true,
            ..RequestFlags::default()
        },
        som: true,
        request_length: Len14::from_masked(32),
        ri_generation: RiGeneration::from_masked(1),
        job_id: JobId::from_masked(7),
        pid_on_fep: PidOnFep::from_masked(3),
        resource_index: ResourceIndex::from_masked(0),
        buffer_offset: 64,
    };
    assert_eq!(
        ses_of(s, &[0; 32]),
        json!({
            "header_len": 20,
            "opcode": "UET_DATAGRAM_SEND",
            "version": 0,
            "flags": { "dc": false, "ie": false, "rel": false, "eom": true, "som": true },
            "request_length": 32,
            "ri_generation": 1,
            "job_id": 7,
            "pid_on_fep": 3,
            "resource_index": 0,
            "buffer_offset": 64,
        })
    );
}

#[test]
fn responses() {
    let r = SesResponseRepr {
        list: ListKind::Overflow,
        opcode: ResponseOpcode::Response,
        return_code: ReturnCode::NoMatch,
        message_id: MessageId::from_masked(9),
        ri_generation: RiGeneration::from_masked(1),
        job_id: JobId::from_masked(7),
        modified_length: 512,
    };
    assert_eq!(
        ses_of(r, &[]),
        json!({
            "header_len": 12, "list": "OVERFLOW", "opcode": "UET_RESPONSE", "version": 0,
            "return_code": "NO_MATCH", "message_id": 9, "ri_generation": 1, "job_id": 7,
            "modified_length": 512,
        })
    );

    let rd = SesResponseDataRepr {
        list: ListKind::Expected,
        opcode: ResponseOpcode::ResponseWithData,
        return_code: ReturnCode::Ok,
        message_id: MessageId::from_masked(2),
        job_id: JobId::from_masked(7),
        read_request_message_id: MessageId::from_masked(12),
        payload_length: Len14::from_masked(128),
        modified_length: 128,
        message_offset: 256,
    };
    assert_eq!(
        ses_of(rd, &[0; 128]),
        json!({
            "header_len": 20, "list": "EXPECTED", "opcode": "UET_RESPONSE_W_DATA", "version": 0,
            "return_code": "RC_OK", "message_id": 2, "job_id": 7, "read_request_message_id": 12,
            "payload_length": 128, "modified_length": 128, "message_offset": 256,
        })
    );

    let rds = SesResponseDataSmallRepr {
        list: ListKind::Vendor(3),
        opcode: ResponseOpcode::ResponseWithData,
        return_code: ReturnCode::from_u8(0x31),
        payload_length: Len14::from_masked(16),
        job_id: JobId::from_masked(7),
        original_request_psn: Psn(338),
    };
    assert_eq!(
        ses_of(rds, &[0; 16]),
        json!({
            "header_len": 12, "list": "VENDOR(3)", "opcode": "UET_RESPONSE_W_DATA", "version": 0,
            "return_code": "VENDOR(0x31)", "payload_length": 16, "job_id": 7,
            "original_request_psn": 338,
        })
    );
}

#[test]
fn reserved_opcode_keeps_its_value() {
    let h = std_hdr(Opcode::from_u8(0x31), SomFields::Start { header_data: 0 });
    assert_eq!(ses_of(std_req(h, None), &[])["opcode"], "VENDOR(0x31)");
}

// ---------------------------------------------------------------------------
// Malformed frames: the error object names the layer and the byte.

fn err(v: &Value) -> &str {
    let o = v.as_object().expect("an object");
    assert_eq!(o.len(), 1, "only the error: {v}");
    o["error"].as_str().expect("a string")
}

#[test]
fn malformed_frames_give_layer_and_byte() {
    let mut pds = rud_req(1);
    pds.next_hdr = NextHeader::RequestStd;
    let pds: PdsRepr = pds.into();
    let ses: SesRepr = std_req(
        std_hdr(Opcode::Write, SomFields::Start { header_data: 0 }),
        None,
    )
    .into();
    let good = frame_of(&pds, Some(&ses), &[0; 8]);

    // SES header cut after 20 of its 44 bytes: the error is where the
    // bytes ran out (14 + 20 + 8 = 42, PDS 12, SES 20).
    let mut uet = sample::uet_bytes(&pds, Some(&ses), &[]);
    uet.truncate(12 + 20);
    let l3 = sample::v4(INI, TGT, 0, Ecn::Ect0);
    let cut = sample::frame(&l3, &sample::udp(1), &cfg(), &uet);
    assert_eq!(
        err(&decode(&cut)),
        "SES: truncated header (need 44 bytes) at byte 74"
    );

    // A reserved PDS type (0) at the first UET byte.
    let mut bad = good.clone();
    bad[42] &= 0x07;
    fix_udp_checksum(&mut bad);
    assert_eq!(err(&decode(&bad)), "PDS: reserved value 0x0 at byte 42");

    // An SES version other than 0 (byte 1 of the SES header).
    let mut bad = good.clone();
    bad[42 + 12 + 1] |= 0x40;
    fix_udp_checksum(&mut bad);
    assert_eq!(err(&decode(&bad)), "SES: unsupported version at byte 55");

    // A corrupted IPv4 header checksum.
    let mut bad = good.clone();
    bad[14 + 8] ^= 0xff; // TTL
    assert_eq!(err(&decode(&bad)), "IPv4: checksum mismatch at byte 24");

    // A corrupted UDP checksum.
    let mut bad = good.clone();
    bad[60] ^= 0xff;
    assert_eq!(err(&decode(&bad)), "UDP: checksum mismatch at byte 40");

    // Not UET: another UDP port, another EtherType, a runt.
    let mut other_port = good.clone();
    other_port[36..38].copy_from_slice(&53u16.to_be_bytes());
    fix_udp_checksum(&mut other_port);
    assert_eq!(
        err(&decode(&other_port)),
        "UDP: not a UET packet at byte 36"
    );
    let mut arp = good.clone();
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(err(&decode(&arp)), "Ethernet: not a UET packet at byte 12");
    assert_eq!(
        err(&decode(&good[..5])),
        "Ethernet: truncated header (need 14 bytes) at byte 5"
    );
    assert_eq!(
        frame_text(&good[..5], &cfg()),
        "error: Ethernet: truncated header (need 14 bytes) at byte 5"
    );
    // The same frame decodes with --port 53.
    let port53 = EncapConfig {
        udp_port: 53,
        ..cfg()
    };
    assert_eq!(frame_json(&other_port, &port53)["udp"]["dst_port"], 53);
}

/// Recomputes the UDP checksum of an untagged IPv4 frame after an edit.
fn fix_udp_checksum(f: &mut [u8]) {
    use uet_wire::inet::UdpPacket;
    let src = std::net::Ipv4Addr::from(<[u8; 4]>::try_from(&f[26..30]).unwrap());
    let dst = std::net::Ipv4Addr::from(<[u8; 4]>::try_from(&f[30..34]).unwrap());
    let mut udp = UdpPacket::new_unchecked(&mut f[34..]);
    udp.fill_checksum(src.into(), dst.into());
}

#[test]
fn text_form_is_the_frame_display() {
    let f = frame_of(&rud_req(336).into(), None, &[]);
    let parsed = uet_wire::parse_frame(&f).unwrap();
    assert_eq!(frame_text(&f, &cfg()), parsed.to_string());
    assert!(frame_text(&f, &cfg()).contains("RUD_REQ psn=336"));
}

#[test]
fn every_sample_frame_decodes_as_documented() {
    let frames = sample::frames();
    for (i, f) in frames.iter().enumerate() {
        let v = decode(f);
        if i == sample::MALFORMED_INDEX {
            assert_eq!(err(&v), "SES: truncated header (need 44 bytes) at byte 78");
        } else if v.get("tss").is_some() {
            assert!(v.get("pds").is_none(), "frame {i}: {v}");
            assert!(v["tss"]["ciphertext_len"].is_u64(), "frame {i}: {v}");
        } else {
            assert!(v.get("error").is_none(), "frame {i}: {v}");
            assert!(v["pds"]["type"].is_string(), "frame {i}: {v}");
        }
    }
    let types: Vec<String> = frames
        .iter()
        .map(|f| {
            let v = decode(f);
            match (v["pds"]["type"].as_str(), v["pds"]["ctl_type"].as_str()) {
                _ if v.get("tss").is_some() => "TSS".to_owned(),
                (Some("CP"), Some(c)) => format!("CP {c}"),
                (Some(t), _) => t.to_owned(),
                _ => "error".to_owned(),
            }
        })
        .collect();
    assert_eq!(
        types,
        [
            "RUD_CC_REQ",
            "RUD_CC_REQ",
            "ACK_CC",
            "CP CREDIT_REQ",
            "CP CREDIT",
            "RUD_CC_REQ",
            "ACK_CC",
            "RUD_CC_REQ",
            "RUD_CC_REQ",
            "RUD_CC_REQ",
            "NACK",
            "ACK_CC",
            "RUD_CC_REQ",
            "CP ACK_REQ",
            "ACK",
            "CP CLEAR",
            "CP PROBE",
            "ACK",
            "CP CLOSE",
            "ACK",
            "RUDI_REQ",
            "RUDI_RESP",
            "UUD_REQ",
            "ROD_REQ",
            "RUD_REQ",
            "error",
            "ROD_CC_REQ",
            "ACK_CCX",
            "NACK_CCX",
            "NACK",
            "ACK",
            "CP NOOP",
            "CP CLEAR_REQ",
            "CP CLOSE_REQ",
            "CP NEGOTIATION",
            "CP RESERVED(12)",
            "RUD_REQ",
            "TSS",
            "ACK_CC",
            "RUDI_RESP",
            "UUD_REQ",
        ]
    );
    // Every PDS type, SES header and extension is in the sample.
    let all: Vec<Value> = frames.iter().map(|f| decode(f)).collect();
    let has = |f: &dyn Fn(&Value) -> bool| all.iter().any(f);
    for t in [
        "RUD_REQ",
        "ROD_REQ",
        "RUDI_REQ",
        "RUDI_RESP",
        "UUD_REQ",
        "ACK",
        "ACK_CC",
        "ACK_CCX",
        "NACK",
        "CP",
        "NACK_CCX",
        "RUD_CC_REQ",
        "ROD_CC_REQ",
    ] {
        assert!(has(&|v| v["pds"]["type"] == t), "no {t}");
    }
    assert!(has(&|v| v.get("tss").is_some()), "no TSS");
    for nh in 1..=6u8 {
        let name = NextHeader::from_u8(nh).unwrap().name();
        assert!(
            has(&|v| v["pds"]["next_hdr"] == name && v.get("ses").is_some()),
            "no {name}"
        );
    }
    for ext in ["atomic", "compare-and-swap", "rendezvous"] {
        assert!(
            has(&|v| v["ses"]["ext"]["type"] == ext),
            "no {ext} extension"
        );
    }
    assert!(has(&|v| v["pds"]["flags"]["epsn"] == true), "no EPSN ACK");
    assert_eq!(decode(&frames[8])["trimmed"], "TRIMMED");
    assert_eq!(decode(&frames[23])["ip"]["version"], 6);
    assert!(decode(&frames[24]).get("udp").is_none());
}

proptest! {
    /// Whatever the bytes, the decoder gives one object: an error or a
    /// decoded frame, never a panic.
    #[test]
    fn any_bytes_give_one_object(bytes in proptest::collection::vec(any::<u8>(), 0..200),
                                 crc: bool) {
        let c = EncapConfig { crc_trailer: crc, ..cfg() };
        let v = frame_json(&bytes, &c);
        let o = v.as_object().expect("an object");
        if let Some(e) = o.get("error") {
            prop_assert!(e.as_str().is_some_and(|s| s.contains(" at byte ")));
            prop_assert_eq!(o.len(), 1);
        } else {
            prop_assert!(o.contains_key("pds"));
        }
        let _ = frame_text(&bytes, &c);
    }

    /// Sample frames with flipped bytes or cut short: still one object each
    /// — an error, a decoded PDS header, or a TSS header over ciphertext
    /// (a flipped byte can make a frame a sealed one: the entropy header's
    /// next header, or a PDS type that reads as TSS).
    #[test]
    fn damaged_sample_frames(i in 0..sample::MALFORMED_INDEX + 1,
                             flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..), 0..4),
                             cut in proptest::option::of(any::<prop::sample::Index>())) {
        let mut f = sample::frames().swap_remove(i);
        let n = f.len();
        for (at, x) in flips {
            f[at.index(n)] ^= x;
        }
        if let Some(c) = cut {
            f.truncate(c.index(n + 1));
        }
        let v = decode(&f);
        prop_assert!(
            v.get("error").is_some() || v.get("pds").is_some() || v.get("tss").is_some(),
            "{}",
            v
        );
    }
}

// ---------------------------------------------------------------------------
// Frames cut by a capture's snap length

#[test]
fn a_whole_frame_decodes_as_without_a_snap_length() {
    let f = &sample::frames()[0];
    assert_eq!(captured_frame_json(f, f.len(), &cfg()), decode(f));
    assert_eq!(
        captured_frame_text(f, f.len(), &cfg()),
        frame_text(f, &cfg())
    );
}

#[test]
fn a_frame_cut_after_its_headers_decodes_them() {
    // Frame 0: 358 bytes, headers end at 14 + 20 + 8 + 16 + 44 = 102.
    let f = &sample::frames()[0];
    let v = captured_frame_json(&f[..128], f.len(), &cfg());
    let mut whole = decode(f);
    whole["captured_len"] = json!(128);
    assert_eq!(v, whole, "every field as in the whole frame, and the cut");
    assert_eq!(v["payload_len"], 256);
    let t = captured_frame_text(&f[..128], f.len(), &cfg());
    assert_eq!(
        t,
        format!("{} | captured 128 of 358 bytes", frame_text(f, &cfg()))
    );
}

#[test]
fn a_cut_frame_with_a_trailer_decodes_without_checking_it() {
    let crc = EncapConfig {
        crc_trailer: true,
        ..cfg()
    };
    let l3 = sample::v4(INI, TGT, 0, Ecn::Ect0);
    let pds = rud_req(100);
    let uet = sample::uet_bytes(&pds.into(), None, &[7; 300]);
    let f = sample::frame(&l3, &sample::udp(0xc001), &crc, &uet);
    let whole = frame_json(&f, &crc);
    assert!(whole.get("crc32c").is_some(), "{whole}");
    let v = captured_frame_json(&f[..64], f.len(), &crc);
    assert!(v.get("crc32c").is_none(), "{v}");
    assert_eq!(v["payload_len"], whole["payload_len"]);
    assert_eq!(v["pds"], whole["pds"]);
    // The UDP checksum of a frame without trailer covers what was not
    // captured either.
    let f = frame_of(&pds.into(), None, &[7; 300]);
    assert_ne!(&f[40..42], &[0, 0], "a real UDP checksum");
    let v = captured_frame_json(&f[..64], f.len(), &cfg());
    assert_eq!(v["pds"], decode(&f)["pds"]);
}

#[test]
fn a_cut_inside_the_headers_is_an_error_and_other_errors_stay() {
    let f = &sample::frames()[0];
    let v = captured_frame_json(&f[..100], f.len(), &cfg());
    assert_eq!(
        err(&v),
        "capture: headers cut by the snap length (captured 100 of 358 bytes) at byte 100"
    );
    assert_eq!(
        captured_frame_text(&f[..100], f.len(), &cfg()),
        "error: capture: headers cut by the snap length (captured 100 of 358 bytes) at byte 100"
    );
    // Cut inside the IP header.
    let v = captured_frame_json(&f[..20], f.len(), &cfg());
    assert!(err(&v).starts_with("capture: headers cut"), "{v}");
    // An error in the captured bytes is that error.
    let mut bad = f.clone();
    bad[24] ^= 0xff;
    let v = captured_frame_json(&bad[..128], f.len(), &cfg());
    assert_eq!(err(&v), err(&decode(&bad)));
}
