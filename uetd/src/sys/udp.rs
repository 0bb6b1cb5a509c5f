//! Batched UDP I/O with per-datagram TOS: `recvmmsg` with IP_TOS /
//! IPV6_TCLASS control messages (ECN and DSCP of what arrived) and
//! `sendmmsg` with the same control message per datagram (DSCP and ECN of
//! what leaves). One syscall moves a batch (`docs/architecture.md` §8 rule 4).
//! With [`enable_rx_timestamps`] each received datagram also carries the
//! kernel's receive timestamp (SCM_TIMESTAMPNS).

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, BorrowedFd};

use super::{Error, Result};

/// Room for the control messages of one datagram: IP_TOS or IPV6_TCLASS
/// (16 bytes), UDP_GRO (16), SCM_TIMESTAMPNS (32) and SO_RXQ_OVFL (16),
/// with margin.
const CMSG_SPACE: usize = 128;

/// Preallocated buffers and headers for one batch of datagrams.
pub struct MsgBatch {
    bufs: Vec<u8>,
    size: usize,
    lens: Vec<usize>,
    addrs: Vec<libc::sockaddr_storage>,
    tos: Vec<u8>,
    /// Received: the segment size of a datagram the kernel coalesced
    /// (UDP_GRO control message), 0 for a single datagram.
    seg: Vec<u16>,
    /// Received: the kernel's receive time (CLOCK_REALTIME ns; 0: none).
    stamp: Vec<u64>,
    /// The socket's drop count (SO_RXQ_OVFL) with the last datagram of
    /// the last receive that carried one.
    rxq_drops: Option<u32>,
    iov: Vec<libc::iovec>,
    hdr: Vec<libc::mmsghdr>,
    cmsg: Vec<[u64; CMSG_SPACE / 8]>,
}

impl std::fmt::Debug for MsgBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MsgBatch")
            .field("count", &self.lens.len())
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

// SAFETY: the raw pointers inside iovec/mmsghdr only ever point into this
// struct's own vectors and are rebuilt before each syscall.
unsafe impl Send for MsgBatch {}

/// `len` zero bytes whose pages are already in memory. `vec![0; len]`
/// comes from a zeroing allocation whose fresh pages fault on first
/// touch: for the receive batch (up to 64 KiB per slot with GRO, megabytes
/// in all) that was the first receive of the first transfer, where a page
/// fault and clearing per 4 KiB (on a VM, with the host's own fault
/// behind it) held the first ACK back 6–20 ms, past the sender's first
/// RTO. They are taken now, when the socket is made.
fn prefaulted(len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    // SAFETY: `v` is ours alone, `len` bytes long and all zero.
    unsafe { super::mem::populate_zeroed(v.as_mut_ptr(), len) };
    v
}

impl MsgBatch {
    /// `count` datagrams of up to `size` bytes each.
    pub fn new(count: usize, size: usize) -> Self {
        // SAFETY: all-zero is a valid sockaddr_storage, iovec and mmsghdr
        // (null pointers, zero lengths).
        let (ss, iov, hdr) = unsafe { (zeroed(), zeroed(), zeroed()) };
        Self {
            bufs: prefaulted(count * size),
            size,
            lens: vec![0; count],
            addrs: vec![ss; count],
            tos: vec![0; count],
            seg: vec![0; count],
            stamp: vec![0; count],
            rxq_drops: None,
            iov: vec![iov; count],
            hdr: vec![hdr; count],
            cmsg: vec![[0; CMSG_SPACE / 8]; count],
        }
    }

    /// How many datagrams it holds.
    pub fn capacity(&self) -> usize {
        self.lens.len()
    }

