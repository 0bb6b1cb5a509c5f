//! A CACK held back by a guaranteed response (§3 "CACK / CLEAR /
//! guaranteed delivery") while many more packets arrive: the target's
//! SACK bitmap still reports the newest arrivals, and the source infers
//! no loss from what no bitmap reported.

use super::*;
use uet_wire::pds::PdsAckPsnField;

/// Sends `n` packets of 100 B on an established PDC A→B and returns them
/// with the time after the last left.
fn burst(a: &mut Host, pdc: uet_wire::PdcId, now: Instant, n: u32) -> (Vec<Dgram>, Instant) {
    a.pds.enqueue(now, pdc, pkts(2, n, 100)).unwrap();
    let mut out = vec![];
    let mut at = now;
    while out.len() < n as usize {
        at += Duration::from_micros(1);
        let got = drain(a, at);
        assert!(!got.is_empty() || out.len() < n as usize);
        out.extend(got);
    }
    assert_eq!(out.len(), n as usize);
    (out, at)
}

fn requests(out: Vec<Dgram>) -> Vec<Dgram> {
    out.into_iter()
        .filter(|d| matches!(d.pds(), PdsRepr::Request(_)))
        .collect()
}

/// A at A and B at B, configured `a` and `b`, with an established PDC
/// A→B, and the time after.
fn established_pair(a: PdsConfig, b: PdsConfig) -> (Host, Host, uet_wire::PdcId, Instant) {
    let mut a = host(A, 1, a);
    let mut b = host(B, 2, b);
    let (pdc, now) = established(&mut a, &mut b);
    (a, b, pdc, now)
}

fn psn_of(d: &Dgram) -> Psn {
    match d.pds() {
        PdsRepr::Request(r) => r.psn,
        other => panic!("not a request: {other:?}"),
    }
}

/// A source with a PSN window large enough for 200 packets in flight.
fn wide() -> PdsConfig {
    let mut c = PdsConfig {
        mp_range: 1024,
        ..PdsConfig::default()
    };
    c.ccc.algorithm = uet_cms::Algorithm::Fixed { window: 1 << 30 };
    c
}

#[test]
fn the_sack_bitmap_follows_the_newest_arrivals_past_a_held_back_cack() {
    let (mut a, mut b, pdc, now) = established_pair(wide(), wide());
    let (p, now) = burst(&mut a, pdc, now, 200);
    let p0 = psn_of(&p[0]);
    // The first message ends at p0 + 9: its completion is guaranteed, and
    // no CLEAR for it comes while the other 190 packets arrive.
    b.up.complete_at = vec![p0.add(9)];
    // B sends its ACKs as they fall due (every ACK_Gen_Trigger bytes).
    let mut acks = vec![];
    for d in &p {
        deliver(&mut b, now, d);
        acks.extend(drain(&mut b, now));
    }
    let PdsRepr::Ack(last) = acks.last().unwrap().pds() else {
        panic!("not an ACK")
    };
    assert_eq!(last.cack_psn, p0.add(8), "CACK waits for the CLEAR");
    let PdsAckExt::Cc(cc) = last.ext else {
        panic!("no SACK")
    };
    let base = last.cack_psn.offset(cc.sack_psn_offset);
    let newest = p0.add(199);
    assert_eq!(
        base.add(63),
        newest,
        "the bitmap ends at the packet that triggered the ACK"
    );
    assert_eq!(cc.sack_bitmap, u64::MAX, "and reports all 64 as arrived");
    // Every packet was reported by some ACK: the source resends nothing,
    // and its CLEAR_PSN covers all 200.
    for d in &acks {
        deliver(&mut a, now, d);
    }
    let out = drain(&mut a, now);
    assert_eq!(a.pds.counters().tx_retransmits, 0);
    assert_eq!(a.pds.counters().sack_inferred, 0);
    let clear = out
        .iter()
        .find_map(|d| match d.pds() {
            PdsRepr::Cp(c) => match c.payload {
                CpPayload::Clear { clear_psn } => Some(clear_psn),
                _ => None,
            },
            _ => None,
        })
        .expect("a CLEAR");
    assert_eq!(clear, newest);
}

