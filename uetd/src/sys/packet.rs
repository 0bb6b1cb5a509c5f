//! An AF_PACKET socket that only sends: whole Ethernet frames, as given,
//! out of one interface. For the real-kernel tests that put hand-made
//! frames on a link (spoofed sources).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

#[derive(Debug)]
pub(crate) struct PacketSocket {
    fd: OwnedFd,
    ifindex: i32,
}

impl PacketSocket {
    /// Opens a raw packet socket on `ifname` of the calling thread's
    /// network namespace. Protocol 0: it receives nothing.
    pub(crate) fn open(ifname: &str) -> io::Result<Self> {
        let name = CString::new(ifname).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: `name` is a valid NUL-terminated string for the call.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: socket(2) takes no pointers; a non-negative result is a
        // new fd we own.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            // SAFETY: `fd` was just returned by socket and is owned by no one
            // else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            ifindex: i32::try_from(ifindex).map_err(|_| io::ErrorKind::InvalidInput)?,
        })
    }

    /// Sends `frame` (Ethernet header onwards) as it is.
    pub(crate) fn send(&self, frame: &[u8]) -> io::Result<()> {
        if frame.len() < 14 {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = self.ifindex;
        sll.sll_halen = 6;
        sll.sll_addr[..6].copy_from_slice(&frame[..6]);
        // SAFETY: `frame` is valid for `frame.len()` bytes and `sll` for its
        // size for the duration of the call.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&raw const sll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
