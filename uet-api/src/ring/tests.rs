use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;

use super::*;
use crate::region::Region;

fn remote(fep: IpAddr) -> RemoteRef {
    RemoteRegion {
        fep,
        job: 7,
        pid: 3,
        ri: 9,
        generation: 2,
        key: 0xdead_beef_0123,
    }
    .at(4096)
}

fn write_entry(tag: u64) -> SqEntry {
    SqEntry {
        op: SqOp::Write {
            header_data: Some(0x55),
        },
        tag: Tag(tag),
        local: LocalRef {
            handle: Handle(4),
            offset: 64,
        },
        remote: remote("10.0.0.2".parse().unwrap()),
        len: 64,
    }
}

/// Both ends over one memfd, as client and daemon see it.
fn pair(sq: u32, cq: u32) -> (ClientRing, ServerRing, Region) {
    let sizes = RingSizes::new(sq, cq).unwrap();
    let r = Region::new(sizes.len() as u64).unwrap();
    let c = ClientRing::create(r.as_fd(), sizes).unwrap();
    let s = ServerRing::map(r.as_fd(), sizes).unwrap();
    (c, s, r)
}

fn ok(tag: Tag) -> Completion {
    Completion {
        tag,
        status: Status::Ok,
        bytes: 64,
    }
}

#[test]
fn sizes_are_powers_of_two_within_the_bound() {
    assert!(RingSizes::new(1, 1).is_ok());
    assert!(RingSizes::new(MAX_RING_ENTRIES, 64).is_ok());
    assert!(RingSizes::new(0, 64).is_err());
    assert!(RingSizes::new(3, 64).is_err());
    assert!(RingSizes::new(64, MAX_RING_ENTRIES * 2).is_err());
    assert_eq!(RingSizes::new(2, 4).unwrap().len(), 512 + 2 * 128 + 4 * 32);
}

#[test]
fn entries_round_trip() {
    let mut read = write_entry(9);
    read.op = SqOp::Read;
    read.remote.region.fep = "fd00::2".parse().unwrap();
    for e in [write_entry(1), read] {
        assert_eq!(SqEntry::decode(&e.encode()), Ok(e));
    }
    let mut plain = write_entry(2);
    plain.op = SqOp::Write { header_data: None };
    assert_eq!(SqEntry::decode(&plain.encode()), Ok(plain));
    for c in [
        ok(Tag(5)),
        Completion {
            tag: Tag(6),
            status: Status::Remote { return_code: 0x11 },
            bytes: 0,
        },
        Completion {
            tag: Tag(7),
            status: Status::Local {
                code: ErrorCode::NotYours,
                message: String::new(),
            },
            bytes: 0,
        },
    ] {
        assert_eq!(decode_completion(&encode_completion(&c)), c);
    }
}

#[test]
fn undefined_ops_flags_and_families_do_not_decode_but_keep_their_tag() {
    let good = write_entry(42).encode();
    for (i, v, want) in [
        (0, 0, EntryError::Op(0)),
        (0, 9, EntryError::Op(9)),
        (1, 2, EntryError::Flags(2)),
        (2, 5, EntryError::Family(5)),
    ] {
        let mut b = good;
        b[i] = v;
        assert_eq!(SqEntry::decode(&b), Err(want));
        assert_eq!(SqEntry::tag_of(&b), Tag(42));
    }
    let mut b = good;
    b[0] = 2; // a read with header data
    assert_eq!(SqEntry::decode(&b), Err(EntryError::Flags(1)));
}

#[test]
fn an_entry_travels_to_the_daemon_and_its_completion_back() {
    let (mut c, mut s, _r) = pair(4, 4);
    assert_eq!(s.pending(), 0);
    assert_eq!(c.poll(), None);
    c.submit(&write_entry(1)).unwrap();
    let mut n = s.pending();
    assert_eq!(n, 1);
    assert_eq!(s.take(&mut n), Some(Taken::Entry(write_entry(1))));
    assert_eq!(s.take(&mut n), None);
    assert_eq!(s.in_flight(), 1);
    s.complete(&ok(Tag(1)));
    assert_eq!(s.in_flight(), 0);
    assert_eq!(c.poll(), Some(ok(Tag(1))));
    assert_eq!(c.poll(), None);
}

#[test]
fn the_daemon_reads_an_entry_once_so_later_client_writes_change_nothing() {
    let (mut c, mut s, _r) = pair(2, 2);
    c.submit(&write_entry(1)).unwrap();
    let mut n = s.pending();
    let Some(Taken::Entry(e)) = s.take(&mut n) else {
        panic!("no entry")
    };
    // The client overwrites the slot after the daemon took it.
    c.mem.write(HEADER_LEN, &[0xff; SQ_ENTRY_LEN]);
    assert_eq!(e, write_entry(1));
}

