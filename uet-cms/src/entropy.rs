//! Entropy-value selection (`docs/protocol-notes.md` §6, spec §3.6.16).
//!
//! An [`EvSelector`] picks the entropy value (EV) of each packet and learns
//! from the feedback the CCC passes to `process_ev` (§5.1: ACK without ECN →
//! [`EvFeedback::Good`], `m` = 1 → [`EvFeedback::Ecn`], a non-last-hop trim →
//! [`EvFeedback::Nack`], an RTO → [`EvFeedback::Timeout`]; a last-hop trim is
//! Good or Ecn). The modes:
//!
//! * **Single path** ([`EvSelector::Single`], ROD): one EV, changed only when
//!   the caller asks ([`EvSelector::reroute`]); the spec's pacing of reroutes
//!   (when idle, or at most once per `t_reroute` ≥ 10 RTT, never for last-link
//!   congestion) needs the RTT and stays with the caller.
//! * **Oblivious spraying** ([`EvSelector::Oblivious`]): every EV of the
//!   `2^bits` space once, in a pseudo-random order, before any repeats; the
//!   order is re-randomised on each wrap (HTSIM `uec_mp.cpp`
//!   `UecMpOblivious`: `ev = (idx ^ xor) & (N-1)`, the xor redrawn per wrap,
//!   the bits above the mask fixed per source — here `base`).
//! * **REPS** ([`EvSelector::Reps`]): EVs whose ACK came back without ECN are
//!   recycled through a small circular buffer (8 entries, §6), oldest first;
//!   ECN-marked, NACKed or lost EVs are never recycled; with nothing to
//!   recycle, a random EV. A TIMEOUT (which with trimming means a failure, not
//!   congestion) freezes the buffer: it is cycled without being consumed until
//!   10 ms have passed, then it is cleared and 16 random "explore" EVs follow
//!   (HTSIM `UecMpReps` / `buffer_reps.cpp`, `exit_freeze_after` = 1e10 ps).
//! * **Bitmap** ([`EvSelector::Bitmap`], STrack): a 4-bit penalty per EV, +1
//!   for ECN, +4 for NACK, 15 (the cap) for TIMEOUT; the oblivious rotation
//!   skips penalised EVs and decrements the first one it skips per pick
//!   (HTSIM `UecMpBitmap`). Path-aware spraying only avoids congested EVs
//!   while at most a configurable fraction — default 50 %, §6 "unless most
//!   paths are congested" — is penalised.
//! * **Mixed** ([`EvSelector::Mixed`], HTSIM's default): the REPS recycle
//!   buffer first, the bitmap when it is empty (HTSIM `UecMpMixed`).
//!
//! Time matters only to REPS freezing: [`EvSelector::next_ev_at`] and
//! [`EvSelector::process_ev_at`] take `now`; the time-less
//! [`EvSelector::next_ev`] and [`EvSelector::process_ev`] never enter (or
//! leave) freeze mode and are otherwise identical.

use uet_wire::EntropyValue;
use uet_wire::rand::Rng;
use uet_wire::time::{Duration, Instant};

/// Feedback for an EV, as `process_ev` receives it (§5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvFeedback {
    /// ACKed without an ECN mark (or NACKed for a last-hop trim without ECN).
    Good,
    /// ACKed or NACKed with `m` = 1.
    Ecn,
    /// NACKed for a non-last-hop trim.
    Nack,
    /// Inferred lost (RTO).
    Timeout,
}

/// Which EV-selection scheme an [`EvConfig`] builds (§6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EvMode {
    /// One EV, changed only by [`EvSelector::reroute`] (ROD).
    Single,
    /// Oblivious spraying.
    Oblivious,
    /// REPS recycling with freezing and exploration.
    Reps,
    /// STrack-style per-EV penalties.
    Bitmap,
    /// REPS recycle buffer first, then the bitmap — HTSIM's default
    /// (`main_uec.cpp`) and the combination §11 of the notes recommends.
    #[default]
    Mixed,
}

/// Configuration of an [`EvSelector`]; `Default` gives the spec's choices.
#[derive(Debug, Clone, PartialEq)]
pub struct EvConfig {
    /// The scheme (default [`EvMode::Mixed`], HTSIM's default).
    pub mode: EvMode,
    /// log2 of the EV space, ≤ 16 (default 8: the spec's "typically 256",
    /// §6; HTSIM uses 64, see [`EvConfig::htsim`]).
    pub ev_bits: u8,
    /// The bits above the sprayed ones (default `0xc000`, as `CccConfig`).
    pub base: u16,
    /// REPS recycle buffer entries (default 8, §6 / HTSIM `repsBufferSize`).
    pub reps_buffer: usize,
    /// How long REPS stays frozen after a TIMEOUT (default 10 ms, HTSIM
    /// `exit_freeze_after` = 1e10 ps). `None` disables freezing — HTSIM only
    /// freezes with trimming on, since without trimming a timeout may be
    /// plain congestion loss.
    pub freeze_exit: Option<Duration>,
    /// Random EVs REPS sends after leaving freeze mode (default 16, HTSIM
    /// `explore_counter`).
    pub explore_count: u16,
    /// Path-aware saturation threshold: while more than this fraction of the
    /// EV space is penalised, the bitmap stops skipping (default 0.5, §6
    /// "unless most paths are congested … default 50 %").
    pub saturation: f64,
    /// Consecutive packets of a CCC that leave on one EV before the scheme
    /// picks the next (default 1: every packet is sprayed on its own, §6).
    /// Above 1 the CCC sprays runs of packets (flowlets) instead: a
    /// sender that hands runs of equal datagrams to the kernel as one
    /// segmentation-offload send needs them on one UDP source port. A run
    /// ends early when its EV draws ECN, NACK or loss feedback \[I\].
    pub burst: u32,
}

impl Default for EvConfig {
    fn default() -> Self {
        Self {
            mode: EvMode::Mixed,
            ev_bits: 8,
            base: 0xc000,
            reps_buffer: 8,
            freeze_exit: Some(Duration::from_millis(10)),
            explore_count: 16,
            saturation: 0.5,
            burst: 1,
        }
    }
}

impl EvConfig {
    /// HTSIM's defaults: MIXED over `path_entropy_size` = 64 EVs.
    #[must_use]
    pub fn htsim() -> Self {
        Self {
            ev_bits: 6,
            ..Self::default()
        }
    }

