//! A security domain: its configuration, its keys per AN, sealing and
//! opening frames in place, the replay windows of its senders, key rotation
//! and the epoch check (`docs/security.md`).

use core::cell::Cell;
use core::fmt;
use core::net::IpAddr;

use rustc_hash::FxHashMap;
use uet_wire::encap::{EncapConfig, parse_l2_l4};
use uet_wire::inet::{IpRepr, UdpPacket};
use uet_wire::pds::tss::{
    FLOW_LEN, ICV_LEN, MAX_AAD_LEN, Packet as TssPacket, Repr as TssRepr, Sdi, SealedLayout, Tsc,
    split as tss_split,
};
use uet_wire::time::{Duration, Instant};
use uet_wire::{SealedFrame, parse_sealed_frame};
use zeroize::Zeroizing;

use crate::crypto::{Aead, IV_LEN, KeyMaterial, Provider, Ring, SecretKey, TAG_LEN};
use crate::kdf::{self, LABEL_CLUSTER, LABEL_SERVER};
use crate::replay::{Replay, ReplayWindow};

/// How a domain turns its key into packet keys (`docs/security.md` §2.2;
/// REF `uet_sec_mode_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Every member uses the domain key itself; the IV is not masked.
    Direct,
    /// Each sender's key is derived from the domain key ("U1") with its
    /// source (SSI or IP address), the epoch and the rekey value; the IV is
    /// masked with the derived mask.
    Cluster,
    /// The server side of server mode: it holds the domain key and derives
    /// each client's key ("U2") from the client's SSI or address.
    ServerHost,
    /// The client side of server mode: it holds only its derived key
    /// material (key and IV mask), handed to it out of band.
    ServerClient,
}

/// Implicit rekeying: the rekey value `(TSC & mask) >> shift` enters the
/// cluster-mode KDF context, so a sender's key changes every
/// `2^shift` packets without any signalling (REF `rekey_mask`/`rekey_shift`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rekey {
    /// Bits of the TSC that make the rekey value.
    pub mask: u64,
    /// Right shift applied after masking.
    pub shift: u8,
}

impl Rekey {
    /// REF's current default: a new key every 256 packets
    /// (`DEF_REKEY_MASK 0xFF00`, `DEF_REKEY_SHIFT 8`; older REF versions
    /// used `0x0000_FFFF_0000_0000 >> 32`).
    pub const REF_DEFAULT: Self = Self {
        mask: 0xff00,
        shift: 8,
    };

    /// The rekey value of a TSC.
    #[must_use]
    pub const fn value(&self, tsc: u64) -> u32 {
        ((tsc & self.mask) >> (self.shift & 63)) as u32
    }
}

/// The configuration of one security domain. Everything here comes from the
/// job's configuration, never from the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainConfig {
    /// The security domain index carried in every header.
    pub sdi: Sdi,
    /// Key mode.
    pub mode: Mode,
    /// This member's secure source identifier. `Some` puts an SSI in every
    /// header it sends (SP = 1) and requires one in every header it
    /// receives (REF `use_ssi`).
    pub ssi: Option<u32>,
    /// The current key epoch.
    pub epoch: u16,
    /// Implicit rekeying (cluster mode only), `None` for off.
    pub rekey: Option<Rekey>,
    /// Anti-replay window per sender and key, in TSC values (rounded up to
    /// a multiple of 64, at most [`crate::replay::MAX_WINDOW`]).
    pub replay_window: u32,
    /// Packets whose epoch is older than the current one by more than this
    /// are dropped (REF `rx_max_epoch_lifetime`, default 16).
    pub max_epoch_age: u16,
    /// How long the old AN's key is still accepted after this member
    /// switched to the new AN (make-before-break).
    pub rotation_window: Duration,
    /// Bound of the sender table (one replay window pair per sender). A
    /// sender enters only with an authenticated packet; when the table is
    /// full, packets of new senders are dropped and counted
    /// ([`DropReason::SourceTableFull`]) — no sender is evicted, so no
    /// replay window is forgotten.
    pub max_sources: usize,
    /// Bound of the derived-key cache (cluster and server-host modes). An
    /// entry enters only after a tag verified with it; when full, the least
    /// recently used entry is evicted (it is derived again when needed).
    pub key_cache: usize,
    /// The sender refuses to use a TSC at or above this value (REF's invoke
    /// fatal threshold; at most 2^48 - 1).
    pub tsc_limit: u64,
}

impl DomainConfig {
    /// A configuration with REF's defaults: no SSI, epoch 0, rekeying as REF
    /// does in cluster mode, a 1024-packet replay window, epoch lifetime 16,
    /// a 2-second rotation window (REF's guard), 4096 senders, 1024 cached
    /// keys, and the full 48-bit TSC space.
    #[must_use]
    pub fn new(sdi: Sdi, mode: Mode) -> Self {
        Self {
            sdi,
            mode,
            ssi: None,
            epoch: 0,
            rekey: (mode == Mode::Cluster).then_some(Rekey::REF_DEFAULT),
            replay_window: 1024,
            max_epoch_age: 16,
            rotation_window: Duration::from_secs(2),
            max_sources: 4096,
            key_cache: 1024,
            tsc_limit: Tsc::MAX,
        }
    }

