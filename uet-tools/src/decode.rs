//! `uet decode`: frames to one line of text or one JSON object each.
//!
//! The JSON shape: `{"ip": {"src","dst","dscp","ecn"},
//! "udp": {"src_port","dst_port"}, "pds": {"type", "next_hdr", "flags":
//! {…}, <fields>}, "ses": {"opcode", <fields>}, "payload_len": n}`, every
//! field by its spec name (`docs/protocol-notes.md` §1, §2, §4) in snake_case. A
//! frame that does not parse becomes `{"error": "<layer>: <what> at byte
//! <n>"}` (the `Display` of [`uet_wire::Error`]).
//!
//! The full object, key by key:
//!
//! | key | when | content |
//! |---|---|---|
//! | `frame_len` | always | bytes in the frame |
//! | `eth` | always | `src`, `dst`, `ethertype`, `vlan` (`null` or `{vid, pcp, dei}`) |
//! | `ip` | always | `version`, `src`, `dst`, `dscp`, `ecn` (RFC 3168 name: `Not-ECT`, `ECT(0)`, `ECT(1)`, `CE`), `payload_len`; IPv4: `ttl`, `protocol`, `ident`, `dont_frag`; IPv6: `hop_limit`, `next_header`, `flow_label` |
//! | `udp` | UET over UDP | `src_port`, `dst_port` |
//! | `entropy` | always | the entropy value: the UDP source port, or the entropy header of UET directly over IP (§1) |
//! | `transport_pktsize` | always | §1: UDP length, or entropy header to trailer end |
//! | `tss` | TSS present | `sdi`, `sp`, `ssi`, `an`, `epoch`, `tsc`, `header_len`, `ciphertext_len`; everything after the TSS header (PDS, SES, payload) is ciphertext and not decoded |
//! | `pds` | no TSS | see [`pds`] |
//! | `ses` | an SES header follows | see [`ses`] |
//! | `payload_len` | no TSS | bytes after the SES header, before the trailer |
//! | `trimmed` | trimmed packet (DSCP) | `"TRIMMED"` or `"TRIMMED_LASTHOP"` |
//! | `crc32c` | CRC trailer verified (`--crc`) | the trailer, as a hex string |
//! | `captured_len` | the capture kept less than the frame | bytes captured; `frame_len` is then the length on the wire |
//!
//! A frame cut by a capture's snap length ([`captured_frame_json`]) is
//! decoded as far as it was captured: every header that lies wholly inside
//! the captured bytes, and the lengths (`payload_len`, `transport_pktsize`,
//! …) as the headers give them. What lies beyond the cut is not checked —
//! the UDP checksum and the CRC trailer — so `crc32c` is absent. A cut
//! inside the headers is an error: `capture: headers cut by the snap length
//! (captured M of N bytes) at byte M`.
//!
//! Conventions: enumerations are strings in their spec spelling (their
//! `Display`, so a reserved value keeps its number, e.g.
//! `"UNKNOWN(0x1b)"`); flag bits are booleans in a `flags` object; PSNs,
//! IDs, lengths and offsets are numbers; opaque bit patterns (SACK bitmap,
//! memory keys and match bits, header data, CC extension state) are hex
//! strings. Values derived from other fields (`clear_psn`, `ack_psn`,
//! `sack_base`, `start_psn`, …) sit next to the fields they come from and are
//! named after the spec quantity they compute. Keys come out sorted (the
//! `serde_json` map is ordered by key).

use serde_json::{Map, Value, json};
use uet_wire::encap::{EncapConfig, Transport, Trim, append_crc_trailer, parse_l2_l4};
use uet_wire::inet::{EtherType, EthernetPacket, EthernetRepr, IpRepr, Ipv4Packet, Ipv6Packet};
use uet_wire::pds::TssRepr;
use uet_wire::{Frame, SealedFrame, is_tss, parse_frame_with, parse_sealed_frame};

pub mod pds;
pub mod ses;