/// An ACK from B to A with CACK `cack`, naming `trigger`, whose bitmap
/// starts at `base`: B's last real ACK with those fields replaced.
fn ack(template: &Dgram, cack: Psn, trigger: Psn, base: Psn, bitmap: u64) -> Dgram {
    let PdsRepr::Ack(mut a) = template.pds() else {
        panic!("not an ACK")
    };
    let PdsAckExt::Cc(mut cc) = a.ext else {
        panic!("no SACK")
    };
    a.cack_psn = cack;
    a.next_hdr = NextHeader::None;
    a.req = PdsAckRequest::None;
    a.ack_psn_offset = PdsAckPsnField::Offset(trigger.offset_from(cack).unwrap());
    cc.sack_psn_offset = base.offset_from(cack).unwrap();
    cc.sack_bitmap = bitmap;
    a.ext = PdsAckExt::Cc(cc);
    let repr = PdsRepr::Ack(a);
    let mut bytes = vec![0; repr.buffer_len()];
    repr.emit(&mut bytes);
    Dgram {
        bytes,
        ..template.clone()
    }
}

#[test]
fn what_no_bitmap_reported_is_not_presumed_lost() {
    let (mut a, mut b, pdc, now) = established_pair(wide(), wide());
    let (p, now) = burst(&mut a, pdc, now, 100);
    // The last packet asks for an ACK: its header is the template.
    deliver(&mut b, now, &p[99]);
    let template = drain(&mut b, now).pop().unwrap();
    let p0 = psn_of(&p[0]);
    // CACK before p0; the bitmap covers p80..p99, all arrived but p85.
    // p0..p79 lie outside it: this ACK says nothing of them. A 0 bit
    // inside a bitmap is a packet that had not arrived: p85, with p86..p99
    // delivered after it, is presumed lost, and only it.
    let now = now + Duration::from_micros(50);
    let bitmap = ((1 << 20) - 1) & !(1 << 5);
    let d = ack(&template, p0.sub(1), p0.add(99), p0.add(80), bitmap);
    deliver(&mut a, now, &d);
    let re = drain(&mut a, now);
    assert_eq!(re.iter().map(psn_of).collect::<Vec<_>>(), [p0.add(85)]);
    assert_eq!(a.pds.counters().sack_inferred, 1);
}

#[test]
fn a_cack_over_packets_sacked_before_reopens_the_psn_window() {
    // A PSN window of 128, all of it in flight, 72 more packets queued.
    let cfg = PdsConfig {
        mp_range: 128,
        ..wide()
    };
    let (mut a, mut b, pdc, now) = established_pair(cfg, wide());
    a.pds.enqueue(now, pdc, pkts(2, 200, 100)).unwrap();
    let p = drain(&mut a, now);
    assert_eq!(p.len(), 128, "the PSN window holds 128");
    deliver(&mut b, now, &p[127]);
    let template = drain(&mut b, now).pop().unwrap();
    let p0 = psn_of(&p[0]);
    // Two ACKs SACK all 128 while the CACK waits (for a CLEAR, say); the
    // window stays full.
    let now = now + Duration::from_micros(10);
    for base in [p0, p0.add(64)] {
        let d = ack(&template, p0.sub(1), base.add(63), base, u64::MAX);
        deliver(&mut a, now, &d);
    }
    assert!(drain(&mut a, now).is_empty(), "the window is full");
    // Then the CACK covers them all and reports nothing new: the window
    // is open again, and the queued packets go.
    let last = p0.add(127);
    let d = ack(&template, last, last, last.next(), 0);
    deliver(&mut a, now, &d);
    let more = drain(&mut a, now);
    assert_eq!(more.len(), 72);
    assert_eq!(psn_of(&more[0]), last.next());
}