    /// Datagram buffer `i` (whole slot).
    pub fn buf_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i * self.size..(i + 1) * self.size]
    }

    /// Received datagram `i`: bytes, source, TOS byte.
    pub fn received(&self, i: usize) -> (&[u8], Option<SocketAddr>, u8) {
        let b = &self.bufs[i * self.size..i * self.size + self.lens[i]];
        (b, from_storage(&self.addrs[i]), self.tos[i])
    }

    /// Received buffer `i`'s segment size: with UDP_GRO on, the kernel may
    /// hand over several datagrams of one flow back to back in one buffer,
    /// each this long but the last (0: one datagram).
    pub fn segment(&self, i: usize) -> usize {
        usize::from(self.seg[i])
    }

    /// When the kernel received buffer `i` (with [`enable_rx_timestamps`]
    /// on): CLOCK_REALTIME nanoseconds, the clock of socket timestamps.
    pub fn stamp_realtime_ns(&self, i: usize) -> Option<u64> {
        Some(self.stamp[i]).filter(|&t| t != 0)
    }

    /// How many datagrams the kernel has dropped at the receiving socket
    /// so far because its buffer was full, as of the last datagram
    /// received (with [`enable_rxq_overflow`] on; a 32-bit count that
    /// wraps). `None` until a datagram brought the count.
    pub fn rxq_drops(&self) -> Option<u32> {
        self.rxq_drops
    }

    /// Received datagram `i`'s bytes, to change in place (until the next
    /// receive).
    pub fn received_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i * self.size..i * self.size + self.lens[i]]
    }

    /// Sets outgoing datagram `i`: its length (bytes already in `buf_mut`),
    /// destination and TOS byte.
    pub fn set_outgoing(&mut self, i: usize, len: usize, dst: SocketAddr, tos: u8) {
        self.lens[i] = len.min(self.size);
        self.addrs[i] = to_storage(dst);
        self.tos[i] = tos;
    }

    fn prepare(&mut self, range: std::ops::Range<usize>, recv: bool) {
        for i in range {
            let base = i * self.size;
            self.iov[i] = libc::iovec {
                // SAFETY (pointer arithmetic): base < bufs.len().
                iov_base: self.bufs[base..].as_mut_ptr().cast(),
                iov_len: if recv { self.size } else { self.lens[i] },
            };
            self.hdr[i].msg_len = 0;
            let h = &mut self.hdr[i].msg_hdr;
            h.msg_name = (&raw mut self.addrs[i]).cast();
            h.msg_namelen = if recv {
                size_of::<libc::sockaddr_storage>() as libc::socklen_t
            } else {
                match self.addrs[i].ss_family as i32 {
                    libc::AF_INET => size_of::<libc::sockaddr_in>() as libc::socklen_t,
                    _ => size_of::<libc::sockaddr_in6>() as libc::socklen_t,
                }
            };
            h.msg_iov = &raw mut self.iov[i];
            h.msg_iovlen = 1;
            h.msg_control = self.cmsg[i].as_mut_ptr().cast();
            h.msg_controllen = CMSG_SPACE as _;
            h.msg_flags = 0;
            if !recv {
                let v6 = self.addrs[i].ss_family as i32 == libc::AF_INET6;
                let (level, ty) = if v6 {
                    (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
                } else {
                    (libc::IPPROTO_IP, libc::IP_TOS)
                };
                let val: libc::c_int = self.tos[i].into();
                // SAFETY: msg_control points at CMSG_SPACE (128) aligned
                // bytes, more than CMSG_SPACE(sizeof(int)); the first
                // header is inside it.
                unsafe {
                    let space = libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) as usize;
                    h.msg_controllen = space as _;
                    let c = libc::CMSG_FIRSTHDR(h);
                    (*c).cmsg_level = level;
                    (*c).cmsg_type = ty;
                    (*c).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as _;
                    std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), val);
                }
            }
        }
    }

    /// Receives up to `max` datagrams without blocking; 0 when none.
    pub fn recv(&mut self, fd: BorrowedFd<'_>, max: usize) -> Result<usize> {
        let k = max.min(self.capacity());
        if k == 0 {
            return Ok(0);
        }
        self.prepare(0..k, true);
        // SAFETY: hdr[..k] are initialised above and point into our own
        // buffers, which outlive the call.
        let n = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                self.hdr.as_mut_ptr(),
                k as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        let Some(n) = nonblocking(n as isize, "recvmmsg")? else {
            return Ok(0);
        };
        for i in 0..n {
            self.lens[i] = self.hdr[i].msg_len as usize;
            self.tos[i] = 0;
            self.seg[i] = 0;
            self.stamp[i] = 0;
            let h = &self.hdr[i].msg_hdr;
            // SAFETY: the kernel filled msg_control/msg_controllen; the
            // CMSG_* macros walk within msg_controllen.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(h);
                while !c.is_null() {
                    let lvl = (*c).cmsg_level;
                    let ty = (*c).cmsg_type;
                    if (lvl == libc::IPPROTO_IP && ty == libc::IP_TOS)
                        || (lvl == libc::IPPROTO_IPV6 && ty == libc::IPV6_TCLASS)
                    {
                        let data_len = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                        self.tos[i] = if data_len >= size_of::<libc::c_int>() {
                            std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>()) as u8
                        } else {
                            *libc::CMSG_DATA(c)
                        };
                    } else if lvl == libc::SOL_UDP && ty == UDP_GRO {
                        let v = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                        self.seg[i] = u16::try_from(v).unwrap_or(0);
                    } else if lvl == libc::SOL_SOCKET && ty == libc::SO_RXQ_OVFL {
                        self.rxq_drops =
                            Some(std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<u32>()));
                    } else if lvl == libc::SOL_SOCKET && ty == libc::SCM_TIMESTAMPNS {
                        let ts =
                            std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                        self.stamp[i] = u64::try_from(ts.tv_sec)
                            .unwrap_or(0)
                            .saturating_mul(1_000_000_000)
                            .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0));
                    }
                    c = libc::CMSG_NXTHDR(h, c);
                }
            }
        }
        Ok(n)
    }

    /// Sends datagrams `range` on a blocking `fd`, waiting for buffer
    /// space (the ceiling blaster paces itself this way).
    pub fn send_blocking(
        &mut self,
        fd: BorrowedFd<'_>,
        range: std::ops::Range<usize>,
    ) -> Result<usize> {
        if range.is_empty() {
            return Ok(0);
        }
        let (start, k) = (range.start, range.len());
        self.prepare(range, false);
        // SAFETY: hdr[start..start + k] are initialised above and point into
        // our own buffers, which outlive the call.
        let n =
            unsafe { libc::sendmmsg(fd.as_raw_fd(), self.hdr[start..].as_mut_ptr(), k as u32, 0) };
        if n < 0 {
            let e = Error::last("sendmmsg");
            return match e.kind() {
                io::ErrorKind::Interrupted | io::ErrorKind::ConnectionRefused => Ok(0),
                _ => Err(e),
            };
        }
        Ok(n as usize)
    }

    /// Sends datagrams `range` (set with `set_outgoing`; one destination
    /// and TOS, every one `seg` bytes long but the last, which may be
    /// shorter) as one UDP GSO send: one `sendmsg` whose iovecs are the
    /// datagrams and whose UDP_SEGMENT control message tells the kernel
    /// (or the NIC) to cut them apart again, so the stack runs once for
    /// the run instead of once per datagram. Returns how many datagrams
    /// the kernel took: all or none. An error means the socket or route
    /// cannot segment (no checksum offload on the device, zero checksums
    /// asked): the caller stops asking.
    pub fn send_gso(
        &mut self,
        fd: BorrowedFd<'_>,
        range: std::ops::Range<usize>,
        seg: u16,
    ) -> Result<usize> {
        if range.is_empty() {
            return Ok(0);
        }
        let (start, k) = (range.start, range.len());
        self.prepare(range, false);
        let h = &mut self.hdr[start].msg_hdr;
        h.msg_iovlen = k as _;
        // SAFETY: msg_control points at CMSG_SPACE (128) aligned bytes;
        // prepare wrote the TOS header first and set msg_controllen to its
        // space; the UDP_SEGMENT header follows it and both fit in 64.
        unsafe {
            // msg_controllen is a size_t in glibc, a socklen_t in musl.
            #[allow(clippy::unnecessary_cast)]
            let tos_space = h.msg_controllen as usize;
            let seg_space = libc::CMSG_SPACE(size_of::<u16>() as u32) as usize;
            debug_assert!(tos_space + seg_space <= CMSG_SPACE);
            h.msg_controllen = (tos_space + seg_space) as _;
            // The second header starts one aligned TOS header in (what
            // CMSG_NXTHDR computes, without reading what lies there).
            let c = libc::CMSG_FIRSTHDR(h)
                .cast::<u8>()
                .add(tos_space)
                .cast::<libc::cmsghdr>();
            (*c).cmsg_level = libc::SOL_UDP;
            (*c).cmsg_type = UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg);
        }
        // SAFETY: hdr[start] is initialised above; its iovecs are
        // iov[start..start + k], contiguous and pointing into our buffers,
        // which outlive the call.
        let n = unsafe {
            libc::sendmsg(
                fd.as_raw_fd(),
                &raw const self.hdr[start].msg_hdr,
                libc::MSG_DONTWAIT,
            )
        };
        Ok(nonblocking(n, "sendmsg(UDP_SEGMENT)")?.map_or(0, |_| k))
    }

    /// Sends datagrams `range` (set with `set_outgoing`) on `fd` without
    /// blocking; returns how many the kernel took (fewer when its buffer is
    /// full).
    pub fn send(&mut self, fd: BorrowedFd<'_>, range: std::ops::Range<usize>) -> Result<usize> {
        if range.is_empty() {
            return Ok(0);
        }
        let (start, k) = (range.start, range.len());
        self.prepare(range, false);
        // SAFETY: hdr[start..start + k] are initialised above and point into
        // our own buffers, which outlive the call.
        let n = unsafe {
            libc::sendmmsg(
                fd.as_raw_fd(),
                self.hdr[start..].as_mut_ptr(),
                k as u32,
                libc::MSG_DONTWAIT,
            )
        };
        Ok(nonblocking(n as isize, "sendmmsg")?.unwrap_or(0))
    }
}

