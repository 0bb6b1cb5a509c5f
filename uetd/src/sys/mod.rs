//! The one place uetd meets the kernel. Every system call of the daemon
//! goes through a function of this module, and every error it returns is a
//! [`Error`] that names the call (`setns: Operation not permitted (os
//! error 1)`), so a log line says which call failed without a backtrace.
//!
//! Calls rustix covers (eventfd, poll, affinity, setns, credentials, the
//! clock, statfs, mount, timer slack) go through rustix; raw `libc` remains
//! for what it does not cover: AF_XDP socket options, the ring and UMEM
//! mappings, `recvmmsg`/`sendmmsg` with control messages, AF_PACKET,
//! `getifaddrs`, the `SIOCGIF*`/`SIOCETHTOOL` ioctls,
//! `sched_setscheduler` and `sched_setattr`/`sched_getattr`.
//!
//! Every `unsafe` block of uetd lives under this module (`docs/architecture.md` §2),
//! each with a `// SAFETY:` line.
//! The rest of the crate calls the safe wrappers defined here; the lab and
//! the tools use the public ones.
#![allow(unsafe_code)]

use std::fmt;
use std::io;

pub mod affinity;
pub mod bpffs;
pub(crate) mod cred;
pub mod eventfd;
pub(crate) mod ifaddr;
pub mod mem;
pub mod ns;
pub(crate) mod packet;
pub mod simd;
pub mod udp;
pub(crate) mod xdp_socket;

/// A failed system call: which call, and the kernel's answer.
///
/// A struct rather than `io::Error::new(kind, ..)` so callers keep
/// [`Error::kind`] *and* [`Error::raw_os_error`] (the AF_XDP kick and the
/// XDP loader branch on errno values, which a wrapped `io::Error` would
/// hide). It converts into `io::Error` (same kind, same message) for code
/// that speaks `io::Result`. Its `Display` already carries the kernel's
/// message, so `source()` is empty: a chain printed with `{:#}` says it
/// once.
#[derive(Debug)]
pub struct Error {
    call: &'static str,
    source: io::Error,
}

/// The result of a call through this module.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// `call` failed with `source`.
    pub(crate) const fn new(call: &'static str, source: io::Error) -> Self {
        Self { call, source }
    }

    /// `call` failed with the calling thread's `errno`. The only place the
    /// daemon reads `errno`.
    pub(crate) fn last(call: &'static str) -> Self {
        Self::new(call, io::Error::last_os_error())
    }

    /// `call` was not made: its argument is unusable (`InvalidInput`).
    pub(crate) fn invalid(call: &'static str, why: &'static str) -> Self {
        Self::new(call, io::Error::new(io::ErrorKind::InvalidInput, why))
    }

    /// The system call that failed (`"setns"`, `"mmap"`, ...).
    pub const fn call(&self) -> &'static str {
        self.call
    }

    /// The kind of the kernel's answer.
    pub fn kind(&self) -> io::ErrorKind {
        self.source.kind()
    }

    /// The errno, when the kernel gave one.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.call, self.source)
    }
}

impl std::error::Error for Error {}

impl From<Error> for io::Error {
    fn from(e: Error) -> Self {
        Self::new(e.kind(), e)
    }
}

/// Checks a libc return value: negative means failure, with `errno`.
pub(crate) fn cvt(call: &'static str, rc: libc::c_int) -> Result<libc::c_int> {
    if rc < 0 {
        Err(Error::last(call))
    } else {
        Ok(rc)
    }
}

/// Names the call of a rustix result.
pub(crate) trait Named<T> {
    /// The result, its error naming `call`.
    fn named(self, call: &'static str) -> Result<T>;
}

impl<T> Named<T> for rustix::io::Result<T> {
    fn named(self, call: &'static str) -> Result<T> {
        self.map_err(|e| Error::new(call, e.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_names_its_call_and_keeps_kind_and_errno() {
        let e = Error::new("setns", io::Error::from_raw_os_error(libc::EPERM));
        assert_eq!(e.to_string(), "setns: Operation not permitted (os error 1)");
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(e.raw_os_error(), Some(libc::EPERM));
        let io: io::Error = e.into();
        assert_eq!(io.kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(
            io.to_string(),
            "setns: Operation not permitted (os error 1)"
        );
    }

    #[test]
    fn a_rustix_failure_is_named() {
        let r: rustix::io::Result<()> = Err(rustix::io::Errno::BADF);
        let e = r.named("eventfd").unwrap_err();
        assert_eq!(e.call(), "eventfd");
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
    }
}