    /// Header length this member sends: 12, or 16 with an SSI.
    #[must_use]
    pub const fn header_len(&self) -> usize {
        header_len(self.ssi.is_some())
    }
}

/// A TSS header's length: 12 bytes, or 16 with an SSI.
const fn header_len(with_ssi: bool) -> usize {
    if with_ssi {
        uet_wire::pds::tss::SSI_HEADER_LEN
    } else {
        uet_wire::pds::tss::HEADER_LEN
    }
}

/// A key installed on an AN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainKey {
    /// The domain key (direct, cluster and server-host modes).
    Key(SecretKey),
    /// Derived key material (server-client mode).
    Material(KeyMaterial),
}

/// Who sent a packet, for its replay window: its SSI when the header has
/// one, else its IP source address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceId {
    /// The header's SSI.
    Ssi(u32),
    /// IPv4 source address.
    V4([u8; 4]),
    /// IPv6 source address.
    V6([u8; 16]),
}

/// What a secured datagram's additional authenticated data and IV take
/// from outside its UET bytes (`docs/security.md` §2.4–§2.5): the source
/// and destination addresses and the 4 flow bytes (the UDP source and
/// destination ports, or the entropy header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    addrs: FlowAddrs,
    flow: [u8; FLOW_LEN],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlowAddrs {
    V4 { src: [u8; 4], dst: [u8; 4] },
    V6 { src: [u8; 16], dst: [u8; 16] },
}

impl Flow {
    /// A datagram from `src` to `dst` with these flow bytes; `None` when
    /// the two addresses are of different families.
    #[must_use]
    pub fn new(src: IpAddr, dst: IpAddr, flow: [u8; FLOW_LEN]) -> Option<Self> {
        let addrs = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => FlowAddrs::V4 {
                src: s.octets(),
                dst: d.octets(),
            },
            (IpAddr::V6(s), IpAddr::V6(d)) => FlowAddrs::V6 {
                src: s.octets(),
                dst: d.octets(),
            },
            _ => return None,
        };
        Some(Self { addrs, flow })
    }

    /// A UDP datagram: the flow bytes are the source port (the entropy
    /// value) and the destination port.
    #[must_use]
    pub fn udp(src: IpAddr, dst: IpAddr, src_port: u16, dst_port: u16) -> Option<Self> {
        let mut f = [0u8; FLOW_LEN];
        f[..2].copy_from_slice(&src_port.to_be_bytes());
        f[2..].copy_from_slice(&dst_port.to_be_bytes());
        Self::new(src, dst, f)
    }

    /// The flow of a frame whose layout is known.
    fn of_frame(frame: &[u8], ip: &IpRepr, layout: &SealedLayout) -> Option<Self> {
        let f = frame.get(layout.flow.clone())?.try_into().ok()?;
        Self::new(ip.src_addr(), ip.dst_addr(), f)
    }

    /// `addrs ‖ flow ‖ header` gathered into `out`.
    fn aad<'b>(&self, header: &[u8], out: &'b mut [u8; MAX_AAD_LEN]) -> &'b [u8] {
        let n = match &self.addrs {
            FlowAddrs::V4 { src, dst } => {
                out[..4].copy_from_slice(src);
                out[4..8].copy_from_slice(dst);
                8
            }
            FlowAddrs::V6 { src, dst } => {
                out[..16].copy_from_slice(src);
                out[16..32].copy_from_slice(dst);
                32
            }
        };
        out[n..n + FLOW_LEN].copy_from_slice(&self.flow);
        let h = header.len().min(MAX_AAD_LEN - n - FLOW_LEN);
        out[n + FLOW_LEN..n + FLOW_LEN + h].copy_from_slice(&header[..h]);
        &out[..n + FLOW_LEN + h]
    }
}

