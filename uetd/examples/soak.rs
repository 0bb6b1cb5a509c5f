//! The soak (minutes; not in CI; root): churn of clients and peer restarts
//! under a light background of the attack run's malformed-frame storm, on
//! a three-host lab (`uet_lab`): host 0 serves a region (the peer that
//! restarts), host 1's daemon serves the churning clients and stays up for
//! the whole run (the one whose memory must stay flat), host 2 is the
//! attacker with no daemon.
//!
//! One iteration: a client connects to host 1's daemon, registers a memfd
//! of 64 KiB–4 MiB, writes the test pattern to a random place in host 0's
//! region, reads it back into a second memfd, compares, and disconnects.
//! Every `--restart-every` iterations host 0's daemon restarts. Every
//! `--sample-secs` a JSON line: elapsed time, operations done and failed
//! (and the errors' kinds), both daemons' RssAnon/VmRSS, host 1's counters.
//!
//! ```text
//! cargo build --release -p uetd --bins --examples
//! sudo target/release/examples/soak --seconds 300
//! ```

#[path = "../tests/adversary/mod.rs"]
mod adversary;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use adversary::{Addr, Dest, Dice, mac, send_all, stats, status_kib, storm};
use anyhow::{Context, Result, bail, ensure};
use uet_api::{Event, Status};
use uet_lab::{Lab, LabConfig};
use uetd::packet::PacketSocket;

const TARGET: usize = 0;
const CLIENTS: usize = 1;
const ATTACKER: usize = 2;

/// The peer's region.
const REGION: u64 = 64 << 20;

struct Args {
    seconds: u64,
    restart_every: u64,
    storm_pps: u64,
    sample_secs: u64,
}

fn args() -> Result<Args> {
    let mut a = Args {
        seconds: 300,
        restart_every: 50,
        storm_pps: 2_000,
        sample_secs: 10,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v: u64 = it
            .next()
            .with_context(|| format!("{k} needs a value"))?
            .parse()
            .with_context(|| format!("{k}: a number"))?;
        match k.as_str() {
            "--seconds" => a.seconds = v,
            "--restart-every" => a.restart_every = v.max(1),
            "--storm-pps" => a.storm_pps = v,
            "--sample-secs" => a.sample_secs = v.max(1),
            _ => bail!(
                "unknown argument {k} (--seconds, --restart-every, --storm-pps, --sample-secs)"
            ),
        }
    }
    Ok(a)
}

/// What one client iteration did.
fn iteration(lab: &Lab, dst: &uet_api::RemoteRegion, dice: &mut Dice) -> Result<()> {
    let mut c = lab.client(CLIENTS, "soak").context("connect")?;
    let len = (64 << 10) + dice.below(4 << 20) as u32 / 4096 * 4096;
    let at = dice.below(REGION - u64::from(len)) / 4096 * 4096;
    let src = c.create_region(u64::from(len)).context("memfd")?;
    let back = c.create_region(u64::from(len)).context("memfd")?;
    let seed = dice.u64();
    let mut want = vec![0u8; len as usize];
    uetd::mem::pattern(seed, 0, &mut want);
    src.write_at(0, &want)?;
    let s = c.register_local(&src).context("register")?;
    let b = c.register_local(&back).context("register")?;
    let deadline = Duration::from_secs(20);
    let done = |c: &mut uet_api::Client, tag, what: &str| -> Result<()> {
        match c.wait_completion(tag, Some(deadline)) {
            Ok(Event::Completion(cmp)) if cmp.status == Status::Ok => Ok(()),
            Ok(Event::Completion(cmp)) => bail!("{what}: {:?}", cmp.status),
            Ok(e) => bail!("{what}: unexpected {e:?}"),
            Err(e) => bail!("{what}: {e}"),
        }
    };
    let t = c.write(s.at(0), dst.at(at), len, None).context("write")?;
    done(&mut c, t, "write")?;
    let t = c.read(b.at(0), dst.at(at), len).context("read")?;
    done(&mut c, t, "read")?;
    let mut got = vec![0u8; len as usize];
    back.read_at(0, &mut got)?;
    ensure!(got == want, "read back differs from what was written");
    c.close().context("close")?;
    Ok(())
}

