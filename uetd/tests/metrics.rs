//! `uetd --metrics-addr` serves the counters to Prometheus: two xdp
//! daemons in namespaces of their own, one writing 8 MiB into the other;
//! each one's `/metrics` is scraped over HTTP before and after, checked by
//! `promtool check metrics`, and the series that must exist from the start
//! are there and the ones the write moves have moved. `uet stats
//! --prometheus` prints the same series. Runs as root; needs promtool
//! (Debian's `prometheus` package, which `.ci/run` installs).

mod common;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Pair, Uetd, field, uet};
use uet_lab::netns::NetNs;

/// The status line and body of `GET path` to `addr` from inside `ns`.
fn get(ns: &NetNs, addr: SocketAddr, path: &str) -> (String, String) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/plain\r\n\r\n");
    let raw = ns
        .run(move || {
            let mut c = TcpStream::connect(addr).expect("connecting to the metrics endpoint");
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            c.write_all(req.as_bytes()).unwrap();
            let mut out = String::new();
            c.read_to_string(&mut out).expect("an answer, then close");
            out
        })
        .unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head.lines().next().unwrap().to_owned();
    if status.contains(" 200 ") {
        assert!(
            head.contains("Content-Type: text/plain; version=0.0.4"),
            "{head}"
        );
    }
    (status, body.to_owned())
}

fn scrape(ns: &NetNs, addr: SocketAddr) -> String {
    let (status, body) = get(ns, addr, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    promtool_check(&body);
    body
}

/// `promtool check metrics` on `text`: no parse error, no lint problem.
fn promtool_check(text: &str) {
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("running promtool: {e}; install Debian's `prometheus` package (.ci/run does)")
        });
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = p.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The value of `series` (name and labels exactly as printed).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn must(text: &str, series: &str) -> f64 {
    value(text, series).unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

/// The series of `text` (sample lines without their values).
fn series(text: &str) -> Vec<&str> {
    let mut s: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.rsplit_once(' ').unwrap().0)
        .collect();
    s.sort_unstable();
    s
}

fn metrics_addr(d: &mut Uetd) -> SocketAddr {
    let line = d.wait_line("\"metrics\"", Duration::from_secs(30));
    field(&line, "address").parse().unwrap()
}

