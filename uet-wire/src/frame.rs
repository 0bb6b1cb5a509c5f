//! Whole frames: Ethernet → IP → UDP or entropy header → TSS → PDS → SES →
//! payload → trailer, in one call.
//!
//! [`parse_frame`] is what `uet decode`, the daemon's receive path and the
//! simulator use; [`parse_uet`] does the part after L4 for callers that
//! already hold the UET bytes (the kernel-UDP backend).

use core::fmt;
use core::ops::Range;

use crate::encap::{EncapConfig, Headers, parse_l2_l4};
use crate::error::Result;
use crate::pds::ack;
use crate::pds::prologue::NextHeader;
use crate::pds::req::{self, ReliableMode};
use crate::pds::tss::{self, SealedLayout};
use crate::pds::{PdsRepr, PdsType, TssRepr, parse_with_tss};
use crate::ses::request::STANDARD_HEADER_LEN;
use crate::ses::{SesRepr, StandardView};

/// Length of the TSS integrity tag that ends an encrypted packet (REFPROV
/// AES-GCM ICV, `docs/protocol-notes.md` §2.13).
pub const TSS_ICV_LEN: usize = tss::ICV_LEN;

/// The UET part of a packet: PDS header, SES header and payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UetPacket<'a> {
    /// The TSS header, when the packet is secured.
    pub tss: Option<TssRepr>,
    /// The PDS header.
    pub pds: PdsRepr,
    /// The SES header, when `next_hdr` announces one and it is readable
    /// (absent for trimmed packets).
    pub ses: Option<SesRepr>,
    /// The payload after the SES header (the ICV of a TSS packet excluded).
    pub payload: &'a [u8],
    /// Offset of the PDS header within the UET bytes.
    pub pds_offset: usize,
    /// Offset of the SES header (equal to `payload_offset` when none).
    pub ses_offset: usize,
    /// Offset of the payload.
    pub payload_offset: usize,
}

/// Parses the UET bytes (after UDP or the entropy header, before the
/// trailer). `truncated` says the packet was trimmed by a switch: only the
/// PDS header is expected to be whole, and the SES part is not read.
///
/// Bytes that begin with a TSS header are read as an **opened** packet:
/// the header, then the PDS header, SES header and payload in the clear, and
/// the 16-byte ICV at the end left out. REFPROV encrypts everything after
/// the TSS header, the PDS header included (`docs/protocol-notes.md`
/// §2.13), so a packet as it arrives must first be opened by `uet-tss`; to
/// look at a sealed packet without opening it, use [`parse_sealed_frame`]
/// or [`tss::split`], which read only what is in the clear.
#[inline]
pub fn parse_uet(bytes: &[u8], truncated: bool) -> Result<UetPacket<'_>> {
    // One first step at a time, each result wrapped where it is made: an
    // `or_else` chain builds the packet in an `Option` first and then
    // copies the whole of it into the `Result` (a memcpy per datagram).
    if !truncated {
        if let Some(p) = parse_common_request(bytes) {
            return Ok(p);
        }
        if let Some(p) = parse_common_ack(bytes) {
            return Ok(p);
        }
    }
    parse_uet_general(bytes, truncated)
}

/// The plain ACK as the PDS receive path takes it: an ACK_CC without SES
/// response, parsed by the ACK parser on a fixed-size view of its 32
/// bytes, without the prologue parse and the dispatch over every type; the
/// header and the bytes after it. `None` for anything else (the general
/// parser then decides); not for trimmed packets. Where it answers,
/// [`parse_uet`] gives the same header and payload, and no SES header
/// (tested).
#[inline]
#[must_use]
pub fn parse_ack_view(bytes: &[u8]) -> Option<(ack::Repr, &[u8])> {
    let (head, _) = bytes.split_first_chunk::<{ ack::CC_HEADER_LEN }>()?;
    let p = ack::Packet::new_unchecked(head);
    if p.pds_type_raw() != PdsType::AckCc.code() || p.next_hdr_raw() != NextHeader::None.code() {
        return None;
    }
    let a = ack::Repr::parse(&p).ok()?;
    let hl = a.buffer_len();
    Some((a, bytes.get(hl..).unwrap_or_default()))
}

