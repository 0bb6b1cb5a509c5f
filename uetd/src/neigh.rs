//! Next-hop MAC resolution for the AF_XDP backend, from the kernel's route
//! and neighbour tables over rtnetlink (`design.md` §1, issue 5):
//!
//! - [`Neighbours::lookup`] is the per-packet path: one lock-free load of an
//!   immutable map (`ArcSwap`), no syscall.
//! - [`Neighbours::request`] queues a destination; the resolver thread asks
//!   `RTM_GETROUTE` for its next hop (gateway or on-link), `RTM_GETNEIGH` for
//!   that hop's MAC, and, when the kernel has no usable entry, sends one
//!   kernel UDP datagram to the hop (discard port 9), which makes the kernel
//!   resolve it (ARP / ND); it asks again until the entry is there.
//! - Known entries are re-read every `refresh` (1 s), so a changed or
//!   deleted neighbour is noticed (a deleted one is dropped from the map and
//!   re-resolved on the next miss).

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use crossbeam_queue::SegQueue;
use rustc_hash::FxHashMap;
use uet_wire::inet::EthernetAddress;

use crate::io::NextHop;
use crate::netlink::{Msg, NLM_F_REQUEST, Netlink, attrs};

const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const RTM_NEWNEIGH: u16 = 28;
const RTM_GETNEIGH: u16 = 30;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
/// NUD states with a usable link-layer address (<linux/neighbour.h>):
/// REACHABLE, STALE, DELAY, PROBE, NOARP, PERMANENT.
const NUD_USABLE: u16 = 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80;
const NTF_PROXY: u8 = 0x08;

/// The resolver's state, shared with the datapath.
#[derive(Debug)]
pub struct Neighbours {
    map: ArcSwap<FxHashMap<IpAddr, EthernetAddress>>,
    pending: SegQueue<IpAddr>,
    stop: AtomicBool,
    thread: std::sync::Mutex<Option<JoinHandle<()>>>,
    waker: std::sync::OnceLock<std::thread::Thread>,
}

/// Where a destination's frames go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The next hop (the gateway, or the destination itself on link).
    pub hop: IpAddr,
    /// Outgoing interface index.
    pub oif: u32,
}

impl Neighbours {
    /// Starts the resolver thread (in the caller's network namespace).
    pub fn start() -> anyhow::Result<Arc<Self>> {
        let me = Arc::new(Self {
            map: ArcSwap::from_pointee(FxHashMap::default()),
            pending: SegQueue::new(),
            stop: AtomicBool::new(false),
            thread: std::sync::Mutex::new(None),
            waker: std::sync::OnceLock::new(),
        });
        let nl = Netlink::open()?;
        let ns = crate::sys::ns::current_net_ns()?;
        let weak = Arc::downgrade(&me);
        let t = std::thread::Builder::new()
            .name("uet-neigh".into())
            .spawn(move || {
                // Follow the namespace of the thread that started us.
                let _ = crate::sys::ns::enter_net_ns(&ns);
                resolver(&nl, &weak, Duration::from_secs(1));
            })?;
        let _ = me.waker.set(t.thread().clone());
        if let Ok(mut g) = me.thread.lock() {
            *g = Some(t);
        }
        Ok(me)
    }

    /// Stops the resolver thread.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(w) = self.waker.get() {
            w.unpark();
        }
        if let Some(t) = self.thread.lock().ok().and_then(|mut g| g.take()) {
            let _ = t.join();
        }
    }

    fn set(&self, dst: IpAddr, mac: Option<EthernetAddress>) {
        let cur = self.map.load();
        if cur.get(&dst).copied() == mac {
            return;
        }
        let mut next = FxHashMap::clone(&cur);
        match mac {
            Some(m) => next.insert(dst, m),
            None => next.remove(&dst),
        };
        self.map.store(Arc::new(next));
    }
}

