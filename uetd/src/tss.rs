//! The Transport Security Sublayer on the daemon's datapath
//! (`docs/security.md`, `docs/architecture.md` §11).
//!
//! Each worker holds a [`WorkerTss`]: the security domains of the jobs that
//! have one (`[[tss]]` in the configuration), keyed by SDI. Between the
//! backend and the endpoint it
//!
//! * opens every received datagram that starts with a TSS header where the
//!   backend received it (its frame or buffer, already captured if a
//!   capture runs) and hands the plaintext to the endpoint marked
//!   with the domain that authenticated it (`RxMeta::sdi`); the PDS then
//!   lets a PDC hear only its own domain;
//! * drops, before the endpoint sees them, datagrams in the clear whose SES
//!   header names a job that has a domain, and authenticated datagrams
//!   whose SES header names another job than their domain's;
//! * seals every datagram the endpoint writes for a PDC in a domain
//!   (`Transmit::sdi`): the endpoint writes its UET bytes behind room for
//!   the TSS header, and the tag goes after them.
//!
//! Nothing here allocates per packet. Every drop is counted by reason
//! ([`TssStats`]), and none is answered.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::net::IpAddr;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;
use serde::Deserialize;
use uet_pds::{RxMeta, Transmit};
use uet_tss::{
    DomainConfig, DomainKey, DropReason, Flow, Mode, Rekey, SealError, SecretKey, SecurityDomain,
    Tss,
};
use uet_wire::JobId;
use uet_wire::pds::tss::{HEADER_LEN, ICV_LEN, SSI_HEADER_LEN, Sdi};
use uet_wire::time::Instant;
use zeroize::Zeroizing;

use crate::config::ConfigError;
use crate::io::EvMap;
use crate::worker::DaemonEndpoint;

/// Key modes a `[[tss]]` table may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TssMode {
    /// Every member uses the domain key as is.
    Direct,
    /// Each sender's key is derived from the domain key and its address or
    /// SSI (REF's cluster mode).
    Cluster,
}

/// One `[[tss]]` table: the security domain of one job.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TssJob {
    /// The job (`job_id`, < 2^24).
    pub job: u32,
    /// The security domain index (< 2^24), the same on every member.
    pub sdi: u32,
    /// Key mode (default `direct`).
    #[serde(default = "direct")]
    pub mode: TssMode,
    /// The domain key: a file of 32 raw bytes or 64 hex digits, readable
    /// by its owner only (mode 0600 or 0400). Given here or with
    /// `--tss-key-file JOB=PATH`. On SIGHUP it is read again and, if it
    /// changed, the new key is installed on the other AN and used from then
    /// on (`docs/security.md` §8).
    pub key_file: Option<PathBuf>,
    /// The key epoch (default 0).
    #[serde(default)]
    pub epoch: u16,
    /// Implicit rekeying every 256 packets (cluster mode only; default on
    /// in cluster mode, as REF).
    pub rekey: Option<bool>,
    /// Anti-replay window per sender, in packets (64..=1024, a multiple of
    /// 64; default 1024).
    #[serde(default = "replay_window")]
    pub replay_window: u32,
    /// This daemon's secure source identifier: worker `w` sends with SSI
    /// `ssi + w`, and packets without an SSI are refused. Needed with more
    /// than one worker (each worker has its own TSC, so each needs its own
    /// IV prefix), and then on every member of the domain.
    pub ssi: Option<u32>,
}

const fn direct() -> TssMode {
    TssMode::Direct
}

const fn replay_window() -> u32 {
    1024
}

impl TssJob {
    /// A direct-mode domain for `job` with SDI = job and REF's defaults.
    #[must_use]
    pub const fn with_key_file(job: u32, key_file: PathBuf) -> Self {
        Self {
            job,
            sdi: job,
            mode: TssMode::Direct,
            key_file: Some(key_file),
            epoch: 0,
            rekey: None,
            replay_window: replay_window(),
            ssi: None,
        }
    }

    /// Reads this domain's key file.
    pub fn read_key(&self) -> Result<SecretKey, KeyFileError> {
        read_key_file(self.key_file.as_deref().unwrap_or_else(|| Path::new("")))
    }

