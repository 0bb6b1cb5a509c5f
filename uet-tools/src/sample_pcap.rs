//! The sample capture `samples/uet-sample.pcap`: a short, realistic UET
//! exchange between two FEPs, built from `uet-wire` Reprs.
//!
//! The README's first command decodes it; `uet-tools/tests/sample_pcap.rs`
//! checks that the committed file is byte for byte what [`pcap`] produces
//! (regenerate with `cargo run -p uet-tools --example make-sample`), and the CLI
//! tests decode it.
//!
//! The story (initiator 10.0.0.1, PDC 5; target 10.0.0.2, PDC 9; job 7):
//!
//! | # | frame |
//! |---|---|
//! | 0 | SYN RUD_CC_REQ psn 336 (Start_PSN 336, CLEAR_PSN 335) + UET_WRITE SOM, 256 of 512 B |
//! | 1 | SYN RUD_CC_REQ psn 337, `ar` + UET_WRITE continuation, EOM |
//! | 2 | ACK_CC (NSCC state) cack 337 + UET_RESPONSE RC_OK: the PDC is established |
//! | 3 | CP CREDIT_REQ |
//! | 4 | CP CREDIT 25,000 B |
//! | 5 | RUD_CC_REQ psn 338 + UET_READ of 128 B |
//! | 6 | ACK_CC (CREDIT state) `req` CLEAR + UET_HDR_RESPONSE_DATA with the 128 B |
//! | 7 | RUD_CC_REQ psn 339 + UET_WRITE SOM (768 B message) |
//! | 8 | RUD_CC_REQ psn 340, trimmed by a switch (DSCP 16): only the PDS header is left |
//! | 9 | RUD_CC_REQ psn 341, ECN CE, `ar` + UET_WRITE EOM |
//! | 10 | NACK UET_TRIMMED for psn 340 |
//! | 11 | ACK_CC (NSCC, `m`): cack 339, SACK of 339 and 341 |
//! | 12 | RUD_CC_REQ psn 340 retransmitted (`retx`, `ar`) |
//! | 13 | CP ACK_REQ psn 340, message 3 |
//! | 14 | ACK cack 341 (`retx`) + UET_RESPONSE |
//! | 15 | CP CLEAR, CLEAR_PSN 341 |
//! | 16 | CP PROBE |
//! | 17 | ACK to the probe (`p`, `probe_opaque`) |
//! | 18 | CP CLOSE psn 342 |
//! | 19 | ACK cack 342: the PDC is closed |
//! | 20 | RUDI_REQ + medium UET_SEND with header data |
//! | 21 | RUDI_RESP + UET_RESPONSE |
//! | 22 | UUD_REQ + small UET_DATAGRAM_SEND |
//! | 23 | IPv6, 802.1Q VLAN 100: SYN ROD_REQ + UET_TAGGED_SEND |
//! | 24 | UET directly over IP (protocol 253, entropy header): SYN RUD_REQ + UET_ATOMIC (SUM, UINT64) |
//! | 25 | malformed: RUD_CC_REQ whose standard request header is cut after 20 of 44 bytes |
//!
//! Then one frame for each header the story does not need, so that the
//! sample holds every PDS type and SES header (`docs/protocol-notes.md` §2,
//! §4) for the decoders to be checked against:
//!
//! | # | frame |
//! |---|---|
//! | 26 | ROD_CC_REQ + UET_FETCHING_ATOMIC with the compare-and-swap extension (CSWAP, UINT32) |
//! | 27 | ACK_CCX + UET_HDR_RESPONSE_DATA_SMALL carrying the fetched value |
//! | 28 | NACK_CCX RCVR_INFER_LOSS |
//! | 29 | NACK of a RUDI packet (`nt`), an unknown code |
//! | 30 | ACK with EPSN (16 bytes, `expected_psn`), `req` CLOSE |
//! | 31 | CP NOOP on a ROD PDC, SYN form with `use_rsv_pdc` |
//! | 32 | CP CLEAR_REQ |
//! | 33 | CP CLOSE_REQ |
//! | 34 | CP NEGOTIATION |
//! | 35 | CP of reserved type 12 |
//! | 36 | RUD_REQ + UET_RENDEZVOUS_SEND with the rendezvous extension |
//! | 37 | TSS (with SSI): everything behind it is ciphertext (60 bytes, here stand-in bytes), the last 16 the tag |
//! | 38 | ACK_CC with a reserved `cc_type` |
//! | 39 | RUDI_RESP (`m`) + UET_NO_RESPONSE, overflow list, BAD_MKEY |
//! | 40 | UUD_REQ + medium UET_TAGGED_SEND (match bits, buffer offset) |

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use uet_wire::encap::{EncapConfig, Transport, emit_frame, frame_len};
use uet_wire::inet::{
    EtherType, EthernetAddress, EthernetRepr, FlowLabel, IpRepr, Ipv4Packet, Ipv4Repr, Ipv6Repr,
    VlanTag,
};
use uet_wire::pds::{
    AckCcState, AckCcxState, CcxType, CpPayload, CreditState, CwndPenalty, DpdcidField,
    NackCcxState, NackCcxState1, NackCode, NackTarget, NextHeader, NsccState, PdcInfo, PdsAckCc,
    PdsAckExt, PdsAckPsnField, PdsAckRepr, PdsAckRequest, PdsAckState, PdsCcFlags, PdsCpRepr,
    PdsNackRepr, PdsRepr, PdsRequestRepr, PdsRudiRepr, PdsUudRepr, ReliableMode, ReqCcState,
    ReservedCtlType, RudiKind, Sdi, SynPsnOffset, Tsc, TssPacket, TssRepr, UnknownCcType,
};
use uet_wire::ses::{
    AtomicDatatype, AtomicOpcode, HeaderDataOrOffset, ListKind, Opcode, RequestFlags,
    ResponseOpcode, ReturnCode, SesAtomicExtRepr, SesCasExtRepr, SesExtRepr, SesMediumRepr,
    SesRendezvousExtRepr, SesRepr, SesResponseDataRepr, SesResponseDataSmallRepr, SesResponseRepr,
    SesSmallRepr, SesStandardRepr, SomFields, StandardRequest,
};
use uet_wire::{
    CccId, Credit24, Dscp, Ecn, EntropyValue, JobId, Len14, MessageId, PdcId, PidOnFep, Psn,
    ResourceIndex, RiGeneration, Units256,
};

