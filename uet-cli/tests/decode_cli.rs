//! `uet decode` end to end: the built binary, run as a user would, on the
//! sample capture, on hex, and on inputs that must be refused; and what the
//! client commands print when there is no daemon or no file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use uet_tools::sample_pcap as sample;
use uet_wire::encap::EncapConfig;

/// The workspace root, where the README's commands run.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn uet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uet"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run the uet binary")
}

fn stdout_lines(o: &Output) -> Vec<String> {
    String::from_utf8(o.stdout.clone())
        .expect("UTF-8 output")
        .lines()
        .map(str::to_owned)
        .collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A scratch file for one test.
fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let p = std::env::temp_dir().join(format!("uet-decode-cli-{}-{name}", std::process::id()));
    std::fs::write(&p, bytes).expect("write a scratch file");
    p
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn sample_pcap_json_is_one_object_per_frame() {
    let o = uet(&["decode", "--pcap", sample::SAMPLE_PATH, "--json"]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(stderr(&o), "");
    let lines = stdout_lines(&o);
    assert_eq!(lines.len(), sample::frames().len());
    for (i, line) in lines.iter().enumerate() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("line {i} is not JSON ({e}): {line}"));
        let obj = v.as_object().unwrap_or_else(|| panic!("line {i}: {line}"));
        if i == sample::MALFORMED_INDEX {
            assert_eq!(
                v,
                serde_json::json!({ "error": "SES: truncated header (need 44 bytes) at byte 78" })
            );
        } else if obj.contains_key("tss") {
            // Behind a TSS header everything is ciphertext: no PDS.
            assert!(!obj.contains_key("pds"), "line {i}: {line}");
            assert!(v["tss"]["ciphertext_len"].is_u64(), "line {i}: {line}");
        } else {
            for key in ["eth", "ip", "entropy", "pds", "payload_len", "frame_len"] {
                assert!(obj.contains_key(key), "line {i} has no {key}: {line}");
            }
            assert!(v["pds"]["type"].is_string() && v["pds"]["flags"].is_object());
        }
    }
    // The headline frames, field by field in their spec names.
    let first: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(first["pds"]["type"], "RUD_CC_REQ");
    assert_eq!(first["pds"]["psn"], 336);
    assert_eq!(first["pds"]["clear_psn_offset"], -1);
    assert_eq!(first["pds"]["flags"]["syn"], true);
    assert_eq!(first["ses"]["opcode"], "UET_WRITE");
    assert_eq!(first["udp"]["dst_port"], 4793);
    let credit: Value = serde_json::from_str(&lines[4]).unwrap();
    assert_eq!(credit["pds"]["ctl_type"], "CREDIT");
    assert_eq!(credit["pds"]["credit"], 25_000);
    let nack: Value = serde_json::from_str(&lines[10]).unwrap();
    assert_eq!(nack["pds"]["nack_code"], "UET_TRIMMED");
}

#[test]
fn sample_pcap_text_is_one_line_per_frame() {
    let o = uet(&["decode", "--pcap", sample::SAMPLE_PATH]);
    assert!(o.status.success(), "{o:?}");
    let lines = stdout_lines(&o);
    assert_eq!(lines.len(), sample::frames().len());
    assert!(
        lines[0].contains("RUD_CC_REQ psn=336 clear_psn=335"),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("UET_WRITE"), "{}", lines[0]);
    assert!(lines[8].ends_with("trimmed (Trimmed)"), "{}", lines[8]);
    assert_eq!(
        lines[sample::MALFORMED_INDEX],
        "error: SES: truncated header (need 44 bytes) at byte 78"
    );
}

#[test]
fn hex_frames_decode_like_the_library() {
    let frames = sample::frames();
    // Spaces, colons and a 0x prefix are accepted; --hex may repeat.
    let spaced = frames[2].chunks(4).map(hex).collect::<Vec<_>>().join(" ");
    let coloned = format!(
        "0x{}",
        frames[23]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    );
    let o = uet(&[
        "decode",
        "--json",
        "--hex",
        &hex(&frames[0]),
        "--hex",
        &spaced,
        "--hex",
        &coloned,
    ]);
    assert!(o.status.success(), "{o:?}");
    let got: Vec<Value> = stdout_lines(&o)
        .iter()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    let cfg = EncapConfig::default();
    let want: Vec<Value> = [0, 2, 23]
        .iter()
        .map(|&i| uet_tools::decode::frame_json(&frames[i], &cfg))
        .collect();
    assert_eq!(got, want);
    // A malformed frame is output, not failure.
    let o = uet(&[
        "decode",
        "--json",
        "--hex",
        &hex(&frames[sample::MALFORMED_INDEX]),
    ]);
    assert!(o.status.success(), "{o:?}");
    assert!(stdout_lines(&o)[0].contains("\"error\""));
}

