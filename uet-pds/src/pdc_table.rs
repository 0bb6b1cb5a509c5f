//! The PDC table: PDCs keyed by our own PDC ID, with array lookups only.
//!
//! We choose local IDs, so every lookup on the hot path (`dpdcid` of an
//! arriving packet, the send round robin) is two array indexes — no hashing
//! (a hashed lookup per packet costs a large share of the per-packet
//! instructions). IDs are drawn at random from the whole 16-bit space
//! ([`PdcTable::alloc`]): an off-path sender who knows a peer's address
//! cannot guess which PDC IDs are live, as it could when they were handed
//! out in order (`docs/protocol-notes.md` §2.12 asks only that `{ip.src, PDCID}`
//! be unique and PDCID 0 be reserved). A sparse index of 2^16 slot numbers
//! (128 KiB once the first PDC is inserted) maps an ID to its place in a
//! dense slab, so iteration visits live PDCs only, however scattered their
//! IDs are.
//!
//! The table also lists the entries handed out mutably since the last
//! [`PdcTable::drain_touched`]: the engine recomputes the timer deadline of
//! those PDCs only, instead of every PDC on every `poll_timeout`. An entry
//! is listed at most once (a flag in its slot), and IDs of entries removed
//! before a drain are swept once they outnumber the live entries, so the
//! list stays within twice the live entries plus 64.

use core::cell::{Cell, RefCell};

use uet_wire::PdcId;
use uet_wire::rand::Rng;

/// No slab slot (index entries are slot + 1).
const NONE: u16 = 0;

/// A table of PDCs keyed by [`PdcId`].
#[derive(Debug)]
pub(crate) struct PdcTable<T> {
    /// Slab slot + 1 of each ID, or [`NONE`]; empty until the first insert.
    index: Vec<u16>,
    /// The PDCs with their IDs and whether they are listed in `touched`;
    /// `None` marks a free slot.
    slots: Vec<Option<(PdcId, Cell<bool>, T)>>,
    /// Free slots of `slots`, reused before the slab grows.
    free: Vec<u16>,
    len: usize,
    /// IDs of the entries handed out mutably (or inserted) since the last
    /// drain, in that order; may name entries removed since. Drained
    /// through `&self` (`Pds::poll_timeout` takes `&self`); everything else
    /// reaches it through `RefCell::get_mut`, which costs nothing.
    touched: RefCell<Vec<PdcId>>,
}

