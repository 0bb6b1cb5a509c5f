//! An `AF_PACKET` raw socket bound to one interface: whole Ethernet frames
//! out, exactly as built (the lab's attacker, `uetd/tests/attack.rs`).

use std::ffi::CString;
use std::io;
use std::mem::size_of;

use socket2::{Domain, Protocol, SockAddr, SockAddrStorage, Socket, Type};

/// `ETH_P_ALL` in network byte order, as `socket(2)` and `sockaddr_ll` take it.
const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

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