#[test]
fn a_response_still_to_go_is_no_hole_in_the_bitmap_before_it() {
    let (mut a, mut b, pdc, now) = established_pair(wide(), wide());
    let (p, now) = burst(&mut a, pdc, now, 40);
    let p0 = psn_of(&p[0]);
    // Two messages end at p0 + 9 and p0 + 19; all 40 packets arrive in
    // one batch, so the two responses leave in two ACKs, one each.
    b.up.complete_at = vec![p0.add(9), p0.add(19)];
    for d in &p {
        deliver(&mut b, now, d);
    }
    let acks = drain(&mut b, now);
    assert_eq!(acks.len(), 2);
    // The first ACK must not show p0 + 19 (its response not yet sent, so
    // not SACKed) as a hole below the packets SACKed after it.
    deliver(&mut a, now, &acks[0]);
    assert_eq!(a.pds.counters().sack_inferred, 0);
    deliver(&mut a, now, &acks[1]);
    assert!(
        drain(&mut a, now)
            .iter()
            .all(|d| !matches!(d.pds(), PdsRepr::Request(_)))
    );
    assert_eq!(a.pds.counters().sack_inferred, 0);
    assert_eq!(a.pds.counters().tx_retransmits, 0);
    assert_eq!(a.up.responses.len(), 2);
}

#[test]
fn a_probe_answered_while_responses_wait_condemns_nothing_that_arrived() {
    let cfg = PdsConfig {
        tail_probe: Some(Duration::from_micros(5)),
        ..wide()
    };
    let (mut a, mut b, pdc, now) = established_pair(cfg, wide());
    let (p, _) = burst(&mut a, pdc, now, 40);
    let p0 = psn_of(&p[0]);
    // Two messages end at p0 + 9 and p0 + 19. A hears nothing for a PTO
    // (B was descheduled, say) and probes.
    b.up.complete_at = vec![p0.add(9), p0.add(19)];
    let when = a.pds.poll_timeout().unwrap();
    a.pds.handle_timeout(when, &mut a.up);
    let probe = drain(&mut a, when);
    assert!(
        probe.len() == 1
            && matches!(probe[0].pds(), PdsRepr::Cp(c) if matches!(c.payload, CpPayload::Probe { .. }))
    );
    // The 40 packets and the probe behind them reach B in one batch: both
    // responses and the probe's answer are due at once.
    let now = when + Duration::from_micros(5);
    for d in p.iter().chain(&probe) {
        deliver(&mut b, now, d);
    }
    let acks = drain(&mut b, now);
    // Each ACK, the probe's answer included, is acted upon as it arrives
    // (a source may send between two of them): every packet arrived, so
    // none is presumed lost and none resent, and both responses reach A.
    for d in &acks {
        deliver(&mut a, now, d);
        let out = drain(&mut a, now);
        assert!(
            out.iter().all(|d| !matches!(d.pds(), PdsRepr::Request(_))),
            "a resend after {:?}",
            d.pds()
        );
    }
    let c = a.pds.counters();
    assert_eq!(
        (c.tail_probe_lost, c.sack_inferred, c.tx_retransmits),
        (0, 0, 0)
    );
    assert_eq!(a.up.responses.len(), 2, "both responses arrive");
}

