//! Network-namespace switching for the calling thread.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Moves the calling thread into the network namespace `ns` (a file such as
/// `/run/netns/NAME`). Only this thread changes namespace.
pub fn enter_net_ns(ns: &File) -> io::Result<()> {
    // SAFETY: setns(2) takes a valid open fd (borrowed from `ns` for the
    // duration of the call) and a namespace type; it touches no memory.
    let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's network namespace, as an open file.
pub fn current_net_ns() -> io::Result<File> {
    File::open("/proc/thread-self/ns/net")
}
