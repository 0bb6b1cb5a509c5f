//! A host that stops the daemons for longer than RTO_INIT_TIME: both at
//! once, as a hypervisor that throttles the whole VM to a CPU quota does,
//! or the target alone, as a host that takes its vCPU away does. Every
//! packet in flight is past its RTO when they resume, yet nothing was
//! lost, and nothing may be resent (real kernel, root: two namespaces of
//! their own).

mod common;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use common::{Pair, landed, start_write};

/// Stops `pids` together (one `kill -STOP` for all) for `pause` every
/// `every` until `stop`, counting the pauses. The pauses are the stimulus:
/// the host's stalls, made on demand.
fn pause_together(
    pids: Vec<u32>,
    pause: Duration,
    every: Duration,
    stop: Arc<AtomicBool>,
    count: Arc<AtomicU32>,
) -> std::thread::JoinHandle<()> {
    let signal = move |sig: &str| {
        let _ = Command::new("kill")
            .arg(sig)
            .args(pids.iter().map(u32::to_string))
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

/// A 1500-MTU udp write of `bytes` at the daemons' default RTO settings
/// (with `--stats`), the target's daemon (and the writer's, with `both`)
/// stopped for `pause` every `every` until it landed. Returns the writer,
/// the target, the pauses made and the writer's "written" line; at least
/// three pauses fell in the write.
fn write_through_pauses(
    subnet: u8,
    bytes: &str,
    both: bool,
    pause: Duration,
    every: Duration,
) -> (common::Uetd, common::Uetd, u32, String) {
    let pair = Pair::new(subnet, 1500);
    let (mut target, mut writer) = start_write(&pair, "udp", "udp", bytes, &["--stats"]);
    let stop = Arc::new(AtomicBool::new(false));
    let pauses = Arc::new(AtomicU32::new(0));
    let mut pids = vec![target.child.id()];
    if both {
        pids.push(writer.child.id());
    }
    let pauser = pause_together(pids, pause, every, Arc::clone(&stop), Arc::clone(&pauses));
    let (written, _) = landed(&mut writer, &mut target, Duration::from_secs(300));
    let during = pauses.load(Ordering::Relaxed);
    stop.store(true, Ordering::Release);
    pauser.join().unwrap();
    assert!(
        during >= 3,
        "only {during} pauses during the write: {written}"
    );
    (writer, target, during, written)
}

/// Both daemons stop for 60 ms (three times `rto_silent_us`) every 40 ms.
/// The writer's worker notices each stall of its own and holds its loss
/// timers; a stall a busy test machine gives one daemon alone is covered
/// by `rto_silent_us`.
#[test]
fn a_host_that_stops_both_daemons_together_times_nothing_out() {
    let (mut writer, _target, during, written) = write_through_pauses(
        98,
        "512MiB",
        true,
        Duration::from_millis(60),
        Duration::from_millis(40),
    );
    let rtos = writer_counter(&mut writer, "pds", "rtos");
    let retransmits = writer_counter(&mut writer, "pds", "tx_retransmits");
    let stalls = writer_counter(&mut writer, "loop", "host_stalls");
    assert!(stalls >= 1, "the writer saw no stall in {during} pauses");
    assert_eq!(
        (rtos, retransmits),
        (0, 0),
        "{during} pauses, {stalls} stalls seen: {written}"
    );
}

/// The writer's counter `section`.`field`, summed over its workers, from
/// its stats line.
fn writer_counter(writer: &mut common::Uetd, section: &str, field: &str) -> u64 {
    let stats = match writer.seen.iter().find(|l| l.contains("\"workers\"")) {
        Some(l) => l.clone(),
        None => writer.wait_line("\"workers\"", Duration::from_secs(30)),
    };
    let st: serde_json::Value = serde_json::from_str(&stats).unwrap();
    st["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w[section][field].as_u64().unwrap())
        .sum()
}

/// The target alone stops for 10 ms every 50 ms, twice RTO_INIT_TIME
/// (5 ms) and half the default `rto_silent_us` (20 ms). The writer runs
/// on, so no hold of its own covers the silence; nothing it sent since
/// the target stopped is acknowledged, the RTO waits for `rto_silent_us`,
/// and the target acknowledges everything when it runs again. (With
/// `--rto-silent-us 0` the writer resends.)
#[test]
fn a_target_stopped_alone_past_rto_init_gets_nothing_resent() {
    let (mut writer, _target, during, written) = write_through_pauses(
        97,
        "1GiB",
        false,
        Duration::from_millis(10),
        Duration::from_millis(50),
    );
    let rtos = writer_counter(&mut writer, "pds", "rtos");
    let retransmits = writer_counter(&mut writer, "pds", "tx_retransmits");
    assert_eq!((rtos, retransmits), (0, 0), "{during} pauses: {written}");
}
