//! The Wireshark dissector `contrib/wireshark/uet.lua` against `uet decode
//! --json`, field by field: Debian's tshark runs the dissector over the
//! sample capture, over a copy of it cut to a snap length, and over live
//! captures of two daemons in namespaces (UET over UDP, and UET over IP with
//! the CRC32C trailer); every key `uet decode` prints must be a field of
//! the same value in tshark's output, and every `uet.*` field tshark prints
//! must be a key `uet decode` printed. tshark is required: the tests fail,
//! naming the package, when it is missing (`.ci/run` installs it).
//!
//! How keys map: a UET key `a.b.c` is the field `uet.a.b.c`; `frame_len`,
//! `captured_len` and the `eth`, `ip` and `udp` objects are Wireshark's own
//! fields ([`lower_layer`]). How values compare: numbers and booleans by
//! value, hex strings (`0x…`) as numbers against Wireshark's hex or byte
//! strings, other strings exactly, lists element by element. A frame
//! `uet decode` refuses (`{"error": …}`) must carry an error-level expert
//! info of the dissector (or, when a snap length cut it below the UET
//! layer, Wireshark's own "packet size limited" mark), and a frame it
//! accepts none.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::{Pair, Uetd, field, serve, wait_for_socket};
use serde_json::Value;

/// Field name → the values of its occurrences in one frame.
type Fields = BTreeMap<String, Vec<String>>;

