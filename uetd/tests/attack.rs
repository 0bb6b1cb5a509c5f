//! The attack run (real kernel, root): three lab hosts on one bridge — a
//! target daemon (host 0), a writer daemon (host 1) and an attacker with
//! no daemon (host 2) that sends raw frames from its own namespace. While
//! the writer writes the test pattern into the target's region in
//! verified 64 MiB transfers, the attacker sends one kind of traffic per
//! test: a storm of malformed frames, or one of the off-path spoofing
//! attacks. What must hold in every case: each transfer lands byte-exact,
//! both daemons keep running and answering `uet stats`, the victim's
//! counters show the attack was seen (counted drops or NACKs), and
//! neither daemon's anonymous memory grows by more than [`RSS_BOUND_KIB`].
//!
//! Every case builds its own lab (unique names, removed on drop, also when
//! the test fails) and the cases run one at a time (they share the two
//! CPUs CI has). Each case is its own test so that one can be run alone:
//! `cargo test -p uetd --release --test attack close_class_nacks`.

mod adversary;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use adversary::{
    Addr, CLOSE_CLASS, Dest, Dice, cp, daemon_pid, drops, frame, listen, mac, nack, poll_until,
    request, rss_anon_kib, seen, send_all, stats, storm, syn, write_ses,
};
use uet_lab::{Lab, LabConfig, WriteOpts};
use uet_wire::pds::cp::CpPayload;
use uetd::packet::PacketSocket;

const TARGET: usize = 0;
const WRITER: usize = 1;
const ATTACKER: usize = 2;

/// Bytes of each verified transfer.
const TRANSFER: u64 = 64 << 20;

/// How much a daemon's anonymous memory (`RssAnon`: heap and stacks; the
/// registered regions are shared memory and not in it) may grow over a
/// case, KiB. Measured (BENCHMARKS.md, "Hardening"): +1.6 to +2.7 MiB for
/// the target over the passing cases and their 3-8 transfers (PDCs, op
/// slots, the allocator's arenas; the SYN flood's displaced PDCs the
/// most), under +1 MiB for the writer; about 3× that leaves room for the
/// bounded tables a flood fills. The unbounded RCCC table grew the target
/// by +13 to +16 MiB within the RCCC case.
const RSS_BOUND_KIB: u64 = 8 << 10;

/// One case at a time: each builds a three-namespace lab and floods it.
static SERIAL: Mutex<()> = Mutex::new(());

/// The lab of one case, and what the attacker knows of it.
struct Arena {
    lab: Lab,
    link: Arc<PacketSocket>,
    /// Attacker → target, with the attacker's own MAC and IP.
    to_target: Addr,
    /// Attacker → writer, with the attacker's own MAC and IP.
    to_writer: Addr,
    writer_mac: [u8; 6],
    attacker_mac: [u8; 6],
    dest: Dest,
}

impl Arena {
    fn up(cc: &str) -> Self {
        let mut lab = Lab::up(LabConfig {
            hosts: 3,
            cc: cc.into(),
            region_bytes: TRANSFER,
            sender_daemons: false,
            ..LabConfig::default()
        })
        .expect("lab up");
        // The writer serves too (its counters and memory are watched from
        // the start); the attacker runs no daemon.
        lab.restart_daemon(WRITER).expect("the writer's daemon");
        let link = lab
            .host(ATTACKER)
            .run(|| PacketSocket::open("eth0"))
            .expect("the attacker's namespace")
            .expect("an AF_PACKET socket on the attacker's eth0");
        let (tm, wm, am) = (mac(&lab, TARGET), mac(&lab, WRITER), mac(&lab, ATTACKER));
        let ip = |i| lab.ip(i);
        let to_target = Addr {
            src_mac: am,
            dst_mac: tm,
            src: ip(ATTACKER),
            dst: ip(TARGET),
        };
        let to_writer = Addr {
            dst_mac: wm,
            dst: ip(WRITER),
            ..to_target
        };
        let dest = Dest::of(&lab.region(TARGET).expect("the target's region"));
        Self {
            lab,
            link: Arc::new(link),
            to_target,
            to_writer,
            writer_mac: wm,
            attacker_mac: am,
            dest,
        }
    }

    /// Spoofing the writer toward the target, from the attacker's MAC.
    fn as_writer(&self) -> Addr {
        self.to_target.from(self.lab.ip(WRITER), self.attacker_mac)
    }

    /// Spoofing the target toward the writer, from the attacker's MAC.
    fn as_target(&self) -> Addr {
        self.to_writer.from(self.lab.ip(TARGET), self.attacker_mac)
    }
}

