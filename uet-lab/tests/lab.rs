//! The veth lab on the real kernel (root): topology, daemons, the TBF
//! bottleneck, the ECN marker, the impairment program, teardown by `down`
//! and by drop, and `uet lab demo` end to end. Every lab has a unique name,
//! so these run side by side; waits are bounded polls, never sleeps.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use uet_lab::{Impairment, Lab, LabConfig, LabState, WriteOpts, WriteResult};

fn ping(lab: &Lab, from: usize, to: usize) {
    let out = lab
        .host(from)
        .command("ping")
        .args(["-c", "1", "-W", "2", &lab.ip(to).to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ping host {from} -> host {to}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

fn netns_list() -> String {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    })
}

/// Everything `state` recorded is gone: namespaces, daemons, pins, state.
fn assert_gone(state: &LabState, pids: &[u32]) {
    let list = netns_list();
    for ns in state.namespaces() {
        assert!(!list.contains(&ns), "namespace {ns} left behind: {list}");
    }
    for &p in pids {
        // A killed daemon may take a moment to leave the process table.
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(p) && Instant::now() < deadline {
            std::thread::park_timeout(Duration::from_millis(10));
        }
        assert!(!alive(p), "daemon {p} left behind");
    }
    assert!(!LabState::path(&state.name).exists(), "state file left");
    if let Some(pins) = &state.pins {
        assert!(!pins.exists(), "{} left", pins.display());
    }
}

fn daemon_pids(state: &LabState) -> Vec<u32> {
    state.hosts.iter().filter_map(|h| h.daemon_pid).collect()
}

#[test]
fn three_hosts_ping_and_a_write_through_the_bottleneck_stays_under_its_rate() {
    let rate = 100_000_000u64;
    let mut lab = Lab::up(LabConfig {
        hosts: 3,
        bottleneck: Some(rate),
        buffer: Some(256 << 10),
        region_bytes: 16 << 20,
        ..LabConfig::default()
    })
    .unwrap();
    // Daemons answer: each printed its exposed region and still runs.
    for i in 0..3 {
        assert!(lab.daemon_alive(i), "host {i}'s daemon exited");
        let lines = lab.daemon_lines(i).unwrap();
        assert!(
            lines.iter().any(|l| l.contains(r#""event":"exposed""#)),
            "{lines:?}"
        );
    }
    for (a, b) in [(1, 0), (2, 0), (1, 2), (0, 2)] {
        ping(&lab, a, b);
    }
    let s = lab.sampler().unwrap();
    assert_eq!(s.qdisc().unwrap().kind, "tbf");
    let w = lab
        .write(
            1,
            0,
            &WriteOpts {
                bytes: 4 << 20,
                ..WriteOpts::default()
            },
        )
        .unwrap();
    assert!(w.verified(), "{w:?}");
    let limit = rate as f64 * 1.05 / 1e9;
    assert!(
        w.gbps <= limit,
        "goodput {} Gb/s above the bottleneck's {limit}",
        w.gbps
    );
    let q = s.qdisc().unwrap();
    assert!(q.bytes >= 4 << 20, "the TBF carried the write: {q:?}");
    // The writer wrote through its serving daemon, which still serves.
    assert!(lab.daemon_alive(1));
    assert!(w.tx_data >= (4 << 20) / 1500, "{w:?}");

    // An incast: hosts 1 and 2 write to host 0 at once; both land.
    let (a, b) = two_into_one(&mut lab, 2 << 20);
    assert_eq!((a.bytes, b.bytes), (2 << 20, 2 << 20));
}

/// Hosts 1 and 2 write `bytes` each to host 0 at once (256 KiB writes);
/// both verified.
fn two_into_one(lab: &mut Lab, bytes: u64) -> (WriteResult, WriteResult) {
    let opts = WriteOpts {
        bytes,
        chunk: 256 << 10,
        ..WriteOpts::default()
    };
    let a = lab.start_write(1, 0, &opts).unwrap();
    let b = lab.start_write(2, 0, &opts).unwrap();
    let (a, b) = (a.wait(lab).unwrap(), b.wait(lab).unwrap());
    assert!(a.verified() && b.verified(), "{a:?}\n{b:?}");
    (a, b)
}

#[test]
fn ecn_marks_when_the_queue_builds_and_not_when_idle() {
    let mut lab = Lab::up(LabConfig {
        hosts: 2,
        bottleneck: Some(100_000_000),
        buffer: Some(256 << 10),
        ecn: Some((3_000, 6_000)),
        region_bytes: 16 << 20,
        sender_daemons: false,
        ..LabConfig::default()
    })
    .unwrap();
    let s = lab.sampler().unwrap();
    // Sampling is cheap enough for ≥ 1 kHz.
    let t = Instant::now();
    for _ in 0..200 {
        s.sample().unwrap();
    }
    assert!(
        t.elapsed() < Duration::from_millis(200),
        "200 samples took {:?}",
        t.elapsed()
    );
    // Idle: pings cross the bottleneck port, nothing queues, no marks.
    for _ in 0..3 {
        ping(&lab, 1, 0);
    }
    let idle = s.ecn().unwrap();
    assert!(idle.seen > 0, "{idle:?}");
    assert_eq!(idle.marked, 0, "{idle:?}");
    // A fixed-window write queues at the bottleneck: marks.
    let w = lab
        .write(
            1,
            0,
            &WriteOpts {
                bytes: 4 << 20,
                ..WriteOpts::default()
            },
        )
        .unwrap();
    assert!(w.verified());
    let busy = s.ecn().unwrap();
    assert!(busy.marked > 0, "no marks under load: {busy:?}");
    assert!(busy.vq_peak > 6_000, "{busy:?}");
}

#[test]
fn a_trimming_bottleneck_forwards_what_overflows_as_headers_and_drops_nothing() {
    // A fixed 64 KiB window (44 packets) from each of two writers into a
    // 24-frame buffer: drop-tail would drop about half of what is in
    // flight, every round trip.
    let buffer = 24 * 1514;
    let mut lab = Lab::up(LabConfig {
        hosts: 3,
        bottleneck: Some(100_000_000),
        buffer: Some(buffer),
        trim: true,
        region_bytes: 16 << 20,
        daemon_args: vec!["--window".into(), "64KiB".into()],
        ..LabConfig::default()
    })
    .unwrap();
    let s = lab.sampler().unwrap();
    let before = s.sample().unwrap();
    let (a, b) = two_into_one(&mut lab, 4 << 20);
    let after = s.sample().unwrap();
    let trimmed = after.ecn.trimmed - before.ecn.trimmed;
    assert!(trimmed > 0, "nothing trimmed: {after:?}");
    assert_eq!(after.ecn.trim_errors, 0, "{after:?}");
    // The TBF has room for the trimmed frames beyond the buffer, and the
    // marker trimmed every whole packet the buffer could not hold.
    assert_eq!(after.qdisc.drops, before.qdisc.drops, "{after:?}");
    assert_eq!(after.ecn.vq_drops, before.ecn.vq_drops, "{after:?}");
    // The receiver NACKed the trimmed data packets as trimmed at the last
    // hop (a resend can be trimmed again; a trimmed control packet draws
    // no NACK), and the writers resent them (but the odd NACK that came
    // after its packet was delivered another way: counted once the write
    // completed, or of a packet already acknowledged).
    let target = stats(&lab, 0);
    let nacked = nacks(&target, "tx_nacks", "uet_trimmed_lasthop");
    assert!(
        nacked <= trimmed && nacked * 100 >= trimmed * 99,
        "{trimmed} trimmed, {nacked} NACKed: {}",
        target["workers"]
    );
    let resent = a.retransmits + b.retransmits;
    assert!(
        resent * 100 >= nacked * 99,
        "{nacked} NACKed, {resent} resent"
    );
}

/// Bytes of the fault tests' writes: `UET_LAB_FAULT_BYTES` (e.g. 64MiB),
/// else 1 GiB.
fn fault_bytes() -> u64 {
    std::env::var("UET_LAB_FAULT_BYTES")
        .ok()
        .map_or(1 << 30, |v| {
            v.parse::<uetd::config::Size>()
                .expect("UET_LAB_FAULT_BYTES: a size like 64MiB")
                .0
        })
}

/// Sums a per-code NACK counter (`rx_nacks`/`tx_nacks`) over workers.
fn nacks(stats: &serde_json::Value, dir: &str, code: &str) -> u64 {
    stats["workers"].as_array().map_or(0, |ws| {
        ws.iter().filter_map(|w| w["pds"][dir][code].as_u64()).sum()
    })
}

fn stats(lab: &Lab, i: usize) -> serde_json::Value {
    let mut c = lab.client(i, "lab test").unwrap();
    serde_json::from_str(&c.stats().unwrap()).unwrap()
}

#[test]
fn writes_land_byte_exact_through_1_and_5_percent_loss_with_reordering() {
    let bytes = fault_bytes();
    let mut lab = Lab::up(LabConfig {
        hosts: 2,
        region_bytes: bytes,
        ..LabConfig::default()
    })
    .unwrap();
    // Pings are not UET: untouched.
    lab.impair(&Impairment {
        loss: 0.01,
        reorder: 0.02,
        ..Impairment::default()
    })
    .unwrap();
    ping(&lab, 1, 0);
    assert_eq!(lab.impair_counters().unwrap().seen, 0);
    for loss in [0.01, 0.05] {
        lab.impair(&Impairment {
            loss,
            reorder: 0.02,
            ..Impairment::default()
        })
        .unwrap();
        let before = lab.impair_counters().unwrap();
        let t = Instant::now();
        let w = lab
            .write(
                1,
                0,
                &WriteOpts {
                    bytes,
                    seed: 7,
                    ..WriteOpts::default()
                },
            )
            .unwrap();
        let c = lab.impair_counters().unwrap();
        eprintln!(
            "{bytes} bytes at {loss} loss: {:.1} s ({:.2} Gb/s), {} retransmits, {} RTOs, {} dropped, {} reordered",
            t.elapsed().as_secs_f64(),
            w.gbps,
            w.retransmits,
            w.rtos,
            c.dropped - before.dropped,
            c.returned - before.returned
        );
        assert!(w.verified(), "{w:?}");
        assert_eq!(w.bytes, bytes);
        let seen = c.seen - before.seen;
        let dropped = c.dropped - before.dropped;
        // The drops are near the asked rate (±50 %: a binomial over
        // hundreds of thousands of frames is far tighter).
        assert!(
            (dropped as f64) > loss * 0.5 * seen as f64
                && (dropped as f64) < loss * 1.5 * seen as f64,
            "{dropped} of {seen} dropped at {loss}"
        );
        assert!(c.detoured > before.detoured, "no reordering: {c:?}");
        assert_eq!(c.returned, c.detoured, "every detoured frame came back");
        assert!(w.retransmits > 0, "{dropped} dropped, no retransmits");
    }
    // Off again: the lab is clean for what comes next.
    lab.impair(&Impairment::default()).unwrap();
}

#[test]
fn a_peer_killed_mid_write_fails_the_write_within_the_retry_budget() {
    let mut lab = Lab::up(LabConfig {
        hosts: 3,
        region_bytes: 256 << 20,
        ..LabConfig::default()
    })
    .unwrap();
    let w = lab
        .start_write(
            1,
            0,
            &WriteOpts {
                bytes: 256 << 20,
                timeout: Duration::from_secs(120),
                ..WriteOpts::default()
            },
        )
        .unwrap();
    // Mid-write: some writes completed, the rest in flight.
    let deadline = Instant::now() + Duration::from_secs(60);
    while w.progress() < 4 << 20 {
        assert!(!w.is_finished(), "the write ended before the kill");
        assert!(Instant::now() < deadline, "no progress");
        std::thread::park_timeout(Duration::from_millis(1));
    }
    let target = lab.state().hosts[0].daemon_pid.unwrap();
    let killed = Command::new("kill")
        .args(["-KILL", &target.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let t = Instant::now();
    // The RTO the writer's PDC to the dead peer had at the kill: at least
    // RTO_INIT, more after a long round trip (twice the longest of the
    // last second or two). No sample can raise it afterwards.
    let dst = lab.state().hosts[0].ip.to_string();
    let rto_at_kill = stats(&lab, 1)["workers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|w| w["ccc"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["dst"] == dst.as_str())
        .filter_map(|c| c["rto_ns"].as_u64())
        .max()
        .map(Duration::from_nanos)
        .expect("the writer's statistics give its RTO to the peer it was writing to");
    let err = w.wait(&mut lab).unwrap_err();
    let failed_after = t.elapsed();
    let msg = err.chain();
    eprintln!("failed {failed_after:?} after the kill (RTO then {rto_at_kill:?}): {msg}");
    assert!(msg.contains("failed") && msg.contains("Transport"), "{msg}");
    // The retry budget: RTO · (1 + 2 + … + 2^max_rto_retx) after a
    // packet's first send, the RTO the PDC had at the kill (RTO_INIT on a
    // quick path; on a slow machine a 256 MiB write's round trips reached
    // tens of milliseconds and the write failed 4.2 s after the kill,
    // against 0.3 s from RTO_INIT); the slack covers packets first sent
    // after the kill and scheduling on a loaded machine, far below the
    // write's own 120 s timeout.
    let pds = uet_pds::PdsConfig {
        rto_init: Duration::from_micros(uetd::config::Config::default().rto_init_us)
            .max(rto_at_kill),
        ..uet_pds::PdsConfig::default()
    };
    let budget: Duration = (0..=pds.max_rto_retx).map(|r| pds.rto(r)).sum();
    assert!(
        failed_after < budget + Duration::from_secs(3),
        "failed {failed_after:?} after the kill; budget {budget:?} (RTO at the kill \
         {rto_at_kill:?}): {msg}"
    );
    // The writer's daemon is healthy: it answers, and writes elsewhere.
    assert!(lab.daemon_alive(1));
    let s = stats(&lab, 1);
    assert!(s["workers"][0]["pds"]["tx_data"].as_u64().unwrap() > 0);
    let ok = lab.write(1, 2, &WriteOpts::default()).unwrap();
    assert!(ok.verified(), "{ok:?}");
    // What a failed run keeps: every live daemon's counters and each log;
    // the killed one's connection error in place of its counters.
    let dir = std::env::temp_dir().join(format!("uet-lab-saved-{}", std::process::id()));
    lab.save_state(&dir).unwrap();
    let err = std::fs::read_to_string(dir.join("h0.error")).unwrap();
    assert!(err.contains("connecting to host 0"), "{err}");
    assert!(!dir.join("h0.json").exists());
    for i in 1..3 {
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(format!("h{i}.json"))).unwrap())
                .unwrap();
        // Host 1 wrote, host 2 received.
        let pds = &s["workers"][0]["pds"];
        let data = pds["tx_data"].as_u64().unwrap() + pds["rx_data"].as_u64().unwrap();
        assert!(data > 0, "{s}");
        assert!(dir.join(format!("h{i}.log")).exists());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn trimmed_packets_are_nacked_and_resent_and_the_write_verifies() {
    let mut lab = Lab::up(LabConfig {
        hosts: 2,
        region_bytes: 16 << 20,
        ..LabConfig::default()
    })
    .unwrap();
    lab.impair(&Impairment {
        trim: 0.02,
        trim_to: 64,
        toward_receiver_only: true,
        ..Impairment::default()
    })
    .unwrap();
    let w = lab
        .write(
            1,
            0,
            &WriteOpts {
                bytes: 16 << 20,
                ..WriteOpts::default()
            },
        )
        .unwrap();
    assert!(w.verified(), "{w:?}");
    let c = lab.impair_counters().unwrap();
    assert!(c.trimmed > 0, "{c:?}");
    assert_eq!(c.errors, 0, "{c:?}");
    // The target saw them as trimmed and NACKed them; the writer got the
    // NACKs and resent.
    let target = stats(&lab, 0);
    assert!(
        nacks(&target, "tx_nacks", "uet_trimmed") > 0,
        "{}",
        target["workers"]
    );
    let writer = &w.stats;
    assert!(
        nacks(writer, "rx_nacks", "uet_trimmed") > 0,
        "{}",
        writer["workers"]
    );
    assert!(w.retransmits > 0, "{w:?}");
}

#[test]
fn duplication_and_reordering_are_survived() {
    let mut lab = Lab::up(LabConfig {
        hosts: 2,
        region_bytes: 16 << 20,
        sender_daemons: false,
        ..LabConfig::default()
    })
    .unwrap();
    lab.impair(&Impairment {
        duplicate: 0.02,
        reorder: 0.05,
        ..Impairment::default()
    })
    .unwrap();
    let w = lab
        .write(
            1,
            0,
            &WriteOpts {
                bytes: 2 << 20,
                ..WriteOpts::default()
            },
        )
        .unwrap();
    assert!(w.verified(), "{w:?}");
    let c = lab.impair_counters().unwrap();
    assert!(c.duplicated > 0 && c.detoured > 0, "{c:?}");
    assert_eq!(c.returned, c.detoured, "every detoured frame came back");
    assert_eq!(c.errors, 0, "{c:?}");
    // Off again: nothing more happens.
    lab.impair(&Impairment::default()).unwrap();
    let before = lab.impair_counters().unwrap();
    ping(&lab, 1, 0);
    let after = lab.impair_counters().unwrap();
    assert_eq!(
        (before.duplicated, before.detoured),
        (after.duplicated, after.detoured)
    );
}

/// (rt_priority, policy) of every thread of `pid` (fields 40 and 41 of
/// `/proc/PID/task/TID/stat`; policy 1 is SCHED_FIFO).
fn thread_policies(pid: u32) -> Vec<(String, u64, u64)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let t = t.unwrap().path();
        let Ok(stat) = std::fs::read_to_string(t.join("stat")) else {
            continue; // the thread ended meanwhile
        };
        let (head, rest) = stat.rsplit_once(')').unwrap();
        let comm = head.split_once('(').unwrap().1.to_owned();
        let f: Vec<&str> = rest.split_whitespace().collect();
        // `rest` starts at field 3 (state).
        out.push((comm, f[40 - 3].parse().unwrap(), f[41 - 3].parse().unwrap()));
    }
    out
}

#[test]
fn a_realtime_host_daemon_runs_every_thread_sched_fifo_and_the_others_do_not() {
    let mut lab = Lab::up(LabConfig {
        hosts: 3,
        region_bytes: 1 << 20,
        realtime_hosts: vec![2],
        ..LabConfig::default()
    })
    .unwrap();
    // A client's reader thread starts after the daemon was made real-time.
    let _client = lab.client(2, "probe").unwrap();
    for restart in [false, true] {
        if restart {
            lab.restart_daemon(2).unwrap();
        }
        let pids = daemon_pids(lab.state());
        assert_eq!(pids.len(), 3);
        for (i, &pid) in pids.iter().enumerate() {
            let threads = thread_policies(pid);
            assert!(threads.len() >= 3, "host {i}: {threads:?}");
            for (comm, prio, policy) in &threads {
                if i == 2 {
                    assert_eq!(
                        (*prio, *policy),
                        (u64::from(uet_lab::PROBE_PRIORITY), 1),
                        "host {i} thread {comm} (restarted: {restart})"
                    );
                } else {
                    assert_eq!(
                        (*prio, *policy),
                        (0, 0),
                        "host {i} thread {comm} (restarted: {restart})"
                    );
                }
            }
        }
    }
}

/// The thread of `pid` named `comm`.
fn thread_named(pid: u32, comm: &str) -> i32 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .find_map(|t| {
            let t = t.ok()?.path();
            let name = std::fs::read_to_string(t.join("comm")).ok()?;
            (name.trim_end() == comm).then(|| t.file_name()?.to_str()?.parse().ok())?
        })
        .unwrap_or_else(|| panic!("no thread {comm} in {pid}"))
}

#[test]
fn only_the_prompt_hosts_workers_run_the_short_scheduler_slice() {
    use uetd::sys::affinity::thread_slice;
    // Before Linux 6.12 there is no per-thread slice to look at.
    let Some(base) = thread_slice(0).unwrap() else {
        return;
    };
    let lab = Lab::up(LabConfig {
        hosts: 3,
        region_bytes: 1 << 20,
        prompt_hosts: vec![0, 2],
        ..LabConfig::default()
    })
    .unwrap();
    let short = Duration::from_micros(uet_lab::PROMPT_SLICE_US);
    assert_ne!(short, base);
    let pids = daemon_pids(lab.state());
    assert_eq!(pids.len(), 3);
    for (i, &pid) in pids.iter().enumerate() {
        let worker = thread_slice(thread_named(pid, "uet-worker-0")).unwrap();
        let control = thread_slice(thread_named(pid, "uetd")).unwrap();
        let want = if i == 1 { base } else { short };
        assert_eq!((worker, control), (Some(want), Some(base)), "host {i}");
    }
}

#[test]
fn down_and_drop_leave_nothing_behind() {
    // Drop.
    let lab = Lab::up(LabConfig {
        hosts: 2,
        region_bytes: 1 << 20,
        ..LabConfig::default()
    })
    .unwrap();
    let state = lab.state().clone();
    let pids = daemon_pids(&state);
    assert_eq!(pids.len(), 2);
    assert!(LabState::path(&state.name).exists());
    drop(lab);
    assert_gone(&state, &pids);

    // `uet lab up` leaves it running; `uet lab down --name` removes it.
    let name = format!("uetlab-t{}", std::process::id());
    let out = Command::new(uet_lab::uet_bin().expect("the uet binary"))
        .args([
            "lab",
            "up",
            "--hosts",
            "2",
            "--region",
            "1MiB",
            "--bottleneck",
            "1G",
            "--ecn",
            "20000,80000",
            "--name",
            &name,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let state: LabState = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(state.name, name);
    let pids = daemon_pids(&state);
    for &p in &pids {
        assert!(alive(p), "daemon {p} died with `uet lab up`");
    }
    let list = netns_list();
    for ns in state.namespaces() {
        assert!(list.contains(&ns), "{ns} missing: {list}");
    }
    let out = Command::new(uet_lab::uet_bin().expect("the uet binary"))
        .args(["lab", "down", "--name", &name])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_gone(&state, &pids);
}

#[test]
fn a_failed_up_removes_what_it_made() {
    // A daemon that cannot start (unknown congestion control) fails the
    // lab after its namespaces and programs exist.
    let name = format!("uetlab-f{}", std::process::id());
    let err = Lab::up(LabConfig {
        hosts: 2,
        cc: "no-such-cc".into(),
        region_bytes: 1 << 20,
        name: Some(name.clone()),
        ..LabConfig::default()
    })
    .unwrap_err();
    let msg = err.chain();
    assert!(msg.contains("did not come up"), "{msg}");
    assert!(!netns_list().contains(&name));
    assert!(!LabState::path(&name).exists());
    assert!(!Path::new("/sys/fs/bpf/uet-lab").join(&name).exists());
}

#[test]
fn demo_runs_end_to_end() {
    let out = Command::new(uet_lab::uet_bin().expect("the uet binary"))
        .args([
            "lab",
            "demo",
            "--perf-seconds",
            "0.5",
            "--ceiling-seconds",
            "0.5",
            "--json",
        ])
        .env("UET_DEMO_BYTES", "8MiB")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("verified"), "{stdout}");
    let json = stdout.lines().last().unwrap();
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["write"]["xxh3"], v["write"]["target_xxh3"]);
    assert_eq!(v["write"]["bytes"], 8 << 20);
    // `uet perf` ran: messages, bandwidth and latency percentiles.
    let perf = &v["perf"];
    assert!(perf["messages"].as_u64().unwrap() > 0, "{perf}");
    assert!(perf["gbps"].as_f64().unwrap() > 0.0, "{perf}");
    assert!(perf["msg_rate"].as_f64().unwrap() > 0.0, "{perf}");
    let (p50, p99, p999) = (
        perf["p50_us"].as_f64().unwrap(),
        perf["p99_us"].as_f64().unwrap(),
        perf["p999_us"].as_f64().unwrap(),
    );
    assert!(0.0 < p50 && p50 <= p99 && p99 <= p999, "{perf}");
    assert!(stdout.contains("uet perf"), "{stdout}");
    assert!(v["raw_xdp_payload_gbps"].as_f64().unwrap() > 0.0);
    assert!(v["kernel_udp_gbps"].as_f64().unwrap() > 0.0);
    let lab = v["lab"].as_str().unwrap();
    assert!(!netns_list().contains(lab));
}

/// The target's daemon restarts between two writes: the writer's PDC to it
/// is refused as unknown (INV_DPDCID), reopened, and the second write lands
/// too instead of failing.
#[test]
fn a_write_after_the_peers_daemon_restarted_succeeds() {
    let mut lab = Lab::up(LabConfig {
        hosts: 2,
        region_bytes: 4 << 20,
        ..LabConfig::default()
    })
    .unwrap();
    let opts = WriteOpts {
        bytes: 2 << 20,
        chunk: 256 << 10,
        timeout: Duration::from_secs(60),
        ..WriteOpts::default()
    };
    let first = lab.write(1, 0, &opts).unwrap();
    assert!(first.verified(), "{first:?}");
    lab.restart_daemon(0).unwrap();
    let second = lab.write(1, 0, &WriteOpts { seed: 2, ..opts }).unwrap();
    assert!(second.verified(), "{second:?}");
    let reopened: u64 = second.stats["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["pds"]["pdcs_reopened"].as_u64().unwrap_or(0))
        .sum();
    assert!(
        reopened >= 1,
        "the writer reopened its PDC: {}",
        second.stats
    );
}
