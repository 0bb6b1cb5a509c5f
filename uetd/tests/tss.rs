//! TSS between two daemons (real kernel, root): a three-host lab whose
//! job runs in a security domain (`uet lab up --tss`: one fresh key, mode
//! 0600, for every daemon). The writer (host 1) writes the test pattern to
//! the target (host 0), verified by hash, while the switch's port of the
//! writer is captured: no frame holds any 8 bytes of the pattern, and
//! every UET frame begins with a TSS header. Meanwhile an attacker on the
//! same bridge (host 2) sends, as the writer, spoofed TSS frames with
//! random tags, captured TSS frames again, and write requests in the
//! clear for the job: the transfer still lands byte-exact, and the target
//! counts each kind under its reason. The same write between two
//! kernel-UDP daemons leaves no plaintext either. A last case rotates the
//! key of both daemons (SIGHUP) in the middle of a transfer, which
//! completes.
//!
//! Each case builds its own lab (unique names, removed on drop, also when
//! the test fails); they run one at a time.

mod adversary;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use adversary::{
    Addr, Dest, Dice, frame, mac, poll_until, request, send_all, stats, syn, write_ses,
};
use uet_lab::{Lab, LabConfig, WriteOpts};
use uet_wire::pds::tss::{HEADER_LEN, ICV_LEN, Packet as TssPacket, Repr as TssRepr, Sdi, Tsc};
use uetd::config::Backend;
use uetd::packet::PacketSocket;

const TARGET: usize = 0;
const WRITER: usize = 1;
const ATTACKER: usize = 2;

/// Bytes of each verified transfer: 64 MiB, or `UET_TSS_BYTES` (the 1 GiB
/// case of BENCHMARKS.md runs these tests with 1073741824).
fn transfer() -> u64 {
    std::env::var("UET_TSS_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64 << 20)
}
/// The pattern seed of the lab's writes.
const SEED: u64 = 1;

static SERIAL: Mutex<()> = Mutex::new(());

fn lab() -> Lab {
    lab_on(Backend::Xdp)
}

fn lab_on(backend: Backend) -> Lab {
    let mut lab = Lab::up(LabConfig {
        hosts: 3,
        region_bytes: transfer(),
        sender_daemons: false,
        tss: true,
        backend,
        ..LabConfig::default()
    })
    .expect("lab up");
    lab.restart_daemon(WRITER).expect("the writer's daemon");
    let key = std::fs::metadata(lab.tss_key_file()).expect("the lab's key file");
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&key.permissions()) & 0o777,
        0o600
    );
    lab
}

/// The SplitMix64 finalizer of `uetd::mem::pattern`, undone: the word
/// index whose pattern word is `v`, if `v` is one of the first `words`.
struct PatternFinder {
    /// Inverses mod 2^64 of the two multipliers and of the golden ratio.
    inv: [u64; 3],
    words: u64,
}

impl PatternFinder {
    fn new(bytes: u64) -> Self {
        let inverse = |m: u64| {
            let mut x = m;
            for _ in 0..6 {
                x = x.wrapping_mul(2u64.wrapping_sub(m.wrapping_mul(x)));
            }
            x
        };
        Self {
            inv: [
                inverse(0x94D0_49BB_1331_11EB),
                inverse(0xBF58_476D_1CE4_E5B9),
                inverse(0x9E37_79B9_7F4A_7C15),
            ],
            words: bytes / 8,
        }
    }

    fn is_pattern(&self, v: u64) -> bool {
        let unshift = |y: u64, s: u32| {
            let mut x = y;
            let mut k = s;
            while k < 64 {
                x ^= y >> k;
                k += s;
            }
            x
        };
        let z = unshift(v, 31).wrapping_mul(self.inv[0]);
        let z = unshift(z, 27).wrapping_mul(self.inv[1]);
        let z = unshift(z, 30) ^ SEED;
        let w = z.wrapping_mul(self.inv[2]);
        if w >= self.words {
            return false;
        }
        let mut b = [0u8; 8];
        uetd::mem::pattern(SEED, w * 8, &mut b);
        u64::from_le_bytes(b) == v
    }

