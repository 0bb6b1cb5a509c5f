//! The `uet` CLI against two daemons (issue 6): `serve` prints an address,
//! `write` sends a file into it and the server verifies the hash, `read`
//! brings it back, `perf` reports, `stats` speaks Prometheus.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{Pair, Uetd, field};

fn uet(socket: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_uet"))
        .args(args)
        .args(["--socket", socket])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "uet {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn serve_write_read_perf_and_stats() {
    let pair = Pair::new(111, 1500);
    let _a = Uetd::spawn(&pair.a, &["--interface", "v0", "--backend", "xdp"]);
    let _b = Uetd::spawn(&pair.b, &["--interface", "v1", "--backend", "xdp"]);
    let (sa, sb) = (Uetd::socket_of(&pair.a), Uetd::socket_of(&pair.b));

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_uet"));
    cmd.args(["serve", "--size", "8MiB", "--socket", &sb]);
    let mut serve = wait_for_socket_then(&sb, cmd);
    let serving = serve.wait_line("\"serving\"", Duration::from_secs(30));
    let address = field(&serving, "address").to_owned();
    assert!(
        address.starts_with(&format!("uet://{}/", pair.b_ip)),
        "{address}"
    );

    let dir = std::env::temp_dir().join(format!("uet-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("in.bin");
    let mut data = vec![0u8; 5 * 1024 * 1024 + 123];
    uetd::mem::pattern(11, 0, &mut data);
    std::fs::write(&file, &data).unwrap();

    let written = uet(
        &sa,
        &["write", file.to_str().unwrap(), &address, "--chunk", "1MiB"],
    );
    let arrived = serve.wait_line("\"write_arrived\"", Duration::from_secs(30));
    assert_eq!(
        field(&written, "xxh3"),
        field(&arrived, "xxh3"),
        "{written}\n{arrived}"
    );
    assert_eq!(field(&arrived, "verified_bytes"), data.len().to_string());

    let out = dir.join("out.bin");
    let len = data.len().to_string();
    let read = uet(
        &sa,
        &["read", &address, "--len", &len, out.to_str().unwrap()],
    );
    assert_eq!(field(&read, "xxh3"), field(&written, "xxh3"));
    assert!(std::fs::read(&out).unwrap() == data);

    let perf = uet(
        &sa,
        &[
            "perf",
            &address,
            "--region",
            "8MiB",
            "--size",
            "4KiB,64KiB",
            "--iters",
            "200",
            "--json",
        ],
    );
    let lines: Vec<serde_json::Value> = perf
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{perf}");
    for (l, size) in lines.iter().zip([4096, 65536]) {
        assert_eq!(l["size"], size);
        assert_eq!(l["messages"], 200);
        assert!(l["latency_us"]["p50"].as_f64().unwrap() > 0.0);
    }
    let prom = uet(&sa, &["stats", "--prometheus"]);
    assert!(prom.contains("uet_pds_tx_data{worker=\"0\"}"), "{prom}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts `cmd` once the daemon's socket exists.
fn wait_for_socket_then(socket: &str, cmd: Command) -> Uetd {
    wait_for(socket);
    Uetd::from_command(cmd)
}

/// Waits (bounded) until a daemon answers on its control socket. Existence
/// of the file is not enough: a stale one (a recycled pid's, from an earlier
/// run) is there before the daemon replaces it.
fn wait_for(socket: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        assert!(std::time::Instant::now() < deadline, "no socket {socket}");
        std::thread::yield_now();
    }
}
