//! End to end between two daemons in network namespaces joined by veth
//! an RMA write lands byte-exact (the target hashes its
//! region and the hashes must agree) while ping keeps working; a daemon
//! killed with SIGKILL can be restarted. Runs as root (CI does).

mod common;

use std::time::Duration;

use common::{Pair, Uetd, Write, field, landed, write_once};

/// Bytes per transfer: 1 GiB as the issue asks; `UET_E2E_BYTES` shrinks it
/// for quick local runs.
fn bytes() -> String {
    std::env::var("UET_E2E_BYTES").unwrap_or_else(|_| "1GiB".into())
}

/// Writes `bytes()` from A to B while ping runs and checks it landed;
/// returns the writer's and the target's stats.
fn transfer(
    pair: &Pair,
    a_backend: &str,
    b_backend: &str,
) -> (serde_json::Value, serde_json::Value) {
    transfer_with(pair, a_backend, b_backend, &[])
}

/// [`transfer`] with `extra` arguments for both daemons.
fn transfer_with(
    pair: &Pair,
    a_backend: &str,
    b_backend: &str,
    extra: &[&str],
) -> (serde_json::Value, serde_json::Value) {
    let size = bytes();
    if a_backend != b_backend {
        // A kernel UDP datagram leaves a veth with its checksum unfinished
        // (CHECKSUM_PARTIAL); XDP hands it to AF_XDP as is, so the lab turns
        // the offload off on the kernel side (a real NIC fills it in).
        let (ns, ifname) = if a_backend == "udp" {
            (&pair.a, "v0")
        } else {
            (&pair.b, "v1")
        };
        ns.run(move || uetd::xsk::set_tx_checksum_offload(ifname, false))
            .unwrap()
            .unwrap();
    }
    let mut ping = pair
        .a
        .command("ping")
        .args(["-c", "10", "-i", "0.2", "-W", "2", &pair.b_ip])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut args = vec!["--stats"];
    args.extend_from_slice(extra);
    let Write {
        mut target,
        mut writer,
        written,
        ..
    } = write_once(pair, a_backend, b_backend, &size, &args);
    let stats = writer.wait_line("\"workers\"", Duration::from_secs(30));
    let v: serde_json::Value = serde_json::from_str(&stats).unwrap();
    let w = &v["workers"][0];
    let ops = w["ses"]["ops_ok"].as_u64().unwrap();
    let chunks = field(&written, "bytes")
        .parse::<u64>()
        .unwrap()
        .div_ceil(1 << 20);
    assert_eq!(ops, chunks, "one completion per 1 MiB write: {stats}");
    assert!(w["io"]["tx_packets"].as_u64().unwrap() >= w["pds"]["tx_data"].as_u64().unwrap());
    assert_eq!(w["ccc"][0]["dst"], pair.b_ip.as_str(), "{stats}");
    assert_eq!(writer.wait_exit(Duration::from_secs(30)), Some(0));
    assert!(
        ping.wait().unwrap().success(),
        "ping failed during the transfer"
    );
    eprintln!("{a_backend}->{b_backend}: {written}");
    target.signal("-TERM");
    let t = target.wait_line("\"workers\"", Duration::from_secs(30));
    assert_eq!(target.wait_exit(Duration::from_secs(10)), Some(0));
    (v, serde_json::from_str(&t).unwrap())
}

#[test]
fn udp_to_udp_write_lands_byte_exact() {
    let pair = Pair::new(81, 1500);
    let _ = transfer(&pair, "udp", "udp");
}

/// A udp-to-udp write whose data leaves in GSO sends and arrives coalesced.
fn udp_write_in_gso_runs(subnet: u8, args: &[&str]) {
    let pair = Pair::new(subnet, 1500);
    let (w, t) = transfer_with(&pair, "udp", "udp", args);
    let (w, t) = (&w["workers"][0], &t["workers"][0]);
    let data = w["pds"]["tx_data"].as_u64().unwrap();
    let gso = w["udp"]["gso_datagrams"].as_u64().unwrap();
    let sends = w["udp"]["gso_sends"].as_u64().unwrap();
    // Nearly every data packet leaves in a run of several.
    assert!(gso * 10 >= data * 9, "{w}");
    assert!(sends * 4 <= gso, "runs of at least four on average: {w}");
    let gro = t["udp"]["gro_datagrams"].as_u64().unwrap();
    assert!(gro * 10 >= data * 9, "{t}");
    // Drops at the target's socket are counted apart from loss on the wire.
    assert!(t["udp"]["rx_socket_drops"].as_u64().is_some(), "{t}");
}

#[test]
fn a_udp_write_from_one_source_port_leaves_in_gso_sends_and_arrives_coalesced() {
    udp_write_in_gso_runs(83, &["--ev-bits", "0"]);
}

/// With the default 16 EVs (one socket each) the data is sprayed in runs
/// of one GSO send's worth (`ev_burst`), so it leaves in GSO sends too;
/// with one packet per EV it would leave datagram by datagram.
#[test]
fn a_sprayed_udp_write_leaves_in_gso_sends_of_one_ev_each() {
    udp_write_in_gso_runs(93, &[]);
}

