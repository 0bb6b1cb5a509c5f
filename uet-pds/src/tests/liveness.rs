//! Liveness under any interleaving of writes, idle closes and loss: two
//! engines that both send and both receive, several jobs sharing each
//! destination's CCC, idle timeouts short enough that PDCs close between
//! and during writes, and a wire that delays, reorders and drops. Whatever
//! the schedule, every packet handed to the PDS is acknowledged or failed,
//! and once the writes stop both engines forget every PDC, CCC and RCCC
//! source. A write that can neither send nor fail is the bug this finds
//! (a new PDC on the CCC of one that was closing, left without credit and
//! without anything to time out, once hung a write for good).

use super::*;
use crate::CcMode;
use proptest::prelude::*;

/// One write: at `at_us`, from A (or B if `from_b`) in job `job`, `n`
/// packets, on a ROD PDC if `rod` (else RUD).
#[derive(Debug, Clone)]
struct Op {
    at_us: u64,
    from_b: bool,
    job: u32,
    n: u32,
    rod: bool,
}

fn op() -> impl Strategy<Value = Op> {
    (
        0u64..3_000,
        any::<bool>(),
        0u32..4,
        1u32..12,
        prop::bool::weighted(0.2),
    )
        .prop_map(|(at_us, from_b, job, n, rod)| Op {
            at_us,
            from_b,
            job,
            n,
            rod,
        })
}

/// Both engines in congestion-control mode `which` (RCCC, NSCC and RCCC,
/// NSCC, the fixed window) for a path of `rate_bps` and a 40 µs base round
/// trip, as the daemon configures them, with an idle timeout of `idle_us`.
fn config(which: u8, rate_bps: u64, idle_us: u64) -> PdsConfig {
    let mode = [CcMode::Rccc, CcMode::NsccRccc, CcMode::Nscc, CcMode::None][usize::from(which)];
    let mut c = PdsConfig {
        idle_timeout: Duration::from_micros(idle_us),
        ..PdsConfig::default()
    };
    mode.configure(&mut c, rate_bps, Duration::from_micros(40), false);
    c
}

/// A datagram on its way, due at `at`.
struct InFlight {
    at: Instant,
    to_b: bool,
    d: Dgram,
}