/// A short name for an error, for the tallies.
fn kind(e: &anyhow::Error) -> String {
    format!("{e:#}").chars().take(80).collect()
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("soak: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let a = args()?;
    {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
        std::thread::spawn(move || {
            if signals.forever().next().is_some() {
                uet_lab::abort_all();
                std::process::exit(130);
            }
        });
    }
    let mut lab = Lab::up(LabConfig {
        hosts: 3,
        region_bytes: REGION,
        sender_daemons: false,
        ..LabConfig::default()
    })?;
    lab.restart_daemon(CLIENTS)?;
    let link = lab.host(ATTACKER).run(|| PacketSocket::open("eth0"))??;
    let to_target = Addr {
        src_mac: mac(&lab, ATTACKER),
        dst_mac: mac(&lab, TARGET),
        src: lab.ip(ATTACKER),
        dst: lab.ip(TARGET),
    };
    let to_clients = Addr {
        dst_mac: mac(&lab, CLIENTS),
        dst: lab.ip(CLIENTS),
        ..to_target
    };
    let mut dst = lab.region(TARGET)?;

    // The background storm, to both daemons, round after round.
    let stop = Arc::new(AtomicBool::new(false));
    let storm_frames = Arc::new(AtomicU64::new(0));
    let storm_thread = {
        let (stop, n) = (Arc::clone(&stop), Arc::clone(&storm_frames));
        let d = Dest::of(&dst);
        let pps = a.storm_pps;
        std::thread::spawn(move || {
            let mut dice = Dice::new(0x50a4);
            let mut frames = storm(&to_target, &d, REGION, &mut dice);
            frames.extend(storm(&to_clients, &d, REGION, &mut dice));
            while pps > 0 && !stop.load(Ordering::Acquire) {
                for chunk in frames.chunks(1000) {
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    send_all(&link, chunk, pps);
                    n.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                }
            }
        })
    };

    let pid = |lab: &Lab, i: usize| lab.state().hosts[i].daemon_pid.unwrap_or(0);
    let clients_pid = pid(&lab, CLIENTS);
    let mut dice = Dice::new(0x50a5);
    let (mut ok, mut failed, mut restarts) = (0u64, 0u64, 0u64);
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let start = Instant::now();
    let mut next_sample = start;
    let end = start + Duration::from_secs(a.seconds);
    let mut iter = 0u64;
    let mut rss_first = None;
    loop {
        let now = Instant::now();
        if now >= next_sample || now >= end {
            next_sample += Duration::from_secs(a.sample_secs);
            let s = stats(&lab, CLIENTS);
            let w = &s["workers"][0];
            let kib = |p, f| status_kib(p, f).unwrap_or(0);
            let line = serde_json::json!({
                "t": (now - start).as_secs(),
                "ok": ok,
                "failed": failed,
                "restarts": restarts,
                "storm_frames": storm_frames.load(Ordering::Relaxed),
                "clients_daemon": {
                    "rss_anon_kib": kib(clients_pid, "RssAnon"),
                    "vm_rss_kib": kib(clients_pid, "VmRSS"),
                    "pdcs_opened": w["pds"]["pdcs_opened"],
                    "pdcs_closed": w["pds"]["pdcs_closed"],
                    "drops": w["pds"]["drops"],
                    "rx_nacks": w["pds"]["rx_nacks"],
                    "ses": w["ses"],
                },
                "peer_daemon": {
                    "rss_anon_kib": kib(pid(&lab, TARGET), "RssAnon"),
                    "vm_rss_kib": kib(pid(&lab, TARGET), "VmRSS"),
                },
                "errors": errors,
            });
            rss_first.get_or_insert_with(|| kib(clients_pid, "RssAnon"));
            println!("{line}");
            if now >= end {
                break;
            }
        }
        ensure!(lab.daemon_alive(CLIENTS), "the clients' daemon exited");
        match iteration(&lab, &dst, &mut dice) {
            Ok(()) => ok += 1,
            Err(e) => {
                failed += 1;
                *errors.entry(kind(&e)).or_default() += 1;
            }
        }
        iter += 1;
        if iter.is_multiple_of(a.restart_every) {
            lab.restart_daemon(TARGET)?;
            dst = lab.region(TARGET)?;
            restarts += 1;
        }
    }
    stop.store(true, Ordering::Release);
    let _ = storm_thread.join();
    let rss_end = status_kib(clients_pid, "RssAnon").unwrap_or(0);
    eprintln!(
        "soak: {:.0} s, {ok} iterations ok, {failed} failed, {restarts} peer restarts, {} storm frames; \
         the clients' daemon RssAnon {} -> {rss_end} KiB; errors {errors:?}",
        start.elapsed().as_secs_f64(),
        storm_frames.load(Ordering::Relaxed),
        rss_first.unwrap_or(0),
    );
    Ok(())
}
