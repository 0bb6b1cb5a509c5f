//! Network-namespace switching for the calling thread.

use std::fs::File;
use std::os::fd::AsFd;

use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

use super::{Error, Named as _, Result};

/// Moves the calling thread into the network namespace `ns` (a file such as
/// `/run/netns/NAME`). Only this thread changes namespace.
pub fn enter_net_ns(ns: &File) -> Result<()> {
    move_into_link_name_space(ns.as_fd(), Some(LinkNameSpaceType::Network)).named("setns")
}

/// The calling thread's network namespace, as an open file.
pub fn current_net_ns() -> Result<File> {
    File::open("/proc/thread-self/ns/net").map_err(|e| Error::new("open", e))
}
