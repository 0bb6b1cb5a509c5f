//! The kernel-UDP ceiling: a blaster and a sink of plain UDP datagrams of
//! one size over the same batched syscalls the UDP backend uses
//! (`sendmmsg`/`recvmmsg`), so the UDP backend's throughput can be shown
//! beside what the kernel's UDP path alone reaches on the same link in the
//! same run (`docs/architecture.md` §7).

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};

use uetd::sys::eventfd::poll_in;
use uetd::sys::udp::{MsgBatch, force_buffers};

/// What a blaster or sink measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UdpReport {
    /// Datagrams sent or received.
    pub packets: u64,
    /// Their UDP payload bytes.
    pub bytes: u64,
    /// From the first to the last datagram.
    pub elapsed: Duration,
}

impl UdpReport {
    /// Payload goodput in Gb/s.
    #[must_use]
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.elapsed.as_secs_f64().max(1e-9) / 1e9
    }
}

fn socket(addr: SocketAddr) -> io::Result<Socket> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    if !force_buffers(s.as_fd(), 4 << 20) {
        let _ = s.set_recv_buffer_size(4 << 20);
        let _ = s.set_send_buffer_size(4 << 20);
    }
    Ok(s)
}

/// Sends `size`-byte datagrams from `src` to `dst` in batches of 64 until
/// `stop` is set or `count` were sent.
pub fn blast(
    src: SocketAddr,
    dst: SocketAddr,
    size: usize,
    count: Option<u64>,
    stop: &AtomicBool,
) -> io::Result<UdpReport> {
    let s = socket(src)?;
    s.bind(&src.into())?;
    let mut batch = MsgBatch::new(64, size);
    for i in 0..batch.capacity() {
        batch.buf_mut(i).fill(0x5a);
        batch.set_outgoing(i, size, dst, 0);
    }
    let mut r = UdpReport::default();
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) && count.is_none_or(|c| r.packets < c) {
        let want = count.map_or(64, |c| (c - r.packets).min(64) as usize);
        // Blocking sends pace the blaster to what the kernel takes.
        let n = batch.send_blocking(s.as_fd(), 0..want)?;
        r.packets += n as u64;
        r.bytes += (n * size) as u64;
    }
    r.elapsed = start.elapsed();
    Ok(r)
}

/// Receives on `bind` until `count` datagrams arrived, or `idle` passed
/// without one after the first, or `stop` is set.
pub fn sink(
    bind: SocketAddr,
    count: Option<u64>,
    idle: Duration,
    stop: &AtomicBool,
    ready: &AtomicBool,
) -> io::Result<UdpReport> {
    let s = socket(bind)?;
    s.bind(&bind.into())?;
    ready.store(true, Ordering::Release);
    let mut batch = MsgBatch::new(64, 65_536);
    let mut r = UdpReport::default();
    let mut first = None;
    let mut last = Instant::now();
    while !stop.load(Ordering::Relaxed) && count.is_none_or(|c| r.packets < c) {
        let n = batch.recv(s.as_fd(), 64)?;
        if n == 0 {
            if first.is_some() && last.elapsed() >= idle {
                break;
            }
            poll_in(&[s.as_fd()], Some(Duration::from_millis(10)))?;
            continue;
        }
        let now = Instant::now();
        first.get_or_insert(now);
        last = now;
        for i in 0..n {
            r.bytes += batch.received(i).0.len() as u64;
        }
        r.packets += n as u64;
    }
    r.elapsed = first.map_or(Duration::ZERO, |f| last.duration_since(f));
    Ok(r)
}