/// Why a received packet was dropped. Each reason has its counter
/// ([`DropCounts`]); none latches the domain shut (unlike REF, whose
/// domain drops everything after 1000 failed tags — an attacker could trip
/// that).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Not a well-formed secured frame.
    Malformed,
    /// Trimmed by a switch: its tag is gone, so it cannot be authenticated.
    Trimmed,
    /// No domain with this SDI.
    UnknownSdi,
    /// No key on the packet's AN (never installed, or retired).
    NoKey,
    /// The domain requires an SSI and the header has none, or an SSI is
    /// needed for a unique IV (IPv6 outside cluster mode).
    MissingSsi,
    /// The epoch is older than the lifetime allows.
    StaleEpoch,
    /// The TSC was already authenticated from this sender under this key.
    Replay,
    /// The TSC is left of the replay window.
    TooOld,
    /// The tag did not verify.
    BadTag,
    /// A new sender, and the sender table is full.
    SourceTableFull,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [Self; 10] = [
        Self::Malformed,
        Self::Trimmed,
        Self::UnknownSdi,
        Self::NoKey,
        Self::MissingSsi,
        Self::StaleEpoch,
        Self::Replay,
        Self::TooOld,
        Self::BadTag,
        Self::SourceTableFull,
    ];

    /// A stable snake_case name for counters.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::Trimmed => "trimmed",
            Self::UnknownSdi => "unknown_sdi",
            Self::NoKey => "no_key",
            Self::MissingSsi => "missing_ssi",
            Self::StaleEpoch => "stale_epoch",
            Self::Replay => "replay",
            Self::TooOld => "too_old",
            Self::BadTag => "bad_tag",
            Self::SourceTableFull => "source_table_full",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Drop counters, one per [`DropReason`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DropCounts([u64; DropReason::ALL.len()]);

impl DropCounts {
    /// The count of one reason.
    #[must_use]
    pub const fn get(&self, r: DropReason) -> u64 {
        self.0[r.index()]
    }

    /// Counts one drop.
    pub fn count(&mut self, r: DropReason) {
        self.0[r.index()] += 1;
    }

    /// All drops.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

/// Why a frame could not be sealed (a local condition, not the wire's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealError {
    /// The frame's L2-L4 headers do not parse.
    Malformed(uet_wire::Error),
    /// The UET bytes cannot hold the TSS header and the ICV.
    NoRoom,
    /// No key on the transmit AN.
    NoKey,
    /// An SSI is needed for a unique IV (IPv6 outside cluster mode).
    SsiRequired,
    /// The TSC reached its limit: no further packet may be sent under this
    /// key (install and activate a new one).
    TscExhausted,
    /// The AEAD refused (input too long).
    Crypto,
}

/// Misuse of the key-management calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyError {
    /// The AN is the one in use for sending: install on the other one.
    ActiveAn,
    /// A key of the wrong kind for the mode (material only in server-client
    /// mode, a domain key everywhere else).
    WrongKind,
    /// The key is the one on the other AN: reusing it with a TSC that
    /// starts again at 0 would repeat IVs.
    SameAsOther,
    /// No key on that AN.
    NotInstalled,
}

/// What [`SecurityDomain::seal`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// The TSC used.
    pub tsc: Tsc,
    /// The AN used.
    pub an: bool,
    /// Where the parts lie in the frame.
    pub layout: SealedLayout,
}

/// What [`SecurityDomain::open`] found: the frame's plaintext is in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// The TSS header.
    pub tss: TssRepr,
    /// The sender.
    pub source: SourceId,
    /// The plaintext — PDS header, SES header, payload — within the frame
    /// (the ICV after it is stale).
    pub plaintext: core::ops::Range<usize>,
    /// The UET bytes (TSS header through ICV) within the frame.
    pub uet_range: core::ops::Range<usize>,
}

/// Counters of a domain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames sealed.
    pub sealed: u64,
    /// Frames opened (authenticated).
    pub opened: u64,
    /// Received frames dropped, by reason.
    pub drops: DropCounts,
    /// Keys derived (cache misses included, forged packets included).
    pub derivations: u64,
}

enum Secret<P: Provider> {
    /// Direct or server-host/cluster master key.
    Master { key: SecretKey, prf: P::Prf },
    /// A key used as is (direct mode: no mask; server-client: masked).
    Static {
        check: DomainKey,
        aead: P::Aead,
        mask: Option<Zeroizing<[u8; IV_LEN]>>,
    },
}

struct Association<P: Provider> {
    generation: u64,
    secret: Secret<P>,
    retire_at: Option<Instant>,
}

/// What feeds a per-packet KDF besides epoch and rekey.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum CtxId {
    Small([u8; 4]),
    Large([u8; 16]),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct CacheKey {
    generation: u64,
    epoch: u16,
    rekey: u32,
    id: CtxId,
}

struct Cached<A> {
    aead: A,
    mask: Zeroizing<[u8; IV_LEN]>,
    last: Cell<u64>,
}

#[derive(Default)]
struct SourceState {
    /// Per AN: the key generation the window belongs to, and the window.
    windows: [Option<(u64, ReplayWindow)>; 2],
}

/// One security domain (`docs/security.md`), sans-IO: frames in, frames
/// out, `now` passed in; no clock, no I/O, no allocation per packet once the
/// tables have reached their bounds.
pub struct SecurityDomain<P: Provider = Ring> {
    provider: P,
    config: DomainConfig,
    assoc: [Option<Association<P>>; 2],
    generations: u64,
    tx_an: bool,
    tx_tsc: u64,
    cache: FxHashMap<CacheKey, Cached<P::Aead>>,
    tick: u64,
    sources: FxHashMap<SourceId, SourceState>,
    stats: Stats,
}

