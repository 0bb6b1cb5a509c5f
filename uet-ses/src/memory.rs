//! Registered memory and the checks every remote access passes
//! (`docs/protocol-notes.md` §4.1 addressing fields, §4.7 return codes).
//!
//! A [`MemoryTable`] maps a [`RegionAddr`] `(job, pid_on_fep,
//! resource_index)` to a registered region: its memory key, resource-index
//! generation, access rights, length, absolute base address and enable
//! state. [`MemoryTable::check`] validates one remote access and hands back a
//! [`Checked`] window: the only way this crate writes into registered memory,
//! and it cannot reach outside the window it validated.
//!
//! # Check order
//!
//! [`MemoryTable::check`] stops at the first failure, in this order:
//!
//! | # | condition | return code |
//! |---|---|---|
//! | 1 | no region registered under the job | `BAD_JOB_ID` |
//! | 2 | the job has no region for this `pid_on_fep` | `BAD_PID` |
//! | 3 | the RI was never registered for this pid | `BAD_INDEX` |
//! | 4 | the RI was deregistered (a tombstone, see below) | `BAD_GENERATION` |
//! | 5 | the region is disabled ([`MemoryTable::disable`]) | `DISABLED` |
//! | 6 | its current generation is disabled ([`MemoryTable::disable_generation`]) | `DISABLED_GEN` |
//! | 7 | `ri_generation` differs from the region's | `BAD_GENERATION` |
//! | 8 | `memory_key` differs (or the request has no key and the region is not [`Access::UNKEYED`]) | `BAD_MKEY` |
//! | 9 | the region lacks a needed right | `PERM_VIOLATION` |
//! | 10 | the access length exceeds the region length | `TOO_LONG` |
//! | 11 | the start lies before the region (absolute addressing), `offset + len` overflows `u64`, or the end lies beyond the region | `BAD_ADDR` |
//!
//! The order runs from the coarsest identity to the finest detail, so a
//! request always gets the code for the first thing it got wrong; REFPROV
//! checks disabled-generation before generation mismatch, then the key, then
//! rights, then the address range (§4.7, `uet_rx_rd_req_pkt`). Steps 10/11 are
//! this crate's mapping: `TOO_LONG` when the access could not fit the region
//! at any offset, `BAD_ADDR` when it could but not at this one.
//!
//! # Relative and absolute addressing
//!
//! Both forms name the region by `(job, pid, ri)` through this table (the
//! notes list addressing semantics as a gap, §10). With `rel` = 1 the
//! request's `buffer_offset` is an offset from the region start: the only
//! mode the daemon offers and the mode this crate's initiator sends. With
//! `rel` = 0 `buffer_offset` is an absolute address that must fall in
//! `base..base + len`, where `base` is given at registration (default 0, in
//! which case both modes coincide).
//!
//! # Generations
//!
//! A new RI starts at the table's first generation (0 unless made with
//! [`MemoryTable::with_first_generation`]). [`MemoryTable::deregister`] leaves
//! a tombstone holding the next generation, so a request still carrying the
//! old key and generation fails with `BAD_GENERATION`, and the next
//! registration of that RI gets the bumped generation (wrapping after 255).
//! Tombstones keep the job and pid known; [`MemoryTable::remove_pid`] forgets
//! a process entirely (its RIs restart at the first generation afterwards).
//!
//! A table that lives as long as its process forgets every tombstone when it
//! ends: with keys that stay the same across a restart (configured or chosen
//! by the application), a request from before the restart would validate
//! again if every table started at the same generation. The caller that owns
//! the randomness (the daemon) therefore draws each table's first generation
//! at start; a stale address then fails `BAD_GENERATION` unless the two draws
//! meet (1 in 256: the generation field is 8 bits, `docs/protocol-notes.md` §4.1).

use core::fmt;
use core::ops::Range;
use rustc_hash::FxHashMap as HashMap;

pub use uet_wire::Access;
use uet_wire::ses::ReturnCode;
use uet_wire::{JobId, PidOnFep, ResourceIndex, RiGeneration};

use crate::types::{MemoryKey, RegionAddr};

/// Memory that remote operations may read and write.
///
/// The daemon backs it with shared memory (a memfd mapping); tests use
/// `Vec<u8>`. Callers in this crate only ever pass ranges inside
/// `0..len()` that a [`MemoryTable::check`] validated, so implementations may
/// assume in-range arguments, but must stay memory safe regardless (plain
/// slices do: the provided impls ignore an out-of-range call).
pub trait RegisteredMemory {
    /// Length in bytes. Must not change while the memory is registered.
    fn len(&self) -> u64;

    /// Whether the memory is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies `data` to `offset..offset + data.len()`.
    fn write_at(&mut self, offset: u64, data: &[u8]);

    /// Copies `offset..offset + out.len()` into `out`.
    fn read_at(&self, offset: u64, out: &mut [u8]);
}

/// The index range `offset..offset + n` in a slice of `len` bytes, if it fits.
fn span(len: usize, offset: u64, n: usize) -> Option<Range<usize>> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(n)?;
    (end <= len).then_some(start..end)
}

impl RegisteredMemory for [u8] {
    fn len(&self) -> u64 {
        u64::try_from(<[u8]>::len(self)).unwrap_or(u64::MAX)
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) {
        if let Some(r) = span(<[u8]>::len(self), offset, data.len()) {
            self[r].copy_from_slice(data);
        }
    }

    fn read_at(&self, offset: u64, out: &mut [u8]) {
        if let Some(r) = span(<[u8]>::len(self), offset, out.len()) {
            out.copy_from_slice(&self[r]);
        }
    }
}

impl RegisteredMemory for Vec<u8> {
    fn len(&self) -> u64 {
        RegisteredMemory::len(self.as_slice())
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) {
        self.as_mut_slice().write_at(offset, data);
    }

