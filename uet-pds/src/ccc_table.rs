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

use rustc_hash::FxHashMap as HashMap;
use std::net::IpAddr;

use uet_wire::TrafficClass;

/// A CCC's key: destination and traffic class.
pub(crate) type CccKey = (IpAddr, TrafficClass);

/// A map of CCCs (or any `T`) by key, each with an index that never changes.
#[derive(Debug)]
pub(crate) struct CccTable<T> {
    index: HashMap<CccKey, usize>,
    slab: Vec<Option<T>>,
    free: Vec<usize>,
}

impl<T> CccTable<T> {
    pub(crate) fn new() -> Self {
        Self {
            index: HashMap::default(),
            slab: Vec::new(),
            free: Vec::new(),
        }
    }

    /// The index of the entry for `key`.
    #[inline]
    pub(crate) fn index(&self, key: &CccKey) -> Option<usize> {
        self.index.get(key).copied()
    }

    /// The entry at `ix` (an index from [`CccTable::index`]).
    #[inline]
    pub(crate) fn at_mut(&mut self, ix: usize) -> Option<&mut T> {
        self.slab.get_mut(ix)?.as_mut()
    }

    pub(crate) fn get(&self, key: &CccKey) -> Option<&T> {
        self.slab.get(*self.index.get(key)?)?.as_ref()
    }

    pub(crate) fn get_mut(&mut self, key: &CccKey) -> Option<&mut T> {
        self.slab.get_mut(*self.index.get(key)?)?.as_mut()
    }

    /// Removes the entry for `key`; its index may be given to a later one.
    pub(crate) fn remove(&mut self, key: &CccKey) -> Option<T> {
        let ix = self.index.remove(key)?;
        self.free.push(ix);
        self.slab.get_mut(ix)?.take()
    }

    /// Entries in the table.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// Adds an entry for a key not present yet; returns its index.
    pub(crate) fn insert_new(&mut self, key: CccKey, v: T) -> usize {
        debug_assert!(!self.index.contains_key(&key));
        let ix = match self.free.pop() {
            Some(ix) => {
                self.slab[ix] = Some(v);
                ix
            }
            None => {
                self.slab.push(Some(v));
                self.slab.len() - 1
            }
        };
        self.index.insert(key, ix);
        ix
    }

    /// Every entry with its key, in the order of the keyed map.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&CccKey, &T)> + '_ {
        self.index
            .iter()
            .filter_map(|(k, &ix)| Some((k, self.slab.get(ix)?.as_ref()?)))
    }

    /// Calls `f` with every entry and its key, mutably, in the order of the
    /// keyed map.
    pub(crate) fn for_each_mut(&mut self, mut f: impl FnMut(&CccKey, &mut T)) {
        let Self { index, slab, .. } = self;
        for (k, &ix) in index.iter() {
            if let Some(Some(v)) = slab.get_mut(ix) {
                f(k, v);
            }
        }
    }

    /// Every entry, in no particular order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.slab.iter().flatten()
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
    }
}