/// Where the sample lives, relative to the workspace root.
pub const SAMPLE_PATH: &str = "samples/uet-sample.pcap";

/// Index of the malformed frame in [`frames`].
pub const MALFORMED_INDEX: usize = 25;

/// Capture time of the first frame: 2025-06-11 00:00:00 UTC, the day UET 1.0
/// was released.
const T0: Duration = Duration::from_secs(1_749_600_000);

/// The smallest Ethernet frame without FCS; shorter frames are padded, as
/// they are on the wire.
const MIN_FRAME: usize = 60;

/// One endpoint of the sample.
#[derive(Debug, Clone, Copy)]
pub struct Host {
    /// MAC address.
    pub mac: EthernetAddress,
    /// IPv4 address.
    pub ip4: Ipv4Addr,
    /// IPv6 address.
    pub ip6: Ipv6Addr,
}

/// The initiator.
pub const INI: Host = Host {
    mac: EthernetAddress([0x02, 0, 0, 0, 0, 0x01]),
    ip4: Ipv4Addr::new(10, 0, 0, 1),
    ip6: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
};

/// The target.
pub const TGT: Host = Host {
    mac: EthernetAddress([0x02, 0, 0, 0, 0, 0x02]),
    ip4: Ipv4Addr::new(10, 0, 0, 2),
    ip6: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
};

/// DSCP of messages (REFPROV default CS0).
pub const DSCP_MSG: u8 = 0;
/// DSCP of ACKs and control packets (REFPROV default EF).
pub const DSCP_ACK: u8 = 46;
/// DSCP a switch marks a trimmed packet with (`EncapConfig::default`).
pub const DSCP_TRIMMED: u8 = 16;

/// The UET bytes of one packet: PDS header, SES header, payload.
#[must_use]
pub fn uet_bytes(pds: &PdsRepr, ses: Option<&SesRepr>, payload: &[u8]) -> Vec<u8> {
    let ses_len = ses.map_or(0, SesRepr::buffer_len);
    let mut b = vec![0u8; pds.buffer_len() + ses_len];
    pds.emit(&mut b);
    if let Some(s) = ses {
        s.emit(&mut b[pds.buffer_len()..]);
    }
    b.extend_from_slice(payload);
    b
}

/// Link and network layer of a frame.
#[derive(Debug, Clone, Copy)]
pub struct L3 {
    /// Ethernet header (the EtherType is set from the IP version).
    pub eth: EthernetRepr,
    /// IP header (protocol and length are filled in).
    pub ip: IpRepr,
}

/// IPv4 from `src` to `dst` with a DSCP and ECN.
#[must_use]
pub fn v4(src: Host, dst: Host, dscp: u8, ecn: Ecn) -> L3 {
    L3 {
        eth: EthernetRepr {
            dst: dst.mac,
            src: src.mac,
            vlan: None,
            ethertype: EtherType::Ipv4,
        },
        ip: IpRepr::V4(Ipv4Repr {
            src: src.ip4,
            dst: dst.ip4,
            protocol: 0,
            payload_len: 0,
            ttl: 64,
            dscp: Dscp::from_masked(dscp),
            ecn,
            ident: 0,
            dont_frag: true,
        }),
    }
}

/// IPv6 from `src` to `dst`, tagged with `vlan`.
#[must_use]
pub fn v6(src: Host, dst: Host, dscp: u8, ecn: Ecn, vlan: Option<VlanTag>) -> L3 {
    L3 {
        eth: EthernetRepr {
            dst: dst.mac,
            src: src.mac,
            vlan,
            ethertype: EtherType::Ipv6,
        },
        ip: IpRepr::V6(Ipv6Repr {
            src: src.ip6,
            dst: dst.ip6,
            next_header: 0,
            payload_len: 0,
            hop_limit: 64,
            dscp: Dscp::from_masked(dscp),
            ecn,
            flow_label: FlowLabel::from_masked(0x1_2345),
        }),
    }
}