    fn read_at(&self, offset: u64, out: &mut [u8]) {
        self.as_slice().read_at(offset, out);
    }
}

impl<T: RegisteredMemory + ?Sized> RegisteredMemory for Box<T> {
    fn len(&self) -> u64 {
        (**self).len()
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) {
        (**self).write_at(offset, data);
    }

    fn read_at(&self, offset: u64, out: &mut [u8]) {
        (**self).read_at(offset, out);
    }
}

/// How `buffer_offset` is read (the request's `rel` flag, §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Addressing {
    /// `rel` = 1: an offset from the start of the region.
    Relative,
    /// `rel` = 0: an absolute address in `base..base + len`.
    Absolute,
}

impl Addressing {
    /// From the `rel` flag.
    #[must_use]
    pub const fn from_rel(rel: bool) -> Self {
        if rel { Self::Relative } else { Self::Absolute }
    }
}

/// What to register: the address, key, rights and absolute base of a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionSpec {
    /// Where the region is reachable.
    pub addr: RegionAddr,
    /// The key remote requests must carry.
    pub key: MemoryKey,
    /// Granted rights.
    pub access: Access,
    /// The absolute address of byte 0, for `rel` = 0 requests.
    pub base: u64,
}

impl RegionSpec {
    /// A region at `addr` with `key` and `access`, base 0.
    #[must_use]
    pub const fn new(addr: RegionAddr, key: MemoryKey, access: Access) -> Self {
        Self {
            addr,
            key,
            access,
            base: 0,
        }
    }

    /// The same with absolute base address `base`.
    #[must_use]
    pub const fn with_base(mut self, base: u64) -> Self {
        self.base = base;
        self
    }
}

/// What a successful registration returns: everything a remote peer needs
/// to address the region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    /// `job_id`.
    pub job: JobId,
    /// `pid_on_fep`.
    pub pid: PidOnFep,
    /// `resource_index`.
    pub ri: ResourceIndex,
    /// The memory key.
    pub key: MemoryKey,
    /// The generation requests must carry.
    pub generation: RiGeneration,
}

impl Registration {
    /// The region's address.
    #[must_use]
    pub const fn addr(&self) -> RegionAddr {
        RegionAddr::new(self.job, self.pid, self.ri)
    }
}

/// Local misuse of the [`MemoryTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemError {
    /// The RI already holds a registered region.
    RiInUse,
    /// No region is registered at that address.
    NotRegistered,
    /// `base + len` overflows `u64`.
    BaseOverflow,
}

impl fmt::Display for MemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::RiInUse => "resource index already registered",
            Self::NotRegistered => "no region registered at that address",
            Self::BaseOverflow => "base address + length overflows",
        })
    }
}

impl core::error::Error for MemError {}

/// One registered region.
pub struct MemEntry<M> {
    key: MemoryKey,
    generation: RiGeneration,
    access: Access,
    len: u64,
    base: u64,
    enabled: bool,
    generation_enabled: bool,
    memory: M,
}

impl<M> MemEntry<M> {
    /// The memory key.
    #[must_use]
    pub const fn key(&self) -> MemoryKey {
        self.key
    }

    /// The current generation.
    #[must_use]
    pub const fn generation(&self) -> RiGeneration {
        self.generation
    }

    /// The rights.
    #[must_use]
    pub const fn access(&self) -> Access {
        self.access
    }

    /// Length in bytes (fixed at registration).
    #[must_use]
    pub const fn len(&self) -> u64 {
        self.len
    }

    /// Whether the region has no bytes.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The absolute address of byte 0.
    #[must_use]
    pub const fn base(&self) -> u64 {
        self.base
    }

    /// Whether requests may reach it: neither the region nor its
    /// generation is disabled.
    #[must_use]
    pub const fn is_enabled(&self) -> bool {
        self.enabled && self.generation_enabled
    }

    /// The memory.
    pub const fn memory(&self) -> &M {
        &self.memory
    }

    /// The memory, writable (for the owner; remote writes go through
    /// [`MemoryTable::check`]).
    pub const fn memory_mut(&mut self) -> &mut M {
        &mut self.memory
    }

    /// Check steps 5-11 (module docs), once the live region is found: the
    /// region-relative start of the window.
    fn validate(&self, req: &AccessRequest) -> Result<u64, ReturnCode> {
        if let Some(rc) = self.disabled_code() {
            return Err(rc);
        }
        if req.generation != self.generation {
            return Err(ReturnCode::BadGeneration);
        }
        let key_ok = match req.key {
            Some(k) => k == self.key,
            None => self.access.contains(Access::UNKEYED),
        };
        if !key_ok {
            return Err(ReturnCode::BadMkey);
        }
        if !self.access.contains(req.needed) {
            return Err(ReturnCode::PermViolation);
        }
        if req.len > self.len {
            return Err(ReturnCode::TooLong);
        }
        let start = match req.addressing {
            Addressing::Relative => req.offset,
            Addressing::Absolute => req
                .offset
                .checked_sub(self.base)
                .ok_or(ReturnCode::BadAddr)?,
        };
        let end = start.checked_add(req.len).ok_or(ReturnCode::BadAddr)?;
        if end > self.len {
            return Err(ReturnCode::BadAddr);
        }
        Ok(start)
    }

    /// The first failure of check steps 5-6 (module docs), if any.
    pub(crate) const fn disabled_code(&self) -> Option<ReturnCode> {
        if !self.enabled {
            Some(ReturnCode::Disabled)
        } else if !self.generation_enabled {
            Some(ReturnCode::DisabledGen)
        } else {
            None
        }
    }
}

impl<M> fmt::Debug for MemEntry<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemEntry")
            .field("key", &self.key)
            .field("generation", &self.generation)
            .field("access", &self.access)
            .field("len", &self.len)
            .field("base", &self.base)
            .field("enabled", &self.enabled)
            .field("generation_enabled", &self.generation_enabled)
            .finish_non_exhaustive()
    }
}

