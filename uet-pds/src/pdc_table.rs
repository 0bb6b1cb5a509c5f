//! The PDC table: a slab indexed by our own PDC ID. We choose local IDs,
//! so every lookup on the hot path (`dpdcid` of an arriving packet, the
//! send round robin) is an array index — no hashing (BENCHMARKS.md: SipHash
//! lookups were a third of the per-packet instructions).

use uet_wire::PdcId;

/// A slab of PDCs keyed by [`PdcId`].
#[derive(Debug)]
pub(crate) struct PdcTable<T> {
    slots: Vec<Option<T>>,
    len: usize,
}

impl<T> PdcTable<T> {
    pub(crate) fn new() -> Self {
        Self {
            slots: Vec::new(),
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn get(&self, id: &PdcId) -> Option<&T> {
        self.slots
            .get(usize::from(id.get()))
            .and_then(Option::as_ref)
    }

    pub(crate) fn get_mut(&mut self, id: &PdcId) -> Option<&mut T> {
        self.slots
            .get_mut(usize::from(id.get()))
            .and_then(Option::as_mut)
    }

    pub(crate) fn contains_key(&self, id: &PdcId) -> bool {
        self.get(id).is_some()
    }

    pub(crate) fn insert(&mut self, id: PdcId, v: T) -> Option<T> {
        let i = usize::from(id.get());
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        let old = self.slots[i].replace(v);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    pub(crate) fn remove(&mut self, id: &PdcId) -> Option<T> {
        let old = self
            .slots
            .get_mut(usize::from(id.get()))
            .and_then(Option::take);
        if old.is_some() {
            self.len -= 1;
        }
        old
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = PdcId> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .filter_map(|(i, _)| PdcId::new(i as u16))
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().filter_map(Option::as_ref)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