    /// The same configuration with another mode.
    #[must_use]
    pub fn with_mode(self, mode: EvMode) -> Self {
        Self { mode, ..self }
    }
}

/// An EV space: `2^bits` values whose upper bits are those of `base`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Space {
    base: u16,
    bits: u8,
}

impl Space {
    fn new(base: u16, bits: u8) -> Self {
        Self {
            base,
            bits: bits.min(16),
        }
    }

    fn mask(self) -> u32 {
        (1u32 << self.bits) - 1
    }

    fn size(self) -> u32 {
        1u32 << self.bits
    }

    /// The index of `ev` in the space (its masked bits).
    fn index(self, ev: EntropyValue) -> usize {
        (u32::from(ev.get()) & self.mask()) as usize
    }

    /// The EV at `index`.
    fn ev(self, index: u32) -> EntropyValue {
        let mask = self.mask();
        EntropyValue::from_masked((index & mask) as u16 | (self.base & !(mask as u16)))
    }

    /// `ev` moved into this space (same index, our upper bits).
    fn normalize(self, ev: EntropyValue) -> EntropyValue {
        self.ev(self.index(ev) as u32)
    }

    fn random(self, rng: &mut impl Rng) -> EntropyValue {
        self.ev(rng.below(u64::from(self.size())) as u32)
    }
}

/// The oblivious rotation: position `idx` of the permutation `i ↦ i ^ xor`.
fn rotation_index(space: Space, idx: u32, xor: u16) -> u32 {
    (idx ^ u32::from(xor)) & space.mask()
}

/// Steps the rotation; a new permutation (xor) on each wrap.
fn rotation_advance(space: Space, idx: &mut u32, xor: &mut u16, rng: &mut impl Rng) {
    *idx += 1;
    if *idx > space.mask() {
        *idx = 0;
        *xor = rng.next_u32() as u16;
    }
}

/// REPS's recycle buffer: at most `capacity` EVs, oldest first; a push
/// onto a full buffer overwrites the oldest. (A `VecDeque` did the same
/// with a pop and a push per EV.) Its `Debug` is the list of its EVs,
/// oldest first, as the `VecDeque`'s was.
#[derive(Clone)]
struct Ring {
    slots: Vec<EntropyValue>,
    /// Index in `slots` of the oldest EV.
    head: usize,
    len: usize,
}

impl Ring {
    fn new(capacity: usize) -> Self {
        Self {
            slots: vec![EntropyValue::from_masked(0); capacity.max(1)],
            head: 0,
            len: 0,
        }
    }

    const fn len(&self) -> usize {
        self.len
    }

    /// The most EVs it holds.
    fn capacity(&self) -> usize {
        self.slots.len()
    }

    const fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    /// The index in `slots` of the `i`-th oldest position.
    #[inline]
    fn at(&self, i: usize) -> usize {
        let j = self.head + i;
        if j >= self.slots.len() {
            j - self.slots.len()
        } else {
            j
        }
    }

    /// The `i`-th oldest EV.
    #[inline]
    fn get(&self, i: usize) -> Option<EntropyValue> {
        if i >= self.len {
            return None;
        }
        self.slots.get(self.at(i)).copied()
    }

    /// Appends `ev`, overwriting the oldest when full.
    #[inline]
    fn push(&mut self, ev: EntropyValue) {
        if self.len == self.slots.len() {
            if let Some(s) = self.slots.get_mut(self.head) {
                *s = ev;
            }
            self.head = self.at(1);
        } else {
            let j = self.at(self.len);
            if let Some(s) = self.slots.get_mut(j) {
                *s = ev;
            }
            self.len += 1;
        }
    }

    /// The EVs, oldest first.
    fn iter(&self) -> impl Iterator<Item = EntropyValue> + '_ {
        (0..self.len).filter_map(|i| self.get(i))
    }
}

impl core::fmt::Debug for Ring {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// REPS state: the recycle buffer, freezing and exploration (HTSIM
/// `CircularBufferREPS` + `UecMpReps`).
#[derive(Debug, Clone)]
pub struct Reps {
    space: Space,
    /// Recycled EVs, oldest first; at most its capacity, the oldest
    /// overwritten.
    buffer: Ring,
    /// The newest `fresh` entries have not been reused yet. (Reuse takes the
    /// oldest fresh entry, so the fresh ones are always a suffix.)
    fresh: usize,
    /// While frozen: leave freeze mode after this instant.
    frozen_until: Option<Instant>,
    /// While frozen: the next entry to reuse, cycling over the buffer.
    cursor: usize,
    freeze_exit: Option<Duration>,
    explore_count: u16,
    explore_left: u16,
}

impl Reps {
    fn new(space: Space, capacity: usize, freeze_exit: Option<Duration>, explore: u16) -> Self {
        Self {
            space,
            buffer: Ring::new(capacity),
            fresh: 0,
            frozen_until: None,
            cursor: 0,
            freeze_exit,
            explore_count: explore,
            explore_left: 0,
        }
    }

    /// Whether freeze mode is on.
    pub fn is_frozen(&self) -> bool {
        self.frozen_until.is_some()
    }

    /// EVs that may still be recycled, oldest first.
    pub fn fresh(&self) -> impl Iterator<Item = EntropyValue> + '_ {
        self.buffer.iter().skip(self.buffer.len() - self.fresh)
    }

    /// GOOD feedback for `evs` at `now`: what `process` does for each in
    /// turn. Only the first can thaw (a freeze that has not ended by `now`
    /// does not end at the same `now`, and recycling never freezes), so the
    /// thaw check runs once.
    fn process_good(&mut self, now: Instant, evs: &[EntropyValue]) {
        if evs.is_empty() {
            return;
        }
        self.maybe_thaw(Some(now));
        self.add_all(evs);
    }

    /// [`Reps::add`] for each of `evs` in turn, at once: the buffer keeps
    /// the newest `capacity` of its entries and `evs`, and `fresh` grows by
    /// `evs.len()` up to the buffer's length (tested against the loop).
    fn add_all(&mut self, evs: &[EntropyValue]) {
        let new = &evs[evs.len().saturating_sub(self.buffer.capacity())..];
        for &ev in new {
            self.buffer.push(self.space.normalize(ev));
        }
        self.fresh = (self.fresh + evs.len()).min(self.buffer.len());
    }

