//! A daemon's state for destinations nobody answers goes when nothing
//! refers to it: writes to 2,000 unreachable on-link addresses all fail,
//! their CCCs go with their PDCs, the resolver forgets them and its thread
//! idles. A binary of its own: the 2,000 addresses fill the kernel's
//! neighbour table, which all namespaces share (1,024 entries by default),
//! and would starve other tests' ARP if they ran beside it.

mod common;

use std::time::{Duration, Instant};

use common::{Pair, Uetd, connect};
use uet_api::{Client, Event, RemoteRegion, Status};

/// CPU seconds a thread of `pid` named `name` has used (`utime + stime`).
fn thread_cpu(pid: u32, name: &str) -> Option<f64> {
    let tick = 100.0; // USER_HZ
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let dir = t.ok()?.path();
        if std::fs::read_to_string(dir.join("comm")).ok()?.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        let f: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let (u, s): (f64, f64) = (f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?);
        return Some((u + s) / tick);
    }
    None
}

/// Writes to 2,000 addresses on the link that nobody answers: every write
/// fails, and what the daemon kept for them goes — the CCCs with their
/// PDCs, the resolver's destinations once unused — leaving its resolver
/// thread idle.
#[test]
fn state_for_unreachable_destinations_goes_and_the_resolver_idles() {
    let pair = Pair::new(124, 1500);
    // On link, so each address is a next hop of its own that never answers
    // ARP.
    pair.a
        .ip(&["route", "add", "10.125.0.0/16", "dev", "v0"])
        .unwrap();
    let sock = Uetd::socket_of(&pair.a);
    let d = Uetd::spawn(
        &pair.a,
        &[
            "--interface",
            "v0",
            "--backend",
            "xdp",
            "--rto-init-us",
            "2000",
        ],
    );
    let mut c = connect(&sock);
    let src = c.create_region(4096).unwrap();
    let local = c.register_local(&src).unwrap();
    let (n, batch) = (2000u32, 500u32);
    let mut failed = 0;
    for b in 0..n / batch {
        for i in b * batch..(b + 1) * batch {
            let dst = RemoteRegion {
                fep: format!("10.125.{}.{}", 1 + i / 250, 1 + i % 250)
                    .parse()
                    .unwrap(),
                job: 1,
                pid: 0,
                ri: 1,
                generation: 0,
                key: 1,
            };
            c.write(local.at(0), dst.at(0), 64, None).unwrap();
        }
        for _ in 0..batch {
            match c.wait_event(Some(Duration::from_secs(60))).unwrap() {
                Event::Completion(x) => failed += u32::from(x.status != Status::Ok),
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(failed, n, "nobody answered");
    let pid = d.child.id();
    let stats = |c: &mut Client| -> serde_json::Value {
        serde_json::from_str(&c.stats().unwrap()).unwrap()
    };
    let cccs = |v: &serde_json::Value| -> usize {
        v["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["ccc"].as_array().map_or(0, Vec::len))
            .sum()
    };
    // The CCCs went with the last PDC to each address; the resolver forgets
    // an address unused for 10 s.
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let v = stats(&mut c);
        if cccs(&v) == 0 && v["neigh"]["destinations"] == 0 {
            eprintln!("drained: {}", v["neigh"]);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} CCCs, resolver {}",
            cccs(&v),
            v["neigh"]
        );
        std::thread::park_timeout(Duration::from_millis(200));
    }
    let before = thread_cpu(pid, "uet-neigh").expect("the resolver thread");
    let t = Instant::now();
    let mut next = Instant::now() + Duration::from_secs(2);
    while Instant::now() < next {
        std::thread::park_timeout(next - Instant::now());
        next = next.max(Instant::now());
    }
    let used = thread_cpu(pid, "uet-neigh").unwrap() - before;
    let share = used / t.elapsed().as_secs_f64();
    eprintln!("resolver CPU after draining: {:.1} %", share * 100.0);
    assert!(share < 0.02, "the resolver is busy: {:.1} %", share * 100.0);
}
