//! The domains of one endpoint, found by the SDI of a received frame.

use core::fmt;

use rustc_hash::FxHashMap;
use uet_wire::encap::EncapConfig;
use uet_wire::parse_sealed_frame;
use uet_wire::time::Instant;

use crate::crypto::{Provider, Ring};
use crate::domain::{DropCounts, DropReason, Flow, Opened, SecurityDomain};

/// The security domains of an endpoint, by SDI. Domains come from the
/// configuration only, so the table is as large as the configuration makes
/// it; a frame for an SDI not configured is a counted drop.
pub struct Tss<P: Provider = Ring> {
    domains: FxHashMap<u32, SecurityDomain<P>>,
    /// Drops of frames no domain took (malformed, unknown SDI).
    unclaimed: DropCounts,
}

impl<P: Provider> fmt::Debug for Tss<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tss")
            .field("domains", &self.domains.len())
            .field("unclaimed", &self.unclaimed)
            .finish()
    }
}

impl<P: Provider> Default for Tss<P> {
    fn default() -> Self {
        Self {
            domains: FxHashMap::default(),
            unclaimed: DropCounts::default(),
        }
    }
}

impl<P: Provider> Tss<P> {
    /// No domains.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the domain of its SDI.
    pub fn insert(&mut self, domain: SecurityDomain<P>) {
        self.domains.insert(domain.config().sdi.get(), domain);
    }

    /// The domain of an SDI.
    #[must_use]
    pub fn get(&self, sdi: u32) -> Option<&SecurityDomain<P>> {
        self.domains.get(&sdi)
    }

    /// The domain of an SDI, to seal with or manage keys.
    pub fn get_mut(&mut self, sdi: u32) -> Option<&mut SecurityDomain<P>> {
        self.domains.get_mut(&sdi)
    }

    /// Drops no domain took, by reason.
    #[must_use]
    pub const fn unclaimed(&self) -> &DropCounts {
        &self.unclaimed
    }

    /// Opens a received secured frame in place with the domain its SDI
    /// names (see [`SecurityDomain::open`]).
    ///
    /// # Errors
    /// The [`DropReason`], counted by the domain or, for frames no domain
    /// takes, in [`Self::unclaimed`].
    pub fn open(
        &mut self,
        now: Instant,
        frame: &mut [u8],
        encap: &EncapConfig,
    ) -> Result<Opened, DropReason> {
        let Ok(sealed) = parse_sealed_frame(frame, encap) else {
            self.unclaimed.count(DropReason::Malformed);
            return Err(DropReason::Malformed);
        };
        let Some(d) = self.domains.get_mut(&sealed.tss.sdi.get()) else {
            self.unclaimed.count(DropReason::UnknownSdi);
            return Err(DropReason::UnknownSdi);
        };
        d.open_parsed(now, frame, &sealed)
    }

    /// Opens a datagram's UET bytes in place with the domain their SDI
    /// names (see [`SecurityDomain::open_uet`]).
    ///
    /// # Errors
    /// The [`DropReason`], counted by the domain or, for datagrams no
    /// domain takes, in [`Self::unclaimed`].
    pub fn open_uet(
        &mut self,
        now: Instant,
        uet: &mut [u8],
        flow: &Flow,
    ) -> Result<Opened, DropReason> {
        let Ok((tss, _, _)) = uet_wire::pds::tss::split(uet) else {
            self.unclaimed.count(DropReason::Malformed);
            return Err(DropReason::Malformed);
        };
        let Some(d) = self.domains.get_mut(&tss.sdi.get()) else {
            self.unclaimed.count(DropReason::UnknownSdi);
            return Err(DropReason::UnknownSdi);
        };
        d.open_uet(now, uet, flow)
    }

    /// Counts a drop no domain took (e.g. a trimmed datagram, whose tag is
    /// gone).
    pub fn count_unclaimed(&mut self, r: DropReason) {
        self.unclaimed.count(r);
    }

    /// Whether no domain is configured.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }

    /// The domains.
    pub fn domains(&self) -> impl Iterator<Item = &SecurityDomain<P>> {
        self.domains.values()
    }

    /// The earliest timeout of any domain.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.domains
            .values()
            .filter_map(SecurityDomain::poll_timeout)
            .min()
    }

    /// Runs every domain's timeouts.
    pub fn handle_timeout(&mut self, now: Instant) {
        for d in self.domains.values_mut() {
            d.handle_timeout(now);
        }
    }
}