    /// Whether any 8 consecutive bytes of `f` are 8 bytes of the pattern
    /// at an 8-aligned position (every aligned word of the plaintext is
    /// such a window, whatever the payload's alignment in the frame).
    fn holds_plaintext(&self, f: &[u8]) -> bool {
        f.windows(8)
            .any(|w| self.is_pattern(u64::from_le_bytes(w.try_into().unwrap())))
    }
}

/// What the capture saw: UET frames, those without a TSS header, those
/// with plaintext, and a few sealed data frames kept for replaying.
#[derive(Default)]
struct Seen {
    uet: AtomicU64,
    /// Their bytes from the UDP payload on (a GSO send of the udp backend
    /// crosses the veth and the bridge as one frame of many datagrams).
    bytes: AtomicU64,
    not_tss: AtomicU64,
    /// Sealed frames with a UDP checksum (an xdp daemon sends none over
    /// IPv4: the ICV covers those bytes).
    checksummed: AtomicU64,
    plaintext: AtomicU64,
    kept: Mutex<Vec<Vec<u8>>>,
}

/// Captures what the writer sends into the switch (incoming on its port)
/// until `stop`.
fn capture(lab: &Lab, stop: Arc<AtomicBool>, seen: Arc<Seen>) -> std::thread::JoinHandle<()> {
    let sock = lab
        .switch()
        .run(|| PacketSocket::open("p1"))
        .expect("the switch namespace")
        .expect("an AF_PACKET socket on the writer's port");
    assert!(sock.force_buffers(64 << 20), "a 64 MiB capture buffer");
    let finder = PatternFinder::new(transfer());
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65_536];
        // Until `stop`, and then until what the socket holds is read: a
        // write of GSO frames ends long before the scan below has read
        // them all.
        loop {
            let Ok(Some(n)) = sock.recv(&mut buf, Duration::from_millis(20)) else {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                continue;
            };
            let f = &buf[..n];
            // IPv4/UDP to port 4793 (the lab's encapsulation).
            if n < 42 + HEADER_LEN + ICV_LEN || f[12..14] != [8, 0] || f[23] != 17 {
                continue;
            }
            if u16::from_be_bytes([f[36], f[37]]) != 4793 {
                continue;
            }
            seen.uet.fetch_add(1, Ordering::Relaxed);
            seen.bytes.fetch_add((n - 42) as u64, Ordering::Relaxed);
            if !uet_wire::is_tss(&f[42..]) {
                seen.not_tss.fetch_add(1, Ordering::Relaxed);
            } else if f[40..42] != [0, 0] {
                seen.checksummed.fetch_add(1, Ordering::Relaxed);
            }
            if finder.holds_plaintext(f) {
                seen.plaintext.fetch_add(1, Ordering::Relaxed);
            }
            let mut kept = seen.kept.lock().unwrap();
            if n > 1000 && kept.len() < 2048 {
                kept.push(f.to_vec());
            }
        }
    })
}

