//! A daemon with two AF_XDP workers (a veth with two queues) and two peers
//! whose PDCs different workers own (`owner_of`): sends from both, tagged
//! and untagged, land in posted receives — any-source and directed, posted
//! before the sends and after them (unexpected) — each exactly once and,
//! per peer, in the order the receives were posted; RMA writes from both
//! land and are reported once each.

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use common::{Uetd, connect};
use uet_api::{Event, Peer, RemoteRegion, Status};
use uet_lab::netns::{NetNs, veth_pair_queues};
use uet_ses::{
    Access, FepAddr, InitiatorId, MatchBits, MemoryKey, RecvBuffer, RecvKind, RecvSpec, RegionAddr,
    RegionSpec, Sender, TargetEvent,
};
use uet_wire::{JobId, PidOnFep, ResourceIndex};
use uetd::config::{Backend, Config};
use uetd::daemon::{Daemon, owner_of};
use uetd::mem::SharedRegion;
use uetd::worker::Output;

const RECV_IP: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 1);
/// Messages per peer and phase.
const K: usize = 12;
/// Bytes per receive buffer (and per write).
const SLOT: u64 = 4096;
const RI: u16 = 3;
const KEY: u64 = 0x5eed;

/// Two addresses in 10.79.0.0/24 that a two-worker daemon gives to
/// different workers.
fn peers() -> [Ipv4Addr; 2] {
    let mut by_owner = [None, None];
    for host in 2..=250u8 {
        let ip = Ipv4Addr::new(10, 79, 0, host);
        by_owner[owner_of(IpAddr::V4(ip), 2)].get_or_insert(ip);
    }
    [by_owner[0].unwrap(), by_owner[1].unwrap()]
}

/// Message `i` of peer `p`: its length (1 to 3 packets at MTU 1500) and
/// bytes.
fn message(p: usize, i: usize) -> Vec<u8> {
    let len = 100 + (p * 977 + i * 331) % 3900;
    let mut v = vec![0u8; len];
    uetd::mem::pattern((p * 1000 + i) as u64, 0, &mut v);
    v
}

/// Header data naming peer `p`'s message `i` of phase `phase`.
fn hd(phase: u64, p: usize, i: usize) -> u64 {
    phase << 48 | (p as u64) << 32 | i as u64
}

struct PeerSide {
    client: uet_api::Client,
    src: uet_api::LocalHandle,
    region: uet_api::Region,
}

impl PeerSide {
    fn new(sock: &str) -> Self {
        let mut client = connect(sock);
        let region = client.create_region(SLOT * K as u64).unwrap();
        let src = client.register_local(&region).unwrap();
        Self {
            client,
            src,
            region,
        }
    }

    /// Sends peer `p`'s `K` messages of `phase` one after the other (each
    /// waits for its completion: the order the target sees them is the
    /// order they were sent), tagged with `tag(i)` if given.
    fn send_all(&mut self, phase: u64, p: usize, tag: Option<fn(usize, usize) -> u64>) {
        let dst = Peer {
            fep: IpAddr::V4(RECV_IP),
            job: 1,
            pid: 0,
        };
        for i in 0..K {
            let m = message(p, i);
            self.region.write_at(0, &m).unwrap();
            let len = m.len() as u32;
            let h = Some(hd(phase, p, i));
            let t = match tag {
                None => self.client.send(self.src.at(0), dst, len, h),
                Some(f) => self
                    .client
                    .tagged_send(self.src.at(0), dst, len, f(p, i), h),
            }
            .unwrap();
            self.ok(t);
        }
    }

    /// Writes `K` slots of the test pattern into the receiver's region at
    /// peer `p`'s half, with header data.
    fn write_all(&mut self, p: usize, generation: u8) {
        for i in 0..K {
            let m = message(p, i);
            self.region.write_at(0, &m).unwrap();
            let dst = RemoteRegion {
                fep: IpAddr::V4(RECV_IP),
                job: 1,
                pid: 0,
                ri: RI,
                generation,
                key: KEY,
            }
            .at(((p * K + i) as u64) * SLOT);
            let t = self
                .client
                .write(self.src.at(0), dst, m.len() as u32, Some(hd(9, p, i)))
                .unwrap();
            self.ok(t);
        }
    }

    fn ok(&mut self, t: uet_api::Tag) {
        match self
            .client
            .wait_completion(t, Some(Duration::from_secs(30)))
            .unwrap()
        {
            Event::Completion(c) => assert_eq!(c.status, Status::Ok, "{c:?}"),
            other => panic!("expected a completion, got {other:?}"),
        }
    }
}

/// The receiver: an in-process two-worker daemon and its receive region.
struct Receiver {
    d: Daemon,
    mem: SharedRegion,
    next_tag: u64,
    /// Tag → slot of every receive posted and not yet completed.
    posted: std::collections::BTreeMap<u64, u64>,
}