/// A slot of the RI table: a live region, or the tombstone of a
/// deregistered one holding the generation the next registration gets.
enum Slot<M> {
    Live(MemEntry<M>),
    Retired { next: RiGeneration },
}

/// One remote access to validate (see the check order in the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessRequest {
    /// `(job, pid, ri)` from the request header.
    pub addr: RegionAddr,
    /// `ri_generation` from the request header.
    pub generation: RiGeneration,
    /// `memory_key`; `None` for the small request form, which has none.
    pub key: Option<MemoryKey>,
    /// Rights the operation needs.
    pub needed: Access,
    /// The `rel` flag.
    pub addressing: Addressing,
    /// `buffer_offset`: where the access starts.
    pub offset: u64,
    /// How many bytes it covers.
    pub len: u64,
}

/// A window [`MemoryTable::check_window`] validated: the region's index
/// and the window, valid while the table's epoch is the one it was taken
/// at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    epoch: u64,
    ix: usize,
    start: u64,
    len: u64,
}

/// A validated window `start..start + len` (region-relative) of one region:
/// proof that [`MemoryTable::check`] passed, and the only handle through
/// which remote data is written.
pub struct Checked<'a, M> {
    entry: &'a mut MemEntry<M>,
    start: u64,
    len: u64,
}

impl<M: RegisteredMemory> Checked<'_, M> {
    /// Region-relative offset of the window.
    #[must_use]
    pub const fn start(&self) -> u64 {
        self.start
    }

    /// Length of the window.
    #[must_use]
    pub const fn len(&self) -> u64 {
        self.len
    }

    /// Whether the window is empty.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The region.
    #[must_use]
    pub fn entry(&self) -> &MemEntry<M> {
        self.entry
    }

    /// Writes `data` at `at` bytes into the window; `false` (and nothing
    /// written) if it does not fit in the window.
    pub fn write(&mut self, at: u64, data: &[u8]) -> bool {
        match self.offset_of(at, data.len()) {
            Some(off) => {
                self.entry.memory.write_at(off, data);
                true
            }
            None => false,
        }
    }

    /// Reads `out.len()` bytes from `at` bytes into the window; `false` (and
    /// `out` untouched) if that is not inside the window.
    pub fn read(&self, at: u64, out: &mut [u8]) -> bool {
        match self.offset_of(at, out.len()) {
            Some(off) => {
                self.entry.memory.read_at(off, out);
                true
            }
            None => false,
        }
    }

    fn offset_of(&self, at: u64, n: usize) -> Option<u64> {
        let end = at.checked_add(u64::try_from(n).ok()?)?;
        (end <= self.len).then(|| self.start + at)
    }
}

impl<M> fmt::Debug for Checked<'_, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Checked")
            .field("start", &self.start)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// The registered regions of one endpoint, keyed by [`RegionAddr`].
///
/// `M` is the memory type; the default, a boxed `Send` trait object, lets
/// one table hold differently backed regions and move between threads.
///
/// One flat map from the full address to its slot, so that a remote access
/// costs one lookup; which jobs and processes are known (check steps 1-2) is
/// counted on the side and consulted only when that lookup fails.
///
/// The slots live in a vector, the map giving each address's index, so that
/// [`MemoryTable::check`] can remember the last access it validated and
/// answer the same request again (every packet of a multi-packet write
/// checks the same whole-message window) without the lookup or the checks.
/// Every change to the table forgets it.
pub struct MemoryTable<M = Box<dyn RegisteredMemory + Send>> {
    /// Address → index in `entries`.
    slots: HashMap<RegionAddr, usize>,
    /// The slots, each with its address (to re-index the one moved by a
    /// removal).
    entries: Vec<(RegionAddr, Slot<M>)>,
    /// The last request [`MemoryTable::check`] validated, the index of its
    /// region and the window's start; `None` after any change.
    last: Option<(AccessRequest, usize, u64)>,
    /// Counts the changes: a [`Window`] of an older epoch is stale.
    epoch: u64,
    /// Slots (live or tombstones) per process: a process is known while it
    /// has one.
    pids: HashMap<(JobId, PidOnFep), usize>,
    /// Known processes per job: a job is known while it has one.
    jobs: HashMap<JobId, usize>,
    live: usize,
    /// The generation of an RI registered for the first time.
    first_generation: RiGeneration,
}

impl<M> Default for MemoryTable<M> {
    fn default() -> Self {
        Self {
            slots: HashMap::default(),
            entries: Vec::new(),
            last: None,
            epoch: 0,
            pids: HashMap::default(),
            jobs: HashMap::default(),
            live: 0,
            first_generation: RiGeneration::default(),
        }
    }
}

impl<M> fmt::Debug for MemoryTable<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryTable")
            .field("jobs", &self.jobs.len())
            .field("regions", &self.live)
            .finish()
    }
}

impl<M: RegisteredMemory> MemoryTable<M> {
    /// An empty table.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty table whose RIs start at generation `first` (see
    /// "Generations" above).
    #[must_use]
    pub fn with_first_generation(first: RiGeneration) -> Self {
        Self {
            first_generation: first,
            ..Self::default()
        }
    }