impl NextHop for Neighbours {
    fn lookup(&self, dst: IpAddr) -> Option<EthernetAddress> {
        self.map.load().get(&dst).copied()
    }

    fn request(&self, dst: IpAddr) {
        self.pending.push(dst);
        if let Some(w) = self.waker.get() {
            w.unpark();
        }
    }

    fn learn(&self, dst: IpAddr, mac: EthernetAddress) {
        // Not handed to the resolver: the kernel never saw the frame (AF_XDP
        // took it), so its table may lack the entry and the resolver would
        // drop ours until ARP answered.
        if self.lookup(dst).is_none() {
            self.set(dst, Some(mac));
        }
    }
}

fn resolver(nl: &Netlink, me: &std::sync::Weak<Neighbours>, refresh: Duration) {
    let mut wanted: HashSet<IpAddr> = HashSet::new();
    let mut unresolved: HashSet<IpAddr> = HashSet::new();
    let mut last_refresh = Instant::now();
    let poke4 = UdpSocket::bind("0.0.0.0:0").ok();
    let poke6 = UdpSocket::bind("[::]:0").ok();
    loop {
        let Some(me) = me.upgrade() else { return };
        if me.stop.load(Ordering::Acquire) {
            return;
        }
        while let Some(d) = me.pending.pop() {
            if wanted.insert(d) || me.lookup(d).is_none() {
                unresolved.insert(d);
            }
        }
        let due = last_refresh.elapsed() >= refresh;
        if due {
            last_refresh = Instant::now();
        }
        let todo: Vec<IpAddr> = if due {
            wanted.iter().copied().collect()
        } else {
            unresolved.iter().copied().collect()
        };
        for dst in todo {
            match resolve(nl, dst) {
                Ok(Some(mac)) => {
                    me.set(dst, Some(mac));
                    unresolved.remove(&dst);
                }
                Ok(None) | Err(_) => {
                    me.set(dst, None);
                    unresolved.insert(dst);
                    // Make the kernel resolve the hop: any datagram to it
                    // does (it is discarded by the peer).
                    if let Ok(Some(r)) = route(nl, dst) {
                        let s = if r.hop.is_ipv4() { &poke4 } else { &poke6 };
                        if let Some(s) = s {
                            let _ = s.send_to(&[], SocketAddr::new(r.hop, 9));
                        }
                    }
                }
            }
        }
        drop(me);
        // Pending work is checked every millisecond while something is
        // unresolved, every 20 ms otherwise.
        std::thread::park_timeout(if unresolved.is_empty() {
            Duration::from_millis(20)
        } else {
            Duration::from_millis(1)
        });
    }
}

/// `RTM_GETROUTE` for `dst`: the next hop and outgoing interface.
pub(crate) fn route(nl: &Netlink, dst: IpAddr) -> std::io::Result<Option<Route>> {
    let (family, bytes, plen) = addr_bytes(dst);
    // struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope,
    // type, flags (u32).
    let mut hdr = [0u8; 12];
    hdr[0] = family;
    hdr[1] = plen;
    let mut m = Msg::new(RTM_GETROUTE, NLM_F_REQUEST, &hdr);
    m.attr(RTA_DST, &bytes);
    let mut found = None;
    nl.transact(&m.finish(), |ty, payload| {
        if ty == RTM_NEWROUTE && payload.len() >= 12 {
            let mut hop = dst;
            let mut oif = 0;
            for (t, p) in attrs(&payload[12..]) {
                match t {
                    RTA_GATEWAY => {
                        if let Some(a) = parse_addr(p) {
                            hop = a;
                        }
                    }
                    RTA_OIF if p.len() >= 4 => {
                        oif = u32::from_ne_bytes([p[0], p[1], p[2], p[3]]);
                    }
                    _ => {}
                }
            }
            found = Some(Route { hop, oif });
        }
        Ok(())
    })?;
    Ok(found)
}