fn tss_drops(s: &serde_json::Value, reason: &str) -> u64 {
    s["workers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w["tss"]["drops"][reason].as_u64())
        .sum()
}

fn tss_count(s: &serde_json::Value, field: &str) -> u64 {
    s["workers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w["tss"][field].as_u64())
        .sum()
}

fn write(lab: &mut Lab) {
    let w = lab
        .write(
            WRITER,
            TARGET,
            &WriteOpts {
                bytes: transfer(),
                seed: SEED,
                timeout: Duration::from_secs(120),
                ..WriteOpts::default()
            },
        )
        .expect("the write");
    assert!(w.verified(), "the target's hash of what landed: {w:?}");
}

/// A verified write from the writer to the target while the writer's
/// switch port is captured: the capture saw at least the write's bytes in
/// UET frames, every one sealed, none holding 8 bytes of the pattern. Returns how many UET
/// frames it saw, and what it kept.
fn captured_sealed_write(lab: &mut Lab) -> (u64, Arc<Seen>) {
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Seen::default());
    let cap = capture(lab, Arc::clone(&stop), Arc::clone(&seen));
    write(lab);
    stop.store(true, Ordering::Relaxed);
    cap.join().unwrap();
    let frames = seen.uet.load(Ordering::Relaxed);
    let bytes = seen.bytes.load(Ordering::Relaxed);
    eprintln!("the capture saw {frames} UET frames, {bytes} bytes");
    assert!(
        bytes >= transfer(),
        "the capture saw {frames} UET frames, {bytes} bytes"
    );
    assert_eq!(
        seen.not_tss.load(Ordering::Relaxed),
        0,
        "every UET frame is sealed"
    );
    assert_eq!(
        seen.plaintext.load(Ordering::Relaxed),
        0,
        "no frame holds 8 bytes of the written pattern"
    );
    (frames, seen)
}

/// The detector finds the pattern in a frame that holds some of it at any
/// alignment, and not in random bytes: the capture check can fail.
#[test]
fn the_plaintext_detector_finds_the_pattern() {
    let finder = PatternFinder::new(transfer());
    let mut dice = Dice::new(5);
    for off in [0u64, 3, 4096 + 5, transfer() - 64] {
        let mut f = dice.bytes(100);
        let mut p = [0u8; 20];
        uetd::mem::pattern(SEED, off, &mut p);
        f.extend_from_slice(&p);
        f.extend(dice.bytes(100));
        assert!(finder.holds_plaintext(&f), "offset {off}");
    }
    assert!(!finder.holds_plaintext(&dice.bytes(1 << 20)));
}

#[test]
fn a_sealed_write_leaves_no_plaintext_on_the_link_and_attacks_change_nothing() {
    let _s = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut lab = lab();
    let (frames, seen) = captured_sealed_write(&mut lab);
    assert_eq!(
        seen.checksummed.load(Ordering::Relaxed),
        0,
        "sealed IPv4 datagrams go without a UDP checksum"
    );
    let before = stats(&lab, TARGET);
    assert!(tss_count(&before, "opened") >= frames / 2, "{before}");

    // The attacker, as the writer (its IP), from its own MAC.
    let link = Arc::new(
        lab.host(ATTACKER)
            .run(|| PacketSocket::open("eth0"))
            .expect("the attacker's namespace")
            .expect("an AF_PACKET socket"),
    );
    let (tm, am) = (mac(&lab, TARGET), mac(&lab, ATTACKER));
    let as_writer = Addr {
        src_mac: am,
        dst_mac: tm,
        src: lab.ip(WRITER),
        dst: lab.ip(TARGET),
    };
    let dest = Dest::of(&lab.region(TARGET).expect("the target's region"));
    let mut dice = Dice::new(9);
    const N: u64 = 500;
    // Spoofed TSS frames: the job's SDI, fresh TSCs, random ciphertext
    // and tag.
    let spoofed: Vec<Vec<u8>> = (0..N)
        .map(|i| {
            let mut uet = vec![0u8; HEADER_LEN];
            TssRepr {
                an: false,
                sdi: Sdi::from_masked(1),
                ssi: None,
                epoch: 0,
                tsc: Tsc::from_masked((1 << 40) + i),
            }
            .emit(&mut TssPacket::new_unchecked(&mut uet[..]));
            uet.extend(dice.bytes(1200 + ICV_LEN));
            frame(&as_writer, 0xc000 + i as u16 % 16, &uet)
        })
        .collect();
    // Captured frames again, from the attacker's MAC (the bytes from IP
    // on are the writer's).
    let replayed: Vec<Vec<u8>> = seen
        .kept
        .lock()
        .unwrap()
        .iter()
        .take(N as usize)
        .map(|f| {
            let mut f = f.clone();
            f[..6].copy_from_slice(&tm);
            f[6..12].copy_from_slice(&am);
            f
        })
        .collect();
    assert_eq!(replayed.len() as u64, N);
    // Writes in the clear for the job, into the region.
    let plain: Vec<Vec<u8>> = (0..N)
        .map(|i| {
            let ses = write_ses(&dest, i * 64, 64, true, 0, 0, i as u16);
            let uet = request(1 << 20, 100 + i as u16, syn(0), None, &ses, &[0xee; 64]);
            frame(&as_writer, 0xc000, &uet)
        })
        .collect();
    // Sent during a second transfer, which must still land byte-exact.
    let attacker = {
        let link = Arc::clone(&link);
        let all: Vec<Vec<u8>> = [spoofed, replayed, plain].concat();
        std::thread::spawn(move || send_all(&link, &all, 20_000))
    };
    write(&mut lab);
    attacker.join().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut after = stats(&lab, TARGET);
    let counted = |s: &serde_json::Value| {
        (
            tss_drops(s, "bad_tag") - tss_drops(&before, "bad_tag"),
            tss_drops(s, "replay") + tss_drops(s, "too_old")
                - tss_drops(&before, "replay")
                - tss_drops(&before, "too_old"),
            tss_drops(s, "plaintext") - tss_drops(&before, "plaintext"),
        )
    };
    let enough =
        |c: (u64, u64, u64)| c.0 >= N * 95 / 100 && c.1 >= N * 95 / 100 && c.2 >= N * 95 / 100;
    poll_until(deadline, || {
        after = stats(&lab, TARGET);
        enough(counted(&after))
    });
    let c = counted(&after);
    assert!(
        enough(c),
        "bad_tag, replay+too_old, plaintext: {c:?} of {N} each; {after}"
    );
    // Nothing answered the attack: the target sealed only what the
    // writer's transfers called for, and placed nothing in the clear.
    assert_eq!(tss_drops(&after, "wrong_job"), 0);
    assert!(lab.daemon_alive(TARGET) && lab.daemon_alive(WRITER));
}

/// The kernel-UDP backend seals and opens the same way: a verified write
/// between two udp daemons leaves no plaintext on the link either.
#[test]
fn a_sealed_write_between_udp_daemons_leaves_no_plaintext_on_the_link() {
    let _s = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut lab = lab_on(Backend::Udp);
    let (frames, _) = captured_sealed_write(&mut lab);
    let s = stats(&lab, TARGET);
    assert!(tss_count(&s, "opened") >= frames / 2, "{s}");
    assert_eq!(tss_drops(&s, "bad_tag"), 0, "{s}");
}

#[test]
fn a_key_rotated_mid_transfer_completes_the_transfer() {
    let _s = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut lab = lab();
    let key = lab.tss_key_file();
    let run = lab
        .start_write(
            WRITER,
            TARGET,
            &WriteOpts {
                bytes: transfer(),
                seed: SEED,
                timeout: Duration::from_secs(120),
                ..WriteOpts::default()
            },
        )
        .expect("the write starts");
    // Once a quarter is across, a new key for both daemons.
    assert!(poll_until(Instant::now() + Duration::from_secs(60), || run
        .progress()
        >= transfer() / 4));
    {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&key)
            .unwrap();
        f.write_all(&[0x42; 32]).unwrap();
    }
    for i in [TARGET, WRITER] {
        let pid = adversary::daemon_pid(&lab, i);
        let ok = std::process::Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }
    let w = run.wait(&mut lab).expect("the write");
    assert!(w.verified(), "{w:?}");
    for i in [TARGET, WRITER] {
        let s = stats(&lab, i);
        assert!(tss_count(&s, "rotations") >= 1, "host {i}: {s}");
    }
}