#[test]
fn arrivals_are_reported_when_more_come_before_the_acks_have_left() {
    let (mut a, mut b, pdc, now) = established_pair(wide(), wide());
    let (p, now) = burst(&mut a, pdc, now, 128);
    let p0 = psn_of(&p[0]);
    // Messages of three packets: every third packet ends one with a
    // guaranteed completion, so B sends one ACK per response, each bitmap
    // ending below the next response still waiting (§3).
    b.up.complete_at = (2..128).step_by(3).map(|i| p0.add(i)).collect();
    for d in &p[..64] {
        deliver(&mut b, now, d);
    }
    // B's send batch ends after 10 of those ACKs; the next 64 packets
    // arrive before the other ACKs leave, so the newest 64 PSNs start
    // past the middle packets of the first batch's later messages.
    let mut buf = [0u8; 9000];
    let mut acks = vec![];
    for _ in 0..10 {
        let t = b
            .pds
            .poll_transmit_general(now, &mut buf, &mut b.up)
            .unwrap();
        acks.push(Dgram {
            src: b.addr,
            ev: t.ev,
            bytes: buf[..t.len].to_vec(),
            ecn: t.ecn,
            dscp: t.dscp,
            trimmed: None,
        });
    }
    for d in &p[64..] {
        deliver(&mut b, now, d);
    }
    acks.extend(drain(&mut b, now));
    for d in &acks {
        deliver(&mut a, now, d);
    }
    // Every packet was reported by some ACK (SACKed or answered): none is
    // left for the CACK to cover one CLEAR round trip per message later,
    // while its RTO runs.
    let mut unreported: Vec<u32> = (0..128).collect();
    unreported.retain(|f| !a.up.acked.iter().any(|k| k.token == 2 && k.frag == *f));
    assert_eq!(unreported, Vec::<u32>::new());
    assert_eq!(a.up.responses.len(), 42);
    assert_eq!(a.pds.counters().tx_retransmits, 0);
}

#[test]
fn a_batch_of_arrivals_wider_than_one_bitmap_is_reported_whole() {
    let (mut a, mut b, pdc, now) = established_pair(wide(), wide());
    let (p, now) = burst(&mut a, pdc, now, 200);
    let p0 = psn_of(&p[0]);
    // The first message ends at p0 + 9 and holds the CACK back; all 200
    // packets arrive in one batch (B was descheduled, say) before B sends
    // anything: the ACKs that follow report every one of them, 64 at a
    // time, not only the newest 64.
    b.up.complete_at = vec![p0.add(9)];
    for d in &p {
        deliver(&mut b, now, d);
    }
    let acks = drain(&mut b, now);
    // p0 + 9 ..= p0 + 199: three bitmaps.
    assert_eq!(acks.len(), 3);
    for d in &acks {
        deliver(&mut a, now, d);
    }
    assert_eq!(a.up.acked.iter().filter(|k| k.token == 2).count(), 200);
    assert_eq!(a.up.responses.len(), 1);
}

/// A source whose RTO stays at RTO_INIT_TIME (5 ms), so only where its
/// timer starts is under test.
fn fixed_rto() -> PdsConfig {
    PdsConfig {
        rto_follows_rtt: false,
        ..wide()
    }
}

/// B receives `pkts` at `at` and A receives every ACK B sends for them,
/// at `at` too (B's delayed ACK is sent at once).
fn deliver_and_ack(a: &mut Host, b: &mut Host, at: Instant, pkts: &[Dgram]) {
    let mut acks = vec![];
    for d in pkts {
        deliver(b, at, d);
        acks.extend(drain(b, at));
    }
    // B's ACK timer, were it holding an ACK back, is due within its
    // ack_delay (20 µs); A's clock is not moved for it.
    let soon = at + Duration::from_micros(20);
    if b.pds.poll_timeout().is_some_and(|due| due <= soon) {
        b.pds.handle_timeout(soon, &mut b.up);
        acks.extend(drain(b, soon));
    }
    for d in &acks {
        deliver(a, at, d);
    }
}

