//! Whole Ethernet frames in and out of one interface through an AF_PACKET
//! socket (CAP_NET_RAW): for injecting hand-built frames — another UET
//! implementation's layout, a corrupted trailer — and reading what comes
//! back, in tests and the lab. Not on any datapath.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use uet_wire::inet::EthernetAddress;

use crate::sys::eventfd::poll_in;
use crate::sys::{packet as sys, xdp_socket::if_info};

/// An AF_PACKET socket bound to one interface (in the namespace of the
/// thread that opened it).
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    mac: EthernetAddress,
}

impl PacketSocket {
    /// Opens a socket on `ifname` that sees every frame it receives.
    pub fn open(ifname: &str) -> io::Result<Self> {
        let info = if_info(ifname)?;
        Ok(Self {
            fd: sys::open(info.index)?,
            mac: EthernetAddress(info.mac),
        })
    }

    /// Asks for receive and send buffers of `bytes`, past the system's
    /// caps (root); false when not granted. A capture of a udp daemon's
    /// GSO sends (frames of up to 64 KiB that cross a veth whole) needs
    /// more than the default to keep up.
    pub fn force_buffers(&self, bytes: usize) -> bool {
        crate::sys::udp::force_buffers(self.fd.as_fd(), bytes)
    }

    /// The interface's MAC address.
    pub const fn mac(&self) -> EthernetAddress {
        self.mac
    }

    /// Sends one whole frame, waiting while the socket's send buffer is
    /// full (a flood is paced by the link, not dropped here).
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        let n = loop {
            match sys::send(&self.fd, frame) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => sys::wait_writable(&self.fd)?,
                r => break r?,
            }
        };
        if n == frame.len() {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "sent {n} of {} bytes",
                frame.len()
            )))
        }
    }

    /// The next frame received (not sent) into `buf`: its length, or
    /// `None` when none came within `within`.
    pub fn recv(&self, buf: &mut [u8], within: Duration) -> io::Result<Option<usize>> {
        let deadline = Instant::now() + within;
        loop {
            while let Some((n, outgoing)) = sys::recv(&self.fd, buf)? {
                if !outgoing {
                    return Ok(Some(n));
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            poll_in(&[self.fd.as_fd()], Some(deadline - now))?;
        }
    }

    /// Waits until `within` has passed for a received (not sent) frame that
    /// `want` accepts, and returns it; frames it refuses are skipped.
    pub fn recv_matching(
        &self,
        within: Duration,
        mut want: impl FnMut(&[u8]) -> bool,
    ) -> io::Result<Option<Vec<u8>>> {
        let deadline = Instant::now() + within;
        let mut buf = vec![0u8; 65_536];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv(&mut buf, left)? {
                Some(n) if want(&buf[..n]) => return Ok(Some(buf[..n].to_vec())),
                Some(_) => {}
                None => return Ok(None),
            }
        }
    }
}
