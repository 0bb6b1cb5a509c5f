//! AF_PACKET raw sockets: whole Ethernet frames in and out of one
//! interface (`packet(7)`), for [`crate::packet`].

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use rustix::event::{PollFd, PollFlags, poll};
use rustix::io::Errno;

use super::{Error, Named as _, Result, cvt};

/// `ETH_P_ALL` in network order, as `socket(2)` and `sockaddr_ll` take it.
const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

/// Opens a non-blocking AF_PACKET socket for every protocol, bound to
/// interface `ifindex`.
pub(crate) fn open(ifindex: u32) -> Result<OwnedFd> {
    // SAFETY: plain socket(2); checked and owned below.
    let raw = cvt("socket(AF_PACKET)", unsafe {
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
    cvt("bind(AF_PACKET)", unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&raw const sll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })?;
    Ok(fd)
}

/// Sends one frame on the bound interface.
pub(crate) fn send(fd: &OwnedFd, frame: &[u8]) -> Result<usize> {
    // SAFETY: the pointer and length describe `frame`, alive for the call.
    let n = unsafe { libc::send(fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
    if n < 0 {
        Err(Error::last("send"))
    } else {
        Ok(n as usize)
    }
}

/// Receives one frame without blocking: its length and whether the
/// interface sent it (`PACKET_OUTGOING`) rather than received it; `None`
/// when nothing is queued.
pub(crate) fn recv(fd: &OwnedFd, buf: &mut [u8]) -> Result<Option<(usize, bool)>> {
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
        let e = Error::last("recvfrom");
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some((n as usize, sll.sll_pkttype == libc::PACKET_OUTGOING)))
}

/// Waits until `fd` can take another frame (its send buffer drained).
pub(crate) fn wait_writable(fd: &OwnedFd) -> Result<()> {
    match poll(&mut [PollFd::new(&fd.as_fd(), PollFlags::OUT)], None) {
        Ok(_) | Err(Errno::INTR) => Ok(()),
        r => r.map(drop).named("poll"),
    }
}