/// Behind a standing queue the target's host stops running its receive
/// loop for a while: the packet behind the last one acknowledged has been
/// on its way longer than an RTO when the target resumes, yet the target
/// answered an RTO ago at most. Nothing is timed out until an RTO of
/// silence has passed, and then the oldest packet is.
#[test]
fn a_pause_of_the_target_times_nothing_out_until_an_rto_after_its_last_ack() {
    let (mut a, mut b, pdc, now) = established_pair(fixed_rto(), fixed_rto());
    let (p, sent) = burst(&mut a, pdc, now, 200);
    let rto = Duration::from_millis(5);
    // The first 100 come out of a 3 ms queue and are acknowledged; then B
    // pauses.
    let acked_at = sent + Duration::from_millis(3);
    deliver_and_ack(&mut a, &mut b, acked_at, &p[..100]);
    assert!(drain(&mut a, acked_at).is_empty());
    // 5.7 ms after the packets left: every one is older than an RTO, but B
    // answered 2.7 ms ago.
    let paused = sent + Duration::from_micros(5_700);
    a.pds.handle_timeout(paused, &mut a.up);
    assert!(requests(drain(&mut a, paused)).is_empty());
    assert_eq!(a.pds.counters().rto_fired, 0);
    let due = a.pds.poll_timeout().expect("the oldest packet is guarded");
    assert_eq!(due, acked_at + rto, "an RTO after the last ACK");
    // B resumes before that: the rest is acknowledged, nothing resent.
    let resumed = acked_at + Duration::from_micros(4_900);
    a.pds.handle_timeout(resumed, &mut a.up);
    deliver_and_ack(&mut a, &mut b, resumed, &p[100..]);
    assert_nothing_resent(&mut a, resumed);
}

/// After the last ACKs at `at`, A's timers due then resend nothing and no
/// packet was ever timed out or resent.
fn assert_nothing_resent(a: &mut Host, at: Instant) {
    a.pds.handle_timeout(at, &mut a.up);
    assert!(requests(drain(a, at)).is_empty());
    assert_eq!(a.pds.counters().rto_fired, 0);
    assert_eq!(a.pds.counters().tx_retransmits, 0);
}

/// The same pause lasting past an RTO after the last ACK: the oldest
/// packet not acknowledged times out then, and is resent.
#[test]
fn a_silence_of_an_rto_after_the_last_ack_times_the_oldest_packet_out() {
    let (mut a, mut b, pdc, now) = established_pair(fixed_rto(), fixed_rto());
    let (p, sent) = burst(&mut a, pdc, now, 200);
    let acked_at = sent + Duration::from_millis(3);
    deliver_and_ack(&mut a, &mut b, acked_at, &p[..100]);
    let due = a.pds.poll_timeout().unwrap();
    assert_eq!(due, acked_at + Duration::from_millis(5));
    a.pds.handle_timeout(due, &mut a.up);
    assert_eq!(a.pds.counters().rto_fired, 1);
    let rtx = requests(drain(&mut a, due));
    assert_eq!(rtx.len(), 1);
    assert_eq!(psn_of(&rtx[0]), psn_of(&p[100]), "the oldest packet");
}

/// ACKs that keep coming without ever acknowledging one packet move its
/// timer at most one RTO: it times out two RTOs after it left, not an RTO
/// after the last ACK.
#[test]
fn acks_that_pass_a_packet_over_delay_its_timeout_one_rto_at_most() {
    let mut cfg = fixed_rto();
    // No loss inference from the SACKs, so only the RTO can find it.
    cfg.dupthresh = u32::MAX;
    let (mut a, mut b, pdc, now) = established_pair(cfg.clone(), cfg);
    let (p, sent) = burst(&mut a, pdc, now, 41);
    let rto = Duration::from_millis(5);
    // p[0] is lost; the other 40 arrive 10 at a time every 2 ms for 8 ms
    // and are SACKed. No timer fires on the way.
    let mut at = sent;
    for chunk in p[1..].chunks(10) {
        at += Duration::from_millis(2);
        a.pds.handle_timeout(at, &mut a.up);
        assert_eq!(a.pds.counters().rto_fired, 0, "at {at:?}");
        deliver_and_ack(&mut a, &mut b, at, chunk);
    }
    let due = a.pds.poll_timeout().unwrap();
    assert!(due > now + rto * 2 && due <= sent + rto * 2, "{due:?}");
    assert!(due < at + rto, "not an RTO after the last ACK");
    a.pds.handle_timeout(due, &mut a.up);
    assert_eq!(a.pds.counters().rto_fired, 1);
    let rtx = requests(drain(&mut a, due));
    assert_eq!(rtx.len(), 1);
    assert_eq!(psn_of(&rtx[0]), psn_of(&p[0]));
}

