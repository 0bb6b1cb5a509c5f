//! An eventfd: how other threads wake a sleeping worker.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// A non-blocking eventfd.
#[derive(Debug)]
pub(crate) struct EventFd(OwnedFd);

impl EventFd {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: eventfd(2) takes no pointers; a non-negative result is a
        // new fd we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by eventfd and is owned by no one else.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Wakes the reader (adds 1).
    pub(crate) fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our fd.
        unsafe {
            libc::write(self.0.as_raw_fd(), (&raw const one).cast(), 8);
        }
    }

    /// Clears pending wakeups.
    pub(crate) fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a valid u64; non-blocking.
        unsafe {
            libc::read(self.0.as_raw_fd(), (&raw mut v).cast(), 8);
        }
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// poll(2) over `fds` for POLLIN with a timeout in ms (-1: none). Returns
/// the number of ready fds (0 on timeout or EINTR).
pub(crate) fn poll_in(fds: &[BorrowedFd<'_>], timeout_ms: i32) -> io::Result<usize> {
    let mut pfds = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; 16];
    let n = fds.len().min(pfds.len());
    for (p, fd) in pfds.iter_mut().zip(fds) {
        p.fd = fd.as_raw_fd();
        p.events = libc::POLLIN;
    }
    // SAFETY: `pfds[..n]` is a valid array of pollfd for the call.
    let rc = unsafe { libc::poll(pfds.as_mut_ptr(), n as libc::nfds_t, timeout_ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(rc as usize)
}
