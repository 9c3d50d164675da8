//! The per-backend cache of resolved corpus definitions, and what invalidates it.
//!
//! Resolving a definition (catalog rows → JSON → serde → [`crate::definition`]) cost 1.85 ms of
//! every search. The cache keeps each resolved corpus with the relations it was
//! resolved from, and planning facts derived from them (reltuples, slice estimates), until
//! PostgreSQL says one of them changed:
//!
//! - an invalidation of an item or parent table (ALTER TABLE, DROP, RENAME, ANALYZE and VACUUM
//!   updating reltuples, CREATE INDEX) drops the entries resolved from it;
//! - an invalidation of the catalog tables (the definition functions and any other write to
//!   `corpus.corpora` / `corpus.sources` send one, sql/catalog.sql), or a full reset, drops all;
//! - the catalog tables' OIDs are learnt with each build and kept; before the first build any
//!   relation's invalidation may be the catalog's, and a build that learns new ones (a
//!   recreated extension) is not kept;
//! - a build made in a transaction that saw an invalidation is used but not kept, and nothing
//!   is memoised in it: its snapshot may predate the change (REPEATABLE READ, or a change
//!   committed between the statement's snapshot and the message), so only a later
//!   transaction, whose snapshot follows every message it processed at its start, builds an
//!   entry that may be kept.
//!
//! The extension feeds it from relcache and syscache callbacks, and ends its transactions with
//! [`Cache::end_of_transaction`]; this module is plain bookkeeping, tested here.

use std::collections::HashMap;
use std::sync::Arc;

/// Entries kept at most (corpora per backend); beyond it the least recently built is dropped.
pub const MAX_ENTRIES: usize = 256;
/// Memoised facts per entry at most (distinct filter combinations' slice estimates).
pub const MAX_FACTS: usize = 256;

struct Entry<T> {
    value: Arc<T>,
    relids: Vec<i64>,
    /// (syscache id, hash value) of the catalog rows it depends on beyond its relations: the
    /// types of its columns and the schemas of its tables (a renamed type or schema changes
    /// the SQL it plans).
    syscache: Vec<(i32, u32)>,
    facts: HashMap<String, f64>,
    built: u64,
}

pub struct Cache<T> {
    entries: HashMap<String, Entry<T>>,
    /// The catalog tables' OIDs, learnt with each build: their invalidation drops all.
    catalog: Vec<i64>,
    /// An invalidation concerning the cache was processed in the current transaction.
    dirty: bool,
    clock: u64,
    /// Counters for tests and for the benchmark's explanation of fixed costs.
    pub hits: u64,
    pub misses: u64,
}

impl<T> Default for Cache<T> {
    fn default() -> Self {
        Cache { entries: HashMap::new(), catalog: Vec::new(), dirty: false, clock: 0, hits: 0, misses: 0 }
    }
}