    /// Number of live (registered) regions.
    #[must_use]
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no region is registered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Registers `memory` as described by `spec`. The generation is the
    /// table's first generation for an RI never used before, or the
    /// tombstone's next generation after a [`MemoryTable::deregister`].
    pub fn register(&mut self, spec: RegionSpec, memory: M) -> Result<Registration, MemError> {
        let len = memory.len();
        if spec.base.checked_add(len).is_none() {
            return Err(MemError::BaseOverflow);
        }
        self.changed();
        let generation = match self.slot(spec.addr) {
            Some(Slot::Live(_)) => return Err(MemError::RiInUse),
            Some(Slot::Retired { next }) => *next,
            None => {
                let pid_slots = self.pids.entry((spec.addr.job, spec.addr.pid)).or_default();
                if *pid_slots == 0 {
                    *self.jobs.entry(spec.addr.job).or_default() += 1;
                }
                *pid_slots += 1;
                self.first_generation
            }
        };
        let live = Slot::Live(MemEntry {
            key: spec.key,
            generation,
            access: spec.access,
            len,
            base: spec.base,
            enabled: true,
            generation_enabled: true,
            memory,
        });
        match self.slots.get(&spec.addr) {
            Some(&ix) => {
                if let Some((_, slot)) = self.entries.get_mut(ix) {
                    *slot = live;
                }
            }
            None => {
                self.slots.insert(spec.addr, self.entries.len());
                self.entries.push((spec.addr, live));
            }
        }
        self.live += 1;
        Ok(Registration {
            job: spec.addr.job,
            pid: spec.addr.pid,
            ri: spec.addr.ri,
            key: spec.key,
            generation,
        })
    }

    /// The generation a registration at `addr` would get now: the table's
    /// first generation for an RI never used (or forgotten with its
    /// process), the tombstone's after a deregistration. For a live RI,
    /// whose registration would be refused, the generation it gets after
    /// being deregistered. A registrar that puts the generation into the
    /// key ([`MemoryKey::compose`]) asks this first.
    #[must_use]
    pub fn next_generation(&self, addr: RegionAddr) -> RiGeneration {
        match self.slot(addr) {
            Some(Slot::Live(e)) => RiGeneration::from_masked(e.generation.get().wrapping_add(1)),
            Some(Slot::Retired { next }) => *next,
            None => self.first_generation,
        }
    }

    /// Removes a region and returns its memory. The RI keeps a tombstone
    /// with the generation bumped, so stale requests fail `BAD_GENERATION`.
    pub fn deregister(&mut self, addr: RegionAddr) -> Result<M, MemError> {
        self.changed();
        let slot = self.slot_mut(addr).ok_or(MemError::NotRegistered)?;
        let next = match slot {
            Slot::Live(e) => RiGeneration::from_masked(e.generation.get().wrapping_add(1)),
            Slot::Retired { .. } => return Err(MemError::NotRegistered),
        };
        match core::mem::replace(slot, Slot::Retired { next }) {
            Slot::Live(e) => {
                self.live -= 1;
                Ok(e.memory)
            }
            Slot::Retired { .. } => Err(MemError::NotRegistered),
        }
    }

    /// Disables a region: requests get `DISABLED` until [`MemoryTable::enable`].
    pub fn disable(&mut self, addr: RegionAddr) -> Result<(), MemError> {
        self.entry_mut(addr)?.enabled = false;
        Ok(())
    }

    /// Disables the region's current generation: requests get
    /// `DISABLED_GEN` until [`MemoryTable::enable`] (or a deregister and
    /// re-register, which moves to a new generation).
    pub fn disable_generation(&mut self, addr: RegionAddr) -> Result<(), MemError> {
        self.entry_mut(addr)?.generation_enabled = false;
        Ok(())
    }

    /// Clears both kinds of disable.
    pub fn enable(&mut self, addr: RegionAddr) -> Result<(), MemError> {
        let e = self.entry_mut(addr)?;
        e.enabled = true;
        e.generation_enabled = true;
        Ok(())
    }

    /// Forgets a process: all its regions (returned) and tombstones. Its job
    /// and pid become unknown (`BAD_JOB_ID` / `BAD_PID`) unless other
    /// entries keep them.
    pub fn remove_pid(&mut self, job: JobId, pid: PidOnFep) -> Vec<M> {
        if self.pids.remove(&(job, pid)).is_none() {
            return Vec::new();
        }
        if let Some(n) = self.jobs.get_mut(&job) {
            *n -= 1;
            if *n == 0 {
                self.jobs.remove(&job);
            }
        }
        self.changed();
        // One pass: the process's slots leave (their memory in registration
        // order), the rest close up, and the map is re-indexed.
        let mine = |a: &RegionAddr| a.job == job && a.pid == pid;
        self.slots.retain(|a, _| !mine(a));
        let removed: Vec<M> = self
            .entries
            .extract_if(.., |(a, _)| mine(a))
            .filter_map(|(_, slot)| match slot {
                Slot::Live(e) => Some(e.memory),
                Slot::Retired { .. } => None,
            })
            .collect();
        for (ix, (a, _)) in self.entries.iter().enumerate() {
            if let Some(at) = self.slots.get_mut(a) {
                *at = ix;
            }
        }
        self.live -= removed.len();
        removed
    }

    /// The live region at `addr`.
    #[must_use]
    pub fn get(&self, addr: RegionAddr) -> Option<&MemEntry<M>> {
        match self.slot(addr)? {
            Slot::Live(e) => Some(e),
            Slot::Retired { .. } => None,
        }
    }

    /// The live region at `addr`, writable.
    pub fn get_mut(&mut self, addr: RegionAddr) -> Option<&mut MemEntry<M>> {
        match self.slot_mut(addr)? {
            Slot::Live(e) => Some(e),
            Slot::Retired { .. } => None,
        }
    }

    /// Check steps 1-2 alone: `BAD_JOB_ID` if the job is unknown, `BAD_PID`
    /// if the pid is unknown in it. Used for sends, which name a process
    /// rather than a region.
    pub fn check_process(&self, job: JobId, pid: PidOnFep) -> Result<(), ReturnCode> {
        known_process(&self.jobs, &self.pids, job, pid)
    }