impl<P: Provider> fmt::Debug for SecurityDomain<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecurityDomain")
            .field("config", &self.config)
            .field("keys", &[self.assoc[0].is_some(), self.assoc[1].is_some()])
            .field("tx_an", &self.tx_an)
            .field("tx_tsc", &self.tx_tsc)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// The key for one packet, resolved.
enum Resolved<'a, A> {
    Static(&'a A, Option<&'a [u8; IV_LEN]>),
    Cached(&'a Cached<A>),
    Derived(A, Zeroizing<[u8; IV_LEN]>, CacheKey),
}

impl<A> Resolved<'_, A> {
    fn aead(&self) -> &A {
        match self {
            Self::Static(a, _) => a,
            Self::Cached(c) => &c.aead,
            Self::Derived(a, _, _) => a,
        }
    }

    fn mask(&self) -> Option<&[u8; IV_LEN]> {
        match self {
            Self::Static(_, m) => *m,
            Self::Cached(c) => Some(&c.mask),
            Self::Derived(_, m, _) => Some(m),
        }
    }
}

impl SecurityDomain<Ring> {
    /// A domain with the default crypto provider and no keys yet.
    #[must_use]
    pub fn new(config: DomainConfig) -> Self {
        Self::with_provider(config, Ring)
    }
}

impl<P: Provider> SecurityDomain<P> {
    /// A domain with a given crypto provider and no keys yet.
    pub fn with_provider(config: DomainConfig, provider: P) -> Self {
        let mut cache = FxHashMap::default();
        cache.reserve(config.key_cache.min(1 << 16));
        Self {
            provider,
            config,
            assoc: [None, None],
            generations: 0,
            tx_an: false,
            tx_tsc: 0,
            cache,
            tick: 0,
            sources: FxHashMap::default(),
            stats: Stats::default(),
        }
    }

    /// The configuration.
    #[must_use]
    pub const fn config(&self) -> &DomainConfig {
        &self.config
    }

    /// The counters.
    #[must_use]
    pub const fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The AN used for sending.
    #[must_use]
    pub const fn tx_an(&self) -> bool {
        self.tx_an
    }

    /// The next TSC to be sent.
    #[must_use]
    pub const fn next_tsc(&self) -> u64 {
        self.tx_tsc
    }

    /// Senders with a replay window.
    #[must_use]
    pub fn source_count(&self) -> usize {
        self.sources.len()
    }

    /// Changes the current epoch (for example when a member rejoins). The
    /// TSC goes on: it never repeats under one key, whatever the epoch.
    pub fn set_epoch(&mut self, epoch: u16) {
        self.config.epoch = epoch;
    }

    /// Installs `key` on `an`. The first key may go on either AN (it becomes
    /// the transmit AN if none is installed yet); later keys go on the AN
    /// not used for sending, replacing what was there: its replay windows
    /// and cached keys are forgotten with it.
    ///
    /// # Errors
    /// [`KeyError::ActiveAn`], [`KeyError::WrongKind`],
    /// [`KeyError::SameAsOther`].
    pub fn install_key(&mut self, an: bool, key: DomainKey) -> Result<(), KeyError> {
        let first = self.assoc.iter().all(Option::is_none);
        if !first && an == self.tx_an && self.assoc[usize::from(an)].is_some() {
            return Err(KeyError::ActiveAn);
        }
        if let Some(other) = &self.assoc[usize::from(!an)] {
            let same = match (&other.secret, &key) {
                (Secret::Master { key: k, .. }, DomainKey::Key(n)) => k == n,
                (Secret::Static { check, .. }, n) => check == n,
                _ => false,
            };
            if same {
                return Err(KeyError::SameAsOther);
            }
        }
        let secret = match (self.config.mode, key) {
            (Mode::Direct, DomainKey::Key(k)) => Secret::Static {
                aead: self.provider.aead(k.expose()),
                mask: None,
                check: DomainKey::Key(k),
            },
            (Mode::Cluster | Mode::ServerHost, DomainKey::Key(k)) => Secret::Master {
                prf: self.provider.prf(k.expose()),
                key: k,
            },
            (Mode::ServerClient, DomainKey::Material(m)) => Secret::Static {
                aead: self.provider.aead(m.key()),
                mask: Some(Zeroizing::new(*m.iv_mask())),
                check: DomainKey::Material(m),
            },
            _ => return Err(KeyError::WrongKind),
        };
        self.generations += 1;
        let generation = self.generations;
        if let Some(old) = self.assoc[usize::from(an)].take() {
            self.forget(old.generation);
        }
        self.assoc[usize::from(an)] = Some(Association {
            generation,
            secret,
            retire_at: None,
        });
        if first {
            self.tx_an = an;
            self.tx_tsc = 0;
        }
        Ok(())
    }

