//! The PDS engine over the simulated fabric, below SES: every packet of
//! many messages arrives exactly once and is acknowledged, whatever the
//! impairments.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::rc::Rc;

use uet_pds::{
    InitiatorKey, Pds, PdsConfig, PdsError, PktRef, Reply, RxMeta, RxRequest, SesHooks, Transmit,
};
use uet_tests::fabric::{Fabric, Impairments, LinkParams};
use uet_tests::frame_ops::UetFrameOps;
use uet_tests::host::{Engine, SimHost};
use uet_wire::encap::EncapConfig;
use uet_wire::pds::{NextHeader, ReliableMode};
use uet_wire::ses::SesRepr;
use uet_wire::time::{Duration, Instant};
use uet_wire::{JobId, TrafficClass};

#[derive(Default)]
struct Log {
    /// (token, frag) → times delivered, with a payload check.
    delivered: HashMap<(u64, u32), u32>,
    order: Vec<(u64, u32)>,
    corrupt: u32,
    acked: u32,
    failed: u32,
}

struct Up(Rc<RefCell<Log>>);

fn fill(token: u64, frag: u32, buf: &mut [u8]) {
    buf[..8].copy_from_slice(&token.to_be_bytes());
    buf[8..12].copy_from_slice(&frag.to_be_bytes());
    for (i, b) in buf[12..].iter_mut().enumerate() {
        *b = (token as usize ^ frag as usize ^ i) as u8;
    }
}

impl SesHooks for Up {
    fn write_request(&mut self, _: Instant, pkt: &PktRef, buf: &mut [u8]) -> NextHeader {
        fill(pkt.token, pkt.frag, buf);
        NextHeader::None
    }
    fn on_request(&mut self, _: Instant, rx: &RxRequest<'_>) -> Reply {
        let p = rx.payload;
        let token = u64::from_be_bytes(p[..8].try_into().unwrap());
        let frag = u32::from_be_bytes(p[8..12].try_into().unwrap());
        let mut want = vec![0u8; p.len()];
        fill(token, frag, &mut want);
        let mut log = self.0.borrow_mut();
        if want != p {
            log.corrupt += 1;
        }
        *log.delivered.entry((token, frag)).or_default() += 1;
        log.order.push((token, frag));
        Reply::None
    }
    fn on_acked(&mut self, _: Instant, _: PktRef) {
        self.0.borrow_mut().acked += 1;
    }
    fn on_response(&mut self, _: Instant, _: PktRef, _: &SesRepr, _: &[u8]) {}
    fn on_failed(&mut self, _: Instant, _: PktRef, _: PdsError) {
        self.0.borrow_mut().failed += 1;
    }
}

struct PdsEngine {
    pds: Pds,
    up: Up,
}

impl Engine for PdsEngine {
    fn handle_datagram(&mut self, now: Instant, meta: &RxMeta, bytes: &[u8]) {
        self.pds.handle_datagram(now, meta, bytes, &mut self.up);
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.pds.handle_timeout(now, &mut self.up);
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.pds.poll_transmit(now, buf, &mut self.up)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.pds.poll_timeout()
    }
}

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

/// Sends `msgs` messages of `pkts` packets of 4 KiB from A to B through one
/// switch whose links apply `impair`; returns the receiver's and sender's logs.
fn run(
    mode: ReliableMode,
    msgs: u64,
    pkts: u32,
    impair: Impairments,
    seed: u64,
) -> (Log, Log, u64) {
    let tx_log = Rc::new(RefCell::new(Log::default()));
    let rx_log = Rc::new(RefCell::new(Log::default()));
    let cfg = PdsConfig {
        rto_init: Duration::from_micros(500),
        max_rto_retx: 12,
        ..PdsConfig::default()
    };
    let mut a = PdsEngine {
        pds: Pds::new(cfg.clone(), seed),
        up: Up(tx_log.clone()),
    };
    let b = PdsEngine {
        pds: Pds::new(cfg, seed + 1),
        up: Up(rx_log.clone()),
    };
    let now = Instant::ZERO;
    let pdc = a
        .pds
        .open(
            now,
            InitiatorKey {
                job: JobId::from_masked(1),
                dst: B,
                tc: TrafficClass::from_masked(0),
                mode,
            },
        )
        .unwrap();
    for m in 0..msgs {
        let v: Vec<PktRef> = (0..pkts)
            .map(|f| PktRef {
                token: m,
                frag: f,
                len: 4096,
                last: f + 1 == pkts,
            })
            .collect();
        a.pds.enqueue(now, pdc, v).unwrap();
    }
    let mut link = LinkParams::new(100_000_000_000, Duration::from_micros(2), 1 << 20);
    link.impair = impair;
    let mut f = Fabric::new(UetFrameOps::default(), seed);
    let sw = f.add_switch();
    let enc = EncapConfig::default();
    let ha = f.add_host(
        Box::new(SimHost::new(a, A, enc)),
        A,
        sw,
        link.clone(),
        link.clone(),
    );
    f.add_host(Box::new(SimHost::new(b, B, enc)), B, sw, link.clone(), link);
    let total = u32::try_from(msgs).unwrap() * pkts;
    let log = tx_log.clone();
    let done = f.run_while(Instant::from_nanos(120_000_000_000), |_| {
        let l = log.borrow();
        l.acked + l.failed >= total
    });
    assert!(done, "did not finish: {:?}", f.host_mut(ha).is_some());
    let stats = f.total_stats();
    drop(f);
    let (t, r) = (
        std::mem::take(&mut *tx_log.borrow_mut()),
        std::mem::take(&mut *rx_log.borrow_mut()),
    );
    (r, t, stats.impaired)
}

