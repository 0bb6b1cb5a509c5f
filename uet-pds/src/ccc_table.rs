//! The CCCs of one endpoint, keyed by (destination, traffic class), with a
//! stable index per CCC.
//!
//! The map holds the index of each CCC in a vector, so that no key is
//! hashed for every data packet sent and every ACK: a PDC caches its CCC's index
//! ([`CccTable::index`]) and reaches it with [`CccTable::at_mut`], no
//! hashing. An index stays valid until its entry is removed
//! ([`CccTable::remove`]), which the engine does only when no PDC refers to
//! the CCC; a freed index is reused by a later entry.
//!
//! Everything keyed behaves exactly like the map it replaces, iteration
//! order included (the map's keys are inserted in the same order, and its
//! order is its keys' order whatever the values): the order in which CCCs
//! are visited drives, e.g., the order of RCCC credit requests (tested
//! against a plain map below).
//!
//! The table also lists the entries handed out mutably (or inserted) since
//! the last [`CccTable::refresh`], as the PDC table does for PDCs: a CCC's
//! timer deadline and whether it raised a flag (RCCC's pending CREDIT_REQ)
//! change only while it is held mutably, so the engine looks again at
//! those CCCs only, not at one CCC per peer on every turn of its loop. The
//! deadlines sit in a heap with lazy invalidation
//! ([`crate::deadline_heap`]): an entry is live while it equals the
//! deadline its slot last queued.

use core::cell::RefCell;
use rustc_hash::FxHashMap as HashMap;
use std::net::IpAddr;

use uet_wire::TrafficClass;
use uet_wire::time::Instant;

use crate::deadline_heap::{DeadlineHeap, Timer};

/// A CCC's key: destination and traffic class.
pub(crate) type CccKey = (IpAddr, TrafficClass);

/// One entry with its key and its timer bookkeeping.
#[derive(Debug)]
struct Slot<T> {
    key: CccKey,
    value: T,
    /// The deadline computed at the last refresh, and its entry in the heap.
    timer: Timer,
}

/// What the refreshes found since they were last taken.
#[derive(Debug, Default)]
struct Watch {
    /// Slab indices handed out mutably or inserted since the last refresh,
    /// each once (`listed`); may name entries removed since.
    touched: Vec<usize>,
    /// Per slab index: listed in `touched` (kept across removal and reuse,
    /// so an index is listed at most once).
    listed: Vec<bool>,
    /// Indices whose entry the flag predicate accepted at a refresh, since
    /// [`CccTable::take_flagged`] last took them, each once (`in_flagged`).
    flagged: Vec<usize>,
    in_flagged: Vec<bool>,
    deadlines: DeadlineHeap<usize>,
}

/// A map of CCCs (or any `T`) by key, each with an index that never changes.
#[derive(Debug)]
pub(crate) struct CccTable<T> {
    index: HashMap<CccKey, usize>,
    slab: Vec<Option<Slot<T>>>,
    free: Vec<usize>,
    /// Brought up to date through `&self` (`Pds::poll_timeout` takes
    /// `&self`); everything else reaches it through `RefCell::get_mut`,
    /// which costs nothing.
    watch: RefCell<Watch>,
}

impl<T> CccTable<T> {
    pub(crate) fn new() -> Self {
        Self {
            index: HashMap::default(),
            slab: Vec::new(),
            free: Vec::new(),
            watch: RefCell::new(Watch::default()),
        }
    }

    /// Lists slab index `ix` as touched.
    #[inline]
    fn touch(watch: &mut Watch, ix: usize) {
        if let Some(l) = watch.listed.get_mut(ix)
            && !*l
        {
            *l = true;
            watch.touched.push(ix);
        }
    }

    /// The index of the entry for `key`.
    #[inline]
    pub(crate) fn index(&self, key: &CccKey) -> Option<usize> {
        self.index.get(key).copied()
    }