#[test]
fn port_and_crc_options() {
    let cfg = EncapConfig {
        udp_port: 49150,
        crc_trailer: true,
        ..EncapConfig::default()
    };
    let l3 = sample::v4(sample::INI, sample::TGT, 0, uet_wire::Ecn::Ect0);
    let t = uet_wire::encap::Transport::Udp {
        src_port: 0xc001,
        dst_port: 49150,
    };
    let uet_bytes = {
        let pds = uet_wire::pds::PdsUudRepr {
            next_hdr: uet_wire::pds::NextHeader::None,
        };
        sample::uet_bytes(&pds.into(), None, &[1, 2, 3])
    };
    let f = hex(&sample::frame(&l3, &t, &cfg, &uet_bytes));
    let o = uet(&["decode", "--json", "--port", "49150", "--crc", "--hex", &f]);
    assert!(o.status.success(), "{o:?}");
    let v: Value = serde_json::from_str(&stdout_lines(&o)[0]).unwrap();
    assert_eq!(v["pds"]["type"], "UUD_REQ");
    assert_eq!(v["payload_len"], 3);
    assert!(v["crc32c"].is_string(), "{v}");
    // Without the options the frame is not UET: an error object, exit 0.
    let o = uet(&["decode", "--json", "--hex", &f]);
    assert!(o.status.success(), "{o:?}");
    let v: Value = serde_json::from_str(&stdout_lines(&o)[0]).unwrap();
    assert_eq!(v["error"], "UDP: not a UET packet at byte 36");
}

#[test]
fn missing_file_fails_with_a_clear_message() {
    let o = uet(&["decode", "--pcap", "no/such/capture.pcap", "--json"]);
    assert!(!o.status.success());
    assert!(o.stdout.is_empty());
    let e = stderr(&o);
    assert!(
        e.starts_with("uet: cannot open no/such/capture.pcap:"),
        "{e}"
    );
}