/// The result `rc` of a non-blocking `call`: `None` when it would have
/// blocked or a signal came first (nothing moved, try again later), the
/// error otherwise.
fn nonblocking(rc: isize, call: &'static str) -> Result<Option<usize>> {
    if rc >= 0 {
        return Ok(Some(rc as usize));
    }
    let e = Error::last(call);
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
        _ => Err(e),
    }
}

fn to_storage(a: SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: all-zero is a valid sockaddr_storage; sockaddr_in/in6 fit in
    // it and we write them at its start with the right family.
    unsafe {
        let mut ss: libc::sockaddr_storage = zeroed();
        match a {
            SocketAddr::V4(v4) => {
                let sin = (&raw mut ss).cast::<libc::sockaddr_in>();
                (*sin).sin_family = libc::AF_INET as libc::sa_family_t;
                (*sin).sin_port = v4.port().to_be();
                (*sin).sin_addr.s_addr = u32::from_ne_bytes(v4.ip().octets());
            }
            SocketAddr::V6(v6) => {
                let sin6 = (&raw mut ss).cast::<libc::sockaddr_in6>();
                (*sin6).sin6_family = libc::AF_INET6 as libc::sa_family_t;
                (*sin6).sin6_port = v6.port().to_be();
                (*sin6).sin6_addr.s6_addr = v6.ip().octets();
                (*sin6).sin6_flowinfo = v6.flowinfo();
                (*sin6).sin6_scope_id = v6.scope_id();
            }
        }
        ss
    }
}