/// Both hosts stop together for 30 ms (a hypervisor throttling the whole
/// machine) with 200 packets in flight: when they resume, every packet is
/// six RTOs old. The source's caller saw its own stall and holds the loss
/// timers for as long; the target answers meanwhile and nothing is
/// resent. Without the hold the oldest packet times out at once.
#[test]
fn loss_timers_held_after_the_hosts_own_stall_let_the_peer_answer() {
    for hold in [true, false] {
        let (mut a, mut b, pdc, now) = established_pair(fixed_rto(), fixed_rto());
        let (p, sent) = burst(&mut a, pdc, now, 200);
        let resumed = sent + Duration::from_millis(30);
        if hold {
            a.pds.hold_loss_timers(resumed + Duration::from_millis(30));
        }
        // The source's loop runs first: its timers are long past.
        a.pds.handle_timeout(resumed, &mut a.up);
        let early = requests(drain(&mut a, resumed));
        if !hold {
            assert_eq!(a.pds.counters().rto_fired, 1);
            assert_eq!(early.len(), 1, "the oldest packet, resent");
            continue;
        }
        assert!(early.is_empty());
        assert_eq!(a.pds.counters().rto_fired, 0);
        // Not woken before the hold ends.
        let due = a.pds.poll_timeout().unwrap();
        assert!(due >= resumed + Duration::from_millis(30), "{due:?}");
        // The target resumes and acknowledges everything 0.5 ms later.
        let answered = resumed + Duration::from_micros(500);
        deliver_and_ack(&mut a, &mut b, answered, &p);
        assert_nothing_resent(&mut a, answered);
    }
}

/// A hold delays a real loss's timeout to the hold's end, not beyond, and
/// holds nothing else: the target's delayed ACK leaves on time.
#[test]
fn a_hold_delays_a_real_loss_to_its_end_and_no_delayed_ack() {
    let (mut a, mut b, pdc, now) = established_pair(fixed_rto(), fixed_rto());
    let (p, sent) = burst(&mut a, pdc, now, 1);
    let until = sent + Duration::from_millis(20);
    a.pds.hold_loss_timers(until);
    b.pds.hold_loss_timers(until);
    // B gets the packet; its ACK is not held back by the hold.
    deliver(&mut b, sent, &p[0]);
    let mut acks = drain(&mut b, sent);
    if acks.is_empty() {
        let due = b.pds.poll_timeout().expect("a delayed ACK");
        assert!(due < sent + Duration::from_millis(1), "{due:?}");
        b.pds.handle_timeout(due, &mut b.up);
        acks = drain(&mut b, due);
    }
    assert!(!acks.is_empty(), "B acknowledges during the hold");
    for d in &acks {
        deliver(&mut a, sent, d);
    }
    // A second packet is lost: its RTO (5 ms) falls inside the hold and
    // fires when the hold ends.
    let (_lost, sent2) = burst(&mut a, pdc, sent, 1);
    a.pds
        .handle_timeout(sent2 + Duration::from_millis(10), &mut a.up);
    assert_eq!(a.pds.counters().rto_fired, 0);
    assert_eq!(a.pds.poll_timeout(), Some(until));
    a.pds.handle_timeout(until, &mut a.up);
    assert_eq!(a.pds.counters().rto_fired, 1);
    assert_eq!(requests(drain(&mut a, until)).len(), 1);
}