    fn add(&mut self, ev: EntropyValue) {
        self.buffer.push(self.space.normalize(ev));
        self.fresh = (self.fresh + 1).min(self.buffer.len());
    }

    /// The oldest fresh EV, consumed (REPS `remove_earliest_fresh`).
    fn take_fresh(&mut self) -> Option<EntropyValue> {
        if self.fresh == 0 {
            return None;
        }
        let ev = self.buffer.get(self.buffer.len() - self.fresh)?;
        self.fresh -= 1;
        Some(ev)
    }

    /// Leaves freeze mode once its time is up: the buffer is cleared and
    /// `explore_count` random EVs follow.
    fn maybe_thaw(&mut self, now: Option<Instant>) {
        if let (Some(until), Some(now)) = (self.frozen_until, now)
            && now > until
        {
            self.frozen_until = None;
            self.buffer.clear();
            self.fresh = 0;
            self.cursor = 0;
            self.explore_left = self.explore_count;
        }
    }

    fn process(&mut self, now: Option<Instant>, ev: EntropyValue, feedback: EvFeedback) {
        // HTSIM order: enter freeze, leave it if due, then recycle.
        if feedback == EvFeedback::Timeout
            && self.frozen_until.is_none()
            && self.explore_left == 0
            && let (Some(exit), Some(now)) = (self.freeze_exit, now)
        {
            self.frozen_until = Some(now + exit);
            self.cursor = 0;
        }
        self.maybe_thaw(now);
        if feedback == EvFeedback::Good {
            self.add(ev);
        }
    }

    fn next(&mut self, now: Option<Instant>, rng: &mut impl Rng) -> EntropyValue {
        // HTSIM checks the exit only on feedback; a sender whose feedback
        // stopped would stay frozen, so the pick checks too [I].
        self.maybe_thaw(now);
        if self.explore_left > 0 {
            self.explore_left -= 1;
            return self.space.random(rng);
        }
        if self.is_frozen() {
            if self.buffer.is_empty() {
                return self.space.random(rng);
            }
            let ev = self
                .buffer
                .get(self.cursor % self.buffer.len())
                .unwrap_or_else(|| self.space.ev(0));
            self.cursor = (self.cursor + 1) % self.buffer.len();
            return ev;
        }
        match self.take_fresh() {
            Some(ev) => ev,
            None => self.space.random(rng),
        }
    }
}

/// Bitmap (STrack) state: a penalty per EV over the oblivious rotation
/// (HTSIM `UecMpBitmap`).
#[derive(Debug, Clone)]
pub struct Bitmap {
    space: Space,
    idx: u32,
    xor: u16,
    /// One 4-bit penalty per EV (held in a byte, never above
    /// [`Bitmap::MAX_PENALTY`]).
    penalties: Vec<u8>,
    /// EVs with a penalty > 0.
    penalised: u32,
    /// Skip only while `penalised` ≤ this (the saturation threshold).
    saturation_limit: u32,
}

impl Bitmap {
    /// The penalty cap (4 bits; HTSIM `_max_penalty`), also what a TIMEOUT
    /// sets.
    pub const MAX_PENALTY: u8 = 15;
    /// Penalty added for ECN feedback.
    pub const ECN_PENALTY: u8 = 1;
    /// Penalty added for NACK (non-last-hop trim) feedback.
    pub const NACK_PENALTY: u8 = 4;

    fn new(space: Space, saturation: f64, rng: &mut impl Rng) -> Self {
        let n = space.size();
        let saturation = if saturation.is_nan() {
            1.0
        } else {
            saturation.clamp(0.0, 1.0)
        };
        Self {
            space,
            idx: 0,
            xor: rng.next_u32() as u16,
            penalties: vec![0; n as usize],
            penalised: 0,
            saturation_limit: (f64::from(n) * saturation) as u32,
        }
    }

    /// The penalty of `ev` (by its index in the space).
    pub fn penalty(&self, ev: EntropyValue) -> u8 {
        self.penalties[self.space.index(ev)]
    }

    /// How many EVs carry a penalty.
    pub fn penalised(&self) -> u32 {
        self.penalised
    }

    /// Whether so many EVs are penalised that none is skipped (§6).
    pub fn is_saturated(&self) -> bool {
        self.penalised > self.saturation_limit
    }

    fn process(&mut self, ev: EntropyValue, feedback: EvFeedback) {
        let add = match feedback {
            EvFeedback::Good => return,
            EvFeedback::Ecn => Self::ECN_PENALTY,
            EvFeedback::Nack => Self::NACK_PENALTY,
            EvFeedback::Timeout => Self::MAX_PENALTY,
        };
        let p = &mut self.penalties[self.space.index(ev)];
        if *p == 0 {
            self.penalised += 1;
        }
        *p = p.saturating_add(add).min(Self::MAX_PENALTY);
    }

    fn decrement(&mut self, i: usize) {
        let p = &mut self.penalties[i];
        if *p > 0 {
            *p -= 1;
            if *p == 0 {
                self.penalised -= 1;
            }
        }
    }

    fn next(&mut self, rng: &mut impl Rng) -> EntropyValue {
        let saturated = self.is_saturated();
        let mut skipped = 0u32;
        let mut i = rotation_index(self.space, self.idx, self.xor);
        while self.penalties[i as usize] > 0 {
            if skipped == 0 {
                // Only the first penalised EV met per pick pays a point.
                self.decrement(i as usize);
            }
            // Saturated: use it anyway (its point still decays, or the
            // penalties — which only decay here — would never let go) [I].
            // And never loop past a whole rotation (HTSIM's guard).
            if saturated || skipped >= self.space.size() {
                break;
            }
            skipped += 1;
            rotation_advance(self.space, &mut self.idx, &mut self.xor, rng);
            i = rotation_index(self.space, self.idx, self.xor);
        }
        rotation_advance(self.space, &mut self.idx, &mut self.xor, rng);
        self.space.ev(i)
    }
}

/// MIXED state: a REPS recycle buffer (no freezing, as HTSIM's MIXED uses
/// its legacy REPS) in front of a bitmap.
#[derive(Debug, Clone)]
pub struct Mixed {
    reps: Reps,
    bitmap: Bitmap,
}