    /// The entry at `ix` (an index from [`CccTable::index`]); listed as
    /// touched.
    #[inline]
    pub(crate) fn at_mut(&mut self, ix: usize) -> Option<&mut T> {
        let s = self.slab.get_mut(ix)?.as_mut()?;
        Self::touch(self.watch.get_mut(), ix);
        Some(&mut s.value)
    }

    pub(crate) fn get(&self, key: &CccKey) -> Option<&T> {
        self.slab
            .get(*self.index.get(key)?)?
            .as_ref()
            .map(|s| &s.value)
    }

    /// The entry for `key`, mutably; listed as touched.
    pub(crate) fn get_mut(&mut self, key: &CccKey) -> Option<&mut T> {
        let ix = *self.index.get(key)?;
        self.at_mut(ix)
    }

    /// The key of the entry at `ix`.
    pub(crate) fn key_at(&self, ix: usize) -> Option<CccKey> {
        self.slab.get(ix)?.as_ref().map(|s| s.key)
    }

    /// Removes the entry for `key`; its index may be given to a later one.
    pub(crate) fn remove(&mut self, key: &CccKey) -> Option<T> {
        let ix = self.index.remove(key)?;
        self.free.push(ix);
        self.slab.get_mut(ix)?.take().map(|s| s.value)
    }

    /// Entries in the table.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// Adds an entry for a key not present yet; returns its index. The
    /// entry is listed as touched.
    pub(crate) fn insert_new(&mut self, key: CccKey, v: T) -> usize {
        debug_assert!(!self.index.contains_key(&key));
        let slot = Slot {
            key,
            value: v,
            timer: Timer::default(),
        };
        let ix = match self.free.pop() {
            Some(ix) => {
                self.slab[ix] = Some(slot);
                ix
            }
            None => {
                self.slab.push(Some(slot));
                let w = self.watch.get_mut();
                w.listed.push(false);
                w.in_flagged.push(false);
                self.slab.len() - 1
            }
        };
        self.index.insert(key, ix);
        Self::touch(self.watch.get_mut(), ix);
        ix
    }

