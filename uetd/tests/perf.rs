//! `uet perf` between two daemons of a veth lab: a `uet perf --server` on
//! host 0, clients on host 1 running write, read, send, bidirectional and
//! latency tests; the numbers must agree with each other (bytes =
//! iterations × size, peak ≥ average, t_min ≤ p50 ≤ p99 ≤ t_max) and the
//! JSON must carry iperf3's start / intervals / end.

mod common;

use std::time::Duration;

use common::{Uetd, field};
use uet_lab::{Lab, LabConfig};

/// The server goes before the lab (fields drop in order).
struct Perf {
    _server: Uetd,
    lab: Lab,
    address: String,
}

impl Perf {
    fn up() -> Self {
        let lab = Lab::up(LabConfig {
            hosts: 2,
            region_bytes: 1 << 20,
            ..LabConfig::default()
        })
        .unwrap();
        let uet = uet_lab::uet_bin().expect("the uet binary");
        let mut cmd = lab.host(0).command(uet.to_str().unwrap());
        let s0 = lab.socket(0).display().to_string();
        cmd.args(["perf", "--server", "--port", "0", "--socket", &s0]);
        let mut server = Uetd::from_command(cmd);
        let line = server.wait_line("\"listening\"", Duration::from_secs(30));
        let port = field(&line, "address")
            .rsplit(':')
            .next()
            .unwrap()
            .to_owned();
        let address = format!("{}:{port}", lab.ip(0));
        Self {
            lab,
            _server: server,
            address,
        }
    }