fn check(mode: ReliableMode, impair: Impairments) -> u64 {
    let (rx, tx, impaired) = run(mode, 40, 64, impair, 7);
    if mode == ReliableMode::Rod {
        let mut sorted = rx.order.clone();
        sorted.sort_unstable();
        assert_eq!(rx.order, sorted, "ROD delivers in send order");
    }
    assert_eq!(tx.failed, 0);
    assert_eq!(tx.acked, 40 * 64, "every packet acknowledged exactly once");
    assert_eq!(rx.delivered.len(), 40 * 64, "every packet delivered");
    assert!(
        rx.delivered.values().all(|n| *n == 1),
        "no packet delivered twice"
    );
    assert_eq!(rx.corrupt, 0, "corruption never reaches the upper layer");
    impaired
}

#[test]
fn clean_link() {
    assert_eq!(check(ReliableMode::Rud, Impairments::default()), 0);
}

#[test]
fn one_percent_loss() {
    let imp = Impairments {
        loss: 0.01,
        ..Impairments::default()
    };
    assert!(check(ReliableMode::Rud, imp) > 0);
}

#[test]
fn ten_percent_loss_reorder_duplicate_corrupt() {
    let imp = Impairments {
        loss: 0.10,
        reorder: 0.05,
        reorder_delay: Duration::from_micros(30),
        duplicate: 0.02,
        corrupt: 0.01,
        ..Impairments::default()
    };
    assert!(check(ReliableMode::Rud, imp) > 0);
}

#[test]
fn rod_under_loss_and_reordering() {
    let imp = Impairments {
        loss: 0.01,
        reorder: 0.02,
        reorder_delay: Duration::from_micros(30),
        ..Impairments::default()
    };
    check(ReliableMode::Rod, imp);
}

/// RUD sprays over every spine of a leaf–spine; ROD keeps to one path.
#[test]
fn leaf_spine_spraying() {
    use uet_tests::topology::{host_addr, leaf_spine};
    for (mode, min_paths, max_paths) in [(ReliableMode::Rud, 4, 4), (ReliableMode::Rod, 1, 1)] {
        let tx_log = Rc::new(RefCell::new(Log::default()));
        let rx_log = Rc::new(RefCell::new(Log::default()));
        let (a_addr, b_addr) = (host_addr(0), host_addr(1));
        let mut a = PdsEngine {
            pds: Pds::new(PdsConfig::default(), 1),
            up: Up(tx_log.clone()),
        };
        let b = PdsEngine {
            pds: Pds::new(PdsConfig::default(), 2),
            up: Up(rx_log.clone()),
        };
        let pdc = a
            .pds
            .open(
                Instant::ZERO,
                InitiatorKey {
                    job: JobId::from_masked(1),
                    dst: b_addr,
                    tc: TrafficClass::from_masked(0),
                    mode,
                },
            )
            .unwrap();
        let v: Vec<PktRef> = (0..512)
            .map(|f| PktRef {
                token: 1,
                frag: f,
                len: 4096,
                last: f == 511,
            })
            .collect();
        a.pds.enqueue(Instant::ZERO, pdc, v).unwrap();
        let enc = EncapConfig::default();
        let mut f = Fabric::new(UetFrameOps::default(), 3);
        let link = LinkParams::new(100_000_000_000, Duration::from_micros(1), 1 << 20);
        let built = leaf_spine(
            &mut f,
            vec![
                Box::new(SimHost::new(a, a_addr, enc)),
                Box::new(SimHost::new(b, b_addr, enc)),
            ],
            2,
            4,
            &link,
            &link,
        );
        let log = tx_log.clone();
        assert!(
            f.run_while(Instant::from_nanos(10_000_000_000), |_| log.borrow().acked
                == 512)
        );
        assert_eq!(rx_log.borrow().delivered.len(), 512);
        // Leaf 0's four uplinks are the first four.
        let used = built.uplinks[..4]
            .iter()
            .filter(|p| f.port_stats(**p).tx_packets > 0)
            .count();
        assert!(
            (min_paths..=max_paths).contains(&used),
            "{mode:?} used {used} spines"
        );
    }
}
