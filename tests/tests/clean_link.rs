//! A clean link resends nothing: pipelined writes whose completions are
//! guaranteed-delivery responses, and a standing queue far longer than the
//! first retransmission timeout, finish without a single retransmission
//! or RTO (`docs/protocol-notes.md` §3 "CACK / CLEAR / guaranteed
//! delivery", "Loss recovery").

use uet_cms::Algorithm;
use uet_pds::{CcMode, PdsConfig};
use uet_tests::fabric::{LinkParams, Pauses};
use uet_tests::scenario::{Summary, Writes, run_writes};
use uet_wire::time::Duration;

/// Total bytes per scenario; CI may lower it with UET_SIM_BYTES.
fn total(default: u64) -> u64 {
    std::env::var("UET_SIM_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The daemon's configuration on a path of `rate_bps` and idle round trip
/// `rtt`: PSN window 1024, the fixed window `window`, SES payload per
/// packet `ses_len` (MTU 1500: 1456), RTO_INIT 5 ms, and what `--cc none`
/// adds (tail probes, RACK).
fn daemon_like(rate_bps: u64, rtt: Duration, window: u64, ses_len: usize) -> PdsConfig {
    let mut pds = PdsConfig {
        max_ses_len: ses_len,
        mp_range: 1024,
        ..PdsConfig::default()
    };
    pds.ccc.algorithm = Algorithm::Fixed { window };
    CcMode::None.configure(&mut pds, rate_bps, rtt, false);
    pds
}

fn assert_no_resends(s: &Summary, bytes: u64, senders: u64, what: &str) {
    eprintln!("{what}: {}", s.to_json());
    assert!(s.finished, "{what}: did not finish");
    assert!(s.verified, "{what}: {} bytes differ", s.mismatched_bytes);
    assert!(
        s.completions_err.is_empty(),
        "{what}: {:?}",
        s.completions_err
    );
    assert_eq!(s.bytes_placed, bytes * senders, "{what}");
    assert_eq!(s.queue_drops, 0, "{what}: the link must stay clean");
    assert_eq!(s.retransmits, 0, "{what}: retransmissions on a clean link");
    assert_eq!(s.rtos, 0, "{what}: RTOs on a clean link");
}

/// 64 KiB writes, 16 in flight (`uet perf` 64 KiB × 16), over a path whose
/// window holds many messages: every message ends in a guaranteed
/// completion, so the target's CACK waits at each EOM for the CLEAR while
/// the packets of the next messages keep arriving.
#[test]
fn pipelined_64k_writes_on_a_clean_link_resend_nothing() {
    for (ses_len, mtu) in [(1456, 1500), (3454, 3498)] {
        // A round trip of 1 ms at 4 Gb/s holds ~340 packets of 1.5 KB:
        // far more than one SACK bitmap (64 PSNs) past the CACK.
        let rtt = Duration::from_millis(1);
        let rate = 4_000_000_000;
        let bytes = total(256 << 20);
        let w = Writes {
            bytes_per_sender: bytes,
            msg_size: (64 << 10, 64 << 10),
            region: 4 << 20,
            in_flight: 16,
            link: LinkParams::new(rate, rtt / 4, 64 << 20),
            pds: daemon_like(rate, rtt, 2 << 20, ses_len),
            ..Writes::default()
        };
        let s = run_writes(&w);
        assert_no_resends(&s, bytes, 1, &format!("64 KiB x 16, MTU {mtu}"));
    }
}

/// 4 KiB writes, 64 in flight (`uet perf` 4 KiB × 64): every message of
/// one or two packets ends in a guaranteed completion.
#[test]
fn pipelined_4k_writes_on_a_clean_link_resend_nothing() {
    for (ses_len, mtu) in [(1456, 1500), (3454, 3498)] {
        let rtt = Duration::from_millis(1);
        let rate = 4_000_000_000;
        let bytes = total(64 << 20);
        let w = Writes {
            bytes_per_sender: bytes,
            msg_size: (4 << 10, 4 << 10),
            region: 4 << 20,
            in_flight: 64,
            link: LinkParams::new(rate, rtt / 4, 64 << 20),
            pds: daemon_like(rate, rtt, 2 << 20, ses_len),
            ..Writes::default()
        };
        let s = run_writes(&w);
        assert_no_resends(&s, bytes, 1, &format!("4 KiB x 64, MTU {mtu}"));
    }
}

/// A fixed window far beyond the path's BDP becomes a standing queue: two
/// senders with 2 MiB windows into one 1 Gb/s port queue up to 4 MiB,
/// 34 ms of data, several times RTO_INIT (5 ms), on a path whose idle
/// round trip is 20 µs. The RTO follows the measured round trip, so the
/// queue is not taken for loss.
#[test]
fn a_standing_queue_longer_than_rto_init_fires_no_rto() {
    let rtt = Duration::from_micros(20);
    let rate = 1_000_000_000;
    let bytes = total(64 << 20);
    let w = Writes {
        senders: 2,
        bytes_per_sender: bytes,
        msg_size: (1 << 20, 1 << 20),
        region: 8 << 20,
        in_flight: 4,
        link: LinkParams::new(rate, rtt / 4, 64 << 20),
        pds: daemon_like(rate, rtt, 2 << 20, 1456),
        ..Writes::default()
    };
    let s = run_writes(&w);
    assert_no_resends(&s, bytes, 2, "2 x 2 MiB windows into 1 Gb/s");
}

/// Pipelined writes between hosts that lose their CPU now and then, as
/// the daemons on a busy 2-vCPU VM do: each host pauses for 1 ms about
/// every 4 ms, fifty times the idle round trip but below RTO_INIT, and
/// longer than the sender takes to send all it may have in flight (1 MiB,
/// 0.84 ms at 10 Gb/s). The sender's tail probes fire in the target's
/// pauses, and the target meets each
/// probe in one batch with the data before it, whose completions it
/// answers in the same poll: the probe's answer must report every packet
/// that arrived (`docs/protocol-notes.md` §3), and nothing is resent.
#[test]
fn writes_between_hosts_that_pause_resend_nothing() {
    for (size, depth) in [(64 << 10, 16), (4 << 10, 64)] {
        let rtt = Duration::from_micros(20);
        let rate = 10_000_000_000;
        let bytes = total(64 << 20);
        let w = Writes {
            bytes_per_sender: bytes,
            msg_size: (size, size),
            region: 4 << 20,
            in_flight: depth,
            link: LinkParams::new(rate, rtt / 4, 64 << 20),
            pds: daemon_like(rate, rtt, 2 << 20, 3454),
            pauses: Some(Pauses {
                every: Duration::from_millis(4),
                length: Duration::from_millis(1),
            }),
            ..Writes::default()
        };
        let s = run_writes(&w);
        let what = format!("{} KiB x {depth}, pausing hosts", size >> 10);
        assert!(s.tail_probes > 0, "{what}: no probe fired, nothing tested");
        assert_no_resends(&s, bytes, 1, &what);
    }
}