#[test]
fn a_full_sq_refuses_and_wraps_after_the_daemon_takes() {
    let (mut c, mut s, _r) = pair(2, 8);
    for round in 0..5u64 {
        c.submit(&write_entry(2 * round)).unwrap();
        c.submit(&write_entry(2 * round + 1)).unwrap();
        assert_eq!(c.submit(&write_entry(99)), Err(RingFull));
        let mut n = s.pending();
        for i in 0..2 {
            let Some(Taken::Entry(e)) = s.take(&mut n) else {
                panic!("no entry")
            };
            assert_eq!(e.tag, Tag(2 * round + i));
            s.complete(&ok(e.tag));
            assert_eq!(c.poll(), Some(ok(e.tag)));
        }
    }
}

#[test]
fn the_daemon_takes_no_more_than_the_cq_can_complete() {
    let (mut c, mut s, _r) = pair(8, 2);
    for t in 0..4 {
        c.submit(&write_entry(t)).unwrap();
    }
    let mut n = s.pending();
    assert!(s.take(&mut n).is_some());
    assert!(s.take(&mut n).is_some());
    // Two in flight fill a CQ of two.
    assert_eq!(s.take(&mut n), None);
    s.complete(&ok(Tag(0)));
    // An unread completion holds its slot too.
    assert_eq!(s.take(&mut n), None);
    assert_eq!(c.poll(), Some(ok(Tag(0))));
    assert!(s.take(&mut n).is_some());
    assert_eq!(s.broken(), None);
}

#[test]
fn a_tail_far_ahead_or_backwards_breaks_the_ring_and_the_client_hears_it() {
    for bad in [5u32, 1000, u32::MAX] {
        let (mut c, mut s, _r) = pair(4, 4);
        c.poke_sq_tail(bad);
        assert_eq!(s.pending(), 0, "tail {bad}");
        assert_eq!(s.broken(), Some(Broken::SqTail));
        assert_eq!(
            c.wait(Duration::ZERO, Some(Duration::from_secs(5))),
            Err(RingWaitError::Broken(1))
        );
        // Broken stays broken, whatever the client does next.
        c.poke_sq_tail(0);
        assert_eq!(s.pending(), 0);
    }
    // Backwards after real use.
    let (mut c, mut s, _r) = pair(4, 4);
    c.submit(&write_entry(1)).unwrap();
    c.submit(&write_entry(2)).unwrap();
    let mut n = s.pending();
    s.take(&mut n).unwrap();
    s.take(&mut n).unwrap();
    c.poke_sq_tail(1);
    assert_eq!(s.pending(), 0);
    assert_eq!(s.broken(), Some(Broken::SqTail));
}

#[test]
fn a_cq_head_past_the_tail_breaks_the_ring() {
    let (mut c, mut s, _r) = pair(4, 4);
    c.submit(&write_entry(1)).unwrap();
    c.poke_cq_head(3);
    let mut n = s.pending();
    assert_eq!(s.take(&mut n), None);
    assert_eq!(s.broken(), Some(Broken::CqHead));
    // Completions of operations already taken go nowhere, without panics.
    s.complete(&ok(Tag(1)));
}

#[test]
fn a_sleeping_client_is_woken_by_a_completion() {
    let (mut c, mut s, _r) = pair(4, 4);
    c.submit(&write_entry(1)).unwrap();
    let mut n = s.pending();
    s.take(&mut n).unwrap();
    let waiter = std::thread::spawn(move || {
        let r = c.wait(Duration::ZERO, Some(Duration::from_secs(10)));
        (r, c)
    });
    // Complete once the client sleeps (its flag is up), or it may have
    // seen the completion while still awake: both must deliver it.
    let deadline = Instant::now() + Duration::from_secs(5);
    while s.mem.word(CLIENT_WAITS).load(Ordering::Relaxed) == 0 && Instant::now() < deadline {
        std::thread::yield_now();
    }
    s.complete(&ok(Tag(1)));
    let (r, _c) = waiter.join().unwrap();
    assert_eq!(r, Ok(ok(Tag(1))));
}

#[test]
fn a_wait_with_nothing_coming_times_out() {
    let (mut c, _s, _r) = pair(4, 4);
    let t = Instant::now();
    assert_eq!(
        c.wait(Duration::from_micros(50), Some(Duration::from_millis(20))),
        Err(RingWaitError::Timeout)
    );
    assert!(t.elapsed() >= Duration::from_millis(20));
}

#[test]
fn the_doorbell_rings_only_while_the_worker_sleeps() {
    let (mut c, mut s, _r) = pair(4, 4);
    let (bell, mut heard) = UnixStream::pair().unwrap();
    heard.set_nonblocking(true).unwrap();
    c.set_doorbell(OwnedFd::from(bell));
    let mut buf = [0u8; 64];
    c.submit(&write_entry(1)).unwrap();
    assert!(heard.read(&mut buf).is_err(), "rang while awake");
    // Going to sleep with an entry waiting: don't.
    assert!(s.set_sleeping(true));
    let mut n = s.pending();
    s.take(&mut n).unwrap();
    assert!(!s.set_sleeping(true));
    c.submit(&write_entry(2)).unwrap();
    assert_eq!(heard.read(&mut buf).unwrap(), 8);
    s.set_sleeping(false);
    c.submit(&write_entry(3)).unwrap();
    assert!(heard.read(&mut buf).is_err(), "rang after the worker woke");
}