/// The other first step of [`parse_uet`]: [`parse_ack_view`], as a packet.
#[inline(never)]
fn parse_common_ack(bytes: &[u8]) -> Option<UetPacket<'_>> {
    let (a, payload) = parse_ack_view(bytes)?;
    let hl = a.buffer_len();
    Some(UetPacket {
        tss: None,
        pds: PdsRepr::Ack(a),
        ses: None,
        payload,
        pds_offset: 0,
        ses_offset: hl,
        payload_offset: hl,
    })
}

/// The common data packet as the PDS receive path takes it: a RUD_REQ or
/// ROD_REQ (no CC state, no TSS) carrying a standard SES request without
/// extension header; the PDS header decoded, the SES header validated and
/// left in place ([`StandardView`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestView<'a> {
    /// The PDS header.
    pub pds: req::Repr,
    /// The SES header.
    pub ses: StandardView<'a>,
    /// The payload after the SES header.
    pub payload: &'a [u8],
}

impl<'a> RequestView<'a> {
    /// What [`parse_uet`] gives for the same bytes.
    #[inline]
    #[must_use]
    pub fn to_packet(&self) -> UetPacket<'a> {
        UetPacket {
            tss: None,
            pds: PdsRepr::Request(self.pds),
            ses: Some(SesRepr::Standard(self.ses.request())),
            payload: self.payload,
            pds_offset: 0,
            ses_offset: req::HEADER_LEN,
            payload_offset: req::HEADER_LEN + STANDARD_HEADER_LEN,
        }
    }
}

/// The common data packet from fixed-size views of its 12 + 44 header
/// bytes, so no per-field length checks and no dispatch on every type.
/// `None` for anything else (including a bad SES version), which
/// [`parse_uet`] then parses (or refuses) as before; not for trimmed
/// packets, whose SES part is not read. Where it answers,
/// [`RequestView::to_packet`] is exactly what [`parse_uet`] gives
/// (tested).
#[inline]
#[must_use]
pub fn parse_request_view(bytes: &[u8]) -> Option<RequestView<'_>> {
    let (pds, rest) = bytes.split_first_chunk::<{ req::HEADER_LEN }>()?;
    let (ses, payload) = rest.split_first_chunk::<{ STANDARD_HEADER_LEN }>()?;
    let p = req::Packet::new_unchecked(pds);
    let ty = p.pds_type_raw();
    let mode = if ty == PdsType::RudReq.code() {
        ReliableMode::Rud
    } else if ty == PdsType::RodReq.code() {
        ReliableMode::Rod
    } else {
        return None;
    };
    if p.next_hdr_raw() != NextHeader::RequestStd.code() {
        return None;
    }
    let ses = StandardView::new(ses)?;
    Some(RequestView {
        pds: req::Repr::decode(&p, mode, NextHeader::RequestStd, None),
        ses,
        payload,
    })
}

/// The first step of [`parse_uet`]: [`parse_request_view`], decoded.
#[inline]
fn parse_common_request(bytes: &[u8]) -> Option<UetPacket<'_>> {
    parse_request_view(bytes).map(|v| v.to_packet())
}

/// [`parse_uet`] for every packet.
fn parse_uet_general(bytes: &[u8], truncated: bool) -> Result<UetPacket<'_>> {
    let (tss, pds) = parse_with_tss(bytes)?;
    let pds_offset = tss.map_or(0, |t| t.buffer_len());
    let ses_offset = pds_offset + pds.header_len();
    // An opened TSS packet ends in the (now meaningless) ICV, not in payload.
    let bytes = if tss.is_some() && !truncated {
        let need = ses_offset + TSS_ICV_LEN;
        if bytes.len() < need {
            return Err(crate::error::Error::truncated(
                crate::error::Layer::Tss,
                need,
                bytes.len(),
            ));
        }
        bytes.get(..bytes.len() - TSS_ICV_LEN).unwrap_or_default()
    } else {
        bytes
    };
    let rest = bytes.get(ses_offset..).unwrap_or_default();
    if truncated {
        return Ok(UetPacket {
            tss,
            pds,
            ses: None,
            payload: &[],
            pds_offset,
            ses_offset,
            payload_offset: ses_offset.min(bytes.len()),
        });
    }
    let ses = match pds.next_hdr() {
        Some(nh) => SesRepr::parse(nh, rest).map_err(|e| e.at(ses_offset))?,
        None => None,
    };
    let ses_len = ses.as_ref().map_or(0, SesRepr::header_len);
    let payload_offset = ses_offset + ses_len;
    Ok(UetPacket {
        tss,
        pds,
        ses,
        payload: bytes.get(payload_offset..).unwrap_or_default(),
        pds_offset,
        ses_offset,
        payload_offset,
    })
}