    /// Checks the values that parse but cannot work.
    pub fn check(&self, workers: usize) -> Result<(), ConfigError> {
        let bad = |m: String| {
            Err(ConfigError::Invalid(format!(
                "[[tss]] job {}: {m}",
                self.job
            )))
        };
        if self.job >= 1 << 24 {
            return bad("job must be < 2^24".into());
        }
        if self.sdi >= 1 << 24 {
            return bad(format!("sdi must be < 2^24, not {}", self.sdi));
        }
        if self.replay_window == 0
            || !self.replay_window.is_multiple_of(64)
            || self.replay_window > uet_tss::replay::MAX_WINDOW
        {
            return bad(format!(
                "replay_window must be a multiple of 64 in 64..=1024, not {}",
                self.replay_window
            ));
        }
        if self.rekey == Some(true) && self.mode != TssMode::Cluster {
            return bad("rekey needs mode = \"cluster\"".into());
        }
        if workers > 1 && self.ssi.is_none() {
            return bad(format!(
                "{workers} workers each send with their own counter, so each needs its own \
                 SSI: set ssi (worker w uses ssi + w)"
            ));
        }
        if self
            .ssi
            .is_some_and(|s| s.checked_add(workers as u32).is_none())
        {
            return bad("ssi + workers must fit in 32 bits".into());
        }
        if self.key_file.is_none() {
            return bad("no key: set key_file or pass --tss-key-file JOB=PATH".into());
        }
        Ok(())
    }

    /// The domain of worker `w`, with `key` on AN 0.
    fn domain(&self, w: usize, key: SecretKey) -> SecurityDomain {
        let mode = match self.mode {
            TssMode::Direct => Mode::Direct,
            TssMode::Cluster => Mode::Cluster,
        };
        let mut c = DomainConfig::new(Sdi::from_masked(self.sdi), mode);
        c.epoch = self.epoch;
        c.rekey = match (mode, self.rekey) {
            (Mode::Cluster, None | Some(true)) => Some(Rekey::REF_DEFAULT),
            _ => None,
        };
        c.replay_window = self.replay_window;
        c.ssi = self.ssi.map(|s| s.wrapping_add(w as u32));
        let mut d = SecurityDomain::new(c);
        // A new domain has no key on either AN: installing cannot fail.
        let _ = d.install_key(false, DomainKey::Key(key));
        d
    }
}

/// Why a key file was refused. The key itself is never in a message.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    /// Not readable.
    #[error("reading the key file {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Readable by group or others.
    #[error(
        "the key file {} is readable by group or others (mode {mode:04o}): chmod 600 it",
        path.display()
    )]
    Permissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Neither 32 raw bytes nor 64 hex digits.
    #[error(
        "the key file {} holds {len} bytes: a key is 32 raw bytes or 64 hex digits",
        path.display()
    )]
    Format {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: usize,
    },
}

/// Reads a 32-byte key from `path`: refused when group or others may read
/// it (as ssh refuses a private key), and when it is neither 32 raw bytes
/// nor 64 hex digits (surrounding whitespace allowed). Every copy is
/// zeroized when dropped.
pub fn read_key_file(path: &Path) -> Result<SecretKey, KeyFileError> {
    let read = |source| KeyFileError::Read {
        path: path.to_owned(),
        source,
    };
    let meta = fs::metadata(path).map_err(read)?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(KeyFileError::Permissions {
            path: path.to_owned(),
            mode,
        });
    }
    let bytes = Zeroizing::new(fs::read(path).map_err(read)?);
    let format = || KeyFileError::Format {
        path: path.to_owned(),
        len: bytes.len(),
    };
    if let Some(k) = (bytes.len() == 32)
        .then(|| SecretKey::from_slice(&bytes))
        .flatten()
    {
        return Ok(k);
    }
    let text = bytes.trim_ascii();
    if text.len() != 64 {
        return Err(format());
    }
    let mut key = Zeroizing::new([0u8; 32]);
    for (i, pair) in text.chunks_exact(2).enumerate() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (hex(pair[0]), hex(pair[1])) {
            (Some(h), Some(l)) => key[i] = (h * 16 + l) as u8,
            _ => return Err(format()),
        }
    }
    Ok(SecretKey::new(*key))
}