/// A whole frame around `uet`, padded to the Ethernet minimum.
///
/// # Panics
///
/// If the UET bytes do not fit one IP packet.
#[must_use]
pub fn frame(l3: &L3, transport: &Transport, cfg: &EncapConfig, uet: &[u8]) -> Vec<u8> {
    let n = frame_len(&l3.eth, &l3.ip, transport, cfg, uet.len());
    let mut buf = vec![0u8; n];
    emit_frame(&l3.eth, &l3.ip, transport, cfg, uet.len(), &mut buf, |u| {
        u.copy_from_slice(uet);
    })
    .expect("the sample frames fit an IP packet");
    if buf.len() < MIN_FRAME {
        buf.resize(MIN_FRAME, 0);
    }
    buf
}

/// UET over UDP to port 4793 with entropy value `ev` (the source port).
#[must_use]
pub fn udp(ev: u16) -> Transport {
    Transport::udp(EntropyValue::from_masked(ev), &EncapConfig::default())
}

/// What a trimming switch leaves of an IPv4 UET-over-UDP frame: L2-L4 and
/// the first `keep` UET bytes; the IP length and checksum are updated, the
/// UDP length still announces the original size.
///
/// # Panics
///
/// If `frame` is not an untagged IPv4 frame holding `keep` UET bytes.
#[must_use]
pub fn trim_v4(mut frame: Vec<u8>, keep: usize) -> Vec<u8> {
    const L3_START: usize = 14;
    let ip_len = 20 + 8 + keep;
    let mut ip = Ipv4Packet::new_checked(&mut frame[L3_START..]).expect("an IPv4 frame");
    ip.set_total_len(u16::try_from(ip_len).expect("a short packet"));
    ip.fill_checksum();
    frame.truncate(L3_START + ip_len);
    if frame.len() < MIN_FRAME {
        frame.resize(MIN_FRAME, 0);
    }
    frame
}

/// `l3` with the IPv4 identification set to the frame number (IPv6 has none).
fn numbered(l3: &L3, n: usize) -> L3 {
    let mut l3 = *l3;
    if let IpRepr::V4(r) = &mut l3.ip {
        r.ident = 0x100 + n as u16;
    }
    l3
}

/// `n` bytes of recognisable payload.
fn data(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| seed.wrapping_add((i % 251) as u8)).collect()
}

fn pdc(v: u16) -> Option<PdcId> {
    PdcId::new(v)
}

/// The SYN form of bytes 10-11: `psn_offset` from Start_PSN.
fn syn(psn_offset: u16) -> DpdcidField {
    DpdcidField::Syn {
        pdc_info: PdcInfo::default(),
        psn_offset: SynPsnOffset::new(psn_offset).expect("a 12-bit offset"),
    }
}

/// The initiator's PDC and its peer.
const INI_PDC: u16 = 5;
const TGT_PDC: u16 = 9;
const START_PSN: u32 = 336;
const JOB: u32 = 7;

/// A RUD_CC_REQ of the initiator's PDC.
fn rud_cc(psn: u32, clear_psn: u32, dpdcid: DpdcidField, ar: bool, nh: NextHeader) -> PdsRepr {
    PdsRequestRepr {
        mode: ReliableMode::Rud,
        next_hdr: nh,
        retx: false,
        ar,
        clear_psn_offset: Psn(clear_psn)
            .offset_from(Psn(psn))
            .expect("CLEAR_PSN near PSN"),
        psn: Psn(psn),
        spdcid: pdc(INI_PDC),
        dpdcid,
        cc: Some(ReqCcState {
            ccc_id: CccId::from_masked(1),
            credit_target: Credit24::from_masked(12_500),
        }),
    }
    .into()
}

/// A standard-request header of job 7 to the target's PID 3, RI 12.
fn std_req(opcode: Opcode, msg: u16, som: SomFields, eom: bool, req_len: u32) -> SesStandardRepr {
    SesStandardRepr {
        opcode,
        flags: RequestFlags {
            dc: false,
            ie: false,
            rel: true,
            eom,
        },
        hd: false,
        som,
        message_id: MessageId::from_masked(msg),
        ri_generation: RiGeneration::from_masked(1),
        job_id: JobId::from_masked(JOB),
        pid_on_fep: PidOnFep::from_masked(3),
        resource_index: ResourceIndex::from_masked(12),
        buffer_offset: 0x1000,
        initiator: 1,
        memory_key: 0xabc,
        request_length: req_len,
    }
}

fn std_ses(h: SesStandardRepr, ext: Option<SesExtRepr>) -> SesRepr {
    StandardRequest::new(h, ext)
        .expect("the extension fits the opcode")
        .into()
}

fn som() -> SomFields {
    SomFields::Start { header_data: 0 }
}

fn cont(len: u16, offset: u32) -> SomFields {
    SomFields::Continuation {
        payload_length: Len14::from_masked(len),
        message_offset: offset,
    }
}

