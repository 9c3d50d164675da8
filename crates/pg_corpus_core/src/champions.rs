//! Champion lists in one pass over a source's documents: for every common key, the `n`
//! documents of highest BM25 weight `tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl))`, best first,
//! ties broken by document id in the caller's order (the database's collation). Every posting
//! is weighed once and kept only while it can still be among its key's best, so the work grows
//! with the postings and the memory with keys × n, never with a sort of every posting.

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::bm25::Bm25Params;
use crate::tsvector::TsVector;

/// One key's list: document ids and their weights, best first.
#[derive(Debug, Clone, PartialEq)]
pub struct ChampionList {
    pub term: String,
    pub items: Vec<String>,
    pub impacts: Vec<f64>,
}

pub struct Builder {
    keys: HashMap<Vec<u8>, usize>,
    terms: Vec<String>,
    /// Per key: (weight, document number) candidates, pruned to the best `n` when twice as many.
    kept: Vec<Vec<(f64, u32)>>,
    ids: Vec<String>,
    n: usize,
    avgdl: f64,
    params: Bm25Params,
}

impl Builder {
    /// Lists of length `n` for `common` keys, with the corpus' average document length.
    pub fn new(common: impl IntoIterator<Item = String>, n: usize, avgdl: f64, params: Bm25Params) -> Builder {
        let terms: Vec<String> = common.into_iter().collect();
        let keys = terms.iter().enumerate().map(|(i, t)| (t.as_bytes().to_vec(), i)).collect();
        let kept = vec![Vec::new(); terms.len()];
        Builder { keys, terms, kept, ids: Vec::new(), n: n.max(1), avgdl: avgdl.max(1.0), params }
    }

    /// Weigh one document's postings of common keys; `cmp` orders ids as the lists do.
    pub fn add(&mut self, id: String, doc: &TsVector, cmp: &dyn Fn(&str, &str) -> Ordering) {
        let number = self.ids.len() as u32;
        self.ids.push(id);
        let mut used = false;
        let rel = f64::from(doc.surface_length()) / self.avgdl;
        let (k1, b) = (self.params.k1, self.params.b);
        for i in 0..doc.len() {
            let Some((lexeme, npos)) = doc.entry_tf(i) else { continue };
            let Some(&key) = self.keys.get(lexeme) else { continue };
            let tf = f64::from(npos);
            let w = tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * rel));
            self.kept[key].push((w, number));
            used = true;
            if self.kept[key].len() >= 2 * self.n {
                self.prune(key, cmp);
            }
        }
        if !used {
            self.ids.pop();
        }
    }

    fn order(&self, a: &(f64, u32), b: &(f64, u32), cmp: &dyn Fn(&str, &str) -> Ordering) -> Ordering {
        b.0.partial_cmp(&a.0)
            .unwrap_or(Ordering::Equal)
            .then_with(|| cmp(&self.ids[a.1 as usize], &self.ids[b.1 as usize]))
    }

    fn prune(&mut self, key: usize, cmp: &dyn Fn(&str, &str) -> Ordering) {
        let mut list = std::mem::take(&mut self.kept[key]);
        if list.len() > self.n {
            list.select_nth_unstable_by(self.n - 1, |a, b| self.order(a, b, cmp));
            list.truncate(self.n);
        }
        self.kept[key] = list;
    }

    /// Every key's list, in key order given.
    pub fn finish(mut self, cmp: &dyn Fn(&str, &str) -> Ordering) -> Vec<ChampionList> {
        let mut out = Vec::with_capacity(self.terms.len());
        for key in 0..self.terms.len() {
            self.prune(key, cmp);
            let mut list = std::mem::take(&mut self.kept[key]);
            if list.is_empty() {
                continue;
            }
            list.sort_by(|a, b| self.order(a, b, cmp));
            out.push(ChampionList {
                term: self.terms[key].clone(),
                items: list.iter().map(|&(_, d)| self.ids[d as usize].clone()).collect(),
                impacts: list.iter().map(|&(w, _)| w).collect(),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tsvector::tests::encode;

    fn doc(words: &[(&str, &[(u16, u8)])]) -> Vec<u8> {
        encode(words)
    }

    #[test]
    fn lists_equal_a_full_sort_of_every_posting() {
        // 300 documents over 6 keys, many ties: each list is the first n of all postings sorted
        // by weight, then id
        let params = Bm25Params::default();
        let mut docs = Vec::new();
        let mut rng = 7u64;
        let mut next = || {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (rng >> 33) as usize
        };
        let keys = ["a", "b", "c", "d", "e", "f"];
        for i in 0..300 {
            let mut words: Vec<(&str, Vec<(u16, u8)>)> = Vec::new();
            for k in keys {
                if next() % 3 == 0 {
                    let tf = 1 + next() % 3;
                    words.push((k, (0..tf).map(|p| ((p + 1) as u16, 0u8)).collect()));
                }
            }
            let filler = 1 + next() % 5;
            words.push(("zz", (0..filler).map(|p| ((p + 10) as u16, 0u8)).collect()));
            let refs: Vec<(&str, &[(u16, u8)])> = words.iter().map(|(w, p)| (*w, p.as_slice())).collect();
            docs.push((format!("{:03}", (i * 37) % 300), doc(&refs)));
        }
        let cmp = |a: &str, b: &str| a.cmp(b);
        for n in [1, 5, 20, 1000] {
            let mut builder = Builder::new(keys.iter().map(|k| k.to_string()), n, 3.5, params);
            let mut all: HashMap<&str, Vec<(f64, String)>> = HashMap::new();
            for (id, bytes) in &docs {
                let v = TsVector::parse(bytes).unwrap();
                let rel = f64::from(v.surface_length()) / 3.5;
                for k in keys {
                    if let Some(e) = v.find(k.as_bytes()) {
                        let tf = f64::from(e.npos);
                        let w = tf * (params.k1 + 1.0) / (tf + params.k1 * (1.0 - params.b + params.b * rel));
                        all.entry(k).or_default().push((w, id.clone()));
                    }
                }
                builder.add(id.clone(), &v, &cmp);
            }
            let lists = builder.finish(&cmp);
            for list in &lists {
                let mut expected = all[list.term.as_str()].clone();
                expected.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then_with(|| a.1.cmp(&b.1)));
                expected.truncate(n);
                assert_eq!(list.items, expected.iter().map(|e| e.1.clone()).collect::<Vec<_>>(), "{} n={n}", list.term);
                assert_eq!(list.impacts, expected.iter().map(|e| e.0).collect::<Vec<_>>());
            }
            assert_eq!(lists.len(), keys.len());
        }
    }
}
