//! The `uet` CLI against a two-host veth lab: `serve` prints an
//! address on host 0, `write` sends a file into it from host 1 and the
//! server verifies the hash, `read` brings it back, `perf` reports, `stats`
//! speaks Prometheus — every command a client of the lab's daemons.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{Uetd, field, uet};
use uet_lab::{Lab, LabConfig};

#[test]
fn serve_write_read_perf_and_stats() {
    let lab = Lab::up(LabConfig {
        hosts: 2,
        region_bytes: 1 << 20,
        ..LabConfig::default()
    })
    .unwrap();
    // Host 0 serves; host 1's daemon is the client side.
    let (s0, s1) = (
        lab.socket(0).display().to_string(),
        lab.socket(1).display().to_string(),
    );

    let mut cmd = Command::new(uet_lab::uet_bin().expect("the uet binary"));
    cmd.args(["serve", "--size", "8MiB", "--socket", &s0]);
    // `Lab::up` returned: every daemon answers on its socket.
    let mut serve = Uetd::from_command(cmd);
    let serving = serve.wait_line("\"serving\"", Duration::from_secs(30));
    let address = field(&serving, "address").to_owned();
    assert!(
        address.starts_with(&format!("uet://{}/", lab.ip(0))),
        "{address}"
    );

    let dir = std::env::temp_dir().join(format!("uet-cli-{}", lab.name()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("in.bin");
    let mut data = vec![0u8; 5 * 1024 * 1024 + 123];
    uetd::mem::pattern(11, 0, &mut data);
    std::fs::write(&file, &data).unwrap();

    let written = uet(
        &s1,
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
        &s1,
        &["read", &address, "--len", &len, out.to_str().unwrap()],
    );
    assert_eq!(field(&read, "xxh3"), field(&written, "xxh3"));
    assert!(std::fs::read(&out).unwrap() == data);

    let perf = uet(
        &s1,
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
        assert_eq!(l["end"]["sum"]["size"], size);
        assert_eq!(l["end"]["sum"]["messages"], 200);
        let p = &l["end"]["latency_us"];
        let (p50, p99, p999) = (
            p["t_typical"].as_f64().unwrap(),
            p["p99"].as_f64().unwrap(),
            p["p999"].as_f64().unwrap(),
        );
        assert!(0.0 < p50 && p50 <= p99 && p99 <= p999, "{l}");
    }
    // The counters: JSON that parses and shows the traffic, and Prometheus.
    let json: serde_json::Value = serde_json::from_str(&uet(&s1, &["stats"])).unwrap();
    assert!(
        json["workers"][0]["pds"]["tx_data"].as_u64().unwrap() >= 400,
        "{json}"
    );
    let prom = uet(&s1, &["stats", "--prometheus"]);
    assert!(
        prom.contains("uet_pds_tx_data_total{worker=\"0\"}"),
        "{prom}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