#[test]
fn xdp_to_xdp_write_lands_byte_exact_and_the_program_is_detached_after_exit() {
    let pair = Pair::new(84, 1500);
    let _ = transfer(&pair, "xdp", "xdp");
    for (ns, ifname) in [(&pair.a, "v0"), (&pair.b, "v1")] {
        assert!(!xdp_attached(ns, ifname), "XDP left on {ifname}");
    }
}

/// An xdp-to-xdp write at MTU `mtu` that carries UET's 4 KiB payloads:
/// every data packet (4096 bytes of payload, a 4198-byte frame) spans two
/// 4 KiB UMEM frames, sent and received as multi-buffer chains.
fn xdp_write_with_4k_payloads(subnet: u8, mtu: u32) {
    let pair = Pair::new(subnet, mtu);
    let (stats, target) = transfer(&pair, "xdp", "xdp");
    let w = &stats["workers"][0];
    let data = w["pds"]["tx_data"].as_u64().unwrap();
    let chains = w["xsk"]["tx_multi_buffer"].as_u64().unwrap();
    assert!(chains >= data, "every data packet a chain: {stats}");
    let bytes = w["io"]["tx_bytes"].as_u64().unwrap();
    assert!(bytes >= data * 4096, "4 KiB payloads: {stats}");
    assert_eq!(w["xsk"]["rx_chain_too_long"], 0);
    // The target took every chain in place: its first frame filled to the
    // end of its chunk (copy mode), the short tail copied after it.
    let t = &target["workers"][0];
    let rx_chains = t["xsk"]["rx_multi_buffer"].as_u64().unwrap();
    assert!(rx_chains >= data, "every data packet a chain: {target}");
    assert_eq!(t["xsk"]["rx_gathered"], 0, "{target}");
}

#[test]
fn xdp_to_xdp_write_at_mtu_9000_carries_4k_payloads_byte_exact() {
    xdp_write_with_4k_payloads(87, 9000);
}

#[test]
fn xdp_to_xdp_write_at_mtu_4200_carries_4k_payloads_byte_exact() {
    xdp_write_with_4k_payloads(88, 4200);
}

#[test]
fn xdp_to_udp_write_lands_byte_exact() {
    let pair = Pair::new(85, 1500);
    let _ = transfer(&pair, "xdp", "udp");
}

#[test]
fn udp_to_xdp_write_lands_byte_exact() {
    let pair = Pair::new(86, 1500);
    let _ = transfer(&pair, "udp", "xdp");
}

fn xdp_attached(ns: &uet_lab::netns::NetNs, ifname: &str) -> bool {
    let out = ns.ip(&["-d", "link", "show", ifname]).unwrap();
    String::from_utf8_lossy(&out.stdout).contains("prog/xdp")
}

#[test]
fn xdp_daemon_killed_with_sigkill_restarts() {
    let pair = Pair::new(87, 1500);
    let mut first = Uetd::spawn(
        &pair.b,
        &[
            "--interface",
            "v1",
            "--backend",
            "xdp",
            "--expose",
            "1:1:1MiB",
        ],
    );
    first.wait_line("\"exposed\"", Duration::from_secs(30));
    assert!(xdp_attached(&pair.b, "v1"));
    first.signal("-KILL");
    let status = first
        .wait_status(Duration::from_secs(10))
        .expect("still running after SIGKILL");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    drop(first);
    let mut second = Uetd::spawn(
        &pair.b,
        &[
            "--interface",
            "v1",
            "--backend",
            "xdp",
            "--expose",
            "1:0x5eed:8MiB",
        ],
    );
    let exposed = second.wait_line("\"exposed\"", Duration::from_secs(30));
    let generation = field(&exposed, "generation").to_owned();
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
            "--exit",
        ],
    );
    landed(&mut writer, &mut second, Duration::from_secs(60));
    second.signal("-TERM");
    assert_eq!(second.wait_exit(Duration::from_secs(10)), Some(0));
    assert!(!xdp_attached(&pair.b, "v1"), "detached after a clean exit");
}

#[test]
fn udp_daemon_killed_with_sigkill_restarts() {
    let pair = Pair::new(82, 1500);
    let mut first = Uetd::spawn(
        &pair.b,
        &[
            "--interface",
            "v1",
            "--backend",
            "udp",
            "--expose",
            "1:1:1MiB",
        ],
    );
    first.wait_line("\"exposed\"", Duration::from_secs(30));
    first.signal("-KILL");
    let status = first
        .wait_status(Duration::from_secs(10))
        .expect("still running after SIGKILL");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    drop(first);
    // The same sockets bind again at once, and the new daemon serves.
    let size = "8MiB";
    let mut second = Uetd::spawn(
        &pair.b,
        &[
            "--interface",
            "v1",
            "--backend",
            "udp",
            "--expose",
            "1:0x5eed:8MiB",
        ],
    );
    let exposed = second.wait_line("\"exposed\"", Duration::from_secs(30));
    let generation = field(&exposed, "generation").to_owned();
    let mut writer = Uetd::spawn(
        &pair.a,
        &[
            "--interface",
            "v0",
            "--backend",
            "udp",
            "--write-to",
            &pair.b_ip,
            "--generation",
            &generation,
            "--bytes",
            size,
            "--exit",
        ],
    );
    landed(&mut writer, &mut second, Duration::from_secs(60));
}
