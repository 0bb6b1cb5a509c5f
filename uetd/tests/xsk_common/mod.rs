//! Shared pieces of the AF_XDP tests.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use uet_lab::netns::NetNs;
use uet_wire::inet::EthernetAddress;
use uetd::io::NextHop;

/// A fixed neighbour table.
#[derive(Debug, Default)]
pub struct StaticHop {
    pub table: Mutex<HashMap<IpAddr, EthernetAddress>>,
    pub requests: AtomicU64,
}

impl StaticHop {
    pub fn with(entries: &[(IpAddr, EthernetAddress)]) -> Self {
        Self {
            table: Mutex::new(entries.iter().copied().collect()),
            requests: AtomicU64::new(0),
        }
    }
}

impl NextHop for StaticHop {
    fn lookup(&self, dst: IpAddr) -> Option<EthernetAddress> {
        self.table.lock().unwrap().get(&dst).copied()
    }
    fn request(&self, _dst: IpAddr) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }
}

/// The MAC of `ifname` in `ns`.
pub fn mac_of(ns: &NetNs, ifname: &str) -> EthernetAddress {
    let out = ns.ip(&["-j", "link", "show", ifname]).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = v[0]["address"].as_str().unwrap();
    let mut b = [0u8; 6];
    for (d, p) in b.iter_mut().zip(s.split(':')) {
        *d = u8::from_str_radix(p, 16).unwrap();
    }
    EthernetAddress(b)
}

/// Bounded retry: calls `f` until it returns true or `tries` run out.
pub fn until(tries: usize, mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..tries {
        if f() {
            return true;
        }
        std::thread::yield_now();
    }
    false
}
