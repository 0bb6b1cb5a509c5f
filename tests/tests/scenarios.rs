//! Scenarios of the PDS/SES issue, end to end over the simulated fabric:
//! data byte-exact under loss, reordering and duplication; ROD order; a
//! blackout longer than the retry budget ends in error completions, not a
//! hang.

use uet_tests::fabric::Impairments;
use uet_tests::scenario::{Writes, run_writes};
use uet_wire::pds::ReliableMode;
use uet_wire::time::{Duration, Instant};

/// Total bytes per scenario: 1 GiB by default (the size); CI may
/// lower it with UET_SIM_BYTES.
fn total() -> u64 {
    std::env::var("UET_SIM_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 30)
}

fn writes(impair: Impairments, mode: ReliableMode, seed: u64) -> Writes {
    Writes {
        bytes_per_sender: total(),
        msg_size: (4096, 16 << 20),
        region: 32 << 20,
        in_flight: 4,
        mode,
        impair,
        seed,
        ..Writes::default()
    }
}

fn assert_clean(s: &uet_tests::scenario::Summary, what: &str) {
    assert_clean_of(s, what, total());
}

fn assert_clean_of(s: &uet_tests::scenario::Summary, what: &str, bytes: u64) {
    eprintln!("{what}: {}", s.to_json());
    assert!(s.finished, "{what}: did not finish");
    assert!(s.verified, "{what}: {} bytes differ", s.mismatched_bytes);
    assert!(
        s.completions_err.is_empty(),
        "{what}: errors {:?}",
        s.completions_err
    );
    assert_eq!(s.bytes_placed, bytes, "{what}");
}

#[test]
fn one_gib_no_loss() {
    let s = run_writes(&writes(Impairments::default(), ReliableMode::Rud, 1));
    assert_clean(&s, "0% loss");
    assert_eq!(s.retransmits, 0);
}

/// 1 % of frames lost on every link.
fn one_percent_loss() -> Impairments {
    Impairments {
        loss: 0.01,
        ..Impairments::default()
    }
}

/// 10 % lost, 5 % reordered by 20 µs, 2 % duplicated, on every link.
fn ten_percent_loss_reorder_duplicate() -> Impairments {
    Impairments {
        loss: 0.10,
        reorder: 0.05,
        reorder_delay: Duration::from_micros(20),
        duplicate: 0.02,
        ..Impairments::default()
    }
}

#[test]
fn one_gib_one_percent_loss() {
    let s = run_writes(&writes(one_percent_loss(), ReliableMode::Rud, 2));
    assert_clean(&s, "1% loss");
    assert!(s.retransmits > 0);
}

#[test]
fn one_gib_ten_percent_loss_reorder_duplicate() {
    let s = run_writes(&writes(
        ten_percent_loss_reorder_duplicate(),
        ReliableMode::Rud,
        3,
    ));
    assert_clean(&s, "10% loss + reorder + dup");
}

#[test]
fn rod_under_loss() {
    let imp = Impairments {
        loss: 0.01,
        reorder: 0.01,
        reorder_delay: Duration::from_micros(20),
        ..Impairments::default()
    };
    let mut w = writes(imp, ReliableMode::Rod, 4);
    w.bytes_per_sender = total() / 4;
    let s = run_writes(&w);
    eprintln!("ROD: {}", s.to_json());
    assert!(s.finished && s.verified && s.completions_err.is_empty());
}

/// The lossy writes with the transport security sublayer on every host:
/// every datagram of the job sealed and opened (a datagram that did not
/// open never reaches the PDS, so a byte-exact finish means both worked);
/// loss, reordering and duplication are recovered as without it, and the
/// fabric's duplicates are the replays the windows must let through once.
#[test]
fn lossy_writes_with_tss_on() {
    for (imp, what, seed) in [
        (one_percent_loss(), "TSS, 1% loss", 2),
        (
            ten_percent_loss_reorder_duplicate(),
            "TSS, 10% loss + reorder + dup",
            3,
        ),
    ] {
        let mut w = writes(imp, ReliableMode::Rud, seed);
        w.bytes_per_sender = total() / 4;
        w.tss = true;
        let s = run_writes(&w);
        assert_clean_of(&s, what, w.bytes_per_sender);
        assert!(s.retransmits > 0, "{what}");
    }
}

#[test]
fn blackout_longer_than_the_retry_budget_fails_cleanly() {
    let mut w = writes(Impairments::default(), ReliableMode::Rud, 5);
    w.bytes_per_sender = 64 << 20;
    // Everything after 1 ms is lost for 10 s; the budget (10 retries from
    // 200 µs, doubling) runs out well before.
    w.impair.blackouts.push((
        Instant::from_nanos(1_000_000),
        Instant::from_nanos(10_000_000_000),
    ));
    let s = run_writes(&w);
    eprintln!("blackout: {}", s.to_json());
    assert!(s.finished, "every operation completed: no hang");
    assert!(
        !s.completions_err.is_empty(),
        "operations failed with errors"
    );
    assert!(s.verified, "what did complete is byte-exact");
    assert_eq!(s.sender_pdcs_open, 0, "failed PDCs are gone");
}

/// An 8:1 incast through a shallow buffer with trimming: the switch trims
/// instead of dropping, the receiver NACKs trimmed packets, the senders
/// resend at once, and every byte arrives.
#[test]
fn incast_with_trimming_loses_nothing() {
    use uet_tests::fabric::{LinkParams, Trimming};
    let w = Writes {
        senders: 8,
        bytes_per_sender: total() / 64,
        msg_size: (4096, 1 << 20),
        region: 4 << 20,
        in_flight: 2,
        link: LinkParams::new(10_000_000_000, Duration::from_micros(2), 256 << 10),
        trim: Some(Trimming::uet(128 << 10)),
        seed: 6,
        ..Writes::default()
    };
    let s = run_writes(&w);
    eprintln!("incast+trim: {}", s.to_json());
    assert!(s.finished && s.verified && s.completions_err.is_empty());
    assert!(s.trimmed > 0, "the incast overflowed the trim threshold");
    assert_eq!(s.queue_drops, 0, "trimming replaced every drop");
    assert!(s.peak_queue <= 256 << 10);
}

/// A sender with a later start (`Writes::start_at`, the incast's jittered
/// start) submits nothing before it: alone on an idle fabric, its write
/// completes one start offset after the undelayed sender's.
#[test]
fn a_delayed_sender_starts_at_its_time() {
    let run = |start_at: Vec<Duration>| {
        run_writes(&Writes {
            senders: 2,
            bytes_per_sender: 64 << 10,
            msg_size: (64 << 10, 64 << 10),
            region: 64 << 10,
            in_flight: 1,
            start_at,
            ..Writes::default()
        })
    };
    let clean = |s: &uet_tests::scenario::Summary| {
        assert!(s.finished && s.verified && s.completions_err.is_empty());
        assert_eq!(s.bytes_placed, 2 * (64 << 10));
    };
    let together = run(Vec::new());
    clean(&together);
    let late = Duration::from_micros(500);
    let apart = run(vec![Duration::ZERO, late]);
    clean(&apart);
    let (t0, t1) = (apart.flow_completion_ns[0], apart.flow_completion_ns[1]);
    // Alone, each write takes less than the offset: they never overlap.
    assert!(t0 < late.as_nanos() as u64, "first done at {t0} ns");
    // The delayed one takes as long as the first did alone, from 500 µs.
    assert_eq!(t1 - late.as_nanos() as u64, t0, "second done at {t1} ns");
    // Together they share the bottleneck, so each takes longer than alone.
    assert!(together.flow_completion_ns.iter().all(|&t| t > t0));
}