/// What the attacker sends: `before` the first transfer starts (at full
/// speed), then `during` the transfers at `pps`.
struct Attack {
    before: Vec<Vec<u8>>,
    during: Vec<Vec<u8>>,
    pps: u64,
    /// The daemon the attack aims at, whose counters must move.
    victim: usize,
    /// Frames a daemon must each count: `(host, drop reason, frames)`;
    /// no reason: any of its attack counters ([`seen`]). 95 % must be
    /// there (a frame the sender's own queue dropped is not the daemon's).
    counted: Vec<(usize, Option<&'static str>, u64)>,
    /// Read the target's answers to the attacker: every SES response must
    /// refuse (nothing the attacker sends may be placed), and some must
    /// come (the requests reached SES and were checked there).
    listen: bool,
}

/// A SYN write with a key no region has, from PDC `spdcid`, `offset`
/// packets after its start PSN.
fn bogus_syn(
    a: &Addr,
    d: &Dest,
    spdcid: u16,
    psn: u32,
    offset: u16,
    cc: Option<(u8, u32)>,
) -> Vec<u8> {
    let wrong = Dest {
        key: d.key ^ 0x0bad_c0de,
        ..*d
    };
    frame(
        a,
        spdcid,
        &request(
            psn,
            spdcid,
            syn(offset),
            cc,
            &write_ses(&wrong, 0, 64, true, 0, 0, 1),
            &[7; 64],
        ),
    )
}

/// Runs one case: the lab, the attack during verified transfers, the
/// checks.
fn run(name: &str, cc: &str, plan: impl FnOnce(&Arena, &mut Dice) -> Attack) {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut ar = Arena::up(cc);
    let mut dice = Dice::new(0x5eed_0000 ^ name.len() as u64);
    let attack = plan(&ar, &mut dice);
    let rss0 = [rss_anon_kib(&ar.lab, TARGET), rss_anon_kib(&ar.lab, WRITER)];
    let seen0 = seen(&stats(&ar.lab, attack.victim));
    let count = |ar: &Arena, i: usize, reason: Option<&str>| {
        let s = stats(&ar.lab, i);
        reason.map_or_else(|| seen(&s), |r| drops(&s, r))
    };
    let counted0: Vec<u64> = attack
        .counted
        .iter()
        .map(|&(i, reason, _)| count(&ar, i, reason))
        .collect();
    let t0 = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let listener = attack.listen.then(|| {
        let link = ar
            .lab
            .host(ATTACKER)
            .run(|| PacketSocket::open("eth0"))
            .expect("the attacker's namespace")
            .expect("a second AF_PACKET socket");
        let (from, to, stop) = (ar.lab.ip(TARGET), ar.lab.ip(ATTACKER), Arc::clone(&stop));
        std::thread::spawn(move || listen(&link, from, to, &stop))
    });
    send_all(&ar.link, &attack.before, 0);

    let opts = WriteOpts {
        bytes: TRANSFER,
        seed: 17,
        timeout: Duration::from_secs(30),
        ..WriteOpts::default()
    };
    let report = |ar: &Arena, what: String| -> String {
        let s = |i| stats(&ar.lab, i)["workers"].to_string();
        format!(
            "{name}: {what}\n RssAnon target {} -> {} KiB, writer {} -> {} KiB\n target: {}\n writer: {}",
            rss0[0],
            rss_anon_kib(&ar.lab, TARGET),
            rss0[1],
            rss_anon_kib(&ar.lab, WRITER),
            s(TARGET),
            s(WRITER)
        )
    };
    // The attack starts once the first transfer is under way (the target
    // then knows the writer's MAC from the writer's own frames).
    let first = ar
        .lab
        .start_write(WRITER, TARGET, &opts)
        .expect("a transfer starts");
    let under_way = poll_until(Instant::now() + Duration::from_secs(30), || {
        first.progress() >= 1 << 20 || first.is_finished()
    });
    let done = Arc::new(AtomicBool::new(false));
    let attacker = {
        let (link, frames, done) = (Arc::clone(&ar.link), attack.during, Arc::clone(&done));
        let pps = attack.pps;
        std::thread::spawn(move || {
            send_all(&link, &frames, pps);
            done.store(true, Ordering::Release);
            frames.len()
        })
    };
    let mut transfers = 0u32;
    let mut result = Some(first.wait(&mut ar.lab));
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let w = match result.take() {
            Some(r) => r,
            None => ar.lab.write(WRITER, TARGET, &opts),
        };
        let w = match w {
            Ok(w) => w,
            Err(e) => {
                let _ = attacker.join();
                panic!(
                    "{}",
                    report(&ar, format!("transfer {transfers} failed: {}", e.chain()))
                );
            }
        };
        assert!(
            under_way || transfers > 0,
            "{name}: the first transfer never progressed"
        );
        assert!(
            w.verified() && w.bytes == TRANSFER,
            "{}",
            report(&ar, format!("transfer {transfers} not byte-exact: {w:?}"))
        );
        transfers += 1;
        // At least one whole transfer after the attack ended: damage that
        // stays (a poisoned next hop, a full table) shows there.
        if done.load(Ordering::Acquire) && transfers >= 2 {
            let finished_at = transfers;
            let w = ar.lab.write(WRITER, TARGET, &opts);
            match w {
                Ok(w) if w.verified() => {
                    transfers = finished_at + 1;
                    break;
                }
                Ok(w) => panic!(
                    "{}",
                    report(&ar, format!("last transfer not byte-exact: {w:?}"))
                ),
                Err(e) => panic!(
                    "{}",
                    report(&ar, format!("last transfer failed: {}", e.chain()))
                ),
            }
        }
        assert!(
            Instant::now() < deadline,
            "{name}: the attack outlasted 90 s of transfers"
        );
    }
    let sent = attacker.join().expect("the attacker thread");
    stop.store(true, Ordering::Release);
    if let Some(l) = listener {
        let answers = l.join().expect("the listener thread");
        eprintln!("{name}: the target answered the attacker {answers:?}");
        assert_eq!(
            answers.placed, 0,
            "{name}: a crafted write was placed: {answers:?}"
        );
        assert!(
            answers.responses > 0,
            "{name}: no SES response reached the attacker"
        );
    }