    /// Switches sending to `an` (make-before-break): from now on packets go
    /// out under its key, with the TSC starting again at 0 (a new key, so
    /// no IV repeats). The previous AN's key is still accepted until `now +
    /// rotation_window`, then retired. Switching to the AN already in use
    /// does nothing.
    ///
    /// # Errors
    /// [`KeyError::NotInstalled`].
    pub fn activate(&mut self, an: bool, now: Instant) -> Result<(), KeyError> {
        if self.assoc[usize::from(an)].is_none() {
            return Err(KeyError::NotInstalled);
        }
        if an == self.tx_an {
            return Ok(());
        }
        if let Some(old) = &mut self.assoc[usize::from(self.tx_an)] {
            old.retire_at = Some(now.saturating_add(self.config.rotation_window));
        }
        if let Some(new) = &mut self.assoc[usize::from(an)] {
            new.retire_at = None;
        }
        self.tx_an = an;
        self.tx_tsc = 0;
        Ok(())
    }

    /// Removes the key on `an` now (it is zeroized), with its replay
    /// windows and cached keys.
    ///
    /// # Errors
    /// [`KeyError::ActiveAn`], [`KeyError::NotInstalled`].
    pub fn retire(&mut self, an: bool) -> Result<(), KeyError> {
        if an == self.tx_an {
            return Err(KeyError::ActiveAn);
        }
        let old = self.assoc[usize::from(an)]
            .take()
            .ok_or(KeyError::NotInstalled)?;
        self.forget(old.generation);
        Ok(())
    }

