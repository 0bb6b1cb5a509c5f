//! Liveness under any interleaving of writes, idle closes and loss: three
//! engines that all send and all receive (an incast onto one of them
//! included), several jobs and two traffic classes sharing each
//! destination's CCCs, idle timeouts short enough that PDCs close between
//! and during writes, and a wire that delays, reorders, drops, duplicates
//! and trims, and engines that restart mid-run. Whatever the schedule,
//! every packet handed to the PDS (by an engine that lived on) is
//! acknowledged or failed, and once the writes stop every engine forgets
//! every PDC, CCC and RCCC source. A write that can neither send nor fail
//! is the bug this finds (a new PDC on the CCC of one that was closing,
//! left without credit and without anything to time out, once hung a write
//! for good).

use super::*;
use crate::CcMode;
use proptest::prelude::*;

/// One write: at `at_us`, from engine `from` to engine `to` (another), in
/// job `job` and traffic class `tc`, `n` packets, on a ROD PDC if `rod`
/// (else RUD).
#[derive(Debug, Clone)]
struct Op {
    at_us: u64,
    from: usize,
    to: usize,
    job: u32,
    tc: u8,
    n: u32,
    rod: bool,
}

const HOSTS: [IpAddr; 3] = [A, B, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3))];

fn op() -> impl Strategy<Value = Op> {
    (
        0u64..3_000,
        0usize..3,
        1usize..3,
        0u32..4,
        prop::bool::weighted(0.2),
        1u32..12,
        prop::bool::weighted(0.2),
    )
        .prop_map(|(at_us, from, step, job, tc1, n, rod)| Op {
            at_us,
            from,
            to: (from + step) % 3,
            job,
            tc: u8::from(tc1),
            n,
            rod,
        })
}

/// What the wire does to a datagram, in parts per million each.
#[derive(Debug, Clone, Copy)]
struct Wire {
    loss_ppm: u64,
    dup_ppm: u64,
    /// Trimmed to its header at the last hop (requests only).
    trim_ppm: u64,
}

fn wire() -> impl Strategy<Value = Wire> {
    prop::sample::select(vec![
        Wire {
            loss_ppm: 0,
            dup_ppm: 0,
            trim_ppm: 0,
        },
        Wire {
            loss_ppm: 0,
            dup_ppm: 0,
            trim_ppm: 0,
        },
        Wire {
            loss_ppm: 20_000,
            dup_ppm: 0,
            trim_ppm: 0,
        },
        Wire {
            loss_ppm: 100_000,
            dup_ppm: 0,
            trim_ppm: 0,
        },
        Wire {
            loss_ppm: 20_000,
            dup_ppm: 20_000,
            trim_ppm: 50_000,
        },
    ])
}

/// Every engine in congestion-control mode `which` (RCCC, NSCC and RCCC,
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