/// A parsed UET frame: every header, typed, and the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Ethernet, IP, UDP or entropy header, trailer, trim state.
    pub headers: Headers,
    /// PDS, SES and payload.
    pub uet: UetPacket<'a>,
    /// The UET bytes' range in the frame.
    pub uet_range: Range<usize>,
}

impl<'a> Frame<'a> {
    /// The PDS header.
    #[must_use]
    pub const fn pds(&self) -> &PdsRepr {
        &self.uet.pds
    }

    /// The SES header, if any.
    #[must_use]
    pub const fn ses(&self) -> Option<&SesRepr> {
        self.uet.ses.as_ref()
    }

    /// The payload.
    #[must_use]
    pub const fn payload(&self) -> &'a [u8] {
        self.uet.payload
    }

    /// Offset of the payload within the frame.
    #[must_use]
    pub const fn payload_offset(&self) -> usize {
        self.uet_range.start + self.uet.payload_offset
    }
}

/// Parses a frame with the default encapsulation (UDP port 4793, native IP
/// protocol 253, no CRC trailer, trimmed DSCPs 16/18).
pub fn parse_frame(buf: &[u8]) -> Result<Frame<'_>> {
    parse_frame_with(buf, &EncapConfig::default())
}

/// Parses a frame with a given encapsulation. Errors carry the layer and the
/// byte offset within `buf`.
pub fn parse_frame_with<'a>(buf: &'a [u8], config: &EncapConfig) -> Result<Frame<'a>> {
    let (headers, range) = parse_l2_l4(buf, config)?;
    let uet_bytes = buf.get(range.clone()).unwrap_or_default();
    let uet = parse_uet(uet_bytes, headers.trimmed.is_some()).map_err(|e| e.at(range.start))?;
    Ok(Frame {
        headers,
        uet,
        uet_range: range,
    })
}

/// A secured frame as it arrives: the headers in the clear, the TSS header,
/// and where the authenticated, encrypted and tag bytes lie. Nothing behind
/// the TSS header is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedFrame {
    /// Ethernet, IP, UDP or entropy header (no CRC trailer: the ICV takes
    /// its place).
    pub headers: Headers,
    /// The TSS header.
    pub tss: TssRepr,
    /// The AAD, ciphertext and tag ranges within the frame.
    pub layout: SealedLayout,
    /// The UET bytes' range in the frame (TSS header through ICV).
    pub uet_range: Range<usize>,
}

/// Parses the clear part of a secured frame: L2-L4 as [`parse_frame_with`]
/// does (a configured CRC trailer is not expected behind TSS), then the TSS
/// header and the split of [`SealedLayout`]. Errors carry offsets within
/// `buf`; UET bytes that do not begin with a TSS header are
/// `Layer::Tss`, `OutOfRange` at their first byte.
pub fn parse_sealed_frame(buf: &[u8], config: &EncapConfig) -> Result<SealedFrame> {
    let (headers, range) = parse_l2_l4(buf, config)?;
    let uet_bytes = buf.get(range.clone()).unwrap_or_default();
    let (t, _, _) = tss::split(uet_bytes).map_err(|e| e.at(range.start))?;
    let l3 = headers.ethernet.buffer_len();
    let l4 = range.start - headers.transport.header_len();
    let ipv6 = matches!(headers.ip, crate::inet::IpRepr::V6(_));
    let layout = SealedLayout::new(l3, ipv6, l4, range.clone(), t.buffer_len())?;
    Ok(SealedFrame {
        headers,
        tss: t,
        layout,
        uet_range: range,
    })
}