/// Counters of a worker's TSS layer (summed over its domains).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TssStats {
    /// Datagrams sealed.
    pub sealed: u64,
    /// Datagrams opened (authenticated).
    pub opened: u64,
    /// Received datagrams dropped, by [`DropReason`] name, plus
    /// `plaintext` (in the clear for a job with a domain) and `wrong_job`
    /// (authenticated by the domain of another job).
    pub drops: BTreeMap<&'static str, u64>,
    /// Datagrams the endpoint wrote that could not be sealed (no key, TSC
    /// exhausted, no room); the PDS sends them again.
    pub seal_failed: u64,
    /// Keys installed by rotation.
    pub rotations: u64,
}

/// Drop reasons of the layer besides [`DropReason`]'s.
pub const PLAINTEXT: &str = "plaintext";
/// See [`PLAINTEXT`].
pub const WRONG_JOB: &str = "wrong_job";

/// One worker's TSS layer.
pub struct WorkerTss {
    tss: Tss,
    /// The job of each domain.
    job_of: FxHashMap<u32, JobId>,
    /// The domain of each job.
    domain_of: FxHashMap<JobId, Sdi>,
    local: IpAddr,
    port: u16,
    native_ip: bool,
    /// The backend's EV on the wire, which the sealed flow bytes name.
    ev_map: EvMap,
    /// The header length this worker sends with (12, or 16 with an SSI).
    header_len: usize,
    plaintext: u64,
    wrong_job: u64,
    seal_failed: u64,
    rotations: u64,
}

impl std::fmt::Debug for WorkerTss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerTss")
            .field("tss", &self.tss)
            .finish_non_exhaustive()
    }
}

/// The bytes TSS adds to a datagram sent with an SSI or without.
#[must_use]
pub const fn overhead(ssi: bool) -> usize {
    (if ssi { SSI_HEADER_LEN } else { HEADER_LEN }) + ICV_LEN
}

impl WorkerTss {
    /// Worker `w`'s layer for `jobs`, whose keys are `keys` (in order).
    #[must_use]
    pub fn new(
        w: usize,
        jobs: &[TssJob],
        keys: Vec<SecretKey>,
        local: IpAddr,
        port: u16,
        native_ip: bool,
        ev_map: EvMap,
    ) -> Self {
        let mut tss = Tss::new();
        let mut job_of = FxHashMap::default();
        let mut domain_of = FxHashMap::default();
        let mut ssi = false;
        for (j, k) in jobs.iter().zip(keys) {
            let job = JobId::from_masked(j.job);
            tss.insert(j.domain(w, k));
            job_of.insert(j.sdi, job);
            domain_of.insert(job, Sdi::from_masked(j.sdi));
            ssi |= j.ssi.is_some();
        }
        Self {
            tss,
            job_of,
            domain_of,
            local,
            port,
            native_ip,
            ev_map,
            header_len: if ssi { SSI_HEADER_LEN } else { HEADER_LEN },
            plaintext: 0,
            wrong_job: 0,
            seal_failed: 0,
            rotations: 0,
        }
    }