    /// When [`Self::handle_timeout`] next has work: the end of a rotation
    /// window.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.assoc
            .iter()
            .flatten()
            .filter_map(|a| a.retire_at)
            .min()
    }

    /// Retires keys whose rotation window has ended.
    pub fn handle_timeout(&mut self, now: Instant) {
        for an in [false, true] {
            let due = self.assoc[usize::from(an)]
                .as_ref()
                .and_then(|a| a.retire_at)
                .is_some_and(|t| t <= now);
            if due {
                let _ = self.retire(an);
            }
        }
    }

    fn forget(&mut self, generation: u64) {
        self.cache.retain(|k, _| k.generation != generation);
        for s in self.sources.values_mut() {
            for w in &mut s.windows {
                if w.as_ref().is_some_and(|(g, _)| *g == generation) {
                    *w = None;
                }
            }
        }
    }

    /// Resolves the packet key for `an` and the KDF inputs.
    fn resolve(
        &self,
        an: bool,
        epoch: u16,
        rekey: u32,
        id: CtxId,
    ) -> Option<Resolved<'_, P::Aead>> {
        let a = self.assoc[usize::from(an)].as_ref()?;
        match &a.secret {
            Secret::Static { aead, mask, .. } => {
                Some(Resolved::Static(aead, mask.as_ref().map(|m| &**m)))
            }
            Secret::Master { prf, .. } => {
                let ck = CacheKey {
                    generation: a.generation,
                    epoch,
                    rekey,
                    id,
                };
                if let Some(c) = self.cache.get(&ck) {
                    return Some(Resolved::Cached(c));
                }
                let label = if self.config.mode == Mode::Cluster {
                    LABEL_CLUSTER
                } else {
                    LABEL_SERVER
                };
                let m = match id {
                    CtxId::Small(v) => {
                        kdf::derive(prf, label, &kdf::small_context(epoch, rekey, v))
                    }
                    CtxId::Large(v) => {
                        kdf::derive(prf, label, &kdf::large_context(epoch, rekey, v))
                    }
                };
                Some(Resolved::Derived(
                    self.provider.aead(m.key()),
                    Zeroizing::new(*m.iv_mask()),
                    ck,
                ))
            }
        }
    }

    /// Keeps a derived key whose tag verified, evicting the least recently
    /// used entry when the cache is full.
    fn remember(&mut self, ck: CacheKey, aead: P::Aead, mask: Zeroizing<[u8; IV_LEN]>) {
        if self.config.key_cache == 0 {
            return;
        }
        if self.cache.len() >= self.config.key_cache {
            let victim = self
                .cache
                .iter()
                .min_by_key(|(_, c)| c.last.get())
                .map(|(k, _)| *k);
            if let Some(v) = victim {
                self.cache.remove(&v);
            }
        }
        self.cache.insert(
            ck,
            Cached {
                aead,
                mask,
                last: Cell::new(self.tick),
            },
        );
    }

    /// The KDF context identity and rekey value of a packet (REF
    /// `uet_sec_enc_pkt`/`uet_sec_dec_pkt`): cluster mode uses the sender
    /// (SSI, or its IPv4 address; IPv6 always its address), server-host mode
    /// the client (the SSI, or the client's address: the destination when
    /// sending, the source when receiving) and no rekey value.
    fn context(&self, flow: &Flow, ssi: Option<u32>, tsc: u64, sending: bool) -> (u32, CtxId) {
        let peer_side = self.config.mode == Mode::ServerHost && sending;
        let rekey = match (self.config.mode, self.config.rekey) {
            (Mode::Cluster, Some(r)) => r.value(tsc),
            _ => 0,
        };
        let id = match flow.addrs {
            FlowAddrs::V4 { src, dst } => CtxId::Small(
                ssi.map_or_else(|| if peer_side { dst } else { src }, u32::to_be_bytes),
            ),
            FlowAddrs::V6 { src, dst } => CtxId::Large(if peer_side { dst } else { src }),
        };
        (rekey, id)
    }

    /// The 12-byte IV: SSI, or IPv4 source address, or (IPv6 without SSI)
    /// the SDI; then the whole epoch|TSC word; XORed with the mask outside
    /// direct mode (REF `uet_sec_enc_pkt`).
    fn iv(flow: &Flow, tss: &TssRepr, mask: Option<&[u8; IV_LEN]>) -> [u8; IV_LEN] {
        let head = match (tss.ssi, &flow.addrs) {
            (Some(ssi), _) => ssi.to_be_bytes(),
            (None, FlowAddrs::V4 { src, .. }) => *src,
            (None, FlowAddrs::V6 { .. }) => tss.sdi.get().to_be_bytes(),
        };
        let word = (u64::from(tss.epoch) << 48) | tss.tsc.get();
        let mut iv = [0u8; IV_LEN];
        iv[..4].copy_from_slice(&head);
        iv[4..].copy_from_slice(&word.to_be_bytes());
        if let Some(m) = mask {
            for (b, m) in iv.iter_mut().zip(m) {
                *b ^= m;
            }
        }
        iv
    }

    /// Whether the IV would not be unique per sender: IPv6 without an SSI
    /// outside cluster mode (REF requires the SSI there).
    fn iv_needs_ssi(&self, flow: &Flow, has_ssi: bool) -> bool {
        !has_ssi && matches!(flow.addrs, FlowAddrs::V6 { .. }) && self.config.mode != Mode::Cluster
    }

    /// Seals a frame in place with this member's SSI (see
    /// [`Self::seal_with_ssi`]).
    ///
    /// # Errors
    /// See [`SealError`].
    pub fn seal(&mut self, frame: &mut [u8], encap: &EncapConfig) -> Result<Sealed, SealError> {
        self.seal_with_ssi(frame, encap, self.config.ssi)
    }

    /// Seals a frame in place. The frame was built (e.g. by
    /// `uet_wire::encap::emit_frame`, without CRC trailer) with UET bytes
    /// that are: [`DomainConfig::header_len`] bytes of room for the TSS
    /// header (12, or 16 with `ssi`), the plaintext PDS header, SES header
    /// and payload, and [`ICV_LEN`] bytes of room for the tag. The header is
    /// written with the next TSC and the transmit AN, the plaintext
    /// encrypted, the tag written, and the UDP checksum redone (zero over
    /// IPv4, where the ICV protects the datagram; computed over IPv6, which
    /// requires it). A server host passes the client's SSI as `ssi`.
    ///
    /// # Errors
    /// See [`SealError`]. A TSC is used up even when sealing then fails.
    pub fn seal_with_ssi(
        &mut self,
        frame: &mut [u8],
        encap: &EncapConfig,
        ssi: Option<u32>,
    ) -> Result<Sealed, SealError> {
        let clear = EncapConfig {
            crc_trailer: false,
            ..*encap
        };
        let (headers, uet) = parse_l2_l4(frame, &clear).map_err(SealError::Malformed)?;
        let hl = header_len(ssi.is_some());
        if uet.len() < hl + ICV_LEN {
            return Err(SealError::NoRoom);
        }
        let l3 = headers.ethernet.buffer_len();
        let l4 = uet.start - headers.transport.header_len();
        let ipv6 = matches!(headers.ip, IpRepr::V6(_));
        let layout =
            SealedLayout::new(l3, ipv6, l4, uet.clone(), hl).map_err(SealError::Malformed)?;
        let flow = Flow::of_frame(frame, &headers.ip, &layout).ok_or(SealError::NoRoom)?;
        let (tsc, an) = self.seal_uet_with_ssi(&mut frame[uet.clone()], &flow, ssi)?;
        if let uet_wire::encap::Transport::Udp { .. } = headers.transport {
            let mut udp = UdpPacket::new_unchecked(&mut frame[l4..uet.end]);
            udp.set_checksum(0);
            if ipv6 {
                udp.fill_checksum(headers.ip.src_addr(), headers.ip.dst_addr());
            }
        }
        Ok(Sealed { tsc, an, layout })
    }

    /// Seals UET bytes in place with this member's SSI (see
    /// [`Self::seal_uet_with_ssi`]).
    ///
    /// # Errors
    /// See [`SealError`].
    pub fn seal_uet(&mut self, uet: &mut [u8], flow: &Flow) -> Result<(Tsc, bool), SealError> {
        self.seal_uet_with_ssi(uet, flow, self.config.ssi)
    }

    /// Seals a datagram's UET bytes in place, for a caller that builds the
    /// L2-L4 headers itself (a datapath that writes UET bytes first): `uet`
    /// is the header room, the plaintext and the ICV room as in
    /// [`Self::seal_with_ssi`], and `flow` the addresses and flow bytes the
    /// frame will carry. Returns the TSC and AN used. The UDP checksum is
    /// the caller's (computed over the sealed bytes, or zero over IPv4).
    ///
    /// # Errors
    /// See [`SealError`]. A TSC is used up even when sealing then fails.
    pub fn seal_uet_with_ssi(
        &mut self,
        uet: &mut [u8],
        flow: &Flow,
        ssi: Option<u32>,
    ) -> Result<(Tsc, bool), SealError> {
        let hl = header_len(ssi.is_some());
        if uet.len() < hl + ICV_LEN {
            return Err(SealError::NoRoom);
        }
        if self.iv_needs_ssi(flow, ssi.is_some()) {
            return Err(SealError::SsiRequired);
        }
        let an = self.tx_an;
        if self.assoc[usize::from(an)].is_none() {
            return Err(SealError::NoKey);
        }
        let tsc = self.tx_tsc;
        if tsc >= self.config.tsc_limit.min(Tsc::MAX) {
            return Err(SealError::TscExhausted);
        }
        self.tx_tsc += 1;
        let tss = TssRepr {
            an,
            sdi: self.config.sdi,
            ssi,
            epoch: self.config.epoch,
            tsc: Tsc::from_masked(tsc),
        };
        tss.emit(&mut TssPacket::new_unchecked(&mut uet[..hl]));
        let (rekey, id) = self.context(flow, ssi, tsc, true);
        self.tick += 1;
        let key = self
            .resolve(an, tss.epoch, rekey, id)
            .ok_or(SealError::NoKey)?;
        let iv = Self::iv(flow, &tss, key.mask());
        let mut aad_buf = [0u8; MAX_AAD_LEN];
        let aad = flow.aad(&uet[..hl], &mut aad_buf);
        let tag_at = uet.len() - ICV_LEN;
        let tag = key
            .aead()
            .seal(&iv, aad, &mut uet[hl..tag_at])
            .map_err(|_| SealError::Crypto)?;
        uet[tag_at..].copy_from_slice(&tag);
        let derived = match key {
            Resolved::Derived(a, m, ck) => Some((a, m, ck)),
            Resolved::Cached(c) => {
                c.last.set(self.tick);
                None
            }
            Resolved::Static(..) => None,
        };
        if let Some((a, m, ck)) = derived {
            self.stats.derivations += 1;
            self.remember(ck, a, m);
        }
        self.stats.sealed += 1;
        Ok((tss.tsc, an))
    }

    /// Opens a received frame in place: checks it, authenticates it and
    /// decrypts it. On success the plaintext (PDS header onward) is where
    /// the ciphertext was; on error the reason has been counted, and a frame
    /// that failed its tag may have been decrypted in place
    /// ([`crate::crypto::Aead::open`]): open a copy to keep what arrived.
    ///
    /// # Errors
    /// The [`DropReason`].
    pub fn open(
        &mut self,
        now: Instant,
        frame: &mut [u8],
        encap: &EncapConfig,
    ) -> Result<Opened, DropReason> {
        match parse_sealed_frame(frame, encap) {
            Ok(s) => self.open_parsed(now, frame, &s),
            Err(_) => {
                self.stats.drops.count(DropReason::Malformed);
                Err(DropReason::Malformed)
            }
        }
    }

    /// [`Self::open`] for a frame already split by
    /// [`uet_wire::parse_sealed_frame`] (how a caller with several domains
    /// finds the SDI first).
    ///
    /// # Errors
    /// The [`DropReason`], counted.
    pub fn open_parsed(
        &mut self,
        now: Instant,
        frame: &mut [u8],
        sealed: &SealedFrame,
    ) -> Result<Opened, DropReason> {
        let r = if sealed.headers.trimmed.is_some() {
            Err(DropReason::Trimmed)
        } else if sealed.layout.tag.end > frame.len() {
            Err(DropReason::Malformed)
        } else if let Some(flow) = Flow::of_frame(frame, &sealed.headers.ip, &sealed.layout) {
            let at = sealed.uet_range.start;
            self.open_inner(
                now,
                &mut frame[sealed.uet_range.clone()],
                &flow,
                &sealed.tss,
            )
            .map(|mut o| {
                o.plaintext = o.plaintext.start + at..o.plaintext.end + at;
                o.uet_range = sealed.uet_range.clone();
                o
            })
        } else {
            Err(DropReason::Malformed)
        };
        if let Err(reason) = r {
            self.stats.drops.count(reason);
        }
        r
    }

    /// Opens a datagram's UET bytes (TSS header through ICV) in place, for
    /// a datapath that has already taken the L2-L4 headers off: `flow` is
    /// what they carried (source and destination address, the UDP ports or
    /// the entropy header). The ranges in the result are relative to `uet`.
    ///
    /// # Errors
    /// The [`DropReason`], counted.
    pub fn open_uet(
        &mut self,
        now: Instant,
        uet: &mut [u8],
        flow: &Flow,
    ) -> Result<Opened, DropReason> {
        let r = match tss_split(uet) {
            Ok((tss, _, _)) => self.open_inner(now, uet, flow, &tss),
            Err(_) => Err(DropReason::Malformed),
        };
        if let Err(reason) = r {
            self.stats.drops.count(reason);
        }
        r
    }

    fn open_inner(
        &mut self,
        now: Instant,
        uet: &mut [u8],
        flow: &Flow,
        tss: &TssRepr,
    ) -> Result<Opened, DropReason> {
        let tss = *tss;
        if tss.sdi != self.config.sdi {
            return Err(DropReason::UnknownSdi);
        }
        if (self.config.ssi.is_some() && tss.ssi.is_none())
            || self.iv_needs_ssi(flow, tss.ssi.is_some())
        {
            return Err(DropReason::MissingSsi);
        }
        // Epoch-based rejection (REF `uet_sec_dec_pkt`): serial-number age;
        // only packets older by more than the lifetime are dropped.
        let age = self.config.epoch.wrapping_sub(tss.epoch);
        if age < 0x8000 && age > self.config.max_epoch_age {
            return Err(DropReason::StaleEpoch);
        }
        self.handle_timeout(now);
        let an = usize::from(tss.an);
        let generation = self.assoc[an]
            .as_ref()
            .map(|a| a.generation)
            .ok_or(DropReason::NoKey)?;
        let source = match (tss.ssi, &flow.addrs) {
            (Some(s), _) => SourceId::Ssi(s),
            (None, FlowAddrs::V4 { src, .. }) => SourceId::V4(*src),
            (None, FlowAddrs::V6 { src, .. }) => SourceId::V6(*src),
        };
        let tsc = tss.tsc.get();
        match self.sources.get(&source) {
            Some(s) => {
                if let Some((g, w)) = &s.windows[an]
                    && *g == generation
                {
                    w.check(tsc).map_err(|e| match e {
                        Replay::Duplicate => DropReason::Replay,
                        Replay::TooOld => DropReason::TooOld,
                    })?;
                }
            }
            None if self.sources.len() >= self.config.max_sources => {
                return Err(DropReason::SourceTableFull);
            }
            None => {}
        }
        let hl = tss.buffer_len();
        if uet.len() < hl + ICV_LEN {
            return Err(DropReason::Malformed);
        }
        let tag_at = uet.len() - ICV_LEN;
        let (rekey, id) = self.context(flow, tss.ssi, tsc, false);
        self.tick += 1;
        let tick = self.tick;
        let key = self
            .resolve(tss.an, tss.epoch, rekey, id)
            .ok_or(DropReason::NoKey)?;
        let derived_now = matches!(key, Resolved::Derived(..));
        let iv = Self::iv(flow, &tss, key.mask());
        let mut aad_buf = [0u8; MAX_AAD_LEN];
        let aad = flow.aad(&uet[..hl], &mut aad_buf);
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&uet[tag_at..]);
        let ok = key
            .aead()
            .open(&iv, aad, &mut uet[hl..tag_at], &tag)
            .is_ok();
        let derived = match key {
            Resolved::Derived(a, m, ck) => Some((a, m, ck)),
            Resolved::Cached(c) => {
                if ok {
                    c.last.set(tick);
                }
                None
            }
            Resolved::Static(..) => None,
        };
        if derived_now {
            self.stats.derivations += 1;
        }
        if !ok {
            return Err(DropReason::BadTag);
        }
        if let Some((a, m, ck)) = derived {
            self.remember(ck, a, m);
        }
        let window = self.config.replay_window;
        let s = self.sources.entry(source).or_default();
        let slot = &mut s.windows[an];
        match slot {
            Some((g, w)) if *g == generation => w.record(tsc),
            _ => {
                let mut w = ReplayWindow::new(window);
                w.record(tsc);
                *slot = Some((generation, w));
            }
        }
        self.stats.opened += 1;
        Ok(Opened {
            tss,
            source,
            plaintext: hl..tag_at,
            uet_range: 0..uet.len(),
        })
    }
}