impl<T> PdcTable<T> {
    pub(crate) fn new() -> Self {
        Self {
            index: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
            touched: RefCell::new(Vec::new()),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn slot(&self, id: &PdcId) -> Option<usize> {
        match self.index.get(usize::from(id.get())) {
            Some(&s) if s != NONE => Some(usize::from(s - 1)),
            _ => None,
        }
    }

    #[inline]
    pub(crate) fn get(&self, id: &PdcId) -> Option<&T> {
        let s = self.slot(id)?;
        self.slots[s].as_ref().map(|(_, _, v)| v)
    }

    /// The entry of `id`, mutably; the entry is listed as touched.
    #[inline]
    pub(crate) fn get_mut(&mut self, id: &PdcId) -> Option<&mut T> {
        let s = self.slot(id)?;
        let (_, listed, v) = self.slots[s].as_mut()?;
        if !listed.get() {
            listed.set(true);
            self.touched.get_mut().push(*id);
        }
        Some(v)
    }

    /// Hands every entry touched since the last call to `f`, once each, in
    /// the order they were first touched, and clears the list.
    pub(crate) fn drain_touched(&self, mut f: impl FnMut(PdcId, &T)) {
        let mut ids = self.touched.borrow_mut();
        for id in ids.drain(..) {
            if let Some(s) = self.slot(&id)
                && let Some((_, listed, v)) = &self.slots[s]
                && listed.get()
            {
                listed.set(false);
                f(id, v);
            }
        }
    }

    /// Where `id` sits in the slab: live entries are visited in this order
    /// by [`PdcTable::keys`] and [`PdcTable::values`].
    pub(crate) fn position(&self, id: &PdcId) -> Option<usize> {
        self.slot(id)
    }

    pub(crate) fn contains_key(&self, id: &PdcId) -> bool {
        self.slot(id).is_some()
    }

    /// A free ID drawn uniformly at random, or `None` when every ID is in
    /// use. Random draws find one at once while the table is sparse; a scan
    /// from a random point finishes the search when it is not.
    pub(crate) fn alloc(&self, rng: &mut impl Rng) -> Option<PdcId> {
        for _ in 0..8 {
            let v = 1 + rng.below(u64::from(u16::MAX)) as u16;
            if let Some(id) = PdcId::new(v)
                && !self.contains_key(&id)
            {
                return Some(id);
            }
        }
        let from = rng.below(u64::from(u16::MAX)) as u32;
        (0..u32::from(u16::MAX))
            .map(|i| 1 + ((from + i) % u32::from(u16::MAX)) as u16)
            .filter_map(PdcId::new)
            .find(|id| !self.contains_key(id))
    }

    pub(crate) fn insert(&mut self, id: PdcId, v: T) -> Option<T> {
        if let Some(s) = self.slot(&id) {
            let listed = self.slots[s].as_ref().is_some_and(|(_, l, _)| l.get());
            if !listed {
                self.touched.get_mut().push(id);
            }
            let old = self.slots[s].replace((id, Cell::new(true), v));
            return old.map(|(_, _, old)| old);
        }
        if self.index.is_empty() {
            self.index = vec![NONE; 1 << 16];
        }
        let s = match self.free.pop() {
            Some(s) => {
                self.slots[usize::from(s)] = Some((id, Cell::new(true), v));
                s
            }
            None => {
                // At most 2^16 - 1 IDs exist, so slot + 1 fits a u16.
                self.slots.push(Some((id, Cell::new(true), v)));
                (self.slots.len() - 1) as u16
            }
        };
        self.index[usize::from(id.get())] = s + 1;
        self.len += 1;
        self.touched.get_mut().push(id);
        None
    }

    pub(crate) fn remove(&mut self, id: &PdcId) -> Option<T> {
        let s = self.slot(id)?;
        self.index[usize::from(id.get())] = NONE;
        self.free.push(s as u16);
        self.len -= 1;
        let old = self.slots[s].take().map(|(_, _, v)| v);
        // IDs of entries removed before a drain stay listed: swept, with
        // any ID listed twice, when they outnumber the live entries
        // (amortized O(1) per removal).
        if self.touched.get_mut().len() > 2 * self.len + 64 {
            let Self {
                index,
                slots,
                touched,
                ..
            } = self;
            let listed = |id: &PdcId| match index[usize::from(id.get())] {
                NONE => None,
                s => slots[usize::from(s - 1)].as_ref().map(|(_, l, _)| l),
            };
            let ids = touched.get_mut();
            // Each kept ID's flag is cleared as it is kept, so a second
            // copy is dropped; then the flags are set again.
            ids.retain(|id| {
                listed(id).is_some_and(|l| l.get()) && {
                    listed(id).inspect(|l| l.set(false));
                    true
                }
            });
            for id in ids.iter() {
                listed(id).inspect(|l| l.set(true));
            }
        }
        old
    }

    /// Live IDs, in slab order.
    #[cfg(test)]
    pub(crate) fn keys(&self) -> impl Iterator<Item = PdcId> + '_ {
        self.slots
            .iter()
            .filter_map(|s| s.as_ref().map(|(id, _, _)| *id))
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.slots
            .iter()
            .filter_map(|s| s.as_ref().map(|(_, _, v)| v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use uet_wire::rand::Xoshiro256;

    #[test]
    fn insert_get_remove() {
        let mut t = PdcTable::new();
        let a = PdcId::new(3).unwrap();
        let b = PdcId::new(700).unwrap();
        assert!(t.insert(a, "a").is_none());
        assert!(t.insert(b, "b").is_none());
        assert_eq!(t.len(), 2);
        assert_eq!(t.get(&a), Some(&"a"));
        assert_eq!(t.keys().collect::<Vec<_>>(), vec![a, b]);
        assert_eq!(t.remove(&a), Some("a"));
        assert_eq!(t.remove(&a), None);
        assert_eq!(t.len(), 1);
        assert!(!t.contains_key(&a));
        assert_eq!(t.values().count(), 1);
    }

    #[test]
    fn allocated_ids_are_scattered_and_never_zero() {
        let mut t = PdcTable::new();
        let mut rng = Xoshiro256::seed_from_u64(7);
        let mut ids = Vec::new();
        for _ in 0..64 {
            let id = t.alloc(&mut rng).unwrap();
            t.insert(id, ());
            ids.push(id.get());
        }
        // Handed out in order, 64 IDs would span 64 values; at random they
        // span most of the space.
        let span = ids.iter().max().unwrap() - ids.iter().min().unwrap();
        assert!(span > 30_000, "IDs {ids:?}");
        assert!(!ids.contains(&0));
    }

    #[test]
    fn the_last_free_id_is_found() {
        let mut t = PdcTable::new();
        let mut rng = Xoshiro256::seed_from_u64(1);
        for v in 1..=u16::MAX {
            if v != 4242 {
                t.insert(PdcId::new(v).unwrap(), ());
            }
        }
        assert_eq!(t.alloc(&mut rng), PdcId::new(4242));
        t.insert(PdcId::new(4242).unwrap(), ());
        assert_eq!(t.alloc(&mut rng), None);
    }

    proptest! {
        /// Inserts and removes agree with an ordered map; the slab reuses
        /// freed slots, so it never holds more slots than the most PDCs
        /// ever live at once.
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec((1u16..200, any::<bool>()), 0..300)) {
            let mut t = PdcTable::new();
            let mut m = BTreeMap::new();
            let mut most = 0;
            for (v, ins) in ops {
                let id = PdcId::new(v).unwrap();
                if ins {
                    prop_assert_eq!(t.insert(id, v), m.insert(id, v));
                } else {
                    prop_assert_eq!(t.remove(&id), m.remove(&id));
                }
                most = most.max(m.len());
                prop_assert_eq!(t.len(), m.len());
                prop_assert!(t.slots.len() <= most);
                let mut keys: Vec<PdcId> = t.keys().collect();
                keys.sort();
                prop_assert_eq!(keys, m.keys().copied().collect::<Vec<_>>());
                for (k, v) in &m {
                    prop_assert_eq!(t.get(k), Some(v));
                }
            }
        }
    }
}