/// Whether UET bytes begin with a TSS header (prologue type 1).
#[inline]
#[must_use]
pub fn is_tss(uet: &[u8]) -> bool {
    uet.first().is_some_and(|b| b >> 3 == PdsType::Tss.code())
}

impl fmt::Display for UetPacket<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(t) = &self.tss {
            write!(f, "{t} | ")?;
        }
        write!(f, "{}", self.pds)?;
        if let Some(s) = &self.ses {
            write!(f, " | {s}")?;
        }
        write!(f, " | payload {}", self.payload.len())
    }
}

impl fmt::Display for Frame<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} | {}", self.headers, self.uet)?;
        if let Some(t) = self.headers.trimmed {
            write!(f, " | trimmed ({t:?})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encap::{Transport, emit_frame, frame_len};
    use crate::error::{Error, ErrorKind, Layer};
    use crate::inet::{EtherType, EthernetAddress, EthernetRepr, IpRepr, Ipv4Repr};
    use crate::pds::prologue::NextHeader;
    use crate::pds::{PdsType, req};
    use crate::ses::{Opcode, SomFields, StandardRequest};
    use crate::{Credit24, Dscp, Ecn, EntropyValue, JobId, PdcId, PidOnFep, Psn, ResourceIndex};
    use core::net::Ipv4Addr;
    use proptest::prelude::*;

    /// Builds a frame around `uet` bytes with the default encapsulation.
    fn wrap(uet: &[u8], dscp: u8) -> Vec<u8> {
        let eth = EthernetRepr {
            dst: EthernetAddress([2, 0, 0, 0, 0, 2]),
            src: EthernetAddress([2, 0, 0, 0, 0, 1]),
            vlan: None,
            ethertype: EtherType::Ipv4,
        };
        let ip = IpRepr::V4(Ipv4Repr {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            protocol: 17,
            payload_len: 0,
            ttl: 64,
            dscp: Dscp::from_masked(dscp),
            ecn: Ecn::Ect0,
            ident: 0,
            dont_frag: true,
        });
        let cfg = EncapConfig::default();
        let t = Transport::udp(EntropyValue::from_masked(0xc001), &cfg);
        let mut buf = vec![0u8; frame_len(&eth, &ip, &t, &cfg, uet.len())];
        emit_frame(&eth, &ip, &t, &cfg, uet.len(), &mut buf, |u| {
            u.copy_from_slice(uet);
        })
        .unwrap();
        buf
    }

    /// Golden: RUD_CC_REQ (SYN, psn 336, CLEAR_PSN 335, credit target
    /// 12,500) carrying a standard UET_WRITE SOM|EOM of 8 bytes.
    const UET_WRITE: [u8; 16 + 44 + 8] = [
        // PDS RUD_CC_REQ: type 13, nh 3 (standard), flags syn|ar = 0x0c;
        // clear_psn_offset -1; psn 336; spdcid 5; pdc_info 0 + psn_offset 0;
        // ccc_id 1; credit_target 12,500 (0x0030d4).
        0x69, 0x8c, 0xff, 0xff, 0x00, 0x00, 0x01, 0x50, 0x00, 0x05, 0x00, 0x00, //
        0x01, 0x00, 0x30, 0xd4, //
        // SES standard: UET_WRITE; rel|eom|som; message_id 9; ri_generation 1;
        // job 7; pid 3; ri 12; buffer_offset 4096; initiator 1;
        // memory_key 0xabc; header_data 0; request_length 8.
        0x01, 0x0b, 0x00, 0x09, 0x01, 0x00, 0x00, 0x07, 0x00, 0x03, 0x00, 0x0c, //
        0, 0, 0, 0, 0, 0, 0x10, 0x00, //
        0, 0, 0, 1, //
        0, 0, 0, 0, 0, 0, 0x0a, 0xbc, //
        0, 0, 0, 0, 0, 0, 0, 0, //
        0, 0, 0, 8, //
        // payload
        1, 2, 3, 4, 5, 6, 7, 8,
    ];

    #[test]
    fn golden_write_frame() {
        let f = wrap(&UET_WRITE, 0);
        let fr = parse_frame(&f).unwrap();
        assert_eq!(fr.headers.entropy.get(), 0xc001);
        let PdsRepr::Request(r) = fr.pds() else {
            panic!("not a request: {}", fr.pds())
        };
        assert_eq!(r.psn, Psn(336));
        assert_eq!(r.clear_psn(), Psn(335));
        assert_eq!(r.spdcid, PdcId::new(5));
        assert_eq!(r.start_psn(), Some(Psn(336)));
        assert_eq!(
            r.cc.map(|c| c.credit_target),
            Some(Credit24::from_masked(12_500))
        );
        let Some(SesRepr::Standard(s)) = fr.ses() else {
            panic!("no standard request")
        };
        let h = s.header();
        assert_eq!(h.job_id, JobId::new(7).unwrap());
        assert_eq!(h.pid_on_fep, PidOnFep::new(3).unwrap());
        assert_eq!(h.resource_index, ResourceIndex::new(12).unwrap());
        assert_eq!(h.buffer_offset, 4096);
        assert_eq!(h.memory_key, 0xabc);
        assert_eq!(h.request_length, 8);
        assert!(matches!(h.som, SomFields::Start { header_data: 0 }));
        assert_eq!(fr.payload(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(fr.payload_offset(), 42 + 60);
        assert_eq!(fr.uet_range, 42..42 + 68);
        // Build the same UET bytes from Reprs.
        let mut out = [0u8; 68];
        fr.pds().emit(&mut out[..16]);
        fr.ses().unwrap().emit(&mut out[16..60]);
        out[60..].copy_from_slice(fr.payload());
        assert_eq!(out, UET_WRITE);
        let line = fr.to_string();
        assert!(line.contains("RUD_CC_REQ"), "{line}");
        assert!(line.contains("UET_WRITE"), "{line}");
    }

    #[test]
    fn errors_point_into_the_frame() {
        // SES header cut short: the error is at the SES start in the frame.
        let f = wrap(&UET_WRITE[..16 + 20], 0);
        let e = parse_frame(&f).unwrap_err();
        assert_eq!(e.layer, Layer::Ses);
        assert!(matches!(e.kind, ErrorKind::Truncated { .. }));
        assert!(e.offset >= 42 + 16, "{e}");
        // PDS type 0 is reserved.
        let mut bad = UET_WRITE;
        bad[0] = 0x00;
        assert_eq!(
            parse_frame(&wrap(&bad, 0)).unwrap_err(),
            Error::new(Layer::Pds, ErrorKind::Reserved(0), 42)
        );
    }

    #[test]
    fn trimmed_frames_keep_the_pds_header() {
        // What a switch leaves of a trimmed packet: the 16 B PDS header.
        let mut f = wrap(&UET_WRITE, 16);
        let total = 14 + 20 + 24;
        let mut ip = crate::inet::Ipv4Packet::new_checked(&mut f[14..]).unwrap();
        ip.set_total_len(44);
        ip.fill_checksum();
        let fr = parse_frame(&f[..total]).unwrap();
        assert_eq!(fr.headers.trimmed, Some(crate::encap::Trim::Trimmed));
        assert_eq!(fr.pds().ty(), PdsType::RudCcReq);
        assert_eq!(fr.ses(), None);
        assert!(fr.payload().is_empty());
    }

    /// An opened TSS packet (header, plaintext, stale ICV) as the
    /// receive path sees it after `uet-tss` has opened it in place.
    fn opened_tss_uet() -> Vec<u8> {
        // TSS (type 1, SP=0, AN=1, SDI 0x000102, epoch 2, TSC 3), then a UUD
        // request with a small SES request (opcode UET_WRITE, som|eom,
        // job 7, pid 3, ri 12, buffer_offset 0x40), 5 payload bytes, ICV.
        let mut uet = vec![0x09, 0x00, 0x01, 0x02, 0x00, 0x02, 0, 0, 0, 0, 0, 3];
        uet.extend_from_slice(&[0x30, 0x80, 0, 0]); // UUD_REQ, nh = small request
        uet.extend_from_slice(&[
            0x01, 0x03, 0x00, 0x05, 0x00, 0x00, 0x00, 0x07, 0x00, 0x03, 0x00, 0x0c, //
            0, 0, 0, 0, 0, 0, 0, 0x40,
        ]);
        uet.extend_from_slice(&[0xee; 5]);
        uet.extend_from_slice(&[0xaa; TSS_ICV_LEN]);
        uet
    }

    #[test]
    fn opened_tss_packet_is_read_behind_the_header() {
        let uet = opened_tss_uet();
        let u = parse_uet(&uet, false).unwrap();
        let t = u.tss.unwrap();
        assert_eq!(
            (t.sdi.get(), t.epoch, t.tsc.get(), t.an),
            (0x102, 2, 3, true)
        );
        assert_eq!(u.pds.ty(), PdsType::UudReq);
        assert_eq!(u.pds.next_hdr(), Some(NextHeader::RequestSmall));
        assert!(matches!(u.ses, Some(SesRepr::Small(_))), "{:?}", u.ses);
        // The ICV is not payload.
        assert_eq!(u.payload, &[0xee; 5]);
        assert_eq!((u.pds_offset, u.ses_offset, u.payload_offset), (12, 16, 36));
        // Too short to hold the PDS header and an ICV.
        let e = parse_uet(&uet[..12 + 4 + 15], false).unwrap_err();
        assert_eq!(
            (e.layer, e.kind),
            (Layer::Tss, ErrorKind::Truncated { need: 32 })
        );
    }

    #[test]
    fn sealed_frame_splits_into_aad_ciphertext_and_tag() {
        let uet = opened_tss_uet();
        // With a CRC trailer configured the TSS frame has none (the ICV
        // takes its place): the builder is told no trailer, the parser does
        // not look for one behind TSS.
        let f = wrap(&uet, 0);
        let crc_cfg = EncapConfig {
            crc_trailer: true,
            ..EncapConfig::default()
        };
        for cfg in [EncapConfig::default(), crc_cfg] {
            let s = parse_sealed_frame(&f, &cfg).unwrap();
            assert_eq!(s.headers.trailer, None);
            assert_eq!(s.tss.sdi.get(), 0x102);
            // 14 Ethernet + 20 IPv4 + 8 UDP = 42.
            assert_eq!(s.uet_range, 42..42 + uet.len());
            assert_eq!(s.layout.addrs, 26..34);
            assert_eq!(s.layout.flow, 34..38);
            assert_eq!(s.layout.header, 42..54);
            assert_eq!(s.layout.ciphertext, 54..54 + 4 + 20 + 5);
            assert_eq!(s.layout.tag, f.len() - 16..f.len());
            let mut buf = [0u8; tss::MAX_AAD_LEN];
            let aad = s.layout.aad(&f, &mut buf);
            // 10.0.0.1, 10.0.0.2, UDP ports 0xc001 > 4793, the TSS header.
            let want: [u8; 24] = [
                10, 0, 0, 1, 10, 0, 0, 2, 0xc0, 0x01, 0x12, 0xb9, //
                0x09, 0x00, 0x01, 0x02, 0x00, 0x02, 0, 0, 0, 0, 0, 3,
            ];
            assert_eq!(aad, &want[..]);
            assert_eq!(s.layout.aad_len(), 24);
        }
        // A frame without TSS is not a sealed frame.
        let e = parse_sealed_frame(&wrap(&UET_WRITE, 0), &EncapConfig::default()).unwrap_err();
        assert_eq!(
            (e.layer, e.kind, e.offset),
            (Layer::Tss, ErrorKind::OutOfRange, 42)
        );
        assert!(is_tss(&uet) && !is_tss(&UET_WRITE) && !is_tss(&[]));
    }

    #[test]
    fn next_hdr_none_has_no_ses() {
        let r = req::Repr {
            mode: ReliableMode::Rud,
            next_hdr: NextHeader::None,
            retx: false,
            ar: true,
            clear_psn_offset: 0,
            psn: Psn(1),
            spdcid: PdcId::new(1),
            dpdcid: req::DpdcidField::Dpdcid(PdcId::new(2)),
            cc: None,
        };
        let mut b = [0u8; 12];
        PdsRepr::from(r).emit(&mut b);
        let u = parse_uet(&b, false).unwrap();
        assert_eq!(u.ses, None);
        assert_eq!(u.payload_offset, 12);
    }

    fn uet_packet() -> impl Strategy<Value = Vec<u8>> {
        (
            crate::pds::tests::pds_repr(),
            proptest::option::of(crate::ses::testutil::arb_ses_repr()),
            proptest::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(|(pds, ses, payload)| {
                let mut b = vec![0u8; pds.buffer_len()];
                pds.emit(&mut b);
                // Make next_hdr announce the SES header that follows (a CP's
                // slot is ctl_type: it carries none).
                let ses = if pds.next_hdr().is_some() { ses } else { None };
                if pds.next_hdr().is_some() {
                    let nh = ses.as_ref().map_or(NextHeader::None, SesRepr::next_hdr);
                    let mut pro = crate::pds::prologue::Packet::new_unchecked(&mut b[..2]);
                    let (ty, flags) = (pro.type_raw(), pro.flags());
                    pro.set(ty, nh.code(), flags);
                }
                if let Some(s) = ses {
                    let mut sb = vec![0u8; s.buffer_len()];
                    s.emit(&mut sb);
                    b.extend_from_slice(&sb);
                }
                b.extend_from_slice(&payload);
                b
            })
    }

    /// How many random inputs the never-panics properties run: a CI-sized
    /// default; `UET_FUZZ_CASES=1000000 cargo test -p uet-wire --release
    /// frame::` is the full run recorded in BENCHMARKS.md.
    fn fuzz_cases() -> u32 {
        std::env::var("UET_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(20_000)
    }

    /// A RUD or ROD write request takes the common-request step; a CC
    /// request, a bad SES version and a trimmed packet do not.
    #[test]
    fn common_request_step_takes_the_data_packets() {
        let ses = crate::ses::SesStandardRepr {
            opcode: Opcode::Write,
            flags: crate::ses::RequestFlags {
                dc: false,
                ie: false,
                rel: true,
                eom: false,
            },
            hd: false,
            som: SomFields::Continuation {
                payload_length: crate::Len14::from_masked(8),
                message_offset: 4096,
            },
            message_id: crate::MessageId::from_masked(9),
            ri_generation: crate::RiGeneration::from_masked(1),
            job_id: JobId::from_masked(7),
            pid_on_fep: PidOnFep::from_masked(3),
            resource_index: ResourceIndex::from_masked(12),
            buffer_offset: 0,
            initiator: 0,
            memory_key: 0xabc,
            request_length: 1 << 20,
        };
        for (mode, cc) in [
            (ReliableMode::Rud, None),
            (ReliableMode::Rod, None),
            (
                ReliableMode::Rud,
                Some(req::ReqCcState {
                    ccc_id: crate::CccId::from_masked(0),
                    credit_target: Credit24::from_masked(5),
                }),
            ),
        ] {
            let pds = PdsRepr::Request(req::Repr {
                mode,
                next_hdr: NextHeader::RequestStd,
                retx: false,
                ar: true,
                clear_psn_offset: -3,
                psn: Psn(77),
                spdcid: PdcId::new(1),
                dpdcid: req::DpdcidField::Dpdcid(PdcId::new(2)),
                cc,
            });
            let mut b = vec![0u8; pds.buffer_len() + 44 + 8];
            pds.emit(&mut b);
            StandardRequest::new(ses, None)
                .unwrap()
                .emit(&mut b[pds.buffer_len()..]);
            let general = parse_uet_general(&b, false).unwrap();
            assert_eq!(parse_common_request(&b).is_some(), cc.is_none(), "{mode:?}");
            assert_eq!(parse_uet(&b, false).unwrap(), general);
            assert_eq!(general.payload.len(), 8);
            assert_eq!(parse_uet(&b, true), parse_uet_general(&b, true));
            // Version 1 in the SES header: the general parser's error.
            b[pds.buffer_len() + 1] |= 0x40;
            assert!(parse_common_request(&b).is_none());
            assert!(parse_uet(&b, false).is_err());
            assert_eq!(parse_uet(&b, false), parse_uet_general(&b, false));
        }
    }

    /// An ACK_CC without SES response takes the ACK step; with one (or
    /// trimmed) it does not.
    #[test]
    fn ack_step_takes_plain_ack_cc() {
        // ACK_CC (credit state), as in the ack.rs golden vector, plus 3 bytes.
        let mut b = vec![
            0x40, 0x02, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8, 0x00, 0x07, 0x00, 0x05, //
            0x10, 0x00, 0x00, 0x00, //
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
            0x00, 0x61, 0xa8, 0x00, 0x00, 0x00, 0x00, 0x00, 1, 2, 3,
        ];
        let general = parse_uet_general(&b, false).unwrap();
        assert_eq!(parse_common_ack(&b), Some(general));
        assert_eq!(parse_uet(&b, false).unwrap(), general);
        assert_eq!(general.payload, &[1, 2, 3]);
        assert_eq!(parse_uet(&b, true), parse_uet_general(&b, true));
        // next_hdr = UET_HDR_RESPONSE: the general parser reads the SES part.
        let mut pro = crate::pds::prologue::Packet::new_unchecked(&mut b[..2]);
        let (ty, flags) = (pro.type_raw(), pro.flags());
        pro.set(ty, NextHeader::Response.code(), flags);
        assert_eq!(parse_common_ack(&b), None);
        assert_eq!(parse_uet(&b, false), parse_uet_general(&b, false));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: fuzz_cases(), ..ProptestConfig::default() })]

        /// The first steps of `parse_uet` (common request, ACK_CC) give
        /// what the general parser gives wherever they answer; `parse_uet` as a whole
        /// gives what the general parser gives on valid packets, flipped
        /// bytes and cuts.
        #[test]
        fn common_request_step_agrees_with_general_parser(
            uet in uet_packet(),
            flip in proptest::option::of((any::<prop::sample::Index>(), any::<u8>())),
            cut in proptest::option::of(any::<prop::sample::Index>()),
            trimmed: bool,
        ) {
            let mut b = uet;
            if let Some((i, v)) = flip
                && !b.is_empty()
            {
                let i = i.index(b.len());
                b[i] = v;
            }
            if let Some(c) = cut {
                b.truncate(c.index(b.len() + 1));
            }
            if let Some(fast) = parse_common_request(&b) {
                prop_assert_eq!(Ok(fast), parse_uet_general(&b, false));
            }
            if let Some(fast) = parse_common_ack(&b) {
                prop_assert_eq!(Ok(fast), parse_uet_general(&b, false));
            }
            prop_assert_eq!(parse_uet(&b, trimmed), parse_uet_general(&b, trimmed));
        }

        /// Arbitrary bytes never panic any parser.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256),
                                       crc: bool, trimmed: bool) {
            let cfg = EncapConfig { crc_trailer: crc, ..EncapConfig::default() };
            if let Ok(f) = parse_frame_with(&bytes, &cfg) {
                let _ = f.to_string();
            }
            if let Ok(u) = parse_uet(&bytes, trimmed) {
                prop_assert!(u.payload_offset <= bytes.len() || u.payload.is_empty());
                let _ = u.to_string();
            }
        }

        /// Valid frames with one mutated, cut or extended region never
        /// panic, and an unmutated frame parses back to what was built.
        #[test]
        fn mutated_frames_never_panic((eth, ip, t, mut cfg, _) in crate::encap::tests::arb_frame(),
                                      uet in uet_packet(),
                                      flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..), 0..4),
                                      cut in proptest::option::of(any::<prop::sample::Index>())) {
            cfg.dscp_trimmed = None;
            cfg.dscp_trimmed_lasthop = None;
            let n = frame_len(&eth, &ip, &t, &cfg, uet.len());
            let mut buf = vec![0u8; n];
            emit_frame(&eth, &ip, &t, &cfg, uet.len(), &mut buf, |u| u.copy_from_slice(&uet)).unwrap();
            let clean = parse_frame_with(&buf, &cfg).unwrap();
            prop_assert_eq!(&buf[clean.uet_range.clone()], &uet[..]);
            let again = parse_uet(&uet, false).unwrap();
            prop_assert_eq!(clean.uet, again);
            for (i, x) in flips {
                let i = i.index(n);
                buf[i] ^= x;
            }
            if let Some(c) = cut {
                buf.truncate(c.index(n + 1));
            }
            if let Ok(f) = parse_frame_with(&buf, &cfg) {
                prop_assert!(f.uet_range.end <= buf.len());
                let _ = f.to_string();
            }
        }
    }
}