#[cfg(test)]
mod tests;

/// A JSON object under construction.
type Obj = Map<String, Value>;

/// Decodes one frame (starting at the Ethernet header) into its JSON object,
/// or `{"error": …}` when it does not parse.
#[must_use]
pub fn frame_json(frame: &[u8], cfg: &EncapConfig) -> Value {
    if sealed(frame, cfg) {
        return match parse_sealed_frame(frame, cfg) {
            Ok(s) => sealed_to_json(&s, frame.len()),
            Err(e) => error_json(&e),
        };
    }
    match parse_frame_with(frame, cfg) {
        Ok(f) => frame_to_json(&f, frame.len()),
        Err(e) => error_json(&e),
    }
}

/// Decodes one frame into one line of text: the `Display` of
/// [`uet_wire::Frame`], or `error: <layer>: <what> at byte <n>`.
#[must_use]
pub fn frame_text(frame: &[u8], cfg: &EncapConfig) -> String {
    if sealed(frame, cfg) {
        return match parse_sealed_frame(frame, cfg) {
            Ok(s) => format!(
                "{} | {} | ciphertext {}",
                s.headers,
                s.tss,
                s.layout.ciphertext.len()
            ),
            Err(e) => format!("error: {e}"),
        };
    }
    match parse_frame_with(frame, cfg) {
        Ok(f) => f.to_string(),
        Err(e) => format!("error: {e}"),
    }
}

/// Whether the frame is UET whose bytes begin with a TSS header: as
/// captured, everything behind that header is ciphertext.
fn sealed(frame: &[u8], cfg: &EncapConfig) -> bool {
    parse_l2_l4(frame, cfg).is_ok_and(|(_, r)| frame.get(r).is_some_and(is_tss))
}

/// The JSON object of a secured frame: the headers in the clear and the
/// TSS header; the rest is ciphertext.
#[must_use]
pub fn sealed_to_json(s: &SealedFrame, frame_len: usize) -> Value {
    let mut o = Obj::new();
    headers_json(&mut o, &s.headers, frame_len);
    let mut t = tss_json(&s.tss);
    if let Value::Object(m) = &mut t {
        put(m, "ciphertext_len", s.layout.ciphertext.len());
    }
    put(&mut o, "tss", t);
    Value::Object(o)
}

/// Decodes a frame of which a capture kept the first `data.len()` of its
/// `orig_len` bytes (a pcap record's `incl_len` and `orig_len`): the frame
/// as [`frame_json`] when it is whole, else as far as it was captured, with
/// `captured_len` (see the module docs).
#[must_use]
pub fn captured_frame_json(data: &[u8], orig_len: usize, cfg: &EncapConfig) -> Value {
    if orig_len <= data.len() {
        return frame_json(data, cfg);
    }
    let padded = pad_cut_frame(data, orig_len, cfg);
    if sealed(&padded, cfg) {
        return match parse_sealed_frame(&padded, cfg) {
            Ok(s) if s.layout.ciphertext.start <= data.len() => {
                let mut v = sealed_to_json(&s, orig_len);
                if let Some(o) = v.as_object_mut() {
                    put(o, "captured_len", data.len());
                }
                v
            }
            Ok(_) => json!({ "error": cut_error(data.len(), orig_len) }),
            Err(e) => error_json(&e),
        };
    }
    match parse_cut(&padded, data.len(), cfg) {
        Ok(f) => {
            let mut v = frame_to_json(&f, orig_len);
            if let Some(o) = v.as_object_mut() {
                put(o, "captured_len", data.len());
            }
            v
        }
        Err(e) => json!({ "error": e }),
    }
}

/// [`captured_frame_json`] as one line of text: [`frame_text`] of a whole
/// frame; for a cut one the decoded headers and ` | captured M of N bytes`.
#[must_use]
pub fn captured_frame_text(data: &[u8], orig_len: usize, cfg: &EncapConfig) -> String {
    if orig_len <= data.len() {
        return frame_text(data, cfg);
    }
    let padded = pad_cut_frame(data, orig_len, cfg);
    match parse_cut(&padded, data.len(), cfg) {
        Ok(f) => format!("{f} | captured {} of {orig_len} bytes", data.len()),
        Err(e) => format!("error: {e}"),
    }
}