    /// Validates one remote access (the order is in the module docs) and
    /// returns the window it may touch.
    ///
    /// The same request as the last one validated, with no change to the
    /// table since, is answered from memory: the same window of the same
    /// region, without the lookup or the checks (what
    /// [`MemoryTable::check_general`] would answer, tested).
    #[inline]
    pub fn check(&mut self, req: &AccessRequest) -> Result<Checked<'_, M>, ReturnCode> {
        if let Some((last, ix, start)) = self.last
            && last == *req
        {
            return match self.entries.get_mut(ix) {
                Some((_, Slot::Live(entry))) => Ok(Checked {
                    entry,
                    start,
                    len: req.len,
                }),
                // Never: any change forgets `last`.
                _ => Err(ReturnCode::BadGeneration),
            };
        }
        self.check_general(req)
    }

    /// [`MemoryTable::check`] for every request: the lookup and the checks.
    /// A request that passes is remembered.
    pub fn check_general(&mut self, req: &AccessRequest) -> Result<Checked<'_, M>, ReturnCode> {
        let Some(&ix) = self.slots.get(&req.addr) else {
            return Err(missing(&self.jobs, &self.pids, req.addr));
        };
        let entry = match self.entries.get_mut(ix) {
            None => return Err(missing(&self.jobs, &self.pids, req.addr)),
            Some((_, Slot::Retired { .. })) => return Err(ReturnCode::BadGeneration),
            Some((_, Slot::Live(e))) => e,
        };
        let start = entry.validate(req)?;
        self.last = Some((*req, ix, start));
        Ok(Checked {
            entry,
            start,
            len: req.len,
        })
    }

    /// [`MemoryTable::check`] without borrowing the region: the
    /// region-relative start of the validated window.
    pub fn resolve(&self, req: &AccessRequest) -> Result<u64, ReturnCode> {
        match self.slot(req.addr) {
            None => Err(missing(&self.jobs, &self.pids, req.addr)),
            Some(Slot::Retired { .. }) => Err(ReturnCode::BadGeneration),
            Some(Slot::Live(e)) => e.validate(req),
        }
    }

    /// Something changed that may change what a check answers: forgets the
    /// remembered check and makes every [`Window`] stale.
    fn changed(&mut self) {
        self.last = None;
        self.epoch += 1;
    }

    /// [`MemoryTable::check`], remembered for use again while the table is
    /// unchanged ([`MemoryTable::window`]).
    pub(crate) fn check_window(&mut self, req: &AccessRequest) -> Result<Window, ReturnCode> {
        let start = self.check(req)?.start();
        // Every check that passes leaves its region's index here.
        let (_, ix, _) = self.last.ok_or(ReturnCode::BadGeneration)?;
        Ok(Window {
            epoch: self.epoch,
            ix,
            start,
            len: req.len,
        })
    }

    /// The window `w` validated, without the lookup and the checks: what
    /// [`MemoryTable::check`] gives for the same request while nothing
    /// changed; `None` once anything did.
    #[inline]
    pub(crate) fn window(&mut self, w: &Window) -> Option<Checked<'_, M>> {
        if w.epoch != self.epoch {
            return None;
        }
        match self.entries.get_mut(w.ix) {
            Some((_, Slot::Live(entry))) => Some(Checked {
                entry,
                start: w.start,
                len: w.len,
            }),
            _ => None,
        }
    }

    fn entry_mut(&mut self, addr: RegionAddr) -> Result<&mut MemEntry<M>, MemError> {
        // Disabling or enabling changes what a check answers.
        self.changed();
        self.get_mut(addr).ok_or(MemError::NotRegistered)
    }

    fn slot(&self, addr: RegionAddr) -> Option<&Slot<M>> {
        let &ix = self.slots.get(&addr)?;
        self.entries.get(ix).map(|(_, s)| s)
    }

    fn slot_mut(&mut self, addr: RegionAddr) -> Option<&mut Slot<M>> {
        let &ix = self.slots.get(&addr)?;
        self.entries.get_mut(ix).map(|(_, s)| s)
    }
}

/// Check steps 1-2 (see [`MemoryTable::check_process`]).
fn known_process(
    jobs: &HashMap<JobId, usize>,
    pids: &HashMap<(JobId, PidOnFep), usize>,
    job: JobId,
    pid: PidOnFep,
) -> Result<(), ReturnCode> {
    if !jobs.contains_key(&job) {
        return Err(ReturnCode::BadJobId);
    }
    if !pids.contains_key(&(job, pid)) {
        return Err(ReturnCode::BadPid);
    }
    Ok(())
}