    // Both daemons run and answer; the victim counted the attack.
    for i in [TARGET, WRITER] {
        assert!(ar.lab.daemon_alive(i), "{name}: host {i}'s daemon exited");
    }
    let after = stats(&ar.lab, attack.victim);
    let seen1 = seen(&after);
    assert!(
        seen1 > seen0,
        "{}",
        report(
            &ar,
            format!("the victim (host {}) counted nothing", attack.victim)
        )
    );
    for (&(i, reason, n), c0) in attack.counted.iter().zip(counted0) {
        let c = count(&ar, i, reason) - c0;
        assert!(
            c * 100 >= n * 95,
            "{}",
            report(
                &ar,
                format!(
                    "host {i} counted {c} of {n} frames as {}",
                    reason.unwrap_or("an attack")
                )
            )
        );
    }
    let rss1 = [rss_anon_kib(&ar.lab, TARGET), rss_anon_kib(&ar.lab, WRITER)];
    eprintln!(
        "{name}: the victim's (host {}) PDS drops {}, NACKs sent {}, received {}; SES {}",
        attack.victim,
        after["workers"][0]["pds"]["drops"],
        after["workers"][0]["pds"]["tx_nacks"],
        after["workers"][0]["pds"]["rx_nacks"],
        after["workers"][0]["ses"]
    );
    eprintln!(
        "{name}: {} frames before, {sent} during ({:.1} s), {transfers} transfers of {} MiB verified; \
         counted {} -> {seen1}; RssAnon target {} -> {} KiB, writer {} -> {} KiB (pids {}, {})",
        attack.before.len(),
        t0.elapsed().as_secs_f64(),
        TRANSFER >> 20,
        seen0,
        rss0[0],
        rss1[0],
        rss0[1],
        rss1[1],
        daemon_pid(&ar.lab, TARGET),
        daemon_pid(&ar.lab, WRITER),
    );
    for (i, (a, b)) in rss0.iter().zip(rss1).enumerate() {
        assert!(
            b <= a + RSS_BOUND_KIB,
            "{name}: host {i}'s RssAnon grew {a} -> {b} KiB (bound +{RSS_BOUND_KIB} KiB)"
        );
    }
}

#[test]
fn malformed_frame_storm() {
    run("storm", "none", |ar, dice| {
        let mut during = storm(&ar.to_target, &ar.dest, TRANSFER, dice);
        during.extend(storm(&ar.to_writer, &ar.dest, TRANSFER, dice));
        Attack {
            before: Vec::new(),
            during,
            pps: 20_000,
            victim: TARGET,
            counted: Vec::new(),
            listen: true,
        }
    });
}

#[test]
fn close_class_nacks_spoofed_to_the_writer() {
    run("close_class_nacks", "none", |ar, dice| {
        let a = ar.as_target();
        let mut during = Vec::new();
        for _round in 0..4 {
            for code in CLOSE_CLASS {
                for dpdcid in 1..=64u16 {
                    let psn = dice.u32();
                    during.push(frame(&a, 0xbad0, &nack(code, psn, dpdcid, dpdcid)));
                }
            }
        }
        Attack {
            before: Vec::new(),
            during,
            pps: 2_000,
            victim: WRITER,
            counted: Vec::new(),
            listen: false,
        }
    });
}