/// Parses a cut frame filled by [`pad_cut_frame`]: the frame when every
/// header lies inside the `captured` bytes (its trailer, never captured,
/// left out), else the error message.
fn parse_cut<'a>(
    padded: &'a [u8],
    captured: usize,
    cfg: &EncapConfig,
) -> Result<Frame<'a>, String> {
    match parse_frame_with(padded, cfg) {
        Ok(mut f) if f.payload_offset() <= captured => {
            f.headers.trailer = None;
            Ok(f)
        }
        Ok(_) => Err(cut_error(captured, padded.len())),
        Err(e) if e.offset >= captured => Err(cut_error(captured, padded.len())),
        Err(e) => Err(e.to_string()),
    }
}

fn cut_error(captured: usize, orig_len: usize) -> String {
    format!(
        "capture: headers cut by the snap length (captured {captured} of {orig_len} bytes) at byte {captured}"
    )
}

/// The captured bytes of a cut frame, zero-filled to its length on the
/// wire, so the frame parser sees the lengths the headers announce. The
/// checks over bytes that were not captured are neutralised: the UDP
/// checksum is set to zero (which means "not computed") and, with a trailer
/// configured, the trailer is recomputed over the filled frame. Headers the
/// parser then reads from the fill are refused by the caller (they end
/// beyond `data.len()`).
fn pad_cut_frame(data: &[u8], orig_len: usize, cfg: &EncapConfig) -> Vec<u8> {
    let mut b = data.to_vec();
    b.resize(orig_len, 0);
    let Ok(eth) = EthernetPacket::new_checked(&b[..]) else {
        return b;
    };
    let l3 = eth.header_len();
    let (l4, protocol, ip_end) = match eth.ethertype() {
        EtherType::Ipv4 => match Ipv4Packet::new_checked(&b[l3..]) {
            Ok(p) => (
                l3 + p.header_len(),
                p.protocol(),
                l3 + usize::from(p.total_len()),
            ),
            Err(_) => return b,
        },
        EtherType::Ipv6 => match Ipv6Packet::new_checked(&b[l3..]) {
            Ok(p) => (
                l3 + 40,
                p.next_header(),
                l3 + 40 + usize::from(p.payload_len()),
            ),
            Err(_) => return b,
        },
        _ => return b,
    };
    if protocol == 17 && l4 + 8 <= data.len() {
        b[l4 + 6..l4 + 8].fill(0);
    }
    if cfg.crc_trailer {
        let _ = append_crc_trailer(&mut b[l3..ip_end]);
    }
    b
}

/// The error object of a frame that does not parse.
#[must_use]
pub fn error_json(e: &uet_wire::Error) -> Value {
    json!({ "error": e.to_string() })
}

/// The JSON object of a parsed frame; `frame_len` is the length of the
/// buffer it was parsed from.
#[must_use]
pub fn frame_to_json(f: &Frame<'_>, frame_len: usize) -> Value {
    let h = &f.headers;
    let mut o = Obj::new();
    headers_json(&mut o, h, frame_len);
    if let Some(t) = &f.uet.tss {
        put(&mut o, "tss", tss_json(t));
    }
    put(&mut o, "pds", pds::pds_json(&f.uet.pds));
    if let Some(s) = &f.uet.ses {
        put(&mut o, "ses", ses::ses_json(s));
    }
    put(&mut o, "payload_len", f.uet.payload.len());
    if let Some(t) = h.trimmed {
        put(&mut o, "trimmed", trim_name(t));
    }
    if let Some(crc) = h.trailer {
        put(&mut o, "crc32c", format!("{crc:#010x}"));
    }
    Value::Object(o)
}