/// The code for an address with no slot: check steps 1-3.
fn missing(
    jobs: &HashMap<JobId, usize>,
    pids: &HashMap<(JobId, PidOnFep), usize>,
    addr: RegionAddr,
) -> ReturnCode {
    match known_process(jobs, pids, addr.job, addr.pid) {
        Err(rc) => rc,
        Ok(()) => ReturnCode::BadIndex,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(job: u32, pid: u16, ri: u16) -> RegionAddr {
        RegionAddr::new(
            JobId::new(job).unwrap(),
            PidOnFep::new(pid).unwrap(),
            ResourceIndex::new(ri).unwrap(),
        )
    }

    const KEY: MemoryKey = MemoryKey(0xabcd);
    const RW: Access = Access::REMOTE_WRITE.union(Access::REMOTE_READ);

    /// Job 7, pid 3, ri 5: a 64-byte region, key 0xabcd, read+write.
    fn table() -> (MemoryTable<Vec<u8>>, Registration) {
        let mut t = MemoryTable::new();
        let reg = t
            .register(RegionSpec::new(addr(7, 3, 5), KEY, RW), vec![0u8; 64])
            .unwrap();
        (t, reg)
    }

    fn req(reg: &Registration, offset: u64, len: u64) -> AccessRequest {
        AccessRequest {
            addr: reg.addr(),
            generation: reg.generation,
            key: Some(reg.key),
            needed: Access::REMOTE_WRITE,
            addressing: Addressing::Relative,
            offset,
            len,
        }
    }

    fn code(t: &mut MemoryTable<Vec<u8>>, r: AccessRequest) -> Result<u64, ReturnCode> {
        t.check(&r).map(|c| c.start())
    }

    #[test]
    fn register_returns_generation_zero_and_rejects_reuse() {
        let (mut t, reg) = table();
        assert_eq!(reg.generation.get(), 0);
        assert_eq!(reg.key, KEY);
        assert_eq!(t.len(), 1);
        assert_eq!(
            t.register(RegionSpec::new(addr(7, 3, 5), KEY, RW), vec![]),
            Err(MemError::RiInUse)
        );
        assert_eq!(
            t.register(
                RegionSpec::new(addr(7, 3, 6), KEY, RW).with_base(u64::MAX),
                vec![0; 2]
            ),
            Err(MemError::BaseOverflow)
        );
    }

    #[test]
    fn each_failure_has_its_code_in_order() {
        let (mut t, reg) = table();
        assert_eq!(code(&mut t, req(&reg, 8, 8)), Ok(8));

        let mut r = req(&reg, 0, 1);
        r.addr.job = JobId::new(8).unwrap();
        assert_eq!(code(&mut t, r), Err(ReturnCode::BadJobId));
        let mut r = req(&reg, 0, 1);
        r.addr.pid = PidOnFep::new(4).unwrap();
        assert_eq!(code(&mut t, r), Err(ReturnCode::BadPid));
        let mut r = req(&reg, 0, 1);
        r.addr.ri = ResourceIndex::new(6).unwrap();
        assert_eq!(code(&mut t, r), Err(ReturnCode::BadIndex));
        let mut r = req(&reg, 0, 1);
        r.generation = RiGeneration::new(1).unwrap();
        assert_eq!(code(&mut t, r), Err(ReturnCode::BadGeneration));
        let mut r = req(&reg, 0, 1);
        r.key = Some(MemoryKey(1));
        assert_eq!(code(&mut t, r), Err(ReturnCode::BadMkey));
        let mut r = req(&reg, 0, 1);
        r.key = None;
        assert_eq!(code(&mut t, r), Err(ReturnCode::BadMkey));
        let mut r = req(&reg, 0, 1);
        r.needed = Access::ATOMIC;
        assert_eq!(code(&mut t, r), Err(ReturnCode::PermViolation));
        assert_eq!(code(&mut t, req(&reg, 0, 65)), Err(ReturnCode::TooLong));
        assert_eq!(code(&mut t, req(&reg, 60, 8)), Err(ReturnCode::BadAddr));
        assert_eq!(
            code(&mut t, req(&reg, u64::MAX, 2)),
            Err(ReturnCode::BadAddr)
        );
        assert_eq!(code(&mut t, req(&reg, 64, 0)), Ok(64));
        assert_eq!(code(&mut t, req(&reg, 65, 0)), Err(ReturnCode::BadAddr));

        // An earlier failure wins over a later one: bad key and too long.
        let mut r = req(&reg, 0, 100);
        r.key = Some(MemoryKey(1));
        assert_eq!(code(&mut t, r), Err(ReturnCode::BadMkey));
    }

    #[test]
    fn disable_and_disable_generation() {
        let (mut t, reg) = table();
        t.disable_generation(reg.addr()).unwrap();
        assert_eq!(code(&mut t, req(&reg, 0, 1)), Err(ReturnCode::DisabledGen));
        t.disable(reg.addr()).unwrap();
        assert_eq!(code(&mut t, req(&reg, 0, 1)), Err(ReturnCode::Disabled));
        // DISABLED comes before a generation mismatch.
        let mut r = req(&reg, 0, 1);
        r.generation = RiGeneration::new(9).unwrap();
        assert_eq!(code(&mut t, r), Err(ReturnCode::Disabled));
        t.enable(reg.addr()).unwrap();
        assert_eq!(code(&mut t, req(&reg, 0, 1)), Ok(0));
        assert!(t.get(reg.addr()).unwrap().is_enabled());
        assert_eq!(t.disable(addr(1, 1, 1)), Err(MemError::NotRegistered));
    }

    #[test]
    fn deregister_bumps_the_generation() {
        let (mut t, reg) = table();
        let mem = t.deregister(reg.addr()).unwrap();
        assert_eq!(mem.len(), 64);
        assert!(t.is_empty());
        // The tombstone answers stale requests with BAD_GENERATION.
        assert_eq!(
            code(&mut t, req(&reg, 0, 1)),
            Err(ReturnCode::BadGeneration)
        );
        assert_eq!(
            t.deregister(reg.addr()).err(),
            Some(MemError::NotRegistered)
        );
        let again = t
            .register(RegionSpec::new(reg.addr(), KEY, RW), vec![0; 64])
            .unwrap();
        assert_eq!(again.generation.get(), 1);
        assert_eq!(
            code(&mut t, req(&reg, 0, 1)),
            Err(ReturnCode::BadGeneration)
        );
        assert_eq!(code(&mut t, req(&again, 0, 1)), Ok(0));
    }

    #[test]
    fn a_table_starts_its_ris_at_its_first_generation() {
        let first = RiGeneration::new(0xa7).unwrap();
        let spec = RegionSpec::new(addr(7, 3, 5), KEY, RW);
        let mut t: MemoryTable<Vec<u8>> = MemoryTable::with_first_generation(first);
        let reg = t.register(spec, vec![0u8; 64]).unwrap();
        assert_eq!(reg.generation, first);
        // A request with the generation a table starting at 0 hands out
        // (a stale address from before a restart) fails.
        let mut r = req(&reg, 0, 8);
        r.generation = RiGeneration::default();
        assert_eq!(code(&mut t, r), Err(ReturnCode::BadGeneration));
        assert_eq!(code(&mut t, req(&reg, 0, 8)), Ok(0));
        // Deregistering bumps from there; a forgotten process starts over
        // at the first generation.
        t.deregister(reg.addr()).unwrap();
        assert_eq!(
            t.register(spec, vec![0u8; 64]).unwrap().generation.get(),
            0xa8
        );
        t.remove_pid(reg.job, reg.pid);
        assert_eq!(t.register(spec, vec![0u8; 64]).unwrap().generation, first);
    }

    #[test]
    fn next_generation_is_what_the_next_registration_gets() {
        let first = RiGeneration::new(0xfe).unwrap();
        let spec = RegionSpec::new(addr(7, 3, 5), KEY, RW);
        let mut t: MemoryTable<Vec<u8>> = MemoryTable::with_first_generation(first);
        let mut seen = Vec::new();
        for round in 0..4 {
            let next = t.next_generation(spec.addr);
            let reg = t.register(spec, vec![0u8; 64]).unwrap();
            assert_eq!(reg.generation, next, "round {round}");
            seen.push(next.get());
            // Live: the generation after a deregistration.
            let after = t.next_generation(spec.addr);
            t.deregister(spec.addr).unwrap();
            assert_eq!(t.next_generation(spec.addr), after);
        }
        assert_eq!(seen, [0xfe, 0xff, 0, 1]);
        t.remove_pid(JobId::new(7).unwrap(), PidOnFep::new(3).unwrap());
        assert_eq!(t.next_generation(spec.addr), first);
        assert_eq!(t.next_generation(addr(7, 3, 6)), first);
    }

    #[test]
    fn generation_wraps() {
        let (mut t, reg) = table();
        let mut g = reg.generation;
        for _ in 0..256 {
            t.deregister(reg.addr()).unwrap();
            g = t
                .register(RegionSpec::new(reg.addr(), KEY, RW), vec![0; 64])
                .unwrap()
                .generation;
        }
        assert_eq!(g.get(), 0);
    }

    #[test]
    fn absolute_addressing_uses_the_base() {
        let mut t = MemoryTable::new();
        let reg = t
            .register(
                RegionSpec::new(addr(1, 1, 1), KEY, RW).with_base(0x1000),
                vec![0u8; 16],
            )
            .unwrap();
        let mut r = req(&reg, 0x1008, 8);
        r.addressing = Addressing::Absolute;
        assert_eq!(code(&mut t, r), Ok(8));
        r.offset = 0xfff;
        assert_eq!(code(&mut t, r), Err(ReturnCode::BadAddr));
        r.offset = 0x1009;
        assert_eq!(code(&mut t, r), Err(ReturnCode::BadAddr));
        // The same offset read relative is beyond the region.
        let r = req(&reg, 0x1008, 8);
        assert_eq!(code(&mut t, r), Err(ReturnCode::BadAddr));
    }

    #[test]
    fn unkeyed_regions_accept_keyless_requests() {
        let mut t = MemoryTable::new();
        let reg = t
            .register(
                RegionSpec::new(addr(1, 1, 1), KEY, Access::REMOTE_WRITE | Access::UNKEYED),
                vec![0u8; 16],
            )
            .unwrap();
        let mut r = req(&reg, 0, 4);
        r.key = None;
        assert_eq!(code(&mut t, r), Ok(0));
        // With a key present, it must still be right.
        r.key = Some(MemoryKey(5));
        assert_eq!(code(&mut t, r), Err(ReturnCode::BadMkey));
    }

    #[test]
    fn checked_window_cannot_write_outside() {
        let (mut t, reg) = table();
        let mut c = t.check(&req(&reg, 8, 4)).unwrap();
        assert!(c.write(0, &[1, 2, 3, 4]));
        assert!(!c.write(1, &[9, 9, 9, 9]));
        assert!(!c.write(u64::MAX, &[9]));
        let mut out = [0u8; 4];
        assert!(c.read(0, &mut out));
        assert_eq!(out, [1, 2, 3, 4]);
        let mem = t.get(reg.addr()).unwrap().memory();
        assert_eq!(&mem[6..14], &[0, 0, 1, 2, 3, 4, 0, 0]);
    }

    #[test]
    fn process_check_and_remove_pid() {
        let (mut t, reg) = table();
        assert_eq!(t.check_process(reg.job, reg.pid), Ok(()));
        assert_eq!(
            t.check_process(reg.job, PidOnFep::new(9).unwrap()),
            Err(ReturnCode::BadPid)
        );
        assert_eq!(
            t.check_process(JobId::new(1).unwrap(), reg.pid),
            Err(ReturnCode::BadJobId)
        );
        t.deregister(reg.addr()).unwrap();
        // A tombstone keeps the process known.
        assert_eq!(t.check_process(reg.job, reg.pid), Ok(()));
        assert!(t.remove_pid(reg.job, reg.pid).is_empty());
        assert_eq!(t.check_process(reg.job, reg.pid), Err(ReturnCode::BadJobId));
    }

    /// Removing a process returns its regions in registration order and
    /// leaves every other process's region where lookups find it.
    #[test]
    fn remove_pid_keeps_the_other_processes_regions() {
        let mut t: MemoryTable<Vec<u8>> = MemoryTable::new();
        for ri in 1..=6u16 {
            // pids 1 and 2 interleaved; each region's memory is its RI.
            let a = addr(1, 1 + ri % 2, ri);
            let spec = RegionSpec::new(a, MemoryKey(u64::from(ri)), RW);
            t.register(spec, vec![ri as u8]).unwrap();
        }
        let gone = t.remove_pid(JobId::new(1).unwrap(), PidOnFep::new(2).unwrap());
        assert_eq!(gone, [vec![1u8], vec![3], vec![5]]);
        for ri in [2u16, 4, 6] {
            let e = t.get(addr(1, 1, ri)).expect("still registered");
            assert_eq!(e.key(), MemoryKey(u64::from(ri)));
            assert_eq!(e.memory(), &vec![ri as u8]);
        }
        assert!(t.get(addr(1, 2, 3)).is_none());
    }

    #[test]
    fn slices_ignore_out_of_range_calls() {
        let mut v = vec![0u8; 4];
        v.write_at(3, &[1, 2]);
        v.write_at(u64::MAX, &[1]);
        assert_eq!(v, [0, 0, 0, 0]);
        let mut out = [7u8; 2];
        v.read_at(3, &mut out);
        assert_eq!(out, [7, 7]);
        let b: Box<dyn RegisteredMemory> = Box::new(vec![1u8, 2]);
        assert_eq!(b.len(), 2);
        assert!(!b.is_empty());
    }

    #[test]
    fn access_debug() {
        assert_eq!(format!("{:?}", Access::NONE), "NONE");
        assert_eq!(format!("{RW:?}"), "REMOTE_WRITE | REMOTE_READ");
        assert!(RW.contains(Access::REMOTE_READ));
        assert!(!RW.contains(Access::RECV));
        assert_eq!(Access::from_bits_truncate(0xff).bits(), 0x1f);
    }

    mod cached_check {
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Op {
            Register {
                a: u8,
                key: u8,
                len: u8,
                base: u8,
            },
            Deregister(u8),
            Disable(u8),
            DisableGen(u8),
            Enable(u8),
            RemovePid(u8),
            Check {
                a: u8,
                gen_: u8,
                key: u8,
                rel: bool,
                off: u8,
                len: u8,
            },
            /// The previous check again (the per-packet case).
            Again,
        }

        /// Four addresses over two processes of one job.
        fn at(a: u8) -> RegionAddr {
            addr(7, 1 + u16::from(a % 4 / 2), 1 + u16::from(a % 2))
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                (any::<u8>(), 0u8..2, 1u8..64, 0u8..32)
                    .prop_map(|(a, key, len, base)| Op::Register { a, key, len, base }),
                any::<u8>().prop_map(Op::Deregister),
                any::<u8>().prop_map(Op::Disable),
                any::<u8>().prop_map(Op::DisableGen),
                any::<u8>().prop_map(Op::Enable),
                any::<u8>().prop_map(Op::RemovePid),
                (any::<u8>(), 0u8..2, 0u8..2, any::<bool>(), 0u8..48, 0u8..40).prop_map(
                    |(a, gen_, key, rel, off, len)| Op::Check {
                        a,
                        gen_,
                        key,
                        rel,
                        off,
                        len
                    }
                ),
                Just(Op::Again),
                Just(Op::Again),
                Just(Op::Again),
            ]
        }

        /// Runs a check on `t` (the cached path or the general one),
        /// writes a marker through the window, and reports the outcome.
        fn run(
            t: &mut MemoryTable<Vec<u8>>,
            req: &AccessRequest,
            general: bool,
            mark: u8,
        ) -> Result<(u64, u64), ReturnCode> {
            let mut c = if general {
                t.check_general(req)?
            } else {
                t.check(req)?
            };
            let (start, len) = (c.start(), c.len());
            if len > 0 {
                assert!(c.write(len - 1, &[mark]));
            }
            Ok((start, len))
        }

        proptest! {
            /// `check` (which answers a repeated request from memory) gives
            /// the same verdicts and writes the same bytes of the same
            /// regions as `check_general`, through registrations,
            /// deregistrations, disables and process removals.
            #[test]
            fn check_answers_like_the_general_check(ops in proptest::collection::vec(op(), 0..120)) {
                let mut fast: MemoryTable<Vec<u8>> = MemoryTable::new();
                let mut slow: MemoryTable<Vec<u8>> = MemoryTable::new();
                let mut last: Option<AccessRequest> = None;
                for (i, op) in ops.into_iter().enumerate() {
                    let mark = i as u8;
                    match op {
                        Op::Register { a, key, len, base } => {
                            let spec = RegionSpec::new(at(a), MemoryKey(u64::from(key)), RW)
                                .with_base(u64::from(base));
                            let mem = vec![0u8; usize::from(len)];
                            prop_assert_eq!(
                                fast.register(spec, mem.clone()).map(|r| r.generation),
                                slow.register(spec, mem).map(|r| r.generation)
                            );
                        }
                        Op::Deregister(a) => prop_assert_eq!(
                            fast.deregister(at(a)).map(|m| m.len()),
                            slow.deregister(at(a)).map(|m| m.len())
                        ),
                        Op::Disable(a) => prop_assert_eq!(fast.disable(at(a)), slow.disable(at(a))),
                        Op::DisableGen(a) => prop_assert_eq!(
                            fast.disable_generation(at(a)),
                            slow.disable_generation(at(a))
                        ),
                        Op::Enable(a) => prop_assert_eq!(fast.enable(at(a)), slow.enable(at(a))),
                        Op::RemovePid(a) => {
                            let (job, pid) = (at(a).job, at(a).pid);
                            prop_assert_eq!(fast.remove_pid(job, pid), slow.remove_pid(job, pid));
                        }
                        Op::Check { a, gen_, key, rel, off, len } => {
                            let req = AccessRequest {
                                addr: at(a),
                                generation: RiGeneration::from_masked(gen_),
                                key: Some(MemoryKey(u64::from(key))),
                                needed: Access::REMOTE_WRITE,
                                addressing: Addressing::from_rel(rel),
                                offset: u64::from(off),
                                len: u64::from(len),
                            };
                            last = Some(req);
                            prop_assert_eq!(run(&mut fast, &req, false, mark), run(&mut slow, &req, true, mark));
                        }
                        Op::Again => {
                            if let Some(req) = last {
                                prop_assert_eq!(run(&mut fast, &req, false, mark), run(&mut slow, &req, true, mark));
                            }
                        }
                    }
                    for a in 0..4 {
                        let f = fast.get(at(a)).map(|e| (e.generation(), e.is_enabled(), e.memory().clone()));
                        let s = slow.get(at(a)).map(|e| (e.generation(), e.is_enabled(), e.memory().clone()));
                        prop_assert_eq!(f, s);
                    }
                    prop_assert_eq!(fast.len(), slow.len());
                }
            }
        }
    }
}