/// xorshift64*: the wire's drops and delays, from the case's seed.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Runs the schedule; returns (A, B, the tokens written by A and by B with
/// their packet counts).
fn run(
    ops: &[Op],
    which: u8,
    rate_bps: u64,
    idle_us: u64,
    loss_ppm: u64,
    seed: u64,
) -> (Host, Host, Vec<(bool, u64, u32)>) {
    let mut a = host(A, 1, config(which, rate_bps, idle_us));
    let mut b = host(B, 2, config(which, rate_bps, idle_us));
    let mut dice = Dice(seed | 1);
    let mut ops: Vec<Op> = ops.to_vec();
    ops.sort_by_key(|o| o.at_us);
    let mut written = vec![];
    let mut wire: Vec<InFlight> = vec![];
    let mut now = t(0);
    let mut next_op = 0;
    // Long enough for RTOs to back off to failure and for every idle PDC
    // to close, CLOSE retransmissions included.
    let horizon = t(3_000) + Duration::from_secs(120);
    loop {
        for (h, to_b) in [(&mut a, true), (&mut b, false)] {
            for d in drain(h, now) {
                if dice.next() % 1_000_000 < loss_ppm {
                    continue;
                }
                let delay = 5_000 + dice.next() % 20_000;
                wire.push(InFlight {
                    at: now + Duration::from_nanos(delay),
                    to_b,
                    d,
                });
            }
        }
        let next = [
            ops.get(next_op).map(|o| t(o.at_us)),
            wire.iter().map(|w| w.at).min(),
            a.pds.poll_timeout(),
            b.pds.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else { break };
        assert!(
            next < horizon,
            "still busy at the horizon: a hang\n{}",
            state(&a, &b)
        );
        now = now.max(next);
        while let Some(o) = ops.get(next_op).filter(|o| t(o.at_us) <= now) {
            let token = next_op as u64;
            let (h, dst) = if o.from_b { (&mut b, A) } else { (&mut a, B) };
            let k = InitiatorKey {
                job: JobId::from_masked(o.job),
                dst,
                tc: TrafficClass::from_masked(0),
                mode: if o.rod {
                    ReliableMode::Rod
                } else {
                    ReliableMode::Rud
                },
            };
            let pdc = h.pds.open(now, k).unwrap();
            h.pds.enqueue(now, pdc, pkts(token, o.n, 4000)).unwrap();
            written.push((o.from_b, token, o.n));
            next_op += 1;
        }
        let mut i = 0;
        while i < wire.len() {
            if wire[i].at <= now {
                let w = wire.swap_remove(i);
                let h = if w.to_b { &mut b } else { &mut a };
                deliver(h, now, &w.d);
            } else {
                i += 1;
            }
        }
        for h in [&mut a, &mut b] {
            if h.pds.poll_timeout().is_some_and(|w| w <= now) {
                h.pds.handle_timeout(now, &mut h.up);
            }
        }
    }
    (a, b, written)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_write_completes_or_fails_and_every_pdc_closes(
        ops in prop::collection::vec(op(), 1..24),
        which in 0u8..4,
        rate_bps in prop::sample::select(vec![1_000_000_000u64, 10_000_000_000]),
        idle_us in prop::sample::select(vec![50u64, 200, 1_000, 5_000]),
        loss_ppm in prop::sample::select(vec![0u64, 0, 20_000, 100_000]),
        seed in any::<u64>(),
    ) {
        let (a, b, written) = run(&ops, which, rate_bps, idle_us, loss_ppm, seed);
        for (from_b, token, n) in written {
            let up = if from_b { &b.up } else { &a.up };
            for frag in 0..n {
                let acked = up.acked.iter().any(|p| p.token == token && p.frag == frag);
                let failed = up.failed.iter().any(|(p, _)| p.token == token && p.frag == frag);
                prop_assert!(acked || failed, "packet {frag} of write {token} neither acknowledged nor failed");
                // A target forgets a PDC idle for its idle timeout, even
                // mid-message; the shortest timeouts here are shorter than
                // a wait for credit, and a message the forgotten PDC had
                // begun fails by design (`reopen`).
                if loss_ppm == 0 && idle_us >= 1_000 {
                    prop_assert!(!failed, "write {token} failed on a lossless wire: {:?}", up.failed);
                }
            }
        }
        for h in [&a, &b] {
            prop_assert_eq!(h.pds.pdc_count(), 0);
            prop_assert_eq!(h.pds.ccc_count(), 0);
            prop_assert_eq!(h.pds.rccc_source_count(), 0);
            if let Some(rr) = h.pds.rccc_receiver() {
                prop_assert_eq!(rr.known_senders(), 0);
            }
        }
    }
}

/// Both engines' PDCs, CCCs and outcomes, for a failure message.
fn state(a: &Host, b: &Host) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for (n, h) in [("A", a), ("B", b)] {
        let _ = writeln!(
            out,
            "{n}: {} PDCs, next timeout {:?}",
            h.pds.pdc_count(),
            h.pds.poll_timeout()
        );
        for (dst, _, c) in h.pds.cccs() {
            let r = c.rccc();
            let _ = writeln!(
                out,
                "  CCC to {dst}: {:?}, cwnd {}, inflight {}, backlog {}, rtx {}, credit {:?}, speculating {:?}",
                c.state(),
                c.cwnd(),
                c.inflight(),
                c.backlog(),
                c.rtx_backlog(),
                r.map(uet_cms::RcccSource::credit),
                r.map(uet_cms::RcccSource::is_speculating),
            );
        }
        for l in h.pds.pdc_dump() {
            let _ = writeln!(out, "  {l}");
        }
        let _ = writeln!(out, "  failed {:?}", h.up.failed);
    }
    out
}