/// The keys every frame has: `frame_len`, `eth`, `ip`, `udp`, `entropy`,
/// `transport_pktsize`.
fn headers_json(o: &mut Obj, h: &uet_wire::encap::Headers, frame_len: usize) {
    put(o, "frame_len", frame_len);
    put(o, "eth", eth_json(&h.ethernet));
    put(o, "ip", ip_json(&h.ip));
    if let Transport::Udp { src_port, dst_port } = h.transport {
        put(
            o,
            "udp",
            json!({ "src_port": src_port, "dst_port": dst_port }),
        );
    }
    put(o, "entropy", h.entropy.get());
    put(o, "transport_pktsize", h.transport_pktsize);
}

/// The spec-style name of a trim state (after the NACK codes `UET_TRIMMED`
/// and `UET_TRIMMED_LASTHOP`, §2.9).
const fn trim_name(t: Trim) -> &'static str {
    match t {
        Trim::Trimmed => "TRIMMED",
        Trim::LastHop => "TRIMMED_LASTHOP",
    }
}

fn eth_json(e: &EthernetRepr) -> Value {
    let vlan = e.vlan.map_or(
        Value::Null,
        |t| json!({ "vid": t.vid(), "pcp": t.pcp(), "dei": t.dei() }),
    );
    json!({
        "src": e.src.to_string(),
        "dst": e.dst.to_string(),
        "ethertype": e.ethertype.to_string(),
        "vlan": vlan,
    })
}

fn ip_json(ip: &IpRepr) -> Value {
    match ip {
        IpRepr::V4(r) => json!({
            "version": 4,
            "src": r.src.to_string(),
            "dst": r.dst.to_string(),
            "dscp": r.dscp.get(),
            "ecn": r.ecn.name(),
            "ttl": r.ttl,
            "protocol": r.protocol,
            "ident": r.ident,
            "dont_frag": r.dont_frag,
            "payload_len": r.payload_len,
        }),
        IpRepr::V6(r) => json!({
            "version": 6,
            "src": r.src.to_string(),
            "dst": r.dst.to_string(),
            "dscp": r.dscp.get(),
            "ecn": r.ecn.name(),
            "hop_limit": r.hop_limit,
            "next_header": r.next_header,
            "flow_label": r.flow_label.get(),
            "payload_len": r.payload_len,
        }),
    }
}

fn tss_json(t: &TssRepr) -> Value {
    json!({
        "sdi": t.sdi.get(),
        "sp": t.ssi.is_some(),
        "ssi": t.ssi,
        "an": t.an,
        "epoch": t.epoch,
        "tsc": t.tsc.get(),
        "header_len": t.buffer_len(),
    })
}

/// Inserts `key: value` into `o`.
fn put(o: &mut Obj, key: &str, value: impl Into<Value>) {
    o.insert(key.to_owned(), value.into());
}

/// A 64-bit bit pattern as a fixed-width hex string (`0x` + 16 digits).
fn hex64(v: u64) -> String {
    format!("{v:#018x}")
}

/// A value as a hex string without padding (`0xabc`).
fn hex(v: impl std::fmt::LowerHex) -> String {
    format!("{v:#x}")
}

/// Parses a hex string; whitespace, `:`/`-` separators and a `0x` prefix are
/// ignored.
pub fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim();
    let s = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    let digits: Vec<u8> = s
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b':' && *b != b'-')
        .collect();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits ({})", digits.len()));
    }
    digits
        .chunks(2)
        .enumerate()
        .map(|(i, pair)| {
            let hi = hex_val(pair[0]).ok_or_else(|| bad_digit(pair[0], 2 * i))?;
            let lo = hex_val(pair[1]).ok_or_else(|| bad_digit(pair[1], 2 * i + 1))?;
            Ok(hi << 4 | lo)
        })
        .collect()
}

fn hex_val(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

fn bad_digit(c: u8, at: usize) -> String {
    format!("{:?} is not a hex digit (digit {at})", c as char)
}
