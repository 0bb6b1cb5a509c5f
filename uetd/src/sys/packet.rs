//! AF_PACKET raw sockets: whole Ethernet frames in and out of one
//! interface (`packet(7)`): non-blocking ones for injecting and reading
//! frames ([`crate::packet`]), and a blocking sender bound with socket2 for
//! the lab's attacker ([`crate::lab::RawLink`]), which must wait while the
//! interface's queue is full rather than drop.

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use socket2::{Domain, Protocol, SockAddr, SockAddrStorage, Socket, Type};

/// `ETH_P_ALL` in network order, as `socket(2)` and `sockaddr_ll` take it.
const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Opens a non-blocking AF_PACKET socket for every protocol, bound to
/// interface `ifindex`.
pub(crate) fn open(ifindex: u32) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); checked and owned below.
    let raw = cvt(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            libc::c_int::from(ETH_P_ALL_BE),
        )
    })?;
    // SAFETY: a fresh fd nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: all-zero is a valid sockaddr_ll.
    let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETH_P_ALL_BE;
    sll.sll_ifindex = ifindex as libc::c_int;
    // SAFETY: passes a valid sockaddr_ll and its size.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&raw const sll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })?;
    Ok(fd)
}

/// Sends one frame on the bound interface.
pub(crate) fn send(fd: &OwnedFd, frame: &[u8]) -> io::Result<usize> {
    // SAFETY: the pointer and length describe `frame`, alive for the call.
    let n = unsafe { libc::send(fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Receives one frame without blocking: its length and whether the
/// interface sent it (`PACKET_OUTGOING`) rather than received it; `None`
/// when nothing is queued.
pub(crate) fn recv(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<Option<(usize, bool)>> {
    // SAFETY: all-zero is a valid sockaddr_ll.
    let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
    let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: the buffer and address pointers and lengths describe live
    // locals for the duration of the call.
    let n = unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
            (&raw mut sll).cast(),
            &raw mut len,
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some((n as usize, sll.sll_pkttype == libc::PACKET_OUTGOING)))
}

/// The ifindex of `ifname` in the calling thread's network namespace.
pub(crate) fn ifindex(ifname: &str) -> io::Result<u32> {
    let c = CString::new(ifname).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(i)
}

/// A raw packet socket bound to `ifindex` (sends go out of it unchanged).
pub(crate) fn bound_socket(ifindex: u32) -> io::Result<Socket> {
    let s = Socket::new(
        Domain::PACKET,
        Type::RAW,
        Some(Protocol::from(i32::from(ETH_P_ALL_BE))),
    )?;
    let mut storage = SockAddrStorage::zeroed();
    let len = size_of::<libc::sockaddr_ll>();
    // SAFETY: `SockAddrStorage` is at least as large and as aligned as any
    // sockaddr, `sockaddr_ll` included, and the view ends with this block.
    let sll = unsafe { storage.view_as::<libc::sockaddr_ll>() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETH_P_ALL_BE;
    sll.sll_ifindex =
        i32::try_from(ifindex).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: the storage holds an initialised `sockaddr_ll` of `len` bytes.
    let addr = unsafe { SockAddr::new(storage, len as libc::socklen_t) };
    s.bind(&addr)?;
    Ok(s)
}
