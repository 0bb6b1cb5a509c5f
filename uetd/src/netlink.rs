//! rtnetlink, just enough for uetd: one request/answer helper over a
//! `NETLINK_ROUTE` socket and a small attribute codec. Used by the XDP
//! loader (links, IFLA_XDP) and by neighbour resolution (routes,
//! neighbours). Constants from <linux/netlink.h> and <linux/rtnetlink.h>.

use std::io::{self, Read as _};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use crate::sys::Error;

pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;
pub const NLM_F_REQUEST: u16 = 0x1;
pub const NLM_F_ACK: u16 = 0x4;
pub const NLM_F_DUMP: u16 = 0x300;
pub const NLA_F_NESTED: u16 = 0x8000;
pub const NLA_TYPE_MASK: u16 = 0x3fff;
pub const NLMSG_HDRLEN: usize = 16;

/// An `NETLINK_ROUTE` socket of the calling thread's namespace. Sends go to
/// the kernel (port 0) without an explicit bind (the kernel autobinds), so
/// this needs no unsafe code.
#[derive(Debug)]
pub struct Netlink {
    sock: Socket,
}

impl Netlink {
    pub fn open() -> io::Result<Self> {
        let sock = Socket::new(
            Domain::from(libc::AF_NETLINK),
            Type::RAW,
            Some(Protocol::from(libc::NETLINK_ROUTE)),
        )
        .map_err(|e| Error::new("socket(AF_NETLINK)", e))?;
        sock.set_read_timeout(Some(Duration::from_secs(5)))
            .map_err(|e| Error::new("setsockopt(SO_RCVTIMEO)", e))?;
        Ok(Self { sock })
    }

    /// Sends one request and reads answers until its ACK/error (or, for a
    /// dump-less GET, the first answer followed by nothing more).
    pub fn transact(
        &self,
        req: &[u8],
        mut on_msg: impl FnMut(u16, &[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        let seq = u32::from_ne_bytes(req[8..12].try_into().expect("4 bytes"));
        let flags = u16::from_ne_bytes([req[6], req[7]]);
        // An ACK or a dump ends with NLMSG_ERROR / NLMSG_DONE; a plain GET
        // with its one answer.
        let wants_more = flags & (NLM_F_ACK | NLM_F_DUMP) != 0;
        self.sock.send(req)?;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = (&self.sock).read(&mut buf)?;
            let mut rest = &buf[..n];
            while rest.len() >= NLMSG_HDRLEN {
                let len = u32::from_ne_bytes(rest[0..4].try_into().expect("4")) as usize;
                let ty = u16::from_ne_bytes([rest[4], rest[5]]);
                let mseq = u32::from_ne_bytes(rest[8..12].try_into().expect("4"));
                if len < NLMSG_HDRLEN || len > rest.len() {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "bad netlink length",
                    ));
                }
                let payload = &rest[NLMSG_HDRLEN..len];
                rest = &rest[align4(len).min(rest.len())..];
                if mseq != seq {
                    continue;
                }
                match ty {
                    NLMSG_ERROR => {
                        let code = payload
                            .get(..4)
                            .map(|b| i32::from_ne_bytes(b.try_into().expect("4")))
                            .ok_or_else(|| {
                                io::Error::new(io::ErrorKind::InvalidData, "short NLMSG_ERROR")
                            })?;
                        return if code == 0 {
                            Ok(())
                        } else {
                            Err(io::Error::from_raw_os_error(-code))
                        };
                    }
                    NLMSG_DONE => return Ok(()),
                    _ => {
                        on_msg(ty, payload)?;
                        if !wants_more {
                            return Ok(());
                        }
                    }
                }
            }
        }
    }
}

pub const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// A netlink request under construction: header, the family header
/// (`ifinfomsg`, `ndmsg`, `rtmsg`), attributes.
#[derive(Debug)]
pub struct Msg {
    buf: Vec<u8>,
}

impl Msg {
    pub fn new(ty: u16, flags: u16, family_header: &[u8]) -> Self {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut buf = Vec::with_capacity(128);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, set by finish
        buf.extend_from_slice(&ty.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it
        buf.extend_from_slice(family_header);
        buf.resize(align4(buf.len()), 0);
        Self { buf }
    }

    pub fn attr(&mut self, ty: u16, data: &[u8]) {
        let len = 4 + data.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(data);
        self.buf.resize(align4(self.buf.len()), 0);
    }

    pub fn begin_nest(&mut self, ty: u16) -> usize {
        let at = self.buf.len();
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf
            .extend_from_slice(&(ty | NLA_F_NESTED).to_ne_bytes());
        at
    }

    pub fn end_nest(&mut self, at: usize) {
        let len = (self.buf.len() - at) as u16;
        self.buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
    }

    pub fn finish(mut self) -> Vec<u8> {
        let len = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&len.to_ne_bytes());
        self.buf
    }
}

/// Iterates `(type, payload)` over netlink attributes.
pub fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if b.len() < 4 {
            return None;
        }
        let len = u16::from_ne_bytes([b[0], b[1]]) as usize;
        let ty = u16::from_ne_bytes([b[2], b[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > b.len() {
            return None;
        }
        let payload = &b[4..len];
        b = &b[align4(len).min(b.len())..];
        Some((ty, payload))
    })
}
