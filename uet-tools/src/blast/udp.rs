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

/// Echoes every datagram arriving on `bind` back to its sender until
/// `stop` is set (checked every 10 ms when idle); calls `ready` with the
/// bound address (port 0 picks one) once it listens. Returns the
/// datagrams echoed. The far end of [`ping_pong`].
pub fn echo(
    bind: SocketAddr,
    stop: &AtomicBool,
    ready: impl FnOnce(SocketAddr),
) -> io::Result<u64> {
    let s = socket(bind)?;
    s.bind(&bind.into())?;
    let s = std::net::UdpSocket::from(s);
    s.set_read_timeout(Some(Duration::from_millis(10)))?;
    ready(s.local_addr()?);
    let mut buf = vec![0u8; 65_536];
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match s.recv_from(&mut buf) {
            Ok((len, from)) => {
                s.send_to(&buf[..len], from)?;
                n += 1;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// What a ping-pong measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RttReport {
    /// Round trips completed.
    pub samples: u64,
    /// Datagrams whose echo did not come back within the timeout.
    pub lost: u64,
    /// Round-trip time percentiles, µs: p50, p99.
    pub rtt_us: [f64; 2],
}

/// A UDP ping-pong against an [`echo`] at `dst`: one `size`-byte datagram
/// in flight at a time, each round trip (send to echo received) timed, for
/// `duration`. A datagram not echoed within 200 ms counts as lost and the
/// next one goes. Blocking syscalls on both ends, as a kernel-UDP
/// request/response application does.
pub fn ping_pong(
    src: SocketAddr,
    dst: SocketAddr,
    size: usize,
    duration: Duration,
) -> io::Result<RttReport> {
    let s = socket(src)?;
    s.bind(&src.into())?;
    let s = std::net::UdpSocket::from(s);
    s.connect(dst)?;
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut msg = vec![0x5au8; size.max(8)];
    let mut buf = vec![0u8; 65_536];
    // Nanoseconds, up to a minute (a longer one is recorded as a minute).
    let mut hist = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .map_err(|e| io::Error::other(e.to_string()))?;
    let mut lost = 0u64;
    let end = Instant::now() + duration;
    let mut seq = 0u64;
    while Instant::now() < end {
        seq += 1;
        msg[..8].copy_from_slice(&seq.to_le_bytes());
        let t = Instant::now();
        s.send(&msg)?;
        loop {
            match s.recv(&mut buf) {
                // An echo of an earlier, given-up datagram is not this one's.
                Ok(n) if n >= 8 && buf[..8] == seq.to_le_bytes() => {
                    let ns = t.elapsed().as_nanos();
                    hist.saturating_record(u64::try_from(ns).unwrap_or(u64::MAX));
                    break;
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    lost += 1;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(RttReport {
        samples: hist.len(),
        lost,
        rtt_us: [
            hist.value_at_quantile(0.5) as f64 / 1e3,
            hist.value_at_quantile(0.99) as f64 / 1e3,
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};
    use std::sync::Arc;

    #[test]
    fn ping_pong_times_round_trips_through_an_echo_on_loopback() {
        let lo = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let echo = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                echo(lo, &stop, |a| {
                    let _ = tx.send(a);
                })
            })
        };
        let at = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let r = ping_pong(lo, at, 64, Duration::from_millis(200)).unwrap();
        stop.store(true, Ordering::Relaxed);
        let echoed = echo.join().unwrap().unwrap();
        assert!(r.samples > 0, "{r:?}");
        assert_eq!(r.lost, 0, "{r:?}");
        // Every timed round trip was an echo; an echo of the last datagram
        // may have raced the deadline.
        assert!(echoed >= r.samples, "{echoed} echoed, {r:?}");
        // Two syscalls and a wake-up each way: never under a microsecond.
        assert!(1.0 < r.rtt_us[0] && r.rtt_us[0] <= r.rtt_us[1], "{r:?}");
    }
}
