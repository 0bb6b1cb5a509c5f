//! A host that stops both daemons at once, as a hypervisor that throttles
//! the whole VM to a CPU quota does: every packet in flight is past its
//! RTO when they resume, yet nothing was lost, and nothing may be resent
//! (real kernel, root: two namespaces of its own).

mod common;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use common::{Pair, landed, start_write};

/// Stops `pids` together (one `kill -STOP` for both) for `pause` every
/// `every` until `stop`, counting the pauses. The pauses are the stimulus:
/// the host's stalls, made on demand.
fn pause_together(
    pids: [u32; 2],
    pause: Duration,
    every: Duration,
    stop: Arc<AtomicBool>,
    count: Arc<AtomicU32>,
) -> std::thread::JoinHandle<()> {
    let signal = move |sig: &str| {
        let _ = Command::new("kill")
            .arg(sig)
            .args(pids.map(|p| p.to_string()))
            .status();
    };
    std::thread::spawn(move || {
        while !stop.load(Ordering::Acquire) {
            std::thread::sleep(every);
            signal("-STOP");
            std::thread::sleep(pause);
            signal("-CONT");
            count.fetch_add(1, Ordering::Relaxed);
        }
    })
}

/// An RTO floor of 20 ms: above the stalls a busy test machine gives one
/// daemon alone (which no hold covers), a third of the pauses made here.
const RTO_INIT_US: &str = "20000";

#[test]
fn a_host_that_stops_both_daemons_together_times_nothing_out() {
    let pair = Pair::new(98, 1500);
    let extra = ["--rto-init-us", RTO_INIT_US, "--stats"];
    let (mut target, mut writer) = start_write(&pair, "udp", "udp", "512MiB", &extra);
    // 60 ms pauses, three times the RTO floor, with 40 ms of running
    // between.
    let stop = Arc::new(AtomicBool::new(false));
    let pauses = Arc::new(AtomicU32::new(0));
    let pids = [target.child.id(), writer.child.id()];
    let pauser = pause_together(
        pids,
        Duration::from_millis(60),
        Duration::from_millis(40),
        Arc::clone(&stop),
        Arc::clone(&pauses),
    );
    let (written, _) = landed(&mut writer, &mut target, Duration::from_secs(300));
    let during = pauses.load(Ordering::Relaxed);
    stop.store(true, Ordering::Release);
    pauser.join().unwrap();
    let stats = match writer.seen.iter().find(|l| l.contains("\"workers\"")) {
        Some(l) => l.clone(),
        None => writer.wait_line("\"workers\"", Duration::from_secs(30)),
    };
    let st: serde_json::Value = serde_json::from_str(&stats).unwrap();
    let workers = st["workers"].as_array().unwrap();
    let sum = |f: &dyn Fn(&serde_json::Value) -> u64| workers.iter().map(f).sum::<u64>();
    let rtos = sum(&|w| w["pds"]["rtos"].as_u64().unwrap());
    let retransmits = sum(&|w| w["pds"]["tx_retransmits"].as_u64().unwrap());
    let stalls = sum(&|w| w["loop"]["host_stalls"].as_u64().unwrap());
    assert!(
        during >= 3,
        "only {during} pauses during the write: {written}"
    );
    assert!(stalls >= 1, "the writer saw no stall in {during} pauses");
    assert_eq!(
        (rtos, retransmits),
        (0, 0),
        "{during} pauses, {stalls} stalls seen: {written}"
    );
}