/// The MAC of `dst`'s next hop, if the kernel has a usable entry.
pub(crate) fn resolve(nl: &Netlink, dst: IpAddr) -> std::io::Result<Option<EthernetAddress>> {
    let Some(r) = route(nl, dst)? else {
        return Ok(None);
    };
    neighbour(nl, r.hop, r.oif)
}

/// `RTM_GETNEIGH` for `hop` on interface `oif`.
pub(crate) fn neighbour(
    nl: &Netlink,
    hop: IpAddr,
    oif: u32,
) -> std::io::Result<Option<EthernetAddress>> {
    let (family, bytes, _) = addr_bytes(hop);
    // struct ndmsg: family, pad1, pad2, ifindex (i32), state (u16),
    // flags (u8), type (u8).
    let mut hdr = [0u8; 12];
    hdr[0] = family;
    hdr[4..8].copy_from_slice(&oif.to_ne_bytes());
    let mut m = Msg::new(RTM_GETNEIGH, NLM_F_REQUEST, &hdr);
    m.attr(NDA_DST, &bytes);
    let mut found = None;
    let r = nl.transact(&m.finish(), |ty, payload| {
        if ty == RTM_NEWNEIGH && payload.len() >= 12 {
            let state = u16::from_ne_bytes([payload[8], payload[9]]);
            let flags = payload[10];
            if state & NUD_USABLE == 0 || flags & NTF_PROXY != 0 {
                return Ok(());
            }
            for (t, p) in attrs(&payload[12..]) {
                if t == NDA_LLADDR && p.len() == 6 {
                    let mut mac = [0u8; 6];
                    mac.copy_from_slice(p);
                    found = Some(EthernetAddress(mac));
                }
            }
        }
        Ok(())
    });
    match r {
        Ok(()) => Ok(found),
        // No entry at all: ENOENT.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

fn addr_bytes(a: IpAddr) -> (u8, Vec<u8>, u8) {
    match a {
        IpAddr::V4(v4) => (libc::AF_INET as u8, v4.octets().to_vec(), 32),
        IpAddr::V6(v6) => (libc::AF_INET6 as u8, v6.octets().to_vec(), 128),
    }
}

fn parse_addr(p: &[u8]) -> Option<IpAddr> {
    match p.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(p).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(p).ok()?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netns::{NetNs, veth_pair};

    fn mac_of(ns: &NetNs, ifname: &str) -> EthernetAddress {
        let out = ns.ip(&["-o", "link", "show", ifname]).unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let at = text.find("link/ether ").unwrap() + "link/ether ".len();
        let mut mac = [0u8; 6];
        for (i, h) in text[at..at + 17].split(':').enumerate() {
            mac[i] = u8::from_str_radix(h, 16).unwrap();
        }
        EthernetAddress(mac)
    }

    #[test]
    fn resolves_an_on_link_peer_the_kernel_has_not_seen_and_ignores_a_missing_one() {
        let a = NetNs::create("uet-n").unwrap();
        let b = NetNs::create("uet-n").unwrap();
        veth_pair(&a, "v0", "10.83.0.1/24", &b, "v1", "10.83.0.2/24", 1500).unwrap();
        let want = mac_of(&b, "v1");
        let got = a
            .run(move || {
                let n = Neighbours::start().unwrap();
                let peer: IpAddr = "10.83.0.2".parse().unwrap();
                let ghost: IpAddr = "10.83.0.99".parse().unwrap();
                assert_eq!(n.lookup(peer), None, "nothing before a request");
                n.request(peer);
                n.request(ghost);
                let deadline = Instant::now() + Duration::from_secs(10);
                let mut got = None;
                while got.is_none() && Instant::now() < deadline {
                    got = n.lookup(peer);
                    std::thread::yield_now();
                }
                assert_eq!(n.lookup(ghost), None);
                n.stop();
                got
            })
            .unwrap();
        assert_eq!(got, Some(want));
    }
}
