//! The initiator's operation slots by token ([`Slots`]): a keyed map whose
//! per-packet lookups of the same token skip the hash.

use core::cell::Cell;

use rustc_hash::FxHashMap as HashMap;

/// A map from token to `V`, as `FxHashMap<u64, V>` (same answers, and its
/// keys iterate in the same order: the token map is the same map of the
/// same keys, holding indices into `store`), that remembers the slot the
/// last lookup found. The packets of a message carry its token one after
/// another, so most lookups are of the token looked up last: those cost a
/// comparison and an index, not a hash and a probe.
#[derive(Debug)]
pub(crate) struct Slots<V> {
    /// Token → index in `store`.
    index: HashMap<u64, usize>,
    /// The values with their tokens; `None`: free, listed in `free`.
    store: Vec<Option<(u64, V)>>,
    free: Vec<usize>,
    /// The token the last lookup found, and its index: always an entry of
    /// `index` (removing it forgets it).
    last: Cell<Option<(u64, usize)>>,
}

impl<V> Default for Slots<V> {
    fn default() -> Self {
        Self {
            index: HashMap::default(),
            store: Vec::new(),
            free: Vec::new(),
            last: Cell::new(None),
        }
    }
}

impl<V> Slots<V> {
    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// The index of `token`'s value: the remembered one without hashing.
    #[inline]
    fn find(&self, token: u64) -> Option<usize> {
        if let Some((t, ix)) = self.last.get()
            && t == token
        {
            return Some(ix);
        }
        let ix = *self.index.get(&token)?;
        self.last.set(Some((token, ix)));
        Some(ix)
    }

    /// The value of `token`.
    #[inline]
    pub(crate) fn get(&self, token: &u64) -> Option<&V> {
        let ix = self.find(*token)?;
        match self.store.get(ix) {
            Some(Some((t, v))) if t == token => Some(v),
            _ => None,
        }
    }

    /// The value of `token`, writable.
    #[inline]
    pub(crate) fn get_mut(&mut self, token: &u64) -> Option<&mut V> {
        let ix = self.find(*token)?;
        match self.store.get_mut(ix) {
            Some(Some((t, v))) if t == token => Some(v),
            _ => None,
        }
    }

    /// Sets `token`'s value; returns the one it replaces.
    pub(crate) fn insert(&mut self, token: u64, v: V) -> Option<V> {
        if let Some(&ix) = self.index.get(&token)
            && let Some(Some((_, old))) = self.store.get_mut(ix)
        {
            // Inserted again: as the map's own insert of a present key,
            // which may grow the table first (and so reorder it).
            self.index.insert(token, ix);
            return Some(core::mem::replace(old, v));
        }
        let ix = match self.free.pop() {
            Some(ix) => ix,
            None => {
                self.store.push(None);
                self.store.len() - 1
            }
        };
        if let Some(s) = self.store.get_mut(ix) {
            *s = Some((token, v));
        }
        self.index.insert(token, ix);
        None
    }

    /// Removes `token`; returns its value.
    pub(crate) fn remove(&mut self, token: &u64) -> Option<V> {
        let ix = self.index.remove(token)?;
        if self.last.get().is_some_and(|(t, _)| t == *token) {
            self.last.set(None);
        }
        self.free.push(ix);
        self.store.get_mut(ix)?.take().map(|(_, v)| v)
    }

    /// The entries, in the order `FxHashMap<u64, V>` would give them.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&u64, &V)> + '_ {
        self.index
            .iter()
            .filter_map(|(t, &ix)| match self.store.get(ix) {
                Some(Some((_, v))) => Some((t, v)),
                _ => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u32),
        Remove(u64),
        Get(u64),
        GetMut(u64, u32),
    }

    proptest! {
        /// Every answer, and the order of `iter`, as a plain
        /// `FxHashMap<u64, V>` through the same inserts, removals and
        /// lookups (of few tokens, so that the remembered one is looked up
        /// again, replaced, removed and reused).
        #[test]
        fn slots_are_the_map(ops in prop::collection::vec(prop_oneof![
            3 => (0u64..12, any::<u32>()).prop_map(|(t, v)| Op::Insert(t, v)),
            2 => (0u64..12).prop_map(Op::Remove),
            4 => (0u64..12).prop_map(Op::Get),
            2 => (0u64..12, any::<u32>()).prop_map(|(t, v)| Op::GetMut(t, v)),
        ], 0..200)) {
            let mut s: Slots<u32> = Slots::default();
            let mut m: HashMap<u64, u32> = HashMap::default();
            for op in ops {
                match op {
                    Op::Insert(t, v) => prop_assert_eq!(s.insert(t, v), m.insert(t, v)),
                    Op::Remove(t) => prop_assert_eq!(s.remove(&t), m.remove(&t)),
                    Op::Get(t) => prop_assert_eq!(s.get(&t), m.get(&t)),
                    Op::GetMut(t, v) => {
                        let (a, b) = (s.get_mut(&t), m.get_mut(&t));
                        prop_assert_eq!(a.is_some(), b.is_some());
                        if let (Some(a), Some(b)) = (a, b) {
                            *a = v;
                            *b = v;
                        }
                    }
                }
                prop_assert_eq!(s.len(), m.len());
                let order: Vec<(u64, u32)> = s.iter().map(|(t, v)| (*t, *v)).collect();
                let want: Vec<(u64, u32)> = m.iter().map(|(t, v)| (*t, *v)).collect();
                prop_assert_eq!(order, want);
            }
        }
    }
}