/// The dissector's expert infos that mean "`uet decode` refuses this".
const ERROR_EXPERTS: [&str; 3] = ["uet.malformed", "uet.snapped", "uet.bad_crc"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// tshark, or a failure that says which package brings it.
fn tshark() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("tshark"))
        .find(|p| p.is_file())
        .expect("tshark is missing: install the Debian package `tshark` (.ci/run installs it)")
}

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Runs tshark with the dissector over `pcap`, with `prefs` (`name:value`
/// of the `uet` protocol), and returns every frame's fields.
fn dissect(pcap: &Path, prefs: &[&str]) -> Vec<Fields> {
    let lua = root().join("contrib/wireshark/uet.lua");
    let mut cmd = Command::new(tshark());
    cmd.arg("-X")
        .arg(format!("lua_script:{}", lua.display()))
        .arg("-r")
        .arg(pcap)
        .args(["-T", "json", "--no-duplicate-keys"]);
    for p in prefs {
        cmd.args(["-o", &format!("uet.{p}")]);
    }
    let out = ok(&cmd.output().expect("run tshark"), "tshark");
    let packets: Vec<Value> = serde_json::from_str(&out).expect("tshark -T json");
    packets
        .iter()
        .map(|p| {
            let mut f = Fields::new();
            flatten(&p["_source"]["layers"], &mut f);
            f
        })
        .collect()
}

/// Collects the named values of tshark's JSON tree, at any depth.
fn flatten(v: &Value, out: &mut Fields) {
    let Some(o) = v.as_object() else { return };
    for (k, v) in o {
        match v {
            Value::String(s) => out.entry(k.clone()).or_default().push(s.clone()),
            Value::Array(items) => {
                for i in items {
                    match i {
                        Value::String(s) => out.entry(k.clone()).or_default().push(s.clone()),
                        other => flatten(other, out),
                    }
                }
            }
            Value::Object(_) => flatten(v, out),
            _ => {}
        }
    }
}

/// `uet decode --json` over `pcap`, one object per frame.
fn decode(pcap: &Path, args: &[&str]) -> Vec<Value> {
    let out = Command::new(uet_lab::uet_bin().expect("the uet binary"))
        .args(["decode", "--json", "--pcap"])
        .arg(pcap)
        .args(args)
        .output()
        .unwrap();
    ok(&out, "uet decode")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The leaves of a decoded frame: path → value (objects flattened with
/// dots; lists and scalars are leaves).
fn leaves(v: &Value, path: &str, out: &mut BTreeMap<String, Value>) {
    match v {
        Value::Object(o) => {
            for (k, v) in o {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                leaves(v, &p, out);
            }
        }
        other => {
            out.insert(path.to_owned(), other.clone());
        }
    }
}

/// Whether `path` names an object in the decoded frame.
fn is_object(v: &Value, path: &str) -> bool {
    path.split('.')
        .try_fold(v, |v, k| v.get(k))
        .is_some_and(Value::is_object)
}

/// A tshark integer: decimal, `0x` hex, or `aa:bb:…` bytes.
fn ws_int(s: &str) -> Option<u128> {
    if let Some(h) = s.strip_prefix("0x") {
        u128::from_str_radix(h, 16).ok()
    } else if s.contains(':') {
        u128::from_str_radix(&s.replace(':', ""), 16).ok()
    } else {
        s.parse().ok()
    }
}

/// Whether tshark's rendering `ws` of a field says what `want` says.
fn same(want: &Value, ws: &str) -> bool {
    match want {
        Value::Bool(b) => matches!((b, ws), (true, "1" | "True") | (false, "0" | "False")),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => ws_int(ws) == Some(u128::from(u)),
            (None, Some(i)) => ws.parse::<i64>().is_ok_and(|w| w == i),
            _ => false,
        },
        Value::String(s) => match s.strip_prefix("0x") {
            Some(h) => u128::from_str_radix(h, 16)
                .ok()
                .is_some_and(|v| ws_int(ws) == Some(v)),
            None => s == ws,
        },
        _ => false,
    }
}

/// The ECN codepoint of an RFC 3168 name.
fn ecn_code(name: &str) -> &'static str {
    match name {
        "Not-ECT" => "0",
        "ECT(1)" => "1",
        "ECT(0)" => "2",
        "CE" => "3",
        _ => "?",
    }
}

/// The Wireshark values standing for a key below the UET layer, or `None`
/// when the key is not one of them. `Some(vec![])` means "absent".
fn lower_layer(path: &str, want: &Value, ws: &Fields) -> Option<Vec<String>> {
    let one = |k: &str| ws.get(k).and_then(|v| v.last().cloned());
    let v6 = ws.contains_key("ipv6.version");
    let pick = |v4: &str, v6k: &str| one(if v6 { v6k } else { v4 });
    let got = match path {
        "frame_len" => one("frame.len"),
        "captured_len" => one("frame.cap_len"),
        "eth.src" => one("eth.src"),
        "eth.dst" => one("eth.dst"),
        "eth.ethertype" => {
            let t = one("vlan.etype").or_else(|| one("eth.type"));
            t.map(|t| match t.as_str() {
                "0x0800" => "IPv4".to_owned(),
                "0x86dd" => "IPv6".to_owned(),
                other => other.to_owned(),
            })
        }
        "eth.vlan" if want.is_null() => {
            return Some(ws.get("vlan.id").cloned().unwrap_or_default());
        }
        "eth.vlan.vid" => one("vlan.id"),
        "eth.vlan.pcp" => one("vlan.priority"),
        "eth.vlan.dei" => one("vlan.dei"),
        "ip.version" => pick("ip.version", "ipv6.version"),
        "ip.src" => pick("ip.src", "ipv6.src"),
        "ip.dst" => pick("ip.dst", "ipv6.dst"),
        "ip.dscp" => pick("ip.dsfield.dscp", "ipv6.tclass.dscp"),
        "ip.ecn" => {
            let code = pick("ip.dsfield.ecn", "ipv6.tclass.ecn");
            // Compare names: the codepoint tshark shows, named.
            return Some(vec![match (code, want.as_str()) {
                (Some(c), Some(w)) if c == ecn_code(w) => w.to_owned(),
                (c, _) => format!("codepoint {c:?}"),
            }]);
        }
        "ip.ttl" => one("ip.ttl"),
        "ip.protocol" => one("ip.proto"),
        "ip.ident" => one("ip.id"),
        "ip.dont_frag" => one("ip.flags.df"),
        "ip.payload_len" if v6 => one("ipv6.plen"),
        "ip.payload_len" => {
            let len: Option<u64> = one("ip.len").and_then(|v| v.parse().ok());
            let hl: Option<u64> = one("ip.hdr_len").and_then(|v| v.parse().ok());
            len.zip(hl).map(|(l, h)| (l - h).to_string())
        }
        "ip.hop_limit" => one("ipv6.hlim"),
        "ip.next_header" => one("ipv6.nxt"),
        "ip.flow_label" => one("ipv6.flow"),
        "udp.src_port" => one("udp.srcport"),
        "udp.dst_port" => one("udp.dstport"),
        _ => return None,
    };
    Some(got.into_iter().collect())
}

/// Every disagreement between one decoded frame and tshark's fields for
/// it, as readable lines (empty when they agree).
fn compare(want: &Value, ws: &Fields) -> Vec<String> {
    let mut diffs = Vec::new();
    let errors: Vec<&str> = ERROR_EXPERTS
        .iter()
        .copied()
        .filter(|e| ws.contains_key(*e))
        .collect();
    if let Some(e) = want.get("error") {
        // A snap length that cuts below the UET layer leaves Wireshark no
        // UET bytes to dissect; it says so itself.
        let cut_below = !ws.keys().any(|k| k.starts_with("uet.")) && ws.contains_key("_ws.short");
        if errors.is_empty() && !cut_below {
            diffs.push(format!(
                "uet decode refuses the frame ({e}), the dissector does not"
            ));
        }
        return diffs;
    }
    if !errors.is_empty() {
        diffs.push(format!(
            "the dissector flags {errors:?} ({:?}), uet decode decodes the frame",
            ws.get("_ws.expert.message")
        ));
    }
    let mut want_leaves = BTreeMap::new();
    leaves(want, "", &mut want_leaves);
    for (path, v) in &want_leaves {
        let got = lower_layer(path, v, ws)
            .unwrap_or_else(|| ws.get(&format!("uet.{path}")).cloned().unwrap_or_default());
        let agree = match v {
            Value::Null => got.is_empty(),
            Value::Array(items) => {
                items.len() == got.len() && items.iter().zip(&got).all(|(w, g)| same(w, g))
            }
            scalar => got.len() == 1 && same(scalar, &got[0]),
        };
        if !agree {
            diffs.push(format!("{path}: uet decode {v}, tshark {got:?}"));
        }
    }
    for (k, values) in ws {
        let Some(path) = k.strip_prefix("uet.") else {
            continue;
        };
        if ERROR_EXPERTS.contains(&k.as_str()) || path.starts_with("trimmed.") {
            continue;
        }
        if !want_leaves.contains_key(path) && !is_object(want, path) {
            diffs.push(format!("{path}: tshark {values:?}, not in uet decode"));
        }
    }
    diffs
}

/// Compares a whole capture; panics with every disagreement.
fn assert_agree(pcap: &Path, decode_args: &[&str], prefs: &[&str]) -> Vec<Value> {
    let want = decode(pcap, decode_args);
    let got = dissect(pcap, prefs);
    assert_eq!(want.len(), got.len(), "frames in {}", pcap.display());
    let mut report = Vec::new();
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        for d in compare(w, g) {
            report.push(format!("frame {i}: {d}"));
        }
    }
    assert!(
        report.is_empty(),
        "{}: the dissector and uet decode disagree:\n{}",
        pcap.display(),
        report.join("\n")
    );
    want
}