fn response(msg: u16, modified_length: u32) -> SesRepr {
    SesResponseRepr {
        list: ListKind::Expected,
        opcode: ResponseOpcode::Response,
        return_code: ReturnCode::Ok,
        message_id: MessageId::from_masked(msg),
        ri_generation: RiGeneration::from_masked(1),
        job_id: JobId::from_masked(JOB),
        modified_length,
    }
    .into()
}

/// An ACK of the target's PDC (plain when `cc` is `None`).
fn ack(cack: u32, ack_psn: u32, nh: NextHeader, cc: Option<PdsAckCc>) -> PdsAckRepr {
    PdsAckRepr {
        next_hdr: nh,
        m: false,
        retx: false,
        req: PdsAckRequest::None,
        ack_psn_offset: PdsAckPsnField::Offset(
            Psn(ack_psn)
                .offset_from(Psn(cack))
                .expect("ACK_PSN near CACK_PSN"),
        ),
        cack_psn: Psn(cack),
        spdcid: pdc(TGT_PDC),
        dpdcid: pdc(INI_PDC),
        ext: cc.map_or(PdsAckExt::Plain { expected_psn: None }, PdsAckExt::Cc),
    }
}

fn ack_cc(sack_base: u32, cack: u32, bitmap: u64, state: AckCcState) -> PdsAckCc {
    PdsAckCc {
        cc_flags: PdsCcFlags::default(),
        mpr: 1,
        sack_psn_offset: Psn(sack_base)
            .offset_from(Psn(cack))
            .expect("SACK base near CACK_PSN"),
        sack_bitmap: bitmap,
        state: PdsAckState::Cc(state),
    }
}

fn nscc(service_time: u16, pend: u8, rcvd: u64, ooo_count: u16) -> AckCcState {
    AckCcState::Nscc(NsccState {
        service_time,
        rc: false,
        rcv_cwnd_pend: CwndPenalty::new(pend).expect("a 7-bit penalty"),
        rcvd_bytes: Units256::from_bytes_round_up(rcvd),
        ooo_count,
    })
}

/// A CP on the initiator's PDC (or the target's, with `from_target`).
fn cp(psn: u32, ar: bool, payload: CpPayload, from_target: bool) -> PdsRepr {
    let (s, d) = if from_target {
        (TGT_PDC, INI_PDC)
    } else {
        (INI_PDC, TGT_PDC)
    };
    PdsCpRepr {
        mode: ReliableMode::Rud,
        retx: false,
        ar,
        psn: Psn(psn),
        spdcid: pdc(s),
        dpdcid: DpdcidField::Dpdcid(pdc(d)),
        payload,
    }
    .into()
}

