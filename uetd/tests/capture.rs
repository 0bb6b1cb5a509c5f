//! `uet capture` against a daemon on a veth pair: while `uet
//! write` moves a file, the capture writes a pcap that parses, that `uet
//! decode` reads as UET write requests and ACKs, and that holds frames of
//! both directions; a second capture meanwhile is refused as busy. Once on
//! the xdp backend (whole frames from the UMEM) and once on the udp backend
//! (frames rebuilt around the datagrams). The uid check is a unit test in
//! `control.rs` (a test cannot become another user here: the socket is
//! root's).

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Pair, Uetd, field, serve, wait_for_socket};

/// Frames the capture asks for: fewer than the write below produces (16
/// writes of 4 KiB, one at a time: ≥ 3 requests and an ACK each), so the
/// count always ends it, and more than one write's requests, so ACKs are
/// among them whatever the timing.
const COUNT: u64 = 24;

fn uet(socket: &str, args: &[&str]) -> Output {
    Command::new(uet_lab::uet_bin().expect("the uet binary"))
        .args(args)
        .args(["--socket", socket])
        .output()
        .unwrap()
}

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Runs the case: daemons with `a_backend` (writer) and `b_backend`
/// (server), the capture on `capture_on` ("a" or "b").
fn case(subnet: u8, a_backend: &str, b_backend: &str, capture_on: &str) {
    let pair = Pair::new(subnet, 1500);
    if a_backend != b_backend {
        // A kernel UDP datagram leaves a veth with its checksum unfinished
        // (CHECKSUM_PARTIAL); AF_XDP gets it as is: the kernel side fills
        // it in instead (as a real NIC would).
        let (ns, ifname) = if a_backend == "udp" {
            (&pair.a, "v0")
        } else {
            (&pair.b, "v1")
        };
        ns.run(move || uetd::xsk::set_tx_checksum_offload(ifname, false))
            .unwrap()
            .unwrap();
    }
    let _a = Uetd::spawn(&pair.a, &["--interface", "v0", "--backend", a_backend]);
    let _b = Uetd::spawn(&pair.b, &["--interface", "v1", "--backend", b_backend]);
    let (sa, sb) = (Uetd::socket_of(&pair.a), Uetd::socket_of(&pair.b));
    wait_for_socket(&sa);
    wait_for_socket(&sb);

    let (mut serve, address) = serve(&sb, "1MiB");

    let dir = std::env::temp_dir().join(format!("uet-capture-{}-{subnet}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("cap.pcap");
    let (cap_sock, local_ip, peer_ip) = if capture_on == "a" {
        (&sa, &pair.a_ip, &pair.b_ip)
    } else {
        (&sb, &pair.b_ip, &pair.a_ip)
    };
    let count = COUNT.to_string();
    let mut capture = Uetd::from_command({
        let mut c = Command::new(uet_lab::uet_bin().expect("the uet binary"));
        c.args([
            "capture",
            "--out",
            pcap.to_str().unwrap(),
            "--count",
            &count,
        ])
        .args(["--socket", cap_sock]);
        c
    });
    let capturing = capture.wait_line("\"capturing\"", Duration::from_secs(30));
    assert_eq!(
        field(&capturing, "snaplen"),
        uet_api::MAX_SNAPLEN.to_string()
    );

    // One capture at a time: a second is refused, clearly.
    let other = dir.join("other.pcap");
    let busy = uet(cap_sock, &["capture", "--out", other.to_str().unwrap()]);
    assert!(!busy.status.success());
    let err = String::from_utf8_lossy(&busy.stderr);
    assert!(err.contains("Busy") && err.contains("busy"), "{err}");

    let file = dir.join("in.bin");
    let mut data = vec![0u8; 64 * 1024];
    uetd::mem::pattern(5, 0, &mut data);
    std::fs::write(&file, &data).unwrap();
    let written = ok(
        &uet(
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
        ),
        "uet write",
    );
    let arrived = serve.wait_line("\"write_arrived\"", Duration::from_secs(30));
    assert_eq!(field(&written, "xxh3"), field(&arrived, "xxh3"));

    let summary = capture.wait_line("\"captured\"", Duration::from_secs(30));
    assert_eq!(capture.wait_exit(Duration::from_secs(10)), Some(0));
    assert_eq!(field(&summary, "frames"), count, "{summary}");
    assert_eq!(field(&summary, "reason"), "count", "{summary}");
    assert_eq!(field(&summary, "dropped"), "0", "{summary}");

    check_pcap(&pcap, COUNT, field(&summary, "bytes").parse().unwrap());
    check_decode(&pcap, local_ip, peer_ip);
    ends_on_duration_and_on_sigint(cap_sock, &dir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A capture with a duration ends by itself, one without limits ends on
/// SIGINT; both leave a valid pcap of what they reported and say why they
/// ended. (The link is idle by now, but a late frame may still be seen.)
fn ends_on_duration_and_on_sigint(socket: &str, dir: &Path) {
    let quiet = dir.join("quiet.pcap");
    let out = ok(
        &uet(
            socket,
            &[
                "capture",
                "--out",
                quiet.to_str().unwrap(),
                "--seconds",
                "0.2",
                "--direction",
                "rx",
            ],
        ),
        "uet capture --seconds",
    );
    let summary = out.lines().last().unwrap();
    assert_eq!(field(summary, "reason"), "duration", "{out}");
    check_summary_file(&quiet, summary);

    let stopped = dir.join("stopped.pcap");
    let mut capture = Uetd::from_command({
        let mut c = Command::new(uet_lab::uet_bin().expect("the uet binary"));
        c.args(["capture", "--out", stopped.to_str().unwrap()])
            .args(["--socket", socket]);
        c
    });
    capture.wait_line("\"capturing\"", Duration::from_secs(30));
    capture.signal("-INT");
    let summary = capture.wait_line("\"captured\"", Duration::from_secs(30));
    assert_eq!(field(&summary, "reason"), "stopped", "{summary}");
    assert_eq!(capture.wait_exit(Duration::from_secs(10)), Some(0));
    check_summary_file(&stopped, &summary);
}

fn check_summary_file(path: &Path, summary: &str) {
    check_pcap(
        path,
        field(summary, "frames").parse().unwrap(),
        field(summary, "bytes").parse().unwrap(),
    );
}

/// The file is a pcap with Ethernet link type and `frames` whole frames
/// (`bytes` in all) stamped with wall-clock time.
fn check_pcap(path: &Path, frames: u64, bytes: u64) {
    let f = std::fs::File::open(path).unwrap();
    let mut r = pcap_file::pcap::PcapReader::new(f).unwrap();
    assert_eq!(r.header().datalink, pcap_file::DataLink::ETHERNET);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let (mut n, mut total) = (0u64, 0u64);
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        n += 1;
        total += p.data.len() as u64;
        // Nothing was cut: UET frames on a 1500 MTU are under the snap
        // length.
        assert_eq!(p.orig_len as usize, p.data.len());
        // Wall-clock, not the monotonic clock (which would read 1970).
        let age = now.abs_diff(p.timestamp);
        assert!(
            age < Duration::from_secs(3600),
            "timestamp {:?}",
            p.timestamp
        );
    }
    assert_eq!((n, total), (frames, bytes));
}

/// `uet decode` reads the file as UET: write requests and ACKs, and frames
/// from both directions (by IP source).
fn check_decode(path: &Path, local_ip: &str, peer_ip: &str) {
    let out = Command::new(uet_lab::uet_bin().expect("the uet binary"))
        .args(["decode", "--json", "--pcap", path.to_str().unwrap()])
        .output()
        .unwrap();
    let text = ok(&out, "uet decode");
    let frames: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames.len() as u64, COUNT);
    for f in &frames {
        assert!(f.get("error").is_none(), "a frame did not decode: {f}");
    }
    let writes = frames
        .iter()
        .filter(|f| f["ses"]["opcode"] == "UET_WRITE")
        .count();
    let acks = frames
        .iter()
        .filter(|f| {
            f["pds"]["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("ACK"))
        })
        .count();
    assert!(
        writes > 0 && acks > 0,
        "writes {writes}, acks {acks}:\n{text}"
    );
    let sent = frames.iter().filter(|f| f["ip"]["src"] == local_ip).count();
    let received = frames.iter().filter(|f| f["ip"]["src"] == peer_ip).count();
    assert!(sent > 0 && received > 0, "sent {sent}, received {received}");
    assert_eq!(sent + received, frames.len());
}

#[test]
fn xdp_target_capture_has_requests_in_and_acks_out() {
    case(141, "xdp", "xdp", "b");
}

#[test]
fn udp_writer_capture_has_requests_out_and_acks_in() {
    case(142, "udp", "xdp", "a");
}
