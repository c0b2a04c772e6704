//! The parses of current versions the store keeps beside their bytes ([`Parsed`]), for the
//! kinds written often (pods, ResourceClaims): every write reads the object it replaces as a
//! `serde_json::Value`, and parsing it under the state lock held every other request back.
//!
//! A version gets its parse here when it is committed (the store has the `Value` it
//! serialized, so keeping it costs no parse) or when a writer parsed it outside the lock
//! ([`State::remember`](crate::store::State::remember)); the next write of the object takes it
//! from here instead of parsing. An entry goes when its version is replaced or deleted, and the
//! oldest go past [`PARSED_MAX`]: the cache holds at most that many trees whatever the number of
//! objects (a tree costs several times its encoding, which is why versions are kept as bytes).
//!
//! An entry holds its [`Stored`] as well as the parse, so the version's address (the key)
//! cannot be reused by another version while the entry exists.

use crate::store::Stored;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// How many parsed current versions [`Parsed`] keeps. A pod's parse is roughly 10–20 KB, so
/// this bounds the cache at a few MB; writes of the same object follow each other closely
/// (create, the claim controller's status, binding, the kubelet's status), and a write that
/// finds no entry parses outside the lock when its caller prepared it (`Inner::state_for`).
pub(crate) const PARSED_MAX: usize = 512;

/// Parses of current versions, by the address of their [`Stored`].
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    entries: HashMap<usize, Entry>,
    /// Insertion order, for eviction: (address, the entry's sequence number). A pair whose
    /// entry was removed or replaced since is skipped.
    order: VecDeque<(usize, u64)>,
    seq: u64,
}

#[derive(Debug)]
struct Entry {
    stored: Arc<Stored>,
    value: Arc<Value>,
    seq: u64,
}

fn addr(s: &Arc<Stored>) -> usize {
    Arc::as_ptr(s) as usize
}

impl Parsed {
    /// The kept parse of `s`.
    pub(crate) fn get(&self, s: &Arc<Stored>) -> Option<Arc<Value>> {
        self.entries
            .get(&addr(s))
            .filter(|e| Arc::ptr_eq(&e.stored, s))
            .map(|e| e.value.clone())
    }

    /// Keeps `value`, the parse of `s`, evicting the oldest entry past [`PARSED_MAX`].
    pub(crate) fn insert(&mut self, s: &Arc<Stored>, value: Arc<Value>) {
        self.seq += 1;
        let seq = self.seq;
        self.entries.insert(
            addr(s),
            Entry {
                stored: s.clone(),
                value,
                seq,
            },
        );
        self.order.push_back((addr(s), seq));
        while self.entries.len() > PARSED_MAX {
            let Some((a, seq)) = self.order.pop_front() else {
                break;
            };
            if self.entries.get(&a).is_some_and(|e| e.seq == seq) {
                self.entries.remove(&a);
            }
        }
        // Pairs of removed entries: dropped once they are as many as the entries.
        if self.order.len() > 2 * PARSED_MAX {
            let entries = &self.entries;
            self.order
                .retain(|(a, seq)| entries.get(a).is_some_and(|e| e.seq == *seq));
        }
    }

    /// Forgets the parse of `s` (replaced or deleted).
    pub(crate) fn remove(&mut self, s: &Arc<Stored>) {
        if self
            .entries
            .get(&addr(s))
            .is_some_and(|e| Arc::ptr_eq(&e.stored, s))
        {
            self.entries.remove(&addr(s));
        }
    }

    /// Number of kept parses.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;
    use serde_json::json;

    fn version(i: usize) -> Arc<Stored> {
        let def = Registry::default().get("", "v1", "configmaps").unwrap();
        Stored::new(&def, &json!({"metadata": {"name": format!("c{i}")}}))
    }

    #[test]
    fn keeps_at_most_the_bound_and_forgets_the_oldest() {
        let mut p = Parsed::default();
        let versions: Vec<_> = (0..PARSED_MAX + 10).map(version).collect();
        for v in &versions {
            p.insert(v, Arc::new(v.value()));
        }
        assert_eq!(p.len(), PARSED_MAX);
        assert!(p.get(&versions[9]).is_none());
        assert_eq!(*p.get(&versions[10]).unwrap(), versions[10].value());
        assert!(p.get(versions.last().unwrap()).is_some());
    }

    #[test]
    fn a_removed_entry_is_gone_and_its_order_slot_evicts_nothing() {
        let mut p = Parsed::default();
        let versions: Vec<_> = (0..3 * PARSED_MAX).map(version).collect();
        // Each inserted and removed at once: the order keeps only live pairs in the end.
        for v in &versions {
            p.insert(v, Arc::new(v.value()));
            p.remove(v);
            assert!(p.get(v).is_none());
        }
        assert_eq!(p.len(), 0);
        assert!(p.order.len() <= 2 * PARSED_MAX + 1);
        // A full cache after that still holds its last PARSED_MAX.
        for v in &versions[..PARSED_MAX] {
            p.insert(v, Arc::new(v.value()));
        }
        assert!(versions[..PARSED_MAX].iter().all(|v| p.get(v).is_some()));
    }
}
