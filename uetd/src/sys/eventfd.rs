//! An eventfd: how other threads wake a sleeping worker.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// A non-blocking eventfd.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> io::Result<Self> {
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
    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our fd.
        unsafe {
            libc::write(self.0.as_raw_fd(), (&raw const one).cast(), 8);
        }
    }

    /// Clears pending wakeups.
    pub fn drain(&self) {
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

/// ppoll(2) over `fds` for POLLIN with a timeout (`None`: none). Returns
/// the number of ready fds (0 on timeout or EINTR). The timeout has
/// nanosecond resolution (poll(2)'s milliseconds would hold a pacer that
/// must tick every few microseconds — RCCC's credit, NSCC's probes — a
/// whole millisecond); how exactly the kernel keeps it is the calling
/// thread's timer slack ([`set_timer_slack`]).
pub fn poll_in(fds: &[BorrowedFd<'_>], timeout: Option<Duration>) -> io::Result<usize> {
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
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(d.subsec_nanos() as i32),
    });
    let tsp = ts.as_ref().map_or(std::ptr::null(), std::ptr::from_ref);
    // SAFETY: `pfds[..n]` is a valid array of pollfd for the call; `tsp` is
    // null or points to a timespec that outlives it; no signal mask.
    let rc = unsafe { libc::ppoll(pfds.as_mut_ptr(), n as libc::nfds_t, tsp, std::ptr::null()) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(rc as usize)
}

/// Sets the calling thread's timer slack (how late the kernel may fire its
/// timers to batch wake-ups; 50 µs by default) — the datapath workers use
/// 1 µs so their pacers tick when asked.
pub fn set_timer_slack(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long and touches no
    // memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