fn from_storage(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    // SAFETY: the family tag says which struct the kernel wrote.
    unsafe {
        match ss.ss_family as i32 {
            libc::AF_INET => {
                let sin = (ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>();
                let ip = Ipv4Addr::from(u32::from_be((*sin).sin_addr.s_addr));
                Some(SocketAddr::V4(SocketAddrV4::new(
                    ip,
                    u16::from_be((*sin).sin_port),
                )))
            }
            libc::AF_INET6 => {
                let sin6 = (ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>();
                let ip = Ipv6Addr::from((*sin6).sin6_addr.s6_addr);
                let port = u16::from_be((*sin6).sin6_port);
                // An IPv4-mapped source on a dual-stack socket is IPv4.
                Some(match ip.to_ipv4_mapped() {
                    Some(v4) => SocketAddr::new(IpAddr::V4(v4), port),
                    None => SocketAddr::V6(SocketAddrV6::new(
                        ip,
                        port,
                        (*sin6).sin6_flowinfo,
                        (*sin6).sin6_scope_id,
                    )),
                })
            }
            _ => None,
        }
    }
}

/// Sets SO_RCVBUFFORCE / SO_SNDBUFFORCE (root only: past the
/// rmem_max/wmem_max caps); false when not permitted.
pub fn force_buffers(fd: BorrowedFd<'_>, bytes: usize) -> bool {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    let mut ok = true;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
        ok &= set_int(fd, libc::SOL_SOCKET, opt, v).is_ok();
    }
    ok
}

/// `UDP_SEGMENT` (`<linux/udp.h>`): the segment size of a GSO send.
const UDP_SEGMENT: libc::c_int = 103;
/// `UDP_GRO` (`<linux/udp.h>`): coalesce received datagrams of one flow;
/// also the control message that gives their segment size.
const UDP_GRO: libc::c_int = 104;

/// Most datagrams one UDP GSO send may carry (`UDP_MAX_SEGMENTS` of Linux
/// before 6.9; later kernels allow 128).
pub const GSO_MAX_SEGMENTS: usize = 64;

/// Turns UDP_GRO on: the kernel may hand over several datagrams of one
/// flow (same addresses, ports and TOS) in one buffer, with their segment
/// size in a control message ([`MsgBatch::segment`]). False when the
/// kernel refuses.
pub fn enable_gro(fd: BorrowedFd<'_>) -> bool {
    set_int(fd, libc::SOL_UDP, UDP_GRO, 1).is_ok()
}

/// Turns on the kernel's receive timestamps (SO_TIMESTAMPNS): every
/// datagram received then carries, in a control message, when the kernel
/// took it in — before it waited in the socket's queue for the daemon
/// ([`MsgBatch::stamp_realtime_ns`]). False when the kernel refuses.
pub fn enable_rx_timestamps(fd: BorrowedFd<'_>) -> bool {
    set_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1).is_ok()
}