/// The frames of the sample, in order.
#[must_use]
pub fn frames() -> Vec<Vec<u8>> {
    let cfg = EncapConfig::default();
    let i2t = v4(INI, TGT, DSCP_MSG, Ecn::Ect0);
    let i2t_ctl = v4(INI, TGT, DSCP_ACK, Ecn::Ect0);
    let t2i = v4(TGT, INI, DSCP_ACK, Ecn::Ect0);
    let est = DpdcidField::Dpdcid(pdc(TGT_PDC));
    let std = NextHeader::RequestStd;
    let rsp = NextHeader::Response;
    let mut out = Vec::new();
    let mut push = |l3: &L3, ev: u16, uet: Vec<u8>| {
        let l3 = numbered(l3, out.len());
        out.push(frame(&l3, &udp(ev), &cfg, &uet));
    };

    // 0-1: a 512-byte UET_WRITE in two SYN packets.
    let w = std_req(Opcode::Write, 1, som(), false, 512);
    let pds = rud_cc(START_PSN, START_PSN - 1, syn(0), false, std);
    push(
        &i2t,
        0xc001,
        uet_bytes(&pds, Some(&std_ses(w, None)), &data(256, 0)),
    );
    let w = std_req(Opcode::Write, 1, cont(256, 256), true, 512);
    let pds = rud_cc(START_PSN + 1, START_PSN - 1, syn(1), true, std);
    push(
        &i2t,
        0xc002,
        uet_bytes(&pds, Some(&std_ses(w, None)), &data(256, 1)),
    );

    // 2: the target answers from its new PDC 9.
    let a = ack(
        337,
        337,
        rsp,
        Some(ack_cc(337, 337, 0x1, nscc(20, 0, 512, 0))),
    );
    push(
        &t2i,
        0xc002,
        uet_bytes(&a.into(), Some(&response(1, 512)), &[]),
    );

    // 3-4: credit request and grant (RCCC).
    let target_credit = CpPayload::CreditReq {
        target_credit: 65_536,
    };
    push(
        &i2t_ctl,
        0xc003,
        uet_bytes(&cp(338, false, target_credit, false), None, &[]),
    );
    let grant = CpPayload::Credit { credit: 25_000 };
    push(
        &t2i,
        0xc003,
        uet_bytes(&cp(0, false, grant, true), None, &[]),
    );

    // 5-6: a 128-byte UET_READ; the data rides in the ACK, which asks for a
    // CLEAR because the response is kept for guaranteed delivery.
    let mut r = std_req(Opcode::Read, 2, som(), true, 128);
    r.buffer_offset = 0x2000;
    r.memory_key = 0xabd;
    let pds = rud_cc(338, 337, est, true, std);
    push(&i2t, 0xc004, uet_bytes(&pds, Some(&std_ses(r, None)), &[]));
    let mut a = ack(
        338,
        338,
        NextHeader::ResponseData,
        Some(ack_cc(
            338,
            338,
            0x1,
            AckCcState::Credit(CreditState {
                credit: Credit24::from_masked(25_000),
                ooo_count: 0,
            }),
        )),
    );
    a.req = PdsAckRequest::Clear;
    let rd = SesResponseDataRepr {
        list: ListKind::Expected,
        opcode: ResponseOpcode::ResponseWithData,
        return_code: ReturnCode::Ok,
        message_id: MessageId::from_masked(2),
        job_id: JobId::from_masked(JOB),
        read_request_message_id: MessageId::from_masked(2),
        payload_length: Len14::from_masked(128),
        modified_length: 128,
        message_offset: 0,
    };
    push(
        &t2i,
        0xc004,
        uet_bytes(&a.into(), Some(&rd.into()), &data(128, 2)),
    );

    // 7-9: a 768-byte UET_WRITE; psn 340 is trimmed, psn 341 is CE-marked.
    let w = std_req(Opcode::Write, 3, som(), false, 768);
    let pds = rud_cc(339, 338, est, false, std);
    push(
        &i2t,
        0xc005,
        uet_bytes(&pds, Some(&std_ses(w, None)), &data(256, 3)),
    );
    let w = std_req(Opcode::Write, 3, cont(256, 256), false, 768);
    let pds = rud_cc(340, 338, est, false, std);
    let full = uet_bytes(&pds, Some(&std_ses(w, None)), &data(256, 4));
    let trimmed = v4(INI, TGT, DSCP_TRIMMED, Ecn::Ect0);
    let full = frame(&numbered(&trimmed, out.len()), &udp(0xc006), &cfg, &full);
    out.push(trim_v4(full, pds.buffer_len()));
    let mut push = |l3: &L3, ev: u16, uet: Vec<u8>| {
        let l3 = numbered(l3, out.len());
        out.push(frame(&l3, &udp(ev), &cfg, &uet));
    };
    let w = std_req(Opcode::Write, 3, cont(256, 512), true, 768);
    let pds = rud_cc(341, 338, est, true, std);
    let ce = v4(INI, TGT, DSCP_MSG, Ecn::Ce);
    push(
        &ce,
        0xc007,
        uet_bytes(&pds, Some(&std_ses(w, None)), &data(256, 5)),
    );

    // 10: NACK for the trimmed packet.
    let n = PdsNackRepr {
        next_hdr: NextHeader::None,
        m: false,
        retx: false,
        target: NackTarget::Psn(Psn(340)),
        code: NackCode::Trimmed,
        vendor_code: 0,
        spdcid: pdc(TGT_PDC),
        dpdcid: pdc(INI_PDC),
        payload: 0,
        ccx: None,
    };
    push(&t2i, 0xc006, uet_bytes(&n.into(), None, &[]));

    // 11: ACK_CC for psn 341 (CE-marked: `m`), SACK of 339 and 341.
    let mut a = ack(
        339,
        341,
        NextHeader::None,
        Some(ack_cc(339, 339, 0b101, nscc(18, 16, 1024, 1))),
    );
    a.m = true;
    push(&t2i, 0xc007, uet_bytes(&a.into(), None, &[]));

    // 12: psn 340 again, on another path.
    let w = std_req(Opcode::Write, 3, cont(256, 256), false, 768);
    let PdsRepr::Request(mut pds) = rud_cc(340, 339, est, true, std) else {
        unreachable!("rud_cc builds a request")
    };
    pds.retx = true;
    push(
        &i2t,
        0xc008,
        uet_bytes(&pds.into(), Some(&std_ses(w, None)), &data(256, 4)),
    );

    // 13-14: ACK_REQ, and the ACK covering the whole message.
    let ack_req = CpPayload::AckReq {
        message_id: MessageId::from_masked(3),
    };
    push(
        &i2t_ctl,
        0xc008,
        uet_bytes(&cp(340, false, ack_req, false), None, &[]),
    );
    let mut a = ack(341, 340, rsp, None);
    a.retx = true;
    push(
        &t2i,
        0xc008,
        uet_bytes(&a.into(), Some(&response(3, 768)), &[]),
    );

    // 15: CLEAR for the read response held since frame 6.
    let clear = CpPayload::Clear {
        clear_psn: Psn(341),
    };
    push(
        &i2t_ctl,
        0xc009,
        uet_bytes(&cp(0, false, clear, false), None, &[]),
    );

    // 16-17: PROBE and the ACK that echoes its opaque value.
    let probe = CpPayload::Probe {
        probe_opaque: 0x5a5a,
        sack_base: Psn(342),
    };
    push(
        &i2t_ctl,
        0xc00a,
        uet_bytes(&cp(342, true, probe, false), None, &[]),
    );
    let mut a = ack(341, 341, NextHeader::None, None);
    a.ack_psn_offset = PdsAckPsnField::ProbeOpaque(0x5a5a);
    push(&t2i, 0xc00a, uet_bytes(&a.into(), None, &[]));

    // 18-19: CLOSE and its ACK.
    push(
        &i2t_ctl,
        0xc00b,
        uet_bytes(&cp(342, true, CpPayload::Close, false), None, &[]),
    );
    let a = ack(342, 342, NextHeader::None, None);
    push(&t2i, 0xc00b, uet_bytes(&a.into(), None, &[]));

    // 20-21: RUDI request with a medium UET_SEND carrying header data, and
    // its response.
    let rudi = PdsRudiRepr {
        kind: RudiKind::Request,
        next_hdr: NextHeader::RequestMedium,
        retx: false,
        pkt_id: 7001,
    };
    let send = SesMediumRepr {
        opcode: Opcode::Send,
        flags: RequestFlags {
            eom: true,
            ..RequestFlags::default()
        },
        som: true,
        request_length: Len14::from_masked(64),
        ri_generation: RiGeneration::from_masked(1),
        job_id: JobId::from_masked(JOB),
        pid_on_fep: PidOnFep::from_masked(3),
        resource_index: ResourceIndex::from_masked(0),
        data_or_offset: HeaderDataOrOffset::HeaderData(0x1122_3344_5566_7788),
        initiator: 1,
        memory_key: 0,
    };
    push(
        &i2t,
        0xd001,
        uet_bytes(&rudi.into(), Some(&send.into()), &data(64, 6)),
    );
    let resp = PdsRudiRepr {
        kind: RudiKind::Response { m: false },
        next_hdr: rsp,
        retx: false,
        pkt_id: 7001,
    };
    push(
        &t2i,
        0xd001,
        uet_bytes(&resp.into(), Some(&response(0, 64)), &[]),
    );

    // 22: UUD with a small UET_DATAGRAM_SEND.
    let uud = PdsUudRepr {
        next_hdr: NextHeader::RequestSmall,
    };
    let dgram = SesSmallRepr {
        opcode: Opcode::DatagramSend,
        flags: RequestFlags {
            eom: true,
            ..RequestFlags::default()
        },
        som: true,
        request_length: Len14::from_masked(32),
        ri_generation: RiGeneration::from_masked(1),
        job_id: JobId::from_masked(JOB),
        pid_on_fep: PidOnFep::from_masked(3),
        resource_index: ResourceIndex::from_masked(0),
        buffer_offset: 0,
    };
    push(
        &i2t,
        0xd002,
        uet_bytes(&uud.into(), Some(&dgram.into()), &data(32, 7)),
    );

    // 23: IPv6 with a VLAN tag: a ROD PDC opening with a tagged send.
    let vlan = VlanTag::new(3, false, 100).expect("a valid tag");
    let l3 = v6(INI, TGT, DSCP_MSG, Ecn::Ect0, Some(vlan));
    let rod = PdsRequestRepr {
        mode: ReliableMode::Rod,
        next_hdr: std,
        retx: false,
        ar: true,
        clear_psn_offset: -1,
        psn: Psn(1000),
        spdcid: pdc(6),
        dpdcid: syn(0),
        cc: None,
    };
    let mut t = std_req(Opcode::TaggedSend, 1, som(), true, 64);
    t.memory_key = 0xfeed_face;
    t.buffer_offset = 0;
    push(
        &l3,
        0xe001,
        uet_bytes(&rod.into(), Some(&std_ses(t, None)), &data(64, 8)),
    );

    // 24: UET directly over IP: an atomic SUM of one UINT64.
    let native = PdsRequestRepr {
        mode: ReliableMode::Rud,
        next_hdr: std,
        retx: false,
        ar: true,
        clear_psn_offset: -1,
        psn: Psn(5000),
        spdcid: pdc(7),
        dpdcid: syn(0),
        cc: None,
    };
    let amo = SesAtomicExtRepr {
        opcode: AtomicOpcode::Sum,
        datatype: AtomicDatatype::Uint64,
        cacheable: true,
        cpu_coherent: false,
    };
    let mut h = std_req(Opcode::Atomic, 4, som(), true, 8);
    h.buffer_offset = 0x40;
    let ses = std_ses(h, Some(SesExtRepr::Atomic(amo)));
    let uet = uet_bytes(&native.into(), Some(&ses), &42u64.to_be_bytes());
    let entropy = Transport::Entropy(EntropyValue::from_masked(0xbeef));
    out.push(frame(&numbered(&i2t, out.len()), &entropy, &cfg, &uet));

    // 25: malformed: the standard request header stops after 20 bytes.
    let w = std_req(Opcode::Write, 5, som(), true, 64);
    let pds = rud_cc(343, 342, est, true, std);
    let mut uet = uet_bytes(&pds, Some(&std_ses(w, None)), &[]);
    uet.truncate(pds.buffer_len() + 20);
    out.push(frame(&numbered(&i2t, out.len()), &udp(0xc00c), &cfg, &uet));

    debug_assert_eq!(out.len(), MALFORMED_INDEX + 1);
    every_other_header(&mut out);
    out
}