impl Receiver {
    fn spec(slot: u64, kind: RecvKind, from: Option<Ipv4Addr>) -> RecvSpec {
        RecvSpec {
            job: JobId::new(1).unwrap(),
            pid: PidOnFep::new(0).unwrap(),
            buffer: RecvBuffer {
                ri: ResourceIndex::new(RI).unwrap(),
                offset: slot * SLOT,
                len: SLOT,
            },
            kind,
            from: from.map(|ip| Sender {
                fep: FepAddr::from(ip),
                initiator: InitiatorId(0),
            }),
        }
    }

    /// Posts a receive into `slot`; returns its tag.
    fn post(&mut self, slot: u64, kind: RecvKind, from: Option<Ipv4Addr>) -> u64 {
        self.next_tag += 1;
        let t = (1 << 40) + self.next_tag;
        self.d.post_recv(t, Self::spec(slot, kind, from)).unwrap();
        self.posted.insert(t, slot);
        t
    }

    /// Waits for `n` receive completions; returns them by tag (a tag seen
    /// twice, or one never posted, fails the test).
    fn received(&mut self, n: usize) -> Vec<(u64, uet_ses::RecvEvent)> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut got = Vec::new();
        while got.len() < n {
            assert!(Instant::now() < deadline, "{} of {n} receives", got.len());
            match self.d.next_output(Duration::from_millis(100)) {
                Some((_, Output::Received { tag, event })) => {
                    assert!(
                        self.posted.contains_key(&tag),
                        "receive {tag} completed twice or was never posted"
                    );
                    got.push((tag, event));
                    self.posted.remove(&tag);
                }
                Some((_, other @ (Output::RecvRejected { .. } | Output::Target(_)))) => {
                    panic!("unexpected output {other:?}")
                }
                _ => {}
            }
        }
        got.sort_by_key(|(t, _)| *t);
        got
    }

    /// Checks that every completion carries the bytes of the message its
    /// header data names, from the peer it names, and that each peer's
    /// messages of `phase` took its receives in posting order, all `K`
    /// of them once.
    fn check(
        &self,
        got: &[(u64, uet_ses::RecvEvent)],
        slots: &[(u64, u64)],
        phase: u64,
        ips: [Ipv4Addr; 2],
    ) {
        let mut next = [0usize; 2];
        for (tag, ev) in got {
            assert!(ev.completion.status.is_ok(), "{ev:?}");
            let h = ev.header_data.expect("header data");
            assert_eq!(h >> 48, phase, "{ev:?}");
            let (p, i) = (((h >> 32) & 0xffff) as usize, (h & 0xffff_ffff) as usize);
            assert_eq!(ev.source.fep, FepAddr::from(ips[p]), "{ev:?}");
            assert_eq!(i, next[p], "peer {p}'s messages out of order");
            next[p] += 1;
            let m = message(p, i);
            assert_eq!(ev.completion.modified_length, m.len() as u64);
            let slot = slots.iter().find(|(t, _)| t == tag).unwrap().1;
            let mut buf = vec![0u8; m.len()];
            assert!(self.mem.read((slot * SLOT) as usize, &mut buf));
            assert!(buf == m, "slot {slot}: peer {p} message {i} corrupted");
        }
        assert_eq!(next, [K, K]);
    }

    /// Nothing more arrives within a short bounded wait.
    fn quiet(&self) {
        let end = Instant::now() + Duration::from_millis(300);
        while Instant::now() < end {
            if let Some(o) = self.d.next_output(Duration::from_millis(50)) {
                assert!(
                    !matches!(o.1, Output::Received { .. } | Output::RecvRejected { .. }),
                    "a receive ended twice: {o:?}"
                );
            }
        }
    }
}