impl Mixed {
    /// The recycle buffer.
    pub fn reps(&self) -> &Reps {
        &self.reps
    }

    /// The bitmap.
    pub fn bitmap(&self) -> &Bitmap {
        &self.bitmap
    }
}

/// Chooses the entropy value of each packet.
#[derive(Debug, Clone)]
pub enum EvSelector {
    /// One fixed EV (ROD's single-path mode).
    Single(EntropyValue),
    /// Oblivious spraying over `2^bits` EVs starting at `base`.
    Oblivious {
        /// Base of the EV space (the bits above the mask).
        base: u16,
        /// log2 of the EV space size (≤ 16).
        bits: u8,
        /// Position in the current permutation.
        idx: u32,
        /// The xor that defines the current permutation.
        xor: u16,
    },
    /// REPS: recycle EVs that came back good.
    Reps(Reps),
    /// STrack: skip penalised EVs.
    Bitmap(Bitmap),
    /// REPS recycle buffer first, then the bitmap.
    Mixed(Mixed),
}

impl EvSelector {
    /// Oblivious spraying over `2^bits` values above `base` (bits ≤ 16).
    #[must_use]
    pub fn oblivious(base: u16, bits: u8, rng: &mut impl Rng) -> Self {
        let bits = bits.min(16);
        Self::Oblivious {
            base,
            bits,
            idx: 0,
            xor: rng.next_u32() as u16,
        }
    }

    /// The selector `config` describes. Single-path mode starts on a random
    /// EV of the space.
    #[must_use]
    pub fn from_config(config: &EvConfig, rng: &mut impl Rng) -> Self {
        let space = Space::new(config.base, config.ev_bits);
        let reps = |freeze, explore| Reps::new(space, config.reps_buffer, freeze, explore);
        match config.mode {
            EvMode::Single => Self::Single(space.random(rng)),
            EvMode::Oblivious => Self::oblivious(config.base, config.ev_bits, rng),
            EvMode::Reps => Self::Reps(reps(config.freeze_exit, config.explore_count)),
            EvMode::Bitmap => Self::Bitmap(Bitmap::new(space, config.saturation, rng)),
            EvMode::Mixed => Self::Mixed(Mixed {
                reps: reps(None, 0),
                bitmap: Bitmap::new(space, config.saturation, rng),
            }),
        }
    }

    /// The EV for the next packet, without a clock: REPS does not leave freeze
    /// mode here (see [`EvSelector::next_ev_at`]).
    pub fn next_ev(&mut self, rng: &mut impl Rng) -> EntropyValue {
        self.next(None, rng)
    }

    /// The EV for the next packet sent at `now`.
    pub fn next_ev_at(&mut self, now: Instant, rng: &mut impl Rng) -> EntropyValue {
        self.next(Some(now), rng)
    }

    /// Feedback about an EV, without a clock: REPS does not enter or leave
    /// freeze mode here (see [`EvSelector::process_ev_at`]). Single-path and
    /// oblivious selection ignore feedback by design (and `process_ev` is a
    /// no-op for ROD, §5.1).
    pub fn process_ev(&mut self, ev: EntropyValue, feedback: EvFeedback) {
        self.process(None, ev, feedback);
    }

    /// GOOD feedback for several EVs arriving at `now` (the packets one
    /// ACK acknowledged): the same as [`EvSelector::process_ev_at`] with
    /// [`EvFeedback::Good`] for each in order, in one call.
    pub fn process_good_at(&mut self, now: Instant, evs: &[EntropyValue]) {
        match self {
            // GOOD feedback changes no bitmap penalty.
            Self::Single(_) | Self::Oblivious { .. } | Self::Bitmap(_) => {}
            Self::Reps(reps) => reps.process_good(now, evs),
            Self::Mixed(mixed) => mixed.reps.process_good(now, evs),
        }
    }

    /// Feedback about an EV, arriving at `now`.
    pub fn process_ev_at(&mut self, now: Instant, ev: EntropyValue, feedback: EvFeedback) {
        self.process(Some(now), ev, feedback);
    }

    /// Single path: moves to a new EV, uniformly among the other 16-bit
    /// values except 0 (a UDP source port of 0 means "none"), and returns it.
    /// The spec's pacing of reroutes (§6: when idle or at most once per
    /// `t_reroute` RTTs) is the caller's, which knows the RTT. Spraying
    /// modes do not reroute and return `None`.
    pub fn reroute(&mut self, rng: &mut impl Rng) -> Option<EntropyValue> {
        let Self::Single(ev) = self else {
            return None;
        };
        let cur = ev.get();
        // The 65 534 values other than 0 and `cur`, uniformly.
        let mut new = 1 + rng.below(0xfffe) as u16;
        if cur != 0 && new >= cur {
            new += 1;
        }
        *ev = EntropyValue::from_masked(new);
        Some(*ev)
    }

    /// Whether REPS is in freeze mode.
    pub fn is_frozen(&self) -> bool {
        matches!(self, Self::Reps(r) if r.is_frozen())
    }

    /// The bitmap penalty of `ev`, where there is a bitmap.
    pub fn penalty(&self, ev: EntropyValue) -> Option<u8> {
        match self {
            Self::Bitmap(b) => Some(b.penalty(ev)),
            Self::Mixed(m) => Some(m.bitmap.penalty(ev)),
            _ => None,
        }
    }

    fn next(&mut self, now: Option<Instant>, rng: &mut impl Rng) -> EntropyValue {
        match self {
            Self::Single(ev) => *ev,
            Self::Oblivious {
                base,
                bits,
                idx,
                xor,
            } => {
                let space = Space::new(*base, *bits);
                let ev = space.ev(rotation_index(space, *idx, *xor));
                rotation_advance(space, idx, xor, rng);
                ev
            }
            Self::Reps(reps) => reps.next(now, rng),
            Self::Bitmap(bitmap) => bitmap.next(rng),
            Self::Mixed(mixed) => match mixed.reps.take_fresh() {
                Some(ev) => ev,
                None => mixed.bitmap.next(rng),
            },
        }
    }