    /// `uet perf ADDRESS ARGS --json` on host 1: one document per size.
    fn run(&self, args: &[&str]) -> Vec<serde_json::Value> {
        let uet = uet_lab::uet_bin().expect("the uet binary");
        let s1 = self.lab.socket(1).display().to_string();
        let out = self
            .lab
            .host(1)
            .command(uet.to_str().unwrap())
            .args(["perf", &self.address, "--json", "--socket", &s1])
            .args(args)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "uet perf {args:?}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// One direction's `sum`: its bytes are its messages × size, the peak is
/// at least the average.
fn check_sum(sum: &serde_json::Value, size: u64, messages: u64) {
    assert_eq!(sum["messages"].as_u64(), Some(messages), "{sum}");
    assert_eq!(sum["bytes"].as_u64(), Some(messages * size), "{sum}");
    assert_eq!(sum["size"].as_u64(), Some(size), "{sum}");
    let (avg, peak) = (f(&sum["bits_per_second"]), f(&sum["peak_bits_per_second"]));
    assert!(avg > 0.0 && peak >= avg * (1.0 - 1e-9), "{sum}");
    let expect = messages as f64 * size as f64 * 8.0 / f(&sum["seconds"]);
    assert!((avg - expect).abs() <= expect * 1e-9, "{sum}");
}

fn check_latency(l: &serde_json::Value, count: u64) {
    assert_eq!(l["count"].as_u64(), Some(count), "{l}");
    let (min, p50, p99, p999, max) = (
        f(&l["t_min"]),
        f(&l["t_typical"]),
        f(&l["p99"]),
        f(&l["p999"]),
        f(&l["t_max"]),
    );
    assert!(
        0.0 < min && min <= p50 && p50 <= p99 && p99 <= p999 && p999 <= max,
        "{l}"
    );
    let avg = f(&l["t_avg"]);
    assert!(min <= avg && avg <= max && f(&l["t_stdev"]) >= 0.0, "{l}");
}

/// The iperf3 keys and both daemons' counters.
fn check_shape(v: &serde_json::Value, test: &str) {
    assert_eq!(v["start"]["test_start"]["test"], test, "{v}");
    assert!(v["start"]["version"].as_str().unwrap().starts_with("uet "));
    assert!(v["start"]["timestamp"]["timesecs"].is_u64(), "{v}");
    assert!(v["intervals"].is_array(), "{v}");
    let end = &v["end"];
    for side in ["local", "remote"] {
        let d = &end["daemons"][side];
        assert!(
            d["retransmits"].is_u64() && d["rtos"].is_u64(),
            "{side}: {d}"
        );
        assert!(
            f(&d["cpu_utilization_percent"]["total"]) >= 0.0,
            "{side} daemon's CPU: {d}"
        );
    }
    assert_eq!(end["retransmits"], end["daemons"]["local"]["retransmits"]);
    assert!(end["cpu_utilization_percent"]["host_total"].is_f64(), "{v}");
    assert!(
        end["cpu_utilization_percent"]["remote_total"].is_f64(),
        "{v}"
    );
}

#[test]
fn write_read_send_bidirectional_and_latency_through_a_perf_server() {
    let p = Perf::up();

    // Write and read, two sizes each (4K is 4096 bytes), per-interval sums.
    for test in ["write", "read"] {
        let docs = p.run(&[
            "--test",
            test,
            "-s",
            "4K,64KiB",
            "-n",
            "300",
            "--interval",
            "0.05",
        ]);
        assert_eq!(docs.len(), 2, "{docs:?}");
        for (v, size) in docs.iter().zip([4096, 65536]) {
            check_shape(v, test);
            check_sum(&v["end"]["sum"], size, 300);
            check_latency(&v["end"]["latency_us"], 300);
            // The intervals add up to the whole.
            let iv = v["intervals"].as_array().unwrap();
            assert!(!iv.is_empty(), "{v}");
            let bytes: u64 = iv.iter().map(|i| i["sum"]["bytes"].as_u64().unwrap()).sum();
            assert_eq!(bytes, 300 * size, "{v}");
        }
    }

    // Send: what the server's receiver took is what the client sent.
    let v = &p.run(&["--test", "send", "-s", "16K", "-n", "300"])[0];
    check_shape(v, "send");
    check_sum(&v["end"]["sum"], 16384, 300);
    assert_eq!(v["end"]["sum_received"]["messages"], 300, "{v}");
    assert_eq!(v["end"]["sum_received"]["bytes"], 300 * 16384, "{v}");

    // Bidirectional, writes and sends: both directions complete their
    // iterations; a second send run gets a clean receiver.
    for test in ["write", "send", "send"] {
        let v = &p.run(&["--test", test, "-b", "-s", "8K", "-n", "200"])[0];
        check_shape(v, test);
        check_sum(&v["end"]["sum"], 8192, 200);
        check_sum(&v["end"]["sum_bidir_reverse"], 8192, 200);
        check_latency(&v["end"]["latency_us_bidir_reverse"], 200);
    }

    // Latency: depth 1, perftest's default size 2.
    let v = &p.run(&["--latency", "-n", "200"])[0];
    check_shape(v, "write");
    assert_eq!(v["start"]["test_start"]["depth"], 1, "{v}");
    check_sum(&v["end"]["sum"], 2, 200);
    check_latency(&v["end"]["latency_us"], 200);
}

#[test]
fn the_tables_are_perftests() {
    let p = Perf::up();
    let uet = uet_lab::uet_bin().expect("the uet binary");
    let s1 = p.lab.socket(1).display().to_string();
    let run = |args: &[&str]| {
        let out = p
            .lab
            .host(1)
            .command(uet.to_str().unwrap())
            .args(["perf", &p.address, "--socket", &s1])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let bw = run(&["-s", "4K", "-n", "100", "--report-gbits"]);
    let mut lines = bw.lines();
    let head = lines.next().unwrap();
    for col in [
        "#bytes",
        "#iterations",
        "BW peak[Gb/sec]",
        "BW average[Gb/sec]",
        "MsgRate[Mpps]",
    ] {
        assert!(head.contains(col), "{bw}");
    }
    let row: Vec<f64> = lines
        .next()
        .unwrap()
        .split_whitespace()
        .map(|c| c.parse().unwrap())
        .collect();
    assert_eq!(row[..2], [4096.0, 100.0], "{bw}");
    assert!(row[2] >= row[3] && row[3] > 0.0 && row[4] > 0.0, "{bw}");

    let lat = run(&["--latency", "-n", "100"]);
    let head = lat.lines().next().unwrap();
    for col in [
        "t_min[usec]",
        "t_max[usec]",
        "t_typical[usec]",
        "t_avg[usec]",
        "t_stdev[usec]",
        "99% percentile[usec]",
        "99.9% percentile[usec]",
    ] {
        assert!(head.contains(col), "{lat}");
    }
}