/// Frames 26-40: the headers the story above does not use.
fn every_other_header(out: &mut Vec<Vec<u8>>) {
    let cfg = EncapConfig::default();
    let i2t = v4(INI, TGT, DSCP_MSG, Ecn::Ect0);
    let i2t_ctl = v4(INI, TGT, DSCP_ACK, Ecn::Ect0);
    let t2i = v4(TGT, INI, DSCP_ACK, Ecn::Ect0);
    let est = DpdcidField::Dpdcid(pdc(TGT_PDC));
    let mut push = |l3: &L3, ev: u16, uet: Vec<u8>| {
        let l3 = numbered(l3, out.len());
        out.push(frame(&l3, &udp(ev), &cfg, &uet));
    };

    // 26-27: a fetching compare-and-swap on a ROD PDC with CC state, and
    // the ACK_CCX carrying the fetched value in a small data response.
    let PdsRepr::Request(mut rod) = rud_cc(400, 399, est, true, NextHeader::RequestStd) else {
        unreachable!("rud_cc builds a request")
    };
    rod.mode = ReliableMode::Rod;
    let cas = SesCasExtRepr {
        atomic: SesAtomicExtRepr {
            opcode: AtomicOpcode::Cswap,
            datatype: AtomicDatatype::Uint32,
            cacheable: false,
            cpu_coherent: true,
        },
        compare: 0x0102_0304,
        swap: 0x0a0b_0c0d_0000_0000_0000_0000_0000_0001,
    };
    let mut h = std_req(Opcode::FetchingAtomic, 6, som(), true, 4);
    h.buffer_offset = 0x80;
    let ses = std_ses(h, Some(SesExtRepr::CompareSwap(cas)));
    push(&i2t, 0xc010, uet_bytes(&rod.into(), Some(&ses), &[]));
    let ccx = PdsAckCc {
        cc_flags: PdsCcFlags::default(),
        mpr: 2,
        sack_psn_offset: 0,
        sack_bitmap: 0x1,
        state: PdsAckState::Ccx(AckCcxState {
            ccx_type: CcxType::from_masked(14),
            raw: *b"ccx-state-16-byt",
        }),
    };
    let a = ack(400, 400, NextHeader::ResponseDataSmall, Some(ccx));
    let rds = SesResponseDataSmallRepr {
        list: ListKind::Expected,
        opcode: ResponseOpcode::ResponseWithData,
        return_code: ReturnCode::Ok,
        payload_length: Len14::from_masked(4),
        job_id: JobId::from_masked(JOB),
        original_request_psn: Psn(400),
    };
    push(
        &t2i,
        0xc010,
        uet_bytes(&a.into(), Some(&rds.into()), &0x0102_0304u32.to_be_bytes()),
    );

    // 28-29: NACK_CCX, and a NACK of a RUDI packet with an unknown code.
    let n = PdsNackRepr {
        next_hdr: NextHeader::None,
        m: true,
        retx: false,
        target: NackTarget::Psn(Psn(401)),
        code: NackCode::RcvrInferLoss,
        vendor_code: 0x42,
        spdcid: pdc(TGT_PDC),
        dpdcid: pdc(INI_PDC),
        payload: 402,
        ccx: Some(NackCcxState {
            nccx_type: CcxType::from_masked(15),
            state1: NackCcxState1::from_masked(0x0abc_def0_1234_5678),
            state2: 0x1122_3344_5566_7788,
        }),
    };
    push(&t2i, 0xc011, uet_bytes(&n.into(), None, &[]));
    let n = PdsNackRepr {
        next_hdr: NextHeader::None,
        m: false,
        retx: true,
        target: NackTarget::PktId(7002),
        code: NackCode::from_u8(0x1b),
        vendor_code: 0,
        spdcid: None,
        dpdcid: None,
        payload: 0,
        ccx: None,
    };
    push(&t2i, 0xd003, uet_bytes(&n.into(), None, &[]));

    // 30: the closing ACK of a secure PDC (REFPROV's EPSN form).
    let mut a = ack(402, 402, NextHeader::None, None);
    a.ext = PdsAckExt::Plain {
        expected_psn: Some(Psn(403)),
    };
    a.req = PdsAckRequest::Close;
    push(&t2i, 0xc012, uet_bytes(&a.into(), None, &[]));

    // 31-35: the control packets the story does not send.
    let PdsRepr::Cp(mut noop) = cp(500, false, CpPayload::Noop, false) else {
        unreachable!("cp builds a CP")
    };
    noop.mode = ReliableMode::Rod;
    noop.dpdcid = DpdcidField::Syn {
        pdc_info: PdcInfo::USE_RSV_PDC,
        psn_offset: SynPsnOffset::new(3).expect("a 12-bit offset"),
    };
    push(&i2t_ctl, 0xc013, uet_bytes(&noop.into(), None, &[]));
    let clear_req = CpPayload::ClearReq { psn: Psn(402) };
    push(
        &t2i,
        0xc013,
        uet_bytes(&cp(0, false, clear_req, true), None, &[]),
    );
    push(
        &t2i,
        0xc013,
        uet_bytes(&cp(403, true, CpPayload::CloseReq, true), None, &[]),
    );
    let nego = CpPayload::Negotiation { raw: 0x0001_0002 };
    push(
        &i2t_ctl,
        0xc014,
        uet_bytes(&cp(404, true, nego, false), None, &[]),
    );
    let reserved = CpPayload::Reserved {
        ctl_type: ReservedCtlType::new(12).expect("a reserved control type"),
        raw: 0xdead_beef,
    };
    push(
        &i2t_ctl,
        0xc014,
        uet_bytes(&cp(405, false, reserved, false), None, &[]),
    );

    // 36: a rendezvous send: the eager part and where to read the rest.
    let rud = PdsRequestRepr {
        mode: ReliableMode::Rud,
        next_hdr: NextHeader::RequestStd,
        retx: false,
        ar: false,
        clear_psn_offset: 0,
        psn: Psn(406),
        spdcid: pdc(INI_PDC),
        dpdcid: est,
        cc: None,
    };
    let rdv = SesRendezvousExtRepr {
        eager_length: 64,
        ri_generation: RiGeneration::from_masked(2),
        pid_on_fep: PidOnFep::from_masked(4),
        resource_index: ResourceIndex::from_masked(13),
        read_offset: 0x1_0000_0000,
        read_memory_key: 0xbeef,
    };
    let h = std_req(Opcode::RendezvousSend, 7, som(), false, 4096);
    let ses = std_ses(h, Some(SesExtRepr::Rendezvous(rdv)));
    push(
        &i2t,
        0xc015,
        uet_bytes(&rud.into(), Some(&ses), &data(64, 9)),
    );

    // 37: a secured packet: TSS with SSI, then ciphertext (PDS, SES and
    // payload are all encrypted) ending in the 16-byte integrity tag. The
    // stand-in ciphertext bytes are those of a RUD_REQ; a decoder must not
    // read them as one.
    let tss = TssRepr {
        an: true,
        sdi: Sdi::from_masked(0x00_1234),
        ssi: Some(0xcafe),
        epoch: 3,
        tsc: Tsc::from_masked(0x0102_0304_0506),
    };
    let mut uet = vec![0u8; tss.buffer_len()];
    tss.emit(&mut TssPacket::new_unchecked(&mut uet[..]));
    let PdsRepr::Request(mut sec) = PdsRepr::from(rud) else {
        unreachable!("a request")
    };
    sec.psn = Psn(407);
    uet.extend(uet_bytes(&sec.into(), None, &data(48 + 16, 10)));
    push(&i2t, 0xc016, uet);

    // 38: ACK_CC whose cc_type (3) this version does not define.
    let other = AckCcState::Other {
        cc_type: UnknownCcType::new(3).expect("a reserved cc_type"),
        raw: 0x0011_2233_4455_6677,
    };
    let a = ack(
        407,
        407,
        NextHeader::None,
        Some(ack_cc(407, 407, 0x1, other)),
    );
    push(&t2i, 0xc016, uet_bytes(&a.into(), None, &[]));

    // 39-40: a RUDI response refusing a key, and a tagged medium send.
    let resp = PdsRudiRepr {
        kind: RudiKind::Response { m: true },
        next_hdr: NextHeader::Response,
        retx: false,
        pkt_id: 7003,
    };
    let refused = SesResponseRepr {
        list: ListKind::Overflow,
        opcode: ResponseOpcode::NoResponse,
        return_code: ReturnCode::BadMkey,
        message_id: MessageId::from_masked(0),
        ri_generation: RiGeneration::from_masked(1),
        job_id: JobId::from_masked(JOB),
        modified_length: 0,
    };
    push(
        &t2i,
        0xd004,
        uet_bytes(&resp.into(), Some(&refused.into()), &[]),
    );
    let uud = PdsUudRepr {
        next_hdr: NextHeader::RequestMedium,
    };
    let tagged = SesMediumRepr {
        opcode: Opcode::TaggedSend,
        flags: RequestFlags {
            dc: true,
            ie: false,
            rel: false,
            eom: true,
        },
        som: true,
        request_length: Len14::from_masked(16),
        ri_generation: RiGeneration::from_masked(1),
        job_id: JobId::from_masked(JOB),
        pid_on_fep: PidOnFep::from_masked(3),
        resource_index: ResourceIndex::from_masked(5),
        data_or_offset: HeaderDataOrOffset::BufferOffset(0x200),
        initiator: 2,
        memory_key: 0x7777,
    };
    push(
        &i2t,
        0xd005,
        uet_bytes(&uud.into(), Some(&tagged.into()), &data(16, 11)),
    );
}

/// The sample as pcap bytes: little-endian, microsecond timestamps,
/// Ethernet link type; frames 2 µs apart from 2025-06-11 00:00:00 UTC.
///
/// # Panics
///
/// Never in practice: writing to a `Vec` cannot fail.
#[must_use]
pub fn pcap() -> Vec<u8> {
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        ts_resolution: TsResolution::MicroSecond,
        endianness: Endianness::Little,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(Vec::new(), header).expect("writing to a Vec");
    for (i, f) in frames().iter().enumerate() {
        let ts = T0 + Duration::from_micros(2 * i as u64);
        let len = u32::try_from(f.len()).expect("a short frame");
        w.write_packet(&PcapPacket::new(ts, len, f))
            .expect("writing to a Vec");
    }
    w.into_writer()
}