    fn process(&mut self, now: Option<Instant>, ev: EntropyValue, feedback: EvFeedback) {
        match self {
            Self::Single(_) | Self::Oblivious { .. } => {}
            Self::Reps(reps) => reps.process(now, ev, feedback),
            Self::Bitmap(bitmap) => bitmap.process(ev, feedback),
            Self::Mixed(mixed) => {
                mixed.bitmap.process(ev, feedback);
                mixed.reps.process(now, ev, feedback);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use uet_wire::rand::Xoshiro256;

    fn ev(v: u16) -> EntropyValue {
        EntropyValue::from_masked(v)
    }

    #[test]
    fn oblivious_uses_every_ev_once_per_round() {
        let mut rng = Xoshiro256::seed_from_u64(7);
        let mut sel = EvSelector::oblivious(0xc000, 8, &mut rng);
        for _round in 0..3 {
            let mut seen = [false; 256];
            for _ in 0..256 {
                let ev = sel.next_ev(&mut rng).get();
                assert_eq!(ev & 0xff00, 0xc000);
                let i = usize::from(ev & 0xff);
                assert!(!seen[i], "EV {ev:#x} repeated within a round");
                seen[i] = true;
            }
        }
    }

    fn reps_config() -> EvConfig {
        EvConfig::default().with_mode(EvMode::Reps)
    }

    fn reps(sel: &EvSelector) -> &Reps {
        match sel {
            EvSelector::Reps(r) => r,
            _ => unreachable!("not REPS"),
        }
    }

    fn bitmap(sel: &EvSelector) -> &Bitmap {
        match sel {
            EvSelector::Bitmap(b) => b,
            EvSelector::Mixed(m) => &m.bitmap,
            _ => unreachable!("no bitmap"),
        }
    }

    /// The EVs the bitmap's rotation will meet next, in order, up to the end
    /// of the current round.
    fn rotation_order(sel: &EvSelector) -> Vec<u16> {
        let b = bitmap(sel);
        (b.idx..b.space.size())
            .map(|i| b.space.ev(rotation_index(b.space, i, b.xor)).get())
            .collect()
    }

    #[test]
    fn defaults_follow_the_spec_and_htsim() {
        let c = EvConfig::default();
        assert_eq!(c.mode, EvMode::Mixed);
        assert_eq!(c.ev_bits, 8);
        assert_eq!(c.reps_buffer, 8);
        assert_eq!(c.freeze_exit, Some(Duration::from_millis(10)));
        assert_eq!(c.explore_count, 16);
        assert!((c.saturation - 0.5).abs() < f64::EPSILON);
        assert_eq!(EvConfig::htsim().ev_bits, 6);
    }

    #[test]
    fn from_config_builds_each_mode_in_its_space() {
        let mut rng = Xoshiro256::seed_from_u64(2);
        for mode in [
            EvMode::Single,
            EvMode::Oblivious,
            EvMode::Reps,
            EvMode::Bitmap,
            EvMode::Mixed,
        ] {
            let cfg = EvConfig {
                ev_bits: 6,
                base: 0xa5c0,
                ..EvConfig::default().with_mode(mode)
            };
            let mut sel = EvSelector::from_config(&cfg, &mut rng);
            for _ in 0..200 {
                let v = sel.next_ev(&mut rng).get();
                assert_eq!(v & !0x3f, 0xa5c0 & !0x3f, "{mode:?} left its space");
            }
        }
    }

    #[test]
    fn single_path_reroutes_only_when_asked() {
        let mut rng = Xoshiro256::seed_from_u64(5);
        let mut sel = EvSelector::Single(ev(0x4242));
        sel.process_ev(ev(0x4242), EvFeedback::Timeout);
        assert_eq!(sel.next_ev(&mut rng).get(), 0x4242, "feedback moved ROD");
        let mut prev = 0x4242;
        for _ in 0..1000 {
            let new = sel.reroute(&mut rng).map(EntropyValue::get);
            let new = new.unwrap_or_default();
            assert_ne!(new, prev);
            assert_ne!(new, 0);
            assert_eq!(sel.next_ev(&mut rng).get(), new);
            prev = new;
        }
        let mut obl = EvSelector::oblivious(0, 8, &mut rng);
        assert_eq!(obl.reroute(&mut rng), None);
    }

    #[test]
    fn reps_recycles_only_good_evs_oldest_first() {
        let mut rng = Xoshiro256::seed_from_u64(11);
        let mut sel = EvSelector::from_config(&reps_config(), &mut rng);
        sel.process_ev(ev(0xc001), EvFeedback::Good);
        sel.process_ev(ev(0xc002), EvFeedback::Good);
        sel.process_ev(ev(0xc0e0), EvFeedback::Ecn);
        sel.process_ev(ev(0xc0e1), EvFeedback::Nack);
        sel.process_ev(ev(0xc0e2), EvFeedback::Timeout);
        sel.process_ev(ev(0xc003), EvFeedback::Good);
        assert!(!sel.is_frozen(), "a timeout without a clock froze REPS");
        let fresh: Vec<_> = reps(&sel).fresh().map(EntropyValue::get).collect();
        assert_eq!(fresh, [0xc001, 0xc002, 0xc003]);
        let picks: Vec<_> = (0..3).map(|_| sel.next_ev(&mut rng).get()).collect();
        assert_eq!(picks, [0xc001, 0xc002, 0xc003]);
        assert_eq!(reps(&sel).fresh().count(), 0, "a recycled EV is used once");
    }

    #[test]
    fn reps_buffer_keeps_the_newest_eight() {
        let mut rng = Xoshiro256::seed_from_u64(12);
        let mut sel = EvSelector::from_config(&reps_config(), &mut rng);
        for i in 0..10 {
            sel.process_ev(ev(0xc000 + i), EvFeedback::Good);
        }
        let picks: Vec<_> = (0..8)
            .map(|_| sel.next_ev(&mut rng).get() - 0xc000)
            .collect();
        assert_eq!(picks, [2, 3, 4, 5, 6, 7, 8, 9]);
        // Recycling puts EVs from outside the space into it.
        sel.process_ev(ev(0x1234), EvFeedback::Good);
        assert_eq!(sel.next_ev(&mut rng).get(), 0xc034);
    }

    #[test]
    fn reps_draws_random_evs_when_empty() {
        let mut rng = Xoshiro256::seed_from_u64(13);
        let mut sel = EvSelector::from_config(&reps_config(), &mut rng);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..512 {
            let v = sel.next_ev(&mut rng).get();
            assert_eq!(v & 0xff00, 0xc000);
            seen.insert(v);
        }
        assert!(seen.len() > 200, "only {} distinct random EVs", seen.len());
    }

    #[test]
    fn reps_freezes_on_timeout_and_explores_after_ten_ms() {
        let mut rng = Xoshiro256::seed_from_u64(14);
        let mut sel = EvSelector::from_config(&reps_config(), &mut rng);
        let t0 = Instant::from_nanos(1_000_000);
        for v in [0xc001, 0xc002, 0xc003] {
            sel.process_ev_at(t0, ev(v), EvFeedback::Good);
        }
        let t1 = t0 + Duration::from_micros(50);
        sel.process_ev_at(t1, ev(0xc0ee), EvFeedback::Timeout);
        assert!(sel.is_frozen());
        // Frozen: the buffer is cycled, not consumed.
        let picks: Vec<_> = (0..7)
            .map(|_| sel.next_ev_at(t1, &mut rng).get() - 0xc000)
            .collect();
        assert_eq!(picks, [1, 2, 3, 1, 2, 3, 1]);
        // Good EVs still join; another timeout does not extend the freeze.
        sel.process_ev_at(t1, ev(0xc004), EvFeedback::Good);
        let exit = t1 + Duration::from_millis(10);
        sel.process_ev_at(exit, ev(0xc0ef), EvFeedback::Timeout);
        let picks: Vec<_> = (0..8)
            .map(|_| sel.next_ev_at(exit, &mut rng).get() - 0xc000)
            .collect();
        assert_eq!(picks, [2, 3, 4, 1, 2, 3, 4, 1]);
        assert!(sel.is_frozen(), "left freeze mode at exactly 10 ms");
        // Past 10 ms the next feedback thaws: buffer cleared, then 16 random
        // explore EVs before the recycled one.
        let later = exit + Duration::from_nanos(1);
        sel.process_ev_at(later, ev(0xc077), EvFeedback::Good);
        assert!(!sel.is_frozen());
        assert_eq!(reps(&sel).explore_left, 16);
        let fresh: Vec<_> = reps(&sel).fresh().map(EntropyValue::get).collect();
        assert_eq!(fresh, [0xc077]);
        // A timeout while exploring does not freeze again.
        sel.process_ev_at(later, ev(0xc0ee), EvFeedback::Timeout);
        assert!(!sel.is_frozen());
        for _ in 0..16 {
            sel.next_ev_at(later, &mut rng);
        }
        assert_eq!(reps(&sel).fresh().count(), 1, "explore used the buffer");
        assert_eq!(sel.next_ev_at(later, &mut rng).get(), 0xc077);
    }

    /// `process_good_at` over a batch leaves the selector exactly as
    /// `process_ev_at(.., Good)` for each EV does, in every mode, frozen
    /// or not, and across a thaw.
    #[test]
    fn good_batch_matches_one_by_one() {
        let modes = [
            EvMode::Reps,
            EvMode::Mixed,
            EvMode::Bitmap,
            EvMode::Oblivious,
        ];
        for mode in modes {
            let mut rng = Xoshiro256::seed_from_u64(21);
            let cfg = EvConfig::default().with_mode(mode);
            let mut a = EvSelector::from_config(&cfg, &mut rng);
            let t0 = Instant::from_nanos(1_000);
            a.process_ev_at(t0, ev(0xc0ee), EvFeedback::Timeout);
            a.process_ev_at(t0, ev(0xc0e0), EvFeedback::Ecn);
            let mut b = a.clone();
            let times = [
                t0,
                t0 + Duration::from_micros(3),
                t0 + Duration::from_millis(11),
            ];
            for (k, t) in times.into_iter().enumerate() {
                let evs: Vec<_> = (0..12).map(|i| ev(0xc000 + 16 * k as u16 + i)).collect();
                for &e in &evs {
                    a.process_ev_at(t, e, EvFeedback::Good);
                }
                b.process_good_at(t, &evs);
                assert_eq!(format!("{a:?}"), format!("{b:?}"), "{mode:?} at {t:?}");
            }
        }
    }

    #[test]
    fn reps_thaws_on_a_pick_when_feedback_stopped() {
        let mut rng = Xoshiro256::seed_from_u64(15);
        let mut sel = EvSelector::from_config(&reps_config(), &mut rng);
        let t0 = Instant::from_nanos(5);
        sel.process_ev_at(t0, ev(0xc001), EvFeedback::Timeout);
        assert!(sel.is_frozen());
        // Frozen with an empty buffer: random EVs.
        let v = sel.next_ev_at(t0, &mut rng).get();
        assert_eq!(v & 0xff00, 0xc000);
        // The time-less call never thaws.
        sel.next_ev(&mut rng);
        assert!(sel.is_frozen());
        sel.next_ev_at(t0 + Duration::from_millis(11), &mut rng);
        assert!(!sel.is_frozen());
        assert_eq!(reps(&sel).explore_left, 15);
    }

    #[test]
    fn reps_without_freeze_ignores_timeouts() {
        let mut rng = Xoshiro256::seed_from_u64(16);
        let cfg = EvConfig {
            freeze_exit: None,
            ..reps_config()
        };
        let mut sel = EvSelector::from_config(&cfg, &mut rng);
        sel.process_ev_at(Instant::ZERO, ev(0xc001), EvFeedback::Timeout);
        assert!(!sel.is_frozen());
    }

    #[test]
    fn bitmap_penalties_add_and_cap() {
        let mut rng = Xoshiro256::seed_from_u64(21);
        let cfg = EvConfig::default().with_mode(EvMode::Bitmap);
        let mut sel = EvSelector::from_config(&cfg, &mut rng);
        let (a, b, c, d) = (ev(0xc001), ev(0xc002), ev(0xc003), ev(0xc004));
        sel.process_ev(a, EvFeedback::Ecn);
        sel.process_ev(a, EvFeedback::Ecn);
        sel.process_ev(b, EvFeedback::Nack);
        sel.process_ev(c, EvFeedback::Timeout);
        sel.process_ev(d, EvFeedback::Good);
        assert_eq!(sel.penalty(a), Some(2));
        assert_eq!(sel.penalty(b), Some(4));
        assert_eq!(sel.penalty(c), Some(15));
        assert_eq!(sel.penalty(d), Some(0));
        for _ in 0..20 {
            sel.process_ev(a, EvFeedback::Ecn);
            sel.process_ev(b, EvFeedback::Nack);
        }
        sel.process_ev(c, EvFeedback::Ecn);
        assert_eq!(sel.penalty(a), Some(15));
        assert_eq!(sel.penalty(b), Some(15));
        assert_eq!(sel.penalty(c), Some(15));
        assert_eq!(bitmap(&sel).penalised(), 3);
        // The index decides: the same EV outside the space is the same slot.
        assert_eq!(sel.penalty(ev(0x0001)), Some(15));
    }

    #[test]
    fn bitmap_skips_penalised_evs_and_decrements_the_first() {
        let mut rng = Xoshiro256::seed_from_u64(22);
        let cfg = EvConfig {
            ev_bits: 4,
            ..EvConfig::default().with_mode(EvMode::Bitmap)
        };
        let mut sel = EvSelector::from_config(&cfg, &mut rng);
        let order = rotation_order(&sel);
        assert_eq!(order.len(), 16);
        sel.process_ev(ev(order[0]), EvFeedback::Ecn);
        sel.process_ev(ev(order[1]), EvFeedback::Nack);
        sel.process_ev(ev(order[3]), EvFeedback::Ecn);
        // Skips order[0] (1 → 0) and order[1] (stays 4), takes order[2].
        assert_eq!(sel.next_ev(&mut rng).get(), order[2]);
        assert_eq!(sel.penalty(ev(order[0])), Some(0));
        assert_eq!(sel.penalty(ev(order[1])), Some(4));
        // Skips order[3] (1 → 0), takes order[4].
        assert_eq!(sel.next_ev(&mut rng).get(), order[4]);
        assert_eq!(sel.penalty(ev(order[3])), Some(0));
        assert_eq!(bitmap(&sel).penalised(), 1);
        // The rest of the round is clean.
        for &o in &order[5..] {
            assert_eq!(sel.next_ev(&mut rng).get(), o);
        }
    }

    #[test]
    fn bitmap_stops_skipping_when_most_evs_are_penalised() {
        let mut rng = Xoshiro256::seed_from_u64(23);
        let cfg = EvConfig {
            ev_bits: 4,
            ..EvConfig::default().with_mode(EvMode::Bitmap)
        };
        let mut sel = EvSelector::from_config(&cfg, &mut rng);
        let order = rotation_order(&sel);
        // 8 of 16 penalised: not "most", still skipping.
        for &o in &order[..8] {
            sel.process_ev(ev(o), EvFeedback::Ecn);
        }
        assert!(!bitmap(&sel).is_saturated());
        let mut probe = sel.clone();
        assert_eq!(probe.next_ev(&mut rng).get(), order[8]);
        // 9 of 16: saturated, the rotation takes penalised EVs in turn and
        // their penalties still decay.
        sel.process_ev(ev(order[8]), EvFeedback::Nack);
        assert!(bitmap(&sel).is_saturated());
        assert_eq!(sel.next_ev(&mut rng).get(), order[0]);
        assert_eq!(sel.penalty(ev(order[0])), Some(0));
        // Back to 8 penalised: skipping again (order[1] pays a point).
        assert!(!bitmap(&sel).is_saturated());
        assert_eq!(sel.next_ev(&mut rng).get(), order[9]);
        assert_eq!(sel.penalty(ev(order[1])), Some(0));
        assert_eq!(bitmap(&sel).penalised(), 7);
    }

    #[test]
    fn bitmap_with_every_ev_penalised_still_picks_one() {
        let mut rng = Xoshiro256::seed_from_u64(24);
        let cfg = EvConfig {
            ev_bits: 3,
            saturation: 1.0,
            ..EvConfig::default().with_mode(EvMode::Bitmap)
        };
        let mut sel = EvSelector::from_config(&cfg, &mut rng);
        for i in 0..8 {
            sel.process_ev(ev(i), EvFeedback::Timeout);
        }
        let v = sel.next_ev(&mut rng).get();
        assert_eq!(v & !7, 0xc000);
    }

    #[test]
    fn mixed_recycles_first_then_uses_the_bitmap() {
        let mut rng = Xoshiro256::seed_from_u64(31);
        let cfg = EvConfig {
            ev_bits: 4,
            ..EvConfig::default()
        };
        let mut sel = EvSelector::from_config(&cfg, &mut rng);
        let order = rotation_order(&sel);
        sel.process_ev(ev(order[9]), EvFeedback::Good);
        sel.process_ev(ev(order[7]), EvFeedback::Good);
        sel.process_ev(ev(order[0]), EvFeedback::Ecn);
        assert_eq!(sel.penalty(ev(order[0])), Some(1));
        // Recycled first, oldest first; the ECN EV is not recycled.
        assert_eq!(sel.next_ev(&mut rng).get(), order[9]);
        assert_eq!(sel.next_ev(&mut rng).get(), order[7]);
        // Then the bitmap, which skips the ECN-marked EV.
        assert_eq!(sel.next_ev(&mut rng).get(), order[1]);
        assert_eq!(sel.next_ev(&mut rng).get(), order[2]);
        // Mixed never freezes.
        sel.process_ev_at(Instant::ZERO, ev(order[3]), EvFeedback::Timeout);
        assert!(!sel.is_frozen());
        assert_eq!(sel.penalty(ev(order[3])), Some(15));
        assert_eq!(sel.next_ev(&mut rng).get(), order[4]);
    }

    /// Sends `picks` packets through `sel` over `2^bits` EVs of which those in
    /// `bad` always come back ECN-marked, feedback arriving `delay` packets
    /// later; returns the fraction of packets sent on a bad EV.
    fn bad_fraction(
        mut sel: EvSelector,
        bits: u8,
        bad: &[bool],
        delay: usize,
        picks: usize,
        rng: &mut Xoshiro256,
    ) -> f64 {
        let mask = (1u16 << bits) - 1;
        let mut inflight = VecDeque::new();
        let mut hits = 0usize;
        for i in 0..picks {
            let now = Instant::from_nanos(i as u64 * 100);
            let e = sel.next_ev_at(now, rng);
            let is_bad = bad[usize::from(e.get() & mask)];
            hits += usize::from(is_bad);
            inflight.push_back((e, is_bad));
            if inflight.len() > delay
                && let Some((e, was_bad)) = inflight.pop_front()
            {
                let fb = if was_bad {
                    EvFeedback::Ecn
                } else {
                    EvFeedback::Good
                };
                sel.process_ev_at(now, e, fb);
            }
        }
        hits as f64 / picks as f64
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// The unit-level "collided flows recover" check: with k of N paths
        /// congested, path-aware selection lands on them far less often than
        /// oblivious spraying, whose share is k/N by construction.
        #[test]
        fn path_aware_selection_avoids_congested_evs(
            bits in 6u8..=8,
            k_frac in 1u32..=4,
            delay in 1usize..=32,
            seed in proptest::prelude::any::<u64>(),
        ) {
            let n = 1usize << bits;
            let k = n * k_frac as usize / 16; // 1/16 .. 1/4 of the space
            let mut rng = Xoshiro256::seed_from_u64(seed);
            let mut bad = vec![false; n];
            let mut placed = 0;
            while placed < k {
                let i = rng.below(n as u64) as usize;
                if !bad[i] {
                    bad[i] = true;
                    placed += 1;
                }
            }
            let picks = 20 * n;
            let cfg = EvConfig { ev_bits: bits, ..EvConfig::default() };
            let mut frac = |mode| {
                let sel = EvSelector::from_config(&cfg.clone().with_mode(mode), &mut rng);
                bad_fraction(sel, bits, &bad, delay, picks, &mut rng)
            };
            let oblivious = frac(EvMode::Oblivious);
            let reps = frac(EvMode::Reps);
            let bitmap = frac(EvMode::Bitmap);
            let mixed = frac(EvMode::Mixed);
            let share = k as f64 / n as f64;
            proptest::prop_assert!((oblivious - share).abs() < 0.01, "oblivious {oblivious} vs {share}");
            proptest::prop_assert!(reps < 0.2 * share, "reps {reps} vs oblivious {oblivious}");
            proptest::prop_assert!(bitmap < 0.7 * share, "bitmap {bitmap} vs oblivious {oblivious}");
            proptest::prop_assert!(mixed < 0.2 * share, "mixed {mixed} vs oblivious {oblivious}");
        }
    }

    #[test]
    fn single_path_keeps_its_ev() {
        let mut rng = Xoshiro256::seed_from_u64(1);
        let mut sel = EvSelector::Single(EntropyValue::from_masked(0x4242));
        assert!((0..10).all(|_| sel.next_ev(&mut rng).get() == 0x4242));
    }

    use proptest::strategy::Strategy as _;

    /// A step of [`good_batches_match_one_by_one`].
    #[derive(Debug, Clone)]
    enum Step {
        Good(Vec<u16>),
        Pick,
        Timeout(u16),
        Wait(u64),
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// `process_good_at` over batches of any size (empty, smaller and
        /// larger than the recycle buffer) leaves REPS and MIXED exactly as
        /// one `process_ev_at(.., Good)` per EV does, with picks (which
        /// consume fresh entries), timeouts (freezing) and time in between,
        /// for buffer sizes 1 to 12.
        #[test]
        fn good_batches_match_one_by_one(
            mixed: bool,
            buffer in 1usize..13,
            steps in proptest::collection::vec(proptest::prop_oneof![
                4 => proptest::collection::vec(proptest::prelude::any::<u16>(), 0..30)
                    .prop_map(Step::Good),
                3 => proptest::prelude::Just(Step::Pick),
                1 => proptest::prelude::any::<u16>().prop_map(Step::Timeout),
                1 => (0u64..20_000).prop_map(Step::Wait),
            ], 0..40),
        ) {
            let mode = if mixed { EvMode::Mixed } else { EvMode::Reps };
            let cfg = EvConfig { reps_buffer: buffer, ..EvConfig::default().with_mode(mode) };
            let (mut ra, mut rb) = (Xoshiro256::seed_from_u64(9), Xoshiro256::seed_from_u64(9));
            let mut a = EvSelector::from_config(&cfg, &mut ra);
            let mut b = EvSelector::from_config(&cfg, &mut rb);
            let mut now = Instant::from_nanos(1);
            for step in steps {
                match step {
                    Step::Good(evs) => {
                        let evs: Vec<_> = evs.into_iter().map(ev).collect();
                        for &e in &evs {
                            a.process_ev_at(now, e, EvFeedback::Good);
                        }
                        b.process_good_at(now, &evs);
                    }
                    Step::Pick => {
                        proptest::prop_assert_eq!(
                            a.next_ev_at(now, &mut ra),
                            b.next_ev_at(now, &mut rb)
                        );
                    }
                    Step::Timeout(e) => {
                        a.process_ev_at(now, ev(e), EvFeedback::Timeout);
                        b.process_ev_at(now, ev(e), EvFeedback::Timeout);
                    }
                    Step::Wait(us) => now += Duration::from_micros(us),
                }
                proptest::prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
            }
        }
    }

    proptest::proptest! {
        /// The recycle ring is the `VecDeque` it replaced: a push onto a full
        /// one drops the oldest; same length, same EVs oldest first, same
        /// answer for every position, through pushes and clears, for
        /// capacities 1 to 9.
        #[test]
        fn ring_is_a_bounded_deque(
            capacity in 1usize..10,
            ops in proptest::collection::vec(proptest::option::of(proptest::prelude::any::<u16>()), 0..60),
        ) {
            let mut ring = Ring::new(capacity);
            let mut model: VecDeque<EntropyValue> = VecDeque::new();
            for op in ops {
                match op {
                    Some(v) => {
                        ring.push(ev(v));
                        if model.len() == capacity {
                            model.pop_front();
                        }
                        model.push_back(ev(v));
                    }
                    None => {
                        ring.clear();
                        model.clear();
                    }
                }
                proptest::prop_assert_eq!(ring.len(), model.len());
                proptest::prop_assert_eq!(ring.is_empty(), model.is_empty());
                for i in 0..capacity + 1 {
                    proptest::prop_assert_eq!(ring.get(i), model.get(i).copied());
                }
                proptest::prop_assert_eq!(format!("{ring:?}"), format!("{model:?}"));
            }
        }
    }
}