#[test]
fn a_two_worker_daemon_delivers_every_peers_sends_and_writes_once_in_order() {
    let ips = peers();
    let rns = NetNs::create("uet-mwr").unwrap();
    let pns = NetNs::create("uet-mwp").unwrap();
    veth_pair_queues(
        &rns,
        "mr",
        &format!("{RECV_IP}/24"),
        &pns,
        "mp",
        &format!("{}/24", ips[0]),
        1500,
        2,
    )
    .unwrap();
    pns.ip(&["addr", "add", &format!("{}/24", ips[1]), "dev", "mp"])
        .unwrap();
    // The kernel leaves a veth-bound datagram's UDP checksum to the
    // "device", and AF_XDP sees it unfinished: the peers' end computes it.
    pns.run(|| uetd::xsk::set_tx_checksum_offload("mp", false))
        .unwrap()
        .unwrap();
    // The peers: kernel-UDP daemons, one per address, in one namespace.
    let socks: Vec<String> = (0..2)
        .map(|p| format!("/run/uet/test/{}-{p}.sock", pns.name()))
        .collect();
    let _peers: Vec<Uetd> = (0..2)
        .map(|p| {
            let ip = ips[p].to_string();
            let mut u = Uetd::spawn(
                &pns,
                &[
                    "--interface",
                    "mp",
                    "--backend",
                    "udp",
                    "--address",
                    &ip,
                    "--socket",
                    &socks[p],
                    "--expose",
                    "1:1:4096",
                ],
            );
            u.wait_line("\"exposed\"", Duration::from_secs(30));
            u
        })
        .collect();

    let mut sides: Vec<PeerSide> = socks.iter().map(|s| PeerSide::new(s)).collect();
    let cfg = Config {
        interface: Some("mr".into()),
        backend: Backend::Xdp,
        workers: 2,
        ..Config::default()
    };
    let (mut d, mem) = rns
        .run(move || {
            let d = Daemon::start(cfg).unwrap();
            let mem = SharedRegion::anonymous((4 * K as u64 * SLOT) as usize).unwrap();
            (d, mem)
        })
        .unwrap();
    let spec = RegionSpec::new(
        RegionAddr::new(
            JobId::new(1).unwrap(),
            PidOnFep::new(0).unwrap(),
            ResourceIndex::new(RI).unwrap(),
        ),
        MemoryKey(KEY),
        Access::RECV | Access::REMOTE_WRITE,
    );
    let reg = d.register(spec, mem.clone()).unwrap();
    for ip in ips {
        d.resolve(IpAddr::V4(ip), Duration::from_secs(3));
    }
    let mut r = Receiver {
        d,
        mem,
        next_tag: 0,
        posted: Default::default(),
    };

    let both = |sides: &mut Vec<PeerSide>, f: &(dyn Fn(usize, &mut PeerSide) + Sync)| {
        std::thread::scope(|s| {
            for (p, side) in sides.iter_mut().enumerate() {
                s.spawn(move || f(p, side));
            }
        });
    };

    // 1. Any-source untagged receives posted first: the sends of both
    //    peers (owned by different workers) take them.
    let slots: Vec<(u64, u64)> = (0..2 * K as u64)
        .map(|s| (r.post(s, RecvKind::Untagged, None), s))
        .collect();
    both(&mut sides, &|p, side| side.send_all(1, p, None));
    let got = r.received(2 * K);
    r.check(&got, &slots, 1, ips);
    r.quiet();

    // 2. Directed tagged receives, interleaved between the peers: each
    //    takes only its peer's sends.
    let any_tag = RecvKind::Tagged {
        match_bits: MatchBits(0),
        ignore_bits: MatchBits(u64::MAX),
    };
    let slots: Vec<(u64, u64)> = (0..2 * K as u64)
        .map(|s| (r.post(s, any_tag, Some(ips[(s % 2) as usize])), s))
        .collect();
    both(&mut sides, &|p, side| {
        side.send_all(2, p, Some(|p, i| 0xa000 + (p * 100 + i) as u64));
    });
    let got = r.received(2 * K);
    r.check(&got, &slots, 2, ips);
    for (tag, ev) in &got {
        let slot = slots.iter().find(|(t, _)| t == tag).unwrap().1;
        assert_eq!(ev.source.fep, FepAddr::from(ips[(slot % 2) as usize]));
    }
    r.quiet();

    // 3. Sends first (held as unexpected by their owners), any-source
    //    tagged receives after: each message is taken once.
    both(&mut sides, &|p, side| {
        side.send_all(3, p, Some(|p, i| 0xb000 + (p * 100 + i) as u64));
    });
    let tag_b = RecvKind::Tagged {
        match_bits: MatchBits(0xb000),
        ignore_bits: MatchBits(0xfff),
    };
    let slots: Vec<(u64, u64)> = (0..2 * K as u64)
        .map(|s| (r.post(s, tag_b, None), s))
        .collect();
    let got = r.received(2 * K);
    r.check(&got, &slots, 3, ips);
    r.quiet();
    // Nothing is left over: one more receive of each kind waits.
    r.post(0, tag_b, None);
    r.post(1, RecvKind::Untagged, None);
    r.quiet();

    // 4. RMA writes from both peers land, each reported once.
    let generation = reg.generation.get();
    both(&mut sides, &|p, side| side.write_all(p, generation));
    let mut seen = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.len() < 2 * K {
        assert!(
            Instant::now() < deadline,
            "{} of {} writes",
            seen.len(),
            2 * K
        );
        if let Some((_, Output::Target(TargetEvent::WriteWithData(ev)))) =
            r.d.next_output(Duration::from_millis(100))
        {
            let p = ((ev.header_data >> 32) & 0xffff) as usize;
            assert_eq!(ev.source.fep, FepAddr::from(ips[p]));
            assert!(seen.insert(ev.header_data), "write reported twice");
        }
    }
    for p in 0..2 {
        for i in 0..K {
            let m = message(p, i);
            let mut buf = vec![0u8; m.len()];
            assert!(r.mem.read((p * K + i) * SLOT as usize, &mut buf));
            assert!(buf == m, "peer {p} write {i} corrupted");
        }
    }

    // Both workers carried traffic, and nothing was dropped for want of
    // room in the hand-off.
    let stats = r.d.stats();
    assert_eq!(stats.len(), 2);
    for (w, s) in stats.iter().enumerate() {
        assert!(s.ses.requests > 0, "worker {w} saw no requests: {s:?}");
    }
    r.d.shutdown();
}
