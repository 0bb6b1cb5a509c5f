//! The transport security sublayer around a simulated host's engine, as
//! the daemon's worker runs it between backend and endpoint
//! (`uetd/src/tss.rs`): datagrams of PDCs in a security domain leave sealed
//! (TSS header, ciphertext, ICV) and arrive opened, with the domain that
//! authenticated them in `RxMeta::sdi`; anything that fails to open never
//! reaches the engine (the domain counts it).

use std::net::IpAddr;

use uet_pds::{RxMeta, Transmit};
use uet_tss::{DomainConfig, DomainKey, Flow, Mode, SecretKey, SecurityDomain};
use uet_wire::pds::tss::{ICV_LEN, Sdi};
use uet_wire::time::Instant;

use crate::host::Engine;

/// An engine whose datagrams cross one security domain (direct mode, one
/// shared key), over UDP to `port`.
#[derive(Debug)]
pub struct Sealed<E> {
    inner: E,
    domain: SecurityDomain,
    local: IpAddr,
    port: u16,
    /// Where a received datagram is opened (the wire's copy stays as it
    /// came).
    scratch: Vec<u8>,
}

impl<E: Engine> Sealed<E> {
    /// `inner` at `local`, in domain `sdi` with `key`. The engine's PDS
    /// must put its jobs in `sdi` (`Endpoint::set_job_domain`) and leave
    /// room for the TSS header and ICV in its `max_ses_len`
    /// ([`Sealed::OVERHEAD`]).
    pub fn new(inner: E, local: IpAddr, port: u16, sdi: Sdi, key: [u8; 32]) -> Self {
        let mut domain = SecurityDomain::new(DomainConfig::new(sdi, Mode::Direct));
        domain
            .install_key(false, DomainKey::Key(SecretKey::new(key)))
            .unwrap_or_else(|e| panic!("a first key installs: {e:?}"));
        Self {
            inner,
            domain,
            local,
            port,
            scratch: vec![0; 16 << 10],
        }
    }

    /// Bytes sealing adds to a datagram: the 12-byte TSS header and the
    /// 16-byte ICV.
    pub const OVERHEAD: usize = uet_wire::pds::tss::HEADER_LEN + ICV_LEN;
}

impl<E: Engine> Engine for Sealed<E> {
    fn handle_datagram(&mut self, now: Instant, meta: &RxMeta, bytes: &[u8]) {
        let flow = Flow::udp(meta.src, self.local, meta.ev.get(), self.port);
        let (Some(flow), Some(buf)) = (flow, self.scratch.get_mut(..bytes.len())) else {
            return;
        };
        buf.copy_from_slice(bytes);
        let Ok(o) = self.domain.open_uet(now, buf, &flow) else {
            return;
        };
        let meta = RxMeta {
            sdi: Some(o.tss.sdi),
            ..*meta
        };
        self.inner.handle_datagram(now, &meta, &buf[o.plaintext]);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.inner.handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let hl = uet_wire::pds::tss::HEADER_LEN;
        let room = buf.len().checked_sub(Self::OVERHEAD)?;
        loop {
            let t = self.inner.poll_transmit(now, &mut buf[hl..hl + room])?;
            if t.sdi.is_none() {
                // In the clear: back to the start of the buffer.
                buf.copy_within(hl..hl + t.len, 0);
                return Some(t);
            }
            let len = t.len + Self::OVERHEAD;
            let Some(flow) = Flow::udp(self.local, t.dst, t.ev.get(), self.port) else {
                continue;
            };
            if self.domain.seal_uet(&mut buf[..len], &flow).is_ok() {
                return Some(Transmit { len, ..t });
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.inner.poll_timeout()
    }
}