#[test]
fn close_cps_spoofed_to_the_target() {
    run("close_cps", "none", |ar, dice| {
        let a = ar.as_writer();
        let mut during = Vec::new();
        for _round in 0..2 {
            for spdcid in 1..=64u16 {
                // A DPDCID that exists (small, sequential) and one that
                // does not.
                for dpdcid in (1..=64u16).chain([0xfff0]) {
                    let psn = dice.u32();
                    during.push(frame(
                        &a,
                        0xbad1,
                        &cp(CpPayload::Close, psn, spdcid, dpdcid),
                    ));
                }
            }
        }
        Attack {
            before: Vec::new(),
            during,
            pps: 4_000,
            victim: TARGET,
            counted: Vec::new(),
            listen: false,
        }
    });
}

#[test]
fn close_reqs_spoofed_to_both_ends() {
    run("close_reqs", "none", |ar, dice| {
        let mut during = Vec::new();
        // To the target as the writer, to the writer as the target (a
        // CLOSE_REQ asks the initiator to close), and to both from an
        // address that has no PDC there.
        let stranger = dice.foreign_ip();
        for a in [
            ar.as_writer(),
            ar.as_target(),
            ar.to_target.from(stranger, ar.attacker_mac),
            ar.to_writer.from(stranger, ar.attacker_mac),
        ] {
            for spdcid in 1..=64u16 {
                for dpdcid in 1..=64u16 {
                    let psn = dice.u32();
                    during.push(frame(
                        &a,
                        0xbad2,
                        &cp(CpPayload::CloseReq, psn, spdcid, dpdcid),
                    ));
                }
            }
        }
        Attack {
            before: Vec::new(),
            during,
            pps: 8_000,
            victim: TARGET,
            // The stranger's, at least, are refused and counted.
            counted: vec![(TARGET, None, 64 * 64), (WRITER, None, 64 * 64)],
            listen: false,
        }
    });
}

#[test]
fn syn_flood_spoofing_the_writer() {
    run("syn_flood", "none", |ar, dice| {
        // Before the first transfer the frames carry the writer's own MAC
        // too (an L2 attacker can): they teach the target nothing false,
        // and the writer's first frames take its MAC back at the bridge.
        let before_addr = ar.to_target.from(ar.lab.ip(WRITER), ar.writer_mac);
        let flood = |a: &Addr, dice: &mut Dice| -> Vec<Vec<u8>> {
            (1..=u16::MAX)
                .map(|spdcid| bogus_syn(a, &ar.dest, spdcid, dice.u32(), 0, None))
                .collect()
        };
        Attack {
            before: flood(&before_addr, dice),
            during: flood(&ar.as_writer(), dice),
            pps: 50_000,
            victim: TARGET,
            counted: Vec::new(),
            listen: false,
        }
    });
}

#[test]
fn rccc_requests_from_spoofed_sources() {
    run("rccc_state", "rccc", |ar, dice| {
        // 1,024 sources × 256 CCC IDs: 262,144 (source, ccc_id) keys, each
        // on a PDC the source opened with its first SYN (the later ones are
        // duplicates or out of window, and reach the RCCC path all the same).
        let mut during = Vec::with_capacity(1 << 18);
        for _ in 0..1024 {
            let a = ar.to_target.from(dice.foreign_ip(), ar.attacker_mac);
            let (spdcid, psn) = (1 + dice.below(60_000) as u16, dice.u32());
            for ccc in 0..=255u8 {
                during.push(bogus_syn(
                    &a,
                    &ar.dest,
                    spdcid,
                    psn.wrapping_add(u32::from(ccc)),
                    u16::from(ccc),
                    Some((ccc, 1 << 20)),
                ));
            }
        }
        Attack {
            before: Vec::new(),
            during,
            pps: 100_000,
            victim: TARGET,
            counted: Vec::new(),
            listen: false,
        }
    });
}

#[test]
fn frames_from_many_spoofed_sources() {
    const N: u64 = 100_000;
    run("gleaning", "none", |ar, dice| {
        // Each from its own IP and MAC; the PDS type is reserved, so the
        // frame parses to L4 and is then dropped as malformed.
        let during = (0..N)
            .map(|_| {
                let a = ar.to_target.from(dice.foreign_ip(), dice.mac());
                let mut u = dice.bytes(32);
                u[0] &= 0x07;
                frame(&a, 0xbad3, &u)
            })
            .collect();
        Attack {
            before: Vec::new(),
            during,
            pps: 25_000,
            victim: TARGET,
            counted: vec![(TARGET, Some("malformed"), N)],
            listen: false,
        }
    });
}

#[test]
fn one_frame_poisons_the_writers_next_hop() {
    run("poisoning", "none", |ar, _dice| {
        // One CP NOOP from the writer's IP and the attacker's MAC before
        // the target has heard from the writer.
        let f = frame(&ar.as_writer(), 0xbad4, &cp(CpPayload::Noop, 1, 1, 1));
        Attack {
            before: vec![f],
            during: Vec::new(),
            pps: 0,
            victim: TARGET,
            counted: Vec::new(),
            listen: false,
        }
    });
}
