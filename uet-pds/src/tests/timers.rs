//! The PDC and CCC deadline heaps behind `poll_timeout`: exact whatever
//! PDCs are opened, rescheduled or removed, bounded, and not scaling with
//! the number of PDCs or of CCCs (one per peer).

use super::*;

fn job_key(job: u32) -> InitiatorKey {
    InitiatorKey {
        job: JobId::from_masked(job),
        ..key(ReliableMode::Rud)
    }
}

/// Opens, sends on, acknowledges, loses, times out and closes PDCs of
/// different ages, checking after every step that `poll_timeout` is the
/// earliest deadline of all PDCs, that `handle_timeout` acts on exactly
/// the PDCs that are due, and that the heap stays bounded.
#[test]
fn poll_timeout_is_exact_as_pdcs_come_go_and_move() {
    let mut a = host(A, 1, PdsConfig::default());
    let mut b = host(B, 2, PdsConfig::default());
    let check = |a: &Host| {
        assert_timers_exact(&a.pds);
        assert!(a.pds.timer_heap_len() <= 2 * a.pds.pdc_count() + 64);
    };
    let mut now = t(0);
    let mut pdcs = Vec::new();
    for job in 0..40u32 {
        now += Duration::from_micros(3);
        let pdc = a.pds.open(now, job_key(job)).unwrap();
        check(&a);
        if job % 3 == 0 {
            a.pds
                .enqueue(now, pdc, pkts(u64::from(job), 2, 100))
                .unwrap();
            check(&a);
        }
        pdcs.push(pdc);
    }
    // Every other datagram is lost: those PDCs wait for their RTO (or a
    // tail probe), the others are acknowledged and go idle.
    let out = drain(&mut a, now);
    assert!(!out.is_empty());
    for d in out.iter().step_by(2) {
        deliver(&mut b, now, d);
    }
    now += Duration::from_micros(10);
    for d in drain(&mut b, now) {
        deliver(&mut a, now, &d);
    }
    // A hold makes an idle PDC wait for the held timeout instead.
    a.pds.hold(pdcs[1]);
    check(&a);
    // Run the timers until nothing is left: RTOs, retransmissions,
    // CLOSEs, idle closes. Nothing answers any more, so every PDC ends.
    let mut steps = 0;
    while let Some(w) = a.pds.poll_timeout() {
        assert_eq!(Some(w), a.pds.poll_timeout_by_scan());
        now = now.max(w);
        a.pds.handle_timeout(now, &mut a.up);
        check(&a);
        let _ = drain(&mut a, now);
        steps += 1;
        assert!(steps < 10_000, "timers never settle");
    }
    assert_eq!(a.pds.pdc_count(), 0, "every PDC closed or failed");
    assert_eq!(a.pds.poll_timeout_by_scan(), None);
}

/// 5,000 idle PDCs: once their deadlines are known, `poll_timeout`
/// computes none of them again, and `handle_timeout` before any is due
/// visits none; a PDC that changes is the only one recomputed.
#[test]
fn poll_timeout_does_not_scale_with_idle_pdcs() {
    const N: u32 = 5_000;
    let config = PdsConfig {
        max_pdcs: N as usize,
        ..PdsConfig::default()
    };
    let mut a = host(A, 1, config);
    let mut ids = Vec::new();
    for job in 0..N {
        ids.push(a.pds.open(t(u64::from(job)), job_key(job)).unwrap());
    }
    let first = a.pds.poll_timeout();
    assert_eq!(first, Some(t(0) + a.pds.config().idle_timeout));
    let evals = a.pds.deadline_evals();
    for _ in 0..1_000 {
        assert_eq!(a.pds.poll_timeout(), first);
    }
    a.pds.handle_timeout(t(N.into()), &mut a.up);
    assert_eq!(a.pds.poll_timeout(), first);
    assert_eq!(
        a.pds.deadline_evals(),
        evals,
        "no PDC deadline recomputed without a change"
    );
    // The oldest PDC gets data (queued, not yet sent: no timer of its
    // own): only it is recomputed, and the next oldest now leads.
    a.pds.enqueue(t(N.into()), ids[0], pkts(1, 1, 100)).unwrap();
    assert_eq!(
        a.pds.poll_timeout(),
        Some(t(1) + a.pds.config().idle_timeout)
    );
    assert_eq!(a.pds.deadline_evals(), evals + 1);
    assert_eq!(a.pds.poll_timeout(), a.pds.poll_timeout_by_scan());
    assert!(a.pds.timer_heap_len() <= 2 * N as usize + 64);
}

/// 2,000 peers under RCCC, each CCC blocked on credit with its credit
/// timer running: `poll_timeout`, the transmit poll and the timers before
/// any is due compute no CCC deadline again; when one falls due, only
/// that CCC is looked at again.
#[test]
fn poll_timeout_does_not_scale_with_idle_cccs() {
    const N: u16 = 2_000;
    let config = PdsConfig {
        max_pdcs: usize::from(N),
        ..rccc_source(4160)
    };
    let mut a = host(A, 1, config);
    for i in 0..N {
        let [hi, lo] = i.to_be_bytes();
        let k = InitiatorKey {
            dst: IpAddr::V4(Ipv4Addr::new(10, 1, hi, lo)),
            ..key(ReliableMode::Rud)
        };
        // The first packet goes on the speculative window; the second
        // waits for credit, which starts the source's credit timer. One
        // nanosecond apart, so the timers fall due in that order.
        let now = t(0) + Duration::from_nanos(u64::from(i));
        let pdc = a.pds.open(now, k).unwrap();
        a.pds
            .enqueue(now, pdc, pkts(u64::from(i), 2, 4000))
            .unwrap();
        assert_eq!(drain(&mut a, now).len(), 1);
    }
    let now = t(0) + Duration::from_nanos(u64::from(N));
    let first = a.pds.poll_timeout();
    assert_eq!(first, a.pds.poll_timeout_by_scan());
    let first = first.unwrap();
    let evals = a.pds.ccc_deadline_evals();
    for _ in 0..1_000 {
        assert_eq!(a.pds.poll_timeout(), Some(first));
        assert!(drain(&mut a, now).is_empty());
    }
    a.pds.handle_timeout(now, &mut a.up);
    assert_eq!(
        a.pds.ccc_deadline_evals(),
        evals,
        "no CCC deadline recomputed without a change"
    );
    // The first CCC's credit timer falls due: it alone raises a request
    // (which no PDC carries: the target has not answered any yet) and
    // restarts its timer with backoff; the second CCC's timer leads.
    a.pds.handle_timeout(first, &mut a.up);
    assert!(drain(&mut a, first).is_empty());
    assert_eq!(a.pds.poll_timeout(), a.pds.poll_timeout_by_scan());
    assert_eq!(a.pds.poll_timeout(), Some(first + Duration::from_nanos(1)));
    // Once per refresh that followed a change of it, not once per CCC.
    assert!(a.pds.ccc_deadline_evals() - evals <= 4);
}