    /// The jobs with a domain and their SDIs, for the PDS.
    pub fn job_domains(&self) -> impl Iterator<Item = (JobId, Sdi)> + '_ {
        self.domain_of.iter().map(|(j, s)| (*j, *s))
    }

    /// The flow of a datagram between `src` and `dst` with entropy `ev`.
    fn flow(&self, src: IpAddr, dst: IpAddr, ev: u16) -> Option<Flow> {
        if self.native_ip {
            let e = ev.to_be_bytes();
            Flow::new(src, dst, [e[0], e[1], 0, 0])
        } else {
            Flow::udp(src, dst, ev, self.port)
        }
    }

    /// A datagram arrived: open it if it is sealed — in place, in the
    /// backend's buffer, which is ours until this returns — check its job,
    /// and hand the plaintext to the endpoint, or count why not.
    pub fn receive(
        &mut self,
        now: Instant,
        meta: &RxMeta,
        bytes: &mut [u8],
        ep: &mut DaemonEndpoint,
    ) {
        if !uet_wire::is_tss(bytes) {
            if job_named(bytes).is_some_and(|j| self.domain_of.contains_key(&j)) {
                self.plaintext += 1;
                return;
            }
            ep.handle_datagram(now, meta, bytes);
            return;
        }
        if meta.trimmed.is_some() {
            // Its tag is gone: it cannot be authenticated.
            self.tss.count_unclaimed(DropReason::Trimmed);
            return;
        }
        let Some(flow) = self.flow(meta.src, self.local, meta.ev.get()) else {
            self.tss.count_unclaimed(DropReason::Malformed);
            return;
        };
        let Ok(o) = self.tss.open_uet(now, bytes, &flow) else {
            return;
        };
        let plain = &bytes[o.plaintext];
        let sdi = o.tss.sdi;
        if job_named(plain).is_some_and(|j| self.job_of.get(&sdi.get()) != Some(&j)) {
            self.wrong_job += 1;
            return;
        }
        let meta = RxMeta {
            sdi: Some(sdi),
            ..*meta
        };
        ep.handle_datagram(now, &meta, plain);
    }

    /// The endpoint's next datagram into `buf`, sealed when its PDC is in a
    /// domain. A datagram that cannot be sealed is counted and skipped (the
    /// PDS sends it again).
    pub fn transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        ep: &mut DaemonEndpoint,
    ) -> Option<Transmit> {
        let hl = self.header_len;
        let room = buf.len().checked_sub(hl + ICV_LEN)?;
        loop {
            let t = ep.poll_transmit(now, &mut buf[hl..hl + room])?;
            let Some(sdi) = t.sdi else {
                // In the clear: back to the start of the buffer.
                buf.copy_within(hl..hl + t.len, 0);
                return Some(t);
            };
            let len = hl + t.len + ICV_LEN;
            let flow = self.flow(self.local, t.dst, self.ev_map.apply(t.ev.get()));
            let sealed = match (self.tss.get_mut(sdi.get()), flow) {
                (Some(d), Some(flow)) => {
                    // Domains without an SSI write a 12-byte header: the
                    // UET bytes then start 4 bytes in.
                    let skip = hl - d.config().header_len();
                    d.seal_uet(&mut buf[skip..len], &flow).map(|_| skip)
                }
                _ => Err(SealError::NoKey),
            };
            match sealed {
                Ok(0) => return Some(Transmit { len, ..t }),
                Ok(skip) => {
                    buf.copy_within(skip..len, 0);
                    return Some(Transmit {
                        len: len - skip,
                        ..t
                    });
                }
                Err(e) => {
                    self.seal_failed += 1;
                    tracing::debug!(sdi = sdi.get(), "sealing failed: {e:?}");
                }
            }
        }
    }

    /// Installs `key` on the AN not in use by domain `sdi` and sends with
    /// it from now on; the old key is still accepted for the domain's
    /// rotation window (make-before-break, `docs/security.md` §3).
    pub fn rotate(&mut self, now: Instant, sdi: u32, key: SecretKey) -> Result<(), String> {
        let d = self
            .tss
            .get_mut(sdi)
            .ok_or_else(|| format!("no domain {sdi}"))?;
        let an = !d.tx_an();
        // The AN about to be used may still hold the key before the last
        // one, inside its window: retire it first.
        let _ = d.retire(an);
        d.install_key(an, DomainKey::Key(key))
            .map_err(|e| format!("{e:?}"))?;
        d.activate(an, now).map_err(|e| format!("{e:?}"))?;
        self.rotations += 1;
        Ok(())
    }

    /// Retires keys whose rotation window has passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.tss.poll_timeout().is_some_and(|t| t <= now) {
            self.tss.handle_timeout(now);
        }
    }

    /// The counters.
    #[must_use]
    pub fn stats(&self) -> TssStats {
        let mut s = TssStats {
            seal_failed: self.seal_failed,
            rotations: self.rotations,
            ..TssStats::default()
        };
        let mut count = |name: &'static str, n: u64| {
            if n > 0 {
                *s.drops.entry(name).or_default() += n;
            }
        };
        count(PLAINTEXT, self.plaintext);
        count(WRONG_JOB, self.wrong_job);
        for r in DropReason::ALL {
            count(r.name(), self.tss.unclaimed().get(r));
        }
        for d in self.tss.domains() {
            for r in DropReason::ALL {
                count(r.name(), d.stats().drops.get(r));
            }
        }
        for d in self.tss.domains() {
            s.sealed += d.stats().sealed;
            s.opened += d.stats().opened;
        }
        s
    }
}

