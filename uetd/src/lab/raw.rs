//! Raw Ethernet frames into a lab link: what an attacker on the same L2
//! segment can send (any source MAC or IP, any bytes). The real-kernel
//! attack run (`uetd/tests/attack.rs`) and the soak use it from a host that
//! runs no daemon.

use std::io::{self, Read as _};
use std::time::Duration;

/// An `AF_PACKET` socket bound to one interface of the namespace it was
/// opened in; frames leave it byte for byte as given.
#[derive(Debug)]
pub struct RawLink {
    sock: socket2::Socket,
}

impl RawLink {
    /// Opens `ifname` of the calling thread's network namespace (open it
    /// inside [`crate::netns::NetNs::run`]; the socket stays bound to that
    /// interface wherever it is used afterwards).
    pub fn open(ifname: &str) -> io::Result<Self> {
        let i = crate::sys::packet::ifindex(ifname)?;
        Ok(Self {
            sock: crate::sys::packet::bound_socket(i)?,
        })
    }

    /// Sends one frame (Ethernet header included); blocks while the
    /// interface's queue is full.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        let n = self.sock.send(frame)?;
        if n != frame.len() {
            return Err(io::Error::other(format!(
                "sent {n} of {} bytes",
                frame.len()
            )));
        }
        Ok(())
    }

    /// Receives the next frame seen on the interface (either direction)
    /// into `buf`; its length. Waits at most `timeout`: `Ok(None)` then.
    pub fn recv(&self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        self.sock
            .set_read_timeout(Some(timeout.max(Duration::from_micros(1))))?;
        match (&self.sock).read(buf) {
            Ok(n) => Ok(Some(n)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}
