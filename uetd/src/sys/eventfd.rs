//! An eventfd: how other threads wake a sleeping worker; and the poll the
//! workers sleep in.

use std::num::NonZeroU64;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};
use rustix::io::Errno;
use rustix::time::Timespec;

use super::{Named as _, Result};

/// A non-blocking eventfd.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> Result<Self> {
        eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)
            .map(Self)
            .named("eventfd")
    }

    /// Wakes the reader (adds 1). It cannot fail short of a counter at
    /// 2^64 − 2, which is a wake-up pending anyway.
    pub fn signal(&self) {
        let _ = rustix::io::write(&self.0, &1u64.to_ne_bytes());
    }

    /// Clears pending wakeups (none pending: EAGAIN, ignored).
    pub fn drain(&self) {
        let mut v = [0u8; 8];
        let _ = rustix::io::read(&self.0, &mut v);
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// An epoll set a worker sleeps on when it has more to wait for than its
/// wake eventfd (the doorbells of clients' rings): `poll()` on it is one
/// fd that turns readable when any member does (level-triggered).
#[derive(Debug)]
pub struct WakeSet(OwnedFd);

impl WakeSet {
    /// A set holding `wake`.
    pub fn new(wake: BorrowedFd<'_>) -> Result<Self> {
        let ep = rustix::event::epoll::create(rustix::event::epoll::CreateFlags::CLOEXEC)
            .named("epoll_create")?;
        let s = Self(ep);
        s.add(wake)?;
        Ok(s)
    }

    /// Adds `fd` (readable wakes the sleeper).
    pub fn add(&self, fd: BorrowedFd<'_>) -> Result<()> {
        rustix::event::epoll::add(
            &self.0,
            fd,
            rustix::event::epoll::EventData::new_u64(0),
            rustix::event::epoll::EventFlags::IN,
        )
        .named("epoll_ctl")
    }

    /// Removes `fd` (gone already: ignored).
    pub fn remove(&self, fd: BorrowedFd<'_>) {
        let _ = rustix::event::epoll::delete(&self.0, fd);
    }
}

impl AsFd for WakeSet {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// Most fds [`poll_in`] watches at once (the rest are ignored).
pub const POLL_MAX: usize = 16;

/// ppoll(2) over `fds` for POLLIN with a timeout (`None`: none). Returns
/// the number of ready fds (0 on timeout or EINTR). The timeout has
/// nanosecond resolution (poll(2)'s milliseconds would hold a pacer that
/// must tick every few microseconds — RCCC's credit, NSCC's probes — a
/// whole millisecond); how exactly the kernel keeps it is the calling
/// thread's timer slack ([`set_timer_slack`]).
pub fn poll_in(fds: &[BorrowedFd<'_>], timeout: Option<Duration>) -> Result<usize> {
    let ts = timeout.map(|d| Timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: i64::from(d.subsec_nanos()),
    });
    let n = fds.len().min(POLL_MAX);
    // On the stack: the sleep path allocates nothing.
    let mut pfds: [PollFd<'_>; POLL_MAX];
    let r = match fds.first() {
        Some(&first) => {
            pfds = std::array::from_fn(|i| {
                PollFd::from_borrowed_fd(fds.get(i).copied().unwrap_or(first), PollFlags::IN)
            });
            poll(&mut pfds[..n], ts.as_ref())
        }
        None => poll(&mut [], ts.as_ref()),
    };
    match r {
        Ok(n) => Ok(n),
        Err(Errno::INTR) => Ok(0),
        r => r.named("ppoll"),
    }
}

/// Sets the calling thread's timer slack (how late the kernel may fire its
/// timers to batch wake-ups; 50 µs by default; 0 restores the default) —
/// the datapath workers use 1 µs so their pacers tick when asked.
pub fn set_timer_slack(ns: u64) -> Result<()> {
    rustix::thread::set_current_timer_slack(NonZeroU64::new(ns)).named("prctl(PR_SET_TIMERSLACK)")
}