fn sample() -> PathBuf {
    root().join("samples/uet-sample.pcap")
}

#[test]
fn sample_capture_fields_match_uet_decode() {
    let frames = assert_agree(&sample(), &[], &[]);
    // The comparison saw every kind of frame the sample holds.
    assert!(frames.iter().any(|f| f.get("error").is_some()));
    assert!(frames.iter().any(|f| f.get("trimmed").is_some()));
    assert!(frames.iter().any(|f| f.get("udp").is_none()));
}

#[test]
fn a_field_that_differs_is_reported() {
    let want = decode(&sample(), &[]);
    let got = dissect(&sample(), &[]);
    assert!(compare(&want[0], &got[0]).is_empty());
    // One value off: that field, and nothing else.
    let mut off = want[0].clone();
    off["pds"]["psn"] = Value::from(off["pds"]["psn"].as_u64().unwrap() + 1);
    let d = compare(&off, &got[0]);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(
        d[0].starts_with("pds.psn: uet decode 337, tshark [\"336\"]"),
        "{d:?}"
    );
    // A key uet decode prints that the dissector lacks, and the reverse.
    let mut extra = want[0].clone();
    extra["ses"]["no_such_key"] = Value::from(1);
    assert_eq!(compare(&extra, &got[0]).len(), 1);
    let mut fewer = want[0].clone();
    fewer["ses"].as_object_mut().unwrap().remove("initiator");
    let d = compare(&fewer, &got[0]);
    assert_eq!(d, ["ses.initiator: tshark [\"1\"], not in uet decode"]);
    // A refused frame must be flagged, a decoded one must not.
    let err = serde_json::json!({ "error": "PDS: reserved value 0 at byte 42" });
    assert_eq!(compare(&err, &got[0]).len(), 1);
}

/// A copy of `pcap` whose records keep at most `snaplen` bytes (their
/// original length unchanged), as a capture with that snap length writes.
fn cut_copy(pcap: &Path, snaplen: usize, out: &Path) {
    use pcap_file::pcap::{PcapHeader, PcapReader, PcapWriter, RawPcapPacket};
    let mut r = PcapReader::new(std::fs::File::open(pcap).unwrap()).unwrap();
    let header = PcapHeader {
        snaplen: u32::try_from(snaplen).unwrap(),
        ..r.header()
    };
    let mut w = PcapWriter::with_header(std::fs::File::create(out).unwrap(), header).unwrap();
    while let Some(p) = r.next_raw_packet() {
        let p = p.unwrap();
        let keep = p.data.len().min(snaplen);
        let cut = RawPcapPacket {
            incl_len: u32::try_from(keep).unwrap(),
            data: std::borrow::Cow::Borrowed(&p.data[..keep]),
            ..p.clone()
        };
        w.write_raw_packet(&cut).unwrap();
    }
}