impl<T> Cache<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// The cached value of `name`, if any.
    pub fn get(&mut self, name: &str) -> Option<Arc<T>> {
        match self.entries.get(name) {
            Some(e) => {
                self.hits += 1;
                Some(e.value.clone())
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Offer a value built now from `relids` and the `syscache` rows (and the catalog tables
    /// `catalog`); it is kept unless this transaction saw an invalidation. Says whether it was
    /// kept.
    pub fn offer(
        &mut self,
        name: &str,
        value: Arc<T>,
        relids: Vec<i64>,
        syscache: Vec<(i32, u32)>,
        catalog: &[i64],
    ) -> bool {
        // The catalog tables of the latest build. A recreated extension has new ones: an
        // invalidation of them processed earlier in this transaction went unrecognised, so a
        // build that learns them is not kept.
        let relearnt = !catalog.is_empty() && !self.catalog.is_empty() && self.catalog != catalog;
        if !catalog.is_empty() {
            self.catalog = catalog.to_vec();
        }
        if self.dirty || relearnt {
            return false;
        }
        if self.entries.len() >= MAX_ENTRIES && !self.entries.contains_key(name) {
            if let Some(oldest) = self.entries.iter().min_by_key(|(_, e)| e.built).map(|(k, _)| k.clone()) {
                self.entries.remove(&oldest);
            }
        }
        self.clock += 1;
        self.entries
            .insert(name.to_string(), Entry { value, relids, syscache, facts: HashMap::new(), built: self.clock });
        true
    }

    /// A fact memoised for `name`'s entry.
    pub fn fact(&self, name: &str, key: &str) -> Option<f64> {
        self.entries.get(name)?.facts.get(key).copied()
    }

    /// Memoise a fact derived from `name`'s relations (not in a transaction that saw an
    /// invalidation, and only while the entry exists).
    pub fn remember(&mut self, name: &str, key: String, value: f64) {
        if self.dirty {
            return;
        }
        if let Some(e) = self.entries.get_mut(name) {
            if e.facts.len() >= MAX_FACTS {
                e.facts.clear();
            }
            e.facts.insert(key, value);
        }
    }

    /// A relation was invalidated (0: all relations, a cache reset).
    pub fn invalidate_relation(&mut self, relid: i64) {
        // (The catalog's OIDs are kept: a later invalidation of the same tables must be
        // recognised too. Before the first build they are unknown, so any relation may be one
        // of them: a build in this transaction is not kept.)
        if relid == 0 || self.catalog.contains(&relid) {
            self.invalidate_all();
            return;
        }
        if self.catalog.is_empty() {
            self.dirty = true;
        }
        let before = self.entries.len();
        self.entries.retain(|_, e| !e.relids.contains(&relid));
        if self.entries.len() != before {
            self.dirty = true;
        }
    }

    /// A row of syscache `cache` with this hash value changed (hash 0: the whole syscache was
    /// reset): the entries that depend on such a row are dropped.
    pub fn invalidate_syscache(&mut self, cache: i32, hash: u32) {
        let before = self.entries.len();
        self.entries.retain(|_, e| !e.syscache.iter().any(|&(c, h)| c == cache && (hash == 0 || h == hash)));
        if self.entries.len() != before {
            self.dirty = true;
        }
    }

    /// Something every definition depends on changed (the catalog, a cache reset).
    pub fn invalidate_all(&mut self) {
        self.entries.clear();
        self.dirty = true;
    }

    /// The transaction ended (committed or aborted): builds may be kept again.
    pub fn end_of_transaction(&mut self) {
        self.dirty = false;
    }

    /// The catalog tables' OIDs learnt so far.
    pub fn catalog_tables(&self) -> &[i64] {
        &self.catalog
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn is_dirty(&self) -> bool {
        self.dirty
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CATALOG: [i64; 2] = [900, 901];

    #[test]
    fn a_registered_tables_invalidation_drops_only_its_entries() {
        let mut c: Cache<&str> = Cache::new();
        assert!(c.offer("a", Arc::new("A"), vec![10, 11], vec![(80, 7)], &CATALOG));
        assert!(c.offer("b", Arc::new("B"), vec![12], vec![(80, 8)], &CATALOG));
        c.remember("a", "slice".into(), 5.0);
        assert_eq!(c.fact("a", "slice"), Some(5.0));
        c.invalidate_relation(99); // someone else's table
        assert!(!c.is_dirty() && c.len() == 2);
        c.invalidate_relation(11);
        assert!(c.get("a").is_none() && c.get("b").is_some());
        assert_eq!(c.fact("a", "slice"), None);
        // a rebuild in the same transaction is not kept, nor are facts
        assert!(!c.offer("a", Arc::new("A2"), vec![10, 11], vec![], &CATALOG));
        c.remember("b", "slice".into(), 1.0);
        assert_eq!(c.fact("b", "slice"), None);
        c.end_of_transaction();
        assert!(c.offer("a", Arc::new("A2"), vec![10, 11], vec![], &CATALOG));
        assert_eq!(*c.get("a").unwrap(), "A2");
    }

    #[test]
    fn a_changed_type_or_schema_drops_the_entries_that_use_it() {
        let mut c: Cache<&str> = Cache::new();
        c.offer("a", Arc::new("A"), vec![10], vec![(80, 7), (36, 1)], &CATALOG);
        c.offer("b", Arc::new("B"), vec![12], vec![(80, 8), (36, 1)], &CATALOG);
        c.invalidate_syscache(80, 9); // a type nobody uses (CREATE TABLE makes one)
        assert_eq!(c.len(), 2);
        assert!(!c.is_dirty());
        c.invalidate_syscache(80, 8);
        assert!(c.get("a").is_some() && c.get("b").is_none());
        c.end_of_transaction();
        c.offer("b", Arc::new("B"), vec![12], vec![(80, 8), (36, 1)], &CATALOG);
        c.invalidate_syscache(36, 0); // the schema cache was reset
        assert!(c.is_empty());
    }

    #[test]
    fn a_second_invalidation_of_the_catalog_is_recognised_too() {
        // (a standby replays two definition changes; the second arrives while a build of a
        // transaction whose snapshot predates it is in flight)
        let mut c: Cache<u8> = Cache::new();
        assert!(c.offer("a", Arc::new(1), vec![10], vec![], &CATALOG));
        c.invalidate_relation(900);
        assert!(c.is_empty());
        c.end_of_transaction();
        c.invalidate_relation(901);
        assert!(!c.offer("b", Arc::new(2), vec![12], vec![], &CATALOG), "a build that may predate the change");
        c.end_of_transaction();
        assert!(c.offer("b", Arc::new(2), vec![12], vec![], &CATALOG));
    }

    #[test]
    fn before_the_catalog_is_known_any_invalidation_may_be_of_it() {
        let mut c: Cache<u8> = Cache::new();
        c.invalidate_relation(901);
        assert!(!c.offer("a", Arc::new(1), vec![10], vec![], &CATALOG));
        c.end_of_transaction();
        assert!(c.offer("a", Arc::new(1), vec![10], vec![], &CATALOG));
        // known now: someone else's table is not the catalog
        c.invalidate_relation(77);
        assert!(!c.is_dirty());
    }

    #[test]
    fn a_recreated_catalog_is_learnt_by_a_build_that_is_not_kept() {
        let mut c: Cache<u8> = Cache::new();
        assert!(c.offer("a", Arc::new(1), vec![10], vec![], &CATALOG));
        c.invalidate_relation(900); // DROP EXTENSION
        c.end_of_transaction();
        c.invalidate_relation(950); // the new catalog, changed: not recognisable yet
        assert!(!c.offer("a", Arc::new(1), vec![10], vec![], &[950, 951]));
        c.end_of_transaction();
        assert!(c.offer("a", Arc::new(1), vec![10], vec![], &[950, 951]));
        c.invalidate_relation(951);
        assert!(c.is_empty());
    }

    #[test]
    fn catalog_changes_and_resets_drop_everything() {
        let mut c: Cache<u8> = Cache::new();
        c.offer("a", Arc::new(1), vec![10], vec![], &CATALOG);
        c.offer("b", Arc::new(2), vec![12], vec![], &CATALOG);
        c.invalidate_relation(901);
        assert!(c.is_empty() && c.is_dirty());
        assert_eq!(c.catalog_tables(), &CATALOG, "kept: the next invalidation of the catalog is recognised too");
        c.end_of_transaction();
        c.offer("a", Arc::new(1), vec![10], vec![], &CATALOG);
        c.invalidate_relation(0);
        assert!(c.is_empty());
    }

    #[test]
    fn the_cache_is_bounded() {
        let mut c: Cache<usize> = Cache::new();
        for i in 0..(MAX_ENTRIES + 10) {
            c.offer(&format!("c{i}"), Arc::new(i), vec![i as i64 + 1000], vec![], &CATALOG);
        }
        assert_eq!(c.len(), MAX_ENTRIES);
        assert!(c.get("c0").is_none(), "the oldest went first");
        assert!(c.get(&format!("c{}", MAX_ENTRIES + 9)).is_some());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Build(u8),
        Inval(u8),
        Reset,
        EndTxn,
        Change(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..4).prop_map(Op::Build),
            (0u8..6).prop_map(Op::Inval),
            Just(Op::Reset),
            Just(Op::EndTxn),
            (0u8..4).prop_map(Op::Change),
        ]
    }

    proptest! {
        /// A model of the database: each corpus `i` is resolved from relation 100+i and has a
        /// version; a change of it bumps the version and (as PostgreSQL does at commit) sends
        /// an invalidation of its relation, which the backend processes at its next transaction
        /// start. Whatever the interleaving, a cached value is never older than the version the
        /// backend's current transaction can see (builds read the version at transaction start).
        #[test]
        fn never_serves_a_definition_older_than_the_transaction_sees(ops in prop::collection::vec(op(), 1..60)) {
            let mut c: Cache<u32> = Cache::new();
            let mut version = [0u32; 4];
            let mut pending: Vec<i64> = Vec::new();
            let mut seen = version; // what this transaction's snapshot sees
            for op in ops {
                match op {
                    Op::Build(i) => {
                        let i = i as usize;
                        let v = match c.get(&format!("c{i}")) {
                            Some(v) => *v,
                            None => {
                                let v = seen[i];
                                c.offer(&format!("c{i}"), Arc::new(v), vec![100 + i as i64], vec![], &CATALOG);
                                v
                            }
                        };
                        prop_assert_eq!(v, seen[i]);
                    }
                    Op::Inval(r) => c.invalidate_relation(100 + r as i64),
                    Op::Reset => c.invalidate_relation(0),
                    Op::Change(i) => {
                        version[i as usize] += 1;
                        pending.push(100 + i as i64);
                    }
                    Op::EndTxn => {
                        c.end_of_transaction();
                        // the next transaction processes the queued messages, then snapshots
                        for r in pending.drain(..) {
                            c.invalidate_relation(r);
                        }
                        seen = version;
                    }
                }
            }
        }
    }
}