    /// Every entry with its key, in the order of the keyed map.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&CccKey, &T)> + '_ {
        self.index
            .iter()
            .filter_map(|(k, &ix)| Some((k, &self.slab.get(ix)?.as_ref()?.value)))
    }

    /// Calls `f` with every entry and its key, mutably, in the order of the
    /// keyed map; every entry is listed as touched.
    pub(crate) fn for_each_mut(&mut self, mut f: impl FnMut(&CccKey, &mut T)) {
        let Self {
            index, slab, watch, ..
        } = self;
        let watch = watch.get_mut();
        for (k, &ix) in index.iter() {
            if let Some(Some(s)) = slab.get_mut(ix) {
                Self::touch(watch, ix);
                f(k, &mut s.value);
            }
        }
    }

    /// Every entry, in no particular order.
    #[cfg(test)]
    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.slab.iter().flatten().map(|s| &s.value)
    }

    /// Sorts `ixs` into the order of the keyed map and drops repeats and
    /// indices of removed entries. Visits the whole map only when there
    /// are two or more to order.
    fn in_map_order(&self, ixs: &mut Vec<usize>) {
        ixs.retain(|&ix| self.slab.get(ix).is_some_and(Option::is_some));
        ixs.sort_unstable();
        ixs.dedup();
        if ixs.len() < 2 {
            return;
        }
        let wanted = core::mem::take(ixs);
        ixs.extend(
            self.index
                .values()
                .copied()
                .filter(|ix| wanted.binary_search(ix).is_ok()),
        );
    }

    /// Brings the deadlines up to date and returns the earliest. Every
    /// entry touched since the last call gets `deadline` computed again
    /// (a deadline that moved earlier is pushed, one that moved later
    /// leaves its entry early in the heap), and is remembered for
    /// [`CccTable::take_flagged`] if `flag` accepts it. Then the top of the
    /// heap is made exact, as the PDC timers' is (`Pds::refresh_timers`).
    pub(crate) fn refresh(
        &self,
        deadline: impl Fn(&T) -> Option<Instant>,
        flag: impl Fn(&T) -> bool,
    ) -> Option<Instant> {
        let mut watch = self.watch.borrow_mut();
        let Watch {
            touched,
            listed,
            flagged,
            in_flagged,
            deadlines,
        } = &mut *watch;
        for ix in touched.drain(..) {
            listed[ix] = false;
            let Some(Some(s)) = self.slab.get(ix) else {
                continue;
            };
            deadlines.offer(ix, deadline(&s.value), &s.timer);
            if !in_flagged[ix] && flag(&s.value) {
                in_flagged[ix] = true;
                flagged.push(ix);
            }
        }
        deadlines.settle(self.index.len(), |ix| self.timer_at(ix))
    }

    /// The timer of the entry at `ix`, if one is there.
    fn timer_at(&self, ix: usize) -> Option<&Timer> {
        self.slab.get(ix)?.as_ref().map(|s| &s.timer)
    }

    /// Takes the entries whose deadline has passed at `now` off the heap
    /// into `out`, in the order of the keyed map (the order a scan of the
    /// map visits them). Call after [`CccTable::refresh`]; an entry taken
    /// is expected to be handed out mutably (its next deadline is queued
    /// at the next refresh).
    pub(crate) fn take_due(&mut self, now: Instant, out: &mut Vec<usize>) {
        let Self { slab, watch, .. } = self;
        watch
            .get_mut()
            .deadlines
            .take_due(now, |ix| slab.get(ix)?.as_ref().map(|s| &s.timer), out);
        self.in_map_order(out);
    }

    /// Takes the entries the refreshes flagged since the last call into
    /// `out`, in the order of the keyed map. Call after
    /// [`CccTable::refresh`]. The flag is the caller's to check again:
    /// an entry flagged once and handed out mutably since may no longer
    /// be.
    pub(crate) fn take_flagged(&mut self, out: &mut Vec<usize>) {
        let w = self.watch.get_mut();
        for &ix in &w.flagged {
            w.in_flagged[ix] = false;
        }
        out.append(&mut w.flagged);
        self.in_map_order(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    fn key(a: u8, tc: u8) -> CccKey {
        (
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, a)),
            TrafficClass::from_masked(tc),
        )
    }

    proptest! {
        /// Inserts, lookups (by key and by index), updates and every kind
        /// of iteration agree with a plain map of the same entries,
        /// iteration order included.
        #[test]
        fn behaves_like_the_keyed_map(ops in proptest::collection::vec((0u8..40, 0u8..3, any::<u16>()), 0..200)) {
            let mut t: CccTable<u16> = CccTable::new();
            let mut m: HashMap<CccKey, u16> = HashMap::default();
            let mut ixs: HashMap<CccKey, usize> = HashMap::default();
            for (a, tc, v) in ops {
                let k = key(a, tc);
                if v % 5 == 0 {
                    // Removal: the key goes, every other index stays.
                    prop_assert_eq!(t.remove(&k), m.remove(&k));
                    ixs.remove(&k);
                    prop_assert_eq!(t.len(), m.len());
                    prop_assert!(t.slab.len() <= 120);
                } else if let Some(old) = m.get_mut(&k) {
                    // Update through the index.
                    let ix = t.index(&k).unwrap();
                    prop_assert_eq!(ixs[&k], ix);
                    *t.at_mut(ix).unwrap() = v;
                    *old = v;
                } else {
                    prop_assert!(t.index(&k).is_none());
                    let ix = t.insert_new(k, v);
                    ixs.insert(k, ix);
                    m.insert(k, v);
                }
                prop_assert_eq!(t.get(&k), m.get(&k));
                let mine: Vec<(CccKey, u16)> = t.iter().map(|(k, v)| (*k, *v)).collect();
                let theirs: Vec<(CccKey, u16)> = m.iter().map(|(k, v)| (*k, *v)).collect();
                prop_assert_eq!(&mine, &theirs);
                let mut mine_mut: Vec<(CccKey, u16)> = Vec::new();
                t.for_each_mut(|k, v| mine_mut.push((*k, *v)));
                prop_assert_eq!(&mine_mut, &theirs);
                let mut vals: Vec<u16> = t.values().copied().collect();
                let mut want: Vec<u16> = m.values().copied().collect();
                vals.sort_unstable();
                want.sort_unstable();
                prop_assert_eq!(vals, want);
            }
            for (k, ix) in &ixs {
                prop_assert_eq!(t.index(k), Some(*ix));
                prop_assert_eq!(t.get_mut(k).copied(), m.get(k).copied());
            }
        }

        /// The deadlines and flags the table keeps track of say what
        /// looking at every entry says: after any mix of inserts,
        /// removals and changes (through either mutable accessor), the
        /// earliest deadline is the least of all, the entries due at a
        /// time are all those whose deadline has passed, and the flagged
        /// ones hold all those flagged, each list in the keyed map's order.
        /// An entry taken as due or flagged is handed out mutably and
        /// changed or left as it is, as the engine does.
        #[test]
        fn deadlines_and_flags_match_a_scan_of_every_entry(
            ops in proptest::collection::vec((0u8..24, 0u8..8, 0u16..400, any::<bool>()), 0..300)
        ) {
            // Each entry: (deadline in µs, flag).
            let mut t: CccTable<(Option<u16>, bool)> = CccTable::new();
            let at = |us: u16| Instant::ZERO + uet_wire::time::Duration::from_micros(u64::from(us));
            let deadline = |v: &(Option<u16>, bool)| v.0.map(at);
            let flag = |v: &(Option<u16>, bool)| v.1;
            let mut now = 0u16;
            for (a, op, x, f) in ops {
                let k = key(a, 0);
                let d = (x % 3 != 0).then_some(now.saturating_add(x));
                match op {
                    0 => {
                        t.remove(&k);
                    }
                    1 | 2 => match t.index(&k) {
                        Some(ix) if op == 1 => *t.at_mut(ix).unwrap() = (d, f),
                        Some(_) => *t.get_mut(&k).unwrap() = (d, f),
                        None => {
                            t.insert_new(k, (d, f));
                        }
                    },
                    3 => {
                        // Look without changing anything.
                        let _ = t.get(&k);
                    }
                    4 | 5 => {
                        now = now.saturating_add(x / 4);
                        t.refresh(deadline, flag);
                        let mut due = Vec::new();
                        t.take_due(at(now), &mut due);
                        let want: Vec<CccKey> = t
                            .iter()
                            .filter(|(_, v)| deadline(v).is_some_and(|w| w <= at(now)))
                            .map(|(k, _)| *k)
                            .collect();
                        let got: Vec<CccKey> = due.iter().map(|&ix| t.key_at(ix).unwrap()).collect();
                        prop_assert_eq!(got, want);
                        for ix in due {
                            let v = t.at_mut(ix).unwrap();
                            if op == 4 {
                                v.0 = (x % 2 == 0).then_some(now.saturating_add(x % 50 + 1));
                            }
                        }
                    }
                    6 => {
                        t.refresh(deadline, flag);
                        let mut flagged = Vec::new();
                        t.take_flagged(&mut flagged);
                        let want: Vec<CccKey> =
                            t.iter().filter(|(_, v)| v.1).map(|(k, _)| *k).collect();
                        // Entries flagged once may have been cleared
                        // since: the caller looks again.
                        let got: Vec<CccKey> = flagged
                            .iter()
                            .map(|&ix| t.key_at(ix).unwrap())
                            .filter(|k| t.get(k).unwrap().1)
                            .collect();
                        prop_assert_eq!(got, want);
                        for ix in flagged {
                            t.at_mut(ix).unwrap().1 = f;
                        }
                    }
                    _ => {}
                }
                let earliest = t.refresh(deadline, flag);
                prop_assert_eq!(earliest, t.values().filter_map(deadline).min());
                let w = t.watch.borrow();
                prop_assert!(w.deadlines.len() <= 2 * t.len() + 64 + 1);
            }
        }
    }
}