/// Turns SO_RXQ_OVFL on: each received datagram carries the socket's count
/// of datagrams dropped because its receive buffer was full
/// ([`MsgBatch::rxq_drops`]). False when the kernel refuses.
pub fn enable_rxq_overflow(fd: BorrowedFd<'_>) -> bool {
    set_int(fd, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1).is_ok()
}

/// `SO_NO_CHECK` (`<asm-generic/socket.h>`): send IPv4 UDP with checksum 0.
const SO_NO_CHECK: libc::c_int = 11;
/// `UDP_NO_CHECK6_TX` / `UDP_NO_CHECK6_RX` (`<linux/udp.h>`): send IPv6 UDP
/// with checksum 0 / accept checksum 0 (RFC 6935, 6936).
const UDP_NO_CHECK6_TX: libc::c_int = 101;
const UDP_NO_CHECK6_RX: libc::c_int = 102;

fn set_int(fd: BorrowedFd<'_>, level: libc::c_int, opt: libc::c_int, v: libc::c_int) -> Result<()> {
    // SAFETY: passes a pointer to a valid c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (&raw const v).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    super::cvt("setsockopt", rc).map(drop)
}

/// Makes a UDP socket send its datagrams with UDP checksum 0 (IPv4:
/// `SO_NO_CHECK`; IPv6: `UDP_NO_CHECK6_TX`) and, over IPv6, accept a zero
/// checksum (IPv4 always does). For traffic a CRC32C trailer covers whose
/// coverage includes the UDP checksum field (`docs/protocol-notes.md` §1).
pub fn zero_udp_checksum(fd: BorrowedFd<'_>, v6: bool) -> Result<()> {
    if v6 {
        set_int(fd, libc::IPPROTO_UDP, UDP_NO_CHECK6_TX, 1)?;
        set_int(fd, libc::IPPROTO_UDP, UDP_NO_CHECK6_RX, 1)
    } else {
        set_int(fd, libc::SOL_SOCKET, SO_NO_CHECK, 1)
    }
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn a_batch_s_buffers_are_in_memory_before_the_first_receive() {
        // 32 slots of 64 KiB (a GRO receive batch): 2 MiB, which the
        // allocator maps fresh rather than reusing the heap.
        let b = MsgBatch::new(32, 1 << 16);
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap();
        let start = b.bufs.as_ptr() as usize;
        let first = start.next_multiple_of(page);
        let end = (start + b.bufs.len()) / page * page;
        let pages = (end - first) / page;
        let mut resident = vec![0u8; pages];
        // SAFETY: [first, end) lies within `b.bufs`, page-aligned, and
        // `resident` has one byte per page of it.
        let r = unsafe { libc::mincore(first as *mut _, end - first, resident.as_mut_ptr()) };
        assert_eq!(r, 0, "mincore: {}", io::Error::last_os_error());
        let missing = resident.iter().filter(|&&v| v & 1 == 0).count();
        assert_eq!(missing, 0, "{missing} of {pages} pages not in memory");
    }

    #[test]
    fn drops_at_a_full_receive_buffer_are_counted() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        assert!(enable_rxq_overflow(rx.as_fd()));
        // The smallest buffer the kernel allows (it doubles the value and
        // has a floor of a few KiB): a few of these datagrams fill it.
        set_int(rx.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, 1).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr().unwrap();
        // Loopback delivers in the sender's context, so when the last
        // send returns every datagram was queued or dropped.
        for _ in 0..64 {
            tx.send_to(&[7u8; 1400], to).unwrap();
        }
        let mut batch = MsgBatch::new(64, 2048);
        let n = batch.recv(rx.as_fd(), 64).unwrap();
        assert!(n > 0 && n < 64, "{n} of 64 fitted");
        // A datagram carries the count as of when it was queued: those
        // queued before the drops carry none.
        assert_eq!(batch.rxq_drops(), None);
        tx.send_to(&[8u8; 1400], to).unwrap();
        assert_eq!(batch.recv(rx.as_fd(), 64).unwrap(), 1);
        assert_eq!(batch.rxq_drops(), Some((64 - n) as u32));
        // Without the option, no count.
        let quiet = UdpSocket::bind("127.0.0.1:0").unwrap();
        quiet.set_nonblocking(true).unwrap();
        tx.send_to(&[1u8; 10], quiet.local_addr().unwrap()).unwrap();
        let mut batch = MsgBatch::new(4, 2048);
        assert_eq!(batch.recv(quiet.as_fd(), 4).unwrap(), 1);
        assert_eq!(batch.rxq_drops(), None);
    }
}
