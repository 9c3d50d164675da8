//! Conflation measurements on (inflected form, lemma) pairs, shared by tests/analysis_quality.rs
//! and examples/lemma_eval.rs.
//!
//! - `meet`: share of pairs whose form and lemma share a full-weight (surface) key;
//! - `meet_any`: share sharing any key (fallback keys included);
//! - `random_collisions` / `random_collisions_any`: share of all pairs of distinct lemmas
//!   that share a surface key / any key ("unrelated words that collide"; lemmas that are the
//!   same word after case and diacritic folding count once);
//! - `neighbour_collisions` / `neighbour_collisions_any`: the same over the pairs of lemmas
//!   adjacent in sorted (folded) order — the closest spellings, where a stemmer or a prefix
//!   key errs first (Pavlovi ~ pavlač); some of these pairs are related words (derivations),
//!   so this is an upper bound of the harm.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use pg_corpus_core::analysis::{Analyzer, KeyKind};

use pg_corpus_core::model::Language;

#[derive(Debug, Clone, Copy)]
pub struct Conflation {
    pub pairs: usize,
    pub lemmas: usize,
    pub meet: f64,
    pub meet_any: f64,
    pub random_collisions: f64,
    pub random_collisions_any: f64,
    pub neighbour_collisions: f64,
    pub neighbour_collisions_any: f64,
}

pub fn read_pairs(text: &str) -> Vec<(String, String)> {
    text.lines().filter_map(|l| l.split_once('\t')).map(|(f, l)| (f.to_string(), l.to_string())).collect()
}

/// (surface keys, all keys) of one word.
pub fn keys(a: &Analyzer, w: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut surface = BTreeSet::new();
    let mut all = BTreeSet::new();
    a.for_each_key(w, |k, _, kind| {
        if kind == KeyKind::Surface {
            surface.insert(k.to_string());
        }
        all.insert(k.to_string());
    });
    (surface, all)
}

pub fn conflation(a: &Analyzer, pairs: &[(String, String)]) -> Conflation {
    let (mut meet, mut meet_any) = (0usize, 0usize);
    for (form, lemma) in pairs {
        let (fs, fa) = keys(a, form);
        let (ls, la) = keys(a, lemma);
        if fs.intersection(&ls).next().is_some() {
            meet += 1;
        }
        if fa.intersection(&la).next().is_some() {
            meet_any += 1;
        }
    }
    // Distinct lemmas, one per folded spelling, in folded order.
    let simple = Analyzer::new(Language::Simple);
    let mut by_folded: BTreeMap<String, &str> = BTreeMap::new();
    for (_, l) in pairs {
        let f: Vec<String> = simple.surface_tokens(l);
        by_folded.entry(f.join(" ")).or_insert(l.as_str());
    }
    let lemma_keys: Vec<(BTreeSet<String>, BTreeSet<String>)> = by_folded.values().map(|l| keys(a, l)).collect();
    let n = lemma_keys.len();
    // Random pairs: exact counts through the key → lemmas index.
    let mut surface_groups: HashMap<&BTreeSet<String>, usize> = HashMap::new();
    for (s, _) in &lemma_keys {
        if !s.is_empty() {
            *surface_groups.entry(s).or_default() += 1;
        }
    }
    let same_surface: usize = surface_groups.values().map(|&g| g * (g - 1) / 2).sum();
    let mut by_key: HashMap<&str, Vec<u32>> = HashMap::new();
    for (i, (_, all)) in lemma_keys.iter().enumerate() {
        for k in all {
            by_key.entry(k.as_str()).or_default().push(i as u32);
        }
    }
    let mut any_pairs: HashSet<(u32, u32)> = HashSet::new();
    for ids in by_key.values() {
        for (x, &i) in ids.iter().enumerate() {
            for &j in &ids[x + 1..] {
                any_pairs.insert((i.min(j), i.max(j)));
            }
        }
    }
    let total = (n * n.saturating_sub(1) / 2).max(1) as f64;
    let share = |(s1, _): &(BTreeSet<String>, BTreeSet<String>), (s2, _): &(BTreeSet<String>, BTreeSet<String>)| {
        s1.intersection(s2).next().is_some()
    };
    let share_any = |(_, a1): &(BTreeSet<String>, BTreeSet<String>), (_, a2): &(BTreeSet<String>, BTreeSet<String>)| {
        a1.intersection(a2).next().is_some()
    };
    let neighbours = n.saturating_sub(1).max(1) as f64;
    let nb = lemma_keys.windows(2).filter(|w| share(&w[0], &w[1])).count();
    let nb_any = lemma_keys.windows(2).filter(|w| share_any(&w[0], &w[1])).count();
    let p = pairs.len().max(1) as f64;
    Conflation {
        pairs: pairs.len(),
        lemmas: n,
        meet: meet as f64 / p,
        meet_any: meet_any as f64 / p,
        random_collisions: same_surface as f64 / total,
        random_collisions_any: any_pairs.len() as f64 / total,
        neighbour_collisions: nb as f64 / neighbours,
        neighbour_collisions_any: nb_any as f64 / neighbours,
    }
}