/// A target whose host stalls now and then: a first stall of 4 ms (below
/// RTO_INIT_TIME) shows in a round-trip sample, and a second one of 7 ms
/// a little later times nothing out, because the RTO stays above twice
/// the longest recent round trip. A PDC that has seen no such round trip
/// times the oldest packet out at RTO_INIT_TIME (5 ms) in the same 7 ms.
#[test]
fn a_stall_the_path_has_shown_before_is_waited_out() {
    for seen_before in [true, false] {
        let (mut a, mut b, pdc, now) = established_pair(wide(), wide());
        let first = Duration::from_millis(if seen_before { 4 } else { 0 });
        let (p, sent) = burst(&mut a, pdc, now, 100);
        let acked = sent + first + Duration::from_micros(100);
        deliver_and_ack(&mut a, &mut b, acked, &p);
        assert_nothing_resent(&mut a, acked);
        // Then 50 round trips of 100 µs, in which SRTT and RTTVAR forget
        // the stall.
        let mut at = acked;
        for _ in 0..50 {
            let (p, sent) = burst(&mut a, pdc, at + Duration::from_millis(1), 10);
            at = sent + Duration::from_micros(100);
            deliver_and_ack(&mut a, &mut b, at, &p);
        }
        assert_nothing_resent(&mut a, at);
        // 100 ms later, 100 more; the target answers them after 7 ms.
        let (p, sent) = burst(&mut a, pdc, at + Duration::from_millis(100), 100);
        let answered = sent + Duration::from_millis(7);
        let mut at = sent;
        while at < answered {
            at += Duration::from_micros(500);
            a.pds.handle_timeout(at, &mut a.up);
            let _ = drain(&mut a, at);
        }
        if seen_before {
            deliver_and_ack(&mut a, &mut b, answered, &p);
            assert_nothing_resent(&mut a, answered);
        } else {
            assert_eq!(a.pds.counters().rto_fired, 1, "timed out at 5 ms");
        }
    }
}

/// A source that probes its tail, with `rto_silent` as given.
fn probing(rto_silent: Option<Duration>) -> PdsConfig {
    PdsConfig {
        tail_probe: Some(Duration::from_micros(5)),
        rto_silent,
        ..wide()
    }
}

/// Runs A's timers every 100 µs from `from` to `to`, collecting what it
/// sends.
fn run_timers(a: &mut Host, from: Instant, to: Instant) -> Vec<Dgram> {
    let mut out = vec![];
    let mut at = from;
    while at <= to {
        if a.pds.poll_timeout().is_some_and(|due| due <= at) {
            a.pds.handle_timeout(at, &mut a.up);
        }
        out.extend(drain(a, at));
        at += Duration::from_micros(100);
    }
    out
}

/// B runs again at `at`: `pkts`, then the probes among what A `sent`
/// meanwhile, arrive and are acknowledged; A resends nothing.
fn resume(a: &mut Host, b: &mut Host, at: Instant, pkts: &[Dgram], sent: &[Dgram]) {
    deliver_and_ack(a, b, at, pkts);
    for d in sent.iter().filter(|d| is_probe(d)) {
        deliver_and_ack(a, b, at, std::slice::from_ref(d));
    }
    assert_nothing_resent(a, at);
}

fn is_probe(d: &Dgram) -> bool {
    matches!(d.pds(), PdsRepr::Cp(c) if matches!(c.payload, CpPayload::Probe { .. }))
}

