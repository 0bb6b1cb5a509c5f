//! The examples against two daemons in namespaces joined by veth (the
//! daemons run in this process, on threads inside the namespaces; the
//! examples are the real binaries).

use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use uetd::config::{Backend, Config};
use uetd::control::{ControlConfig, serve};
use uetd::daemon::Daemon;
use uetd::netns::{NetNs, veth_pair};

struct Daemons {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<std::io::Result<()>>>,
    sockets: [String; 2],
    _ns: [NetNs; 2],
}

impl Drop for Daemons {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn daemons(subnet: u8) -> Daemons {
    let a = NetNs::create("uet-ex").unwrap();
    let b = NetNs::create("uet-ex").unwrap();
    let ips = [format!("10.{subnet}.0.1"), format!("10.{subnet}.0.2")];
    veth_pair(
        &a,
        "v0",
        &format!("{}/24", ips[0]),
        &b,
        "v1",
        &format!("{}/24", ips[1]),
        1500,
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let mut sockets = Vec::new();
    for (ns, ifname, ip) in [(&a, "v0", &ips[0]), (&b, "v1", &ips[1])] {
        let sock = format!("/run/uet/test/{}.sock", ns.name());
        sockets.push(sock.clone());
        let cfg = Config {
            interface: Some(ifname.into()),
            backend: Backend::Xdp,
            address: Some(ip.parse::<IpAddr>().unwrap()),
            socket: sock.clone().into(),
            ..Config::default()
        };
        let stop = stop.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        threads.push(
            ns.spawn(move || {
                let mut d = Daemon::start(cfg).unwrap();
                let _ = ready_tx.send(());
                serve(&mut d, ControlConfig::new(sock.into()), &stop, |_, _| {}).unwrap();
                drop(d.shutdown());
            })
            .unwrap(),
        );
        ready_rx.recv().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // Answering, not merely present: a stale file from a recycled pid
        // is there until the daemon replaces it.
        while std::os::unix::net::UnixStream::connect(&sockets[sockets.len() - 1]).is_err() {
            assert!(std::time::Instant::now() < deadline);
            std::thread::yield_now();
        }
    }
    Daemons {
        stop,
        threads,
        sockets: [sockets[0].clone(), sockets[1].clone()],
        _ns: [a, b],
    }
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
    let d = daemons(121);
    let bin = env!("CARGO_BIN_EXE_rma_write");
    let (mut exposer, mut out, address) = spawn(bin, &d.sockets[1], &["expose", "16MiB"]);
    assert!(address.starts_with("uet://10.121.0.2/"), "{address}");
    let file = std::env::temp_dir().join(format!("uet-ex-{}.bin", std::process::id()));
    let data: Vec<u8> = (0..(3 << 20) + 77)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&file, &data).unwrap();
    let sent = run(
        bin,
        &d.sockets[0],
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
    let d = daemons(122);
    let bin = env!("CARGO_BIN_EXE_pingpong");
    let (mut ponger, _out, address) = spawn(bin, &d.sockets[1], &["pong"]);
    let report = run(bin, &d.sockets[0], &["ping", &address, "200", "64"]);
    assert!(ponger.wait().unwrap().success());
    assert!(report.contains("\"pings\":200"), "{report}");
    let p50: f64 = report
        .split("\"p50\":")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(p50 > 0.0);
}
