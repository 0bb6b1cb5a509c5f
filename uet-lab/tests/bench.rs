//! `uet lab bench` end to end on the real kernel (root): tiny sizes, one
//! repeat, MTU 1500; the JSON it writes holds every row with positive
//! rates, verified writes and the ratios computed from them, and its labs
//! are gone afterwards. Needs iperf3 (`.ci/run` installs it); the kernel
//! UDP round trip is sockperf's when installed, else the built-in one.

use std::process::Command;

use serde_json::Value;

/// Every row a run has, by its JSON name.
const ROWS: [&str; 9] = [
    "raw",
    "kernel_tcp",
    "kernel_udp",
    "write_xdp",
    "write_udp",
    "perf_64k",
    "perf_4k",
    "latency_64b",
    "udp_rtt",
];

fn num(v: &Value, path: &[&str]) -> f64 {
    let mut x = v;
    for k in path {
        x = &x[*k];
    }
    x.as_f64()
        .unwrap_or_else(|| panic!("{} is not a number in {v}", path.join(".")))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

fn run_bench() -> (Value, u32) {
    let json = std::env::temp_dir().join(format!("uet-bench-test-{}.json", std::process::id()));
    let child = Command::new(uet_lab::uet_bin().expect("the uet binary"))
        .args([
            "lab",
            "bench",
            "--mtu",
            "1500",
            "--repeats",
            "1",
            // Long enough for /proc/stat to count the writes' CPU: the
            // udp backend's GSO write of 8 MiB took 8 ms, under one tick.
            "--bytes",
            "64MiB",
            "--seconds",
            "0.3",
            "--json",
        ])
        .arg(&json)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("| raw AF_XDP, UDP payload |"), "{stdout}");
    assert!(
        stdout.contains("| xdp write ÷ raw AF_XDP |"),
        "each repeat's own ratios: {stdout}"
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    (v, pid)
}

/// Every row of `run` ran, with positive rates; writes verified.
fn check_rows(run: &Value) {
    for row in ROWS {
        assert!(
            run[row]["error"].is_null() && run[row]["value"].is_object(),
            "row {row} did not run: {}",
            run[row]
        );
    }
    let v = |row: &str, k: &str| num(run, &[row, "value", k]);
    for k in ["payload_gbps", "mpps", "busy_cpus", "cpu_s_per_gb"] {
        assert!(v("raw", k) > 0.0, "raw {k}: {}", run["raw"]);
    }
    for row in ["kernel_tcp", "kernel_udp"] {
        assert!(v(row, "gbps") > 0.0, "{row}: {}", run[row]);
    }
    assert_eq!(run["kernel_udp"]["value"]["datagram"], 1500 - 28);
    for row in ["write_xdp", "write_udp"] {
        let w = &run[row]["value"];
        assert_eq!(w["verified"], true, "{row}: {w}");
        assert_eq!(w["bytes"], 64 << 20, "{row}: {w}");
        for k in ["gbps", "cpu_seconds", "cpu_s_per_gb"] {
            assert!(v(row, k) > 0.0, "{row} {k}: {w}");
        }
        assert!(w["tx_data"].as_u64().unwrap() > 0, "{row}: {w}");
    }
    for (row, size, depth) in [
        ("perf_64k", 65536, 16),
        ("perf_4k", 4096, 64),
        ("latency_64b", 64, 1),
    ] {
        let p = &run[row]["value"];
        assert_eq!(p["size"], size, "{row}: {p}");
        assert_eq!(p["depth"], depth, "{row}: {p}");
        assert!(p["messages"].as_u64().unwrap() > 0, "{row}: {p}");
        assert!(v(row, "gbps") > 0.0, "{row}: {p}");
        assert!(1.0 < v(row, "p50_us") && v(row, "p50_us") <= v(row, "p99_us"));
    }
    let rtt = &run["udp_rtt"]["value"];
    assert!(rtt["samples"].as_u64().unwrap() > 0, "{rtt}");
    // A round trip through two namespaces' stacks is never under 1 µs.
    assert!(1.0 < v("udp_rtt", "p50_us") && v("udp_rtt", "p50_us") <= v("udp_rtt", "p99_us"));
}

#[test]
fn bench_reports_every_row_and_the_ratios_between_them() {
    let (v, pid) = run_bench();
    assert!(!v["build"].as_str().unwrap().is_empty());
    assert!(v["date"].as_str().unwrap().ends_with('Z'));
    assert!(!v["loadavg_before"].as_str().unwrap().is_empty());
    assert!(!v["loadavg_after"].as_str().unwrap().is_empty());
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{v}");
    let run = &runs[0];
    assert_eq!(run["mtu"], 1500);
    check_rows(run);

    // One run: the medians are its values, the ratios theirs.
    let s = &v["summaries"][0];
    assert_eq!(s["mtu"], 1500);
    let r = |row: &str, k: &str| num(run, &[row, "value", k]);
    let ratio = |k: &str| num(s, &["ratios", k]);
    let write = r("write_xdp", "gbps");
    assert!(close(
        ratio("write_over_raw"),
        write / r("raw", "payload_gbps")
    ));
    assert!(close(
        ratio("write_over_tcp"),
        write / r("kernel_tcp", "gbps")
    ));
    assert!(close(
        ratio("write_over_udp"),
        write / r("kernel_udp", "gbps")
    ));
    assert!(close(
        ratio("cpu_per_gb_write_over_raw"),
        r("write_xdp", "cpu_s_per_gb") / r("raw", "cpu_s_per_gb")
    ));
    assert!(close(
        ratio("latency_over_udp_rtt"),
        r("latency_64b", "p50_us") / r("udp_rtt", "p50_us")
    ));
    assert!(close(
        ratio("perf_64k_over_raw"),
        r("perf_64k", "gbps") / r("raw", "payload_gbps")
    ));
    assert!(close(
        ratio("write_udp_over_udp"),
        r("write_udp", "gbps") / r("kernel_udp", "gbps")
    ));
    assert!(close(
        ratio("write_udp_over_tcp"),
        r("write_udp", "gbps") / r("kernel_tcp", "gbps")
    ));
    // With one repeat each repeat's own ratio is the ratio of the medians.
    for (paired, of_medians) in [
        ("write_over_raw", "write_over_raw"),
        ("cpu_per_gb_write_over_raw", "cpu_per_gb_write_over_raw"),
        ("write_over_tcp", "write_over_tcp"),
        ("write_udp_over_tcp", "write_udp_over_tcp"),
        ("latency_over_udp_rtt", "latency_over_udp_rtt"),
    ] {
        let p = num(s, &["paired", paired, "median"]);
        assert!(close(p, ratio(of_medians)), "{paired}: {p}");
        assert_eq!(
            s["paired"][paired]["runs"].as_array().map(Vec::len),
            Some(1)
        );
    }

    // Its labs are gone.
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(!list.contains(&format!("uetlab-{pid}-")), "{list}");
}