/// The target's host stops for 12 ms, longer than RTO_INIT_TIME (5 ms),
/// before the source has any sample of so long a round trip. With
/// `rto_silent` (20 ms) the source waits, whether it probes the silence
/// or (no tail probing here, or a source still sending into its window)
/// not: when the target runs again every packet is acknowledged, and
/// nothing was resent. Without it the oldest packet times out at 5 ms and
/// is resent though it was not lost.
#[test]
fn a_target_silent_past_rto_init_is_waited_out_to_rto_silent() {
    let stalled = Duration::from_millis(12);
    for probes in [true, false] {
        for silent in [Some(Duration::from_millis(20)), None] {
            let mut cfg = probing(silent);
            if !probes {
                cfg.tail_probe = None;
            }
            let (mut a, mut b, pdc, now) = established_pair(cfg, wide());
            let (p, sent) = burst(&mut a, pdc, now, 50);
            let resumed = sent + stalled;
            let out = run_timers(&mut a, sent, resumed);
            assert_eq!(out.iter().any(is_probe), probes);
            let resent = requests(out.clone()).len();
            if silent.is_none() {
                assert!(resent > 0 && a.pds.counters().rto_fired > 0);
                continue;
            }
            assert_eq!((resent, a.pds.counters().rto_fired), (0, 0));
            resume(&mut a, &mut b, resumed, &p, &out);
            assert_eq!(a.up.acked.iter().filter(|k| k.token == 2).count(), 50);
        }
    }
}

/// The target stops in the middle of a batch that left at one instant: it
/// acknowledged the batch's first packets, then nothing for 12 ms. It is
/// silent about the rest, which wait for `rto_silent`, not RTO_INIT_TIME.
#[test]
fn a_target_that_stops_in_the_middle_of_a_batch_is_silent_about_the_rest() {
    let (mut a, mut b, pdc, now) =
        established_pair(probing(Some(Duration::from_millis(20))), wide());
    let (p, sent) = burst(&mut a, pdc, now, 50);
    let at = sent + Duration::from_micros(100);
    deliver_and_ack(&mut a, &mut b, at, &p[..10]);
    let resumed = at + Duration::from_millis(12);
    let out = run_timers(&mut a, at, resumed);
    assert_eq!(requests(out.clone()).len(), 0);
    assert_eq!(a.pds.counters().rto_fired, 0);
    resume(&mut a, &mut b, resumed, &p[10..], &out);
}

/// A packet lost on a path that answers: the packets sent after it are
/// acknowledged, so the target is not silent and `rto_silent` does not
/// hold the packet back; SACK finds it at once.
#[test]
fn a_packet_lost_among_acknowledged_ones_is_not_held_by_rto_silent() {
    let (mut a, mut b, pdc, now) =
        established_pair(probing(Some(Duration::from_millis(20))), wide());
    let (p, sent) = burst(&mut a, pdc, now, 20);
    let at = sent + Duration::from_micros(200);
    deliver_and_ack(&mut a, &mut b, at, &p[1..]);
    let resent = requests(drain(&mut a, at));
    assert_eq!(resent.len(), 1);
    assert_eq!(psn_of(&resent[0]), psn_of(&p[0]));
    assert_eq!(a.pds.counters().rto_fired, 0);
}

/// What `rto_silent` waits for is a target that answers nothing: on a
/// path that answers, a lost tail is found by the probe's answer and
/// resent at once, long before either RTO.
#[test]
fn a_lost_tail_on_an_answering_path_is_resent_at_the_probes_answer() {
    let (mut a, mut b, pdc, now) =
        established_pair(probing(Some(Duration::from_millis(20))), wide());
    let (_lost, sent) = burst(&mut a, pdc, now, 50);
    let out = run_timers(&mut a, sent, sent + Duration::from_micros(500));
    let probes: Vec<Dgram> = out.iter().filter(|d| is_probe(d)).cloned().collect();
    assert_eq!((probes.len(), requests(out).len()), (1, 0));
    let answered = sent + Duration::from_micros(600);
    deliver_and_ack(&mut a, &mut b, answered, &probes);
    let resent = requests(drain(&mut a, answered));
    assert!(!resent.is_empty());
    let c = a.pds.counters();
    assert!(c.tail_probe_lost > 0 && c.rto_fired == 0, "{c:?}");
}