/// The job a datagram's SES header names, if it has one (ACKs without a
/// response, NACKs and control packets have none: their PDC's domain
/// decides).
fn job_named(bytes: &[u8]) -> Option<JobId> {
    if let Some(v) = uet_wire::parse_request_view(bytes) {
        return Some(JobId::from_masked(v.ses.packet().job_id()));
    }
    uet_wire::parse_uet(bytes, false)
        .ok()
        .and_then(|p| p.ses.map(|s| s.job_id()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    /// A directory of key files for one test, removed when it ends (also
    /// when the test fails).
    struct KeyDir(PathBuf);

    impl KeyDir {
        fn new(test: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("uetd-keys-{}-{test}", std::process::id()));
            fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }

        fn file(&self, name: &str, bytes: &[u8], mode: u32) -> PathBuf {
            file_in(&self.0, name, bytes, mode)
        }
    }

    impl Drop for KeyDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn file_in(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> PathBuf {
        let p = dir.join(name);
        let _ = fs::remove_file(&p);
        let mut f = fs::File::create(&p).unwrap();
        f.write_all(bytes).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    const HEX: &str = "07e9724958d9e1f710f594e18e11fd8d4a3582c256ccfecfc5eb1902e556bed4";

    #[test]
    fn key_files_hold_raw_or_hex_keys_readable_by_their_owner_only() {
        let dir = KeyDir::new("formats");
        let file = |name: &str, bytes: &[u8], mode: u32| dir.file(name, bytes, mode);
        let raw = read_key_file(&file("raw", &[0x5a; 32], 0o600)).unwrap();
        assert_eq!(raw.expose(), &[0x5a; 32]);
        let hex = read_key_file(&file("hex", format!("{HEX}\n").as_bytes(), 0o400)).unwrap();
        assert_eq!(hex.expose()[..2], [0x07, 0xe9]);
        assert_eq!(hex.expose()[31], 0xd4);

        let e = read_key_file(&file("open", &[0x5a; 32], 0o640)).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("readable by group or others (mode 0640): chmod 600"),
            "{msg}"
        );
        let e = read_key_file(&file("short", &[0x5a; 31], 0o600)).unwrap_err();
        assert!(e.to_string().contains("holds 31 bytes"), "{e}");
        let e = read_key_file(&file("nothex", &[b'g'; 64], 0o600)).unwrap_err();
        assert!(matches!(e, KeyFileError::Format { len: 64, .. }), "{e}");
        let e = read_key_file(Path::new("/nonexistent/key")).unwrap_err();
        assert!(matches!(e, KeyFileError::Read { .. }), "{e}");
    }

    /// Neither a key, nor a domain, nor the layer prints key bytes.
    #[test]
    fn keys_never_show_in_debug_output() {
        let dir = KeyDir::new("debug");
        let key = read_key_file(&dir.file("dbg", HEX.as_bytes(), 0o600)).unwrap();
        let job = TssJob::with_key_file(3, "k".into());
        let t = WorkerTss::new(
            0,
            &[job],
            vec![key.clone()],
            "10.0.0.1".parse().unwrap(),
            4793,
            false,
            EvMap::IDENTITY,
        );
        for s in [format!("{key:?}"), format!("{t:?}"), format!("{t:#?}")] {
            assert!(!s.contains("07e9") && !s.contains("7, 233"), "{s}");
            assert!(!s.to_lowercase().contains(&HEX[..8]), "{s}");
        }
    }

    #[test]
    fn a_configuration_with_more_workers_needs_an_ssi() {
        let mut j = TssJob::with_key_file(1, "k".into());
        assert!(j.check(1).is_ok());
        let e = j.check(2).unwrap_err().to_string();
        assert!(e.contains("set ssi"), "{e}");
        j.ssi = Some(0x100);
        assert!(j.check(2).is_ok());
        j.replay_window = 100;
        assert!(
            j.check(2)
                .unwrap_err()
                .to_string()
                .contains("replay_window")
        );
    }
}