#[test]
fn sample_cut_by_a_snap_length_matches_uet_decode() {
    let dir = std::env::temp_dir().join(format!("uet-ws-cut-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for snaplen in [128, 100, 60] {
        let cut = dir.join(format!("cut{snaplen}.pcap"));
        cut_copy(&sample(), snaplen, &cut);
        let frames = assert_agree(&cut, &[], &[]);
        let count = |p: &dyn Fn(&Value) -> bool| frames.iter().filter(|f| p(f)).count();
        let decoded_cut = count(&|f| f.get("captured_len").is_some());
        let refused_cut = count(&|f| {
            f["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("capture: "))
        });
        // 128 bytes hold the headers of most sample frames, 100 of some.
        let (d, r) = (decoded_cut, refused_cut);
        match snaplen {
            128 => assert!(d > r, "snap length 128: {d} cut, {r} refused"),
            100 => assert!(d > 0 && r > 0, "snap length 100: {d} cut, {r} refused"),
            _ => assert!(r > 0, "snap length {snaplen}: {r} refused"),
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Two daemons with `daemon_args` on a veth pair; a capture on the target
/// (with `capture_args`) while a file is written to it; the capture must
/// decode the same in tshark as in `uet decode`.
fn live(
    subnet: u8,
    daemon_args: &[&str],
    capture_args: &[&str],
    decode_args: &[&str],
    prefs: &[&str],
) -> Vec<Value> {
    tshark();
    let pair = Pair::new(subnet, 1500);
    let mut a_args = vec!["--interface", "v0"];
    a_args.extend_from_slice(daemon_args);
    let mut b_args = vec!["--interface", "v1"];
    b_args.extend_from_slice(daemon_args);
    let _a = Uetd::spawn(&pair.a, &a_args);
    let _b = Uetd::spawn(&pair.b, &b_args);
    let (sa, sb) = (Uetd::socket_of(&pair.a), Uetd::socket_of(&pair.b));
    wait_for_socket(&sa);
    wait_for_socket(&sb);
    let (mut serve, address) = serve(&sb, "1MiB");

    let dir = std::env::temp_dir().join(format!("uet-ws-live-{}-{subnet}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("live.pcap");
    let mut capture = Uetd::from_command({
        let mut c = Command::new(uet_lab::uet_bin().expect("the uet binary"));
        c.args(["capture", "--out", pcap.to_str().unwrap(), "--count", "24"])
            .args(capture_args)
            .args(["--socket", &sb]);
        c
    });
    capture.wait_line("\"capturing\"", Duration::from_secs(30));
    let file = dir.join("in.bin");
    let mut data = vec![0u8; 64 * 1024];
    uetd::mem::pattern(9, 0, &mut data);
    std::fs::write(&file, &data).unwrap();
    common::uet(
        &sa,
        &[
            "write",
            file.to_str().unwrap(),
            &address,
            "--chunk",
            "4KiB",
            "--depth",
            "1",
        ],
    );
    serve.wait_line("\"write_arrived\"", Duration::from_secs(30));
    let summary = capture.wait_line("\"captured\"", Duration::from_secs(30));
    assert_eq!(field(&summary, "frames"), "24", "{summary}");
    let frames = assert_agree(&pcap, decode_args, prefs);
    std::fs::remove_dir_all(&dir).ok();
    frames
}

#[test]
fn live_udp_capture_fields_match_uet_decode() {
    let frames = live(151, &["--backend", "xdp"], &[], &[], &[]);
    assert!(
        frames
            .iter()
            .all(|f| f.get("error").is_none() && f.get("udp").is_some())
    );
    assert!(frames.iter().any(|f| f["ses"]["opcode"] == "UET_WRITE"));
}

#[test]
fn live_native_ip_crc_capture_fields_match_uet_decode() {
    let frames = live(
        152,
        &["--backend", "xdp", "--profile", "refprov"],
        &[],
        &["--crc"],
        &["crc:TRUE"],
    );
    assert!(
        frames
            .iter()
            .all(|f| f.get("udp").is_none() && f.get("crc32c").is_some())
    );
}

#[test]
fn live_capture_cut_at_128_bytes_matches_uet_decode() {
    let frames = live(153, &["--backend", "xdp"], &["--snaplen", "128"], &[], &[]);
    // Write requests are cut after their headers; they still decode.
    let cut: Vec<&Value> = frames
        .iter()
        .filter(|f| f.get("captured_len").is_some())
        .collect();
    assert!(!cut.is_empty());
    assert!(
        cut.iter()
            .all(|f| f["captured_len"] == 128 && f["ses"]["opcode"] == "UET_WRITE")
    );
}