#[test]
fn non_ethernet_link_type_is_refused() {
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    let header = PcapHeader {
        datalink: pcap_file::DataLink::RAW,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
    let ip_only = &sample::frames()[0][14..];
    let len = u32::try_from(ip_only.len()).unwrap();
    w.write_packet(&PcapPacket::new(std::time::Duration::ZERO, len, ip_only))
        .unwrap();
    let p = scratch("raw.pcap", &w.into_writer());
    let o = uet(&["decode", "--pcap", p.to_str().unwrap()]);
    std::fs::remove_file(&p).ok();
    assert!(!o.status.success());
    assert!(o.stdout.is_empty(), "nothing is decoded");
    assert!(
        stderr(&o).contains("link type RAW is not Ethernet"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn unreadable_input_fails() {
    // Not a pcap at all.
    let p = scratch("junk.pcap", b"this is not a capture file, just text\n");
    let o = uet(&["decode", "--pcap", p.to_str().unwrap()]);
    std::fs::remove_file(&p).ok();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("is not a pcap file"), "{}", stderr(&o));

    // A capture cut in the middle of a record: the whole frames before
    // the cut are decoded, then the read error ends the run.
    let bytes = std::fs::read(root().join(sample::SAMPLE_PATH)).unwrap();
    let p = scratch("cut.pcap", &bytes[..bytes.len() - 10]);
    let o = uet(&["decode", "--pcap", p.to_str().unwrap(), "--json"]);
    std::fs::remove_file(&p).ok();
    assert!(!o.status.success());
    assert_eq!(stdout_lines(&o).len(), sample::frames().len() - 1);
    assert!(stderr(&o).starts_with("uet: reading "), "{}", stderr(&o));

    // Bad hex and no input at all are usage errors.
    let o = uet(&["decode", "--hex", "0x0g"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("not a hex digit"), "{}", stderr(&o));
    let o = uet(&["decode"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("nothing to decode"), "{}", stderr(&o));
}

#[test]
fn closed_stdout_is_not_an_error() {
    // `uet decode … | head -1`: the reader leaves early; no "Broken pipe"
    // message and a successful exit.
    use std::process::Stdio;
    let bytes = std::fs::read(root().join(sample::SAMPLE_PATH)).unwrap();
    let mut big = bytes[..24].to_vec();
    for _ in 0..500 {
        big.extend_from_slice(&bytes[24..]);
    }
    let p = scratch("big.pcap", &big);
    let mut child = Command::new(env!("CARGO_BIN_EXE_uet"))
        .args(["decode", "--json", "--pcap", p.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the uet binary");
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    std::fs::remove_file(&p).ok();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(stderr(&o), "");
}

#[test]
fn readme_shows_real_output() {
    // The README quotes the fifth sample frame in both forms and the
    // malformed frame's error object: they must stay what the tool prints.
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let text = stdout_lines(&uet(&["decode", "--pcap", sample::SAMPLE_PATH]));
    let json = stdout_lines(&uet(&["decode", "--pcap", sample::SAMPLE_PATH, "--json"]));
    for line in [&text[4], &json[4], &json[sample::MALFORMED_INDEX]] {
        assert!(readme.contains(line.as_str()), "README lacks {line}");
    }
}

#[test]
fn trimmed_dscp_is_configurable() {
    let pcap = root().join("samples/uet-sample.pcap");
    let pcap = pcap.to_str().unwrap();
    let count = |o: &Output| {
        stdout_lines(o)
            .iter()
            .filter(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                v.get("trimmed").is_some_and(|t| !t.is_null())
            })
            .count()
    };
    let default = uet(&["decode", "--pcap", pcap, "--json"]);
    assert!(count(&default) > 0, "the sample has a trimmed packet");
    let off = uet(&["decode", "--pcap", pcap, "--json", "--trimmed-dscp", "none"]);
    assert!(off.status.success());
    assert_eq!(
        count(&off),
        0,
        "with trimming off nothing is reported trimmed"
    );
    let bad = uet(&["decode", "--hex", "00", "--trimmed-dscp", "64"]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("out of range"), "{}", stderr(&bad));
}

#[test]
fn a_native_ip_frame_with_a_network_order_trailer_decodes_with_crc() {
    // IPv4 protocol 253, entropy 0x1234, a UUD_REQ prologue, and the
    // CRC-32C 0x370caf53 most significant byte first, as the UEC reference
    // provider sends it (the golden vector of uet-wire's encap tests).
    let f = "020000000002020000000001080045000020000140004 0fd25de0a0000010a000002\
             12340000300000 00370caf53"
        .replace(' ', "");
    let o = uet(&["decode", "--json", "--crc", "--hex", &f]);
    assert!(o.status.success(), "{o:?}");
    let v: Value = serde_json::from_str(&stdout_lines(&o)[0]).unwrap();
    assert_eq!(v["pds"]["type"], "UUD_REQ", "{v}");
    assert_eq!(v["crc32c"], "0x370caf53", "{v}");
    // The same trailer little-endian is a mismatch.
    let swapped = f.replace("370caf53", "53af0c37");
    let o = uet(&["decode", "--json", "--crc", "--hex", &swapped]);
    let v: Value = serde_json::from_str(&stdout_lines(&o)[0]).unwrap();
    assert_eq!(
        v["error"], "CRC trailer: checksum mismatch at byte 42",
        "{v}"
    );
}

/// Failures the user sees name what `uet` was doing, then why.
#[test]
fn client_command_errors_name_the_command_and_the_socket() {
    let dir = std::env::temp_dir().join(format!("uet-cli-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("uetd.sock");
    let sock = sock.to_str().unwrap();
    let o = uet(&["stats", "--socket", sock]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(&format!(
            "uet: reading the daemon's counters: connecting to uetd at {sock}: "
        )),
        "{err}"
    );
    // The cause once, not once per layer that wraps it.
    let enoent = std::io::Error::from_raw_os_error(2).to_string();
    assert_eq!(err.matches(&enoent).count(), 1, "{err}");

    let missing = dir.join("missing.bin");
    let missing = missing.to_str().unwrap();
    let address = "uet://10.0.0.1/1/2/1/0/0x5eed";
    let o = uet(&["write", missing, address, "--socket", sock]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(&format!(
            "uet: writing {missing} to {address}: reading {missing}: "
        )),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