#[test]
fn metrics_endpoint_is_valid_complete_from_the_start_and_moves_with_traffic() {
    let pair = Pair::new(151, 1500);
    let mut target = Uetd::spawn(
        &pair.b,
        &[
            "--interface",
            "v1",
            "--backend",
            "xdp",
            "--expose",
            "1:0x5eed:8MiB",
            "--metrics-addr",
            "127.0.0.1:0",
        ],
    );
    let t_addr = metrics_addr(&mut target);
    let exposed = target.wait_line("\"exposed\"", Duration::from_secs(30));
    let generation = field(&exposed, "generation").to_owned();

    // Before any traffic: every series is there, at 0.
    let before = scrape(&pair.b, t_addr);
    for s in [
        "uet_pds_rx_data_total{worker=\"0\"}",
        "uet_pds_tx_data_total{worker=\"0\"}",
        "uet_pds_drops_total{reason=\"duplicate\",worker=\"0\"}",
        "uet_pds_drops_total{reason=\"out_of_window\",worker=\"0\"}",
        "uet_pds_tx_nacks_total{code=\"no_pdc_avail\",worker=\"0\"}",
        "uet_pds_rx_nacks_total{code=\"unknown\",worker=\"0\"}",
        "uet_ses_ops_total{result=\"ok\",worker=\"0\"}",
        "uet_ses_ops_total{result=\"failed\",worker=\"0\"}",
        "uet_xsk_rx_ring_full_total{worker=\"0\"}",
        "uet_ccc_destinations{worker=\"0\"}",
    ] {
        assert_eq!(must(&before, s), 0.0, "{s}");
    }
    for s in [
        "uet_io_rx_bytes_total{worker=\"0\"}",
        "uet_worker_loop_iterations_total{worker=\"0\"}",
        "uet_neigh_destinations",
    ] {
        must(&before, s);
    }
    let build = before
        .lines()
        .find(|l| l.starts_with("uet_build_info{"))
        .expect("uet_build_info");
    assert!(
        build.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION")))
            && build.ends_with(" 1"),
        "{build}"
    );
    // Only /metrics is served.
    let (status, _) = get(&pair.b, t_addr, "/");
    assert_eq!(status, "HTTP/1.1 404 Not Found");

    let mut writer = Uetd::spawn(
        &pair.a,
        &[
            "--interface",
            "v0",
            "--backend",
            "xdp",
            "--write-to",
            &pair.b_ip,
            "--generation",
            &generation,
            "--bytes",
            "8MiB",
            "--metrics-addr",
            "127.0.0.1:0",
        ],
    );
    let w_addr = metrics_addr(&mut writer);
    writer.wait_line("\"written\"", Duration::from_secs(120));
    target.wait_line("\"verified\"", Duration::from_secs(60));

    // The target's counters moved; the series are the same ones. Its
    // workers publish about once a millisecond: poll, with a deadline.
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        let a = scrape(&pair.b, t_addr);
        if must(&a, "uet_pds_rx_data_total{worker=\"0\"}") >= 8.0 * 256.0 {
            break a;
        }
        assert!(Instant::now() < deadline, "the write never showed:\n{a}");
    };
    assert!(must(&after, "uet_io_rx_bytes_total{worker=\"0\"}") > 8.0 * 1024.0 * 1024.0);
    assert!(must(&after, "uet_pds_tx_acks_total{worker=\"0\"}") > 0.0);
    assert!(must(&after, "uet_ses_requests_total{worker=\"0\"}") > 0.0);
    assert!(must(&after, "uet_pds_pdcs_opened_total{worker=\"0\"}") >= 1.0);
    assert!(
        must(&after, "uet_worker_loop_iterations_total{worker=\"0\"}")
            > must(&before, "uet_worker_loop_iterations_total{worker=\"0\"}")
    );
    // The per-peer series aside, nothing appeared or vanished.
    let fixed = |t: &str| -> Vec<String> {
        series(t)
            .into_iter()
            .filter(|s| !s.contains("peer="))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(fixed(&before), fixed(&after));

    // The writer: its operations, and the congestion state towards the
    // target, labelled by peer.
    let w = scrape(&pair.a, w_addr);
    assert_eq!(
        must(&w, "uet_ses_ops_total{result=\"ok\",worker=\"0\"}"),
        8.0
    );
    assert_eq!(
        must(&w, "uet_ses_ops_total{result=\"failed\",worker=\"0\"}"),
        0.0
    );
    assert!(must(&w, "uet_pds_tx_data_total{worker=\"0\"}") >= 8.0 * 256.0);
    let peer = format!("peer=\"{}\",worker=\"0\"", pair.b_ip);
    assert!(
        must(&w, &format!("uet_ccc_cwnd_bytes{{{peer}}}")) > 0.0,
        "{w}"
    );
    must(&w, &format!("uet_ccc_inflight_bytes{{{peer}}}"));
    must(&w, &format!("uet_ccc_backlog_bytes{{{peer}}}"));
    assert!(must(&w, "uet_ccc_destinations{worker=\"0\"}") >= 1.0);

    // `uet stats --prometheus` prints the same series, and the same values
    // where nothing moves between the two reads.
    let w_socket = Uetd::socket_of(&pair.a);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::path::Path::new(&w_socket).exists() {
        assert!(Instant::now() < deadline, "no control socket at {w_socket}");
        std::thread::yield_now();
    }
    let cli = uet(&w_socket, &["stats", "--prometheus"]);
    promtool_check(&cli);
    let http = scrape(&pair.a, w_addr);
    assert_eq!(series(&cli), series(&http));
    for s in [
        "uet_ses_ops_total{result=\"ok\",worker=\"0\"}",
        "uet_pds_tx_data_total{worker=\"0\"}",
    ] {
        assert_eq!(value(&cli, s), value(&http, s), "{s}");
    }

    for d in [&mut writer, &mut target] {
        d.signal("-TERM");
        assert_eq!(d.wait_exit(Duration::from_secs(10)), Some(0));
    }
}
