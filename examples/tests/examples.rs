//! The examples against a two-host veth lab (`uet_lab`: host namespaces
//! behind a switch namespace, a `uetd` process serving in each host); the
//! examples are the real binaries, clients of the lab's daemons.
//!
//! The lab runs the `uetd` binary next to this test's executable (or
//! `$UETD_BIN`): `cargo test --workspace` builds it; alone, build it first
//! (`cargo build --release -p uetd`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use uet_lab::{Lab, LabConfig};

/// Two hosts; host 0 exposes, host 1 sends. Returns the lab and the two
/// control sockets.
fn lab() -> (Lab, [String; 2]) {
    let lab = Lab::up(LabConfig {
        hosts: 2,
        region_bytes: 1 << 20,
        ..LabConfig::default()
    })
    .unwrap();
    let sockets = [0, 1].map(|i| lab.socket(i).display().to_string());
    (lab, sockets)
}

/// Spawns an example with its socket; returns the child and its first line.
fn spawn(
    bin: &str,
    socket: &str,
    args: &[&str],
) -> (
    std::process::Child,
    BufReader<std::process::ChildStdout>,
    String,
) {
    let mut child = Command::new(bin)
        .args(args)
        .env("UET_SOCKET", socket)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    (child, out, line.trim().to_owned())
}

fn run(bin: &str, socket: &str, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(args)
        .env("UET_SOCKET", socket)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{bin} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn rma_write_lands_a_file_and_the_hashes_agree() {
    let (lab, sockets) = lab();
    let bin = env!("CARGO_BIN_EXE_rma_write");
    let (mut exposer, mut out, address) = spawn(bin, &sockets[0], &["expose", "16MiB"]);
    assert!(
        address.starts_with(&format!("uet://{}/", lab.ip(0))),
        "{address}"
    );
    let file = std::env::temp_dir().join(format!("uet-ex-{}.bin", lab.name()));
    let data: Vec<u8> = (0..(3 << 20) + 77)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&file, &data).unwrap();
    let sent = run(
        bin,
        &sockets[1],
        &["send", file.to_str().unwrap(), &address],
    );
    let mut got = String::new();
    out.read_line(&mut got).unwrap();
    assert!(exposer.wait().unwrap().success());
    let hash = |s: &str| s.split("\"fnv1a\":\"").nth(1).map(|h| h[..16].to_owned());
    assert_eq!(hash(&sent), hash(&got), "{sent} / {got}");
    assert_eq!(
        hash(&sent),
        Some(format!("{:016x}", uet_examples::fnv1a(&data)))
    );
    let _ = std::fs::remove_file(&file);
}

#[test]
fn pingpong_reports_latency_percentiles() {
    let (lab, sockets) = lab();
    let bin = env!("CARGO_BIN_EXE_pingpong");
    let (mut ponger, _out, address) = spawn(bin, &sockets[0], &["pong"]);
    assert!(
        address.starts_with(&format!("uet://{}/", lab.ip(0))),
        "{address}"
    );
    // The pinger's socket by flag; `$UET_SOCKET` names none.
    let report = run(
        bin,
        "/nonexistent/uetd.sock",
        &["ping", "--socket", &sockets[1], &address, "200", "64"],
    );
    assert!(ponger.wait().unwrap().success());
    assert!(report.contains("\"pings\":200"), "{report}");
    let pct = |k: &str| -> f64 {
        report
            .split(&format!("\"{k}\":"))
            .nth(1)
            .unwrap_or_else(|| panic!("no {k} in {report}"))
            .split([',', '}'])
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (p50, p99, p999) = (pct("p50"), pct("p99"), pct("p999"));
    assert!(0.0 < p50 && p50 <= p99 && p99 <= p999, "{report}");
}