/// A datagram on its way to engine `to`, due at `at`.
struct InFlight {
    at: Instant,
    to: usize,
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

/// Runs the schedule, restarting engine `i` at `at_us` for each `(at_us,
/// i)` in `restarts` (a new engine that knows nothing, as a daemon that
/// restarted); returns the engines and the writes whose engine lived on,
/// as (from, token, packets).
fn run(
    ops: &[Op],
    restarts: &[(u64, usize)],
    which: u8,
    rate_bps: u64,
    idle_us: u64,
    w: Wire,
    seed: u64,
) -> (Vec<Host>, Vec<(usize, u64, u32)>) {
    let mut hosts: Vec<Host> = HOSTS
        .iter()
        .zip(1..)
        .map(|(&addr, i)| host(addr, i, config(which, rate_bps, idle_us)))
        .collect();
    let mut dice = Dice(seed | 1);
    let mut ops: Vec<Op> = ops.to_vec();
    ops.sort_by_key(|o| o.at_us);
    let mut written = vec![];
    let mut wire: Vec<InFlight> = vec![];
    let mut now = t(0);
    let mut next_op = 0;
    let mut restarts: Vec<(u64, usize)> = restarts.to_vec();
    restarts.sort_unstable();
    let mut next_restart = 0;
    let mut lives = 10;
    // Long enough for RTOs to back off to failure and for every idle PDC
    // to close, CLOSE retransmissions included.
    let horizon = t(3_000) + Duration::from_secs(120);
    loop {
        for h in &mut hosts {
            for (dst, mut d, _) in drain_routed(h, now) {
                if dice.next() % 1_000_000 < w.loss_ppm {
                    continue;
                }
                let to = HOSTS.iter().position(|&x| x == dst).unwrap();
                if dice.next() % 1_000_000 < w.trim_ppm && matches!(d.pds(), PdsRepr::Request(_)) {
                    d = trimmed_at_last_hop(d);
                }
                let copies = if dice.next() % 1_000_000 < w.dup_ppm {
                    2
                } else {
                    1
                };
                for _ in 0..copies {
                    let delay = 5_000 + dice.next() % 20_000;
                    wire.push(InFlight {
                        at: now + Duration::from_nanos(delay),
                        to,
                        d: d.clone(),
                    });
                }
            }
        }
        let next = [
            ops.get(next_op).map(|o| t(o.at_us)),
            restarts.get(next_restart).map(|r| t(r.0)),
            wire.iter().map(|w| w.at).min(),
        ]
        .into_iter()
        .chain(hosts.iter().map(|h| h.pds.poll_timeout()))
        .flatten()
        .min();
        let Some(next) = next else { break };
        assert!(
            next < horizon,
            "still busy at the horizon: a hang\n{}",
            state(&hosts)
        );
        now = now.max(next);
        while let Some(&(_, i)) = restarts.get(next_restart).filter(|r| t(r.0) <= now) {
            // What its writes became died with it.
            written.retain(|&(from, _, _)| from != i);
            lives += 1;
            hosts[i] = host(HOSTS[i], lives, config(which, rate_bps, idle_us));
            next_restart += 1;
        }
        while let Some(o) = ops.get(next_op).filter(|o| t(o.at_us) <= now) {
            let token = next_op as u64;
            let k = InitiatorKey {
                job: JobId::from_masked(o.job),
                dst: HOSTS[o.to],
                tc: TrafficClass::from_masked(o.tc),
                mode: if o.rod {
                    ReliableMode::Rod
                } else {
                    ReliableMode::Rud
                },
            };
            let h = &mut hosts[o.from];
            let pdc = h.pds.open(now, k).unwrap();
            h.pds.enqueue(now, pdc, pkts(token, o.n, 4000)).unwrap();
            written.push((o.from, token, o.n));
            next_op += 1;
        }
        let mut i = 0;
        while i < wire.len() {
            if wire[i].at <= now {
                let w = wire.swap_remove(i);
                deliver(&mut hosts[w.to], now, &w.d);
            } else {
                i += 1;
            }
        }
        for h in &mut hosts {
            if h.pds.poll_timeout().is_some_and(|w| w <= now) {
                h.pds.handle_timeout(now, &mut h.up);
            }
        }
    }
    (hosts, written)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_write_completes_or_fails_and_every_pdc_closes(
        ops in prop::collection::vec(op(), 1..32),
        which in 0u8..4,
        rate_bps in prop::sample::select(vec![1_000_000_000u64, 10_000_000_000]),
        idle_us in prop::sample::select(vec![50u64, 200, 1_000, 50_000]),
        w in wire(),
        restarts in prop::collection::vec((0u64..3_000, 0usize..3), 0..2),
        seed in any::<u64>(),
    ) {
        let (hosts, written) = run(&ops, &restarts, which, rate_bps, idle_us, w, seed);
        let clean = w.loss_ppm == 0 && w.trim_ppm == 0 && restarts.is_empty();
        for (from, token, n) in written {
            let up = &hosts[from].up;
            for frag in 0..n {
                let acked = up.acked.iter().any(|p| p.token == token && p.frag == frag);
                let failed = up.failed.iter().any(|(p, _)| p.token == token && p.frag == frag);
                prop_assert!(acked || failed, "packet {frag} of write {token} neither acknowledged nor failed");
                // A target forgets a PDC idle for its idle timeout, even
                // mid-message, and a message the forgotten PDC had begun
                // fails by design (`reopen`). The two shortest timeouts
                // here are shorter than a source may wait for credit.
                if clean && idle_us >= 1_000 {
                    prop_assert!(!failed, "write {token} failed on a clean wire: {:?}", up.failed);
                }
            }
        }
        for h in &hosts {
            prop_assert_eq!(h.pds.pdc_count(), 0);
            prop_assert_eq!(h.pds.ccc_count(), 0);
            prop_assert_eq!(h.pds.rccc_source_count(), 0);
            if let Some(rr) = h.pds.rccc_receiver() {
                prop_assert_eq!(rr.known_senders(), 0);
            }
        }
    }
}

/// Every engine's PDCs, CCCs and outcomes, for a failure message.
fn state(hosts: &[Host]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for h in hosts {
        let _ = writeln!(
            out,
            "{}: {} PDCs, next timeout {:?}",
            h.addr,
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
